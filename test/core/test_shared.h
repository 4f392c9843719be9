/*-------------------------------------------------------------------------
 *
 * test_shared.h
 *	  Property tests of the core's shared tiny helpers, each against a
 *	  reference model written here: the little-endian reads and writes of
 *	  fbf_le.h, and the bucket arithmetic of cuckoo_hash.h against both
 *	  forms it replaced (cuckoo_table.c's and cwin_block.c's).  Included by
 *	  test_core.c (one translation unit: tap.h's counters are static).
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_TEST_SHARED_H
#define FBF_TEST_SHARED_H

#include <stdint.h>
#include <string.h>

#include "cuckoo_hash.h"
#include "fbf_le.h"
#include "tap.h"

/* ---- reference models ---- */

/* the n-byte little-endian integer at p, by definition */
static uint64_t
ref_le_read(const unsigned char *p, unsigned n)
{
	uint64_t	v = 0;

	for (unsigned i = 0; i < n; i++)
		v += (uint64_t) p[i] * (UINT64_C(1) << (8 * i));
	return v;
}

/* the codecs' former 64-bit read: most significant byte first, from p[7] */
static uint64_t
ref_le64_read_downward(const unsigned char *p)
{
	uint64_t	v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* cuckoo_table.c and cwin_block.c before cuckoo_hash.h (each had a copy) */
static uint32_t
ref_mix32(uint32_t x)
{
	x ^= x >> 16;
	x *= UINT32_C(0x7feb352d);
	x ^= x >> 15;
	x *= UINT32_C(0x846ca68b);
	x ^= x >> 16;
	return x;
}

static uint32_t
ref_reduce32(uint32_t x, uint32_t n)
{
	return (uint32_t) (((uint64_t) x * n) >> 32);
}

/* cuckoo_table.c's cuckoo_alt_bucket: reduced by `%` */
static uint32_t
ref_alt_table(uint32_t bucket, uint32_t fp, uint32_t n)
{
	uint32_t	m = ref_reduce32(ref_mix32(fp * UINT32_C(0x9e3779b1) + UINT32_C(0x7f4a7c15)), n);

	return (m + n - bucket) % n;
}

/* cwin_block.c's cwin_alt_bucket: reduced by a branch */
static uint32_t
ref_alt_window(uint32_t bucket, uint32_t fp, uint32_t n)
{
	uint32_t	m = ref_reduce32(ref_mix32(fp * UINT32_C(0x9e3779b1) + UINT32_C(0x7f4a7c15)), n);

	return m >= bucket ? m - bucket : m + n - bucket;
}

/* ---- fbf_le.h ---- */

/*
 * Every width against the model, on random bytes at every alignment: a
 * read gives the model's value, a write gives the model's bytes and
 * touches nothing past its width, and the codecs' former downward read
 * (which looked big-endian) is the same little-endian read.
 */
static void
test_le_helpers(void)
{
	uint64_t	rng = seed ^ 0x1e;
	unsigned char buf[32];
	unsigned char want[32];

	for (int round = 0; round < 20000; round++)
	{
		unsigned	at = (unsigned) test_rand_below(&rng, 16);
		unsigned	n = (unsigned) test_rand_below(&rng, 9);
		uint64_t	v = test_rand(&rng);
		const unsigned char *p = buf + at;

		/* edge values now and then */
		if (round % 7 == 0)
			v = round % 14 == 0 ? ~UINT64_C(0) : 0;
		for (int i = 0; i < 32; i++)
			buf[i] = (unsigned char) test_rand(&rng);

		CHECK(fbf_le_read(p, n) == ref_le_read(p, n), "read of %u bytes", n);
		CHECK(fbf_le16_read(p) == ref_le_read(p, 2), "16-bit read");
		CHECK(fbf_le32_read(p) == ref_le_read(p, 4), "32-bit read");
		CHECK(fbf_le64_read(p) == ref_le_read(p, 8), "64-bit read");
		CHECK(ref_le64_read_downward(p) == fbf_le64_read(p),
			  "the downward read is little-endian");

		memcpy(want, buf, sizeof(buf));
		for (unsigned i = 0; i < n; i++)
			want[at + i] = (unsigned char) (v >> (8 * i));
		fbf_le_write(buf + at, v, n);
		CHECK(memcmp(buf, want, sizeof(buf)) == 0, "write of %u bytes", n);
		CHECK(fbf_le_read(p, n) ==
			  (n == 8 ? v : v & ((UINT64_C(1) << (8 * n)) - 1)),
			  "%u bytes round trip", n);

		for (unsigned w = 2; w <= 8; w *= 2)
		{
			memcpy(want, buf, sizeof(buf));
			for (unsigned i = 0; i < w; i++)
				want[at + i] = (unsigned char) (v >> (8 * i));
			if (w == 2)
				fbf_le16_write(buf + at, (uint16_t) v);
			else if (w == 4)
				fbf_le32_write(buf + at, (uint32_t) v);
			else
				fbf_le64_write(buf + at, v);
			CHECK(memcmp(buf, want, sizeof(buf)) == 0, "%u-bit write", 8 * w);
		}
	}
}

/* ---- cuckoo_hash.h ---- */

static void
check_alt(uint32_t bucket, uint32_t fp, uint32_t n)
{
	uint32_t	a = cuckoo_alt_index(bucket, fp, n);

	CHECK(a == ref_alt_table(bucket, fp, n) && a == ref_alt_window(bucket, fp, n),
		  "%u buckets, bucket %u, fp %x: %u, table form %u, window form %u",
		  n, bucket, fp, a, ref_alt_table(bucket, fp, n),
		  ref_alt_window(bucket, fp, n));
	CHECK(a < n && cuckoo_alt_index(a, fp, n) == bucket,
		  "%u buckets, bucket %u, fp %x: alt %u is not an involution", n,
		  bucket, fp, a);
}

/*
 * The merged alternative bucket equals both former forms, and is an
 * involution into [0, n), over the whole domain the callers can pass:
 * 1 <= n <= 65536 (the index's table has at most 65535 slots, so at most
 * 65535 buckets; a window's block 2 to 65536), bucket < n (a key's first
 * bucket is a reduction to [0, n), every other bucket is an alternative
 * or a slot's bucket), any 32-bit fingerprint (the table's are 8 to 16
 * bits, the window's 12 to 27).  Why they agree: m < n, so m + n - bucket
 * is m - bucket + n when m >= bucket (taken mod n: m - bucket) and below
 * n otherwise, and never overflows.  Checked exhaustively over every
 * bucket of every n up to 512, at the edges, and at random.
 */
static void
test_cuckoo_hash_merged(void)
{
	uint64_t	rng = seed ^ 0xc0c0;
	static const uint32_t edge_n[] = {1, 2, 3, 4, 5, 7, 8, 255, 256, 257,
	4095, 4096, 32767, 32768, 65534, 65535, 65536};
	static const uint32_t edge_fp[] = {0, 1, 0xff, 0x100, 0xfff, 0xffff,
		0x10000, 0x7ffffff, 0x8000000, 0x7fffffff, 0x80000000, 0xfffffffe,
	0xffffffff};

	for (uint32_t x = 0; x < 1000000; x++)
	{
		uint32_t	v = x < 500000 ? x : (uint32_t) test_rand(&rng);
		uint32_t	n = (uint32_t) test_rand_below(&rng, 65537);

		CHECK(cuckoo_mix32(v) == ref_mix32(v), "mix32(%x)", v);
		CHECK(cuckoo_reduce32(v, n) == ref_reduce32(v, n), "reduce32(%x, %u)", v, n);
		CHECK(n == 0 || cuckoo_reduce32(v, n) < n, "reduce32(%x, %u) in range", v, n);
	}

	for (uint32_t n = 1; n <= 512; n++)
		for (uint32_t b = 0; b < n; b++)
			for (int i = 0; i < 24; i++)
				check_alt(b, i < 13 ? edge_fp[i] : (uint32_t) test_rand(&rng), n);

	for (size_t i = 0; i < sizeof(edge_n) / sizeof(edge_n[0]); i++)
	{
		uint32_t	n = edge_n[i];
		uint32_t	buckets[] = {0, 1 % n, n / 2, n - 2 < n ? n - 2 : 0, n - 1};

		for (size_t j = 0; j < sizeof(buckets) / sizeof(buckets[0]); j++)
			for (size_t k = 0; k < sizeof(edge_fp) / sizeof(edge_fp[0]); k++)
				check_alt(buckets[j], edge_fp[k], n);
		for (int r = 0; r < 20000; r++)
			check_alt((uint32_t) test_rand_below(&rng, n), (uint32_t) test_rand(&rng), n);
	}

	for (int r = 0; r < 2000000; r++)
	{
		uint32_t	n = 1 + (uint32_t) test_rand_below(&rng, 65536);

		check_alt((uint32_t) test_rand_below(&rng, n), (uint32_t) test_rand(&rng), n);
	}
}

#endif							/* FBF_TEST_SHARED_H */
