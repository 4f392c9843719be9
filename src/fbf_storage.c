/*-------------------------------------------------------------------------
 *
 * fbf_storage.c
 *	  A counter table's Forgetful Bloom Filter in the pages of its
 *	  `fbf_filter` index: initialisation, the per-operation check, draining
 *	  committed operations into the bits, refresh, AIMD resizing and
 *	  snapshots.
 *
 * The layout, the pending-page scheme and the locking protocol are
 * described in fbf_storage.h.  Every page change is WAL-logged with generic
 * WAL (at most three pages per record: a pending page and two filter
 * blocks), or with log_newpage for pages written whole.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/generic_xlog.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/xloginsert.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/procarray.h"
#include "storage/smgr.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "bloom.h"
#include "fbf_aimd.h"
#include "fbf_core.h"
#include "fbf.h"
#include "fbf_shmem.h"
#include "fbf_storage.h"

/* ----------------------------------------------------------------------
 * Pages
 * ----------------------------------------------------------------------
 */

static void
init_page(Page page, uint16 page_id)
{
	PageInit(page, BLCKSZ, sizeof(FbfPageOpaqueData));
	FbfPageGetOpaque(page)->page_id = page_id;
}

static FbfMetaPage
page_meta(Page page)
{
	return (FbfMetaPage) PageGetContents(page);
}

static void
set_meta(Page page, const FbfMetaPageData *meta)
{
	memcpy(PageGetContents(page), meta, sizeof(FbfMetaPageData));
	((PageHeader) page)->pd_lower =
		(char *) PageGetContents(page) + sizeof(FbfMetaPageData) - (char *) page;
}

static uint64 *
page_words(Page page)
{
	return (uint64 *) PageGetContents(page);
}

/* a filter block: empty bits, stamped with its filter's birth epoch */
static void
init_filter_page(Page page, uint32 nbits, int64 stamp)
{
	init_page(page, FBF_PAGE_ID_FILTER);
	FbfPageGetOpaque(page)->stamp = stamp;
	((PageHeader) page)->pd_lower =
		(char *) page_words(page) + fbf_nwords(nbits) * 8 - (char *) page;
}

static FbfPendingEntry *
pending_entries(Page page, int *n)
{
	char	   *start = PageGetContents(page);

	*n = (int) ((((PageHeader) page)->pd_lower - (start - (char *) page)) /
				sizeof(FbfPendingEntry));
	return (FbfPendingEntry *) start;
}

static void
set_pending_count(Page page, int n)
{
	((PageHeader) page)->pd_lower =
		PageGetContents(page) + n * sizeof(FbfPendingEntry) - (char *) page;
}

/* sanity checks on a page read from the filter relation */
static void
check_page(Relation index, Buffer buf, uint16 page_id)
{
	Page		page = BufferGetPage(buf);

	if (PageIsNew(page) || PageGetSpecialSize(page) != MAXALIGN(sizeof(FbfPageOpaqueData)) ||
		FbfPageGetOpaque(page)->page_id != page_id)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" contains an unexpected page at block %u",
						RelationGetRelationName(index), BufferGetBlockNumber(buf)),
				 errhint("Recreate the counter table's filter with REINDEX.")));
}

static Buffer
read_page(Relation index, BlockNumber blkno, int mode, uint16 page_id)
{
	Buffer		buf = ReadBuffer(index, blkno);

	LockBuffer(buf, mode);
	check_page(index, buf, page_id);
	return buf;
}

/* Copy the metapage, validating it; the caller holds a lock on metabuf. */
static void
copy_meta(Relation index, Buffer metabuf, FbfMetaPageData *meta)
{
	memcpy(meta, page_meta(BufferGetPage(metabuf)), sizeof(FbfMetaPageData));
	if (meta->magic != FBF_META_MAGIC || meta->version != FBF_STORAGE_VERSION ||
		meta->nlive < 2 || meta->nlive > meta->nfilters ||
		meta->nfilters > FBF_MAX_FILTERS || meta->nparts < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" has an invalid fbf metapage",
						RelationGetRelationName(index))));
}

void
FbfReadMeta(Relation index, FbfMetaPageData *meta)
{
	Buffer		metabuf = read_page(index, FBF_METAPAGE_BLKNO, BUFFER_LOCK_SHARE,
									FBF_PAGE_ID_META);

	copy_meta(index, metabuf, meta);
	UnlockReleaseBuffer(metabuf);
}

/* birth epoch that logical filter i's blocks must carry to be current */
static int64
expected_stamp(const FbfMetaPageData *meta, int logical)
{
	return meta->epoch - logical;
}

/* a new page at the end of the main fork, pinned, not locked */
static Buffer
extend_by_one(Relation index)
{
	bool		needLock = !RELATION_IS_LOCAL(index);
	Buffer		buf;

	if (needLock)
		LockRelationForExtension(index, ExclusiveLock);
	buf = ReadBufferExtended(index, MAIN_FORKNUM, P_NEW, RBM_NORMAL, NULL);
	if (needLock)
		UnlockRelationForExtension(index, ExclusiveLock);
	return buf;
}

/*
 * Append a whole new page to `fork` of the relation and WAL-log it as a
 * full image.  *next is the block number it must get (the fork's current
 * size); it is advanced.
 */
static void
append_page(Relation index, ForkNumber fork, BlockNumber *next, Page image)
{
	if (fork == MAIN_FORKNUM)
	{
		Buffer		buf = extend_by_one(index);

		if (BufferGetBlockNumber(buf) != *next)
			elog(ERROR, "fbf: extended \"%s\" to block %u, expected %u",
				 RelationGetRelationName(index), BufferGetBlockNumber(buf), *next);
		LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
		START_CRIT_SECTION();
		memcpy(BufferGetPage(buf), image, BLCKSZ);
		MarkBufferDirty(buf);
		if (RelationNeedsWAL(index))
			log_newpage_buffer(buf, true);
		END_CRIT_SECTION();
		UnlockReleaseBuffer(buf);
	}
	else
	{
		/* the init fork of an unlogged index, as contrib/bloom writes it */
		PageSetChecksumInplace(image, *next);
		smgrextend(RelationGetSmgr(index), fork, *next, image, true);
		log_newpage(&(RelationGetSmgr(index))->smgr_rnode.node, fork, *next,
					image, true);
	}
	(*next)++;
}

/*
 * Append the P blocks of a filter slot, stamped `stamp`; returns the first.
 * The caller holds the metapage exclusively (or is building the index).
 */
static BlockNumber
append_fid(Relation index, ForkNumber fork, BlockNumber *next,
		   const FbfMetaPageData *meta, int64 stamp)
{
	BlockNumber start = *next;
	PGAlignedBlock image;
	uint32		p;

	for (p = 0; p < meta->nparts; p++)
	{
		init_filter_page(image.data, meta->nbits, stamp);
		append_page(index, fork, next, image.data);
	}
	return start;
}

static void
init_pending_page(Page page)
{
	init_page(page, FBF_PAGE_ID_PENDING);
	FbfPageGetOpaque(page)->next = InvalidBlockNumber;
}

/* ----------------------------------------------------------------------
 * Building a filter
 * ----------------------------------------------------------------------
 */

/*
 * Choose the shape from the options: an explicit shape if nbits is set,
 * else the smallest FBF meeting the target at the expected rate, in
 * page-sized blocks.
 */
static void
plan_shape(Relation index, const FbfFilterOptions *opts, FbfMetaPageData *meta)
{
	double		retention = opts->retention_ms / 1000.0;
	uint64		total_bits;
	int			nfilters;
	FbfPlan		plan;
	const char *why;
	uint64		bytes;

	if (opts->nbits > 0)
	{
		if (opts->nhashes <= 0 || opts->npast <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("an explicit fbf shape needs nbits, nhashes and npast")));
		total_bits = opts->nbits;
		nfilters = opts->npast + 2;
		plan.nhashes = opts->nhashes;
		plan.nparts = (uint32) ((total_bits + FBF_BLOCK_MAX_BITS - 1) / FBF_BLOCK_MAX_BITS);
		plan.nbits = (uint32) ((total_bits + plan.nparts - 1) / plan.nparts);
		plan.nfilters = nfilters;
		plan.period = retention / (nfilters - 1);
		if (!fbf_shape_valid(plan.nbits, plan.nhashes, plan.nfilters, plan.nparts, &why))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid fbf shape"),
					 errdetail("%s", why)));
	}
	else if (!fbf_plan_blocked(retention, opts->target_fpp, opts->expected_rate,
							   FBF_CHECK_DEFAULT, FBF_COUNTER_PLAN_MAX_FILTERS,
							   FBF_BLOCK_MAX_BITS, &plan, &why))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("no fbf filter meets target %g at %g operations per second",
						opts->target_fpp, opts->expected_rate),
				 errdetail("%s", why)));

	bytes = ((uint64) plan.nfilters * plan.nparts + 1 + plan.nparts) * BLCKSZ;
	if (bytes > (uint64) fbf_max_filter_size_kb * 1024)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the filter of \"%s\" would need %llu kB, more than fbf.max_filter_size (%d kB)",
						RelationGetRelationName(index),
						(unsigned long long) (bytes / 1024), fbf_max_filter_size_kb),
				 errhint("Lower the expected rate, raise the target false-positive rate, shorten the retention, or raise fbf.max_filter_size.")));

	meta->nbits = plan.nbits;
	meta->nparts = plan.nparts;
	meta->nhashes = (uint16) plan.nhashes;
	meta->nfilters = (uint16) plan.nfilters;
	meta->period = (int64) ceil(plan.period * USECS_PER_SEC);
	meta->base_period = meta->period;
}

/*
 * Write a new, empty filter into `fork` of `index`: metapage, pending
 * pages and every filter block.
 */
void
FbfInitStorage(Relation index, ForkNumber fork, const FbfFilterOptions *opts)
{
	FbfMetaPageData meta;
	PGAlignedBlock image;
	TimestampTz now = GetCurrentTimestamp();
	BlockNumber next = 0;
	uint32		p;
	int			i;

	memset(&meta, 0, sizeof(meta));
	meta.magic = FBF_META_MAGIC;
	meta.version = FBF_STORAGE_VERSION;
	meta.retention = (int64) opts->retention_ms * 1000;
	meta.target_fpp = opts->target_fpp;
	meta.shards = opts->shards;
	meta.created_at = now;
	plan_shape(index, opts, &meta);
	meta.nlive = meta.nfilters;
	meta.nfids = meta.nfilters;
	meta.epoch = meta.nfilters - 1;
	/*
	 * The future filter is born now; the older ones never held anything
	 * the future does not also get, so for drop safety they are as old as
	 * can be (as fbf_init does), else refreshes would wait a retention.
	 */
	for (i = 0; i < meta.nfilters; i++)
	{
		meta.ring[i] = (uint8) i;
		meta.born_at[i] = i == 0 ? now : FBF_BORN_LONG_AGO;
	}

	/* where every block will go, so the metapage can be written first */
	for (i = 0; i < meta.nfilters; i++)
		meta.fid_start[i] = 1 + meta.nparts + i * meta.nparts;

	init_page(image.data, FBF_PAGE_ID_META);
	set_meta(image.data, &meta);
	append_page(index, fork, &next, image.data);

	for (p = 0; p < meta.nparts; p++)
	{
		init_pending_page(image.data);
		append_page(index, fork, &next, image.data);
	}
	for (i = 0; i < meta.nfilters; i++)
		append_fid(index, fork, &next, &meta, expected_stamp(&meta, i));

	if (fork != MAIN_FORKNUM)
		smgrimmedsync(RelationGetSmgr(index), fork);

	/* a new counter: the launcher should visit this database from now on */
	FbfDatabaseChecked(MyDatabaseId, true, now);
}

/*
 * Copy the pages of the filter at `old` (the relfilenode this index had
 * before a rebuild, still on disk until the rebuild commits) into the new,
 * empty relfilenode of `index`.  Returns false, writing nothing, if `old`
 * holds no fbf filter.
 */
bool
FbfCopyStorage(Relation index, RelFileNode old, bool permanent)
{
	SMgrRelation smgr = smgropen(old, InvalidBackendId);
	BlockNumber nblocks;
	BlockNumber blkno;
	PGAlignedBlock image;
	BlockNumber next = 0;

	if (!smgrexists(smgr, MAIN_FORKNUM) ||
		(nblocks = smgrnblocks(smgr, MAIN_FORKNUM)) == 0)
		return false;

	for (blkno = 0; blkno < nblocks; blkno++)
	{
		Buffer		buf = ReadBufferWithoutRelcache(old, MAIN_FORKNUM, blkno,
													RBM_NORMAL, NULL, permanent);

		LockBuffer(buf, BUFFER_LOCK_SHARE);
		memcpy(image.data, BufferGetPage(buf), BLCKSZ);
		UnlockReleaseBuffer(buf);
		if (blkno == FBF_METAPAGE_BLKNO &&
			(PageIsNew(image.data) ||
			 page_meta(image.data)->magic != FBF_META_MAGIC))
			return false;
		append_page(index, MAIN_FORKNUM, &next, image.data);
		CHECK_FOR_INTERRUPTS();
	}
	return true;
}

/*
 * Bring the metapage's copy of the settings (retention, target, shards) up
 * to date with the index's reloptions, changed by ALTER INDEX ... SET.  The
 * shape is only ever changed by AIMD.
 */
void
FbfSyncOptions(Relation index)
{
	FbfFilterOptions *opts = FbfGetOptions(index);
	Buffer		metabuf;
	FbfMetaPageData meta;

	FbfReadMeta(index, &meta);
	if (meta.retention == (int64) opts->retention_ms * 1000 &&
		meta.target_fpp == opts->target_fpp && meta.shards == (uint32) opts->shards)
		return;

	metabuf = read_page(index, FBF_METAPAGE_BLKNO, BUFFER_LOCK_EXCLUSIVE,
						FBF_PAGE_ID_META);
	{
		GenericXLogState *state = GenericXLogStart(index);
		Page		page = GenericXLogRegisterBuffer(state, metabuf, 0);
		FbfMetaPage m = page_meta(page);

		m->retention = (int64) opts->retention_ms * 1000;
		m->target_fpp = opts->target_fpp;
		m->shards = opts->shards;
		GenericXLogFinish(state);
	}
	UnlockReleaseBuffer(metabuf);
}

/* ----------------------------------------------------------------------
 * Operations
 * ----------------------------------------------------------------------
 */

typedef enum EntryStatus
{
	ENTRY_OURS,					/* our transaction, or a subtransaction of it */
	ENTRY_IN_PROGRESS,
	ENTRY_COMMITTED,
	ENTRY_ABORTED
} EntryStatus;

/*
 * The fate of the transaction that applied a pending entry, checked the way
 * heap visibility checks are: current, in progress, committed.
 */
static EntryStatus
entry_status(TransactionId xid)
{
	EntryStatus status;

	if (TransactionIdIsCurrentTransactionId(xid))
		return ENTRY_OURS;
	if (TransactionIdIsInProgress(xid))
		return ENTRY_IN_PROGRESS;

	/*
	 * An xid too old for the commit log was resolved long before any
	 * retention: treat it as committed, never as absent.  The lock keeps
	 * the commit log from being truncated under the lookup, as
	 * txid_status() does.  (Entries are drained every maintenance pass and
	 * every VACUUM of the counter table, so this is a safety net.)
	 */
	LWLockAcquire(XactTruncationLock, LW_SHARED);
	if (TransactionIdPrecedes(xid, ShmemVariableCache->oldestClogXid))
		status = ENTRY_COMMITTED;
	else
		status = TransactionIdDidCommit(xid) ? ENTRY_COMMITTED : ENTRY_ABORTED;
	LWLockRelease(XactTruncationLock);
	return status;
}

/*
 * Bit i of the result is set iff live filter i holds the operation in its
 * block for `part`.  Stale blocks (stamp not current) read as empty.
 */
static uint64
membership(Relation index, const FbfMetaPageData *meta, uint32 part,
		   const uint32 *probes)
{
	uint64		mask = 0;
	int			i;

	for (i = 0; i < meta->nlive; i++)
	{
		Buffer		buf = read_page(index, FbfFilterBlock(meta, meta->ring[i], part),
									BUFFER_LOCK_SHARE, FBF_PAGE_ID_FILTER);
		Page		page = BufferGetPage(buf);

		if (FbfPageGetOpaque(page)->stamp == expected_stamp(meta, i) &&
			bloom_test(page_words(page), probes, meta->nhashes))
			mask |= UINT64CONST(1) << i;
		UnlockReleaseBuffer(buf);
	}
	return mask;
}

/* make a (registered copy of a) filter block current, clearing it if stale */
static void
freshen_block(Page page, const FbfMetaPageData *meta, int logical)
{
	FbfPageOpaque opaque = FbfPageGetOpaque(page);

	if (opaque->stamp != expected_stamp(meta, logical))
	{
		memset(page_words(page), 0, fbf_nwords(meta->nbits) * 8);
		opaque->stamp = expected_stamp(meta, logical);
		opaque->count = 0;
	}
}

/*
 * Move the committed entries of one partition's pending page into the
 * future and present blocks, and drop the aborted ones, in one WAL record.
 * The caller holds the metapage share-locked (so the ring is `meta`) and
 * pbuf exclusive-locked.  Returns the number of entries removed.
 */
static int
drain_pending(Relation index, const FbfMetaPageData *meta, uint32 part,
			  Buffer pbuf)
{
	int			n;
	FbfPendingEntry *entries = pending_entries(BufferGetPage(pbuf), &n);
	EntryStatus *status;
	int			ncommitted = 0;
	int			nkeep = 0;
	Buffer		fbuf[2];
	GenericXLogState *state;
	Page		ppage;
	Page		fpage[2];
	int			i;
	int			j;

	if (n == 0)
		return 0;
	status = palloc(sizeof(EntryStatus) * n);
	for (i = 0; i < n; i++)
	{
		status[i] = entry_status(entries[i].xid);
		if (status[i] == ENTRY_COMMITTED)
			ncommitted++;
		else if (status[i] != ENTRY_ABORTED)
			nkeep++;
	}
	if (nkeep == n)
	{
		pfree(status);
		return 0;
	}

	for (j = 0; j < 2; j++)
		fbuf[j] = read_page(index, FbfFilterBlock(meta, meta->ring[j], part),
							BUFFER_LOCK_EXCLUSIVE, FBF_PAGE_ID_FILTER);

	state = GenericXLogStart(index);
	ppage = GenericXLogRegisterBuffer(state, pbuf, 0);
	for (j = 0; j < 2; j++)
	{
		fpage[j] = GenericXLogRegisterBuffer(state, fbuf[j], 0);
		freshen_block(fpage[j], meta, j);
	}

	entries = pending_entries(ppage, &n);
	nkeep = 0;
	for (i = 0; i < n; i++)
	{
		if (status[i] == ENTRY_COMMITTED)
		{
			FbfHash		h = {entries[i].h1, entries[i].h2};
			uint32		probes[FBF_MAX_HASHES];

			fbf_probes(&h, meta->nhashes, meta->nbits, probes);
			for (j = 0; j < 2; j++)
			{
				bloom_set(page_words(fpage[j]), probes, meta->nhashes);
				FbfPageGetOpaque(fpage[j])->count++;
			}
		}
		else if (status[i] != ENTRY_ABORTED)
			entries[nkeep++] = entries[i];
	}
	set_pending_count(ppage, nkeep);
	GenericXLogFinish(state);

	for (j = 0; j < 2; j++)
		UnlockReleaseBuffer(fbuf[j]);
	pfree(status);
	return n - nkeep;
}

/*
 * A partition's pending chain: the head page and its overflow pages, all
 * locked exclusively, in chain order.
 */
typedef struct PendingChain
{
	int			n;
	Buffer		bufs[FBF_MAX_PENDING_PAGES];
} PendingChain;

static void
chain_lock(Relation index, const FbfMetaPageData *meta, uint32 part,
		   PendingChain *chain)
{
	BlockNumber blkno = FbfPendingBlock(meta, part);

	chain->n = 0;
	while (blkno != InvalidBlockNumber)
	{
		Buffer		buf;

		if (chain->n == FBF_MAX_PENDING_PAGES)
			elog(ERROR, "fbf: pending chain of \"%s\" is longer than %d pages",
				 RelationGetRelationName(index), FBF_MAX_PENDING_PAGES);
		buf = read_page(index, blkno, BUFFER_LOCK_EXCLUSIVE, FBF_PAGE_ID_PENDING);
		chain->bufs[chain->n++] = buf;
		blkno = FbfPageGetOpaque(BufferGetPage(buf))->next;
	}
}

static void
chain_release(PendingChain *chain)
{
	int			i;

	for (i = chain->n - 1; i >= 0; i--)
		UnlockReleaseBuffer(chain->bufs[i]);
	chain->n = 0;
}

/*
 * Drain every page of a locked chain, then move the overflow pages left
 * empty to the head's spare list (so later operations lock fewer pages, and
 * chain_extend reuses them).  Returns entries removed.
 */
static int
chain_drain(Relation index, const FbfMetaPageData *meta, uint32 part,
			PendingChain *chain)
{
	int			removed = 0;
	int			i;

	for (i = 0; i < chain->n; i++)
		removed += drain_pending(index, meta, part, chain->bufs[i]);

	for (i = chain->n - 1; i >= 1; i--)
	{
		Buffer		buf = chain->bufs[i];
		int			n;
		GenericXLogState *state;
		Page		head;
		Page		prev;
		Page		page;

		pending_entries(BufferGetPage(buf), &n);
		if (n > 0)
			continue;

		state = GenericXLogStart(index);
		head = GenericXLogRegisterBuffer(state, chain->bufs[0], 0);
		prev = i == 1 ? head : GenericXLogRegisterBuffer(state, chain->bufs[i - 1], 0);
		page = GenericXLogRegisterBuffer(state, buf, 0);
		FbfPageGetOpaque(prev)->next = FbfPageGetOpaque(page)->next;
		FbfPageGetOpaque(page)->next = (BlockNumber) FbfPageGetOpaque(head)->count;
		FbfPageGetOpaque(head)->count = BufferGetBlockNumber(buf);
		GenericXLogFinish(state);

		UnlockReleaseBuffer(buf);
		memmove(&chain->bufs[i], &chain->bufs[i + 1],
				sizeof(Buffer) * (chain->n - i - 1));
		chain->n--;
	}
	return removed;
}

/*
 * Link an empty overflow page at the end of the chain, in one WAL record:
 * a spare one from the head's list if there is one, else a new page.  The
 * caller holds the chain (so no one else touches the spare list).
 */
static void
chain_extend(Relation index, PendingChain *chain)
{
	BlockNumber spare = (BlockNumber) FbfPageGetOpaque(BufferGetPage(chain->bufs[0]))->count;
	Buffer		buf;
	Buffer		tail = chain->bufs[chain->n - 1];
	GenericXLogState *state;
	Page		page;

	if (spare != 0)
		buf = read_page(index, spare, BUFFER_LOCK_EXCLUSIVE, FBF_PAGE_ID_PENDING);
	else
	{
		buf = extend_by_one(index);
		LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	}

	state = GenericXLogStart(index);
	if (spare != 0)
	{
		Page		head = GenericXLogRegisterBuffer(state, chain->bufs[0], 0);

		page = GenericXLogRegisterBuffer(state, buf, 0);
		FbfPageGetOpaque(head)->count = FbfPageGetOpaque(page)->next;
		FbfPageGetOpaque(page)->next = InvalidBlockNumber;
		set_pending_count(page, 0);
		if (tail == chain->bufs[0])
			FbfPageGetOpaque(head)->next = BufferGetBlockNumber(buf);
	}
	else
	{
		page = GenericXLogRegisterBuffer(state, buf, GENERIC_XLOG_FULL_IMAGE);
		init_pending_page(page);
	}
	if (spare == 0 || tail != chain->bufs[0])
	{
		page = GenericXLogRegisterBuffer(state, tail, 0);
		FbfPageGetOpaque(page)->next = BufferGetBlockNumber(buf);
	}
	GenericXLogFinish(state);

	chain->bufs[chain->n++] = buf;
}

/*
 * Decide whether the operation `hash` is new, and if so record it as in
 * flight for the current (sub)transaction.
 *
 * Returns FBF_OP_DUPLICATE if a committed operation, or one of this
 * transaction's, has the same identity; waits for the applying transaction
 * if another one in progress has it, then decides again.  The caller holds
 * RowExclusiveLock on the counter table.
 */
FbfOpResult
FbfApplyOperation(Relation index, const FbfHash *hash)
{
	bool		refresh_tried = false;

	for (;;)
	{
		Buffer		metabuf;
		FbfMetaPageData meta;
		PendingChain chain;
		uint32		part;
		uint32		probes[FBF_MAX_HASHES];
		TransactionId wait_for = InvalidTransactionId;
		TransactionId xid;
		bool		duplicate = false;
		Buffer		room = InvalidBuffer;
		GenericXLogState *state;
		Page		page;
		FbfPendingEntry *entries;
		int			n;
		int			c;
		int			i;
		TimestampTz now = GetCurrentTimestamp();

		metabuf = read_page(index, FBF_METAPAGE_BLKNO, BUFFER_LOCK_SHARE,
							FBF_PAGE_ID_META);
		copy_meta(index, metabuf, &meta);

		/*
		 * A refresh is due and the worker is late: do it first (once; it may
		 * rightly be postponed to keep the retention).
		 */
		if (now - meta.born_at[0] >= meta.period && !refresh_tried &&
			fbf_refresh_action(meta.nlive, meta.nfilters,
							   meta.born_at[meta.nlive - 2], now,
							   meta.retention) != FBF_REFRESH_POSTPONE)
		{
			UnlockReleaseBuffer(metabuf);
			FbfRefreshIfDue(index, now);
			refresh_tried = true;
			continue;
		}

		part = fbf_part(hash, meta.nparts);
		chain_lock(index, &meta, part, &chain);

		/* in flight, or applied recently and not yet drained? */
		for (c = 0; c < chain.n && !duplicate && !TransactionIdIsValid(wait_for); c++)
		{
			entries = pending_entries(BufferGetPage(chain.bufs[c]), &n);
			for (i = 0; i < n && !duplicate && !TransactionIdIsValid(wait_for); i++)
			{
				if (entries[i].h1 != hash->h1 || entries[i].h2 != hash->h2)
					continue;
				switch (entry_status(entries[i].xid))
				{
					case ENTRY_OURS:
					case ENTRY_COMMITTED:
						duplicate = true;
						break;
					case ENTRY_IN_PROGRESS:
						wait_for = entries[i].xid;
						break;
					case ENTRY_ABORTED:
						break;
				}
			}
			if (n < FBF_PENDING_CAPACITY && !BufferIsValid(room))
				room = chain.bufs[c];
		}
		if (TransactionIdIsValid(wait_for))
		{
			chain_release(&chain);
			UnlockReleaseBuffer(metabuf);
			XactLockTableWait(wait_for, NULL, NULL, XLTW_None);
			continue;
		}

		/* applied earlier and drained into the window? */
		if (!duplicate)
		{
			fbf_probes(hash, meta.nhashes, meta.nbits, probes);
			duplicate = fbf_check_mask(membership(index, &meta, part, probes),
									   meta.nlive, FBF_CHECK_DEFAULT);
		}
		if (duplicate)
		{
			chain_release(&chain);
			UnlockReleaseBuffer(metabuf);
			return FBF_OP_DUPLICATE;
		}

		/*
		 * New: record it as in flight.  If the chain is full, drain what has
		 * been decided; if that frees nothing, add an overflow page.
		 */
		if (!BufferIsValid(room) && chain_drain(index, &meta, part, &chain) > 0)
		{
			for (c = 0; c < chain.n && !BufferIsValid(room); c++)
			{
				pending_entries(BufferGetPage(chain.bufs[c]), &n);
				if (n < FBF_PENDING_CAPACITY)
					room = chain.bufs[c];
			}
		}
		if (!BufferIsValid(room))
		{
			if (chain.n == FBF_MAX_PENDING_PAGES)
			{
				chain_release(&chain);
				UnlockReleaseBuffer(metabuf);
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
						 errmsg("too many operations in flight on counter filter \"%s\"",
								RelationGetRelationName(index)),
						 errdetail("%d operations of open transactions are waiting to commit in one partition.",
								   FBF_PENDING_CAPACITY * FBF_MAX_PENDING_PAGES),
						 errhint("Commit or roll back the transactions that increment this counter, or split large batches into several transactions.")));
			}
			chain_extend(index, &chain);
			room = chain.bufs[chain.n - 1];
		}

		xid = GetCurrentTransactionId();
		state = GenericXLogStart(index);
		page = GenericXLogRegisterBuffer(state, room, 0);
		entries = pending_entries(page, &n);
		entries[n].xid = xid;
		entries[n].unused = 0;
		entries[n].h1 = hash->h1;
		entries[n].h2 = hash->h2;
		set_pending_count(page, n + 1);
		GenericXLogFinish(state);

		chain_release(&chain);
		UnlockReleaseBuffer(metabuf);
		return FBF_OP_APPLIED;
	}
}

/* ----------------------------------------------------------------------
 * Refresh, drain, maintenance
 * ----------------------------------------------------------------------
 */

/*
 * Rotate once, as fbf_refresh_action says: the recycled filter (the oldest
 * live one, or the first unborn one) becomes the empty future; its blocks
 * go stale with the new epoch.  Returns false if postponed.
 */
static bool
rotate(FbfMetaPageData *meta, TimestampTz now)
{
	int			from;

	switch (fbf_refresh_action(meta->nlive, meta->nfilters,
							   meta->born_at[meta->nlive - 2], now,
							   meta->retention))
	{
		case FBF_REFRESH_RECYCLE_OLDEST:
			from = meta->nlive - 1;
			break;
		case FBF_REFRESH_USE_UNBORN:
			from = meta->nlive;
			meta->nlive++;
			break;
		default:
			return false;
	}
	{
		uint8		fid = meta->ring[from];

		memmove(&meta->ring[1], &meta->ring[0], from);
		memmove(&meta->born_at[1], &meta->born_at[0], sizeof(int64) * from);
		meta->ring[0] = fid;
		meta->born_at[0] = now;
	}
	meta->epoch++;
	return true;
}

/*
 * Refresh the filter as often as its period says is due (a late worker may
 * leave several due), never dropping a filter that could still hold an
 * operation younger than the retention.  Only the metapage changes: the
 * recycled filter's blocks become stale and read as empty.  Returns the
 * number of refreshes done.
 */
int
FbfRefreshIfDue(Relation index, TimestampTz now)
{
	Buffer		metabuf = read_page(index, FBF_METAPAGE_BLKNO, BUFFER_LOCK_EXCLUSIVE,
									FBF_PAGE_ID_META);
	FbfMetaPageData meta;
	TimestampTz born = 0;
	int			done = 0;

	/*
	 * The new future's birth time must not be earlier than the moment it
	 * becomes future, which is now that we hold the metapage: operations
	 * were drained into the old future until we got the lock.
	 */
	now = Max(now, GetCurrentTimestamp());
	copy_meta(index, metabuf, &meta);
	born = meta.born_at[0];

	/*
	 * Each refresh records `now` as the new future's birth, never a time on
	 * the period's grid: drop safety relies on birth times not being earlier
	 * than the refresh that made the filter current.
	 */
	while (now - born >= meta.period * (done + 1) && done < meta.nfilters)
	{
		if (!rotate(&meta, now))
		{
			elog(DEBUG1, "fbf: refresh of \"%s\" postponed: the oldest filter still covers the retention",
				 RelationGetRelationName(index));
			break;
		}
		done++;
	}
	if (done > 0)
	{
		GenericXLogState *state = GenericXLogStart(index);
		Page		page = GenericXLogRegisterBuffer(state, metabuf, 0);

		set_meta(page, &meta);
		GenericXLogFinish(state);
	}
	UnlockReleaseBuffer(metabuf);
	return done;
}

/* Entries on every pending chain (in flight, or awaiting their drain). */
int64
FbfPendingCount(Relation index, const FbfMetaPageData *meta)
{
	int64		total = 0;
	uint32		p;

	for (p = 0; p < meta->nparts; p++)
	{
		BlockNumber blkno = FbfPendingBlock(meta, p);

		while (blkno != InvalidBlockNumber)
		{
			Buffer		buf = read_page(index, blkno, BUFFER_LOCK_SHARE,
										FBF_PAGE_ID_PENDING);
			int			n;

			pending_entries(BufferGetPage(buf), &n);
			total += n;
			blkno = FbfPageGetOpaque(BufferGetPage(buf))->next;
			UnlockReleaseBuffer(buf);
		}
	}
	return total;
}

/* Drain every partition's resolved entries; returns entries removed. */
int
FbfDrainAll(Relation index)
{
	Buffer		metabuf = read_page(index, FBF_METAPAGE_BLKNO, BUFFER_LOCK_SHARE,
									FBF_PAGE_ID_META);
	FbfMetaPageData meta;
	int			removed = 0;
	uint32		p;

	copy_meta(index, metabuf, &meta);
	for (p = 0; p < meta.nparts; p++)
	{
		PendingChain chain;

		chain_lock(index, &meta, p, &chain);
		removed += chain_drain(index, &meta, p, &chain);
		chain_release(&chain);
		CHECK_FOR_INTERRUPTS();
	}
	UnlockReleaseBuffer(metabuf);
	return removed;
}

/*
 * Element counts of every live block, counts[i * nparts + p] for logical
 * filter i and partition p (0 for stale blocks).
 */
void
FbfBlockCounts(Relation index, const FbfMetaPageData *meta, uint64 *counts)
{
	int			i;
	uint32		p;

	for (i = 0; i < meta->nlive; i++)
	{
		for (p = 0; p < meta->nparts; p++)
		{
			Buffer		buf = read_page(index, FbfFilterBlock(meta, meta->ring[i], p),
										BUFFER_LOCK_SHARE, FBF_PAGE_ID_FILTER);
			FbfPageOpaque opaque = FbfPageGetOpaque(BufferGetPage(buf));

			counts[i * meta->nparts + p] =
				opaque->stamp == expected_stamp(meta, i) ? opaque->count : 0;
			UnlockReleaseBuffer(buf);
		}
	}
}

/* the mean over partitions of each partition's estimate */
double
FbfEstimateFpp(const FbfMetaPageData *meta, const uint64 *counts)
{
	return fbf_estimate_fpp_blocked(meta->nbits, meta->nhashes, meta->nlive,
									meta->nparts, counts, FBF_CHECK_DEFAULT,
									FBF_MODEL_SHARED);
}

/* the AIMD configuration for a counter: its metapage and the fbf.* settings */
static void
aimd_config(const FbfMetaPageData *meta, FbfAimdConfig *cfg)
{
	int64		cap_pages = (int64) fbf_max_filter_size_kb * 1024 / BLCKSZ;
	int64		cap_filters = (cap_pages - 1 - meta->nparts) / meta->nparts;

	cfg->target_fpp = meta->target_fpp;
	cfg->increase_at = fbf_aimd_increase_at;
	cfg->decrease_at = fbf_aimd_decrease_at;
	cfg->retention = meta->retention;
	cfg->period_step = (int64) fbf_aimd_period_step_ms * 1000;
	cfg->period_min = (int64) fbf_period_min_ms * 1000;

	/*
	 * The planned shape is the floor of capacity: shrinking after a burst
	 * returns towards it, never below it, so an idle spell does not leave
	 * a counter unable to take its expected rate (growing back is slow:
	 * the period shortens one step per resize).
	 */
	cfg->period_max = Max(meta->base_period, cfg->period_min);
	cfg->min_filters = FBF_MIN_FILTERS;
	cfg->max_filters = FBF_MAX_FILTERS;
	cfg->nbits = meta->nbits;
	cfg->nparts = meta->nparts;
	cfg->nhashes = meta->nhashes;
	/* the memory cap counts pages; express it in filters of this shape */
	cap_filters = Max(cap_filters, 0);
	cfg->max_bytes = fbf_size(meta->nbits, (int) Min(cap_filters, FBF_MAX_FILTERS),
							  meta->nparts);
}

/*
 * Grow or shrink to d.nfilters filters with period d.period.  Growing puts
 * unborn filters at the old end, reusing free fids before adding pages;
 * shrinking removes filters from the old end, unborn ones first, and live
 * ones only as far as that forgets no operation younger than the
 * retention (operations that live only in dropped filters were applied
 * before the oldest kept filter became future).  What cannot be removed
 * yet stays, with the new period applied (the window only gets longer); a
 * later pass removes it.  Returns the number of filters after the change,
 * or -1 if nothing changed.
 */
static int
apply_resize(Relation index, const FbfAimdDecision *d, TimestampTz now)
{
	int			nfilters = d->nfilters;

	Buffer		metabuf = read_page(index, FBF_METAPAGE_BLKNO, BUFFER_LOCK_EXCLUSIVE,
									FBF_PAGE_ID_META);
	FbfMetaPageData meta;
	GenericXLogState *state;
	Page		page;

	copy_meta(index, metabuf, &meta);

	if (d->nfilters > meta.nfilters)
	{
		bool		used[FBF_MAX_FILTERS] = {0};
		int			fid = 0;
		int			i;

		for (i = 0; i < meta.nfilters; i++)
			used[meta.ring[i]] = true;
		for (i = meta.nfilters; i < d->nfilters; i++)
		{
			while (used[fid])
				fid++;
			if (fid >= meta.nfids)
			{
				/* never-current stamp: the blocks read as empty until used */
				BlockNumber next = RelationGetNumberOfBlocks(index);

				meta.fid_start[fid] = append_fid(index, MAIN_FORKNUM, &next, &meta, -1);
				meta.nfids = (uint16) (fid + 1);
			}
			used[fid] = true;
			meta.ring[i] = (uint8) fid;
			meta.born_at[i] = 0;
		}
	}
	else if (d->nfilters < meta.nfilters)
	{
		int			keep_live = meta.nlive;

		if (d->nfilters < meta.nlive)
		{
			keep_live = d->nfilters;
			while (keep_live < meta.nlive &&
				   now - meta.born_at[keep_live - 1] <= meta.retention)
				keep_live++;
		}
		nfilters = Max(d->nfilters, keep_live);
		if (nfilters == meta.nfilters && d->period == meta.period)
		{
			UnlockReleaseBuffer(metabuf);
			return -1;
		}
		meta.nlive = (uint16) keep_live;
	}
	if (nfilters != meta.nfilters)
		meta.resizes++;
	meta.nfilters = (uint16) nfilters;
	meta.period = d->period;

	state = GenericXLogStart(index);
	page = GenericXLogRegisterBuffer(state, metabuf, 0);
	set_meta(page, &meta);
	GenericXLogFinish(state);
	UnlockReleaseBuffer(metabuf);
	return nfilters;
}

/*
 * Resize to `nfilters` filters now, keeping the period, as an
 * administrator's fbf_counter_resize() asks: growing within the caps,
 * shrinking only to a ring that still covers the retention, and dropping
 * live filters only as far as that is safe.  Returns the number of filters
 * afterwards.
 */
int
FbfResize(Relation index, int nfilters, TimestampTz now)
{
	FbfMetaPageData meta;
	FbfAimdConfig cfg;
	FbfAimdDecision d;
	int			result;

	FbfReadMeta(index, &meta);
	aimd_config(&meta, &cfg);
	if (nfilters < FBF_MIN_FILTERS || nfilters > FBF_MAX_FILTERS ||
		fbf_size(meta.nbits, nfilters, meta.nparts) > cfg.max_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a counter filter must have between %d and %d filters within fbf.max_filter_size",
						FBF_MIN_FILTERS, FBF_MAX_FILTERS)));
	if ((int64) (nfilters - 1) * meta.period < meta.retention)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%d filters refreshed every %.3f s do not cover the retention of %.3f s",
						nfilters, meta.period / 1e6, meta.retention / 1e6)));
	d.action = nfilters > meta.nfilters ? FBF_AIMD_GROW : FBF_AIMD_SHRINK;
	d.nfilters = nfilters;
	d.period = meta.period;
	d.capped = false;
	d.reason = "requested";
	result = apply_resize(index, &d, now);
	return result < 0 ? meta.nfilters : result;
}

/* set or clear the "capped" flag, warning when it becomes set */
static void
note_capped(Relation index, bool capped)
{
	Buffer		metabuf = read_page(index, FBF_METAPAGE_BLKNO, BUFFER_LOCK_EXCLUSIVE,
									FBF_PAGE_ID_META);
	FbfMetaPage meta = page_meta(BufferGetPage(metabuf));
	bool		was = (meta->flags & FBF_META_CAPPED) != 0;

	if (was != capped)
	{
		GenericXLogState *state = GenericXLogStart(index);
		Page		page = GenericXLogRegisterBuffer(state, metabuf, 0);

		if (capped)
			page_meta(page)->flags |= FBF_META_CAPPED;
		else
			page_meta(page)->flags &= ~FBF_META_CAPPED;
		GenericXLogFinish(state);
		if (capped)
			ereport(WARNING,
					(errmsg("fbf: the filter \"%s\" is at its cap and cannot grow",
							RelationGetRelationName(index)),
					 errdetail("Its estimated false-positive rate has reached fbf.aimd_increase_at (%g) times its target.",
							   fbf_aimd_increase_at),
					 errhint("Raise fbf.max_filter_size, or accept more false positives.")));
	}
	UnlockReleaseBuffer(metabuf);
}

/*
 * Operations per microsecond, for the controller's look-ahead: the higher
 * of the last complete period's rate (so a ramp is seen at once) and the
 * average over the complete periods of the live window (so one quiet
 * period does not look like the load went away).  Filter i holds its own
 * epoch (as future) and the next one (as present), so epoch i's count is
 * count_i - epoch_(i-1), starting from the future filter, which holds only
 * its own.  Filters born before any refresh (birth time 0) have no period
 * to measure.  -1 if unknown.
 */
static double
arrival_rate(const FbfMetaPageData *meta, const uint64 *counts)
{
	double		epoch = 0;
	double		total = 0;
	double		last = 0;
	int			timed = 1;		/* filters 0..timed-1 have birth times */
	int64		window;
	int64		period;
	int			i;

	while (timed < meta->nlive && meta->born_at[timed] > 0)
		timed++;
	if (timed < 2)
		return -1;
	window = meta->born_at[0] - meta->born_at[timed - 1];
	period = meta->born_at[0] - meta->born_at[1];
	if (window <= 0 || period <= 0)
		return -1;
	for (i = 0; i < timed; i++)
	{
		double		count = 0;
		uint32		p;

		for (p = 0; p < meta->nparts; p++)
			count += counts[i * meta->nparts + p];
		epoch = Max(count - epoch, 0);
		if (i == 1)
			last = epoch;
		if (i > 0)
			total += epoch;
	}
	return Max(last / period, total / window);
}

/*
 * One maintenance pass over a counter's filter, as the background worker
 * runs it every fbf.naptime: refresh if due, drain resolved operations,
 * then one AIMD step.  The caller holds RowExclusiveLock on the table.
 */
FbfAimdDecision
FbfMaintain(Relation index, TimestampTz now)
{
	FbfMetaPageData meta;
	FbfAimdConfig cfg;
	FbfAimdDecision d;
	uint64	   *counts;
	double		fpp;
	double		rate;

	FbfSyncOptions(index);
	FbfRefreshIfDue(index, now);
	FbfDrainAll(index);

	FbfReadMeta(index, &meta);
	counts = palloc(sizeof(uint64) * meta.nlive * meta.nparts);
	FbfBlockCounts(index, &meta, counts);
	fpp = FbfEstimateFpp(&meta, counts);
	rate = arrival_rate(&meta, counts);
	pfree(counts);

	aimd_config(&meta, &cfg);
	d = fbf_aimd_decide(&cfg, meta.nfilters, meta.period, fpp, rate);
	if (d.action != FBF_AIMD_HOLD)
	{
		int			nfilters = apply_resize(index, &d, now);

		if (nfilters < 0)
			d.action = FBF_AIMD_HOLD;
		else
			ereport(LOG,
					(errmsg("fbf: %s \"%s\" from %d to %d filters, refresh period %.3f s to %.3f s (estimated false-positive rate %.3g, target %.3g)",
							d.action == FBF_AIMD_GROW ? "grew" :
							nfilters < meta.nfilters ? "shrank" : "is shrinking",
							RelationGetRelationName(index), meta.nfilters,
							nfilters, meta.period / 1e6, d.period / 1e6,
							fpp, meta.target_fpp)));
	}
	if (d.capped != ((meta.flags & FBF_META_CAPPED) != 0))
		note_capped(index, d.capped);
	return d;
}

/* ----------------------------------------------------------------------
 * Snapshot
 * ----------------------------------------------------------------------
 */

/*
 * The filter as an in-memory Fbf (palloc'd, fbf datum layout): every live
 * block, plus the committed operations still on pending pages inserted
 * into future and present.  *pending gets the number still in flight.
 */
Fbf *
FbfSnapshot(Relation index, uint64 *pending)
{
	Buffer		metabuf = read_page(index, FBF_METAPAGE_BLKNO, BUFFER_LOCK_SHARE,
									FBF_PAGE_ID_META);
	FbfMetaPageData meta;
	Fbf		   *f;
	int			i;
	uint32		p;

	copy_meta(index, metabuf, &meta);
	f = FbfValueAlloc(meta.nbits, meta.nfilters, meta.nparts);
	fbf_init(f, meta.nbits, meta.nhashes, meta.nfilters, meta.nparts,
			 meta.period, 0);
	f->nlive = meta.nlive;
	f->epoch = meta.epoch;
	for (i = 0; i < meta.nfilters; i++)
		*fbf_born_at(f, i) = i < meta.nlive ? meta.born_at[i] : 0;

	for (i = 0; i < meta.nlive; i++)
	{
		for (p = 0; p < meta.nparts; p++)
		{
			Buffer		buf = read_page(index, FbfFilterBlock(&meta, meta.ring[i], p),
										BUFFER_LOCK_SHARE, FBF_PAGE_ID_FILTER);
			Page		page = BufferGetPage(buf);

			if (FbfPageGetOpaque(page)->stamp == expected_stamp(&meta, i))
			{
				memcpy(fbf_block(f, i, p), page_words(page), fbf_nwords(meta.nbits) * 8);
				*fbf_count(f, i, p) = FbfPageGetOpaque(page)->count;
			}
			UnlockReleaseBuffer(buf);
		}
	}

	*pending = 0;
	for (p = 0; p < meta.nparts; p++)
	{
		PendingChain chain;
		int			c;

		chain_lock(index, &meta, p, &chain);
		for (c = 0; c < chain.n; c++)
		{
			int			n;
			FbfPendingEntry *entries = pending_entries(BufferGetPage(chain.bufs[c]), &n);
			int			j;

			for (j = 0; j < n; j++)
			{
				EntryStatus s = entry_status(entries[j].xid);

				if (s == ENTRY_COMMITTED)
				{
					FbfHash		h = {entries[j].h1, entries[j].h2};

					fbf_insert(f, &h);
				}
				else if (s != ENTRY_ABORTED)
					(*pending)++;
			}
		}
		chain_release(&chain);
	}
	UnlockReleaseBuffer(metabuf);
	return f;
}
