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
 * One operation on its way through FbfWindowApply's steps: what they hold
 * (the metapage, share-locked; from ask_chain on, the operation's chain)
 * and what they learn.  The last three members outlive a try: a step that
 * let go of its locks to refresh, grow or wait makes the driver start
 * over.
 */
typedef struct ApplyState
{
	Relation	index;
	const FbfWindowOp *op;
	Buffer		metabuf;
	FbfWindowMetaPageData meta;
	int64		now;
	bool		public_too;		/* the window asks the public hash too */
	FbfPendingChain chain;
	bool		stream;			/* recorded with its annex (its stream) */
	bool		ask_stream;		/* and its stream asked */
	int			need;			/* entries it takes on the chain */
	Buffer		room;			/* the chain page it goes to */
	bool		lane_full;		/* its partition page asks for more bits */
	FbfOpResult result;			/* STEP_DONE: the answer */
	bool		refresh_tried;	/* once: a refresh may rightly be postponed */
	bool		may_defer;		/* drains may put entries off */
	bool		grow;			/* a drain put entries off: grow */
} ApplyState;

/* What a step of FbfWindowApply decided. */
typedef enum ApplyStep
{
	STEP_ON,					/* locks held: on to the next step */
	STEP_AGAIN,					/* locks let go: try again from the start */
	STEP_DONE					/* locks let go: the answer is st->result */
} ApplyStep;

/* Let go of the chain (if `chain`) and the metapage. */
static void
release(ApplyState *st, bool chain)
{
	if (chain)
		FbfChainRelease(&st->chain);
	UnlockReleaseBuffer(st->metabuf);
}

/* Done, locks let go (the chain if `chain`), with answer `result`. */
static ApplyStep
done(ApplyState *st, bool chain, FbfOpResult result)
{
	release(st, chain);
	st->result = result;
	return STEP_DONE;
}

/* Wait, locks let go (the chain if `chain`), for `xid` to end. */
static ApplyStep
wait_for_xact(ApplyState *st, bool chain, FullTransactionId xid)
{
	release(st, chain);
	XactLockTableWait(XidFromFullTransactionId(xid), NULL, NULL, XLTW_None);
	return STEP_AGAIN;
}

/*
 * Step 1: share-lock the metapage; refresh the window first if it is due
 * (needs_refresh); refuse a window not upgraded; FBF_OP_REKEYED if the
 * operation was not hashed as the window hashes now (window_key.c): under
 * another key, or without an identity the window still asks (under the
 * public hash, or the fixed key it gave up, whichever it asks now; 1.0's).
 * A keying that asks more than the window does is no error (the extra
 * lookups are not made), but the caller is told to read it again.
 */
static ApplyStep
open_window(ApplyState *st, const FbfWindowKeying *keying,
			FbfApplyInfo *info)
{
	FbfWindowKeying current;

	st->metabuf = FbfWindowLockMeta(st->index, BUFFER_LOCK_SHARE, &st->meta);
	st->now = FbfWindowNow(&st->meta);
	if (!st->refresh_tried && needs_refresh(&st->meta, st->now))
	{
		UnlockReleaseBuffer(st->metabuf);
		FbfWindowRefresh(st->index);
		st->refresh_tried = true;
		return STEP_AGAIN;
	}

	/* a window not upgraded (refresh postponed on a standby...)? */
	if (st->meta.version != FBF_STORAGE_VERSION)
	{
		release(st, false);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the filter \"%s\" has not been upgraded",
						RelationGetRelationName(st->index))));
	}

	FbfWindowKeyingOf(&st->meta, st->now, &current);
	if (!FbfWindowKeysEqual(&current.key, &keying->key) ||
		(current.public_too &&
		 (!st->op->has_public ||
		  !FbfWindowKeysEqual(&current.public_key, &keying->public_key))) ||
		(current.keyless_too && !keying->keyless_too))
		return done(st, false, FBF_OP_REKEYED);
	st->public_too = current.public_too;
	info->stale_keying = current.public_too != keying->public_too ||
		current.keyless_too != keying->keyless_too;
	return STEP_ON;
}

/*
 * Step 2: does the window remember the operation under an identity it had
 * before an upgrade (in_legacy) or before it had its key (in_public)?
 */
static ApplyStep
ask_earlier_identities(ApplyState *st)
{
	const FbfWindowOp *op = st->op;
	FullTransactionId wait_for = InvalidFullTransactionId;

	if (in_legacy(st->index, &st->meta, st->now,
				  op->has_public ? &op->public_hash : &op->hash,
				  op->has_keyless ? &op->keyless : NULL))
		return done(st, false, FBF_OP_DUPLICATE);
	if (!st->public_too)
		return STEP_ON;
	if (in_public(st->index, &st->meta, &op->public_hash, &wait_for))
		return done(st, false, FBF_OP_DUPLICATE);
	if (FullTransactionIdIsValid(wait_for))
		return wait_for_xact(st, false, wait_for);
	return STEP_ON;
}

/*
 * Step 3: lock the operation's pending chain (draining it first if its
 * oldest entry is old enough that the commit log may forget it) and look
 * for the operation there: in flight in another transaction (wait for it),
 * or recorded by this one or a committed one (a duplicate, answered
 * exactly).
 *
 * Numbered in a stream the window keeps, the operation takes two entries,
 * its own and its annex: only under the window's own key (open_window
 * checked the caller hashed under it) and with stream pages.  Its stream
 * is asked only once the public hash is not: until then the window may
 * hold operations recorded before it had its key, which no stream knows.
 * Recorded meanwhile all the same, so that every operation drained under
 * the key is known to its stream when the public lookups end (a stream's
 * "new" must be proven: core/fbf_stream.h).
 */
static ApplyStep
ask_chain(ApplyState *st, FbfApplyInfo *info)
{
	FullTransactionId wait_for;
	FullTransactionId floor;

	st->stream = st->op->has_stream && st->meta.stream_pages > 0 &&
		fbf_hash_key_is_set(&st->meta.key);
	st->ask_stream = st->stream && !st->public_too;
	st->need = st->stream ? 2 : 1;

	FbfChainLock(st->index, &st->meta,
				 FbfWindowChainOf(&st->meta, &st->op->hash), &st->chain);
	floor = FbfChainFloor(&st->chain);
	if (FullTransactionIdIsValid(floor) &&
		U64FromFullTransactionId(ReadNextFullTransactionId()) -
		U64FromFullTransactionId(floor) > FBF_PENDING_DRAIN_AGE)
		FbfChainDrain(st->index, &st->meta, &st->chain, false, &st->grow);

	if (in_chain(&st->meta, &st->chain, &st->op->hash, &wait_for, &st->room,
				 st->need))
	{
		info->answer = FBF_ANSWER_CHAIN;
		return done(st, true, FBF_OP_DUPLICATE);
	}
	if (FullTransactionIdIsValid(wait_for))
		return wait_for_xact(st, true, wait_for);
	return STEP_ON;
}

/*
 * Step 4: applied earlier and drained into the window?  The filter answers
 * (its partition page), and the operation's stream overrules it where it
 * knows the seq (core/fbf_stream.h): "new" even where the filter says
 * "seen" (a false dismissal averted), or "seen".  Exact because the
 * operation's chain is held: its own entry would have been found on it,
 * or was drained, and a drain records an operation in its stream before
 * it leaves the chain (window_pending.c).
 *
 * At its cap, the filters answer "seen" for new operations at their
 * estimated false-positive rate.  A counter that asked for it refuses what
 * neither the pending chain nor a stream (exact) can answer, so that the
 * client retries later rather than losing the operation.
 */
static ApplyStep
ask_bits(ApplyState *st, FbfApplyInfo *info)
{
	bool		duplicate;
	bool		exact = false;

	st->lane_full = false;
	duplicate = FbfFilterRoutineOf(&st->meta)->contains(st->index, &st->meta,
														&st->op->hash,
														&st->lane_full);
	if (st->ask_stream)
	{
		switch (FbfStreamCheck(st->index, &st->meta, st->op->stream,
							   st->op->seq, st->now))
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

	if (!exact && (st->meta.flags & FBF_META_CAPPED) != 0 &&
		FbfWindowGetOptions(st->index)->at_capacity == FBF_AT_CAPACITY_REFUSE)
	{
		release(st, true);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("counter filter \"%s\" is at its capacity",
						RelationGetRelationName(st->index)),
				 errdetail("Its estimated false-positive rate is above its target and fbf.max_filter_size does not let it grow; the counter's option at_capacity is \"refuse\"."),
				 errhint("Retry the operation later, raise fbf.max_filter_size, or set at_capacity to \"dismiss\".")));
	}
	if (duplicate)
		return done(st, true, FBF_OP_DUPLICATE);
	return STEP_ON;
}

/*
 * Step 5: a page of the chain with room for the new operation's entries.
 * If the chain is full, drain what has been decided; if that frees
 * nothing, add an overflow page, up to FBF_MAX_PENDING_PAGES.
 *
 * A chain full of entries that wait for more bits (the drain put them
 * off) grows the window now and tries again.  At its cap, a counter that
 * refuses what it cannot take refuses this operation: the entries wait for
 * the next refresh's empty future filter, as its shares planned (poured
 * into the bits there are, they would stay until their filters age out).
 * Otherwise they are drained into those bits.
 */
static ApplyStep
find_room(ApplyState *st)
{
	FbfPendingChain *chain = &st->chain;
	int			c;
	int			n;

	if (!BufferIsValid(st->room) &&
		FbfChainDrain(st->index, &st->meta, chain, st->may_defer, &st->grow) > 0)
	{
		for (c = 0; c < chain->n && !BufferIsValid(st->room); c++)
		{
			FbfWindowPageGetEntries(BufferGetPage(chain->bufs[c]), &n);
			if (n + st->need <= FBF_PENDING_CAPACITY)
				st->room = chain->bufs[c];
		}
	}
	if (BufferIsValid(st->room))
		return STEP_ON;

	if (chain->n == FBF_MAX_PENDING_PAGES && st->may_defer && st->grow)
	{
		release(st, true);
		st->grow = false;
		if (FbfWindowGrowNow(st->index) == FBF_GROWTH_NONE)
		{
			if (FbfWindowPartsAtCap(&st->meta) <= st->meta.nparts &&
				FbfWindowGetOptions(st->index)->at_capacity == FBF_AT_CAPACITY_REFUSE)
				ereport(ERROR,
						(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
						 errmsg("counter filter \"%s\" is at its capacity",
								RelationGetRelationName(st->index)),
						 errdetail("One of its partitions has more operations of this period than its filters take under the target; they wait for the next period's filter."),
						 errhint("Retry the operation in a later period, or raise fbf.max_filter_size.")));
			st->may_defer = false;
		}
		CHECK_FOR_INTERRUPTS();
		return STEP_AGAIN;
	}
	if (chain->n == FBF_MAX_PENDING_PAGES)
	{
		int			nops = chain_operations(chain);

		release(st, true);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("too many operations in flight on counter filter \"%s\"",
						RelationGetRelationName(st->index)),
				 errdetail("%d operations of open transactions are waiting to commit in one partition.",
						   nops),
				 errhint("Commit or roll back the transactions that increment this counter, or split large batches into several transactions.")));
	}
	FbfChainExtend(st->index, chain);
	st->room = chain->bufs[chain->n - 1];
	return STEP_ON;
}

/*
 * Step 6: record the new operation in flight for the current
 * (sub)transaction: append (xid, hash), and its annex (stream, seq) after
 * it, lowering the chain's floor in the same record when the entry goes to
 * the head, else in one of its own; then let go of every lock.
 */
static void
record_operation(ApplyState *st, FbfApplyInfo *info)
{
	FullTransactionId fxid = GetCurrentFullTransactionId();
	FullTransactionId floor = FbfChainFloor(&st->chain);
	XLogRecPtr	room_lsn = PageGetLSN(BufferGetPage(st->room));
	bool		lowers = !FullTransactionIdIsValid(floor) ||
		FullTransactionIdPrecedes(fxid, floor);
	bool		at_head = st->room == st->chain.bufs[0];
	FbfPendingEntry entry;
	FbfPendingEntry annex;

	entry.xid = XidFromFullTransactionId(fxid);
	entry.epoch = EpochFromFullTransactionId(fxid);
	entry.h1 = st->op->hash.h1;
	entry.h2 = st->op->hash.h2;
	if (st->stream)
		annex = FbfPendingAnnex(st->op->stream, st->op->seq);
	FbfPendingLogAdd(st->index, st->room, &entry, st->stream ? &annex : NULL,
					 lowers && at_head);
	if (lowers && !at_head)
		FbfChainSetFloor(st->index, &st->chain, fxid);
	FbfPendingPageNoteAdd(st->room, room_lsn);

	info->entries = st->need;
	FbfWindowCapacityOf(&st->meta, &info->capacity);
	release(st, true);
	/* a new operation: does the window need more bits for its rate? */
	info->overfull = st->lane_full || st->grow;
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
 * `keying` is what the caller hashed `op` with (FbfWindowHashOperation): if
 * the window's key or public lookups have changed since, nothing is done
 * and FBF_OP_REKEYED returned, for the caller to hash again.  The caller
 * holds RowExclusiveLock on the counter table.
 *
 * An operation numbered in a stream (op->has_stream) of a window that
 * keeps streams is also asked of its stream page when its chain does not
 * hold it (FbfStreamCheck): where the stream knows the seq, its answer is
 * exact and overrules the filter's.  Recorded, such an operation is
 * followed on its pending page by its annex (window_page.h), in the same
 * WAL record, which its drain records in the stream.
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
 * one.  An operation that finds its chain full of entries waiting for
 * more bits grows the window itself (FbfWindowGrowNow) before it records
 * anything.
 *
 * Like _hash_doinsert, a short driver over named steps, each of which
 * either goes on holding its locks, or lets go of them and says to start
 * over (after a refresh, a growth or a wait) or what the answer is:
 * open_window, ask_earlier_identities, ask_chain, ask_bits, find_room,
 * record_operation.
 */
FbfOpResult
FbfWindowApply(Relation index, const FbfWindowKeying *keying,
			   const FbfWindowOp *op, FbfApplyInfo *info)
{
	ApplyState	st = {0};

	st.index = index;
	st.op = op;
	st.may_defer = true;
	info->overfull = false;
	info->stale_keying = false;
	info->entries = 0;
	for (;;)
	{
		ApplyStep	step;

		info->answer = FBF_ANSWER_FILTER;
		step = open_window(&st, keying, info);
		if (step == STEP_ON)
			step = ask_earlier_identities(&st);
		if (step == STEP_ON)
			step = ask_chain(&st, info);
		if (step == STEP_ON)
			step = ask_bits(&st, info);
		if (step == STEP_ON)
			step = find_room(&st);
		if (step == STEP_DONE)
			return st.result;
		if (step == STEP_ON)
		{
			record_operation(&st, info);
			return FBF_OP_APPLIED;
		}
		/* STEP_AGAIN: locks let go to refresh, grow or wait; ask again */
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
