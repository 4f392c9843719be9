/*-------------------------------------------------------------------------
 *
 * window_am.c
 *	  The internal index access method `fbf_filter`: a counter table's
 *	  window index.  Handler, reloptions, build, VACUUM, and finding the
 *	  window indexes of a database; and the window's one setting,
 *	  fbf.max_filter_size.
 *
 * A window index is never scanned and stores no index tuples: it is a
 * relation attached to the counter table whose pages hold the counter's
 * window (window.h).  Being an index gives the window the table's
 * lifecycle for free: DROP TABLE drops it, pg_dump dumps its definition
 * (with the counter's settings as reloptions), and every change is
 * WAL-logged.  Rebuilds carry the window over (window_rebuild.c).
 *
 * The SQL name `fbf_filter` predates the word "window" and stays: dumps of
 * 1.0 databases create indexes USING fbf_filter.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/amapi.h"
#include "access/heapam.h"
#include "access/reloptions.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
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
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/selfuncs.h"
#include "utils/syscache.h"

#include "registry/registry.h"
#include "window/window_int.h"
#include "window/window_xlog.h"

PG_FUNCTION_INFO_V1(fbf_filter_handler);

static relopt_kind fbf_relopt_kind;

static relopt_enum_elt_def at_capacity_values[] = {
	{"dismiss", FBF_AT_CAPACITY_DISMISS},
	{"refuse", FBF_AT_CAPACITY_REFUSE},
	{NULL}
};

static relopt_enum_elt_def kind_values[] = {
	{"counter", FBF_WINDOW_COUNTER},
	{"dedup", FBF_WINDOW_DEDUP},
	{NULL}
};

static relopt_enum_elt_def filter_values[] = {
	{"bloom", FBF_FILTER_BLOOM},
	{"cuckoo", FBF_FILTER_CUCKOO},
	{NULL}
};

int			fbf_max_filter_size_kb = 64 * 1024;
int			fbf_split_batch = 0;

/* ----------------------------------------------------------------------
 * Options
 * ----------------------------------------------------------------------
 */

/* The window's reloptions and its setting; from _PG_init. */
void
FbfWindowInit(void)
{
	DefineCustomIntVariable("fbf.max_filter_size",
							"Memory cap of one counter table's filter.",
							"Creating a larger filter fails; AIMD never grows a filter past it.",
							&fbf_max_filter_size_kb, 64 * 1024, 64, INT_MAX / 2,
							PGC_SUSET, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("fbf.split_batch",
							"Partitions one maintenance pass splits or merges before it returns (0: all).",
							"A split or merge left unfinished is continued by the next pass; operations keep working meanwhile.",
							&fbf_split_batch, 0, 0, INT_MAX,
							PGC_SUSET, 0, NULL, NULL, NULL);
	FbfWindowKeyInit();
	FbfWindowXLogInit();

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
	add_enum_reloption(fbf_relopt_kind, "at_capacity",
					   "What new operations get while the filter is at its cap and cannot meet its target",
					   at_capacity_values, FBF_AT_CAPACITY_DISMISS,
					   "Valid values are \"dismiss\" and \"refuse\".",
					   AccessExclusiveLock);
	add_enum_reloption(fbf_relopt_kind, "kind",
					   "What the window remembers: a counter table's increments or a dedup table's claims",
					   kind_values, FBF_WINDOW_COUNTER,
					   "Valid values are \"counter\" and \"dedup\".",
					   AccessExclusiveLock);
	add_enum_reloption(fbf_relopt_kind, "filter",
					   "The format of the window's partition pages: Forgetful Bloom Filter lanes or a cuckoo window",
					   filter_values, FBF_FILTER_BLOOM,
					   "Valid values are \"bloom\" and \"cuckoo\".",
					   AccessExclusiveLock);

	/*
	 * Read by every increment from the relcache entry: a lock that lets
	 * increments run on is enough (transactions already running may apply
	 * a few more operations as the old value said).
	 */
	add_bool_reloption(fbf_relopt_kind, "track_mismatch",
					   "Count retries whose delta differs from the applied operation's (costs a second window entry per applied operation)",
					   false, ShareUpdateExclusiveLock);
}

static bytea *
fbf_filter_options(Datum reloptions, bool validate)
{
	static const relopt_parse_elt tab[] = {
		{"retention_ms", RELOPT_TYPE_INT, offsetof(FbfWindowOptions, retention_ms)},
		{"target_fpp", RELOPT_TYPE_REAL, offsetof(FbfWindowOptions, target_fpp)},
		{"expected_rate", RELOPT_TYPE_REAL, offsetof(FbfWindowOptions, expected_rate)},
		{"shards", RELOPT_TYPE_INT, offsetof(FbfWindowOptions, shards)},
		{"nbits", RELOPT_TYPE_INT, offsetof(FbfWindowOptions, nbits)},
		{"nhashes", RELOPT_TYPE_INT, offsetof(FbfWindowOptions, nhashes)},
		{"npast", RELOPT_TYPE_INT, offsetof(FbfWindowOptions, npast)},
		{"at_capacity", RELOPT_TYPE_ENUM, offsetof(FbfWindowOptions, at_capacity)},
		{"kind", RELOPT_TYPE_ENUM, offsetof(FbfWindowOptions, kind)},
		{"filter", RELOPT_TYPE_ENUM, offsetof(FbfWindowOptions, filter)},
		{"track_mismatch", RELOPT_TYPE_BOOL, offsetof(FbfWindowOptions, track_mismatch)},
	};
	FbfWindowOptions *opts;

	opts = (FbfWindowOptions *) build_reloptions(reloptions, validate,
												 fbf_relopt_kind,
												 sizeof(FbfWindowOptions),
												 tab, lengthof(tab));

	/* a claim has no delta: there is nothing to compare a retry's with */
	if (validate && opts != NULL && opts->kind == FBF_WINDOW_DEDUP &&
		opts->track_mismatch)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("track_mismatch cannot be set on a dedup table's window"),
				 errdetail("Claims have no delta to compare."),
				 errhint("Set track_mismatch on the window of a counter table.")));

	return (bytea *) opts;
}

/* the index's options, or the defaults if it has none */
FbfWindowOptions *
FbfWindowGetOptions(Relation index)
{
	if (index->rd_options)
		return (FbfWindowOptions *) index->rd_options;
	return (FbfWindowOptions *) fbf_filter_options((Datum) 0, false);
}

/*
 * Is heap a counter or dedup table (FbfWindowIndexKind tells which)?  It
 * is if it has a valid fbf_filter index; *index_oid gets that index.
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

/*
 * The kind of a window index (FBF_WINDOW_*), from its reloptions in the
 * catalog, without opening it; -1 if there is no such relation (dropped).
 */
int
FbfWindowIndexKind(Oid index_oid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(index_oid));
	Datum		reloptions;
	bool		isnull;
	FbfWindowOptions *opts;
	int			kind;

	if (!HeapTupleIsValid(tup))
		return -1;
	reloptions = SysCacheGetAttr(RELOID, tup, Anum_pg_class_reloptions, &isnull);
	opts = (FbfWindowOptions *) fbf_filter_options(isnull ? (Datum) 0 : reloptions,
												   false);
	kind = opts->kind;
	pfree(opts);
	ReleaseSysCache(tup);
	return kind;
}

/*
 * May the window index of table heapoid be read as a counter's or dedup
 * table's?  Not if the table is not a plain table (a materialized view an
 * older version let carry one; FbfWindowCheckTable refuses new ones), or
 * was dropped.  From the catalog, without a lock.
 */
bool
FbfWindowTableUsable(Oid heapoid)
{
	return get_rel_relkind(heapoid) == RELKIND_RELATION;
}

/*
 * OIDs of every window index of this database (one per counter table), in
 * CurrentMemoryContext; NIL if the extension is not installed.  The windows
 * of other sessions' temporary tables (also those a crashed session left
 * until they are dropped) are not listed: no one but their session can
 * read them, and the statistics, saves and the worker skip them.  Callers
 * that open the table should still check that it is a plain table
 * (FbfWindowTableUsable): an older version built windows on others.
 */
List *
FbfWindowIndexes(void)
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

		/* another session's temporary table cannot be opened here */
		if (form->relam == amoid && form->relkind == RELKIND_INDEX &&
			!(form->relpersistence == RELPERSISTENCE_TEMP &&
			  isOtherTempNamespace(form->relnamespace)))
			result = lappend_oid(result, form->oid);
	}
	table_endscan(scan);
	table_close(pg_class, AccessShareLock);
	return result;
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

/*
 * A window belongs on a plain heap table only: the counters read and write
 * the table's rows in place, and every reader of windows (statistics,
 * snapshots, saves, the worker) expects one.  A materialized view, a
 * partitioned table (whose index is never built: the utility hook calls
 * this for CREATE INDEX on one, window_rebuild.c), or a table of another
 * access method is refused with ERRCODE_WRONG_OBJECT_TYPE.  From the
 * catalog; relid's lock, if any, is the caller's.
 */
void
FbfWindowCheckTable(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Form_pg_class form;
	bool		ok;

	if (!HeapTupleIsValid(tup))
		return;					/* dropped: PostgreSQL reports it */
	form = (Form_pg_class) GETSTRUCT(tup);
	ok = form->relkind == RELKIND_RELATION && form->relam == HEAP_TABLE_AM_OID;
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("cannot create an fbf_filter index on \"%s\"",
						NameStr(form->relname)),
				 errdetail("Counter and dedup tables are plain tables: not materialized views, partitioned tables or tables of another access method."),
				 errhint("Create counter tables with fbf_create_counter_table() and dedup tables with fbf_create_dedup().")));
	ReleaseSysCache(tup);
}

static IndexBuildResult *
fbf_filter_build(Relation heap, Relation index, IndexInfo *indexInfo)
{
	IndexBuildResult *result = palloc0(sizeof(IndexBuildResult));
	double		ntuples = 0;

	FbfWindowCheckTable(RelationGetRelid(heap));
	if (indexInfo->ii_Concurrent)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the filter of counter table \"%s\" cannot be built concurrently",
						RelationGetRelationName(heap)),
				 errhint("Use REINDEX without CONCURRENTLY: it carries the filter over.")));
	/* a dedup table's columns do not matter: its claims never reach them */
	if (FbfWindowGetOptions(index)->kind == FBF_WINDOW_COUNTER)
		check_counter_columns(heap);
	FbfWindowCheckIndexCleanup(heap);

	/* a new counter: the launcher should visit this database from now on */
	if (FbfWindowBuildPages(heap, index))
		FbfDatabaseHasCounters(MyDatabaseId);

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
	FbfWindowInitStorage(index, INIT_FORKNUM, FbfWindowGetOptions(index));
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
 * worker is off.  Entries waiting for the window to grow keep waiting
 * while they are young (FbfChainDrain): an autovacuum in a burst must not
 * pour them into pages too small for them.  Never during recovery (VACUUM
 * does not run there).
 */
static IndexBulkDeleteResult *
fbf_filter_vacuumcleanup(IndexVacuumInfo *info, IndexBulkDeleteResult *stats)
{
	if (!info->analyze_only)
		FbfWindowDrain(info->index, true);
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
