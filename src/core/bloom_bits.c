/*-------------------------------------------------------------------------
 *
 * bloom_bits.c
 *	  Hashing and Bloom filter arithmetic shared by the FBF and the tests.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "bloom_bits.h"
#include "fbf_hash.h"
#include "fbf_interrupt.h"
#include "fbf_le.h"

/* the host's check for a cancel (fbf_interrupt.h); NULL: none */
void		(*fbf_interrupt_hook) (void) = NULL;

FbfHash
fbf_hash_bytes(const void *data, size_t len)
{
	XXH128_hash_t h = XXH3_128bits_withSeed(data, len, FBF_HASH_SEED);
	FbfHash		result;

	result.h1 = h.low64;
	result.h2 = h.high64;
	return result;
}

FbfHash
fbf_hash_int64(int64_t value)
{
	unsigned char bytes[8];

	fbf_le64_write(bytes, (uint64_t) value);
	return fbf_hash_bytes(bytes, sizeof(bytes));
}

double
bloom_fpp(uint32_t nbits, int nhashes, uint64_t nelems)
{
	double		fill;

	if (nelems == 0)
		return 0.0;
	fill = -expm1(-(double) nhashes * (double) nelems / (double) nbits);
	return pow(fill, nhashes);
}

uint64_t
bloom_popcount(const uint64_t *words, uint32_t nwords)
{
	uint64_t	n = 0;
	uint32_t	i;

	for (i = 0; i < nwords; i++)
		n += (uint64_t) __builtin_popcountll(words[i]);
	return n;
}

double
bloom_cardinality(uint32_t nbits, int nhashes, uint64_t nset)
{
	if (nset >= nbits)
		return INFINITY;
	return -((double) nbits / nhashes) * log1p(-(double) nset / nbits);
}
