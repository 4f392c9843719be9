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
 * Varints (LEB128: seven bits a byte, low first, the high bit saying
 * another follows; at most FBF_VARINT_MAX bytes) and zigzag (a signed
 * value as an unsigned one, small magnitudes small) for WAL records whose
 * numbers are usually small.
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

/*
 * fbf_le16_read, fbf_le32_read and fbf_le64_read: the 16, 32 or 64-bit
 * little-endian integer at p; fbf_le16_write, fbf_le32_write and
 * fbf_le64_write: v at p, little-endian.  FBF_LE_FIXED(bits) defines one
 * width's pair: whole words, or byte by byte where the byte order is not
 * known.
 */
#ifdef FBF_LE_BYTEWISE
#define FBF_LE_FIXED(bits) \
static inline uint##bits##_t \
fbf_le##bits##_read(const unsigned char *p) \
{ \
	return (uint##bits##_t) fbf_le_read(p, (bits) / 8); \
} \
\
static inline void \
fbf_le##bits##_write(unsigned char *p, uint##bits##_t v) \
{ \
	fbf_le_write(p, v, (bits) / 8); \
}
#else
#define FBF_LE_FIXED(bits) \
static inline uint##bits##_t \
fbf_le##bits##_read(const unsigned char *p) \
{ \
	uint##bits##_t v; \
\
	memcpy(&v, p, (bits) / 8); \
	return FBF_LE_NATIVE(bits, v); \
} \
\
static inline void \
fbf_le##bits##_write(unsigned char *p, uint##bits##_t v) \
{ \
	v = FBF_LE_NATIVE(bits, v); \
	memcpy(p, &v, (bits) / 8); \
}
#endif

FBF_LE_FIXED(16)
FBF_LE_FIXED(32)
FBF_LE_FIXED(64)

/* the longest varint of 64 bits */
#define FBF_VARINT_MAX	10

/* Write v at p as a varint (p has FBF_VARINT_MAX bytes); its length. */
static inline unsigned
fbf_varint_write(unsigned char *p, uint64_t v)
{
	unsigned	n = 0;

	while (v >= 0x80)
	{
		p[n++] = (unsigned char) (v | 0x80);
		v >>= 7;
	}
	p[n++] = (unsigned char) v;
	return n;
}

/*
 * Read the varint at p, of at most `len` bytes, into *v; its length, or 0
 * if it runs past `len` or past 64 bits.
 */
static inline unsigned
fbf_varint_read(const unsigned char *p, size_t len, uint64_t *v)
{
	uint64_t	r = 0;

	for (unsigned n = 0; n < len && n < FBF_VARINT_MAX; n++)
	{
		uint64_t	b = p[n] & 0x7f;

		if (n == FBF_VARINT_MAX - 1 && b > 1)
			return 0;
		r |= b << (7 * n);
		if ((p[n] & 0x80) == 0)
		{
			*v = r;
			return n + 1;
		}
	}
	return 0;
}

/* a signed value as an unsigned one: 0, -1, 1, -2 ... as 0, 1, 2, 3 ... */
static inline uint64_t
fbf_zigzag(int64_t v)
{
	return ((uint64_t) v << 1) ^ (0 - ((uint64_t) v >> 63));
}

static inline int64_t
fbf_unzigzag(uint64_t u)
{
	return (int64_t) ((u >> 1) ^ (0 - (u & 1)));
}

#endif							/* FBF_LE_H */
