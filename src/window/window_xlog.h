/*-------------------------------------------------------------------------
 *
 * window_xlog.h
 *	  The window's compact WAL records (window_xlog.c): their layout, and
 *	  the changes they make, shared by the primary and redo.  Inside
 *	  src/window only.
 *
 * Lock order: src/window/README.md, "Lock definitions".  A change is made
 * and logged with its pages exclusively locked; redo locks them alike.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_WINDOW_XLOG_H
#define FBF_WINDOW_XLOG_H

#include "access/xlogreader.h"

#include "core/fbf_le.h"
#include "window/window_int.h"

/*
 * XLOG_FBF_PENDING_ADD, written by 1.4 (now PENDING_OPS), replayed still:
 * block 0's data, then, when its flags say
 * FBF_PENDING_ADD_ANNEX (an operation numbered in a stream), its annex's
 * stream (8 bytes, little-endian) and seq (a zigzag varint, core/fbf_le.h),
 * which end the data.
 */
typedef struct xl_fbf_pending_add
{
	FbfPendingEntry entry;
	uint8		flags;			/* FBF_PENDING_ADD_* */
} xl_fbf_pending_add;

#define SizeOfFbfPendingAdd	(offsetof(xl_fbf_pending_add, flags) + sizeof(uint8))

#define FBF_PENDING_ADD_FLOOR	0x01	/* the entry's xid is the chain's new
										 * floor */
#define FBF_PENDING_ADD_ANNEX	0x02	/* an annex follows */

/*
 * XLOG_FBF_PENDING_ADDS, a run of one call's operations appended to one
 * pending page: block 0's data an xl_fbf_pending_adds, then each
 * operation: its h1 and h2 (16 bytes, little-endian), a byte of
 * FBF_PENDING_OP_* flags, and, numbered in a stream, its annex's stream
 * (8 bytes, left out when it is the previous annex's) and seq (a zigzag
 * varint: its difference from the previous annex's seq in the same
 * stream, else the seq).  Every entry is of one (sub)transaction.
 */
typedef struct xl_fbf_pending_adds
{
	TransactionId xid;			/* the entries' (sub)transaction */
	uint32		epoch;			/* its epoch */
	uint16		n;				/* operations */
	uint8		flags;			/* FBF_PENDING_ADD_FLOOR or 0 */
} xl_fbf_pending_adds;

#define SizeOfFbfPendingAdds	(offsetof(xl_fbf_pending_adds, flags) + sizeof(uint8))

#define FBF_PENDING_OP_ANNEX		0x01	/* an annex follows the entry */
#define FBF_PENDING_OP_SAME_STREAM	0x02	/* of the previous annex's stream */
#define FBF_PENDING_OP_FLOOR		0x04	/* PENDING_OPS, first operation
											 * only: the chain's new floor */

/*
 * XLOG_FBF_PENDING_OPS: the operations of a PENDING_ADDS alone, when their
 * (sub)transaction is the record's own: its xid is the record header's
 * (XLogRecGetXid), its epoch the one that xid has below the next xid when
 * redo runs (FbfFullXidBefore: redo advances the next xid past a record's
 * before replaying it).  The floor flag is the first operation's
 * FBF_PENDING_OP_FLOOR.  One operation and its annex cost 17 bytes and the
 * annex's 9 to 18, where PENDING_ADD took 25 and the annex's.
 */

/* the most one operation takes in it */
#define FBF_PENDING_OP_MAX		(16 + 1 + 8 + FBF_VARINT_MAX)

/* the most an annex adds to the record: its stream and its seq */
#define FBF_PENDING_ANNEX_MAX	(8 + FBF_VARINT_MAX)

/* the annex of an operation numbered `seq` in `stream` (window_page.h) */
static inline FbfPendingEntry
FbfPendingAnnex(uint64 stream, int64 seq)
{
	FbfPendingEntry annex;

	annex.xid = InvalidTransactionId;
	annex.epoch = FBF_ANNEX_MARK;
	annex.h1 = stream;
	annex.h2 = (uint64) seq;
	return annex;
}

/*
 * XLOG_FBF_DRAIN: block 0's data the pending page's entry count (uint16)
 * and a bitmap of the entries kept, bit i of byte i / 8 (1.4's DRAIN_V1 had
 * a byte each); blocks 1 to FBF_DRAIN_MAX_PAGES: each partition page's
 * xl_fbf_slice_set, then its n hashes.
 */
typedef struct xl_fbf_slice_set
{
	int64		stamps[2];		/* future's and present's expected stamps */
	uint16		n;				/* operations to set */
	uint16		nhashes;
	uint8		lanes[2];		/* future's and present's lanes */
} xl_fbf_slice_set;

#define SizeOfFbfSliceSet	(offsetof(xl_fbf_slice_set, lanes) + 2 * sizeof(uint8))

/* bytes of a DRAIN's bitmap of n entries */
#define FBF_KEPT_BYTES(n)	(((n) + 7) / 8)

StaticAssertDecl(FBF_DRAIN_MAX_PAGES + 1 <= XLR_MAX_BLOCK_ID + 1,
				 "a drain record holds the pending page and its partition pages");

extern void FbfWindowXLogInit(void);

extern void FbfPendingPageAdd(Page page, const FbfPendingEntry *entry,
							  const FbfPendingEntry *annex, bool set_floor);
extern void FbfPendingPageAppend(Page page, const FbfPendingEntry *entries,
								 int n, bool set_floor);
extern void FbfPendingKeepAnnexes(const FbfPendingEntry *entries, int n,
								  uint8 *keep);
extern void FbfPendingPageCompact(Page page, const uint8 *keep, int nkeep_bytes);
extern void FbfSlicePageSet(Page page, const xl_fbf_slice_set *set,
							const FbfHash *hashes);

extern void FbfPendingLogAdd(Relation index, Buffer buf,
							 const FbfPendingEntry *entry,
							 const FbfPendingEntry *annex, bool set_floor);
extern void FbfPendingLogAdds(Relation index, Buffer buf,
							  const FbfPendingEntry *entries, int n,
							  bool set_floor);
extern void FbfDrainLog(Relation index, Buffer pbuf, uint8 *keep,
						int nentries, int nslices, const Buffer *sbufs,
						const xl_fbf_slice_set *sets, FbfHash *const *hashes);

#endif							/* FBF_WINDOW_XLOG_H */
