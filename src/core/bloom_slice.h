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
 * The positions come from fbf_probes() with nbits = m.  No PostgreSQL
 * includes: the pure core, its tests and the window pages all use these.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BLOOM_SLICE_H
#define BLOOM_SLICE_H

#include <stdint.h>

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

#endif							/* BLOOM_SLICE_H */
