/*-------------------------------------------------------------------------
 *
 * window_apply.c
 *	  One operation against a counter's window: is it new, and if so,
 *	  record it as in flight for the current (sub)transaction; and the
 *	  same check alone, recording nothing and waiting for no one
 *	  (FbfWindowContains).
 *
 * The hot path of idempotent_increment.  Under the metapage's share lock
 * (the ring cannot change), the operation's pending chain is locked and
 * searched first (an entry there is decided by its xid's fate), then its
 * partition page, which holds every live filter's bits, is tested, and,
 * for an operation numbered in a stream, its stream page, whose exact
 * answer overrules the filter's where it has one (window_stream.c).  A new
 * operation is appended to the chain in one compact WAL record
 * (window_xlog.c), with its annex (its stream and seq) if it has a
 * stream.  Lock order: src/window/README.md, "Lock definitions"; no buffer
 * lock is held while waiting for another transaction.  Both functions
 * share the two lookups: the chain (in_chain) and the partition page, one
 * indirect call to the window's format (FbfFilterRoutine.contains,
 * window_format.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/fbf_xlog.h"
#include "access/transam.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/rel.h"

#include "window/window_format.h"
#include "window/window_int.h"
#include "window/window_xlog.h"

static bool in_chain(const FbfWindowMetaPageData *meta,
					 const FbfPendingChain *chain, const FbfHash *hash,
					 FullTransactionId *wait_for, Buffer *room, int need);

/*
 * Does the window remember the operation under an identity it had before
 * an upgrade (window_legacy.c)?  The frozen filters of a 1.0 window hold
 * operations under their 1.0 identity, and keyed operations 1.0 recorded
 * without their key may also have reached the partition pages from the
 * chains at the upgrade.
 */
static bool
in_legacy(Relation index, const FbfWindowMetaPageData *meta, int64 now,
		  const FbfHash *hash, const FbfHash *legacy_hash)
{
	if (now >= meta->legacy.until)
		return false;
	if (FbfLegacyContains(index, meta, hash))
		return true;
	if (legacy_hash == NULL || !meta->legacy.keyless)
		return false;
	return FbfLegacyContains(index, meta, legacy_hash) ||
		FbfFilterRoutineOf(meta)->contains(index, meta, legacy_hash, NULL);
}

/*
 * Does the window hold the operation under the identity it had before the
 * window had a key (window_key.c), the public hash of its bytes?  Its
 * chain is read first (share, and let go), then its partition page: an
 * entry a drain moves meanwhile is in the bits by the time they are read.
 * An entry in flight in another transaction sets *wait_for, as in_chain
 * does.  Entries under the public hash are never added once the window
 * has a key, so what is not found here is not recorded later.
 */
static bool
in_public(Relation index, const FbfWindowMetaPageData *meta,
		  const FbfHash *public_hash, FullTransactionId *wait_for)
{
	FbfPendingChain chain;
	bool		found;

	FbfChainLockMode(index, meta, FbfWindowChainOf(meta, public_hash),
					 BUFFER_LOCK_SHARE, &chain);
	found = in_chain(meta, &chain, public_hash, wait_for, NULL, 0);
	FbfChainRelease(&chain);
	if (found || FullTransactionIdIsValid(*wait_for))
		return found;
	return FbfFilterRoutineOf(meta)->contains(index, meta, public_hash, NULL);
}

/*
 * Is the operation on its locked pending chain?  True if an entry with its
 * hash was made by this transaction or by one that committed; entries of
 * aborted transactions are ignored.  Each page's entries with the hash are
 * found through the page's index (FbfPendingPageFind), not by reading
 * them all: a batch's own entries on the chain cost it nothing more for
 * each further operation.  If the first entry found is in flight
 * in another transaction, *wait_for is set to that transaction and false
 * returned: the caller decides whether to wait for it.  If `room` is not
 * NULL, it gets the first page of the chain with room for `need` entries
 * (an operation's, and its annex if it has one; InvalidBuffer if none).
 * Annexes are never found (FbfPendingPageFind).
 */
static bool
in_chain(const FbfWindowMetaPageData *meta, const FbfPendingChain *chain,
		 const FbfHash *hash, FullTransactionId *wait_for, Buffer *room,
		 int need)
{
	bool		found = false;
	int			c;
	int			i;
	int			n;

	*wait_for = InvalidFullTransactionId;
	if (room != NULL)
		*room = InvalidBuffer;
	for (c = 0; c < chain->n && !found && !FullTransactionIdIsValid(*wait_for); c++)
	{
		FbfPendingEntry *entries;
		int			pos[FBF_PENDING_CAPACITY];
		int			nfound;

		entries = FbfWindowPageGetEntries(BufferGetPage(chain->bufs[c]), &n);
		nfound = FbfPendingPageFind(chain->bufs[c], hash, pos);
		for (i = 0; i < nfound && !found && !FullTransactionIdIsValid(*wait_for); i++)
		{
			FullTransactionId fxid;

			fxid = FbfEntryFullXid(meta, &entries[pos[i]]);
			switch (FbfEntryStatusOf(fxid))
			{
				case FBF_ENTRY_OURS:
				case FBF_ENTRY_COMMITTED:
					found = true;
					break;
				case FBF_ENTRY_IN_PROGRESS:
					*wait_for = fxid;
					break;
				case FBF_ENTRY_ABORTED:
					break;
			}
		}
		if (room != NULL && n + need <= FBF_PENDING_CAPACITY &&
			!BufferIsValid(*room))
			*room = chain->bufs[c];
	}
	return found;
}

/* the operations on a locked chain: its entries but annexes */
static int
chain_operations(const FbfPendingChain *chain)
{
	int			nops = 0;
	int			c;

	for (c = 0; c < chain->n; c++)
	{
		int			n;
		FbfPendingEntry *entries =
			FbfWindowPageGetEntries(BufferGetPage(chain->bufs[c]), &n);
		int			i;

		for (i = 0; i < n; i++)
			nops += !FbfEntryIsAnnex(&entries[i]);
	}
	return nops;
}

/*
 * Must the window be refreshed (or brought up to date) before an operation
 * may use it?  When a refresh is due and the worker is late, when its
 * clock has no anchor on this boot, when it was written by 1.0, or when
 * it has no key yet (window_key.c).
 */
static bool
needs_refresh(const FbfWindowMetaPageData *meta, int64 now)
{
	if (meta->version != FBF_STORAGE_VERSION || FbfWindowClockStale(meta) ||
		!fbf_hash_key_is_set(&meta->key))
		return true;
	return now - meta->born_at[0] >= meta->period &&
		fbf_refresh_action(meta->nlive, meta->nfilters,
						   meta->born_at[meta->nlive - 2], now,
						   meta->retention) != FBF_REFRESH_POSTPONE;
}

/*
 * Decide whether the operation `op` is new, and if so record it as in
 * flight for the current (sub)transaction, under its hash (op->hash).
 *
 * Returns FBF_OP_DUPLICATE if a committed operation, or one of this
 * transaction's, has the same identity; waits for the applying transaction
 * if another one in progress has it, then decides again.  While the window
 * may still hold operations recorded before it had its key, or by 1.0
 * (legacy_until: op->keyless is the identity 1.0 gave the same operation),
 * the operation is also a duplicate if the window holds those identities.
 * `keying` is what the caller hashed `op` with (FbfWindowHashIdentity): if
 * the window's key or public lookups have changed since, nothing is done
 * and FBF_OP_REKEYED returned, for the caller to hash again.  The caller
 * holds RowExclusiveLock on the counter table.
 *
 * An operation numbered in a stream (op->has_stream, FbfWindowHashStream)
 * of a window that keeps streams is also asked of its stream page when
 * its chain does not hold it (FbfStreamCheck): where the stream knows the
 * seq, its answer is exact and overrules the filter's.  Recorded, such an
 * operation is followed on its pending page by its annex (window_page.h),
 * in the same WAL record, which its drain records in the stream.
 *
 * info->overfull is set when the operation's partition page shows the
 * window filling faster than its bits are for: the caller should then grow
 * it at once (FbfWindowGrow), before the filters saturate; info->answer
 * says who answered: the chain, the stream (overruling the filter or
 * not), or the filter (also for what a 1.0 window's frozen filters or the
 * public hash answer).
 *
 * Pages read: the metapage, the operation's chain (one page unless
 * transactions leave many operations in flight, or its entries wait for
 * the window to grow), its partition page, and its stream page if it has
 * one.  An operation that finds its
 * chain full of entries waiting for more bits grows the window itself
 * (FbfWindowGrowNow) before it records anything.
 */
FbfOpResult
FbfWindowApply(Relation index, const FbfWindowKeying *keying,
			   const FbfWindowOp *op, FbfApplyInfo *info)
{
	const FbfHash *hash = &op->hash;
	bool		refresh_tried = false;
	bool		may_defer = true;
	bool		grow = false;

	info->overfull = false;
	info->entries = 0;
	for (;;)
	{
		Buffer		metabuf;
		FbfWindowMetaPageData meta;
		FbfPendingChain chain;
		uint32		chainno;
		FullTransactionId wait_for = InvalidFullTransactionId;
		FullTransactionId fxid;
		FullTransactionId floor;
		bool		duplicate = false;
		bool		lane_full = false;
		bool		stream;
		bool		ask_stream;
		bool		exact = false;
		int			need;
		Buffer		room = InvalidBuffer;
		FbfPendingEntry entry;
		FbfPendingEntry annex;
		FbfWindowKeying current;
		XLogRecPtr	room_lsn;
		int			n;
		int			c;
		int64		now;

		info->answer = FBF_ANSWER_FILTER;
		metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_SHARE, &meta);
		now = FbfWindowNow(&meta);

		/* refresh first (once: a refresh may rightly be postponed) */
		if (!refresh_tried && needs_refresh(&meta, now))
		{
			UnlockReleaseBuffer(metabuf);
			FbfWindowRefresh(index);
			refresh_tried = true;
			continue;
		}

		/* a window not upgraded (refresh postponed on a standby...)? */
		if (meta.version != FBF_STORAGE_VERSION)
		{
			UnlockReleaseBuffer(metabuf);
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the filter \"%s\" has not been upgraded",
							RelationGetRelationName(index))));
		}

		/* hashed under the key the window has, asking what it must ask? */
		FbfWindowKeyingOf(&meta, now, &current);
		if (!FbfWindowKeysEqual(&current.key, &keying->key) ||
			(current.public_too && !op->has_public) ||
			(current.keyless_too && !keying->keyless_too))
		{
			UnlockReleaseBuffer(metabuf);
			return FBF_OP_REKEYED;
		}

		/* remembered from before an upgrade? */
		if (in_legacy(index, &meta, now,
					  op->has_public ? &op->public_hash : hash,
					  op->has_keyless ? &op->keyless : NULL))
		{
			UnlockReleaseBuffer(metabuf);
			return FBF_OP_DUPLICATE;
		}

		/* remembered from before the window had its key? */
		if (current.public_too &&
			(in_public(index, &meta, &op->public_hash, &wait_for) ||
			 FullTransactionIdIsValid(wait_for)))
		{
			UnlockReleaseBuffer(metabuf);
			if (!FullTransactionIdIsValid(wait_for))
				return FBF_OP_DUPLICATE;
			XactLockTableWait(XidFromFullTransactionId(wait_for), NULL, NULL,
							  XLTW_None);
			continue;
		}

		/*
		 * Numbered in a stream the window keeps?  Only under its own key
		 * (the caller hashed under it: checked above) and with stream
		 * pages; the operation then takes two entries, its own and its
		 * annex.  Its stream is asked only once the public hash is not:
		 * until then the window may hold operations recorded before it
		 * had its key, which no stream knows.  Recorded meanwhile all the
		 * same, so that every operation drained under the key is known
		 * to its stream when the public lookups end (a stream's "new"
		 * must be proven: core/fbf_stream.h).
		 */
		stream = op->has_stream && meta.stream_pages > 0 &&
			fbf_hash_key_is_set(&meta.key);
		ask_stream = stream && !current.public_too;
		need = stream ? 2 : 1;

		chainno = FbfWindowChainOf(&meta, hash);
		FbfChainLock(index, &meta, chainno, &chain);

		/* entries this old must be drained before the commit log forgets */
		floor = FbfChainFloor(&chain);
		if (FullTransactionIdIsValid(floor) &&
			U64FromFullTransactionId(ReadNextFullTransactionId()) -
			U64FromFullTransactionId(floor) > FBF_PENDING_DRAIN_AGE)
			FbfChainDrain(index, &meta, &chain, false, &grow);

		/* in flight, or applied recently and not yet drained? */
		duplicate = in_chain(&meta, &chain, hash, &wait_for, &room, need);
		if (FullTransactionIdIsValid(wait_for))
		{
			FbfChainRelease(&chain);
			UnlockReleaseBuffer(metabuf);
			XactLockTableWait(XidFromFullTransactionId(wait_for), NULL, NULL,
							  XLTW_None);
			continue;
		}
		if (duplicate)
		{
			FbfChainRelease(&chain);
			UnlockReleaseBuffer(metabuf);
			info->answer = FBF_ANSWER_CHAIN;
			return FBF_OP_DUPLICATE;
		}

		/* applied earlier and drained into the window? */
		duplicate = FbfFilterRoutineOf(&meta)->contains(index, &meta, hash, &lane_full);

		/*
		 * Its stream answers exactly where it knows (core/fbf_stream.h):
		 * "new" even where the filter says "seen" (a false dismissal
		 * averted), "seen"; else the filter's answer stands.  Exact
		 * because the operation's chain is held: its own entry would have
		 * been found on it, or was drained, and a drain records an
		 * operation in its stream before it leaves the chain
		 * (window_pending.c).
		 */
		if (ask_stream)
		{
			switch (FbfStreamCheck(index, &meta, op->stream, op->seq, now))
			{
				case FBF_STREAM_NEW:
					info->answer = duplicate ? FBF_ANSWER_STREAM_OVERRULED :
						FBF_ANSWER_STREAM;
					duplicate = false;
					exact = true;
					break;
				case FBF_STREAM_SEEN:
					info->answer = FBF_ANSWER_STREAM;
					duplicate = true;
					exact = true;
					break;
				case FBF_STREAM_ASK:
					break;
			}
		}

		/*
		 * At its cap, the filters answer "seen" for new operations at their
		 * estimated false-positive rate.  A counter that asked for it
		 * refuses what neither the pending chain nor a stream (exact) can
		 * answer, so that the client retries later rather than losing the
		 * operation.
		 */
		if (!exact && (meta.flags & FBF_META_CAPPED) != 0 &&
			FbfWindowGetOptions(index)->at_capacity == FBF_AT_CAPACITY_REFUSE)
		{
			FbfChainRelease(&chain);
			UnlockReleaseBuffer(metabuf);
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("counter filter \"%s\" is at its capacity",
							RelationGetRelationName(index)),
					 errdetail("Its estimated false-positive rate is above its target and fbf.max_filter_size does not let it grow; the counter's option at_capacity is \"refuse\"."),
					 errhint("Retry the operation later, raise fbf.max_filter_size, or set at_capacity to \"dismiss\".")));
		}

		if (duplicate)
		{
			FbfChainRelease(&chain);
			UnlockReleaseBuffer(metabuf);
			return FBF_OP_DUPLICATE;
		}

		/*
		 * New: record it as in flight.  If the chain is full, drain what has
		 * been decided; if that frees nothing, add an overflow page.
		 */
		if (!BufferIsValid(room) && FbfChainDrain(index, &meta, &chain, may_defer, &grow) > 0)
		{
			for (c = 0; c < chain.n && !BufferIsValid(room); c++)
			{
				FbfWindowPageGetEntries(BufferGetPage(chain.bufs[c]), &n);
				if (n + need <= FBF_PENDING_CAPACITY)
					room = chain.bufs[c];
			}
		}
		if (!BufferIsValid(room))
		{
			if (chain.n == FBF_MAX_PENDING_PAGES && may_defer && grow)
			{
				/*
				 * Full of entries that wait for more bits (the drain put
				 * them off): grow the window now and try again.  At its
				 * cap, a counter that refuses what it cannot take refuses
				 * this operation: the entries wait for the next refresh's
				 * empty future filter, as its shares planned (poured into
				 * the bits there are, they would stay until their filters
				 * age out).  Otherwise they are drained into those bits.
				 */
				FbfChainRelease(&chain);
				UnlockReleaseBuffer(metabuf);
				grow = false;
				if (FbfWindowGrowNow(index) == FBF_GROWTH_NONE)
				{
					if (FbfWindowPartsAtCap(&meta) <= meta.nparts &&
						FbfWindowGetOptions(index)->at_capacity == FBF_AT_CAPACITY_REFUSE)
						ereport(ERROR,
								(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
								 errmsg("counter filter \"%s\" is at its capacity",
										RelationGetRelationName(index)),
								 errdetail("One of its partitions has more operations of this period than its filters take under the target; they wait for the next period's filter."),
								 errhint("Retry the operation in a later period, or raise fbf.max_filter_size.")));
					may_defer = false;
				}
				CHECK_FOR_INTERRUPTS();
				continue;
			}
			if (chain.n == FBF_MAX_PENDING_PAGES)
			{
				int			nops = chain_operations(&chain);

				FbfChainRelease(&chain);
				UnlockReleaseBuffer(metabuf);
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
						 errmsg("too many operations in flight on counter filter \"%s\"",
								RelationGetRelationName(index)),
						 errdetail("%d operations of open transactions are waiting to commit in one partition.",
								   nops),
						 errhint("Commit or roll back the transactions that increment this counter, or split large batches into several transactions.")));
			}
			FbfChainExtend(index, &chain);
			room = chain.bufs[chain.n - 1];
		}

		/*
		 * Append (xid, hash), and its annex (stream, seq) after it,
		 * lowering the chain's floor in the same record when the entry
		 * goes to the head, else in one of its own.
		 */
		fxid = GetCurrentFullTransactionId();
		floor = FbfChainFloor(&chain);
		room_lsn = PageGetLSN(BufferGetPage(room));
		entry.xid = XidFromFullTransactionId(fxid);
		entry.epoch = EpochFromFullTransactionId(fxid);
		entry.h1 = hash->h1;
		entry.h2 = hash->h2;
		if (stream)
			annex = FbfPendingAnnex(op->stream, op->seq);
		if (!FullTransactionIdIsValid(floor) || FullTransactionIdPrecedes(fxid, floor))
		{
			if (room == chain.bufs[0])
				FbfPendingLogAdd(index, room, &entry, stream ? &annex : NULL,
								 true);
			else
			{
				FbfPendingLogAdd(index, room, &entry, stream ? &annex : NULL,
								 false);
				FbfChainSetFloor(index, &chain, fxid);
			}
		}
		else
			FbfPendingLogAdd(index, room, &entry, stream ? &annex : NULL,
							 false);
		FbfPendingPageNoteAdd(room, room_lsn);

		FbfChainRelease(&chain);
		info->entries = need;
		FbfWindowCapacityOf(&meta, &info->capacity);
		UnlockReleaseBuffer(metabuf);
		/* a new operation: does the window need more bits for its rate? */
		info->overfull = lane_full || grow;
		return FBF_OP_APPLIED;
	}
}

/*
 * Does the window hold `hash`, as FbfWindowApply would find it, without
 * recording anything and without waiting?  For identities a caller only
 * looks up: a counter's delta identities (src/counter/README.md, "Retries
 * that do not match").
 *
 * An entry in flight in another transaction counts as held (its fate is
 * not known, and it is not waited for); an aborted one does not.  Neither
 * a refresh nor a drain is done here, and the filters of a 1.0 window are
 * not asked (nothing was recorded under such identities before 1.1).
 * Locks: the metapage share, the chain share, the partition page share,
 * in the order of src/window/README.md, "Lock definitions".
 */
bool
FbfWindowContains(Relation index, const FbfHash *hash)
{
	Buffer		metabuf;
	FbfWindowMetaPageData meta;
	FbfPendingChain chain;
	FullTransactionId wait_for;
	bool		found;

	metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_SHARE, &meta);
	if (meta.version != FBF_STORAGE_VERSION)
	{
		/* not upgraded yet: nothing can have been recorded for it */
		UnlockReleaseBuffer(metabuf);
		return false;
	}
	FbfChainLockMode(index, &meta, FbfWindowChainOf(&meta, hash),
					 BUFFER_LOCK_SHARE, &chain);
	found = in_chain(&meta, &chain, hash, &wait_for, NULL, 0) ||
		FullTransactionIdIsValid(wait_for) ||
		FbfFilterRoutineOf(&meta)->contains(index, &meta, hash, NULL);
	FbfChainRelease(&chain);
	UnlockReleaseBuffer(metabuf);
	return found;
}
