/*-------------------------------------------------------------------------
 *
 * cuckoo.c
 *	  The cuckoo index access method: handler, reloptions, operator class
 *	  validation and cost estimate.
 *
 * A cuckoo index answers "col = value" by reading one bucket page
 * (addressed with the backend's cached metapage), whatever the table's size and however many rows were
 * deleted: VACUUM removes dead entries from their buckets (slots are
 * reused), and scans mark entries that the executor finds dead so that
 * later lookups of deleted keys skip the heap.  cuckoo.h describes the
 * storage and the locking; cuckooinsert.c the growth.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/amvalidate.h"
#include "access/hash.h"
#include "access/htup_details.h"
#include "access/reloptions.h"
#include "catalog/pg_am.h"
#include "catalog/pg_amop.h"
#include "catalog/pg_amproc.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/vacuum.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/selfuncs.h"
#include "utils/syscache.h"

#include "common/fbf_xlog.h"
#include "cuckoo.h"

PG_FUNCTION_INFO_V1(cuckoo_handler);

static relopt_kind cuckoo_relopt_kind;

void
CuckooAmInit(void)
{
	FbfXLogRegisterMask(CUCKOO_PAGE_ID, CuckooMaskPage);
	cuckoo_relopt_kind = add_reloption_kind();
	add_int_reloption(cuckoo_relopt_kind, "fingerprint_bits",
					  "Bits of each entry's tag that no page address implies: 8, 12 or 16",
					  CUCKOO_DEFAULT_FINGERPRINT_BITS, 8, 16, AccessExclusiveLock);
	add_int_reloption(cuckoo_relopt_kind, "bucket_size",
					  "Slots per bucket",
					  CUCKOO_DEFAULT_BUCKET_SIZE, 2, CUCKOO_MAX_BUCKET_SIZE_OPT,
					  AccessExclusiveLock);
	add_int_reloption(cuckoo_relopt_kind, "max_kicks",
					  "Most displacements one insert may make before it overflows or grows the table",
					  CUCKOO_DEFAULT_MAX_KICKS, 1, CUCKOO_MAX_KICKS,
					  AccessExclusiveLock);

	/*
	 * hash's bounds and messages.  Read at each doubling decision (and by a
	 * build), so a change needs no rebuild and does not block inserts:
	 * hash's lock level.
	 */
	add_int_reloption(cuckoo_relopt_kind, "fillfactor",
					  "Sampled load of bucket slots, in percent, at which an insert that finds its page full doubles the table",
					  CUCKOO_DEFAULT_FILLFACTOR, CUCKOO_MIN_FILLFACTOR, 100,
					  ShareUpdateExclusiveLock);
}

static bytea *
cuckoooptions(Datum reloptions, bool validate)
{
	static const relopt_parse_elt tab[] = {
		{"fingerprint_bits", RELOPT_TYPE_INT, offsetof(CuckooOptions, fingerprint_bits)},
		{"bucket_size", RELOPT_TYPE_INT, offsetof(CuckooOptions, bucket_size)},
		{"max_kicks", RELOPT_TYPE_INT, offsetof(CuckooOptions, max_kicks)},
		{"fillfactor", RELOPT_TYPE_INT, offsetof(CuckooOptions, fillfactor)},
	};
	CuckooOptions *opts;

	opts = (CuckooOptions *) build_reloptions(reloptions, validate,
											  cuckoo_relopt_kind,
											  sizeof(CuckooOptions),
											  tab, lengthof(tab));
	if (validate && opts &&
		opts->fingerprint_bits != 8 && opts->fingerprint_bits != 12 &&
		opts->fingerprint_bits != 16)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for parameter \"fingerprint_bits\": %d",
						opts->fingerprint_bits),
				 errdetail("Valid values are 8, 12 and 16.")));
	return (bytea *) opts;
}

/*
 * The cost of a lookup is one bucket page (the metapage is cached per
 * backend), plus the heap: genericcostestimate's model of an index that fetches about one
 * page per probe fits, as it does for hash indexes.  The metapage stays
 * is rarely read, so it is not charged.
 */
static void
cuckoocostestimate(PlannerInfo *root, IndexPath *path, double loop_count,
				   Cost *indexStartupCost, Cost *indexTotalCost,
				   Selectivity *indexSelectivity, double *indexCorrelation,
				   double *indexPages)
{
	GenericCosts costs = {0};

	genericcostestimate(root, path, loop_count, &costs);

	*indexStartupCost = costs.indexStartupCost;
	*indexTotalCost = costs.indexTotalCost;
	*indexSelectivity = costs.indexSelectivity;
	*indexCorrelation = costs.indexCorrelation;
	*indexPages = costs.numIndexPages;
}

/*
 * Is "proc" the extended hash function that the type's default hash
 * operator class uses?  Such a function may be declared on another type:
 * before PostgreSQL 18, hash itself hashed date, xid and cid with
 * hashint4extended, bool with hashcharextended, timestamptz with
 * timestamp_hash_extended and bytea with hashvarlenaextended(internal),
 * and the cuckoo opclasses take hash's functions (hashvalidate makes the
 * same exceptions by name).
 */
static bool
is_hash_function_of(Oid proc, Oid type)
{
	Oid			opclass = GetDefaultOpClass(type, HASH_AM_OID);

	return OidIsValid(opclass) &&
		get_opfamily_proc(get_opclass_family(opclass), type, type,
						  HASHEXTENDED_PROC) == proc;
}

/*
 * Check an operator class and its family: every operator is strategy 1,
 * a boolean "=" on two types that both have support function 1, the
 * extended hash (type, int8) -> int8 (its argument binary-coercible from
 * the type, or the function hash uses for it); and the class's own type
 * is covered.
 */
static bool
cuckoovalidate(Oid opclassoid)
{
	bool		result = true;
	HeapTuple	classtup;
	Form_pg_opclass classform;
	Oid			opfamilyoid;
	Oid			opcintype;
	char	   *opclassname;
	CatCList   *proclist,
			   *oprlist;
	List	   *hashed_types = NIL;

	classtup = SearchSysCache1(CLAOID, ObjectIdGetDatum(opclassoid));
	if (!HeapTupleIsValid(classtup))
		elog(ERROR, "cache lookup failed for operator class %u", opclassoid);
	classform = (Form_pg_opclass) GETSTRUCT(classtup);
	opfamilyoid = classform->opcfamily;
	opcintype = classform->opcintype;
	opclassname = NameStr(classform->opcname);

	proclist = SearchSysCacheList1(AMPROCNUM, ObjectIdGetDatum(opfamilyoid));
	oprlist = SearchSysCacheList1(AMOPSTRATEGY, ObjectIdGetDatum(opfamilyoid));

	for (int i = 0; i < proclist->n_members; i++)
	{
		Form_pg_amproc procform = (Form_pg_amproc) GETSTRUCT(&proclist->members[i]->tuple);

		if (procform->amprocnum != CUCKOO_HASH_PROC ||
			procform->amproclefttype != procform->amprocrighttype ||
			(!check_amproc_signature(procform->amproc, INT8OID, false, 2, 2,
									 procform->amproclefttype, INT8OID) &&
			 !is_hash_function_of(procform->amproc, procform->amproclefttype)))
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("cuckoo operator class \"%s\" contains invalid support function %s for types %s and %s",
							opclassname, format_procedure(procform->amproc),
							format_type_be(procform->amproclefttype),
							format_type_be(procform->amprocrighttype))));
			result = false;
			continue;
		}
		hashed_types = list_append_unique_oid(hashed_types, procform->amproclefttype);
	}

	for (int i = 0; i < oprlist->n_members; i++)
	{
		Form_pg_amop oprform = (Form_pg_amop) GETSTRUCT(&oprlist->members[i]->tuple);

		if (oprform->amopstrategy != CUCKOO_EQUAL_STRATEGY ||
			oprform->amoppurpose != AMOP_SEARCH ||
			OidIsValid(oprform->amopsortfamily) ||
			!check_amop_signature(oprform->amopopr, BOOLOID,
								  oprform->amoplefttype, oprform->amoprighttype))
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("cuckoo operator family contains invalid operator %s with strategy %d",
							format_operator(oprform->amopopr),
							oprform->amopstrategy)));
			result = false;
			continue;
		}
		if (!list_member_oid(hashed_types, oprform->amoplefttype) ||
			!list_member_oid(hashed_types, oprform->amoprighttype))
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("cuckoo operator family lacks a hash support function for operator %s",
							format_operator(oprform->amopopr))));
			result = false;
		}
	}

	if (!list_member_oid(hashed_types, opcintype))
	{
		ereport(INFO,
				(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				 errmsg("cuckoo operator class \"%s\" is missing support function %d",
						opclassname, CUCKOO_HASH_PROC)));
		result = false;
	}

	ReleaseCatCacheList(proclist);
	ReleaseCatCacheList(oprlist);
	ReleaseSysCache(classtup);
	return result;
}

Datum
cuckoo_handler(PG_FUNCTION_ARGS)
{
	IndexAmRoutine *amroutine = makeNode(IndexAmRoutine);

	amroutine->amstrategies = CUCKOO_NSTRATEGIES;
	amroutine->amsupport = CUCKOO_NPROC;
	amroutine->amoptsprocnum = 0;
	amroutine->amcanorder = false;
	amroutine->amcanorderbyop = false;
	amroutine->amcanbackward = true;	/* the scan keeps its matches */
	amroutine->amcanunique = false;
	amroutine->amcanmulticol = false;
	amroutine->amoptionalkey = false;
	amroutine->amsearcharray = true;
	amroutine->amsearchnulls = false;
	amroutine->amstorage = false;
	amroutine->amclusterable = false;
	amroutine->ampredlocks = false;
	amroutine->amcanparallel = false;
	amroutine->amcaninclude = false;
	amroutine->amusemaintenanceworkmem = false;	/* VACUUM keeps no TID store */
	amroutine->amparallelvacuumoptions =
		VACUUM_OPTION_PARALLEL_BULKDEL | VACUUM_OPTION_PARALLEL_CLEANUP;
	amroutine->amkeytype = InvalidOid;

	amroutine->ambuild = cuckoobuild;
	amroutine->ambuildempty = cuckoobuildempty;
	amroutine->aminsert = cuckooinsert;
	amroutine->ambulkdelete = cuckoobulkdelete;
	amroutine->amvacuumcleanup = cuckoovacuumcleanup;
	amroutine->amcanreturn = NULL;
	amroutine->amcostestimate = cuckoocostestimate;
	amroutine->amoptions = cuckoooptions;
	amroutine->amproperty = NULL;
	amroutine->ambuildphasename = NULL;
	amroutine->amvalidate = cuckoovalidate;
	amroutine->amadjustmembers = NULL;
	amroutine->ambeginscan = cuckoobeginscan;
	amroutine->amrescan = cuckoorescan;
	amroutine->amgettuple = cuckoogettuple;
	amroutine->amgetbitmap = cuckoogetbitmap;
	amroutine->amendscan = cuckooendscan;
	amroutine->ammarkpos = NULL;
	amroutine->amrestrpos = NULL;
	amroutine->amestimateparallelscan = NULL;
	amroutine->aminitparallelscan = NULL;
	amroutine->amparallelrescan = NULL;

	PG_RETURN_POINTER(amroutine);
}
