/*-------------------------------------------------------------------------
 *
 * fbf_stream.h
 *	  Exact streams: for each stream (a counter's key and client id) the
 *	  highest seq recorded and a bitmap of the FBF_STREAM_W seqs below it,
 *	  as IPsec's anti-replay window keeps them, in a fixed array of slots
 *	  (one page of the window; docs/design.md, "Exact streams").
 *
 * An operation of a stream is answered exactly when its slot knows it:
 * above the highest seq, new; the highest, or a set bit, seen; a clear bit,
 * new.  Everything else is asked of the filter (FBF_STREAM_ASK): a seq
 * below the bitmap, a stream whose slot is missing and whose absence is
 * not proven, a slot too young to know its stream's past.  The filter still
 * records every operation, so what the streams cannot answer the window
 * answers as it did without them.
 *
 * "Proven" is the one rule everything here keeps: a slot says "new" only
 * for an operation no operation recorded within `horizon` can be.
 *
 *	- A page knows every operation of its streams recorded since `since`
 *	  (the caller sets it when the page begins, or when what the window
 *	  remembers came from somewhere without streams: an upgrade, a load).
 *	- A slot evicted to make room leaves its last time in `evicted_until`;
 *	  a missing stream is new only if both are at least `horizon` old.
 *	- A slot made when that was not proven knows only what it recorded
 *	  since `born`; it answers "new" once `born` is `horizon` old.
 *	- A slot last seen `horizon` ago knows only operations the window
 *	  forgets: it answers as a missing stream would, and the stream's next
 *	  operation takes it afresh (a stream forgets as the filter does).
 *
 * Times are in one unit of the caller's choosing (window time,
 * microseconds), `horizon` at least the retention.  Slots record
 * operations when they are known to have happened (the window: when a
 * committed operation is drained), so nothing here is ever taken back.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_STREAM_H
#define FBF_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* seqs below the highest that a slot answers exactly */
#define FBF_STREAM_W			64

/* a time before every other: "always" for since and born */
#define FBF_STREAM_ALWAYS		INT64_MIN

/* One stream's state: 40 bytes. */
typedef struct FbfStreamSlot
{
	uint64_t	id;				/* the stream's hash; 0: an empty slot */
	int64_t		high;			/* the highest seq recorded */
	uint64_t	bits;			/* bit i: seq high - 1 - i recorded */
	int64_t		seen;			/* when the slot last recorded one */
	int64_t		born;			/* the slot knows every operation of its
								 * stream recorded since: FBF_STREAM_ALWAYS,
								 * or when it was made */
} FbfStreamSlot;

/* An array of slots and what its evictions leave (a stream page's body). */
typedef struct FbfStreamPage
{
	int64_t		since;			/* every operation of these streams
								 * recorded since is in the slots, or was
								 * in one evicted */
	int64_t		evicted_until;	/* the latest `seen` of an evicted slot */
	uint64_t	evictions;		/* slots evicted within their horizon */
	uint64_t	expired;		/* slots reused after it */
	uint32_t	nslots;			/* capacity */
	uint32_t	nused;			/* slots with an id */
	FbfStreamSlot slots[];
} FbfStreamPage;

typedef enum FbfStreamAnswer
{
	FBF_STREAM_NEW,				/* never recorded: apply it */
	FBF_STREAM_SEEN,			/* recorded: a duplicate */
	FBF_STREAM_ASK				/* not known here: ask the filter */
} FbfStreamAnswer;

/* the slots that fit in `bytes` bytes, header included */
static inline uint32_t
fbf_stream_capacity(size_t bytes)
{
	if (bytes < sizeof(FbfStreamPage))
		return 0;
	return (uint32_t) ((bytes - sizeof(FbfStreamPage)) / sizeof(FbfStreamSlot));
}

/* 0 marks an empty slot: a stream's id is never 0 */
static inline uint64_t
fbf_stream_id(uint64_t hash)
{
	return hash == 0 ? 1 : hash;
}

extern void fbf_stream_page_init(FbfStreamPage *page, uint32_t nslots,
								 int64_t since);
extern void fbf_stream_page_reset(FbfStreamPage *page, int64_t since);
extern const FbfStreamSlot *fbf_stream_find(const FbfStreamPage *page,
											uint64_t id);
extern FbfStreamAnswer fbf_stream_check(const FbfStreamPage *page,
										uint64_t id, int64_t seq,
										int64_t now, int64_t horizon);
extern int	fbf_stream_slot_index(const FbfStreamPage *page, uint64_t id,
								  int64_t now, int64_t horizon);
extern void fbf_stream_record(FbfStreamPage *page, uint64_t id, int64_t seq,
							  int64_t now, int64_t horizon);
extern bool fbf_stream_page_valid(const FbfStreamPage *page, uint32_t nslots);

/*
 * A logged recording's first byte (fbf_stream.c has the format): below
 * FBF_STREAM_LOG_FAR the index of a live slot, or one of these.
 */
#define FBF_STREAM_LOG_FAR		0xFE	/* a live slot, its index follows */
#define FBF_STREAM_LOG_ID		0xFF	/* a stream without one, by its id */

/* the longest logged recording: a tag, an index or id, a seq */
#define FBF_STREAM_LOG_MAX		(1 + 10 + 10)

typedef struct FbfStreamLogOp
{
	int32_t		slot;			/* the slot's index; -1: by id */
	uint64_t	id;				/* the stream (by id) */
	int64_t		seq;			/* by slot: seq - the slot's highest */
} FbfStreamLogOp;

extern size_t fbf_stream_record_logged(FbfStreamPage *page, uint64_t id,
									   int64_t seq, int64_t now,
									   int64_t horizon, unsigned char *out);
extern size_t fbf_stream_log_decode(const unsigned char *in, size_t len,
									FbfStreamLogOp *op);
extern size_t fbf_stream_replay(FbfStreamPage *page, const unsigned char *in,
								size_t len, int64_t now, int64_t horizon);

#endif							/* FBF_STREAM_H */
