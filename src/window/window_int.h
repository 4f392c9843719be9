/*-------------------------------------------------------------------------
 *
 * window_int.h
 *	  Declarations shared by the files of the window subsystem only, each
 *	  under the heading of the file that defines it, bottom layer first
 *	  (src/layers.txt; src/window/README.md, "Layers").  The on-disk layout
 *	  is window_page.h's, the filter-format interface window_format.h's.
 *	  Nothing outside src/window includes this.
 *
 * Lock order: src/window/README.md, "Lock definitions".
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_WINDOW_INT_H
#define FBF_WINDOW_INT_H

#include "postgres.h"

#include "access/transam.h"
#include "storage/buf.h"
#include "storage/bufpage.h"
#include "storage/smgr.h"

#include "compat.h"
#include "common/fbf_xlog.h"
#include "core/cwin_snap.h"
#include "core/fbf_stream.h"
#include "window/window.h"
#include "window/window_page.h"

/* the largest split (or merge) factor at once */
#define FBF_SPLIT_MAX_FACTOR	64

/* ---- window_options.c: the window's settings and reloptions ---- */

/* fbf.max_filter_size, in kB: the memory cap of one window */
extern int	fbf_max_filter_size_kb;

/* fbf.max_filter_size in pages */
static inline uint64
FbfWindowCapPages(void)
{
	return (uint64) fbf_max_filter_size_kb * 1024 / BLCKSZ;
}

/*
 * The partitions `nparts` doubles to within `max_pages`, the metapage and
 * `nchains` chains beside them, when a doubling needs `split_pages` times
 * the partitions it starts from (2: the new ones; 3: the old ones beside
 * the new): a format's FbfFilterRoutine.parts_at_cap.
 */
static inline uint32
FbfWindowPartsWithin(uint32 nparts, uint32 nchains, uint64 max_pages,
					 int split_pages)
{
	uint64		parts = nparts;

	while (1 + (uint64) nchains + parts * split_pages <= max_pages &&
		   parts * 2 <= PG_UINT32_MAX / 2)
		parts *= 2;
	return (uint32) parts;
}

/* fbf.split_batch: partitions a maintenance pass splits or merges, 0: all */
extern int	fbf_split_batch;

/* fbf.max_streams: streams a window without the reloption keeps */
extern int	fbf_max_streams;

extern void FbfWindowOptionsInit(void);
extern bytea *FbfWindowParseOptions(Datum reloptions, bool validate);

/* ---- window_page.c: pages, the metapage lock ---- */
extern void FbfWindowInitPage(Page page, uint16 page_id);
extern void FbfWindowInitPendingPage(Page page);
extern void FbfWindowSetMeta(Page page, const FbfWindowMetaPageData *meta);
extern Buffer FbfWindowReadPage(Relation index, BlockNumber blkno, int mode,
								uint16 page_id);
extern Buffer FbfWindowLockMeta(Relation index, int mode,
								FbfWindowMetaPageData *meta);
extern void FbfWindowReadMeta(Relation index, FbfWindowMetaPageData *meta);
extern void FbfWindowLogMeta(Relation index, Buffer metabuf,
							 FbfWindowMetaPageData *meta, int64 now);
extern void FbfWindowAppendPage(Relation index, ForkNumber fork,
								BlockNumber *next, Page image);
extern BlockNumber FbfWindowAppendParts(Relation index, ForkNumber fork,
										BlockNumber *next, uint32 nparts,
										const FbfWindowMetaPageData *meta);
extern void FbfWindowCheckCancel(Buffer metabuf);
extern bool FbfWindowRotationDue(const FbfWindowMetaPageData *meta,
								 int64 now);
extern bool FbfWindowRotate(FbfWindowMetaPageData *meta, int64 now,
							int64 born, int64 pending);

/* ---- window_clock.c: the window's own time ---- */
extern int64 FbfWindowNow(const FbfWindowMetaPageData *meta);
extern TimestampTz FbfWindowWallTime(const FbfWindowMetaPageData *meta,
									 int64 window_time);
extern bool FbfWindowClockStale(const FbfWindowMetaPageData *meta);
extern void FbfWindowClockAnchor(Relation index, FbfWindowMetaPageData *meta,
								 int64 now);

/* ---- window_stream.c: exact streams (core/fbf_stream.h) ---- */

/* One drained operation of a stream, for FbfStreamsRecord. */
typedef struct FbfStreamOp
{
	uint64		stream;
	int64		seq;
} FbfStreamOp;

extern int64 FbfStreamHorizon(const FbfWindowMetaPageData *meta, int64 now);
extern BlockNumber FbfStreamBlock(const FbfWindowMetaPageData *meta,
								  uint64 stream);
extern uint32 FbfStreamPagesFor(int max_streams);
extern int	FbfStreamsWanted(Relation index, uint32 have);
extern BlockNumber FbfStreamsCreate(Relation index, Buffer metabuf,
								   ForkNumber fork, BlockNumber *next,
								   uint32 npages, int64 since);
extern FbfStreamAnswer FbfStreamCheck(Relation index,
									  const FbfWindowMetaPageData *meta,
									  uint64 stream, int64 seq, int64 now);
extern void FbfStreamsRecord(Relation index, const FbfWindowMetaPageData *meta,
							 const FbfStreamOp *ops, int n, int64 now,
							 int held_pages);
extern void FbfStreamsReset(Relation index, Buffer metabuf,
							const FbfWindowMetaPageData *meta, int64 now);
extern void FbfStreamsGetStats(Relation index, const FbfWindowMetaPageData *meta,
							   FbfWindowStats *stats);
extern unsigned char *FbfStreamsSnapshot(Relation index, Buffer metabuf,
										 const FbfWindowMetaPageData *meta,
										 const FbfStreamOp *annexes, int n,
										 size_t *len);
extern void FbfStreamsInstall(Relation index, Buffer metabuf,
							  const FbfWindowMetaPageData *meta,
							  const unsigned char *streams, bool adopt,
							  int64 shift, int64 now);
extern void FbfStreamXLogInit(void);

/* ---- window_pending.c: pending chains, and the one drain loop ---- */

/*
 * The FullTransactionId of `xid`, assigned before `next` and at most 2^32
 * xids before it: the epoch `next` has, or the one before.
 */
static inline FullTransactionId
FbfFullXidBefore(FullTransactionId next, TransactionId xid)
{
	uint32		epoch = EpochFromFullTransactionId(next);

	if (xid >= XidFromFullTransactionId(next) && epoch > 0)
		epoch--;
	return FullTransactionIdFromEpochAndXid(epoch, xid);
}

/*
 * What an operation's partition page says of the room its current filter
 * has this period (FbfFilterRoutine.contains): a drain that may put
 * entries off (FbfChainDrain) stores its entry there, or leaves it on the
 * chain to wait for the next period's bits, or that and the page asks the
 * window to grow.  Each state implies the one before it.
 */
typedef enum FbfLane
{
	FBF_LANE_ROOM,				/* stored when drained */
	FBF_LANE_FULL,				/* put off: it waits on its chain */
	FBF_LANE_OVERFULL			/* and the page asks for more bits */
} FbfLane;

/*
 * What a drain's store did with the committed entries it was given
 * (FbfFilterRoutine.store, FbfChainDrain), ordered so that the most of a
 * drain's rounds (Max) is what it left.  Entries that wait stay on their
 * chain, and the drain passes
 * over their partition pages; only those that wait for more bits make the
 * window grow (a split adds no room for the entries of the period it
 * comes in where their pages are full by the bits those entries spend).
 */
typedef enum FbfStored
{
	FBF_STORED_ALL,				/* every entry stored */
	FBF_STORED_WAITS,			/* some wait for the next period's room */
	FBF_STORED_GROW				/* some wait for more bits: grow */
} FbfStored;

/*
 * What a store calls once it has decided which of a round's entries it
 * stores (keep[i] = 0 with a target) and before it writes them: the drain
 * records the stored operations in their stream pages there
 * (window_pending.c), as an operation must be known to its stream before
 * it leaves its chain.  Entries that wait are recorded when they are
 * stored, not at every drain that passes over them.
 */
typedef void (*FbfStoreDecided) (void *arg, const uint8 *keep);

/*
 * At most this many partition pages in one drain round (one WAL record; a
 * format may take fewer: FbfFilterRoutine.store_pages).  A chain's
 * operations fall in meta->nparts / meta->nchains partitions
 * (FBF_PARTS_PER_CHAIN in a new window, more after splits), so a Bloom
 * drain of a window that has not split is one round and one record.  Not
 * more: a drain pins these beside its whole chain, and, while it holds
 * them, the stream pages of what it stores (FbfStreamsRecord, up to
 * FBF_STREAMS_MAX_PAGES together with them); at 16,
 * test/t/021_window_filters.pl (TAP's 1 MB of shared buffers) failed
 * twice in two runs with "no unpinned buffers available" in a
 * maintenance drain, and passes at 8.  The locks: well under
 * MAX_SIMUL_LWLOCKS (below).
 */
#define FBF_DRAIN_MAX_PAGES		FBF_PARTS_PER_CHAIN

/*
 * The buffer locks a backend may hold at once: lwlock.c's
 * MAX_SIMUL_LWLOCKS, which no header exports.  The most the window takes
 * together is the metapage, a whole chain, a drain's partition pages and
 * the stream pages of what it stores (FBF_STREAMS_MAX_PAGES,
 * window_stream.c, asserted there), with room for the locks PostgreSQL
 * takes meanwhile (a WAL insertion lock, a buffer mapping partition, a
 * victim buffer's).
 */
#define FBF_MAX_SIMUL_LWLOCKS	200
#define FBF_LWLOCK_SLACK		8


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
extern bool FbfChainInFlight(const FbfWindowMetaPageData *meta,
							 const FbfPendingChain *chain);
extern int	FbfChainDrain(Relation index, const FbfWindowMetaPageData *meta,
						  FbfPendingChain *chain, bool may_defer,
						  FbfStored *put_off);
extern void FbfChainExtend(Relation index, FbfPendingChain *chain);
extern void FbfChainSetFloor(Relation index, FbfPendingChain *chain,
							 FullTransactionId floor);
extern FullTransactionId FbfChainFloor(FbfPendingChain *chain);

extern int64 FbfWindowPendingCount(Relation index,
								   const FbfWindowMetaPageData *meta);

/* ---- window_chain_index.c: a held chain's entries by hash ---- */

/*
 * The entries of a chain a run of operations holds (FbfWindowHold), by
 * hash: valid only while that run holds the chain locked.
 */
typedef struct FbfChainIndex
{
	MemoryContext cxt;			/* where the table is allocated */
	bool		valid;			/* describes the held chain */
	uint32		nslots;			/* a power of two */
	uint32		nused;
	uint32	   *slots;
} FbfChainIndex;

/* A look-up of one hash in a chain's index. */
typedef struct FbfChainIndexScan
{
	const FbfChainIndex *cix;
	const FbfPendingChain *chain;
	FbfHash		hash;
	uint32		slot;
} FbfChainIndexScan;

extern void FbfChainIndexBuild(FbfChainIndex *cix,
							   const FbfPendingChain *chain);
extern void FbfChainIndexReset(FbfChainIndex *cix);
extern void FbfChainIndexNoteAdds(FbfChainIndex *cix,
								  const FbfPendingChain *chain, int page,
								  int from);
extern void FbfChainIndexScanBegin(FbfChainIndexScan *scan,
								   const FbfChainIndex *cix,
								   const FbfPendingChain *chain,
								   const FbfHash *hash);
extern bool FbfChainIndexNext(FbfChainIndexScan *scan, int *page, int *pos);

/*
 * ---- window_read.c: how a snapshot holds the window ----
 *
 * A snapshot (of either format) reads the window chain by chain, each chain
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

extern uint32 FbfWindowViewParts(const FbfWindowMetaPageData *meta);
extern BlockNumber FbfWindowViewBlock(const FbfWindowMetaPageData *meta,
									  uint32 v);
extern void FbfWindowCounts(Relation index, const FbfWindowMetaPageData *meta,
							uint64 *counts, uint64 *distinct, double *max_load);
extern double FbfWindowEstimateFpp(const FbfWindowMetaPageData *meta,
								   const uint64 *counts);
extern void FbfWindowCapacityOf(const FbfWindowMetaPageData *meta,
								FbfWindowCapacity *cap);
extern bool FbfSnapshotLockChain(FbfSnapshotRead *read, uint32 chainno);
extern bool FbfSnapshotReleaseChain(FbfSnapshotRead *read, bool last);
extern void FbfSnapshotCheckCancel(FbfSnapshotRead *read);

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

/* ---- window_adopt.c: what loads of both formats share ---- */

/*
 * Birth times are compared within this much (microseconds): the
 * precision of converting them between the wall clock and window time,
 * which read two clocks one after the other.
 */
#define FBF_LOAD_CLOCK_SLACK	(10 * 1000)

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

extern int64 FbfLoadExpires(const int64 *born, int nlive, int64 period,
							int64 retention, int i, int64 last);
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
						   void *arg, const FbfLoadTimes *t,
						   const unsigned char *streams);
extern bool FbfLoadKeepsStreams(const FbfWindowMetaPageData *meta,
								const FbfHashKey *key, bool public_too);

/*
 * ---- window_bloom.c: the Bloom format's partition pages ----
 * After the first two, the page operations of FbfBloomRoutine
 * (window_bloom_snap.c), each the member of window_format.h its name
 * says; the window core calls them through the routine.
 */
extern void FbfBloomInitPage(Page page, uint32 nbits);
extern Buffer FbfBloomReadPart(Relation index, BlockNumber blkno, int mode);
extern void FbfBloomPlan(Relation index, const FbfWindowOptions *opts,
						 uint32 nchains, FbfWindowMetaPageData *meta);
extern void FbfBloomSpread(FbfWindowMetaPageData *meta, uint32 planned);
extern bool FbfBloomValidateMeta(const FbfWindowMetaPageData *meta);
extern bool FbfBloomSameShape(const FbfWindowMetaPageData *then,
							  const FbfWindowMetaPageData *now);
extern void FbfBloomDeriveMeta(FbfWindowMetaPageData *meta);
extern void FbfBloomInitPageFor(Page page, const FbfWindowMetaPageData *meta);
extern bool FbfBloomContains(Relation index, const FbfWindowMetaPageData *meta,
							 const FbfHash *hash, FbfLane *lane);
extern FbfStored FbfBloomStore(Relation index, const FbfWindowMetaPageData *meta,
							   Buffer pbuf, const FbfPendingEntry *entries, int n,
							   uint8 *keep, const BlockNumber *target,
							   const BlockNumber *blocks, int nblocks,
							   bool may_defer, FbfStoreDecided decided,
							   void *decided_arg);
extern void FbfBloomSplitPage(Relation index, const FbfWindowMetaPageData *meta,
							  BlockNumber src, BlockNumber dst_start,
							  uint32 factor);
extern void FbfBloomMergePages(Relation index, const FbfWindowMetaPageData *meta,
							   BlockNumber src_start, uint32 factor,
							   BlockNumber dst);
extern void FbfBloomCounts(Relation index, const FbfWindowMetaPageData *meta,
						   uint64 *counts, uint64 *distinct, double *max_load);
extern double FbfBloomEstimateFpp(const FbfWindowMetaPageData *meta,
								  const uint64 *counts);
extern uint32 FbfBloomSplitFactor(const FbfWindowMetaPageData *meta, double rate,
								  double increase_at, bool *capped);
extern uint32 FbfBloomMergeFactor(const FbfWindowMetaPageData *meta,
								  const uint64 *counts, double rate,
								  double decrease_at);
extern uint32 FbfBloomPartsAtCap(const FbfWindowMetaPageData *meta,
								 uint64 max_pages);
extern double FbfBloomPageCapacity(const FbfWindowMetaPageData *meta);
extern void FbfBloomStats(const FbfWindowMetaPageData *meta,
						  const uint64 *counts, FbfWindowStats *stats);

/*
 * ---- window_cuckoo.c: the cuckoo format's partition pages ----
 * After the first four, the page operations of FbfCuckooRoutine
 * (window_cuckoo_snap.c), as for Bloom above.
 */
extern void FbfCuckooLayout(const FbfWindowMetaPageData *meta, CwinLayout *layout);
extern void FbfCuckooEpochs(const FbfWindowMetaPageData *meta, CwinEpochs *epochs);
extern void FbfCuckooInitPage(Page page, const CwinLayout *layout, int64 epoch);
extern Buffer FbfCuckooReadPart(Relation index, BlockNumber blkno, int mode);
extern void FbfCuckooPlan(Relation index, const FbfWindowOptions *opts,
						  uint32 nchains, FbfWindowMetaPageData *meta);
extern void FbfCuckooSpread(FbfWindowMetaPageData *meta, uint32 planned);
extern bool FbfCuckooValidateMeta(const FbfWindowMetaPageData *meta);
extern bool FbfCuckooSameShape(const FbfWindowMetaPageData *then,
							   const FbfWindowMetaPageData *now);
extern void FbfCuckooDeriveMeta(FbfWindowMetaPageData *meta);
extern void FbfCuckooRotate(FbfWindowMetaPageData *meta);
extern void FbfCuckooInitPageFor(Page page, const FbfWindowMetaPageData *meta);
extern bool FbfCuckooContains(Relation index, const FbfWindowMetaPageData *meta,
							  const FbfHash *hash, FbfLane *lane);
extern FbfStored FbfCuckooStore(Relation index, const FbfWindowMetaPageData *meta,
								Buffer pbuf, const FbfPendingEntry *entries, int n,
								uint8 *keep, const BlockNumber *target,
								const BlockNumber *blocks, int nblocks,
								bool may_defer, FbfStoreDecided decided,
								void *decided_arg);
extern void FbfCuckooSplitPage(Relation index, const FbfWindowMetaPageData *meta,
							   BlockNumber src, BlockNumber dst_start,
							   uint32 factor);
extern void FbfCuckooCounts(Relation index, const FbfWindowMetaPageData *meta,
							uint64 *counts, uint64 *distinct, double *max_load);
extern double FbfCuckooEstimateFpp(const FbfWindowMetaPageData *meta,
								   const uint64 *counts);
extern uint32 FbfCuckooSplitFactor(const FbfWindowMetaPageData *meta, double rate,
								   double increase_at, bool *capped);
extern uint32 FbfCuckooPartsAtCap(const FbfWindowMetaPageData *meta,
								  uint64 max_pages);
extern double FbfCuckooPageCapacity(const FbfWindowMetaPageData *meta);
extern void FbfCuckooStats(const FbfWindowMetaPageData *meta,
						   const uint64 *counts, FbfWindowStats *stats);

/* ---- window_build.c: a window's pages made ---- */
extern void FbfWindowPlan(Relation index, const FbfWindowOptions *opts,
						  uint32 nchains, FbfWindowMetaPageData *meta);
extern void FbfWindowInitStorage(Relation index, ForkNumber fork,
								 const FbfWindowOptions *opts);
extern bool FbfWindowCopyStorage(Relation index, FbfFileLocator old,
								 bool permanent);
extern void FbfWindowSyncOptions(Relation index);

/* ---- window_legacy.c: windows of storage version 1 ---- */
extern void FbfLegacyUpgrade(Relation index, Buffer metabuf,
							 FbfWindowMetaPageData *meta, int64 now);
extern bool FbfLegacyContains(Relation index, const FbfWindowMetaPageData *meta,
							  const FbfHash *hash);

/* ---- window_split.c: splits and merges, growth at once ---- */
extern bool FbfWindowSplitStart(Relation index, uint32 from, uint32 split,
								uint32 merge);
extern int	FbfWindowSplitStep(Relation index, int max_parts);
extern FbfGrowth FbfWindowGrowNow(Relation index);

/* ---- window_ring.c: refresh, resize, the capped flag ---- */
extern bool FbfWindowCapped(const FbfWindowMetaPageData *meta, double fpp,
							const FbfAimdPolicy *policy);
extern void FbfWindowNoteCapped(Relation index, bool capped,
								const FbfAimdPolicy *policy);
extern FbfAimdDecision FbfWindowAimdStep(Relation index,
										 const FbfWindowMetaPageData *meta,
										 const FbfAimdPolicy *policy,
										 double fpp, double rate);

/* ---- window_maintain.c: whole-window drains, the maintenance pass ---- */
extern int	FbfWindowDrain(Relation index, bool *grow);

/* ---- window_catalog.c ---- */
extern void FbfWindowCheckTable(Oid relid);

/* ---- window_rebuild.c ---- */
extern bool FbfWindowBuildPages(Relation heap, Relation index);
extern void FbfWindowCheckIndexCleanup(Relation heap);

#endif							/* FBF_WINDOW_INT_H */
