/*-------------------------------------------------------------------------
 *
 * fbf_kind.h
 *	  The kinds of `fbf` value behind one interface, in the spirit of
 *	  pgvector's HnswTypeInfo: a routine struct per kind, with its declared
 *	  capabilities and the operations the type's functions need, so that
 *	  fbf_type.c and fbf_value_key.c ask the value's kind instead of
 *	  branching on it.  Private to src/type.
 *
 *	  kind			payload (fbf_value.h)			code
 *	  Bloom ring	Fbf, FBF_LAYOUT_SLICED			fbf_value_bloom.c
 *	  cuckoo		CwinSnap, CWIN_SNAP_LAYOUT		fbf_value_cuckoo.c
 *
 * A datum's kind is found by its payload's first field (FbfValueKindOf),
 * portable bytes' by their format version (FbfPortableKindOf): the one
 * mapping of each to a kind, a lookup in fbf_kind.c's table.  No code
 * outside the two kind files and that table names a kind.  The kinds' code
 * calls nothing of the table's or of fbf_type.c (errors are the caller's:
 * operations that can fail return why), so the files call down only:
 * fbf_type.c -> fbf_value_key.c -> fbf_kind.c -> the kind files.
 *
 * No shared state, no locks.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_KIND_H
#define FBF_KIND_H

#include "postgres.h"

#include "access/tupdesc.h"
#include "fmgr.h"

#include "core/fbf_core.h"
#include "type/fbf_value.h"

typedef struct FbfKindInfo
{
	/* the value, for messages ("%s() does not take %s") */
	const char *name;
	/* the payload's first field (a uint32 in native byte order) */
	uint32		layout;

	/*
	 * The portable form: its format version (byte 4, after the magic), and
	 * where in a header of at least portable_header_bytes a keyed value's
	 * flag bits are (fbf_value_key.c; docs/fbf-format.md).
	 */
	uint8		format_version;
	size_t		portable_header_bytes;
	int			flags_at;
	int			flags_width;	/* 2 or 4 bytes */

	/*
	 * Capabilities.  ring: the operations of a ring of Bloom filters (add,
	 * refresh, resize, merge, the build aggregate) take this kind, whose
	 * payload is then an Fbf; a kind without them is refused by
	 * FbfArgGetBloom (0A000) with not_ring_detail.
	 */
	bool		ring;
	const char *not_ring_detail;

	/*
	 * The payload size the header of datum v states, if the header is
	 * sound enough to state one; else 0.  Reads no more than VARSIZE(v).
	 */
	size_t		(*stated_size) (const struct varlena *v);

	/* O(1): the header's rules, and exactly `size` bytes of payload */
	bool		(*check_header) (const void *payload, size_t size,
								 const char **why);

	/* O(size): the contents (a payload check_header accepted) */
	bool		(*check_contents) (const void *payload, const char **why);

	/* the portable form of a payload, and its size */
	size_t		(*serialized_size) (const void *payload);
	void		(*serialize) (const void *payload, unsigned char *out);

	/*
	 * Validate unkeyed portable bytes as this kind's and build a datum of
	 * them, allocating no more than the input's size before the input is
	 * known sound; NULL and *why if malformed.
	 */
	struct varlena *(*from_bytes) (const unsigned char *buf, size_t len,
								   const char **why);

	/* reads: membership under a check variant, the estimate, fbf_info */
	bool		(*contains) (const void *payload, const FbfHash *hash,
							 FbfCheck check);
	double		(*estimate_fpp) (const void *payload, FbfCheck check);
	Datum		(*info) (TupleDesc tupdesc, const void *payload, size_t trailer);

	/*
	 * A datum of an older layout, which carries no kind's layout word, as
	 * a new palloc'd datum of this kind, checked in full; NULL (and *why)
	 * if it is not sound.  NULL for a kind with no older layout.
	 */
	struct varlena *(*upgrade) (const struct varlena *v, const char **why);
} FbfKindInfo;

/* fbf_value_bloom.c, fbf_value_cuckoo.c */
extern const FbfKindInfo FbfBloomKind;
extern const FbfKindInfo FbfCuckooKind;

/* fbf_kind.c: the table of kinds and the lookups */
extern const FbfKindInfo *FbfValueKindOf(const struct varlena *v);
extern const FbfKindInfo *FbfPortableKindOf(const unsigned char *buf, size_t len);
extern const FbfKindInfo *FbfOldestKind(void);

/*
 * A new fbf datum (palloc'd, not zeroed) for a payload of `size` bytes,
 * its length set.
 */
static inline struct varlena *
FbfValueNew(size_t size)
{
	struct varlena *v = palloc(FBF_VALUE_OFFSET + size);

	SET_VARSIZE(v, FBF_VALUE_OFFSET + size);
	return v;
}

#endif							/* FBF_KIND_H */
