/*-------------------------------------------------------------------------
 *
 * fbf_value.h
 *	  The `fbf` SQL value: a Forgetful Bloom Filter of the pure core
 *	  (core/fbf_core.h), or a cuckoo window's snapshot (core/cwin_snap.h),
 *	  in a varlena, and the helpers other subsystems use to make and read
 *	  one (the window's snapshots and loads do).
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_VALUE_H
#define FBF_VALUE_H

#include "postgres.h"

#include "fmgr.h"

#include "compat.h"
#include "core/cwin_snap.h"
#include "core/fbf_core.h"

/*
 * An `fbf` datum: a varlena whose payload is one of two kinds of value, in
 * native byte order, told apart by its first field:
 *
 *	- a Forgetful Bloom Filter, an in-memory Fbf (fbf_core.h; `layout` is
 *	  FBF_LAYOUT_SLICED), as fbf_create, fbf_agg and fbf_snapshot of a
 *	  Bloom window make it;
 *	- a cuckoo window's snapshot, a CwinSnap (cwin_snap.h; `layout` is
 *	  CWIN_SNAP_LAYOUT), as fbf_snapshot of a window created with
 *	  filter => 'cuckoo' makes it.
 *
 * The payload starts MAXALIGN(VARHDRSZ) bytes in, so its 64-bit fields are
 * aligned in palloc'd copies and, with the type's double alignment, in
 * tuples.  The portable forms are only produced by send/out.
 *
 * Every function taking an fbf reads it through one validating accessor,
 * FbfDatumValue (FbfArgValue, PG_GETARG_FBF*), never by the datum's bare
 * pointer: it detoasts, and checks in O(1) the kind, the header and that
 * the size is exactly the shape's (XX001 if not), so that neither a value
 * of the other kind nor an aggregate state of the user's making is read
 * as what it is not (docs/design.md, "Validation of fbf values").
 *
 * Datums stored by fbf 1.0 and 1.1 hold the older flat Fbf (per-filter bit
 * arrays); the accessor converts them, after checking them in full, so
 * every function reads both.  Values are never written back in the old
 * form.
 *
 * Each kind's code is behind one interface (fbf_kind.h, private to
 * src/type): a routine struct per kind with its capabilities.  Functions
 * that make sense for a ring of Bloom filters only (adding, refreshing,
 * resizing, merging, the build aggregate's transition) take their argument
 * with PG_GETARG_FBF*, which refuses a kind without that capability (a
 * cuckoo snapshot: 0A000) naming the function; those that read both kinds
 * take FbfArgValue and ask the value's kind.
 */
#define FBF_VALUE_OFFSET	MAXALIGN(VARHDRSZ)

#define FbfValuePayload(v)		((void *) ((char *) (v) + FBF_VALUE_OFFSET))
#define FbfValueGetFbf(v)		((Fbf *) ((char *) (v) + FBF_VALUE_OFFSET))
#define FbfValueGetCwinSnap(v)	((CwinSnap *) ((char *) (v) + FBF_VALUE_OFFSET))

#define PG_GETARG_FBF(n)		FbfArgGetBloom(fcinfo, (n), false)
#define PG_GETARG_FBF_COPY(n)	FbfArgGetBloom(fcinfo, (n), true)
#define PG_RETURN_FBF(f)		PG_RETURN_POINTER((char *) (f) - FBF_VALUE_OFFSET)

/*
 * A keyed value (fbf_value_key.c): a counter's snapshot carries the key its
 * window hashes identities under, as this trailer after its payload.
 */
typedef struct FbfValueKey
{
	uint32		magic;			/* FBF_VALUE_KEY_MAGIC */
	uint32		flags;			/* FBF_VALUE_KEY_* */
	FbfHashKey	key;			/* never zero */
} FbfValueKey;

#define FBF_VALUE_KEY_MAGIC			0x4B464246	/* "FBFK" */
#define FBF_VALUE_KEY_PUBLIC_TOO	0x0001	/* it also holds operations
											 * recorded under the public
											 * hash (window_key.c) */
#define FBF_VALUE_KEY_STREAMS		0x0002	/* its window's streams lie
											 * between the payload and the
											 * key (core/fbf_stream_snap.h) */

/* the flag bits of a keyed value's portable form (docs/fbf-format.md) */
#define FBF_PORTABLE_KEYED			0x01
#define FBF_PORTABLE_PUBLIC_TOO		0x02
#define FBF_PORTABLE_STREAMS		0x04

/* Do the last bytes of a detoasted fbf datum look like a key trailer? */
extern bool FbfValueHasKeyTrailer(const struct varlena *v);

/* The key of a detoasted fbf datum, if it has one. */
extern bool FbfValueGetKey(const struct varlena *v, FbfValueKey *key);

/*
 * The datum `v` (palloc'd, unkeyed) with `key` appended (repalloc'd); as
 * it is if the key is zero.  A window's snapshot may have its streams
 * after the payload already (FbfWindowSnapshot): they stay, flagged in the
 * key; a value without a key carries none.
 */
extern struct varlena *FbfValueWithKey(struct varlena *v, const FbfHashKey *key,
									   bool public_too);

/*
 * The streams of a keyed value (core/fbf_stream_snap.h), their header
 * checked: true and *buf, *len set if it has some.  A value taken before
 * snapshots carried streams, or of a window that kept none, has none.
 */
extern bool FbfValueGetStreams(const struct varlena *v,
							   const unsigned char **buf, size_t *len);

/*
 * The layout of a datum whose payload is sound as its kind states it:
 * *payload its size, *streams the size of its streams (0: none), or false
 * if what follows the payload is neither nothing, nor a key, nor streams
 * and a key.  O(1).
 */
extern bool FbfValueLayout(const struct varlena *v, size_t stated,
						   size_t *streams, const char **why);

/*
 * A portable form's key: if buf[0 .. *len) is a keyed value, returns a
 * palloc'd copy of it without its key and streams (*len shrinks, the flag
 * bits are cleared: the kind's own form), *keyed true and *key set, and
 * *streams and *nstreams its streams (within buf; NULL and 0: none), their
 * contents validated; else buf itself.  *why, if not NULL, says what is
 * malformed.
 */
extern const unsigned char *FbfPortableTakeKey(const unsigned char *buf,
											   size_t *len, bool *keyed,
											   FbfValueKey *key,
											   const unsigned char **streams,
											   size_t *nstreams,
											   const char **why);

/*
 * Append streams (nstreams bytes; 0: none) and a key to a portable form
 * (repalloc'd), setting its flags.
 */
extern unsigned char *FbfPortablePutKey(unsigned char *buf, size_t *len,
										const FbfValueKey *key,
										const unsigned char *streams,
										size_t nstreams);

/*
 * A keyed datum `v` (FbfValueWithKey's) given streams: a new palloc'd
 * datum of its payload, the streams and its key.
 */
extern struct varlena *FbfValueWithStreams(struct varlena *v,
										   const unsigned char *streams,
										   size_t nstreams);

/* fbf_type.c: the core's long loops honour a cancel (from _PG_init) */
extern void FbfTypeInit(void);

/* Does a detoasted fbf datum hold a cuckoo window's snapshot? */
extern bool FbfValueIsCuckoo(const struct varlena *v);

/*
 * Datum d, detoasted (a copy of its own if `copy`), of either kind, its
 * kind, header and size checked; a datum of fbf 1.0 or 1.1 comes back
 * converted.  Refused with XX001 if not a sound value.
 */
extern struct varlena *FbfDatumValue(Datum d, bool copy);

/* FbfDatumValue of argument argno */
extern struct varlena *FbfArgValue(FunctionCallInfo fcinfo, int argno, bool copy);

/*
 * Check the contents of a value FbfDatumValue returned in full (bits,
 * counts, blocks, waiting operations: O(size)), as the input functions
 * do; XX001 if not sound.  For functions that store the value.
 */
extern void FbfValueCheckContents(const struct varlena *v);

/*
 * Argument argno as a Bloom filter (a copy of its own if `copy`, which the
 * caller may modify); a cuckoo snapshot is refused with 0A000.
 */
extern Fbf *FbfArgGetBloom(FunctionCallInfo fcinfo, int argno, bool copy);

/* fbf_value_bloom.c: an fbf datum able to hold an Fbf of this shape; the Fbf */
extern Fbf *FbfValueAlloc(uint32 nbits, int nfilters, uint32 nparts);

/*
 * fbf_value_cuckoo.c: allocate a zeroed fbf datum for a cuckoo snapshot of
 * this shape (cwin_snap_init done); returns the snapshot.
 */
extern CwinSnap *FbfCuckooValueAlloc(const CwinLayout *layout, uint32 nparts,
									 size_t ndeferred);

#endif							/* FBF_VALUE_H */
