/*-------------------------------------------------------------------------
 *
 * fbf_xlog.h
 *	  fbf's WAL resource manager, shared by both access methods (the
 *	  counters' window index and the cuckoo index).
 *
 * Page changes are made the way generic WAL makes them: register up to
 * FBF_XLOG_MAX_PAGES locked buffers, change the copies returned, finish;
 * the record carries, for each page, the byte ranges that changed (or a
 * full image).  Being fbf's own resource manager rather than generic WAL
 * gives it what generic WAL cannot have: a mask function that hides
 * hint-only state from wal_consistency_checking (the cuckoo index's killed
 * bits, set without WAL like btree's LP_DEAD), descriptions for pg_waldump
 * and the server log, and room for compact record types of its own.
 *
 * Redo needs the library: standbys, and servers doing crash recovery, must
 * have fbf in shared_preload_libraries (they do already, to run at all).
 *
 * Records:
 *	XLOG_FBF_PAGES	up to FBF_XLOG_MAX_PAGES block references, each with
 *					its changed ranges as (offset uint16, length uint16,
 *					bytes) fragments, or a forced full image
 *	others			compact records of an access method, which registers
 *					their redo and description (FbfXLogRegisterRecord):
 *					src/window/window_xlog.c, src/window/window_stream.c
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_XLOG_H
#define FBF_XLOG_H

#include "postgres.h"

#include "access/xlogreader.h"
#include "lib/stringinfo.h"
#include "storage/buf.h"
#include "storage/bufpage.h"
#include "utils/relcache.h"

/*
 * fbf's WAL resource manager id, written into every fbf record: fixed for
 * good, since a server replays WAL by this id (a build with another id
 * could not replay what an older one logged).  Custom ids are
 * RM_MIN_CUSTOM_ID (128) to RM_MAX_CUSTOM_ID (255), RM_EXPERIMENTAL_ID
 * (128) being for experiments; PostgreSQL assigns none, and extensions
 * avoid each other by listing theirs on the PostgreSQL wiki's page of
 * custom WAL resource managers.  170 is not listed there yet: it must be
 * before a public release.
 *
 * The risk of a clash, another extension using 170: loaded together, the
 * server refuses to start (RegisterCustomRmgr: "custom resource manager
 * ... already registered with the same ID"), so their records never mix
 * while both are preloaded.  The harm would come from WAL written with one
 * loaded and replayed (crash recovery, a standby, point-in-time recovery)
 * by a server that preloads the other instead: its redo would be handed
 * fbf's records.  fbf's own redo PANICs on a record it cannot parse.
 *
 * RmgrData (rm_redo, rm_desc, rm_identify, rm_startup, rm_cleanup,
 * rm_mask, rm_decode) and RegisterCustomRmgr are the same in PostgreSQL 15,
 * where custom resource managers arrived, and 18; fbf sets no rm_decode
 * (logical decoding passes over its records, which carry no row changes).
 */
#define FBF_RMGR_ID				170

#define XLOG_FBF_PAGES			0x00
#define XLOG_FBF_PENDING_ADD	0x10	/* window_xlog.c; 1.4's, redo only */
#define XLOG_FBF_DRAIN_V1		0x20	/* window_xlog.c; 1.4's, redo only */
#define XLOG_FBF_STREAMS		0x30	/* window_stream.c */
#define XLOG_FBF_PENDING_ADDS	0x40	/* window_xlog.c */
#define XLOG_FBF_PENDING_OPS	0x50	/* window_xlog.c */
#define XLOG_FBF_DRAIN			0x60	/* window_xlog.c */

#define FBF_XLOG_MAX_PAGES		4
#define FBF_XLOG_FULL_IMAGE		0x0001	/* log the whole page */

typedef struct FbfXLogState FbfXLogState;

/* a page kind's mask: clear hint-only state of a page image */
typedef void (*FbfXLogMaskFunc) (Page page);

/* a record type's redo and description */
typedef void (*FbfXLogRedoFunc) (XLogReaderState *record);
typedef void (*FbfXLogDescFunc) (StringInfo buf, XLogReaderState *record);

/* ---- registration, from _PG_init ---- */
extern void FbfXLogInit(void);
extern void FbfXLogRegisterMask(uint16 page_id, FbfXLogMaskFunc mask);
extern void FbfXLogRegisterRecord(uint8 info, const char *name,
								  FbfXLogRedoFunc redo, FbfXLogDescFunc desc);

/* ---- making a change ---- */
extern FbfXLogState *FbfXLogStart(Relation rel);
extern Page FbfXLogRegisterBuffer(FbfXLogState *state, Buffer buffer, int flags);
extern XLogRecPtr FbfXLogFinish(FbfXLogState *state);
extern void FbfXLogAbort(FbfXLogState *state);

/* ---- redo ---- */

/* a record's change to its block `id`, read for redo (FbfXLogRedoPages) */
typedef void (*FbfXLogRedoPageFunc) (XLogReaderState *record, int id,
									 Buffer buffer, void *arg);

extern void FbfXLogRedoPages(XLogReaderState *record, int max_block,
							 FbfXLogRedoPageFunc replay, void *arg);

#endif							/* FBF_XLOG_H */
