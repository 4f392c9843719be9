/*-------------------------------------------------------------------------
 *
 * cuckoopost.c
 *	  Posting lists of a cuckoo index: the rows of a key that its two
 *	  buckets cannot hold, behind one pointer slot.
 *
 * A key whose two buckets are full of its own entries would otherwise
 * spill them to its page's overflow chain, which every other key of the
 * page then pays for.  Instead, as btree's deduplication keeps one key and
 * many TIDs, the key's entries leave its buckets for a *list* in posting
 * pages, and one slot of its buckets becomes a *pointer* to the list
 * (cuckoo.h, "Refs"): a ref slot with the key's tag, so that only lookups
 * of that key (and the rare tag collisions) read the list, and it moves
 * with kicks and splits like any entry, taking the whole list with it.
 *
 * A list is a path of posting pages: its head, named by the pointer, then
 * pages reached by *links*.  In every page it has slots in, a list is
 * named by its list tag (CuckooListTag: the key's fingerprint and an id
 * chosen unique in its head page when the list is made), and each page
 * holds at most one link per list, so a list's pages form one path and
 * nothing else leads into them but that path (and the pointer).
 *
 *	  head     any posting page with room when the list was made: the
 *	           head is shared by the lists of many keys (a key with a few
 *	           rows more than its buckets hold costs a few slots, not a
 *	           page);
 *	  later    when the head is full, a new page of the list alone goes
 *	           right after the head (its link moves there), so a key with r
 *	           rows reads its bucket page, the head and about r / (slots
 *	           per page) pages, whatever the order rows came in.
 *
 * The pointer keeps its head, so the copies a split makes of a pointer
 * whose tag has no rest bits left (cuckoo_table.h) name the same path.
 *
 * Free space.  A posting page records its references (pointers and links
 * to it, opaque->nrefs; copies of an exhausted pointer are not counted, so
 * such a list's head is never freed).  A page with no entries and no
 * references is free.  VACUUM (CuckooListVacuum) unlinks a list's pages
 * that hold none of its entries, merges a page into the previous one when
 * it fits, drops the pointer of an empty list, and records free pages and
 * pages with room in the free space map, from which new lists and list
 * pages are taken before the index is extended.
 *
 * Locking.  A list is changed with its key's bucket page exclusively
 * locked, then its pages in path order (exclusive); pages taken from the
 * free space map are locked conditionally (another inserter may hold them
 * as its own list's pages), and a busy one is passed over.  Readers hold
 * the bucket page shared and lock each next page before they release the
 * page whose link they followed (VACUUM unlinks a page holding both the
 * page before it and the page, exclusively), so no reader follows a link
 * to a page that is freed under it.  Each change is one WAL record of at
 * most three pages (bucket page, page, next page).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "common/fbf_xlog.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/freespace.h"
#include "utils/rel.h"

#include "cuckoo.h"

/* FSM value of a free posting page: above any page with entries */
#define FREE_PAGE_SPACE		MaxHeapTupleSize

/* Tries of the free space map before extending the index */
#define FSM_TRIES			4

/* A list of at most 1/CUCKOO_LIST_SMALL of a page moves rather than grows */
#define CUCKOO_LIST_SMALL	4

static inline Size
slot_bytes(const CuckooLayout *layout)
{
	return layout->tag_bytes + CUCKOO_TID_BYTES;
}

static inline bool
page_is_free(Page page)
{
	CuckooPageOpaque opaque = CuckooPageGetOpaque(page);

	return opaque->nentries == 0 && opaque->nrefs == 0;
}

/*
 * Tell the free space map what a posting page (locked) offers: a free page
 * ranks above every page with entries, so that a request for a free page
 * is one for FREE_PAGE_SPACE bytes.
 */
void
CuckooRecordSpace(Relation index, const CuckooLayout *layout,
				  BlockNumber blkno, Page page)
{
	CuckooPageOpaque opaque = CuckooPageGetOpaque(page);
	Size		avail;

	if (page_is_free(page))
		avail = FREE_PAGE_SPACE;
	else
		avail = (Size) (cuckoo_nslots(layout) - opaque->nentries) * slot_bytes(layout);
	RecordPageWithFreeSpace(index, blkno, Min(avail, FREE_PAGE_SPACE));
}

/*
 * A posting page, exclusively locked, with room for "need" slots, or (with
 * free_only) a free one.  From the free space map if it has one whose lock
 * is not taken; else a new page at the end of the index.  *fresh says
 * whether the page must be initialised (new) or made a posting page
 * again (free).
 */
static Buffer
page_with_room(Relation index, const CuckooLayout *layout, uint32 need,
			   bool free_only, Buffer held, bool *fresh)
{
	Size		space = free_only ? FREE_PAGE_SPACE : need * slot_bytes(layout);
	Buffer		buf;

	for (int i = 0; i < FSM_TRIES; i++)
	{
		BlockNumber blkno = GetPageWithFreeSpace(index, space);
		Page		page;

		if (!BlockNumberIsValid(blkno) || blkno == CUCKOO_METAPAGE_BLKNO ||
			blkno >= RelationGetNumberOfBlocks(index))
			break;
		if (BufferIsValid(held) && blkno == BufferGetBlockNumber(held))
		{
			/* the page the caller holds (and found full) */
			CuckooRecordSpace(index, layout, blkno, BufferGetPage(held));
			continue;
		}
		buf = ReadBuffer(index, blkno);
		if (!ConditionalLockBuffer(buf))
		{
			/* someone's list page right now: do not wait, do not forget it */
			ReleaseBuffer(buf);
			break;
		}
		page = BufferGetPage(buf);
		if (CuckooIsPage(page, CUCKOO_POSTING) &&
			(page_is_free(page) ||
			 (!free_only &&
			  CuckooPageGetOpaque(page)->nentries + need <= cuckoo_nslots(layout))))
		{
			*fresh = page_is_free(page);
			return buf;
		}
		/* the map was stale: correct it and try again */
		if (CuckooIsPage(page, CUCKOO_POSTING))
			CuckooRecordSpace(index, layout, blkno, page);
		else
			RecordPageWithFreeSpace(index, blkno, 0);
		UnlockReleaseBuffer(buf);
	}
	*fresh = true;
	return FbfNewBuffer(index);
}

/*
 * Posting page "buf" (exclusive-locked, from page_with_room) in the change
 * "state": its copy to modify, a full image made an empty posting page if
 * the page is "fresh".
 */
static Page
posting_page_in(FbfXLogState *state, Buffer buf, bool fresh,
				const CuckooLayout *layout)
{
	Page		page = CuckooChangePage(state, buf, fresh ? FBF_XLOG_FULL_IMAGE : 0);

	if (fresh)
		CuckooInitSlotPage(page, CUCKOO_POSTING, layout);
	return page;
}

/* The slot of a page holding this list's link, or -1. */
static int
find_link(const CuckooLayout *layout, const uint8 *block, uint32 list_tag)
{
	for (uint32 s = 0; s < cuckoo_nslots(layout); s++)
		if (cuckoo_slot_used(layout, block, s) &&
			cuckoo_slot_tag(layout, block, s) == list_tag &&
			CuckooTidIsRef(cuckoo_slot_tid(layout, block, s)))
			return (int) s;
	return -1;
}

/* A slot of a page holding one of this list's entries, or -1. */
static int
find_entry(const CuckooLayout *layout, const uint8 *block, uint32 list_tag)
{
	for (uint32 s = 0; s < cuckoo_nslots(layout); s++)
		if (cuckoo_slot_used(layout, block, s) &&
			cuckoo_slot_tag(layout, block, s) == list_tag &&
			!CuckooTidIsRef(cuckoo_slot_tid(layout, block, s)))
			return (int) s;
	return -1;
}

/* Append a slot to a posting page (copy); the page must have room. */
static void
page_append(const CuckooLayout *layout, Page page, uint32 tag,
			const uint8 *tid, bool killed)
{
	int			s = cuckoo_block_append(layout, CuckooPageGetBlock(page), tag, tid);

	if (s < 0)
		elog(ERROR, "posting page of a cuckoo index has a wrong entry count");
	if (killed)
		cuckoo_slot_set_killed(layout, CuckooPageGetBlock(page), (uint32) s);
	CuckooPageGetOpaque(page)->nentries++;
}

/*
 * Append (list_tag, tid) to posting page "buf" (exclusive-locked, with
 * room), in a record of its own.  The caller keeps the lock.
 */
static void
append_logged(Relation index, const CuckooLayout *layout, Buffer buf,
			  uint32 list_tag, ItemPointer tid, bool wal)
{
	FbfXLogState *state = CuckooChangeStart(index, wal);

	page_append(layout, CuckooChangePage(state, buf, 0), list_tag,
				(const uint8 *) tid, false);
	CuckooChangeFinish(index, state, &buf, 1);
}

/*
 * Record the room of posting page "buf" (locked by the caller) in the free
 * space map and make it visible to searches at once: raising a page's
 * value reaches the map's upper levels only when they are vacuumed.  For a
 * page that has just become able to take more lists.
 */
static void
publish_space(Relation index, const CuckooLayout *layout, Buffer buf)
{
	BlockNumber blkno = BufferGetBlockNumber(buf);

	CuckooRecordSpace(index, layout, blkno, BufferGetPage(buf));
	FreeSpaceMapVacuumRange(index, blkno, blkno + 1);
}

/*
 * Put a new page of list "list_tag" right after its full head "hbuf"
 * (exclusively locked, the list's id "id"), holding the two slots "first"
 * and "second" (a TID or a link, and its killed bit) in that order, and
 * make slot "slot" of the head its link, in place of what it held.  One
 * record: head, new page.  The caller keeps the head's lock.
 */
static void
page_after_head(Relation index, const CuckooLayout *layout, Buffer hbuf,
				uint32 id, uint32 list_tag, uint32 slot,
				const uint8 *first, bool first_killed,
				const uint8 *second, bool second_killed, bool wal)
{
	bool		fresh;
	Buffer		nbuf = page_with_room(index, layout, 2, true, InvalidBuffer, &fresh);
	FbfXLogState *state;
	Page		h;
	Page		npage;
	ItemPointerData ref_n;
	Buffer		bufs[2];

	CuckooMakeRef(&ref_n, BufferGetBlockNumber(nbuf), id);
	state = CuckooChangeStart(index, wal);
	h = CuckooChangePage(state, hbuf, 0);
	npage = posting_page_in(state, nbuf, fresh, layout);
	CuckooPageGetOpaque(npage)->nrefs = 1;
	page_append(layout, npage, list_tag, first, first_killed);
	page_append(layout, npage, list_tag, second, second_killed);
	cuckoo_slot_put(layout, CuckooPageGetBlock(h), slot, list_tag,
					(const uint8 *) &ref_n);
	CuckooSetShape(h, layout);
	bufs[0] = hbuf;
	bufs[1] = nbuf;
	CuckooChangeFinish(index, state, bufs, 2);
	UnlockReleaseBuffer(nbuf);
}

/* Slots of a page (block) of list "list_tag": entries, and its link if any. */
static uint32
count_list(const CuckooLayout *layout, const uint8 *block, uint32 list_tag,
		   int *link)
{
	uint32		n = 0;

	*link = -1;
	for (uint32 s = 0; s < cuckoo_nslots(layout); s++)
	{
		if (!cuckoo_slot_used(layout, block, s) ||
			cuckoo_slot_tag(layout, block, s) != list_tag)
			continue;
		if (CuckooTidIsRef(cuckoo_slot_tid(layout, block, s)))
			*link = (int) s;
		else
			n++;
	}
	return n;
}

static uint32 new_list_id(const CuckooLayout *layout, Page page, uint32 fp,
						  uint32 hint);

/*
 * Move the small list "list_tag" (c entries, no link) out of its full head
 * "hbuf" to a page with room for them and (tid), and point the pointer in
 * slot "ptr" of the bucket page "buf" there.  One record: bucket page, old
 * head, new head.
 */
static void
move_list(Relation index, const CuckooLayout *layout, Buffer buf, uint32 ptr,
		  Buffer hbuf, uint32 list_tag, uint32 c, ItemPointer tid, bool wal)
{
	const uint8 *bblock = CuckooPageGetBlock(BufferGetPage(buf));
	uint32		ptag = cuckoo_slot_tag(layout, bblock, ptr);
	bool		fresh;
	Buffer		tbuf = page_with_room(index, layout, c + 1, false, hbuf, &fresh);
	FbfXLogState *state = CuckooChangeStart(index, wal);
	Page		b = CuckooChangePage(state, buf, 0);
	Page		h = CuckooChangePage(state, hbuf, 0);
	Page		t = posting_page_in(state, tbuf, fresh, layout);
	uint32		id;
	uint32		new_tag;
	ItemPointerData ref;
	Buffer		bufs[3];

	id = new_list_id(layout, t, cuckoo_tag_fp(ptag), cuckoo_tag_rest(ptag) >> 1);
	new_tag = CuckooListTag(cuckoo_tag_fp(ptag), id);
	for (uint32 s = 0; s < cuckoo_nslots(layout); s++)
	{
		uint8	   *hb = CuckooPageGetBlock(h);

		if (!cuckoo_slot_used(layout, hb, s) ||
			cuckoo_slot_tag(layout, hb, s) != list_tag)
			continue;
		Assert(!CuckooTidIsRef(cuckoo_slot_tid(layout, hb, s)));
		page_append(layout, t, new_tag, cuckoo_slot_tid(layout, hb, s),
					cuckoo_slot_killed(layout, hb, s));
		cuckoo_slot_clear(layout, hb, s);
		CuckooPageGetOpaque(h)->nentries--;
	}
	page_append(layout, t, new_tag, (const uint8 *) tid, false);
	CuckooPageGetOpaque(h)->nrefs--;
	CuckooPageGetOpaque(t)->nrefs++;
	CuckooMakeRef(&ref, BufferGetBlockNumber(tbuf), id);
	cuckoo_slot_put(layout, CuckooPageGetBlock(b), ptr, ptag, (const uint8 *) &ref);
	CuckooSetShape(b, layout);
	CuckooSetShape(h, layout);
	bufs[0] = buf;
	bufs[1] = hbuf;
	bufs[2] = tbuf;
	CuckooChangeFinish(index, state, bufs, 3);

	/* both pages may take more lists: make their room visible at once */
	publish_space(index, layout, hbuf);
	if (fresh)
		publish_space(index, layout, tbuf);
	UnlockReleaseBuffer(tbuf);
}

/* The pointer slot of the key's buckets matching the probe, or -1. */
static int
find_pointer(const CuckooLayout *layout, const uint8 *block,
			 const CuckooProbe *probe)
{
	uint32		slots[2 * CUCKOO_MAX_BUCKET_SIZE];
	int			n = cuckoo_block_find(layout, block, probe->tag, probe->first,
									  false, slots);

	for (int i = 0; i < n; i++)
		if (CuckooTidIsRef(cuckoo_slot_tid(layout, block, slots[i])))
			return (int) slots[i];
	return -1;
}

/*
 * If the key's buckets in the exclusively locked bucket page "buf" hold a
 * pointer matching the probe, append (tid) to its list and return true.
 * False if there is none (or, rarely, if the list cannot take it: see
 * below); nothing is then changed.
 */
bool
CuckooListAppend(Relation index, const CuckooLayout *layout, Buffer buf,
				 const CuckooProbe *probe, ItemPointer tid, bool wal)
{
	const uint8 *block = CuckooPageGetBlock(BufferGetPage(buf));
	int			ptr = find_pointer(layout, block, probe);
	const uint8 *ref;
	uint32		ptag;
	uint32		list_tag;
	Buffer		hbuf;
	Page		hpage;
	int			link;

	if (ptr < 0)
		return false;
	ref = cuckoo_slot_tid(layout, block, (uint32) ptr);
	ptag = cuckoo_slot_tag(layout, block, (uint32) ptr);
	list_tag = CuckooListTag(cuckoo_tag_fp(ptag), CuckooRefId(ref));

	hbuf = ReadBuffer(index, CuckooRefBlock(ref));
	LockBuffer(hbuf, BUFFER_LOCK_EXCLUSIVE);
	CuckooCheckPage(index, hbuf, CUCKOO_POSTING);
	hpage = BufferGetPage(hbuf);

	/* room in the head */
	if (CuckooPageGetOpaque(hpage)->nentries < cuckoo_nslots(layout))
	{
		append_logged(index, layout, hbuf, list_tag, tid, wal);
		UnlockReleaseBuffer(hbuf);
		return true;
	}

	link = find_link(layout, CuckooPageGetBlock(hpage), list_tag);
	if (link >= 0)
	{
		/* room in the page after the head, the newest of the list */
		Buffer		ebuf = ReadBuffer(index,
									  CuckooRefBlock(cuckoo_slot_tid(layout, CuckooPageGetBlock(hpage),
																	 (uint32) link)));
		ItemPointerData ref_e;

		LockBuffer(ebuf, BUFFER_LOCK_EXCLUSIVE);
		CuckooCheckPage(index, ebuf, CUCKOO_POSTING);
		if (CuckooPageGetOpaque(BufferGetPage(ebuf))->nentries < cuckoo_nslots(layout))
		{
			append_logged(index, layout, ebuf, list_tag, tid, wal);
			UnlockReleaseBuffer(ebuf);
			UnlockReleaseBuffer(hbuf);
			return true;
		}

		/* a new page between the head and that one, carrying the link */
		CuckooMakeRef(&ref_e, BufferGetBlockNumber(ebuf), CuckooRefId(ref));
		page_after_head(index, layout, hbuf, CuckooRefId(ref), list_tag,
						(uint32) link, (const uint8 *) &ref_e, false,
						(const uint8 *) tid, false, wal);
		UnlockReleaseBuffer(ebuf);
		UnlockReleaseBuffer(hbuf);
		return true;
	}
	else
	{
		/* the head is full and the list has no page after it: make one */
		int			e = find_entry(layout, CuckooPageGetBlock(hpage), list_tag);
		const uint8 *hblock = CuckooPageGetBlock(hpage);
		bool		exhausted = cuckoo_tag_rest(ptag) == CUCKOO_REST_EMPTY;

		uint32		c = count_list(layout, hblock, list_tag, &link);

		/*
		 * A small list (or none of it: VACUUM emptied it) leaves the full
		 * head for a page with room for it and the new entry: the pointer
		 * moves, and the list stays in one page while it is small, however
		 * its rows and other keys' rows were interleaved.  Not if the
		 * pointer may have copies in other bucket pages, which would keep
		 * the old head: such a list grows after its head, and one with
		 * nothing there leaves the entry to the caller.
		 */
		if (!exhausted && c + 1 <= cuckoo_nslots(layout) / CUCKOO_LIST_SMALL)
		{
			move_list(index, layout, buf, (uint32) ptr, hbuf, list_tag, c, tid, wal);
			UnlockReleaseBuffer(hbuf);
			return true;
		}
		if (e < 0)
		{
			UnlockReleaseBuffer(hbuf);
			return false;
		}

		/* one of its entries makes way for the link */
		page_after_head(index, layout, hbuf, CuckooRefId(ref), list_tag,
						(uint32) e, (const uint8 *) tid, false,
						cuckoo_slot_tid(layout, hblock, (uint32) e),
						cuckoo_slot_killed(layout, hblock, (uint32) e), wal);
		UnlockReleaseBuffer(hbuf);
		return true;
	}
}

/* An id for a new list unused by the lists of this page (locked). */
static uint32
new_list_id(const CuckooLayout *layout, Page page, uint32 fp, uint32 hint)
{
	const uint8 *block = CuckooPageGetBlock(page);

	for (uint32 i = 0; i < CUCKOO_LIST_IDS; i++)
	{
		uint32		id = (hint + i) % CUCKOO_LIST_IDS;
		uint32		tag = CuckooListTag(fp, id);
		bool		used = false;

		for (uint32 s = 0; s < cuckoo_nslots(layout) && !used; s++)
			used = cuckoo_slot_used(layout, block, s) &&
				cuckoo_slot_tag(layout, block, s) == tag;
		if (!used)
			return id;
	}
	/* a page has far fewer slots than ids */
	elog(ERROR, "no free list id in a posting page of a cuckoo index");
	return 0;
}

/*
 * Make a list of "group" (ngroup slots of the exclusively locked bucket
 * page "buf", in the key's two buckets, matched by "ptag") and, if "tid",
 * of one new entry, and leave a pointer with tag "ptag" in the group's
 * first slot.
 */
static void
make_list(Relation index, const CuckooLayout *layout, Buffer buf,
		  const uint32 *group, int ngroup, uint32 ptag, ItemPointer tid,
		  bool wal)
{
	const uint8 *block = CuckooPageGetBlock(BufferGetPage(buf));
	uint32		need = (uint32) ngroup + (tid ? 1 : 0);
	bool		fresh;
	Buffer		hbuf = page_with_room(index, layout, need, false, InvalidBuffer, &fresh);
	FbfXLogState *state;
	Page		b;
	Page		h;
	uint32		id;
	uint32		list_tag;
	ItemPointerData ref;
	Buffer		bufs[2];

	state = CuckooChangeStart(index, wal);
	b = CuckooChangePage(state, buf, 0);
	h = posting_page_in(state, hbuf, fresh, layout);
	CuckooSetShape(b, layout);
	CuckooSetShape(h, layout);
	id = new_list_id(layout, h, cuckoo_tag_fp(ptag), cuckoo_tag_rest(ptag) >> 1);
	list_tag = CuckooListTag(cuckoo_tag_fp(ptag), id);
	for (int i = 0; i < ngroup; i++)
		page_append(layout, h, list_tag, cuckoo_slot_tid(layout, block, group[i]),
					cuckoo_slot_killed(layout, block, group[i]));
	if (tid)
		page_append(layout, h, list_tag, (const uint8 *) tid, false);
	CuckooPageGetOpaque(h)->nrefs++;

	CuckooMakeRef(&ref, BufferGetBlockNumber(hbuf), id);
	for (int i = 1; i < ngroup; i++)
		cuckoo_slot_clear(layout, CuckooPageGetBlock(b), group[i]);
	cuckoo_slot_put(layout, CuckooPageGetBlock(b), group[0], ptag,
					(const uint8 *) &ref);
	CuckooPageGetOpaque(b)->nentries -= (uint16) (ngroup - 1);

	bufs[0] = buf;
	bufs[1] = hbuf;
	CuckooChangeFinish(index, state, bufs, 2);

	/*
	 * A new head is where the next lists go while it has room: make it
	 * visible to searches of the map at once (raising a page's value
	 * reaches the map's upper levels only when they are vacuumed).
	 */
	if (fresh &&
		CuckooPageGetOpaque(BufferGetPage(hbuf))->nentries < cuckoo_nslots(layout))
		publish_space(index, layout, hbuf);
	UnlockReleaseBuffer(hbuf);
}

/* Of two tags matching one key, the one with fewer rest bits left. */
static uint32
shorter_tag(uint32 a, uint32 b)
{
	uint32		ra = cuckoo_tag_rest(a);
	uint32		rb = cuckoo_tag_rest(b);

	return (ra & -ra) >= (rb & -rb) ? a : b;
}

/*
 * The key's buckets in the exclusively locked bucket page "buf" are full.
 * If they hold entries matching the probe, move them and (tid) to a new
 * list and return true.  Otherwise, if they hold two or more entries with
 * one tag (another key's rows), move those to a list, freeing slots for
 * the caller to retry, and return false; also false (nothing changed) if
 * neither.  *room says whether slots were freed.
 *
 * The pointer must match every key whose entries went to the list, now
 * and after any split: its tag is the one of them with the fewest rest
 * bits left (they all agree on those bits, each having matched the probe).
 */
bool
CuckooListCreate(Relation index, const CuckooLayout *layout, Buffer buf,
				 const CuckooProbe *probe, ItemPointer tid, bool wal)
{
	const uint8 *block = CuckooPageGetBlock(BufferGetPage(buf));
	uint32		found[2 * CUCKOO_MAX_BUCKET_SIZE];
	uint32		group[2 * CUCKOO_MAX_BUCKET_SIZE];
	int			nfound;
	int			ngroup = 0;
	uint32		ptag = probe->tag;
	uint32		second;

	nfound = cuckoo_block_find(layout, block, probe->tag, probe->first, false, found);
	for (int i = 0; i < nfound; i++)
	{
		if (CuckooTidIsRef(cuckoo_slot_tid(layout, block, found[i])))
			continue;
		group[ngroup++] = found[i];
		ptag = shorter_tag(ptag, cuckoo_slot_tag(layout, block, found[i]));
	}
	if (ngroup > 0)
	{
		make_list(index, layout, buf, group, ngroup, ptag, tid, wal);
		return true;
	}

	/* another key's duplicates: the largest group of equal tags */
	second = cuckoo_alt_bucket(layout, probe->first, cuckoo_tag_fp(probe->tag));
	for (int pass = 0; pass < 2; pass++)
	{
		uint32		bucket = pass == 0 ? probe->first : second;

		if (pass == 1 && second == probe->first)
			break;
		for (uint32 j = 0; j < layout->bucket_size; j++)
		{
			uint32		s = bucket * layout->bucket_size + j;
			uint32		tag;
			uint32		g[2 * CUCKOO_MAX_BUCKET_SIZE];
			int			n = 0;

			if (!cuckoo_slot_used(layout, block, s) ||
				CuckooTidIsRef(cuckoo_slot_tid(layout, block, s)))
				continue;
			tag = cuckoo_slot_tag(layout, block, s);
			n = cuckoo_block_find(layout, block, tag, bucket, false, g);
			{
				int			m = 0;

				/* only slots of these two buckets, with this very tag */
				for (int k = 0; k < n; k++)
				{
					uint32		b = g[k] / layout->bucket_size;

					if (cuckoo_slot_tag(layout, block, g[k]) == tag &&
						!CuckooTidIsRef(cuckoo_slot_tid(layout, block, g[k])) &&
						(b == probe->first || b == second))
						g[m++] = g[k];
				}
				n = m;
			}
			if (n > ngroup)
			{
				ngroup = n;
				ptag = tag;
				memcpy(group, g, sizeof(uint32) * n);
			}
		}
	}
	if (ngroup >= 2)
		make_list(index, layout, buf, group, ngroup, ptag, NULL, wal);
	return false;
}

/*
 * Visit the entries of the list "list_tag" whose head is "head": every
 * slot of its pages with its tag that is not a link (nor, if skip_killed,
 * killed).  The caller holds the key's bucket page locked (share, at
 * least); each page is share-locked, the next one before this one is
 * released.
 */
void
CuckooListSearch(Relation index, const CuckooLayout *layout, uint32 list_tag,
				 BlockNumber head, bool skip_killed, CuckooListVisit visit,
				 void *arg)
{
	BlockNumber nblocks = RelationGetNumberOfBlocks(index);
	Buffer		buf = ReadBuffer(index, head);
	uint32		hops = 0;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	for (;;)
	{
		const uint8 *block;
		BlockNumber next = InvalidBlockNumber;
		Buffer		nbuf;

		CuckooCheckPage(index, buf, CUCKOO_POSTING);
		block = CuckooPageGetBlock(BufferGetPage(buf));
		for (uint32 s = 0; s < cuckoo_nslots(layout); s++)
		{
			const uint8 *tid;

			if (!cuckoo_slot_used(layout, block, s) ||
				cuckoo_slot_tag(layout, block, s) != list_tag)
				continue;
			tid = cuckoo_slot_tid(layout, block, s);
			if (CuckooTidIsRef(tid))
				next = CuckooRefBlock(tid);
			else if (!(skip_killed && cuckoo_slot_killed(layout, block, s)))
				visit(arg, buf, s);
		}
		if (!BlockNumberIsValid(next))
			break;
		if (++hops > nblocks || next == CUCKOO_METAPAGE_BLKNO || next >= nblocks)
			FbfReportUnexpectedPage(index, next, "A posting list's link is out of range or cycles.");
		nbuf = ReadBuffer(index, next);
		LockBuffer(nbuf, BUFFER_LOCK_SHARE);
		UnlockReleaseBuffer(buf);
		buf = nbuf;
	}
	UnlockReleaseBuffer(buf);
}

/*
 * Drop the pointer in slot "ptr" of bucket page "bucket" to a list left
 * empty, whose head is "head" (both copies being changed in one record;
 * "head" may be NULL for an exhausted pointer, whose copies the head never
 * counted in its nrefs).
 */
void
CuckooDropPointer(const CuckooLayout *layout, Page bucket, Page head,
				  uint32 ptr)
{
	uint8	   *bblock = CuckooPageGetBlock(bucket);

	if (cuckoo_tag_rest(cuckoo_slot_tag(layout, bblock, ptr)) != CUCKOO_REST_EMPTY)
	{
		Assert(head != NULL);
		CuckooPageGetOpaque(head)->nrefs--;
		CuckooSetShape(head, layout);
	}
	cuckoo_slot_clear(layout, bblock, ptr);
	CuckooPageGetOpaque(bucket)->nentries--;
	CuckooSetShape(bucket, layout);
}

/*
 * Tidy one list after VACUUM removed dead entries: the bucket page
 * "buf" and its pointer slot "ptr" (exclusively locked); the pointer is
 * dropped if the list is left empty.
 *
 * Walks the path holding the page before and the page itself, both
 * exclusive: a page holding none of the list's entries is unlinked (its
 * link, if any, moves into the page before), as is one whose entries fit
 * in the page before (they move there).  Then, if the head holds nothing
 * of the list, the list ends (the pointer is dropped) or its next page
 * becomes the head.  A page left with no references and no entries is
 * free; the free space map learns of it.
 *
 * An unlinking that leaves the head with nothing of the list drops the
 * pointer in the unlinking's record: the head holding nothing of the tag,
 * another list could be given its id there (new_list_id), and a pointer
 * still naming it would share that list (cuckoovacuum.c, vacuum_page).
 *
 * Each unlinking is one WAL record, so the walk may stop before any of
 * them and leave a list that is whole, only less tidy: it does, and
 * returns false, when a cancel waits (FbfCancelWaiting), but only while
 * cur still links to a page after it: the head then carries the list's
 * tag, so its id is not given to another list (new_list_id).  Returns
 * true once the list is tidy.
 */
bool
CuckooListVacuum(Relation index, const CuckooLayout *layout, Buffer buf,
				 uint32 ptr)
{
	const uint8 *bblock = CuckooPageGetBlock(BufferGetPage(buf));
	uint32		ptag = cuckoo_slot_tag(layout, bblock, ptr);
	const uint8 *ref = cuckoo_slot_tid(layout, bblock, ptr);
	uint32		list_tag = CuckooListTag(cuckoo_tag_fp(ptag), CuckooRefId(ref));
	bool		exhausted = cuckoo_tag_rest(ptag) == CUCKOO_REST_EMPTY;
	BlockNumber head = CuckooRefBlock(ref);
	Buffer		hbuf = ReadBuffer(index, head);
	Buffer		cur;
	bool		dropped = false;

	LockBuffer(hbuf, BUFFER_LOCK_EXCLUSIVE);
	CuckooCheckPage(index, hbuf, CUCKOO_POSTING);
	cur = hbuf;
	for (;;)
	{
		int			link;
		int			elink;
		uint32		here;
		uint32		nentries;
		Buffer		ebuf;
		Page		epage;
		uint32		room;
		bool		empties;
		FbfXLogState *state;
		Page		b = NULL;
		Page		c;
		Page		e;
		Buffer		bufs[3];
		int			nbufs = 0;

		here = count_list(layout, CuckooPageGetBlock(BufferGetPage(cur)), list_tag, &link);
		if (link < 0)
			break;
		/* the bucket page, the head and cur are locked */
		if (FbfCancelWaiting(cur != hbuf ? 3 : 2))
		{
			if (cur != hbuf)
				UnlockReleaseBuffer(cur);
			UnlockReleaseBuffer(hbuf);
			return false;
		}
		ebuf = ReadBuffer(index, CuckooRefBlock(cuckoo_slot_tid(layout,
																CuckooPageGetBlock(BufferGetPage(cur)),
																(uint32) link)));
		LockBuffer(ebuf, BUFFER_LOCK_EXCLUSIVE);
		CuckooCheckPage(index, ebuf, CUCKOO_POSTING);
		epage = BufferGetPage(ebuf);
		nentries = count_list(layout, CuckooPageGetBlock(epage), list_tag, &elink);
		room = cuckoo_nslots(layout) - CuckooPageGetOpaque(BufferGetPage(cur))->nentries;
		if (nentries > room)
		{
			/* keep it; go on from it */
			if (cur != hbuf)
				UnlockReleaseBuffer(cur);
			cur = ebuf;
			continue;
		}

		/*
		 * Unlink it, its entries (if any) and its link moving to cur; if
		 * that leaves the head with nothing of the list, the pointer goes
		 * too (the bucket page first: the lock order).
		 */
		empties = cur == hbuf && here == 0 && nentries == 0 && elink < 0;
		state = CuckooChangeStart(index, true);
		if (empties)
		{
			b = CuckooChangePage(state, buf, 0);
			bufs[nbufs++] = buf;
		}
		c = CuckooChangePage(state, cur, 0);
		e = CuckooChangePage(state, ebuf, 0);
		cuckoo_slot_clear(layout, CuckooPageGetBlock(c), (uint32) link);
		CuckooPageGetOpaque(c)->nentries--;
		for (uint32 s = 0; s < cuckoo_nslots(layout); s++)
		{
			const uint8 *eb = CuckooPageGetBlock(e);

			if (!cuckoo_slot_used(layout, eb, s) ||
				cuckoo_slot_tag(layout, eb, s) != list_tag)
				continue;
			page_append(layout, c, list_tag, cuckoo_slot_tid(layout, eb, s),
						cuckoo_slot_killed(layout, eb, s));
			cuckoo_slot_clear(layout, CuckooPageGetBlock(e), s);
			CuckooPageGetOpaque(e)->nentries--;
		}
		CuckooPageGetOpaque(e)->nrefs--;
		CuckooSetShape(c, layout);
		CuckooSetShape(e, layout);
		if (empties)
		{
			CuckooDropPointer(layout, b, c, ptr);
			dropped = true;
		}
		bufs[nbufs++] = cur;
		bufs[nbufs++] = ebuf;
		CuckooChangeFinish(index, state, bufs, nbufs);
		CuckooRecordSpace(index, layout, BufferGetBlockNumber(ebuf), BufferGetPage(ebuf));
		UnlockReleaseBuffer(ebuf);
		/* cur now holds the link that was the unlinked page's, if any */
	}
	if (cur != hbuf)
		UnlockReleaseBuffer(cur);

	/* a head left with nothing of the list: the list is empty, or moves on */
	if (!dropped)
	{
		int			link;
		uint32		nentries = count_list(layout, CuckooPageGetBlock(BufferGetPage(hbuf)),
										  list_tag, &link);

		if (nentries == 0 && link < 0)
		{
			FbfXLogState *state = CuckooChangeStart(index, true);
			Page		b = CuckooChangePage(state, buf, 0);
			Page		h = NULL;
			Buffer		bufs[2];
			int			nbufs = 0;

			bufs[nbufs++] = buf;
			/* copies of an exhausted pointer were never counted: keep it */
			if (!exhausted)
			{
				h = CuckooChangePage(state, hbuf, 0);
				bufs[nbufs++] = hbuf;
			}
			CuckooDropPointer(layout, b, h, ptr);
			CuckooChangeFinish(index, state, bufs, nbufs);
		}
		else if (nentries == 0 && !exhausted)
		{
			/* the next page becomes the head: the link's reference moves */
			FbfXLogState *state = CuckooChangeStart(index, true);
			Page		b = CuckooChangePage(state, buf, 0);
			Page		h = CuckooChangePage(state, hbuf, 0);
			const uint8 *lt = cuckoo_slot_tid(layout, CuckooPageGetBlock(h), (uint32) link);
			ItemPointerData nref;
			Buffer		bufs[2];

			CuckooMakeRef(&nref, CuckooRefBlock(lt), CuckooRefId(ref));
			cuckoo_slot_put(layout, CuckooPageGetBlock(b), ptr, ptag,
							(const uint8 *) &nref);
			cuckoo_slot_clear(layout, CuckooPageGetBlock(h), (uint32) link);
			CuckooPageGetOpaque(h)->nentries--;
			CuckooPageGetOpaque(h)->nrefs--;
			CuckooSetShape(b, layout);
			CuckooSetShape(h, layout);
			bufs[0] = buf;
			bufs[1] = hbuf;
			CuckooChangeFinish(index, state, bufs, 2);
		}
	}
	CuckooRecordSpace(index, layout, head, BufferGetPage(hbuf));
	UnlockReleaseBuffer(hbuf);
	return true;
}
