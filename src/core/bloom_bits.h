/*-------------------------------------------------------------------------
 *
 * bloom_bits.h
 *	  One Bloom filter: an array of 64-bit words probed at precomputed
 *	  positions, and its false-positive probability.
 *
 * A filter of m bits is ceil(m / 64) words; bit j lives in bit (j % 64) of
 * word j / 64.  The functions take probe positions from fbf_probes() so that an
 * element is hashed once however many filters are probed.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_BLOOM_BITS_H
#define FBF_BLOOM_BITS_H

#include <stdbool.h>
#include <stdint.h>

/* true if every probed bit is set */
static inline bool
bloom_test(const uint64_t *words, const uint32_t *probes, int nhashes)
{
	int			i;

	for (i = 0; i < nhashes; i++)
	{
		uint32_t	p = probes[i];

		if ((words[p >> 6] & (UINT64_C(1) << (p & 63))) == 0)
			return false;
	}
	return true;
}

/* set every probed bit */
static inline void
bloom_set(uint64_t *words, const uint32_t *probes, int nhashes)
{
	int			i;

	for (i = 0; i < nhashes; i++)
	{
		uint32_t	p = probes[i];

		words[p >> 6] |= UINT64_C(1) << (p & 63);
	}
}

/*
 * p(B) = (1 - e^(-k l / m))^k: false-positive probability of a filter of
 * nbits bits and nhashes probes holding nelems distinct elements.
 */
extern double bloom_fpp(uint32_t nbits, int nhashes, uint64_t nelems);

/* number of set bits in nwords words */
extern uint64_t bloom_popcount(const uint64_t *words, uint32_t nwords);

/*
 * Estimate of the number of distinct elements in a filter from its number
 * of set bits (Swamidass and Baldi): -(m / k) ln(1 - X / m).
 */
extern double bloom_cardinality(uint32_t nbits, int nhashes, uint64_t nset);

#endif							/* FBF_BLOOM_BITS_H */
