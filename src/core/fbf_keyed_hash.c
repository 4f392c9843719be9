/*-------------------------------------------------------------------------
 *
 * fbf_keyed_hash.c
 *	  Keyed hashing of a window's identities: SipHash-2-4 with a 128-bit
 *	  output, under the window's secret.
 *
 * A counter's window records operations under a secret key of its own
 * (src/window/README.md, "Keys"), so that nobody who lacks it can compute
 * where an identity's bits or fingerprint land, and so nobody can choose
 * identities of their own that cover another's.  The public hash
 * (fbf_hash_bytes: XXH3-128 under a fixed seed) is fast and well mixed but
 * was never meant to resist an adversary who knows the seed; SipHash is a
 * pseudorandom function under its key, designed for exactly this (hash
 * flooding), and fast on short inputs such as an operation's identity.
 *
 * SipHash-2-4-128 as its authors define it (Aumasson and Bernstein,
 * "SipHash: a fast short-input PRF", and the reference implementation's
 * 128-bit mode): two compression rounds per 8-byte word, four
 * finalisation rounds per output word.  The key is k0, k1 (each the
 * little-endian reading of 8 key bytes); the output's first word is h1,
 * its second h2, as FbfHash orders them.  test/core pins the reference
 * vectors.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#include "fbf_hash.h"
#include "fbf_le.h"

#define ROTL64(x, b)	(uint64_t) (((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND(v0, v1, v2, v3) \
	do { \
		v0 += v1; v1 = ROTL64(v1, 13); v1 ^= v0; v0 = ROTL64(v0, 32); \
		v2 += v3; v3 = ROTL64(v3, 16); v3 ^= v2; \
		v0 += v3; v3 = ROTL64(v3, 21); v3 ^= v0; \
		v2 += v1; v1 = ROTL64(v1, 17); v1 ^= v2; v2 = ROTL64(v2, 32); \
	} while (0)

FbfHash
fbf_hash_keyed(const FbfHashKey *key, const void *data, size_t len)
{
	const unsigned char *in = (const unsigned char *) data;
	const unsigned char *end = in + (len - len % 8);
	uint64_t	v0 = key->k0 ^ UINT64_C(0x736f6d6570736575);
	uint64_t	v1 = key->k1 ^ UINT64_C(0x646f72616e646f6d);
	uint64_t	v2 = key->k0 ^ UINT64_C(0x6c7967656e657261);
	uint64_t	v3 = key->k1 ^ UINT64_C(0x7465646279746573);
	uint64_t	last = (uint64_t) len << 56;
	FbfHash		out;
	size_t		i;

	if (key->k0 == 0 && key->k1 == 0)
		return fbf_hash_bytes(data, len);

	v1 ^= 0xee;					/* the 128-bit mode */
	for (; in != end; in += 8)
	{
		uint64_t	m = fbf_le64_read(in);

		v3 ^= m;
		SIPROUND(v0, v1, v2, v3);
		SIPROUND(v0, v1, v2, v3);
		v0 ^= m;
	}
	last |= fbf_le_read(in, (unsigned) (len % 8));
	v3 ^= last;
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	v0 ^= last;

	v2 ^= 0xee;
	for (i = 0; i < 4; i++)
		SIPROUND(v0, v1, v2, v3);
	out.h1 = v0 ^ v1 ^ v2 ^ v3;
	v1 ^= 0xdd;
	for (i = 0; i < 4; i++)
		SIPROUND(v0, v1, v2, v3);
	out.h2 = v0 ^ v1 ^ v2 ^ v3;
	return out;
}

FbfHash
fbf_hash_int64_keyed(const FbfHashKey *key, int64_t value)
{
	unsigned char bytes[8];

	fbf_le64_write(bytes, (uint64_t) value);
	return fbf_hash_keyed(key, bytes, sizeof(bytes));
}
