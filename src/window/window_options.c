/*-------------------------------------------------------------------------
 *
 * window_options.c
 *	  The options of a window: its settings (fbf.max_filter_size,
 *	  fbf.split_batch, fbf.max_streams), the reloptions of a window
 *	  index, parsing them (the access method's amoptions) and reading
 *	  them (FbfWindowGetOptions).  The bottom layer, with window_layout.c: every
 *	  file of the window may read them.
 *
 * No lock: the reloptions are read from the relcache entry of an index
 * the caller has open.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/reloptions.h"
#include "lib/stringinfo.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "window/window_format.h"
#include "window/window_int.h"

int			fbf_max_filter_size_kb = 64 * 1024;
int			fbf_split_batch = 0;
int			fbf_max_streams = 16384;

/* the most exact streams a window may keep (the setting and reloption) */
#define FBF_MAX_STREAMS_LIMIT	10000000

static relopt_kind fbf_relopt_kind;

static relopt_enum_elt_def at_capacity_values[] = {
	{"dismiss", FBF_AT_CAPACITY_DISMISS},
	{"refuse", FBF_AT_CAPACITY_REFUSE},
	{NULL}
};

static relopt_enum_elt_def share_by_values[] = {
	{"role", FBF_SHARE_BY_ROLE},
	{"key", FBF_SHARE_BY_KEY},
	{"none", FBF_SHARE_BY_NONE},
	{NULL}
};

static relopt_enum_elt_def kind_values[] = {
	{"counter", FBF_WINDOW_COUNTER},
	{"dedup", FBF_WINDOW_DEDUP},
	{NULL}
};

/* the formats' names (FbfWindowOptionsInit), and the end */
static relopt_enum_elt_def filter_values[FBF_FILTER_COUNT + 1];


/*
 * Define the window's settings and reloptions (from FbfWindowInit): the
 * option `filter` takes the formats' names (window_format.h).
 */
void
FbfWindowOptionsInit(void)
{
	StringInfoData detail;
	MemoryContext oldcxt;
	int			f;
	DefineCustomIntVariable("fbf.max_filter_size",
							"Memory cap of one counter table's filter.",
							"Creating a larger filter fails; AIMD never grows a filter past it.",
							&fbf_max_filter_size_kb, 64 * 1024, 64, INT_MAX / 2,
							PGC_SUSET, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("fbf.split_batch",
							"Partitions one maintenance pass splits or merges before it returns (0: all).",
							"A split or merge left unfinished is continued by the next pass; operations keep working meanwhile.",
							&fbf_split_batch, 0, 0, INT_MAX,
							PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("fbf.max_streams",
							"Exact streams a counter table's filter keeps, for counters without the max_streams option (0: none).",
							"A new window takes it, and one without stream pages at its next refresh; set the max_streams option to resize a window's. Streams beyond it fall back to the filter.",
							&fbf_max_streams, 16384, 0, FBF_MAX_STREAMS_LIMIT,
							PGC_SUSET, 0, NULL, NULL, NULL);

	fbf_relopt_kind = add_reloption_kind();
	add_int_reloption(fbf_relopt_kind, "retention_ms",
					  "How long operations are remembered, in milliseconds",
					  300000, 1000, INT_MAX, AccessExclusiveLock);
	add_real_reloption(fbf_relopt_kind, "target_fpp",
					   "Target false-positive probability",
					   0.001, 1e-9, 0.5, AccessExclusiveLock);
	add_real_reloption(fbf_relopt_kind, "expected_rate",
					   "Expected operations per second, for the initial size",
					   1000, 0, 1e9, AccessExclusiveLock);
	add_int_reloption(fbf_relopt_kind, "shards",
					  "Rows per key over which increments are spread",
					  16, 1, 1024, AccessExclusiveLock);
	add_int_reloption(fbf_relopt_kind, "nbits",
					  "Explicit shape: bits per filter (0 to plan from the workload)",
					  0, 0, INT_MAX, AccessExclusiveLock);
	add_int_reloption(fbf_relopt_kind, "nhashes",
					  "Explicit shape: hash functions",
					  0, 0, FBF_MAX_HASHES, AccessExclusiveLock);
	add_int_reloption(fbf_relopt_kind, "npast",
					  "Explicit shape: past filters",
					  0, 0, FBF_MAX_FILTERS - 2, AccessExclusiveLock);
	add_enum_reloption(fbf_relopt_kind, "at_capacity",
					   "What new operations get when the filter cannot take them at its target: refused (over their share), or dismissed",
					   at_capacity_values, FBF_AT_CAPACITY_REFUSE,
					   "Valid values are \"dismiss\" and \"refuse\".",
					   ShareUpdateExclusiveLock);
	add_enum_reloption(fbf_relopt_kind, "kind",
					   "What the window remembers: a counter table's increments or a dedup table's claims",
					   kind_values, FBF_WINDOW_COUNTER,
					   "Valid values are \"counter\" and \"dedup\".",
					   AccessExclusiveLock);

	/* the formats by name (window_format.h); kept for good */
	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	initStringInfo(&detail);
	appendStringInfoString(&detail, "Valid values are ");
	for (f = 0; f < FBF_FILTER_COUNT; f++)
	{
		filter_values[f].string_val = FbfFilterRoutineFor(f)->name;
		filter_values[f].symbol_val = f;
		appendStringInfo(&detail, "%s\"%s\"",
						 f == 0 ? "" : f == FBF_FILTER_COUNT - 1 ? " and " : ", ",
						 FbfFilterRoutineFor(f)->name);
	}
	filter_values[FBF_FILTER_COUNT].string_val = NULL;
	appendStringInfoChar(&detail, '.');
	MemoryContextSwitchTo(oldcxt);
	add_enum_reloption(fbf_relopt_kind, "filter",
					   "The format of the window's partition pages: Forgetful Bloom Filter lanes or a cuckoo window",
					   filter_values, FBF_FILTER_DEFAULT, detail.data,
					   AccessExclusiveLock);

	/*
	 * Read by every increment from the relcache entry: a lock that lets
	 * increments run on is enough (transactions already running may apply
	 * a few more operations as the old value said).
	 */
	add_bool_reloption(fbf_relopt_kind, "track_mismatch",
					   "Count retries whose delta differs from the applied operation's (costs a second window entry per applied operation)",
					   false, ShareUpdateExclusiveLock);

	/* read by every increment, as track_mismatch */
	add_enum_reloption(fbf_relopt_kind, "share_by",
					   "Who shares the filter's capacity: each role, each key, or nobody (one pool)",
					   share_by_values, FBF_SHARE_BY_ROLE,
					   "Valid values are \"role\", \"key\" and \"none\".",
					   ShareUpdateExclusiveLock);

	/* read at a refresh, which makes the stream pages it asks for */
	add_int_reloption(fbf_relopt_kind, "max_streams",
					  "Exact streams the filter keeps (0: none; -1: fbf.max_streams)",
					  -1, -1, FBF_MAX_STREAMS_LIMIT, ShareUpdateExclusiveLock);

	/*
	 * Read by each pass of the worker when it opens the window: off, the
	 * worker leaves this window alone (as autovacuum_enabled = off does
	 * VACUUM); backends still refresh it when a refresh is overdue and
	 * drain a full pending chain, and fbf_counter_maintain() runs a pass.
	 */
	add_bool_reloption(fbf_relopt_kind, "worker_maintenance",
					   "Let the background worker maintain the filter (refresh on time, drain, resize)",
					   true, ShareUpdateExclusiveLock);
}

/* amoptions: parse (and with validate, check) a window index's reloptions */
bytea *
FbfWindowParseOptions(Datum reloptions, bool validate)
{
	static const relopt_parse_elt tab[] = {
		{"retention_ms", RELOPT_TYPE_INT, offsetof(FbfWindowOptions, retention_ms)},
		{"target_fpp", RELOPT_TYPE_REAL, offsetof(FbfWindowOptions, target_fpp)},
		{"expected_rate", RELOPT_TYPE_REAL, offsetof(FbfWindowOptions, expected_rate)},
		{"shards", RELOPT_TYPE_INT, offsetof(FbfWindowOptions, shards)},
		{"nbits", RELOPT_TYPE_INT, offsetof(FbfWindowOptions, nbits)},
		{"nhashes", RELOPT_TYPE_INT, offsetof(FbfWindowOptions, nhashes)},
		{"npast", RELOPT_TYPE_INT, offsetof(FbfWindowOptions, npast)},
		{"at_capacity", RELOPT_TYPE_ENUM, offsetof(FbfWindowOptions, at_capacity)},
		{"kind", RELOPT_TYPE_ENUM, offsetof(FbfWindowOptions, kind)},
		{"filter", RELOPT_TYPE_ENUM, offsetof(FbfWindowOptions, filter)},
		{"track_mismatch", RELOPT_TYPE_BOOL, offsetof(FbfWindowOptions, track_mismatch)},
		{"max_streams", RELOPT_TYPE_INT, offsetof(FbfWindowOptions, max_streams)},
		{"share_by", RELOPT_TYPE_ENUM, offsetof(FbfWindowOptions, share_by)},
		{"worker_maintenance", RELOPT_TYPE_BOOL, offsetof(FbfWindowOptions, worker_maintenance)},
	};
	FbfWindowOptions *opts;

	opts = (FbfWindowOptions *) build_reloptions(reloptions, validate,
												 fbf_relopt_kind,
												 sizeof(FbfWindowOptions),
												 tab, lengthof(tab));

	/* a claim has no delta: there is nothing to compare a retry's with */
	if (validate && opts != NULL && opts->kind == FBF_WINDOW_DEDUP &&
		opts->track_mismatch)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("track_mismatch cannot be set on a dedup table's window"),
				 errdetail("Claims have no delta to compare."),
				 errhint("Set track_mismatch on the window of a counter table.")));

	/* a claim has no key to share by */
	if (validate && opts != NULL && opts->kind == FBF_WINDOW_DEDUP &&
		opts->share_by == FBF_SHARE_BY_KEY)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("share_by cannot be \"key\" on a dedup table's window"),
				 errdetail("Claims have no key."),
				 errhint("Share a dedup table's capacity by \"role\", or set share_by to \"none\".")));

	return (bytea *) opts;
}

/* the index's options, or the defaults if it has none */
FbfWindowOptions *
FbfWindowGetOptions(Relation index)
{
	if (index->rd_options)
		return (FbfWindowOptions *) index->rd_options;
	return (FbfWindowOptions *) FbfWindowParseOptions((Datum) 0, false);
}

