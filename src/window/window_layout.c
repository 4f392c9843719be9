/*-------------------------------------------------------------------------
 *
 * window_layout.c
 *	  The bottom layer of the window: the table of filter-format routines
 *	  (window_format.h), by the metapage's `filter`.
 *
 * Nothing here reads or locks a page.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "window/window_format.h"

/*
 * The routine of each format, by FBF_FILTER_* (FbfFilterRoutineOf).  The
 * routines are const structs of the format files (window_bloom_snap.c,
 * window_cuckoo_snap.c): a reference to one is a table of calls through
 * pointers, not a call up the layers (test/layers.pl).
 */
const FbfFilterRoutine *const fbf_filter_routines[FBF_FILTER_COUNT] = {
	[FBF_FILTER_BLOOM] = &FbfBloomRoutine,
	[FBF_FILTER_CUCKOO] = &FbfCuckooRoutine,
};
