/*-------------------------------------------------------------------------
 *
 * window_split.c
 *	  Growth in bits: multiplying a window's partitions when the rate of
 *	  operations outgrows its plan, online, one partition page at a time.
 *
 * AIMD (window_ring.c) can change the number of filters and the period,
 * but more operations per period need more bits.  A split multiplies the
 * partitions by a power of two F (window.h, "Splitting"): a partition page
 * is copied whole into F new pages, so every operation it remembers is in
 * whichever of them its hash now leads to, and new operations spread over
 * F times the bits.  The copies' old contents age out with their filters.
 *
 *	FbfWindowSplitFactor	the controller: F for the measured rate
 *	FbfWindowMergeFactor	and 2 to halve the partitions when it falls
 *	FbfWindowSplitStart		take F * P pages (or P / F to merge) from
 *							the free run the last split or merge left,
 *							else append them (no metapage lock held while
 *							they are written), and publish them
 *	FbfWindowSplitStep		split (merge) partitions one at a time, each
 *							under the metapage's exclusive lock: operations
 *							wait for at most one partition's pages
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
 * arrival rate counts each operation once (FbfWindowBlockCounts).
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

#include "window/window_int.h"

/* a split aims this far under the increase threshold, for a rising rate */
#define SPLIT_HEADROOM	0.1

/* the largest split at once */
#define SPLIT_MAX_FACTOR	64

/*
 * The steady-state estimate of the window's shape with `nparts`
 * partitions at `rate` operations per microsecond: the future filter holds
 * a period's operations, every older live one two.
 */
double
FbfWindowPredictFpp(const FbfWindowMetaPageData *meta, uint32 nparts,
					double rate)
{
	uint64		counts[FBF_MAX_FILTERS];
	double		per_period = rate * meta->period / nparts;
	int			i;

	for (i = 0; i < meta->nlive; i++)
		counts[i] = (uint64) ceil((i == 0 ? 1 : 2) * per_period);
	return fbf_estimate_fpp_blocked(meta->nbits, meta->nhashes, meta->nlive,
									1, counts, FBF_CHECK_DEFAULT, FBF_MODEL_SHARED);
}

/*
 * How many times to multiply the partitions for the arrival rate
 * (operations per microsecond, negative if unknown): 1 if the window's
 * steady state at that rate stays within its target (a plan is made for
 * just that, so its own rate is no reason to grow), or the rate is
 * unknown; else the smallest power of two whose steady state is
 * SPLIT_HEADROOM under the increase threshold, within fbf.max_filter_size.  *capped is set when the cap
 * keeps the window from meeting the threshold.
 */
uint32
FbfWindowSplitFactor(const FbfWindowMetaPageData *meta, double rate,
					 double increase_at, bool *capped)
{
	double		threshold = increase_at * meta->target_fpp;
	uint64		cap_pages = (uint64) fbf_max_filter_size_kb * 1024 / BLCKSZ;
	uint32		factor;

	/*
	 * Without a rate, hold: a split's copies keep the estimate where it is
	 * (the old filters' bits are what it measures), so a controller going
	 * by the estimate alone would double the partitions on every pass.
	 * An overload is seen by the increments (FbfWindowGrow) anyway.
	 */
	*capped = false;
	if (rate < 0 || FbfWindowPredictFpp(meta, meta->nparts, rate) <= meta->target_fpp)
		return 1;

	for (factor = 2; factor <= SPLIT_MAX_FACTOR; factor *= 2)
	{
		uint64		pages = 1 + (uint64) meta->nchains +
			(uint64) meta->nparts * factor;

		if (pages > cap_pages)
		{
			*capped = true;
			return factor / 2;
		}
		if (FbfWindowPredictFpp(meta, meta->nparts * factor, rate) <=
			SPLIT_HEADROOM * threshold)
			return factor;
	}
	return SPLIT_MAX_FACTOR;
}

/*
 * Should the partitions be merged, now that the rate has fallen?  By 2, if
 * the window has more partitions than planned, the steady state at the
 * rate would stay under the decrease threshold with half of them, and so
 * would the filters as they are once each pair is ORed together (`counts`,
 * in the readers' view).  Returns the factor, or 1.
 */
uint32
FbfWindowMergeFactor(const FbfWindowMetaPageData *meta, const uint64 *counts,
					 double rate, double decrease_at)
{
	uint32		half = meta->nparts / 2;
	double		threshold = decrease_at * meta->target_fpp;
	uint64	   *merged;
	double		fpp;
	int			i;
	uint32		p;

	if (rate < 0 || meta->split_start != InvalidBlockNumber ||
		half < meta->base_nparts || half % meta->nchains != 0 ||
		meta->nparts % 2 != 0 ||
		FbfWindowPredictFpp(meta, half, rate) > threshold)
		return 1;

	merged = palloc0(sizeof(uint64) * meta->nlive * half);
	for (i = 0; i < meta->nlive; i++)
		for (p = 0; p < meta->nparts; p++)
			merged[i * half + p / 2] += counts[i * meta->nparts + p];
	fpp = fbf_estimate_fpp_blocked(meta->nbits, meta->nhashes, meta->nlive,
								   half, merged, FBF_CHECK_DEFAULT,
								   FBF_MODEL_SHARED);
	pfree(merged);
	return fpp <= threshold ? 2 : 1;
}

/*
 * Begin multiplying the partitions by `split` (or dividing them by
 * `merge`; the other is 0): take the pages for the new partitions from the
 * free run a previous split or merge left, else append them (with no
 * metapage lock held while they are written), and publish them in the
 * metapage.  Returns false if a split or merge is already under way (pages
 * appended are then left unused).
 */
bool
FbfWindowSplitStart(Relation index, uint32 split, uint32 merge)
{
	FbfWindowMetaPageData meta;
	Buffer		metabuf;
	BlockNumber start = InvalidBlockNumber;
	uint32		nparts;
	uint32		need;

	FbfWindowReadMeta(index, &meta);
	if (meta.version != FBF_STORAGE_VERSION || meta.split_start != InvalidBlockNumber)
		return false;
	/* a cuckoo window never merges (window_cuckoo.c) */
	if (merge > 0 && FbfWindowIsCuckoo(&meta))
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

/* copy partition page `src` into `dst`, the f-th of `factor` copies */
static void
copy_part(Relation index, Buffer src, Buffer dst, uint32 f, uint32 factor)
{
	Page		page = BufferGetPage(dst);
	FbfSliceHeader *h;
	int			j;

	START_CRIT_SECTION();
	memcpy(page, BufferGetPage(src), BLCKSZ);
	h = FbfSlicePageGetHeader(page);
	for (j = 0; j < FBF_SLICE_LANES; j++)
	{
		uint32		distinct = h->count[j] - Min(h->dup[j], h->count[j]);
		uint32		share = distinct / factor + (f == 0 ? distinct % factor : 0);

		h->dup[j] = h->count[j] - share;
	}
	MarkBufferDirty(dst);
	if (RelationNeedsWAL(index))
		log_newpage_buffer(dst, true);
	END_CRIT_SECTION();
}

/*
 * OR the current lanes of `nsrc` partition pages into `dst`: a lane is
 * taken from each page whose stamp is current for it, and the result's
 * count is their distinct elements.
 */
static void
merge_parts(Relation index, const FbfWindowMetaPageData *meta,
			const Buffer *src, int nsrc, Buffer dst)
{
	Page		page = BufferGetPage(dst);
	FbfSliceHeader *h;
	void	   *words;
	int			i;

	START_CRIT_SECTION();
	FbfWindowInitSlicePage(page, meta->nbits);
	h = FbfSlicePageGetHeader(page);
	words = FbfSlicePageGetWords(page);
	for (i = 0; i < meta->nlive; i++)
	{
		int			lane = meta->ring[i];
		int64		stamp = FbfWindowExpectedStamp(meta, i);
		int			s;

		for (s = 0; s < nsrc; s++)
		{
			Page		sp = BufferGetPage(src[s]);
			const FbfSliceHeader *sh = FbfSlicePageGetHeader(sp);
			const void *sw = FbfSlicePageGetWords(sp);
			uint32		w;

			if (sh->stamp[lane] != stamp)
				continue;
			for (w = 0; w < meta->nbits; w++)
				bloom_slice_or(words, FBF_SLICE_WIDTH, w,
							   bloom_slice_get(sw, FBF_SLICE_WIDTH, w) &
							   (UINT64CONST(1) << lane));
			h->stamp[lane] = stamp;
			h->count[lane] += sh->count[lane] - Min(sh->dup[lane], sh->count[lane]);
		}
	}
	MarkBufferDirty(dst);
	if (RelationNeedsWAL(index))
		log_newpage_buffer(dst, true);
	END_CRIT_SECTION();
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
		uint32		q = meta.split_next;
		uint32		nnew;
		uint32		f;

		if (meta.split_start == InvalidBlockNumber)
		{
			UnlockReleaseBuffer(metabuf);
			break;
		}
		if (meta.split_factor > 0 && FbfWindowIsCuckoo(&meta))
		{
			/* each live entry to its child by its routing bits */
			Buffer		src = FbfCuckooReadPart(index, meta.part_start + q,
												BUFFER_LOCK_SHARE);
			Buffer		dst[SPLIT_MAX_FACTOR];

			for (f = 0; f < meta.split_factor; f++)
				dst[f] = FbfCuckooReadPart(index,
										   meta.split_start + q * meta.split_factor + f,
										   BUFFER_LOCK_EXCLUSIVE);
			FbfCuckooSplitPart(index, &meta, src, dst, meta.split_factor);
			for (f = 0; f < meta.split_factor; f++)
				UnlockReleaseBuffer(dst[f]);
			UnlockReleaseBuffer(src);
			nnew = meta.nparts * meta.split_factor;
		}
		else if (meta.split_factor > 0)
		{
			Buffer		src = FbfWindowReadPart(index, meta.part_start + q,
												BUFFER_LOCK_SHARE);

			for (f = 0; f < meta.split_factor; f++)
			{
				Buffer		dst = FbfWindowReadPart(index,
													meta.split_start + q * meta.split_factor + f,
													BUFFER_LOCK_EXCLUSIVE);

				copy_part(index, src, dst, f, meta.split_factor);
				UnlockReleaseBuffer(dst);
			}
			UnlockReleaseBuffer(src);
			nnew = meta.nparts * meta.split_factor;
		}
		else
		{
			Buffer		src[SPLIT_MAX_FACTOR];
			Buffer		dst;

			for (f = 0; f < meta.merge_factor; f++)
				src[f] = FbfWindowReadPart(index,
										   meta.part_start + q * meta.merge_factor + f,
										   BUFFER_LOCK_SHARE);
			dst = FbfWindowReadPart(index, meta.split_start + q, BUFFER_LOCK_EXCLUSIVE);
			merge_parts(index, &meta, src, meta.merge_factor, dst);
			UnlockReleaseBuffer(dst);
			for (f = 0; f < meta.merge_factor; f++)
				UnlockReleaseBuffer(src[f]);
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

/*
 * Set meta->overfull: the count of a future lane on one page past which
 * the rate this period has already outgrown the bits: the
 * per-period count at which the steady state reaches the target.  Every
 * metapage write recomputes it (FbfWindowLogMeta).
 */
void
FbfWindowSetOverfull(FbfWindowMetaPageData *meta)
{
	double		lo = 0;
	double		hi = (double) meta->nbits;
	int			i;

	/* a cuckoo window grows when a block refuses an entry instead */
	if (FbfWindowIsCuckoo(meta))
	{
		meta->overfull = 0;
		return;
	}

	/* per-page per-period count x: rate = x * nparts / period */
	for (i = 0; i < 40; i++)
	{
		double		mid = (lo + hi) / 2;

		if (FbfWindowPredictFpp(meta, meta->nparts,
								mid * meta->nparts / meta->period) < meta->target_fpp)
			lo = mid;
		else
			hi = mid;
	}
	meta->overfull = (uint32) Max(lo, 1);
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

static FbfGrowth grow(Relation index, const FbfAimdPolicy *policy);

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
	return grow(index, policy);
}

/*
 * Grow the window for an operation whose pending chain is full of entries
 * waiting for bits (FbfWindowApply), whatever this backend tried before:
 * finish a split under way, or split for the rate.  The policy is the
 * registered one (FbfWindowSetPolicySource).
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
	return grow(index, &policy);
}

/* FbfWindowGrow's measure and split, for a window with no split under way */
static FbfGrowth
grow(Relation index, const FbfAimdPolicy *policy)
{
	FbfWindowMetaPageData meta;
	uint64		distinct[FBF_MAX_FILTERS];
	uint64	   *counts;
	double		rate;
	int64		now;
	int64		elapsed;
	uint64		count;
	uint32		factor;
	bool		capped;

	FbfWindowReadMeta(index, &meta);
	counts = palloc0(sizeof(uint64) * meta.nlive * meta.nparts);
	FbfWindowBlockCounts(index, &meta, counts, distinct);
	pfree(counts);

	/*
	 * The present filter holds the operations since its birth, a period
	 * and a bit ago, but for those on the chains (some may wait there for
	 * this growth: FbfChainDrain).  Counting from the present's birth, not
	 * the future's, keeps operations of the last period that a drain put
	 * into the future from looking like this period's; a window younger
	 * than a period counts from the future's birth.
	 */
	now = FbfWindowNow(&meta);
	if (meta.born_at[1] > 0 && now - meta.born_at[1] <= 3 * meta.period)
	{
		elapsed = now - meta.born_at[1];
		count = distinct[1];
	}
	else
	{
		elapsed = Max(now - meta.born_at[0], meta.period / 4);
		count = distinct[0];
	}
	rate = (double) (count + FbfWindowPendingCount(index, &meta)) / Max(elapsed, 1);
	if (rate <= 0)
		return FBF_GROWTH_NONE;
	if (FbfWindowIsCuckoo(&meta))
		factor = FbfCuckooSplitFactor(&meta, rate, &capped);
	else
		factor = FbfWindowSplitFactor(&meta, rate, policy->increase_at, &capped);

	/*
	 * At the cap, say so: drains stop waiting for growth (FbfChainDrain)
	 * and the counter's at_capacity applies.
	 */
	if (capped && (meta.flags & FBF_META_CAPPED) == 0)
		FbfWindowNoteCapped(index, true, policy);
	if (factor <= 1)
		return FBF_GROWTH_NONE;
	if (!FbfWindowSplitStart(index, factor, 0))
		return FBF_GROWTH_LATER;
	FbfWindowSplitStep(index, fbf_split_batch > 0 ? fbf_split_batch : INT_MAX);
	ereport(LOG,
			(errmsg("fbf: grew \"%s\" from %u to %u partitions at once (%.0f operations per second this period)",
					RelationGetRelationName(index), meta.nparts,
					meta.nparts * factor, rate * USECS_PER_SEC)));
	return FBF_GROWTH_SPLIT;
}
