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
 *	XLOG_FBF_PENDING_ADD	block 0: the pending page; its data an
 *							xl_fbf_pending_add (the entry, and flags:
 *							whether it lowers the chain's floor, whether
 *							an annex follows), then, for an operation
 *							numbered in a stream, the annex appended right
 *							after the entry: its stream (8 bytes) and seq
 *							(a zigzag varint)
 *	XLOG_FBF_DRAIN			block 0: a pending page; its data one byte per
 *							entry it had, nonzero to keep it (an annex is
 *							kept exactly when the entry before it is).
 *							blocks 1..: partition pages; the data of each
 *							an xl_fbf_slice_set: the lanes of future and
 *							present with their stamps, and the hashes of
 *							the operations to set in them
 *
 * Block data is left out of a record when the block gets a full-page
 * image, so a drain costs 16 bytes per operation and one byte per entry,
 * and an operation in flight 25: 34 with its annex for a seq of at most
 * 63 in magnitude, 43 at most (its xid and mark are implied, so the record
 * holds only its stream and seq).  Redo locks a record's pages in order
 * and releases them at the end, as the primary held them
 * (FbfXLogRedoPages, common/fbf_xlog.c).
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
 * Append an entry to a pending page, and its annex (NULL: none) right
 * after it; set the chain's floor if asked.
 */
void
FbfPendingPageAdd(Page page, const FbfPendingEntry *entry,
				  const FbfPendingEntry *annex, bool set_floor)
{
	int			n;
	FbfPendingEntry *entries = FbfWindowPageGetEntries(page, &n);
	int			add = annex != NULL ? 2 : 1;

	if (n + add > FBF_PENDING_CAPACITY)
		elog(PANIC, "fbf: pending page overflow");
	entries[n] = *entry;
	if (annex != NULL)
		entries[n + 1] = *annex;
	FbfWindowPageSetEntryCount(page, n + add);
	if (set_floor)
		FbfWindowPageGetOpaque(page)->stamp = (int64)
			U64FromFullTransactionId(FullTransactionIdFromEpochAndXid(entry->epoch,
																	  entry->xid));
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
 * annex (NULL: none) right after it, in one record.  The caller has made
 * sure the page has room for both.
 */
void
FbfPendingLogAdd(Relation index, Buffer buf, const FbfPendingEntry *entry,
				 const FbfPendingEntry *annex, bool set_floor)
{
	xl_fbf_pending_add xl;
	unsigned char xa[FBF_PENDING_ANNEX_MAX];
	unsigned	xa_len = 0;

	xl.entry = *entry;
	xl.flags = set_floor ? FBF_PENDING_ADD_FLOOR : 0;
	if (annex != NULL)
	{
		Assert(FbfEntryIsAnnex(annex));
		xl.flags |= FBF_PENDING_ADD_ANNEX;
		fbf_le64_write(xa, annex->h1);
		xa_len = 8 + fbf_varint_write(xa + 8, fbf_zigzag((int64) annex->h2));
	}

	START_CRIT_SECTION();
	FbfPendingPageAdd(BufferGetPage(buf), entry, annex, set_floor);
	MarkBufferDirty(buf);
	if (RelationNeedsWAL(index))
	{
		XLogRecPtr	lsn;

		XLogBeginInsert();
		XLogRegisterBuffer(0, buf, REGBUF_STANDARD);
		XLogRegisterBufData(0, (char *) &xl, SizeOfFbfPendingAdd);
		if (annex != NULL)
			XLogRegisterBufData(0, (char *) xa, xa_len);
		lsn = XLogInsert(FBF_RMGR_ID, XLOG_FBF_PENDING_ADD);
		PageSetLSN(BufferGetPage(buf), lsn);
	}
	END_CRIT_SECTION();
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

	Assert(nslices < FBF_XLOG_MAX_PAGES);
	FbfPendingKeepAnnexes(entries, Min(n, nentries), keep);
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
		XLogRegisterBufData(0, (char *) keep, nentries);
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

/* a drain's change to its block `id`: the pending page (0) or a partition page */
static void
drain_redo_page(XLogReaderState *record, int id, Buffer buffer, void *arg)
{
	Size		len;
	char	   *data = XLogRecGetBlockData(record, id, &len);

	if (id == 0)
	{
		uint16		n;

		if (len < sizeof(n))
			elog(PANIC, "fbf redo: truncated drain");
		memcpy(&n, data, sizeof(n));
		if (len != sizeof(n) + n)
			elog(PANIC, "fbf redo: drain of %u entries in %zu bytes", n, len);
		FbfPendingPageCompact(BufferGetPage(buffer),
							  (const uint8 *) data + sizeof(n), n);
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

	if (max_block >= FBF_XLOG_MAX_PAGES)
		elog(PANIC, "fbf redo: drain into %d pages", max_block);
	FbfXLogRedoPages(record, max_block, drain_redo_page, NULL);
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
			uint16		n;
			int			kept = 0;

			memcpy(&n, data, sizeof(n));
			for (int i = 0; i < n && sizeof(n) + i < len; i++)
				kept += data[sizeof(n) + i] != 0;
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
	FbfXLogRegisterRecord(XLOG_FBF_DRAIN, "DRAIN", drain_redo, drain_desc);
}
