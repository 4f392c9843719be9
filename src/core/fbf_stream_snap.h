/*-------------------------------------------------------------------------
 *
 * fbf_stream_snap.h
 *	  The streams of a window's snapshot: what its stream pages know
 *	  (core/fbf_stream.h), carried by the `fbf` value so that a load, a
 *	  restore or a Citus shard move or split keeps in-order clients exact
 *	  instead of forgetting every stream (docs/design.md, "Exact streams
 *	  in snapshots").
 *
 * The section is its own versioned little-endian form, the same in memory
 * (after the value's payload) and in the portable form (docs/fbf-format.md):
 *
 *	offset	size	field
 *	0		4		magic "FBS" and the section's version (1)
 *	4		4		npages: the stream pages it was read from (1..2^24)
 *	8		4		nslots: the live slots it holds, all pages together
 *	12		4		reserved (0)
 *	16		24 * npages	per page: since (int64), evicted_until (int64),
 *					the page's live slots (uint32), reserved (uint32, 0)
 *	...		40 * nslots	the slots, page by page, each page's by id
 *					ascending: id, high, bits, seen, born (8 bytes each)
 *
 * A slot belongs to the page its id chooses among npages (fbf_streams_page
 * _of, the window's FbfStreamBlock), so the section can be re-placed into a
 * run of another size.  Times are the caller's (a window writes wall-clock
 * microseconds); FBF_STREAM_ALWAYS stays itself.
 *
 * Putting a section into a page (fbf_streams_into_page) keeps the one
 * rule of the streams: a slot answers "new" only when that is proven.  For
 * each stream the page's slot and the section's are folded into one that
 * knows the union, complete only from the later of the two times each side
 * has been complete about it: a side without a slot for the stream is
 * complete about it only from that side's `since` and `evicted_until`.
 * Slots that do not fit are dropped as evictions (their last time raises
 * `evicted_until`), never half kept.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_STREAM_SNAP_H
#define FBF_STREAM_SNAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fbf_stream.h"

#define FBF_STREAMS_VERSION		1
#define FBF_STREAMS_HEADER		16
#define FBF_STREAMS_PAGE_BYTES	24
#define FBF_STREAMS_SLOT_BYTES	40
#define FBF_STREAMS_SECTION_MAX_PAGES	(UINT32_C(1) << 24)

/* the four bytes a section starts with: its magic and version */
extern const unsigned char fbf_streams_magic[4];

/* the page among npages that stream `id` belongs to (FbfStreamBlock) */
static inline uint32_t
fbf_streams_page_of(uint64_t id, uint32_t npages)
{
	return (uint32_t) (((id >> 32) * (uint64_t) npages) >> 32);
}

/* the bytes of a section of npages pages and nslots slots */
static inline size_t
fbf_streams_size(uint32_t npages, uint64_t nslots)
{
	return FBF_STREAMS_HEADER + (size_t) npages * FBF_STREAMS_PAGE_BYTES +
		(size_t) nslots * FBF_STREAMS_SLOT_BYTES;
}

/*
 * The section of `npages` pages (page i the window's i-th stream page, in
 * the caller's times), as they are at `now`: the live slots only (a slot
 * last seen a horizon ago knows only what the window forgets, and raises
 * its page's evicted_until instead, as an eviction would).  The pages are
 * not changed.  fbf_streams_encoded_size first, then fbf_streams_encode
 * into that many bytes.
 */
extern size_t fbf_streams_encoded_size(const FbfStreamPage *const *pages,
									   uint32_t npages, int64_t now,
									   int64_t horizon);
extern void fbf_streams_encode(const FbfStreamPage *const *pages,
							   uint32_t npages, int64_t now, int64_t horizon,
							   unsigned char *out);

/*
 * Is buf[0 .. len) a sound section: O(1) the header, the length; with
 * `contents`, O(len) too: each page's count adding up, every slot's id
 * non-zero, on its page and in ascending order?  *why, on failure, is a
 * sentence fit for errdetail.
 */
extern bool fbf_streams_validate(const unsigned char *buf, size_t len,
								 bool contents, const char **why);

/* the header's counts of a section validate accepted */
extern uint32_t fbf_streams_npages(const unsigned char *buf);
extern uint64_t fbf_streams_nslots(const unsigned char *buf);

/*
 * Where each page's slots begin, counted in slots: first[p] for page p of
 * a validated section, first[npages] the total (npages + 1 entries).
 */
extern void fbf_streams_index(const unsigned char *buf, uint32_t *first);

/*
 * How a section's times map to the page's: t + shift + slack, at most
 * `now` (a section's time ahead of the page's clock counts as now), and
 * FBF_STREAM_ALWAYS as itself.  The slack makes every time later, which
 * claims less (a slot complete later, an eviction or a page's beginning
 * later), to cover the imprecision of converting between clocks.
 */
typedef struct FbfStreamsTimeMap
{
	int64_t		shift;
	int64_t		slack;			/* >= 0 */
	int64_t		now;
} FbfStreamsTimeMap;

/*
 * Put the section's streams of page `target` of a run of `npages` into
 * `page` (of page->nslots slots), at `now` and `horizon` (the page's
 * times).  `adopt`: the page is taken as knowing nothing that matters (the
 * window it belongs to remembers only what the section's came with: an
 * adoption), so it becomes the section's alone; else the two are merged
 * (a snapshot merged into a window that remembers operations of its own).
 * The section was validated with its contents; `first` is its
 * fbf_streams_index.
 */
extern void fbf_streams_into_page(FbfStreamPage *page, const unsigned char *buf,
								  const uint32_t *first, uint32_t target, uint32_t npages,
								  bool adopt, const FbfStreamsTimeMap *map,
								  int64_t now, int64_t horizon);

#endif							/* FBF_STREAM_SNAP_H */
