/*-------------------------------------------------------------------------
 *
 * window_catalog.c
 *	  Finding windows in the catalog: whether a table is a counter or
 *	  dedup table and which index is its window, the windows of a
 *	  database, and the check that a window is on a plain heap table.
 *	  Nothing here reads a window's pages.
 *
 * Locks: catalog scans and syscache lookups only; a relation's lock, if
 * any, is the caller's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "commands/defrem.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "window/window_int.h"

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
	opts = (FbfWindowOptions *) FbfWindowParseOptions(isnull ? (Datum) 0 : reloptions,
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
