/*-------------------------------------------------------------------------
 *
 * window.h
 *	  A counter's window: its Forgetful Bloom Filter and pending chains in
 *	  the pages of its window index.  On-disk layout, and the interface the
 *	  counters and the worker use.  Vocabulary in src/window/README.md.
 *
 * A counter table's window lives in the pages of an index of the internal
 * access method `fbf_filter` on that table (the window index).  Every
 * change goes through the buffer manager with fbf's WAL records (common/fbf_xlog.h), so checkpoints,
 * crash recovery, base backups and streaming replication carry it with
 * no extra machinery; dropping the table drops the index and its storage.
 *
 * Blocks (P = nparts, the number of partitions):
 *
 *		0						metapage: shape, ring, periods, retention
 *		1 .. P					pending page of each partition (chain head)
 *		slot_start[s] + p		slot s's block for partition p
 *		anywhere after			pending overflow pages, chained from a head
 *
 * An operation hashes to one partition and touches only that partition's
 * pending chain and blocks, so its work and WAL are a few pages whatever
 * the window's size.  Slots are reused: the metapage's ring maps logical
 * filter i (0 = future, 1 = present, 2.. past) to a slot, and
 * slot_start[] says where each slot's P blocks begin (slots added by AIMD
 * are appended to the relation).
 *
 * Pending pages: an operation is not written into the Bloom bits when it is
 * applied, because bits cannot be taken back if its transaction aborts.  It
 * is appended to its partition's pending page with the applying
 * (sub)transaction's xid, in the same transaction as the counter update.
 * Whether the operation "happened" is then exactly whether that xid
 * committed: concurrent callers find the entry and wait on the xid; after a
 * crash the entry is in the WAL-replayed page and the xid's fate is in the
 * commit log.  Entries whose xid committed are later drained into the
 * future and present filters; aborted ones are discarded.
 *
 * Window time: birth times, the period and the retention are in the
 * window's own clock, elapsed time anchored in the metapage, never the wall
 * clock (window_clock.c).  Pending entries carry 64-bit xids, and each
 * chain head its floor, so that entries are drained before the commit log
 * forgets their fate (window_pending.c).
 *
 * Lazy clearing: a refresh only rewrites the metapage (one small WAL
 * record).  Each filter block carries the epoch at which its slot became
 * future ("stamp"); a block whose stamp does not match the ring is stale and
 * reads as empty, and the first writer clears and restamps it.
 *
 * Locking protocol (always in this order, never waiting on a transaction
 * while holding a buffer lock):
 *	1. the counter table, RowExclusiveLock (taken by the caller; DDL that
 *	   rebuilds or drops the window conflicts with it);
 *	2. the metapage buffer: share for an operation, exclusive to refresh or
 *	   resize.  Holding it share for the whole operation keeps the ring
 *	   stable while entries are appended and bits are set;
 *	3. one partition's pending chain, exclusive, head first (the head's
 *	   lock is what serialises the partition's operations);
 *	4. that partition's filter blocks: share to test, exclusive to set.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_WINDOW_H
#define FBF_WINDOW_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "storage/block.h"
#include "utils/relcache.h"
#include "utils/timestamp.h"

#include "core/fbf_aimd.h"
#include "core/fbf_core.h"

#define FBF_META_MAGIC			0x46424643	/* "FBFC" */
#define FBF_STORAGE_VERSION		1

#define FBF_METAPAGE_BLKNO		0

/* the last two bytes of every page's special space */
#define FBF_PAGE_ID_META		0xFB01
#define FBF_PAGE_ID_PENDING		0xFB02
#define FBF_PAGE_ID_FILTER		0xFB03

typedef struct FbfWindowMetaPageData
{
	uint32		magic;
	uint32		version;
	uint32		nbits;			/* bits per block */
	uint32		nparts;			/* partitions, one block each per filter */
	uint16		nhashes;
	uint16		nfilters;		/* N + 2, changed by AIMD */
	uint16		nlive;			/* live filters, logical 0..nlive-1 */
	uint16		nslots;			/* slots with pages: 0..nslots-1 */
	uint32		flags;			/* FBF_META_* */
	uint32		shards;			/* shard rows per key in the counter table */
	int64		epoch;			/* refreshes; birth epoch of future */
	int64		period;			/* refresh period t, microseconds */
	int64		base_period;	/* the planned period: AIMD never goes longer */
	int64		retention;		/* microseconds */
	float8		target_fpp;
	int64		created_at;		/* TimestampTz */
	int64		resizes;		/* AIMD resizes so far */
	uint8		ring[FBF_MAX_FILTERS];	/* logical filter -> slot */
	int64		born_at[FBF_MAX_FILTERS];	/* by logical filter, window time */
	BlockNumber slot_start[FBF_MAX_FILTERS];	/* first block of each slot */

	/* ---- since 1.1; zero in windows written by 1.0 (see features) ---- */
	uint32		features;		/* FBF_FEATURE_* */
	uint32		reserved;
	int64		clock_at;		/* window time at the clock's anchor */
	int64		clock_boottime; /* CLOCK_BOOTTIME then, microseconds */
	int64		clock_wall;		/* wall clock then, TimestampTz */
	uint8		clock_boot[16]; /* kernel boot id then */
	int64		legacy_until;	/* window time until which keyed operations
								 * also match their 1.0 identity */
	int64		capped_warned_at;	/* window time of the last "at its cap"
									 * WARNING */
} FbfWindowMetaPageData;

typedef FbfWindowMetaPageData *FbfWindowMetaPage;

#define FBF_META_CAPPED			0x0001	/* AIMD wanted to grow but a cap bit */

/*
 * What a window's pages carry, beyond the 1.0 format.  A window written by
 * 1.0 has none; the first refresh by this version upgrades it in place
 * (FbfWindowRefresh) and sets them all.
 */
#define FBF_FEATURE_CLOCK		0x0001	/* birth times are window time, and
										 * the clock anchor is set */
#define FBF_FEATURE_FULL_XIDS	0x0002	/* pending entries carry their xid's
										 * epoch */
#define FBF_FEATURE_KEYED_IDS	0x0004	/* keyed operations are recorded
										 * with their key in the identity */
#define FBF_FEATURES_ALL \
	(FBF_FEATURE_CLOCK | FBF_FEATURE_FULL_XIDS | FBF_FEATURE_KEYED_IDS)

typedef struct FbfWindowPageOpaqueData
{
	int64		stamp;			/* filter pages: birth epoch of their filter;
								 * pending chain heads: the chain's floor, a
								 * FullTransactionId no entry on it precedes
								 * (0: empty, or not known) */
	uint64		count;			/* filter pages: elements in this block;
								 * pending chain heads: first spare overflow
								 * page (0: none) */
	BlockNumber next;			/* pending pages: next in the chain, or
								 * InvalidBlockNumber */
	uint16		unused;
	uint16		page_id;		/* FBF_PAGE_ID_* */
} FbfWindowPageOpaqueData;

typedef FbfWindowPageOpaqueData *FbfWindowPageOpaque;

#define FbfWindowPageGetOpaque(page) \
	((FbfWindowPageOpaque) PageGetSpecialPointer(page))

/*
 * An in-flight operation on a pending page.  The (sub)transaction that
 * applied it is (epoch, xid), a FullTransactionId, so its fate can never be
 * confused with another's across xid wraparound; windows written by 1.0 have
 * epoch 0 and lack FBF_FEATURE_FULL_XIDS (FbfEntryFullXid).
 */
typedef struct FbfPendingEntry
{
	TransactionId xid;			/* (sub)transaction that applied it */
	uint32		epoch;			/* its xid epoch */
	uint64		h1;				/* the operation's hash */
	uint64		h2;
} FbfPendingEntry;

/* bytes usable for bits or entries on a page */
#define FBF_PAGE_CONTENT_BYTES \
	(BLCKSZ - MAXALIGN(SizeOfPageHeaderData) - MAXALIGN(sizeof(FbfWindowPageOpaqueData)))
#define FBF_BLOCK_MAX_BITS		((uint32) (FBF_PAGE_CONTENT_BYTES / 8) * 64)
#define FBF_PENDING_CAPACITY \
	((int) (FBF_PAGE_CONTENT_BYTES / sizeof(FbfPendingEntry)))

/*
 * Filters a new counter's plan may use.  Every live filter costs one page
 * read per operation; past 12 filters the memory saved is under 4% (at
 * 0.1%, 32.5 bits per remembered operation instead of 31.9), so the plan
 * stops there.  AIMD may still grow the ring to FBF_MAX_FILTERS.
 */
#define FBF_COUNTER_PLAN_MAX_FILTERS	12

/* pages in one partition's pending chain, at most (all locked at once) */
#define FBF_MAX_PENDING_PAGES	64

/*
 * An operation drains its partition's chain first once the chain's oldest
 * entry is this many xids old, so that no entry gets near the commit log's
 * horizon even where nothing else drains (window_pending.c).
 */
#define FBF_PENDING_DRAIN_AGE	1000000

static inline BlockNumber
FbfPendingBlock(const FbfWindowMetaPageData *meta, uint32 part)
{
	return 1 + part;
}

static inline BlockNumber
FbfFilterBlock(const FbfWindowMetaPageData *meta, int slot, uint32 part)
{
	return meta->slot_start[slot] + part;
}

/* Configuration of a counter's window, from the window index's reloptions. */
typedef struct FbfWindowOptions
{
	int32		vl_len_;		/* varlena header (do not touch directly) */
	int			retention_ms;
	double		target_fpp;
	double		expected_rate;
	int			shards;
	int			nbits;			/* 0: plan from the workload */
	int			nhashes;
	int			npast;
	int			at_capacity;	/* FBF_AT_CAPACITY_* */
} FbfWindowOptions;

/*
 * What a counter does while its filter is at its cap (AIMD wanted to grow
 * it, fbf.max_filter_size did not let it): keep answering from the filter,
 * which then dismisses new operations at its estimated false-positive
 * rate, or refuse new operations (53400) so that clients retry later.
 */
#define FBF_AT_CAPACITY_DISMISS		0
#define FBF_AT_CAPACITY_REFUSE		1

/* the "at its cap" WARNING repeats at most this often while it lasts */
#define FBF_CAPPED_WARN_INTERVAL	(60 * USECS_PER_SEC)

/*
 * How AIMD may change a window: the server-wide part of the controller's
 * configuration, chosen by the caller of FbfWindowMaintain (the counters
 * own these settings).  The per-counter part (target, retention, shape)
 * comes from the metapage, the memory cap from fbf.max_filter_size.
 */
typedef struct FbfAimdPolicy
{
	double		increase_at;	/* grow at this fraction of the target */
	double		decrease_at;	/* shrink at this fraction of the target */
	int64		period_step;	/* microseconds per step */
	int64		period_min;		/* microseconds */
} FbfAimdPolicy;

/* Outcome of FbfWindowApply. */
typedef enum FbfOpResult
{
	FBF_OP_APPLIED,				/* new: recorded as in flight, apply it */
	FBF_OP_DUPLICATE			/* seen: committed or ours, dismiss it */
} FbfOpResult;

/* ---- window_am.c: the access method, and finding windows ---- */
extern void FbfWindowInit(void);
extern List *FbfWindowIndexes(void);
extern FbfWindowOptions *FbfWindowGetOptions(Relation index);
extern bool FbfIsCounterTable(Relation heap, Oid *index_oid);

/* ---- window_rebuild.c: carrying windows over table rebuilds ---- */
extern void FbfWindowRebuildInit(void);

/* ---- window_page.c ---- */
extern void FbfWindowReadMeta(Relation index, FbfWindowMetaPageData *meta);

/* ---- window_clock.c: the window's own time ---- */
extern int64 FbfWindowNow(const FbfWindowMetaPageData *meta);
extern TimestampTz FbfWindowWallTime(const FbfWindowMetaPageData *meta,
									 int64 window_time);

/* ---- window_apply.c: one operation ---- */
extern FbfOpResult FbfWindowApply(Relation index, const FbfHash *hash,
								  const FbfHash *legacy_hash);

/* ---- window_pending.c ---- */
extern int	FbfWindowDrain(Relation index);
extern int64 FbfWindowPendingCount(Relation index,
								   const FbfWindowMetaPageData *meta);

/* ---- window_ring.c: refresh, resize, AIMD ---- */
extern int	FbfWindowRefresh(Relation index);
extern FbfAimdDecision FbfWindowMaintain(Relation index,
										 const FbfAimdPolicy *policy);
extern int	FbfWindowResize(Relation index, int nfilters);

/* ---- window_read.c: reading the whole window ---- */
extern void FbfWindowBlockCounts(Relation index,
								 const FbfWindowMetaPageData *meta,
								 uint64 *counts);
extern double FbfWindowEstimateFpp(const FbfWindowMetaPageData *meta,
								   const uint64 *counts);
extern Fbf *FbfWindowSnapshot(Relation index, uint64 *pending);
extern int64 FbfWindowRefreshDueIn(Relation index);

#endif							/* FBF_WINDOW_H */
