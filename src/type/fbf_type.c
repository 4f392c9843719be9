/*-------------------------------------------------------------------------
 *
 * fbf_type.c
 *	  The `fbf` type: a Forgetful Bloom Filter as a SQL value, or a cuckoo
 *	  window's snapshot.  The SQL functions and the validating accessor:
 *	  each function that reads both kinds asks the value's kind
 *	  (fbf_kind.h); the kinds' own code is in fbf_value_bloom.c and
 *	  fbf_value_cuckoo.c.
 *
 * A value is immutable from SQL's point of view: fbf_add, fbf_refresh and
 * friends return a modified copy.  The build aggregate (fbf_agg) is the
 * exception that proves the rule: inside an aggregate, its transition
 * function updates the state in place, as int8inc and array_agg do.
 *
 * Text I/O is "\x" and the hex digits of the binary form; binary I/O is the
 * versioned little-endian layout of fbf_codec.c (format version 1, Bloom
 * filters) or cwin_snap.c (version 2, cuckoo window snapshots;
 * docs/fbf-format.md).  Both input functions validate the whole value
 * before allocating anything larger than the input itself.
 *
 * Every kind is read by fbf_contains, fbf_info, fbf_estimated_fpp and the
 * I/O functions, and loaded by fbf_counter_load; only a kind with a ring's
 * capability can be added to, refreshed, resized or merged (those make
 * sense for a ring of Bloom filters): the others (a cuckoo snapshot) are
 * refused with 0A000.
 *
 * Elements are hashed by their bytes: a text by its characters (no
 * collation, no terminator), a bytea by its bytes, a bigint by its eight
 * little-endian bytes.  So 'abc'::text and 'abc'::bytea are the same
 * element, and 42::bigint is not '42'::text.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type_d.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "core/fbf_codec.h"
#include "core/fbf_interrupt.h"
#include "core/fbf_le.h"
#include "core/fbf_plan.h"
#include "core/fbf_stream_snap.h"
#include "type/fbf_kind.h"
#include "type/fbf_value.h"

PG_FUNCTION_INFO_V1(fbf_in);
PG_FUNCTION_INFO_V1(fbf_out);
PG_FUNCTION_INFO_V1(fbf_recv);
PG_FUNCTION_INFO_V1(fbf_send);
PG_FUNCTION_INFO_V1(fbf_create_shape);
PG_FUNCTION_INFO_V1(fbf_create_for);
PG_FUNCTION_INFO_V1(fbf_add_text);
PG_FUNCTION_INFO_V1(fbf_add_int8);
PG_FUNCTION_INFO_V1(fbf_add_array);
PG_FUNCTION_INFO_V1(fbf_contains_text);
PG_FUNCTION_INFO_V1(fbf_contains_int8);
PG_FUNCTION_INFO_V1(fbf_refresh_n);
PG_FUNCTION_INFO_V1(fbf_resize_past);
PG_FUNCTION_INFO_V1(fbf_estimated_fpp);
PG_FUNCTION_INFO_V1(fbf_info);
PG_FUNCTION_INFO_V1(fbf_union);
PG_FUNCTION_INFO_V1(fbf_agg_trans_text);
PG_FUNCTION_INFO_V1(fbf_agg_trans_int8);

/* fbf_interrupt_hook: the core's long loops honour a cancel */
static void
core_check_interrupts(void)
{
	CHECK_FOR_INTERRUPTS();
}

/*
 * The type subsystem's part of _PG_init: the pure core's long passes over
 * a value (transposes, hex digits, unions, checks) call back here between
 * chunks (core/fbf_interrupt.h), so that a cancel stops them.
 */
void
FbfTypeInit(void)
{
	fbf_interrupt_hook = core_check_interrupts;
}

/* parse a membership-check name, with an error for unknown names */
static FbfCheck
check_from_text(text *name)
{
	char	   *s = text_to_cstring(name);
	FbfCheck	check;

	if (!fbf_check_from_name(s, &check))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unrecognized membership check \"%s\"", s),
				 errhint("Valid checks are \"simple\", \"optimized\" and \"paired\".")));
	pfree(s);
	return check;
}

/*
 * Error unless (nbits, nhashes, npast, nparts) is a valid shape; returns
 * the number of filters.
 */
static int
checked_shape(int64 nbits, int64 nhashes, int64 npast, int64 nparts)
{
	const char *why;

	if (!fbf_shape_valid((uint64) Max(nbits, 0), nhashes, npast + 2, nparts, &why))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid fbf shape"),
				 errdetail("%s", why)));
	return (int) (npast + 2);
}

/* ----------------------------------------------------------------------
 * I/O
 * ----------------------------------------------------------------------
 */

fbf_noreturn static void refuse_value(const char *why);

fbf_noreturn static void refuse_input(int code, const char *what,
									  const char *why);

/* the error for malformed input (SQLSTATE `code`), with its reason */
static void
refuse_input(int code, const char *what, const char *why)
{
	ereport(ERROR,
			(errcode(code),
			 errmsg("invalid %s for type fbf", what),
			 errdetail("%s", why)));
}

/* the error for a value that fails a check, with its reason */
static void
refuse_value(const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("corrupt fbf value"),
			 errdetail("%s", why)));
}

/*
 * The validating accessor every function taking an fbf reads it through
 * (fbf_value.h): datum d detoasted, a copy of its own if `copy`, and
 * checked in O(1) for its kind: the layout tag, the header's rules of the
 * input functions, and a size exactly that of the shape the header states
 * (fbf_check_header, cwin_snap_check_header), or that and a counter
 * snapshot's key (fbf_value_key.c).  Those are what a value of
 * the other kind, or an aggregate state that is not the value it claims to
 * be, gets wrong, and what every read and write of the value is bounded
 * by; docs/design.md, "Validation of fbf values", says why the contents
 * need no check here.  A datum of fbf 1.0 or 1.1 is checked in full and
 * converted (a new palloc'd datum).  Anything else is refused (XX001).
 */
struct varlena *
FbfDatumValue(Datum d, bool copy)
{
	struct varlena *v = copy ? PG_DETOAST_DATUM_COPY(d) : PG_DETOAST_DATUM(d);
	size_t		len = VARSIZE(v);
	const FbfKindInfo *kind;
	const char *why;
	struct varlena *converted;

	if (len < FBF_VALUE_OFFSET + sizeof(uint32))
		refuse_value("The value is shorter than the header of either kind of value.");
	kind = FbfValueKindOf(v);
	if (kind != NULL)
	{
		size_t		payload = len - FBF_VALUE_OFFSET;
		size_t		stated = kind->stated_size(v);
		size_t		streams;
		const char *keyed_why;

		/*
		 * The payload alone, or followed by a key, or by streams and a key
		 * (fbf_value_key.c): the header's size, then what follows it.
		 */
		if (!kind->check_header(FbfValuePayload(v), payload, &why) &&
			!(FbfValueHasKeyTrailer(v) && stated != 0 && stated <= payload &&
			  kind->check_header(FbfValuePayload(v), stated, &keyed_why) &&
			  FbfValueLayout(v, stated, &streams, &keyed_why)))
			refuse_value(why);
		return v;
	}

	/* no kind's layout word: the oldest kind's older form, checked, converted */
	converted = FbfOldestKind()->upgrade(v, &why);
	if (converted == NULL)
		refuse_value(why);
	if ((Pointer) v != DatumGetPointer(d))
		pfree(v);
	return converted;
}

struct varlena *
FbfArgValue(FunctionCallInfo fcinfo, int argno, bool copy)
{
	return FbfDatumValue(PG_GETARG_DATUM(argno), copy);
}

/*
 * The contents of a value FbfDatumValue returned, checked in full (O(size)):
 * for the functions that store a value where it outlives the statement,
 * as fbf_counter_load does.
 */
void
FbfValueCheckContents(const struct varlena *v)
{
	const char *why;

	const unsigned char *streams;
	size_t		nstreams;

	if (!FbfValueKindOf(v)->check_contents(FbfValuePayload(v), &why))
		refuse_value(why);
	if (FbfValueGetStreams(v, &streams, &nstreams) &&
		!fbf_streams_validate(streams, nstreams, true, &why))
		refuse_value(why);
}

Fbf *
FbfArgGetBloom(FunctionCallInfo fcinfo, int argno, bool copy)
{
	struct varlena *v = FbfArgValue(fcinfo, argno, copy);
	const FbfKindInfo *kind = FbfValueKindOf(v);
	FbfValueKey key;

	if (!kind->ring)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s() does not take %s",
						get_func_name(fcinfo->flinfo->fn_oid), kind->name),
				 errdetail("%s", kind->not_ring_detail),
				 errhint("fbf_contains(), fbf_info() and fbf_estimated_fpp() read snapshots of both kinds, and fbf_counter_load() loads them.")));
	if (FbfValueGetKey(v, &key))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s() does not take a counter's snapshot",
						get_func_name(fcinfo->flinfo->fn_oid)),
				 errdetail("The value is fbf_snapshot() of a counter or dedup table: its elements are hashed under the secret key of the counter's filter."),
				 errhint("fbf_contains(), fbf_info() and fbf_estimated_fpp() read snapshots, and fbf_counter_load() loads them.")));
	return FbfValueGetFbf(v);
}

/*
 * Validate serialized bytes of an unkeyed value and build an fbf datum
 * from them, of the kind their magic and format version say (else of the
 * oldest kind, whose decoder says what is wrong); `code` is the SQLSTATE
 * for malformed input.
 */
static Datum
unkeyed_from_bytes(const unsigned char *buf, size_t len, int code,
				   const char *what)
{
	const FbfKindInfo *kind = FbfPortableKindOf(buf, len);
	struct varlena *v;
	const char *why;

	if (kind == NULL || memcmp(buf, fbf_magic, 4) != 0)
		kind = FbfOldestKind();
	v = kind->from_bytes(buf, len, &why);
	if (v == NULL)
		refuse_input(code, what, why);
	return PointerGetDatum(v);
}

/*
 * Validate serialized bytes and build an fbf datum from them: a keyed
 * value's key (fbf_value_key.c) is taken off, the rest decoded as its kind
 * says, and the key put back on the datum.
 */
static Datum
fbf_from_bytes(const unsigned char *buf, size_t len, int code,
			   const char *what)
{
	bool		keyed;
	FbfValueKey key;
	const unsigned char *streams;
	size_t		nstreams;
	const char *why;
	Datum		result;

	buf = FbfPortableTakeKey(buf, &len, &keyed, &key, &streams, &nstreams, &why);
	if (why != NULL)
		refuse_input(code, what, why);
	result = unkeyed_from_bytes(buf, len, code, what);
	if (keyed)
		result = PointerGetDatum(FbfValueWithKey((struct varlena *) DatumGetPointer(result),
												 &key.key,
												 (key.flags & FBF_VALUE_KEY_PUBLIC_TOO) != 0));
	if (nstreams > 0)
		result = PointerGetDatum(FbfValueWithStreams((struct varlena *) DatumGetPointer(result),
													 streams, nstreams));
	return result;
}

/* the serialized form of an fbf datum of either kind, palloc'd */
static unsigned char *
serialize_value(FunctionCallInfo fcinfo, int argno, size_t *len)
{
	struct varlena *v = FbfArgValue(fcinfo, argno, false);
	const FbfKindInfo *kind = FbfValueKindOf(v);
	unsigned char *buf;
	FbfValueKey key;
	bool		keyed = FbfValueGetKey(v, &key);
	const unsigned char *streams = NULL;
	size_t		nstreams = 0;

	*len = kind->serialized_size(FbfValuePayload(v));
	buf = palloc(*len);
	kind->serialize(FbfValuePayload(v), buf);
	if (keyed)
	{
		(void) FbfValueGetStreams(v, &streams, &nstreams);
		buf = FbfPortablePutKey(buf, len, &key, streams, nstreams);
	}
	return buf;
}

Datum
fbf_in(PG_FUNCTION_ARGS)
{
	char	   *str = PG_GETARG_CSTRING(0);
	size_t		len = strlen(str);
	unsigned char *buf = palloc(len / 2 + 1);
	size_t		nbytes;
	const char *why;
	Datum		result;

	if (!fbf_hex_decode(str, len, buf, &nbytes, &why))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type fbf"),
				 errdetail("%s", why)));
	result = fbf_from_bytes(buf, nbytes, ERRCODE_INVALID_TEXT_REPRESENTATION,
							"input syntax");
	pfree(buf);
	PG_RETURN_DATUM(result);
}

Datum
fbf_out(PG_FUNCTION_ARGS)
{
	size_t		len;
	unsigned char *buf = serialize_value(fcinfo, 0, &len);
	char	   *str = palloc(2 * len + 3);

	fbf_hex_encode(buf, len, str);
	pfree(buf);
	PG_RETURN_CSTRING(str);
}

Datum
fbf_recv(PG_FUNCTION_ARGS)
{
	StringInfo	msg = (StringInfo) PG_GETARG_POINTER(0);
	int			len = msg->len - msg->cursor;
	const char *bytes = pq_getmsgbytes(msg, len);

	PG_RETURN_DATUM(fbf_from_bytes((const unsigned char *) bytes, len,
								   ERRCODE_INVALID_BINARY_REPRESENTATION,
								   "binary representation"));
}

Datum
fbf_send(PG_FUNCTION_ARGS)
{
	size_t		len;
	unsigned char *buf = serialize_value(fcinfo, 0, &len);
	bytea	   *result = palloc(VARHDRSZ + len);

	SET_VARSIZE(result, VARHDRSZ + len);
	memcpy(VARDATA(result), buf, len);
	pfree(buf);
	PG_RETURN_BYTEA_P(result);
}

/* ----------------------------------------------------------------------
 * Constructors
 * ----------------------------------------------------------------------
 */

/* fbf_create(nbits int, nhashes int, npast int, nparts int) */
Datum
fbf_create_shape(PG_FUNCTION_ARGS)
{
	int32		nbits = PG_GETARG_INT32(0);
	int32		nhashes = PG_GETARG_INT32(1);
	int32		npast = PG_GETARG_INT32(2);
	int32		nparts = PG_GETARG_INT32(3);
	int			nfilters = checked_shape(nbits, nhashes, npast, nparts);
	Fbf		   *f = FbfValueAlloc(nbits, nfilters, nparts);

	fbf_init(f, nbits, nhashes, nfilters, nparts, 0, 0);
	PG_RETURN_FBF(f);
}

/* total microseconds of an interval, months as 30 days (as EXTRACT(epoch)) */
static double
interval_usecs(const Interval *iv)
{
	return (double) iv->time +
		((double) iv->day + (double) iv->month * DAYS_PER_MONTH) *
		(double) USECS_PER_DAY;
}

/*
 * fbf_create(retention interval, target_fpp float8, rate float8): the
 * smallest FBF whose steady-state estimated FPP stays under target_fpp when
 * `rate` operations per second arrive and each must be remembered for
 * `retention`.  Its refresh period is recorded in the value.
 */
Datum
fbf_create_for(PG_FUNCTION_ARGS)
{
	Interval   *retention = PG_GETARG_INTERVAL_P(0);
	float8		target = PG_GETARG_FLOAT8(1);
	float8		rate = PG_GETARG_FLOAT8(2);
	double		usecs = interval_usecs(retention);
	FbfPlan		plan;
	const char *why;
	Fbf		   *f;

	if (!(usecs >= USECS_PER_SEC))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("retention must be at least one second")));
	if (!(target > 0.0 && target < 1.0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("target false-positive probability must be between 0 and 1, exclusive")));
	if (!(rate >= 0.0 && rate <= 1e9))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("rate must be between 0 and 1e9 operations per second")));
	if (!fbf_plan(usecs / USECS_PER_SEC, target, rate, FBF_CHECK_DEFAULT,
				  FBF_MAX_FILTERS, &plan, &why))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("no fbf meets that target"),
				 errdetail("%s", why)));

	f = FbfValueAlloc(plan.nbits, plan.nfilters, plan.nparts);
	fbf_init(f, plan.nbits, plan.nhashes, plan.nfilters, plan.nparts,
			 (int64) ceil(plan.period * USECS_PER_SEC), 0);
	PG_RETURN_FBF(f);
}

/* ----------------------------------------------------------------------
 * Elements
 * ----------------------------------------------------------------------
 */

/* hash a text or bytea element by its bytes */
static FbfHash
hash_varlena(Datum d)
{
	struct varlena *v = PG_DETOAST_DATUM_PACKED(d);

	return fbf_hash_bytes(VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v));
}

/* fbf_add(fbf, text/bytea) and fbf_add(fbf, bigint) */
Datum
fbf_add_text(PG_FUNCTION_ARGS)
{
	Fbf		   *f = PG_GETARG_FBF_COPY(0);
	FbfHash		h = hash_varlena(PG_GETARG_DATUM(1));

	fbf_add(f, &h, FBF_CHECK_DEFAULT);
	PG_RETURN_FBF(f);
}

Datum
fbf_add_int8(PG_FUNCTION_ARGS)
{
	Fbf		   *f = PG_GETARG_FBF_COPY(0);
	FbfHash		h = fbf_hash_int64(PG_GETARG_INT64(1));

	fbf_add(f, &h, FBF_CHECK_DEFAULT);
	PG_RETURN_FBF(f);
}

/*
 * fbf_add(fbf, bigint[]) and fbf_add(fbf, text[]): add every non-null
 * element, in array order, into one copy of the filter.
 */
Datum
fbf_add_array(PG_FUNCTION_ARGS)
{
	Fbf		   *f = PG_GETARG_FBF_COPY(0);
	ArrayType  *elements = PG_GETARG_ARRAYTYPE_P(1);
	Oid			elemtype = ARR_ELEMTYPE(elements);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *values;
	bool	   *nulls;
	int			n;
	int			i;

	if (elemtype != INT8OID && elemtype != TEXTOID && elemtype != BYTEAOID)
		elog(ERROR, "fbf_add: unsupported array element type %u", elemtype);
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(elements, elemtype, typlen, typbyval, typalign,
					  &values, &nulls, &n);
	for (i = 0; i < n; i++)
	{
		FbfHash		h;

		if (nulls[i])
			continue;
		h = elemtype == INT8OID ? fbf_hash_int64(DatumGetInt64(values[i])) :
			hash_varlena(values[i]);
		fbf_add(f, &h, FBF_CHECK_DEFAULT);
		CHECK_FOR_INTERRUPTS();
	}
	PG_RETURN_FBF(f);
}

/*
 * Is the element whose bytes are data[0 .. len) in the value?  Hashed as
 * the value hashes its elements: under the public hash, or under a
 * counter snapshot's key, and then also under the public hash if the
 * snapshot holds operations recorded before its counter had a key
 * (fbf_value_key.c).  The check variant's name is validated for every
 * kind; the value's kind says what it means (fbf_kind.h).
 */
static bool
contains_bytes(FunctionCallInfo fcinfo, const void *data, size_t len)
{
	struct varlena *v = FbfArgValue(fcinfo, 0, false);
	FbfCheck	check = check_from_text(PG_GETARG_TEXT_PP(2));
	FbfValueKey key;
	bool		keyed = FbfValueGetKey(v, &key);
	const FbfKindInfo *kind = FbfValueKindOf(v);
	const void *payload = FbfValuePayload(v);
	FbfHash		h;

	h = keyed ? fbf_hash_keyed(&key.key, data, len) : fbf_hash_bytes(data, len);
	if (kind->contains(payload, &h, check))
		return true;
	if (!keyed || (key.flags & FBF_VALUE_KEY_PUBLIC_TOO) == 0)
		return false;
	h = fbf_hash_bytes(data, len);
	return kind->contains(payload, &h, check);
}

/* fbf_contains(fbf, element, check text) */
Datum
fbf_contains_text(PG_FUNCTION_ARGS)
{
	struct varlena *e = PG_DETOAST_DATUM_PACKED(PG_GETARG_DATUM(1));

	PG_RETURN_BOOL(contains_bytes(fcinfo, VARDATA_ANY(e), VARSIZE_ANY_EXHDR(e)));
}

Datum
fbf_contains_int8(PG_FUNCTION_ARGS)
{
	unsigned char bytes[8];

	fbf_le64_write(bytes, (uint64) PG_GETARG_INT64(1));
	PG_RETURN_BOOL(contains_bytes(fcinfo, bytes, sizeof(bytes)));
}

/* ----------------------------------------------------------------------
 * The window
 * ----------------------------------------------------------------------
 */

/*
 * fbf_refresh(fbf, times int): rotate `times` times.  Values have no clock,
 * so the new filters' birth times are recorded as 0 (unknown).
 */
Datum
fbf_refresh_n(PG_FUNCTION_ARGS)
{
	Fbf		   *f = PG_GETARG_FBF_COPY(0);
	int32		times = PG_GETARG_INT32(1);
	int32		i;

	if (times < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("number of refreshes must not be negative")));
	if (times > FBF_MAX_EPOCH - f->epoch)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("fbf epoch would exceed its limit")));
	/* after nfilters refreshes every filter is empty: more change nothing */
	for (i = 0; i < Min(times, (int32) f->nfilters); i++)
	{
		fbf_refresh(f, 0);
		CHECK_FOR_INTERRUPTS();
	}
	f->epoch += times - i;
	PG_RETURN_FBF(f);
}

/*
 * fbf_resize(fbf, npast int): change the number of past filters.  Growing
 * adds empty filters at the old end (the window lengthens as they fill);
 * shrinking forgets the oldest filters at once.
 */
Datum
fbf_resize_past(PG_FUNCTION_ARGS)
{
	Fbf		   *f = PG_GETARG_FBF(0);
	int32		npast = PG_GETARG_INT32(1);
	int			nfilters = checked_shape(f->nbits, f->nhashes, npast, f->nparts);
	Fbf		   *result = FbfValueAlloc(f->nbits, nfilters, f->nparts);

	fbf_resize(result, f, nfilters);
	PG_RETURN_FBF(result);
}

/* fbf_union(fbf, fbf) */
Datum
fbf_union(PG_FUNCTION_ARGS)
{
	Fbf		   *a = PG_GETARG_FBF(0);
	Fbf		   *b = PG_GETARG_FBF(1);
	const char *why;
	Fbf		   *newer;
	Fbf		   *older;
	Fbf		   *result;

	if (!fbf_same_shape(a, b, &why))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot merge fbf values of different shapes"),
				 errdetail("%s", why)));
	newer = a->epoch >= b->epoch ? a : b;
	older = newer == a ? b : a;
	result = FbfValueAlloc(newer->nbits, newer->nfilters, newer->nparts);
	memcpy(result, newer, fbf_size(newer->nbits, newer->nfilters, newer->nparts));
	fbf_union_into(result, older);
	PG_RETURN_FBF(result);
}

/* ----------------------------------------------------------------------
 * Inspection
 * ----------------------------------------------------------------------
 */

Datum
fbf_estimated_fpp(PG_FUNCTION_ARGS)
{
	struct varlena *v = FbfArgValue(fcinfo, 0, false);
	FbfCheck	check = check_from_text(PG_GETARG_TEXT_PP(1));

	PG_RETURN_FLOAT8(FbfValueKindOf(v)->estimate_fpp(FbfValuePayload(v), check));
}

/*
 * fbf_info(fbf): the shape, the bookkeeping and the per-filter (or
 * per-epoch) counts, newest first, as the value's kind gives them
 * (fbf_value_bloom.c, fbf_value_cuckoo.c).
 */
Datum
fbf_info(PG_FUNCTION_ARGS)
{
	struct varlena *v = FbfArgValue(fcinfo, 0, false);
	FbfValueKey key;
	const unsigned char *streams;
	size_t		nstreams;
	size_t		trailer = 0;
	TupleDesc	tupdesc;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	/* what the portable form adds to the kind's: the key, the streams */
	if (FbfValueGetKey(v, &key))
		trailer += FBF_HASH_KEY_BYTES;
	if (FbfValueGetStreams(v, &streams, &nstreams))
		trailer += nstreams + 8;
	PG_RETURN_DATUM(FbfValueKindOf(v)->info(tupdesc, FbfValuePayload(v), trailer));
}

/* ----------------------------------------------------------------------
 * The build aggregate: fbf_agg(element, nbits, nhashes, npast)
 * ----------------------------------------------------------------------
 */

/*
 * Transition step.  The first row's shape creates the state in the
 * aggregate's memory context; later rows must name the same shape.  NULL
 * elements are skipped.  The state is updated in place, which is allowed
 * because only nodeAgg sees it.
 */
static Datum
agg_trans(FunctionCallInfo fcinfo, FbfHash (*hash) (Datum))
{
	MemoryContext aggcontext;
	Fbf		   *state;
	int32		nbits,
				nhashes,
				npast;
	FbfHash		h;

	if (!AggCheckCallContext(fcinfo, &aggcontext))
		elog(ERROR, "fbf_agg transition function called in non-aggregate context");
	if (PG_ARGISNULL(2) || PG_ARGISNULL(3) || PG_ARGISNULL(4))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("fbf_agg shape arguments must not be null")));
	nbits = PG_GETARG_INT32(2);
	nhashes = PG_GETARG_INT32(3);
	npast = PG_GETARG_INT32(4);

	if (PG_ARGISNULL(0))
	{
		int			nfilters = checked_shape(nbits, nhashes, npast, 1);
		MemoryContext old = MemoryContextSwitchTo(aggcontext);

		state = FbfValueAlloc(nbits, nfilters, 1);
		MemoryContextSwitchTo(old);
		fbf_init(state, nbits, nhashes, nfilters, 1, 0, 0);
	}
	else
	{
		/*
		 * The state is whatever an aggregate of the user's (STYPE = fbf,
		 * its INITCOND, an inverse function's result) makes it: of either
		 * kind, any shape, toasted.  The accessor checks it like any
		 * argument, in O(1), and detoasts it: a copy (or a converted value
		 * of fbf 1.0 or 1.1) is returned as the new state, which nodeAgg
		 * copies into the aggregate's context.
		 */
		state = PG_GETARG_FBF(0);
		if ((int64) state->nbits != nbits || state->nhashes != nhashes ||
			state->nfilters != npast + 2)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("fbf_agg shape must be the same for every row")));
	}

	if (!PG_ARGISNULL(1))
	{
		h = hash(PG_GETARG_DATUM(1));
		fbf_add(state, &h, FBF_CHECK_DEFAULT);
	}
	PG_RETURN_FBF(state);
}

static FbfHash
hash_int8_datum(Datum d)
{
	return fbf_hash_int64(DatumGetInt64(d));
}

Datum
fbf_agg_trans_text(PG_FUNCTION_ARGS)
{
	return agg_trans(fcinfo, hash_varlena);
}

Datum
fbf_agg_trans_int8(PG_FUNCTION_ARGS)
{
	return agg_trans(fcinfo, hash_int8_datum);
}
