/*-------------------------------------------------------------------------
 *
 * fbf_hash.h
 *	  Element hashing and Bloom probe derivation for the FBF.
 *
 * Every element is hashed once with 128-bit XXH3 under a fixed seed (or,
 * in a counter's window, with SipHash under the window's secret key:
 * fbf_keyed_hash.c), and the
 * k probe positions are derived from the two 64-bit halves by double hashing
 * (Kirsch and Mitzenmacher): g_i = h1 + i * h2 (mod 2^64), reduced to
 * [0, m) by a multiply-high ("fast range", Lemire).  Both steps are defined
 * on unsigned 64-bit integers only, so a filter written on one platform
 * answers identically on any other: filters live on disk and in `fbf`
 * values, so these definitions are part of the storage format and must
 * never change within a format version.
 *
 * No PostgreSQL includes: this file is shared by the extension and the
 * standalone tests and benchmarks.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_HASH_H
#define FBF_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Seed of the element hash.  Part of format version 1: never change it. */
#define FBF_HASH_SEED	UINT64_C(0x6662665f73656564)	/* "fbf_seed" */

/* Upper bound on k, the number of probes per filter. */
#define FBF_MAX_HASHES	32

typedef struct FbfHash
{
	uint64_t	h1;
	uint64_t	h2;
} FbfHash;

/* Hash an element's bytes (XXH3-128, seed FBF_HASH_SEED). */
extern FbfHash fbf_hash_bytes(const void *data, size_t len);

/* Hash a 64-bit integer element as its 8 little-endian bytes. */
extern FbfHash fbf_hash_int64(int64_t value);

/*
 * A window's secret key (fbf_keyed_hash.c): two 64-bit words, each the
 * little-endian reading of 8 of its 16 bytes.  All zero means no key: the
 * public hash above.
 */
typedef struct FbfHashKey
{
	uint64_t	k0;
	uint64_t	k1;
} FbfHashKey;

#define FBF_HASH_KEY_BYTES	16

static inline bool
fbf_hash_key_is_set(const FbfHashKey *key)
{
	return key->k0 != 0 || key->k1 != 0;
}

/*
 * Hash an element's bytes under `key` (SipHash-2-4-128: h1 its first
 * output word, h2 its second); under the zero key, fbf_hash_bytes.
 */
extern FbfHash fbf_hash_keyed(const FbfHashKey *key, const void *data,
							  size_t len);

/* fbf_hash_int64 under `key` */
extern FbfHash fbf_hash_int64_keyed(const FbfHashKey *key, int64_t value);

/*
 * floor(x * range / 2^64): maps a uniform 64-bit value onto [0, range)
 * without a division.
 */
static inline uint32_t
fbf_reduce(uint64_t x, uint32_t range)
{
#if defined(__SIZEOF_INT128__)
	return (uint32_t) (((unsigned __int128) x * range) >> 64);
#else
	/* portable 64x32 multiply-high; identical result */
	uint64_t	lo = (x & UINT64_C(0xffffffff)) * range;
	uint64_t	hi = (x >> 32) * range;

	return (uint32_t) ((hi + (lo >> 32)) >> 32);
#endif
}

/*
 * Fill probes[0..nhashes-1] with the bit positions of an element in a
 * filter of nbits bits.
 */
static inline void
fbf_probes(const FbfHash *hash, int nhashes, uint32_t nbits, uint32_t *probes)
{
	uint64_t	g = hash->h1;
	int			i;

	for (i = 0; i < nhashes; i++)
	{
		probes[i] = fbf_reduce(g, nbits);
		g += hash->h2;
	}
}

#endif							/* FBF_HASH_H */
