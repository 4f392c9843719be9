/*-------------------------------------------------------------------------
 *
 * window_int.h
 *	  Declarations shared by the files of the window subsystem only: page
 *	  accessors, the metapage lock, pending entries' fate, and the
 *	  setting the window owns.  Nothing outside src/window includes this.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_WINDOW_INT_H
#define FBF_WINDOW_INT_H

#include "postgres.h"

#include "storage/buf.h"
#include "storage/bufpage.h"
#include "access/transam.h"
#include "storage/smgr.h"

#include "compat.h"
#include "core/bloom_slice.h"
#include "core/cwin_snap.h"
#include "window/window.h"

/* fbf.max_filter_size, in kB: the memory cap of one window (window_am.c) */
extern int	fbf_max_filter_size_kb;

/* fbf.split_batch: partitions a maintenance pass splits or merges, 0: all */
extern int	fbf_split_batch;

/* window_am.c: refuse a window on anything but a plain heap table */
extern void FbfWindowCheckTable(Oid relid);

/* ---- page accessors ---- */

static inline FbfWindowMetaPage
FbfWindowPageGetMeta(Page page)
{
	return (FbfWindowMetaPage) PageGetContents(page);
}

static inline uint64 *
FbfWindowPageGetWords(Page page)
{
	return (uint64 *) PageGetContents(page);
}

/* the entries of a pending page; *n gets their number */
static inline FbfPendingEntry *
FbfWindowPageGetEntries(Page page, int *n)
{
	char	   *start = PageGetContents(page);

	*n = (int) ((((PageHeader) page)->pd_lower - (start - (char *) page)) /
				sizeof(FbfPendingEntry));
	return (FbfPendingEntry *) start;
}

static inline void
FbfWindowPageSetEntryCount(Page page, int n)
{
	((PageHeader) page)->pd_lower =
		PageGetContents(page) + n * sizeof(FbfPendingEntry) - (char *) page;
}

/* birth epoch that logical filter i's lane must carry to be current */
static inline int64
FbfWindowExpectedStamp(const FbfWindowMetaPageData *meta, int logical)
{
	return meta->epoch - logical;
}

/* a partition page's lane stamps and counts, and its words */
static inline FbfSliceHeader *
FbfSlicePageGetHeader(Page page)
{
	return (FbfSliceHeader *) PageGetContents(page);
}

static inline void *
FbfSlicePageGetWords(Page page)
{
	return PageGetContents(page) + MAXALIGN(sizeof(FbfSliceHeader));
}

/*
 * The lanes of a partition page that hold their live filter's current
 * bits, as a mask by lane; the others read as empty.
 */
static inline uint64
FbfSliceCurrentLanes(Page page, const FbfWindowMetaPageData *meta)
{
	const FbfSliceHeader *h = FbfSlicePageGetHeader(page);
	uint64		lanes = 0;
	int			i;

	for (i = 0; i < meta->nlive; i++)
	{
		if (h->stamp[meta->ring[i]] == FbfWindowExpectedStamp(meta, i))
			lanes |= UINT64CONST(1) << meta->ring[i];
	}
	return lanes;
}

/* a mask by lane as a mask by logical filter (bit i: live filter i) */
static inline uint64
FbfSliceLogicalMask(const FbfWindowMetaPageData *meta, uint64 lanes)
{
	uint64		mask = 0;
	int			i;

	for (i = 0; i < meta->nlive; i++)
		mask |= ((lanes >> meta->ring[i]) & 1) << i;
	return mask;
}

/* ---- window_key.c: the window's secret key ---- */
extern void FbfWindowKeyInit(void);
extern void FbfWindowNewKey(FbfHashKey *key);
extern bool FbfWindowKeysEqual(const FbfHashKey *a, const FbfHashKey *b);
extern void FbfWindowKeyingOf(const FbfWindowMetaPageData *meta, int64 now,
							  FbfWindowKeying *keying);
extern bool FbfWindowKeyStep(Relation index, FbfWindowMetaPageData *meta,
							 int64 now, const FbfHashKey *key);
extern void FbfWindowKeepPublic(FbfWindowMetaPageData *meta, int64 now);
extern void FbfWindowAdoptKey(FbfWindowMetaPageData *new, const FbfHashKey *key,
							  bool public_too, int64 now);
extern bool FbfWindowMergeKey(Relation index, FbfWindowMetaPageData *meta,
							  const FbfHashKey *key, bool public_too,
							  int64 now, bool *changed);

/* ---- window_legacy.c: windows of storage version 1 ---- */

/*
 * The metapage of storage version 1 (fbf 1.0, and 1.1 before partition
 * pages): one block per filter and partition.  Read only to upgrade.
 */
typedef struct FbfWindowMetaV1Data
{
	uint32		magic;
	uint32		version;
	uint32		nbits;
	uint32		nparts;
	uint16		nhashes;
	uint16		nfilters;
	uint16		nlive;
	uint16		nslots;
	uint32		flags;
	uint32		shards;
	int64		epoch;
	int64		period;
	int64		base_period;
	int64		retention;
	float8		target_fpp;
	int64		created_at;
	int64		resizes;
	uint8		ring[FBF_MAX_FILTERS];
	int64		born_at[FBF_MAX_FILTERS];
	BlockNumber slot_start[FBF_MAX_FILTERS];
	uint32		features;
	uint32		reserved;
	int64		clock_at;
	int64		clock_boottime;
	int64		clock_wall;
	uint8		clock_boot[16];
	int64		legacy_until;
	int64		capped_warned_at;
} FbfWindowMetaV1Data;

extern void FbfLegacyReadMeta(Page metapage, FbfWindowMetaPageData *meta);
extern void FbfLegacyUpgrade(Relation index, Buffer metabuf,
							 FbfWindowMetaPageData *meta, int64 now);
extern bool FbfLegacyContains(Relation index, const FbfWindowMetaPageData *meta,
							  const FbfHash *hash);

/* ---- window_page.c ---- */
extern void FbfWindowInitPage(Page page, uint16 page_id);
extern void FbfWindowInitPendingPage(Page page);
extern void FbfWindowSetMeta(Page page, const FbfWindowMetaPageData *meta);
extern Buffer FbfWindowReadPage(Relation index, BlockNumber blkno, int mode,
								uint16 page_id);
extern Buffer FbfWindowLockMeta(Relation index, int mode,
								FbfWindowMetaPageData *meta);
extern void FbfWindowLogMeta(Relation index, Buffer metabuf,
							 FbfWindowMetaPageData *meta, int64 now);
extern void FbfWindowAppendPage(Relation index, ForkNumber fork,
								BlockNumber *next, Page image);
extern void FbfWindowInitSlicePage(Page page, uint32 nbits);
extern BlockNumber FbfWindowAppendParts(Relation index, ForkNumber fork,
										BlockNumber *next, uint32 nparts,
										const FbfWindowMetaPageData *meta);
extern void FbfWindowCheckCancel(Buffer metabuf);
extern Buffer FbfWindowReadPart(Relation index, BlockNumber blkno, int mode);

/* ---- window_cuckoo.c: partition pages of a cuckoo window ---- */
extern void FbfCuckooLayout(const FbfWindowMetaPageData *meta, CwinLayout *layout);
extern void FbfCuckooEpochs(const FbfWindowMetaPageData *meta, CwinEpochs *epochs);
extern void FbfCuckooRotate(FbfWindowMetaPageData *meta);
extern void FbfCuckooPlan(Relation index, const FbfWindowOptions *opts,
						  FbfWindowMetaPageData *meta);
extern void FbfCuckooInitPage(Page page, const CwinLayout *layout, int64 epoch);
extern Buffer FbfCuckooReadPart(Relation index, BlockNumber blkno, int mode);
extern bool FbfCuckooContains(Relation index, const FbfWindowMetaPageData *meta,
							  const FbfHash *hash);
extern int	FbfCuckooDrainPending(Relation index, const FbfWindowMetaPageData *meta,
								  Buffer pbuf, bool *refused);
extern void FbfCuckooSplitPart(Relation index, const FbfWindowMetaPageData *meta,
							   Buffer src, const Buffer *dst, uint32 factor);
extern uint32 FbfCuckooSplitFactor(const FbfWindowMetaPageData *meta,
								   double rate, bool *capped);
extern void FbfCuckooCounts(Relation index, const FbfWindowMetaPageData *meta,
							uint64 *counts, uint64 *distinct, double *max_load);
extern double FbfCuckooEstimateFpp(const FbfWindowMetaPageData *meta,
								   const uint64 *counts);


/* ---- window_cuckoo_load.c: a cuckoo window's snapshot, taken and loaded ---- */
struct FbfSnapshotRead;
extern CwinSnap *FbfCuckooSnapshot(struct FbfSnapshotRead *read,
								   uint64 *pending);

/* ---- window_load.c: what loads of both kinds share ---- */

/* A snapshot's births on the window's clock, and when its filters expire. */
typedef struct FbfLoadTimes
{
	int64		now;			/* window time */
	TimestampTz wall_now;
	int64		born[FBF_MAX_FILTERS];	/* by logical filter, window time */
	int64		last;			/* latest operation its future can hold */
	int64		due[FBF_MAX_FILTERS];	/* when the original could forget
										 * each filter (FbfLoadDue) */
} FbfLoadTimes;

extern void FbfLoadCheckTimes(Relation index, const int64 *born, int nlive,
							  int64 period);
extern void FbfLoadTimesOf(const FbfWindowMetaPageData *meta,
						   const int64 *wall_born, int nlive, FbfLoadTimes *t);
extern int	FbfLoadDue(FbfLoadTimes *t, int nlive, int nfilters, int64 period,
					   int64 retention);
extern bool FbfWindowIsEmpty(Relation index, const FbfWindowMetaPageData *meta,
							 int64 now);

/*
 * Adopting a snapshot: initialise `page` (aligned, BLCKSZ) as partition
 * page p of the new window, for FbfWindowAdopt.
 */
typedef void (*FbfAdoptPageFn) (char *page, const FbfWindowMetaPageData *new,
								uint32 p, void *arg);
extern void FbfWindowAdopt(Relation index, Buffer metabuf,
						   FbfWindowMetaPageData *meta,
						   FbfWindowMetaPageData *new, FbfAdoptPageFn fill,
						   void *arg, const FbfLoadTimes *t);

static inline bool
FbfWindowIsCuckoo(const FbfWindowMetaPageData *meta)
{
	return meta->filter == FBF_FILTER_CUCKOO;
}

/* ---- window_clock.c ---- */
extern bool FbfWindowClockStale(const FbfWindowMetaPageData *meta);
extern void FbfWindowClockAnchor(Relation index, FbfWindowMetaPageData *meta,
								 int64 now);

/* ---- window_build.c ---- */
extern void FbfWindowInitStorage(Relation index, ForkNumber fork,
								 const FbfWindowOptions *opts);
extern bool FbfWindowCopyStorage(Relation index, FbfFileLocator old,
								 bool permanent);
extern void FbfWindowSyncOptions(Relation index);
extern void FbfWindowPlanParts(Relation index, const FbfWindowOptions *opts,
							   uint32 nchains, FbfWindowMetaPageData *meta);

/* ---- window_split.c ---- */
extern double FbfWindowPredictFpp(const FbfWindowMetaPageData *meta,
								  uint32 nparts, double rate);
extern uint32 FbfWindowSplitFactor(const FbfWindowMetaPageData *meta,
								   double rate, double increase_at, bool *capped);
extern uint32 FbfWindowMergeFactor(const FbfWindowMetaPageData *meta,
								   const uint64 *counts, double rate,
								   double decrease_at);
extern bool FbfWindowSplitStart(Relation index, uint32 split, uint32 merge);
extern void FbfWindowSetOverfull(FbfWindowMetaPageData *meta);

/* ---- window_ring.c ---- */
extern void FbfWindowNoteCapped(Relation index, bool capped,
								const FbfAimdPolicy *policy);
extern int	FbfWindowSplitStep(Relation index, int max_parts);
extern bool FbfWindowRotate(FbfWindowMetaPageData *meta, int64 now,
							int64 born);

/* ---- window_rebuild.c ---- */
extern bool FbfWindowBuildPages(Relation heap, Relation index);
extern void FbfWindowCheckIndexCleanup(Relation heap);

/* ---- window_pending.c ---- */

/* The fate of the (sub)transaction that applied a pending entry. */
typedef enum FbfEntryStatus
{
	FBF_ENTRY_OURS,				/* our transaction, or a subtransaction */
	FBF_ENTRY_IN_PROGRESS,
	FBF_ENTRY_COMMITTED,
	FBF_ENTRY_ABORTED
} FbfEntryStatus;

/*
 * A partition's pending chain: the head page and its overflow pages, all
 * locked exclusively, in chain order.
 */
typedef struct FbfPendingChain
{
	int			n;
	Buffer		bufs[FBF_MAX_PENDING_PAGES];
} FbfPendingChain;

/* the last fate FbfEntryStatusMemo read */
typedef struct FbfEntryMemo
{
	FullTransactionId fxid;
	FbfEntryStatus status;
} FbfEntryMemo;

extern FullTransactionId FbfEntryFullXid(const FbfWindowMetaPageData *meta,
										 const FbfPendingEntry *entry);
extern FbfEntryStatus FbfEntryStatusOf(FullTransactionId fxid);
extern FbfEntryStatus FbfEntryStatusMemo(const FbfWindowMetaPageData *meta,
										 const FbfPendingEntry *entry,
										 FbfEntryMemo *memo);
extern int	FbfPendingPageFind(Buffer buf, const FbfHash *hash, int *pos);
extern void FbfPendingPageNoteAdd(Buffer buf, XLogRecPtr lsn);
extern void FbfChainLock(Relation index, const FbfWindowMetaPageData *meta,
						 uint32 chainno, FbfPendingChain *chain);
extern void FbfChainLockMode(Relation index, const FbfWindowMetaPageData *meta,
							 uint32 chainno, int mode, FbfPendingChain *chain);
extern void FbfChainRelease(FbfPendingChain *chain);
extern uint64 FbfChainCommitted(const FbfWindowMetaPageData *meta,
								const FbfPendingChain *chain,
								void (*fn) (const FbfHash *hash, void *arg),
								void *arg);
extern int	FbfChainDrain(Relation index, const FbfWindowMetaPageData *meta,
						  FbfPendingChain *chain, bool may_defer);
extern bool FbfWindowTakeGrowthRequest(void);
extern FbfGrowth FbfWindowGrowNow(Relation index);
extern void FbfChainExtend(Relation index, FbfPendingChain *chain);
extern void FbfChainSetFloor(Relation index, FbfPendingChain *chain,
							 FullTransactionId floor);
extern FullTransactionId FbfChainFloor(FbfPendingChain *chain);

/*
 * ---- window_read.c: how a snapshot holds the window ----
 *
 * A snapshot (of either kind) reads the window chain by chain, each chain
 * share-locked while its partition pages and then its entries are read,
 * against `meta`, a copy of the metapage taken under a short share lock;
 * the metapage is checked to be unchanged in what a reader depends on
 * before each chain and after the last (FbfSnapshotLockChain,
 * FbfSnapshotReleaseChain), and the snapshot is taken again if it changed.  Only
 * the last try (`hold`) keeps the metapage share-locked throughout, so
 * that a snapshot finishes whatever the window's writers do.
 */
typedef struct FbfSnapshotRead
{
	Relation	index;
	FbfWindowMetaPageData meta; /* what the snapshot describes */
	bool		hold;			/* metabuf is held for the whole read */
	Buffer		metabuf;
	FbfPendingChain chain;		/* the chain being read */
} FbfSnapshotRead;

extern bool FbfSnapshotLockChain(FbfSnapshotRead *read, uint32 chainno);
extern bool FbfSnapshotReleaseChain(FbfSnapshotRead *read, bool last);
extern void FbfSnapshotCheckCancel(FbfSnapshotRead *read);

#endif							/* FBF_WINDOW_INT_H */
