/*-------------------------------------------------------------------------
 *
 * window_ring.c
 *	  The ring of filters over time: refresh (rotation), resizing by hand
 *	  or by one AIMD step (FbfWindowAimdStep, which the maintenance pass of
 *	  window_maintain.c runs), and the capped flag.
 *
 * Each of these changes the metapage only (plus, when the ring grows past
 * its slots, the new slot's blocks appended at the end, and, when a
 * refresh finds the window without the run of stream pages its options
 * ask for, that run appended), under the metapage's exclusive lock, in
 * one WAL record: operations hold the metapage share-locked, so they see
 * the ring before or after a change, never during it.  A recycled filter's blocks are not rewritten: their
 * stamp no longer matches the ring, so they read as empty until the first
 * drain into them clears them (window_page.h, "Lazy clearing").  Lock
 * order: src/window/README.md, "Lock definitions".
 *
 * The AIMD settings are not read here: FbfWindowMaintain takes them from
 * its caller as an FbfAimdPolicy, and passes it down.  The memory cap, fbf.max_filter_size, is
 * the window's own setting.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/xlog.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/rel.h"

#include "window/window_format.h"
#include "window/window_int.h"

/*
 * Give the window the run of stream pages its options ask for
 * (window_stream.c), if its run is another size: a window written before
 * streams has none, and max_streams may have changed.  The new run knows
 * streams only from `now`, since what the window remembers was never
 * recorded in it; an old run is left unused.  A run of the right size is
 * checked to lie within the relation, and operations already in flight
 * are marked (stream_xid).  Returns true if *meta changed;
 * the caller holds the metapage exclusively (metabuf) and logs it.
 */
static bool
take_streams(Relation index, Buffer metabuf, FbfWindowMetaPageData *meta,
			 int64 now)
{
	uint32		wanted = (uint32) FbfStreamsWanted(index, meta->stream_pages);
	BlockNumber next;

	if (meta->stream_pages == wanted)
	{
		/* the run the metapage names must be pages of the relation */
		if (wanted > 0 &&
			meta->stream_start + wanted > RelationGetNumberOfBlocks(index))
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("index \"%s\" has an invalid fbf metapage",
							RelationGetRelationName(index)),
					 errdetail("Its stream pages end past the end of the relation.")));
		return false;
	}
	meta->stream_start = 0;
	meta->stream_pages = 0;
	if (wanted > 0)
	{
		/* no one else may extend the relation in between: the pages are a run */
		LockRelationForExtension(index, ExclusiveLock);
		next = RelationGetNumberOfBlocks(index);
		meta->stream_start = FbfStreamsCreate(index, metabuf, MAIN_FORKNUM,
											  &next, wanted, now);
		UnlockRelationForExtension(index, ExclusiveLock);
		meta->stream_pages = wanted;

		/*
		 * Operations in flight now were recorded without their annexes: a
		 * drain that meets one resets the streams (window_pending.c), as
		 * they cannot learn it.  Operations from here on are recorded
		 * with theirs (FbfWindowApply reads the metapage under its lock).
		 */
		meta->stream_xid = U64FromFullTransactionId(ReadNextFullTransactionId());
	}
	return true;
}

/*
 * A refresh is due at window time `now`: it would rotate the ring (not
 * postponed: then there is nothing to count the chains for).
 */
static bool
refresh_due(const FbfWindowMetaPageData *meta, int64 now)
{
	return meta->version == FBF_STORAGE_VERSION &&
		FbfWindowRotationDue(meta, now);
}

/*
 * The operations on the window's chains into *pending, if a refresh is
 * still due; else false.  The metapage share-locked while the chains are
 * read (each share in turn).
 */
static bool
pending_if_due(Relation index, int64 *pending)
{
	FbfWindowMetaPageData meta;
	Buffer		metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_SHARE, &meta);
	bool		due = refresh_due(&meta, FbfWindowNow(&meta));

	if (due)
		*pending = FbfWindowPendingCount(index, &meta);
	UnlockReleaseBuffer(metabuf);
	return due;
}

/*
 * Refresh the window as often as its period says is due (a late worker may
 * leave several due), never dropping a filter that could still hold an
 * operation younger than the retention.  Only the metapage changes: the
 * recycled filter's lanes become stale and read as empty.  Also brings a
 * window written by 1.0 up to date (FbfLegacyUpgrade), takes a window
 * written before keys a step towards its own (FbfWindowKeyStep), gives it
 * the stream pages its options ask for (take_streams), and anchors the
 * window's clock on this boot (window_clock.c).  Returns the number of
 * refreshes done.  Unless `wait`, returns 0 at once if another backend is
 * doing a refresh that is due (an operation goes on as if it had come a
 * moment earlier; maintenance waits for it).  Upgrading a window written
 * by 1.0 is no refresh that is due: it takes no such lock.
 */
int
FbfWindowRefresh(Relation index, bool wait)
{
	FbfWindowMetaPageData meta;
	Buffer		metabuf;
	int64		now;
	int64		born;
	FbfHashKey	old_key;
	bool		changed = false;
	bool		postponed = false;
	int			done = 0;
	int64		pending = 0;
	bool		refresher = false;
	bool		counted = false;

	if (RecoveryInProgress())
		return 0;

	/*
	 * What waits on the chains as the new future is born: drained into it
	 * later, yet no operation of its time (the growth's measure of the
	 * rate, window_split.c).  Counted before the metapage is taken
	 * exclusively, under its share lock, as any read of the whole window:
	 * the chains are a page each in a steady state but up to
	 * FBF_MAX_PENDING_PAGES under a backlog, too many pages to read while
	 * every operation on the window waits.  So the count is of a moment
	 * before the birth, off by what was drained or added in between.
	 *
	 * Counted once: a refresh that is due is done under the heavyweight
	 * lock of the metapage's block (taken holding no buffer lock: lock
	 * order, src/window/README.md).  A backend that finds it taken leaves
	 * the refresh to its holder if it need not wait, else waits and finds
	 * it done, counting nothing.  One that was not due when looked at but
	 * is by the time it holds the metapage lets it go and starts again, so
	 * that every rotation is counted (but a 1.0 window's upgrade: no count
	 * is kept there).
	 */
	for (;;)
	{
		FbfWindowReadMeta(index, &meta);
		if (refresh_due(&meta, FbfWindowNow(&meta)))
		{
			if (wait)
				LockPage(index, FBF_METAPAGE_BLKNO, ExclusiveLock);
			else if (!ConditionalLockPage(index, FBF_METAPAGE_BLKNO, ExclusiveLock))
				return 0;
			refresher = true;
			counted = pending_if_due(index, &pending);
		}

		/*
		 * The new future's birth time must not be earlier than the moment
		 * it becomes future, which is now that we hold the metapage:
		 * operations were drained into the old future until we got the
		 * lock.
		 */
		metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_EXCLUSIVE, &meta);
		now = FbfWindowNow(&meta);
		if (refresher || !refresh_due(&meta, now))
			break;
		/* due since we looked: done as a due refresh is, counted */
		UnlockReleaseBuffer(metabuf);
	}
	if (meta.version != FBF_STORAGE_VERSION)
		FbfLegacyUpgrade(index, metabuf, &meta, now);
	if (FbfWindowClockStale(&meta))
		changed = true;
	/* a window without a key of its own gets one (window_key.c) */
	old_key = meta.key;
	if (FbfWindowKeyStep(index, &meta, now, NULL))
		changed = true;
	/* the streams it asks for; streams' ids are hashes under the key */
	if (take_streams(index, metabuf, &meta, now))
		changed = true;
	else if (meta.stream_pages > 0 && !FbfWindowKeysEqual(&old_key, &meta.key))
		FbfStreamsReset(index, metabuf, &meta, now);
	born = meta.born_at[0];

	/*
	 * Each refresh records `now` as the new future's birth, never a time on
	 * the period's grid: drop safety relies on birth times not being earlier
	 * than the refresh that made the filter current.
	 */
	while (now - born >= meta.period * (done + 1) && done < meta.nfilters)
	{
		if (!FbfWindowRotate(&meta, now, now, pending))
		{
			postponed = true;
			break;
		}
		done++;
	}
	if (done > 0 || changed)
		FbfWindowLogMeta(index, metabuf, &meta, now);
	UnlockReleaseBuffer(metabuf);
	if (refresher)
		UnlockPage(index, FBF_METAPAGE_BLKNO, ExclusiveLock);

	/* messages a client may be sent, with nothing of the window held */
	if (counted)
		elog(DEBUG1, "fbf: counted " INT64_FORMAT " operations on the chains of \"%s\" for its refresh",
			 pending, RelationGetRelationName(index));
	if (done > 0)
		elog(DEBUG1, "fbf: refreshed \"%s\" (%d rotations); operations waiting at the births of its future and present filters: " INT64_FORMAT ", " INT64_FORMAT,
			 RelationGetRelationName(index), done,
			 meta.pending_at[0], meta.pending_at[1]);
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
		FbfWindowRefresh(index, true);
		FbfWindowReadMeta(index, &meta);
	}
	/* a format whose ring is fixed (window_format.h, can_resize) */
	if (!FbfFilterRoutineOf(&meta)->can_resize)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot resize the %s window \"%s\"",
						FbfFilterRoutineOf(&meta)->name,
						RelationGetRelationName(index)),
				 errdetail("%s", FbfFilterRoutineOf(&meta)->resize_detail)));
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
 * Is the window capped: does it dismiss new operations beyond its target
 * (its estimate `fpp`) with no room left to grow, its partitions at
 * fbf.max_filter_size?  A window that can still grow is not: its drains
 * wait for the growth (FbfChainDrain) rather than saturate its pages.
 * Follows the estimate with hysteresis: set once the estimate reaches the
 * target, cleared once it falls under fbf.aimd_increase_at times the
 * target.  (AIMD's own cap, on the filters, is what splitting is for.)
 */
bool
FbfWindowCapped(const FbfWindowMetaPageData *meta, double fpp,
				const FbfAimdPolicy *policy)
{
	if ((meta->flags & FBF_META_CAPPED) != 0)
		return fpp >= policy->increase_at * meta->target_fpp;
	return fpp >= meta->target_fpp && FbfWindowPartsAtCap(meta) <= meta->nparts;
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
				 errdetail("Its estimated false-positive rate has reached its target; %s.",
						   FbfWindowGetOptions(index)->at_capacity == FBF_AT_CAPACITY_REFUSE ?
						   "new operations are refused until it recovers" :
						   "new operations are dismissed at that rate"),
				 errhint("Raise fbf.max_filter_size, or accept more false positives.")));
}

/*
 * One AIMD step (ring and period) of a maintenance pass, under the
 * caller's policy, for the estimate `fpp` and the arrival rate `rate`
 * (window_maintain.c): decide (fbf_aimd_decide), apply (apply_resize,
 * the metapage exclusively) and log it.  Returns the decision, its action
 * HOLD if nothing changed.
 */
FbfAimdDecision
FbfWindowAimdStep(Relation index, const FbfWindowMetaPageData *meta,
				  const FbfAimdPolicy *policy, double fpp, double rate)
{
	FbfAimdConfig cfg;
	FbfAimdDecision d;

	aimd_config(meta, policy, &cfg);
	d = fbf_aimd_decide(&cfg, meta->nfilters, meta->period, fpp, rate);
	if (d.action != FBF_AIMD_HOLD)
	{
		int			nfilters = apply_resize(index, &d);

		if (nfilters < 0)
			d.action = FBF_AIMD_HOLD;
		else if (nfilters == meta->nfilters && d.action == FBF_AIMD_GROW)
			ereport(LOG,
					(errmsg("fbf: \"%s\" is refreshed every %.3f s instead of %.3f s: its %d filters cannot grow (estimated false-positive rate %.3g, target %.3g)",
							RelationGetRelationName(index), d.period / 1e6,
							meta->period / 1e6, nfilters, fpp, meta->target_fpp)));
		else
			ereport(LOG,
					(errmsg("fbf: %s \"%s\" from %d to %d filters, refresh period %.3f s to %.3f s (estimated false-positive rate %.3g, target %.3g)",
							d.action == FBF_AIMD_GROW ? "grew" :
							nfilters < meta->nfilters ? "shrank" : "is shrinking",
							RelationGetRelationName(index), meta->nfilters,
							nfilters, meta->period / 1e6, d.period / 1e6,
							fpp, meta->target_fpp)));
	}
	return d;
}
