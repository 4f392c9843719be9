/*-------------------------------------------------------------------------
 *
 * citus.h
 *	  Tables distributed by Citus: what the citus folder's files share, and
 *	  what _PG_init calls.  Vocabulary, locks and layers in
 *	  src/citus/README.md.
 *
 * Declarations by file, from the bottom layer up: the placement's side
 * (citus_placement.c), routing a call (citus_route.c), then the files no
 * other calls: claims (citus_dedup.c), the fast path
 * (citus_plan.c), shard transfers (citus_transfer.c).  A file calls only
 * the files above its own heading and itself.  The counters' engine never
 * calls this folder by name: it reaches it through the route registered
 * at init (FbfCounterSetRoute, FbfDedupSetRoute: counter/counter.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_CITUS_H
#define FBF_CITUS_H

#include "postgres.h"

#include "utils/array.h"
#include "utils/relcache.h"

#include "counter/counter.h"

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
 * citus_plan.c: the fast path
 * ----------------------------------------------------------------------
 */
extern void FbfCitusPlanInit(void);

/* ----------------------------------------------------------------------
 * citus_transfer.c: windows through shard moves and splits
 * ----------------------------------------------------------------------
 */
extern void FbfCitusTransferInit(void);

#endif							/* FBF_CITUS_H */
