/*-------------------------------------------------------------------------
 *
 * registry.c
 *	  Shared memory: per-counter statistics and per-database bookkeeping
 *	  of the background worker.
 *
 * The windows themselves are not here: their bits live in shared buffers,
 * as pages of each counter's window index (window/window.h).  What is
 * here is small and may be lost at a restart:
 *
 *	- stats: one entry per (database, counter table): operations applied
 *	  and dismissed since the server started, how many of the dismissed
 *	  were retries whose delta did not match (counters with the option
 *	  track_mismatch), how many were answered exactly (a pending chain, a
 *	  stream) or by the filter, and of the exact ones how many a stream
 *	  answered "new" where the filter said "seen"; last maintenance pass.
 *	  Entries go when their table or database is dropped (object access
 *	  hook); should the table fill up anyway, the least recently used
 *	  entry makes room;
 *	- databases: for each database, whether it had the extension when the
 *	  worker last looked, when its last pass started and when the next is
 *	  due, so that the launcher serves the databases that need it, the
 *	  longest-waiting first (worker.c); and how many passes have found
 *	  their database idle, so that a backend that told the launcher of its
 *	  operations before tells it again once its database was put off.
 *
 * Locking: FbfShared->lock protects the membership of both hash tables
 * (share to look up, exclusive to insert or remove an entry).  The
 * counters inside a stats entry are atomics, updated under the share lock;
 * last_maintained and the database entries' fields are updated under the
 * exclusive lock.  The count of idle passes is an atomic, read without
 * the lock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"

#include "registry/registry.h"

#define FBF_MAX_COUNTERS	4096	/* stats entries; beyond, not counted */
#define FBF_MAX_DATABASES	1024

typedef struct FbfStatsKey
{
	Oid			dbid;
	Oid			relid;
} FbfStatsKey;

typedef struct FbfStatsEntry
{
	FbfStatsKey key;
	pg_atomic_uint64 applied;
	pg_atomic_uint64 dismissed;
	pg_atomic_uint64 mismatched;	/* of those dismissed */
	pg_atomic_uint64 exact;		/* answered exactly */
	pg_atomic_uint64 filter;	/* answered by the filter */
	pg_atomic_uint64 averted;	/* false dismissals a stream averted */
	pg_atomic_uint64 last_used;	/* transaction start of the last count */
	TimestampTz last_maintained;
	uint64		ops_maintained; /* applied + dismissed at that time */
} FbfStatsEntry;

typedef struct FbfDatabaseEntry
{
	Oid			dbid;
	bool		has_extension;	/* when last looked at */
	TimestampTz next_due;		/* when the next pass is due */
	TimestampTz last_pass;		/* when the last pass started */
	TimestampTz soonest;		/* when the next pass would be due, were
								 * the database busy: a naptime after the
								 * last pass ended */
	bool		noted;			/* counters noted since the last pass started */
	int			waits;			/* FbfPassOutcome's, of the last pass */
	pid_t		pass_pid;		/* the pass connected to it, or 0 */
	TimestampTz let_go_until;	/* no pass before then: a DROP DATABASE
								 * asked the last one to leave */
} FbfDatabaseEntry;

/*
 * Passes that put their database off as idle, counted from 1 in one of
 * these slots by database OID: a backend rereads only its own database's
 * slot, and another database's idle spells seldom make it note its own
 * again.
 */
#define FBF_IDLE_PASS_SLOTS	64

typedef struct FbfSharedState
{
	LWLock	   *lock;
	int			passes_wanted;	/* slots wanted of staying passes */
	pg_atomic_uint64 idle_passes[FBF_IDLE_PASS_SLOTS];
} FbfSharedState;

static FbfSharedState *FbfShared = NULL;
static HTAB *stats_hash = NULL;
static HTAB *database_hash = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static object_access_hook_type prev_object_access_hook = NULL;

static void fbf_object_access(ObjectAccessType access, Oid classId,
							  Oid objectId, int subId, void *arg);

static Size
fbf_shmem_size(void)
{
	return add_size(add_size(add_size(MAXALIGN(sizeof(FbfSharedState)),
									  hash_estimate_size(FBF_MAX_COUNTERS, sizeof(FbfStatsEntry))),
							 hash_estimate_size(FBF_MAX_DATABASES, sizeof(FbfDatabaseEntry))),
					FbfShareShmemSize());
}

static void
fbf_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(fbf_shmem_size());
	RequestNamedLWLockTranche("fbf", 1);
	FbfShareShmemRequest();
}

static void
fbf_shmem_startup(void)
{
	bool		found;
	HASHCTL		ctl;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	FbfShared = ShmemInitStruct("fbf", sizeof(FbfSharedState), &found);
	if (!found)
	{
		FbfShared->lock = &(GetNamedLWLockTranche("fbf"))->lock;
		FbfShared->passes_wanted = 0;
		for (int i = 0; i < FBF_IDLE_PASS_SLOTS; i++)
			pg_atomic_init_u64(&FbfShared->idle_passes[i], 1);
	}

	ctl.keysize = sizeof(FbfStatsKey);
	ctl.entrysize = sizeof(FbfStatsEntry);
	stats_hash = ShmemInitHash("fbf counter stats", FBF_MAX_COUNTERS,
							   FBF_MAX_COUNTERS, &ctl,
							   HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(FbfDatabaseEntry);
	database_hash = ShmemInitHash("fbf databases", FBF_MAX_DATABASES,
								  FBF_MAX_DATABASES, &ctl,
								  HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	FbfShareShmemInit();
	LWLockRelease(AddinShmemInitLock);
}

void
FbfRegistryInit(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = fbf_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = fbf_shmem_startup;
	prev_object_access_hook = object_access_hook;
	object_access_hook = fbf_object_access;
}

/*
 * Make room in a full stats table: forget the entry used least recently
 * (its counter was dropped by a way the object access hook did not see,
 * or is idle).  The caller holds the lock exclusively.
 */
static void
evict_one(void)
{
	HASH_SEQ_STATUS seq;
	FbfStatsEntry *entry;
	FbfStatsEntry *oldest = NULL;
	uint64		oldest_used = PG_UINT64_MAX;

	hash_seq_init(&seq, stats_hash);
	while ((entry = hash_seq_search(&seq)) != NULL)
	{
		uint64		used = Max(pg_atomic_read_u64(&entry->last_used),
							   (uint64) Max(entry->last_maintained, 0));

		if (used < oldest_used)
		{
			oldest_used = used;
			oldest = entry;
		}
	}
	if (oldest != NULL)
		hash_search(stats_hash, &oldest->key, HASH_REMOVE, NULL);
}

/*
 * Find (or, with `create`, make) a counter's stats entry.  Returns NULL if
 * it does not exist.  The caller must hold the lock in the mode `create`
 * needs (exclusive to create).
 */
static FbfStatsEntry *
stats_entry(Oid dbid, Oid relid, bool create)
{
	FbfStatsKey key;
	FbfStatsEntry *entry;
	bool		found;

	key.dbid = dbid;
	key.relid = relid;
	entry = hash_search(stats_hash, &key, create ? HASH_ENTER_NULL : HASH_FIND,
						&found);
	if (entry == NULL && create)
	{
		evict_one();
		entry = hash_search(stats_hash, &key, HASH_ENTER_NULL, &found);
	}
	if (entry && !found)
	{
		pg_atomic_init_u64(&entry->applied, 0);
		pg_atomic_init_u64(&entry->dismissed, 0);
		pg_atomic_init_u64(&entry->mismatched, 0);
		pg_atomic_init_u64(&entry->exact, 0);
		pg_atomic_init_u64(&entry->filter, 0);
		pg_atomic_init_u64(&entry->averted, 0);
		pg_atomic_init_u64(&entry->last_used, 0);
		entry->last_maintained = 0;
		entry->ops_maintained = 0;
	}
	return entry;
}

/*
 * Forget what the registry knows of a dropped counter table, or of every
 * counter of a dropped database.  (An entry for a drop that rolls back is
 * lost too: statistics are not durable anyway.)
 */
static void
fbf_object_access(ObjectAccessType access, Oid classId, Oid objectId,
				  int subId, void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);
	if (access != OAT_DROP || subId != 0 || FbfShared == NULL)
		return;
	if (classId == RelationRelationId)
	{
		FbfStatsKey key;

		key.dbid = MyDatabaseId;
		key.relid = objectId;
		LWLockAcquire(FbfShared->lock, LW_EXCLUSIVE);
		hash_search(stats_hash, &key, HASH_REMOVE, NULL);
		LWLockRelease(FbfShared->lock);
		FbfShareForget(MyDatabaseId, objectId);
	}
	else if (classId == DatabaseRelationId)
	{
		HASH_SEQ_STATUS seq;
		FbfStatsEntry *entry;

		LWLockAcquire(FbfShared->lock, LW_EXCLUSIVE);
		hash_seq_init(&seq, stats_hash);
		while ((entry = hash_seq_search(&seq)) != NULL)
		{
			if (entry->key.dbid == objectId)
				hash_search(stats_hash, &entry->key, HASH_REMOVE, NULL);
		}
		hash_search(database_hash, &objectId, HASH_REMOVE, NULL);
		LWLockRelease(FbfShared->lock);
		FbfShareForget(objectId, InvalidOid);
	}
}

/* add `n` to one of an entry's counters (nothing to do for 0) */
static inline void
stats_add(pg_atomic_uint64 *counter, uint64 n)
{
	if (n > 0)
		pg_atomic_fetch_add_u64(counter, n);
}

/*
 * A counter applied counts->applied operations and dismissed
 * counts->dismissed, of which counts->mismatched were retries whose delta
 * differed from the applied operation's (or new operations a false
 * positive dismissed); counts->exact of them were answered exactly,
 * counts->filter by the filter, and counts->averted were a stream's "new"
 * over the filter's "seen".  Takes the lock shared (exclusive to make the
 * entry).
 */
void
FbfStatsCount(Oid dbid, Oid relid, const FbfCounterCounts *counts)
{
	FbfStatsEntry *entry;

	LWLockAcquire(FbfShared->lock, LW_SHARED);
	entry = stats_entry(dbid, relid, false);
	if (entry == NULL)
	{
		LWLockRelease(FbfShared->lock);
		LWLockAcquire(FbfShared->lock, LW_EXCLUSIVE);
		entry = stats_entry(dbid, relid, true);
	}
	if (entry)
	{
		stats_add(&entry->applied, counts->applied);
		stats_add(&entry->dismissed, counts->dismissed);
		stats_add(&entry->mismatched, counts->mismatched);
		stats_add(&entry->exact, counts->exact);
		stats_add(&entry->filter, counts->filter);
		stats_add(&entry->averted, counts->averted);
		pg_atomic_write_u64(&entry->last_used,
							(uint64) Max(GetCurrentTransactionStartTimestamp(), 0));
	}
	LWLockRelease(FbfShared->lock);
}

/*
 * A maintenance pass ran on the counter at `when`.  Returns whether it
 * had operations since the previous pass (true the first time).
 */
bool
FbfStatsMaintained(Oid dbid, Oid relid, TimestampTz when)
{
	FbfStatsEntry *entry;
	bool		busy = true;

	LWLockAcquire(FbfShared->lock, LW_EXCLUSIVE);
	entry = stats_entry(dbid, relid, true);
	if (entry)
	{
		uint64		ops = pg_atomic_read_u64(&entry->applied) +
			pg_atomic_read_u64(&entry->dismissed);

		busy = entry->last_maintained == 0 || ops != entry->ops_maintained;
		entry->ops_maintained = ops;
		entry->last_maintained = when;
	}
	LWLockRelease(FbfShared->lock);
	return busy;
}

void
FbfStatsGet(Oid dbid, Oid relid, FbfCounterStatsSnapshot *out)
{
	FbfStatsEntry *entry;

	memset(out, 0, sizeof(*out));
	LWLockAcquire(FbfShared->lock, LW_SHARED);
	entry = stats_entry(dbid, relid, false);
	if (entry)
	{
		out->counts.applied = pg_atomic_read_u64(&entry->applied);
		out->counts.dismissed = pg_atomic_read_u64(&entry->dismissed);
		out->counts.mismatched = pg_atomic_read_u64(&entry->mismatched);
		out->counts.exact = pg_atomic_read_u64(&entry->exact);
		out->counts.filter = pg_atomic_read_u64(&entry->filter);
		out->counts.averted = pg_atomic_read_u64(&entry->averted);
		out->last_maintained = entry->last_maintained;
	}
	LWLockRelease(FbfShared->lock);
}

/*
 * When should the launcher start a pass in this database, and when did the
 * last one start (0: never)?  A database the registry has never heard of
 * is due at once: the launcher looks at it once to learn whether it has
 * the extension.
 */
void
FbfDatabaseSchedule(Oid dbid, TimestampTz *next_due, TimestampTz *last_pass)
{
	FbfDatabaseEntry *entry;

	*next_due = 0;
	*last_pass = 0;
	LWLockAcquire(FbfShared->lock, LW_SHARED);
	entry = hash_search(database_hash, &dbid, HASH_FIND, NULL);
	if (entry)
	{
		*next_due = Max(entry->next_due, entry->let_go_until);
		*last_pass = entry->last_pass;
	}
	LWLockRelease(FbfShared->lock);
}

static FbfDatabaseEntry *
database_entry(Oid dbid)
{
	bool		found;
	FbfDatabaseEntry *entry = hash_search(database_hash, &dbid,
										  HASH_ENTER_NULL, &found);

	if (entry && !found)
	{
		entry->has_extension = false;
		entry->next_due = 0;
		entry->last_pass = 0;
		entry->soonest = 0;
		entry->noted = false;
		entry->waits = 0;
		entry->pass_pid = 0;
		entry->let_go_until = 0;
	}
	return entry;
}

/*
 * The launcher started a pass in dbid at `now`.  Until the pass says
 * otherwise (FbfDatabasePassDone), the next one is due `retry_ms` later:
 * a pass that dies first (the database was dropped, or refuses
 * connections) is not restarted in a tight loop.
 */
void
FbfDatabasePassStarted(Oid dbid, TimestampTz now, int retry_ms)
{
	FbfDatabaseEntry *entry;

	LWLockAcquire(FbfShared->lock, LW_EXCLUSIVE);
	entry = database_entry(dbid);
	if (entry)
	{
		entry->last_pass = now;
		entry->next_due = TimestampTzPlusMilliseconds(now, retry_ms);
		entry->noted = false;
	}
	LWLockRelease(FbfShared->lock);
}

/*
 * Has a counter of dbid that a pass maintained since `since` had
 * operations counted after it was maintained?  Under the lock.
 */
static bool
counted_since_maintained(Oid dbid, TimestampTz since)
{
	HASH_SEQ_STATUS status;
	FbfStatsEntry *entry;

	hash_seq_init(&status, stats_hash);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (entry->key.dbid == dbid && entry->last_maintained >= since &&
			pg_atomic_read_u64(&entry->applied) +
			pg_atomic_read_u64(&entry->dismissed) != entry->ops_maintained)
		{
			hash_seq_term(&status);
			return true;
		}
	}
	return false;
}

/*
 * How many passes in a row found in dbid only operations of open
 * transactions (FbfPassOutcome): the next pass waits longer for each.
 */
int
FbfDatabaseWaits(Oid dbid)
{
	FbfDatabaseEntry *entry;
	int			waits = 0;

	LWLockAcquire(FbfShared->lock, LW_SHARED);
	entry = hash_search(database_hash, &dbid, HASH_FIND, NULL);
	if (entry)
		waits = entry->waits;
	LWLockRelease(FbfShared->lock);
	return waits;
}

/*
 * A pass in dbid ended: the next one is due at outcome->next_due, or at
 * once if a counter was noted meanwhile (created after the pass listed the
 * counters, say: the pass did not see it).  If the pass was idle (it found
 * no new operation on the counters it maintained, and puts the database
 * off for longer than fbf.naptime), unless an operation was counted on one
 * of them after all (checked here, under the lock that counting takes:
 * the next pass is then due at outcome->soonest, and waits for no open
 * transaction), the database's slot of idle passes is counted
 * (FbfDatabaseIdlePasses): each backend of it that counts an operation
 * from then on notes it again (FbfDatabaseHasOperations).
 */
void
FbfDatabasePassDone(Oid dbid, const FbfPassOutcome *outcome)
{
	FbfDatabaseEntry *entry;
	TimestampTz next_due = outcome->next_due;
	bool		idle = outcome->idle;
	int			waits = outcome->waits;

	LWLockAcquire(FbfShared->lock, LW_EXCLUSIVE);
	entry = database_entry(dbid);
	if (entry)
	{
		if (idle && !entry->noted &&
			counted_since_maintained(dbid, entry->last_pass))
		{
			idle = false;
			next_due = outcome->soonest;
			waits = 0;
		}
		entry->has_extension = outcome->has_extension || entry->noted;
		entry->next_due = entry->noted ? 0 : next_due;
		entry->soonest = outcome->soonest;
		entry->waits = waits;
		if (idle && !entry->noted)
			pg_atomic_fetch_add_u64(&FbfShared->idle_passes[dbid % FBF_IDLE_PASS_SLOTS],
									1);
		entry->noted = false;
	}
	LWLockRelease(FbfShared->lock);
}

/*
 * How many passes have put dbid (or a database sharing its slot) off as
 * idle (FbfDatabasePassDone), from 1: a backend that counted an operation
 * notes its database (FbfDatabaseHasOperations) whenever this differs from
 * what it read when it last noted.  A plain read, for every call.
 */
uint64
FbfDatabaseIdlePasses(Oid dbid)
{
	return pg_atomic_read_u64(&FbfShared->idle_passes[dbid % FBF_IDLE_PASS_SLOTS]);
}

/*
 * dbid has a new counter (one was just created): its next pass is due
 * now.  A counter being created is not yet visible to a pass: the
 * creator calls FbfDatabaseHasCountersAtCommit too.
 */
void
FbfDatabaseHasCounters(Oid dbid)
{
	FbfDatabaseEntry *entry;

	LWLockAcquire(FbfShared->lock, LW_EXCLUSIVE);
	entry = database_entry(dbid);
	if (entry)
	{
		entry->noted = true;
		if (!entry->has_extension || entry->next_due > GetCurrentTimestamp())
		{
			entry->has_extension = true;
			entry->next_due = 0;
		}
	}
	LWLockRelease(FbfShared->lock);
}

/*
 * A backend counted an operation in dbid (FbfStatsCount) after a pass put
 * the database off as idle, or for the first time: the next pass is due
 * no later than a busy database's would be (`soonest`), or at once if no
 * pass has found the extension there yet.  Never earlier: the passes of a
 * database with operations come once per naptime, however many backends
 * note it (one whose counters all have worker_maintenance off included).
 */
void
FbfDatabaseHasOperations(Oid dbid)
{
	FbfDatabaseEntry *entry;

	LWLockAcquire(FbfShared->lock, LW_EXCLUSIVE);
	entry = database_entry(dbid);
	if (entry)
	{
		if (!entry->has_extension)
		{
			entry->has_extension = true;
			entry->next_due = 0;
		}
		else if (entry->next_due > entry->soonest)
			entry->next_due = entry->soonest;
	}
	LWLockRelease(FbfShared->lock);
}

/*
 * A pass connected to dbid (pid), or left it (0): FbfDatabaseLetGo waits
 * for the one there to leave.
 */
void
FbfDatabasePassAttached(Oid dbid, pid_t pid)
{
	FbfDatabaseEntry *entry;

	LWLockAcquire(FbfShared->lock, LW_EXCLUSIVE);
	entry = pid != 0 ? database_entry(dbid) :
		hash_search(database_hash, &dbid, HASH_FIND, NULL);
	if (entry && (pid != 0 || entry->pass_pid == MyProcPid))
		entry->pass_pid = pid;
	LWLockRelease(FbfShared->lock);
}

/* has a DROP DATABASE asked the pass of `entry` to leave?  Under the lock. */
static bool
letting_go(const FbfDatabaseEntry *entry)
{
	return entry->let_go_until > GetCurrentTimestamp();
}

/*
 * May the pass in dbid stay for its next round?  Not once a DROP DATABASE
 * asked it to leave (FbfDatabaseLetGo), nor, if it may give up its slot
 * (`give_slot`), when a slot is wanted for a database that waits
 * (FbfPassesWanted): the pass that asks takes one of the wanted slots and
 * leaves, and the other passes stay.
 */
bool
FbfDatabasePassMayStay(Oid dbid, bool give_slot)
{
	LWLockMode	mode = LW_SHARED;

	/*
	 * Shared for the look every staying pass takes every 0.1 s (increments
	 * count their statistics under the same lock), exclusive only to take
	 * a wanted slot, looked at again since the lock was let go
	 */
	for (;;)
	{
		FbfDatabaseEntry *entry;
		bool		stay;

		LWLockAcquire(FbfShared->lock, mode);
		entry = hash_search(database_hash, &dbid, HASH_FIND, NULL);
		stay = entry != NULL && !letting_go(entry);
		if (stay && give_slot && FbfShared->passes_wanted > 0)
		{
			if (mode == LW_SHARED)
			{
				LWLockRelease(FbfShared->lock);
				mode = LW_EXCLUSIVE;
				continue;
			}
			FbfShared->passes_wanted--;
			stay = false;
		}
		LWLockRelease(FbfShared->lock);
		return stay;
	}
}

/* Has a DROP DATABASE asked the pass in dbid to leave (FbfDatabaseLetGo)? */
bool
FbfDatabaseLettingGo(Oid dbid)
{
	FbfDatabaseEntry *entry;
	bool		result;

	LWLockAcquire(FbfShared->lock, LW_SHARED);
	entry = hash_search(database_hash, &dbid, HASH_FIND, NULL);
	result = entry != NULL && letting_go(entry);
	LWLockRelease(FbfShared->lock);
	return result;
}

/*
 * Ask the pass in dbid to leave, and start none there before `until`.
 * Returns the pid of the pass connected now, 0 if none.
 */
pid_t
FbfDatabaseLetGo(Oid dbid, TimestampTz until)
{
	FbfDatabaseEntry *entry;
	pid_t		pid = 0;

	LWLockAcquire(FbfShared->lock, LW_EXCLUSIVE);
	entry = database_entry(dbid);
	if (entry)
	{
		entry->let_go_until = Max(entry->let_go_until, until);
		pid = entry->pass_pid;
	}
	LWLockRelease(FbfShared->lock);
	return pid;
}

/* the pid of the pass connected to dbid, 0 if none */
pid_t
FbfDatabasePassPid(Oid dbid)
{
	FbfDatabaseEntry *entry;
	pid_t		pid = 0;

	LWLockAcquire(FbfShared->lock, LW_SHARED);
	entry = hash_search(database_hash, &dbid, HASH_FIND, NULL);
	if (entry)
		pid = entry->pass_pid;
	LWLockRelease(FbfShared->lock);
	return pid;
}

/*
 * How many pass slots are wanted of the passes staying in their databases
 * (databases waiting for one, and passes over fbf.max_workers): that many
 * staying passes leave after their round (FbfDatabasePassMayStay).  Set by
 * the launcher each time it serves the databases.
 */
void
FbfPassesWanted(int slots)
{
	LWLockAcquire(FbfShared->lock, LW_EXCLUSIVE);
	FbfShared->passes_wanted = Max(slots, 0);
	LWLockRelease(FbfShared->lock);
}

/* this transaction created a counter: note it again at commit */
static bool note_at_commit = false;

static void
note_at_commit_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT && note_at_commit)
		FbfDatabaseHasCounters(MyDatabaseId);
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
		note_at_commit = false;
}

/*
 * The current transaction creates a counter in this database: when it
 * commits, its database's next pass is due at once (FbfDatabaseHasCounters).
 * Noting it at creation alone is not enough: a pass that the note starts
 * before the creator commits lists the counters without it, and would set
 * the database's next pass as an idle database's (a minute later).
 */
void
FbfDatabaseHasCountersAtCommit(void)
{
	static bool registered = false;

	if (!registered)
	{
		RegisterXactCallback(note_at_commit_callback, NULL);
		registered = true;
	}
	note_at_commit = true;
}
