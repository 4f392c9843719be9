/*-------------------------------------------------------------------------
 *
 * citus_plan.c
 *	  The fast path of tables distributed by Citus: a statement that is
 *	  one call of idempotent_increment (or its outcome or batch form) on
 *	  such a counter, or of fbf_claim of one id on such a dedup table, is
 *	  handed to Citus as the routed statement itself.
 *
 * Run as a function, an increment on a distributed counter routes its
 * operations from inside the call (citus_apply, citus_route.c): Citus
 * sees a statement run by a running statement, opens a transaction block
 * on the placement for it (BEGIN and assign_distributed_transaction_id),
 * sends it, and commits the block when the client's statement ends: three
 * round trips where a plain single-shard UPDATE takes one, and the routed
 * statement planned again on every call.
 *
 * So the planner hook rewrites the client's statement before Citus plans
 * it.  A statement that is exactly
 *
 *	SELECT idempotent_increment(counter, [key,] client_id, seq, delta)
 *
 * (or idempotent_increment_outcome, or the batch form with arrays), with
 * nothing else in it, whose counter is a constant naming a counter
 * distributed by its key that the caller may update, becomes
 *
 *	WITH touch AS (UPDATE counter SET value = value
 *				   WHERE key = fbf_routing_key(<key>, 'idempotent_increment')
 *				   AND shard < 0 RETURNING 1)
 *	SELECT fbf_increment_on_placement(counter, <key>, client_id, seq, delta)
 *
 * with the client's own arguments (its parameters, constants and
 * immutable functions of them, folded to constants in its session when a
 * custom plan binds the parameters) in place of <key> and the rest.  This is
 * the statement citus_apply sends, and Citus plans it as it does there: a
 * single-shard router modification (the CTE names the shard, and makes it
 * a modification that takes the shard's metadata lock that shard moves
 * wait for), run on the placement with the function evaluated there.  But
 * it is now the client's statement: in autocommit it is sent in one round
 * trip, as a plain UPDATE is; in an explicit transaction it joins the
 * distributed transaction, and a transaction that writes through more than
 * one node commits with two-phase commit, as before.
 *
 * A custom plan outside a transaction block (commits_alone) becomes
 * instead the statement that commits on its own,
 *
 *	SELECT fbf_increment_on_placement(fbf_outside_transaction_block(counter),
 *									  <key>, client_id, seq, delta)
 *	FROM counter WHERE key = <key, evaluated here> AND shard < 0 GROUP BY ()
 *
 * which reads no row and returns one, and which Citus plans with its
 * fast-path router planner, cheaper than the modification above, and runs
 * as a read task: no metadata lock, no transaction block on the placement
 * in autocommit, no two-phase commit.  On the node of the shard, where it
 * arrives on the shard table, it is planned as its call alone
 * (placement_read).  So it is made only for a custom
 * plan (one execution) of a statement that is its transaction's first and
 * commits when it ends: outside a transaction block and a pipeline, with
 * no volatile argument (commits_alone), checked again when it runs
 * (citus_alone.c, 25001).  This file takes the shard's metadata
 * lock before Citus plans it, as Citus' executor does for a routed write
 * (FbfCitusLockRoutingValue), and the placement refuses it inside a
 * transaction block (fbf_outside_transaction_block, 25001).  The generic
 * plan of a call whose key is a text parameter of its own, or of a claim
 * whose id (or client id or seq) is a parameter, with nothing but
 * parameters and constants beside it, is that statement too, routed by a
 * parameter (unbound_routing: the key, or the claim's anchor as a
 * parameter of fbf's own), which Citus' fast path prunes by when the plan
 * runs; the executor's start then binds it, makes those checks and takes
 * that lock (citus_alone.c), or has the statement planned again for the
 * execution where the plan cannot run so (FbfCitusPlanAgain).
 * docs/design.md, "The statement that commits on its own".
 * fbf_routing_key is the key itself, or the front end's error (22004) if
 * it is NULL: Citus evaluates it to choose the shard, and would otherwise
 * fail to find one for a NULL key, before the twin could say why.
 *
 * A claim of one id on a dedup table distributed by its anchor
 * (citus_dedup.c) takes the same path: SELECT fbf_claim(dedup, id), or
 * (dedup, client_id, seq), becomes
 *
 *	WITH touch AS (UPDATE dedup SET anchor = anchor
 *				   WHERE anchor = fbf_claim_anchor(id) RETURNING 1)
 *	SELECT fbf_claim_on_placement(dedup, id)
 *
 * (or, committing on its own, SELECT fbf_claim_on_placement(
 * fbf_outside_transaction_block(dedup), id) FROM dedup WHERE anchor =
 * <anchor, evaluated here> GROUP BY ()).
 * Citus evaluates the anchor to route, and the placement computes it again
 * from the id to find the shard it claims in: one call of two or three
 * arguments that the placement parses and plans as little as it can (the
 * array form citus_dedup.c routes batches through made it analyze four
 * calls and fold two); the privilege of a claim is INSERT.  A batch
 * of claims spans shards, so it keeps its route (one statement per shard).
 * The forms, their privileges and their routed statements are the table
 * routed_forms.
 *
 * The routed statement is parsed and analyzed once per backend, front end
 * and counter (routed_template), then, on every planning, given the
 * client's expressions and put through the rewriter, as the client's
 * statement was (row security and rules, judged for the current user).
 *
 * The twins (fbf_increment_on_placement and
 * fbf_increment_outcome_on_placement, counter.c and counter_batch.c) are
 * the front ends' own code with their checks and messages, applying on the
 * key's shard table of this node (FbfCitusApplyOnPlacement,
 * citus_placement.c, through the route's apply_on_placement): privileges and
 * row security are judged there as an increment on the shard table judges
 * them, and the result is the front end's, of its type.
 *
 * The rewrite is declined, leaving the call to the function route, unless
 * all of these hold, so that the two statements mean the same:
 *	- the statement is the client's: planned from the text the client
 *	  sent (the query string is debug_query_string), with no portal
 *	  running and no other planning under way.  A statement planned
 *	  inside a function (which may be read-only), by a trigger at COMMIT,
 *	  or by a function an argument calls while the client's statement is
 *	  planned keeps its call as written.  The transaction may write (a
 *	  read-only one gets the front end's own error, 25006);
 *	- the extension has the functions the routed statement calls (a 1.4
 *	  library on an extension not yet updated keeps the function route);
 *	- the SELECT has one target, the call, and nothing else (no FROM,
 *	  WHERE, CTE, sublink, grouping, ordering or locking);
 *	- the function is one of the front ends (its C symbol, in this
 *	  module);
 *	- the table is a non-NULL constant, and the arguments can be made
 *	  constants here: the key is evaluated twice (by Citus to choose the
 *	  shard, and by the twin), and must give the same value both times.
 *	  So the arguments are folded here, in the client's session, with the
 *	  values of a custom plan's parameters (coordinator_arguments): the
 *	  placement receives constants, never an expression its own session
 *	  would evaluate with its own settings (an "immutable" cast to text of
 *	  a float8 or a bytea reads extra_float_digits or bytea_output) or
 *	  could not evaluate at all (a function that exists only here).  An
 *	  argument that calls a stable or volatile function ($1::int::text,
 *	  format(), now(), nextval()) is evaluated here too, once, but only in
 *	  a custom plan: the plan cache makes one for an execution, with its
 *	  parameters bound, and drops it after.  Any other plan may run again
 *	  with the values of its planning: a generic plan is kept and reused,
 *	  and one that PostgreSQL plans again after an invalidation is planned
 *	  from the statement it analyzes anew in the same message, which
 *	  nothing here can tell from a statement sent on its own.  So a
 *	  statement sent on its own ('k' || 42 in the simple query protocol)
 *	  or prepared without parameters keeps the function route when an
 *	  argument is not immutable, evaluating it at every execution;
 *	- a generic plan that would run (plan_cache_mode =
 *	  force_generic_plan, or a cursor asking for one) has no parameter
 *	  left in the arguments, unless it is the statement that commits on
 *	  its own routed by a parameter (unbound_routing): Citus cannot route the
 *	  statement with the CTE by an unbound parameter, and would fail at
 *	  execution (0A000).  Under the default mode Citus prices such a
 *	  generic plan out, so custom plans are made;
 *	- the caller has UPDATE on the counter, INSERT on the dedup table
 *	  (checked before the table is opened; a caller without it gets the
 *	  front end's own error), row
 *	  security does not apply to the caller on it (the function route first
 *	  lets the key's policies judge the caller on this node, 42501, where
 *	  the routed statement's CTE, under the policies, could leave Citus no
 *	  shard to route to; a claim is refused under row security), and the
 *	  table is of the form's kind, distributed by Citus (the relation
 *	  cache).
 *
 * A call that is declined once its table is known to be routable says why
 * at DEBUG1 (SET client_min_messages = debug1; docs/user-guide.md, "The
 * fast path"); a statement of any other kind is planned without a word.
 *
 * Locks: RowExclusiveLock on the table, as the rewritten statement's
 * UPDATE takes it (privileges checked before); for the statement that
 * commits on its own, then the routing value's shard metadata lock in
 * ShareLock (src/citus/README.md, "Locks"): for a generic plan of it,
 * both when the executor starts (citus_alone.c); pg_proc through the
 * syscache.  The cache of analyzed statements is per backend, in
 * CacheMemoryContext, emptied by invalidations (routed_forget).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_collation_d.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type_d.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/planmain.h"
#include "optimizer/planner.h"
#include "parser/analyze.h"
#include "parser/parse_func.h"
#include "parser/parser.h"
#include "rewrite/rewriteHandler.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/syscache.h"

#include "citus/citus.h"
#include "common/fbf_htab.h"
#include "counter/counter.h"
#include "window/window.h"

/* the front ends the fast path takes */
typedef enum FastForm
{
	FAST_NONE,
	FAST_SINGLE,				/* idempotent_increment: boolean */
	FAST_OUTCOME,				/* idempotent_increment_outcome: record */
	FAST_BATCH,					/* idempotent_increment with arrays */
	FAST_CLAIM,					/* fbf_claim(dedup, id): boolean */
	FAST_CLAIM_OP				/* fbf_claim(dedup, client_id, seq) */
} FastForm;

/* the front ends, by their C symbols in this module */
static const struct
{
	const char *symbol;
	FastForm	form;
}			front_ends[] =
{
	{"fbf_increment_int8", FAST_SINGLE},
	{"fbf_increment_text", FAST_SINGLE},
	{"fbf_increment_uuid", FAST_SINGLE},
	{"fbf_increment_outcome_int8", FAST_OUTCOME},
	{"fbf_increment_outcome_text", FAST_OUTCOME},
	{"fbf_increment_outcome_uuid", FAST_OUTCOME},
	{"fbf_increment_batch_int8", FAST_BATCH},
	{"fbf_increment_batch_text", FAST_BATCH},
	{"fbf_increment_batch_uuid", FAST_BATCH},
	{"fbf_claim_int8", FAST_CLAIM},
	{"fbf_claim_text", FAST_CLAIM},
	{"fbf_claim_bytea", FAST_CLAIM},
	{"fbf_claim_uuid", FAST_CLAIM},
	{"fbf_claim_op", FAST_CLAIM_OP},
};

/*
 * The routed statements: a counter's front end `front_end` (the routing
 * key's error names it) sent to its placement twin `twin`, and a claim
 * whose anchor is fbf_claim_anchor(anchor_args), its seqs `seqs`.
 */
#define ROUTED_INCREMENT(front_end, twin) \
	"WITH touch AS (UPDATE %1$s SET value = value " \
	"WHERE key OPERATOR(pg_catalog.=) %2$s.fbf_routing_key($2, '" front_end "'::pg_catalog.text) " \
	"AND shard OPERATOR(pg_catalog.<) 0 RETURNING 1) " \
	"SELECT %2$s." twin "($1, $2, $3, $4, $5)"
#define ROUTED_CLAIM(claim_args) \
	"WITH touch AS (UPDATE %1$s SET anchor = anchor " \
	"WHERE anchor OPERATOR(pg_catalog.=) %2$s.fbf_claim_anchor(" claim_args ") RETURNING 1) " \
	"SELECT %2$s.fbf_claim_on_placement($1, " claim_args ")"

/*
 * The same, as statements that commit on their own (outside a transaction
 * block, in a custom plan: fast_path): a SELECT of the table by its
 * routing value that reads no row, grouped so that it returns one row and
 * calls the twin once, which Citus plans as a fast-path router read.  The
 * routing value's function is evaluated here (alone_routing_value), so
 * that Citus sees the routing column compared with a constant.
 */
#define ALONE_INCREMENT(front_end, twin) \
	"SELECT %2$s." twin "(%2$s.fbf_outside_transaction_block($1), $2, $3, $4, $5) " \
	"FROM %1$s WHERE key OPERATOR(pg_catalog.=) %2$s.fbf_routing_key($2, '" front_end "'::pg_catalog.text) " \
	"AND shard OPERATOR(pg_catalog.<) 0 GROUP BY ()"
#define ALONE_CLAIM(claim_args) \
	"SELECT %2$s.fbf_claim_on_placement(%2$s.fbf_outside_transaction_block($1), " claim_args ") " \
	"FROM %1$s WHERE anchor OPERATOR(pg_catalog.=) %2$s.fbf_claim_anchor(" claim_args ") GROUP BY ()"

/*
 * What each form is routed as: the kind of window table it takes, the
 * privilege that lets the caller call it (a caller without it keeps the
 * front end's own error), and the routed statement, with %1$s the table
 * (qualified, quoted) and %2$s the extension's schema (quoted), $1 the
 * table and $2... the front end's other arguments (a counter's key always
 * $2: the keyless forms get the default key).
 */
static const struct
{
	FastForm	form;
	int			kind;			/* FBF_WINDOW_COUNTER or FBF_WINDOW_DEDUP */
	AclMode		privilege;
	const char *needs;			/* the newest function it calls, taking */
	int			needs_nargs;	/* this many arguments */
	Oid			needs_types[3]; /* of these types */
	const char *sql;
	const char *alone;			/* the statement that commits on its own */
}			routed_forms[] =
{
	{FAST_SINGLE, FBF_WINDOW_COUNTER, ACL_UPDATE, "fbf_routing_key", 2,
		{TEXTOID, TEXTOID},
		ROUTED_INCREMENT("idempotent_increment", "fbf_increment_on_placement"),
	ALONE_INCREMENT("idempotent_increment", "fbf_increment_on_placement")},
	{FAST_OUTCOME, FBF_WINDOW_COUNTER, ACL_UPDATE, "fbf_routing_key", 2,
		{TEXTOID, TEXTOID},
		ROUTED_INCREMENT("idempotent_increment_outcome",
						 "fbf_increment_outcome_on_placement"),
		ALONE_INCREMENT("idempotent_increment_outcome",
						"fbf_increment_outcome_on_placement")},
	{FAST_BATCH, FBF_WINDOW_COUNTER, ACL_UPDATE, "fbf_routing_key", 2,
		{TEXTOID, TEXTOID},
		ROUTED_INCREMENT("idempotent_increment", "fbf_increment_on_placement"),
	ALONE_INCREMENT("idempotent_increment", "fbf_increment_on_placement")},
	{FAST_CLAIM, FBF_WINDOW_DEDUP, ACL_INSERT, "fbf_claim_on_placement", 2,
		{REGCLASSOID, ANYELEMENTOID},
	ROUTED_CLAIM("$2"), ALONE_CLAIM("$2")},
	{FAST_CLAIM_OP, FBF_WINDOW_DEDUP, ACL_INSERT, "fbf_claim_on_placement", 3,
		{REGCLASSOID, ANYELEMENTOID, INT8OID},
	ROUTED_CLAIM("$2, $3"), ALONE_CLAIM("$2, $3")},
};

/* the entry of routed_forms for `form` */
static int
routed_form(FastForm form)
{
	int			i;

	for (i = 0; i < (int) lengthof(routed_forms); i++)
		if (routed_forms[i].form == form)
			return i;
	elog(ERROR, "fbf: no routed statement for form %d", (int) form);
	return -1;					/* keep compiler quiet */
}

static planner_hook_type prev_planner_hook = NULL;

/* the cost of a generic plan that custom plans should win against */
#define DISSUADED_PLAN_COST		1.0e10

/* plannings under way in this backend (fbf_citus_planner) */
static int	planning_depth = 0;

PG_FUNCTION_INFO_V1(fbf_routing_key);

/*
 * The C symbol of the function `funcid` if it is one of this module's
 * (palloc'd), or NULL.
 */
static char *
module_symbol(Oid funcid)
{
	HeapTuple	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	Datum		d;
	bool		isnull;
	char	   *symbol = NULL;
	char	   *module;

	if (!HeapTupleIsValid(tuple))
		return NULL;
	if (((Form_pg_proc) GETSTRUCT(tuple))->prolang == ClanguageId)
	{
		d = SysCacheGetAttr(PROCOID, tuple, Anum_pg_proc_probin, &isnull);
		module = isnull ? NULL : TextDatumGetCString(d);
		d = SysCacheGetAttr(PROCOID, tuple, Anum_pg_proc_prosrc, &isnull);
		if (!isnull && module != NULL && strcmp(module, "$libdir/fbf") == 0)
			symbol = TextDatumGetCString(d);
		if (module != NULL)
			pfree(module);
	}
	ReleaseSysCache(tuple);
	return symbol;
}

/*
 * Which front end the function `funcid` is: one whose C symbol, in this
 * module, is in front_ends; FAST_NONE for any other function.
 */
static FastForm
front_end_form(Oid funcid)
{
	char	   *symbol = module_symbol(funcid);
	int			i;

	if (symbol != NULL)
		for (i = 0; i < (int) lengthof(front_ends); i++)
			if (strcmp(symbol, front_ends[i].symbol) == 0)
				return front_ends[i].form;
	return FAST_NONE;
}

/*
 * The one target of `parse`, if it is a SELECT of one target with no CTE,
 * sublink, aggregate, window function, set-returning target, set
 * operation, grouping by a column, HAVING, ordering, DISTINCT, LIMIT,
 * OFFSET or locking clause; NULL otherwise.  Its FROM, WHERE and grouping
 * sets are the caller's to judge.
 */
static Expr *
lone_target(Query *parse)
{
	TargetEntry *tle;

	if (parse->commandType != CMD_SELECT || parse->utilityStmt != NULL ||
		parse->cteList != NIL || parse->hasSubLinks || parse->hasAggs ||
		parse->hasWindowFuncs || parse->hasTargetSRFs ||
		parse->hasModifyingCTE || parse->hasForUpdate ||
		parse->setOperations != NULL || parse->jointree == NULL ||
		parse->groupClause != NIL || parse->havingQual != NULL ||
		parse->sortClause != NIL || parse->distinctClause != NIL ||
		parse->limitCount != NULL || parse->limitOffset != NULL ||
		parse->rowMarks != NIL || list_length(parse->targetList) != 1)
		return NULL;
	tle = linitial_node(TargetEntry, parse->targetList);
	return tle->resjunk ? NULL : tle->expr;
}

/*
 * The call of a front end that `parse` is, alone, or NULL: a SELECT with
 * one target and nothing else (lone_target, and no FROM, WHERE or
 * grouping), the target a call of a function taking arguments.
 */
static FuncExpr *
lone_call(Query *parse)
{
	Expr	   *target;

	if (parse->rtable != NIL || parse->groupingSets != NIL ||
		(target = lone_target(parse)) == NULL ||
		parse->jointree->quals != NULL || parse->jointree->fromlist != NIL ||
		!IsA(target, FuncExpr))
		return NULL;
	return (FuncExpr *) target;
}

/*
 * `call` with its arguments in the positions of its function's parameters
 * (a copy), if it names them (`seq => 5`): the planner puts them there
 * only later, and the routed statement takes them by position.
 */
static FuncExpr *
positional_call(FuncExpr *call)
{
	ListCell   *lc;
	HeapTuple	tuple;
	FuncExpr   *result;

	foreach(lc, call->args)
		if (IsA(lfirst(lc), NamedArgExpr))
			break;
	if (lc == NULL)
		return call;
	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(call->funcid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for function %u", call->funcid);
	result = copyObject(call);
	result->args = expand_function_arguments(result->args, false,
											 result->funcresulttype, tuple);
	ReleaseSysCache(tuple);
	return result;
}

/*
 * The table `call` applies to, if it is a window table of the form's kind
 * distributed by Citus (a counter by its key, a dedup table by its anchor)
 * that the caller may use as `form` does, without row security, and its
 * owner in *owner; InvalidOid otherwise.  Locks it with RowExclusiveLock,
 * as the routed statement with the CTE will, once its privilege is known
 * (the statement that commits on its own reads the table, but the call
 * writes to it: the lock is a writer's either way).
 */
static Oid
routable_table(FuncExpr *call, FastForm form, Oid *owner)
{
	Const	   *table = linitial(call->args);
	int			r = routed_form(form);
	Oid			relid;
	Relation	rel;
	FbfCounterRel *entry;
	bool		routable = false;
	bool		missing = false;

	if (!IsA(table, Const) || table->constisnull ||
		table->consttype != REGCLASSOID)
		return InvalidOid;
	relid = DatumGetObjectId(table->constvalue);

	/* the privilege, without row security; a table dropped meanwhile: no */
	if (pg_class_aclcheck_ext(relid, GetUserId(), routed_forms[r].privilege,
							  &missing) != ACLCHECK_OK || missing ||
		check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		return InvalidOid;
	rel = try_relation_open(relid, RowExclusiveLock);
	if (rel == NULL)
		return InvalidOid;
	if (rel->rd_rel->relkind == RELKIND_RELATION)
	{
		entry = FbfCounterRelGet(rel);
		routable = OidIsValid(entry->window_index) &&
			entry->kind == routed_forms[r].kind &&
			entry->citus == FBF_CITUS_BY_KEY;
		*owner = rel->rd_rel->relowner;
	}
	relation_close(rel, NoLock);
	return routable ? relid : InvalidOid;
}

/* ----------------------------------------------------------------------
 * The routed statements analyzed in this backend
 * ----------------------------------------------------------------------
 */

/*
 * Each front end's routed statement on each table, analyzed once per
 * backend: parsing and analyzing its text is a third of the fast path's
 * own planning, and the statement is planned on every execution unless
 * its generic plan is kept (unbound_routing: Citus' router cannot prune the
 * statement with the CTE by an unbound parameter).  An
 * entry goes when its table changes (a relcache invalidation) or any
 * function does (pg_proc's): it names the table's columns and the twins
 * by OID.
 */
typedef struct RoutedKey
{
	Oid			funcid;			/* the front end */
	Oid			table;			/* the distributed counter or dedup table */
	bool		alone;			/* the statement that commits on its own */
} RoutedKey;

typedef struct RoutedEntry
{
	RoutedKey	key;
	MemoryContext cxt;			/* holds query */
	Query	   *query;			/* analyzed, with $1, $2... unreplaced */
	Oid			guard;			/* the statement that commits on its own:
								 * fbf_outside_transaction_block */
} RoutedEntry;

static HTAB *routed_cache = NULL;

/* drop the entries of `table` (InvalidOid: every entry) */
static void
routed_forget(Oid table)
{
	HASH_SEQ_STATUS status;
	RoutedEntry *entry;

	if (routed_cache == NULL)
		return;
	hash_seq_init(&status, routed_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
		if (!OidIsValid(table) || entry->key.table == table)
		{
			MemoryContextDelete(entry->cxt);
			hash_search(routed_cache, &entry->key, HASH_REMOVE, NULL);
		}
}

static void
routed_relcache_callback(Datum arg, Oid relid)
{
	routed_forget(relid);
}

static void
routed_proc_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	routed_forget(InvalidOid);
}

/*
 * An error analyzing the routed statement `arg` (a table whose columns
 * were renamed) points into that statement, as SPI's do, not into the
 * client's.
 */
static void
routed_error_callback(void *arg)
{
	int			position = geterrposition();

	if (position > 0)
	{
		errposition(0);
		internalerrposition(position);
		internalerrquery((const char *) arg);
	}
}

/* the function `name` of the schema `nspname` taking `nargs` `types` */
static Oid
function_oid(char *nspname, const char *name, int nargs, const Oid *types)
{
	return LookupFuncName(list_make2(makeString(nspname),
									 makeString(pstrdup(name))),
						  nargs, types, true);
}

/*
 * The routed statement of the front end `call` of form `form` on the
 * distributed table `table`, analyzed with $1, $2... of its arguments'
 * `nparams` types (`types`), from the cache or parsed and analyzed now and
 * kept; NULL if the extension lacks the functions it calls.  `alone`: the
 * statement that commits on its own, and *guard the function it passes
 * the table through (fbf_outside_transaction_block).  The caller copies
 * it before use.
 */
static Query *
routed_template(FuncExpr *call, FastForm form, Oid table, const Oid *types,
				int nparams, bool alone, Oid *guard)
{
	static const Oid alone_types[1] = {REGCLASSOID};
	int			r = routed_form(form);
	RoutedKey	key;
	RoutedEntry *entry;
	MemoryContext cxt;
	MemoryContext old;
	char	   *nspname;
	const char *schema;
	char	   *sql;
	RawStmt    *raw;
	Query	   *query;
	ErrorContextCallback errcallback;
	bool		found;

	if (routed_cache == NULL)
	{
		routed_cache = FbfHashCreate("fbf routed statements", 16,
									 sizeof(RoutedKey), sizeof(RoutedEntry),
									 CacheMemoryContext);
		CacheRegisterRelcacheCallback(routed_relcache_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(PROCOID, routed_proc_callback, (Datum) 0);
	}
	memset(&key, 0, sizeof(key));
	key.funcid = call->funcid;
	key.table = table;
	key.alone = alone;
	entry = hash_search(routed_cache, &key, HASH_FIND, NULL);
	if (entry != NULL)
	{
		*guard = entry->guard;
		return entry->query;
	}

	/*
	 * The front end lives in the extension's schema, as the twins do; they
	 * are missing there while an older version of the extension is
	 * installed under this library (until ALTER EXTENSION fbf UPDATE):
	 * those of 1.4 for either statement of an increment, those of 1.5 for a
	 * claim's and for the statement that commits on its own
	 * (fbf_outside_transaction_block).
	 */
	nspname = get_namespace_name(get_func_namespace(call->funcid));
	*guard = alone ? function_oid(nspname, "fbf_outside_transaction_block",
								  1, alone_types) : InvalidOid;
	if (!OidIsValid(function_oid(nspname, routed_forms[r].needs,
								 routed_forms[r].needs_nargs,
								 routed_forms[r].needs_types)) ||
		(alone && !OidIsValid(*guard)))
		return NULL;
	schema = quote_identifier(nspname);
	sql = psprintf(alone ? routed_forms[r].alone : routed_forms[r].sql,
				   quote_qualified_identifier(get_namespace_name(get_rel_namespace(table)),
											  get_rel_name(table)),
				   schema);
	errcallback.callback = routed_error_callback;
	errcallback.arg = sql;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	raw = linitial_node(RawStmt, raw_parser(sql, RAW_PARSE_DEFAULT));
	query = parse_analyze_fixedparams(raw, sql, types, nparams, NULL);
	error_context_stack = errcallback.previous;

	cxt = AllocSetContextCreate(CacheMemoryContext, "fbf routed statement",
								ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(cxt);
	query = copyObject(query);
	MemoryContextSwitchTo(old);
	entry = hash_search(routed_cache, &key, HASH_ENTER, &found);
	if (found)
		MemoryContextDelete(entry->cxt);
	entry->cxt = cxt;
	entry->query = query;
	entry->guard = *guard;
	return query;
}

/* put copies of the expressions `args` (a List) in place of $1, $2, ... */
static Node *
put_arguments(Node *node, void *args)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Param) && ((Param *) node)->paramkind == PARAM_EXTERN)
		return copyObject(list_nth((List *) args, ((Param *) node)->paramid - 1));
	if (IsA(node, Query))
		return (Node *) query_tree_mutator((Query *) node, put_arguments,
										   args, 0);
	return expression_tree_mutator(node, put_arguments, args);
}

/*
 * Where the routing value of `routed`, a statement that commits on its
 * own, stands: the right side of the first comparison of its WHERE, the
 * routing column compared with fbf_routing_key or fbf_claim_anchor of the
 * client's arguments.
 */
static Expr **
alone_routing_slot(Query *routed)
{
	Node	   *quals = routed->jointree->quals;

	if (is_andclause(quals))
		quals = linitial(((BoolExpr *) quals)->args);
	return (Expr **) &lsecond(castNode(OpExpr, quals)->args);
}

/*
 * The routed statement (the file's header) that stands for `parse`, the
 * lone call `call` of the front end of form `form` on the distributed
 * table `table`, whose arguments are `args` (coordinator_arguments): the
 * analyzed template, each $n replaced by the argument, through the
 * rewriter (row security, rules) as the client's statement went; NULL if
 * that makes it more than one statement, or the extension lacks the
 * functions it calls.  `alone`: the statement that commits on its own,
 * and *guard its fbf_outside_transaction_block.  Bound (`unbound` NULL),
 * its arguments are constants, and its routing value is evaluated here
 * and put in place as a constant, as Citus' fast path wants it (NULL is
 * returned if that is NULL, though neither function returns it: a NULL
 * key or id is refused there, 22004, as the front end refuses it); the
 * value's shard metadata is then locked in ShareLock, as Citus locks a
 * routed write's (FbfCitusLockRoutingValue), as the table's owner
 * `owner`.  `unbound`: a generic plan's routing parameter
 * (unbound_routing), put in the routing value's place, by which Citus
 * prunes when the plan runs; the routing value's expression, of the
 * client's parameters, goes to *routing, for the executor's start to
 * evaluate then, before it takes that lock (citus_alone.c).
 */
static Query *
routed_statement(Query *parse, FuncExpr *call, List *args, FastForm form,
				 Oid table, bool alone, Param *unbound, Oid owner, Oid *guard,
				 Expr **routing)
{
	TargetEntry *was = linitial_node(TargetEntry, parse->targetList);
	Oid			types[5];
	int			nparams = list_length(args);
	Query	   *template;
	List	   *rewritten;
	Query	   *routed;
	TargetEntry *tle;
	int			i;

	if (nparams > (int) lengthof(types))
		return NULL;
	for (i = 0; i < nparams; i++)
		types[i] = exprType(list_nth(args, i));

	template = routed_template(call, form, table, types, nparams, alone,
							   guard);
	if (template == NULL)
		return NULL;
	routed = copyObject(template);
	routed = (Query *) put_arguments((Node *) routed, args);
	if (alone && unbound != NULL)
	{
		Expr	  **slot = alone_routing_slot(routed);

		*routing = *slot;
		*slot = (Expr *) copyObject(unbound);
	}
	else if (alone)
	{
		Expr	  **slot = alone_routing_slot(routed);
		Const	   *value = castNode(Const,
									 evaluate_expr(*slot, exprType((Node *) *slot),
												   exprTypmod((Node *) *slot),
												   exprCollation((Node *) *slot)));

		if (value->constisnull)
			return NULL;
		*slot = (Expr *) value;
		FbfCitusLockRoutingValue(table, owner, value->constvalue,
								 value->consttype);
	}
	rewritten = QueryRewrite(routed);
	if (list_length(rewritten) != 1)
		return NULL;
	routed = linitial_node(Query, rewritten);

	/* the client's statement still: its name, place and identity */
	tle = linitial_node(TargetEntry, routed->targetList);
	tle->resname = was->resname;
	routed->queryId = parse->queryId;
	routed->stmt_location = parse->stmt_location;
	routed->stmt_len = parse->stmt_len;
	routed->canSetTag = parse->canSetTag;
	return routed;
}

/* does `node` hold a parameter of the client's (PARAM_EXTERN)? */
static bool
has_extern_param(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param) && ((Param *) node)->paramkind == PARAM_EXTERN)
		return true;
	return expression_tree_walker(node, has_extern_param, context);
}

/*
 * Are the parameters `params` the protocol's of a custom plan: fixed (no
 * hook fetches them, as a PL's does) and every one a constant of this
 * execution (PARAM_FLAG_CONST), as eval_const_expressions would fold them?
 */
static bool
params_constant(ParamListInfo params)
{
	if (params->paramFetch != NULL)
		return false;
	for (int i = 0; i < params->numParams; i++)
		if ((params->params[i].pflags & PARAM_FLAG_CONST) == 0)
			return false;
	return true;
}

/*
 * The values of the expressions `args` with the constant parameters
 * `params` (params_constant), each a Const: evaluated as evaluate_expr
 * evaluates a folded expression (a copy of the datum, detoasted), but all
 * in one executor state, where folding them would make one for every
 * operator or function whose arguments it had made constants (a batch's
 * arrays of a hundred `$2 - 99`: a hundred executor states, a seventh of
 * the coordinator's CPU for the batch).  The same values: an immutable
 * function gives the value folding gives it, and a stable or volatile one
 * is evaluated once either way (this plan runs once).
 */
static List *
evaluate_arguments(List *args, ParamListInfo params)
{
	EState	   *estate = CreateExecutorState();
	ExprContext *econtext = GetPerTupleExprContext(estate);
	List	   *result = NIL;
	ListCell   *lc;

	econtext->ecxt_param_list_info = params;
	foreach(lc, args)
	{
		Expr	   *arg = lfirst(lc);
		Oid			type = exprType((Node *) arg);
		int16		typlen;
		bool		typbyval;
		Datum		value;
		bool		isnull;
		MemoryContext old;

		if (IsA(arg, Const))
		{
			result = lappend(result, arg);
			continue;
		}
		fix_opfuncids((Node *) arg);
		old = MemoryContextSwitchTo(estate->es_query_cxt);
		value = ExecEvalExprSwitchContext(ExecInitExprWithParams(arg, params),
										  econtext, &isnull);
		MemoryContextSwitchTo(old);
		get_typlenbyval(type, &typlen, &typbyval);
		if (!isnull)
			value = typlen == -1 ? PointerGetDatum(PG_DETOAST_DATUM_COPY(value)) :
				datumCopy(value, typbyval, typlen);
		result = lappend(result,
						 makeConst(type, exprTypmod((Node *) arg),
								   exprCollation((Node *) arg), typlen, value,
								   isnull, typbyval));
		ResetExprContext(econtext);
	}
	FreeExecutorState(estate);
	return result;
}

/*
 * The arguments of the lone call `call` of form `form` as the routed
 * statement carries them (the file's header): folded here, in the client's
 * session, with the values of the bound parameters `boundParams` of a
 * custom plan, and a counter's keyless forms' default key put in.  In a
 * custom plan (`boundParams` set), what folding leaves (a stable or
 * volatile function) is evaluated, each argument once; with the
 * protocol's parameters, every argument is evaluated so, without folding
 * (evaluate_arguments).  The functions
 * inlined meanwhile go to *inval_items, for the plan's dependencies.  NIL,
 * with *why, if an argument calls a stable or volatile function and the
 * plan may run again.  *dissuade is then set if the plan is the generic
 * one of a statement with parameters: custom plans of it take the fast
 * path, so the plan cache should not prefer this one.  A generic plan's
 * arguments keep their parameters (fast_path judges them).
 */
static List *
coordinator_arguments(FuncExpr *call, FastForm form, ParamListInfo boundParams,
					  List **inval_items, const char **why, bool *dissuade)
{
	bool		once = boundParams != NULL;
	List	   *args;
	ListCell   *lc;

	if (!once && contain_mutable_functions((Node *) call->args))
	{
		*why = "an argument calls a function that is not immutable, and the plan may run again";
		*dissuade = has_extern_param((Node *) call->args, NULL);
		return NIL;
	}
	if (once && params_constant(boundParams))
		args = evaluate_arguments(call->args, boundParams);
	else
	{
		PlannerGlobal *glob = makeNode(PlannerGlobal);
		PlannerInfo *root = makeNode(PlannerInfo);

		glob->boundParams = boundParams;
		root->glob = glob;
		args = (List *) eval_const_expressions(root, (Node *) call->args);
		*inval_items = glob->invalItems;
	}
	if (once)
	{
		/*
		 * The bound parameters are constants by now (a custom plan's are
		 * PARAM_FLAG_CONST); what is left is evaluated as the executor
		 * would, in this session
		 */
		foreach(lc, args)
		{
			Expr	   *arg = lfirst(lc);

			if (!IsA(arg, Const) && !has_extern_param((Node *) arg, NULL))
				lfirst(lc) = evaluate_expr(arg, exprType((Node *) arg),
										   exprTypmod((Node *) arg),
										   exprCollation((Node *) arg));
		}
	}

	/* a counter's keyless forms are on the default key */
	if (routed_forms[routed_form(form)].kind == FBF_WINDOW_COUNTER &&
		list_length(args) == 4)
		args = list_insert_nth(args, 1,
							   makeConst(TEXTOID, -1, DEFAULT_COLLATION_OID, -1,
										 PointerGetDatum(cstring_to_text("")),
										 false, false));
	return args;
}

/*
 * Is the statement about to run the first of a transaction that commits
 * when it ends: outside a transaction block, and not after another
 * statement of a pipeline (the extended protocol's messages before a Sync
 * share one transaction, outside any block, and Citus keeps a distributed
 * transaction that an earlier one opened)?
 */
bool
FbfCitusFirstOfTransaction(void)
{
	return !IsTransactionBlock() &&
		(MyXactFlags & XACT_FLAGS_PIPELINING) == 0;
}

/*
 * Does Citus send reads to the primaries (citus.use_secondary_nodes, set
 * only at a session's start) and open a transaction block for a read
 * inside one (citus.select_opens_transaction_block), so that
 * fbf_outside_transaction_block on the placement stands behind the checks
 * of the statement that commits on its own?
 */
bool
FbfCitusAloneSettings(void)
{
	const char *secondaries;
	const char *opens;

	secondaries = GetConfigOption("citus.use_secondary_nodes", true, false);
	opens = GetConfigOption("citus.select_opens_transaction_block", true, false);
	return secondaries != NULL && strcmp(secondaries, "never") == 0 &&
		opens != NULL && strcmp(opens, "on") == 0;
}

/*
 * May the routed statement of the lone call `call`, in a custom plan made
 * with `boundParams`, be the one that commits on its own (the file's
 * header)?  Only a custom plan's (`boundParams` set: it runs once, in the
 * transaction it is made in), as its transaction's first statement
 * (FbfCitusFirstOfTransaction, checked again when it runs:
 * citus_alone.c), whose arguments call no volatile function (one
 * evaluated while the statement is planned could write through Citus,
 * which then holds a distributed transaction open: an increment of its
 * own), under FbfCitusAloneSettings.
 */
static bool
commits_alone(FuncExpr *call, ParamListInfo boundParams)
{
	return boundParams != NULL && FbfCitusFirstOfTransaction() &&
		!contain_volatile_functions((Node *) call->args) &&
		FbfCitusAloneSettings();
}

/*
 * The parameter by which the generic plan of a call of form `form`, whose
 * arguments as a generic plan leaves them are `args`
 * (coordinator_arguments), is routed, if the plan can be the statement
 * that commits on its own: the arguments are parameters of the client's
 * and constants, and Citus' fast path planner prunes such a read by a
 * parameter when the plan runs (citus.enable_fast_path_router_planner and
 * citus.enable_router_execution on).
 *	- A counter's call is routed by its key, if that is a text parameter:
 *	  the client's own, bound by the client.
 *	- A claim is routed by the anchor of its id, which no parameter of the
 *	  client's holds: by one of its own, numbered after every parameter
 *	  the call names (the statement is the call: no other can be named),
 *	  of fbf_claim_anchor's type, which the executor's start binds.  Its id,
 *	  or its client id or seq, must be a parameter (a claim of constants is
 *	  planned as it is).
 * When the plan runs, the executor's start (citus_alone.c) checks what
 * commits_alone checks of a custom plan, evaluates and binds the routing
 * value that routed_statement set aside (bind_routing) and takes the lock
 * routed_statement takes for one.
 * NULL otherwise.
 */
static Param *
unbound_routing(FastForm form, List *args)
{
	ListCell   *lc;
	Node	   *key;
	Param	   *anchor;
	int			last = 0;
	const char *fast = GetConfigOption("citus.enable_fast_path_router_planner",
									   true, false);
	const char *router = GetConfigOption("citus.enable_router_execution",
										 true, false);

	if (fast == NULL || strcmp(fast, "on") != 0 ||
		router == NULL || strcmp(router, "on") != 0)
		return NULL;
	foreach(lc, args)
	{
		Node	   *arg = lfirst(lc);

		if (IsA(arg, Param) && ((Param *) arg)->paramkind == PARAM_EXTERN)
			last = Max(last, ((Param *) arg)->paramid);
		else if (!IsA(arg, Const))
			return NULL;
	}
	if (routed_forms[routed_form(form)].kind == FBF_WINDOW_COUNTER)
	{
		key = lsecond(args);
		return IsA(key, Param) && ((Param *) key)->paramtype == TEXTOID ?
			(Param *) key : NULL;
	}
	if (!has_extern_param((Node *) list_delete_first(list_copy(args)), NULL))
		return NULL;
	anchor = makeNode(Param);
	anchor->paramkind = PARAM_EXTERN;
	anchor->paramid = last + 1;
	anchor->paramtype = INT4OID;
	anchor->paramtypmod = -1;
	anchor->paramcollid = InvalidOid;
	anchor->location = -1;
	return anchor;
}

/*
 * What the plan of the statement that commits on its own carries for the
 * executor's start, which the plan Citus makes does not say (it holds the
 * statement it sends): the client's call as its statement `parse` names
 * it (its target entry), to plan the statement again from where it cannot
 * run as it is (FbfCitusPlanAgain), and for a generic plan the parameter
 * `unbound` it is routed by (unbound_routing) and the expression of its
 * value, `routing` (routed_statement).  A Result of those targets that
 * nothing runs, the plan's last subplan, taken off before the executor
 * starts (FbfCitusAloneCarried, citus_alone.c).
 */
static List *
alone_carried(Query *parse, Param *unbound, Expr *routing)
{
	List	   *targets = list_make1(copyObject(linitial(parse->targetList)));

	if (unbound != NULL)
	{
		targets = lappend(targets,
						  makeTargetEntry((Expr *) copyObject(unbound), 2,
										  NULL, false));
		targets = lappend(targets,
						  makeTargetEntry((Expr *) copyObject(routing), 3,
										  NULL, false));
	}
	return targets;
}

/*
 * The routed statement that stands for `parse` (the file's header), or
 * NULL: the statement keeps its call.  `clients`: it is the client's
 * statement, planned from the text the client sent, not one a function or
 * a trigger runs, nor one planned while another is (an argument's
 * function, evaluated here, running statements of its own).  The
 * functions folded into the arguments go to *inval_items; *dissuade says
 * that the plan made without the routed statement should not be preferred
 * to custom plans (coordinator_arguments).  *guard is the function the
 * statement that commits on its own passes its table through, if it is
 * that statement, and InvalidOid otherwise; that statement's plan carries
 * *carried then (alone_carried).  A call on a routable table that is
 * declined says why, at DEBUG1.
 */
static Query *
fast_path(Query *parse, ParamListInfo boundParams, int cursorOptions,
		  bool clients, List **inval_items, bool *dissuade, Oid *guard,
		  List **carried)
{
	FuncExpr   *call;
	FastForm	form;
	Oid			table;
	Oid			owner = InvalidOid;
	List	   *args;
	const char *why = NULL;
	Query	   *routed = NULL;
	Param	   *unbound = NULL;
	Expr	   *routing = NULL;

	if (XactReadOnly ||
		(call = lone_call(parse)) == NULL ||
		(form = front_end_form(call->funcid)) == FAST_NONE ||
		!OidIsValid(table = routable_table(call = positional_call(call),
											form, &owner)))
		return NULL;

	if (!clients)
		why = "it is planned inside another statement (a function, a trigger, a DO block, EXPLAIN, EXECUTE or a cursor)";
	else if ((args = coordinator_arguments(call, form, boundParams,
										   inval_items, &why,
										   dissuade)) != NIL)
	{
		if (boundParams == NULL &&
			(unbound = unbound_routing(form, args)) != NULL &&
			FbfCitusAloneSettings())
			routed = routed_statement(parse, call, args, form, table,
									  true, unbound, owner, guard, &routing);
		else if (commits_alone(call, boundParams))
			routed = routed_statement(parse, call, args, form, table,
									  true, NULL, owner, guard, NULL);
		if (routed != NULL)
			*carried = alone_carried(parse, unbound, routing);
		else
		{
			*guard = InvalidOid;
			if (boundParams == NULL &&
				(plan_cache_mode == PLAN_CACHE_MODE_FORCE_GENERIC_PLAN ||
				 (cursorOptions & CURSOR_OPT_GENERIC_PLAN) != 0) &&
				has_extern_param((Node *) args, NULL))
				why = "a generic plan would run with a parameter unbound";
			else
				routed = routed_statement(parse, call, args, form, table,
										  false, NULL, owner, guard, NULL);
		}
		if (routed == NULL && why == NULL)
			why = "the routed statement cannot be made (rules on the table, or an extension not yet updated)";
	}
	if (routed == NULL)
		ereport(DEBUG1,
				(errmsg_internal("fbf: this call of %s on \"%s\" takes the function route: %s",
								 get_func_name(call->funcid),
								 get_rel_name(table), why)));
	return routed;
}

/* ----------------------------------------------------------------------
 * The statement that commits on its own, on its placement
 * ----------------------------------------------------------------------
 */

/*
 * Is `parse` the statement that commits on its own as the node of its
 * shard receives it from Citus, on the shard table:
 *
 *	SELECT twin(fbf_outside_transaction_block(counter), ...)
 *	FROM <shard> WHERE key = <constant> AND shard < 0 GROUP BY ()
 *
 * (a claim's target is fbf_claim_on_placement(...) too, or
 * (fbf_claim_on_placement(...))[1] of the array form, as a coordinator of
 * an older library sends it)?  Grouped by the
 * empty set, with no aggregate and no HAVING, a SELECT returns one row
 * whatever its table holds, and evaluates its target once, which can name
 * no column of the table (the parser allows none); PostgreSQL plans the
 * scan and then throws it away for a Result.  So, its quals calling
 * nothing volatile, it is its target alone, and is planned as that
 * (plan_statement), without planning the scan, which was a tenth of the
 * placement node's work for each call.  Its quals are then not simplified
 * either: one that would fail when folded (1/0) no longer fails, where the
 * quals Citus sends are constants the planning node evaluated.  The table
 * stays in the range table, out of the join tree, as an INSERT's target
 * does: the executor still checks the caller's SELECT on the columns the
 * quals named, and the plan still locks the table and depends on it.
 *
 * Recognized by fbf_outside_transaction_block, this module's function
 * that only the fast path's statement calls, as the first argument of its
 * lone target's function, and by a table that is a window table Citus does
 * not distribute: on the shell (the node that plans the client's
 * statement) Citus must see the scan to route it.
 */
static bool
placement_read(Query *parse)
{
	Node	   *target;
	FuncExpr   *call;
	Node	   *guard;
	GroupingSet *gset;
	RangeTblEntry *rte;
	Relation	rel;
	FbfCounterRel *entry;
	char	   *symbol;
	bool		result;

	if (list_length(parse->groupingSets) != 1 ||
		list_length(parse->rtable) != 1 ||
		(target = (Node *) lone_target(parse)) == NULL ||
		list_length(parse->jointree->fromlist) != 1 ||
		!IsA(linitial(parse->jointree->fromlist), RangeTblRef))
		return false;
	gset = linitial(parse->groupingSets);
	if (!IsA(gset, GroupingSet) || gset->kind != GROUPING_SET_EMPTY)
		return false;

	if (IsA(target, SubscriptingRef))
		target = (Node *) ((SubscriptingRef *) target)->refexpr;
	if (!IsA(target, FuncExpr) || ((FuncExpr *) target)->args == NIL)
		return false;
	call = (FuncExpr *) target;
	guard = linitial(call->args);
	if (!IsA(guard, FuncExpr) ||
		(symbol = module_symbol(((FuncExpr *) guard)->funcid)) == NULL ||
		strcmp(symbol, "fbf_outside_transaction_block") != 0 ||
		contain_volatile_functions(parse->jointree->quals))
		return false;

	/*
	 * The table is locked since the statement's analysis.  One with
	 * inheritance children is left as it is: planning its scan locks them
	 * (a shard has none).
	 */
	rte = linitial_node(RangeTblEntry, parse->rtable);
	if (rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_RELATION ||
		(rte->inh && has_subclass(rte->relid)))
		return false;
	rel = relation_open(rte->relid, NoLock);
	entry = FbfCounterRelGet(rel);
	result = OidIsValid(entry->window_index) &&
		entry->citus == FBF_CITUS_LOCAL;
	relation_close(rel, NoLock);
	return result;
}

/* the hash of fbf_outside_transaction_block in pg_proc's syscache, or 0 */
static uint32 alone_guard_hash = 0;

/* how a statement is being planned again (FbfCitusPlanAgain) */
static FbfPlanAgain planning_again = FBF_AGAIN_NOT;

/*
 * Plan `parse` with the planner before us (Citus'), the routed statement
 * in its place if fast_path makes one; `clients` as fast_path takes it.
 * A generic plan that fast_path dissuades gets a cost the plan cache never
 * prefers to a custom plan's, as Citus prices its own such plans out.  The
 * plan of a statement that commits on its own depends on
 * fbf_outside_transaction_block, which the plan it gets from Citus does
 * not say (the function is called on the placement): that dependency,
 * added to its invalidation items, is also how the executor's start knows
 * it (FbfCitusAloneCarried); and it carries what alone_carried says.
 */
static PlannedStmt *
plan_statement(Query *parse, const char *query_string, int cursorOptions,
			   ParamListInfo boundParams, bool clients)
{
	List	   *inval_items = NIL;
	bool		dissuade = false;
	Oid			guard = InvalidOid;
	List	   *carried = NIL;
	Query	   *routed = fast_path(parse, boundParams, cursorOptions, clients,
								   &inval_items, &dissuade, &guard, &carried);
	PlannedStmt *result;

	if (routed == NULL && placement_read(parse))
	{
		/* its target alone (placement_read); the planner's to scribble on */
		parse->jointree->fromlist = NIL;
		parse->jointree->quals = NULL;
		parse->groupingSets = NIL;
	}
	if (OidIsValid(guard))
	{
		PlanInvalItem *item = makeNode(PlanInvalItem);

		item->cacheId = PROCOID;
		item->hashValue = GetSysCacheHashValue1(PROCOID,
												ObjectIdGetDatum(guard));
		inval_items = lappend(inval_items, item);
		alone_guard_hash = item->hashValue;
	}

	if (prev_planner_hook)
		result = prev_planner_hook(routed ? routed : parse, query_string,
								   cursorOptions, boundParams);
	else
		result = standard_planner(routed ? routed : parse, query_string,
								  cursorOptions, boundParams);
	if (routed != NULL)
		result->invalItems = list_concat(result->invalItems, inval_items);
	if (OidIsValid(guard))
	{
		Result	   *carrier = makeNode(Result);

		carrier->plan.targetlist = carried;
		result->subplans = lappend(result->subplans, carrier);
	}
	if (dissuade)
		result->planTree->total_cost = DISSUADED_PLAN_COST;
	return result;
}

/*
 * The planner hook: the routed statement in place of a lone call of a
 * front end on a distributed table (plan_statement).  The statement is the
 * client's if its text is the one the client sent (debug_query_string: a
 * function's or a trigger's statement has its own), no portal runs it
 * (EXECUTE, EXPLAIN, DO, a cursor) and no other planning is under way
 * (planning_depth counts them); or if FbfCitusPlanAgain says so, planning it
 * again when it starts to run.
 */
static PlannedStmt *
fbf_citus_planner(Query *parse, const char *query_string, int cursorOptions,
				  ParamListInfo boundParams)
{
	bool		clients = planning_depth == 0 &&
		(planning_again == FBF_AGAIN_ROUTED ||
		 (planning_again == FBF_AGAIN_NOT && query_string != NULL &&
		  query_string == debug_query_string && ActivePortal == NULL));
	PlannedStmt *result;

	planning_depth++;
	PG_TRY();
	{
		result = plan_statement(parse, query_string, cursorOptions,
								boundParams, clients);
	}
	PG_FINALLY();
	{
		planning_depth--;
	}
	PG_END_TRY();
	return result;
}

/* ----------------------------------------------------------------------
 * What the executor's start (citus_alone.c) asks of the planning
 * ----------------------------------------------------------------------
 */

/*
 * Is `stmt` the plan of a statement that commits on its own (its
 * dependency on fbf_outside_transaction_block, plan_statement)?  Only a
 * Citus plan (a custom scan) of a backend that made one.  Its targets
 * (alone_carried) go to *carried.
 */
bool
FbfCitusAloneCarried(PlannedStmt *stmt, List **carried)
{
	ListCell   *lc;
	Plan	   *carrier;

	if (alone_guard_hash == 0 || stmt->planTree == NULL ||
		!IsA(stmt->planTree, CustomScan) || stmt->subplans == NIL ||
		!IsA((carrier = llast(stmt->subplans)), Result))
		return false;
	foreach(lc, stmt->invalItems)
	{
		PlanInvalItem *item = lfirst_node(PlanInvalItem, lc);

		if (item->cacheId == PROCOID && item->hashValue == alone_guard_hash)
		{
			*carried = carrier->targetlist;
			return true;
		}
	}
	return false;
}

/*
 * The table of `call`, a call of a front end (front_end_form) on a table
 * it may route (routable_table, which locks it), and its owner in *owner;
 * InvalidOid for any other call.  For the executor's start of a generic
 * plan (citus_alone.c), which carries the call as the client's statement
 * names its arguments (by name too: positional_call).
 */
Oid
FbfCitusRoutableCall(FuncExpr *call, Oid *owner)
{
	FastForm	form = front_end_form(call->funcid);

	return form == FAST_NONE ? InvalidOid :
		routable_table(positional_call(call), form, owner);
}

/*
 * Is the statement about to run as `queryDesc` the client's own, not one
 * that another runs (SQL's EXECUTE of a prepared statement in a function or
 * a DO block, which the transaction goes on after): the text of the
 * protocol's message or of the simple query (a copy of it in the portal),
 * with no planning under way?
 */
bool
FbfCitusRunsAsClients(QueryDesc *queryDesc)
{
	return planning_depth == 0 && debug_query_string != NULL &&
		queryDesc->sourceText != NULL &&
		strcmp(queryDesc->sourceText, debug_query_string) == 0;
}

/*
 * The plan of a statement that commits on its own, about to run as
 * `queryDesc` where it cannot as it is, planned again from the client's
 * call it carries (`carried`, alone_carried) as a custom plan for the
 * parameters the executor binds: `how` FBF_AGAIN_ROUTED, as the client's
 * statement (fbf_citus_planner), with the routed statement that suits the
 * transaction it runs in now; FBF_AGAIN_AS_CALL, as its call.  For the
 * executor's start (citus_alone.c).
 */
PlannedStmt *
FbfCitusPlanAgain(QueryDesc *queryDesc, FbfPlanAgain how, List *carried)
{
	Query	   *query = makeNode(Query);
	FbfPlanAgain was = planning_again;
	PlannedStmt *result;

	query->commandType = CMD_SELECT;
	query->querySource = QSRC_ORIGINAL;
	query->canSetTag = true;
	query->queryId = queryDesc->plannedstmt->queryId;
	query->stmt_location = queryDesc->plannedstmt->stmt_location;
	query->stmt_len = queryDesc->plannedstmt->stmt_len;
	query->jointree = makeFromExpr(NIL, NULL);
	query->targetList = list_make1(copyObject(linitial(carried)));

	planning_again = how;
	PG_TRY();
	{
		result = planner(query, queryDesc->sourceText, CURSOR_OPT_PARALLEL_OK,
						 queryDesc->params);
	}
	PG_FINALLY();
	{
		planning_again = was;
	}
	PG_END_TRY();
	return result;
}

/*
 * fbf_routing_key(key text, fname text) RETURNS text: `key`, by which
 * Citus routes the statement of the fast path; error (22004) if it is
 * NULL, as the front end `fname` says it.  Immutable, not strict.
 */
Datum
fbf_routing_key(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("key of %s must not be null",
						PG_ARGISNULL(1) ? "idempotent_increment" :
						text_to_cstring(PG_GETARG_TEXT_PP(1)))));
	PG_RETURN_DATUM(PG_GETARG_DATUM(0));
}

/*
 * Install the planner hook; from _PG_init.  Citus, which must come first
 * in shared_preload_libraries, installs its planner before: so this hook
 * runs first and hands Citus the routed statement.
 */
void
FbfCitusPlanInit(void)
{
	prev_planner_hook = planner_hook;
	planner_hook = fbf_citus_planner;
}
