/*-------------------------------------------------------------------------
 *
 * counter.h
 *	  Idempotent counters: what the counters' files share, and what the
 *	  background worker calls.  Vocabulary in src/counter/README.md.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_COUNTER_H
#define FBF_COUNTER_H

#include "postgres.h"

#include "fmgr.h"
#include "storage/lockdefs.h"
#include "utils/acl.h"
#include "utils/relcache.h"

#include "compat.h"
#include "core/fbf_aimd.h"
#include "core/fbf_hash.h"
#include "window/window.h"

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
 * How Citus distributes a table (counter_citus.c, FbfCitusLookup): not at
 * all, by `key` (a shell whose operations are routed to its shards), or
 * otherwise (refused).
 */
typedef enum FbfCitusDistribution
{
	FBF_CITUS_LOCAL,
	FBF_CITUS_BY_KEY,
	FBF_CITUS_OTHER
} FbfCitusDistribution;

/* counter.c */
extern void FbfCounterInit(void);
extern void FbfCounterOpen(Oid relid, FbfCounterAccess access,
						   LOCKMODE lockmode, Relation *heap, Relation *index);
extern bool FbfCounterOpenRoutable(Oid relid, FbfCounterAccess access,
								   LOCKMODE lockmode, Relation *heap,
								   Relation *index);
extern void FbfCounterClose(Relation heap, Relation index);
extern void FbfCounterNoteOperation(void);
extern bytea *FbfOperationBytes(char tag, text *key, Datum client_id,
								int64 seq);
extern void FbfOperationIdentity(char tag, text *key, Datum client_id,
								 int64 seq, const FbfWindowKeying *keying,
								 FbfWindowOp *op);

/*
 * The operations of one call on one key, as FbfOpsPrepare (counter_batch.c)
 * makes them from the identities the caller gave.  Once the window is open,
 * FbfOpsHash hashes them under its key and puts them in the order the
 * window is asked: by hash, a repeat right after its first occurrence.
 * The increment path takes nothing else, so that every operation it
 * records is the hash of an identity on `key`.
 */
typedef struct FbfOps
{
	text	   *key;
	char		tag;			/* client ids' type: 'i' bigint, 't' text,
								 * 'u' uuid */
	int			n;
	Datum	   *client_ids;		/* as given: a routed call sends these */
	int64	   *seqs;
	int64	   *deltas;
	int		   *place;			/* each one's place in the caller's arrays */
	FbfWindowOp *hashed;		/* NULL, or as the window is asked
								 * (FbfOperationIdentity), by FbfOpsHash */
} FbfOps;

extern void FbfCounterApply(Oid relid, FbfOps *ops, bool *applied,
							int64 *value);
extern bool FbfIncrement(FunctionCallInfo fcinfo, char tag,
						 const char *fname, int64 *value);

/*
 * What a backend remembers of a counter table (counter_delta.c), kept until
 * an invalidation of the table, its indexes or a schema makes it stale.
 */
typedef struct FbfCounterRel
{
	Oid			relid;			/* hash key */
	bool		valid;			/* false: rebuild before use */
	Oid			window_index;	/* its valid fbf_filter index; invalid: not a
								 * counter or dedup table */
	int			kind;			/* the window's: FBF_WINDOW_COUNTER or _DEDUP */
	char	   *qualname;		/* schema-qualified, quoted name (SPI plans) */
	FbfCitusDistribution citus; /* a Citus table? (FbfCitusLookup) */
	/* the direct path (FbfCounterAddDirect) */
	bool		direct;			/* the table's shape allows it */
	Oid			pk_index;		/* primary key on (key, shard) */
	AttrNumber	key_attno;
	AttrNumber	shard_attno;
	AttrNumber	value_attno;
	bool		index_col_is_key[2];	/* per primary key column: key, or shard */
	Oid			collation[2];	/* per primary key column */
	FmgrInfo	eq[2];			/* per primary key column: texteq, int4eq */
} FbfCounterRel;

/* What FbfCounterAddDirect did. */
typedef enum FbfDirectResult
{
	FBF_DIRECT_APPLIED,			/* the delta is added */
	FBF_DIRECT_NO_ROW,			/* no (key, shard) row: insert it */
	FBF_DIRECT_UNSUPPORTED		/* nothing done: run the UPDATE */
} FbfDirectResult;

/* one operation of a batch: its identity and its place in the arrays */
typedef struct FbfBatchOp
{
	FbfWindowOp op;
	int			index;
} FbfBatchOp;

/* counter_batch.c */
extern int	FbfBatchOpCmp(const void *a, const void *b);
extern FbfOps *FbfOpsPrepare(char tag, text *key, int n,
							 const Datum *client_ids, const int64 *seqs,
							 const int64 *deltas);
extern void FbfOpsHash(FbfOps *ops, const FbfWindowKeying *keying);
extern FbfOps *FbfOpsFromArrays(FunctionCallInfo fcinfo, char tag, text *key,
								int a_clients, const char *fname);

/* counter_delta.c */
extern FbfCounterRel *FbfCounterRelGet(Relation heap);
extern FbfDirectResult FbfCounterAddDirect(Relation heap, text *key,
										   int32 shard, int64 delta);

/* counter_citus.c */
extern FbfCitusDistribution FbfCitusLookup(Relation heap, AttrNumber key_attno);
fbf_noreturn extern void FbfCitusRefuse(Relation heap,
										FbfCitusDistribution how);
extern void FbfCitusApply(Relation shell, const char *qualname,
						  const FbfOps *ops, bool *applied, int64 *value);
extern Oid	FbfCitusExtensionSchema(void);

/* counter_citus_transfer.c */
extern void FbfCitusTransferInit(void);

/* When a counter next needs its maintenance pass (FbfCounterMaintain). */
typedef struct FbfCounterSchedule
{
	bool		busy;			/* operations since the previous pass */
	int64		refresh_in;		/* microseconds until its next refresh */
} FbfCounterSchedule;

/* counter_maintain.c */
extern void FbfCounterMaintainInit(void);
extern void FbfCounterGrow(Relation index);
extern FbfAimdDecision FbfCounterMaintain(Relation heap, Relation index,
										  FbfCounterSchedule *schedule);

#endif							/* FBF_COUNTER_H */
