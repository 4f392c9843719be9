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
 * 64-bit words are aligned in palloc'd copies and, with the type's double
 * alignment, in tuples.  The portable form is only produced by send/out.
 */
#define FBF_VALUE_OFFSET	MAXALIGN(VARHDRSZ)

#define FbfValueGetFbf(v)	((Fbf *) ((char *) (v) + FBF_VALUE_OFFSET))

#define DatumGetFbfValue(d)		((struct varlena *) PG_DETOAST_DATUM(d))
#define DatumGetFbfValueCopy(d) ((struct varlena *) PG_DETOAST_DATUM_COPY(d))
#define PG_GETARG_FBF(n)		FbfValueGetFbf(DatumGetFbfValue(PG_GETARG_DATUM(n)))
#define PG_GETARG_FBF_COPY(n)	FbfValueGetFbf(DatumGetFbfValueCopy(PG_GETARG_DATUM(n)))
#define PG_RETURN_FBF(f)		PG_RETURN_POINTER((char *) (f) - FBF_VALUE_OFFSET)

/* allocate an fbf datum able to hold an Fbf of this shape; returns the Fbf */
extern Fbf *FbfValueAlloc(uint32 nbits, int nfilters, uint32 nparts);

#endif							/* FBF_VALUE_H */
