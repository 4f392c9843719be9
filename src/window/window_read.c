/*-------------------------------------------------------------------------
 *
 * window_read.c
 *	  Reading a whole window: element counts per block, the estimated
 *	  false-positive rate, and a snapshot as an `fbf` value.
 *
 * Nothing here writes a page, and every lock is a share lock: each block
 * is read under its own, one at a time, while the metapage's keeps the
 * ring still; a snapshot also share-locks each pending chain to resolve
 * its entries.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "type/fbf_value.h"
#include "window/window_int.h"

/*
 * Element counts of every live block, counts[i * nparts + p] for logical
 * filter i and partition p (0 for stale blocks).
 */
void
FbfWindowBlockCounts(Relation index, const FbfWindowMetaPageData *meta, uint64 *counts)
{
	int			i;
	uint32		p;

	for (i = 0; i < meta->nlive; i++)
	{
		for (p = 0; p < meta->nparts; p++)
		{
			Buffer		buf = FbfWindowReadPage(index,
												FbfFilterBlock(meta, meta->ring[i], p),
												BUFFER_LOCK_SHARE, FBF_PAGE_ID_FILTER);
			Page		page = BufferGetPage(buf);

			counts[i * meta->nparts + p] = FbfWindowBlockIsCurrent(page, meta, i) ?
				FbfWindowPageGetOpaque(page)->count : 0;
			UnlockReleaseBuffer(buf);
		}
	}
}

/* the mean over partitions of each partition's estimate */
double
FbfWindowEstimateFpp(const FbfWindowMetaPageData *meta, const uint64 *counts)
{
	return fbf_estimate_fpp_blocked(meta->nbits, meta->nhashes, meta->nlive,
									meta->nparts, counts, FBF_CHECK_DEFAULT,
									FBF_MODEL_SHARED);
}

/*
 * The window as an in-memory Fbf (palloc'd, fbf datum layout): every live
 * block, plus the committed operations still on pending pages inserted
 * into future and present.  *pending gets the number still in flight.
 */
Fbf *
FbfWindowSnapshot(Relation index, uint64 *pending)
{
	FbfWindowMetaPageData meta;
	Buffer		metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_SHARE, &meta);
	Fbf		   *f;
	int			i;
	uint32		p;

	f = FbfValueAlloc(meta.nbits, meta.nfilters, meta.nparts);
	fbf_init(f, meta.nbits, meta.nhashes, meta.nfilters, meta.nparts,
			 meta.period, 0);
	f->nlive = meta.nlive;
	f->epoch = meta.epoch;
	for (i = 0; i < meta.nfilters; i++)
		*fbf_born_at(f, i) = i < meta.nlive ?
			FbfWindowWallTime(&meta, meta.born_at[i]) : 0;

	for (i = 0; i < meta.nlive; i++)
	{
		for (p = 0; p < meta.nparts; p++)
		{
			Buffer		buf = FbfWindowReadPage(index,
												FbfFilterBlock(&meta, meta.ring[i], p),
												BUFFER_LOCK_SHARE, FBF_PAGE_ID_FILTER);
			Page		page = BufferGetPage(buf);

			if (FbfWindowBlockIsCurrent(page, &meta, i))
			{
				fbf_load_bits(f, i, p, FbfWindowPageGetWords(page));
				*fbf_count(f, i, p) = FbfWindowPageGetOpaque(page)->count;
			}
			UnlockReleaseBuffer(buf);
		}
	}

	*pending = 0;
	for (p = 0; p < meta.nparts; p++)
	{
		FbfPendingChain chain;
		int			c;

		FbfChainLockMode(index, &meta, p, BUFFER_LOCK_SHARE, &chain);
		for (c = 0; c < chain.n; c++)
		{
			int			n;
			FbfPendingEntry *entries = FbfWindowPageGetEntries(BufferGetPage(chain.bufs[c]), &n);
			int			j;

			for (j = 0; j < n; j++)
			{
				FbfEntryStatus s =
					FbfEntryStatusOf(FbfEntryFullXid(&meta, &entries[j]));

				if (s == FBF_ENTRY_COMMITTED)
				{
					FbfHash		h = {entries[j].h1, entries[j].h2};

					fbf_insert(f, &h);
				}
				else if (s != FBF_ENTRY_ABORTED)
					(*pending)++;
			}
		}
		FbfChainRelease(&chain);
	}
	UnlockReleaseBuffer(metabuf);
	return f;
}

/* Microseconds until the window's next refresh is due (0: it is due). */
int64
FbfWindowRefreshDueIn(Relation index)
{
	FbfWindowMetaPageData meta;

	FbfWindowReadMeta(index, &meta);
	return Max(meta.born_at[0] + meta.period - FbfWindowNow(&meta), 0);
}
