/*-------------------------------------------------------------------------
 *
 * counter_maintain.c
 *	  Maintaining a counter: one pass (refresh if due, drain, one AIMD
 *	  step) as the background worker and fbf_counter_maintain() run it,
 *	  resizing by hand (fbf_counter_resize), and the AIMD settings.
 *
 * The AIMD settings (fbf.aimd_increase_at, fbf.aimd_decrease_at,
 * fbf.aimd_period_step, fbf.period_min) are read here and nowhere else:
 * the window takes them as an FbfAimdPolicy argument (and, for a window
 * that must grow under an operation, through the policy source registered
 * at init).
 *
 * Locks: a pass and a resize run on a table opened with RowExclusiveLock
 * (FbfCounterOpen, ownership checked before; the worker opens it itself);
 * the window takes its buffer locks in the order of src/window/README.md
 * ("Lock definitions"), and the registry its own LWLock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "counter/counter.h"
#include "registry/registry.h"
#include "window/window.h"

PG_FUNCTION_INFO_V1(fbf_counter_maintain);
PG_FUNCTION_INFO_V1(fbf_counter_resize);

static double fbf_aimd_increase_at = 0.9;
static double fbf_aimd_decrease_at = 0.1;
static int	fbf_aimd_period_step_ms = 1000;
static int	fbf_period_min_ms = 100;

/* the AIMD settings as the window takes them */
static void
aimd_policy(FbfAimdPolicy *policy)
{
	policy->increase_at = fbf_aimd_increase_at;
	policy->decrease_at = fbf_aimd_decrease_at;
	policy->period_step = (int64) fbf_aimd_period_step_ms * 1000;
	policy->period_min = (int64) fbf_period_min_ms * 1000;
}

/* The AIMD settings; from FbfCounterInit. */
void
FbfCounterMaintainInit(void)
{
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
	/* a window that must grow under an operation takes these settings */
	FbfWindowSetPolicySource(aimd_policy);
}

/*
 * Grow an open counter's filter now (FbfWindowGrow): an increment saw it
 * fill faster than its bits are for.  The caller holds RowExclusiveLock
 * on the table.
 */
void
FbfCounterGrow(Relation index)
{
	FbfAimdPolicy policy;

	aimd_policy(&policy);
	FbfWindowGrow(index, &policy);
}

/*
 * One maintenance pass over an open counter (FbfWindowMaintain under the
 * AIMD settings), recorded in the registry.  If `schedule` is not NULL, it
 * gets whether the counter is busy (it had operations since its previous
 * pass), whether operations of transactions still in progress waited on
 * its chains before its drain (FbfWindowInFlight: a later pass drains
 * them, and nothing else would tell the worker when they commit), and in
 * how many microseconds its next refresh is due.  The caller holds
 * RowExclusiveLock on the table.
 */
FbfAimdDecision
FbfCounterMaintain(Relation heap, Relation index, FbfCounterSchedule *schedule)
{
	FbfAimdPolicy policy;
	FbfAimdDecision d;
	bool		busy;
	bool		in_flight;

	aimd_policy(&policy);
	/* asked before the drain: an entry that commits meanwhile is drained */
	in_flight = schedule != NULL && FbfWindowInFlight(index);
	d = FbfWindowMaintain(index, &policy);
	busy = FbfStatsMaintained(MyDatabaseId, RelationGetRelid(heap),
							  GetCurrentTimestamp());
	if (schedule != NULL)
	{
		schedule->busy = busy;
		schedule->in_flight = in_flight;
		schedule->refresh_in = FbfWindowRefreshDueIn(index);
	}
	return d;
}

/*
 * fbf_counter_maintain(counter regclass): one maintenance pass (refresh if
 * due, drain, one AIMD step), as the background worker runs it.  Returns
 * what AIMD did: 'grow', 'shrink' or 'hold'.
 */
Datum
fbf_counter_maintain(PG_FUNCTION_ARGS)
{
	Relation	heap;
	Relation	index;
	FbfAimdDecision d;

	PreventCommandIfReadOnly("fbf_counter_maintain()");
	PreventCommandDuringRecovery("fbf_counter_maintain()");
	FbfCounterOpen(PG_GETARG_OID(0), FBF_COUNTER_OWNER, RowExclusiveLock, &heap, &index);
	d = FbfCounterMaintain(heap, index, NULL);
	FbfCounterClose(heap, index);
	PG_RETURN_TEXT_P(cstring_to_text(d.action == FBF_AIMD_GROW ? "grow" :
									 d.action == FBF_AIMD_SHRINK ? "shrink" : "hold"));
}

/*
 * fbf_counter_resize(counter regclass, filters int): resize the ring now
 * (see FbfWindowResize); returns the number of filters afterwards.
 */
Datum
fbf_counter_resize(PG_FUNCTION_ARGS)
{
	Relation	heap;
	Relation	index;
	int			n;

	PreventCommandIfReadOnly("fbf_counter_resize()");
	PreventCommandDuringRecovery("fbf_counter_resize()");
	FbfCounterOpen(PG_GETARG_OID(0), FBF_COUNTER_OWNER, RowExclusiveLock, &heap, &index);
	n = FbfWindowResize(index, PG_GETARG_INT32(1));
	FbfCounterClose(heap, index);
	PG_RETURN_INT32(n);
}
