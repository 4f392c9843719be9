/*-------------------------------------------------------------------------
 *
 * cuckooverify.c
 *	  cuckoo_index_verify(): cross-check a cuckoo index against its table.
 *
 * In the manner of amcheck's heapallindexed: under a ShareLock on the
 * table (no writes, no VACUUM), it reads every page of the index, then
 * scans the table as an index build would and looks every tuple up by TID
 * and tag.  Any inconsistency is an ERROR with ERRCODE_INDEX_CORRUPTED
 * naming the page and slot; a clean index returns its counts.  Because
 * that lock holds off the table's writers, only the table's owner may run
 * it; it refuses before it queues for any lock (CuckooOpenForCheck, in
 * cuckoofuncs.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/hsearch.h"
#include "utils/rel.h"

#include "common/fbf_htab.h"
#include "cuckoo.h"

PG_FUNCTION_INFO_V1(cuckoo_index_verify);

typedef enum VerifyLocKind
{
	LOC_BUCKET,					/* a bucket page: "page" is its logical number */
	LOC_OVERFLOW,				/* an overflow page, found through chains */
	LOC_POSTING					/* a posting page, found through a list's
								 * pointers (ListReach) */
} VerifyLocKind;

typedef struct VerifyLoc
{
	BlockNumber blkno;
	uint32		page;			/* LOC_BUCKET: logical bucket page */
	uint16		slot;
	uint8		kind;			/* VerifyLocKind */
	bool		killed;			/* marked dead to everyone by a scan */
	uint32		tag;			/* the slot's tag (a list tag in a posting
								 * page) */
} VerifyLoc;

/*
 * The entries of one heap TID.  A TID is indexed once, except that an
 * entry whose tag has no rest bits left is copied to both halves by every
 * later split (cuckoo_tag_split), and a copy may since have moved into a
 * list (check_copies).  The first location is kept inline, the others
 * (rare) in "more".
 */
typedef struct VerifyEntry
{
	ItemPointerData tid;		/* hash key */
	int			nlocs;
	int			maxmore;		/* allocated length of more[] */
	VerifyLoc	first;
	VerifyLoc  *more;			/* locations 1 .. nlocs - 1 */
	bool		found;			/* produced by the table scan */
} VerifyEntry;

#define entry_loc(entry, i) ((i) == 0 ? &(entry)->first : &(entry)->more[(i) - 1])

typedef struct ChainLink
{
	BlockNumber blkno;			/* overflow page ... */
	uint32		page;			/* ... reachable from this bucket page */
} ChainLink;

/*
 * A list visits a posting page: the pointers that lead to its slots with
 * tag "list_tag" there.  A row there is found by a lookup whose probe's
 * page, buckets and tag one of those pointers matches.
 */
typedef struct ListReachKey
{
	BlockNumber blkno;
	uint32		list_tag;
} ListReachKey;

typedef struct ListPointer
{
	uint32		page;			/* logical bucket page of the pointer */
	uint32		bucket;
	uint32		tag;			/* the pointer's tag */
} ListPointer;

typedef struct ListReach
{
	ListReachKey key;
	int			npointers;
	int			maxpointers;
	ListPointer *pointers;
} ListReach;

/* References to one posting page found by walking the lists */
typedef struct PostingRefs
{
	BlockNumber blkno;
	uint32		counted;		/* links and pointers with rest bits left */
	uint32		all;			/* every reference, copies of pointers too */
} PostingRefs;

typedef struct VerifyState
{
	Relation	index;
	CuckooMetaPageData meta;
	CuckooLayout layout;
	HTAB	   *entries;
	HTAB	   *links;			/* ChainLink */
	HTAB	   *reachable;		/* BlockNumber of every chained overflow page */
	HTAB	   *lists;			/* ListReach */
	HTAB	   *posting_refs;	/* PostingRefs */
	int64		nentries;
	int64		heap_tuples;
} VerifyState;

fbf_noreturn static void
corrupt(VerifyState *vs, const char *what, BlockNumber blkno, uint32 slot,
		const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INDEX_CORRUPTED),
			 errmsg("cuckoo index \"%s\" is corrupted: %s",
					RelationGetRelationName(vs->index), what),
			 errdetail("Block %u, slot %u: %s", blkno, slot, detail)));
}

static Page
read_page(VerifyState *vs, BlockNumber blkno, PGAlignedBlock *copy)
{
	Buffer		buf;

	/* every walk of the index reads its pages here, holding none */
	CHECK_FOR_INTERRUPTS();
	buf = ReadBuffer(vs->index, blkno);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	memcpy(copy->data, BufferGetPage(buf), BLCKSZ);
	UnlockReleaseBuffer(buf);
	return (Page) copy->data;
}

/*
 * Note an entry of slot "s" of block "blkno" (logical bucket page "page"
 * for a LOC_BUCKET one).  Whether the TID's other entries, if any, are
 * copies the doublings explain is checked once every page is read
 * (check_copies).
 */
static void
record_entry(VerifyState *vs, const uint8 *block, BlockNumber blkno,
			 uint32 page, uint32 s, VerifyLocKind kind)
{
	ItemPointerData tid;
	VerifyEntry *entry;
	VerifyLoc  *loc;
	bool		found;
	uint32		tag = cuckoo_slot_tag(&vs->layout, block, s);

	memcpy(&tid, cuckoo_slot_tid(&vs->layout, block, s), sizeof(tid));
	if (!ItemPointerIsValid(&tid))
		corrupt(vs, "invalid heap TID", blkno, s, "The slot holds no valid TID.");
	if (cuckoo_tag_rest(tag) == 0)
		corrupt(vs, "tag without a sentinel", blkno, s,
				"The rest bits of the tag are all zero.");
	entry = hash_search(vs->entries, &tid, HASH_ENTER, &found);
	if (!found)
	{
		entry->nlocs = 0;
		entry->maxmore = 0;
		entry->more = NULL;
		entry->found = false;
	}
	else if (entry->nlocs - 1 == entry->maxmore)
	{
		entry->maxmore = Max(4, entry->maxmore * 2);
		entry->more = entry->more ?
			repalloc(entry->more, sizeof(VerifyLoc) * entry->maxmore) :
			palloc(sizeof(VerifyLoc) * entry->maxmore);
	}
	loc = entry_loc(entry, entry->nlocs);
	entry->nlocs++;
	loc->blkno = blkno;
	loc->page = page;
	loc->slot = (uint16) s;
	loc->kind = (uint8) kind;
	loc->killed = cuckoo_slot_killed(&vs->layout, block, s);
	loc->tag = tag;
	vs->nentries++;
}

/* A bucket page from which a lookup finds a TID's entry "loc" */
typedef struct CopyReach
{
	uint32		page;
	int			loc;			/* index in the entry's locations */
} CopyReach;

static int
copy_reach_cmp(const void *a, const void *b)
{
	const CopyReach *x = a;
	const CopyReach *y = b;

	if (x->page != y->page)
		return x->page < y->page ? -1 : 1;
	return (x->loc > y->loc) - (x->loc < y->loc);
}

/*
 * The page of the table as it was after its 15th doubling that live
 * bucket page "page" descends from: a split sends page q to 2q and
 * 2q + 1, so that is "page" shifted right once per later doubling.  While
 * a doubling runs, pages from 2 * split_next on are of the doubled table.
 * The caller has checked that at least 15 doublings are done.
 */
static uint32
ancestor_page(const CuckooMetaPageData *meta, uint32 page)
{
	uint32		done = meta->generation - (meta->growing ? 1 : 0);

	Assert(done >= 15);
	if (meta->growing && page >= 2 * meta->split_next)
		page >>= 1;
	return page >> (done - 15);
}

fbf_noreturn static void
copy_corrupt(VerifyState *vs, const char *what, const VerifyEntry *entry,
			 const VerifyLoc *loc, const VerifyLoc *other, const char *why)
{
	corrupt(vs, what, loc->blkno, loc->slot,
			psprintf("TID (%u,%u) is also at block %u, slot %u; %s.",
					 ItemPointerGetBlockNumber(&entry->tid),
					 ItemPointerGetOffsetNumber(&entry->tid),
					 other->blkno, other->slot, why));
}

/*
 * A heap TID with several entries.  Only an entry whose tag has no rest
 * bits left has copies: every split after the 15th since its insertion
 * copied it to both halves (cuckoo_tag_split), so after d doublings it
 * sits in the up to 2^(d - 15) bucket pages descended from the one page it
 * had 15 doublings after its insertion.  A copy may since have moved into
 * a list, with the rows of a key its buckets matched (CuckooListCreate):
 * the list's pointer then has the copy's exhausted tag, and the pointer's
 * own copies lead to the list from that copy's descendants only.  So,
 * naming each entry by the bucket pages a lookup finds it from (its own,
 * or those of the pointers that reach its list):
 *
 *	  - no entry is in an overflow page (chain entries never split), every
 *	    entry has one fingerprint, and every tag (of a bucket entry, of a
 *	    pointer to a list) is exhausted;
 *	  - no bucket page finds two of the entries: a lookup there would
 *	    return the TID twice;
 *	  - all those pages descend from one page of the table after its 15th
 *	    doubling (an entry inserted later had its one page later still),
 *	    which also bounds the copies to 2^(d - 15).
 *
 * An entry does not record when it was inserted, so the last rule takes
 * the earliest insertion possible (into the table the build wrote): exact
 * for such an entry, an upper bound for one inserted later.
 */
static void
check_copies(VerifyState *vs, const VerifyEntry *entry)
{
	const VerifyLoc *first = &entry->first;
	uint32		done = vs->meta.generation - (vs->meta.growing ? 1 : 0);
	CopyReach  *reach;
	int			nreach = 0;
	int			maxreach = entry->nlocs;
	uint32		ancestor;

	reach = palloc(sizeof(CopyReach) * maxreach);
	for (int i = 0; i < entry->nlocs; i++)
	{
		const VerifyLoc *loc = entry_loc(entry, i);
		const VerifyLoc *other = (i == 0) ? entry_loc(entry, 1) : first;

		if (loc->kind == LOC_OVERFLOW)
			copy_corrupt(vs, "heap TID indexed twice", entry, loc, other,
						 "an entry of an overflow page has no copies");
		if (cuckoo_tag_fp(loc->tag) != cuckoo_tag_fp(first->tag))
			copy_corrupt(vs, "heap TID indexed twice", entry, loc, other,
						 "copies of an entry have one fingerprint");
		if (loc->kind == LOC_BUCKET)
		{
			if (cuckoo_tag_rest(loc->tag) != CUCKOO_REST_EMPTY)
				copy_corrupt(vs, "heap TID indexed twice", entry, loc, other,
							 "only an entry whose tag has no rest bits left has copies");
			if (nreach == maxreach)
			{
				maxreach *= 2;
				reach = repalloc(reach, sizeof(CopyReach) * maxreach);
			}
			reach[nreach].page = loc->page;
			reach[nreach].loc = i;
			nreach++;
		}
		else
		{
			ListReachKey key = {loc->blkno, loc->tag};
			ListReach  *list = hash_search(vs->lists, &key, HASH_FIND, NULL);

			/* verify_posting_page found the list */
			Assert(list != NULL);
			for (int j = 0; j < list->npointers; j++)
			{
				if (cuckoo_tag_rest(list->pointers[j].tag) != CUCKOO_REST_EMPTY)
					copy_corrupt(vs, "heap TID indexed twice", entry, loc, other,
								 psprintf("its list's pointer in bucket page %u has rest bits left, so it has no copies",
										  list->pointers[j].page));
				if (nreach == maxreach)
				{
					maxreach *= 2;
					reach = repalloc(reach, sizeof(CopyReach) * maxreach);
				}
				reach[nreach].page = list->pointers[j].page;
				reach[nreach].loc = i;
				nreach++;
			}
		}
	}

	if (done < 15)
		corrupt(vs, "heap TID indexed more often than the doublings explain",
				first->blkno, first->slot,
				psprintf("TID (%u,%u) has %d entries after %u doublings; an entry has copies only from its 16th.",
						 ItemPointerGetBlockNumber(&entry->tid),
						 ItemPointerGetOffsetNumber(&entry->tid),
						 entry->nlocs, done));

	qsort(reach, nreach, sizeof(CopyReach), copy_reach_cmp);
	ancestor = ancestor_page(&vs->meta, reach[0].page);
	for (int k = 0; k < nreach; k++)
	{
		const VerifyLoc *loc = entry_loc(entry, reach[k].loc);

		if (k > 0 && reach[k].page == reach[k - 1].page)
		{
			const VerifyLoc *other = entry_loc(entry, reach[k - 1].loc);

			corrupt(vs, "heap TID reachable twice from one bucket page",
					loc->blkno, loc->slot,
					psprintf("A lookup in bucket page %u would return TID (%u,%u) twice: from block %u, slot %u and from block %u, slot %u.",
							 reach[k].page,
							 ItemPointerGetBlockNumber(&entry->tid),
							 ItemPointerGetOffsetNumber(&entry->tid),
							 other->blkno, other->slot, loc->blkno, loc->slot));
		}
		if (ancestor_page(&vs->meta, reach[k].page) != ancestor)
			corrupt(vs, "heap TID indexed more often than the doublings explain",
					loc->blkno, loc->slot,
					psprintf("TID (%u,%u) is found from bucket pages %u and %u, which descend from pages %u and %u of the table after its 15th doubling; all copies of an entry descend from one.",
							 ItemPointerGetBlockNumber(&entry->tid),
							 ItemPointerGetOffsetNumber(&entry->tid),
							 reach[0].page, reach[k].page, ancestor,
							 ancestor_page(&vs->meta, reach[k].page)));
	}
	pfree(reach);
}

/* Count a reference to posting page "blkno". */
static void
note_posting_ref(VerifyState *vs, BlockNumber blkno, bool counted)
{
	bool		found;
	PostingRefs *refs = hash_search(vs->posting_refs, &blkno, HASH_ENTER, &found);

	if (!found)
	{
		refs->counted = 0;
		refs->all = 0;
	}
	refs->all++;
	if (counted)
		refs->counted++;
}

/*
 * Walk the list of the pointer in slot "s" of logical bucket page "q"
 * (block "blkno"): every page a posting page, the path without a cycle,
 * and each page with at most one link of the list; note for each page the
 * pointer that reaches the list's slots there, and the references.
 */
static void
verify_list(VerifyState *vs, uint32 q, BlockNumber blkno, const uint8 *block,
			uint32 s)
{
	const uint8 *ref = cuckoo_slot_tid(&vs->layout, block, s);
	uint32		ptag = cuckoo_slot_tag(&vs->layout, block, s);
	uint32		list_tag = CuckooListTag(cuckoo_tag_fp(ptag), CuckooRefId(ref));
	BlockNumber next = CuckooRefBlock(ref);
	BlockNumber nblocks = RelationGetNumberOfBlocks(vs->index);
	bool		counted = cuckoo_tag_rest(ptag) != CUCKOO_REST_EMPTY;
	int			hops = 0;

	if (cuckoo_tag_rest(ptag) == 0)
		corrupt(vs, "tag without a sentinel", blkno, s,
				"The rest bits of the pointer's tag are all zero.");
	while (BlockNumberIsValid(next))
	{
		PGAlignedBlock copy;
		Page		page;
		const uint8 *pblock;
		ListReachKey key = {next, list_tag};
		ListReach  *reach;
		bool		found;
		BlockNumber link = InvalidBlockNumber;

		if (next == CUCKOO_METAPAGE_BLKNO || next >= nblocks)
			corrupt(vs, "posting list link out of range", blkno, s,
					psprintf("The list leads to block %u.", next));
		if (++hops > (int) nblocks)
			corrupt(vs, "posting list has a cycle", blkno, s,
					"The list of this pointer never ends.");
		page = read_page(vs, next, &copy);
		if (!CuckooIsPage(page, CUCKOO_POSTING))
			corrupt(vs, "posting page expected", next, 0,
					psprintf("A list of bucket page %u leads to a page that is not a posting page.", q));
		if (hops == 1)
			note_posting_ref(vs, next, counted);	/* the pointer's */
		reach = hash_search(vs->lists, &key, HASH_ENTER, &found);
		if (!found)
		{
			reach->npointers = 0;
			reach->maxpointers = 0;
			reach->pointers = NULL;
		}
		/* a lookup there would return the list's rows twice */
		for (int i = 0; i < reach->npointers; i++)
			if (reach->pointers[i].page == q)
				corrupt(vs, "posting list reached twice from one bucket page",
						blkno, s,
						psprintf("Two pointers of bucket page %u lead to the list at block %u.",
								 q, next));
		if (reach->npointers == reach->maxpointers)
		{
			reach->maxpointers = Max(2, reach->maxpointers * 2);
			reach->pointers = reach->pointers ?
				repalloc(reach->pointers, sizeof(ListPointer) * reach->maxpointers) :
				palloc(sizeof(ListPointer) * reach->maxpointers);
		}
		reach->pointers[reach->npointers].page = q;
		reach->pointers[reach->npointers].bucket = s / vs->layout.bucket_size;
		reach->pointers[reach->npointers].tag = ptag;
		reach->npointers++;

		pblock = CuckooPageGetBlock(page);
		for (uint32 t = 0; t < cuckoo_nslots(&vs->layout); t++)
		{
			const uint8 *tid;

			if (!cuckoo_slot_used(&vs->layout, pblock, t) ||
				cuckoo_slot_tag(&vs->layout, pblock, t) != list_tag)
				continue;
			tid = cuckoo_slot_tid(&vs->layout, pblock, t);
			if (!CuckooTidIsRef(tid))
				continue;
			if (BlockNumberIsValid(link))
				corrupt(vs, "posting list has two links in one page", next, t,
						"A list has at most one link per page.");
			if (CuckooRefId(tid) != CuckooRefId(ref))
				corrupt(vs, "posting list link names another list", next, t,
						psprintf("Link id %u, list id %u.", CuckooRefId(tid),
								 CuckooRefId(ref)));
			link = CuckooRefBlock(tid);
		}
		/* a link is counted once, however many copies of a pointer lead to it */
		if (BlockNumberIsValid(link) && reach->npointers == 1)
			note_posting_ref(vs, link, true);
		else if (BlockNumberIsValid(link))
			note_posting_ref(vs, link, false);
		next = link;
	}
}

/*
 * Check a posting page: its entry count, and its reference count against
 * the references the lists made (a page counted as unreferenced would be
 * freed under them; one referenced by nothing holds rows no lookup finds).
 * Its rows are recorded for the table scan.
 */
static void
verify_posting_page(VerifyState *vs, BlockNumber blkno, Page page)
{
	const uint8 *block = CuckooPageGetBlock(page);
	CuckooPageOpaque opaque = CuckooPageGetOpaque(page);
	PostingRefs *refs = hash_search(vs->posting_refs, &blkno, HASH_FIND, NULL);
	uint32		used = 0;

	for (uint32 s = 0; s < cuckoo_nslots(&vs->layout); s++)
	{
		ListReachKey key;

		if (!cuckoo_slot_used(&vs->layout, block, s))
			continue;
		used++;
		if (CuckooTidIsRef(cuckoo_slot_tid(&vs->layout, block, s)))
			continue;
		key.blkno = blkno;
		key.list_tag = cuckoo_slot_tag(&vs->layout, block, s);
		if (hash_search(vs->lists, &key, HASH_FIND, NULL) == NULL)
			corrupt(vs, "posting entry unreachable", blkno, s,
					"No list leads to this entry.");
		record_entry(vs, block, blkno, 0, s, LOC_POSTING);
	}
	if (used != opaque->nentries)
		corrupt(vs, "wrong entry count", blkno, 0,
				psprintf("The page counts %u entries but holds %u.",
						 opaque->nentries, used));
	if (refs && refs->all > 0 && opaque->nrefs == 0)
		corrupt(vs, "referenced posting page counted free", blkno, 0,
				psprintf("%u references lead to the page, which counts none.",
						 refs->all));
	if (refs && refs->counted > opaque->nrefs)
		corrupt(vs, "posting page has more references than it counts", blkno, 0,
				psprintf("%u references lead to the page, which counts %u.",
						 refs->counted, opaque->nrefs));
}

/* Check one live bucket page and note the overflow pages it reaches. */
static void
verify_bucket_page(VerifyState *vs, uint32 q)
{
	BlockNumber blkno = CuckooPageBlock(&vs->meta, q);
	PGAlignedBlock copy;
	Page		page = read_page(vs, blkno, &copy);
	const uint8 *block = CuckooPageGetBlock(page);
	CuckooPageOpaque opaque;
	uint32		used = 0;
	BlockNumber next;
	int			hops = 0;

	if (!CuckooIsPage(page, CUCKOO_BUCKET))
		corrupt(vs, "bucket page expected", blkno, 0,
				psprintf("Logical bucket page %u is not a cuckoo bucket page.", q));
	opaque = CuckooPageGetOpaque(page);
	if (vs->meta.stamped &&
		!CuckooPageHolds(page, vs->meta.growing && q < vs->meta.split_next ?
						 vs->meta.generation - 1 : vs->meta.generation))
		corrupt(vs, "bucket page has a wrong generation stamp", blkno, 0,
				psprintf("Logical bucket page %u has flags 0x%04X; the metapage is at generation %u%s.",
						 q, opaque->flags, vs->meta.generation,
						 vs->meta.growing ? " (growing)" : ""));
	for (uint32 s = 0; s < cuckoo_nslots(&vs->layout); s++)
	{
		if (!cuckoo_slot_used(&vs->layout, block, s))
			continue;
		used++;
		if (CuckooTidIsRef(cuckoo_slot_tid(&vs->layout, block, s)))
			verify_list(vs, q, blkno, block, s);
		else
			record_entry(vs, block, blkno, q, s, LOC_BUCKET);
	}
	if (used != opaque->nentries)
		corrupt(vs, "wrong entry count", blkno, 0,
				psprintf("The page counts %u entries but holds %u.",
						 opaque->nentries, used));

	for (next = opaque->overflow; BlockNumberIsValid(next);)
	{
		ChainLink	key = {next, q};
		PGAlignedBlock ocopy;
		Page		opage;

		if (++hops > (int) RelationGetNumberOfBlocks(vs->index))
			corrupt(vs, "overflow chain has a cycle", blkno, 0,
					psprintf("The chain of bucket page %u never ends.", q));
		if (next == CUCKOO_METAPAGE_BLKNO || next >= RelationGetNumberOfBlocks(vs->index))
			corrupt(vs, "overflow link out of range", blkno, 0,
					psprintf("Link to block %u.", next));
		opage = read_page(vs, next, &ocopy);
		if (!CuckooIsPage(opage, CUCKOO_OVERFLOW))
			corrupt(vs, "overflow page expected", next, 0,
					"A chain leads to a page that is not an overflow page.");
		hash_search(vs->links, &key, HASH_ENTER, NULL);
		hash_search(vs->reachable, &next, HASH_ENTER, NULL);
		next = CuckooPageGetOpaque(opage)->overflow;
	}
}

/* Check an overflow page: chained from a bucket page, counts right. */
static void
verify_overflow_page(VerifyState *vs, BlockNumber blkno, Page page)
{
	const uint8 *block = CuckooPageGetBlock(page);
	uint32		used = 0;
	bool		reachable;

	hash_search(vs->reachable, &blkno, HASH_FIND, &reachable);
	for (uint32 s = 0; s < cuckoo_nslots(&vs->layout); s++)
	{
		if (!cuckoo_slot_used(&vs->layout, block, s))
			continue;
		if (!reachable)
			corrupt(vs, "overflow entry unreachable", blkno, s,
					"No bucket page chains to this overflow page.");
		used++;
		record_entry(vs, block, blkno, 0, s, LOC_OVERFLOW);
	}
	if (used != CuckooPageGetOpaque(page)->nentries)
		corrupt(vs, "wrong entry count", blkno, 0,
				psprintf("The page counts %u entries but holds %u.",
						 CuckooPageGetOpaque(page)->nentries, used));
}

/*
 * Every tuple the table scan produces must be found where a lookup of its
 * key looks: in its page's two buckets with a matching tag, or in an
 * overflow page chained from its page with a matching fingerprint.
 */
static void
verify_heap_callback(Relation index, ItemPointer tid, Datum *values,
					 bool *isnull, bool tupleIsAlive, void *state)
{
	VerifyState *vs = (VerifyState *) state;
	VerifyEntry *entry;
	CuckooProbe probe;
	BlockNumber expected;
	uint32		second;
	VerifyLoc  *match = NULL;

	if (isnull[0])
		return;
	vs->heap_tuples++;
	CuckooLocate(&vs->meta, &vs->layout,
				 CuckooHashDatum(index, InvalidOid, index->rd_indcollation[0],
								 values[0]),
				 &probe);
	expected = CuckooPageBlock(&vs->meta, probe.page);
	second = cuckoo_alt_bucket(&vs->layout, probe.first, cuckoo_tag_fp(probe.tag));

	entry = hash_search(vs->entries, tid, HASH_FIND, NULL);
	for (int i = 0; entry && i < entry->nlocs && !match; i++)
	{
		VerifyLoc  *loc = entry_loc(entry, i);

		if (loc->kind == LOC_POSTING)
		{
			ListReachKey key = {loc->blkno, loc->tag};
			ListReach  *reach = hash_search(vs->lists, &key, HASH_FIND, NULL);

			for (int j = 0; reach && j < reach->npointers && !match; j++)
			{
				ListPointer *p = &reach->pointers[j];

				if (p->page == probe.page &&
					(p->bucket == probe.first || p->bucket == second) &&
					cuckoo_tag_matches(p->tag, probe.tag))
					match = loc;
			}
		}
		else if (loc->kind == LOC_BUCKET)
		{
			uint32		bucket = loc->slot / vs->layout.bucket_size;

			if (loc->blkno == expected &&
				(bucket == probe.first || bucket == second) &&
				cuckoo_tag_matches(loc->tag, probe.tag))
				match = loc;
		}
		else
		{
			ChainLink	key = {loc->blkno, probe.page};
			bool		linked;

			hash_search(vs->links, &key, HASH_FIND, &linked);
			if (linked && cuckoo_tag_fp(loc->tag) == cuckoo_tag_fp(probe.tag))
				match = loc;
		}
	}
	if (match == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("cuckoo index \"%s\" is corrupted: heap tuple (%u,%u) cannot be found through the index",
						RelationGetRelationName(index),
						ItemPointerGetBlockNumber(tid),
						ItemPointerGetOffsetNumber(tid)),
				 entry ?
				 errdetail("Its entry is at block %u, slot %u; a lookup reads bucket page %u (block %u), buckets %u and %u.",
						   entry->first.blkno, entry->first.slot,
						   probe.page, expected, probe.first, second) :
				 errdetail("The index has no entry for it.")));
	if (match->killed && tupleIsAlive)
		corrupt(vs, "killed entry points at a live tuple", match->blkno,
				match->slot,
				psprintf("Heap tuple (%u,%u) is live, but its entry is marked dead to everyone.",
						 ItemPointerGetBlockNumber(tid),
						 ItemPointerGetOffsetNumber(tid)));
	entry->found = true;
}

/*
 * An entry the table scan did not produce must point at a tuple that is
 * dead but not yet vacuumed: a line pointer that exists and is not unused.
 */
static bool
points_at_dead_tuple(Relation heap, ItemPointer tid, BlockNumber heap_blocks)
{
	Buffer		buf;
	Page		page;
	OffsetNumber off = ItemPointerGetOffsetNumber(tid);
	bool		ok;

	if (ItemPointerGetBlockNumber(tid) >= heap_blocks)
		return false;
	buf = ReadBuffer(heap, ItemPointerGetBlockNumber(tid));
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	ok = off >= FirstOffsetNumber && off <= PageGetMaxOffsetNumber(page) &&
		ItemIdIsUsed(PageGetItemId(page, off));
	UnlockReleaseBuffer(buf);
	return ok;
}

/*
 * cuckoo_index_verify(index regclass): the metapage and its extents valid,
 * every page recognised, entry counts right, every overflow page chained,
 * no TID twice (except copies of an entry with no rest bits left, found
 * from distinct bucket pages that descend from one: check_copies), no
 * bucket page reaching a list twice, every table tuple
 * found where a lookup of its key looks, no killed entry on a live tuple,
 * and no entry pointing at a line pointer that is unused or missing.
 */
Datum
cuckoo_index_verify(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	Relation	heap;
	Relation	index = CuckooOpenForCheck(indexoid, ShareLock, true, &heap);
	VerifyState vs;
	BlockNumber nblocks;
	BlockNumber heap_blocks;
	IndexInfo  *indexInfo;
	HASH_SEQ_STATUS seq;
	VerifyEntry *entry;
	int64		dead = 0;
	int64		overflow_pages = 0;
	TupleDesc	tupdesc;
	Datum		values[5];
	bool		nulls[5] = {0};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	memset(&vs, 0, sizeof(vs));
	vs.index = index;
	CuckooReadMeta(index, &vs.meta, &vs.layout);

	nblocks = RelationGetNumberOfBlocks(index);
	for (uint32 i = 0; i < vs.meta.nextents; i++)
	{
		uint32		len = (i + 1 < vs.meta.nextents ?
						   vs.meta.extents[i + 1].first_page : vs.meta.npages * 2) -
			vs.meta.extents[i].first_page;

		if (vs.meta.extents[i].first_block == CUCKOO_METAPAGE_BLKNO ||
			(i > 0 && vs.meta.extents[i].first_page <= vs.meta.extents[i - 1].first_page) ||
			(!vs.meta.growing && i + 1 == vs.meta.nextents &&
			 vs.meta.extents[i].first_block + (vs.meta.npages - vs.meta.extents[i].first_page) > nblocks) ||
			(vs.meta.growing && vs.meta.extents[i].first_block + len > nblocks))
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("cuckoo index \"%s\" is corrupted: extent %u of the metapage is invalid",
							RelationGetRelationName(index), i)));
	}

	/* in this call's memory context: gone when it ends */
	vs.entries = FbfHashCreate("cuckoo verify entries", 1024,
							   sizeof(ItemPointerData), sizeof(VerifyEntry),
							   CurrentMemoryContext);
	vs.links = FbfHashCreate("cuckoo verify chains", 64, sizeof(ChainLink),
							 sizeof(ChainLink), CurrentMemoryContext);
	vs.reachable = FbfHashCreate("cuckoo verify overflow pages", 64,
								 sizeof(BlockNumber), sizeof(BlockNumber),
								 CurrentMemoryContext);
	vs.lists = FbfHashCreate("cuckoo verify lists", 256, sizeof(ListReachKey),
							 sizeof(ListReach), CurrentMemoryContext);
	vs.posting_refs = FbfHashCreate("cuckoo verify posting pages", 64,
									sizeof(BlockNumber), sizeof(PostingRefs),
									CurrentMemoryContext);

	/* the live bucket pages (while growing: unsplit old ones and split new ones) */
	if (!vs.meta.growing)
		for (uint32 q = 0; q < vs.meta.npages; q++)
			verify_bucket_page(&vs, q);
	else
	{
		for (uint32 q = 0; q < vs.meta.split_next; q++)
			verify_bucket_page(&vs, q);
		for (uint32 q = 2 * vs.meta.split_next; q < 2 * vs.meta.npages; q++)
			verify_bucket_page(&vs, q);
	}

	/* every other page: recognisable, and overflow pages checked */
	for (BlockNumber blkno = CUCKOO_METAPAGE_BLKNO + 1; blkno < nblocks; blkno++)
	{
		PGAlignedBlock copy;
		Page		page;

		CHECK_FOR_INTERRUPTS();
		page = read_page(&vs, blkno, &copy);
		if (PageIsNew(page))
			continue;
		if (!CuckooIsPage(page, CUCKOO_BUCKET | CUCKOO_OVERFLOW | CUCKOO_POSTING))
			corrupt(&vs, "unrecognised page", blkno, 0,
					"The page has no cuckoo page id.");
		if (CuckooPageGetOpaque(page)->flags & CUCKOO_OVERFLOW)
		{
			overflow_pages++;
			verify_overflow_page(&vs, blkno, page);
		}
		else if (CuckooPageGetOpaque(page)->flags & CUCKOO_POSTING)
		{
			overflow_pages++;
			verify_posting_page(&vs, blkno, page);
		}
	}

	/* TIDs with several entries: copies that the doublings explain */
	hash_seq_init(&seq, vs.entries);
	while ((entry = hash_seq_search(&seq)) != NULL)
	{
		CHECK_FOR_INTERRUPTS();
		if (entry->nlocs > 1)
			check_copies(&vs, entry);
	}

	/* the table: every tuple indexed */
	indexInfo = BuildIndexInfo(index);
	table_index_build_scan(heap, index, indexInfo, true, false,
						   verify_heap_callback, &vs, NULL);

	/* the index: entries the scan did not produce point at dead tuples */
	heap_blocks = RelationGetNumberOfBlocks(heap);
	hash_seq_init(&seq, vs.entries);
	while ((entry = hash_seq_search(&seq)) != NULL)
	{
		CHECK_FOR_INTERRUPTS();
		if (entry->found)
			continue;
		if (!points_at_dead_tuple(heap, &entry->tid, heap_blocks))
		{
			hash_seq_term(&seq);
			corrupt(&vs, "entry points at a missing tuple", entry->first.blkno,
					entry->first.slot,
					psprintf("Heap TID (%u,%u) is unused or does not exist.",
							 ItemPointerGetBlockNumber(&entry->tid),
							 ItemPointerGetOffsetNumber(&entry->tid)));
		}
		dead++;
	}

	values[0] = Int64GetDatum((int64) nblocks);
	values[1] = Int64GetDatum(overflow_pages);
	values[2] = Int64GetDatum(vs.nentries);
	values[3] = Int64GetDatum(vs.heap_tuples);
	values[4] = Int64GetDatum(dead);

	hash_destroy(vs.entries);
	hash_destroy(vs.links);
	hash_destroy(vs.reachable);
	hash_destroy(vs.lists);
	hash_destroy(vs.posting_refs);
	index_close(index, AccessShareLock);
	table_close(heap, ShareLock);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
