/*-------------------------------------------------------------------------
 *
 * test_cuckoo.c
 *	  Standalone randomized property tests of the pure cuckoo table
 *	  (src/cuckoo_table.c): layout sizing, tags and addressing, insertion
 *	  with no false negative up to a high load, the all-or-nothing failed
 *	  insert, killed bits that travel with their entries, deletion and
 *	  reuse, duplicate tags, and the append path of overflow pages.
 *
 * Every entry gets its own TID, a counter from 1 (never six zero bytes),
 * so an entry can be followed by its TID wherever the walks move it.
 *
 * Usage: test_cuckoo [seed]   (prints TAP; the seed makes failures repeatable)
 *
 *-------------------------------------------------------------------------
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuckoo_table.h"
#include "tap.h"

#define SPACE		8144		/* the payload of an 8 kB index page */
#define MAX_FOUND	(2 * CUCKOO_MAX_BUCKET_SIZE)

static uint64_t seed = 20151103;

static const uint32_t fp_widths[] = {8, 12, 16};

/* What the test knows of the entry with TID number n (entries[n]). */
typedef struct Entry
{
	uint32_t	tag;
	bool		live;			/* inserted and not cleared */
	bool		killed;			/* its killed bit must be set */
} Entry;

static void
make_tid(uint64_t n, uint8_t *tid)
{
	for (int i = 0; i < CUCKOO_TID_BYTES; i++)
		tid[i] = (uint8_t) (n >> (8 * i));
}

static uint64_t
tid_number(const uint8_t *tid)
{
	uint64_t	n = 0;

	for (int i = 0; i < CUCKOO_TID_BYTES; i++)
		n |= (uint64_t) tid[i] << (8 * i);
	return n;
}

static bool
new_layout(CuckooLayout *layout, uint32_t fp, uint32_t bucket_size,
		   uint32_t max_kicks)
{
	bool		ok = cuckoo_layout_init(layout, SPACE, fp, bucket_size,
										max_kicks);

	CHECK(ok, "layout fp %u bucket %u kicks %u", fp, bucket_size, max_kicks);
	return ok;
}

/* exactly the block's size, so that AddressSanitizer sees any overrun */
static uint8_t *
new_block(const CuckooLayout *layout)
{
	uint8_t    *block = malloc(cuckoo_block_size(layout));

	cuckoo_block_init(layout, block);
	return block;
}

static uint32_t
random_tag(uint64_t *rng, const CuckooLayout *layout)
{
	return cuckoo_tag(test_rand(rng), layout->tag_bits);
}

/*
 * Is the entry (tag, TID number n) among cuckoo_block_find()'s answers?
 * Also checks that every answer is a used slot holding the tag, in one of
 * the tag's buckets, and not killed when killed slots are skipped.
 */
static bool
found(const CuckooLayout *layout, const uint8_t *block, uint32_t tag,
	  uint64_t n, bool skip_killed)
{
	uint32_t	slots[MAX_FOUND];
	uint32_t	b1,
				b2;
	int			nfound = cuckoo_block_find(layout, block, tag, skip_killed,
										   slots);
	bool		result = false;

	cuckoo_buckets(layout, tag, &b1, &b2);
	CHECK(nfound >= 0 && nfound <= (int) (2 * layout->bucket_size),
		  "find returned %d", nfound);
	for (int i = 0; i < nfound && i < MAX_FOUND; i++)
	{
		uint32_t	s = slots[i];

		CHECK(s < cuckoo_nslots(layout), "slot %u out of range", s);
		if (s >= cuckoo_nslots(layout))
			continue;
		CHECK(cuckoo_slot_used(layout, block, s) &&
			  cuckoo_slot_tag(layout, block, s) == tag,
			  "find(%06x) answered slot %u holding %06x", tag, s,
			  cuckoo_slot_tag(layout, block, s));
		CHECK(s / layout->bucket_size == b1 || s / layout->bucket_size == b2,
			  "find(%06x) answered slot %u outside buckets %u, %u",
			  tag, s, b1, b2);
		CHECK(!skip_killed || !cuckoo_slot_killed(layout, block, s),
			  "find(%06x) skipping killed answered killed slot %u", tag, s);
		if (tid_number(cuckoo_slot_tid(layout, block, s)) == n)
			result = true;
	}
	return result;
}

/*
 * Check a block against what the test knows (entries[1..nentries]): each
 * live entry sits in exactly one slot, with its tag and its killed bit, and
 * is found by cuckoo_block_find() (unless killed and skipped); nothing else
 * is in the block; empty slots are all zero.  With in_place, every entry
 * sits in one of its tag's buckets.  slot_of[n], if given, gets the slot
 * of entry n.  Returns the number of used slots.
 */
static uint32_t
verify_block(const CuckooLayout *layout, const uint8_t *block,
			 const Entry *entries, uint64_t nentries, bool in_place,
			 uint32_t *slot_of, const char *what)
{
	uint32_t	nslots = cuckoo_nslots(layout);
	uint8_t    *seen = calloc(nentries + 1, 1);
	uint32_t	used = 0;
	uint64_t	nlive = 0;
	int			bad = 0;

	for (uint32_t s = 0; s < nslots; s++)
	{
		uint64_t	n;

		if (!cuckoo_slot_used(layout, block, s))
		{
			CHECK(cuckoo_slot_tag(layout, block, s) == 0 &&
				  !cuckoo_slot_killed(layout, block, s),
				  "%s: empty slot %u not zero (tag %x, killed %d)", what, s,
				  cuckoo_slot_tag(layout, block, s),
				  cuckoo_slot_killed(layout, block, s));
			continue;
		}
		used++;
		n = tid_number(cuckoo_slot_tid(layout, block, s));
		if (n < 1 || n > nentries || !entries[n].live || seen[n])
		{
			CHECK(false, "%s: slot %u holds TID %llu (unknown, cleared or twice)",
				  what, s, (unsigned long long) n);
			continue;
		}
		seen[n] = 1;
		if (slot_of)
			slot_of[n] = s;
		if (cuckoo_slot_tag(layout, block, s) != entries[n].tag ||
			cuckoo_slot_killed(layout, block, s) != entries[n].killed ||
			(in_place && !cuckoo_slot_in_place(layout, block, s)))
			bad++;
		CHECK(cuckoo_slot_tag(layout, block, s) == entries[n].tag,
			  "%s: TID %llu in slot %u has tag %x, inserted with %x", what,
			  (unsigned long long) n, s, cuckoo_slot_tag(layout, block, s),
			  entries[n].tag);
		CHECK(cuckoo_slot_killed(layout, block, s) == entries[n].killed,
			  "%s: TID %llu in slot %u: killed %d, expected %d", what,
			  (unsigned long long) n, s, cuckoo_slot_killed(layout, block, s),
			  entries[n].killed);
		CHECK(!in_place || cuckoo_slot_in_place(layout, block, s),
			  "%s: TID %llu in slot %u out of place", what,
			  (unsigned long long) n, s);
	}
	for (uint64_t n = 1; n <= nentries; n++)
	{
		if (!entries[n].live)
		{
			CHECK(!in_place || !found(layout, block, entries[n].tag, n, false),
				  "%s: cleared TID %llu still found", what,
				  (unsigned long long) n);
			continue;
		}
		nlive++;
		CHECK(seen[n], "%s: TID %llu lost", what, (unsigned long long) n);
		if (!in_place)
			continue;
		CHECK(found(layout, block, entries[n].tag, n, false),
			  "%s: TID %llu (tag %x) not found", what,
			  (unsigned long long) n, entries[n].tag);
		CHECK(found(layout, block, entries[n].tag, n, true) == !entries[n].killed,
			  "%s: TID %llu (killed %d) wrongly %s when skipping killed", what,
			  (unsigned long long) n, entries[n].killed,
			  entries[n].killed ? "found" : "missed");
	}
	CHECK(used == nlive, "%s: %u used slots, %llu live entries", what, used,
		  (unsigned long long) nlive);
	CHECK(cuckoo_block_count(layout, block) == used,
		  "%s: count %u, %u used slots", what,
		  cuckoo_block_count(layout, block), used);
	CHECK(bad == 0, "%s: %d misplaced entries", what, bad);
	free(seen);
	return used;
}

/*
 * Insert random tags with TIDs *next, *next + 1, ... until an insert
 * fails (or "limit" entries are in the block).  Returns the number of
 * successful inserts; *kicked counts those that displaced anything.
 * entries[] must have room for the TIDs the block can hold.
 */
static uint32_t
fill(const CuckooLayout *layout, uint8_t *block, uint64_t *rng,
	 Entry *entries, uint64_t *next, uint32_t limit, uint32_t *kicked)
{
	uint32_t	nslots = cuckoo_nslots(layout);
	uint32_t	count = cuckoo_block_count(layout, block);
	uint32_t	inserted = 0;

	while (count < limit)
	{
		uint32_t	tag = random_tag(rng, layout);
		uint8_t		tid[CUCKOO_TID_BYTES];
		int			r;

		make_tid(*next, tid);
		r = cuckoo_block_insert(layout, block, tag, tid);
		if (r < 0)
			break;
		CHECK(r <= (int) layout->max_kicks, "insert made %d kicks, max %u",
			  r, layout->max_kicks);
		CHECK(count < nslots, "insert into a full block succeeded");
		if (count >= nslots)
			break;
		entries[*next].tag = tag;
		entries[*next].live = true;
		entries[*next].killed = false;
		(*next)++;
		count++;
		inserted++;
		if (r > 0 && kicked)
			(*kicked)++;
	}
	return inserted;
}

/*
 * Fill a block to saturation: insert random tags until "patience" inserts
 * in a row have failed.  Less noisy than the first failure, which is where
 * a single unlucky walk happens to end.  Returns the successful inserts.
 */
static uint32_t
fill_up(const CuckooLayout *layout, uint8_t *block, uint64_t *rng,
		Entry *entries, uint64_t *next, int patience)
{
	uint32_t	inserted = 0;

	for (int failures = 0; failures < patience;)
	{
		uint32_t	n = fill(layout, block, rng, entries, next,
							 cuckoo_nslots(layout) + 1, NULL);

		inserted += n;
		failures = n > 0 ? 1 : failures + 1;
	}
	return inserted;
}

/* Set the killed bit of about one used slot in "one_in". */
static uint32_t
kill_some(const CuckooLayout *layout, uint8_t *block, uint64_t *rng,
		  Entry *entries, uint32_t one_in)
{
	uint32_t	nkilled = 0;

	for (uint32_t s = 0; s < cuckoo_nslots(layout); s++)
	{
		if (!cuckoo_slot_used(layout, block, s) ||
			test_rand_below(rng, one_in) != 0)
			continue;
		cuckoo_slot_set_killed(layout, block, s);
		entries[tid_number(cuckoo_slot_tid(layout, block, s))].killed = true;
		nkilled++;
	}
	return nkilled;
}

/* ---------------------------------------------------------------------- */

/*
 * A layout's block fits its space, and one more bucket would not; bad
 * parameters are refused.
 */
static void
test_layout(void)
{
	uint64_t	rng = seed ^ 1;
	CuckooLayout layout;
	static const uint32_t bad_fp[] = {0, 7, 9, 20};

	for (int f = 0; f < 3; f++)
	{
		uint32_t	fp = fp_widths[f];

		for (uint32_t bs = 1; bs <= 16; bs++)
		{
			CuckooLayout bigger;
			CuckooLayout one;
			uint32_t	nslots;
			size_t		size;
			size_t		space1;

			memset(&layout, 0, sizeof(layout));
			if (!cuckoo_layout_init(&layout, SPACE, fp, bs, 500))
			{
				CHECK(false, "fp %u bucket %u: refused", fp, bs);
				continue;
			}
			nslots = cuckoo_nslots(&layout);
			size = cuckoo_block_size(&layout);
			CHECK(layout.tag_bits == fp + 16 &&
				  layout.tag_bytes == (fp == 8 ? 3u : 4u) &&
				  layout.bucket_size == bs && layout.max_kicks == 500,
				  "fp %u bucket %u: tag_bits %u tag_bytes %u bucket %u kicks %u",
				  fp, bs, layout.tag_bits, layout.tag_bytes,
				  layout.bucket_size, layout.max_kicks);
			CHECK(layout.nbuckets > 1, "fp %u bucket %u: %u buckets", fp, bs,
				  layout.nbuckets);
			CHECK(size <= SPACE, "fp %u bucket %u: %zu bytes", fp, bs, size);
			CHECK(size == (size_t) nslots * (layout.tag_bytes + CUCKOO_TID_BYTES) +
				  (nslots + 7) / 8,
				  "fp %u bucket %u: size %zu for %u slots", fp, bs, size, nslots);
			bigger = layout;
			bigger.nbuckets++;
			CHECK(cuckoo_block_size(&bigger) > SPACE,
				  "fp %u bucket %u: %u buckets fit too (%zu bytes)", fp, bs,
				  bigger.nbuckets, cuckoo_block_size(&bigger));

			/* the smallest space that holds one bucket, and one byte less */
			one = layout;
			one.nbuckets = 1;
			space1 = cuckoo_block_size(&one);
			CHECK(cuckoo_layout_init(&one, space1, fp, bs, 500) &&
				  one.nbuckets == 1,
				  "fp %u bucket %u: one bucket in %zu bytes", fp, bs, space1);
			CHECK(!cuckoo_layout_init(&one, space1 - 1, fp, bs, 500),
				  "fp %u bucket %u: accepted %zu bytes", fp, bs, space1 - 1);
		}
	}

	for (int i = 0; i < 4; i++)
		CHECK(!cuckoo_layout_init(&layout, SPACE, bad_fp[i], 4, 500),
			  "fingerprint bits %u accepted", bad_fp[i]);
	CHECK(!cuckoo_layout_init(&layout, SPACE, 12, 0, 500), "bucket size 0 accepted");
	CHECK(!cuckoo_layout_init(&layout, SPACE, 12, 17, 500), "bucket size 17 accepted");
	CHECK(!cuckoo_layout_init(&layout, SPACE, 12, 4, CUCKOO_MAX_KICKS + 1),
		  "max_kicks %u accepted", CUCKOO_MAX_KICKS + 1);
	CHECK(!cuckoo_layout_init(&layout, SPACE, 12, 4, UINT32_MAX),
		  "max_kicks %u accepted", UINT32_MAX);
	CHECK(cuckoo_layout_init(&layout, SPACE, 12, 4, CUCKOO_MAX_KICKS),
		  "max_kicks %u refused", CUCKOO_MAX_KICKS);
	CHECK(cuckoo_layout_init(&layout, SPACE, 12, 4, 0), "max_kicks 0 refused");
	CHECK(!cuckoo_layout_init(&layout, 0, 12, 4, 500), "space 0 accepted");

	/* random spaces: maximal when accepted, not even one bucket when not */
	for (int i = 0; i < 3000; i++)
	{
		size_t		space = (size_t) test_rand_below(&rng, 40000);
		uint32_t	fp = fp_widths[test_rand_below(&rng, 3)];
		uint32_t	bs = 1 + (uint32_t) test_rand_below(&rng, 16);
		CuckooLayout bigger;

		if (cuckoo_layout_init(&layout, space, fp, bs, 100))
		{
			bigger = layout;
			bigger.nbuckets++;
			CHECK(cuckoo_block_size(&layout) <= space &&
				  cuckoo_block_size(&bigger) > space,
				  "space %zu fp %u bucket %u: %u buckets, %zu bytes", space,
				  fp, bs, layout.nbuckets, cuckoo_block_size(&layout));
			CHECK(cuckoo_nslots(&layout) <= UINT16_MAX, "%u slots",
				  cuckoo_nslots(&layout));
		}
		else
		{
			bigger.bucket_size = bs;
			bigger.tag_bits = cuckoo_tag_bits_for(fp);
			bigger.tag_bytes = (bigger.tag_bits + 7) / 8;
			bigger.nbuckets = 1;
			CHECK(cuckoo_block_size(&bigger) > space,
				  "space %zu fp %u bucket %u refused, but one bucket fits",
				  space, fp, bs);
		}
	}
}

/*
 * Tags use their bits; pages are in range and split in two on doubling;
 * pages and buckets are spread evenly; the two buckets differ.
 */
static void
test_tags_and_addressing(void)
{
	uint64_t	rng = seed ^ 2;
	static const uint32_t nbuckets_list[] = {1, 2, 3, 5, 64, 100, 227, 1000,
	4093, 65535};

	for (int f = 0; f < 3; f++)
	{
		uint32_t	bits = cuckoo_tag_bits_for(fp_widths[f]);
		uint64_t	limit = UINT64_C(1) << bits;
		const int	ntags = 100000;
		int			top = 0,
					low = 0;
		uint32_t	counts[64] = {0};
		uint32_t	cmin = UINT32_MAX,
					cmax = 0;

		for (int i = 0; i < ntags; i++)
		{
			uint32_t	tag = cuckoo_tag(test_rand(&rng), bits);

			CHECK((uint64_t) tag < limit, "tag %x has more than %u bits", tag,
				  bits);
			top += (tag >> (bits - 1)) & 1;
			low += tag & 1;
		}
		CHECK(top > ntags * 0.48 && top < ntags * 0.52,
			  "%u bits: top bit set in %d of %d tags", bits, top, ntags);
		CHECK(low > ntags * 0.48 && low < ntags * 0.52,
			  "%u bits: low bit set in %d of %d tags", bits, low, ntags);

		for (int i = 0; i < 100000; i++)
		{
			uint32_t	tag = cuckoo_tag(test_rand(&rng), bits);
			uint32_t	n = 1 + (uint32_t) test_rand_below(&rng, 100000);
			uint32_t	big = 1 + (uint32_t) test_rand_below(&rng, UINT32_MAX);
			uint32_t	p = cuckoo_page_of(tag, bits, n);
			uint32_t	p2 = cuckoo_page_of(tag, bits, 2 * n);

			CHECK(p < n, "tag %x: page %u of %u", tag, p, n);
			CHECK(cuckoo_page_of(tag, bits, big) < big, "tag %x: page %u of %u",
				  tag, cuckoo_page_of(tag, bits, big), big);
			CHECK(p2 == 2 * p || p2 == 2 * p + 1,
				  "tag %x: page %u of %u, but %u of %u", tag, p, n, p2, 2 * n);
			CHECK(cuckoo_page_of(0, bits, n) == 0 &&
				  cuckoo_page_of((uint32_t) (limit - 1), bits, n) == n - 1,
				  "%u bits, %u pages: extreme tags on pages %u and %u", bits,
				  n, cuckoo_page_of(0, bits, n),
				  cuckoo_page_of((uint32_t) (limit - 1), bits, n));
		}

		for (int i = 0; i < 640000; i++)
		{
			uint32_t	p = cuckoo_page_of(cuckoo_tag(test_rand(&rng), bits),
										   bits, 64);

			CHECK(p < 64, "page %u of 64", p);
			if (p < 64)
				counts[p]++;
		}
		for (int p = 0; p < 64; p++)
		{
			CHECK(counts[p] >= 9000 && counts[p] <= 11000,
				  "%u bits: page %d of 64 got %u of 640000 tags", bits, p,
				  counts[p]);
			cmin = counts[p] < cmin ? counts[p] : cmin;
			cmax = counts[p] > cmax ? counts[p] : cmax;
		}
		printf("# %u-bit tags over 64 pages: %u .. %u per page (mean 10000)\n",
			   bits, cmin, cmax);
	}

	for (size_t i = 0; i < sizeof(nbuckets_list) / sizeof(nbuckets_list[0]); i++)
	{
		CuckooLayout layout;
		uint32_t	n = nbuckets_list[i];
		uint8_t    *hit1 = calloc(n, 1);
		uint8_t    *hit2 = calloc(n, 1);
		uint32_t	missed = 0;

		if (!new_layout(&layout, fp_widths[i % 3], 4, 500))
			continue;
		layout.nbuckets = n;
		for (int t = 0; t < 20000; t++)
		{
			uint32_t	tag = random_tag(&rng, &layout);
			uint32_t	b1,
						b2;

			cuckoo_buckets(&layout, tag, &b1, &b2);
			CHECK(b1 < n && b2 < n, "tag %x: buckets %u, %u of %u", tag, b1, b2,
				  n);
			if (n > 1)
				CHECK(b1 != b2, "tag %x: buckets %u, %u of %u", tag, b1, b2, n);
			else
				CHECK(b1 == 0 && b2 == 0, "tag %x: buckets %u, %u of 1", tag,
					  b1, b2);
			if (b1 < n && b2 < n)
				hit1[b1] = hit2[b2] = 1;
		}
		/* 20000 tags leave a bucket unused with odds e^-20 per bucket */
		if (n <= 1000)
			for (uint32_t b = 0; b < n; b++)
				missed += !hit1[b] + !hit2[b];
		CHECK(missed == 0, "%u buckets: %u never a first or second choice", n,
			  missed);
		free(hit1);
		free(hit2);
	}
}

/*
 * Fill blocks with random tags until an insert fails: every entry is then
 * found, in one of its buckets, and the load reached is high.
 */
static void
test_fill(void)
{
	uint64_t	rng = seed ^ 3;
	static const uint32_t bucket_sizes[] = {2, 4, 8};

	for (int f = 0; f < 3; f++)
	{
		for (int b = 0; b < 3; b++)
		{
			CuckooLayout layout;
			uint32_t	nslots;
			double		lmin = 1,
						lmax = 0;
			uint32_t	kicked = 0,
						total = 0;

			if (!new_layout(&layout, fp_widths[f], bucket_sizes[b], 500))
				continue;
			nslots = cuckoo_nslots(&layout);
			for (int round = 0; round < 8; round++)
			{
				uint8_t    *block = new_block(&layout);
				Entry	   *entries = calloc(nslots + 2, sizeof(Entry));
				uint64_t	next = 1;
				uint32_t	n;
				double		load;

				n = fill(&layout, block, &rng, entries, &next, nslots + 1,
						 &kicked);
				total += n;
				verify_block(&layout, block, entries, next - 1, true, NULL,
							 "full block");
				CHECK(n == cuckoo_block_count(&layout, block),
					  "%u inserts, count %u", n,
					  cuckoo_block_count(&layout, block));
				load = (double) n / nslots;
				lmin = load < lmin ? load : lmin;
				lmax = load > lmax ? load : lmax;
				free(entries);
				free(block);
			}
			printf("# fp %2u, bucket %u, %4u slots: load reached %.3f .. %.3f "
				   "(%.1f%% of inserts kicked)\n",
				   fp_widths[f], bucket_sizes[b], nslots, lmin, lmax,
				   100.0 * kicked / total);
			if (bucket_sizes[b] == 4)
				CHECK(lmin >= 0.90, "fp %u bucket 4: load %.3f", fp_widths[f],
					  lmin);
			/* even two-slot buckets get far past the one-choice load */
			CHECK(lmin >= 0.75, "fp %u bucket %u: load %.3f", fp_widths[f],
				  bucket_sizes[b], lmin);
		}
	}
}

/*
 * On a full block (with some killed bits), inserts that fail leave every
 * byte as it was; those that succeed add exactly their entry.
 */
static void
test_failed_insert_unchanged(void)
{
	uint64_t	rng = seed ^ 4;
	static const struct
	{
		uint32_t	fp,
					bs,
					kicks;
	}			cases[] =
	{
		{8, 1, 100}, {12, 4, 500}, {16, 8, 0}, {16, 2, CUCKOO_MAX_KICKS},
		{8, 16, 50}, {12, 4, 1}
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
	{
		CuckooLayout layout;
		uint32_t	nslots;
		size_t		size;
		uint8_t    *block;
		uint8_t    *copy;
		Entry	   *entries;
		uint64_t	next = 1;
		uint32_t	count;
		int			nfail = 0,
					nok = 0;

		if (!new_layout(&layout, cases[c].fp, cases[c].bs, cases[c].kicks))
			continue;
		nslots = cuckoo_nslots(&layout);
		size = cuckoo_block_size(&layout);
		block = new_block(&layout);
		copy = malloc(size);
		entries = calloc(nslots + 2, sizeof(Entry));
		count = fill(&layout, block, &rng, entries, &next, nslots + 1, NULL);
		kill_some(&layout, block, &rng, entries, 4);

		for (int attempt = 0; attempt < 1000; attempt++)
		{
			uint32_t	tag = random_tag(&rng, &layout);
			uint8_t		tid[CUCKOO_TID_BYTES];
			int			r;

			make_tid(next, tid);
			memcpy(copy, block, size);
			r = cuckoo_block_insert(&layout, block, tag, tid);
			if (r < 0)
			{
				CHECK(r == -1, "insert returned %d", r);
				CHECK(memcmp(copy, block, size) == 0,
					  "fp %u bucket %u kicks %u: failed insert of %x changed "
					  "the block", cases[c].fp, cases[c].bs, cases[c].kicks, tag);
				memcpy(block, copy, size);
				nfail++;
				continue;
			}
			CHECK(r <= (int) layout.max_kicks, "%d kicks, max %u", r,
				  layout.max_kicks);
			CHECK(count < nslots, "insert into a full block");
			if (count >= nslots)
				break;
			entries[next].tag = tag;
			entries[next].live = true;
			entries[next].killed = false;
			CHECK(found(&layout, block, tag, next, true),
				  "new entry %x not found", tag);
			next++;
			count++;
			nok++;
		}
		printf("# fp %2u, bucket %2u, kicks %4u: full at %u of %u slots; "
			   "then %d inserts failed, %d succeeded\n",
			   cases[c].fp, cases[c].bs, cases[c].kicks,
			   count - nok, nslots, nfail, nok);
		CHECK(nfail > 0, "no insert failed on a full block");
		verify_block(&layout, block, entries, next - 1, true, NULL,
					 "after failed inserts");
		free(entries);
		free(copy);
		free(block);
	}
}

/*
 * Killed entries are skipped or returned by find() as asked, and keep
 * their killed bit when later inserts kick them to their other bucket.
 */
static void
test_killed_bits(void)
{
	uint64_t	rng = seed ^ 5;
	static const uint32_t cases[][2] = {{16, 4}, {8, 2}, {12, 8}};

	for (int c = 0; c < 3; c++)
	{
		CuckooLayout layout;
		uint32_t	nslots;
		uint8_t    *block;
		Entry	   *entries;
		uint32_t   *before;
		uint32_t   *after;
		uint64_t	next = 1;
		uint32_t	nkilled;
		uint32_t	kicked = 0;
		uint32_t	moved_killed = 0,
					moved_live = 0;
		uint32_t	n;

		if (!new_layout(&layout, cases[c][0], cases[c][1], 500))
			continue;
		nslots = cuckoo_nslots(&layout);
		block = new_block(&layout);
		entries = calloc(nslots + 2, sizeof(Entry));
		before = calloc(nslots + 2, sizeof(uint32_t));
		after = calloc(nslots + 2, sizeof(uint32_t));

		/* to 75%: few kicks so far */
		n = fill(&layout, block, &rng, entries, &next, nslots * 3 / 4, NULL);
		CHECK(n == nslots * 3 / 4, "only %u of %u inserts", n, nslots * 3 / 4);
		nkilled = kill_some(&layout, block, &rng, entries, 3);
		CHECK(nkilled > 0, "nothing killed");
		verify_block(&layout, block, entries, next - 1, true, before,
					 "after killing");

		/* to full: many kicks, which must carry the killed bits along */
		fill(&layout, block, &rng, entries, &next, nslots + 1, &kicked);
		verify_block(&layout, block, entries, next - 1, true, after,
					 "after kicks");
		for (uint64_t t = 1; t <= n; t++)
		{
			if (before[t] == after[t])
				continue;
			if (entries[t].killed)
				moved_killed++;
			else
				moved_live++;
		}
		printf("# fp %2u, bucket %u: %u of %u entries killed; filling up "
			   "kicked %u times, moving %u killed and %u live entries\n",
			   cases[c][0], cases[c][1], nkilled, n, kicked, moved_killed,
			   moved_live);
		CHECK(kicked > 0 && moved_killed > 0,
			  "the test moved no killed entry (%u kicks)", kicked);
		free(after);
		free(before);
		free(entries);
		free(block);
	}
}

/*
 * Clearing half the slots of a full block forgets exactly those entries,
 * and the freed space takes about as many new ones.  "Full" is saturation
 * (see fill_up()), reached the same way before and after.
 */
static void
test_delete_and_reuse(void)
{
	uint64_t	rng = seed ^ 6;
	static const uint32_t cases[][2] = {{12, 4}, {8, 2}, {16, 8}, {8, 4}};

	for (int c = 0; c < 4; c++)
	{
		CuckooLayout layout;
		uint32_t	nslots;
		uint8_t    *block;
		Entry	   *entries;
		uint32_t   *used;
		uint64_t	next = 1;
		uint32_t	full,
					nused = 0,
					ncleared,
					refull;

		if (!new_layout(&layout, cases[c][0], cases[c][1], 500))
			continue;
		nslots = cuckoo_nslots(&layout);
		block = new_block(&layout);
		entries = calloc(2 * nslots + 2, sizeof(Entry));
		used = malloc(nslots * sizeof(uint32_t));

		full = fill_up(&layout, block, &rng, entries, &next, 200);
		kill_some(&layout, block, &rng, entries, 4);

		/* clear a random half of the used slots */
		for (uint32_t s = 0; s < nslots; s++)
			if (cuckoo_slot_used(&layout, block, s))
				used[nused++] = s;
		CHECK(nused == full, "%u used, %u inserted", nused, full);
		for (uint32_t i = nused - 1; i > 0; i--)
		{
			uint32_t	j = (uint32_t) test_rand_below(&rng, i + 1);
			uint32_t	tmp = used[i];

			used[i] = used[j];
			used[j] = tmp;
		}
		ncleared = nused / 2;
		for (uint32_t i = 0; i < ncleared; i++)
		{
			uint64_t	t = tid_number(cuckoo_slot_tid(&layout, block, used[i]));

			cuckoo_slot_clear(&layout, block, used[i]);
			entries[t].live = false;
		}
		/* cleared entries not found, the others are (verify checks both) */
		CHECK(verify_block(&layout, block, entries, next - 1, true, NULL,
						   "after clearing") == full - ncleared,
			  "count after clearing %u of %u", ncleared, full);

		/* new entries go into the freed space */
		refull = full - ncleared +
			fill_up(&layout, block, &rng, entries, &next, 200);
		verify_block(&layout, block, entries, next - 1, true, NULL,
					 "after refilling");
		printf("# fp %2u, bucket %u: saturated at %u of %u slots; cleared %u; "
			   "saturated again at %u\n", cases[c][0], cases[c][1], full, nslots,
			   ncleared, refull);
		CHECK(refull + nslots * 3 / 100 >= full &&
			  refull <= full + nslots * 3 / 100,
			  "fp %u bucket %u: full at %u, then at %u of %u slots",
			  cases[c][0], cases[c][1], full, refull, nslots);
		free(used);
		free(entries);
		free(block);
	}
}

/*
 * One tag with many TIDs: its two buckets hold 2 * bucket_size of them
 * (one bucket's worth if the block has one bucket), and find() returns
 * them all.
 */
static void
test_duplicates(void)
{
	uint64_t	rng = seed ^ 7;

	for (int f = 0; f < 3; f++)
	{
		for (uint32_t bs = 1; bs <= 16; bs++)
		{
			for (int one_bucket = 0; one_bucket < 2; one_bucket++)
			{
				CuckooLayout layout;
				uint8_t    *block;
				uint8_t    *copy;
				size_t		size;
				uint32_t	tag;
				uint32_t	fit;
				uint32_t	slots[MAX_FOUND];
				uint8_t		tid[CUCKOO_TID_BYTES];
				bool		seen[MAX_FOUND + 1] = {false};
				int			nfound,
							r;

				if (!new_layout(&layout, fp_widths[f], bs, 100))
					continue;
				if (one_bucket)
				{
					layout.nbuckets = 1;
					CHECK(cuckoo_layout_init(&layout, cuckoo_block_size(&layout),
											 fp_widths[f], bs, 100) &&
						  layout.nbuckets == 1, "no one-bucket layout");
				}
				CHECK(one_bucket || layout.nbuckets > 1, "%u buckets",
					  layout.nbuckets);
				fit = one_bucket ? bs : 2 * bs;
				size = cuckoo_block_size(&layout);
				block = new_block(&layout);
				copy = malloc(size);
				tag = random_tag(&rng, &layout);

				for (uint32_t i = 1; i <= fit; i++)
				{
					make_tid(i, tid);
					r = cuckoo_block_insert(&layout, block, tag, tid);
					CHECK(r == 0, "fp %u bucket %u: duplicate %u of %x: %d",
						  fp_widths[f], bs, i, tag, r);
				}
				memcpy(copy, block, size);
				make_tid(fit + 1, tid);
				r = cuckoo_block_insert(&layout, block, tag, tid);
				CHECK(r == -1, "fp %u bucket %u%s: duplicate %u of %x: %d",
					  fp_widths[f], bs, one_bucket ? " (one bucket)" : "",
					  fit + 1, tag, r);
				CHECK(memcmp(copy, block, size) == 0, "failed insert changed block");
				CHECK(cuckoo_block_count(&layout, block) == fit, "count %u of %u",
					  cuckoo_block_count(&layout, block), fit);

				nfound = cuckoo_block_find(&layout, block, tag, false, slots);
				CHECK(nfound == (int) fit, "fp %u bucket %u: found %d of %u",
					  fp_widths[f], bs, nfound, fit);
				for (int i = 0; i < nfound && i < MAX_FOUND; i++)
				{
					uint64_t	t = tid_number(cuckoo_slot_tid(&layout, block,
															   slots[i]));

					CHECK(t >= 1 && t <= fit && !seen[t], "TID %llu found",
						  (unsigned long long) t);
					if (t >= 1 && t <= fit)
						seen[t] = true;
					CHECK(cuckoo_slot_in_place(&layout, block, slots[i]),
						  "slot %u out of place", slots[i]);
				}

				/* one killed: skipped, or not */
				cuckoo_slot_set_killed(&layout, block, slots[0]);
				CHECK(cuckoo_block_find(&layout, block, tag, true, slots) ==
					  (int) fit - 1, "killed duplicate not skipped");
				CHECK(cuckoo_block_find(&layout, block, tag, false, slots) ==
					  (int) fit, "killed duplicate not returned");
				free(copy);
				free(block);
			}
		}
	}
}

/*
 * Overflow pages: append fills the slots in order, refuses when full, and
 * refills the first empty slots; a scan finds every entry.
 */
static void
test_append(void)
{
	uint64_t	rng = seed ^ 8;
	static const uint32_t bucket_sizes[] = {1, 4, 16};

	for (int f = 0; f < 3; f++)
	{
		for (int b = 0; b < 3; b++)
		{
			CuckooLayout layout;
			uint32_t	nslots;
			size_t		size;
			uint8_t    *block;
			uint8_t    *copy;
			uint32_t   *tags;
			uint8_t		tid[CUCKOO_TID_BYTES];
			uint8_t    *cleared;
			int			r;
			uint32_t	bad = 0;

			if (!new_layout(&layout, fp_widths[f], bucket_sizes[b], 500))
				continue;
			nslots = cuckoo_nslots(&layout);
			size = cuckoo_block_size(&layout);
			block = new_block(&layout);
			copy = malloc(size);
			tags = malloc((nslots + 1) * sizeof(uint32_t));
			cleared = calloc(nslots, 1);

			for (uint32_t i = 0; i < nslots; i++)
			{
				tags[i] = random_tag(&rng, &layout);
				make_tid(i + 1, tid);
				r = cuckoo_block_append(&layout, block, tags[i], tid);
				if (r != (int) i)
					bad++;
				CHECK(r == (int) i, "append %u went to %d", i, r);
			}
			memcpy(copy, block, size);
			make_tid(nslots + 1, tid);
			r = cuckoo_block_append(&layout, block, random_tag(&rng, &layout), tid);
			CHECK(r == -1, "append to a full block: %d", r);
			CHECK(memcmp(copy, block, size) == 0, "failed append changed block");
			CHECK(cuckoo_block_count(&layout, block) == nslots, "count %u of %u",
				  cuckoo_block_count(&layout, block), nslots);

			/* find by scan: every slot holds its tag and TID */
			for (uint32_t i = 0; i < nslots; i++)
			{
				uint32_t	hits = 0;
				bool		mine = false;

				for (uint32_t s = 0; s < nslots; s++)
				{
					if (!cuckoo_slot_used(&layout, block, s) ||
						cuckoo_slot_tag(&layout, block, s) != tags[i])
						continue;
					hits++;
					if (tid_number(cuckoo_slot_tid(&layout, block, s)) == i + 1)
						mine = s == i;
				}
				if (!mine || cuckoo_slot_killed(&layout, block, i))
					bad++;
				CHECK(mine && hits >= 1, "entry %u (tag %x) not found by scan",
					  i, tags[i]);
				CHECK(!cuckoo_slot_killed(&layout, block, i), "slot %u killed", i);
			}

			/* clear some; appends refill them lowest first */
			for (int k = 0; k < 20; k++)
			{
				uint32_t	s = (uint32_t) test_rand_below(&rng, nslots);

				cuckoo_slot_set_killed(&layout, block, s);
				cuckoo_slot_clear(&layout, block, s);
				cleared[s] = 1;
			}
			for (uint32_t s = 0; s < nslots; s++)
			{
				if (!cleared[s])
					continue;
				make_tid(nslots + 2 + s, tid);
				r = cuckoo_block_append(&layout, block, tags[s], tid);
				CHECK(r == (int) s, "append after clearing went to %d, not %u",
					  r, s);
				CHECK(!cuckoo_slot_killed(&layout, block, s),
					  "refilled slot %u still killed", s);
			}
			CHECK(cuckoo_block_append(&layout, block, 0, tid) == -1,
				  "append to a refilled block succeeded");

			/* an entry put over a killed one is a new, live entry */
			{
				uint32_t	s = (uint32_t) test_rand_below(&rng, nslots);
				uint32_t	tag = random_tag(&rng, &layout);

				cuckoo_slot_set_killed(&layout, block, s);
				make_tid(3 * nslots, tid);
				cuckoo_slot_put(&layout, block, s, tag, tid);
				CHECK(cuckoo_slot_tag(&layout, block, s) == tag &&
					  tid_number(cuckoo_slot_tid(&layout, block, s)) == 3 * nslots &&
					  !cuckoo_slot_killed(&layout, block, s),
					  "put over killed slot %u", s);
			}
			CHECK(bad == 0, "%u bad slots", bad);
			free(cleared);
			free(tags);
			free(copy);
			free(block);
		}
	}
}

/*
 * Placements are part of the on-disk format: an index built by one build
 * of the extension is read by the next.  These values must never change
 * within format version 1 (CUCKOO_VERSION).
 */
static void
test_frozen_placements(void)
{
	static const struct
	{
		uint64_t	hash;
		uint32_t	tag24;
		uint32_t	page_of_1300;
		uint32_t	b1;
		uint32_t	b2;
		uint32_t	tag32;
	}			frozen[] = {
		{UINT64_C(0x0000000000000000), 0x000000, 0, 0, 107, 0x00000000},
		{UINT64_C(0x0000000000000001), 0xb456bc, 915, 171, 139, 0xb456bcfc},
		{UINT64_C(0x000000000000002a), 0x810879, 655, 56, 144, 0x81087960},
		{UINT64_C(0xdeadbeefcafebabe), 0x708299, 571, 159, 160, 0x70829950},
		{UINT64_C(0xffffffffffffffff), 0x64b572, 511, 115, 178, 0x64b5720b},
	};
	CuckooLayout layout;

	CHECK(cuckoo_layout_init(&layout, 8144, 8, 4, 500), "default layout");
	CHECK(layout.nbuckets == 223, "nbuckets %u", layout.nbuckets);
	for (size_t i = 0; i < sizeof(frozen) / sizeof(frozen[0]); i++)
	{
		uint32_t	tag = cuckoo_tag(frozen[i].hash, 24);
		uint32_t	b1,
					b2;

		cuckoo_buckets(&layout, tag, &b1, &b2);
		CHECK(tag == frozen[i].tag24, "tag24 of %zu: %06x", i, tag);
		CHECK(cuckoo_page_of(tag, 24, 1300) == frozen[i].page_of_1300,
			  "page of %zu", i);
		CHECK(b1 == frozen[i].b1 && b2 == frozen[i].b2,
			  "buckets of %zu: %u %u", i, b1, b2);
		CHECK(cuckoo_tag(frozen[i].hash, 32) == frozen[i].tag32,
			  "tag32 of %zu", i);
	}
}

int
main(int argc, char **argv)
{
	if (argc > 1)
		seed = strtoull(argv[1], NULL, 10);
	printf("# seed %llu\n", (unsigned long long) seed);

	run_test("layout fits its space, maximally; bad parameters refused",
			 test_layout);
	run_test("tags, pages (doubling splits), buckets in range and spread",
			 test_tags_and_addressing);
	run_test("filled to failure: no false negative, high load", test_fill);
	run_test("failed insert leaves the block byte-identical",
			 test_failed_insert_unchanged);
	run_test("killed bits: skipped on request, carried by kicks",
			 test_killed_bits);
	run_test("delete and reuse", test_delete_and_reuse);
	run_test("duplicate tags fill exactly their two buckets", test_duplicates);
	run_test("append fills in order; scan finds every entry", test_append);
	run_test("placements are frozen (on-disk format)", test_frozen_placements);
	return tap_done();
}
