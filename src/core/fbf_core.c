/*-------------------------------------------------------------------------
 *
 * fbf_core.c
 *	  The Forgetful Bloom Filter: insert, membership checks, refresh,
 *	  resizing and the false-positive estimate.
 *
 * See fbf_core.h for the structure, the bit-sliced layout and the partner
 * bookkeeping that keeps the no-false-negative invariant across refreshes
 * and resizes.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bloom_bits.h"
#include "fbf_core.h"
#include "fbf_interrupt.h"

bool
fbf_shape_valid(uint64_t nbits, int64_t nhashes, int64_t nfilters,
				int64_t nparts, const char **why)
{
	if (nhashes < 1 || nhashes > FBF_MAX_HASHES)
	{
		*why = "The number of hash functions must be between 1 and 32.";
		return false;
	}
	if (nfilters < FBF_MIN_FILTERS || nfilters > FBF_MAX_FILTERS)
	{
		*why = "The number of filters must be between 3 and 64 (1 to 62 past filters).";
		return false;
	}
	if (nbits < FBF_MIN_NBITS || nbits > FBF_MAX_NBITS)
	{
		*why = "The number of bits per filter must be between 64 and 1073741824.";
		return false;
	}
	if (nparts < 1 || nparts > FBF_MAX_PARTS)
	{
		*why = "The number of partitions must be between 1 and 1048576.";
		return false;
	}
	/* each factor is bounded above, so this cannot overflow */
	if (fbf_flat_size((uint32_t) nbits, (int) nfilters, (uint32_t) nparts) > FBF_MAX_BYTES)
	{
		*why = "The filter would be larger than 256 MB.";
		return false;
	}
	return true;
}

size_t
fbf_size(uint32_t nbits, int nfilters, uint32_t nparts)
{
	size_t		slices = (size_t) nparts *
		bloom_packed_bytes(nbits, fbf_stride(nfilters)) + BLOOM_PACKED_SLACK;

	return sizeof(Fbf) + (size_t) nfilters * sizeof(int64_t)
		+ (size_t) nfilters * nparts * 8 + (slices + 7) / 8 * 8;
}

size_t
fbf_flat_size(uint32_t nbits, int nfilters, uint32_t nparts)
{
	/* the header of the flat form had no `layout` and no `stride` */
	return 32 + (size_t) nfilters * sizeof(int64_t)
		+ (size_t) nfilters * nparts * (8 + (size_t) fbf_nwords(nbits) * 8);
}

void
fbf_init(Fbf *f, uint32_t nbits, int nhashes, int nfilters, uint32_t nparts,
		 int64_t period, int64_t now)
{
	int			i;

	memset(f, 0, fbf_size(nbits, nfilters, nparts));
	f->layout = FBF_LAYOUT_SLICED;
	f->nbits = nbits;
	f->nhashes = (uint16_t) nhashes;
	f->nfilters = (uint16_t) nfilters;
	f->nlive = (uint16_t) nfilters;
	f->head = 0;
	f->nparts = nparts;
	f->stride = (uint32_t) fbf_stride(nfilters);
	/* filter i was born at epoch (epoch - i), so start where all are >= 0 */
	f->epoch = nfilters - 1;
	f->period = period;

	/*
	 * The future filter is born now (the refresh schedule counts from
	 * it).  The older ones never held anything that the future filter does
	 * not also get, so for drop safety they are as old as can be: otherwise
	 * no refresh could recycle one until a whole retention had passed.
	 */
	f->born_at[0] = now;
	for (i = 1; i < nfilters; i++)
		f->born_at[i] = FBF_BORN_LONG_AGO;
}

uint64_t
fbf_filter_count(const Fbf *f, int logical)
{
	uint64_t	n = 0;
	uint32_t	p;

	for (p = 0; p < f->nparts; p++)
		n += fbf_count_const(f, logical, p);
	return n;
}

/* ---- the bit-sliced arrays ---- */

void
fbf_load_bits(Fbf *f, int logical, uint32_t part, const uint64_t *plain)
{
	unsigned char *slices = fbf_slices(f, part);
	int			stride = (int) f->stride;
	uint64_t	lane = UINT64_C(1) << fbf_slot(f, logical);
	uint32_t	nwords = fbf_nwords(f->nbits);
	uint32_t	i;

	for (i = 0; i < nwords; i++)
	{
		uint64_t	word = plain[i];

		while (word != 0)
		{
			uint32_t	w = i * 64 + (uint32_t) __builtin_ctzll(word);

			if (w < f->nbits)
				bloom_packed_or(slices, stride, w, lane);
			word &= word - 1;
		}
	}
}

void
fbf_load_lane(Fbf *f, int logical, uint32_t part, const void *slice,
			  int width, int lane)
{
	unsigned char *slices = fbf_slices(f, part);
	int			stride = (int) f->stride;
	uint64_t	to = UINT64_C(1) << fbf_slot(f, logical);
	uint32_t	w;

	for (w = 0; w < f->nbits; w++)
	{
		if ((bloom_slice_get(slice, width, w) >> lane) & 1)
			bloom_packed_or(slices, stride, w, to);
	}
}

uint64_t
fbf_extract_word(const Fbf *f, int logical, uint32_t part, uint32_t word)
{
	const unsigned char *slices = fbf_slices(f, part);
	int			stride = (int) f->stride;
	int			slot = fbf_slot(f, logical);
	uint32_t	first = word * 64;
	uint32_t	end = f->nbits - first < 64 ? f->nbits : first + 64;
	uint64_t	bits = 0;
	uint32_t	w;

	for (w = first; w < end; w++)
		bits |= ((bloom_packed_get(slices, stride, w) >> slot) & 1) << (w - first);
	return bits;
}

void
fbf_extract_bits(const Fbf *f, int logical, uint32_t part, uint64_t *plain)
{
	uint32_t	nwords = fbf_nwords(f->nbits);
	uint32_t	i;

	for (i = 0; i < nwords; i++)
		plain[i] = fbf_extract_word(f, logical, part, i);
}

/* 8 x 8 bit matrix transpose: bit c of byte r becomes bit r of byte c */
static inline uint64_t
transpose8(uint64_t x)
{
	uint64_t	t;

	t = (x ^ (x >> 7)) & UINT64_C(0x00AA00AA00AA00AA);
	x = x ^ t ^ (t << 7);
	t = (x ^ (x >> 14)) & UINT64_C(0x0000CCCC0000CCCC);
	x = x ^ t ^ (t << 14);
	t = (x ^ (x >> 28)) & UINT64_C(0x00000000F0F0F0F0);
	x = x ^ t ^ (t << 28);
	return x;
}

/*
 * Eight positions at a time: byte B of every filter's block, eight filters
 * to a 64-bit word, transposed into the lanes of positions 8B .. 8B+7.
 */
void
fbf_load_blocks(Fbf *f, uint32_t part, const unsigned char *const *blocks)
{
	unsigned char *slices = fbf_slices(f, part);
	int			stride = (int) f->stride;
	int			n = f->nfilters;
	uint32_t	nbytes = (f->nbits + 7) / 8;
	uint32_t	byte;

	for (byte = 0; byte < nbytes; byte++)
	{
		uint64_t	lanes[8] = {0};
		int			g,
					r,
					c;

		if (byte % FBF_INTERRUPT_EVERY == FBF_INTERRUPT_EVERY - 1)
			fbf_check_interrupts();

		for (g = 0; g * 8 < n; g++)
		{
			uint64_t	x = 0;

			for (r = 0; r < 8 && g * 8 + r < n; r++)
			{
				if (blocks[g * 8 + r] != NULL)
					x |= (uint64_t) blocks[g * 8 + r][byte] << (8 * r);
			}
			if (x == 0)
				continue;
			x = transpose8(x);
			for (c = 0; c < 8; c++)
				lanes[c] |= ((x >> (8 * c)) & 0xff) << (8 * g);
		}
		for (c = 0; c < 8; c++)
		{
			uint32_t	w = byte * 8 + (uint32_t) c;

			if (lanes[c] != 0 && w < f->nbits)
				bloom_packed_or(slices, stride, w, fbf_lanes_physical(f, lanes[c]));
		}
	}
}

void
fbf_store_blocks(const Fbf *f, uint32_t part, unsigned char *const *blocks)
{
	const unsigned char *slices = fbf_slices(f, part);
	int			stride = (int) f->stride;
	int			n = f->nfilters;
	uint64_t	all = fbf_lane_mask(n);
	uint32_t	nbytes = fbf_nwords(f->nbits) * 8;
	uint32_t	byte;

	for (byte = 0; byte < nbytes; byte++)
	{
		uint64_t	lanes[8];
		int			g,
					r,
					c;

		if (byte % FBF_INTERRUPT_EVERY == FBF_INTERRUPT_EVERY - 1)
			fbf_check_interrupts();

		for (c = 0; c < 8; c++)
		{
			uint32_t	w = byte * 8 + (uint32_t) c;

			lanes[c] = w < f->nbits ?
				fbf_lanes_logical(f, bloom_packed_get(slices, stride, w) & all) : 0;
		}
		for (g = 0; g * 8 < n; g++)
		{
			uint64_t	x = 0;

			for (c = 0; c < 8; c++)
				x |= ((lanes[c] >> (8 * g)) & 0xff) << (8 * c);
			x = transpose8(x);
			for (r = 0; r < 8 && g * 8 + r < n; r++)
				blocks[g * 8 + r][byte] = (unsigned char) (x >> (8 * r));
		}
	}
}

/* ---- membership ---- */

/* bit i set iff live filter i contains the element with these probes */
static inline uint64_t
membership_of(const Fbf *f, uint32_t part, const uint32_t *probes)
{
	uint64_t	physical = bloom_packed_test(fbf_slices(f, part), (int) f->stride,
											 probes, f->nhashes);

	physical &= fbf_lane_mask(f->nfilters);
	return fbf_lanes_logical(f, physical) & fbf_lane_mask(f->nlive);
}

uint64_t
fbf_membership(const Fbf *f, const FbfHash *hash)
{
	uint32_t	probes[FBF_MAX_HASHES];

	fbf_probes(hash, f->nhashes, f->nbits, probes);
	return membership_of(f, fbf_part(hash, f->nparts), probes);
}

/*
 * Bit i of mask says whether live filter i contains the element; bits at
 * and above nlive are zero.  Logical neighbours among live filters are true
 * partners (see fbf_core.h), so "some pair both contain e" is
 * mask & (mask >> 1).
 */
bool
fbf_check_mask(uint64_t mask, int nlive, FbfCheck check)
{
	uint64_t	oldest = UINT64_C(1) << (nlive - 1);

	switch (check)
	{
		case FBF_CHECK_SIMPLE:
			return mask != 0;
		case FBF_CHECK_OPTIMIZED:
			{
				uint64_t	pastward = mask >> 1;	/* present is bit 0 */

				return (mask & 1) != 0 ||
					(pastward & (pastward >> 1)) != 0 ||
					(mask & oldest) != 0;
			}
		case FBF_CHECK_PAIRED:
			return (mask & (mask >> 1)) != 0 || (mask & oldest) != 0;
	}
	return true;				/* unreachable; never a false negative */
}

bool
fbf_contains(const Fbf *f, const FbfHash *hash, FbfCheck check)
{
	return fbf_check_mask(fbf_membership(f, hash), f->nlive, check);
}

/* future's and present's lanes at once, and their counts */
static inline void
insert_probes(Fbf *f, uint32_t part, const uint32_t *probes)
{
	bloom_packed_set(fbf_slices(f, part), (int) f->stride, probes, f->nhashes,
					 fbf_lanes_physical(f, 3));
	(*fbf_count(f, 0, part))++;
	(*fbf_count(f, 1, part))++;
}

void
fbf_insert(Fbf *f, const FbfHash *hash)
{
	uint32_t	probes[FBF_MAX_HASHES];

	fbf_probes(hash, f->nhashes, f->nbits, probes);
	insert_probes(f, fbf_part(hash, f->nparts), probes);
}

bool
fbf_add(Fbf *f, const FbfHash *hash, FbfCheck check)
{
	uint32_t	probes[FBF_MAX_HASHES];
	uint32_t	part = fbf_part(hash, f->nparts);

	fbf_probes(hash, f->nhashes, f->nbits, probes);
	if (fbf_check_mask(membership_of(f, part, probes), f->nlive, check))
		return false;
	insert_probes(f, part, probes);
	return true;
}

/* empty one filter: bits, counts and birth time */
static void
clear_filter(Fbf *f, int logical)
{
	uint64_t	lane = UINT64_C(1) << fbf_slot(f, logical);
	uint32_t	p;

	for (p = 0; p < f->nparts; p++)
		bloom_packed_clear(fbf_slices(f, p), (int) f->stride, f->nbits, lane);
	memset(fbf_count(f, logical, 0), 0, (size_t) f->nparts * 8);
	*fbf_born_at(f, logical) = 0;
}

void
fbf_refresh(Fbf *f, int64_t now)
{
	int			oldest = f->nfilters - 1;

	/* recycle the oldest slot (unborn or live) as the new future */
	clear_filter(f, oldest);
	*fbf_born_at(f, oldest) = now;
	f->head = (uint16_t) fbf_slot(f, oldest);
	if (f->nlive < f->nfilters)
		f->nlive++;
	f->epoch++;
}

bool
fbf_drop_is_safe(const Fbf *f, int64_t now, int64_t retention)
{
	int64_t		younger_born = f->born_at[fbf_slot(f, f->nlive - 2)];

	return now - younger_born > retention;
}

FbfRefreshAction
fbf_refresh_action(int nlive, int nfilters, int64_t younger_born, int64_t now,
				   int64_t retention)
{
	if (now - younger_born > retention)
		return FBF_REFRESH_RECYCLE_OLDEST;
	if (nlive < nfilters)
		return FBF_REFRESH_USE_UNBORN;
	return FBF_REFRESH_POSTPONE;
}

bool
fbf_refresh_within(Fbf *f, int64_t now, int64_t retention)
{
	switch (fbf_refresh_action(f->nlive, f->nfilters,
							   *fbf_born_at(f, f->nlive - 2), now, retention))
	{
		case FBF_REFRESH_RECYCLE_OLDEST:
			if (f->nlive < f->nfilters)
			{
				/* the oldest live filter joins the unborn ones, emptied */
				clear_filter(f, f->nlive - 1);
				f->nlive--;
			}
			fbf_refresh(f, now);
			return true;
		case FBF_REFRESH_USE_UNBORN:
			fbf_refresh(f, now);
			return true;
		case FBF_REFRESH_POSTPONE:
			break;
	}
	return false;
}

void
fbf_resize(Fbf *dst, const Fbf *src, int nfilters)
{
	int			keep = nfilters < src->nfilters ? nfilters : src->nfilters;
	uint64_t	kept;
	uint32_t	p;
	int			i;

	memset(dst, 0, fbf_size(src->nbits, nfilters, src->nparts));
	dst->layout = FBF_LAYOUT_SLICED;
	dst->nbits = src->nbits;
	dst->nhashes = src->nhashes;
	dst->nfilters = (uint16_t) nfilters;
	dst->nlive = src->nlive < keep ? src->nlive : (uint16_t) keep;
	dst->head = 0;
	dst->nparts = src->nparts;
	dst->stride = (uint32_t) fbf_stride(nfilters);
	dst->epoch = src->epoch;
	dst->period = src->period;
	for (i = 0; i < dst->nlive; i++)
	{
		/* a filter's counts are contiguous within its slot */
		*fbf_born_at(dst, i) = src->born_at[fbf_slot(src, i)];
		memcpy(fbf_count(dst, i, 0), fbf_count((Fbf *) src, i, 0),
			   (size_t) src->nparts * 8);
	}

	/* dst's head is 0: its physical lanes are the logical ones */
	kept = fbf_lane_mask(dst->nlive);
	for (p = 0; p < src->nparts; p++)
	{
		const unsigned char *from = fbf_slices(src, p);
		unsigned char *to = fbf_slices(dst, p);
		uint32_t	w;

		for (w = 0; w < src->nbits; w++)
		{
			uint64_t	lanes = bloom_packed_get(from, (int) src->stride, w) &
				fbf_lane_mask(src->nfilters);

			lanes = fbf_lanes_logical(src, lanes) & kept;
			if (lanes != 0)
				bloom_packed_or(to, (int) dst->stride, w, lanes);
		}
	}
}

bool
fbf_same_shape(const Fbf *a, const Fbf *b, const char **why)
{
	if (a->nbits != b->nbits)
		*why = "The filters have different numbers of bits.";
	else if (a->nhashes != b->nhashes)
		*why = "The filters have different numbers of hash functions.";
	else if (a->nfilters != b->nfilters)
		*why = "The filters have different numbers of past filters.";
	else if (a->nparts != b->nparts)
		*why = "The filters have different numbers of partitions.";
	else if (a->period != b->period)
		*why = "The filters have different refresh periods.";
	else
		return true;
	return false;
}

/*
 * The element count of a block that is the OR of two non-empty blocks is
 * unknown (their overlap is); estimate it from the set bits, bounded by what
 * the inputs allow.
 */
static uint64_t
union_count(const Fbf *f, uint64_t nset, uint64_t a, uint64_t b)
{
	double		est;

	if (a == 0 || b == 0)
		return a + b;
	est = bloom_cardinality(f->nbits, f->nhashes, nset);
	if (!(est < (double) (a + b)))
		return a + b;
	if (est < (double) (a > b ? a : b))
		return a > b ? a : b;
	return (uint64_t) llround(est);
}

/*
 * The result is what refreshing the older operand forward to the newer one's
 * epoch and then OR-ing filter by filter gives.  Live filters stay a prefix
 * with true partners only if the result keeps no more live filters than
 * either side: a filter checked alone in one operand (its oldest) must stay
 * the oldest, or elements that live only in it would need a partner that
 * never held them.
 */
void
fbf_union_into(Fbf *dst, const Fbf *src)
{
	int64_t		lag = dst->epoch - src->epoch;
	int64_t		src_reach = lag + src->nlive;
	int			nlive = src_reach < dst->nlive ? (int) src_reach : dst->nlive;
	int			first = lag < nlive ? (int) lag : nlive;
	uint64_t	into;
	uint32_t	p;
	int			i;

	/*
	 * Logical j of src goes into logical first + j of dst, for first + j <
	 * nlive: per position, src's lanes in logical order, shifted by first,
	 * into dst's physical order.  The same pass counts the bits of the
	 * filters that get some, for their new counts.
	 */
	into = fbf_lane_mask(nlive) & ~fbf_lane_mask(first);
	for (p = 0; p < dst->nparts && into != 0; p++)
	{
		const unsigned char *from = fbf_slices(src, p);
		unsigned char *to = fbf_slices(dst, p);
		uint64_t	into_physical = fbf_lanes_physical(dst, into);
		uint64_t	popcount[FBF_MAX_FILTERS] = {0};
		uint32_t	w;

		for (w = 0; w < dst->nbits; w++)
		{
			uint64_t	lanes = bloom_packed_get(from, (int) src->stride, w) &
				fbf_lane_mask(src->nfilters);

			if (w % FBF_INTERRUPT_EVERY == FBF_INTERRUPT_EVERY - 1)
				fbf_check_interrupts();

			lanes = (fbf_lanes_logical(src, lanes) << first) & into;
			if (lanes != 0)
				bloom_packed_or(to, (int) dst->stride, w,
								fbf_lanes_physical(dst, lanes));
			lanes = bloom_packed_get(to, (int) dst->stride, w) & into_physical;
			while (lanes != 0)
			{
				popcount[__builtin_ctzll(lanes)]++;
				lanes &= lanes - 1;
			}
		}
		for (i = first; i < nlive; i++)
		{
			uint64_t   *dc = fbf_count(dst, i, p);

			*dc = union_count(dst, popcount[fbf_slot(dst, i)], *dc,
							  fbf_count_const(src, i - first, p));
		}
	}

	for (i = first; i < nlive; i++)
	{
		int64_t		src_born = src->born_at[fbf_slot(src, i - first)];

		if (src_born > *fbf_born_at(dst, i))
			*fbf_born_at(dst, i) = src_born;
	}

	/* filters past the common reach become unborn */
	for (i = nlive; i < dst->nlive; i++)
		clear_filter(dst, i);
	dst->nlive = (uint16_t) nlive;
}

/* probability that n elements set one given bit */
static double
bit_set(uint32_t nbits, int nhashes, double n)
{
	return n > 0 ? -expm1(-(double) nhashes * n / nbits) : 0.0;
}

/*
 * Probability that a non-member hits both filters of a neighbour pair.
 * Neighbours share one epoch's elements (`shared`), which set the same bits
 * in both; each also holds elements of another epoch (`only_a`, `only_b`).
 * A probed bit is set in both if a shared element set it, or else if
 * elements of both other epochs did.  With only_a = 0 (future, present)
 * this is exactly the future filter's p(B): future AND present answers as
 * future alone does, because future's bits are a subset of present's.
 */
static double
pair_fpp(uint32_t nbits, int nhashes, double shared, double only_a,
		 double only_b)
{
	double		s = bit_set(nbits, nhashes, shared);
	double		both = s + (1 - s) * bit_set(nbits, nhashes, only_a) *
		bit_set(nbits, nhashes, only_b);

	return pow(both, nhashes);
}

double
fbf_estimate_fpp_counts(uint32_t nbits, int nhashes, int nlive,
						const uint64_t *counts, FbfCheck check,
						FbfModel model)
{
	double		p[FBF_MAX_FILTERS] = {0};
	double		epoch[FBF_MAX_FILTERS] = {0};
	double		miss = 1.0;		/* probability that no check fires */
	int			first_pair = check == FBF_CHECK_OPTIMIZED ? 1 : 0;
	int			i;

	for (i = 0; i < nlive; i++)
	{
		p[i] = bloom_fpp(nbits, nhashes, counts[i]);

		/*
		 * Filter i holds the elements of the epoch it was future in and of
		 * the next one (as present): epoch[i] = counts[i] - epoch[i - 1].
		 * Counts merged by a union are estimates, hence the clamp.
		 */
		epoch[i] = (double) counts[i] - (i > 0 ? epoch[i - 1] : 0.0);
		if (epoch[i] < 0)
			epoch[i] = 0;
	}

	if (check == FBF_CHECK_SIMPLE)
	{
		for (i = 0; i < nlive; i++)
			miss *= 1.0 - p[i];
		return 1.0 - miss;
	}

	if (check == FBF_CHECK_OPTIMIZED)
		miss *= 1.0 - p[0];		/* future alone */
	for (i = first_pair; i + 1 < nlive; i++)
	{
		double		both;

		if (model == FBF_MODEL_INDEPENDENT)
			both = p[i] * p[i + 1];
		else
		{
			double		shared = epoch[i];
			double		only_a = (double) counts[i] - shared;
			double		only_b = (double) counts[i + 1] - shared;

			both = pair_fpp(nbits, nhashes, shared,
							only_a > 0 ? only_a : 0, only_b > 0 ? only_b : 0);
		}
		miss *= 1.0 - both;
	}
	miss *= 1.0 - p[nlive - 1]; /* oldest alone */
	return 1.0 - miss;
}

double
fbf_estimate_fpp_blocked(uint32_t nbits, int nhashes, int nlive,
						 uint32_t nparts, const uint64_t *counts,
						 FbfCheck check, FbfModel model)
{
	uint64_t	c[FBF_MAX_FILTERS];
	double		sum = 0.0;
	uint32_t	p;
	int			i;

	for (p = 0; p < nparts; p++)
	{
		for (i = 0; i < nlive; i++)
			c[i] = counts[(size_t) i * nparts + p];
		sum += fbf_estimate_fpp_counts(nbits, nhashes, nlive, c, check, model);
	}
	return sum / nparts;
}

double
fbf_estimate_fpp_model(const Fbf *f, FbfCheck check, FbfModel model)
{
	/* a filter's counts are contiguous in its slot: logical order is a copy */
	uint64_t   *counts = malloc(sizeof(uint64_t) * f->nlive * f->nparts);
	double		fpp;
	int			i;

	if (counts == NULL)
		return 1.0;				/* no memory: claim the worst, never less */
	for (i = 0; i < f->nlive; i++)
		memcpy(&counts[(size_t) i * f->nparts], fbf_count((Fbf *) f, i, 0),
			   sizeof(uint64_t) * f->nparts);
	fpp = fbf_estimate_fpp_blocked(f->nbits, f->nhashes, f->nlive, f->nparts,
								   counts, check, model);
	free(counts);
	return fpp;
}

double
fbf_estimate_fpp(const Fbf *f, FbfCheck check)
{
	return fbf_estimate_fpp_model(f, check, FBF_MODEL_SHARED);
}

const char *
fbf_check_name(FbfCheck check)
{
	switch (check)
	{
		case FBF_CHECK_SIMPLE:
			return "simple";
		case FBF_CHECK_OPTIMIZED:
			return "optimized";
		case FBF_CHECK_PAIRED:
			return "paired";
	}
	return "?";
}

bool
fbf_check_from_name(const char *name, FbfCheck *check)
{
	static const FbfCheck all[] = {
		FBF_CHECK_SIMPLE, FBF_CHECK_OPTIMIZED, FBF_CHECK_PAIRED
	};
	size_t		i;

	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++)
	{
		if (strcmp(name, fbf_check_name(all[i])) == 0)
		{
			*check = all[i];
			return true;
		}
	}
	return false;
}
