/*-------------------------------------------------------------------------
 *
 * cuckoovacuum.c
 *	  VACUUM of a cuckoo index: true cuckoo deletion of dead TIDs.
 *
 * Bulk delete visits every page in physical order, one page locked at a
 * time, and empties the slots whose TIDs VACUUM reports dead; the slots
 * are free for the next insert at once.  Killed slots (kill_prior_tuple
 * hints) are always dead TIDs too, and go the same way.  Posting lists
 * are vacuumed from their pointers, with the bucket page locked: inserts
 * move entries into and between lists under that lock, so a physical
 * pass over posting pages could miss an entry moved behind it (and the
 * heap would then reuse its TID).  A list emptied at its head loses its
 * pointer in the same record, before another list can take its id there;
 * a list that lost entries is tidied (cuckoopost.c), freeing posting pages
 * into the free space map.  The bucket page's lock holds interrupts off,
 * so the walk stops between two pages for a cancel, and lets it in with
 * the bucket page unlocked (vacuum_lists).
 *
 * Split steps run while VACUUM is between pages (a doubling proceeds an
 * insert at a time), but they only move entries forward in block order:
 * step q copies page q to pages 2q and 2q + 1, and a logical page's block
 * grows with its number (extents are appended at the end of the index).
 * An entry moved from a page not yet visited lands on one not yet
 * visited; one moved from a visited page was checked there.  So one pass
 * suffices, however long the doubling runs beside it, provided it also
 * visits the blocks added while it ran (a doubling's new extent): it
 * re-reads the index's length when it reaches the end.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/fbf_xlog.h"
#include "commands/vacuum.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/indexfsm.h"
#include "utils/rel.h"

#include "cuckoo.h"

/*
 * A list of the bucket page being vacuumed, as its path is walked.
 */
typedef struct ListWalk
{
	BlockNumber next;			/* page to visit next: its head first, then
								 * the page each link names */
	uint32		tag;			/* its list tag */
	uint32		ptr;			/* its pointer's slot in the bucket page */
	uint32		hops;			/* pages visited: a cycle check */
	uint32		removed;		/* its entries removed from the page visited */
	uint32		kept;			/* its entries left in the page visited */
	uint32		room;			/* free slots of the page visited */
	bool		tidy;			/* CuckooListVacuum has work in it */
	bool		dropped;		/* its pointer went, the list empty at its
								 * head (vacuum_page) */
} ListWalk;

/* qsort: by the page to visit, then by tag */
static int
list_walk_cmp(const void *a, const void *b)
{
	const ListWalk *x = (const ListWalk *) a;
	const ListWalk *y = (const ListWalk *) b;

	if (x->next != y->next)
		return x->next < y->next ? -1 : 1;
	if (x->tag != y->tag)
		return x->tag < y->tag ? -1 : 1;
	return 0;
}

/* The list of "lists" (nlists of them, sorted by tag) with "tag", or NULL */
static ListWalk *
find_list(ListWalk *lists, int nlists, uint32 tag)
{
	int			lo = 0;
	int			hi = nlists;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (lists[mid].tag == tag)
			return &lists[mid];
		if (lists[mid].tag < tag)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/*
 * Empty the slots of "buf" (exclusively locked) that hold dead TIDs and
 * count the others.  With "lists" (nlists of them, sorted by tag, all at
 * this page), only the slots of those lists: a posting page is shared by
 * the lists of many keys.  Each list's "next" becomes the page its link
 * here names, or InvalidBlockNumber at the end of its path, and its
 * "removed" and "kept" count its entries removed and left here.
 *
 * A list left with nothing at its head ("buf" is its first page, hops 1),
 * neither an entry nor a link, is empty: its pointer in bucket page
 * "bucket" (exclusively locked) is dropped in the same record, while the
 * head is locked, and the list marked "dropped".  The moment the head
 * holds nothing of a list's tag, new_list_id (cuckoopost.c) may give its
 * id to another key's new list there; a pointer still naming it would
 * then share that list, and a move of its own list (move_list) would take
 * the other key's entries along and leave that key's pointer naming
 * nothing.  (A head that links on carries the tag in its link.)
 *
 * One WAL record if anything changed.
 */
static void
vacuum_page(Relation index, Buffer buf, Buffer bucket, const CuckooLayout *layout,
			ListWalk *lists, int nlists, IndexBulkDeleteResult *stats,
			IndexBulkDeleteCallback callback, void *callback_state)
{
	const uint8 *block = CuckooPageGetBlock(BufferGetPage(buf));
	uint32	   *dead = NULL;
	uint32		ndead = 0;
	int			ndropped = 0;
	FbfXLogState *state;
	Page		page;
	Page		bpage = NULL;

	for (int i = 0; i < nlists; i++)
	{
		lists[i].next = InvalidBlockNumber;
		lists[i].removed = 0;
		lists[i].kept = 0;
	}
	for (uint32 s = 0; s < cuckoo_nslots(layout); s++)
	{
		const uint8 *tid;
		ListWalk   *list = NULL;

		if (!cuckoo_slot_used(layout, block, s))
			continue;
		tid = cuckoo_slot_tid(layout, block, s);
		if (lists)
		{
			list = find_list(lists, nlists, cuckoo_slot_tag(layout, block, s));
			if (list == NULL)
				continue;
			if (CuckooTidIsRef(tid))
			{
				list->next = CuckooRefBlock(tid);
				continue;
			}
		}
		else if (CuckooTidIsRef(tid))
			continue;			/* refs name pages, not rows */
		if (callback && callback((ItemPointer) tid, callback_state))
		{
			if (dead == NULL)
				dead = palloc(sizeof(uint32) * cuckoo_nslots(layout));
			dead[ndead++] = s;
			if (list)
				list->removed++;
		}
		else
		{
			stats->num_index_tuples += 1;
			if (list)
				list->kept++;
		}
	}
	for (int i = 0; i < nlists; i++)
	{
		/*
		 * Two pointers of one bucket page naming one list (a corruption
		 * cuckoo_index_verify reports) share its counts here: leave them to
		 * the tidy, which counts each again.
		 */
		bool		twin = (i > 0 && lists[i - 1].tag == lists[i].tag) ||
			(i + 1 < nlists && lists[i + 1].tag == lists[i].tag);

		lists[i].dropped = lists[i].hops == 1 && lists[i].kept == 0 &&
			!BlockNumberIsValid(lists[i].next) && !twin;
		ndropped += lists[i].dropped;
	}
	if (ndead == 0 && ndropped == 0)
		return;

	/* the bucket page first: the lock order (cuckoopost.c) */
	state = FbfXLogStart(index);
	if (ndropped > 0)
		bpage = FbfXLogRegisterBuffer(state, bucket, 0);
	page = FbfXLogRegisterBuffer(state, buf, 0);
	CuckooSetShape(page, layout);
	for (uint32 i = 0; i < ndead; i++)
		cuckoo_slot_clear(layout, CuckooPageGetBlock(page), dead[i]);
	CuckooPageGetOpaque(page)->nentries -= ndead;
	for (int i = 0; i < nlists; i++)
	{
		if (lists[i].dropped)
			CuckooDropPointer(layout, bpage, page, lists[i].ptr);
	}
	FbfXLogFinish(state);
	if (bpage)
		CuckooPageChanged(index, bucket);
	CuckooPageChanged(index, buf);
	stats->tuples_removed += ndead;
	if (dead)
		pfree(dead);
}

/*
 * Visit the posting page where "lists" (nlists of them, sorted by tag,
 * their pointers in bucket page "buf") are: vacuum their slots there and
 * move each to its next page.  A list empty at its head goes with its
 * pointer there (vacuum_page).  A list whose entries went, or that
 * CuckooListVacuum would change (this page holds none of its entries, or
 * they fit in the room of the page before), is marked to be tidied.
 */
static void
vacuum_list_page(Relation index, Buffer buf, const CuckooLayout *layout,
				 BlockNumber nblocks, ListWalk *lists, int nlists,
				 IndexBulkDeleteResult *stats,
				 IndexBulkDeleteCallback callback, void *callback_state)
{
	BlockNumber blkno = lists[0].next;
	bool		bad = blkno == CUCKOO_METAPAGE_BLKNO || blkno >= nblocks;
	bool		dropped = false;
	Buffer		pbuf;

	for (int i = 0; i < nlists; i++)
		bad |= ++lists[i].hops > nblocks;
	if (bad)
		FbfReportUnexpectedPage(index, blkno,
								"A posting list's link is out of range or cycles.");

	/*
	 * No cost-based nap here: it would hold the bucket page's lock as long,
	 * and every insert and lookup of its keys with it (recent minor
	 * releases of PostgreSQL, 15.20 among them, skip the nap while
	 * interrupts are held off; older ones take it).  The cost the walk
	 * runs up is paid, as far as one nap goes, at the pass's next page
	 * (vacuum_pass).
	 */
	pbuf = ReadBuffer(index, blkno);
	LockBuffer(pbuf, BUFFER_LOCK_EXCLUSIVE);
	CuckooCheckPage(index, pbuf, CUCKOO_POSTING);
	vacuum_page(index, pbuf, buf, layout, lists, nlists, stats,
				callback, callback_state);
	for (int i = 0; i < nlists; i++)
	{
		ListWalk   *list = &lists[i];

		dropped |= list->dropped;
		if (list->dropped)
			list->tidy = false;
		else if (list->removed > 0 || list->kept == 0 ||
				 (list->hops > 1 && list->kept <= list->room))
			list->tidy = true;
		list->room = cuckoo_nslots(layout) -
			CuckooPageGetOpaque(BufferGetPage(pbuf))->nentries;
	}
	if (dropped)
		CuckooRecordSpace(index, layout, blkno, BufferGetPage(pbuf));
	UnlockReleaseBuffer(pbuf);
}

/*
 * Walk the lists of the pointers of bucket page "buf" (exclusively
 * locked): every page of each list, exclusively locked in path order,
 * loses the list's dead entries; then, where any went, the lists are
 * tidied (cuckoopost.c).  Entries move into and between lists only under
 * their bucket page's lock, which we hold: none can slip behind the walk.
 *
 * Heads are shared by the lists of many keys, and pages after a head
 * belong to one list (cuckoopost.c): so the lists that share a head are
 * vacuumed there in one pass over its slots, then each list's own pages
 * one by one.  A list left empty at its head loses its pointer there, in
 * the record that empties it (vacuum_page).  Of the others, only the lists
 * that lost entries, or that a tidy would change all the same (left so by
 * an earlier walk: a crash between the two, or a walk stopped for a
 * cancel), are tidied.  Only one posting page is locked at a time.
 *
 * The bucket page's lock holds interrupts off, and one key's lists can
 * run to millions of entries: so the walk, and the tidies, stop between
 * two pages when a cancel waits that only this lock holds off
 * (FbfCancelWaiting), and return false.  Every removal and every
 * unlinking is a record of its own, with the pointer it leaves nothing
 * for dropped in it, so what a stop leaves is whole, as a crash there
 * would leave it: each list's head still carries its tag (an entry, or
 * the link to its next page), or the list is gone with its pointer.
 */
static bool
walk_lists(Relation index, Buffer buf, const CuckooLayout *layout,
		   IndexBulkDeleteResult *stats,
		   IndexBulkDeleteCallback callback, void *callback_state)
{
	const uint8 *bblock = CuckooPageGetBlock(BufferGetPage(buf));
	BlockNumber nblocks = RelationGetNumberOfBlocks(index);
	ListWalk   *lists = NULL;
	int			nlists = 0;
	bool		done = true;

	for (uint32 s = 0; s < cuckoo_nslots(layout); s++)
	{
		const uint8 *ref;

		if (!cuckoo_slot_used(layout, bblock, s) ||
			!CuckooTidIsRef(cuckoo_slot_tid(layout, bblock, s)))
			continue;
		if (lists == NULL)
			lists = palloc(sizeof(ListWalk) * cuckoo_nslots(layout));
		ref = cuckoo_slot_tid(layout, bblock, s);
		lists[nlists].next = CuckooRefBlock(ref);
		lists[nlists].tag = CuckooListTag(cuckoo_tag_fp(cuckoo_slot_tag(layout, bblock, s)),
										  CuckooRefId(ref));
		lists[nlists].hops = 0;
		lists[nlists].ptr = s;
		lists[nlists].room = 0;
		lists[nlists].tidy = false;
		nlists++;
	}
	if (nlists == 0)
		return true;

	qsort(lists, nlists, sizeof(ListWalk), list_walk_cmp);
	for (int first = 0, end; first < nlists && done; first = end)
	{
		for (end = first + 1; end < nlists && lists[end].next == lists[first].next; end++)
			;
		vacuum_list_page(index, buf, layout, nblocks, lists + first, end - first,
						 stats, callback, callback_state);
		for (int i = first; i < end && done; i++)
			while (BlockNumberIsValid(lists[i].next))
			{
				if (FbfCancelWaiting(1))
				{
					done = false;
					break;
				}
				vacuum_list_page(index, buf, layout, nblocks, lists + i, 1,
								 stats, callback, callback_state);
			}
	}
	for (int i = 0; i < nlists && done; i++)
	{
		if (lists[i].tidy)
			done = CuckooListVacuum(index, layout, buf, lists[i].ptr);
	}
	pfree(lists);
	return done;
}

/*
 * The lists of bucket page "buf" (exclusively locked, and so on return):
 * walk_lists, and if it stops for a cancel, let the cancel in with the
 * page unlocked, which throws.
 */
static void
vacuum_lists(Relation index, Buffer buf, const CuckooLayout *layout,
			 IndexBulkDeleteResult *stats,
			 IndexBulkDeleteCallback callback, void *callback_state)
{
	if (walk_lists(index, buf, layout, stats, callback, callback_state))
		return;
	LockBuffer(buf, BUFFER_LOCK_UNLOCK);
	CHECK_FOR_INTERRUPTS();
	elog(ERROR, "cuckoo: a pending cancel was not processed");
}

/*
 * One physical pass over the index.  With a callback, empty the slots of
 * dead TIDs; in any case count the entries that remain.  A live bucket
 * page takes its lists along (vacuum_lists); posting pages are otherwise
 * visited only to count (no callback) and to tell the free space map
 * what they offer.
 */
static void
vacuum_pass(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
			const CuckooLayout *layout,
			IndexBulkDeleteCallback callback, void *callback_state)
{
	Relation	index = info->index;
	BlockNumber nblocks = RelationGetNumberOfBlocks(index);

	stats->num_index_tuples = 0;
	for (BlockNumber blkno = CUCKOO_METAPAGE_BLKNO + 1;; blkno++)
	{
		Buffer		buf;
		Page		page;
		uint16		flags;

		/* a doubling that began meanwhile added blocks: visit them too */
		if (blkno >= nblocks)
		{
			nblocks = RelationGetNumberOfBlocks(index);
			if (blkno >= nblocks)
				break;
		}

		FbfVacuumDelayPoint();
		buf = ReadBufferExtended(index, MAIN_FORKNUM, blkno, RBM_NORMAL,
								 info->strategy);
		LockBuffer(buf, callback ? BUFFER_LOCK_EXCLUSIVE : BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		if (!CuckooIsPage(page, CUCKOO_BUCKET | CUCKOO_OVERFLOW | CUCKOO_POSTING))
		{
			UnlockReleaseBuffer(buf);
			continue;
		}
		flags = CuckooPageGetOpaque(page)->flags;
		if (!(flags & CUCKOO_POSTING) || !callback)
			vacuum_page(index, buf, InvalidBuffer, layout, NULL, 0, stats,
						callback, callback_state);
		/* a page moved by a split: its pointers' copies are in the halves */
		if ((flags & CUCKOO_BUCKET) && !(flags & CUCKOO_MOVED) && callback)
			vacuum_lists(index, buf, layout, stats, callback, callback_state);
		if (flags & CUCKOO_POSTING)
			CuckooRecordSpace(index, layout, blkno, BufferGetPage(buf));
		UnlockReleaseBuffer(buf);
	}
	stats->num_pages = nblocks;
}

IndexBulkDeleteResult *
cuckoobulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
				 IndexBulkDeleteCallback callback, void *callback_state)
{
	Relation	index = info->index;
	CuckooMetaPageData meta;
	CuckooLayout layout;

	if (stats == NULL)
		stats = (IndexBulkDeleteResult *) palloc0(sizeof(IndexBulkDeleteResult));

	CuckooReadMeta(index, &meta, &layout);
	vacuum_pass(info, stats, &layout, callback, callback_state);
	IndexFreeSpaceMapVacuum(index);
	return stats;
}

IndexBulkDeleteResult *
cuckoovacuumcleanup(IndexVacuumInfo *info, IndexBulkDeleteResult *stats)
{
	CuckooMetaPageData meta;
	CuckooLayout layout;

	if (info->analyze_only)
		return stats;

	/* bulk delete counted already; otherwise count now */
	if (stats == NULL)
	{
		stats = (IndexBulkDeleteResult *) palloc0(sizeof(IndexBulkDeleteResult));
		CuckooReadMeta(info->index, &meta, &layout);
		vacuum_pass(info, stats, &layout, NULL, NULL);
	}
	return stats;
}
