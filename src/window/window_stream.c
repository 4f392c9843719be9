/*-------------------------------------------------------------------------
 *
 * window_stream.c
 *	  A window's stream pages: the exact state of the streams a counter
 *	  has seen (core/fbf_stream.h), one FbfStreamPage per page, in a run
 *	  of meta->stream_pages pages from meta->stream_start.  Making the
 *	  run, checking one operation, recording drained operations (the
 *	  record XLOG_FBF_STREAMS and its redo), forgetting every stream
 *	  (a reset), their statistics, and carrying them in snapshots (read
 *	  into a snapshot's streams, installed from one by a load:
 *	  core/fbf_stream_snap.h).
 *
 * A stream's page is FbfStreamBlock: the high 32 bits of its id reduced
 * over the run, as fbf_part reduces an operation's hash over the
 * partitions, so a lookup reads one page.  Every time here is window time
 * (FbfWindowNow), and a stream page's horizon is FbfStreamHorizon: the
 * retention and a period, or the age of the oldest live filter if more:
 * the longest an operation can be remembered by the filter after it was
 * applied.
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
#include "access/xlogrecord.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "common/fbf_xlog.h"
#include "core/fbf_stream_snap.h"
#include "window/window_int.h"

/*
 * XLOG_FBF_STREAMS: up to FBF_STREAMS_MAX_PAGES stream pages, recorded at
 * one time.  The main data an xl_fbf_streams; each block's data its page's
 * operations, in the order recorded, each logged by
 * fbf_stream_record_logged relative to the page as it was (a live slot by
 * its index and the seq by its distance from the slot's highest, 2 bytes
 * for an in-order stream; another stream by its id, 10 or more).  Redo replays them only
 * on a page that needs it, which is then as the primary had it: a page
 * restored from a full-page image carries no block data.
 */
#define FBF_STREAMS_MAX_PAGES	32

StaticAssertDecl(FBF_STREAMS_MAX_PAGES <= XLR_MAX_BLOCK_ID + 1,
				 "a streams record names too many pages");
/* a drain records its streams holding its chain and its partition pages */
StaticAssertDecl(1 + FBF_MAX_PENDING_PAGES + FBF_DRAIN_MAX_PAGES +
				 FBF_STREAMS_MAX_PAGES + FBF_LWLOCK_SLACK <= FBF_MAX_SIMUL_LWLOCKS,
				 "a drain locks more buffers than a backend may hold");

typedef struct xl_fbf_streams
{
	int64		now;			/* window time of the recording */
	int64		horizon;		/* FbfStreamHorizon then */
} xl_fbf_streams;

#define SizeOfFbfStreams	(offsetof(xl_fbf_streams, horizon) + sizeof(int64))

/* the stream page in a page's contents */
static inline FbfStreamPage *
stream_page_of(Page page)
{
	return (FbfStreamPage *) PageGetContents(page);
}

/*
 * Between the pages of a walk over every stream page: honour a cancel,
 * through FbfWindowCheckCancel when the caller holds the metapage
 * (metabuf), else as any loop does (a no-op while the caller holds other
 * buffer locks: a drain's reset).
 */
static void
stream_page_done(Buffer metabuf)
{
	if (BufferIsValid(metabuf))
		FbfWindowCheckCancel(metabuf);
	else
		CHECK_FOR_INTERRUPTS();
}

/* slots of every stream page: what a window page's contents hold */
static inline uint32
stream_capacity(void)
{
	return fbf_stream_capacity(FBF_PAGE_CONTENT_BYTES);
}

/*
 * How long streams remember an operation at `now`: at least as long as
 * the filter may, so that a stream never answers "new" for a retry the
 * filter would still dismiss.  That is the retention and the period a
 * filter takes operations before it starts aging (a shrunken period never
 * lengthens it past the planned one), or the age of the oldest live
 * filter, when AIMD or a shorter retention left older filters live.
 */
int64
FbfStreamHorizon(const FbfWindowMetaPageData *meta, int64 now)
{
	int64		horizon = meta->retention + Max(meta->period, meta->base_period);

	if (meta->nlive > 0 && now - meta->born_at[meta->nlive - 1] > horizon)
		horizon = now - meta->born_at[meta->nlive - 1];
	return horizon;
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
 * The stream pages `index` wants, now that it has `have`: its reloption
 * max_streams; or, where it is -1, the run it has, and fbf.max_streams
 * only for a window without one (a new window, one written before
 * streams, or one made while the setting was 0).  So the setting sizes
 * runs but never resizes one: a value that differed between sessions
 * would otherwise make each refresh take a new run.
 */
int
FbfStreamsWanted(Relation index, uint32 have)
{
	int			max_streams = FbfWindowGetOptions(index)->max_streams;

	if (max_streams < 0)
	{
		if (have > 0)
			return (int) have;
		max_streams = fbf_max_streams;
	}
	return (int) FbfStreamPagesFor(max_streams);
}

/*
 * Append a run of npages empty stream pages that know every operation of
 * their streams since `since` (FBF_STREAM_ALWAYS for a new window, else
 * now) to `fork`, at *next, which is advanced; returns the first.  The
 * caller holds the metapage exclusively (metabuf), or is building the
 * index (InvalidBuffer), and for the main fork holds the relation's
 * extension lock so that the run is contiguous.  The metapage names the
 * run afterwards, so a cancel between pages (FbfWindowCheckCancel: a run
 * may be tens of thousands of pages) leaves pages no one names.
 */
BlockNumber
FbfStreamsCreate(Relation index, Buffer metabuf, ForkNumber fork,
				 BlockNumber *next, uint32 npages, int64 since)
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
		stream_page_done(metabuf);
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
							  now, FbfStreamHorizon(meta, now));
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

/*
 * Record in their stream pages the n operations `ops`, committed and
 * drained at `now` (window time): their pages, at most
 * FBF_STREAMS_MAX_PAGES at a time, locked exclusive in block order, changed
 * and logged in one XLOG_FBF_STREAMS record, then released.  Recording is
 * idempotent, so an operation recorded again (a drain redone after a
 * crash) changes nothing.  The caller holds the metapage (share), the
 * operations' chain and the `held_pages` partition pages its drain stores
 * them in (FbfStoreDecided): the pages locked at a time are that many
 * fewer, so that a drain pins no more buffers than it did when it recorded
 * with no partition page held (at 1 MB of shared buffers, a drain of an
 * 88-page chain beside 8 partition pages and 32 stream pages found no
 * unpinned buffer).
 */
void
FbfStreamsRecord(Relation index, const FbfWindowMetaPageData *meta,
				 const FbfStreamOp *ops, int n, int64 now, int held_pages)
{
	int			max_pages = Max(FBF_STREAMS_MAX_PAGES - held_pages, 1);
	StreamOpAt *at;
	FbfStreamOp *sorted;
	xl_fbf_streams xl;
	Buffer		bufs[FBF_STREAMS_MAX_PAGES];
	int			first[FBF_STREAMS_MAX_PAGES];
	int			count[FBF_STREAMS_MAX_PAGES];
	unsigned char *log;
	Size		loglen[FBF_STREAMS_MAX_PAGES];
	int			i;

	if (meta->stream_pages == 0 || n <= 0)
		return;
	xl.now = now;
	xl.horizon = FbfStreamHorizon(meta, now);
	at = palloc(sizeof(StreamOpAt) * n);
	sorted = palloc(sizeof(FbfStreamOp) * n);
	/* the log of every operation, made in the critical section */
	log = palloc((Size) n * FBF_STREAM_LOG_MAX);
	for (i = 0; i < n; i++)
	{
		at[i].blkno = FbfStreamBlock(meta, ops[i].stream);
		at[i].order = i;
	}
	qsort(at, n, sizeof(StreamOpAt), stream_op_cmp);
	for (i = 0; i < n; i++)
		sorted[i] = ops[at[i].order];
	/* room for a record of more pages than XLogInsert's usual */
	if (RelationNeedsWAL(index))
		XLogEnsureRecordSpace(FBF_STREAMS_MAX_PAGES - 1,
							  FBF_STREAMS_MAX_PAGES + 1);

	i = 0;
	while (i < n)
	{
		int			npages = 0;
		int			b;

		/* the next pages, up to a record's worth, locked in block order */
		while (i < n && npages < max_pages)
		{
			first[npages] = i;
			count[npages] = 0;
			while (i < n && at[i].blkno == at[first[npages]].blkno)
			{
				count[npages]++;
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
			FbfStreamPage *sp = stream_page_of(BufferGetPage(bufs[b]));
			unsigned char *out = log + (Size) first[b] * FBF_STREAM_LOG_MAX;
			int			k;

			loglen[b] = 0;
			for (k = first[b]; k < first[b] + count[b]; k++)
				loglen[b] += fbf_stream_record_logged(sp, sorted[k].stream,
													  sorted[k].seq, xl.now,
													  xl.horizon,
													  out + loglen[b]);
			MarkBufferDirty(bufs[b]);
		}
		if (RelationNeedsWAL(index))
		{
			XLogRecPtr	lsn;

			XLogBeginInsert();
			XLogRegisterData((char *) &xl, SizeOfFbfStreams);
			for (b = 0; b < npages; b++)
			{
				XLogRegisterBuffer(b, bufs[b], REGBUF_STANDARD);
				XLogRegisterBufData(b, (char *) log +
									(Size) first[b] * FBF_STREAM_LOG_MAX,
									loglen[b]);
			}
			lsn = XLogInsert(FBF_RMGR_ID, XLOG_FBF_STREAMS);
			for (b = 0; b < npages; b++)
				PageSetLSN(BufferGetPage(bufs[b]), lsn);
		}
		END_CRIT_SECTION();
		for (b = 0; b < npages; b++)
			UnlockReleaseBuffer(bufs[b]);
	}
	pfree(log);
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
 * know everything since a time before that record.  Under the metapage's
 * exclusive lock (metabuf; else InvalidBuffer) a cancel is honoured
 * between pages: each page is reset whole, and the streams of the pages
 * not reached only know more than those reached, what they knew before.
 */
void
FbfStreamsReset(Relation index, Buffer metabuf,
				const FbfWindowMetaPageData *meta, int64 now)
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
		stream_page_done(metabuf);
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
	int64		now = FbfWindowNow(meta);
	int64		horizon = FbfStreamHorizon(meta, now);
	int64		latest = FBF_STREAM_ALWAYS;
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
	if (meta->stream_pages > 0 && latest != FBF_STREAM_ALWAYS &&
		latest > now - horizon)
		stats->streams_exact_from = FbfWindowWallTime(meta, latest + horizon);
}

/* ----------------------------------------------------------------------
 * Streams in snapshots (core/fbf_stream_snap.h)
 * ----------------------------------------------------------------------
 */

/* t (window time) on the wall clock, `shift` apart; "always" as itself */
static inline int64
shifted(int64 t, int64 shift)
{
	return t == FBF_STREAM_ALWAYS ? t : t + shift;
}

/*
 * The streams of a snapshot of the window `meta` describes: a copy of
 * every stream page, with the n operations `annexes` (committed, still on
 * their chains when the snapshot read them, so in its filters but not yet
 * in their stream pages) recorded into the copies, on the wall clock, as
 * a section (palloc'd, *len bytes).  The caller has read every chain of
 * the snapshot before (see FbfWindowSnapshot), and holds the metapage
 * share (metabuf) or nothing; the pages are share-locked one at a time.
 */
unsigned char *
FbfStreamsSnapshot(Relation index, Buffer metabuf,
				   const FbfWindowMetaPageData *meta,
				   const FbfStreamOp *annexes, int n, size_t *len)
{
	uint32		nslots = stream_capacity();
	Size		bytes = sizeof(FbfStreamPage) + (Size) nslots * sizeof(FbfStreamSlot);
	int64		now = FbfWindowNow(meta);
	int64		horizon = FbfStreamHorizon(meta, now);
	int64		shift = FbfWindowWallTime(meta, now) - now;
	FbfStreamPage **pages;
	unsigned char *out;
	uint32		p;
	int			i;

	Assert(meta->stream_pages > 0);
	pages = palloc(sizeof(FbfStreamPage *) * meta->stream_pages);
	for (p = 0; p < meta->stream_pages; p++)
	{
		Buffer		buf = FbfWindowReadPage(index, meta->stream_start + p,
											BUFFER_LOCK_SHARE,
											FBF_PAGE_ID_STREAM);

		pages[p] = palloc(bytes);
		memcpy(pages[p], stream_page_checked(index, buf), bytes);
		UnlockReleaseBuffer(buf);
		stream_page_done(metabuf);
	}
	for (i = 0; i < n; i++)
		fbf_stream_record(pages[FbfStreamBlock(meta, annexes[i].stream) -
								meta->stream_start],
						  annexes[i].stream, annexes[i].seq, now, horizon);
	for (p = 0; p < meta->stream_pages; p++)
	{
		FbfStreamPage *sp = pages[p];
		uint32		k;

		sp->since = shifted(sp->since, shift);
		sp->evicted_until = shifted(sp->evicted_until, shift);
		for (k = 0; k < sp->nslots; k++)
		{
			sp->slots[k].seen = shifted(sp->slots[k].seen, shift);
			sp->slots[k].born = shifted(sp->slots[k].born, shift);
		}
	}
	*len = fbf_streams_encoded_size((const FbfStreamPage *const *) pages,
									meta->stream_pages, now + shift, horizon);
	out = palloc(*len);
	fbf_streams_encode((const FbfStreamPage *const *) pages, meta->stream_pages,
					   now + shift, horizon, out);
	for (p = 0; p < meta->stream_pages; p++)
		pfree(pages[p]);
	pfree(pages);
	return out;
}

/*
 * Put a snapshot's streams (a section validated with its contents) into
 * the stream pages: adopted (`adopt`: the window remembers only what the
 * snapshot brought, and its pages become the section's) or merged with
 * what they know (the rule is core/fbf_stream_snap.c's), re-placed by id
 * if the runs differ in size, each page one logged change.  The section's
 * times are the wall clock, `shift` from window time; `now` is window
 * time.  For a load, under the metapage's exclusive lock (metabuf), after
 * which operations see the window the load made: an adoption installs
 * after switching to the adopted pages (the streams were reset before
 * it), a merge before ORing the snapshot in, so that the streams never
 * know less than the window remembers.  A cancel is honoured between
 * pages: each page is whole, the section's or as it was, both sound.
 */
void
FbfStreamsInstall(Relation index, Buffer metabuf,
				  const FbfWindowMetaPageData *meta,
				  const unsigned char *streams, bool adopt, int64 shift,
				  int64 now)
{
	FbfStreamsTimeMap map;
	int64		horizon;
	uint32	   *first;
	uint32		p;

	if (meta->stream_pages == 0)
		return;
	now = Max(now, FbfWindowNow(meta));
	horizon = FbfStreamHorizon(meta, now);
	map.shift = shift;
	map.slack = FBF_LOAD_CLOCK_SLACK;
	map.now = now;
	first = palloc(sizeof(uint32) * ((Size) fbf_streams_npages(streams) + 1));
	fbf_streams_index(streams, first);
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
		fbf_streams_into_page(stream_page_of(page), streams, first, p,
							  meta->stream_pages, adopt, &map, now, horizon);
		FbfXLogFinish(state);
		UnlockReleaseBuffer(buf);
		stream_page_done(metabuf);
	}
	pfree(first);
}

/* ----------------------------------------------------------------------
 * Redo and description of XLOG_FBF_STREAMS
 * ----------------------------------------------------------------------
 */

/* the record's main data */
static void
streams_main_data(XLogReaderState *record, xl_fbf_streams *xl)
{
	if (XLogRecGetDataLen(record) != SizeOfFbfStreams)
		elog(PANIC, "fbf redo: streams record of %u bytes",
			 (unsigned) XLogRecGetDataLen(record));
	memcpy(xl, XLogRecGetData(record), SizeOfFbfStreams);
}

/*
 * Replay a page's operations on it (block `id` of the record, whose main
 * data is `arg`), as the primary recorded them (fbf_stream_replay).  A
 * log that does not fit the page it replays on is a PANIC, as a malformed
 * record is.
 */
static void
streams_redo_page(XLogReaderState *record, int id, Buffer buffer, void *arg)
{
	const xl_fbf_streams *xl = arg;
	FbfStreamPage *sp;
	Size		len;
	Size		off = 0;
	const unsigned char *data;

	data = (const unsigned char *) XLogRecGetBlockData(record, id, &len);
	if (data == NULL || len == 0)
		elog(PANIC, "fbf redo: malformed streams record");
	sp = stream_page_of(BufferGetPage(buffer));
	if (!fbf_stream_page_valid(sp, stream_capacity()))
		elog(PANIC, "fbf redo: invalid stream page at block %u",
			 BufferGetBlockNumber(buffer));
	while (off < len)
	{
		size_t		used = fbf_stream_replay(sp, data + off, len - off,
											 xl->now, xl->horizon);

		if (used == 0)
			elog(PANIC, "fbf redo: streams record does not fit block %u at byte %zu",
				 BufferGetBlockNumber(buffer), off);
		off += used;
	}
}

/* Replay each page's operations on it, unless it was restored whole. */
static void
streams_redo(XLogReaderState *record)
{
	int			max_block = XLogRecMaxBlockId(record);
	xl_fbf_streams xl;

	if (max_block >= FBF_STREAMS_MAX_PAGES)
		elog(PANIC, "fbf redo: streams of %d pages", max_block + 1);
	streams_main_data(record, &xl);
	FbfXLogRedoPages(record, max_block, streams_redo_page, &xl);
}

/* The time, and per page how many operations, how many by a live slot. */
static void
streams_desc(StringInfo buf, XLogReaderState *record)
{
	int			id;

	if (XLogRecGetDataLen(record) == SizeOfFbfStreams)
	{
		xl_fbf_streams xl;

		memcpy(&xl, XLogRecGetData(record), SizeOfFbfStreams);
		appendStringInfo(buf, "at %lld, horizon %lld", (long long) xl.now,
						 (long long) xl.horizon);
	}
	for (id = 0; id <= XLogRecMaxBlockId(record); id++)
	{
		Size		len;
		const unsigned char *data =
			(const unsigned char *) XLogRecGetBlockData(record, id, &len);
		Size		off = 0;
		int			nops = 0;
		int			by_slot = 0;

		if (data == NULL)
		{
			appendStringInfo(buf, "; blk %d: image", id);
			continue;
		}
		while (off < len)
		{
			FbfStreamLogOp op;
			size_t		used = fbf_stream_log_decode(data + off, len - off, &op);

			if (used == 0)
				break;
			by_slot += op.slot >= 0;
			nops++;
			off += used;
		}
		appendStringInfo(buf, "; blk %d: %d recorded, %d by slot%s", id, nops,
						 by_slot, off < len ? " (malformed)" : "");
	}
}

/* Register XLOG_FBF_STREAMS; from FbfWindowInit. */
void
FbfStreamXLogInit(void)
{
	FbfXLogRegisterRecord(XLOG_FBF_STREAMS, "STREAMS", streams_redo,
						  streams_desc);
}
