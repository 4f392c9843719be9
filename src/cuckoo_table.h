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
 * Slot s belongs to bucket s / bucket_size.  A tag is the top tag_bits bits
 * of the key's 64-bit hash (after a finaliser), and every placement is a
 * function of the tag alone:
 *
 *	  page     cuckoo_page_of(): multiply-high of the tag by the number of
 *	           pages, so doubling the pages sends page q's keys to 2q or
 *	           2q + 1 and never anywhere else;
 *	  buckets  cuckoo_buckets(): two candidate buckets inside the page,
 *	           from two independent mixes of the tag.
 *
 * Because the whole tag is stored, an entry can always be moved (kicked to
 * its other bucket, or rehashed into a doubled table) without reading the
 * heap.  The tag bits that the page number does not already imply work as
 * the fingerprint that spares most lookups a heap visit.
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

#define CUCKOO_TID_BYTES		6
#define CUCKOO_MIN_BUCKET_SIZE	1
#define CUCKOO_MAX_BUCKET_SIZE	16
#define CUCKOO_MAX_KICKS		4096	/* bounded so the undo path fits */

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
	uint32_t	max_kicks;		/* displacements tried before giving up */
} CuckooLayout;

/* Tag width (in bits) for a fingerprint width: 16 address bits more. */
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

/* Tag of a key's 64-bit hash: its top tag_bits bits after a finaliser. */
extern uint32_t cuckoo_tag(uint64_t hash, uint32_t tag_bits);

/* Page (0 .. npages - 1) of a tag in a table of npages pages. */
static inline uint32_t
cuckoo_page_of(uint32_t tag, uint32_t tag_bits, uint32_t npages)
{
	return (uint32_t) (((uint64_t) tag * npages) >> tag_bits);
}

/* The two candidate buckets of a tag inside a block (equal if nbuckets is 1). */
extern void cuckoo_buckets(const CuckooLayout *layout, uint32_t tag,
						   uint32_t *b1, uint32_t *b2);

/* Bit of a tag in a page's 64-bit summary of its overflow entries. */
static inline uint64_t
cuckoo_summary_bit(uint32_t tag)
{
	uint32_t	x = tag * UINT32_C(0x9e3779b1);

	return UINT64_C(1) << (x >> 26);
}

/* ---- slot access ---- */
extern uint32_t cuckoo_slot_tag(const CuckooLayout *layout, const uint8_t *block,
								uint32_t slot);
extern const uint8_t *cuckoo_slot_tid(const CuckooLayout *layout,
									  const uint8_t *block, uint32_t slot);
extern bool cuckoo_slot_used(const CuckooLayout *layout, const uint8_t *block,
							 uint32_t slot);
extern bool cuckoo_slot_killed(const CuckooLayout *layout, const uint8_t *block,
							   uint32_t slot);
extern void cuckoo_slot_set_killed(const CuckooLayout *layout, uint8_t *block,
								   uint32_t slot);
extern void cuckoo_slot_put(const CuckooLayout *layout, uint8_t *block,
							uint32_t slot, uint32_t tag, const uint8_t *tid);
extern void cuckoo_slot_clear(const CuckooLayout *layout, uint8_t *block,
							  uint32_t slot);

/* Zero a block: every slot empty. */
extern void cuckoo_block_init(const CuckooLayout *layout, uint8_t *block);

/*
 * Insert (tag, tid) into one of the tag's two buckets, displacing residents
 * to their other bucket at most max_kicks times.  Returns the number of
 * displacements made (>= 0) on success.  Returns -1 if no place was found;
 * the block is then exactly as it was: nothing is ever evicted.
 */
extern int	cuckoo_block_insert(const CuckooLayout *layout, uint8_t *block,
								uint32_t tag, const uint8_t *tid);

/*
 * Put (tag, tid) in the first empty slot of the block, ignoring buckets
 * (overflow pages are plain arrays).  Returns the slot, or -1 if full.
 */
extern int	cuckoo_block_append(const CuckooLayout *layout, uint8_t *block,
								uint32_t tag, const uint8_t *tid);

/*
 * Slots of the tag's two buckets holding "tag", written to slots[] (room
 * for 2 * bucket_size).  Killed slots are skipped when skip_killed.
 * Returns how many.
 */
extern int	cuckoo_block_find(const CuckooLayout *layout, const uint8_t *block,
							  uint32_t tag, bool skip_killed, uint32_t *slots);

/* Number of used slots. */
extern uint32_t cuckoo_block_count(const CuckooLayout *layout,
								   const uint8_t *block);

/* Is the entry in slot "slot" in one of its tag's two buckets? */
extern bool cuckoo_slot_in_place(const CuckooLayout *layout,
								 const uint8_t *block, uint32_t slot);

#endif							/* CUCKOO_TABLE_H */
