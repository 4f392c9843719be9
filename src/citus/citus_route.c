/*-------------------------------------------------------------------------
 *
 * citus_route.c
 *	  Counters distributed by Citus, on the node that routes a call:
 *	  recognizing a Citus table, the route registered with the counters'
 *	  engine, and the routed statement that sends an increment (or, for
 *	  citus_dedup.c, claims) to the node of its shard inside the caller's
 *	  distributed transaction.
 *
 * A counter distributed by `key` (fbf_distribute_counter, sql/fbf.sql) is
 * a *shell* table on every node, whose own window is never used, and one
 * shard table per hash range of keys, placed on one node, each with its
 * own window (Citus copies the window index to every shard).  An
 * operation's identity includes its key (FbfOperationBytes, counter_op.c),
 * and every operation on a key goes to the one shard holding that key: so the
 * shard's window sees every operation that could be a retry of another,
 * and per-shard windows give exactly the single-node semantics.
 *
 * The route: FbfCitusInit registers this file's functions with the
 * counters' engine (FbfCounterSetRoute, counter_rel.c): the relation cache
 * asks citus_lookup how a table is distributed, FbfCounterOpen has
 * citus_refuse refuse a Citus table's own window, FbfCounterApply, given
 * a shell, calls citus_apply, and the front ends' placement twins call
 * FbfCitusApplyOnPlacement (citus_placement.c) through the route's
 * apply_on_placement.  citus_apply runs through SPI one statement on the
 * shell:
 *
 *	WITH touch AS (UPDATE shell SET value = value
 *				   WHERE key = $2 AND shard < 0 RETURNING 1)
 *	SELECT fbf_apply_on_placement($1, $2, $3, $4, $5, $6)
 *
 * Citus plans it as a single-shard router query (the CTE pins it to the
 * key's shard) and runs it on the shard's placement, remotely or by local
 * execution, in the coordinated transaction.  The data-modifying CTE,
 * which updates no row (shard rows are never negative), is what makes
 * Citus count the statement as a modification (a MODIFY_TASK): it takes
 * the shard's metadata lock that shard moves wait for, it opens a
 * transaction block on the placement, and a transaction that modifies
 * through more than one node commits with two-phase commit.  Citus
 * evaluates only the parameters of a SELECT on the coordinator, so the
 * function runs on the placement's node (citus_placement.c).  This file
 * is a front end of the engine: the engine never calls it by name.
 *
 * That is the function route, which every call on a shell can take.  A
 * statement that is one call of a front end, and nothing else, takes the
 * fast path instead (citus_plan.c): the planner puts the same routed
 * statement, calling the front end's placement twin, in the client's
 * statement's place, and Citus sends it in one round trip.
 *
 * What travels is what the client gave idempotent_increment: the key and
 * each operation's client id, seq and delta, never hashes
 * (citus_placement.c says why); the answers come back as a boolean[] in
 * the order sent (FbfCitusRunRouted, shared with citus_dedup.c).
 *
 * Locks: pg_extension is read with AccessShareLock, and
 * pg_dist_partition as citus_shards.c's FbfCitusPartitionRow reads it
 * (AccessShareLock on the catalog and its index); the shell is opened by
 * FbfCounterApply with RowExclusiveLock (privileges checked before), and
 * Citus takes the shard's metadata lock for the routed statement on the
 * routing node.  The placement's locks are citus_placement.c's.
 *
 * Nothing here links to Citus: the metadata is read from its catalogs
 * (pg_dist_partition, through citus_shards.c), and Citus plans the routed
 * statement as it plans any other.  Without Citus, pg_dist_partition does
 * not exist and every table is local.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type_d.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/primnodes.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "citus/citus.h"
#include "counter/counter.h"

static FbfCitusDistribution citus_lookup(Relation heap, AttrNumber key_attno);
fbf_noreturn static void citus_refuse(Relation heap,
									   FbfCitusDistribution how);
static void citus_apply(Relation shell, const char *qualname,
						const FbfOps *ops, bool *applied, int64 *value);

/* the route to counters distributed by Citus, as the engine calls it */
static const FbfCounterRoute citus_route = {
	.lookup = citus_lookup,
	.refuse = citus_refuse,
	.apply = citus_apply,
	.apply_on_placement = FbfCitusApplyOnPlacement,
};

/*
 * Register the route to counters distributed by Citus with the counters'
 * engine (FbfCounterSetRoute); from _PG_init.  Nothing else: without
 * Citus, citus_lookup finds every table local.  The route's
 * apply_on_placement, which the front ends' placement twins call, is
 * citus_placement.c's.
 */
void
FbfCitusInit(void)
{
	FbfCounterSetRoute(&citus_route);
}

/* ----------------------------------------------------------------------
 * Is it a Citus table?
 * ----------------------------------------------------------------------
 */

/*
 * How Citus distributes the table `heap`, whose routing column (a
 * counter's `key`, a dedup table's `anchor`: FbfCounterRelGet) is
 * `key_attno`: from its row in pg_dist_partition, read as a catalog (the
 * relation cache calls this; Citus invalidates a table's relcache entry
 * whenever its row changes).
 *
 *	FBF_CITUS_LOCAL		no row (or no Citus): an ordinary table
 *	FBF_CITUS_BY_KEY	hash-distributed by that column, one placement per
 *						shard (replication model 's'): a shell, routed
 *	FBF_CITUS_OTHER		any other Citus table (reference, local or
 *						single-shard table, another distribution column,
 *						replicated shards): refused
 */
static FbfCitusDistribution
citus_lookup(Relation heap, AttrNumber key_attno)
{
	char		method;
	char		model;
	Var		   *column;

	if (!FbfCitusPartitionRow(RelationGetRelid(heap), &method, &model, &column))
		return FBF_CITUS_LOCAL;
	if (method == 'h' && model == 's' && column != NULL &&
		key_attno != InvalidAttrNumber && column->varattno == key_attno)
		return FBF_CITUS_BY_KEY;
	return FBF_CITUS_OTHER;
}

/*
 * Error: the window of the Citus table `heap` would be used.  A shell's
 * window is an empty copy that no operation ever reaches; reading or
 * changing it would answer for a table that holds nothing.
 */
static void
citus_refuse(Relation heap, FbfCitusDistribution how)
{
	if (how == FBF_CITUS_BY_KEY)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("\"%s\" is distributed by Citus: its operations are remembered in its shards' windows, not in this table's",
						RelationGetRelationName(heap)),
				 FbfCounterRelGet(heap)->kind == FBF_WINDOW_DEDUP ?
				 errhint("Claims are routed to the shards; for a shard's window, call the function on the shard table on its node; fbf_dedup_stats on the coordinator lists every shard's window.") :
				 errhint("Increments and fbf_counter_value() are routed to the shards; for a shard's window, call the function on the shard table on its node; fbf_counter_stats on the coordinator lists every shard's window.")));
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("\"%s\" is a Citus table not distributed by its key column alone",
					RelationGetRelationName(heap)),
			 errdetail("fbf counts exactly once on Citus only when every operation on a key reaches the one window of the key's shard."),
			 errhint("Distribute counter tables with fbf_distribute_counter().")));
}

/* ----------------------------------------------------------------------
 * Routing (the node that runs idempotent_increment)
 * ----------------------------------------------------------------------
 */

/* the schema fbf is installed in (PostgreSQL 16's get_extension_schema) */
Oid
FbfCitusExtensionSchema(void)
{
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData skey;
	SysScanDesc scan;
	HeapTuple	tuple;
	Oid			schema = InvalidOid;

	ScanKeyInit(&skey, Anum_pg_extension_extname, BTEqualStrategyNumber,
				F_NAMEEQ, CStringGetDatum("fbf"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &skey);
	if (HeapTupleIsValid(tuple = systable_getnext(scan)))
		schema = ((Form_pg_extension) GETSTRUCT(tuple))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	if (!OidIsValid(schema))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("extension \"fbf\" is not installed in this database")));
	return schema;
}

/*
 * The n answers of a routed statement, in the order it sent its n
 * operations or ids: `answers` is the boolean[] the placement function
 * returned (NULL if it returned none), which holds one answer, not null,
 * for each (FbfAnswersArray builds it so); anything else is an internal
 * error, naming the call (`what`) and what it sent (`sent`).  Answer i
 * lands in result[place[i]].
 */
static void
routed_answers(Relation shell, const char *what, const char *sent,
			   ArrayType *answers, int n, const int *place, bool *result)
{
	Datum	   *elems = NULL;
	bool	   *nulls = NULL;
	int			nanswers = 0;
	int			i;

	if (answers != NULL)
	{
		if (ARR_NDIM(answers) > 1 || ARR_ELEMTYPE(answers) != BOOLOID)
			elog(ERROR, "fbf: the routed %s \"%s\" returned a malformed answer",
				 what, RelationGetRelationName(shell));
		deconstruct_array(answers, BOOLOID, 1, true, TYPALIGN_CHAR, &elems,
						  &nulls, &nanswers);
	}
	if (answers == NULL || nanswers != n)
		elog(ERROR, "fbf: the routed %s \"%s\" returned %d answers for %d %s",
			 what, RelationGetRelationName(shell), nanswers, n, sent);
	for (i = 0; i < n; i++)
	{
		if (nulls[i])
			elog(ERROR, "fbf: the routed %s \"%s\" returned a malformed answer",
				 what, RelationGetRelationName(shell));
		result[place[i]] = DatumGetBool(elems[i]);
	}
}

/*
 * Run the routed statement `sql` on the shell `shell` with its `nargs`
 * arguments (their types and nulls as SPI_execute_with_args takes them),
 * in a connection to SPI of its own, and take its one row's answers: the
 * n answers of the operations or ids it sent (`sent`: "operations",
 * "ids"), in the order sent, answer i landing in answers[place[i]].  The
 * placement function returns a boolean[] of them (fbf_claim_on_placement)
 * or a record of them and a value (fbf_apply_on_placement, a row type:
 * *value gets the value, 0 for NULL, if `value` is not NULL).  Error if the statement fails
 * or returns NULL; `what` names the call in the errors ("increment of",
 * "claims in").  Shared with citus_dedup.c.
 */
void
FbfCitusRunRouted(Relation shell, const char *what, const char *sent,
				  const char *sql, int nargs, Oid *types, Datum *args,
				  const char *nulls, int n, const int *place, bool *answers,
				  int64 *value)
{
	bool		isnull;
	Datum		d;
	int			rc;

	SPI_connect();
	rc = SPI_execute_with_args(sql, nargs, types, args, nulls, false, 0);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "fbf: the routed %s \"%s\" failed: %s",
			 what, RelationGetRelationName(shell), SPI_result_code_string(rc));
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		elog(ERROR, "fbf: the routed %s \"%s\" returned nothing",
			 what, RelationGetRelationName(shell));
	if (!type_is_rowtype(SPI_gettypeid(SPI_tuptable->tupdesc, 1)))
		routed_answers(shell, what, sent, DatumGetArrayTypeP(d), n, place,
					   answers);
	else
	{
		HeapTupleHeader result = DatumGetHeapTupleHeader(d);

		d = GetAttributeByNum(result, 1, &isnull);
		routed_answers(shell, what, sent,
					   isnull ? NULL : DatumGetArrayTypeP(d), n, place,
					   answers);
		if (value != NULL)
		{
			d = GetAttributeByNum(result, 2, &isnull);
			*value = isnull ? 0 : DatumGetInt64(d);
		}
	}
	SPI_finish();
}

/*
 * Apply the operations `ops` of the counter whose shell is `shell`, on the
 * node of their key's shard, in the current (distributed) transaction: the
 * routed statement of the file's header, through SPI.  They are sent in
 * the caller's order (a shell's operations are not hashed here: the
 * placement hashes them under its window's key, and asks its window in
 * their canonical order).  Arguments and results as FbfCounterApply's.
 */
static void
citus_apply(Relation shell, const char *qualname, const FbfOps *ops,
			bool *applied, int64 *value)
{
	char	   *schema = get_namespace_name(FbfCitusExtensionSchema());
	char	   *sql;
	Oid			client_type = FbfClientIdType(ops->tag);
	Oid			types[6] = {REGCLASSOID, TEXTOID, get_array_type(client_type),
	INT8ARRAYOID, INT8ARRAYOID, BOOLOID};
	Datum		args[6];

	sql = psprintf("WITH touch AS (UPDATE %s SET value = value "
				   "WHERE key OPERATOR(pg_catalog.=) $2 AND shard OPERATOR(pg_catalog.<) 0 RETURNING 1) "
				   "SELECT %s.fbf_apply_on_placement($1, $2, $3, $4, $5, $6)",
				   qualname, quote_identifier(schema));
	args[0] = ObjectIdGetDatum(RelationGetRelid(shell));
	args[1] = PointerGetDatum(ops->key);
	args[2] = PointerGetDatum(FbfArrayBuild(ops->client_ids, ops->n,
											client_type));
	args[3] = FbfArrayBuildInts(INT8OID, ops->seqs, ops->n);
	args[4] = FbfArrayBuildInts(INT8OID, ops->deltas, ops->n);
	args[5] = BoolGetDatum(value != NULL);

	/* answer i is for the i-th operation sent, the caller's place[i] */
	FbfCitusRunRouted(shell, "increment of", "operations", sql, 6, types,
					  args, NULL, ops->n, ops->place, applied, value);
}
