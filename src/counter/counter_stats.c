/*-------------------------------------------------------------------------
 *
 * counter_stats.c
 *	  fbf_local_counter_stats() and fbf_dedup_stats(): one row per counter
 *	  table (dedup table) of this database that the user may read, from
 *	  what its window reports (FbfWindowGetStats) and the registry's statistics
 *	  (applied, dismissed and, for counters, mismatched and who answered:
 *	  exactly or the filter).  The SQL function
 *	  fbf_counter_stats() returns these rows and, on a Citus coordinator,
 *	  those of every distributed counter's shards, read on their nodes
 *	  (sql/fbf.sql); 1.0's SQL declared this C function under that name.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/index.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "counter/counter.h"
#include "registry/registry.h"
#include "window/window.h"

PG_FUNCTION_INFO_V1(fbf_counter_stats);
PG_FUNCTION_INFO_V1(fbf_dedup_stats);

/*
 * Columns of fbf_local_counter_stats() and fbf_dedup_stats() (sql/fbf.sql): the
 * first 18 are both functions', and were 1.0's fbf_counter_stats(); the
 * counters' 19th is `mismatched`; then both have the window's filter and
 * its measures (filter, load, fingerprint_bits); since 1.3 the counters'
 * end with their exact streams (streams, stream_capacity,
 * stream_evictions, exact_answers, filter_answers, dismissals_averted,
 * streams_exact_from), and since 1.5 the dedup tables' too.  A database
 * still on older SQL (before ALTER EXTENSION fbf UPDATE) gets the columns
 * it declares: counters 18 (1.0) or 22 (1.1, 1.2), dedup tables 21
 * (1.1 to 1.4).
 */
#define FBF_WINDOW_STATS_COLS	18
#define FBF_FILTER_STATS_COLS	3
#define FBF_STREAM_STATS_COLS	7
#define FBF_MAX_STATS_COLS \
	(FBF_WINDOW_STATS_COLS + 1 + FBF_FILTER_STATS_COLS + FBF_STREAM_STATS_COLS)

static Interval *
interval_from_usecs(int64 usecs)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = usecs;
	return iv;
}

/*
 * One row per window of `kind` (FBF_WINDOW_*) of this database whose table
 * the user may read.  Other sessions' temporary tables (FbfWindowIndexes)
 * and windows on anything but a plain table are left out without an
 * error: one such object must not hide every other counter from
 * monitoring.
 */
static Datum
window_stats(FunctionCallInfo fcinfo, int kind)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	List	   *counters = NIL;
	ListCell   *lc;

	/* where the filter's columns begin: after `mismatched` for counters */
	int			filter_col = kind == FBF_WINDOW_COUNTER ?
		FBF_WINDOW_STATS_COLS + 1 : FBF_WINDOW_STATS_COLS;
	/* where the streams' columns begin: counters of 1.3's SQL, dedup 1.5's */
	int			stream_col = filter_col + FBF_FILTER_STATS_COLS;
	int			natts;

	InitMaterializedSRF(fcinfo, 0);
	natts = rsinfo->setDesc->natts;
	if (natts != stream_col && natts != stream_col + FBF_STREAM_STATS_COLS &&
		!(kind == FBF_WINDOW_COUNTER && natts == FBF_WINDOW_STATS_COLS))
		elog(ERROR, "fbf: the statistics function is declared with %d columns",
			 natts);

	/* every fbf_filter index's table */
	foreach(lc, FbfWindowIndexes())
	{
		/* dropped since the unlocked catalog scan: skip it */
		Oid			heapoid = IndexGetRelation(lfirst_oid(lc), true);

		/* not a plain table: a materialized view an older version allowed */
		if (OidIsValid(heapoid) && FbfWindowTableUsable(heapoid) &&
			FbfWindowIndexKind(lfirst_oid(lc)) == kind)
			counters = lappend_oid(counters, heapoid);
	}

	foreach(lc, counters)
	{
		Oid			relid = lfirst_oid(lc);
		Relation	heap;
		Relation	index;
		FbfWindowStats ws;
		Datum	   *per_filter;
		Datum		values[FBF_MAX_STATS_COLS];
		bool		nulls[FBF_MAX_STATS_COLS] = {0};
		FbfCounterStatsSnapshot st;
		int			i;

		bool		is_missing = false;

		/*
		 * No access; row security, under which the caller may see only
		 * some keys (a counter's figures are about every key's operations:
		 * one tenant would see another's retries in `dismissed`); or the
		 * table being rebuilt or dropped.
		 */
		if (pg_class_aclcheck_ext(relid, GetUserId(), ACL_SELECT,
								  &is_missing) != ACLCHECK_OK ||
			check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED ||
			!ConditionalLockRelationOid(relid, AccessShareLock))
			continue;
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		{
			UnlockRelationOid(relid, AccessShareLock);
			continue;
		}
		if (FbfCounterOpenRoutable(relid, FBF_WINDOW_READ, AccessShareLock,
								   &heap, &index))
		{
			/* a Citus shell: its shards' windows are the ones in use */
			FbfCounterClose(heap, index);
			UnlockRelationOid(relid, AccessShareLock);
			continue;
		}
		UnlockRelationOid(relid, AccessShareLock);	/* open_counter holds its own */
		FbfWindowGetStats(index, &ws);
		per_filter = palloc(sizeof(Datum) * ws.nfilters);
		for (i = 0; i < ws.nfilters; i++)
			per_filter[i] = Int64GetDatum(i < ws.nlive ? (int64) ws.distinct[i] : 0);
		FbfStatsGet(MyDatabaseId, relid, &st);

		values[0] = ObjectIdGetDatum(relid);
		values[1] = Int32GetDatum(ws.nfilters);
		values[2] = Int32GetDatum(ws.nlive);
		values[3] = IntervalPGetDatum(interval_from_usecs(ws.period));
		values[4] = IntervalPGetDatum(interval_from_usecs(ws.retention));
		values[5] = Int64GetDatum(ws.bits);
		values[6] = Int32GetDatum(ws.nhashes);
		nulls[6] = !ws.has_nhashes;
		values[7] = Int32GetDatum((int32) ws.nparts);
		values[8] = PointerGetDatum(construct_array(per_filter, ws.nfilters, INT8OID,
													8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		values[9] = Float8GetDatum(ws.fpp);
		values[10] = Float8GetDatum(ws.target_fpp);
		values[11] = Int64GetDatum((int64) st.counts.applied);
		values[12] = Int64GetDatum((int64) st.counts.dismissed);
		values[13] = Int64GetDatum((int64) RelationGetNumberOfBlocks(index) * BLCKSZ);
		values[14] = TimestampTzGetDatum(ws.future_born);
		values[15] = Int64GetDatum(ws.resizes);
		values[16] = BoolGetDatum(ws.capped);
		values[17] = Int64GetDatum(ws.pending);
		/* counters' only */
		values[18] = Int64GetDatum((int64) st.counts.mismatched);
		if (natts > FBF_WINDOW_STATS_COLS)
		{
			/* the filter, and the measures its format has (load, fp bits) */
			values[filter_col] = CStringGetTextDatum(ws.filter);
			values[filter_col + 1] = Float8GetDatum(ws.load);
			nulls[filter_col + 1] = !ws.has_load;
			values[filter_col + 2] = Int32GetDatum((int32) ws.fp_bits);
			nulls[filter_col + 2] = !ws.has_fp_bits;
		}
		if (natts > stream_col)
		{
			/* the streams: the window's slots, the registry's answers */
			values[stream_col] = Int64GetDatum(ws.streams);
			values[stream_col + 1] = Int64GetDatum(ws.stream_capacity);
			values[stream_col + 2] = Int64GetDatum(ws.stream_evictions);
			values[stream_col + 3] = Int64GetDatum((int64) st.counts.exact);
			values[stream_col + 4] = Int64GetDatum((int64) st.counts.filter);
			values[stream_col + 5] = Int64GetDatum((int64) st.counts.averted);
			/* NULL: a stream without a slot is proven new already, or none */
			values[stream_col + 6] = TimestampTzGetDatum(ws.streams_exact_from);
			nulls[stream_col + 6] = ws.streams_exact_from == 0;
		}
		FbfCounterClose(heap, index);

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* fbf_local_counter_stats() (1.0: fbf_counter_stats()): the counter tables */
Datum
fbf_counter_stats(PG_FUNCTION_ARGS)
{
	return window_stats(fcinfo, FBF_WINDOW_COUNTER);
}

/* fbf_dedup_stats(): the dedup tables; applied and dismissed count claims */
Datum
fbf_dedup_stats(PG_FUNCTION_ARGS)
{
	return window_stats(fcinfo, FBF_WINDOW_DEDUP);
}
