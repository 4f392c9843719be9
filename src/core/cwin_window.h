/*-------------------------------------------------------------------------
 *
 * cwin_window.h
 *	  A cuckoo window in memory: partitions of cwin_block.h blocks, the
 *	  live epochs, refreshes and growth by splitting.  The model the
 *	  property tests, benchmarks and paper figures run; a counter's cuckoo
 *	  window keeps the same blocks in its partition pages (src/window).
 *	  Planning a window for a workload is cwin_plan.h's.
 *
 * An operation's partition is fbf_part(hash, nparts), as in the FBF
 * window, so its lookup reads one block.  An operation whose block has
 * no room (cwin_block_insert fails) is never dropped: it waits in a
 * deferred list, which lookups also read, and is stored by the next
 * refresh or split that makes room, as a counter's pending chain keeps
 * entries a drain put off.  A window grows by splitting every block in
 * `factor` (cwin_block_split): the automatic rule
 * (cwin_window_wants_split) splits by 2 when an insert failed or the
 * fullest block's live load passes CWIN_SPLIT_LOAD.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CWIN_WINDOW_H
#define CWIN_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cwin_block.h"
/* the live load of a window's fullest block that calls for a split */
#define CWIN_SPLIT_LOAD		0.96

/* bytes of a block in a page of 8 kB (FBF_PAGE_CONTENT_BYTES) */
#define CWIN_PAGE_SPACE		8144

typedef struct CwinWindow
{
	CwinLayout	layout;
	uint32_t	nparts;
	CwinEpochs	epochs;
	size_t		block_size;
	uint8_t    *blocks;			/* nparts * block_size */
	FbfHash    *deferred;		/* operations waiting for room */
	size_t		ndeferred;
	size_t		deferred_cap;
	uint64_t	failed_inserts; /* inserts that had to wait, so far */
	uint64_t	splits;
	uint64_t	copies;			/* entries copied to more than one child */
} CwinWindow;

extern bool cwin_window_init(CwinWindow *w, uint32_t fp_bits, uint32_t nparts,
							 int nlive, size_t space, const char **why);
extern void cwin_window_free(CwinWindow *w);

static inline uint8_t *
cwin_window_block(const CwinWindow *w, uint32_t p)
{
	return w->blocks + (size_t) p * w->block_size;
}

/* Is the operation in the window (a live entry, or waiting)? */
extern bool cwin_window_contains(const CwinWindow *w, const FbfHash *hash);

/* Store an operation (without looking it up first). */
extern void cwin_window_insert(CwinWindow *w, const FbfHash *hash);

/* Look up, store if absent: true if it was new. */
extern bool cwin_window_add(CwinWindow *w, const FbfHash *hash);

/* One refresh: a new epoch; the oldest live epoch's entries expire. */
extern void cwin_window_refresh(CwinWindow *w);

/* Split every block in `factor` (a power of two). */
extern bool cwin_window_split(CwinWindow *w, uint32_t factor, const char **why);

/* Does the automatic rule call for a split? */
extern bool cwin_window_wants_split(const CwinWindow *w);

/* Live entries, and the fullest block's live load. */
extern uint64_t cwin_window_live(const CwinWindow *w);
extern double cwin_window_max_load(const CwinWindow *w);

/* Estimated false-positive rate of a lookup now (mean over blocks). */
extern double cwin_window_estimate_fpp(const CwinWindow *w);

#endif							/* CWIN_WINDOW_H */
