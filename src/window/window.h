/*-------------------------------------------------------------------------
 *
 * window.h
 *	  A counter's window, as the rest of the extension sees it: the
 *	  options of a window index, how identities are hashed and applied,
 *	  growth, refresh and maintenance, snapshots and loads, statistics.
 *	  The interface src/counter, src/worker and src/fbf.c use; the on-disk
 *	  layout is window_page.h's, and nothing outside src/window includes
 *	  it.  Vocabulary in src/window/README.md.
 *
 * A counter table's window lives in the pages of an index of the internal
 * access method `fbf_filter` on that table (the window index).  Every
 * change goes through the buffer manager with fbf's WAL records
 * (common/fbf_xlog.h), so checkpoints, crash recovery, base backups and
 * streaming replication carry it with no extra machinery; dropping the
 * table drops the index and its storage.
 *
 * Lock order: src/window/README.md, "Lock definitions".  A caller of
 * this interface holds the counter table (RowExclusiveLock to write the
 * window, AccessShareLock to read it) and no buffer lock; the window's
 * functions take and release its page locks themselves.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_WINDOW_H
#define FBF_WINDOW_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/relcache.h"
#include "utils/timestamp.h"

#include "core/fbf_aimd.h"
#include "core/fbf_core.h"

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
	int			kind;			/* FBF_WINDOW_* */
	int			filter;			/* FBF_FILTER_* */
	bool		track_mismatch; /* a counter records its operations' delta
								 * identities, and counts retries whose
								 * delta differs (src/counter) */
	int			max_streams;	/* exact streams kept at most (0: none;
								 * -1: fbf.max_streams) */
	int			share_by;		/* FBF_SHARE_BY_*: who shares its capacity */
	bool		worker_maintenance; /* the background worker's passes
									 * maintain it (src/worker) */
} FbfWindowOptions;

/*
 * What a window remembers operations for, fixed when its table is created:
 * a counter table's increments (fbf_create_counter_table), or a dedup
 * table's claims (fbf_create_dedup).  The window itself works alike for
 * both; the kind tells the SQL functions which of them a table accepts.
 */
#define FBF_WINDOW_COUNTER			0
#define FBF_WINDOW_DEDUP			1


/*
 * What a counter does while its filter is at its cap (AIMD wanted to grow
 * it, fbf.max_filter_size did not let it): keep answering from the filter,
 * which then dismisses new operations at its estimated false-positive
 * rate, or refuse new operations (53400) so that clients retry later.
 */
#define FBF_AT_CAPACITY_DISMISS		0
#define FBF_AT_CAPACITY_REFUSE		1

/*
 * Who shares a window's capacity while it refuses at capacity
 * (src/counter/README.md, "Shares"): each role, each key of a counter, or
 * nobody (one pool for all).
 */
#define FBF_SHARE_BY_ROLE			0
#define FBF_SHARE_BY_KEY			1
#define FBF_SHARE_BY_NONE			2

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
	FBF_OP_DUPLICATE,			/* seen: committed or ours, dismiss it */
	FBF_OP_REKEYED,				/* nothing done: the window's key is not
								 * the one the operation was hashed under */
	FBF_OP_RESERVED				/* nothing done: it would take the reserve
								 * of its pending chain, which the caller
								 * did not allow */
} FbfOpResult;

/*
 * Whether an operation may take room on the reserve of its pending chain
 * (the last fifth of its pages), which FbfWindowApply keeps for those its
 * caller lets in: the window says where the reserve is, the caller who
 * may take it (a counter's shares).
 */
typedef enum FbfReserve
{
	FBF_RESERVE_KEEP,			/* no: FBF_OP_RESERVED where it would */
	FBF_RESERVE_TAKE,			/* yes */
	FBF_RESERVE_GROW			/* yes, but where entries wait there for
								 * bits, only while the window can grow,
								 * growing it first; at its cap,
								 * FBF_OP_RESERVED */
} FbfReserve;

/*
 * How a window hashes identities (window_key.c, FbfWindowGetKeying): under
 * its secret key, and, while it may still hold operations recorded before
 * it had one (or before it gave up the fixed key of fbf.fixed_window_keys),
 * under the public hash (or that key) as well.  A caller reads it once per
 * call, with RowExclusiveLock on the table (FbfWindowGetKeying: the
 * backend's cached copy, or the metapage's), hashes its operations with
 * FbfWindowHashOperation and passes it to FbfWindowApply, which refuses
 * (FBF_OP_REKEYED) if it is not the window's keying any more: the caller
 * then reads it again from the metapage and hashes again.
 */
typedef struct FbfWindowKeying
{
	FbfHashKey	key;			/* zero: the public hash */
	bool		public_too;		/* also look identities up under the public
								 * hash */
	FbfHashKey	public_key;		/* with public_too, the key those lookups
								 * hash under: zero (the public hash), or
								 * the fixed key the window gave up */
	bool		keyless_too;	/* also look up the identity 1.0 gave keyed
								 * operations (window_legacy.c) */
} FbfWindowKeying;

/*
 * An operation's identity as its caller built it (src/counter: an
 * increment's or a claim's bytes), which FbfWindowHashOperation keys and
 * hashes in one place.  An operation numbered in a stream (a client's seq)
 * names its stream by the first stream_len of its bytes; `keyless` is the
 * identity 1.0 gave the same operation, or NULL.
 */
typedef struct FbfWindowIdentity
{
	const void *bytes;
	size_t		len;
	size_t		stream_len;		/* 0: not numbered in a stream */
	int64		seq;			/* with stream_len, its number there */
	const void *keyless;		/* NULL: none */
	size_t		keyless_len;
} FbfWindowIdentity;

/* One operation as the window is asked about it (FbfWindowHashOperation). */
typedef struct FbfWindowOp
{
	FbfHash		hash;			/* under the window's key: what is recorded */
	FbfHash		public_hash;	/* under the public hash, if has_public */
	FbfHash		keyless;		/* 1.0's identity without the key, under the
								 * public hash, if has_keyless */
	bool		has_public;
	bool		has_keyless;
	/* an operation numbered in a stream the window can keep */
	bool		has_stream;
	uint64		stream;			/* the stream's id, under the window's key */
	int64		seq;			/* its number in the stream */
} FbfWindowOp;

/*
 * Who answered FbfWindowApply (what fbf_counter_stats counts): the
 * pending chain (exact), a stream (exact), or the filter.  A stream's
 * "new" where the filter said "seen" is a false dismissal averted
 * (FBF_ANSWER_STREAM_OVERRULED).
 */
typedef enum FbfAnswer
{
	FBF_ANSWER_CHAIN,
	FBF_ANSWER_STREAM,
	FBF_ANSWER_STREAM_OVERRULED,
	FBF_ANSWER_FILTER
} FbfAnswer;

/*
 * What a window can take, as FbfWindowApply reads it from the metapage
 * when it records an operation: what the shares of a window's capacity
 * divide (src/counter/README.md, "Shares").
 */
typedef struct FbfWindowCapacity
{
	int64		epoch;			/* refreshes so far: the operation's period */
	double		per_period;		/* new operations one period takes under
								 * the target, the window grown as far as
								 * fbf.max_filter_size lets it */
	double		in_flight;		/* pending entries the chains hold at most */
	double		reserve;		/* of them, those of the chains' reserves */
	bool		capped;			/* at its cap, with no room left to grow
								 * under its target (FbfWindowCapped) */
} FbfWindowCapacity;

/* What FbfWindowApply tells its caller beside its result. */
typedef struct FbfApplyInfo
{
	bool		overfull;		/* grow the window at once (FbfWindowGrow) */
	bool		stale_keying;	/* the keying asks more than the window does
								 * now: read it again for the next call
								 * (FbfWindowGetKeying) */
	FbfAnswer	answer;
	/* FBF_OP_APPLIED: the entries it took (2 with its annex), whether
	 * they went on its chain's reserve and will wait there for room (its
	 * partition's filter holds what a drain may store there, as far as
	 * its format tells: a Bloom page's current filter has no room left
	 * this period, a cuckoo block waits for the window to grow or for its
	 * old entries to expire), and the capacity they count against */
	int			entries;
	bool		on_reserve;
	bool		waits;
	/* FBF_OP_RESERVED: the part of its chain's reserve still free, and
	 * whether what waits on its chain waits for the next period below the
	 * window's cap (a cuckoo window's entries, which no split lightens) */
	double		reserve_free;
	bool		waits_for_period;
	FbfWindowCapacity capacity;
} FbfApplyInfo;

/* ---- window_am.c: the access method ---- */
extern void FbfWindowInit(void);

/* ---- window_catalog.c: finding windows ---- */
extern List *FbfWindowIndexes(void);
extern bool FbfWindowTableUsable(Oid heapoid);
extern bool FbfIsCounterTable(Relation heap, Oid *index_oid);
extern int	FbfWindowIndexKind(Oid index_oid);

/* ---- window_options.c: a window index's reloptions ---- */
extern FbfWindowOptions *FbfWindowGetOptions(Relation index);

/* ---- window_rebuild.c: carrying windows over table rebuilds ---- */
extern void FbfWindowRebuildInit(void);


/* ---- window_key.c: the window's secret key ---- */
extern void FbfWindowGetKeying(Relation index, bool reread,
							   FbfWindowKeying *keying);
extern void FbfWindowHashOperation(const FbfWindowKeying *keying,
								   const FbfWindowIdentity *id,
								   FbfWindowOp *op);

/* ---- window_apply.c: one operation ---- */

/*
 * The locks a run of one call's operations keeps from one to the next
 * (window_apply.c): made by FbfWindowHoldCreate, passed to each
 * FbfWindowApply or FbfWindowContains of the call, let go of by
 * FbfWindowLetGo before anything else of the window is done, before
 * anything long without it, and before the call ends.
 */
typedef struct FbfWindowHold FbfWindowHold;

extern FbfWindowHold *FbfWindowHoldCreate(Relation index);
extern void FbfWindowLetGo(FbfWindowHold *hold);
extern FbfOpResult FbfWindowApply(Relation index,
								  const FbfWindowKeying *keying,
								  const FbfWindowOp *op, FbfReserve reserve,
								  FbfWindowHold *hold, FbfApplyInfo *info);
extern bool FbfWindowContains(Relation index, const FbfHash *hash,
							  FbfWindowHold *hold);

/* ---- window_split.c: growth in bits, at once ---- */

/* What FbfWindowGrow did. */
typedef enum FbfGrowth
{
	FBF_GROWTH_SPLIT,			/* split the partitions for the rate */
	FBF_GROWTH_LATER,			/* not now: a split or merge is under way,
								 * another backend began one, or this one
								 * tried this period */
	FBF_GROWTH_NONE				/* the rate calls for no more bits, or the
								 * window is at its cap */
} FbfGrowth;

extern FbfGrowth FbfWindowGrow(Relation index, const FbfAimdPolicy *policy);

/*
 * Where the window's own growth takes its policy from: an operation whose
 * pending chain is full of entries waiting for more bits grows the window
 * itself (FbfWindowApply), under the policy of whoever owns the AIMD
 * settings (the counters register theirs at load time).
 */
typedef void (*FbfPolicySource) (FbfAimdPolicy *policy);
extern void FbfWindowSetPolicySource(FbfPolicySource source);

/* ---- window_ring.c: refresh, resize ---- */
extern int	FbfWindowRefresh(Relation index, bool wait);
extern int	FbfWindowResize(Relation index, int nfilters);

/* ---- window_maintain.c: the maintenance pass ---- */
extern FbfAimdDecision FbfWindowMaintain(Relation index,
										 const FbfAimdPolicy *policy);
extern bool FbfWindowInFlight(Relation index);

/* ---- window_read.c: reading the whole window ---- */
extern void FbfWindowGetCapacity(Relation index, FbfWindowCapacity *cap);

/*
 * What fbf_counter_stats shows of a window (FbfWindowGetStats), filled by
 * the window core and, for what depends on it, by the window's format.
 */
typedef struct FbfWindowStats
{
	const char *filter;			/* the format's name: "bloom", "cuckoo" */
	int			nfilters;
	int			nlive;
	int64		period;			/* microseconds */
	int64		retention;		/* microseconds */
	int64		bits;			/* bits of the partition pages' filters */
	int			nhashes;		/* hash functions; if has_nhashes */
	bool		has_nhashes;
	uint32		nparts;
	uint64		distinct[FBF_MAX_FILTERS];	/* elements by live filter */
	double		fpp;			/* the estimated false-positive rate */
	double		target_fpp;
	TimestampTz future_born;	/* the future filter's birth, wall clock */
	int64		resizes;
	bool		capped;
	int64		pending;		/* entries on the pending chains */
	double		load;			/* live load of the slots; if has_load */
	bool		has_load;
	int			fp_bits;		/* fingerprint bits; if has_fp_bits */
	bool		has_fp_bits;
	/* exact streams (window_stream.c); all zero without them */
	uint32		stream_pages;
	int64		stream_capacity;	/* slots */
	int64		streams;		/* slots in use */
	int64		stream_evictions;	/* slots evicted within their horizon */
	int64		stream_expired; /* slots reused after it */
	TimestampTz streams_exact_from; /* wall clock from which a stream
									 * without a slot is proven new (the
									 * latest page since + horizon); 0: now */
} FbfWindowStats;

extern void FbfWindowGetStats(Relation index, FbfWindowStats *stats);
extern int64 FbfWindowRefreshDueIn(Relation index);

/*
 * Where a snapshot is built: the caller's memory (FbfWindowSnapshot), so
 * that the caller can wrap it as a value without copying it.  alloc
 * returns `size` zeroed bytes, MAXALIGNed; resize grows (or shrinks) a
 * block alloc returned, keeping its contents; free lets go of one.
 */
typedef struct FbfSnapshotMemory
{
	void	   *(*alloc) (Size size, void *arg);
	void	   *(*resize) (void *body, Size size, void *arg);
	void		(*free) (void *body, void *arg);
	void	   *arg;
} FbfSnapshotMemory;

extern void *FbfWindowSnapshot(Relation index, const FbfSnapshotMemory *mem,
							   FbfHashKey *key, bool *public_too,
							   uint64 *pending);

/* ---- window_load.c: loading a snapshot into a live window ---- */
typedef struct FbfLoadResult
{
	bool		adopted;		/* took the snapshot's shape and ring whole */
	int			filters;		/* snapshot filters loaded (the others had
								 * aged out) */
} FbfLoadResult;

extern FbfLoadResult FbfWindowLoad(Relation index,
								   const struct varlena *snapshot,
								   const FbfHashKey *key, bool public_too);

#endif							/* FBF_WINDOW_H */
