/*-------------------------------------------------------------------------
 *
 * window_chain_index.c
 *	  The entries of a locked pending chain by hash, for a run of
 *	  operations that holds the chain (FbfWindowHold, window_apply.c).
 *
 * An operation looks for its hash on its pending chain page by page, in
 * each page's own index (FbfPendingPageFind, window_pending.c): a probe
 * per page.  A transaction that leaves many operations in flight, a large
 * batch above all, makes its chains long, and each of its operations
 * would pay for every page its predecessors filled: the batch's cost would
 * grow with the square of its size.  A call's operations come in their
 * canonical order, which puts those of one chain next to each other
 * (counter_op.c), and a run of them holds the chain from one operation to
 * the next; the run indexes the whole chain once instead, in one table,
 * and notes there each entry it appends, so that a lookup is one probe
 * whatever the chain's length.
 *
 * The index describes the chain only while the run holds it locked, and
 * the chain changes meanwhile only through the run: the run resets the
 * index when it lets go of the chain or drains it (a drain removes entries
 * and unlinks pages), notes its own appends (FbfChainIndexNoteAdds), and
 * needs nothing for a page added at the chain's end (FbfChainExtend: an
 * empty page).  Annexes are not indexed.  Memory: four bytes a slot, at
 * least twice as many slots as entries indexed, in the memory context
 * the run was made in; the table doubles when it is half full.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/bufmgr.h"

#include "window/window_int.h"

/*
 * A slot: 0 if empty, else an entry's place and the top 16 bits of its h2
 * (a tag that rules out most other hashes without reading the page):
 * bits 0-8 its position on its page plus one, bits 9-15 its page's place
 * in the chain, bits 16-31 the tag.
 */
#define SLOT_POS_BITS		9
#define SLOT_PAGE_BITS		7
#define SLOT_MIN			1024

StaticAssertDecl(FBF_PENDING_CAPACITY < (1 << SLOT_POS_BITS) &&
				 FBF_MAX_PENDING_PAGES <= (1 << SLOT_PAGE_BITS),
				 "a chain index slot cannot address every entry");

static inline uint32
slot_of(const FbfHash *hash, uint32 mask)
{
	return (uint32) ((hash->h2 ^ (hash->h1 >> 32)) & mask);
}

static inline uint32
tag_of(uint64 h2)
{
	return (uint32) (h2 >> 48) << 16;
}

/* put entry `pos` of the chain's page `page` into the table */
static void
insert(FbfChainIndex *cix, const FbfPendingEntry *entry, int page, int pos)
{
	FbfHash		hash = {entry->h1, entry->h2};
	uint32		mask = cix->nslots - 1;
	uint32		s;

	for (s = slot_of(&hash, mask); cix->slots[s] != 0; s = (s + 1) & mask)
		;
	cix->slots[s] = tag_of(entry->h2) | ((uint32) page << SLOT_POS_BITS) |
		(uint32) (pos + 1);
	cix->nused++;
}

/*
 * Index every entry of the locked chain but its annexes, in a table of at
 * least `nslots` slots.
 */
static void
build(FbfChainIndex *cix, const FbfPendingChain *chain, uint32 nslots)
{
	int			c;

	if (cix->slots == NULL || cix->nslots < nslots)
	{
		if (cix->slots != NULL)
			pfree(cix->slots);
		cix->slots = MemoryContextAlloc(cix->cxt, sizeof(uint32) * nslots);
		cix->nslots = nslots;
	}
	memset(cix->slots, 0, sizeof(uint32) * cix->nslots);
	cix->nused = 0;
	for (c = 0; c < chain->n; c++)
	{
		int			n;
		FbfPendingEntry *entries =
			FbfWindowPageGetEntries(BufferGetPage(chain->bufs[c]), &n);
		int			i;

		for (i = 0; i < n; i++)
			if (!FbfEntryIsAnnex(&entries[i]))
				insert(cix, &entries[i], c, i);
	}
	cix->valid = true;
}

/*
 * Index the entries of a locked chain, sized for what its pages hold and
 * as many pages more.  Time linear in the chain's entries.
 */
void
FbfChainIndexBuild(FbfChainIndex *cix, const FbfPendingChain *chain)
{
	uint32		nslots = SLOT_MIN;

	while (nslots < (uint32) (2 * chain->n) * FBF_PENDING_CAPACITY)
		nslots <<= 1;
	build(cix, chain, nslots);
}

/*
 * Forget what the index holds (its chain was let go or drained); its
 * memory is kept for the next build.
 */
void
FbfChainIndexReset(FbfChainIndex *cix)
{
	cix->valid = false;
}

/*
 * Note the entries just appended to the chain's page `page`, from position
 * `from` on (annexes among them are passed over), doubling the table
 * whenever it would be more than half full.
 */
void
FbfChainIndexNoteAdds(FbfChainIndex *cix, const FbfPendingChain *chain,
					  int page, int from)
{
	int			n;
	FbfPendingEntry *entries =
		FbfWindowPageGetEntries(BufferGetPage(chain->bufs[page]), &n);
	int			i;

	Assert(cix->valid);
	for (i = from; i < n; i++)
	{
		if (FbfEntryIsAnnex(&entries[i]))
			continue;
		if (2 * (cix->nused + 1) > cix->nslots)
		{
			/* the whole chain again, these entries with it */
			build(cix, chain, 2 * cix->nslots);
			return;
		}
		insert(cix, &entries[i], page, i);
	}
}

/* Start a look-up of `hash` (FbfChainIndexNext). */
void
FbfChainIndexScanBegin(FbfChainIndexScan *scan, const FbfChainIndex *cix,
					   const FbfPendingChain *chain, const FbfHash *hash)
{
	Assert(cix->valid);
	scan->cix = cix;
	scan->chain = chain;
	scan->hash = *hash;
	scan->slot = slot_of(hash, cix->nslots - 1);
}

/*
 * The next entry with the scan's hash, in no particular order: true, with
 * its chain page's place and its position there, or false when there are
 * no more.
 */
bool
FbfChainIndexNext(FbfChainIndexScan *scan, int *page, int *pos)
{
	const FbfChainIndex *cix = scan->cix;
	uint32		mask = cix->nslots - 1;
	uint32		tag = tag_of(scan->hash.h2);

	while (cix->slots[scan->slot] != 0)
	{
		uint32		v = cix->slots[scan->slot];
		int			c = (v >> SLOT_POS_BITS) & ((1 << SLOT_PAGE_BITS) - 1);
		int			i = (int) (v & ((1 << SLOT_POS_BITS) - 1)) - 1;
		int			n;
		FbfPendingEntry *entries;

		scan->slot = (scan->slot + 1) & mask;
		if ((v & 0xFFFF0000) != tag)
			continue;
		entries = FbfWindowPageGetEntries(BufferGetPage(scan->chain->bufs[c]), &n);
		Assert(i < n);
		if (entries[i].h1 == scan->hash.h1 && entries[i].h2 == scan->hash.h2)
		{
			*page = c;
			*pos = i;
			return true;
		}
	}
	return false;
}
