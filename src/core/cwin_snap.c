/*-------------------------------------------------------------------------
 *
 * cwin_snap.c
 *	  A cuckoo window's snapshot, in memory and in its portable form: see
 *	  cwin_snap.h.
 *
 * Portable form, format version 2, kind 1 (all integers little-endian):
 *
 *	offset	size	field
 *	0		4		magic "FBF\0"
 *	4		1		format version (2)
 *	5		1		kind (1: a cuckoo window)
 *	6		1		f, fingerprint bits (12..27)
 *	7		1		nlive, live epochs (2..16)
 *	8		4		nbuckets per block (2..65536)
 *	12		4		nparts, P (1..2^20)
 *	16		4		ndeferred, operations waiting
 *	20		4		reserved (0)
 *	24		8		epoch (signed, nlive - 1 .. 2^62)
 *	32		8		period (signed, >= 0; 0 = none)
 *	40		64		parts[16], key partitions by age (uint32)
 *	104		128		born_at[16], wall clock by age (int64)
 *	232		P blocks of cwin_block_size bytes: the base (int64) and the 16
 *					per-tag counts (uint32), then the buckets' bit string
 *					and its zero slack as cwin_block.h defines them
 *	...		ndeferred * 16: h1, h2 (uint64 each), ascending, distinct
 *
 * The length is exact and at most 256 MB (FBF_MAX_BYTES).
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#include "cwin_snap.h"

#include <stdlib.h>
#include <string.h>

#include "fbf_codec.h"
#include "fbf_core.h"
#include "fbf_le.h"

_Static_assert(sizeof(CwinSnap) == CWIN_SNAP_HEADER_BYTES,
			   "the in-memory header is the serialized one's size");
_Static_assert(sizeof(CwinHeader) == 8 + 4 * CWIN_TAGS,
			   "a block header is its base and per-tag counts");

/* ---- shape ---- */

bool
cwin_snap_layout(uint32_t fp_bits, uint32_t nbuckets, CwinLayout *layout,
				 const char **why)
{
	if (fp_bits < CWIN_MIN_FP_BITS || fp_bits > CWIN_MAX_FP_BITS)
	{
		*why = "The fingerprint must have 12 to 27 bits.";
		return false;
	}
	if (nbuckets < 2 || nbuckets > 65536)
	{
		*why = "A block must hold 2 to 65536 buckets.";
		return false;
	}
	layout->fp_bits = fp_bits;
	layout->bucket_bits = 12 + CWIN_BUCKET_SLOTS * fp_bits;
	layout->nbuckets = nbuckets;
	layout->max_kicks = CWIN_MAX_KICKS;
	return true;
}

size_t
cwin_snap_size(const CwinLayout *layout, uint32_t nparts, size_t ndeferred)
{
	return CWIN_SNAP_HEADER_BYTES + (size_t) nparts * cwin_block_size(layout) +
		ndeferred * sizeof(FbfHash);
}

void
cwin_snap_init(CwinSnap *s, const CwinLayout *layout, uint32_t nparts,
			   size_t ndeferred)
{
	memset(s, 0, cwin_snap_size(layout, nparts, ndeferred));
	s->layout = CWIN_SNAP_LAYOUT;
	s->fp_bits = layout->fp_bits;
	s->nbuckets = layout->nbuckets;
	s->nparts = nparts;
	s->ndeferred = (uint32_t) ndeferred;
}

void
cwin_snap_epochs(const CwinSnap *s, CwinEpochs *epochs)
{
	epochs->epoch = s->epoch;
	epochs->nlive = (int) s->nlive;
	for (int i = 0; i < CWIN_MAX_LIVE; i++)
		epochs->parts[i] = i < (int) s->nlive ? s->parts[i] : 0;
}

void
cwin_snap_view(const CwinSnap *s, CwinWindow *w)
{
	const char *why;

	memset(w, 0, sizeof(*w));
	cwin_snap_layout(s->fp_bits, s->nbuckets, &w->layout, &why);
	w->nparts = s->nparts;
	cwin_snap_epochs(s, &w->epochs);
	w->block_size = cwin_block_size(&w->layout);
	w->blocks = cwin_snap_block(s, 0);
	w->deferred = cwin_snap_deferred(s);
	w->ndeferred = s->ndeferred;
	w->deferred_cap = s->ndeferred;
}

static int
hash_cmp(const FbfHash *a, const FbfHash *b)
{
	if (a->h1 != b->h1)
		return a->h1 < b->h1 ? -1 : 1;
	if (a->h2 != b->h2)
		return a->h2 < b->h2 ? -1 : 1;
	return 0;
}

static int
hash_qsort_cmp(const void *a, const void *b)
{
	return hash_cmp(a, b);
}

size_t
cwin_hashes_sort_unique(FbfHash *hashes, size_t n)
{
	size_t		kept = 0;

	if (n == 0)
		return 0;
	qsort(hashes, n, sizeof(FbfHash), hash_qsort_cmp);
	for (size_t i = 0; i < n; i++)
		if (kept == 0 || hash_cmp(&hashes[kept - 1], &hashes[i]) != 0)
			hashes[kept++] = hashes[i];
	return kept;
}

/* ---- reading ---- */

bool
cwin_snap_contains(const CwinSnap *s, const FbfHash *hash)
{
	CwinWindow	w;
	CwinKey		key;
	const FbfHash *d = cwin_snap_deferred(s);
	size_t		lo = 0;
	size_t		hi = s->ndeferred;

	cwin_snap_view(s, &w);
	cwin_key(&w.layout, &w.epochs, hash, &key);
	if (cwin_block_contains(&w.layout, cwin_window_block(&w, fbf_part(hash, w.nparts)),
							&w.epochs, &key))
		return true;
	/* the waiting operations are sorted */
	while (lo < hi)
	{
		size_t		mid = lo + (hi - lo) / 2;
		int			c = hash_cmp(&d[mid], hash);

		if (c == 0)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

void
cwin_snap_counts(const CwinSnap *s, uint64_t *counts)
{
	for (uint32_t i = 0; i < s->nlive; i++)
		counts[i] = 0;
	for (uint32_t p = 0; p < s->nparts; p++)
	{
		const CwinHeader *h = cwin_header_c(cwin_snap_block(s, p));

		for (uint32_t i = 0; i < s->nlive; i++)
		{
			int64_t		e = s->epoch - (int64_t) i;

			if (e >= h->base && e <= h->base + (CWIN_TAGS - 1))
				counts[i] += h->count[e & (CWIN_TAGS - 1)];
		}
	}
}

double
cwin_snap_estimate_fpp(const CwinSnap *s)
{
	CwinWindow	w;

	cwin_snap_view(s, &w);
	return cwin_window_estimate_fpp(&w);
}

/* ---- checks shared by the serialized and the in-memory form ---- */

/* the header's rules, the layout field aside; sets *block_size */
static bool
check_header(const CwinSnap *s, size_t *block_size, const char **why)
{
	CwinLayout	layout;

	if (!cwin_snap_layout(s->fp_bits, s->nbuckets, &layout, why))
		return false;
	if (s->nparts < 1 || s->nparts > FBF_MAX_PARTS)
	{
		*why = "A cuckoo window has 1 to 2^20 partitions.";
		return false;
	}
	if (s->nlive < CWIN_MIN_LIVE || s->nlive > CWIN_MAX_LIVE)
	{
		*why = "A cuckoo window has 2 to 16 live epochs.";
		return false;
	}
	if (s->epoch < (int64_t) s->nlive - 1 || s->epoch > FBF_MAX_EPOCH)
	{
		*why = "The epoch is out of range.";
		return false;
	}
	if (s->period < 0)
	{
		*why = "The refresh period is negative.";
		return false;
	}
	for (uint32_t i = 0; i < CWIN_MAX_LIVE; i++)
	{
		uint32_t	q = s->parts[i];

		if (i >= s->nlive)
		{
			if (q != 0 || s->born_at[i] != 0)
			{
				*why = "An epoch past the live ones has key partitions or a birth time.";
				return false;
			}
			continue;
		}
		/* a power-of-two fraction of the partitions, never fewer toward now */
		if (q < 1 || q > s->nparts || s->nparts % q != 0 ||
			((s->nparts / q) & (s->nparts / q - 1)) != 0)
		{
			*why = "An epoch's key partitions are not a power-of-two fraction of the partitions.";
			return false;
		}
		if (i > 0 && q > s->parts[i - 1])
		{
			*why = "An epoch has more key partitions than a younger one.";
			return false;
		}
	}
	*block_size = cwin_block_size(&layout);
	return true;
}

/* ---- the portable form ---- */

bool
cwin_snap_is_serialized(const unsigned char *buf, size_t len)
{
	return len >= 5 && memcmp(buf, fbf_magic, 4) == 0 &&
		buf[4] == CWIN_SNAP_FORMAT_VERSION;
}

size_t
cwin_snap_serialized_size(const CwinSnap *s)
{
	return CWIN_SNAP_HEADER_BYTES + (size_t) s->nparts * cwin_snap_block_size(s) +
		(size_t) s->ndeferred * 16;
}

void
cwin_snap_serialize(const CwinSnap *s, unsigned char *out)
{
	size_t		block_size = cwin_snap_block_size(s);
	const FbfHash *d = cwin_snap_deferred(s);
	unsigned char *p;

	memcpy(out, fbf_magic, 4);
	out[4] = CWIN_SNAP_FORMAT_VERSION;
	out[5] = CWIN_SNAP_KIND_CUCKOO;
	out[6] = (unsigned char) s->fp_bits;
	out[7] = (unsigned char) s->nlive;
	fbf_le32_write(out + 8, s->nbuckets);
	fbf_le32_write(out + 12, s->nparts);
	fbf_le32_write(out + 16, s->ndeferred);
	fbf_le32_write(out + 20, 0);
	fbf_le64_write(out + 24, (uint64_t) s->epoch);
	fbf_le64_write(out + 32, (uint64_t) s->period);
	for (int i = 0; i < CWIN_MAX_LIVE; i++)
	{
		fbf_le32_write(out + 40 + 4 * i, s->parts[i]);
		fbf_le64_write(out + 104 + 8 * i, (uint64_t) s->born_at[i]);
	}
	p = out + CWIN_SNAP_HEADER_BYTES;
	for (uint32_t b = 0; b < s->nparts; b++, p += block_size)
	{
		const uint8_t *block = cwin_snap_block(s, b);
		const CwinHeader *h = cwin_header_c(block);

		fbf_le64_write(p, (uint64_t) h->base);
		for (int t = 0; t < CWIN_TAGS; t++)
			fbf_le32_write(p + 8 + 4 * t, h->count[t]);
		/* the buckets are a little-endian bit string already */
		memcpy(p + sizeof(CwinHeader), block + sizeof(CwinHeader),
			   block_size - sizeof(CwinHeader));
	}
	for (uint32_t i = 0; i < s->ndeferred; i++, p += 16)
	{
		fbf_le64_write(p, d[i].h1);
		fbf_le64_write(p + 8, d[i].h2);
	}
}

/* the header fields of a serialized snapshot (at least 232 bytes) */
static void
read_header(const unsigned char *buf, CwinSnap *s)
{
	s->layout = CWIN_SNAP_LAYOUT;
	s->fp_bits = buf[6];
	s->nlive = buf[7];
	s->nbuckets = fbf_le32_read(buf + 8);
	s->nparts = fbf_le32_read(buf + 12);
	s->ndeferred = fbf_le32_read(buf + 16);
	s->epoch = (int64_t) fbf_le64_read(buf + 24);
	s->period = (int64_t) fbf_le64_read(buf + 32);
	for (int i = 0; i < CWIN_MAX_LIVE; i++)
	{
		s->parts[i] = fbf_le32_read(buf + 40 + 4 * i);
		s->born_at[i] = (int64_t) fbf_le64_read(buf + 104 + 8 * i);
	}
}

bool
cwin_snap_validate(const unsigned char *buf, size_t len, size_t *size,
				   const char **why)
{
	CwinSnap	s;
	size_t		block_size;
	size_t		expected;

	if (len < CWIN_SNAP_HEADER_BYTES)
	{
		*why = "The value is shorter than the 232-byte header of a cuckoo window snapshot.";
		return false;
	}
	if (memcmp(buf, fbf_magic, 4) != 0)
	{
		*why = "The value does not start with the FBF magic bytes.";
		return false;
	}
	if (buf[4] != CWIN_SNAP_FORMAT_VERSION)
	{
		*why = "The format version is not 2, a cuckoo window snapshot's.";
		return false;
	}
	if (buf[5] != CWIN_SNAP_KIND_CUCKOO)
	{
		*why = "The kind of value is not supported (only 1, a cuckoo window, is).";
		return false;
	}
	if (fbf_le32_read(buf + 20) != 0)
	{
		*why = "Reserved bytes are set.";
		return false;
	}
	read_header(buf, &s);
	if (!check_header(&s, &block_size, why))
		return false;
	/* shape is valid: at most 2^20 blocks of under 1 MB, no overflow */
	expected = CWIN_SNAP_HEADER_BYTES + (size_t) s.nparts * block_size +
		(size_t) s.ndeferred * 16;
	if (expected > FBF_MAX_BYTES)
	{
		*why = "The value is larger than 256 MB.";
		return false;
	}
	if (len != expected)
	{
		*why = "The length does not match the shape in the header.";
		return false;
	}
	*size = expected;
	return true;
}

void
cwin_snap_deserialize(const unsigned char *buf, size_t len, CwinSnap *s)
{
	const unsigned char *p = buf + CWIN_SNAP_HEADER_BYTES;
	size_t		block_size;
	FbfHash    *d;

	(void) len;
	memset(s, 0, CWIN_SNAP_HEADER_BYTES);
	read_header(buf, s);
	block_size = cwin_snap_block_size(s);
	for (uint32_t b = 0; b < s->nparts; b++, p += block_size)
	{
		uint8_t    *block = cwin_snap_block(s, b);
		CwinHeader *h = cwin_header(block);

		h->base = (int64_t) fbf_le64_read(p);
		for (int t = 0; t < CWIN_TAGS; t++)
			h->count[t] = fbf_le32_read(p + 8 + 4 * t);
		memcpy(block + sizeof(CwinHeader), p + sizeof(CwinHeader),
			   block_size - sizeof(CwinHeader));
	}
	d = cwin_snap_deferred(s);
	for (uint32_t i = 0; i < s->ndeferred; i++, p += 16)
	{
		d[i].h1 = fbf_le64_read(p);
		d[i].h2 = fbf_le64_read(p + 8);
	}
}

bool
cwin_snap_check_header(const void *mem, size_t len, const char **why)
{
	const CwinSnap *s = mem;
	size_t		block_size;

	if (len < CWIN_SNAP_HEADER_BYTES)
	{
		*why = "The value is shorter than the 232-byte header of a cuckoo window snapshot.";
		return false;
	}
	if (s->layout != CWIN_SNAP_LAYOUT)
	{
		*why = "The layout tag is not a cuckoo window snapshot's.";
		return false;
	}
	if (!check_header(s, &block_size, why))
		return false;
	/* as in cwin_snap_validate: no overflow */
	if (len != CWIN_SNAP_HEADER_BYTES + (size_t) s->nparts * block_size +
		(size_t) s->ndeferred * sizeof(FbfHash))
	{
		*why = "The length does not match the shape in the header.";
		return false;
	}
	return true;
}

bool
cwin_snap_check(const CwinSnap *s, const char **why)
{
	CwinLayout	layout;
	size_t		block_size;
	const FbfHash *d;

	if (s->layout != CWIN_SNAP_LAYOUT)
	{
		*why = "The layout tag is wrong.";
		return false;
	}
	if (!check_header(s, &block_size, why))
		return false;
	cwin_snap_layout(s->fp_bits, s->nbuckets, &layout, why);
	for (uint32_t p = 0; p < s->nparts; p++)
	{
		const uint8_t *block = cwin_snap_block(s, p);
		const CwinHeader *h = cwin_header_c(block);

		if (h->base < 0 || h->base > s->epoch)
		{
			*why = "A block's sweep base is out of range (negative, or after the epoch).";
			return false;
		}
		if (!cwin_block_check(&layout, block, why))
			return false;
		for (uint32_t t = 0; t < CWIN_TAGS; t++)
		{
			if (cwin_tag_epoch(h->base, t) > s->epoch && h->count[t] != 0)
			{
				*why = "A block holds entries of an epoch after the current one.";
				return false;
			}
		}
	}
	d = cwin_snap_deferred(s);
	for (uint32_t i = 1; i < s->ndeferred; i++)
	{
		if (hash_cmp(&d[i - 1], &d[i]) >= 0)
		{
			*why = "The waiting operations are not in ascending order, or repeat.";
			return false;
		}
	}
	return true;
}
