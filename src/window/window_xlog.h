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

#include "window/window_int.h"

/* XLOG_FBF_PENDING_ADD: block 0's data */
typedef struct xl_fbf_pending_add
{
	FbfPendingEntry entry;
	uint8		set_floor;		/* the entry's xid is the chain's new floor */
} xl_fbf_pending_add;

#define SizeOfFbfPendingAdd	(offsetof(xl_fbf_pending_add, set_floor) + sizeof(uint8))

/* XLOG_FBF_DRAIN: each partition page's data, then n hashes */
typedef struct xl_fbf_slice_set
{
	int64		stamps[2];		/* future's and present's expected stamps */
	uint16		n;				/* operations to set */
	uint16		nhashes;
	uint8		lanes[2];		/* future's and present's lanes */
} xl_fbf_slice_set;

#define SizeOfFbfSliceSet	(offsetof(xl_fbf_slice_set, lanes) + 2 * sizeof(uint8))

extern void FbfWindowXLogInit(void);

extern void FbfPendingPageAdd(Page page, const FbfPendingEntry *entry,
							  bool set_floor);
extern void FbfPendingPageCompact(Page page, const uint8 *keep, int nkeep_bytes);
extern void FbfSlicePageSet(Page page, const xl_fbf_slice_set *set,
							const FbfHash *hashes);

extern void FbfPendingLogAdd(Relation index, Buffer buf,
							 const FbfPendingEntry *entry, bool set_floor);
extern void FbfDrainLog(Relation index, Buffer pbuf, const uint8 *keep,
						int nentries, int nslices, const Buffer *sbufs,
						const xl_fbf_slice_set *sets, FbfHash *const *hashes);

#endif							/* FBF_WINDOW_XLOG_H */
