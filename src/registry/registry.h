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
	uint64		mismatched;		/* dismissed, and the delta differed */
	TimestampTz last_maintained;
} FbfCounterStatsSnapshot;

/* set up the shared memory hooks; from _PG_init */
extern void FbfRegistryInit(void);

extern void FbfStatsCount(Oid dbid, Oid relid, uint64 applied,
						  uint64 dismissed, uint64 mismatched);
extern bool FbfStatsMaintained(Oid dbid, Oid relid, TimestampTz when);
extern void FbfStatsGet(Oid dbid, Oid relid, FbfCounterStatsSnapshot *out);

/* the launcher's schedule of maintenance passes, by database */
extern void FbfDatabaseSchedule(Oid dbid, TimestampTz *next_due,
								TimestampTz *last_pass);
extern void FbfDatabasePassStarted(Oid dbid, TimestampTz now, int retry_ms);
extern void FbfDatabasePassDone(Oid dbid, bool has_extension,
								TimestampTz next_due);
extern void FbfDatabaseHasCounters(Oid dbid);

#endif							/* FBF_REGISTRY_H */
