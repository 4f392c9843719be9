/*-------------------------------------------------------------------------
 *
 * bloom_slice.h
 *	  Bit-sliced Bloom filters: up to 64 filters of one shape in one array
 *	  of words, one filter per bit lane.
 *
 * A slice array of m positions holds `lanes` filters of m bits each, all
 * probed at the same positions: word w is position w, and its bit j is bit
 * w of the filter in lane j.  Words are 1, 2, 4 or 8 bytes wide
 * (bloom_slice_width), the narrowest that holds every lane, so the memory
 * is the filters' own bits rounded up to that width.
 *
 * Testing an element in every filter at once is k word loads and an AND
 * (bloom_slice_test): the result's bit j says whether the filter in lane j
 * holds every probed bit.  The loads do not depend on each other, so a
 * check costs about one memory latency, not k, and never branches per
 * filter.  Setting an element in a set of lanes is k ORs.  Clearing a lane
 * (the Forgetful Bloom Filter's refresh) is one pass of ANDs, or nothing at
 * all for callers that clear lazily by epoch stamps (src/window).
 *
 * Packed arrays (bloom_packed_*, below) hold the same lanes without
 * rounding a position up to a word: `lanes` bits per position, so memory
 * is exactly the filters' bits.  The FBF core keeps its ring in them.
 *
 * The positions come from fbf_probes() with nbits = m.  No PostgreSQL
 * includes: the pure core, its tests and the window pages all use these.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BLOOM_SLICE_H
#define BLOOM_SLICE_H

#include <stdint.h>
#include <string.h>

#include "fbf_le.h"

/* bytes per word for a slice array of `lanes` lanes (1 .. 64) */
static inline int
bloom_slice_width(int lanes)
{
	return lanes <= 8 ? 1 : lanes <= 16 ? 2 : lanes <= 32 ? 4 : 8;
}

/* the lanes of position w */
static inline uint64_t
bloom_slice_get(const void *words, int width, uint32_t w)
{
	switch (width)
	{
		case 1:
			return ((const uint8_t *) words)[w];
		case 2:
			return ((const uint16_t *) words)[w];
		case 4:
			return ((const uint32_t *) words)[w];
		default:
			return ((const uint64_t *) words)[w];
	}
}

/* OR `lanes` into position w */
static inline void
bloom_slice_or(void *words, int width, uint32_t w, uint64_t lanes)
{
	switch (width)
	{
		case 1:
			((uint8_t *) words)[w] |= (uint8_t) lanes;
			break;
		case 2:
			((uint16_t *) words)[w] |= (uint16_t) lanes;
			break;
		case 4:
			((uint32_t *) words)[w] |= (uint32_t) lanes;
			break;
		default:
			((uint64_t *) words)[w] |= lanes;
			break;
	}
}

/*
 * The lanes whose filter holds every probed bit: bit j of the result is set
 * iff lane j has all k bits.  Lanes the width does not have read as zero.
 */
static inline uint64_t
bloom_slice_test(const void *words, int width, const uint32_t *probes, int k)
{
	uint64_t	lanes = ~UINT64_C(0);
	int			i;

	/* one loop per width, so that each compiles to plain loads and ANDs */
	switch (width)
	{
		case 1:
			for (i = 0; i < k; i++)
				lanes &= ((const uint8_t *) words)[probes[i]];
			break;
		case 2:
			for (i = 0; i < k; i++)
				lanes &= ((const uint16_t *) words)[probes[i]];
			break;
		case 4:
			for (i = 0; i < k; i++)
				lanes &= ((const uint32_t *) words)[probes[i]];
			break;
		default:
			for (i = 0; i < k; i++)
				lanes &= ((const uint64_t *) words)[probes[i]];
			break;
	}
	return k > 0 ? lanes : 0;
}

/* set an element's probed bits in every lane of `lanes` */
static inline void
bloom_slice_set(void *words, int width, const uint32_t *probes, int k,
				uint64_t lanes)
{
	int			i;

	for (i = 0; i < k; i++)
		bloom_slice_or(words, width, probes[i], lanes);
}

/* clear the lanes of `lanes` at every one of m positions */
static inline void
bloom_slice_clear(void *words, int width, uint32_t m, uint64_t lanes)
{
	uint32_t	w;

	switch (width)
	{
		case 1:
			for (w = 0; w < m; w++)
				((uint8_t *) words)[w] &= (uint8_t) ~lanes;
			break;
		case 2:
			for (w = 0; w < m; w++)
				((uint16_t *) words)[w] &= (uint16_t) ~lanes;
			break;
		case 4:
			for (w = 0; w < m; w++)
				((uint32_t *) words)[w] &= (uint32_t) ~lanes;
			break;
		default:
			for (w = 0; w < m; w++)
				((uint64_t *) words)[w] &= ~lanes;
			break;
	}
}

/* set bits of lane j over m positions */
static inline uint32_t
bloom_slice_popcount(const void *words, int width, uint32_t m, int j)
{
	uint32_t	n = 0;
	uint32_t	w;

	for (w = 0; w < m; w++)
		n += (uint32_t) ((bloom_slice_get(words, width, w) >> j) & 1);
	return n;
}

/* ---------------------------------------------------------------------- */

/*
 * Packed slice arrays: lanes without the width rounding.
 *
 * Position w of a packed array of stride s is the s bits that start at bit
 * w * s of a little-endian bit string (bit i is bit i % 8 of byte i / 8);
 * bit j of a position is lane j.  bloom_packed_stride(lanes) is lanes itself
 * up to BLOOM_PACKED_MAX_STRIDE lanes, so that a position always lies in the
 * 8 bytes from its first byte and one unaligned load reads it (then a shift
 * and a mask); above that it is 64.  Strides 8, 16, 32 and 64 put every
 * position in a byte-aligned word of that width, are read with aligned loads
 * of that width, and, on a little-endian machine, are the very bytes of the
 * aligned arrays above of width 1, 2, 4 and 8.
 *
 * An array of m positions is bloom_packed_bytes(m, s) bytes; the last
 * position's 8-byte load may read up to BLOOM_PACKED_SLACK - 1 bytes past
 * it, so that many readable bytes must follow (the FBF core puts the arrays
 * of its partitions back to back and the slack after the last one).  The
 * functions that write change only the lanes they are given, at the
 * positions they are given, so arrays sharing a byte do not disturb each
 * other.  Lanes at and above s, and bits of the string past the last
 * position, are never read as lanes.
 */
#define BLOOM_PACKED_MAX_STRIDE 57
#define BLOOM_PACKED_SLACK		8

/* bits per position of a packed array of `lanes` lanes (1 .. 64) */
static inline int
bloom_packed_stride(int lanes)
{
	return lanes <= BLOOM_PACKED_MAX_STRIDE ? lanes : 64;
}

/* bytes of a packed array of m positions of stride s (slack not included) */
static inline uint64_t
bloom_packed_bytes(uint32_t m, int stride)
{
	return ((uint64_t) m * (uint32_t) stride + 7) / 8;
}

/* the s-bit mask of a position's lanes */
static inline uint64_t
bloom_packed_mask(int stride)
{
	return stride >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << stride) - 1;
}

/* the lanes of position w */
static inline uint64_t
bloom_packed_get(const void *bytes, int stride, uint32_t w)
{
	const unsigned char *b = (const unsigned char *) bytes;
	uint64_t	bit;

	switch (stride)
	{
		case 8:
			return b[w];
		case 16:
			return fbf_le16_read(b + (size_t) w * 2);
		case 32:
			return fbf_le32_read(b + (size_t) w * 4);
		case 64:
			return fbf_le64_read(b + (size_t) w * 8);
		default:
			bit = (uint64_t) w * (uint32_t) stride;
			return (fbf_le64_read(b + (bit >> 3)) >> (bit & 7)) &
				bloom_packed_mask(stride);
	}
}

/*
 * Position w's lanes become (lanes & ~clear) | set; bits of other positions
 * and lanes at or above the stride are untouched.
 */
static inline void
bloom_packed_update(void *bytes, int stride, uint32_t w, uint64_t clear,
					uint64_t set)
{
	unsigned char *b = (unsigned char *) bytes;
	uint64_t	mask = bloom_packed_mask(stride);
	uint64_t	bit = (uint64_t) w * (uint32_t) stride;
	int			shift = (int) (bit & 7);
	uint64_t	v;

	if (stride == 64)
	{
		v = fbf_le64_read(b + (size_t) w * 8);
		fbf_le64_write(b + (size_t) w * 8, (v & ~clear) | set);
		return;
	}
	/* a position is at most 57 bits from a shift of at most 7 */
	v = fbf_le64_read(b + (bit >> 3));
	v &= ~((clear & mask) << shift);
	v |= (set & mask) << shift;
	fbf_le64_write(b + (bit >> 3), v);
}

/* OR `lanes` into position w */
static inline void
bloom_packed_or(void *bytes, int stride, uint32_t w, uint64_t lanes)
{
	unsigned char *b = (unsigned char *) bytes;

	switch (stride)
	{
		case 8:
			b[w] |= (unsigned char) lanes;
			break;
		case 16:
			b[(size_t) w * 2] |= (unsigned char) lanes;
			b[(size_t) w * 2 + 1] |= (unsigned char) (lanes >> 8);
			break;
		default:
			bloom_packed_update(bytes, stride, w, 0, lanes);
			break;
	}
}

/*
 * The lanes whose filter holds every probed bit, as bloom_slice_test: bit j
 * of the result is set iff lane j has all k bits; lanes past the stride
 * read as zero.
 */
static inline uint64_t
bloom_packed_test(const void *bytes, int stride, const uint32_t *probes, int k)
{
	const unsigned char *b = (const unsigned char *) bytes;
	uint64_t	lanes = ~UINT64_C(0);
	int			i;

	/* one loop per stride: plain independent loads and ANDs */
	switch (stride)
	{
		case 8:
			for (i = 0; i < k; i++)
				lanes &= b[probes[i]];
			break;
		case 16:
			for (i = 0; i < k; i++)
				lanes &= fbf_le16_read(b + (size_t) probes[i] * 2);
			break;
		case 32:
			for (i = 0; i < k; i++)
				lanes &= fbf_le32_read(b + (size_t) probes[i] * 4);
			break;
		case 64:
			for (i = 0; i < k; i++)
				lanes &= fbf_le64_read(b + (size_t) probes[i] * 8);
			break;
		default:
			for (i = 0; i < k; i++)
			{
				uint64_t	bit = (uint64_t) probes[i] * (uint32_t) stride;

				lanes &= fbf_le64_read(b + (bit >> 3)) >> (bit & 7);
			}
			lanes &= bloom_packed_mask(stride);
			break;
	}
	return k > 0 ? lanes : 0;
}

/* set an element's probed bits in every lane of `lanes` */
static inline void
bloom_packed_set(void *bytes, int stride, const uint32_t *probes, int k,
				 uint64_t lanes)
{
	int			i;

	for (i = 0; i < k; i++)
		bloom_packed_or(bytes, stride, probes[i], lanes);
}

/*
 * Clear the lanes of `lanes` at every one of m positions.  The bits to
 * clear repeat every stride / gcd(stride, 64) 64-bit words of the bit
 * string (one word for strides 8, 16, 32 and 64), so a mask per word of
 * that period is built first and the array is then ANDed a word at a time;
 * the last bits (under 64) one by one.
 */
static inline void
bloom_packed_clear(void *bytes, int stride, uint32_t m, uint64_t lanes)
{
	unsigned char *b = (unsigned char *) bytes;
	uint64_t	total = (uint64_t) m * (uint32_t) stride;
	uint64_t	nwords = total / 64;
	int			period = stride / (stride & -stride);
	uint64_t	keep[64];
	uint64_t	q;
	uint64_t	bit;
	int			r;
	int			t;

	lanes &= bloom_packed_mask(stride);
	if (lanes == 0)
		return;
	for (r = 0; r < period; r++)
	{
		keep[r] = ~UINT64_C(0);
		for (t = 0; t < 64; t++)
		{
			if ((lanes >> ((64 * r + t) % stride)) & 1)
				keep[r] &= ~(UINT64_C(1) << t);
		}
	}
	for (q = 0, r = 0; q < nwords; q++)
	{
		fbf_le64_write(b + q * 8, fbf_le64_read(b + q * 8) & keep[r]);
		if (++r == period)
			r = 0;
	}
	for (bit = nwords * 64; bit < total; bit++)
	{
		if ((lanes >> (bit % (uint32_t) stride)) & 1)
			b[bit >> 3] &= (unsigned char) ~(1u << (bit & 7));
	}
}

/* set bits of lane j over m positions */
static inline uint32_t
bloom_packed_popcount(const void *bytes, int stride, uint32_t m, int j)
{
	uint32_t	n = 0;
	uint32_t	w;

	for (w = 0; w < m; w++)
		n += (uint32_t) ((bloom_packed_get(bytes, stride, w) >> j) & 1);
	return n;
}

#endif							/* BLOOM_SLICE_H */
