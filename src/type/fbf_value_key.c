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
 * Streams.  A window's snapshot also carries what its stream pages know
 * (core/fbf_stream_snap.h: a section of its own, versioned), so that a
 * load keeps in-order clients exact.  Streams are keyed hashes, so only a
 * keyed value has them: in memory between the payload and the key, the
 * key's flags saying so (FBF_VALUE_KEY_STREAMS); in the portable form
 * after the kind's form, followed by their length (8 bytes) and the key,
 * bit 2 of the flags saying so.  A value of an older build has no
 * streams and loads as it did (the streams reset); a build that knows no
 * streams rejects a value with them (a flag bit it does not know).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "core/fbf_codec.h"
#include "core/fbf_le.h"
#include "core/fbf_stream_snap.h"
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
FbfValueLayout(const struct varlena *v, size_t stated, size_t *streams,
			   const char **why)
{
	size_t		len = VARSIZE(v);
	FbfValueKey key;
	size_t		rest;

	*streams = 0;
	if (len < FBF_VALUE_OFFSET || len - FBF_VALUE_OFFSET < stated)
	{
		*why = "The value is shorter than its header states.";
		return false;
	}
	rest = len - FBF_VALUE_OFFSET - stated;
	if (rest == 0)
		return true;
	if (rest < sizeof(FbfValueKey) || !FbfValueHasKeyTrailer(v))
	{
		*why = "The length does not match the shape in the header.";
		return false;
	}
	memcpy(&key, (const char *) v + len - sizeof(FbfValueKey), sizeof(key));
	rest -= sizeof(FbfValueKey);
	if ((key.flags & FBF_VALUE_KEY_STREAMS) == 0)
	{
		if (rest != 0)
		{
			*why = "The length does not match the shape in the header.";
			return false;
		}
		return true;
	}
	if (!fbf_streams_validate((const unsigned char *) v + FBF_VALUE_OFFSET + stated,
							  rest, false, why))
		return false;
	*streams = rest;
	return true;
}

bool
FbfValueGetKey(const struct varlena *v, FbfValueKey *key)
{
	size_t		size = payload_size(v);
	size_t		streams;
	const char *why;

	if (size == 0 || !FbfValueLayout(v, size, &streams, &why) ||
		VARSIZE(v) != FBF_VALUE_OFFSET + size + streams + sizeof(FbfValueKey))
		return false;
	memcpy(key, (const char *) v + VARSIZE(v) - sizeof(FbfValueKey), sizeof(FbfValueKey));
	return key->magic == FBF_VALUE_KEY_MAGIC && fbf_hash_key_is_set(&key->key);
}

bool
FbfValueGetStreams(const struct varlena *v, const unsigned char **buf,
				   size_t *len)
{
	size_t		size = payload_size(v);
	size_t		streams;
	const char *why;

	if (size == 0 || !FbfValueLayout(v, size, &streams, &why) || streams == 0)
		return false;
	*buf = (const unsigned char *) v + FBF_VALUE_OFFSET + size;
	*len = streams;
	return true;
}

struct varlena *
FbfValueWithKey(struct varlena *v, const FbfHashKey *key, bool public_too)
{
	size_t		size = payload_size(v);
	size_t		streams;
	FbfValueKey trailer;
	const char *why;

	if (size == 0 || VARSIZE(v) < FBF_VALUE_OFFSET + size)
		elog(ERROR, "fbf: cannot key a value of %zu bytes", (size_t) VARSIZE(v));
	/* what follows the payload is the window's streams (FbfWindowSnapshot) */
	streams = VARSIZE(v) - FBF_VALUE_OFFSET - size;
	if (streams > 0 &&
		(!fbf_hash_key_is_set(key) ||
		 !fbf_streams_validate((const unsigned char *) v + FBF_VALUE_OFFSET + size,
							   streams, true, &why)))
		elog(ERROR, "fbf: a snapshot's %zu bytes after its payload are not streams under a key",
			 streams);
	if (!fbf_hash_key_is_set(key))
		return v;
	trailer.magic = FBF_VALUE_KEY_MAGIC;
	trailer.flags = (public_too ? FBF_VALUE_KEY_PUBLIC_TOO : 0) |
		(streams > 0 ? FBF_VALUE_KEY_STREAMS : 0);
	trailer.key = *key;
	v = repalloc_huge(v, FBF_VALUE_OFFSET + size + streams + sizeof(FbfValueKey));
	memcpy((char *) v + FBF_VALUE_OFFSET + size + streams, &trailer, sizeof(trailer));
	SET_VARSIZE(v, FBF_VALUE_OFFSET + size + streams + sizeof(FbfValueKey));
	return v;
}

struct varlena *
FbfValueWithStreams(struct varlena *v, const unsigned char *streams,
					size_t nstreams)
{
	size_t		size = payload_size(v);
	FbfValueKey trailer;
	struct varlena *result;
	Size		total;

	if (size == 0 || VARSIZE(v) != FBF_VALUE_OFFSET + size + sizeof(FbfValueKey))
		elog(ERROR, "fbf: cannot give streams to a value of %zu bytes",
			 (size_t) VARSIZE(v));
	memcpy(&trailer, (const char *) v + FBF_VALUE_OFFSET + size, sizeof(trailer));
	trailer.flags |= FBF_VALUE_KEY_STREAMS;
	total = FBF_VALUE_OFFSET + size + nstreams + sizeof(FbfValueKey);
	if (!AllocSizeIsValid(total))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("an fbf value of %zu bytes is too large", (size_t) total)));
	result = palloc(total);
	memcpy(result, v, FBF_VALUE_OFFSET + size);
	memcpy((char *) result + FBF_VALUE_OFFSET + size, streams, nstreams);
	memcpy((char *) result + FBF_VALUE_OFFSET + size + nstreams, &trailer,
		   sizeof(trailer));
	SET_VARSIZE(result, total);
	return result;
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
				   FbfValueKey *key, const unsigned char **streams,
				   size_t *nstreams, const char **why)
{
	int			width;
	int			at = flags_offset(buf, *len, &width);
	uint32		flags;
	unsigned char *copy;
	size_t		header;

	*keyed = false;
	*streams = NULL;
	*nstreams = 0;
	*why = NULL;
	if (at < 0)
		return buf;
	flags = width == 2 ? fbf_le16_read(buf + at) :
		fbf_le32_read(buf + at);
	if ((flags & FBF_PORTABLE_KEYED) == 0)
	{
		/* the streams' flag without a key: the kind's reserved bits */
		if ((flags & FBF_PORTABLE_PUBLIC_TOO) != 0)
			*why = "A value without a key has the flag of a keyed one.";
		return buf;
	}
	header = buf[4] == FBF_FORMAT_VERSION ? FBF_HEADER_BYTES : CWIN_SNAP_HEADER_BYTES;
	if (*len < header + FBF_HASH_KEY_BYTES)
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
	if (flags & FBF_PORTABLE_STREAMS)
	{
		uint64		slen;

		/* the streams, then their length, before the key */
		if (*len < header + 8)
		{
			*why = "A value with streams is shorter than its header and their length.";
			return buf;
		}
		slen = fbf_le64_read(buf + *len - 8);
		if (slen > *len - 8 - header)
		{
			*why = "The length of the value's streams is out of range.";
			return buf;
		}
		*len -= 8 + (size_t) slen;
		if (!fbf_streams_validate(buf + *len, (size_t) slen, true, why))
			return buf;
		*streams = buf + *len;
		*nstreams = (size_t) slen;
	}
	/* what is left is the unkeyed form, for the kind's own decoder */
	copy = palloc(*len);
	memcpy(copy, buf, *len);
	copy[at] &= (unsigned char) ~(FBF_PORTABLE_KEYED | FBF_PORTABLE_PUBLIC_TOO |
								  FBF_PORTABLE_STREAMS);
	*keyed = true;
	return copy;
}

unsigned char *
FbfPortablePutKey(unsigned char *buf, size_t *len, const FbfValueKey *key,
				  const unsigned char *streams, size_t nstreams)
{
	int			width;
	int			at = flags_offset(buf, *len, &width);

	if (at < 0)
		elog(ERROR, "fbf: no flags in a serialized value of %zu bytes", *len);
	buf = repalloc_huge(buf, *len + (nstreams > 0 ? nstreams + 8 : 0) +
						FBF_HASH_KEY_BYTES);
	buf[at] |= FBF_PORTABLE_KEYED;
	if (key->flags & FBF_VALUE_KEY_PUBLIC_TOO)
		buf[at] |= FBF_PORTABLE_PUBLIC_TOO;
	if (nstreams > 0)
	{
		buf[at] |= FBF_PORTABLE_STREAMS;
		memcpy(buf + *len, streams, nstreams);
		fbf_le64_write(buf + *len + nstreams, (uint64) nstreams);
		*len += nstreams + 8;
	}
	fbf_le64_write(buf + *len, key->key.k0);
	fbf_le64_write(buf + *len + 8, key->key.k1);
	*len += FBF_HASH_KEY_BYTES;
	return buf;
}
