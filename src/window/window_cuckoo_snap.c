/*-------------------------------------------------------------------------
 *
 * window_cuckoo_snap.c
 *	  A cuckoo window's snapshot (core/cwin_snap.h, the second kind of
 *	  `fbf` value): taken from a live window for fbf_snapshot, and loaded
 *	  back by fbf_counter_load, so that a counter or dedup table created
 *	  with filter => 'cuckoo' keeps what it remembers across dump and
 *	  restore as a Bloom window does (window_bloom_snap.c).  The cuckoo
 *	  format's snapshot, snapshot_of and load, and its routine
 *	  (FbfCuckooRoutine, window_format.h), every member in one place.
 *
 * The routine is here, not in window_cuckoo.c, because this file already
 * calls window_cuckoo.c (the blocks' layout, epochs, initialisation and
 * reads): its references to the page operations go the same way, and
 * window_cuckoo.c names nothing of this file, so the two files have no
 * cycle.  Defined in window_cuckoo.c, it would name this file's
 * operations, which call back.
 *
 * Taking one.  The snapshot holds the live epochs as the metapage has
 * them (epoch, live epochs, each one's key partitions), every partition
 * block of the readers' view byte for byte, and the committed entries of
 * the pending chains as its waiting operations, sorted: what a lookup in
 * the window would find.  As for a Bloom window, the window is read chain
 * by chain, each chain share-locked while its partition pages and then
 * its entries are read: a drain moves entries from one chain into that
 * chain's partition pages in one step under the chain's exclusive lock, so
 * every entry is seen in a block or on its chain, never in neither.
 * Partition v of the view belongs to chain v / (nparts / nchains).  While
 * a split is under way, a partition page not yet split stands for the F
 * partitions of the view it will become; the snapshot holds the F blocks
 * the split would write (cwin_block_split, in memory), so that it always
 * has one block per partition.  Birth times are taken on the wall clock,
 * as a Bloom snapshot's are.
 *
 * Loading one: adoption only.  A cuckoo entry carries its epoch in a 4-bit
 * tag and was keyed with the partitions of its epoch, so entries cannot be
 * moved to other epochs or ORed into a populated block as Bloom bits can:
 * a snapshot is loaded into an empty cuckoo window (as a window just
 * restored by pg_restore is), which takes its shape, epochs and blocks
 * whole, and anything else is refused before a page is written.
 *
 *	- Epochs.  The metapage takes the snapshot's epoch, moved forward by a
 *	  multiple of 16 if the window's own epoch is later (epochs never go
 *	  back), and every block's sweep base by as much: a tag is an epoch
 *	  mod 16, so every entry keeps its tag and decodes to its own epoch,
 *	  shifted alike.  The live epochs' key partitions are the snapshot's,
 *	  which its entries' fingerprints were computed with.
 *	- Time.  Birth times are converted to window time as for a Bloom
 *	  adoption (FbfLoadTimesOf), so refreshes that came due while the
 *	  snapshot waited in a dump expire its epochs on the original's
 *	  schedule; a snapshot all of whose epochs are due (FbfLoadDue) loads
 *	  nothing, and one whose current epoch is past its period turns once
 *	  as it is adopted (FbfWindowAdopt), as a Bloom snapshot does.
 *	- Waiting operations.  They are committed operations the original had
 *	  not drained yet; a drain would store them as of its current epoch, so
 *	  the load stores them in their blocks as of the snapshot's epoch (the
 *	  latest they could be in).  A block that refuses one is split, every
 *	  block by two in memory, as a refused drain makes the live window
 *	  grow, until all are stored, within fbf.max_filter_size (else the load
 *	  is refused).  None goes on a pending chain: an entry there needs an
 *	  xid whose commit is known, and the loading transaction's own could
 *	  still abort after the pages were written.
 *	- Pages.  New partition pages are appended, each written whole (a
 *	  full-page image), then one metapage record switches to them; a crash
 *	  before it leaves the old, empty window and some unused pages.  The
 *	  old pages become the free run for the next split.
 *
 * Locks: as window_bloom_snap.c: the caller holds RowExclusiveLock on
 * the table, the load holds the metapage exclusively throughout;
 * appending takes the relation's extension lock.  A snapshot holds one chain share at a time
 * and, under it, one partition page share at a time; the metapage only
 * to check that it has not changed, before each chain and after the last
 * (FbfSnapshotRead, window_int.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "type/fbf_value.h"
#include "window/window_format.h"
#include "window/window_int.h"

static inline uint8 *
block_of(Page page)
{
	return (uint8 *) PageGetContents(page);
}

/* ---- taking a snapshot ---- */

/*
 * Copy the blocks of view partitions lo .. lo + n - 1, all in the page
 * blkno: the page itself (n = 1), or, for a page a split has not reached,
 * the n children the split will make of it.
 */
static void
snapshot_page(Relation index, const FbfWindowMetaPageData *meta,
			  const CwinLayout *layout, const CwinEpochs *epochs,
			  BlockNumber blkno, CwinSnap *s, uint32 lo, uint32 n)
{
	Buffer		buf = FbfCuckooReadPart(index, blkno, BUFFER_LOCK_SHARE);
	const uint8 *block = block_of(BufferGetPage(buf));

	if (n == 1)
		memcpy(cwin_snap_block(s, lo), block, cwin_block_size(layout));
	else
	{
		uint8	   *children[CWIN_MAX_SPLIT];
		const char *why = NULL;
		uint32		j;

		for (j = 0; j < n; j++)
		{
			children[j] = cwin_snap_block(s, lo + j);
			cwin_block_init(layout, children[j], epochs->epoch);
		}
		if (cwin_block_split(layout, block, epochs, meta->nparts, n,
							 children, &why) < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("cannot read a partition of cuckoo window \"%s\"",
							RelationGetRelationName(index)),
					 errdetail("%s", why)));
	}
	UnlockReleaseBuffer(buf);
}

/* The committed operations still on the chains, as a snapshot reads them. */
typedef struct Waiting
{
	FbfHash    *hashes;
	size_t		n;
	size_t		cap;
} Waiting;

/* FbfChainCommitted's callback: a committed entry waits in the snapshot */
static void
add_waiting(const FbfHash *hash, void *arg)
{
	Waiting    *w = arg;

	if (w->n == w->cap)
	{
		w->cap *= 2;
		w->hashes = repalloc_huge(w->hashes, sizeof(FbfHash) * w->cap);
	}
	w->hashes[w->n++] = *hash;
}

/*
 * The cuckoo window as a snapshot (see the file header), a CwinSnap in
 * memory from `mem`, of the metapage read->meta, each chain read under
 * FbfSnapshotLockChain (window_read.c); NULL, the memory let go, if the
 * metapage changed in the meantime (the caller takes the snapshot again).
 * *pending gets the entries still in flight (not part of the snapshot).
 */
static void *
FbfCuckooSnapshot(FbfSnapshotRead *read, const FbfSnapshotMemory *mem,
				  uint64 *pending)
{
	Relation	index = read->index;
	const FbfWindowMetaPageData *meta = &read->meta;
	CwinLayout	layout;
	CwinEpochs	epochs;
	uint32		nview = FbfWindowViewParts(meta);
	uint32		per_chain = nview / meta->nchains;
	uint32		factor = meta->split_next > 0 ? meta->split_factor : 1;
	CwinSnap   *s;
	Waiting		waiting = {palloc(sizeof(FbfHash) * 64), 0, 64};
	uint32		c;
	int			i;

	FbfCuckooLayout(meta, &layout);
	FbfCuckooEpochs(meta, &epochs);
	s = mem->alloc(cwin_snap_size(&layout, nview, 0), mem->arg);
	cwin_snap_init(s, &layout, nview, 0);
	s->nlive = (uint32) meta->nlive;
	s->epoch = meta->epoch;
	s->period = meta->period;
	for (i = 0; i < meta->nlive; i++)
	{
		s->parts[i] = meta->cuckoo.parts[i];
		s->born_at[i] = FbfWindowWallTime(meta, meta->born_at[i]);
	}
	*pending = 0;
	for (c = 0; c < meta->nchains; c++)
	{
		uint32		v;

		if (!FbfSnapshotLockChain(read, c))
		{
			mem->free(s, mem->arg);
			pfree(waiting.hashes);
			return NULL;
		}
		for (v = c * per_chain; v < (c + 1) * per_chain;)
		{
			BlockNumber blkno = FbfWindowViewBlock(meta, v);
			/* an unsplit page stands for `factor` aligned view partitions */
			uint32		n = factor > 1 && v / factor >= meta->split_next ? factor : 1;

			snapshot_page(index, meta, &layout, &epochs, blkno, s, v, n);
			v += n;
		}
		*pending += FbfChainCommitted(meta, &read->chain, add_waiting, &waiting);
		if (!FbfSnapshotReleaseChain(read, c == meta->nchains - 1))
		{
			mem->free(s, mem->arg);
			pfree(waiting.hashes);
			return NULL;
		}
		FbfSnapshotCheckCancel(read);
	}

	/* the waiting operations after the blocks, sorted */
	waiting.n = cwin_hashes_sort_unique(waiting.hashes, waiting.n);
	s = mem->resize(s, cwin_snap_size(&layout, nview, waiting.n), mem->arg);
	s->ndeferred = (uint32) waiting.n;
	memcpy(cwin_snap_deferred(s), waiting.hashes, sizeof(FbfHash) * waiting.n);
	pfree(waiting.hashes);

#ifdef USE_ASSERT_CHECKING
	{
		const char *why;

		if (!cwin_snap_check(s, &why))
			elog(ERROR, "fbf: the snapshot of \"%s\" does not check: %s",
				 RelationGetRelationName(index), why);
	}
#endif
	return s;
}

/* The CwinSnap an `fbf` value holds, if it is a cuckoo window's. */
static const void *
FbfCuckooSnapshotOf(const struct varlena *value)
{
	if (!FbfValueIsCuckoo(value))
		return NULL;
	return FbfValueGetCwinSnap(value);
}

/* ---- loading one ---- */

/* The blocks being built for the window, in memory. */
typedef struct LoadBlocks
{
	CwinLayout	layout;
	CwinEpochs	epochs;
	size_t		block_size;
	uint32		nparts;
	uint8	   *blocks;			/* nparts * block_size */
} LoadBlocks;

static uint64
pages_needed(const FbfWindowMetaPageData *meta, uint32 nparts)
{
	return 1 + (uint64) meta->nchains + nparts;
}

static void
refuse_size(Relation index, const FbfWindowMetaPageData *meta, uint32 nparts,
			const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("cannot load the snapshot into counter \"%s\"",
					get_rel_name(index->rd_index->indrelid)),
			 errdetail("%s %u partitions need %llu kB, more than fbf.max_filter_size (%d kB).",
					   what, nparts,
					   (unsigned long long) (pages_needed(meta, nparts) * BLCKSZ / 1024),
					   fbf_max_filter_size_kb),
			 errhint("Raise fbf.max_filter_size.")));
}

/*
 * Store the waiting operations in their blocks, as of the current epoch;
 * while a block refuses one, split every block by two, as the live window
 * grows when a drain is refused.  Refused (nothing written yet) if that
 * would pass fbf.max_filter_size.
 */
static void
store_waiting(Relation index, Buffer metabuf, const FbfWindowMetaPageData *meta,
			  LoadBlocks *lb, const FbfHash *waiting, uint32 nwaiting)
{
	FbfHash    *left = palloc(sizeof(FbfHash) * Max(nwaiting, 1));
	uint32		nleft = nwaiting;
	uint32		i;

	memcpy(left, waiting, sizeof(FbfHash) * nwaiting);
	for (;;)
	{
		uint32		kept = 0;
		uint8	   *children;
		const char *why = NULL;
		uint32		q;

		for (i = 0; i < nleft; i++)
		{
			CwinKey		key;
			uint8	   *block = lb->blocks +
				(size_t) fbf_part(&left[i], lb->nparts) * lb->block_size;

			cwin_key(&lb->layout, &lb->epochs, &left[i], &key);
			if (cwin_block_insert(&lb->layout, block, &lb->epochs, &key) < 0)
				left[kept++] = left[i];
		}
		nleft = kept;
		if (nleft == 0)
			break;

		/* grow: every block split by two (entries keep their slots) */
		if ((uint64) lb->nparts * 2 > FBF_MAX_PARTS ||
			pages_needed(meta, lb->nparts * 2) * BLCKSZ > (uint64) fbf_max_filter_size_kb * 1024)
			refuse_size(index, meta, lb->nparts * 2,
						"The snapshot's waiting operations do not fit in its blocks; split to hold them, its");
		children = palloc_extended(lb->block_size * lb->nparts * 2, MCXT_ALLOC_HUGE);
		for (q = 0; q < lb->nparts; q++)
		{
			uint8	   *two[2];

			two[0] = children + (size_t) (2 * q) * lb->block_size;
			two[1] = two[0] + lb->block_size;
			cwin_block_init(&lb->layout, two[0], lb->epochs.epoch);
			cwin_block_init(&lb->layout, two[1], lb->epochs.epoch);
			if (cwin_block_split(&lb->layout, lb->blocks + (size_t) q * lb->block_size,
								 &lb->epochs, lb->nparts, 2, two, &why) < 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("cannot load the snapshot into counter \"%s\"",
								get_rel_name(index->rd_index->indrelid)),
						 errdetail("%s", why)));
		}
		pfree(lb->blocks);
		lb->blocks = children;
		lb->nparts *= 2;
		FbfWindowCheckCancel(metabuf);
	}
	pfree(left);
}

/* FbfWindowAdopt's page p for a cuckoo snapshot: its block, byte for byte */
static void
adopt_page(char *page, const FbfWindowMetaPageData *new, uint32 p, void *arg)
{
	const LoadBlocks *lb = arg;

	FbfCuckooInitPage(page, &lb->layout, new->epoch);
	memcpy(block_of(page), lb->blocks + (size_t) p * lb->block_size,
		   lb->block_size);
}

/*
 * Write the blocks as new partition pages and switch the metapage to
 * them, with the snapshot's epochs and times (see the file header).  The
 * caller holds metabuf exclusively and has checked that the window is
 * empty and may take the shape.
 */
static void
adopt(Relation index, Buffer metabuf, FbfWindowMetaPageData *meta,
	  const CwinSnap *s, const LoadBlocks *lb, const FbfLoadTimes *t,
	  const FbfHashKey *key, bool public_too, const unsigned char *streams)
{
	FbfWindowMetaPageData new = *meta;
	int			i;

	new.cuckoo.fp_bits = lb->layout.fp_bits;
	new.cuckoo.nbuckets = lb->layout.nbuckets;
	new.nparts = lb->nparts;
	if (lb->layout.fp_bits != meta->cuckoo.fp_bits ||
		lb->nparts % meta->base_nparts != 0)
		new.base_nparts = lb->nparts;
	new.nfilters = (uint16) Max(meta->nfilters, (int) s->nlive);
	new.nslots = new.nfilters;
	new.nlive = (uint16) s->nlive;
	new.epoch = lb->epochs.epoch;
	new.period = s->period;
	for (i = 0; i < FBF_MAX_FILTERS; i++)
	{
		new.ring[i] = (uint8) (i < new.nfilters ? i : 0);
		new.born_at[i] = i < (int) s->nlive ? t->born[i] : 0;
	}
	for (i = 0; i < CWIN_MAX_LIVE; i++)
		new.cuckoo.parts[i] = s->parts[Min(i, (int) s->nlive - 1)];
	FbfWindowAdoptKey(&new, key, public_too, t->now);
	FbfWindowAdopt(index, metabuf, meta, &new, adopt_page, (void *) lb, t,
				   FbfLoadKeepsStreams(&new, key, public_too) ? streams : NULL);
}

/*
 * Load a cuckoo window's snapshot, taken under `key` (zero: the public
 * hash; public_too: it also holds operations recorded under that), into
 * the window of `index`: adopted whole, key included (window_key.c), if
 * the window is an empty cuckoo window, else refused before anything is
 * written (see the file header).  The caller holds RowExclusiveLock on the
 * table and has checked that the user owns it.
 */
static FbfLoadResult
FbfCuckooLoad(Relation index, const void *snapshot, const FbfHashKey *key,
			  bool public_too, const unsigned char *streams)
{
	const CwinSnap *s = snapshot;
	FbfWindowMetaPageData meta;
	Buffer		metabuf;
	FbfLoadTimes t;
	CwinLayout	page_layout;
	LoadBlocks	lb;
	const char *why = NULL;
	int64		delta = 0;
	FbfLoadResult result;
	uint32		p;

	FbfLoadCheckTimes(index, s->born_at, (int) s->nlive, s->period);

	FbfWindowReadMeta(index, &meta);
	if (meta.filter != FBF_FILTER_CUCKOO)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot load a cuckoo window's snapshot into counter \"%s\"",
						get_rel_name(index->rd_index->indrelid)),
				 errdetail("The snapshot was taken of a window created with filter => 'cuckoo'; this counter's window holds Bloom filters."),
				 errhint("Load it into a counter or dedup table created with filter => 'cuckoo'.")));

	/* the snapshot's blocks must be a window page's (its f is in range) */
	if (!cwin_layout_init(&page_layout, FBF_PAGE_CONTENT_BYTES, s->fp_bits,
						  CWIN_MAX_KICKS, &why))
		elog(ERROR, "fbf: no page layout for %u-bit fingerprints: %s",
			 s->fp_bits, why);
	if (page_layout.nbuckets != s->nbuckets)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot load the snapshot into counter \"%s\"",
						get_rel_name(index->rd_index->indrelid)),
				 errdetail("Its blocks have %u buckets of %u-bit fingerprints; a window page holds %u.",
						   s->nbuckets, s->fp_bits, page_layout.nbuckets),
				 errhint("Load values taken by fbf_snapshot().")));
	if (pages_needed(&meta, s->nparts) * BLCKSZ > (uint64) fbf_max_filter_size_kb * 1024)
		refuse_size(index, &meta, s->nparts, "The snapshot's");

	metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_EXCLUSIVE, &meta);
	FbfLoadTimesOf(&meta, s->born_at, (int) s->nlive, &t);
	if (FbfLoadDue(&t, (int) s->nlive, (int) s->nlive, s->period,
				   meta.retention) == 0)
	{
		/* every epoch aged out: nothing to load (window_adopt.c, "Time") */
		UnlockReleaseBuffer(metabuf);
		result.adopted = false;
		result.filters = 0;
		return result;
	}
	if (!FbfWindowIsEmpty(index, &meta, t.now))
	{
		UnlockReleaseBuffer(metabuf);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot load the snapshot into counter \"%s\": its cuckoo window is not empty",
						get_rel_name(index->rd_index->indrelid)),
				 errdetail("A cuckoo window's snapshot is adopted whole by an empty window; its entries, tagged with their epochs, cannot be merged into one that holds operations."),
				 errhint("Load it into a new counter created with the same options, before it applies any operation.")));
	}

	/* the blocks in memory, epochs moved by a multiple of 16 if need be */
	lb.layout = page_layout;
	cwin_snap_epochs(s, &lb.epochs);
	if (meta.epoch > s->epoch)
		delta = (meta.epoch - s->epoch + CWIN_TAGS - 1) / CWIN_TAGS * CWIN_TAGS;
	lb.epochs.epoch += delta;
	lb.block_size = cwin_block_size(&page_layout);
	lb.nparts = s->nparts;
	lb.blocks = palloc_extended(lb.block_size * s->nparts, MCXT_ALLOC_HUGE);
	memcpy(lb.blocks, cwin_snap_block(s, 0), lb.block_size * s->nparts);
	for (p = 0; p < lb.nparts; p++)
		cwin_header(lb.blocks + (size_t) p * lb.block_size)->base += delta;
	store_waiting(index, metabuf, &meta, &lb, cwin_snap_deferred(s), s->ndeferred);

	adopt(index, metabuf, &meta, s, &lb, &t, key, public_too, streams);
	UnlockReleaseBuffer(metabuf);
	pfree(lb.blocks);
	result.adopted = true;
	result.filters = (int) s->nlive;
	return result;
}

/*
 * The cuckoo format's routine (window_format.h): its capabilities, the
 * page operations of window_cuckoo.c and the snapshot operations above.
 */
const FbfFilterRoutine FbfCuckooRoutine = {
	.name = "cuckoo",
	.page_id = FBF_PAGE_ID_CUCKOO,
	.can_merge = false,
	.can_resize = false,
	.resize_detail = "A cuckoo window keeps 16 live epochs, the most its 4-bit tags tell apart, and grows by splitting its partitions.",
	.split_load = CWIN_SPLIT_LOAD,
	.store_pages = FBF_XLOG_MAX_PAGES - 1,	/* generic page changes */
	.plan = FbfCuckooPlan,
	.spread = FbfCuckooSpread,
	.validate_meta = FbfCuckooValidateMeta,
	.same_shape = FbfCuckooSameShape,
	.derive_meta = FbfCuckooDeriveMeta,
	.rotate = FbfCuckooRotate,
	.init_page = FbfCuckooInitPageFor,
	.contains = FbfCuckooContains,
	.store = FbfCuckooStore,
	.split_page = FbfCuckooSplitPage,
	.merge_pages = NULL,
	.counts = FbfCuckooCounts,
	.estimate_fpp = FbfCuckooEstimateFpp,
	.split_factor = FbfCuckooSplitFactor,
	.merge_factor = NULL,
	.parts_at_cap = FbfCuckooPartsAtCap,
	.page_capacity = FbfCuckooPageCapacity,
	.stats = FbfCuckooStats,
	.snapshot = FbfCuckooSnapshot,
	.snapshot_of = FbfCuckooSnapshotOf,
	.load = FbfCuckooLoad,
};
