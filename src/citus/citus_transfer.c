/*-------------------------------------------------------------------------
 *
 * citus_transfer.c
 *	  Carrying the windows of distributed counters' shards through Citus'
 *	  shard transfers: moves (citus_move_shard_placement, which the
 *	  rebalancer and citus_drain_node run too) and splits
 *	  (citus_split_shard_by_split_points, isolate_tenant_to_new_shard).
 *
 * Citus copies a shard's rows to its new placement and creates its
 * indexes there afresh, so a counter shard's window would arrive empty
 * and every retry of an operation it had applied would apply again.
 * Nothing in Citus calls back when a transfer ends, so fbf watches the
 * transfer functions themselves through the function manager's hooks
 * (needs_fmgr_hook, fmgr_hook: PostgreSQL calls them around every call of
 * a function the first one names, whoever calls it: a user, a rebalancer's
 * background task, a procedure).
 *
 * A transfer carries the windows of exactly the shards its own call moves:
 * the shard its arguments name (for isolate_tenant_to_new_shard, the shard
 * of the tenant in the table) and the shards colocated with it, as Citus
 * moves or splits them together.  Citus runs transfers of other colocation
 * groups, and moves of other shards of the same group, concurrently; what
 * they change is theirs to carry, and a transfer of tables that are not
 * counters carries nothing.  The hook sees the function, not its
 * arguments, so:
 *
 *	FHET_START	pushes the call on the stack of transfers in progress and
 *				puts transfer_call in place of Citus' function in the
 *				call's FmgrInfo;
 *	transfer_call	reads the arguments, lists the placements of the
 *				counter shards they name (shard id, table, hash range,
 *				node) and a move's source node, then calls Citus'
 *				function;
 *	FHET_END	puts Citus' function back and carries each listed window
 *				whose shard moved (the same shard id on another node: from
 *				its placement on the source node) or was split (gone, and
 *				new shards of the same table within its range: from its
 *				listed placement) to the new placement
 *				(fbf_copy_shard_window: fbf_snapshot on the old node,
 *				fbf_counter_load on the new);
 *	FHET_ABORT	puts Citus' function back.
 *
 * A window is loaded only into a placement whose row in pg_dist_placement
 * this transaction wrote (its xmin is ours): a move that found its shard
 * already moved by a concurrent transfer (Citus then only warns) loads
 * nothing, and no window is loaded twice.  A shard listed by a transfer
 * in progress further out on the stack is left to that one.
 *
 * When the transfer function returns, its transaction has not ended:
 * Citus still blocks writes to the shards it moved (its shard metadata
 * locks are held until commit), so no operation reaches the new placement
 * before its window has been loaded, and the old placement, dropped only
 * by Citus' deferred cleanup after the commit, is still there to read.
 * An error while carrying a window aborts the transfer's transaction: the
 * shard stays where it was, with its window, rather than arriving without
 * it.
 *
 * The stack is not kept in the hook's private datum, which another
 * module's fmgr hook may use for the same call.  It lives in the
 * transaction's memory, so an error that skips FHET_ABORT cannot leave it
 * dangling beyond the transaction.
 *
 * Locks: none of its own beyond reading catalogs (AccessShareLock); the
 * copy of a window runs through SPI as fbf_snapshot and fbf_counter_load,
 * with their locks, inside the transfer's transaction.
 *
 * Without Citus, or in a database without fbf, nothing is done: the
 * functions watched are found by name in pg_catalog, as Citus installs
 * them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_language.h"
#include "catalog/pg_namespace_d.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type_d.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "citus/citus.h"
#include "counter/counter.h"

/* How a transfer function names the shards it moves. */
typedef enum TransferArgs
{
	TRANSFER_NONE,				/* not a transfer function */
	TRANSFER_BY_SHARD,			/* (shard_id bigint, ...) */
	TRANSFER_BY_TENANT,			/* (table_name regclass, tenant_id "any", ...) */
} TransferArgs;

/* A Citus function that moves or splits shards, and how it names them. */
typedef struct TransferFunction
{
	const char *name;
	TransferArgs args;
} TransferFunction;

static const TransferFunction transfer_functions[] = {
	{"citus_move_shard_placement", TRANSFER_BY_SHARD},
	{"master_move_shard_placement", TRANSFER_BY_SHARD},
	{"citus_split_shard_by_split_points", TRANSFER_BY_SHARD},
	{"isolate_tenant_to_new_shard", TRANSFER_BY_TENANT},
};

/* One placement of a counter shard, as Citus' metadata lists it. */
typedef struct ShardPlacement
{
	Oid			counter;
	int64		shardid;
	char	   *shard_name;
	int32		min_value;
	int32		max_value;
	char	   *node_name;
	int32		node_port;
	bool		ours;			/* its row written by this transaction? */
} ShardPlacement;

/* A transfer in progress: the call, and the placements it moves. */
typedef struct Transfer
{
	FmgrInfo   *flinfo;			/* the call's (fmgr_security_definer's copy) */
	PGFunction	fn_addr;		/* Citus' function, in place again at the end */
	TransferArgs args;
	List	   *before;			/* of ShardPlacement, in TopTransactionContext */
	char	   *source_name;	/* a move's source node, from its arguments */
	int32		source_port;
} Transfer;

/* transfers in progress, innermost first, in TopTransactionContext */
static List *transfers = NIL;
static LocalTransactionId transfers_lxid = InvalidLocalTransactionId;

static needs_fmgr_hook_type prev_needs_fmgr_hook = NULL;
static fmgr_hook_type prev_fmgr_hook = NULL;

/*
 * The queries below run under the search_path of whoever moves the shard,
 * where any role may have created operators for these types: each
 * operator is pg_catalog's, named, on operands of the types it takes
 * (docs/design.md, "search_path").  A counter table is a distributed table
 * with a window index (a counter's or a dedup's); only hash-distributed
 * tables qualify, so every shard range read as int4 is a hash range.
 */
#define PLACEMENT_COLUMNS \
"SELECT s.logicalrelid, s.shardid," \
"       pg_catalog.shard_name(s.logicalrelid, s.shardid, false)," \
"       s.shardminvalue::pg_catalog.int4, s.shardmaxvalue::pg_catalog.int4," \
"       n.nodename, n.nodeport," \
"       pl.xmin::pg_catalog.text::pg_catalog.int8" \
"  FROM pg_catalog.pg_dist_shard s" \
"  JOIN pg_catalog.pg_dist_partition p ON p.logicalrelid::pg_catalog.oid OPERATOR(pg_catalog.=) s.logicalrelid::pg_catalog.oid" \
"   AND p.partmethod OPERATOR(pg_catalog.=) 'h'::pg_catalog.\"char\"" \
"  JOIN pg_catalog.pg_dist_placement pl ON pl.shardid OPERATOR(pg_catalog.=) s.shardid" \
"  JOIN pg_catalog.pg_dist_node n ON n.groupid OPERATOR(pg_catalog.=) pl.groupid" \
"   AND n.noderole OPERATOR(pg_catalog.=) 'primary'::pg_catalog.noderole"

#define IS_COUNTER(relid) \
"EXISTS (SELECT FROM pg_catalog.pg_index i" \
"          JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.indexrelid" \
"          JOIN pg_catalog.pg_am a ON a.oid OPERATOR(pg_catalog.=) c.relam" \
"         WHERE i.indrelid OPERATOR(pg_catalog.=) " relid "::pg_catalog.oid" \
"           AND a.amname OPERATOR(pg_catalog.=) 'fbf_filter'::pg_catalog.name)"

/*
 * The placements of the counter shards colocated with shard $1 (itself
 * included), as Citus' ColocatedShardIntervalList finds them for a hash-
 * distributed table: the shards of the same range of every table of its
 * colocation group.  Empty for a shard of any other kind of table, or one
 * that does not exist (Citus then raises its own error).
 */
static const char *const colocated_query =
PLACEMENT_COLUMNS
"  JOIN pg_catalog.pg_dist_shard s0 ON s0.shardid OPERATOR(pg_catalog.=) $1"
"   AND s0.shardminvalue OPERATOR(pg_catalog.=) s.shardminvalue"
"   AND s0.shardmaxvalue OPERATOR(pg_catalog.=) s.shardmaxvalue"
"  JOIN pg_catalog.pg_dist_partition p0 ON p0.logicalrelid::pg_catalog.oid OPERATOR(pg_catalog.=) s0.logicalrelid::pg_catalog.oid"
"   AND p0.partmethod OPERATOR(pg_catalog.=) 'h'::pg_catalog.\"char\""
" WHERE (p.logicalrelid::pg_catalog.oid OPERATOR(pg_catalog.=) p0.logicalrelid::pg_catalog.oid"
"        OR (p0.colocationid OPERATOR(pg_catalog.<>) 0"
"            AND p.colocationid OPERATOR(pg_catalog.=) p0.colocationid))"
"   AND " IS_COUNTER("s.logicalrelid");

/*
 * The placements of every shard of the counter tables $1 (oid[]): where
 * the end of a transfer finds the shards it listed, or their splits.
 */
static const char *const counters_query =
PLACEMENT_COLUMNS
" WHERE s.logicalrelid::pg_catalog.oid OPERATOR(pg_catalog.=) ANY ($1)";

/*
 * The shard of tenant $2 in the hash-distributed table $1, if a counter
 * table is colocated with it (isolate_tenant_to_new_shard's arguments);
 * no row otherwise, and then nothing of the tenant is evaluated.
 */
static const char *const tenant_query =
"SELECT pg_catalog.get_shard_id_for_distribution_column($1, $2)"
"  FROM pg_catalog.pg_dist_partition p0"
" WHERE p0.logicalrelid::pg_catalog.oid OPERATOR(pg_catalog.=) $1::pg_catalog.oid"
"   AND p0.partmethod OPERATOR(pg_catalog.=) 'h'::pg_catalog.\"char\""
"   AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p"
"                WHERE (p.logicalrelid::pg_catalog.oid OPERATOR(pg_catalog.=) p0.logicalrelid::pg_catalog.oid"
"                       OR (p0.colocationid OPERATOR(pg_catalog.<>) 0"
"                           AND p.colocationid OPERATOR(pg_catalog.=) p0.colocationid))"
"                  AND " IS_COUNTER("p.logicalrelid") ")";

/* How does fn_oid name the shards it moves, if it is a transfer function? */
static TransferArgs
transfer_args(Oid fn_oid)
{
	HeapTuple	tuple;
	Form_pg_proc proc;
	TransferArgs result = TRANSFER_NONE;
	size_t		i;

	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn_oid));
	if (!HeapTupleIsValid(tuple))
		return TRANSFER_NONE;
	proc = (Form_pg_proc) GETSTRUCT(tuple);
	if (proc->pronamespace == PG_CATALOG_NAMESPACE &&
		proc->prolang == ClanguageId)
	{
		for (i = 0; i < lengthof(transfer_functions); i++)
		{
			if (strcmp(NameStr(proc->proname), transfer_functions[i].name) == 0)
			{
				result = transfer_functions[i].args;
				break;
			}
		}
	}
	/* the signature the arguments are read by */
	if (result == TRANSFER_BY_SHARD &&
		(proc->pronargs < 1 || proc->proargtypes.values[0] != INT8OID))
		result = TRANSFER_NONE;
	if (result == TRANSFER_BY_TENANT &&
		(proc->pronargs < 2 || proc->proargtypes.values[0] != REGCLASSOID ||
		 proc->proargtypes.values[1] != ANYOID))
		result = TRANSFER_NONE;
	ReleaseSysCache(tuple);
	return result;
}

static bool
fbf_needs_fmgr_hook(Oid fn_oid)
{
	if (prev_needs_fmgr_hook && prev_needs_fmgr_hook(fn_oid))
		return true;
	return transfer_args(fn_oid) != TRANSFER_NONE;
}

/*
 * The placements `query` lists with its nargs arguments, in the current
 * memory context: read with a new snapshot, which sees what the transfer
 * wrote in this transaction.
 */
static List *
list_placements(const char *query, int nargs, Oid *argtypes, Datum *values)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *result = NIL;
	uint64		i;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "fbf: SPI_connect failed");
	if (SPI_execute_with_args(query, nargs, argtypes, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "fbf: could not read Citus' shard placements");
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MemoryContext old = MemoryContextSwitchTo(cxt);
		ShardPlacement *p = palloc(sizeof(ShardPlacement));
		bool		isnull;
		TransactionId xmin;

		p->counter = DatumGetObjectId(SPI_getbinval(tuple, desc, 1, &isnull));
		p->shardid = DatumGetInt64(SPI_getbinval(tuple, desc, 2, &isnull));
		p->shard_name = SPI_getvalue(tuple, desc, 3);
		p->min_value = DatumGetInt32(SPI_getbinval(tuple, desc, 4, &isnull));
		p->max_value = DatumGetInt32(SPI_getbinval(tuple, desc, 5, &isnull));
		p->node_name = SPI_getvalue(tuple, desc, 6);
		p->node_port = DatumGetInt32(SPI_getbinval(tuple, desc, 7, &isnull));
		xmin = (TransactionId) DatumGetInt64(SPI_getbinval(tuple, desc, 8, &isnull));
		p->ours = TransactionIdIsCurrentTransactionId(xmin);
		result = lappend(result, p);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return result;
}

/* Is shard `shardid` listed by a transfer in progress other than `self`? */
static bool
listed_elsewhere(const Transfer *self, int64 shardid)
{
	ListCell   *lc;

	foreach(lc, transfers)
	{
		Transfer   *t = lfirst(lc);
		ListCell   *lp;

		if (t == self)
			continue;
		foreach(lp, t->before)
			if (((ShardPlacement *) lfirst(lp))->shardid == shardid)
				return true;
	}
	return false;
}

/*
 * Does the role own table relid, as isolate_tenant_to_new_shard requires
 * (Citus' EnsureTableOwner)?  False, never an error, if it is gone.
 */
static bool
owns_table(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tuple))
		return false;
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return has_privs_of_role(GetUserId(), owner);
}

/*
 * The placements of the counter shards that the call of the transfer
 * function `args` with `fcinfo` moves or splits (before it runs), less
 * those another transfer in progress listed, in the current context.
 */
static List *
shards_moved(FunctionCallInfo fcinfo, TransferArgs args, const Transfer *self)
{
	Oid			argtypes[2];
	Datum		values[2];
	List	   *placements;
	List	   *result = NIL;
	ListCell   *lc;

	if (args == TRANSFER_BY_TENANT)
	{
		bool		isnull;
		int64		shardid;

		if (PG_NARGS() < 2 || PG_ARGISNULL(0) || PG_ARGISNULL(1))
			return NIL;

		/*
		 * Finding the tenant's shard reads the table (Citus checks SELECT
		 * on it), and only for a counter: for a role Citus will refuse,
		 * that would answer first, and differently for counters.  Citus
		 * refuses a role that does not own the table, and moves nothing.
		 */
		if (!owns_table(DatumGetObjectId(PG_GETARG_DATUM(0))))
			return NIL;
		argtypes[0] = REGCLASSOID;
		argtypes[1] = get_fn_expr_argtype(fcinfo->flinfo, 1);
		if (!OidIsValid(argtypes[1]))
			return NIL;			/* Citus cannot read the tenant either */
		values[0] = PG_GETARG_DATUM(0);
		values[1] = PG_GETARG_DATUM(1);
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "fbf: SPI_connect failed");
		if (SPI_execute_with_args(tenant_query, 2, argtypes, values, NULL, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "fbf: could not find the shard of a tenant");
		if (SPI_processed == 0)
		{
			SPI_finish();
			return NIL;
		}
		shardid = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
											  SPI_tuptable->tupdesc, 1, &isnull));
		SPI_finish();
		if (isnull)
			return NIL;
		values[0] = Int64GetDatum(shardid);
	}
	else
	{
		if (PG_NARGS() < 1 || PG_ARGISNULL(0))
			return NIL;
		values[0] = PG_GETARG_DATUM(0);
	}
	argtypes[0] = INT8OID;
	placements = list_placements(colocated_query, 1, argtypes, values);

	foreach(lc, placements)
	{
		ShardPlacement *p = lfirst(lc);

		if (!listed_elsewhere(self, p->shardid))
			result = lappend(result, p);
	}
	return result;
}

/*
 * The source node a move's arguments name, (shard_id, source_node_name,
 * source_node_port, ...) or (shard_id, source_node_id, ...), into
 * *name and *port; *name is NULL for a split, which names none.
 */
static void
move_source(FunctionCallInfo fcinfo, char **name, int32 *port)
{
	HeapTuple	tuple;
	Oid			type1 = InvalidOid;
	Oid			type2 = InvalidOid;

	*name = NULL;
	*port = 0;
	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	if (!HeapTupleIsValid(tuple))
		return;
	if (((Form_pg_proc) GETSTRUCT(tuple))->pronargs >= 3)
	{
		type1 = ((Form_pg_proc) GETSTRUCT(tuple))->proargtypes.values[1];
		type2 = ((Form_pg_proc) GETSTRUCT(tuple))->proargtypes.values[2];
	}
	ReleaseSysCache(tuple);
	if (PG_NARGS() < 3 || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		return;

	if (type1 == TEXTOID && type2 == INT4OID)
	{
		*name = TextDatumGetCString(PG_GETARG_DATUM(1));
		*port = PG_GETARG_INT32(2);
	}
	else if (type1 == INT4OID && type2 == INT4OID)
	{
		Oid			argtype = INT4OID;
		Datum		arg = PG_GETARG_DATUM(1);
		MemoryContext cxt = CurrentMemoryContext;

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "fbf: SPI_connect failed");
		if (SPI_execute_with_args("SELECT nodename, nodeport FROM pg_catalog.pg_dist_node"
								  " WHERE nodeid OPERATOR(pg_catalog.=) $1",
								  1, &argtype, &arg, NULL, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "fbf: could not read Citus' nodes");
		if (SPI_processed == 1)
		{
			MemoryContext old = MemoryContextSwitchTo(cxt);
			bool		isnull;

			*name = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
			*port = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 2, &isnull));
			MemoryContextSwitchTo(old);
		}
		SPI_finish();
	}
}

/* The transfer in progress whose call `flinfo` is, or NULL. */
static Transfer *
find_transfer(FmgrInfo *flinfo)
{
	ListCell   *lc;

	foreach(lc, transfers)
	{
		Transfer   *t = lfirst(lc);

		if (t->flinfo == flinfo)
			return t;
	}
	return NULL;
}

/*
 * In place of Citus' transfer function, from FHET_START to FHET_END: list
 * the placements of the counter shards this call moves, and the source
 * node of a move, then call Citus' function with the same arguments.
 */
static Datum
transfer_call(PG_FUNCTION_ARGS)
{
	Transfer   *t = find_transfer(fcinfo->flinfo);
	MemoryContext old;

	if (t == NULL)
		elog(ERROR, "fbf: a Citus shard transfer was called outside the function manager's hook");
	old = MemoryContextSwitchTo(TopTransactionContext);
	t->before = shards_moved(fcinfo, t->args, t);
	if (t->before != NIL && t->args == TRANSFER_BY_SHARD)
		move_source(fcinfo, &t->source_name, &t->source_port);
	MemoryContextSwitchTo(old);
	return t->fn_addr(fcinfo);
}

static ShardPlacement *
find_shard(List *placements, int64 shardid)
{
	ListCell   *lc;

	foreach(lc, placements)
	{
		ShardPlacement *p = lfirst(lc);

		if (p->shardid == shardid)
			return p;
	}
	return NULL;
}

/* Load the window of placement `from` into placement `to`. */
static void
carry_window(const char *fbf_schema, const ShardPlacement *from, const ShardPlacement *to)
{
	Oid			argtypes[6] = {TEXTOID, INT4OID, TEXTOID, TEXTOID, INT4OID, TEXTOID};
	Datum		values[6];
	char	   *query;

	ereport(DEBUG1,
			(errmsg("fbf: carrying the window of shard %s on %s:%d to shard %s on %s:%d",
					from->shard_name, from->node_name, from->node_port,
					to->shard_name, to->node_name, to->node_port)));
	values[0] = CStringGetTextDatum(from->node_name);
	values[1] = Int32GetDatum(from->node_port);
	values[2] = CStringGetTextDatum(from->shard_name);
	values[3] = CStringGetTextDatum(to->node_name);
	values[4] = Int32GetDatum(to->node_port);
	values[5] = CStringGetTextDatum(to->shard_name);
	query = psprintf("SELECT %s.fbf_copy_shard_window($1, $2, $3, $4, $5, $6)",
					 fbf_schema);
	if (SPI_execute_with_args(query, 6, argtypes, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "fbf: could not carry the window of shard %s", from->shard_name);
}

/*
 * The transfer `t` has ended: carry the window of every listed counter
 * shard that it moved, or split, from its old placement to its new one(s).
 * A placement is new only if this transaction wrote it; a moved shard's
 * old placement is on the source node the call named (the one listed
 * before, if another transfer moved the shard in between, is not).
 */
static void
carry_windows(const Transfer *t)
{
	List	   *before = t->before;
	const char *fbf_schema;
	List	   *counters = NIL;
	List	   *after;
	Datum	   *elems;
	Oid			argtype = OIDARRAYOID;
	Datum		arg;
	ListCell   *lb;
	int			carried = 0;
	int			n = 0;

	if (before == NIL)
		return;
	foreach(lb, before)
		counters = list_append_unique_oid(counters,
										  ((ShardPlacement *) lfirst(lb))->counter);
	elems = palloc(sizeof(Datum) * list_length(counters));
	foreach(lb, counters)
		elems[n++] = ObjectIdGetDatum(lfirst_oid(lb));
	arg = PointerGetDatum(construct_array(elems, n, OIDOID, sizeof(Oid), true,
										  TYPALIGN_INT));
	after = list_placements(counters_query, 1, &argtype, &arg);

	fbf_schema = quote_identifier(get_namespace_name(FbfCitusExtensionSchema()));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "fbf: SPI_connect failed");
	foreach(lb, before)
	{
		ShardPlacement *from = lfirst(lb);
		ShardPlacement *to = find_shard(after, from->shardid);
		ListCell   *la;

		if (to != NULL)
		{
			/* a move: the same shard, on another node */
			if (t->source_name != NULL)
			{
				ShardPlacement *source = palloc(sizeof(ShardPlacement));

				*source = *from;
				source->node_name = t->source_name;
				source->node_port = t->source_port;
				from = source;
			}
			if (to->ours &&
				(from->node_port != to->node_port ||
				 strcmp(from->node_name, to->node_name) != 0))
			{
				carry_window(fbf_schema, from, to);
				carried++;
			}
			continue;
		}
		/* gone: split into the new shards of its counter within its range */
		foreach(la, after)
		{
			to = lfirst(la);
			if (to->ours && to->counter == from->counter &&
				from->min_value <= to->min_value &&
				to->max_value <= from->max_value)
			{
				carry_window(fbf_schema, from, to);
				carried++;
			}
		}
	}
	SPI_finish();
	if (carried > 0)
		ereport(LOG,
				(errmsg("fbf: carried %d counter shard windows through a Citus shard transfer",
						carried)));
}

/*
 * The function manager's hook: around a call of a Citus transfer function
 * in a database with fbf, put transfer_call in its place (FHET_START) and
 * Citus' function back (FHET_END, FHET_ABORT), and at the end carry the
 * windows the call moved.
 */
static void
fbf_fmgr_hook(FmgrHookEventType event, FmgrInfo *flinfo, Datum *private)
{
	if (prev_fmgr_hook)
		prev_fmgr_hook(event, flinfo, private);

	/* a stack left by a transaction that ended in between is gone */
	if (transfers_lxid != FbfMyLocalTransactionId())
	{
		transfers = NIL;
		transfers_lxid = FbfMyLocalTransactionId();
	}

	switch (event)
	{
		case FHET_START:
			{
				TransferArgs args = transfer_args(flinfo->fn_oid);

				if (args != TRANSFER_NONE &&
					flinfo->fn_addr != transfer_call &&
					OidIsValid(get_extension_oid("fbf", true)))
				{
					MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
					Transfer   *t = palloc(sizeof(Transfer));

					t->flinfo = flinfo;
					t->fn_addr = flinfo->fn_addr;
					t->args = args;
					t->before = NIL;
					t->source_name = NULL;
					t->source_port = 0;
					transfers = lcons(t, transfers);
					MemoryContextSwitchTo(old);
					flinfo->fn_addr = transfer_call;
				}
			}
			break;
		case FHET_END:
		case FHET_ABORT:
			{
				Transfer   *t = find_transfer(flinfo);

				if (t != NULL)
				{
					flinfo->fn_addr = t->fn_addr;
					transfers = list_delete_ptr(transfers, t);
					if (event == FHET_END)
						carry_windows(t);
				}
			}
			break;
	}
}

/* Install the hooks; from FbfCounterInit. */
void
FbfCitusTransferInit(void)
{
	prev_needs_fmgr_hook = needs_fmgr_hook;
	needs_fmgr_hook = fbf_needs_fmgr_hook;
	prev_fmgr_hook = fmgr_hook;
	fmgr_hook = fbf_fmgr_hook;
}
