/*-------------------------------------------------------------------------
 *
 * registry.h
 *	  What the server knows of its counters, in shared memory: per-counter
 *	  statistics, and which databases have counters (the worker reads it to
 *	  decide where to run maintenance; counter creation and increments
 *	  fill it).
 *
 * A leaf subsystem: it depends on nothing else of fbf, so the window
 * index, the counters and the worker may all report to it.  Its contents
 * are not durable: a restart starts it empty.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_REGISTRY_H
#define FBF_REGISTRY_H

#include "postgres.h"

#include "utils/timestamp.h"

/*
 * What a call did to a counter's (or dedup table's) operations, counted in
 * its stats entry by FbfStatsCount; who answered them (exact, filter)
 * counts every operation the window was asked about, or dismissed as a
 * repeat within the call.
 */
typedef struct FbfCounterCounts
{
	uint64		applied;
	uint64		dismissed;
	uint64		mismatched;		/* dismissed, and the delta differed */
	uint64		exact;			/* answered exactly: a pending chain, a
								 * stream, a repeat within the call */
	uint64		filter;			/* answered by the filter */
	uint64		averted;		/* of `exact`: a stream's "new" where the
								 * filter said "seen" */
} FbfCounterCounts;

typedef struct FbfCounterStatsSnapshot
{
	FbfCounterCounts counts;	/* since the server started */
	TimestampTz last_maintained;
} FbfCounterStatsSnapshot;

/* set up the shared memory hooks; from _PG_init */
extern void FbfRegistryInit(void);

extern void FbfStatsCount(Oid dbid, Oid relid, const FbfCounterCounts *counts);
extern bool FbfStatsMaintained(Oid dbid, Oid relid, TimestampTz when);
extern void FbfStatsGet(Oid dbid, Oid relid, FbfCounterStatsSnapshot *out);

/* What a maintenance pass in a database found (FbfDatabasePassDone). */
typedef struct FbfPassOutcome
{
	bool		has_extension;
	TimestampTz next_due;		/* when the next pass is due */
	TimestampTz soonest;		/* when it would be due, were the database
								 * busy: a naptime after this pass */
	bool		idle;			/* no new operation: it puts the database
								 * off for longer than a naptime */
	int			waits;			/* passes in a row, this one the last, that
								 * found operations of open transactions
								 * and no new one; else 0 */
} FbfPassOutcome;

/* the launcher's schedule of maintenance passes, by database */
extern void FbfDatabaseSchedule(Oid dbid, TimestampTz *next_due,
								TimestampTz *last_pass);
extern void FbfDatabasePassStarted(Oid dbid, TimestampTz now, int retry_ms);
extern int	FbfDatabaseWaits(Oid dbid);
extern void FbfDatabasePassDone(Oid dbid, const FbfPassOutcome *outcome);
extern uint64 FbfDatabaseIdlePasses(Oid dbid);
extern void FbfDatabaseHasCounters(Oid dbid);
extern void FbfDatabaseHasOperations(Oid dbid);
extern void FbfDatabaseHasCountersAtCommit(void);
extern void FbfDatabasePassAttached(Oid dbid, pid_t pid);
extern bool FbfDatabasePassMayStay(Oid dbid, bool give_slot);
extern bool FbfDatabaseLettingGo(Oid dbid);
extern pid_t FbfDatabaseLetGo(Oid dbid, TimestampTz until);
extern pid_t FbfDatabasePassPid(Oid dbid);
extern void FbfPassesWanted(int slots);

/* ----------------------------------------------------------------------
 * share.c: shares of a window's capacity
 * ----------------------------------------------------------------------
 */

/*
 * A share table whose counter has entries in flight only of transactions
 * begun at least this long ago may be given to another counter when none
 * is free: its holders' releases then find another generation and let go
 * of nothing.
 */
#define FBF_SHARE_STALE_SECS	10

/*
 * One operation a window has just recorded, to charge to whoever pays for
 * it (FbfShareCharge), with what the window can take
 * (window/window.h, FbfWindowCapacity).
 */
typedef struct FbfShareDemand
{
	uint64		unit;			/* who pays: a role, a key, or the pool;
								 * never 0 */
	bool		pooled;			/* one pool: no unit has a share */
	int64		epoch;			/* the window's period */
	double		per_period;		/* new operations it takes per period */
	double		in_flight;		/* entries its chains hold */
	int			entries;		/* the entries this operation took */
	int			asking;			/* the call's operations from this one on,
								 * all asked for if it is refused */
	bool		on_reserve;		/* ... on its chain's reserve */
	bool		waits;			/* ... to wait there for the next period's
								 * bits */
} FbfShareDemand;

typedef enum FbfShareVerdict
{
	FBF_SHARE_ADMITTED,
	FBF_SHARE_OVER_RATE,		/* the unit is over its share of the
								 * period's new operations */
	FBF_SHARE_OVER_IN_FLIGHT,	/* its transactions hold their share of the
								 * entries in flight */
	FBF_SHARE_OVER_WAITING,		/* an operation that would wait for the
								 * next period's bits, of a unit that holds
								 * its share of the chains' entries (in
								 * flight or waiting) */
	FBF_SHARE_NO_TABLE			/* every share table is held by counters with
								 * entries in flight of recent transactions:
								 * nothing counted, nothing held */
} FbfShareVerdict;

/* What a verdict was judged by, for the refusal's message. */
typedef struct FbfShareStanding
{
	FbfShareVerdict verdict;
	double		used;			/* OVER_RATE: the part of the period's
								 * capacity the unit took; OVER_IN_FLIGHT:
								 * its entries in flight; OVER_WAITING:
								 * its entries on the chains, with the
								 * operation's */
	double		share;			/* its share of it */
	double		capacity;		/* the period's new operations, or the
								 * chains' entries (before their reserve,
								 * for those that wait) */
	double		sharers;		/* the shares its units stand for (one a
								 * unit, more for the units the table
								 * cannot tell apart) */
} FbfShareStanding;

/*
 * What a unit asked of a counter's last two periods beside the others
 * (FbfShareWeigh): whether it may take the reserve of the window's pending
 * chains.
 */
typedef enum FbfShareWeight
{
	FBF_SHARE_LIGHT,			/* no more than its part of them (of the
								 * units not told apart: their slot's, or
								 * less than its even part of the slot) */
	FBF_SHARE_HEAVY,			/* more than max-min fairness gives it */
	FBF_SHARE_ALONE,			/* the only unit that asked any */
	FBF_SHARE_SPENT				/* light, but it took as much of the
								 * reserve this period as is left of it */
} FbfShareWeight;

extern Size FbfShareShmemSize(void);
extern void FbfShareShmemRequest(void);
extern void FbfShareShmemInit(void);
extern FbfShareVerdict FbfShareCharge(Oid dbid, Oid relid,
									  const FbfShareDemand *demand,
									  FbfShareStanding *standing);
extern FbfShareWeight FbfShareWeigh(Oid dbid, Oid relid, uint64 unit,
									int64 epoch, double reserve_free,
									double asking);
extern void FbfShareForget(Oid dbid, Oid relid);

#endif							/* FBF_REGISTRY_H */
