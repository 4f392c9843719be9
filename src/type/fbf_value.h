/*-------------------------------------------------------------------------
 *
 * fbf_value.h
 *	  The `fbf` SQL value: a Forgetful Bloom Filter of the pure core
 *	  (core/fbf_core.h) in a varlena, and the helpers other subsystems use
 *	  to make one (the window's snapshots do).
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_VALUE_H
#define FBF_VALUE_H

#include "postgres.h"

#include "fmgr.h"

#include "core/fbf_core.h"

/*
 * An `fbf` datum: a varlena whose payload is an in-memory Fbf (fbf_core.h),
 * in native byte order.  The Fbf starts MAXALIGN(VARHDRSZ) bytes in, so its
 * 64-bit fields are aligned in palloc'd copies and, with the type's double
 * alignment, in tuples.  The portable form is only produced by send/out.
 *
 * Datums stored by fbf 1.0 and 1.1 hold the older flat Fbf (per-filter bit
 * arrays); FbfDatumGetFbf converts them, after checking them in full, so
 * every function reads both (PG_GETARG_FBF*).  Values are never written
 * back in the old form.
 */
#define FBF_VALUE_OFFSET	MAXALIGN(VARHDRSZ)

#define FbfValueGetFbf(v)	((Fbf *) ((char *) (v) + FBF_VALUE_OFFSET))

#define DatumGetFbfValue(d)		((struct varlena *) PG_DETOAST_DATUM(d))
#define DatumGetFbfValueCopy(d) ((struct varlena *) PG_DETOAST_DATUM_COPY(d))
#define PG_GETARG_FBF(n)		FbfDatumGetFbf(PG_GETARG_DATUM(n), false)
#define PG_GETARG_FBF_COPY(n)	FbfDatumGetFbf(PG_GETARG_DATUM(n), true)
#define PG_RETURN_FBF(f)		PG_RETURN_POINTER((char *) (f) - FBF_VALUE_OFFSET)

/*
 * The Fbf of an fbf datum, detoasted (a copy of its own if `copy`, which
 * the caller may modify); a datum of fbf 1.0 or 1.1 comes back converted.
 */
extern Fbf *FbfDatumGetFbf(Datum d, bool copy);

/* allocate an fbf datum able to hold an Fbf of this shape; returns the Fbf */
extern Fbf *FbfValueAlloc(uint32 nbits, int nfilters, uint32 nparts);

#endif							/* FBF_VALUE_H */
