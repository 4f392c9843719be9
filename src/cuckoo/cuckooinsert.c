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
 * Before any of these, the key's own rows are tried elsewhere (insert_here):
 * its posting list if its buckets point to one, a new list of the rows its
 * buckets hold, or slots freed by listing another key's duplicates
 * (cuckoopost.c).  So an insert never fails for lack of room and never
 * evicts anything, and a run of duplicates costs list slots, neither
 * doublings nor overflow pages that other keys' lookups would read.
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

	state = CuckooChangeStart(index, wal);
	page = CuckooChangePage(state, buf, 0);
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
	CuckooChangeFinish(index, state, &buf, 1);
	return true;
}

/*
 * Place (tid) in the exclusively locked bucket page "buf", the key's page:
 * in the key's list if its buckets hold a pointer to one; else in its
 * buckets; else, with the entries its buckets already hold, in a new list
 * (cuckoopost.c); else in slots freed by moving another key's duplicates to
 * a list.  False if none of these can take it: the page is full of single
 * entries of other keys.
 */
static bool
insert_here(Relation index, const CuckooLayout *layout, Buffer buf,
			const CuckooProbe *probe, ItemPointer tid, bool wal)
{
	if (CuckooListAppend(index, layout, buf, probe, tid, wal))
		return true;
	if (insert_into_bucket(index, layout, buf, probe, tid, wal))
		return true;
	if (CuckooListCreate(index, layout, buf, probe, tid, wal))
		return true;
	return insert_into_bucket(index, layout, buf, probe, tid, wal);
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
			state = CuckooChangeStart(index, wal);
			page = CuckooChangePage(state, buf, 0);
			opage = CuckooChangePage(state, obuf, 0);
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
			CuckooChangeFinish(index, state, bufs, 2);
			UnlockReleaseBuffer(obuf);
			return;
		}
		next = CuckooPageGetOpaque(opage)->overflow;
		UnlockReleaseBuffer(obuf);
	}

	/* every page of the chain is full: push a new one */
	bufs[0] = buf;
	bufs[1] = FbfNewBuffer(index);
	state = CuckooChangeStart(index, wal);
	page = CuckooChangePage(state, buf, 0);
	opage = CuckooChangePage(state, bufs[1], FBF_XLOG_FULL_IMAGE);
	CuckooSetShape(page, layout);
	CuckooInitSlotPage(opage, CUCKOO_OVERFLOW, layout);
	(void) cuckoo_block_append(layout, CuckooPageGetBlock(opage), tag,
							   (const uint8 *) tid);
	CuckooPageGetOpaque(opage)->nentries = 1;
	CuckooPageGetOpaque(opage)->overflow = CuckooPageGetOpaque(page)->overflow;
	CuckooPageGetOpaque(page)->overflow = BufferGetBlockNumber(bufs[1]);
	CuckooPageGetOpaque(page)->summary |= cuckoo_summary_bit(tag);
	CuckooChangeFinish(index, state, bufs, 2);
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
 * Run the next step of a doubling that has begun: split_next - 1.  Caller
 * holds the metapage buffer exclusively locked.
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
split_step(Relation index, Buffer metabuf, bool wal)
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

	Assert(meta->growing && meta->split_next > 0);
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

		state = CuckooChangeStart(index, wal);
		meta = CuckooPageGetMeta(CuckooChangePage(state, metabuf, 0));
		if (q > 0)
			CuckooPageGetOpaque(CuckooChangePage(state, oldbuf, 0))->flags |= CUCKOO_MOVED;
		lo = CuckooChangePage(state, bufs[nbufs - 2], FBF_XLOG_FULL_IMAGE);
		hi = CuckooChangePage(state, bufs[nbufs - 1], FBF_XLOG_FULL_IMAGE);
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
		CuckooChangeFinish(index, state, bufs, nbufs);
		for (int i = 1; i < nbufs; i++)
			UnlockReleaseBuffer(bufs[i]);
	}
}

/*
 * Begin doubling a table of "observed_npages" bucket pages, unless another
 * backend already did (or it cannot double): add the new extent, then mark
 * the metapage growing.  The steps are run by inserts (grow_step), one
 * each, so that nobody waits for a whole doubling.
 *
 * One backend begins a doubling at a time (a heavyweight lock on the
 * metapage's block, which nothing else takes); the extent is added
 * holding only that lock and the relation extension lock, so lookups and
 * inserts go on meanwhile (those that need a new page wait for the
 * extension), and the metapage is locked only to record the doubling.
 */
static void
begin_growth(Relation index, uint32 observed_npages, bool wal)
{
	CuckooMetaPageData m;
	CuckooLayout layout;
	Buffer		metabuf;
	CuckooMetaPage meta;
	FbfXLogState *state;
	BlockNumber first;
	uint32		n = observed_npages;

	LockPage(index, CUCKOO_METAPAGE_BLKNO, ExclusiveLock);
	CuckooReadMeta(index, &m, &layout);
	if (m.npages != n || !can_double(&m))
	{
		UnlockPage(index, CUCKOO_METAPAGE_BLKNO, ExclusiveLock);
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

		/*
		 * Linear in the table's size: let a cancel in.  The blocks added
		 * so far stay unused (new pages, which every reader skips); the
		 * next grower adds its extent after them.
		 */
		if (i % 64 == 63)
			CHECK_FOR_INTERRUPTS();
	}
	if (!RELATION_IS_LOCAL(index))
		UnlockRelationForExtension(index, ExclusiveLock);

	/* no other grower ran meanwhile: the metapage still says "n, idle" */
	metabuf = ReadBuffer(index, CUCKOO_METAPAGE_BLKNO);
	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	meta = CuckooCheckMetaPage(index, BufferGetPage(metabuf));
	Assert(meta->npages == n && !meta->growing);
	state = CuckooChangeStart(index, wal);
	meta = CuckooPageGetMeta(CuckooChangePage(state, metabuf, 0));
	meta->growing = 1;
	meta->split_next = n;
	meta->generation++;
	meta->stamping = meta->generation;
	meta->extents[meta->nextents].first_page = n;
	meta->extents[meta->nextents].first_block = first;
	meta->nextents++;
	CuckooChangeFinish(index, state, &metabuf, 1);
	CuckooCacheMeta(index, CuckooPageGetMeta(BufferGetPage(metabuf)));
	UnlockReleaseBuffer(metabuf);
	UnlockPage(index, CUCKOO_METAPAGE_BLKNO, ExclusiveLock);
}

/*
 * Run one step of the doubling under way, if there is one: the metapage
 * is locked exclusively for that step alone (a few page copies), so a
 * lookup or insert that needs the metapage waits for one step at most.
 * With "conditional", give up at once if the metapage is busy.
 */
static void
grow_step(Relation index, bool wal, bool conditional)
{
	Buffer		metabuf = ReadBuffer(index, CUCKOO_METAPAGE_BLKNO);

	if (conditional)
	{
		if (!ConditionalLockBuffer(metabuf))
		{
			ReleaseBuffer(metabuf);
			return;
		}
	}
	else
		LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	if (CuckooCheckMetaPage(index, BufferGetPage(metabuf))->growing)
		split_step(index, metabuf, wal);
	CuckooCacheMeta(index, CuckooPageGetMeta(BufferGetPage(metabuf)));
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
 * for our lock).  Everything else (a stale cache, a full page, an index
 * built by fbf 1.0) takes the metapage share lock and holds it throughout,
 * so no split step runs under it.
 *
 * While a doubling is under way, every insert runs one of its steps: the
 * slow path waits for the metapage to do so (once), the fast path only if
 * the metapage is free.  A doubling of n pages thus ends within about n
 * inserts, and nobody waits for more than one step.  An insert whose page
 * is full and not yet split meanwhile overflows (a doubling cannot begin
 * while one is under way).
 */
void
CuckooInsertHash(Relation index, uint64 hash, ItemPointer tid, bool wal)
{
	CuckooMetaCache cache = CuckooGetMetaCache(index, false);

	if (cache.meta.stamped)
	{
		CuckooProbe probe;
		Buffer		buf;
		bool		done;

		CuckooLocate(&cache.meta, &cache.layout, hash, &probe);
		buf = ReadBuffer(index, CuckooPageBlock(&cache.meta, probe.page));
		LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
		CuckooCheckPage(index, buf, CUCKOO_BUCKET);
		done = CuckooPageHolds(BufferGetPage(buf), probe.generation) &&
			insert_here(index, &cache.layout, buf, &probe, tid, wal);
		UnlockReleaseBuffer(buf);
		if (done)
		{
			if (cache.meta.growing)
				grow_step(index, wal, true);
			return;
		}
	}

	for (bool helped = false;;)
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
		if (meta->growing && !helped)
		{
			UnlockReleaseBuffer(metabuf);
			grow_step(index, wal, false);
			helped = true;
			CHECK_FOR_INTERRUPTS();
			continue;
		}
		CuckooMetaLayout(meta, &layout);
		CuckooLocate(meta, &layout, hash, &probe);
		npages = meta->npages;

		buf = ReadBuffer(index, CuckooPageBlock(meta, probe.page));
		LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
		CuckooCheckPage(index, buf, CUCKOO_BUCKET);

		if (!insert_here(index, &layout, buf, &probe, tid, wal))
		{
			opaque = CuckooPageGetOpaque(BufferGetPage(buf));
			if (opaque->nentries >= CUCKOO_DENSE_PAGE * cuckoo_nslots(&layout) &&
				can_double(meta))
			{
				double		load;

				/* no two bucket pages are ever locked at once */
				LockBuffer(buf, BUFFER_LOCK_UNLOCK);
				load = sample_load(index, meta, &layout, probe.page);
				if (load >= CuckooGrowLoad(index))
				{
					ReleaseBuffer(buf);
					UnlockReleaseBuffer(metabuf);
					begin_growth(index, npages, wal);
					helped = false;
					CHECK_FOR_INTERRUPTS();
					continue;
				}
				LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
				if (insert_here(index, &layout, buf, &probe, tid, wal))
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
