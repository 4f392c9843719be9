/*-------------------------------------------------------------------------
 *
 * citus.h
 *	  Tables distributed by Citus: what the citus folder's files share, and
 *	  what _PG_init calls.  Vocabulary, locks and layers in
 *	  src/citus/README.md.
 *
 * Declarations by file, from the bottom layer up: the shards' maps and
 * Citus' catalogs (citus_shards.c), the placement's side
 * (citus_placement.c), routing a call (citus_route.c), then claims
 * (citus_dedup.c), the fast path's planning (citus_plan.c), shard
 * transfers (citus_transfer.c), and the fast path's executor start
 * (citus_alone.c), which only _PG_init calls.  A file calls only
 * the files above its own heading and itself.  The counters' engine never
 * calls this folder by name: it reaches it through the route registered
 * at init (FbfCounterSetRoute, FbfDedupSetRoute: counter/counter.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_CITUS_H
#define FBF_CITUS_H

#include "postgres.h"

#include "executor/execdesc.h"
#include "nodes/plannodes.h"
#include "nodes/primnodes.h"
#include "utils/array.h"
#include "utils/relcache.h"

#include "counter/counter.h"

/* ----------------------------------------------------------------------
 * citus_shards.c: the shard of a routing value, from a kept map; a
 * table's row in pg_dist_partition; Citus' catalogs' columns by name
 * ----------------------------------------------------------------------
 */
extern bool FbfCitusShardFind(Oid shell, Datum value, Oid type,
							  int64 *shardid);
extern void FbfCitusShardsForget(Oid relid);
extern AttrNumber FbfCitusCatalogAttnum(Oid catalog, const char *name);
extern bool FbfCitusPartitionRow(Oid relid, char *method, char *model,
								 Var **column);

/* ----------------------------------------------------------------------
 * citus_placement.c: the placement prologue, applying on the placement
 * ----------------------------------------------------------------------
 */
extern Oid	FbfCitusPlacementPrologue(Oid shell, FbfCounterAccess access,
									  Datum value, Oid type);
extern void FbfCitusApplyOnPlacement(Oid shell, FbfOps *ops, bool *applied,
									 int64 *value);
extern void FbfCitusLockRoutingValue(Oid table, Oid owner, Datum value,
									 Oid type);

/* ----------------------------------------------------------------------
 * citus_route.c: recognizing a Citus table, the route, the routed statement
 * ----------------------------------------------------------------------
 */
extern void FbfCitusInit(void);
extern Oid	FbfCitusExtensionSchema(void);
extern void FbfCitusRunRouted(Relation shell, const char *what,
							  const char *sent, const char *sql, int nargs,
							  Oid *types, Datum *args, const char *nulls,
							  int n, const int *place, bool *answers,
							  int64 *value);

/* ----------------------------------------------------------------------
 * citus_dedup.c: claims in dedup tables distributed by Citus
 * ----------------------------------------------------------------------
 */
extern void FbfDedupCitusInit(void);

/* ----------------------------------------------------------------------
 * citus_plan.c: the fast path's planning
 * ----------------------------------------------------------------------
 */

/* how a statement is planned again when it starts (FbfCitusPlanAgain) */
typedef enum FbfPlanAgain
{
	FBF_AGAIN_NOT,				/* it is not (the planner hook judges) */
	FBF_AGAIN_ROUTED,			/* as the client's statement */
	FBF_AGAIN_AS_CALL			/* as a statement not the client's */
} FbfPlanAgain;

extern void FbfCitusPlanInit(void);
extern bool FbfCitusFirstOfTransaction(void);
extern bool FbfCitusAloneSettings(void);
extern bool FbfCitusAloneCarried(PlannedStmt *stmt, List **carried);
extern Oid	FbfCitusRoutableCall(FuncExpr *call, Oid *owner);
extern bool FbfCitusRunsAsClients(QueryDesc *queryDesc);
extern PlannedStmt *FbfCitusPlanAgain(QueryDesc *queryDesc, FbfPlanAgain how,
									  List *carried);

/* ----------------------------------------------------------------------
 * citus_transfer.c: windows through shard moves and splits
 * ----------------------------------------------------------------------
 */
extern void FbfCitusTransferInit(void);

/* ----------------------------------------------------------------------
 * citus_alone.c: the fast path's executor start
 * ----------------------------------------------------------------------
 */
extern void FbfCitusAloneInit(void);

#endif							/* FBF_CITUS_H */
