/*-------------------------------------------------------------------------
 *
 * window_load.c
 *	  Loading a snapshot into a live window (fbf_counter_load): a window
 *	  of storage version 1 upgraded first, then the snapshot handed to the
 *	  format whose value it is (FbfFilterRoutine.load: window_bloom_snap.c,
 *	  window_cuckoo_snap.c), which merges or adopts it, or refuses it.
 *	  What the formats' loads share is window_adopt.c's, below the
 *	  formats, as this file is above them (it refreshes; src/layers.txt):
 *	  one file could not be both.  The stream pages take the streams the
 *	  snapshot carries (core/fbf_stream_snap.h), adopted or merged, or,
 *	  for a snapshot that carries none (taken before snapshots carried
 *	  streams), are reset, where the snapshot's operations become
 *	  visible, under the same metapage lock (FbfWindowAdopt, and a Bloom
 *	  snapshot's merge).
 *
 * Locks: the caller holds RowExclusiveLock on the counter table; the
 * format's load holds the metapage exclusively for the whole load
 * (src/window/README.md, "Lock definitions").
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/bufmgr.h"

#include "type/fbf_value.h"
#include "window/window_format.h"
#include "window/window_int.h"

/*
 * Load `snapshot`, an `fbf` value as fbf_snapshot returns it (checked
 * whole by the caller, its streams included), taken under `key` (zero: the public hash;
 * public_too: it also holds operations recorded under that), into the
 * window of `index`: handed to the format whose snapshot it is
 * (FbfFilterRoutine.load), which adopts or merges it, or refuses it (a
 * window of another format, another shape).  The caller holds
 * RowExclusiveLock on the counter table and has checked that the user
 * owns it.
 */
FbfLoadResult
FbfWindowLoad(Relation index, const struct varlena *snapshot,
			  const FbfHashKey *key, bool public_too)
{
	FbfWindowMetaPageData meta;
	const unsigned char *streams;
	size_t		nstreams;
	int			f;

	/* a 1.0 window is upgraded first, by its first refresh */
	FbfWindowReadMeta(index, &meta);
	if (meta.version != FBF_STORAGE_VERSION)
		FbfWindowRefresh(index, true);

	/* the value's streams, if it carries them (type/fbf_value.h) */
	if (!FbfValueGetStreams(snapshot, &streams, &nstreams))
		streams = NULL;

	for (f = 0; f < FBF_FILTER_COUNT; f++)
	{
		const FbfFilterRoutine *routine = FbfFilterRoutineFor(f);
		const void *body = routine->snapshot_of(snapshot);

		if (body != NULL)
			return routine->load(index, body, key, public_too, streams);
	}
	elog(ERROR, "fbf: a snapshot of no known filter format");
	pg_unreachable();
}
