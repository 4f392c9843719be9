/*-------------------------------------------------------------------------
 *
 * window_xlog.c
 *	  The window's compact WAL records: an operation recorded in flight,
 *	  and a drain of a pending page into partition pages.  Each change is
 *	  one function used both to make it and to replay it, so the primary
 *	  and its standbys run the same code.
 *
 * Records (fbf's resource manager, common/fbf_xlog.h):
 *
 *	XLOG_FBF_PENDING_OPS	block 0: the pending page; its data a run of
 *							one call's operations (one, for a single
 *							increment) of the record's own (sub)transaction:
 *							each its hash, a flags byte (the first's says
 *							whether it lowers the chain's floor), and its
 *							annex's stream (left out when the previous
 *							annex's) and seq (relative to the previous in
 *							that stream).  The xid is the record header's
 *	XLOG_FBF_PENDING_ADDS	the same, headed by an xl_fbf_pending_adds
 *							naming the (sub)transaction: for entries whose
 *							xid is not the one XLogInsert writes
 *	XLOG_FBF_DRAIN			block 0: a pending page; its data its entry
 *							count and a bitmap of the entries kept (an
 *							annex is kept exactly when the entry before it
 *							is).  Blocks 1 to FBF_DRAIN_MAX_PAGES:
 *							partition pages; the data of each an
 *							xl_fbf_slice_set: the lanes of future and
 *							present with their stamps, and the hashes of
 *							the operations to set in them
 *	XLOG_FBF_PENDING_ADD,	what 1.4 wrote for one operation and for a
 *	XLOG_FBF_DRAIN_V1		drain (a byte per entry): replayed, no longer
 *							written, so that a server or standby running
 *							this build replays WAL an older one wrote
 *
 * Block data is left out of a record when the block gets a full-page
 * image.  A single increment's PENDING_OPS is 17 bytes of data, and its
 * annex 9 to 18 more (a stream's id and a seq of up to 63 in magnitude:
 * 9), under the record's 24 bytes of header and 20 of block reference;
 * in a batch, an annex of the previous operation's stream costs 1 to 3.
 * A drain costs 16 bytes an operation and a bit an entry, and takes all
 * of a chain's partition pages in one record until its window splits
 * (FBF_DRAIN_MAX_PAGES, the 8 of a new window's chain).  Redo locks a
 * record's pages in order and releases them at the end, as the primary
 * held them (FbfXLogRedoPages, common/fbf_xlog.c).
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
#include "window/window_xlog.h"

/* ----------------------------------------------------------------------
 * The changes
 * ----------------------------------------------------------------------
 */

/*
 * Append n entries to a pending page (operations' entries, each followed by
 * its annex if it has one); set the chain's floor, if asked, to the first
 * one's (sub)transaction.
 */
void
FbfPendingPageAppend(Page page, const FbfPendingEntry *entries, int n,
					 bool set_floor)
{
	int			had;
	FbfPendingEntry *to = FbfWindowPageGetEntries(page, &had);

	if (n < 1 || had + n > FBF_PENDING_CAPACITY)
		elog(PANIC, "fbf: pending page overflow");
	memcpy(&to[had], entries, sizeof(FbfPendingEntry) * n);
	FbfWindowPageSetEntryCount(page, had + n);
	if (set_floor)
		FbfWindowPageGetOpaque(page)->stamp = (int64)
			U64FromFullTransactionId(FullTransactionIdFromEpochAndXid(entries[0].epoch,
																	  entries[0].xid));
}

/*
 * Append an entry to a pending page, and its annex (NULL: none) right
 * after it; set the chain's floor if asked.
 */
void
FbfPendingPageAdd(Page page, const FbfPendingEntry *entry,
				  const FbfPendingEntry *annex, bool set_floor)
{
	FbfPendingEntry two[2];

	two[0] = *entry;
	if (annex != NULL)
		two[1] = *annex;
	FbfPendingPageAppend(page, two, annex != NULL ? 2 : 1, set_floor);
}

/*
 * Give each annex among `entries` the keep byte of the entry before it: a
 * drain keeps an annex exactly when it keeps its operation's entry
 * (FbfPendingPageCompact follows the same rule whatever the byte says; the
 * bytes are made to say it too, so that what the drain counts and the
 * record shows is what happens).
 */
void
FbfPendingKeepAnnexes(const FbfPendingEntry *entries, int n, uint8 *keep)
{
	int			i;

	for (i = 1; i < n; i++)
	{
		if (FbfEntryIsAnnex(&entries[i]))
			keep[i] = keep[i - 1];
	}
}

/*
 * Keep the entries of a pending page whose byte in `keep` is nonzero; an
 * annex goes with the entry before it (FbfPendingKeepAnnexes).
 */
void
FbfPendingPageCompact(Page page, const uint8 *keep, int nkeep_bytes)
{
	int			n;
	FbfPendingEntry *entries = FbfWindowPageGetEntries(page, &n);
	int			kept = 0;
	bool		prev = false;
	int			i;

	if (nkeep_bytes != n)
		elog(PANIC, "fbf: drain of %d entries on a page of %d", nkeep_bytes, n);
	for (i = 0; i < n; i++)
	{
		bool		keep_it = keep[i] != 0;

		if (i > 0 && FbfEntryIsAnnex(&entries[i]))
			keep_it = prev;
		if (keep_it)
			entries[kept++] = entries[i];
		prev = keep_it;
	}
	FbfWindowPageSetEntryCount(page, kept);
}

/*
 * Set operations in the future's and present's lanes of a partition page,
 * first clearing whichever of the two is stale (lazy clearing).
 */
void
FbfSlicePageSet(Page page, const xl_fbf_slice_set *set, const FbfHash *hashes)
{
	FbfSliceHeader *h = FbfSlicePageGetHeader(page);
	void	   *words = FbfSlicePageGetWords(page);
	uint32		nbits = (uint32) ((((PageHeader) page)->pd_lower -
								   ((char *) words - (char *) page)) / FBF_SLICE_WIDTH);
	uint64		lanes = 0;
	int			j;
	int			i;

	for (j = 0; j < 2; j++)
	{
		uint8		lane = set->lanes[j];

		if (lane >= FBF_SLICE_LANES)
			elog(PANIC, "fbf: lane %u out of range", lane);
		if (h->stamp[lane] != set->stamps[j])
		{
			bloom_slice_clear(words, FBF_SLICE_WIDTH, nbits, UINT64CONST(1) << lane);
			h->stamp[lane] = set->stamps[j];
			h->count[lane] = 0;
			h->dup[lane] = 0;
		}
		lanes |= UINT64CONST(1) << lane;
	}
	for (i = 0; i < set->n; i++)
	{
		uint32		probes[FBF_MAX_HASHES];

		fbf_probes(&hashes[i], set->nhashes, nbits, probes);
		bloom_slice_set(words, FBF_SLICE_WIDTH, probes, set->nhashes, lanes);
	}
	for (j = 0; j < 2; j++)
		h->count[set->lanes[j]] += set->n;
}

/* ----------------------------------------------------------------------
 * Logging them
 * ----------------------------------------------------------------------
 */

/*
 * Append `entry` to the exclusively locked pending page `buf`, and its
 * annex (NULL: none) right after it, in one record (FbfPendingLogAdds).
 * The caller has made sure the page has room for both.
 */
void
FbfPendingLogAdd(Relation index, Buffer buf, const FbfPendingEntry *entry,
				 const FbfPendingEntry *annex, bool set_floor)
{
	FbfPendingEntry two[2];

	two[0] = *entry;
	if (annex != NULL)
	{
		Assert(FbfEntryIsAnnex(annex));
		two[1] = *annex;
	}
	FbfPendingLogAdds(index, buf, two, annex != NULL ? 2 : 1, set_floor);
}

/*
 * Encode n entries of one (sub)transaction (operations' entries, each
 * followed by its annex if it has one) as a PENDING_ADDS's operations,
 * the first one's flags with `first_flags` too, into `out` (room for
 * FBF_PENDING_OP_MAX a operation); their length.
 */
static Size
pending_adds_encode(const FbfPendingEntry *entries, int n, uint8 first_flags,
					unsigned char *out)
{
	unsigned char *p = out;
	bool		have_stream = false;
	uint64		stream = 0;
	int64		seq = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		const FbfPendingEntry *annex =
			i + 1 < n && FbfEntryIsAnnex(&entries[i + 1]) ? &entries[i + 1] : NULL;
		uint8		flags = i == 0 ? first_flags : 0;
		unsigned char *flagp;

		Assert(!FbfEntryIsAnnex(&entries[i]));
		fbf_le64_write(p, entries[i].h1);
		fbf_le64_write(p + 8, entries[i].h2);
		flagp = p + 16;
		p += 17;
		if (annex != NULL)
		{
			flags |= FBF_PENDING_OP_ANNEX;
			if (have_stream && annex->h1 == stream)
			{
				flags |= FBF_PENDING_OP_SAME_STREAM;
				p += fbf_varint_write(p, fbf_zigzag((int64) (annex->h2 -
																  (uint64) seq)));
			}
			else
			{
				fbf_le64_write(p, annex->h1);
				p += 8;
				p += fbf_varint_write(p, fbf_zigzag((int64) annex->h2));
			}
			have_stream = true;
			stream = annex->h1;
			seq = (int64) annex->h2;
			i++;
		}
		*flagp = flags;
	}
	return p - out;
}

/*
 * Decode the operations from p to end, of (sub)transaction fxid, into
 * entries[] (room for FBF_PENDING_CAPACITY); their number, or -1 if
 * malformed.  *floor: whether the first operation's flags say
 * FBF_PENDING_OP_FLOOR (NULL: they may not).
 */
static int
pending_ops_decode(const unsigned char *p, const unsigned char *end,
				   FullTransactionId fxid, FbfPendingEntry *entries,
				   bool *floor)
{
	bool		have_stream = false;
	uint64		stream = 0;
	int64		seq = 0;
	int			n = 0;

	if (floor != NULL)
		*floor = false;
	while (p < end)
	{
		uint8		flags;
		uint8		allowed = FBF_PENDING_OP_ANNEX | FBF_PENDING_OP_SAME_STREAM;

		if (end - p < 17 || n + 1 > FBF_PENDING_CAPACITY)
			return -1;
		entries[n].xid = XidFromFullTransactionId(fxid);
		entries[n].epoch = EpochFromFullTransactionId(fxid);
		entries[n].h1 = fbf_le64_read(p);
		entries[n].h2 = fbf_le64_read(p + 8);
		flags = p[16];
		p += 17;
		if (n == 0 && floor != NULL)
		{
			allowed |= FBF_PENDING_OP_FLOOR;
			*floor = (flags & FBF_PENDING_OP_FLOOR) != 0;
		}
		n++;
		if ((flags & ~allowed) != 0 ||
			(flags & FBF_PENDING_OP_SAME_STREAM && !(flags & FBF_PENDING_OP_ANNEX)) ||
			(flags & FBF_PENDING_OP_SAME_STREAM && !have_stream))
			return -1;
		if (flags & FBF_PENDING_OP_ANNEX)
		{
			uint64		z;
			size_t		used;

			if (n + 1 > FBF_PENDING_CAPACITY)
				return -1;
			if (!(flags & FBF_PENDING_OP_SAME_STREAM))
			{
				if (end - p < 8)
					return -1;
				stream = fbf_le64_read(p);
				p += 8;
			}
			used = fbf_varint_read(p, end - p, &z);
			if (used == 0)
				return -1;
			p += used;
			seq = (flags & FBF_PENDING_OP_SAME_STREAM) ?
				(int64) ((uint64) seq + (uint64) fbf_unzigzag(z)) :
				fbf_unzigzag(z);
			have_stream = true;
			entries[n++] = FbfPendingAnnex(stream, seq);
		}
	}
	return n > 0 ? n : -1;
}

/*
 * Decode a PENDING_ADDS's block data into entries[] (room for
 * FBF_PENDING_CAPACITY); their number, or -1 if malformed.
 */
static int
pending_adds_decode(const char *data, Size len, xl_fbf_pending_adds *xl,
					FbfPendingEntry *entries)
{
	int			n;
	int			ops = 0;

	if (data == NULL || len < SizeOfFbfPendingAdds)
		return -1;
	memcpy(xl, data, SizeOfFbfPendingAdds);
	if ((xl->flags & ~FBF_PENDING_ADD_FLOOR) != 0 || xl->n < 1 ||
		!TransactionIdIsNormal(xl->xid))
		return -1;
	n = pending_ops_decode((const unsigned char *) data + SizeOfFbfPendingAdds,
						   (const unsigned char *) data + len,
						   FullTransactionIdFromEpochAndXid(xl->epoch, xl->xid),
						   entries, NULL);
	for (int i = 0; i < n; i++)
		ops += !FbfEntryIsAnnex(&entries[i]);
	return ops == xl->n ? n : -1;
}

/*
 * Append n entries of the current (sub)transaction to the exclusively
 * locked pending page `buf` (operations' entries, each followed by its
 * annex if it has one: a run of one call's operations), in one record:
 * PENDING_OPS, whose xid is the record header's, or PENDING_ADDS should
 * the entries' xid not be the one XLogInsert puts there.  The caller has
 * made sure the page has room.
 */
void
FbfPendingLogAdds(Relation index, Buffer buf, const FbfPendingEntry *entries,
				  int n, bool set_floor)
{
	xl_fbf_pending_adds xl;
	bool		own;
	unsigned char *ops = NULL;
	Size		len = 0;

	xl.xid = entries[0].xid;
	xl.epoch = entries[0].epoch;
	xl.n = 0;
	for (int i = 0; i < n; i++)
	{
		Assert(FbfEntryIsAnnex(&entries[i]) ||
			   (entries[i].xid == xl.xid && entries[i].epoch == xl.epoch));
		xl.n += !FbfEntryIsAnnex(&entries[i]);
	}
	xl.flags = set_floor ? FBF_PENDING_ADD_FLOOR : 0;
	own = FullTransactionIdEquals(FullTransactionIdFromEpochAndXid(xl.epoch, xl.xid),
								  GetCurrentFullTransactionIdIfAny());
	if (RelationNeedsWAL(index))
	{
		ops = palloc(FBF_PENDING_OP_MAX * xl.n);
		len = pending_adds_encode(entries, n,
								  own && set_floor ? FBF_PENDING_OP_FLOOR : 0,
								  ops);
	}

	START_CRIT_SECTION();
	FbfPendingPageAppend(BufferGetPage(buf), entries, n, set_floor);
	MarkBufferDirty(buf);
	if (RelationNeedsWAL(index))
	{
		XLogRecPtr	lsn;

		XLogBeginInsert();
		XLogRegisterBuffer(0, buf, REGBUF_STANDARD);
		if (!own)
			XLogRegisterBufData(0, (char *) &xl, SizeOfFbfPendingAdds);
		XLogRegisterBufData(0, (char *) ops, len);
		lsn = XLogInsert(FBF_RMGR_ID,
						 own ? XLOG_FBF_PENDING_OPS : XLOG_FBF_PENDING_ADDS);
		PageSetLSN(BufferGetPage(buf), lsn);
	}
	END_CRIT_SECTION();
	if (ops != NULL)
		pfree(ops);
}

/*
 * Drain the exclusively locked pending page `pbuf`: keep the entries whose
 * byte in keep[] is nonzero (each annex's byte is first made its entry's:
 * FbfPendingKeepAnnexes), and set, in each exclusively locked partition
 * page sbufs[b], the operations sets[b] (hashes[b]); one record.
 */
void
FbfDrainLog(Relation index, Buffer pbuf, uint8 *keep, int nentries,
			int nslices, const Buffer *sbufs, const xl_fbf_slice_set *sets,
			FbfHash *const *hashes)
{
	int			b;
	int			n;
	const FbfPendingEntry *entries =
		FbfWindowPageGetEntries(BufferGetPage(pbuf), &n);
	uint8	   *kept = NULL;

	Assert(nslices <= FBF_DRAIN_MAX_PAGES);
	FbfPendingKeepAnnexes(entries, Min(n, nentries), keep);
	if (RelationNeedsWAL(index))
	{
		kept = palloc0(FBF_KEPT_BYTES(nentries));
		for (b = 0; b < nentries; b++)
		{
			if (keep[b])
				kept[b / 8] |= 1 << (b % 8);
		}
		/* each page's set and hashes, the pending page's count and bits */
		XLogEnsureRecordSpace(nslices, 2 * (nslices + 1));
	}
	START_CRIT_SECTION();
	FbfPendingPageCompact(BufferGetPage(pbuf), keep, nentries);
	MarkBufferDirty(pbuf);
	for (b = 0; b < nslices; b++)
	{
		FbfSlicePageSet(BufferGetPage(sbufs[b]), &sets[b], hashes[b]);
		MarkBufferDirty(sbufs[b]);
	}
	if (RelationNeedsWAL(index))
	{
		XLogRecPtr	lsn;
		uint16		n16 = (uint16) nentries;

		XLogBeginInsert();
		XLogRegisterBuffer(0, pbuf, REGBUF_STANDARD);
		XLogRegisterBufData(0, (char *) &n16, sizeof(n16));
		XLogRegisterBufData(0, (char *) kept, FBF_KEPT_BYTES(nentries));
		for (b = 0; b < nslices; b++)
		{
			XLogRegisterBuffer(b + 1, sbufs[b], REGBUF_STANDARD);
			XLogRegisterBufData(b + 1, (char *) &sets[b], SizeOfFbfSliceSet);
			XLogRegisterBufData(b + 1, (char *) hashes[b],
								sizeof(FbfHash) * sets[b].n);
		}
		lsn = XLogInsert(FBF_RMGR_ID, XLOG_FBF_DRAIN);
		PageSetLSN(BufferGetPage(pbuf), lsn);
		for (b = 0; b < nslices; b++)
			PageSetLSN(BufferGetPage(sbufs[b]), lsn);
	}
	END_CRIT_SECTION();
	if (kept != NULL)
		pfree(kept);
}

/* ----------------------------------------------------------------------
 * Redo and descriptions
 * ----------------------------------------------------------------------
 */

/*
 * Block 0's data of a PENDING_ADD: the entry and flags in *xl, and the
 * annex (if the flags say one follows) in *annex; false if malformed.
 */
static bool
pending_add_data(const char *data, Size len, xl_fbf_pending_add *xl,
				 FbfPendingEntry *annex)
{
	uint64		zseq = 0;

	if (data == NULL || len < SizeOfFbfPendingAdd)
		return false;
	memcpy(xl, data, SizeOfFbfPendingAdd);
	if ((xl->flags & ~(FBF_PENDING_ADD_FLOOR | FBF_PENDING_ADD_ANNEX)) != 0)
		return false;
	if ((xl->flags & FBF_PENDING_ADD_ANNEX) == 0)
		return len == SizeOfFbfPendingAdd;
	data += SizeOfFbfPendingAdd;
	len -= SizeOfFbfPendingAdd;
	if (len <= 8 ||
		fbf_varint_read((const unsigned char *) data + 8, len - 8, &zseq) != len - 8)
		return false;
	*annex = FbfPendingAnnex(fbf_le64_read((const unsigned char *) data),
							 fbf_unzigzag(zseq));
	return true;
}

static void
pending_add_redo(XLogReaderState *record)
{
	Buffer		buf;

	if (XLogReadBufferForRedo(record, 0, &buf) == BLK_NEEDS_REDO)
	{
		Size		len;
		xl_fbf_pending_add xl;
		FbfPendingEntry annex;
		char	   *data = XLogRecGetBlockData(record, 0, &len);

		if (!pending_add_data(data, len, &xl, &annex))
			elog(PANIC, "fbf redo: malformed pending entry of %zu bytes", len);
		FbfPendingPageAdd(BufferGetPage(buf), &xl.entry,
						  (xl.flags & FBF_PENDING_ADD_ANNEX) ? &annex : NULL,
						  (xl.flags & FBF_PENDING_ADD_FLOOR) != 0);
		PageSetLSN(BufferGetPage(buf), record->EndRecPtr);
		MarkBufferDirty(buf);
	}
	if (BufferIsValid(buf))
		UnlockReleaseBuffer(buf);
}

static void
pending_adds_redo(XLogReaderState *record)
{
	Buffer		buf;

	if (XLogReadBufferForRedo(record, 0, &buf) == BLK_NEEDS_REDO)
	{
		Size		len;
		xl_fbf_pending_adds xl;
		FbfPendingEntry entries[FBF_PENDING_CAPACITY];
		char	   *data = XLogRecGetBlockData(record, 0, &len);
		int			n = pending_adds_decode(data, len, &xl, entries);

		if (n < 0)
			elog(PANIC, "fbf redo: malformed pending entries of %zu bytes", len);
		FbfPendingPageAppend(BufferGetPage(buf), entries, n,
							 (xl.flags & FBF_PENDING_ADD_FLOOR) != 0);
		PageSetLSN(BufferGetPage(buf), record->EndRecPtr);
		MarkBufferDirty(buf);
	}
	if (BufferIsValid(buf))
		UnlockReleaseBuffer(buf);
}

/*
 * A drain's change to its block `id`: the pending page (0), whose data
 * says the entries kept as a bitmap (DRAIN) or a byte each (1.4's
 * DRAIN_V1: *arg is true), or a partition page.
 */
static void
drain_redo_page(XLogReaderState *record, int id, Buffer buffer, void *arg)
{
	bool		bytes = *(bool *) arg;
	Size		len;
	char	   *data = XLogRecGetBlockData(record, id, &len);

	if (id == 0)
	{
		uint16		n;
		uint8	   *keep;

		if (len < sizeof(n))
			elog(PANIC, "fbf redo: truncated drain");
		memcpy(&n, data, sizeof(n));
		if (len != sizeof(n) + (bytes ? n : FBF_KEPT_BYTES(n)))
			elog(PANIC, "fbf redo: drain of %u entries in %zu bytes", n, len);
		data += sizeof(n);
		keep = palloc(Max(n, 1));
		for (int i = 0; i < n; i++)
			keep[i] = bytes ? data[i] != 0 : (((const uint8 *) data)[i / 8] >> (i % 8)) & 1;
		FbfPendingPageCompact(BufferGetPage(buffer), keep, n);
		pfree(keep);
	}
	else
	{
		xl_fbf_slice_set set;
		FbfHash    *hashes;

		if (len < SizeOfFbfSliceSet)
			elog(PANIC, "fbf redo: truncated drain");
		memcpy(&set, data, SizeOfFbfSliceSet);
		if (len != SizeOfFbfSliceSet + sizeof(FbfHash) * set.n ||
			set.nhashes < 1 || set.nhashes > FBF_MAX_HASHES)
			elog(PANIC, "fbf redo: malformed drain");
		hashes = palloc(sizeof(FbfHash) * Max(set.n, 1));
		memcpy(hashes, data + SizeOfFbfSliceSet, sizeof(FbfHash) * set.n);
		FbfSlicePageSet(BufferGetPage(buffer), &set, hashes);
		pfree(hashes);
	}
}

static void
drain_redo(XLogReaderState *record)
{
	int			max_block = XLogRecMaxBlockId(record);
	bool		bytes = (XLogRecGetInfo(record) & XLR_RMGR_INFO_MASK) == XLOG_FBF_DRAIN_V1;

	if (max_block > (bytes ? FBF_XLOG_MAX_PAGES - 1 : FBF_DRAIN_MAX_PAGES))
		elog(PANIC, "fbf redo: drain into %d pages", max_block);
	FbfXLogRedoPages(record, max_block, drain_redo_page, &bytes);
}

/*
 * PENDING_OPS: the operations' (sub)transaction is the record's, in the
 * epoch that xid has below the next one (advanced past it before redo).
 */
static void
pending_ops_redo(XLogReaderState *record)
{
	Buffer		buf;

	if (XLogReadBufferForRedo(record, 0, &buf) == BLK_NEEDS_REDO)
	{
		Size		len;
		TransactionId xid = XLogRecGetXid(record);
		FbfPendingEntry entries[FBF_PENDING_CAPACITY];
		char	   *data = XLogRecGetBlockData(record, 0, &len);
		bool		floor;
		int			n = -1;

		if (data != NULL && TransactionIdIsNormal(xid))
			n = pending_ops_decode((const unsigned char *) data,
								   (const unsigned char *) data + len,
								   FbfFullXidBefore(ReadNextFullTransactionId(), xid),
								   entries, &floor);
		if (n < 0)
			elog(PANIC, "fbf redo: malformed pending operations of %zu bytes", len);
		FbfPendingPageAppend(BufferGetPage(buf), entries, n, floor);
		PageSetLSN(BufferGetPage(buf), record->EndRecPtr);
		MarkBufferDirty(buf);
	}
	if (BufferIsValid(buf))
		UnlockReleaseBuffer(buf);
}

static void
pending_add_desc(StringInfo buf, XLogReaderState *record)
{
	Size		len;
	char	   *data = XLogRecGetBlockData(record, 0, &len);
	xl_fbf_pending_add xl;
	FbfPendingEntry annex;

	if (pending_add_data(data, len, &xl, &annex))
	{
		appendStringInfo(buf, "xid %u:%u, hash %016llx%s", xl.entry.epoch,
						 xl.entry.xid, (unsigned long long) xl.entry.h1,
						 (xl.flags & FBF_PENDING_ADD_FLOOR) ? ", floor" : "");
		if (xl.flags & FBF_PENDING_ADD_ANNEX)
			appendStringInfo(buf, "; annex: stream %016llx, seq " INT64_FORMAT,
							 (unsigned long long) annex.h1, (int64) annex.h2);
	}
	else if (data != NULL)
		appendStringInfo(buf, "malformed, %zu bytes", len);
	else
		appendStringInfoString(buf, "image");
}

static void
pending_ops_desc(StringInfo buf, XLogReaderState *record)
{
	Size		len;
	char	   *data = XLogRecGetBlockData(record, 0, &len);
	FbfPendingEntry entries[FBF_PENDING_CAPACITY];
	bool		floor;
	int			n = -1;
	int			ops = 0;

	if (data != NULL)
		n = pending_ops_decode((const unsigned char *) data,
							   (const unsigned char *) data + len,
							   FullTransactionIdFromEpochAndXid(0, XLogRecGetXid(record)),
							   entries, &floor);
	for (int i = 0; i < n; i++)
		ops += !FbfEntryIsAnnex(&entries[i]);
	if (n >= 0)
		appendStringInfo(buf, "xid %u, %d operations, %d entries%s",
						 XLogRecGetXid(record), ops, n, floor ? ", floor" : "");
	else if (data != NULL)
		appendStringInfo(buf, "malformed, %zu bytes", len);
	else
		appendStringInfoString(buf, "image");
}

static void
pending_adds_desc(StringInfo buf, XLogReaderState *record)
{
	Size		len;
	char	   *data = XLogRecGetBlockData(record, 0, &len);
	xl_fbf_pending_adds xl;
	FbfPendingEntry entries[FBF_PENDING_CAPACITY];
	int			n = pending_adds_decode(data, len, &xl, entries);

	if (n >= 0)
		appendStringInfo(buf, "xid %u:%u, %u operations, %d entries%s",
						 xl.epoch, xl.xid, xl.n, n,
						 (xl.flags & FBF_PENDING_ADD_FLOOR) ? ", floor" : "");
	else if (data != NULL)
		appendStringInfo(buf, "malformed, %zu bytes", len);
	else
		appendStringInfoString(buf, "image");
}

static void
drain_desc(StringInfo buf, XLogReaderState *record)
{
	int			id;

	for (id = 0; id <= XLogRecMaxBlockId(record); id++)
	{
		Size		len;
		char	   *data = XLogRecGetBlockData(record, id, &len);

		if (data == NULL)
			appendStringInfo(buf, "%sblk %d: image", id > 0 ? "; " : "", id);
		else if (id == 0 && len >= sizeof(uint16))
		{
			bool		bytes = (XLogRecGetInfo(record) & XLR_RMGR_INFO_MASK) ==
				XLOG_FBF_DRAIN_V1;
			uint16		n;
			int			kept = 0;

			memcpy(&n, data, sizeof(n));
			data += sizeof(n);
			len -= sizeof(n);
			for (int i = 0; i < n && (Size) (bytes ? i : i / 8) < len; i++)
				kept += bytes ? data[i] != 0 : (((const uint8 *) data)[i / 8] >> (i % 8)) & 1;
			appendStringInfo(buf, "pending: %d of %u kept", kept, n);
		}
		else if (id > 0 && len >= SizeOfFbfSliceSet)
		{
			xl_fbf_slice_set set;

			memcpy(&set, data, SizeOfFbfSliceSet);
			appendStringInfo(buf, "; partition: %u set in lanes %u, %u",
							 set.n, set.lanes[0], set.lanes[1]);
		}
	}
}

/* Register the window's record types; from FbfWindowInit. */
void
FbfWindowXLogInit(void)
{
	FbfXLogRegisterRecord(XLOG_FBF_PENDING_ADD, "PENDING_ADD", pending_add_redo,
						  pending_add_desc);
	FbfXLogRegisterRecord(XLOG_FBF_DRAIN_V1, "DRAIN_V1", drain_redo, drain_desc);
	FbfXLogRegisterRecord(XLOG_FBF_PENDING_ADDS, "PENDING_ADDS",
						  pending_adds_redo, pending_adds_desc);
	FbfXLogRegisterRecord(XLOG_FBF_PENDING_OPS, "PENDING_OPS",
						  pending_ops_redo, pending_ops_desc);
	FbfXLogRegisterRecord(XLOG_FBF_DRAIN, "DRAIN", drain_redo, drain_desc);
}
