/*-------------------------------------------------------------------------
 *
 * fbf_page.c
 *	  Page utilities shared by the window index and the cuckoo index.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xloginsert.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/smgr.h"
#include "utils/rel.h"

#include "common/fbf_page.h"
#include "compat.h"

uint16
FbfPageId(Page page, Size special_size)
{
	if (PageIsNew(page) || PageGetSpecialSize(page) != MAXALIGN(special_size))
		return 0;
	return *(uint16 *) ((char *) page + BLCKSZ - sizeof(uint16));
}

void
FbfReportUnexpectedPage(Relation index, BlockNumber blkno, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_INDEX_CORRUPTED),
			 errmsg("index \"%s\" contains an unexpected page at block %u",
					RelationGetRelationName(index), blkno),
			 hint ? errhint("%s", hint) : 0));
	pg_unreachable();
}

Buffer
FbfNewBuffer(Relation index)
{
	bool		needLock = !RELATION_IS_LOCAL(index);
	Buffer		buf;

	if (needLock)
		LockRelationForExtension(index, ExclusiveLock);
	buf = FbfReadNewBuffer(index);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	if (needLock)
		UnlockRelationForExtension(index, ExclusiveLock);
	return buf;
}

void
FbfWriteInitForkPage(Relation index, BlockNumber blkno, Page page)
{
	PageSetChecksumInplace(page, blkno);
	smgrextend(RelationGetSmgr(index), INIT_FORKNUM, blkno, page, true);
	log_newpage(&FbfSmgrLocator(RelationGetSmgr(index)), INIT_FORKNUM, blkno,
				page, true);
}

void
FbfSyncInitFork(Relation index)
{
	smgrimmedsync(RelationGetSmgr(index), INIT_FORKNUM);
}
