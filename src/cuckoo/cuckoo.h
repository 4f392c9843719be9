/*-------------------------------------------------------------------------
 *
 * cuckoo.h
 *	  The cuckoo index access method: page layout, metapage, and the
 *	  functions shared by its files.
 *
 * Storage
 * -------
 * Block 0 is the metapage.  The table proper is npages "bucket pages",
 * numbered 0 .. npages - 1 (logical numbers); the metapage maps them to
 * blocks through a short list of extents (the build lays them out from
 * block 1, and each doubling appends one extent).  A bucket page's payload
 * is a block of cuckoo_table.h: buckets of bucket_size slots, each slot a
 * tag and a heap TID.  A key lives in the page its hash's address part
 * picks, and there in one of two buckets (cuckoo_table.h), so a lookup
 * reads one bucket page, addressed with the backend's cached metapage.
 *
 * Cached addressing.  Each backend keeps a copy of the metapage in the
 * index's rd_amcache (CuckooGetMetaCache).  Extents are only appended, so
 * a logical page keeps its block; every bucket page is stamped with the
 * generation that wrote it, and split step q marks old page q moved until
 * its block is reused.  A probe made with the copy knows the generation
 * its page must carry (CuckooLocate); a page with another stamp, or moved,
 * means the copy is stale: re-read the metapage (CuckooPageHolds).  Pages
 * of fbf 1.0 have no stamp; their metapage says so (stamped = 0) and they
 * are always addressed under the metapage lock.
 *
 * Posting lists.  When a key's two buckets are full of its rows, they move
 * to a list in posting pages and one slot becomes a pointer to it (see
 * "Refs" below and cuckoopost.c), so only lookups of that key read it.
 *
 * Overflow pages.  When a distinct key finds its page full and the table
 * too sparse to be worth doubling, the entry goes to an overflow page
 * chained from the bucket page: a plain array searched by tag.  The bucket
 * page keeps a 64-bit summary of the tags sent to its chain, so lookups of
 * other keys skip it.
 *
 * Growth.  When an insert finds its page full and the table is dense
 * (sampled load >= the fillfactor: CuckooGrowLoad), the table doubles: page q's entries
 * go to pages 2q and 2q + 1 (pages are a multiply-high of the address, so
 * no other page is possible; the top bit of the tag's "rest" says which),
 * each at the slot it had, because buckets do not depend on the page count.
 * Nothing is evicted and nothing is read from the heap.  Pages are split from the top down, in place: the
 * table is extended by npages blocks and step q writes pages 2q and
 * 2q + 1, whose old contents were moved by earlier steps.  Each step is
 * one WAL record that also stores its progress in the metapage
 * (split_next), so a table in the middle of a doubling is one readers can
 * address: a key whose old page is >= split_next lives at its new page.
 * The steps are not run in one go: one backend begins the doubling (adds
 * the extent, marks the metapage growing), and every insert that follows
 * runs one step (cuckooinsert.c), so a doubling of n pages ends within
 * about n inserts, and a crash just leaves it for the inserts after.  Chains are shared by the
 * two halves of a split page; entries there never move.
 *
 * Locking
 * -------
 *	  metapage   share: to refresh the cached copy; held by an insert that
 *	             needs it (full page, stale copy, fbf 1.0 index) for its
 *	             whole duration, and by such a scan until it has locked
 *	             its bucket page; exclusive: held for one split step (or to
 *	             record the beginning of a doubling).  An entry moves
 *	             between pages only under the exclusive lock.  Beginning a
 *	             doubling also takes a heavyweight lock on the metapage's
 *	             block (one grower at a time; nothing else takes it).  Scans and inserts addressed by the
 *	             cached copy take no metapage lock: the page's stamp tells
 *	             them whether it still holds their keys, and a split step
 *	             holds old page q exclusively from its copy to its record.
 *	  bucket     exclusive to insert (kicks move entries between the two
 *	  page       buckets, always within the page, so a share-locked reader
 *	             sees every entry in one of its buckets); share to read.
 *	  overflow   locked after its bucket page (exclusive to add, share to
 *	  page       read); a chain shared by two bucket pages is serialised
 *	             by the overflow page's own lock.
 *	  posting    locked after its key's bucket page, a list's pages in path
 *	  page       order (readers lock the next before releasing one); pages
 *	             from the free space map conditionally (cuckoopost.c).
 * Scans copy their matches out of the page and drop its lock before
 * returning the first one.  VACUUM locks one page at a time (a bucket page
 * with its lists' pages), in block order; split steps only move entries
 * forward in block order, so one pass, reaching the blocks added
 * meanwhile, sees every entry (cuckoovacuum.c).
 *
 * Every change is WAL-logged with fbf's own records (common/fbf_xlog.h), at
 * most four pages each: a split step writes the metapage, old page q
 * (its moved mark) and pages 2q and 2q + 1.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CUCKOO_H
#define CUCKOO_H

#include "access/amapi.h"
#include "access/genam.h"
#include "access/itup.h"
#include "nodes/pathnodes.h"
#include "storage/bufpage.h"
#include "utils/relcache.h"

#include "common/fbf_page.h"
#include "compat.h"
#include "core/cuckoo_table.h"

#define CUCKOO_MAGIC			0x4355434B	/* "CUCK" */
#define CUCKOO_VERSION			1
#define CUCKOO_PAGE_ID			0xFF8C
#define CUCKOO_METAPAGE_BLKNO	0

/* Support function 1: extended hash, (type, int8) -> int8 */
#define CUCKOO_HASH_PROC		1
#define CUCKOO_NPROC			1
/* Strategy 1: equality */
#define CUCKOO_EQUAL_STRATEGY	1
#define CUCKOO_NSTRATEGIES		1

/* Reloption defaults and bounds */
#define CUCKOO_DEFAULT_FINGERPRINT_BITS	8
#define CUCKOO_DEFAULT_BUCKET_SIZE		4
#define CUCKOO_MAX_BUCKET_SIZE_OPT		8
#define CUCKOO_DEFAULT_MAX_KICKS		500
/* fillfactor: hash's bounds; the default is the load a table grew at before 1.5 */
#define CUCKOO_MIN_FILLFACTOR			10
#define CUCKOO_DEFAULT_FILLFACTOR		75

/*
 * Load of bucket pages a build aims at at the default fillfactor; a lower
 * fillfactor scales it down in proportion (CuckooBuildLoad).  The load that
 * makes a table grow is the fillfactor (CuckooGrowLoad).
 */
#define CUCKOO_BUILD_LOAD		0.86
/* A full page holding less than this share of its slots overflows instead. */
#define CUCKOO_DENSE_PAGE		0.90
/* Pages sampled to estimate the load before doubling. */
#define CUCKOO_LOAD_SAMPLE		16

#define CUCKOO_MAX_EXTENTS		40

/* Page flags */
#define CUCKOO_META				(1 << 0)
#define CUCKOO_BUCKET			(1 << 1)
#define CUCKOO_OVERFLOW			(1 << 2)
#define CUCKOO_SHAPE			(1 << 3)	/* opaque->shape is valid */
#define CUCKOO_STAMPED			(1 << 4)	/* bucket page: generation stamp set */
#define CUCKOO_MOVED			(1 << 5)	/* bucket page: split, awaiting reuse */
#define CUCKOO_POSTING			(1 << 6)	/* posting page (cuckoopost.c) */

/*
 * A bucket page's generation stamp, in bits 8..13 of its flags: the
 * metapage's generation when the page was written as a page of the table
 * (0 for the build's pages, g for the pages doubling g writes), so the
 * table it belongs to has the build's page count times 2^g.  The
 * generation never exceeds CUCKOO_MAX_EXTENTS - 1 < 64.
 */
#define CUCKOO_GEN_SHIFT		8
#define CUCKOO_GEN_MASK			0x3F

#define CUCKOO_SHAPE_WIDE		0x8000

/*
 * Special space of every page.  page_id comes last, so that tools can
 * recognise the page from its final two bytes.
 */
typedef struct CuckooPageOpaqueData
{
	uint64		summary;		/* bucket page: tags sent to the chain */
	BlockNumber overflow;		/* next page of the chain, or Invalid */
	union
	{
		uint32		nkicks;		/* bucket page: displacements made here */
		uint32		nrefs;		/* posting page: refs to it (cuckoopost.c) */
	};
	uint16		nentries;		/* used slots (refs included) */
	uint16		flags;
	uint16		shape;			/* with CUCKOO_SHAPE: slots in the block, |
								 * CUCKOO_SHAPE_WIDE for 4-byte tags (format
								 * 1 counted cleanups here) */
	uint16		page_id;		/* CUCKOO_PAGE_ID */
} CuckooPageOpaqueData;

typedef CuckooPageOpaqueData *CuckooPageOpaque;

#define CuckooPageGetOpaque(page) \
	((CuckooPageOpaque) PageGetSpecialPointer(page))

/* One run of bucket pages: logical first_page.. at blocks first_block.. */
typedef struct CuckooExtent
{
	uint32		first_page;
	BlockNumber first_block;
} CuckooExtent;

typedef struct CuckooMetaPageData
{
	uint32		magic;
	uint32		version;
	uint32		fingerprint_bits;
	uint32		bucket_size;
	uint32		max_kicks;
	uint32		nbuckets;		/* buckets per page */
	uint32		npages;			/* bucket pages (before a doubling ends) */
	uint32		growing;		/* 1 while a doubling is under way */
	uint32		split_next;		/* growing: pages >= this are split */
	uint32		generation;		/* count of doublings begun */
	uint32		nextents;
	CuckooExtent extents[CUCKOO_MAX_EXTENTS];
	/* fields added in fbf 1.1: zero in a metapage written by fbf 1.0 */
	uint32		stamped;		/* 1: every live bucket page has its stamp */
	uint32		stamping;		/* generation of a doubling begun by a
								 * binary that stamps (it sets "stamped"
								 * when it ends) */
} CuckooMetaPageData;

typedef CuckooMetaPageData *CuckooMetaPage;

#define CuckooPageGetMeta(page) ((CuckooMetaPage) PageGetContents(page))

/* Bytes of payload a page offers to a cuckoo block. */
#define CUCKOO_PAGE_SPACE \
	(BLCKSZ - MAXALIGN(SizeOfPageHeaderData) - MAXALIGN(sizeof(CuckooPageOpaqueData)))

#define CuckooPageGetBlock(page) ((uint8 *) PageGetContents(page))

/*
 * Refs (cuckoopost.c).  A slot whose "TID" has CUCKOO_REF_FLAG in its
 * offset number holds no heap TID (heap offset numbers stay below 0x8000)
 * but the block of a posting page, and in the offset's other 15 bits a
 * list id.  In a bucket page it is a key's *pointer*: its tag is the key's
 * tag there (kicked and split like any entry's), and the key's rows are in
 * the posting list it names.  In a posting page it is a *link*: the list's
 * next page.  A list is named, in every page it has slots in, by the tag
 * CuckooListTag(fingerprint, id), unique in each of those pages.
 */
#define CUCKOO_REF_FLAG			0x8000
#define CUCKOO_LIST_IDS			0x8000	/* ids are 0 .. 0x7FFF */

static inline bool
CuckooTidIsRef(const uint8 *tid)
{
	ItemPointerData t;

	memcpy(&t, tid, sizeof(t));
	return (t.ip_posid & CUCKOO_REF_FLAG) != 0;
}

static inline BlockNumber
CuckooRefBlock(const uint8 *tid)
{
	ItemPointerData t;

	memcpy(&t, tid, sizeof(t));
	return ItemPointerGetBlockNumberNoCheck(&t);
}

static inline uint32
CuckooRefId(const uint8 *tid)
{
	ItemPointerData t;

	memcpy(&t, tid, sizeof(t));
	return t.ip_posid & ~CUCKOO_REF_FLAG;
}

static inline void
CuckooMakeRef(ItemPointer tid, BlockNumber blkno, uint32 id)
{
	ItemPointerSetBlockNumber(tid, blkno);
	tid->ip_posid = (OffsetNumber) (CUCKOO_REF_FLAG | id);
}

/* The tag a list's slots carry in its pages: its key's fingerprint and id. */
static inline uint32
CuckooListTag(uint32 fp, uint32 id)
{
	return cuckoo_make_tag(fp, (id << 1) | 1);
}

/* Reloptions */
typedef struct CuckooOptions
{
	int32		vl_len_;		/* varlena header (do not touch directly!) */
	int			fingerprint_bits;
	int			bucket_size;
	int			max_kicks;
	int			fillfactor;		/* sampled load (percent) at which a full page
								 * doubles the table; also scales the build */
} CuckooOptions;

/* Per-scan state */
typedef struct CuckooScanItem
{
	ItemPointerData tid;
	BlockNumber blkno;			/* where the entry was, for kill_prior_tuple */
	uint16		slot;
	uint32		tag;
	XLogRecPtr	lsn;			/* the page's LSN when read */
	bool		kill_noted;		/* already in killed[] or marked by this scan */
} CuckooScanItem;

typedef struct CuckooScanOpaqueData
{
	bool		searched;		/* matches collected for the current keys */
	CuckooLayout layout;		/* set by the first search; fixed at build */
	int			nitems;
	int			cur;			/* item last returned; -1 before the first,
								 * nitems after the last */
	int			maxitems;
	CuckooScanItem *items;
	int			nkilled;
	int		   *killed;			/* indexes into items[] */
} CuckooScanOpaqueData;

typedef CuckooScanOpaqueData *CuckooScanOpaque;

/* cuckoo.c */
extern void CuckooAmInit(void);

/* cuckoobuild.c */
extern IndexBuildResult *cuckoobuild(Relation heap, Relation index,
									 struct IndexInfo *indexInfo);
extern void cuckoobuildempty(Relation index);

/* cuckoofuncs.c */
extern Relation CuckooOpenForCheck(Oid indexoid, LOCKMODE heaplock, bool owner,
								   Relation *heap);

/* cuckooinsert.c */
extern bool cuckooinsert(Relation index, Datum *values, bool *isnull,
						 ItemPointer ht_ctid, Relation heapRel,
						 IndexUniqueCheck checkUnique, bool indexUnchanged,
						 struct IndexInfo *indexInfo);
extern void CuckooInsertHash(Relation index, uint64 hash, ItemPointer tid,
							 bool wal);

/* cuckoopost.c */
struct CuckooProbe;
typedef void (*CuckooListVisit) (void *arg, Buffer buf, uint32 slot);
extern bool CuckooListAppend(Relation index, const CuckooLayout *layout,
							 Buffer buf, const struct CuckooProbe *probe,
							 ItemPointer tid, bool wal);
extern bool CuckooListCreate(Relation index, const CuckooLayout *layout,
							 Buffer buf, const struct CuckooProbe *probe,
							 ItemPointer tid, bool wal);
extern void CuckooListSearch(Relation index, const CuckooLayout *layout,
							 uint32 list_tag, BlockNumber head,
							 bool skip_killed, CuckooListVisit visit,
							 void *arg);
extern bool CuckooListVacuum(Relation index, const CuckooLayout *layout,
							 Buffer buf, uint32 ptr);
extern void CuckooDropPointer(const CuckooLayout *layout, Page bucket,
							  Page head, uint32 ptr);
extern void CuckooRecordSpace(Relation index, const CuckooLayout *layout,
							  BlockNumber blkno, Page page);

/* cuckooscan.c */
extern IndexScanDesc cuckoobeginscan(Relation r, int nkeys, int norderbys);
extern void cuckoorescan(IndexScanDesc scan, ScanKey scankey, int nscankeys,
						 ScanKey orderbys, int norderbys);
extern bool cuckoogettuple(IndexScanDesc scan, ScanDirection dir);
extern int64 cuckoogetbitmap(IndexScanDesc scan, TIDBitmap *tbm);
extern void cuckooendscan(IndexScanDesc scan);

/* cuckoovacuum.c */
extern IndexBulkDeleteResult *cuckoobulkdelete(IndexVacuumInfo *info,
											   IndexBulkDeleteResult *stats,
											   IndexBulkDeleteCallback callback,
											   void *callback_state);
extern IndexBulkDeleteResult *cuckoovacuumcleanup(IndexVacuumInfo *info,
												  IndexBulkDeleteResult *stats);

/* cuckooutils.c */
extern void CuckooInitSlotPage(Page page, uint16 flags,
							   const CuckooLayout *layout);
extern void CuckooInitMetaPage(Page page, const CuckooOptions *opts,
							   uint32 npages);
extern void CuckooMetaLayout(const CuckooMetaPageData *meta,
							 CuckooLayout *layout);
extern void CuckooOptionsLayout(const CuckooOptions *opts, CuckooLayout *layout);
extern int	CuckooFillfactor(Relation index);
extern double CuckooGrowLoad(Relation index);
extern double CuckooBuildLoad(int fillfactor);
typedef struct CuckooProbe
{
	uint32		page;			/* logical bucket page */
	uint32		tag;			/* the key's tag in that page */
	uint32		first;			/* the key's first bucket */
	uint32		generation;		/* stamp the page must have (CuckooLocate) */
} CuckooProbe;

/*
 * A backend's copy of the metapage (in the index's rd_amcache, as hash
 * keeps its metapage): see "Cached addressing" above.
 */
typedef struct CuckooMetaCache
{
	CuckooMetaPageData meta;
	CuckooLayout layout;
} CuckooMetaCache;

extern void CuckooLocateIn(uint32 npages, const CuckooLayout *layout,
						   uint32 fingerprint_bits, uint64 hash,
						   CuckooProbe *probe);
extern void CuckooLocate(const CuckooMetaPageData *meta,
						 const CuckooLayout *layout, uint64 hash,
						 CuckooProbe *probe);
extern BlockNumber CuckooPageBlock(const CuckooMetaPageData *meta,
								   uint32 logical_page);
extern CuckooMetaPage CuckooCheckMetaPage(Relation index, Page page);
extern void CuckooReadMeta(Relation index, CuckooMetaPageData *meta,
						   CuckooLayout *layout);
extern CuckooMetaCache CuckooGetMetaCache(Relation index, bool refresh);
extern void CuckooCacheMeta(Relation index, const CuckooMetaPageData *meta);
extern void CuckooStampPage(Page page, uint32 generation);
extern bool CuckooPageHolds(Page page, uint32 generation);
extern bool CuckooIsPage(Page page, uint16 flags);
extern void CuckooCheckPage(Relation index, Buffer buf, uint16 flags);
extern FmgrInfo *CuckooHashProc(Relation index, Oid subtype, FmgrInfo *cross);
extern uint64 CuckooHashDatum(Relation index, Oid subtype, Oid collation,
							  Datum value);
extern void CuckooPageChanged(Relation index, Buffer buf);
extern void CuckooSetShape(Page page, const CuckooLayout *layout);
extern void CuckooMaskPage(Page page);

/*
 * Page changes: through fbf's WAL (common/fbf_xlog.h) when "wal"; an index
 * build writes without WAL and logs every page once at the end.
 */
extern struct FbfXLogState *CuckooChangeStart(Relation index, bool wal);
extern Page CuckooChangePage(struct FbfXLogState *state, Buffer buf, int flags);
extern void CuckooChangeFinish(Relation index, struct FbfXLogState *state,
							   Buffer *bufs, int nbufs);

#endif							/* CUCKOO_H */
