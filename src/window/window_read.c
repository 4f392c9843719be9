/*-------------------------------------------------------------------------
 *
 * window_read.c
 *	  Reading a whole window: the readers' view of its partitions, element
 *	  counts and the estimated false-positive rate (asked of its format,
 *	  window_format.h), the statistics fbf_counter_stats shows, and
 *	  snapshots: how a snapshot holds the window (FbfSnapshotRead) and
 *	  FbfWindowSnapshot, which retries a format's snapshot until it reads
 *	  an unchanged metapage.  The window builds no SQL value: a snapshot is
 *	  the format's core structure, in the caller's memory.
 *
 * Lock order: src/window/README.md, "Lock definitions".
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

#include "window/window_format.h"
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
 * Element counts of every live filter in every partition of the readers'
 * view, counts[i * nview + v] (FbfWindowViewParts), 0 for stale filters;
 * distinct[i] (if not NULL) each element of filter i once, though splits
 * copied it to several pages; *max_load (if not NULL) the fullest page's
 * live load, for formats that have one.  Nothing for a window not yet
 * upgraded (storage version 1).  Each page share-locked in turn
 * (FbfFilterRoutine.counts).
 */
void
FbfWindowCounts(Relation index, const FbfWindowMetaPageData *meta,
				uint64 *counts, uint64 *distinct, double *max_load)
{
	if (distinct != NULL)
		memset(distinct, 0, sizeof(uint64) * meta->nlive);
	if (max_load != NULL)
		*max_load = 0;
	if (meta->version != FBF_STORAGE_VERSION)
		return;
	FbfFilterRoutineOf(meta)->counts(index, meta, counts, distinct, max_load);
}

/*
 * What the window `meta` can take (FbfWindowCapacity): its period's new
 * operations under the target once grown as far as fbf.max_filter_size
 * lets it, and the entries its chains hold.
 */
void
FbfWindowCapacityOf(const FbfWindowMetaPageData *meta, FbfWindowCapacity *cap)
{
	cap->epoch = meta->epoch;
	cap->per_period = FbfFilterRoutineOf(meta)->page_capacity(meta) *
		FbfWindowPartsAtCap(meta);
	cap->in_flight = (double) meta->nchains * FBF_MAX_PENDING_PAGES *
		FBF_PENDING_CAPACITY;
	cap->reserve = (double) meta->nchains * FBF_RESERVE_PAGES *
		FBF_PENDING_CAPACITY;
	cap->capped = (meta->flags & FBF_META_CAPPED) != 0;
}

/* What the window can take now (FbfWindowCapacityOf). */
void
FbfWindowGetCapacity(Relation index, FbfWindowCapacity *cap)
{
	FbfWindowMetaPageData meta;

	FbfWindowReadMeta(index, &meta);
	FbfWindowCapacityOf(&meta, cap);
}

/* The estimated false-positive rate of a check, from FbfWindowCounts. */
double
FbfWindowEstimateFpp(const FbfWindowMetaPageData *meta, const uint64 *counts)
{
	if (meta->version != FBF_STORAGE_VERSION)
		return 0;
	return FbfFilterRoutineOf(meta)->estimate_fpp(meta, counts);
}

/*
 * What fbf_counter_stats shows of the window (window.h): the metapage's
 * figures, the counts of its pages, its pending entries, its streams
 * (FbfStreamsGetStats), and what its format adds (FbfFilterRoutine.stats).  The metapage share-locked only to
 * copy it; each page and chain share in turn.
 */
void
FbfWindowGetStats(Relation index, FbfWindowStats *stats)
{
	FbfWindowMetaPageData meta;
	const FbfFilterRoutine *routine;
	uint64	   *counts;

	FbfWindowReadMeta(index, &meta);
	routine = FbfFilterRoutineOf(&meta);
	memset(stats, 0, sizeof(*stats));
	counts = palloc0(sizeof(uint64) * meta.nlive * Max(FbfWindowViewParts(&meta), 1));
	/* each operation once, though a split copied it to several pages */
	FbfWindowCounts(index, &meta, counts, stats->distinct, NULL);
	stats->filter = routine->name;
	stats->nfilters = meta.nfilters;
	stats->nlive = meta.nlive;
	stats->period = meta.period;
	stats->retention = meta.retention;
	stats->nparts = meta.nparts;
	stats->fpp = FbfWindowEstimateFpp(&meta, counts);
	stats->target_fpp = meta.target_fpp;
	stats->future_born = FbfWindowWallTime(&meta, meta.born_at[0]);
	stats->resizes = meta.resizes;
	stats->capped = (meta.flags & FBF_META_CAPPED) != 0;
	stats->pending = FbfWindowPendingCount(index, &meta);
	FbfStreamsGetStats(index, &meta, stats);
	routine->stats(&meta, counts, stats);
	pfree(counts);
}

/*
 * Tries of a snapshot before the last one, which holds the metapage
 * throughout.  A try is lost only to a refresh, resize, split or merge
 * step, or load that changes the metapage while the snapshot reads.
 */
#define FBF_SNAPSHOT_TRIES	4

/*
 * Does the metapage `now` describe the window as `then` did, for a reader:
 * the same ring, epoch and birth times, the same partitions of the same
 * shape (the format says, FbfFilterRoutine.same_shape) in the same pages,
 * the same chains?  Every change of those moves a counter compared
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
		FbfFilterRoutineOf(then)->same_shape(then, now) &&
		memcmp(then->ring, now->ring, sizeof(then->ring)) == 0 &&
		memcmp(then->born_at, now->born_at, sizeof(then->born_at)) == 0 &&
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
 * The streams of a snapshot (core/fbf_stream_snap.h).  A snapshot's filters
 * hold the operations drained into the bits, which their stream pages
 * recorded before the drain, and the committed ones still on the chains,
 * which the stream pages have not recorded yet: those are collected here,
 * from their annexes, while each chain is held for the snapshot's read of
 * it, and recorded into the copy of the stream pages read after the last
 * chain (FbfWindowSnapshot).  An entry judged committed here that the
 * format's read found still in progress is one more the streams know
 * than the filters: a duplicate that did apply, never a "new" unproven.
 *
 * The collection belongs to the one snapshot being taken (`read`); a
 * snapshot is never taken inside another, and FbfWindowSnapshot sets it
 * anew for each try.
 */
typedef struct SnapshotAnnexes
{
	const FbfSnapshotRead *read;	/* the read collecting; NULL: none */
	FbfStreamOp *ops;
	int			n;
	int			max;
	bool		unknown;		/* an operation the streams cannot know */
} SnapshotAnnexes;

static SnapshotAnnexes snapshot_annexes;

/* Collect the annexes of the committed entries of the chain read holds. */
static void
collect_annexes(FbfSnapshotRead *read)
{
	const FbfWindowMetaPageData *meta = &read->meta;
	SnapshotAnnexes *a = &snapshot_annexes;
	int			p;

	for (p = 0; p < read->chain.n && !a->unknown; p++)
	{
		int			n;
		FbfPendingEntry *entries =
			FbfWindowPageGetEntries(BufferGetPage(read->chain.bufs[p]), &n);
		int			j;

		for (j = 0; j < n; j++)
		{
			FullTransactionId fxid;

			if (FbfEntryIsAnnex(&entries[j]))
				continue;
			fxid = FbfEntryFullXid(meta, &entries[j]);
			if (FbfEntryStatusOf(fxid) != FBF_ENTRY_COMMITTED)
				continue;
			if (j + 1 == n || !FbfEntryIsAnnex(&entries[j + 1]))
			{
				/*
				 * No annex: not numbered in a stream, or recorded before the
				 * window kept streams, which its drain would answer with a
				 * reset of them (record_streams, window_pending.c); the
				 * snapshot then carries none.
				 */
				if (meta->stream_xid != 0 &&
					U64FromFullTransactionId(fxid) < meta->stream_xid)
				{
					a->unknown = true;
					break;
				}
				continue;
			}
			if (a->n == a->max)
			{
				a->max = Max(a->max * 2, 64);
				a->ops = a->ops == NULL ? palloc(sizeof(FbfStreamOp) * a->max) :
					repalloc(a->ops, sizeof(FbfStreamOp) * a->max);
			}
			a->ops[a->n].stream = entries[j + 1].h1;
			a->ops[a->n].seq = (int64) entries[j + 1].h2;
			a->n++;
		}
	}
}

/*
 * The caller's memory (FbfSnapshotMemory), keeping the size of the block
 * it holds, so that the snapshot's streams can follow the format's value.
 */
typedef struct SizedMemory
{
	const FbfSnapshotMemory *mem;
	Size		size;
} SizedMemory;

static void *
sized_alloc(Size size, void *arg)
{
	SizedMemory *sm = arg;

	sm->size = size;
	return sm->mem->alloc(size, sm->mem->arg);
}

static void *
sized_resize(void *body, Size size, void *arg)
{
	SizedMemory *sm = arg;

	sm->size = size;
	return sm->mem->resize(body, size, sm->mem->arg);
}

static void
sized_free(void *body, void *arg)
{
	SizedMemory *sm = arg;

	sm->mem->free(body, sm->mem->arg);
}

/*
 * Does the window keep streams that a snapshot of it can carry: its own
 * key, no public lookups (FbfWindowKeyingOf), stream pages?
 */
static bool
snapshot_keeps_streams(const FbfWindowMetaPageData *meta)
{
	FbfWindowKeying keying;

	if (meta->stream_pages == 0)
		return false;
	FbfWindowKeyingOf(meta, FbfWindowNow(meta), &keying);
	return fbf_hash_key_is_set(&keying.key) && !keying.public_too;
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
	if (read == snapshot_annexes.read)
		collect_annexes(read);
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
 * The format's snapshot `body` (sm's block) followed by the window's
 * streams, read now that every chain has been (FbfStreamsSnapshot), so
 * that they know at least what the snapshot's filters hold: each
 * operation in the bits was recorded in its stream page before it left its
 * chain, and each still on a chain was collected.  Recorded since, they
 * know more, which is sound.  Only if the run read is the one the
 * snapshot's metapage names still: a new run (a refresh, max_streams
 * changed) may have recorded what the old one never will, and the
 * snapshot then carries no streams.  The streams follow the format's
 * value in the block, which FbfValueWithKey keys with the rest.
 */
static void *
snapshot_with_streams(FbfSnapshotRead *read, const FbfSnapshotMemory *sized,
					  void *body)
{
	SizedMemory *sm = sized->arg;
	Size		size = sm->size;
	FbfWindowMetaPageData now;
	unsigned char *section;
	size_t		len;

	section = FbfStreamsSnapshot(read->index, read->metabuf, &read->meta,
								 snapshot_annexes.ops, snapshot_annexes.n, &len);
	if (read->hold)
		now = read->meta;
	else
		FbfWindowReadMeta(read->index, &now);
	if (now.stream_start == read->meta.stream_start &&
		now.stream_pages == read->meta.stream_pages &&
		FbfWindowKeysEqual(&now.key, &read->meta.key))
	{
		body = sized->resize(body, size + len, sized->arg);
		memcpy((char *) body + size, section, len);
	}
	pfree(section);
	return body;
}

/*
 * The window as a snapshot: its format's core structure (an Fbf of a
 * Bloom window: every live filter, plus the committed operations still on
 * pending pages inserted into future and present; a CwinSnap of a cuckoo
 * window, read the same way), in memory from `mem`, which the caller makes
 * into an `fbf` value.  *key and *public_too get the key the window had
 * throughout (window_key.c; zero: none), which the value must carry.
 * *pending gets the number still in flight.  The frozen filters of an
 * upgraded 1.0 window (window_legacy.c) are not part of it.
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
void *
FbfWindowSnapshot(Relation index, const FbfSnapshotMemory *mem,
				  FbfHashKey *key, bool *public_too, uint64 *pending)
{
	int			attempt;
	SizedMemory sm;
	FbfSnapshotMemory sized = {sized_alloc, sized_resize, sized_free, &sm};

	sm.mem = mem;
	for (attempt = 1;; attempt++)
	{
		FbfSnapshotRead read;
		void	   *result;
		bool		streams;

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
		streams = snapshot_keeps_streams(&read.meta);
		memset(&snapshot_annexes, 0, sizeof(snapshot_annexes));
		snapshot_annexes.read = streams ? &read : NULL;
		result = FbfFilterRoutineOf(&read.meta)->snapshot(&read, &sized, pending);
		snapshot_annexes.read = NULL;
		if (result != NULL && streams && !snapshot_annexes.unknown)
			result = snapshot_with_streams(&read, &sized, result);
		if (snapshot_annexes.ops != NULL)
			pfree(snapshot_annexes.ops);
		memset(&snapshot_annexes, 0, sizeof(snapshot_annexes));
		if (BufferIsValid(read.metabuf))
			UnlockReleaseBuffer(read.metabuf);
		if (result != NULL)
		{
			FbfWindowKeying keying;

			/* under the key the window had throughout (compared above) */
			FbfWindowKeyingOf(&read.meta, FbfWindowNow(&read.meta), &keying);
			*key = keying.key;
			*public_too = keying.public_too;
			return result;
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
