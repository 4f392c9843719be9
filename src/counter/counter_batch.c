/*-------------------------------------------------------------------------
 *
 * counter_batch.c
 *	  Answers beyond one boolean per round trip: idempotent_increment_outcome
 *	  (applied, and the key's value after the call) and batches of
 *	  idempotent_increment (arrays of client ids, seqs and deltas on one
 *	  key, a boolean per operation).
 *
 * Both go through the one increment path of counter.c (FbfCounterApply),
 * so that they mean exactly what single idempotent_increment calls mean:
 * the same privileges, row security, window, transactions and waits.  The
 * operations of every call, single calls and the routed half of a call on
 * a distributed counter (fbf_apply_on_placement, counter_citus.c) too,
 * are gathered (FbfOpsPrepare), and hashed and ordered once the window is
 * open, under its secret key (FbfOpsHash).
 *
 * A batch is one key's operations.  It is checked whole before anything
 * is done (arrays of one dimension and equal lengths, no NULLs), its
 * operations hashed, then sorted by hash: the window is asked in that
 * order, whatever the order of the arrays, so that two transactions whose
 * batches share operations wait for each other in one direction only (the
 * one to reach a shared operation first applies it, the other waits for
 * it to end) and never deadlock.  Operations repeated within the batch
 * are one operation: the first occurrence in the arrays is the one asked,
 * the others follow it in that order and are dismissed (and, with
 * track_mismatch, counted mismatched if their delta is not the one the
 * window holds for it).  The counter is opened, and its privileges
 * checked, once per call, and the deltas of the applied operations are
 * added to the shard row in one update (FbfCounterApply).  The answers
 * come back in the arrays' order.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/uuid.h"

#include "counter/counter.h"

PG_FUNCTION_INFO_V1(fbf_increment_outcome_int8);
PG_FUNCTION_INFO_V1(fbf_increment_outcome_text);
PG_FUNCTION_INFO_V1(fbf_increment_outcome_uuid);
PG_FUNCTION_INFO_V1(fbf_increment_batch_int8);
PG_FUNCTION_INFO_V1(fbf_increment_batch_text);
PG_FUNCTION_INFO_V1(fbf_increment_batch_uuid);

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
increment_outcome(FunctionCallInfo fcinfo, char tag)
{
	TupleDesc	tupdesc;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	int64		value;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "fbf: return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	values[0] = BoolGetDatum(FbfIncrement(fcinfo, tag,
										  "idempotent_increment_outcome",
										  &value));
	values[1] = Int64GetDatum(value);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

Datum
fbf_increment_outcome_int8(PG_FUNCTION_ARGS)
{
	return increment_outcome(fcinfo, 'i');
}

Datum
fbf_increment_outcome_text(PG_FUNCTION_ARGS)
{
	return increment_outcome(fcinfo, 't');
}

Datum
fbf_increment_outcome_uuid(PG_FUNCTION_ARGS)
{
	return increment_outcome(fcinfo, 'u');
}

/* ----------------------------------------------------------------------
 * Batches of idempotent_increment
 * ----------------------------------------------------------------------
 */

/*
 * The canonical order of a batch, for qsort on FbfBatchOp: by hash, then
 * by place (first occurrence first).  Batches of claims (dedup.c) use it
 * too.
 */
int
FbfBatchOpCmp(const void *a, const void *b)
{
	const FbfBatchOp *x = (const FbfBatchOp *) a;
	const FbfBatchOp *y = (const FbfBatchOp *) b;

	if (x->op.hash.h1 != y->op.hash.h1)
		return x->op.hash.h1 < y->op.hash.h1 ? -1 : 1;
	if (x->op.hash.h2 != y->op.hash.h2)
		return x->op.hash.h2 < y->op.hash.h2 ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index ? 1 : 0;
}

/*
 * The operations of one call on `key`: operation k is (client_ids[k],
 * seqs[k]) adding deltas[k], its client id of type `tag`, in the caller's
 * order until FbfOpsHash orders them.
 */
FbfOps *
FbfOpsPrepare(char tag, text *key, int n, const Datum *client_ids,
			  const int64 *seqs, const int64 *deltas)
{
	FbfOps	   *ops;
	int			i;

	if ((Size) n > MaxAllocSize / Max(sizeof(FbfBatchOp), sizeof(FbfWindowOp)))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many operations in one call: %d", n)));

	ops = palloc(sizeof(FbfOps));
	ops->key = key;
	ops->tag = tag;
	ops->n = n;
	ops->client_ids = palloc(Max(n, 1) * sizeof(Datum));
	ops->seqs = palloc(Max(n, 1) * sizeof(int64));
	ops->deltas = palloc(Max(n, 1) * sizeof(int64));
	ops->place = palloc(Max(n, 1) * sizeof(int));
	ops->hashed = NULL;
	for (i = 0; i < n; i++)
	{
		ops->client_ids[i] = client_ids[i];
		ops->seqs[i] = seqs[i];
		ops->deltas[i] = deltas[i];
		ops->place[i] = i;
	}
	return ops;
}

/*
 * Hash the operations as the window whose keying is `keying` is asked
 * about them (FbfOperationIdentity), and put them in the canonical order
 * (FbfBatchOpCmp), their arrays with them; `place` keeps where each came
 * from, for the answers.  Called again if the window's key changed before
 * anything was recorded (FBF_OP_REKEYED).
 */
void
FbfOpsHash(FbfOps *ops, const FbfWindowKeying *keying)
{
	int			n = ops->n;
	FbfBatchOp *order = palloc(Max(n, 1) * sizeof(FbfBatchOp));
	Datum	   *client_ids = palloc(Max(n, 1) * sizeof(Datum));
	int64	   *seqs = palloc(Max(n, 1) * sizeof(int64));
	int64	   *deltas = palloc(Max(n, 1) * sizeof(int64));
	int		   *place = palloc(Max(n, 1) * sizeof(int));
	int			i;

	for (i = 0; i < n; i++)
	{
		FbfOperationIdentity(ops->tag, ops->key, ops->client_ids[i],
							 ops->seqs[i], keying, &order[i].op);
		order[i].index = i;
		CHECK_FOR_INTERRUPTS();
	}
	qsort(order, n, sizeof(FbfBatchOp), FbfBatchOpCmp);

	if (ops->hashed == NULL)
		ops->hashed = palloc(Max(n, 1) * sizeof(FbfWindowOp));
	for (i = 0; i < n; i++)
	{
		int			k = order[i].index;

		ops->hashed[i] = order[i].op;
		client_ids[i] = ops->client_ids[k];
		seqs[i] = ops->seqs[k];
		deltas[i] = ops->deltas[k];
		place[i] = ops->place[k];
	}
	pfree(ops->client_ids);
	pfree(ops->seqs);
	pfree(ops->deltas);
	pfree(ops->place);
	ops->client_ids = client_ids;
	ops->seqs = seqs;
	ops->deltas = deltas;
	ops->place = place;
	pfree(order);
}

static void
require_arg(FunctionCallInfo fcinfo, int argno, const char *fname,
			const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s of %s must not be null", name, fname)));
}

/*
 * The elements of the array argument `argno` (`name` of `fname`), of type
 * `elemtype`: one dimension (or none, empty), no NULLs.  Returns their
 * number.
 */
static int
batch_elements(FunctionCallInfo fcinfo, int argno, const char *fname,
			   const char *name, Oid elemtype, Datum **elems)
{
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(argno);
	bool	   *nulls;
	int			n;
	int			i;
	int16		elmlen;
	bool		elmbyval;
	char		elmalign;

	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s of %s must have one dimension", name, fname),
				 errdetail("It has %d.", ARR_NDIM(array))));
	if (ARR_ELEMTYPE(array) != elemtype)
		elog(ERROR, "fbf: %s has element type %u, not %u", name,
			 ARR_ELEMTYPE(array), elemtype);
	get_typlenbyvalalign(elemtype, &elmlen, &elmbyval, &elmalign);
	deconstruct_array(array, elemtype, elmlen, elmbyval, elmalign,
					  elems, &nulls, &n);
	for (i = 0; i < n; i++)
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s of %s must not contain nulls", name, fname),
					 errdetail("Element %d is null.", i + 1)));
	return n;
}

/*
 * The operations of a call of `fname` on `key` given as the array
 * arguments a_clients (client ids, of type `tag`), a_clients + 1 (seqs)
 * and a_clients + 2 (deltas): checked whole (22004 for NULLs, 2202E for
 * shapes) before anything is done, then prepared (FbfOpsPrepare).
 */
FbfOps *
FbfOpsFromArrays(FunctionCallInfo fcinfo, char tag, text *key, int a_clients,
				 const char *fname)
{
	Oid			client_type = tag == 'i' ? INT8OID : tag == 't' ? TEXTOID : UUIDOID;
	Datum	   *clients;
	Datum	   *seq_elems;
	Datum	   *delta_elems;
	int64	   *seqs;
	int64	   *deltas;
	int			n;
	int			i;

	require_arg(fcinfo, a_clients, fname, "client_ids");
	require_arg(fcinfo, a_clients + 1, fname, "seqs");
	require_arg(fcinfo, a_clients + 2, fname, "deltas");
	n = batch_elements(fcinfo, a_clients, fname, "client_ids", client_type,
					   &clients);
	if (batch_elements(fcinfo, a_clients + 1, fname, "seqs", INT8OID,
					   &seq_elems) != n ||
		batch_elements(fcinfo, a_clients + 2, fname, "deltas", INT8OID,
					   &delta_elems) != n)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("client_ids, seqs and deltas of %s must have the same length",
						fname)));
	seqs = palloc(Max(n, 1) * sizeof(int64));
	deltas = palloc(Max(n, 1) * sizeof(int64));
	for (i = 0; i < n; i++)
	{
		seqs[i] = DatumGetInt64(seq_elems[i]);
		deltas[i] = DatumGetInt64(delta_elems[i]);
	}
	return FbfOpsPrepare(tag, key, n, clients, seqs, deltas);
}

/*
 * idempotent_increment(counter regclass, [key text,] client_ids[],
 * seqs bigint[], deltas bigint[]) RETURNS boolean[]: operation i is
 * (client_ids[i], seqs[i]) adding deltas[i] to key; element i of the
 * result says whether it applied.  `tag` is the client ids' type.
 */
static Datum
increment_batch(FunctionCallInfo fcinfo, char tag)
{
	bool		keyed = PG_NARGS() == 5;
	text	   *key;
	FbfOps	   *ops;
	bool	   *applied;
	Datum	   *answers;
	int			i;

	require_arg(fcinfo, 0, "idempotent_increment", "counter");
	if (keyed)
		require_arg(fcinfo, 1, "idempotent_increment", "key");

	PreventCommandIfReadOnly("idempotent_increment()");
	PreventCommandDuringRecovery("idempotent_increment()");

	key = keyed ? PG_GETARG_TEXT_PP(1) : cstring_to_text("");
	ops = FbfOpsFromArrays(fcinfo, tag, key, keyed ? 2 : 1,
						   "idempotent_increment");

	/* answers in the arrays' order */
	applied = palloc(Max(ops->n, 1) * sizeof(bool));
	FbfCounterApply(PG_GETARG_OID(0), ops, applied, NULL);

	if (ops->n == 0)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(BOOLOID));
	answers = palloc(ops->n * sizeof(Datum));
	for (i = 0; i < ops->n; i++)
		answers[i] = BoolGetDatum(applied[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(answers, ops->n, BOOLOID, 1, true,
										  TYPALIGN_CHAR));
}

Datum
fbf_increment_batch_int8(PG_FUNCTION_ARGS)
{
	return increment_batch(fcinfo, 'i');
}

Datum
fbf_increment_batch_text(PG_FUNCTION_ARGS)
{
	return increment_batch(fcinfo, 't');
}

Datum
fbf_increment_batch_uuid(PG_FUNCTION_ARGS)
{
	return increment_batch(fcinfo, 'u');
}
