/*-------------------------------------------------------------------------
 *
 * test_stream_snap.h
 *	  Property tests of a snapshot's streams (src/core/fbf_stream_snap.c):
 *	  a run of stream pages encoded, validated and put into a run of
 *	  another size, adopted by an empty one or merged into one that
 *	  recorded operations of its own, held to an exact model of both
 *	  sides' operations: never NEW for a seq either side recorded within
 *	  the horizon, never SEEN for one neither recorded; and in-order
 *	  clients on roomy pages answered exactly (no ASK) right after an
 *	  adoption.  Included by test_stream.c only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_TEST_STREAM_SNAP_H
#define FBF_TEST_STREAM_SNAP_H

#include "fbf_stream_snap.h"

#define SNAP_STREAMS	48
#define SNAP_SEQS		256

/* A run of pages and the model of what was recorded in it. */
typedef struct SnapRun
{
	uint32_t	npages;
	uint32_t	nslots;
	FbfStreamPage **pages;
} SnapRun;

/* when (stream, seq) was last recorded by either side; 0: never */
static int64_t snap_model[SNAP_STREAMS][SNAP_SEQS];
static uint64_t snap_ids[SNAP_STREAMS];

static void
snap_run_init(SnapRun *run, uint32_t npages, uint32_t nslots, int64_t since)
{
	run->npages = npages;
	run->nslots = nslots;
	run->pages = malloc(sizeof(FbfStreamPage *) * npages);
	for (uint32_t p = 0; p < npages; p++)
	{
		run->pages[p] = malloc(sizeof(FbfStreamPage) +
							   (size_t) nslots * sizeof(FbfStreamSlot));
		fbf_stream_page_init(run->pages[p], nslots, since);
	}
}

static void
snap_run_free(SnapRun *run)
{
	for (uint32_t p = 0; p < run->npages; p++)
		free(run->pages[p]);
	free(run->pages);
}

static FbfStreamPage *
snap_page(SnapRun *run, uint64_t id)
{
	return run->pages[fbf_streams_page_of(id, run->npages)];
}

/* record (s, seq) at t in the run and the model */
static void
snap_record(SnapRun *run, int s, int64_t seq, int64_t t, int64_t horizon)
{
	fbf_stream_record(snap_page(run, snap_ids[s]), snap_ids[s], seq, t, horizon);
	if (t > snap_model[s][seq])
		snap_model[s][seq] = t;
}

/* every seq of every stream asked of the run: the forbidden answers */
static void
snap_sweep(SnapRun *run, int64_t now, int64_t horizon, uint64_t *bad_new,
		   uint64_t *bad_seen, uint64_t *asks)
{
	for (int s = 0; s < SNAP_STREAMS; s++)
	{
		for (int64_t seq = 0; seq < SNAP_SEQS; seq++)
		{
			FbfStreamAnswer a = fbf_stream_check(snap_page(run, snap_ids[s]),
												 snap_ids[s], seq, now, horizon);
			int64_t		t = snap_model[s][seq];

			if (a == FBF_STREAM_NEW && t != 0 && now - t < horizon)
				(*bad_new)++;
			if (a == FBF_STREAM_SEEN && t == 0)
				(*bad_seen)++;
			if (a == FBF_STREAM_ASK)
				(*asks)++;
		}
	}
}

/* a run's section, validated; the caller frees it */
static unsigned char *
snap_encode(SnapRun *run, int64_t now, int64_t horizon, size_t *len)
{
	unsigned char *buf;
	const char *why = NULL;

	*len = fbf_streams_encoded_size((const FbfStreamPage *const *) run->pages,
									run->npages, now, horizon);
	buf = malloc(*len);
	fbf_streams_encode((const FbfStreamPage *const *) run->pages, run->npages,
					   now, horizon, buf);
	CHECK(fbf_streams_validate(buf, *len, true, &why), "encoded section refused: %s",
		  why ? why : "");
	return buf;
}

static void
snap_into(SnapRun *run, const unsigned char *buf, bool adopt,
		  const FbfStreamsTimeMap *map, int64_t now, int64_t horizon)
{
	uint32_t   *first = malloc(sizeof(uint32_t) * (fbf_streams_npages(buf) + 1));

	fbf_streams_index(buf, first);
	for (uint32_t t = 0; t < run->npages; t++)
	{
		fbf_streams_into_page(run->pages[t], buf, first, t, run->npages, adopt,
							  map, now, horizon);
		CHECK(fbf_stream_page_valid(run->pages[t], run->nslots), "page %u invalid", t);
	}
	free(first);
}

/*
 * Random runs: a source run and a target run (of other sizes, few slots
 * or many, beginning always or late), each recording random operations of
 * the same streams (the target only when merging), the source's section
 * put into the target, then both sides' operations asked of the target,
 * and more recorded there and asked again.
 */
static void
test_snap_random(void)
{
	uint64_t	rng = seed ^ UINT64_C(0x5eed5a9);
	uint64_t	bad_new = 0,
				bad_seen = 0,
				asks = 0,
				runs = 0;

	for (int r = 0; r < 300; r++)
	{
		SnapRun		src,
					dst;
		uint32_t	spages = 1 + (uint32_t) test_rand_below(&rng, 6);
		uint32_t	dpages = 1 + (uint32_t) test_rand_below(&rng, 6);
		uint32_t	nslots = test_rand_below(&rng, 2) ? 4 + (uint32_t) test_rand_below(&rng, 8) : 64;
		int64_t		horizon = 1000 + (int64_t) test_rand_below(&rng, 5000);
		bool		adopt = test_rand_below(&rng, 2) == 0;
		int64_t		now = T0;
		FbfStreamsTimeMap map;
		unsigned char *buf;
		size_t		len;

		memset(snap_model, 0, sizeof(snap_model));
		for (int s = 0; s < SNAP_STREAMS; s++)
			snap_ids[s] = fbf_stream_id(test_rand(&rng));
		snap_run_init(&src, spages, nslots,
					  test_rand_below(&rng, 3) ? FBF_STREAM_ALWAYS : T0);
		snap_run_init(&dst, dpages, nslots,
					  test_rand_below(&rng, 3) ? FBF_STREAM_ALWAYS : T0);
		for (int i = 0; i < 3000; i++)
		{
			int			s = (int) test_rand_below(&rng, SNAP_STREAMS);
			int64_t		seq = (int64_t) test_rand_below(&rng, SNAP_SEQS);

			now += (int64_t) test_rand_below(&rng, 5);
			if (!adopt && test_rand_below(&rng, 2))
				snap_record(&dst, s, seq, now, horizon);
			else
				snap_record(&src, s, seq, now, horizon);
		}
		buf = snap_encode(&src, now, horizon, &len);
		map.shift = 0;
		map.slack = (int64_t) test_rand_below(&rng, 3) * 10;
		map.now = now;
		if (adopt)
		{
			/* an adopting window remembers only the section's operations */
			for (uint32_t t = 0; t < dpages; t++)
				fbf_stream_page_reset(dst.pages[t], now);
		}
		snap_into(&dst, buf, adopt, &map, now, horizon);
		snap_sweep(&dst, now, horizon, &bad_new, &bad_seen, &asks);
		for (int i = 0; i < 2000; i++)
		{
			int			s = (int) test_rand_below(&rng, SNAP_STREAMS);
			int64_t		seq = (int64_t) test_rand_below(&rng, SNAP_SEQS);

			now += (int64_t) test_rand_below(&rng, 5);
			snap_record(&dst, s, seq, now, horizon);
			if (i % 500 == 499)
				snap_sweep(&dst, now, horizon, &bad_new, &bad_seen, &asks);
		}
		free(buf);
		snap_run_free(&src);
		snap_run_free(&dst);
		runs++;
	}
	CHECK(bad_new == 0, "%llu NEW for a seq recorded within the horizon",
		  (unsigned long long) bad_new);
	CHECK(bad_seen == 0, "%llu SEEN for a seq never recorded",
		  (unsigned long long) bad_seen);
	printf("#   %llu runs, %llu answers were ASK\n", (unsigned long long) runs,
		   (unsigned long long) asks);
}

/*
 * In-order clients on roomy pages that knew them always: after the
 * section is adopted by a run of another size, a retry is SEEN and the
 * next seq NEW at once, with no ASK; merged into a run that knew other
 * streams always, the same.
 */
static void
test_snap_in_order(void)
{
	uint64_t	rng = seed ^ UINT64_C(0x10c0de);

	for (int variant = 0; variant < 4; variant++)
	{
		SnapRun		src,
					dst;
		int64_t		horizon = 100000;
		int64_t		now = T0;
		int64_t		high[SNAP_STREAMS];
		FbfStreamsTimeMap map = {0, 0, 0};
		unsigned char *buf;
		size_t		len;
		uint64_t	asks = 0,
					wrong = 0;
		bool		adopt = variant < 2;

		memset(snap_model, 0, sizeof(snap_model));
		for (int s = 0; s < SNAP_STREAMS; s++)
			snap_ids[s] = fbf_stream_id(test_rand(&rng));
		snap_run_init(&src, 3, 200, FBF_STREAM_ALWAYS);
		snap_run_init(&dst, variant % 2 ? 1 : 7, 200, FBF_STREAM_ALWAYS);
		for (int s = 0; s < SNAP_STREAMS; s++)
		{
			high[s] = 10 + (int64_t) test_rand_below(&rng, 50);
			for (int64_t seq = 0; seq <= high[s]; seq++)
				snap_record(s % 2 || adopt ? &src : &dst, s, seq, ++now, horizon);
		}
		buf = snap_encode(&src, now, horizon, &len);
		map.now = now;
		snap_into(&dst, buf, adopt, &map, now, horizon);
		for (int s = 0; s < SNAP_STREAMS; s++)
		{
			FbfStreamPage *p = snap_page(&dst, snap_ids[s]);

			for (int64_t seq = high[s] - 5; seq <= high[s]; seq++)
			{
				FbfStreamAnswer a = fbf_stream_check(p, snap_ids[s], seq, now, horizon);

				asks += a == FBF_STREAM_ASK;
				wrong += a == FBF_STREAM_NEW;
			}
			switch (fbf_stream_check(p, snap_ids[s], high[s] + 1, now, horizon))
			{
				case FBF_STREAM_ASK:
					asks++;
					break;
				case FBF_STREAM_SEEN:
					wrong++;
					break;
				case FBF_STREAM_NEW:
					break;
			}
		}
		CHECK(asks == 0 && wrong == 0, "variant %d: %llu ASK, %llu wrong", variant,
			  (unsigned long long) asks, (unsigned long long) wrong);
		free(buf);
		snap_run_free(&src);
		snap_run_free(&dst);
	}
}

/* the header's and the contents' rules; random bytes never crash */
static void
test_snap_validate(void)
{
	uint64_t	rng = seed ^ UINT64_C(0xbad5);
	SnapRun		src;
	unsigned char *buf;
	unsigned char *copy;
	size_t		len;
	const char *why;

	memset(snap_model, 0, sizeof(snap_model));
	for (int s = 0; s < SNAP_STREAMS; s++)
		snap_ids[s] = fbf_stream_id(test_rand(&rng));
	snap_run_init(&src, 4, 32, FBF_STREAM_ALWAYS);
	for (int s = 0; s < SNAP_STREAMS; s++)
		snap_record(&src, s, 5, T0 + s, 1000);
	buf = snap_encode(&src, T0 + 100, 1000, &len);
	CHECK(fbf_streams_nslots(buf) == SNAP_STREAMS, "%llu slots",
		  (unsigned long long) fbf_streams_nslots(buf));
	CHECK(!fbf_streams_validate(buf, len - 1, false, &why), "short refused");
	CHECK(!fbf_streams_validate(buf, FBF_STREAMS_HEADER - 1, false, &why), "tiny refused");
	copy = malloc(len);
	for (size_t at = 0; at < len; at++)
	{
		for (int bit = 0; bit < 8; bit += 3)
		{
			memcpy(copy, buf, len);
			copy[at] ^= (unsigned char) (1 << bit);
			/* whatever it says, it reads within len */
			(void) fbf_streams_validate(copy, len, true, &why);
		}
	}
	memcpy(copy, buf, len);
	copy[3] = 2;
	CHECK(!fbf_streams_validate(copy, len, false, &why), "version 2 refused");
	/* two slots swapped on a page: out of order */
	memcpy(copy, buf, len);
	{
		uint32_t	first[5];
		uint32_t	p;

		fbf_streams_index(buf, first);
		for (p = 0; p < 4 && first[p + 1] - first[p] < 2; p++)
			;
		if (p < 4)
		{
			unsigned char tmp[FBF_STREAMS_SLOT_BYTES];
			unsigned char *a = copy + FBF_STREAMS_HEADER + 4 * FBF_STREAMS_PAGE_BYTES +
				(size_t) first[p] * FBF_STREAMS_SLOT_BYTES;

			memcpy(tmp, a, sizeof(tmp));
			memcpy(a, a + FBF_STREAMS_SLOT_BYTES, sizeof(tmp));
			memcpy(a + FBF_STREAMS_SLOT_BYTES, tmp, sizeof(tmp));
			CHECK(!fbf_streams_validate(copy, len, true, &why), "unordered refused");
			CHECK(fbf_streams_validate(copy, len, false, &why), "the header alone passes");
		}
	}
	for (int i = 0; i < 20000; i++)
	{
		size_t		n = (size_t) test_rand_below(&rng, 200);
		unsigned char junk[200];

		for (size_t k = 0; k < n; k++)
			junk[k] = (unsigned char) test_rand(&rng);
		if (n >= 4)
			memcpy(junk, fbf_streams_magic, 4);
		(void) fbf_streams_validate(junk, n, true, &why);
	}
	free(copy);
	free(buf);
	snap_run_free(&src);
}

#endif							/* FBF_TEST_STREAM_SNAP_H */
