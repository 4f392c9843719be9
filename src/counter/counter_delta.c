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
 * nothing else: after the same permission check as the UPDATE's
 * (ExecCheckRTPerms on the same columns), it finds the shard row through
 * the primary key with the statement's snapshot, adds the delta with
 * int8pl's overflow check, and writes the new version as ExecUpdate does
 * (stored generated columns, constraints, the tuple, index entries unless
 * HOT), with ExecUpdate's answers to a concurrent writer of the row: wait
 * for it, then in READ COMMITTED go on with the newest version (as
 * EvalPlanQual does), in REPEATABLE READ and SERIALIZABLE fail with 40001.
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
#include "executor/nodeModifyTable.h"
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

	entry->pk_index = FbfRelationGetPrimaryKeyIndex(heap);
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
	entry->citus = FbfCitusLookup(heap, get_attnum(relid, "key"));
	if (FbfIsCounterTable(heap, &indexoid))
	{
		entry->window_index = indexoid;
		entry->kind = FbfWindowIndexKind(indexoid);
		entry->direct = entry->kind == FBF_WINDOW_COUNTER &&
			direct_shape(heap, entry);
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

/* are key and shard of this version still the ones looked up? */
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
 * The (key, shard) row visible to `snapshot`, found through the primary
 * key, into `slot` (which keeps its buffer pinned); false if none is.
 */
static bool
find_shard_row(Relation heap, Relation pk, FbfCounterRel *entry,
			   Snapshot snapshot, Datum key, int32 shard, TupleTableSlot *slot)
{
	ScanKeyData skey[2];
	IndexScanDesc scan;
	bool		found;
	int			i;

	for (i = 0; i < 2; i++)
		ScanKeyEntryInitializeWithInfo(&skey[i], 0, i + 1, BTEqualStrategyNumber,
									   InvalidOid, entry->collation[i], &entry->eq[i],
									   entry->index_col_is_key[i] ? key : Int32GetDatum(shard));
	scan = FbfIndexBeginScan(heap, pk, snapshot, 2, 0);
	index_rescan(scan, skey, 2, NULL, 0);
	/* a unique index: one version at most is visible */
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	index_endscan(scan);
	return found;
}

/*
 * Into `newslot`, the version `oldslot` with value + delta, overflow
 * checked as int8pl checks it.
 *
 * (As the UPDATE, a sum is computed from each version the update is
 * attempted on: first the one the snapshot sees, then, after a concurrent
 * update in READ COMMITTED, the newest; an overflow is reported from
 * whichever is computed first.)
 */
static void
form_new_version(FbfCounterRel *entry, TupleTableSlot *oldslot,
				 TupleTableSlot *newslot, int64 delta)
{
	int			natts = oldslot->tts_tupleDescriptor->natts;
	int			v = entry->value_attno - 1;

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
}

/*
 * Write `newslot` as the version following `tid`, as ExecUpdate writes it
 * for a table without triggers (and as ExecSimpleRelationUpdate does, but
 * that one wants the old version locked first, which costs a WAL record
 * and a page write per increment): stored generated columns, constraints,
 * the partition constraint, the tuple (waiting for a concurrent writer of
 * the old version), the index entries unless the update is HOT.  Returns
 * table_tuple_update's verdict; *lockmode is the lock it took or needs.
 */
static TM_Result
write_new_version(ResultRelInfo *relinfo, EState *estate, ItemPointer tid,
				  TupleTableSlot *newslot, TM_FailureData *tmfd,
				  LockTupleMode *lockmode)
{
	Relation	heap = relinfo->ri_RelationDesc;

	if (heap->rd_att->constr && heap->rd_att->constr->has_generated_stored)
		ExecComputeStoredGenerated(relinfo, estate, newslot, CMD_UPDATE);
	if (heap->rd_att->constr)
		ExecConstraints(relinfo, newslot, estate);
	if (heap->rd_rel->relispartition)
		ExecPartitionCheck(relinfo, newslot, estate, true);

	return FbfTupleUpdateWithIndexes(relinfo, estate, tid, newslot, tmfd,
									 lockmode);
}

/*
 * Add `delta` to the row (key, shard) of the counter table `heap`, opened
 * with RowExclusiveLock and privileges checked by FbfCounterOpen, without
 * SPI, as `UPDATE t SET value = value + delta WHERE key = $k AND shard =
 * $s` would.  The caller has checked that row security does not apply.
 *
 * As the UPDATE: the row its snapshot sees is updated, waiting for a
 * concurrent writer of it; if that one committed, READ COMMITTED locks the
 * newest version (EvalPlanQual's way), checks that it still is the row
 * (key, shard) and updates that, and REPEATABLE READ and SERIALIZABLE fail
 * with 40001 as ExecUpdate does.
 *
 * FBF_DIRECT_APPLIED: done, and the command counter advanced so that what
 * follows in the transaction sees it.  FBF_DIRECT_NO_ROW: no such row (the
 * caller inserts it).  FBF_DIRECT_UNSUPPORTED: nothing done, the caller
 * must run the UPDATE.
 */
FbfDirectResult
FbfCounterAddDirect(Relation heap, text *key, int32 shard, int64 delta)
{
	FbfCounterRel *entry;
	EState	   *estate;
	MemoryContext oldcxt;
	Bitmapset  *selected;
	ResultRelInfo *relinfo;
	Relation	pk = NULL;
	TupleTableSlot *oldslot;
	TupleTableSlot *newslot;
	Snapshot	snapshot;
	bool		found;
	bool		applied = false;
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
	 * checked as the executor checks it (hooks included), and tells which
	 * column changes (generated columns, the index-unchanged hint).
	 */
	selected = bms_make_singleton(entry->key_attno - FirstLowInvalidHeapAttributeNumber);
	selected = bms_add_member(selected,
							  entry->shard_attno - FirstLowInvalidHeapAttributeNumber);
	selected = bms_add_member(selected,
							  entry->value_attno - FirstLowInvalidHeapAttributeNumber);
	FbfExecInitUpdateRangeTable(estate, heap, RowExclusiveLock, selected,
								bms_make_singleton(entry->value_attno - FirstLowInvalidHeapAttributeNumber));

	relinfo = makeNode(ResultRelInfo);
	InitResultRelInfo(relinfo, heap, 1, NULL, 0);
	estate->es_snapshot = snapshot;
	estate->es_output_cid = GetCurrentCommandId(true);
	/* a table published for updates needs a replica identity */
	CheckCmdReplicaIdentity(heap, CMD_UPDATE);
	ExecOpenIndices(relinfo, false);

	for (i = 0; i < relinfo->ri_NumIndices; i++)
		if (RelationGetRelid(relinfo->ri_IndexRelationDescs[i]) == entry->pk_index)
			pk = relinfo->ri_IndexRelationDescs[i];
	if (pk == NULL)
		elog(ERROR, "fbf: primary key %u of \"%s\" is not open",
			 entry->pk_index, RelationGetRelationName(heap));

	oldslot = table_slot_create(heap, &estate->es_tupleTable);
	newslot = table_slot_create(heap, &estate->es_tupleTable);

	found = find_shard_row(heap, pk, entry, snapshot, PointerGetDatum(key),
						   shard, oldslot);
	while (found)
	{
		ItemPointerData tid = oldslot->tts_tid;
		TM_FailureData tmfd;
		LockTupleMode lockmode;
		TM_Result	result;

		form_new_version(entry, oldslot, newslot, delta);
		result = write_new_version(relinfo, estate, &tid, newslot, &tmfd, &lockmode);
		if (result == TM_Ok)
		{
			applied = true;
			break;
		}
		if (result == TM_Deleted)
		{
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent delete")));
			break;				/* gone: the UPDATE updates nothing */
		}
		if (result != TM_Updated)

			/*
			 * TM_SelfModified: modified by this transaction in this very
			 * command, which cannot be: the command counter was advanced
			 * before the scan.
			 */
			elog(ERROR, "fbf: unexpected table_tuple_update status: %u", result);
		if (IsolationUsesXactSnapshot())
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to concurrent update")));

		/*
		 * READ COMMITTED, updated by a transaction that committed: lock the
		 * newest version, which must still be the row (key, shard), and try
		 * again with it.
		 */
		result = table_tuple_lock(heap, &tid, snapshot, oldslot,
								  estate->es_output_cid, lockmode, LockWaitBlock,
								  TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
		if (result == TM_Deleted)
			break;
		if (result != TM_Ok)
			elog(ERROR, "fbf: unexpected table_tuple_lock status: %u", result);
		found = row_matches(entry, oldslot, PointerGetDatum(key), shard);
	}

	ExecCloseIndices(relinfo);
	ExecResetTupleTable(estate->es_tupleTable, false);
	MemoryContextSwitchTo(oldcxt);
	FreeExecutorState(estate);
	PopActiveSnapshot();

	/* as SPI after the statement: the transaction's next command sees it */
	CommandCounterIncrement();
	return applied ? FBF_DIRECT_APPLIED : FBF_DIRECT_NO_ROW;
}
