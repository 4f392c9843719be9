/*-------------------------------------------------------------------------
 *
 * counter.c
 *	  Idempotent counters' SQL functions for single operations:
 *	  idempotent_increment, idempotent_increment_outcome, fbf_operation,
 *	  fbf_counter_value and fbf_snapshot; and the settings that
 *	  fbf_create_counter_table reads.
 *
 * An operation is identified by (counter table, key, client_id, seq)
 * (FbfOperationBytes, counter_op.c).  idempotent_increment checks its
 * arguments and hands the operation, as a call of one, to the increment
 * path (FbfCounterApply, counter_engine.c), which batches
 * (counter_batch.c) and the routed half of a call on a distributed counter
 * (src/citus/citus_placement.c) take too: the window is asked whether the
 * operation is new, which also records it as in flight for the current
 * (sub)transaction, and only then is the delta added, as the calling user,
 * as an UPDATE would add it (counter_delta.c).  The increment goes to one
 * of `shards` rows of its key, chosen by backend, so concurrent clients of
 * a hot key do not queue on one row lock; reads sum the shards.
 *
 * Locks: those of FbfCounterOpen (counter_rel.c): RowExclusiveLock on the
 * table and its window index to increment, AccessShareLock to read; the
 * window's buffer locks in the order of src/window/README.md ("Lock
 * definitions").  No backend-local state.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/htup_details.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/rls.h"

#include "counter/counter.h"
#include "counter/counter_args.h"
#include "type/fbf_value.h"
#include "window/window.h"

PG_FUNCTION_INFO_V1(fbf_counter_value);
PG_FUNCTION_INFO_V1(fbf_snapshot);

/* defaults of fbf_create_counter_table, which reads them with current_setting */
static int	fbf_default_retention_ms = 5 * 60 * 1000;
static double fbf_default_target_fpp = 0.001;

/* The counters' settings; from _PG_init. */
void
FbfCounterInit(void)
{
	DefineCustomIntVariable("fbf.default_retention",
							"Retention of new counter tables when none is given.",
							"Set it above the clients' retry timeout plus slack.",
							&fbf_default_retention_ms, 5 * 60 * 1000, 1000, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomRealVariable("fbf.default_target_fpp",
							 "Target false-positive rate of new counter tables when none is given.",
							 NULL, &fbf_default_target_fpp, 0.001, 1e-9, 0.5,
							 PGC_USERSET, 0, NULL, NULL, NULL);
}

/* ----------------------------------------------------------------------
 * idempotent_increment
 * ----------------------------------------------------------------------
 */

/*
 * One operation from the arguments of `fname` (idempotent_increment or
 * idempotent_increment_outcome: counter regclass, [key text,] client_id,
 * seq bigint, delta bigint), whose client id is of type `tag`: true if
 * applied, false if dismissed as a duplicate.  *value as FbfCounterApply
 * sets it, if not NULL.  `placed`: the call is the placement twin of
 * `fname` (fbf_increment_on_placement and fbf_increment_outcome_on_placement,
 * always keyed), which the fast path of a counter distributed by Citus
 * runs on the node of the key's shard (src/citus/citus_plan.c): the
 * counter is the shell, and the operation goes to the shard
 * (FbfCitusApplyOnPlacement, through the route's apply_on_placement).
 */
static bool
increment_one(FunctionCallInfo fcinfo, char tag, const char *fname,
			  bool placed, int64 *value)
{
	bool		keyed = PG_NARGS() == 5;
	int			a_client = keyed ? 2 : 1;
	text	   *key;
	Datum		client_id;
	int64		seq;
	int64		delta;
	FbfOps	   *ops;
	bool		applied;

	FbfRequireArg(fcinfo, 0, fname, "counter");
	if (keyed)
		FbfRequireArg(fcinfo, 1, fname, "key");
	FbfRequireArg(fcinfo, a_client, fname, "client_id");
	FbfRequireArg(fcinfo, a_client + 1, fname, "seq");
	FbfRequireArg(fcinfo, a_client + 2, fname, "delta");

	/* their messages name the function: built only when one is raised */
	if (XactReadOnly || RecoveryInProgress())
	{
		PreventCommandIfReadOnly(psprintf("%s()", fname));
		PreventCommandDuringRecovery(psprintf("%s()", fname));
	}

	key = keyed ? PG_GETARG_TEXT_PP(1) : cstring_to_text("");
	client_id = PG_GETARG_DATUM(a_client);
	seq = PG_GETARG_INT64(a_client + 1);
	delta = PG_GETARG_INT64(a_client + 2);

	ops = FbfOpsPrepare(tag, key, 1, &client_id, &seq, &delta);
	if (placed)
		FbfCounterGetRoute()->apply_on_placement(PG_GETARG_OID(0), ops,
												 &applied, value);
	else
		FbfCounterApply(PG_GETARG_OID(0), ops, &applied, value);
	return applied;
}

/*
 * idempotent_increment(counter regclass, [key text,] client_id, seq bigint,
 * delta bigint): true if applied, false if dismissed as a duplicate.
 */
static Datum
increment(FunctionCallInfo fcinfo, char tag, bool placed)
{
	PG_RETURN_BOOL(increment_one(fcinfo, tag, "idempotent_increment", placed,
								 NULL));
}

FBF_CLIENT_ID_FUNCTIONS(fbf_increment, increment(fcinfo, tag, false));

/* ----------------------------------------------------------------------
 * idempotent_increment_outcome
 * ----------------------------------------------------------------------
 */

/*
 * idempotent_increment_outcome(counter regclass, [key text,] client_id,
 * seq bigint, delta bigint, OUT applied boolean, OUT value bigint): what
 * idempotent_increment returns, and the key's value after the call as the
 * transaction sees it (with this delta if applied), so that a client's
 * retry learns the value in the same round trip.
 */
static Datum
increment_outcome(FunctionCallInfo fcinfo, char tag, bool placed)
{
	TupleDesc	tupdesc;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	int64		value;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "fbf: return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	values[0] = BoolGetDatum(increment_one(fcinfo, tag,
										   "idempotent_increment_outcome",
										   placed, &value));
	values[1] = Int64GetDatum(value);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

FBF_CLIENT_ID_FUNCTIONS(fbf_increment_outcome,
						increment_outcome(fcinfo, tag, false));

/* ----------------------------------------------------------------------
 * Their placement twins (the fast path of Citus, src/citus/citus_plan.c)
 * ----------------------------------------------------------------------
 */

/*
 * fbf_increment_on_placement(counter regclass, key text, client_id, seq
 * bigint, delta bigint) and fbf_increment_outcome_on_placement (the same,
 * OUT applied boolean, OUT value bigint): idempotent_increment and
 * idempotent_increment_outcome on the shard of `key` of the distributed
 * counter `counter`, placed on this node, with the same checks and
 * messages; the statement the fast path hands Citus calls them there.
 * Anyone may call them: they grant nothing that idempotent_increment on
 * the shard table does not (src/citus/citus_placement.c says why), and,
 * as every placement function, they lock the shard's metadata against
 * shard transfers (FbfCitusPlacementPrologue).
 */
FBF_CLIENT_ID_FUNCTIONS(fbf_increment_on_placement,
						increment(fcinfo, tag, true));

FBF_CLIENT_ID_FUNCTIONS(fbf_increment_outcome_on_placement,
						increment_outcome(fcinfo, tag, true));

/* ----------------------------------------------------------------------
 * fbf_operation
 * ----------------------------------------------------------------------
 */

/*
 * fbf_operation([key,] client_id, seq): the bytes that identify an
 * operation, as the window hashes them, so that fbf_contains(fbf_snapshot(t),
 * fbf_operation(k, c, s)) asks whether t's filter remembers the operation.
 * Without a key: the default key ''.
 */
static Datum
operation(FunctionCallInfo fcinfo, char tag)
{
	bool		keyed = PG_NARGS() == 3;

	PG_RETURN_BYTEA_P(FbfOperationBytes(tag,
									  keyed ? PG_GETARG_TEXT_PP(0) : NULL,
									  PG_GETARG_DATUM(keyed ? 1 : 0),
									  PG_GETARG_INT64(keyed ? 2 : 1)));
}

FBF_CLIENT_ID_FUNCTIONS(fbf_operation, operation(fcinfo, tag));

/* ----------------------------------------------------------------------
 * Reading and inspecting
 * ----------------------------------------------------------------------
 */

/* fbf_counter_value(counter regclass, key text): the sum of the key's shards */
Datum
fbf_counter_value(PG_FUNCTION_ARGS)
{
	Relation	heap;
	Relation	index;
	int64		value;

	/* on a Citus shell, the SELECT sum(...) runs on the key's shard */
	(void) FbfCounterOpenRoutable(PG_GETARG_OID(0), FBF_COUNTER_READ,
								  AccessShareLock, &heap, &index);
	value = FbfCounterSum(heap, PG_GETARG_TEXT_PP(1), true);
	FbfCounterClose(heap, index);
	PG_RETURN_INT64(value);
}

/*
 * fbf_snapshot's memory for the window's snapshot (FbfSnapshotMemory): a
 * palloc'd `fbf` value whose contents, after FBF_VALUE_OFFSET, are the
 * snapshot's core structure, so that the value is made without a copy.
 */
static void *
snapshot_alloc(Size size, void *arg)
{
	char	   *v = palloc_extended(FBF_VALUE_OFFSET + size,
									MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);

	SET_VARSIZE(v, FBF_VALUE_OFFSET + size);
	return v + FBF_VALUE_OFFSET;
}

static void *
snapshot_resize(void *body, Size size, void *arg)
{
	char	   *v = repalloc_huge((char *) body - FBF_VALUE_OFFSET,
								  FBF_VALUE_OFFSET + size);

	SET_VARSIZE(v, FBF_VALUE_OFFSET + size);
	return v + FBF_VALUE_OFFSET;
}

static void
snapshot_free(void *body, void *arg)
{
	pfree((char *) body - FBF_VALUE_OFFSET);
}

/* fbf_snapshot(counter regclass): the live filter as an fbf value */
Datum
fbf_snapshot(PG_FUNCTION_ARGS)
{
	static const FbfSnapshotMemory mem = {snapshot_alloc, snapshot_resize,
	snapshot_free, NULL};
	Relation	heap;
	Relation	index;
	uint64		pending;
	void	   *body;
	FbfHashKey	key;
	bool		public_too;

	FbfCounterOpen(PG_GETARG_OID(0), FBF_WINDOW_READ, AccessShareLock, &heap, &index);

	/* the whole window would tell about rows the policies hide */
	if (check_enable_rls(RelationGetRelid(heap), InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("fbf_snapshot of \"%s\" is not allowed under row security",
						RelationGetRelationName(heap)),
				 errdetail("A snapshot shows the operations of every key."),
				 errhint("Take snapshots as the table's owner or as a role with BYPASSRLS.")));
	body = FbfWindowSnapshot(index, &mem, &key, &public_too, &pending);
	FbfCounterClose(heap, index);
	/* with the key the window had, which a load needs (type/fbf_value.h) */
	PG_RETURN_POINTER(FbfValueWithKey((struct varlena *) ((char *) body - FBF_VALUE_OFFSET),
									  &key, public_too));
}
