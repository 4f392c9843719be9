/*-------------------------------------------------------------------------
 *
 * window_am.c
 *	  The internal index access method `fbf_filter`: a counter table's
 *	  window index.  Handler, build, VACUUM; FbfWindowInit, which
 *	  defines the settings and the reloptions (window_options.c) and
 *	  registers the WAL records.  Finding window indexes is
 *	  window_catalog.c's.
 *
 * A window index is never scanned and stores no index tuples: it is a
 * relation attached to the counter table whose pages hold the counter's
 * window (window_page.h).  Being an index gives the window the table's
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
#include "window/window_format.h"
#include "window/window_int.h"
#include "window/window_xlog.h"

PG_FUNCTION_INFO_V1(fbf_filter_handler);

/* ----------------------------------------------------------------------
 * Options
 * ----------------------------------------------------------------------
 */

/* The window's settings, reloptions and WAL records; from _PG_init. */
void
FbfWindowInit(void)
{
	FbfWindowOptionsInit();
	FbfWindowKeyInit();
	FbfWindowXLogInit();
	FbfStreamXLogInit();
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
	{
		FbfDatabaseHasCounters(MyDatabaseId);
		FbfDatabaseHasCountersAtCommit();
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
		FbfWindowDrain(info->index, NULL);
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
	amroutine->amoptions = FbfWindowParseOptions;
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
