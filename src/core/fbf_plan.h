/*-------------------------------------------------------------------------
 *
 * fbf_plan.h
 *	  Planning an FBF for a workload: the smallest shape whose steady-state
 *	  estimate meets a target at a rate for a retention, flat, blocked or
 *	  bit-sliced, and the steady-state model itself (which the AIMD step,
 *	  fbf_aimd.h, looks ahead with).
 *
 * Times (period, retention) are in one unit of the caller's choosing.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_PLAN_H
#define FBF_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "fbf_core.h"

/*
 * Steady-state estimate of nfilters filters of nparts blocks of nbits bits
 * refreshed every period at per_period elements per period, just before a
 * refresh: the future filter holds one period's elements, every older
 * filter two (spread evenly over the blocks).
 */
extern double fbf_steady_fpp(uint32_t nbits, int nhashes, uint32_t nparts,
							 int nfilters, double per_period, FbfCheck check);

/* A shape that meets a target for a workload. */
typedef struct FbfPlan
{
	uint32_t	nbits;			/* per block */
	uint32_t	nparts;			/* blocks per filter */
	int			nhashes;
	int			nfilters;
	double		period;			/* retention / (nfilters - 1) */
	double		fpp;			/* steady-state estimate */
} FbfPlan;

/*
 * Smallest FBF (in bytes), of at most max_filters filters, whose
 * steady-state estimated FPP under `check`
 * stays under target_fpp when `rate` elements per unit of time arrive and
 * operations must be remembered for `retention`.  In steady state every
 * live filter holds two periods' worth of elements (one as future, one as
 * present), so the estimate uses counts of 2 * rate * period.  Returns false
 * (and why) if no shape within the limits meets the target.
 */
extern bool fbf_plan(double retention, double target_fpp, double rate,
					 FbfCheck check, int max_filters, FbfPlan *plan,
					 const char **why);

/*
 * The same, with each filter split into blocks of at most max_block_bits
 * bits (the partitions of fbf_core.h): the plan's total bits per filter are
 * spread evenly over ceil(total / max_block_bits) blocks.
 */
extern bool fbf_plan_blocked(double retention, double target_fpp, double rate,
							 FbfCheck check, int max_filters,
							 uint32_t max_block_bits, FbfPlan *plan,
							 const char **why);

/*
 * The plan for bit-sliced storage (bloom_slice.h), where `lanes` filters
 * cost the same memory as one filter's bits times the lanes, whatever
 * their number: the plan of at most `lanes` filters with the fewest bits
 * per filter, spread over blocks of at most max_block_bits.
 */
extern bool fbf_plan_sliced(double retention, double target_fpp, double rate,
							FbfCheck check, int lanes, uint32_t max_block_bits,
							FbfPlan *plan, const char **why);

#endif							/* FBF_PLAN_H */
