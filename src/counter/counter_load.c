/*-------------------------------------------------------------------------
 *
 * counter_load.c
 *	  fbf_counter_load(): loading a snapshot into a live counter's window,
 *	  the one C function of keeping a counter's memory across dump and
 *	  restore, and moves.
 *
 * The rest of the feature is SQL (sql/fbf.sql): fbf_counter_save(), which
 * returns fbf_snapshot() of the caller's counters for a table of its own
 * that pg_dump carries, and fbf_counter_restore(t), which loads every row
 * of such a table into its counter with this function.  docs/user-guide.md,
 * "Dump, restore and moving a counter", says why restoring is a command of
 * its own and not automatic, and why the table is the user's.
 *
 * Locks: the counter table with RowExclusiveLock, as a resize takes it
 * (increments proceed; the window's metapage lock, held exclusively for
 * the whole load, makes them wait: window_load.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "counter/counter.h"
#include "type/fbf_value.h"
#include "window/window.h"

PG_FUNCTION_INFO_V1(fbf_counter_load);

/*
 * fbf_counter_load(counter regclass, snapshot fbf): merge a snapshot, as
 * fbf_snapshot() returns it, into the counter's window (FbfWindowLoad, which
 * hands it to the window's format: merged or adopted, or refused).
 * The owner's privilege, as for fbf_counter_resize: a load makes the
 * counter dismiss operations.  Returns 'adopted' (an empty window took the
 * snapshot's shape and ring), 'merged', or 'expired' (every filter of the
 * snapshot had aged out: nothing was loaded).
 */
Datum
fbf_counter_load(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	struct varlena *snapshot;
	Relation	heap;
	Relation	index;
	FbfValueKey key;
	bool		public_too;
	FbfLoadResult r;

	PreventCommandIfReadOnly("fbf_counter_load()");
	PreventCommandDuringRecovery("fbf_counter_load()");
	FbfCounterOpen(relid, FBF_COUNTER_OWNER, RowExclusiveLock, &heap, &index);
	/* what is stored in the counter's pages is checked whole first */
	snapshot = FbfArgValue(fcinfo, 1, false);
	FbfValueCheckContents(snapshot);
	if (!FbfValueGetKey(snapshot, &key))
		memset(&key, 0, sizeof(key));
	public_too = (key.flags & FBF_VALUE_KEY_PUBLIC_TOO) != 0;
	r = FbfWindowLoad(index, snapshot, &key.key, public_too);
	FbfCounterClose(heap, index);
	PG_RETURN_TEXT_P(cstring_to_text(r.adopted ? "adopted" :
									 r.filters > 0 ? "merged" : "expired"));
}
