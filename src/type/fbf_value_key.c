/*-------------------------------------------------------------------------
 *
 * fbf_value_key.c
 *	  Keyed values: a counter's snapshot carries the secret key its window
 *	  hashes identities under (src/window/window_key.c), so that it can be
 *	  asked about identities (fbf_contains) and loaded into another window
 *	  (fbf_counter_load, restores, Citus transfers) that then hashes as the
 *	  original did.
 *
 * In memory the key follows the value's payload (an Fbf or a CwinSnap, of
 * the size its own header gives) as an FbfValueKey trailer; a value
 * without the trailer is unkeyed: its elements are hashed under the
 * public hash, as every value made by fbf_create, fbf_agg and fbf 1.0 or
 * 1.1 is.  In the portable form (docs/fbf-format.md) a keyed value sets
 * bit 0 of the header's flags (format version 1: the 16-bit flags at
 * offset 14; version 2: the 32-bit field at offset 20), bit 1 if it also
 * holds operations recorded under the public hash, and ends with the 16
 * key bytes.  A build that knows no keys rejects such a value (non-zero
 * flags) rather than misreading it.
 *
 * A keyed value can be read (fbf_contains, fbf_info, fbf_estimated_fpp,
 * output) and loaded, not changed: what it holds are a counter's
 * operations, hashed under a key no SQL function takes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "core/fbf_codec.h"
#include "core/fbf_le.h"
#include "type/fbf_kind.h"
#include "type/fbf_value.h"

/*
 * The payload's size, as its kind's header gives it; 0 if it has none of
 * ours (fbf 1.0 and 1.1's flat form, never keyed, has no kind's layout).
 */
static size_t
payload_size(const struct varlena *v)
{
	const FbfKindInfo *kind = FbfValueKindOf(v);

	return kind ? kind->stated_size(v) : 0;
}

bool
FbfValueHasKeyTrailer(const struct varlena *v)
{
	FbfValueKey key;

	if (VARSIZE(v) < FBF_VALUE_OFFSET + sizeof(FbfValueKey))
		return false;
	memcpy(&key, (const char *) v + VARSIZE(v) - sizeof(FbfValueKey), sizeof(key));
	return key.magic == FBF_VALUE_KEY_MAGIC && fbf_hash_key_is_set(&key.key);
}

bool
FbfValueGetKey(const struct varlena *v, FbfValueKey *key)
{
	size_t		size = payload_size(v);

	if (size == 0 || VARSIZE(v) != FBF_VALUE_OFFSET + size + sizeof(FbfValueKey))
		return false;
	memcpy(key, (const char *) v + FBF_VALUE_OFFSET + size, sizeof(FbfValueKey));
	return key->magic == FBF_VALUE_KEY_MAGIC && fbf_hash_key_is_set(&key->key);
}

struct varlena *
FbfValueWithKey(struct varlena *v, const FbfHashKey *key, bool public_too)
{
	size_t		size = payload_size(v);
	FbfValueKey trailer;

	if (!fbf_hash_key_is_set(key))
		return v;
	if (size == 0 || VARSIZE(v) != FBF_VALUE_OFFSET + size)
		elog(ERROR, "fbf: cannot key a value of %zu bytes", (size_t) VARSIZE(v));
	trailer.magic = FBF_VALUE_KEY_MAGIC;
	trailer.flags = public_too ? FBF_VALUE_KEY_PUBLIC_TOO : 0;
	trailer.key = *key;
	v = repalloc(v, FBF_VALUE_OFFSET + size + sizeof(FbfValueKey));
	memcpy((char *) v + FBF_VALUE_OFFSET + size, &trailer, sizeof(trailer));
	SET_VARSIZE(v, FBF_VALUE_OFFSET + size + sizeof(FbfValueKey));
	return v;
}

/* where a portable form's flags are, by its format version; -1: none */
static int
flags_offset(const unsigned char *buf, size_t len, int *width)
{
	const FbfKindInfo *kind;

	if (len < FBF_HEADER_BYTES)
		return -1;
	kind = FbfPortableKindOf(buf, len);
	if (kind == NULL || len < kind->portable_header_bytes)
		return -1;
	*width = kind->flags_width;
	return kind->flags_at;
}

const unsigned char *
FbfPortableTakeKey(const unsigned char *buf, size_t *len, bool *keyed,
				   FbfValueKey *key, const char **why)
{
	int			width;
	int			at = flags_offset(buf, *len, &width);
	uint32		flags;
	unsigned char *copy;

	*keyed = false;
	*why = NULL;
	if (at < 0)
		return buf;
	flags = width == 2 ? fbf_le16_read(buf + at) :
		fbf_le32_read(buf + at);
	if ((flags & FBF_PORTABLE_KEYED) == 0)
	{
		if ((flags & FBF_PORTABLE_PUBLIC_TOO) != 0)
			*why = "A value without a key has the flag of a keyed one.";
		return buf;
	}
	if (*len < (size_t) (buf[4] == FBF_FORMAT_VERSION ? FBF_HEADER_BYTES :
						 CWIN_SNAP_HEADER_BYTES) + FBF_HASH_KEY_BYTES)
	{
		*why = "A keyed value is shorter than its header and key.";
		return buf;
	}
	*len -= FBF_HASH_KEY_BYTES;
	key->magic = FBF_VALUE_KEY_MAGIC;
	key->flags = (flags & FBF_PORTABLE_PUBLIC_TOO) ? FBF_VALUE_KEY_PUBLIC_TOO : 0;
	key->key.k0 = fbf_le64_read(buf + *len);
	key->key.k1 = fbf_le64_read(buf + *len + 8);
	if (!fbf_hash_key_is_set(&key->key))
	{
		*why = "A keyed value's key is zero.";
		return buf;
	}
	/* what is left is the unkeyed form, for the kind's own decoder */
	copy = palloc(*len);
	memcpy(copy, buf, *len);
	copy[at] &= (unsigned char) ~(FBF_PORTABLE_KEYED | FBF_PORTABLE_PUBLIC_TOO);
	*keyed = true;
	return copy;
}

unsigned char *
FbfPortablePutKey(unsigned char *buf, size_t *len, const FbfValueKey *key)
{
	int			width;
	int			at = flags_offset(buf, *len, &width);

	if (at < 0)
		elog(ERROR, "fbf: no flags in a serialized value of %zu bytes", *len);
	buf = repalloc(buf, *len + FBF_HASH_KEY_BYTES);
	buf[at] |= FBF_PORTABLE_KEYED;
	if (key->flags & FBF_VALUE_KEY_PUBLIC_TOO)
		buf[at] |= FBF_PORTABLE_PUBLIC_TOO;
	fbf_le64_write(buf + *len, key->key.k0);
	fbf_le64_write(buf + *len + 8, key->key.k1);
	*len += FBF_HASH_KEY_BYTES;
	return buf;
}
