/*-------------------------------------------------------------------------
 *
 * fbf_value_cuckoo.c
 *	  The cuckoo kind of `fbf` value: a cuckoo window's snapshot, a CwinSnap
 *	  of the pure core (cwin_snap.h; `layout` is CWIN_SNAP_LAYOUT), as
 *	  fbf_snapshot of a window created with filter => 'cuckoo' makes it.
 *	  Its entry in the kinds' table (fbf_kind.h) and its allocation.
 *
 * Portable form: format version 2 (cwin_snap.c; docs/fbf-format.md).  It is
 * read by fbf_contains, fbf_info, fbf_estimated_fpp and the I/O functions,
 * and loaded by fbf_counter_load; it has none of a ring's capabilities
 * (add, refresh, resize, merge: those make sense for a ring of Bloom
 * filters), so those functions refuse it with 0A000.
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

#include "core/cwin_snap.h"
#include "type/fbf_kind.h"
#include "type/fbf_value.h"

/*
 * Allocate an fbf datum for a cuckoo snapshot of this shape, in the current
 * memory context, its shape set and everything else zeroed (cwin_snap_init:
 * epochs, times, blocks and waiting operations are the caller's to fill),
 * and return the snapshot inside it.
 */
CwinSnap *
FbfCuckooValueAlloc(const CwinLayout *layout, uint32 nparts, size_t ndeferred)
{
	struct varlena *v = FbfValueNew(cwin_snap_size(layout, nparts, ndeferred));

	cwin_snap_init(FbfValueGetCwinSnap(v), layout, nparts, ndeferred);
	return FbfValueGetCwinSnap(v);
}

/* the payload's size, as its header gives it; 0 if the shape is not valid */
static size_t
cuckoo_stated_size(const struct varlena *v)
{
	size_t		len = VARSIZE(v);
	CwinSnap	s;
	CwinLayout	cl;
	const char *why;

	if (len < FBF_VALUE_OFFSET + sizeof(CwinSnap))
		return 0;
	memcpy(&s, (const char *) v + FBF_VALUE_OFFSET, sizeof(CwinSnap));
	if (!cwin_snap_layout(s.fp_bits, s.nbuckets, &cl, &why) ||
		s.nparts < 1 || s.nparts > FBF_MAX_PARTS ||
		s.ndeferred > (len / sizeof(FbfHash)))
		return 0;
	return cwin_snap_size(&cl, s.nparts, s.ndeferred);
}

static bool
cuckoo_check_contents(const void *payload, const char **why)
{
	return cwin_snap_check((const CwinSnap *) payload, why);
}

static size_t
cuckoo_serialized_size(const void *payload)
{
	return cwin_snap_serialized_size((const CwinSnap *) payload);
}

static void
cuckoo_serialize(const void *payload, unsigned char *out)
{
	cwin_snap_serialize((const CwinSnap *) payload, out);
}

/*
 * Validate serialized bytes of a cuckoo snapshot and build an fbf datum
 * from them: the header and length first, the contents once copied (the
 * copy is the input's size); NULL and *why if malformed.
 */
static struct varlena *
cuckoo_from_bytes(const unsigned char *buf, size_t len, const char **why)
{
	size_t		size;
	struct varlena *v;

	if (!cwin_snap_validate(buf, len, &size, why))
		return NULL;
	v = FbfValueNew(size);
	cwin_snap_deserialize(buf, len, FbfValueGetCwinSnap(v));
	if (!cwin_snap_check(FbfValueGetCwinSnap(v), why))
		return NULL;
	return v;
}

/*
 * A snapshot is checked in its block, with each live epoch's fingerprint,
 * and in its waiting operations; the check variants are Bloom ones (the
 * caller validated the name, which means nothing here).
 */
static bool
cuckoo_contains(const void *payload, const FbfHash *hash, FbfCheck check)
{
	return cwin_snap_contains((const CwinSnap *) payload, hash);
}

static double
cuckoo_estimate_fpp(const void *payload, FbfCheck check)
{
	return cwin_snap_estimate_fpp((const CwinSnap *) payload);
}

/*
 * fbf_info of a cuckoo snapshot: nbits is a block's bits, nhashes NULL (a
 * lookup reads one fingerprint per live epoch in two buckets), npast the
 * live epochs before the current one, counts the live entries of each
 * live epoch, newest first, the operations still waiting counted in the
 * current epoch (a drain stores them there).
 */
static Datum
cuckoo_info(TupleDesc tupdesc, const void *payload, size_t trailer)
{
	const CwinSnap *s = (const CwinSnap *) payload;
	Datum		values[10];
	bool		nulls[10] = {0};
	Datum	   *counts = palloc(sizeof(Datum) * s->nlive);
	uint64		live[CWIN_MAX_LIVE];
	uint32		i;

	cwin_snap_counts(s, live);
	live[0] += s->ndeferred;
	for (i = 0; i < s->nlive; i++)
		counts[i] = Int64GetDatum((int64) live[i]);
	values[0] = Int32GetDatum((int32) (cwin_snap_block_size(s) * 8));
	nulls[1] = true;
	values[2] = Int32GetDatum((int32) s->nlive - 1);
	values[3] = Int32GetDatum((int32) s->nlive);
	values[4] = Int64GetDatum(s->epoch);
	if (s->period > 0)
	{
		Interval   *period = palloc0(sizeof(Interval));

		period->time = s->period;
		values[5] = IntervalPGetDatum(period);
	}
	else
		nulls[5] = true;
	values[6] = PointerGetDatum(construct_array(counts, (int) s->nlive, INT8OID,
												sizeof(int64), FLOAT8PASSBYVAL,
												TYPALIGN_DOUBLE));
	values[7] = Int64GetDatum((int64) (cwin_snap_serialized_size(s) + trailer));
	values[8] = Float8GetDatum(cwin_snap_estimate_fpp(s));
	values[9] = Int32GetDatum((int32) s->nparts);
	return HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
}

const FbfKindInfo FbfCuckooKind = {
	.name = "a cuckoo window's snapshot",
	.layout = CWIN_SNAP_LAYOUT,
	.format_version = CWIN_SNAP_FORMAT_VERSION,
	.portable_header_bytes = CWIN_SNAP_HEADER_BYTES,
	.flags_at = 20,
	.flags_width = 4,
	.ring = false,
	.not_ring_detail = "The value is fbf_snapshot() of a counter or dedup table created with filter => 'cuckoo'; this function works on a ring of Bloom filters.",
	.stated_size = cuckoo_stated_size,
	.check_header = cwin_snap_check_header,
	.check_contents = cuckoo_check_contents,
	.serialized_size = cuckoo_serialized_size,
	.serialize = cuckoo_serialize,
	.from_bytes = cuckoo_from_bytes,
	.contains = cuckoo_contains,
	.estimate_fpp = cuckoo_estimate_fpp,
	.info = cuckoo_info,
	.upgrade = NULL,
};
