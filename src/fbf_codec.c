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
 *	8		4		nbits, m (64..2^30)
 *	12		2		nlive (2..nfilters)
 *	14		2		flags (0)
 *	16		8		epoch (signed, nlive - 1 .. 2^62)
 *	24		8		period (signed, >= 0; 0 = refreshed by hand)
 *	32		16 * nfilters	per filter, newest first: born_at (int64),
 *					count (uint64)
 *	...		nfilters * W * 8	filter bits, newest first, each filter as
 *					W = ceil(nbits / 64) uint64 words; bit j of a filter
 *					is bit j % 64 of word j / 64
 *
 * Rules beyond the ranges above: the total length is exact; filters at
 * logical index >= nlive are unborn (born_at, count and bits all zero); a
 * live filter has a zero count iff it has no bit set; the future filter's
 * bits are a subset of the present filter's (every insert sets both); bits
 * past nbits in a filter's last word are zero.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#include <string.h>

#include "bloom.h"
#include "fbf_codec.h"

const unsigned char fbf_magic[4] = {'F', 'B', 'F', '\0'};

static void
put_u16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char) v;
	p[1] = (unsigned char) (v >> 8);
}

static void
put_u32(unsigned char *p, uint32_t v)
{
	int			i;

	for (i = 0; i < 4; i++)
		p[i] = (unsigned char) (v >> (8 * i));
}

static void
put_u64(unsigned char *p, uint64_t v)
{
	int			i;

	for (i = 0; i < 8; i++)
		p[i] = (unsigned char) (v >> (8 * i));
}

static uint16_t
get_u16(const unsigned char *p)
{
	return (uint16_t) (p[0] | (p[1] << 8));
}

static uint32_t
get_u32(const unsigned char *p)
{
	return (uint32_t) p[0] | ((uint32_t) p[1] << 8) |
		((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 24);
}

static uint64_t
get_u64(const unsigned char *p)
{
	uint64_t	v = 0;
	int			i;

	for (i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

size_t
fbf_serialized_size(const Fbf *f)
{
	return FBF_HEADER_BYTES +
		(size_t) f->nfilters * (FBF_FILTER_META_BYTES + fbf_words_per_filter(f) * 8);
}

void
fbf_serialize(const Fbf *f, unsigned char *out)
{
	uint32_t	nwords = fbf_words_per_filter(f);
	unsigned char *p;
	int			i;

	memcpy(out, fbf_magic, 4);
	out[4] = FBF_FORMAT_VERSION;
	out[5] = (unsigned char) f->nhashes;
	put_u16(out + 6, f->nfilters);
	put_u32(out + 8, f->nbits);
	put_u16(out + 12, f->nlive);
	put_u16(out + 14, 0);
	put_u64(out + 16, (uint64_t) f->epoch);
	put_u64(out + 24, (uint64_t) f->period);

	p = out + FBF_HEADER_BYTES;
	for (i = 0; i < f->nfilters; i++)
	{
		const FbfFilterMeta *m = fbf_meta_const(f, i);

		put_u64(p, (uint64_t) m->born_at);
		put_u64(p + 8, m->count);
		p += FBF_FILTER_META_BYTES;
	}
	for (i = 0; i < f->nfilters; i++)
	{
		const uint64_t *w = fbf_words_const(f, i);
		uint32_t	j;

		for (j = 0; j < nwords; j++, p += 8)
			put_u64(p, w[j]);
	}
}

/*
 * The per-filter rules shared by fbf_validate (on serialized words, through
 * `word`) and fbf_check_invariants.
 */
typedef uint64_t (*WordFn) (const void *ctx, int filter, uint32_t w);

static bool
check_filters(const void *ctx, WordFn word, uint32_t nbits, int nfilters,
			  int nlive, const int64_t *born_at, const uint64_t *count,
			  const char **why)
{
	uint32_t	nwords = fbf_nwords(nbits);
	uint64_t	tail = nbits % 64 ? ~UINT64_C(0) << (nbits % 64) : 0;
	int			i;
	uint32_t	w;

	for (i = 0; i < nfilters; i++)
	{
		bool		any = false;

		if ((word(ctx, i, nwords - 1) & tail) != 0)
		{
			*why = "A filter has bits set past its last bit.";
			return false;
		}
		for (w = 0; w < nwords && !any; w++)
			any = word(ctx, i, w) != 0;

		if (i >= nlive)
		{
			if (born_at[i] != 0 || count[i] != 0 || any)
			{
				*why = "A filter past the live ones is not empty.";
				return false;
			}
		}
		else if ((count[i] == 0) == any)
		{
			*why = "A filter's element count does not match its bits.";
			return false;
		}
	}
	for (w = 0; w < nwords; w++)
	{
		if ((word(ctx, 0, w) & ~word(ctx, 1, w)) != 0)
		{
			*why = "The future filter has bits that the present filter lacks.";
			return false;
		}
	}
	return true;
}

typedef struct SerializedWords
{
	const unsigned char *bits;
	uint32_t	nwords;
} SerializedWords;

static uint64_t
serialized_word(const void *ctx, int filter, uint32_t w)
{
	const SerializedWords *s = ctx;

	return get_u64(s->bits + ((size_t) filter * s->nwords + w) * 8);
}

static uint64_t
memory_word(const void *ctx, int filter, uint32_t w)
{
	return fbf_words_const((const Fbf *) ctx, filter)[w];
}

bool
fbf_validate(const unsigned char *buf, size_t len, size_t *size,
			 const char **why)
{
	uint32_t	nbits;
	int			nhashes;
	int			nfilters;
	int			nlive;
	int64_t		epoch;
	int64_t		period;
	int64_t		born_at[FBF_MAX_FILTERS];
	uint64_t	count[FBF_MAX_FILTERS];
	SerializedWords words;
	int			i;

	if (len < FBF_HEADER_BYTES)
	{
		*why = "The value is shorter than the 32-byte header.";
		return false;
	}
	if (memcmp(buf, fbf_magic, 4) != 0)
	{
		*why = "The value does not start with the FBF magic bytes.";
		return false;
	}
	if (buf[4] != FBF_FORMAT_VERSION)
	{
		*why = "The format version is not supported (only version 1 is).";
		return false;
	}
	nhashes = buf[5];
	nfilters = get_u16(buf + 6);
	nbits = get_u32(buf + 8);
	nlive = get_u16(buf + 12);
	epoch = (int64_t) get_u64(buf + 16);
	period = (int64_t) get_u64(buf + 24);

	if (!fbf_shape_valid(nbits, nhashes, nfilters, why))
		return false;
	if (get_u16(buf + 14) != 0)
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
		(size_t) nfilters * (FBF_FILTER_META_BYTES + fbf_nwords(nbits) * 8))
	{
		*why = "The length does not match the shape in the header.";
		return false;
	}

	for (i = 0; i < nfilters; i++)
	{
		const unsigned char *p = buf + FBF_HEADER_BYTES +
			(size_t) i * FBF_FILTER_META_BYTES;

		born_at[i] = (int64_t) get_u64(p);
		count[i] = get_u64(p + 8);
		if (count[i] > (uint64_t) INT64_MAX)
		{
			*why = "A filter's element count is out of range.";
			return false;
		}
	}

	words.bits = buf + FBF_HEADER_BYTES +
		(size_t) nfilters * FBF_FILTER_META_BYTES;
	words.nwords = fbf_nwords(nbits);
	if (!check_filters(&words, serialized_word, nbits, nfilters, nlive,
					   born_at, count, why))
		return false;

	*size = fbf_size(nbits, nfilters);
	return true;
}

void
fbf_deserialize(const unsigned char *buf, size_t len, Fbf *f)
{
	uint32_t	nbits = get_u32(buf + 8);
	int			nfilters = get_u16(buf + 6);
	const unsigned char *p;
	uint64_t   *w;
	size_t		i;

	(void) len;
	memset(f, 0, fbf_size(nbits, nfilters));
	f->nbits = nbits;
	f->nhashes = buf[5];
	f->nfilters = (uint16_t) nfilters;
	f->nlive = get_u16(buf + 12);
	f->head = 0;
	f->epoch = (int64_t) get_u64(buf + 16);
	f->period = (int64_t) get_u64(buf + 24);

	p = buf + FBF_HEADER_BYTES;
	for (i = 0; i < (size_t) nfilters; i++, p += FBF_FILTER_META_BYTES)
	{
		f->meta[i].born_at = (int64_t) get_u64(p);
		f->meta[i].count = get_u64(p + 8);
	}
	/* head = 0, so logical order is physical order and words are contiguous */
	w = fbf_words(f, 0);
	for (i = 0; i < (size_t) nfilters * fbf_nwords(nbits); i++, p += 8)
		w[i] = get_u64(p);
}

bool
fbf_check_invariants(const Fbf *f, const char **why)
{
	int64_t		born_at[FBF_MAX_FILTERS];
	uint64_t	count[FBF_MAX_FILTERS];
	int			i;

	if (!fbf_shape_valid(f->nbits, f->nhashes, f->nfilters, why))
		return false;
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
	for (i = 0; i < f->nfilters; i++)
	{
		born_at[i] = fbf_meta_const(f, i)->born_at;
		count[i] = fbf_meta_const(f, i)->count;
	}
	return check_filters(f, memory_word, f->nbits, f->nfilters, f->nlive,
						 born_at, count, why);
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
