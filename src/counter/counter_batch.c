/*-------------------------------------------------------------------------
 *
 * counter_batch.c
 *	  Batches of idempotent_increment: arrays of client ids, seqs and deltas
 *	  on one key, a boolean per operation.
 *
 * A batch goes through the one increment path (FbfCounterApply,
 * counter_engine.c), so that it means exactly what single
 * idempotent_increment calls mean: the same privileges, row security,
 * window, transactions and waits.  It is checked whole before anything is
 * done (FbfOpsFromArrays: arrays of one dimension and equal lengths, no
 * NULLs, at most FBF_OPS_MAX operations, refused before anything is read),
 * its operations hashed and asked in the canonical order
 * (counter_op.c), so that two transactions whose batches share operations
 * never deadlock; operations repeated within the batch are one operation
 * (the first occurrence in the arrays is the one asked, the others are
 * dismissed and, with track_mismatch, counted mismatched if their delta is
 * not the one the window holds for it).  The counter is opened, and its
 * privileges checked, once per call, and the deltas of the applied
 * operations are added to the shard row in one update.  The answers come
 * back in the arrays' order.
 *
 * Locks: those of FbfCounterApply (RowExclusiveLock on the table and its
 * window index, privileges checked before); the placement twins first
 * those of the placement prologue (FbfCitusPlacementPrologue,
 * src/citus/citus_placement.c: the shard's metadata lock, against shard
 * transfers).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "counter/counter.h"
#include "counter/counter_args.h"


/*
 * idempotent_increment(counter regclass, [key text,] client_ids[],
 * seqs bigint[], deltas bigint[]) RETURNS boolean[]: operation i is
 * (client_ids[i], seqs[i]) adding deltas[i] to key; element i of the
 * result says whether it applied.  `tag` is the client ids' type.
 * `placed`: the call is its placement twin, fbf_increment_on_placement
 * (counter regclass, key text, client_ids[], seqs bigint[], deltas
 * bigint[]), which the fast path of a counter distributed by Citus runs on
 * the node of the key's shard (src/citus/citus_plan.c): the counter is the
 * shell, and the batch goes to the shard (FbfCitusApplyOnPlacement,
 * through the route's apply_on_placement).
 */
static Datum
increment_batch(FunctionCallInfo fcinfo, char tag, bool placed)
{
	bool		keyed = PG_NARGS() == 5;
	text	   *key;
	FbfOps	   *ops;
	bool	   *applied;

	FbfRequireArg(fcinfo, 0, "idempotent_increment", "counter");
	if (keyed)
		FbfRequireArg(fcinfo, 1, "idempotent_increment", "key");

	PreventCommandIfReadOnly("idempotent_increment()");
	PreventCommandDuringRecovery("idempotent_increment()");

	key = keyed ? PG_GETARG_TEXT_PP(1) : cstring_to_text("");
	ops = FbfOpsFromArrays(fcinfo, tag, key, keyed ? 2 : 1,
						   "idempotent_increment");

	/* answers in the arrays' order */
	applied = palloc(Max(ops->n, 1) * sizeof(bool));
	if (placed)
		FbfCounterGetRoute()->apply_on_placement(PG_GETARG_OID(0), ops,
												 applied, NULL);
	else
		FbfCounterApply(PG_GETARG_OID(0), ops, applied, NULL);

	PG_RETURN_ARRAYTYPE_P(FbfAnswersArray(applied, ops->n));
}

FBF_CLIENT_ID_FUNCTIONS(fbf_increment_batch,
						increment_batch(fcinfo, tag, false));

FBF_CLIENT_ID_FUNCTIONS(fbf_increment_batch_on_placement,
						increment_batch(fcinfo, tag, true));
