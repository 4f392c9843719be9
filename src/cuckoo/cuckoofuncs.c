/*-------------------------------------------------------------------------
 *
 * cuckoofuncs.c
 *	  SQL functions to inspect a cuckoo index: cuckoo_index_stats(), and
 *	  the opening of an index for it and for cuckoo_index_verify()
 *	  (cuckooverify.c).
 *
 * cuckoo_index_stats() reads every page under share locks, one at a time,
 * and wants SELECT on the table; cuckoo_index_verify() holds a ShareLock
 * on the table and wants its owner.  Both refuse before they queue for
 * any lock (CuckooOpenForCheck).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "commands/defrem.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "cuckoo.h"

PG_FUNCTION_INFO_V1(cuckoo_index_stats);

/*
 * Open a cuckoo index for cuckoo_index_stats() or cuckoo_index_verify(),
 * and its table with "heaplock" (taken first, as index_open's callers
 * must), the index with AccessShareLock.
 *
 * Everything that can refuse the call is checked before a lock is
 * queued, from the catalog alone: that the relation is an index of the
 * cuckoo access method, not another session's temporary one, and that
 * the user may do this.  Reading the pages (stats) wants SELECT on the
 * table; verify's ShareLock, which holds off every writer of the table
 * for the whole check, wants its owner ("owner"), as REINDEX does: a role
 * that may only read must not be able to make writers queue.  Once the
 * table is locked, the index is checked to still belong to it (it could
 * have been dropped, and its OID reused, in between), as amcheck does.
 */
Relation
CuckooOpenForCheck(Oid indexoid, LOCKMODE heaplock, bool owner, Relation *heap)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(indexoid));
	Form_pg_class form;
	Oid			amoid = get_index_am_oid("cuckoo", true);
	char	   *name;
	Oid			heapoid;
	Relation	index;

	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", indexoid)));
	form = (Form_pg_class) GETSTRUCT(tup);
	name = pstrdup(NameStr(form->relname));
	if (form->relkind != RELKIND_INDEX)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not an index", name)));
	if (!OidIsValid(amoid) || form->relam != amoid)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a cuckoo index", name)));
	if (form->relpersistence == RELPERSISTENCE_TEMP &&
		isOtherTempNamespace(form->relnamespace))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot access temporary indexes of other sessions")));
	ReleaseSysCache(tup);

	heapoid = IndexGetRelation(indexoid, true);
	if (!OidIsValid(heapoid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("could not open the table of index \"%s\"", name)));
	if (owner)
	{
		if (!FbfClassOwnercheck(heapoid, GetUserId()))
			aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(heapoid));
	}
	else
	{
		AclResult	aclresult = pg_class_aclcheck(heapoid, GetUserId(), ACL_SELECT);

		if (aclresult != ACLCHECK_OK)
			aclcheck_error(aclresult, OBJECT_TABLE, get_rel_name(heapoid));
	}

	*heap = table_open(heapoid, heaplock == NoLock ? AccessShareLock : heaplock);
	if (IndexGetRelation(indexoid, true) != heapoid)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("could not open the table of index \"%s\"", name)));
	index = index_open(indexoid, AccessShareLock);
	/* the name checked above is the extension's access method: its handler */
	if (index->rd_indam->ambuild != cuckoobuild)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a cuckoo index",
						RelationGetRelationName(index))));
	return index;
}

/*
 * cuckoo_index_stats(index regclass): sizes, load and counters, from one
 * pass over the pages under share locks (a consistent picture only of an
 * idle index).
 */
Datum
cuckoo_index_stats(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	Relation	heap;
	Relation	index = CuckooOpenForCheck(indexoid, NoLock, false, &heap);
	TupleDesc	tupdesc;
	CuckooMetaPageData meta;
	CuckooLayout layout;
	BlockNumber nblocks;
	int64		bucket_pages = 0,
				overflow_pages = 0,
				entries = 0,
				overflow_entries = 0,
				killed = 0,
				kicks = 0,
				bucket_slots_used = 0;
	BufferAccessStrategy strategy = GetAccessStrategy(BAS_BULKREAD);
	Datum		values[15];
	bool		nulls[15] = {0};
	int			i = 0;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	CuckooReadMeta(index, &meta, &layout);

	nblocks = RelationGetNumberOfBlocks(index);
	for (BlockNumber blkno = CUCKOO_METAPAGE_BLKNO + 1; blkno < nblocks; blkno++)
	{
		Buffer		buf;
		Page		page;
		CuckooPageOpaque opaque;
		const uint8 *block;

		CHECK_FOR_INTERRUPTS();
		buf = ReadBufferExtended(index, MAIN_FORKNUM, blkno, RBM_NORMAL, strategy);
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		if (CuckooIsPage(page, CUCKOO_BUCKET | CUCKOO_OVERFLOW | CUCKOO_POSTING))
		{
			int64		rows = 0;

			opaque = CuckooPageGetOpaque(page);
			block = CuckooPageGetBlock(page);
			/* rows: slots that are not refs (pointers, links) */
			for (uint32 s = 0; s < cuckoo_nslots(&layout); s++)
			{
				if (!cuckoo_slot_used(&layout, block, s) ||
					CuckooTidIsRef(cuckoo_slot_tid(&layout, block, s)))
					continue;
				rows++;
				if (cuckoo_slot_killed(&layout, block, s))
					killed++;
			}
			if (opaque->flags & CUCKOO_BUCKET)
			{
				bucket_pages++;
				entries += rows;
				bucket_slots_used += opaque->nentries;
				kicks += opaque->nkicks;
			}
			else
			{
				/* overflow pages of bucket pages, and posting pages */
				overflow_pages++;
				overflow_entries += rows;
			}
		}
		UnlockReleaseBuffer(buf);
	}
	FreeAccessStrategy(strategy);

	values[i++] = Int64GetDatum((int64) nblocks);
	values[i++] = Int64GetDatum(bucket_pages);
	values[i++] = Int64GetDatum(overflow_pages);
	values[i++] = Int64GetDatum(entries + overflow_entries);
	values[i++] = Int64GetDatum(overflow_entries);
	values[i++] = Int64GetDatum(killed);
	values[i++] = Int64GetDatum(bucket_pages * (int64) cuckoo_nslots(&layout));
	values[i++] = Float8GetDatum(bucket_pages > 0 ?
								 (double) bucket_slots_used / ((double) bucket_pages * cuckoo_nslots(&layout)) : 0.0);
	values[i++] = Int64GetDatum(kicks);
	values[i++] = Int32GetDatum((int32) meta.generation);
	values[i++] = Int32GetDatum((int32) meta.fingerprint_bits);
	values[i++] = Int32GetDatum((int32) meta.bucket_size);
	values[i++] = Int32GetDatum((int32) meta.nbuckets);
	values[i++] = Int32GetDatum((int32) meta.max_kicks);
	values[i++] = BoolGetDatum(meta.growing != 0);
	Assert(i == lengthof(values));

	index_close(index, AccessShareLock);
	table_close(heap, AccessShareLock);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* ---- verify ---- */

/* Where an entry is: which kind of page, and where a lookup finds it */
