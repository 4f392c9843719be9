/*-------------------------------------------------------------------------
 *
 * bench_util.h
 *	  What the benchmark programs (bench_fbf, bench_cwin, paper_figures,
 *	  and the libpq clients retry_storm and stream_driver) share: a
 *	  monotonic clock, a seeded random generator, the elements of a
 *	  stream, and a comparator for sorting rounds to take their median.
 *	  Its includers define _POSIX_C_SOURCE (clock_gettime) before any
 *	  header.
 *
 * Elements are hashed from (stream, i) so that distinct streams never
 * share an element: members come from one stream, probes of non-members
 * from another.  No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stdint.h>
#include <time.h>

#include "fbf_hash.h"

static inline double
bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* the next number of the splitmix64 sequence whose state is *s */
static inline uint64_t
bench_rand(uint64_t *s)
{
	uint64_t	z = (*s += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* uniform in [0, 1), from bench_rand */
static inline double
bench_uniform(uint64_t *s)
{
	return (bench_rand(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* element i of a stream */
static inline FbfHash
bench_element(uint64_t stream, uint64_t i)
{
	uint64_t	key[2] = {stream, i};

	return fbf_hash_bytes(key, sizeof(key));
}

/* qsort comparator of doubles, ascending */
static inline int
bench_cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return x < y ? -1 : x > y;
}

#endif							/* BENCH_UTIL_H */
