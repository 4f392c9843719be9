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
 * A second round (standalone only) fuzzes values in memory, as the
 * server's functions receive them in an `fbf` datum: valid in-memory
 * values of both kinds (Fbf, CwinSnap), mutated the same ways, in a
 * buffer of exactly their mutated length, go through the O(1) checks
 * every function makes first (fbf_check_header, cwin_snap_check_header),
 * each kind also through the other's; what a check accepts goes through
 * every reading and writing function of its kind, whatever its bits,
 * counts and blocks hold.  A read or write outside the buffer is a
 * sanitizer report; a value of one kind accepted as the other fails.
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

/* ---- values in memory ---- */

static int	memory_bloom_accepted;
static int	memory_cuckoo_accepted;

/* a valid in-memory Fbf; *len bytes */
static unsigned char *
memory_bloom(uint64_t *s, size_t *len)
{
	size_t		slen;
	unsigned char *ser = seed_value(s, &slen, false);
	size_t		size;
	const char *why;
	unsigned char *mem;

	if (!fbf_validate(ser, slen, &size, &why))
		abort();
	mem = malloc(size);
	fbf_deserialize(ser, slen, (Fbf *) mem);
	/* a ring turned some, so head is not always 0 */
	for (uint64_t i = test_rand_below(s, 4); i > 0; i--)
		fbf_refresh((Fbf *) mem, (int64_t) i);
	free(ser);
	*len = size;
	return mem;
}

/* a valid in-memory snapshot; *len bytes */
static unsigned char *
memory_cuckoo(uint64_t *s, size_t *len)
{
	size_t		slen;
	unsigned char *ser = seed_cuckoo(s, &slen);
	size_t		size;
	const char *why;
	unsigned char *mem;

	if (!cwin_snap_validate(ser, slen, &size, &why))
		abort();
	mem = malloc(size);
	cwin_snap_deserialize(ser, slen, (CwinSnap *) mem);
	free(ser);
	*len = size;
	return mem;
}

/*
 * Everything the server does with a Bloom value that passed
 * fbf_check_header: fbf_contains, fbf_add, fbf_refresh, fbf_resize,
 * fbf_union, fbf_info, fbf_estimated_fpp, out/send, and the full check.
 */
static void
use_bloom(const Fbf *f, size_t len, uint64_t *s)
{
	FbfHash		h = {test_rand(s), test_rand(s)};
	Fbf		   *copy = malloc(len);
	Fbf		   *other;
	unsigned char *ser;
	int			nfilters = FBF_MIN_FILTERS + (int) test_rand_below(s, FBF_MAX_FILTERS - 2);
	const char *why;

	(void) fbf_contains(f, &h, FBF_CHECK_SIMPLE);
	(void) fbf_contains(f, &h, FBF_CHECK_OPTIMIZED);
	(void) fbf_contains(f, &h, FBF_CHECK_PAIRED);
	(void) fbf_estimate_fpp(f, FBF_CHECK_OPTIMIZED);
	for (int i = 0; i < f->nfilters; i++)
		(void) fbf_filter_count(f, i);
	(void) fbf_check_invariants(f, &why);
	ser = malloc(fbf_serialized_size(f));
	fbf_serialize(f, ser);
	free(ser);

	memcpy(copy, f, len);
	fbf_add(copy, &h, FBF_CHECK_OPTIMIZED);
	fbf_refresh(copy, 7);
	(void) fbf_refresh_within(copy, 100, 10);

	/* resized, as fbf_resize does it (only fbf_shape_valid shapes) */
	if (fbf_shape_valid(f->nbits, f->nhashes, nfilters, f->nparts, &why))
	{
		other = malloc(fbf_size(f->nbits, nfilters, f->nparts));
		fbf_resize(other, f, nfilters);
		free(other);
	}

	/* merged with itself and with the refreshed copy, as fbf_union does */
	memcpy(copy, f, len);
	fbf_refresh(copy, 8);
	if (fbf_same_shape(copy, f, &why))
		fbf_union_into(copy, f);
	other = malloc(len);
	memcpy(other, f, len);
	fbf_union_into(other, f);
	free(other);
	free(copy);
}

/*
 * Everything the server does with a cuckoo snapshot that passed
 * cwin_snap_check_header: fbf_contains, fbf_info, fbf_estimated_fpp,
 * out/send, and the full check.
 */
static void
use_cuckoo(const CwinSnap *snap, uint64_t *s)
{
	FbfHash		h = {test_rand(s), test_rand(s)};
	uint64_t	counts[CWIN_MAX_LIVE];
	unsigned char *ser;
	const char *why;

	(void) cwin_snap_contains(snap, &h);
	cwin_snap_counts(snap, counts);
	(void) cwin_snap_estimate_fpp(snap);
	(void) cwin_snap_block_size(snap);
	(void) cwin_snap_check(snap, &why);
	ser = malloc(cwin_snap_serialized_size(snap));
	cwin_snap_serialize(snap, ser);
	free(ser);
}

static void
test_memory(long n, uint64_t seed)
{
	uint64_t	s = seed;

	for (long i = 0; i < n; i++)
	{
		bool		cuckoo = (i % 2) == 1;
		size_t		len;
		unsigned char *buf = cuckoo ? memory_cuckoo(&s, &len) : memory_bloom(&s, &len);
		unsigned char *exact;
		const char *why;
		bool		as_bloom;
		bool		as_cuckoo;

		if (i < 100)
			CHECK(cuckoo ? cwin_snap_check_header(buf, len, &why) &&
				  cwin_snap_check((CwinSnap *) buf, &why) :
				  fbf_check_header(buf, len, &why) &&
				  fbf_check_invariants((Fbf *) buf, &why),
				  "in-memory seed %ld invalid: %s", i, why);
		if (i < 100)
		{
			/* the other kind's check refuses it, and so do other lengths */
			CHECK(!(cuckoo ? fbf_check_header(buf, len, &why) :
					cwin_snap_check_header(buf, len, &why)),
				  "in-memory seed %ld accepted as the other kind", i);
			CHECK(!(cuckoo ? cwin_snap_check_header(buf, len - 8, &why) :
					fbf_check_header(buf, len - 8, &why)),
				  "in-memory seed %ld accepted 8 bytes short", i);
			CHECK(!(cuckoo ? cwin_snap_check_header(buf, len + 8, &why) :
					fbf_check_header(buf, len + 8, &why)),
				  "in-memory seed %ld accepted 8 bytes long", i);
		}
		mutate(&s, &buf, &len);

		/* the value in a buffer of exactly its length, as in a datum */
		exact = malloc(len ? len : 1);
		memcpy(exact, buf, len);
		free(buf);

		as_bloom = len >= 4 && fbf_check_header(exact, len, &why);
		as_cuckoo = len >= 4 && cwin_snap_check_header(exact, len, &why);
		CHECK(!(as_bloom && as_cuckoo), "a value accepted as both kinds");
		if (as_bloom)
		{
			use_bloom((const Fbf *) exact, len, &s);
			memory_bloom_accepted++;
		}
		if (as_cuckoo)
		{
			use_cuckoo((const CwinSnap *) exact, &s);
			memory_cuckoo_accepted++;
		}
		free(exact);
	}
	printf("# %ld mutated in-memory values, %d accepted by fbf_check_header, %d by cwin_snap_check_header\n",
		   n, memory_bloom_accepted, memory_cuckoo_accepted);
	CHECK(memory_bloom_accepted > 0 && memory_cuckoo_accepted > 0,
		  "no mutated value of some kind passed its header check");
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

static void
test_memory_round(void)
{
	test_memory(iterations / 10, fuzz_seed + 1);
}

int
main(int argc, char **argv)
{
	if (argc > 1)
		iterations = strtol(argv[1], NULL, 10);
	if (argc > 2)
		fuzz_seed = strtoull(argv[2], NULL, 10);
	run_test("fuzz the binary and text decoders", test_fuzz);
	run_test("fuzz values in memory through the header checks and every function",
			 test_memory_round);
	return tap_done();
}
#endif
