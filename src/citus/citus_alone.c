/*-------------------------------------------------------------------------
 *
 * citus_alone.c
 *	  The executor's start of a statement that commits on its own: the
 *	  plan citus_plan.c made for one call of a front end on a distributed
 *	  table, run as Citus' fast-path read of the call's shard.
 *
 * Such a plan carries what the executor's start needs and Citus' plan does
 * not say (citus_plan.c, alone_carried): the client's call as analyzed,
 * and for a generic plan the key parameter it is routed by.  The start
 * takes that off (take_carried), then judges the plan where it runs now,
 * as the planning node judged it where it was made (commits_alone):
 *	- run by another statement (SQL's EXECUTE in a function or a DO block)
 *	  or under EXPLAIN ANALYZE or auto_explain.log_analyze, the call is
 *	  planned again as its call (FbfCitusPlanAgain);
 *	- a generic plan runs as it is, checked and locked now that the
 *	  parameters are bound, or is planned again for this execution
 *	  (start_unbound);
 *	- a custom plan must still be its transaction's first statement, or
 *	  it is refused (25001) before Citus sends anything.
 * docs/design.md, "The statement that commits on its own", and "Its
 * generic plan".
 *
 * Locks: for a generic plan, RowExclusiveLock on the table (privileges and
 * row security checked before: FbfCitusRoutableCall), then the key's shard
 * metadata in ShareLock (FbfCitusLockRoutingValue), before Citus prunes
 * and loads the placement: the order src/citus/README.md states ("Locks").
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "utils/lsyscache.h"

#include "citus/citus.h"

static ExecutorStart_hook_type prev_executor_start = NULL;

/*
 * What the plan `queryDesc` is about to run carries, if it is that of a
 * statement that commits on its own (FbfCitusAloneCarried), taken off: the
 * plan becomes a copy without it.  NIL for any other plan.
 */
static List *
take_carried(QueryDesc *queryDesc)
{
	List	   *carried;
	PlannedStmt *stmt;

	if (!FbfCitusAloneCarried(queryDesc->plannedstmt, &carried))
		return NIL;
	stmt = makeNode(PlannedStmt);
	memcpy(stmt, queryDesc->plannedstmt, sizeof(PlannedStmt));
	stmt->subplans = list_truncate(list_copy(stmt->subplans),
								   list_length(stmt->subplans) - 1);
	queryDesc->plannedstmt = stmt;
	return carried;
}

/*
 * The executor's start of the generic plan of a statement that commits on
 * its own (citus_plan.c, routed_statement), which carries the client's
 * call and its key parameter (`carried`): what commits_alone checks of a
 * custom plan, and the lock routed_statement takes for one, now that the
 * parameters are bound.  Run as the first statement of a transaction that
 * may write, under FbfCitusAloneSettings, a call that is still routable
 * (FbfCitusRoutableCall: the caller's privilege and row security checked
 * before the table is locked) has its key checked as fbf_routing_key
 * checks it (22004 for a NULL key) and its shard's metadata locked in
 * ShareLock (FbfCitusLockRoutingValue), before Citus prunes by the
 * parameter and loads the placement.  Otherwise (a transaction block, a
 * pipeline, a read-only transaction, a setting changed, a table no longer
 * routable) the statement is planned again in its place, as a custom plan
 * with these parameters would be (FbfCitusPlanAgain): the routed statement
 * with the CTE, joining the distributed transaction, or the call with the
 * front end's own error.
 */
static void
start_unbound(QueryDesc *queryDesc, List *carried)
{
	FuncExpr   *call = castNode(FuncExpr,
								castNode(TargetEntry, linitial(carried))->expr);
	Param	   *key = castNode(Param,
							   castNode(TargetEntry, lsecond(carried))->expr);
	ParamListInfo params = queryDesc->params;
	Oid			table;
	Oid			owner = InvalidOid;
	ParamExternData *value;

	if (FbfCitusFirstOfTransaction() && !XactReadOnly &&
		FbfCitusAloneSettings() && params != NULL && params->paramFetch == NULL &&
		key->paramid >= 1 && key->paramid <= params->numParams &&
		params->params[key->paramid - 1].ptype == TEXTOID &&
		OidIsValid(table = FbfCitusRoutableCall(call, &owner)))
	{
		value = &params->params[key->paramid - 1];
		if (value->isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("key of %s must not be null",
							get_func_name(call->funcid))));
		FbfCitusLockRoutingValue(table, owner, value->value, TEXTOID);
		return;
	}
	queryDesc->plannedstmt = FbfCitusPlanAgain(queryDesc, FBF_AGAIN_ROUTED,
											   carried);
	/* a custom plan that commits on its own, made under commits_alone now */
	(void) take_carried(queryDesc);
}

/*
 * The executor's start of the plan of a statement that commits on its own
 * (FbfCitusAloneCarried), taking off what it carries first (alone_carried).
 * It must run as the client's own statement (FbfCitusRunsAsClients), and
 * not under EXPLAIN ANALYZE or auto_explain.log_analyze (where Citus runs
 * the read on the placement inside a subtransaction, which
 * fbf_outside_transaction_block refuses): else it is planned again, as its
 * call (FbfCitusPlanAgain).  A generic plan's start is start_unbound's.  A
 * custom plan must still be the first of its transaction
 * (FbfCitusFirstOfTransaction), or it is refused (25001) before Citus
 * sends anything: its plan was made when it was (commits_alone), at the
 * protocol's Bind, and a portal bound then and executed later may run
 * after a BEGIN, or after another statement of a pipeline, where Citus
 * would commit its read without two-phase commit.
 */
static void
alone_executor_start(QueryDesc *queryDesc, int eflags)
{
	List	   *carried = take_carried(queryDesc);

	if (carried != NIL && (eflags & EXEC_FLAG_EXPLAIN_ONLY) == 0)
	{
		if (queryDesc->instrument_options != 0 ||
			!FbfCitusRunsAsClients(queryDesc))
			queryDesc->plannedstmt = FbfCitusPlanAgain(queryDesc,
													   FBF_AGAIN_AS_CALL,
													   carried);
		else if (list_length(carried) == 2)
			start_unbound(queryDesc, carried);
		else if (!FbfCitusFirstOfTransaction())
			ereport(ERROR,
					(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
					 errmsg("this statement was planned to commit on its own, and runs inside a larger transaction"),
					 errdetail("Its plan was made for a statement that is its transaction's only distributed statement."),
					 errhint("Roll back, and retry the transaction.")));
	}
	if (prev_executor_start)
		prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

/* Install the executor's start; from _PG_init. */
void
FbfCitusAloneInit(void)
{
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = alone_executor_start;
}
