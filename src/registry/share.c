/*-------------------------------------------------------------------------
 *
 * share.c
 *	  Shares of a window's capacity: who took how much of what a counter's
 *	  window can hold at its target, in shared memory, so that no one's
 *	  load can make the window dismiss or refuse anyone else's operations.
 *
 * A window can take so many new operations per period under its target
 * false-positive rate, and its pending chains hold so many entries of
 * open transactions (window/window.h, FbfWindowCapacity).  Both are
 * divided among the *units* that use the window: roles or keys, as the
 * counter's option share_by says (the caller chooses the unit; this file
 * only counts); or not divided at all (`pooled`: the period's new
 * operations are limited to what the window can take, and the chains hold
 * what they hold).  Per counter, a share table counts for each unit what
 * its new operations took of the window's current period and of the one
 * before, what they asked of them (refused or rolled back too), and the
 * entries its open and prepared transactions hold in flight.
 *
 * FbfShareCharge admits one recorded operation or refuses it:
 *
 *	- rate: an operation takes 1 / per_period of its period's capacity
 *	  (per_period: what the window takes per period under its target once
 *	  grown as far as fbf.max_filter_size lets it; a window below its cap
 *	  grows for the load, its drains waiting for the bits rather than
 *	  saturating them, window/window_pending.c).  The `n` units active in
 *	  this period or the one before (or holding entries in flight) each
 *	  have a share of 1 / n of it.  A table tells FBF_SHARE_UNITS units
 *	  apart; the rest share its last slot, which stands for as many shares
 *	  as it saw units (others_weight), so that units beyond the table's
 *	  count are not squeezed into one share, and counts its heaviest units
 *	  apart (others_count), so that past its level those of them within a
 *	  share of their own are still admitted, up to its share more: the
 *	  others beside one of them that floods it; in the other units'
 *	  divisions its heaviest unit demands as one share (add_demand), so
 *	  that a flood there is not weighed as if spread over all the shares
 *	  the slot stands for.  Within its share a unit is always
 *	  admitted.  Beyond it, up to the water level of max-min fairness
 *	  over FBF_SHARE_BEYOND of the capacity, each other unit demanding what
 *	  it took this period or the one before (judge_rate): light units may
 *	  burst past 1/n, a heavy one takes what they leave.  So no unit within
 *	  its share is refused, and the period takes more than its capacity
 *	  only by what units take beyond their last period's within their
 *	  shares (a newcomer, or one whose load grows), for that period.
 *	- in flight: a unit's open and prepared transactions hold at most
 *	  FBF_SHARE_IN_FLIGHT of the chains' entries over n: even a unit alone
 *	  leaves room for the next ones.  Charged when an entry is recorded,
 *	  released when its transaction ends (the transaction callback below);
 *	  a prepared transaction's charge moves to a row of the table with its
 *	  xid (one for each transaction the server may have prepared, up to
 *	  FBF_SHARE_PREPARED_MAX, beyond which PREPARE is refused) and is
 *	  released once the xid is no longer in progress, looked at when the
 *	  unit would be refused and when the period rolls.
 *	- waiting: an operation whose entries will wait on the chains for the
 *	  next period's bits (its filter page holds what a drain may store
 *	  there, as the window tells: FbfShareDemand.waits; a cuckoo block's
 *	  entries wait for the window to grow, or, in the period it split in,
 *	  for the next, and are counted as long as a Bloom page's would) is
 *	  judged as the rate is, of
 *	  the part of the chains before their reserve, what its unit has
 *	  there (its entries in flight, and those of its committed operations
 *	  that wait, counted as their transactions commit, of this period and
 *	  the one before; a prepared transaction's only while it is prepared,
 *	  its COMMIT PREPARED being another backend's) against its share of it
 *	  and what it may take beyond (judge_waits; the last slot as one unit
 *	  of its weight, past whose level those of its units that took less
 *	  than their even part of it go on, up to its share more): a unit
 *	  within its share of the rate whose load is far above the window's
 *	  plan would fill the chains otherwise, and leave the others only
 *	  their reserve.
 *	- a transaction that aborts gives back what its operations took of the
 *	  period, if the period is still the same: they never reach the bits;
 *	  so does a subtransaction that aborts, with what its operations hold
 *	  in flight (a subtransaction that commits leaves its charges to its
 *	  parent).
 *	- heavy: FbfShareWeigh tells a window's caller, when one of a unit's
 *	  operations would take the last part of a pending chain (its reserve,
 *	  window/window_apply.c), whether the unit asked more of this period
 *	  and the one before than max-min fairness gives it of FBF_SHARE_RESERVE
 *	  of what every unit asked (a flood that fills the chains with entries
 *	  waiting for the next period's bits is refused there, leaving that
 *	  part to the others; what it asked counts its refused operations and
 *	  those its aborted transactions gave back, so that being refused
 *	  never makes it the lighter; the last slot is weighed as one unit,
 *	  and of it only those that took their even part of it or more are
 *	  heavy; beside another unit, as its heaviest unit and the rest:
 *	  add_demand), or was the only one to ask any (which
 *	  the caller lets take it only while the window can still grow); and
 *	  whether a light unit has already put on the reserve this period as
 *	  much as is left of it (so none takes it all).
 *
 * Nothing here is durable: a restart starts every count at zero, and the
 * entries of transactions prepared before it are charged to no one.  A
 * table is given to another counter when it is free, has nothing in
 * flight, or was last charged by a transaction begun FBF_SHARE_STALE_SECS
 * ago or more (so that transactions left open or prepared on many counters
 * do not hold every table).  A counter that cannot have one (every table
 * is held by a counter charged lately, with entries in flight) gets
 * FBF_SHARE_NO_TABLE and nothing counted: its caller decides whether the
 * window can take the operation unshared (counter_engine.c).  Temporary
 * counters are not shared (counter_engine.c).
 *
 * Locks: the first lock of the tranche "fbf shares" guards which counter
 * holds which table (exclusive to give or take one; a backend caches the
 * answer with the table's generation and checks it under the table's
 * lock, which is why the locks are kept apart from the tables: a table
 * given to another counter is cleared whole); each table's own lock
 * guards its contents.  A table's lock may
 * be taken under the first (to give the table to a counter, or take it
 * back), never the other way round; nothing else is taken under them but
 * ProcArrayLock (share), by TransactionIdIsInProgress.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/transam.h"
#include "access/twophase.h"
#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "common/fbf_htab.h"
#include "registry/registry.h"

/* counters with a share table at once */
#define FBF_SHARE_TABLES		512
/*
 * After a search found every table held, searches of counters that hold
 * none find none for this long without looking (the counters take their
 * operations unshared meanwhile, counter_engine.c): a search takes the
 * membership lock exclusively and every table's lock in turn.
 */
#define FBF_SHARE_NONE_MS		100
/* units one table tells apart; the rest share its last slot */
#define FBF_SHARE_UNITS			128
/* bits of the sketch that counts the units of the last slot */
#define FBF_SHARE_SKETCH_WORDS	4
#define FBF_SHARE_SKETCH_BITS	(FBF_SHARE_SKETCH_WORDS * 64)
/*
 * Prepared transactions whose in-flight charge a table keeps, at most: as
 * many as the server may have prepared at once (max_prepared_transactions),
 * so that none has to be let go (share_prepared_rows); beyond this many,
 * a transaction is refused PREPARE instead.
 */
#define FBF_SHARE_PREPARED_MAX	256
/* units of the last slot whose fills a table keeps apart (others_count) */
#define FBF_SHARE_OTHERS_TOP	8

/* the part of the chains' entries the units may hold in flight at all */
#define FBF_SHARE_IN_FLIGHT		0.8

/*
 * Beyond its share, a unit takes what the others leave of this part of the
 * period's capacity (judge_rate): a window kept full period after period
 * by one unit's excess strays over its target (pages fuller than the mean,
 * late drains), where units within their shares may still fill it.
 */
#define FBF_SHARE_BEYOND		0.75

/*
 * A unit is heavy (FbfShareWeigh) if it asked more than max-min fairness
 * gives it of this part of what every unit asked: the part of the pending
 * chains that is not their reserve (window/window_apply.c).
 */
#define FBF_SHARE_RESERVE		0.8

/* the slot of the units the table cannot tell apart */
#define OTHERS_SLOT				FBF_SHARE_UNITS

typedef struct FbfShareUnit
{
	uint64		unit;			/* who (FbfShareDemand.unit); 0: free */
	double		fill;			/* of the period's capacity, what its new
								 * operations took this period */
	double		prev;			/* in the period before */
	int64		in_flight;		/* entries of its open and prepared
								 * transactions */
	int64		spent;			/* entries its new operations put on the
								 * chains' reserve this period */
	int64		waits;			/* entries its committed new operations put
								 * on the chains to wait for the next
								 * period's bits, counted this period as
								 * their transactions commit */
	int64		waits_prev;		/* in the period before */
	double		asked;			/* of the period's capacity, what its new
								 * operations asked for this period:
								 * admitted or refused, committed or not
								 * (FbfShareWeigh) */
	double		asked_prev;		/* in the period before */
} FbfShareUnit;

/* a unit of the last slot counted apart, and what it took this period */
typedef struct FbfShareTop
{
	uint64		unit;
	double		fill;			/* 0: free */
} FbfShareTop;

/*
 * A prepared transaction's charges on a table: those of its first
 * FBF_SHARE_PREPARED_SLOTS slots each on its own; any more, on the slot
 * of its largest (keep_for_prepare).
 */
#define FBF_SHARE_PREPARED_SLOTS	4

typedef struct FbfSharePrepared
{
	TransactionId xid;			/* InvalidTransactionId: free */
	int16		nslots;
	int16		slot[FBF_SHARE_PREPARED_SLOTS];
	int32		entries[FBF_SHARE_PREPARED_SLOTS];	/* at most the chains' */
} FbfSharePrepared;

typedef struct FbfShareTable
{
	Oid			dbid;			/* InvalidOid: free */
	Oid			relid;
	uint64		generation;		/* bumped when given to another counter */
	int64		epoch;			/* the window's period the counts are for */
	int			nactive;		/* active units (unit_active) */
	double		fill;			/* everyone's this period */
	TimestampTz last_used;
	int64		in_flight;		/* all units' */
	/* the units of the others' slot, this period and the one before */
	uint64		others_seen[FBF_SHARE_SKETCH_WORDS];
	uint64		others_prev[FBF_SHARE_SKETCH_WORDS];
	/* the heaviest of them this period (others_count), and the period before */
	FbfShareTop others_top[FBF_SHARE_OTHERS_TOP];
	FbfShareTop others_top_prev[FBF_SHARE_OTHERS_TOP];
	/* what aborted transactions of them gave back, this period and the one before */
	double		others_given_back;
	double		others_given_back_prev;
	FbfShareUnit units[FBF_SHARE_UNITS + 1];
} FbfShareTable;

typedef struct FbfShareShared
{
	LWLock	   *lock;			/* which counter holds which table */
	/*
	 * Each table's lock, apart from the table: a table given to another
	 * counter is cleared while backends holding an old answer of
	 * find_table read which lock to take without holding any (set once)
	 */
	LWLock	   *table_locks[FBF_SHARE_TABLES];
	int			nprepared;		/* rows of prepared transactions a table
								 * has (share_prepared_rows) */
	pg_atomic_uint64 none_until;	/* no table to be had before this
									 * (FBF_SHARE_NONE_MS) */
	FbfShareTable tables[FBF_SHARE_TABLES];
	/* each table's rows of prepared transactions, table after table */
	FbfSharePrepared prepared[FLEXIBLE_ARRAY_MEMBER];
} FbfShareShared;

static FbfShareShared *Shares = NULL;

/* this backend's map of counters to tables, checked before use */
typedef struct ShareCacheEntry
{
	Oid			relid;			/* hash key (this database's) */
	int			table;			/* -1: none could be had (none_until) */
	uint64		generation;
} ShareCacheEntry;

static HTAB *share_cache = NULL;

/*
 * What a transaction's operations took of their period: given back if it
 * aborts (they never reach the bits) and the period is still the same.
 */
typedef struct SharePeriodCharge
{
	double		fill;			/* of the period's capacity */
	int64		spent;			/* entries on the chains' reserve */
} SharePeriodCharge;

/*
 * What the current transaction holds in flight, released at its end, and
 * what its operations took of their period, given back if it aborts (its
 * operations never reach the bits) and the period is still the same.
 */
typedef struct ShareHeld
{
	int			table;
	uint64		generation;
	int			slot;
	int			nestlevel;		/* of the subtransaction that made it */
	int64		entries;
	int64		epoch;			/* the period of `took` */
	SharePeriodCharge took;
	int64		waits;			/* entries of its operations that wait for
								 * the next period's bits: counted in the
								 * slot's `waits` if it commits */
	int			row;			/* its table's row of the transaction being
								 * prepared, -1 if none (yet) */
	bool		done;			/* let go of (share_xact_callback) */
} ShareHeld;

static ShareHeld *held = NULL;
static int	nheld = 0;
static int	maxheld = 0;
static TransactionId prepare_xid = InvalidTransactionId;	/* keep_for_prepare's */
static bool callback_registered = false;

/*
 * Rows of prepared transactions per table: one for each transaction the
 * server may have prepared at once, up to FBF_SHARE_PREPARED_MAX
 * (max_prepared_transactions is fixed at server start).
 */
static int
share_prepared_rows(void)
{
	return Min(max_prepared_xacts, FBF_SHARE_PREPARED_MAX);
}

Size
FbfShareShmemSize(void)
{
	return MAXALIGN(add_size(offsetof(FbfShareShared, prepared),
							 mul_size(sizeof(FbfSharePrepared),
									  mul_size(FBF_SHARE_TABLES,
											   share_prepared_rows()))));
}

void
FbfShareShmemRequest(void)
{
	RequestNamedLWLockTranche("fbf shares", FBF_SHARE_TABLES + 1);
}

/* from the shmem startup hook, under AddinShmemInitLock */
void
FbfShareShmemInit(void)
{
	bool		found;
	int			t;

	Shares = ShmemInitStruct("fbf shares", FbfShareShmemSize(), &found);
	if (found)
		return;
	memset(Shares, 0, FbfShareShmemSize());
	Shares->nprepared = share_prepared_rows();
	pg_atomic_init_u64(&Shares->none_until, 0);
	Shares->lock = &(GetNamedLWLockTranche("fbf shares"))[0].lock;
	for (t = 0; t < FBF_SHARE_TABLES; t++)
		Shares->table_locks[t] = &(GetNamedLWLockTranche("fbf shares"))[t + 1].lock;
}

/* the lock of table `t` */
static inline LWLock *
table_lock(const FbfShareTable *t)
{
	return Shares->table_locks[t - Shares->tables];
}

/* the rows of prepared transactions of table `t` */
static inline FbfSharePrepared *
table_prepared(const FbfShareTable *t)
{
	return &Shares->prepared[(t - Shares->tables) * Shares->nprepared];
}

/* does a unit count among those sharing the table's capacity? */
static inline bool
unit_active(const FbfShareUnit *u)
{
	return u->fill > 0 || u->prev > 0 || u->in_flight > 0;
}

/* what a unit asked of this period and the one before (FbfShareWeigh) */
static inline double
unit_asked(const FbfShareUnit *u)
{
	return u->asked + u->asked_prev;
}

/*
 * Does a unit keep its slot: active, or with demands of these two periods
 * to weigh (a flood whose every operation was refused, or whose
 * transactions aborted, took nothing and is not active, yet asked)?
 */
static inline bool
unit_known(const FbfShareUnit *u)
{
	return unit_active(u) || unit_asked(u) > 0;
}

/* count the active units again (the table's lock held exclusively) */
static void
count_active(FbfShareTable *t)
{
	int			s;

	t->nactive = 0;
	for (s = 0; s <= OTHERS_SLOT; s++)
	{
		if (unit_active(&t->units[s]))
			t->nactive++;
		else if (s < OTHERS_SLOT && !unit_known(&t->units[s]))
			t->units[s].unit = 0;
	}
}

/*
 * A slot that was active (`was`) and no longer is stops counting among
 * the table's units, and one of its own, with no demand to weigh, is free
 * for another unit (the table's lock held exclusively).
 */
static void
stop_counting(FbfShareTable *t, int slot, bool was)
{
	if (was && !unit_active(&t->units[slot]))
	{
		t->nactive--;
		if (slot < OTHERS_SLOT && !unit_known(&t->units[slot]))
			t->units[slot].unit = 0;
	}
}

/*
 * Give back `entries` of a slot's in-flight charge, and what it `took` of
 * the period `epoch` (none: NULL), if that is still the table's period;
 * of those entries, `waits` committed to wait on the chains for the next
 * period's bits (the table's lock held).
 */
static void
release(FbfShareTable *t, int slot, int64 entries, int64 epoch,
		const SharePeriodCharge *took, int64 waits)
{
	FbfShareUnit *u = &t->units[slot];
	bool		was = unit_active(u);

	u->in_flight -= Min(entries, u->in_flight);
	t->in_flight -= Min(entries, t->in_flight);
	u->waits += waits;
	if (took != NULL && epoch == t->epoch)
	{
		u->fill -= Min(took->fill, u->fill);
		t->fill -= Min(took->fill, t->fill);
		u->spent -= Min(took->spent, u->spent);
		if (slot == OTHERS_SLOT)
			t->others_given_back += took->fill;
	}
	stop_counting(t, slot, was);
}

/*
 * Release the charges of prepared transactions that have ended (the
 * table's lock held exclusively).
 */
static void
sweep_prepared(FbfShareTable *t)
{
	FbfSharePrepared *rows = table_prepared(t);
	int			p;

	for (p = 0; p < Shares->nprepared; p++)
	{
		FbfSharePrepared *row = &rows[p];

		if (TransactionIdIsValid(row->xid) &&
			!TransactionIdIsInProgress(row->xid))
		{
			int			i;

			for (i = 0; i < row->nslots; i++)
				release(t, row->slot[i], row->entries[i], 0, NULL, 0);
			row->xid = InvalidTransactionId;
		}
	}
}

/*
 * Move the table to the window's period `epoch`: the counts of the period
 * before become `prev` if it is the next one, else everything is
 * forgotten but what is in flight; prepared transactions that ended give
 * back their charge, so that none keeps its unit counted for long.
 */
static void
roll(FbfShareTable *t, int64 epoch)
{
	bool		next = epoch == t->epoch + 1;
	int			s;

	for (s = 0; s <= OTHERS_SLOT; s++)
	{
		t->units[s].prev = next ? t->units[s].fill : 0;
		t->units[s].fill = 0;
		t->units[s].spent = 0;
		t->units[s].waits_prev = next ? t->units[s].waits : 0;
		t->units[s].waits = 0;
		t->units[s].asked_prev = next ? t->units[s].asked : 0;
		t->units[s].asked = 0;
	}
	for (s = 0; s < FBF_SHARE_SKETCH_WORDS; s++)
	{
		t->others_prev[s] = next ? t->others_seen[s] : 0;
		t->others_seen[s] = 0;
	}
	if (next)
		memcpy(t->others_top_prev, t->others_top, sizeof(t->others_top));
	else
		memset(t->others_top_prev, 0, sizeof(t->others_top_prev));
	memset(t->others_top, 0, sizeof(t->others_top));
	t->others_given_back_prev = next ? t->others_given_back : 0;
	t->others_given_back = 0;
	t->fill = 0;
	t->epoch = epoch;
	sweep_prepared(t);
	count_active(t);
}

/*
 * The slot of its own `unit` has, or -1; *free_slot the first free one
 * it would claim (-1: none, its slot is the others')
 */
static int
own_slot(const FbfShareTable *t, uint64 unit, int *free_slot)
{
	int			start = (int) (unit % FBF_SHARE_UNITS);
	int			i;

	*free_slot = -1;
	for (i = 0; i < FBF_SHARE_UNITS; i++)
	{
		int			s = (start + i) % FBF_SHARE_UNITS;

		if (t->units[s].unit == unit)
			return s;
		if (*free_slot < 0 && t->units[s].unit == 0)
			*free_slot = s;
	}
	return -1;
}

/* the slot of `unit`, claiming a free one, else the others' slot */
static int
unit_slot(FbfShareTable *t, uint64 unit)
{
	int			free_slot;
	int			s = own_slot(t, unit, &free_slot);

	if (s >= 0)
		return s;
	if (free_slot < 0)
		return OTHERS_SLOT;
	memset(&t->units[free_slot], 0, sizeof(FbfShareUnit));
	t->units[free_slot].unit = unit;
	return free_slot;
}

/*
 * How many units the others' slot stands for: the distinct units it saw
 * this period and the one before, counted by linear counting over a
 * bitmap (within a few percent up to a few hundred units, then saturating
 * at about 1,400), at least 1 while the slot is active.  Its units share
 * as many shares as they are, as the units with slots of their own each
 * have one.
 */
static double
others_weight(const FbfShareTable *t)
{
	int			set = 0;
	int			w;

	if (!unit_active(&t->units[OTHERS_SLOT]))
		return 0;
	for (w = 0; w < FBF_SHARE_SKETCH_WORDS; w++)
		set += pg_popcount64(t->others_seen[w] | t->others_prev[w]);
	if (set == FBF_SHARE_SKETCH_BITS)
		set = FBF_SHARE_SKETCH_BITS - 1;
	return Max(1.0, -FBF_SHARE_SKETCH_BITS *
			   log(1.0 - (double) set / FBF_SHARE_SKETCH_BITS));
}

/* the shares slot `slot` stands for (others_weight for the last) */
static double
slot_weight(const FbfShareTable *t, int slot)
{
	return slot == OTHERS_SLOT ? Max(others_weight(t), 1.0) : 1.0;
}

/*
 * The shares the table's active units stand for: one per slot of its own,
 * others_weight for the last.
 */
static double
sharers(const FbfShareTable *t)
{
	double		n = t->nactive;

	if (unit_active(&t->units[OTHERS_SLOT]))
		n += others_weight(t) - 1;
	return Max(n, 1.0);
}

/*
 * Count `cost` of `unit`, of the last slot, among the heaviest units of
 * that slot this period: the weighted Misra-Gries summary, whose count of
 * a unit is never more than what it was admitted, and less by at most what
 * the slot admitted this period over FBF_SHARE_OTHERS_TOP + 1, so that a
 * unit taking most of the slot is counted nearly whole.  (What an aborted
 * transaction gives back is not taken off here: it counts against its
 * unit alone, which may then be refused past the slot's level, as every
 * unit of the slot was before the summary; others_kept, which add_demand
 * reads, takes what the slot's aborted transactions gave back off every
 * count.)
 */
static void
others_count(FbfShareTable *t, uint64 unit, double cost)
{
	FbfShareTop *top = t->others_top;
	double		least = cost;
	int			free_i = -1;
	int			i;

	for (i = 0; i < FBF_SHARE_OTHERS_TOP; i++)
	{
		if (top[i].fill > 0 && top[i].unit == unit)
		{
			top[i].fill += cost;
			return;
		}
		if (top[i].fill <= 0 && free_i < 0)
			free_i = i;
		if (top[i].fill > 0)
			least = Min(least, top[i].fill);
	}
	if (free_i < 0)
	{
		/* all counted: each, this one too, gives up the least of them */
		for (i = 0; i < FBF_SHARE_OTHERS_TOP; i++)
		{
			top[i].fill -= least;
			if (top[i].fill <= 0 && free_i < 0)
				free_i = i;
		}
		cost -= least;
	}
	if (cost > 0)
	{
		Assert(free_i >= 0);
		top[free_i].unit = unit;
		top[free_i].fill = cost;
	}
}

/* what a summary (others_count) counts of `unit`: 0 if none */
static double
top_fill(const FbfShareTop *top, uint64 unit)
{
	int			i;

	for (i = 0; i < FBF_SHARE_OTHERS_TOP; i++)
		if (top[i].fill > 0 && top[i].unit == unit)
			return top[i].fill;
	return 0;
}

/* what `unit` of the last slot took this period, as others_count counts */
static double
others_fill(const FbfShareTable *t, uint64 unit)
{
	return top_fill(t->others_top, unit);
}

/*
 * What `unit` of the last slot took and kept this period and the one
 * before, at most: what the summaries count of it (others_count), less
 * all that the slot's aborted transactions gave back in that period, since
 * the table does not know whose they were.  Never more than it kept, whoever
 * aborts.  (A free count's unit took nothing.)
 */
static double
others_kept(const FbfShareTable *t, uint64 unit)
{
	return Max(top_fill(t->others_top, unit) - t->others_given_back, 0) +
		Max(top_fill(t->others_top_prev, unit) - t->others_given_back_prev, 0);
}

/*
 * Did `unit` of the last slot take less than its even part of what the
 * slot took this period (its fill over the units the slot stands for)?
 * One the summary does not count took less than any it counts; the only
 * unit of the slot takes all of it, and is never light.
 */
static bool
others_light(const FbfShareTable *t, uint64 unit)
{
	const FbfShareUnit *u = &t->units[OTHERS_SLOT];

	return others_fill(t, unit) * slot_weight(t, OTHERS_SLOT) < u->fill;
}

/* charges of transactions begun before this are stale (FBF_SHARE_STALE_SECS) */
static TimestampTz
stale_before(void)
{
	return TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
									   -FBF_SHARE_STALE_SECS * 1000);
}

/*
 * May the table be given to another counter: it holds none, nothing is in
 * flight on it, or its last charge is stale (its table lock or the
 * membership lock held)?
 */
static bool
table_free(const FbfShareTable *t, TimestampTz stale)
{
	return t->dbid == InvalidOid || t->in_flight == 0 || t->last_used < stale;
}

/*
 * The table counter (dbid, relid) holds, else the one to give it: a free
 * one, else the least recently used that table_free allows; -1 if none
 * (the membership lock held exclusively).
 */
static int
pick_table(Oid dbid, Oid relid)
{
	TimestampTz stale = stale_before();
	TimestampTz oldest = PG_INT64_MAX;
	int			pick = -1;
	int			t;

	for (t = 0; t < FBF_SHARE_TABLES; t++)
	{
		const FbfShareTable *table = &Shares->tables[t];

		if (table->dbid == dbid && table->relid == relid)
			return t;
		if (table->dbid == InvalidOid)
		{
			if (oldest > PG_INT64_MIN)
			{
				oldest = PG_INT64_MIN;
				pick = t;
			}
		}
		else if (table_free(table, stale) && table->last_used < oldest)
		{
			oldest = table->last_used;
			pick = t;
		}
	}
	return pick;
}

/*
 * The table counter (dbid, relid) holds, without giving it one (nor
 * trusting this backend's cache of it): -1 if it has none.  *generation
 * gets the table's generation, to check under its lock.
 */
static int
held_table(Oid dbid, Oid relid, uint64 *generation)
{
	int			found = -1;
	int			t;

	LWLockAcquire(Shares->lock, LW_SHARED);
	for (t = 0; t < FBF_SHARE_TABLES && found < 0; t++)
	{
		if (Shares->tables[t].dbid == dbid && Shares->tables[t].relid == relid)
		{
			found = t;
			*generation = Shares->tables[t].generation;
		}
	}
	LWLockRelease(Shares->lock);
	return found;
}

/*
 * Give counter (dbid, relid) a table, under the membership lock: one free,
 * else one table_free allows, after letting go of the charges of prepared
 * transactions that have ended; -1 if none, and none for the others either
 * for FBF_SHARE_NONE_MS.  *generation gets the table's generation.
 */
static int
give_table(Oid dbid, Oid relid, uint64 *generation)
{
	int			t;
	int			pick;

	LWLockAcquire(Shares->lock, LW_EXCLUSIVE);
	pick = pick_table(dbid, relid);
	if (pick < 0)
	{
		/*
		 * Every table is held by a counter with entries in flight, of
		 * transactions begun lately: let go of the charges of prepared
		 * transactions that have ended, and look again.
		 */
		for (t = 0; t < FBF_SHARE_TABLES; t++)
		{
			FbfShareTable *table = &Shares->tables[t];

			LWLockAcquire(table_lock(table), LW_EXCLUSIVE);
			sweep_prepared(table);
			LWLockRelease(table_lock(table));
		}
		pick = pick_table(dbid, relid);
	}
	if (pick >= 0 && (Shares->tables[pick].dbid != dbid ||
					  Shares->tables[pick].relid != relid))
	{
		FbfShareTable *table = &Shares->tables[pick];

		/* given to this counter: nothing of the one before is kept */
		LWLockAcquire(table_lock(table), LW_EXCLUSIVE);
		if (table_free(table, stale_before()))
		{
			uint64		gen = table->generation + 1;

			memset(table, 0, sizeof(FbfShareTable));
			memset(table_prepared(table), 0,
				   sizeof(FbfSharePrepared) * Shares->nprepared);
			table->generation = gen;
			table->dbid = dbid;
			table->relid = relid;
			table->epoch = -1;
			table->last_used = GetCurrentTimestamp();
		}
		else
			pick = -1;
		LWLockRelease(table_lock(table));
	}
	if (pick >= 0)
		*generation = Shares->tables[pick].generation;
	else
		pg_atomic_write_u64(&Shares->none_until,
							(uint64) TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
																 FBF_SHARE_NONE_MS));
	LWLockRelease(Shares->lock);
	return pick;
}

/*
 * The table of counter (dbid, relid), given to it if it has none; -1 if
 * none can be had.  *generation gets the table's generation, to check
 * under its lock.
 */
static int
find_table(Oid dbid, Oid relid, uint64 *generation)
{
	ShareCacheEntry *entry;
	bool		found;
	bool		none;
	int			pick;

	if (share_cache == NULL)
		share_cache = FbfHashCreate("fbf share tables", 64, sizeof(Oid),
									sizeof(ShareCacheEntry), TopMemoryContext);
	entry = hash_search(share_cache, &relid, HASH_FIND, NULL);
	if (entry != NULL && entry->table >= 0)
	{
		*generation = entry->generation;
		return entry->table;
	}
	/* a search found none lately: this backend, told so, does not look */
	none = GetCurrentTimestamp() <
		(TimestampTz) pg_atomic_read_u64(&Shares->none_until);
	if (entry != NULL && none)
		return -1;

	/* its own; else one given to it, unless a search found none lately */
	pick = held_table(dbid, relid, generation);
	if (pick < 0 && !none)
		pick = give_table(dbid, relid, generation);

	/* -1 remembered too, for as long as none_until says */
	entry = hash_search(share_cache, &relid, HASH_ENTER, &found);
	entry->table = pick;
	entry->generation = pick >= 0 ? *generation : 0;
	return pick;
}

/* are held charges `i` and `j` on the same table, of one generation? */
static inline bool
held_together(int i, int j)
{
	return held[i].table == held[j].table &&
		held[i].generation == held[j].generation;
}

/*
 * Move `entries` of slot `from`'s in-flight charge to slot `to` (the
 * table's lock held exclusively).
 */
static void
move_in_flight(FbfShareTable *t, int from, int to, int64 entries)
{
	FbfShareUnit *u = &t->units[from];
	bool		was = unit_active(u);

	entries = Min(entries, u->in_flight);
	u->in_flight -= entries;
	t->units[to].in_flight += entries;
	stop_counting(t, from, was);
}

/*
 * Before PREPARE: the charges the transaction holds on a table get one row
 * of it for its xid, where they stay until the prepared transaction ends
 * (sweep_prepared): its largest and FBF_SHARE_PREPARED_SLOTS - 1 others
 * each on its own slot, any more moved onto the largest's slot (they are
 * the transaction's own units too).  So a table has a row for every
 * transaction the server may have prepared at once, up to
 * FBF_SHARE_PREPARED_MAX; with none free, the PREPARE is refused (53400)
 * rather than the charges let go, which would let their units hold more
 * than their shares in flight.  The held charges of the table then say
 * which row they are in (those moved, with no entries of their own).
 */
static void
keep_for_prepare(void)
{
	TransactionId xid = GetTopTransactionIdIfAny();
	int			h;

	/* with none allowed, MarkAsPreparing refuses it in its own words */
	if (!TransactionIdIsValid(xid) || max_prepared_xacts == 0)
		return;
	prepare_xid = xid;
	for (h = 0; h < nheld; h++)
	{
		FbfShareTable *t = &Shares->tables[held[h].table];
		FbfSharePrepared *rows = table_prepared(t);
		Oid			relid = t->relid;
		int			keep = h;
		int			p;
		int			i;

		if (held[h].row >= 0)
			continue;			/* its table's row is taken */
		LWLockAcquire(table_lock(t), LW_EXCLUSIVE);
		if (t->generation != held[h].generation)
		{
			LWLockRelease(table_lock(t));
			continue;
		}
		sweep_prepared(t);
		for (p = 0; p < Shares->nprepared; p++)
		{
			if (!TransactionIdIsValid(rows[p].xid))
				break;
		}
		if (p < Shares->nprepared)
		{
			FbfSharePrepared *row = &rows[p];

			for (i = h + 1; i < nheld; i++)
			{
				if (held_together(i, h) && held[i].entries > held[keep].entries)
					keep = i;
			}
			row->xid = xid;
			row->nslots = 1;	/* [0]: the largest's, once the rest are in */
			for (i = h; i < nheld; i++)
			{
				if (!held_together(i, h))
					continue;
				held[i].row = p;
				if (i == keep)
					continue;
				if (row->nslots < FBF_SHARE_PREPARED_SLOTS)
				{
					row->slot[row->nslots] = held[i].slot;
					row->entries[row->nslots] = (int32) held[i].entries;
					row->nslots++;
				}
				else
				{
					move_in_flight(t, held[i].slot, held[keep].slot,
								   held[i].entries);
					held[keep].entries += held[i].entries;
					held[i].entries = 0;
				}
			}
			row->slot[0] = held[keep].slot;
			row->entries[0] = (int32) held[keep].entries;
		}
		LWLockRelease(table_lock(t));
		if (p == Shares->nprepared)
		{
			char	   *name = get_rel_name(relid);

			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("cannot prepare a transaction that holds new operations of counter \"%s\"",
							name ? name : psprintf("%u", relid)),
					 errdetail("%d prepared transactions hold new operations of it, as many as its share table keeps.",
							   Shares->nprepared),
					 errhint("Commit or roll back prepared transactions that use this counter.")));
		}
	}
}

/*
 * End of transaction: give back what it held, or leave it in its xid's
 * rows (keep_for_prepare); an aborted transaction gives back what it took
 * of its period too.  The charges on one table are let go together, under
 * one hold of its lock: a PREPARE that fails after keep_for_prepare frees
 * the table's row and gives back what it keeps, unless a sweep did both
 * first (the xid stops being in progress before the abort's callbacks
 * run; the row may be another transaction's by now).
 */
static void
share_xact_callback(XactEvent event, void *arg)
{
	int			h;

	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			keep_for_prepare();
			return;
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			break;
		default:
			return;
	}
	for (h = 0; h < nheld; h++)
	{
		FbfShareTable *t = &Shares->tables[held[h].table];
		bool		aborted = event == XACT_EVENT_ABORT;
		bool		in_row = false;
		int			i;

		if (held[h].done)
			continue;
		LWLockAcquire(table_lock(t), LW_EXCLUSIVE);
		if (t->generation == held[h].generation && held[h].row >= 0)
		{
			FbfSharePrepared *row = &table_prepared(t)[held[h].row];

			in_row = row->xid == prepare_xid;
			/* prepared: left in the row; else the row is free again */
			if (in_row && event != XACT_EVENT_PREPARE)
				row->xid = InvalidTransactionId;
		}
		for (i = h; i < nheld; i++)
		{
			if (!held_together(i, h))
				continue;
			held[i].done = true;
			if (t->generation != held[i].generation ||
				(in_row && event == XACT_EVENT_PREPARE))
				continue;
			/* a row a sweep let go of gave its entries back */
			release(t, held[i].slot,
					held[i].row < 0 || in_row ? held[i].entries : 0,
					held[i].epoch, aborted ? &held[i].took : NULL,
					aborted ? 0 : held[i].waits);
		}
		LWLockRelease(table_lock(t));
	}
	nheld = 0;
	prepare_xid = InvalidTransactionId;
}

/* room for one more held charge, made before a charge can be taken */
static void
reserve_held(void)
{
	if (nheld == maxheld)
	{
		int			newmax = Max(8, maxheld * 2);

		held = held == NULL ?
			MemoryContextAlloc(TopMemoryContext, sizeof(ShareHeld) * newmax) :
			repalloc(held, sizeof(ShareHeld) * newmax);
		maxheld = newmax;
	}
}

/* the held charge of a slot made at subtransaction level `nestlevel`, or -1 */
static int
find_held(int table, uint64 generation, int slot, int nestlevel)
{
	int			h;

	for (h = 0; h < nheld; h++)
	{
		if (held[h].table == table && held[h].slot == slot &&
			held[h].generation == generation &&
			held[h].nestlevel == nestlevel)
			return h;
	}
	return -1;
}

/*
 * Add `entries` of a slot (`waits` of them to wait for the next period's
 * bits) and `took` of the period `epoch` to the held charge `h` (only the
 * latest period's is kept: an earlier one's has rolled into the slot's
 * `prev`).
 */
static void
add_held(int h, int64 entries, int64 waits, int64 epoch,
		 const SharePeriodCharge *took)
{
	held[h].entries += entries;
	held[h].waits += waits;
	if (held[h].epoch < epoch)
	{
		held[h].epoch = epoch;
		memset(&held[h].took, 0, sizeof(SharePeriodCharge));
	}
	if (held[h].epoch == epoch)
	{
		held[h].took.fill += took->fill;
		held[h].took.spent += took->spent;
	}
}

/*
 * Remember that this (sub)transaction holds `entries` more of a slot,
 * `waits` of them to wait for the next period's bits, and `took` more of
 * the period `epoch`.
 */
static void
hold(int table, uint64 generation, int slot, int64 entries, int64 waits,
	 int64 epoch, const SharePeriodCharge *took)
{
	int			nestlevel = GetCurrentTransactionNestLevel();
	int			h = find_held(table, generation, slot, nestlevel);

	if (h < 0)
	{
		Assert(nheld < maxheld);
		h = nheld++;
		memset(&held[h], 0, sizeof(ShareHeld));
		held[h].table = table;
		held[h].generation = generation;
		held[h].slot = slot;
		held[h].nestlevel = nestlevel;
		held[h].epoch = epoch;
		held[h].row = -1;
	}
	add_held(h, entries, waits, epoch, took);
}

/*
 * End of a subtransaction: one that aborts gives back what its operations
 * (and its committed children's) hold in flight and took of their period,
 * as a transaction that aborts does, so that a unit whose savepoints roll
 * back (a PL/pgSQL block that catches an error, a retry after ROLLBACK TO
 * SAVEPOINT) is not judged by operations that never reach the bits; one
 * that commits leaves its charges to its parent.
 */
static void
share_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	int			kept = 0;
	int			h;

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	/* the subtransaction's charges given back, or to its parent's */
	for (h = 0; h < nheld; h++)
	{
		ShareHeld  *c = &held[h];

		if (c->nestlevel < level)
			continue;
		if (event == SUBXACT_EVENT_ABORT_SUB)
		{
			FbfShareTable *t = &Shares->tables[c->table];

			LWLockAcquire(table_lock(t), LW_EXCLUSIVE);
			if (t->generation == c->generation)
				release(t, c->slot, c->entries, c->epoch, &c->took, 0);
			LWLockRelease(table_lock(t));
			c->nestlevel = 0;	/* gone */
		}
		else
		{
			int			p = find_held(c->table, c->generation, c->slot,
									  level - 1);

			if (p >= 0)
			{
				add_held(p, c->entries, c->waits, c->epoch, &c->took);
				c->nestlevel = 0;
			}
			else
				c->nestlevel = level - 1;
		}
	}
	for (h = 0; h < nheld; h++)
	{
		if (held[h].nestlevel > 0)
			held[kept++] = held[h];
	}
	nheld = kept;
}

/* a refusal: what it was judged by */
static void
refuse(FbfShareStanding *standing, FbfShareVerdict verdict, double used,
	   double share, double capacity)
{
	standing->verdict = verdict;
	standing->used = used;
	standing->share = share;
	standing->capacity = capacity;
}

/*
 * One pool: the period takes what the window can take (the chains refuse
 * what they cannot hold themselves).
 */
static void
judge_pool(const FbfShareTable *t, const FbfShareDemand *demand,
		   FbfShareStanding *standing)
{
	standing->sharers = 1;
	if (t->fill + 1.0 / demand->per_period > 1.0)
		refuse(standing, FBF_SHARE_OVER_RATE, t->fill, 1.0, demand->per_period);
}

/*
 * In flight: may the unit's transactions hold the operation's entries
 * too?  At most its share of FBF_SHARE_IN_FLIGHT of the chains; before
 * refusing, the charges of prepared transactions that ended are let go
 * (*swept set: the unit itself may have stopped counting then).  Returns
 * true if refused.
 */
static bool
judge_in_flight(FbfShareTable *t, int slot, const FbfShareDemand *demand,
				FbfShareStanding *standing, bool *swept)
{
	const FbfShareUnit *u = &t->units[slot];
	double		share = FBF_SHARE_IN_FLIGHT * demand->in_flight *
		slot_weight(t, slot) / standing->sharers;

	if (u->in_flight + demand->entries <= share)
		return false;
	sweep_prepared(t);
	*swept = true;
	if (u->in_flight + demand->entries <= share)
		return false;
	refuse(standing, FBF_SHARE_OVER_IN_FLIGHT, (double) u->in_flight, share,
		   demand->in_flight);
	return true;
}

/* a unit's demand of the period, and the shares it stands for */
typedef struct ShareDemand
{
	double		demand;
	double		weight;
} ShareDemand;

/*
 * Demands of a max-min division at most: a slot of its own for each unit
 * the table tells apart, the last slot as two (add_demand), and the
 * demand of the one judged.
 */
#define FBF_SHARE_DEMANDS		(FBF_SHARE_UNITS + 2)

/* add a demand `d` of `weight` shares to a max-min division (demands[*m]) */
static inline void
put_demand(ShareDemand *demands, int *m, double d, double weight)
{
	Assert(*m < FBF_SHARE_DEMANDS);
	demands[*m].demand = d;
	demands[*m].weight = weight;
	(*m)++;
}

/*
 * Add slot `s`'s demand `d` to a max-min division (demands[*m]): one
 * demand of the slot's weight, or for the last slot, when its heaviest
 * unit took more than its even part of what the slot took this period and
 * the one before, two: that unit's part of `d`, by its part of the slot's
 * fill over both periods (others_kept), as one share, and the rest as the
 * slot's other shares.  So one unit of the last slot that floods is cut at the level
 * in the others' division as a unit with a slot of its own would be,
 * where the slot's demand, taken whole, was spread over every share the
 * slot stands for and fell under the level (a key that sent 1,000 keys an
 * operation each and then flooded was weighed as 1,000 light keys).  Both
 * periods, as each demand is of both: a part of this period alone makes
 * the first unit of the slot to come after a roll the whole of it.  What
 * others_kept reads is never more than a unit kept, so the heavy part may
 * read low, never high; and past the even part, a heavier part cuts the
 * slot at least as much as a lighter one (below it, the split would cut
 * the slot's rest by a share, not the unit): no unit's level rises for
 * what the summaries cannot see.
 */
static void
add_demand(const FbfShareTable *t, int s, double d, ShareDemand *demands,
		   int *m)
{
	const FbfShareUnit *u = &t->units[s];
	double		weight = slot_weight(t, s);
	double		part = 0;
	int			i;

	if (s == OTHERS_SLOT && weight > 1.0 && u->fill + u->prev > 0)
	{
		for (i = 0; i < FBF_SHARE_OTHERS_TOP; i++)
		{
			part = Max(part, others_kept(t, t->others_top[i].unit));
			part = Max(part, others_kept(t, t->others_top_prev[i].unit));
		}
		part = Min(part / (u->fill + u->prev), 1.0);
	}
	/* a heaviest unit within its even part: no unit to tell apart */
	if (part * weight <= 1.0)
	{
		put_demand(demands, m, d, weight);
		return;
	}
	put_demand(demands, m, d * part, 1.0);
	put_demand(demands, m, d * (1.0 - part), weight - 1.0);
}

/* qsort comparator of demands by demand per share, ascending */
static int
demand_cmp(const void *a, const void *b)
{
	const ShareDemand *x = (const ShareDemand *) a;
	const ShareDemand *y = (const ShareDemand *) b;
	double		dx = x->demand / x->weight;
	double		dy = y->demand / y->weight;

	return dx < dy ? -1 : dx > dy ? 1 : 0;
}

/*
 * The level per share at which `m` demands (sorted by demand per share),
 * each cut at it times its weight, fill `room`: weighted max-min
 * fairness' water level.  Demands that all fit leave no level to cut at:
 * 1.
 */
static double
water_level(const ShareDemand *d, int m, double room)
{
	double		weight = 0;
	int			i;

	for (i = 0; i < m; i++)
		weight += d[i].weight;
	for (i = 0; i < m; i++)
	{
		double		level = room / weight;

		if (d[i].demand >= level * d[i].weight)
			return level;
		room -= d[i].demand;
		weight -= d[i].weight;
	}
	return 1.0;
}

/* what a unit demands of the period's capacity, beside one beyond its share */
static double
rate_demand(const FbfShareUnit *u)
{
	return Max(u->fill, u->prev);
}

/*
 * ... of the chains' entries: those of its open and prepared transactions,
 * and those its committed operations of this period and the one before
 * put there to wait for the next period's bits (a drain stores a backlog
 * by a lane's part a period, so these may wait for more than one)
 */
static double
chain_demand(const FbfShareUnit *u)
{
	return (double) (u->in_flight + u->waits + u->waits_prev);
}

/*
 * How much of `room` the unit of `slot` may take beyond its share: the
 * water level of weighted max-min fairness times its weight, each other
 * active unit demanding `demand_of` it, and this one more than all there
 * is.
 */
static double
beyond_level(const FbfShareTable *t, int slot, double room,
			 double (*demand_of) (const FbfShareUnit *))
{
	ShareDemand demands[FBF_SHARE_DEMANDS];
	double		weight = slot_weight(t, slot);
	int			m = 0;
	int			s;

	for (s = 0; s <= OTHERS_SLOT; s++)
	{
		const FbfShareUnit *v = &t->units[s];

		if (s != slot && unit_active(v))
			add_demand(t, s, demand_of(v), demands, &m);
	}
	put_demand(demands, &m, 2.0 * room * weight, weight);
	qsort(demands, m, sizeof(ShareDemand), demand_cmp);
	return water_level(demands, m, room) * weight;
}

/*
 * The period's new operations.  Within its share (its weight over the
 * sharers of the period's capacity: 1/n for a unit with a slot of its
 * own) a unit is always admitted.  Beyond it, up to the water level of
 * max-min fairness over FBF_SHARE_BEYOND of the capacity: each other unit
 * demands what it took this period or the period before, whichever is
 * more, and this one all it can get; so light units may burst far past
 * 1/n while a heavy one takes only what they leave.  The last slot is
 * judged as one unit of its weight; past its level, a unit of it that
 * took no more than a share of its own (1/n, as others_count counts it)
 * is admitted still, as a unit with a slot of its own would be, up to the
 * slot's share beyond the level: so the others of the slot go on beside
 * one of them that flooded it, and the slot never takes more than its
 * level and its share, however its units evade the count (the summary
 * cannot follow more than FBF_SHARE_OTHERS_TOP of them).
 */
static void
judge_rate(const FbfShareTable *t, int slot, const FbfShareDemand *demand,
		   FbfShareStanding *standing)
{
	const FbfShareUnit *u = &t->units[slot];
	double		share = slot_weight(t, slot) / standing->sharers;
	double		cost = 1.0 / demand->per_period;
	double		level;

	if (u->fill + cost <= share)
		return;
	level = beyond_level(t, slot, FBF_SHARE_BEYOND, rate_demand);
	if (u->fill + cost <= level)
		return;
	/* of the last slot, within a share of its own: up to the slot's share more */
	if (slot == OTHERS_SLOT &&
		others_fill(t, demand->unit) + cost <= 1.0 / standing->sharers &&
		u->fill + cost <= level + share)
		return;
	refuse(standing, FBF_SHARE_OVER_RATE, u->fill, Max(share, level),
		   demand->per_period);
}

/*
 * An operation whose entries will wait for the next period's bits: of the
 * part of the chains before their reserve (FBF_SHARE_RESERVE), a unit's
 * share and what it may take beyond it are judged as the period's new
 * operations are (judge_rate), of what the unit has on the chains
 * (chain_demand: its entries in flight, and those of its committed
 * operations that wait, of this period and the one before), each other
 * unit demanding what it has there.  So a unit whose operations within
 * its share of the period's capacity would fill chains planned for a
 * fraction of its load leaves the others their part of them, where they
 * would otherwise find only the reserve, and a light unit there only half
 * of what is left of it (FbfShareWeigh).  Entries in flight count
 * whatever their lane: a drain after their commit may put them off.
 * Entries that waited two periods ago are no longer counted (over
 * periods, the window grows for a backlog).  The last slot is judged as
 * one unit of its weight; past its level, a unit of it that took less
 * than its even part of what the slot took this period (others_light) is
 * admitted still, up to the slot's share more, short of the reserve: so
 * the others of the slot go on beside one of them that floods the chains,
 * and the slot, however its units evade the count, never takes more than
 * a unit with a slot of its own and its share.  Not judged: operations
 * whose entries do not wait, and a unit alone (the reserve and the
 * window's growth are for it).
 */
static void
judge_waits(const FbfShareTable *t, int slot, const FbfShareDemand *demand,
			FbfShareStanding *standing)
{
	const FbfShareUnit *u = &t->units[slot];
	double		room = FBF_SHARE_RESERVE * demand->in_flight;
	double		share = room * slot_weight(t, slot) / standing->sharers;
	double		has = chain_demand(u);
	double		level;

	if (!demand->waits || standing->sharers <= 1 ||
		has + demand->entries <= share)
		return;
	level = beyond_level(t, slot, FBF_SHARE_BEYOND * room, chain_demand);
	if (has + demand->entries <= level)
		return;
	if (slot == OTHERS_SLOT && others_light(t, demand->unit) &&
		has + demand->entries <= Min(level + share, room))
		return;
	refuse(standing, FBF_SHARE_OVER_WAITING, has + demand->entries,
		   Max(share, level), room);
}

/*
 * Charge one operation the window of counter (dbid, relid) has just
 * recorded, of the unit `demand->unit`, against its shares of the
 * window's capacity: admitted (counted, and its entries held until the
 * transaction ends), or refused, and why.  Either way it is counted as
 * asked (FbfShareWeigh): the operation admitted, the rest of its call
 * (`demand->asking`) refused.  *standing gets what the verdict was judged
 * by, for the caller's message.
 */
FbfShareVerdict
FbfShareCharge(Oid dbid, Oid relid, const FbfShareDemand *demand,
			   FbfShareStanding *standing)
{
	FbfShareTable *t;
	FbfShareUnit *u;
	uint64		generation;
	int			table;
	int			slot;
	int64		epoch;
	double		cost = 1.0 / demand->per_period;
	bool		swept = false;
	SharePeriodCharge took = {0};

	memset(standing, 0, sizeof(*standing));
	standing->verdict = FBF_SHARE_ADMITTED;
	Assert(demand->unit != 0);
	/* keep_for_prepare has put the transaction's charges in their rows */
	if (TransactionIdIsValid(prepare_xid))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cannot record a new operation of a counter while its transaction is being prepared")));
	reserve_held();
	if (!callback_registered)
	{
		RegisterXactCallback(share_xact_callback, NULL);
		RegisterSubXactCallback(share_subxact_callback, NULL);
		callback_registered = true;
	}

	for (;;)
	{
		table = find_table(dbid, relid, &generation);
		if (table < 0)
		{
			/* none free: nothing counted, the caller decides */
			standing->verdict = FBF_SHARE_NO_TABLE;
			return standing->verdict;
		}
		t = &Shares->tables[table];
		LWLockAcquire(table_lock(t), LW_EXCLUSIVE);
		if (t->generation == generation && t->dbid == dbid && t->relid == relid)
			break;
		/* given to another counter since this backend looked: again */
		LWLockRelease(table_lock(t));
		hash_search(share_cache, &relid, HASH_REMOVE, NULL);
	}
	if (demand->epoch > t->epoch || demand->epoch < t->epoch - 1)
		roll(t, demand->epoch);
	t->last_used = GetCurrentTransactionStartTimestamp();
	slot = unit_slot(t, demand->unit);
	u = &t->units[slot];
	if (!unit_active(u))
		t->nactive++;
	if (slot == OTHERS_SLOT)
	{
		uint64		bit = hash_bytes_extended((const unsigned char *) &demand->unit,
											  sizeof(demand->unit), 0) %
			FBF_SHARE_SKETCH_BITS;

		t->others_seen[bit / 64] |= UINT64CONST(1) << (bit % 64);
	}
	standing->sharers = sharers(t);

	if (demand->pooled)
		judge_pool(t, demand, standing);
	else if (!judge_in_flight(t, slot, demand, standing, &swept))
	{
		judge_rate(t, slot, demand, standing);
		if (standing->verdict == FBF_SHARE_ADMITTED)
			judge_waits(t, slot, demand, standing);
	}

	/*
	 * Asked for, however its transaction ends; refused, the rest of its
	 * call was asked for too.
	 */
	u->asked += standing->verdict == FBF_SHARE_ADMITTED ? cost :
		Max(demand->asking, 1) * cost;
	if (standing->verdict == FBF_SHARE_ADMITTED)
	{
		if (slot == OTHERS_SLOT)
			others_count(t, demand->unit, cost);
		t->fill += cost;
		u->fill += cost;
		u->in_flight += demand->entries;
		t->in_flight += demand->entries;
		took.fill = cost;
		took.spent = demand->on_reserve ? demand->entries : 0;
		u->spent += took.spent;
	}
	else if (!unit_active(u))
		t->nactive--;			/* refused on its first: it holds nothing,
								 * and keeps its slot for what it asked */
	if (swept)
	{
		/*
		 * The sweep let go of prepared transactions' charges, maybe this
		 * unit's last, which stopped counting it and freed its slot while
		 * it was being charged: the slot is its own again, and the active
		 * units are counted afresh.
		 */
		if (slot < OTHERS_SLOT)
			u->unit = demand->unit;
		count_active(t);
	}
	epoch = t->epoch;
	LWLockRelease(table_lock(t));

	if (standing->verdict == FBF_SHARE_ADMITTED)
		hold(table, generation, slot, demand->entries,
			 demand->waits ? demand->entries : 0, epoch, &took);
	return standing->verdict;
}

/*
 * The slot `unit` is charged to (FbfShareWeigh): its own, else the last
 * if the table has no slot free (a newcomer finding one free has none
 * yet: -1).  Claims nothing.
 */
static int
weighed_slot(const FbfShareTable *t, uint64 unit)
{
	int			free_slot;
	int			s = own_slot(t, unit, &free_slot);

	if (s >= 0)
		return s;
	return free_slot < 0 ? OTHERS_SLOT : -1;
}

/*
 * How much `unit` asked of counter (dbid, relid)'s new operations in the
 * window's period `epoch` and the one before, beside the other units:
 * heavy if more than max-min fairness would give it, were
 * FBF_SHARE_RESERVE of what every unit asked all there was, each unit
 * demanding what it asked (so light units, however many, leave a heavy one
 * its part, and a flood stands out from a busy unit beside it); alone if
 * no other unit asked any.  What a unit asked counts its operations
 * refused and those of transactions that aborted too (FbfShareCharge),
 * and a refused call's `asking` (its operations yet to be asked, as a
 * part of the period's capacity) once refused here as heavy: so a flood
 * whose every batch is refused, and rolled back, weighs what it sends, not
 * what it kept, and beside one steady unit it stays the heavy one.  (As
 * in any max-min division, a demand above the level raises it for the
 * others, and one below lowers it: among three or more units, a light
 * one that asks more may leave a busier one over the level.)
 * The units the table cannot tell apart (its last slot) are weighed as
 * one unit of the slot's weight (beside another unit, as its heaviest unit
 * and the rest: add_demand), and of a heavy slot those that took less
 * than their even part of it (others_light) are light: a newcomer there
 * does not pay for a flood beside it.  Light too: a unit within that, one
 * the table has not counted (a newcomer), and any unit of a counter
 * without a table.  A light unit (the last slot as one) that put as many
 * entries on the reserve this period as `reserve_free` (what is left of
 * it, as its operation's chain shows) has spent its part: so each light
 * unit takes at most half of what the reserve had when it came, and the
 * next one finds the other half, where the first to come took it all.
 * Gives the counter no table, and claims no slot.
 */
FbfShareWeight
FbfShareWeigh(Oid dbid, Oid relid, uint64 unit, int64 epoch,
			  double reserve_free, double asking)
{
	FbfShareTable *t;
	uint64		generation;
	int			table;
	FbfShareWeight weight = FBF_SHARE_LIGHT;

	Assert(unit != 0);
	table = held_table(dbid, relid, &generation);
	if (table < 0)
		return FBF_SHARE_LIGHT;
	t = &Shares->tables[table];
	LWLockAcquire(table_lock(t), LW_EXCLUSIVE);
	if (t->generation == generation && t->dbid == dbid && t->relid == relid &&
		epoch <= t->epoch + 1)
	{
		ShareDemand demands[FBF_SHARE_DEMANDS];
		FbfShareUnit *me = NULL;
		int			mine;
		double		asked = 0;
		int			m = 0;
		int			s;

		if (epoch > t->epoch)
			roll(t, epoch);
		mine = weighed_slot(t, unit);
		for (s = 0; s <= OTHERS_SLOT; s++)
		{
			FbfShareUnit *u = &t->units[s];
			double		d = unit_asked(u);

			if (d <= 0)
				continue;
			/* the slot judged is one demand: its units are told apart below */
			if (s == mine)
			{
				put_demand(demands, &m, d, slot_weight(t, s));
				me = u;
			}
			else
				add_demand(t, s, d, demands, &m);
			asked += d;
		}
		if (me != NULL && m == 1)
			weight = FBF_SHARE_ALONE;
		else if (me != NULL)
		{
			qsort(demands, m, sizeof(ShareDemand), demand_cmp);
			if (unit_asked(me) > water_level(demands, m, FBF_SHARE_RESERVE * asked) *
				slot_weight(t, mine) &&
				(mine < OTHERS_SLOT || !others_light(t, unit)))
				weight = FBF_SHARE_HEAVY;
			else if (epoch == t->epoch && me->spent > 0 &&
					 me->spent >= reserve_free)
				weight = FBF_SHARE_SPENT;
		}
		/*
		 * Refused as heavy: what the call asked for is the unit's demand
		 * too.  (Not so a light unit that spent its part: its retries
		 * would make it heavy, and lower the level the others are
		 * judged by.)
		 */
		if (me != NULL && epoch == t->epoch && weight == FBF_SHARE_HEAVY)
			me->asked += asking;
	}
	LWLockRelease(table_lock(t));
	return weight;
}

/*
 * Forget the share tables of a dropped counter (relid valid) or of every
 * counter of a dropped database, in this backend's cache too.  What a
 * transaction of this backend holds in them is let go with its table.
 */
void
FbfShareForget(Oid dbid, Oid relid)
{
	int			t;

	if (Shares == NULL)
		return;
	LWLockAcquire(Shares->lock, LW_EXCLUSIVE);
	for (t = 0; t < FBF_SHARE_TABLES; t++)
	{
		FbfShareTable *table = &Shares->tables[t];

		if (table->dbid == dbid &&
			(!OidIsValid(relid) || table->relid == relid))
		{
			LWLockAcquire(table_lock(table), LW_EXCLUSIVE);
			table->dbid = InvalidOid;
			table->relid = InvalidOid;
			table->in_flight = 0;
			table->generation++;
			LWLockRelease(table_lock(table));
		}
	}
	LWLockRelease(Shares->lock);
	if (share_cache != NULL && dbid == MyDatabaseId)
	{
		if (OidIsValid(relid))
			hash_search(share_cache, &relid, HASH_REMOVE, NULL);
		else
		{
			hash_destroy(share_cache);
			share_cache = NULL;
		}
	}
}
