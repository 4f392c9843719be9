/*-------------------------------------------------------------------------
 *
 * window_read.c
 *	  Reading a whole window: element counts per block, the estimated
 *	  false-positive rate, and a snapshot as an `fbf` value (a cuckoo
 *	  window's by window_cuckoo_load.c, in the same order of locks).
 *
 * Nothing here writes a page, and every lock is a share lock: each page
 * is read under its own, one at a time, while the metapage's keeps the
 * ring still.  A snapshot reads the window chain by chain, holding each
 * pending chain while it reads that chain's partition pages and then its
 * entries, so that no drain (nor, on a standby, a drain's redo) can move
 * an entry between the two reads.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "type/fbf_value.h"
#include "window/window_int.h"

/*
 * Partitions as readers see them: P, or F * P while a split is in
 * progress (an unsplit partition q then stands for qF .. qF + F - 1, all
 * of which its page holds); during a merge, P, a merged page standing for
 * each of the F partitions it took in.
 */
uint32
FbfWindowViewParts(const FbfWindowMetaPageData *meta)
{
	return meta->split_next > 0 && meta->split_factor > 0 ?
		meta->split_factor * meta->nparts : meta->nparts;
}

BlockNumber
FbfWindowViewBlock(const FbfWindowMetaPageData *meta, uint32 v)
{
	if (meta->split_next == 0)
		return meta->part_start + v;
	if (meta->merge_factor > 0)
	{
		/* a merged page stands for every partition it took in */
		if (v / meta->merge_factor < meta->split_next)
			return meta->split_start + v / meta->merge_factor;
		return meta->part_start + v;
	}
	if (v / meta->split_factor < meta->split_next)
		return meta->split_start + v;
	return meta->part_start + v / meta->split_factor;
}

/*
 * Element counts of every live filter in every partition, counts[i *
 * nparts + p] for logical filter i and partition p of the readers' view
 * (FbfWindowViewParts), 0 for stale lanes: what each page's bits hold.
 * If `distinct` is not NULL, distinct[i] gets the number of elements in
 * filter i, each counted once although splits copied it to several pages.
 */
void
FbfWindowBlockCounts(Relation index, const FbfWindowMetaPageData *meta,
					 uint64 *counts, uint64 *distinct)
{
	uint32		nparts = FbfWindowViewParts(meta);
	uint32		v;
	int			i;

	if (distinct != NULL)
		memset(distinct, 0, sizeof(uint64) * meta->nlive);
	if (meta->version != FBF_STORAGE_VERSION)
		return;
	if (FbfWindowIsCuckoo(meta))
	{
		FbfCuckooCounts(index, meta, counts, distinct, NULL);
		return;
	}
	for (v = 0; v < nparts; v++)
	{
		BlockNumber blkno = FbfWindowViewBlock(meta, v);
		Buffer		buf = FbfWindowReadPart(index, blkno, BUFFER_LOCK_SHARE);
		Page		page = BufferGetPage(buf);
		uint64		current = FbfSliceCurrentLanes(page, meta);
		const FbfSliceHeader *h = FbfSlicePageGetHeader(page);
		/* an unsplit page stands for F partitions of the view: count it once */
		bool		first = v == 0 || FbfWindowViewBlock(meta, v - 1) != blkno;

		for (i = 0; i < meta->nlive; i++)
		{
			int			lane = meta->ring[i];
			bool		live = ((current >> lane) & 1) != 0;

			counts[i * nparts + v] = live ? h->count[lane] : 0;
			if (distinct != NULL && live && first)
				distinct[i] += h->count[lane] - Min(h->dup[lane], h->count[lane]);
		}
		UnlockReleaseBuffer(buf);
		CHECK_FOR_INTERRUPTS();
	}
}

/* the mean over partitions of each partition's estimate */
double
FbfWindowEstimateFpp(const FbfWindowMetaPageData *meta, const uint64 *counts)
{
	if (meta->version != FBF_STORAGE_VERSION)
		return 0;
	if (FbfWindowIsCuckoo(meta))
		return FbfCuckooEstimateFpp(meta, counts);
	return fbf_estimate_fpp_blocked(meta->nbits, meta->nhashes, meta->nlive,
									FbfWindowViewParts(meta), counts,
									FBF_CHECK_DEFAULT, FBF_MODEL_SHARED);
}

/* Copy partition v of the readers' view into the snapshot's live filters. */
static void
snapshot_partition(Relation index, const FbfWindowMetaPageData *meta, Fbf *f,
				   uint32 v)
{
	Buffer		buf = FbfWindowReadPart(index, FbfWindowViewBlock(meta, v),
										BUFFER_LOCK_SHARE);
	Page		page = BufferGetPage(buf);
	uint64		current = FbfSliceCurrentLanes(page, meta);
	const FbfSliceHeader *h = FbfSlicePageGetHeader(page);
	int			i;

	for (i = 0; i < meta->nlive; i++)
	{
		int			lane = meta->ring[i];

		if (((current >> lane) & 1) == 0)
			continue;
		fbf_load_lane(f, i, v, FbfSlicePageGetWords(page), FBF_SLICE_WIDTH, lane);
		*fbf_count(f, i, v) = h->count[lane];
	}
	UnlockReleaseBuffer(buf);
}

/* FbfChainCommitted's callback: a committed entry goes into the snapshot */
static void
insert_committed(const FbfHash *hash, void *arg)
{
	fbf_insert((Fbf *) arg, hash);
}

/*
 * The window as an `fbf` datum (palloc'd).  Of a Bloom window, an Fbf:
 * every live filter, plus the committed operations still on pending pages
 * inserted into future and present.  Of a cuckoo window, a CwinSnap
 * (FbfCuckooSnapshot, read the same way).  *pending gets the number still
 * in flight.  The frozen filters of an upgraded 1.0 window
 * (window_legacy.c) are not part of it.
 */
Datum
FbfWindowSnapshot(Relation index, uint64 *pending)
{
	FbfWindowMetaPageData meta;
	Buffer		metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_SHARE, &meta);
	Fbf		   *f;
	uint32		nparts;
	int			i;
	uint32		v;
	uint32		c;

	if (meta.version != FBF_STORAGE_VERSION)
	{
		UnlockReleaseBuffer(metabuf);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the filter \"%s\" has not been upgraded yet",
						RelationGetRelationName(index)),
				 errhint("Apply an operation to the counter, or run fbf_counter_maintain(), to upgrade it.")));
	}
	if (FbfWindowIsCuckoo(&meta))
	{
		CwinSnap   *s = FbfCuckooSnapshot(index, metabuf, &meta, pending);

		UnlockReleaseBuffer(metabuf);
		return PointerGetDatum((char *) s - FBF_VALUE_OFFSET);
	}
	nparts = FbfWindowViewParts(&meta);
	f = FbfValueAlloc(meta.nbits, meta.nfilters, nparts);
	fbf_init(f, meta.nbits, meta.nhashes, meta.nfilters, nparts, meta.period, 0);
	f->nlive = meta.nlive;
	f->epoch = meta.epoch;
	for (i = 0; i < meta.nfilters; i++)
		*fbf_born_at(f, i) = i < meta.nlive ?
			FbfWindowWallTime(&meta, meta.born_at[i]) : 0;

	/*
	 * Chain by chain, each held (share) while its partitions are read and
	 * then its entries: a drain moves entries of one chain into that
	 * chain's partition pages, in one step under the chain's exclusive
	 * lock (one WAL record, whose redo also holds the pending page while
	 * it sets the bits), so every entry is seen either on its chain or in
	 * the bits, never in neither.  Partition v of the readers' view
	 * belongs to chain v / (nparts / nchains): fbf_part is a range
	 * mapping, and the chains divide the partitions.
	 */
	*pending = 0;
	for (c = 0; c < meta.nchains; c++)
	{
		FbfPendingChain chain;
		uint32		per_chain = nparts / meta.nchains;

		FbfChainLockMode(index, &meta, c, BUFFER_LOCK_SHARE, &chain);
		for (v = c * per_chain; v < (c + 1) * per_chain; v++)
			snapshot_partition(index, &meta, f, v);
		*pending += FbfChainCommitted(&meta, &chain, insert_committed, f);
		FbfChainRelease(&chain);
		FbfWindowCheckCancel(metabuf);
	}
	UnlockReleaseBuffer(metabuf);
	return PointerGetDatum((char *) f - FBF_VALUE_OFFSET);
}

/* Microseconds until the window's next refresh is due (0: it is due). */
int64
FbfWindowRefreshDueIn(Relation index)
{
	FbfWindowMetaPageData meta;

	FbfWindowReadMeta(index, &meta);
	return Max(meta.born_at[0] + meta.period - FbfWindowNow(&meta), 0);
}
