/*-------------------------------------------------------------------------
 *
 * fuzz_decode.c
 *	  Fuzzing of the `fbf` type's decoders: the binary validators (recv) of
 *	  both kinds of value, Bloom filters (format version 1) and cuckoo
 *	  window snapshots (version 2), and the hex text decoder (in), which
 *	  take untrusted bytes.
 *
 * Two ways to run it:
 *	- as a standalone random-mutation driver (the default build): starting
 *	  from valid serialized FBFs (every other one in the flat in-memory
 *	  form of fbf 1.0/1.1, as stored datums hold it; every third a cuckoo
 *	  window snapshot), apply random byte
 *	  flips, insertions, deletions, truncations and field-targeted edits
 *	  for a bounded number of iterations, under ASan + UBSan.  A crash or
 *	  sanitizer report fails; so does a mutated input that validates but
 *	  breaks an invariant after decoding.  Prints TAP.
 *	- as a libFuzzer target: clang -fsanitize=fuzzer -DFBF_LIBFUZZER ...
 *
 * Usage: fuzz_decode [iterations [seed]]
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cwin_snap.h"
#include "cwin_window.h"
#include "fbf_codec.h"
#include "fbf_core.h"
#include "legacy.h"
#include "tap.h"

static int	accepted;
static int	legacy_accepted;
static int	cuckoo_accepted;

/* Decode one input as binary and (hex-encoded) as text. */
static int
decode_one(const unsigned char *data, size_t len)
{
	size_t		size;
	const char *why;
	char	   *text;
	unsigned char *bytes;
	size_t		nbytes;

	if (fbf_validate(data, len, &size, &why))
	{
		Fbf		   *f = malloc(size);
		unsigned char *again = malloc(len);
		FbfHash		h = fbf_hash_bytes(data, len);

		fbf_deserialize(data, len, f);
		if (!fbf_check_invariants(f, &why))
			abort();			/* validated input broke an invariant */
		fbf_serialize(f, again);
		if (memcmp(again, data, len) != 0)
			abort();			/* not a fixed point */
		(void) fbf_contains(f, &h, FBF_CHECK_PAIRED);
		(void) fbf_estimate_fpp(f, FBF_CHECK_OPTIMIZED);
		accepted++;
		free(again);
		free(f);
	}

	/* as a cuckoo window snapshot: header and length, then contents */
	if (cwin_snap_validate(data, len, &size, &why))
	{
		CwinSnap   *s;
		FbfHash		h = fbf_hash_bytes(data, len);

		if (size != len)
			abort();			/* the value is never larger than its input */
		s = malloc(size);
		cwin_snap_deserialize(data, len, s);
		if (cwin_snap_check(s, &why))
		{
			unsigned char *again = malloc(len);

			cwin_snap_serialize(s, again);
			if (memcmp(again, data, len) != 0)
				abort();		/* not a fixed point */
			(void) cwin_snap_contains(s, &h);
			(void) cwin_snap_estimate_fpp(s);
			cuckoo_accepted++;
			free(again);
		}
		free(s);
	}

	/* the bytes as a stored datum of fbf 1.0/1.1 (the flat form) */
	if (len >= 4 && !fbf_layout_is_current(data) &&
		fbf_legacy_validate(data, len, &size, &why))
	{
		Fbf		   *f = malloc(size);
		FbfHash		h = fbf_hash_bytes(data, len);

		fbf_from_legacy(data, f);
		if (!fbf_check_invariants(f, &why))
			abort();			/* validated input broke an invariant */
		(void) fbf_contains(f, &h, FBF_CHECK_PAIRED);
		legacy_accepted++;
		free(f);
	}

	/* the text decoder sees the raw bytes as characters */
	bytes = malloc(len / 2 + 1);
	(void) fbf_hex_decode((const char *) data, len, bytes, &nbytes, &why);
	free(bytes);

	/* and the hex form of the input, through both decoders */
	text = malloc(2 * len + 3);
	fbf_hex_encode(data, len, text);
	bytes = malloc(len + 1);
	if (!fbf_hex_decode(text, strlen(text), bytes, &nbytes, &why) ||
		nbytes != len || memcmp(bytes, data, len) != 0)
		abort();
	free(bytes);
	free(text);
	return 0;
}

#ifdef FBF_LIBFUZZER
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return decode_one(data, size);
}
#else

/* a valid cuckoo window snapshot, serialized */
static unsigned char *
seed_cuckoo(uint64_t *s, size_t *len)
{
	CwinWindow	w;
	CwinSnap   *snap;
	const char *why;
	unsigned char *buf;
	int			n = (int) test_rand_below(s, 200);
	size_t		nwaiting = test_rand_below(s, 4);
	FbfHash    *waiting = malloc(sizeof(FbfHash) * (nwaiting + 1));

	if (!cwin_window_init(&w, 12 + (uint32_t) test_rand_below(s, 6),
						  1 + (uint32_t) test_rand_below(s, 2),
						  2 + (int) test_rand_below(s, 15), 256, &why))
		abort();
	for (int i = 0; i < n; i++)
	{
		FbfHash		h = {test_rand(s), test_rand(s)};

		cwin_window_insert(&w, &h);
		if (test_rand_below(s, 40) == 0)
			cwin_window_refresh(&w);
	}
	for (size_t i = 0; i < nwaiting; i++)
	{
		waiting[i].h1 = test_rand(s);
		waiting[i].h2 = test_rand(s);
	}
	nwaiting = cwin_hashes_sort_unique(waiting, nwaiting);
	snap = malloc(cwin_snap_size(&w.layout, w.nparts, nwaiting));
	cwin_snap_init(snap, &w.layout, w.nparts, nwaiting);
	snap->nlive = (uint32_t) w.epochs.nlive;
	snap->epoch = w.epochs.epoch;
	snap->period = 5;
	for (int i = 0; i < w.epochs.nlive; i++)
	{
		snap->parts[i] = w.epochs.parts[i];
		snap->born_at[i] = 1000 - i;
	}
	memcpy(cwin_snap_block(snap, 0), w.blocks, w.block_size * w.nparts);
	memcpy(cwin_snap_deferred(snap), waiting, sizeof(FbfHash) * nwaiting);
	*len = cwin_snap_serialized_size(snap);
	buf = malloc(*len);
	cwin_snap_serialize(snap, buf);
	free(snap);
	free(waiting);
	cwin_window_free(&w);
	return buf;
}

/* a valid value, serialized or (legacy) in the flat form */
static unsigned char *
seed_value(uint64_t *s, size_t *len, bool legacy)
{
	/* filter counts around every stride of the bit-sliced layout */
	static const int counts[] = {3, 4, 5, 6, 8, 9, 16, 17, 33, 58, 64};
	uint32_t	nbits = 64 + (uint32_t) test_rand_below(s, 700);
	int			nfilters = counts[test_rand_below(s, sizeof(counts) / sizeof(counts[0]))];
	uint32_t	nparts = 1 + (uint32_t) test_rand_below(s, 3);
	Fbf		   *f = malloc(fbf_size(nbits, nfilters, nparts));
	unsigned char *buf;
	int			i;
	int			n = (int) test_rand_below(s, 60);

	fbf_init(f, nbits, 1 + (int) test_rand_below(s, 6), nfilters, nparts, 5, 1);
	for (i = 0; i < n; i++)
	{
		uint64_t	e = test_rand(s);
		FbfHash		h = fbf_hash_bytes(&e, sizeof(e));

		fbf_add(f, &h, FBF_CHECK_PAIRED);
		if (test_rand_below(s, 20) == 0)
			fbf_refresh(f, (int64_t) i);
	}
	if (legacy)
		buf = legacy_from_fbf(f, (int) test_rand_below(s, (uint64_t) nfilters), len);
	else
	{
		*len = fbf_serialized_size(f);
		buf = malloc(*len);
		fbf_serialize(f, buf);
	}
	free(f);
	return buf;
}

static void
mutate(uint64_t *s, unsigned char **buf, size_t *len)
{
	int			edits = 1 + (int) test_rand_below(s, 4);

	while (edits-- > 0)
	{
		size_t		pos = *len ? test_rand_below(s, *len) : 0;

		switch (test_rand_below(s, 7))
		{
			case 0:				/* flip a bit */
				if (*len)
					(*buf)[pos] ^= (unsigned char) (1 << test_rand_below(s, 8));
				break;
			case 1:				/* random byte */
				if (*len)
					(*buf)[pos] = (unsigned char) test_rand(s);
				break;
			case 2:				/* truncate */
				*len = pos;
				break;
			case 3:				/* insert a byte */
				*buf = realloc(*buf, *len + 1);
				memmove(*buf + pos + 1, *buf + pos, *len - pos);
				(*buf)[pos] = (unsigned char) test_rand(s);
				(*len)++;
				break;
			case 4:				/* delete a byte */
				if (*len)
				{
					memmove(*buf + pos, *buf + pos + 1, *len - pos - 1);
					(*len)--;
				}
				break;
			case 5:				/* a header field to an edge value */
				if (*len >= 40)
				{
					static const unsigned char edges[] = {0, 1, 2, 3, 32, 33, 63, 64, 65, 0x7f, 0x80, 0xff};

					(*buf)[test_rand_below(s, 40)] = edges[test_rand_below(s, sizeof(edges))];
				}
				break;
			case 6:				/* set a whole word to ones */
				if (*len >= 8)
					memset(*buf + test_rand_below(s, *len - 7), 0xff, 8);
				break;
		}
	}
}

static long iterations = 200000;
static uint64_t fuzz_seed = 4242;

static void
test_fuzz(void)
{
	uint64_t	s = fuzz_seed;
	long		i;
	int			seeds_ok = 0;

	for (i = 0; i < iterations; i++)
	{
		size_t		len;
		bool		cuckoo = (i % 3) == 2;
		bool		legacy = !cuckoo && (i % 2) == 1;
		unsigned char *buf = cuckoo ? seed_cuckoo(&s, &len) : seed_value(&s, &len, legacy);
		size_t		size;
		const char *why;

		if (i < 100 && (cuckoo ? cwin_snap_validate(buf, len, &size, &why) :
						legacy ? fbf_legacy_validate(buf, len, &size, &why) :
						fbf_validate(buf, len, &size, &why)))
			seeds_ok++;
		mutate(&s, &buf, &len);
		decode_one(buf, len);
		free(buf);
	}
	CHECK(seeds_ok == (iterations < 100 ? iterations : 100), "seeds invalid");
	printf("# %ld mutated inputs, %d accepted as valid, %d as valid flat (1.0/1.1) values, %d as valid cuckoo window snapshots\n",
		   iterations, accepted, legacy_accepted, cuckoo_accepted);
}

int
main(int argc, char **argv)
{
	if (argc > 1)
		iterations = strtol(argv[1], NULL, 10);
	if (argc > 2)
		fuzz_seed = strtoull(argv[2], NULL, 10);
	run_test("fuzz the binary and text decoders", test_fuzz);
	return tap_done();
}
#endif
