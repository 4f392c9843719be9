/*-------------------------------------------------------------------------
 *
 * cuckooinsert.c
 *	  Inserting into a cuckoo index: cuckoo insertion into the key's
 *	  bucket page, overflow chains, and doubling of the table.
 *
 * The decision when a key's page has no room (see cuckoo.h for the
 * layout and the locking protocol):
 *
 *	  page not dense                 the key's own buckets are jammed (many
 *	                                 rows with one key): overflow chain;
 *	  page dense, table dense        double the table, then try again;
 *	  page dense, table sparse       an unlucky page: overflow chain;
 *	  table cannot double            overflow chain.
 *
 * So an insert never fails for lack of room and never evicts anything,
 * and a run of duplicates costs overflow pages, not doublings: a doubling
 * needs most sampled pages to be dense, which duplicates of one key cannot
 * make them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/fbf_xlog.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/rel.h"

#include "cuckoo.h"

/*
 * Page changes go through fbf's WAL (common/fbf_xlog.h) when "wal"; an index build writes
 * without WAL and logs every page once at the end.
 */
static inline FbfXLogState *
change_start(Relation index, bool wal)
{
	return wal ? FbfXLogStart(index) : NULL;
}

static inline Page
change_page(FbfXLogState *state, Buffer buf, int flags)
{
	return state ? FbfXLogRegisterBuffer(state, buf, flags) : BufferGetPage(buf);
}

static inline void
change_finish(Relation index, FbfXLogState *state, Buffer *bufs, int nbufs)
{
	if (state)
		FbfXLogFinish(state);
	else
		for (int i = 0; i < nbufs; i++)
			MarkBufferDirty(bufs[i]);
	for (int i = 0; i < nbufs; i++)
		CuckooPageChanged(index, bufs[i]);
}

/*
 * Cuckoo-insert (tag, tid) into the exclusively locked bucket page "buf".
 * False if the key's buckets have no room even after kicks; the page is
 * then untouched.
 */
static bool
insert_into_bucket(Relation index, const CuckooLayout *layout, Buffer buf,
				   const CuckooProbe *probe, ItemPointer tid, bool wal)
{
	FbfXLogState *state;
	Page		page;
	int			kicks;

	/* a full page cannot take it, and needs no WAL to say so */
	if (CuckooPageGetOpaque(BufferGetPage(buf))->nentries >= cuckoo_nslots(layout))
		return false;

	state = change_start(index, wal);
	page = change_page(state, buf, 0);
	CuckooSetShape(page, layout);
	kicks = cuckoo_block_insert(layout, CuckooPageGetBlock(page), probe->tag,
								probe->first, (const uint8 *) tid);
	if (kicks < 0)
	{
		if (state)
			FbfXLogAbort(state);
		return false;
	}
	CuckooPageGetOpaque(page)->nentries++;
	CuckooPageGetOpaque(page)->nkicks += (uint32) kicks;
	change_finish(index, state, &buf, 1);
	return true;
}

/*
 * Append (tag, tid) to the overflow chain of the exclusively locked bucket
 * page "buf", adding a page at the head of the chain if every page is full.
 */
static void
insert_into_overflow(Relation index, const CuckooLayout *layout, Buffer buf,
					 uint32 tag, ItemPointer tid, bool wal)
{
	BlockNumber next = CuckooPageGetOpaque(BufferGetPage(buf))->overflow;
	FbfXLogState *state;
	Buffer		bufs[2];
	Page		page;
	Page		opage;

	while (BlockNumberIsValid(next))
	{
		Buffer		obuf = ReadBuffer(index, next);

		LockBuffer(obuf, BUFFER_LOCK_EXCLUSIVE);
		CuckooCheckPage(index, obuf, CUCKOO_OVERFLOW);
		opage = BufferGetPage(obuf);
		if (CuckooPageGetOpaque(opage)->nentries < cuckoo_nslots(layout))
		{
			state = change_start(index, wal);
			page = change_page(state, buf, 0);
			opage = change_page(state, obuf, 0);
			CuckooSetShape(page, layout);
			CuckooSetShape(opage, layout);
			if (cuckoo_block_append(layout, CuckooPageGetBlock(opage), tag,
									(const uint8 *) tid) < 0)
				elog(ERROR, "overflow page %u of index \"%s\" has a wrong entry count",
					 next, RelationGetRelationName(index));
			CuckooPageGetOpaque(opage)->nentries++;
			CuckooPageGetOpaque(page)->summary |= cuckoo_summary_bit(tag);
			bufs[0] = buf;
			bufs[1] = obuf;
			change_finish(index, state, bufs, 2);
			UnlockReleaseBuffer(obuf);
			return;
		}
		next = CuckooPageGetOpaque(opage)->overflow;
		UnlockReleaseBuffer(obuf);
	}

	/* every page of the chain is full: push a new one */
	bufs[0] = buf;
	bufs[1] = FbfNewBuffer(index);
	state = change_start(index, wal);
	page = change_page(state, buf, 0);
	opage = change_page(state, bufs[1], FBF_XLOG_FULL_IMAGE);
	CuckooSetShape(page, layout);
	CuckooInitSlotPage(opage, CUCKOO_OVERFLOW, layout);
	(void) cuckoo_block_append(layout, CuckooPageGetBlock(opage), tag,
							   (const uint8 *) tid);
	CuckooPageGetOpaque(opage)->nentries = 1;
	CuckooPageGetOpaque(opage)->overflow = CuckooPageGetOpaque(page)->overflow;
	CuckooPageGetOpaque(page)->overflow = BufferGetBlockNumber(bufs[1]);
	CuckooPageGetOpaque(page)->summary |= cuckoo_summary_bit(tag);
	change_finish(index, state, bufs, 2);
	UnlockReleaseBuffer(bufs[1]);
}

/* Can the table double once more? */
static bool
can_double(const CuckooMetaPageData *meta)
{
	return !meta->growing &&
		meta->nextents < CUCKOO_MAX_EXTENTS &&
		(uint64) meta->npages * 2 < (uint64) MaxBlockNumber / 2;
}

/*
 * Average load of up to CUCKOO_LOAD_SAMPLE bucket pages spread over the
 * table, besides "skip".  Caller holds the metapage share lock and no
 * bucket page lock.
 */
static double
sample_load(Relation index, const CuckooMetaPageData *meta,
			const CuckooLayout *layout, uint32 skip)
{
	uint32		nsample = Min(meta->npages, CUCKOO_LOAD_SAMPLE);
	uint64		used = 0;
	uint32		counted = 0;

	for (uint32 i = 0; i < nsample; i++)
	{
		uint32		q = (uint32) (((uint64) i * meta->npages + meta->npages / 2) / nsample);
		Buffer		buf;

		if (q == skip && meta->npages > 1)
			continue;
		buf = ReadBuffer(index, CuckooPageBlock(meta, q));
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		CuckooCheckPage(index, buf, CUCKOO_BUCKET);
		used += CuckooPageGetOpaque(BufferGetPage(buf))->nentries;
		counted++;
		UnlockReleaseBuffer(buf);
	}
	if (counted == 0)
		return 1.0;
	return (double) used / ((double) counted * cuckoo_nslots(layout));
}

/*
 * Run the steps of a doubling that has begun, from split_next down to
 * page 0.  Caller holds the metapage buffer exclusively locked.
 *
 * Step q moves old page q's entries to pages 2q and 2q + 1, each to the
 * slot it had, and records split_next = q in the same WAL record.  Pages
 * 2q and 2q + 1 are either new or old pages already moved by an earlier
 * step (2q > q), so nothing not yet moved is ever overwritten.  The new
 * pages are stamped with the doubling's generation; old page q (q > 0:
 * page 0's block is the new page 0) is marked moved in the same record, so
 * a backend addressing it with a stale cached metapage sees that its keys
 * are gone (CuckooPageHolds) until step q / 2 reuses its block.  So a step
 * locks old page q exclusively, then 2q, then 2q + 1: four pages in one
 * record, the most fbf's WAL takes.
 */
static void
grow_steps(Relation index, Buffer metabuf, bool wal)
{
	CuckooMetaPage meta = CuckooCheckMetaPage(index, BufferGetPage(metabuf));
	CuckooLayout layout;
	uint32		n = meta->npages;
	uint32		generation = meta->generation;
	BlockNumber end;
	PGAlignedBlock old;

	CuckooMetaLayout(meta, &layout);

	/* after a crash, the new extent may be shorter on disk than planned */
	end = meta->extents[meta->nextents - 1].first_block + n;
	while (RelationGetNumberOfBlocks(index) < end)
		UnlockReleaseBuffer(FbfNewBuffer(index));

	while (meta->split_next > 0)
	{
		uint32		q = meta->split_next - 1;
		Buffer		oldbuf;
		Buffer		bufs[4];
		int			nbufs = 0;
		Page		lo;
		Page		hi;
		FbfXLogState *state;
		const uint8 *oblock = CuckooPageGetBlock((Page) old.data);
		CuckooPageOpaque oopaque;

		/*
		 * Old page q stays locked from the copy to the record: an insert
		 * that addressed it without the metapage (CuckooInsertHash) must
		 * either come before the copy or find the page moved.
		 */
		oldbuf = ReadBuffer(index, CuckooPageBlock(meta, q));
		LockBuffer(oldbuf, BUFFER_LOCK_EXCLUSIVE);
		CuckooCheckPage(index, oldbuf, CUCKOO_BUCKET);
		memcpy(old.data, BufferGetPage(oldbuf), BLCKSZ);
		oopaque = CuckooPageGetOpaque((Page) old.data);

		bufs[nbufs++] = metabuf;
		if (q > 0)
		{
			bufs[nbufs++] = oldbuf;
			bufs[nbufs++] = ReadBuffer(index, CuckooPageBlock(meta, 2 * q));
			LockBuffer(bufs[nbufs - 1], BUFFER_LOCK_EXCLUSIVE);
		}
		else
			bufs[nbufs++] = oldbuf; /* page 0's block is new page 0 */
		bufs[nbufs++] = ReadBuffer(index, CuckooPageBlock(meta, 2 * q + 1));
		LockBuffer(bufs[nbufs - 1], BUFFER_LOCK_EXCLUSIVE);

		state = change_start(index, wal);
		meta = CuckooPageGetMeta(change_page(state, metabuf, 0));
		if (q > 0)
			CuckooPageGetOpaque(change_page(state, oldbuf, 0))->flags |= CUCKOO_MOVED;
		lo = change_page(state, bufs[nbufs - 2], FBF_XLOG_FULL_IMAGE);
		hi = change_page(state, bufs[nbufs - 1], FBF_XLOG_FULL_IMAGE);
		CuckooInitSlotPage(lo, CUCKOO_BUCKET, &layout);
		CuckooInitSlotPage(hi, CUCKOO_BUCKET, &layout);
		CuckooStampPage(lo, generation);
		CuckooStampPage(hi, generation);
		CuckooPageGetOpaque(lo)->overflow = oopaque->overflow;
		CuckooPageGetOpaque(hi)->overflow = oopaque->overflow;
		CuckooPageGetOpaque(lo)->summary = oopaque->summary;
		CuckooPageGetOpaque(hi)->summary = oopaque->summary;
		CuckooPageGetOpaque(lo)->nkicks = oopaque->nkicks;

		for (uint32 s = 0; s < cuckoo_nslots(&layout); s++)
		{
			uint32		tag;
			int			half;

			if (!cuckoo_slot_used(&layout, oblock, s))
				continue;
			half = cuckoo_tag_split(cuckoo_slot_tag(&layout, oblock, s), &tag);
			/* an entry with no rest bits left belongs to both halves */
			for (int h = 0; h < 2; h++)
			{
				Page		target = (h == 0) ? lo : hi;

				if (half >= 0 && half != h)
					continue;
				cuckoo_slot_put(&layout, CuckooPageGetBlock(target), s, tag,
								cuckoo_slot_tid(&layout, oblock, s));
				if (cuckoo_slot_killed(&layout, oblock, s))
					cuckoo_slot_set_killed(&layout, CuckooPageGetBlock(target), s);
				CuckooPageGetOpaque(target)->nentries++;
			}
		}

		meta->split_next = q;
		if (q == 0)
		{
			meta->npages = 2 * n;
			meta->growing = 0;
			/* every live page is now stamped if this doubling stamped all */
			if (meta->stamping == meta->generation)
				meta->stamped = 1;
		}
		change_finish(index, state, bufs, nbufs);
		for (int i = 1; i < nbufs; i++)
			UnlockReleaseBuffer(bufs[i]);

		/* "meta" pointed into the WAL record's page copy, freed by now */
		meta = CuckooPageGetMeta(BufferGetPage(metabuf));
	}
}

/*
 * Double a table of "observed_npages" bucket pages, unless another backend
 * already did (or it cannot double).  Takes the metapage exclusively for
 * the whole doubling.
 */
static void
grow(Relation index, uint32 observed_npages, bool wal)
{
	Buffer		metabuf = ReadBuffer(index, CUCKOO_METAPAGE_BLKNO);
	CuckooMetaPage meta;

	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	meta = CuckooCheckMetaPage(index, BufferGetPage(metabuf));
	if (!meta->growing)
	{
		uint32		n = meta->npages;
		BlockNumber first;
		FbfXLogState *state;

		if (n != observed_npages || !can_double(meta))
		{
			UnlockReleaseBuffer(metabuf);
			return;
		}

		/* the new extent: n blocks at the end, in one piece */
		if (!RELATION_IS_LOCAL(index))
			LockRelationForExtension(index, ExclusiveLock);
		first = RelationGetNumberOfBlocks(index);
		for (uint32 i = 0; i < n; i++)
		{
			Buffer		buf = FbfReadNewBuffer(index);

			Assert(BufferGetBlockNumber(buf) == first + i);
			ReleaseBuffer(buf);
		}
		if (!RELATION_IS_LOCAL(index))
			UnlockRelationForExtension(index, ExclusiveLock);

		state = change_start(index, wal);
		meta = CuckooPageGetMeta(change_page(state, metabuf, 0));
		meta->growing = 1;
		meta->split_next = n;
		meta->generation++;
		meta->stamping = meta->generation;
		meta->extents[meta->nextents].first_page = n;
		meta->extents[meta->nextents].first_block = first;
		meta->nextents++;
		change_finish(index, state, &metabuf, 1);
	}
	grow_steps(index, metabuf, wal);
	UnlockReleaseBuffer(metabuf);
}

/*
 * Finish a doubling left half done (by a crash, or an error in the
 * middle).  Anyone who finds the metapage growing calls this.
 */
static void
finish_growth(Relation index, bool wal)
{
	Buffer		metabuf = ReadBuffer(index, CUCKOO_METAPAGE_BLKNO);

	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	if (CuckooCheckMetaPage(index, BufferGetPage(metabuf))->growing)
		grow_steps(index, metabuf, wal);
	UnlockReleaseBuffer(metabuf);
}

/*
 * Insert the entry (hash, tid).
 *
 * First without the metapage: address the page with the backend's cached
 * metapage and, if the page (locked exclusively) still holds the keys of
 * that addressing, insert there if the key's buckets have room.  That is
 * safe even while a doubling runs: a page that holds its keys has not been
 * split yet, and its split step will copy it with the new entry (it waits
 * for our lock).  Everything else (a stale cache, a full page, a doubling
 * left growing, an index built by fbf 1.0) takes the metapage share lock
 * and holds it throughout, so no doubling runs under it.
 */
void
CuckooInsertHash(Relation index, uint64 hash, ItemPointer tid, bool wal)
{
	CuckooMetaCache cache = CuckooGetMetaCache(index, false);

	if (cache.meta.stamped && !cache.meta.growing)
	{
		CuckooProbe probe;
		Buffer		buf;
		bool		done;

		CuckooLocate(&cache.meta, &cache.layout, hash, &probe);
		buf = ReadBuffer(index, CuckooPageBlock(&cache.meta, probe.page));
		LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
		CuckooCheckPage(index, buf, CUCKOO_BUCKET);
		done = CuckooPageHolds(BufferGetPage(buf), probe.generation) &&
			insert_into_bucket(index, &cache.layout, buf, &probe, tid, wal);
		UnlockReleaseBuffer(buf);
		if (done)
			return;
	}

	for (;;)
	{
		Buffer		metabuf = ReadBuffer(index, CUCKOO_METAPAGE_BLKNO);
		CuckooMetaPage meta;
		CuckooLayout layout;
		CuckooProbe probe;
		uint32		npages;
		Buffer		buf;
		CuckooPageOpaque opaque;

		LockBuffer(metabuf, BUFFER_LOCK_SHARE);
		meta = CuckooCheckMetaPage(index, BufferGetPage(metabuf));
		CuckooCacheMeta(index, meta);
		if (meta->growing)
		{
			UnlockReleaseBuffer(metabuf);
			finish_growth(index, wal);
			continue;
		}
		CuckooMetaLayout(meta, &layout);
		CuckooLocate(meta, &layout, hash, &probe);
		npages = meta->npages;

		buf = ReadBuffer(index, CuckooPageBlock(meta, probe.page));
		LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
		CuckooCheckPage(index, buf, CUCKOO_BUCKET);

		if (!insert_into_bucket(index, &layout, buf, &probe, tid, wal))
		{
			opaque = CuckooPageGetOpaque(BufferGetPage(buf));
			if (opaque->nentries >= CUCKOO_DENSE_PAGE * cuckoo_nslots(&layout) &&
				can_double(meta))
			{
				double		load;

				/* no two bucket pages are ever locked at once */
				LockBuffer(buf, BUFFER_LOCK_UNLOCK);
				load = sample_load(index, meta, &layout, probe.page);
				if (load >= CUCKOO_GROW_LOAD)
				{
					ReleaseBuffer(buf);
					UnlockReleaseBuffer(metabuf);
					grow(index, npages, wal);
					CHECK_FOR_INTERRUPTS();
					continue;
				}
				LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
				if (insert_into_bucket(index, &layout, buf, &probe, tid, wal))
					goto done;
			}
			insert_into_overflow(index, &layout, buf, probe.tag, tid, wal);
		}
done:
		UnlockReleaseBuffer(buf);
		UnlockReleaseBuffer(metabuf);
		return;
	}
}

/*
 * aminsert: NULL keys are not indexed (the opclasses are for "=", which is
 * never true of NULL).
 */
bool
cuckooinsert(Relation index, Datum *values, bool *isnull,
			 ItemPointer ht_ctid, Relation heapRel,
			 IndexUniqueCheck checkUnique, bool indexUnchanged,
			 struct IndexInfo *indexInfo)
{
	uint64		hash;

	if (isnull[0])
		return false;
	hash = CuckooHashDatum(index, InvalidOid, index->rd_indcollation[0],
						   values[0]);
	CuckooInsertHash(index, hash, ht_ctid, true);
	return false;
}
