/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  Background workers: a launcher, and short-lived maintenance passes
 *	  in each database that has the extension.
 *
 * The launcher (registered at preload) wakes every fbf.naptime, lists the
 * databases that accept connections, and starts one "pass" worker in each
 * database that may have counters and has no pass still running.  A pass
 * connects, runs FbfCounterMaintain (refresh if due, drain committed
 * operations, one AIMD step) on every counter table, and exits.  Passes are short on
 * purpose: a worker that stayed connected would make DROP DATABASE fail.
 * A database found without the extension is left alone for 30 seconds.
 *
 * Correctness never depends on the worker: a backend that finds a refresh
 * overdue performs it, and a full pending page is drained by the backend
 * that needs room.  The worker keeps refreshes on time (so forgotten
 * operations stop costing false positives), keeps pending pages short, and
 * is the only one to resize.
 *
 * Errors in one counter are logged and the pass goes on with the next; an
 * error in the launcher makes the postmaster restart it after 10 seconds.
 * Neither holds a lock while sleeping.
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
#include "catalog/pg_database.h"
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
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
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


#define FBF_MAX_PASSES 64		/* databases with a pass running at once */

typedef struct PassSlot
{
	Oid			dbid;
	BackgroundWorkerHandle *handle;
} PassSlot;

static bool fbf_worker_enabled = true;
static int	fbf_naptime_ms = 1000;

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
							"Time between maintenance passes (refresh, drain, AIMD step).",
							NULL, &fbf_naptime_ms, 1000, 10, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 10;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "fbf");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "fbf_launcher_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "fbf launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "fbf launcher");
	RegisterBackgroundWorker(&worker);
}

/* databases that accept connections, in CurrentMemoryContext */
static List *
connectable_databases(void)
{
	List	   *dbs = NIL;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	MemoryContext caller = CurrentMemoryContext;

	StartTransactionCommand();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		if (db->datallowconn && !db->datistemplate)
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

static void
start_pass(PassSlot *slots, Oid dbid)
{
	BackgroundWorker worker;
	int			i;

	for (i = 0; i < FBF_MAX_PASSES && slots[i].handle != NULL; i++)
		;
	if (i == FBF_MAX_PASSES)
		return;

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
}

void
fbf_launcher_main(Datum main_arg)
{
	PassSlot   *slots;
	MemoryContext loop_context;
	TimestampTz next_round = 0;

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
	 * One round every fbf.naptime.  The latch is also set when a pass ends
	 * (bgw_notify_pid), so wake-ups before the next round just wait again.
	 */
	while (!ShutdownRequestPending)
	{
		MemoryContext old;
		TimestampTz now;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		now = GetCurrentTimestamp();
		if (now >= next_round && fbf_worker_enabled)
		{
			List	   *dbs;
			ListCell   *lc;

			reap_passes(slots);
			old = MemoryContextSwitchTo(loop_context);
			dbs = connectable_databases();
			foreach(lc, dbs)
			{
				Oid			dbid = lfirst_oid(lc);

				if (FbfDatabaseDue(dbid, now) && !pass_running(slots, dbid))
					start_pass(slots, dbid);
			}
			MemoryContextSwitchTo(old);
			MemoryContextReset(loop_context);
		}
		if (now >= next_round)
			next_round = TimestampTzPlusMilliseconds(now, fbf_naptime_ms);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Max(TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
															 next_round), 1),
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	proc_exit(0);
}

/* (heap, index) OIDs of every counter table in this database */
static List *
counter_tables(void)
{
	List	   *result = NIL;
	ListCell   *lc;

	foreach(lc, FbfWindowIndexes())
	{
		result = lappend_oid(result, IndexGetRelation(lfirst_oid(lc), false));
		result = lappend_oid(result, lfirst_oid(lc));
	}
	return result;
}

/*
 * Maintain one counter in its own transaction.  Skips it, without
 * waiting, if its table is locked against us (DDL in progress).
 */
static void
maintain_one(Oid heapoid, Oid indexoid)
{
	Relation	heap;
	Relation	index;

	if (!ConditionalLockRelationOid(heapoid, RowExclusiveLock))
		return;
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(indexoid)))
	{
		UnlockRelationOid(heapoid, RowExclusiveLock);
		return;
	}
	heap = table_open(heapoid, NoLock);
	index = index_open(indexoid, RowExclusiveLock);
	FbfCounterMaintain(heap, index);
	FbfCounterClose(heap, index);
}

void
fbf_pass_main(Datum main_arg)
{
	Oid			dbid = DatumGetObjectId(main_arg);
	bool		has_extension;
	List	   *counters;
	ListCell   *lc;
	MemoryContext pass_context;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dbid, InvalidOid, 0);
	pgstat_report_appname("fbf maintenance pass");

	pass_context = AllocSetContextCreate(TopMemoryContext, "fbf pass",
										 ALLOCSET_DEFAULT_SIZES);

	StartTransactionCommand();
	has_extension = OidIsValid(get_extension_oid("fbf", true));
	FbfDatabaseChecked(dbid, has_extension, GetCurrentTimestamp());
	if (!has_extension)
	{
		CommitTransactionCommand();
		proc_exit(0);
	}
	{
		MemoryContext old = MemoryContextSwitchTo(pass_context);

		counters = counter_tables();
		MemoryContextSwitchTo(old);
	}
	CommitTransactionCommand();

	for (lc = list_head(counters); lc != NULL; lc = lnext(counters, lnext(counters, lc)))
	{
		Oid			heapoid = lfirst_oid(lc);
		Oid			indexoid = lfirst_oid(lnext(counters, lc));

		CHECK_FOR_INTERRUPTS();
		StartTransactionCommand();
		PG_TRY();
		{
			maintain_one(heapoid, indexoid);
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
	}
	proc_exit(0);
}
