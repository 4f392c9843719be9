/*-------------------------------------------------------------------------
 *
 * window_pending.c
 *	  Pending chains: operations in flight with their transaction's xid,
 *	  until they are drained into their partition pages (committed) or
 *	  dropped (aborted).  This file owns the chains' pages, their entries'
 *	  fate, the backend-local index of a page's entries, and the one
 *	  drain loop, which hands each round's committed entries to the
 *	  window's format (FbfFilterRoutine.store, window_format.h).
 *
 * The scheme, and why it makes an operation's fate exactly its
 * transaction's, is in window_page.h ("Pending pages").  A chain is a head page
 * (block 1 + chain number) and overflow pages; the head's special space also
 * keeps the list of spare overflow pages that drains have emptied.  A
 * chain is always locked whole, head first (FbfChainLock), under the
 * metapage's lock, so the ring seen by a drain is the ring of the caller
 * (lock order: src/window/README.md, "Lock definitions"); the head's lock
 * guards the chain's entries and its spare-page list.
 *
 * Annexes (window_page.h, FbfEntryIsAnnex): an operation numbered in a
 * stream is followed on its page by an annex holding its stream and seq.
 * Every reader here skips them (they are nobody's operation and have no
 * fate of their own), but the drain: it records the annexes of the
 * entries a round stores in their stream pages (FbfStreamsRecord,
 * window_stream.c) once the format has decided to store them and before
 * it writes them, and keeps an annex exactly when it keeps the entry
 * before it.
 *
 * WAL: a drain round is one record per pending page and up to three
 * partition pages, the format's (FbfFilterRoutine.store), after its
 * streams' record if it has annexes; changes of the chain's links are
 * records of changed bytes (common/fbf_xlog.h) of at most three pages:
 * head, previous and emptied page when an overflow page goes back to the
 * spare list.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/fbf_xlog.h"
#include "access/transam.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/procarray.h"
#include "utils/hsearch.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "access/xlog.h"
#include "common/fbf_htab.h"
#include "common/fbf_page.h"
#include "window/window_format.h"
#include "window/window_int.h"
#include "window/window_xlog.h"

/*
 * The FullTransactionId of the (sub)transaction that applied an entry.
 * Windows written by 1.0 stored no epoch: their entries are read as 1.0
 * compared them, as the xid within 2^32 before the next one.
 */
FullTransactionId
FbfEntryFullXid(const FbfWindowMetaPageData *meta, const FbfPendingEntry *entry)
{
	if ((meta->features & FBF_FEATURE_FULL_XIDS) != 0)
		return FullTransactionIdFromEpochAndXid(entry->epoch, entry->xid);
	return FbfFullXidBefore(ReadNextFullTransactionId(), entry->xid);
}

/*
 * The fate of the transaction that applied a pending entry, checked the way
 * heap visibility checks are: current, in progress, committed.
 *
 * Compared as 64-bit xids first, so that no distance in xids can make an
 * entry look like another transaction's: an xid not yet assigned is
 * nobody's (the entry cannot be real: treated as aborted), and one older
 * than the commit log has a fate nobody can read any more.  Every path
 * that can advance the counter table's relfrozenxid drains first
 * (VACUUM's amvacuumcleanup, the utility hook before VACUUM and rebuilds,
 * the truncate hook), and an operation drains its chain once its oldest
 * entry is FBF_PENDING_DRAIN_AGE xids old; what those drains leave is of
 * transactions in progress, or committed entries put off for a later
 * period's filters.  So an entry older than the commit log is one of
 * those, and is taken as committed, which it is; or (a failsafe VACUUM
 * after 1.4 billion xids, or a transaction that ended between the hook's
 * drain and its VACUUM's horizon) one nobody judged, taken as committed as
 * 1.0 did.  The server log says so once a minute at most (a VACUUM FREEZE
 * of every database can put thousands of waiting entries past the log,
 * and each check of each would say it again).  Between those bounds the
 * xid is within 2^31 of the next one, so the 32-bit checks below are
 * exact.  The lock keeps the commit log from being truncated under the
 * lookup, as txid_status() does.
 */
FbfEntryStatus
FbfEntryStatusOf(FullTransactionId fxid)
{
	TransactionId xid = XidFromFullTransactionId(fxid);
	FullTransactionId next = ReadNextFullTransactionId();
	FullTransactionId oldest;
	TransactionId oldest_xid;
	FbfEntryStatus status;

	if (!TransactionIdIsNormal(xid))
		return FBF_ENTRY_ABORTED;

	if (!FullTransactionIdPrecedes(fxid, next))
		return FBF_ENTRY_ABORTED;

	LWLockAcquire(XactTruncationLock, LW_SHARED);
	oldest_xid = FbfTransamVariables->oldestClogXid;
	oldest = FbfFullXidBefore(next, oldest_xid);
	if (FullTransactionIdPrecedes(fxid, oldest))
	{
		static TimestampTz last_said = 0;
		TimestampTz now = GetCurrentTimestamp();

		LWLockRelease(XactTruncationLock);
		/* server log only (the caller holds buffer locks), once a minute */
		if (TimestampDifferenceExceeds(last_said, now, 60 * 1000))
		{
			last_said = now;
			ereport(LOG_SERVER_ONLY,
					(errmsg("fbf: the fate of transaction %llu that applied a pending operation is older than the commit log",
							(unsigned long long) U64FromFullTransactionId(fxid)),
					 errdetail("It is taken as committed: an operation waiting for a later period's filter was judged committed before; one never drained before the commit log was truncated may have been rolled back.  Said once a minute at most.")));
		}
		return FBF_ENTRY_COMMITTED;
	}
	if (TransactionIdIsCurrentTransactionId(xid))
		status = FBF_ENTRY_OURS;
	else if (TransactionIdIsInProgress(xid))
		status = FBF_ENTRY_IN_PROGRESS;
	else if (TransactionIdDidCommit(xid))
		status = FBF_ENTRY_COMMITTED;
	else
		status = FBF_ENTRY_ABORTED;
	LWLockRelease(XactTruncationLock);
	return status;
}

/* ----------------------------------------------------------------------
 * Finding an operation on a pending page
 * ----------------------------------------------------------------------
 */

/*
 * A backend-local index of a pending page's entries by hash, so that an
 * operation looks its hash up on each page of its chain instead of reading
 * every entry: a batch's own entries pile up on its chains, and reading
 * them all for each of its operations made a batch's cost grow with the
 * square of its size.  Open addressing on the hash: a slot holds an
 * entry's position + 1 (0: free) in its low PENDING_INDEX_POS_BITS bits and
 * more bits of its hash above them, so that a probe seldom reads an entry
 * that does not match; at most FBF_PENDING_CAPACITY of the
 * PENDING_INDEX_SLOTS slots are used.
 *
 * An index is kept for a page (its relation's file and block) and checked
 * before each use against the page itself, which the caller holds locked:
 * it is still right if the page has the LSN it had (every change of a
 * WAL-logged page sets it; an unlogged one keeps its LSN), as many entries
 * as were indexed, and its last operation's entry (the last entry that is
 * not an annex) is the one indexed last, at the same place.  The last two
 * suffice without the LSN: entries change only by appends (at the end)
 * and by drains, which remove some and keep the order of the rest; and no
 * operation's entry is ever appended twice, for a (sub)transaction's xid
 * and an operation's hash are on a chain at most once (FbfWindowApply
 * appends only what it did not find there, under the chain's lock, and an
 * xid that committed or aborted appends nothing more).  So after any
 * change the count or the last operation's entry differs (an append adds
 * a new one; a removal shifts the old last one down, or removes it), and
 * the page is indexed again, in time linear in its entries.  Annexes are
 * not indexed, nor compared: one can be appended again (the same stream
 * and seq, retried after an abort), and always goes with its entry.
 * Pages are not indexed while they hold few entries (reading them is
 * cheaper), nor by a transaction's first look-up (one increment's
 * transaction reads its page once), nor are indexes kept past the end of
 * the transaction (the table's memory is, if small:
 * pending_index_xact_callback); past PENDING_INDEX_MAX_PAGES pages, all
 * are dropped and built again as needed.
 */
#define PENDING_INDEX_SLOTS		1024
#define PENDING_INDEX_POS_BITS	9
#define PENDING_INDEX_POS_MASK	((1 << PENDING_INDEX_POS_BITS) - 1)
#define PENDING_INDEX_MIN_ENTRIES	32
#define PENDING_INDEX_MAX_PAGES	4096
#define PENDING_INDEX_KEEP_PAGES	64

StaticAssertDecl(FBF_PENDING_CAPACITY * 2 <= PENDING_INDEX_SLOTS &&
				 FBF_PENDING_CAPACITY < PENDING_INDEX_POS_MASK,
				 "pending page index too small");

typedef struct PendingIndexKey
{
	FbfFileLocator node;
	BlockNumber blkno;
} PendingIndexKey;

typedef struct PendingIndex
{
	PendingIndexKey key;		/* hash key: must be first */
	XLogRecPtr	lsn;			/* the page's LSN when indexed */
	int			n;				/* entries on the page when indexed */
	int			last_pos;		/* its last operation's entry (-1: none) */
	FbfPendingEntry last;		/* that entry, as indexed */
	uint16		slots[PENDING_INDEX_SLOTS];
} PendingIndex;

static HTAB *pending_indexes = NULL;
static bool pending_callback_registered = false;

/*
 * Page look-ups of this transaction: its first reads the page (a
 * transaction of one increment would otherwise make, fill and drop a
 * table of indexes for one look-up: more than reading 340 entries).
 */
static int	pending_lookups = 0;

/*
 * Drop every index at the end of a transaction.  A table of at most
 * PENDING_INDEX_KEEP_PAGES indexes keeps its memory for the next
 * transaction, emptied: made and destroyed by every transaction that
 * indexes a page (a batch), its first allocation (128 kB, past what a
 * memory context keeps for reuse) went to malloc and back each time, and
 * the C library gave it back to the kernel, to take it again at the next
 * batch (page faults and TLB shootdowns).  A larger one is destroyed.
 */
static void
pending_index_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PARALLEL_ABORT)
	{
		if (pending_indexes != NULL &&
			hash_get_num_entries(pending_indexes) <= PENDING_INDEX_KEEP_PAGES)
		{
			HASH_SEQ_STATUS seq;
			PendingIndex *pi;

			hash_seq_init(&seq, pending_indexes);
			while ((pi = hash_seq_search(&seq)) != NULL)
				(void) hash_search(pending_indexes, &pi->key, HASH_REMOVE, NULL);
		}
		else if (pending_indexes != NULL)
		{
			hash_destroy(pending_indexes);
			pending_indexes = NULL;
		}
		pending_lookups = 0;
	}
}

/*
 * An operation's first slot, and the bits of its hash its slots keep (h1's
 * low bits choose the chain and partition: the others are used).
 */
static inline uint32
pending_slot(uint64 h1, uint64 h2)
{
	return (uint32) ((h2 ^ (h1 >> 32)) & (PENDING_INDEX_SLOTS - 1));
}

static inline uint16
pending_tag(uint64 h2)
{
	return (uint16) ((h2 >> 48) & ~PENDING_INDEX_POS_MASK);
}

/* index entry i (an operation's: annexes are not indexed) */
static void
pending_index_insert(PendingIndex *pi, const FbfPendingEntry *entries, int i)
{
	uint32		s = pending_slot(entries[i].h1, entries[i].h2);

	Assert(!FbfEntryIsAnnex(&entries[i]));
	while (pi->slots[s] != 0)
		s = (s + 1) & (PENDING_INDEX_SLOTS - 1);
	pi->slots[s] = pending_tag(entries[i].h2) | (uint16) (i + 1);
}

/* the place of the last of n entries that is not an annex; -1 if none */
static inline int
pending_last_op(const FbfPendingEntry *entries, int n)
{
	int			i = n - 1;

	while (i >= 0 && FbfEntryIsAnnex(&entries[i]))
		i--;
	return i;
}

/* note entries[0 .. n-1] as what `pi` indexed */
static inline void
pending_index_mark(PendingIndex *pi, Page page, const FbfPendingEntry *entries,
				   int n)
{
	pi->lsn = PageGetLSN(page);
	pi->n = n;
	pi->last_pos = pending_last_op(entries, n);
	if (pi->last_pos >= 0)
		pi->last = entries[pi->last_pos];
}

/* did `pi` index the first n of these entries, as they are (see above)? */
static inline bool
pending_index_covers(const PendingIndex *pi, const FbfPendingEntry *entries,
					 int n)
{
	int			last = pending_last_op(entries, n);

	return pi->n == n && pi->last_pos == last &&
		(last < 0 ||
		 memcmp(&pi->last, &entries[last], sizeof(FbfPendingEntry)) == 0);
}

/* is `pi` still the index of this page's entries (see above)? */
static inline bool
pending_index_valid(const PendingIndex *pi, Page page,
					const FbfPendingEntry *entries, int n)
{
	return pi->lsn == PageGetLSN(page) && pending_index_covers(pi, entries, n);
}

/*
 * The index of a pending page's entries, built if it is missing or out of
 * date.  The caller holds the page locked.
 */
static PendingIndex *
pending_index(Buffer buf, const FbfPendingEntry *entries, int n)
{
	PendingIndexKey key;
	PendingIndex *pi;
	ForkNumber	fork;
	bool		found;
	int			i;

	if (pending_indexes == NULL)
	{
		if (!pending_callback_registered)
		{
			RegisterXactCallback(pending_index_xact_callback, NULL);
			pending_callback_registered = true;
		}
		pending_indexes = FbfHashCreate("fbf pending page indexes", 64,
										sizeof(PendingIndexKey),
										sizeof(PendingIndex), TopMemoryContext);
	}
	else if (hash_get_num_entries(pending_indexes) >= PENDING_INDEX_MAX_PAGES)
	{
		hash_destroy(pending_indexes);
		pending_indexes = NULL;
		return pending_index(buf, entries, n);
	}

	MemSet(&key, 0, sizeof(key));
	BufferGetTag(buf, &key.node, &fork, &key.blkno);
	pi = hash_search(pending_indexes, &key, HASH_ENTER, &found);
	if (found && pending_index_valid(pi, BufferGetPage(buf), entries, n))
		return pi;

	memset(pi->slots, 0, sizeof(pi->slots));
	for (i = 0; i < n; i++)
	{
		if (!FbfEntryIsAnnex(&entries[i]))
			pending_index_insert(pi, entries, i);
	}
	pending_index_mark(pi, BufferGetPage(buf), entries, n);
	return pi;
}

/*
 * The positions of the entries with `hash` on a locked pending page, in
 * page order, into pos[] (room for FBF_PENDING_CAPACITY); returns their
 * number.  Annexes are never among them.  A page of few entries, or the
 * transaction's first page, is read whole; a longer one is looked up in
 * its index (above).
 */
int
FbfPendingPageFind(Buffer buf, const FbfHash *hash, int *pos)
{
	int			n;
	FbfPendingEntry *entries = FbfWindowPageGetEntries(BufferGetPage(buf), &n);
	PendingIndex *pi;
	int			nfound = 0;
	uint32		s;
	uint16		tag;
	int			i;

	if (!pending_callback_registered)
	{
		RegisterXactCallback(pending_index_xact_callback, NULL);
		pending_callback_registered = true;
	}
	if (n < PENDING_INDEX_MIN_ENTRIES || pending_lookups++ == 0)
	{
		for (i = 0; i < n; i++)
			if (entries[i].h1 == hash->h1 && entries[i].h2 == hash->h2 &&
				!FbfEntryIsAnnex(&entries[i]))
				pos[nfound++] = i;
		return nfound;
	}

	pi = pending_index(buf, entries, n);
	tag = pending_tag(hash->h2);
	for (s = pending_slot(hash->h1, hash->h2); pi->slots[s] != 0;
		 s = (s + 1) & (PENDING_INDEX_SLOTS - 1))
	{
		int			p = (pi->slots[s] & PENDING_INDEX_POS_MASK) - 1;

		if ((pi->slots[s] & ~PENDING_INDEX_POS_MASK) != tag ||
			entries[p].h1 != hash->h1 || entries[p].h2 != hash->h2)
			continue;
		/* in page order: probing finds them in any */
		for (i = nfound; i > 0 && pos[i - 1] > p; i--)
			pos[i] = pos[i - 1];
		pos[i] = p;
		nfound++;
	}
	return nfound;
}

/*
 * Note an entry just appended to a locked pending page (with its annex
 * after it, if it has one) in the page's index, if the page has one that
 * was up to date before the append (`lsn`: the page's LSN then);
 * otherwise the next lookup builds it again.
 */
void
FbfPendingPageNoteAdd(Buffer buf, XLogRecPtr lsn)
{
	PendingIndexKey key;
	PendingIndex *pi;
	ForkNumber	fork;
	int			n;
	FbfPendingEntry *entries = FbfWindowPageGetEntries(BufferGetPage(buf), &n);
	int			added;

	if (pending_indexes == NULL || n < 1)
		return;
	added = n >= 2 && FbfEntryIsAnnex(&entries[n - 1]) ? 2 : 1;
	MemSet(&key, 0, sizeof(key));
	BufferGetTag(buf, &key.node, &fork, &key.blkno);
	pi = hash_search(pending_indexes, &key, HASH_FIND, NULL);
	if (pi == NULL || pi->lsn != lsn ||
		!pending_index_covers(pi, entries, n - added))
		return;
	pending_index_insert(pi, entries, n - added);
	pending_index_mark(pi, BufferGetPage(buf), entries, n);
}

/*
 * FbfEntryStatusOf for the entries of a page read in order: an entry of the
 * same (sub)transaction as the one before it gets that one's fate, read
 * once (a batch leaves runs of entries of one xid).  A fate read a moment
 * earlier is as good as a new reading: committed and aborted are final,
 * and a drain keeps an entry it found in progress.  `memo` starts zeroed.
 */
FbfEntryStatus
FbfEntryStatusMemo(const FbfWindowMetaPageData *meta,
				   const FbfPendingEntry *entry, FbfEntryMemo *memo)
{
	FullTransactionId fxid = FbfEntryFullXid(meta, entry);

	if (!FullTransactionIdIsValid(memo->fxid) ||
		!FullTransactionIdEquals(fxid, memo->fxid))
	{
		memo->fxid = fxid;
		memo->status = FbfEntryStatusOf(fxid);
	}
	return memo->status;
}

/* a drain round, as reset_unknown_streams and record_streams read it */
typedef struct DrainRound
{
	Relation	index;
	const FbfWindowMetaPageData *meta;
	const FbfPendingEntry *entries;
	int			n;
	const BlockNumber *target;
	int			nblocks;		/* the partition pages its store may hold */
} DrainRound;

/*
 * Reset the stream pages if a drain round targets an entry of a
 * transaction that precedes the window's stream_xid and has no annex: it
 * may be an operation of a stream recorded before the window had stream
 * pages, which no stream can learn, so nothing may be proven new for a
 * horizon (FbfStreamsReset).  That happens only for what was in flight
 * when the stream pages were made.  Done before the store locks its
 * partition pages (a reset writes every stream page); early is safe, as
 * the entries are on their chain until the store writes.  The caller
 * holds the chain.
 */
static void
reset_unknown_streams(const DrainRound *round)
{
	const FbfWindowMetaPageData *meta = round->meta;
	const FbfPendingEntry *entries = round->entries;
	int			n = round->n;
	int			i;

	if (meta->stream_pages == 0 || meta->stream_xid == 0)
		return;
	for (i = 0; i < n; i++)
	{
		if (round->target[i] == InvalidBlockNumber ||
			(i + 1 < n && FbfEntryIsAnnex(&entries[i + 1])))
			continue;
		if (U64FromFullTransactionId(FbfEntryFullXid(meta, &entries[i])) <
			meta->stream_xid)
		{
			FbfStreamsReset(round->index, InvalidBuffer, meta,
							FbfWindowNow(meta));
			return;
		}
	}
}

/*
 * Record in their stream pages the operations of a drain round that its
 * store stores (FbfStoreDecided): the entries with a target and keep[i] =
 * 0 whose next entry is an annex (FbfStreamsRecord, WAL-logged there,
 * told of the round's partition pages, which stay pinned meanwhile).  The
 * caller holds the chain and those pages.
 */
static void
record_streams(void *arg, const uint8 *keep)
{
	const DrainRound *round = (const DrainRound *) arg;
	const FbfPendingEntry *entries = round->entries;
	int			n = round->n;
	FbfStreamOp *ops = NULL;
	int			nops = 0;
	int			i;

	if (round->meta->stream_pages == 0)
		return;
	for (i = 0; i < n; i++)
	{
		if (round->target[i] == InvalidBlockNumber || keep[i] ||
			i + 1 == n || !FbfEntryIsAnnex(&entries[i + 1]))
			continue;
		if (ops == NULL)
			ops = palloc(sizeof(FbfStreamOp) * Max(n / 2, 1));
		ops[nops].stream = entries[i + 1].h1;
		ops[nops].seq = (int64) entries[i + 1].h2;
		nops++;
	}
	if (nops > 0)
	{
		FbfStreamsRecord(round->index, round->meta, ops, nops,
						 FbfWindowNow(round->meta), round->nblocks);
		pfree(ops);
	}
}

/*
 * Drain the pending page pbuf (exclusively locked, in a chain the caller
 * holds under the metapage's lock, share: the ring is `meta`): the one
 * drain loop of every format.  Each round judges the entries' fate,
 * drops the aborted ones and hands the committed ones of up to
 * FbfFilterRoutine.store_pages partition pages to the format's store
 * (FbfFilterRoutine.store), which locks those pages in block order and
 * writes the round in one WAL record: a chain's operations fall in P / C
 * partitions, so before any split, one round.  Entries of further pages
 * wait for the next round.  If the store leaves entries (a cuckoo block
 * full, or, with may_defer, bits that would saturate), they stay on the
 * page, later rounds pass over their partition pages (the others' entries
 * go on draining), and *put_off is raised to what they wait for
 * (FbfStored): more bits (FbfWindowGrow) or the next period.  Returns the
 * entries removed (annexes included).
 *
 * Annexes are not judged (an annex's xid is nobody's): each goes with the
 * entry before it.  The annexes of the entries a round stores are
 * recorded in their stream pages first, once the store has decided what
 * it stores and before it writes it (record_streams, called by the store:
 * FbfStreamsRecord locks the stream pages after the pending and partition
 * pages, as src/window/README.md orders them): after a crash between the
 * two records the entries are still on the chain, and recording them
 * again at their next drain changes nothing.  An entry that waits is not
 * recorded until it is stored: a chain full of waiting entries is drained
 * again by every operation that finds it full, and recording them each
 * time wrote their streams' WAL again at each (a cuckoo window's
 * flood: 29,988 records, 8.8 MB, for 21 operations).
 */
static int
drain_page(Relation index, const FbfWindowMetaPageData *meta, Buffer pbuf,
		   bool may_defer, FbfStored *put_off)
{
	const FbfFilterRoutine *routine = FbfFilterRoutineOf(meta);
	int			removed = 0;
	BlockNumber *full = NULL;	/* pages that left entries this drain */
	int			nfull = 0;

	if (routine->store_pages < 1 || routine->store_pages > FBF_DRAIN_MAX_PAGES)
		elog(ERROR, "fbf: format \"%s\" stores into %d pages a round",
			 routine->name, routine->store_pages);

	for (;;)
	{
		int			n;
		FbfPendingEntry *entries = FbfWindowPageGetEntries(BufferGetPage(pbuf), &n);
		uint8	   *keep;
		BlockNumber *target;
		BlockNumber blocks[FBF_DRAIN_MAX_PAGES];
		int			nblocks = 0;
		bool		more = false;
		bool		changed = false;
		DrainRound	round;
		FbfStored	stored;
		int			i;
		int			b;
		FbfEntryMemo memo = {InvalidFullTransactionId, FBF_ENTRY_ABORTED};

		if (n == 0)
			return removed;
		keep = palloc(n);
		target = palloc(sizeof(BlockNumber) * n);
		for (i = 0; i < n; i++)
		{
			FbfEntryStatus s;

			keep[i] = 1;
			target[i] = InvalidBlockNumber;
			if (FbfEntryIsAnnex(&entries[i]))
			{
				/* goes with its entry (FbfPendingKeepAnnexes) */
				if (i > 0)
					keep[i] = keep[i - 1];
				continue;
			}
			s = FbfEntryStatusMemo(meta, &entries[i], &memo);
			if (s == FBF_ENTRY_ABORTED)
			{
				keep[i] = 0;
				changed = true;
			}
			else if (s == FBF_ENTRY_COMMITTED)
			{
				FbfHash		h = {entries[i].h1, entries[i].h2};
				BlockNumber blk = FbfWindowPartBlock(meta, &h);

				for (b = 0; b < nfull && full[b] != blk; b++)
					;
				if (b < nfull)
					continue;	/* waits (FbfStored) */
				for (b = 0; b < nblocks && blocks[b] != blk; b++)
					;
				if (b == nblocks && nblocks < routine->store_pages)
					blocks[nblocks++] = blk;
				if (b < nblocks)
				{
					target[i] = blk;
					changed = true;
				}
				else
					more = true;	/* a later round */
			}
		}
		if (!changed)
		{
			pfree(keep);
			pfree(target);
			break;
		}

		/* the partition pages are locked in block order */
		for (i = 1; i < nblocks; i++)
		{
			for (b = i; b > 0 && blocks[b - 1] > blocks[b]; b--)
			{
				BlockNumber t = blocks[b];

				blocks[b] = blocks[b - 1];
				blocks[b - 1] = t;
			}
		}

		/* the streams learn of what the store stores before it writes it */
		round.index = index;
		round.meta = meta;
		round.entries = entries;
		round.n = n;
		round.target = target;
		round.nblocks = nblocks;
		reset_unknown_streams(&round);
		stored = routine->store(index, meta, pbuf, entries, n, keep, target,
								blocks, nblocks, may_defer,
								record_streams, &round);
		for (i = 0; i < n; i++)
			removed += keep[i] == 0;
		if (stored != FBF_STORED_ALL)
		{
			/* the pages whose entries stayed take no more this drain */
			*put_off = Max(*put_off, stored);
			/* each page it will hold has an entry on this page now: n bounds them */
			if (full == NULL)
				full = palloc(sizeof(BlockNumber) * n);
			for (b = 0; b < nblocks; b++)
			{
				for (i = 0; i < n && !(target[i] == blocks[b] && keep[i]); i++)
					;
				if (i < n)
					full[nfull++] = blocks[b];
			}
		}
		pfree(keep);
		pfree(target);
		if (!more)
			break;
	}
	if (full != NULL)
		pfree(full);
	return removed;
}

/*
 * Lock pending chain `chainno` whole in `mode`, head first:
 * exclusive to change it, share only to read it (snapshots, a look-up
 * alone: FbfWindowContains).  The caller
 * holds the metapage locked (share or exclusive) and must call
 * FbfChainRelease before releasing it.
 */
void
FbfChainLockMode(Relation index, const FbfWindowMetaPageData *meta,
				 uint32 chainno, int mode, FbfPendingChain *chain)
{
	BlockNumber blkno = FbfPendingBlock(meta, chainno);

	chain->n = 0;
	while (blkno != InvalidBlockNumber)
	{
		Buffer		buf;

		if (chain->n == FBF_MAX_PENDING_PAGES)
			elog(ERROR, "fbf: pending chain of \"%s\" is longer than %d pages",
				 RelationGetRelationName(index), FBF_MAX_PENDING_PAGES);
		buf = FbfWindowReadPage(index, blkno, mode, FBF_PAGE_ID_PENDING);
		chain->bufs[chain->n++] = buf;
		blkno = FbfWindowPageGetOpaque(BufferGetPage(buf))->next;
	}
}

/* Lock a chain exclusively (FbfChainLockMode). */
void
FbfChainLock(Relation index, const FbfWindowMetaPageData *meta, uint32 chainno,
			 FbfPendingChain *chain)
{
	FbfChainLockMode(index, meta, chainno, BUFFER_LOCK_EXCLUSIVE, chain);
}

/* Unlock and release a chain locked by FbfChainLock, tail first. */
void
FbfChainRelease(FbfPendingChain *chain)
{
	int			i;

	for (i = chain->n - 1; i >= 0; i--)
		UnlockReleaseBuffer(chain->bufs[i]);
	chain->n = 0;
}

/*
 * Judge each entry of a locked chain (annexes are skipped): give each
 * committed one to `fn` (if not NULL), and return how many are still in
 * flight (neither committed nor aborted); with `first`, stop at the first
 * of those.
 */
static uint64
chain_judge(const FbfWindowMetaPageData *meta, const FbfPendingChain *chain,
			void (*fn) (const FbfHash *hash, void *arg), void *arg,
			bool first)
{
	uint64		in_flight = 0;
	int			p;

	for (p = 0; p < chain->n; p++)
	{
		int			n;
		FbfPendingEntry *entries = FbfWindowPageGetEntries(BufferGetPage(chain->bufs[p]), &n);
		int			j;

		for (j = 0; j < n; j++)
		{
			FbfEntryStatus s;

			if (FbfEntryIsAnnex(&entries[j]))
				continue;
			s = FbfEntryStatusOf(FbfEntryFullXid(meta, &entries[j]));
			if (s == FBF_ENTRY_COMMITTED)
			{
				FbfHash		hash = {entries[j].h1, entries[j].h2};

				if (fn != NULL)
					fn(&hash, arg);
			}
			else if (s != FBF_ENTRY_ABORTED)
			{
				in_flight++;
				if (first)
					return in_flight;
			}
		}
	}
	return in_flight;
}

/*
 * Give each committed entry of a locked chain to `fn`, and return how many
 * are still in flight (chain_judge): what a snapshot reads of a chain
 * (window_bloom_snap.c, window_cuckoo_snap.c).
 */
uint64
FbfChainCommitted(const FbfWindowMetaPageData *meta, const FbfPendingChain *chain,
				  void (*fn) (const FbfHash *hash, void *arg), void *arg)
{
	return chain_judge(meta, chain, fn, arg, false);
}

/*
 * Does a locked chain hold an operation of a transaction still in
 * progress (chain_judge, to the first one): what the maintenance pass asks
 * (FbfWindowInFlight)?
 */
bool
FbfChainInFlight(const FbfWindowMetaPageData *meta,
				 const FbfPendingChain *chain)
{
	return chain_judge(meta, chain, NULL, NULL, true) > 0;
}

/*
 * Drain every page of a locked chain, then move the overflow pages left
 * empty to the head's spare list (so later operations lock fewer pages, and
 * FbfChainExtend reuses them).  Returns entries removed; *put_off (if not
 * NULL) is raised to what entries left on the chain wait for (FbfStored).
 */
int
FbfChainDrain(Relation index, const FbfWindowMetaPageData *meta,
			  FbfPendingChain *chain, bool may_defer, FbfStored *put_off)
{
	int			removed = 0;
	FbfStored	put_off_dummy = FBF_STORED_ALL;
	int			i;

	if (put_off == NULL)
		put_off = &put_off_dummy;

	/*
	 * Only while the window can grow (it is not at fbf.max_filter_size),
	 * or, at its cap, while it refuses what it cannot take (at_capacity =
	 * refuse: the shares of its capacity keep a period's operations within
	 * what its bits hold, so entries put off wait at most for the next
	 * refresh's empty future filter), and only while the entries are
	 * young: half the
	 * age at which they must leave the chain before the commit log forgets
	 * them (FbfWindowApply drains such a chain at once), so that a window
	 * that never grows still gets its entries drained, by VACUUM if by
	 * nothing else.  A chain that fills up meanwhile makes the next
	 * operation grow the window (FbfWindowApply): pouring the entries into
	 * pages too small for them instead would saturate those pages, and a
	 * split would copy the saturated bits into every page it makes, where
	 * they would dismiss most new operations until they age out.
	 */
	if (may_defer)
	{
		FullTransactionId floor = FbfChainFloor(chain);

		may_defer = (FbfWindowPartsAtCap(meta) > meta->nparts ||
					 FbfWindowGetOptions(index)->at_capacity == FBF_AT_CAPACITY_REFUSE) &&
			(!FullTransactionIdIsValid(floor) ||
			 U64FromFullTransactionId(ReadNextFullTransactionId()) -
			 U64FromFullTransactionId(floor) < FBF_PENDING_DRAIN_AGE / 2);
	}
	for (i = 0; i < chain->n; i++)
		removed += drain_page(index, meta, chain->bufs[i], may_defer, put_off);

	for (i = chain->n - 1; i >= 1; i--)
	{
		Buffer		buf = chain->bufs[i];
		int			n;
		FbfXLogState *state;
		Page		head;
		Page		prev;
		Page		page;

		FbfWindowPageGetEntries(BufferGetPage(buf), &n);
		if (n > 0)
			continue;

		state = FbfXLogStart(index);
		head = FbfXLogRegisterBuffer(state, chain->bufs[0], 0);
		prev = i == 1 ? head : FbfXLogRegisterBuffer(state, chain->bufs[i - 1], 0);
		page = FbfXLogRegisterBuffer(state, buf, 0);
		FbfWindowPageGetOpaque(prev)->next = FbfWindowPageGetOpaque(page)->next;
		FbfWindowPageGetOpaque(page)->next = (BlockNumber) FbfWindowPageGetOpaque(head)->count;
		FbfWindowPageGetOpaque(head)->count = BufferGetBlockNumber(buf);
		FbfXLogFinish(state);

		UnlockReleaseBuffer(buf);
		memmove(&chain->bufs[i], &chain->bufs[i + 1],
				sizeof(Buffer) * (chain->n - i - 1));
		chain->n--;
	}

	/* the oldest entry left (annexes have no xid) is the chain's new floor */
	if (removed > 0 || !FullTransactionIdIsValid(FbfChainFloor(chain)))
	{
		FullTransactionId floor = InvalidFullTransactionId;

		for (i = 0; i < chain->n; i++)
		{
			int			n;
			FbfPendingEntry *entries =
				FbfWindowPageGetEntries(BufferGetPage(chain->bufs[i]), &n);

			for (int j = 0; j < n; j++)
			{
				FullTransactionId fxid;

				if (FbfEntryIsAnnex(&entries[j]))
					continue;
				fxid = FbfEntryFullXid(meta, &entries[j]);
				if (!FullTransactionIdIsValid(floor) ||
					FullTransactionIdPrecedes(fxid, floor))
					floor = fxid;
			}
		}
		FbfChainSetFloor(index, chain, floor);
	}
	return removed;
}

/*
 * Link an empty overflow page at the end of the chain, in one WAL record:
 * a spare one from the head's list if there is one, else a new page.  The
 * caller holds the chain (so no one else touches the spare list).
 */
void
FbfChainExtend(Relation index, FbfPendingChain *chain)
{
	BlockNumber spare = (BlockNumber) FbfWindowPageGetOpaque(BufferGetPage(chain->bufs[0]))->count;
	Buffer		buf;
	Buffer		tail = chain->bufs[chain->n - 1];
	FbfXLogState *state;
	Page		page;

	if (spare != 0)
		buf = FbfWindowReadPage(index, spare, BUFFER_LOCK_EXCLUSIVE, FBF_PAGE_ID_PENDING);
	else
		buf = FbfNewBuffer(index);

	state = FbfXLogStart(index);
	if (spare != 0)
	{
		Page		head = FbfXLogRegisterBuffer(state, chain->bufs[0], 0);

		page = FbfXLogRegisterBuffer(state, buf, 0);
		FbfWindowPageGetOpaque(head)->count = FbfWindowPageGetOpaque(page)->next;
		FbfWindowPageGetOpaque(page)->next = InvalidBlockNumber;
		FbfWindowPageSetEntryCount(page, 0);
		if (tail == chain->bufs[0])
			FbfWindowPageGetOpaque(head)->next = BufferGetBlockNumber(buf);
	}
	else
	{
		page = FbfXLogRegisterBuffer(state, buf, FBF_XLOG_FULL_IMAGE);
		FbfWindowInitPendingPage(page);
	}
	if (spare == 0 || tail != chain->bufs[0])
	{
		page = FbfXLogRegisterBuffer(state, tail, 0);
		FbfWindowPageGetOpaque(page)->next = BufferGetBlockNumber(buf);
	}
	FbfXLogFinish(state);

	chain->bufs[chain->n++] = buf;
}

/*
 * Entries on every pending chain (in flight, or awaiting their drain),
 * annexes not counted: operations.
 */
int64
FbfWindowPendingCount(Relation index, const FbfWindowMetaPageData *meta)
{
	int64		total = 0;
	uint32		c;

	/*
	 * Each chain is locked whole, head first, as a drain locks it: a page
	 * read after its predecessor was let go could have been unlinked
	 * meanwhile (FbfChainDrain moves empty overflow pages to the spare
	 * list), and its link would lead anywhere.
	 */
	for (c = 0; c < meta->nchains; c++)
	{
		FbfPendingChain chain;
		int			p;

		FbfChainLockMode(index, meta, c, BUFFER_LOCK_SHARE, &chain);
		for (p = 0; p < chain.n; p++)
		{
			int			n;
			FbfPendingEntry *entries =
				FbfWindowPageGetEntries(BufferGetPage(chain.bufs[p]), &n);
			int			i;

			for (i = 0; i < n; i++)
				total += !FbfEntryIsAnnex(&entries[i]);
		}
		FbfChainRelease(&chain);
	}
	return total;
}

/*
 * The floor of a locked chain: no entry on it is older.  Invalid if the
 * chain is empty, or if its head was written by 1.0 (which kept no floor).
 */
FullTransactionId
FbfChainFloor(FbfPendingChain *chain)
{
	return FullTransactionIdFromU64((uint64)
									FbfWindowPageGetOpaque(BufferGetPage(chain->bufs[0]))->stamp);
}

/* Store a locked chain's floor in its head, if it changed (one WAL record). */
void
FbfChainSetFloor(Relation index, FbfPendingChain *chain, FullTransactionId floor)
{
	FbfXLogState *state;
	Page		head;

	if (FullTransactionIdEquals(FbfChainFloor(chain), floor))
		return;
	state = FbfXLogStart(index);
	head = FbfXLogRegisterBuffer(state, chain->bufs[0], 0);
	FbfWindowPageGetOpaque(head)->stamp = (int64) U64FromFullTransactionId(floor);
	FbfXLogFinish(state);
}
