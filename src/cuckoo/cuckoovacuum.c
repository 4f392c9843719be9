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
 * heap would then reuse its TID).  A list that lost entries is tidied
 * (cuckoopost.c), freeing posting pages into the free space map.
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
 * Empty the slots of "buf" (exclusively locked) that hold dead TIDs (with
 * "tag", only slots with that tag: a list's in a page it shares); count
 * the others that "tag" selects.  One WAL record if anything was removed.
 * Returns how many were removed.
 */
static uint32
vacuum_page(Relation index, Buffer buf, const CuckooLayout *layout,
			bool any_tag, uint32 tag, IndexBulkDeleteResult *stats,
			IndexBulkDeleteCallback callback, void *callback_state)
{
	Page		page = BufferGetPage(buf);
	uint8	   *block = CuckooPageGetBlock(page);
	FbfXLogState *state = NULL;
	uint32		removed = 0;

	for (uint32 s = 0; s < cuckoo_nslots(layout); s++)
	{
		if (!cuckoo_slot_used(layout, block, s) ||
			(!any_tag && cuckoo_slot_tag(layout, block, s) != tag) ||
			CuckooTidIsRef(cuckoo_slot_tid(layout, block, s)))
			continue;			/* refs name pages, not rows */
		if (callback &&
			callback((ItemPointer) cuckoo_slot_tid(layout, block, s),
					 callback_state))
		{
			if (state == NULL)
			{
				state = FbfXLogStart(index);
				page = FbfXLogRegisterBuffer(state, buf, 0);
				block = CuckooPageGetBlock(page);
				CuckooSetShape(page, layout);
			}
			cuckoo_slot_clear(layout, block, s);
			removed++;
		}
		else
			stats->num_index_tuples += 1;
	}
	if (state)
	{
		CuckooPageGetOpaque(page)->nentries -= removed;
		FbfXLogFinish(state);
		CuckooPageChanged(index, buf);
		stats->tuples_removed += removed;
	}
	return removed;
}

/*
 * The lists of the pointers of bucket page "buf" (exclusively locked):
 * every page of each list, exclusively locked in path order, loses the
 * list's dead entries; then, if any went, the lists are tidied
 * (cuckoopost.c).  Entries move into and between lists only under their
 * bucket page's lock, which we hold: none can slip behind the pass.
 */
static void
vacuum_lists(Relation index, Buffer buf, const CuckooLayout *layout,
			 IndexBulkDeleteResult *stats,
			 IndexBulkDeleteCallback callback, void *callback_state)
{
	const uint8 *bblock = CuckooPageGetBlock(BufferGetPage(buf));
	BlockNumber nblocks = RelationGetNumberOfBlocks(index);
	uint32		removed = 0;

	for (uint32 s = 0; s < cuckoo_nslots(layout); s++)
	{
		const uint8 *ref;
		uint32		list_tag;
		BlockNumber next;
		uint32		hops = 0;

		if (!cuckoo_slot_used(layout, bblock, s) ||
			!CuckooTidIsRef(cuckoo_slot_tid(layout, bblock, s)))
			continue;
		ref = cuckoo_slot_tid(layout, bblock, s);
		list_tag = CuckooListTag(cuckoo_tag_fp(cuckoo_slot_tag(layout, bblock, s)),
								 CuckooRefId(ref));
		next = CuckooRefBlock(ref);
		while (BlockNumberIsValid(next))
		{
			Buffer		pbuf;
			const uint8 *pblock;
			BlockNumber link = InvalidBlockNumber;

			if (++hops > nblocks || next == CUCKOO_METAPAGE_BLKNO || next >= nblocks)
				FbfReportUnexpectedPage(index, next,
										"A posting list's link is out of range or cycles.");
			FbfVacuumDelayPoint();
			pbuf = ReadBuffer(index, next);
			LockBuffer(pbuf, BUFFER_LOCK_EXCLUSIVE);
			CuckooCheckPage(index, pbuf, CUCKOO_POSTING);
			removed += vacuum_page(index, pbuf, layout, false, list_tag, stats,
								   callback, callback_state);
			pblock = CuckooPageGetBlock(BufferGetPage(pbuf));
			for (uint32 t = 0; t < cuckoo_nslots(layout); t++)
				if (cuckoo_slot_used(layout, pblock, t) &&
					cuckoo_slot_tag(layout, pblock, t) == list_tag &&
					CuckooTidIsRef(cuckoo_slot_tid(layout, pblock, t)))
					link = CuckooRefBlock(cuckoo_slot_tid(layout, pblock, t));
			UnlockReleaseBuffer(pbuf);
			next = link;
		}
	}
	if (removed > 0 && callback)
		(void) CuckooListVacuum(index, layout, buf);
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
			(void) vacuum_page(index, buf, layout, true, 0, stats,
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
