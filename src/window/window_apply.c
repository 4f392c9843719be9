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
 * A call of many operations (a batch) keeps its locks from one operation
 * to the next in an FbfWindowHold: the metapage, and the chain while its
 * operations follow one another (their canonical order puts them together:
 * counter_op.c), indexed whole once it is long (window_chain_index.c).
 * So each operation costs the same whatever the batch's size, where it
 * would otherwise lock and search every page its predecessors filled.  A
 * hold lets go before any wait, refresh or growth, and after
 * HOLD_MAX_OPS operations, so that a cancel (held off while buffer locks
 * are held) is honoured within a short run.
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

/* entries an operation takes on its chain at most: its own and its annex */
#define FBF_NEED_MAX			2

static bool in_chain(const FbfWindowMetaPageData *meta,
					 const FbfPendingChain *chain, const FbfChainIndex *cix,
					 const FbfHash *hash, FullTransactionId *wait_for);

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
	found = in_chain(meta, &chain, NULL, public_hash, wait_for);
	FbfChainRelease(&chain);
	if (found || FullTransactionIdIsValid(*wait_for))
		return found;
	return FbfFilterRoutineOf(meta)->contains(index, meta, public_hash, NULL);
}

/*
 * What one entry with the operation's hash says (in_chain): found if made
 * by this transaction or by one that committed, *wait_for set if in
 * flight in another; nothing if aborted (false, *wait_for left invalid).
 */
static bool
entry_says(const FbfWindowMetaPageData *meta, const FbfPendingEntry *entry,
		   FullTransactionId *wait_for)
{
	FullTransactionId fxid = FbfEntryFullXid(meta, entry);

	switch (FbfEntryStatusOf(fxid))
	{
		case FBF_ENTRY_OURS:
		case FBF_ENTRY_COMMITTED:
			return true;
		case FBF_ENTRY_IN_PROGRESS:
			*wait_for = fxid;
			return false;
		case FBF_ENTRY_ABORTED:
			break;
	}
	return false;
}

/*
 * Is the operation on its locked pending chain?  True if an entry with its
 * hash was made by this transaction or by one that committed; entries of
 * aborted transactions are ignored.  The entries with the hash are found
 * through the chain's index if the caller's run has built one (`cix`,
 * window_chain_index.c), else through each page's (FbfPendingPageFind),
 * not by reading them all, and the first in chain order that is not
 * aborted decides: if it is in flight in another transaction, *wait_for is
 * set to that transaction and false returned, for the caller to decide
 * whether to wait for it.  Annexes are never found.
 */
static bool
in_chain(const FbfWindowMetaPageData *meta, const FbfPendingChain *chain,
		 const FbfChainIndex *cix, const FbfHash *hash,
		 FullTransactionId *wait_for)
{
	int			c;
	int			i;

	*wait_for = InvalidFullTransactionId;
	if (cix != NULL && cix->valid)
	{
		FbfChainIndexScan scan;
		int			first_page = -1;
		int			first_pos = -1;
		bool		found = false;
		int			page;
		int			pos;

		/* the scan finds them in any order: the first not aborted decides */
		FbfChainIndexScanBegin(&scan, cix, chain, hash);
		while (FbfChainIndexNext(&scan, &page, &pos))
		{
			int			n;
			FbfPendingEntry *entries =
				FbfWindowPageGetEntries(BufferGetPage(chain->bufs[page]), &n);
			FullTransactionId in_flight = InvalidFullTransactionId;
			bool		says;

			if (first_page >= 0 &&
				(page > first_page || (page == first_page && pos > first_pos)))
				continue;
			says = entry_says(meta, &entries[pos], &in_flight);
			if (says || FullTransactionIdIsValid(in_flight))
			{
				first_page = page;
				first_pos = pos;
				found = says;
				*wait_for = in_flight;
			}
		}
		return found;
	}

	for (c = 0; c < chain->n; c++)
	{
		FbfPendingEntry *entries;
		int			pos[FBF_PENDING_CAPACITY];
		int			nfound;
		int			n;

		entries = FbfWindowPageGetEntries(BufferGetPage(chain->bufs[c]), &n);
		nfound = FbfPendingPageFind(chain->bufs[c], hash, pos);
		for (i = 0; i < nfound; i++)
		{
			if (entry_says(meta, &entries[pos[i]], wait_for))
				return true;
			if (FullTransactionIdIsValid(*wait_for))
				return false;
		}
	}
	return false;
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
	return FbfWindowRotationDue(meta, now);
}

/*
 * Operations a hold lets one lock of the metapage serve: a run of this
 * many takes a few milliseconds, for which a cancel waits (interrupts are
 * held off while buffer locks are held).
 */
#define HOLD_MAX_OPS			4096

/*
 * When a run indexes its chain whole (window_chain_index.c): from its
 * HOLD_INDEX_MIN_OPS-th operation on the chain, if the chain has
 * HOLD_INDEX_MIN_PAGES pages or more.  Until then it is searched page by
 * page, each page's index kept for the transaction (FbfPendingPageFind),
 * as a single operation searches it: a build reads every entry of the
 * chain, which a few look-ups do not repay (a call of a few operations on
 * each of many long chains), and a long run repays at once.
 */
#define HOLD_INDEX_MIN_OPS		32
#define HOLD_INDEX_MIN_PAGES	4

/*
 * The reserve.  A pending chain's last fifth of pages (FBF_RESERVE_FROM,
 * window_page.h) is its reserve: an operation whose caller did not allow
 * it (FbfWindowApply's `reserve`) takes no room there and extends the
 * chain no further (FBF_OP_RESERVED), so that a unit whose flood fills
 * the chains, with its operations in flight or with entries that wait for
 * the next period's bits, leaves room to the others (the caller asks its
 * shares whose operation may take it: counter/counter_engine.c).  A
 * caller that allows it only while the window can grow (FBF_RESERVE_GROW:
 * a unit alone) has the window grown there for entries that wait for
 * bits, as a full chain would, and gets FBF_OP_RESERVED for them at the
 * cap.  What an operation took of the
 * reserve is told to the caller (FbfApplyInfo.on_reserve), whose shares
 * count it.
 */

/*
 * The locks FbfWindowApply (or FbfWindowContains) holds for an operation,
 * kept from one to the next by a caller that passes the same hold to each
 * (FbfWindowHoldCreate):
 * the metapage share-locked, and the chain of the last operation with, once
 * a long run asks it and it is long, its index.  A caller that
 * passes none gets one for the operation alone.
 */
struct FbfWindowHold
{
	Relation	index;
	bool		keep;			/* a caller's: kept between operations */
	bool		meta_held;
	Buffer		metabuf;
	FbfWindowMetaPageData meta;
	int			asked;			/* operations since the metapage was locked */
	bool		chain_held;
	uint32		chainno;
	int			on_chain;		/* operations that asked the held chain */
	bool		drained;		/* the held chain was drained since locked */
	FbfStored	put_off;		/* and what that drain put entries off for */
	int			room_from[FBF_NEED_MAX];	/* chain_room's hints */
	FbfChainIndex cix;
	int			npend;			/* entries appended in memory, not yet on */
	int			pend_page;		/* this page of the chain (in_pend) */
	bool		pend_floor;		/* and the chain's new floor with them */
	bool		refresh_asked;	/* a refresh was asked for (open_window) */
	int64		refresh_born;	/* while the future was born then */
	/* last: an operation alone zeroes the rest, and appends at once */
	FbfPendingChain chain;
	FbfPendingEntry pend[FBF_PENDING_CAPACITY];
};

/*
 * Append the entries the hold's run has kept in memory to their page, in
 * one WAL record (FbfPendingLogAdds; one operation's, as PENDING_ADD), and
 * note them in the chain's index.  A run keeps what it appends to one page
 * in memory while it holds the chain: no one else can read the chain
 * meanwhile, and its own later operations never look for them (a call's
 * operations are distinct but for repeats, which the engine dismisses
 * without asking: counter_engine.c).  Done before the chain is let go,
 * drained or extended, before the run appends to another page, and before
 * a look-up with the hold (FbfWindowContains: a repeat's delta identity
 * is looked for); an error before then aborts the transaction whose
 * entries they are.
 */
static void
flush_pending(FbfWindowHold *h)
{
	Buffer		buf;
	int			from;

	if (h->npend == 0)
		return;
	buf = h->chain.bufs[h->pend_page];
	FbfWindowPageGetEntries(BufferGetPage(buf), &from);
	if (h->npend == 1 || (h->npend == 2 && FbfEntryIsAnnex(&h->pend[1])))
	{
		XLogRecPtr	lsn = PageGetLSN(BufferGetPage(buf));

		FbfPendingLogAdd(h->index, buf, &h->pend[0],
						 h->npend == 2 ? &h->pend[1] : NULL, h->pend_floor);
		if (!h->cix.valid)
			FbfPendingPageNoteAdd(buf, lsn);
	}
	else
		FbfPendingLogAdds(h->index, buf, h->pend, h->npend, h->pend_floor);
	if (h->cix.valid)
		FbfChainIndexNoteAdds(&h->cix, &h->chain, h->pend_page, from);
	h->npend = 0;
	h->pend_floor = false;
}

/* Let go of the hold's chain, if it holds one. */
static void
let_go_chain(FbfWindowHold *h)
{
	if (!h->chain_held)
		return;
	flush_pending(h);
	FbfChainRelease(&h->chain);
	FbfChainIndexReset(&h->cix);
	h->chain_held = false;
	h->on_chain = 0;
	h->drained = false;
	h->put_off = FBF_STORED_ALL;
	memset(h->room_from, 0, sizeof(h->room_from));
}

/*
 * Drain the held chain (FbfChainDrain); if that changed its entries (it
 * removed some, or unlinked a page), its index and its full pages are to
 * be found again.  Returns the entries removed; *grow set if it put
 * entries off for want of bits (the hold remembers what it put them off
 * for while it holds the chain).
 */
static int
drain_held(FbfWindowHold *h, bool may_defer, bool *grow)
{
	int			npages;
	int			removed;
	FbfStored	put_off = FBF_STORED_ALL;

	flush_pending(h);
	npages = h->chain.n;
	removed = FbfChainDrain(h->index, &h->meta, &h->chain, may_defer,
							&put_off);
	h->drained = true;
	h->put_off = put_off;
	if (put_off == FBF_STORED_GROW)
		*grow = true;
	if (removed > 0 || h->chain.n != npages)
	{
		FbfChainIndexReset(&h->cix);
		memset(h->room_from, 0, sizeof(h->room_from));
	}
	return removed;
}

/*
 * A hold for the operations of one call on `index` (FbfWindowApply), in
 * the current memory context.
 */
FbfWindowHold *
FbfWindowHoldCreate(Relation index)
{
	FbfWindowHold *h = palloc0(sizeof(FbfWindowHold));

	h->index = index;
	h->keep = true;
	h->cix.cxt = CurrentMemoryContext;
	return h;
}

/*
 * Let go of every lock the hold keeps: before the caller does anything
 * else with the window (a growth) or anything long without it, and when
 * its call is done.
 */
void
FbfWindowLetGo(FbfWindowHold *hold)
{
	let_go_chain(hold);
	if (hold->meta_held)
		UnlockReleaseBuffer(hold->metabuf);
	hold->meta_held = false;
	hold->asked = 0;
}

/*
 * The first page of a locked chain with room for `need` entries (an
 * operation's, 1, and its annex if it has one, 2); -1 if none.  The search
 * starts at from[need - 1] and moves it past the pages found without that
 * room: pages only fill up while the chain is held, so a run that holds it
 * need not read them again until it drains it (FBF_NEED_MAX hints).
 */
static int
chain_room(const FbfWindowHold *h, int need, int *from)
{
	const FbfPendingChain *chain = &h->chain;
	int			c;

	Assert(need >= 1 && need <= FBF_NEED_MAX);
	for (c = from[need - 1]; c < chain->n; c++)
	{
		int			n;

		FbfWindowPageGetEntries(BufferGetPage(chain->bufs[c]), &n);
		if (h->npend > 0 && c == h->pend_page)
			n += h->npend;		/* and what the run keeps for it */
		if (n + need <= FBF_PENDING_CAPACITY)
			break;
	}
	from[need - 1] = c;
	return c < chain->n ? c : -1;
}

/*
 * One operation on its way through FbfWindowApply's steps: the locks they
 * hold (the hold: the metapage, share-locked; from ask_chain on, the
 * operation's chain) and what they learn.  The last three members outlive
 * a try: a step that let go of its locks to refresh, grow or wait makes
 * the driver start over.
 */
typedef struct ApplyState
{
	FbfWindowHold *h;
	const FbfWindowOp *op;
	int64		now;
	bool		public_too;		/* the window asks the public hash too */
	bool		stream;			/* recorded with its annex (its stream) */
	bool		ask_stream;		/* and its stream asked */
	int			need;			/* entries it takes on the chain */
	int			room;			/* the chain page it goes to, -1: none yet */
	FbfLane		lane;			/* what its partition page has room for */
	FbfOpResult result;			/* STEP_DONE: the answer */
	bool		refresh_tried;	/* once: a refresh may rightly be postponed */
	FbfReserve	reserve;		/* may it take its chain's reserve */
	bool		grown_for_reserve;	/* FBF_RESERVE_GROW grew the window */
	double		reserve_free;	/* FBF_OP_RESERVED: of its chain's reserve */
	bool		waits_for_period;	/* and its entries wait below the cap */
	bool		may_defer;		/* drains may put entries off */
	bool		grow;			/* a drain put entries off: grow */
} ApplyState;

/* What a step of FbfWindowApply decided. */
typedef enum ApplyStep
{
	STEP_ON,					/* locks held: on to the next step */
	STEP_AGAIN,					/* locks let go: try again from the start */
	STEP_DONE					/* the answer is st->result; locks kept only
								 * by a caller's hold */
} ApplyStep;

/* Done, with answer `result`: the locks let go unless a caller keeps them. */
static ApplyStep
done(ApplyState *st, FbfOpResult result)
{
	if (!st->h->keep)
		FbfWindowLetGo(st->h);
	st->result = result;
	return STEP_DONE;
}

/* Wait, every lock let go, for `xid` to end. */
static ApplyStep
wait_for_xact(ApplyState *st, FullTransactionId xid)
{
	FbfWindowLetGo(st->h);
	XactLockTableWait(XidFromFullTransactionId(xid), NULL, NULL, XLTW_None);
	return STEP_AGAIN;
}

/*
 * Step 1: share-lock the metapage (unless the hold has it); refresh the
 * window first if it is due (needs_refresh; unless another backend is
 * refreshing it, FbfWindowRefresh); refuse a window not upgraded;
 * FBF_OP_REKEYED if the operation was not hashed as the window hashes now
 * (window_key.c): under another key, or without an identity the window
 * still asks (under the public hash, or the fixed key it gave up,
 * whichever it asks now; 1.0's).  A keying that asks more than the window
 * does is no error (the extra lookups are not made), but the caller is
 * told to read it again.
 */
static ApplyStep
open_window(ApplyState *st, const FbfWindowKeying *keying,
			FbfApplyInfo *info)
{
	FbfWindowHold *h = st->h;
	FbfWindowKeying current;

	if (!h->meta_held)
	{
		h->metabuf = FbfWindowLockMeta(h->index, BUFFER_LOCK_SHARE, &h->meta);
		h->meta_held = true;
	}
	st->now = FbfWindowNow(&h->meta);

	/*
	 * A refresh asked for and not done (postponed, or left to the backend
	 * doing it) is not asked for again by the same hold's operations until
	 * the window has moved on: each would let the hold go for nothing.
	 */
	if (!st->refresh_tried &&
		!(h->refresh_asked && h->refresh_born == h->meta.born_at[0]) &&
		needs_refresh(&h->meta, st->now))
	{
		h->refresh_asked = true;
		h->refresh_born = h->meta.born_at[0];
		FbfWindowLetGo(h);
		FbfWindowRefresh(h->index, false);
		st->refresh_tried = true;
		return STEP_AGAIN;
	}

	/* a window not upgraded (refresh postponed on a standby...)? */
	if (h->meta.version != FBF_STORAGE_VERSION)
	{
		FbfWindowLetGo(h);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the filter \"%s\" has not been upgraded",
						RelationGetRelationName(h->index))));
	}

	FbfWindowKeyingOf(&h->meta, st->now, &current);
	if (!FbfWindowKeysEqual(&current.key, &keying->key) ||
		(current.public_too &&
		 (!st->op->has_public ||
		  !FbfWindowKeysEqual(&current.public_key, &keying->public_key))) ||
		(current.keyless_too && !keying->keyless_too))
	{
		FbfWindowLetGo(h);
		st->result = FBF_OP_REKEYED;
		return STEP_DONE;
	}
	st->public_too = current.public_too;
	info->stale_keying = current.public_too != keying->public_too ||
		current.keyless_too != keying->keyless_too;
	return STEP_ON;
}

/*
 * Step 2: does the window remember the operation under an identity it had
 * before an upgrade (in_legacy) or before it had its key (in_public)?  A
 * chain the hold kept from the last operation is let go of first: these
 * lookups lock chains and partition pages of their own.
 */
static ApplyStep
ask_earlier_identities(ApplyState *st)
{
	FbfWindowHold *h = st->h;
	const FbfWindowOp *op = st->op;
	FullTransactionId wait_for = InvalidFullTransactionId;

	if (st->now < h->meta.legacy.until || st->public_too)
		let_go_chain(h);
	if (in_legacy(h->index, &h->meta, st->now,
				  op->has_public ? &op->public_hash : &op->hash,
				  op->has_keyless ? &op->keyless : NULL))
		return done(st, FBF_OP_DUPLICATE);
	if (!st->public_too)
		return STEP_ON;
	if (in_public(h->index, &h->meta, &op->public_hash, &wait_for))
		return done(st, FBF_OP_DUPLICATE);
	if (FullTransactionIdIsValid(wait_for))
		return wait_for_xact(st, wait_for);
	return STEP_ON;
}

/*
 * Step 3: lock the operation's pending chain, unless the hold has it from
 * the last operation (another chain it has is let go of first), draining
 * it first if its oldest entry is old enough that the commit log may
 * forget it, and look for the operation there: in flight in another
 * transaction (wait for it), or recorded by this one or a committed one (a
 * duplicate, answered exactly).  A long run on a long chain indexes it
 * whole (HOLD_INDEX_MIN_OPS, window_chain_index.c).
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
	FbfWindowHold *h = st->h;
	uint32		chainno = FbfWindowChainOf(&h->meta, &st->op->hash);
	FullTransactionId wait_for;
	FullTransactionId floor;

	st->stream = st->op->has_stream && h->meta.stream_pages > 0 &&
		fbf_hash_key_is_set(&h->meta.key);
	st->ask_stream = st->stream && !st->public_too;
	st->need = st->stream ? 2 : 1;

	if (h->chain_held && h->chainno != chainno)
		let_go_chain(h);
	if (!h->chain_held)
	{
		FbfChainLock(h->index, &h->meta, chainno, &h->chain);
		h->chain_held = true;
		h->chainno = chainno;
	}
	floor = FbfChainFloor(&h->chain);
	if (FullTransactionIdIsValid(floor) &&
		U64FromFullTransactionId(ReadNextFullTransactionId()) -
		U64FromFullTransactionId(floor) > FBF_PENDING_DRAIN_AGE)
		drain_held(h, false, &st->grow);
	if (++h->on_chain >= HOLD_INDEX_MIN_OPS && h->keep && !h->cix.valid &&
		h->chain.n >= HOLD_INDEX_MIN_PAGES)
		FbfChainIndexBuild(&h->cix, &h->chain);

	if (in_chain(&h->meta, &h->chain, &h->cix, &st->op->hash, &wait_for))
	{
		info->answer = FBF_ANSWER_CHAIN;
		return done(st, FBF_OP_DUPLICATE);
	}
	if (FullTransactionIdIsValid(wait_for))
		return wait_for_xact(st, wait_for);
	st->room = chain_room(h, st->need, h->room_from);
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
	FbfWindowHold *h = st->h;
	bool		duplicate;
	bool		exact = false;

	st->lane = FBF_LANE_ROOM;
	duplicate = FbfFilterRoutineOf(&h->meta)->contains(h->index, &h->meta,
													   &st->op->hash,
													   &st->lane);
	if (st->ask_stream)
	{
		switch (FbfStreamCheck(h->index, &h->meta, st->op->stream,
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

	if (!exact && (h->meta.flags & FBF_META_CAPPED) != 0 &&
		FbfWindowGetOptions(h->index)->at_capacity == FBF_AT_CAPACITY_REFUSE)
	{
		FbfWindowLetGo(h);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("counter filter \"%s\" is at its capacity",
						RelationGetRelationName(h->index)),
				 errdetail("Its estimated false-positive rate is above its target and fbf.max_filter_size does not let it grow; the counter's option at_capacity is \"refuse\"."),
				 errhint("Retry the operation later, raise fbf.max_filter_size, or set at_capacity to \"dismiss\".")));
	}
	if (duplicate)
		return done(st, FBF_OP_DUPLICATE);
	return STEP_ON;
}

/*
 * Step 5: a page of the chain with room for the new operation's entries.
 * If the chain is full, drain what has been decided; if that frees
 * nothing, add an overflow page, up to FBF_MAX_PENDING_PAGES.  A run that
 * drained its chain once adds pages without draining it again until the
 * chain is at its longest: what it appended meanwhile is its own, in
 * flight, and a drain of what others' fates decided since can wait for the
 * next operation that finds the chain full (a drain reads every entry).
 *
 * Room on the chain's reserve (FBF_RESERVE_FROM) is taken only if the caller
 * allowed it (a chain with room only there is drained first, as a full
 * one is); else nothing is done, and the answer is FBF_OP_RESERVED.  Such
 * a caller's operation never reaches a full chain, so it never grows the
 * window itself: growth for its load comes from the rate (the caller's
 * "overfull", the worker's passes).  A caller that allows it only while
 * the window can grow (FBF_RESERVE_GROW), where a drain put entries off
 * for want of bits, has the window grown once, as a full chain grows it,
 * and takes it; at the cap, or where they wait for the next period, it
 * gets FBF_OP_RESERVED.  Where the chain holds entries in flight alone,
 * such a caller takes it: no growth makes room for those (the caller's
 * shares bound them).
 *
 * A chain full of entries that wait for more bits (the drain put them
 * off) grows the window now and tries again.  At its cap, or where they
 * wait for the next period (FBF_STORED_WAITS: a split would not take
 * them), a counter that refuses what it cannot take refuses this
 * operation: the entries wait for the next period's room, as its shares
 * planned (poured into the bits there are, they would raise the false
 * positives until their filters age out).  Otherwise they are drained into
 * those bits.
 */
static ApplyStep
find_room(ApplyState *st)
{
	FbfWindowHold *h = st->h;
	FbfPendingChain *chain = &h->chain;

	if ((st->room < 0 ||
		 (st->reserve != FBF_RESERVE_TAKE && st->room >= FBF_RESERVE_FROM)) &&
		(!h->drained || chain->n == FBF_MAX_PENDING_PAGES) &&
		drain_held(h, st->may_defer, &st->grow) > 0)
		st->room = chain_room(h, st->need, h->room_from);
	if (st->reserve != FBF_RESERVE_TAKE &&
		(st->room >= FBF_RESERVE_FROM || (st->room < 0 && chain->n >= FBF_RESERVE_FROM)))
	{
		bool		waiting = st->may_defer &&
			(st->grow || h->put_off != FBF_STORED_ALL);

		/* a split takes what waits for bits, not for the next period */
		bool		for_bits = st->grow || h->put_off == FBF_STORED_GROW;
		bool		below_cap = FbfWindowPartsAtCap(&h->meta) > h->meta.nparts;
		bool		can_grow = for_bits && below_cap;

		if (st->reserve == FBF_RESERVE_GROW && waiting && can_grow &&
			!st->grown_for_reserve)
		{
			/* as for a full chain, below; once: a split frees no room */
			FbfWindowLetGo(h);
			st->grow = false;
			st->grown_for_reserve = true;
			(void) FbfWindowGrowNow(h->index);
			CHECK_FOR_INTERRUPTS();
			return STEP_AGAIN;
		}
		if (st->reserve == FBF_RESERVE_KEEP || (waiting && !can_grow))
		{
			/* pages before the one with room, or before the end, are full */
			int			first_free = st->room >= 0 ? st->room : chain->n;

			st->reserve_free = Min(1.0, (double) (FBF_MAX_PENDING_PAGES - first_free) /
								   FBF_RESERVE_PAGES);
			st->waits_for_period = waiting && !for_bits && below_cap;
			FbfWindowLetGo(h);
			st->result = FBF_OP_RESERVED;
			return STEP_DONE;
		}
	}
	if (st->room >= 0)
		return STEP_ON;

	if (chain->n == FBF_MAX_PENDING_PAGES && st->may_defer && st->grow)
	{
		FbfWindowLetGo(h);
		st->grow = false;
		if (FbfWindowGrowNow(h->index) == FBF_GROWTH_NONE)
		{
			if (FbfWindowPartsAtCap(&h->meta) <= h->meta.nparts &&
				FbfWindowGetOptions(h->index)->at_capacity == FBF_AT_CAPACITY_REFUSE)
				ereport(ERROR,
						(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
						 errmsg("counter filter \"%s\" is at its capacity",
								RelationGetRelationName(h->index)),
						 errdetail("One of its partitions has more operations of this period than its filters take under the target; they wait for the next period's filter."),
						 errhint("Retry the operation in a later period, or raise fbf.max_filter_size.")));
			st->may_defer = false;
		}
		CHECK_FOR_INTERRUPTS();
		return STEP_AGAIN;
	}
	if (chain->n == FBF_MAX_PENDING_PAGES && st->may_defer &&
		h->put_off == FBF_STORED_WAITS)
	{
		FbfWindowLetGo(h);
		if (FbfWindowGetOptions(h->index)->at_capacity == FBF_AT_CAPACITY_REFUSE)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("counter filter \"%s\" has no room for more operations this period",
							RelationGetRelationName(h->index)),
					 errdetail("One of its partitions has more operations of this period than its filters take under the target, and a larger filter would not take them before the next period."),
					 errhint("Retry the operation in a later period.")));
		st->may_defer = false;
		CHECK_FOR_INTERRUPTS();
		return STEP_AGAIN;
	}
	if (chain->n == FBF_MAX_PENDING_PAGES)
	{
		int			nops = chain_operations(chain);

		FbfWindowLetGo(h);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("too many operations in flight on counter filter \"%s\"",
						RelationGetRelationName(h->index)),
				 errdetail("%d operations of open transactions are waiting to commit in one partition.",
						   nops),
				 errhint("Commit or roll back the transactions that increment this counter, or split large batches into several transactions.")));
	}
	/* an empty page at the end: the chain's index stays as it is */
	flush_pending(h);
	FbfChainExtend(h->index, chain);
	st->room = chain->n - 1;
	return STEP_ON;
}

/*
 * Step 6: record the new operation in flight for the current
 * (sub)transaction: append (xid, hash), and its annex (stream, seq) after
 * it, lowering the chain's floor with them when the entry goes to the
 * head, else in a record of its own; then let go of every lock.  Under a
 * caller's hold the locks are kept, and so are the entries, in memory,
 * until the run appends to another page or lets go of the chain
 * (flush_pending): one record for the run's operations on the page.
 */
static void
record_operation(ApplyState *st, FbfApplyInfo *info)
{
	FbfWindowHold *h = st->h;
	FullTransactionId fxid = GetCurrentFullTransactionId();
	FullTransactionId floor = FbfChainFloor(&h->chain);
	bool		lowers = !FullTransactionIdIsValid(floor) ||
		FullTransactionIdPrecedes(fxid, floor);
	bool		at_head = st->room == 0;
	FbfPendingEntry entry;

	if (h->npend > 0 && h->pend_page != st->room)
		flush_pending(h);
	entry.xid = XidFromFullTransactionId(fxid);
	entry.epoch = EpochFromFullTransactionId(fxid);
	entry.h1 = st->op->hash.h1;
	entry.h2 = st->op->hash.h2;
	h->pend_page = st->room;
	h->pend[h->npend++] = entry;
	if (st->stream)
		h->pend[h->npend++] = FbfPendingAnnex(st->op->stream, st->op->seq);
	if (lowers && at_head)
		h->pend_floor = true;
	else if (lowers)
		FbfChainSetFloor(h->index, &h->chain, fxid);
	if (!h->keep)
		flush_pending(h);

	info->entries = st->need;
	info->on_reserve = st->room >= FBF_RESERVE_FROM;
	FbfWindowCapacityOf(&h->meta, &info->capacity);
	if (!h->keep)
		FbfWindowLetGo(h);
	/* a new operation: does the window need more bits for its rate? */
	info->overfull = st->lane == FBF_LANE_OVERFULL || st->grow;
	/* will a drain put it off for the next period's bits? */
	info->waits = st->may_defer && st->lane >= FBF_LANE_FULL;
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
 * With FBF_RESERVE_KEEP, an operation that would take room on the last
 * fifth of its chain (its reserve, FBF_RESERVE_FROM) does nothing and returns
 * FBF_OP_RESERVED, every lock let go, with info->capacity (its epoch: the
 * period) and info->reserve_free: the caller decides whether it may (its shares) and asks again,
 * with FBF_RESERVE_TAKE, or with FBF_RESERVE_GROW, which takes it only
 * while the window can grow, growing it first (find_room).
 *
 * `hold` (NULL for an operation alone) keeps the metapage and the chain
 * locked for the caller's next operation (FbfWindowHoldCreate); the caller
 * lets go of them (FbfWindowLetGo) before it asks the window anything
 * else.  A hold lets go itself before a wait, a refresh or a growth, and
 * after HOLD_MAX_OPS operations.
 *
 * Like _hash_doinsert, a short driver over named steps, each of which
 * either goes on holding its locks, or lets go of them and says to start
 * over (after a refresh, a growth or a wait) or what the answer is:
 * open_window, ask_earlier_identities, ask_chain, ask_bits, find_room,
 * record_operation.
 */
FbfOpResult
FbfWindowApply(Relation index, const FbfWindowKeying *keying,
			   const FbfWindowOp *op, FbfReserve reserve, FbfWindowHold *hold,
			   FbfApplyInfo *info)
{
	FbfWindowHold alone;
	ApplyState	st = {0};

	if (hold == NULL)
	{
		MemSet(&alone, 0, offsetof(FbfWindowHold, chain));
		alone.index = index;
		hold = &alone;
	}
	Assert(hold->index == index);
	st.h = hold;
	st.op = op;
	st.reserve = reserve;
	st.may_defer = true;
	info->overfull = false;
	info->stale_keying = false;
	info->entries = 0;
	info->on_reserve = false;
	info->waits = false;
	for (;;)
	{
		ApplyStep	step;

		info->answer = FBF_ANSWER_FILTER;
		st.room = -1;
		step = open_window(&st, keying, info);
		if (step == STEP_ON)
			step = ask_earlier_identities(&st);
		if (step == STEP_ON)
			step = ask_chain(&st, info);
		if (step == STEP_ON)
			step = ask_bits(&st, info);
		if (step == STEP_ON)
			step = find_room(&st);
		if (step == STEP_ON)
		{
			record_operation(&st, info);
			st.result = FBF_OP_APPLIED;
			step = STEP_DONE;
		}
		if (step == STEP_DONE)
			break;
		/* STEP_AGAIN: locks let go to refresh, grow or wait; ask again */
	}
	/* the period the caller's shares judge the reserve in, and its room */
	if (st.result == FBF_OP_RESERVED)
	{
		FbfWindowCapacityOf(&hold->meta, &info->capacity);
		info->reserve_free = st.reserve_free;
		info->waits_for_period = st.waits_for_period;
	}
	if (hold->meta_held && ++hold->asked >= HOLD_MAX_OPS)
		FbfWindowLetGo(hold);
	return st.result;
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
 * Locks: the metapage share, the chain, the partition page share, in the
 * order of src/window/README.md, "Lock definitions".  With a caller's
 * `hold` (of a run of look-ups in the canonical order: counter_op.c), the
 * metapage and the chain are kept for the next look-up as FbfWindowApply
 * keeps them (the chain exclusively, and indexed once the run on it is
 * long), so that a run of them costs per identity what one costs; what
 * the hold's run recorded and kept in memory is put on its page first
 * (flush_pending), so that it is found.  Alone, the chain is share-locked
 * and let go at once.
 */
bool
FbfWindowContains(Relation index, const FbfHash *hash, FbfWindowHold *hold)
{
	FbfWindowHold alone;
	FullTransactionId wait_for;
	uint32		chainno;
	bool		found;

	if (hold == NULL)
	{
		MemSet(&alone, 0, offsetof(FbfWindowHold, chain));
		alone.index = index;
		hold = &alone;
	}
	Assert(hold->index == index);
	flush_pending(hold);
	if (!hold->meta_held)
	{
		hold->metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_SHARE,
										  &hold->meta);
		hold->meta_held = true;
	}
	if (hold->meta.version != FBF_STORAGE_VERSION)
	{
		/* not upgraded yet: nothing can have been recorded for it */
		FbfWindowLetGo(hold);
		return false;
	}

	chainno = FbfWindowChainOf(&hold->meta, hash);
	if (hold->chain_held && hold->chainno != chainno)
		let_go_chain(hold);
	if (!hold->chain_held)
	{
		FbfChainLockMode(index, &hold->meta, chainno,
						 hold->keep ? BUFFER_LOCK_EXCLUSIVE : BUFFER_LOCK_SHARE,
						 &hold->chain);
		hold->chain_held = true;
		hold->chainno = chainno;
	}
	if (++hold->on_chain >= HOLD_INDEX_MIN_OPS && hold->keep &&
		!hold->cix.valid && hold->chain.n >= HOLD_INDEX_MIN_PAGES)
		FbfChainIndexBuild(&hold->cix, &hold->chain);

	found = in_chain(&hold->meta, &hold->chain, &hold->cix, hash, &wait_for) ||
		FullTransactionIdIsValid(wait_for) ||
		FbfFilterRoutineOf(&hold->meta)->contains(index, &hold->meta, hash,
												  NULL);
	if (!hold->keep || ++hold->asked >= HOLD_MAX_OPS)
		FbfWindowLetGo(hold);
	return found;
}
