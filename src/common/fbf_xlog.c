/*-------------------------------------------------------------------------
 *
 * fbf_xlog.c
 *	  fbf's WAL resource manager: page changes logged as changed byte
 *	  ranges, their redo, descriptions, and masks for consistency checks.
 *
 * Making a change (the caller holds every buffer exclusively locked):
 *
 *		state = FbfXLogStart(rel);
 *		page = FbfXLogRegisterBuffer(state, buf, 0);	-- a copy to change
 *		... change page ...
 *		FbfXLogFinish(state);	-- copies back, logs, sets the LSNs
 *
 * as with generic WAL.  For each page the record holds fragments
 * (offset, length, new bytes) covering every byte that changed outside the
 * page's hole (pd_lower .. pd_upper of a standard page, zeroed on both
 * sides), or, with FBF_XLOG_FULL_IMAGE or when the fragments would be
 * larger than the page, a full image.  A relation that needs no WAL
 * (unlogged, temporary, or new in this transaction under wal_level =
 * minimal) gets its pages copied back and nothing logged.
 *
 * Redo locks the pages of a record in their order (the primary's lock
 * order), applying each page's fragments, and releases them only at the
 * end, as generic WAL's redo does, so hot standby readers never see one
 * page of a multi-page change without the others; a malformed record is a
 * PANIC.  That loop (FbfXLogRedoPages) replays the access methods'
 * compact records of several pages too, each page changed by their own
 * function.
 *
 * Masks: wal_consistency_checking compares each replayed page with a full
 * image of the primary's.  fbf_mask hides the LSN, checksum and hole, then
 * calls the mask that the page's kind registered (FbfXLogRegisterMask, by
 * the page id in the last two bytes of the special space) to hide state
 * set without WAL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/bufmask.h"
#include "access/rmgr.h"
#include "access/xact.h"
#include "access/xlog_internal.h"
#include "access/xloginsert.h"
#include "access/xlogutils.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "common/fbf_page.h"
#include "common/fbf_xlog.h"

StaticAssertDecl(FBF_RMGR_ID > RM_EXPERIMENTAL_ID && FBF_RMGR_ID <= RM_MAX_CUSTOM_ID,
				 "fbf's resource manager id must be a custom one, not the experimental one");

/* fragments closer than this are merged: a header costs 4 bytes */
#define FBF_XLOG_GAP			8

/* room for the fragments of one page before a full image is cheaper */
#define FBF_XLOG_MAX_DELTA		BLCKSZ

typedef struct FbfXLogPage
{
	Buffer		buffer;
	int			flags;
	int			delta_len;
	PGAlignedBlock image;		/* the copy the caller changes */
	char		delta[FBF_XLOG_MAX_DELTA];
} FbfXLogPage;

struct FbfXLogState
{
	bool		needs_wal;
	int			npages;
	FbfXLogPage pages[FBF_XLOG_MAX_PAGES];
};

/*
 * A state is 64 kB, past the size a memory context keeps for reuse: one
 * pallocked and freed for every record went to malloc and back each time,
 * and a large batch's records made the C library give the memory back to
 * the kernel and take it again, record after record (a tenth of a Citus
 * worker's time for batches, in page faults and TLB shootdowns).  So each
 * backend keeps one, in TopMemoryContext from its first record on, and
 * hands it out to one caller at a time; a caller that starts a record
 * while another's is open (none does today) gets a state of its own.  An
 * error between the start and the finish leaves the kept one marked
 * busy: the end of the transaction, or the abort of the subtransaction
 * the error ended, frees it for the next (no record spans either).
 */
static FbfXLogState *kept_state = NULL;
static bool kept_state_busy = false;

static void
kept_state_xact_callback(XactEvent event, void *arg)
{
	kept_state_busy = false;
}

static void
kept_state_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		kept_state_busy = false;
}

#define FBF_MAX_MASKS 8

static struct
{
	uint16		page_id;
	FbfXLogMaskFunc mask;
}			masks[FBF_MAX_MASKS];
static int	nmasks = 0;

/* a page whose pd_lower .. pd_upper is a hole, as PageInit makes it */
static bool
page_is_standard(Page page)
{
	PageHeader	ph = (PageHeader) page;

	return !PageIsNew(page) &&
		ph->pd_lower >= SizeOfPageHeaderData &&
		ph->pd_lower <= ph->pd_upper && ph->pd_upper <= BLCKSZ;
}

static void
zero_hole(Page page)
{
	if (page_is_standard(page))
		memset((char *) page + ((PageHeader) page)->pd_lower, 0,
			   ((PageHeader) page)->pd_upper - ((PageHeader) page)->pd_lower);
}

/* append a fragment; false if the delta would outgrow its buffer */
static bool
add_fragment(FbfXLogPage *p, const char *image, int start, int end)
{
	uint16		offset = (uint16) start;
	uint16		length = (uint16) (end - start);

	if (p->delta_len + 4 + length > FBF_XLOG_MAX_DELTA)
		return false;
	memcpy(p->delta + p->delta_len, &offset, 2);
	memcpy(p->delta + p->delta_len + 2, &length, 2);
	memcpy(p->delta + p->delta_len + 4, image + start, length);
	p->delta_len += 4 + length;
	return true;
}

/* the fragments of [from, to) where `image` differs from `old` */
static bool
delta_region(FbfXLogPage *p, const char *old, const char *image, int from, int to)
{
	int			i = from;

	while (i < to)
	{
		int			start;
		int			end;
		int			same = 0;

		while (i < to && old[i] == image[i])
			i++;
		if (i == to)
			break;
		start = i;
		end = i;
		while (i < to && same < FBF_XLOG_GAP)
		{
			if (old[i] == image[i])
				same++;
			else
			{
				same = 0;
				end = i + 1;
			}
			i++;
		}
		if (!add_fragment(p, image, start, end))
			return false;
	}
	return true;
}

/*
 * Compute page p's delta against the buffer's current contents; fall back
 * to a full image when the fragments would not be smaller.
 */
static void
compute_delta(FbfXLogPage *p)
{
	const char *old = (const char *) BufferGetPage(p->buffer);
	const char *image = p->image.data;
	bool		ok;

	p->delta_len = 0;
	if (p->flags & FBF_XLOG_FULL_IMAGE)
		return;
	if (page_is_standard((Page) image))
		ok = delta_region(p, old, image, 0, ((PageHeader) image)->pd_lower) &&
			delta_region(p, old, image, ((PageHeader) image)->pd_upper, BLCKSZ);
	else
		ok = delta_region(p, old, image, 0, BLCKSZ);
	if (!ok)
	{
		p->flags |= FBF_XLOG_FULL_IMAGE;
		p->delta_len = 0;
	}
}

/* Begin a change of pages of `rel`. */
FbfXLogState *
FbfXLogStart(Relation rel)
{
	FbfXLogState *state;

	if (kept_state == NULL)
	{
		kept_state = MemoryContextAlloc(TopMemoryContext, sizeof(FbfXLogState));
		RegisterXactCallback(kept_state_xact_callback, NULL);
		RegisterSubXactCallback(kept_state_subxact_callback, NULL);
	}
	if (!kept_state_busy)
	{
		state = kept_state;
		kept_state_busy = true;
	}
	else
		state = palloc(sizeof(FbfXLogState));
	state->needs_wal = RelationNeedsWAL(rel);
	state->npages = 0;
	return state;
}

/* a state FbfXLogStart handed out is done with */
static void
release_state(FbfXLogState *state)
{
	if (state == kept_state)
		kept_state_busy = false;
	else
		pfree(state);
}

/*
 * Register an exclusively locked buffer; returns the copy of its page to
 * change.  Registering a buffer twice returns the same copy.
 */
Page
FbfXLogRegisterBuffer(FbfXLogState *state, Buffer buffer, int flags)
{
	FbfXLogPage *p;

	for (int i = 0; i < state->npages; i++)
	{
		if (state->pages[i].buffer == buffer)
			return (Page) state->pages[i].image.data;
	}
	if (state->npages == FBF_XLOG_MAX_PAGES)
		elog(ERROR, "fbf: more than %d pages in one WAL record", FBF_XLOG_MAX_PAGES);
	p = &state->pages[state->npages++];
	p->buffer = buffer;
	p->flags = flags;
	memcpy(p->image.data, BufferGetPage(buffer), BLCKSZ);
	return (Page) p->image.data;
}

/*
 * Apply the changes to the buffers, mark them dirty and, if the relation
 * needs WAL, log them in one record and set the pages' LSN.  Returns the
 * record's LSN (InvalidXLogRecPtr if nothing was logged).  The state is
 * done with.
 */
XLogRecPtr
FbfXLogFinish(FbfXLogState *state)
{
	XLogRecPtr	lsn = InvalidXLogRecPtr;

	for (int i = 0; i < state->npages; i++)
	{
		zero_hole((Page) state->pages[i].image.data);
		if (state->needs_wal)
			compute_delta(&state->pages[i]);
	}

	START_CRIT_SECTION();
	for (int i = 0; i < state->npages; i++)
	{
		memcpy(BufferGetPage(state->pages[i].buffer), state->pages[i].image.data,
			   BLCKSZ);
		MarkBufferDirty(state->pages[i].buffer);
	}
	if (state->needs_wal)
	{
		XLogBeginInsert();
		for (int i = 0; i < state->npages; i++)
		{
			FbfXLogPage *p = &state->pages[i];
			uint8		regflags = page_is_standard(BufferGetPage(p->buffer)) ?
				REGBUF_STANDARD : 0;

			if (p->flags & FBF_XLOG_FULL_IMAGE)
				XLogRegisterBuffer(i, p->buffer, regflags | REGBUF_FORCE_IMAGE);
			else
			{
				XLogRegisterBuffer(i, p->buffer, regflags);
				XLogRegisterBufData(i, p->delta, p->delta_len);
			}
		}
		lsn = XLogInsert(FBF_RMGR_ID, XLOG_FBF_PAGES);
		for (int i = 0; i < state->npages; i++)
			PageSetLSN(BufferGetPage(state->pages[i].buffer), lsn);
	}
	END_CRIT_SECTION();

	release_state(state);
	return lsn;
}

/* Forget the changes: the buffers are left as they were. */
void
FbfXLogAbort(FbfXLogState *state)
{
	release_state(state);
}

/* ----------------------------------------------------------------------
 * Redo
 * ----------------------------------------------------------------------
 */

static void
apply_delta(Page page, const char *delta, Size len)
{
	const char *p = delta;
	const char *end = delta + len;

	while (p < end)
	{
		uint16		offset;
		uint16		length;

		if (end - p < 4)
			elog(PANIC, "fbf redo: truncated fragment header");
		memcpy(&offset, p, 2);
		memcpy(&length, p + 2, 2);
		p += 4;
		if ((Size) offset + length > BLCKSZ || end - p < length)
			elog(PANIC, "fbf redo: fragment of %u bytes at %u is out of bounds",
				 length, offset);
		memcpy((char *) page + offset, p, length);
		p += length;
	}
	zero_hole(page);
}

/* record types registered by the access methods, by info >> 4 */
static struct
{
	const char *name;
	FbfXLogRedoFunc redo;
	FbfXLogDescFunc desc;
}			records[16];

/*
 * Replay a record on its blocks 0..max_block (the caller has refused more
 * than its kind of record has), locking each in order and holding all
 * until the record is replayed, as the primary held them:
 * replay(record, id, buffer, arg) changes each page that needs it (one
 * restored from a full-page image, or already newer, is left alone), which
 * then takes the record's LSN and is dirtied; all are released at the
 * end.  A block id the record does not use is passed over, as generic
 * WAL's redo does.  XLOG_FBF_PAGES and the compact records of the window
 * (src/window/window_xlog.c, window_stream.c) are replayed so.
 */
void
FbfXLogRedoPages(XLogReaderState *record, int max_block,
				 FbfXLogRedoPageFunc replay, void *arg)
{
	Buffer		buffers[XLR_MAX_BLOCK_ID + 1];

	Assert(max_block <= XLR_MAX_BLOCK_ID);
	for (int id = 0; id <= max_block; id++)
	{
		buffers[id] = InvalidBuffer;
		if (!XLogRecHasBlockRef(record, id))
			continue;
		if (XLogReadBufferForRedo(record, id, &buffers[id]) != BLK_NEEDS_REDO)
			continue;
		replay(record, id, buffers[id], arg);
		PageSetLSN(BufferGetPage(buffers[id]), record->EndRecPtr);
		MarkBufferDirty(buffers[id]);
	}
	for (int id = 0; id <= max_block; id++)
	{
		if (BufferIsValid(buffers[id]))
			UnlockReleaseBuffer(buffers[id]);
	}
}

/* an XLOG_FBF_PAGES record's change to its block `id`: its fragments */
static void
pages_redo_page(XLogReaderState *record, int id, Buffer buffer, void *arg)
{
	Size		len;
	char	   *delta = XLogRecGetBlockData(record, id, &len);

	apply_delta(BufferGetPage(buffer), delta, len);
}

static void
pages_redo(XLogReaderState *record)
{
	int			max_block = XLogRecMaxBlockId(record);

	if (max_block >= FBF_XLOG_MAX_PAGES)
		elog(PANIC, "fbf redo: %d pages in one record", max_block + 1);
	FbfXLogRedoPages(record, max_block, pages_redo_page, NULL);
}

static void
fbf_redo(XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;

	if (info == XLOG_FBF_PAGES)
		pages_redo(record);
	else if (records[info >> 4].redo != NULL)
		records[info >> 4].redo(record);
	else
		elog(PANIC, "fbf redo: unknown record type %u", info);
}

static void
fbf_desc(StringInfo buf, XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;

	if (info != XLOG_FBF_PAGES)
	{
		if (records[info >> 4].desc != NULL)
			records[info >> 4].desc(buf, record);
		return;
	}
	for (int id = 0; id <= XLogRecMaxBlockId(record); id++)
	{
		Size		len = 0;

		if (!XLogRecHasBlockRef(record, id))
			continue;
		if (XLogRecHasBlockImage(record, id) && XLogRecBlockImageApply(record, id))
			appendStringInfo(buf, "%sblk %d: image", id > 0 ? "; " : "", id);
		else
		{
			(void) XLogRecGetBlockData(record, id, &len);
			appendStringInfo(buf, "%sblk %d: %zu bytes of changes",
							 id > 0 ? "; " : "", id, len);
		}
	}
}

static const char *
fbf_identify(uint8 info)
{
	info &= ~XLR_INFO_MASK;
	if (info == XLOG_FBF_PAGES)
		return "PAGES";
	return records[info >> 4].name;
}

static void
fbf_mask(char *pagedata, BlockNumber blkno)
{
	Page		page = (Page) pagedata;
	uint16		page_id;

	mask_page_lsn_and_checksum(page);
	mask_unused_space(page);
	if (PageIsNew(page) || PageGetSpecialSize(page) < sizeof(uint16))
		return;
	page_id = *(uint16 *) ((char *) page + BLCKSZ - sizeof(uint16));
	for (int i = 0; i < nmasks; i++)
	{
		if (masks[i].page_id == page_id)
			masks[i].mask(page);
	}
}

static RmgrData fbf_rmgr = {
	.rm_name = "fbf",
	.rm_redo = fbf_redo,
	.rm_desc = fbf_desc,
	.rm_identify = fbf_identify,
	.rm_mask = fbf_mask
};

/* Register the resource manager; from _PG_init. */
void
FbfXLogInit(void)
{
	RegisterCustomRmgr(FBF_RMGR_ID, &fbf_rmgr);
}

/*
 * Pages whose page id is `page_id` have hint-only state that `mask`
 * clears (from an access method's init).
 */
void
FbfXLogRegisterMask(uint16 page_id, FbfXLogMaskFunc mask)
{
	if (nmasks == FBF_MAX_MASKS)
		elog(ERROR, "fbf: too many WAL mask functions");
	masks[nmasks].page_id = page_id;
	masks[nmasks].mask = mask;
	nmasks++;
}

/*
 * Record type `info` (a multiple of 0x10, not XLOG_FBF_PAGES) is replayed
 * by `redo` and described by `desc` (from an access method's init).
 */
void
FbfXLogRegisterRecord(uint8 info, const char *name, FbfXLogRedoFunc redo,
					  FbfXLogDescFunc desc)
{
	if (info == XLOG_FBF_PAGES || (info & 0x0F) != 0 || records[info >> 4].redo != NULL)
		elog(ERROR, "fbf: cannot register WAL record type %u", info);
	records[info >> 4].name = name;
	records[info >> 4].redo = redo;
	records[info >> 4].desc = desc;
}
