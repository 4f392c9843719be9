/*-------------------------------------------------------------------------
 *
 * window_bloom_snap.c
 *	  A Bloom window's snapshots (an Fbf, core/fbf_core.h: the `fbf` value
 *	  of a Bloom window): taken from a live window for fbf_snapshot, and
 *	  loaded back by fbf_counter_load, merged or adopted.  The Bloom
 *	  format's snapshot, snapshot_of and load, and its routine
 *	  (FbfBloomRoutine, window_format.h), every member in one place.
 *
 * The routine is here, not in window_bloom.c, because this file already
 * calls window_bloom.c (its pages' initialisation and reads): its
 * references to the page operations go the same way, and window_bloom.c
 * names nothing of this file, so the two files have no cycle.  Defined in
 * window_bloom.c, it would name this file's operations, which call back.
 *
 * Taking one: chain by chain (FbfSnapshotRead, window_int.h), each chain
 * held share while its partition pages and then its entries are read, so
 * that every entry is seen on its chain or in the bits, never in neither;
 * the memory is the caller's (FbfSnapshotMemory), so that the value is
 * made without copying the filter.
 *
 * Loading one: the time alignment is window_adopt.c's (FbfLoadTimesOf,
 * FbfLoadDue, "Time" there), and so is the switch to an adopted shape
 * (FbfWindowAdopt).
 *
 * Partners.  The membership check (fbf_check_mask) finds an operation in
 * the future filter alone, in two neighbouring filters, or in the oldest
 * alone.  Snapshot filter s holds its own epoch's operations, which
 * snapshot filter s + 1 also holds; where s + 1 does not land on the
 * neighbour of s's lane, s is also ORed into that neighbour, so that the
 * pair (j, j + 1) holds them.
 *
 * Two ways to load:
 *
 *	merge	the shapes agree: same bits per partition and hash functions,
 *			and the partitions of one are a multiple of the other's
 *			(fbf_part(h, F * P) / F == fbf_part(h, P), so snapshot
 *			partition q lands in the F live partitions qF .. qF + F - 1,
 *			as a split copies it; or F snapshot partitions in one live
 *			one, as a merge ORs them).  Each live partition page gets the
 *			bits ORed into the lanes chosen above, one WAL record of
 *			changed byte ranges per page.  A split or merge in progress
 *			is loaded through the readers' view (FbfWindowViewBlock).
 *	adopt	the live window is empty (no bits, no pending entry, no frozen
 *			1.0 filters), as a window just restored by pg_restore is: it
 *			takes the snapshot's shape and ring whole, birth times
 *			included, in new partition pages (appended, each a full-page
 *			image), then one metapage record switches to them.  A crash
 *			before that record leaves the old, empty window and some
 *			unused pages.  The old pages become the free run for the next
 *			split.  This copies the original window exactly, where a merge
 *			into a younger ring would put several snapshot filters into
 *			one live filter and raise its false-positive rate until they
 *			age out.  Filters already due are adopted empty, and if the
 *			snapshot's future filter is past its period, the ring turns
 *			once as the original's would have, the new future born when
 *			the old one stopped taking operations: else the first refresh
 *			after the load would date that to the load, and keep a
 *			snapshot's last operations a retention after the load.
 *
 * Anything else is refused before a page is written, and so is a
 * snapshot of the other kind of window (a cuckoo window's snapshot is
 * loaded by window_cuckoo_snap.c, which shares the time alignment and
 * the emptiness test of window_adopt.c).
 *
 * Locks: the caller holds RowExclusiveLock on the counter table.  The
 * whole load holds the metapage exclusively (operations, drains and
 * splits wait for it; it is a rare, administrative operation), and takes
 * pending pages share and partition pages exclusive one at a time, in
 * the order of src/window/README.md.  Appending takes the relation's
 * extension lock, as a split does, so the new pages are a run.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/xlog.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "common/fbf_xlog.h"
#include "core/bloom_slice.h"
#include "type/fbf_value.h"
#include "window/window_format.h"
#include "window/window_int.h"

/* ---- taking a snapshot ---- */

/* Copy partition v of the readers' view into the snapshot's live filters. */
static void
snapshot_partition(Relation index, const FbfWindowMetaPageData *meta, Fbf *f,
				   uint32 v)
{
	Buffer		buf = FbfBloomReadPart(index, FbfWindowViewBlock(meta, v),
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
 * A Bloom window's snapshot (FbfFilterRoutine.snapshot), an Fbf in memory
 * from `mem`: every live filter, plus the committed operations still on
 * pending pages inserted into future and present; NULL, the memory let
 * go, if the metapage changed while it was read.  *pending gets the
 * entries still in flight.  Locks: chain by chain as FbfSnapshotLockChain
 * takes them, each partition page share in turn under its chain.
 */
static void *
FbfBloomSnapshot(FbfSnapshotRead *read, const FbfSnapshotMemory *mem,
				 uint64 *pending)
{
	const FbfWindowMetaPageData *meta = &read->meta;
	Relation	index = read->index;
	uint32		nparts = FbfWindowViewParts(meta);
	Fbf		   *f;
	int			i;
	uint32		v;
	uint32		c;

	f = mem->alloc(fbf_size(meta->nbits, meta->nfilters, nparts), mem->arg);
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
			mem->free(f, mem->arg);
			return NULL;
		}
		for (v = c * per_chain; v < (c + 1) * per_chain; v++)
			snapshot_partition(index, meta, f, v);
		*pending += FbfChainCommitted(meta, &read->chain, insert_committed, f);
		if (!FbfSnapshotReleaseChain(read, c == meta->nchains - 1))
		{
			mem->free(f, mem->arg);
			return NULL;
		}
		FbfSnapshotCheckCancel(read);
	}
	return f;
}

/* The Fbf an `fbf` value holds, if it is a Bloom one (not a cuckoo's). */
static const void *
FbfBloomSnapshotOf(const struct varlena *value)
{
	if (FbfValueIsCuckoo(value))
		return NULL;
	return FbfValueGetFbf(value);
}

/* ---- loading one ---- */

static uint32
clamp32(uint64 v)
{
	return v > PG_UINT32_MAX ? PG_UINT32_MAX : (uint32) v;
}

/* a Bloom snapshot's births by logical filter */
static void
births_of(const Fbf *f, int64 *born)
{
	int			i;

	for (i = 0; i < f->nlive; i++)
		born[i] = f->born_at[fbf_slot(f, i)];
}

/*
 * Can the window take the snapshot's shape?  If not, *why says why, for
 * errdetail.
 */
static bool
adoptable(const FbfWindowMetaPageData *meta, const Fbf *f, const char **why)
{
	uint64		pages = 1 + (uint64) meta->nchains + f->nparts;

	if (f->nfilters > FBF_SLICE_LANES)
		*why = psprintf("The snapshot has %d filters; a counter's filter has at most %d.",
						f->nfilters, FBF_SLICE_LANES);
	else if (f->nbits > FBF_SLICE_MAX_BITS || f->nbits < FBF_MIN_NBITS)
		*why = psprintf("The snapshot's partitions have %u bits; a counter's have between %d and %u.",
						f->nbits, FBF_MIN_NBITS, FBF_SLICE_MAX_BITS);
	else if (pages * BLCKSZ > (uint64) fbf_max_filter_size_kb * 1024)
		*why = psprintf("The snapshot's %u partitions need %llu kB, more than fbf.max_filter_size (%d kB).",
						f->nparts, (unsigned long long) (pages * BLCKSZ / 1024),
						fbf_max_filter_size_kb);
	else
		return true;
	return false;
}

/* Can the snapshot be ORed into the window as it is? */
static bool
mergeable(const FbfWindowMetaPageData *meta, const Fbf *f)
{
	uint32		nview = FbfWindowViewParts(meta);

	return f->nbits == meta->nbits && f->nhashes == meta->nhashes &&
		(nview % f->nparts == 0 || f->nparts % nview == 0);
}

/*
 * A Bloom snapshot being adopted, its times, and a bit array's worth of
 * scratch.
 */
typedef struct AdoptBloom
{
	const Fbf  *f;
	const FbfLoadTimes *t;
	uint64	   *plain;
} AdoptBloom;

/* FbfWindowAdopt's page p for a Bloom snapshot: its bits, lane by lane */
static void
adopt_page(char *page, const FbfWindowMetaPageData *new, uint32 p, void *arg)
{
	const Fbf  *f = ((AdoptBloom *) arg)->f;
	const FbfLoadTimes *t = ((AdoptBloom *) arg)->t;
	uint64	   *plain = ((AdoptBloom *) arg)->plain;
	uint32		nwords = fbf_nwords(f->nbits);
	FbfSliceHeader *h;
	void	   *words;
	int			i;

	FbfBloomInitPage(page, f->nbits);
	h = FbfSlicePageGetHeader(page);
	words = FbfSlicePageGetWords(page);
	for (i = 0; i < f->nlive; i++)
	{
		uint32		w;

		h->stamp[i] = FbfWindowExpectedStamp(new, i);
		if (t->due[i] <= t->now)
			continue;			/* the original could have forgotten it */
		h->count[i] = clamp32(fbf_count_const(f, i, p));
		fbf_extract_bits(f, i, p, plain);
		for (w = 0; w < nwords; w++)
		{
			uint64		bits = plain[w];

			while (bits != 0)
			{
				int			b = pg_rightmost_one_pos64(bits);

				bloom_slice_or(words, FBF_SLICE_WIDTH, w * 64 + b,
							   UINT64CONST(1) << i);
				bits &= bits - 1;
			}
		}
	}
}

/*
 * Take the snapshot's shape and ring (see the file header).  The caller
 * holds metabuf exclusively and has checked that the window is empty and
 * can take the shape.
 */
static void
adopt(Relation index, Buffer metabuf, FbfWindowMetaPageData *meta,
	  const Fbf *f, const FbfLoadTimes *t, const FbfHashKey *key,
	  bool public_too, const unsigned char *streams)
{
	FbfWindowMetaPageData new = *meta;
	AdoptBloom	arg = {f, t, palloc(sizeof(uint64) * fbf_nwords(f->nbits))};
	int			i;

	new.nbits = f->nbits;
	new.nhashes = f->nhashes;
	new.nparts = f->nparts;
	if (f->nbits != meta->nbits || f->nparts % meta->base_nparts != 0)
		new.base_nparts = f->nparts;
	new.nfilters = f->nfilters;
	new.nlive = f->nlive;
	new.nslots = f->nfilters;
	new.epoch = Max(meta->epoch, (int64) f->nlive - 1);
	new.period = f->period;
	for (i = 0; i < FBF_MAX_FILTERS; i++)
	{
		new.ring[i] = (uint8) (i < f->nfilters ? i : 0);
		new.born_at[i] = i < f->nlive ? t->born[i] : 0;
	}
	FbfWindowAdoptKey(&new, key, public_too, t->now);
	FbfWindowAdopt(index, metabuf, meta, &new, adopt_page, &arg, t,
				   FbfLoadKeepsStreams(&new, key, public_too) ? streams : NULL);
	pfree(arg.plain);
}

/*
 * OR snapshot partition q into the live partition page blkno, the k-th of
 * the n pages that take it: lanes_of[s] says which lanes snapshot filter s
 * goes into, plain[s] is its bit array in partition q.  Counts are added;
 * of the n pages' copies, one share each counts as distinct (as a split's
 * copies do, window_split.c).
 */
static void
merge_page(Relation index, const FbfWindowMetaPageData *meta, BlockNumber blkno,
		   const Fbf *f, uint32 q, const uint64 *lanes_of, uint64 *const *plain,
		   uint32 k, uint32 n)
{
	Buffer		buf = FbfBloomReadPart(index, blkno, BUFFER_LOCK_EXCLUSIVE);
	FbfXLogState *state = FbfXLogStart(index);
	Page		page = FbfXLogRegisterBuffer(state, buf, 0);
	FbfSliceHeader *h = FbfSlicePageGetHeader(page);
	void	   *words = FbfSlicePageGetWords(page);
	uint32		nwords = fbf_nwords(f->nbits);
	uint64		all = 0;
	uint64		added[FBF_SLICE_LANES] = {0};
	int			s;
	int			j;

	for (s = 0; s < f->nlive; s++)
		all |= lanes_of[s];

	/* a stale lane is cleared and restamped first, as a drain does */
	for (j = 0; j < meta->nlive; j++)
	{
		int			lane = meta->ring[j];
		int64		stamp = FbfWindowExpectedStamp(meta, j);

		if (((all >> lane) & 1) == 0 || h->stamp[lane] == stamp)
			continue;
		bloom_slice_clear(words, FBF_SLICE_WIDTH, meta->nbits, UINT64CONST(1) << lane);
		h->stamp[lane] = stamp;
		h->count[lane] = 0;
		h->dup[lane] = 0;
	}

	for (s = 0; s < f->nlive; s++)
	{
		uint64		c = fbf_count_const(f, s, q);
		uint64		lanes = lanes_of[s];
		uint32		w;

		if (lanes == 0)
			continue;
		for (w = 0; w < nwords; w++)
		{
			uint64		bits = plain[s][w];

			while (bits != 0)
			{
				int			b = pg_rightmost_one_pos64(bits);

				bloom_slice_or(words, FBF_SLICE_WIDTH, w * 64 + b, lanes);
				bits &= bits - 1;
			}
		}
		while (lanes != 0)
		{
			int			lane = pg_rightmost_one_pos64(lanes);

			added[lane] += c;
			lanes &= lanes - 1;
		}
	}

	/*
	 * A lane's count becomes the elements its bits now hold, estimated from
	 * the bits set (-(m/k) ln(1 - X/m)), within what the two sides can make:
	 * at least the larger, at most the sum.  Loading the same snapshot
	 * twice adds no bits, and so no count.  Of the n pages that take the
	 * partition, each counts one share of the increase as distinct.
	 */
	for (j = 0; j < FBF_SLICE_LANES; j++)
	{
		uint64		before = h->count[j];
		uint64		after;
		uint64		increase;
		double		x;

		if (((all >> j) & 1) == 0)
			continue;
		x = bloom_slice_popcount(words, FBF_SLICE_WIDTH, meta->nbits, j);
		after = x >= meta->nbits ? before + added[j] :
			(uint64) (-((double) meta->nbits / meta->nhashes) *
					  log(1.0 - x / meta->nbits) + 0.5);
		after = Min(Max(after, Max(before, added[j])), before + added[j]);
		increase = after - before;
		h->count[j] = clamp32(after);
		h->dup[j] = clamp32((uint64) h->dup[j] + increase -
							(increase / n + (k == 0 ? increase % n : 0)));
	}
	FbfXLogFinish(state);
	UnlockReleaseBuffer(buf);
}

/*
 * OR the snapshot into the window's lanes, aligned in time (see the file
 * header).  The caller holds metabuf exclusively and has checked that the
 * shapes agree.  Returns the number of snapshot filters loaded.
 */
static int
merge(Relation index, Buffer metabuf, const FbfWindowMetaPageData *meta,
	  const Fbf *f, const FbfLoadTimes *t)
{
	int			target[FBF_MAX_FILTERS];
	uint64		lanes_of[FBF_MAX_FILTERS];
	uint64	   *plain[FBF_MAX_FILTERS];
	uint32		nview = FbfWindowViewParts(meta);
	uint32		nwords = fbf_nwords(f->nbits);
	uint32		q;
	int			loaded = 0;
	int			s;

	/* the oldest live filter kept at least as long as each snapshot filter */
	for (s = 0; s < f->nlive; s++)
	{
		int64		keep = s == 0 ? t->last : t->born[s - 1];
		int64		due = t->due[s];
		int			j;

		target[s] = -1;
		if (due <= t->now)
			continue;			/* the original could have forgotten it */
		for (j = meta->nlive - 1; j > 0; j--)
		{
			if (meta->born_at[j - 1] > 0 &&
				meta->born_at[j - 1] + FBF_LOAD_CLOCK_SLACK >= keep &&
				FbfLoadExpires(meta->born_at, meta->nlive, meta->period,
						meta->retention, j, t->now) + FBF_LOAD_CLOCK_SLACK >= due)
				break;
		}
		target[s] = j;
	}
	for (s = 0; s < f->nlive; s++)
	{
		int			j = target[s];

		lanes_of[s] = 0;
		plain[s] = NULL;
		if (j < 0)
			continue;
		lanes_of[s] = UINT64CONST(1) << meta->ring[j];
		/*
		 * The partner of s's own epoch, unless s + 1 lands there already,
		 * or s was born "long ago" (a new window's past filters: nothing was
		 * applied while they were future).
		 */
		if (j + 1 < meta->nlive && t->born[s] != FBF_BORN_LONG_AGO &&
			!(s + 1 < f->nlive && target[s + 1] == j + 1))
			lanes_of[s] |= UINT64CONST(1) << meta->ring[j + 1];
		plain[s] = palloc(sizeof(uint64) * nwords);
		loaded++;
	}
	if (loaded == 0)
		return 0;

	for (q = 0; q < f->nparts; q++)
	{
		/* the live partitions of the readers' view that take partition q */
		uint32		lo = (uint32) ((uint64) q * nview / f->nparts);
		uint32		hi = Max(lo + 1, (uint32) ((uint64) (q + 1) * nview / f->nparts));
		uint32		npages = 0;
		uint32		k = 0;
		BlockNumber prev = InvalidBlockNumber;
		uint32		v;

		for (s = 0; s < f->nlive; s++)
		{
			if (plain[s] != NULL)
				fbf_extract_bits(f, s, q, plain[s]);
		}
		/* an unsplit page stands for several partitions of the view */
		for (v = lo; v < hi; v++)
		{
			BlockNumber blkno = FbfWindowViewBlock(meta, v);

			if (blkno != prev)
				npages++;
			prev = blkno;
		}
		prev = InvalidBlockNumber;
		for (v = lo; v < hi; v++)
		{
			BlockNumber blkno = FbfWindowViewBlock(meta, v);

			if (blkno == prev)
				continue;
			prev = blkno;
			merge_page(index, meta, blkno, f, q, lanes_of, plain, k++, npages);
			FbfWindowCheckCancel(metabuf);
		}
	}
	for (s = 0; s < f->nlive; s++)
	{
		if (plain[s] != NULL)
			pfree(plain[s]);
	}
	return loaded;
}

/*
 * Load `snapshot`, taken under `key` (zero: the public hash; public_too: it
 * also holds operations recorded under that), into the window of `index`
 * (see the file header): adopted whole, key included, if the window is
 * empty and can take its shape, else merged if the shapes and keys agree
 * (window_key.c, FbfWindowMergeKey), else refused.  The caller holds
 * RowExclusiveLock on the counter table and has checked that the user
 * owns it.
 */
static FbfLoadResult
FbfBloomLoad(Relation index, const void *value, const FbfHashKey *key,
			 bool public_too, const unsigned char *streams)
{
	const Fbf  *snapshot = value;
	FbfWindowMetaPageData meta;
	Buffer		metabuf;
	FbfLoadTimes	t;
	const char *why = NULL;
	bool		empty;
	FbfLoadResult result;
	int64		born[FBF_MAX_FILTERS] = {0};

	births_of(snapshot, born);
	FbfLoadCheckTimes(index, born, snapshot->nlive, snapshot->period);

	/* a 1.0 window was upgraded first (FbfWindowLoad) */
	FbfWindowReadMeta(index, &meta);
	if (meta.filter != FBF_FILTER_BLOOM)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot load a Bloom filter snapshot into counter \"%s\"",
						get_rel_name(index->rd_index->indrelid)),
				 errdetail("The counter's window was created with filter => 'cuckoo'; the snapshot holds Bloom filters."),
				 errhint("Load it into a counter or dedup table created with filter => 'bloom'.")));
	metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_EXCLUSIVE, &meta);
	if (meta.version != FBF_STORAGE_VERSION)
		elog(ERROR, "fbf: the filter \"%s\" was not upgraded",
			 RelationGetRelationName(index));
	FbfLoadTimesOf(&meta, born, snapshot->nlive, &t);
	if (FbfLoadDue(&t, snapshot->nlive, snapshot->nfilters, snapshot->period,
				   meta.retention) == 0)
	{
		/* every filter aged out: nothing to load, whatever the shapes */
		UnlockReleaseBuffer(metabuf);
		result.adopted = false;
		result.filters = 0;
		return result;
	}
	empty = FbfWindowIsEmpty(index, &meta, t.now);

	if (empty && adoptable(&meta, snapshot, &why))
	{
		adopt(index, metabuf, &meta, snapshot, &t, key, public_too, streams);
		result.adopted = true;
		result.filters = snapshot->nlive;
	}
	else if (mergeable(&meta, snapshot))
	{
		bool		changed;

		if (!FbfWindowMergeKey(index, &meta, key, public_too, t.now, &changed))
		{
			UnlockReleaseBuffer(metabuf);
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot load the snapshot into counter \"%s\": it was taken under another key and the counter's filter is not empty",
							get_rel_name(index->rd_index->indrelid)),
					 errdetail("Each counter's filter hashes operations under a secret key of its own; the snapshot's bits and the filter's cannot be told apart once merged."),
					 errhint("Load it into a new counter created with the same options: an empty counter takes the snapshot's key with its shape.")));
		}
		if (changed)
			FbfWindowLogMeta(index, metabuf, &meta, t.now);

		/*
		 * The streams know what the merge adds before the bits hold it: the
		 * snapshot's merged into the window's own, each stream exact only
		 * as far as both sides were (core/fbf_stream_snap.c, "The merge
		 * rule").  Where the window's key changed to take the snapshot's,
		 * or the snapshot carries no streams, they never recorded what the
		 * merge adds, and forget everything (window_stream.c).
		 */
		if (streams != NULL && !changed &&
			FbfLoadKeepsStreams(&meta, key, public_too))
			FbfStreamsInstall(index, metabuf, &meta, streams, false,
							  t.now - t.wall_now, t.now);
		else
			FbfStreamsReset(index, metabuf, &meta, t.now);
		result.adopted = false;
		result.filters = merge(index, metabuf, &meta, snapshot, &t);
	}
	else
	{
		uint32		nview = FbfWindowViewParts(&meta);

		UnlockReleaseBuffer(metabuf);
		if (empty)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("cannot load the snapshot into counter \"%s\"",
							get_rel_name(index->rd_index->indrelid)),
					 errdetail("%s", why),
					 errhint("Load it into a counter whose filter has the snapshot's shape, or raise fbf.max_filter_size.")));
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot load the snapshot into counter \"%s\": its filter has another shape and is not empty",
						get_rel_name(index->rd_index->indrelid)),
				 errdetail("The snapshot has %u partitions of %u bits and %d hash functions; the counter's filter has %u partitions of %u bits and %d hash functions.",
						   snapshot->nparts, snapshot->nbits, snapshot->nhashes,
						   nview, meta.nbits, meta.nhashes),
				 errhint("Load it into a new counter created with the same options (an empty counter takes the snapshot's shape), or into one whose filter has the same bits per partition and hash functions.")));
	}
	UnlockReleaseBuffer(metabuf);
	return result;
}

/*
 * The Bloom format's routine (window_format.h): its capabilities, the page
 * operations of window_bloom.c and the snapshot operations above.
 */
const FbfFilterRoutine FbfBloomRoutine = {
	.name = "bloom",
	.page_id = FBF_PAGE_ID_SLICE,
	.can_merge = true,
	.can_resize = true,
	.resize_detail = NULL,
	.split_load = 0,
	.store_pages = FBF_DRAIN_MAX_PAGES,
	.plan = FbfBloomPlan,
	.spread = FbfBloomSpread,
	.validate_meta = FbfBloomValidateMeta,
	.same_shape = FbfBloomSameShape,
	.derive_meta = FbfBloomDeriveMeta,
	.rotate = NULL,
	.init_page = FbfBloomInitPageFor,
	.contains = FbfBloomContains,
	.store = FbfBloomStore,
	.split_page = FbfBloomSplitPage,
	.merge_pages = FbfBloomMergePages,
	.counts = FbfBloomCounts,
	.estimate_fpp = FbfBloomEstimateFpp,
	.split_factor = FbfBloomSplitFactor,
	.merge_factor = FbfBloomMergeFactor,
	.parts_at_cap = FbfBloomPartsAtCap,
	.page_capacity = FbfBloomPageCapacity,
	.stats = FbfBloomStats,
	.snapshot = FbfBloomSnapshot,
	.snapshot_of = FbfBloomSnapshotOf,
	.load = FbfBloomLoad,
};
