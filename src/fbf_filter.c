/*-------------------------------------------------------------------------
 *
 * fbf_filter.c
 *	  The internal index access method `fbf_filter`: storage for a counter
 *	  table's Forgetful Bloom Filter.
 *
 * An fbf_filter index is never scanned and stores no index tuples: it is
 * a relation attached to the counter table whose pages hold the filter
 * (fbf_storage.h).  Being an index gives the filter the table's lifecycle
 * for free: DROP TABLE drops it, pg_dump dumps its definition (with the
 * counter's settings as reloptions), and every change is WAL-logged.
 *
 * Rebuilds.  TRUNCATE, VACUUM FULL, CLUSTER, REINDEX and rewriting ALTER
 * TABLE give the index a new relfilenode and call ambuild.  An empty filter
 * there would let retries of recent operations apply twice, so a utility
 * hook records, before such a statement, where each fbf_filter index's
 * pages are; ambuild then copies the old pages (still on disk until the
 * rebuilding transaction commits) into the new relfilenode.  Where that is
 * impossible (a table truncated in the transaction that created it, a
 * temporary table) the filter starts empty and a NOTICE says so.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/amapi.h"
#include "access/heapam.h"
#include "access/reloptions.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/pg_index.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/vacuum.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "optimizer/cost.h"
#include "storage/bufmgr.h"
#include "tcop/utility.h"
#include "access/relation.h"
#include "catalog/namespace.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/selfuncs.h"
#include "utils/syscache.h"

#include "fbf.h"
#include "fbf_storage.h"

PG_FUNCTION_INFO_V1(fbf_filter_handler);

static relopt_kind fbf_relopt_kind;

/* ----------------------------------------------------------------------
 * Options
 * ----------------------------------------------------------------------
 */

void
FbfFilterAmInit(void)
{
	fbf_relopt_kind = add_reloption_kind();
	add_int_reloption(fbf_relopt_kind, "retention_ms",
					  "How long operations are remembered, in milliseconds",
					  300000, 1000, INT_MAX, AccessExclusiveLock);
	add_real_reloption(fbf_relopt_kind, "target_fpp",
					   "Target false-positive probability",
					   0.001, 1e-9, 0.5, AccessExclusiveLock);
	add_real_reloption(fbf_relopt_kind, "expected_rate",
					   "Expected operations per second, for the initial size",
					   1000, 0, 1e9, AccessExclusiveLock);
	add_int_reloption(fbf_relopt_kind, "shards",
					  "Rows per key over which increments are spread",
					  16, 1, 1024, AccessExclusiveLock);
	add_int_reloption(fbf_relopt_kind, "nbits",
					  "Explicit shape: bits per filter (0 to plan from the workload)",
					  0, 0, INT_MAX, AccessExclusiveLock);
	add_int_reloption(fbf_relopt_kind, "nhashes",
					  "Explicit shape: hash functions",
					  0, 0, FBF_MAX_HASHES, AccessExclusiveLock);
	add_int_reloption(fbf_relopt_kind, "npast",
					  "Explicit shape: past filters",
					  0, 0, FBF_MAX_FILTERS - 2, AccessExclusiveLock);
}

static bytea *
fbf_filter_options(Datum reloptions, bool validate)
{
	static const relopt_parse_elt tab[] = {
		{"retention_ms", RELOPT_TYPE_INT, offsetof(FbfFilterOptions, retention_ms)},
		{"target_fpp", RELOPT_TYPE_REAL, offsetof(FbfFilterOptions, target_fpp)},
		{"expected_rate", RELOPT_TYPE_REAL, offsetof(FbfFilterOptions, expected_rate)},
		{"shards", RELOPT_TYPE_INT, offsetof(FbfFilterOptions, shards)},
		{"nbits", RELOPT_TYPE_INT, offsetof(FbfFilterOptions, nbits)},
		{"nhashes", RELOPT_TYPE_INT, offsetof(FbfFilterOptions, nhashes)},
		{"npast", RELOPT_TYPE_INT, offsetof(FbfFilterOptions, npast)},
	};

	return (bytea *) build_reloptions(reloptions, validate, fbf_relopt_kind,
									  sizeof(FbfFilterOptions), tab,
									  lengthof(tab));
}

/* the index's options, or the defaults if it has none */
FbfFilterOptions *
FbfGetOptions(Relation index)
{
	if (index->rd_options)
		return (FbfFilterOptions *) index->rd_options;
	return (FbfFilterOptions *) fbf_filter_options((Datum) 0, false);
}

/*
 * Is heap a counter table?  It is if it has a valid fbf_filter index;
 * *index_oid gets that index.
 */
bool
FbfIsCounterTable(Relation heap, Oid *index_oid)
{
	Oid			amoid = get_index_am_oid("fbf_filter", true);
	List	   *indexes;
	ListCell   *lc;
	bool		found = false;

	if (!OidIsValid(amoid))
		return false;
	indexes = RelationGetIndexList(heap);
	foreach(lc, indexes)
	{
		Oid			oid = lfirst_oid(lc);
		HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(oid));

		if (HeapTupleIsValid(tup))
		{
			if (((Form_pg_class) GETSTRUCT(tup))->relam == amoid &&
				get_index_isvalid(oid))
			{
				*index_oid = oid;
				found = true;
			}
			ReleaseSysCache(tup);
		}
		if (found)
			break;
	}
	list_free(indexes);
	return found;
}

/* ----------------------------------------------------------------------
 * Carrying the filter over rebuilds
 * ----------------------------------------------------------------------
 */

typedef struct FbfRebuildSource
{
	Oid			heapoid;		/* the counter table */
	RelFileNode node;			/* where its filter's pages are */
	char		persistence;
} FbfRebuildSource;

static ProcessUtility_hook_type prev_ProcessUtility = NULL;
static List *rebuild_sources = NIL;	/* in TopMemoryContext */

/*
 * OIDs of every fbf_filter index of this database (every counter table's
 * filter), in CurrentMemoryContext; NIL if the extension is not installed.
 */
List *
FbfFilterIndexes(void)
{
	Oid			amoid = get_index_am_oid("fbf_filter", true);
	List	   *result = NIL;
	Relation	pg_class;
	TableScanDesc scan;
	HeapTuple	tup;

	if (!OidIsValid(amoid))
		return NIL;
	pg_class = table_open(RelationRelationId, AccessShareLock);
	scan = table_beginscan_catalog(pg_class, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_class form = (Form_pg_class) GETSTRUCT(tup);

		if (form->relam == amoid && form->relkind == RELKIND_INDEX)
			result = lappend_oid(result, form->oid);
	}
	table_endscan(scan);
	table_close(pg_class, AccessShareLock);
	return result;
}

/* Record where every fbf_filter index of this database keeps its pages. */
static void
remember_filters(void)
{
	List	   *indexes = FbfFilterIndexes();
	ListCell   *lc;

	foreach(lc, indexes)
	{
		Oid			indexoid = lfirst_oid(lc);
		HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(indexoid));
		Form_pg_class form;
		FbfRebuildSource *src;

		if (!HeapTupleIsValid(tup))
			continue;
		form = (Form_pg_class) GETSTRUCT(tup);
		src = MemoryContextAlloc(TopMemoryContext, sizeof(FbfRebuildSource));
		src->heapoid = IndexGetRelation(indexoid, false);
		src->node.spcNode = OidIsValid(form->reltablespace) ?
			form->reltablespace : MyDatabaseTableSpace;
		src->node.dbNode = MyDatabaseId;
		src->node.relNode = form->relfilenode;
		src->persistence = form->relpersistence;
		ReleaseSysCache(tup);
		{
			MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

			rebuild_sources = lappend(rebuild_sources, src);
			MemoryContextSwitchTo(old);
		}
	}
	list_free(indexes);
}

static void
forget_filters(void)
{
	list_free_deep(rebuild_sources);
	rebuild_sources = NIL;
}

/*
 * Refuse, before anything is created, the statements that would build an
 * fbf_filter index concurrently: the build would fail half-way and leave an
 * invalid index behind.  Filters cannot be built concurrently because
 * increments keep changing the old one until the swap.
 */
static void
refuse_concurrent_builds(Node *stmt)
{
	Oid			amoid = get_index_am_oid("fbf_filter", true);
	bool		refuse = false;

	if (!OidIsValid(amoid))
		return;
	if (IsA(stmt, IndexStmt))
	{
		IndexStmt  *is = (IndexStmt *) stmt;

		refuse = is->concurrent && is->accessMethod &&
			strcmp(is->accessMethod, "fbf_filter") == 0;
	}
	else if (IsA(stmt, ReindexStmt))
	{
		ReindexStmt *rs = (ReindexStmt *) stmt;
		ListCell   *lc;
		bool		concurrent = false;

		foreach(lc, rs->params)
		{
			DefElem    *opt = (DefElem *) lfirst(lc);

			if (strcmp(opt->defname, "concurrently") == 0)
				concurrent = defGetBoolean(opt);
		}
		if (!concurrent)
			return;
		if (rs->kind == REINDEX_OBJECT_INDEX || rs->kind == REINDEX_OBJECT_TABLE)
		{
			Oid			relid = RangeVarGetRelid(rs->relation, NoLock, true);
			Oid			indexoid;

			if (OidIsValid(relid) && rs->kind == REINDEX_OBJECT_INDEX)
			{
				HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));

				if (HeapTupleIsValid(tup))
				{
					refuse = ((Form_pg_class) GETSTRUCT(tup))->relam == amoid;
					ReleaseSysCache(tup);
				}
			}
			else if (OidIsValid(relid))
			{
				Relation	rel = relation_open(relid, AccessShareLock);

				refuse = FbfIsCounterTable(rel, &indexoid);
				relation_close(rel, AccessShareLock);
			}
		}
		else
		{
			/* a schema or the database: refuse if any counter table exists */
			List	   *outer = rebuild_sources;

			rebuild_sources = NIL;
			remember_filters();
			refuse = rebuild_sources != NIL;
			forget_filters();
			rebuild_sources = outer;
		}
	}
	if (refuse)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("counter table filters cannot be rebuilt concurrently"),
				 errhint("Reindex counter tables without CONCURRENTLY: it carries their filters over.")));
}

static bool
rebuilds_indexes(Node *stmt)
{
	return IsA(stmt, TruncateStmt) || IsA(stmt, VacuumStmt) ||
		IsA(stmt, ClusterStmt) || IsA(stmt, ReindexStmt) ||
		IsA(stmt, AlterTableStmt);
}

/*
 * Before a statement that may rebuild indexes (at any nesting depth: a DO
 * block or procedure may run one), record where every fbf_filter index's
 * pages are, for fbf_filter_build to carry them over; the outer
 * statement's record is restored afterwards.
 */
static void
fbf_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
				   bool readOnlyTree, ProcessUtilityContext context,
				   ParamListInfo params, QueryEnvironment *queryEnv,
				   DestReceiver *dest, QueryCompletion *qc)
{
	bool		track = rebuilds_indexes(pstmt->utilityStmt) && IsTransactionState();
	List	   *outer = rebuild_sources;

	if (IsTransactionState())
		refuse_concurrent_builds(pstmt->utilityStmt);
	if (track)
	{
		rebuild_sources = NIL;
		remember_filters();
	}
	PG_TRY();
	{
		if (prev_ProcessUtility)
			prev_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
									params, queryEnv, dest, qc);
	}
	PG_FINALLY();
	{
		if (track)
		{
			forget_filters();
			rebuild_sources = outer;
		}
	}
	PG_END_TRY();
}

void
FbfFilterUtilityInit(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = fbf_ProcessUtility;
}

/*
 * Where the counter table's filter pages were before the running rebuild,
 * if known.  By table, not index: ALTER TABLE ... TYPE rebuilds the index
 * under a new OID.
 */
static FbfRebuildSource *
rebuild_source(Relation heap)
{
	ListCell   *lc;

	foreach(lc, rebuild_sources)
	{
		FbfRebuildSource *src = lfirst(lc);

		if (src->heapoid == RelationGetRelid(heap))
			return src;
	}
	return NULL;
}

/* ----------------------------------------------------------------------
 * Access method callbacks
 * ----------------------------------------------------------------------
 */

/* counter tables have (key text, shard int4, value int8) */
static void
check_counter_columns(Relation heap)
{
	static const struct
	{
		const char *name;
		Oid			type;
	}			columns[] = {
		{"key", TEXTOID}, {"shard", INT4OID}, {"value", INT8OID}
	};
	size_t		i;

	for (i = 0; i < lengthof(columns); i++)
	{
		AttrNumber	attno = get_attnum(RelationGetRelid(heap), columns[i].name);

		if (attno == InvalidAttrNumber ||
			get_atttype(RelationGetRelid(heap), attno) != columns[i].type)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("\"%s\" cannot be a counter table",
							RelationGetRelationName(heap)),
					 errdetail("A counter table has columns key text, shard integer and value bigint."),
					 errhint("Create counter tables with fbf_create_counter_table().")));
	}
}

static void
count_tuple(Relation index, ItemPointer tid, Datum *values, bool *isnull,
			bool tupleIsAlive, void *state)
{
	(*(double *) state) += 1;
}

static IndexBuildResult *
fbf_filter_build(Relation heap, Relation index, IndexInfo *indexInfo)
{
	IndexBuildResult *result = palloc0(sizeof(IndexBuildResult));
	FbfRebuildSource *src = rebuild_source(heap);
	double		ntuples = 0;

	if (indexInfo->ii_Concurrent)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the filter of counter table \"%s\" cannot be built concurrently",
						RelationGetRelationName(heap)),
				 errhint("Use REINDEX without CONCURRENTLY: it carries the filter over.")));
	check_counter_columns(heap);

	if (src && !RelFileNodeEquals(src->node, index->rd_node) &&
		src->persistence != RELPERSISTENCE_TEMP &&
		FbfCopyStorage(index, src->node,
					   src->persistence == RELPERSISTENCE_PERMANENT))
	{
		src->node = index->rd_node;
		elog(DEBUG1, "fbf: carried the filter of \"%s\" over a rebuild",
			 RelationGetRelationName(heap));
	}
	else
	{
		/*
		 * A rebuild whose old filter cannot be read.  If the table was
		 * created in this transaction, nothing outside it can retry yet:
		 * start empty, and say so.  Otherwise refuse rather than forget:
		 * the old pages were truncated in place (a second rebuild in one
		 * transaction) or by a rebuild that committed after this statement
		 * looked (retrying the statement works).
		 */
		if (src && heap->rd_createSubid == InvalidSubTransactionId &&
			src->persistence != RELPERSISTENCE_TEMP)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot rebuild the operation filter of counter table \"%s\" here",
							RelationGetRelationName(heap)),
					 errdetail("Its old pages are gone: the table was rebuilt earlier in this transaction, or concurrently."),
					 errhint("Commit between rebuilds of a counter table, or retry the statement.")));
		FbfInitStorage(index, MAIN_FORKNUM, FbfGetOptions(index));
		if (src)
			ereport(NOTICE,
					(errmsg("the operation filter of counter table \"%s\" was reset",
							RelationGetRelationName(heap)),
					 errdetail("Retries of operations applied within the retention may be applied again.")));
	}

	/* report the heap's size, as index_build stores it in pg_class */
	table_index_build_scan(heap, index, indexInfo, false, false, count_tuple,
						   &ntuples, NULL);
	result->heap_tuples = ntuples;
	result->index_tuples = 0;
	return result;
}

static void
fbf_filter_buildempty(Relation index)
{
	FbfInitStorage(index, INIT_FORKNUM, FbfGetOptions(index));
}

/* rows carry nothing into the filter: operations reach it directly */
static bool
fbf_filter_insert(Relation index, Datum *values, bool *isnull,
				  ItemPointer ht_ctid, Relation heapRel,
				  IndexUniqueCheck checkUnique, bool indexUnchanged,
				  IndexInfo *indexInfo)
{
	return false;
}

static IndexBulkDeleteResult *
fbf_filter_bulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
					  IndexBulkDeleteCallback callback, void *callback_state)
{
	return stats;
}

/*
 * VACUUM of the counter table: drain committed and aborted operations from
 * the pending chains, so no entry outlives the xid horizon even if the
 * worker is off.  Never during recovery (VACUUM does not run there).
 */
static IndexBulkDeleteResult *
fbf_filter_vacuumcleanup(IndexVacuumInfo *info, IndexBulkDeleteResult *stats)
{
	if (!info->analyze_only)
		FbfDrainAll(info->index);
	if (stats == NULL)
	{
		stats = palloc0(sizeof(IndexBulkDeleteResult));
		stats->num_pages = RelationGetNumberOfBlocks(info->index);
		stats->num_index_tuples = 0;
		stats->estimated_count = false;
	}
	return stats;
}

/* never a path: the AM has neither amgettuple nor amgetbitmap */
static void
fbf_filter_costestimate(PlannerInfo *root, IndexPath *path, double loop_count,
						Cost *indexStartupCost, Cost *indexTotalCost,
						Selectivity *indexSelectivity, double *indexCorrelation,
						double *indexPages)
{
	*indexStartupCost = disable_cost;
	*indexTotalCost = disable_cost;
	*indexSelectivity = 1.0;
	*indexCorrelation = 0.0;
	*indexPages = 0;
}

static bool
fbf_filter_validate(Oid opclassoid)
{
	return true;
}

static IndexScanDesc
fbf_filter_beginscan(Relation index, int nkeys, int norderbys)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("fbf_filter indexes cannot be scanned")));
	return NULL;				/* keep compiler quiet */
}

static void
fbf_filter_rescan(IndexScanDesc scan, ScanKey keys, int nkeys,
				  ScanKey orderbys, int norderbys)
{
}

static void
fbf_filter_endscan(IndexScanDesc scan)
{
}

Datum
fbf_filter_handler(PG_FUNCTION_ARGS)
{
	IndexAmRoutine *amroutine = makeNode(IndexAmRoutine);

	amroutine->amstrategies = 0;
	amroutine->amsupport = 0;
	amroutine->amoptsprocnum = 0;
	amroutine->amcanorder = false;
	amroutine->amcanorderbyop = false;
	amroutine->amcanbackward = false;
	amroutine->amcanunique = false;
	amroutine->amcanmulticol = false;
	amroutine->amoptionalkey = true;
	amroutine->amsearcharray = false;
	amroutine->amsearchnulls = false;
	amroutine->amstorage = false;
	amroutine->amclusterable = false;
	amroutine->ampredlocks = false;
	amroutine->amcanparallel = false;
	amroutine->amcaninclude = false;
	amroutine->amusemaintenanceworkmem = false;
	amroutine->amparallelvacuumoptions = VACUUM_OPTION_NO_PARALLEL;
	amroutine->amkeytype = InvalidOid;

	amroutine->ambuild = fbf_filter_build;
	amroutine->ambuildempty = fbf_filter_buildempty;
	amroutine->aminsert = fbf_filter_insert;
	amroutine->ambulkdelete = fbf_filter_bulkdelete;
	amroutine->amvacuumcleanup = fbf_filter_vacuumcleanup;
	amroutine->amcanreturn = NULL;
	amroutine->amcostestimate = fbf_filter_costestimate;
	amroutine->amoptions = fbf_filter_options;
	amroutine->amproperty = NULL;
	amroutine->ambuildphasename = NULL;
	amroutine->amvalidate = fbf_filter_validate;
	amroutine->amadjustmembers = NULL;
	amroutine->ambeginscan = fbf_filter_beginscan;
	amroutine->amrescan = fbf_filter_rescan;
	amroutine->amgettuple = NULL;
	amroutine->amgetbitmap = NULL;
	amroutine->amendscan = fbf_filter_endscan;
	amroutine->ammarkpos = NULL;
	amroutine->amrestrpos = NULL;
	amroutine->amestimateparallelscan = NULL;
	amroutine->aminitparallelscan = NULL;
	amroutine->amparallelrescan = NULL;

	PG_RETURN_POINTER(amroutine);
}
