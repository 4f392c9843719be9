/*-------------------------------------------------------------------------
 *
 * window_split.c
 *	  Growth in bits: multiplying a window's partitions when the rate of
 *	  operations outgrows its plan, online, one partition page at a time.
 *
 * AIMD (window_ring.c) can change the number of filters and the period,
 * but more operations per period need more bits.  A split multiplies the
 * partitions by a power of two F (window_page.h, "Splitting"): a partition page
 * is copied whole into F new pages, so every operation it remembers is in
 * whichever of them its hash now leads to, and new operations spread over
 * F times the bits.  The copies' old contents age out with their filters.
 *
 *	split_factor			the controller, the format's
 *							(FbfFilterRoutine): F for the measured rate
 *	merge_factor			and 2 to halve the partitions when it falls
 *							(a format that can_merge)
 *	FbfWindowSplitStart		take F * P pages (or P / F to merge) from
 *							the free run the last split or merge left,
 *							else append them (no metapage lock held while
 *							they are written), and publish them
 *	FbfWindowSplitStep		split (merge) partitions one at a time, each
 *							under the metapage's exclusive lock: operations
 *							wait for at most one partition's pages; the
 *							pages themselves are the format's
 *							(split_page, merge_pages)
 *
 * Shrinking: once the rate has fallen so that half the partitions would
 * do, and ORing each pair of pages together would keep the estimate under
 * the decrease threshold, pairs are merged (never below the plan).  The
 * pages a split or merge leaves are the free run the next one reuses, so
 * a window that grows and shrinks with its load does not keep extending
 * its relation.
 *
 * WAL: the new pages and the copies are full-page images; each step's
 * metapage change (split_next, and at the end the new partitions) is one
 * record after its copies, so recovery resumes where the split stood.
 *
 * Element counts: a copy keeps the page's counts (its bits are as full as
 * the original's, which is what the false-positive estimate needs) and
 * records in `dup` how many of them other pages also count, so that the
 * arrival rate counts each operation once (FbfWindowCounts).
 *
 * Lock order: src/window/README.md, "Lock definitions".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>
#include <math.h>

#include "access/xloginsert.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/rel.h"

#include "window/window_format.h"
#include "window/window_int.h"


/*
 * Begin multiplying the partitions by `split` (or dividing them by
 * `merge`; the other is 0): take the pages for the new partitions from the
 * free run a previous split or merge left, else append them (with no
 * metapage lock held while they are written), and publish them in the
 * metapage.  Returns false if a split or merge is already under way, or
 * the window no longer has the `from` partitions the factor was chosen
 * for (another backend grew it meanwhile: a second split by the same
 * factor would take it past fbf.max_filter_size); pages appended are then
 * left unused.
 */
bool
FbfWindowSplitStart(Relation index, uint32 from, uint32 split, uint32 merge)
{
	FbfWindowMetaPageData meta;
	Buffer		metabuf;
	BlockNumber start = InvalidBlockNumber;
	uint32		nparts;
	uint32		need;

	FbfWindowReadMeta(index, &meta);
	if (meta.version != FBF_STORAGE_VERSION || meta.split_start != InvalidBlockNumber ||
		meta.nparts != from)
		return false;
	/* a format that cannot merge (window_format.h: a cuckoo window) */
	if (merge > 0 && !FbfFilterRoutineOf(&meta)->can_merge)
		return false;
	nparts = meta.nparts;
	need = split > 0 ? nparts * split : nparts / merge;

	if (need > meta.free_len)
	{
		BlockNumber next;

		/* no one else may extend the relation in between: the pages are a run */
		LockRelationForExtension(index, ExclusiveLock);
		next = RelationGetNumberOfBlocks(index);
		start = FbfWindowAppendParts(index, MAIN_FORKNUM, &next, need, &meta);
		UnlockRelationForExtension(index, ExclusiveLock);
	}

	metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_EXCLUSIVE, &meta);
	if (meta.split_start != InvalidBlockNumber || meta.nparts != nparts ||
		(start == InvalidBlockNumber && need > meta.free_len))
	{
		UnlockReleaseBuffer(metabuf);
		return false;
	}
	if (start == InvalidBlockNumber)
	{
		/* every page of the run is written whole before it is read */
		start = meta.free_start;
		meta.free_start += need;
		meta.free_len -= need;
	}
	meta.split_start = start;
	meta.split_factor = split;
	meta.merge_factor = merge;
	meta.split_next = 0;
	FbfWindowLogMeta(index, metabuf, &meta, FbfWindowNow(&meta));
	UnlockReleaseBuffer(metabuf);
	return true;
}

/*
 * Split (or merge) up to `max_parts` partitions of the split or merge under
 * way; returns the number done.  Each holds the metapage exclusively for
 * one partition's pages.
 */
int
FbfWindowSplitStep(Relation index, int max_parts)
{
	int			done = 0;

	while (done < max_parts)
	{
		FbfWindowMetaPageData meta;
		Buffer		metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_EXCLUSIVE, &meta);
		const FbfFilterRoutine *routine = FbfFilterRoutineOf(&meta);
		uint32		q = meta.split_next;
		uint32		nnew;

		if (meta.split_start == InvalidBlockNumber)
		{
			UnlockReleaseBuffer(metabuf);
			break;
		}
		if (meta.split_factor > 0)
		{
			/* each partition page into split_factor new ones */
			routine->split_page(index, &meta, meta.part_start + q,
								meta.split_start + q * meta.split_factor,
								meta.split_factor);
			nnew = meta.nparts * meta.split_factor;
		}
		else
		{
			/* merge_factor partition pages into one */
			routine->merge_pages(index, &meta,
								 meta.part_start + q * meta.merge_factor,
								 meta.merge_factor, meta.split_start + q);
			nnew = meta.nparts / meta.merge_factor;
		}

		meta.split_next = q + 1;
		if (meta.split_next == (meta.split_factor > 0 ? meta.nparts : nnew))
		{
			/*
			 * Done: the new pages are the partitions, and the old ones the
			 * free run, if they are more than it had.
			 */
			if (meta.nparts >= meta.free_len)
			{
				meta.free_start = meta.part_start;
				meta.free_len = meta.nparts;
			}
			meta.nparts = nnew;
			meta.part_start = meta.split_start;
			meta.split_start = InvalidBlockNumber;
			meta.split_next = 0;
			meta.split_factor = 0;
			meta.merge_factor = 0;
			meta.splits++;
		}
		FbfWindowLogMeta(index, metabuf, &meta, FbfWindowNow(&meta));
		UnlockReleaseBuffer(metabuf);
		done++;
		CHECK_FOR_INTERRUPTS();
	}
	return done;
}

/* the AIMD policy of the window's own growth (FbfWindowApply) */
static FbfPolicySource policy_source = NULL;

void
FbfWindowSetPolicySource(FbfPolicySource source)
{
	policy_source = source;
}

/* the windows this backend last tried to grow, and the epoch it did */
#define GROW_TRIED	4
static struct
{
	Oid			index;
	int64		epoch;
}			grow_tried[GROW_TRIED];
static int	grow_tried_next = 0;

static FbfGrowth grow(Relation index, const FbfAimdPolicy *policy, bool full);

/*
 * Grow the window now, from a backend that saw an overfull future lane or
 * whose drain put entries off for want of bits (FbfWindowApply), or from
 * a maintenance pass whose drain did: the rate is measured on the future
 * lanes filled since the future was born, plus the chains, and the
 * partitions are split for it as the maintenance pass would, without
 * waiting for its look at complete periods: by then the filters of this
 * period would be saturated, and saturated filters dismiss every
 * operation until they age out.  Returns what it did: a caller with
 * entries waiting for bits drains them regardless (into the bits there
 * are) only on FBF_GROWTH_NONE; on FBF_GROWTH_LATER they must keep
 * waiting, or the pages a split has not reached yet would saturate and
 * the split would copy their saturated bits into every new page.
 */
FbfGrowth
FbfWindowGrow(Relation index, const FbfAimdPolicy *policy)
{
	FbfWindowMetaPageData meta;
	int			i;

	FbfWindowReadMeta(index, &meta);
	if (meta.version != FBF_STORAGE_VERSION)
		return FBF_GROWTH_NONE;
	if (meta.split_start != InvalidBlockNumber)
		return FBF_GROWTH_LATER;

	/*
	 * Once per period and window in a backend: reading the whole window
	 * costs a page per partition, and every operation on an overfull page
	 * asks until the next refresh.
	 */
	for (i = 0; i < GROW_TRIED; i++)
	{
		if (grow_tried[i].index == RelationGetRelid(index) &&
			grow_tried[i].epoch == meta.epoch)
			return FBF_GROWTH_LATER;
	}
	grow_tried[grow_tried_next].index = RelationGetRelid(index);
	grow_tried[grow_tried_next].epoch = meta.epoch;
	grow_tried_next = (grow_tried_next + 1) % GROW_TRIED;
	return grow(index, policy, false);
}

/*
 * Grow the window for an operation whose pending chain is full of entries
 * waiting for bits (FbfWindowApply), whatever this backend tried before:
 * finish a split under way, or split for the rate, by 2 at least while
 * fbf.max_filter_size lets it (a chain full of entries its pages could
 * not take is a rate the measure has not caught up with yet).  The policy
 * is the registered one (FbfWindowSetPolicySource).  FBF_GROWTH_NONE only
 * at the cap.
 */
FbfGrowth
FbfWindowGrowNow(Relation index)
{
	FbfAimdPolicy policy;
	FbfWindowMetaPageData meta;

	if (policy_source == NULL)
		return FBF_GROWTH_NONE;
	policy_source(&policy);
	FbfWindowReadMeta(index, &meta);
	if (meta.version != FBF_STORAGE_VERSION)
		return FBF_GROWTH_NONE;
	if (meta.split_start != InvalidBlockNumber)
	{
		FbfWindowSplitStep(index, INT_MAX);
		return FBF_GROWTH_LATER;
	}
	return grow(index, &policy, true);
}

/*
 * FbfWindowGrow's measure and split, for a window with no split under way;
 * `full`: by 2 at least if the cap lets it (FbfWindowGrowNow)
 */
static FbfGrowth
grow(Relation index, const FbfAimdPolicy *policy, bool full)
{
	FbfWindowMetaPageData meta;
	uint64		distinct[FBF_MAX_FILTERS];
	uint64	   *counts;
	double		rate;
	double		fpp;
	int64		now;
	int64		pending;
	uint32		factor;
	bool		capped;

	FbfWindowReadMeta(index, &meta);
	counts = palloc0(sizeof(uint64) * meta.nlive * FbfWindowViewParts(&meta));
	FbfWindowCounts(index, &meta, counts, distinct, NULL);
	fpp = FbfWindowEstimateFpp(&meta, counts);
	pfree(counts);

	/*
	 * The operations since the present filter's birth, a period and a bit
	 * ago (fbf_rate_since_birth): those on the chains now (some may wait
	 * there for this growth: FbfChainDrain), and those drained into it
	 * since, less those that were on the chains at its birth
	 * (meta.pending_at), which arrived before it.  Without that last term
	 * a drain's lag counts twice (up to a page a chain, and what waits for
	 * bits): two clients at a window's planned rate read as a rate past
	 * what its pages take, and grew it for nothing (docs/design.md,
	 * "Growing at once").  Never less than what waits now: a tenant's
	 * operations that waited at the birth and were rolled back since
	 * cannot hide what others brought, only what was drained; and a full
	 * chain grows the window whatever the rate reads (`full`).  Counting
	 * from the present's birth, not the future's, keeps the count over a
	 * period at least; a window younger than a period counts from the
	 * future's birth.  The present is at least a period old but after a
	 * late refresh, which makes each filter it rotates in at once born
	 * then: counted over less than a period, an idle window's few entries
	 * in flight would read as a rate of tens of thousands a second, and
	 * grow it to its cap.
	 */
	now = FbfWindowNow(&meta);
	pending = FbfWindowPendingCount(index, &meta);
	if (meta.born_at[1] > 0 && now - meta.born_at[1] <= 3 * meta.period)
		rate = fbf_rate_since_birth(distinct[1], meta.pending_at[1], pending,
									now - meta.born_at[1], meta.period);
	else
		rate = fbf_rate_since_birth(distinct[0], meta.pending_at[0], pending,
									now - meta.born_at[0], meta.period / 4);
	if (rate <= 0 && !full)
		return FBF_GROWTH_NONE;
	factor = 1;
	capped = false;
	if (rate > 0)
		factor = FbfFilterRoutineOf(&meta)->split_factor(&meta, rate,
														  policy->increase_at,
														  &capped);

	/*
	 * At the cap with its estimate at the target, say so: the counter's
	 * at_capacity applies.
	 */
	if ((meta.flags & FBF_META_CAPPED) == 0 && FbfWindowCapped(&meta, fpp, policy))
		FbfWindowNoteCapped(index, true, policy);
	if (full && factor <= 1 && FbfWindowPartsAtCap(&meta) > meta.nparts)
		factor = 2;
	if (factor <= 1)
		return FBF_GROWTH_NONE;
	if (!FbfWindowSplitStart(index, meta.nparts, factor, 0))
		return FBF_GROWTH_LATER;
	FbfWindowSplitStep(index, fbf_split_batch > 0 ? fbf_split_batch : INT_MAX);
	ereport(LOG,
			(errmsg("fbf: grew \"%s\" from %u to %u partitions at once (%.0f operations per second this period)",
					RelationGetRelationName(index), meta.nparts,
					meta.nparts * factor, rate * USECS_PER_SEC)));
	return FBF_GROWTH_SPLIT;
}
