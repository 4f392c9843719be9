/*-------------------------------------------------------------------------
 *
 * test_stream_log.h
 *	  Tests of test_stream.c for the log of stream recordings
 *	  (fbf_stream_record_logged, fbf_stream_replay: what a STREAMS WAL
 *	  record holds) and the varints it is written in (fbf_le.h).
 *	  Included once, by test_stream.c, after its `seed`.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_TEST_STREAM_LOG_H
#define FBF_TEST_STREAM_LOG_H

#include <stdlib.h>
#include <string.h>

#include "fbf_le.h"
#include "fbf_stream.h"
#include "tap.h"
#include "test_stream_model.h"

/* varints and zigzag: round trips at the edges, truncated and overlong ones refused */
static void
test_varint(void)
{
	static const int64_t vals[] = {0, 1, -1, 2, -2, 63, -64, 64, -65, 127, 128,
		INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1};
	unsigned char buf[FBF_VARINT_MAX + 1];
	uint64_t	v;
	uint64_t	rng = seed;

	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
	{
		uint64_t	z = fbf_zigzag(vals[i]);
		unsigned	n = fbf_varint_write(buf, z);

		CHECK(fbf_unzigzag(z) == vals[i], "zigzag of %lld", (long long) vals[i]);
		CHECK(n >= 1 && n <= FBF_VARINT_MAX, "%u bytes", n);
		CHECK(fbf_varint_read(buf, n, &v) == n && v == z, "varint of %llu",
			  (unsigned long long) z);
		CHECK(fbf_varint_read(buf, n - 1, &v) == 0, "truncated varint refused");
	}
	CHECK(fbf_zigzag(0) == 0 && fbf_zigzag(-1) == 1 && fbf_zigzag(1) == 2,
		  "small magnitudes small");
	CHECK(fbf_varint_write(buf, 127) == 1 && fbf_varint_write(buf, 128) == 2,
		  "seven bits a byte");
	CHECK(fbf_varint_write(buf, UINT64_MAX) == FBF_VARINT_MAX, "the longest");
	buf[FBF_VARINT_MAX - 1] = 2;	/* a 65th bit */
	CHECK(fbf_varint_read(buf, FBF_VARINT_MAX, &v) == 0, "past 64 bits refused");
	memset(buf, 0x80, sizeof(buf));
	CHECK(fbf_varint_read(buf, sizeof(buf), &v) == 0, "overlong refused");
	for (int i = 0; i < 100000; i++)
	{
		uint64_t	x = test_rand(&rng) >> test_rand_below(&rng, 64);
		unsigned	n = fbf_varint_write(buf, x);

		CHECK(fbf_varint_read(buf, n, &v) == n && v == x, "random varint");
	}
}

/*
 * A log of recordings (fbf_stream_record_logged) replayed on a copy of the
 * page as it was (fbf_stream_replay) leaves the copy byte for byte the
 * page: random streams on pages of few and many slots, in order and
 * not, evictions, slots gone stale and taken afresh, seqs at the extremes.
 * In-order streams cost 2 bytes an operation once they have a slot.  A replay on the wrong page, or of a damaged log, is refused.
 */
static void
test_log(void)
{
	uint64_t	rng = seed ^ 0x5eed;

	for (int run = 0; run < 60; run++)
	{
		static const uint32_t sizes[] = {4, 32, 202, 300};
		uint32_t	nslots = sizes[run % 4];
		int			nstreams = 1 + (int) test_rand_below(&rng, nslots * 2);
		bool		far = false;
		int64_t		horizon = 1000;
		size_t		bytes = sizeof(FbfStreamPage) + nslots * sizeof(FbfStreamSlot);
		FbfStreamPage *p = malloc(bytes);
		FbfStreamPage *r = malloc(bytes);
		int64_t    *high = calloc((size_t) nstreams, sizeof(int64_t));
		unsigned char *log = malloc(64 * FBF_STREAM_LOG_MAX);
		int64_t		now = T0;
		bool		wild = run % 5 == 4;

		fbf_stream_page_init(p, nslots, run % 2 ? FBF_STREAM_ALWAYS : now);
		memcpy(r, p, bytes);
		for (int batch = 0; batch < 300; batch++)
		{
			int			nops = 1 + (int) test_rand_below(&rng, 64);
			size_t		len = 0;
			size_t		off = 0;
			int			done = 0;

			now += (int64_t) test_rand_below(&rng, batch % 50 == 49 ? 3 * horizon : 40);
			for (int i = 0; i < nops; i++)
			{
				int			s = (int) test_rand_below(&rng, nstreams);
				uint64_t	id = fbf_stream_id((uint64_t) s * UINT64_C(0x9e3779b97f4a7c15));
				int64_t		seq;

				if (wild)
					seq = test_rand_below(&rng, 2) ? INT64_MAX - (int64_t) test_rand_below(&rng, 100) :
						INT64_MIN + (int64_t) test_rand_below(&rng, 100);
				else if (test_rand_below(&rng, 10) == 0)
					seq = high[s] - (int64_t) test_rand_below(&rng, 80);
				else if (test_rand_below(&rng, 10) == 0)
					seq = high[s] - (int64_t) (test_rand(&rng) >> 2);	/* far below */
				else
					seq = ++high[s];
				size_t		n = fbf_stream_record_logged(p, id, seq, now, horizon,
														 log + len);

				far |= log[len] == FBF_STREAM_LOG_FAR;
				len += n;
			}
			while (off < len)
			{
				size_t		n = fbf_stream_replay(r, log + off, len - off, now, horizon);

				CHECK(n > 0, "run %d batch %d: replay refused", run, batch);
				if (n == 0)
					break;
				off += n;
				done++;
			}
			CHECK(done == nops && off == len, "run %d: %d of %d replayed", run, done, nops);
			CHECK(memcmp(p, r, bytes) == 0, "run %d batch %d: the replayed page differs",
				  run, batch);
		}
		if (nslots > FBF_STREAM_LOG_FAR && nstreams > FBF_STREAM_LOG_FAR + 50)
			CHECK(far, "run %d: slots past the first byte were logged", run);
		free(log);
		free(high);
		free(r);
		free(p);
	}

	/* costs, and refusals */
	{
		uint32_t	nslots = 202;
		size_t		bytes = sizeof(FbfStreamPage) + nslots * sizeof(FbfStreamSlot);
		FbfStreamPage *p = malloc(bytes);
		FbfStreamPage *r = malloc(bytes);
		unsigned char log[FBF_STREAM_LOG_MAX];
		unsigned char bad[FBF_STREAM_LOG_MAX];
		size_t		n;
		FbfStreamLogOp op;

		fbf_stream_page_init(p, nslots, FBF_STREAM_ALWAYS);
		for (uint64_t id = 1; id <= nslots; id++)
		{
			n = fbf_stream_record_logged(p, id, 1000, T0, 100, log);
			CHECK(n == 1 + 8 + 2 && log[0] == FBF_STREAM_LOG_ID, "a new stream: %zu bytes", n);
		}
		memcpy(r, p, bytes);
		for (uint64_t id = 1; id <= nslots; id++)
		{
			n = fbf_stream_record_logged(p, id, 1001, T0 + 1, 100, log);
			CHECK(n == 2 && log[0] == id - 1,
				  "the next seq of stream %llu: %zu bytes", (unsigned long long) id, n);
			CHECK(fbf_stream_log_decode(log, n, &op) == n && op.slot == (int) id - 1 &&
				  op.seq == 1, "decoded");
			for (size_t k = 0; k < n; k++)
				CHECK(fbf_stream_log_decode(log, k, &op) == 0, "truncated refused");
			CHECK(fbf_stream_replay(r, log, n, T0 + 1, 100) == n, "replayed");
		}
		CHECK(memcmp(p, r, bytes) == 0, "the same page");

		/* a seq far below the highest changes the slot's time alone: 2 bytes */
		for (uint64_t id = 1; id <= nslots; id++)
		{
			int64_t		seq = id % 2 ? 1001 - FBF_STREAM_W - 1 : INT64_MIN + (int64_t) id;

			n = fbf_stream_record_logged(p, id, seq, T0 + 2, 100, log);
			CHECK(n == 2 && log[0] == id - 1 && log[1] == 0,
				  "a seq far below the highest of stream %llu: %zu bytes",
				  (unsigned long long) id, n);
			CHECK(fbf_stream_replay(r, log, n, T0 + 2, 100) == n, "replayed");
		}
		CHECK(memcmp(p, r, bytes) == 0, "the same page");
		n = fbf_stream_record_logged(p, 1, 1001 - FBF_STREAM_W, T0 + 2, 100, log);
		CHECK(n == 2 && log[1] == fbf_zigzag(-FBF_STREAM_W),
			  "a seq at the bottom of the bitmap is logged as itself");
		CHECK(fbf_stream_replay(r, log, n, T0 + 2, 100) == n, "replayed");
		CHECK(memcmp(p, r, bytes) == 0, "the same page");

		/* a slot named past the page, a stream already live, a bad tag */
		bad[0] = (unsigned char) nslots;
		bad[1] = 2;
		CHECK(fbf_stream_replay(r, bad, 2, T0 + 2, 100) == 0, "slot out of range refused");
		bad[0] = FBF_STREAM_LOG_FAR;
		n = 1 + fbf_varint_write(bad + 1, 300);
		n += fbf_varint_write(bad + n, 2);
		CHECK(fbf_stream_replay(r, bad, n, T0 + 2, 100) == 0, "far slot out of range refused");
		n = 1 + fbf_varint_write(bad + 1, 5);
		n += fbf_varint_write(bad + n, 2);
		CHECK(fbf_stream_log_decode(bad, n, &op) == 0, "a small index written far refused");
		bad[0] = FBF_STREAM_LOG_ID;
		fbf_le64_write(bad + 1, 5);
		bad[9] = 2;
		CHECK(fbf_stream_replay(r, bad, 10, T0 + 2, 100) == 0,
			  "a stream with a live slot by id refused");
		CHECK(memcmp(p, r, bytes) == 0, "refusals change nothing");

		/* a slot gone stale is taken afresh: logged by id */
		n = fbf_stream_record_logged(p, 5, 1002, T0 + 500, 100, log);
		CHECK(log[0] == FBF_STREAM_LOG_ID, "a stale slot: by id");
		CHECK(fbf_stream_replay(r, log, n, T0 + 500, 100) == n, "replayed");
		CHECK(memcmp(p, r, bytes) == 0, "the same page");
		free(r);
		free(p);
	}
}

#endif							/* FBF_TEST_STREAM_LOG_H */
