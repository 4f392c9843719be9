/*-------------------------------------------------------------------------
 *
 * window_apply.c
 *	  One operation against a counter's window: is it new, and if so,
 *	  record it as in flight for the current (sub)transaction.
 *
 * The hot path of idempotent_increment.  Under the metapage's share lock
 * (the ring cannot change), the operation's partition's pending chain is
 * locked and searched first (an entry there is decided by its xid's fate),
 * then the partition's block of every live filter is tested.  A new
 * operation is appended to the chain in one generic WAL record.  See
 * window.h for the lock order; no buffer lock is held while waiting for
 * another transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "access/transam.h"
#include "access/xact.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/rel.h"

#include "core/bloom_bits.h"
#include "window/window_int.h"

/*
 * Bit i of the result is set iff live filter i holds the operation in its
 * block for `part`.  Stale blocks (stamp not current) read as empty.
 */
static uint64
membership(Relation index, const FbfWindowMetaPageData *meta, uint32 part,
		   const uint32 *probes)
{
	uint64		mask = 0;
	int			i;

	for (i = 0; i < meta->nlive; i++)
	{
		Buffer		buf = FbfWindowReadPage(index,
											FbfFilterBlock(meta, meta->ring[i], part),
											BUFFER_LOCK_SHARE, FBF_PAGE_ID_FILTER);
		Page		page = BufferGetPage(buf);

		if (FbfWindowPageGetOpaque(page)->stamp == FbfWindowExpectedStamp(meta, i) &&
			bloom_test(FbfWindowPageGetWords(page), probes, meta->nhashes))
			mask |= UINT64CONST(1) << i;
		UnlockReleaseBuffer(buf);
	}
	return mask;
}

/*
 * Decide whether the operation `hash` is new, and if so record it as in
 * flight for the current (sub)transaction.
 *
 * Returns FBF_OP_DUPLICATE if a committed operation, or one of this
 * transaction's, has the same identity; waits for the applying transaction
 * if another one in progress has it, then decides again.  The caller holds
 * RowExclusiveLock on the counter table.
 */
FbfOpResult
FbfWindowApply(Relation index, const FbfHash *hash)
{
	bool		refresh_tried = false;

	for (;;)
	{
		Buffer		metabuf;
		FbfWindowMetaPageData meta;
		FbfPendingChain chain;
		uint32		part;
		uint32		probes[FBF_MAX_HASHES];
		TransactionId wait_for = InvalidTransactionId;
		TransactionId xid;
		bool		duplicate = false;
		Buffer		room = InvalidBuffer;
		GenericXLogState *state;
		Page		page;
		FbfPendingEntry *entries;
		int			n;
		int			c;
		int			i;
		TimestampTz now = GetCurrentTimestamp();

		metabuf = FbfWindowLockMeta(index, BUFFER_LOCK_SHARE, &meta);

		/*
		 * A refresh is due and the worker is late: do it first (once; it may
		 * rightly be postponed to keep the retention).
		 */
		if (now - meta.born_at[0] >= meta.period && !refresh_tried &&
			fbf_refresh_action(meta.nlive, meta.nfilters,
							   meta.born_at[meta.nlive - 2], now,
							   meta.retention) != FBF_REFRESH_POSTPONE)
		{
			UnlockReleaseBuffer(metabuf);
			FbfWindowRefresh(index, now);
			refresh_tried = true;
			continue;
		}

		part = fbf_part(hash, meta.nparts);
		FbfChainLock(index, &meta, part, &chain);

		/* in flight, or applied recently and not yet drained? */
		for (c = 0; c < chain.n && !duplicate && !TransactionIdIsValid(wait_for); c++)
		{
			entries = FbfWindowPageGetEntries(BufferGetPage(chain.bufs[c]), &n);
			for (i = 0; i < n && !duplicate && !TransactionIdIsValid(wait_for); i++)
			{
				if (entries[i].h1 != hash->h1 || entries[i].h2 != hash->h2)
					continue;
				switch (FbfEntryStatusOf(entries[i].xid))
				{
					case FBF_ENTRY_OURS:
					case FBF_ENTRY_COMMITTED:
						duplicate = true;
						break;
					case FBF_ENTRY_IN_PROGRESS:
						wait_for = entries[i].xid;
						break;
					case FBF_ENTRY_ABORTED:
						break;
				}
			}
			if (n < FBF_PENDING_CAPACITY && !BufferIsValid(room))
				room = chain.bufs[c];
		}
		if (TransactionIdIsValid(wait_for))
		{
			FbfChainRelease(&chain);
			UnlockReleaseBuffer(metabuf);
			XactLockTableWait(wait_for, NULL, NULL, XLTW_None);
			continue;
		}

		/* applied earlier and drained into the window? */
		if (!duplicate)
		{
			fbf_probes(hash, meta.nhashes, meta.nbits, probes);
			duplicate = fbf_check_mask(membership(index, &meta, part, probes),
									   meta.nlive, FBF_CHECK_DEFAULT);
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
		if (!BufferIsValid(room) && FbfChainDrain(index, &meta, part, &chain) > 0)
		{
			for (c = 0; c < chain.n && !BufferIsValid(room); c++)
			{
				FbfWindowPageGetEntries(BufferGetPage(chain.bufs[c]), &n);
				if (n < FBF_PENDING_CAPACITY)
					room = chain.bufs[c];
			}
		}
		if (!BufferIsValid(room))
		{
			if (chain.n == FBF_MAX_PENDING_PAGES)
			{
				FbfChainRelease(&chain);
				UnlockReleaseBuffer(metabuf);
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
						 errmsg("too many operations in flight on counter filter \"%s\"",
								RelationGetRelationName(index)),
						 errdetail("%d operations of open transactions are waiting to commit in one partition.",
								   FBF_PENDING_CAPACITY * FBF_MAX_PENDING_PAGES),
						 errhint("Commit or roll back the transactions that increment this counter, or split large batches into several transactions.")));
			}
			FbfChainExtend(index, &chain);
			room = chain.bufs[chain.n - 1];
		}

		xid = GetCurrentTransactionId();
		state = GenericXLogStart(index);
		page = GenericXLogRegisterBuffer(state, room, 0);
		entries = FbfWindowPageGetEntries(page, &n);
		entries[n].xid = xid;
		entries[n].unused = 0;
		entries[n].h1 = hash->h1;
		entries[n].h2 = hash->h2;
		FbfWindowPageSetEntryCount(page, n + 1);
		GenericXLogFinish(state);

		FbfChainRelease(&chain);
		UnlockReleaseBuffer(metabuf);
		return FBF_OP_APPLIED;
	}
}

