/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  The one place where fbf names things that differ between PostgreSQL
 *	  major versions.
 *
 * fbf is built and tested against PostgreSQL 15 only.  Every call or type
 * whose name changed in a later release is reached through a macro or
 * typedef here, so that a port touches this file and not the subsystems:
 *
 *	- PostgreSQL 16 renamed RelFileNode to RelFileLocator (and the fields
 *	  spcNode/dbNode/relNode to spcOid/dbOid/relNumber, rd_node to
 *	  rd_locator, smgr_rnode to smgr_rlocator);
 *	- PostgreSQL 16 replaced ReadBuffer(rel, P_NEW) with ExtendBufferedRel;
 *	- PostgreSQL 17 changed smgrextend/smgrimmedsync's neighbours
 *	  (smgrregistersync) and the signature of log_newpage.
 *
 * Only the PostgreSQL 15 branch exists; other versions stop the build with
 * an error here rather than fail somewhere deeper.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_COMPAT_H
#define FBF_COMPAT_H

#include "postgres.h"

#include "storage/relfilenode.h"
#include "storage/smgr.h"
#include "utils/rel.h"

#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 160000
#error "fbf is written for PostgreSQL 15; port src/compat.h first"
#endif

/* where a relation's storage is: the file identity of a relfilenode */
typedef RelFileNode FbfFileLocator;

#define FbfRelationLocator(rel)		((rel)->rd_node)
#define FbfSmgrLocator(smgr)		((smgr)->smgr_rnode.node)
#define FbfFileLocatorEquals(a, b)	RelFileNodeEquals(a, b)

static inline FbfFileLocator
FbfMakeFileLocator(Oid tablespace, Oid database, Oid filenumber)
{
	FbfFileLocator loc;

	loc.spcNode = tablespace;
	loc.dbNode = database;
	loc.relNode = filenumber;
	return loc;
}

/* read a page of a relation known only by its storage (no relcache entry) */
#define FbfReadBufferByLocator(loc, fork, blkno, permanent) \
	ReadBufferWithoutRelcache(loc, fork, blkno, RBM_NORMAL, NULL, permanent)

/* a new, zeroed block at the end of a relation's main fork, pinned */
#define FbfReadNewBuffer(rel)		ReadBuffer(rel, P_NEW)

#endif							/* FBF_COMPAT_H */
