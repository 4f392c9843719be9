/*-------------------------------------------------------------------------
 *
 * cwin_snap.h
 *	  A cuckoo window's snapshot: the second kind of `fbf` value.  Its flat
 *	  in-memory form, lookups and measures on it, and its portable form
 *	  (format version 2 of docs/fbf-format.md), with strict validation.
 *
 * A snapshot holds what a cuckoo window (cwin_window.h; a counter's
 * filter => 'cuckoo', src/window/window_cuckoo.c) remembers at one
 * moment: the block layout, the live epochs with each one's key
 * partitions (CwinEpochs), every partition's block byte for byte, the
 * operations still waiting to be stored (committed pending entries, as
 * CwinWindow.deferred), and, as a Bloom value's born_at and period, the
 * wall-clock birth time of each live epoch and the refresh period, so a
 * load can align it in time.
 *
 * In memory (the payload of an `fbf` datum, native byte order):
 *
 *		CwinSnap			232 bytes, `layout` = CWIN_SNAP_LAYOUT first
 *		blocks				nparts * cwin_block_size(layout), partition 0
 *							first, each as cwin_block.h lays it out
 *		deferred			ndeferred FbfHash, ascending by (h1, h2), no
 *							two equal
 *
 * The first field tells it from an in-memory Fbf (FBF_LAYOUT_SLICED) and
 * from the flat Fbf of fbf 1.0 and 1.1 (whose first field, nbits, is at
 * most 2^30).
 *
 * The portable form has the same fields in the same order, little-endian,
 * the first 8 bytes being magic "FBF\0", version 2, kind 1, f and nlive
 * (see cwin_snap.c); its length equals the in-memory size.  Format
 * version 1 (fbf_codec.h) is unchanged: Bloom values are still written as
 * version 1, and a build that knows only version 1 rejects a snapshot of
 * a cuckoo window ("version not supported") instead of misreading it.
 *
 * Decoding is in two steps: cwin_snap_validate checks every header and
 * shape field and the exact length before the caller allocates anything
 * (the in-memory size is the input's length), cwin_snap_deserialize
 * copies, and cwin_snap_check then checks the contents (canonical blocks,
 * tags no younger than the epoch, sorted waiting operations).
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CWIN_SNAP_H
#define CWIN_SNAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cwin_block.h"
#include "cwin_window.h"
#include "fbf_hash.h"

/* the first field of an in-memory snapshot: never a valid nbits */
#define CWIN_SNAP_LAYOUT			UINT32_C(0xFBF5C001)

/* the portable form's version byte, and its kind byte */
#define CWIN_SNAP_FORMAT_VERSION	2
#define CWIN_SNAP_KIND_CUCKOO		1

#define CWIN_SNAP_HEADER_BYTES		232

typedef struct CwinSnap
{
	uint32_t	layout;			/* CWIN_SNAP_LAYOUT */
	uint32_t	fp_bits;		/* f, 12 .. 27 */
	uint32_t	nbuckets;		/* per block, 2 .. 65536 */
	uint32_t	nparts;			/* blocks, 1 .. 2^20 */
	uint32_t	nlive;			/* live epochs, 2 .. 16 */
	uint32_t	ndeferred;		/* operations waiting */
	int64_t		epoch;			/* the current epoch, nlive - 1 .. 2^62 */
	int64_t		period;			/* microseconds, >= 0; 0 = none */
	uint32_t	parts[CWIN_MAX_LIVE];	/* key partitions by age; 0 past
										 * nlive */
	int64_t		born_at[CWIN_MAX_LIVE]; /* wall clock by age (0: unknown);
										 * 0 past nlive */
} CwinSnap;

/* ---- shape ---- */

/*
 * The layout of blocks of `nbuckets` buckets of f-bit fingerprints; false
 * (and *why) if no block has that shape.
 */
extern bool cwin_snap_layout(uint32_t fp_bits, uint32_t nbuckets,
							 CwinLayout *layout, const char **why);

/* bytes of a snapshot of this shape, in memory and serialized alike */
extern size_t cwin_snap_size(const CwinLayout *layout, uint32_t nparts,
							 size_t ndeferred);

/*
 * Fill in the header of a snapshot of this shape (epochs, times and
 * contents are the caller's to set: blocks and deferred are zeroed).
 * `s` has cwin_snap_size() bytes.
 */
extern void cwin_snap_init(CwinSnap *s, const CwinLayout *layout,
						   uint32_t nparts, size_t ndeferred);

static inline size_t
cwin_snap_block_size(const CwinSnap *s)
{
	CwinLayout	layout;
	const char *why;

	cwin_snap_layout(s->fp_bits, s->nbuckets, &layout, &why);
	return cwin_block_size(&layout);
}

static inline uint8_t *
cwin_snap_block(const CwinSnap *s, uint32_t p)
{
	return (uint8_t *) s + CWIN_SNAP_HEADER_BYTES +
		(size_t) p * cwin_snap_block_size(s);
}

static inline FbfHash *
cwin_snap_deferred(const CwinSnap *s)
{
	return (FbfHash *) cwin_snap_block(s, s->nparts);
}

/* the live epochs of the snapshot */
extern void cwin_snap_epochs(const CwinSnap *s, CwinEpochs *epochs);

/*
 * A read-only CwinWindow over the snapshot's memory (no copy; never pass
 * it to a function that frees or grows a window).
 */
extern void cwin_snap_view(const CwinSnap *s, CwinWindow *w);

/* Sort hashes by (h1, h2) and drop repeats; returns how many are left. */
extern size_t cwin_hashes_sort_unique(FbfHash *hashes, size_t n);

/* ---- reading ---- */

/* Is the operation live in its block, or waiting? */
extern bool cwin_snap_contains(const CwinSnap *s, const FbfHash *hash);

/*
 * Live entries of each live epoch over all blocks (counts[i], i < nlive,
 * by age), from the blocks' per-tag counts.
 */
extern void cwin_snap_counts(const CwinSnap *s, uint64_t *counts);

/* estimated false-positive rate of a lookup (cwin_window_estimate_fpp) */
extern double cwin_snap_estimate_fpp(const CwinSnap *s);

/* ---- the portable form ---- */

/* does the serialized value (len bytes) claim to be a cuckoo snapshot? */
extern bool cwin_snap_is_serialized(const unsigned char *buf, size_t len);

extern size_t cwin_snap_serialized_size(const CwinSnap *s);
extern void cwin_snap_serialize(const CwinSnap *s, unsigned char *out);

/*
 * Check the header, the shape and the length of a serialized snapshot of
 * len bytes; *size gets the bytes its in-memory form needs (len itself).
 * false and *why, a sentence fit for errdetail, if malformed.
 */
extern bool cwin_snap_validate(const unsigned char *buf, size_t len,
							   size_t *size, const char **why);

/* copy a buffer that cwin_snap_validate accepted into s (*size bytes) */
extern void cwin_snap_deserialize(const unsigned char *buf, size_t len,
								  CwinSnap *s);

/*
 * Check the header of an in-memory snapshot of len bytes: the layout tag,
 * the header's rules (those cwin_snap_validate applies to the portable
 * form) and len being exactly cwin_snap_size() of its shape.  O(1); reads
 * nothing past len.  The reading functions above and cwin_snap_serialize
 * read a snapshot it accepts within its len bytes, whatever its blocks
 * and waiting operations hold (cwin_snap_check checks those).  false and
 * *why if not.
 */
extern bool cwin_snap_check_header(const void *mem, size_t len,
								   const char **why);

/*
 * Check a whole in-memory snapshot: the header's rules, then every block
 * (cwin_block_check, its base no later than the epoch, no entry of an
 * epoch after it) and the waiting operations (strictly ascending).
 */
extern bool cwin_snap_check(const CwinSnap *s, const char **why);

#endif							/* CWIN_SNAP_H */
