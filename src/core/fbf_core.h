/*-------------------------------------------------------------------------
 *
 * fbf_core.h
 *	  The Forgetful Bloom Filter: a sliding window of Bloom filters.
 *
 * An FBF with N past filters is a ring of N + 2 Bloom filters of equal
 * shape (nbits bits, nhashes probes).  In logical order, newest first:
 *
 *		index 0		future
 *		index 1		present
 *		index 2..	past_1 (newest) ... past_N (oldest)
 *
 * insert(e) sets e's bits in future and present only; refresh() recycles the
 * oldest filter as the new, empty future.  An element inserted while filter
 * F was future therefore lives in F and in the filter born one refresh
 * before F, and nowhere else.
 *
 * Bookkeeping of true partners.  Each refresh increments `epoch`; the
 * filter at logical index i became future at epoch (epoch - i).  Filters
 * that hold elements ("live") are always a prefix 0..nlive-1 of the logical
 * order, with consecutive birth epochs, so two logical neighbours among the
 * live filters are always true partners.  Growing the FBF appends unborn
 * (empty) filters at the old end: they are never probed and never pair with
 * a live filter; a refresh recycles them before any live filter is dropped.
 * Shrinking removes filters from the old end, unborn ones first.  The oldest
 * live filter's older partner is gone, so it is checked alone.  This is what
 * keeps "no false negative inside the window" true across resizes.
 *
 * Partitions (blocked layout).  Each filter is nparts blocks of nbits bits.
 * An element belongs to one partition, chosen from its hash, and all its k
 * bits in every filter lie in that partition's block.  With nparts = 1 this
 * is a plain FBF; counters use one partition per database page, so an
 * operation touches one page per filter.  Per-partition element counts are
 * kept, so the false-positive estimate accounts for the blocking exactly:
 * it is the mean of the partitions' estimates.
 *
 * Memory layout.  An Fbf is one flat block, so it can be a varlena payload,
 * a shared-memory chunk or page contents without pointer fixups:
 *
 *		Fbf header							40 bytes, `layout` first
 *		born_at[nfilters]					by physical slot
 *		counts[nfilters][nparts]			by physical slot, then partition
 *		slices[nparts]						one bit-sliced array per partition
 *		slack								8 zero bytes, then zeros up to a
 *											multiple of 8
 *
 * Bit-sliced filters.  The filters of a partition are not stored one after
 * the other: they share one packed slice array (bloom_slice.h) of nbits
 * positions, position w being `stride` bits whose bit j is bit w of the
 * filter in physical slot j.  stride = fbf_stride(nfilters) is nfilters
 * itself (up to 57 filters; 64 above), so the memory is the filters' own
 * bits, nparts * nbits * stride, rounded up to a byte per partition (and
 * for 58 to 63 filters to 64 lanes).  Partitions' arrays follow each other
 * byte-aligned: partition p starts fbf_slice_bytes() * p bytes after
 * fbf_slices(f, 0).
 *
 * So an element's membership in every filter at once is its k positions
 * loaded and ANDed (fbf_membership): k independent loads, however many
 * filters there are.  The result is by physical slot; fbf_lanes_logical
 * rotates it into logical order (logical i is slot (head + i) % nfilters).
 * fbf_insert ORs future's and present's lanes in one go; a refresh clears
 * the recycled slot's lane in every partition; fbf_resize lays the filters
 * out afresh for the new stride.  Per-filter bit arrays (the serialized
 * form, the window's pages) go in and out through fbf_load_bits,
 * fbf_load_lane and fbf_extract_bits (one filter), or fbf_load_blocks and
 * fbf_store_blocks (every filter of a partition, by 8 x 8 bit transposes).
 *
 * The slot of logical index i is (head + i) % nfilters.  Native byte order
 * for the header, birth times and counts; the slice arrays are defined as
 * little-endian bit strings.  The portable form is produced by
 * fbf_serialize() (see docs/fbf-format.md), which keeps the per-filter bit
 * arrays of format version 1.
 *
 * Builds before this layout (fbf 1.0 and 1.1) kept each filter's bit array
 * in memory, and `fbf` datums stored by them in tables still do: the first
 * field, `layout`, tells them apart (their first field, nbits, is at most
 * 2^30), and fbf_codec.h converts them (fbf_legacy_validate,
 * fbf_from_legacy).
 *
 * No PostgreSQL includes: the standalone tests and benchmarks link this.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_CORE_H
#define FBF_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bloom_slice.h"
#include "fbf_hash.h"

/* Limits on the shape.  A membership mask is one uint64, hence 64 filters. */
#define FBF_MIN_FILTERS		3	/* future, present, one past (N = 1) */
#define FBF_MAX_FILTERS		64
#define FBF_MIN_NBITS		64
#define FBF_MAX_NBITS		(UINT32_C(1) << 30) /* 128 MiB per block */
#define FBF_MAX_PARTS		(UINT32_C(1) << 20)
#define FBF_MAX_BYTES		(UINT64_C(256) << 20)	/* whole FBF, flat form
														 * (fbf_flat_size) */
#define FBF_MAX_EPOCH		(INT64_C(1) << 62)	/* refreshes; never reached */

/*
 * Birth time of the filters older than the future one in a new FBF: they
 * can hold nothing the future does not also get, so for drop safety they
 * are as old as can be, on any clock (now - this never overflows for
 * non-negative clocks below 2^62).
 */
#define FBF_BORN_LONG_AGO	(INT64_MIN / 4)

/*
 * Membership-check variants (docs/design.md, "The check variants, and a
 * finding").
 */
typedef enum FbfCheck
{
	FBF_CHECK_SIMPLE,			/* any filter contains e (baseline only) */
	FBF_CHECK_OPTIMIZED,		/* paper's Algorithm 2: future alone, pairs
								 * from (present, past_1) on, oldest alone */
	FBF_CHECK_PAIRED			/* ours: (future AND present), pairs, oldest
								 * alone; answers exactly as OPTIMIZED does,
								 * since future's bits are a subset of
								 * present's (kept so benchmarks show it) */
} FbfCheck;

#define FBF_CHECK_DEFAULT	FBF_CHECK_OPTIMIZED

/*
 * The first field of an in-memory Fbf: never a valid nbits (at most 2^30),
 * which is what the first field of the older per-filter layout holds.
 */
#define FBF_LAYOUT_SLICED	UINT32_C(0xFBF50002)

typedef struct Fbf
{
	uint32_t	layout;			/* FBF_LAYOUT_SLICED */
	uint32_t	nbits;			/* m, bits per filter and partition */
	uint16_t	nhashes;		/* k */
	uint16_t	nfilters;		/* N + 2 */
	uint16_t	nlive;			/* live filters: logical 0..nlive-1 */
	uint16_t	head;			/* physical slot of the future filter */
	uint32_t	nparts;			/* partitions (blocks) per filter, >= 1 */
	uint32_t	stride;			/* bits per slice position:
								 * fbf_stride(nfilters) */
	int64_t		epoch;			/* refreshes so far; birth epoch of future */
	int64_t		period;			/* intended refresh period, caller's unit; 0
								 * if refreshed by hand */
	int64_t		born_at[];		/* by slot: caller's clock when the filter
								 * became future; 0 if unborn or unknown.
								 * counts and slices follow. */
} Fbf;

/* ---- shape and memory ---- */

/*
 * Check a shape; on failure return false and point *why at a sentence
 * fit for errdetail.  The size limit applies to the flat form
 * (fbf_flat_size), so every shape format version 1 ever accepted still is.
 */
extern bool fbf_shape_valid(uint64_t nbits, int64_t nhashes, int64_t nfilters,
							int64_t nparts, const char **why);

/* bytes needed for an Fbf of this (valid) shape */
extern size_t fbf_size(uint32_t nbits, int nfilters, uint32_t nparts);

/*
 * Bytes of the flat form of a shape: a 32-byte header, birth times, counts
 * and one bit array of fbf_nwords(nbits) 64-bit words per filter and
 * partition.  It is what fbf 1.0 and 1.1 kept in memory and in stored
 * datums, the serialized size less 8 bytes of header, and the measure of
 * FBF_MAX_BYTES and of fbf_plan.  An Fbf is never larger but by the byte
 * rounding of its slice arrays, or by 64/58 with 58 to 63 filters.
 */
extern size_t fbf_flat_size(uint32_t nbits, int nfilters, uint32_t nparts);

/* initialise f (fbf_size() bytes) as an empty FBF, all filters live */
extern void fbf_init(Fbf *f, uint32_t nbits, int nhashes, int nfilters,
					 uint32_t nparts, int64_t period, int64_t now);

static inline int
fbf_slot(const Fbf *f, int logical)
{
	return (f->head + logical) % f->nfilters;
}

/* 64-bit words of a per-filter bit array of nbits bits (serialized form) */
static inline uint32_t
fbf_nwords(uint32_t nbits)
{
	return (nbits + 63) / 64;
}

/* bits per slice position for nfilters filters */
static inline int
fbf_stride(int nfilters)
{
	return bloom_packed_stride(nfilters);
}

/* the n low bits: one per filter */
static inline uint64_t
fbf_lane_mask(int n)
{
	return n >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << n) - 1;
}

static inline uint64_t *
fbf_counts_base(const Fbf *f)
{
	return (uint64_t *) &f->born_at[f->nfilters];
}

/* bytes of one partition's slice array */
static inline uint64_t
fbf_slice_bytes(const Fbf *f)
{
	return bloom_packed_bytes(f->nbits, (int) f->stride);
}

/* partition p's slice array (bloom_packed_* with stride f->stride) */
static inline unsigned char *
fbf_slices(const Fbf *f, uint32_t part)
{
	return (unsigned char *) (fbf_counts_base(f) + (size_t) f->nfilters * f->nparts) +
		(size_t) part * fbf_slice_bytes(f);
}

/*
 * Lanes by physical slot (bit j: slot j) into logical order (bit i: logical
 * filter i), and back.  Bits at and above nfilters must be clear.
 */
static inline uint64_t
fbf_lanes_logical(const Fbf *f, uint64_t physical)
{
	int			n = f->nfilters;
	int			h = f->head;

	if (h == 0)
		return physical;
	return ((physical >> h) | (physical << (n - h))) & fbf_lane_mask(n);
}

static inline uint64_t
fbf_lanes_physical(const Fbf *f, uint64_t logical)
{
	int			n = f->nfilters;
	int			h = f->head;

	if (h == 0)
		return logical;
	return ((logical << h) | (logical >> (n - h))) & fbf_lane_mask(n);
}

/*
 * OR a plain bit array of nbits bits (fbf_nwords(nbits) native words, bit j
 * in bit j % 64 of word j / 64; bits past nbits must be clear) into logical
 * filter i's bits of partition p.
 */
extern void fbf_load_bits(Fbf *f, int logical, uint32_t part,
						  const uint64_t *plain);

/*
 * OR lane `lane` of an aligned slice array (bloom_slice.h: f->nbits native
 * words of `width` bytes) into logical filter i's bits of partition p.
 */
extern void fbf_load_lane(Fbf *f, int logical, uint32_t part,
						  const void *slice, int width, int lane);

/*
 * Every filter's block of partition p at once, as bytes: blocks[i] is
 * logical filter i's block, bit j in bit j % 8 of byte j / 8 (the bytes of
 * little-endian 64-bit words: the serialized form).  fbf_load_blocks ORs
 * ceil(nbits / 8) bytes of each in (a NULL block is empty; bits past nbits
 * are ignored); fbf_store_blocks writes fbf_nwords(nbits) * 8 bytes of each.
 * Eight positions per step through 8 x 8 bit transposes, where the
 * per-filter functions below go bit by bit.
 */
extern void fbf_load_blocks(Fbf *f, uint32_t part,
							const unsigned char *const *blocks);
extern void fbf_store_blocks(const Fbf *f, uint32_t part,
							 unsigned char *const *blocks);

/* logical filter i's bits of partition p as a plain bit array (overwritten) */
extern void fbf_extract_bits(const Fbf *f, int logical, uint32_t part,
							 uint64_t *plain);

/* word `word` of that plain bit array alone */
extern uint64_t fbf_extract_word(const Fbf *f, int logical, uint32_t part,
								 uint32_t word);

/* element count of logical filter i in partition p */
static inline uint64_t *
fbf_count(Fbf *f, int logical, uint32_t part)
{
	return fbf_counts_base(f) + (size_t) fbf_slot(f, logical) * f->nparts + part;
}

static inline uint64_t
fbf_count_const(const Fbf *f, int logical, uint32_t part)
{
	return *fbf_count((Fbf *) f, logical, part);
}

static inline int64_t *
fbf_born_at(Fbf *f, int logical)
{
	return &f->born_at[fbf_slot(f, logical)];
}

/* element count of logical filter i, all partitions */
extern uint64_t fbf_filter_count(const Fbf *f, int logical);

/*
 * The partition of an element: from the low 32 bits of h1, while the probe
 * positions (fbf_probes) are driven by the high bits, so the two are
 * independent.  Always 0 when nparts = 1.
 */
static inline uint32_t
fbf_part(const FbfHash *hash, uint32_t nparts)
{
	return (uint32_t) (((hash->h1 & UINT64_C(0xffffffff)) * nparts) >> 32);
}

/* ---- membership ---- */

/* bit i set iff live filter i (logical order) contains the element */
extern uint64_t fbf_membership(const Fbf *f, const FbfHash *hash);

/* evaluate a membership mask under a check variant */
extern bool fbf_check_mask(uint64_t mask, int nlive, FbfCheck check);

extern bool fbf_contains(const Fbf *f, const FbfHash *hash, FbfCheck check);

/*
 * Insert unless already contained (under `check`).  Returns true if the
 * element was absent and has been inserted.
 */
extern bool fbf_add(Fbf *f, const FbfHash *hash, FbfCheck check);

/* set the element's bits in future and present, unconditionally */
extern void fbf_insert(Fbf *f, const FbfHash *hash);

/* ---- the window ---- */

/* rotate: the oldest filter (unborn or live) becomes the empty future */
extern void fbf_refresh(Fbf *f, int64_t now);

/*
 * May the oldest live filter be dropped at time `now` without forgetting an
 * element of age `retention` or less?  Elements that live only in the
 * oldest live filter were inserted before its younger neighbour was born,
 * so the drop is safe iff that neighbour was born more than `retention`
 * ago.
 */
extern bool fbf_drop_is_safe(const Fbf *f, int64_t now, int64_t retention);

/*
 * What a timed refresh should do, given the window: recycle the oldest live
 * filter if it holds nothing younger than the retention (even while unborn
 * filters wait: they are for when the window must lengthen, and keeping
 * old content longer only costs false positives); else lengthen the window
 * into an unborn filter; else postpone (the retention needs every filter).
 * younger_born is the birth time of the oldest live filter's younger
 * neighbour (logical nlive - 2).
 */
typedef enum FbfRefreshAction
{
	FBF_REFRESH_RECYCLE_OLDEST,
	FBF_REFRESH_USE_UNBORN,
	FBF_REFRESH_POSTPONE
} FbfRefreshAction;

extern FbfRefreshAction fbf_refresh_action(int nlive, int nfilters,
										   int64_t younger_born, int64_t now,
										   int64_t retention);

/*
 * A timed refresh at `now` following fbf_refresh_action; returns false if
 * postponed.
 */
extern bool fbf_refresh_within(Fbf *f, int64_t now, int64_t retention);

/*
 * Copy src into dst (fbf_size(src->nbits, nfilters, src->nparts) bytes) with nfilters
 * filters: growing appends unborn filters at the old end, shrinking removes
 * filters from the old end, unborn ones first.  dst is normalised to
 * head = 0, and its slice arrays are laid out afresh for its stride.  The
 * caller checks fbf_drop_is_safe() before a shrink that removes a live
 * filter.
 */
extern void fbf_resize(Fbf *dst, const Fbf *src, int nfilters);

/*
 * OR src into dst, aligning filters by birth epoch.  Both must have the same
 * nbits, nhashes, nfilters, nparts and period (see fbf_same_shape); dst must have
 * the larger or equal epoch (swap the operands otherwise).  The result keeps
 * as many live filters as the shorter-reaching operand: an element of either
 * is still found unless it lived only in a filter that refreshing the older
 * operand forward would have dropped, or in one past the other's reach.
 */
extern bool fbf_same_shape(const Fbf *a, const Fbf *b, const char **why);
extern void fbf_union_into(Fbf *dst, const Fbf *src);

/* ---- accuracy ---- */

/*
 * How a pair check's probability is estimated (docs/design.md, "The
 * false-positive estimate").  The paper
 * multiplies the two filters' p(B) as if independent; but neighbours share
 * the elements of one epoch, which set the same bits in both, so the
 * independent product underestimates, badly so when the pair terms
 * dominate (many filters).  FBF_MODEL_SHARED accounts for the shared epoch
 * and is what the controller uses; FBF_MODEL_INDEPENDENT reproduces the
 * paper's formula for comparison.
 */
typedef enum FbfModel
{
	FBF_MODEL_SHARED,
	FBF_MODEL_INDEPENDENT
} FbfModel;

/*
 * Estimated false-positive probability of `check`, shared-epoch model: the
 * mean over partitions, since a non-member falls in each with equal
 * probability.
 */
extern double fbf_estimate_fpp(const Fbf *f, FbfCheck check);
extern double fbf_estimate_fpp_model(const Fbf *f, FbfCheck check,
									 FbfModel model);

/*
 * The estimate of a blocked FBF from its counts laid out as
 * counts[i * nparts + p] (logical filter i, newest first; partition p):
 * the mean of the partitions' estimates.
 */
extern double fbf_estimate_fpp_blocked(uint32_t nbits, int nhashes, int nlive,
									   uint32_t nparts, const uint64_t *counts,
									   FbfCheck check, FbfModel model);

/*
 * Same estimate for hypothetical per-filter counts (newest first), for
 * sizing before an FBF exists.
 */
extern double fbf_estimate_fpp_counts(uint32_t nbits, int nhashes, int nlive,
									  const uint64_t *counts, FbfCheck check,
									  FbfModel model);

/* ---- names ---- */

extern const char *fbf_check_name(FbfCheck check);
extern bool fbf_check_from_name(const char *name, FbfCheck *check);

#endif							/* FBF_CORE_H */
