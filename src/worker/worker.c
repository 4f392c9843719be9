/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  Background workers: a launcher, and maintenance passes in the
 *	  databases that have counters.
 *
 * The launcher (registered at preload, connected to no database) keeps a
 * schedule in the registry: for each database, when its next pass is due
 * and when its last one started.  Whenever it wakes (every fbf.naptime, and
 * whenever a pass ends) it starts passes in the databases that are due,
 * the longest-waiting first, while fewer than fbf.max_workers of its
 * passes run.  So every database is served in turn however many there are
 * and however few worker slots are free, and the passes never take more
 * than fbf.max_workers of max_worker_processes: parallel query and logical
 * replication keep the rest.  Should no slot be free, the database stays
 * due and first in line.
 *
 * A pass connects and runs rounds: a round runs FbfCounterMaintain (refresh
 * if due, drain, one AIMD step) on every counter table, telling the registry when
 * the next pass is due: after fbf.naptime if any counter had operations
 * since the last pass, else when the first of them must next be refreshed
 * (at most FBF_IDLE_MAX_MS later).  An idle database thus costs a pass per
 * refresh period, one without the extension a pass per server start (and
 * per FBF_NO_EXTENSION_MS).  Operations of open transactions on a
 * counter's chains (FbfCounterMaintain) bring the next pass closer: after
 * a naptime, and after twice the wait for each pass in a row that found
 * only such operations, up to FBF_IDLE_MAX_MS.  So an operation is drained
 * about as long after its commit as its transaction was open, and a
 * session idle in a transaction, or a prepared transaction never
 * resolved, costs a pass a minute, not one a naptime.  Creating a counter
 * tells the registry at once, and again when it commits (a pass started by
 * the first note may have listed the counters before the creator
 * committed).
 * A backend tells it of its operations once, and again after a pass put
 * a database off as idle (FbfDatabaseIdlePasses), which makes the next
 * pass due a naptime after the last one (FbfDatabaseHasOperations): a
 * connection that stays open through an idle spell gets its operations
 * drained after a naptime, not after the idle wait, and passes never come
 * more often than a busy database's.
 *
 * A pass whose round found operations stays for the next, at the due time
 * the registry keeps (a new counter brings it forward), instead of making
 * way for a new process a naptime later: a new process would map every
 * page of the database's windows afresh, which on a busy server with many
 * counters (a Citus worker's shards) costs more than the rounds.  It
 * leaves when a round finds the database idle, after FBF_PASS_LIFETIME_MS,
 * when fbf.worker_enabled is turned off, when another database waits for
 * a slot (the launcher counts those, FbfPassesWanted, each time it serves,
 * and that many staying passes leave), and
 * for the commands that no connected session may outlast.  Those take the
 * database's lock and then wait 5 s for the other sessions to leave: the
 * pass, between rounds, looks every FBF_PASS_LOOK_MS whether the lock is
 * taken (database_claimed).  DROP DATABASE ... WITH (FORCE) terminates the
 * other sessions before it waits for them, and would fail on a pass that
 * its issuer, an owner who is no superuser, may not terminate; so the
 * owner's DROP DATABASE first asks the pass to leave and waits until it
 * is gone (let_go_of_database, a ProcessUtility hook).
 *
 * Correctness never depends on the worker: a backend that finds a refresh
 * overdue performs it, and a full pending page is drained by the backend
 * that needs room.  The worker keeps refreshes on time (so forgotten
 * operations stop costing false positives), keeps pending pages short, and
 * is the only one to resize.
 *
 * Errors in one counter are logged and the pass goes on with the next; an
 * error in the launcher, or its SIGTERM (pg_terminate_backend), makes the
 * postmaster restart it after 10 seconds.
 * Neither holds a lock while sleeping.
 *
 * Databases come and go.  The launcher looks a database up again just
 * before it starts a pass there, and skips it if it was dropped (or no
 * longer accepts connections, or is left invalid by an interrupted DROP
 * DATABASE) since it listed the databases.  A database dropped in the
 * moment between that look and the pass's connection makes PostgreSQL
 * refuse the connection (a FATAL in InitPostgres, which nothing can
 * catch): the pass recognises that refusal while it connects, logs it at
 * DEBUG1 instead, and exits normally (exit code 0), as a pass that found
 * nothing to do would.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_class.h"
#include "catalog/indexing.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/elog.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "counter/counter.h"
#include "registry/registry.h"
#include "window/window.h"
#include "worker/worker.h"


#define FBF_MAX_PASSES 64		/* most passes running at once */

/* longest a database with counters goes without a pass */
#define FBF_IDLE_MAX_MS			60000
/* how often a database found without the extension is looked at again */
#define FBF_NO_EXTENSION_MS		300000
/* longest a pass stays in a busy database */
#define FBF_PASS_LIFETIME_MS	300000
/* how often a pass waiting for its next round looks whether to leave */
#define FBF_PASS_LOOK_MS		100
/* how long DROP DATABASE waits for the pass there to leave */
#define FBF_LET_GO_WAIT_MS		5000
/* and how long after it no pass goes there */
#define FBF_LET_GO_HOLD_MS		10000

typedef struct PassSlot
{
	Oid			dbid;
	BackgroundWorkerHandle *handle;
} PassSlot;

/* a database due for a pass, in the launcher's queue */
typedef struct DueDatabase
{
	Oid			dbid;
	TimestampTz last_pass;		/* 0: never */
} DueDatabase;

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

static void fbf_worker_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
									  bool readOnlyTree, ProcessUtilityContext context,
									  ParamListInfo params, QueryEnvironment *queryEnv,
									  DestReceiver *dest, QueryCompletion *qc);

static bool fbf_worker_enabled = true;
static int	fbf_naptime_ms = 1000;
static int	fbf_max_workers = 2;

/* The worker's settings, and the launcher's registration; from _PG_init. */
void
FbfWorkerInit(void)
{
	BackgroundWorker worker;

	DefineCustomBoolVariable("fbf.worker_enabled",
							 "Run the background worker that refreshes and resizes counter filters.",
							 "Backends stay correct without it: they refresh when a refresh is overdue.",
							 &fbf_worker_enabled, true, PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("fbf.naptime",
							"Time between maintenance passes (refresh, drain, AIMD step) of a busy database.",
							NULL, &fbf_naptime_ms, 1000, 10, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("fbf.max_workers",
							"Maintenance passes that may run at once, each a background worker.",
							"The rest of max_worker_processes stays free for parallel query and replication.",
							&fbf_max_workers, 2, 1, FBF_MAX_PASSES,
							PGC_SIGHUP, 0, NULL, NULL, NULL);

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 10;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "fbf");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "fbf_launcher_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "fbf launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "fbf launcher");
	RegisterBackgroundWorker(&worker);

	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = fbf_worker_ProcessUtility;
}

/*
 * DROP DATABASE: the pass there leaves first.  A pass that stays in a busy
 * database (the file header) would otherwise make it fail: WITH (FORCE)
 * at once, unless the dropper may signal the pass, a superuser's
 * process; without, once it had waited 5 s.  Asked only for the owner
 * (or a superuser), who may drop it: no one else can keep passes away.
 * The dropper holds no lock while it waits, at most FBF_LET_GO_WAIT_MS,
 * and no pass starts there for FBF_LET_GO_HOLD_MS (the launcher's
 * schedule), so that none connects while the drop goes on.
 */
static void
let_go_of_database(const char *dbname)
{
	Oid			dbid = get_database_oid(dbname, true);
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz deadline = TimestampTzPlusMilliseconds(now, FBF_LET_GO_WAIT_MS);
	HeapTuple	tup;
	Oid			owner;
	pid_t		pid;
	PGPROC	   *proc;

	if (!OidIsValid(dbid) || dbid == MyDatabaseId)
		return;
	/* dropped meanwhile: DROP DATABASE says so, not we */
	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(dbid));
	if (!HeapTupleIsValid(tup))
		return;
	owner = ((Form_pg_database) GETSTRUCT(tup))->datdba;
	ReleaseSysCache(tup);
	if (!has_privs_of_role(GetUserId(), owner))
		return;
	pid = FbfDatabaseLetGo(dbid, TimestampTzPlusMilliseconds(now, FBF_LET_GO_HOLD_MS));
	if (pid == 0)
		return;
	proc = BackendPidGetProc(pid);
	if (proc != NULL)
		SetLatch(&proc->procLatch);

	/*
	 * Until it has left the ProcArray, not only the registry: its exit
	 * callbacks come before that, and TerminateOtherDBBackends would still
	 * find it.
	 */
	while ((FbfDatabasePassPid(dbid) != 0 || BackendPidGetProc(pid) != NULL) &&
		   GetCurrentTimestamp() < deadline)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

static void
fbf_worker_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
						  bool readOnlyTree, ProcessUtilityContext context,
						  ParamListInfo params, QueryEnvironment *queryEnv,
						  DestReceiver *dest, QueryCompletion *qc)
{
	if (IsA(pstmt->utilityStmt, DropdbStmt) &&
		context == PROCESS_UTILITY_TOPLEVEL && !IsTransactionBlock())
		let_go_of_database(((DropdbStmt *) pstmt->utilityStmt)->dbname);
	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

/*
 * Does a pass go into this database?  Not a template, nor one that refuses
 * connections, nor one an interrupted DROP DATABASE left invalid (a
 * connection to it would be refused).
 */
static bool
database_connectable(Form_pg_database db)
{
	if (!db->datallowconn || db->datistemplate)
		return false;
#ifdef DATCONNLIMIT_INVALID_DB
	if (db->datconnlimit == DATCONNLIMIT_INVALID_DB)
		return false;
#endif
	return true;
}

/*
 * Is database dbid still there and connectable?  Looked up afresh in its
 * own transaction: the launcher's list is up to a naptime old.  A heap
 * scan, not the index: the launcher has selected no database, and opening
 * an index may need to read pg_class.
 */
static bool
database_still_connectable(Oid dbid)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tup;
	bool		result;

	StartTransactionCommand();
	ScanKeyInit(&key, Anum_pg_database_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(dbid));
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = systable_beginscan(rel, DatabaseOidIndexId, false, NULL, 1, &key);
	tup = systable_getnext(scan);
	result = HeapTupleIsValid(tup) &&
		database_connectable((Form_pg_database) GETSTRUCT(tup));
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return result;
}

/* databases that accept connections, allocated in `cxt` */
static List *
connectable_databases(MemoryContext cxt)
{
	List	   *dbs = NIL;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	MemoryContext caller = cxt;

	StartTransactionCommand();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		if (database_connectable(db))
		{
			MemoryContext old = MemoryContextSwitchTo(caller);

			dbs = lappend_oid(dbs, db->oid);
			MemoryContextSwitchTo(old);
		}
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return dbs;
}

/* free the slots of every pass that has ended, whatever its database */
static void
reap_passes(PassSlot *slots)
{
	int			i;

	for (i = 0; i < FBF_MAX_PASSES; i++)
	{
		pid_t		pid;

		if (slots[i].handle != NULL &&
			GetBackgroundWorkerPid(slots[i].handle, &pid) == BGWH_STOPPED)
		{
			pfree(slots[i].handle);
			slots[i].handle = NULL;
		}
	}
}

/* passes running */
static int
passes_running(PassSlot *slots)
{
	int			n = 0;

	for (int i = 0; i < FBF_MAX_PASSES; i++)
		n += slots[i].handle != NULL;
	return n;
}

/* is a pass for dbid still running? */
static bool
pass_running(PassSlot *slots, Oid dbid)
{
	int			i;

	for (i = 0; i < FBF_MAX_PASSES; i++)
	{
		if (slots[i].handle != NULL && slots[i].dbid == dbid)
			return true;
	}
	return false;
}

static bool
start_pass(PassSlot *slots, Oid dbid)
{
	BackgroundWorker worker;
	int			i;

	for (i = 0; i < FBF_MAX_PASSES && slots[i].handle != NULL; i++)
		;
	if (i == FBF_MAX_PASSES)
		return false;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "fbf");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "fbf_pass_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "fbf maintenance pass");
	snprintf(worker.bgw_type, BGW_MAXLEN, "fbf maintenance pass");
	worker.bgw_main_arg = ObjectIdGetDatum(dbid);
	worker.bgw_notify_pid = MyProcPid;

	/*
	 * No free worker slot is not an error: try again next time.  The
	 * handle must live as long as the launcher.
	 */
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		if (RegisterDynamicBackgroundWorker(&worker, &slots[i].handle))
			slots[i].dbid = dbid;
		else
			slots[i].handle = NULL;
		MemoryContextSwitchTo(old);
	}
	return slots[i].handle != NULL;
}

static int
due_cmp(const void *a, const void *b)
{
	const DueDatabase *x = a;
	const DueDatabase *y = b;

	if (x->last_pass != y->last_pass)
		return x->last_pass < y->last_pass ? -1 : 1;
	return x->dbid < y->dbid ? -1 : x->dbid > y->dbid;
}

/*
 * Start passes in the databases of `dbs` that are due, the longest-waiting
 * first, while fewer than fbf.max_workers run.  Returns the earliest time a
 * database not started now will be due (or `now` + naptime).
 */
static TimestampTz
serve_databases(PassSlot *slots, List *dbs, TimestampTz now)
{
	DueDatabase *due = palloc(sizeof(DueDatabase) * Max(list_length(dbs), 1));
	int			ndue = 0;
	TimestampTz wake = TimestampTzPlusMilliseconds(now, fbf_naptime_ms);
	ListCell   *lc;
	int			i;

	foreach(lc, dbs)
	{
		Oid			dbid = lfirst_oid(lc);
		TimestampTz next_due;
		TimestampTz last_pass;

		if (pass_running(slots, dbid))
			continue;
		FbfDatabaseSchedule(dbid, &next_due, &last_pass);

		/*
		 * The schedule is in wall-clock time: if the clock stepped back,
		 * a due time further ahead than any pass ever sets, or a last pass
		 * in the future, means "now", not hours of silence.
		 */
		if (next_due > TimestampTzPlusMilliseconds(now, Max(fbf_naptime_ms, FBF_NO_EXTENSION_MS)) ||
			last_pass > now)
			next_due = now;
		if (next_due <= now)
		{
			due[ndue].dbid = dbid;
			due[ndue].last_pass = last_pass;
			ndue++;
		}
		else
			wake = Min(wake, next_due);
	}
	qsort(due, ndue, sizeof(DueDatabase), due_cmp);
	for (i = 0; i < ndue; i++)
	{
		if (passes_running(slots) >= fbf_max_workers)
			break;
		/* dropped (or closed) since the list was made: nothing to serve */
		if (!database_still_connectable(due[i].dbid))
			continue;
		if (!start_pass(slots, due[i].dbid))
			break;
		FbfDatabasePassStarted(due[i].dbid, now, Max(fbf_naptime_ms, 1000));
	}
	/* databases left waiting: as many passes staying in theirs make room */
	FbfPassesWanted((ndue - i) + Max(passes_running(slots) - fbf_max_workers, 0));
	pfree(due);
	return wake;
}

void
fbf_launcher_main(Datum main_arg)
{
	PassSlot   *slots;
	MemoryContext loop_context;
	List	   *dbs = NIL;
	TimestampTz dbs_listed = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();

	/* no database: the launcher only reads the shared catalog pg_database */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("fbf launcher");

	slots = MemoryContextAllocZero(TopMemoryContext, sizeof(PassSlot) * FBF_MAX_PASSES);
	loop_context = AllocSetContextCreate(TopMemoryContext, "fbf launcher loop",
										 ALLOCSET_DEFAULT_SIZES);
	elog(DEBUG1, "fbf launcher started");

	/*
	 * Wake every fbf.naptime, when the next database is due, and when a pass
	 * ends (its bgw_notify_pid sets our latch, and frees its slot for the
	 * next database in line).
	 */
	while (!ShutdownRequestPending)
	{
		TimestampTz now;
		TimestampTz wake;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		now = GetCurrentTimestamp();
		wake = TimestampTzPlusMilliseconds(now, fbf_naptime_ms);
		reap_passes(slots);
		if (fbf_worker_enabled)
		{
			/* the list of databases, at most once per naptime */
			if (dbs == NIL || dbs_listed > now ||
				TimestampDifferenceExceeds(dbs_listed, now, fbf_naptime_ms))
			{
				MemoryContextReset(loop_context);
				dbs = connectable_databases(loop_context);
				dbs_listed = now;
			}
			wake = serve_databases(slots, dbs, now);
		}
		else
			FbfPassesWanted(0);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Max(TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
															 wake), 1),
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}

	/*
	 * Exit as after an error, so that the postmaster starts the launcher
	 * again after bgw_restart_time: a worker that exits with 0 is
	 * unregistered, and a pg_terminate_backend would end the worker until
	 * the next server start.  At shutdown nothing is restarted.
	 */
	proc_exit(1);
}

/*
 * (heap, index) OIDs of every counter table in this database, but those of
 * other sessions' temporary tables (FbfWindowIndexes) and those that are
 * not plain tables, which the worker could not maintain.
 */
static List *
counter_tables(void)
{
	List	   *result = NIL;
	ListCell   *lc;

	foreach(lc, FbfWindowIndexes())
	{
		/* dropped since the unlocked scan: skip it */
		Oid			heapoid = IndexGetRelation(lfirst_oid(lc), true);

		if (!OidIsValid(heapoid) || !FbfWindowTableUsable(heapoid))
			continue;
		result = lappend_oid(result, heapoid);
		result = lappend_oid(result, lfirst_oid(lc));
	}
	return result;
}

/*
 * Maintain one counter in its own transaction, filling *schedule; returns
 * whether it was maintained.  Skips it, without waiting, if its table or
 * its window index is locked against us (DDL in progress), or was
 * dropped; the counter then counts as busy.  Neither lock is waited for:
 * DDL that drops the two (DROP EXTENSION, DROP TABLE ... CASCADE) may take
 * the index's first, and a worker holding the table while it waited for
 * the index would deadlock with it.  Skips it too if its owner set the
 * option worker_maintenance off; that one counts as idle, and asks for no
 * early pass.
 */
static bool
maintain_one(Oid heapoid, Oid indexoid, FbfCounterSchedule *schedule)
{
	Relation	heap;
	Relation	index;
	bool		maintained = false;

	schedule->busy = true;
	schedule->in_flight = false;
	schedule->refresh_in = 0;
	if (!ConditionalLockRelationOid(heapoid, RowExclusiveLock))
		return false;
	if (!ConditionalLockRelationOid(indexoid, RowExclusiveLock))
	{
		UnlockRelationOid(heapoid, RowExclusiveLock);
		return false;
	}
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(heapoid)) ||
		!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(indexoid)))
	{
		UnlockRelationOid(indexoid, RowExclusiveLock);
		UnlockRelationOid(heapoid, RowExclusiveLock);
		return false;
	}
	heap = table_open(heapoid, NoLock);
	index = index_open(indexoid, NoLock);
	if (!FbfWindowGetOptions(index)->worker_maintenance)
	{
		schedule->busy = false;
		schedule->refresh_in = (int64) FBF_IDLE_MAX_MS * 1000;
	}
	else
	{
		FbfCounterMaintain(heap, index, schedule);
		maintained = true;
	}
	FbfCounterClose(heap, index);
	return maintained;
}

/* the database a pass is connecting to; InvalidOid once it is connected */
static Oid	pass_connecting = InvalidOid;
static emit_log_hook_type prev_emit_log_hook = NULL;

/*
 * emit_log_hook of a pass while it connects.  PostgreSQL refuses the
 * connection with a FATAL if the database was dropped, or stopped
 * accepting connections, after the launcher looked (the file header): that
 * is no failure of the pass, which has nothing left to do.  Say so at
 * DEBUG1 instead, and exit as a pass that ends does (exit code 0), here
 * rather than in errfinish, which would exit with 1 and make the
 * postmaster log it.  Nothing is held but what any FATAL during
 * InitPostgres leaves to proc_exit's callbacks.
 */
static void
pass_connect_log_hook(ErrorData *edata)
{
	Oid			dbid = pass_connecting;

	if (OidIsValid(dbid) && edata->elevel == FATAL &&
		(edata->sqlerrcode == ERRCODE_UNDEFINED_DATABASE ||
		 edata->sqlerrcode == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE))
	{
		pass_connecting = InvalidOid;
		emit_log_hook = prev_emit_log_hook;
		edata->output_to_server = false;
		edata->output_to_client = false;
		FlushErrorState();
		elog(DEBUG1, "fbf: no maintenance pass in database %u: it was dropped or closed to connections",
			 dbid);
		proc_exit(0);
	}
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/*
 * The pass leaves: the registry forgets it, whatever ended it (its last
 * round, SIGTERM, an error).
 */
static void
pass_detach(int code, Datum arg)
{
	FbfDatabasePassAttached(DatumGetObjectId(arg), 0);
}

/*
 * Does a command wait for this database's lock, one that no connected
 * session may outlast: DROP DATABASE, ALTER DATABASE ... RENAME TO or SET
 * TABLESPACE, CREATE DATABASE ... TEMPLATE it?  Each takes the lock, then
 * waits 5 s for the other sessions to leave.  Asked with a conditional
 * session lock, so no one ever waits for the pass.
 */
static bool
database_claimed(Oid dbid)
{
	LOCKTAG		tag;

	SET_LOCKTAG_OBJECT(tag, InvalidOid, DatabaseRelationId, dbid, 0);
	if (LockAcquire(&tag, RowExclusiveLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
		return true;
	LockRelease(&tag, RowExclusiveLock, true);
	return false;
}

/*
 * One round of a pass: every counter of the database maintained, each in
 * its own transaction; fills *outcome, as FbfDatabasePassDone takes it.
 * Returns whether the pass may stay for the next: a counter had operations
 * since the last round (the database is busy: its next round is due a
 * naptime later), and the database still takes connections.
 */
static bool
pass_round(Oid dbid, MemoryContext pass_context, FbfPassOutcome *outcome)
{
	List	   *counters;
	ListCell   *lc;
	volatile int64 idle_ms = FBF_IDLE_MAX_MS;
	volatile bool maintained = false;
	volatile bool busy = false;
	volatile bool in_flight = false;
	bool		open;
	HeapTuple	tup;
	int			waits;
	int64		wait_ms;
	TimestampTz now;

	MemoryContextReset(pass_context);
	StartTransactionCommand();
	/* closed to connections, or made a template, since: no more rounds */
	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(dbid));
	open = HeapTupleIsValid(tup) &&
		database_connectable((Form_pg_database) GETSTRUCT(tup));
	if (HeapTupleIsValid(tup))
		ReleaseSysCache(tup);
	if (!OidIsValid(get_extension_oid("fbf", true)))
	{
		CommitTransactionCommand();
		now = GetCurrentTimestamp();
		outcome->has_extension = false;
		outcome->next_due = TimestampTzPlusMilliseconds(now, FBF_NO_EXTENSION_MS);
		outcome->soonest = TimestampTzPlusMilliseconds(now, fbf_naptime_ms);
		outcome->idle = false;
		outcome->waits = 0;
		return false;
	}
	{
		MemoryContext old = MemoryContextSwitchTo(pass_context);

		counters = counter_tables();
		MemoryContextSwitchTo(old);
	}
	CommitTransactionCommand();

	/*
	 * Operations of open transactions, and no new one, since the last pass:
	 * each such pass in a row waits twice as long as the one before it
	 */
	waits = FbfDatabaseWaits(dbid);
	wait_ms = Min((int64) fbf_naptime_ms << Min(waits, 16), FBF_IDLE_MAX_MS);

	for (lc = list_head(counters); lc != NULL; lc = lnext(counters, lnext(counters, lc)))
	{
		Oid			heapoid = lfirst_oid(lc);
		Oid			indexoid = lfirst_oid(lnext(counters, lc));
		FbfCounterSchedule schedule = {true, false, 0};
		int64		due_ms;

		CHECK_FOR_INTERRUPTS();
		StartTransactionCommand();
		PG_TRY();
		{
			if (maintain_one(heapoid, indexoid, &schedule))
				maintained = true;
			CommitTransactionCommand();
		}
		PG_CATCH();
		{
			/* log it, and go on with the next counter */
			HOLD_INTERRUPTS();
			EmitErrorReport();
			AbortCurrentTransaction();
			FlushErrorState();
			RESUME_INTERRUPTS();
		}
		PG_END_TRY();
		due_ms = schedule.refresh_in / 1000;
		if (schedule.busy)
		{
			busy = true;
			due_ms = 0;
		}
		else if (schedule.in_flight)
		{
			in_flight = true;
			due_ms = Min(due_ms, wait_ms);
		}
		idle_ms = Min(idle_ms, due_ms);
	}

	/*
	 * busy: again after naptime; only operations of open transactions: after
	 * wait_ms; idle: when the first refresh is due.  Either of the last two
	 * comes a naptime after an operation on a counter it maintains instead,
	 * if longer than a naptime (FbfDatabasePassDone).
	 */
	now = GetCurrentTimestamp();
	outcome->has_extension = true;
	outcome->next_due = TimestampTzPlusMilliseconds(now, Max(idle_ms, fbf_naptime_ms));
	outcome->soonest = TimestampTzPlusMilliseconds(now, fbf_naptime_ms);
	outcome->idle = maintained && idle_ms > fbf_naptime_ms;
	outcome->waits = in_flight && !busy ? Min(waits + 1, 16) : 0;
	return busy && open;
}

/*
 * Should the pass leave now rather than wait for its database's next
 * round?  When the worker is turned off, when it has lived
 * FBF_PASS_LIFETIME_MS, when a DROP DATABASE asked it to leave or, if it
 * may give up its slot (`give_slot`), another database waits for one
 * (FbfDatabasePassMayStay), and when a command waits for the database's
 * lock (database_claimed).
 */
static bool
pass_should_leave(Oid dbid, TimestampTz started, bool give_slot)
{
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
	return !fbf_worker_enabled ||
		TimestampDifferenceExceeds(started, GetCurrentTimestamp(),
								   FBF_PASS_LIFETIME_MS) ||
		!FbfDatabasePassMayStay(dbid, give_slot) ||
		database_claimed(dbid);
}

/*
 * Wait for the database's next round (its due time in the registry, which
 * a new counter brings forward), looking every FBF_PASS_LOOK_MS whether
 * the pass should leave instead.  Returns false if it should.  Called
 * right after a round.  A pass gives its slot to a database that waits
 * right after its round or while it waits, not once its next round is
 * due: leaving then would leave its own database waiting, and another
 * pass would have to leave for it in turn.  (Right after the round it
 * may, even if due again: a database whose rounds are always due at once
 * would otherwise keep its slot for the pass's whole lifetime.)
 */
static bool
pass_wait(Oid dbid, TimestampTz started)
{
	bool		served = true;	/* its round just ran */

	for (;;)
	{
		TimestampTz next_due;
		TimestampTz last_pass;
		long		sleep_ms;

		/* a SIGTERM between rounds: leave as a pass that ends does */
		if (ProcDiePending)
			proc_exit(0);
		CHECK_FOR_INTERRUPTS();
		FbfDatabaseSchedule(dbid, &next_due, &last_pass);
		sleep_ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
												   next_due);
		if (pass_should_leave(dbid, started, served || sleep_ms > 0))
			return false;
		served = false;
		/* a round after the pass's lifetime: the next pass's */
		if (next_due > TimestampTzPlusMilliseconds(started, FBF_PASS_LIFETIME_MS))
			return false;
		if (sleep_ms <= 0)
			return true;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(sleep_ms, FBF_PASS_LOOK_MS), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

void
fbf_pass_main(Datum main_arg)
{
	Oid			dbid = DatumGetObjectId(main_arg);
	MemoryContext pass_context;
	TimestampTz started;
	FbfPassOutcome outcome;
	pid_t		other;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/*
	 * Known to the registry before it connects, so that a DROP DATABASE
	 * from now on waits for it (let_go_of_database); and gone at once if
	 * another pass is still there (one a launcher that has since restarted
	 * started).
	 */
	other = FbfDatabasePassPid(dbid);
	if (other != 0 && BackendPidGetProc(other) != NULL)
		proc_exit(0);
	FbfDatabasePassAttached(dbid, MyProcPid);
	before_shmem_exit(pass_detach, ObjectIdGetDatum(dbid));

	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = pass_connect_log_hook;
	pass_connecting = dbid;
	BackgroundWorkerInitializeConnectionByOid(dbid, InvalidOid, 0);
	pass_connecting = InvalidOid;
	emit_log_hook = prev_emit_log_hook;
	pgstat_report_appname("fbf maintenance pass");
	/* asked to leave while it connected: not even one round */
	if (FbfDatabaseLettingGo(dbid) || database_claimed(dbid))
		proc_exit(0);

	pass_context = AllocSetContextCreate(TopMemoryContext, "fbf pass",
										 ALLOCSET_DEFAULT_SIZES);
	started = GetCurrentTimestamp();

	/*
	 * A round, and another at each due time while the database stays busy
	 * and nothing asks the pass to leave (the file header).
	 */
	for (;;)
	{
		bool		busy = pass_round(dbid, pass_context, &outcome);

		FbfDatabasePassDone(dbid, &outcome);
		/* the round's statistics, now: the pass may stay for minutes */
		pgstat_report_stat(false);
		if (!busy || !pass_wait(dbid, started))
			break;
		FbfDatabasePassStarted(dbid, GetCurrentTimestamp(),
							   Max(fbf_naptime_ms, 1000));
	}
	proc_exit(0);
}
