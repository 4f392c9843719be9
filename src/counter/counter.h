/*-------------------------------------------------------------------------
 *
 * counter.h
 *	  Idempotent counters: what the counters' files share, and what the
 *	  background worker calls.  Vocabulary in src/counter/README.md.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_COUNTER_H
#define FBF_COUNTER_H

#include "postgres.h"

#include "storage/lockdefs.h"
#include "utils/acl.h"
#include "utils/relcache.h"

#include "core/fbf_aimd.h"

/* What a caller of FbfCounterOpen is about to do, for the privilege check. */
typedef enum FbfCounterAccess
{
	FBF_COUNTER_READ,			/* SELECT on key, shard, value */
	FBF_COUNTER_INCREMENT,		/* and UPDATE on value */
	FBF_COUNTER_OWNER			/* ownership of the table */
} FbfCounterAccess;

/* counter.c */
extern void FbfCounterInit(void);
extern void FbfCounterOpen(Oid relid, FbfCounterAccess access,
						   LOCKMODE lockmode, Relation *heap, Relation *index);
extern void FbfCounterClose(Relation heap, Relation index);

/* When a counter next needs its maintenance pass (FbfCounterMaintain). */
typedef struct FbfCounterSchedule
{
	bool		busy;			/* operations since the previous pass */
	int64		refresh_in;		/* microseconds until its next refresh */
} FbfCounterSchedule;

/* counter_maintain.c */
extern void FbfCounterMaintainInit(void);
extern void FbfCounterGrow(Relation index);
extern FbfAimdDecision FbfCounterMaintain(Relation heap, Relation index,
										  FbfCounterSchedule *schedule);

#endif							/* FBF_COUNTER_H */
