/*-------------------------------------------------------------------------
 *
 * citus_dedup.c
 *	  Dedup tables distributed by Citus: routing claims to the nodes of
 *	  their anchors' shards inside the caller's distributed transaction, and
 *	  claiming them there in the shards' windows.
 *
 * A dedup table distributed by its `anchor` column (fbf_distribute_dedup,
 * sql/fbf.sql) is a shell on every node, whose own window is never used
 * (citus_refuse, citus_route.c), and one shard table per hash range of
 * anchors, each with its own window.  A dedup table holds no rows, so an
 * anchor is not stored anywhere: it is each claim's routing value, an
 * int4 computed from the claim's identity bytes (FbfClaimIdentity, dedup.c)
 * with the core's public hash (fbf_hash_bytes: XXH3 under a fixed seed, the
 * same on every node and platform; never the window's secret keyed hash):
 * every claim of an id has the one anchor, so it reaches the one shard
 * whose window remembers the id, and per-shard windows answer exactly as a
 * single node's.  A (client_id, seq) claim's anchor is its stream's (its
 * identity bytes without the seq): a client's claims are numbered in one
 * shard's stream and answered exactly as on one node (docs/design.md,
 * "Exact streams").
 *
 * The route: FbfDedupCitusInit registers citus_claim with dedup.c
 * (FbfDedupSetRoute); FbfClaim, given a shell (citus_route.c's
 * citus_lookup recognizes a dedup table hash-distributed by `anchor`),
 * calls it.  It groups the ids by the shard of their anchors (Citus' own
 * get_shard_id_for_distribution_column, once per call, only when the ids
 * have more than one anchor), and runs through SPI, for each shard in the
 * order of the shards' ids, one statement on the shell:
 *
 *	WITH touch AS (UPDATE shell SET anchor = anchor
 *				   WHERE anchor = $2 RETURNING 1)
 *	SELECT fbf_claim_on_placement($1, $2, $3, $4)
 *
 * with $2 the anchor of one of its ids.  As for counters (citus_route.c),
 * the data-modifying CTE, which updates no row (a dedup table has none),
 * makes Citus plan it as a single-shard modification: it takes the shard's
 * metadata lock that shard moves wait for, and a transaction that claims
 * through more than one node commits with two-phase commit.  The answers
 * go back to the caller's order.  Two batches sharing ids visit their
 * shards in one order and, within a shard, the ids in one order (the
 * engine's canonical order), so they wait for each other in one direction
 * only.
 *
 * What travels is what the client gave fbf_claim: the ids (or client ids
 * and seqs), with their type; never identity bytes or hashes.
 * fbf_claim_on_placement recomputes each id's identity and anchor itself,
 * refuses ids whose anchors are not in the shard of the anchor it was
 * routed by, and claims them with FbfClaim on that shard, which must be
 * placed on its node: a caller who chose the hashes, or the shard, could
 * record claims where their owner's claims would never look, or claim
 * another tenant's ids in a shard it does not route to.
 *
 * Who may call fbf_claim_on_placement: everyone (Citus runs the routed
 * statement on the worker as the user who called fbf_claim).  It grants
 * nothing that fbf_claim on the shard table, on that node, does not: the
 * shell must be a distributed dedup table in which the caller may claim
 * (INSERT, FbfCounterOpenRoutable: 42501, 42809), and the claims go
 * through FbfClaim on the shard table, with its privilege check and its
 * refusal under row security; and it locks the shard against transfers
 * as a routed claim does (Locks, below).  The routed statement's CTE reads
 * and updates the shell's anchor column, which the executor checks on the
 * coordinator and on the shard: fbf_distribute_dedup grants SELECT and
 * UPDATE on that column (of a table that holds no rows: nothing to read or
 * change) to PUBLIC, so that INSERT stays the privilege to claim.
 *
 * Locks: the shell is opened by FbfClaim with RowExclusiveLock
 * (privileges checked before), and Citus takes its shard metadata locks
 * for the routed statements on the coordinator.  fbf_claim_on_placement
 * starts with the placement prologue (FbfCitusPlacementPrologue,
 * citus_placement.c): the shell opened with AccessShareLock once its
 * privileges are checked, then the anchor's shard's metadata lock in
 * ShareLock until the end of the transaction (the lock a shard move or
 * split holds in ExclusiveLock on this node while it copies the shard, so
 * a direct call waits for the transfer as a routed claim does), before the
 * shard table is opened by FbfClaim.  Nothing here links to Citus: it is
 * reached through SQL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type_d.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "citus/citus.h"
#include "core/fbf_hash.h"
#include "counter/counter.h"
#include "counter/counter_args.h"

PG_FUNCTION_INFO_V1(fbf_claim_on_placement);
PG_FUNCTION_INFO_V1(fbf_claim_one_on_placement);
PG_FUNCTION_INFO_V1(fbf_claim_anchor);

/* one id of a call, by the shard of its anchor, then its place */
typedef struct RoutedClaim
{
	int64		shardid;
	int			place;
} RoutedClaim;

static void citus_claim(Relation shell, Oid typid, int n, const Datum *ids,
						const int64 *seqs, bytea *const *identities,
						bool *claimed);

/*
 * Register the route to dedup tables distributed by Citus with dedup.c
 * (FbfDedupSetRoute); from _PG_init.
 */
void
FbfDedupCitusInit(void)
{
	FbfDedupSetRoute(citus_claim);
}

/*
 * The anchor of a claim whose identity bytes are `identity` (a bytea,
 * FbfClaimIdentity): the high 32 bits of the public hash of those bytes,
 * less the seq's 8 of a (client_id, seq) claim (`has_seq`), so that a
 * stream's claims share it.  Part of the layout of distributed dedup
 * tables' shards: never change it.
 */
static int32
claim_anchor(const bytea *identity, bool has_seq)
{
	size_t		len = VARSIZE(identity) - VARHDRSZ - (has_seq ? 8 : 0);
	FbfHash		h = fbf_hash_bytes(VARDATA(identity), len);

	return (int32) (uint32) (h.h1 >> 32);
}

/* for qsort: by shard, then by place */
static int
routed_claim_cmp(const void *a, const void *b)
{
	const RoutedClaim *x = (const RoutedClaim *) a;
	const RoutedClaim *y = (const RoutedClaim *) b;

	if (x->shardid != y->shardid)
		return x->shardid < y->shardid ? -1 : 1;
	return x->place < y->place ? -1 : x->place > y->place ? 1 : 0;
}

/*
 * The claims `order` (sorted by routed_claim_cmp), with the shard of each
 * of their n anchors, read from Citus' metadata in one statement
 * (get_shard_id_for_distribution_column, as Citus routes the anchor).
 */
static void
shards_of(Oid shell, const int32 *anchors, int n, RoutedClaim *order)
{
	Oid			types[2] = {REGCLASSOID, INT4ARRAYOID};
	Datum		args[2];
	int			rc;
	int			i;

	args[0] = ObjectIdGetDatum(shell);
	args[1] = FbfArrayBuildInts(INT4OID, anchors, n);
	SPI_connect();
	rc = SPI_execute_with_args("SELECT pg_catalog.get_shard_id_for_distribution_column($1, u.a) "
							   "FROM pg_catalog.unnest($2) WITH ORDINALITY AS u(a, i) "
							   "ORDER BY u.i",
							   2, types, args, NULL, true, 0);
	if (rc != SPI_OK_SELECT || SPI_processed != (uint64) n)
		elog(ERROR, "fbf: finding the shards of the claims in \"%s\" failed: %s",
			 get_rel_name(shell), SPI_result_code_string(rc));
	for (i = 0; i < n; i++)
	{
		bool		isnull;

		order[i].shardid = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
													   SPI_tuptable->tupdesc,
													   1, &isnull));
		order[i].place = i;
		CHECK_FOR_INTERRUPTS();
	}
	SPI_finish();
	qsort(order, n, sizeof(RoutedClaim), routed_claim_cmp);
}

/*
 * Claim the ids order[0..m-1] (places in the caller's arrays) on the node
 * of the shard of `anchor`, in the current (distributed) transaction: the
 * routed statement of the file's header, through SPI; their answers land
 * in claimed[place].
 */
static void
route_group(Relation shell, const char *sql, Oid typid, int32 anchor,
			const Datum *ids, const int64 *seqs, const RoutedClaim *order,
			int m, bool *claimed)
{
	Oid			types[4] = {REGCLASSOID, INT4OID, get_array_type(typid),
	INT8ARRAYOID};
	Datum		args[4];
	char		nulls[4] = {' ', ' ', ' ', seqs ? ' ' : 'n'};
	Datum	   *group_ids = palloc(sizeof(Datum) * Max(m, 1));
	int64	   *group_seqs = palloc(sizeof(int64) * Max(m, 1));
	int		   *place = palloc(sizeof(int) * Max(m, 1));
	int			i;

	for (i = 0; i < m; i++)
	{
		place[i] = order[i].place;
		group_ids[i] = ids[place[i]];
		if (seqs != NULL)
			group_seqs[i] = seqs[place[i]];
		CHECK_FOR_INTERRUPTS();
	}
	args[0] = ObjectIdGetDatum(RelationGetRelid(shell));
	args[1] = Int32GetDatum(anchor);
	args[2] = PointerGetDatum(FbfArrayBuild(group_ids, m, typid));
	args[3] = seqs ? FbfArrayBuildInts(INT8OID, group_seqs, m) : (Datum) 0;

	FbfCitusRunRouted(shell, "claims in", "ids", sql, 4, types, args, nulls,
					  m, place, claimed, NULL);
}

/*
 * The route (FbfClaimRoute): claim the n ids on the shards of their
 * anchors, one routed statement per shard, in the order of the shards'
 * ids (the file's header).  A call whose ids share one anchor (a single
 * claim, a client's stream) asks Citus' metadata nothing itself.
 */
static void
citus_claim(Relation shell, Oid typid, int n, const Datum *ids,
			const int64 *seqs, bytea *const *identities, bool *claimed)
{
	int32	   *anchors;
	RoutedClaim *order;
	bool		one_anchor = true;
	char	   *sql;
	int			start;
	int			i;

	if (n == 0)
		return;
	anchors = palloc(sizeof(int32) * n);
	order = palloc(sizeof(RoutedClaim) * n);
	for (i = 0; i < n; i++)
	{
		anchors[i] = claim_anchor(identities[i], seqs != NULL);
		one_anchor = one_anchor && anchors[i] == anchors[0];
		order[i].shardid = 0;
		order[i].place = i;
		CHECK_FOR_INTERRUPTS();
	}
	if (!one_anchor)
		shards_of(RelationGetRelid(shell), anchors, n, order);

	sql = psprintf("WITH touch AS (UPDATE %s SET anchor = anchor "
				   "WHERE anchor OPERATOR(pg_catalog.=) $2 RETURNING 1) "
				   "SELECT %s.fbf_claim_on_placement($1, $2, $3, $4)",
				   FbfCounterRelGet(shell)->qualname,
				   quote_identifier(get_namespace_name(FbfCitusExtensionSchema())));
	for (start = 0; start < n;)
	{
		int			end = start + 1;

		while (end < n && order[end].shardid == order[start].shardid)
			end++;
		route_group(shell, sql, typid, anchors[order[start].place], ids, seqs,
					order + start, end - start, claimed);
		start = end;
		CHECK_FOR_INTERRUPTS();
	}
}

/* ----------------------------------------------------------------------
 * Claiming on the placement (the node that holds the anchor's shard)
 * ----------------------------------------------------------------------
 */

/*
 * Error unless every anchor of anchors[0..n-1] is in the shard of
 * `anchor` of the distributed table `shell` (Citus' own mapping, in one
 * statement).
 */
static void
check_same_shard(Oid shell, int32 anchor, const int32 *anchors, int n)
{
	Oid			types[3] = {REGCLASSOID, INT4ARRAYOID, INT4OID};
	Datum		args[3];
	bool		isnull;
	int64		strays;
	int			rc;

	args[0] = ObjectIdGetDatum(shell);
	args[1] = FbfArrayBuildInts(INT4OID, anchors, n);
	args[2] = Int32GetDatum(anchor);
	SPI_connect();
	rc = SPI_execute_with_args("SELECT pg_catalog.count(*) FROM pg_catalog.unnest($2) AS u(a) "
							   "WHERE pg_catalog.get_shard_id_for_distribution_column($1, u.a) "
							   "OPERATOR(pg_catalog.<>) pg_catalog.get_shard_id_for_distribution_column($1, $3)",
							   3, types, args, NULL, true, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "fbf: finding the shards of the claims in \"%s\" failed: %s",
			 get_rel_name(shell), SPI_result_code_string(rc));
	strays = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										 SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	if (strays > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%lld ids do not belong to the shard of anchor %d of \"%s\"",
						(long long) strays, anchor, get_rel_name(shell)),
				 errhint("Claim ids with fbf_claim(), which routes each to its shard.")));
}

/*
 * fbf_claim_on_placement(dedup regclass, anchor integer, ids anyarray,
 * seqs bigint[]) RETURNS boolean[]: the routed half of fbf_claim on a
 * distributed dedup table (citus_claim).  `dedup` is the shell; `ids` are
 * plain ids (bigint, text, bytea or uuid; `seqs` NULL) or the client ids
 * (bigint, text or uuid) of the (client_ids[i], seqs[i]) claims.  Computes
 * each id's identity and anchor here, refuses ids whose anchors are not in
 * the shard of `anchor` (22023), and claims them in that shard, which must
 * be placed on this node and whose metadata the placement prologue locks
 * (FbfCitusPlacementPrologue), as fbf_claim on the shard table would: with
 * its privilege check and its refusal under row security (the file's
 * header says why anyone may call it).  Element i of the answer is for ids[i].
 */
Datum
fbf_claim_on_placement(PG_FUNCTION_ARGS)
{
	const char *fname = "fbf_claim_on_placement";
	Oid			shell;
	int32		anchor;
	ArrayType  *a;
	Oid			typid;
	Datum	   *ids;
	int64	   *seqs = NULL;
	int32	   *anchors;
	bool		one_anchor = true;
	bool	   *claimed;
	Oid			shard;
	int			n;
	int			i;

	FbfRequireArg(fcinfo, 0, fname, "dedup");
	FbfRequireArg(fcinfo, 1, fname, "anchor");
	FbfRequireArg(fcinfo, 2, fname, "ids");
	PreventCommandIfReadOnly("fbf_claim()");
	PreventCommandDuringRecovery("fbf_claim()");
	shell = PG_GETARG_OID(0);
	anchor = PG_GETARG_INT32(1);

	/*
	 * a dedup table distributed by its anchor, in which the caller may
	 * claim; the anchor's shard, placed here, its metadata locked against
	 * shard transfers
	 */
	shard = FbfCitusPlacementPrologue(shell, FBF_DEDUP_CLAIM,
									  Int32GetDatum(anchor), INT4OID);

	a = PG_GETARG_ARRAYTYPE_P(2);
	typid = ARR_ELEMTYPE(a);
	if (ARR_NDIM(a) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("ids of %s must be a one-dimensional array", fname)));
	if (!FbfClaimable(typid, !PG_ARGISNULL(3)))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("ids of type %s cannot be claimed", format_type_be(typid))));
	n = FbfBatchLength(a, fname, "ids");
	if (!PG_ARGISNULL(3))
	{
		ArrayType  *s = PG_GETARG_ARRAYTYPE_P(3);

		if (ARR_NDIM(s) > 1 || ARR_ELEMTYPE(s) != INT8OID ||
			FbfBatchLength(s, fname, "seqs") != n)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("ids and seqs of %s must be one-dimensional arrays of the same length",
							fname)));
		FbfArrayInt64s(s, fname, "seqs", &seqs);
	}
	FbfArrayElements(a, fname, "ids", &ids);

	/* every id's anchor, from its identity computed here */
	anchors = palloc(sizeof(int32) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		bytea	   *identity = FbfClaimIdentity(typid, ids[i],
												seqs ? &seqs[i] : NULL);

		anchors[i] = claim_anchor(identity, seqs != NULL);
		one_anchor = one_anchor && anchors[i] == anchor;
		pfree(identity);
		CHECK_FOR_INTERRUPTS();
	}
	if (!one_anchor)
		check_same_shard(shell, anchor, anchors, n);

	claimed = palloc(sizeof(bool) * Max(n, 1));
	FbfClaim(shard, typid, n, ids, seqs, claimed);

	PG_RETURN_ARRAYTYPE_P(FbfAnswersArray(claimed, n));
}

/*
 * fbf_claim_on_placement(dedup regclass, id anyelement) and
 * fbf_claim_on_placement(dedup regclass, client_id anyelement, seq bigint)
 * RETURNS boolean: the routed half of the fast path's lone claim
 * (citus_plan.c), as the array form above claims one id, in one call
 * that its node parses, plans and runs with less: the anchor is the id's
 * own, computed here, so no routed anchor is checked against it, and the
 * placement prologue locks that anchor's shard (whose placement here it
 * checks).  The id's type is checked before the prologue, which needs the
 * anchor; it queues no lock.
 */
Datum
fbf_claim_one_on_placement(PG_FUNCTION_ARGS)
{
	const char *fname = "fbf_claim_on_placement";
	bool		op = PG_NARGS() == 3;
	Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, 1);
	Datum		id;
	int64		seq = 0;
	int32		anchor;
	Oid			shard;
	bool		claimed;

	FbfRequireArg(fcinfo, 0, fname, "dedup");
	FbfRequireArg(fcinfo, 1, fname, op ? "client_id" : "id");
	if (op)
	{
		FbfRequireArg(fcinfo, 2, fname, "seq");
		seq = PG_GETARG_INT64(2);
	}
	PreventCommandIfReadOnly("fbf_claim()");
	PreventCommandDuringRecovery("fbf_claim()");
	if (!FbfClaimable(typid, op))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s of type %s cannot be claimed", op ? "client ids" : "ids",
						format_type_be(typid))));
	id = PG_GETARG_DATUM(1);
	anchor = claim_anchor(FbfClaimIdentity(typid, id, op ? &seq : NULL), op);

	shard = FbfCitusPlacementPrologue(PG_GETARG_OID(0), FBF_DEDUP_CLAIM,
									  Int32GetDatum(anchor), INT4OID);
	FbfClaim(shard, typid, 1, &id, op ? &seq : NULL, &claimed);
	PG_RETURN_BOOL(claimed);
}

/*
 * fbf_claim_anchor(id anyelement) and fbf_claim_anchor(client_id
 * anyelement, seq bigint) RETURNS integer: the anchor of the claim of `id`,
 * or of (client_id, seq), by which Citus routes the statement of the fast
 * path of fbf_claim (citus_plan.c); fbf_claim's own error (22004)
 * for a NULL argument, before Citus would fail to route it.  Immutable,
 * not strict.
 */
Datum
fbf_claim_anchor(PG_FUNCTION_ARGS)
{
	bool		op = PG_NARGS() == 2;
	Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, 0);
	int64		seq = 0;

	FbfRequireArg(fcinfo, 0, "fbf_claim", op ? "client_id" : "id");
	if (!FbfClaimable(typid, op))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s of type %s cannot be claimed", op ? "client ids" : "ids",
						format_type_be(typid))));
	if (op)
	{
		FbfRequireArg(fcinfo, 1, "fbf_claim", "seq");
		seq = PG_GETARG_INT64(1);
	}
	PG_RETURN_INT32(claim_anchor(FbfClaimIdentity(typid, PG_GETARG_DATUM(0),
												  op ? &seq : NULL),
								 op));
}
