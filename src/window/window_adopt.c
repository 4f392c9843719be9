/*-------------------------------------------------------------------------
 *
 * window_adopt.c
 *	  What the loads of both formats share (window_bloom_snap.c,
 *	  window_cuckoo_snap.c): aligning a snapshot's filters in time with
 *	  the live window's, the emptiness test, and switching the window to
 *	  an adopted shape.  Loading a snapshot (an `fbf` value made of what
 *	  FbfWindowSnapshot returns) into a live window keeps a counter moved
 *	  by dump and restore, or from one table to another, dismissing the
 *	  operations it remembered.
 *
 * What a load promises: every operation the snapshot remembers is
 * dismissed until at least the time the window it came from could have
 * forgotten it, and nothing the live window remembers is forgotten
 * earlier than before.  Only bits are added and birth times are never
 * made earlier, so the second half holds by construction; the first is a
 * matter of aligning the snapshot's filters in time.
 *
 * Time.  The snapshot's filters carry wall-clock birth times; the window's
 * are in window time (window_clock.c), and are converted through "now"
 * on both clocks.  A filter of a ring is forgotten (FbfLoadExpires()) once the
 * younger neighbour of it was born a retention ago (the drop rule of
 * fbf_refresh_action and of shrinking), and not before the refreshes that
 * make it the oldest have come, one a period: the ring's schedule.
 * Snapshot filter s goes to the oldest live filter j that is forgotten no
 * earlier on both counts: j's younger neighbour was born no earlier than
 * s's (the retention, which is the counter's on both sides: a restored
 * counter has its original's options), and j's predicted time is no
 * earlier than s's.  The snapshot's future filter has no younger
 * neighbour: the time it stopped taking operations stands for one.  A
 * snapshot does not say when it was taken, so that time is bounded from
 * its births (FbfLoadDue): the original refreshed its ring before it
 * applied an operation once the future's period was over, unless its ring
 * was full and its oldest filter still needed; and never later than now.
 * Times are compared within FBF_LOAD_CLOCK_SLACK, the precision of the
 * conversion.  Snapshot filters whose time has passed are not loaded: the
 * original window could have forgotten them already; a snapshot all of
 * whose filters have is `expired` and loads nothing, adopted or merged.
 * The live future filter is forgotten last of all, so every filter has a
 * place.  The counter's retention stands for the original's: a restored
 * counter has its options.
 *
 * How a snapshot's filters are put into the window is its format's
 * (FbfFilterRoutine.load): a Bloom snapshot is merged or adopted
 * (window_bloom_snap.c), a cuckoo window's adopted (window_cuckoo_snap.c).
 * This file has what they share: the time alignment above (FbfLoadTimesOf,
 * FbfLoadDue), the emptiness test (FbfWindowIsEmpty), switching the
 * window to an adopted shape (FbfWindowAdopt).  FbfWindowLoad
 * (window_load.c) hands a snapshot to its format.
 *
 * Locks: the caller holds RowExclusiveLock on the counter table.  The
 * whole load holds the metapage exclusively (operations, drains and
 * splits wait for it; it is a rare, administrative operation), and takes
 * pending pages share, partition pages and then stream pages exclusive
 * one at a time, in the order of src/window/README.md.  Appending takes the relation's
 * extension lock, as a split does, so the new pages are a run.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/xlog.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "common/fbf_xlog.h"
#include "window/window_format.h"
#include "window/window_int.h"

/* the longest period a snapshot may claim: the longest retention, 2^31 ms */
#define LOAD_MAX_PERIOD		(INT64CONST(2147483647) * 1000)

/*
 * When a ring of nlive live filters born at born[] (logical order, window
 * time), refreshed every `period`, forgets filter i at the earliest: once
 * the younger neighbour of i was born `retention` ago (the drop rule), and
 * not before the refreshes that make i the oldest and recycle it have
 * come, one a period from the future's birth.  The future filter (i = 0)
 * has no younger neighbour: `last`, the latest time it takes an operation,
 * stands for one (now, for a live window).  A filter whose younger
 * neighbour was born "long ago" holds nothing to keep.
 */
int64
FbfLoadExpires(const int64 *born, int nlive, int64 period, int64 retention, int i,
		int64 last)
{
	int64		younger = i == 0 ? last : born[i - 1];

	if (younger == FBF_BORN_LONG_AGO)
		return PG_INT64_MIN;
	return Max(younger + retention, born[0] + (int64) (nlive - i) * period);
}

/*
 * Refuse a value that is not a window's snapshot: its live filters (or
 * epochs) must have birth times (fbf values made by fbf_create or fbf_agg
 * have none that mean anything) and its period a length a counter can
 * have.  born[] is by logical filter (age), wall clock.
 */
void
FbfLoadCheckTimes(Relation index, const int64 *born, int nlive, int64 period)
{
	int			i;

	if (period <= 0 || period > LOAD_MAX_PERIOD)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the fbf value cannot be loaded into counter \"%s\"",
						get_rel_name(index->rd_index->indrelid)),
				 errdetail("Its refresh period is %lld microseconds; a counter's snapshot has a period between 1 microsecond and 24 days.",
						   (long long) period),
				 errhint("Load values taken by fbf_snapshot().")));
	for (i = 0; i < nlive; i++)
	{
		if (born[i] == FBF_BORN_LONG_AGO && i > 0)
			continue;
		if (born[i] <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the fbf value cannot be loaded into counter \"%s\"",
							get_rel_name(index->rd_index->indrelid)),
					 errdetail("Its filter %d has no birth time; loading aligns a snapshot's filters on the times they were born.",
							   i),
					 errhint("Load values taken by fbf_snapshot().")));
	}
}

/*
 * A snapshot's birth times (wall clock, by logical filter) on the window's
 * clock: now less their age.  A birth in the future (the other machine's
 * clock is ahead) counts as now, and births never increase with age.
 */
void
FbfLoadTimesOf(const FbfWindowMetaPageData *meta, const int64 *wall_born,
			   int nlive, FbfLoadTimes *t)
{
	int			i;

	t->now = FbfWindowNow(meta);
	t->wall_now = GetCurrentTimestamp();
	for (i = 0; i < nlive; i++)
	{
		int64		wall = wall_born[i];
		int64		born;

		if (wall == FBF_BORN_LONG_AGO)
			born = FBF_BORN_LONG_AGO;
		else
			born = Min(t->now - (t->wall_now - wall), t->now);
		if (i > 0)
			born = Min(born, t->born[i - 1]);
		t->born[i] = born;
	}
}

/*
 * When the original window could forget each of the snapshot's nlive
 * filters (t->due, window time), for a ring of nfilters filters (nlive if
 * the snapshot does not say), refreshed every `period`, with the
 * counter's `retention`.  The snapshot does not carry the time it was
 * taken, so t->last, the latest time its future filter can have taken an
 * operation, is bounded from its births: an operation applies only after
 * the refresh that an overdue ring needs (needs_refresh, window_apply.c),
 * which is postponed only while every filter is live and the oldest may
 * not be dropped, i.e. until the filter younger than it is a retention old.
 * So no later than a period after the future's birth, or that; and not
 * later than now.  Returns the number of filters not due yet (0: the
 * snapshot has expired).
 */
int
FbfLoadDue(FbfLoadTimes *t, int nlive, int nfilters, int64 period,
		   int64 retention)
{
	int64		last = t->born[0] + period;
	int			live = 0;
	int			i;

	if (nlive >= nfilters && nlive >= 2 &&
		t->born[nlive - 2] != FBF_BORN_LONG_AGO)
		last = Max(last, t->born[nlive - 2] + retention);
	t->last = Min(last + FBF_LOAD_CLOCK_SLACK, t->now);
	for (i = 0; i < nlive; i++)
	{
		t->due[i] = FbfLoadExpires(t->born, nlive, period, retention, i, t->last);
		if (t->due[i] > t->now)
			live++;
	}
	return live;
}

/*
 * Does the window remember nothing: no bits in a live lane, no pending
 * entry (of any fate), no 1.0 filters still checked?  The caller holds
 * the metapage exclusively, so no operation can start meanwhile.
 */
bool
FbfWindowIsEmpty(Relation index, const FbfWindowMetaPageData *meta, int64 now)
{
	uint32		nview = FbfWindowViewParts(meta);
	uint64	   *counts;
	uint64		i;
	bool		empty = true;

	if (meta->legacy.until != 0 && meta->legacy.until > now)
		return false;
	if (FbfWindowPendingCount(index, meta) > 0)
		return false;
	counts = palloc(sizeof(uint64) * meta->nlive * nview);
	FbfWindowCounts(index, meta, counts, NULL, NULL);
	for (i = 0; i < (uint64) meta->nlive * nview; i++)
	{
		if (counts[i] > 0)
		{
			empty = false;
			break;
		}
	}
	pfree(counts);
	return empty;
}

/*
 * Switch the window to `new`, in pages of its own: what adopting a
 * snapshot of either kind ends with.  The caller has set the new shape
 * (nparts, base_nparts and the kind's own fields), the ring, epochs and
 * birth times in *new; this takes as many chains as before that divide the
 * partitions (all are empty), clears what the empty window had under way
 * (capped, 1.0 filters, a split, whose pages are abandoned), writes the
 * pages whole (`fill` makes each, appended as full-page images), leaves
 * the old pages as the free run for the next split, turns the ring once if
 * the snapshot's future is past its period (the file header; t: its times,
 * FbfLoadDue), resets the stream pages (FbfStreamsReset), logs the
 * metapage, and then installs the snapshot's `streams` (NULL: none) in
 * the stream pages if the window keeps them under the snapshot's key
 * (FbfLoadKeepsStreams, which the caller asked).  The caller holds metabuf
 * exclusively and has checked that the window is empty and may take the
 * shape.
 */
void
FbfWindowAdopt(Relation index, Buffer metabuf, FbfWindowMetaPageData *meta,
			   FbfWindowMetaPageData *new, FbfAdoptPageFn fill, void *arg,
			   const FbfLoadTimes *t, const unsigned char *streams)
{
	PGAlignedBlock image;
	BlockNumber next;
	BlockNumber start;
	uint32		p;

	new->nchains = Min(meta->nchains, new->nparts);
	while (new->nparts % new->nchains != 0)
		new->nchains--;
	new->flags &= ~FBF_META_CAPPED;
	new->legacy.until = 0;
	/* the chains are empty: nothing was pending at any filter's birth */
	memset(new->pending_at, 0, sizeof(new->pending_at));
	new->split_start = InvalidBlockNumber;
	new->split_next = 0;
	new->split_factor = 0;
	new->merge_factor = 0;

	/* the pages, written whole before the metapage names them */
	LockRelationForExtension(index, ExclusiveLock);
	next = RelationGetNumberOfBlocks(index);
	start = next;
	for (p = 0; p < new->nparts; p++)
	{
		fill(image.data, new, p, arg);
		FbfWindowAppendPage(index, MAIN_FORKNUM, &next, image.data);
		/* pages the metapage does not name yet: unused if this stops */
		FbfWindowCheckCancel(metabuf);
	}
	UnlockRelationForExtension(index, ExclusiveLock);

	/* the old pages are left for the next split, if more than it had */
	if (meta->nparts >= meta->free_len)
	{
		new->free_start = meta->part_start;
		new->free_len = meta->nparts;
	}
	new->part_start = start;

	/*
	 * The streams never recorded the snapshot's operations: they forget
	 * what they know, knowing streams only from now, before the metapage
	 * makes those operations visible (a crash in between leaves the old
	 * window, with streams that merely know less).
	 */
	FbfStreamsReset(index, metabuf, meta, t->now);

	/*
	 * The pages hold the snapshot's ring as it was: turning it here is a
	 * refresh (the recycled lane goes stale with the epoch), with the new
	 * future born when the snapshot's stopped taking operations.
	 */
	if (new->nlive >= 2 && t->now - new->born_at[0] >= new->period)
		(void) FbfWindowRotate(new, t->now, Max(t->last, new->born_at[0]), 0);
	FbfWindowLogMeta(index, metabuf, new, t->now);
	*meta = *new;

	/*
	 * The window now remembers the snapshot's operations and nothing else,
	 * and no operation can reach it before the metapage's lock is let go:
	 * its streams become the snapshot's (adopted, re-placed by id into a
	 * run of another size).  A crash or a cancel before a page is reached
	 * leaves that page reset, which merely knows less.
	 */
	if (streams != NULL)
		FbfStreamsInstall(index, metabuf, meta, streams, true,
						  t->now - t->wall_now, t->now);
}

/*
 * Can a load into the window `meta` (after the load took its key) keep the
 * streams of a snapshot taken under `key` (public_too: it also holds
 * operations recorded under the public hash)?  Only if the window keeps
 * streams and hashes them under that very key with no public lookups:
 * streams are ids keyed by the window's key (window_key.c), and a snapshot
 * taken while public lookups were open carries none.
 */
bool
FbfLoadKeepsStreams(const FbfWindowMetaPageData *meta, const FbfHashKey *key,
					bool public_too)
{
	FbfWindowKeying keying;

	if (meta->stream_pages == 0 || public_too || !fbf_hash_key_is_set(key))
		return false;
	FbfWindowKeyingOf(meta, FbfWindowNow(meta), &keying);
	return !keying.public_too && FbfWindowKeysEqual(&keying.key, key);
}
