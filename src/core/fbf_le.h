/*-------------------------------------------------------------------------
 *
 * fbf_le.h
 *	  Little-endian reads and writes of fixed-width integers, for the
 *	  portable forms and the hashes' inputs.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_LE_H
#define FBF_LE_H

#include <stdint.h>

static inline uint32_t
fbf_le32_read(const unsigned char *p)
{
	return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 |
		(uint32_t) p[3] << 24;
}

static inline uint64_t
fbf_le64_read(const unsigned char *p)
{
	uint64_t	v = 0;
	int			i;

	for (i = 0; i < 8; i++)
		v |= (uint64_t) p[i] << (8 * i);
	return v;
}

static inline void
fbf_le64_write(unsigned char *p, uint64_t v)
{
	int			i;

	for (i = 0; i < 8; i++)
		p[i] = (unsigned char) (v >> (8 * i));
}

static inline void
fbf_le32_write(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char) v;
	p[1] = (unsigned char) (v >> 8);
	p[2] = (unsigned char) (v >> 16);
	p[3] = (unsigned char) (v >> 24);
}

#endif							/* FBF_LE_H */
