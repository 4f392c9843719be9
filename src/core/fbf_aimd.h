/*-------------------------------------------------------------------------
 *
 * fbf_aimd.h
 *	  The AIMD controller's decision step (paper Algorithm 3) as a pure
 *	  function: state in, configuration out.  Sizing an FBF for a workload
 *	  is fbf_plan.h's.
 *
 * Times (period, retention) are in one unit of the caller's choosing.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_AIMD_H
#define FBF_AIMD_H

#include <stdbool.h>
#include <stdint.h>

#include "fbf_core.h"
typedef struct FbfAimdConfig
{
	double		target_fpp;		/* keep the estimate under this */
	double		increase_at;	/* grow when fpp >= increase_at * target */
	double		decrease_at;	/* shrink when fpp <= decrease_at * target */
	int64_t		retention;		/* (nfilters - 1) * period must cover this */
	int64_t		period_step;	/* t moves by this much per decision */
	int64_t		period_min;
	int64_t		period_max;
	int			min_filters;	/* >= FBF_MIN_FILTERS */
	int			max_filters;	/* <= FBF_MAX_FILTERS */
	uint64_t	max_bytes;		/* memory cap for the whole FBF */
	uint32_t	nbits;			/* per block; fixed for the FBF's life */
	uint32_t	nparts;			/* blocks per filter; fixed too */
	int			nhashes;		/* fixed too */
} FbfAimdConfig;

typedef enum FbfAimdAction
{
	FBF_AIMD_HOLD,
	FBF_AIMD_GROW,				/* multiplicative increase */
	FBF_AIMD_SHRINK				/* additive decrease */
} FbfAimdAction;

typedef struct FbfAimdDecision
{
	FbfAimdAction action;
	int			nfilters;		/* new configuration (unchanged on HOLD) */
	int64_t		period;
	bool		capped;			/* wanted to grow, limited by a cap */
	const char *reason;			/* short English phrase for logs */
} FbfAimdDecision;

/*
 * One controller step for an FBF of nfilters filters refreshed every period,
 * whose estimated FPP is fpp, receiving `rate` elements per unit of time
 * (measured over the last complete period; negative if unknown).
 *
 * Grow: nfilters doubles (clamped to the filter and memory caps; capped is
 * set when that clamp bites), period shrinks by one step but never so far
 * that (nfilters' - 1) * period' < retention.
 * Shrink: one filter fewer and period one step longer, only if
 * (nfilters' - 1) * period' >= retention.  The caller must still check
 * fbf_drop_is_safe() before dropping a live filter, and may apply the
 * longer period first and drop the filter once that is safe.
 *
 * The estimate describes filters filled in the past; a change takes effect
 * only as new periods fill new filters.  So, when the rate is known, the
 * step also looks ahead at the steady-state estimate of a configuration at
 * that rate: between the increase threshold and the target itself, it
 * grows only if the current configuration would stay at or above the
 * threshold (old load still ageing out is no reason to grow again); past
 * the target it always grows; and it shrinks only if the smaller
 * configuration would stay well under the threshold (no shrinking into a
 * configuration that must grow back).
 */
extern FbfAimdDecision fbf_aimd_decide(const FbfAimdConfig *cfg, int nfilters,
									   int64_t period, double fpp, double rate);

/*
 * Elements per unit of time that arrived since a filter's birth, `elapsed`
 * ago, for a growth that cannot wait for complete periods: `pending_now`
 * waiting to be drained into the filters, and the `drained` ones put into
 * this filter since its birth, less the `pending_at_birth` that were
 * waiting then (they arrived before it, though drained into it), but
 * never less than none: an element that waited then and was dropped, not
 * drained (its transaction aborted), cancels no other.  So the estimate
 * is never below what waits now.  Over `min_elapsed` at least, where the
 * filter is younger (a refresh that rotates several filters in at once
 * makes each born then).  0 if nothing arrived.
 */
extern double fbf_rate_since_birth(uint64_t drained, int64_t pending_at_birth,
								   int64_t pending_now, int64_t elapsed,
								   int64_t min_elapsed);

#endif							/* FBF_AIMD_H */
