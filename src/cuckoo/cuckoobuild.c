/*-------------------------------------------------------------------------
 *
 * cuckoobuild.c
 *	  Building a cuckoo index (CREATE INDEX, REINDEX) and the init fork of
 *	  an unlogged one.
 *
 * A build collects (hash, TID) for every heap tuple, then sizes the table
 * for the bucket slots they will take at CuckooBuildLoad (a key with more
 * rows than its two buckets hold takes one: its list's pointer),
 * distributes the entries to their pages with a counting sort, and fills
 * each page with cuckoo insertion in local memory before writing it once.
 * A page's entries go in hash order, so a key's rows are adjacent: past the
 * first bucket_size, they are inserted one by one once the table is
 * written, which moves them to the key's posting list (cuckoopost.c).
 * Entries a page cannot take go to overflow pages written after the bucket
 * pages.  Pages are written without WAL and logged in bulk at the end, as
 * btree does.
 *
 * If the entries outgrow maintenance_work_mem, the build stops collecting:
 * it lays out a table sized for the planner's row estimate and inserts the
 * rest one by one (still without WAL), doubling as needed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/tableam.h"
#include "access/xloginsert.h"
#include "catalog/index.h"
#include "miscadmin.h"
#include "optimizer/optimizer.h"
#include "storage/bufmgr.h"
#include "storage/smgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "cuckoo.h"

typedef struct CuckooSpoolItem
{
	uint64		hash;
	ItemPointerData tid;
} CuckooSpoolItem;

typedef struct CuckooBuildState
{
	CuckooOptions opts;
	CuckooLayout layout;
	CuckooSpoolItem *items;
	Size		nitems;
	Size		maxitems;
	Size		max_spool;		/* most items maintenance_work_mem allows */
	bool		direct;			/* spool abandoned: inserting one by one */
	double		indtuples;
} CuckooBuildState;

static CuckooOptions
index_options(Relation index)
{
	CuckooOptions opts;
	CuckooOptions *ro = (CuckooOptions *) index->rd_options;

	opts.fingerprint_bits = ro ? ro->fingerprint_bits : CUCKOO_DEFAULT_FINGERPRINT_BITS;
	opts.bucket_size = ro ? ro->bucket_size : CUCKOO_DEFAULT_BUCKET_SIZE;
	opts.max_kicks = ro ? ro->max_kicks : CUCKOO_DEFAULT_MAX_KICKS;
	opts.fillfactor = ro ? ro->fillfactor : CUCKOO_DEFAULT_FILLFACTOR;
	return opts;
}

/* Bucket pages for "ntuples" entries at the build load of this fillfactor. */
static uint32
pages_for(const CuckooOptions *opts, const CuckooLayout *layout, double ntuples)
{
	double		pages = ceil(ntuples / (CuckooBuildLoad(opts->fillfactor) *
										cuckoo_nslots(layout)));
	double		limit = (double) (MaxBlockNumber / 4);

	return (uint32) Max(1.0, Min(pages, limit));
}

/* Write "page" as the next block of the index; no WAL (logged at the end). */
static void
write_page(Relation index, Page page, BlockNumber expected)
{
	Buffer		buf = FbfReadNewBuffer(index);

	if (BufferGetBlockNumber(buf) != expected)
		elog(ERROR, "unexpected block %u while building index \"%s\" (expected %u)",
			 BufferGetBlockNumber(buf), RelationGetRelationName(index), expected);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	memcpy(BufferGetPage(buf), page, BLCKSZ);
	MarkBufferDirty(buf);
	UnlockReleaseBuffer(buf);
}

/* Metapage and npages empty bucket pages. */
static void
write_empty_table(Relation index, const CuckooBuildState *bs, uint32 npages)
{
	PGAlignedBlock page;

	CuckooInitMetaPage(page.data, &bs->opts, npages);
	write_page(index, page.data, CUCKOO_METAPAGE_BLKNO);
	CuckooInitSlotPage(page.data, CUCKOO_BUCKET, &bs->layout);
	CuckooStampPage(page.data, 0);
	for (uint32 q = 0; q < npages; q++)
		write_page(index, page.data, CUCKOO_METAPAGE_BLKNO + 1 + q);
}

/*
 * Give up collecting: lay out a table for the larger of the planner's
 * estimate and what we have seen, and insert what we have.
 */
static void
go_direct(Relation heap, Relation index, CuckooBuildState *bs)
{
	double		estimate = Max((double) heap->rd_rel->reltuples, 2.0 * bs->nitems);

	write_empty_table(index, bs, pages_for(&bs->opts, &bs->layout, estimate));
	for (Size i = 0; i < bs->nitems; i++)
		CuckooInsertHash(index, bs->items[i].hash, &bs->items[i].tid, false);
	pfree(bs->items);
	bs->items = NULL;
	bs->nitems = 0;
	bs->direct = true;
}

typedef struct BuildCallbackArg
{
	Relation	heap;
	CuckooBuildState *bs;
} BuildCallbackArg;

static void
build_callback(Relation index, ItemPointer tid, Datum *values, bool *isnull,
			   bool tupleIsAlive, void *state)
{
	BuildCallbackArg *arg = (BuildCallbackArg *) state;
	CuckooBuildState *bs = arg->bs;
	uint64		hash;

	if (isnull[0])
		return;
	hash = CuckooHashDatum(index, InvalidOid, index->rd_indcollation[0],
						   values[0]);
	bs->indtuples += 1;

	if (bs->direct)
	{
		CuckooInsertHash(index, hash, tid, false);
		return;
	}
	if (bs->nitems == bs->maxitems)
	{
		if (bs->maxitems >= bs->max_spool)
		{
			go_direct(arg->heap, index, bs);
			CuckooInsertHash(index, hash, tid, false);
			return;
		}
		bs->maxitems = Min(bs->maxitems * 2, bs->max_spool);
		bs->items = repalloc_huge(bs->items, bs->maxitems * sizeof(CuckooSpoolItem));
	}
	bs->items[bs->nitems].hash = hash;
	bs->items[bs->nitems].tid = *tid;
	bs->nitems++;
}

static int
spool_hash_cmp(const void *a, const void *b)
{
	uint64		ha = ((const CuckooSpoolItem *) a)->hash;
	uint64		hb = ((const CuckooSpoolItem *) b)->hash;

	return ha < hb ? -1 : ha > hb ? 1 : 0;
}

/*
 * Bucket slots the collected entries will take (sorting them by hash): a
 * key's rows, or, for a key with more than two buckets hold, the one
 * pointer to its list.  The table is sized for these, not for the rows:
 * a column of few keys with many rows each needs few bucket pages.
 */
static double
bucket_slots(CuckooBuildState *bs)
{
	double		slots = 0;
	Size		run = 0;

	if (bs->nitems > 1)
		qsort(bs->items, bs->nitems, sizeof(CuckooSpoolItem), spool_hash_cmp);
	for (Size i = 0; i < bs->nitems; i++)
	{
		run++;
		if (i + 1 == bs->nitems || bs->items[i + 1].hash != bs->items[i].hash)
		{
			slots += run <= 2 * bs->layout.bucket_size ? (double) run : 1.0;
			run = 0;
		}
	}
	return slots;
}

/* qsort of entry numbers by their hash (write_table) */
static const CuckooSpoolItem *sort_items;

static int
item_hash_cmp(const void *a, const void *b)
{
	uint64		ha = sort_items[*(const uint32 *) a].hash;
	uint64		hb = sort_items[*(const uint32 *) b].hash;

	return ha < hb ? -1 : ha > hb ? 1 : 0;
}

static Page
copy_page(Page page)
{
	Page		copy = palloc(BLCKSZ);

	memcpy(copy, page, BLCKSZ);
	return copy;
}

/*
 * Lay out the collected entries: counting sort by page, then each page
 * filled in memory and written once.  Overflow pages follow the bucket
 * pages; their block numbers are known before the bucket page that
 * points at them is written.
 */
static void
write_table(Relation index, CuckooBuildState *bs)
{
	const CuckooLayout *layout = &bs->layout;
	uint32		npages = pages_for(&bs->opts, layout, (double) bucket_slots(bs));
	uint32	   *start = palloc0(sizeof(uint32) * ((Size) npages + 1));
	uint32	   *order;
	CuckooProbe *probes;
	PGAlignedBlock page;
	PGAlignedBlock opage;
	List	   *overflow = NIL;
	BlockNumber next_overflow = CUCKOO_METAPAGE_BLKNO + 1 + npages;
	ListCell   *lc;
	uint32	   *deferred = palloc_extended(sizeof(uint32) * Max(bs->nitems, 1),
										   MCXT_ALLOC_HUGE);
	Size		ndeferred = 0;

	/* counting sort of the entries by page */
	probes = palloc_extended(sizeof(CuckooProbe) * Max(bs->nitems, 1), MCXT_ALLOC_HUGE);
	for (Size i = 0; i < bs->nitems; i++)
	{
		CuckooLocateIn(npages, layout, (uint32) bs->opts.fingerprint_bits,
					   bs->items[i].hash, &probes[i]);
		start[probes[i].page + 1]++;
	}
	for (uint32 q = 0; q < npages; q++)
		start[q + 1] += start[q];
	order = palloc_extended(sizeof(uint32) * Max(bs->nitems, 1), MCXT_ALLOC_HUGE);
	{
		uint32	   *fill = palloc(sizeof(uint32) * npages);

		memcpy(fill, start, sizeof(uint32) * npages);
		for (Size i = 0; i < bs->nitems; i++)
			order[fill[probes[i].page]++] = (uint32) i;
		pfree(fill);
	}
	/* each page's entries by hash, so that a key's rows are adjacent */
	sort_items = bs->items;
	for (uint32 q = 0; q < npages; q++)
		if (start[q + 1] - start[q] > 1)
			qsort(order + start[q], start[q + 1] - start[q], sizeof(uint32),
				  item_hash_cmp);

	CuckooInitMetaPage(page.data, &bs->opts, npages);
	write_page(index, page.data, CUCKOO_METAPAGE_BLKNO);

	for (uint32 q = 0; q < npages; q++)
	{
		CuckooPageOpaque opaque;
		bool		have_opage = false;
		uint32		run_end;	/* end of the run of equal hashes at j */
		bool		listed;		/* that run goes to a list */

		CHECK_FOR_INTERRUPTS();
		CuckooInitSlotPage(page.data, CUCKOO_BUCKET, layout);
		CuckooStampPage(page.data, 0);
		opaque = CuckooPageGetOpaque(page.data);
		run_end = start[q];
		listed = false;
		for (uint32 j = start[q]; j < start[q + 1]; j++)
		{
			CuckooSpoolItem *item = &bs->items[order[j]];
			uint32		tag = probes[order[j]].tag;
			int			kicks;

			/*
			 * The rows of a key with more than its two buckets hold go to
			 * its list, made by inserts once the table is written
			 * (deferred[]): here they would only crowd other keys out.
			 */
			if (j == run_end)
			{
				while (run_end < start[q + 1] &&
					   bs->items[order[run_end]].hash == item->hash)
					run_end++;
				listed = run_end - j > 2 * layout->bucket_size;
			}
			if (listed)
			{
				deferred[ndeferred++] = order[j];
				continue;
			}

			kicks = cuckoo_block_insert(layout, CuckooPageGetBlock(page.data), tag,
										probes[order[j]].first,
										(const uint8 *) &item->tid);
			if (kicks >= 0)
			{
				opaque->nentries++;
				opaque->nkicks += (uint32) kicks;
				continue;
			}

			/* to this page's chain; a new chain page when the head is full */
			if (!have_opage ||
				CuckooPageGetOpaque(opage.data)->nentries >= cuckoo_nslots(layout))
			{
				if (have_opage)
					overflow = lappend(overflow, copy_page(opage.data));
				CuckooInitSlotPage(opage.data, CUCKOO_OVERFLOW, layout);
				CuckooPageGetOpaque(opage.data)->overflow = opaque->overflow;
				opaque->overflow = next_overflow++;
				have_opage = true;
			}
			(void) cuckoo_block_append(layout, CuckooPageGetBlock(opage.data), tag,
									   (const uint8 *) &item->tid);
			CuckooPageGetOpaque(opage.data)->nentries++;
			opaque->summary |= cuckoo_summary_bit(tag);
		}
		if (have_opage)
			overflow = lappend(overflow, copy_page(opage.data));
		write_page(index, page.data, CUCKOO_METAPAGE_BLKNO + 1 + q);
	}

	/* the chains, in the order their block numbers were handed out */
	{
		BlockNumber blkno = CUCKOO_METAPAGE_BLKNO + 1 + npages;

		foreach(lc, overflow)
			write_page(index, (Page) lfirst(lc), blkno++);
		Assert(blkno == next_overflow);
	}
	list_free_deep(overflow);

	/* the keys' lists: the table is written, so as inserts (no WAL yet) */
	for (Size i = 0; i < ndeferred; i++)
	{
		CHECK_FOR_INTERRUPTS();
		CuckooInsertHash(index, bs->items[deferred[i]].hash,
						 &bs->items[deferred[i]].tid, false);
	}
	pfree(deferred);
	pfree(start);
	pfree(order);
	pfree(probes);
}

IndexBuildResult *
cuckoobuild(Relation heap, Relation index, IndexInfo *indexInfo)
{
	IndexBuildResult *result;
	CuckooBuildState bs;
	BuildCallbackArg arg;
	double		reltuples;

	if (RelationGetNumberOfBlocks(index) != 0)
		elog(ERROR, "index \"%s\" already contains data",
			 RelationGetRelationName(index));

	memset(&bs, 0, sizeof(bs));
	bs.opts = index_options(index);
	CuckooOptionsLayout(&bs.opts, &bs.layout);
	bs.max_spool = Max((Size) 1024,
					   (Size) maintenance_work_mem * 1024 / sizeof(CuckooSpoolItem));
	bs.maxitems = Min((Size) 1024, bs.max_spool);
	bs.items = palloc(sizeof(CuckooSpoolItem) * bs.maxitems);

	arg.heap = heap;
	arg.bs = &bs;
	reltuples = table_index_build_scan(heap, index, indexInfo, true, true,
									   build_callback, &arg, NULL);

	if (!bs.direct)
		write_table(index, &bs);

	/* pages were written without WAL: log them all now */
	if (RelationNeedsWAL(index))
		log_newpage_range(index, MAIN_FORKNUM, 0,
						  RelationGetNumberOfBlocks(index), true);

	result = (IndexBuildResult *) palloc(sizeof(IndexBuildResult));
	result->heap_tuples = reltuples;
	result->index_tuples = bs.indtuples;
	return result;
}

/* The init fork of an unlogged index: a metapage and one empty bucket page. */
void
cuckoobuildempty(Relation index)
{
	CuckooOptions opts = index_options(index);
	CuckooLayout layout;
	PGAlignedBlock page;

	CuckooOptionsLayout(&opts, &layout);

	CuckooInitMetaPage(page.data, &opts, 1);
	FbfWriteInitForkPage(index, CUCKOO_METAPAGE_BLKNO, page.data);
	CuckooInitSlotPage(page.data, CUCKOO_BUCKET, &layout);
	CuckooStampPage(page.data, 0);
	FbfWriteInitForkPage(index, CUCKOO_METAPAGE_BLKNO + 1, page.data);
	FbfSyncInitFork(index);
}
