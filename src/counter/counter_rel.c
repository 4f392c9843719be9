/*-------------------------------------------------------------------------
 *
 * counter_rel.c
 *	  Opening a counter or dedup table: the privilege checks, the locks,
 *	  the kind of table each caller accepts; what a backend remembers about
 *	  each counter table (the relation cache); and the route to counters
 *	  distributed by Citus, which src/citus/citus_route.c registers at init.
 *
 * Locks: FbfCounterOpen takes the caller's lock mode on the table and its
 * window index (RowExclusiveLock to change the window, AccessShareLock to
 * read it), after checking privileges, so that no one can queue locks on
 * a table they may not use; FbfCounterClose keeps them until the end of
 * the transaction.  Building a relation cache entry opens the primary key
 * with AccessShareLock and reads catalogs.  The window's own buffer locks
 * are taken below, in the order of src/window/README.md ("Lock
 * definitions").
 *
 * The relation cache (rel_cache, in TopMemoryContext) holds per counter
 * table what does not change without an invalidation of the table or of
 * its indexes: is it a counter table (which is its window index), its
 * qualified name (for the SPI plans), whether Citus distributes it (the
 * route's lookup), and the shape the direct path (counter_delta.c) needs.
 * A relcache callback marks entries stale; a syscache callback on schemas
 * does too (a renamed schema changes the qualified name without touching
 * the table).  Entries are rebuilt on next use, never freed.
 *
 * The route (FbfCounterRoute) is a set of functions src/citus/citus_route.c
 * registers from _PG_init: the layers here and in counter_engine.c call
 * Citus' side only through it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_class.h"
#include "catalog/pg_operator_d.h"
#include "catalog/pg_type_d.h"
#include "miscadmin.h"
#include "storage/sinval.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "common/fbf_htab.h"
#include "counter/counter.h"
#include "window/window.h"

/* the route to Citus, registered at init; NULL: every table is local */
static const FbfCounterRoute *counter_route = NULL;

static HTAB *rel_cache = NULL;

/* invalidations seen so far: one during a rebuild leaves the entry stale */
static uint64 rel_cache_invals = 0;

/* ----------------------------------------------------------------------
 * The relation cache
 * ----------------------------------------------------------------------
 */

/*
 * A relation (or an index: the window index and the primary key are
 * remembered too) changed: its entry is stale.  InvalidOid: all are.
 */
static void
rel_cache_invalidate(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	FbfCounterRel *entry;

	rel_cache_invals++;
	hash_seq_init(&status, rel_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (!OidIsValid(relid) || entry->relid == relid ||
			entry->window_index == relid || entry->pk_index == relid)
			entry->valid = false;
	}
}

/* a schema changed (renamed, say): every qualified name may be stale */
static void
rel_cache_invalidate_namespaces(Datum arg, int cacheid, uint32 hashvalue)
{
	rel_cache_invalidate(arg, InvalidOid);
}

/*
 * Does the table have the shape the direct path relies on?  Fills the
 * entry's attribute numbers, primary key and scan keys' functions.
 *
 * The direct path looks the row up by the primary key and compares key
 * and shard as `key = $2 AND shard = $3` would, and writes value + delta
 * as an int8; it requires:
 *  - key text (its collation deterministic, so that equality is equality
 *    of bytes, as in the index), shard int4, value int8: with other types
 *    or domains the UPDATE would cast, or check domain constraints;
 *  - value neither generated nor an identity column GENERATED ALWAYS: the
 *    UPDATE refuses to set those;
 *  - a valid, immediate btree primary key on exactly (key, shard) whose
 *    operator classes use the types' ordinary equality operators.
 * Counter tables as fbf_create_counter_table makes them have all of it;
 * ALTER TABLE can take it away, and then the UPDATE does the work.
 */
static bool
direct_shape(Relation heap, FbfCounterRel *entry)
{
	TupleDesc	desc = RelationGetDescr(heap);
	Relation	pk;
	bool		ok;
	int			i;

	entry->key_attno = entry->shard_attno = entry->value_attno = InvalidAttrNumber;
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		const char *name = NameStr(att->attname);

		if (att->attisdropped)
			continue;
		if (strcmp(name, "key") == 0)
		{
			if (att->atttypid != TEXTOID || !OidIsValid(att->attcollation) ||
				!get_collation_isdeterministic(att->attcollation))
				return false;
			entry->key_attno = att->attnum;
		}
		else if (strcmp(name, "shard") == 0)
		{
			if (att->atttypid != INT4OID)
				return false;
			entry->shard_attno = att->attnum;
		}
		else if (strcmp(name, "value") == 0)
		{
			if (att->atttypid != INT8OID || att->attgenerated != '\0' ||
				att->attidentity == ATTRIBUTE_IDENTITY_ALWAYS)
				return false;
			entry->value_attno = att->attnum;
		}
	}
	if (entry->key_attno == InvalidAttrNumber ||
		entry->shard_attno == InvalidAttrNumber ||
		entry->value_attno == InvalidAttrNumber)
		return false;

	entry->pk_index = FbfRelationGetPrimaryKeyIndex(heap);
	if (!OidIsValid(entry->pk_index))
		return false;

	/* as the planner would open it to plan the UPDATE */
	pk = index_open(entry->pk_index, AccessShareLock);
	ok = pk->rd_rel->relam == BTREE_AM_OID &&
		pk->rd_index->indisunique && pk->rd_index->indimmediate &&
		pk->rd_index->indisvalid && pk->rd_index->indisready &&
		IndexRelationGetNumberOfKeyAttributes(pk) == 2 &&
		RelationGetIndexExpressions(pk) == NIL;
	for (i = 0; ok && i < 2; i++)
	{
		AttrNumber	attno = pk->rd_index->indkey.values[i];
		Oid			type;
		Oid			eqop;

		if (attno == entry->key_attno)
		{
			type = TEXTOID;
			eqop = TextEqualOperator;
			ok = pk->rd_indcollation[i] ==
				TupleDescAttr(desc, attno - 1)->attcollation;
		}
		else if (attno == entry->shard_attno)
		{
			type = INT4OID;
			eqop = Int4EqualOperator;
		}
		else
			break;
		ok = ok && pk->rd_opcintype[i] == type &&
			get_opfamily_member(pk->rd_opfamily[i], type, type,
								BTEqualStrategyNumber) == eqop;
		if (ok)
		{
			entry->index_col_is_key[i] = attno == entry->key_attno;
			entry->collation[i] = pk->rd_indcollation[i];
			fmgr_info_cxt(get_opcode(eqop), &entry->eq[i], TopMemoryContext);
		}
	}
	/* both columns, each once */
	ok = ok && i == 2 &&
		entry->index_col_is_key[0] != entry->index_col_is_key[1];
	index_close(pk, NoLock);
	return ok;
}

/*
 * What this backend knows of the counter table `heap` (opened and locked
 * by the caller), rebuilt if an invalidation made it stale since.  The
 * entry stays where it is until the backend exits.
 */
FbfCounterRel *
FbfCounterRelGet(Relation heap)
{
	Oid			relid = RelationGetRelid(heap);
	FbfCounterRel *entry;
	bool		found;
	uint64		invals;
	Oid			indexoid;

	if (rel_cache == NULL)
	{
		rel_cache = FbfHashCreate("fbf counter relations", 16, sizeof(Oid),
								  sizeof(FbfCounterRel), TopMemoryContext);
		CacheRegisterRelcacheCallback(rel_cache_invalidate, (Datum) 0);
		CacheRegisterSyscacheCallback(NAMESPACEOID,
									  rel_cache_invalidate_namespaces, (Datum) 0);
	}
	entry = hash_search(rel_cache, &relid, HASH_ENTER, &found);
	if (found && entry->valid)
		return entry;
	if (!found)
		entry->qualname = NULL;

	/*
	 * Stale until fully built, so that an error half-way leaves nothing
	 * trusted behind; and stale still if an invalidation arrives while the
	 * catalogs are read (the next call builds it again).  This call uses
	 * what it read.
	 */
	entry->valid = false;
	invals = rel_cache_invals;
	entry->window_index = InvalidOid;
	entry->pk_index = InvalidOid;
	entry->direct = false;
	entry->heap_am = false;
	if (entry->qualname)
		pfree(entry->qualname);
	entry->qualname =
		MemoryContextStrdup(TopMemoryContext,
							quote_qualified_identifier(get_namespace_name(RelationGetNamespace(heap)),
													   RelationGetRelationName(heap)));
	if (FbfIsCounterTable(heap, &indexoid))
	{
		entry->window_index = indexoid;
		entry->kind = FbfWindowIndexKind(indexoid);
		entry->direct = entry->kind == FBF_WINDOW_COUNTER &&
			direct_shape(heap, entry);
		entry->heap_am = heap->rd_tableam == GetHeapamTableAmRoutine();
	}
	/* routed by a counter's key, a dedup table's anchor (src/citus) */
	entry->citus = counter_route == NULL ? FBF_CITUS_LOCAL :
		counter_route->lookup(heap,
							  get_attnum(relid,
										 OidIsValid(entry->window_index) &&
										 entry->kind == FBF_WINDOW_DEDUP ?
										 "anchor" : "key"));
	entry->valid = rel_cache_invals == invals;
	return entry;
}

/* ----------------------------------------------------------------------
 * The route
 * ----------------------------------------------------------------------
 */

/*
 * Register the route to counters distributed by Citus
 * (src/citus/citus_route.c, from _PG_init): the relation cache asks it
 * which tables it routes, FbfCounterOpen has it refuse a routed table's
 * own window, the apply engine hands it the operations on a routed table,
 * and the front ends' placement twins hand it theirs on the placement.  `route` must live as
 * long as the backend.
 */
void
FbfCounterSetRoute(const FbfCounterRoute *route)
{
	counter_route = route;
}

/* The route registered at init (FbfCounterSetRoute), or NULL. */
const FbfCounterRoute *
FbfCounterGetRoute(void)
{
	return counter_route;
}

/*
 * Error: the own window of the Citus table `heap` would be used (the
 * route says why).  Only a route's lookup makes a table other than local.
 */
fbf_noreturn static void
refuse_routed(Relation heap, FbfCitusDistribution how)
{
	if (counter_route == NULL)
		elog(ERROR, "fbf: \"%s\" is routed, but no route is registered",
			 RelationGetRelationName(heap));
	counter_route->refuse(heap, how);
	pg_unreachable();
}

/* ----------------------------------------------------------------------
 * Opening a counter
 * ----------------------------------------------------------------------
 */

/*
 * May the user use this column, by a grant on the table or on the column?
 * (pg_attribute_aclcheck sees only the column's own grants.)
 */
static bool
column_allowed(Oid relid, const char *column, AclMode mode)
{
	AttrNumber	attnum;

	if (pg_class_aclcheck(relid, GetUserId(), mode) == ACLCHECK_OK)
		return true;
	attnum = get_attnum(relid, column);
	return attnum != InvalidAttrNumber &&
		pg_attribute_aclcheck(relid, attnum, GetUserId(), mode) == ACLCHECK_OK;
}

/*
 * Error unless the user may access the counter or dedup table `relid` as
 * `access` asks: to read a counter (SELECT on key, shard and value), to
 * increment it (those and UPDATE on value: an increment reads the key's
 * row and updates it, and must not answer "duplicate" to a user who could
 * not have made either), to read the window of either kind (SELECT on the
 * table, or a counter's read privileges), to claim in a dedup table
 * (INSERT on it: a claim records something new), or as the owner of
 * either (resizing and maintenance change everyone's cost).  Grants on the
 * table or on the columns both count.
 */
static void
check_access(Oid relid, FbfCounterAccess access)
{
	AclMode		table_mode = 0;
	char		relkind;
	char	   *relname;
	bool		ok;

	/* the common case first: the table's own grants suffice, one look-up */
	switch (access)
	{
		case FBF_COUNTER_READ:
		case FBF_WINDOW_READ:
			table_mode = ACL_SELECT;
			break;
		case FBF_COUNTER_INCREMENT:
			table_mode = ACL_SELECT | ACL_UPDATE;
			break;
		case FBF_DEDUP_CLAIM:
			table_mode = ACL_INSERT;
			break;
		case FBF_COUNTER_OWNER:
			break;
	}
	if (table_mode != 0 &&
		pg_class_aclmask(relid, GetUserId(), table_mode, ACLMASK_ALL) == table_mode)
		return;
	relkind = get_rel_relkind(relid);
	relname = get_rel_name(relid);
	if (relname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (access == FBF_COUNTER_OWNER)
	{
		if (!FbfClassOwnercheck(relid, GetUserId()))
			aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(relkind), relname);
		return;
	}
	if (access == FBF_DEDUP_CLAIM)
		ok = pg_class_aclcheck(relid, GetUserId(), ACL_INSERT) == ACLCHECK_OK;
	else if (access == FBF_WINDOW_READ &&
			 pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK)
		ok = true;
	else
	{
		ok = column_allowed(relid, "key", ACL_SELECT) &&
			column_allowed(relid, "shard", ACL_SELECT) &&
			column_allowed(relid, "value", ACL_SELECT);
		if (ok && access == FBF_COUNTER_INCREMENT)
			ok = column_allowed(relid, "value", ACL_UPDATE);
	}
	if (!ok)
		aclcheck_error(ACLCHECK_NO_PRIV, get_relkind_objtype(relkind), relname);
}

/* Error unless the window `entry` of `rel` is of a kind `access` accepts. */
static void
check_kind(Relation rel, FbfCounterRel *entry, FbfCounterAccess access)
{
	bool		counter_only = access == FBF_COUNTER_READ ||
		access == FBF_COUNTER_INCREMENT;

	if (entry == NULL || !OidIsValid(entry->window_index))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a %s", RelationGetRelationName(rel),
						counter_only ? "counter table" :
						access == FBF_DEDUP_CLAIM ? "dedup table" :
						"counter or dedup table"),
				 counter_only ?
				 errhint("Create counter tables with fbf_create_counter_table().") :
				 access == FBF_DEDUP_CLAIM ?
				 errhint("Create dedup tables with fbf_create_dedup().") :
				 errhint("Create counter tables with fbf_create_counter_table() and dedup tables with fbf_create_dedup().")));
	if (counter_only && entry->kind != FBF_WINDOW_COUNTER)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is a dedup table, not a counter table",
						RelationGetRelationName(rel)),
				 errhint("Claim ids in a dedup table with fbf_claim().")));
	if (access == FBF_DEDUP_CLAIM && entry->kind != FBF_WINDOW_DEDUP)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is a counter table, not a dedup table",
						RelationGetRelationName(rel)),
				 errhint("Apply operations to a counter table with idempotent_increment().")));
}

/*
 * Open a counter or dedup table and its window index with `lockmode`
 * (RowExclusiveLock to change the window: DDL that rebuilds or drops it
 * conflicts with that), for `access`, which also says which kind of table
 * is acceptable.  Privileges are checked before the lock is taken, so that
 * no one can queue locks on a table they may not use, and again once it is
 * held if invalidations were processed meanwhile (grants may have changed:
 * a GRANT or REVOKE sends one), as RangeVarGetRelidExtended rechecks a
 * name.  Errors if the relation is not a table of a kind `access` accepts,
 * or if it is a Citus table, whose own window is never used (the route's
 * refusal).  Close with FbfCounterClose, which keeps the locks until the
 * end of the transaction.
 */
void
FbfCounterOpen(Oid relid, FbfCounterAccess access, LOCKMODE lockmode,
			   Relation *heap, Relation *index)
{
	if (FbfCounterOpenRoutable(relid, access, lockmode, heap, index))
		refuse_routed(*heap, FBF_CITUS_BY_KEY);
}

/*
 * As FbfCounterOpen, but a counter distributed by Citus by its key is
 * accepted too: then true is returned, *heap is its shell table and
 * *index NULL (the caller routes to the shards through the route).  Other
 * Citus tables are refused.
 */
bool
FbfCounterOpenRoutable(Oid relid, FbfCounterAccess access, LOCKMODE lockmode,
					   Relation *heap, Relation *index)
{
	Relation	rel;
	FbfCounterRel *entry = NULL;
	uint64		inval_count = SharedInvalidMessageCounter;

	check_access(relid, access);
	rel = table_open(relid, lockmode);
	/* a change of grants meanwhile is an invalidation the lock processed */
	if (SharedInvalidMessageCounter != inval_count)
		check_access(relid, access);
	if (rel->rd_rel->relkind == RELKIND_RELATION)
		entry = FbfCounterRelGet(rel);
	check_kind(rel, entry, access);
	*heap = rel;
	if (entry->citus == FBF_CITUS_OTHER)
		refuse_routed(rel, entry->citus);
	if (entry->citus == FBF_CITUS_BY_KEY)
	{
		*index = NULL;
		return true;
	}
	*index = index_open(entry->window_index, lockmode);
	return false;
}

/*
 * Close what FbfCounterOpen opened (`index` NULL for a routed shell),
 * keeping the locks until the end of the transaction.
 */
void
FbfCounterClose(Relation heap, Relation index)
{
	if (index != NULL)
		index_close(index, NoLock);
	table_close(heap, NoLock);
}

