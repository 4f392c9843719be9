/*-------------------------------------------------------------------------
 *
 * counter.h
 *	  Idempotent counters and dedup tables: what the counters' files share,
 *	  and what the background worker and _PG_init call.  Vocabulary and the
 *	  layers in src/counter/README.md.
 *
 * Declarations by file, from the bottom layer up: the operations
 * (counter_op.c), opening a table and the route (counter_rel.c), deltas
 * (counter_delta.c), maintenance (counter_maintain.c), the apply engine
 * (counter_engine.c), then the front ends'.  A file calls only the
 * files above its own heading and itself; the layers below reach the
 * Citus route (src/citus, citus/citus.h) only through FbfCounterRoute and
 * FbfClaimRoute.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_COUNTER_H
#define FBF_COUNTER_H

#include "postgres.h"

#include "fmgr.h"
#include "storage/lockdefs.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/memutils.h"
#include "utils/relcache.h"

#include "compat.h"
#include "core/fbf_aimd.h"
#include "core/fbf_hash.h"
#include "window/window.h"

/* ----------------------------------------------------------------------
 * counter_op.c: operations' identities, prepared and hashed
 * ----------------------------------------------------------------------
 */

/*
 * The operations of one call on one table, as FbfOpsPrepare (counter
 * operations on `key`) or FbfOpsFromIds (claims, by their identity bytes)
 * makes them.  Once the window is open, FbfOpsHash hashes them under its
 * key and puts them in the order the window is asked: by hash, a repeat
 * right after its first occurrence.  The apply engine takes nothing else,
 * so that every operation it records is the hash of an identity on `key`
 * (or a claim's).
 */
typedef struct FbfOps
{
	text	   *key;			/* counter operations: their key */
	char		tag;			/* client ids' type: 'i' bigint, 't' text,
								 * 'u' uuid */
	int			n;
	Datum	   *client_ids;		/* as given: a routed call sends these */
	int64	   *seqs;			/* claims: NULL for plain ids; (client_id,
								 * seq) claims' seqs, their streams' numbers */
	int64	   *deltas;			/* NULL for claims: they have none */
	bytea	  **ids;			/* claims: identity bytes; else NULL */
	int		   *place;			/* each one's place in the caller's arrays */
	FbfWindowOp *hashed;		/* NULL, or as the window is asked
								 * (FbfWindowHashOperation), by FbfOpsHash */
} FbfOps;

/*
 * A delta identity (FbfDeltaHash) under the window's key, as FbfOpsDeltas
 * gives it: with the index of its operation in the call (FbfOps).
 */
typedef struct FbfDeltaId
{
	FbfHash		hash;
	int			op;
} FbfDeltaId;

/*
 * The most operations (or ids) one call takes, refused beyond it (54000)
 * from the arrays' dimensions, before anything is read or allocated per
 * element (FbfBatchLength).  Besides its arguments, a call holds per
 * operation: its hashes as the window is asked (FbfWindowOp, 72 bytes),
 * its place (4), its answer and the result's element (2); and an
 * operation's client id, seq and delta (24), or a claim's id as read (8),
 * its identity's pointer (8) and bytes (packed: 16 for a bigint id, 5 and
 * its length for a text id), and a (client_id, seq) claim's seq and its
 * copy (16).  While the call is put in order (FbfOpsHash): two sort keys
 * (48), then an int and a copy of one array at a time (76 at most, for
 * the hashes): the peak, some 180 bytes an operation besides the
 * arguments, so about 750 MB for a maximal batch, its largest allocations
 * (the hashes and their copy) 300 MB each.  A counter with track_mismatch
 * holds its operations' delta identities too (FbfOpsDeltas: 24, and 24
 * more while they are sorted) and a byte each for which were new, once the
 * copy is freed: the peak stays.  (A backend's peak RSS also counts the
 * shared buffers it touched: a batch of a million bigint client ids on
 * one key peaked at some 190 MB above its RSS once the arguments were
 * read, 260 MB with track_mismatch, of which 96 and 117 MB were shared.)
 */
#define FBF_OPS_MAX		4194304

extern bytea *FbfOperationBytes(char tag, text *key, Datum client_id,
								int64 seq);
extern Oid	FbfClientIdType(char tag);
extern bytea *FbfClaimBytes(char tag, Datum id);
extern FbfHash FbfDeltaHash(const FbfHashKey *key, const FbfHash *op,
							int64 delta);
extern FbfOps *FbfOpsPrepare(char tag, text *key, int n,
							 const Datum *client_ids, const int64 *seqs,
							 const int64 *deltas);
extern FbfOps *FbfOpsFromIds(int n, bytea **ids, const int64 *seqs);
extern int	FbfBatchLength(ArrayType *array, const char *fname,
						   const char *name);
extern int	FbfArrayElements(ArrayType *array, const char *fname,
							 const char *name, Datum **elems);
extern int	FbfArrayInt64s(ArrayType *array, const char *fname,
						   const char *name, int64 **values);
extern FbfOps *FbfOpsFromArrays(FunctionCallInfo fcinfo, char tag, text *key,
								int a_clients, const char *fname);
extern void FbfOpsHash(FbfOps *ops, const FbfWindowKeying *keying);
extern FbfDeltaId *FbfOpsDeltas(const FbfOps *ops,
								const FbfWindowKeying *keying);
extern ArrayType *FbfArrayBuild(const Datum *values, int n, Oid type);
extern Datum FbfArrayBuildInts(Oid type, const void *values, int n);
extern ArrayType *FbfAnswersArray(const bool *answers, int n);

/* ----------------------------------------------------------------------
 * counter_rel.c: opening a counter, the relation cache, the route
 * ----------------------------------------------------------------------
 */

/*
 * What a caller of FbfCounterOpen is about to do, for the privilege check
 * and the kind of table it accepts.
 */
typedef enum FbfCounterAccess
{
	FBF_COUNTER_READ,			/* a counter: SELECT on key, shard, value */
	FBF_COUNTER_INCREMENT,		/* a counter: those and UPDATE on value */
	FBF_WINDOW_READ,			/* either kind: SELECT on the table, or a
								 * counter's FBF_COUNTER_READ */
	FBF_DEDUP_CLAIM,			/* a dedup table: INSERT on it */
	FBF_COUNTER_OWNER			/* either kind: ownership of the table */
} FbfCounterAccess;

/*
 * How Citus distributes a table (the route's lookup, citus_lookup): not
 * at all, by `key` (a counter's; a dedup table's `anchor`: a shell whose
 * operations are routed to its shards), or otherwise (refused).
 */
typedef enum FbfCitusDistribution
{
	FBF_CITUS_LOCAL,
	FBF_CITUS_BY_KEY,
	FBF_CITUS_OTHER
} FbfCitusDistribution;

/*
 * The route to counters distributed by Citus, as src/citus (citus_route.c)
 * registers it at init (FbfCounterSetRoute): the counter files call it
 * through these pointers, never by name.  Without a route every table is
 * local.
 */
typedef struct FbfCounterRoute
{
	/*
	 * how Citus distributes `heap`, whose routing column (a counter's `key`,
	 * a dedup table's `anchor`) is key_attno
	 */
	FbfCitusDistribution (*lookup) (Relation heap, AttrNumber key_attno);
	/* error: the own window of the Citus table `heap` would be used */
	void		(*refuse) (Relation heap, FbfCitusDistribution how);
	/* apply `ops` on the node of their key's shard (FbfCounterApply's args) */
	void		(*apply) (Relation shell, const char *qualname,
						  const FbfOps *ops, bool *applied, int64 *value);

	/*
	 * on the node of the shard: apply `ops` of the shell `shell` on the shard
	 * of their key, placed here (the front ends' placement twins; arguments
	 * and results as FbfCounterApply's)
	 */
	void		(*apply_on_placement) (Oid shell, FbfOps *ops, bool *applied,
									   int64 *value);
} FbfCounterRoute;

/*
 * What a backend remembers of a counter table (the relation cache), kept
 * until an invalidation of the table, its indexes or a schema makes it
 * stale.
 */
typedef struct FbfCounterRel
{
	Oid			relid;			/* hash key */
	bool		valid;			/* false: rebuild before use */
	Oid			window_index;	/* its valid fbf_filter index; invalid: not a
								 * counter or dedup table */
	int			kind;			/* the window's: FBF_WINDOW_COUNTER or _DEDUP */
	char	   *qualname;		/* schema-qualified, quoted name (SPI plans) */
	FbfCitusDistribution citus; /* a Citus table? (the route's lookup) */
	/* the direct path (counter_delta.c) */
	bool		direct;			/* the table's shape allows it */
	bool		heap_am;		/* the heap's rows: places may be kept */
	Oid			pk_index;		/* primary key on (key, shard) */
	AttrNumber	key_attno;
	AttrNumber	shard_attno;
	AttrNumber	value_attno;
	bool		index_col_is_key[2];	/* per primary key column: key, or shard */
	Oid			collation[2];	/* per primary key column */
	FmgrInfo	eq[2];			/* per primary key column: texteq, int4eq */
} FbfCounterRel;

extern void FbfCounterSetRoute(const FbfCounterRoute *route);
extern const FbfCounterRoute *FbfCounterGetRoute(void);
extern FbfCounterRel *FbfCounterRelGet(Relation heap);
extern void FbfCounterOpen(Oid relid, FbfCounterAccess access,
						   LOCKMODE lockmode, Relation *heap, Relation *index);
extern bool FbfCounterOpenRoutable(Oid relid, FbfCounterAccess access,
								   LOCKMODE lockmode, Relation *heap,
								   Relation *index);
extern void FbfCounterClose(Relation heap, Relation index);

/* ----------------------------------------------------------------------
 * counter_delta.c: adding a delta to a shard row, reading a key's sum
 * ----------------------------------------------------------------------
 */
extern void FbfCounterAddDelta(Relation heap, text *key, int64 delta,
							   int shards, bool rls);
extern int64 FbfCounterSum(Relation heap, text *key, bool read_only);

/* ----------------------------------------------------------------------
 * counter_maintain.c: maintenance passes, growing, the AIMD settings
 * ----------------------------------------------------------------------
 */

/* When a counter next needs its maintenance pass (FbfCounterMaintain). */
typedef struct FbfCounterSchedule
{
	bool		busy;			/* operations since the previous pass */
	bool		in_flight;		/* operations of open transactions on its
								 * chains, which a later pass drains */
	int64		refresh_in;		/* microseconds until its next refresh */
} FbfCounterSchedule;

extern void FbfCounterMaintainInit(void);
extern void FbfCounterGrow(Relation index);
extern FbfAimdDecision FbfCounterMaintain(Relation heap, Relation index,
										  FbfCounterSchedule *schedule);

/* ----------------------------------------------------------------------
 * counter_engine.c: the apply engine
 * ----------------------------------------------------------------------
 */

/*
 * What the engine calls, once the window has recorded the operations, to
 * add the applied ones' deltas (`sum`, checked to fit in bigint) to the
 * table; `arg` is the caller's.  Claims have none (NULL).
 */
typedef void (*FbfApplyDelta) (Relation heap, Relation index,
							   const FbfOps *ops, int64 sum, void *arg);

extern void FbfEngineApply(Relation heap, Relation index, FbfOps *ops,
						   FbfApplyDelta add_delta, void *arg, bool *applied);
extern void FbfCounterApply(Oid relid, FbfOps *ops, bool *applied,
							int64 *value);

/* ----------------------------------------------------------------------
 * The front ends: counter.c (FbfCounterInit), counter_batch.c, dedup.c,
 * counter_stats.c, counter_load.c.  The Citus route, a front end too, is
 * src/citus (citus/citus.h).
 * ----------------------------------------------------------------------
 */

/* counter.c */
extern void FbfCounterInit(void);

/* dedup.c */

/*
 * The route to dedup tables distributed by Citus, as src/citus
 * (citus_dedup.c) registers it at init (FbfDedupSetRoute): claim the n
 * ids of type `typid` (with `seqs`: the client ids of (client_id, seq)
 * claims), whose identity bytes are identities[i], on the shards of the
 * shell `shell`; claimed[i] gets the answer for ids[i].  FbfClaim's
 * arguments.
 */
typedef void (*FbfClaimRoute) (Relation shell, Oid typid, int n,
							   const Datum *ids, const int64 *seqs,
							   bytea *const *identities, bool *claimed);

extern bool FbfClaimable(Oid typid, bool op);
extern bytea *FbfClaimIdentity(Oid typid, Datum id, const int64 *seq);
extern void FbfDedupSetRoute(FbfClaimRoute route);
extern void FbfClaim(Oid relid, Oid typid, int n, const Datum *ids,
					 const int64 *seqs, bool *claimed);

#endif							/* FBF_COUNTER_H */
