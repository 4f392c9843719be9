/*-------------------------------------------------------------------------
 *
 * window_ring.c
 *	  The ring of filters over time: refresh (rotation), resizing by hand
 *	  or by the AIMD controller, and the maintenance pass that runs both.
 *
 * Each of these changes the metapage only (plus, when the ring grows past
 * its slots, the new slot's blocks appended at the end), under the
 * metapage's exclusive lock, in one WAL record: operations hold the
 * metapage share-locked, so they see the ring before or after a change,
 * never during it.  A recycled filter's blocks are not rewritten: their
 * stamp no longer matches the ring, so they read as empty until the first
 * drain into them clears them (window.h, "Lazy clearing").
 *
 * The AIMD settings are not read here: FbfWindowMaintain takes them from
 * its caller as an FbfAimdPolicy.  The memory cap, fbf.max_filter_size, is
 * the window's own setting.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/xlog.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "core/cwin_window.h"
#include "window/window_int.h"

static int	split_batch(void);

/*
 * Rotate once, as fbf_refresh_action says at `now`: the recycled filter
 * (the oldest live one, or the first unborn one) becomes the empty future,
 * born at `born`; its blocks go stale with the new epoch.  Returns false
 * if postponed.  A refresh passes born = now; a load, the time the
 * snapshot's future stopped taking operations (window_load.c).
 */
bool
FbfWindowRotate(FbfWindowMetaPageData *meta, int64 now, int64 born)
{
	int			from;

	switch (fbf_refresh_action(meta->nlive, meta->nfilters,
							   meta->born_at[meta->nlive - 2], now,
							   meta->retention))
	{
		case FBF_REFRESH_RECYCLE_OLDEST:
			from = meta->nlive - 1;
			break;
		case FBF_REFRESH_USE_UNBORN:
			from = meta->nlive;
			meta->nlive++;
			break;
		default:
			return false;
	}
	{
		uint8		slot = meta->ring[from];

		memmove(&meta->ring[1], &meta->ring[0], from);
		memmove(&meta->born_at[1], &meta->born_at[0], sizeof(int64) * from);
		meta->ring[0] = slot;
		meta->born_at[0] = born;
	}
	meta->epoch++;
	if (FbfWindowIsCuckoo(meta))
		FbfCuckooRotate(meta);
	return true;
}

/*
 * Refresh the window as often as its period says is due (a late worker may
 * leave several due), never dropping a filter that could still hold an
 * operation younger than the retention.  Only the metapage changes: the
 * recycled filter's lanes become stale and read as empty.  Also brings a
 * window written by 1.0 up to date (FbfLegacyUpgrade), takes a window
 * written before keys a step towards its own (FbfWindowKeyStep), and
 * anchors the window's clock on this boot (window_clock.c).  Returns the
 * number of refreshes done.
 */
int
FbfWindowRefresh(Relation index)
{
	FbfWindowMetaPageData meta;
	Buffer		metabuf;
	int64		now;
	int64		born;
	bool		changed = false;
	bool		postponed = false;
	int			done = 0;

	if (RecoveryInProgress())
		return 0;

	/*
	 * The new future's birth time must not be earlier than the moment it
	 * becomes future, which is now that we hold the metapage: operations
	 * were drained into the old future until we got the lock.
	 */
	metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_EXCLUSIVE, &meta);
	now = FbfWindowNow(&meta);
	if (meta.version != FBF_STORAGE_VERSION)
		FbfLegacyUpgrade(index, metabuf, &meta, now);
	if (FbfWindowClockStale(&meta))
		changed = true;
	/* a window without a key of its own gets one (window_key.c) */
	if (FbfWindowKeyStep(index, &meta, now, NULL))
		changed = true;
	born = meta.born_at[0];

	/*
	 * Each refresh records `now` as the new future's birth, never a time on
	 * the period's grid: drop safety relies on birth times not being earlier
	 * than the refresh that made the filter current.
	 */
	while (now - born >= meta.period * (done + 1) && done < meta.nfilters)
	{
		if (!FbfWindowRotate(&meta, now, now))
		{
			postponed = true;
			break;
		}
		done++;
	}
	if (done > 0 || changed)
		FbfWindowLogMeta(index, metabuf, &meta, now);
	UnlockReleaseBuffer(metabuf);
	if (postponed)
		elog(DEBUG1, "fbf: refresh of \"%s\" postponed: the oldest filter still covers the retention",
			 RelationGetRelationName(index));
	return done;
}

/*
 * The bytes of the window's filters, for the controller: the lanes of its
 * partition pages, which are there whether filters use them or not, so
 * that a ring of any size within them fits (fbf.max_filter_size bounds
 * the pages, window_split.c).
 */
static uint64
window_max_bytes(const FbfWindowMetaPageData *meta)
{
	return fbf_size(meta->nbits, FBF_SLICE_LANES, meta->nparts);
}

/*
 * The AIMD configuration for a counter: its metapage, the caller's policy
 * and the memory cap.
 */
static void
aimd_config(const FbfWindowMetaPageData *meta, const FbfAimdPolicy *policy,
			FbfAimdConfig *cfg)
{
	cfg->target_fpp = meta->target_fpp;
	cfg->increase_at = policy->increase_at;
	cfg->decrease_at = policy->decrease_at;
	cfg->retention = meta->retention;
	cfg->period_step = policy->period_step;
	cfg->period_min = policy->period_min;

	/*
	 * The planned shape is the floor of capacity: shrinking after a burst
	 * returns towards it, never below it, so an idle spell does not leave
	 * a counter unable to take its expected rate (growing back is slow:
	 * the period shortens one step per resize).
	 */
	cfg->period_max = Max(meta->base_period, cfg->period_min);
	cfg->min_filters = FBF_MIN_FILTERS;
	cfg->max_filters = FBF_SLICE_LANES;
	cfg->nbits = meta->nbits;
	cfg->nparts = meta->nparts;
	cfg->nhashes = meta->nhashes;
	cfg->max_bytes = window_max_bytes(meta);
}

/*
 * Grow or shrink to d.nfilters filters with period d.period.  Growing puts
 * unborn filters at the old end, in free lanes;
 * shrinking removes filters from the old end, unborn ones first, and live
 * ones only as far as that forgets no operation younger than the
 * retention (operations that live only in dropped filters were applied
 * before the oldest kept filter became future).  What cannot be removed
 * yet stays, with the new period applied (the window only gets longer); a
 * later pass removes it.  Returns the number of filters after the change,
 * or -1 if nothing changed.
 */
static int
apply_resize(Relation index, const FbfAimdDecision *d)
{
	int			nfilters = d->nfilters;
	FbfWindowMetaPageData meta;
	Buffer		metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_EXCLUSIVE, &meta);
	int64		now = FbfWindowNow(&meta);

	if (d->nfilters > meta.nfilters)
	{
		bool		used[FBF_MAX_FILTERS] = {0};
		int			slot = 0;
		int			i;

		for (i = 0; i < meta.nfilters; i++)
			used[meta.ring[i]] = true;
		for (i = meta.nfilters; i < d->nfilters; i++)
		{
			while (used[slot])
				slot++;
			Assert(slot < FBF_SLICE_LANES);
			/* an unborn filter's lane is never current until it is future */
			if (slot >= meta.nslots)
				meta.nslots = (uint16) (slot + 1);
			used[slot] = true;
			meta.ring[i] = (uint8) slot;
			meta.born_at[i] = 0;
		}
	}
	else if (d->nfilters < meta.nfilters)
	{
		int			keep_live = meta.nlive;

		if (d->nfilters < meta.nlive)
		{
			keep_live = d->nfilters;
			while (keep_live < meta.nlive &&
				   now - meta.born_at[keep_live - 1] <= meta.retention)
				keep_live++;
		}
		nfilters = Max(d->nfilters, keep_live);
		if (nfilters == meta.nfilters && d->period == meta.period)
		{
			UnlockReleaseBuffer(metabuf);
			return -1;
		}
		meta.nlive = (uint16) keep_live;
	}
	if (nfilters != meta.nfilters)
		meta.resizes++;
	meta.nfilters = (uint16) nfilters;
	meta.period = d->period;

	FbfWindowLogMeta(index, metabuf, &meta, now);
	UnlockReleaseBuffer(metabuf);
	return nfilters;
}

/*
 * Resize to `nfilters` filters now, keeping the period, as an
 * administrator's fbf_counter_resize() asks: growing within the caps,
 * shrinking only to a ring that still covers the retention, and dropping
 * live filters only as far as that is safe.  Returns the number of filters
 * afterwards.
 */
int
FbfWindowResize(Relation index, int nfilters)
{
	FbfWindowMetaPageData meta;
	FbfAimdDecision d;
	int			result;

	FbfWindowReadMeta(index, &meta);
	if (meta.version != FBF_STORAGE_VERSION)
	{
		FbfWindowRefresh(index);
		FbfWindowReadMeta(index, &meta);
	}
	if (FbfWindowIsCuckoo(&meta))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot resize the cuckoo window \"%s\"",
						RelationGetRelationName(index)),
				 errdetail("A cuckoo window keeps 16 live epochs, the most its 4-bit tags tell apart, and grows by splitting its partitions.")));
	if (nfilters < FBF_MIN_FILTERS || nfilters > FBF_SLICE_LANES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a counter filter must have between %d and %d filters",
						FBF_MIN_FILTERS, FBF_SLICE_LANES)));
	if ((int64) (nfilters - 1) * meta.period < meta.retention)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%d filters refreshed every %.3f s do not cover the retention of %.3f s",
						nfilters, meta.period / 1e6, meta.retention / 1e6)));
	d.action = nfilters > meta.nfilters ? FBF_AIMD_GROW : FBF_AIMD_SHRINK;
	d.nfilters = nfilters;
	d.period = meta.period;
	d.capped = false;
	d.reason = "requested";
	result = apply_resize(index, &d);
	return result < 0 ? meta.nfilters : result;
}

/*
 * Set or clear the "capped" flag; while it is set, warn when it becomes
 * set and again every FBF_CAPPED_WARN_INTERVAL.
 */
void
FbfWindowNoteCapped(Relation index, bool capped, const FbfAimdPolicy *policy)
{
	FbfWindowMetaPageData meta;
	Buffer		metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_EXCLUSIVE, &meta);
	bool		was = (meta.flags & FBF_META_CAPPED) != 0;
	int64		now = FbfWindowNow(&meta);
	bool		warn = capped &&
		(!was || now - meta.capped_warned_at >= FBF_CAPPED_WARN_INTERVAL);

	if (was != capped || warn)
	{
		if (capped)
			meta.flags |= FBF_META_CAPPED;
		else
			meta.flags &= ~FBF_META_CAPPED;
		if (warn)
			meta.capped_warned_at = now;
		FbfWindowLogMeta(index, metabuf, &meta, now);
	}
	UnlockReleaseBuffer(metabuf);
	if (warn)
		ereport(WARNING,
				(errmsg("fbf: the filter \"%s\" is at its cap and cannot grow",
						RelationGetRelationName(index)),
				 errdetail("Its estimated false-positive rate has reached fbf.aimd_increase_at (%g) times its target; %s.",
						   policy->increase_at,
						   FbfWindowGetOptions(index)->at_capacity == FBF_AT_CAPACITY_REFUSE ?
						   "new operations are refused until it recovers" :
						   "new operations are dismissed at that rate"),
				 errhint("Raise fbf.max_filter_size, or accept more false positives.")));
}

/*
 * Operations per microsecond, for the controllers' look-ahead: the higher
 * of the last two complete periods' rate (so a ramp is seen within two
 * periods, while a burst in one period, which the window's other periods
 * dilute, is not taken for the new rate) and the average over the complete
 * periods of the live window (so one quiet period does not look like the
 * load went away).  Filter i holds its own epoch (as future) and the next
 * one (as present), so epoch i's count is distinct_i - epoch_(i-1),
 * starting from the future filter, which holds only its own.  A pass that
 * refreshes several times at once gives the filters it recycles one birth
 * time: such epochs last no time and hold nothing, and are skipped.
 * Filters born before any refresh (birth time 0 or long ago) have no period
 * to measure.  -1 if unknown.
 */
static double
arrival_rate(const FbfWindowMetaPageData *meta, const uint64 *distinct)
{
	double		epoch = 0;
	double		total = 0;
	double		recent = -1;
	int			timed = 1;		/* filters 0..timed-1 have birth times */
	int			measured = 0;	/* epochs of positive length seen */
	int64		window;
	int			i;

	while (timed < meta->nlive && meta->born_at[timed] > 0)
		timed++;
	if (timed < 2)
		return -1;
	window = meta->born_at[0] - meta->born_at[timed - 1];
	if (window <= 0)
		return -1;
	for (i = 0; i < timed; i++)
	{
		epoch = Max((double) distinct[i] - epoch, 0);
		if (i == 0)
			continue;
		total += epoch;
		if (measured < 2 && meta->born_at[i - 1] > meta->born_at[i])
		{
			double		r = epoch / (meta->born_at[i - 1] - meta->born_at[i]);

			/* a trend of two periods, not one burst */
			recent = measured == 0 ? r : Min(recent, r);
			measured++;
		}
	}
	return Max(recent, total / window);
}

/*
 * The rest of a maintenance pass over a cuckoo window: growth by load
 * alone, the cuckoo analogue of AIMD.  When the fullest block's live load
 * passes CWIN_SPLIT_LOAD, split (by 2, or more for the arrival rate:
 * FbfCuckooSplitFactor), logged as Bloom windows' splits are.  Neither
 * the ring nor the period changes (16 live epochs, the tags' limit), and
 * nothing merges.
 */
static FbfAimdDecision
maintain_cuckoo(Relation index, const FbfWindowMetaPageData *meta,
				uint64 *counts, const FbfAimdPolicy *policy)
{
	FbfAimdDecision d;
	uint64		distinct[FBF_MAX_FILTERS];
	double		max_load;
	double		rate;
	double		fpp;
	bool		capped = false;

	FbfCuckooCounts(index, meta, counts, distinct, &max_load);
	fpp = FbfCuckooEstimateFpp(meta, counts);
	rate = arrival_rate(meta, distinct);
	d.action = FBF_AIMD_HOLD;
	d.nfilters = meta->nfilters;
	d.period = meta->period;
	d.reason = "load";
	if (max_load > CWIN_SPLIT_LOAD)
	{
		uint32		factor = FbfCuckooSplitFactor(meta, rate, &capped);

		if (factor > 1 && FbfWindowSplitStart(index, factor, 0))
		{
			FbfWindowSplitStep(index, split_batch());
			ereport(LOG,
					(errmsg("fbf: grew \"%s\" from %u to %u partitions (fullest partition %.0f%% full, estimated false-positive rate %.3g, target %.3g)",
							RelationGetRelationName(index), meta->nparts,
							meta->nparts * factor, 100 * max_load, fpp,
							meta->target_fpp)));
			d.action = FBF_AIMD_GROW;
			d.reason = "split";
		}
	}
	d.capped = capped;
	if (d.capped || (meta->flags & FBF_META_CAPPED) != 0)
		FbfWindowNoteCapped(index, d.capped, policy);
	return d;
}

/* partitions one pass may split or merge */
static int
split_batch(void)
{
	return fbf_split_batch > 0 ? fbf_split_batch : INT_MAX;
}

/*
 * One maintenance pass over a counter's filter, as the background worker
 * runs it every fbf.naptime: refresh if due, drain resolved operations,
 * then one AIMD step under `policy`.  The caller holds RowExclusiveLock on
 * the table.
 */
FbfAimdDecision
FbfWindowMaintain(Relation index, const FbfAimdPolicy *policy)
{
	FbfWindowMetaPageData meta;
	FbfAimdConfig cfg;
	FbfAimdDecision d;
	uint64	   *counts;
	uint64		distinct[FBF_MAX_FILTERS];
	double		fpp;
	double		rate;
	uint32		factor;
	bool		capped_bits;

	FbfWindowRefresh(index);
	FbfWindowSyncOptions(index);
	FbfWindowDrain(index, true);
	if (FbfWindowTakeGrowthRequest())
	{
		/*
		 * Entries wait for more bits: grow, and drain into the new pages.
		 * If a split is under way (a backend's), finish it first; they go
		 * on waiting for what it leaves short.  Only if the window will
		 * not grow (its cap, or the rate does not call for it) do they
		 * wait no longer.
		 */
		FbfGrowth	growth = FbfWindowGrow(index, policy);

		if (growth == FBF_GROWTH_LATER)
			FbfWindowSplitStep(index, split_batch());
		FbfWindowDrain(index, growth != FBF_GROWTH_NONE);
		(void) FbfWindowTakeGrowthRequest();
	}

	/* a split under way (an earlier pass's, cut short) is continued first */
	FbfWindowSplitStep(index, split_batch());
	FbfWindowReadMeta(index, &meta);
	if (meta.split_start != InvalidBlockNumber)
	{
		d.action = FBF_AIMD_HOLD;
		d.nfilters = meta.nfilters;
		d.period = meta.period;
		d.capped = false;
		d.reason = "splitting";
		return d;
	}

	counts = palloc0(sizeof(uint64) * meta.nlive * FbfWindowViewParts(&meta));
	if (FbfWindowIsCuckoo(&meta))
	{
		d = maintain_cuckoo(index, &meta, counts, policy);
		pfree(counts);
		return d;
	}
	FbfWindowBlockCounts(index, &meta, counts, distinct);
	fpp = FbfWindowEstimateFpp(&meta, counts);
	rate = arrival_rate(&meta, distinct);

	/* more operations than the bits can take: split (window_split.c) */
	factor = FbfWindowSplitFactor(&meta, rate, policy->increase_at,
								  &capped_bits);
	if (factor > 1 && FbfWindowSplitStart(index, factor, 0))
	{
		FbfWindowSplitStep(index, split_batch());
		ereport(LOG,
				(errmsg("fbf: grew \"%s\" from %u to %u partitions (estimated false-positive rate %.3g, target %.3g, %.0f operations per second)",
						RelationGetRelationName(index), meta.nparts,
						meta.nparts * factor, fpp, meta.target_fpp,
						rate * USECS_PER_SEC)));
		d.action = FBF_AIMD_GROW;
		d.nfilters = meta.nfilters;
		d.period = meta.period;
		d.capped = capped_bits;
		d.reason = "split";
		if (d.capped || (meta.flags & FBF_META_CAPPED) != 0)
			FbfWindowNoteCapped(index, d.capped, policy);
		pfree(counts);
		return d;
	}

	/* fewer operations than the bits are for: merge back towards the plan */
	if (factor <= 1 &&
		FbfWindowMergeFactor(&meta, counts, rate, policy->decrease_at) > 1 &&
		FbfWindowSplitStart(index, 0, 2))
	{
		FbfWindowSplitStep(index, split_batch());
		ereport(LOG,
				(errmsg("fbf: shrank \"%s\" from %u to %u partitions (estimated false-positive rate %.3g, target %.3g, %.0f operations per second)",
						RelationGetRelationName(index), meta.nparts,
						meta.nparts / 2, fpp, meta.target_fpp,
						rate * USECS_PER_SEC)));
	}
	pfree(counts);

	aimd_config(&meta, policy, &cfg);
	d = fbf_aimd_decide(&cfg, meta.nfilters, meta.period, fpp, rate);
	if (d.action != FBF_AIMD_HOLD)
	{
		int			nfilters = apply_resize(index, &d);

		if (nfilters < 0)
			d.action = FBF_AIMD_HOLD;
		else
			ereport(LOG,
					(errmsg("fbf: %s \"%s\" from %d to %d filters, refresh period %.3f s to %.3f s (estimated false-positive rate %.3g, target %.3g)",
							d.action == FBF_AIMD_GROW ? "grew" :
							nfilters < meta.nfilters ? "shrank" : "is shrinking",
							RelationGetRelationName(index), meta.nfilters,
							nfilters, meta.period / 1e6, d.period / 1e6,
							fpp, meta.target_fpp)));
	}

	/*
	 * Capped: only when the bits cannot grow enough.  (AIMD's own cap, on
	 * the filters, is what splitting is for.)  Without a rate to judge by,
	 * a capped window stays capped while its estimate is over the
	 * threshold.
	 */
	if (rate >= 0)
		d.capped = capped_bits;
	else
		d.capped = (meta.flags & FBF_META_CAPPED) != 0 &&
			fpp >= policy->increase_at * meta.target_fpp;
	if (d.capped || (meta.flags & FBF_META_CAPPED) != 0)
		FbfWindowNoteCapped(index, d.capped, policy);
	return d;
}
