/*-------------------------------------------------------------------------
 *
 * bench_fbf.c
 *	  Micro-benchmark of the pure FBF core against a single Bloom filter of
 *	  the same total memory, measured in the same run.
 *
 * For each workload (retention R seconds at r operations per second, target
 * FPP), fbf_plan() sizes an FBF; a single Bloom filter gets exactly the same
 * number of bits, with its optimal k for the R * r elements of a window.
 * Both are brought to steady state (the FBF through 3 full windows of
 * refreshes; the Bloom filter holding one window's elements, which is the
 * best a filter that cannot forget can do), then timed:
 *	- ns per insert (FBF: check-then-insert, as a dedup does; Bloom: set)
 *	- ns per negative check (elements never inserted)
 * and measured:
 *	- FPP over 1,000,000 non-members
 *	- bits per window element (total bits / (R * r))
 *	- memory bits per window element: the whole in-memory Fbf (fbf_size:
 *	  header, birth times, counts and bits) * 8 / (R * r)
 *
 * Negative checks are timed in ROUNDS rounds of 1,000,000 each and the
 * median round is reported (the minimum too, on stderr), so that a busy
 * machine disturbs the figure less; inserts are timed once, over the three
 * windows of the warm-up.
 *
 * Usage: bench_fbf [csv-file]
 *
 *-------------------------------------------------------------------------
 */
#define _POSIX_C_SOURCE 199309L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bloom_bits.h"
#include "fbf_aimd.h"
#include "fbf_core.h"
#include "fbf_hash.h"
#include "fbf_plan.h"

#include "bench_util.h"

#define NPROBE 1000000
#define ROUNDS 9

typedef struct Bloom
{
	uint32_t	nbits;
	int			nhashes;
	uint64_t   *words;
} Bloom;

static volatile uint64_t sink;

static void
run(FILE *csv, double retention, double rate, double target)
{
	FbfPlan		plan;
	const char *why;
	Fbf		   *f;
	Bloom		b;
	uint64_t	window = (uint64_t) (retention * rate);
	uint64_t	per_period;
	uint64_t	total_bits;
	uint64_t	i;
	int			p;
	int			periods;
	double		t0,
				rounds[ROUNDS],
				fbf_neg_min,
				mem_bits_per_elem,
				fbf_insert_ns,
				bloom_insert_ns,
				fbf_neg_ns,
				bloom_neg_ns;
	uint64_t	fbf_fp = 0,
				bloom_fp = 0,
				next = 0;
	int			r;
	FbfHash    *probe;

	if (!fbf_plan(retention, target, rate, FBF_CHECK_DEFAULT, FBF_MAX_FILTERS, &plan, &why))
	{
		fprintf(stderr, "plan failed: %s\n", why);
		exit(1);
	}
	f = malloc(fbf_size(plan.nbits, plan.nfilters, plan.nparts));
	fbf_init(f, plan.nbits, plan.nhashes, plan.nfilters, plan.nparts, 0, 0);
	per_period = (uint64_t) ceil(rate * plan.period);
	total_bits = (uint64_t) plan.nbits * plan.nfilters;

	b.nbits = (uint32_t) total_bits;
	b.nhashes = (int) lround(log(2.0) * (double) total_bits / (double) window);
	if (b.nhashes < 1)
		b.nhashes = 1;
	if (b.nhashes > FBF_MAX_HASHES)
		b.nhashes = FBF_MAX_HASHES;
	b.words = calloc((total_bits + 63) / 64, 8);

	/* FBF: three windows of periods, timing the inserts */
	periods = 3 * plan.nfilters;
	t0 = bench_now_ns();
	for (p = 0; p < periods; p++)
	{
		for (i = 0; i < per_period; i++)
		{
			FbfHash		h = bench_element(1, next++);

			sink += fbf_add(f, &h, FBF_CHECK_DEFAULT);
		}
		if (p + 1 < periods)
			fbf_refresh(f, p);
	}
	fbf_insert_ns = (bench_now_ns() - t0) / (double) next;

	/* Bloom: one window's elements */
	t0 = bench_now_ns();
	for (i = 0; i < window; i++)
	{
		FbfHash		h = bench_element(2, i);
		uint32_t	probes[FBF_MAX_HASHES];

		fbf_probes(&h, b.nhashes, b.nbits, probes);
		bloom_set(b.words, probes, b.nhashes);
	}
	bloom_insert_ns = (bench_now_ns() - t0) / (double) window;

	/* negative checks, hashing included, on precomputed-free probes */
	probe = malloc(sizeof(FbfHash) * NPROBE);
	for (i = 0; i < NPROBE; i++)
		probe[i] = bench_element(3, i);

	for (r = 0; r < ROUNDS; r++)
	{
		uint64_t	fp = 0;

		t0 = bench_now_ns();
		for (i = 0; i < NPROBE; i++)
			fp += fbf_contains(f, &probe[i], FBF_CHECK_DEFAULT);
		rounds[r] = (bench_now_ns() - t0) / NPROBE;
		fbf_fp = fp;
	}
	qsort(rounds, ROUNDS, sizeof(double), bench_cmp_double);
	fbf_neg_ns = rounds[ROUNDS / 2];
	fbf_neg_min = rounds[0];
	mem_bits_per_elem = 8.0 * (double) fbf_size(plan.nbits, plan.nfilters, plan.nparts) /
		(double) window;

	t0 = bench_now_ns();
	for (i = 0; i < NPROBE; i++)
	{
		uint32_t	probes[FBF_MAX_HASHES];

		fbf_probes(&probe[i], b.nhashes, b.nbits, probes);
		bloom_fp += bloom_test(b.words, probes, b.nhashes);
	}
	bloom_neg_ns = (bench_now_ns() - t0) / NPROBE;

	printf("%8.0f s %9.0f/s %7.4f | %3d %5d %2d %9.1f | %6.1f %6.1f %9.5f %8.5f | %6.1f %6.1f %9.5f | %6.2f %6.2f\n",
		   retention, rate, target, plan.nfilters, plan.nbits / 1000, plan.nhashes,
		   total_bits / 8.0 / 1024.0,
		   fbf_insert_ns, fbf_neg_ns, (double) fbf_fp / NPROBE,
		   fbf_estimate_fpp(f, FBF_CHECK_DEFAULT),
		   bloom_insert_ns, bloom_neg_ns, (double) bloom_fp / NPROBE,
		   (double) total_bits / (double) window, mem_bits_per_elem);
	fflush(stdout);
	fprintf(stderr, "  negative check, %d rounds: median %.1f ns, min %.1f ns, max %.1f ns\n",
			ROUNDS, fbf_neg_ns, fbf_neg_min, rounds[ROUNDS - 1]);
	if (csv)
		fprintf(csv, "%g,%g,%g,%d,%u,%d,%llu,%.2f,%.2f,%.6f,%.6f,%.2f,%.2f,%.6f,%.3f,%.3f\n",
				retention, rate, target, plan.nfilters, plan.nbits, plan.nhashes,
				(unsigned long long) total_bits, fbf_insert_ns, fbf_neg_ns,
				(double) fbf_fp / NPROBE, fbf_estimate_fpp(f, FBF_CHECK_DEFAULT),
				bloom_insert_ns, bloom_neg_ns, (double) bloom_fp / NPROBE,
				(double) total_bits / (double) window, mem_bits_per_elem);
	free(probe);
	free(b.words);
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
		{300, 10000, 0.001},
	};
	size_t		w;

	if (argc > 1 && (csv = fopen(argv[1], "w")) == NULL)
	{
		perror(argv[1]);
		return 1;
	}
	if (csv)
		fprintf(csv, "retention_s,rate,target_fpp,nfilters,nbits,nhashes,total_bits,"
				"fbf_insert_ns,fbf_negative_ns,fbf_measured_fpp,fbf_estimated_fpp,"
				"bloom_insert_ns,bloom_negative_ns,bloom_measured_fpp,bits_per_window_element,"
				"memory_bits_per_window_element\n");

	printf("workload                     | FBF (planned)                | FBF (neg ns: median)              | one Bloom filter, same bits | bits per window\n");
	printf("retention     rate   target  |   n m(kbit) k   KiB total  | ins ns neg ns  measured estimated | ins ns neg ns  measured     | elem  memory\n");
	for (w = 0; w < sizeof(workloads) / sizeof(workloads[0]); w++)
		run(csv, workloads[w][0], workloads[w][1], workloads[w][2]);
	if (csv)
		fclose(csv);
	return 0;
}
