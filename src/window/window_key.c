/*-------------------------------------------------------------------------
 *
 * window_key.c
 *	  The window's secret key: every identity is hashed under it, so that
 *	  no one without it can choose identities whose bits or fingerprints
 *	  cover someone else's.
 *
 * Why.  Under the public hash (core/fbf_hash.h: a fixed, documented seed)
 * anyone who knows a counter's shape can compute, offline, which of the
 * identities they may send set the bits of an identity they may not: a
 * tenant limited by row security to its own keys could make another
 * tenant's next operation look like a retry, or learn whether it was sent.
 * Under a random 128-bit key that only the window knows (SipHash-2-4,
 * core/fbf_keyed_hash.c) where an identity lands is unpredictable to them.
 *
 * Where the key lives.  In the metapage (meta->key), WAL-logged with it, so
 * crash recovery, standbys and base backups have it; a rebuild copies the
 * pages, and with them the key; pg_upgrade keeps the files.  A new window
 * gets a random key when it is built (FbfWindowNewKey, window_build.c).  A
 * snapshot carries its window's key (src/type: fbf_snapshot reveals it
 * only to roles that may read every row, which can anyway apply nothing
 * they may not), and a load gives it to the window (window_bloom_snap.c,
 * window_cuckoo_snap.c): an
 * empty window adopts the snapshot's key, a window that has none takes
 * it, and a snapshot under another key is refused.
 *
 * Windows without a key.  A window written before keys existed has a zero
 * key, and records operations under the public hash.  Its refreshes give
 * it one in two steps (FbfWindowKeyStep), without forgetting anything:
 *
 *	1. It takes a random key and notes the next FullTransactionId
 *	   (keyed_at), and public_until becomes FBF_PUBLIC_OPEN.  From then on
 *	   every operation is recorded under the key, and also looked up under
 *	   the public hash: on the public identity's chain (an entry there may
 *	   be in flight: it is waited for, like a twin) and in its partition
 *	   page (window_apply.c).  No operation can straddle the change:
 *	   FbfWindowApply compares the key its caller hashed under with the
 *	   metapage's, under the metapage lock, and refuses the operation
 *	   (FBF_OP_REKEYED, nothing recorded) if they differ; the caller hashes
 *	   again.  So every entry recorded under the public hash belongs to a
 *	   transaction whose xid precedes keyed_at.
 *	2. A later refresh drains every chain and finds no entry left that
 *	   precedes keyed_at: the public operations are now all in the bits,
 *	   where they age out as any other.  public_until becomes a retention
 *	   and two periods later (no earlier than a 1.0 window's frozen filters
 *	   are checked), after which the public hash is not asked any more.
 *
 * The fixed key.  A window keyed while fbf.fixed_window_keys is on takes
 * a key this file spells out: as public as the public hash.  Once the
 * setting is off, its refresh gives it up in the same two steps, the
 * fixed key standing for the public hash: step 1 takes a random key, notes
 * keyed_at and sets FBF_META_FIXED_PUBLIC in the metapage's flags, which
 * makes the public lookups hash under the fixed key (FbfWindowKeyingOf:
 * keying->public_key); step 2 ends them as above.  The flag is cleared by
 * a later refresh once public_until has passed.  The step waits while the
 * window still asks the public hash or a 1.0 window's frozen filters
 * (both take the public hash): the window asks one other hashing at a
 * time.  A window is recognised by its key alone, which a random key
 * equals with probability 2^-128; with the setting on, nothing is changed.
 * Everything is in the metapage, logged whole by FbfWindowLogMeta, so
 * replay and standbys need nothing more.
 *
 * Streams.  An operation numbered in a stream (a client's seq) also gets
 * its stream's id under the key (FbfWindowHashOperation); a window without a
 * key of its own keeps no streams, and one still asking the public hash
 * records them without asking them (window_apply.c).
 *
 * Locks: the metapage, exclusive, for the steps (called from
 * FbfWindowRefresh); chains as src/window/README.md orders them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "storage/bufmgr.h"
#include "utils/guc.h"
#include "utils/rel.h"

#include "core/fbf_le.h"
#include "window/window_int.h"

/*
 * fbf.fixed_window_keys, a developer option: every window given a key from
 * now on gets the same one, which this file spells out, so that which
 * operations a filter takes for one another (its false positives) is the
 * same from run to run, as it was under the public hash.  For test suites
 * only: with it, anyone can aim bits, as before keys.
 */
static bool fbf_fixed_window_keys = false;

#define FBF_FIXED_WINDOW_KEY0	UINT64CONST(0x7473657466626600)	/* "\0fbftest" */
#define FBF_FIXED_WINDOW_KEY1	UINT64CONST(0x79656b6465786966)	/* "fixedkey" */

static const FbfHashKey fixed_window_key = {
	FBF_FIXED_WINDOW_KEY0, FBF_FIXED_WINDOW_KEY1
};

void
FbfWindowKeyInit(void)
{
	DefineCustomBoolVariable("fbf.fixed_window_keys",
							 "Gives every new filter the same, publicly known key (for test suites only).",
							 "Makes a filter's false positives the same from run to run; lets anyone who knows a counter's shape choose operations that cancel others'. Never set it on a server that untrusted roles use.",
							 &fbf_fixed_window_keys, false,
							 PGC_SUSET, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
}

/* A new key, never zero: random, but for fbf.fixed_window_keys. */
void
FbfWindowNewKey(FbfHashKey *key)
{
	unsigned char bytes[FBF_HASH_KEY_BYTES];

	if (fbf_fixed_window_keys)
	{
		*key = fixed_window_key;
		return;
	}
	do
	{
		if (!pg_strong_random(bytes, sizeof(bytes)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate a random key for an fbf window")));
		key->k0 = fbf_le64_read(bytes);
		key->k1 = fbf_le64_read(bytes + 8);
	} while (!fbf_hash_key_is_set(key));
}

bool
FbfWindowKeysEqual(const FbfHashKey *a, const FbfHashKey *b)
{
	return a->k0 == b->k0 && a->k1 == b->k1;
}

/* How the window described by `meta` hashes identities at window time `now`. */
void
FbfWindowKeyingOf(const FbfWindowMetaPageData *meta, int64 now,
				  FbfWindowKeying *keying)
{
	static const FbfHashKey public_hash = {0, 0};

	keying->key = meta->key;
	keying->public_too = fbf_hash_key_is_set(&meta->key) &&
		now < meta->public_until;
	keying->public_key = (meta->flags & FBF_META_FIXED_PUBLIC) != 0 ?
		fixed_window_key : public_hash;
	keying->keyless_too = meta->legacy.keyless && now < meta->legacy.until;
}

/*
 * How the window hashes identities now, into *keying: the backend's copy,
 * kept in the index's rd_amcache (as access/hash keeps its metapage; freed
 * whenever relcache invalidations are processed), or with `reread` the
 * metapage's, which becomes the copy.  The caller holds RowExclusiveLock
 * on the table.  The copy can be stale, and the key can change under the
 * lock too (a refresh's first step, an empty window adopting a snapshot):
 * FbfWindowApply compares the keying an operation was hashed under with
 * the metapage's and says FBF_OP_REKEYED, and the caller rereads.
 */
void
FbfWindowGetKeying(Relation index, bool reread, FbfWindowKeying *keying)
{
	if (index->rd_amcache == NULL || reread)
	{
		FbfWindowMetaPageData meta;

		FbfWindowReadMeta(index, &meta);
		FbfWindowKeyingOf(&meta, FbfWindowNow(&meta), keying);
		if (index->rd_amcache == NULL)
			index->rd_amcache = MemoryContextAlloc(index->rd_indexcxt,
												   sizeof(FbfWindowKeying));
		memcpy(index->rd_amcache, keying, sizeof(FbfWindowKeying));
		return;
	}
	memcpy(keying, index->rd_amcache, sizeof(FbfWindowKeying));
}

/*
 * The stream's id of an operation numbered in one, under `key`: the keyed
 * hash of 'S' followed by the bytes that name the stream (h1, never 0:
 * fbf_stream_id), so that a stream's id is as unpredictable as its
 * operations' hashes (no identity's bytes begin with 'S').
 */
static uint64
stream_id(const FbfHashKey *key, const void *bytes, size_t len)
{
	unsigned char local[256];
	unsigned char *buf = local;
	uint64		id;

	if (len + 1 > sizeof(local))
		buf = palloc(len + 1);
	buf[0] = 'S';
	memcpy(buf + 1, bytes, len);
	id = fbf_stream_id(fbf_hash_keyed(key, buf, len + 1).h1);
	if (buf != local)
		pfree(buf);
	return id;
}

/*
 * An operation as the window whose keying is `keying` is asked about it:
 * the one place where an identity is keyed and hashed.  Its bytes hashed
 * under the key, and as `keying` says under the public hash (or the fixed
 * key the window gave up) too, and the identity 1.0 gave it (id->keyless)
 * while a 1.0 window's operations may still be held.
 *
 * Numbered in a stream (id->stream_len), it also gets its stream
 * (stream_id) and seq.  Streams need the window's own key
 * (core/fbf_stream.h; window_stream.c): under the public hash the
 * operation has no stream, and the filter answers for it alone.  While the
 * window still asks the public hash it has one: FbfWindowApply records it
 * with its annex, so that its stream knows it once the public lookups end,
 * but does not ask the stream about it yet.
 */
void
FbfWindowHashOperation(const FbfWindowKeying *keying,
					   const FbfWindowIdentity *id, FbfWindowOp *op)
{
	op->hash = fbf_hash_keyed(&keying->key, id->bytes, id->len);
	op->has_public = keying->public_too;
	if (op->has_public)
		op->public_hash = fbf_hash_keyed(&keying->public_key, id->bytes,
										 id->len);
	op->has_keyless = keying->keyless_too && id->keyless != NULL;
	if (op->has_keyless)
		op->keyless = fbf_hash_bytes(id->keyless, id->keyless_len);
	op->has_stream = id->stream_len > 0 && fbf_hash_key_is_set(&keying->key);
	op->stream = op->has_stream ?
		stream_id(&keying->key, id->bytes, id->stream_len) : 0;
	op->seq = op->has_stream ? id->seq : 0;
}

/*
 * Is any entry recorded before `keyed_at` left on a chain?  Drains each
 * chain first (what has committed goes into the bits, what aborted goes).
 * The caller holds the metapage exclusively.
 */
static bool
public_entries_left(Relation index, const FbfWindowMetaPageData *meta)
{
	FullTransactionId keyed_at = FullTransactionIdFromU64(meta->keyed_at);
	bool		left = false;
	uint32		c;

	for (c = 0; c < meta->nchains && !left; c++)
	{
		FbfPendingChain chain;
		int			p;

		FbfChainLock(index, meta, c, &chain);
		(void) FbfChainDrain(index, meta, &chain, true, NULL);
		for (p = 0; p < chain.n && !left; p++)
		{
			int			n;
			FbfPendingEntry *entries =
				FbfWindowPageGetEntries(BufferGetPage(chain.bufs[p]), &n);
			int			i;

			for (i = 0; i < n && !left; i++)
				left = !FbfEntryIsAnnex(&entries[i]) &&
					FullTransactionIdPrecedes(FbfEntryFullXid(meta, &entries[i]),
											  keyed_at);
		}
		FbfChainRelease(&chain);
	}
	return left;
}

/*
 * Does the window still ask a hashing other than its key's: the public
 * hash (or the fixed key it gave up), or a 1.0 window's frozen filters?
 */
static bool
asks_other_hashing(const FbfWindowMetaPageData *meta, int64 now)
{
	return now < meta->public_until || now < meta->legacy.until;
}

/*
 * Take the window a step towards having a key of its own (see the file
 * header), at window time `now`: `key` (NULL: a random one) if it has
 * none, or, with fbf.fixed_window_keys off, a random one for the fixed key
 * once it asks no other hashing; an end to the public lookups once no
 * public entry is left on a chain.  Returns true if *meta changed; the
 * caller logs it.  The caller holds the metapage exclusively, on a window
 * of the current storage version.
 */
bool
FbfWindowKeyStep(Relation index, FbfWindowMetaPageData *meta, int64 now,
				 const FbfHashKey *key)
{
	bool		changed = false;

	/* the fixed key's lookups are over: the public hash is the core's */
	if ((meta->flags & FBF_META_FIXED_PUBLIC) != 0 &&
		now >= meta->public_until)
	{
		meta->flags &= ~FBF_META_FIXED_PUBLIC;
		changed = true;
	}
	if (!fbf_hash_key_is_set(&meta->key) ||
		(key == NULL && !fbf_fixed_window_keys &&
		 FbfWindowKeysEqual(&meta->key, &fixed_window_key) &&
		 !asks_other_hashing(meta, now)))
	{
		if (fbf_hash_key_is_set(&meta->key))
			meta->flags |= FBF_META_FIXED_PUBLIC;
		if (key != NULL)
			meta->key = *key;
		else
			FbfWindowNewKey(&meta->key);
		meta->keyed_at = U64FromFullTransactionId(ReadNextFullTransactionId());
		meta->public_until = FBF_PUBLIC_OPEN;
		changed = true;
	}
	if (meta->public_until == FBF_PUBLIC_OPEN &&
		!public_entries_left(index, meta))
	{
		meta->public_until = 0;
		FbfWindowKeepPublic(meta, now);
		changed = true;
	}
	return changed;
}

/*
 * Look identities up under the public hash too, for at least a retention
 * and two periods from `now`: the window has received (or may hold)
 * operations recorded under it.  An open end stays open.
 */
void
FbfWindowKeepPublic(FbfWindowMetaPageData *meta, int64 now)
{
	int64		until = now + meta->retention + 2 * meta->period;

	if (meta->public_until == FBF_PUBLIC_OPEN)
		return;
	if (meta->public_until == 0 || meta->public_until < until)
		meta->public_until = until;
	meta->public_until = Max(meta->public_until, meta->legacy.until);
}

/*
 * The key of a window that adopts a snapshot taken under `key` (zero: the
 * public hash) into *new: the snapshot's, or, of an unkeyed snapshot, its
 * own (a new one if it has none) with the public hash asked for as long
 * as the snapshot's operations may be held; likewise if the snapshot
 * holds operations recorded before its window had a key (public_too).
 * The adopting window is empty: nothing of its own is under another key.
 * `new` has the snapshot's period already.
 */
void
FbfWindowAdoptKey(FbfWindowMetaPageData *new, const FbfHashKey *key,
				  bool public_too, int64 now)
{
	if (fbf_hash_key_is_set(key))
		new->key = *key;
	else if (!fbf_hash_key_is_set(&new->key))
		FbfWindowNewKey(&new->key);
	new->keyed_at = 0;
	new->public_until = 0;
	new->flags &= ~FBF_META_FIXED_PUBLIC;
	if (!fbf_hash_key_is_set(key) || public_too)
		FbfWindowKeepPublic(new, now);
}

/*
 * Make the window ready to take the bits of a snapshot taken under `key`
 * (zero: the public hash) merged into its own, at window time `now`: a
 * window without a key takes the snapshot's (FbfWindowKeyStep), and the
 * public hash is asked for as long as public operations the snapshot
 * brings may be held.  Returns false, changing nothing, if both have keys
 * and they differ: their bits cannot be told apart once merged; likewise
 * for a snapshot under the public hash while the window still asks the
 * fixed key it gave up, not the public hash (a keyed snapshot's public
 * operations are then that window's own, under the fixed key).  *changed
 * says whether *meta changed; the caller logs it before merging.  The
 * caller holds the metapage exclusively.
 */
bool
FbfWindowMergeKey(Relation index, FbfWindowMetaPageData *meta,
				  const FbfHashKey *key, bool public_too, int64 now,
				  bool *changed)
{
	int64		before = meta->public_until;

	*changed = false;
	if (fbf_hash_key_is_set(key))
	{
		if (!fbf_hash_key_is_set(&meta->key))
			*changed = FbfWindowKeyStep(index, meta, now, key);
		else if (!FbfWindowKeysEqual(&meta->key, key))
			return false;
		if (!public_too)
			return true;
	}
	else if (!fbf_hash_key_is_set(&meta->key))
		return true;			/* both under the public hash */
	else if ((meta->flags & FBF_META_FIXED_PUBLIC) != 0 &&
			 now < meta->public_until)
		return false;
	if ((meta->flags & FBF_META_FIXED_PUBLIC) != 0 && now >= meta->public_until)
	{
		meta->flags &= ~FBF_META_FIXED_PUBLIC;
		*changed = true;
	}
	FbfWindowKeepPublic(meta, now);
	*changed |= meta->public_until != before;
	return true;
}
