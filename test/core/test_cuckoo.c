/*-------------------------------------------------------------------------
 *
 * test_cuckoo.c
 *	  Standalone randomized property tests of the pure cuckoo table
 *	  (src/core/cuckoo_table.c): layout sizing; keys, pages and buckets; the
 *	  alternative bucket as an involution; the rest bits of a tag across
 *	  doublings (no false negative as the table grows, few false matches);
 *	  insertion with no false negative up to a high load; the false match
 *	  rate of lookups in a loaded block; the all-or-nothing failed insert;
 *	  killed bits that travel with their entries; deletion and reuse;
 *	  duplicate keys; the append path of overflow pages; and the frozen
 *	  values of the on-disk format.
 *
 * Keys are random 64-bit hashes put through cuckoo_key(), as the index
 * does: each entry remembers the tag it was stored with (which is also its
 * probe tag, the page count being the same) and its first bucket, and is
 * looked up with those, through cuckoo_block_find().
 *
 * Every entry gets its own TID, a counter from 1 (never six zero bytes),
 * so an entry can be followed by its TID wherever the walks move it.
 *
 * Usage: test_cuckoo [seed]   (prints TAP; the seed makes failures repeatable)
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuckoo_table.h"
#include "tap.h"

#define SPACE		8144		/* the payload of an 8 kB index page */
#define MAX_FOUND	(2 * CUCKOO_MAX_BUCKET_SIZE)

/*
 * The page count of the table the block tests' keys are made for.  A block
 * does not depend on it: it only sets the rest bits of the tags.
 */
#define NPAGES		1300

static uint64_t seed = 20151103;

static const uint32_t fp_widths[] = {8, 12, 16};

/* What the test knows of the entry with TID number n (entries[n]). */
typedef struct Entry
{
	uint32_t	tag;			/* stored tag, and the key's probe tag */
	uint32_t	first;			/* the key's first bucket */
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

/* The fingerprint width a layout was made for (cuckoo_tag_bits_for()). */
static uint32_t
fingerprint_bits_of(const CuckooLayout *layout)
{
	return layout->tag_bits - 16;
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

/* The tag and first bucket of a key with this hash, as the index makes them. */
static void
key_entry(const CuckooLayout *layout, uint64_t hash, uint32_t npages,
		  Entry *e)
{
	CuckooKey	key = cuckoo_key(hash, fingerprint_bits_of(layout));

	e->tag = cuckoo_make_tag(key.fp, cuckoo_rest_of(key.addr, npages));
	e->first = cuckoo_first_bucket(layout, key.bucket);
	e->live = false;
	e->killed = false;
}

/* A random key of the block tests. */
static void
random_entry(uint64_t *rng, const CuckooLayout *layout, Entry *e)
{
	key_entry(layout, test_rand(rng), NPAGES, e);
}

/* The first address of page p of n: ceil(p * 2^64 / n). */
static unsigned __int128
page_start(uint32_t p, uint32_t n)
{
	return (((unsigned __int128) p << 64) + n - 1) / n;
}

/* A random address on page p of n. */
static uint64_t
random_addr_in_page(uint64_t *rng, uint32_t p, uint32_t n)
{
	unsigned __int128 lo = page_start(p, n);
	unsigned __int128 width = page_start(p + 1, n) - lo;

	return (uint64_t) (lo + (unsigned __int128) test_rand(rng) % width);
}

/*
 * Is the entry with TID number n (key e) among cuckoo_block_find()'s
 * answers to e's probe?  Also checks that every answer is a used slot
 * whose tag matches the probe, in one of the key's buckets, and not killed
 * when killed slots are skipped.
 */
static bool
found(const CuckooLayout *layout, const uint8_t *block, const Entry *e,
	  uint64_t n, bool skip_killed)
{
	uint32_t	slots[MAX_FOUND];
	uint32_t	b1 = e->first,
				b2 = cuckoo_alt_bucket(layout, e->first, cuckoo_tag_fp(e->tag));
	int			nfound = cuckoo_block_find(layout, block, e->tag, e->first,
										   skip_killed, slots);
	bool		result = false;

	CHECK(nfound >= 0 && nfound <= (int) (2 * layout->bucket_size),
		  "find returned %d", nfound);
	for (int i = 0; i < nfound && i < MAX_FOUND; i++)
	{
		uint32_t	s = slots[i];

		CHECK(s < cuckoo_nslots(layout), "slot %u out of range", s);
		if (s >= cuckoo_nslots(layout))
			continue;
		CHECK(cuckoo_slot_used(layout, block, s) &&
			  cuckoo_tag_matches(cuckoo_slot_tag(layout, block, s), e->tag),
			  "find(%08x) answered slot %u holding %08x", e->tag, s,
			  cuckoo_slot_tag(layout, block, s));
		CHECK(s / layout->bucket_size == b1 || s / layout->bucket_size == b2,
			  "find(%08x) answered slot %u outside buckets %u, %u",
			  e->tag, s, b1, b2);
		CHECK(!skip_killed || !cuckoo_slot_killed(layout, block, s),
			  "find(%08x) skipping killed answered killed slot %u", e->tag, s);
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
 * sits in one of its key's buckets.  slot_of[n], if given, gets the slot
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
			(in_place && !cuckoo_slot_in_place(layout, block, s,
											   entries[n].first)))
			bad++;
		CHECK(cuckoo_slot_tag(layout, block, s) == entries[n].tag,
			  "%s: TID %llu in slot %u has tag %x, inserted with %x", what,
			  (unsigned long long) n, s, cuckoo_slot_tag(layout, block, s),
			  entries[n].tag);
		CHECK(cuckoo_slot_killed(layout, block, s) == entries[n].killed,
			  "%s: TID %llu in slot %u: killed %d, expected %d", what,
			  (unsigned long long) n, s, cuckoo_slot_killed(layout, block, s),
			  entries[n].killed);
		CHECK(!in_place || cuckoo_slot_in_place(layout, block, s,
												entries[n].first),
			  "%s: TID %llu in slot %u out of place (first bucket %u)", what,
			  (unsigned long long) n, s, entries[n].first);
	}
	for (uint64_t n = 1; n <= nentries; n++)
	{
		if (!entries[n].live)
		{
			CHECK(!in_place || !found(layout, block, &entries[n], n, false),
				  "%s: cleared TID %llu still found", what,
				  (unsigned long long) n);
			continue;
		}
		nlive++;
		CHECK(seen[n], "%s: TID %llu lost", what, (unsigned long long) n);
		if (!in_place)
			continue;
		CHECK(found(layout, block, &entries[n], n, false),
			  "%s: TID %llu (tag %x, bucket %u) not found", what,
			  (unsigned long long) n, entries[n].tag, entries[n].first);
		CHECK(found(layout, block, &entries[n], n, true) == !entries[n].killed,
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
 * Insert random keys with TIDs *next, *next + 1, ... until an insert
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
		Entry		e;
		uint8_t		tid[CUCKOO_TID_BYTES];
		int			r;

		random_entry(rng, layout, &e);
		make_tid(*next, tid);
		r = cuckoo_block_insert(layout, block, e.tag, e.first, tid);
		if (r < 0)
			break;
		CHECK(r <= (int) layout->max_kicks, "insert made %d kicks, max %u",
			  r, layout->max_kicks);
		CHECK(count < nslots, "insert into a full block succeeded");
		if (count >= nslots)
			break;
		e.live = true;
		entries[*next] = e;
		(*next)++;
		count++;
		inserted++;
		if (r > 0 && kicked)
			(*kicked)++;
	}
	return inserted;
}

/*
 * Fill a block to saturation: insert random keys until "patience" inserts
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
 * Keys use their bits; tags hold a fingerprint and a rest; pages are in
 * range and split in two on doubling, the half being the top rest bit;
 * pages and buckets are spread evenly.
 */
static void
test_keys_and_addressing(void)
{
	uint64_t	rng = seed ^ 2;
	static const uint32_t nbuckets_list[] = {1, 2, 3, 5, 64, 100, 227, 1000,
	4093, 65535};

	for (int f = 0; f < 3; f++)
	{
		uint32_t	fbits = fp_widths[f];
		uint32_t	tbits = cuckoo_tag_bits_for(fbits);
		const int	nkeys = 100000;
		int			fp_top = 0,
					fp_low = 0,
					bucket_top = 0,
					bucket_low = 0,
					addr_top = 0,
					rest_top = 0;
		uint32_t	counts[64] = {0};
		uint32_t	cmin = UINT32_MAX,
					cmax = 0;

		for (int i = 0; i < nkeys; i++)
		{
			CuckooKey	key = cuckoo_key(test_rand(&rng), fbits);
			uint32_t	n = 1 + (uint32_t) test_rand_below(&rng, UINT32_MAX);
			uint32_t	rest = cuckoo_rest_of(key.addr, n);
			uint32_t	tag = cuckoo_make_tag(key.fp, rest);

			CHECK(key.fp < (UINT32_C(1) << fbits), "fp %x has more than %u bits",
				  key.fp, fbits);
			CHECK(rest <= CUCKOO_REST_MASK && (rest & 1) == 1,
				  "rest %x of a fresh address: not 15 bits and a sentinel", rest);
			CHECK((uint64_t) tag < (UINT64_C(1) << tbits),
				  "tag %x has more than %u bits", tag, tbits);
			CHECK(cuckoo_tag_fp(tag) == key.fp && cuckoo_tag_rest(tag) == rest,
				  "tag %x: fp %x rest %x, made of %x and %x", tag,
				  cuckoo_tag_fp(tag), cuckoo_tag_rest(tag), key.fp, rest);
			fp_top += (key.fp >> (fbits - 1)) & 1;
			fp_low += key.fp & 1;
			bucket_top += key.bucket >> 31;
			bucket_low += key.bucket & 1;
			addr_top += (int) (key.addr >> 63);
			rest_top += rest >> 15;
		}
#define HALF(x, what) \
		CHECK((x) > nkeys * 0.48 && (x) < nkeys * 0.52, \
			  "%u bits: %s set in %d of %d keys", fbits, what, (x), nkeys)
		HALF(fp_top, "top fp bit");
		HALF(fp_low, "low fp bit");
		HALF(bucket_top, "top bucket bit");
		HALF(bucket_low, "low bucket bit");
		HALF(addr_top, "top addr bit");
		HALF(rest_top, "top rest bit");
#undef HALF

		for (int i = 0; i < 100000; i++)
		{
			uint64_t	addr = cuckoo_key(test_rand(&rng), fbits).addr;
			uint32_t	n = 1 + (uint32_t) test_rand_below(&rng, 1u << 20);
			uint32_t	big = 1 + (uint32_t) test_rand_below(&rng, UINT32_MAX);
			uint32_t	p = cuckoo_page_of(addr, n);
			uint32_t	p2 = cuckoo_page_of(addr, 2 * n);
			uint32_t	pbig = cuckoo_page_of(addr, big);

			CHECK(p < n, "addr %llx: page %u of %u", (unsigned long long) addr,
				  p, n);
			CHECK(pbig < big, "addr %llx: page %u of %u",
				  (unsigned long long) addr, pbig, big);
			/* page p is [page_start(p), page_start(p + 1)) */
			CHECK(pbig < big && page_start(pbig, big) <= addr &&
				  addr < page_start(pbig + 1, big),
				  "addr %llx: page %u of %u does not hold it",
				  (unsigned long long) addr, pbig, big);
			CHECK(p2 == 2 * p + (cuckoo_rest_of(addr, n) >> 15),
				  "addr %llx: page %u of %u, rest %x, but page %u of %u",
				  (unsigned long long) addr, p, n, cuckoo_rest_of(addr, n),
				  p2, 2 * n);
			CHECK(cuckoo_page_of(0, n) == 0 &&
				  cuckoo_page_of(UINT64_MAX, n) == n - 1 &&
				  cuckoo_page_of(UINT64_MAX, big) == big - 1,
				  "%u pages: extreme addresses on pages %u and %u", n,
				  cuckoo_page_of(0, n), cuckoo_page_of(UINT64_MAX, n));
		}

		for (int i = 0; i < 640000; i++)
		{
			uint32_t	p = cuckoo_page_of(cuckoo_key(test_rand(&rng), fbits).addr,
										   64);

			CHECK(p < 64, "page %u of 64", p);
			if (p < 64)
				counts[p]++;
		}
		for (int p = 0; p < 64; p++)
		{
			CHECK(counts[p] >= 9000 && counts[p] <= 11000,
				  "%u bits: page %d of 64 got %u of 640000 keys", fbits, p,
				  counts[p]);
			cmin = counts[p] < cmin ? counts[p] : cmin;
			cmax = counts[p] > cmax ? counts[p] : cmax;
		}
		printf("# %u-bit fingerprints: keys over 64 pages: %u .. %u per page "
			   "(mean 10000)\n", fbits, cmin, cmax);
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
			Entry		e;
			uint32_t	b1,
						b2;

			random_entry(&rng, &layout, &e);
			b1 = e.first;
			b2 = cuckoo_alt_bucket(&layout, b1, cuckoo_tag_fp(e.tag));
			CHECK(b1 < n && b2 < n, "tag %x: buckets %u, %u of %u", e.tag, b1,
				  b2, n);
			if (n == 1)
				CHECK(b1 == 0 && b2 == 0, "tag %x: buckets %u, %u of 1", e.tag,
					  b1, b2);
			if (b1 < n && b2 < n)
				hit1[b1] = hit2[b2] = 1;
		}
		/* 20000 keys leave a bucket unused with odds e^-20 per bucket */
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
 * The other bucket of the other bucket is the bucket itself, whatever the
 * number of buckets (an entry is kicked knowing only its bucket and fp),
 * and it is another bucket nearly always.  (m(fp) - b) mod n equals b for
 * at most two buckets in n, so per bucket count at most 2 / n of the pairs
 * have one bucket only: 2% at 100 buckets, less over 100 .. 1000.
 */
static void
test_alt_bucket_involution(void)
{
	uint64_t	rng = seed ^ 9;
	CuckooLayout layout;
	const int	per_n = 4000;
	uint64_t	same_big = 0,
				total_big = 0;
	double		worst = 1;
	uint32_t	worst_n = 0;

	if (!new_layout(&layout, 16, 4, 500))
		return;
	for (uint32_t n = 1; n <= 1000; n++)
	{
		uint32_t	same = 0;

		layout.nbuckets = n;
		for (int i = 0; i < per_n; i++)
		{
			uint32_t	b = (uint32_t) test_rand_below(&rng, n);
			uint32_t	fbits = fp_widths[i % 3];
			uint32_t	fp = (uint32_t) test_rand(&rng) & ((1u << fbits) - 1);
			uint32_t	a = cuckoo_alt_bucket(&layout, b, fp);

			CHECK(a < n, "%u buckets: alt of %u (fp %x) is %u", n, b, fp, a);
			CHECK(a < n && cuckoo_alt_bucket(&layout, a, fp) == b,
				  "%u buckets: alt of %u (fp %x) is %u, whose alt is %u", n, b,
				  fp, a, a < n ? cuckoo_alt_bucket(&layout, a, fp) : 0);
			same += a == b;
		}
		if (n == 1)
			CHECK(same == (uint32_t) per_n, "one bucket: alt not 0");
		if (n >= 100)
		{
			double		differ = 1.0 - (double) same / per_n;

			same_big += same;
			total_big += per_n;
			if (differ < worst)
			{
				worst = differ;
				worst_n = n;
			}
			CHECK(differ >= 0.97, "%u buckets: alt differs in %.4f only", n,
				  differ);
		}
	}
	printf("# alt != bucket for %.4f%% of pairs over 100 .. 1000 buckets "
		   "(worst %.2f%% at %u buckets)\n",
		   100.0 * (1.0 - (double) same_big / total_big), 100.0 * worst,
		   worst_n);
	CHECK(1.0 - (double) same_big / total_big >= 0.99,
		  "alt == bucket for %llu of %llu pairs",
		  (unsigned long long) same_big, (unsigned long long) total_big);
}

/*
 * Rest bits across doublings.  A tag stored when the table had n pages is
 * split at each doubling: the half is the next bit of the address (the page
 * in the doubled table is 2 * page + half), and the stored tag still
 * matches the key's probe in the doubled table, and only the key's: other
 * addresses of the same page match with odds 2^-(rest bits left).  After
 * 15 doublings no bit is left; the tag then goes to both halves.
 *
 * n starts in [1, 2^20]; the page count must fit 32 bits, so a chain stops
 * where doubling it would not (a full chain needs n < 2^17).
 */
static void
test_rest_and_doubling(void)
{
	uint64_t	rng = seed ^ 10;
	const int	ntrials = 200000;
	uint64_t	tried[16] = {0};
	uint64_t	matched[16] = {0};
	uint32_t	full_chains = 0;

	for (int t = 0; t < ntrials; t++)
	{
		uint32_t	fbits = fp_widths[t % 3];
		CuckooKey	key = cuckoo_key(test_rand(&rng), fbits);
		uint64_t	addr = key.addr;
		/* one in four below 2^17, for more full chains */
		uint32_t	n0 = 1 + (uint32_t) test_rand_below(&rng, t % 4 == 0 ?
														(1u << 17) - 1 :
														1u << 20);
		uint32_t	stored = cuckoo_make_tag(key.fp, cuckoo_rest_of(addr, n0));
		uint32_t	k;

		for (k = 0; k <= 15; k++)
		{
			uint32_t	n = n0 << k;
			uint32_t	p = cuckoo_page_of(addr, n);
			uint32_t	probe = cuckoo_make_tag(key.fp, cuckoo_rest_of(addr, n));
			uint32_t	expect_rest = (cuckoo_rest_of(addr, n) &
									   (CUCKOO_REST_MASK << (k + 1)) &
									   CUCKOO_REST_MASK) | (1u << k);
			uint64_t	other = random_addr_in_page(&rng, p, n);
			uint32_t	other_probe = cuckoo_make_tag(key.fp,
													  cuckoo_rest_of(other, n));
			uint32_t	next_tag = 0;
			int			half;

			/* k splits leave the sentinel at bit k, over 15 - k bits */
			CHECK(cuckoo_tag_fp(stored) == key.fp &&
				  cuckoo_tag_rest(stored) == expect_rest,
				  "n %u, %u doublings: stored %x, expected fp %x rest %x",
				  n0, k, stored, key.fp, expect_rest);
			/* no false negative at any size */
			CHECK(cuckoo_tag_matches(stored, probe),
				  "n %u, %u doublings: stored %x does not match probe %x",
				  n0, k, stored, probe);
			CHECK(!cuckoo_tag_matches(stored, probe ^ (1u << 16)),
				  "n %u, %u doublings: stored %x matches another fp (%x)",
				  n0, k, stored, probe ^ (1u << 16));
			/* another address of the same page: matches 2^-(15 - k) */
			CHECK(cuckoo_page_of(other, n) == p, "addr %llx: not on page %u of %u",
				  (unsigned long long) other, p, n);
			tried[k]++;
			matched[k] += cuckoo_tag_matches(stored, other_probe);

			half = cuckoo_tag_split(stored, &next_tag);
			if (k == 15)
			{
				CHECK(cuckoo_tag_rest(stored) == CUCKOO_REST_EMPTY,
					  "n %u, 15 doublings: rest %x", n0, cuckoo_tag_rest(stored));
				CHECK(half == -1 && next_tag == stored,
					  "n %u: split with no rest bits: half %d, tag %x of %x",
					  n0, half, next_tag, stored);
				full_chains++;
				break;
			}
			if ((uint64_t) n * 2 > UINT32_MAX)
				break;
			CHECK(half == 0 || half == 1, "n %u, %u doublings: split of %x: %d",
				  n0, k, stored, half);
			CHECK(cuckoo_page_of(addr, 2 * n) == 2 * p + (uint32_t) half,
				  "n %u, %u doublings: page %u of %u, half %d, but page %u of %u",
				  n0, k, p, n, half, cuckoo_page_of(addr, 2 * n), 2 * n);
			CHECK(cuckoo_tag_matches(next_tag,
									 cuckoo_make_tag(key.fp,
													 cuckoo_rest_of(addr, 2 * n))),
				  "n %u, %u doublings: split tag %x does not match probe %x",
				  n0, k, next_tag,
				  cuckoo_make_tag(key.fp, cuckoo_rest_of(addr, 2 * n)));
			stored = next_tag;
		}
	}

	printf("# false match of a stored tag with another address of its page, "
		   "by rest bits left:\n#  ");
	for (int k = 0; k <= 15; k++)
	{
		int			left = 15 - k;
		double		expect = ldexp(1.0, -left);
		double		rate = tried[k] ? (double) matched[k] / tried[k] : 0;
		double		sd = sqrt(tried[k] * expect * (1 - expect));

		printf(" %d:%.2g", left, rate);
		CHECK(tried[k] >= 10000, "%d bits left: only %llu trials", left,
			  (unsigned long long) tried[k]);
		CHECK(fabs(matched[k] - tried[k] * expect) <= 6 * sd + 5,
			  "%d bits left: %llu false matches in %llu, expected %.1f", left,
			  (unsigned long long) matched[k], (unsigned long long) tried[k],
			  tried[k] * expect);
	}
	printf("\n# %u of %d chains doubled 15 times\n", full_chains, ntrials);
	CHECK(tried[0] > 0 && (double) matched[0] / tried[0] < 0.01,
		  "15 bits left: false match rate %.4f", (double) matched[0] / tried[0]);
	CHECK(matched[15] == tried[15], "no bit left, but %llu of %llu rejected",
		  (unsigned long long) (tried[15] - matched[15]),
		  (unsigned long long) tried[15]);
}

/*
 * Doublings of a block, as the index does them: each used slot goes, in
 * the same slot, to the half cuckoo_tag_split() says (to both when its
 * rest is used up), with its split tag.  Every entry is then found by
 * cuckoo_block_find() in the block of its page in the doubled table, with
 * its probe there, and is in no other.  Half the keys are on one page of
 * the table doubled 16 times, so that they stay in the block followed down
 * to that page and see their rest bits used up (after 15 doublings) and
 * copied to both halves; the others leave it on the way.
 */
static void
test_block_doubling(void)
{
	uint64_t	rng = seed ^ 12;
	const uint32_t ndoublings = 16;

	for (int round = 0; round < 6; round++)
	{
		uint32_t	fbits = fp_widths[round % 3];
		CuckooLayout layout;
		uint32_t	nslots;
		uint32_t	n0 = 1 + (uint32_t) test_rand_below(&rng, 1000);
		uint32_t	nfinal = n0 << ndoublings;
		uint32_t	q = (uint32_t) test_rand_below(&rng, n0);
		uint32_t	pfinal = (q << ndoublings) +
			(uint32_t) test_rand_below(&rng, 1u << ndoublings);
		uint8_t    *cur;
		uint64_t   *addr;
		uint32_t   *fp;
		uint32_t   *first;
		uint8_t    *in_half[2];
		uint8_t    *present;	/* TIDs in the block being split */
		uint32_t	count;
		uint32_t	copied_both = 0,
					false_answers = 0;

		if (!new_layout(&layout, fbits, 4, 500))
			continue;
		nslots = cuckoo_nslots(&layout);
		cur = new_block(&layout);
		addr = calloc(nslots + 1, sizeof(uint64_t));
		fp = calloc(nslots + 1, sizeof(uint32_t));
		first = calloc(nslots + 1, sizeof(uint32_t));
		in_half[0] = calloc(nslots + 1, 1);
		in_half[1] = calloc(nslots + 1, 1);
		present = calloc(nslots + 1, 1);

		/* fill to 90% with keys of page q of n0 */
		for (count = 0; count < nslots * 9 / 10; count++)
		{
			uint32_t	t = count + 1;
			CuckooKey	key = cuckoo_key(test_rand(&rng), fbits);
			uint8_t		tid[CUCKOO_TID_BYTES];

			key.addr = (t % 2) ? random_addr_in_page(&rng, pfinal, nfinal) :
				random_addr_in_page(&rng, q, n0);
			CHECK(cuckoo_page_of(key.addr, n0) == q, "addr %llx: not on page %u",
				  (unsigned long long) key.addr, q);
			addr[t] = key.addr;
			fp[t] = key.fp;
			first[t] = cuckoo_first_bucket(&layout, key.bucket);
			make_tid(t, tid);
			if (cuckoo_block_insert(&layout, cur,
									cuckoo_make_tag(key.fp,
													cuckoo_rest_of(key.addr, n0)),
									first[t], tid) < 0)
				break;
		}
		CHECK(count == nslots * 9 / 10, "fp %u: only %u of %u inserts", fbits,
			  count, nslots * 9 / 10);

		for (uint32_t k = 0; k < ndoublings; k++)
		{
			uint32_t	n = n0 << k;
			uint32_t	p = pfinal >> (ndoublings - k);
			uint8_t    *half_block[2];
			uint32_t	follow = (pfinal >> (ndoublings - k - 1)) & 1;

			half_block[0] = new_block(&layout);
			half_block[1] = new_block(&layout);
			memset(in_half[0], 0, nslots + 1);
			memset(in_half[1], 0, nslots + 1);
			memset(present, 0, nslots + 1);

			/* split every used slot of page p of n, as the index does */
			for (uint32_t s = 0; s < nslots; s++)
			{
				uint32_t	tag;
				int			half;
				uint64_t	t;

				if (!cuckoo_slot_used(&layout, cur, s))
					continue;
				t = tid_number(cuckoo_slot_tid(&layout, cur, s));
				half = cuckoo_tag_split(cuckoo_slot_tag(&layout, cur, s), &tag);
				CHECK(t >= 1 && t <= count, "slot %u: TID %llu", s,
					  (unsigned long long) t);
				if (t < 1 || t > count)
					continue;
				CHECK(!present[t], "TID %llu twice", (unsigned long long) t);
				present[t] = 1;
				CHECK(half < 0 || cuckoo_page_of(addr[t], 2 * n) == 2 * p + (uint32_t) half,
					  "%u doublings: TID %llu sent to half %d, but on page %u of %u",
					  k, (unsigned long long) t, half,
					  cuckoo_page_of(addr[t], 2 * n), 2 * n);
				CHECK((half < 0) == (k >= 15),
					  "%u doublings: TID %llu split to %d", k,
					  (unsigned long long) t, half);
				copied_both += half < 0;
				for (int h = 0; h < 2; h++)
				{
					if (half >= 0 && half != h)
						continue;
					cuckoo_slot_put(&layout, half_block[h], s, tag,
									cuckoo_slot_tid(&layout, cur, s));
					in_half[h][t] = 1;
				}
			}

			/* every entry is found in its page's half, with its probe there */
			for (uint32_t h = 0; h < 2; h++)
			{
				for (uint32_t t = 1; t <= count; t++)
				{
					uint32_t	slots[MAX_FOUND];
					uint32_t	probe = cuckoo_make_tag(fp[t],
														cuckoo_rest_of(addr[t], 2 * n));
					bool		mine = false;
					int			nfound;

					if (!in_half[h][t])
						continue;
					nfound = cuckoo_block_find(&layout, half_block[h], probe,
											   first[t], false, slots);
					for (int i = 0; i < nfound && i < MAX_FOUND; i++)
					{
						if (tid_number(cuckoo_slot_tid(&layout, half_block[h],
													   slots[i])) == t)
							mine = true;
						else
							false_answers++;
					}
					CHECK(mine || cuckoo_page_of(addr[t], 2 * n) != 2 * p + h,
						  "%u doublings: TID %llu (page %u of %u) not found in "
						  "half %u", k, (unsigned long long) t,
						  cuckoo_page_of(addr[t], 2 * n), 2 * n, h);
				}
			}
			/* and every entry of page p went to its page's half */
			for (uint32_t t = 1; t <= count; t++)
			{
				uint32_t	h = cuckoo_page_of(addr[t], 2 * n) - 2 * p;

				if (!present[t])
					continue;
				CHECK(h < 2 && in_half[h][t], "%u doublings: TID %u (page %u of "
					  "%u) missing from its half", k, t,
					  cuckoo_page_of(addr[t], 2 * n), 2 * n);
			}
			free(cur);
			cur = half_block[follow];
			free(half_block[1 - follow]);

			/* keys of the final page all stayed, with their slots */
			for (uint32_t t = 1; t <= count; t += 2)
				CHECK(in_half[follow][t], "%u doublings: TID %u of the final page "
					  "left the block", k, t);
		}

		/* at the end: the final page's keys (and copies of no-rest ones) */
		for (uint32_t t = 1; t <= count; t++)
		{
			Entry		e;

			e.tag = cuckoo_make_tag(fp[t], cuckoo_rest_of(addr[t], nfinal));
			e.first = first[t];
			if (cuckoo_page_of(addr[t], nfinal) == pfinal)
				CHECK(found(&layout, cur, &e, t, false),
					  "TID %u not found after %u doublings", t, ndoublings);
		}
		printf("# fp %2u: %u doublings from %u pages; %u entries copied to both "
			   "halves; %u false answers; %u entries at the end\n", fbits,
			   ndoublings, n0, copied_both, false_answers,
			   cuckoo_block_count(&layout, cur));
		CHECK(copied_both > 0, "no entry used up its rest bits");
		free(present);
		free(in_half[1]);
		free(in_half[0]);
		free(first);
		free(fp);
		free(addr);
		free(cur);
	}
}

/*
 * Fill blocks with random keys until an insert fails: every entry is then
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
 * False matches of lookups: a block 85% full of keys of one page (page 0
 * of 1000), probed with 200,000 absent keys of the same page.  A probe
 * compares with the ~7 entries of its two buckets, on fp and on the 15
 * rest bits, so about 7 * 2^-(fp + 15) answers per probe are expected
 * (8e-7 for 8-bit fingerprints); comparing fingerprints alone would give
 * 7 * 2^-fp (2.7% for 8 bits), which is printed for comparison.
 */
static void
test_false_match_rate(void)
{
	uint64_t	rng = seed ^ 11;
	const uint32_t npages = 1000;
	const uint64_t page0_end = UINT64_MAX / 1000 + 1;	/* addr < 2^64/1000 */
	const int	nprobes = 200000;

	for (int f = 0; f < 3; f++)
	{
		CuckooLayout layout;
		uint32_t	nslots;
		uint8_t    *block;
		Entry	   *entries;
		uint64_t	next = 1;
		uint32_t	target;
		uint64_t	answers = 0,
					fp_only = 0;
		uint32_t	fbits = fp_widths[f];
		double		rate;

		if (!new_layout(&layout, fbits, 4, 500))
			continue;
		nslots = cuckoo_nslots(&layout);
		target = (uint32_t) (nslots * 0.85);
		block = new_block(&layout);
		entries = calloc(nslots + 2, sizeof(Entry));

		while (next <= target)
		{
			CuckooKey	key = cuckoo_key(test_rand(&rng), fbits);
			Entry	   *e = &entries[next];
			uint8_t		tid[CUCKOO_TID_BYTES];
			int			r;

			key.addr = test_rand(&rng) % page0_end;
			CHECK(cuckoo_page_of(key.addr, npages) == 0, "addr %llx not on page 0",
				  (unsigned long long) key.addr);
			e->tag = cuckoo_make_tag(key.fp, cuckoo_rest_of(key.addr, npages));
			e->first = cuckoo_first_bucket(&layout, key.bucket);
			make_tid(next, tid);
			r = cuckoo_block_insert(&layout, block, e->tag, e->first, tid);
			CHECK(r >= 0, "fp %u: insert %llu of %u failed", fbits,
				  (unsigned long long) next, target);
			if (r < 0)
				break;
			e->live = true;
			next++;
		}
		verify_block(&layout, block, entries, next - 1, true, NULL,
					 "85% full");

		for (int i = 0; i < nprobes; i++)
		{
			CuckooKey	key = cuckoo_key(test_rand(&rng), fbits);
			uint32_t	probe;
			uint32_t	first;
			uint32_t	b[2];
			uint32_t	slots[MAX_FOUND];

			key.addr = test_rand(&rng) % page0_end;
			probe = cuckoo_make_tag(key.fp, cuckoo_rest_of(key.addr, npages));
			first = cuckoo_first_bucket(&layout, key.bucket);
			answers += cuckoo_block_find(&layout, block, probe, first, false,
										 slots);

			/* what fingerprints alone would answer */
			b[0] = first;
			b[1] = cuckoo_alt_bucket(&layout, first, key.fp);
			for (int j = 0; j < (b[1] == b[0] ? 1 : 2); j++)
				for (uint32_t s = b[j] * layout.bucket_size;
					 s < (b[j] + 1) * layout.bucket_size; s++)
					fp_only += cuckoo_slot_used(&layout, block, s) &&
						cuckoo_tag_fp(cuckoo_slot_tag(&layout, block, s)) == key.fp;
		}
		rate = (double) answers / nprobes;
		printf("# fp %2u, 15 rest bits, block %.1f%% full: %llu false matches "
			   "in %d probes (%.5f%%); fingerprints alone: %.4f%%\n", fbits,
			   100.0 * (next - 1) / nslots,
			   (unsigned long long) answers, nprobes, 100.0 * rate,
			   100.0 * fp_only / nprobes);
		CHECK(rate < 0.0001, "fp %u: false match rate %.5f%%", fbits,
			  100.0 * rate);
		free(entries);
		free(block);
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
			Entry		e;
			uint8_t		tid[CUCKOO_TID_BYTES];
			int			r;

			random_entry(&rng, &layout, &e);
			make_tid(next, tid);
			memcpy(copy, block, size);
			r = cuckoo_block_insert(&layout, block, e.tag, e.first, tid);
			if (r < 0)
			{
				CHECK(r == -1, "insert returned %d", r);
				CHECK(memcmp(copy, block, size) == 0,
					  "fp %u bucket %u kicks %u: failed insert of %x changed "
					  "the block", cases[c].fp, cases[c].bs, cases[c].kicks,
					  e.tag);
				memcpy(block, copy, size);
				nfail++;
				continue;
			}
			CHECK(r <= (int) layout.max_kicks, "%d kicks, max %u", r,
				  layout.max_kicks);
			CHECK(count < nslots, "insert into a full block");
			if (count >= nslots)
				break;
			e.live = true;
			entries[next] = e;
			CHECK(found(&layout, block, &e, next, true),
				  "new entry %x not found", e.tag);
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
 * One key with many TIDs: its two buckets hold 2 * bucket_size of them,
 * and find() returns them all.  A key has one bucket's worth only when its
 * two buckets are one: in a one-bucket block, or when its alternative
 * bucket is its first (about one key in nbuckets; one is searched for).
 */
static void
test_duplicates(void)
{
	uint64_t	rng = seed ^ 7;
	uint32_t	self_alt_cases = 0;

	for (int f = 0; f < 3; f++)
	{
		for (uint32_t bs = 1; bs <= 16; bs++)
		{
			/* 0: two buckets; 1: one-bucket block; 2: key with alt == first */
			for (int variant = 0; variant < 3; variant++)
			{
				CuckooLayout layout;
				uint8_t    *block;
				uint8_t    *copy;
				size_t		size;
				Entry		e;
				uint32_t	alt;
				uint32_t	fit;
				uint32_t	slots[MAX_FOUND];
				uint8_t		tid[CUCKOO_TID_BYTES];
				bool		seen[MAX_FOUND + 1] = {false};
				int			nfound,
							r;
				int			tries = 0;

				if (!new_layout(&layout, fp_widths[f], bs, 100))
					continue;
				if (variant == 1)
				{
					layout.nbuckets = 1;
					CHECK(cuckoo_layout_init(&layout, cuckoo_block_size(&layout),
											 fp_widths[f], bs, 100) &&
						  layout.nbuckets == 1, "no one-bucket layout");
				}
				CHECK(variant == 1 || layout.nbuckets > 1, "%u buckets",
					  layout.nbuckets);

				/* a key of the kind the variant wants */
				do
				{
					random_entry(&rng, &layout, &e);
					alt = cuckoo_alt_bucket(&layout, e.first, cuckoo_tag_fp(e.tag));
				} while (++tries < 1000000 &&
						 ((variant == 0 && alt == e.first) ||
						  (variant == 2 && alt != e.first)));
				if (variant == 2 && alt != e.first)
				{
					/* possible: with an even nbuckets, no fp may allow it */
					printf("# fp %u bucket %u: no key with one bucket in %u\n",
						   fp_widths[f], bs, layout.nbuckets);
					continue;
				}
				self_alt_cases += variant == 2;
				fit = (alt == e.first) ? bs : 2 * bs;
				CHECK(variant == 0 || fit == bs, "variant %d: two buckets",
					  variant);
				size = cuckoo_block_size(&layout);
				block = new_block(&layout);
				copy = malloc(size);

				for (uint32_t i = 1; i <= fit; i++)
				{
					make_tid(i, tid);
					r = cuckoo_block_insert(&layout, block, e.tag, e.first, tid);
					CHECK(r == 0, "fp %u bucket %u: duplicate %u of %x: %d",
						  fp_widths[f], bs, i, e.tag, r);
				}
				memcpy(copy, block, size);
				make_tid(fit + 1, tid);
				r = cuckoo_block_insert(&layout, block, e.tag, e.first, tid);
				CHECK(r == -1, "fp %u bucket %u variant %d: duplicate %u of %x: %d",
					  fp_widths[f], bs, variant, fit + 1, e.tag, r);
				CHECK(memcmp(copy, block, size) == 0, "failed insert changed block");
				CHECK(cuckoo_block_count(&layout, block) == fit, "count %u of %u",
					  cuckoo_block_count(&layout, block), fit);

				nfound = cuckoo_block_find(&layout, block, e.tag, e.first, false,
										   slots);
				CHECK(nfound == (int) fit, "fp %u bucket %u variant %d: found %d "
					  "of %u", fp_widths[f], bs, variant, nfound, fit);
				for (int i = 0; i < nfound && i < MAX_FOUND; i++)
				{
					uint64_t	t = tid_number(cuckoo_slot_tid(&layout, block,
															   slots[i]));

					CHECK(t >= 1 && t <= fit && !seen[t], "TID %llu found",
						  (unsigned long long) t);
					if (t >= 1 && t <= fit)
						seen[t] = true;
					CHECK(cuckoo_slot_in_place(&layout, block, slots[i], e.first),
						  "slot %u out of place", slots[i]);
				}

				/* one killed: skipped, or not */
				if (nfound > 0)
				{
					cuckoo_slot_set_killed(&layout, block, slots[0]);
					CHECK(cuckoo_block_find(&layout, block, e.tag, e.first, true,
											slots) == (int) fit - 1,
						  "killed duplicate not skipped");
					CHECK(cuckoo_block_find(&layout, block, e.tag, e.first, false,
											slots) == (int) fit,
						  "killed duplicate not returned");
				}
				free(copy);
				free(block);
			}
		}
	}
	printf("# %u layouts tested with a key whose two buckets are one\n",
		   self_alt_cases);
	CHECK(self_alt_cases >= 24, "only %u keys with one bucket", self_alt_cases);
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
			Entry		e;
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
				random_entry(&rng, &layout, &e);
				tags[i] = e.tag;
				make_tid(i + 1, tid);
				r = cuckoo_block_append(&layout, block, tags[i], tid);
				if (r != (int) i)
					bad++;
				CHECK(r == (int) i, "append %u went to %d", i, r);
			}
			memcpy(copy, block, size);
			make_tid(nslots + 1, tid);
			random_entry(&rng, &layout, &e);
			r = cuckoo_block_append(&layout, block, e.tag, tid);
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
						!cuckoo_tag_matches(cuckoo_slot_tag(&layout, block, s),
											tags[i]))
						continue;
					hits++;
					if (tid_number(cuckoo_slot_tid(&layout, block, s)) == i + 1)
						mine = s == i && cuckoo_slot_tag(&layout, block, s) == tags[i];
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

				random_entry(&rng, &layout, &e);
				cuckoo_slot_set_killed(&layout, block, s);
				make_tid(3 * nslots, tid);
				cuckoo_slot_put(&layout, block, s, e.tag, tid);
				CHECK(cuckoo_slot_tag(&layout, block, s) == e.tag &&
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
 * of the extension is read by the next.  These values (the parts of a
 * key's hash, its page and rest in a table of 1300 pages, and its buckets
 * in the default layout) must never change within format version 1
 * (CUCKOO_VERSION).
 */
static void
test_frozen_placements(void)
{
	static const struct
	{
		uint64_t	hash;
		uint64_t	addr;
		uint32_t	bucket;
		uint32_t	fp8;
		uint32_t	page_of_1300;
		uint32_t	rest_of_1300;
		uint32_t	b1;
		uint32_t	b2;
	}			frozen[] = {
		{UINT64_C(0x0000000000000000), UINT64_C(0x0000000000000000), 0xa4ab2eea, 0x9c, 0, 0x0001, 143, 206},
		{UINT64_C(0x0000000000000001), UINT64_C(0xb456bcfc34c2cb2c), 0xeca8f520, 0x25, 915, 0xc877, 206, 103},
		{UINT64_C(0x000000000000002a), UINT64_C(0x810879608e4259cc), 0xf8047fc7, 0x2d, 655, 0x3f09, 216, 96},
		{UINT64_C(0xdeadbeefcafebabe), UINT64_C(0x7082995008f0c48c), 0xf7dd9d6b, 0xad, 571, 0x5733, 215, 127},
		{UINT64_C(0xffffffffffffffff), UINT64_C(0x64b5720b4b825f21), 0xbcc39640, 0x3c, 511, 0x6967, 164, 110}
	};
	CuckooLayout layout;

	CHECK(cuckoo_layout_init(&layout, 8144, 8, 4, 500), "default layout");
	CHECK(layout.nbuckets == 223, "nbuckets %u", layout.nbuckets);
	for (size_t i = 0; i < sizeof(frozen) / sizeof(frozen[0]); i++)
	{
		CuckooKey	key = cuckoo_key(frozen[i].hash, 8);
		uint32_t	b1 = cuckoo_first_bucket(&layout, key.bucket);
		uint32_t	b2 = cuckoo_alt_bucket(&layout, b1, key.fp);

		CHECK(key.addr == frozen[i].addr && key.bucket == frozen[i].bucket &&
			  key.fp == frozen[i].fp8,
			  "key of %zu: addr %016llx bucket %08x fp %02x", i,
			  (unsigned long long) key.addr, key.bucket, key.fp);
		CHECK(cuckoo_page_of(key.addr, 1300) == frozen[i].page_of_1300,
			  "page of %zu: %u", i, cuckoo_page_of(key.addr, 1300));
		CHECK(cuckoo_rest_of(key.addr, 1300) == frozen[i].rest_of_1300,
			  "rest of %zu: %04x", i, cuckoo_rest_of(key.addr, 1300));
		CHECK(b1 == frozen[i].b1 && b2 == frozen[i].b2,
			  "buckets of %zu: %u %u", i, b1, b2);
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
	run_test("keys, tags, pages (doubling splits), buckets in range and spread",
			 test_keys_and_addressing);
	run_test("alt bucket is an involution, and another bucket nearly always",
			 test_alt_bucket_involution);
	run_test("rest bits: doubling splits by them, no false negative as the "
			 "table grows, few false matches", test_rest_and_doubling);
	run_test("block doublings: entries split to their page's half and found "
			 "there, rest bits used up", test_block_doubling);
	run_test("filled to failure: no false negative, high load", test_fill);
	run_test("false match rate of lookups in an 85% full block",
			 test_false_match_rate);
	run_test("failed insert leaves the block byte-identical",
			 test_failed_insert_unchanged);
	run_test("killed bits: skipped on request, carried by kicks",
			 test_killed_bits);
	run_test("delete and reuse", test_delete_and_reuse);
	run_test("duplicate keys fill exactly their two buckets", test_duplicates);
	run_test("append fills in order; scan finds every entry", test_append);
	run_test("placements are frozen (on-disk format)", test_frozen_placements);
	return tap_done();
}
