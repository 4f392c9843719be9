/*-------------------------------------------------------------------------
 *
 * window_maintain.c
 *	  Maintenance of a whole window: draining every chain
 *	  (FbfWindowDrain), asking whether operations of open transactions
 *	  wait on them (FbfWindowInFlight), and the maintenance pass the worker and
 *	  fbf_counter_maintain run (FbfWindowMaintain): refresh, reloptions,
 *	  drains, a split under way continued, then the controllers: split
 *	  for the arrival rate, merge when it fell, one AIMD step, each as the
 *	  window's format declares it can (window_format.h).
 *
 * The policy comes from above: the AIMD settings as the caller's
 * FbfAimdPolicy, passed down to the split controller (the format's
 * split_factor) and to the AIMD step (window_ring.c).  Locks: each step
 * takes its own (src/window/README.md, "Lock definitions"); none is held
 * from one step to the next.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/xlog.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "window/window_format.h"
#include "window/window_int.h"

/*
 * Drain every chain's resolved entries; returns entries removed.  A window
 * of storage version 1 is upgraded first (which drains it).  Entries that
 * would saturate a page wait (FbfChainDrain, may_defer), and *grow (if not
 * NULL) is set where they wait for the window to grow (FbfStored).  VACUUM
 * and rebuilds, which drain so that no entry outlives the commit log, let
 * them wait too: an entry that waits was judged committed, and stays so
 * for a truncated commit log (window_rebuild.c, drain_before_vacuum).
 * Locks: the metapage share for the whole pass, each chain exclusive in
 * turn.
 */
int
FbfWindowDrain(Relation index, bool *grow)
{
	FbfWindowMetaPageData meta;
	Buffer		metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_SHARE, &meta);
	int			removed = 0;
	FbfStored	put_off = FBF_STORED_ALL;
	uint32		c;

	if (meta.version != FBF_STORAGE_VERSION)
	{
		UnlockReleaseBuffer(metabuf);
		if (RecoveryInProgress())
			return 0;
		FbfWindowRefresh(index, true);
		metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_SHARE, &meta);
	}
	for (c = 0; c < meta.nchains; c++)
	{
		FbfPendingChain chain;

		FbfChainLock(index, &meta, c, &chain);
		removed += FbfChainDrain(index, &meta, &chain, true, &put_off);
		FbfChainRelease(&chain);
		FbfWindowCheckCancel(metabuf);
	}
	UnlockReleaseBuffer(metabuf);
	if (grow != NULL && put_off == FBF_STORED_GROW)
		*grow = true;
	return removed;
}

/*
 * Does an operation of a transaction still in progress wait on one of the
 * window's chains (FbfChainInFlight)?  No drain can take it before the
 * transaction ends, and nothing tells the worker when it does: the
 * maintenance pass asks before it drains (counter_maintain.c), so that an
 * entry whose transaction ends after this look is either drained by that
 * pass or keeps the worker coming back (worker.c says when).  Entries that wait
 * for more bits are committed, and do not count.  False for a window of
 * storage version 1, which the pass upgrades first.  Locks: the metapage
 * share, each chain share in turn.
 */
bool
FbfWindowInFlight(Relation index)
{
	FbfWindowMetaPageData meta;
	Buffer		metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_SHARE, &meta);
	bool		in_flight = false;
	uint32		c;

	if (meta.version == FBF_STORAGE_VERSION)
	{
		for (c = 0; c < meta.nchains && !in_flight; c++)
		{
			FbfPendingChain chain;

			FbfChainLockMode(index, &meta, c, BUFFER_LOCK_SHARE, &chain);
			in_flight = FbfChainInFlight(&meta, &chain);
			FbfChainRelease(&chain);
			FbfWindowCheckCancel(metabuf);
		}
	}
	UnlockReleaseBuffer(metabuf);
	return in_flight;
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

/* partitions one pass may split or merge */
static int
split_batch(void)
{
	return fbf_split_batch > 0 ? fbf_split_batch : INT_MAX;
}

/*
 * One maintenance pass over a counter's filter, as the background worker
 * runs it every fbf.naptime: refresh if due, drain resolved operations,
 * then the controllers under `policy`.  A split is by the arrival rate
 * (FbfFilterRoutine.split_factor), once the fullest page's live load
 * passes the format's split_load if it declares one (a cuckoo window's
 * growth by load); a merge, if the format can_merge, when the rate fell;
 * else one AIMD step (ring and period) if it can_resize.  The caller holds
 * RowExclusiveLock on the table.
 */
FbfAimdDecision
FbfWindowMaintain(Relation index, const FbfAimdPolicy *policy)
{
	FbfWindowMetaPageData meta;
	const FbfFilterRoutine *routine;
	FbfAimdDecision d;
	uint64	   *counts;
	uint64		distinct[FBF_MAX_FILTERS];
	double		fpp;
	double		rate;
	double		max_load;
	uint32		factor = 1;
	bool		capped_bits = false;
	bool		grow = false;

	FbfWindowRefresh(index, true);
	FbfWindowSyncOptions(index);
	FbfWindowDrain(index, &grow);
	if (grow)
	{
		/*
		 * Entries wait for more bits: grow, if the rate calls for it (a
		 * split under way, a backend's, is finished first), and drain
		 * again.  Those the filters of this period still cannot take (a
		 * split copies their bits, and their counts, into every page it
		 * makes) go on waiting for the next refresh's empty future
		 * filter: poured in now, they would stay until those filters age
		 * out, checked alone once the oldest (FbfChainDrain says how long
		 * they may wait).
		 */
		if (FbfWindowGrow(index, policy) == FBF_GROWTH_LATER)
			FbfWindowSplitStep(index, split_batch());
		grow = false;
		FbfWindowDrain(index, &grow);
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

	routine = FbfFilterRoutineOf(&meta);
	counts = palloc0(sizeof(uint64) * meta.nlive * FbfWindowViewParts(&meta));
	FbfWindowCounts(index, &meta, counts, distinct, &max_load);
	fpp = FbfWindowEstimateFpp(&meta, counts);
	rate = arrival_rate(&meta, distinct);

	/* more operations than the bits can take: split (window_split.c) */
	if (routine->split_load <= 0 || max_load > routine->split_load)
		factor = routine->split_factor(&meta, rate, policy->increase_at,
									   &capped_bits);
	if (factor > 1 && FbfWindowSplitStart(index, meta.nparts, factor, 0))
	{
		FbfWindowSplitStep(index, split_batch());
		if (routine->split_load > 0)
			ereport(LOG,
					(errmsg("fbf: grew \"%s\" from %u to %u partitions (fullest partition %.0f%% full, estimated false-positive rate %.3g, target %.3g)",
							RelationGetRelationName(index), meta.nparts,
							meta.nparts * factor, 100 * max_load, fpp,
							meta.target_fpp)));
		else
			ereport(LOG,
					(errmsg("fbf: grew \"%s\" from %u to %u partitions (estimated false-positive rate %.3g, target %.3g, %.0f operations per second)",
							RelationGetRelationName(index), meta.nparts,
							meta.nparts * factor, fpp, meta.target_fpp,
							rate * USECS_PER_SEC)));
		d.action = FBF_AIMD_GROW;
		d.nfilters = meta.nfilters;
		d.period = meta.period;
		d.capped = FbfWindowCapped(&meta, fpp, policy);
		d.reason = "split";
		if (d.capped || (meta.flags & FBF_META_CAPPED) != 0)
			FbfWindowNoteCapped(index, d.capped, policy);
		pfree(counts);
		return d;
	}

	/* a fixed ring (a cuckoo window's): growth by load alone */
	if (!routine->can_resize)
	{
		pfree(counts);
		d.action = FBF_AIMD_HOLD;
		d.nfilters = meta.nfilters;
		d.period = meta.period;
		d.reason = "load";
		d.capped = FbfWindowCapped(&meta, fpp, policy);
		if (d.capped || (meta.flags & FBF_META_CAPPED) != 0)
			FbfWindowNoteCapped(index, d.capped, policy);
		return d;
	}

	/*
	 * Fewer operations than the bits are for: merge back towards the plan,
	 * unless entries still wait on the chains for bits (`grow`): the rate
	 * measures the filters alone, and a merge would halve the room those
	 * entries wait for, only for the next pass to split for them again.
	 */
	if (factor <= 1 && !grow && routine->can_merge &&
		routine->merge_factor(&meta, counts, rate, policy->decrease_at) > 1 &&
		FbfWindowSplitStart(index, meta.nparts, 0, 2))
	{
		FbfWindowSplitStep(index, split_batch());
		ereport(LOG,
				(errmsg("fbf: shrank \"%s\" from %u to %u partitions (estimated false-positive rate %.3g, target %.3g, %.0f operations per second)",
						RelationGetRelationName(index), meta.nparts,
						meta.nparts / 2, fpp, meta.target_fpp,
						rate * USECS_PER_SEC)));
	}
	pfree(counts);

	d = FbfWindowAimdStep(index, &meta, policy, fpp, rate);

	d.capped = FbfWindowCapped(&meta, fpp, policy);
	if (d.capped || (meta.flags & FBF_META_CAPPED) != 0)
		FbfWindowNoteCapped(index, d.capped, policy);
	return d;
}
