/*-------------------------------------------------------------------------
 *
 * window_legacy_meta.c
 *	  Reading a metapage of storage version 1 (fbf 1.0's layout) into the
 *	  current struct (FbfWindowMetaFromV1), pure layout code: the bottom
 *	  layer, since the metapage lock (window_page.c) reads a window not
 *	  yet upgraded with it.  Upgrading such a window and checking its
 *	  frozen filters is window_legacy.c's.
 *
 * Nothing here reads or locks a page: callers pass the page they hold
 * (src/window/README.md, "Lock definitions").
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "window/window_page.h"

StaticAssertDecl(sizeof(FbfWindowMetaV1Data) <= sizeof(FbfWindowMetaPageData),
				 "a version 1 metapage is read into the version 2 copy's space");

/*
 * Read a version 1 metapage into *meta: the ring, times and settings as
 * they are, no partition pages, its pending chains, and its filters as
 * legacy filters checked for as long as they are there.
 */
void
FbfWindowMetaFromV1(Page metapage, FbfWindowMetaPageData *meta)
{
	FbfWindowMetaV1Data v1;
	int			i;

	memcpy(&v1, PageGetContents(metapage), sizeof(v1));
	if (v1.nlive < 2 || v1.nlive > v1.nfilters || v1.nfilters > FBF_MAX_FILTERS ||
		v1.nparts < 1 || v1.nbits < FBF_MIN_NBITS || v1.nbits > FBF_BLOCK_MAX_BITS ||
		v1.nhashes < 1 || v1.nhashes > FBF_MAX_HASHES)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("invalid fbf metapage of storage version 1")));

	memset(meta, 0, sizeof(*meta));
	meta->magic = v1.magic;
	meta->version = 1;
	meta->nhashes = v1.nhashes;
	meta->nfilters = v1.nfilters;
	meta->nlive = v1.nlive;
	meta->flags = v1.flags;
	meta->shards = v1.shards;
	meta->epoch = v1.epoch;
	meta->period = v1.period;
	meta->base_period = v1.base_period;
	meta->retention = v1.retention;
	meta->target_fpp = v1.target_fpp;
	meta->created_at = v1.created_at;
	meta->resizes = v1.resizes;
	memcpy(meta->ring, v1.ring, sizeof(meta->ring));
	memcpy(meta->born_at, v1.born_at, sizeof(meta->born_at));
	meta->features = v1.features;
	meta->nchains = v1.nparts;
	meta->clock_at = v1.clock_at;
	meta->clock_boottime = v1.clock_boottime;
	meta->clock_wall = v1.clock_wall;
	memcpy(meta->clock_boot, v1.clock_boot, sizeof(meta->clock_boot));
	meta->capped_warned_at = v1.capped_warned_at;
	meta->part_start = InvalidBlockNumber;
	meta->split_start = InvalidBlockNumber;

	meta->legacy.until = PG_INT64_MAX;
	meta->legacy.epoch = v1.epoch;
	meta->legacy.nbits = v1.nbits;
	meta->legacy.nparts = v1.nparts;
	meta->legacy.nhashes = v1.nhashes;
	meta->legacy.nlive = v1.nlive;
	meta->legacy.keyless = (v1.features & FBF_FEATURE_KEYED_IDS) == 0 ||
		v1.legacy_until != 0;
	for (i = 0; i < FBF_MAX_FILTERS; i++)
	{
		meta->legacy.ring[i] = v1.ring[i];
		meta->legacy.slot_start[i] = v1.slot_start[i];
	}
}
