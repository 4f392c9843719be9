/*-------------------------------------------------------------------------
 *
 * fbf_stream.c
 *	  Exact streams: a page of slots, each a stream's highest seq and the
 *	  bitmap below it; answering an operation, recording one, and
 *	  evicting the least recently seen slot when the page is full
 *	  (fbf_stream.h has the rule that keeps "new" proven).
 *
 * A page holds a couple of hundred slots, searched in order: a lookup
 * reads a few kilobytes of one page the caller already holds, as cheap as
 * the probes of the partition page beside it.
 *
 * A log of recordings (fbf_stream_record_logged, fbf_stream_replay) names
 * each one relative to the page it is applied to, which its replay
 * starts from too: a live slot by its index and the seq by its distance
 * from the slot's highest, a stream without one by its id, so that an
 * in-order stream's operation costs two bytes, and so does one whose seq
 * is too far below the highest to change more than the slot's time (it is
 * logged as the highest, which changes that alone).  Its format:
 *
 *	slot index (one byte, below FBF_STREAM_LOG_FAR), zigzag(seq - high)
 *	FBF_STREAM_LOG_FAR, slot index (varint), zigzag(seq - high)
 *	FBF_STREAM_LOG_ID, id (8 bytes, little-endian), zigzag(seq)
 *
 * each zigzag a varint (fbf_le.h).
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#include "fbf_stream.h"

#include <string.h>

#include "fbf_le.h"

/* is `t` at least `horizon` before `now` (FBF_STREAM_ALWAYS always is)? */
static bool
old_enough(int64_t t, int64_t now, int64_t horizon)
{
	if (t == FBF_STREAM_ALWAYS)
		return true;
	if (t > now)
		return false;
	return (uint64_t) now - (uint64_t) t >= (uint64_t) horizon;
}

/* Begin an empty page of `nslots` slots, knowing everything since `since`. */
void
fbf_stream_page_init(FbfStreamPage *page, uint32_t nslots, int64_t since)
{
	memset(page, 0, sizeof(FbfStreamPage) + (size_t) nslots * sizeof(FbfStreamSlot));
	page->nslots = nslots;
	page->since = since;
	page->evicted_until = FBF_STREAM_ALWAYS;
}

/*
 * Forget every slot: what the window remembers from now on came partly
 * from somewhere that had no streams (a load, an upgrade), so nothing is
 * proven new until `since` is a horizon old.  The counts stay.
 */
void
fbf_stream_page_reset(FbfStreamPage *page, int64_t since)
{
	memset(page->slots, 0, (size_t) page->nslots * sizeof(FbfStreamSlot));
	page->nused = 0;
	page->since = since;
}

const FbfStreamSlot *
fbf_stream_find(const FbfStreamPage *page, uint64_t id)
{
	uint32_t	i;

	if (id == 0)
		return NULL;
	for (i = 0; i < page->nslots; i++)
	{
		if (page->slots[i].id == id)
			return &page->slots[i];
	}
	return NULL;
}

/* is a missing stream proven never to have been recorded within horizon? */
static bool
absence_proven(const FbfStreamPage *page, int64_t now, int64_t horizon)
{
	return old_enough(page->since, now, horizon) &&
		old_enough(page->evicted_until, now, horizon);
}

/*
 * What the page knows of operation `seq` of stream `id` at `now`: new,
 * seen, or not known (ask the filter).
 */
FbfStreamAnswer
fbf_stream_check(const FbfStreamPage *page, uint64_t id, int64_t seq,
				 int64_t now, int64_t horizon)
{
	const FbfStreamSlot *slot = fbf_stream_find(page, id);
	bool		complete;
	uint64_t	below;

	/* a slot last seen a horizon ago knows only what the window forgets */
	if (slot == NULL || old_enough(slot->seen, now, horizon))
		return absence_proven(page, now, horizon) ? FBF_STREAM_NEW : FBF_STREAM_ASK;

	complete = old_enough(slot->born, now, horizon);
	if (seq > slot->high)
		return complete ? FBF_STREAM_NEW : FBF_STREAM_ASK;
	if (seq == slot->high)
		return FBF_STREAM_SEEN;

	/* seq < high: the difference fits in 64 unsigned bits */
	below = (uint64_t) slot->high - (uint64_t) seq;
	if (below > FBF_STREAM_W)
		return FBF_STREAM_ASK;
	if (slot->bits & ((uint64_t) 1 << (below - 1)))
		return FBF_STREAM_SEEN;
	return complete ? FBF_STREAM_NEW : FBF_STREAM_ASK;
}

/*
 * The slot for a stream the page has none for: an empty one, or the least
 * recently seen one, evicted (its last time goes to evicted_until).
 */
static FbfStreamSlot *
take_slot(FbfStreamPage *page, int64_t now, int64_t horizon)
{
	FbfStreamSlot *victim = NULL;
	uint32_t	i;

	for (i = 0; i < page->nslots; i++)
	{
		FbfStreamSlot *s = &page->slots[i];

		if (s->id == 0)
		{
			page->nused++;
			return s;
		}
		if (victim == NULL || s->seen < victim->seen)
			victim = s;
	}
	if (victim == NULL)
		return NULL;			/* a page of no slots */
	if (old_enough(victim->seen, now, horizon))
		page->expired++;
	else
		page->evictions++;
	if (page->evicted_until == FBF_STREAM_ALWAYS ||
		victim->seen > page->evicted_until)
		page->evicted_until = victim->seen;
	return victim;
}

/*
 * Is `slot` the one fbf_stream_record(page, id, _, now, horizon) would
 * update in place: the page's slot of `id` (fbf_stream_find's), seen
 * within `horizon`?
 */
static bool
live(const FbfStreamPage *page, const FbfStreamSlot *slot, uint64_t id,
	 int64_t now, int64_t horizon)
{
	return fbf_stream_find(page, id) == slot && !old_enough(slot->seen, now, horizon);
}

/*
 * The index of the slot that fbf_stream_record(page, id, _, now, horizon)
 * would update in place: `id`'s slot if the page has one seen within
 * `horizon`; else -1 (the record takes a slot afresh).  For a log of
 * recordings that names a live slot by its index rather than its id.
 */
int
fbf_stream_slot_index(const FbfStreamPage *page, uint64_t id, int64_t now,
					  int64_t horizon)
{
	const FbfStreamSlot *slot = fbf_stream_find(page, id);

	if (slot == NULL || old_enough(slot->seen, now, horizon))
		return -1;
	return (int) (slot - page->slots);
}

/*
 * fbf_stream_record, given `slot`, what fbf_stream_find(page, id) returns:
 * so that a caller that looked the stream up already (a logged recording)
 * searches the page once.
 */
static void
record_in(FbfStreamPage *page, FbfStreamSlot *slot, uint64_t id, int64_t seq,
		  int64_t now, int64_t horizon)
{
	if (id == 0)
		return;
	if (slot == NULL || old_enough(slot->seen, now, horizon))
	{
		/* proven before the eviction: the victim is another stream */
		bool		proven = absence_proven(page, now, horizon);
		int64_t		born = now;

		/*
		 * Not proven: the slot knows what is recorded from now on, and what
		 * went before is at most as recent as evicted_until and since, which
		 * may be later than `now` (a caller that read its clock before
		 * another recorded and evicted this stream, or reset the page).
		 */
		if (!proven && page->evicted_until > born)
			born = page->evicted_until;
		if (!proven && page->since > born)
			born = page->since;

		/*
		 * A slot of this stream last seen a horizon ago is taken afresh:
		 * everything it recorded is past the horizon, as if it had expired.
		 */
		if (slot == NULL)
			slot = take_slot(page, now, horizon);
		if (slot == NULL)
			return;
		slot->id = id;
		slot->high = seq;
		slot->bits = 0;
		slot->seen = now;
		slot->born = proven ? FBF_STREAM_ALWAYS : born;
		return;
	}

	if (seq > slot->high)
	{
		uint64_t	up = (uint64_t) seq - (uint64_t) slot->high;

		if (up > FBF_STREAM_W)
			slot->bits = 0;
		else
		{
			/* the old highest becomes bit up - 1 */
			slot->bits = (up == FBF_STREAM_W ? 0 : slot->bits << up) |
				((uint64_t) 1 << (up - 1));
		}
		slot->high = seq;
	}
	else if (seq < slot->high)
	{
		uint64_t	below = (uint64_t) slot->high - (uint64_t) seq;

		if (below <= FBF_STREAM_W)
			slot->bits |= (uint64_t) 1 << (below - 1);
	}
	if (now > slot->seen)
		slot->seen = now;
}

/*
 * Record operation `seq` of stream `id`, known to have happened, at `now`.
 * A seq more than FBF_STREAM_W below the highest changes nothing but the
 * slot's time: the filter holds it.
 */
void
fbf_stream_record(FbfStreamPage *page, uint64_t id, int64_t seq,
				  int64_t now, int64_t horizon)
{
	record_in(page, (FbfStreamSlot *) fbf_stream_find(page, id), id, seq,
			  now, horizon);
}

/*
 * Is a page read from disk one of `nslots` slots that this code can
 * trust not to run off its end?  (Its answers are only as true as the
 * page, as every page's are.)
 */
bool
fbf_stream_page_valid(const FbfStreamPage *page, uint32_t nslots)
{
	return page->nslots == nslots && page->nused <= nslots;
}

/*
 * Record operation `seq` of stream `id` at `now` as fbf_stream_record
 * does, and write at `out` (FBF_STREAM_LOG_MAX bytes) how to replay it on
 * the page as it was; the bytes written.
 */
size_t
fbf_stream_record_logged(FbfStreamPage *page, uint64_t id, int64_t seq,
						 int64_t now, int64_t horizon, unsigned char *out)
{
	FbfStreamSlot *slot = (FbfStreamSlot *) fbf_stream_find(page, id);
	int			index = -1;
	size_t		n = 0;

	/* the live slot fbf_stream_slot_index names, found once */
	if (slot != NULL && !old_enough(slot->seen, now, horizon))
		index = (int) (slot - page->slots);
	if (index >= 0)
	{
		int64_t		high = page->slots[index].high;
		uint64_t	up = (uint64_t) seq - (uint64_t) high;

		/*
		 * A seq more than FBF_STREAM_W below the highest changes what the
		 * highest itself would (the slot's time alone): logged as that, in
		 * one byte rather than up to ten (a client whose seqs are random).
		 */
		if (seq < high && (uint64_t) high - (uint64_t) seq > FBF_STREAM_W)
			up = 0;

		if (index < FBF_STREAM_LOG_FAR)
			out[n++] = (unsigned char) index;
		else
		{
			out[n++] = FBF_STREAM_LOG_FAR;
			n += fbf_varint_write(out + n, (uint64_t) index);
		}
		n += fbf_varint_write(out + n, fbf_zigzag((int64_t) up));
	}
	else
	{
		out[n++] = FBF_STREAM_LOG_ID;
		fbf_le64_write(out + n, id);
		n += 8;
		n += fbf_varint_write(out + n, fbf_zigzag(seq));
	}
	record_in(page, slot, id, seq, now, horizon);
	return n;
}

/*
 * Decode the logged recording at `in` (`len` bytes left) into *op; its
 * length, or 0 if malformed.  Needs no page (for describing a log).
 */
size_t
fbf_stream_log_decode(const unsigned char *in, size_t len, FbfStreamLogOp *op)
{
	size_t		n = 1;
	unsigned	r;
	uint64_t	v;

	if (len < 1)
		return 0;
	if (in[0] < FBF_STREAM_LOG_FAR)
	{
		op->slot = in[0];
		op->id = 0;
	}
	else if (in[0] == FBF_STREAM_LOG_FAR)
	{
		/* only an index that the first byte cannot hold */
		r = fbf_varint_read(in + n, len - n, &v);
		if (r == 0 || v < FBF_STREAM_LOG_FAR || v > INT32_MAX)
			return 0;
		op->slot = (int32_t) v;
		op->id = 0;
		n += r;
	}
	else
	{
		if (len - n < 8)
			return 0;
		op->slot = -1;
		op->id = fbf_le64_read(in + n);
		n += 8;
	}
	r = fbf_varint_read(in + n, len - n, &v);
	if (r == 0)
		return 0;
	op->seq = fbf_unzigzag(v);
	return n + r;
}

/*
 * Replay at `now` the logged recording at `in` (`len` bytes left) on the
 * page it was logged from, as it was then; its length, or 0 (nothing
 * changed) if it is malformed or names a slot the page does not have live,
 * or a stream it has a live slot for: the page is not the one logged.
 */
size_t
fbf_stream_replay(FbfStreamPage *page, const unsigned char *in, size_t len,
				  int64_t now, int64_t horizon)
{
	FbfStreamLogOp op;
	size_t		n = fbf_stream_log_decode(in, len, &op);
	FbfStreamSlot *slot;
	uint64_t	id;
	int64_t		seq;

	if (n == 0)
		return 0;
	if (op.slot >= 0)
	{
		if ((uint32_t) op.slot >= page->nslots)
			return 0;
		slot = &page->slots[op.slot];
		id = slot->id;
		/* the stream's live slot (fbf_stream_slot_index), this one */
		if (id == 0 || !live(page, slot, id, now, horizon))
			return 0;
		seq = (int64_t) ((uint64_t) slot->high + (uint64_t) op.seq);
	}
	else
	{
		id = op.id;
		slot = (FbfStreamSlot *) fbf_stream_find(page, id);
		/* find's own answer: live unless seen a horizon ago */
		if (slot != NULL && !old_enough(slot->seen, now, horizon))
			return 0;
		seq = op.seq;
	}
	record_in(page, slot, id, seq, now, horizon);
	return n;
}
