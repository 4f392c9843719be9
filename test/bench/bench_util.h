/*-------------------------------------------------------------------------
 *
 * bench_util.h
 *	  What the pure-core benchmark programs (bench_fbf, bench_cwin,
 *	  paper_figures) share: a monotonic clock, the elements of a stream,
 *	  and a comparator for sorting rounds to take their median.  Its
 *	  includers define _POSIX_C_SOURCE (clock_gettime) before any header.
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
