/*-------------------------------------------------------------------------
 *
 * fbf_page.h
 *	  Page utilities shared by fbf's two access methods, the counters'
 *	  window index (`fbf_filter`, src/window) and the `cuckoo` index
 *	  (src/cuckoo).
 *
 * Both access methods follow one page convention, as PostgreSQL's own
 * index AMs do: every page has a special space of a fixed size per AM
 * whose last two bytes are a page id that names the AM (and, for the
 * window index, the page kind), so that tools and verify functions can
 * recognise pages.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_PAGE_H
#define FBF_PAGE_H

#include "postgres.h"

#include "miscadmin.h"
#include "storage/buf.h"
#include "storage/bufpage.h"
#include "utils/relcache.h"

#include "compat.h"

/*
 * The page id in the last two bytes of the special space, or 0 if the page
 * is new or its special space is not `special_size` bytes (MAXALIGN'd).
 */
extern uint16 FbfPageId(Page page, Size special_size);

/*
 * Report a page that is not what the caller expected at this block as
 * index corruption (XX002), naming the index and the block, with an
 * optional hint.  Never returns.
 */
fbf_noreturn extern void FbfReportUnexpectedPage(Relation index,
												 BlockNumber blkno,
												 const char *hint);

/*
 * A new, zeroed page at the end of the index's main fork, pinned and
 * exclusively locked.  Takes the relation extension lock unless the
 * relation is local.  The caller initialises and WAL-logs the page.
 */
extern Buffer FbfNewBuffer(Relation index);

/*
 * Write block `blkno` of the init fork of an unlogged index (blocks in
 * order, from 0) and WAL-log it as a full page image.  The page is
 * checksummed here.  After the last block the caller must call
 * FbfSyncInitFork: the init fork bypasses shared buffers.
 */
extern void FbfWriteInitForkPage(Relation index, BlockNumber blkno, Page page);
extern void FbfSyncInitFork(Relation index);

/*
 * Is a cancel, a statement timeout or a terminate waiting that only the
 * caller's own `nlocks` buffer locks hold off?  A walk over many pages
 * under one lock (CHECK_FOR_INTERRUPTS does nothing while a backend holds
 * a lightweight lock) asks this between pages: if so, it releases its
 * locks, leaving nothing half written, and calls CHECK_FOR_INTERRUPTS,
 * which then throws.  Anything else holding interrupts off (a critical
 * section, a caller's lock, a protocol message being read) says no.
 */
static inline bool
FbfCancelWaiting(uint32 nlocks)
{
	return unlikely(InterruptPending) && CritSectionCount == 0 &&
		InterruptHoldoffCount == nlocks &&
		(ProcDiePending || (QueryCancelPending && QueryCancelHoldoffCount == 0));
}

#endif							/* FBF_PAGE_H */
