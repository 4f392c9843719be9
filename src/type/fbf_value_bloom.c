/*-------------------------------------------------------------------------
 *
 * fbf_value_bloom.c
 *	  The Bloom kind of `fbf` value: a ring of Bloom filters, an in-memory
 *	  Fbf of the pure core (fbf_core.h; `layout` is FBF_LAYOUT_SLICED), as
 *	  fbf_create, fbf_agg and fbf_snapshot of a Bloom window make it.  Its
 *	  entry in the kinds' table (fbf_kind.h), its allocation, and the
 *	  upgrade of the flat values fbf 1.0 and 1.1 stored.
 *
 * Portable form: format version 1 (fbf_codec.c; docs/fbf-format.md).  It
 * has every capability of a ring: the functions that add, refresh, resize,
 * merge and aggregate take it (fbf_type.c).
 *
 * No shared state, no locks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type_d.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/timestamp.h"

#include "core/fbf_codec.h"
#include "type/fbf_kind.h"
#include "type/fbf_value.h"

/*
 * Allocate a zeroed fbf datum for an Fbf of this shape, in the current
 * memory context, and return the Fbf inside it.
 */
Fbf *
FbfValueAlloc(uint32 nbits, int nfilters, uint32 nparts)
{
	Size		size = FBF_VALUE_OFFSET + fbf_size(nbits, nfilters, nparts);
	char	   *v = palloc0(size);

	SET_VARSIZE(v, size);
	return (Fbf *) (v + FBF_VALUE_OFFSET);
}

/* the payload's size, as its header gives it; 0 if the shape is not valid */
static size_t
bloom_stated_size(const struct varlena *v)
{
	size_t		len = VARSIZE(v);
	Fbf			f;
	const char *why;

	if (len < FBF_VALUE_OFFSET + sizeof(Fbf))
		return 0;
	memcpy(&f, (const char *) v + FBF_VALUE_OFFSET, sizeof(Fbf));
	if (!fbf_shape_valid(f.nbits, f.nhashes, f.nfilters, f.nparts, &why))
		return 0;
	return fbf_size(f.nbits, f.nfilters, f.nparts);
}

static bool
bloom_check_contents(const void *payload, const char **why)
{
	return fbf_check_invariants((const Fbf *) payload, why);
}

static size_t
bloom_serialized_size(const void *payload)
{
	return fbf_serialized_size((const Fbf *) payload);
}

static void
bloom_serialize(const void *payload, unsigned char *out)
{
	fbf_serialize((const Fbf *) payload, out);
}

/*
 * Validate serialized bytes of a Bloom value and build an fbf datum from
 * them (fbf_validate checks the whole input before the allocation); NULL
 * and *why if malformed.  Bytes no kind recognizes come here too, so that
 * fbf_validate says what is wrong with them.
 */
static struct varlena *
bloom_from_bytes(const unsigned char *buf, size_t len, const char **why)
{
	size_t		size;
	struct varlena *v;

	if (!fbf_validate(buf, len, &size, why))
		return NULL;
	v = FbfValueNew(size);
	fbf_deserialize(buf, len, FbfValueGetFbf(v));
	return v;
}

static bool
bloom_contains(const void *payload, const FbfHash *hash, FbfCheck check)
{
	return fbf_contains((const Fbf *) payload, hash, check);
}

static double
bloom_estimate_fpp(const void *payload, FbfCheck check)
{
	return fbf_estimate_fpp((const Fbf *) payload, check);
}

/*
 * fbf_info(fbf) of a Bloom value: the shape, the window's bookkeeping and
 * the per-filter element counts (all partitions), newest first (unborn
 * filters count 0).
 */
static Datum
bloom_info(TupleDesc tupdesc, const void *payload, size_t trailer)
{
	const Fbf  *f = (const Fbf *) payload;
	Datum		values[10];
	bool		nulls[10] = {0};
	Datum	   *counts;
	Interval   *period;
	int			i;

	counts = palloc(sizeof(Datum) * f->nfilters);
	for (i = 0; i < f->nfilters; i++)
		counts[i] = Int64GetDatum((int64) fbf_filter_count(f, i));

	values[0] = Int32GetDatum((int32) f->nbits);
	values[1] = Int32GetDatum(f->nhashes);
	values[2] = Int32GetDatum(f->nfilters - 2);
	values[3] = Int32GetDatum(f->nlive);
	values[4] = Int64GetDatum(f->epoch);
	if (f->period > 0)
	{
		period = palloc0(sizeof(Interval));
		period->time = f->period;
		values[5] = IntervalPGetDatum(period);
	}
	else
		nulls[5] = true;
	values[6] = PointerGetDatum(construct_array(counts, f->nfilters, INT8OID,
												sizeof(int64), FLOAT8PASSBYVAL,
												TYPALIGN_DOUBLE));
	values[7] = Int64GetDatum((int64) (fbf_serialized_size(f) + trailer));
	values[8] = Float8GetDatum(fbf_estimate_fpp(f, FBF_CHECK_DEFAULT));
	values[9] = Int32GetDatum((int32) f->nparts);

	return HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
}

/*
 * A datum stored by fbf 1.0 or 1.1 (per-filter bit arrays, no layout
 * word), checked in full and converted to a new palloc'd datum; NULL and
 * *why if it is not sound.
 */
static struct varlena *
bloom_upgrade(const struct varlena *v, const char **why)
{
	size_t		size;
	struct varlena *converted;

	if (!fbf_legacy_validate(FbfValueGetFbf(v), VARSIZE(v) - FBF_VALUE_OFFSET,
							 &size, why))
		return NULL;
	converted = FbfValueNew(size);
	fbf_from_legacy(FbfValueGetFbf(v), FbfValueGetFbf(converted));
	return converted;
}

const FbfKindInfo FbfBloomKind = {
	.name = "a ring of Bloom filters",
	.layout = FBF_LAYOUT_SLICED,
	.format_version = FBF_FORMAT_VERSION,
	.portable_header_bytes = FBF_HEADER_BYTES,
	.flags_at = 14,
	.flags_width = 2,
	.ring = true,
	.not_ring_detail = NULL,
	.stated_size = bloom_stated_size,
	.check_header = fbf_check_header,
	.check_contents = bloom_check_contents,
	.serialized_size = bloom_serialized_size,
	.serialize = bloom_serialize,
	.from_bytes = bloom_from_bytes,
	.contains = bloom_contains,
	.estimate_fpp = bloom_estimate_fpp,
	.info = bloom_info,
	.upgrade = bloom_upgrade,
};
