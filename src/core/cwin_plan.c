/*-------------------------------------------------------------------------
 *
 * cwin_plan.c
 *	  Planning a cuckoo window for a workload: see cwin_plan.h.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#include "cwin_plan.h"

#include <math.h>

#include "fbf_core.h"

/* live operations at the end of an epoch, when a window holds the most */
static double
peak_live(double retention, double rate, int nlive)
{
	return rate * retention / (nlive - 1) * nlive;
}

/* do nparts blocks hold `peak` operations, the fullest too? */
static bool
plan_fits(const CwinLayout *layout, double peak, double nparts)
{
	double		mean = peak / nparts;

	return mean + CWIN_PLAN_SPREAD * sqrt(mean) <= CWIN_PLAN_LOAD * cwin_nslots(layout);
}

/* the estimate over an epoch: its mean load is (N + 1/2) / (N + 1) of the peak */
static double
plan_fpp(const CwinLayout *layout, double peak, uint32_t nparts, int nlive)
{
	double		mean = peak * (nlive - 0.5) / nlive / nparts;

	return cwin_fpp(layout, mean, 0);
}

bool
cwin_plan(double retention, double target, double rate, size_t space,
		  CwinPlan *plan, const char **why)
{
	bool		found = false;
	double		peak;

	if (!(retention > 0) || !(rate > 0) || !(target > 0 && target < 1))
	{
		*why = "The retention, the rate and the target must be positive, the target below 1.";
		return false;
	}
	peak = peak_live(retention, rate, CWIN_PLAN_LIVE);
	for (uint32_t f = CWIN_MIN_FP_BITS; f <= CWIN_MAX_FP_BITS; f++)
	{
		CwinLayout	layout;
		double		nparts;
		double		fpp;

		if (!cwin_layout_init(&layout, space, f, CWIN_MAX_KICKS, why))
			return false;
		nparts = ceil(peak / (CWIN_PLAN_LOAD * cwin_nslots(&layout)));
		while (!plan_fits(&layout, peak, nparts) && nparts <= FBF_MAX_PARTS)
			nparts++;
		if (nparts > FBF_MAX_PARTS)
			continue;
		fpp = plan_fpp(&layout, peak, (uint32_t) nparts, CWIN_PLAN_LIVE);
		if (fpp > target)
			continue;
		if (!found || (uint64_t) nparts * space < plan->bytes)
		{
			plan->fp_bits = f;
			plan->nparts = (uint32_t) nparts;
			plan->nlive = CWIN_PLAN_LIVE;
			plan->period = retention / (CWIN_PLAN_LIVE - 1);
			plan->estimated_fpp = fpp;
			plan->bytes = (uint64_t) nparts * space;
			found = true;
		}
	}
	if (!found)
		*why = "No cuckoo window of at most 2^20 pages meets the target.";
	return found;
}

bool
cwin_plan_bytes(double retention, double rate, uint64_t bytes, size_t space,
				CwinPlan *plan, const char **why)
{
	uint64_t	nparts = bytes / space;
	double		peak = peak_live(retention, rate, CWIN_PLAN_LIVE);
	bool		found = false;

	if (nparts < 1 || nparts > FBF_MAX_PARTS)
	{
		*why = "The bytes make no whole page, or more than 2^20.";
		return false;
	}
	for (uint32_t f = CWIN_MIN_FP_BITS; f <= CWIN_MAX_FP_BITS; f++)
	{
		CwinLayout	layout;

		if (!cwin_layout_init(&layout, space, f, CWIN_MAX_KICKS, why))
			return false;
		if (!plan_fits(&layout, peak, (double) nparts))
			break;
		plan->fp_bits = f;
		plan->nparts = (uint32_t) nparts;
		plan->nlive = CWIN_PLAN_LIVE;
		plan->period = retention / (CWIN_PLAN_LIVE - 1);
		plan->estimated_fpp = plan_fpp(&layout, peak, (uint32_t) nparts, CWIN_PLAN_LIVE);
		plan->bytes = nparts * space;
		found = true;
	}
	if (!found)
		*why = "The bytes cannot hold the window's operations with 12-bit fingerprints.";
	return found;
}
