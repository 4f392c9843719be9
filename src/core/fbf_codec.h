/*-------------------------------------------------------------------------
 *
 * fbf_codec.h
 *	  Portable, versioned little-endian serialization of an FBF.
 *
 * The byte layout (format version 1) is documented in docs/fbf-format.md;
 * it is the `fbf` type's binary I/O (send/recv) and, hex-encoded, its text
 * I/O.  Decoding validates everything before anything is allocated beyond
 * the input's own size: a malformed input is rejected with a reason, never
 * read out of bounds.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_CODEC_H
#define FBF_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fbf_core.h"

#define FBF_FORMAT_VERSION		1
#define FBF_HEADER_BYTES		40

/* the four bytes every serialized FBF starts with */
extern const unsigned char fbf_magic[4];

/* serialized size of f */
extern size_t fbf_serialized_size(const Fbf *f);

/* write f's serialized form into out (fbf_serialized_size(f) bytes) */
extern void fbf_serialize(const Fbf *f, unsigned char *out);

/*
 * Validate a serialized FBF of len bytes.  On success return true and set
 * *size to the bytes its in-memory form needs; on failure return false and
 * point *why at a sentence fit for errdetail.
 */
extern bool fbf_validate(const unsigned char *buf, size_t len, size_t *size,
						 const char **why);

/* decode a buffer that fbf_validate() accepted into f (*size bytes) */
extern void fbf_deserialize(const unsigned char *buf, size_t len, Fbf *f);

/*
 * Check the header of an in-memory FBF of len bytes: the layout tag, the
 * shape, the stride, the ring bookkeeping, the epoch and the period, by
 * the rules of fbf_validate, and len being exactly fbf_size() of the
 * shape.  O(1); reads nothing past len.  The functions of fbf_core.h and
 * fbf_serialize read and write a value it accepts within its len bytes,
 * whatever its bits and counts hold (fbf_check_invariants checks those).
 * On failure return false and point *why at a sentence fit for errdetail.
 */
extern bool fbf_check_header(const void *mem, size_t len, const char **why);

/*
 * Check the invariants of an in-memory FBF (the same rules fbf_validate
 * applies to serialized input).  For tests and assertions.
 */
extern bool fbf_check_invariants(const Fbf *f, const char **why);

/*
 * In-memory values of builds before the bit-sliced layout (fbf 1.0 and
 * 1.1; the flat form of fbf_flat_size, native byte order, per-filter bit
 * arrays by physical slot), as `fbf` datums they stored in tables still
 * hold.  fbf_layout_is_current tells an Fbf from one (at least 4 readable
 * bytes); fbf_legacy_validate checks one of len bytes in full, with the
 * rules of fbf_validate, and sets *size to the bytes its Fbf needs;
 * fbf_from_legacy converts one it accepted (head becomes 0).
 */
extern bool fbf_layout_is_current(const void *mem);
extern bool fbf_legacy_validate(const void *mem, size_t len, size_t *size,
								const char **why);
extern void fbf_from_legacy(const void *mem, Fbf *f);

/*
 * Text form: "\\x" followed by the serialized bytes as hex digit pairs (the
 * way bytea prints).  fbf_hex_encode writes 2 + 2 * len characters and a
 * terminating NUL.  fbf_hex_decode accepts either case, nothing else (no
 * white space); out needs (len - 2) / 2 bytes.
 */
extern void fbf_hex_encode(const unsigned char *buf, size_t len, char *out);
extern bool fbf_hex_decode(const char *text, size_t len, unsigned char *out,
						   size_t *outlen, const char **why);

#endif							/* FBF_CODEC_H */
