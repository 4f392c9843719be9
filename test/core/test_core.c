/*-------------------------------------------------------------------------
 *
 * test_core.c
 *	  Standalone tests of the pure FBF core: hashing, the no-false-negative
 *	  window under random refreshes and resizes, the retention guarantee
 *	  under the AIMD controller, the FPP estimate against measurement,
 *	  union, sizing, and the codec; and (test_shared.h) the core's shared
 *	  little-endian and cuckoo bucket helpers against reference models.
 *
 * Usage: test_core [seed]   (prints TAP; the seed makes failures repeatable)
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bloom_bits.h"
#include "bloom_slice.h"
#include "fbf_aimd.h"
#include "fbf_codec.h"
#include "fbf_core.h"
#include "fbf_hash.h"
#include "fbf_plan.h"
#include "legacy.h"
#include "tap.h"

static uint64_t seed = 20151103;

#include "test_shared.h"

static Fbf *
new_fbf_parts(uint32_t nbits, int nhashes, int nfilters, uint32_t nparts)
{
	Fbf		   *f = malloc(fbf_size(nbits, nfilters, nparts));

	fbf_init(f, nbits, nhashes, nfilters, nparts, 0, 0);
	return f;
}

static Fbf *
new_fbf(uint32_t nbits, int nhashes, int nfilters)
{
	return new_fbf_parts(nbits, nhashes, nfilters, 1);
}

/* hash of the i-th element of a test stream; streams never overlap */
static FbfHash
element(uint64_t stream, uint64_t i)
{
	uint64_t	key[2] = {stream, i};

	return fbf_hash_bytes(key, sizeof(key));
}

static Fbf *
resized(Fbf *f, int nfilters)
{
	Fbf		   *g = malloc(fbf_size(f->nbits, nfilters, f->nparts));

	fbf_resize(g, f, nfilters);
	free(f);
	return g;
}

/* ---------------------------------------------------------------------- */

/*
 * Hash values are part of the storage format: these must never change.
 */
static void
test_hash_golden(void)
{
	FbfHash		h = fbf_hash_bytes("", 0);
	FbfHash		a = fbf_hash_bytes("abc", 3);
	FbfHash		i = fbf_hash_int64(42);
	uint32_t	probes[5];

	CHECK(h.h1 == UINT64_C(0x5027631132651e81) &&
		  h.h2 == UINT64_C(0x8f50cf1a72bc633b),
		  "empty: %016llx %016llx", (unsigned long long) h.h1,
		  (unsigned long long) h.h2);
	CHECK(a.h1 == UINT64_C(0xeb29dccd270f6d06) &&
		  a.h2 == UINT64_C(0x048a0c3a73c53745),
		  "abc: %016llx %016llx", (unsigned long long) a.h1,
		  (unsigned long long) a.h2);
	CHECK(i.h1 == UINT64_C(0xb6d53aa8ff71fd33) &&
		  i.h2 == UINT64_C(0xf6c420153a619acb),
		  "42: %016llx %016llx", (unsigned long long) i.h1,
		  (unsigned long long) i.h2);
	fbf_probes(&a, 5, 6250, probes);
	CHECK(probes[0] == 5741 && probes[1] == 5852 && probes[2] == 5962 &&
		  probes[3] == 6073 && probes[4] == 6184,
		  "probes %u %u %u %u %u", probes[0], probes[1], probes[2],
		  probes[3], probes[4]);

	/* an element's partition picks the page its bits are in */
	CHECK(fbf_part(&a, 3) == 0 && fbf_part(&a, 7) == 1 &&
		  fbf_part(&a, 1000) == 152,
		  "abc partitions %u %u %u", fbf_part(&a, 3), fbf_part(&a, 7),
		  fbf_part(&a, 1000));
	CHECK(fbf_part(&i, 3) == 2 && fbf_part(&i, 7) == 6 &&
		  fbf_part(&i, 1000) == 997,
		  "42 partitions %u %u %u", fbf_part(&i, 3), fbf_part(&i, 7),
		  fbf_part(&i, 1000));
}

/*
 * The keyed hash is SipHash-2-4-128: the reference implementation's
 * vectors (key bytes 0..15, message bytes 0..n-1), output bytes being h1
 * then h2, little-endian.  Also part of the storage format.
 */
static void
test_keyed_hash_vectors(void)
{
	static const struct
	{
		size_t		len;
		const char *hex;
	}			vectors[] = {
		{0, "a3817f04ba25a8e66df67214c7550293"},
		{1, "da87c1d86b99af44347659119b22fc45"},
		{2, "8177228da4a45dc7fca38bdef60affe4"},
		{3, "9c70b60c5267a94e5f33b6b02985ed51"},
		{4, "f88164c12d9c8faf7d0f6e7c7bcd5579"},
		{7, "a1f1ebbed8dbc153c0b84aa61ff08239"},
		{8, "3b62a9ba6258f5610f83e264f31497b4"},
		{9, "264499060ad9baabc47f8b02bb6d71ed"},
	};
	FbfHashKey	key = {UINT64_C(0x0706050403020100), UINT64_C(0x0f0e0d0c0b0a0908)};
	FbfHashKey	zero = {0, 0};
	FbfHashKey	other = {1, 0};
	unsigned char msg[16];
	size_t		v;
	int			i;

	for (i = 0; i < 16; i++)
		msg[i] = (unsigned char) i;
	for (v = 0; v < sizeof(vectors) / sizeof(vectors[0]); v++)
	{
		FbfHash		h = fbf_hash_keyed(&key, msg, vectors[v].len);
		char		got[33];

		for (i = 0; i < 16; i++)
			snprintf(got + 2 * i, 3, "%02x",
					 (unsigned) (((i < 8 ? h.h1 : h.h2) >> (8 * (i % 8))) & 0xff));
		CHECK(strcmp(got, vectors[v].hex) == 0, "length %zu: %s, expected %s",
			  vectors[v].len, got, vectors[v].hex);
	}

	/* the zero key is the public hash; any other key is another hash */
	{
		FbfHash		p = fbf_hash_keyed(&zero, "abc", 3);
		FbfHash		q = fbf_hash_bytes("abc", 3);
		FbfHash		r = fbf_hash_keyed(&other, "abc", 3);
		FbfHash		i42 = fbf_hash_int64_keyed(&key, 42);
		unsigned char le42[8] = {42, 0, 0, 0, 0, 0, 0, 0};
		FbfHash		b42 = fbf_hash_keyed(&key, le42, 8);

		CHECK(p.h1 == q.h1 && p.h2 == q.h2, "zero key is not the public hash");
		CHECK(r.h1 != q.h1 && r.h2 != q.h2, "a key does not change the hash");
		CHECK(i42.h1 == b42.h1 && i42.h2 == b42.h2,
			  "an int64 is not hashed as its 8 little-endian bytes");
	}
}

/* the portable multiply-high equals the 128-bit one */
static void
test_reduce_portable(void)
{
	uint64_t	s = seed;
	int			n;

	for (n = 0; n < 1000000; n++)
	{
		uint64_t	x = test_rand(&s);
		uint32_t	r = (uint32_t) test_rand(&s) | 1;
		uint64_t	lo = (x & UINT64_C(0xffffffff)) * r;
		uint64_t	hi = (x >> 32) * r;
		uint32_t	portable = (uint32_t) ((hi + (lo >> 32)) >> 32);

		CHECK(portable == fbf_reduce(x, r), "x=%llu r=%u",
			  (unsigned long long) x, r);
		CHECK(fbf_reduce(x, r) < r, "out of range");
	}
}

/* ---------------------------------------------------------------------- */

typedef struct Tracked
{
	FbfHash		hash;
	int64_t		epoch;			/* birth epoch of the future filter then */
} Tracked;

/*
 * The structural invariant: an element inserted while the filter born at
 * epoch e was future is reported present, under every check, for as long
 * as that filter is live; adding it again is refused.  Random inserts,
 * refreshes, grows and shrinks (including shrinks that drop live filters).
 */
static void
test_no_false_negative_random_ops(void)
{
	uint64_t	s = seed ^ 1;
	int			round;

	for (round = 0; round < 60; round++)
	{
		uint32_t	nbits = 64 + (uint32_t) test_rand_below(&s, 4000);
		int			nhashes = 1 + (int) test_rand_below(&s, 8);
		int			nfilters = 3 + (int) test_rand_below(&s, 6);
		Fbf		   *f = new_fbf_parts(nbits, nhashes, nfilters,
										  1 + (uint32_t) test_rand_below(&s, 4));
		Tracked    *tracked = malloc(sizeof(Tracked) * 4000);
		int			ntracked = 0;
		int			step;
		uint64_t	next = 0;

		for (step = 0; step < 1500; step++)
		{
			uint64_t	op = test_rand_below(&s, 100);
			const char *why;
			int			t;

			if (op < 70 && ntracked < 4000)
			{
				FbfHash		h = element(round, next++);

				if (fbf_add(f, &h, (FbfCheck) test_rand_below(&s, 3)))
				{
					tracked[ntracked].hash = h;
					tracked[ntracked].epoch = f->epoch;
					ntracked++;
				}
			}
			else if (op < 88)
				fbf_refresh(f, (int64_t) step);
			else if (op < 94 && f->nfilters * 2 <= FBF_MAX_FILTERS)
				f = resized(f, f->nfilters + 1 + (int) test_rand_below(&s, f->nfilters));
			else if (op < 100 && f->nfilters > FBF_MIN_FILTERS)
				f = resized(f, f->nfilters - 1);

			CHECK(fbf_check_invariants(f, &why), "round %d step %d: %s",
				  round, step, why);
			for (t = 0; t < ntracked; t++)
			{
				int64_t		index = f->epoch - tracked[t].epoch;

				if (index >= f->nlive)
					continue;	/* forgotten: allowed */
				CHECK(fbf_contains(f, &tracked[t].hash, FBF_CHECK_PAIRED) &&
					  fbf_contains(f, &tracked[t].hash, FBF_CHECK_OPTIMIZED) &&
					  fbf_contains(f, &tracked[t].hash, FBF_CHECK_SIMPLE),
					  "round %d step %d: element %d (index %lld) missing",
					  round, step, t, (long long) index);
				CHECK(!fbf_add(f, &tracked[t].hash, FBF_CHECK_PAIRED),
					  "re-add accepted");
			}
			/* paired answers exactly as optimized (future within present) */
			{
				FbfHash		probe = element(UINT64_C(0xabc), step);

				CHECK(fbf_contains(f, &probe, FBF_CHECK_PAIRED) ==
					  fbf_contains(f, &probe, FBF_CHECK_OPTIMIZED),
					  "paired differs from optimized");
			}
		}
		free(tracked);
		free(f);
	}
}

/*
 * The time guarantee under the controller: a simulated clock, a retention R,
 * refreshes when due, and grow/shrink decisions from fbf_aimd_decide fed
 * random estimates.  Live filters are only ever dropped after
 * fbf_drop_is_safe().  Every element younger than R must be found.
 */
static void
retention_under_aimd(uint64_t s, int rounds, int max_filters, uint64_t *seen)
{
	int			round;

	for (round = 0; round < rounds; round++)
	{
		FbfAimdConfig cfg;
		int64_t		now = 1000;
		int64_t		period;
		int64_t		last_refresh = now;
		Fbf		   *f;
		Tracked    *tracked = malloc(sizeof(Tracked) * 20000);
		int64_t    *inserted_at = malloc(sizeof(int64_t) * 20000);
		int			ntracked = 0;
		int			tick;
		uint64_t	next = 0;
		int			grows = 0,
					shrinks = 0,
					deferred = 0;

		cfg.target_fpp = 0.01;
		cfg.increase_at = 0.9;
		cfg.decrease_at = 0.1;
		cfg.retention = 20 + (int64_t) test_rand_below(&s, 100);
		cfg.period_step = 1 + (int64_t) test_rand_below(&s, 5);
		cfg.period_min = 1;
		cfg.period_max = cfg.retention;
		cfg.min_filters = FBF_MIN_FILTERS;
		cfg.max_filters = max_filters;
		cfg.nbits = 512;
		cfg.nparts = 1;
		cfg.nhashes = 3;
		cfg.max_bytes = fbf_size(cfg.nbits, max_filters, 1);

		period = (cfg.retention + 1) / 2;	/* 3 filters: 2 periods cover R */
		f = malloc(fbf_size(cfg.nbits, 3, 1));
		fbf_init(f, cfg.nbits, 3, 3, 1, period, now);

		for (tick = 0; tick < 3000; tick++, now++)
		{
			int			n = (int) test_rand_below(&s, 4);
			int			t;

			while (n-- > 0 && ntracked < 20000)
			{
				FbfHash		h = element(1000 + round, next++);

				if (fbf_add(f, &h, FBF_CHECK_PAIRED))
				{
					tracked[ntracked].hash = h;
					inserted_at[ntracked] = now;
					ntracked++;
				}
			}

			if (now - last_refresh >= period)
			{
				if (fbf_refresh_within(f, now, cfg.retention))
					last_refresh = now;
				else
					deferred++;
			}

			if (tick % 7 == 0)
			{
				double		fpp = test_rand_below(&s, 3) == 0 ? 0.5 : 0.0001;
				FbfAimdDecision d = fbf_aimd_decide(&cfg, f->nfilters, period,
													fpp, -1);

				if (d.action == FBF_AIMD_GROW)
				{
					CHECK((d.nfilters - 1) * d.period >= cfg.retention,
						  "grow breaks retention");
					f = resized(f, d.nfilters);
					period = d.period;
					grows++;
				}
				else if (d.action == FBF_AIMD_SHRINK)
				{
					CHECK((d.nfilters - 1) * d.period >= cfg.retention,
						  "shrink breaks retention");
					if (f->nlive < f->nfilters ||
						fbf_drop_is_safe(f, now, cfg.retention))
					{
						f = resized(f, d.nfilters);
						shrinks++;
					}
					period = d.period;	/* lengthen now, drop later */
				}
			}

			*seen |= UINT64_C(1) << (f->nfilters - 1);
			for (t = ntracked - 1; t >= 0 && now - inserted_at[t] <= cfg.retention; t--)
				CHECK(fbf_contains(f, &tracked[t].hash, FBF_CHECK_PAIRED),
					  "round %d tick %d: element aged %lld of retention %lld forgotten",
					  round, tick, (long long) (now - inserted_at[t]),
					  (long long) cfg.retention);
		}
		CHECK(grows > 0 && shrinks > 0, "round %d: grows %d shrinks %d",
			  round, grows, shrinks);
		(void) deferred;
		free(tracked);
		free(inserted_at);
		free(f);
	}
}

static void
test_retention_under_aimd(void)
{
	uint64_t	seen = 0;

	retention_under_aimd(seed ^ 2, 40, 24, &seen);
}

/*
 * The same up to 64 filters: the controller's doublings and one-filter
 * shrinks take the ring through every stride of the bit-sliced layout
 * (stride = filters up to 57, 64 above), re-laid out at each resize.
 */
static void
test_retention_all_strides(void)
{
	uint64_t	seen = 0;
	int			n;
	int			classes = 0;

	retention_under_aimd(seed ^ 15, 12, FBF_MAX_FILTERS, &seen);
	for (n = 1; n <= 64; n++)
		if ((seen >> (n - 1)) & 1)
			classes |= n <= 8 ? 1 : n <= 16 ? 2 : n <= 32 ? 4 : n <= 57 ? 8 : 16;
	CHECK(classes == 31, "filter counts seen %016llx", (unsigned long long) seen);
}

/* ---------------------------------------------------------------------- */

/* measured FPP of f under a check, over `probes` never-inserted elements */
static double
measured_fpp(const Fbf *f, FbfCheck check, int probes)
{
	int			hits = 0;
	int			i;

	for (i = 0; i < probes; i++)
	{
		FbfHash		h = element(UINT64_C(0xdead), (uint64_t) i);

		hits += fbf_contains(f, &h, check);
	}
	return (double) hits / probes;
}

/*
 * The paper's setting: basic FBF (N = 1), m = 6250, k = 5, 100..1000
 * elements spread over refreshes, 200,000 non-members.  The estimate must
 * be within 25% (relative) of the measurement, or within 0.002 absolute
 * where the FPP is tiny; and the optimized check must beat the simple one.
 */
static void
test_estimate_matches_measured(void)
{
	int			total;

	for (total = 100; total <= 1000; total += 100)
	{
		Fbf		   *f = new_fbf(6250, 5, 3);
		int			i;
		FbfCheck	checks[] = {FBF_CHECK_SIMPLE, FBF_CHECK_OPTIMIZED,
		FBF_CHECK_PAIRED};
		int			c;

		/* three periods' worth, refreshing in between, as a live window */
		for (i = 0; i < total; i++)
		{
			FbfHash		h = element(7, (uint64_t) i);

			if (i > 0 && i % (total / 3 + 1) == 0)
				fbf_refresh(f, i);
			fbf_add(f, &h, FBF_CHECK_PAIRED);
		}
		for (c = 0; c < 3; c++)
		{
			double		est = fbf_estimate_fpp(f, checks[c]);
			double		got = measured_fpp(f, checks[c], 200000);

			CHECK(fabs(est - got) <= 0.25 * got || fabs(est - got) < 0.002,
				  "%d elements, %s: estimate %.5f measured %.5f", total,
				  fbf_check_name(checks[c]), est, got);
		}
		CHECK(measured_fpp(f, FBF_CHECK_OPTIMIZED, 200000) <=
			  measured_fpp(f, FBF_CHECK_SIMPLE, 200000),
			  "optimized worse than simple at %d", total);
		CHECK(measured_fpp(f, FBF_CHECK_PAIRED, 200000) ==
			  measured_fpp(f, FBF_CHECK_OPTIMIZED, 200000),
			  "paired differs from optimized at %d", total);
		free(f);
	}
}

/* estimate against m, 300 elements, k = 5 (DESIGN.md 1.8) */
static void
test_estimate_against_m(void)
{
	uint32_t	m;

	for (m = 5000; m <= 30000; m += 5000)
	{
		Fbf		   *f = new_fbf(m, 5, 3);
		int			i;
		double		est,
					got;

		for (i = 0; i < 300; i++)
		{
			FbfHash		h = element(8, (uint64_t) i);

			if (i == 100 || i == 200)
				fbf_refresh(f, i);
			fbf_add(f, &h, FBF_CHECK_OPTIMIZED);
		}
		est = fbf_estimate_fpp(f, FBF_CHECK_OPTIMIZED);
		got = measured_fpp(f, FBF_CHECK_OPTIMIZED, 200000);
		CHECK(fabs(est - got) <= 0.25 * got || fabs(est - got) < 0.001,
			  "m %u: estimate %.5f measured %.5f", m, est, got);
		free(f);
	}
}

/* ---------------------------------------------------------------------- */

static void
test_union(void)
{
	Fbf		   *a = new_fbf(4096, 4, 4);
	Fbf		   *b = new_fbf(4096, 4, 4);
	Fbf		   *c = new_fbf(4096, 4, 5);
	const char *why;
	int			i;

	for (i = 0; i < 200; i++)
	{
		FbfHash		ha = element(20, (uint64_t) i);
		FbfHash		hb = element(21, (uint64_t) i);

		fbf_add(a, &ha, FBF_CHECK_PAIRED);
		fbf_add(b, &hb, FBF_CHECK_PAIRED);
		if (i % 50 == 49)
		{
			fbf_refresh(a, i);
			if (i < 100)
				fbf_refresh(b, i);	/* b lags a by two refreshes */
		}
	}
	CHECK(fbf_same_shape(a, b, &why), "same shape refused");
	CHECK(!fbf_same_shape(a, c, &why) && strstr(why, "past filters"),
		  "different shape accepted");
	CHECK(a->epoch == b->epoch + 2, "setup");

	/*
	 * a has seen 4 refreshes: its elements 0..49 are forgotten, 50..99 live
	 * in its oldest filter.  b lags by 2: aligned to a, b's elements 0..49
	 * fall past a's reach, 50..99 land in a's oldest filter.
	 */
	for (i = 50; i < 200; i++)
	{
		FbfHash		ha = element(20, (uint64_t) i);

		CHECK(fbf_contains(a, &ha, FBF_CHECK_OPTIMIZED), "setup: a's %d", i);
	}
	fbf_union_into(a, b);
	CHECK(fbf_check_invariants(a, &why), "%s", why);
	for (i = 50; i < 200; i++)
	{
		FbfHash		ha = element(20, (uint64_t) i);
		FbfHash		hb = element(21, (uint64_t) i);

		CHECK(fbf_contains(a, &ha, FBF_CHECK_OPTIMIZED), "a's %d lost", i);
		CHECK(fbf_contains(a, &hb, FBF_CHECK_OPTIMIZED), "b's %d lost", i);
	}
	free(a);
	free(b);
	free(c);
}

/* union of an FBF with itself changes nothing and keeps counts exact */
static void
test_union_idempotent(void)
{
	Fbf		   *a = new_fbf(8192, 5, 4);
	Fbf		   *b = malloc(fbf_size(8192, 4, 1));
	int			i;

	for (i = 0; i < 500; i++)
	{
		FbfHash		h = element(22, (uint64_t) i);

		fbf_add(a, &h, FBF_CHECK_PAIRED);
		if (i % 100 == 99)
			fbf_refresh(a, i);
	}
	memcpy(b, a, fbf_size(8192, 4, 1));
	fbf_union_into(a, b);
	for (i = 0; i < a->nlive; i++)
	{
		double		c = (double) fbf_filter_count(a, i);
		double		orig = (double) fbf_filter_count(b, i);

		CHECK(fabs(c - orig) <= 0.05 * orig + 1, "filter %d: %g vs %g", i, c,
			  orig);
	}
	free(a);
	free(b);
}

/* ---------------------------------------------------------------------- */

/*
 * The rate a growth reads since a filter's birth: a drain's lag is not
 * counted twice, operations waiting at the birth are not the filter's,
 * and a filter born an instant ago is measured over the floor.
 */
static void
test_rate_since_birth(void)
{
	/*
	 * A steady 3 elements a unit, drained in chunks of 600 (a page a
	 * chain, say), seen at every moment of 10 periods of 1,000 units:
	 * whatever the lag at the birth and now, the rate read is 3 within
	 * one chunk over the time since the birth.
	 */
	for (int64_t born = 1000; born < 11000; born += 97)
	{
		for (int64_t now = born + 1000; now < born + 3000; now += 89)
		{
			/* drained up to t: every whole chunk that had arrived */
			int64_t		drained_born = (3 * born) / 600 * 600;
			int64_t		drained_now = (3 * now) / 600 * 600;
			int64_t		pending_born = 3 * born - drained_born;
			int64_t		pending_now = 3 * now - drained_now;
			double		r = fbf_rate_since_birth((uint64_t) (drained_now - drained_born),
												 pending_born, pending_now,
												 now - born, 1000);

			CHECK(r > 2.999 && r < 3.001,
				  "steady rate read as %g (born %lld, now %lld)", r,
				  (long long) born, (long long) now);

			/* counted as before, the lag at the birth counts twice */
			if (pending_born >= 300)
				CHECK((double) (drained_now - drained_born + pending_now) / (now - born) > 3.1,
					  "the old count is not inflated here: the case tests nothing");
		}
	}

	/* a batch waiting at the birth, drained since, is no rate */
	CHECK(fbf_rate_since_birth(2000, 2000, 0, 100, 100) == 0, "drained batch");
	/* what still waits for room counts, whenever it came */
	CHECK(fbf_rate_since_birth(99, 2000, 1901, 100, 100) == 19.01,
		  "batch still waiting: %g", fbf_rate_since_birth(99, 2000, 1901, 100, 100));
	/* what arrived since the birth is counted, drained or waiting */
	CHECK(fbf_rate_since_birth(150, 100, 250, 100, 100) == 3, "arrived: %g",
		  fbf_rate_since_birth(150, 100, 250, 100, 100));

	/*
	 * Entries that waited at the birth and were dropped (rolled back), not
	 * drained, can hide drained arrivals, never waiting ones: a tenant's
	 * rolled-back batch cannot make a full chain read as no rate.
	 */
	CHECK(fbf_rate_since_birth(0, 50, 0, 100, 100) == 0, "aborted alone");
	CHECK(fbf_rate_since_birth(100, 50, 0, 100, 100) == 0.5, "aborted beside drained");
	CHECK(fbf_rate_since_birth(0, 60000, 5000, 100, 100) == 50,
		  "a rolled-back flood beside waiting entries: %g",
		  fbf_rate_since_birth(0, 60000, 5000, 100, 100));

	/* a filter born an instant ago is measured over the floor */
	CHECK(fbf_rate_since_birth(5, 0, 0, 1, 1000) == 0.005, "floor: %g",
		  fbf_rate_since_birth(5, 0, 0, 1, 1000));
	CHECK(fbf_rate_since_birth(5, 0, 0, 0, 1000) == 0.005, "born now");
	CHECK(fbf_rate_since_birth(5, 0, 0, 0, 0) == 0, "no time at all");
	CHECK(fbf_rate_since_birth(5, 0, 0, 2000, 1000) == 0.0025, "past the floor");
}

static void
test_aimd_decisions(void)
{
	FbfAimdConfig cfg;
	FbfAimdDecision d;

	cfg.target_fpp = 0.01;
	cfg.increase_at = 0.9;
	cfg.decrease_at = 0.1;
	cfg.retention = 100;
	cfg.period_step = 5;
	cfg.period_min = 1;
	cfg.period_max = 1000;
	cfg.min_filters = 3;
	cfg.max_filters = 64;
	cfg.nbits = 6250;
	cfg.nparts = 1;
	cfg.nhashes = 5;
	cfg.max_bytes = UINT64_C(1) << 30;

	d = fbf_aimd_decide(&cfg, 3, 50, 0.005, -1);
	CHECK(d.action == FBF_AIMD_HOLD && d.nfilters == 3 && d.period == 50,
		  "inside the band");

	d = fbf_aimd_decide(&cfg, 3, 50, 0.0095, -1);
	CHECK(d.action == FBF_AIMD_GROW && d.nfilters == 6 && d.period == 45,
		  "grow: %d %lld", d.nfilters, (long long) d.period);

	/* period_min and the retention bound the shorter period */
	cfg.period_min = 48;
	d = fbf_aimd_decide(&cfg, 3, 50, 0.5, -1);
	CHECK(d.period == 48, "period_min: %lld", (long long) d.period);
	cfg.period_min = 1;
	cfg.period_step = 40;
	d = fbf_aimd_decide(&cfg, 3, 50, 0.5, -1);
	CHECK(d.nfilters == 6 && d.period == 20, "retention bound: %lld",
		  (long long) d.period);
	cfg.period_step = 5;

	/* caps */
	d = fbf_aimd_decide(&cfg, 40, 50, 0.5, -1);
	CHECK(d.action == FBF_AIMD_GROW && d.nfilters == 64 && d.capped,
		  "filter cap: %d", d.nfilters);
	d = fbf_aimd_decide(&cfg, 64, 50, 0.5, -1);
	CHECK(d.action == FBF_AIMD_GROW && d.capped && d.nfilters == 64 && d.period == 45,
		  "at the filter cap, only the period shortens");
	d = fbf_aimd_decide(&cfg, 64, 2, 0.5, -1);
	CHECK(d.action == FBF_AIMD_HOLD && d.capped, "at filter cap and shortest period");
	cfg.max_bytes = fbf_size(6250, 5, 1);
	d = fbf_aimd_decide(&cfg, 3, 50, 0.5, -1);
	CHECK(d.action == FBF_AIMD_GROW && d.nfilters == 5 && d.capped,
		  "memory cap partial: %d", d.nfilters);
	d = fbf_aimd_decide(&cfg, 5, 25, 0.5, -1);
	CHECK(d.action == FBF_AIMD_HOLD && d.capped &&
		  strstr(d.reason, "memory") != NULL, "memory cap: %s", d.reason);
	cfg.max_bytes = UINT64_C(1) << 30;

	/* shrink, and what blocks it */
	d = fbf_aimd_decide(&cfg, 6, 50, 0.0001, -1);
	CHECK(d.action == FBF_AIMD_SHRINK && d.nfilters == 5 && d.period == 55,
		  "shrink");
	d = fbf_aimd_decide(&cfg, 3, 200, 0.0001, -1);
	CHECK(d.action == FBF_AIMD_HOLD, "minimum filters");
	d = fbf_aimd_decide(&cfg, 4, 40, 0.0001, -1);
	CHECK(d.action == FBF_AIMD_HOLD && strstr(d.reason, "retention"),
		  "retention blocks shrink: (4-2)*45 < 100");
	d = fbf_aimd_decide(&cfg, 4, 48, 0.0001, -1);
	CHECK(d.action == FBF_AIMD_SHRINK && d.nfilters == 3 && d.period == 53,
		  "the longer period makes room: (4-2)*53 >= 100");
	cfg.period_max = 52;
	d = fbf_aimd_decide(&cfg, 6, 50, 0.0001, -1);
	CHECK(d.period == 52, "period_max");
	cfg.period_max = 1000;

	/*
	 * Looking ahead at the rate.  6250 bits, k = 5: about 650 elements per
	 * filter meet 1%.  Old load ageing out (estimate high, rate low): hold.
	 * Rate too high for the shape: grow.
	 */
	d = fbf_aimd_decide(&cfg, 6, 50, 0.0095, 1.0);	/* 50 per period */
	CHECK(d.action == FBF_AIMD_HOLD && strstr(d.reason, "current rate"),
		  "ageing out: %s", d.reason);
	d = fbf_aimd_decide(&cfg, 6, 50, 0.011, 1.0);
	CHECK(d.action == FBF_AIMD_GROW, "past the target, always act: %s", d.reason);
	d = fbf_aimd_decide(&cfg, 6, 50, 0.5, 20.0);	/* 1000 per period */
	CHECK(d.action == FBF_AIMD_GROW, "rate too high: %s", d.reason);
	/* estimate low, but a smaller, slower shape would overflow: hold */
	d = fbf_aimd_decide(&cfg, 6, 50, 0.0001, 6.0);	/* 300, then 330 */
	CHECK(d.action == FBF_AIMD_HOLD && strstr(d.reason, "smaller"),
		  "no shrink into growth: %s", d.reason);
	d = fbf_aimd_decide(&cfg, 6, 50, 0.0001, 0.5);
	CHECK(d.action == FBF_AIMD_SHRINK, "low rate shrinks: %s", d.reason);
}

/*
 * fbf_plan's shape meets the target in steady state, and measured FPP of a
 * simulated steady state agrees.
 */
static void
test_plan(void)
{
	FbfPlan		plan;
	const char *why;
	double		targets[] = {0.01, 0.001};
	int			t;

	CHECK(!fbf_plan(0, 0.01, 10, FBF_CHECK_PAIRED, FBF_MAX_FILTERS, &plan, &why), "zero retention");
	CHECK(!fbf_plan(10, 1.5, 10, FBF_CHECK_PAIRED, FBF_MAX_FILTERS, &plan, &why), "bad target");

	for (t = 0; t < 2; t++)
	{
		double		retention = 60;
		double		rate = 100;
		Fbf		   *f;
		int			per_period;
		int			p,
					i;
		double		got;

		CHECK(fbf_plan(retention, targets[t], rate, FBF_CHECK_PAIRED, FBF_MAX_FILTERS, &plan, &why),
			  "%s", why);
		CHECK(plan.fpp <= targets[t], "plan estimate %g", plan.fpp);
		CHECK((plan.nfilters - 1) * plan.period >= retention - 1e-9,
			  "window %g", (plan.nfilters - 1) * plan.period);

		/* run it: 3 * nfilters periods at the planned rate */
		f = new_fbf(plan.nbits, plan.nhashes, plan.nfilters);
		per_period = (int) ceil(rate * plan.period);
		for (p = 0; p < 3 * plan.nfilters; p++)
		{
			for (i = 0; i < per_period; i++)
			{
				FbfHash		h = element(30 + t, (uint64_t) (p * per_period + i));

				fbf_add(f, &h, FBF_CHECK_PAIRED);
			}
			if (p + 1 < 3 * plan.nfilters)
				fbf_refresh(f, p);
		}
		got = measured_fpp(f, FBF_CHECK_PAIRED, 200000);
		CHECK(got <= 1.3 * targets[t], "target %g: measured %g (m %u k %d n %d)",
			  targets[t], got, plan.nbits, plan.nhashes, plan.nfilters);
		free(f);
	}
}

/*
 * Blocked layout: a plan split into page-sized blocks still meets its
 * target when run, elements spread evenly over the partitions, and the
 * estimate (the mean of per-partition estimates) matches the measurement.
 */
static void
test_partitions(void)
{
	FbfPlan		plan;
	const char *why;
	Fbf		   *f;
	int			per_period;
	int			p,
				i;
	double		got,
				est;
	uint64_t	lo = UINT64_MAX,
				hi = 0;
	uint32_t	part;

	/* 60 s at 1000/s, 1%, blocks of at most one 8 kB page */
	CHECK(fbf_plan_blocked(60, 0.01, 1000, FBF_CHECK_OPTIMIZED, FBF_MAX_FILTERS, 65000, &plan, &why),
		  "%s", why);
	CHECK(plan.nparts > 1 && plan.nbits <= 65000, "parts %u bits %u",
		  plan.nparts, plan.nbits);

	f = new_fbf_parts(plan.nbits, plan.nhashes, plan.nfilters, plan.nparts);
	per_period = (int) ceil(1000 * plan.period);
	for (p = 0; p < 3 * plan.nfilters; p++)
	{
		for (i = 0; i < per_period; i++)
		{
			FbfHash		h = element(60, (uint64_t) (p * per_period + i));

			fbf_add(f, &h, FBF_CHECK_OPTIMIZED);
		}
		if (p + 1 < 3 * plan.nfilters)
			fbf_refresh(f, p);
	}
	got = measured_fpp(f, FBF_CHECK_OPTIMIZED, 200000);
	est = fbf_estimate_fpp(f, FBF_CHECK_OPTIMIZED);
	CHECK(got <= 1.3 * 0.01, "measured %g with %u parts", got, plan.nparts);
	CHECK(fabs(est - got) <= 0.25 * got, "estimate %g measured %g", est, got);

	for (part = 0; part < f->nparts; part++)
	{
		uint64_t	c = fbf_count_const(f, 1, part);

		lo = c < lo ? c : lo;
		hi = c > hi ? c : hi;
	}
	CHECK(lo > 0 && (double) hi / (double) lo < 1.5,
		  "partition counts from %llu to %llu", (unsigned long long) lo,
		  (unsigned long long) hi);
	free(f);
}

/* ---------------------------------------------------------------------- */

static Fbf *
random_fbf(uint64_t *s)
{
	uint32_t	nbits = 64 + (uint32_t) test_rand_below(s, 3000);
	int			nfilters = 3 + (int) test_rand_below(s, 10);
	Fbf		   *f = new_fbf_parts(nbits, 1 + (int) test_rand_below(s, 10), nfilters,
									  1 + (uint32_t) test_rand_below(s, 5));
	int			n = (int) test_rand_below(s, 500);
	int			i;

	f->period = (int64_t) test_rand_below(s, 1000000);
	for (i = 0; i < n; i++)
	{
		FbfHash		h = element(40, test_rand(s));

		fbf_add(f, &h, FBF_CHECK_PAIRED);
		if (test_rand_below(s, 50) == 0)
			fbf_refresh(f, (int64_t) test_rand(s) >> 2);
	}
	if (test_rand_below(s, 2))
		f = resized(f, f->nfilters + 2);
	if (test_rand_below(s, 2))
		fbf_refresh(f, 77);
	return f;
}

static void
test_codec_round_trip(void)
{
	uint64_t	s = seed ^ 3;
	int			round;

	for (round = 0; round < 300; round++)
	{
		Fbf		   *f = random_fbf(&s);
		size_t		len = fbf_serialized_size(f);
		unsigned char *buf = malloc(len);
		unsigned char *buf2 = malloc(len);
		char	   *text = malloc(2 * len + 3);
		unsigned char *back = malloc(len);
		size_t		size = 0,
					backlen = 0;
		const char *why = NULL;
		Fbf		   *g;
		int			i;

		fbf_serialize(f, buf);
		CHECK(fbf_validate(buf, len, &size, &why), "round %d: %s", round, why);
		CHECK(size == fbf_size(f->nbits, f->nfilters, f->nparts), "size");
		g = malloc(size);
		fbf_deserialize(buf, len, g);
		fbf_serialize(g, buf2);
		CHECK(memcmp(buf, buf2, len) == 0, "bytes differ after round trip");
		for (i = 0; i < 200; i++)
		{
			FbfHash		h = element(40, test_rand(&s));

			CHECK(fbf_membership(f, &h) == fbf_membership(g, &h), "answers differ");
		}
		CHECK(fbf_estimate_fpp(f, FBF_CHECK_PAIRED) ==
			  fbf_estimate_fpp(g, FBF_CHECK_PAIRED), "estimate differs");

		fbf_hex_encode(buf, len, text);
		CHECK(strlen(text) == 2 + 2 * len, "hex length");
		CHECK(fbf_hex_decode(text, strlen(text), back, &backlen, &why) &&
			  backlen == len && memcmp(back, buf, len) == 0, "hex round trip");

		free(buf);
		free(buf2);
		free(text);
		free(back);
		free(f);
		free(g);
	}
}

/* format version 1 is frozen: a value written today decodes forever */
static void
test_codec_layout(void)
{
	Fbf		   *f = new_fbf(64, 2, 3);
	unsigned char buf[40 + 3 * 16 + 3 * 8];
	FbfHash		h = fbf_hash_bytes("abc", 3);
	static const unsigned char header[40] = {
		'F', 'B', 'F', 0, 1, 2, 3, 0, 64, 0, 0, 0, 3, 0, 0, 0,
		1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0
	};

	CHECK(fbf_serialized_size(f) == sizeof(buf), "size %zu",
		  fbf_serialized_size(f));
	fbf_refresh(f, 0x0102030405060708);
	fbf_add(f, &h, FBF_CHECK_PAIRED);
	fbf_serialize(f, buf);
	CHECK(memcmp(buf, header, 40) == 0, "header bytes");
	/* future's meta: born_at little-endian, count 1 */
	CHECK(buf[40] == 0x08 && buf[47] == 0x01 && buf[48] == 1 && buf[49] == 0,
		  "meta bytes");
	/* abc's probes in 64 bits, k = 2: bits 5 and 39 per fbf_probes */
	{
		uint32_t	p[2];
		uint64_t	word = 0;
		int			i;

		fbf_probes(&h, 2, 64, p);
		for (i = 0; i < 8; i++)
			word |= (uint64_t) buf[88 + i] << (8 * i);
		CHECK(word == ((UINT64_C(1) << p[0]) | (UINT64_C(1) << p[1])),
			  "future word %016llx", (unsigned long long) word);
	}
	free(f);
}

typedef struct Corruption
{
	const char *name;
	size_t		offset;
	unsigned char value;
	const char *expect;			/* substring of the reason */
} Corruption;

static void
test_codec_rejects(void)
{
	Fbf		   *f = new_fbf(100, 3, 3);	/* 2 words per filter, 28 spare bits */
	size_t		len;
	unsigned char *buf;
	unsigned char *bad;
	size_t		size;
	const char *why;
	int			i;
	size_t		bits;
	static const Corruption cases[] = {
		{"magic", 0, 'G', "magic"},
		{"version", 4, 2, "version"},
		{"k = 0", 5, 0, "hash functions"},
		{"k = 33", 5, 33, "hash functions"},
		{"2 filters", 6, 2, "number of filters"},
		{"65 filters", 6, 65, "number of filters"},
		{"nbits 63", 8, 63, "bits per filter"},
		{"nbits huge", 11, 0x7f, "bits per filter"},
		{"nlive 1", 12, 1, "live filters"},
		{"nlive 4", 12, 4, "live filters"},
		{"flags", 14, 1, "Reserved"},
		{"0 partitions", 16, 0, "partitions"},
		{"2^20 + 1 partitions", 18, 0x10, "partitions"},
		{"reserved", 21, 1, "Reserved"},
		{"epoch", 24, 0, "epoch"},
		{"epoch sign", 31, 0x80, "epoch"},
		{"period sign", 39, 0x80, "period"},
		{"count high bit", 40 + 15, 0x80, "count"},
	};

	for (i = 0; i < 10; i++)
	{
		FbfHash		h = element(50, (uint64_t) i);

		fbf_add(f, &h, FBF_CHECK_PAIRED);
	}
	len = fbf_serialized_size(f);
	buf = malloc(len);
	bad = malloc(len + 1);
	fbf_serialize(f, buf);
	bits = 40 + 3 * 16;

	CHECK(fbf_validate(buf, len, &size, &why), "valid input refused");
	for (i = 0; i < (int) (sizeof(cases) / sizeof(cases[0])); i++)
	{
		memcpy(bad, buf, len);
		bad[cases[i].offset] = cases[i].value;
		why = "";
		CHECK(!fbf_validate(bad, len, &size, &why) &&
			  strstr(why, cases[i].expect) != NULL, "%s: got \"%s\"",
			  cases[i].name, why);
	}

	/* lengths */
	CHECK(!fbf_validate(buf, 0, &size, &why) && strstr(why, "shorter"), "empty");
	CHECK(!fbf_validate(buf, 39, &size, &why) && strstr(why, "shorter"), "39");
	CHECK(!fbf_validate(buf, len - 1, &size, &why) && strstr(why, "length"), "truncated");
	memcpy(bad, buf, len);
	bad[len] = 0;
	CHECK(!fbf_validate(bad, len + 1, &size, &why) && strstr(why, "length"), "trailing");

	/* count without bits, bits without count */
	memcpy(bad, buf, len);
	bad[40 + 16 + 8] = 0;		/* present's count: it has bits */
	CHECK(!fbf_validate(bad, len, &size, &why) && strstr(why, "count"), "count 0 with bits");

	/* a bit past nbits */
	memcpy(bad, buf, len);
	bad[bits + 15] |= 0x80;		/* bit 127 of future; nbits = 100 */
	bad[bits + 16 + 15] |= 0x80;	/* and of present, to keep the subset */
	CHECK(!fbf_validate(bad, len, &size, &why) && strstr(why, "past its last bit"),
		  "padding bit: %s", why);

	/* future not a subset of present */
	memcpy(bad, buf, len);
	for (i = 0; i < 16; i++)
		bad[bits + 16 + i] = 0; /* clear present's bits */
	bad[bits + 16] = 1;			/* keep present non-empty */
	CHECK(!fbf_validate(bad, len, &size, &why) && strstr(why, "future"), "subset");

	/* unborn filter with content */
	{
		Fbf		   *g = malloc(fbf_size(100, 4, 1));
		size_t		glen;
		unsigned char *gbuf;

		fbf_resize(g, f, 4);
		glen = fbf_serialized_size(g);
		gbuf = malloc(glen);
		fbf_serialize(g, gbuf);
		CHECK(fbf_validate(gbuf, glen, &size, &why), "grown refused: %s", why);
		gbuf[40 + 3 * 16] = 1;	/* born_at of the unborn filter */
		CHECK(!fbf_validate(gbuf, glen, &size, &why) && strstr(why, "past the live"),
			  "unborn born_at");
		free(gbuf);
		free(g);
	}

	/* hex */
	{
		unsigned char out[8];
		size_t		outlen;

		CHECK(!fbf_hex_decode("", 0, out, &outlen, &why), "empty text");
		CHECK(!fbf_hex_decode("x00", 3, out, &outlen, &why), "no backslash");
		CHECK(!fbf_hex_decode("\\x0", 3, out, &outlen, &why) && strstr(why, "pairs"), "odd");
		CHECK(!fbf_hex_decode("\\x0g", 4, out, &outlen, &why) && strstr(why, "digit"), "g");
		CHECK(!fbf_hex_decode("\\x 0", 4, out, &outlen, &why), "space");
		CHECK(fbf_hex_decode("\\xAbCd", 6, out, &outlen, &why) && outlen == 2 &&
			  out[0] == 0xab && out[1] == 0xcd, "mixed case");
	}
	free(buf);
	free(bad);
	free(f);
}

/* ----------------------------------------------------------------------
 * The bit-sliced layout against a straightforward reference
 * ----------------------------------------------------------------------
 */

/* filter counts at and around every change of stride and load width */
static const int width_counts[] = {3, 7, 8, 9, 16, 17, 25, 32, 33, 57, 58, 63, 64};
#define NWIDTH_COUNTS ((int) (sizeof(width_counts) / sizeof(width_counts[0])))

/*
 * Packed slice arrays against a model: one uint64 of lanes per position,
 * and the little-endian bit string they define.  Writes change only the
 * lanes written; nothing outside the array but its slack is touched, and
 * the slack only read.
 */
static void
test_packed_slices(void)
{
	uint64_t	s = seed ^ 10;
	int			lanes;

	for (lanes = 1; lanes <= 64; lanes++)
	{
		int			stride = bloom_packed_stride(lanes);
		uint32_t	m = 1 + (uint32_t) test_rand_below(&s, 300);
		size_t		bytes = (size_t) bloom_packed_bytes(m, stride);
		unsigned char *mem = malloc(bytes + BLOOM_PACKED_SLACK + 16);
		unsigned char *a = mem + 8;		/* 8 guard bytes each side */
		uint64_t   *model = calloc(m, 8);
		uint64_t	all = fbf_lane_mask(lanes);
		int			op;
		uint32_t	w;
		size_t		b;

		CHECK(stride == (lanes <= 57 ? lanes : 64), "stride of %d lanes", lanes);
		CHECK(bytes == ((size_t) m * stride + 7) / 8, "bytes");
		memset(mem, 0xa5, bytes + BLOOM_PACKED_SLACK + 16);
		memset(a, 0, bytes + BLOOM_PACKED_SLACK);

		for (op = 0; op < 400; op++)
		{
			uint64_t	r = test_rand(&s) & all;
			uint32_t	probes[FBF_MAX_HASHES];
			int			k = 1 + (int) test_rand_below(&s, 8);
			int			i;

			for (i = 0; i < k; i++)
				probes[i] = (uint32_t) test_rand_below(&s, m);
			switch (test_rand_below(&s, 5))
			{
				case 0:
					w = probes[0];
					bloom_packed_or(a, stride, w, r);
					model[w] |= r;
					break;
				case 1:
					{
						uint64_t	set = test_rand(&s) & all;

						w = probes[0];
						bloom_packed_update(a, stride, w, r, set);
						model[w] = (model[w] & ~r) | set;
					}
					break;
				case 2:
					bloom_packed_set(a, stride, probes, k, r);
					for (i = 0; i < k; i++)
						model[probes[i]] |= r;
					break;
				case 3:
					if (test_rand_below(&s, 8) == 0)
					{
						r &= test_rand(&s) & test_rand(&s);
						bloom_packed_clear(a, stride, m, r);
						for (w = 0; w < m; w++)
							model[w] &= ~r;
					}
					break;
				case 4:
					{
						uint64_t	want = all;

						for (i = 0; i < k; i++)
							want &= model[probes[i]];
						CHECK(bloom_packed_test(a, stride, probes, k) == want,
							  "%d lanes: test", lanes);
					}
					break;
			}
		}
		for (w = 0; w < m; w++)
		{
			uint64_t	bits = 0;
			int			j;

			CHECK(bloom_packed_get(a, stride, w) == model[w], "%d lanes: get %u",
				  lanes, w);
			for (j = 0; j < stride; j++)
			{
				uint64_t	bit = (uint64_t) w * stride + (uint64_t) j;

				bits |= (uint64_t) ((a[bit / 8] >> (bit % 8)) & 1) << j;
			}
			CHECK(bits == model[w], "%d lanes: bit string at %u", lanes, w);
		}
		for (b = 0; b < 8; b++)
			CHECK(mem[b] == 0xa5 && a[bytes + BLOOM_PACKED_SLACK + b] == 0xa5,
				  "%d lanes: guard bytes", lanes);
		for (b = bytes; b < bytes + BLOOM_PACKED_SLACK; b++)
			CHECK(a[b] == 0, "%d lanes: slack written", lanes);
		if (((uint64_t) m * stride) % 8 != 0)
			CHECK((a[bytes - 1] >> (((uint64_t) m * stride) % 8)) == 0,
				  "%d lanes: bits past the last position", lanes);
		{
			int			j = (int) test_rand_below(&s, (uint64_t) lanes);
			uint32_t	n = 0;

			for (w = 0; w < m; w++)
				n += (uint32_t) ((model[w] >> j) & 1);
			CHECK(bloom_packed_popcount(a, stride, m, j) == n, "popcount");
		}
		free(model);
		free(mem);
	}
}

/* one plain bit array per filter, in logical order, nothing clever */
typedef struct RefFbf
{
	uint32_t	nbits;
	int			nhashes;
	int			nfilters;
	int			nlive;
	uint32_t	nparts;
	int64_t		epoch;
	int64_t		period;
	int64_t		born_at[FBF_MAX_FILTERS];
	uint64_t   *counts;			/* [FBF_MAX_FILTERS][nparts] */
	uint64_t   *bits;			/* [FBF_MAX_FILTERS][nparts][nwords] */
} RefFbf;

static uint32_t
ref_nwords(const RefFbf *r)
{
	return (r->nbits + 63) / 64;
}

static uint64_t *
ref_block(RefFbf *r, int i, uint32_t p)
{
	return r->bits + ((size_t) i * r->nparts + p) * ref_nwords(r);
}

static uint64_t *
ref_count(RefFbf *r, int i, uint32_t p)
{
	return &r->counts[(size_t) i * r->nparts + p];
}

static void
ref_init(RefFbf *r, uint32_t nbits, int nhashes, int nfilters, uint32_t nparts,
		 int64_t period, int64_t now)
{
	int			i;

	r->nbits = nbits;
	r->nhashes = nhashes;
	r->nfilters = nfilters;
	r->nlive = nfilters;
	r->nparts = nparts;
	r->epoch = nfilters - 1;
	r->period = period;
	r->counts = calloc((size_t) FBF_MAX_FILTERS * nparts, 8);
	r->bits = calloc((size_t) FBF_MAX_FILTERS * nparts * ref_nwords(r), 8);
	for (i = 0; i < FBF_MAX_FILTERS; i++)
		r->born_at[i] = i == 0 ? now : i < nfilters ? FBF_BORN_LONG_AGO : 0;
}

static void
ref_free(RefFbf *r)
{
	free(r->counts);
	free(r->bits);
}

static void
ref_probes(const RefFbf *r, const FbfHash *h, uint32_t *probes, uint32_t *part)
{
	uint64_t	g = h->h1;
	int			i;

	for (i = 0; i < r->nhashes; i++, g += h->h2)
		probes[i] = (uint32_t) (((unsigned __int128) g * r->nbits) >> 64);
	*part = (uint32_t) (((h->h1 & 0xffffffff) * r->nparts) >> 32);
}

static uint64_t
ref_membership(RefFbf *r, const FbfHash *h)
{
	uint32_t	probes[FBF_MAX_HASHES];
	uint32_t	part;
	uint64_t	mask = 0;
	int			i,
				j;

	ref_probes(r, h, probes, &part);
	for (i = 0; i < r->nlive; i++)
	{
		const uint64_t *b = ref_block(r, i, part);
		int			all = 1;

		for (j = 0; j < r->nhashes; j++)
			all &= (int) ((b[probes[j] / 64] >> (probes[j] % 64)) & 1);
		if (all)
			mask |= UINT64_C(1) << i;
	}
	return mask;
}

/* the check variants, spelled out filter by filter */
static bool
ref_check(uint64_t mask, int nlive, FbfCheck check)
{
	int			i;

#define IN(i) (((mask) >> (i)) & 1)
	if (check == FBF_CHECK_SIMPLE)
	{
		for (i = 0; i < nlive; i++)
			if (IN(i))
				return true;
		return false;
	}
	if (check == FBF_CHECK_OPTIMIZED && IN(0))
		return true;
	for (i = check == FBF_CHECK_OPTIMIZED ? 1 : 0; i + 1 < nlive; i++)
		if (IN(i) && IN(i + 1))
			return true;
	return IN(nlive - 1);
#undef IN
}

static void
ref_insert(RefFbf *r, const FbfHash *h)
{
	uint32_t	probes[FBF_MAX_HASHES];
	uint32_t	part;
	int			i,
				j;

	ref_probes(r, h, probes, &part);
	for (i = 0; i < 2; i++)
	{
		uint64_t   *b = ref_block(r, i, part);

		for (j = 0; j < r->nhashes; j++)
			b[probes[j] / 64] |= UINT64_C(1) << (probes[j] % 64);
		(*ref_count(r, i, part))++;
	}
}

static bool
ref_add(RefFbf *r, const FbfHash *h, FbfCheck check)
{
	if (ref_check(ref_membership(r, h), r->nlive, check))
		return false;
	ref_insert(r, h);
	return true;
}

static void
ref_clear(RefFbf *r, int i)
{
	memset(ref_block(r, i, 0), 0, (size_t) r->nparts * ref_nwords(r) * 8);
	memset(ref_count(r, i, 0), 0, (size_t) r->nparts * 8);
	r->born_at[i] = 0;
}

/* every filter one step older; the oldest falls off; an empty future */
static void
ref_refresh(RefFbf *r, int64_t now)
{
	size_t		bits = (size_t) r->nparts * ref_nwords(r);
	int			i;

	for (i = r->nfilters - 1; i > 0; i--)
	{
		memcpy(ref_block(r, i, 0), ref_block(r, i - 1, 0), bits * 8);
		memcpy(ref_count(r, i, 0), ref_count(r, i - 1, 0), (size_t) r->nparts * 8);
		r->born_at[i] = r->born_at[i - 1];
	}
	ref_clear(r, 0);
	r->born_at[0] = now;
	if (r->nlive < r->nfilters)
		r->nlive++;
	r->epoch++;
}

static bool
ref_refresh_within(RefFbf *r, int64_t now, int64_t retention)
{
	if (now - r->born_at[r->nlive - 2] > retention)
	{
		if (r->nlive < r->nfilters)
		{
			ref_clear(r, r->nlive - 1);
			r->nlive--;
		}
		ref_refresh(r, now);
		return true;
	}
	if (r->nlive < r->nfilters)
	{
		ref_refresh(r, now);
		return true;
	}
	return false;
}

static void
ref_resize(RefFbf *r, int nfilters)
{
	int			i;

	if (r->nlive > nfilters)
		r->nlive = nfilters;
	for (i = r->nlive; i < FBF_MAX_FILTERS; i++)
		ref_clear(r, i);
	r->nfilters = nfilters;
}

static void
ref_union(RefFbf *dst, RefFbf *src)
{
	int64_t		lag = dst->epoch - src->epoch;
	int64_t		reach = lag + src->nlive;
	int			nlive = reach < dst->nlive ? (int) reach : dst->nlive;
	int			first = lag < nlive ? (int) lag : nlive;
	uint32_t	nwords = ref_nwords(dst);
	int			i;
	uint32_t	p,
				w;

	for (i = first; i < nlive; i++)
	{
		for (p = 0; p < dst->nparts; p++)
		{
			uint64_t   *d = ref_block(dst, i, p);
			const uint64_t *sw = ref_block(src, i - first, p);
			uint64_t	a = *ref_count(dst, i, p);
			uint64_t	b = *ref_count(src, i - first, p);
			uint64_t	nset = 0;
			double		est;

			for (w = 0; w < nwords; w++)
			{
				d[w] |= sw[w];
				nset += (uint64_t) __builtin_popcountll(d[w]);
			}
			if (a != 0 && b != 0)
			{
				est = bloom_cardinality(dst->nbits, dst->nhashes, nset);
				if (!(est < (double) (a + b)))
					a = a + b;
				else if (est < (double) (a > b ? a : b))
					a = a > b ? a : b;
				else
					a = (uint64_t) llround(est);
			}
			else
				a = a + b;
			*ref_count(dst, i, p) = a;
		}
		if (src->born_at[i - first] > dst->born_at[i])
			dst->born_at[i] = src->born_at[i - first];
	}
	for (i = nlive; i < dst->nlive; i++)
		ref_clear(dst, i);
	dst->nlive = nlive;
}

/* format version 1, written from the reference's plain arrays */
static unsigned char *
ref_serialize(RefFbf *r, size_t *len)
{
	uint32_t	nwords = ref_nwords(r);
	unsigned char *out;
	unsigned char *p;
	int			i,
				b;
	uint32_t	part,
				w;

	*len = 40 + (size_t) r->nfilters * (8 + (size_t) r->nparts * (8 + (size_t) nwords * 8));
	out = calloc(1, *len);
	memcpy(out, "FBF", 4);
	out[4] = 1;
	out[5] = (unsigned char) r->nhashes;
	out[6] = (unsigned char) r->nfilters;
	for (b = 0; b < 4; b++)
	{
		out[8 + b] = (unsigned char) (r->nbits >> (8 * b));
		out[16 + b] = (unsigned char) (r->nparts >> (8 * b));
	}
	out[12] = (unsigned char) r->nlive;
	for (b = 0; b < 8; b++)
	{
		out[24 + b] = (unsigned char) ((uint64_t) r->epoch >> (8 * b));
		out[32 + b] = (unsigned char) ((uint64_t) r->period >> (8 * b));
	}
	p = out + 40;
	for (i = 0; i < r->nfilters; i++)
	{
		for (b = 0; b < 8; b++)
			p[b] = (unsigned char) ((uint64_t) r->born_at[i] >> (8 * b));
		p += 8;
		for (part = 0; part < r->nparts; part++, p += 8)
			for (b = 0; b < 8; b++)
				p[b] = (unsigned char) (*ref_count(r, i, part) >> (8 * b));
	}
	for (i = 0; i < r->nfilters; i++)
		for (part = 0; part < r->nparts; part++)
			for (w = 0; w < nwords; w++, p += 8)
				for (b = 0; b < 8; b++)
					p[b] = (unsigned char) (ref_block(r, i, part)[w] >> (8 * b));
	return out;
}

/* the whole state of f equals the reference's; false (and a CHECK) if not */
static bool
same_as_ref(const Fbf *f, RefFbf *r, const char *where)
{
	uint32_t	nwords = ref_nwords(r);
	uint64_t   *plain = malloc((size_t) nwords * 8);
	const char *why = "";
	bool		same = true;
	bool		ok;
	size_t		len,
				rlen;
	unsigned char *buf,
			   *rbuf;
	int			i;
	uint32_t	p;

	ok = f->nbits == r->nbits && f->nhashes == r->nhashes &&
		f->nfilters == r->nfilters && f->nlive == r->nlive &&
		f->nparts == r->nparts && f->epoch == r->epoch &&
		f->period == r->period;
	CHECK(ok, "%s: shape or bookkeeping", where);
	same &= ok;
	ok = fbf_check_invariants(f, &why);
	CHECK(ok, "%s: %s", where, why);
	same &= ok;
	for (i = 0; same && i < f->nfilters; i++)
	{
		ok = f->born_at[fbf_slot(f, i)] == r->born_at[i];
		CHECK(ok, "%s: born_at of %d", where, i);
		same &= ok;
		for (p = 0; same && p < f->nparts; p++)
		{
			fbf_extract_bits(f, i, p, plain);
			ok = fbf_count_const(f, i, p) == *ref_count(r, i, p);
			CHECK(ok, "%s: count of %d/%u: %llu, reference %llu", where, i, p,
				  (unsigned long long) fbf_count_const(f, i, p),
				  (unsigned long long) *ref_count(r, i, p));
			same &= ok;
			ok = memcmp(plain, ref_block(r, i, p), (size_t) nwords * 8) == 0;
			CHECK(ok, "%s: bits of filter %d partition %u (of %d, head %d)",
				  where, i, p, f->nfilters, f->head);
			same &= ok;
		}
	}
	len = fbf_serialized_size(f);
	buf = malloc(len);
	fbf_serialize(f, buf);
	rbuf = ref_serialize(r, &rlen);
	ok = len == rlen && memcmp(buf, rbuf, len) == 0;
	CHECK(ok, "%s: serialized bytes differ from the reference's", where);
	same &= ok;
	free(buf);
	free(rbuf);
	free(plain);
	return same;
}

static Fbf *
copy_fbf(const Fbf *f)
{
	size_t		size = fbf_size(f->nbits, f->nfilters, f->nparts);
	Fbf		   *g = malloc(size);

	memcpy(g, f, size);
	return g;
}

/* through the codec and back: head becomes 0 */
static Fbf *
round_trip(Fbf *f)
{
	size_t		len = fbf_serialized_size(f);
	unsigned char *buf = malloc(len);
	size_t		size = 0;
	const char *why = "";
	Fbf		   *g;

	fbf_serialize(f, buf);
	CHECK(fbf_validate(buf, len, &size, &why), "round trip: %s", why);
	g = malloc(size);
	fbf_deserialize(buf, len, g);
	free(buf);
	free(f);
	return g;
}

/*
 * Random inserts, adds, refreshes (plain and timed), resizes across every
 * stride and unions against the per-filter reference above: after every
 * step the whole state (bits of every filter, counts, birth times,
 * serialized bytes) is the reference's, every membership mask and every
 * check's answer for members and non-members is the reference's, and no
 * element whose filter is live is missing.
 */
static void
test_differential(void)
{
	uint64_t	s = seed ^ 11;
	int			round;

	for (round = 0; round < 3 * NWIDTH_COUNTS; round++)
	{
		int			nfilters = width_counts[round % NWIDTH_COUNTS];
		uint32_t	nbits = 64 + (uint32_t) test_rand_below(&s, round % 2 ? 300 : 1500);
		int			nhashes = 1 + (int) test_rand_below(&s, 6);
		uint32_t	nparts = 1 + (uint32_t) test_rand_below(&s, 3);
		int64_t		period = (int64_t) test_rand_below(&s, 5);
		int64_t		now = 100;
		Fbf		   *f = new_fbf_parts(nbits, nhashes, nfilters, nparts);
		RefFbf		r;
		Tracked    *tracked = malloc(sizeof(Tracked) * 3000);
		int			ntracked = 0;
		uint64_t	next = 0;
		int			step;
		char		where[64];

		fbf_init(f, nbits, nhashes, nfilters, nparts, period, now);
		ref_init(&r, nbits, nhashes, nfilters, nparts, period, now);

		for (step = 0; step < 400; step++)
		{
			uint64_t	op = test_rand_below(&s, 100);
			int			t;

			now += (int64_t) test_rand_below(&s, 3);
			snprintf(where, sizeof(where), "round %d step %d (%d filters)",
					 round, step, f->nfilters);
			if (op < 55)
			{
				FbfHash		h = element(200 + round, next++);
				FbfCheck	check = (FbfCheck) test_rand_below(&s, 3);
				bool		added = fbf_add(f, &h, check);

				CHECK(added == ref_add(&r, &h, check), "%s: add", where);
				if (added && ntracked < 3000)
				{
					tracked[ntracked].hash = h;
					tracked[ntracked].epoch = f->epoch;
					ntracked++;
				}
			}
			else if (op < 60)
			{
				FbfHash		h = element(200 + round, next++);

				fbf_insert(f, &h);
				ref_insert(&r, &h);
			}
			else if (op < 72)
			{
				fbf_refresh(f, now);
				ref_refresh(&r, now);
			}
			else if (op < 80)
			{
				int64_t		retention = (int64_t) test_rand_below(&s, 20);

				CHECK(fbf_refresh_within(f, now, retention) ==
					  ref_refresh_within(&r, now, retention), "%s: timed refresh", where);
			}
			else if (op < 90)
			{
				/* anywhere from 3 to 64 filters, crossing strides */
				int			to = test_rand_below(&s, 2) ?
					width_counts[test_rand_below(&s, NWIDTH_COUNTS)] :
					f->nfilters + (int) test_rand_below(&s, 5) - 2;

				if (to < FBF_MIN_FILTERS)
					to = FBF_MIN_FILTERS;
				if (to > FBF_MAX_FILTERS)
					to = FBF_MAX_FILTERS;
				f = resized(f, to);
				ref_resize(&r, to);
			}
			else if (op < 95)
			{
				/* a second FBF of the same shape, at most as far along */
				Fbf		   *g = new_fbf_parts(nbits, nhashes, f->nfilters, nparts);
				RefFbf		rg;
				int64_t		lead = f->epoch - g->epoch;
				int			refreshes = lead > 0 ? (int) test_rand_below(&s, (uint64_t) lead + 1) : 0;
				int			i;

				fbf_init(g, nbits, nhashes, f->nfilters, nparts, period, now - 5);
				ref_init(&rg, nbits, nhashes, f->nfilters, nparts, period, now - 5);
				for (i = 0; i < refreshes + 40; i++)
				{
					if (i % 8 == 7 && refreshes > 0)
					{
						fbf_refresh(g, now - 5 + i);
						ref_refresh(&rg, now - 5 + i);
						refreshes--;
					}
					else
					{
						FbfHash		h = element(900 + round, next++);

						fbf_add(g, &h, FBF_CHECK_DEFAULT);
						ref_add(&rg, &h, FBF_CHECK_DEFAULT);
					}
				}
				while (refreshes-- > 0)
				{
					fbf_refresh(g, now);
					ref_refresh(&rg, now);
				}
				if (g->epoch <= f->epoch)
				{
					fbf_union_into(f, g);
					ref_union(&r, &rg);
					ref_free(&rg);
					free(g);
				}
				else
				{
					/* g is further along (f grew): the newer one is dst */
					fbf_union_into(g, f);
					ref_union(&rg, &r);
					ref_free(&r);
					free(f);
					f = g;
					r = rg;
				}
			}
			else if (op < 98)
				f = round_trip(f);
			else
			{
				Fbf		   *g = copy_fbf(f);

				free(f);
				f = g;
			}

			if (!same_as_ref(f, &r, where))
				break;

			/* members: found while their filter is live, as the reference */
			for (t = 0; t < ntracked; t++)
			{
				uint64_t	mask = fbf_membership(f, &tracked[t].hash);
				int64_t		index = f->epoch - tracked[t].epoch;
				int			c;

				CHECK(mask == ref_membership(&r, &tracked[t].hash),
					  "%s: mask of member %d", where, t);
				for (c = 0; c < 3; c++)
				{
					bool		got = fbf_contains(f, &tracked[t].hash, (FbfCheck) c);

					CHECK(got == ref_check(mask, r.nlive, (FbfCheck) c),
						  "%s: check %d of member %d", where, c, t);
					CHECK(got || index >= f->nlive,
						  "%s: member %d (index %lld) missing", where, t,
						  (long long) index);
				}
			}
			/* non-members */
			for (t = 0; t < 30; t++)
			{
				FbfHash		h = element(UINT64_C(0xfeed), test_rand(&s));
				uint64_t	mask = fbf_membership(f, &h);
				int			c;

				CHECK(mask == ref_membership(&r, &h), "%s: mask of a non-member", where);
				for (c = 0; c < 3; c++)
					CHECK(fbf_contains(f, &h, (FbfCheck) c) ==
						  ref_check(mask, r.nlive, (FbfCheck) c),
						  "%s: check %d of a non-member", where, c);
			}
		}
		ref_free(&r);
		free(tracked);
		free(f);
	}
}

/*
 * Serialization across strides: byte-identical round trips whatever the
 * ring's head, the same answers, and load/extract of plain arrays and of
 * aligned slice lanes.
 */
static void
test_codec_widths(void)
{
	uint64_t	s = seed ^ 12;
	int			c;

	for (c = 0; c < NWIDTH_COUNTS; c++)
	{
		int			n = width_counts[c];
		uint32_t	nbits = 64 + (uint32_t) test_rand_below(&s, 2000);
		uint32_t	nparts = 1 + (uint32_t) test_rand_below(&s, 3);
		Fbf		   *f = new_fbf_parts(nbits, 1 + (int) test_rand_below(&s, 8), n, nparts);
		int			i;
		size_t		len,
					size = 0;
		unsigned char *buf,
				   *buf2;
		const char *why = "";
		Fbf		   *g;
		uint64_t   *plain = calloc(fbf_nwords(nbits), 8);
		uint64_t   *back = calloc(fbf_nwords(nbits), 8);

		/* refreshes move the head around the ring */
		for (i = 0; i < 40 * n; i++)
		{
			FbfHash		h = element(300 + c, (uint64_t) i);

			fbf_add(f, &h, FBF_CHECK_PAIRED);
			if (test_rand_below(&s, 20) == 0)
				fbf_refresh(f, i);
		}
		CHECK(f->stride == (uint32_t) (n <= 57 ? n : 64), "%d filters: stride %u",
			  n, f->stride);
		len = fbf_serialized_size(f);
		buf = malloc(len);
		buf2 = malloc(len);
		fbf_serialize(f, buf);
		CHECK(fbf_validate(buf, len, &size, &why), "%d filters: %s", n, why);
		CHECK(size == fbf_size(nbits, n, nparts), "size");
		g = malloc(size);
		fbf_deserialize(buf, len, g);
		CHECK(fbf_check_invariants(g, &why), "%d filters: %s", n, why);
		fbf_serialize(g, buf2);
		CHECK(memcmp(buf, buf2, len) == 0, "%d filters (head %d): bytes differ",
			  n, f->head);
		for (i = 0; i < 500; i++)
		{
			FbfHash		h = element(test_rand_below(&s, 2) ? 300 + c : 999, (uint64_t) i);

			CHECK(fbf_membership(f, &h) == fbf_membership(g, &h), "%d filters: answers", n);
		}

		/* every block at once, out of f and into a ring turned otherwise */
		{
			size_t		block_bytes = (size_t) fbf_nwords(nbits) * 8;
			unsigned char *all = malloc((size_t) n * block_bytes);
			unsigned char *blocks[FBF_MAX_FILTERS];
			Fbf		   *h = new_fbf_parts(nbits, f->nhashes, n, nparts);
			uint32_t	part = nparts - 1;
			int			turns = 1 + (int) test_rand_below(&s, (uint64_t) n - 1);

			for (i = 0; i < n; i++)
				blocks[i] = all + (size_t) i * block_bytes;
			fbf_store_blocks(f, part, blocks);
			for (i = 0; i < n; i++)
			{
				fbf_extract_bits(f, i, part, plain);
				CHECK(memcmp(plain, blocks[i], block_bytes) == 0,
					  "%d filters: store_blocks of %d", n, i);
			}
			while (turns-- > 0)
				fbf_refresh(h, 0);
			CHECK(h->head != 0, "setup: h's head");
			fbf_load_blocks(h, part, (const unsigned char *const *) blocks);
			for (i = 0; i < n; i++)
			{
				fbf_extract_bits(h, i, part, plain);
				CHECK(memcmp(plain, blocks[i], block_bytes) == 0,
					  "%d filters: load_blocks of %d with head %d", n, i, h->head);
			}
			free(all);
			free(h);
		}

		/* plain arrays in and out, into a filter that is not at slot 0 */
		for (i = 0; i < (int) fbf_nwords(nbits); i++)
			plain[i] = test_rand(&s) & test_rand(&s);
		if (nbits % 64)
			plain[fbf_nwords(nbits) - 1] &= (UINT64_C(1) << (nbits % 64)) - 1;
		fbf_refresh(f, 1);
		fbf_refresh(f, 2);		/* future and present empty */
		fbf_load_bits(f, 1, nparts - 1, plain);
		fbf_extract_bits(f, 1, nparts - 1, back);
		CHECK(memcmp(plain, back, fbf_nwords(nbits) * 8) == 0, "%d filters: load_bits", n);
		fbf_extract_bits(f, 0, nparts - 1, back);
		CHECK(back[0] == 0, "%d filters: load_bits touched another filter", n);

		/* lane `lane` of an aligned slice array into the future */
		{
			int			lanes = 1 + (int) test_rand_below(&s, 64);
			int			width = bloom_slice_width(lanes);
			int			lane = (int) test_rand_below(&s, (uint64_t) lanes);
			unsigned char *slice = calloc(nbits, (size_t) width);
			uint32_t	w;

			for (w = 0; w < nbits; w++)
				bloom_slice_or(slice, width, w, test_rand(&s) & fbf_lane_mask(lanes));
			fbf_load_lane(f, 0, 0, slice, width, lane);
			fbf_extract_bits(f, 0, 0, back);
			for (w = 0; w < nbits; w++)
				CHECK(((back[w / 64] >> (w % 64)) & 1) ==
					  ((bloom_slice_get(slice, width, w) >> lane) & 1),
					  "%d filters: load_lane width %d lane %d, bit %u", n, width, lane, w);
			free(slice);
		}

		free(plain);
		free(back);
		free(buf);
		free(buf2);
		free(f);
		free(g);
	}
}

/*
 * Datums stored by fbf 1.0 and 1.1 hold the flat form: told apart by the
 * first field, validated in full, converted to the same filter whatever
 * their ring's head; malformed ones refused with a reason.
 */
static void
test_legacy_layout(void)
{
	uint64_t	s = seed ^ 13;
	int			c;

	CHECK(fbf_flat_size(6250, 3, 1) == 32 + 3 * 8 + 3 * (8 + 98 * 8),
		  "flat size of 1.0");
	for (c = 0; c < NWIDTH_COUNTS; c++)
	{
		int			n = width_counts[c];
		Fbf		   *f = random_fbf(&s);
		size_t		len,
					size = 0,
					slen;
		unsigned char *flat,
				   *bad,
				   *a,
				   *b;
		const char *why = "";
		Fbf		   *g;
		int			head = (int) test_rand_below(&s, (uint64_t) n);

		f = resized(f, n);
		fbf_refresh(f, 5);
		{
			/* something in the future's first block */
			uint64_t	e = 0;

			while (fbf_count_const(f, 0, 0) == 0)
			{
				FbfHash		h = element(400 + c, e++);

				fbf_insert(f, &h);
			}
		}
		flat = legacy_from_fbf(f, head, &len);
		CHECK(fbf_layout_is_current(f) && !fbf_layout_is_current(flat),
			  "layout tag");
		CHECK(len + 8 == fbf_serialized_size(f), "flat size is the serialized less 8");
		CHECK(fbf_legacy_validate(flat, len, &size, &why), "%d filters head %d: %s",
			  n, head, why);
		CHECK(size == fbf_size(f->nbits, n, f->nparts), "converted size");
		g = malloc(size);
		fbf_from_legacy(flat, g);
		CHECK(fbf_check_invariants(g, &why), "converted: %s", why);
		slen = fbf_serialized_size(f);
		a = malloc(slen);
		b = malloc(slen);
		fbf_serialize(f, a);
		fbf_serialize(g, b);
		CHECK(memcmp(a, b, slen) == 0, "%d filters head %d: converted value differs",
			  n, head);

		bad = malloc(len);
		memcpy(bad, flat, len);
		CHECK(!fbf_legacy_validate(bad, len - 1, &size, &why) && strstr(why, "length"),
			  "truncated");
		CHECK(!fbf_legacy_validate(bad, 31, &size, &why) && strstr(why, "shorter"),
			  "short");
		bad[10] = (unsigned char) n;	/* head = nfilters */
		bad[11] = 0;
		CHECK(!fbf_legacy_validate(bad, len, &size, &why) && strstr(why, "ring"),
			  "head out of range: %s", why);
		/* a bit in the future filter that the present lacks */
		{
			uint32_t	nwords = fbf_nwords(f->nbits);
			size_t		words = 32 + (size_t) n * 8 + (size_t) n * f->nparts * 8;
			size_t		future = words + (size_t) head * f->nparts * nwords * 8;
			size_t		present = words + (size_t) ((head + 1) % n) * f->nparts * nwords * 8;
			uint32_t	bit;

			for (bit = 0; bit < f->nbits; bit++)
				if (((flat[present + bit / 8] >> (bit % 8)) & 1) == 0)
					break;
			memcpy(bad, flat, len);
			if (bit < f->nbits)
			{
				bad[future + bit / 8] |= (unsigned char) (1 << (bit % 8));
				CHECK(!fbf_legacy_validate(bad, len, &size, &why) && strstr(why, "future"),
					  "future not within present: %s", why);
			}
			memcpy(bad, flat, len);
			if (f->nbits % 64 != 0)
			{
				bad[present + (nwords - 1) * 8 + 7] |= 0x80;
				bad[future + (nwords - 1) * 8 + 7] |= 0x80;
				CHECK(!fbf_legacy_validate(bad, len, &size, &why) && strstr(why, "past its last"),
					  "bits past nbits: %s", why);
			}
		}
		memcpy(bad, flat, len);
		bad[4] = 0;				/* k = 0 */
		CHECK(!fbf_legacy_validate(bad, len, &size, &why) && strstr(why, "hash"),
			  "k = 0");
		free(bad);
		free(a);
		free(b);
		free(flat);
		free(f);
		free(g);
	}
}

/*
 * Shapes and memory: the limit is the flat form's, so every shape 1.0
 * accepted still is; the bit-sliced form is never larger but for rounding
 * (and 58 to 63 filters in 64 lanes).
 */
static void
test_sizes(void)
{
	uint64_t	s = seed ^ 14;
	const char *why;
	int			i;

	for (i = 0; i < 2000; i++)
	{
		int			n = 3 + (int) test_rand_below(&s, 62);
		uint32_t	nbits = 64 + (uint32_t) test_rand_below(&s, (uint64_t) 1 << (8 + test_rand_below(&s, 22)));
		uint32_t	nparts = 1 + (uint32_t) test_rand_below(&s, 1 + test_rand_below(&s, 64));
		size_t		flat = fbf_flat_size(nbits, n, nparts);
		size_t		size = fbf_size(nbits, n, nparts);
		size_t		bound = flat + 8 + nparts + 16;

		if (n >= 58)
			bound = flat / 58 * 64 + 64 + nparts + 16;
		CHECK(size <= bound, "%d filters of %u bits x %u: %zu bytes, flat %zu",
			  n, nbits, nparts, size, flat);
		CHECK(size % 8 == 0, "size a multiple of 8");
		CHECK(fbf_shape_valid(nbits, 1, n, nparts, &why) == (flat <= FBF_MAX_BYTES),
			  "validity follows the flat size");
	}
	/* the largest 3-filter FBF 1.0 allowed is still valid, and under 1 GB */
	{
		uint32_t	nbits = (uint32_t) ((FBF_MAX_BYTES - 32 - 3 * 16) / 3 * 8 / 64 * 64);

		CHECK(fbf_shape_valid(nbits, 3, 3, 1, &why), "%s", why);
		CHECK(fbf_size(nbits, 3, 1) <= FBF_MAX_BYTES + 64, "3 filters in memory");
	}
}

int
main(int argc, char **argv)
{
	if (argc > 1)
		seed = strtoull(argv[1], NULL, 10);
	printf("# seed %llu\n", (unsigned long long) seed);

	run_test("hash values are frozen", test_hash_golden);
	run_test("the keyed hash is SipHash-2-4-128", test_keyed_hash_vectors);
	run_test("portable multiply-high matches", test_reduce_portable);
	run_test("no false negative under random inserts, refreshes, resizes",
			 test_no_false_negative_random_ops);
	run_test("retention holds under the AIMD controller",
			 test_retention_under_aimd);
	run_test("retention holds under the AIMD controller up to 64 filters (all strides)",
			 test_retention_all_strides);
	run_test("estimate matches measured FPP (m=6250, k=5, 100..1000 elements)",
			 test_estimate_matches_measured);
	run_test("estimate matches measured FPP against m (300 elements)",
			 test_estimate_against_m);
	run_test("union keeps both operands' elements", test_union);
	run_test("union with itself keeps counts", test_union_idempotent);
	run_test("AIMD decisions", test_aimd_decisions);
	run_test("the rate since a filter's birth", test_rate_since_birth);
	run_test("plan meets its target", test_plan);
	run_test("partitions: blocked plan meets its target, estimate matches",
			 test_partitions);
	run_test("codec round trip", test_codec_round_trip);
	run_test("codec layout is frozen", test_codec_layout);
	run_test("codec rejects malformed input", test_codec_rejects);
	run_test("packed slice arrays match a model, strides 1 to 64",
			 test_packed_slices);
	run_test("bit-sliced FBF equals a per-filter reference (3 to 64 filters)",
			 test_differential);
	run_test("codec round trip and plain/lane loads across strides",
			 test_codec_widths);
	run_test("values of fbf 1.0/1.1 (flat layout) convert and validate",
			 test_legacy_layout);
	run_test("sizes: flat-form limit, sliced memory within rounding", test_sizes);
	run_test("little-endian helpers match a model", test_le_helpers);
	run_test("cuckoo bucket arithmetic equals both former forms, an involution",
			 test_cuckoo_hash_merged);
	return tap_done();
}
