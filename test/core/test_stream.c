/*-------------------------------------------------------------------------
 *
 * test_stream.c
 *	  Standalone randomized property tests of the exact streams of the
 *	  pure core (src/core/fbf_stream.c) against an exact model.
 *
 * The model is the set of every (stream, seq) recorded, each with its
 * latest record time.  Two answers must never be given, whatever the
 * page, its size, the order of operations or the times:
 *
 *	- NEW for a seq recorded within the horizon (its record time is after
 *	  now - horizon): the window would count it twice;
 *	- SEEN for a seq never recorded: a false dismissal (streams are exact
 *	  where they answer).
 *
 * Operations that are aborted are never recorded (the window records only
 * committed operations, at drain), so a retry after an abort is simply a
 * check of a seq the model does not hold: NEW or ASK, never SEEN.
 *
 * Besides the invariants, in-order clients (up to 8 in flight, completed
 * in any order, some aborted and retried) on a page with a slot for each
 * must be answered exactly: no ASK once the page has known their streams
 * for a horizon.
 *
 * Usage: test_stream [seed]   (prints TAP; the seed makes failures
 * repeatable)
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fbf_stream.h"
#include "tap.h"
#include "test_stream_model.h"

static uint64_t seed = 20261127;

#include "test_stream_log.h"
#include "test_stream_snap.h"

/* Knobs of a random run. */
typedef struct RunShape
{
	uint32_t	nslots;
	int			nstreams;
	int			steps;
	int64_t		horizon;
	int64_t		tick;			/* time passes 0 .. tick per step */
	int64_t		skew;			/* record times up to this before now */
	int64_t		seq_range;		/* seqs of a stream start in 0 .. range */
	bool		since_late;		/* the page begins with since = now */
	bool		wild;			/* seqs near the extremes and big jumps */
	bool		resets;			/* loads (model only) then page resets */
} RunShape;

/*
 * Random operations over several streams: new seqs, retries of recorded
 * and of aborted ones, duplicates recorded twice, jumps across the
 * bitmap, time passing, loads and resets; every answer held to the
 * model, the whole model swept now and then.  A record replayed at once
 * (redo, or a drain after a crash) leaves the page byte for byte as it was.
 */
static void
random_run(const RunShape *shape, uint64_t *rng, Stats *st)
{
	Sim			sim;
	int64_t    *last = calloc((size_t) shape->nstreams, sizeof(int64_t));
	int64_t    *recent = calloc((size_t) shape->nstreams * 8, sizeof(int64_t));
	int			sweep_every = shape->nslots > 64 ? 10000 : 2500;

	sim_init(&sim, shape->nslots, shape->nstreams, shape->horizon,
			 shape->since_late ? T0 : FBF_STREAM_ALWAYS, rng);
	for (int s = 0; s < shape->nstreams; s++)
		last[s] = shape->wild ? wild_seq(rng) :
			(int64_t) test_rand_below(rng, (uint64_t) shape->seq_range + 1);

	for (int step = 0; step < shape->steps; step++)
	{
		int			s = (int) test_rand_below(rng, (uint64_t) shape->nstreams);
		uint64_t	what = test_rand_below(rng, 100);
		int64_t		q;
		FbfStreamAnswer a;

		sim.now += (int64_t) test_rand_below(rng, (uint64_t) shape->tick + 1);
		if (test_rand_below(rng, 500) == 0)
			sim.now += shape->horizon;	/* a quiet spell */

		if (what < 40)			/* ahead */
			q = sat_add(last[s], 1 + (int64_t) test_rand_below(rng, 4));
		else if (what < 60)		/* a retry, or late */
			q = sat_add(last[s], -(int64_t) test_rand_below(rng, 70));
		else if (what < 70)
			q = jump(rng, last[s]);
		else if (what < 75 && shape->wild)
			q = wild_seq(rng);
		else
			q = sat_add(last[s], (int64_t) test_rand_below(rng, 200) - 100);
		if (!shape->wild && (q < -1000 || q > INT64_C(1) << 50))
			q = last[s];

		a = sim_check(&sim, s, q);

		/*
		 * Applied and committed (recorded, at a time up to `skew` before
		 * now: drains of other chains), applied and aborted (nothing), or
		 * a duplicate recorded again whatever the answer.
		 */
		what = test_rand_below(rng, 100);
		if ((a != FBF_STREAM_SEEN && what < 65) || what < 5)
		{
			int64_t		t = sim.now -
				(int64_t) test_rand_below(rng, (uint64_t) shape->skew + 1);

			sim_record(&sim, s, q, t);
			if (test_rand_below(rng, 16) == 0)
			{
				/* replayed (a redo, a drain after a crash): nothing changes */
				size_t		bytes = sizeof(FbfStreamPage) +
					(size_t) sim.nslots * sizeof(FbfStreamSlot);
				FbfStreamPage *copy = malloc(bytes);

				memcpy(copy, sim.page, bytes);
				fbf_stream_record(sim.page, sim.ids[s], q, t, sim.horizon);
				CHECK(memcmp(copy, sim.page, bytes) == 0,
					  "recording stream %d seq %lld again changed the page", s,
					  (long long) q);
				free(copy);
			}
			recent[s * 8 + test_rand_below(rng, 8)] = q;
			if (q > last[s] || test_rand_below(rng, 8) == 0)
				last[s] = q;
			sim_page_ok(&sim, shape->nslots <= 64 || (step & 255) == 0);
		}

		/* a retry of a recent one of any stream */
		s = (int) test_rand_below(rng, (uint64_t) shape->nstreams);
		sim_check(&sim, s, recent[s * 8 + test_rand_below(rng, 8)]);

		if (shape->resets && test_rand_below(rng, 2000) == 0)
		{
			/* a load: operations the window gains and the streams don't */
			for (int k = 0; k < 20; k++)
			{
				int			ls = (int) test_rand_below(rng, (uint64_t) shape->nstreams);

				model_put(&sim, (uint32_t) ls, sat_add(last[ls], 1 + k), sim.now);
			}
			fbf_stream_page_reset(sim.page, sim.now);
			sim_page_ok(&sim, true);
		}

		if (step % sweep_every == sweep_every - 1)
			sim_sweep(&sim);
	}
	sim_sweep(&sim);
	sim_page_ok(&sim, true);
	stats_add(st, &sim);
	free(last);
	free(recent);
	sim_free(&sim);
}

static void
report(const char *what, const Stats *st)
{
	printf("#   %s: %llu records, NEW %llu SEEN %llu ASK %llu, evictions %llu, "
		   "expired %llu\n", what, (unsigned long long) st->records,
		   (unsigned long long) st->answers[0], (unsigned long long) st->answers[1],
		   (unsigned long long) st->answers[2], (unsigned long long) st->evictions,
		   (unsigned long long) st->expired);
}

/* runs of one shape over several seeds */
static void
random_runs(const char *what, RunShape shape, int runs, bool want_evictions)
{
	uint64_t	rng = seed ^ (uint64_t) shape.nslots * 7919 ^ (uint64_t) shape.steps;
	Stats		st;

	memset(&st, 0, sizeof(st));
	for (int r = 0; r < runs; r++)
		random_run(&shape, &rng, &st);
	report(what, &st);
	CHECK(st.double_counts == 0, "%llu double counts", (unsigned long long) st.double_counts);
	CHECK(st.false_dismissals == 0, "%llu false dismissals",
		  (unsigned long long) st.false_dismissals);
	CHECK(st.answers[FBF_STREAM_NEW] > 0 && st.answers[FBF_STREAM_SEEN] > 0,
		  "the runs answered both ways");
	if (want_evictions)
		CHECK(st.evictions > 0, "a page of few slots evicted");
}

static void
test_random_few_slots(void)
{
	RunShape	shape = {.nslots = 4, .nstreams = 12, .steps = 20000,
		.horizon = 5000, .tick = 20, .seq_range = 100};

	random_runs("4 slots, 12 streams", shape, 6, true);
	shape.tick = 400;			/* evictions that expire */
	random_runs("4 slots, 12 streams, time flying", shape, 4, true);
	shape.tick = 20;
	shape.nslots = 1;
	shape.nstreams = 3;
	random_runs("1 slot, 3 streams", shape, 4, true);
	shape.nslots = 16;
	shape.nstreams = 200;
	shape.tick = 2;
	random_runs("16 slots, 200 streams", shape, 4, true);
}

static void
test_random_roomy(void)
{
	RunShape	shape = {.nslots = fbf_stream_capacity(PAGE_CONTENT_BYTES),
		.nstreams = 60, .steps = 40000, .horizon = 20000, .tick = 10,
	.seq_range = 1000};

	random_runs("roomy page, 60 streams", shape, 3, false);
}

static void
test_random_wild(void)
{
	RunShape	shape = {.nslots = 6, .nstreams = 10, .steps = 20000,
		.horizon = 3000, .tick = 5, .wild = true};

	random_runs("wild seqs, 6 slots", shape, 6, true);
	shape.nslots = 64;
	random_runs("wild seqs, 64 slots", shape, 3, false);
}

static void
test_random_resets(void)
{
	RunShape	shape = {.nslots = 8, .nstreams = 16, .steps = 30000,
		.horizon = 4000, .tick = 10, .seq_range = 100, .since_late = true,
	.resets = true};

	random_runs("since late, loads and resets, 8 slots", shape, 5, true);
	shape.nslots = 64;
	random_runs("since late, loads and resets, 64 slots", shape, 3, false);
}

/*
 * Record times out of order: drains of different chains take `now` before
 * they lock the stream page, so one may record after another with an
 * earlier time.
 */
static void
test_random_skewed(void)
{
	RunShape	shape = {.nslots = 3, .nstreams = 8, .steps = 20000,
		.horizon = 500, .tick = 20, .skew = 40, .seq_range = 100,
	.resets = true};

	random_runs("skewed record times, 3 slots", shape, 10, true);
	shape.nslots = 16;
	shape.nstreams = 20;
	random_runs("skewed record times, 16 slots", shape, 5, true);
	shape.skew = 400;
	shape.tick = 40;
	random_runs("skewed record times by most of a horizon, 16 slots", shape, 5, true);
}

/*
 * A drain that took its time before another recorded and evicted the same
 * stream: stream X's seq 10 is recorded at 105 and evicted (evicted_until
 * 105), then a drain that read the clock at 100 records X's seq 5.  Its
 * new slot knows nothing of seq 10, so it must not answer NEW for it
 * before 105 + H, when seq 10 leaves the horizon; nor, after a load at
 * 105 (since = 105), for what the load brought.
 */
static void
test_late_record(void)
{
	uint64_t	rng = seed ^ 5;
	const int64_t H = 100;
	Sim			sim;

	/* streams 0 = X, 1, 2 */
	sim_init(&sim, 2, 3, H, FBF_STREAM_ALWAYS, &rng);
	sim.now = T0 + 200;
	sim_record(&sim, 0, 10, T0 + 105);
	sim_record(&sim, 1, 1, T0 + 106);
	sim_record(&sim, 2, 1, T0 + 107);	/* evicts X: evicted_until 105 */
	CHECK(sim.page->evicted_until == T0 + 105, "X evicted at 105");
	sim_record(&sim, 0, 5, T0 + 100);	/* the late drain */
	sim.now = T0 + 200;				/* 100 + H: X's seq 10 is 95 old */
	sim_check(&sim, 0, 10);
	sim.now = T0 + 204;
	sim_check(&sim, 0, 10);
	sim.now = T0 + 205;
	sim_check(&sim, 0, 10);		/* X's slot is a horizon old: asks */
	sim.now = T0 + 206;
	CHECK(sim_check(&sim, 0, 10) == FBF_STREAM_NEW,
		  "a horizon after the evictions (106): NEW");
	sim_free(&sim);

	/* the same through a load: since 105, a record read the clock at 100 */
	sim_init(&sim, 4, 1, H, FBF_STREAM_ALWAYS, &rng);
	model_put(&sim, 0, 10, T0 + 105);	/* loaded: the streams don't know */
	fbf_stream_page_reset(sim.page, T0 + 105);
	sim_record(&sim, 0, 5, T0 + 100);
	sim.now = T0 + 200;
	sim_check(&sim, 0, 10);
	sim_check(&sim, 0, 6);
	sim.now = T0 + 205;
	CHECK(sim_check(&sim, 0, 10) == FBF_STREAM_NEW, "a horizon after the load: NEW");
	sim_free(&sim);
}

/*
 * The bitmap's edges exactly: seq b recorded, then b + j; b is answered
 * SEEN while j <= W and ASK beyond (the filter holds it), whatever b
 * (extremes included); and the same downwards.
 */
static void
test_w_overflow(void)
{
	static const int64_t bases[] = {
		INT64_MIN, INT64_MIN + 1, -65, -1, 0, 1, INT64_MAX - 200,
		INT64_MAX - 65, INT64_MAX - 64, INT64_MAX - 1
	};
	static const uint64_t jumps[] = {
		1, 2, 62, 63, 64, 65, 66, 1000, UINT64_C(1) << 62, INT64_MAX,
		UINT64_C(1) << 63, UINT64_MAX
	};
	uint64_t	rng = seed ^ 64;

	for (size_t bi = 0; bi < sizeof(bases) / sizeof(bases[0]); bi++)
	{
		for (size_t ji = 0; ji < sizeof(jumps) / sizeof(jumps[0]); ji++)
		{
			for (int down = 0; down < 2; down++)
			{
				int64_t		b = bases[bi];
				uint64_t	j = jumps[ji];
				int64_t		hi;
				int64_t		lo;
				Sim			sim;

				/* INT64_MAX - b, computed without overflow */
				if (j > (uint64_t) INT64_MAX - (uint64_t) b)
					continue;
				hi = (int64_t) ((uint64_t) b + j);
				lo = b;

				sim_init(&sim, 2, 1, 1000, FBF_STREAM_ALWAYS, &rng);
				sim_record(&sim, 0, down ? hi : lo, sim.now);
				sim_record(&sim, 0, down ? lo : hi, sim.now);

				CHECK(sim_check(&sim, 0, hi) == FBF_STREAM_SEEN,
					  "b %lld j %llu: highest not SEEN", (long long) b,
					  (unsigned long long) j);
				CHECK(sim_check(&sim, 0, lo) ==
					  (j <= FBF_STREAM_W ? FBF_STREAM_SEEN : FBF_STREAM_ASK),
					  "b %lld j %llu down %d: lower answered %s", (long long) b,
					  (unsigned long long) j, down,
					  answer_name[fbf_stream_check(sim.page, sim.ids[0], lo,
												   sim.now, sim.horizon)]);
				if (hi < INT64_MAX)
					CHECK(sim_check(&sim, 0, hi + 1) == FBF_STREAM_NEW,
						  "above the highest not NEW");
				if (j > 1)
				{
					FbfStreamAnswer a = sim_check(&sim, 0, hi - 1);

					CHECK(a == FBF_STREAM_NEW, "just below the highest: %s",
						  answer_name[a]);
				}
				if (j > 1 && j <= FBF_STREAM_W)
					CHECK(sim_check(&sim, 0, lo + 1) == FBF_STREAM_NEW,
						  "just above the lower (in the bitmap): not NEW");
				if ((uint64_t) hi - (uint64_t) INT64_MIN > FBF_STREAM_W + 1)
					CHECK(sim_check(&sim, 0, hi - (FBF_STREAM_W + 1)) == FBF_STREAM_ASK,
						  "below the bitmap not ASK");
				if ((uint64_t) hi - (uint64_t) INT64_MIN > FBF_STREAM_W &&
					hi - FBF_STREAM_W != lo)
					CHECK(sim_check(&sim, 0, hi - FBF_STREAM_W) == FBF_STREAM_NEW,
						  "the bitmap's last seq not NEW");
				CHECK(sim.double_counts == 0 && sim.false_dismissals == 0,
					  "model broken");
				sim_free(&sim);
			}
		}
	}
}

/* One client numbering its operations in order. */
typedef struct Client
{
	int64_t		next;			/* the next new seq */
	int64_t		open[8];		/* in flight or aborted, awaiting retry */
	bool		aborted[8];
	int			nopen;
	int64_t		done[16];		/* the latest completed, a ring */
	int64_t		done_t[16];		/* when each was recorded */
	int			ndone;
	int64_t		exact_from;		/* when its answers must be exact */
	bool		has_slot;
} Client;

/* the lowest seq a client has in flight or awaiting retry */
static int64_t
oldest_open(const Client *k)
{
	int64_t		m = k->open[0];

	for (int i = 1; i < k->nopen; i++)
		if (k->open[i] < m)
			m = k->open[i];
	return m;
}

/*
 * In-order clients, up to 8 operations in flight each (a window of 8: the
 * next is at most 8 above the oldest not yet done), completed in any
 * order, 5% aborted and retried later, retries of completed ones: the
 * invariants always, and on a page with a slot for each client no ASK
 * once its stream is known (since a horizon old, or its slot a horizon
 * old).  Returns the ASKs counted where exactness was due.
 */
static uint64_t
in_order_run(uint32_t nslots, int nclients, int steps, int64_t since,
			 int64_t reset_at, uint64_t *rng, Stats *st)
{
	Sim			sim;
	Client	   *cl = calloc((size_t) nclients, sizeof(Client));
	int64_t		page_since = since;
	uint64_t	inexact = 0;
	bool		roomy = (uint32_t) nclients <= nslots;

	sim_init(&sim, nslots, nclients, 10000, since, rng);
	for (int c = 0; c < nclients; c++)
	{
		cl[c].next = (int64_t) test_rand_below(rng, 1000) - 500;
		if (c % 7 == 3)
			cl[c].next = INT64_MAX - 3000;	/* runs to the very top */
		cl[c].exact_from = since == FBF_STREAM_ALWAYS ? INT64_MIN : since + sim.horizon;
	}

	for (int step = 0; step < steps; step++)
	{
		int			c = (int) test_rand_below(rng, (uint64_t) nclients);
		Client	   *k = &cl[c];
		uint64_t	what = test_rand_below(rng, 100);
		bool		exact;
		FbfStreamAnswer a;

		sim.now += (int64_t) test_rand_below(rng, 3);
		if (reset_at != 0 && sim.now >= reset_at)
		{
			fbf_stream_page_reset(sim.page, sim.now);
			page_since = sim.now;
			for (int i = 0; i < nclients; i++)
			{
				cl[i].has_slot = false;
				cl[i].exact_from = page_since + sim.horizon;
			}
			reset_at = 0;
		}
		exact = roomy && sim.now >= k->exact_from;

		if (what < 45 && k->nopen < 8 && k->next < INT64_MAX &&
			(k->nopen == 0 || (uint64_t) k->next - (uint64_t) oldest_open(k) < 8))
		{
			/* a new operation */
			int64_t		q = k->next++;

			a = sim_check(&sim, c, q);
			CHECK(!exact || a == FBF_STREAM_NEW, "client %d new seq %lld: %s",
				  c, (long long) q, answer_name[a]);
			inexact += exact && a != FBF_STREAM_NEW;
			k->aborted[k->nopen] = false;
			k->open[k->nopen++] = q;
		}
		else if (what < 85 && k->nopen > 0)
		{
			/* one in flight completes (any of them) or an aborted retries */
			int			i = (int) test_rand_below(rng, (uint64_t) k->nopen);
			int64_t		q = k->open[i];

			if (k->aborted[i])
			{
				a = sim_check(&sim, c, q);
				CHECK(!exact || a == FBF_STREAM_NEW,
					  "client %d retry after abort %lld: %s", c, (long long) q,
					  answer_name[a]);
				inexact += exact && a != FBF_STREAM_NEW;
				k->aborted[i] = false;
			}
			else if (test_rand_below(rng, 20) == 0)
				k->aborted[i] = true;	/* rolled back: never recorded */
			else
			{
				sim_record(&sim, c, q, sim.now);
				if (!k->has_slot)
				{
					/* a slot made before the page knew enough: born now */
					k->has_slot = true;
					if (page_since != FBF_STREAM_ALWAYS &&
						sim.now - page_since < sim.horizon)
						k->exact_from = sim.now + sim.horizon;
				}
				k->done_t[k->ndone % 16] = sim.now;
				k->done[k->ndone++ % 16] = q;
				k->open[i] = k->open[--k->nopen];
				k->aborted[i] = k->aborted[k->nopen];
				sim_page_ok(&sim, (step & 1023) == 0);
			}
		}
		else if (k->ndone > 0)
		{
			/* a retry of a completed one within the bitmap */
			int			n = k->ndone < 16 ? k->ndone : 16;
			int			i = (int) test_rand_below(rng, (uint64_t) n);
			int64_t		q = k->done[i];

			a = sim_check(&sim, c, q);
			/* the page knows it unless it was reset since */
			if ((uint64_t) k->next - (uint64_t) q <= FBF_STREAM_W &&
				(page_since == FBF_STREAM_ALWAYS || k->done_t[i] >= page_since))
			{
				CHECK(!roomy || a == FBF_STREAM_SEEN,
					  "client %d retry of completed %lld: %s", c,
					  (long long) q, answer_name[a]);
				inexact += roomy && a != FBF_STREAM_SEEN;
			}
		}
		if (step % 20000 == 19999)
			sim_sweep(&sim);
	}
	sim_sweep(&sim);
	sim_page_ok(&sim, true);
	stats_add(st, &sim);
	if (roomy)
		CHECK(sim.page->evictions == 0, "a roomy page evicted");
	free(cl);
	sim_free(&sim);
	return inexact;
}

static void
test_in_order_exact(void)
{
	uint64_t	rng = seed ^ 8;
	uint32_t	cap = fbf_stream_capacity(PAGE_CONTENT_BYTES);
	uint64_t	inexact = 0;
	Stats		st;

	memset(&st, 0, sizeof(st));
	/* a new window: exact from the start */
	inexact += in_order_run(cap, 50, 60000, FBF_STREAM_ALWAYS, 0, &rng, &st);
	inexact += in_order_run(cap, (int) cap, 60000, FBF_STREAM_ALWAYS, 0, &rng, &st);
	/* an upgraded window (since = now), and one reset midway (a load) */
	inexact += in_order_run(cap, 40, 60000, T0, 0, &rng, &st);
	inexact += in_order_run(cap, 40, 80000, FBF_STREAM_ALWAYS, T0 + 20000, &rng, &st);
	report("in order, roomy", &st);
	CHECK(inexact == 0, "%llu answers not exact", (unsigned long long) inexact);
	CHECK(st.double_counts == 0 && st.false_dismissals == 0, "invariants");
	CHECK(st.answers[FBF_STREAM_ASK] > 0, "the late pages asked before a horizon");
}

static void
test_in_order_crowded(void)
{
	uint64_t	rng = seed ^ 9;
	Stats		st;

	memset(&st, 0, sizeof(st));
	in_order_run(8, 30, 60000, FBF_STREAM_ALWAYS, 0, &rng, &st);
	in_order_run(16, 40, 60000, T0, T0 + 30000, &rng, &st);
	report("in order, more clients than slots", &st);
	CHECK(st.double_counts == 0 && st.false_dismissals == 0, "invariants");
	CHECK(st.evictions > 0, "evictions happened");
}

/*
 * The rules one at a time: a missing stream on a new page is NEW; on a
 * page whose since is late, ASK until since is a horizon old; after an
 * eviction, ASK for every missing stream until the victim's last time is
 * a horizon old; a slot born then asks above its highest until born is a
 * horizon old; reset forgets.
 */
static void
test_rules(void)
{
	uint64_t	rng = seed ^ 3;
	Sim			sim;
	const int64_t H = 100;

	sim_init(&sim, 2, 4, H, FBF_STREAM_ALWAYS, &rng);
	CHECK(sim_check(&sim, 0, 5) == FBF_STREAM_NEW, "new page, missing stream");
	sim_record(&sim, 0, 5, sim.now);
	sim_record(&sim, 1, 7, sim.now + 1);
	sim.now += 10;
	CHECK(sim.page->nused == 2 && sim.page->evictions == 0, "two slots used");
	sim_record(&sim, 2, 9, sim.now);	/* evicts stream 0 (seen T0) */
	CHECK(sim.page->evictions == 1 && sim.page->evicted_until == T0,
		  "stream 0 evicted: evictions %llu until %lld",
		  (unsigned long long) sim.page->evictions,
		  (long long) sim.page->evicted_until);
	CHECK(fbf_stream_find(sim.page, sim.ids[0]) == NULL, "stream 0 gone");
	CHECK(sim_check(&sim, 0, 5) == FBF_STREAM_ASK, "evicted seq: ASK");
	CHECK(sim_check(&sim, 0, 6) == FBF_STREAM_ASK, "evicted stream: ASK");
	CHECK(sim_check(&sim, 3, 1) == FBF_STREAM_ASK, "any missing stream: ASK");
	/* stream 2's absence was proven before the eviction: born always */
	CHECK(sim_check(&sim, 2, 9) == FBF_STREAM_SEEN, "stream 2 knows its own");
	CHECK(sim_check(&sim, 2, 10) == FBF_STREAM_NEW, "stream 2: NEW above");
	CHECK(sim_check(&sim, 2, 8) == FBF_STREAM_NEW, "stream 2: NEW below");
	/* stream 3's was not (an eviction at T0): born now, evicts stream 1 */
	sim.now = T0 + 20;
	sim_record(&sim, 3, 1, sim.now);
	CHECK(sim.page->evictions == 2 && sim.page->evicted_until == T0 + 1,
		  "stream 1 evicted");
	CHECK(fbf_stream_find(sim.page, sim.ids[3])->born == T0 + 20, "born now");
	CHECK(sim_check(&sim, 3, 1) == FBF_STREAM_SEEN, "young slot knows its own");
	CHECK(sim_check(&sim, 3, 2) == FBF_STREAM_ASK, "young slot: ASK above");
	CHECK(sim_check(&sim, 3, 0) == FBF_STREAM_ASK, "young slot: ASK below");
	sim.now = T0 + H;
	CHECK(sim_check(&sim, 0, 5) == FBF_STREAM_ASK, "stream 1 evicted at T0+1: ASK");
	sim.now = T0 + 1 + H;
	CHECK(sim_check(&sim, 0, 5) == FBF_STREAM_NEW, "evictions a horizon old: NEW");
	CHECK(sim_check(&sim, 1, 8) == FBF_STREAM_NEW, "evictions a horizon old: NEW");
	CHECK(sim_check(&sim, 3, 2) == FBF_STREAM_ASK, "slot born at T0+20 still ASK");
	sim.now = T0 + 19 + H;
	CHECK(sim_check(&sim, 3, 1) == FBF_STREAM_SEEN, "SEEN within the horizon");
	sim.now = T0 + 20 + H;
	CHECK(sim_check(&sim, 3, 2) == FBF_STREAM_NEW, "slot a horizon old: NEW");
	CHECK(sim_check(&sim, 3, 1) == FBF_STREAM_NEW,
		  "seq 1 a horizon old: forgotten, as the filter forgets it");

	/* reset: everything forgotten, nothing new for a horizon */
	fbf_stream_page_reset(sim.page, sim.now);
	CHECK(sim.page->nused == 0 && sim.page->evictions == 2, "reset: slots gone, counts kept");
	CHECK(sim_check(&sim, 2, 9) == FBF_STREAM_ASK, "after reset: ASK");
	CHECK(sim_check(&sim, 2, 11) == FBF_STREAM_ASK, "after reset: ASK above");
	sim_record(&sim, 2, 11, sim.now);
	CHECK(sim_check(&sim, 2, 11) == FBF_STREAM_SEEN, "recorded after reset: SEEN");
	CHECK(sim_check(&sim, 2, 12) == FBF_STREAM_ASK, "slot born at reset: ASK");
	sim.now += H;
	CHECK(sim_check(&sim, 2, 12) == FBF_STREAM_NEW, "a horizon after: NEW");
	CHECK(sim_check(&sim, 1, 8) == FBF_STREAM_NEW, "missing a horizon after: NEW");

	/* a page begun late (an upgrade) */
	sim_free(&sim);
	sim_init(&sim, 4, 2, H, T0, &rng);
	CHECK(sim_check(&sim, 0, 1) == FBF_STREAM_ASK, "since now: ASK");
	sim.now += H - 1;
	CHECK(sim_check(&sim, 0, 1) == FBF_STREAM_ASK, "since almost a horizon: ASK");
	sim.now += 1;
	CHECK(sim_check(&sim, 0, 1) == FBF_STREAM_NEW, "since a horizon: NEW");
	sim_record(&sim, 0, 1, sim.now);
	CHECK(fbf_stream_find(sim.page, sim.ids[0])->born == FBF_STREAM_ALWAYS,
		  "slot made when proven: born always");

	/* recording twice changes nothing but seen */
	{
		FbfStreamSlot before = *fbf_stream_find(sim.page, sim.ids[0]);
		const FbfStreamSlot *after;

		sim.now += 5;
		sim_record(&sim, 0, 1, sim.now);
		after = fbf_stream_find(sim.page, sim.ids[0]);
		CHECK(after->high == before.high && after->bits == before.bits &&
			  after->born == before.born && after->seen == sim.now,
			  "a duplicate record moves only seen");
	}
	/* id 0 is never a stream */
	CHECK(fbf_stream_id(0) != 0 && fbf_stream_id(5) == 5, "fbf_stream_id");
	CHECK(fbf_stream_find(sim.page, 0) == NULL, "find(0)");
	CHECK(sim.double_counts == 0 && sim.false_dismissals == 0, "model");
	sim_free(&sim);
}

/*
 * The page's shape: 40-byte slots (at most 48 is the target), the
 * capacity of a window page, and pages read from disk refused when their
 * counts do not fit.
 */
static void
test_shape(void)
{
	uint32_t	cap = fbf_stream_capacity(PAGE_CONTENT_BYTES);
	FbfStreamPage *p;

	CHECK(sizeof(FbfStreamSlot) <= 48, "slot is %zu bytes", sizeof(FbfStreamSlot));
	CHECK(sizeof(FbfStreamSlot) == 40, "slot is %zu bytes", sizeof(FbfStreamSlot));
	CHECK(sizeof(FbfStreamPage) % 8 == 0, "header %zu", sizeof(FbfStreamPage));
	CHECK(fbf_stream_capacity(0) == 0, "no bytes");
	CHECK(fbf_stream_capacity(sizeof(FbfStreamPage) - 1) == 0, "less than a header");
	CHECK(fbf_stream_capacity(sizeof(FbfStreamPage)) == 0, "a header only");
	CHECK(fbf_stream_capacity(sizeof(FbfStreamPage) + sizeof(FbfStreamSlot)) == 1, "one slot");
	CHECK(fbf_stream_capacity(sizeof(FbfStreamPage) + 2 * sizeof(FbfStreamSlot) - 1) == 1,
		  "one slot and a bit");
	CHECK(cap >= 200 && cap <= 205, "a page holds %u slots", cap);
	CHECK(sizeof(FbfStreamPage) + (size_t) cap * sizeof(FbfStreamSlot) <= PAGE_CONTENT_BYTES,
		  "the slots fit");
	printf("#   slot %zu bytes, header %zu, %u slots a page\n",
		   sizeof(FbfStreamSlot), sizeof(FbfStreamPage), cap);

	p = malloc(sizeof(FbfStreamPage) + (size_t) cap * sizeof(FbfStreamSlot));
	fbf_stream_page_init(p, cap, FBF_STREAM_ALWAYS);
	CHECK(fbf_stream_page_valid(p, cap), "a new page is valid");
	CHECK(p->nused == 0 && p->evictions == 0 && p->expired == 0 &&
		  p->evicted_until == FBF_STREAM_ALWAYS && p->since == FBF_STREAM_ALWAYS,
		  "a new page is empty");
	CHECK(!fbf_stream_page_valid(p, cap - 1), "wrong nslots refused");
	CHECK(!fbf_stream_page_valid(p, cap + 1), "wrong nslots refused");
	p->nused = cap;
	CHECK(fbf_stream_page_valid(p, cap), "full page valid");
	p->nused = cap + 1;
	CHECK(!fbf_stream_page_valid(p, cap), "nused over nslots refused");
	p->nused = UINT32_MAX;
	CHECK(!fbf_stream_page_valid(p, cap), "nused huge refused");
	p->nused = 0;
	p->nslots = UINT32_MAX;
	CHECK(!fbf_stream_page_valid(p, cap), "nslots huge refused");
	free(p);

	/* a page of no slots records nothing and never crashes */
	p = malloc(sizeof(FbfStreamPage));
	fbf_stream_page_init(p, 0, FBF_STREAM_ALWAYS);
	fbf_stream_record(p, 7, 1, T0, 100);
	CHECK(p->nused == 0, "no slot taken");
	CHECK(fbf_stream_check(p, 7, 1, T0, 100) == FBF_STREAM_NEW,
		  "empty page, absence proven: NEW (it was never recorded anywhere)");
	free(p);
}

int
main(int argc, char **argv)
{
	if (argc > 1)
		seed = strtoull(argv[1], NULL, 10);
	printf("# seed %llu\n", (unsigned long long) seed);

	run_test("shape: slots of at most 48 bytes, capacity, page validity",
			 test_shape);
	run_test("rules: since, eviction, young slots, reset, duplicate records",
			 test_rules);
	run_test("the bitmap's edges: jumps of 1, 63, 64, 65 and huge, at the "
			 "int64 extremes", test_w_overflow);
	run_test("random operations on pages of few slots (evictions): never "
			 "NEW for a recorded seq within the horizon, never SEEN for an "
			 "unrecorded one", test_random_few_slots);
	run_test("random operations on a roomy page", test_random_roomy);
	run_test("random seqs near the extremes and jumps across the bitmap",
			 test_random_wild);
	run_test("since set late (upgrades), loads and resets", test_random_resets);
	run_test("record times out of order (concurrent drains)",
			 test_random_skewed);
	run_test("a record whose clock was read before an eviction or a reset "
			 "of its stream", test_late_record);
	run_test("in-order clients, 8 in flight, aborts and retries, roomy "
			 "page: exact (no ASK) once known", test_in_order_exact);
	run_test("in-order clients crowding a small page: invariants",
			 test_in_order_crowded);
	run_test("varints and zigzag", test_varint);
	run_test("a log of recordings by slot index replays to the same page",
			 test_log);
	run_test("a snapshot's streams adopted or merged into a run of another "
			 "size: never NEW for a seq either side recorded within the "
			 "horizon, never SEEN for one neither did", test_snap_random);
	run_test("a snapshot's in-order streams exact at once after adoption "
			 "or merge", test_snap_in_order);
	run_test("a snapshot's streams: header and contents validated, bytes "
			 "read within the length", test_snap_validate);
	return tap_done();
}
