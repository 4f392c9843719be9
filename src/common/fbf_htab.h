/*-------------------------------------------------------------------------
 *
 * fbf_htab.h
 *	  The one way fbf makes a backend-local hash table keyed by fixed-size
 *	  bytes (dynahash with HASH_BLOBS): the per-backend caches and the
 *	  per-call look-up tables of every subsystem.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_HTAB_H
#define FBF_HTAB_H

#include "postgres.h"

#include "utils/hsearch.h"

/*
 * A hash table `name` of entries of `entrysize` bytes whose first
 * `keysize` bytes are the key, compared as bytes (so a key struct must be
 * zeroed before it is filled), sized for `nelem` entries and allocated in
 * a context of its own under `cxt`.
 */
static inline HTAB *
FbfHashCreate(const char *name, long nelem, Size keysize, Size entrysize,
			  MemoryContext cxt)
{
	HASHCTL		ctl;

	ctl.keysize = keysize;
	ctl.entrysize = entrysize;
	ctl.hcxt = cxt;
	return hash_create(name, nelem, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

#endif							/* FBF_HTAB_H */
