/*-------------------------------------------------------------------------
 *
 * fbf_shmem.h
 *	  Shared memory of the fbf extension: per-counter statistics and the
 *	  background worker's per-database bookkeeping.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_SHMEM_H
#define FBF_SHMEM_H

#include "postgres.h"

#include "utils/timestamp.h"

typedef struct FbfCounterStatsSnapshot
{
	uint64		applied;
	uint64		dismissed;
	TimestampTz last_maintained;
} FbfCounterStatsSnapshot;

extern void FbfStatsCount(Oid dbid, Oid relid, bool applied);
extern void FbfStatsMaintained(Oid dbid, Oid relid, TimestampTz when);
extern void FbfStatsGet(Oid dbid, Oid relid, FbfCounterStatsSnapshot *out);

/* the launcher's memory of which databases have the extension */
extern bool FbfDatabaseDue(Oid dbid, TimestampTz now);
extern void FbfDatabaseChecked(Oid dbid, bool has_extension, TimestampTz now);

#endif							/* FBF_SHMEM_H */
