/*-------------------------------------------------------------------------
 *
 * fbf_kind.c
 *	  The table of the kinds of `fbf` value (fbf_kind.h) and the lookups
 *	  that map a datum's layout word, or portable bytes' format version, to
 *	  its kind: the one place either mapping is made.
 *
 * No shared state, no locks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "type/fbf_kind.h"
#include "type/fbf_value.h"

/*
 * The kinds of value (fbf_kind.h).  The first is the oldest: a datum that
 * carries no kind's layout word is its older form (fbf 1.0 and 1.1's flat
 * values), and portable bytes no kind recognizes are decoded as its, so
 * that its decoder says what is wrong with them.
 */
static const FbfKindInfo *const fbf_kinds[] = {&FbfBloomKind, &FbfCuckooKind};

/*
 * The kind of a detoasted fbf datum, by its payload's first field; NULL if
 * no kind's (fbf 1.0 and 1.1's flat values, or not a value).
 */
const FbfKindInfo *
FbfValueKindOf(const struct varlena *v)
{
	uint32		layout;

	if (VARSIZE(v) < FBF_VALUE_OFFSET + sizeof(uint32))
		return NULL;
	memcpy(&layout, (const char *) v + FBF_VALUE_OFFSET, sizeof(uint32));
	for (size_t i = 0; i < lengthof(fbf_kinds); i++)
	{
		if (fbf_kinds[i]->layout == layout)
			return fbf_kinds[i];
	}
	return NULL;
}

/*
 * The kind whose format version portable bytes carry (byte 4, after the
 * magic, which this does not check); NULL if none.
 */
const FbfKindInfo *
FbfPortableKindOf(const unsigned char *buf, size_t len)
{
	if (len < 5)
		return NULL;
	for (size_t i = 0; i < lengthof(fbf_kinds); i++)
	{
		if (fbf_kinds[i]->format_version == buf[4])
			return fbf_kinds[i];
	}
	return NULL;
}

/* the oldest kind (see fbf_kinds) */
const FbfKindInfo *
FbfOldestKind(void)
{
	return fbf_kinds[0];
}

/* Does a detoasted fbf datum hold a cuckoo window's snapshot? */
bool
FbfValueIsCuckoo(const struct varlena *v)
{
	return FbfValueKindOf(v) == &FbfCuckooKind;
}
