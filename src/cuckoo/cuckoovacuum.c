/*-------------------------------------------------------------------------
 *
 * cuckoovacuum.c
 *	  VACUUM of a cuckoo index: true cuckoo deletion of dead TIDs.
 *
 * Bulk delete visits every page in physical order, one page locked at a
 * time, and empties the slots whose TIDs VACUUM reports dead; the slots
 * are free for the next insert at once.  Killed slots (kill_prior_tuple
 * hints) are always dead TIDs too, and go the same way.
 *
 * A doubling that runs while VACUUM is between pages can carry a dead
 * entry from a page not yet visited to one already visited.  The pass
 * therefore notes the metapage's growth state before it starts and
 * repeats if that changed by the end: entries move only during a
 * doubling, and the second pass sees them where they ended up.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/fbf_xlog.h"
#include "commands/vacuum.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "cuckoo.h"

typedef struct GrowthState
{
	uint32		generation;
	uint32		growing;
	uint32		split_next;
} GrowthState;

static void
read_growth_state(Relation index, GrowthState *gs, CuckooLayout *layout)
{
	CuckooMetaPageData meta;
	CuckooLayout ignored;

	CuckooReadMeta(index, &meta, layout ? layout : &ignored);
	gs->generation = meta.generation;
	gs->growing = meta.growing;
	gs->split_next = meta.split_next;
}

/*
 * One physical pass over the index.  With a callback, empty the slots of
 * dead TIDs; in any case count the entries that remain.
 */
static void
vacuum_pass(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
			const CuckooLayout *layout,
			IndexBulkDeleteCallback callback, void *callback_state)
{
	Relation	index = info->index;
	BlockNumber nblocks = RelationGetNumberOfBlocks(index);
	uint32		nslots = cuckoo_nslots(layout);

	stats->num_index_tuples = 0;
	for (BlockNumber blkno = CUCKOO_METAPAGE_BLKNO + 1; blkno < nblocks; blkno++)
	{
		Buffer		buf;
		Page		page;
		FbfXLogState *state = NULL;
		uint8	   *block;
		uint32		removed = 0;

		vacuum_delay_point();
		buf = ReadBufferExtended(index, MAIN_FORKNUM, blkno, RBM_NORMAL,
								 info->strategy);
		LockBuffer(buf, callback ? BUFFER_LOCK_EXCLUSIVE : BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		if (!CuckooIsPage(page, CUCKOO_BUCKET | CUCKOO_OVERFLOW))
		{
			UnlockReleaseBuffer(buf);
			continue;
		}

		block = CuckooPageGetBlock(page);
		for (uint32 s = 0; s < nslots; s++)
		{
			if (!cuckoo_slot_used(layout, block, s))
				continue;
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
		UnlockReleaseBuffer(buf);
	}
	stats->num_pages = nblocks;
}

IndexBulkDeleteResult *
cuckoobulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
				 IndexBulkDeleteCallback callback, void *callback_state)
{
	Relation	index = info->index;
	GrowthState before;
	GrowthState after;
	CuckooLayout layout;

	if (stats == NULL)
		stats = (IndexBulkDeleteResult *) palloc0(sizeof(IndexBulkDeleteResult));

	read_growth_state(index, &before, &layout);
	for (;;)
	{
		vacuum_pass(info, stats, &layout, callback, callback_state);
		read_growth_state(index, &after, NULL);
		if (memcmp(&before, &after, sizeof(GrowthState)) == 0)
			break;
		before = after;
	}
	return stats;
}

IndexBulkDeleteResult *
cuckoovacuumcleanup(IndexVacuumInfo *info, IndexBulkDeleteResult *stats)
{
	CuckooLayout layout;
	GrowthState gs;

	if (info->analyze_only)
		return stats;

	/* bulk delete counted already; otherwise count now */
	if (stats == NULL)
	{
		stats = (IndexBulkDeleteResult *) palloc0(sizeof(IndexBulkDeleteResult));
		read_growth_state(info->index, &gs, &layout);
		vacuum_pass(info, stats, &layout, NULL, NULL);
	}
	return stats;
}
