/*-------------------------------------------------------------------------
 *
 * fbf.c
 *	  Module entry point of the fbf extension: _PG_init calls each
 *	  subsystem's initialisation, in dependency order, and nothing else.
 *
 * Each subsystem defines its own settings in its *Init():
 *
 *	type		no setting; the pure core's long loops check for a cancel
 *				through it (core/fbf_interrupt.h)
 *	window		fbf.max_filter_size, fbf.split_batch, fbf.fixed_window_keys
 *				(and the window index's reloptions)
 *	counter		fbf.default_retention, fbf.default_target_fpp (FbfCounterInit);
 *				fbf.aimd_*, fbf.period_min (FbfCounterMaintainInit)
 *	citus		no setting; the route to counters distributed by Citus
 *				(FbfCitusInit), the planner hook of its fast path
 *				(FbfCitusPlanInit) and its executor start (FbfCitusAloneInit),
 *				the route to dedup tables distributed by
 *				Citus (FbfDedupCitusInit) and the hooks around Citus' shard
 *				transfers (FbfCitusTransferInit)
 *	worker		fbf.worker_enabled, fbf.naptime
 *
 * fbf must be loaded through shared_preload_libraries: the registry is
 * shared memory and the worker a background worker, both of which can only
 * be set up while the postmaster starts.  Loading it any other way (for
 * example by CREATE EXTENSION creating its C functions) fails with a hint,
 * as pg_cron does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "citus/citus.h"
#include "common/fbf_xlog.h"
#include "compat.h"
#include "counter/counter.h"
#include "cuckoo/cuckoo.h"
#include "registry/registry.h"
#include "type/fbf_value.h"
#include "window/window.h"
#include "worker/worker.h"

FBF_MODULE_MAGIC("fbf", FBF_EXTVERSION);

void		_PG_init(void);

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("fbf must be loaded via shared_preload_libraries"),
				 errhint("Add fbf to the shared_preload_libraries configuration parameter and restart the server.")));

	FbfXLogInit();
	FbfTypeInit();
	FbfRegistryInit();
	FbfWindowInit();
	FbfWindowRebuildInit();
	FbfCounterInit();
	FbfCounterMaintainInit();
	FbfCitusInit();
	FbfCitusPlanInit();
	FbfCitusAloneInit();
	FbfDedupCitusInit();
	FbfCitusTransferInit();
	FbfWorkerInit();
	CuckooAmInit();
	MarkGUCPrefixReserved("fbf");
}
