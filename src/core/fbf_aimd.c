/*-------------------------------------------------------------------------
 *
 * fbf_aimd.c
 *	  The AIMD controller's decision step (fbf_aimd_decide); its
 *	  look-ahead is the planner's steady-state model (fbf_plan.h).
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>

#include "fbf_aimd.h"
#include "fbf_plan.h"

/* largest filter count whose FBF fits in max_bytes, or 0 */
static int
filters_within(uint64_t max_bytes, uint32_t nbits, uint32_t nparts)
{
	int			n;

	for (n = FBF_MAX_FILTERS; n > 0; n--)
	{
		if (fbf_size(nbits, n, nparts) <= max_bytes)
			return n;
	}
	return 0;
}

/*
 * Steady-state estimate of (nfilters, period) at `rate`, or -1 if unknown.
 * A timed refresh recycles the oldest live filter as soon as it holds
 * nothing younger than the retention, so in steady state only about
 * retention / period + 2 filters are live, however many there are.
 */
static double
projected(const FbfAimdConfig *cfg, int nfilters, int64_t period, double rate)
{
	int			live = nfilters;

	if (rate < 0)
		return -1;
	if (period > 0)
	{
		double		needed = ceil((double) cfg->retention / (double) period) + 2;

		if (needed < live)
			live = needed < FBF_MIN_FILTERS ? FBF_MIN_FILTERS : (int) needed;
	}
	return fbf_steady_fpp(cfg->nbits, cfg->nhashes, cfg->nparts, live,
						  rate * (double) period, FBF_CHECK_DEFAULT);
}

/* the period one step shorter that still covers the retention, or period */
static int64_t
shorter_period(const FbfAimdConfig *cfg, int nfilters, int64_t period)
{
	int64_t		shorter = period - cfg->period_step;
	int64_t		needed = (cfg->retention + nfilters - 2) / (nfilters - 1);

	if (shorter < cfg->period_min)
		shorter = cfg->period_min;
	if (shorter < needed)
		shorter = needed;
	if (shorter > period)
		shorter = period;
	return shorter;
}

FbfAimdDecision
fbf_aimd_decide(const FbfAimdConfig *cfg, int nfilters, int64_t period,
				double fpp, double rate)
{
	FbfAimdDecision d;

	d.action = FBF_AIMD_HOLD;
	d.nfilters = nfilters;
	d.period = period;
	d.capped = false;
	d.reason = "estimate within band";

	if (fpp >= cfg->increase_at * cfg->target_fpp)
	{
		int			cap = filters_within(cfg->max_bytes, cfg->nbits, cfg->nparts);
		int			grown = 2 * nfilters;

		/* past the target itself, always act */
		if (rate >= 0 && fpp < cfg->target_fpp &&
			projected(cfg, nfilters, period, rate) < cfg->increase_at * cfg->target_fpp)
		{
			d.reason = "estimate high, but the current shape meets the target at the current rate";
			return d;
		}
		if (cap > cfg->max_filters)
			cap = cfg->max_filters;
		if (grown > cap)
		{
			grown = cap;
			d.capped = true;
		}
		if (grown < nfilters)
			grown = nfilters;

		/*
		 * The window (grown - 1) * period' must still cover the retention.
		 * At a cap the filters cannot double, but a shorter period may
		 * still fit in the ones there are.  Only a shorter period lowers
		 * the load per filter: more filters at the same period would cost
		 * memory for nothing.
		 */
		d.period = shorter_period(cfg, grown, period);
		if (d.period == period)
		{
			if (grown == nfilters)
				d.reason = cap == cfg->max_filters ?
					"at the filter limit" : "at the memory cap";
			else
			{
				d.capped = false;
				d.reason = "the period is at its minimum";
			}
			return d;
		}
		d.action = FBF_AIMD_GROW;
		d.nfilters = grown;
		d.reason = d.capped ? "estimate high, growth limited by a cap" :
			"estimate high";
		return d;
	}

	if (fpp <= cfg->decrease_at * cfg->target_fpp)
	{
		int			shrunk = nfilters - 1;
		int64_t		longer = period + cfg->period_step;

		if (shrunk < cfg->min_filters)
		{
			d.reason = "at the minimum number of filters";
			return d;
		}
		if (longer > cfg->period_max)
			longer = cfg->period_max;
		if (longer < period)
			longer = period;
		if ((int64_t) (shrunk - 1) * longer < cfg->retention)
		{
			d.reason = "retention needs every filter";
			return d;
		}
		if (rate >= 0 &&
			projected(cfg, shrunk, longer, rate) >= cfg->increase_at * cfg->target_fpp / 2)
		{
			d.reason = "estimate low, but a smaller shape would not meet the target at the current rate";
			return d;
		}

		d.action = FBF_AIMD_SHRINK;
		d.nfilters = shrunk;
		d.period = longer;
		d.reason = "estimate low";
	}
	return d;
}

double
fbf_rate_since_birth(uint64_t drained, int64_t pending_at_birth,
					 int64_t pending_now, int64_t elapsed, int64_t min_elapsed)
{
	double		since = (double) drained - (double) pending_at_birth;
	double		arrived = (double) pending_now + (since > 0 ? since : 0);

	if (elapsed < min_elapsed)
		elapsed = min_elapsed;
	if (arrived <= 0 || elapsed <= 0)
		return 0;
	return arrived / (double) elapsed;
}
