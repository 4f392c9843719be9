/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  The one place where fbf names things that differ between PostgreSQL
 *	  major versions.
 *
 * fbf is built and tested against PostgreSQL 15 and 18, and written for
 * 16 and 17 from what the two tested versions tell apart.  Every call or
 * type whose name or shape changed is reached through a macro, typedef or
 * static inline function here, so that a port touches this file and not
 * the subsystems.  Each seam switches at the release that made the change
 * and names it: the 18 side is checked against the 18.3 source, the 15
 * side against 15's headers; the release in between is PostgreSQL's
 * history (16 and 17 are not compiled here), and where a change is
 * attributed to 18 that was also checked in other extensions' public
 * version guards.  Versions outside 15..18 stop the build here rather than
 * fail somewhere deeper.
 *
 * What is the same in 15 and 18 (compared in their headers), and so has no
 * seam: the page header (PageHeaderData, PG_PAGE_LAYOUT_VERSION 4) and the
 * special space, BLCKSZ (8192) and MAXIMUM_ALIGNOF (8) of both builds,
 * RmgrData and RegisterCustomRmgr (custom resource managers arrived in
 * 15), the IndexAmRoutine fields fbf sets (those added since are zeroed by
 * makeNode, meaning "not supported", and 18 checks each for NULL), the
 * index AM callbacks' signatures and ProcessUtility_hook's, log_newpage,
 * smgrextend and smgrimmedsync, and ReadBuffer(rel, P_NEW): 18's
 * ReadBuffer_common turns it into ExtendBufferedRel with
 * EB_SKIP_EXTENSION_LOCK, so the caller still holds the relation
 * extension lock, as on 15.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_COMPAT_H
#define FBF_COMPAT_H

#include "postgres.h"

#if PG_VERSION_NUM < 160000
#include "storage/relfilenode.h"
#else
#include "storage/relfilelocator.h"
#endif
#include "access/genam.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "commands/vacuum.h"
#include "executor/executor.h"
#include "storage/proc.h"
#include "storage/smgr.h"
#include "utils/acl.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#if PG_VERSION_NUM >= 160000
#include "catalog/pg_class_d.h"
#include "catalog/pg_database_d.h"
#include "parser/parse_relation.h"
#include "varatt.h"
#endif
#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
#else
#include "storage/backendid.h"
#endif

#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 190000
#error "fbf is written for PostgreSQL 15 to 18; port src/compat.h first"
#endif

/*
 * A function that does not return, declared with this before its return
 * type.  PostgreSQL 18 replaced the postfix pg_attribute_noreturn() with
 * the prefix pg_noreturn (C11's _Noreturn); fbf builds as C11 (gnu11), so
 * _Noreturn serves the versions before.
 */
#if PG_VERSION_NUM >= 180000
#define fbf_noreturn pg_noreturn
#else
#define fbf_noreturn _Noreturn
#endif

/*
 * The library's magic block, naming the module and its version (the
 * extension's default_version, from the Makefile): PostgreSQL 18 added
 * PG_MODULE_MAGIC_EXT, whose name and version pg_get_loaded_modules()
 * shows; before, the block has neither.
 */
#if PG_VERSION_NUM >= 180000
#define FBF_MODULE_MAGIC(name_, version_) \
	PG_MODULE_MAGIC_EXT(.name = name_, .version = version_)
#else
#define FBF_MODULE_MAGIC(name_, version_)	PG_MODULE_MAGIC
#endif

/*
 * Where a relation's storage is: its tablespace, database and file number.
 * PostgreSQL 16 renamed RelFileNode to RelFileLocator (storage/
 * relfilelocator.h), its fields spcNode/dbNode/relNode to spcOid/dbOid/
 * relNumber, rd_node to rd_locator and smgr_rnode to smgr_rlocator.
 */
#if PG_VERSION_NUM >= 160000
typedef RelFileLocator FbfFileLocator;

#define FbfRelationLocator(rel)		((rel)->rd_locator)
#define FbfSmgrLocator(smgr)		((smgr)->smgr_rlocator.locator)
#define FbfFileLocatorEquals(a, b)	RelFileLocatorEquals(a, b)
#else
typedef RelFileNode FbfFileLocator;

#define FbfRelationLocator(rel)		((rel)->rd_node)
#define FbfSmgrLocator(smgr)		((smgr)->smgr_rnode.node)
#define FbfFileLocatorEquals(a, b)	RelFileNodeEquals(a, b)
#endif

static inline FbfFileLocator
FbfMakeFileLocator(Oid tablespace, Oid database, Oid filenumber)
{
	FbfFileLocator loc;

#if PG_VERSION_NUM >= 160000
	loc.spcOid = tablespace;
	loc.dbOid = database;
	loc.relNumber = filenumber;
#else
	loc.spcNode = tablespace;
	loc.dbNode = database;
	loc.relNode = filenumber;
#endif
	return loc;
}

/* read a page of a relation known only by its storage (no relcache entry) */
#define FbfReadBufferByLocator(loc, fork, blkno, permanent) \
	ReadBufferWithoutRelcache(loc, fork, blkno, RBM_NORMAL, NULL, permanent)

/* a new, zeroed block at the end of a relation's main fork, pinned */
#define FbfReadNewBuffer(rel)		ReadBuffer(rel, P_NEW)

/*
 * Processes.  This backend's number among the server's processes, and the
 * number that stands for none (smgropen of a relation that is not a
 * backend's temporary one): PostgreSQL 17 replaced BackendId (storage/
 * backendid.h: MyBackendId, from 1, and InvalidBackendId) with ProcNumber
 * (storage/procnumber.h: MyProcNumber, from 0, and INVALID_PROC_NUMBER),
 * and moved PGPROC's lxid into its vxid.
 */
#if PG_VERSION_NUM >= 170000
#define FbfMyProcNumber				MyProcNumber
#define FbfInvalidProcNumber		INVALID_PROC_NUMBER
#define FbfMyLocalTransactionId()	(MyProc->vxid.lxid)
#else
#define FbfMyProcNumber				MyBackendId
#define FbfInvalidProcNumber		InvalidBackendId
#define FbfMyLocalTransactionId()	(MyProc->lxid)
#endif

/*
 * The shared transaction-id counters (nextXid, oldestClogXid...):
 * PostgreSQL 17 renamed ShmemVariableCache to TransamVariables.
 */
#if PG_VERSION_NUM >= 170000
#define FbfTransamVariables			TransamVariables
#else
#define FbfTransamVariables			ShmemVariableCache
#endif

/*
 * Ownership checks: PostgreSQL 16 replaced the per-catalog
 * pg_class_ownercheck, pg_database_ownercheck... with object_ownercheck.
 */
#if PG_VERSION_NUM >= 160000
#define FbfClassOwnercheck(relid, roleid) \
	object_ownercheck(RelationRelationId, relid, roleid)
#define FbfDatabaseOwnercheck(dbid, roleid) \
	object_ownercheck(DatabaseRelationId, dbid, roleid)
#else
#define FbfClassOwnercheck(relid, roleid)		pg_class_ownercheck(relid, roleid)
#define FbfDatabaseOwnercheck(dbid, roleid)	pg_database_ownercheck(dbid, roleid)
#endif

/*
 * The OID of a relation's primary key index, InvalidOid if it has none or
 * it is deferrable.  PostgreSQL 18 added the deferrable_ok argument; 15's
 * index list skips deferrable keys, which is 18's deferrable_ok = false.
 */
#if PG_VERSION_NUM >= 180000
#define FbfRelationGetPrimaryKeyIndex(rel)	RelationGetPrimaryKeyIndex(rel, false)
#else
#define FbfRelationGetPrimaryKeyIndex(rel)	RelationGetPrimaryKeyIndex(rel)
#endif

/*
 * An index scan without instrumentation: PostgreSQL 18 added the
 * IndexScanInstrumentation argument (EXPLAIN ANALYZE's index searches).
 */
#if PG_VERSION_NUM >= 180000
#define FbfIndexBeginScan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan(heap, index, snapshot, NULL, nkeys, norderbys)
#else
#define FbfIndexBeginScan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan(heap, index, snapshot, nkeys, norderbys)
#endif

/*
 * VACUUM's cost-based delay, from an index AM's bulk delete: PostgreSQL 18
 * added the is_analyze argument.
 */
#if PG_VERSION_NUM >= 180000
#define FbfVacuumDelayPoint()		vacuum_delay_point(false)
#else
#define FbfVacuumDelayPoint()		vacuum_delay_point()
#endif

/*
 * Set up `estate`'s range table as the one entry of an UPDATE of `rel`,
 * taking `lockmode`, that reads the columns `selected` and sets `updated`
 * (attribute numbers offset by FirstLowInvalidHeapAttributeNumber, as in a
 * range table entry), and check the SELECT and UPDATE privileges it needs
 * as the executor checks them (ExecutorCheckPerms_hook included), failing
 * if one is missing.  PostgreSQL 16 moved the privilege fields of
 * RangeTblEntry into an RTEPermissionInfo: ExecCheckRTPerms became
 * ExecCheckPermissions, and ExecInitRangeTable takes the list of them
 * (ExecGetUpdatedCols reads `updated` there); 18 added the set of unpruned
 * range table indexes to ExecInitRangeTable.
 */
static inline void
FbfExecInitUpdateRangeTable(EState *estate, Relation rel, LOCKMODE lockmode,
							Bitmapset *selected, Bitmapset *updated)
{
	RangeTblEntry *rte = makeNode(RangeTblEntry);
#if PG_VERSION_NUM >= 160000
	List	   *perminfos = NIL;
	RTEPermissionInfo *perminfo;
#endif

	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = lockmode;
#if PG_VERSION_NUM >= 160000
	perminfo = addRTEPermissionInfo(&perminfos, rte);
	perminfo->requiredPerms = ACL_SELECT | ACL_UPDATE;
	perminfo->selectedCols = selected;
	perminfo->updatedCols = updated;
#if PG_VERSION_NUM >= 180000
	ExecInitRangeTable(estate, list_make1(rte), perminfos, bms_make_singleton(1));
#else
	ExecInitRangeTable(estate, list_make1(rte), perminfos);
#endif
	(void) ExecCheckPermissions(estate->es_range_table, perminfos, true);
#else
	rte->requiredPerms = ACL_SELECT | ACL_UPDATE;
	rte->selectedCols = selected;
	rte->updatedCols = updated;
	ExecInitRangeTable(estate, list_make1(rte));
	(void) ExecCheckRTPerms(estate->es_range_table, true);
#endif
}

/*
 * Update the tuple at `tid` of the result relation `relinfo` to `newslot`
 * with the executor state's snapshot and command id, waiting for a
 * concurrent updater, and insert the new version's index entries if the
 * update needs them, as ExecUpdate does, opening the relation's indexes
 * (ExecOpenIndices) then if the caller has not: a HOT update needs none,
 * unless (16 and later) it changes a column a summarizing index covers.
 * Returns table_tuple_update's
 * result, with *tmfd and *lockmode.  PostgreSQL 16 made table_tuple_update
 * say which indexes need entries (TU_UpdateIndexes: none, all, or only the
 * summarizing ones) rather than whether they do, and gave
 * ExecInsertIndexTuples the matching onlySummarizing argument.
 */
static inline TM_Result
FbfTupleUpdateWithIndexes(ResultRelInfo *relinfo, EState *estate,
						  ItemPointer tid, TupleTableSlot *newslot,
						  TM_FailureData *tmfd, LockTupleMode *lockmode)
{
	TM_Result	result;
#if PG_VERSION_NUM >= 160000
	TU_UpdateIndexes update_indexes;
#else
	bool		update_indexes;
#endif

	result = table_tuple_update(relinfo->ri_RelationDesc, tid, newslot,
								estate->es_output_cid, estate->es_snapshot,
								InvalidSnapshot, true /* wait */ , tmfd,
								lockmode, &update_indexes);
#if PG_VERSION_NUM >= 160000
	if (result != TM_Ok || update_indexes == TU_None)
		return result;
#else
	if (result != TM_Ok || !update_indexes)
		return result;
#endif
	/* the indexes are opened when an update first needs them */
	if (relinfo->ri_IndexRelationDescs == NULL)
		ExecOpenIndices(relinfo, false);
	if (relinfo->ri_NumIndices == 0)
		return result;
#if PG_VERSION_NUM >= 160000
	list_free(ExecInsertIndexTuples(relinfo, newslot, estate, true, false,
									NULL, NIL,
									update_indexes == TU_Summarizing));
#else
	list_free(ExecInsertIndexTuples(relinfo, newslot, estate, true, false,
									NULL, NIL));
#endif
	return result;
}

#endif							/* FBF_COMPAT_H */
