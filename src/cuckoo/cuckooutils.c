/*-------------------------------------------------------------------------
 *
 * cuckooutils.c
 *	  Page and metapage helpers of the cuckoo index: initialisation,
 *	  validation, addressing of bucket pages, hashing of keys.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/xlog.h"
#include "common/fbf_xlog.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "cuckoo.h"

/*
 * Initialise an empty page of the given kind.  Bucket and overflow pages
 * get an empty block of slots; pd_lower covers it, so that full-page images
 * leave out only the unused tail.
 */
static void
init_page(Page page, uint16 flags)
{
	CuckooPageOpaque opaque;

	PageInit(page, BLCKSZ, sizeof(CuckooPageOpaqueData));
	opaque = CuckooPageGetOpaque(page);
	opaque->summary = 0;
	opaque->overflow = InvalidBlockNumber;
	opaque->nkicks = 0;
	opaque->nentries = 0;
	opaque->flags = flags;
	opaque->page_id = CUCKOO_PAGE_ID;
}

static void
set_lower(Page page, size_t bytes)
{
	((PageHeader) page)->pd_lower =
		(LocationIndex) ((char *) PageGetContents(page) - (char *) page + bytes);
}

/* Initialise an empty bucket or overflow page holding a block of "layout". */
void
CuckooInitSlotPage(Page page, uint16 flags, const CuckooLayout *layout)
{
	init_page(page, flags);
	cuckoo_block_init(layout, CuckooPageGetBlock(page));
	set_lower(page, cuckoo_block_size(layout));
	CuckooSetShape(page, layout);
}

/*
 * Record the block's shape in a bucket or overflow page (a copy being
 * changed under WAL), so that CuckooMaskPage can find its killed bits
 * without the metapage.  Pages of format 1 get it on their first change.
 */
void
CuckooSetShape(Page page, const CuckooLayout *layout)
{
	CuckooPageOpaque opaque = CuckooPageGetOpaque(page);

	opaque->shape = (uint16) cuckoo_nslots(layout) |
		(layout->tag_bytes == 4 ? CUCKOO_SHAPE_WIDE : 0);
	opaque->flags |= CUCKOO_SHAPE;
}

/*
 * The WAL mask of a cuckoo page: clear its killed bits, which scans set as
 * hints without WAL (like btree's LP_DEAD), so wal_consistency_checking
 * compares only what WAL carries.  A page without its shape recorded
 * (format 1, never changed since) is left as it is.
 */
void
CuckooMaskPage(Page page)
{
	CuckooPageOpaque opaque = CuckooPageGetOpaque(page);
	uint32		nslots;
	uint32		tag_bytes;
	Size		killed;

	if ((opaque->flags & (CUCKOO_BUCKET | CUCKOO_OVERFLOW | CUCKOO_POSTING)) == 0 ||
		(opaque->flags & CUCKOO_SHAPE) == 0)
		return;
	nslots = opaque->shape & ~CUCKOO_SHAPE_WIDE;
	tag_bytes = (opaque->shape & CUCKOO_SHAPE_WIDE) ? 4 : 3;
	killed = (Size) nslots * (tag_bytes + CUCKOO_TID_BYTES);
	if (MAXALIGN(SizeOfPageHeaderData) + killed + (nslots + 7) / 8 >
		(Size) PageGetSpecialPointer(page) - (Size) page)
		return;					/* not a shape this page can hold */
	memset(CuckooPageGetBlock(page) + killed, 0, (nslots + 7) / 8);
}

/* Layout of the blocks of an index built with these options. */
void
CuckooOptionsLayout(const CuckooOptions *opts, CuckooLayout *layout)
{
	if (!cuckoo_layout_init(layout, CUCKOO_PAGE_SPACE,
							(uint32) opts->fingerprint_bits,
							(uint32) opts->bucket_size,
							(uint32) opts->max_kicks))
		elog(ERROR, "invalid cuckoo layout: fingerprint_bits %d, bucket_size %d, max_kicks %d",
			 opts->fingerprint_bits, opts->bucket_size, opts->max_kicks);
}

/*
 * fillfactor (percent) of an index: its reloption, read from the relcache
 * at each use, so ALTER INDEX ... SET (fillfactor = N) applies to the
 * next doubling decision without a rebuild.
 */
int
CuckooFillfactor(Relation index)
{
	CuckooOptions *ro = (CuckooOptions *) index->rd_options;

	return ro ? ro->fillfactor : CUCKOO_DEFAULT_FILLFACTOR;
}

/*
 * Sampled load of bucket slots at or above which an insert that finds its
 * page dense doubles the table (below it, the entry overflows): the
 * fillfactor.
 */
double
CuckooGrowLoad(Relation index)
{
	return CuckooFillfactor(index) / 100.0;
}

/*
 * Load of bucket slots a build lays its table out for: CUCKOO_BUILD_LOAD
 * at the default fillfactor and above; below it, scaled down in
 * proportion, so that a freshly built table keeps the same margin above
 * its growth load and a low fillfactor buys a sparser table at once, as
 * it does for hash.
 */
double
CuckooBuildLoad(int fillfactor)
{
	return CUCKOO_BUILD_LOAD *
		Min(fillfactor, CUCKOO_DEFAULT_FILLFACTOR) / (double) CUCKOO_DEFAULT_FILLFACTOR;
}

/* Layout recorded in a (validated) metapage. */
void
CuckooMetaLayout(const CuckooMetaPageData *meta, CuckooLayout *layout)
{
	layout->nbuckets = meta->nbuckets;
	layout->bucket_size = meta->bucket_size;
	layout->tag_bits = cuckoo_tag_bits_for(meta->fingerprint_bits);
	layout->tag_bytes = (layout->tag_bits + 7) / 8;
	layout->max_kicks = meta->max_kicks;
}

/*
 * Initialise the metapage of a table of npages bucket pages laid out from
 * block 1.
 */
void
CuckooInitMetaPage(Page page, const CuckooOptions *opts, uint32 npages)
{
	CuckooMetaPage meta;
	CuckooLayout layout;

	CuckooOptionsLayout(opts, &layout);
	init_page(page, CUCKOO_META);
	meta = CuckooPageGetMeta(page);
	memset(meta, 0, sizeof(CuckooMetaPageData));
	meta->magic = CUCKOO_MAGIC;
	meta->version = CUCKOO_VERSION;
	meta->fingerprint_bits = (uint32) opts->fingerprint_bits;
	meta->bucket_size = layout.bucket_size;
	meta->max_kicks = layout.max_kicks;
	meta->nbuckets = layout.nbuckets;
	meta->npages = npages;
	meta->growing = 0;
	meta->split_next = 0;
	meta->generation = 0;
	meta->nextents = 1;
	meta->extents[0].first_page = 0;
	meta->extents[0].first_block = CUCKOO_METAPAGE_BLKNO + 1;
	meta->stamped = 1;			/* the build stamps its bucket pages */
	meta->stamping = 0;
	set_lower(page, sizeof(CuckooMetaPageData));
}

/*
 * A copy of the (checked) metapage and the layout it describes, for
 * callers that need no lock on it afterwards.
 */
void
CuckooReadMeta(Relation index, CuckooMetaPageData *meta, CuckooLayout *layout)
{
	Buffer		metabuf = ReadBuffer(index, CUCKOO_METAPAGE_BLKNO);

	LockBuffer(metabuf, BUFFER_LOCK_SHARE);
	*meta = *CuckooCheckMetaPage(index, BufferGetPage(metabuf));
	UnlockReleaseBuffer(metabuf);
	CuckooMetaLayout(meta, layout);
}

/*
 * The backend's cached copy of the metapage, read now if there is none or
 * "refresh".  Returned by value: the relcache entry may be rebuilt (and
 * rd_amcache freed) whenever invalidations are processed.
 *
 * A cached copy may be stale by any number of doublings.  Whoever uses it
 * to address a bucket page must check, with the page locked, that the page
 * still holds the keys it was addressed for (CuckooPageHolds), and refresh
 * the copy (or take the metapage lock) if not.  The extents list only
 * grows, so a logical page keeps its block forever: a stale copy reads the
 * right block, possibly in another generation.
 */
CuckooMetaCache
CuckooGetMetaCache(Relation index, bool refresh)
{
	if (index->rd_amcache == NULL || refresh)
	{
		Buffer		metabuf = ReadBuffer(index, CUCKOO_METAPAGE_BLKNO);

		LockBuffer(metabuf, BUFFER_LOCK_SHARE);
		CuckooCacheMeta(index, CuckooCheckMetaPage(index, BufferGetPage(metabuf)));
		UnlockReleaseBuffer(metabuf);
	}
	return *(CuckooMetaCache *) index->rd_amcache;
}

/* Replace the backend's cached copy with this (checked) metapage. */
void
CuckooCacheMeta(Relation index, const CuckooMetaPageData *meta)
{
	CuckooMetaCache *cache = (CuckooMetaCache *) index->rd_amcache;

	if (cache == NULL)
	{
		cache = MemoryContextAlloc(index->rd_indexcxt, sizeof(CuckooMetaCache));
		index->rd_amcache = cache;
	}
	cache->meta = *meta;
	CuckooMetaLayout(meta, &cache->layout);
}

/* Stamp a bucket page as a live page of generation "generation". */
void
CuckooStampPage(Page page, uint32 generation)
{
	CuckooPageOpaque opaque = CuckooPageGetOpaque(page);

	Assert(generation <= CUCKOO_GEN_MASK);
	opaque->flags &= ~(CUCKOO_MOVED | (CUCKOO_GEN_MASK << CUCKOO_GEN_SHIFT));
	opaque->flags |= CUCKOO_STAMPED | (generation << CUCKOO_GEN_SHIFT);
}

/*
 * Does this (locked) bucket page hold the keys of a probe made for a table
 * of generation "generation"?  Only if it is stamped with that generation
 * and not split since: a logical page's block holds, in turn, the page of
 * each generation, and between its split and its reuse it is marked
 * moved.  An unstamped page (fbf 1.0) proves nothing.
 */
bool
CuckooPageHolds(Page page, uint32 generation)
{
	uint16		flags = CuckooPageGetOpaque(page)->flags;

	return (flags & (CUCKOO_STAMPED | CUCKOO_MOVED)) == CUCKOO_STAMPED &&
		((flags >> CUCKOO_GEN_SHIFT) & CUCKOO_GEN_MASK) == generation;
}

/* Error out unless the page in "buf" is a cuckoo page of one of these kinds. */
void
CuckooCheckPage(Relation index, Buffer buf, uint16 flags)
{
	if (!CuckooIsPage(BufferGetPage(buf), flags))
		FbfReportUnexpectedPage(index, BufferGetBlockNumber(buf), NULL);
}

/* Is this an initialised cuckoo page of one of the given kinds? */
bool
CuckooIsPage(Page page, uint16 flags)
{
	return FbfPageId(page, sizeof(CuckooPageOpaqueData)) == CUCKOO_PAGE_ID &&
		(CuckooPageGetOpaque(page)->flags & flags) != 0;
}

/*
 * Check the metapage and return it.  Anything unexpected is corruption:
 * every later computation trusts these fields.
 */
CuckooMetaPage
CuckooCheckMetaPage(Relation index, Page page)
{
	CuckooMetaPage meta;
	CuckooLayout layout;

	if (!CuckooIsPage(page, CUCKOO_META))
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" is not a cuckoo index",
						RelationGetRelationName(index))));
	meta = CuckooPageGetMeta(page);
	if (meta->magic != CUCKOO_MAGIC)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" has a bad metapage magic number %08X",
						RelationGetRelationName(index), meta->magic)));
	if (meta->version != CUCKOO_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" has format version %u, expected %u",
						RelationGetRelationName(index), meta->version,
						CUCKOO_VERSION),
				 errhint("REINDEX the index.")));
	if (!cuckoo_layout_init(&layout, CUCKOO_PAGE_SPACE, meta->fingerprint_bits,
							meta->bucket_size, meta->max_kicks) ||
		layout.nbuckets != meta->nbuckets ||
		meta->npages == 0 ||
		meta->nextents == 0 || meta->nextents > CUCKOO_MAX_EXTENTS ||
		meta->extents[0].first_page != 0 ||
		meta->stamped > 1 || meta->generation > CUCKOO_GEN_MASK ||
		(meta->growing && (meta->split_next > meta->npages ||
						   meta->extents[meta->nextents - 1].first_page != meta->npages)))
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" has an invalid metapage",
						RelationGetRelationName(index))));
	return meta;
}

/*
 * Where a key with this hash lives in a table of npages pages: its page,
 * its tag there, and its first bucket.
 */
void
CuckooLocateIn(uint32 npages, const CuckooLayout *layout,
			   uint32 fingerprint_bits, uint64 hash, CuckooProbe *probe)
{
	CuckooKey	key = cuckoo_key(hash, fingerprint_bits);

	probe->page = cuckoo_page_of(key.addr, npages);
	probe->tag = cuckoo_make_tag(key.fp, cuckoo_rest_of(key.addr, npages));
	probe->first = cuckoo_first_bucket(layout, key.bucket);
}

/*
 * The same in the table the metapage describes, allowing for a doubling
 * under way: pages below split_next still hold their keys (they are of the
 * previous generation), the others have moved to 2q or 2q + 1 (and their
 * tags lost a rest bit).  Also the generation stamp the page must carry.
 */
void
CuckooLocate(const CuckooMetaPageData *meta, const CuckooLayout *layout,
			 uint64 hash, CuckooProbe *probe)
{
	CuckooLocateIn(meta->npages, layout, meta->fingerprint_bits, hash, probe);
	probe->generation = meta->generation;
	if (meta->growing)
	{
		if (probe->page >= meta->split_next)
			CuckooLocateIn(meta->npages * 2, layout, meta->fingerprint_bits,
						   hash, probe);
		else
			probe->generation = meta->generation - 1;
	}
}

/* Block holding logical bucket page "logical_page". */
BlockNumber
CuckooPageBlock(const CuckooMetaPageData *meta, uint32 logical_page)
{
	int			i = (int) meta->nextents - 1;

	while (i > 0 && meta->extents[i].first_page > logical_page)
		i--;
	return meta->extents[i].first_block +
		(logical_page - meta->extents[i].first_page);
}

/*
 * Hash of a key: the opclass's extended hash (support function 1) with seed
 * 0, for a key of type "subtype" (InvalidOid: the column's type).  Keys of
 * another type of the operator family (int4 against an int8 column) use
 * that type's function, which the family guarantees hashes equal values
 * alike.  CuckooHashProc finds the function (filling "cross" when it is
 * not the column's own), for callers that hash many keys of one type.
 */
FmgrInfo *
CuckooHashProc(Relation index, Oid subtype, FmgrInfo *cross)
{
	Oid			procid;

	if (!OidIsValid(subtype) || subtype == index->rd_opcintype[0])
		return index_getprocinfo(index, 1, CUCKOO_HASH_PROC);

	procid = get_opfamily_proc(index->rd_opfamily[0], subtype, subtype,
							   CUCKOO_HASH_PROC);
	if (!OidIsValid(procid))
		elog(ERROR, "missing support function %d(%u,%u) for index \"%s\"",
			 CUCKOO_HASH_PROC, subtype, subtype, RelationGetRelationName(index));
	fmgr_info(procid, cross);
	return cross;
}

uint64
CuckooHashDatum(Relation index, Oid subtype, Oid collation, Datum value)
{
	FmgrInfo	cross;

	return DatumGetUInt64(FunctionCall2Coll(CuckooHashProc(index, subtype, &cross),
											collation, value, Int64GetDatum(0)));
}

/*
 * A page of the index was just changed (the caller still holds it
 * exclusively locked).  Scans decide whether a page changed since they
 * read it by its LSN (kill_items), so every change must move it: fbf's
 * WAL sets it for a WAL-logged index; an unlogged or temporary one gets a
 * fake LSN here, as GiST does.  A permanent index written without WAL (its
 * build) needs none: no scan can have read it before.
 */
void
CuckooPageChanged(Relation index, Buffer buf)
{
	static XLogRecPtr local_lsn = FirstNormalUnloggedLSN;
	XLogRecPtr	lsn;

	if (RelationNeedsWAL(index) ||
		index->rd_rel->relpersistence == RELPERSISTENCE_PERMANENT)
		return;
	if (index->rd_rel->relpersistence == RELPERSISTENCE_TEMP)
		lsn = local_lsn++;
	else
		lsn = GetFakeLSNForUnloggedRel();
	PageSetLSN(BufferGetPage(buf), lsn);
}

FbfXLogState *
CuckooChangeStart(Relation index, bool wal)
{
	return wal ? FbfXLogStart(index) : NULL;
}

/* The copy of a locked buffer's page to change (the page itself without WAL). */
Page
CuckooChangePage(FbfXLogState *state, Buffer buf, int flags)
{
	return state ? FbfXLogRegisterBuffer(state, buf, flags) : BufferGetPage(buf);
}

/* Apply and log the change (or mark the pages dirty); move the pages' LSNs. */
void
CuckooChangeFinish(Relation index, FbfXLogState *state, Buffer *bufs, int nbufs)
{
	if (state)
		FbfXLogFinish(state);
	else
		for (int i = 0; i < nbufs; i++)
			MarkBufferDirty(bufs[i]);
	for (int i = 0; i < nbufs; i++)
		CuckooPageChanged(index, bufs[i]);
}
