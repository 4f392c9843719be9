/*-------------------------------------------------------------------------
 *
 * window_build.c
 *	  Making a window's pages: planning the shape of a new window (the
 *	  skeleton every format shares, FbfWindowPlan), writing it empty
 *	  with its stream pages, copying an old relfilenode's pages over a
 *	  rebuild, keeping the metapage's copy of the reloptions current.
 *
 * Lock order: src/window/README.md, "Lock definitions".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "common/fbf_xlog.h"
#include "access/transam.h"
#include "access/xlog.h"
#include "catalog/index.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/smgr.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "common/fbf_page.h"
#include "window/window_format.h"
#include "window/window_int.h"

/*
 * Plan a window's shape from the index's options: the format's sizing
 * (FbfFilterRoutine.plan: its shape fields, partitions, filters and
 * period), then what every format shares: a whole number of partitions
 * per chain (the format spreads its shape over the partitions added), and
 * the memory cap, fbf.max_filter_size.  nchains: the chains of a 1.0
 * window being upgraded, which it keeps; 0 for a new window, which gets a
 * chain per FBF_PARTS_PER_CHAIN partitions: enough chains that concurrent
 * operations rarely queue on one, few enough that their pages cost little
 * beside the filters'.  Sets the format, shape, chains, ring size and
 * period fields of *meta.
 */
void
FbfWindowPlan(Relation index, const FbfWindowOptions *opts, uint32 nchains,
			  FbfWindowMetaPageData *meta)
{
	const FbfFilterRoutine *routine = FbfFilterRoutineFor(opts->filter);
	uint32		planned;
	uint64		pages;

	meta->filter = (uint32) opts->filter;
	routine->plan(index, opts, nchains, meta);
	planned = meta->nparts;
	if (nchains == 0)
		nchains = (planned + FBF_PARTS_PER_CHAIN - 1) / FBF_PARTS_PER_CHAIN;
	if (planned % nchains != 0)
	{
		meta->nparts = ((planned + nchains - 1) / nchains) * nchains;
		routine->spread(meta, planned);
	}

	pages = (uint64) 1 + nchains + meta->nparts;
	if (pages * BLCKSZ > (uint64) fbf_max_filter_size_kb * 1024)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the filter of \"%s\" would need %llu kB, more than fbf.max_filter_size (%d kB)",
						RelationGetRelationName(index),
						(unsigned long long) (pages * BLCKSZ / 1024), fbf_max_filter_size_kb),
				 errhint("Lower the expected rate, raise the target false-positive rate, shorten the retention, or raise fbf.max_filter_size.")));

	meta->base_nparts = meta->nparts;
	meta->nchains = nchains;
	meta->base_period = meta->period;
	meta->split_start = InvalidBlockNumber;
	meta->split_next = 0;
}

/*
 * Write a new, empty window into `fork` of `index`: metapage, pending
 * pages, partition pages and stream pages (window_stream.c), which know
 * every stream from the start.
 */
void
FbfWindowInitStorage(Relation index, ForkNumber fork,
					 const FbfWindowOptions *opts)
{
	FbfWindowMetaPageData meta;
	PGAlignedBlock image;
	TimestampTz now = GetCurrentTimestamp();
	BlockNumber next = 0;
	uint32		c;
	int			i;

	memset(&meta, 0, sizeof(meta));
	meta.magic = FBF_META_MAGIC;
	meta.version = FBF_STORAGE_VERSION;
	meta.retention = (int64) opts->retention_ms * 1000;
	meta.target_fpp = opts->target_fpp;
	meta.shards = opts->shards;
	meta.created_at = now;
	FbfWindowPlan(index, opts, 0, &meta);
	meta.nlive = meta.nfilters;
	meta.nslots = meta.nfilters;
	meta.epoch = meta.nfilters - 1;
	meta.features = FBF_FEATURES_ALL;
	FbfWindowNewKey(&meta.key);
	/* window time starts at the wall clock (window_clock.c) */
	FbfWindowClockAnchor(index, &meta, now);

	/*
	 * The future filter is born now; the older ones never held anything
	 * the future does not also get, so for drop safety they are as old as
	 * can be (as fbf_init does), else refreshes would wait a retention.
	 */
	for (i = 0; i < meta.nfilters; i++)
	{
		meta.ring[i] = (uint8) i;
		meta.born_at[i] = i == 0 ? now : FBF_BORN_LONG_AGO;
	}
	meta.part_start = 1 + meta.nchains;
	/* exact streams after the partition pages; nothing recorded before */
	meta.stream_pages = (uint32) FbfStreamsWanted(index, 0);
	meta.stream_start = meta.stream_pages > 0 ?
		meta.part_start + meta.nparts : 0;
	FbfFilterRoutineOf(&meta)->derive_meta(&meta);

	FbfWindowInitPage(image.data, FBF_PAGE_ID_META);
	FbfWindowSetMeta(image.data, &meta);
	FbfWindowAppendPage(index, fork, &next, image.data);

	for (c = 0; c < meta.nchains; c++)
	{
		FbfWindowInitPendingPage(image.data);
		FbfWindowAppendPage(index, fork, &next, image.data);
	}
	FbfWindowAppendParts(index, fork, &next, meta.nparts, &meta);
	FbfStreamsCreate(index, InvalidBuffer, fork, &next, meta.stream_pages,
					 FBF_STREAM_ALWAYS);

	if (fork == INIT_FORKNUM)
		FbfSyncInitFork(index);
}

/*
 * Copy the pages of the window at `old` (the relfilenode this index had
 * before a rebuild, still on disk until the rebuild commits) into the new,
 * empty relfilenode of `index`.  Returns false, writing nothing, if `old`
 * holds no window.
 */
bool
FbfWindowCopyStorage(Relation index, FbfFileLocator old, bool permanent)
{
	SMgrRelation smgr = smgropen(old, FbfInvalidProcNumber);
	BlockNumber nblocks;
	BlockNumber blkno;
	PGAlignedBlock image;
	BlockNumber next = 0;

	if (!smgrexists(smgr, MAIN_FORKNUM) ||
		(nblocks = smgrnblocks(smgr, MAIN_FORKNUM)) == 0)
		return false;

	for (blkno = 0; blkno < nblocks; blkno++)
	{
		Buffer		buf = FbfReadBufferByLocator(old, MAIN_FORKNUM, blkno,
												 permanent);

		LockBuffer(buf, BUFFER_LOCK_SHARE);
		memcpy(image.data, BufferGetPage(buf), BLCKSZ);
		UnlockReleaseBuffer(buf);
		if (blkno == FBF_METAPAGE_BLKNO &&
			(PageIsNew(image.data) ||
			 FbfWindowPageGetMeta(image.data)->magic != FBF_META_MAGIC))
			return false;
		FbfWindowAppendPage(index, MAIN_FORKNUM, &next, image.data);
		CHECK_FOR_INTERRUPTS();
	}
	return true;
}

/*
 * Bring the metapage's copy of the settings (retention, target, shards) up
 * to date with the index's reloptions, changed by ALTER INDEX ... SET.  The
 * shape is only ever changed by AIMD.
 */
void
FbfWindowSyncOptions(Relation index)
{
	FbfWindowOptions *opts = FbfWindowGetOptions(index);
	Buffer		metabuf;
	FbfWindowMetaPageData meta;

	if (RecoveryInProgress())
		return;
	FbfWindowReadMeta(index, &meta);
	if (meta.version != FBF_STORAGE_VERSION)
		return;					/* the upgrade plans from the options */
	if (meta.retention == (int64) opts->retention_ms * 1000 &&
		meta.target_fpp == opts->target_fpp && meta.shards == (uint32) opts->shards)
		return;

	metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_EXCLUSIVE, &meta);
	meta.retention = (int64) opts->retention_ms * 1000;
	meta.target_fpp = opts->target_fpp;
	meta.shards = opts->shards;
	FbfWindowLogMeta(index, metabuf, &meta, FbfWindowNow(&meta));
	UnlockReleaseBuffer(metabuf);
}
