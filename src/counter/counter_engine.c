/*-------------------------------------------------------------------------
 *
 * counter_engine.c
 *	  The apply engine: the one loop that asks a table's window about the
 *	  prepared operations of one call and records the new ones
 *	  (FbfEngineApply), shared by counters and dedup claims; and the
 *	  counters' increment path on top of it (FbfCounterApply), which single
 *	  calls, outcomes, batches and the routed half of a call on a counter
 *	  distributed by Citus all take.
 *
 * The engine is given the operations of one call as FbfOpsPrepare or
 * FbfOpsFromIds made them (counter_op.c).  It hashes them under the
 * window's key (FbfOpsHash), asks the window one operation at a time in
 * the canonical (hash) order, starts over if the window's key changed
 * before anything was recorded and fails with 40001 if it changed after,
 * records track_mismatch's delta identities, adds the applied operations'
 * deltas through the caller's callback (none for claims), counts the
 * operations in the registry (with who answered each: exactly, or the
 * filter) and grows the window if it asked to.
 *
 * Locks: the caller has opened the table and its window index with
 * RowExclusiveLock (FbfCounterOpen, privileges checked before); the window
 * takes its buffer locks (FbfWindowApply, in the order of
 * src/window/README.md, "Lock definitions") and may wait, holding none of
 * them, for another transaction that has the same operation in flight.
 * It keeps them from one operation of the call to the next (an
 * FbfWindowHold: the metapage, and the chain while the operations, in
 * their canonical order, stay on it), so that an operation of a large batch
 * costs what one of a small batch does; charging a share
 * (FbfShareCharge) takes only a lightweight lock of shared memory under
 * them.  The hold lets go every few thousand operations, where
 * CHECK_FOR_INTERRUPTS lets a cancel stop a call of any size, and before
 * the dismissed operations' delta identities are looked up with it
 * (FbfWindowContains).
 *
 * Backend-local state: whether this backend has told the registry that its
 * database has windows to maintain.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "common/hashfn.h"
#include "common/int128.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/rls.h"

#include "counter/counter.h"
#include "registry/registry.h"
#include "window/window.h"

/*
 * The launcher's count of idle passes (FbfDatabaseIdlePasses) when this
 * backend last told it that its database has operations; 0: never.
 */
static uint64 database_noted_at = 0;

/* What apply_ops did, beyond the answers. */
typedef struct FbfApplyTally
{
	INT128		sum;			/* of the applied operations' deltas */
	int			napplied;
	int			nmismatched;
	int			nexact;			/* answered exactly: chain, stream, repeat */
	int			nfilter;		/* answered by the filter */
	int			naverted;		/* of nexact: a stream's "new" over the
								 * filter's "seen" */
	bool		overfull;		/* the window asked to grow */
	bool		stale_keying;	/* the keying asked more than the window */
} FbfApplyTally;

/*
 * The current transaction applied operations (increments or claims), and
 * counted them (FbfStatsCount): the launcher must know that this database
 * has windows to maintain.  Told once, and again after a pass put a
 * database of this one's slot off as idle (FbfDatabaseIdlePasses), since
 * its chains would otherwise wait for its next refresh to be drained.
 * Read after the count: a pass that found no operation either saw it (and
 * did not put the database off) or was counted before this read
 * (FbfDatabasePassDone).
 */
static void
note_operations(void)
{
	uint64		idle_passes = FbfDatabaseIdlePasses(MyDatabaseId);

	if (idle_passes != database_noted_at)
	{
		FbfDatabaseHasOperations(MyDatabaseId);
		database_noted_at = idle_passes;
	}
}

/*
 * The window's key changed after a call had recorded operations under the
 * one before: only a load into the table meanwhile can do that
 * (window_key.c).  The transaction is retried as a whole.
 */
fbf_noreturn static void
rekeyed_error(Relation index, bool claims)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("the filter \"%s\" changed its key during the call",
					RelationGetRelationName(index)),
			 claims ?
			 errdetail("A snapshot was loaded into the dedup table while this call was recording claims.") :
			 errdetail("A snapshot was loaded into the counter while this call was recording operations."),
			 errhint("Retry the transaction.")));
}

/*
 * Who pays for a call's new operations against the shares of its window's
 * capacity (src/counter/README.md, "Shares"), as the window's option
 * share_by says: the current role, the operations' key (a claim has none:
 * the options refuse share_by = key on a dedup window), or one pool.
 * Never 0 (FbfShareDemand).
 */
#define SHARE_POOL_UNIT		UINT64CONST(1)

static uint64
share_unit(const FbfOps *ops, int share_by)
{
	uint64		unit;

	switch (share_by)
	{
		case FBF_SHARE_BY_KEY:
			if (ops->key != NULL)
			{
				unit = hash_bytes_extended((const unsigned char *) VARDATA_ANY(ops->key),
										   VARSIZE_ANY_EXHDR(ops->key), 0);
				return unit != 0 ? unit : SHARE_POOL_UNIT + 1;
			}
			/* FALLTHROUGH */
		case FBF_SHARE_BY_ROLE:
			/* above the pool's unit: role OIDs are never 0 or 1 */
			return (uint64) GetUserId();
		default:
			return SHARE_POOL_UNIT;
	}
}

/*
 * Does the counter divide its capacity among units?  Not if its option
 * at_capacity is "dismiss" (its window takes everything, and dismisses new
 * operations beyond its target), nor if it is temporary (one session uses
 * it, and it must not take a share table from the counters others share).
 */
static bool
is_shared(Relation heap, const FbfWindowOptions *opts)
{
	return opts->at_capacity == FBF_AT_CAPACITY_REFUSE &&
		heap->rd_rel->relpersistence != RELPERSISTENCE_TEMP;
}

/* a unit (not the pool) as refusals name it */
static char *
share_who(const FbfOps *ops, int share_by)
{
	if (share_by == FBF_SHARE_BY_KEY && ops->key != NULL)
		return psprintf("key \"%s\"", text_to_cstring(ops->key));
	return psprintf("role \"%s\"", GetUserNameFromId(GetUserId(), false));
}

/*
 * Refuse the operation apply_reserved asks about: its unit may not take
 * the reserve of its chain (`detail`: why); the call's hold on the window
 * let go first (the window let go of its locks already, but the hold is
 * the caller's to end).
 */
static void
refuse_reserve(Relation index, const FbfOps *ops, int share_by,
			   FbfWindowHold *hold, const char *detail, const char *hint)
{
	if (hold != NULL)
		FbfWindowLetGo(hold);
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("%s has filled the pending pages of counter filter \"%s\" up to the part kept for others",
					share_who(ops, share_by), RelationGetRelationName(index)),
			 errdetail("%s", detail),
			 errhint("%s", hint)));
}

/*
 * A unit allowed the reserve is asked again after this many operations of
 * its call: a unit that becomes heavy during a long batch is refused there,
 * while a unit alone does not pay a question for each operation.
 */
#define RESERVE_ASK_EVERY	64

/* What a call may do with the reserve of its chains (apply_reserved). */
typedef struct ReserveLease
{
	int			left;			/* its next operations that need not ask */
	FbfReserve	reserve;		/* what they may do */
} ReserveLease;

/*
 * Who may take the reserve of a window's pending chains, and for how many
 * of the call's operations (`lease`), asked of the shares for the unit of
 * `ops` in the period of `info` (FbfShareWeigh): everyone, for the whole
 * call, where nobody shares the window (is_shared) or everyone shares one
 * pool; a unit alone, for entries waiting for bits, only while the window
 * can grow (FBF_RESERVE_GROW: at the cap, or where they wait for the next
 * period (a cuckoo window that split in this one), what it leaves of the
 * chains is all a unit that comes next will find, since a split frees no
 * room in the current period); a unit that asked no more than max-min fairness
 * gives it (refused or not: `asking`, the call's operations yet to be
 * asked, counts too if it is refused), until it has put as many entries on the reserve this period
 * as are left of it (so the first to come leaves the next half of it).
 * A heavy unit, or one that spent its part, is refused with 53400.  The
 * shares are asked again after RESERVE_ASK_EVERY operations.
 */
static void
lease_reserve(Relation heap, Relation index, const FbfOps *ops,
			  const FbfApplyInfo *info, int asking, FbfWindowHold *hold,
			  ReserveLease *lease)
{
	const FbfWindowOptions *opts = FbfWindowGetOptions(index);
	uint64		unit;

	lease->reserve = FBF_RESERVE_TAKE;
	lease->left = INT_MAX;
	if (!is_shared(heap, opts))
		return;
	unit = share_unit(ops, opts->share_by);
	if (unit == SHARE_POOL_UNIT)
		return;
	lease->left = RESERVE_ASK_EVERY - 1;
	switch (FbfShareWeigh(MyDatabaseId, RelationGetRelid(heap), unit,
						  info->capacity.epoch,
						  info->reserve_free * info->capacity.reserve,
						  asking / info->capacity.per_period))
	{
		case FBF_SHARE_HEAVY:
			refuse_reserve(index, ops, opts->share_by, hold,
						   "It asked for more than its share of the new operations of this period and the one before, counting those refused; the last fifth of each pending chain is kept for those who did not.",
						   "Retry the operation in a later period, commit or roll back its open transactions, or send fewer operations at once.");
			break;
		case FBF_SHARE_SPENT:
			refuse_reserve(index, ops, opts->share_by, hold,
						   "It put as many new operations on the last fifth of the pending chains this period as are left there; the rest is kept for those who come next.",
						   "Retry the operation in a later period, commit or roll back its open transactions, or send fewer operations at once.");
			break;
		case FBF_SHARE_ALONE:
			lease->reserve = FBF_RESERVE_GROW;
			break;
		case FBF_SHARE_LIGHT:
			break;
	}
}

/*
 * Apply an operation (FbfWindowApply), letting it take the reserve of its
 * pending chain (FBF_OP_RESERVED: returned with the period in info) as
 * the call's `lease` says (zeroed before its first operation), asked for
 * (lease_reserve) when an operation meets the reserve with none left, or
 * meets it still under the lease's answer (a unit alone at the window's
 * cap); a unit alone is refused there (53400), as lease_reserve refuses a
 * heavy one.
 */
static FbfOpResult
apply_reserved(Relation heap, Relation index, const FbfOps *ops,
			   const FbfWindowKeying *keying, const FbfWindowOp *op,
			   int asking, FbfWindowHold *hold, FbfApplyInfo *info,
			   ReserveLease *lease)
{
	FbfOpResult r;

	if (lease->left > 0)
	{
		lease->left--;
		r = FbfWindowApply(index, keying, op, lease->reserve, hold, info);
	}
	else
		r = FbfWindowApply(index, keying, op, FBF_RESERVE_KEEP, hold, info);
	if (r != FBF_OP_RESERVED)
		return r;
	/* asked afresh: a lease for a unit alone may be one no more */
	lease_reserve(heap, index, ops, info, asking, hold, lease);
	r = FbfWindowApply(index, keying, op, lease->reserve, hold, info);
	Assert(r != FBF_OP_RESERVED || lease->reserve == FBF_RESERVE_GROW);
	if (r == FBF_OP_RESERVED && info->waits_for_period)
		refuse_reserve(index, ops, FbfWindowGetOptions(index)->share_by, hold,
					   "It alone sends new operations, and the filter's pages hold as many of this period's as they take under its target (a larger filter takes more only from the next period): what waits for the next period's filter may not fill the last fifth of each pending chain, which is kept for whoever comes next.",
					   "Retry the operation in a later period, or plan the counter for its load (expected_rate).");
	else if (r == FBF_OP_RESERVED)
		refuse_reserve(index, ops, FbfWindowGetOptions(index)->share_by, hold,
					   "It alone sends new operations, and the filter is as large as fbf.max_filter_size lets it be: what waits for the next period's filter may not fill the last fifth of each pending chain, which is kept for whoever comes next.",
					   "Retry the operation in a later period, plan the counter for its load (expected_rate), or raise fbf.max_filter_size.");
	return r;
}

/*
 * Charge a new operation the window recorded (FbfApplyInfo) to its unit
 * (FbfShareCharge), where the window is shared (is_shared); refused, the
 * operation fails with 53400 (the transaction aborts, and with it the
 * entry), the call's hold on the window (if any) let go first, and the
 * unit is counted as having asked for `asking`, the call's operations from
 * this one on.
 *
 * A counter that can have no share table now (every one held by counters
 * with entries in flight of recent transactions) is admitted unshared
 * while its window is not capped and the operation is off its chain's
 * reserve: its filter keeps its target by growing, and a flood at its cap
 * meets the window's own refusals (the capped flag, the reserve, full
 * chains), so nothing is lost; refused only then.  So another role
 * holding every table makes no counter refuse that would not refuse
 * under a flood of its own.
 */
static void
charge_share(Relation heap, Relation index, const FbfOps *ops,
			 const FbfApplyInfo *info, int asking, FbfWindowHold *hold)
{
	const FbfWindowOptions *opts = FbfWindowGetOptions(index);
	FbfShareDemand demand;
	FbfShareStanding standing;
	FbfShareVerdict verdict;
	char	   *who;

	if (!is_shared(heap, opts) || info->entries == 0)
		return;
	demand.unit = share_unit(ops, opts->share_by);
	demand.pooled = demand.unit == SHARE_POOL_UNIT;
	demand.entries = info->entries;
	demand.asking = asking;
	demand.on_reserve = info->on_reserve;
	demand.waits = info->waits;
	demand.epoch = info->capacity.epoch;
	demand.per_period = info->capacity.per_period;
	demand.in_flight = info->capacity.in_flight;
	verdict = FbfShareCharge(MyDatabaseId, RelationGetRelid(heap), &demand,
							 &standing);
	if (verdict == FBF_SHARE_ADMITTED ||
		(verdict == FBF_SHARE_NO_TABLE && !info->capacity.capped &&
		 !info->on_reserve))
		return;

	/* the message reads catalogs: the window's buffer locks go first */
	if (hold != NULL)
		FbfWindowLetGo(hold);
	if (verdict == FBF_SHARE_NO_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("no share of counter filter \"%s\"'s capacity can be counted now",
						RelationGetRelationName(index)),
				 errdetail("Every share table of the server is held by counters with operations in flight of transactions begun in the last %d seconds, and the filter is %s.",
						   FBF_SHARE_STALE_SECS,
						   info->capacity.capped ? "at its cap" :
						   "filling the last fifth of its pending pages"),
				 errhint("Retry the operation; commit or roll back transactions left open on other counters.")));

	who = demand.pooled ? NULL : share_who(ops, opts->share_by);

	/*
	 * The chains' entries, in flight or waiting for bits (one pool has no
	 * share of them: never pooled here)
	 */
	if (verdict == FBF_SHARE_OVER_IN_FLIGHT || verdict == FBF_SHARE_OVER_WAITING)
	{
		bool		waits = verdict == FBF_SHARE_OVER_WAITING;
		/* entries: as many as a unit may have, not a rounded fraction */
		double		share = floor(standing.share);
		double		capacity = floor(standing.capacity);

		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 waits ?
				 errmsg("%s holds its share of the pending pages of counter filter \"%s\"",
						who, RelationGetRelationName(index)) :
				 errmsg("%s holds its share of the operations in flight on counter filter \"%s\"",
						who, RelationGetRelationName(index)),
				 waits ?
				 errdetail("With this operation it would have %.0f entries on the filter's pending pages, in flight or waiting for the next period's filter; its share is %.0f of the %.0f they hold before their last fifth, shared by %.0f.",
						   standing.used, share, capacity, standing.sharers) :
				 errdetail("Its open and prepared transactions hold %.0f entries in flight; its share is %.0f of the %.0f the filter's pending pages hold, shared by %.0f.",
						   standing.used, share, capacity, standing.sharers),
				 waits ?
				 errhint("Retry the operation in a later period, or plan the counter for its load (expected_rate).") :
				 errhint("Commit or roll back open transactions that use this counter, or split large batches into several transactions.")));
	}
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 who ?
			 errmsg("%s is over its share of the capacity of counter filter \"%s\"",
					who, RelationGetRelationName(index)) :
			 errmsg("counter filter \"%s\" is at its capacity",
					RelationGetRelationName(index)),
			 errdetail("Its new operations took %.0f%% of what the filter takes this period under its target within fbf.max_filter_size (%.0f operations); its share is %.0f%%, shared by %.0f.",
					   100 * standing.used, standing.capacity,
					   100 * standing.share, standing.sharers),
			 errhint("Retry the operation in a later period, or raise fbf.max_filter_size; the counter's option at_capacity = 'dismiss' takes every operation and dismisses new ones beyond the target instead.")));
}

/*
 * Count who answered an operation (FbfApplyInfo.answer) in *tally: the
 * pending chain or a stream exactly, a stream's "new" over the filter's
 * "seen" exactly and as a false dismissal averted, else the filter.
 */
static void
count_answer(FbfAnswer answer, FbfApplyTally *tally)
{
	switch (answer)
	{
		case FBF_ANSWER_CHAIN:
		case FBF_ANSWER_STREAM:
			tally->nexact++;
			break;
		case FBF_ANSWER_STREAM_OVERRULED:
			tally->nexact++;
			tally->naverted++;
			break;
		case FBF_ANSWER_FILTER:
			tally->nfilter++;
			break;
	}
}

/* Let go of a call's hold on the window, if it has one, and free it. */
static void
end_hold(FbfWindowHold *hold)
{
	if (hold == NULL)
		return;
	FbfWindowLetGo(hold);
	pfree(hold);
}

/*
 * The delta identity `delta` as the window is asked about it, with its
 * twin under the public hash if its operation has one (while the window
 * asks that too).
 */
static void
delta_identity(const FbfOps *ops, const FbfWindowKeying *keying,
			   const FbfDeltaId *delta, FbfWindowOp *delta_op)
{
	const FbfWindowOp *op = &ops->hashed[delta->op];

	memset(delta_op, 0, sizeof(FbfWindowOp));
	delta_op->hash = delta->hash;
	delta_op->has_public = op->has_public;
	if (op->has_public)
		delta_op->public_hash = FbfDeltaHash(&keying->public_key,
											 &op->public_hash,
											 ops->deltas[delta->op]);
}

/*
 * Record the delta identities of the operations of `ops` that the window
 * took (is_new, in ops' order), and look up those of the ones it
 * dismissed, counting in *tally the dismissed ones whose delta identity it
 * does not hold (track_mismatch).  Each kind is asked in the delta
 * identities' own canonical order (FbfOpsDeltas), so that `hold` keeps a
 * chain across a run of them as it did for the operations (let go of
 * while they are hashed and sorted); the lookups come last, so that a
 * repeat within the call finds the delta identity its first occurrence
 * recorded (FbfWindowContains puts what the hold kept in memory on its
 * page first).  A recorded delta identity is new, or
 * already held (a false positive): either will do.  Neither is counted as
 * an answer.
 */
static void
record_deltas(Relation heap, Relation index, const FbfOps *ops,
			  const FbfWindowKeying *keying, const bool *is_new,
			  FbfWindowHold *hold, FbfApplyTally *tally)
{
	FbfDeltaId *deltas;
	ReserveLease lease = {0};
	int			left = tally->napplied;	/* new ones yet to be recorded */
	int			k;

	/* hashing and sorting them checks for interrupts: no buffer lock held */
	if (hold != NULL)
		FbfWindowLetGo(hold);
	deltas = FbfOpsDeltas(ops, keying);
	for (k = 0; k < ops->n && tally->napplied > 0; k++)
	{
		FbfApplyInfo info = {0};
		FbfWindowOp delta_op;

		if (!is_new[deltas[k].op])
			continue;
		delta_identity(ops, keying, &deltas[k], &delta_op);
		if (apply_reserved(heap, index, ops, keying, &delta_op, left, hold,
						   &info, &lease) == FBF_OP_REKEYED)
		{
			end_hold(hold);
			rekeyed_error(index, false);
		}
		charge_share(heap, index, ops, &info, left, hold);
		left--;
		tally->overfull |= info.overfull;
		CHECK_FOR_INTERRUPTS();
	}

	for (k = 0; k < ops->n && tally->napplied < ops->n; k++)
	{
		FbfWindowOp delta_op;

		if (is_new[deltas[k].op])
			continue;
		delta_identity(ops, keying, &deltas[k], &delta_op);
		if (!FbfWindowContains(index, &delta_op.hash, hold) &&
			(!delta_op.has_public ||
			 !FbfWindowContains(index, &delta_op.public_hash, hold)))
			tally->nmismatched++;
		CHECK_FOR_INTERRUPTS();
	}
	pfree(deltas);
}

/*
 * Ask the window about each operation of `ops` (hashed under `keying`) in
 * their order, recording the new ones, and with track_mismatch their delta
 * identities after them (record_deltas); applied[ops->place[i]] gets each
 * answer, *tally the rest, with who answered each (count_answer).  An
 * operation whose hash equals the previous one's is a repeat of it within
 * the call: it is dismissed without asking the window, an exact answer.
 * Returns false, having recorded nothing, if the window's key changed
 * before the first operation it would have recorded: the caller hashes
 * again and calls again.
 */
static bool
apply_ops(Relation heap, Relation index, const FbfOps *ops,
		  const FbfWindowKeying *keying, bool track_mismatch, bool *applied,
		  FbfApplyTally *tally)
{
	const FbfWindowOp *hashed = ops->hashed;
	/* one operation alone has nothing to keep its locks for */
	FbfWindowHold *hold = ops->n > 1 ? FbfWindowHoldCreate(index) : NULL;
	/* applied, in ops' order: record_deltas reads it in sequence */
	bool	   *is_new = track_mismatch ? palloc(Max(ops->n, 1)) : NULL;
	bool		recorded = false;
	ReserveLease lease = {0};
	int			i;

	tally->sum = int64_to_int128(0);
	tally->napplied = 0;
	tally->nmismatched = 0;
	tally->nexact = 0;
	tally->nfilter = 0;
	tally->naverted = 0;
	tally->overfull = false;
	tally->stale_keying = false;
	for (i = 0; i < ops->n; i++)
	{
		FbfApplyInfo info = {0};
		bool		repeat = i > 0 && hashed[i].hash.h1 == hashed[i - 1].hash.h1 &&
			hashed[i].hash.h2 == hashed[i - 1].hash.h2;
		FbfOpResult r = FBF_OP_DUPLICATE;

		if (!repeat)
			r = apply_reserved(heap, index, ops, keying, &hashed[i],
							   ops->n - i, hold, &info, &lease);
		if (r == FBF_OP_REKEYED)
		{
			end_hold(hold);
			if (!recorded)
			{
				if (is_new != NULL)
					pfree(is_new);
				return false;
			}
			rekeyed_error(index, ops->ids != NULL);
		}
		applied[ops->place[i]] = r == FBF_OP_APPLIED;
		if (is_new != NULL)
			is_new[i] = r == FBF_OP_APPLIED;
		if (repeat)
			tally->nexact++;
		else
			count_answer(info.answer, tally);
		tally->overfull |= info.overfull;
		tally->stale_keying |= !repeat && info.stale_keying;
		if (r == FBF_OP_APPLIED)
		{
			charge_share(heap, index, ops, &info, ops->n - i, hold);
			recorded = true;
			if (ops->deltas != NULL)
				int128_add_int64(&tally->sum, ops->deltas[i]);
			tally->napplied++;
		}
		CHECK_FOR_INTERRUPTS();
	}
	if (track_mismatch)
	{
		record_deltas(heap, index, ops, keying, is_new, hold, tally);
		pfree(is_new);
	}
	end_hold(hold);
	return true;
}

/*
 * The apply engine: apply the operations `ops` (FbfOpsPrepare, or claims
 * from FbfOpsFromIds) to the table `heap` and its window `index`, opened
 * with RowExclusiveLock (FbfCounterOpen) and admitted by the caller (row
 * security).  On return applied[k] says whether the caller's operation k
 * (ops->place) was new.
 *
 * Once the window is open the operations are hashed under its key
 * (FbfOpsHash) and asked in that order, again from the start if the key
 * changes before anything is recorded (40001 if after).  They go to the
 * window one at a time, each waiting for a concurrent transaction that has
 * the same operation in flight, in the canonical order, so that two
 * transactions never wait for each other (counter_op.c).
 *
 * With the window's option track_mismatch (counters only: dedup windows
 * refuse it), an applied operation also records its delta identity
 * (FbfDeltaHash) in the same (sub)transaction, so that it shares the
 * operation's fate and lifetime; a dismissed one looks its delta identity
 * up (FbfWindowContains: no record, no wait) and is counted mismatched if
 * the window does not hold it.  Both after the call's operations, in the
 * delta identities' own canonical order (record_deltas).
 *
 * If any operation applied and `add_delta` is not NULL, it is called with
 * the sum of their deltas (22003 if that sum does not fit in bigint;
 * nothing is then applied, as the error aborts the transaction that
 * recorded the operations).  Then each operation is counted in the
 * registry's statistics (applied or dismissed, and who answered it: the
 * pending chain or a stream exactly, or the filter; FbfApplyInfo.answer),
 * and the window grown if it asked to.
 */
void
FbfEngineApply(Relation heap, Relation index, FbfOps *ops,
			   FbfApplyDelta add_delta, void *arg, bool *applied)
{
	bool		track_mismatch = FbfWindowGetOptions(index)->track_mismatch;
	FbfWindowKeying keying;
	FbfApplyTally tally;
	FbfCounterCounts counts;

	Assert(ops->deltas != NULL || !track_mismatch);
	/* hashed under the window's key; reread, and again, if it is not */
	FbfWindowGetKeying(index, false, &keying);
	FbfOpsHash(ops, &keying);
	while (!apply_ops(heap, index, ops, &keying, track_mismatch, applied,
					  &tally))
	{
		FbfWindowGetKeying(index, true, &keying);
		FbfOpsHash(ops, &keying);
	}

	if (tally.napplied > 0 && add_delta != NULL)
	{
		if (int128_compare(tally.sum, int64_to_int128(PG_INT64_MIN)) < 0 ||
			int128_compare(tally.sum, int64_to_int128(PG_INT64_MAX)) > 0)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("bigint out of range"),
					 errdetail("The deltas of the %d operations this call applies add up to more than bigint holds.",
							   tally.napplied)));
		add_delta(heap, index, ops, int128_to_int64(tally.sum), arg);
	}
	counts.applied = tally.napplied;
	counts.dismissed = ops->n - tally.napplied;
	counts.mismatched = tally.nmismatched;
	counts.exact = tally.nexact;
	counts.filter = tally.nfilter;
	counts.averted = tally.naverted;
	FbfStatsCount(MyDatabaseId, RelationGetRelid(heap), &counts);
	if (ops->n > 0)
		note_operations();

	/* more operations than the filter's bits are for: grow it now */
	if (tally.overfull)
		FbfCounterGrow(index);

	/* lookups the window no longer asks: the next call need not hash them */
	if (tally.stale_keying)
		FbfWindowGetKeying(index, true, &keying);
}

/*
 * The counters' FbfApplyDelta: add `sum` to this backend's shard row of
 * the operations' key (FbfCounterAddDelta); `arg` points to whether row
 * security applies to the user.
 */
static void
counter_add_delta(Relation heap, Relation index, const FbfOps *ops,
				  int64 sum, void *arg)
{
	FbfCounterAddDelta(heap, ops->key, sum,
					   FbfWindowGetOptions(index)->shards, *(bool *) arg);
}

/*
 * Under row security, answer only a user who could have applied operations
 * on `key`, before the window is asked (which may wait for another
 * tenant's transaction): the row statement adding nothing to this
 * backend's shard row of the key (FbfCounterAddDelta), so that the key's
 * policies judge the user as they would a new operation.  `index` is the
 * counter's window index, whose option `shards` names the row; NULL on a
 * routed shell, whose window index is then opened here with
 * AccessShareLock to read it.
 */
static void
rls_zero_delta(Relation heap, Relation index, text *key)
{
	Relation	window = index;

	if (window == NULL)
		window = index_open(FbfCounterRelGet(heap)->window_index,
							AccessShareLock);
	FbfCounterAddDelta(heap, key, 0, FbfWindowGetOptions(window)->shards, true);
	if (index == NULL)
		index_close(window, AccessShareLock);
}

/*
 * The increment path, shared by every caller: apply the operations `ops`
 * (FbfOpsPrepare) on their key of the counter `relid`, as the calling
 * user, through the engine (FbfEngineApply), whose answers land in
 * applied[].  The applied operations' deltas are added, as their sum, to
 * this backend's shard row of the key in one update.  If `value` is not
 * NULL, it is set to the key's value afterwards, as the transaction sees
 * it.
 *
 * A counter distributed by Citus by its key is handed to the route
 * registered at init (FbfCounterRoute.apply), which applies the operations
 * on the node of the key's shard, where this same path runs on the shard
 * table (fbf_apply_on_placement).
 *
 * Locks: RowExclusiveLock on the table and its window index, privileges
 * checked before (FbfCounterOpenRoutable); on a routed shell, the shell
 * only, and AccessShareLock on its window index under row security.
 */
void
FbfCounterApply(Oid relid, FbfOps *ops, bool *applied, int64 *value)
{
	text	   *key = ops->key;
	int			nops = ops->n;
	Relation	heap;
	Relation	index;
	bool		rls;

	if (FbfCounterOpenRoutable(relid, FBF_COUNTER_INCREMENT, RowExclusiveLock,
							   &heap, &index))
	{
		/*
		 * Distributed by Citus: applied on the node of the key's shard,
		 * where its policies judge the caller again.  Under row security
		 * they judge it here first, with the row statement adding nothing
		 * (rls_zero_delta), which Citus routes as any statement: the routed
		 * statement's CTE is subject to them too, and Citus cannot route a
		 * statement whose policies rule out the key's shard (XX000, "could
		 * not find valid entry for shard 0") where this one is refused as
		 * on one node (42501).
		 */
		if (nops > 0 && check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
			rls_zero_delta(heap, NULL, key);
		FbfCounterGetRoute()->apply(heap, FbfCounterRelGet(heap)->qualname,
									ops, applied, value);
		FbfCounterClose(heap, NULL);
		return;
	}

	/* under row security, the key's policies judge the user first */
	rls = check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED;
	if (rls && nops > 0)
		rls_zero_delta(heap, index, key);

	FbfEngineApply(heap, index, ops, counter_add_delta, &rls, applied);

	if (value != NULL)
		*value = FbfCounterSum(heap, key, false);
	FbfCounterClose(heap, index);
}
