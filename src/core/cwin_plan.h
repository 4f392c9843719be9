/*-------------------------------------------------------------------------
 *
 * cwin_plan.h
 *	  Planning a cuckoo window for a workload: its fingerprint width and
 *	  partition count, for a target false-positive rate (cwin_plan) or
 *	  within a memory budget (cwin_plan_bytes).  A planned window keeps
 *	  CWIN_PLAN_LIVE epochs; its blocks are cwin_block.h's.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CWIN_PLAN_H
#define CWIN_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cwin_block.h"

/* live epochs of a planned window: the most the 4-bit tags allow */
#define CWIN_PLAN_LIVE		16

/*
 * How full a planned block may be at the end of an epoch, when it holds
 * the most.  Blocks hold a Poisson share of the operations (mean L, spread
 * sqrt(L)), and 4-slot cuckoo buckets take inserts until about 97% full:
 * a plan keeps L + 3 sqrt(L) within CWIN_PLAN_LOAD of the slots, so that
 * the fullest of a few hundred blocks still has room.
 */
#define CWIN_PLAN_LOAD		0.97
#define CWIN_PLAN_SPREAD	3.0

/* A window's shape for a workload. */
typedef struct CwinPlan
{
	uint32_t	fp_bits;
	uint32_t	nparts;
	int			nlive;			/* N + 1 */
	double		period;			/* retention / N, the caller's unit */
	double		estimated_fpp;
	uint64_t	bytes;			/* the blocks' bytes: nparts * space */
} CwinPlan;

/*
 * The smallest window (fewest bytes, trying each fingerprint width) whose
 * estimate meets `target` for `rate` operations per unit over `retention`
 * units, with blocks of `space` bytes.  false and *why if none does.
 */
extern bool cwin_plan(double retention, double target, double rate,
					  size_t space, CwinPlan *plan, const char **why);

/*
 * The window of at most `bytes` (in blocks of `space`) with the lowest
 * estimate for the workload: the widest fingerprint whose blocks still
 * hold the live operations as a plan's must (CWIN_PLAN_LOAD).
 */
extern bool cwin_plan_bytes(double retention, double rate, uint64_t bytes,
							size_t space, CwinPlan *plan, const char **why);

#endif							/* CWIN_PLAN_H */
