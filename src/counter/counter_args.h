/*-------------------------------------------------------------------------
 *
 * counter_args.h
 *	  What the counters' and dedup tables' SQL functions share: the check
 *	  of an argument that must not be NULL, the three functions, one per
 *	  type of client id, of a front end, and the four, one per type of id,
 *	  of a dedup table's.  Nothing else, no state.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_COUNTER_ARGS_H
#define FBF_COUNTER_ARGS_H

#include "postgres.h"

#include "catalog/pg_type_d.h"
#include "fmgr.h"

/*
 * Error (22004) if argument `argno`, called `name`, of the SQL function
 * `fname` is NULL: "name of fname must not be null".
 */
static inline void
FbfRequireArg(FunctionCallInfo fcinfo, int argno, const char *fname,
			  const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s of %s must not be null", name, fname)));
}

/*
 * One SQL function of a front end's set of them, one per argument type:
 * `name`, returning `call` once `binding` (a declaration of the one
 * variable that tells the set's functions apart, which `call` reads) is
 * made.  Used at file scope, followed by a semicolon, as
 * PG_FUNCTION_INFO_V1, which it includes.
 */
#define FBF_TYPED_FUNCTION(name, binding, call) \
	PG_FUNCTION_INFO_V1(name); \
	Datum \
	name(PG_FUNCTION_ARGS) \
	{ \
		binding; \
		return (call); \
	} \
	extern int	no_such_variable

/*
 * The SQL functions of a front end, one per type of client id: name_int8,
 * name_text and name_uuid, each returning `call`, an expression of its
 * `fcinfo` and of `tag`, the client ids' type ('i' bigint, 't' text, 'u'
 * uuid: FbfClientIdType):
 *
 *	FBF_CLIENT_ID_FUNCTIONS(fbf_increment, increment(fcinfo, tag, false));
 */
#define FBF_CLIENT_ID_FUNCTION(name, tag_, call) \
	FBF_TYPED_FUNCTION(name, const char tag = (tag_), call)

#define FBF_CLIENT_ID_FUNCTIONS(name, call) \
	FBF_CLIENT_ID_FUNCTION(name##_int8, 'i', call); \
	FBF_CLIENT_ID_FUNCTION(name##_text, 't', call); \
	FBF_CLIENT_ID_FUNCTION(name##_uuid, 'u', call)

/*
 * The SQL functions of a dedup table's front end, one per type of id a
 * claim takes: name_int8, name_text, name_bytea and name_uuid, each
 * returning `call`, an expression of its `fcinfo` and of `typid`, the id's
 * type.  Used as FBF_CLIENT_ID_FUNCTIONS is:
 *
 *	FBF_ID_FUNCTIONS(fbf_claim, claim_one(fcinfo, typid));
 */
#define FBF_ID_FUNCTION(name, typid_, call) \
	FBF_TYPED_FUNCTION(name, const Oid typid = (typid_), call)

#define FBF_ID_FUNCTIONS(name, call) \
	FBF_ID_FUNCTION(name##_int8, INT8OID, call); \
	FBF_ID_FUNCTION(name##_text, TEXTOID, call); \
	FBF_ID_FUNCTION(name##_bytea, BYTEAOID, call); \
	FBF_ID_FUNCTION(name##_uuid, UUIDOID, call)

#endif							/* FBF_COUNTER_ARGS_H */
