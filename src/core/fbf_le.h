/*-------------------------------------------------------------------------
 *
 * fbf_le.h
 *	  Little-endian reads and writes of integers, for the portable forms,
 *	  the pages' bit strings and the hashes' inputs: the one copy of these
 *	  helpers in the core and the extension.
 *
 * Fixed widths (16, 32 and 64 bits) load and store whole words (memcpy,
 * byte-swapped on a big-endian host), so they cost one instruction where
 * the bit-sliced arrays probe and set; on a host whose byte order the
 * compiler does not say, they go byte by byte.  fbf_le_read / fbf_le_write take
 * 0 to 8 bytes (a cuckoo tag's 3 or 4, a hash input's tail).  The pointer
 * need not be aligned.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_LE_H
#define FBF_LE_H

#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define FBF_LE_NATIVE(bits, v)	(v)
#elif defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define FBF_LE_NATIVE(bits, v)	__builtin_bswap##bits(v)
#else
#define FBF_LE_BYTEWISE
#endif

/* the n-byte little-endian integer at p (n = 0 .. 8) */
static inline uint64_t
fbf_le_read(const unsigned char *p, unsigned n)
{
	uint64_t	v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t) p[i] << (8 * i);
	return v;
}

/* the low n bytes of v at p, little-endian (n = 0 .. 8) */
static inline void
fbf_le_write(unsigned char *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (unsigned char) (v >> (8 * i));
}

static inline uint16_t
fbf_le16_read(const unsigned char *p)
{
#ifdef FBF_LE_BYTEWISE
	return (uint16_t) fbf_le_read(p, 2);
#else
	uint16_t	v;

	memcpy(&v, p, 2);
	return FBF_LE_NATIVE(16, v);
#endif
}

static inline uint32_t
fbf_le32_read(const unsigned char *p)
{
#ifdef FBF_LE_BYTEWISE
	return (uint32_t) fbf_le_read(p, 4);
#else
	uint32_t	v;

	memcpy(&v, p, 4);
	return FBF_LE_NATIVE(32, v);
#endif
}

static inline uint64_t
fbf_le64_read(const unsigned char *p)
{
#ifdef FBF_LE_BYTEWISE
	return fbf_le_read(p, 8);
#else
	uint64_t	v;

	memcpy(&v, p, 8);
	return FBF_LE_NATIVE(64, v);
#endif
}

static inline void
fbf_le16_write(unsigned char *p, uint16_t v)
{
#ifdef FBF_LE_BYTEWISE
	fbf_le_write(p, v, 2);
#else
	v = FBF_LE_NATIVE(16, v);
	memcpy(p, &v, 2);
#endif
}

static inline void
fbf_le32_write(unsigned char *p, uint32_t v)
{
#ifdef FBF_LE_BYTEWISE
	fbf_le_write(p, v, 4);
#else
	v = FBF_LE_NATIVE(32, v);
	memcpy(p, &v, 4);
#endif
}

static inline void
fbf_le64_write(unsigned char *p, uint64_t v)
{
#ifdef FBF_LE_BYTEWISE
	fbf_le_write(p, v, 8);
#else
	v = FBF_LE_NATIVE(64, v);
	memcpy(p, &v, 8);
#endif
}

#endif							/* FBF_LE_H */
