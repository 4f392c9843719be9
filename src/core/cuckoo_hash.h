/*-------------------------------------------------------------------------
 *
 * cuckoo_hash.h
 *	  The bucket arithmetic of both cuckoo structures: the cuckoo index's
 *	  table (cuckoo_table.c) and the cuckoo window's blocks (cwin_block.c)
 *	  place entries with this one piece of code.
 *
 * Both formats are frozen on disk (CUCKOO_VERSION; the cuckoo window's page
 * and snapshot format 2): nothing here may change what it computes.
 * test/core/test_shared.h checks these functions against reference models
 * of the two forms they replaced, which differed only in how the
 * alternative bucket was reduced (`%` in the table, a branch in the
 * window), and agreed on every input their callers can pass.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CUCKOO_HASH_H
#define CUCKOO_HASH_H

#include <stdint.h>

/* lowbias32 (Chris Wellons): full avalanche for 32-bit inputs */
static inline uint32_t
cuckoo_mix32(uint32_t x)
{
	x ^= x >> 16;
	x *= UINT32_C(0x7feb352d);
	x ^= x >> 15;
	x *= UINT32_C(0x846ca68b);
	x ^= x >> 16;
	return x;
}

/* x scaled to [0, n) by a multiply-high (no division); 0 if n is 0 */
static inline uint32_t
cuckoo_reduce32(uint32_t x, uint32_t n)
{
	return (uint32_t) (((uint64_t) x * n) >> 32);
}

/*
 * The other bucket of an entry with fingerprint fp in bucket "bucket" of
 * nbuckets buckets: (m(fp) - bucket) mod nbuckets, where m(fp) is the
 * mixed fingerprint reduced to [0, nbuckets).  Applying it twice gives
 * the bucket back for any number of buckets (XOR would need a power of
 * two).  The caller passes 1 <= nbuckets <= 65536 (both layouts' bound)
 * and bucket < nbuckets; the result is then < nbuckets.  Both operands
 * being below nbuckets, the reduction is a branch, not a division.
 */
static inline uint32_t
cuckoo_alt_index(uint32_t bucket, uint32_t fp, uint32_t nbuckets)
{
	uint32_t	m = cuckoo_reduce32(cuckoo_mix32(fp * UINT32_C(0x9e3779b1) +
												 UINT32_C(0x7f4a7c15)),
									nbuckets);

	return m >= bucket ? m - bucket : m + nbuckets - bucket;
}

#endif							/* CUCKOO_HASH_H */
