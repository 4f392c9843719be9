/*-------------------------------------------------------------------------
 *
 * window_legacy.c
 *	  Windows of storage version 1 (fbf 1.0's layout: one block per filter
 *	  and partition): upgrading them to partition pages, and checking
 *	  their frozen filters until they age out.  Their metapage is read by
 *	  window_legacy_meta.c, in the bottom layer.
 *
 * A server that installs this version keeps its 1.0 counters' windows as
 * they are on disk until each is first refreshed (by an operation or the
 * worker: FbfWindowRefresh), which upgrades it in place (FbfLegacyUpgrade):
 *
 *	1. pending entries get their xid's epoch (1.0 stored none);
 *	2. the window gets partition pages, appended to the relation, planned
 *	   from the index's options, with the old pending chains as its chains;
 *	3. the old filters are frozen where they are and described in the
 *	   metapage (meta->legacy), which is written as version 2;
 *	4. every chain is drained into the new pages.
 *
 * From then on operations are recorded only in the partition pages, and
 * the frozen filters are checked too (FbfLegacyContains) until
 * legacy.until, a retention and two periods after the upgrade: everything
 * they remember is then older than the retention.  Keyed operations, which
 * 1.0 recorded without their key, are also checked under that identity
 * (the caller passes it) until then.
 *
 * Crash safety: the metapage is written as version 2 (one WAL record)
 * after the new pages and before any entry leaves a chain, so recovery
 * finds either the old window whole or the new one with its chains.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "storage/bufmgr.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "common/fbf_xlog.h"
#include "core/bloom_bits.h"
#include "window/window_int.h"

/* Do the frozen filters hold the operation `hash`? */
bool
FbfLegacyContains(Relation index, const FbfWindowMetaPageData *meta,
				  const FbfHash *hash)
{
	const FbfLegacyFilters *legacy = &meta->legacy;
	uint32		probes[FBF_MAX_HASHES];
	uint32		part = fbf_part(hash, legacy->nparts);
	uint64		mask = 0;
	int			i;

	fbf_probes(hash, legacy->nhashes, legacy->nbits, probes);
	for (i = 0; i < legacy->nlive; i++)
	{
		Buffer		buf = FbfWindowReadPage(index,
											legacy->slot_start[legacy->ring[i]] + part,
											BUFFER_LOCK_SHARE, FBF_PAGE_ID_FILTER);
		Page		page = BufferGetPage(buf);

		if (FbfWindowPageGetOpaque(page)->stamp == legacy->epoch - i &&
			bloom_test(FbfWindowPageGetWords(page), probes, legacy->nhashes))
			mask |= UINT64CONST(1) << i;
		UnlockReleaseBuffer(buf);
	}
	return fbf_check_mask(mask, legacy->nlive, FBF_CHECK_DEFAULT);
}

/* give 1.0's pending entries (which stored no epoch) their xid's epoch */
static void
add_epochs(Relation index, const FbfWindowMetaPageData *meta)
{
	uint32		c;

	for (c = 0; c < meta->nchains; c++)
	{
		FbfPendingChain chain;
		int			p;

		FbfChainLock(index, meta, c, &chain);
		for (p = 0; p < chain.n; p++)
		{
			FbfXLogState *state;
			Page		page;
			FbfPendingEntry *entries;
			int			n;
			int			i;

			FbfWindowPageGetEntries(BufferGetPage(chain.bufs[p]), &n);
			if (n == 0)
				continue;
			state = FbfXLogStart(index);
			page = FbfXLogRegisterBuffer(state, chain.bufs[p], 0);
			entries = FbfWindowPageGetEntries(page, &n);
			for (i = 0; i < n; i++)
			{
				/* an annex's epoch is its mark (none on a 1.0 page, anyway) */
				if (!FbfEntryIsAnnex(&entries[i]))
					entries[i].epoch =
						EpochFromFullTransactionId(FbfEntryFullXid(meta, &entries[i]));
			}
			FbfXLogFinish(state);
		}
		FbfChainRelease(&chain);
	}
}

/*
 * Upgrade a version 1 window (see the file header).  The caller holds the
 * metapage exclusively and passes the copy FbfWindowLockMeta made; *meta
 * becomes the version 2 metapage, already logged, its clock anchored at
 * `now`.
 */
void
FbfLegacyUpgrade(Relation index, Buffer metabuf, FbfWindowMetaPageData *meta,
				 int64 now)
{
	FbfWindowOptions *opts = FbfWindowGetOptions(index);
	BlockNumber next;
	uint32		c;
	int			i;

	Assert(meta->version == 1);
	if ((meta->features & FBF_FEATURE_FULL_XIDS) == 0)
		add_epochs(index, meta);

	/* the partition pages, planned as for a new counter */
	FbfWindowPlan(index, opts, meta->nchains, meta);
	next = RelationGetNumberOfBlocks(index);
	meta->part_start = FbfWindowAppendParts(index, MAIN_FORKNUM, &next,
											meta->nparts, meta);

	/*
	 * A new ring, born now; everything remembered so far is in the frozen
	 * filters (or on the chains), which are checked for as long as it can
	 * matter.
	 */
	meta->nlive = meta->nfilters;
	meta->nslots = meta->nfilters;
	meta->epoch = meta->nfilters - 1;
	for (i = 0; i < FBF_MAX_FILTERS; i++)
	{
		meta->ring[i] = (uint8) (i < meta->nfilters ? i : 0);
		meta->born_at[i] = i == 0 ? now : (i < meta->nfilters ? FBF_BORN_LONG_AGO : 0);
	}
	meta->legacy.until = now + meta->retention + 2 * meta->period;
	meta->version = FBF_STORAGE_VERSION;
	meta->features = FBF_FEATURES_ALL;
	meta->flags &= ~FBF_META_CAPPED;
	FbfWindowLogMeta(index, metabuf, meta, now);

	/* the entries still on the chains go to the new pages */
	for (c = 0; c < meta->nchains; c++)
	{
		FbfPendingChain chain;

		FbfChainLock(index, meta, c, &chain);
		FbfChainDrain(index, meta, &chain, false, NULL);
		FbfChainRelease(&chain);
	}

	/* server log only: the caller holds the metapage's buffer lock */
	ereport(LOG_SERVER_ONLY,
			(errmsg("fbf: upgraded the filter of counter \"%s\" to partition pages",
					get_rel_name(index->rd_index->indrelid)),
			 errdetail("%u partitions of %u bits and %d filters; the old filters are checked for %.0f more seconds.",
					   meta->nparts, meta->nbits, meta->nfilters,
					   (meta->legacy.until - now) / 1e6)));
}
