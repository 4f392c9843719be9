/*-------------------------------------------------------------------------
 *
 * window_build.c
 *	  Making a window's pages: planning the shape of a new window, writing
 *	  it empty, copying an old relfilenode's pages over a rebuild, keeping
 *	  the metapage's copy of the reloptions current.
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
#include "window/window_int.h"

/*
 * Choose a window's shape from the index's options: an explicit shape if
 * nbits is set, else the plan that meets the target at the expected rate
 * with the fewest bits per filter (every lane of a partition page costs
 * memory, used or not), in page-sized partitions.  The partitions are a
 * multiple of `nchains` (0: one chain per partition).  Sets the shape,
 * ring size and period fields of *meta.
 */
void
FbfWindowPlanParts(Relation index, const FbfWindowOptions *opts,
				   uint32 nchains, FbfWindowMetaPageData *meta)
{
	double		retention = opts->retention_ms / 1000.0;
	FbfPlan		plan;
	const char *why;
	uint64		pages;

	if (opts->nbits > 0)
	{
		uint64		total_bits = opts->nbits;

		if (opts->nhashes <= 0 || opts->npast <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("an explicit fbf shape needs nbits, nhashes and npast")));
		if (opts->npast + 2 > FBF_SLICE_LANES && nchains == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a counter filter has at most %d past filters",
							FBF_SLICE_LANES - 2)));
		plan.nhashes = opts->nhashes;
		plan.nparts = (uint32) ((total_bits + FBF_SLICE_MAX_BITS - 1) / FBF_SLICE_MAX_BITS);
		plan.nbits = (uint32) ((total_bits + plan.nparts - 1) / plan.nparts);
		/* a 1.0 window being upgraded keeps what fits */
		plan.nfilters = Min(opts->npast + 2, FBF_SLICE_LANES);
		plan.period = retention / (plan.nfilters - 1);
		if (!fbf_shape_valid(plan.nbits, plan.nhashes, plan.nfilters, plan.nparts, &why))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid fbf shape"),
					 errdetail("%s", why)));
	}
	else if (!fbf_plan_sliced(retention, opts->target_fpp, opts->expected_rate,
							  FBF_CHECK_DEFAULT, FBF_COUNTER_PLAN_MAX_FILTERS,
							  FBF_SLICE_MAX_BITS, &plan, &why))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("no fbf filter meets target %g at %g operations per second",
						opts->target_fpp, opts->expected_rate),
				 errdetail("%s", why)));

	/*
	 * A whole number of partitions per chain, and never fewer bits.  A
	 * new window gets a chain per FBF_PARTS_PER_CHAIN partitions: enough
	 * chains that concurrent operations rarely queue on one, few enough
	 * that their pages cost little beside the filters'.
	 */
	if (nchains == 0)
		nchains = (plan.nparts + FBF_PARTS_PER_CHAIN - 1) / FBF_PARTS_PER_CHAIN;
	if (plan.nparts % nchains != 0)
	{
		uint64		total = (uint64) plan.nbits * plan.nparts;

		plan.nparts = ((plan.nparts + nchains - 1) / nchains) * nchains;
		plan.nbits = (uint32) Max((total + plan.nparts - 1) / plan.nparts,
								  FBF_MIN_NBITS);
	}

	pages = (uint64) 1 + nchains + plan.nparts;
	if (pages * BLCKSZ > (uint64) fbf_max_filter_size_kb * 1024)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the filter of \"%s\" would need %llu kB, more than fbf.max_filter_size (%d kB)",
						RelationGetRelationName(index),
						(unsigned long long) (pages * BLCKSZ / 1024), fbf_max_filter_size_kb),
				 errhint("Lower the expected rate, raise the target false-positive rate, shorten the retention, or raise fbf.max_filter_size.")));

	meta->nbits = plan.nbits;
	meta->nparts = plan.nparts;
	meta->base_nparts = plan.nparts;
	meta->nchains = nchains;
	meta->nhashes = (uint16) plan.nhashes;
	meta->nfilters = (uint16) plan.nfilters;
	meta->period = (int64) ceil(plan.period * USECS_PER_SEC);
	meta->base_period = meta->period;
	meta->split_start = InvalidBlockNumber;
	meta->split_next = 0;
}

/*
 * Write a new, empty window into `fork` of `index`: metapage, pending
 * pages and partition pages.
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
	if (opts->filter == FBF_FILTER_CUCKOO)
		FbfCuckooPlan(index, opts, &meta);
	else
		FbfWindowPlanParts(index, opts, 0, &meta);
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
	FbfWindowSetOverfull(&meta);

	FbfWindowInitPage(image.data, FBF_PAGE_ID_META);
	FbfWindowSetMeta(image.data, &meta);
	FbfWindowAppendPage(index, fork, &next, image.data);

	for (c = 0; c < meta.nchains; c++)
	{
		FbfWindowInitPendingPage(image.data);
		FbfWindowAppendPage(index, fork, &next, image.data);
	}
	FbfWindowAppendParts(index, fork, &next, meta.nparts, &meta);

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
