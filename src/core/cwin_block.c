/*-------------------------------------------------------------------------
 *
 * cwin_block.c
 *	  The cuckoo window's page: semi-sorted buckets of (fingerprint, epoch
 *	  tag) slots, lookups, cuckoo insertion, sweeps and splits.  See
 *	  cwin_block.h for the layout and the reasoning.
 *
 * A bucket of W = 12 + 4f bits, read as a 128-bit integer:
 *
 *	  bits 0 .. 11            the code of the sorted multiset of the four
 *	                          slots' nibbles (CwinCodes.nibbles[code])
 *	  bits 12 + i*f ..        slot i's rest: its fingerprint without the
 *	                          nibble, and its tag in the low four bits
 *
 * Slots are in ascending order of (nibble, rest), so a bucket's contents
 * have one encoding and a block's bytes depend only on what it holds.
 *
 *-------------------------------------------------------------------------
 */
#include "cwin_block.h"

#include <math.h>
#include <string.h>

#include "cuckoo_hash.h"
#include "fbf_core.h"
#include "fbf_le.h"

typedef unsigned __int128 cwin_u128;

/* ---- the nibble codes ---- */

/*
 * nibbles[c]: the c-th multiset of four nibbles n0 <= n1 <= n2 <= n3,
 * packed n0 | n1 << 4 | n2 << 8 | n3 << 12, in ascending order of the
 * packed value (cwin_code_of counts a multiset's position directly).
 * Filled on first use: its users (a backend, a test, a benchmark) are
 * single-threaded.  It has an entry for every 12-bit code: those past
 * CWIN_CODES, which no canonical bucket holds (cwin_block_check refuses
 * them), decode as four zero nibbles, so that reading a bucket never
 * leaves the table whatever its bits.
 */
static uint16_t cwin_nibbles[1 << 12];
static bool cwin_nibbles_ready;

static void
cwin_codes_init(void)
{
	int			c = 0;

	for (int n3 = 0; n3 < 16; n3++)
		for (int n2 = 0; n2 <= n3; n2++)
			for (int n1 = 0; n1 <= n2; n1++)
				for (int n0 = 0; n0 <= n1; n0++)
					cwin_nibbles[c++] = (uint16_t) (n0 | n1 << 4 | n2 << 8 | n3 << 12);
	cwin_nibbles_ready = true;
}

static inline const uint16_t *
cwin_codes(void)
{
	if (!cwin_nibbles_ready)
		cwin_codes_init();
	return cwin_nibbles;
}

/*
 * The code of a sorted multiset: its rank in that order, counted directly.
 * Multisets before it: those whose largest nibble is below n3, C(n3+3, 4);
 * then, with the same n3, those whose next is below n2, C(n2+2, 3); and so
 * on.  Equal to the position of `packed` in cwin_nibbles.
 */
static inline uint32_t
cwin_code_of(uint16_t packed)
{
	static const uint16_t c4[16] = {0, 1, 5, 15, 35, 70, 126, 210, 330, 495,
	715, 1001, 1365, 1820, 2380, 3060};
	static const uint16_t c3[16] = {0, 1, 4, 10, 20, 35, 56, 84, 120, 165,
	220, 286, 364, 455, 560, 680};
	static const uint16_t c2[16] = {0, 1, 3, 6, 10, 15, 21, 28, 36, 45, 55,
	66, 78, 91, 105, 120};

	return c4[packed >> 12] + c3[(packed >> 8) & 0xF] + c2[(packed >> 4) & 0xF] +
		(packed & 0xF);
}

#define CWIN_HEADER_BYTES	sizeof(CwinHeader)

static inline const uint8_t *
bucket_bytes(const CwinLayout *layout, const uint8_t *block, uint32_t b)
{
	return block + CWIN_HEADER_BYTES + ((uint64_t) b * layout->bucket_bits) / 8;
}

static inline cwin_u128
bucket_mask(const CwinLayout *layout)
{
	return (((cwin_u128) 1) << layout->bucket_bits) - 1;
}

static inline cwin_u128
bucket_load(const CwinLayout *layout, const uint8_t *block, uint32_t b)
{
	const uint8_t *p = bucket_bytes(layout, block, b);
	unsigned	shift = (unsigned) (((uint64_t) b * layout->bucket_bits) % 8);
	cwin_u128	v = ((cwin_u128) fbf_le64_read(p + 8) << 64) | fbf_le64_read(p);

	return (v >> shift) & bucket_mask(layout);
}

static inline void
bucket_store(const CwinLayout *layout, uint8_t *block, uint32_t b, cwin_u128 w)
{
	uint8_t    *p = (uint8_t *) bucket_bytes(layout, block, b);
	unsigned	shift = (unsigned) (((uint64_t) b * layout->bucket_bits) % 8);
	cwin_u128	v = ((cwin_u128) fbf_le64_read(p + 8) << 64) | fbf_le64_read(p);
	cwin_u128	mask = bucket_mask(layout) << shift;

	v = (v & ~mask) | ((w << shift) & mask);
	fbf_le64_write(p, (uint64_t) v);
	fbf_le64_write(p + 8, (uint64_t) (v >> 64));
}

/* ---- shape ---- */

bool
cwin_layout_init(CwinLayout *layout, size_t space, uint32_t fp_bits,
				 uint32_t max_kicks, const char **why)
{
	size_t		nbuckets;

	if (fp_bits < CWIN_MIN_FP_BITS || fp_bits > CWIN_MAX_FP_BITS)
	{
		*why = "The fingerprint must have 12 to 27 bits.";
		return false;
	}
	if (max_kicks > CWIN_MAX_KICKS)
	{
		*why = "An insert may make at most 4096 displacements.";
		return false;
	}
	layout->fp_bits = fp_bits;
	layout->bucket_bits = 12 + CWIN_BUCKET_SLOTS * fp_bits;
	layout->max_kicks = max_kicks;
	if (space < CWIN_HEADER_BYTES + CWIN_SLACK_BYTES)
	{
		*why = "The space holds no bucket.";
		return false;
	}
	nbuckets = ((space - CWIN_HEADER_BYTES - CWIN_SLACK_BYTES) * 8) / layout->bucket_bits;
	if (nbuckets < 2 || nbuckets > 65536)
	{
		*why = "A block must hold 2 to 65536 buckets.";
		return false;
	}
	layout->nbuckets = (uint32_t) nbuckets;
	while (cwin_block_size(layout) > space)
		layout->nbuckets--;
	return true;
}

size_t
cwin_block_size(const CwinLayout *layout)
{
	size_t		bytes = CWIN_HEADER_BYTES +
		((uint64_t) layout->nbuckets * layout->bucket_bits + 7) / 8 +
		CWIN_SLACK_BYTES;

	/* a multiple of 8, so that blocks can follow each other in memory */
	return (bytes + 7) & ~(size_t) 7;
}

void
cwin_block_init(const CwinLayout *layout, uint8_t *block, int64_t epoch)
{
	memset(block, 0, cwin_block_size(layout));
	cwin_header(block)->base = epoch;
}

/* ---- keys ---- */

uint32_t
cwin_fingerprint(const CwinLayout *layout, const FbfHash *hash, uint32_t parts)
{
	uint32_t	f = layout->fp_bits;
	uint32_t	frac = (uint32_t) ((hash->h1 & UINT64_C(0xffffffff)) * parts);
	uint32_t	route = frac >> (32 - CWIN_ROUTE_BITS);
	uint32_t	own = (uint32_t) (hash->h2 >> (64 - (f - CWIN_ROUTE_BITS)));
	uint32_t	v = route << (f - CWIN_ROUTE_BITS) | own;

	/* 0 is an empty slot; 1 has the same routing bits */
	return v == 0 ? 1 : v;
}

uint32_t
cwin_first_bucket(const CwinLayout *layout, const FbfHash *hash)
{
	return cuckoo_reduce32((uint32_t) (hash->h1 >> 32), layout->nbuckets);
}

/* The other bucket of an entry in "bucket": cuckoo_hash.h's involution. */
uint32_t
cwin_alt_bucket(const CwinLayout *layout, uint32_t bucket, uint32_t fp)
{
	return cuckoo_alt_index(bucket, fp, layout->nbuckets);
}

void
cwin_key(const CwinLayout *layout, const CwinEpochs *epochs,
		 const FbfHash *hash, CwinKey *key)
{
	key->bucket = cwin_first_bucket(layout, hash);
	for (int i = 0; i < epochs->nlive; i++)
	{
		if (i > 0 && epochs->parts[i] == epochs->parts[i - 1])
			key->fp[i] = key->fp[i - 1];
		else
			key->fp[i] = cwin_fingerprint(layout, hash, epochs->parts[i]);
	}
}

/* ---- buckets ---- */

static inline void
decode(const CwinLayout *layout, cwin_u128 w, CwinSlot *slots)
{
	uint32_t	f = layout->fp_bits;
	uint32_t	nib = cwin_codes()[(uint32_t) w & 0xFFF];
	uint32_t	rmask = (UINT32_C(1) << f) - 1;

	for (int i = 0; i < CWIN_BUCKET_SLOTS; i++)
	{
		uint32_t	rest = (uint32_t) (w >> (12 + i * f)) & rmask;

		slots[i].fp = (rest & ~UINT32_C(0xF)) | ((nib >> (4 * i)) & 0xF);
		slots[i].tag = rest & 0xF;
	}
}

void
cwin_bucket_read(const CwinLayout *layout, const uint8_t *block, uint32_t b,
				 CwinSlot *slots)
{
	decode(layout, bucket_load(layout, block, b), slots);
}

static inline uint64_t
sort_key(const CwinLayout *layout, const CwinSlot *s)
{
	return ((uint64_t) (s->fp & 0xF) << layout->fp_bits) |
		(s->fp & ~UINT32_C(0xF)) | s->tag;
}

void
cwin_bucket_write(const CwinLayout *layout, uint8_t *block, uint32_t b,
				  const CwinSlot *slots)
{
	uint64_t	k[CWIN_BUCKET_SLOTS];
	uint32_t	f = layout->fp_bits;
	uint16_t	packed = 0;
	cwin_u128	w;

	for (int i = 0; i < CWIN_BUCKET_SLOTS; i++)
		k[i] = sort_key(layout, &slots[i]);
	/* insertion sort of four */
	for (int i = 1; i < CWIN_BUCKET_SLOTS; i++)
	{
		uint64_t	x = k[i];
		int			j = i - 1;

		while (j >= 0 && k[j] > x)
		{
			k[j + 1] = k[j];
			j--;
		}
		k[j + 1] = x;
	}
	for (int i = 0; i < CWIN_BUCKET_SLOTS; i++)
		packed |= (uint16_t) ((k[i] >> f) << (4 * i));
	w = cwin_code_of(packed);
	for (int i = 0; i < CWIN_BUCKET_SLOTS; i++)
		w |= (cwin_u128) (k[i] & ((UINT64_C(1) << f) - 1)) << (12 + i * f);
	bucket_store(layout, block, b, w);
}

/* ---- time ---- */

/* Tags whose epoch, in this block, is live: a mask by tag. */
static inline uint32_t
live_tags(const uint8_t *block, const CwinEpochs *epochs)
{
	int64_t		base = cwin_header_c(block)->base;
	int64_t		lo = epochs->epoch - epochs->nlive + 1;
	int64_t		hi = epochs->epoch;
	uint32_t	run,
				shift;

	/* live epochs that tags of this block can name: [lo, hi] */
	if (lo < base)
		lo = base;
	if (hi > base + CWIN_TAGS - 1)
		hi = base + CWIN_TAGS - 1;
	if (lo > hi)
		return 0;
	run = (UINT32_C(1) << (uint32_t) (hi - lo + 1)) - 1;
	shift = (uint32_t) (lo & (CWIN_TAGS - 1));
	return ((run << shift) | (run >> (CWIN_TAGS - shift))) & 0xFFFF;
}

uint32_t
cwin_block_live(const uint8_t *block, const CwinEpochs *epochs)
{
	uint32_t	mask = live_tags(block, epochs);
	uint32_t	n = 0;

	for (uint32_t t = 0; t < CWIN_TAGS; t++)
		if (mask & (UINT32_C(1) << t))
			n += cwin_header_c(block)->count[t];
	return n;
}

double
cwin_block_weighed_live(const uint8_t *block, const CwinEpochs *epochs,
						const double *weight)
{
	uint32_t	mask = live_tags(block, epochs);
	double		n = 0;

	for (int age = 0; age < epochs->nlive; age++)
	{
		uint32_t	t = (uint32_t) ((epochs->epoch - age) & (CWIN_TAGS - 1));

		if (mask & (UINT32_C(1) << t))
			n += weight[age] * cwin_header_c(block)->count[t];
	}
	return n;
}

uint32_t
cwin_block_used(const uint8_t *block)
{
	uint32_t	n = 0;

	for (uint32_t t = 0; t < CWIN_TAGS; t++)
		n += cwin_header_c(block)->count[t];
	return n;
}

/* ---- lookup ---- */

static inline bool
bucket_has(const CwinLayout *layout, const uint8_t *block, uint32_t b,
		   const uint32_t *want)
{
	CwinSlot	s[CWIN_BUCKET_SLOTS];

	cwin_bucket_read(layout, block, b, s);
	return s[0].fp == want[s[0].tag] || s[1].fp == want[s[1].tag] ||
		s[2].fp == want[s[2].tag] || s[3].fp == want[s[3].tag];
}

/*
 * Does a bucket hold fingerprint fp under a tag of `live` (a mask by tag)?
 * Nonzero if so; computed without branches.
 */
static inline uint32_t
word_has(const CwinLayout *layout, cwin_u128 w, uint32_t fp, uint32_t live)
{
	CwinSlot	s[CWIN_BUCKET_SLOTS];
	uint32_t	hit = 0;

	decode(layout, w, s);
	for (int i = 0; i < CWIN_BUCKET_SLOTS; i++)
		hit |= (uint32_t) (s[i].fp == fp) & (live >> s[i].tag);
	return hit & 1;
}

bool
cwin_block_contains(const CwinLayout *layout, const uint8_t *block,
					const CwinEpochs *epochs, const CwinKey *key)
{
	uint32_t	want[CWIN_TAGS];
	int64_t		base = cwin_header_c(block)->base;

	/*
	 * Every live epoch keyed alike (no split since the oldest began): one
	 * fingerprint, two buckets, both read before either is looked at, so
	 * that their cache misses overlap.
	 */
	if (epochs->parts[epochs->nlive - 1] == epochs->parts[0])
	{
		uint32_t	b2 = cwin_alt_bucket(layout, key->bucket, key->fp[0]);
		cwin_u128	w1 = bucket_load(layout, block, key->bucket);
		cwin_u128	w2 = bucket_load(layout, block, b2);
		uint32_t	live = live_tags(block, epochs);

		return (word_has(layout, w1, key->fp[0], live) |
				word_has(layout, w2, key->fp[0], live)) != 0;
	}

	/* what each tag's slots must hold to be this operation: dead ones none */
	for (uint32_t t = 0; t < CWIN_TAGS; t++)
	{
		int64_t		age = epochs->epoch - cwin_tag_epoch(base, t);

		want[t] = (age >= 0 && age < epochs->nlive) ? key->fp[age] : CWIN_NO_MATCH;
	}
	if (bucket_has(layout, block, key->bucket, want))
		return true;

	/* the other bucket of each distinct fingerprint */
	for (int i = 0; i < epochs->nlive; i++)
	{
		uint32_t	b2;

		if (i > 0 && key->fp[i] == key->fp[i - 1])
			continue;
		b2 = cwin_alt_bucket(layout, key->bucket, key->fp[i]);
		if (b2 != key->bucket && bucket_has(layout, block, b2, want))
			return true;
	}
	return false;
}

/* ---- sweep ---- */

uint32_t
cwin_block_sweep(const CwinLayout *layout, uint8_t *block,
				 const CwinEpochs *epochs)
{
	CwinHeader *h = cwin_header(block);
	int64_t		oldest = epochs->epoch - epochs->nlive + 1;
	uint32_t	dead = 0;
	uint32_t	emptied = 0;

	for (uint32_t t = 0; t < CWIN_TAGS; t++)
		if (h->count[t] > 0 && cwin_tag_epoch(h->base, t) < oldest)
			dead |= UINT32_C(1) << t;

	if (dead != 0)
	{
		for (uint32_t b = 0; b < layout->nbuckets; b++)
		{
			CwinSlot	s[CWIN_BUCKET_SLOTS];
			bool		changed = false;

			cwin_bucket_read(layout, block, b, s);
			for (int i = 0; i < CWIN_BUCKET_SLOTS; i++)
			{
				if (s[i].fp != 0 && (dead & (UINT32_C(1) << s[i].tag)))
				{
					s[i].fp = 0;
					s[i].tag = 0;
					changed = true;
					emptied++;
				}
			}
			if (changed)
				cwin_bucket_write(layout, block, b, s);
		}
		for (uint32_t t = 0; t < CWIN_TAGS; t++)
			if (dead & (UINT32_C(1) << t))
				h->count[t] = 0;
	}
	if (oldest > h->base)
		h->base = oldest;
	return emptied;
}

/* ---- insert ---- */

typedef struct SearchNode
{
	uint32_t	bucket;			/* bucket reached */
	CwinSlot	moved;			/* the parent's resident that would move here */
	int32_t		parent;			/* queue index, -1 for a root */
	uint32_t	depth;			/* displacements to reach this bucket */
} SearchNode;

/* a free (empty or expired) slot of bucket b, or -1 */
static inline int
free_slot(const CwinSlot *s, uint32_t live)
{
	for (int i = 0; i < CWIN_BUCKET_SLOTS; i++)
		if (s[i].fp == 0 || !(live & (UINT32_C(1) << s[i].tag)))
			return i;
	return -1;
}

/* replace the first slot equal to `old` in bucket b with `new` */
static void
bucket_replace(const CwinLayout *layout, uint8_t *block, uint32_t b,
			   CwinSlot old, CwinSlot new)
{
	CwinSlot	s[CWIN_BUCKET_SLOTS];

	cwin_bucket_read(layout, block, b, s);
	for (int i = 0; i < CWIN_BUCKET_SLOTS; i++)
	{
		if (s[i].fp == old.fp && s[i].tag == old.tag)
		{
			s[i] = new;
			cwin_bucket_write(layout, block, b, s);
			return;
		}
	}
}

/* put `entry` in free slot i of bucket b (s: its slots), counting */
static void
put_free(const CwinLayout *layout, uint8_t *block, uint32_t b, CwinSlot *s,
		 int i, CwinSlot entry)
{
	CwinHeader *h = cwin_header(block);

	if (s[i].fp != 0)
		h->count[s[i].tag]--;	/* an expired entry, taken back */
	s[i] = entry;
	cwin_bucket_write(layout, block, b, s);
}

int
cwin_block_insert(const CwinLayout *layout, uint8_t *block,
				  const CwinEpochs *epochs, const CwinKey *key)
{
	CwinSlot	entry = {key->fp[0], (uint32_t) (epochs->epoch & (CWIN_TAGS - 1))};
	uint32_t	b1 = key->bucket,
				b2 = cwin_alt_bucket(layout, b1, entry.fp);
	uint32_t	live;
	CwinSlot	s[CWIN_BUCKET_SLOTS];
	int			i;
	SearchNode	queue[CWIN_MAX_KICKS + 2];
	uint64_t	visited[65536 / 64];
	uint32_t	head = 0,
				tail = 0,
				limit = layout->max_kicks + 2;

	if (cwin_block_needs_sweep(block, epochs->epoch))
		cwin_block_sweep(layout, block, epochs);
	live = live_tags(block, epochs);

	cwin_bucket_read(layout, block, b1, s);
	if ((i = free_slot(s, live)) >= 0)
	{
		put_free(layout, block, b1, s, i, entry);
		cwin_header(block)->count[entry.tag]++;
		return 0;
	}
	cwin_bucket_read(layout, block, b2, s);
	if ((i = free_slot(s, live)) >= 0)
	{
		put_free(layout, block, b2, s, i, entry);
		cwin_header(block)->count[entry.tag]++;
		return 0;
	}

	/*
	 * Breadth-first search for the shortest chain of displacements ending
	 * at a free slot; nothing moves until one is found.
	 */
	memset(visited, 0, ((layout->nbuckets + 63) / 64) * sizeof(uint64_t));
	queue[tail++] = (SearchNode) {b1, {0, 0}, -1, 0};
	visited[b1 / 64] |= UINT64_C(1) << (b1 % 64);
	if (b2 != b1)
	{
		queue[tail++] = (SearchNode) {b2, {0, 0}, -1, 0};
		visited[b2 / 64] |= UINT64_C(1) << (b2 % 64);
	}
	for (; head < tail; head++)
	{
		SearchNode *node = &queue[head];
		CwinSlot	res[CWIN_BUCKET_SLOTS];

		if (node->depth + 1 > layout->max_kicks)
			break;
		cwin_bucket_read(layout, block, node->bucket, res);
		for (int r = 0; r < CWIN_BUCKET_SLOTS; r++)
		{
			uint32_t	alt = cwin_alt_bucket(layout, node->bucket, res[r].fp);
			CwinSlot	t[CWIN_BUCKET_SLOTS];
			int			moves;
			int32_t		n;
			CwinSlot	moving;

			if (visited[alt / 64] & (UINT64_C(1) << (alt % 64)))
				continue;
			cwin_bucket_read(layout, block, alt, t);
			if ((i = free_slot(t, live)) < 0)
			{
				if (tail < limit)
				{
					queue[tail++] = (SearchNode) {alt, res[r], (int32_t) head, node->depth + 1};
					visited[alt / 64] |= UINT64_C(1) << (alt % 64);
				}
				continue;
			}

			/*
			 * Found: res[r] moves into alt's free slot; then each node's
			 * moved resident takes the place of the one that left its
			 * parent... down to a root, which takes the new entry.
			 */
			put_free(layout, block, alt, t, i, res[r]);
			moves = 1;
			moving = res[r];
			for (n = (int32_t) head; queue[n].parent >= 0; n = queue[n].parent)
			{
				bucket_replace(layout, block, queue[n].bucket, moving, queue[n].moved);
				moving = queue[n].moved;
				moves++;
			}
			bucket_replace(layout, block, queue[n].bucket, moving, entry);
			cwin_header(block)->count[entry.tag]++;
			return moves;
		}
	}
	return -1;
}

/* ---- split ---- */

int
cwin_block_split(const CwinLayout *layout, const uint8_t *block,
				 const CwinEpochs *epochs, uint32_t parts, uint32_t factor,
				 uint8_t *const *children, const char **why)
{
	const CwinHeader *h = cwin_header_c(block);
	uint32_t	f = layout->fp_bits;
	int			used[CWIN_TAGS];	/* routing bits used, by tag; -1 dead */
	uint32_t	lf = 0;
	int			copies = 0;

	if (factor < 2 || factor > CWIN_MAX_SPLIT || (factor & (factor - 1)) != 0)
	{
		*why = "A split makes a power of two of children, 2 to 64.";
		return -1;
	}
	while ((UINT32_C(1) << lf) < factor)
		lf++;

	for (uint32_t t = 0; t < CWIN_TAGS; t++)
	{
		int64_t		age = epochs->epoch - cwin_tag_epoch(h->base, t);
		uint32_t	p0,
					k = 0;

		used[t] = -1;
		if (age < 0 || age >= epochs->nlive)
			continue;
		p0 = epochs->parts[age];
		while (p0 != 0 && ((uint64_t) p0 << k) < parts)
			k++;
		if (p0 == 0 || ((uint64_t) p0 << k) != parts)
		{
			*why = "An epoch's key partitions do not divide the page's by a power of two.";
			return -1;
		}
		used[t] = (int) k;
	}

	for (uint32_t j = 0; j < factor; j++)
	{
		cwin_block_init(layout, children[j], h->base);
	}
	for (uint32_t b = 0; b < layout->nbuckets; b++)
	{
		CwinSlot	s[CWIN_BUCKET_SLOTS];
		CwinSlot	c[CWIN_MAX_SPLIT][CWIN_BUCKET_SLOTS];
		uint64_t	touched = 0;

		cwin_bucket_read(layout, block, b, s);
		for (int i = 0; i < CWIN_BUCKET_SLOTS; i++)
		{
			uint32_t	route,
						first,
						n;
			int			avail;

			if (s[i].fp == 0 || used[s[i].tag] < 0)
				continue;
			route = s[i].fp >> (f - CWIN_ROUTE_BITS);
			avail = CWIN_ROUTE_BITS - used[s[i].tag];
			if (avail >= (int) lf)
			{
				first = (route >> (avail - lf)) & (factor - 1);
				n = 1;
			}
			else if (avail > 0)
			{
				first = (route & ((UINT32_C(1) << avail) - 1)) << (lf - avail);
				n = UINT32_C(1) << (lf - avail);
			}
			else
			{
				first = 0;
				n = factor;
			}
			if (n > 1)
				copies++;
			for (uint32_t j = first; j < first + n; j++)
			{
				if (!(touched & (UINT64_C(1) << j)))
				{
					memset(c[j], 0, sizeof(c[j]));
					touched |= UINT64_C(1) << j;
				}
				c[j][i] = s[i];
				cwin_header(children[j])->count[s[i].tag]++;
			}
		}
		for (uint32_t j = 0; j < factor; j++)
			if (touched & (UINT64_C(1) << j))
				cwin_bucket_write(layout, children[j], b, c[j]);
	}
	return copies;
}

/* ---- checks ---- */

bool
cwin_block_check(const CwinLayout *layout, const uint8_t *block, const char **why)
{
	uint32_t	count[CWIN_TAGS] = {0};
	const CwinHeader *h = cwin_header_c(block);
	size_t		end = CWIN_HEADER_BYTES + ((uint64_t) layout->nbuckets * layout->bucket_bits) / 8;
	unsigned	endbit = (unsigned) (((uint64_t) layout->nbuckets * layout->bucket_bits) % 8);

	for (uint32_t b = 0; b < layout->nbuckets; b++)
	{
		cwin_u128	w = bucket_load(layout, block, b);
		CwinSlot	s[CWIN_BUCKET_SLOTS];
		uint8_t		copy[CWIN_HEADER_BYTES + 32];

		if ((uint32_t) (w & 0xFFF) >= CWIN_CODES)
		{
			*why = "A bucket's nibble code is out of range.";
			return false;
		}
		decode(layout, w, s);
		for (int i = 0; i < CWIN_BUCKET_SLOTS; i++)
		{
			if (s[i].fp == 0 && s[i].tag != 0)
			{
				*why = "An empty slot has a tag.";
				return false;
			}
			if (s[i].fp != 0)
				count[s[i].tag]++;
		}
		/* canonical: writing the slots back gives the same bits */
		{
			CwinLayout	one = *layout;

			one.nbuckets = 1;
			memset(copy, 0, sizeof(copy));
			cwin_bucket_write(&one, copy, 0, s);
			if (bucket_load(&one, copy, 0) != w)
			{
				*why = "A bucket's slots are not in canonical order.";
				return false;
			}
		}
	}
	for (uint32_t t = 0; t < CWIN_TAGS; t++)
	{
		if (count[t] != h->count[t])
		{
			*why = "A tag's count is not its entries.";
			return false;
		}
	}
	/* nothing past the last bucket */
	if (endbit != 0 && (block[end] >> endbit) != 0)
	{
		*why = "Bits are set past the last bucket.";
		return false;
	}
	for (size_t i = end + (endbit != 0); i < cwin_block_size(layout); i++)
	{
		if (block[i] != 0)
		{
			*why = "Bits are set past the last bucket.";
			return false;
		}
	}
	return true;
}

double
cwin_fpp(const CwinLayout *layout, double live, int used_bits)
{
	double		load = live / cwin_nslots(layout);
	double		p = 2.0 * CWIN_BUCKET_SLOTS * load *
		ldexp(1.0, used_bits - (int) layout->fp_bits);

	return p > 1.0 ? 1.0 : p;
}
