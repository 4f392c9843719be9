/*-------------------------------------------------------------------------
 *
 * fbf_stream_snap.c
 *	  The streams of a window's snapshot (fbf_stream_snap.h has the
 *	  format): encoding a run of stream pages' live slots, validating a
 *	  section of untrusted input, and putting one into a stream page,
 *	  adopted or merged.
 *
 * The merge rule.  A stream page (fbf_stream.h) claims three things: a
 * slot knows every operation of its stream recorded since its `born`; a
 * stream without a slot recorded nothing since the page's `since` but in
 * a slot since evicted; an evicted slot was last seen at `evicted_until`
 * at the latest.  Two sides, the page and the section, each claim these
 * about the operations they recorded; the window that results remembers
 * the operations of both.  So for each stream:
 *
 *	- both sides have a live slot: the union of seqs (the higher `high`,
 *	  the bitmaps aligned to it and ORed), seen the later, complete from
 *	  the later of the two `born`s (each side is exact only from its own);
 *	- one side has it: its slot, complete from the later of its `born`
 *	  and the other side's `since` and `evicted_until`, before which the
 *	  other side may have recorded operations of it that it no longer
 *	  knows (for the section: the page the stream had there);
 *	- the page begins (`since`) at the later of the two sides', and its
 *	  evictions reach the later of the two.
 *
 * Adopting is merging into a side that recorded nothing: the page takes
 * the section's `since` and `evicted_until`, its slots as they are.  A
 * slot that does not fit goes as an eviction would: the least recently
 * seen of the page's and the incoming one is dropped and raises
 * `evicted_until`.  Slots a horizon old are dropped the same way (they
 * know only what the window forgets).
 *
 * When the run has another number of pages than the section's, a target
 * page takes the streams whose ids choose it, from the source pages whose
 * ids overlap it; their `since` and `evicted_until` count at the latest.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#include "fbf_stream_snap.h"

#include <stdlib.h>
#include <string.h>

#include "fbf_interrupt.h"
#include "fbf_le.h"

const unsigned char fbf_streams_magic[4] = {'F', 'B', 'S', FBF_STREAMS_VERSION};

/* is `t` at least `horizon` before `now` (as fbf_stream.c's) */
static bool
old_enough(int64_t t, int64_t now, int64_t horizon)
{
	if (t == FBF_STREAM_ALWAYS)
		return true;
	if (t > now)
		return false;
	return (uint64_t) now - (uint64_t) t >= (uint64_t) horizon;
}

static inline int64_t
later(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* ---- encoding ---- */

static uint32_t
live_slots(const FbfStreamPage *page, int64_t now, int64_t horizon)
{
	uint32_t	n = 0;
	uint32_t	i;

	for (i = 0; i < page->nslots; i++)
	{
		if (page->slots[i].id != 0 &&
			!old_enough(page->slots[i].seen, now, horizon))
			n++;
	}
	return n;
}

size_t
fbf_streams_encoded_size(const FbfStreamPage *const *pages, uint32_t npages,
						 int64_t now, int64_t horizon)
{
	uint64_t	nslots = 0;
	uint32_t	p;

	for (p = 0; p < npages; p++)
		nslots += live_slots(pages[p], now, horizon);
	return fbf_streams_size(npages, nslots);
}

static int
slot_bytes_cmp(const void *a, const void *b)
{
	uint64_t	x = fbf_le64_read(a);
	uint64_t	y = fbf_le64_read(b);

	return x < y ? -1 : x > y;
}

static void
write_slot(unsigned char *out, const FbfStreamSlot *s)
{
	fbf_le64_write(out, s->id);
	fbf_le64_write(out + 8, (uint64_t) s->high);
	fbf_le64_write(out + 16, s->bits);
	fbf_le64_write(out + 24, (uint64_t) s->seen);
	fbf_le64_write(out + 32, (uint64_t) s->born);
}

static void
read_slot(const unsigned char *in, FbfStreamSlot *s)
{
	s->id = fbf_le64_read(in);
	s->high = (int64_t) fbf_le64_read(in + 8);
	s->bits = fbf_le64_read(in + 16);
	s->seen = (int64_t) fbf_le64_read(in + 24);
	s->born = (int64_t) fbf_le64_read(in + 32);
}

void
fbf_streams_encode(const FbfStreamPage *const *pages, uint32_t npages,
				   int64_t now, int64_t horizon, unsigned char *out)
{
	unsigned char *slots = out + FBF_STREAMS_HEADER +
		(size_t) npages * FBF_STREAMS_PAGE_BYTES;
	uint64_t	total = 0;
	uint32_t	p;

	memcpy(out, fbf_streams_magic, 4);
	fbf_le32_write(out + 4, npages);
	fbf_le32_write(out + 12, 0);
	for (p = 0; p < npages; p++)
	{
		const FbfStreamPage *page = pages[p];
		unsigned char *hdr = out + FBF_STREAMS_HEADER +
			(size_t) p * FBF_STREAMS_PAGE_BYTES;
		unsigned char *first = slots;
		int64_t		evicted = page->evicted_until;
		uint32_t	n = 0;
		uint32_t	i;

		for (i = 0; i < page->nslots; i++)
		{
			const FbfStreamSlot *s = &page->slots[i];

			if (s->id == 0)
				continue;
			if (old_enough(s->seen, now, horizon))
			{
				/* left behind as an eviction: it knows what is forgotten */
				evicted = later(evicted, s->seen);
				continue;
			}
			write_slot(slots, s);
			slots += FBF_STREAMS_SLOT_BYTES;
			n++;
		}
		/* by id, so that a reader finds a stream by bisection */
		qsort(first, n, FBF_STREAMS_SLOT_BYTES, slot_bytes_cmp);
		fbf_le64_write(hdr, (uint64_t) page->since);
		fbf_le64_write(hdr + 8, (uint64_t) evicted);
		fbf_le32_write(hdr + 16, n);
		fbf_le32_write(hdr + 20, 0);
		total += n;
		if (p % FBF_INTERRUPT_EVERY == FBF_INTERRUPT_EVERY - 1)
			fbf_check_interrupts();
	}
	fbf_le32_write(out + 8, (uint32_t) total);
}

/* ---- validation ---- */

uint32_t
fbf_streams_npages(const unsigned char *buf)
{
	return fbf_le32_read(buf + 4);
}

uint64_t
fbf_streams_nslots(const unsigned char *buf)
{
	return fbf_le32_read(buf + 8);
}

bool
fbf_streams_validate(const unsigned char *buf, size_t len, bool contents,
					 const char **why)
{
	uint32_t	npages;
	uint64_t	nslots;
	uint64_t	counted = 0;
	const unsigned char *slot;
	uint32_t	p;

	if (len < FBF_STREAMS_HEADER || memcmp(buf, fbf_streams_magic, 3) != 0)
	{
		*why = "The value's streams do not start with their magic bytes.";
		return false;
	}
	if (buf[3] != FBF_STREAMS_VERSION)
	{
		*why = "The version of the value's streams is not supported.";
		return false;
	}
	npages = fbf_streams_npages(buf);
	nslots = fbf_streams_nslots(buf);
	if (npages == 0 || npages > FBF_STREAMS_SECTION_MAX_PAGES)
	{
		*why = "The value's streams have a number of pages out of range.";
		return false;
	}
	if (fbf_le32_read(buf + 12) != 0)
	{
		*why = "Reserved bytes of the value's streams are set.";
		return false;
	}
	/* npages < 2^24 and nslots < 2^32: no overflow */
	if (len != fbf_streams_size(npages, nslots))
	{
		*why = "The length of the value's streams does not match their counts.";
		return false;
	}
	if (!contents)
		return true;

	slot = buf + FBF_STREAMS_HEADER + (size_t) npages * FBF_STREAMS_PAGE_BYTES;
	for (p = 0; p < npages; p++)
	{
		const unsigned char *hdr = buf + FBF_STREAMS_HEADER +
			(size_t) p * FBF_STREAMS_PAGE_BYTES;
		uint32_t	n = fbf_le32_read(hdr + 16);
		uint64_t	prev = 0;
		uint32_t	i;

		if (fbf_le32_read(hdr + 20) != 0)
		{
			*why = "Reserved bytes of the value's streams are set.";
			return false;
		}
		if (n > nslots - counted)
		{
			*why = "The slots of the value's stream pages add up to more than it holds.";
			return false;
		}
		for (i = 0; i < n; i++, slot += FBF_STREAMS_SLOT_BYTES)
		{
			uint64_t	id = fbf_le64_read(slot);

			if (id == 0 || id <= prev)
			{
				*why = "The slots of a stream page of the value are not in ascending order of their non-zero ids.";
				return false;
			}
			if (fbf_streams_page_of(id, npages) != p)
			{
				*why = "A stream of the value is on a page its id does not choose.";
				return false;
			}
			prev = id;
		}
		counted += n;
		if (p % FBF_INTERRUPT_EVERY == FBF_INTERRUPT_EVERY - 1)
			fbf_check_interrupts();
	}
	if (counted != nslots)
	{
		*why = "The slots of the value's stream pages add up to less than it holds.";
		return false;
	}
	return true;
}

/* ---- putting a section into a page ---- */

static int64_t
map_time(const FbfStreamsTimeMap *map, int64_t t)
{
	int64_t		v;

	if (t == FBF_STREAM_ALWAYS)
		return t;
	/* saturate rather than wrap: a later time claims less */
	if (__builtin_add_overflow(t, map->shift, &v) ||
		__builtin_add_overflow(v, map->slack, &v))
		return map->now;
	return v < map->now ? v : map->now;
}

/* a section page's header fields, mapped */
static void
section_page(const unsigned char *buf, uint32_t p, const FbfStreamsTimeMap *map,
			 int64_t *since, int64_t *evicted, uint32_t *n)
{
	const unsigned char *hdr = buf + FBF_STREAMS_HEADER +
		(size_t) p * FBF_STREAMS_PAGE_BYTES;

	*since = map_time(map, (int64_t) fbf_le64_read(hdr));
	*evicted = map_time(map, (int64_t) fbf_le64_read(hdr + 8));
	*n = fbf_le32_read(hdr + 16);
}

void
fbf_streams_index(const unsigned char *buf, uint32_t *first)
{
	uint32_t	npages = fbf_streams_npages(buf);
	uint32_t	p;

	first[0] = 0;
	for (p = 0; p < npages; p++)
		first[p + 1] = first[p] +
			fbf_le32_read(buf + FBF_STREAMS_HEADER +
						  (size_t) p * FBF_STREAMS_PAGE_BYTES + 16);
}

/* the first slot of section page p */
static const unsigned char *
section_slots(const unsigned char *buf, const uint32_t *first, uint32_t p)
{
	return buf + FBF_STREAMS_HEADER +
		(size_t) fbf_streams_npages(buf) * FBF_STREAMS_PAGE_BYTES +
		(size_t) first[p] * FBF_STREAMS_SLOT_BYTES;
}

/* Does section page p (its n slots at `slots`) hold stream id? */
static bool
section_has(const unsigned char *slots, uint32_t n, uint64_t id)
{
	uint32_t	lo = 0;
	uint32_t	hi = n;

	while (lo < hi)
	{
		uint32_t	mid = lo + (hi - lo) / 2;
		uint64_t	x = fbf_le64_read(slots + (size_t) mid * FBF_STREAMS_SLOT_BYTES);

		if (x == id)
			return true;
		if (x < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* s's seqs ({high} and its bitmap) as a bitmap below `high` >= s->high */
static uint64_t
bits_below(const FbfStreamSlot *s, int64_t high)
{
	uint64_t	up = (uint64_t) high - (uint64_t) s->high;

	if (up == 0)
		return s->bits;
	if (up > FBF_STREAM_W)
		return 0;
	return (up == FBF_STREAM_W ? 0 : s->bits << up) | ((uint64_t) 1 << (up - 1));
}

/* fold slot s (of the other side) into d: the union, exact from the later */
static void
fold(FbfStreamSlot *d, const FbfStreamSlot *s)
{
	int64_t		high = later(d->high, s->high);

	d->bits = bits_below(d, high) | bits_below(s, high);
	d->high = high;
	d->seen = later(d->seen, s->seen);
	d->born = later(d->born, s->born);
}

/* drop slot s of the page as an eviction (nused is counted at the end) */
static void
drop_slot(FbfStreamPage *page, FbfStreamSlot *s)
{
	page->evicted_until = later(page->evicted_until, s->seen);
	memset(s, 0, sizeof(*s));
}

/* put s, a stream the page has no slot for, in the page, or drop it */
static void
place(FbfStreamPage *page, const FbfStreamSlot *s)
{
	FbfStreamSlot *victim = NULL;
	uint32_t	i;

	for (i = 0; i < page->nslots; i++)
	{
		FbfStreamSlot *x = &page->slots[i];

		if (x->id == 0)
		{
			*x = *s;
			return;
		}
		if (victim == NULL || x->seen < victim->seen)
			victim = x;
	}
	page->evictions++;
	if (victim == NULL || victim->seen >= s->seen)
	{
		/* the incoming one is the least recently seen: it goes */
		page->evicted_until = later(page->evicted_until, s->seen);
		return;
	}
	drop_slot(page, victim);
	*victim = *s;
}

void
fbf_streams_into_page(FbfStreamPage *page, const unsigned char *buf,
					  const uint32_t *first, uint32_t target, uint32_t npages, bool adopt,
					  const FbfStreamsTimeMap *map, int64_t now,
					  int64_t horizon)
{
	uint32_t	snpages = fbf_streams_npages(buf);
	uint64_t	lo_hi;
	uint64_t	hi_hi;
	uint32_t	s_lo;
	uint32_t	s_hi;
	uint32_t	sp;
	int64_t		src_since = FBF_STREAM_ALWAYS;
	int64_t		src_evicted = FBF_STREAM_ALWAYS;
	int64_t		dst_since;
	int64_t		dst_evicted;
	uint32_t	i;

	/*
	 * The high 32 bits of the ids that choose page `target` of npages:
	 * from ceil(target * 2^32 / npages) to ceil((target + 1) * 2^32 /
	 * npages) - 1; the section's pages they fall in, s_lo .. s_hi.
	 */
	lo_hi = (((uint64_t) target << 32) + npages - 1) / npages;
	hi_hi = ((((uint64_t) target + 1) << 32) + npages - 1) / npages - 1;
	s_lo = fbf_streams_page_of(lo_hi << 32, snpages);
	s_hi = fbf_streams_page_of(hi_hi << 32, snpages);
	for (sp = s_lo; sp <= s_hi; sp++)
	{
		int64_t		since;
		int64_t		evicted;
		uint32_t	n;

		section_page(buf, sp, map, &since, &evicted, &n);
		src_since = later(src_since, since);
		src_evicted = later(src_evicted, evicted);
	}

	if (adopt)
	{
		/* a side that recorded nothing: absence proven, every slot free */
		memset(page->slots, 0, (size_t) page->nslots * sizeof(FbfStreamSlot));
		page->nused = 0;
		page->since = FBF_STREAM_ALWAYS;
		page->evicted_until = FBF_STREAM_ALWAYS;
	}
	dst_since = page->since;
	dst_evicted = page->evicted_until;

	/*
	 * The page's own slots: a horizon old, dropped; a stream the section
	 * has no slot for is exact only from when the section's page of it
	 * began and its evictions ended.
	 */
	for (i = 0; i < page->nslots; i++)
	{
		FbfStreamSlot *d = &page->slots[i];
		int64_t		since;
		int64_t		evicted;
		uint32_t	n;

		if (d->id == 0)
			continue;
		if (old_enough(d->seen, now, horizon))
		{
			drop_slot(page, d);
			continue;
		}
		sp = fbf_streams_page_of(d->id, snpages);
		section_page(buf, sp, map, &since, &evicted, &n);
		if (!section_has(section_slots(buf, first, sp), n, d->id))
			d->born = later(d->born, later(since, evicted));
	}
	page->since = later(dst_since, src_since);
	page->evicted_until = later(page->evicted_until, src_evicted);

	/* the section's streams of this page: folded in, or placed */
	for (sp = s_lo; sp <= s_hi; sp++)
	{
		const unsigned char *slot = section_slots(buf, first, sp);
		int64_t		since;
		int64_t		evicted;
		uint32_t	n;
		uint32_t	k;

		section_page(buf, sp, map, &since, &evicted, &n);
		for (k = 0; k < n; k++, slot += FBF_STREAMS_SLOT_BYTES)
		{
			FbfStreamSlot s;
			FbfStreamSlot *d;

			read_slot(slot, &s);
			if (fbf_streams_page_of(s.id, npages) != target)
				continue;
			s.seen = map_time(map, s.seen);
			s.born = map_time(map, s.born);
			if (old_enough(s.seen, now, horizon))
			{
				page->evicted_until = later(page->evicted_until, s.seen);
				continue;
			}
			d = (FbfStreamSlot *) fbf_stream_find(page, s.id);
			if (d != NULL)
				fold(d, &s);
			else
			{
				s.born = later(s.born, later(dst_since, dst_evicted));
				place(page, &s);
			}
			if (k % FBF_INTERRUPT_EVERY == FBF_INTERRUPT_EVERY - 1)
				fbf_check_interrupts();
		}
	}

	/* what the slots hold, whatever the page said before */
	page->nused = 0;
	for (i = 0; i < page->nslots; i++)
		page->nused += page->slots[i].id != 0;
}
