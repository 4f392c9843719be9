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

/* counter_maintain.c */
extern void FbfCounterMaintainInit(void);
extern FbfAimdDecision FbfCounterMaintain(Relation heap, Relation index);

#endif							/* FBF_COUNTER_H */
