/*-------------------------------------------------------------------------
 *
 * window_page.h
 *	  The on-disk layout of a window index (as brin_page.h is apart from
 *	  brin.h): the metapage, the special space of every page, pending
 *	  entries, partition pages' headers, block addressing, and the
 *	  version 1 metapage an upgrade reads.  Included by the files of
 *	  src/window only; vocabulary in src/window/README.md.
 *
 * A counter table's window lives in the pages of an index of the internal
 * access method `fbf_filter` on that table (the window index).  Every
 * change goes through the buffer manager with fbf's WAL records (common/fbf_xlog.h), so checkpoints,
 * crash recovery, base backups and streaming replication carry it with
 * no extra machinery; dropping the table drops the index and its storage.
 *
 * Blocks (P = nparts, the number of partitions; C = nchains):
 *
 *		0						metapage: shape, ring, periods, retention
 *		1 .. C					pending page of each chain (chain head)
 *		part_start + p			partition page p: every filter's bits
 *		anywhere after			pending overflow pages; the pages of a split
 *								in progress; a 1.0 window's frozen blocks
 *
 * An operation hashes to one partition (fbf_part) and to one pending chain
 * (fbf_part with C); P is a multiple of C, so a chain's operations fall
 * in a run of P / C partitions.  Its check reads one partition page and
 * its chain, whatever the number of filters.
 *
 * Partition pages are bit-sliced (core/bloom_slice.h): position w of the
 * page is one 16-bit word whose bit j is bit w of the filter in lane j, so
 * the filters of the ring, up to FBF_SLICE_LANES of them, are tested at
 * once with k word loads and an AND.  The metapage's ring maps logical
 * filter i (0 = future, 1 = present, 2.. past) to its lane ("slot").
 *
 * A window created with the option filter = cuckoo (meta->filter) has
 * cuckoo partition pages instead (window_cuckoo.c): one block of the
 * core's cuckoo window each, fingerprints with epoch tags, checked in one
 * page as well.  Its ring only times the epochs; it grows by splitting as
 * below, by load, and never merges.
 *
 * Splitting (growth in bits, window_split.c): the partitions are
 * multiplied by a power of two F, one partition at a time, as in linear
 * hashing.  A split allocates F * P new pages at split_start; splitting
 * partition q copies its page into new pages qF .. qF + F - 1 (fbf_part
 * with F * P sends each of q's operations to one of them, and all hold its
 * bits), then advances split_next past q.  An operation whose partition q
 * is below split_next uses the new pages.  When every partition is split,
 * P becomes F * P and the old pages are left for the next split or merge.
 * A merge is the reverse: groups of F partition pages are ORed into one
 * new page each, and the new partition q' is used once q' < split_next.
 *
 * Pending pages: an operation is not written into the Bloom bits when it is
 * applied, because bits cannot be taken back if its transaction aborts.  It
 * is appended to its chain's pending page with the applying
 * (sub)transaction's xid, in the same transaction as the counter update.
 * Whether the operation "happened" is then exactly whether that xid
 * committed: concurrent callers find the entry and wait on the xid; after a
 * crash the entry is in the WAL-replayed page and the xid's fate is in the
 * commit log.  Entries whose xid committed are later drained into the
 * future and present filters; aborted ones are discarded.
 *
 * Window time: birth times, the period and the retention are in the
 * window's own clock, elapsed time anchored in the metapage, never the wall
 * clock (window_clock.c).  Pending entries carry 64-bit xids, and each
 * chain head its floor, so that entries are drained before the commit log
 * forgets their fate (window_pending.c).
 *
 * Lazy clearing: a refresh only rewrites the metapage (one small WAL
 * record).  Each lane of a partition page carries the epoch at which the
 * filter it holds became future ("stamp"); a lane whose stamp does not
 * match the ring is stale and reads as empty, and the first drain into it
 * clears and restamps it.
 *
 * Lock order: src/window/README.md, "Lock definitions" (stated there
 * only).  This header owns no lock: it describes what the locks guard.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_WINDOW_PAGE_H
#define FBF_WINDOW_PAGE_H

#include "postgres.h"

#include "access/transam.h"
#include "storage/block.h"
#include "storage/bufpage.h"

#include "core/cwin_block.h"
#include "core/fbf_core.h"

#define FBF_META_MAGIC			0x46424643	/* "FBFC" */
#define FBF_STORAGE_VERSION		2	/* 1: 1.0's layout, one block per filter
									 * and partition (window_legacy.c) */

#define FBF_METAPAGE_BLKNO		0

/* the last two bytes of every page's special space */
#define FBF_PAGE_ID_META		0xFB01
#define FBF_PAGE_ID_PENDING		0xFB02
#define FBF_PAGE_ID_FILTER		0xFB03	/* version 1 filter block */
#define FBF_PAGE_ID_SLICE		0xFB04	/* partition page */
#define FBF_PAGE_ID_CUCKOO		0xFB05	/* partition page of a cuckoo window */
#define FBF_PAGE_ID_STREAM		0xFB06	/* stream page (core/fbf_stream.h) */

/* filters a window may have: the lanes of a partition page's words */
#define FBF_SLICE_LANES			16
#define FBF_SLICE_WIDTH			2	/* bytes per word: bloom_slice_width(16) */

/* the head of a partition page's contents; its words follow */
typedef struct FbfSliceHeader
{
	int64		stamp[FBF_SLICE_LANES];	/* birth epoch of the filter the lane
										 * holds (-1: none yet) */
	uint32		count[FBF_SLICE_LANES];	/* elements set in the lane */
	uint32		dup[FBF_SLICE_LANES];	/* of those, how many other pages also
										 * count (copied there by a split) */
} FbfSliceHeader;

/*
 * What a 1.0 window's filters were when it was upgraded: frozen in their
 * blocks and checked, read-only, until every operation they remember has
 * aged out (window_legacy.c).
 */
typedef struct FbfLegacyFilters
{
	int64		until;			/* window time; 0: no frozen filters */
	int64		epoch;
	uint32		nbits;
	uint32		nparts;
	uint16		nhashes;
	uint16		nlive;
	uint32		keyless;		/* 1.0 recorded keyed operations without
								 * their key: check that identity too */
	uint8		ring[FBF_MAX_FILTERS];
	BlockNumber slot_start[FBF_MAX_FILTERS];
} FbfLegacyFilters;

/*
 * A cuckoo window's shape (window_cuckoo.c): each partition page holds one
 * core/cwin_block.h block of f-bit fingerprints.  The ring of the metapage
 * still times the epochs (16 live ones, the tags' limit; its lanes mean
 * nothing here), and parts[] gives each live epoch's key partitions: the
 * partition count when it began, which its entries' fingerprints were
 * computed with (CwinEpochs.parts).
 */
typedef struct FbfCuckooShape
{
	uint32		fp_bits;
	uint32		nbuckets;		/* per page, as cwin_layout_init makes it */
	uint32		parts[CWIN_MAX_LIVE];	/* by age: 0 = the current epoch */
} FbfCuckooShape;

typedef struct FbfWindowMetaPageData
{
	uint32		magic;
	uint32		version;
	uint32		nbits;			/* positions per partition page: bits of each
								 * filter in each partition */
	uint32		nparts;			/* partitions */
	uint16		nhashes;
	uint16		nfilters;		/* N + 2, changed by AIMD */
	uint16		nlive;			/* live filters, logical 0..nlive-1 */
	uint16		nslots;			/* lanes used so far: 0..nslots-1 */
	uint32		flags;			/* FBF_META_* */
	uint32		shards;			/* shard rows per key in the counter table */
	int64		epoch;			/* refreshes; birth epoch of future */
	int64		period;			/* refresh period t, microseconds */
	int64		base_period;	/* the planned period: AIMD never goes longer */
	int64		retention;		/* microseconds */
	float8		target_fpp;
	int64		created_at;		/* TimestampTz */
	int64		resizes;		/* AIMD resizes so far */
	uint8		ring[FBF_MAX_FILTERS];	/* logical filter -> lane */
	int64		born_at[FBF_MAX_FILTERS];	/* by logical filter, window time */
	uint32		features;		/* FBF_FEATURE_*: all of them */
	uint32		nchains;		/* pending chains */
	int64		clock_at;		/* window time at the clock's anchor */
	int64		clock_boottime; /* CLOCK_BOOTTIME then, microseconds */
	int64		clock_wall;		/* wall clock then, TimestampTz */
	uint8		clock_boot[16]; /* kernel boot id then */
	int64		capped_warned_at;	/* window time of the last "at its cap"
									 * WARNING */
	BlockNumber part_start;		/* partition page 0 */
	BlockNumber split_start;	/* a split's 2P pages, or InvalidBlockNumber */
	uint32		split_next;		/* partitions below it are split (merged) */
	uint32		split_factor;	/* each split partition becomes this many */
	uint32		merge_factor;	/* or this many partitions become one */
	uint32		base_nparts;	/* partitions planned */
	uint32		overfull;		/* a future lane with more elements than
								 * this on one page means the rate outgrew
								 * the bits (window_bloom.c, derive_meta) */
	BlockNumber free_start;		/* a run of pages no partition uses, left */
	uint32		free_len;		/* by a split or merge, for the next one */
	int64		splits;			/* splits and merges so far */
	FbfLegacyFilters legacy;	/* a 1.0 window's filters, while checked */
	/* since filter = cuckoo: zero in every window written before it */
	uint32		filter;			/* FBF_FILTER_*: the partition pages' format */
	FbfCuckooShape cuckoo;		/* filter = cuckoo: the blocks' shape */
	/* since 1.2: zero in every window written before it (window_key.c) */
	FbfHashKey	key;			/* the secret identities are hashed under;
								 * zero: the public hash (no key yet) */
	int64		public_until;	/* window time until which the window may
								 * hold operations recorded under the
								 * public hash; FBF_PUBLIC_OPEN while some
								 * may still be on a chain */
	uint64		keyed_at;		/* a FullTransactionId that every entry
								 * recorded under the public hash precedes */
	/* since 1.3: zero in every window written before it (window_stream.c) */
	BlockNumber stream_start;	/* stream page 0 */
	uint32		stream_pages;	/* 0: no exact streams */
	uint64		stream_xid;		/* a FullTransactionId: entries of
								 * transactions that precede it may have
								 * been recorded without their annex,
								 * before the window had stream pages (0:
								 * none) */
	/* since 1.5: zero in every window written before it (window_split.c) */
	int64		pending_at[2];	/* operations on the chains when the future
								 * (0) and the present (1) were born: drained
								 * into them later, yet arrived before */
} FbfWindowMetaPageData;

/*
 * Fields that tests forge or read on disk, at their offsets in the page's
 * contents (FbfTest.pm's FBF_META_*, used by test/t/035_forged_metapage.pl,
 * 039_forged_stream_pages.pl and 064_refresh_counted_once.pl): the layout
 * is on disk, so these never move.
 * The offsets are those of 64-bit platforms (int64 aligned on 8 bytes).
 */
#if MAXIMUM_ALIGNOF == 8
StaticAssertDecl(offsetof(FbfWindowMetaPageData, nbits) == 8,
				 "the metapage's nbits moved");
StaticAssertDecl(offsetof(FbfWindowMetaPageData, stream_start) == 1232 &&
				 offsetof(FbfWindowMetaPageData, stream_pages) == 1236,
				 "the metapage's stream fields moved");
StaticAssertDecl(offsetof(FbfWindowMetaPageData, pending_at) == 1248,
				 "the metapage's pending_at moved");
#endif

/* public_until of a window keyed while public entries may be in flight */
#define FBF_PUBLIC_OPEN			PG_INT64_MAX

typedef FbfWindowMetaPageData *FbfWindowMetaPage;

#define FBF_META_CAPPED			0x0001	/* AIMD wanted to grow but a cap bit */
#define FBF_META_FIXED_PUBLIC	0x0002	/* the operations recorded before
										 * keyed_at (looked up until
										 * public_until) are hashed under
										 * fbf.fixed_window_keys' key, not
										 * the public hash (window_key.c) */

/*
 * What a window's pages carry, beyond the 1.0 format.  A window written by
 * 1.0 has none; windows of storage version 2 have them all.  The first
 * refresh by this version upgrades an older window (FbfWindowRefresh).
 */
#define FBF_FEATURE_CLOCK		0x0001	/* birth times are window time, and
										 * the clock anchor is set */
#define FBF_FEATURE_FULL_XIDS	0x0002	/* pending entries carry their xid's
										 * epoch */
#define FBF_FEATURE_KEYED_IDS	0x0004	/* keyed operations are recorded
										 * with their key in the identity */
#define FBF_FEATURES_ALL \
	(FBF_FEATURE_CLOCK | FBF_FEATURE_FULL_XIDS | FBF_FEATURE_KEYED_IDS)

typedef struct FbfWindowPageOpaqueData
{
	int64		stamp;			/* version 1 filter blocks: birth epoch of
								 * their filter; pending chain heads: the
								 * chain's floor, a
								 * FullTransactionId no entry on it precedes
								 * (0: empty, or not known) */
	uint64		count;			/* version 1 filter blocks: elements;
								 * pending chain heads: first spare overflow
								 * page (0: none) */
	BlockNumber next;			/* pending pages: next in the chain, or
								 * InvalidBlockNumber */
	uint16		unused;
	uint16		page_id;		/* FBF_PAGE_ID_* */
} FbfWindowPageOpaqueData;

typedef FbfWindowPageOpaqueData *FbfWindowPageOpaque;

#define FbfWindowPageGetOpaque(page) \
	((FbfWindowPageOpaque) PageGetSpecialPointer(page))

/*
 * An in-flight operation on a pending page.  The (sub)transaction that
 * applied it is (epoch, xid), a FullTransactionId, so its fate can never be
 * confused with another's across xid wraparound; windows written by 1.0 have
 * epoch 0 and lack FBF_FEATURE_FULL_XIDS (FbfEntryFullXid).
 */
typedef struct FbfPendingEntry
{
	TransactionId xid;			/* (sub)transaction that applied it */
	uint32		epoch;			/* its xid epoch */
	uint64		h1;				/* the operation's hash */
	uint64		h2;
} FbfPendingEntry;

/*
 * An operation numbered in a stream is followed on its page by an annex:
 * an entry whose xid is InvalidTransactionId (no operation's is), epoch
 * FBF_ANNEX_MARK, h1 the stream's id and h2 the seq.  The two are appended
 * in one record and removed together; readers of entries skip annexes
 * (FbfEntryIsAnnex), except the drain, which records a drained
 * operation's annex in its stream page (window_stream.c).
 */
#define FBF_ANNEX_MARK			0x5354524Du	/* "STRM" */

static inline bool
FbfEntryIsAnnex(const FbfPendingEntry *entry)
{
	return entry->xid == InvalidTransactionId && entry->epoch == FBF_ANNEX_MARK;
}

/* bytes usable for bits or entries on a page */
#define FBF_PAGE_CONTENT_BYTES \
	(BLCKSZ - MAXALIGN(SizeOfPageHeaderData) - MAXALIGN(sizeof(FbfWindowPageOpaqueData)))
#define FBF_BLOCK_MAX_BITS		((uint32) (FBF_PAGE_CONTENT_BYTES / 8) * 64)
#define FBF_SLICE_MAX_BITS \
	((uint32) ((FBF_PAGE_CONTENT_BYTES - sizeof(FbfSliceHeader)) / FBF_SLICE_WIDTH))
#define FBF_PENDING_CAPACITY \
	((int) (FBF_PAGE_CONTENT_BYTES / sizeof(FbfPendingEntry)))

/*
 * Filters a new counter's plan may use: every lane of a partition page.
 * Lanes cost memory whether used or not, and more, shorter-lived filters
 * need fewer bits each for the same target, so plans use them all.
 */
#define FBF_COUNTER_PLAN_MAX_FILTERS	FBF_SLICE_LANES

/* partitions per pending chain in a new window (window_build.c) */
#define FBF_PARTS_PER_CHAIN		8

/* pages in one pending chain, at most (all locked at once: with the
 * metapage, a drain's stream and partition pages, well under
 * MAX_SIMUL_LWLOCKS) */
#define FBF_MAX_PENDING_PAGES	128

/*
 * A pending chain's last fifth of pages is its reserve, kept for whom the
 * caller lets in (window_apply.c, find_room): it begins at this page.
 */
#define FBF_RESERVE_PAGES		(FBF_MAX_PENDING_PAGES / 5)
#define FBF_RESERVE_FROM		(FBF_MAX_PENDING_PAGES - FBF_RESERVE_PAGES)

/*
 * An operation drains its partition's chain first once the chain's oldest
 * entry is this many xids old, so that no entry gets near the commit log's
 * horizon even where nothing else drains (window_pending.c).
 */
#define FBF_PENDING_DRAIN_AGE	1000000

static inline BlockNumber
FbfPendingBlock(const FbfWindowMetaPageData *meta, uint32 chain)
{
	return 1 + chain;
}

/* the pending chain of an operation */
static inline uint32
FbfWindowChainOf(const FbfWindowMetaPageData *meta, const FbfHash *hash)
{
	return fbf_part(hash, meta->nchains);
}

/*
 * The partition page of an operation: its partition's, or, once that
 * partition is split, the one of the two new pages that holds it.
 */
static inline BlockNumber
FbfWindowPartBlock(const FbfWindowMetaPageData *meta, const FbfHash *hash)
{
	uint32		q;

	if (meta->merge_factor > 0)
	{
		q = fbf_part(hash, meta->nparts / meta->merge_factor);
		if (q < meta->split_next)
			return meta->split_start + q;
		return meta->part_start + fbf_part(hash, meta->nparts);
	}
	q = fbf_part(hash, meta->nparts);
	if (q < meta->split_next)
		return meta->split_start +
			fbf_part(hash, meta->split_factor * meta->nparts);
	return meta->part_start + q;
}

/*
 * The format of a window's partition pages, fixed when its table is
 * created (the option `filter`): bit-sliced lanes of a Forgetful Bloom
 * Filter, or a cuckoo window's buckets of fingerprints and epoch tags
 * (core/cwin_block.h, window_cuckoo.c).
 */
#define FBF_FILTER_BLOOM			0
#define FBF_FILTER_CUCKOO			1

/* the number of FBF_FILTER_* values, and a new window's by default */
#define FBF_FILTER_COUNT			2
#define FBF_FILTER_DEFAULT			FBF_FILTER_BLOOM

/* ---- page accessors ---- */

static inline FbfWindowMetaPage
FbfWindowPageGetMeta(Page page)
{
	return (FbfWindowMetaPage) PageGetContents(page);
}

static inline uint64 *
FbfWindowPageGetWords(Page page)
{
	return (uint64 *) PageGetContents(page);
}

/* the entries of a pending page; *n gets their number */
static inline FbfPendingEntry *
FbfWindowPageGetEntries(Page page, int *n)
{
	char	   *start = PageGetContents(page);

	*n = (int) ((((PageHeader) page)->pd_lower - (start - (char *) page)) /
				sizeof(FbfPendingEntry));
	return (FbfPendingEntry *) start;
}

static inline void
FbfWindowPageSetEntryCount(Page page, int n)
{
	((PageHeader) page)->pd_lower =
		PageGetContents(page) + n * sizeof(FbfPendingEntry) - (char *) page;
}

/* birth epoch that logical filter i's lane must carry to be current */
static inline int64
FbfWindowExpectedStamp(const FbfWindowMetaPageData *meta, int logical)
{
	return meta->epoch - logical;
}

/* a partition page's lane stamps and counts, and its words */
static inline FbfSliceHeader *
FbfSlicePageGetHeader(Page page)
{
	return (FbfSliceHeader *) PageGetContents(page);
}

static inline void *
FbfSlicePageGetWords(Page page)
{
	return PageGetContents(page) + MAXALIGN(sizeof(FbfSliceHeader));
}

/*
 * The lanes of a partition page that hold their live filter's current
 * bits, as a mask by lane; the others read as empty.
 */
static inline uint64
FbfSliceCurrentLanes(Page page, const FbfWindowMetaPageData *meta)
{
	const FbfSliceHeader *h = FbfSlicePageGetHeader(page);
	uint64		lanes = 0;
	int			i;

	for (i = 0; i < meta->nlive; i++)
	{
		if (h->stamp[meta->ring[i]] == FbfWindowExpectedStamp(meta, i))
			lanes |= UINT64CONST(1) << meta->ring[i];
	}
	return lanes;
}

/* a mask by lane as a mask by logical filter (bit i: live filter i) */
static inline uint64
FbfSliceLogicalMask(const FbfWindowMetaPageData *meta, uint64 lanes)
{
	uint64		mask = 0;
	int			i;

	for (i = 0; i < meta->nlive; i++)
		mask |= ((lanes >> meta->ring[i]) & 1) << i;
	return mask;
}

/* ---- window_legacy_meta.c: the metapage of storage version 1 ---- */

/*
 * The metapage of storage version 1 (fbf 1.0, and 1.1 before partition
 * pages): one block per filter and partition.  Read only to upgrade.
 */
typedef struct FbfWindowMetaV1Data
{
	uint32		magic;
	uint32		version;
	uint32		nbits;
	uint32		nparts;
	uint16		nhashes;
	uint16		nfilters;
	uint16		nlive;
	uint16		nslots;
	uint32		flags;
	uint32		shards;
	int64		epoch;
	int64		period;
	int64		base_period;
	int64		retention;
	float8		target_fpp;
	int64		created_at;
	int64		resizes;
	uint8		ring[FBF_MAX_FILTERS];
	int64		born_at[FBF_MAX_FILTERS];
	BlockNumber slot_start[FBF_MAX_FILTERS];
	uint32		features;
	uint32		reserved;
	int64		clock_at;
	int64		clock_boottime;
	int64		clock_wall;
	uint8		clock_boot[16];
	int64		legacy_until;
	int64		capped_warned_at;
} FbfWindowMetaV1Data;

extern void FbfWindowMetaFromV1(Page metapage, FbfWindowMetaPageData *meta);

#endif							/* FBF_WINDOW_PAGE_H */
