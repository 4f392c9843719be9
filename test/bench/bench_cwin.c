/*-------------------------------------------------------------------------
 *
 * bench_cwin.c
 *	  The cuckoo window's pure core against the FBF's, same workloads,
 *	  same run.
 *
 * For each workload (retention R seconds at r operations per second,
 * target FPP), fbf_plan() sizes an FBF, and three cuckoo windows run
 * beside it:
 *	- "same memory": the FBF's bytes in 8 kB pages (cwin_plan_bytes), the
 *	  widest fingerprint they hold: how far below the FBF's false
 *	  positives the cuckoo window gets in the same memory;
 *	- "planned": cwin_plan() for the target;
 *	- "planned-2%", "-4%": the planned fingerprint in 2% and 4% fewer
 *	  pages: whether inserts then have to wait (the plan's margin).  A
 *	  wait makes the window split (cwin_window_wants_split), so such a row
 *	  ends with twice the pages; its bits are those at the end.
 * Each runs three retentions at its rate (adds: a lookup, then an insert
 * if new), refreshing every period, the FBF alike.  Then:
 *	- FPP: non-members probed through the last retention, after each
 *	  epoch's inserts and half-way through (the load rises within an
 *	  epoch);
 *	- bits per window element: total bytes * 8 / (R * r);
 *	- ns per negative check (hashing excluded, as bench_fbf): ROUNDS
 *	  rounds alternating FBF and cuckoo over the same probes, medians;
 *	- ns per add over the three retentions;
 *	- inserts that had to wait for room (must be 0 for a usable plan).
 *
 * Usage: bench_cwin [csv-file]
 *
 *-------------------------------------------------------------------------
 */
#define _POSIX_C_SOURCE 199309L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cwin_plan.h"
#include "cwin_window.h"
#include "fbf_aimd.h"
#include "fbf_core.h"
#include "fbf_hash.h"

#include "bench_util.h"

#define NTIME		1000000
#define ROUNDS		7

static volatile uint64_t sink;

typedef struct Result
{
	double		bits;			/* per window element */
	double		fpp;
	double		estimate;
	double		add_ns;
	uint64_t	waits;
	uint64_t	probes;
} Result;

/*
 * Run a cuckoo window for three retentions at `rate`; probe non-members
 * (stream `probe_stream`) `per_epoch_probes` times twice per epoch of the
 * last retention.
 */
static Result
run_cuckoo(CwinWindow *w, double retention, double rate, double period,
		   uint64_t per_epoch_probes, uint64_t stream)
{
	Result		r = {0};
	uint64_t	per_epoch = (uint64_t) llround(rate * period);
	int			nepochs = 3 * w->epochs.nlive;
	uint64_t	next = 0,
				fp = 0,
				probe = 0;
	int			nest = 0;
	double		t0 = bench_now_ns(),
				spent = 0;

	for (int e = 0; e < nepochs; e++)
	{
		bool		measure = e >= nepochs - w->epochs.nlive;

		for (uint64_t i = 0; i < per_epoch; i++)
		{
			FbfHash		h = bench_element(stream, next++);

			sink += cwin_window_add(w, &h);
			if (measure && (i == per_epoch / 2 || i == per_epoch - 1))
			{
				double		p0 = bench_now_ns();

				for (uint64_t j = 0; j < per_epoch_probes; j++)
				{
					FbfHash		x = bench_element(stream + 1000, probe++);

					fp += cwin_window_contains(w, &x);
				}
				r.estimate += cwin_window_estimate_fpp(w);
				nest++;
				spent += bench_now_ns() - p0;
			}
		}
		cwin_window_refresh(w);
		if (cwin_window_wants_split(w))
		{
			const char *why;

			if (!cwin_window_split(w, 2, &why))
			{
				fprintf(stderr, "split: %s\n", why);
				exit(1);
			}
		}
	}
	r.add_ns = (bench_now_ns() - t0 - spent) / next;
	r.fpp = (double) fp / probe;
	r.probes = probe;
	r.estimate /= nest;
	r.waits = w->failed_inserts;
	r.bits = (double) w->nparts * CWIN_PAGE_SPACE * 8 / (retention * rate);
	return r;
}

static Result
run_fbf(Fbf *f, double retention, double rate, double period,
		uint64_t per_epoch_probes, uint64_t stream)
{
	Result		r = {0};
	uint64_t	per_epoch = (uint64_t) llround(rate * period);
	int			nepochs = 3 * f->nfilters;
	uint64_t	next = 0,
				fp = 0,
				probe = 0;
	int			nest = 0;
	double		t0 = bench_now_ns(),
				spent = 0;

	for (int e = 0; e < nepochs; e++)
	{
		bool		measure = e >= nepochs - f->nfilters + 1;

		for (uint64_t i = 0; i < per_epoch; i++)
		{
			FbfHash		h = bench_element(stream, next++);

			sink += fbf_add(f, &h, FBF_CHECK_DEFAULT);
			if (measure && (i == per_epoch / 2 || i == per_epoch - 1))
			{
				double		p0 = bench_now_ns();

				for (uint64_t j = 0; j < per_epoch_probes; j++)
				{
					FbfHash		x = bench_element(stream + 1000, probe++);

					fp += fbf_contains(f, &x, FBF_CHECK_DEFAULT);
				}
				r.estimate += fbf_estimate_fpp(f, FBF_CHECK_DEFAULT);
				nest++;
				spent += bench_now_ns() - p0;
			}
		}
		fbf_refresh(f, e);
	}
	r.add_ns = (bench_now_ns() - t0 - spent) / next;
	r.fpp = (double) fp / probe;
	r.probes = probe;
	r.estimate /= nest;
	r.bits = (double) fbf_flat_size(f->nbits, f->nfilters, f->nparts) * 8 / (retention * rate);
	return r;
}

/* interleaved negative checks: medians of ROUNDS rounds each */
static void
time_negatives(const Fbf *f, const CwinWindow *w, double *fbf_ns, double *cwin_ns)
{
	FbfHash    *probe = malloc(sizeof(FbfHash) * NTIME);
	double		a[ROUNDS],
				b[ROUNDS];

	for (uint64_t i = 0; i < NTIME; i++)
		probe[i] = bench_element(77, i);
	for (int r = 0; r < ROUNDS; r++)
	{
		double		t0 = bench_now_ns();
		uint64_t	hits = 0;

		for (uint64_t i = 0; i < NTIME; i++)
			hits += fbf_contains(f, &probe[i], FBF_CHECK_DEFAULT);
		a[r] = (bench_now_ns() - t0) / NTIME;
		t0 = bench_now_ns();
		for (uint64_t i = 0; i < NTIME; i++)
			hits += cwin_window_contains(w, &probe[i]);
		b[r] = (bench_now_ns() - t0) / NTIME;
		sink += hits;
	}
	qsort(a, ROUNDS, sizeof(double), bench_cmp_double);
	qsort(b, ROUNDS, sizeof(double), bench_cmp_double);
	*fbf_ns = a[ROUNDS / 2];
	*cwin_ns = b[ROUNDS / 2];
	free(probe);
}

static void
print_row(FILE *csv, const char *label, double retention, double rate,
		  double target, uint32_t fp_bits, uint32_t nparts, const Result *r,
		  double neg_ns)
{
	printf("%5.0f s %6.0f/s %7.4f%% | %-12s f %2u %5u pages | %6.2f bits | FPP %.3g (est %.3g, %llu probes) | add %5.1f ns neg %5.1f ns | waits %llu\n",
		   retention, rate, target * 100, label, fp_bits, nparts, r->bits, r->fpp,
		   r->estimate, (unsigned long long) r->probes, r->add_ns, neg_ns,
		   (unsigned long long) r->waits);
	fflush(stdout);
	if (csv)
		fprintf(csv, "%g,%g,%g,%s,%u,%u,%.3f,%.3g,%.3g,%llu,%.2f,%.2f,%llu\n",
				retention, rate, target, label, fp_bits, nparts, r->bits, r->fpp,
				r->estimate, (unsigned long long) r->probes, r->add_ns, neg_ns,
				(unsigned long long) r->waits);
}

static void
run(FILE *csv, double retention, double rate, double target)
{
	FbfPlan		fplan;
	CwinPlan	same,
				planned;
	const char *why;
	Fbf		   *f;
	CwinWindow	w;
	Result		rf,
				rc;
	double		fbf_neg,
				cwin_neg;
	uint64_t	fbf_bytes;
	uint32_t	tight_parts;

	if (!fbf_plan(retention, target, rate, FBF_CHECK_DEFAULT, FBF_MAX_FILTERS, &fplan, &why) ||
		!cwin_plan(retention, target, rate, CWIN_PAGE_SPACE, &planned, &why))
	{
		fprintf(stderr, "plan failed: %s\n", why);
		exit(1);
	}
	fbf_bytes = fbf_flat_size(fplan.nbits, fplan.nfilters, fplan.nparts);
	if (!cwin_plan_bytes(retention, rate, fbf_bytes, CWIN_PAGE_SPACE, &same, &why))
	{
		fprintf(stderr, "plan failed: %s\n", why);
		exit(1);
	}

	/* the FBF */
	f = malloc(fbf_size(fplan.nbits, fplan.nfilters, fplan.nparts));
	fbf_init(f, fplan.nbits, fplan.nhashes, fplan.nfilters, fplan.nparts, 0, 0);
	rf = run_fbf(f, retention, rate, fplan.period, 100000 / fplan.nfilters, 1);

	/* the cuckoo window in the FBF's memory: many probes to see 1e-6 */
	if (!cwin_window_init(&w, same.fp_bits, same.nparts, same.nlive, CWIN_PAGE_SPACE, &why))
	{
		fprintf(stderr, "%s\n", why);
		exit(1);
	}
	rc = run_cuckoo(&w, retention, rate, same.period, 20000000 / (2 * same.nlive), 2);
	time_negatives(f, &w, &fbf_neg, &cwin_neg);
	print_row(csv, "fbf", retention, rate, target, fplan.nhashes, fplan.nfilters, &rf, fbf_neg);
	print_row(csv, "same-memory", retention, rate, target, same.fp_bits, same.nparts, &rc, cwin_neg);
	cwin_window_free(&w);

	/* planned for the target */
	cwin_window_init(&w, planned.fp_bits, planned.nparts, planned.nlive, CWIN_PAGE_SPACE, &why);
	rc = run_cuckoo(&w, retention, rate, planned.period, 200000 / planned.nlive, 3);
	time_negatives(f, &w, &fbf_neg, &cwin_neg);
	print_row(csv, "planned", retention, rate, target, planned.fp_bits, planned.nparts, &rc, cwin_neg);
	cwin_window_free(&w);

	/* tighter: fewer pages than planned */
	for (int cut = 2; cut <= 4; cut += 2)
	{
		char		label[32];

		tight_parts = (uint32_t) floor(planned.nparts * (1 - cut / 100.0));
		if (tight_parts < 1 || tight_parts == planned.nparts)
			continue;
		snprintf(label, sizeof(label), "planned-%d%%", cut);
		cwin_window_init(&w, planned.fp_bits, tight_parts, planned.nlive, CWIN_PAGE_SPACE, &why);
		rc = run_cuckoo(&w, retention, rate, planned.period, 200000 / planned.nlive, 4);
		/* the pages at the end: a wait makes the window split */
		print_row(csv, label, retention, rate, target, planned.fp_bits, w.nparts, &rc, NAN);
		cwin_window_free(&w);
	}
	free(f);
}

int
main(int argc, char **argv)
{
	FILE	   *csv = NULL;
	static const double workloads[][3] = {
		{30, 100, 0.01},
		{30, 100, 0.001},
		{60, 10000, 0.01},
		{60, 10000, 0.001},
		{60, 10000, 0.0001},
	};

	if (argc > 1 && (csv = fopen(argv[1], "w")) == NULL)
	{
		perror(argv[1]);
		return 1;
	}
	if (csv)
		fprintf(csv, "retention_s,rate,target_fpp,structure,fp_bits_or_k,pages_or_filters,"
				"bits_per_window_element,measured_fpp,estimated_fpp,probes,add_ns,negative_ns,waits\n");
	for (size_t i = 0; i < sizeof(workloads) / sizeof(workloads[0]); i++)
		run(csv, workloads[i][0], workloads[i][1], workloads[i][2]);
	if (csv)
		fclose(csv);
	return 0;
}
