/*-------------------------------------------------------------------------
 *
 * cuckoo_table.h
 *	  The pure data structure under the cuckoo index: a block of buckets of
 *	  (tag, TID) slots with cuckoo insertion, lookup and deletion.
 *
 * A "block" is a flat byte array (the payload of one index page) laid out
 * as three arrays, so that no slot needs padding:
 *
 *	  tags    nslots * tag_bytes   little-endian tag of each slot
 *	  tids    nslots * 6           the heap TID of each slot, opaque here;
 *	                               six zero bytes mark an empty slot
 *	  killed  ceil(nslots / 8)     one bit per slot: "dead to everyone"
 *
 * Slot s belongs to bucket s / bucket_size.  A key's 64-bit hash gives
 * three independent parts (cuckoo_key()):
 *
 *	  addr     picks the page: multiply-high of addr by the number of pages.
 *	           Doubling the pages sends page q's keys to 2q or 2q + 1 only,
 *	           and which one is the next bit of the fraction the multiply
 *	           left over (see "rest" below);
 *	  bucket   picks the key's first bucket inside the page;
 *	  fp       the fingerprint, fingerprint_bits bits.  The second bucket
 *	           is cuckoo_alt_bucket(first, fp), an involution, so a resident
 *	           can be kicked to its other bucket knowing only its fp.
 *
 * A slot's tag is fp << 16 | rest.  "rest" holds the top bits of the
 * fraction of addr * npages, followed by a 1 (the sentinel) and zeros:
 * a doubling reads the top bit (which half the entry goes to) and shifts
 * the rest left, so each doubling after an entry's insertion uses up one of
 * its 15 bits.  Rest bits still present also act as extra fingerprint bits
 * on lookups.  An entry whose bits are all used up is copied to both halves
 * (a lookup finds it in the half it probes; the other copy only costs a
 * slot and a recheck).  Bucket placement does not depend on the page
 * count, so a doubling keeps every entry in the slot it had.
 *
 * Nothing needs the key itself to move an entry, so the index never reads
 * the heap to kick or to grow.
 *
 * No PostgreSQL includes: the extension, the standalone tests and the
 * benchmarks all link this file.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CUCKOO_TABLE_H
#define CUCKOO_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fbf_le.h"

#define CUCKOO_TID_BYTES		6
#define CUCKOO_MIN_BUCKET_SIZE	1
#define CUCKOO_MAX_BUCKET_SIZE	16
#define CUCKOO_MAX_KICKS		4096	/* bounds the search queue (on the stack) */

/*
 * Shape of one block.  Everything a function here needs to know; the
 * index keeps it in its metapage.
 */
typedef struct CuckooLayout
{
	uint32_t	nbuckets;		/* buckets in a block, >= 1 */
	uint32_t	bucket_size;	/* slots per bucket */
	uint32_t	tag_bits;		/* bits of a tag: 24, 28 or 32 */
	uint32_t	tag_bytes;		/* bytes a tag is stored in: 3 or 4 */
	uint32_t	max_kicks;		/* most displacements one insert may make */
} CuckooLayout;

/* Tag width (in bits) for a fingerprint width: 16 bits of rest more. */
static inline uint32_t
cuckoo_tag_bits_for(uint32_t fingerprint_bits)
{
	return fingerprint_bits + 16;
}

/* Fill in a layout whose block fits in "space" bytes; false if none does. */
extern bool cuckoo_layout_init(CuckooLayout *layout, size_t space,
							   uint32_t fingerprint_bits, uint32_t bucket_size,
							   uint32_t max_kicks);

static inline uint32_t
cuckoo_nslots(const CuckooLayout *layout)
{
	return layout->nbuckets * layout->bucket_size;
}

/* Bytes of a block with this layout. */
extern size_t cuckoo_block_size(const CuckooLayout *layout);

/* The three parts of a key's hash. */
typedef struct CuckooKey
{
	uint64_t	addr;			/* page: multiply-high by the page count */
	uint32_t	bucket;			/* first bucket: multiply-high by nbuckets */
	uint32_t	fp;				/* fingerprint */
} CuckooKey;

extern CuckooKey cuckoo_key(uint64_t hash, uint32_t fingerprint_bits);

/* Page (0 .. npages - 1) of an address. */
static inline uint32_t
cuckoo_page_of(uint64_t addr, uint32_t npages)
{
	return (uint32_t) (((unsigned __int128) addr * npages) >> 64);
}

/* The rest of an address in a table of npages pages: 15 bits and sentinel. */
static inline uint32_t
cuckoo_rest_of(uint64_t addr, uint32_t npages)
{
	uint64_t	frac = (uint64_t) ((unsigned __int128) addr * npages);

	return (uint32_t) ((frac >> 49) << 1) | 1;
}

#define CUCKOO_REST_MASK	0xFFFFu
#define CUCKOO_REST_EMPTY	0x8000u /* sentinel only: no bits left */

static inline uint32_t
cuckoo_make_tag(uint32_t fp, uint32_t rest)
{
	return (fp << 16) | rest;
}

static inline uint32_t
cuckoo_tag_fp(uint32_t tag)
{
	return tag >> 16;
}

static inline uint32_t
cuckoo_tag_rest(uint32_t tag)
{
	return tag & CUCKOO_REST_MASK;
}

/*
 * Does a stored tag match a probe's tag (computed for the page count the
 * entry's page is at)?  The fingerprints must be equal, and the stored
 * rest bits that are left must equal the probe's.
 */
extern bool cuckoo_tag_matches(uint32_t stored, uint32_t probe);

/*
 * For a doubling: which half (0 or 1) a stored tag goes to, and its tag
 * in the doubled table; -1 if its rest has no bits left (then it belongs
 * to both, unchanged).
 */
extern int	cuckoo_tag_split(uint32_t tag, uint32_t *new_tag);

/* A key's first bucket, and the other bucket of an entry in "bucket". */
extern uint32_t cuckoo_first_bucket(const CuckooLayout *layout, uint32_t bucket_hash);
extern uint32_t cuckoo_alt_bucket(const CuckooLayout *layout, uint32_t bucket,
								  uint32_t fp);

/* Bit of a tag in a page's 64-bit summary of its overflow entries. */
static inline uint64_t
cuckoo_summary_bit(uint32_t tag)
{
	uint32_t	x = (cuckoo_tag_fp(tag) + 1) * UINT32_C(0x9e3779b1);

	return UINT64_C(1) << (x >> 26);
}

/*
 * ---- slot access ----
 *
 * The readers are inline: VACUUM and scans call them for every slot of a
 * page.
 */
static inline uint8_t *
cuckoo_tags_of(const CuckooLayout *layout, const uint8_t *block)
{
	(void) layout;
	return (uint8_t *) block;
}

static inline uint8_t *
cuckoo_tids_of(const CuckooLayout *layout, const uint8_t *block)
{
	return (uint8_t *) block + (size_t) cuckoo_nslots(layout) * layout->tag_bytes;
}

static inline uint8_t *
cuckoo_killed_of(const CuckooLayout *layout, const uint8_t *block)
{
	return cuckoo_tids_of(layout, block) + (size_t) cuckoo_nslots(layout) * CUCKOO_TID_BYTES;
}

static inline uint32_t
cuckoo_slot_tag(const CuckooLayout *layout, const uint8_t *block, uint32_t slot)
{
	const uint8_t *p = cuckoo_tags_of(layout, block) + (size_t) slot * layout->tag_bytes;

	return (uint32_t) fbf_le_read(p, layout->tag_bytes);
}

static inline const uint8_t *
cuckoo_slot_tid(const CuckooLayout *layout, const uint8_t *block, uint32_t slot)
{
	return cuckoo_tids_of(layout, block) + (size_t) slot * CUCKOO_TID_BYTES;
}

/* An empty slot's TID is six zero bytes. */
static inline bool
cuckoo_slot_used(const CuckooLayout *layout, const uint8_t *block, uint32_t slot)
{
	const uint8_t *t = cuckoo_slot_tid(layout, block, slot);

	return (t[0] | t[1] | t[2] | t[3] | t[4] | t[5]) != 0;
}

static inline bool
cuckoo_slot_killed(const CuckooLayout *layout, const uint8_t *block, uint32_t slot)
{
	return (cuckoo_killed_of(layout, block)[slot / 8] >> (slot % 8)) & 1;
}

extern void cuckoo_slot_set_killed(const CuckooLayout *layout, uint8_t *block,
								   uint32_t slot);
extern void cuckoo_slot_put(const CuckooLayout *layout, uint8_t *block,
							uint32_t slot, uint32_t tag, const uint8_t *tid);
extern void cuckoo_slot_clear(const CuckooLayout *layout, uint8_t *block,
							  uint32_t slot);

/* Zero a block: every slot empty. */
extern void cuckoo_block_init(const CuckooLayout *layout, uint8_t *block);

/*
 * Insert (tag, tid) into bucket "first" or its alternative, moving at most
 * max_kicks residents to their other buckets along the shortest chain that
 * frees a slot.  Returns the number of displacements made (>= 0) on success.  Returns -1 if no place
 * was found; the block is then exactly as it was: nothing is ever evicted.
 */
extern int	cuckoo_block_insert(const CuckooLayout *layout, uint8_t *block,
								uint32_t tag, uint32_t first, const uint8_t *tid);

/*
 * Put (tag, tid) in the first empty slot of the block, ignoring buckets
 * (overflow pages are plain arrays).  Returns the slot, or -1 if full.
 */
extern int	cuckoo_block_append(const CuckooLayout *layout, uint8_t *block,
								uint32_t tag, const uint8_t *tid);

/*
 * Slots of bucket "first" and its alternative whose tags match the probe
 * "tag", written to slots[] (room for 2 * bucket_size).  Killed slots are
 * skipped when skip_killed.  Returns how many.
 */
extern int	cuckoo_block_find(const CuckooLayout *layout, const uint8_t *block,
							  uint32_t tag, uint32_t first, bool skip_killed,
							  uint32_t *slots);

/* Number of used slots. */
extern uint32_t cuckoo_block_count(const CuckooLayout *layout,
								   const uint8_t *block);

/* Is slot "slot" in bucket "first" or in its alternative? */
extern bool cuckoo_slot_in_place(const CuckooLayout *layout,
								 const uint8_t *block, uint32_t slot,
								 uint32_t first);

#endif							/* CUCKOO_TABLE_H */
