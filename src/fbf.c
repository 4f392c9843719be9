/*-------------------------------------------------------------------------
 *
 * fbf.c
 *	  Module entry point of the fbf extension: settings, and the
 *	  initialisation of each subsystem.
 *
 * fbf must be loaded through shared_preload_libraries: the counters keep
 * shared state and a background worker that can only be set up while the
 * postmaster starts.  Loading it any other way (for example by CREATE
 * EXTENSION creating its C functions) fails with a hint, as pg_cron does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <float.h>
#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "cuckoo.h"
#include "fbf.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

bool		fbf_worker_enabled = true;
int			fbf_naptime_ms = 1000;
int			fbf_max_filter_size_kb = 64 * 1024;
int			fbf_default_retention_ms = 5 * 60 * 1000;
double		fbf_default_target_fpp = 0.001;
double		fbf_aimd_increase_at = 0.9;
double		fbf_aimd_decrease_at = 0.1;
int			fbf_aimd_period_step_ms = 1000;
int			fbf_period_min_ms = 100;

static void
define_settings(void)
{
	DefineCustomBoolVariable("fbf.worker_enabled",
							 "Run the background worker that refreshes and resizes counter filters.",
							 "Backends stay correct without it: they refresh when a refresh is overdue.",
							 &fbf_worker_enabled, true, PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("fbf.naptime",
							"Time between maintenance passes (refresh, drain, AIMD step).",
							NULL, &fbf_naptime_ms, 1000, 10, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("fbf.max_filter_size",
							"Memory cap of one counter table's filter.",
							"Creating a larger filter fails; AIMD never grows a filter past it.",
							&fbf_max_filter_size_kb, 64 * 1024, 64, INT_MAX / 2,
							PGC_SUSET, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("fbf.default_retention",
							"Retention of new counter tables when none is given.",
							"Set it above the clients' retry timeout plus slack.",
							&fbf_default_retention_ms, 5 * 60 * 1000, 1000, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomRealVariable("fbf.default_target_fpp",
							 "Target false-positive rate of new counter tables when none is given.",
							 NULL, &fbf_default_target_fpp, 0.001, 1e-9, 0.5,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomRealVariable("fbf.aimd_increase_at",
							 "Grow a filter when its estimated false-positive rate reaches this fraction of its target.",
							 NULL, &fbf_aimd_increase_at, 0.9, 0.01, 1.0,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomRealVariable("fbf.aimd_decrease_at",
							 "Shrink a filter when its estimated false-positive rate falls to this fraction of its target.",
							 NULL, &fbf_aimd_decrease_at, 0.1, 0.0, 1.0,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("fbf.aimd_period_step",
							"How much one AIMD step changes the refresh period.",
							NULL, &fbf_aimd_period_step_ms, 1000, 1, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("fbf.period_min",
							"Shortest refresh period AIMD may set.",
							NULL, &fbf_period_min_ms, 100, 10, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	MarkGUCPrefixReserved("fbf");
}

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("fbf must be loaded via shared_preload_libraries"),
				 errhint("Add fbf to the shared_preload_libraries configuration parameter and restart the server.")));

	define_settings();
	FbfFilterAmInit();
	FbfFilterUtilityInit();
	FbfCounterInit();
	FbfShmemInit();
	FbfWorkerInit();
	CuckooAmInit();
}
