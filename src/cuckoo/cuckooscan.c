/*-------------------------------------------------------------------------
 *
 * cuckooscan.c
 *	  Index and bitmap scans of a cuckoo index.
 *
 * A scan hashes its key, finds the key's bucket page under the metapage
 * share lock, and copies out every entry with the key's tag from the
 * key's two buckets (and from the overflow chain, if the page's summary
 * says the tag may be there) before it unlocks the page.  Tags are lossy,
 * so every TID is returned with recheck set.
 *
 * kill_prior_tuple: when the executor reports that a returned TID is dead
 * to every transaction, the scan marks its slot killed (a hint bit, like
 * btree's LP_DEAD) when it is done with the page's matches.  Later scans
 * skip killed slots, so lookups of deleted keys stop visiting the heap
 * before VACUUM comes.  A scan that must see killed entries (one that
 * began during recovery: the primary's horizon is not the standby's)
 * ignores the bits.
 *
 * Direction.  The matches are copied once, so a scan walks them either
 * way (amcanbackward): so->cur is the item last returned, -1 before the
 * first and nitems after the last, as a cursor's position is; a step
 * forward or backward from either end re-enters the list, as MOVE
 * BACKWARD after MOVE FORWARD ALL needs.  Nothing on the pages is held
 * between calls, whatever the direction: the TIDs of a match may be
 * returned again long after they were read, by then removed by VACUUM
 * and even reused by the heap.  That is safe for the same reason a
 * forward scan's copies are: every TID is returned with recheck and
 * fetched under the scan's MVCC snapshot, to which a row inserted after
 * the VACUUM that freed its TID is invisible (btree drops its pins on
 * the same grounds; only a scan under a non-MVCC snapshot would need
 * them, and such scans of a cuckoo index run forward, once).  An item
 * reported dead is noted once (kill_noted), however often a scroll
 * passes it, and kill_items still checks the page's LSN before marking.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relscan.h"
#include "miscadmin.h"
#include "nodes/tidbitmap.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "cuckoo.h"

IndexScanDesc
cuckoobeginscan(Relation r, int nkeys, int norderbys)
{
	IndexScanDesc scan = RelationGetIndexScan(r, nkeys, norderbys);
	CuckooScanOpaque so = palloc0(sizeof(CuckooScanOpaqueData));

	so->maxitems = 16;
	so->items = palloc(sizeof(CuckooScanItem) * so->maxitems);
	so->killed = palloc(sizeof(int) * so->maxitems);
	scan->opaque = so;
	return scan;
}

static void
add_item(CuckooScanOpaque so, const CuckooLayout *layout, Buffer buf,
		 uint32 slot)
{
	Page		page = BufferGetPage(buf);
	const uint8 *block = CuckooPageGetBlock(page);
	CuckooScanItem *item;

	if (so->nitems == so->maxitems)
	{
		so->maxitems *= 2;
		so->items = repalloc_huge(so->items, sizeof(CuckooScanItem) * so->maxitems);
		so->killed = repalloc_huge(so->killed, sizeof(int) * so->maxitems);
	}
	item = &so->items[so->nitems++];
	memcpy(&item->tid, cuckoo_slot_tid(layout, block, slot), sizeof(ItemPointerData));
	item->blkno = BufferGetBlockNumber(buf);
	item->slot = (uint16) slot;
	item->tag = cuckoo_slot_tag(layout, block, slot);
	item->lsn = BufferGetLSNAtomic(buf);
	item->kill_noted = false;
}

/* CuckooListSearch's visitor: an entry of a key's list */
static void
visit_list_entry(void *arg, Buffer buf, uint32 slot)
{
	CuckooScanOpaque so = (CuckooScanOpaque) arg;

	add_item(so, &so->layout, buf, slot);
}

/*
 * Mark the slots of the items the executor reported dead.  Only a hint:
 * done under a share lock and not WAL-logged.
 *
 * The scan holds no lock or pin between reading a page and marking it, so
 * the slot may have changed meanwhile: VACUUM may have emptied it and a
 * new row with the same key may have taken both the freed heap TID and the
 * freed slot, the same tag and TID but a live tuple.  So, as btree's
 * _bt_killitems does, a page whose LSN moved since it was read is left
 * alone: every change of a page moves its LSN (fbf's WAL, or a fake LSN
 * for unlogged and temporary indexes: CuckooPageChanged), and an LSN never
 * goes back, so no count of VACUUMs or doublings can bring it round again.
 * (A page changed by an insert is left alone too; its kills wait for the
 * next scan that finds the dead rows.)
 */
static void
kill_items(IndexScanDesc scan)
{
	CuckooScanOpaque so = (CuckooScanOpaque) scan->opaque;
	Relation	index = scan->indexRelation;
	CuckooLayout layout;

	if (so->nkilled == 0)
		return;

	/* items exist only after a search, which noted the layout */
	layout = so->layout;

	for (int i = 0; i < so->nkilled; i++)
	{
		CuckooScanItem *item = &so->items[so->killed[i]];
		Buffer		buf = ReadBuffer(index, item->blkno);
		Page		page;
		uint8	   *block;

		LockBuffer(buf, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		block = CuckooPageGetBlock(page);
		if (CuckooIsPage(page, CUCKOO_BUCKET | CUCKOO_OVERFLOW | CUCKOO_POSTING) &&
			BufferGetLSNAtomic(buf) == item->lsn &&
			item->slot < cuckoo_nslots(&layout) &&
			cuckoo_slot_used(&layout, block, item->slot) &&
			cuckoo_slot_tag(&layout, block, item->slot) == item->tag &&
			memcmp(cuckoo_slot_tid(&layout, block, item->slot), &item->tid,
				   sizeof(ItemPointerData)) == 0 &&
			!cuckoo_slot_killed(&layout, block, item->slot))
		{
			cuckoo_slot_set_killed(&layout, block, item->slot);
			MarkBufferDirtyHint(buf, true);
		}
		UnlockReleaseBuffer(buf);
	}
	so->nkilled = 0;
}

void
cuckoorescan(IndexScanDesc scan, ScanKey scankey, int nscankeys,
			 ScanKey orderbys, int norderbys)
{
	CuckooScanOpaque so = (CuckooScanOpaque) scan->opaque;

	kill_items(scan);
	so->searched = false;
	so->nitems = 0;
	so->cur = -1;
	if (scankey && scan->numberOfKeys > 0)
		memmove(scan->keyData, scankey, scan->numberOfKeys * sizeof(ScanKeyData));
}

/*
 * Lock (share) the bucket page of the key with this hash, and return it
 * with the probe and the layout.
 *
 * With the backend's cached metapage when it can: address the page, lock
 * it, and check that it holds the keys of that addressing (its generation
 * stamp, not split since: CuckooPageHolds).  If not, the cache is stale:
 * refresh it and try once more.  Failing that (a doubling running under
 * us), or for an index whose pages are not all stamped (built by fbf 1.0,
 * not doubled since), the metapage's way: lock it, address, lock the page,
 * unlock the metapage, as no doubling can run meanwhile.
 */
static Buffer
lock_bucket_page(Relation index, uint64 hash, CuckooProbe *probe,
				 CuckooLayout *layout)
{
	CuckooMetaCache cache = CuckooGetMetaCache(index, false);
	Buffer		metabuf;
	CuckooMetaPage meta;
	Buffer		buf;

	for (int attempt = 0; attempt < 2 && cache.meta.stamped; attempt++)
	{
		CuckooLocate(&cache.meta, &cache.layout, hash, probe);
		buf = ReadBuffer(index, CuckooPageBlock(&cache.meta, probe->page));
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		CuckooCheckPage(index, buf, CUCKOO_BUCKET);
		if (CuckooPageHolds(BufferGetPage(buf), probe->generation))
		{
			*layout = cache.layout;
			return buf;
		}
		UnlockReleaseBuffer(buf);
		if (attempt > 0)
			break;
		cache = CuckooGetMetaCache(index, true);
	}

	metabuf = ReadBuffer(index, CUCKOO_METAPAGE_BLKNO);
	LockBuffer(metabuf, BUFFER_LOCK_SHARE);
	meta = CuckooCheckMetaPage(index, BufferGetPage(metabuf));
	CuckooCacheMeta(index, meta);
	CuckooMetaLayout(meta, layout);
	CuckooLocate(meta, layout, hash, probe);
	buf = ReadBuffer(index, CuckooPageBlock(meta, probe->page));
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	UnlockReleaseBuffer(metabuf);
	CuckooCheckPage(index, buf, CUCKOO_BUCKET);
	return buf;
}

/*
 * Append the entries of the key with this hash to so->items: its page's
 * two buckets, and the page's overflow chain if the summary admits it.
 */
static void
search_hash(IndexScanDesc scan, uint64 hash)
{
	CuckooScanOpaque so = (CuckooScanOpaque) scan->opaque;
	Relation	index = scan->indexRelation;
	bool		skip_killed = scan->ignore_killed_tuples;
	Buffer		buf;
	CuckooLayout layout;
	CuckooProbe probe;
	Page		page;
	BlockNumber next;
	uint32		slots[2 * CUCKOO_MAX_BUCKET_SIZE];
	int			nfound;

	buf = lock_bucket_page(index, hash, &probe, &layout);
	so->layout = layout;
	page = BufferGetPage(buf);

	nfound = cuckoo_block_find(&layout, CuckooPageGetBlock(page), probe.tag,
							   probe.first, skip_killed, slots);
	for (int i = 0; i < nfound; i++)
	{
		const uint8 *tid = cuckoo_slot_tid(&layout, CuckooPageGetBlock(page), slots[i]);

		/* a pointer: the key's rows are in its list */
		if (CuckooTidIsRef(tid))
			CuckooListSearch(index, &layout,
							 CuckooListTag(cuckoo_tag_fp(cuckoo_slot_tag(&layout, CuckooPageGetBlock(page),
																		 slots[i])),
										   CuckooRefId(tid)),
							 CuckooRefBlock(tid), skip_killed, visit_list_entry, so);
		else
			add_item(so, &layout, buf, slots[i]);
	}

	/*
	 * The chain, if the summary admits the tag.  The bucket page stays
	 * share-locked, so no insert of this key can slip into the chain behind
	 * our back.  Chain entries do not move in a doubling, so their rest bits
	 * are not kept current: only fingerprints are compared there.
	 */
	next = (CuckooPageGetOpaque(page)->summary & cuckoo_summary_bit(probe.tag)) ?
		CuckooPageGetOpaque(page)->overflow : InvalidBlockNumber;
	while (BlockNumberIsValid(next))
	{
		Buffer		obuf = ReadBuffer(index, next);
		Page		opage;
		const uint8 *oblock;

		LockBuffer(obuf, BUFFER_LOCK_SHARE);
		CuckooCheckPage(index, obuf, CUCKOO_OVERFLOW);
		opage = BufferGetPage(obuf);
		oblock = CuckooPageGetBlock(opage);
		for (uint32 s = 0; s < cuckoo_nslots(&layout); s++)
		{
			if (cuckoo_slot_used(&layout, oblock, s) &&
				cuckoo_tag_fp(cuckoo_slot_tag(&layout, oblock, s)) ==
				cuckoo_tag_fp(probe.tag) &&
				!(skip_killed && cuckoo_slot_killed(&layout, oblock, s)))
				add_item(so, &layout, obuf, s);
		}
		next = CuckooPageGetOpaque(opage)->overflow;
		UnlockReleaseBuffer(obuf);
	}
	UnlockReleaseBuffer(buf);
}

static int
item_cmp(const void *a, const void *b)
{
	return ItemPointerCompare(&((CuckooScanItem *) a)->tid,
							  &((CuckooScanItem *) b)->tid);
}

/*
 * Collect the entries matching the scan keys into so->items.  One key
 * drives the lookup, an equality if there is one, else an "= ANY (array)"
 * whose elements are looked up in turn; the executor's recheck applies
 * every key to every row.
 */
static void
search(IndexScanDesc scan)
{
	CuckooScanOpaque so = (CuckooScanOpaque) scan->opaque;
	Relation	index = scan->indexRelation;
	ScanKey		key = NULL;
	FmgrInfo	cross;
	FmgrInfo   *proc;
	ArrayType  *array;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *elem_nulls;
	int			nelems;

	so->searched = true;
	so->nitems = 0;
	so->cur = -1;
	for (int i = 0; i < scan->numberOfKeys; i++)
	{
		ScanKey		k = &scan->keyData[i];

		if (k->sk_flags & SK_ISNULL)
			return;				/* "col = NULL" matches nothing */
		if (key == NULL || ((key->sk_flags & SK_SEARCHARRAY) &&
							!(k->sk_flags & SK_SEARCHARRAY)))
			key = k;
	}
	if (key == NULL)
		return;

	if (!(key->sk_flags & SK_SEARCHARRAY))
	{
		search_hash(scan, CuckooHashDatum(index, key->sk_subtype,
										  key->sk_collation, key->sk_argument));
		return;
	}

	/* one lookup of the hash function for all the elements */
	proc = CuckooHashProc(index, key->sk_subtype, &cross);
	array = DatumGetArrayTypeP(key->sk_argument);
	get_typlenbyvalalign(ARR_ELEMTYPE(array), &typlen, &typbyval, &typalign);
	deconstruct_array(array, ARR_ELEMTYPE(array), typlen, typbyval, typalign,
					  &elems, &elem_nulls, &nelems);
	for (int i = 0; i < nelems; i++)
	{
		if (elem_nulls[i])
			continue;
		search_hash(scan, DatumGetUInt64(FunctionCall2Coll(proc, key->sk_collation,
														   elems[i],
														   Int64GetDatum(0))));
	}

	/* an element given twice must not return its rows twice */
	if (so->nitems > 1)
	{
		int			n = 1;

		qsort(so->items, so->nitems, sizeof(CuckooScanItem), item_cmp);
		for (int i = 1; i < so->nitems; i++)
			if (!ItemPointerEquals(&so->items[i].tid, &so->items[n - 1].tid))
				so->items[n++] = so->items[i];
		so->nitems = n;
	}
}

/*
 * amgettuple: the next match in the scan's direction.  The first call
 * collects the matches (search); a backward first call starts from the
 * end.  The executor's kill_prior_tuple refers to the item returned last
 * (so->cur), whichever way the scan went.
 */
bool
cuckoogettuple(IndexScanDesc scan, ScanDirection dir)
{
	CuckooScanOpaque so = (CuckooScanOpaque) scan->opaque;

	if (!so->searched)
	{
		pgstat_count_index_scan(scan->indexRelation);
		search(scan);
		if (ScanDirectionIsBackward(dir))
			so->cur = so->nitems;
	}
	else if (scan->kill_prior_tuple && so->cur >= 0 && so->cur < so->nitems &&
			 !so->items[so->cur].kill_noted)
	{
		/* each item at most once, so killed[] never outgrows items[] */
		so->items[so->cur].kill_noted = true;
		so->killed[so->nkilled++] = so->cur;
	}

	if (ScanDirectionIsBackward(dir))
		so->cur = Max(so->cur - 1, -1);
	else
		so->cur = Min(so->cur + 1, so->nitems);

	if (so->cur < 0 || so->cur >= so->nitems)
	{
		kill_items(scan);
		return false;
	}
	scan->xs_heaptid = so->items[so->cur].tid;
	scan->xs_recheck = true;
	return true;
}

int64
cuckoogetbitmap(IndexScanDesc scan, TIDBitmap *tbm)
{
	CuckooScanOpaque so = (CuckooScanOpaque) scan->opaque;

	pgstat_count_index_scan(scan->indexRelation);
	search(scan);
	for (int i = 0; i < so->nitems; i++)
		tbm_add_tuples(tbm, &so->items[i].tid, 1, true);
	return so->nitems;
}

void
cuckooendscan(IndexScanDesc scan)
{
	CuckooScanOpaque so = (CuckooScanOpaque) scan->opaque;

	kill_items(scan);
	pfree(so->items);
	pfree(so->killed);
	pfree(so);
	scan->opaque = NULL;
}
