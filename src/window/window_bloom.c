/*-------------------------------------------------------------------------
 *
 * window_bloom.c
 *	  The Bloom format of a window's partition pages (filter = bloom, the
 *	  default): the page operations of its routine (FbfBloomRoutine,
 *	  window_format.h, defined in window_bloom_snap.c).  A partition page
 *	  holds every filter's bits for its partition, bit-sliced
 *	  (core/bloom_slice.h: position w is a 16-bit word whose bit j is bit w
 *	  of lane j's filter), with each lane's stamp, count and dup in its
 *	  header (FbfSliceHeader).  This file owns that page: the plan of a
 *	  Bloom window, the page's initialisation, the one-page check, the
 *	  drain's store into it (and putting entries off for want of bits),
 *	  splitting and merging pages, counts, the estimate, the split and
 *	  merge controllers' factors and the overfull threshold.  Its
 *	  snapshots and loads are window_bloom_snap.c's.
 *
 * Locks (order: src/window/README.md, "Lock definitions"): a partition
 * page share to test or count, exclusive to set bits (a drain up to
 * FBF_DRAIN_MAX_PAGES, in block order), under the metapage the caller
 * holds.
 *
 * WAL: a drain is one XLOG_FBF_DRAIN record (window_xlog.c); a split's
 * copies and a merge's pages are full-page images.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/xloginsert.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "core/bloom_slice.h"
#include "core/fbf_plan.h"
#include "window/window_format.h"
#include "window/window_int.h"
#include "window/window_xlog.h"

/* a split aims this far under the increase threshold, for a rising rate */
#define SPLIT_HEADROOM	0.1

/* an empty Bloom partition page of nbits positions: every lane stale */
void
FbfBloomInitPage(Page page, uint32 nbits)
{
	FbfSliceHeader *h;
	int			j;

	FbfWindowInitPage(page, FBF_PAGE_ID_SLICE);
	h = FbfSlicePageGetHeader(page);
	for (j = 0; j < FBF_SLICE_LANES; j++)
	{
		h->stamp[j] = -1;
		h->count[j] = 0;
		h->dup[j] = 0;
	}
	((PageHeader) page)->pd_lower =
		(char *) FbfSlicePageGetWords(page) + (Size) nbits * FBF_SLICE_WIDTH - (char *) page;
}

/* Read and lock a Bloom partition page. */
Buffer
FbfBloomReadPart(Relation index, BlockNumber blkno, int mode)
{
	return FbfWindowReadPage(index, blkno, mode, FBF_PAGE_ID_SLICE);
}

/*
 * A Bloom page's capacity per period is this part of the count past which
 * its future lane is overfull (FbfBloomDeriveMeta, where the steady state
 * reaches the target): a quarter fewer elements per filter is a tenth of
 * the false positives with ten hashes in the model, room for what the
 * model leaves out when a window is kept full period after period (pages
 * fuller than the mean, entries drained a period late, the bits a split
 * copied): measured so, the estimate stays under a third of the target
 * (test/t/044_fair_shares.pl; at nine tenths it reached 2.7 times it).
 * It is also as far as a drain may fill a page's future lane (FbfBloomStore):
 * the filters of a period a window grows in keep the density of its pages
 * before the split, copied into every page it makes, and each is checked
 * alone once it is the oldest, where a lane at twice the overfull count
 * (future and present) dismisses at the target by itself; at this part
 * of it, a tenth of that.  A window is planned for its expected rate
 * over this part (FbfBloomPlan), so that its pages hold that rate.
 */
#define BLOOM_CAPACITY_PART		0.75

/* what a page's future lane takes from drains that may put entries off */
static inline uint32
lane_limit(const FbfWindowMetaPageData *meta)
{
	return Max((uint32) (BLOOM_CAPACITY_PART * meta->overfull), 1);
}

/*
 * Is the operation in the window's filters?  One partition page: the k
 * words of its probes hold every filter's bits (window_page.h).  Raises
 * *lane (if not NULL, FbfLane) to full if the future lane holds what a
 * drain may store there (lane_limit), to overfull if it holds more than
 * meta->overfull.  The caller holds the metapage.
 */
bool
FbfBloomContains(Relation index, const FbfWindowMetaPageData *meta,
				 const FbfHash *hash, FbfLane *lane)
{
	uint32		probes[FBF_MAX_HASHES];
	Buffer		buf;
	Page		page;
	uint64		current;
	uint64		lanes;

	buf = FbfBloomReadPart(index, FbfWindowPartBlock(meta, hash),
							BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	current = FbfSliceCurrentLanes(page, meta);

	fbf_probes(hash, meta->nhashes, meta->nbits, probes);
	lanes = bloom_slice_test(FbfSlicePageGetWords(page), FBF_SLICE_WIDTH,
							 probes, meta->nhashes) & current;

	/* the future lane full, or filling faster than its bits are for? */
	if (lane != NULL && ((current >> meta->ring[0]) & 1) != 0)
	{
		uint32		count = FbfSlicePageGetHeader(page)->count[meta->ring[0]];

		if (count > meta->overfull && meta->split_start == InvalidBlockNumber)
			*lane = FBF_LANE_OVERFULL;
		else if (count >= lane_limit(meta))
			*lane = Max(*lane, FBF_LANE_FULL);
	}
	UnlockReleaseBuffer(buf);
	return lanes != 0 &&
		fbf_check_mask(FbfSliceLogicalMask(meta, lanes), meta->nlive,
					   FBF_CHECK_DEFAULT);
}

/*
 * The Bloom store of a drain round (FbfFilterRoutine.store): set the
 * committed entries' bits in the future's and present's lanes of their
 * partition pages, and drop the aborted ones, in one WAL record
 * (XLOG_FBF_DRAIN, FbfDrainLog, which drops an annex with its entry).
 * With may_defer, a page's future lane takes entries (the oldest first)
 * up to BLOOM_CAPACITY_PART of meta->overfull, and the rest stay on the
 * chain until the window has grown or the next refresh has begun an
 * empty future filter (returns FBF_STORED_GROW): bits set now would stay,
 * copied into every page of a split, until their filters age out.  Taking
 * what fits drains a backlog by a lane's part each period even where no
 * growth comes (the controller merges a window whose rate fell).  What it
 * stores is handed to `decided` before the record.  Locks: the partition
 * pages exclusively, in block order; the caller holds the metapage
 * share-locked (so the ring is `meta`) and pbuf exclusive-locked.
 */
FbfStored
FbfBloomStore(Relation index, const FbfWindowMetaPageData *meta, Buffer pbuf,
			  const FbfPendingEntry *entries, int n, uint8 *keep,
			  const BlockNumber *target, const BlockNumber *blocks,
			  int nblocks, bool may_defer, FbfStoreDecided decided,
			  void *decided_arg)
{
	uint32		limit = lane_limit(meta);
	Buffer		sbufs[FBF_DRAIN_MAX_PAGES];
	xl_fbf_slice_set sets[FBF_DRAIN_MAX_PAGES];
	FbfHash    *hashes[FBF_DRAIN_MAX_PAGES];
	FbfHash    *all;			/* every page's hashes, page after page */
	int			taken_by[FBF_DRAIN_MAX_PAGES];
	bool		deferred[FBF_DRAIN_MAX_PAGES];
	bool		refused = false;
	int			kept = 0;
	int			i;
	int			b;

	for (b = 0; b < nblocks; b++)
	{
		sbufs[b] = FbfBloomReadPart(index, blocks[b], BUFFER_LOCK_EXCLUSIVE);
		deferred[b] = false;
		sets[b].lanes[0] = meta->ring[0];
		sets[b].lanes[1] = meta->ring[1];
		sets[b].stamps[0] = FbfWindowExpectedStamp(meta, 0);
		sets[b].stamps[1] = FbfWindowExpectedStamp(meta, 1);
		sets[b].nhashes = meta->nhashes;
		sets[b].n = 0;
		taken_by[b] = 0;
	}
	/* each page's share of one array of the round's n entries */
	for (i = 0; i < n; i++)
		for (b = 0; b < nblocks && target[i] != InvalidBlockNumber; b++)
			if (blocks[b] == target[i])
			{
				taken_by[b]++;
				break;
			}
	all = palloc(sizeof(FbfHash) * Max(n, 1));
	for (b = 0; b < nblocks; b++)
		hashes[b] = b == 0 ? all : hashes[b - 1] + taken_by[b - 1];
	for (i = 0; i < n; i++)
	{
		for (b = 0; b < nblocks && target[i] != InvalidBlockNumber; b++)
		{
			if (blocks[b] == target[i])
			{
				hashes[b][sets[b].n].h1 = entries[i].h1;
				hashes[b][sets[b].n].h2 = entries[i].h2;
				sets[b].n++;
				keep[i] = 0;
				break;
			}
		}
	}

	/* what would fill a page's future lane past the limit waits, the newest */
	if (may_defer)
	{
		for (b = 0; b < nblocks; b++)
		{
			Page		sp = BufferGetPage(sbufs[b]);
			const FbfSliceHeader *h = FbfSlicePageGetHeader(sp);
			uint32		lane_count = h->stamp[meta->ring[0]] ==
				FbfWindowExpectedStamp(meta, 0) ? h->count[meta->ring[0]] : 0;
			int			room = lane_count < limit ? (int) (limit - lane_count) : 0;
			int			taken = 0;

			if (sets[b].n <= room)
				continue;
			refused = true;
			for (i = 0; i < n; i++)
			{
				if (target[i] == blocks[b] && taken++ >= room)
					keep[i] = 1;
			}
			sets[b].n = room;
			deferred[b] = room == 0;
		}
		/* drop the deferred pages from the record */
		for (i = 0, b = 0; b < nblocks; b++)
		{
			if (deferred[b])
			{
				UnlockReleaseBuffer(sbufs[b]);
				continue;
			}
			sbufs[i] = sbufs[b];
			sets[i] = sets[b];
			hashes[i] = hashes[b];
			i++;
		}
		nblocks = i;
	}

	decided(decided_arg, keep);
	for (i = 0; i < n; i++)
		kept += keep[i];
	if (kept < n)
		FbfDrainLog(index, pbuf, keep, n, nblocks, sbufs, sets, hashes);

	for (b = 0; b < nblocks; b++)
		UnlockReleaseBuffer(sbufs[b]);
	pfree(all);
	return refused ? FBF_STORED_GROW : FBF_STORED_ALL;
}

/*
 * The steady-state estimate of the window's shape with `nparts`
 * partitions at `rate` operations per microsecond: the future filter holds
 * a period's operations, every older live one two.
 */
static double
predict_fpp(const FbfWindowMetaPageData *meta, uint32 nparts,
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
FbfBloomSplitFactor(const FbfWindowMetaPageData *meta, double rate,
					double increase_at, bool *capped)
{
	double		threshold = increase_at * meta->target_fpp;
	uint64		cap_pages = FbfWindowCapPages();
	uint32		factor;

	/*
	 * Without a rate, hold: a split's copies keep the estimate where it is
	 * (the old filters' bits are what it measures), so a controller going
	 * by the estimate alone would double the partitions on every pass.
	 * An overload is seen by the increments (FbfWindowGrow) anyway.
	 */
	*capped = false;
	if (rate < 0 || predict_fpp(meta, meta->nparts, rate) <= meta->target_fpp)
		return 1;

	for (factor = 2; factor <= FBF_SPLIT_MAX_FACTOR; factor *= 2)
	{
		uint64		pages = 1 + (uint64) meta->nchains +
			(uint64) meta->nparts * factor;

		if (pages > cap_pages)
		{
			*capped = true;
			return factor / 2;
		}
		if (predict_fpp(meta, meta->nparts * factor, rate) <=
			SPLIT_HEADROOM * threshold)
			return factor;
	}
	return FBF_SPLIT_MAX_FACTOR;
}

/*
 * Should the partitions be merged, now that the rate has fallen?  By 2, if
 * the window has more partitions than planned, the steady state at the
 * rate would stay under the decrease threshold with half of them, and so
 * would the filters as they are once each pair is ORed together (`counts`,
 * in the readers' view).  Returns the factor, or 1.
 */
uint32
FbfBloomMergeFactor(const FbfWindowMetaPageData *meta, const uint64 *counts,
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
		predict_fpp(meta, half, rate) > threshold)
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
	FbfBloomInitPage(page, meta->nbits);
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
 * Set meta->overfull: the count of a future lane on one page past which
 * the rate this period has already outgrown the bits: the
 * per-period count at which the steady state reaches the target.  Every
 * metapage write recomputes it (FbfWindowLogMeta).
 */
void
FbfBloomDeriveMeta(FbfWindowMetaPageData *meta)
{
	double		lo = 0;
	double		hi = (double) meta->nbits;
	int			i;

	/* per-page per-period count x: rate = x * nparts / period */
	for (i = 0; i < 40; i++)
	{
		double		mid = (lo + hi) / 2;

		if (predict_fpp(meta, meta->nparts,
								mid * meta->nparts / meta->period) < meta->target_fpp)
			lo = mid;
		else
			hi = mid;
	}
	meta->overfull = (uint32) Max(lo, 1);
}

/*
 * Element counts of every live filter in every partition, counts[i *
 * nparts + p] for logical filter i and partition p of the readers' view
 * (FbfWindowViewParts), 0 for stale lanes: what each page's bits hold.
 * If `distinct` is not NULL, distinct[i] gets the number of elements in
 * filter i, each counted once although splits copied it to several pages.
 * A Bloom page has no load: *max_load gets 0.  Each page share-locked in
 * turn; the caller holds the metapage or a copy it checks.
 */
void
FbfBloomCounts(Relation index, const FbfWindowMetaPageData *meta,
			   uint64 *counts, uint64 *distinct, double *max_load)
{
	uint32		nparts = FbfWindowViewParts(meta);
	uint32		v;
	int			i;

	if (max_load != NULL)
		*max_load = 0;
	for (v = 0; v < nparts; v++)
	{
		BlockNumber blkno = FbfWindowViewBlock(meta, v);
		Buffer		buf = FbfBloomReadPart(index, blkno, BUFFER_LOCK_SHARE);
		Page		page = BufferGetPage(buf);
		uint64		current = FbfSliceCurrentLanes(page, meta);
		const FbfSliceHeader *h = FbfSlicePageGetHeader(page);
		/* an unsplit page stands for F partitions of the view: count it once */
		bool		first = v == 0 || FbfWindowViewBlock(meta, v - 1) != blkno;

		for (i = 0; i < meta->nlive; i++)
		{
			int			lane = meta->ring[i];
			bool		live = ((current >> lane) & 1) != 0;

			counts[i * nparts + v] = live ? h->count[lane] : 0;
			if (distinct != NULL && live && first)
				distinct[i] += h->count[lane] - Min(h->dup[lane], h->count[lane]);
		}
		UnlockReleaseBuffer(buf);
		CHECK_FOR_INTERRUPTS();
	}
}

/* the mean over partitions of each partition's estimate */
double
FbfBloomEstimateFpp(const FbfWindowMetaPageData *meta, const uint64 *counts)
{
	return fbf_estimate_fpp_blocked(meta->nbits, meta->nhashes, meta->nlive,
									FbfWindowViewParts(meta), counts,
									FBF_CHECK_DEFAULT, FBF_MODEL_SHARED);
}

/*
 * Size a Bloom window from the index's options (FbfFilterRoutine.plan):
 * an explicit shape if nbits is set, else the plan with the fewest bits
 * per filter (every lane of a partition page costs memory, used or not)
 * that meets the target at the expected rate over BLOOM_CAPACITY_PART,
 * in page-sized partitions, each then given all the bits its page holds.
 * A page takes a period's entries only up to that part of the count at
 * which the model reaches the target (lane_limit), so a plan for the
 * rate itself would fill its pages at three quarters of the rate and
 * grow the window at the rate it was planned for.
 * nchains is that of a 1.0 window being upgraded, 0 for a new window.
 * Sets the shape, ring size and period fields of *meta; FbfWindowPlan
 * rounds the partitions to the chains (FbfBloomSpread) and checks the cap.
 */
void
FbfBloomPlan(Relation index, const FbfWindowOptions *opts, uint32 nchains,
			 FbfWindowMetaPageData *meta)
{
	double		retention = opts->retention_ms / 1000.0;
	FbfPlan		plan;
	const char *why;

	if (opts->nbits > 0)
	{
		uint64		total_bits = opts->nbits;

		if (opts->nhashes <= 0 || opts->npast <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("an explicit fbf shape needs nbits, nhashes and npast")));
		if (opts->npast + 2 > FBF_SLICE_LANES && nchains == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a counter filter has at most %d past filters",
							FBF_SLICE_LANES - 2)));
		plan.nhashes = opts->nhashes;
		plan.nparts = (uint32) ((total_bits + FBF_SLICE_MAX_BITS - 1) / FBF_SLICE_MAX_BITS);
		plan.nbits = (uint32) ((total_bits + plan.nparts - 1) / plan.nparts);
		/* a 1.0 window being upgraded keeps what fits */
		plan.nfilters = Min(opts->npast + 2, FBF_SLICE_LANES);
		plan.period = retention / (plan.nfilters - 1);
		if (!fbf_shape_valid(plan.nbits, plan.nhashes, plan.nfilters, plan.nparts, &why))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid fbf shape"),
					 errdetail("%s", why)));
	}
	else
	{
		if (!fbf_plan_sliced(retention, opts->target_fpp,
							 opts->expected_rate / BLOOM_CAPACITY_PART,
							 FBF_CHECK_DEFAULT, FBF_COUNTER_PLAN_MAX_FILTERS,
							 FBF_SLICE_MAX_BITS, &plan, &why))
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("no fbf filter meets target %g at %g operations per second",
							opts->target_fpp, opts->expected_rate),
					 errdetail("%s A Bloom filter is planned for %g operations per second, the expected rate over the three quarters of a page that one period may fill.",
							   why, opts->expected_rate / BLOOM_CAPACITY_PART)));
		/* the page is whole whatever the plan: see FbfBloomSpread */
		plan.nbits = FBF_SLICE_MAX_BITS;
	}

	meta->nbits = plan.nbits;
	meta->nparts = plan.nparts;
	meta->nhashes = (uint16) plan.nhashes;
	meta->nfilters = (uint16) plan.nfilters;
	meta->period = (int64) ceil(plan.period * USECS_PER_SEC);
}

/*
 * More partitions than planned (FbfFilterRoutine.spread).  A planned window
 * already fills its pages (FbfBloomPlan), and keeps doing so: a partition
 * page costs a block whatever its filters use of it, and a filter of few
 * bits per page dismisses far more than its estimate says (design.md,
 * "Where it falls short: small filters").  An explicit shape keeps its
 * bits in all, never fewer; one that fills its pages already (3,944 bits
 * a partition at 8 kB) keeps them full, and so has more.
 */
void
FbfBloomSpread(FbfWindowMetaPageData *meta, uint32 planned)
{
	uint64		total = (uint64) meta->nbits * planned;

	if (meta->nbits == FBF_SLICE_MAX_BITS)
		return;
	meta->nbits = (uint32) Max((total + meta->nparts - 1) / meta->nparts,
							   FBF_MIN_NBITS);
}

/* a Bloom metapage's own fields */
bool
FbfBloomValidateMeta(const FbfWindowMetaPageData *meta)
{
	return meta->nbits >= 1 && meta->nbits <= FBF_SLICE_MAX_BITS;
}

/* an empty partition page of the window's bits */
void
FbfBloomInitPageFor(Page page, const FbfWindowMetaPageData *meta)
{
	FbfBloomInitPage(page, meta->nbits);
}

/*
 * Split partition page `src` into `factor` copies at dst_start ..: each
 * holds all its bits (FbfFilterRoutine.split_page).  src share, each copy
 * exclusive in turn; the caller holds the metapage exclusively.
 */
void
FbfBloomSplitPage(Relation index, const FbfWindowMetaPageData *meta,
				  BlockNumber src, BlockNumber dst_start, uint32 factor)
{
	Buffer		sbuf = FbfBloomReadPart(index, src, BUFFER_LOCK_SHARE);
	uint32		f;

	for (f = 0; f < factor; f++)
	{
		Buffer		dst = FbfBloomReadPart(index, dst_start + f,
										   BUFFER_LOCK_EXCLUSIVE);

		copy_part(index, sbuf, dst, f, factor);
		UnlockReleaseBuffer(dst);
	}
	UnlockReleaseBuffer(sbuf);
}

/*
 * Merge the `factor` partition pages src_start .. into `dst`
 * (FbfFilterRoutine.merge_pages): the sources share, dst exclusive; the
 * caller holds the metapage exclusively.
 */
void
FbfBloomMergePages(Relation index, const FbfWindowMetaPageData *meta,
				   BlockNumber src_start, uint32 factor, BlockNumber dst)
{
	Buffer		src[FBF_SPLIT_MAX_FACTOR];
	Buffer		dbuf;
	uint32		f;

	for (f = 0; f < factor; f++)
		src[f] = FbfBloomReadPart(index, src_start + f, BUFFER_LOCK_SHARE);
	dbuf = FbfBloomReadPart(index, dst, BUFFER_LOCK_EXCLUSIVE);
	merge_parts(index, meta, src, factor, dbuf);
	UnlockReleaseBuffer(dbuf);
	for (f = 0; f < factor; f++)
		UnlockReleaseBuffer(src[f]);
}

/*
 * The partitions a Bloom window has once grown to `max_pages`: its own
 * times the largest power of two whose pages (the metapage, the chains,
 * the partitions) fit, as FbfBloomSplitFactor grows it.
 */
uint32
FbfBloomPartsAtCap(const FbfWindowMetaPageData *meta, uint64 max_pages)
{
	return FbfWindowPartsWithin(meta->nparts, meta->nchains, max_pages, 2);
}

/* New operations one Bloom partition page takes in a period (above). */
double
FbfBloomPageCapacity(const FbfWindowMetaPageData *meta)
{
	return BLOOM_CAPACITY_PART * meta->overfull;
}

/* fbf_counter_stats of a Bloom window: its bits and hash functions */
void
FbfBloomStats(const FbfWindowMetaPageData *meta, const uint64 *counts,
			  FbfWindowStats *stats)
{
	stats->bits = (int64) meta->nbits * meta->nparts;
	stats->nhashes = meta->nhashes;
	stats->has_nhashes = true;
}

/*
 * Do two metapages of a Bloom window give its pages the same shape: the
 * same bits per partition page and hash functions?
 */
bool
FbfBloomSameShape(const FbfWindowMetaPageData *then,
				  const FbfWindowMetaPageData *now)
{
	return then->nbits == now->nbits && then->nhashes == now->nhashes;
}
