/*-------------------------------------------------------------------------
 *
 * counter_citus_transfer.c
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
 * background task, a procedure):
 *
 *	FHET_START	list the placements of every counter shard (shard id,
 *				hash range, node) from Citus' metadata;
 *	FHET_END	list them again, and carry each window whose shard moved
 *				(the same shard id on another node) or was split (a new
 *				shard of the same counter within the range of a shard
 *				gone since START) from the old placement to the new one
 *				(fbf_copy_shard_window: fbf_snapshot on the old node,
 *				fbf_counter_load on the new).
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
 * The list is kept in a stack of transfers in progress (they nest: a
 * transfer run by a procedure run by a transfer's caller), not in the
 * hook's private datum, which another module's fmgr hook may use for the
 * same call.  It lives in the transaction's memory, so an error that
 * skips FHET_ABORT cannot leave it dangling beyond the transaction.
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
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_language.h"
#include "catalog/pg_namespace_d.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type_d.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "counter/counter.h"

/* the Citus functions that move or split shards */
static const char *const transfer_functions[] = {
	"citus_move_shard_placement",
	"master_move_shard_placement",
	"citus_split_shard_by_split_points",
	"isolate_tenant_to_new_shard",
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
} ShardPlacement;

/* A transfer in progress: the function, and its counters' placements. */
typedef struct Transfer
{
	Oid			fn_oid;
	List	   *before;			/* of ShardPlacement */
} Transfer;

/* transfers in progress, innermost first, in TopTransactionContext */
static List *transfers = NIL;
static LocalTransactionId transfers_lxid = InvalidLocalTransactionId;

static needs_fmgr_hook_type prev_needs_fmgr_hook = NULL;
static fmgr_hook_type prev_fmgr_hook = NULL;

/*
 * The placements of every shard of every distributed table with a window
 * index: a counter's or a dedup's shards (the shell has no placement).
 * Run under the search_path of whoever moves the shard, where any role may
 * have created operators for these types: each operator is pg_catalog's,
 * named, on operands of the types it takes (docs/design.md, "search_path").
 */
static const char *const placements_query =
"SELECT s.logicalrelid, s.shardid,"
"       pg_catalog.shard_name(s.logicalrelid, s.shardid, false),"
"       s.shardminvalue::pg_catalog.int4, s.shardmaxvalue::pg_catalog.int4,"
"       n.nodename, n.nodeport"
"  FROM pg_catalog.pg_dist_shard s"
"  JOIN pg_catalog.pg_dist_placement pl ON pl.shardid OPERATOR(pg_catalog.=) s.shardid"
"  JOIN pg_catalog.pg_dist_node n ON n.groupid OPERATOR(pg_catalog.=) pl.groupid"
"   AND n.noderole OPERATOR(pg_catalog.=) 'primary'::pg_catalog.noderole"
" WHERE EXISTS (SELECT FROM pg_catalog.pg_index i"
"                 JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.indexrelid"
"                 JOIN pg_catalog.pg_am a ON a.oid OPERATOR(pg_catalog.=) c.relam"
"                WHERE i.indrelid OPERATOR(pg_catalog.=) s.logicalrelid::pg_catalog.oid"
"                  AND a.amname OPERATOR(pg_catalog.=) 'fbf_filter'::pg_catalog.name)"
"   AND s.shardminvalue IS NOT NULL";

/* Is fn_oid one of Citus' shard transfer functions? */
static bool
is_transfer_function(Oid fn_oid)
{
	HeapTuple	tuple;
	Form_pg_proc proc;
	bool		result = false;
	size_t		i;

	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn_oid));
	if (!HeapTupleIsValid(tuple))
		return false;
	proc = (Form_pg_proc) GETSTRUCT(tuple);
	if (proc->pronamespace == PG_CATALOG_NAMESPACE &&
		proc->prolang == ClanguageId)
	{
		for (i = 0; i < lengthof(transfer_functions); i++)
		{
			if (strcmp(NameStr(proc->proname), transfer_functions[i]) == 0)
			{
				result = true;
				break;
			}
		}
	}
	ReleaseSysCache(tuple);
	return result;
}

static bool
fbf_needs_fmgr_hook(Oid fn_oid)
{
	if (prev_needs_fmgr_hook && prev_needs_fmgr_hook(fn_oid))
		return true;
	return is_transfer_function(fn_oid);
}

/* The placements of the counters' shards now, in the current context. */
static List *
list_placements(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *result = NIL;
	uint64		i;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "fbf: SPI_connect failed");
	if (SPI_execute(placements_query, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "fbf: could not read Citus' shard placements");
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MemoryContext old = MemoryContextSwitchTo(cxt);
		ShardPlacement *p = palloc(sizeof(ShardPlacement));
		bool		isnull;

		p->counter = DatumGetObjectId(SPI_getbinval(tuple, desc, 1, &isnull));
		p->shardid = DatumGetInt64(SPI_getbinval(tuple, desc, 2, &isnull));
		p->shard_name = SPI_getvalue(tuple, desc, 3);
		p->min_value = DatumGetInt32(SPI_getbinval(tuple, desc, 4, &isnull));
		p->max_value = DatumGetInt32(SPI_getbinval(tuple, desc, 5, &isnull));
		p->node_name = SPI_getvalue(tuple, desc, 6);
		p->node_port = DatumGetInt32(SPI_getbinval(tuple, desc, 7, &isnull));
		result = lappend(result, p);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return result;
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
 * The transfer has ended: carry the window of every counter shard that
 * moved, or was split, from its old placement to its new one(s).
 */
static void
carry_windows(List *before)
{
	const char *fbf_schema;
	List	   *after;
	ListCell   *la;
	int			carried = 0;

	if (before == NIL)
		return;
	after = list_placements();

	fbf_schema = quote_identifier(get_namespace_name(FbfCitusExtensionSchema()));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "fbf: SPI_connect failed");
	foreach(la, after)
	{
		ShardPlacement *to = lfirst(la);
		ShardPlacement *from = find_shard(before, to->shardid);
		ListCell   *lb;

		if (from != NULL)
		{
			/* a move: the same shard, on another node */
			if (from->node_port != to->node_port ||
				strcmp(from->node_name, to->node_name) != 0)
			{
				carry_window(fbf_schema, from, to);
				carried++;
			}
			continue;
		}
		/* a new shard: split from the gone shard whose range holds it */
		foreach(lb, before)
		{
			from = lfirst(lb);
			if (from->counter == to->counter &&
				from->min_value <= to->min_value &&
				to->max_value <= from->max_value &&
				find_shard(after, from->shardid) == NULL)
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
			if (is_transfer_function(flinfo->fn_oid) &&
				OidIsValid(get_extension_oid("fbf", true)))
			{
				MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
				Transfer   *t = palloc(sizeof(Transfer));

				t->fn_oid = flinfo->fn_oid;
				t->before = list_placements();
				transfers = lcons(t, transfers);
				MemoryContextSwitchTo(old);
			}
			break;
		case FHET_END:
		case FHET_ABORT:
			if (transfers != NIL &&
				((Transfer *) linitial(transfers))->fn_oid == flinfo->fn_oid)
			{
				Transfer   *t = linitial(transfers);

				transfers = list_delete_first(transfers);
				if (event == FHET_END)
					carry_windows(t->before);
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
