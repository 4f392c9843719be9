/*-------------------------------------------------------------------------
 *
 * window_stream.c
 *	  A window's stream pages: the exact state of the streams a counter
 *	  has seen (core/fbf_stream.h), one FbfStreamPage per page, in a run
 *	  of meta->stream_pages pages from meta->stream_start.  Making the
 *	  run, checking one operation, recording drained operations (the
 *	  record XLOG_FBF_STREAMS and its redo), forgetting every stream
 *	  (a reset), and their statistics.
 *
 * A stream's page is FbfStreamBlock: the high 32 bits of its id reduced
 * over the run, as fbf_part reduces an operation's hash over the
 * partitions, so a lookup reads one page.  Every time here is window time
 * (FbfWindowNow), and a stream page's horizon is FbfStreamHorizon: the
 * retention and a period, the longest an operation can be remembered by
 * the filter after it was applied.
 *
 * Locks (src/window/README.md, "Lock definitions"): stream pages are
 * leaves, taken after the metapage and the operation's chain, exclusive
 * in block order to record, share one at a time to check or read;
 * nothing else is locked while one is held.  Making the run or resetting
 * it is done under the metapage's exclusive lock, which callers hold.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xloginsert.h"
#include "access/xlogutils.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "common/fbf_xlog.h"
#include "window/window_int.h"

/*
 * XLOG_FBF_STREAMS: up to FBF_XLOG_MAX_PAGES stream pages; each block's
 * data an xl_fbf_streams, then n FbfStreamOp, recorded in that order.
 */
typedef struct xl_fbf_streams
{
	int64		now;			/* window time of the recording */
	int64		horizon;		/* FbfStreamHorizon then */
	uint32		n;				/* operations of this page */
} xl_fbf_streams;

#define SizeOfFbfStreams	(offsetof(xl_fbf_streams, n) + sizeof(uint32))

/* the stream page in a page's contents */
static inline FbfStreamPage *
stream_page_of(Page page)
{
	return (FbfStreamPage *) PageGetContents(page);
}

/* slots of every stream page: what a window page's contents hold */
static inline uint32
stream_capacity(void)
{
	return fbf_stream_capacity(FBF_PAGE_CONTENT_BYTES);
}

/*
 * The longest an operation applied at some time is remembered by the
 * window after it: the retention, and the period a filter takes
 * operations before it starts aging (a shrunken period never lengthens
 * it past the planned one).
 */
int64
FbfStreamHorizon(const FbfWindowMetaPageData *meta)
{
	return meta->retention + Max(meta->period, meta->base_period);
}

/* The stream page of stream `stream`; meta->stream_pages > 0. */
BlockNumber
FbfStreamBlock(const FbfWindowMetaPageData *meta, uint64 stream)
{
	Assert(meta->stream_pages > 0);
	return meta->stream_start +
		(BlockNumber) (((stream >> 32) * (uint64) meta->stream_pages) >> 32);
}

/* Stream pages that hold max_streams streams (0: none). */
uint32
FbfStreamPagesFor(int max_streams)
{
	uint32		cap = stream_capacity();

	if (max_streams <= 0)
		return 0;
	return (uint32) (((uint64) max_streams + cap - 1) / cap);
}

/*
 * The stream pages `index` wants: its reloption max_streams, or, where it
 * is -1, fbf.max_streams.
 */
int
FbfStreamsWanted(Relation index)
{
	int			max_streams = FbfWindowGetOptions(index)->max_streams;

	if (max_streams < 0)
		max_streams = fbf_max_streams;
	return (int) FbfStreamPagesFor(max_streams);
}

/*
 * Append a run of npages empty stream pages that know every operation of
 * their streams since `since` (FBF_STREAM_ALWAYS for a new window, else
 * now) to `fork`, at *next, which is advanced; returns the first.  The
 * caller holds the metapage exclusively, or is building the index, and
 * for the main fork holds the relation's extension lock so that the run
 * is contiguous.  The metapage names the run afterwards.
 */
BlockNumber
FbfStreamsCreate(Relation index, ForkNumber fork, BlockNumber *next,
				 uint32 npages, int64 since)
{
	BlockNumber start = *next;
	PGAlignedBlock image;
	uint32		nslots = stream_capacity();
	uint32		i;

	FbfWindowInitPage(image.data, FBF_PAGE_ID_STREAM);
	fbf_stream_page_init(stream_page_of(image.data), nslots, since);
	((PageHeader) image.data)->pd_lower =
		(PageGetContents(image.data) - image.data) + sizeof(FbfStreamPage) +
		(Size) nslots * sizeof(FbfStreamSlot);
	for (i = 0; i < npages; i++)
	{
		FbfWindowAppendPage(index, fork, next, image.data);
		CHECK_FOR_INTERRUPTS();
	}
	return start;
}

/* error out unless the locked page `buf` holds a stream page we can trust */
static FbfStreamPage *
stream_page_checked(Relation index, Buffer buf)
{
	FbfStreamPage *sp = stream_page_of(BufferGetPage(buf));

	if (!fbf_stream_page_valid(sp, stream_capacity()))
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" has an invalid stream page at block %u",
						RelationGetRelationName(index), BufferGetBlockNumber(buf)),
				 errhint("Recreate the counter table's filter with REINDEX.")));
	return sp;
}

/*
 * What the streams know of operation `seq` of stream `stream` at `now`
 * (core/fbf_stream.h): new, seen, or not known (FBF_STREAM_ASK, always
 * the answer of a window without stream pages).  Share-locks the
 * stream's page for the check; the caller holds the metapage (share) and
 * the operation's chain.
 */
FbfStreamAnswer
FbfStreamCheck(Relation index, const FbfWindowMetaPageData *meta,
			   uint64 stream, int64 seq, int64 now)
{
	Buffer		buf;
	FbfStreamAnswer answer;

	if (meta->stream_pages == 0)
		return FBF_STREAM_ASK;
	buf = FbfWindowReadPage(index, FbfStreamBlock(meta, stream),
							BUFFER_LOCK_SHARE, FBF_PAGE_ID_STREAM);
	answer = fbf_stream_check(stream_page_checked(index, buf), stream, seq,
							  now, FbfStreamHorizon(meta));
	UnlockReleaseBuffer(buf);
	return answer;
}

/* an operation with its stream page, sorted by page, then by its order */
typedef struct StreamOpAt
{
	BlockNumber blkno;
	int			order;
} StreamOpAt;

static int
stream_op_cmp(const void *a, const void *b)
{
	const StreamOpAt *x = a;
	const StreamOpAt *y = b;

	if (x->blkno != y->blkno)
		return x->blkno < y->blkno ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Record n operations in a stream page (do and redo). */
static void
stream_page_record(FbfStreamPage *sp, const xl_fbf_streams *xl,
				   const FbfStreamOp *ops)
{
	uint32		i;

	for (i = 0; i < xl->n; i++)
		fbf_stream_record(sp, ops[i].stream, ops[i].seq, xl->now, xl->horizon);
}

/*
 * Record in their stream pages the n operations `ops`, committed and
 * drained at `now` (window time): for each page at most
 * FBF_XLOG_MAX_PAGES at a time, locked exclusive in block order, changed
 * and logged in one XLOG_FBF_STREAMS record, then released.  Recording is
 * idempotent, so an operation recorded again (a drain redone after a
 * crash) changes nothing.  The caller holds the metapage (share) and the
 * operations' chain, and no partition page.
 */
void
FbfStreamsRecord(Relation index, const FbfWindowMetaPageData *meta,
				 const FbfStreamOp *ops, int n, int64 now)
{
	StreamOpAt *at;
	FbfStreamOp *sorted;
	xl_fbf_streams xl[FBF_XLOG_MAX_PAGES];
	Buffer		bufs[FBF_XLOG_MAX_PAGES];
	int			first[FBF_XLOG_MAX_PAGES];
	int64		horizon;
	int			i;

	if (meta->stream_pages == 0 || n <= 0)
		return;
	horizon = FbfStreamHorizon(meta);
	at = palloc(sizeof(StreamOpAt) * n);
	sorted = palloc(sizeof(FbfStreamOp) * n);
	for (i = 0; i < n; i++)
	{
		at[i].blkno = FbfStreamBlock(meta, ops[i].stream);
		at[i].order = i;
	}
	qsort(at, n, sizeof(StreamOpAt), stream_op_cmp);
	for (i = 0; i < n; i++)
		sorted[i] = ops[at[i].order];

	i = 0;
	while (i < n)
	{
		int			npages = 0;
		int			b;

		/* the next pages, up to a record's worth, locked in block order */
		while (i < n && npages < FBF_XLOG_MAX_PAGES)
		{
			first[npages] = i;
			xl[npages].now = now;
			xl[npages].horizon = horizon;
			xl[npages].n = 0;
			while (i < n && at[i].blkno == at[first[npages]].blkno)
			{
				xl[npages].n++;
				i++;
			}
			bufs[npages] = FbfWindowReadPage(index, at[first[npages]].blkno,
											 BUFFER_LOCK_EXCLUSIVE,
											 FBF_PAGE_ID_STREAM);
			(void) stream_page_checked(index, bufs[npages]);
			npages++;
		}

		START_CRIT_SECTION();
		for (b = 0; b < npages; b++)
		{
			stream_page_record(stream_page_of(BufferGetPage(bufs[b])), &xl[b],
							   &sorted[first[b]]);
			MarkBufferDirty(bufs[b]);
		}
		if (RelationNeedsWAL(index))
		{
			XLogRecPtr	lsn;

			XLogBeginInsert();
			for (b = 0; b < npages; b++)
			{
				XLogRegisterBuffer(b, bufs[b], REGBUF_STANDARD);
				XLogRegisterBufData(b, (char *) &xl[b], SizeOfFbfStreams);
				XLogRegisterBufData(b, (char *) &sorted[first[b]],
									sizeof(FbfStreamOp) * xl[b].n);
			}
			lsn = XLogInsert(FBF_RMGR_ID, XLOG_FBF_STREAMS);
			for (b = 0; b < npages; b++)
				PageSetLSN(BufferGetPage(bufs[b]), lsn);
		}
		END_CRIT_SECTION();
		for (b = 0; b < npages; b++)
			UnlockReleaseBuffer(bufs[b]);
	}
	pfree(sorted);
	pfree(at);
}

/*
 * Forget every stream: each stream page emptied, knowing operations only
 * from `now` (window time), or from when the page is reached if that is
 * later, one logged change per page.  For every path that makes the
 * window remember operations its streams never recorded (a load,
 * adopting a snapshot): the caller holds the metapage exclusively, and
 * calls this before those operations become visible.  A drain that meets
 * an operation from before the stream pages (record_streams) calls it
 * under the metapage's share lock, while other drains record: an
 * operation recorded in a page after `now` was read and before the page
 * is reached is forgotten with the rest, so the page must not claim to
 * know everything since a time before that record.
 */
void
FbfStreamsReset(Relation index, const FbfWindowMetaPageData *meta, int64 now)
{
	uint32		p;

	for (p = 0; p < meta->stream_pages; p++)
	{
		Buffer		buf = FbfWindowReadPage(index, meta->stream_start + p,
											BUFFER_LOCK_EXCLUSIVE,
											FBF_PAGE_ID_STREAM);
		FbfXLogState *state;
		Page		page;

		(void) stream_page_checked(index, buf);
		state = FbfXLogStart(index);
		page = FbfXLogRegisterBuffer(state, buf, 0);
		fbf_stream_page_reset(stream_page_of(page),
							  Max(now, FbfWindowNow(meta)));
		FbfXLogFinish(state);
		UnlockReleaseBuffer(buf);
	}
}

/*
 * The stream fields of *stats: pages, slots, slots in use, evictions and
 * expiries, and from when (wall clock) a stream without a slot is proven
 * new (0: already).  Share-locks the stream pages one at a time; the
 * caller holds no lock, and `meta` is a copy it read.
 */
void
FbfStreamsGetStats(Relation index, const FbfWindowMetaPageData *meta,
				   FbfWindowStats *stats)
{
	int64		horizon = FbfStreamHorizon(meta);
	int64		latest = FBF_STREAM_ALWAYS;
	int64		now;
	uint32		p;

	stats->stream_pages = meta->stream_pages;
	stats->stream_capacity = (int64) meta->stream_pages * stream_capacity();
	stats->streams = 0;
	stats->stream_evictions = 0;
	stats->stream_expired = 0;
	stats->streams_exact_from = 0;
	for (p = 0; p < meta->stream_pages; p++)
	{
		Buffer		buf = FbfWindowReadPage(index, meta->stream_start + p,
											BUFFER_LOCK_SHARE,
											FBF_PAGE_ID_STREAM);
		const FbfStreamPage *sp = stream_page_checked(index, buf);

		stats->streams += sp->nused;
		stats->stream_evictions += (int64) sp->evictions;
		stats->stream_expired += (int64) sp->expired;
		latest = Max(latest, sp->since);
		UnlockReleaseBuffer(buf);
		CHECK_FOR_INTERRUPTS();
	}
	now = FbfWindowNow(meta);
	if (meta->stream_pages > 0 && latest != FBF_STREAM_ALWAYS &&
		latest > now - horizon)
		stats->streams_exact_from = FbfWindowWallTime(meta, latest + horizon);
}

/* ----------------------------------------------------------------------
 * Redo and description of XLOG_FBF_STREAMS
 * ----------------------------------------------------------------------
 */

/* the header of one block's data, checked against its length */
static const FbfStreamOp *
streams_block_data(XLogReaderState *record, uint8 id, xl_fbf_streams *xl)
{
	Size		len;
	char	   *data = XLogRecGetBlockData(record, id, &len);

	if (data == NULL || len < SizeOfFbfStreams)
		return NULL;
	memcpy(xl, data, SizeOfFbfStreams);
	if (len != SizeOfFbfStreams + sizeof(FbfStreamOp) * (Size) xl->n)
		return NULL;
	return (const FbfStreamOp *) (data + SizeOfFbfStreams);
}

static void
streams_redo(XLogReaderState *record)
{
	Buffer		buffers[FBF_XLOG_MAX_PAGES];
	int			max_block = XLogRecMaxBlockId(record);
	int			id;

	if (max_block >= FBF_XLOG_MAX_PAGES)
		elog(PANIC, "fbf redo: streams of %d pages", max_block + 1);
	for (id = 0; id <= max_block; id++)
	{
		xl_fbf_streams xl;
		const FbfStreamOp *src;
		FbfStreamOp *ops;
		FbfStreamPage *sp;

		if (XLogReadBufferForRedo(record, id, &buffers[id]) != BLK_NEEDS_REDO)
			continue;
		src = streams_block_data(record, id, &xl);
		if (src == NULL)
			elog(PANIC, "fbf redo: malformed streams record");
		sp = stream_page_of(BufferGetPage(buffers[id]));
		if (!fbf_stream_page_valid(sp, stream_capacity()))
			elog(PANIC, "fbf redo: invalid stream page at block %u",
				 BufferGetBlockNumber(buffers[id]));
		/* the record's data need not be aligned */
		ops = palloc(sizeof(FbfStreamOp) * Max(xl.n, 1));
		memcpy(ops, src, sizeof(FbfStreamOp) * xl.n);
		stream_page_record(sp, &xl, ops);
		pfree(ops);
		PageSetLSN(BufferGetPage(buffers[id]), record->EndRecPtr);
		MarkBufferDirty(buffers[id]);
	}
	for (id = 0; id <= max_block; id++)
	{
		if (BufferIsValid(buffers[id]))
			UnlockReleaseBuffer(buffers[id]);
	}
}

static void
streams_desc(StringInfo buf, XLogReaderState *record)
{
	int			id;

	for (id = 0; id <= XLogRecMaxBlockId(record); id++)
	{
		xl_fbf_streams xl;

		if (id > 0)
			appendStringInfoString(buf, "; ");
		if (streams_block_data(record, id, &xl) != NULL)
			appendStringInfo(buf, "blk %d: %u recorded at %lld", id, xl.n,
							 (long long) xl.now);
		else
			appendStringInfo(buf, "blk %d: image", id);
	}
}

/* Register XLOG_FBF_STREAMS; from FbfWindowInit. */
void
FbfStreamXLogInit(void)
{
	FbfXLogRegisterRecord(XLOG_FBF_STREAMS, "STREAMS", streams_redo,
						  streams_desc);
}
