/*-------------------------------------------------------------------------
 *
 * citus_shards.c
 *	  Tables distributed by Citus: the shard that holds a routing value, as
 *	  Citus routes it, from a map of the table's shards that this backend
 *	  reads from Citus' catalogs and keeps (FbfCitusShardFind); and, for
 *	  the folder's other readers, a table's row in pg_dist_partition
 *	  (FbfCitusPartitionRow) and the columns of Citus' catalogs by name
 *	  (FbfCitusCatalogAttnum).
 *
 * Every write through a shell finds its routing value's shard on two
 * nodes: on the one that routes it, where the fast path's statement that
 * commits on its own locks the shard's metadata (FbfCitusLockRoutingValue),
 * and on the placement's, in the placement prologue (citus_placement.c).
 * Citus' SQL function for it, get_shard_id_for_distribution_column, prints
 * the value as text and reads it back as the column's type, and checks
 * Citus' version and the caller's privileges, on every call: some 3 us a
 * call, on each node, of a claim that costs a plain INSERT's 30 or so more
 * on each.  The map gives the same answer by Citus' own rule
 * (FindShardInterval, shardinterval_utils.c): the value hashed by its
 * type's default hash function (the type cache's hash_proc) under the
 * distribution column's collation, then the shard whose range
 * [shardminvalue, shardmaxvalue] holds the hash, by a binary search of the
 * ranges sorted.  (Citus computes the index directly when the ranges are
 * uniform, HasUniformHashDistribution; uniform ranges partition the hash
 * space in the same order, so the search finds the same shard.)
 *
 * Where the map cannot answer as Citus would, it declines and the caller
 * asks Citus: a table not hash-distributed, a value of another type than
 * the column's (which Citus converts through text), a shard without a
 * range, ranges that overlap, a hash in no range (which Citus reports as
 * an error of its own).
 *
 * The map of a table is read from pg_dist_partition and pg_dist_shard as
 * catalogs, as Citus builds its cache entry of the table, and kept until
 * an invalidation of the table or of all relations: Citus' triggers on
 * pg_dist_partition and pg_dist_shard invalidate the distributed table's
 * relation cache entry on every change of its distribution or its shards,
 * and Citus drops its own entry at those invalidations and no other
 * (citus_placement.c's kept shards, which forward them here through
 * FbfCitusShardsForget, say which).  Each look-up first accepts the
 * invalidations that have arrived, as Citus' look-up of its entry does
 * (LookupCitusTableCacheEntry), so that a split committed since the
 * caller's transaction last took a new lock is seen.  A map is kept only
 * if no invalidation was processed while it was read; past SHARD_MAPS_MAX
 * tables, all are forgotten and read again.  The placement prologue's
 * check after it has taken the shard's lock (a split that committed while
 * it waited) reads the map again whenever an invalidation arrived, as it
 * asked Citus again before.
 *
 * Citus' function also checked Citus' version and that the caller may
 * SELECT from the table; the map's callers have checked the privilege the
 * call itself needs (UPDATE on a counter, INSERT on a dedup table:
 * FbfCounterOpenRoutable), which is all a call on the shard table needs.
 *
 * Nothing here links to Citus.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/pg_namespace_d.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/primnodes.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/typcache.h"

#include "citus/citus.h"
#include "common/fbf_htab.h"

/* at most this many tables' maps are kept (each some 16 bytes a shard) */
#define SHARD_MAPS_MAX		256

/* one shard: the hash range it holds */
typedef struct ShardRange
{
	int32		min;
	int32		max;
	int64		shardid;
} ShardRange;

/*
 * A distributed table's map.  One that cannot route (`routes` false: not
 * hash-distributed, a shard without a range, ranges that overlap) is kept
 * too, so that its calls go to Citus without reading the catalogs again.
 */
typedef struct ShardMap
{
	Oid			shell;			/* hash key: the distributed table */
	bool		routes;			/* false: it declines every value */
	Oid			type;			/* the distribution column's type */
	Oid			collation;		/* and its collation */
	FmgrInfo	hash;			/* the type's default hash function */
	int			nshards;
	ShardRange *shards;			/* sorted by min; the ranges disjoint */
	MemoryContext cxt;			/* the map's memory */
} ShardMap;

static HTAB *shard_maps = NULL;
static uint64 maps_invalidations = 0;	/* invalidations forwarded */

/* forget every map (the tables' memory with them) or `relid`'s */
void
FbfCitusShardsForget(Oid relid)
{
	HASH_SEQ_STATUS status;
	ShardMap   *map;

	maps_invalidations++;
	if (shard_maps == NULL)
		return;
	hash_seq_init(&status, shard_maps);
	while ((map = hash_seq_search(&status)) != NULL)
	{
		if (OidIsValid(relid) && map->shell != relid)
			continue;
		MemoryContextDelete(map->cxt);
		(void) hash_search(shard_maps, &map->shell, HASH_REMOVE, NULL);
	}
}

/* the number of column `name` of the Citus catalog `catalog`, or error */
AttrNumber
FbfCitusCatalogAttnum(Oid catalog, const char *name)
{
	AttrNumber	attno = get_attnum(catalog, name);

	if (attno == InvalidAttrNumber)
		elog(ERROR, "fbf: %s lacks the column %s of Citus' metadata",
			 get_rel_name(catalog), name);
	return attno;
}

/*
 * Begin a scan of the rows of `relid` in the Citus catalog `catalog`,
 * through its index `index` on logicalrelid (its heap, should the index be
 * missing or system indexes be ignored), the catalog opened in *rel: the
 * one way this file reads a table's rows of Citus' metadata.  End it with
 * systable_endscan and table_close(*rel, AccessShareLock).
 */
static SysScanDesc
begin_relid_scan(Oid catalog, const char *index, Oid relid, Relation *rel)
{
	Oid			by_relid = get_relname_relid(index, PG_CATALOG_NAMESPACE);
	ScanKeyData skey;

	ScanKeyInit(&skey, FbfCitusCatalogAttnum(catalog, "logicalrelid"),
				BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
	*rel = table_open(catalog, AccessShareLock);
	return systable_beginscan(*rel, by_relid, OidIsValid(by_relid), NULL, 1, &skey);
}

/* an int4 printed by Citus as a shard's bound, or false */
static bool
parse_bound(Datum printed, int32 *bound)
{
	char	   *s = TextDatumGetCString(printed);
	char	   *end;
	long		v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < PG_INT32_MIN || v > PG_INT32_MAX)
		return false;
	*bound = (int32) v;
	return true;
}

static int
shard_range_cmp(const void *a, const void *b)
{
	int32		x = ((const ShardRange *) a)->min;
	int32		y = ((const ShardRange *) b)->min;

	return (x > y) - (x < y);
}

/*
 * `relid`'s row in Citus' pg_dist_partition (begin_relid_scan): true if
 * it has one, with its distribution method (partmethod), its replication
 * model (repmodel) and, in *column, its distribution column (partkey) if
 * that is a column (NULL for a table without one).  The relation cache
 * asks it how a table is distributed (citus_route.c), and the shard map
 * how to hash a value.
 */
bool
FbfCitusPartitionRow(Oid relid, char *method, char *model, Var **column)
{
	Oid			catalog = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
	AttrNumber	a_method;
	AttrNumber	a_model;
	AttrNumber	a_key;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		found = false;

	*method = '\0';
	*model = '\0';
	*column = NULL;
	if (!OidIsValid(catalog))
		return false;			/* no Citus in this database */
	a_method = FbfCitusCatalogAttnum(catalog, "partmethod");
	a_model = FbfCitusCatalogAttnum(catalog, "repmodel");
	a_key = FbfCitusCatalogAttnum(catalog, "partkey");

	scan = begin_relid_scan(catalog, "pg_dist_partition_logical_relid_index",
							relid, &rel);
	if (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		TupleDesc	desc = RelationGetDescr(rel);
		bool		isnull;
		Datum		partkey;

		found = true;
		*method = DatumGetChar(heap_getattr(tuple, a_method, desc, &isnull));
		*model = DatumGetChar(heap_getattr(tuple, a_model, desc, &isnull));
		partkey = heap_getattr(tuple, a_key, desc, &isnull);
		if (!isnull)
		{
			Node	   *node = stringToNode(TextDatumGetCString(partkey));

			if (node != NULL && IsA(node, Var))
				*column = (Var *) node;
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * Read `map->shell`'s distribution: true, with the column's type,
 * collation and hash function set, if it is hash-distributed by a column
 * whose type has a default hash function.
 */
static bool
read_distribution(ShardMap *map)
{
	char		method;
	char		model;
	Var		   *column;
	TypeCacheEntry *type;

	if (!FbfCitusPartitionRow(map->shell, &method, &model, &column) ||
		method != 'h' || column == NULL)
		return false;
	type = lookup_type_cache(column->vartype, TYPECACHE_HASH_PROC_FINFO);
	if (!OidIsValid(type->hash_proc_finfo.fn_oid))
		return false;
	fmgr_info_copy(&map->hash, &type->hash_proc_finfo, map->cxt);
	map->type = column->vartype;
	map->collation = column->varcollid;
	return true;
}

/*
 * Read `map->shell`'s shards from pg_dist_shard (begin_relid_scan):
 * true, with map->shards sorted, if every shard has a range and no two
 * ranges overlap.
 */
static bool
read_shards(Oid catalog, ShardMap *map)
{
	AttrNumber	a_shard = FbfCitusCatalogAttnum(catalog, "shardid");
	AttrNumber	a_min = FbfCitusCatalogAttnum(catalog, "shardminvalue");
	AttrNumber	a_max = FbfCitusCatalogAttnum(catalog, "shardmaxvalue");
	Relation	rel;
	TupleDesc	desc;
	SysScanDesc scan;
	HeapTuple	tuple;
	int			allocated = 32;
	bool		ranged = true;
	int			i;

	map->shards = MemoryContextAlloc(map->cxt, sizeof(ShardRange) * allocated);
	map->nshards = 0;
	scan = begin_relid_scan(catalog, "pg_dist_shard_logical_relid_index",
							map->shell, &rel);
	desc = RelationGetDescr(rel);
	while (ranged && HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		ShardRange *range;
		bool		min_null;
		bool		max_null;
		bool		isnull;
		Datum		min = heap_getattr(tuple, a_min, desc, &min_null);
		Datum		max = heap_getattr(tuple, a_max, desc, &max_null);

		CHECK_FOR_INTERRUPTS();
		if (map->nshards == allocated)
		{
			allocated *= 2;
			map->shards = repalloc(map->shards, sizeof(ShardRange) * allocated);
		}
		range = &map->shards[map->nshards++];
		range->shardid = DatumGetInt64(heap_getattr(tuple, a_shard, desc, &isnull));
		ranged = !min_null && !max_null &&
			parse_bound(min, &range->min) && parse_bound(max, &range->max) &&
			range->min <= range->max;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	if (!ranged || map->nshards == 0)
		return false;
	qsort(map->shards, map->nshards, sizeof(ShardRange), shard_range_cmp);
	for (i = 1; i < map->nshards; i++)
		if (map->shards[i].min <= map->shards[i - 1].max)
			return false;
	return true;
}

/*
 * Read the map of `shell` from Citus' catalogs into `map` (its memory in a
 * context of its own under the caller's, so that an error frees it).
 */
static void
read_map(Oid shell, ShardMap *map)
{
	Oid			shards = get_relname_relid("pg_dist_shard", PG_CATALOG_NAMESPACE);

	if (!OidIsValid(shards))
		elog(ERROR, "fbf: Citus' metadata lacks pg_dist_shard");
	memset(map, 0, sizeof(ShardMap));
	map->shell = shell;
	map->cxt = AllocSetContextCreate(CurrentMemoryContext, "fbf Citus shard map",
									 ALLOCSET_SMALL_SIZES);
	map->routes = read_distribution(map) && read_shards(shards, map);
}

/*
 * The shard of the distributed table `shell` that holds the routing value
 * `value` of type `type`, as Citus would route it, in *shardid: true, or
 * false if the map declines (see the file's head; then Citus' own
 * function answers).  The caller has registered the relation cache
 * callback that calls FbfCitusShardsForget (citus_placement.c's, which
 * forwards every invalidation here: a relation cache callback is one of
 * ten slots a backend has, which Citus takes five of).
 */
bool
FbfCitusShardFind(Oid shell, Datum value, Oid type, int64 *shardid)
{
	ShardMap   *map = NULL;
	ShardMap	read;
	FmgrInfo	hash_fn;
	uint64		seen;
	bool		found = false;
	int32		hash;
	int			lo;
	int			hi;

	/* what has changed in Citus' metadata is seen, as Citus' look-up sees it */
	AcceptInvalidationMessages();
	if (shard_maps == NULL)
		shard_maps = FbfHashCreate("fbf Citus shard maps", 16, sizeof(Oid),
								   sizeof(ShardMap), CacheMemoryContext);
	else
		map = hash_search(shard_maps, &shell, HASH_FIND, NULL);

	if (map == NULL)
	{
		seen = maps_invalidations;
		read_map(shell, &read);
		if (maps_invalidations == seen)
		{
			/* keep it: nothing that would have dropped it came meanwhile */
			if (hash_get_num_entries(shard_maps) >= SHARD_MAPS_MAX)
				FbfCitusShardsForget(InvalidOid);
			map = hash_search(shard_maps, &shell, HASH_ENTER, NULL);
			*map = read;
			MemoryContextSetParent(map->cxt, CacheMemoryContext);
		}
		else
			map = &read;		/* for this call; freed with the caller's memory */
	}

	if (!map->routes || type != map->type)
		return false;

	/*
	 * The hash function may read catalogs (a collation's first use), and
	 * so process an invalidation that frees a kept map: it is called with
	 * a copy of its entry, and the map is given up if one arrived.
	 */
	hash_fn = map->hash;
	seen = maps_invalidations;
	hash = DatumGetInt32(FunctionCall1Coll(&hash_fn, map->collation, value));
	if (maps_invalidations != seen && map != &read)
		return false;
	lo = 0;
	hi = map->nshards;
	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (hash < map->shards[mid].min)
			hi = mid;
		else if (hash > map->shards[mid].max)
			lo = mid + 1;
		else
		{
			*shardid = map->shards[mid].shardid;
			found = true;
			break;
		}
	}
	return found;
}
