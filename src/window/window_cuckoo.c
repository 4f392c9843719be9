/*-------------------------------------------------------------------------
 *
 * window_cuckoo.c
 *	  The partition pages of a cuckoo window (filter = cuckoo): each holds
 *	  one block of the pure core's cuckoo window (core/cwin_block.h),
 *	  fingerprints with 4-bit epoch tags in buckets that forget by epoch.
 *	  This file owns that page, with the page operations of the cuckoo
 *	  format's routine (FbfCuckooRoutine, window_format.h, defined in
 *	  window_cuckoo_snap.c with the snapshots): its shape and plan, its
 *	  metapage fields, its initialisation, the check of an operation, the
 *	  store of a drain round into it, the split of one partition, its
 *	  counts, estimate, growth factor and statistics.  Capabilities: no
 *	  merge, no resize (16 live epochs, the tags' limit), growth by load.
 *
 * Everything else is the window's, as for Bloom windows: the metapage
 * and its ring (which times the epochs: 16 live ones, the tags' limit),
 * the clock, the pending chains and the fate of their entries, the
 * split scheduling (window_split.c), rebuilds.  What differs:
 *
 *	- a check reads the operation's partition page under a share lock and
 *	  asks cwin_block_contains for its fingerprints under the live epochs'
 *	  key partitions (meta->cuckoo.parts);
 *	- a drain stores each committed entry with cwin_block_insert, as of
 *	  the current epoch, under the page's exclusive lock; an entry the
 *	  block refuses (no chain of displacements frees a slot) stays on the
 *	  chain, never dropped, and asks the window to grow (the same growth
 *	  request a Bloom drain makes when it puts entries off);
 *	- a split sends each live entry of page q to its child qF + j by its
 *	  routing bits (cwin_block_split), without the keys; merges are not
 *	  supported (an entry keyed with more partitions than its page has
 *	  could not be split again), so a cuckoo window never shrinks.
 *
 * Locks: as src/window/README.md says for partition pages (share to
 * check, exclusive to store, up to three in block order in one drain
 * record).
 *
 * WAL: a drain is one record of fbf's resource manager with the pending
 * page and up to three partition pages as changed byte ranges
 * (common/fbf_xlog.h); a drain that sweeps a page (epochs expired: many
 * slots emptied) logs that page as a full image.  A split's children are
 * written whole, as full images.  Cuckoo pages hold no hint-only state:
 * the default mask.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/xloginsert.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "common/fbf_xlog.h"
#include "core/cwin_plan.h"
#include "core/cwin_window.h"
#include "window/window_format.h"
#include "window/window_int.h"
#include "window/window_xlog.h"

StaticAssertDecl(CWIN_PAGE_SPACE == FBF_PAGE_CONTENT_BYTES,
				 "a cuckoo block fills a window page's contents");

/* The block layout of the window's pages. */
void
FbfCuckooLayout(const FbfWindowMetaPageData *meta, CwinLayout *layout)
{
	const char *why = NULL;

	if (!cwin_layout_init(layout, FBF_PAGE_CONTENT_BYTES, meta->cuckoo.fp_bits,
						  CWIN_MAX_KICKS, &why) ||
		layout->nbuckets != meta->cuckoo.nbuckets)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("invalid cuckoo window shape in an fbf metapage"),
				 errdetail("%s", why ? why : "The bucket count does not match the fingerprint bits.")));
}

/* The live epochs, and the key partitions each began with. */
void
FbfCuckooEpochs(const FbfWindowMetaPageData *meta, CwinEpochs *epochs)
{
	int			i;

	epochs->epoch = meta->epoch;
	epochs->nlive = meta->nlive;
	for (i = 0; i < CWIN_MAX_LIVE; i++)
		epochs->parts[i] = i < meta->nlive ? meta->cuckoo.parts[i] : 0;
}

/*
 * A refresh began a new epoch: it keys its entries with the partitions
 * the window has now (the old ones during a split: the pages a split has
 * not reached hold no more).
 */
void
FbfCuckooRotate(FbfWindowMetaPageData *meta)
{
	memmove(&meta->cuckoo.parts[1], &meta->cuckoo.parts[0],
			sizeof(uint32) * (CWIN_MAX_LIVE - 1));
	meta->cuckoo.parts[0] = meta->nparts;
}

/*
 * Size a new cuckoo window for the options (FbfFilterRoutine.plan): the
 * fewest bytes meeting the target at the expected rate (cwin_plan), 16
 * live epochs, a period of a fifteenth of the retention.  Sets the shape,
 * ring and period fields of *meta; FbfWindowPlan rounds the partitions to
 * the chains and checks the cap.
 */
void
FbfCuckooPlan(Relation index, const FbfWindowOptions *opts, uint32 nchains,
			  FbfWindowMetaPageData *meta)
{
	CwinPlan	plan;
	CwinLayout	layout;
	const char *why;
	int			i;

	if (opts->nbits > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a cuckoo window has no explicit shape"),
				 errdetail("nbits, nhashes and npast are the shape of a Bloom window.")));
	if (!cwin_plan(opts->retention_ms / 1000.0, opts->target_fpp,
				   Max(opts->expected_rate, 1.0), FBF_PAGE_CONTENT_BYTES,
				   &plan, &why))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("no cuckoo window meets target %g at %g operations per second",
						opts->target_fpp, opts->expected_rate),
				 errdetail("%s", why)));
	if (!cwin_layout_init(&layout, FBF_PAGE_CONTENT_BYTES, plan.fp_bits,
						  CWIN_MAX_KICKS, &why))
		elog(ERROR, "fbf: cuckoo plan of %u-bit fingerprints has no layout: %s",
			 plan.fp_bits, why);

	meta->cuckoo.fp_bits = plan.fp_bits;
	meta->cuckoo.nbuckets = layout.nbuckets;
	/*
	 * The Bloom fields mean nothing here; they are written as 1.1 wrote
	 * them, so that a server still running an older library (a standby
	 * upgraded after its primary) reads the metapage of a window created
	 * by this one, and FbfCuckooValidateMeta checks nbits as 1.1 did.
	 */
	meta->nbits = 1;
	meta->nhashes = 1;
	meta->nparts = plan.nparts;
	meta->nfilters = (uint16) plan.nlive;
	meta->period = (int64) ceil(plan.period * USECS_PER_SEC);
	for (i = 0; i < CWIN_MAX_LIVE; i++)
		meta->cuckoo.parts[i] = plan.nparts;
}

/* the partitions were rounded up to the chains: every epoch keys with them */
void
FbfCuckooSpread(FbfWindowMetaPageData *meta, uint32 planned)
{
	int			i;

	for (i = 0; i < CWIN_MAX_LIVE; i++)
		meta->cuckoo.parts[i] = meta->nparts;
}

/*
 * A cuckoo metapage's own fields.  The Bloom ones, nbits and nhashes, mean
 * nothing here (FbfCuckooPlan writes 1 in each, as 1.1 did), but nbits is
 * held to the range a Bloom page allows all the same: the metapage check
 * has always refused a cuckoo metapage with any other (XX002), and a
 * corrupted or forged one must still be refused as it was.
 */
bool
FbfCuckooValidateMeta(const FbfWindowMetaPageData *meta)
{
	return meta->nbits >= 1 && meta->nbits <= FBF_SLICE_MAX_BITS &&
		meta->cuckoo.fp_bits >= CWIN_MIN_FP_BITS &&
		meta->cuckoo.fp_bits <= CWIN_MAX_FP_BITS &&
		meta->nlive <= CWIN_MAX_LIVE && meta->merge_factor == 0;
}

/* a cuckoo window grows when a block refuses an entry: no overfull count */
void
FbfCuckooDeriveMeta(FbfWindowMetaPageData *meta)
{
	meta->overfull = 0;
}

/* An empty partition page of the layout, its base at `epoch`. */
void
FbfCuckooInitPage(Page page, const CwinLayout *layout, int64 epoch)
{
	FbfWindowInitPage(page, FBF_PAGE_ID_CUCKOO);
	cwin_block_init(layout, (uint8 *) PageGetContents(page), epoch);
	((PageHeader) page)->pd_lower =
		PageGetContents(page) + cwin_block_size(layout) - (char *) page;
}

/* An empty partition page of the window's shape, at its epoch. */
void
FbfCuckooInitPageFor(Page page, const FbfWindowMetaPageData *meta)
{
	CwinLayout	layout;

	FbfCuckooLayout(meta, &layout);
	FbfCuckooInitPage(page, &layout, meta->epoch);
}

/* Read and lock a cuckoo partition page. */
Buffer
FbfCuckooReadPart(Relation index, BlockNumber blkno, int mode)
{
	return FbfWindowReadPage(index, blkno, mode, FBF_PAGE_ID_CUCKOO);
}

static inline uint8 *
block_of(Page page)
{
	return (uint8 *) PageGetContents(page);
}

/*
 * A cuckoo block's capacity is this part of the live entries it holds at
 * the target: its false positives grow in proportion to them (cwin_fpp),
 * not as a power, so the margin a Bloom page has at three quarters of its
 * count takes a half here, and the window's growth another half: an epoch
 * that began before a split counts twice its entries in the estimate for
 * every doubling since (its fingerprints spent routing bits), and a window
 * growing for a flood holds such epochs for a retention (at a half, test/t/
 * 044_fair_shares.pl saw the estimate reach the target while it grew).
 * In the period of a split, the weights count the growth instead
 * (cuckoo_weighed_capacity).
 */
#define CUCKOO_CAPACITY_PART	0.3

/*
 * The live entries a cuckoo block holds: its part (above) of those it
 * holds at the target, within a plan's load of its slots.  Shares judge
 * against it (FbfCuckooPageCapacity), and a drain that may put entries off
 * stores no more in a block (FbfCuckooStore), so that a window growing for
 * a load never holds, in the blocks it splits, more than it may keep.
 */
static double
cuckoo_live_capacity(const FbfWindowMetaPageData *meta, const CwinLayout *layout)
{
	return CUCKOO_CAPACITY_PART *
		Min(CWIN_PLAN_LOAD * cwin_nslots(layout),
			meta->target_fpp / cwin_fpp(layout, 1.0, 0));
}

/*
 * The routing bits the fingerprints of live epoch `age` have spent in a
 * window of `nparts` partitions: one for each doubling since the epoch
 * began (cwin_fpp counts them).
 */
static int
epoch_spent_bits(const FbfWindowMetaPageData *meta, int age, uint32 nparts)
{
	uint32		p = meta->cuckoo.parts[age];
	int			used = 0;

	while (p > 0 && p < nparts && used < CWIN_ROUTE_BITS)
	{
		p *= 2;
		used++;
	}
	return used;
}

/*
 * What an entry of each live epoch weighs in a block: two to the routing
 * bits its epoch spent, its false positives beside an entry's that spent
 * none (cwin_fpp).
 */
static void
epoch_weights(const FbfWindowMetaPageData *meta, double *weight)
{
	uint32		nparts = FbfWindowViewParts(meta);
	int			age;

	for (age = 0; age < meta->nlive; age++)
		weight[age] = ldexp(1.0, epoch_spent_bits(meta, age, nparts));
}

/*
 * What a block's live entries may weigh (epoch_weights) once the window
 * has split in the current period: twice its capacity's part of the
 * target, the half CUCKOO_CAPACITY_PART keeps for the growth being what
 * the weights count.  A split halves what a block holds of each epoch and
 * doubles its weight, so it frees none of this: past it, a block takes
 * the period's entries only while their weight keeps its false positives
 * within the target, and the rest wait on the chains for the next period,
 * where the shares divide them, as a Bloom window's split adds no room to
 * the current filter (block_room).  Before, a flood that grew a window
 * planned far below it 64 times within one period took its estimate to
 * 3.4 times the target (test/t/054_share_reserve.pl).
 */
static double
cuckoo_weighed_capacity(const FbfWindowMetaPageData *meta,
						const CwinLayout *layout)
{
	return 2 * CUCKOO_CAPACITY_PART * meta->target_fpp /
		cwin_fpp(layout, 1.0, 0);
}

/*
 * Has a block room for one more entry of the current epoch (weighing
 * weight0)?  FBF_STORED_ALL if so; else what the entry waits for.  Where
 * the window split in this period (weight0 > 1), the next period: a split
 * adds no room for the entries of the period it comes in, since it halves
 * what a block holds of each epoch and doubles its weight, so a block
 * takes them up to its count of entries and up to their weight
 * (cuckoo_weighed_capacity), and a further split for the count would
 * double the window for almost none.  Otherwise more bits, where it holds
 * cuckoo_live_capacity's count (a split spreads them).  In a later period
 * an entry weighs one, and the block takes it by its count: what the
 * older epochs weigh beyond that is the growth's cost, which their expiry
 * pays (each period adds at most its capacity to it).  Entries kept
 * waiting for the older epochs to expire would be remembered that much
 * past the retention (stored as of the epoch they are drained in).  While
 * a split is under way a page it has not reached holds its children's
 * entries, which the weights (by the partitions of the view) would count
 * as spent: the entry waits for the split to finish, as for more bits.
 */
static FbfStored
block_room(const FbfWindowMetaPageData *meta, uint32 count, double weighed,
		   double weight0, double limit, double weighed_limit)
{
	bool		full;

	if (weight0 <= 1)
		return count + 1 > limit ? FBF_STORED_GROW : FBF_STORED_ALL;
	full = count + 1 > limit || weighed + weight0 > weighed_limit;
	if (!full)
		return FBF_STORED_ALL;
	return meta->split_start != InvalidBlockNumber ?
		FBF_STORED_GROW : FBF_STORED_WAITS;
}

/*
 * Is the operation live in the window's blocks?  One page, share-locked.
 * The caller holds the metapage (share or exclusive).  Raises *lane (if
 * not NULL, FbfLane) to full if the block holds what a drain may store in
 * it (block_room); a block has no overfull count (the window grows when a
 * drain leaves entries on their chain for want of slots).
 */
bool
FbfCuckooContains(Relation index, const FbfWindowMetaPageData *meta,
				  const FbfHash *hash, FbfLane *lane)
{
	CwinLayout	layout;
	CwinEpochs	epochs;
	CwinKey		key;
	Buffer		buf;
	bool		found;

	FbfCuckooLayout(meta, &layout);
	FbfCuckooEpochs(meta, &epochs);
	cwin_key(&layout, &epochs, hash, &key);
	buf = FbfCuckooReadPart(index, FbfWindowPartBlock(meta, hash),
							BUFFER_LOCK_SHARE);
	found = cwin_block_contains(&layout, block_of(BufferGetPage(buf)),
								&epochs, &key);
	if (lane != NULL)
	{
		const uint8 *block = block_of(BufferGetPage(buf));
		double		weight[CWIN_MAX_LIVE];

		double		weighed = 0;

		/* weighed only where it counts: after a split in this period */
		epoch_weights(meta, weight);
		if (weight[0] > 1)
			weighed = cwin_block_weighed_live(block, &epochs, weight);
		if (block_room(meta, cwin_block_live(block, &epochs), weighed, weight[0],
					   cuckoo_live_capacity(meta, &layout),
					   cuckoo_weighed_capacity(meta, &layout)) != FBF_STORED_ALL)
			*lane = Max(*lane, FBF_LANE_FULL);
	}
	UnlockReleaseBuffer(buf);
	return found;
}

/*
 * The cuckoo store of a drain round (FbfFilterRoutine.store): each
 * committed entry targeted this round is stored with cwin_block_insert, as
 * of the current epoch, in the page's copy; an entry its block refuses,
 * or, with may_defer, one its block has no room for under the target,
 * stays on the pending page (never dropped, whether or not the drain may
 * put entries off): the result says whether it waits for the window to
 * grow or for the next period (below).  An annex (never targeted) goes
 * with its entry (FbfPendingKeepAnnexes).  What it stores is handed to
 * `decided`; then one WAL record of changed byte ranges for the pending
 * page and the partition pages (a page the drain sweeps: a full image),
 * none if it stores and drops nothing.  Locks: the partition pages
 * exclusively, in block order; the caller holds the metapage share-locked
 * and pbuf exclusive-locked.
 */
FbfStored
FbfCuckooStore(Relation index, const FbfWindowMetaPageData *meta, Buffer pbuf,
			   const FbfPendingEntry *entries, int n, uint8 *keep,
			   const BlockNumber *target, const BlockNumber *blocks,
			   int nblocks, bool may_defer, FbfStoreDecided decided,
			   void *decided_arg)
{
	CwinLayout	layout;
	CwinEpochs	epochs;
	Buffer		bufs[FBF_DRAIN_MAX_PAGES];
	Page		copies[FBF_DRAIN_MAX_PAGES];
	FbfStored	stored = FBF_STORED_ALL;
	double		live[FBF_DRAIN_MAX_PAGES];	/* weighed (epoch_weights) */
	uint32		count[FBF_DRAIN_MAX_PAGES]; /* not */
	double		weight[CWIN_MAX_LIVE];
	double		limit;
	double		weighed_limit;
	FbfXLogState *state;
	Page		pcopy;
	FbfPendingEntry *out;
	int			i;
	int			b;

	FbfCuckooLayout(meta, &layout);
	FbfCuckooEpochs(meta, &epochs);
	state = FbfXLogStart(index);
	pcopy = FbfXLogRegisterBuffer(state, pbuf, 0);
	for (b = 0; b < nblocks; b++)
	{
		bufs[b] = FbfCuckooReadPart(index, blocks[b], BUFFER_LOCK_EXCLUSIVE);
		/* a sweep empties many slots: log the page whole */
		copies[b] = FbfXLogRegisterBuffer(state, bufs[b],
										  cwin_block_needs_sweep(block_of(BufferGetPage(bufs[b])),
																 epochs.epoch) ?
										  FBF_XLOG_FULL_IMAGE : 0);
	}

	/* what each block holds, against what it may */
	limit = cuckoo_live_capacity(meta, &layout);
	weighed_limit = cuckoo_weighed_capacity(meta, &layout);
	epoch_weights(meta, weight);
	for (b = 0; b < nblocks; b++)
	{
		live[b] = cwin_block_weighed_live(block_of(copies[b]), &epochs, weight);
		count[b] = cwin_block_live(block_of(copies[b]), &epochs);
	}

	/*
	 * Store them (in the copies, applied and logged at once).  With
	 * may_defer, a block holding what it may takes no more (block_room):
	 * the entry waits, rather than raise the block's false positives for
	 * as long as its entries live (a split spreads the entries, but what
	 * they cost in fingerprint bits stays), for the window to grow (or, at
	 * its cap, for room) where the block holds its count of entries, for
	 * the next period where their weight fills it: a split for each such
	 * drain would take the window to its cap for one period's flood.
	 */
	for (i = 0; i < n; i++)
	{
		FbfHash		h;
		CwinKey		key;

		if (target[i] == InvalidBlockNumber)
			continue;
		for (b = 0; blocks[b] != target[i]; b++)
			;
		if (may_defer)
		{
			FbfStored	room = block_room(meta, count[b], live[b], weight[0],
										  limit, weighed_limit);

			if (room != FBF_STORED_ALL)
			{
				/* stays pending, as below */
				stored = Max(stored, room);
				continue;
			}
		}
		h.h1 = entries[i].h1;
		h.h2 = entries[i].h2;
		cwin_key(&layout, &epochs, &h, &key);
		if (cwin_block_insert(&layout, block_of(copies[b]), &epochs, &key) >= 0)
		{
			keep[i] = 0;
			live[b] += weight[0];
			count[b]++;
		}
		else
			stored = FBF_STORED_GROW;	/* stays pending for more bits */
	}

	/*
	 * The pending page keeps the rest, in order, annexes with their
	 * entries.  A round that stores nothing and drops nothing (every entry
	 * waits: a chain full of them is drained again by each operation that
	 * finds it full) changes no page, and logs nothing.
	 */
	decided(decided_arg, keep);
	for (i = 0; i < n && keep[i]; i++)
		;
	if (i == n)
		FbfXLogAbort(state);
	else
	{
		out = FbfWindowPageGetEntries(pcopy, &n);
		FbfPendingKeepAnnexes(out, n, keep);
		FbfPendingPageCompact(pcopy, keep, n);
		FbfXLogFinish(state);
	}

	for (b = 0; b < nblocks; b++)
		UnlockReleaseBuffer(bufs[b]);
	return stored;
}

/*
 * Split partition page `src` (of a window of meta->nparts partitions) into
 * the `factor` pages dst[], each written whole and logged as a full image.
 * The caller holds the metapage exclusively, src share and dst[]
 * exclusively.
 */
static void
split_part(Relation index, const FbfWindowMetaPageData *meta,
		   Buffer src, const Buffer *dst, uint32 factor)
{
	CwinLayout	layout;
	CwinEpochs	epochs;
	uint8	   *children[CWIN_MAX_SPLIT];
	PGAlignedBlock *images;
	const char *why = NULL;
	uint32		f;

	FbfCuckooLayout(meta, &layout);
	FbfCuckooEpochs(meta, &epochs);
	images = palloc(sizeof(PGAlignedBlock) * factor);
	for (f = 0; f < factor; f++)
	{
		FbfCuckooInitPage(images[f].data, &layout, epochs.epoch);
		children[f] = block_of(images[f].data);
	}
	if (cwin_block_split(&layout, block_of(BufferGetPage(src)), &epochs,
						 meta->nparts, factor, children, &why) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("cannot split a partition of cuckoo window \"%s\"",
						RelationGetRelationName(index)),
				 errdetail("%s", why)));

	START_CRIT_SECTION();
	for (f = 0; f < factor; f++)
	{
		memcpy(BufferGetPage(dst[f]), images[f].data, BLCKSZ);
		MarkBufferDirty(dst[f]);
		if (RelationNeedsWAL(index))
			log_newpage_buffer(dst[f], true);
	}
	END_CRIT_SECTION();
	pfree(images);
}

/*
 * Split partition page `src` into dst_start .. dst_start + factor - 1,
 * each live entry to its child by its routing bits
 * (FbfFilterRoutine.split_page): src share, the children exclusive; the
 * caller holds the metapage exclusively.
 */
void
FbfCuckooSplitPage(Relation index, const FbfWindowMetaPageData *meta,
				   BlockNumber src, BlockNumber dst_start, uint32 factor)
{
	Buffer		sbuf = FbfCuckooReadPart(index, src, BUFFER_LOCK_SHARE);
	Buffer		dst[FBF_SPLIT_MAX_FACTOR];
	uint32		f;

	for (f = 0; f < factor; f++)
		dst[f] = FbfCuckooReadPart(index, dst_start + f, BUFFER_LOCK_EXCLUSIVE);
	split_part(index, meta, sbuf, dst, factor);
	for (f = 0; f < factor; f++)
		UnlockReleaseBuffer(dst[f]);
	UnlockReleaseBuffer(sbuf);
}

/*
 * The factor to split a cuckoo window by, called for because a block
 * refused an entry or the fullest block passed CWIN_SPLIT_LOAD: at least
 * 2, and as many more doublings as make the blocks hold `rate` (per
 * microsecond; <= 0: unknown) over the live epochs as a plan's must
 * (mean + 3 sqrt(mean) within CWIN_PLAN_LOAD of the slots).  Within
 * fbf.max_filter_size; 1 and *capped if not even a doubling fits.
 */
uint32
FbfCuckooSplitFactor(const FbfWindowMetaPageData *meta, double rate,
					 double increase_at, bool *capped)
{
	CwinLayout	layout;
	double		peak = rate > 0 ? rate * meta->period * meta->nlive : 0;
	uint64		max_pages = FbfWindowCapPages();
	uint32		factor = 2;

	FbfCuckooLayout(meta, &layout);
	while (factor < CWIN_MAX_SPLIT)
	{
		double		mean = peak / ((double) meta->nparts * factor);

		if (mean + CWIN_PLAN_SPREAD * sqrt(mean) <= CWIN_PLAN_LOAD * cwin_nslots(&layout))
			break;
		factor *= 2;
	}
	/* the pages after the split: chains, metapage, old and new partitions */
	while (factor > 1 &&
		   (uint64) 1 + meta->nchains + (uint64) meta->nparts * (factor + 1) > max_pages)
		factor /= 2;
	*capped = factor < 2;
	return factor;
}

/*
 * The partitions a cuckoo window has once grown to `max_pages`: its own
 * times the largest power of two whose split fits, the old partitions
 * beside the new ones, as FbfCuckooSplitFactor grows it.
 */
uint32
FbfCuckooPartsAtCap(const FbfWindowMetaPageData *meta, uint64 max_pages)
{
	return FbfWindowPartsWithin(meta->nparts, meta->nchains, max_pages, 3);
}

/*
 * New operations one cuckoo block takes in a period: what it holds
 * (cuckoo_live_capacity) over the live epochs its entries stay for.
 */
double
FbfCuckooPageCapacity(const FbfWindowMetaPageData *meta)
{
	CwinLayout	layout;

	FbfCuckooLayout(meta, &layout);
	return cuckoo_live_capacity(meta, &layout) / Max(meta->nlive, 1);
}

/*
 * Live entries of each live epoch in each partition of the readers' view,
 * counts[i * nparts + v] as FbfWindowCounts gives them for a Bloom
 * window, from the blocks' per-tag counts (an entry copied to several
 * children, its routing bits used up, counts in each: rare, and only
 * within a retention of eight doublings).  *max_load gets the fullest
 * page's live load.
 */
void
FbfCuckooCounts(Relation index, const FbfWindowMetaPageData *meta,
				uint64 *counts, uint64 *distinct, double *max_load)
{
	CwinLayout	layout;
	uint32		nparts = FbfWindowViewParts(meta);
	uint32		v;
	int			i;

	FbfCuckooLayout(meta, &layout);
	if (distinct != NULL)
		memset(distinct, 0, sizeof(uint64) * meta->nlive);
	if (max_load != NULL)
		*max_load = 0;
	for (v = 0; v < nparts; v++)
	{
		BlockNumber blkno = FbfWindowViewBlock(meta, v);
		Buffer		buf = FbfCuckooReadPart(index, blkno, BUFFER_LOCK_SHARE);
		const CwinHeader *h = cwin_header_c(block_of(BufferGetPage(buf)));
		bool		first = v == 0 || FbfWindowViewBlock(meta, v - 1) != blkno;
		uint64		live = 0;

		for (i = 0; i < meta->nlive; i++)
		{
			int64		e = meta->epoch - i;
			uint32		c = 0;

			/* epoch e's tag counts its entries if e is within the base's run */
			if (e >= h->base && e <= h->base + (CWIN_TAGS - 1))
				c = h->count[e & (CWIN_TAGS - 1)];
			counts[i * nparts + v] = c;
			live += c;
			if (distinct != NULL && first)
				distinct[i] += c;
		}
		if (max_load != NULL)
			*max_load = Max(*max_load, (double) live / cwin_nslots(&layout));
		UnlockReleaseBuffer(buf);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * fbf_counter_stats of a cuckoo window (FbfFilterRoutine.stats): the bits
 * of its blocks, no hash functions, its live load (its live entries,
 * counts as FbfCuckooCounts gives them, over its slots) and fingerprint
 * bits.
 */
void
FbfCuckooStats(const FbfWindowMetaPageData *meta, const uint64 *counts,
			   FbfWindowStats *stats)
{
	CwinLayout	layout;
	uint32		nparts = FbfWindowViewParts(meta);
	uint64		live = 0;
	uint32		v;
	int			i;

	FbfCuckooLayout(meta, &layout);
	for (v = 0; v < nparts; v++)
		for (i = 0; i < meta->nlive; i++)
			live += counts[i * nparts + v];
	stats->bits = (int64) cwin_block_size(&layout) * 8 * nparts;
	stats->has_nhashes = false;
	stats->load = nparts > 0 ? (double) live / ((double) cwin_nslots(&layout) * nparts) : 0;
	stats->has_load = true;
	stats->fp_bits = (int) meta->cuckoo.fp_bits;
	stats->has_fp_bits = true;
}

/*
 * The estimated false-positive rate of a check, the mean over the view's
 * partitions of cwin_fpp at each one's live load, counting the routing
 * bits the entries of the oldest key partitions have used.
 */
double
FbfCuckooEstimateFpp(const FbfWindowMetaPageData *meta, const uint64 *counts)
{
	CwinLayout	layout;
	uint32		nparts = FbfWindowViewParts(meta);
	double		sum = 0;
	uint32		v;
	int			i;

	FbfCuckooLayout(meta, &layout);
	for (v = 0; v < nparts; v++)
	{
		double		fpp = 0;

		for (i = 0; i < meta->nlive; i++)
		{
			double		c = (double) counts[i * nparts + v];

			/* each epoch's share of the load, at its useful bits */
			fpp += cwin_fpp(&layout, c, epoch_spent_bits(meta, i, nparts));
		}
		sum += fpp;
	}
	return nparts > 0 ? sum / nparts : 0;
}

/*
 * Do two metapages of a cuckoo window give its pages the same shape: the
 * same blocks (fingerprint bits, buckets) and the same key partitions for
 * each live epoch?
 */
bool
FbfCuckooSameShape(const FbfWindowMetaPageData *then,
				   const FbfWindowMetaPageData *now)
{
	return memcmp(&then->cuckoo, &now->cuckoo, sizeof(then->cuckoo)) == 0;
}
