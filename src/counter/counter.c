/*-------------------------------------------------------------------------
 *
 * counter.c
 *	  Idempotent counters: idempotent_increment, fbf_operation,
 *	  fbf_counter_value and fbf_snapshot; opening a counter; the settings
 *	  that fbf_create_counter_table reads.
 *
 * An operation is identified by (counter table, key, client_id, seq)
 * (FbfOperationBytes).  idempotent_increment first asks the table's window
 * (FbfWindowApply) whether the operation is new, which also records it
 * as in flight for the current (sub)transaction; only then is the delta
 * added, as the calling user, as an UPDATE would add it: directly
 * (counter_delta.c) where that behaves exactly as the UPDATE, or with an
 * ordinary UPDATE through SPI where it could not (row security, triggers,
 * rules, inheritance, an altered table), and with an upsert through SPI
 * when the row does not exist yet.  Privileges, row security and triggers
 * apply as for any UPDATE.  The increment goes to one of `shards` rows of
 * its key, chosen by backend, so concurrent clients of a hot key do not
 * queue on one row lock; reads sum the shards.  Single increments,
 * outcomes and batches (counter_batch.c) all go through one path,
 * FbfCounterApply, which takes any number of operations on one key.
 *
 * Backend-local state: the plan cache (plan_cache, in TopMemoryContext),
 * the relation cache (counter_delta.c), and whether this backend has told
 * the registry that its database has counters.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/genam.h"
#include "access/heapam.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "common/int128.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "counter/counter.h"
#include "registry/registry.h"
#include "type/fbf_value.h"
#include "window/window.h"

PG_FUNCTION_INFO_V1(fbf_increment_int8);
PG_FUNCTION_INFO_V1(fbf_increment_text);
PG_FUNCTION_INFO_V1(fbf_increment_uuid);
PG_FUNCTION_INFO_V1(fbf_counter_value);
PG_FUNCTION_INFO_V1(fbf_operation_int8);
PG_FUNCTION_INFO_V1(fbf_operation_text);
PG_FUNCTION_INFO_V1(fbf_operation_uuid);
PG_FUNCTION_INFO_V1(fbf_snapshot);

/* has this backend told the launcher that its database has counters? */
static bool database_noted = false;

/* defaults of fbf_create_counter_table, which reads them with current_setting */
static int	fbf_default_retention_ms = 5 * 60 * 1000;
static double fbf_default_target_fpp = 0.001;

/* The counters' settings; from _PG_init. */
void
FbfCounterInit(void)
{
	DefineCustomIntVariable("fbf.default_retention",
							"Retention of new counter tables when none is given.",
							"Set it above the clients' retry timeout plus slack.",
							&fbf_default_retention_ms, 5 * 60 * 1000, 1000, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomRealVariable("fbf.default_target_fpp",
							 "Target false-positive rate of new counter tables when none is given.",
							 NULL, &fbf_default_target_fpp, 0.001, 1e-9, 0.5,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	FbfCounterMaintainInit();
	FbfCitusTransferInit();
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
	char		relkind = get_rel_relkind(relid);
	char	   *relname = get_rel_name(relid);
	bool		ok;

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
 * held (grants may have changed meanwhile).  Errors if the relation is not
 * a table of a kind `access` accepts, or if it is a Citus table, whose own
 * window is never used (FbfCitusRefuse).  Close with FbfCounterClose,
 * which keeps the locks until the end of the transaction.
 */
void
FbfCounterOpen(Oid relid, FbfCounterAccess access, LOCKMODE lockmode,
			   Relation *heap, Relation *index)
{
	if (FbfCounterOpenRoutable(relid, access, lockmode, heap, index))
		FbfCitusRefuse(*heap, FBF_CITUS_BY_KEY);
}

/*
 * As FbfCounterOpen, but a counter distributed by Citus by its key is
 * accepted too: then true is returned, *heap is its shell table and
 * *index NULL (the caller routes to the shards, counter_citus.c).  Other
 * Citus tables are refused.
 */
bool
FbfCounterOpenRoutable(Oid relid, FbfCounterAccess access, LOCKMODE lockmode,
					   Relation *heap, Relation *index)
{
	Relation	rel;
	FbfCounterRel *entry = NULL;

	check_access(relid, access);
	rel = table_open(relid, lockmode);
	check_access(relid, access);
	if (rel->rd_rel->relkind == RELKIND_RELATION)
		entry = FbfCounterRelGet(rel);
	check_kind(rel, entry, access);
	*heap = rel;
	if (entry->citus == FBF_CITUS_OTHER)
		FbfCitusRefuse(rel, entry->citus);
	if (entry->citus == FBF_CITUS_BY_KEY)
	{
		*index = NULL;
		return true;
	}
	*index = index_open(entry->window_index, lockmode);
	return false;
}

void
FbfCounterClose(Relation heap, Relation index)
{
	if (index != NULL)
		index_close(index, NoLock);
	table_close(heap, NoLock);
}

/*
 * The current transaction is about to apply an operation (an increment or
 * a claim): the launcher must know at once that this database has windows
 * to maintain.
 */
void
FbfCounterNoteOperation(void)
{
	if (!database_noted)
	{
		FbfDatabaseHasCounters(MyDatabaseId);
		database_noted = true;
	}
}

/* ----------------------------------------------------------------------
 * Applying the delta
 * ----------------------------------------------------------------------
 */

typedef struct CounterPlans
{
	Oid			relid;			/* hash key */
	char	   *qualname;		/* the name the plans were made for */
	SPIPlanPtr	update;
	SPIPlanPtr	upsert;
	SPIPlanPtr	sum;
} CounterPlans;

static HTAB *plan_cache = NULL;

static SPIPlanPtr
prepare(const char *sql, int nargs, Oid *types)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, types);

	if (plan == NULL)
		elog(ERROR, "fbf: SPI_prepare failed for \"%s\": %s", sql,
			 SPI_result_code_string(SPI_result));
	SPI_keepplan(plan);
	return plan;
}

/*
 * Plans for a counter table, made once per backend and table name.  The
 * name (from the relation cache, which a rename invalidates) is checked on
 * every use: a table renamed, or dropped and replaced, gets new plans.
 * The plans are made under the caller's search_path, where any role may
 * have created operators for these types: each operator is pg_catalog's,
 * named (docs/design.md, "search_path").  Must be called inside SPI.
 */
static CounterPlans *
counter_plans(Relation rel)
{
	Oid			relid = RelationGetRelid(rel);
	char	   *qualname = FbfCounterRelGet(rel)->qualname;
	CounterPlans *plans;
	CounterPlans fresh;
	bool		found;
	Oid			types[3] = {INT8OID, TEXTOID, INT4OID};

	if (plan_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(CounterPlans);
		ctl.hcxt = TopMemoryContext;
		plan_cache = hash_create("fbf counter plans", 16, &ctl,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	plans = hash_search(plan_cache, &relid, HASH_FIND, &found);
	if (found && strcmp(plans->qualname, qualname) == 0)
		return plans;
	if (found)
	{
		/* renamed, or replaced: forget the old plans before making new ones */
		SPI_freeplan(plans->update);
		SPI_freeplan(plans->upsert);
		SPI_freeplan(plans->sum);
		pfree(plans->qualname);
		hash_search(plan_cache, &relid, HASH_REMOVE, NULL);
	}

	/* prepare first: an error leaves no half-made entry behind */
	fresh.relid = relid;
	fresh.update = prepare(psprintf("UPDATE %s SET value = value OPERATOR(pg_catalog.+) $1 "
									"WHERE key OPERATOR(pg_catalog.=) $2 AND shard OPERATOR(pg_catalog.=) $3",
									qualname), 3, types);
	fresh.upsert = prepare(psprintf("INSERT INTO %s AS c (key, shard, value) VALUES ($2, $3, $1) "
									"ON CONFLICT (key, shard) DO UPDATE "
									"SET value = c.value OPERATOR(pg_catalog.+) excluded.value",
									qualname), 3, types);
	fresh.sum = prepare(psprintf("SELECT pg_catalog.sum(value)::pg_catalog.int8 FROM %s "
								 "WHERE key OPERATOR(pg_catalog.=) $1",
								 qualname), 1, &types[1]);
	fresh.qualname = MemoryContextStrdup(TopMemoryContext, qualname);
	plans = hash_search(plan_cache, &relid, HASH_ENTER, NULL);
	*plans = fresh;
	return plans;
}

/*
 * Run one of a counter's plans.  Every statement looks up rows by the full
 * primary key, so an index scan is always right; but a counter table is
 * typically analyzed while still empty, and a generic plan made from those
 * statistics would scan the whole table on every increment until the next
 * ANALYZE.  So plans are made (and remade) with sequential scans off, for
 * the duration of the statement only.
 */
static int
execute_counter_plan(SPIPlanPtr plan, Datum *args, bool read_only, long count)
{
	int			save_nestlevel = NewGUCNestLevel();
	int			rc;

	(void) set_config_option("enable_seqscan", "off", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	rc = SPI_execute_plan(plan, args, NULL, read_only, count);
	AtEOXact_GUC(true, save_nestlevel);
	return rc;
}

/*
 * Add delta to this backend's shard row of `key`, creating it if needed.
 * The common case, the row exists: the direct path (FbfCounterAddDirect,
 * an UPDATE without SPI), unless row security applies to the user (`rls`)
 * or the table has anything else the direct path leaves to the UPDATE;
 * then the UPDATE through SPI.  No row: an upsert through SPI.
 */
static void
add_delta(Relation heap, text *key, int64 delta, int shards, bool rls)
{
	CounterPlans *plans;
	Datum		args[3];
	int			rc;
	int32		shard = FbfMyProcNumber % shards;
	FbfDirectResult direct = FBF_DIRECT_UNSUPPORTED;

	if (!rls)
		direct = FbfCounterAddDirect(heap, key, shard, delta);
	if (direct == FBF_DIRECT_APPLIED)
		return;

	args[0] = Int64GetDatum(delta);
	args[1] = PointerGetDatum(key);
	args[2] = Int32GetDatum(shard);

	SPI_connect();
	plans = counter_plans(heap);
	if (direct == FBF_DIRECT_UNSUPPORTED)
	{
		rc = execute_counter_plan(plans->update, args, false, 0);
		if (rc != SPI_OK_UPDATE)
			elog(ERROR, "fbf: counter update failed: %s", SPI_result_code_string(rc));
	}
	if (direct == FBF_DIRECT_NO_ROW || SPI_processed == 0)
	{
		rc = execute_counter_plan(plans->upsert, args, false, 0);
		if (rc != SPI_OK_INSERT)
			elog(ERROR, "fbf: counter insert failed: %s", SPI_result_code_string(rc));
	}
	SPI_finish();
}

/*
 * The sum of `key`'s shard rows (0 if none), as the user's SELECT
 * sum(value) would see them: with the calling statement's snapshot if
 * `read_only`, else after making this transaction's changes visible, with
 * a new snapshot in READ COMMITTED, as a following statement would.
 */
static int64
counter_sum(Relation heap, text *key, bool read_only)
{
	CounterPlans *plans;
	Datum		arg = PointerGetDatum(key);
	bool		isnull;
	Datum		value;
	int			rc;

	SPI_connect();
	plans = counter_plans(heap);
	rc = execute_counter_plan(plans->sum, &arg, read_only, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "fbf: counter read failed: %s", SPI_result_code_string(rc));
	value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	SPI_finish();
	return isnull ? 0 : DatumGetInt64(value);
}

/* ----------------------------------------------------------------------
 * idempotent_increment
 * ----------------------------------------------------------------------
 */

/*
 * The identity of an operation as bytes; the window stores their hash.
 *
 *	default key '':	tag ('i' bigint, 't' text, 'u' uuid), the client id's
 *					bytes, seq's 8 little-endian bytes (1.0's format)
 *	any other key:	tag in upper case ('I', 'T', 'U'), the key's length
 *					as 4 little-endian bytes, the key's bytes, then as above
 *
 * The first byte tells the two forms apart, the length delimits the key,
 * and seq has a fixed length, so no two operations share their bytes: in
 * particular, the same (client_id, seq) sent to two keys are two
 * operations.  Returned as a bytea.
 */
bytea *
FbfOperationBytes(char tag, text *key, Datum client_id, int64 seq)
{
	unsigned char client_buf[UUID_LEN > 8 ? UUID_LEN : 8];
	const unsigned char *client;
	size_t		client_len;
	size_t		key_len = key ? VARSIZE_ANY_EXHDR(key) : 0;
	size_t		head_len = key_len > 0 ? 1 + 4 + key_len : 1;
	bytea	   *result;
	unsigned char *p;
	uint64		s = (uint64) seq;
	int			i;

	switch (tag)
	{
		case 'i':
			{
				uint64		v = (uint64) DatumGetInt64(client_id);

				for (i = 0; i < 8; i++)
					client_buf[i] = (unsigned char) (v >> (8 * i));
				client = client_buf;
				client_len = 8;
				break;
			}
		case 't':
			{
				text	   *t = DatumGetTextPP(client_id);

				client = (const unsigned char *) VARDATA_ANY(t);
				client_len = VARSIZE_ANY_EXHDR(t);
				break;
			}
		default:
			client = DatumGetUUIDP(client_id)->data;
			client_len = UUID_LEN;
			break;
	}

	if (key_len > (size_t) PG_INT32_MAX)
		elog(ERROR, "fbf: key too long");
	result = palloc(VARHDRSZ + head_len + client_len + 8);
	SET_VARSIZE(result, VARHDRSZ + head_len + client_len + 8);
	p = (unsigned char *) VARDATA(result);
	if (key_len > 0)
	{
		p[0] = (unsigned char) (tag - 'a' + 'A');
		for (i = 0; i < 4; i++)
			p[1 + i] = (unsigned char) (key_len >> (8 * i));
		memcpy(p + 5, VARDATA_ANY(key), key_len);
	}
	else
		p[0] = (unsigned char) tag;
	memcpy(p + head_len, client, client_len);
	for (i = 0; i < 8; i++)
		p[head_len + client_len + i] = (unsigned char) (s >> (8 * i));
	return result;
}

/*
 * An operation's identity (FbfOperationBytes) as the window whose keying is
 * `keying` is asked about it (FbfWindowHashIdentity): `tag` is the client
 * id's type ('i' bigint, 't' text, 'u' uuid), `key` NULL or '' for the
 * default key.  On another key, the identity 1.0 gave the operation (it
 * left the key out: window_legacy.c) goes with it while the window may
 * still hold such identities.
 */
void
FbfOperationIdentity(char tag, text *key, Datum client_id, int64 seq,
					 const FbfWindowKeying *keying, FbfWindowOp *op)
{
	bytea	   *bytes = FbfOperationBytes(tag, key, client_id, seq);
	bytea	   *keyless = NULL;

	if (keying->keyless_too && key != NULL && VARSIZE_ANY_EXHDR(key) > 0)
		keyless = FbfOperationBytes(tag, NULL, client_id, seq);
	FbfWindowHashIdentity(keying, VARDATA(bytes), VARSIZE(bytes) - VARHDRSZ,
						  keyless ? VARDATA(keyless) : NULL,
						  keyless ? VARSIZE(keyless) - VARHDRSZ : 0, op);
	pfree(bytes);
	if (keyless)
		pfree(keyless);
}

static void
require_arg(FunctionCallInfo fcinfo, int argno, const char *fname,
			const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s of %s must not be null", name, fname)));
}

/*
 * The delta identity of an operation that adds `delta`: what a counter
 * with the option track_mismatch records beside the operation when it
 * applies it, and looks up when it dismisses a retry of it.  Its bytes are
 *
 *		'd', the operation's hash (h1, h2, 8 little-endian bytes each),
 *		the delta's 8 little-endian bytes
 *
 * and the window stores their hash, under its key (`key`; zero for an
 * operation recorded under the public hash, before the window had one).
 * No operation's or claim's identity bytes begin with 'd'
 * (FbfOperationBytes; dedup.c), so a delta identity is never one of theirs;
 * and two operations share delta identities only if their own hashes are
 * equal, when the window takes them for one operation anyway.  Built on
 * the operation's hash rather than on its bytes, so that the increment
 * path, which hashes its operations once (a batch sorts them by hash),
 * needs nothing else.
 */
static FbfHash
delta_hash(const FbfHashKey *key, const FbfHash *op, int64 delta)
{
	unsigned char bytes[1 + 3 * 8];
	uint64		words[3];
	int			w;
	int			i;

	words[0] = op->h1;
	words[1] = op->h2;
	words[2] = (uint64) delta;
	bytes[0] = 'd';
	for (w = 0; w < 3; w++)
		for (i = 0; i < 8; i++)
			bytes[1 + 8 * w + i] = (unsigned char) (words[w] >> (8 * i));
	return fbf_hash_keyed(key, bytes, sizeof(bytes));
}

/*
 * The window's key changed after a call had recorded operations under the
 * one before: only a load into the counter meanwhile can do that
 * (window_key.c).  The transaction is retried as a whole.
 */
fbf_noreturn static void
rekeyed_error(Relation index)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("the filter \"%s\" changed its key during the call",
					RelationGetRelationName(index)),
			 errdetail("A snapshot was loaded into the counter while this call was recording operations."),
			 errhint("Retry the transaction.")));
}

/* What apply_ops did, beyond the answers. */
typedef struct FbfApplyTally
{
	INT128		sum;			/* of the applied operations' deltas */
	int			napplied;
	int			nmismatched;
	bool		overfull;		/* the window asked to grow */
} FbfApplyTally;

/*
 * Ask the window about each operation of `ops` (hashed under `keying`) in
 * their order, recording the new ones, and with track_mismatch their delta
 * identities; applied[ops->place[i]] gets each answer, *tally the rest.
 * Returns false, having recorded nothing, if the window's key changed
 * before the first operation it would have recorded: the caller hashes
 * again and calls again.
 */
static bool
apply_ops(Relation index, const FbfOps *ops, const FbfWindowKeying *keying,
		  bool track_mismatch, bool *applied, FbfApplyTally *tally)
{
	static const FbfHashKey no_key = {0, 0};
	const FbfWindowOp *hashed = ops->hashed;
	bool		recorded = false;
	int			i;

	tally->sum = int64_to_int128(0);
	tally->napplied = 0;
	tally->nmismatched = 0;
	tally->overfull = false;
	for (i = 0; i < ops->n; i++)
	{
		bool		full = false;
		bool		repeat = i > 0 && hashed[i].hash.h1 == hashed[i - 1].hash.h1 &&
			hashed[i].hash.h2 == hashed[i - 1].hash.h2;
		FbfOpResult r = FBF_OP_DUPLICATE;

		if (!repeat)
			r = FbfWindowApply(index, keying, &hashed[i], &full);
		if (r == FBF_OP_REKEYED)
		{
			if (!recorded)
				return false;
			rekeyed_error(index);
		}
		applied[ops->place[i]] = r == FBF_OP_APPLIED;
		tally->overfull |= full;
		if (r == FBF_OP_APPLIED)
		{
			recorded = true;
			int128_add_int64(&tally->sum, ops->deltas[i]);
			tally->napplied++;
		}
		if (track_mismatch)
		{
			FbfWindowOp delta_op = {0};

			delta_op.hash = delta_hash(&keying->key, &hashed[i].hash,
									   ops->deltas[i]);
			delta_op.has_public = hashed[i].has_public;
			if (delta_op.has_public)
				delta_op.public_hash = delta_hash(&no_key, &hashed[i].public_hash,
												  ops->deltas[i]);
			if (r == FBF_OP_APPLIED)
			{
				/* new, or already held (a false positive): either will do */
				if (FbfWindowApply(index, keying, &delta_op, &full) == FBF_OP_REKEYED)
					rekeyed_error(index);
				tally->overfull |= full;
			}
			else if (!FbfWindowContains(index, &delta_op.hash) &&
					 (!delta_op.has_public ||
					  !FbfWindowContains(index, &delta_op.public_hash)))
				tally->nmismatched++;
		}
		CHECK_FOR_INTERRUPTS();
	}
	return true;
}

/*
 * The increment path, shared by every caller: apply the operations `ops`
 * on their key of the counter `relid`, as the calling user.
 *
 * `ops` (FbfOpsPrepare) holds the operations' identities on their key;
 * once the window is open they are hashed under its key (FbfOpsHash) and
 * asked in that order.  An operation whose hash equals the previous one's
 * is a repeat of it within the call: it is dismissed without asking the
 * window.  On return applied[k] says whether
 * the caller's operation k (ops->place) was new.  The deltas of the
 * applied operations are added, as their sum, to this backend's shard row
 * of the key in one update (22003 if that sum does not fit in bigint;
 * nothing is then applied, as the error aborts the transaction that
 * recorded the operations).  If `value` is not NULL, it is set to the
 * key's value afterwards, as the transaction sees it.
 *
 * The operations go to the window one at a time, each waiting for a
 * concurrent transaction that has the same operation in flight, in the
 * canonical order, so that two transactions never wait for each other
 * (counter_batch.c).  Each is counted in the registry's statistics.
 *
 * With the window's option track_mismatch, an applied operation also
 * records its delta identity (delta_hash) in the same (sub)transaction, so
 * that it shares the operation's fate and lifetime; a dismissed one looks
 * its delta identity up (FbfWindowContains: no record, no wait) and is
 * counted mismatched if the window does not hold it.
 */
void
FbfCounterApply(Oid relid, FbfOps *ops, bool *applied, int64 *value)
{
	text	   *key = ops->key;
	int			nops = ops->n;
	Relation	heap;
	Relation	index;
	bool		track_mismatch;
	bool		rls;
	FbfWindowKeying keying;
	FbfApplyTally tally;

	if (FbfCounterOpenRoutable(relid, FBF_COUNTER_INCREMENT, RowExclusiveLock,
							   &heap, &index))
	{
		/*
		 * Distributed by Citus: applied on the node of the key's shard,
		 * where its policies judge the caller again.  Under row security
		 * they judge it here first, with the row statement adding nothing
		 * (below), which Citus routes as any statement: the routed
		 * statement's CTE is subject to them too, and Citus cannot route a
		 * statement whose policies rule out the key's shard (XX000, "could
		 * not find valid entry for shard 0") where this one is refused as
		 * on one node (42501).
		 */
		if (nops > 0 && check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		{
			index = index_open(FbfCounterRelGet(heap)->window_index,
							   AccessShareLock);
			add_delta(heap, key, 0, FbfWindowGetOptions(index)->shards, true);
			index_close(index, AccessShareLock);
		}
		FbfCitusApply(heap, FbfCounterRelGet(heap)->qualname, ops, applied,
					  value);
		FbfCounterClose(heap, NULL);
		return;
	}
	if (nops > 0)
		FbfCounterNoteOperation();
	track_mismatch = FbfWindowGetOptions(index)->track_mismatch;

	/*
	 * Under row security, answer only a user who could have applied the
	 * operations, before the window is asked (which may wait for another
	 * tenant's transaction): make the row statement adding nothing, so
	 * that the key's policies judge it as they would a new operation.
	 */
	rls = check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED;
	if (rls && nops > 0)
		add_delta(heap, key, 0, FbfWindowGetOptions(index)->shards, true);

	/* hashed under the window's key; again if it changes meanwhile */
	do
	{
		FbfWindowGetKeying(index, &keying);
		FbfOpsHash(ops, &keying);
	} while (!apply_ops(index, ops, &keying, track_mismatch, applied, &tally));

	if (tally.napplied > 0)
	{
		if (int128_compare(tally.sum, int64_to_int128(PG_INT64_MIN)) < 0 ||
			int128_compare(tally.sum, int64_to_int128(PG_INT64_MAX)) > 0)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("bigint out of range"),
					 errdetail("The deltas of the %d operations this call applies add up to more than bigint holds.",
							   tally.napplied)));
		add_delta(heap, key, int128_to_int64(tally.sum),
				  FbfWindowGetOptions(index)->shards, rls);
	}
	FbfStatsCount(MyDatabaseId, relid, tally.napplied, nops - tally.napplied,
				  tally.nmismatched);

	/* more operations than the filter's bits are for: grow it now */
	if (tally.overfull)
		FbfCounterGrow(index);
	if (value != NULL)
		*value = counter_sum(heap, key, false);
	FbfCounterClose(heap, index);
}

/*
 * One operation from the arguments of `fname` (idempotent_increment or
 * idempotent_increment_outcome: counter regclass, [key text,] client_id,
 * seq bigint, delta bigint), whose client id is of type `tag`: true if
 * applied, false if dismissed as a duplicate.  *value as FbfCounterApply
 * sets it, if not NULL.
 */
bool
FbfIncrement(FunctionCallInfo fcinfo, char tag, const char *fname,
			 int64 *value)
{
	bool		keyed = PG_NARGS() == 5;
	int			a_client = keyed ? 2 : 1;
	text	   *key;
	Datum		client_id;
	int64		seq;
	int64		delta;
	FbfOps	   *ops;
	bool		applied;

	require_arg(fcinfo, 0, fname, "counter");
	if (keyed)
		require_arg(fcinfo, 1, fname, "key");
	require_arg(fcinfo, a_client, fname, "client_id");
	require_arg(fcinfo, a_client + 1, fname, "seq");
	require_arg(fcinfo, a_client + 2, fname, "delta");

	PreventCommandIfReadOnly(psprintf("%s()", fname));
	PreventCommandDuringRecovery(psprintf("%s()", fname));

	key = keyed ? PG_GETARG_TEXT_PP(1) : cstring_to_text("");
	client_id = PG_GETARG_DATUM(a_client);
	seq = PG_GETARG_INT64(a_client + 1);
	delta = PG_GETARG_INT64(a_client + 2);

	ops = FbfOpsPrepare(tag, key, 1, &client_id, &seq, &delta);
	FbfCounterApply(PG_GETARG_OID(0), ops, &applied, value);
	return applied;
}

/*
 * idempotent_increment(counter regclass, [key text,] client_id, seq bigint,
 * delta bigint): true if applied, false if dismissed as a duplicate.
 */
static Datum
increment(FunctionCallInfo fcinfo, char tag)
{
	PG_RETURN_BOOL(FbfIncrement(fcinfo, tag, "idempotent_increment", NULL));
}

Datum
fbf_increment_int8(PG_FUNCTION_ARGS)
{
	return increment(fcinfo, 'i');
}

Datum
fbf_increment_text(PG_FUNCTION_ARGS)
{
	return increment(fcinfo, 't');
}

Datum
fbf_increment_uuid(PG_FUNCTION_ARGS)
{
	return increment(fcinfo, 'u');
}

/*
 * fbf_operation([key,] client_id, seq): the bytes that identify an
 * operation, as the window hashes them, so that fbf_contains(fbf_snapshot(t),
 * fbf_operation(k, c, s)) asks whether t's filter remembers the operation.
 * Without a key: the default key ''.
 */
static Datum
operation(FunctionCallInfo fcinfo, char tag)
{
	bool		keyed = PG_NARGS() == 3;

	PG_RETURN_BYTEA_P(FbfOperationBytes(tag,
									  keyed ? PG_GETARG_TEXT_PP(0) : NULL,
									  PG_GETARG_DATUM(keyed ? 1 : 0),
									  PG_GETARG_INT64(keyed ? 2 : 1)));
}

Datum
fbf_operation_int8(PG_FUNCTION_ARGS)
{
	return operation(fcinfo, 'i');
}

Datum
fbf_operation_text(PG_FUNCTION_ARGS)
{
	return operation(fcinfo, 't');
}

Datum
fbf_operation_uuid(PG_FUNCTION_ARGS)
{
	return operation(fcinfo, 'u');
}

/* ----------------------------------------------------------------------
 * Reading and inspecting
 * ----------------------------------------------------------------------
 */

/* fbf_counter_value(counter regclass, key text): the sum of the key's shards */
Datum
fbf_counter_value(PG_FUNCTION_ARGS)
{
	Relation	heap;
	Relation	index;
	int64		value;

	/* on a Citus shell, the SELECT sum(...) runs on the key's shard */
	(void) FbfCounterOpenRoutable(PG_GETARG_OID(0), FBF_COUNTER_READ,
								  AccessShareLock, &heap, &index);
	value = counter_sum(heap, PG_GETARG_TEXT_PP(1), true);
	FbfCounterClose(heap, index);
	PG_RETURN_INT64(value);
}

/* fbf_snapshot(counter regclass): the live filter as an fbf value */
Datum
fbf_snapshot(PG_FUNCTION_ARGS)
{
	Relation	heap;
	Relation	index;
	uint64		pending;
	Datum		value;

	FbfCounterOpen(PG_GETARG_OID(0), FBF_WINDOW_READ, AccessShareLock, &heap, &index);

	/* the whole window would tell about rows the policies hide */
	if (check_enable_rls(RelationGetRelid(heap), InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("fbf_snapshot of \"%s\" is not allowed under row security",
						RelationGetRelationName(heap)),
				 errdetail("A snapshot shows the operations of every key."),
				 errhint("Take snapshots as the table's owner or as a role with BYPASSRLS.")));
	value = FbfWindowSnapshot(index, &pending);
	FbfCounterClose(heap, index);
	PG_RETURN_DATUM(value);
}
