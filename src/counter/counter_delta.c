/*-------------------------------------------------------------------------
 *
 * counter_delta.c
 *	  Adding an increment's delta to this backend's shard row of its key,
 *	  as the calling user, as an UPDATE would add it (FbfCounterAddDelta),
 *	  and reading a key's sum (FbfCounterSum): directly where that behaves
 *	  exactly as the UPDATE, else through SPI, with the plans this backend
 *	  keeps per counter table.
 *
 * An SPI UPDATE per increment would cost a fifth of the server's CPU in a
 * pgbench of idempotent_increment: plan cache checks, executor start-up
 * and shutdown, a GUC save and restore.
 * The direct path does what the executor does for that UPDATE, and
 * nothing else: after the same permission check as the UPDATE's
 * (ExecCheckRTPerms on the same columns), it finds the shard row with the
 * statement's snapshot (where this backend last wrote it, else through the
 * primary key: "Where the shard rows are" below), adds the delta with
 * int8pl's overflow check, and writes the new version as ExecUpdate does
 * (stored generated columns, constraints, the tuple, index entries unless
 * HOT), with ExecUpdate's answers to a concurrent writer of the row: wait
 * for it, then in READ COMMITTED go on with the newest version (as
 * EvalPlanQual does), in REPEATABLE READ and SERIALIZABLE fail with 40001.
 *
 * Where it could not behave as the UPDATE does, the ordinary UPDATE runs
 * through SPI (FBF_DIRECT_UNSUPPORTED): see direct_shape (counter_rel.c)
 * and direct_allowed.  A row that does not exist yet is created by the SPI
 * upsert (FBF_DIRECT_NO_ROW).  Privileges, row security and triggers
 * apply as for any UPDATE.
 *
 * Locks: the caller holds RowExclusiveLock on the table (FbfCounterOpen);
 * the direct path takes the row lock the UPDATE would (waiting for a
 * concurrent writer of the row), with no buffer lock of the window held.
 *
 * Backend-local state: the plan cache (plan_cache, in TopMemoryContext),
 * one entry per counter table and qualified name.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_operator_d.h"
#include "catalog/pg_type_d.h"
#include "common/hashfn.h"
#include "common/int.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "storage/bufmgr.h"
#include "storage/smgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "common/fbf_htab.h"
#include "counter/counter.h"
#include "window/window.h"

/* What add_direct did. */
typedef enum FbfDirectResult
{
	FBF_DIRECT_APPLIED,			/* the delta is added */
	FBF_DIRECT_NO_ROW,			/* no (key, shard) row: insert it */
	FBF_DIRECT_UNSUPPORTED		/* nothing done: run the UPDATE */
} FbfDirectResult;

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

/* ----------------------------------------------------------------------
 * Where the shard rows are: the versions this backend wrote last
 * ----------------------------------------------------------------------
 */

/*
 * Every increment a backend makes to a key adds to the same shard row, and
 * the version it wrote last is, as long as no other backend wrote the row
 * since, the version the next increment's snapshot sees.  So the backend
 * keeps where it wrote each row (row_places) and looks there first,
 * instead of descending the primary key: a fetch at a known TID, as
 * ctid = '(b,o)' fetches one.  A place is only a guess: the version found
 * there is used if it is visible to the statement's snapshot and holds the
 * same key and shard (row_matches), and then it is the row the primary
 * key would have found (a unique index: one version of (key, shard) at
 * most is visible to an MVCC snapshot).  Otherwise, and for any place on
 * a block past the table's end (a VACUUM truncated it, or a rewrite gave
 * the table new storage), the primary key is searched as before.  Nothing
 * needs invalidating: a stale place only costs that search.
 *
 * The places form a set-associative array, FBF_ROW_PLACE_SETS sets of
 * FBF_ROW_PLACE_WAYS, most recently used first; 64 kB a backend, allocated
 * at the first increment.  A serializable transaction searches the
 * primary key always, for the predicate lock its scan takes.
 */
#define FBF_ROW_PLACE_SETS	1024	/* a power of 2 */
#define FBF_ROW_PLACE_WAYS	4

typedef struct RowPlace
{
	Oid			relid;			/* InvalidOid: unused */
	uint32		hash;			/* of the key and shard */
	ItemPointerData tid;		/* the version this backend wrote last */
} RowPlace;

static RowPlace *row_places = NULL;

static uint32
row_place_hash(Oid relid, text *key, int32 shard)
{
	uint32		h = hash_bytes((const unsigned char *) VARDATA_ANY(key),
							   VARSIZE_ANY_EXHDR(key));

	h = hash_combine(h, hash_uint32((uint32) shard));
	return hash_combine(h, hash_uint32(relid));
}

/* the set of ways `hash` maps to */
static RowPlace *
row_place_set(uint32 hash)
{
	if (row_places == NULL)
		row_places = MemoryContextAllocZero(TopMemoryContext,
											sizeof(RowPlace) * FBF_ROW_PLACE_SETS *
											FBF_ROW_PLACE_WAYS);
	return &row_places[(hash & (FBF_ROW_PLACE_SETS - 1)) * FBF_ROW_PLACE_WAYS];
}

/* where this backend wrote the row last, or NULL if it does not know */
static ItemPointer
row_place_find(Oid relid, uint32 hash)
{
	RowPlace   *set = row_place_set(hash);
	int			i;

	for (i = 0; i < FBF_ROW_PLACE_WAYS; i++)
		if (set[i].relid == relid && set[i].hash == hash)
			return &set[i].tid;
	return NULL;
}

/* the row's new place, first in its set (the least recently used goes) */
static void
row_place_remember(Oid relid, uint32 hash, ItemPointer tid)
{
	RowPlace   *set = row_place_set(hash);
	int			i;

	for (i = 0; i < FBF_ROW_PLACE_WAYS - 1; i++)
		if (set[i].relid == relid && set[i].hash == hash)
			break;
	memmove(&set[1], &set[0], sizeof(RowPlace) * i);
	set[0].relid = relid;
	set[0].hash = hash;
	set[0].tid = *tid;
}

/*
 * Whether the heap has block `blkno`.  The size this backend's storage
 * manager cached is a lower bound: the table can only have grown since,
 * for a VACUUM that truncates it or a rewrite needs an exclusive lock, and
 * the truncation's invalidation, taken in with our own lock, drops the
 * cached size (a rewrite's gives new storage).  Only a block past it costs
 * asking the kernel.
 */
static bool
heap_has_block(Relation heap, BlockNumber blkno)
{
	BlockNumber known = RelationGetSmgr(heap)->smgr_cached_nblocks[MAIN_FORKNUM];

	if (known != InvalidBlockNumber && blkno < known)
		return true;
	return blkno < RelationGetNumberOfBlocks(heap);
}

/*
 * The (key, shard) row visible to `snapshot` if it is the version at
 * `tid`, into `slot` (which keeps its buffer pinned).  The page is pruned
 * first, as an index scan prunes the pages it fetches from, so that a
 * row updated only here keeps its updates HOT.
 */
static bool
fetch_row_at(Relation heap, FbfCounterRel *entry, Snapshot snapshot,
			 ItemPointer tid, Datum key, int32 shard, TupleTableSlot *slot)
{
	BlockNumber blkno = ItemPointerGetBlockNumber(tid);
	Buffer		buf;
	bool		found;

	if (!heap_has_block(heap, blkno))
		return false;
	buf = ReadBuffer(heap, blkno);
	heap_page_prune_opt(heap, buf);
	found = table_tuple_fetch_row_version(heap, tid, snapshot, slot) &&
		row_matches(entry, slot, key, shard);
	ReleaseBuffer(buf);
	return found;
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
static FbfDirectResult
add_direct(Relation heap, text *key, int32 shard, int64 delta)
{
	FbfCounterRel *entry;
	EState	   *estate;
	MemoryContext oldcxt;
	Bitmapset  *selected;
	ResultRelInfo *relinfo;
	Relation	pk;
	TupleTableSlot *oldslot;
	TupleTableSlot *newslot;
	Snapshot	snapshot;
	uint32		place_hash;
	ItemPointer place;
	bool		found;
	bool		applied = false;

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

	/*
	 * The primary key, to find the row, locked as a freshly planned UPDATE
	 * locks it, until the transaction ends; the table's other indexes only
	 * when an update needs entries in them (FbfTupleUpdateWithIndexes: not
	 * HOT, or from 16 on HOT but changing a summarized column), where the
	 * executor opens them all before its first row, and for this call
	 * only.  The table's lock keeps every index from being marked
	 * not-ready or dropped meanwhile.
	 */
	pk = index_open(entry->pk_index, RowExclusiveLock);
	Assert(pk->rd_index->indrelid == RelationGetRelid(heap));

	oldslot = table_slot_create(heap, &estate->es_tupleTable);
	newslot = table_slot_create(heap, &estate->es_tupleTable);

	place_hash = row_place_hash(RelationGetRelid(heap), key, shard);
	place = entry->heap_am && !IsolationIsSerializable() ?
		row_place_find(RelationGetRelid(heap), place_hash) : NULL;
	found = (place != NULL &&
			 fetch_row_at(heap, entry, snapshot, place, PointerGetDatum(key),
						  shard, oldslot)) ||
		find_shard_row(heap, pk, entry, snapshot, PointerGetDatum(key),
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
			row_place_remember(RelationGetRelid(heap), place_hash,
							   &newslot->tts_tid);
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
	index_close(pk, NoLock);
	ExecResetTupleTable(estate->es_tupleTable, false);
	MemoryContextSwitchTo(oldcxt);
	FreeExecutorState(estate);
	PopActiveSnapshot();

	/* as SPI after the statement: the transaction's next command sees it */
	CommandCounterIncrement();
	return applied ? FBF_DIRECT_APPLIED : FBF_DIRECT_NO_ROW;
}

/* ----------------------------------------------------------------------
 * Through SPI: the plans, the UPDATE, the upsert, the sum
 * ----------------------------------------------------------------------
 */

typedef struct CounterPlans
{
	Oid			relid;			/* hash key */
	char	   *qualname;		/* the name the plans were made for */
	SPIPlanPtr	update;
	SPIPlanPtr	upsert;
	SPIPlanPtr	sum;
} CounterPlans;

static HTAB *plan_cache = NULL;

static SPIPlanPtr
prepare(const char *sql, int nargs, Oid *types)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, types);

	if (plan == NULL)
		elog(ERROR, "fbf: SPI_prepare failed for \"%s\": %s", sql,
			 SPI_result_code_string(SPI_result));
	SPI_keepplan(plan);
	return plan;
}

/*
 * Plans for a counter table, made once per backend and table name.  The
 * name (from the relation cache, which a rename invalidates) is checked on
 * every use: a table renamed, or dropped and replaced, gets new plans.
 * The plans are made under the caller's search_path, where any role may
 * have created operators for these types: each operator is pg_catalog's,
 * named (docs/design.md, "search_path").  Must be called inside SPI.
 */
static CounterPlans *
counter_plans(Relation rel)
{
	Oid			relid = RelationGetRelid(rel);
	char	   *qualname = FbfCounterRelGet(rel)->qualname;
	CounterPlans *plans;
	CounterPlans fresh;
	bool		found;
	Oid			types[3] = {INT8OID, TEXTOID, INT4OID};

	if (plan_cache == NULL)
		plan_cache = FbfHashCreate("fbf counter plans", 16, sizeof(Oid),
								   sizeof(CounterPlans), TopMemoryContext);
	plans = hash_search(plan_cache, &relid, HASH_FIND, &found);
	if (found && strcmp(plans->qualname, qualname) == 0)
		return plans;
	if (found)
	{
		/* renamed, or replaced: forget the old plans before making new ones */
		SPI_freeplan(plans->update);
		SPI_freeplan(plans->upsert);
		SPI_freeplan(plans->sum);
		pfree(plans->qualname);
		hash_search(plan_cache, &relid, HASH_REMOVE, NULL);
	}

	/* prepare first: an error leaves no half-made entry behind */
	fresh.relid = relid;
	fresh.update = prepare(psprintf("UPDATE %s SET value = value OPERATOR(pg_catalog.+) $1 "
									"WHERE key OPERATOR(pg_catalog.=) $2 AND shard OPERATOR(pg_catalog.=) $3",
									qualname), 3, types);
	fresh.upsert = prepare(psprintf("INSERT INTO %s AS c (key, shard, value) VALUES ($2, $3, $1) "
									"ON CONFLICT (key, shard) DO UPDATE "
									"SET value = c.value OPERATOR(pg_catalog.+) excluded.value",
									qualname), 3, types);
	fresh.sum = prepare(psprintf("SELECT pg_catalog.sum(value)::pg_catalog.int8 FROM %s "
								 "WHERE key OPERATOR(pg_catalog.=) $1",
								 qualname), 1, &types[1]);
	fresh.qualname = MemoryContextStrdup(TopMemoryContext, qualname);
	plans = hash_search(plan_cache, &relid, HASH_ENTER, NULL);
	*plans = fresh;
	return plans;
}

/*
 * Run one of a counter's plans.  Every statement looks up rows by the full
 * primary key, so an index scan is always right; but a counter table is
 * typically analyzed while still empty, and a generic plan made from those
 * statistics would scan the whole table on every increment until the next
 * ANALYZE.  So plans are made (and remade) with sequential scans off, for
 * the duration of the statement only.
 */
static int
execute_counter_plan(SPIPlanPtr plan, Datum *args, bool read_only, long count)
{
	int			save_nestlevel = NewGUCNestLevel();
	int			rc;

	(void) set_config_option("enable_seqscan", "off", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	rc = SPI_execute_plan(plan, args, NULL, read_only, count);
	AtEOXact_GUC(true, save_nestlevel);
	return rc;
}

/*
 * Add delta to this backend's shard row of `key`, creating it if needed.
 * The common case, the row exists: the direct path (add_direct,
 * an UPDATE without SPI), unless row security applies to the user (`rls`)
 * or the table has anything else the direct path leaves to the UPDATE;
 * then the UPDATE through SPI.  No row: an upsert through SPI.
 */
void
FbfCounterAddDelta(Relation heap, text *key, int64 delta, int shards,
				   bool rls)
{
	CounterPlans *plans;
	Datum		args[3];
	int			rc;
	int32		shard = FbfMyProcNumber % shards;
	FbfDirectResult direct = FBF_DIRECT_UNSUPPORTED;

	if (!rls)
		direct = add_direct(heap, key, shard, delta);
	if (direct == FBF_DIRECT_APPLIED)
		return;

	args[0] = Int64GetDatum(delta);
	args[1] = PointerGetDatum(key);
	args[2] = Int32GetDatum(shard);

	SPI_connect();
	plans = counter_plans(heap);
	if (direct == FBF_DIRECT_UNSUPPORTED)
	{
		rc = execute_counter_plan(plans->update, args, false, 0);
		if (rc != SPI_OK_UPDATE)
			elog(ERROR, "fbf: counter update failed: %s", SPI_result_code_string(rc));
	}
	if (direct == FBF_DIRECT_NO_ROW || SPI_processed == 0)
	{
		rc = execute_counter_plan(plans->upsert, args, false, 0);
		if (rc != SPI_OK_INSERT)
			elog(ERROR, "fbf: counter insert failed: %s", SPI_result_code_string(rc));
	}
	SPI_finish();
}

/*
 * The sum of `key`'s shard rows (0 if none), as the user's SELECT
 * sum(value) would see them: with the calling statement's snapshot if
 * `read_only`, else after making this transaction's changes visible, with
 * a new snapshot in READ COMMITTED, as a following statement would.
 */
int64
FbfCounterSum(Relation heap, text *key, bool read_only)
{
	CounterPlans *plans;
	Datum		arg = PointerGetDatum(key);
	bool		isnull;
	Datum		value;
	int			rc;

	SPI_connect();
	plans = counter_plans(heap);
	rc = execute_counter_plan(plans->sum, &arg, read_only, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "fbf: counter read failed: %s", SPI_result_code_string(rc));
	value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	SPI_finish();
	return isnull ? 0 : DatumGetInt64(value);
}
