/*-------------------------------------------------------------------------
 *
 * counter_args.h
 *	  The argument check the counters' and dedup tables' SQL functions
 *	  share: an argument that must not be NULL.  Nothing else, no state.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_COUNTER_ARGS_H
#define FBF_COUNTER_ARGS_H

#include "postgres.h"

#include "fmgr.h"

/*
 * Error (22004) if argument `argno`, called `name`, of the SQL function
 * `fname` is NULL: "name of fname must not be null".
 */
static inline void
FbfRequireArg(FunctionCallInfo fcinfo, int argno, const char *fname,
			  const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s of %s must not be null", name, fname)));
}

#endif							/* FBF_COUNTER_ARGS_H */
