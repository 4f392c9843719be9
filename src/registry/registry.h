/*-------------------------------------------------------------------------
 *
 * registry.h
 *	  What the server knows of its counters, in shared memory: per-counter
 *	  statistics, and which databases have counters (the worker reads it to
 *	  decide where to run maintenance; counter creation and increments
 *	  fill it).
 *
 * A leaf subsystem: it depends on nothing else of fbf, so the window
 * index, the counters and the worker may all report to it.  Its contents
 * are not durable: a restart starts it empty.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_REGISTRY_H
#define FBF_REGISTRY_H

#include "postgres.h"

#include "utils/timestamp.h"

typedef struct FbfCounterStatsSnapshot
{
	uint64		applied;
	uint64		dismissed;
	TimestampTz last_maintained;
} FbfCounterStatsSnapshot;

/* set up the shared memory hooks; from _PG_init */
extern void FbfRegistryInit(void);

extern void FbfStatsCount(Oid dbid, Oid relid, bool applied);
extern void FbfStatsMaintained(Oid dbid, Oid relid, TimestampTz when);
extern void FbfStatsGet(Oid dbid, Oid relid, FbfCounterStatsSnapshot *out);

/* which databases have the extension (and so may have counters) */
extern bool FbfDatabaseDue(Oid dbid, TimestampTz now);
extern void FbfDatabaseChecked(Oid dbid, bool has_extension, TimestampTz now);

#endif							/* FBF_REGISTRY_H */
