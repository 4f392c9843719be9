/*-------------------------------------------------------------------------
 *
 * dedup.c
 *	  Dedup tables: fbf_claim, its batch form, and fbf_claim_id; the claim
 *	  path (FbfClaim) that the Citus route's placement half shares.
 *
 * A dedup table (fbf_create_dedup, sql/fbf.sql) is a window without a
 * counter: the "process this message once" of an inbox.  fbf_claim(t, id)
 * asks t's window whether the id is new (FbfWindowApply), which records it
 * as in flight for the current (sub)transaction; true means the caller
 * holds the claim.  The semantics are exactly an increment's without the
 * delta: a rolled-back claim is forgotten, a concurrent claim of the same
 * id waits for the first transaction and then returns false (or true, if
 * that one rolled back), and a claim is kept through crashes, standbys and
 * the retention.  The table itself holds no rows; INSERT on it is the
 * privilege to claim, SELECT to read its window (fbf_snapshot).
 *
 * Row security: policies judge rows, and a claim writes none (the table
 * can hold no rows; its CHECK (false) refuses any).  No row could stand
 * for a claim: an id is not a column, and an INSERT policy's WITH CHECK
 * cannot see it.  So a claim is refused where row security applies to the
 * caller (check_enable_rls), rather than allowed past policies that were
 * meant to stop it; the owner (without FORCE ROW LEVEL SECURITY) and roles
 * with BYPASSRLS claim as before.
 *
 * An id's identity bytes are a type tag and the id's bytes, so that ids
 * of different types are different claims (FbfClaimBytes, counter_op.c,
 * with the tags claim_tag gives); a (client_id, seq) claim's are a counter
 * operation's on the default key (FbfOperationBytes; fbf_claim_id(client_id,
 * seq) is fbf_operation's C function), and like an operation it is
 * numbered in its client's stream (its seq goes with it to the engine), so
 * a client that claims in order is answered exactly (docs/design.md,
 * "Exact streams"); plain ids have no stream.
 *
 * Claims go through the apply engine of the counters (FbfEngineApply,
 * counter_engine.c), without a delta: a batch claims its ids in the order
 * of their hashes, so that two batches sharing ids wait for each other in
 * one order and cannot deadlock, an id repeated within it is claimed by
 * its first occurrence only, and the answers come back in the ids' order.
 *
 * A dedup table distributed by Citus by its anchor (fbf_distribute_dedup)
 * is a shell: FbfClaim hands its claims to the route
 * src/citus/citus_dedup.c registers at init (FbfDedupSetRoute), which
 * claims them on the shards (that file's header); this file never calls
 * it by name.
 *
 * Locks: RowExclusiveLock on the dedup table and its window index
 * (FbfCounterOpenRoutable, privileges checked before); the window's buffer
 * locks in the order of src/window/README.md ("Lock definitions").
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"

#include "counter/counter.h"
#include "counter/counter_args.h"

PG_FUNCTION_INFO_V1(fbf_claim_op);
PG_FUNCTION_INFO_V1(fbf_claim_array);
PG_FUNCTION_INFO_V1(fbf_claim_op_array);

/* ----------------------------------------------------------------------
 * Identities
 * ----------------------------------------------------------------------
 */

/*
 * The identity tag of a claim of an id of type `typid` (FbfClaimBytes), or
 * with `op` of a (client_id, seq) claim whose client id is of type `typid`
 * (FbfOperationBytes); 0 for a type that cannot be claimed so.  The one
 * list of the types a claim's id may have.
 */
static char
claim_tag(Oid typid, bool op)
{
	switch (typid)
	{
		case INT8OID:
			return op ? 'i' : 'n';
		case TEXTOID:
			return op ? 't' : 's';
		case BYTEAOID:
			return op ? 0 : 'x';
		case UUIDOID:
			return op ? 'u' : 'g';
		default:
			return 0;
	}
}

/*
 * May ids of type `typid` be claimed: plain ids (bigint, text, bytea,
 * uuid), or with `op` the client ids of (client_id, seq) claims (bigint,
 * text, uuid)?
 */
bool
FbfClaimable(Oid typid, bool op)
{
	return claim_tag(typid, op) != 0;
}

/* claim_tag, or error for a type that cannot be claimed so */
static char
id_tag(Oid typid, bool op)
{
	char		tag = claim_tag(typid, op);

	if (tag == 0)
		elog(ERROR, "fbf: %s of type %s cannot be claimed",
			 op ? "client ids" : "ids", format_type_be(typid));
	return tag;
}

/*
 * The identity bytes of a claim of `id`, of type `typid`: a plain id
 * (`seq` NULL; FbfClaimBytes) or the client id of the (client_id, *seq)
 * claim (FbfOperationBytes on the default key).  Error for other types.
 */
bytea *
FbfClaimIdentity(Oid typid, Datum id, const int64 *seq)
{
	if (seq != NULL)
		return FbfOperationBytes(id_tag(typid, true), NULL, id, *seq);
	return FbfClaimBytes(id_tag(typid, false), id);
}

/* the blocks a batch's identities are packed in, and the longest packed */
#define IDENTITY_BLOCK		(64 * 1024)
#define IDENTITY_PACKED_MAX	(IDENTITY_BLOCK / 8)

/*
 * The identity bytes of the n claims of ids[] (FbfClaimIdentity, with
 * seqs[i] if `seqs`) into identities[]: packed one after another, int
 * aligned, in blocks of IDENTITY_BLOCK bytes, so that each holds its bytes
 * without an allocation's header and rounding (a bigint id's 13 bytes take
 * 16, not 32); a longer one keeps its own allocation.
 */
static void
claim_identities(Oid typid, int n, const Datum *ids, const int64 *seqs,
				 bytea **identities)
{
	char	   *block = NULL;
	Size		left = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		bytea	   *identity = FbfClaimIdentity(typid, ids[i],
												seqs ? &seqs[i] : NULL);
		Size		size = INTALIGN(VARSIZE(identity));

		if (size > IDENTITY_PACKED_MAX)
			identities[i] = identity;
		else
		{
			if (size > left)
			{
				block = palloc(IDENTITY_BLOCK);
				left = IDENTITY_BLOCK;
			}
			memcpy(block, identity, VARSIZE(identity));
			identities[i] = (bytea *) block;
			block += size;
			left -= size;
			pfree(identity);
		}
		CHECK_FOR_INTERRUPTS();
	}
}

/* ----------------------------------------------------------------------
 * Claiming
 * ----------------------------------------------------------------------
 */

/* the route to dedup tables distributed by Citus (src/citus), or NULL */
static FbfClaimRoute claim_route = NULL;

/*
 * Register the route to dedup tables distributed by Citus
 * (src/citus/citus_dedup.c, from _PG_init): FbfClaim hands it the claims
 * on a shell.
 */
void
FbfDedupSetRoute(FbfClaimRoute route)
{
	claim_route = route;
}

/*
 * Claim n ids of type `typid` in dedup table `relid` (plain ids, or with
 * `seqs` the client ids of (client_id, seqs[i]) claims), through the apply
 * engine (FbfEngineApply: hashed under the window's key, asked in the
 * canonical order; see the file header); claimed[i] gets the answer for
 * ids[i].  A dedup table distributed by Citus by its anchor (a shell) is
 * handed to the route registered at init (src/citus/citus_dedup.c), which
 * claims the ids on the nodes of their anchors' shards, where this same
 * function runs on the shard tables.  n is at most FBF_OPS_MAX: callers take it
 * from FbfBatchLength, or claim one id.  Locks: RowExclusiveLock on the
 * table and its window index (a shell: the table only), privileges checked
 * before (FbfCounterOpenRoutable).
 */
void
FbfClaim(Oid relid, Oid typid, int n, const Datum *ids, const int64 *seqs,
		 bool *claimed)
{
	Relation	heap;
	Relation	index;
	bytea	  **identities;
	bool		routed;

	PreventCommandIfReadOnly("fbf_claim()");
	PreventCommandDuringRecovery("fbf_claim()");
	Assert(n <= FBF_OPS_MAX);

	identities = palloc(sizeof(bytea *) * Max(n, 1));
	claim_identities(typid, n, ids, seqs, identities);

	routed = FbfCounterOpenRoutable(relid, FBF_DEDUP_CLAIM, RowExclusiveLock,
									&heap, &index);
	if (check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cannot claim ids in dedup table \"%s\" under row-level security",
						RelationGetRelationName(heap)),
				 errdetail("Row-level security is enabled for the table; policies judge rows, and a claim writes none, so none of them could judge it."),
				 errhint("Grant INSERT on the dedup table only to the roles that may claim in it, or use a dedup table for each group of roles.")));
	if (routed)
	{
		if (claim_route == NULL)
			elog(ERROR, "fbf: \"%s\" is routed, but no route for claims is registered",
				 RelationGetRelationName(heap));
		claim_route(heap, typid, n, ids, seqs, identities, claimed);
		FbfCounterClose(heap, NULL);
		return;
	}
	FbfEngineApply(heap, index, FbfOpsFromIds(n, identities, seqs), NULL, NULL,
				   claimed);
	FbfCounterClose(heap, index);
}

/* fbf_claim(dedup regclass, id): true once per id within the retention */
static Datum
claim_one(FunctionCallInfo fcinfo, Oid typid)
{
	Datum		id;
	bool		claimed;

	FbfRequireArg(fcinfo, 0, "fbf_claim", "dedup");
	FbfRequireArg(fcinfo, 1, "fbf_claim", "id");
	id = PG_GETARG_DATUM(1);
	FbfClaim(PG_GETARG_OID(0), typid, 1, &id, NULL, &claimed);
	PG_RETURN_BOOL(claimed);
}

FBF_ID_FUNCTIONS(fbf_claim, claim_one(fcinfo, typid));

/* fbf_claim(dedup regclass, client_id bigint|text|uuid, seq bigint) */
Datum
fbf_claim_op(PG_FUNCTION_ARGS)
{
	Datum		client;
	int64		seq;
	bool		claimed;

	FbfRequireArg(fcinfo, 0, "fbf_claim", "dedup");
	FbfRequireArg(fcinfo, 1, "fbf_claim", "client_id");
	FbfRequireArg(fcinfo, 2, "fbf_claim", "seq");
	client = PG_GETARG_DATUM(1);
	seq = PG_GETARG_INT64(2);
	FbfClaim(PG_GETARG_OID(0), get_fn_expr_argtype(fcinfo->flinfo, 1), 1,
			 &client, &seq, &claimed);
	PG_RETURN_BOOL(claimed);
}

/*
 * The one-dimensional array argument `argno` (`name` of fbf_claim), its
 * element type in *elemtype; error (nothing claimed) for a NULL or an
 * array of more dimensions.  Returns its number of elements, refused
 * beyond a batch's limit (FbfBatchLength) before anything is read.
 */
static int
array_arg(FunctionCallInfo fcinfo, int argno, const char *name,
		  ArrayType **array, Oid *elemtype)
{
	FbfRequireArg(fcinfo, argno, "fbf_claim", name);
	*array = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(*array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s of fbf_claim must be a one-dimensional array", name)));
	*elemtype = ARR_ELEMTYPE(*array);
	return FbfBatchLength(*array, "fbf_claim", name);
}

/*
 * fbf_claim(dedup regclass, ids bigint[]|text[]|bytea[]|uuid[]): claim every
 * id, in one window visit per id and one call; element i of the answer is
 * fbf_claim(dedup, ids[i]) as if the ids had been claimed in order (a
 * repeated id is claimed by its first occurrence only).
 */
Datum
fbf_claim_array(PG_FUNCTION_ARGS)
{
	ArrayType  *array;
	Datum	   *ids;
	Oid			typid;
	int			n;
	bool	   *claimed;

	FbfRequireArg(fcinfo, 0, "fbf_claim", "dedup");
	array_arg(fcinfo, 1, "ids", &array, &typid);
	n = FbfArrayElements(array, "fbf_claim", "ids", &ids);
	claimed = palloc(sizeof(bool) * Max(n, 1));
	FbfClaim(PG_GETARG_OID(0), typid, n, ids, NULL, claimed);
	PG_RETURN_ARRAYTYPE_P(FbfAnswersArray(claimed, n));
}

/*
 * fbf_claim(dedup regclass, client_ids bigint[]|text[]|uuid[], seqs bigint[]):
 * the batch form of fbf_claim(dedup, client_id, seq).
 */
Datum
fbf_claim_op_array(PG_FUNCTION_ARGS)
{
	ArrayType  *client_array;
	ArrayType  *seq_array;
	Datum	   *clients;
	int64	   *seqs;
	Oid			client_type;
	Oid			seq_type;
	int			n;
	bool	   *claimed;

	FbfRequireArg(fcinfo, 0, "fbf_claim", "dedup");
	n = array_arg(fcinfo, 1, "client_ids", &client_array, &client_type);
	if (array_arg(fcinfo, 2, "seqs", &seq_array, &seq_type) != n)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("client_ids and seqs of fbf_claim must have the same length")));
	Assert(seq_type == INT8OID);
	FbfArrayElements(client_array, "fbf_claim", "client_ids", &clients);
	FbfArrayInt64s(seq_array, "fbf_claim", "seqs", &seqs);
	claimed = palloc(sizeof(bool) * Max(n, 1));
	FbfClaim(PG_GETARG_OID(0), client_type, n, clients, seqs, claimed);
	PG_RETURN_ARRAYTYPE_P(FbfAnswersArray(claimed, n));
}

/* ----------------------------------------------------------------------
 * fbf_claim_id: the identity bytes, for fbf_contains on fbf_snapshot
 * ----------------------------------------------------------------------
 */

static Datum
claim_id(FunctionCallInfo fcinfo, Oid typid)
{
	PG_RETURN_BYTEA_P(FbfClaimBytes(id_tag(typid, false), PG_GETARG_DATUM(0)));
}

FBF_ID_FUNCTIONS(fbf_claim_id, claim_id(fcinfo, typid));
