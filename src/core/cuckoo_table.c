/*-------------------------------------------------------------------------
 *
 * cuckoo_table.c
 *	  Buckets of (tag, TID) slots with cuckoo insertion: the pure core of
 *	  the cuckoo index.  See cuckoo_table.h for the block layout.
 *
 * Insertion searches breadth-first for the shortest chain of displacements
 * (a resident of a full bucket moving to its other bucket, and so on) that
 * ends in a bucket with a free slot, with at most max_kicks displacements
 * and at most max_kicks + 2 buckets explored, and only then moves entries
 * along it, so a failed insert leaves the block
 * exactly as it was.  A random walk, the textbook alternative, wastes its
 * kicks when a bucket holds copies of one key (moving one copy to the
 * other bucket of the same key changes nothing), which many rows with a
 * few keys each make common in an index.  The search is deterministic, so
 * a given block and key always take the same path.
 *
 *-------------------------------------------------------------------------
 */
#include "cuckoo_table.h"

#include <string.h>

#include "cuckoo_hash.h"
#include "fbf_le.h"

bool
cuckoo_layout_init(CuckooLayout *layout, size_t space,
				   uint32_t fingerprint_bits, uint32_t bucket_size,
				   uint32_t max_kicks)
{
	size_t		slot_bits;
	size_t		nbuckets;

	if (fingerprint_bits != 8 && fingerprint_bits != 12 && fingerprint_bits != 16)
		return false;
	if (bucket_size < CUCKOO_MIN_BUCKET_SIZE || bucket_size > CUCKOO_MAX_BUCKET_SIZE)
		return false;
	if (max_kicks > CUCKOO_MAX_KICKS)
		return false;

	layout->bucket_size = bucket_size;
	layout->tag_bits = cuckoo_tag_bits_for(fingerprint_bits);
	layout->tag_bytes = (layout->tag_bits + 7) / 8;
	layout->max_kicks = max_kicks;

	/* per slot: tag + TID bytes, and one killed bit */
	slot_bits = (layout->tag_bytes + CUCKOO_TID_BYTES) * 8 + 1;
	nbuckets = (space * 8) / (slot_bits * bucket_size);
	/* the killed bitmap rounds up to a byte */
	while (nbuckets > 0)
	{
		layout->nbuckets = (uint32_t) nbuckets;
		if (cuckoo_block_size(layout) <= space)
			break;
		nbuckets--;
	}
	if (nbuckets == 0 || nbuckets * bucket_size > UINT16_MAX)
		return false;
	layout->nbuckets = (uint32_t) nbuckets;
	return true;
}

size_t
cuckoo_block_size(const CuckooLayout *layout)
{
	size_t		nslots = cuckoo_nslots(layout);

	return nslots * (layout->tag_bytes + CUCKOO_TID_BYTES) + (nslots + 7) / 8;
}

static inline uint64_t
fmix64(uint64_t h)
{
	/* murmur3's finaliser: the opclass hash may be weak in some bits */
	h ^= h >> 33;
	h *= UINT64_C(0xff51afd7ed558ccd);
	h ^= h >> 33;
	h *= UINT64_C(0xc4ceb9fe1a85ec53);
	h ^= h >> 33;
	return h;
}

CuckooKey
cuckoo_key(uint64_t hash, uint32_t fingerprint_bits)
{
	CuckooKey	key;
	uint64_t	h2 = fmix64(hash ^ UINT64_C(0x9e3779b97f4a7c15));

	key.addr = fmix64(hash);
	key.fp = (uint32_t) (h2 >> (64 - fingerprint_bits));
	key.bucket = (uint32_t) h2;
	return key;
}

bool
cuckoo_tag_matches(uint32_t stored, uint32_t probe)
{
	uint32_t	rest = cuckoo_tag_rest(stored);
	uint32_t	mask;

	if (cuckoo_tag_fp(stored) != cuckoo_tag_fp(probe))
		return false;
	if (rest == 0)
		return true;			/* never written so; compare fingerprints only */
	/* the bits above the sentinel (the lowest set bit) */
	mask = CUCKOO_REST_MASK & ~((rest & -rest) * 2 - 1);
	return (rest & mask) == (cuckoo_tag_rest(probe) & mask);
}

int
cuckoo_tag_split(uint32_t tag, uint32_t *new_tag)
{
	uint32_t	rest = cuckoo_tag_rest(tag);

	if (rest == CUCKOO_REST_EMPTY || rest == 0)
	{
		*new_tag = tag;
		return -1;
	}
	*new_tag = cuckoo_make_tag(cuckoo_tag_fp(tag), (rest << 1) & CUCKOO_REST_MASK);
	return (int) (rest >> 15);
}

uint32_t
cuckoo_first_bucket(const CuckooLayout *layout, uint32_t bucket_hash)
{
	return cuckoo_reduce32(bucket_hash, layout->nbuckets);
}

/* The other bucket of an entry in "bucket": cuckoo_hash.h's involution. */
uint32_t
cuckoo_alt_bucket(const CuckooLayout *layout, uint32_t bucket, uint32_t fp)
{
	return cuckoo_alt_index(bucket, fp, layout->nbuckets);
}

/* ---- slot access (the readers are inline in cuckoo_table.h) ---- */

void
cuckoo_slot_set_killed(const CuckooLayout *layout, uint8_t *block, uint32_t slot)
{
	cuckoo_killed_of(layout, block)[slot / 8] |= (uint8_t) (1 << (slot % 8));
}

static inline void
slot_set_killed_to(const CuckooLayout *layout, uint8_t *block, uint32_t slot,
				   bool killed)
{
	uint8_t    *k = &cuckoo_killed_of(layout, block)[slot / 8];

	if (killed)
		*k |= (uint8_t) (1 << (slot % 8));
	else
		*k &= (uint8_t) ~(1 << (slot % 8));
}

void
cuckoo_slot_put(const CuckooLayout *layout, uint8_t *block, uint32_t slot,
				uint32_t tag, const uint8_t *tid)
{
	uint8_t    *p = cuckoo_tags_of(layout, block) + (size_t) slot * layout->tag_bytes;

	fbf_le_write(p, tag, layout->tag_bytes);
	memcpy(cuckoo_tids_of(layout, block) + (size_t) slot * CUCKOO_TID_BYTES, tid,
		   CUCKOO_TID_BYTES);
	slot_set_killed_to(layout, block, slot, false);
}

void
cuckoo_slot_clear(const CuckooLayout *layout, uint8_t *block, uint32_t slot)
{
	memset(cuckoo_tags_of(layout, block) + (size_t) slot * layout->tag_bytes, 0,
		   layout->tag_bytes);
	memset(cuckoo_tids_of(layout, block) + (size_t) slot * CUCKOO_TID_BYTES, 0,
		   CUCKOO_TID_BYTES);
	slot_set_killed_to(layout, block, slot, false);
}

void
cuckoo_block_init(const CuckooLayout *layout, uint8_t *block)
{
	memset(block, 0, cuckoo_block_size(layout));
}

/* First free slot of a bucket, or -1. */
static int
bucket_free_slot(const CuckooLayout *layout, const uint8_t *block,
				 uint32_t bucket)
{
	uint32_t	first = bucket * layout->bucket_size;

	for (uint32_t s = first; s < first + layout->bucket_size; s++)
		if (!cuckoo_slot_used(layout, block, s))
			return (int) s;
	return -1;
}

/* Move the entry in slot "from" to the empty slot "to", killed bit and all. */
static void
move_slot(const CuckooLayout *layout, uint8_t *block, uint32_t from, uint32_t to)
{
	bool		killed = cuckoo_slot_killed(layout, block, from);

	cuckoo_slot_put(layout, block, to, cuckoo_slot_tag(layout, block, from),
					cuckoo_slot_tid(layout, block, from));
	slot_set_killed_to(layout, block, to, killed);
	cuckoo_slot_clear(layout, block, from);
}

/*
 * One bucket reached by the search: an entry of the parent node's bucket
 * (in slot "slot") would move here.
 */
typedef struct SearchNode
{
	uint16_t	bucket;
	uint16_t	slot;			/* slot in the parent's bucket */
	int32_t		parent;			/* index of the parent node; -1 for a root */
	uint32_t	depth;			/* displacements to empty a slot here */
} SearchNode;

int
cuckoo_block_insert(const CuckooLayout *layout, uint8_t *block,
					uint32_t tag, uint32_t first, const uint8_t *tid)
{
	uint32_t	b1 = first,
				b2 = cuckoo_alt_bucket(layout, first, cuckoo_tag_fp(tag));
	int			free_slot;
	SearchNode	queue[CUCKOO_MAX_KICKS + 2];
	uint64_t	visited[(UINT16_MAX + 1) / 64];
	uint32_t	head = 0,
				tail = 0;
	uint32_t	limit = layout->max_kicks + 2;

	if ((free_slot = bucket_free_slot(layout, block, b1)) >= 0 ||
		(free_slot = bucket_free_slot(layout, block, b2)) >= 0)
	{
		cuckoo_slot_put(layout, block, (uint32_t) free_slot, tag, tid);
		return 0;
	}

	/*
	 * Breadth-first search for the shortest chain of displacements that
	 * ends in a bucket with a free slot: from each bucket reached, every
	 * resident could move to its other bucket.  Buckets are visited once,
	 * so copies of one key (which only trade places) cost nothing, and
	 * nothing moves until a chain is found.
	 */
	memset(visited, 0, ((layout->nbuckets + 63) / 64) * sizeof(uint64_t));
	queue[tail++] = (SearchNode) {(uint16_t) b1, 0, -1, 0};
	visited[b1 / 64] |= UINT64_C(1) << (b1 % 64);
	if (b2 != b1)
	{
		queue[tail++] = (SearchNode) {(uint16_t) b2, 0, -1, 0};
		visited[b2 / 64] |= UINT64_C(1) << (b2 % 64);
	}

	while (head < tail)
	{
		SearchNode *node = &queue[head];
		uint32_t	base = (uint32_t) node->bucket * layout->bucket_size;

		/* a chain through this bucket would need more than max_kicks moves */
		if (node->depth + 1 > layout->max_kicks)
			break;

		for (uint32_t i = 0; i < layout->bucket_size; i++)
		{
			uint32_t	slot = base + i;
			uint32_t	alt = cuckoo_alt_bucket(layout, node->bucket,
												cuckoo_tag_fp(cuckoo_slot_tag(layout, block, slot)));
			int			moves;
			int32_t		n;

			if (visited[alt / 64] & (UINT64_C(1) << (alt % 64)))
				continue;
			if ((free_slot = bucket_free_slot(layout, block, alt)) < 0)
			{
				if (tail < limit)
				{
					queue[tail++] = (SearchNode) {(uint16_t) alt, (uint16_t) slot,
					(int32_t) head, node->depth + 1};
					visited[alt / 64] |= UINT64_C(1) << (alt % 64);
				}
				continue;
			}

			/*
			 * Found: move the resident of "slot" to the free slot, then each
			 * ancestor's resident into the slot just vacated, up to a root
			 * bucket, whose vacated slot takes the new entry.
			 */
			move_slot(layout, block, slot, (uint32_t) free_slot);
			moves = 1;
			for (n = (int32_t) head; queue[n].parent >= 0; n = queue[n].parent)
			{
				move_slot(layout, block, queue[n].slot, slot);
				slot = queue[n].slot;
				moves++;
			}
			cuckoo_slot_put(layout, block, slot, tag, tid);
			return moves;
		}
		head++;
	}
	return -1;
}

int
cuckoo_block_append(const CuckooLayout *layout, uint8_t *block,
					uint32_t tag, const uint8_t *tid)
{
	uint32_t	nslots = cuckoo_nslots(layout);

	for (uint32_t s = 0; s < nslots; s++)
	{
		if (!cuckoo_slot_used(layout, block, s))
		{
			cuckoo_slot_put(layout, block, s, tag, tid);
			return (int) s;
		}
	}
	return -1;
}

int
cuckoo_block_find(const CuckooLayout *layout, const uint8_t *block,
				  uint32_t tag, uint32_t first, bool skip_killed,
				  uint32_t *slots)
{
	uint32_t	b[2];
	int			n = 0;

	b[0] = first;
	b[1] = cuckoo_alt_bucket(layout, first, cuckoo_tag_fp(tag));
	for (int i = 0; i < 2; i++)
	{
		uint32_t	start = b[i] * layout->bucket_size;

		if (i == 1 && b[1] == b[0])
			break;
		for (uint32_t s = start; s < start + layout->bucket_size; s++)
		{
			if (cuckoo_slot_used(layout, block, s) &&
				cuckoo_tag_matches(cuckoo_slot_tag(layout, block, s), tag) &&
				!(skip_killed && cuckoo_slot_killed(layout, block, s)))
				slots[n++] = s;
		}
	}
	return n;
}

uint32_t
cuckoo_block_count(const CuckooLayout *layout, const uint8_t *block)
{
	uint32_t	nslots = cuckoo_nslots(layout);
	uint32_t	n = 0;

	for (uint32_t s = 0; s < nslots; s++)
		n += cuckoo_slot_used(layout, block, s);
	return n;
}

bool
cuckoo_slot_in_place(const CuckooLayout *layout, const uint8_t *block,
					 uint32_t slot, uint32_t first)
{
	uint32_t	bucket = slot / layout->bucket_size;
	uint32_t	fp = cuckoo_tag_fp(cuckoo_slot_tag(layout, block, slot));

	return bucket == first || bucket == cuckoo_alt_bucket(layout, first, fp);
}
