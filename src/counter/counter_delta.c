/*-------------------------------------------------------------------------
 *
 * counter_delta.c
 *	  Applying an increment's delta without SPI: what a backend remembers
 *	  about each counter table (the relation cache), and the direct update
 *	  of a shard row.
 *
 * The delta used to be added by an SPI UPDATE per increment, which cost a
 * fifth of the server's CPU in a pgbench of idempotent_increment: plan
 * cache checks, executor start-up and shutdown, a GUC save and restore.
 * The direct path does what the executor does for that UPDATE, and
 * nothing else: it finds the shard row through the primary key with the
 * statement's snapshot, locks it as an UPDATE would (following it to its
 * newest version in READ COMMITTED, failing with 40001 in REPEATABLE READ
 * and SERIALIZABLE, as ExecUpdate does), adds the delta with int8pl's
 * overflow check, and writes the new version with ExecSimpleRelationUpdate
 * (constraints, stored generated columns, index entries, HOT), after the
 * same permission check as the UPDATE's (ExecCheckRTPerms on the same
 * columns).
 *
 * Where it could not behave as the UPDATE does, the caller keeps the SPI
 * UPDATE (FBF_DIRECT_UNSUPPORTED): see direct_shape and direct_allowed.
 * A row that does not exist yet is the caller's too (FBF_DIRECT_NO_ROW):
 * the SPI upsert creates it.
 *
 * The relation cache (rel_cache, in TopMemoryContext) holds per counter
 * table what does not change without an invalidation of the table or of
 * its indexes: is it a counter table (which is its window index), its
 * qualified name (for the SPI plans), and the shape the direct path needs.
 * A relcache callback marks entries stale; a syscache callback on schemas
 * does too (a renamed schema changes the qualified name without touching
 * the table).  Entries are rebuilt on next use, never freed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_operator_d.h"
#include "catalog/pg_type_d.h"
#include "common/int.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "counter/counter.h"
#include "window/window.h"

static HTAB *rel_cache = NULL;

/* invalidations seen so far: one during a rebuild leaves the entry stale */
static uint64 rel_cache_invals = 0;

/* ----------------------------------------------------------------------
 * The relation cache
 * ----------------------------------------------------------------------
 */

/*
 * A relation (or an index: the window index and the primary key are
 * remembered too) changed: its entry is stale.  InvalidOid: all are.
 */
static void
rel_cache_invalidate(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	FbfCounterRel *entry;

	rel_cache_invals++;
	hash_seq_init(&status, rel_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (!OidIsValid(relid) || entry->relid == relid ||
			entry->window_index == relid || entry->pk_index == relid)
			entry->valid = false;
	}
}

/* a schema changed (renamed, say): every qualified name may be stale */
static void
rel_cache_invalidate_namespaces(Datum arg, int cacheid, uint32 hashvalue)
{
	rel_cache_invalidate(arg, InvalidOid);
}

/*
 * Does the table have the shape the direct path relies on?  Fills the
 * entry's attribute numbers, primary key and scan keys' functions.
 *
 * The direct path looks the row up by the primary key and compares key
 * and shard as `key = $2 AND shard = $3` would, and writes value + delta
 * as an int8; it requires:
 *  - key text (its collation deterministic, so that equality is equality
 *    of bytes, as in the index), shard int4, value int8: with other types
 *    or domains the UPDATE would cast, or check domain constraints;
 *  - value neither generated nor an identity column GENERATED ALWAYS: the
 *    UPDATE refuses to set those;
 *  - a valid, immediate btree primary key on exactly (key, shard) whose
 *    operator classes use the types' ordinary equality operators.
 * Counter tables as fbf_create_counter_table makes them have all of it;
 * ALTER TABLE can take it away, and then the UPDATE does the work.
 */
static bool
direct_shape(Relation heap, FbfCounterRel *entry)
{
	TupleDesc	desc = RelationGetDescr(heap);
	Relation	pk;
	bool		ok;
	int			i;

	entry->key_attno = entry->shard_attno = entry->value_attno = InvalidAttrNumber;
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		const char *name = NameStr(att->attname);

		if (att->attisdropped)
			continue;
		if (strcmp(name, "key") == 0)
		{
			if (att->atttypid != TEXTOID || !OidIsValid(att->attcollation) ||
				!get_collation_isdeterministic(att->attcollation))
				return false;
			entry->key_attno = att->attnum;
		}
		else if (strcmp(name, "shard") == 0)
		{
			if (att->atttypid != INT4OID)
				return false;
			entry->shard_attno = att->attnum;
		}
		else if (strcmp(name, "value") == 0)
		{
			if (att->atttypid != INT8OID || att->attgenerated != '\0' ||
				att->attidentity == ATTRIBUTE_IDENTITY_ALWAYS)
				return false;
			entry->value_attno = att->attnum;
		}
	}
	if (entry->key_attno == InvalidAttrNumber ||
		entry->shard_attno == InvalidAttrNumber ||
		entry->value_attno == InvalidAttrNumber)
		return false;

	entry->pk_index = RelationGetPrimaryKeyIndex(heap);
	if (!OidIsValid(entry->pk_index))
		return false;

	/* as the planner would open it to plan the UPDATE */
	pk = index_open(entry->pk_index, AccessShareLock);
	ok = pk->rd_rel->relam == BTREE_AM_OID &&
		pk->rd_index->indisunique && pk->rd_index->indimmediate &&
		pk->rd_index->indisvalid && pk->rd_index->indisready &&
		IndexRelationGetNumberOfKeyAttributes(pk) == 2 &&
		RelationGetIndexExpressions(pk) == NIL;
	for (i = 0; ok && i < 2; i++)
	{
		AttrNumber	attno = pk->rd_index->indkey.values[i];
		Oid			type;
		Oid			eqop;

		if (attno == entry->key_attno)
		{
			type = TEXTOID;
			eqop = TextEqualOperator;
			ok = pk->rd_indcollation[i] ==
				TupleDescAttr(desc, attno - 1)->attcollation;
		}
		else if (attno == entry->shard_attno)
		{
			type = INT4OID;
			eqop = Int4EqualOperator;
		}
		else
			break;
		ok = ok && pk->rd_opcintype[i] == type &&
			get_opfamily_member(pk->rd_opfamily[i], type, type,
								BTEqualStrategyNumber) == eqop;
		if (ok)
		{
			entry->index_col_is_key[i] = attno == entry->key_attno;
			entry->collation[i] = pk->rd_indcollation[i];
			fmgr_info_cxt(get_opcode(eqop), &entry->eq[i], TopMemoryContext);
		}
	}
	/* both columns, each once */
	ok = ok && i == 2 &&
		entry->index_col_is_key[0] != entry->index_col_is_key[1];
	index_close(pk, NoLock);
	return ok;
}

/*
 * What this backend knows of the counter table `heap` (opened and locked
 * by the caller), rebuilt if an invalidation made it stale since.  The
 * entry stays where it is until the backend exits.
 */
FbfCounterRel *
FbfCounterRelGet(Relation heap)
{
	Oid			relid = RelationGetRelid(heap);
	FbfCounterRel *entry;
	bool		found;
	uint64		invals;
	Oid			indexoid;

	if (rel_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(FbfCounterRel);
		ctl.hcxt = TopMemoryContext;
		rel_cache = hash_create("fbf counter relations", 16, &ctl,
								HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		CacheRegisterRelcacheCallback(rel_cache_invalidate, (Datum) 0);
		CacheRegisterSyscacheCallback(NAMESPACEOID,
									  rel_cache_invalidate_namespaces, (Datum) 0);
	}
	entry = hash_search(rel_cache, &relid, HASH_ENTER, &found);
	if (found && entry->valid)
		return entry;
	if (!found)
		entry->qualname = NULL;

	/*
	 * Stale until fully built, so that an error half-way leaves nothing
	 * trusted behind; and stale still if an invalidation arrives while the
	 * catalogs are read (the next call builds it again).  This call uses
	 * what it read.
	 */
	entry->valid = false;
	invals = rel_cache_invals;
	entry->window_index = InvalidOid;
	entry->pk_index = InvalidOid;
	entry->direct = false;
	if (entry->qualname)
		pfree(entry->qualname);
	entry->qualname =
		MemoryContextStrdup(TopMemoryContext,
							quote_qualified_identifier(get_namespace_name(RelationGetNamespace(heap)),
													   RelationGetRelationName(heap)));
	if (FbfIsCounterTable(heap, &indexoid))
	{
		entry->window_index = indexoid;
		entry->direct = direct_shape(heap, entry);
	}
	entry->valid = rel_cache_invals == invals;
	return entry;
}

/* ----------------------------------------------------------------------
 * The direct path
 * ----------------------------------------------------------------------
 */

/*
 * May the delta go through the direct path now?  Besides the shape
 * (direct_shape), what may change from one call to the next without the
 * entry knowing, read from the open relation:
 *  - triggers, of any kind: row triggers need the executor's EPQ and
 *    transition machinery, statement triggers and the AFTER queue need a
 *    statement, and foreign keys and deferrable constraints are triggers
 *    too;
 *  - rules: an ON UPDATE rule rewrites the UPDATE;
 *  - inheritance children: `UPDATE t` also updates their (key, shard) rows.
 * Row security is the caller's to check (it asks check_enable_rls for the
 * zero-delta check already): policies exist only in the rewritten UPDATE.
 */
static bool
direct_allowed(Relation heap, FbfCounterRel *entry)
{
	return entry->direct &&
		heap->trigdesc == NULL &&
		heap->rd_rules == NULL &&
		!heap->rd_rel->relhassubclass;
}

/* are key and shard of the locked version still the ones looked up? */
static bool
row_matches(FbfCounterRel *entry, TupleTableSlot *slot, Datum key, int32 shard)
{
	bool		isnull;
	Datum		d;
	int			k = entry->index_col_is_key[0] ? 0 : 1;

	d = slot_getattr(slot, entry->shard_attno, &isnull);
	if (isnull || DatumGetInt32(d) != shard)
		return false;
	d = slot_getattr(slot, entry->key_attno, &isnull);
	return !isnull &&
		DatumGetBool(FunctionCall2Coll(&entry->eq[k], entry->collation[k], d, key));
}

/*
 * Find the (key, shard) row visible to `snapshot` through the primary key
 * and lock it with `mode`, as the UPDATE does before it writes: in READ
 * COMMITTED it waits for a concurrent updater and goes on with the newest
 * version (the UPDATE's EvalPlanQual), which must still match; under a
 * transaction snapshot a concurrent update or delete fails with 40001.
 * True with the locked version in `slot`; false if there is no such row.
 */
static bool
lock_shard_row(Relation heap, Relation pk, FbfCounterRel *entry,
			   Snapshot snapshot, CommandId cid, LockTupleMode mode,
			   Datum key, int32 shard, TupleTableSlot *slot)
{
	ScanKeyData skey[2];
	IndexScanDesc scan;
	ItemPointerData tid;
	TM_FailureData tmfd;
	TM_Result	result;
	bool		found;
	int			i;

	for (i = 0; i < 2; i++)
		ScanKeyEntryInitializeWithInfo(&skey[i], 0, i + 1, BTEqualStrategyNumber,
									   InvalidOid, entry->collation[i], &entry->eq[i],
									   entry->index_col_is_key[i] ? key : Int32GetDatum(shard));
	scan = index_beginscan(heap, pk, snapshot, 2, 0);
	index_rescan(scan, skey, 2, NULL, 0);
	/* a unique index: one version at most is visible */
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	if (found)
		tid = slot->tts_tid;
	index_endscan(scan);
	if (!found)
		return false;

	result = table_tuple_lock(heap, &tid, snapshot, slot, cid, mode, LockWaitBlock,
							  IsolationUsesXactSnapshot() ? 0 : TUPLE_LOCK_FLAG_FIND_LAST_VERSION,
							  &tmfd);
	switch (result)
	{
		case TM_Ok:
			break;
		case TM_Updated:
			/* only without FIND_LAST_VERSION: as ExecUpdate */
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent update")));
			elog(ERROR, "fbf: unexpected table_tuple_lock status: %u", result);
			break;
		case TM_Deleted:
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent delete")));
			/* gone: the UPDATE would have updated nothing */
			return false;
		case TM_SelfModified:

			/*
			 * Modified by this transaction in this very command: cannot
			 * happen, the command counter was advanced before the scan.
			 */
			elog(ERROR, "fbf: counter row already modified by this command");
			break;
		default:
			elog(ERROR, "fbf: unexpected table_tuple_lock status: %u", result);
			break;
	}

	/* the newest version's key or shard may have been changed: as EPQ */
	return row_matches(entry, slot, key, shard);
}

/*
 * Add `delta` to the row (key, shard) of the counter table `heap`, opened
 * with RowExclusiveLock and privileges checked by FbfCounterOpen, without
 * SPI, as `UPDATE t SET value = value + delta WHERE key = $k AND shard =
 * $s` would.  The caller has checked that row security does not apply.
 *
 * FBF_DIRECT_APPLIED: done, and the command counter advanced so that what
 * follows in the transaction sees it.  FBF_DIRECT_NO_ROW: no such row is
 * visible (the caller inserts it).  FBF_DIRECT_UNSUPPORTED: nothing done,
 * the caller must run the UPDATE.
 */
FbfDirectResult
FbfCounterAddDirect(Relation heap, text *key, int32 shard, int64 delta)
{
	FbfCounterRel *entry;
	EState	   *estate;
	MemoryContext oldcxt;
	RangeTblEntry *rte;
	ResultRelInfo *relinfo;
	EPQState	epqstate;
	Relation	pk = NULL;
	TupleTableSlot *oldslot;
	TupleTableSlot *newslot;
	Snapshot	snapshot;
	bool		found;
	int			i;

	/*
	 * As SPI before each statement: what this transaction did so far,
	 * including earlier increments of this same command, becomes visible.
	 * First, so that the checks below see any catalog change it makes
	 * visible.
	 */
	CommandCounterIncrement();

	entry = FbfCounterRelGet(heap);
	if (!direct_allowed(heap, entry))
		return FBF_DIRECT_UNSUPPORTED;

	/*
	 * The statement's snapshot, as SPI takes it for the UPDATE: a new one
	 * in READ COMMITTED, the transaction's otherwise; active while
	 * constraints, generated columns and index expressions are evaluated.
	 */
	PushActiveSnapshot(GetTransactionSnapshot());
	snapshot = GetActiveSnapshot();

	estate = CreateExecutorState();
	oldcxt = MemoryContextSwitchTo(estate->es_query_cxt);

	/*
	 * The UPDATE's range table entry: it needs SELECT on the columns it
	 * reads and UPDATE on the one it sets (table or column grants), is
	 * checked as the executor checks it (hooks included), and tells
	 * ExecSimpleRelationUpdate which column changes (for generated columns
	 * and the index-unchanged hint).
	 */
	rte = makeNode(RangeTblEntry);
	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(heap);
	rte->relkind = heap->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	rte->requiredPerms = ACL_SELECT | ACL_UPDATE;
	rte->selectedCols = bms_make_singleton(entry->key_attno - FirstLowInvalidHeapAttributeNumber);
	rte->selectedCols = bms_add_member(rte->selectedCols,
									   entry->shard_attno - FirstLowInvalidHeapAttributeNumber);
	rte->selectedCols = bms_add_member(rte->selectedCols,
									   entry->value_attno - FirstLowInvalidHeapAttributeNumber);
	rte->updatedCols = bms_make_singleton(entry->value_attno - FirstLowInvalidHeapAttributeNumber);
	ExecInitRangeTable(estate, list_make1(rte));
	(void) ExecCheckRTPerms(estate->es_range_table, true);

	relinfo = makeNode(ResultRelInfo);
	InitResultRelInfo(relinfo, heap, 1, NULL, 0);
	estate->es_snapshot = snapshot;
	estate->es_output_cid = GetCurrentCommandId(true);
	ExecOpenIndices(relinfo, false);
	/* never used: without triggers nothing rechecks a row */
	EvalPlanQualInit(&epqstate, estate, NULL, NIL, -1);

	for (i = 0; i < relinfo->ri_NumIndices; i++)
		if (RelationGetRelid(relinfo->ri_IndexRelationDescs[i]) == entry->pk_index)
			pk = relinfo->ri_IndexRelationDescs[i];
	if (pk == NULL)
		elog(ERROR, "fbf: primary key %u of \"%s\" is not open",
			 entry->pk_index, RelationGetRelationName(heap));

	oldslot = table_slot_create(heap, &estate->es_tupleTable);
	newslot = table_slot_create(heap, &estate->es_tupleTable);

	found = lock_shard_row(heap, pk, entry, snapshot, estate->es_output_cid,
						   ExecUpdateLockMode(estate, relinfo),
						   PointerGetDatum(key), shard, oldslot);
	if (found)
	{
		int			natts = RelationGetDescr(heap)->natts;
		int			v = entry->value_attno - 1;

		/*
		 * The new version: the locked one with value + delta, overflow
		 * checked as int8pl checks it.  (The UPDATE computes the sum from
		 * the version its snapshot sees before it waits for a concurrent
		 * writer, and again from the newest one after; so in READ
		 * COMMITTED it may report an overflow that the newest version
		 * would not have had.  Here only the value written is checked.)
		 */
		slot_getallattrs(oldslot);
		ExecClearTuple(newslot);
		memcpy(newslot->tts_values, oldslot->tts_values, natts * sizeof(Datum));
		memcpy(newslot->tts_isnull, oldslot->tts_isnull, natts * sizeof(bool));
		if (!newslot->tts_isnull[v])	/* NULL + delta is NULL */
		{
			int64		sum;

			if (pg_add_s64_overflow(DatumGetInt64(oldslot->tts_values[v]), delta, &sum))
				ereport(ERROR,
						(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
						 errmsg("bigint out of range")));
			newslot->tts_values[v] = Int64GetDatum(sum);
		}
		ExecStoreVirtualTuple(newslot);

		/* generated columns, constraints, the new version, index entries */
		ExecSimpleRelationUpdate(relinfo, estate, &epqstate, oldslot, newslot);
	}

	EvalPlanQualEnd(&epqstate);
	ExecCloseIndices(relinfo);
	ExecResetTupleTable(estate->es_tupleTable, false);
	MemoryContextSwitchTo(oldcxt);
	FreeExecutorState(estate);
	PopActiveSnapshot();

	/* as SPI after the statement: the transaction's next command sees it */
	CommandCounterIncrement();
	return found ? FBF_DIRECT_APPLIED : FBF_DIRECT_NO_ROW;
}
