/*-------------------------------------------------------------------------
 *
 * window_int.h
 *	  Declarations shared by the files of the window subsystem only: page
 *	  accessors, the metapage lock, pending entries' fate, and the
 *	  setting the window owns.  Nothing outside src/window includes this.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_WINDOW_INT_H
#define FBF_WINDOW_INT_H

#include "postgres.h"

#include "storage/buf.h"
#include "storage/bufpage.h"
#include "access/transam.h"
#include "storage/smgr.h"

#include "compat.h"
#include "window/window.h"

/* fbf.max_filter_size, in kB: the memory cap of one window (window_am.c) */
extern int	fbf_max_filter_size_kb;

/* ---- page accessors ---- */

static inline FbfWindowMetaPage
FbfWindowPageGetMeta(Page page)
{
	return (FbfWindowMetaPage) PageGetContents(page);
}

static inline uint64 *
FbfWindowPageGetWords(Page page)
{
	return (uint64 *) PageGetContents(page);
}

/* the entries of a pending page; *n gets their number */
static inline FbfPendingEntry *
FbfWindowPageGetEntries(Page page, int *n)
{
	char	   *start = PageGetContents(page);

	*n = (int) ((((PageHeader) page)->pd_lower - (start - (char *) page)) /
				sizeof(FbfPendingEntry));
	return (FbfPendingEntry *) start;
}

static inline void
FbfWindowPageSetEntryCount(Page page, int n)
{
	((PageHeader) page)->pd_lower =
		PageGetContents(page) + n * sizeof(FbfPendingEntry) - (char *) page;
}

/* birth epoch that logical filter i's blocks must carry to be current */
static inline int64
FbfWindowExpectedStamp(const FbfWindowMetaPageData *meta, int logical)
{
	return meta->epoch - logical;
}

/* does filter block `page` hold logical filter i's current bits? */
static inline bool
FbfWindowBlockIsCurrent(Page page, const FbfWindowMetaPageData *meta, int logical)
{
	return FbfWindowPageGetOpaque(page)->stamp ==
		FbfWindowExpectedStamp(meta, logical);
}

/* ---- window_page.c ---- */
extern void FbfWindowInitPage(Page page, uint16 page_id);
extern void FbfWindowInitPendingPage(Page page);
extern void FbfWindowSetMeta(Page page, const FbfWindowMetaPageData *meta);
extern Buffer FbfWindowReadPage(Relation index, BlockNumber blkno, int mode,
								uint16 page_id);
extern Buffer FbfWindowLockMeta(Relation index, int mode,
								FbfWindowMetaPageData *meta);
extern void FbfWindowLogMeta(Relation index, Buffer metabuf,
							 FbfWindowMetaPageData *meta, int64 now);
extern void FbfWindowAppendPage(Relation index, ForkNumber fork,
								BlockNumber *next, Page image);
extern BlockNumber FbfWindowAppendSlot(Relation index, ForkNumber fork,
									   BlockNumber *next,
									   const FbfWindowMetaPageData *meta,
									   int64 stamp);

/* ---- window_clock.c ---- */
extern bool FbfWindowClockStale(const FbfWindowMetaPageData *meta);
extern void FbfWindowClockAnchor(Relation index, FbfWindowMetaPageData *meta,
								 int64 now);

/* ---- window_build.c ---- */
extern void FbfWindowInitStorage(Relation index, ForkNumber fork,
								 const FbfWindowOptions *opts);
extern bool FbfWindowCopyStorage(Relation index, FbfFileLocator old,
								 bool permanent);
extern void FbfWindowSyncOptions(Relation index);
extern void FbfWindowUpgrade(Relation index, FbfWindowMetaPageData *meta,
							 int64 now);

/* ---- window_rebuild.c ---- */
extern bool FbfWindowBuildPages(Relation heap, Relation index);
extern void FbfWindowCheckIndexCleanup(Relation heap);

/* ---- window_pending.c ---- */

/* The fate of the (sub)transaction that applied a pending entry. */
typedef enum FbfEntryStatus
{
	FBF_ENTRY_OURS,				/* our transaction, or a subtransaction */
	FBF_ENTRY_IN_PROGRESS,
	FBF_ENTRY_COMMITTED,
	FBF_ENTRY_ABORTED
} FbfEntryStatus;

/*
 * A partition's pending chain: the head page and its overflow pages, all
 * locked exclusively, in chain order.
 */
typedef struct FbfPendingChain
{
	int			n;
	Buffer		bufs[FBF_MAX_PENDING_PAGES];
} FbfPendingChain;

extern FullTransactionId FbfEntryFullXid(const FbfWindowMetaPageData *meta,
										 const FbfPendingEntry *entry);
extern FbfEntryStatus FbfEntryStatusOf(FullTransactionId fxid);
extern void FbfChainLock(Relation index, const FbfWindowMetaPageData *meta,
						 uint32 part, FbfPendingChain *chain);
extern void FbfChainLockMode(Relation index, const FbfWindowMetaPageData *meta,
							 uint32 part, int mode, FbfPendingChain *chain);
extern void FbfChainRelease(FbfPendingChain *chain);
extern int	FbfChainDrain(Relation index, const FbfWindowMetaPageData *meta,
						  uint32 part, FbfPendingChain *chain);
extern void FbfChainExtend(Relation index, FbfPendingChain *chain);
extern void FbfChainSetFloor(Relation index, FbfPendingChain *chain,
							 FullTransactionId floor);
extern FullTransactionId FbfChainFloor(FbfPendingChain *chain);

#endif							/* FBF_WINDOW_INT_H */
