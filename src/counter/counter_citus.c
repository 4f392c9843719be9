/*-------------------------------------------------------------------------
 *
 * counter_citus.c
 *	  Counters distributed by Citus: recognizing a Citus table, routing an
 *	  increment to the node of its key's shard inside the caller's
 *	  distributed transaction, and applying it there on the shard.
 *
 * A counter distributed by `key` (fbf_distribute_counter, sql/fbf.sql) is
 * a *shell* table on every node, whose own window is never used, and one
 * shard table per hash range of keys, placed on one node, each with its
 * own window (Citus copies the window index to every shard).  An
 * operation's identity includes its key (operation_bytes, counter.c), and
 * every operation on a key goes to the one shard holding that key: so the
 * shard's window sees every operation that could be a retry of another,
 * and per-shard windows give exactly the single-node semantics.
 *
 * The route: FbfCounterApply, given a shell, calls FbfCitusApply, which
 * runs through SPI one statement on the shell:
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
 * function runs on the placement's node, where fbf_apply_on_placement
 * finds the key's shard in Citus' metadata, checks that its placement is
 * local, and gives the operations to FbfCounterApply on the shard table.
 *
 * Nothing here links to Citus: the metadata is read from its catalogs
 * (pg_dist_partition here; the shard and its placement through Citus' SQL
 * functions), and Citus plans the routed statement as it plans any other.
 * Without Citus, pg_dist_partition does not exist and every table is
 * local.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace_d.h"
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

#include "counter/counter.h"

PG_FUNCTION_INFO_V1(fbf_apply_on_placement);

/* ----------------------------------------------------------------------
 * Is it a Citus table?
 * ----------------------------------------------------------------------
 */

/*
 * How Citus distributes the table `heap`, whose `key` column is
 * `key_attno`: from its row in pg_dist_partition, read as a catalog (the
 * relation cache calls this; Citus invalidates a table's relcache entry
 * whenever its row changes).
 *
 *	FBF_CITUS_LOCAL		no row (or no Citus): an ordinary table
 *	FBF_CITUS_BY_KEY	hash-distributed by `key`, one placement per shard
 *						(replication model 's'): a shell, routed
 *	FBF_CITUS_OTHER		any other Citus table (reference, local or
 *						single-shard table, another distribution column,
 *						replicated shards): refused
 */
FbfCitusDistribution
FbfCitusLookup(Relation heap, AttrNumber key_attno)
{
	Oid			catalog = get_relname_relid("pg_dist_partition",
											PG_CATALOG_NAMESPACE);
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData skey;
	HeapTuple	tuple;
	FbfCitusDistribution result = FBF_CITUS_LOCAL;

	if (!OidIsValid(catalog))
		return FBF_CITUS_LOCAL;

	rel = table_open(catalog, AccessShareLock);
	{
		TupleDesc	desc = RelationGetDescr(rel);
		AttrNumber	a_relid = get_attnum(catalog, "logicalrelid");
		AttrNumber	a_method = get_attnum(catalog, "partmethod");
		AttrNumber	a_key = get_attnum(catalog, "partkey");
		AttrNumber	a_model = get_attnum(catalog, "repmodel");

		if (a_relid == InvalidAttrNumber || a_method == InvalidAttrNumber ||
			a_key == InvalidAttrNumber || a_model == InvalidAttrNumber)
			elog(ERROR, "fbf: pg_dist_partition lacks the columns of Citus' metadata");

		ScanKeyInit(&skey, a_relid, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(RelationGetRelid(heap)));
		scan = systable_beginscan(rel, InvalidOid, false, NULL, 1, &skey);
		if (HeapTupleIsValid(tuple = systable_getnext(scan)))
		{
			bool		isnull;
			char		method = DatumGetChar(heap_getattr(tuple, a_method, desc, &isnull));
			char		model = DatumGetChar(heap_getattr(tuple, a_model, desc, &isnull));
			Datum		partkey = heap_getattr(tuple, a_key, desc, &isnull);
			Node	   *column = NULL;

			if (!isnull)
				column = stringToNode(TextDatumGetCString(partkey));
			result = FBF_CITUS_OTHER;
			if (method == 'h' && model == 's' && column != NULL &&
				IsA(column, Var) && key_attno != InvalidAttrNumber &&
				((Var *) column)->varattno == key_attno)
				result = FBF_CITUS_BY_KEY;
		}
		systable_endscan(scan);
	}
	table_close(rel, AccessShareLock);
	return result;
}

/*
 * Error: the window of the Citus table `heap` would be used.  A shell's
 * window is an empty copy that no operation ever reaches; reading or
 * changing it would answer for a table that holds nothing.
 */
void
FbfCitusRefuse(Relation heap, FbfCitusDistribution how)
{
	if (how == FBF_CITUS_BY_KEY)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("\"%s\" is distributed by Citus: its operations are remembered in its shards' windows, not in this table's",
						RelationGetRelationName(heap)),
				 errhint("Increments and fbf_counter_value() are routed to the shards; for a shard's window, call the function on the shard table on its node, or read fbf_counter_stats.")));
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

/* one int8[] Datum of n values */
static Datum
int8_array(const int64 *values, int n)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
		elems[i] = Int64GetDatum(values[i]);
	return PointerGetDatum(construct_array(elems, n, INT8OID, 8, FLOAT8PASSBYVAL,
										   TYPALIGN_DOUBLE));
}

/* hashes as int8[]: h1, h2 of each in turn */
static Datum
hashes_datum(const FbfHash *hashes, int n)
{
	int64	   *words = palloc(sizeof(int64) * 2 * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
	{
		words[2 * i] = (int64) hashes[i].h1;
		words[2 * i + 1] = (int64) hashes[i].h2;
	}
	return int8_array(words, 2 * n);
}

/* the schema fbf is installed in (PostgreSQL 16's get_extension_schema) */
static Oid
extension_schema(void)
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

/* the n elements of a one-dimensional array of a fixed-length type, or error */
static Datum *
array_elements(ArrayType *a, Oid type, int16 len, bool byval, char align,
			   const char *what, int *n)
{
	Datum	   *elems;
	bool	   *nulls;
	int			i;

	if (ARR_NDIM(a) > 1 || ARR_ELEMTYPE(a) != type)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array of %s", what,
						format_type_be(type))));
	deconstruct_array(a, type, len, byval, align, &elems, &nulls, n);
	for (i = 0; i < *n; i++)
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not contain nulls", what)));
	return elems;
}

/*
 * Apply `nops` operations on `key` of the counter whose shell is `shell`,
 * on the node of the key's shard, in the current (distributed)
 * transaction: the routed statement of the file's header, through SPI.
 * Arguments and results as FbfCounterApply's.
 */
void
FbfCitusApply(Relation shell, const char *qualname, text *key, int nops,
			  const FbfHash *hashes, const FbfHash *legacy,
			  const int64 *deltas, bool *applied, int64 *value)
{
	char	   *schema = get_namespace_name(extension_schema());
	char	   *sql;
	Oid			types[6] = {REGCLASSOID, TEXTOID, INT8ARRAYOID, INT8ARRAYOID,
	INT8ARRAYOID, BOOLOID};
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	HeapTupleHeader result;
	bool		isnull;
	Datum		d;
	Datum	   *answers;
	int			nanswers;
	int			rc;
	int			i;

	sql = psprintf("WITH touch AS (UPDATE %s SET value = value WHERE key = $2 AND shard < 0 RETURNING 1) "
				   "SELECT %s.fbf_apply_on_placement($1, $2, $3, $4, $5, $6)",
				   qualname, quote_identifier(schema));
	args[0] = ObjectIdGetDatum(RelationGetRelid(shell));
	args[1] = PointerGetDatum(key);
	args[2] = hashes_datum(hashes, nops);
	if (legacy != NULL)
		args[3] = hashes_datum(legacy, nops);
	else
	{
		args[3] = (Datum) 0;
		nulls[3] = 'n';
	}
	args[4] = int8_array(deltas, nops);
	args[5] = BoolGetDatum(value != NULL);

	SPI_connect();
	rc = SPI_execute_with_args(sql, 6, types, args, nulls, false, 0);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "fbf: the routed increment of \"%s\" failed: %s",
			 RelationGetRelationName(shell), SPI_result_code_string(rc));
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		elog(ERROR, "fbf: the routed increment of \"%s\" returned nothing",
			 RelationGetRelationName(shell));
	result = DatumGetHeapTupleHeader(d);
	d = GetAttributeByNum(result, 1, &isnull);
	answers = isnull ? NULL :
		array_elements(DatumGetArrayTypeP(d), BOOLOID, 1, true, TYPALIGN_CHAR,
					   "applied", &nanswers);
	if (answers == NULL || nanswers != nops)
		elog(ERROR, "fbf: the routed increment of \"%s\" returned %d answers for %d operations",
			 RelationGetRelationName(shell), answers ? nanswers : 0, nops);
	for (i = 0; i < nops; i++)
		applied[i] = DatumGetBool(answers[i]);
	if (value != NULL)
	{
		d = GetAttributeByNum(result, 2, &isnull);
		*value = isnull ? 0 : DatumGetInt64(d);
	}
	SPI_finish();
}

/* ----------------------------------------------------------------------
 * Applying on the placement (the node that holds the key's shard)
 * ----------------------------------------------------------------------
 */

/*
 * The shard table of `shell` that holds `key`, if its placement is on
 * this node; error if it is elsewhere (the metadata changed since the
 * statement was routed: a shard move or split committed meanwhile; the
 * transaction aborts and the client's retry is routed again).
 */
static Oid
local_shard(Oid shell, text *key)
{
	Oid			types[2] = {REGCLASSOID, TEXTOID};
	Datum		args[2] = {ObjectIdGetDatum(shell), PointerGetDatum(key)};
	bool		isnull;
	int64		shardid;
	bool		local;
	Oid			shard;
	int			rc;

	SPI_connect();
	rc = SPI_execute_with_args("SELECT s.id, pg_catalog.shard_name($1, s.id, false)::pg_catalog.regclass, "
							   "EXISTS (SELECT FROM pg_catalog.pg_dist_placement p "
							   "JOIN pg_catalog.pg_dist_local_group g USING (groupid) WHERE p.shardid = s.id) "
							   "FROM pg_catalog.get_shard_id_for_distribution_column($1, $2) AS s(id)",
							   2, types, args, NULL, true, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "fbf: finding the shard of a key of \"%s\" failed: %s",
			 get_rel_name(shell), SPI_result_code_string(rc));
	shardid = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	shard = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	local = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	SPI_finish();
	if (!local)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shard " INT64_FORMAT " of \"%s\" is not placed on this node",
						shardid, get_rel_name(shell)),
				 errdetail("Its placement moved since the increment was routed here."),
				 errhint("Retry the transaction.")));
	return shard;
}

/* `a` as n hashes (2n int8 values: h1, h2, ...); error unless it is that */
static FbfHash *
hashes_from_array(ArrayType *a, int *n)
{
	int			count;
	Datum	   *words;
	FbfHash    *hashes;
	int			i;

	words = array_elements(a, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
						   "operations", &count);
	if (count % 2 != 0)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("operations must hold two words per operation")));
	hashes = palloc(sizeof(FbfHash) * Max(count / 2, 1));
	for (i = 0; i < count / 2; i++)
	{
		hashes[i].h1 = (uint64) DatumGetInt64(words[2 * i]);
		hashes[i].h2 = (uint64) DatumGetInt64(words[2 * i + 1]);
	}
	*n = count / 2;
	return hashes;
}

/*
 * fbf_apply_on_placement(counter regclass, key text, ops bigint[],
 * legacy bigint[], deltas bigint[], want_value boolean, OUT applied
 * boolean[], OUT value bigint): the routed half of an increment on a
 * distributed counter (FbfCitusApply).  `counter` is the shell, `ops` the
 * operations' hashes (h1, h2 of each), `legacy` NULL or their identities
 * without the key, as FbfCounterApply takes them, in that order.  Applies
 * them on the key's shard, which must be placed on this node; privileges
 * and row security are those of the shard table, as for an UPDATE of it.
 */
Datum
fbf_apply_on_placement(PG_FUNCTION_ARGS)
{
	Oid			shell;
	text	   *key;
	FbfHash    *ops;
	FbfHash    *legacy = NULL;
	Datum	   *delta_elems;
	int64	   *deltas;
	int			ndeltas;
	int			nops;
	int			nlegacy;
	bool	   *applied;
	int64		value = 0;
	bool		want_value;
	TupleDesc	desc;
	Datum		out[2];
	bool		out_null[2] = {false, false};
	Datum	   *elems;
	int			i;
	Relation	rel;
	FbfCitusDistribution how;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) ||
		PG_ARGISNULL(4) || PG_ARGISNULL(5))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("only legacy of fbf_apply_on_placement may be null")));
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "fbf: fbf_apply_on_placement must return a record");
	PreventCommandIfReadOnly("idempotent_increment()");
	PreventCommandDuringRecovery("idempotent_increment()");

	shell = PG_GETARG_OID(0);
	key = PG_GETARG_TEXT_PP(1);
	ops = hashes_from_array(PG_GETARG_ARRAYTYPE_P(2), &nops);
	if (!PG_ARGISNULL(3))
	{
		legacy = hashes_from_array(PG_GETARG_ARRAYTYPE_P(3), &nlegacy);
		if (nlegacy != nops)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("legacy must have as many operations as ops")));
	}
	delta_elems = array_elements(PG_GETARG_ARRAYTYPE_P(4), INT8OID, 8,
								 FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, "deltas",
								 &ndeltas);
	if (ndeltas != nops)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("deltas must have one value per operation")));
	deltas = palloc(sizeof(int64) * Max(nops, 1));
	for (i = 0; i < nops; i++)
		deltas[i] = DatumGetInt64(delta_elems[i]);
	want_value = PG_GETARG_BOOL(5);

	/* the shell must be a counter distributed by key */
	rel = table_open(shell, AccessShareLock);
	how = FbfCounterRelGet(rel)->citus;
	if (how != FBF_CITUS_BY_KEY)
	{
		if (how == FBF_CITUS_OTHER)
			FbfCitusRefuse(rel, how);
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a counter distributed by Citus",
						RelationGetRelationName(rel))));
	}
	table_close(rel, NoLock);

	applied = palloc(sizeof(bool) * Max(nops, 1));
	FbfCounterApply(local_shard(shell, key), key, nops, ops, legacy,
					deltas, applied,
					want_value ? &value : NULL);

	elems = palloc(sizeof(Datum) * Max(nops, 1));
	for (i = 0; i < nops; i++)
		elems[i] = BoolGetDatum(applied[i]);
	out[0] = PointerGetDatum(construct_array(elems, nops, BOOLOID, 1, true,
											 TYPALIGN_CHAR));
	out[1] = Int64GetDatum(value);
	out_null[1] = !want_value;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc),
													  out, out_null)));
}
