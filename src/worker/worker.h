/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The background worker: a launcher, and maintenance passes in each
 *	  database that has counters (worker.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_WORKER_H
#define FBF_WORKER_H

#include "postgres.h"

#include "fmgr.h"

extern void FbfWorkerInit(void);

/* entry points named in BackgroundWorker.bgw_function_name */
extern PGDLLEXPORT void fbf_launcher_main(Datum main_arg);
extern PGDLLEXPORT void fbf_pass_main(Datum main_arg);

#endif							/* FBF_WORKER_H */
