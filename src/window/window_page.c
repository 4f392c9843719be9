/*-------------------------------------------------------------------------
 *
 * window_page.c
 *	  Pages of a window index: initialising them, reading them with their
 *	  kind checked, the metapage lock, and appending whole pages.
 *
 * Every function that returns a buffer returns it pinned and locked in the
 * mode asked for; the caller releases it with UnlockReleaseBuffer.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/fbf_xlog.h"
#include "access/xloginsert.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "common/fbf_page.h"
#include "window/window_int.h"

void
FbfWindowInitPage(Page page, uint16 page_id)
{
	PageInit(page, BLCKSZ, sizeof(FbfWindowPageOpaqueData));
	FbfWindowPageGetOpaque(page)->page_id = page_id;
}

/* a filter block: empty bits, stamped with its filter's birth epoch */
static void
init_filter_page(Page page, uint32 nbits, int64 stamp)
{
	FbfWindowInitPage(page, FBF_PAGE_ID_FILTER);
	FbfWindowPageGetOpaque(page)->stamp = stamp;
	((PageHeader) page)->pd_lower =
		(char *) FbfWindowPageGetWords(page) + fbf_nwords(nbits) * 8 - (char *) page;
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
 * Read block blkno and lock it in `mode`; error out (as corruption) unless
 * it is a window page of kind page_id.
 */
Buffer
FbfWindowReadPage(Relation index, BlockNumber blkno, int mode, uint16 page_id)
{
	Buffer		buf = ReadBuffer(index, blkno);

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
 */
Buffer
FbfWindowLockMeta(Relation index, int mode, FbfWindowMetaPageData *meta)
{
	Buffer		metabuf = FbfWindowReadPage(index, FBF_METAPAGE_BLKNO, mode,
											FBF_PAGE_ID_META);

	memcpy(meta, FbfWindowPageGetMeta(BufferGetPage(metabuf)),
		   sizeof(FbfWindowMetaPageData));
	if (meta->magic != FBF_META_MAGIC || meta->version != FBF_STORAGE_VERSION ||
		meta->nlive < 2 || meta->nlive > meta->nfilters ||
		meta->nfilters > FBF_MAX_FILTERS || meta->nparts < 1)
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
 * Replace the metapage's contents with *meta, in one WAL record,
 * re-anchoring its clock at window time `now` first (window_clock.c: every
 * metapage write re-anchors).  The caller holds metabuf exclusively locked
 * and read `now` under that lock.
 */
void
FbfWindowLogMeta(Relation index, Buffer metabuf, FbfWindowMetaPageData *meta,
				 int64 now)
{
	FbfXLogState *state;
	Page		page;

	FbfWindowClockAnchor(index, meta, now);
	state = FbfXLogStart(index);
	page = FbfXLogRegisterBuffer(state, metabuf, 0);
	FbfWindowSetMeta(page, meta);
	FbfXLogFinish(state);
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
 * Append the P blocks of a slot, stamped `stamp`; returns the first.  The
 * caller holds the metapage exclusively (or is building the index).
 */
BlockNumber
FbfWindowAppendSlot(Relation index, ForkNumber fork, BlockNumber *next,
					const FbfWindowMetaPageData *meta, int64 stamp)
{
	BlockNumber start = *next;
	PGAlignedBlock image;
	uint32		p;

	for (p = 0; p < meta->nparts; p++)
	{
		init_filter_page(image.data, meta->nbits, stamp);
		FbfWindowAppendPage(index, fork, next, image.data);
	}
	return start;
}
