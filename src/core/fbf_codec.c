/*-------------------------------------------------------------------------
 *
 * fbf_codec.c
 *	  Serialization of an FBF to its portable little-endian form, and
 *	  strict validation of untrusted input.
 *
 * Layout, format version 1 (all integers little-endian):
 *
 *	offset	size	field
 *	0		4		magic "FBF\0"
 *	4		1		format version (1)
 *	5		1		nhashes, k (1..32)
 *	6		2		nfilters, N + 2 (3..64)
 *	8		4		nbits, m, per block (64..2^30)
 *	12		2		nlive (2..nfilters)
 *	14		2		flags (0)
 *	16		4		nparts, P (1..2^20)
 *	20		4		reserved (0)
 *	24		8		epoch (signed, nlive - 1 .. 2^62)
 *	32		8		period (signed, >= 0; 0 = refreshed by hand)
 *	40		per filter, newest first: born_at (int64), then P counts
 *					(uint64, < 2^63), one per partition
 *	...		per filter, newest first, per partition: W = ceil(m / 64)
 *					uint64 words; bit j of a block is bit j % 64 of word
 *					j / 64
 *
 * The in-memory Fbf keeps the filters bit-sliced (fbf_core.h); serializing
 * transposes them back into these per-filter bit arrays and deserializing
 * into slices, so the format is the one fbf 1.0 wrote.
 *
 * Rules beyond the ranges above: the total length is exact and at most
 * 256 MB; filters at logical index >= nlive are unborn (born_at, counts and
 * bits all zero); a live block has a zero count iff it has no bit set; each
 * future block's bits are a subset of the present block's (every insert
 * sets both); bits past nbits in a block's last word are zero.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#include <string.h>

#include "bloom_bits.h"
#include "fbf_codec.h"
#include "fbf_le.h"
#include "fbf_interrupt.h"

const unsigned char fbf_magic[4] = {'F', 'B', 'F', '\0'};

size_t
fbf_serialized_size(const Fbf *f)
{
	return FBF_HEADER_BYTES +
		(size_t) f->nfilters * (8 + (size_t) f->nparts *
								(8 + (size_t) fbf_nwords(f->nbits) * 8));
}

void
fbf_serialize(const Fbf *f, unsigned char *out)
{
	size_t		block_bytes = (size_t) fbf_nwords(f->nbits) * 8;
	unsigned char *p;
	int			i;
	uint32_t	part;

	memcpy(out, fbf_magic, 4);
	out[4] = FBF_FORMAT_VERSION;
	out[5] = (unsigned char) f->nhashes;
	fbf_le16_write(out + 6, f->nfilters);
	fbf_le32_write(out + 8, f->nbits);
	fbf_le16_write(out + 12, f->nlive);
	fbf_le16_write(out + 14, 0);
	fbf_le32_write(out + 16, f->nparts);
	fbf_le32_write(out + 20, 0);
	fbf_le64_write(out + 24, (uint64_t) f->epoch);
	fbf_le64_write(out + 32, (uint64_t) f->period);

	p = out + FBF_HEADER_BYTES;
	for (i = 0; i < f->nfilters; i++)
	{
		fbf_le64_write(p, (uint64_t) f->born_at[fbf_slot(f, i)]);
		p += 8;
		for (part = 0; part < f->nparts; part++, p += 8)
			fbf_le64_write(p, fbf_count_const(f, i, part));
	}

	/*
	 * The bits, transposed out of the slices: logical filter i's block of
	 * partition `part` is at p + (i * nparts + part) * block_bytes, and bit
	 * w of a block is bit w % 8 of its byte w / 8 (little-endian words).
	 */
	for (part = 0; part < f->nparts; part++)
	{
		unsigned char *blocks[FBF_MAX_FILTERS];

		for (i = 0; i < f->nfilters; i++)
			blocks[i] = p + ((size_t) i * f->nparts + part) * block_bytes;
		fbf_store_blocks(f, part, blocks);
	}
}

/*
 * The rules shared by fbf_validate (on serialized input) and
 * fbf_check_invariants (in memory), over an accessor for blocks and counts.
 */
typedef struct FbfView
{
	uint32_t	nbits;
	int			nfilters;
	int			nlive;
	uint32_t	nparts;
	uint64_t	(*word) (const struct FbfView *v, int filter, uint32_t part,
						 uint32_t w);
	uint64_t	(*count) (const struct FbfView *v, int filter, uint32_t part);
	int64_t		(*born_at) (const struct FbfView *v, int filter);
	const void *data;
	int			head;			/* flat in-memory form (legacy) only */
} FbfView;

static bool
check_filters(const FbfView *v, const char **why)
{
	uint32_t	nwords = fbf_nwords(v->nbits);
	uint64_t	tail = v->nbits % 64 ? ~UINT64_C(0) << (v->nbits % 64) : 0;
	int			i;
	uint32_t	p;
	uint32_t	w;

	for (i = 0; i < v->nfilters; i++)
	{
		if (i >= v->nlive && v->born_at(v, i) != 0)
		{
			*why = "A filter past the live ones is not empty.";
			return false;
		}
		for (p = 0; p < v->nparts; p++)
		{
			uint64_t	count = v->count(v, i, p);
			bool		any = false;

			if (count > (uint64_t) INT64_MAX)
			{
				*why = "A filter's element count is out of range.";
				return false;
			}
			if ((v->word(v, i, p, nwords - 1) & tail) != 0)
			{
				*why = "A filter has bits set past its last bit.";
				return false;
			}
			for (w = 0; w < nwords && !any; w++)
			{
				if (w % FBF_INTERRUPT_EVERY == FBF_INTERRUPT_EVERY - 1)
					fbf_check_interrupts();
				any = v->word(v, i, p, w) != 0;
			}
			if (i >= v->nlive)
			{
				if (count != 0 || any)
				{
					*why = "A filter past the live ones is not empty.";
					return false;
				}
			}
			else if ((count == 0) == any)
			{
				*why = "A filter's element count does not match its bits.";
				return false;
			}
		}
	}
	for (p = 0; p < v->nparts; p++)
	{
		for (w = 0; w < nwords; w++)
		{
			if (w % FBF_INTERRUPT_EVERY == FBF_INTERRUPT_EVERY - 1)
				fbf_check_interrupts();
			if ((v->word(v, 0, p, w) & ~v->word(v, 1, p, w)) != 0)
			{
				*why = "The future filter has bits that the present filter lacks.";
				return false;
			}
		}
	}
	return true;
}

/* serialized input: data points at the per-filter metadata */
static size_t
meta_bytes(const FbfView *v)
{
	return (size_t) v->nfilters * (8 + (size_t) v->nparts * 8);
}

static uint64_t
serialized_word(const FbfView *v, int filter, uint32_t part, uint32_t w)
{
	const unsigned char *bits = (const unsigned char *) v->data + meta_bytes(v);
	uint32_t	nwords = fbf_nwords(v->nbits);

	return fbf_le64_read(bits + (((size_t) filter * v->nparts + part) * nwords + w) * 8);
}

static uint64_t
serialized_count(const FbfView *v, int filter, uint32_t part)
{
	return fbf_le64_read((const unsigned char *) v->data +
				   (size_t) filter * (8 + (size_t) v->nparts * 8) + 8 + (size_t) part * 8);
}

static int64_t
serialized_born_at(const FbfView *v, int filter)
{
	return (int64_t) fbf_le64_read((const unsigned char *) v->data +
							 (size_t) filter * (8 + (size_t) v->nparts * 8));
}

static uint64_t
memory_word(const FbfView *v, int filter, uint32_t part, uint32_t w)
{
	return fbf_extract_word((const Fbf *) v->data, filter, part, w);
}

static uint64_t
memory_count(const FbfView *v, int filter, uint32_t part)
{
	return fbf_count_const((const Fbf *) v->data, filter, part);
}

static int64_t
memory_born_at(const FbfView *v, int filter)
{
	const Fbf  *f = v->data;

	return f->born_at[fbf_slot(f, filter)];
}

bool
fbf_validate(const unsigned char *buf, size_t len, size_t *size,
			 const char **why)
{
	uint32_t	nbits;
	int			nhashes;
	int			nfilters;
	int			nlive;
	uint32_t	nparts;
	int64_t		epoch;
	int64_t		period;
	FbfView		v;

	if (len < FBF_HEADER_BYTES)
	{
		*why = "The value is shorter than the 40-byte header.";
		return false;
	}
	if (memcmp(buf, fbf_magic, 4) != 0)
	{
		*why = "The value does not start with the FBF magic bytes.";
		return false;
	}
	if (buf[4] != FBF_FORMAT_VERSION)
	{
		*why = "The format version is not supported (1 is a Bloom filter's, 2 a cuckoo window snapshot's).";
		return false;
	}
	nhashes = buf[5];
	nfilters = fbf_le16_read(buf + 6);
	nbits = fbf_le32_read(buf + 8);
	nlive = fbf_le16_read(buf + 12);
	nparts = fbf_le32_read(buf + 16);
	epoch = (int64_t) fbf_le64_read(buf + 24);
	period = (int64_t) fbf_le64_read(buf + 32);

	if (!fbf_shape_valid(nbits, nhashes, nfilters, nparts, why))
		return false;
	if (fbf_le16_read(buf + 14) != 0 || fbf_le32_read(buf + 20) != 0)
	{
		*why = "Reserved flag bits are set.";
		return false;
	}
	if (nlive < 2 || nlive > nfilters)
	{
		*why = "The number of live filters is out of range.";
		return false;
	}
	if (epoch < nlive - 1 || epoch > FBF_MAX_EPOCH)
	{
		*why = "The epoch is out of range.";
		return false;
	}
	if (period < 0)
	{
		*why = "The refresh period is negative.";
		return false;
	}
	/* shape is valid, so this cannot overflow */
	if (len != FBF_HEADER_BYTES +
		(size_t) nfilters * (8 + (size_t) nparts * (8 + (size_t) fbf_nwords(nbits) * 8)))
	{
		*why = "The length does not match the shape in the header.";
		return false;
	}

	v.nbits = nbits;
	v.nfilters = nfilters;
	v.nlive = nlive;
	v.nparts = nparts;
	v.word = serialized_word;
	v.count = serialized_count;
	v.born_at = serialized_born_at;
	v.data = buf + FBF_HEADER_BYTES;
	v.head = 0;
	if (!check_filters(&v, why))
		return false;

	*size = fbf_size(nbits, nfilters, nparts);
	return true;
}

void
fbf_deserialize(const unsigned char *buf, size_t len, Fbf *f)
{
	uint32_t	nbits = fbf_le32_read(buf + 8);
	int			nfilters = fbf_le16_read(buf + 6);
	uint32_t	nparts = fbf_le32_read(buf + 16);
	uint32_t	nwords = fbf_nwords(nbits);
	const unsigned char *p;
	uint64_t   *c;
	size_t		i;
	uint32_t	part;

	(void) len;
	memset(f, 0, fbf_size(nbits, nfilters, nparts));
	f->layout = FBF_LAYOUT_SLICED;
	f->nbits = nbits;
	f->nhashes = buf[5];
	f->nfilters = (uint16_t) nfilters;
	f->nlive = fbf_le16_read(buf + 12);
	f->head = 0;
	f->nparts = nparts;
	f->stride = (uint32_t) fbf_stride(nfilters);
	f->epoch = (int64_t) fbf_le64_read(buf + 24);
	f->period = (int64_t) fbf_le64_read(buf + 32);

	/* head = 0: logical order is physical order */
	p = buf + FBF_HEADER_BYTES;
	c = fbf_counts_base(f);
	for (i = 0; i < (size_t) nfilters; i++)
	{
		f->born_at[i] = (int64_t) fbf_le64_read(p);
		p += 8;
		for (part = 0; part < nparts; part++, p += 8)
			*c++ = fbf_le64_read(p);
	}

	/* the blocks (little-endian words) transposed into the slices */
	for (part = 0; part < nparts; part++)
	{
		const unsigned char *blocks[FBF_MAX_FILTERS];

		for (i = 0; i < (size_t) nfilters; i++)
			blocks[i] = p + (i * nparts + part) * (size_t) nwords * 8;
		fbf_load_blocks(f, part, blocks);
	}
}

/*
 * What the slice arrays hold besides the filters' bits must be zero: lanes
 * past nfilters (a stride of 64 with fewer filters), the bits of each
 * partition's last byte past its last position, the slack and the padding
 * after it.
 */
static bool
check_slices(const Fbf *f, const char **why)
{
	uint64_t	extra = ~fbf_lane_mask(f->nfilters) & bloom_packed_mask((int) f->stride);
	uint64_t	bytes = fbf_slice_bytes(f);
	unsigned	tail_bits = (unsigned) (((uint64_t) f->nbits * f->stride) % 8);
	const unsigned char *end = (const unsigned char *) f +
		fbf_size(f->nbits, f->nfilters, f->nparts);
	const unsigned char *q;
	uint32_t	p;

	for (p = 0; p < f->nparts; p++)
	{
		const unsigned char *slices = fbf_slices(f, p);
		uint32_t	w;

		if (tail_bits != 0 && (slices[bytes - 1] >> tail_bits) != 0)
		{
			*why = "A slice array has bits set past its last position.";
			return false;
		}
		for (w = 0; extra != 0 && w < f->nbits; w++)
		{
			if ((bloom_packed_get(slices, (int) f->stride, w) & extra) != 0)
			{
				*why = "A slice array has bits set in lanes past the filters.";
				return false;
			}
		}
	}
	for (q = fbf_slices(f, f->nparts); q < end; q++)
	{
		if (*q != 0)
		{
			*why = "The bytes after the slice arrays are not zero.";
			return false;
		}
	}
	return true;
}

/* the rules of an in-memory Fbf's header, the same as fbf_validate's */
static bool
check_header(const Fbf *f, const char **why)
{
	if (f->layout != FBF_LAYOUT_SLICED)
	{
		*why = "The layout tag is not a Bloom filter's.";
		return false;
	}
	if (!fbf_shape_valid(f->nbits, f->nhashes, f->nfilters, f->nparts, why))
		return false;
	if (f->stride != (uint32_t) fbf_stride(f->nfilters))
	{
		*why = "The slice stride does not match the number of filters.";
		return false;
	}
	if (f->nlive < 2 || f->nlive > f->nfilters || f->head >= f->nfilters)
	{
		*why = "The ring bookkeeping is out of range.";
		return false;
	}
	if (f->epoch < f->nlive - 1 || f->epoch > FBF_MAX_EPOCH || f->period < 0)
	{
		*why = "The epoch or period is out of range.";
		return false;
	}
	return true;
}

bool
fbf_check_header(const void *mem, size_t len, const char **why)
{
	const Fbf  *f = mem;

	if (len < sizeof(Fbf))
	{
		*why = "The value is shorter than the header of a Bloom filter.";
		return false;
	}
	if (!check_header(f, why))
		return false;
	/* the shape is valid, so this cannot overflow */
	if (len != fbf_size(f->nbits, f->nfilters, f->nparts))
	{
		*why = "The length does not match the shape in the header.";
		return false;
	}
	return true;
}

bool
fbf_check_invariants(const Fbf *f, const char **why)
{
	FbfView		v;

	if (!check_header(f, why))
		return false;
	v.nbits = f->nbits;
	v.nfilters = f->nfilters;
	v.nlive = f->nlive;
	v.nparts = f->nparts;
	v.word = memory_word;
	v.count = memory_count;
	v.born_at = memory_born_at;
	v.data = f;
	v.head = 0;
	return check_slices(f, why) && check_filters(&v, why);
}

/* ---------------------------------------------------------------------- */

/*
 * The flat in-memory form of fbf 1.0 and 1.1, native byte order:
 *
 *	offset	size	field
 *	0		4		nbits
 *	4		2		nhashes
 *	6		2		nfilters
 *	8		2		nlive
 *	10		2		head (physical slot of logical 0)
 *	12		4		nparts
 *	16		8		epoch
 *	24		8		period
 *	32		8 * n	born_at, by physical slot
 *	...		8 * n * P	counts, by physical slot, then partition
 *	...		8 * n * P * W	words, by physical slot, then partition
 *
 * fbf_flat_size() bytes in all.
 */
#define LEGACY_HEADER_BYTES 32

static uint64_t
native_u64(const unsigned char *p)
{
	uint64_t	v;

	memcpy(&v, p, 8);
	return v;
}

static uint32_t
native_u32(const unsigned char *p)
{
	uint32_t	v;

	memcpy(&v, p, 4);
	return v;
}

static uint16_t
native_u16(const unsigned char *p)
{
	uint16_t	v;

	memcpy(&v, p, 2);
	return v;
}

static int
legacy_slot(const FbfView *v, int filter)
{
	return (v->head + filter) % v->nfilters;
}

static uint64_t
legacy_word(const FbfView *v, int filter, uint32_t part, uint32_t w)
{
	const unsigned char *words = (const unsigned char *) v->data + LEGACY_HEADER_BYTES +
		(size_t) v->nfilters * (8 + (size_t) v->nparts * 8);

	return native_u64(words + (((size_t) legacy_slot(v, filter) * v->nparts + part) *
							   fbf_nwords(v->nbits) + w) * 8);
}

static uint64_t
legacy_count(const FbfView *v, int filter, uint32_t part)
{
	return native_u64((const unsigned char *) v->data + LEGACY_HEADER_BYTES +
					  (size_t) v->nfilters * 8 +
					  ((size_t) legacy_slot(v, filter) * v->nparts + part) * 8);
}

static int64_t
legacy_born_at(const FbfView *v, int filter)
{
	return (int64_t) native_u64((const unsigned char *) v->data + LEGACY_HEADER_BYTES +
								(size_t) legacy_slot(v, filter) * 8);
}

bool
fbf_layout_is_current(const void *mem)
{
	return native_u32(mem) == FBF_LAYOUT_SLICED;
}

bool
fbf_legacy_validate(const void *mem, size_t len, size_t *size, const char **why)
{
	const unsigned char *m = mem;
	uint32_t	nbits;
	int			nhashes;
	int			nfilters;
	int			nlive;
	int			head;
	uint32_t	nparts;
	int64_t		epoch;
	int64_t		period;
	FbfView		v;

	if (len < LEGACY_HEADER_BYTES)
	{
		*why = "The value is shorter than its header.";
		return false;
	}
	nbits = native_u32(m);
	nhashes = native_u16(m + 4);
	nfilters = native_u16(m + 6);
	nlive = native_u16(m + 8);
	head = native_u16(m + 10);
	nparts = native_u32(m + 12);
	epoch = (int64_t) native_u64(m + 16);
	period = (int64_t) native_u64(m + 24);
	if (!fbf_shape_valid(nbits, nhashes, nfilters, nparts, why))
		return false;
	if (nlive < 2 || nlive > nfilters || head >= nfilters)
	{
		*why = "The ring bookkeeping is out of range.";
		return false;
	}
	if (epoch < nlive - 1 || epoch > FBF_MAX_EPOCH || period < 0)
	{
		*why = "The epoch or period is out of range.";
		return false;
	}
	if (len != fbf_flat_size(nbits, nfilters, nparts))
	{
		*why = "The length does not match the shape in the header.";
		return false;
	}
	v.nbits = nbits;
	v.nfilters = nfilters;
	v.nlive = nlive;
	v.nparts = nparts;
	v.word = legacy_word;
	v.count = legacy_count;
	v.born_at = legacy_born_at;
	v.data = mem;
	v.head = head;
	if (!check_filters(&v, why))
		return false;
	*size = fbf_size(nbits, nfilters, nparts);
	return true;
}

void
fbf_from_legacy(const void *mem, Fbf *f)
{
	const unsigned char *m = mem;
	uint32_t	nbits = native_u32(m);
	int			nfilters = native_u16(m + 6);
	uint32_t	nparts = native_u32(m + 12);
	uint32_t	nwords = fbf_nwords(nbits);
	FbfView		v;
	int			i;
	uint32_t	part;

	memset(f, 0, fbf_size(nbits, nfilters, nparts));
	f->layout = FBF_LAYOUT_SLICED;
	f->nbits = nbits;
	f->nhashes = native_u16(m + 4);
	f->nfilters = (uint16_t) nfilters;
	f->nlive = native_u16(m + 8);
	f->head = 0;
	f->nparts = nparts;
	f->stride = (uint32_t) fbf_stride(nfilters);
	f->epoch = (int64_t) native_u64(m + 16);
	f->period = (int64_t) native_u64(m + 24);

	/* read through a view in logical order; f has head = 0 */
	v.nbits = nbits;
	v.nfilters = nfilters;
	v.nlive = f->nlive;
	v.nparts = nparts;
	v.data = mem;
	v.head = native_u16(m + 10);
	for (i = 0; i < nfilters; i++)
	{
		f->born_at[i] = legacy_born_at(&v, i);
		for (part = 0; part < nparts; part++)
			*fbf_count(f, i, part) = legacy_count(&v, i, part);
	}
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	/* native words are not little-endian bytes here: bit by bit */
	for (i = 0; i < nfilters; i++)
	{
		for (part = 0; part < nparts; part++)
		{
			unsigned char *slices = fbf_slices(f, part);
			uint32_t	w;

			for (w = 0; w < nwords; w++)
			{
				uint64_t	word = legacy_word(&v, i, part, w);

				while (word != 0)
				{
					bloom_packed_or(slices, (int) f->stride,
									w * 64 + (uint32_t) __builtin_ctzll(word),
									UINT64_C(1) << i);
					word &= word - 1;
				}
			}
		}
	}
#else
	/* native words are little-endian bytes: the blocks transposed */
	for (part = 0; part < nparts; part++)
	{
		const unsigned char *words = m + LEGACY_HEADER_BYTES +
			(size_t) nfilters * (8 + (size_t) nparts * 8);
		const unsigned char *blocks[FBF_MAX_FILTERS];

		for (i = 0; i < nfilters; i++)
			blocks[i] = words + ((size_t) legacy_slot(&v, i) * nparts + part) *
				nwords * 8;
		fbf_load_blocks(f, part, blocks);
	}
#endif
}

void
fbf_hex_encode(const unsigned char *buf, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t		i;

	*out++ = '\\';
	*out++ = 'x';
	for (i = 0; i < len; i++)
	{
		if (i % FBF_INTERRUPT_EVERY == FBF_INTERRUPT_EVERY - 1)
			fbf_check_interrupts();
		*out++ = digits[buf[i] >> 4];
		*out++ = digits[buf[i] & 15];
	}
	*out = '\0';
}

static int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool
fbf_hex_decode(const char *text, size_t len, unsigned char *out,
			   size_t *outlen, const char **why)
{
	size_t		i;

	if (len < 2 || text[0] != '\\' || text[1] != 'x')
	{
		*why = "An fbf value's text form starts with \"\\x\".";
		return false;
	}
	if ((len - 2) % 2 != 0)
	{
		*why = "The hexadecimal digits do not come in pairs.";
		return false;
	}
	for (i = 2; i < len; i += 2)
	{
		int			hi = hex_value(text[i]);
		int			lo = hex_value(text[i + 1]);

		if (i % (2 * FBF_INTERRUPT_EVERY) == 0)
			fbf_check_interrupts();

		if (hi < 0 || lo < 0)
		{
			*why = "The text form contains a character that is not a hexadecimal digit.";
			return false;
		}
		out[(i - 2) / 2] = (unsigned char) (hi << 4 | lo);
	}
	*outlen = (len - 2) / 2;
	return true;
}
