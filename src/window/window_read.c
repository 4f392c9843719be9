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
 * an entry between the two reads; it does not hold the metapage for its
 * whole read, but checks that the metapage has not changed under it
 * (FbfSnapshotLockChain), and reads again if it has.
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
 * Tries of a snapshot before the last one, which holds the metapage
 * throughout.  A try is lost only to a refresh, resize, split or merge
 * step, or load that changes the metapage while the snapshot reads.
 */
#define FBF_SNAPSHOT_TRIES	4

/*
 * Does the metapage `now` describe the window as `then` did, for a reader:
 * the same ring, epoch and birth times, the same partitions in the same
 * pages, the same chains?  Every change of those moves a counter compared
 * here forward (epoch on a refresh, resizes on a resize, split_next on
 * each step of a split or merge and splits at its end, part_start on an
 * adoption), so a metapage found the same before and after a read was the
 * same throughout it.
 */
static bool
snapshot_meta_same(const FbfWindowMetaPageData *then,
				   const FbfWindowMetaPageData *now)
{
	return then->epoch == now->epoch &&
		then->resizes == now->resizes &&
		then->splits == now->splits &&
		then->period == now->period &&
		then->nbits == now->nbits &&
		then->nhashes == now->nhashes &&
		then->nfilters == now->nfilters &&
		then->nlive == now->nlive &&
		then->nparts == now->nparts &&
		then->nchains == now->nchains &&
		then->part_start == now->part_start &&
		then->split_start == now->split_start &&
		then->split_next == now->split_next &&
		then->split_factor == now->split_factor &&
		then->merge_factor == now->merge_factor &&
		then->filter == now->filter &&
		memcmp(then->ring, now->ring, sizeof(then->ring)) == 0 &&
		memcmp(then->born_at, now->born_at, sizeof(then->born_at)) == 0 &&
		memcmp(&then->cuckoo, &now->cuckoo, sizeof(then->cuckoo)) == 0 &&
		FbfWindowKeysEqual(&then->key, &now->key) &&
		then->public_until == now->public_until;
}

/*
 * Is the metapage still the one the snapshot `read` describes?  A short
 * share lock of the metapage; always true on the last try, which holds it.
 */
static bool
snapshot_unchanged(FbfSnapshotRead *read)
{
	FbfWindowMetaPageData now;

	if (read->hold)
		return true;
	FbfWindowReadMeta(read->index, &now);
	return snapshot_meta_same(&read->meta, &now);
}

/*
 * Share-lock chain `chainno` for a snapshot's read of it and of its
 * partition pages (window_int.h), or return false, locking nothing, if
 * the metapage changed since the snapshot copied it: the chains read so
 * far may then be out of date, and the snapshot must be taken again.
 * The metapage is share-locked (unless the snapshot holds it) only to
 * compare it and to queue for the chain, as an operation holds it while
 * it queues for its chain; not while the chain is read.
 */
bool
FbfSnapshotLockChain(FbfSnapshotRead *read, uint32 chainno)
{
	FbfWindowMetaPageData now;
	Buffer		metabuf;

	if (read->hold)
	{
		FbfChainLockMode(read->index, &read->meta, chainno, BUFFER_LOCK_SHARE,
						 &read->chain);
		return true;
	}
	metabuf = FbfWindowLockMeta(read->index, BUFFER_LOCK_SHARE, &now);
	if (!snapshot_meta_same(&read->meta, &now))
	{
		UnlockReleaseBuffer(metabuf);
		return false;
	}
	FbfChainLockMode(read->index, &read->meta, chainno, BUFFER_LOCK_SHARE,
					 &read->chain);
	UnlockReleaseBuffer(metabuf);
	return true;
}

/*
 * Release the chain FbfSnapshotLockChain locked.  After the last chain,
 * returns whether the whole read stands: whether the metapage is still the
 * one copied (the check before each chain vouches for the chains before
 * it, this one for the last).
 */
bool
FbfSnapshotReleaseChain(FbfSnapshotRead *read, bool last)
{
	FbfChainRelease(&read->chain);
	return !last || snapshot_unchanged(read);
}

/*
 * Honour a cancel, a statement timeout or a terminate between two chains
 * of a snapshot: with CHECK_FOR_INTERRUPTS where the snapshot holds no
 * lock there, or FbfWindowCheckCancel where it holds the metapage for the
 * whole read (its last try).
 */
void
FbfSnapshotCheckCancel(FbfSnapshotRead *read)
{
	if (read->hold)
		FbfWindowCheckCancel(read->metabuf);
	else
		CHECK_FOR_INTERRUPTS();
}

/*
 * A Bloom window's snapshot (FbfWindowSnapshot), or (Datum) 0 if the
 * metapage changed while it was read.
 */
static Datum
snapshot_bloom(FbfSnapshotRead *read, uint64 *pending)
{
	const FbfWindowMetaPageData *meta = &read->meta;
	Relation	index = read->index;
	uint32		nparts = FbfWindowViewParts(meta);
	Fbf		   *f;
	int			i;
	uint32		v;
	uint32		c;

	f = FbfValueAlloc(meta->nbits, meta->nfilters, nparts);
	fbf_init(f, meta->nbits, meta->nhashes, meta->nfilters, nparts, meta->period, 0);
	f->nlive = meta->nlive;
	f->epoch = meta->epoch;
	for (i = 0; i < meta->nfilters; i++)
		*fbf_born_at(f, i) = i < meta->nlive ?
			FbfWindowWallTime(meta, meta->born_at[i]) : 0;

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
	for (c = 0; c < meta->nchains; c++)
	{
		uint32		per_chain = nparts / meta->nchains;

		if (!FbfSnapshotLockChain(read, c))
		{
			pfree((char *) f - FBF_VALUE_OFFSET);
			return (Datum) 0;
		}
		for (v = c * per_chain; v < (c + 1) * per_chain; v++)
			snapshot_partition(index, meta, f, v);
		*pending += FbfChainCommitted(meta, &read->chain, insert_committed, f);
		if (!FbfSnapshotReleaseChain(read, c == meta->nchains - 1))
		{
			pfree((char *) f - FBF_VALUE_OFFSET);
			return (Datum) 0;
		}
		FbfSnapshotCheckCancel(read);
	}
	return PointerGetDatum((char *) f - FBF_VALUE_OFFSET);
}

/*
 * The window as an `fbf` datum (palloc'd).  Of a Bloom window, an Fbf:
 * every live filter, plus the committed operations still on pending pages
 * inserted into future and present.  Of a cuckoo window, a CwinSnap
 * (FbfCuckooSnapshot, read the same way).  Either carries the window's
 * key (window_key.c), if it has one.  *pending gets the number still in
 * flight.  The frozen filters of an upgraded 1.0 window (window_legacy.c)
 * are not part of it.
 *
 * Locks: the metapage share-locked only to copy it and, before each chain
 * and after the last, to check that it has not changed; each chain share
 * while it and its partition pages are read (window_int.h,
 * FbfSnapshotRead).  An increment waits for a snapshot at most while the
 * snapshot reads its chain, and a refresh or a split at most while the
 * snapshot queues for a chain, not for the whole read: a snapshot of a
 * large window is long, and readers may take them in a loop.  If the
 * metapage changed, the snapshot is taken again; the last try holds the
 * metapage throughout, as a read of the whole window did before.
 */
Datum
FbfWindowSnapshot(Relation index, uint64 *pending)
{
	int			attempt;

	for (attempt = 1;; attempt++)
	{
		FbfSnapshotRead read;
		Datum		result;

		read.index = index;
		read.hold = attempt >= FBF_SNAPSHOT_TRIES;
		read.metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_SHARE, &read.meta);
		if (!read.hold || read.meta.version != FBF_STORAGE_VERSION)
		{
			UnlockReleaseBuffer(read.metabuf);
			read.metabuf = InvalidBuffer;
		}
		if (read.meta.version != FBF_STORAGE_VERSION)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the filter \"%s\" has not been upgraded yet",
							RelationGetRelationName(index)),
					 errhint("Apply an operation to the counter, or run fbf_counter_maintain(), to upgrade it.")));
		if (FbfWindowIsCuckoo(&read.meta))
		{
			CwinSnap   *s = FbfCuckooSnapshot(&read, pending);

			result = s == NULL ? (Datum) 0 :
				PointerGetDatum((char *) s - FBF_VALUE_OFFSET);
		}
		else
			result = snapshot_bloom(&read, pending);
		if (BufferIsValid(read.metabuf))
			UnlockReleaseBuffer(read.metabuf);
		if (result != (Datum) 0)
		{
			FbfWindowKeying keying;

			/* under the key the window had throughout (compared above) */
			FbfWindowKeyingOf(&read.meta, FbfWindowNow(&read.meta), &keying);
			return PointerGetDatum(FbfValueWithKey((struct varlena *) DatumGetPointer(result),
												   &keying.key, keying.public_too));
		}
		elog(DEBUG1, "fbf: the metapage of \"%s\" changed during a snapshot, reading it again",
			 RelationGetRelationName(index));
		CHECK_FOR_INTERRUPTS();
	}
}

/* Microseconds until the window's next refresh is due (0: it is due). */
int64
FbfWindowRefreshDueIn(Relation index)
{
	FbfWindowMetaPageData meta;

	FbfWindowReadMeta(index, &meta);
	return Max(meta.born_at[0] + meta.period - FbfWindowNow(&meta), 0);
}
