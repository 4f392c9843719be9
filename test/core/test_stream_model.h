/*-------------------------------------------------------------------------
 *
 * test_stream_model.h
 *	  The exact model test_stream.c holds the streams of the pure core
 *	  (src/core/fbf_stream.c) to: every (stream, seq) recorded, with its
 *	  latest record time, beside a page of slots; sim_check asks the page
 *	  and counts the two answers that must never be given (NEW for a seq
 *	  recorded within the horizon, SEEN for one never recorded); and the
 *	  seqs of the random runs (near the int64 extremes, jumps across the
 *	  bitmap).  Included by test_stream.c only (one translation unit:
 *	  tap.h's counters are static).
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_TEST_STREAM_MODEL_H
#define FBF_TEST_STREAM_MODEL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fbf_stream.h"
#include "tap.h"

/* what a window page gives (BLCKSZ 8192 less headers, as window_page.h) */
#define PAGE_CONTENT_BYTES	(8192 - 24 - 16)

/* a time far from the extremes (FBF_STREAM_ALWAYS is INT64_MIN) */
#define T0					INT64_C(1000000000000)

#define MAX_STREAMS			1024
#define MODEL_BITS			18
#define MODEL_CAP			(1u << MODEL_BITS)

/* One recorded (stream, seq) and its latest record time. */
typedef struct Rec
{
	int64_t		seq;
	int64_t		t;
	uint32_t	stream;
	uint32_t	used;
} Rec;

/* A page, its streams and the model of what was recorded in them. */
typedef struct Sim
{
	FbfStreamPage *page;
	uint32_t	nslots;
	int64_t		horizon;
	int64_t		now;
	int			nstreams;
	uint64_t	ids[MAX_STREAMS];
	Rec		   *model;
	size_t		nrec;
	/* answers given, and the forbidden ones */
	uint64_t	answers[3];
	uint64_t	double_counts;	/* NEW for a seq recorded within horizon */
	uint64_t	false_dismissals;	/* SEEN for a seq never recorded */
} Sim;

/* What runs of a kind add up to. */
typedef struct Stats
{
	uint64_t	answers[3];
	uint64_t	double_counts;
	uint64_t	false_dismissals;
	uint64_t	records;
	uint64_t	evictions;
	uint64_t	expired;
} Stats;

static const char *answer_name[] = {"NEW", "SEEN", "ASK"};

static uint32_t
model_slot(uint32_t stream, int64_t seq)
{
	uint64_t	h = (uint64_t) seq * UINT64_C(0x9e3779b97f4a7c15) ^
		((uint64_t) stream * UINT64_C(0xbf58476d1ce4e5b9));

	h ^= h >> 29;
	h *= UINT64_C(0x94d049bb133111eb);
	h ^= h >> 32;
	return (uint32_t) (h & (MODEL_CAP - 1));
}

static Rec *
model_find(Sim *sim, uint32_t stream, int64_t seq)
{
	uint32_t	i = model_slot(stream, seq);

	for (;;)
	{
		Rec		   *r = &sim->model[i];

		if (!r->used)
			return NULL;
		if (r->stream == stream && r->seq == seq)
			return r;
		i = (i + 1) & (MODEL_CAP - 1);
	}
}

static void
model_put(Sim *sim, uint32_t stream, int64_t seq, int64_t t)
{
	uint32_t	i = model_slot(stream, seq);

	for (;;)
	{
		Rec		   *r = &sim->model[i];

		if (!r->used)
		{
			if (sim->nrec >= MODEL_CAP / 2)
			{
				printf("# model full\n");
				abort();
			}
			r->used = 1;
			r->stream = stream;
			r->seq = seq;
			r->t = t;
			sim->nrec++;
			return;
		}
		if (r->stream == stream && r->seq == seq)
		{
			if (t > r->t)
				r->t = t;
			return;
		}
		i = (i + 1) & (MODEL_CAP - 1);
	}
}

static void
sim_init(Sim *sim, uint32_t nslots, int nstreams, int64_t horizon,
		 int64_t since, uint64_t *rng)
{
	memset(sim, 0, sizeof(*sim));
	sim->page = malloc(sizeof(FbfStreamPage) + (size_t) nslots * sizeof(FbfStreamSlot));
	sim->model = calloc(MODEL_CAP, sizeof(Rec));
	if (sim->page == NULL || sim->model == NULL)
		abort();
	sim->nslots = nslots;
	sim->horizon = horizon;
	sim->now = T0;
	sim->nstreams = nstreams;
	for (int i = 0; i < nstreams; i++)
	{
		uint64_t	id;
		bool		dup;

		do
		{
			id = fbf_stream_id(test_rand(rng));
			dup = false;
			for (int j = 0; j < i; j++)
				dup |= sim->ids[j] == id;
		} while (dup);
		sim->ids[i] = id;
	}
	fbf_stream_page_init(sim->page, nslots, since);
}

static void
stats_add(Stats *st, const Sim *sim)
{
	for (int k = 0; k < 3; k++)
		st->answers[k] += sim->answers[k];
	st->double_counts += sim->double_counts;
	st->false_dismissals += sim->false_dismissals;
	st->records += sim->nrec;
	st->evictions += sim->page->evictions;
	st->expired += sim->page->expired;
}

static void
sim_free(Sim *sim)
{
	free(sim->page);
	free(sim->model);
}

/*
 * Ask the page about (stream, seq) at sim->now and hold it to the model.
 */
static FbfStreamAnswer
sim_check(Sim *sim, int stream, int64_t seq)
{
	FbfStreamAnswer a = fbf_stream_check(sim->page, sim->ids[stream], seq,
										 sim->now, sim->horizon);
	Rec		   *r = model_find(sim, (uint32_t) stream, seq);

	sim->answers[a]++;
	if (r != NULL && a == FBF_STREAM_NEW && r->t > sim->now - sim->horizon)
	{
		sim->double_counts++;
		CHECK(false, "double count: stream %d seq %lld recorded at now%+lld "
			  "(horizon %lld) answered NEW", stream, (long long) seq,
			  (long long) (r->t - sim->now), (long long) sim->horizon);
	}
	if (r == NULL && a == FBF_STREAM_SEEN)
	{
		sim->false_dismissals++;
		CHECK(false, "false dismissal: stream %d seq %lld never recorded "
			  "answered SEEN", stream, (long long) seq);
	}
	return a;
}

/* the page is sound: valid, nused counts its slots, no id twice */
static void
sim_page_ok(Sim *sim, bool deep)
{
	const FbfStreamPage *p = sim->page;
	uint32_t	used = 0;

	CHECK(fbf_stream_page_valid(p, sim->nslots), "page not valid: nslots %u nused %u",
		  p->nslots, p->nused);
	for (uint32_t i = 0; i < p->nslots; i++)
	{
		if (p->slots[i].id == 0)
			continue;
		used++;
		if (!deep)
			continue;
		for (uint32_t j = i + 1; j < p->nslots; j++)
			CHECK(p->slots[j].id != p->slots[i].id, "slots %u and %u share an id", i, j);
	}
	CHECK(used == p->nused, "nused %u but %u slots used", p->nused, used);
}

/* Record (stream, seq) at time t in the page and the model. */
static void
sim_record(Sim *sim, int stream, int64_t seq, int64_t t)
{
	fbf_stream_record(sim->page, sim->ids[stream], seq, t, sim->horizon);
	model_put(sim, (uint32_t) stream, seq, t);
}

/*
 * Ask about every recorded seq and its neighbours (one below and above,
 * and the bitmap's edges): nothing recorded within the horizon is NEW,
 * nothing unrecorded is SEEN.
 */
static void
sim_sweep(Sim *sim)
{
	static const int64_t near[] = {-65, -64, -63, -1, 1, 63, 64, 65};

	for (uint32_t i = 0; i < MODEL_CAP; i++)
	{
		Rec			r = sim->model[i];

		if (!r.used)
			continue;
		sim_check(sim, (int) r.stream, r.seq);
		for (size_t k = 0; k < sizeof(near) / sizeof(near[0]); k++)
		{
			int64_t		q;

			if (__builtin_add_overflow(r.seq, near[k], &q))
				continue;
			sim_check(sim, (int) r.stream, q);
		}
	}
}

/* a + b, saturated at the extremes */
static int64_t
sat_add(int64_t a, int64_t b)
{
	int64_t		r;

	if (__builtin_add_overflow(a, b, &r))
		r = b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

/* a seq near the extremes, or anywhere */
static int64_t
wild_seq(uint64_t *rng)
{
	static const int64_t bases[] = {
		INT64_MIN, INT64_MIN + 1, INT64_MIN + 64, -65, -1, 0, 1, 63, 64,
		INT64_MAX - 64, INT64_MAX - 1, INT64_MAX
	};

	if (test_rand_below(rng, 3) == 0)
		return (int64_t) test_rand(rng);
	return bases[test_rand_below(rng, sizeof(bases) / sizeof(bases[0]))];
}

/* q moved by one of the bitmap's edges or far, saturating at the extremes */
static int64_t
jump(uint64_t *rng, int64_t q)
{
	static const int64_t jumps[] = {
		1, 2, 8, 62, 63, 64, 65, 66, 127, 128, 129, 1000,
		INT64_C(1) << 40, INT64_C(1) << 62, INT64_MAX
	};
	int64_t		j = jumps[test_rand_below(rng, sizeof(jumps) / sizeof(jumps[0]))];

	if (test_rand_below(rng, 4) == 0)
		j = -j;
	return sat_add(q, j);
}

#endif							/* FBF_TEST_STREAM_MODEL_H */
