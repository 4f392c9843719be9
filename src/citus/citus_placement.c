/*-------------------------------------------------------------------------
 *
 * citus_placement.c
 *	  Tables distributed by Citus, on the node that holds a shard: the
 *	  placement prologue every placement function starts with, and
 *	  applying a routed increment there on the key's shard
 *	  (fbf_apply_on_placement).
 *
 * A routed statement (citus_route.c, citus_dedup.c, the fast path of
 * citus_plan.c) runs its placement function on the node of the shard of
 * its routing value.  There the function finds that shard from the
 * table's shard map (citus_shards.c) or Citus' metadata cache through its
 * SQL functions, called by fmgr, not SPI, checks that its placement is
 * local, and locks its metadata against
 * shard transfers (FbfCitusPlacementPrologue); an increment's operations
 * then go to FbfCounterApply on the shard table
 * (FbfCitusApplyOnPlacement: fbf_apply_on_placement, and the front ends'
 * placement twins in counter.c and counter_batch.c through the route's
 * apply_on_placement).
 *
 * What travels is what the client gave idempotent_increment: the key and
 * each operation's client id, seq and delta; fbf_apply_on_placement hashes
 * them here as the front door does (FbfOpsFromArrays), so a shard's window
 * holds exactly what a single-node counter's would, and fbf_snapshot,
 * fbf_operation and the windows copied by shard moves and splits
 * (fbf_copy_shard_window, citus_transfer.c) agree with it.  It never takes
 * hashes: a caller who chose the hashes could record another key's
 * operations under a key it may update, and so have them dismissed when
 * their owner sends them.
 *
 * Who may call fbf_apply_on_placement (and every placement function):
 * everyone (EXECUTE stays granted to PUBLIC).  Citus runs the routed
 * statement on the worker as the user who called idempotent_increment,
 * so a REVOKE would take increments away from every user but the owner.
 * Nor does it need one: it grants nothing that idempotent_increment on
 * the shard table, on that node, does not.  The shell must be a counter
 * distributed by its key that the caller may increment
 * (FbfCounterOpenRoutable: 42501, 42809, 0A000), and the operations go
 * through FbfCounterApply on the shard table, with its privilege checks
 * and, under row security, the row statement that lets the key's policies
 * judge the caller before the window is asked: the caller records
 * operations only on keys whose rows it may update, and only operations
 * whose identity is on that key.  Nor can a direct call slip past a shard
 * transfer: it takes the shard's metadata lock as a routed write does.
 *
 * Locks: every placement function (fbf_apply_on_placement, the front
 * ends' placement twins, fbf_claim_on_placement in citus_dedup.c) starts
 * with the placement prologue: the shell opened with AccessShareLock once
 * its privileges are checked, then the metadata lock of the value's shard
 * in ShareLock, until the end of the transaction, taken through Citus'
 * lock_shard_metadata, or with the tag this backend saw it take for the
 * shard, then the shard table opened by FbfCounterApply (or FbfClaim);
 * Citus' catalogs pg_dist_placement and pg_dist_local_group are read with
 * AccessShareLock, unless the shard is one this backend found placed here
 * and kept (local_shard, kept_shard).
 * That metadata lock is the one a routed write takes on the node that
 * routes it (Citus takes it on the coordinator for the
 * routed statement) and the one a shard move or split holds in
 * ExclusiveLock on every node while it copies the shard's last writes,
 * so a placement function called directly on a worker waits for
 * a transfer as a routed write does (on the coordinator, or on the routing
 * worker under Citus MX), instead of writing to a placement being copied.
 * The prologue's comment gives the lock order with transfers.
 *
 * Nothing here links to Citus: the shard and its placement are read
 * through Citus' SQL functions and its catalogs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace_d.h"
#include "catalog/pg_type_d.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/primnodes.h"
#include "parser/parse_func.h"
#include "storage/lock.h"
#include "storage/sinval.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/varlena.h"

#include "citus/citus.h"
#include "common/fbf_htab.h"
#include "counter/counter.h"
#include "counter/counter_args.h"


/* ----------------------------------------------------------------------
 * Citus' metadata, on the node that holds the shard
 * ----------------------------------------------------------------------
 */

/*
 * The Citus functions called here, each looked up once per backend and
 * argument types and kept until pg_proc changes (citus_calls_forget):
 * lock_shard_metadata and shard_name for a shard not yet kept, and
 * get_shard_id_for_distribution_column where the table's shard map
 * declines (citus_shards.c), each of which would otherwise search pg_proc
 * by name.
 */
#define CITUS_CALLS_MAX		8

typedef struct CitusCall
{
	const char *name;			/* a string constant of this file's */
	int			nargs;
	Oid			types[FUNC_MAX_ARGS];	/* the actual argument types */
	FmgrInfo	flinfo;			/* in citus_calls_cxt, with its FuncExpr */
} CitusCall;

static CitusCall citus_calls[CITUS_CALLS_MAX];
static int	ncitus_calls = 0;
static MemoryContext citus_calls_cxt = NULL;	/* the entries' memory */
static bool citus_calls_stale = false;	/* pg_proc changed since they were made */

static void
citus_calls_forget(Datum arg, int cacheid, uint32 hashvalue)
{
	citus_calls_stale = true;
}

/*
 * The function manager's entry for the Citus SQL function
 * pg_catalog.`name`, whose argument types are `argtypes`, called with
 * arguments of the types `types` (the actual types, for a polymorphic
 * argument), with a FuncExpr that tells a polymorphic function its
 * arguments' types (get_fn_expr_argtype): from citus_calls, or looked up
 * now and kept.  An invalidation of pg_proc only marks the entries stale
 * (citus_calls_forget): it may arrive while an entry's function is being
 * called, or while an entry is being made.  They are dropped, and their
 * memory (their FuncExprs, and what the functions keep in fn_extra)
 * freed, at the next look-up, when none is in use.
 */
static FmgrInfo *
citus_function(const char *name, int nargs, const Oid *argtypes,
			   const Oid *types)
{
	CitusCall  *call;
	MemoryContext old;
	List	   *exprs = NIL;
	Oid			fn;
	int			i;

	if (citus_calls_stale || ncitus_calls == CITUS_CALLS_MAX)
	{
		ncitus_calls = 0;
		citus_calls_stale = false;
		if (citus_calls_cxt != NULL)
			MemoryContextReset(citus_calls_cxt);
	}
	for (i = 0; i < ncitus_calls; i++)
		if (strcmp(citus_calls[i].name, name) == 0 &&
			citus_calls[i].nargs == nargs &&
			memcmp(citus_calls[i].types, types, sizeof(Oid) * nargs) == 0)
			return &citus_calls[i].flinfo;

	if (citus_calls_cxt == NULL)
	{
		citus_calls_cxt = AllocSetContextCreate(CacheMemoryContext,
												"fbf Citus functions",
												ALLOCSET_SMALL_SIZES);
		CacheRegisterSyscacheCallback(PROCOID, citus_calls_forget, (Datum) 0);
	}
	fn = LookupFuncName(list_make2(makeString("pg_catalog"),
								   makeString(pstrdup(name))),
						nargs, argtypes, false);
	call = &citus_calls[ncitus_calls];
	call->name = name;
	call->nargs = nargs;
	memcpy(call->types, types, sizeof(Oid) * nargs);
	fmgr_info_cxt(fn, &call->flinfo, citus_calls_cxt);
	old = MemoryContextSwitchTo(citus_calls_cxt);
	for (i = 0; i < nargs; i++)
		exprs = lappend(exprs, makeNullConst(types[i], -1, InvalidOid));
	fmgr_info_set_expr((Node *) makeFuncExpr(fn, get_func_rettype(fn), exprs,
											 InvalidOid, InvalidOid,
											 COERCE_EXPLICIT_CALL),
					   &call->flinfo);
	MemoryContextSwitchTo(old);
	ncitus_calls++;
	return &call->flinfo;
}

/*
 * The result of the Citus SQL function pg_catalog.`name`, whose argument
 * types are `argtypes`, called with the `nargs` values `args` of the types
 * `types` (the actual types, for a polymorphic argument): through fmgr,
 * without SPI (citus_function).  Error if it returns NULL.
 */
static Datum
citus_call(const char *name, int nargs, const Oid *argtypes, const Oid *types,
		   const Datum *args)
{
	FmgrInfo   *flinfo = citus_function(name, nargs, argtypes, types);
	Datum		result;
	int			i;

	LOCAL_FCINFO(fcinfo, FUNC_MAX_ARGS);

	InitFunctionCallInfoData(*fcinfo, flinfo, nargs, InvalidOid, NULL, NULL);
	for (i = 0; i < nargs; i++)
	{
		fcinfo->args[i].value = args[i];
		fcinfo->args[i].isnull = false;
	}
	result = FunctionCallInvoke(fcinfo);
	if (fcinfo->isnull)
		elog(ERROR, "fbf: %s returned NULL", name);
	return result;
}

/* pg_dist_local_group, as placed_here last found it (shards_forget) */
static Oid	local_group_relid = InvalidOid;

/*
 * Is shard `shardid` placed on this node?  Its rows of pg_dist_placement
 * (through their index on shardid, if there is one) name a group, and
 * pg_dist_local_group's one row names this node's.  Both read as catalogs
 * with AccessShareLock.
 */
static bool
placed_here(int64 shardid)
{
	Oid			placements = get_relname_relid("pg_dist_placement", PG_CATALOG_NAMESPACE);
	Oid			by_shard = get_relname_relid("pg_dist_placement_shardid_index",
											 PG_CATALOG_NAMESPACE);
	Oid			local = get_relname_relid("pg_dist_local_group", PG_CATALOG_NAMESPACE);
	AttrNumber	a_shard;
	AttrNumber	a_group;
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData skey;
	HeapTuple	tuple;
	bool		isnull;
	int32		here = -1;
	bool		found = false;

	if (!OidIsValid(placements) || !OidIsValid(local))
		elog(ERROR, "fbf: Citus' metadata lacks pg_dist_placement or pg_dist_local_group");
	local_group_relid = local;

	rel = table_open(local, AccessShareLock);
	a_group = FbfCitusCatalogAttnum(local, "groupid");
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	if (HeapTupleIsValid(tuple = systable_getnext(scan)))
		here = DatumGetInt32(heap_getattr(tuple, a_group, RelationGetDescr(rel), &isnull));
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	rel = table_open(placements, AccessShareLock);
	a_shard = FbfCitusCatalogAttnum(placements, "shardid");
	a_group = FbfCitusCatalogAttnum(placements, "groupid");
	ScanKeyInit(&skey, a_shard, BTEqualStrategyNumber, F_INT8EQ,
				Int64GetDatum(shardid));
	scan = systable_beginscan(rel, by_shard, OidIsValid(by_shard), NULL, 1, &skey);
	while (!found && HeapTupleIsValid(tuple = systable_getnext(scan)))
		found = DatumGetInt32(heap_getattr(tuple, a_group, RelationGetDescr(rel),
										   &isnull)) == here;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

static void kept_shards_init(void);

/*
 * The shard of the distributed table `table` that holds the distribution
 * value `value` (of type `type`: a counter's key, a dedup table's
 * anchor), as Citus routes it: from the table's shard map
 * (citus_shards.c), or where that declines from Citus
 * (get_shard_id_for_distribution_column, from its metadata cache).
 */
static int64
shard_of(Oid table, Datum value, Oid type)
{
	static const Oid find_types[2] = {REGCLASSOID, ANYOID};
	Oid			types[2] = {REGCLASSOID, type};
	Datum		args[2];
	int64		shardid;

	kept_shards_init();			/* the map's invalidations come through it */
	if (FbfCitusShardFind(table, value, type, &shardid))
		return shardid;
	ereport(DEBUG2,
			(errmsg_internal("fbf: the shard map of \"%s\" declines a value of type %s: Citus' function answers",
							 get_rel_name(table), format_type_be(type))));
	args[0] = ObjectIdGetDatum(table);
	args[1] = value;
	return DatumGetInt64(citus_call("get_shard_id_for_distribution_column",
									2, find_types, types, args));
}

/*
 * What this backend learned about shards, kept in `kept_shards` until it
 * processes a relation cache invalidation that may change it
 * (shards_forget): the shards local_shard found placed here, with their
 * tables, and the lock tags lock_shard_metadata saw Citus take for shards'
 * metadata, until an invalidation of their distributed table, or of all
 * relations; a placement also until an invalidation of its shard's table
 * or of pg_dist_local_group.
 *
 * Citus invalidates a distributed table's relation cache entry whenever
 * its metadata changes: a placement of one of its shards added, removed
 * or given to another group (CitusInvalidateRelcacheByShardId, from
 * InsertShardPlacementRow, DeleteShardPlacementRow and
 * UpdatePlacementGroupId, and the trigger on pg_dist_placement), its
 * shards or its colocation changed (the triggers on pg_dist_shard and
 * pg_dist_partition).  This node's group changing invalidates
 * pg_dist_local_group's entry (its trigger), and dropping or renaming a
 * shard table invalidates that table's: a placement is forgotten at those
 * and at no other, so that other relations' invalidations (a session
 * creating and dropping temporary tables) do not send every call back to
 * Citus' catalogs.  (A placement row added before its shard's row names
 * no table to invalidate: the shard's row, added next, invalidates it; a
 * shard's row deleted invalidates its table.)  A lock tag
 * is Citus' to compute from its cache entry of the distributed table (its
 * index among the table's shards, the table's colocation group), which
 * Citus drops at an invalidation of that table or of all relations and at
 * no other (InvalidateDistRelationCacheCallback, metadata_cache.c): the
 * tag is forgotten at the same ones, so that other relations'
 * invalidations do not send every lock back through Citus.
 *
 * A relation cache callback sees every invalidation this backend
 * processes: other backends' committed ones, its own at each command's
 * end, and, when its (sub)transaction aborts, its own undone, so that a
 * placement this backend's own transaction made and then rolled back is
 * forgotten too.  Something is kept only if nothing that would have
 * dropped it was processed while it was looked up.  Only what was found
 * is kept: a shard not placed here is an error, and its retry looks
 * again.  A hash table, bounded: past SHARDS_KEPT_MAX entries (shards this
 * backend has written to since the last invalidation of their tables) it
 * is emptied and filled again.
 */
#define SHARDS_KEPT_MAX		8192

/* how often a lock that saw nothing new is learned again: see KeptShard */
#define SHARD_LOCK_UNSEEN_MAX	2

typedef struct KeptShardKey
{
	Oid			shell;			/* the distributed table */
	int64		shardid;
} KeptShardKey;

/* what is known of a shard's metadata lock */
typedef enum ShardLockKnown
{
	SHARD_LOCK_UNKNOWN,			/* not learned yet */
	SHARD_LOCK_KNOWN,			/* `tag` was seen */
	SHARD_LOCK_UNSEEN			/* the lock was held already when learned */
} ShardLockKnown;

/*
 * A shard's entry.  A lock seen already held when it was learned (a
 * statement Citus routed to a shard of this node took it first; another
 * table colocated with it, which shares the tag, was written to first in
 * the same transaction) is learned again in a later transaction, up to
 * SHARD_LOCK_UNSEEN_MAX times, then taken through Citus without learning
 * until the entry is dropped: learning scans the lock table twice.
 */
typedef struct KeptShard
{
	KeptShardKey key;
	Oid			shard;			/* its table on this node, or InvalidOid */
	ShardLockKnown lock;
	int			unseen;			/* times the lock was learned as unseen */
	LocalTransactionId unseen_in;	/* the transaction of the last of them */
	LOCKTAG		tag;			/* SHARD_LOCK_KNOWN: the lock, as Citus computed it */
} KeptShard;

static HTAB *kept_shards = NULL;
static uint64 invalidations_seen = 0;	/* invalidations processed */
static Oid	shard_lock_learning = InvalidOid;	/* the table whose tag is being learned */
static bool shard_lock_learning_forgotten = false;	/* and it was invalidated meanwhile */

/*
 * Forget what an invalidation of `relid` may change (InvalidOid: every
 * relation): the entries of its shards if it is a distributed table, the
 * placement of its shard if it is a shard table.
 */
static void
kept_shards_drop(Oid relid)
{
	HASH_SEQ_STATUS status;
	KeptShard  *entry;

	hash_seq_init(&status, kept_shards);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (!OidIsValid(relid) || entry->key.shell == relid)
			(void) hash_search(kept_shards, &entry->key, HASH_REMOVE, NULL);
		else if (entry->shard == relid)
			entry->shard = InvalidOid;
	}
}

static void
shards_forget(Datum arg, Oid relid)
{
	FbfCitusShardsForget(relid);
	invalidations_seen++;
	if (!OidIsValid(relid) || relid == shard_lock_learning)
		shard_lock_learning_forgotten = true;
	if (kept_shards == NULL)
		return;
	if (OidIsValid(relid) && relid == local_group_relid)
		kept_shards_drop(InvalidOid);
	else
		kept_shards_drop(relid);
}

/*
 * Create the table and register shards_forget, at the first look-up of a
 * shard or of a routing value's shard, so that nothing is missed once
 * either learns.
 */
static void
kept_shards_init(void)
{
	if (kept_shards != NULL)
		return;
	kept_shards = FbfHashCreate("fbf kept shards", 64, sizeof(KeptShardKey),
								sizeof(KeptShard), TopMemoryContext);
	CacheRegisterRelcacheCallback(shards_forget, (Datum) 0);
}

/*
 * The entry of shard `shardid` of `shell`, or NULL; created if `create`
 * (its fields unknown), emptying the table first if it is full.
 */
static KeptShard *
kept_shard(Oid shell, int64 shardid, bool create)
{
	KeptShardKey key;
	KeptShard  *entry;
	bool		found;

	kept_shards_init();
	memset(&key, 0, sizeof(key));	/* the padding is hashed too */
	key.shell = shell;
	key.shardid = shardid;
	if (!create)
		return hash_search(kept_shards, &key, HASH_FIND, NULL);

	if (hash_get_num_entries(kept_shards) >= SHARDS_KEPT_MAX &&
		hash_search(kept_shards, &key, HASH_FIND, NULL) == NULL)
		kept_shards_drop(InvalidOid);
	entry = hash_search(kept_shards, &key, HASH_ENTER, &found);
	if (!found)
	{
		entry->shard = InvalidOid;
		entry->lock = SHARD_LOCK_UNKNOWN;
		entry->unseen = 0;
		entry->unseen_in = InvalidLocalTransactionId;
	}
	return entry;
}

/*
 * The advisory lock tags this backend holds in ShareLock, from the lock
 * manager's shared table (GetLockStatusData, which takes every partition
 * lock: lock_shard_metadata asks only while it learns a shard's tag).
 * Returns their number; *tags is palloc'd.
 */
static int
advisory_share_locks(LOCKTAG **tags)
{
	LockData   *data = GetLockStatusData();
	int			n = 0;
	int			i;

	*tags = palloc(sizeof(LOCKTAG) * Max(data->nelements, 1));
	for (i = 0; i < data->nelements; i++)
	{
		LockInstanceData *lock = &data->locks[i];

		if (lock->pid == MyProcPid &&
			lock->locktag.locktag_type == LOCKTAG_ADVISORY &&
			(lock->holdMask & LOCKBIT_ON(ShareLock)) != 0)
			(*tags)[n++] = lock->locktag;
	}
	pfree(data->locks);
	pfree(data);
	return n;
}

/*
 * Is `tag` one of Citus' shard metadata locks?  Advisory, of the class of
 * a shard's (ADV_LOCKTAG_CLASS_CITUS_SHARD_METADATA, 4) or of colocated
 * shards' (ADV_LOCKTAG_CLASS_CITUS_COLOCATED_SHARDS_METADATA, 8) metadata
 * (resource_lock.h): a tag of another class is never kept.
 */
static bool
citus_metadata_tag(const LOCKTAG *tag)
{
	return tag->locktag_type == LOCKTAG_ADVISORY &&
		(tag->locktag_field4 == 4 || tag->locktag_field4 == 8);
}

/*
 * Lock the metadata of shard `shardid` of `shell` through Citus' SQL
 * function lock_shard_metadata, as the table's owner `owner`
 * (lock_shard_metadata's comment says why), and, if `learn`, learn the tag
 * it locked: the one advisory lock of Citus' metadata classes in ShareLock
 * this backend holds after the call and did not before.  Kept unless an
 * invalidation of `shell` was processed meanwhile; as unseen if the lock
 * was already held (nothing new is seen) or more than one lock is new.
 */
static void
lock_shard_metadata_through_citus(Oid owner, Oid shell, int64 shardid,
								  bool learn)
{
	static const Oid lock_types[2] = {INT4OID, INT8ARRAYOID};
	Datum		args[2];
	Oid			save_userid;
	int			save_sec_context;
	LOCKTAG    *before = NULL;
	LOCKTAG    *after;
	int			nbefore = 0;
	int			nafter;
	int			nnew = 0;
	LOCKTAG    *learned = NULL;
	KeptShard  *entry;
	int			i;
	int			j;

	if (learn)
	{
		nbefore = advisory_share_locks(&before);
		shard_lock_learning = shell;
		shard_lock_learning_forgotten = false;
	}
	args[0] = Int32GetDatum(ShareLock);
	args[1] = FbfArrayBuildInts(INT8OID, &shardid, 1);
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(owner, save_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	(void) citus_call("lock_shard_metadata", 2, lock_types, lock_types, args);
	SetUserIdAndSecContext(save_userid, save_sec_context);
	if (!learn)
		return;
	shard_lock_learning = InvalidOid;

	nafter = advisory_share_locks(&after);
	for (i = 0; i < nafter; i++)
	{
		if (!citus_metadata_tag(&after[i]))
			continue;
		for (j = 0; j < nbefore; j++)
			if (memcmp(&after[i], &before[j], sizeof(LOCKTAG)) == 0)
				break;
		if (j == nbefore)
		{
			learned = &after[i];
			nnew++;
		}
	}
	if (!shard_lock_learning_forgotten)
	{
		entry = kept_shard(shell, shardid, true);
		if (nnew == 1)
		{
			entry->lock = SHARD_LOCK_KNOWN;
			entry->tag = *learned;
		}
		else
		{
			entry->lock = SHARD_LOCK_UNSEEN;
			entry->unseen++;
			entry->unseen_in = FbfMyLocalTransactionId();
		}
		ereport(DEBUG1,
				(errmsg_internal("fbf: the metadata lock tag of shard " INT64_FORMAT " of \"%s\" is %s",
								 shardid, get_rel_name(shell),
								 nnew == 1 ? "kept" : "not seen: locked through Citus")));
	}
	if (before != NULL)
		pfree(before);
	pfree(after);
}

/*
 * Take the metadata lock of shard `shardid` of the distributed table
 * `shell` (owned by `owner`) in ShareLock, for the rest of the
 * transaction: the lock a routed write takes on the node that routes it
 * (Citus' AcquireMetadataLocks: LockShardDistributionMetadata(shardId,
 * ShareLock)), and that a shard move or split takes in ExclusiveLock on
 * every node with metadata before it copies the shard's last writes
 * (BlockWritesToShardList: LockShardDistributionMetadata on the
 * coordinator, then LockShardListMetadataOnWorkers, which runs
 * `SELECT lock_shard_metadata(7, ARRAY[...])` on each worker).
 *
 * The tag is Citus' to compute: Citus 13's LockShardDistributionMetadata
 * does not lock the tag of SET_LOCKTAG_SHARD_METADATA_RESOURCE
 * (resource_lock.h: an advisory tag, field1 the shard id's high 32 bits,
 * field2 its low 32, field4 ADV_LOCKTAG_CLASS_CITUS_SHARD_METADATA) for a
 * hash-distributed table in a colocation group, but
 * SET_LOCKTAG_COLOCATED_SHARDS_METADATA_RESOURCE (field1 the shard's index
 * among its table's sorted shards, field2 the colocation id, field4
 * ADV_LOCKTAG_CLASS_CITUS_COLOCATED_SHARDS_METADATA), so that colocated
 * shards share one lock (SetLocktagForShardDistributionMetadata,
 * resource_lock.c), from its metadata cache.  So the first lock of a
 * shard is taken by calling Citus' own SQL function lock_shard_metadata
 * (pg_catalog, found by qualified name and argument types, as citus_call
 * finds every Citus function: search_path cannot substitute another),
 * which is the very lock the move's `lock_shard_metadata(ExclusiveLock,
 * ...)` takes on this node, whatever the version; no link to citus.so
 * either.  The tag it took is learned then (lock_shard_metadata_through_
 * citus) and kept, and later locks of the shard take that tag directly
 * (LockAcquire, as LockShardDistributionMetadata does), without the
 * function's look-ups and ownership check, until an invalidation of the
 * table drops it, as it drops what Citus computes it from.  Invalidations
 * are accepted once the kept tag is locked: if that drops the tag (a
 * split or a colocation change that committed before the lock was
 * granted), the lock just taken is released (the transaction keeps it if
 * an earlier call took it too), and false is returned: the shard may be
 * gone (a split of this very shard), so the caller looks it up again and
 * calls again, and the lock is then taken through Citus, as Citus now
 * computes it.  True once the lock is held.
 *
 * As a routed write's lock, this one is computed when it is taken: a
 * transaction that holds it while another shard of the table is split,
 * or the table's colocation changes, holds a tag that is no longer the
 * shard's, and a transfer of the shard that starts after that does not
 * wait for it.  Citus' own routed writes have the same window
 * (docs/design.md, "The placement functions lock their shard").
 *
 * lock_shard_metadata requires its caller to own the shard's table
 * (EnsureShardOwner: it keeps users from blocking others' writes).  The
 * caller here has already been found allowed to write to the table, and a
 * routed write of its takes this lock on the routing node without owning
 * anything, so the call runs as the table's owner, under a restricted
 * security context: the function takes the lock and nothing else (it
 * reads only Citus' catalogs), the lock belongs to the transaction, not
 * to a user, and the user id is restored right after (or by the abort of
 * the (sub)transaction, on error).
 */
static bool
lock_shard_metadata(Oid owner, Oid shell, int64 shardid)
{
	KeptShard  *entry = kept_shard(shell, shardid, false);
	bool		learn;

	if (entry != NULL && entry->lock == SHARD_LOCK_KNOWN)
	{
		LOCKTAG		tag = entry->tag;

		(void) LockAcquire(&tag, ShareLock, false, false);
		AcceptInvalidationMessages();
		entry = kept_shard(shell, shardid, false);
		if (entry != NULL && entry->lock == SHARD_LOCK_KNOWN)
			return true;
		(void) LockRelease(&tag, ShareLock, false);
		return false;
	}
	learn = entry == NULL || entry->lock == SHARD_LOCK_UNKNOWN ||
		(entry->lock == SHARD_LOCK_UNSEEN &&
		 entry->unseen < SHARD_LOCK_UNSEEN_MAX &&
		 entry->unseen_in != FbfMyLocalTransactionId());
	lock_shard_metadata_through_citus(owner, shell, shardid, learn);
	return true;
}

/*
 * The table of shard `shardid` of the distributed table `table`, which
 * must be placed on this node; error if it is elsewhere (the metadata
 * changed since the statement was routed: a shard move or split committed
 * meanwhile; the transaction aborts and the client's retry is routed
 * again).  Citus names the table (shard_name).  Kept (kept_shard), or
 * looked up and kept.  The prologue asks only once it holds the shard's
 * metadata lock and has accepted invalidations, so a transfer that
 * committed before the lock was granted has made what was kept stale, and
 * none can commit while the lock is held.
 */
static Oid
local_shard(Oid table, int64 shardid)
{
	static const Oid name_types[3] = {REGCLASSOID, INT8OID, BOOLOID};
	uint64		seen = invalidations_seen;
	KeptShard  *entry = kept_shard(table, shardid, false);
	Datum		args[3];
	text	   *name;
	Oid			shard = InvalidOid;

	if (entry != NULL && OidIsValid(entry->shard))
		return entry->shard;

	if (placed_here(shardid))
	{
		args[0] = ObjectIdGetDatum(table);
		args[1] = Int64GetDatum(shardid);
		args[2] = BoolGetDatum(false);
		name = DatumGetTextPP(citus_call("shard_name", 3, name_types,
										 name_types, args));
		shard = RangeVarGetRelid(makeRangeVarFromNameList(textToQualifiedNameList(name)),
								 NoLock, true);
	}
	if (!OidIsValid(shard))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shard " INT64_FORMAT " of \"%s\" is not placed on this node",
						shardid, get_rel_name(table)),
				 errdetail("Its placement moved since the call was routed here."),
				 errhint("Retry the transaction.")));

	/* unless something was invalidated meanwhile (conservatively: anything) */
	if (invalidations_seen == seen)
	{
		entry = kept_shard(table, shardid, true);
		entry->shard = shard;
	}
	ereport(DEBUG1,
			(errmsg_internal("fbf: shard " INT64_FORMAT " of \"%s\" is found placed on this node",
							 shardid, get_rel_name(table))));
	return shard;
}

/* the prologue's error for a value whose shard was split while it waited */
fbf_noreturn static void
split_while_waiting(Oid shell, int64 shardid)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("shard " INT64_FORMAT " of \"%s\" was split while the call waited for its lock",
					shardid, get_rel_name(shell)),
			 errhint("Retry the transaction.")));
}

/*
 * The placement prologue: what every placement function (the routed half
 * of a write on a table distributed by Citus: fbf_apply_on_placement and
 * the placement twins of the increment front ends, through
 * FbfCitusApplyOnPlacement; fbf_claim_on_placement, citus_dedup.c) does
 * before it writes.  `shell` must be a table distributed by Citus by its
 * routing column that the caller may write to as `access` says
 * (FBF_COUNTER_INCREMENT: a counter, UPDATE; FBF_DEDUP_CLAIM: a dedup
 * table, INSERT); `value` (of type `type`) is the routing value (a key, an
 * anchor).  Returns the table of its shard, placed on this node, with the
 * shard's metadata locked in ShareLock until the end of the transaction.
 *
 * In this order:
 *	1. privileges and kind: the shell is opened with AccessShareLock by
 *	   FbfCounterOpenRoutable, which checks the caller's privileges before
 *	   it queues that lock (42501; 42809 and 0A000 for a table of the wrong
 *	   kind or not distributed by its routing column), so that no one can
 *	   queue a lock on a table they may not write to;
 *	2. the shard of `value`, from the table's shard map (citus_shards.c,
 *	   read from Citus' metadata) or Citus' own look-up;
 *	3. the shard's metadata lock in ShareLock (lock_shard_metadata): a
 *	   shard move or split holds it in ExclusiveLock on this node from
 *	   before it copies the shard's last writes until it commits, so a
 *	   write here either commits before the copy starts, or waits until
 *	   the move has committed (and then finds the shard gone from this
 *	   node: step 4).  Without it, a call made directly on a worker, which
 *	   no coordinator locked for, could write to the old placement after
 *	   the copy, and be lost with it;
 *	4. the metadata again, as it is now that the lock is held (a move or
 *	   split that committed while this waited is seen: invalidations are
 *	   accepted first): the shard must still hold `value`, which is read
 *	   again only if an invalidation arrived since it was looked up
 *	   (SharedInvalidMessageCounter, as RangeVarGetRelidExtended does),
 *	   and be placed here (55000, retry: the client's retry is routed
 *	   again).
 *
 * No deadlock comes of the lock with a shard transfer.  A routed call
 * holds the routing node's lock (the coordinator's, taken by Citus) before
 * it takes this node's; a transfer takes the coordinator's in
 * ExclusiveLock first, then the workers'.  So while a routed call holds
 * the coordinator's lock the transfer holds no lock of that shard, and a
 * transfer that holds a worker's lock holds the coordinator's, which no
 * routed call then holds: neither waits for the other while holding what
 * the other waits for.  A direct call holds no Citus lock before this one.
 * Under Citus MX, a call routed from one worker to another is the one
 * case with two workers' locks in opposite orders (the routing worker's,
 * then the placement's; a transfer locks the workers at once, in
 * parallel): a cycle there is between two distributed transactions, and
 * Citus' distributed deadlock detection cancels one of them.
 */
Oid
FbfCitusPlacementPrologue(Oid shell, FbfCounterAccess access, Datum value,
						  Oid type)
{
	Relation	heap;
	Relation	index;
	Oid			owner;
	int64		shardid;
	uint64		seen;

	if (!FbfCounterOpenRoutable(shell, access, AccessShareLock, &heap, &index))
	{
		const char *name = pstrdup(RelationGetRelationName(heap));

		FbfCounterClose(heap, index);
		if (access == FBF_DEDUP_CLAIM)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("\"%s\" is not a dedup table distributed by Citus", name),
					 errhint("Claim ids in it with fbf_claim().")));
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a counter distributed by Citus", name),
				 errhint("Apply operations to it with idempotent_increment().")));
	}
	owner = heap->rd_rel->relowner;
	FbfCounterClose(heap, NULL);

	seen = SharedInvalidMessageCounter;
	shardid = shard_of(shell, value, type);
	while (!lock_shard_metadata(owner, shell, shardid))
	{
		/* the kept tag was dropped: the shard may be gone (see there) */
		if (shard_of(shell, value, type) != shardid)
			split_while_waiting(shell, shardid);
	}
	AcceptInvalidationMessages();
	if (SharedInvalidMessageCounter != seen &&
		shard_of(shell, value, type) != shardid)
		split_while_waiting(shell, shardid);
	return local_shard(shell, shardid);
}

/*
 * Lock, on the node that routes a statement, the metadata of the shard of
 * the distributed table `table` (owned by `owner`) that holds the routing
 * value `value` (of type `type`) in ShareLock until the end of the
 * transaction, as Citus' executor does for a routed write
 * (AcquireMetadataLocks): for the fast path's statement that commits on
 * its own, which Citus runs as a read and locks nothing for
 * (citus_plan.c), so that a shard move or split waits for it, and it for
 * them, as for a plain UPDATE.  A split that commits while this waits
 * moves the value to another shard: the metadata is read again once the
 * lock is held (invalidations accepted), and the new shard locked too,
 * until the shard found is the one locked; Citus then plans with that
 * metadata.  The caller checked that the user may write to the table.
 */
void
FbfCitusLockRoutingValue(Oid table, Oid owner, Datum value, Oid type)
{
	int64		locked = -1;

	for (;;)
	{
		uint64		seen = SharedInvalidMessageCounter;
		int64		shardid = shard_of(table, value, type);

		if (shardid == locked)
			break;
		CHECK_FOR_INTERRUPTS();
		if (!lock_shard_metadata(owner, table, shardid))
			continue;			/* the kept tag was dropped: look again */
		locked = shardid;
		AcceptInvalidationMessages();
		if (SharedInvalidMessageCounter == seen)
			break;				/* nothing changed since the look-up */
	}
}

/*
 * fbf_outside_transaction_block(counter regclass) RETURNS regclass:
 * `counter`, or an error (25001) if a transaction block is open.  The fast
 * path's statement that commits on its own (citus_plan.c) passes its table
 * through it on the placement: Citus sends that statement as a read, which
 * in a distributed transaction it commits without two-phase commit, so it
 * may run only as a transaction's one distributed statement.  The node
 * that plans it checks that when it plans and when it executes it
 * (commits_alone, alone_executor_start); this is the placement's own
 * check, behind those: wherever Citus opens a transaction block on the
 * placement for the read (inside a distributed transaction, or inside a
 * transaction block while citus.select_opens_transaction_block is on),
 * nothing is applied.  Strict: NULL for a NULL table, which the placement
 * function then refuses.
 */
PG_FUNCTION_INFO_V1(fbf_outside_transaction_block);

Datum
fbf_outside_transaction_block(PG_FUNCTION_ARGS)
{
	if (IsTransactionBlock())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("this statement was planned to commit on its own, and runs inside a transaction block"),
				 errdetail("Its plan was made for a statement that is its transaction's only distributed statement."),
				 errhint("Roll back, and retry the transaction.")));
	PG_RETURN_OID(PG_GETARG_OID(0));
}

/*
 * Apply `ops` of the counter whose shell is `shell` on the shard of their
 * key, which must be placed on this node: the routed half of an increment
 * (fbf_apply_on_placement, and the placement twins of the front ends,
 * counter.c and counter_batch.c, that the fast path calls, citus_plan.c,
 * through the route's apply_on_placement).  The placement prologue checks
 * the caller and the shell, finds the key's shard and locks its metadata
 * (FbfCitusPlacementPrologue); the shard table is then applied to by
 * FbfCounterApply, with its privileges and row security.  Arguments and
 * results as FbfCounterApply's.
 */
void
FbfCitusApplyOnPlacement(Oid shell, FbfOps *ops, bool *applied, int64 *value)
{
	Oid			shard = FbfCitusPlacementPrologue(shell, FBF_COUNTER_INCREMENT,
												  PointerGetDatum(ops->key),
												  TEXTOID);

	FbfCounterApply(shard, ops, applied, value);
}

/*
 * fbf_apply_on_placement(counter regclass, key text, client_ids bigint[]
 * | text[] | uuid[], seqs bigint[], deltas bigint[], want_value boolean,
 * OUT applied boolean[], OUT value bigint): the routed half of an
 * increment on a distributed counter (citus_apply).  `counter` is the
 * shell; operation i is (client_ids[i], seqs[i]) adding deltas[i] to
 * `key`, as idempotent_increment takes a batch, and applied[i] says
 * whether it was new.  Hashes the operations here, as the front door does,
 * and applies them on the key's shard, which must be placed on this node,
 * as idempotent_increment on the shard table would: with its privileges
 * and row security (the file's header says why anyone may call it).
 * `tag` is the client ids' type.
 */
static Datum
apply_on_placement(FunctionCallInfo fcinfo, char tag)
{
	const char *fname = "fbf_apply_on_placement";
	static const char *const names[] = {"counter", "key", "client_ids",
	"seqs", "deltas", "want_value"};
	Oid			shell;
	text	   *key;
	FbfOps	   *ops;
	bool		want_value;
	bool	   *applied;
	int64		value = 0;
	TupleDesc	desc;
	Datum		out[2];
	bool		out_null[2] = {false, false};
	int			i;

	for (i = 0; i < (int) lengthof(names); i++)
		FbfRequireArg(fcinfo, i, fname, names[i]);
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "fbf: fbf_apply_on_placement must return a record");
	PreventCommandIfReadOnly("idempotent_increment()");
	PreventCommandDuringRecovery("idempotent_increment()");

	shell = PG_GETARG_OID(0);
	key = PG_GETARG_TEXT_PP(1);
	want_value = PG_GETARG_BOOL(5);
	ops = FbfOpsFromArrays(fcinfo, tag, key, 2, fname);

	applied = palloc(sizeof(bool) * Max(ops->n, 1));
	FbfCitusApplyOnPlacement(shell, ops, applied, want_value ? &value : NULL);

	out[0] = PointerGetDatum(FbfAnswersArray(applied, ops->n));
	out[1] = Int64GetDatum(value);
	out_null[1] = !want_value;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc),
													  out, out_null)));
}

FBF_CLIENT_ID_FUNCTIONS(fbf_apply_on_placement,
						apply_on_placement(fcinfo, tag));
