/*-------------------------------------------------------------------------
 *
 * window_build.c
 *	  Making a window's pages: planning the shape of a new window, writing
 *	  it empty, copying an old relfilenode's pages over a rebuild, keeping
 *	  the metapage's copy of the reloptions current, and upgrading a window
 *	  written by 1.0.
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
 * Choose the shape from the options: an explicit shape if nbits is set,
 * else the smallest FBF meeting the target at the expected rate, in
 * page-sized blocks.
 */
static void
plan_shape(Relation index, const FbfWindowOptions *opts,
		   FbfWindowMetaPageData *meta)
{
	double		retention = opts->retention_ms / 1000.0;
	uint64		total_bits;
	int			nfilters;
	FbfPlan		plan;
	const char *why;
	uint64		bytes;

	if (opts->nbits > 0)
	{
		if (opts->nhashes <= 0 || opts->npast <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("an explicit fbf shape needs nbits, nhashes and npast")));
		total_bits = opts->nbits;
		nfilters = opts->npast + 2;
		plan.nhashes = opts->nhashes;
		plan.nparts = (uint32) ((total_bits + FBF_BLOCK_MAX_BITS - 1) / FBF_BLOCK_MAX_BITS);
		plan.nbits = (uint32) ((total_bits + plan.nparts - 1) / plan.nparts);
		plan.nfilters = nfilters;
		plan.period = retention / (nfilters - 1);
		if (!fbf_shape_valid(plan.nbits, plan.nhashes, plan.nfilters, plan.nparts, &why))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid fbf shape"),
					 errdetail("%s", why)));
	}
	else if (!fbf_plan_blocked(retention, opts->target_fpp, opts->expected_rate,
							   FBF_CHECK_DEFAULT, FBF_COUNTER_PLAN_MAX_FILTERS,
							   FBF_BLOCK_MAX_BITS, &plan, &why))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("no fbf filter meets target %g at %g operations per second",
						opts->target_fpp, opts->expected_rate),
				 errdetail("%s", why)));

	bytes = ((uint64) plan.nfilters * plan.nparts + 1 + plan.nparts) * BLCKSZ;
	if (bytes > (uint64) fbf_max_filter_size_kb * 1024)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the filter of \"%s\" would need %llu kB, more than fbf.max_filter_size (%d kB)",
						RelationGetRelationName(index),
						(unsigned long long) (bytes / 1024), fbf_max_filter_size_kb),
				 errhint("Lower the expected rate, raise the target false-positive rate, shorten the retention, or raise fbf.max_filter_size.")));

	meta->nbits = plan.nbits;
	meta->nparts = plan.nparts;
	meta->nhashes = (uint16) plan.nhashes;
	meta->nfilters = (uint16) plan.nfilters;
	meta->period = (int64) ceil(plan.period * USECS_PER_SEC);
	meta->base_period = meta->period;
}

/*
 * Write a new, empty window into `fork` of `index`: metapage, pending
 * pages and every filter block.
 */
void
FbfWindowInitStorage(Relation index, ForkNumber fork,
					 const FbfWindowOptions *opts)
{
	FbfWindowMetaPageData meta;
	PGAlignedBlock image;
	TimestampTz now = GetCurrentTimestamp();
	BlockNumber next = 0;
	uint32		p;
	int			i;

	memset(&meta, 0, sizeof(meta));
	meta.magic = FBF_META_MAGIC;
	meta.version = FBF_STORAGE_VERSION;
	meta.retention = (int64) opts->retention_ms * 1000;
	meta.target_fpp = opts->target_fpp;
	meta.shards = opts->shards;
	meta.created_at = now;
	plan_shape(index, opts, &meta);
	meta.nlive = meta.nfilters;
	meta.nslots = meta.nfilters;
	meta.epoch = meta.nfilters - 1;
	meta.features = FBF_FEATURES_ALL;
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

	/* where every block will go, so the metapage can be written first */
	for (i = 0; i < meta.nfilters; i++)
		meta.slot_start[i] = 1 + meta.nparts + i * meta.nparts;

	FbfWindowInitPage(image.data, FBF_PAGE_ID_META);
	FbfWindowSetMeta(image.data, &meta);
	FbfWindowAppendPage(index, fork, &next, image.data);

	for (p = 0; p < meta.nparts; p++)
	{
		FbfWindowInitPendingPage(image.data);
		FbfWindowAppendPage(index, fork, &next, image.data);
	}
	for (i = 0; i < meta.nfilters; i++)
		FbfWindowAppendSlot(index, fork, &next, &meta,
							FbfWindowExpectedStamp(&meta, i));

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
	SMgrRelation smgr = smgropen(old, InvalidBackendId);
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

/*
 * Bring a window written by 1.0 to this version's format, in place: the
 * caller holds the metapage exclusively, has copied it into *meta, and
 * writes it afterwards (with its clock anchored at `now`).
 *
 *	- pending entries get their xid's epoch (FBF_FEATURE_FULL_XIDS): every
 *	  chain is drained first, which resolves all of 1.0's entries (the
 *	  server restarted to load this version, so none of their transactions
 *	  is still running); any left are given the epoch that puts their xid
 *	  within 2^31 before the next one, as 1.0 compared them;
 *	- keyed operations are recorded with their key from now on
 *	  (FBF_FEATURE_KEYED_IDS); those 1.0 recorded without it stay in the
 *	  filters for at most a retention and two periods, during which keyed
 *	  operations also match their 1.0 identity (legacy_until), so no
 *	  operation remembered before the upgrade is applied again;
 *	- birth times were wall-clock times, and window time starts at the wall
 *	  clock, so they stay as they are (FBF_FEATURE_CLOCK, set by the anchor).
 */
void
FbfWindowUpgrade(Relation index, FbfWindowMetaPageData *meta, int64 now)
{
	uint32		p;

	if ((meta->features & FBF_FEATURE_FULL_XIDS) == 0)
	{
		for (p = 0; p < meta->nparts; p++)
		{
			FbfPendingChain chain;
			int			c;

			FbfChainLock(index, meta, p, &chain);
			FbfChainDrain(index, meta, p, &chain);
			for (c = 0; c < chain.n; c++)
			{
				FbfXLogState *state;
				Page		page;
				FbfPendingEntry *entries;
				int			n;
				int			i;

				FbfWindowPageGetEntries(BufferGetPage(chain.bufs[c]), &n);
				if (n == 0)
					continue;
				state = FbfXLogStart(index);
				page = FbfXLogRegisterBuffer(state, chain.bufs[c], 0);
				entries = FbfWindowPageGetEntries(page, &n);
				for (i = 0; i < n; i++)
					entries[i].epoch =
						EpochFromFullTransactionId(FbfEntryFullXid(meta, &entries[i]));
				FbfXLogFinish(state);
			}
			FbfChainRelease(&chain);
		}
		meta->features |= FBF_FEATURE_FULL_XIDS;
	}
	if ((meta->features & FBF_FEATURE_KEYED_IDS) == 0)
	{
		meta->legacy_until = now + meta->retention + 2 * meta->period;
		meta->features |= FBF_FEATURE_KEYED_IDS;
	}
	/* server log only: the caller holds the metapage's buffer lock */
	ereport(LOG_SERVER_ONLY,
			(errmsg("fbf: upgraded the filter of counter \"%s\" from the 1.0 format",
					get_rel_name(index->rd_index->indrelid))));
}
