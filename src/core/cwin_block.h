/*-------------------------------------------------------------------------
 *
 * cwin_block.h
 *	  The cuckoo window's page: buckets of (fingerprint, epoch tag) slots
 *	  that forget.  The pure data structure under a counter's cuckoo
 *	  window (filter => 'cuckoo'), one block per partition page.
 *
 * A cuckoo window remembers an operation as an f-bit fingerprint V and a
 * 4-bit epoch tag (the epoch it was stored in, mod 16) in one of two
 * buckets of 4 slots.  An entry is live while its epoch is one of the
 * last `nlive` (N + 1 <= 16) epochs; older entries are free slots, taken
 * back lazily.  A lookup reads two buckets of one block:
 * about 8 * load / 2^f false positives.
 *
 * Block layout (little-endian; `nbuckets` from cwin_layout_init):
 *
 *	  CwinHeader          the sweep base and per-tag entry counts
 *	  buckets             nbuckets * (12 + 4f) bits, a bit string
 *	  slack               16 zero bytes (buckets are read 16 bytes at once),
 *	                      and up to 7 more to make a multiple of 8
 *
 * A bucket is semi-sorted (Fan et al., "Cuckoo Filter", 2014): its four
 * slots are kept sorted, and the multiset of their fingerprints' low four
 * bits (a "nibble" each) is one of 3,876, stored as a 12-bit code instead
 * of 16 bits.  Each slot then stores f bits: the rest of its fingerprint
 * (f - 4 bits) and its tag.  So a slot costs f + 3 bits; with f = 13 a
 * bucket is exactly one 64-bit word.  An empty slot is V = 0, tag 0 (a
 * fingerprint is never 0).
 *
 * Epoch tags and the sweep base.  A tag is an epoch mod 16.  The header's
 * `base` is an epoch such that every entry's epoch lies in
 * [base, base + 15], so a tag decodes to one epoch (cwin_tag_epoch)
 * under any lock that keeps the block still.  A write at epoch e
 * > base + 15 first sweeps (cwin_block_sweep): entries older than the
 * live epochs are emptied and base becomes e - nlive + 1.  With 16 live
 * epochs a block is swept at most once per epoch, and not at all when
 * the per-tag counts say no dying entry is there.
 *
 * Keys.  An operation's 128-bit hash (FbfHash) gives its partition
 * (fbf_part: the low 32 bits of h1 multiplied by the partition count),
 * its first bucket (the high 32 bits of h1) and its fingerprint.  The
 * fingerprint's top CWIN_ROUTE_BITS (8) bits are routing bits: the top
 * bits of the fraction that fbf_part leaves, lo32(h1) * P mod 2^32, where
 * P is the partition count the window had when the entry's epoch began
 * (its "key partitions", CwinEpochs.parts).  The rest (f - 8 bits) come
 * from h2.  Doubling the partitions sends partition q's operations to 2q
 * or 2q + 1 by the next bit of that fraction, so a split sends each entry
 * to its child by its own routing bits, without the key: an entry keyed
 * with P0 partitions, in a page of P = P0 * 2^k, has used k of them
 * (cwin_block_split).  Bits used for routing are the same for every entry
 * of a page, so they no longer tell entries apart: an entry keeps f - k
 * useful bits until it expires, and entries of epochs that began after
 * the split have all f again.  An entry whose routing bits are used up
 * goes to every child it may belong to.
 *
 * Bucket placement does not depend on the partition count, so a split
 * keeps every entry in its slot: a child never needs a cuckoo insert.
 * The second bucket is (m(V) - first) mod nbuckets, an involution, so a
 * resident is kicked knowing only its V.
 *
 * Insertion (cwin_block_insert) searches breadth-first for the shortest
 * chain of displacements that ends at a free (empty or expired) slot, and
 * only then moves entries, so a failed insert leaves the block exactly as
 * it was: nothing is ever evicted.  The caller keeps the entry elsewhere
 * and grows the window.
 *
 * No PostgreSQL includes: the extension, the standalone tests and the
 * benchmarks all link this file.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CWIN_BLOCK_H
#define CWIN_BLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fbf_hash.h"

#define CWIN_BUCKET_SLOTS	4
#define CWIN_TAG_BITS		4
#define CWIN_TAGS			16	/* distinct tags; an epoch mod 16 */
#define CWIN_MAX_LIVE		16	/* live epochs at most (N + 1) */
#define CWIN_MIN_LIVE		2
#define CWIN_ROUTE_BITS		8	/* fingerprint bits a split may route by */
#define CWIN_MIN_FP_BITS	12	/* routing bits, and a nibble of h2 bits */
#define CWIN_MAX_FP_BITS	27	/* a bucket and its bit shift in 128 bits */
#define CWIN_MAX_KICKS		4096
#define CWIN_CODES			3876	/* multisets of 4 nibbles: C(19, 4) */
#define CWIN_SLACK_BYTES	16
#define CWIN_MAX_SPLIT		64	/* children of one split, at most */

/* what a lookup compares a dead tag's slots with: no V is this */
#define CWIN_NO_MATCH		UINT32_MAX

/* Shape of one block; the window keeps it in its metapage. */
typedef struct CwinLayout
{
	uint32_t	nbuckets;		/* buckets in a block, >= 2 */
	uint32_t	fp_bits;		/* f */
	uint32_t	bucket_bits;	/* 12 + 4f */
	uint32_t	max_kicks;		/* displacements one insert may make */
} CwinLayout;

/* The head of every block. */
typedef struct CwinHeader
{
	int64_t		base;			/* every entry's epoch is in [base, base+15] */
	uint32_t	count[CWIN_TAGS];	/* entries by tag, expired or not */
} CwinHeader;

/*
 * The window's live epochs at one moment: what every lookup, insert and
 * split needs to know of time.  Epoch `epoch - i` is live for i <
 * nlive; parts[i] is the partition count the window had when it began
 * (the key partitions of its entries).  parts[] never decreases towards
 * the present, and each is a power-of-two fraction of every page's
 * partition count that holds its entries.
 */
typedef struct CwinEpochs
{
	int64_t		epoch;
	int			nlive;
	uint32_t	parts[CWIN_MAX_LIVE];	/* by age: 0 = the current epoch */
} CwinEpochs;

/* An operation's keys in a window: its first bucket and fingerprints. */
typedef struct CwinKey
{
	uint32_t	bucket;
	uint32_t	fp[CWIN_MAX_LIVE];	/* by age, as CwinEpochs.parts */
} CwinKey;

/* A decoded slot. */
typedef struct CwinSlot
{
	uint32_t	fp;				/* V; 0: empty */
	uint32_t	tag;
} CwinSlot;

/* ---- shape ---- */

/*
 * Fill in a layout of f-bit fingerprints whose block fits in `space`
 * bytes; false (and *why) if none does.
 */
extern bool cwin_layout_init(CwinLayout *layout, size_t space, uint32_t fp_bits,
							 uint32_t max_kicks, const char **why);

static inline uint32_t
cwin_nslots(const CwinLayout *layout)
{
	return layout->nbuckets * CWIN_BUCKET_SLOTS;
}

/* Bytes of a block of this layout, slack included: a multiple of 8. */
extern size_t cwin_block_size(const CwinLayout *layout);

/* An empty block, its base at `epoch`. */
extern void cwin_block_init(const CwinLayout *layout, uint8_t *block,
							int64_t epoch);

/* ---- keys ---- */

/* The fingerprint of a hash for key partitions `parts` (never 0). */
extern uint32_t cwin_fingerprint(const CwinLayout *layout, const FbfHash *hash,
								 uint32_t parts);

/* An operation's keys under the live epochs. */
extern void cwin_key(const CwinLayout *layout, const CwinEpochs *epochs,
					 const FbfHash *hash, CwinKey *key);

extern uint32_t cwin_first_bucket(const CwinLayout *layout, const FbfHash *hash);
extern uint32_t cwin_alt_bucket(const CwinLayout *layout, uint32_t bucket,
								uint32_t fp);

/* The epoch of a tag in a block with this base. */
static inline int64_t
cwin_tag_epoch(int64_t base, uint32_t tag)
{
	return base + (int64_t) ((tag - (uint64_t) base) & (CWIN_TAGS - 1));
}

static inline CwinHeader *
cwin_header(uint8_t *block)
{
	return (CwinHeader *) block;
}

static inline const CwinHeader *
cwin_header_c(const uint8_t *block)
{
	return (const CwinHeader *) block;
}

/* ---- buckets ---- */

/* Read bucket b's four slots (sorted; empty ones first). */
extern void cwin_bucket_read(const CwinLayout *layout, const uint8_t *block,
							 uint32_t b, CwinSlot *slots);

/* Write four slots into bucket b (any order; stored sorted). */
extern void cwin_bucket_write(const CwinLayout *layout, uint8_t *block,
							  uint32_t b, const CwinSlot *slots);

/* ---- operations ---- */

/* Is the key's operation live in the block? */
extern bool cwin_block_contains(const CwinLayout *layout, const uint8_t *block,
								const CwinEpochs *epochs, const CwinKey *key);

/*
 * Store the key's operation as of the current epoch (sweeping first if
 * the block needs it).  Returns the displacements made (>= 0), or -1 if
 * no chain of at most max_kicks displacements frees a slot; the block is
 * then exactly as before, but for a sweep.
 */
extern int	cwin_block_insert(const CwinLayout *layout, uint8_t *block,
							  const CwinEpochs *epochs, const CwinKey *key);

/* Does a write at this epoch need a sweep first? */
static inline bool
cwin_block_needs_sweep(const uint8_t *block, int64_t epoch)
{
	return epoch > cwin_header_c(block)->base + (CWIN_TAGS - 1);
}

/*
 * Empty the entries older than the live epochs and move the base to the
 * oldest live epoch.  Returns the entries emptied.
 */
extern uint32_t cwin_block_sweep(const CwinLayout *layout, uint8_t *block,
								 const CwinEpochs *epochs);

/* Live entries (from the per-tag counts) and all entries. */
extern uint32_t cwin_block_live(const uint8_t *block, const CwinEpochs *epochs);
extern uint32_t cwin_block_used(const uint8_t *block);

/*
 * The live entries of a block, each live epoch's (by age, as
 * CwinEpochs.parts) weighed by weight[age]: with two to the routing bits
 * an epoch's fingerprints spent, what its entries cost in false positives
 * beside entries that spent none (cwin_fpp).
 */
extern double cwin_block_weighed_live(const uint8_t *block,
									  const CwinEpochs *epochs,
									  const double *weight);

/*
 * Split a block of a page with `parts` partitions into `factor` (a power
 * of two, 2 .. 64) children, for a window of parts * factor partitions:
 * child j is the page of partition q * factor + j.  Each live entry goes
 * to the child its routing bits name, in the same slot (to every child
 * its bits leave possible when they are used up); expired entries are
 * dropped.  children[] are written whole.  Returns the entries copied to
 * more than one child, or -1 (and *why) if an epoch's key partitions do
 * not divide `parts` by a power of two.
 */
extern int	cwin_block_split(const CwinLayout *layout, const uint8_t *block,
							 const CwinEpochs *epochs, uint32_t parts,
							 uint32_t factor, uint8_t *const *children,
							 const char **why);

/*
 * Check a block: canonical buckets, empty slots all zero, every entry's
 * epoch within [base, base + 15], counts equal to the entries.  false
 * and *why if not.
 */
extern bool cwin_block_check(const CwinLayout *layout, const uint8_t *block,
							 const char **why);

/* ---- estimates ---- */

/*
 * Estimated false-positive rate of a lookup in a block holding `live`
 * live entries: 2 buckets * 4 slots * load / 2^f, the load being
 * live / slots, 2^used_bits times more when the entries have used that
 * many routing bits (0 but for the epochs a split began in).
 */
extern double cwin_fpp(const CwinLayout *layout, double live, int used_bits);

#endif							/* CWIN_BLOCK_H */
