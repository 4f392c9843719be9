/*-------------------------------------------------------------------------
 *
 * window_page.c
 *	  Pages of a window index: initialising them, reading them with their
 *	  kind checked, the metapage lock (and its validated copy), writing
 *	  the metapage, rotating its ring, and appending whole pages.
 *
 * Every function that returns a buffer returns it pinned and locked in the
 * mode asked for; the caller releases it with UnlockReleaseBuffer.  Lock
 * order: src/window/README.md, "Lock definitions".  What depends on the
 * window's format (its metapage fields, its partition pages) is asked of
 * its routine (window_format.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/fbf_xlog.h"
#include "access/xloginsert.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "common/fbf_page.h"
#include "window/window_format.h"
#include "window/window_int.h"

void
FbfWindowInitPage(Page page, uint16 page_id)
{
	PageInit(page, BLCKSZ, sizeof(FbfWindowPageOpaqueData));
	FbfWindowPageGetOpaque(page)->page_id = page_id;
}

/* an empty pending page at the end of its chain */
void
FbfWindowInitPendingPage(Page page)
{
	FbfWindowInitPage(page, FBF_PAGE_ID_PENDING);
	FbfWindowPageGetOpaque(page)->next = InvalidBlockNumber;
}

/* store *meta as the metapage's contents */
void
FbfWindowSetMeta(Page page, const FbfWindowMetaPageData *meta)
{
	memcpy(PageGetContents(page), meta, sizeof(FbfWindowMetaPageData));
	((PageHeader) page)->pd_lower =
		(char *) PageGetContents(page) + sizeof(FbfWindowMetaPageData) - (char *) page;
}

/*
 * The buffer a window page was last found in, a hint for ReadRecentBuffer:
 * this backend's, for every window it reads, in two direct-mapped tables
 * of fixed size (its memory does not grow with the windows it opens), by
 * index and block.  The metapage and pending pages, which every operation
 * reads (a chain's head is block 1 + chain), are kept apart from the
 * partition and stream pages, one of hundreds each taken at random, which
 * would evict them.  A hint is only a guess: ReadRecentBuffer pins the
 * buffer only if its tag still names the block, so a stale or colliding
 * one costs a failed check.  None for a temporary table's window: its
 * buffers are this backend's local ones, which a hint could not tell from
 * a shared buffer of another relation's.
 */
typedef struct FbfRecentBuffer
{
	Oid			relid;
	BlockNumber blkno;
	Buffer		buffer;			/* InvalidBuffer: none */
} FbfRecentBuffer;

#define FBF_RECENT_PAGES		512		/* metapages and pending pages */
#define FBF_RECENT_DATA_PAGES	2048	/* partition and stream pages */

static FbfRecentBuffer recent_pages[FBF_RECENT_PAGES];
static FbfRecentBuffer recent_data_pages[FBF_RECENT_DATA_PAGES];

/* the hint slot of block blkno of `index`, whose pages are of kind page_id */
static inline FbfRecentBuffer *
recent_buffer(Relation index, BlockNumber blkno, uint16 page_id)
{
	uint32		h = blkno + RelationGetRelid(index) * 0x9E3779B1u;

	if (page_id == FBF_PAGE_ID_META || page_id == FBF_PAGE_ID_PENDING)
		return &recent_pages[h % FBF_RECENT_PAGES];
	return &recent_data_pages[h % FBF_RECENT_DATA_PAGES];
}

/*
 * Read block blkno and lock it in `mode`; error out (as corruption) unless
 * it is a window page of kind page_id.
 *
 * Every operation reads the metapage and its chain, and a look-up in the
 * shared buffer table costs more than the rest of such a read: the buffer
 * the block was last found in is tried first (FbfRecentBuffer).  A read
 * through a hint is counted in the index's statistics as a hit, as
 * ReadBuffer counts one (but not in pg_stat_io, nor in a vacuum's cost).
 */
Buffer
FbfWindowReadPage(Relation index, BlockNumber blkno, int mode, uint16 page_id)
{
	FbfRecentBuffer *recent = NULL;
	Buffer		buf = InvalidBuffer;

	if (!RelationUsesLocalBuffers(index))
	{
		recent = recent_buffer(index, blkno, page_id);
		if (recent->relid == RelationGetRelid(index) && recent->blkno == blkno &&
			BufferIsValid(recent->buffer) &&
			ReadRecentBuffer(FbfRelationLocator(index), MAIN_FORKNUM, blkno,
							 recent->buffer))
		{
			buf = recent->buffer;
			pgstat_count_buffer_read(index);
			pgstat_count_buffer_hit(index);
		}
	}
	if (!BufferIsValid(buf))
	{
		buf = ReadBuffer(index, blkno);
		if (recent != NULL)
		{
			recent->relid = RelationGetRelid(index);
			recent->blkno = blkno;
			recent->buffer = buf;
		}
	}
	LockBuffer(buf, mode);
	if (FbfPageId(BufferGetPage(buf), sizeof(FbfWindowPageOpaqueData)) != page_id)
		FbfReportUnexpectedPage(index, blkno,
								"Recreate the counter table's filter with REINDEX.");
	return buf;
}

/*
 * Lock the metapage in `mode` (share for an operation, exclusive to change
 * the ring) and copy it into *meta, validated: every later computation
 * trusts these fields.  Returns the metapage's buffer, still locked.
 *
 * A window of storage version 1 comes back with meta->version 1, no
 * partition pages (nparts 0) and its filters described as legacy ones:
 * only a refresh (which upgrades it) and reads of the whole window may use
 * such a copy.
 */
Buffer
FbfWindowLockMeta(Relation index, int mode, FbfWindowMetaPageData *meta)
{
	Buffer		metabuf = FbfWindowReadPage(index, FBF_METAPAGE_BLKNO, mode,
											FBF_PAGE_ID_META);

	memcpy(meta, FbfWindowPageGetMeta(BufferGetPage(metabuf)),
		   sizeof(FbfWindowMetaPageData));
	if (meta->magic == FBF_META_MAGIC && meta->version == 1)
	{
		/* a window not yet upgraded: FbfWindowMetaFromV1 says what it holds */
		FbfWindowMetaFromV1(BufferGetPage(metabuf), meta);
		return metabuf;
	}
	if (meta->magic != FBF_META_MAGIC || meta->version != FBF_STORAGE_VERSION ||
		meta->nlive < 2 || meta->nlive > meta->nfilters ||
		meta->nfilters > FBF_SLICE_LANES || meta->nslots > FBF_SLICE_LANES ||
		meta->nparts < 1 || meta->nchains < 1 || meta->nparts % meta->nchains != 0 ||
		meta->split_next > meta->nparts ||
		(meta->split_next > 0 && meta->split_start == InvalidBlockNumber) ||
		meta->split_factor > 64 || meta->merge_factor > 64 ||
		(meta->split_factor > 0 && meta->merge_factor > 0) ||
		(meta->merge_factor > 0 && meta->nparts % meta->merge_factor != 0) ||
		meta->legacy.nlive > FBF_MAX_FILTERS ||
		meta->pending_at[0] < 0 || meta->pending_at[1] < 0 ||
		(meta->stream_pages > 0 &&
		 (meta->stream_start <= meta->nchains ||
		  meta->stream_start >= MaxBlockNumber ||
		  meta->stream_pages > MaxBlockNumber - meta->stream_start)) ||
		meta->filter >= FBF_FILTER_COUNT ||
		FbfFilterRoutineFor(meta->filter) == NULL ||
		!FbfFilterRoutineFor(meta->filter)->validate_meta(meta))
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" has an invalid fbf metapage",
						RelationGetRelationName(index))));
	return metabuf;
}

/* A validated copy of the metapage, without keeping any lock. */
void
FbfWindowReadMeta(Relation index, FbfWindowMetaPageData *meta)
{
	UnlockReleaseBuffer(FbfWindowLockMeta(index, BUFFER_LOCK_SHARE, meta));
}

/*
 * Replace the metapage's contents with *meta, in one WAL record, its
 * format's derived fields recomputed (FbfFilterRoutine.derive_meta: a
 * Bloom window's overfull count) and its clock re-anchored at window time
 * `now` first (window_clock.c: every metapage write re-anchors).  The caller holds metabuf exclusively locked
 * and read `now` under that lock.
 */
void
FbfWindowLogMeta(Relation index, Buffer metabuf, FbfWindowMetaPageData *meta,
				 int64 now)
{
	FbfXLogState *state;
	Page		page;

	/* a version 1 metapage is only ever replaced by its upgrade */
	if (meta->version != FBF_STORAGE_VERSION)
		elog(ERROR, "fbf: cannot write a metapage of storage version %u", meta->version);
	FbfFilterRoutineOf(meta)->derive_meta(meta);
	FbfWindowClockAnchor(index, meta, now);
	state = FbfXLogStart(index);
	page = FbfXLogRegisterBuffer(state, metabuf, 0);
	FbfWindowSetMeta(page, meta);
	FbfXLogFinish(state);
}

/*
 * Is a rotation due at window time `now`?  The future filter is a period
 * old, and fbf_refresh_action does not postpone it (the oldest filter
 * still covering the retention), so that FbfWindowRotate would turn the
 * ring.
 */
bool
FbfWindowRotationDue(const FbfWindowMetaPageData *meta, int64 now)
{
	return now - meta->born_at[0] >= meta->period &&
		fbf_refresh_action(meta->nlive, meta->nfilters,
						   meta->born_at[meta->nlive - 2], now,
						   meta->retention) != FBF_REFRESH_POSTPONE;
}

/*
 * Rotate once, as fbf_refresh_action says at `now`: the recycled filter
 * (the oldest live one, or the first unborn one) becomes the empty future,
 * born at `born`; its blocks go stale with the new epoch (and the
 * format notes the new epoch: FbfFilterRoutine.rotate).  Returns false
 * if postponed.  A refresh passes born = now; a load, the time the
 * snapshot's future stopped taking operations (window_adopt.c).
 * `pending`: the operations on the chains at that birth (meta->pending_at),
 * 0 if not counted.
 */
bool
FbfWindowRotate(FbfWindowMetaPageData *meta, int64 now, int64 born,
				int64 pending)
{
	int			from;

	switch (fbf_refresh_action(meta->nlive, meta->nfilters,
							   meta->born_at[meta->nlive - 2], now,
							   meta->retention))
	{
		case FBF_REFRESH_RECYCLE_OLDEST:
			from = meta->nlive - 1;
			break;
		case FBF_REFRESH_USE_UNBORN:
			from = meta->nlive;
			meta->nlive++;
			break;
		default:
			return false;
	}
	{
		uint8		slot = meta->ring[from];

		memmove(&meta->ring[1], &meta->ring[0], from);
		memmove(&meta->born_at[1], &meta->born_at[0], sizeof(int64) * from);
		meta->ring[0] = slot;
		meta->born_at[0] = born;
	}
	meta->pending_at[1] = meta->pending_at[0];
	meta->pending_at[0] = pending;
	meta->epoch++;
	if (FbfFilterRoutineOf(meta)->rotate != NULL)
		FbfFilterRoutineOf(meta)->rotate(meta);
	return true;
}

/*
 * Append a whole new page to `fork` of the relation and WAL-log it as a
 * full image.  *next is the block number it must get (the fork's current
 * size); it is advanced.
 */
void
FbfWindowAppendPage(Relation index, ForkNumber fork, BlockNumber *next,
					Page image)
{
	if (fork == MAIN_FORKNUM)
	{
		Buffer		buf = FbfNewBuffer(index);

		if (BufferGetBlockNumber(buf) != *next)
			elog(ERROR, "fbf: extended \"%s\" to block %u, expected %u",
				 RelationGetRelationName(index), BufferGetBlockNumber(buf), *next);
		START_CRIT_SECTION();
		memcpy(BufferGetPage(buf), image, BLCKSZ);
		MarkBufferDirty(buf);
		if (RelationNeedsWAL(index))
			log_newpage_buffer(buf, true);
		END_CRIT_SECTION();
		UnlockReleaseBuffer(buf);
	}
	else
	{
		Assert(fork == INIT_FORKNUM);
		FbfWriteInitForkPage(index, *next, image);
	}
	(*next)++;
}

/*
 * Append `nparts` empty partition pages of the window's format (`meta`'s
 * filter and shape); returns the first.  The caller holds the metapage
 * exclusively (or is building the index).
 */
BlockNumber
FbfWindowAppendParts(Relation index, ForkNumber fork, BlockNumber *next,
					 uint32 nparts, const FbfWindowMetaPageData *meta)
{
	const FbfFilterRoutine *routine = FbfFilterRoutineOf(meta);
	BlockNumber start = *next;
	PGAlignedBlock image;
	uint32		p;

	for (p = 0; p < nparts; p++)
	{
		routine->init_page(image.data, meta);
		FbfWindowAppendPage(index, fork, next, image.data);
		CHECK_FOR_INTERRUPTS();
	}
	return start;
}

/*
 * Honour a cancel, a statement timeout or a terminate in a long walk of the
 * window that holds the metapage's lock throughout (a snapshot, a load),
 * where CHECK_FOR_INTERRUPTS does nothing: a backend holds interrupts off
 * while it holds a buffer lock.  Called between pages, holding metabuf's
 * lock and no other lightweight lock: if a cancel or terminate is pending
 * that nothing else holds off, releases metabuf and lets
 * CHECK_FOR_INTERRUPTS throw; an error between pages leaves nothing half
 * written (a crash there would leave the same).  Otherwise returns, the
 * lock still held.
 */
void
FbfWindowCheckCancel(Buffer metabuf)
{
	if (!FbfCancelWaiting(1))
		return;
	UnlockReleaseBuffer(metabuf);
	CHECK_FOR_INTERRUPTS();
	elog(ERROR, "fbf: a pending cancel was not processed");
}
