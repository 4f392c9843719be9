/*-------------------------------------------------------------------------
 *
 * legacy.h
 *	  Test helper: an FBF in the flat in-memory form of fbf 1.0 and 1.1
 *	  (fbf_codec.c, "The flat in-memory form"), written field by field from
 *	  the current accessors, with any ring head, as a datum stored by those
 *	  versions holds it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_TEST_LEGACY_H
#define FBF_TEST_LEGACY_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fbf_core.h"

/* malloc'd flat form of f with the ring's future in slot `head`; *len bytes */
static unsigned char *
legacy_from_fbf(const Fbf *f, int head, size_t *len)
{
	int			n = f->nfilters;
	uint32_t	nparts = f->nparts;
	uint32_t	nwords = fbf_nwords(f->nbits);
	unsigned char *buf;
	unsigned char *born;
	unsigned char *counts;
	unsigned char *words;
	uint16_t	u16;
	int			i;
	uint32_t	p;

	*len = fbf_flat_size(f->nbits, n, nparts);
	buf = calloc(1, *len);
	memcpy(buf, &f->nbits, 4);
	u16 = f->nhashes;
	memcpy(buf + 4, &u16, 2);
	u16 = f->nfilters;
	memcpy(buf + 6, &u16, 2);
	u16 = f->nlive;
	memcpy(buf + 8, &u16, 2);
	u16 = (uint16_t) head;
	memcpy(buf + 10, &u16, 2);
	memcpy(buf + 12, &f->nparts, 4);
	memcpy(buf + 16, &f->epoch, 8);
	memcpy(buf + 24, &f->period, 8);
	born = buf + 32;
	counts = born + (size_t) n * 8;
	words = counts + (size_t) n * nparts * 8;
	for (i = 0; i < n; i++)
	{
		size_t		slot = (size_t) ((head + i) % n);
		int64_t		b = f->born_at[fbf_slot(f, i)];

		memcpy(born + slot * 8, &b, 8);
		for (p = 0; p < nparts; p++)
		{
			uint64_t	c = fbf_count_const(f, i, p);
			uint64_t   *plain = malloc((size_t) nwords * 8);

			memcpy(counts + (slot * nparts + p) * 8, &c, 8);
			fbf_extract_bits(f, i, p, plain);
			memcpy(words + (slot * nparts + p) * nwords * 8, plain, (size_t) nwords * 8);
			free(plain);
		}
	}
	return buf;
}

#endif							/* FBF_TEST_LEGACY_H */
