/*-------------------------------------------------------------------------
 *
 * fbf.c
 *	  Module entry point of the fbf extension.
 *
 * fbf must be loaded through shared_preload_libraries: the counters keep
 * shared state and a background worker that can only be set up while the
 * postmaster starts.  Loading it any other way (for example by CREATE
 * EXTENSION creating its C functions) fails with a hint, as pg_cron does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "fbf.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("fbf must be loaded via shared_preload_libraries"),
				 errhint("Add fbf to the shared_preload_libraries configuration parameter and restart the server.")));

	MarkGUCPrefixReserved("fbf");
}
