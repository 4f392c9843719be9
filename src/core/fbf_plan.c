/*-------------------------------------------------------------------------
 *
 * fbf_plan.c
 *	  Planning an FBF for a workload: the smallest shape whose steady-state
 *	  estimate meets a target (fbf_plan, fbf_plan_blocked, fbf_plan_sliced),
 *	  and that steady-state model (fbf_steady_fpp), which the AIMD step's
 *	  look-ahead uses too.  See fbf_plan.h.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>

#include "fbf_plan.h"

/*
 * Steady-state estimate of nfilters filters refreshed every period at
 * per_period elements per period, just before a refresh: the future filter
 * holds one period's elements, every older filter two.
 */
double
fbf_steady_fpp(uint32_t nbits, int nhashes, uint32_t nparts, int nfilters,
			   double per_period, FbfCheck check)
{
	uint64_t	counts[FBF_MAX_FILTERS];
	double		per_part = per_period / nparts;
	int			i;

	counts[0] = (uint64_t) ceil(per_part);
	for (i = 1; i < nfilters; i++)
		counts[i] = (uint64_t) ceil(2 * per_part);
	return fbf_estimate_fpp_counts(nbits, nhashes, nfilters, counts, check,
								   FBF_MODEL_SHARED);
}

/* steady-state estimate of one block (nparts = 1) */
static double
steady_fpp(uint32_t nbits, int nhashes, int nfilters, uint64_t per_period,
		   FbfCheck check)
{
	return fbf_steady_fpp(nbits, nhashes, 1, nfilters, (double) per_period,
						  check);
}

/* smallest nbits with estimate <= target, or 0 */
static uint32_t
smallest_nbits(int nhashes, int nfilters, uint64_t per_period, double target,
			   FbfCheck check)
{
	uint32_t	lo = FBF_MIN_NBITS;
	uint32_t	hi = FBF_MAX_NBITS;

	if (steady_fpp(hi, nhashes, nfilters, per_period, check) > target)
		return 0;
	while (lo < hi)
	{
		uint32_t	mid = lo + (hi - lo) / 2;

		if (steady_fpp(mid, nhashes, nfilters, per_period, check) <= target)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/*
 * The search both planners share: every filter count up to max_filters and
 * every k, keeping the best shape.  lanes == 0: the smallest flat form
 * (fbf_flat_size), the first found on ties.  lanes > 0 (bit-sliced storage,
 * where memory is the lanes' whether filters use them or not): the fewest
 * bits per filter, then the fewest hashes, within lanes filters.
 */
static bool
plan_search(double retention, double target_fpp, double rate, FbfCheck check,
			int max_filters, int lanes, FbfPlan *plan, const char **why)
{
	bool		found = false;
	size_t		best_size = 0;
	int			n;

	if (!(retention > 0) || !(rate >= 0) || !(target_fpp > 0 && target_fpp < 1))
	{
		*why = "Retention must be positive, the rate non-negative and the target FPP between 0 and 1.";
		return false;
	}

	for (n = FBF_MIN_FILTERS; n <= FBF_MAX_FILTERS && n <= max_filters; n++)
	{
		double		period = retention / (n - 1);
		double		per_period = ceil(rate * period);
		int			k;

		if (per_period > (double) (UINT64_C(1) << 52))
			continue;

		for (k = 1; k <= FBF_MAX_HASHES; k++)
		{
			uint32_t	nbits = smallest_nbits(k, n, (uint64_t) per_period,
											   target_fpp, check);
			size_t		size;
			bool		better;

			/*
			 * The flat form's measure is the filters' bits in 64-bit
			 * words: what the value serializes to and what per-filter
			 * pages hold.  The bit-sliced Fbf is as large within a byte
			 * per partition (58 to 63 filters aside), so filling a slice
			 * word with more filters saves nothing there.
			 */
			if (nbits == 0)
				continue;
			size = lanes > 0 ? fbf_size(nbits, lanes, 1) : fbf_flat_size(nbits, n, 1);
			if (size > FBF_MAX_BYTES)
				continue;
			if (lanes > 0)
				better = !found || nbits < plan->nbits ||
					(nbits == plan->nbits && k < plan->nhashes);
			else
				better = !found || size < best_size;
			if (better)
			{
				best_size = size;
				plan->nbits = nbits;
				plan->nparts = 1;
				plan->nhashes = k;
				plan->nfilters = n;
				plan->period = period;
				plan->fpp = steady_fpp(nbits, k, n, (uint64_t) per_period,
									   check);
				found = true;
			}
		}
	}
	if (!found)
	{
		*why = "No filter of at most 256 MB meets the target at that rate.";
		return false;
	}
	return true;
}

/* spread a plan's bits per filter over blocks of at most max_block_bits */
static void
plan_blocks(FbfPlan *plan, uint32_t max_block_bits)
{
	uint64_t	total = plan->nbits;

	if (max_block_bits < FBF_MIN_NBITS || total <= max_block_bits)
		return;
	plan->nparts = (uint32_t) ((total + max_block_bits - 1) / max_block_bits);
	plan->nbits = (uint32_t) ((total + plan->nparts - 1) / plan->nparts);
}

bool
fbf_plan(double retention, double target_fpp, double rate, FbfCheck check,
		 int max_filters, FbfPlan *plan, const char **why)
{
	return plan_search(retention, target_fpp, rate, check, max_filters, 0,
					   plan, why);
}

bool
fbf_plan_blocked(double retention, double target_fpp, double rate,
				 FbfCheck check, int max_filters, uint32_t max_block_bits,
				 FbfPlan *plan, const char **why)
{
	if (!fbf_plan(retention, target_fpp, rate, check, max_filters, plan, why))
		return false;
	plan_blocks(plan, max_block_bits);
	return true;
}

bool
fbf_plan_sliced(double retention, double target_fpp, double rate,
				FbfCheck check, int lanes, uint32_t max_block_bits,
				FbfPlan *plan, const char **why)
{
	if (!plan_search(retention, target_fpp, rate, check, lanes, lanes, plan, why))
		return false;
	plan_blocks(plan, max_block_bits);
	return true;
}
