/*-------------------------------------------------------------------------
 *
 * window_rebuild.c
 *	  Carrying a counter's window over rebuilds of its table.
 *
 * TRUNCATE, VACUUM FULL, CLUSTER, REINDEX and rewriting ALTER TABLE give
 * the window index a new relfilenode and call its ambuild.  An empty window
 * there would let retries of recent operations apply twice, so a utility
 * hook records, before such a statement, where each window index's pages
 * are; ambuild (FbfWindowBuildPages) then copies the old pages, still on
 * disk until the rebuilding transaction commits, into the new relfilenode.
 * Where that is impossible (a table truncated in the transaction that
 * created it, a temporary table) the window starts empty and a NOTICE says
 * so; where the old pages are gone for another reason, the rebuild fails.
 *
 * CONCURRENTLY builds are refused before anything is created: increments
 * keep changing the old window until the swap.  So is an ALTER INDEX that
 * would change a window's filter, the format of its pages.
 *
 * The hook runs before PostgreSQL looks up the statement's relations, and
 * must not change what PostgreSQL says or waits for: a role PostgreSQL
 * refuses gets PostgreSQL's error, as fast as without fbf, and learns
 * nothing of counters; a relation dropped meanwhile gets PostgreSQL's own
 * error.  So a check either waits for PostgreSQL's lookup (a concurrent
 * build is refused when its index is created, from the object access hook,
 * in the transaction that would create it), or looks the relation up
 * without a lock, checks the role's rights as the statement will, and
 * locks only after that (RangeVarGetRelidExtended with a callback, which
 * also retries if the relation goes away while it waits).
 *
 * A table has one window.  A second fbf_filter index on a table that has
 * one is refused (FbfWindowBuildPages; the hook locks the table against a
 * concurrent CREATE INDEX first), and so is dropping a table's window
 * while the table stays (DROP INDEX, ALTER TABLE ... DROP COLUMN of its
 * column): the counter would forget what it applied, and a new window
 * would start empty, so retries would apply again.  DROP TABLE drops the
 * window with its table; DROP EXTENSION ... CASCADE (dropping the access
 * method) drops every window, as its owner asked.
 *
 * State: rebuild_sources, in TopMemoryContext, for the utility statement
 * running in this backend (saved and restored around nested statements).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/catalog.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_namespace.h"
#include "commands/defrem.h"
#include "commands/tablecmds.h"
#include "commands/vacuum.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "window/window_int.h"

typedef struct FbfRebuildSource
{
	Oid			heapoid;		/* the counter table */
	FbfFileLocator node;		/* where its window's pages are */
	char		persistence;
} FbfRebuildSource;

static ProcessUtility_hook_type prev_ProcessUtility = NULL;
static object_access_hook_type prev_object_access_hook = NULL;
static List *rebuild_sources = NIL;	/* in TopMemoryContext */

/* the utility statement running in this backend builds indexes concurrently */
static bool concurrent_build = false;

/* Record where every window index of this database keeps its pages. */
static void
remember_filters(void)
{
	List	   *indexes = FbfWindowIndexes();
	ListCell   *lc;

	foreach(lc, indexes)
	{
		Oid			indexoid = lfirst_oid(lc);
		HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(indexoid));
		Oid			heapoid = IndexGetRelation(indexoid, true);
		Form_pg_class form;
		FbfRebuildSource *src;

		/* dropped since the unlocked catalog scan: nothing to carry over */
		if (!HeapTupleIsValid(tup) || !OidIsValid(heapoid))
		{
			if (HeapTupleIsValid(tup))
				ReleaseSysCache(tup);
			continue;
		}
		form = (Form_pg_class) GETSTRUCT(tup);
		src = MemoryContextAlloc(TopMemoryContext, sizeof(FbfRebuildSource));
		src->heapoid = heapoid;
		src->node = FbfMakeFileLocator(OidIsValid(form->reltablespace) ?
									   form->reltablespace : MyDatabaseTableSpace,
									   MyDatabaseId, form->relfilenode);
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
 * Does the role own relation relid (or, with `or_schema`, its schema, as
 * DROP allows)?  Read from the syscache, without a lock: false if the
 * relation is gone (the statement then reports it), never an error.
 * Superusers own everything (has_privs_of_role).
 */
static bool
owns_relation(Oid relid, bool or_schema)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;
	Oid			nspoid;
	bool		owns;

	if (!HeapTupleIsValid(tup))
		return false;
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	nspoid = ((Form_pg_class) GETSTRUCT(tup))->relnamespace;
	ReleaseSysCache(tup);
	owns = has_privs_of_role(GetUserId(), owner);
	if (!owns && or_schema)
	{
		tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nspoid));
		if (HeapTupleIsValid(tup))
		{
			owns = has_privs_of_role(GetUserId(),
									 ((Form_pg_namespace) GETSTRUCT(tup))->nspowner);
			ReleaseSysCache(tup);
		}
	}
	return owns;
}

/*
 * RangeVarGetRelidExtended callback for the relation an ALTER TABLE or
 * ALTER INDEX names: the checks AlterTable's own lookup makes
 * (tablecmds.c, RangeVarCallbackForAlterRelation, which is not exported)
 * before any lock: the role must own it, and it must not be a system
 * catalog, or PostgreSQL's own error is raised.  *(bool *) arg says
 * whether the statement's form fits the relation's kind; where it does
 * not, the statement reports it and the hook has nothing to check.
 */
static void
callback_alter_target(const RangeVar *rv, Oid relid, Oid oldrelid, void *arg)
{
	HeapTuple	tup;
	Form_pg_class form;
	bool	   *fits = (bool *) arg;

	*fits = false;
	if (!OidIsValid(relid))
		return;
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		return;					/* concurrently dropped */
	form = (Form_pg_class) GETSTRUCT(tup);
	if (!has_privs_of_role(GetUserId(), form->relowner))
		aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(form->relkind),
					   rv->relname);
	if (!allowSystemTableMods && IsSystemClass(relid, form))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied: \"%s\" is a system catalog",
						rv->relname)));
	*fits = form->relkind != RELKIND_COMPOSITE_TYPE;
	ReleaseSysCache(tup);
}

/*
 * The relation ALTER TABLE/INDEX statement `as` names, looked up the way
 * the statement will look it up, and locked in `lockmode` (or NoLock) only
 * once the role is known to own it.  InvalidOid if it does not exist (also
 * if it went away while the lock was awaited) or the statement's form does
 * not fit it: the statement then reports that itself.
 */
static Oid
alter_target(AlterTableStmt *as, LOCKMODE lockmode)
{
	bool		fits = false;
	Oid			relid;

	relid = RangeVarGetRelidExtended(as->relation, lockmode, RVR_MISSING_OK,
									 callback_alter_target, &fits);
	if (OidIsValid(relid) && !fits)
	{
		if (lockmode != NoLock)
			UnlockRelationOid(relid, lockmode);
		return InvalidOid;
	}
	return relid;
}

/* does REINDEX statement `rs` say CONCURRENTLY? */
static bool
reindex_concurrently(ReindexStmt *rs)
{
	ListCell   *lc;
	bool		concurrent = false;

	foreach(lc, rs->params)
	{
		DefElem    *opt = (DefElem *) lfirst(lc);

		if (strcmp(opt->defname, "concurrently") == 0)
			concurrent = defGetBoolean(opt);
	}
	return concurrent;
}

/* does the statement build indexes concurrently? */
static bool
builds_concurrently(Node *stmt)
{
	if (IsA(stmt, IndexStmt))
		return ((IndexStmt *) stmt)->concurrent;
	if (IsA(stmt, ReindexStmt))
		return reindex_concurrently((ReindexStmt *) stmt);
	return false;
}

fbf_noreturn static void
refuse_concurrent_build(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("counter table filters cannot be rebuilt concurrently"),
			 errhint("Reindex counter tables without CONCURRENTLY: it carries their filters over.")));
	pg_unreachable();
}

/*
 * An fbf_filter index cannot be built concurrently: the build would fail
 * half-way and leave an invalid index behind, as increments keep changing
 * the old window until the swap.  CREATE INDEX CONCURRENTLY and REINDEX
 * ... CONCURRENTLY of an index, a table, or a schema or database are
 * refused when the new index is created (fbf_rebuild_object_access), in
 * the first transaction of the build: PostgreSQL has looked the relations
 * up, locked them and checked the role's rights by then, and nothing has
 * been committed yet.
 *
 * A REINDEX of a schema or database, which commits table by table, is
 * refused here before any table is touched if a counter table is in it
 * (a window index is in its table's schema) and the role owns the schema
 * or database, as the statement will check; a role that does not gets
 * PostgreSQL's answer (and, if it may reindex after all, the refusal at
 * the counter's index).  (SYSTEM cannot be reindexed concurrently.)
 */
static void
refuse_concurrent_reindex(Node *stmt)
{
	ReindexStmt *rs;
	Oid			nspoid = InvalidOid;
	Oid			owner;
	HeapTuple	tup;
	List	   *indexes;
	ListCell   *lc;
	bool		refuse = false;

	if (!IsA(stmt, ReindexStmt))
		return;
	rs = (ReindexStmt *) stmt;
	if ((rs->kind != REINDEX_OBJECT_SCHEMA && rs->kind != REINDEX_OBJECT_DATABASE) ||
		!reindex_concurrently(rs) ||
		!OidIsValid(get_index_am_oid("fbf_filter", true)))
		return;
	if (rs->kind == REINDEX_OBJECT_SCHEMA)
	{
		nspoid = get_namespace_oid(rs->name, true);
		if (!OidIsValid(nspoid))
			return;				/* PostgreSQL reports it */
		tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nspoid));
		if (!HeapTupleIsValid(tup))
			return;
		owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
		ReleaseSysCache(tup);
		if (!has_privs_of_role(GetUserId(), owner))
			return;
	}
	else if (!FbfDatabaseOwnercheck(MyDatabaseId, GetUserId()))
		return;
	indexes = FbfWindowIndexes();
	foreach(lc, indexes)
	{
		if (!OidIsValid(nspoid) || get_rel_namespace(lfirst_oid(lc)) == nspoid)
		{
			refuse = true;
			break;
		}
	}
	list_free(indexes);
	if (refuse)
		refuse_concurrent_build();
}

/*
 * The object access hook: refuse an fbf_filter index created while this
 * backend's utility statement builds concurrently (see
 * refuse_concurrent_reindex).  The new index is not yet visible in the
 * catalogs, but heap_create has made its relcache entry.
 */
static void
fbf_rebuild_object_access(ObjectAccessType access, Oid classId, Oid objectId,
						  int subId, void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);
	if (access == OAT_POST_CREATE && classId == RelationRelationId &&
		subId == 0 && concurrent_build)
	{
		Relation	rel = RelationIdGetRelation(objectId);
		bool		window;

		if (!RelationIsValid(rel))
			return;
		window = (rel->rd_rel->relkind == RELKIND_INDEX ||
				  rel->rd_rel->relkind == RELKIND_PARTITIONED_INDEX) &&
			rel->rd_rel->relam == get_index_am_oid("fbf_filter", true);
		RelationClose(rel);
		if (window)
			refuse_concurrent_build();
	}
}

/*
 * Would this VACUUM process the table?  Its owner's, or the database's
 * (vacuum_is_permitted_for_relation); from PostgreSQL 17 on, whoever has
 * MAINTAIN on it.  Never an error: the table may have been dropped since
 * it was looked up.
 */
static bool
may_vacuum(Oid relid)
{
#if PG_VERSION_NUM >= 170000
	bool		is_missing = false;

	if (pg_class_aclcheck_ext(relid, GetUserId(), ACL_MAINTAIN,
							  &is_missing) == ACLCHECK_OK && !is_missing)
		return true;
#endif
	return owns_relation(relid, false) ||
		FbfDatabaseOwnercheck(MyDatabaseId, GetUserId());
}

/*
 * VACUUM with INDEX_CLEANUP OFF skips amvacuumcleanup,
 * which drains the windows of the tables it vacuums, yet may advance their
 * relfrozenxid and so let the commit log be truncated past pending entries
 * (window_pending.c, FbfEntryStatusOf).  So before any VACUUM, drain the
 * windows of the counter tables it names, or of every counter table of the
 * database if it names none.  Counters whose table is locked are skipped:
 * the VACUUM would wait for them, and their amvacuumcleanup drains.  Only
 * tables this VACUUM would process are touched (their owner's, or the
 * database owner's), and privileges are checked before any lock.  (An
 * autovacuum in failsafe mode skips index cleanup too and passes no hook:
 * there the worker's drains and the operations' age-based drains are what
 * keep entries ahead of the commit log; docs/design.md.)
 *
 * The drain may put entries off, as amvacuumcleanup's does: an entry left
 * waiting for bits was judged committed, a fate that a truncated commit
 * log still gives it (FbfEntryStatusOf), and a VACUUM during a flood must
 * not pour the flood's backlog into pages that cannot take it.
 */
static void
drain_before_vacuum(Node *stmt)
{
	VacuumStmt *vs;
	List	   *indexes = NIL;
	ListCell   *lc;

	if (!IsA(stmt, VacuumStmt) || !((VacuumStmt *) stmt)->is_vacuumcmd ||
		RecoveryInProgress())
		return;
	vs = (VacuumStmt *) stmt;
	if (vs->rels == NIL)
		indexes = FbfWindowIndexes();
	foreach(lc, vs->rels)
	{
		VacuumRelation *vr = lfirst_node(VacuumRelation, lc);
		Oid			relid = vr->relation ?
			RangeVarGetRelid(vr->relation, NoLock, true) : vr->oid;
		Oid			indexoid;
		Relation	heap;

		if (!OidIsValid(relid) || !may_vacuum(relid) ||
			!ConditionalLockRelationOid(relid, AccessShareLock))
			continue;
		heap = try_relation_open(relid, NoLock);
		if (heap != NULL)
		{
			if (heap->rd_rel->relkind == RELKIND_RELATION &&
				FbfIsCounterTable(heap, &indexoid))
				indexes = lappend_oid(indexes, indexoid);
			relation_close(heap, NoLock);
		}
		UnlockRelationOid(relid, AccessShareLock);
	}
	foreach(lc, indexes)
	{
		Oid			indexoid = lfirst_oid(lc);
		Oid			heapoid = IndexGetRelation(indexoid, true);
		Relation	index;

		if (!OidIsValid(heapoid) || !may_vacuum(heapoid) ||
			!ConditionalLockRelationOid(heapoid, RowExclusiveLock))
			continue;
		index = try_relation_open(indexoid, RowExclusiveLock);
		if (index != NULL)
		{
			FbfWindowDrain(index, NULL);
			relation_close(index, RowExclusiveLock);
		}
		UnlockRelationOid(heapoid, RowExclusiveLock);
	}
}

/*
 * vacuum_index_cleanup = off would make every VACUUM of a counter table
 * skip the drain of its window: refuse it (a VACUUM (INDEX_CLEANUP OFF)
 * statement is fine: drain_before_vacuum drains first).
 */
static bool
turns_index_cleanup_off(List *options)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (def->defnamespace == NULL &&
			strcmp(def->defname, "vacuum_index_cleanup") == 0 &&
			def->arg != NULL)
		{
			char	   *value = defGetString(def);

			if (pg_strcasecmp(value, "off") == 0 ||
				pg_strcasecmp(value, "false") == 0 ||
				pg_strcasecmp(value, "no") == 0 ||
				strcmp(value, "0") == 0)
				return true;
		}
	}
	return false;
}

fbf_noreturn static void
refuse_index_cleanup_off(Relation heap)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("counter table \"%s\" cannot have vacuum_index_cleanup off",
					RelationGetRelationName(heap)),
			 errdetail("VACUUM drains the counter's in-flight operations during index cleanup."),
			 errhint("Use VACUUM (INDEX_CLEANUP OFF) for one VACUUM instead.")));
	pg_unreachable();
}

/* Error out if the counter table has vacuum_index_cleanup = off (ambuild). */
void
FbfWindowCheckIndexCleanup(Relation heap)
{
	StdRdOptions *opts = (StdRdOptions *) heap->rd_options;

	if (opts != NULL &&
		opts->vacuum_index_cleanup == STDRD_OPTION_VACUUM_INDEX_CLEANUP_OFF)
		refuse_index_cleanup_off(heap);
}

static void
refuse_no_index_cleanup(Node *stmt)
{
	AlterTableStmt *as;
	ListCell   *lc;
	Oid			relid;
	Oid			indexoid;
	Relation	heap;
	bool		counter;

	if (!IsA(stmt, AlterTableStmt))
		return;
	as = (AlterTableStmt *) stmt;
	foreach(lc, as->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

		if ((cmd->subtype == AT_SetRelOptions ||
			 cmd->subtype == AT_ReplaceRelOptions) &&
			turns_index_cleanup_off((List *) cmd->def))
			break;
	}
	if (lc == NULL)
		return;
	/* ownership first, as AlterTable checks it; then the lock */
	relid = alter_target(as, AccessShareLock);
	if (!OidIsValid(relid))
		return;
	heap = relation_open(relid, NoLock);
	counter = heap->rd_rel->relkind == RELKIND_RELATION &&
		FbfIsCounterTable(heap, &indexoid);
	if (counter)
		refuse_index_cleanup_off(heap);
	relation_close(heap, AccessShareLock);
}

/*
 * A window's filter (bloom or cuckoo) is the format of its pages, and its
 * kind (counter or dedup) what its operations are, both chosen when its
 * table is created: ALTER INDEX may not set or reset them, or pg_dump
 * would carry a filter the pages do not have, and a counter's operations
 * would be taken for claims (or the reverse).
 */
static void
refuse_filter_change(Node *stmt)
{
	AlterTableStmt *as;
	ListCell   *lc;
	Oid			relid;
	Oid			amoid;
	HeapTuple	tup;
	bool		window;
	const char *named = NULL;

	if (!IsA(stmt, AlterTableStmt))
		return;
	as = (AlterTableStmt *) stmt;
	foreach(lc, as->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);
		ListCell   *o;

		if (cmd->subtype != AT_SetRelOptions && cmd->subtype != AT_ResetRelOptions &&
			cmd->subtype != AT_ReplaceRelOptions)
			continue;
		foreach(o, (List *) cmd->def)
		{
			DefElem    *def = (DefElem *) lfirst(o);

			if (def->defnamespace == NULL &&
				(strcmp(def->defname, "filter") == 0 ||
				 strcmp(def->defname, "kind") == 0))
				named = def->defname;
		}
		if (named != NULL)
			break;
	}
	if (named == NULL)
		return;
	amoid = get_index_am_oid("fbf_filter", true);
	if (!OidIsValid(amoid))
		return;
	relid = alter_target(as, NoLock);
	if (!OidIsValid(relid) || !OidIsValid(amoid))
		return;
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		return;
	window = ((Form_pg_class) GETSTRUCT(tup))->relam == amoid;
	ReleaseSysCache(tup);
	if (window && strcmp(named, "filter") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot change the filter of window index \"%s\"",
						as->relation->relname),
				 errdetail("The filter is the format of the window's pages, chosen when its table was created."),
				 errhint("Create a new table with fbf_create_counter_table(..., filter => ...) or fbf_create_dedup(..., filter => ...).")));
	if (window)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot change the kind of window index \"%s\"",
						as->relation->relname),
				 errdetail("The kind says whether the window holds a counter's operations or a dedup table's claims; it is chosen when the table is created."),
				 errhint("Create a new table with fbf_create_counter_table() or fbf_create_dedup().")));
}

/* the access method of a relation; InvalidOid if it is gone */
static Oid
rel_am(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			am;

	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	am = ((Form_pg_class) GETSTRUCT(tup))->relam;
	ReleaseSysCache(tup);
	return am;
}

/*
 * The fbf_filter indexes of table heapoid (valid or not), from pg_index,
 * without locking the table: the hook looks before the statement takes
 * its own locks.
 */
static List *
windows_of(Oid heapoid, Oid amoid)
{
	Relation	pg_index;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tup;
	List	   *result = NIL;

	ScanKeyInit(&key, Anum_pg_index_indrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(heapoid));
	pg_index = table_open(IndexRelationId, AccessShareLock);
	scan = systable_beginscan(pg_index, IndexIndrelidIndexId, true, NULL, 1,
							  &key);
	while ((tup = systable_getnext(scan)) != NULL)
	{
		Form_pg_index form = (Form_pg_index) GETSTRUCT(tup);

		if (rel_am(form->indexrelid) == amoid)
			result = lappend_oid(result, form->indexrelid);
	}
	systable_endscan(scan);
	table_close(pg_index, AccessShareLock);
	return result;
}

fbf_noreturn static void
refuse_window_drop(Oid indexoid, Oid heapoid)
{
	ereport(ERROR,
			(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
			 errmsg("cannot drop index \"%s\" because it is the window of table \"%s\"",
					get_rel_name(indexoid), get_rel_name(heapoid)),
			 errdetail("The window remembers the operations the table's counter applied or the ids it claimed; a new window would start empty, and their retries would apply again."),
			 errhint("Drop the table instead.")));
	pg_unreachable();
}

/*
 * A table keeps its window (see the file header): refuse DROP INDEX of
 * the last fbf_filter index of a plain table (an index an older version
 * let another kind of relation carry is no window, and goes), unless the
 * statement drops it
 * with another one of the same table left (a table given two by an
 * earlier version may drop one), and ALTER TABLE ... DROP COLUMN of a
 * window's column, which would drop it too.  Names are resolved without
 * locks, as the statement will resolve them again; a concurrent change
 * is caught by the statement's own locks and checks no later than it
 * would be without this hook.  Only a role the statement would let drop
 * the index (its owner or its schema's) or alter the table (its owner) is
 * told that it is a window; another gets PostgreSQL's refusal.
 */
static void
refuse_window_drops(Node *stmt)
{
	Oid			amoid = get_index_am_oid("fbf_filter", true);

	if (!OidIsValid(amoid))
		return;
	if (IsA(stmt, DropStmt) && ((DropStmt *) stmt)->removeType == OBJECT_INDEX)
	{
		List	   *named = NIL;
		ListCell   *lc;

		foreach(lc, ((DropStmt *) stmt)->objects)
		{
			RangeVar   *rv = makeRangeVarFromNameList((List *) lfirst(lc));
			Oid			indexoid = RangeVarGetRelid(rv, NoLock, true);

			if (OidIsValid(indexoid) && rel_am(indexoid) == amoid &&
				owns_relation(indexoid, true))
				named = lappend_oid(named, indexoid);
		}
		foreach(lc, named)
		{
			Oid			indexoid = lfirst_oid(lc);
			Oid			heapoid = IndexGetRelation(indexoid, true);
			List	   *windows;
			ListCell   *w;
			bool		kept = false;

			/* a window only a plain table uses (FbfWindowTableUsable) */
			if (!OidIsValid(heapoid) || !FbfWindowTableUsable(heapoid))
				continue;
			windows = windows_of(heapoid, amoid);
			foreach(w, windows)
				kept |= !list_member_oid(named, lfirst_oid(w));
			if (!kept)
				refuse_window_drop(indexoid, heapoid);
			list_free(windows);
		}
		list_free(named);
	}
	else if (IsA(stmt, AlterTableStmt))
	{
		AlterTableStmt *as = (AlterTableStmt *) stmt;
		Oid			heapoid = InvalidOid;
		ListCell   *lc;

		foreach(lc, as->cmds)
		{
			AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);
			AttrNumber	attno;
			List	   *windows;
			ListCell   *w;

			if (cmd->subtype != AT_DropColumn || cmd->name == NULL)
				continue;
			if (!OidIsValid(heapoid))
				heapoid = alter_target(as, NoLock);
			if (!OidIsValid(heapoid) ||
				(attno = get_attnum(heapoid, cmd->name)) == InvalidAttrNumber)
				continue;
			windows = windows_of(heapoid, amoid);
			foreach(w, windows)
			{
				Oid			indexoid = lfirst_oid(w);
				HeapTuple	tup = SearchSysCache1(INDEXRELID,
												  ObjectIdGetDatum(indexoid));
				bool		uses = false;
				int			i;

				if (!HeapTupleIsValid(tup))
					continue;
				for (i = 0; i < ((Form_pg_index) GETSTRUCT(tup))->indnatts; i++)
					uses |= ((Form_pg_index) GETSTRUCT(tup))->indkey.values[i] == attno;
				ReleaseSysCache(tup);
				if (uses)
					refuse_window_drop(indexoid, heapoid);
			}
			list_free(windows);
		}
	}
}

/*
 * CREATE INDEX ... USING fbf_filter takes ShareLock, which does not
 * conflict with itself: lock the table against a concurrent one first
 * (ShareRowExclusiveLock, as the statement's own checks do: ownership
 * before the lock), so that FbfWindowBuildPages sees the other's window.
 * Then refuse a window on anything but a plain table: a partitioned
 * table's index is never built, so ambuild cannot refuse it.  (A
 * concurrent build is refused when its index is created.)
 */
static void
lock_for_window_build(Node *stmt)
{
	IndexStmt  *is;

	if (!IsA(stmt, IndexStmt))
		return;
	is = (IndexStmt *) stmt;
	if (is->concurrent || is->accessMethod == NULL ||
		strcmp(is->accessMethod, "fbf_filter") != 0 ||
		!OidIsValid(get_index_am_oid("fbf_filter", true)))
		return;
	FbfWindowCheckTable(RangeVarGetRelidExtended(is->relation,
												 ShareRowExclusiveLock, 0,
												 RangeVarCallbackOwnsRelation,
												 NULL));
}

/*
 * Refuse a new window index on a table that has one (a table has one
 * window; see the file header).  Only for an index created in this
 * transaction: a rebuild of a table that an earlier version let have two
 * keeps working, and the extra one may be dropped.
 */
static void
refuse_second_window(Relation heap, Relation index)
{
	List	   *windows;
	ListCell   *lc;

	if (index->rd_createSubid == InvalidSubTransactionId)
		return;
	windows = windows_of(RelationGetRelid(heap), index->rd_rel->relam);
	foreach(lc, windows)
	{
		Oid			other = lfirst_oid(lc);

		if (other != RelationGetRelid(index))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("table \"%s\" already has a window index, \"%s\"",
							RelationGetRelationName(heap), get_rel_name(other)),
					 errdetail("A counter or dedup table has one window, which remembers what it applied."),
					 errhint("Change the window's settings with ALTER INDEX ... SET, or rebuild it with REINDEX.")));
	}
	list_free(windows);
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
	bool		outer_concurrent = concurrent_build;

	if (IsTransactionState())
	{
		refuse_concurrent_reindex(pstmt->utilityStmt);
		refuse_no_index_cleanup(pstmt->utilityStmt);
		refuse_filter_change(pstmt->utilityStmt);
		refuse_window_drops(pstmt->utilityStmt);
		lock_for_window_build(pstmt->utilityStmt);
		drain_before_vacuum(pstmt->utilityStmt);
	}
	if (track)
		rebuild_sources = NIL;
	concurrent_build = builds_concurrently(pstmt->utilityStmt);
	PG_TRY();
	{
		/* in the TRY: a cancel during the catalog scan restores `outer` */
		if (track)
			remember_filters();
		if (prev_ProcessUtility)
			prev_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
									params, queryEnv, dest, qc);
	}
	PG_FINALLY();
	{
		concurrent_build = outer_concurrent;
		if (track)
		{
			forget_filters();
			rebuild_sources = outer;
		}
	}
	PG_END_TRY();
}

void
FbfWindowRebuildInit(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = fbf_ProcessUtility;
	prev_object_access_hook = object_access_hook;
	object_access_hook = fbf_rebuild_object_access;
}

/*
 * Where the counter table's window pages were before the running rebuild,
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

/*
 * Where this index's pages were before a rebuild that the utility hook did
 * not see: logical replication applies a TRUNCATE by calling
 * ExecuteTruncateGuts directly, and so might other code.  The rebuild gave
 * the index a new relfilenode in this command; the statement's snapshot
 * still sees the pg_class row from before it.  Returns false if there is
 * no such snapshot, or it shows the same relfilenode.
 */
static bool
unseen_rebuild_source(Relation index, FbfRebuildSource *src)
{
	Relation	pg_class;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tup;
	bool		found = false;

	if (!ActiveSnapshotSet())
		return false;
	ScanKeyInit(&key, Anum_pg_class_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(RelationGetRelid(index)));
	pg_class = table_open(RelationRelationId, AccessShareLock);
	scan = systable_beginscan(pg_class, ClassOidIndexId, true,
							  GetActiveSnapshot(), 1, &key);
	if ((tup = systable_getnext(scan)) != NULL)
	{
		Form_pg_class form = (Form_pg_class) GETSTRUCT(tup);

		src->heapoid = IndexGetRelation(RelationGetRelid(index), false);
		src->node = FbfMakeFileLocator(OidIsValid(form->reltablespace) ?
									   form->reltablespace : MyDatabaseTableSpace,
									   MyDatabaseId, form->relfilenode);
		src->persistence = form->relpersistence;
		found = !FbfFileLocatorEquals(src->node, FbfRelationLocator(index));
	}
	systable_endscan(scan);
	table_close(pg_class, AccessShareLock);
	return found;
}

/*
 * Fill the new relfilenode of `index`, which ambuild is building for
 * `heap` (refused if it is a second window of the table): with the window's pages from before the running rebuild (still
 * on disk until it commits), or, for a new counter, empty.  Returns true
 * if the window starts empty.
 *
 * A carried-over window is drained at once: the rebuilt table gets a new
 * relfilenode and relfrozenxid, and pending entries must not outlive what
 * the commit log can answer for them (window_pending.c); those the drain
 * puts off were judged committed, which is what a truncated commit log
 * answers for them (see drain_before_vacuum).  Its stream pages
 * come over with the rest, page for page, so they know exactly what the
 * window remembers and are not reset (window_stream.c).
 */
bool
FbfWindowBuildPages(Relation heap, Relation index)
{
	FbfRebuildSource *src = rebuild_source(heap);
	FbfRebuildSource unseen;

	refuse_second_window(heap, index);

	/* an index that existed before this subtransaction: a rebuild */
	if (src == NULL && index->rd_createSubid == InvalidSubTransactionId &&
		unseen_rebuild_source(index, &unseen))
		src = &unseen;

	if (src && !FbfFileLocatorEquals(src->node, FbfRelationLocator(index)) &&
		src->persistence != RELPERSISTENCE_TEMP &&
		FbfWindowCopyStorage(index, src->node,
							 src->persistence == RELPERSISTENCE_PERMANENT))
	{
		src->node = FbfRelationLocator(index);
		elog(DEBUG1, "fbf: carried the filter of \"%s\" over a rebuild",
			 RelationGetRelationName(heap));
		FbfWindowDrain(index, NULL);
		return false;
	}

	/*
	 * A rebuild whose old window cannot be read.  If the table was created
	 * in this transaction, nothing outside it can retry yet: start empty,
	 * and say so.  Otherwise refuse rather than forget: the old pages were
	 * truncated in place (a second rebuild in one transaction) or by a
	 * rebuild that committed after this statement looked (retrying the
	 * statement works), or the rebuild went around the utility hook and
	 * its statement's snapshot.
	 */
	if ((src || index->rd_createSubid == InvalidSubTransactionId) &&
		heap->rd_createSubid == InvalidSubTransactionId &&
		(src == NULL || src->persistence != RELPERSISTENCE_TEMP) &&
		heap->rd_rel->relpersistence != RELPERSISTENCE_TEMP)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot rebuild the operation filter of counter table \"%s\" here",
						RelationGetRelationName(heap)),
				 errdetail("Its old pages are gone: the table was rebuilt earlier in this transaction, or concurrently."),
				 errhint("Commit between rebuilds of a counter table, or retry the statement.")));
	FbfWindowInitStorage(index, MAIN_FORKNUM, FbfWindowGetOptions(index));
	if (src || index->rd_createSubid == InvalidSubTransactionId)
		ereport(NOTICE,
				(errmsg("the operation filter of counter table \"%s\" was reset",
						RelationGetRelationName(heap)),
				 errdetail("Retries of operations applied within the retention may be applied again.")));
	return true;
}
