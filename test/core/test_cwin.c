/*-------------------------------------------------------------------------
 *
 * test_cwin.c
 *	  Standalone randomized property tests of the cuckoo window's pure
 *	  core (src/core/cwin_block.c, cwin_window.c): semi-sorted buckets,
 *	  lookups, inserts, sweeps of expired entries, splits by routing bits,
 *	  and whole windows under random inserts, refreshes and growth.
 *
 * The reference is a list of every operation stored and the epoch it
 * was stored in: an operation stored at epoch e must be found while the
 * window's epoch is below e + nlive (no false negative within the
 * retention), whatever happened in between.
 *
 * Usage: test_cwin [seed]   (prints TAP; the seed makes failures repeatable)
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cwin_block.h"
#include "cwin_plan.h"
#include "cwin_snap.h"
#include "cwin_window.h"
#include "fbf_codec.h"
#include "fbf_core.h"
#include "tap.h"

static uint64_t seed = 20240615;

/* test_frozen: what format 1 of a cuckoo window's page gives */
#define FROZEN_FP		8158
#define FROZEN_BUCKET	719
#define FROZEN_ALT		441
#define FROZEN_SUM		UINT64_C(4509011930663494933)

static FbfHash
random_hash(uint64_t *rng)
{
	FbfHash		h;

	h.h1 = test_rand(rng);
	h.h2 = test_rand(rng);
	return h;
}

static CwinEpochs
flat_epochs(int64_t epoch, int nlive, uint32_t parts)
{
	CwinEpochs	e;

	e.epoch = epoch;
	e.nlive = nlive;
	for (int i = 0; i < CWIN_MAX_LIVE; i++)
		e.parts[i] = parts;
	return e;
}

static uint8_t *
new_block(const CwinLayout *layout, int64_t epoch)
{
	uint8_t    *b = malloc(cwin_block_size(layout));

	cwin_block_init(layout, b, epoch);
	return b;
}

/* ---- buckets ---- */

static void
test_bucket_codes(void)
{
	uint64_t	rng = seed;

	for (uint32_t f = CWIN_MIN_FP_BITS; f <= CWIN_MAX_FP_BITS; f++)
	{
		CwinLayout	layout;
		const char *why;
		uint8_t    *block;

		CHECK(cwin_layout_init(&layout, 4096, f, 100, &why), "f %u: %s", f, why);
		CHECK(layout.bucket_bits == 12 + 4 * f, "f %u: %u bits", f, layout.bucket_bits);
		CHECK(cwin_block_size(&layout) <= 4096, "f %u: %zu bytes", f, cwin_block_size(&layout));
		{
			CwinLayout	more = layout;

			more.nbuckets++;
			CHECK(cwin_block_size(&more) > 4096, "f %u: not maximal, %u buckets",
				  f, layout.nbuckets);
		}
		block = new_block(&layout, 0);

		/* every multiset of four nibbles: its code and back */
		for (uint32_t n3 = 0; n3 < 16; n3++)
			for (uint32_t n2 = 0; n2 <= n3; n2++)
				for (uint32_t n1 = 0; n1 <= n2; n1++)
					for (uint32_t n0 = 0; n0 <= n1; n0++)
					{
						CwinSlot	in[4] = {{n3 | 0x10, 1}, {n1 | 0x10, 2}, {n0 | 0x10, 3}, {n2 | 0x10, 4}};
						CwinSlot	out[4];

						cwin_bucket_write(&layout, block, 1, in);
						cwin_bucket_read(&layout, block, 1, out);
						CHECK((out[0].fp & 0xF) == n0 && (out[1].fp & 0xF) == n1 &&
							  (out[2].fp & 0xF) == n2 && (out[3].fp & 0xF) == n3,
							  "f %u: nibbles %u %u %u %u read %u %u %u %u", f, n0, n1, n2, n3,
							  out[0].fp & 0xF, out[1].fp & 0xF, out[2].fp & 0xF, out[3].fp & 0xF);
					}
		cwin_block_init(&layout, block, 0);

		for (int n = 0; n < 20000; n++)
		{
			uint32_t	b = (uint32_t) test_rand_below(&rng, layout.nbuckets);
			CwinSlot	in[4],
						out[4],
						neighbour[2][4];
			int			used[4] = {0};

			for (int i = 0; i < 4; i++)
			{
				/* some slots empty, some fingerprints sharing a nibble */
				if (test_rand_below(&rng, 4) == 0)
					in[i] = (CwinSlot) {0, 0};
				else
				{
					in[i].fp = (uint32_t) test_rand_below(&rng, (UINT64_C(1) << f) - 1) + 1;
					if (test_rand_below(&rng, 3) == 0)
						in[i].fp = (in[i].fp & ~UINT32_C(0xF)) | 5;
					in[i].tag = (uint32_t) test_rand_below(&rng, 16);
				}
			}
			if (b > 0)
				cwin_bucket_read(&layout, block, b - 1, neighbour[0]);
			if (b + 1 < layout.nbuckets)
				cwin_bucket_read(&layout, block, b + 1, neighbour[1]);
			cwin_bucket_write(&layout, block, b, in);
			cwin_bucket_read(&layout, block, b, out);

			/* the same multiset comes back, in order */
			for (int i = 0; i < 4; i++)
			{
				bool		found = false;

				for (int j = 0; j < 4 && !found; j++)
					if (!used[j] && out[j].fp == in[i].fp && out[j].tag == in[i].tag)
					{
						used[j] = 1;
						found = true;
					}
				CHECK(found, "f %u bucket %u: slot (%u, %u) lost", f, b, in[i].fp, in[i].tag);
			}
			for (int i = 1; i < 4; i++)
				CHECK((out[i - 1].fp & 0xF) <= (out[i].fp & 0xF), "f %u: slots not sorted", f);
			/* neighbours untouched */
			if (b > 0)
			{
				CwinSlot	again[4];

				cwin_bucket_read(&layout, block, b - 1, again);
				CHECK(memcmp(again, neighbour[0], sizeof(again)) == 0, "f %u: bucket %u changed", f, b - 1);
			}
			if (b + 1 < layout.nbuckets)
			{
				CwinSlot	again[4];

				cwin_bucket_read(&layout, block, b + 1, again);
				CHECK(memcmp(again, neighbour[1], sizeof(again)) == 0, "f %u: bucket %u changed", f, b + 1);
			}
			/* an empty bucket reads as four empty slots */
			if (n % 1000 == 999)
			{
				CwinSlot	zero[4] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}};

				cwin_bucket_write(&layout, block, b, zero);
				cwin_bucket_read(&layout, block, b, out);
				for (int i = 0; i < 4; i++)
					CHECK(out[i].fp == 0 && out[i].tag == 0, "f %u: empty bucket reads %u", f, out[i].fp);
			}
		}
		free(block);
	}
}

static void
test_layout_refused(void)
{
	CwinLayout	layout;
	const char *why = NULL;

	CHECK(!cwin_layout_init(&layout, 8144, 11, 10, &why) && why, "f = 11 accepted");
	CHECK(!cwin_layout_init(&layout, 8144, 28, 10, &why), "f = 28 accepted");
	CHECK(!cwin_layout_init(&layout, 8144, 13, CWIN_MAX_KICKS + 1, &why), "kicks accepted");
	CHECK(!cwin_layout_init(&layout, 40, 13, 10, &why), "no room accepted");
	CHECK(cwin_layout_init(&layout, 8144, 13, 10, &why), "page refused: %s", why);
	CHECK(layout.bucket_bits == 64, "f = 13: %u bits per bucket", layout.bucket_bits);
}

/* ---- one block ---- */

typedef struct Stored
{
	FbfHash		hash;
	int64_t		epoch;
} Stored;

/*
 * Random inserts into one block across refreshes (skipping epochs, too,
 * long enough for tags to wrap): every operation stored within the live
 * epochs is found, the block stays valid, a failed insert changes
 * nothing but the sweep it needed, and old entries are not found once
 * expired (no tag aliasing).
 */
static void
test_block_random(void)
{
	uint64_t	rng = seed + 1;
	CwinLayout	layout;
	const char *why;
	int			nlives[] = {2, 5, 16};

	for (int v = 0; v < 3; v++)
	{
		int			nlive = nlives[v];
		uint8_t    *block,
				   *before;
		Stored	   *st = malloc(sizeof(Stored) * 200000);
		int			nst = 0;
		CwinEpochs	ep;
		int			failures = 0,
					expired_found = 0,
					expired_tested = 0;
		bool		all_stored = true;	/* st holds every entry stored */

		CHECK(cwin_layout_init(&layout, 2048, 13, 500, &why), "%s", why);
		ep = flat_epochs(nlive - 1, nlive, 1);
		block = new_block(&layout, ep.epoch);
		before = malloc(cwin_block_size(&layout));

		for (int round = 0; round < 120; round++)
		{
			/* fill up to around the block's capacity per epoch */
			int			n = (int) test_rand_below(&rng, cwin_nslots(&layout) / nlive * 2);

			for (int i = 0; i < n; i++)
			{
				FbfHash		h = random_hash(&rng);
				CwinKey		key;
				int			r;

				cwin_key(&layout, &ep, &h, &key);
				if (cwin_block_needs_sweep(block, ep.epoch))
					cwin_block_sweep(&layout, block, &ep);
				memcpy(before, block, cwin_block_size(&layout));
				r = cwin_block_insert(&layout, block, &ep, &key);
				if (r < 0)
				{
					failures++;
					CHECK(memcmp(before, block, cwin_block_size(&layout)) == 0,
						  "failed insert changed the block");
					continue;
				}
				CHECK(cwin_block_contains(&layout, block, &ep, &key), "just stored, not found");
				st[nst].hash = h;
				st[nst++].epoch = ep.epoch;
			}
			CHECK(cwin_block_check(&layout, block, &why), "round %d: %s", round, why);

			/* every live stored operation is found; expired ones are not */
			for (int i = 0; i < nst; i++)
			{
				CwinKey		key;
				bool		live = st[i].epoch > ep.epoch - nlive;

				cwin_key(&layout, &ep, &st[i].hash, &key);
				if (live)
					CHECK(cwin_block_contains(&layout, block, &ep, &key),
						  "round %d: stored at %lld, epoch %lld, not found",
						  round, (long long) st[i].epoch, (long long) ep.epoch);
				else if (st[i].epoch > ep.epoch - 40)
				{
					expired_tested++;
					expired_found += cwin_block_contains(&layout, block, &ep, &key);
				}
			}
			CHECK(cwin_block_live(block, &ep) <= cwin_block_used(block), "live > used");
			/* each live epoch's entries weighed apart, as stored */
			if (all_stored)
			{
				double		weight[CWIN_MAX_LIVE];
				double		want = 0;
				uint32_t	live = 0;

				for (int age = 0; age < nlive; age++)
					weight[age] = (double) (UINT32_C(1) << age);
				for (int i = 0; i < nst; i++)
				{
					if (st[i].epoch > ep.epoch - nlive)
					{
						want += weight[ep.epoch - st[i].epoch];
						live++;
					}
				}
				CHECK(cwin_block_weighed_live(block, &ep, weight) == want,
					  "round %d: weighed live %.0f, stored %.0f", round,
					  cwin_block_weighed_live(block, &ep, weight), want);
				CHECK(cwin_block_live(block, &ep) == live,
					  "round %d: live %u, stored %u", round,
					  cwin_block_live(block, &ep), live);
			}

			/* next epoch, sometimes many at once (no write in between) */
			ep.epoch += test_rand_below(&rng, 6) == 0 ? 1 + (int64_t) test_rand_below(&rng, 40) : 1;
			if (nst > 150000)
			{
				nst = 0;
				all_stored = false;
			}
		}
		CHECK(failures > 0, "nlive %d: the block never filled", nlive);
		/* expired operations are found only as false positives would be */
		CHECK(expired_found <= expired_tested / 100 + 5,
			  "nlive %d: %d of %d expired operations found", nlive, expired_found, expired_tested);
		free(st);
		free(before);
		free(block);
	}
}

/*
 * Aliasing: an operation stored once, then 16 .. 100 epochs without a
 * write: never found after its live epochs, whether or not a sweep ran.
 */
static void
test_no_alias(void)
{
	uint64_t	rng = seed + 2;
	CwinLayout	layout;
	const char *why;

	CHECK(cwin_layout_init(&layout, 1024, 20, 100, &why), "%s", why);
	for (int n = 0; n < 2000; n++)
	{
		int			nlive = 2 + (int) test_rand_below(&rng, 15);
		CwinEpochs	ep = flat_epochs(100, nlive, 1);
		uint8_t    *block = new_block(&layout, 100 - (int64_t) test_rand_below(&rng, 16));
		FbfHash		h = random_hash(&rng);
		CwinKey		key;
		int			gap = (int) test_rand_below(&rng, 100);

		cwin_key(&layout, &ep, &h, &key);
		CHECK(cwin_block_insert(&layout, block, &ep, &key) >= 0, "insert into an empty block failed");
		ep.epoch += gap;
		cwin_key(&layout, &ep, &h, &key);
		CHECK(cwin_block_contains(&layout, block, &ep, &key) == (gap < nlive),
			  "gap %d, nlive %d: found %d", gap, nlive,
			  cwin_block_contains(&layout, block, &ep, &key));
		if (test_rand_below(&rng, 2))
		{
			FbfHash		other = random_hash(&rng);
			CwinKey		okey;

			cwin_key(&layout, &ep, &other, &okey);
			cwin_block_insert(&layout, block, &ep, &okey);
			CHECK(cwin_block_contains(&layout, block, &ep, &key) == (gap < nlive),
				  "after a write: gap %d, nlive %d", gap, nlive);
			CHECK(cwin_block_check(&layout, block, &why), "%s", why);
		}
		free(block);
	}
}

/* ---- splits ---- */

/*
 * One block split in 2 .. 64: each live entry is in the child of its
 * partition in the doubled window (and found there), expired entries
 * are dropped, and an entry whose routing bits are used up is in every
 * child it may belong to.
 */
static void
test_block_split(void)
{
	uint64_t	rng = seed + 3;
	CwinLayout	layout;
	const char *why;

	CHECK(cwin_layout_init(&layout, 4096, 14, 500, &why), "%s", why);
	for (int n = 0; n < 300; n++)
	{
		uint32_t	factor = UINT32_C(1) << (1 + test_rand_below(&rng, 6));
		uint32_t	p0 = 1 + (uint32_t) test_rand_below(&rng, 7);
		int			k = (int) test_rand_below(&rng, 10);	/* doublings since */
		uint32_t	parts = p0 << k;
		CwinEpochs	ep = flat_epochs(50, 8, p0);
		uint32_t	q = (uint32_t) test_rand_below(&rng, parts);
		uint8_t    *block = new_block(&layout, ep.epoch - 7);
		uint8_t    *children[CWIN_MAX_SPLIT];
		Stored		st[2000];
		int			nst = 0;
		int			copies;

		/* older epochs keyed with fewer partitions, down to p0 */
		for (int i = 0; i < CWIN_MAX_LIVE; i++)
			ep.parts[i] = p0 << (i < 8 ? k * (7 - i) / 7 : 0);
		for (int age = 7; age >= 0; age--)
		{
			CwinEpochs	at = ep;

			at.epoch = ep.epoch - age;
			for (int j = 0; j < CWIN_MAX_LIVE; j++)
				at.parts[j] = ep.parts[j + age < CWIN_MAX_LIVE ? j + age : CWIN_MAX_LIVE - 1];
			for (int i = 0; i < 250; i++)
			{
				FbfHash		h;
				CwinKey		key;

				/* a hash of partition q */
				do
					h = random_hash(&rng);
				while (fbf_part(&h, parts) != q);
				cwin_key(&layout, &at, &h, &key);
				if (cwin_block_insert(&layout, block, &at, &key) < 0)
					break;
				st[nst].hash = h;
				st[nst++].epoch = at.epoch;
			}
		}
		for (uint32_t j = 0; j < factor; j++)
			children[j] = malloc(cwin_block_size(&layout));
		copies = cwin_block_split(&layout, block, &ep, parts, factor, children, &why);
		CHECK(copies >= 0, "split refused: %s", why);
		if (copies < 0)
			goto next;
		CHECK(k + (int) __builtin_ctz(factor) > CWIN_ROUTE_BITS || copies == 0,
			  "k %d factor %u: %d copies with routing bits left", k, factor, copies);
		for (uint32_t j = 0; j < factor; j++)
			CHECK(cwin_block_check(&layout, children[j], &why), "child %u: %s", j, why);
		for (int i = 0; i < nst; i++)
		{
			uint32_t	child = fbf_part(&st[i].hash, parts * factor) - q * factor;
			CwinKey		key;

			CHECK(child < factor, "operation of partition %u not in a child", q);
			cwin_key(&layout, &ep, &st[i].hash, &key);
			CHECK(cwin_block_contains(&layout, children[child], &ep, &key),
				  "split %u of %u partitions, k %d: not in child %u", factor, parts, k, child);
		}
		{
			uint32_t	before = cwin_block_live(block, &ep),
						after = 0;

			for (uint32_t j = 0; j < factor; j++)
				after += cwin_block_live(children[j], &ep);
			CHECK(after >= before && (copies > 0 || after == before),
				  "live %u before, %u after, %d copies", before, after, copies);
		}
next:
		for (uint32_t j = 0; j < factor; j++)
			free(children[j]);
		free(block);
	}
	/* key partitions that are not a power-of-two fraction are refused */
	{
		CwinEpochs	ep = flat_epochs(10, 4, 3);
		uint8_t    *block = new_block(&layout, 10);
		uint8_t    *children[2] = {malloc(cwin_block_size(&layout)), malloc(cwin_block_size(&layout))};
		FbfHash		h = random_hash(&rng);
		CwinKey		key;

		cwin_key(&layout, &ep, &h, &key);
		cwin_block_insert(&layout, block, &ep, &key);
		CHECK(cwin_block_split(&layout, block, &ep, 5, 2, children, &why) < 0, "3 -> 5 accepted");
		CHECK(cwin_block_split(&layout, block, &ep, 6, 3, children, &why) < 0, "factor 3 accepted");
		free(children[0]);
		free(children[1]);
		free(block);
	}
}

/* ---- whole windows ---- */

/*
 * Random inserts, refreshes and splits (by 2 to 8, many per retention so
 * that routing bits run out): every operation is found within its live
 * epochs, from its insert (deferred or not) on; blocks stay valid.
 */
static void
test_window_random(void)
{
	uint64_t	rng = seed + 4;
	const char *why;

	for (int run = 0; run < 4; run++)
	{
		CwinWindow	w;
		int			nlive = 2 + (int) test_rand_below(&rng, 15);
		uint32_t	f = CWIN_MIN_FP_BITS + (uint32_t) test_rand_below(&rng, 10);
		Stored	   *st = malloc(sizeof(Stored) * 400000);
		int			nst = 0;
		int			fn = 0;

		CHECK(cwin_window_init(&w, f, 1 + (uint32_t) test_rand_below(&rng, 3), nlive, 512, &why),
			  "%s", why);
		for (int step = 0; step < 150; step++)
		{
			int			op = (int) test_rand_below(&rng, 10);

			if (op < 6)
			{
				uint64_t	room = (uint64_t) cwin_nslots(&w.layout) * w.nparts;

				/*
				 * about half the slots live on average, and now and then a
				 * burst that fills blocks (inserts wait, the window splits)
				 */
				int			n = (int) test_rand_below(&rng, test_rand_below(&rng, 20) == 0 && w.nparts < 128 ?
													  room / 6 : room / (2 * nlive) + 1);

				for (int i = 0; i < n && nst < 400000; i++)
				{
					FbfHash		h = random_hash(&rng);

					cwin_window_insert(&w, &h);
					st[nst].hash = h;
					st[nst++].epoch = w.epochs.epoch;
				}
			}
			else if (op < 9)
				cwin_window_refresh(&w);
			else if (w.nparts < 256)
			{
				uint32_t	factor = UINT32_C(1) << (1 + test_rand_below(&rng, 3));

				CHECK(cwin_window_split(&w, factor, &why), "split: %s", why);
			}
			if (cwin_window_wants_split(&w) && w.nparts < 256)
				CHECK(cwin_window_split(&w, 2, &why), "split: %s", why);

			for (int i = 0; i < nst; i++)
			{
				if (st[i].epoch <= w.epochs.epoch - nlive)
					continue;
				if (!cwin_window_contains(&w, &st[i].hash))
					fn++;
			}
			if (step % 50 == 0)
				for (uint32_t p = 0; p < w.nparts; p++)
					CHECK(cwin_block_check(&w.layout, cwin_window_block(&w, p), &why),
						  "block %u: %s", p, why);
			/* forget the reference's expired operations */
			{
				int			kept = 0;

				for (int i = 0; i < nst; i++)
					if (st[i].epoch > w.epochs.epoch - nlive)
						st[kept++] = st[i];
				nst = kept;
			}
		}
		CHECK(fn == 0, "run %d (nlive %d, f %u): %d false negatives", run, nlive, f, fn);
		CHECK(w.splits > 0, "run %d never split", run);
		printf("# run %d: nlive %d f %u: %u partitions, %llu splits, %llu copies, %llu waits\n",
			   run, nlive, f, w.nparts, (unsigned long long) w.splits,
			   (unsigned long long) w.copies, (unsigned long long) w.failed_inserts);
		free(st);
		cwin_window_free(&w);
	}
}

/*
 * Growth under a rising rate, by the automatic rule alone: the rate
 * doubles every epoch for ten epochs (more doublings than routing bits
 * within one retention), the window splits by 2 after a refresh whenever
 * cwin_window_wants_split says so.  No operation is lost: each is found
 * for its live epochs, through waits and splits; entries whose routing
 * bits ran out are copied; once the rate stops rising, inserts stop
 * waiting and the fullest block is under the split load.
 */
static void
test_window_growth(void)
{
	uint64_t	rng = seed + 6;
	const char *why;
	CwinWindow	w;
	int			nlive = 16;
	Stored	   *st = malloc(sizeof(Stored) * 2000000);
	int			nst = 0;
	uint64_t	fn = 0,
				waits_late = 0;
	double		rate = 20;

	CHECK(cwin_window_init(&w, 14, 1, nlive, 512, &why), "%s", why);
	for (int e = 0; e < 3 * nlive; e++)
	{
		if (e >= 4 && e < 14)
			rate *= 2;
		for (int i = 0; i < (int) rate; i++)
		{
			FbfHash		h = random_hash(&rng);

			cwin_window_insert(&w, &h);
			st[nst].hash = h;
			st[nst++].epoch = w.epochs.epoch;
		}
		for (int i = 0; i < nst; i++)
			if (st[i].epoch > w.epochs.epoch - nlive &&
				!cwin_window_contains(&w, &st[i].hash))
				fn++;
		cwin_window_refresh(&w);
		while (cwin_window_wants_split(&w))
			CHECK(cwin_window_split(&w, 2, &why), "split: %s", why);
		{
			int			kept = 0;

			for (int i = 0; i < nst; i++)
				if (st[i].epoch > w.epochs.epoch - nlive)
					st[kept++] = st[i];
			nst = kept;
		}
		if (e == 2 * nlive)
			waits_late = w.failed_inserts;
	}
	CHECK(fn == 0, "%llu false negatives", (unsigned long long) fn);
	CHECK(w.copies > 0, "routing bits never ran out (%llu splits)", (unsigned long long) w.splits);
	CHECK(w.failed_inserts == waits_late, "%llu inserts waited at a steady rate",
		  (unsigned long long) (w.failed_inserts - waits_late));
	CHECK(cwin_window_max_load(&w) <= CWIN_SPLIT_LOAD, "fullest block at %.3f",
		  cwin_window_max_load(&w));
	printf("# growth: %u partitions, %llu splits, %llu copies, %llu waits, estimate %.3g\n",
		   w.nparts, (unsigned long long) w.splits, (unsigned long long) w.copies,
		   (unsigned long long) w.failed_inserts, cwin_window_estimate_fpp(&w));
	for (uint32_t p = 0; p < w.nparts; p++)
		CHECK(cwin_block_check(&w.layout, cwin_window_block(&w, p), &why), "block %u: %s", p, why);
	free(st);
	cwin_window_free(&w);
}

/*
 * A planned window run at its rate for three retentions: no wait, the
 * measured false-positive rate within 25% of the estimate and under the
 * target.
 */
static void
test_plan_measured(void)
{
	double		targets[] = {0.01, 0.001, 0.0001};
	uint64_t	rng = seed + 5;

	for (int t = 0; t < 3; t++)
	{
		CwinPlan	plan;
		CwinWindow	w;
		const char *why;
		double		rate = 2000;
		int			per_epoch;
		uint64_t	fp = 0,
					probes = 0;
		double		est = 0;
		int			nest = 0;

		CHECK(cwin_plan(60, targets[t], rate, CWIN_PAGE_SPACE, &plan, &why), "%s", why);
		CHECK(cwin_window_init(&w, plan.fp_bits, plan.nparts, plan.nlive, CWIN_PAGE_SPACE, &why),
			  "%s", why);
		per_epoch = (int) lround(rate * plan.period);
		for (int e = 0; e < 3 * plan.nlive; e++)
		{
			for (int i = 0; i < per_epoch; i++)
			{
				FbfHash		h = random_hash(&rng);

				cwin_window_add(&w, &h);
				if (e >= plan.nlive && i % 50 == 0)
				{
					/* measure through the epoch, as its load rises */
					for (int j = 0; j < 40; j++)
					{
						FbfHash		x = random_hash(&rng);

						fp += cwin_window_contains(&w, &x);
						probes++;
					}
					if (i % 1000 == 0)
					{
						est += cwin_window_estimate_fpp(&w);
						nest++;
					}
				}
			}
			cwin_window_refresh(&w);
		}
		CHECK(w.failed_inserts == 0, "target %g: %llu waits", targets[t],
			  (unsigned long long) w.failed_inserts);
		est /= nest;
		printf("# target %g: f %u, %u pages, measured %.3g (%llu probes), estimated %.3g\n",
			   targets[t], plan.fp_bits, plan.nparts, (double) fp / probes,
			   (unsigned long long) probes, est);
		CHECK((double) fp / probes <= targets[t] * 1.1, "target %g: measured %g",
			  targets[t], (double) fp / probes);
		CHECK(fabs((double) fp / probes - est) <= 0.25 * est + 3.0 / probes * 10,
			  "target %g: measured %g, estimated %g", targets[t], (double) fp / probes, est);
		cwin_window_free(&w);
	}
}

/* Fingerprints, buckets and encodings are a page format: frozen. */
static void
test_frozen(void)
{
	CwinLayout	layout;
	const char *why;
	FbfHash		h = fbf_hash_int64(42);
	uint8_t    *block;
	CwinEpochs	ep = flat_epochs(20, 16, 3);
	CwinKey		key;
	uint64_t	sum = 0;

	CHECK(cwin_layout_init(&layout, CWIN_PAGE_SPACE, 13, 500, &why), "%s", why);
	CHECK(layout.nbuckets == 1007, "nbuckets %u", layout.nbuckets);
	block = new_block(&layout, 5);
	cwin_key(&layout, &ep, &h, &key);
	printf("# fp %u bucket %u alt %u\n", key.fp[0], key.bucket,
		   cwin_alt_bucket(&layout, key.bucket, key.fp[0]));
	CHECK(key.fp[0] == FROZEN_FP && key.bucket == FROZEN_BUCKET &&
		  cwin_alt_bucket(&layout, key.bucket, key.fp[0]) == FROZEN_ALT,
		  "placement changed");
	for (int64_t i = 0; i < 3000; i++)
	{
		FbfHash		x = fbf_hash_int64(i);

		cwin_key(&layout, &ep, &x, &key);
		cwin_block_insert(&layout, block, &ep, &key);
	}
	for (size_t i = 0; i < cwin_block_size(&layout); i++)
		sum = sum * 31 + block[i];
	printf("# block sum %llu\n", (unsigned long long) sum);
	CHECK(sum == FROZEN_SUM, "block bytes changed");
	free(block);
}

/* ---- snapshots (cwin_snap.h) ---- */

/*
 * A snapshot of a window, as a counter's fbf_snapshot makes one: its
 * epochs, blocks and waiting operations (sorted, distinct), birth times
 * and period.  malloc'd.
 */
static CwinSnap *
snap_of(const CwinWindow *w, const FbfHash *waiting, size_t nwaiting)
{
	FbfHash    *d = malloc(sizeof(FbfHash) * (nwaiting + w->ndeferred + 1));
	size_t		n = 0;
	CwinSnap   *s;

	for (size_t i = 0; i < w->ndeferred; i++)
		d[n++] = w->deferred[i];
	for (size_t i = 0; i < nwaiting; i++)
		d[n++] = waiting[i];
	n = cwin_hashes_sort_unique(d, n);
	s = malloc(cwin_snap_size(&w->layout, w->nparts, n));
	cwin_snap_init(s, &w->layout, w->nparts, n);
	s->nlive = (uint32_t) w->epochs.nlive;
	s->epoch = w->epochs.epoch;
	s->period = 4000000;
	for (int i = 0; i < w->epochs.nlive; i++)
	{
		s->parts[i] = w->epochs.parts[i];
		s->born_at[i] = INT64_C(800000000000000) - (int64_t) i * s->period;
	}
	memcpy(cwin_snap_block(s, 0), w->blocks, w->block_size * w->nparts);
	memcpy(cwin_snap_deferred(s), d, sizeof(FbfHash) * n);
	free(d);
	return s;
}

/* serialize, validate, deserialize: the copy, or NULL and *why */
static CwinSnap *
snap_round_trip(const unsigned char *buf, size_t len, const char **why)
{
	size_t		size = 0;
	CwinSnap   *copy;

	if (!cwin_snap_validate(buf, len, &size, why))
		return NULL;
	if (size != len)
	{
		*why = "validated size is not the input's";
		return NULL;
	}
	copy = malloc(size);
	cwin_snap_deserialize(buf, len, copy);
	if (!cwin_snap_check(copy, why))
	{
		free(copy);
		return NULL;
	}
	return copy;
}

/*
 * Round trip: a window that took operations over refreshes and a split
 * (epochs keyed with two partition counts), some operations waiting:
 * its snapshot checks, serializes to its own size, decodes byte for byte,
 * and answers every lookup as the window does, waiting operations
 * included; what was never stored is found only at the estimate's rate.
 */
static void
test_snap_round_trip(void)
{
	uint64_t	rng = seed + 40;
	CwinWindow	w;
	const char *why = "";
	FbfHash    *ops = malloc(sizeof(FbfHash) * 6000);
	FbfHash		waiting[50];
	CwinSnap   *s;
	CwinSnap   *copy;
	unsigned char *buf;
	size_t		len;
	int			fp = 0;
	uint64_t	counts[CWIN_MAX_LIVE];
	uint64_t	total = 0;

	CHECK(cwin_window_init(&w, 14, 4, 16, 1024, &why), "%s", why);
	for (int i = 0; i < 6000; i++)
	{
		ops[i] = random_hash(&rng);
		cwin_window_insert(&w, &ops[i]);
		if (i % 1000 == 999)
			cwin_window_refresh(&w);
		if (i == 2500)
			CHECK(cwin_window_split(&w, 2, &why), "%s", why);
	}
	for (int i = 0; i < 50; i++)
		waiting[i] = random_hash(&rng);
	s = snap_of(&w, waiting, 50);
	CHECK(s->parts[0] == 8 && s->parts[15] == 4, "epochs keyed with %u and %u partitions",
		  s->parts[0], s->parts[15]);
	CHECK(cwin_snap_check(s, &why), "%s", why);

	len = cwin_snap_serialized_size(s);
	CHECK(len == cwin_snap_size(&w.layout, w.nparts, s->ndeferred),
		  "serialized %zu bytes, in memory %zu", len,
		  cwin_snap_size(&w.layout, w.nparts, s->ndeferred));
	buf = malloc(len);
	cwin_snap_serialize(s, buf);
	CHECK(memcmp(buf, "FBF\0\2\1", 6) == 0 && buf[6] == 14 && buf[7] == 16,
		  "header bytes");
	CHECK(cwin_snap_is_serialized(buf, len), "not recognised as a cuckoo snapshot");
	{
		size_t		bloom_size;

		CHECK(!fbf_validate(buf, len, &bloom_size, &why),
			  "the Bloom decoder accepted a cuckoo snapshot");
	}
	copy = snap_round_trip(buf, len, &why);
	CHECK(copy != NULL, "%s", why);
	if (copy != NULL)
	{
		CHECK(memcmp(copy, s, len) == 0, "the copy differs from the original");
		free(copy);
	}

	for (int i = 0; i < 6000; i++)
		CHECK(cwin_snap_contains(s, &ops[i]) == cwin_window_contains(&w, &ops[i]),
			  "operation %d: the snapshot answers otherwise than the window", i);
	/* the last 1,000 inserts are within the live epochs: all there */
	for (int i = 5000; i < 6000; i++)
		CHECK(cwin_snap_contains(s, &ops[i]), "operation %d lost", i);
	for (int i = 0; i < 50; i++)
		CHECK(cwin_snap_contains(s, &waiting[i]), "waiting operation %d lost", i);
	for (int i = 0; i < 20000; i++)
	{
		FbfHash		h = random_hash(&rng);

		fp += cwin_snap_contains(s, &h);
	}
	CHECK(fp < 20000 * (5 * cwin_snap_estimate_fpp(s)) + 10,
		  "%d false positives in 20000, estimate %g", fp, cwin_snap_estimate_fpp(s));
	cwin_snap_counts(s, counts);
	for (uint32_t i = 0; i < s->nlive; i++)
		total += counts[i];
	CHECK(total == cwin_window_live(&w), "counts %llu, live %llu",
		  (unsigned long long) total, (unsigned long long) cwin_window_live(&w));
	free(buf);
	free(s);
	free(ops);
	cwin_window_free(&w);
}

/* a serialized snapshot with one byte range changed must be refused */
static void
expect_refused(const unsigned char *orig, size_t len, size_t off,
			   const void *bytes, size_t n, const char *what)
{
	unsigned char *buf = malloc(len);
	const char *why = NULL;
	CwinSnap   *copy;

	memcpy(buf, orig, len);
	memcpy(buf + off, bytes, n);
	copy = snap_round_trip(buf, len, &why);
	CHECK(copy == NULL, "%s: accepted", what);
	if (copy != NULL)
		free(copy);
	else
		CHECK(why != NULL && why[0] != '\0', "%s: no reason", what);
	free(buf);
}

static void
put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char) (v >> (8 * i));
}

static void
put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char) (v >> (8 * i));
}

/*
 * Malformed input: every truncation, each header field out of its range,
 * shapes whose length would be huge (refused before any allocation: the
 * validator's size is the input's), blocks that are not canonical or hold
 * entries from after the epoch, waiting operations out of order; then
 * random corruption, which must be refused or decode to a snapshot that
 * checks (ASan watches every read).
 */
static void
test_snap_malformed(void)
{
	uint64_t	rng = seed + 41;
	CwinWindow	w;
	const char *why = "";
	FbfHash		waiting[3];
	CwinSnap   *s;
	unsigned char *buf;
	size_t		len;
	size_t		block_size;
	size_t		blocks_at = CWIN_SNAP_HEADER_BYTES;
	size_t		size;
	unsigned char b[8];

	CHECK(cwin_window_init(&w, 13, 2, 16, 512, &why), "%s", why);
	for (int i = 0; i < 200; i++)
	{
		FbfHash		h = random_hash(&rng);

		cwin_window_insert(&w, &h);
		if (i % 50 == 49 && i < 150)
			cwin_window_refresh(&w);
	}
	for (int i = 0; i < 3; i++)
		waiting[i] = random_hash(&rng);
	s = snap_of(&w, waiting, 3);
	len = cwin_snap_serialized_size(s);
	buf = malloc(len);
	cwin_snap_serialize(s, buf);
	block_size = w.block_size;

	/* every truncation, and a byte too many */
	for (size_t n = 0; n < len; n++)
		CHECK(!cwin_snap_validate(buf, n, &size, &why), "%zu of %zu bytes accepted", n, len);
	{
		unsigned char *longer = calloc(1, len + 1);

		memcpy(longer, buf, len);
		CHECK(!cwin_snap_validate(longer, len + 1, &size, &why), "a trailing byte accepted");
		free(longer);
	}

	/* the header */
	expect_refused(buf, len, 0, "FBX", 3, "magic");
	b[0] = 1;
	expect_refused(buf, len, 4, b, 1, "version 1");
	b[0] = 3;
	expect_refused(buf, len, 4, b, 1, "version 3");
	b[0] = 2;
	expect_refused(buf, len, 5, b, 1, "kind 2");
	b[0] = 11;
	expect_refused(buf, len, 6, b, 1, "11-bit fingerprints");
	b[0] = 28;
	expect_refused(buf, len, 6, b, 1, "28-bit fingerprints");
	b[0] = 1;
	expect_refused(buf, len, 7, b, 1, "one live epoch");
	b[0] = 17;
	expect_refused(buf, len, 7, b, 1, "17 live epochs");
	put32(b, 1);
	expect_refused(buf, len, 8, b, 4, "one bucket");
	put32(b, 65537);
	expect_refused(buf, len, 8, b, 4, "65537 buckets");
	put32(b, 0);
	expect_refused(buf, len, 12, b, 4, "no partition");
	put32(b, (UINT32_C(1) << 20) + 1);
	expect_refused(buf, len, 12, b, 4, "2^20 + 1 partitions");
	put32(b, UINT32_MAX);
	expect_refused(buf, len, 12, b, 4, "2^32 - 1 partitions");
	put32(b, UINT32_MAX);
	expect_refused(buf, len, 16, b, 4, "2^32 - 1 waiting operations");
	put32(b, 4);
	expect_refused(buf, len, 16, b, 4, "one waiting operation more than the bytes");
	put32(b, 1);
	expect_refused(buf, len, 20, b, 4, "reserved bytes");
	put64(b, 14);
	expect_refused(buf, len, 24, b, 8, "an epoch before nlive - 1");
	put64(b, (UINT64_C(1) << 62) + 1);
	expect_refused(buf, len, 24, b, 8, "an epoch past 2^62");
	put64(b, UINT64_MAX);
	expect_refused(buf, len, 32, b, 8, "a negative period");
	put32(b, 0);
	expect_refused(buf, len, 40, b, 4, "no key partitions");
	put32(b, 3);
	expect_refused(buf, len, 40, b, 4, "key partitions that do not divide");
	put32(b, 4);
	expect_refused(buf, len, 40, b, 4, "more key partitions than partitions");
	put32(b, 1);
	expect_refused(buf, len, 40, b, 4, "fewer key partitions now than before");
	{
		/* a shrunken window's snapshot: nlive 4, then epoch 4's parts */
		unsigned char *copy = malloc(len);

		memcpy(copy, buf, len);
		copy[7] = 4;
		CHECK(!cwin_snap_validate(copy, len, &size, &why), "parts past nlive accepted");
		memset(copy + 40 + 4 * 4, 0, 4 * 12);
		CHECK(!cwin_snap_validate(copy, len, &size, &why), "births past nlive accepted");
		memset(copy + 104 + 8 * 4, 0, 8 * 12);
		CHECK(cwin_snap_validate(copy, len, &size, &why), "nlive 4: %s", why);
		free(copy);
	}

	/* a huge shape claims a length the input lacks: refused, no allocation */
	{
		unsigned char hdr[CWIN_SNAP_HEADER_BYTES];

		memcpy(hdr, buf, sizeof(hdr));
		put32(hdr + 8, 65536);
		put32(hdr + 12, UINT32_C(1) << 20);
		CHECK(!cwin_snap_validate(hdr, sizeof(hdr), &size, &why), "a 2^20 x 64k shape accepted");
	}

	/* the blocks: counts, codes, base, entries from the future */
	put32(b, cwin_header_c(cwin_snap_block(s, 0))->count[0] + 1);
	expect_refused(buf, len, blocks_at + 8, b, 4, "a tag count that is not its entries");
	b[0] = 0xFF;
	b[1] = 0xFF;
	expect_refused(buf, len, blocks_at + sizeof(CwinHeader), b, 2, "a nibble code out of range");
	put64(b, (uint64_t) s->epoch + 1);
	expect_refused(buf, len, blocks_at, b, 8, "a base after the epoch");
	put64(b, UINT64_MAX);
	expect_refused(buf, len, blocks_at, b, 8, "a negative base");
	b[0] = 1;
	expect_refused(buf, len, blocks_at + block_size - 1, b, 1, "a bit in the slack");
	{
		/*
		 * A base 15 epochs back and the current epoch's entries
		 * relabelled as the next epoch's (tag + 1, count moved): an
		 * entry from the future.
		 */
		CwinSnap   *f = malloc(len);
		uint8_t    *blk;
		CwinHeader *h;
		CwinLayout	layout = w.layout;
		unsigned char *fbuf = malloc(len);
		CwinSlot	slots[CWIN_BUCKET_SLOTS];
		uint32_t	cur = (uint32_t) (s->epoch & 15);
		uint32_t	moved = 0;

		memcpy(f, s, len);
		blk = cwin_snap_block(f, 0);
		h = cwin_header(blk);
		CHECK(h->base > s->epoch - 15, "base %lld", (long long) h->base);
		for (uint32_t bk = 0; bk < layout.nbuckets; bk++)
		{
			cwin_bucket_read(&layout, blk, bk, slots);
			for (int i = 0; i < CWIN_BUCKET_SLOTS; i++)
				if (slots[i].fp != 0 && slots[i].tag == cur)
				{
					slots[i].tag = (cur + 1) & 15;
					moved++;
				}
			cwin_bucket_write(&layout, blk, bk, slots);
		}
		h->count[(cur + 1) & 15] += moved;
		h->count[cur] -= moved;
		CHECK(moved > 0, "no entry of the current epoch in block 0");
		CHECK(!cwin_snap_check(f, &why), "an entry from the future accepted");
		cwin_snap_serialize(f, fbuf);
		{
			CwinSnap   *c = snap_round_trip(fbuf, len, &why);

			CHECK(c == NULL, "an entry from the future decoded");
			free(c);
		}
		free(fbuf);
		free(f);
	}

	/* waiting operations out of order, or repeated */
	{
		size_t		d_at = len - 3 * 16;
		unsigned char *copy = malloc(len);

		memcpy(copy, buf, len);
		memcpy(copy + d_at, buf + d_at + 16, 16);
		memcpy(copy + d_at + 16, buf + d_at, 16);
		expect_refused(copy, len, 0, copy, 0, "unsorted waiting operations");
		memcpy(copy, buf, len);
		memcpy(copy + d_at + 16, buf + d_at, 16);
		expect_refused(copy, len, 0, copy, 0, "a repeated waiting operation");
		free(copy);
	}

	/* random corruption: refused, or a snapshot that checks */
	for (int n = 0; n < 3000; n++)
	{
		unsigned char *copy = malloc(len);
		CwinSnap   *c;
		int			flips = 1 + (int) test_rand_below(&rng, 4);

		memcpy(copy, buf, len);
		for (int i = 0; i < flips; i++)
			copy[test_rand_below(&rng, len)] ^= (unsigned char) (1 + test_rand_below(&rng, 255));
		c = snap_round_trip(copy, len, &why);
		if (c != NULL)
		{
			FbfHash		h = random_hash(&rng);

			(void) cwin_snap_contains(c, &h);
			free(c);
		}
		free(copy);
	}
	free(buf);
	free(s);
	cwin_window_free(&w);
}

int
main(int argc, char **argv)
{
	if (argc > 1)
		seed = strtoull(argv[1], NULL, 10);
	printf("# seed %llu\n", (unsigned long long) seed);

	run_test("layout: f + 3 bits a slot, refused shapes", test_layout_refused);
	run_test("semi-sorted buckets: any four slots round-trip, sorted, "
			 "neighbours untouched", test_bucket_codes);
	run_test("one block: inserts across epochs, no false negative while "
			 "live, failed inserts change nothing, expired not found",
			 test_block_random);
	run_test("tags never alias: an entry is not found after its epochs, "
			 "swept or not", test_no_alias);
	run_test("split by routing bits: each entry in its child, copies only "
			 "when bits are used up", test_block_split);
	run_test("windows under random inserts, refreshes and splits: no false "
			 "negative within the live epochs", test_window_random);
	run_test("growth under a rising rate by the automatic rule: nothing "
			 "lost through waits, splits and copies; no wait once steady",
			 test_window_growth);
	run_test("planned windows: measured false positives under the target, "
			 "near the estimate", test_plan_measured);
	run_test("placements and encoding are frozen (page format)", test_frozen);
	run_test("snapshots: round trip byte for byte, every lookup answered as "
			 "the window answers it, waiting operations included",
			 test_snap_round_trip);
	run_test("snapshots: truncated, out-of-range, non-canonical and "
			 "corrupted input refused before use", test_snap_malformed);
	return tap_done();
}
