/*-------------------------------------------------------------------------
 *
 * fbf.h
 *	  Declarations shared by the PostgreSQL-facing parts of the extension.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_H
#define FBF_H

#include "postgres.h"

#include "fmgr.h"

#include "fbf_core.h"

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

/* parse a membership-check name, with an error for unknown names */
extern FbfCheck FbfCheckFromText(text *name);

/* settings (fbf.c) */
extern bool fbf_worker_enabled;
extern int	fbf_naptime_ms;
extern int	fbf_max_filter_size_kb;
extern int	fbf_default_retention_ms;
extern double fbf_default_target_fpp;
extern double fbf_aimd_increase_at;
extern double fbf_aimd_decrease_at;
extern int	fbf_aimd_period_step_ms;
extern int	fbf_period_min_ms;

/* subsystem initialisation, called from _PG_init */
extern void FbfFilterAmInit(void);
extern void FbfFilterUtilityInit(void);
extern void FbfCounterInit(void);
extern void FbfShmemInit(void);
extern void FbfWorkerInit(void);

#endif							/* FBF_H */
