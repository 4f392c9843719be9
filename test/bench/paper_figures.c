/*-------------------------------------------------------------------------
 *
 * paper_figures.c
 *	  The experiments of Subramanyam et al. (UIUC 2015) on the pure FBF
 *	  core, with a simulated clock: one CSV per figure into a directory.
 *
 *	check_fpp.csv      simple / optimized / paired FPP against elements
 *	                   inserted (basic FBF, m = 6250, k = 5, t = 5 s)
 *	estimate_elems.csv estimated (shared-epoch and the paper's independent
 *	                   model) against measured FPP, same run
 *	estimate_m.csv     the same against m, 300 elements
 *	refresh_knob.csv   FPP against arrival rate for t in {5, 3, 2, 1} s
 *	                   (m = 25000, k = 5, 5000 elements, exponential ramp)
 *	filters_knob.csv   FPP against arrival rate for 3, 6, 12, 24 filters
 *	                   (t = 5 s, m = 6250, k = 5, 3000 elements, linear ramp)
 *	aimd.csv           the AIMD controller under a rising then falling
 *	                   load: estimate, measured FPP, filters, t over time
 *	retries.csv        counter error as retries grow: plain, FBF, a
 *	                   "recyclable" Bloom filter and a cuckoo window of
 *	                   the same memory
 *	bits.csv           bits per window element at measured FPP 1%, 0.1%,
 *	                   0.01%: FBF, one ideal Bloom filter, APBF (published,
 *	                   -1 where none), cuckoo window (planned, 8 kB pages)
 *
 * Usage: paper_figures <output-directory>
 *
 *-------------------------------------------------------------------------
 */
#define _POSIX_C_SOURCE 199309L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloom_bits.h"
#include "cwin_plan.h"
#include "cwin_window.h"
#include "fbf_aimd.h"
#include "fbf_core.h"
#include "fbf_hash.h"
#include "fbf_plan.h"

#include "bench_util.h"

static const char *outdir;

static FILE *
open_csv(const char *name, const char *header)
{
	char		path[1024];
	FILE	   *f;

	snprintf(path, sizeof(path), "%s/%s", outdir, name);
	f = fopen(path, "w");
	if (f == NULL)
	{
		perror(path);
		exit(1);
	}
	fprintf(f, "%s\n", header);
	return f;
}

static Fbf *
new_fbf(uint32_t nbits, int nhashes, int nfilters)
{
	Fbf		   *f = malloc(fbf_size(nbits, nfilters, 1));

	fbf_init(f, nbits, nhashes, nfilters, 1, 0, 0);
	return f;
}

static double
measured(const Fbf *f, FbfCheck check, int probes, uint64_t stream)
{
	int			hits = 0;
	int			i;

	for (i = 0; i < probes; i++)
	{
		FbfHash		h = bench_element(stream, (uint64_t) i);

		hits += fbf_contains(f, &h, check);
	}
	return (double) hits / probes;
}

/*
 * Basic FBF, m = 6250, k = 5, t = 5 s; 50 elements per second (a refresh
 * every 250); every 25 elements, FPP of each check over 200,000
 * never-inserted elements.
 */
static void
check_fpp_and_estimate(void)
{
	FILE	   *a = open_csv("check_fpp.csv", "elements,simple,optimized,paired");
	FILE	   *b = open_csv("estimate_elems.csv",
							 "elements,measured,estimate_shared,estimate_independent");
	Fbf		   *f = new_fbf(6250, 5, 3);
	int			i;

	for (i = 1; i <= 1000; i++)
	{
		FbfHash		h = bench_element(1, (uint64_t) i);

		if (i % 250 == 0)		/* 50 per second, a refresh every 5 s */
			fbf_refresh(f, i);
		fbf_add(f, &h, FBF_CHECK_OPTIMIZED);
		if (i % 25 == 0)
		{
			double		opt = measured(f, FBF_CHECK_OPTIMIZED, 200000, 99);

			fprintf(a, "%d,%.6f,%.6f,%.6f\n", i,
					measured(f, FBF_CHECK_SIMPLE, 200000, 99), opt,
					measured(f, FBF_CHECK_PAIRED, 200000, 99));
			fprintf(b, "%d,%.6f,%.6f,%.6f\n", i, opt,
					fbf_estimate_fpp_model(f, FBF_CHECK_OPTIMIZED, FBF_MODEL_SHARED),
					fbf_estimate_fpp_model(f, FBF_CHECK_OPTIMIZED, FBF_MODEL_INDEPENDENT));
		}
	}
	fclose(a);
	fclose(b);
	free(f);
}

static void
estimate_against_m(void)
{
	FILE	   *out = open_csv("estimate_m.csv",
							   "m,measured,estimate_shared,estimate_independent");
	uint32_t	m;

	for (m = 5000; m <= 30000; m += 2500)
	{
		Fbf		   *f = new_fbf(m, 5, 3);
		int			i;

		for (i = 0; i < 300; i++)
		{
			FbfHash		h = bench_element(2, (uint64_t) i);

			if (i == 100 || i == 200)
				fbf_refresh(f, i);
			fbf_add(f, &h, FBF_CHECK_OPTIMIZED);
		}
		fprintf(out, "%u,%.6f,%.6f,%.6f\n", m,
				measured(f, FBF_CHECK_OPTIMIZED, 200000, 98),
				fbf_estimate_fpp_model(f, FBF_CHECK_OPTIMIZED, FBF_MODEL_SHARED),
				fbf_estimate_fpp_model(f, FBF_CHECK_OPTIMIZED, FBF_MODEL_INDEPENDENT));
		free(f);
	}
	fclose(out);
}

/*
 * Elements arriving at a rate rising with time; FPP sampled against the
 * current rate.  rate(s) is elements per second at simulated second s.
 */
static void
ramp(FILE *out, const char *label, uint32_t m, int nfilters, double period,
	 int total, double (*rate) (double), uint64_t stream, int probes)
{
	Fbf		   *f = new_fbf(m, 5, nfilters);
	double		now = 0;
	double		last_refresh = 0;
	double		next_sample = 0;
	int			i;

	for (i = 0; i < total; i++)
	{
		FbfHash		h = bench_element(stream, (uint64_t) i);
		double		r = rate(now);

		now += 1.0 / r;
		while (now - last_refresh >= period)
		{
			last_refresh += period;
			fbf_refresh(f, (int64_t) last_refresh);
		}
		fbf_add(f, &h, FBF_CHECK_OPTIMIZED);
		if (r >= next_sample)
		{
			fprintf(out, "%s,%.2f,%.8f\n", label, r,
					measured(f, FBF_CHECK_OPTIMIZED, probes, stream + 1000));
			next_sample = r * 1.15;
		}
	}
	free(f);
}

static double
exponential_rate(double s)
{
	/* 1/s rising tenfold every 25 s, up to 1000/s */
	double		r = pow(10.0, s / 25.0);

	return r > 1000 ? 1000 : r;
}

static double
linear_rate(double s)
{
	return 1.0 + 4.0 * s;		/* +4/s per second */
}

static void
knobs(void)
{
	FILE	   *out = open_csv("refresh_knob.csv", "period_s,rate,fpp");
	double		periods[] = {5, 3, 2, 1};
	int			nfilters[] = {3, 6, 12, 24};
	char		label[32];
	int			i;

	for (i = 0; i < 4; i++)
	{
		snprintf(label, sizeof(label), "%g", periods[i]);
		/* 2,000,000 probes: FPPs near 100/s are around 1e-6 */
		ramp(out, label, 25000, 3, periods[i], 5000, exponential_rate, 10 + i, 2000000);
	}
	fclose(out);

	out = open_csv("filters_knob.csv", "filters,rate,fpp");
	for (i = 0; i < 4; i++)
	{
		snprintf(label, sizeof(label), "%d", nfilters[i]);
		ramp(out, label, 6250, nfilters[i], 5, 3000, linear_rate, 20 + i, 100000);
	}
	fclose(out);
}

/*
 * The controller: starts with 3 filters, m = 6250, k = 5, t = 11 s (so the
 * window covers a 22 s retention), target 1%; the load rises from 1/s to
 * 120/s over 300 s and falls back over the next 300 s.  One AIMD step per
 * simulated second; timed refreshes that never drop an element younger
 * than the retention.
 */
static void
aimd_trace(void)
{
	FILE	   *out = open_csv("aimd.csv", "second,rate,filters,period_s,estimate,measured,target");
	FbfAimdConfig cfg;
	Fbf		   *f = new_fbf(6250, 5, 3);
	int64_t		period = 11000;	/* ms */
	int64_t		now = 0;
	int64_t		last_refresh = 0;
	double		carry = 0;
	uint64_t	next = 0;
	int			second;

	cfg.target_fpp = 0.01;
	cfg.increase_at = 0.9;
	cfg.decrease_at = 0.1;
	cfg.retention = 22000;
	cfg.period_step = 1000;
	cfg.period_min = 1000;
	cfg.period_max = 11000;
	cfg.min_filters = 3;
	cfg.max_filters = 64;
	cfg.nbits = 6250;
	cfg.nparts = 1;
	cfg.nhashes = 5;
	cfg.max_bytes = fbf_size(6250, 64, 1);

	for (second = 0; second < 600; second++)
	{
		double		rate = second < 300 ? 1 + 119.0 * second / 300 :
			1 + 119.0 * (600 - second) / 300;
		int			n;
		FbfAimdDecision d;

		carry += rate;
		n = (int) carry;
		carry -= n;
		while (n-- > 0)
		{
			FbfHash		h = bench_element(30, next++);

			fbf_add(f, &h, FBF_CHECK_OPTIMIZED);
		}
		now += 1000;
		if (now - last_refresh >= period && fbf_refresh_within(f, now, cfg.retention))
			last_refresh = now;

		d = fbf_aimd_decide(&cfg, f->nfilters, period,
							fbf_estimate_fpp(f, FBF_CHECK_OPTIMIZED), rate / 1000.0);
		if (d.action != FBF_AIMD_HOLD)
		{
			int			target = d.nfilters;

			if (target < f->nfilters && f->nlive == f->nfilters &&
				!fbf_drop_is_safe(f, now, cfg.retention))
				target = f->nfilters;	/* lengthen now, drop later */
			if (target != f->nfilters)
			{
				Fbf		   *g = malloc(fbf_size(f->nbits, target, 1));

				fbf_resize(g, f, target);
				free(f);
				f = g;
			}
			period = d.period;
		}
		if (second % 5 == 0)
			fprintf(out, "%d,%.1f,%d,%.1f,%.6f,%.6f,%.3f\n", second, rate,
					f->nfilters, period / 1000.0,
					fbf_estimate_fpp(f, FBF_CHECK_OPTIMIZED),
					measured(f, FBF_CHECK_OPTIMIZED, 20000, 31), cfg.target_fpp);
	}
	fclose(out);
	free(f);
}

typedef struct Arrival
{
	double		at;				/* seconds */
	int			op;
} Arrival;

static int
cmp_arrival(const void *x, const void *y)
{
	double		a = ((const Arrival *) x)->at;
	double		b = ((const Arrival *) y)->at;

	return a < b ? -1 : a > b;
}

static double
next_uniform(uint64_t *s)
{
	*s = *s * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
	return (double) (*s >> 11) / 9007199254740992.0;
}

/*
 * Counting with retries.  20,000 operations at 100/s; each is retried with
 * probability p (and its retries again with p, at most 5 times), 1 to 5 s
 * later, so every retry falls inside the 30 s retention.  Plain
 * counts every arrival; the FBF counter (retention 30 s, sized for 1% at
 * 100/s), a recyclable Bloom filter of the same total memory (cleared
 * whenever its estimate passes 1%) and a cuckoo window of the same memory
 * (one block of the FBF's bytes, the widest fingerprint it holds, 16 live
 * epochs of 2 s) count an arrival only if their filter says it is new.
 * Error = (counted - operations) / operations.
 */
static void
retries(void)
{
	FILE	   *out = open_csv("retries.csv", "retry_probability,plain_error,fbf_error,recyclable_error,cwin_error");
	double		probs[] = {0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5};
	FbfPlan		plan;
	const char *why;
	int			pi;

	CwinPlan	cplan;
	size_t		fbf_bytes;

	fbf_plan(30, 0.01, 100, FBF_CHECK_OPTIMIZED, FBF_MAX_FILTERS, &plan, &why);
	fbf_bytes = fbf_flat_size(plan.nbits, plan.nfilters, 1);
	if (!cwin_plan_bytes(30, 100, fbf_bytes, fbf_bytes, &cplan, &why))
	{
		fprintf(stderr, "cuckoo window: %s\n", why);
		exit(1);
	}

	for (pi = 0; pi < 7; pi++)
	{
		int			nops = 20000;
		int			cap = nops * 16;
		Arrival    *arr = malloc(sizeof(Arrival) * cap);
		int			n = 0;
		uint64_t	rng = 12345 + pi;
		Fbf		   *f = new_fbf(plan.nbits, plan.nhashes, plan.nfilters);
		uint32_t	rbits = plan.nbits * plan.nfilters;
		int			rk = (int) lround(log(2.0) * rbits / (100.0 * 30));
		uint64_t   *rwords = calloc((rbits + 63) / 64, 8);
		uint64_t	rcount = 0;
		int64_t		last_refresh = 0;
		int64_t		period_ms = (int64_t) (plan.period * 1000);
		long		plain = 0,
					fbf_counted = 0,
					rec_counted = 0,
					cwin_counted = 0;
		CwinWindow	w;
		int64_t		cwin_refreshed = 0;
		int64_t		cwin_period_ms = (int64_t) (cplan.period * 1000);
		int			i;

		if (!cwin_window_init(&w, cplan.fp_bits, 1, cplan.nlive, fbf_bytes, &why))
		{
			fprintf(stderr, "cuckoo window: %s\n", why);
			exit(1);
		}

		for (i = 0; i < nops; i++)
		{
			double		t = i / 100.0;
			int			tries = 0;

			arr[n].at = t;
			arr[n++].op = i;

			while (n < cap && tries++ < 5 && next_uniform(&rng) < probs[pi])
			{
				t += 1 + 4 * next_uniform(&rng);
				arr[n].at = t;
				arr[n++].op = i;
			}
		}
		qsort(arr, n, sizeof(Arrival), cmp_arrival);

		for (i = 0; i < n; i++)
		{
			int64_t		now = (int64_t) (arr[i].at * 1000);
			FbfHash		h = bench_element(40, (uint64_t) arr[i].op);
			uint32_t	probes[FBF_MAX_HASHES];

			plain++;
			while (now - last_refresh >= period_ms &&
				   fbf_refresh_within(f, now, 30000))
				last_refresh = now;
			fbf_counted += fbf_add(f, &h, FBF_CHECK_OPTIMIZED);
			while (now - cwin_refreshed >= cwin_period_ms)
			{
				cwin_window_refresh(&w);
				cwin_refreshed += cwin_period_ms;
			}
			cwin_counted += cwin_window_add(&w, &h);

			fbf_probes(&h, rk, rbits, probes);
			if (!bloom_test(rwords, probes, rk))
			{
				bloom_set(rwords, probes, rk);
				rcount++;
				rec_counted++;
				if (bloom_fpp(rbits, rk, rcount) > 0.01)
				{
					memset(rwords, 0, ((rbits + 63) / 64) * 8);
					rcount = 0;
				}
			}
		}
		fprintf(out, "%.2f,%.6f,%.6f,%.6f,%.6f\n", probs[pi],
				(double) (plain - nops) / nops,
				(double) (fbf_counted - nops) / nops,
				(double) (rec_counted - nops) / nops,
				(double) (cwin_counted - nops) / nops);
		cwin_window_free(&w);
		free(arr);
		free(f);
		free(rwords);
	}
	fclose(out);
}

/*
 * Bits per window element: the plan for 60 s at 1000/s, run at that rate
 * for three windows, FPP measured; beside an ideal Bloom filter holding
 * exactly one window (1.44 log2(1/p)), the APBF's published figures, and
 * the cuckoo window's plan (cwin_plan, 8 kB pages) run alike, its FPP
 * measured through the last retention (its load rises within an epoch).
 */
static void
bits_per_element(void)
{
	FILE	   *out = open_csv("bits.csv", "target,fbf_bits,fbf_measured_fpp,ideal_bloom_bits,apbf_bits,cwin_bits,cwin_measured_fpp");
	double		targets[] = {0.01, 0.001, 0.0001};
	double		apbf[] = {22.8, 33.6, -1};
	int			t;

	for (t = 0; t < 3; t++)
	{
		FbfPlan		plan;
		const char *why;
		Fbf		   *f;
		int			per_period;
		int			p,
					i;

		fbf_plan(60, targets[t], 1000, FBF_CHECK_OPTIMIZED, FBF_MAX_FILTERS, &plan, &why);
		f = new_fbf(plan.nbits, plan.nhashes, plan.nfilters);
		per_period = (int) ceil(1000 * plan.period);
		for (p = 0; p < 3 * plan.nfilters; p++)
		{
			for (i = 0; i < per_period; i++)
			{
				FbfHash		h = bench_element(50 + t, (uint64_t) p * per_period + i);

				fbf_add(f, &h, FBF_CHECK_OPTIMIZED);
			}
			if (p + 1 < 3 * plan.nfilters)
				fbf_refresh(f, p);
		}
		fprintf(out, "%g,%.2f,%.6f,%.2f,%.1f,", targets[t],
				(double) plan.nbits * plan.nfilters / 60000.0,
				measured(f, FBF_CHECK_OPTIMIZED, 1000000, 60 + t),
				1.4427 * log2(1.0 / targets[t]), apbf[t]);
		{
			CwinPlan	cplan;
			CwinWindow	w;
			uint64_t	hits = 0,
						probes = 0;
			int			per_epoch;

			if (!cwin_plan(60, targets[t], 1000, CWIN_PAGE_SPACE, &cplan, &why) ||
				!cwin_window_init(&w, cplan.fp_bits, cplan.nparts, cplan.nlive,
								  CWIN_PAGE_SPACE, &why))
			{
				fprintf(stderr, "cuckoo window: %s\n", why);
				exit(1);
			}
			per_epoch = (int) ceil(1000 * cplan.period);
			for (p = 0; p < 3 * cplan.nlive; p++)
			{
				for (i = 0; i < per_epoch; i++)
				{
					FbfHash		h = bench_element(70 + t, (uint64_t) p * per_epoch + i);

					cwin_window_add(&w, &h);
					if (p >= 2 * cplan.nlive && i % 100 == 99)
					{
						for (int j = 0; j < 2000; j++)
						{
							FbfHash		x = bench_element(80 + t, probes++);

							hits += cwin_window_contains(&w, &x);
						}
					}
				}
				cwin_window_refresh(&w);
			}
			fprintf(out, "%.2f,%.6f\n",
					(double) cplan.nparts * CWIN_PAGE_SPACE * 8 / 60000.0,
					(double) hits / probes);
			cwin_window_free(&w);
		}
		free(f);
	}
	fclose(out);
}

int
main(int argc, char **argv)
{
	if (argc != 2)
	{
		fprintf(stderr, "usage: %s output-directory\n", argv[0]);
		return 1;
	}
	outdir = argv[1];
	check_fpp_and_estimate();
	estimate_against_m();
	knobs();
	aimd_trace();
	retries();
	bits_per_element();
	return 0;
}
