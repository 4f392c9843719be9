/*-------------------------------------------------------------------------
 *
 * window_format.h
 *	  The filter-format interface of a window: what the window core needs
 *	  of the format of its partition pages (the metapage's `filter`), as
 *	  one routine struct per format, in the spirit of IndexAmRoutine
 *	  (access/amapi.h): declared capabilities, and the operations the core
 *	  calls through pointers.
 *
 *	  format			file(s)
 *	  Bloom				window_bloom.c, window_bloom_snap.c
 *	  cuckoo			window_cuckoo.c, window_cuckoo_snap.c
 *
 * Only those files know a format; the rest of src/window asks the routine
 * of a metapage (FbfFilterRoutineOf, a table lookup) and refuses, itself,
 * what a format does not declare it can do.
 * Each format's routine is one const struct, every member in one place:
 * FbfBloomRoutine in window_bloom_snap.c, FbfCuckooRoutine in
 * window_cuckoo_snap.c, the top file of each format, which calls its page
 * file already, so that every function a routine names is its own or one
 * of a file below it.  The table of routines by format id is a const
 * array in window_layout.c, the bottom layer, initialised statically:
 * test/layers.pl takes a reference to a const routine for what it is, a
 * table of calls through pointers, and not for a call up the layers.
 *
 * Lock order: src/window/README.md, "Lock definitions".  Each operation
 * says which locks its caller holds and which it takes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_WINDOW_FORMAT_H
#define FBF_WINDOW_FORMAT_H

#include "postgres.h"

#include "storage/buf.h"
#include "utils/relcache.h"

#include "window/window.h"
#include "window/window_page.h"
#include "window/window_int.h"

struct FbfSnapshotRead;

typedef struct FbfFilterRoutine
{
	const char *name;			/* the option's value: "bloom", "cuckoo" */
	uint16		page_id;		/* FBF_PAGE_ID_* of its partition pages */

	/* ---- capabilities ---- */
	bool		can_merge;		/* partitions may be merged (shrinking) */
	bool		can_resize;		/* the ring's filters and period may change
								 * (AIMD, fbf_counter_resize) */
	const char *resize_detail;	/* if not: the errdetail of the refusal */
	double		split_load;		/* > 0: a maintenance pass splits only once
								 * the fullest page's live load passes it;
								 * 0: by the arrival rate alone */
	int			store_pages;	/* partition pages one store (one WAL
								 * record) takes, at most
								 * FBF_DRAIN_MAX_PAGES */

	/* ---- a new window ---- */

	/*
	 * Size a new window for the options: set meta's format fields, nparts
	 * (to be rounded to a multiple of the chains by the caller,
	 * FbfWindowPlan), nfilters and period.  nchains: the chains a 1.0
	 * window being upgraded keeps, 0 for a new window.
	 */
	void		(*plan) (Relation index, const FbfWindowOptions *opts,
						 uint32 nchains, FbfWindowMetaPageData *meta);

	/* The partitions were rounded up from `planned`: spread the shape. */
	void		(*spread) (FbfWindowMetaPageData *meta, uint32 planned);

	/* ---- the metapage ---- */

	/* Are the format's fields of a storage version 2 metapage valid? */
	bool		(*validate_meta) (const FbfWindowMetaPageData *meta);

	/*
	 * Do two metapages of a window of this format give its partition pages
	 * the same shape (the format's own fields): a snapshot's check that the
	 * window did not change while it was read (window_read.c).
	 */
	bool		(*same_shape) (const FbfWindowMetaPageData *then,
							   const FbfWindowMetaPageData *now);

	/*
	 * Recompute the format's derived fields of a metapage about to be
	 * written (FbfWindowLogMeta); the caller holds it exclusively.
	 */
	void		(*derive_meta) (FbfWindowMetaPageData *meta);

	/* A refresh rotated the ring (FbfWindowRotate); NULL: nothing to do. */
	void		(*rotate) (FbfWindowMetaPageData *meta);

	/* ---- partition pages ---- */

	/* An empty partition page (aligned, BLCKSZ) of meta's shape. */
	void		(*init_page) (Page page, const FbfWindowMetaPageData *meta);

	/*
	 * Do the partition page's filters hold `hash`?  Reads one page, share.
	 * *lane (if not NULL) is raised to what the page's current filter has
	 * room for this period (FbfLane): full where a drain that may put
	 * entries off would leave one more on its chain, overfull where it
	 * also fills faster than its bits are for.  The caller holds the
	 * metapage.
	 */
	bool		(*contains) (Relation index, const FbfWindowMetaPageData *meta,
							 const FbfHash *hash, FbfLane *lane);

	/*
	 * Store one drain round's committed entries in their partition pages:
	 * entries[i] goes to target[i] (InvalidBlockNumber: not this round),
	 * one of blocks[0 .. nblocks) (sorted); each one stored gets keep[i] =
	 * 0, and keep[] is already 0 for the aborted entries the round drops.
	 * Locks the pages exclusively in block order, and writes the round
	 * (the pending page compacted to the entries kept, and the pages) in
	 * one WAL record, after calling decided(decided_arg, keep) once it
	 * knows what it stores (FbfStoreDecided; it writes nothing else before
	 * that call).  Returns what it left on the chain (FbfStored):
	 * entries a page refused wait for more bits (the window must grow);
	 * with may_defer, entries that would saturate a page may be put off,
	 * for more bits or, where a split would not take them, for the next
	 * period.  The caller holds the metapage (share) and pbuf's chain
	 * exclusively (window_pending.c).
	 */
	FbfStored	(*store) (Relation index, const FbfWindowMetaPageData *meta,
						  Buffer pbuf, const FbfPendingEntry *entries, int n,
						  uint8 *keep, const BlockNumber *target,
						  const BlockNumber *blocks, int nblocks,
						  bool may_defer, FbfStoreDecided decided,
						  void *decided_arg);

	/*
	 * Split partition page src into the `factor` pages dst_start ..
	 * dst_start + factor - 1, or merge `factor` pages src .. into dst_start
	 * (NULL unless can_merge), each written whole.  The caller holds the
	 * metapage exclusively; these lock the pages.
	 */
	void		(*split_page) (Relation index, const FbfWindowMetaPageData *meta,
							   BlockNumber src, BlockNumber dst_start,
							   uint32 factor);
	void		(*merge_pages) (Relation index, const FbfWindowMetaPageData *meta,
								BlockNumber src_start, uint32 factor,
								BlockNumber dst);

	/* ---- measures ---- */

	/*
	 * Element counts of every live filter in every partition of the
	 * readers' view, counts[i * nview + v]; distinct[i] (if not NULL) each
	 * element once; *max_load (if not NULL) the fullest page's live load
	 * over its slots (0 if the format has no such measure).
	 */
	void		(*counts) (Relation index, const FbfWindowMetaPageData *meta,
						   uint64 *counts, uint64 *distinct, double *max_load);
	double		(*estimate_fpp) (const FbfWindowMetaPageData *meta,
								 const uint64 *counts);

	/*
	 * The factor to split by for `rate` (per microsecond; < 0: unknown),
	 * within fbf.max_filter_size (*capped if the cap keeps the window from
	 * what it needs), or 1; the merge factor when the rate fell, or 1
	 * (NULL unless can_merge).
	 */
	uint32		(*split_factor) (const FbfWindowMetaPageData *meta, double rate,
								 double increase_at, bool *capped);
	uint32		(*merge_factor) (const FbfWindowMetaPageData *meta,
								 const uint64 *counts, double rate,
								 double decrease_at);

	/*
	 * What the window can take, the basis of the shares of its capacity
	 * (src/counter/README.md, "Shares"): the partitions it has once grown
	 * as far as `max_pages` pages let it (meta->nparts if it cannot grow),
	 * and the new operations one partition page takes in one period under
	 * the target, with a margin: filled to it period after period, the
	 * window's estimate stays near a third to a half of its target, so
	 * that sharing it never makes it capped.
	 */
	uint32		(*parts_at_cap) (const FbfWindowMetaPageData *meta,
								 uint64 max_pages);
	double		(*page_capacity) (const FbfWindowMetaPageData *meta);

	/* The format's part of fbf_counter_stats (bits, hashes, load...). */
	void		(*stats) (const FbfWindowMetaPageData *meta,
						  const uint64 *counts, FbfWindowStats *stats);

	/* ---- snapshots ---- */

	/*
	 * The window as a snapshot (the core structure of its kind of `fbf`
	 * value) in memory from `mem`, read chain by chain as read->meta
	 * describes it (FbfSnapshotLockChain); NULL, having freed it, if the
	 * metapage changed meanwhile.  *pending: entries still in flight.
	 */
	void	   *(*snapshot) (struct FbfSnapshotRead *read,
							 const FbfSnapshotMemory *mem, uint64 *pending);

	/*
	 * The snapshot `value` holds, if it is one of this format's, else NULL;
	 * and load it into the window (adopt, or merge), refusing a window of
	 * another format, with the streams the value carries (a section of
	 * core/fbf_stream_snap.h, validated; NULL: none, the streams reset).
	 * The caller holds the table RowExclusiveLock.
	 */
	const void *(*snapshot_of) (const struct varlena *value);
	FbfLoadResult (*load) (Relation index, const void *snapshot,
						   const FbfHashKey *key, bool public_too,
						   const unsigned char *streams);
} FbfFilterRoutine;

/* ---- window_bloom_snap.c, window_cuckoo_snap.c: the routines ---- */
extern const FbfFilterRoutine FbfBloomRoutine;
extern const FbfFilterRoutine FbfCuckooRoutine;

/* ---- window_layout.c: the routines, by FBF_FILTER_* ---- */
extern const FbfFilterRoutine *const fbf_filter_routines[FBF_FILTER_COUNT];

/* the routine of a format (filter < FBF_FILTER_COUNT) */
static inline const FbfFilterRoutine *
FbfFilterRoutineFor(uint32 filter)
{
	return fbf_filter_routines[filter];
}

/* the routine of a validated metapage's format */
static inline const FbfFilterRoutine *
FbfFilterRoutineOf(const FbfWindowMetaPageData *meta)
{
	return fbf_filter_routines[meta->filter];
}

/*
 * The partitions the window `meta` has once grown as far as
 * fbf.max_filter_size lets it; meta->nparts: it is at its cap.
 */
static inline uint32
FbfWindowPartsAtCap(const FbfWindowMetaPageData *meta)
{
	return FbfFilterRoutineOf(meta)->parts_at_cap(meta, FbfWindowCapPages());
}

#endif							/* FBF_WINDOW_FORMAT_H */
