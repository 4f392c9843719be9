/*-------------------------------------------------------------------------
 *
 * citus_alone.c
 *	  The executor's start of a statement that commits on its own: the
 *	  plan citus_plan.c made for one call of a front end on a distributed
 *	  table, run as Citus' fast-path read of the call's shard.
 *
 * Such a plan carries what the executor's start needs and Citus' plan does
 * not say (citus_plan.c, alone_carried): the client's call as analyzed,
 * and for a generic plan the parameter it is routed by (a counter's key, a
 * claim's anchor) and that parameter's expression.  The start
 * takes that off (take_carried), then judges the plan where it runs now,
 * as the planning node judged it where it was made (commits_alone):
 *	- run by another statement (SQL's EXECUTE in a function or a DO block)
 *	  or under EXPLAIN ANALYZE or auto_explain.log_analyze, and a generic
 *	  plan under EXPLAIN, the call is planned again as its call
 *	  (FbfCitusPlanAgain);
 *	- a generic plan runs as it is, its routing value bound, checked and
 *	  locked now that the parameters are bound, or is planned again for
 *	  this execution (start_unbound);
 *	- a custom plan must still be its transaction's first statement, or
 *	  it is refused (25001) before Citus sends anything.
 * docs/design.md, "The statement that commits on its own", and "Its
 * generic plan".
 *
 * Locks: for a generic plan, RowExclusiveLock on the table (privileges and
 * row security checked before: FbfCitusRoutableCall), then the routing
 * value's shard metadata in ShareLock (FbfCitusLockRoutingValue), before
 * Citus prunes and loads the placement: the order src/citus/README.md
 * states ("Locks").
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "utils/datum.h"
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

/* what the generic plan of a statement that commits on its own carries */
typedef struct GenericCarried
{
	FuncExpr   *call;			/* the client's call, as analyzed */
	Param	   *routing;		/* the parameter the plan is routed by */
	Expr	   *value;			/* its value, of the client's parameters */
} GenericCarried;

/* `carried` (citus_plan.c, alone_carried) of a generic plan, unpacked */
static GenericCarried
generic_carried(List *carried)
{
	GenericCarried result;

	result.call = castNode(FuncExpr,
						   castNode(TargetEntry, linitial(carried))->expr);
	result.routing = castNode(Param,
							  castNode(TargetEntry, lsecond(carried))->expr);
	result.value = castNode(TargetEntry, lthird(carried))->expr;
	return result;
}

/*
 * Can the routing value of the generic plan that carries `generic` be
 * evaluated and bound with the parameters bound to `queryDesc`: the
 * protocol's (fixed, not fetched as a PL's are)?
 */
static bool
routing_bindable(QueryDesc *queryDesc, const GenericCarried *generic)
{
	ParamListInfo params = queryDesc->params;

	return params != NULL && params->paramFetch == NULL &&
		generic->routing->paramid >= 1;
}

/*
 * Bind the routing value of the generic plan that carries `generic`,
 * evaluated with the parameters bound to `queryDesc` as a custom plan
 * evaluates it when it is made: fbf_routing_key of a counter's key (22004
 * for a NULL key, as the front end says it), fbf_claim_anchor of a claim's
 * id (22004 for a NULL id).  It is bound to the routing parameter in a
 * copy of the parameters, which the executor then runs with, and returned
 * in *value.  A counter's routing parameter is the client's key, which
 * keeps its value; a claim's is fbf's own, numbered after every parameter
 * the call names, so that it can replace only one the statement does not
 * name.  False, binding nothing, if the value is NULL (neither function
 * returns NULL, unless redefined).
 */
static bool
bind_routing(QueryDesc *queryDesc, const GenericCarried *generic,
			 Datum *value)
{
	Param	   *routing = generic->routing;
	ParamListInfo params = queryDesc->params;
	ExprContext *econtext = CreateStandaloneExprContext();
	ParamListInfo bound;
	ParamExternData *slot;
	bool		isnull;

	econtext->ecxt_param_list_info = params;
	*value = ExecEvalExprSwitchContext(ExecInitExprWithParams(generic->value,
															  params),
									   econtext, &isnull);
	if (!isnull)
		*value = datumCopy(*value, get_typbyval(routing->paramtype),
						   get_typlen(routing->paramtype));
	FreeExprContext(econtext, true);
	if (isnull)
		return false;

	bound = makeParamList(Max(params->numParams, routing->paramid));
	memcpy(bound->params, params->params,
		   sizeof(ParamExternData) * params->numParams);
	slot = &bound->params[routing->paramid - 1];
	slot->value = *value;
	slot->isnull = false;
	slot->pflags = PARAM_FLAG_CONST;
	slot->ptype = routing->paramtype;
	queryDesc->params = bound;
	return true;
}

/*
 * The executor's start of the generic plan of a statement that commits on
 * its own (citus_plan.c, routed_statement), which carries the client's
 * call, its routing parameter and that parameter's value (`carried`): what
 * commits_alone checks of a custom plan, and the lock routed_statement
 * takes for one, now that the parameters are bound.  Run as the first
 * statement of a transaction that may write, under FbfCitusAloneSettings,
 * a call that is still routable (FbfCitusRoutableCall: the caller's
 * privilege and row security checked before the table is locked) has its
 * routing value evaluated and bound (bind_routing: 22004 for a NULL key or
 * id) and its shard's metadata locked in ShareLock
 * (FbfCitusLockRoutingValue), before Citus prunes by the parameter and
 * loads the placement.  Otherwise (a transaction block, a pipeline, a
 * read-only transaction, a setting changed, a table no longer routable)
 * the statement is planned again in its place, as a custom plan with these
 * parameters would be (FbfCitusPlanAgain): the routed statement with the
 * CTE, joining the distributed transaction, or the call with the front
 * end's own error.  That is said at DEBUG1, with why.
 */
static void
start_unbound(QueryDesc *queryDesc, List *carried)
{
	GenericCarried generic = generic_carried(carried);
	Oid			table;
	Oid			owner = InvalidOid;
	Datum		value;
	const char *why;

	if (!FbfCitusFirstOfTransaction())
		why = "it is not its transaction's first statement";
	else if (XactReadOnly)
		why = "the transaction is read-only";
	else if (!FbfCitusAloneSettings())
		why = "a Citus setting changed";
	else if (!routing_bindable(queryDesc, &generic))
		why = "its parameters are not the protocol's";
	else if (!OidIsValid(table = FbfCitusRoutableCall(generic.call, &owner)))
		why = "the table is no longer routable";
	else if (!bind_routing(queryDesc, &generic, &value))
		why = "its routing value is NULL";
	else
	{
		FbfCitusLockRoutingValue(table, owner, value,
								 generic.routing->paramtype);
		return;
	}
	ereport(DEBUG1,
			(errmsg_internal("fbf: the generic plan of this call of %s is planned again for this execution: %s",
							 get_func_name(generic.call->funcid), why)));
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
 * call (FbfCitusPlanAgain).  A generic plan's start is start_unbound's;
 * under EXPLAIN without ANALYZE (SQL's EXPLAIN EXECUTE of the prepared
 * statement: never the client's own), it is planned again as its call,
 * as it would be run there (and Citus, which prunes when it starts the
 * plan, finds no claim's anchor bound).  A
 * custom plan must still be the first of its transaction
 * (FbfCitusFirstOfTransaction) when it starts, or it is refused (25001)
 * before Citus sends anything, where Citus would commit its read without
 * two-phase commit: a check behind commits_alone's, made at the same Bind
 * (the executor of a one-SELECT portal starts there).  A portal bound
 * then and executed after a BEGIN is refused on the placement instead
 * (fbf_outside_transaction_block; docs/design.md, "Its generic plan").
 */
static void
alone_executor_start(QueryDesc *queryDesc, int eflags)
{
	List	   *carried = take_carried(queryDesc);
	bool		generic = list_length(carried) == 3;

	if (generic && (eflags & EXEC_FLAG_EXPLAIN_ONLY) != 0)
		queryDesc->plannedstmt = FbfCitusPlanAgain(queryDesc,
												   FBF_AGAIN_AS_CALL,
												   carried);
	else if (carried != NIL && (eflags & EXEC_FLAG_EXPLAIN_ONLY) == 0)
	{
		if (queryDesc->instrument_options != 0 ||
			!FbfCitusRunsAsClients(queryDesc))
			queryDesc->plannedstmt = FbfCitusPlanAgain(queryDesc,
													   FBF_AGAIN_AS_CALL,
													   carried);
		else if (generic)
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
