/*-------------------------------------------------------------------------
 *
 * tap.h
 *	  A minimal TAP producer for the standalone C tests of the pure core.
 *
 * Each test function calls CHECK() any number of times; run_test() prints
 * one "ok"/"not ok" line per test function, and tap_done() the plan and
 * the exit status.  test/check.sh (and prove) read the output.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_TAP_H
#define FBF_TAP_H

#include <stdio.h>
#include <stdlib.h>

static int	tap_test_no;
static int	tap_failed_tests;
static int	tap_current_failures;

#define CHECK(cond, ...) \
	do { \
		if (!(cond)) \
		{ \
			if (tap_current_failures++ < 5) \
			{ \
				printf("#   %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
				printf(__VA_ARGS__); \
				printf("\n"); \
			} \
		} \
	} while (0)

static inline void
run_test(const char *name, void (*fn) (void))
{
	tap_current_failures = 0;
	fn();
	tap_test_no++;
	if (tap_current_failures)
	{
		tap_failed_tests++;
		printf("not ok %d - %s (%d failed checks)\n", tap_test_no, name,
			   tap_current_failures);
	}
	else
		printf("ok %d - %s\n", tap_test_no, name);
	fflush(stdout);
}

static inline int
tap_done(void)
{
	printf("1..%d\n", tap_test_no);
	return tap_failed_tests ? 1 : 0;
}

/* splitmix64: small, seedable, good enough for tests */
static inline uint64_t
test_rand(uint64_t *state)
{
	uint64_t	z = (*state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static inline uint64_t
test_rand_below(uint64_t *state, uint64_t bound)
{
	return test_rand(state) % bound;
}

#endif							/* FBF_TAP_H */
