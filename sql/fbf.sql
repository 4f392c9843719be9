-- fbf: idempotent counters on Forgetful Bloom Filters.
-- Source of the install script (the Makefile copies it to fbf--<version>.sql).

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION fbf" to load this file. \quit

------------------------------------------------------------------------
-- The fbf type: a Forgetful Bloom Filter as a SQL value
------------------------------------------------------------------------

CREATE TYPE fbf;

CREATE FUNCTION fbf_in(cstring) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_in'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_out(fbf) RETURNS cstring
	AS 'MODULE_PATHNAME', 'fbf_out'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_recv(internal) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_recv'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_send(fbf) RETURNS bytea
	AS 'MODULE_PATHNAME', 'fbf_send'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE fbf (
	INPUT = fbf_in,
	OUTPUT = fbf_out,
	RECEIVE = fbf_recv,
	SEND = fbf_send,
	INTERNALLENGTH = VARIABLE,
	ALIGNMENT = double,
	STORAGE = external
);

COMMENT ON TYPE fbf IS
	'Forgetful Bloom Filter: a sliding window of Bloom filters (future, present, N past)';

-- Constructors

CREATE FUNCTION fbf_create(nbits integer, nhashes integer, npast integer DEFAULT 1,
						   nparts integer DEFAULT 1)
	RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_create_shape'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_create(integer, integer, integer, integer) IS
	'empty FBF of npast + 2 filters of nparts blocks of nbits bits, nhashes hash functions';

CREATE FUNCTION fbf_create(retention interval, target_fpp double precision,
						   rate double precision)
	RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_create_for'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_create(interval, double precision, double precision) IS
	'smallest empty FBF that remembers rate elements per second for retention under target_fpp';

-- Elements (text and bytea hash by their bytes; bigint by its 8 little-endian bytes)

CREATE FUNCTION fbf_add(filter fbf, element text) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_add_text'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_add(filter fbf, element bytea) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_add_text'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_add(filter fbf, element bigint) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_add_int8'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_add(filter fbf, elements bigint[]) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_add_array'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_add(filter fbf, elements text[]) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_add_array'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_add(filter fbf, elements bytea[]) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_add_array'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_add(fbf, bigint[]) IS 'the filter with every non-null element inserted, in order';
COMMENT ON FUNCTION fbf_add(fbf, text[]) IS 'the filter with every non-null element inserted, in order';
COMMENT ON FUNCTION fbf_add(fbf, bytea[]) IS 'the filter with every non-null element inserted, in order';
COMMENT ON FUNCTION fbf_add(fbf, text) IS 'the filter with element inserted (unless already present)';
COMMENT ON FUNCTION fbf_add(fbf, bytea) IS 'the filter with element inserted (unless already present)';
COMMENT ON FUNCTION fbf_add(fbf, bigint) IS 'the filter with element inserted (unless already present)';

CREATE FUNCTION fbf_contains(filter fbf, element text, "check" text DEFAULT 'optimized')
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_contains_text'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_contains(filter fbf, element bytea, "check" text DEFAULT 'optimized')
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_contains_text'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_contains(filter fbf, element bigint, "check" text DEFAULT 'optimized')
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_contains_int8'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_contains(fbf, text, text) IS
	'true if element may be in the window (check: simple, optimized or paired)';
COMMENT ON FUNCTION fbf_contains(fbf, bytea, text) IS
	'true if element may be in the window (check: simple, optimized or paired)';
COMMENT ON FUNCTION fbf_contains(fbf, bigint, text) IS
	'true if element may be in the window (check: simple, optimized or paired)';

-- The window

CREATE FUNCTION fbf_refresh(filter fbf, times integer DEFAULT 1) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_refresh_n'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_refresh(fbf, integer) IS
	'the filter rotated times times: the oldest filter is dropped, an empty future added';

CREATE FUNCTION fbf_resize(filter fbf, npast integer) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_resize_past'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_resize(fbf, integer) IS
	'the filter with npast past filters: growing adds empty ones at the old end, shrinking forgets the oldest';

CREATE FUNCTION fbf_union(a fbf, b fbf) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_union'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_union(fbf, fbf) IS
	'union of two same-shaped filters, aligned on the newer one''s window';

-- Inspection

CREATE FUNCTION fbf_estimated_fpp(filter fbf, "check" text DEFAULT 'optimized')
	RETURNS double precision
	AS 'MODULE_PATHNAME', 'fbf_estimated_fpp'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_estimated_fpp(fbf, text) IS
	'estimated false-positive probability of a membership check';

CREATE FUNCTION fbf_info(filter fbf,
						 OUT nbits integer,
						 OUT nhashes integer,
						 OUT npast integer,
						 OUT nlive integer,
						 OUT epoch bigint,
						 OUT period interval,
						 OUT counts bigint[],
						 OUT bytes bigint,
						 OUT estimated_fpp double precision,
						 OUT nparts integer)
	AS 'MODULE_PATHNAME', 'fbf_info'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_info(fbf) IS
	'shape, window bookkeeping and per-filter element counts (newest first) of a filter';

-- The build aggregate

CREATE FUNCTION fbf_agg_trans(state fbf, element text, nbits integer,
							  nhashes integer, npast integer)
	RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_agg_trans_text'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION fbf_agg_trans(state fbf, element bytea, nbits integer,
							  nhashes integer, npast integer)
	RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_agg_trans_text'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION fbf_agg_trans(state fbf, element bigint, nbits integer,
							  nhashes integer, npast integer)
	RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_agg_trans_int8'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION fbf_agg_trans(fbf, text, integer, integer, integer) IS 'transition function of fbf_agg';
COMMENT ON FUNCTION fbf_agg_trans(fbf, bytea, integer, integer, integer) IS 'transition function of fbf_agg';
COMMENT ON FUNCTION fbf_agg_trans(fbf, bigint, integer, integer, integer) IS 'transition function of fbf_agg';

CREATE AGGREGATE fbf_agg(element text, nbits integer, nhashes integer, npast integer) (
	SFUNC = fbf_agg_trans,
	STYPE = fbf,
	COMBINEFUNC = fbf_union,
	PARALLEL = SAFE
);

CREATE AGGREGATE fbf_agg(element bytea, nbits integer, nhashes integer, npast integer) (
	SFUNC = fbf_agg_trans,
	STYPE = fbf,
	COMBINEFUNC = fbf_union,
	PARALLEL = SAFE
);

CREATE AGGREGATE fbf_agg(element bigint, nbits integer, nhashes integer, npast integer) (
	SFUNC = fbf_agg_trans,
	STYPE = fbf,
	COMBINEFUNC = fbf_union,
	PARALLEL = SAFE
);

COMMENT ON AGGREGATE fbf_agg(text, integer, integer, integer) IS 'FBF holding every non-null element, all in the present window';
COMMENT ON AGGREGATE fbf_agg(bytea, integer, integer, integer) IS 'FBF holding every non-null element, all in the present window';
COMMENT ON AGGREGATE fbf_agg(bigint, integer, integer, integer) IS 'FBF holding every non-null element, all in the present window';

------------------------------------------------------------------------
-- Idempotent counters
------------------------------------------------------------------------

-- Storage of a counter table's filter: an internal index access method.
-- Its indexes hold no tuples and are never scanned.
CREATE FUNCTION fbf_filter_handler(internal) RETURNS index_am_handler
	AS 'MODULE_PATHNAME', 'fbf_filter_handler'
	LANGUAGE C STRICT PARALLEL SAFE;

CREATE ACCESS METHOD fbf_filter TYPE INDEX HANDLER fbf_filter_handler;

COMMENT ON ACCESS METHOD fbf_filter IS
	'storage of a counter table''s Forgetful Bloom Filter (internal; created by fbf_create_counter_table)';

-- An operator class without operators, on purpose: CREATE INDEX needs a
-- default class for the column, but a window index is never scanned, and
-- an operator would let the planner build index paths on it (costed at
-- disable_cost, never run: ambeginscan refuses).  PostgreSQL's opr_sanity
-- test lists it as an opclass with no associated operators
-- (docs/design.md, "Where the filter lives").
CREATE OPERATOR CLASS fbf_filter_int4_ops DEFAULT FOR TYPE integer USING fbf_filter AS
	STORAGE integer;

-- Creation of a window's table and index, for fbf_create_counter_table
-- and fbf_create_dedup: checks the settings, then creates a table of
-- `kind` ('counter' or 'dedup') and its window index, whose `filter`
-- ('bloom' or 'cuckoo') chooses the partition pages' format and whose
-- `max_streams` (NULL: the setting fbf.max_streams) caps its exact streams.
-- `name` is schema-qualified: this function runs with search_path =
-- pg_catalog, pg_temp, as every SQL function of the extension does, and
-- its callers qualify the name in the caller's schema.
CREATE FUNCTION fbf_create_window(
	kind text,
	name text,
	retention interval,
	target_fpp double precision,
	expected_rate double precision,
	shards integer,
	nbits integer,
	nhashes integer,
	npast integer,
	filter text,
	max_streams integer)
	RETURNS regclass
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	-- the options written as given, not rounded by the caller's setting
	SET extra_float_digits = 1
	AS $fn$
DECLARE
	ident text[] := pg_catalog.parse_ident(name);
	relname text := ident[pg_catalog.array_length(ident, 1)];
	qualified text;
	retention_ms bigint;
	target double precision := COALESCE(target_fpp,
		pg_catalog.current_setting('fbf.default_target_fpp')::double precision);
	options text;
BEGIN
	IF pg_catalog.array_length(ident, 1) > 2 THEN
		RAISE EXCEPTION 'improper % table name: %', kind, name
			USING ERRCODE = 'invalid_name';
	END IF;
	IF pg_catalog.array_length(ident, 1) = 1 THEN
		-- unqualified: the caller's search_path named no schema
		RAISE EXCEPTION 'no schema has been selected to create in'
			USING ERRCODE = 'invalid_schema_name';
	END IF;
	qualified := pg_catalog.array_to_string(ARRAY(
		SELECT pg_catalog.quote_ident(part) FROM pg_catalog.unnest(ident) AS part), '.');

	retention_ms := pg_catalog.ceil(pg_catalog.date_part('epoch', COALESCE(retention,
		pg_catalog.current_setting('fbf.default_retention')::interval)) * 1000);
	IF retention_ms < 1000 OR retention_ms > 2147483647 THEN
		RAISE EXCEPTION 'retention must be between 1 second and 24 days'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF NOT (target > 0 AND target <= 0.5) THEN
		RAISE EXCEPTION 'target false-positive rate must be greater than 0 and at most 0.5'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF expected_rate IS NULL OR NOT (expected_rate >= 0 AND expected_rate <= 1e9) THEN
		RAISE EXCEPTION 'expected rate must be between 0 and 1e9 operations per second'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF shards IS NULL OR shards < 1 OR shards > 1024 THEN
		RAISE EXCEPTION 'shards must be between 1 and 1024'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF (nbits IS NULL) <> (nhashes IS NULL) OR (nbits IS NULL) <> (npast IS NULL) THEN
		RAISE EXCEPTION 'an explicit shape needs nbits, nhashes and npast together'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- the window index's option refuses what is not available (0A000)
	IF filter IS NULL OR filter NOT IN ('bloom', 'cuckoo') THEN
		RAISE EXCEPTION 'unknown filter: %', COALESCE(filter, 'NULL')
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'The filter is ''bloom'' (the default) or ''cuckoo''.';
	END IF;
	IF max_streams < 0 OR max_streams > 10000000 THEN
		RAISE EXCEPTION 'max_streams must be between 0 and 10000000'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Leave it NULL for the setting fbf.max_streams; 0 keeps no exact streams.';
	END IF;

	options := pg_catalog.format('retention_ms = %s, target_fpp = %s, expected_rate = %s, shards = %s',
								 retention_ms, target, expected_rate, shards);
	IF filter <> 'bloom' THEN
		-- the index's option, so that pg_dump carries it; bloom is its default
		options := options || pg_catalog.format(', filter = %s', filter);
	END IF;
	IF max_streams IS NOT NULL THEN
		-- the index's option; without it the window follows fbf.max_streams
		options := options || pg_catalog.format(', max_streams = %s', max_streams);
	END IF;
	IF nbits IS NOT NULL THEN
		options := options || pg_catalog.format(', nbits = %s, nhashes = %s, npast = %s',
												nbits, nhashes, npast);
	END IF;

	IF kind = 'counter' THEN
		EXECUTE pg_catalog.format(
			'CREATE TABLE %s (key text NOT NULL DEFAULT '''', shard integer NOT NULL, '
			'value bigint NOT NULL DEFAULT 0, PRIMARY KEY (key, shard))', qualified);
		EXECUTE pg_catalog.format('CREATE INDEX %I ON %s USING fbf_filter (shard) WITH (%s)',
								  pg_catalog.left(relname, 59) || '_fbf', qualified, options);
	ELSIF kind = 'dedup' THEN
		-- the claims live in the window alone; the table anchors the
		-- index, the privileges and the name, and can hold no rows
		EXECUTE pg_catalog.format(
			'CREATE TABLE %s (anchor integer, CONSTRAINT %I CHECK (false))',
			qualified, pg_catalog.left(relname, 50) || '_holds_no_rows');
		EXECUTE pg_catalog.format('COMMENT ON TABLE %s IS %L', qualified,
			'dedup table: its window index remembers the claimed ids; it holds no rows');
		EXECUTE pg_catalog.format(
			'CREATE INDEX %I ON %s USING fbf_filter (anchor) WITH (%s, kind = dedup)',
			pg_catalog.left(relname, 59) || '_fbf', qualified, options);
	ELSE
		RAISE EXCEPTION 'unknown kind of window table: %', kind
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	RETURN qualified::regclass;
END
$fn$;

COMMENT ON FUNCTION fbf_create_window(text, text, interval, double precision, double precision, integer, integer, integer, integer, text, integer) IS
	'create a counter or dedup table with its window index (internal: use fbf_create_counter_table or fbf_create_dedup)';

CREATE FUNCTION fbf_create_counter_table(
	name text,
	retention interval DEFAULT NULL,
	target_fpp double precision DEFAULT NULL,
	expected_rate double precision DEFAULT 1000,
	shards integer DEFAULT 16,
	nbits integer DEFAULT NULL,
	nhashes integer DEFAULT NULL,
	npast integer DEFAULT NULL,
	filter text DEFAULT 'bloom',
	max_streams integer DEFAULT NULL)
	RETURNS regclass
	LANGUAGE sql VOLATILE PARALLEL UNSAFE
BEGIN ATOMIC
	-- Bound when created, and run with the caller's search_path: a name
	-- without a schema is qualified with the caller's current schema, where
	-- CREATE TABLE would put it (none: fbf_create_window refuses it).
	SELECT @extschema@.fbf_create_window('counter',
		CASE WHEN pg_catalog.array_length(pg_catalog.parse_ident(name), 1) OPERATOR(pg_catalog.=) 1
			 THEN COALESCE(pg_catalog.quote_ident(pg_catalog.current_schema())
						   OPERATOR(pg_catalog.||) '.', '') OPERATOR(pg_catalog.||) name
			 ELSE name END,
		retention, target_fpp, expected_rate, shards, nbits, nhashes, npast, filter,
		max_streams);
END;

COMMENT ON FUNCTION fbf_create_counter_table(text, interval, double precision, double precision, integer, integer, integer, integer, text, integer) IS
	'create a counter table (key, shard, value) with its operation filter';

CREATE FUNCTION idempotent_increment(counter regclass, client_id bigint, seq bigint, delta bigint)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_increment_int8'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment(counter regclass, client_id text, seq bigint, delta bigint)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_increment_text'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment(counter regclass, client_id uuid, seq bigint, delta bigint)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_increment_uuid'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment(counter regclass, key text, client_id bigint, seq bigint, delta bigint)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_increment_int8'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment(counter regclass, key text, client_id text, seq bigint, delta bigint)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_increment_text'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment(counter regclass, key text, client_id uuid, seq bigint, delta bigint)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_increment_uuid'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotent_increment(regclass, bigint, bigint, bigint) IS
	'add delta to the counter''s default key once per (client_id, seq); true if applied, false if a duplicate';
COMMENT ON FUNCTION idempotent_increment(regclass, text, bigint, bigint) IS
	'add delta to the counter''s default key once per (client_id, seq); true if applied, false if a duplicate';
COMMENT ON FUNCTION idempotent_increment(regclass, uuid, bigint, bigint) IS
	'add delta to the counter''s default key once per (client_id, seq); true if applied, false if a duplicate';
COMMENT ON FUNCTION idempotent_increment(regclass, text, bigint, bigint, bigint) IS
	'add delta to key once per (client_id, seq); true if applied, false if a duplicate';
COMMENT ON FUNCTION idempotent_increment(regclass, text, text, bigint, bigint) IS
	'add delta to key once per (client_id, seq); true if applied, false if a duplicate';
COMMENT ON FUNCTION idempotent_increment(regclass, text, uuid, bigint, bigint) IS
	'add delta to key once per (client_id, seq); true if applied, false if a duplicate';

-- The outcome on a retry: applied, and the key's value after the call.
CREATE FUNCTION idempotent_increment_outcome(counter regclass, client_id bigint, seq bigint, delta bigint,
	OUT applied boolean, OUT value bigint)
	AS 'MODULE_PATHNAME', 'fbf_increment_outcome_int8'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment_outcome(counter regclass, client_id text, seq bigint, delta bigint,
	OUT applied boolean, OUT value bigint)
	AS 'MODULE_PATHNAME', 'fbf_increment_outcome_text'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment_outcome(counter regclass, client_id uuid, seq bigint, delta bigint,
	OUT applied boolean, OUT value bigint)
	AS 'MODULE_PATHNAME', 'fbf_increment_outcome_uuid'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment_outcome(counter regclass, key text, client_id bigint, seq bigint, delta bigint,
	OUT applied boolean, OUT value bigint)
	AS 'MODULE_PATHNAME', 'fbf_increment_outcome_int8'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment_outcome(counter regclass, key text, client_id text, seq bigint, delta bigint,
	OUT applied boolean, OUT value bigint)
	AS 'MODULE_PATHNAME', 'fbf_increment_outcome_text'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment_outcome(counter regclass, key text, client_id uuid, seq bigint, delta bigint,
	OUT applied boolean, OUT value bigint)
	AS 'MODULE_PATHNAME', 'fbf_increment_outcome_uuid'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotent_increment_outcome(regclass, bigint, bigint, bigint) IS
	'idempotent_increment on the default key, and the key''s value after the call (applied or not)';
COMMENT ON FUNCTION idempotent_increment_outcome(regclass, text, bigint, bigint) IS
	'idempotent_increment on the default key, and the key''s value after the call (applied or not)';
COMMENT ON FUNCTION idempotent_increment_outcome(regclass, uuid, bigint, bigint) IS
	'idempotent_increment on the default key, and the key''s value after the call (applied or not)';
COMMENT ON FUNCTION idempotent_increment_outcome(regclass, text, bigint, bigint, bigint) IS
	'idempotent_increment on key, and the key''s value after the call (applied or not)';
COMMENT ON FUNCTION idempotent_increment_outcome(regclass, text, text, bigint, bigint) IS
	'idempotent_increment on key, and the key''s value after the call (applied or not)';
COMMENT ON FUNCTION idempotent_increment_outcome(regclass, text, uuid, bigint, bigint) IS
	'idempotent_increment on key, and the key''s value after the call (applied or not)';

-- Batches: operation i is (client_ids[i], seqs[i]) adding deltas[i].
CREATE FUNCTION idempotent_increment(counter regclass, client_ids bigint[], seqs bigint[], deltas bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_increment_batch_int8'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment(counter regclass, client_ids text[], seqs bigint[], deltas bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_increment_batch_text'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment(counter regclass, client_ids uuid[], seqs bigint[], deltas bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_increment_batch_uuid'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment(counter regclass, key text, client_ids bigint[], seqs bigint[], deltas bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_increment_batch_int8'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment(counter regclass, key text, client_ids text[], seqs bigint[], deltas bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_increment_batch_text'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment(counter regclass, key text, client_ids uuid[], seqs bigint[], deltas bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_increment_batch_uuid'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotent_increment(regclass, bigint[], bigint[], bigint[]) IS
	'a batch on the default key: operation i adds deltas[i] once per (client_ids[i], seqs[i]); element i is true if it applied';
COMMENT ON FUNCTION idempotent_increment(regclass, text[], bigint[], bigint[]) IS
	'a batch on the default key: operation i adds deltas[i] once per (client_ids[i], seqs[i]); element i is true if it applied';
COMMENT ON FUNCTION idempotent_increment(regclass, uuid[], bigint[], bigint[]) IS
	'a batch on the default key: operation i adds deltas[i] once per (client_ids[i], seqs[i]); element i is true if it applied';
COMMENT ON FUNCTION idempotent_increment(regclass, text, bigint[], bigint[], bigint[]) IS
	'a batch on key: operation i adds deltas[i] once per (client_ids[i], seqs[i]); element i is true if it applied';
COMMENT ON FUNCTION idempotent_increment(regclass, text, text[], bigint[], bigint[]) IS
	'a batch on key: operation i adds deltas[i] once per (client_ids[i], seqs[i]); element i is true if it applied';
COMMENT ON FUNCTION idempotent_increment(regclass, text, uuid[], bigint[], bigint[]) IS
	'a batch on key: operation i adds deltas[i] once per (client_ids[i], seqs[i]); element i is true if it applied';

CREATE FUNCTION fbf_operation(client_id bigint, seq bigint) RETURNS bytea
	AS 'MODULE_PATHNAME', 'fbf_operation_int8'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_operation(client_id text, seq bigint) RETURNS bytea
	AS 'MODULE_PATHNAME', 'fbf_operation_text'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_operation(client_id uuid, seq bigint) RETURNS bytea
	AS 'MODULE_PATHNAME', 'fbf_operation_uuid'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_operation(bigint, bigint) IS
	'the identity of an operation on the default key as the counter filters hash it (for fbf_contains on fbf_snapshot)';
COMMENT ON FUNCTION fbf_operation(text, bigint) IS
	'the identity of an operation on the default key as the counter filters hash it (for fbf_contains on fbf_snapshot)';
COMMENT ON FUNCTION fbf_operation(uuid, bigint) IS
	'the identity of an operation on the default key as the counter filters hash it (for fbf_contains on fbf_snapshot)';

CREATE FUNCTION fbf_operation(key text, client_id bigint, seq bigint) RETURNS bytea
	AS 'MODULE_PATHNAME', 'fbf_operation_int8'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_operation(key text, client_id text, seq bigint) RETURNS bytea
	AS 'MODULE_PATHNAME', 'fbf_operation_text'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_operation(key text, client_id uuid, seq bigint) RETURNS bytea
	AS 'MODULE_PATHNAME', 'fbf_operation_uuid'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_operation(text, bigint, bigint) IS
	'the identity of an operation on key as the counter filters hash it (for fbf_contains on fbf_snapshot)';
COMMENT ON FUNCTION fbf_operation(text, text, bigint) IS
	'the identity of an operation on key as the counter filters hash it (for fbf_contains on fbf_snapshot)';
COMMENT ON FUNCTION fbf_operation(text, uuid, bigint) IS
	'the identity of an operation on key as the counter filters hash it (for fbf_contains on fbf_snapshot)';

CREATE FUNCTION fbf_counter_value(counter regclass, key text DEFAULT '')
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'fbf_counter_value'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION fbf_counter_value(regclass, text) IS
	'value of a counter key: the sum of its shard rows';

CREATE FUNCTION fbf_snapshot(counter regclass)
	RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_snapshot'
	LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION fbf_snapshot(regclass) IS
	'the counter table''s live operation filter as an fbf value';

CREATE FUNCTION fbf_counter_maintain(counter regclass)
	RETURNS text
	AS 'MODULE_PATHNAME', 'fbf_counter_maintain'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION fbf_counter_maintain(regclass) IS
	'run one maintenance pass (refresh if due, drain, one AIMD step) now; returns grow, shrink or hold';

CREATE FUNCTION fbf_counter_resize(counter regclass, filters integer)
	RETURNS integer
	AS 'MODULE_PATHNAME', 'fbf_counter_resize'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION fbf_counter_resize(regclass, integer) IS
	'resize the counter''s ring of filters now, as far as the retention allows; returns the number of filters';

CREATE FUNCTION fbf_local_counter_stats(
	OUT counter regclass,
	OUT filters integer,
	OUT live_filters integer,
	OUT period interval,
	OUT retention interval,
	OUT nbits bigint,
	OUT nhashes integer,
	OUT partitions integer,
	OUT elements bigint[],
	OUT estimated_fpp double precision,
	OUT target_fpp double precision,
	OUT applied bigint,
	OUT dismissed bigint,
	OUT bytes bigint,
	OUT last_refresh timestamptz,
	OUT resizes bigint,
	OUT capped boolean,
	OUT pending bigint,
	OUT mismatched bigint,
	OUT filter text,
	OUT load double precision,
	OUT fingerprint_bits integer,
	OUT streams bigint,
	OUT stream_capacity bigint,
	OUT stream_evictions bigint,
	OUT exact_answers bigint,
	OUT filter_answers bigint,
	OUT dismissals_averted bigint,
	OUT streams_exact_from timestamptz)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'fbf_counter_stats'
	LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION fbf_local_counter_stats() IS
	'one row per counter or dedup table of this database (on a Citus node: its shard tables, not the shells) that the user may read';

-- For fbf_shard_window_stats, on each node: the rows of
-- fbf_local_counter_stats() (dedup false) or fbf_local_dedup_stats()
-- (dedup true) for the shard tables named by schema and name, each with
-- the number the caller gave it, as a json array of [number, row].  The
-- tables are looked up in the catalogs, not through the caller's
-- search_path or schema privileges (the rows are the local functions',
-- which check the caller's SELECT on each); the rows' floats and intervals
-- are written as the coordinator reads them back, whatever the node's
-- settings.
CREATE FUNCTION fbf_local_shard_stats(
	dedup boolean, ords integer[], schemas name[], tables name[])
	RETURNS json
	LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	SET extra_float_digits = 1
	SET intervalstyle = postgres
	AS $fn$
DECLARE
	result json;
BEGIN
	IF dedup THEN
		SELECT json_agg(json_build_array(n.ord, row_to_json(s)) ORDER BY n.ord) INTO result
		  FROM ROWS FROM (unnest(ords), unnest(schemas), unnest(tables)) AS n(ord, nsp, rel)
		  JOIN pg_namespace ns ON ns.nspname = n.nsp
		  JOIN pg_class c ON c.relnamespace = ns.oid AND c.relname = n.rel
		  JOIN @extschema@.fbf_local_dedup_stats() s ON s.dedup::oid = c.oid;
	ELSE
		SELECT json_agg(json_build_array(n.ord, row_to_json(s)) ORDER BY n.ord) INTO result
		  FROM ROWS FROM (unnest(ords), unnest(schemas), unnest(tables)) AS n(ord, nsp, rel)
		  JOIN pg_namespace ns ON ns.nspname = n.nsp
		  JOIN pg_class c ON c.relnamespace = ns.oid AND c.relname = n.rel
		  JOIN @extschema@.fbf_local_counter_stats() s ON s.counter::oid = c.oid;
	END IF;
	RETURN COALESCE(result, '[]');
END
$fn$;

COMMENT ON FUNCTION fbf_local_shard_stats(boolean, integer[], name[], name[]) IS
	'the rows of this node''s counter (or dedup) statistics for the shard tables named, numbered as given; for fbf_shard_window_stats';

-- The windows of the shards of every distributed counter (dedup false) or
-- dedup table (dedup true) the user may read, for fbf_counter_stats and
-- fbf_dedup_stats on a Citus coordinator: a row per shard placement, with
-- its distributed table, shard and node, and the row its node's
-- fbf_local_counter_stats() (fbf_local_dedup_stats()) gives the shard, as
-- jsonb.  One command per node (fbf_local_shard_stats), sent to the nodes
-- at once (master_run_on_worker): a node reads each of its windows once,
-- however many shards it holds.  A shard the caller may not read on its
-- node has no row.
CREATE FUNCTION fbf_shard_window_stats(
	dedup boolean,
	OUT relid regclass,
	OUT shardid bigint,
	OUT shard text,
	OUT node_name text,
	OUT node_port integer,
	OUT stats jsonb)
	RETURNS SETOF record
	LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	relids regclass[];
	shardids bigint[];
	shards text[];
	names text[];
	ports integer[];
	commands text[];
	r record;
	e json;
	i integer;
BEGIN
	-- (apart: without Citus, its catalogs do not exist to be planned)
	IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
		RETURN;
	END IF;
	-- the placements, numbered; the node is told each shard's number,
	-- schema and name, and answers with the numbers
	WITH placements AS MATERIALIZED (
		SELECT row_number() OVER (ORDER BY sh.logicalrelid, sh.shardid,
										   d.nodename, d.nodeport)::integer AS ord,
			   sh.logicalrelid, sh.shardid, d.nodename, d.nodeport, ns.nspname,
			   shard_name(sh.logicalrelid, sh.shardid) AS shard
		  FROM pg_dist_partition p
		  JOIN pg_class rel ON rel.oid = p.logicalrelid
		  JOIN pg_namespace ns ON ns.oid = rel.relnamespace
		  JOIN pg_dist_shard sh ON sh.logicalrelid = p.logicalrelid
		  JOIN pg_dist_placement pl ON pl.shardid = sh.shardid
		  JOIN pg_dist_node d ON d.groupid = pl.groupid AND d.noderole = 'primary'
		 WHERE EXISTS (SELECT FROM pg_index i
						 JOIN pg_class ic ON ic.oid = i.indexrelid
						 JOIN pg_am a ON a.oid = ic.relam
						WHERE i.indrelid = p.logicalrelid AND a.amname = 'fbf_filter'
						  AND ('kind=dedup' = ANY (COALESCE(ic.reloptions, '{}'))) = dedup)
		   AND has_table_privilege(p.logicalrelid, 'SELECT'))
	SELECT (SELECT array_agg(logicalrelid ORDER BY ord) FROM placements),
		   (SELECT array_agg(placements.shardid ORDER BY ord) FROM placements),
		   (SELECT array_agg(placements.shard ORDER BY ord) FROM placements),
		   array_agg(per_node.nodename), array_agg(per_node.nodeport),
		   array_agg(format('SELECT %s.fbf_local_shard_stats(%L::pg_catalog.bool, '
							'%L::pg_catalog.int4[], %L::pg_catalog.name[], %L::pg_catalog.name[])',
							'@extschema@', dedup, per_node.ords, per_node.nsps, per_node.rels))
	  INTO relids, shardids, shards, names, ports, commands
	  FROM (SELECT nodename, nodeport, array_agg(ord ORDER BY ord) AS ords,
				   array_agg(nspname ORDER BY ord) AS nsps,
				   array_agg((parse_ident(placements.shard))[cardinality(parse_ident(placements.shard))]
							 ORDER BY ord) AS rels
			  FROM placements GROUP BY nodename, nodeport) per_node;
	IF names IS NULL THEN
		RETURN;
	END IF;
	FOR r IN SELECT * FROM master_run_on_worker(names, ports, commands, true)
	LOOP
		IF NOT r.success THEN
			RAISE EXCEPTION 'could not read the windows of the shards on %:%: %',
				r.node_name, r.node_port, r.result
				USING ERRCODE = 'connection_failure';
		END IF;
		node_name := r.node_name;
		node_port := r.node_port;
		FOR e IN SELECT json_array_elements(r.result::json)
		LOOP
			i := (e->>0)::integer;
			relid := relids[i];
			shardid := shardids[i];
			shard := shards[i];
			stats := (e->1)::jsonb;
			RETURN NEXT;
		END LOOP;
	END LOOP;
END
$fn$;

COMMENT ON FUNCTION fbf_shard_window_stats(boolean) IS
	'the rows the nodes of a Citus cluster give for the shards of its distributed counters (or dedup tables) the user may read; for fbf_counter_stats and fbf_dedup_stats';

-- Every counter the user may read: this node's (fbf_local_counter_stats),
-- and on a Citus coordinator each shard of every distributed counter, read
-- on the shard's node, as a row of the distributed table with the node and
-- the shard table named.  On a worker, its shard tables are its own rows.
CREATE FUNCTION fbf_counter_stats(
	OUT counter regclass,
	OUT filters integer,
	OUT live_filters integer,
	OUT period interval,
	OUT retention interval,
	OUT nbits bigint,
	OUT nhashes integer,
	OUT partitions integer,
	OUT elements bigint[],
	OUT estimated_fpp double precision,
	OUT target_fpp double precision,
	OUT applied bigint,
	OUT dismissed bigint,
	OUT bytes bigint,
	OUT last_refresh timestamptz,
	OUT resizes bigint,
	OUT capped boolean,
	OUT pending bigint,
	OUT mismatched bigint,
	OUT filter text,
	OUT load double precision,
	OUT fingerprint_bits integer,
	OUT streams bigint,
	OUT stream_capacity bigint,
	OUT stream_evictions bigint,
	OUT exact_answers bigint,
	OUT filter_answers bigint,
	OUT dismissals_averted bigint,
	OUT streams_exact_from timestamptz,
	OUT node_name text,
	OUT node_port integer,
	OUT shard text)
	RETURNS SETOF record
	LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	r record;
BEGIN
	RETURN QUERY SELECT l.*, NULL::text, NULL::integer, NULL::text
				   FROM @extschema@.fbf_local_counter_stats() l;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
		RETURN;
	END IF;
	-- (apart: without Citus, its functions do not exist to be planned)
	IF NOT pg_catalog.citus_is_coordinator() THEN
		RETURN;
	END IF;
	-- each shard's row, read on its node
	FOR r IN SELECT * FROM @extschema@.fbf_shard_window_stats(false)
			  ORDER BY relid, shardid, node_name, node_port
	LOOP
		SELECT * INTO counter, filters, live_filters, period, retention, nbits, nhashes,
				partitions, elements, estimated_fpp, target_fpp, applied, dismissed, bytes,
				last_refresh, resizes, capped, pending, mismatched, filter, load,
				fingerprint_bits, streams, stream_capacity, stream_evictions,
				exact_answers, filter_answers, dismissals_averted, streams_exact_from,
				node_name, node_port, shard
		  FROM pg_catalog.jsonb_populate_record(NULL::@extschema@.fbf_counter_stats,
												 r.stats - 'counter');
		counter := r.relid;
		node_name := r.node_name;
		node_port := r.node_port;
		shard := r.shard;
		RETURN NEXT;
	END LOOP;
END
$fn$;

COMMENT ON FUNCTION fbf_counter_stats() IS
	'one row per counter table the user may read, and on a Citus coordinator one per shard of each distributed counter';

CREATE VIEW fbf_counter_stats AS SELECT * FROM fbf_counter_stats();

COMMENT ON VIEW fbf_counter_stats IS
	'counter tables and their operation filters: shape, window, accuracy, activity';

-- rows are filtered by the caller's SELECT privilege on each counter table
GRANT SELECT ON fbf_counter_stats TO PUBLIC;

------------------------------------------------------------------------
-- Dedup tables: claim an id once ("process this message once")
------------------------------------------------------------------------

CREATE FUNCTION fbf_create_dedup(
	name text,
	retention interval DEFAULT NULL,
	target_fpp double precision DEFAULT NULL,
	expected_rate double precision DEFAULT 1000,
	nbits integer DEFAULT NULL,
	nhashes integer DEFAULT NULL,
	npast integer DEFAULT NULL,
	filter text DEFAULT 'bloom',
	max_streams integer DEFAULT NULL)
	RETURNS regclass
	LANGUAGE sql VOLATILE PARALLEL UNSAFE
BEGIN ATOMIC
	-- Bound when created, and run with the caller's search_path: a name
	-- without a schema is qualified with the caller's current schema, where
	-- CREATE TABLE would put it (none: fbf_create_window refuses it).
	SELECT @extschema@.fbf_create_window('dedup',
		CASE WHEN pg_catalog.array_length(pg_catalog.parse_ident(name), 1) OPERATOR(pg_catalog.=) 1
			 THEN COALESCE(pg_catalog.quote_ident(pg_catalog.current_schema())
						   OPERATOR(pg_catalog.||) '.', '') OPERATOR(pg_catalog.||) name
			 ELSE name END,
		retention, target_fpp, expected_rate, 16, nbits, nhashes, npast, filter,
		max_streams);
END;

COMMENT ON FUNCTION fbf_create_dedup(text, interval, double precision, double precision, integer, integer, integer, text, integer) IS
	'create a dedup table: fbf_claim on it returns true once per id within the retention';

CREATE FUNCTION fbf_claim(dedup regclass, id bigint) RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_claim_int8'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_claim(dedup regclass, id text) RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_claim_text'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_claim(dedup regclass, id bytea) RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_claim_bytea'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_claim(dedup regclass, id uuid) RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_claim_uuid'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_claim(dedup regclass, client_id bigint, seq bigint) RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_claim_op'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_claim(dedup regclass, client_id text, seq bigint) RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_claim_op'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_claim(dedup regclass, client_id uuid, seq bigint) RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_claim_op'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_claim(dedup regclass, ids bigint[]) RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_claim_array'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_claim(dedup regclass, ids text[]) RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_claim_array'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_claim(dedup regclass, ids bytea[]) RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_claim_array'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_claim(dedup regclass, ids uuid[]) RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_claim_array'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_claim(dedup regclass, client_ids bigint[], seqs bigint[]) RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_claim_op_array'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_claim(dedup regclass, client_ids text[], seqs bigint[]) RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_claim_op_array'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_claim(dedup regclass, client_ids uuid[], seqs bigint[]) RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_claim_op_array'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION fbf_claim(regclass, bigint) IS
	'claim id in the dedup table: true the first time within the retention, false after';
COMMENT ON FUNCTION fbf_claim(regclass, text) IS
	'claim id in the dedup table: true the first time within the retention, false after';
COMMENT ON FUNCTION fbf_claim(regclass, bytea) IS
	'claim id in the dedup table: true the first time within the retention, false after';
COMMENT ON FUNCTION fbf_claim(regclass, uuid) IS
	'claim id in the dedup table: true the first time within the retention, false after';
COMMENT ON FUNCTION fbf_claim(regclass, bigint, bigint) IS
	'claim (client_id, seq) in the dedup table: true the first time within the retention, false after';
COMMENT ON FUNCTION fbf_claim(regclass, text, bigint) IS
	'claim (client_id, seq) in the dedup table: true the first time within the retention, false after';
COMMENT ON FUNCTION fbf_claim(regclass, uuid, bigint) IS
	'claim (client_id, seq) in the dedup table: true the first time within the retention, false after';
COMMENT ON FUNCTION fbf_claim(regclass, bigint[]) IS
	'claim every id in the dedup table; element i is fbf_claim(dedup, ids[i]), ids claimed in order';
COMMENT ON FUNCTION fbf_claim(regclass, text[]) IS
	'claim every id in the dedup table; element i is fbf_claim(dedup, ids[i]), ids claimed in order';
COMMENT ON FUNCTION fbf_claim(regclass, bytea[]) IS
	'claim every id in the dedup table; element i is fbf_claim(dedup, ids[i]), ids claimed in order';
COMMENT ON FUNCTION fbf_claim(regclass, uuid[]) IS
	'claim every id in the dedup table; element i is fbf_claim(dedup, ids[i]), ids claimed in order';
COMMENT ON FUNCTION fbf_claim(regclass, bigint[], bigint[]) IS
	'claim every (client_ids[i], seqs[i]) in the dedup table; element i is its answer';
COMMENT ON FUNCTION fbf_claim(regclass, text[], bigint[]) IS
	'claim every (client_ids[i], seqs[i]) in the dedup table; element i is its answer';
COMMENT ON FUNCTION fbf_claim(regclass, uuid[], bigint[]) IS
	'claim every (client_ids[i], seqs[i]) in the dedup table; element i is its answer';

CREATE FUNCTION fbf_claim_id(id bigint) RETURNS bytea
	AS 'MODULE_PATHNAME', 'fbf_claim_id_int8'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_claim_id(id text) RETURNS bytea
	AS 'MODULE_PATHNAME', 'fbf_claim_id_text'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_claim_id(id bytea) RETURNS bytea
	AS 'MODULE_PATHNAME', 'fbf_claim_id_bytea'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_claim_id(id uuid) RETURNS bytea
	AS 'MODULE_PATHNAME', 'fbf_claim_id_uuid'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_claim_id(client_id bigint, seq bigint) RETURNS bytea
	AS 'MODULE_PATHNAME', 'fbf_operation_int8'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_claim_id(client_id text, seq bigint) RETURNS bytea
	AS 'MODULE_PATHNAME', 'fbf_operation_text'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_claim_id(client_id uuid, seq bigint) RETURNS bytea
	AS 'MODULE_PATHNAME', 'fbf_operation_uuid'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_claim_id(bigint) IS
	'the identity of a claimed id as dedup windows hash it (for fbf_contains on fbf_snapshot)';
COMMENT ON FUNCTION fbf_claim_id(text) IS
	'the identity of a claimed id as dedup windows hash it (for fbf_contains on fbf_snapshot)';
COMMENT ON FUNCTION fbf_claim_id(bytea) IS
	'the identity of a claimed id as dedup windows hash it (for fbf_contains on fbf_snapshot)';
COMMENT ON FUNCTION fbf_claim_id(uuid) IS
	'the identity of a claimed id as dedup windows hash it (for fbf_contains on fbf_snapshot)';
COMMENT ON FUNCTION fbf_claim_id(bigint, bigint) IS
	'the identity of a claimed (client_id, seq) as dedup windows hash it (for fbf_contains on fbf_snapshot)';
COMMENT ON FUNCTION fbf_claim_id(text, bigint) IS
	'the identity of a claimed (client_id, seq) as dedup windows hash it (for fbf_contains on fbf_snapshot)';
COMMENT ON FUNCTION fbf_claim_id(uuid, bigint) IS
	'the identity of a claimed (client_id, seq) as dedup windows hash it (for fbf_contains on fbf_snapshot)';

CREATE FUNCTION fbf_local_dedup_stats(
	OUT dedup regclass,
	OUT filters integer,
	OUT live_filters integer,
	OUT period interval,
	OUT retention interval,
	OUT nbits bigint,
	OUT nhashes integer,
	OUT partitions integer,
	OUT elements bigint[],
	OUT estimated_fpp double precision,
	OUT target_fpp double precision,
	OUT claimed bigint,
	OUT duplicates bigint,
	OUT bytes bigint,
	OUT last_refresh timestamptz,
	OUT resizes bigint,
	OUT capped boolean,
	OUT pending bigint,
	OUT filter text,
	OUT load double precision,
	OUT fingerprint_bits integer,
	OUT streams bigint,
	OUT stream_capacity bigint,
	OUT stream_evictions bigint,
	OUT exact_answers bigint,
	OUT filter_answers bigint,
	OUT dismissals_averted bigint,
	OUT streams_exact_from timestamptz)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'fbf_dedup_stats'
	LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION fbf_local_dedup_stats() IS
	'one row per dedup table of this database (on a Citus node: its shard tables, not the shells) that the user may read';

-- Every dedup table the user may read: this node's (fbf_local_dedup_stats),
-- and on a Citus coordinator each shard of every distributed dedup table,
-- read on the shard's node, as a row of the distributed table with the
-- node and the shard table named (as fbf_counter_stats for counters).
CREATE FUNCTION fbf_dedup_stats(
	OUT dedup regclass,
	OUT filters integer,
	OUT live_filters integer,
	OUT period interval,
	OUT retention interval,
	OUT nbits bigint,
	OUT nhashes integer,
	OUT partitions integer,
	OUT elements bigint[],
	OUT estimated_fpp double precision,
	OUT target_fpp double precision,
	OUT claimed bigint,
	OUT duplicates bigint,
	OUT bytes bigint,
	OUT last_refresh timestamptz,
	OUT resizes bigint,
	OUT capped boolean,
	OUT pending bigint,
	OUT filter text,
	OUT load double precision,
	OUT fingerprint_bits integer,
	OUT streams bigint,
	OUT stream_capacity bigint,
	OUT stream_evictions bigint,
	OUT exact_answers bigint,
	OUT filter_answers bigint,
	OUT dismissals_averted bigint,
	OUT streams_exact_from timestamptz,
	OUT node_name text,
	OUT node_port integer,
	OUT shard text)
	RETURNS SETOF record
	LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	r record;
BEGIN
	RETURN QUERY SELECT l.*, NULL::text, NULL::integer, NULL::text
				   FROM @extschema@.fbf_local_dedup_stats() l;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
		RETURN;
	END IF;
	-- (apart: without Citus, its functions do not exist to be planned)
	IF NOT pg_catalog.citus_is_coordinator() THEN
		RETURN;
	END IF;
	-- each shard's row, read on its node
	FOR r IN SELECT * FROM @extschema@.fbf_shard_window_stats(true)
			  ORDER BY relid, shardid, node_name, node_port
	LOOP
		SELECT * INTO dedup, filters, live_filters, period, retention, nbits, nhashes,
				partitions, elements, estimated_fpp, target_fpp, claimed, duplicates, bytes,
				last_refresh, resizes, capped, pending, filter, load, fingerprint_bits,
				streams, stream_capacity, stream_evictions, exact_answers,
				filter_answers, dismissals_averted, streams_exact_from,
				node_name, node_port, shard
		  FROM pg_catalog.jsonb_populate_record(NULL::@extschema@.fbf_dedup_stats,
												 r.stats - 'dedup');
		dedup := r.relid;
		node_name := r.node_name;
		node_port := r.node_port;
		shard := r.shard;
		RETURN NEXT;
	END LOOP;
END
$fn$;

COMMENT ON FUNCTION fbf_dedup_stats() IS
	'one row per dedup table the user may read, and on a Citus coordinator one per shard of each distributed dedup table';

CREATE VIEW fbf_dedup_stats AS SELECT * FROM fbf_dedup_stats();

COMMENT ON VIEW fbf_dedup_stats IS
	'dedup tables and their windows: shape, accuracy, claims and duplicates';

-- rows are filtered by the caller's SELECT privilege on each dedup table
GRANT SELECT ON fbf_dedup_stats TO PUBLIC;

------------------------------------------------------------------------
-- Keeping a counter's memory across dump and restore
------------------------------------------------------------------------

CREATE FUNCTION fbf_counter_load(counter regclass, snapshot fbf)
	RETURNS text
	AS 'MODULE_PATHNAME', 'fbf_counter_load'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION fbf_counter_load(regclass, fbf) IS
	'merge a snapshot (as fbf_snapshot returns it) into the counter''s filter, aligned on time; returns adopted, merged or expired';

-- Saving snapshots for a dump: fbf_counter_save returns them, the caller
-- keeps them in a table of its own, which pg_dump carries like any other
-- (with its owner's privileges), and fbf_counter_restore loads them back.
-- Only plain tables are counters: an fbf_filter index an older version let
-- a materialized view or a partitioned table carry is skipped, as are
-- temporary tables (another session's cannot be read) and, saving every
-- counter, the tables Citus distributes (with a notice) and the shards of
-- them a node holds (saved when named).
CREATE FUNCTION fbf_counter_save(counter regclass DEFAULT NULL,
								 OUT name text, OUT snapshot fbf, OUT saved_at timestamptz)
	RETURNS SETOF record
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	-- Citus hides the shard tables of a node from client sessions' reads of
	-- pg_class: a shard named here must be found (a placeholder without Citus)
	SET citus.override_table_visibility = off
	AS $fn$
DECLARE
	one regclass := counter;
	-- the table as messages name it (a regclass would print qualified here)
	shown text := (SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = one);
	r record;
	saved integer := 0;
	shells oid[];
	shards oid[];
BEGIN
	-- an oid of no relation (a regclass made of a number)
	IF one IS NOT NULL AND shown IS NULL THEN
		RAISE EXCEPTION 'relation with OID % does not exist', one::pg_catalog.oid
			USING ERRCODE = 'undefined_table';
	END IF;
	IF one IS NOT NULL AND pg_catalog.pg_has_role(
			(SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = one), 'USAGE') IS NOT TRUE THEN
		RAISE EXCEPTION 'must be owner of table %', shown
			USING ERRCODE = 'insufficient_privilege';
	END IF;
	-- a table distributed by Citus has its operations in its shards'
	-- windows, on the nodes that hold them: its shell (on the coordinator,
	-- and on workers that have the metadata) has none to save; the shards
	-- a node holds are saved only when named (a logical dump has no shards
	-- to restore them into)
	IF one IS NULL AND EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
		EXECUTE 'SELECT pg_catalog.array_agg(logicalrelid::pg_catalog.oid)
				   FROM pg_catalog.pg_dist_partition' INTO shells;
		EXECUTE 'SELECT pg_catalog.array_agg(c.oid)
				   FROM pg_catalog.pg_class c
				  WHERE c.relkind = ''r''
					AND pg_catalog.relation_is_a_known_shard(c.oid)' INTO shards;
	END IF;
	FOR r IN
		SELECT c.oid::pg_catalog.regclass AS rel,
			   pg_catalog.format('%I.%I', n.nspname, c.relname) AS relname,
			   COALESCE(c.oid = ANY (shells), false) AS shell
		FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE (one IS NULL OR c.oid = one)
		  AND c.oid <> ALL (COALESCE(shards, '{}'))
		  AND c.relkind = 'r'
		  AND c.relpersistence <> 't'
		  AND pg_catalog.pg_has_role(c.relowner, 'USAGE')
		  AND EXISTS (SELECT FROM pg_catalog.pg_index i
					  JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
					  JOIN pg_catalog.pg_am a ON a.oid = ic.relam
					  WHERE i.indrelid = c.oid AND i.indisvalid
						AND a.amname = 'fbf_filter')
		ORDER BY 2
	LOOP
		IF r.shell THEN
			RAISE NOTICE 'table % is distributed by Citus and is not saved', r.relname
				USING DETAIL = 'Its operations are remembered in its shards'' windows, which Citus shard moves, splits and the rebalancer carry, as does a physical backup of each node; a logical dump does not.';
			CONTINUE;
		END IF;
		name := r.relname;
		snapshot := @extschema@.fbf_snapshot(r.rel);
		saved_at := pg_catalog.clock_timestamp();
		saved := saved + 1;
		RETURN NEXT;
	END LOOP;
	IF one IS NOT NULL AND saved = 0 THEN
		RAISE EXCEPTION '"%" is not a counter or dedup table', shown
			USING ERRCODE = 'wrong_object_type',
				  HINT = 'Create counter tables with fbf_create_counter_table() and dedup tables with fbf_create_dedup().';
	END IF;
END
$fn$;

COMMENT ON FUNCTION fbf_counter_save(regclass) IS
	'the snapshot of a counter or dedup table (NULL: of every one the user owns), one row each, to keep in a table that pg_dump carries';

CREATE FUNCTION fbf_counter_restore(saved regclass,
									OUT name text, OUT saved_at timestamptz, OUT outcome text)
	RETURNS SETOF record
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	r record;
	rel regclass;
BEGIN
	FOR r IN EXECUTE pg_catalog.format(
		'SELECT name, snapshot, saved_at FROM %s ORDER BY name, saved_at', saved)
	LOOP
		name := r.name;
		saved_at := r.saved_at;
		-- each row on its own: a row refused (a malformed name, a counter
		-- of another owner, a snapshot that does not fit) is reported and
		-- the next is loaded; failures of the session (a deadlock, a
		-- cancel, out of memory) still end the restore
		BEGIN
			rel := pg_catalog.to_regclass(r.name);
			IF rel IS NULL THEN
				outcome := 'no such table';
			ELSIF r.snapshot IS NULL THEN
				outcome := 'refused: the row has no snapshot';
			ELSE
				outcome := @extschema@.fbf_counter_load(rel, r.snapshot);
			END IF;
		EXCEPTION
			WHEN syntax_error_or_access_rule_violation OR data_exception OR
				 object_not_in_prerequisite_state OR program_limit_exceeded OR
				 feature_not_supported THEN
				outcome := 'refused: ' || SQLERRM;
		END;
		RETURN NEXT;
	END LOOP;
END
$fn$;

COMMENT ON FUNCTION fbf_counter_restore(regclass) IS
	'load every snapshot of a table filled from fbf_counter_save (name, snapshot, saved_at) into its counter or dedup table; one row each, with the outcome (a row refused is reported, and the others are loaded)';

------------------------------------------------------------------------
-- The cuckoo index access method: equality lookups in one bucket page
------------------------------------------------------------------------

CREATE FUNCTION cuckoo_handler(internal) RETURNS index_am_handler
	AS 'MODULE_PATHNAME', 'cuckoo_handler'
	LANGUAGE C STRICT PARALLEL SAFE;

CREATE ACCESS METHOD cuckoo TYPE INDEX HANDLER cuckoo_handler;

COMMENT ON ACCESS METHOD cuckoo IS
	'cuckoo-hashed index for equality lookups: one bucket page per probe, deleted keys stop costing heap reads';

-- Integers share a family, as for hash indexes: int2, int4 and int8 hash
-- equal values alike, so "int8col = 42" (an int8 = int4 comparison) can
-- use an index on an int8 column.
CREATE OPERATOR FAMILY integer_ops USING cuckoo;

COMMENT ON OPERATOR FAMILY integer_ops USING cuckoo IS
	'equality on int2, int4 and int8, across the three types';

CREATE OPERATOR CLASS int2_ops DEFAULT FOR TYPE int2 USING cuckoo FAMILY integer_ops AS
	OPERATOR 1 pg_catalog.= (int2, int2),
	FUNCTION 1 pg_catalog.hashint2extended(int2, int8);

CREATE OPERATOR CLASS int4_ops DEFAULT FOR TYPE int4 USING cuckoo FAMILY integer_ops AS
	OPERATOR 1 pg_catalog.= (int4, int4),
	FUNCTION 1 pg_catalog.hashint4extended(int4, int8);

CREATE OPERATOR CLASS int8_ops DEFAULT FOR TYPE int8 USING cuckoo FAMILY integer_ops AS
	OPERATOR 1 pg_catalog.= (int8, int8),
	FUNCTION 1 pg_catalog.hashint8extended(int8, int8);

ALTER OPERATOR FAMILY integer_ops USING cuckoo ADD
	OPERATOR 1 pg_catalog.= (int2, int4),
	OPERATOR 1 pg_catalog.= (int2, int8),
	OPERATOR 1 pg_catalog.= (int4, int2),
	OPERATOR 1 pg_catalog.= (int4, int8),
	OPERATOR 1 pg_catalog.= (int8, int2),
	OPERATOR 1 pg_catalog.= (int8, int4);

CREATE OPERATOR CLASS text_ops DEFAULT FOR TYPE text USING cuckoo AS
	OPERATOR 1 pg_catalog.= (text, text),
	FUNCTION 1 pg_catalog.hashtextextended(text, int8);

CREATE OPERATOR CLASS uuid_ops DEFAULT FOR TYPE uuid USING cuckoo AS
	OPERATOR 1 pg_catalog.= (uuid, uuid),
	FUNCTION 1 pg_catalog.uuid_hash_extended(uuid, int8);

COMMENT ON OPERATOR CLASS int2_ops USING cuckoo IS 'cuckoo index equality on smallint';
COMMENT ON OPERATOR CLASS int4_ops USING cuckoo IS 'cuckoo index equality on integer';
COMMENT ON OPERATOR CLASS int8_ops USING cuckoo IS 'cuckoo index equality on bigint';
COMMENT ON OPERATOR CLASS text_ops USING cuckoo IS 'cuckoo index equality on text';
COMMENT ON OPERATOR CLASS uuid_ops USING cuckoo IS 'cuckoo index equality on uuid';

-- The default operator classes of hash, under hash's names, with hash's
-- equality operators and extended hash functions (support function 2 of
-- hash is support function 1 here), and hash's cross-type families:
-- float_ops (real and double precision) and text_ops (text and name), as
-- integer_ops above.  So "USING cuckoo (col name_ops)" works as with hash,
-- and a cuckoo index answers what a hash index on the column answers.
-- Not included: hash's non-default text_pattern_ops and bpchar_pattern_ops
-- (text_ops and bpchar_ops answer the same "=").
CREATE OPERATOR FAMILY float_ops USING cuckoo;

COMMENT ON OPERATOR FAMILY float_ops USING cuckoo IS
	'equality on real and double precision, across the two types';

CREATE OPERATOR FAMILY network_ops USING cuckoo;

COMMENT ON OPERATOR FAMILY network_ops USING cuckoo IS
	'equality on inet (and cidr)';

COMMENT ON OPERATOR FAMILY text_ops USING cuckoo IS
	'equality on text and name, across the two types';

CREATE OPERATOR CLASS aclitem_ops DEFAULT FOR TYPE aclitem USING cuckoo AS
	OPERATOR 1 pg_catalog.= (aclitem, aclitem),
	FUNCTION 1 pg_catalog.hash_aclitem_extended(aclitem, int8);

CREATE OPERATOR CLASS array_ops DEFAULT FOR TYPE anyarray USING cuckoo AS
	OPERATOR 1 pg_catalog.= (anyarray, anyarray),
	FUNCTION 1 pg_catalog.hash_array_extended(anyarray, int8);

CREATE OPERATOR CLASS bpchar_ops DEFAULT FOR TYPE bpchar USING cuckoo AS
	OPERATOR 1 pg_catalog.= (bpchar, bpchar),
	FUNCTION 1 pg_catalog.hashbpcharextended(bpchar, int8);

CREATE OPERATOR CLASS char_ops DEFAULT FOR TYPE "char" USING cuckoo AS
	OPERATOR 1 pg_catalog.= ("char", "char"),
	FUNCTION 1 pg_catalog.hashcharextended("char", int8);

CREATE OPERATOR CLASS enum_ops DEFAULT FOR TYPE anyenum USING cuckoo AS
	OPERATOR 1 pg_catalog.= (anyenum, anyenum),
	FUNCTION 1 pg_catalog.hashenumextended(anyenum, int8);

CREATE OPERATOR CLASS float4_ops DEFAULT FOR TYPE float4 USING cuckoo FAMILY float_ops AS
	OPERATOR 1 pg_catalog.= (float4, float4),
	FUNCTION 1 pg_catalog.hashfloat4extended(float4, int8);

CREATE OPERATOR CLASS float8_ops DEFAULT FOR TYPE float8 USING cuckoo FAMILY float_ops AS
	OPERATOR 1 pg_catalog.= (float8, float8),
	FUNCTION 1 pg_catalog.hashfloat8extended(float8, int8);

CREATE OPERATOR CLASS inet_ops DEFAULT FOR TYPE inet USING cuckoo FAMILY network_ops AS
	OPERATOR 1 pg_catalog.= (inet, inet),
	FUNCTION 1 pg_catalog.hashinetextended(inet, int8);

CREATE OPERATOR CLASS interval_ops DEFAULT FOR TYPE interval USING cuckoo AS
	OPERATOR 1 pg_catalog.= (interval, interval),
	FUNCTION 1 pg_catalog.interval_hash_extended(interval, int8);

CREATE OPERATOR CLASS jsonb_ops DEFAULT FOR TYPE jsonb USING cuckoo AS
	OPERATOR 1 pg_catalog.= (jsonb, jsonb),
	FUNCTION 1 pg_catalog.jsonb_hash_extended(jsonb, int8);

CREATE OPERATOR CLASS macaddr_ops DEFAULT FOR TYPE macaddr USING cuckoo AS
	OPERATOR 1 pg_catalog.= (macaddr, macaddr),
	FUNCTION 1 pg_catalog.hashmacaddrextended(macaddr, int8);

CREATE OPERATOR CLASS macaddr8_ops DEFAULT FOR TYPE macaddr8 USING cuckoo AS
	OPERATOR 1 pg_catalog.= (macaddr8, macaddr8),
	FUNCTION 1 pg_catalog.hashmacaddr8extended(macaddr8, int8);

CREATE OPERATOR CLASS multirange_ops DEFAULT FOR TYPE anymultirange USING cuckoo AS
	OPERATOR 1 pg_catalog.= (anymultirange, anymultirange),
	FUNCTION 1 pg_catalog.hash_multirange_extended(anymultirange, int8);

CREATE OPERATOR CLASS name_ops DEFAULT FOR TYPE name USING cuckoo FAMILY text_ops AS
	OPERATOR 1 pg_catalog.= (name, name),
	FUNCTION 1 pg_catalog.hashnameextended(name, int8);

CREATE OPERATOR CLASS numeric_ops DEFAULT FOR TYPE numeric USING cuckoo AS
	OPERATOR 1 pg_catalog.= (numeric, numeric),
	FUNCTION 1 pg_catalog.hash_numeric_extended(numeric, int8);

CREATE OPERATOR CLASS oid_ops DEFAULT FOR TYPE oid USING cuckoo AS
	OPERATOR 1 pg_catalog.= (oid, oid),
	FUNCTION 1 pg_catalog.hashoidextended(oid, int8);

CREATE OPERATOR CLASS oidvector_ops DEFAULT FOR TYPE oidvector USING cuckoo AS
	OPERATOR 1 pg_catalog.= (oidvector, oidvector),
	FUNCTION 1 pg_catalog.hashoidvectorextended(oidvector, int8);

CREATE OPERATOR CLASS pg_lsn_ops DEFAULT FOR TYPE pg_lsn USING cuckoo AS
	OPERATOR 1 pg_catalog.= (pg_lsn, pg_lsn),
	FUNCTION 1 pg_catalog.pg_lsn_hash_extended(pg_lsn, int8);

CREATE OPERATOR CLASS range_ops DEFAULT FOR TYPE anyrange USING cuckoo AS
	OPERATOR 1 pg_catalog.= (anyrange, anyrange),
	FUNCTION 1 pg_catalog.hash_range_extended(anyrange, int8);

CREATE OPERATOR CLASS record_ops DEFAULT FOR TYPE record USING cuckoo AS
	OPERATOR 1 pg_catalog.= (record, record),
	FUNCTION 1 pg_catalog.hash_record_extended(record, int8);

CREATE OPERATOR CLASS tid_ops DEFAULT FOR TYPE tid USING cuckoo AS
	OPERATOR 1 pg_catalog.= (tid, tid),
	FUNCTION 1 pg_catalog.hashtidextended(tid, int8);

CREATE OPERATOR CLASS time_ops DEFAULT FOR TYPE time USING cuckoo AS
	OPERATOR 1 pg_catalog.= (time, time),
	FUNCTION 1 pg_catalog.time_hash_extended(time, int8);

CREATE OPERATOR CLASS timestamp_ops DEFAULT FOR TYPE timestamp USING cuckoo AS
	OPERATOR 1 pg_catalog.= (timestamp, timestamp),
	FUNCTION 1 pg_catalog.timestamp_hash_extended(timestamp, int8);

CREATE OPERATOR CLASS timetz_ops DEFAULT FOR TYPE timetz USING cuckoo AS
	OPERATOR 1 pg_catalog.= (timetz, timetz),
	FUNCTION 1 pg_catalog.timetz_hash_extended(timetz, int8);

ALTER OPERATOR FAMILY float_ops USING cuckoo ADD
	OPERATOR 1 pg_catalog.= (float4, float8),
	OPERATOR 1 pg_catalog.= (float8, float4);

ALTER OPERATOR FAMILY text_ops USING cuckoo ADD
	OPERATOR 1 pg_catalog.= (name, text),
	OPERATOR 1 pg_catalog.= (text, name);

-- PostgreSQL 18 gave these types hash functions of their own, the same
-- values as the functions of other types that hash used for them before
-- (and that older servers have): take the one the server's hash uses.
DO $$
DECLARE
	c record;
BEGIN
	FOR c IN
		SELECT * FROM (VALUES
			('bool_ops', 'bool', 'pg_catalog.hashboolextended(bool, int8)', 'pg_catalog.hashcharextended("char", int8)'),
			('bytea_ops', 'bytea', 'pg_catalog.hashbyteaextended(bytea, int8)', 'pg_catalog.hashvarlenaextended(internal, int8)'),
			('cid_ops', 'cid', 'pg_catalog.hashcidextended(cid, int8)', 'pg_catalog.hashint4extended(int4, int8)'),
			('date_ops', 'date', 'pg_catalog.hashdateextended(date, int8)', 'pg_catalog.hashint4extended(int4, int8)'),
			('timestamptz_ops', 'timestamptz', 'pg_catalog.timestamptz_hash_extended(timestamptz, int8)', 'pg_catalog.timestamp_hash_extended(timestamp, int8)'),
			('xid_ops', 'xid', 'pg_catalog.hashxidextended(xid, int8)', 'pg_catalog.hashint4extended(int4, int8)'),
			('xid8_ops', 'xid8', 'pg_catalog.hashxid8extended(xid8, int8)', 'pg_catalog.hashint8extended(int8, int8)')) AS v (opclass, type, own, shared)
	LOOP
		EXECUTE pg_catalog.format(
			'CREATE OPERATOR CLASS %I DEFAULT FOR TYPE pg_catalog.%I USING cuckoo AS '
			'OPERATOR 1 pg_catalog.= (pg_catalog.%I, pg_catalog.%I), FUNCTION 1 %s',
			c.opclass, c.type, c.type, c.type,
			CASE WHEN pg_catalog.to_regprocedure(c.own) IS NOT NULL THEN c.own ELSE c.shared END);
	END LOOP;
END
$$;

COMMENT ON OPERATOR CLASS aclitem_ops USING cuckoo IS 'cuckoo index equality on aclitem';
COMMENT ON OPERATOR CLASS array_ops USING cuckoo IS 'cuckoo index equality on arrays (of element types that hash)';
COMMENT ON OPERATOR CLASS bool_ops USING cuckoo IS 'cuckoo index equality on boolean';
COMMENT ON OPERATOR CLASS bpchar_ops USING cuckoo IS 'cuckoo index equality on character';
COMMENT ON OPERATOR CLASS bytea_ops USING cuckoo IS 'cuckoo index equality on bytea';
COMMENT ON OPERATOR CLASS char_ops USING cuckoo IS 'cuckoo index equality on "char"';
COMMENT ON OPERATOR CLASS cid_ops USING cuckoo IS 'cuckoo index equality on cid';
COMMENT ON OPERATOR CLASS date_ops USING cuckoo IS 'cuckoo index equality on date';
COMMENT ON OPERATOR CLASS enum_ops USING cuckoo IS 'cuckoo index equality on enums';
COMMENT ON OPERATOR CLASS float4_ops USING cuckoo IS 'cuckoo index equality on real';
COMMENT ON OPERATOR CLASS float8_ops USING cuckoo IS 'cuckoo index equality on double precision';
COMMENT ON OPERATOR CLASS inet_ops USING cuckoo IS 'cuckoo index equality on inet and cidr';
COMMENT ON OPERATOR CLASS interval_ops USING cuckoo IS 'cuckoo index equality on interval';
COMMENT ON OPERATOR CLASS jsonb_ops USING cuckoo IS 'cuckoo index equality on jsonb';
COMMENT ON OPERATOR CLASS macaddr8_ops USING cuckoo IS 'cuckoo index equality on macaddr8';
COMMENT ON OPERATOR CLASS macaddr_ops USING cuckoo IS 'cuckoo index equality on macaddr';
COMMENT ON OPERATOR CLASS multirange_ops USING cuckoo IS 'cuckoo index equality on multiranges';
COMMENT ON OPERATOR CLASS name_ops USING cuckoo IS 'cuckoo index equality on name';
COMMENT ON OPERATOR CLASS numeric_ops USING cuckoo IS 'cuckoo index equality on numeric';
COMMENT ON OPERATOR CLASS oid_ops USING cuckoo IS 'cuckoo index equality on oid';
COMMENT ON OPERATOR CLASS oidvector_ops USING cuckoo IS 'cuckoo index equality on oidvector';
COMMENT ON OPERATOR CLASS pg_lsn_ops USING cuckoo IS 'cuckoo index equality on pg_lsn';
COMMENT ON OPERATOR CLASS range_ops USING cuckoo IS 'cuckoo index equality on ranges';
COMMENT ON OPERATOR CLASS record_ops USING cuckoo IS 'cuckoo index equality on composite types';
COMMENT ON OPERATOR CLASS tid_ops USING cuckoo IS 'cuckoo index equality on tid';
COMMENT ON OPERATOR CLASS time_ops USING cuckoo IS 'cuckoo index equality on time';
COMMENT ON OPERATOR CLASS timestamp_ops USING cuckoo IS 'cuckoo index equality on timestamp';
COMMENT ON OPERATOR CLASS timestamptz_ops USING cuckoo IS 'cuckoo index equality on timestamp with time zone';
COMMENT ON OPERATOR CLASS timetz_ops USING cuckoo IS 'cuckoo index equality on time with time zone';
COMMENT ON OPERATOR CLASS xid8_ops USING cuckoo IS 'cuckoo index equality on xid8';
COMMENT ON OPERATOR CLASS xid_ops USING cuckoo IS 'cuckoo index equality on xid';

CREATE FUNCTION cuckoo_index_stats(
	index regclass,
	OUT pages bigint,
	OUT bucket_pages bigint,
	OUT overflow_pages bigint,
	OUT entries bigint,
	OUT overflow_entries bigint,
	OUT dead_entries bigint,
	OUT slots bigint,
	OUT load_factor double precision,
	OUT kicks bigint,
	OUT doublings integer,
	OUT fingerprint_bits integer,
	OUT bucket_size integer,
	OUT buckets_per_page integer,
	OUT max_kicks integer,
	OUT growing boolean)
	AS 'MODULE_PATHNAME', 'cuckoo_index_stats'
	LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION cuckoo_index_stats(regclass) IS
	'sizes, load factor and counters of a cuckoo index';

CREATE FUNCTION cuckoo_index_verify(
	index regclass,
	OUT pages bigint,
	OUT overflow_pages bigint,
	OUT entries bigint,
	OUT heap_tuples bigint,
	OUT dead_entries bigint)
	AS 'MODULE_PATHNAME', 'cuckoo_index_verify'
	LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION cuckoo_index_verify(regclass) IS
	'cross-check a cuckoo index against its table; raises an error on the first inconsistency';

-- ---------------------------------------------------------------------
-- Counters distributed by Citus (src/citus/citus_route.c)
-- ---------------------------------------------------------------------

-- The half of an increment that runs on the node holding the key's shard:
-- idempotent_increment on a distributed counter routes its operations
-- (their identities as the client gave them, client_ids[i], seqs[i] and
-- deltas[i] on key) here, through Citus, and they are hashed and applied
-- here as idempotent_increment on the shard table would apply them.  Left
-- executable by PUBLIC: Citus runs it as the user who increments, and it
-- checks what idempotent_increment checks (privileges, row security on the
-- key's row); it takes no hashes, so no caller can record another key's
-- operations (src/citus/citus_placement.c).
CREATE FUNCTION fbf_apply_on_placement(counter regclass, key text, client_ids bigint[],
									   seqs bigint[], deltas bigint[], want_value boolean,
									   OUT applied boolean[], OUT value bigint)
	RETURNS record
	AS 'MODULE_PATHNAME', 'fbf_apply_on_placement_int8'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_apply_on_placement(counter regclass, key text, client_ids text[],
									   seqs bigint[], deltas bigint[], want_value boolean,
									   OUT applied boolean[], OUT value bigint)
	RETURNS record
	AS 'MODULE_PATHNAME', 'fbf_apply_on_placement_text'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_apply_on_placement(counter regclass, key text, client_ids uuid[],
									   seqs bigint[], deltas bigint[], want_value boolean,
									   OUT applied boolean[], OUT value bigint)
	RETURNS record
	AS 'MODULE_PATHNAME', 'fbf_apply_on_placement_uuid'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION fbf_apply_on_placement(regclass, text, bigint[], bigint[], bigint[], boolean) IS
	'apply routed operations on the local shard of a distributed counter (internal: idempotent_increment calls it through Citus)';
COMMENT ON FUNCTION fbf_apply_on_placement(regclass, text, text[], bigint[], bigint[], boolean) IS
	'apply routed operations on the local shard of a distributed counter (internal: idempotent_increment calls it through Citus)';
COMMENT ON FUNCTION fbf_apply_on_placement(regclass, text, uuid[], bigint[], bigint[], boolean) IS
	'apply routed operations on the local shard of a distributed counter (internal: idempotent_increment calls it through Citus)';

-- The placement twins of idempotent_increment, idempotent_increment_outcome
-- and the batch form: the fast path of a counter distributed by Citus hands
-- Citus a statement that calls them on the node of the key's shard
-- (src/citus/citus_plan.c), where they apply the operations to
-- the shard table, with the front ends' checks, messages and results.
-- Left executable by PUBLIC, as fbf_apply_on_placement is, for the same
-- reasons.
CREATE FUNCTION fbf_increment_on_placement(counter regclass, key text, client_id bigint, seq bigint, delta bigint)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_increment_on_placement_int8'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_increment_on_placement(counter regclass, key text, client_id text, seq bigint, delta bigint)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_increment_on_placement_text'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_increment_on_placement(counter regclass, key text, client_id uuid, seq bigint, delta bigint)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_increment_on_placement_uuid'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_increment_on_placement(counter regclass, key text, client_ids bigint[], seqs bigint[], deltas bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_increment_batch_on_placement_int8'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_increment_on_placement(counter regclass, key text, client_ids text[], seqs bigint[], deltas bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_increment_batch_on_placement_text'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_increment_on_placement(counter regclass, key text, client_ids uuid[], seqs bigint[], deltas bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_increment_batch_on_placement_uuid'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_increment_outcome_on_placement(counter regclass, key text, client_id bigint, seq bigint, delta bigint,
	OUT applied boolean, OUT value bigint)
	AS 'MODULE_PATHNAME', 'fbf_increment_outcome_on_placement_int8'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_increment_outcome_on_placement(counter regclass, key text, client_id text, seq bigint, delta bigint,
	OUT applied boolean, OUT value bigint)
	AS 'MODULE_PATHNAME', 'fbf_increment_outcome_on_placement_text'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_increment_outcome_on_placement(counter regclass, key text, client_id uuid, seq bigint, delta bigint,
	OUT applied boolean, OUT value bigint)
	AS 'MODULE_PATHNAME', 'fbf_increment_outcome_on_placement_uuid'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION fbf_increment_on_placement(regclass, text, bigint, bigint, bigint) IS
	'idempotent_increment on the local shard of a distributed counter (internal: the Citus fast path calls it)';
COMMENT ON FUNCTION fbf_increment_on_placement(regclass, text, text, bigint, bigint) IS
	'idempotent_increment on the local shard of a distributed counter (internal: the Citus fast path calls it)';
COMMENT ON FUNCTION fbf_increment_on_placement(regclass, text, uuid, bigint, bigint) IS
	'idempotent_increment on the local shard of a distributed counter (internal: the Citus fast path calls it)';
COMMENT ON FUNCTION fbf_increment_on_placement(regclass, text, bigint[], bigint[], bigint[]) IS
	'a batch of idempotent_increment on the local shard of a distributed counter (internal: the Citus fast path calls it)';
COMMENT ON FUNCTION fbf_increment_on_placement(regclass, text, text[], bigint[], bigint[]) IS
	'a batch of idempotent_increment on the local shard of a distributed counter (internal: the Citus fast path calls it)';
COMMENT ON FUNCTION fbf_increment_on_placement(regclass, text, uuid[], bigint[], bigint[]) IS
	'a batch of idempotent_increment on the local shard of a distributed counter (internal: the Citus fast path calls it)';
COMMENT ON FUNCTION fbf_increment_outcome_on_placement(regclass, text, bigint, bigint, bigint) IS
	'idempotent_increment_outcome on the local shard of a distributed counter (internal: the Citus fast path calls it)';
COMMENT ON FUNCTION fbf_increment_outcome_on_placement(regclass, text, text, bigint, bigint) IS
	'idempotent_increment_outcome on the local shard of a distributed counter (internal: the Citus fast path calls it)';
COMMENT ON FUNCTION fbf_increment_outcome_on_placement(regclass, text, uuid, bigint, bigint) IS
	'idempotent_increment_outcome on the local shard of a distributed counter (internal: the Citus fast path calls it)';

-- The key by which Citus routes the fast path's statement: the key, or the
-- front end's error if it is NULL (src/citus/citus_plan.c).
CREATE FUNCTION fbf_routing_key(key text, fname text) RETURNS text
	AS 'MODULE_PATHNAME', 'fbf_routing_key'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION fbf_routing_key(text, text) IS
	'the key by which a distributed counter''s increment is routed; error if NULL (internal: the Citus fast path calls it)';

-- The fast path's statements that commit on their own pass their table
-- through this on the placement: the table, or an error (25001) if a
-- transaction block is open there (src/citus/citus_plan.c).
CREATE FUNCTION fbf_outside_transaction_block(counter regclass) RETURNS regclass
	AS 'MODULE_PATHNAME', 'fbf_outside_transaction_block'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION fbf_outside_transaction_block(regclass) IS
	'the table, or an error if a transaction block is open (internal: the Citus fast path calls it)';

-- A distributed table's shards share its expected rate.  Citus makes each
-- shard's window from the table's window index, options included, and
-- the keys (or ids) spread evenly over the hash range: so before the
-- shards are made, the window's expected_rate becomes the share of the
-- largest shard, rounded up, never below the smaller of the table's rate
-- and 1000/s (the default: a shard keeps at least a default window's
-- room for operations in flight).  The shards are those
-- create_distributed_table will make: shard_count even ones, else those
-- of the table colocate_with names (qualified, as fbf_distribute_counter
-- and fbf_distribute_dedup pass it), which a split may have made uneven,
-- else citus.shard_count even ones.  A window of an explicit shape
-- (nbits) is left as it is.  Called by fbf_distribute_table once it has
-- checked the table and its owner and locked the table.
CREATE FUNCTION fbf_share_expected_rate(
	tbl regclass,
	shard_count integer,
	colocate_with text)
	RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	win regclass;
	opts text[];
	rate float8;
	largest float8;				-- the largest shard's part of the hash range
	share float8;
BEGIN
	SELECT c.oid::regclass, COALESCE(c.reloptions, '{}') INTO win, opts
	  FROM pg_catalog.pg_index i
	  JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
	  JOIN pg_catalog.pg_am a ON a.oid = c.relam
	 WHERE i.indrelid = tbl AND a.amname = 'fbf_filter';
	IF win IS NULL OR EXISTS (SELECT FROM pg_catalog.unnest(opts) o
							   WHERE o LIKE 'nbits=%' AND o <> 'nbits=0') THEN
		RETURN;
	END IF;
	rate := COALESCE((SELECT pg_catalog.split_part(o, '=', 2)::float8
						FROM pg_catalog.unnest(opts) o WHERE o LIKE 'expected_rate=%'),
					 1000);
	IF shard_count < 1 THEN
		RETURN;					-- create_distributed_table refuses it
	ELSIF shard_count IS NOT NULL THEN
		largest := 1.0 / shard_count;
	ELSIF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
		RETURN;
	ELSIF pg_catalog.lower(colocate_with) = ANY (ARRAY['default', 'none']) THEN
		largest := 1.0 / pg_catalog.current_setting('citus.shard_count')::integer;
	ELSE
		-- a hash-distributed table's shards, each a range of int4 hashes
		SELECT pg_catalog.max((s.shardmaxvalue::bigint - s.shardminvalue::bigint + 1)::float8
							  / 4294967296.0)
		  INTO largest
		  FROM pg_catalog.pg_dist_shard s
		 WHERE s.logicalrelid = pg_catalog.to_regclass(colocate_with);
		IF largest IS NULL THEN
			RETURN;				-- no such table: create_distributed_table refuses it
		END IF;
	END IF;
	share := pg_catalog.ceil(GREATEST(rate * largest, LEAST(rate, 1000)));
	IF share < rate THEN
		EXECUTE pg_catalog.format('ALTER INDEX %s SET (expected_rate = %s)', win, share::bigint);
	END IF;
END
$fn$;

COMMENT ON FUNCTION fbf_share_expected_rate(regclass, integer, text) IS
	'plan the window of a table about to be distributed for its largest shard''s share of its expected rate (internal: fbf_distribute_counter and fbf_distribute_dedup call it)';

-- Distribute a counter table (kind 'counter') by its key column, or a
-- dedup table (kind 'dedup') by its anchor column, each operation's
-- routing value: an operation and the window that remembers it live on
-- one shard.  Only a table that has applied nothing yet: its window's
-- memory would not reach the new shards.  For fbf_distribute_counter and
-- fbf_distribute_dedup, which name the table to colocate with
-- schema-qualified (this function runs with search_path = pg_catalog,
-- pg_temp).
CREATE FUNCTION fbf_distribute_table(
	tbl regclass,
	kind text,
	shard_count integer,
	colocate_with text)
	RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	dedup boolean := kind = 'dedup';
	has_rows boolean := false;
	remembered bigint;
	-- the table as messages name it (a regclass would print qualified here)
	shown text := (SELECT c.relname FROM pg_catalog.pg_class c
					WHERE c.oid = tbl);
	-- how messages name the table's kind
	noun text := CASE WHEN dedup THEN 'dedup table' ELSE 'counter' END;
BEGIN
	IF kind IS NULL OR kind NOT IN ('counter', 'dedup') THEN
		RAISE EXCEPTION 'unknown kind of table "%"', kind
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
		RAISE EXCEPTION 'fbf_distribute_% needs the citus extension', kind
			USING ERRCODE = 'feature_not_supported',
				  HINT = 'Preload citus before fbf (shared_preload_libraries = ''citus,fbf''), then CREATE EXTENSION citus.';
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_index i
					 JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
					 JOIN pg_catalog.pg_am a ON a.oid = c.relam
					WHERE i.indrelid = tbl AND a.amname = 'fbf_filter'
					  AND ('kind=dedup' = ANY (COALESCE(c.reloptions, '{}'))) = dedup) THEN
		RAISE EXCEPTION '"%" is not a % table', shown, kind
			USING ERRCODE = 'wrong_object_type',
				  HINT = CASE WHEN dedup
							  THEN 'Create dedup tables with fbf_create_dedup(); distribute counter tables with fbf_distribute_counter().'
							  ELSE 'Create counter tables with fbf_create_counter_table().' END;
	END IF;
	IF pg_catalog.pg_has_role((SELECT relowner FROM pg_catalog.pg_class WHERE oid = tbl), 'USAGE') IS NOT TRUE THEN
		RAISE EXCEPTION 'must be owner of table %', shown
			USING ERRCODE = 'insufficient_privilege';
	END IF;
	-- create_distributed_table would return without distributing
	IF colocate_with IS NULL THEN
		RAISE EXCEPTION 'colocate_with must not be NULL'
			USING ERRCODE = 'null_value_not_allowed',
				  HINT = 'Pass ''default'', ''none'' or the name of a distributed table.';
	END IF;
	-- no operation from here on: what is checked below stays true, and the
	-- window index is altered (fbf_share_expected_rate) while no operation
	-- holds the table and waits for it
	EXECUTE pg_catalog.format('LOCK TABLE %s IN EXCLUSIVE MODE', tbl);
	IF NOT dedup THEN
		EXECUTE pg_catalog.format('SELECT EXISTS (SELECT FROM %s)', tbl) INTO STRICT has_rows;
	END IF;
	SELECT COALESCE(pg_catalog.sum(e), 0) INTO remembered
	  FROM pg_catalog.unnest((@extschema@.fbf_info(@extschema@.fbf_snapshot(tbl))).counts) AS e;
	IF has_rows OR remembered > 0 THEN
		RAISE EXCEPTION '% "%" has already %', noun, shown,
			CASE WHEN dedup THEN 'claimed ids' ELSE 'applied operations' END
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = pg_catalog.format('The shards of a distributed %s start with empty windows: the %s this table remembers would be %s again.',
											 noun,
											 CASE WHEN dedup THEN 'ids' ELSE 'operations' END,
											 CASE WHEN dedup THEN 'claimed' ELSE 'applied' END),
				  HINT = pg_catalog.format('Distribute a %s right after creating it.', noun);
	END IF;
	IF dedup THEN
		-- The routed statement's CTE (UPDATE dedup SET anchor = anchor WHERE
		-- anchor = $2) reads and updates the anchor column, which the
		-- executor checks: on a table that holds no rows these grant nothing
		-- to read or change (and, being column grants, no LOCK TABLE), so
		-- that INSERT, checked by fbf_claim, stays the privilege to claim.
		-- Granted before the shards exist, which copy the table's grants.
		EXECUTE pg_catalog.format('GRANT SELECT (anchor), UPDATE (anchor) ON %s TO PUBLIC', tbl);
		-- Citus moves shards by logical replication only with a replica
		-- identity; the table holds no rows, so FULL costs nothing
		EXECUTE pg_catalog.format('ALTER TABLE %s REPLICA IDENTITY FULL', tbl);
	END IF;
	PERFORM @extschema@.fbf_share_expected_rate(tbl, shard_count, colocate_with);
	PERFORM pg_catalog.create_distributed_table(tbl, CASE WHEN dedup THEN 'anchor' ELSE 'key' END,
												colocate_with => colocate_with,
												shard_count => shard_count);
	-- one placement per shard: a copy would be a second window for the same
	-- operations
	IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
				WHERE logicalrelid = tbl AND repmodel <> 's') THEN
		RAISE EXCEPTION '% "%" would have more than one placement per shard', noun, shown
			USING ERRCODE = 'feature_not_supported',
				  HINT = 'Set citus.shard_replication_factor = 1.';
	END IF;
END
$fn$;

COMMENT ON FUNCTION fbf_distribute_table(regclass, text, integer, text) IS
	'distribute a new counter or dedup table with Citus (internal: use fbf_distribute_counter or fbf_distribute_dedup)';

CREATE FUNCTION fbf_distribute_counter(
	counter regclass,
	shard_count integer DEFAULT NULL,
	colocate_with text DEFAULT 'default')
	RETURNS void
	LANGUAGE sql VOLATILE PARALLEL UNSAFE
BEGIN ATOMIC
	-- Bound when created, and run with the caller's search_path, in which
	-- create_distributed_table would look colocate_with up: the table found
	-- there goes on schema-qualified ('default', 'none' and names of no
	-- table go on as they are).
	SELECT @extschema@.fbf_distribute_table(counter, 'counter', shard_count,
		COALESCE((SELECT pg_catalog.format('%I.%I', n.nspname, c.relname)
					FROM pg_catalog.pg_class c
					JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
				   WHERE pg_catalog.lower(colocate_with) OPERATOR(pg_catalog.<>) ALL (ARRAY['default', 'none'])
					 AND c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(colocate_with)::pg_catalog.oid),
				 colocate_with));
END;

COMMENT ON FUNCTION fbf_distribute_counter(regclass, integer, text) IS
	'distribute a new counter table with Citus by its key: increments anywhere in the cluster go to the window of the key''s shard';

-- ---------------------------------------------------------------------
-- Dedup tables distributed by Citus (src/citus/citus_dedup.c)
-- ---------------------------------------------------------------------

-- The half of a claim that runs on the node holding the shard of its
-- anchor: fbf_claim on a distributed dedup table routes the ids (as the
-- client gave them: plain ids, or with seqs the client ids of (client_id,
-- seq) claims) here, through Citus, grouped by shard; each id's identity
-- and anchor are computed here, ids outside the shard of `anchor` are
-- refused, and the rest are claimed as fbf_claim on the shard table would
-- claim them.  Left executable by PUBLIC: Citus runs it as the user who
-- claims, and it checks what fbf_claim checks (INSERT, row security); it
-- takes no hashes, so no caller can record claims another caller's would
-- not meet.
CREATE FUNCTION fbf_claim_on_placement(dedup regclass, anchor integer, ids anyarray,
									   seqs bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_claim_on_placement'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION fbf_claim_on_placement(regclass, integer, anyarray, bigint[]) IS
	'claim routed ids on the local shard of a distributed dedup table (internal: fbf_claim calls it through Citus)';

-- The same for the fast path's lone claim of one id, or of one (client_id,
-- seq): the anchor is the id's own, computed here, and the answer is
-- fbf_claim's (src/citus/citus_plan.c).  As executable, and checking as
-- much, as the array form.
CREATE FUNCTION fbf_claim_on_placement(dedup regclass, id anyelement) RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_claim_one_on_placement'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_claim_on_placement(dedup regclass, client_id anyelement, seq bigint)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_claim_one_on_placement'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION fbf_claim_on_placement(regclass, anyelement) IS
	'claim a routed id on the local shard of a distributed dedup table (internal: the Citus fast path calls it)';
COMMENT ON FUNCTION fbf_claim_on_placement(regclass, anyelement, bigint) IS
	'claim a routed (client_id, seq) on the local shard of a distributed dedup table (internal: the Citus fast path calls it)';

-- The anchor of a claim, by which Citus routes the fast path's statement
-- of fbf_claim on a distributed dedup table; fbf_claim's error if an
-- argument is NULL (src/citus/citus_plan.c, citus_dedup.c).
CREATE FUNCTION fbf_claim_anchor(id anyelement) RETURNS integer
	AS 'MODULE_PATHNAME', 'fbf_claim_anchor'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION fbf_claim_anchor(client_id anyelement, seq bigint) RETURNS integer
	AS 'MODULE_PATHNAME', 'fbf_claim_anchor'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION fbf_claim_anchor(anyelement) IS
	'the anchor of a claim of id in a distributed dedup table (internal: the Citus fast path calls it)';
COMMENT ON FUNCTION fbf_claim_anchor(anyelement, bigint) IS
	'the anchor of a (client_id, seq) claim in a distributed dedup table (internal: the Citus fast path calls it)';

CREATE FUNCTION fbf_distribute_dedup(
	dedup regclass,
	shard_count integer DEFAULT NULL,
	colocate_with text DEFAULT 'default')
	RETURNS void
	LANGUAGE sql VOLATILE PARALLEL UNSAFE
BEGIN ATOMIC
	-- Bound when created, and run with the caller's search_path, in which
	-- create_distributed_table would look colocate_with up: the table found
	-- there goes on schema-qualified ('default', 'none' and names of no
	-- table go on as they are).
	SELECT @extschema@.fbf_distribute_table(dedup, 'dedup', shard_count,
		COALESCE((SELECT pg_catalog.format('%I.%I', n.nspname, c.relname)
					FROM pg_catalog.pg_class c
					JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
				   WHERE pg_catalog.lower(colocate_with) OPERATOR(pg_catalog.<>) ALL (ARRAY['default', 'none'])
					 AND c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(colocate_with)::pg_catalog.oid),
				 colocate_with));
END;

COMMENT ON FUNCTION fbf_distribute_dedup(regclass, integer, text) IS
	'distribute a new dedup table with Citus by its anchor: claims anywhere in the cluster go to the window of the id''s shard';

-- Copy the window of a shard table on one node into the window of a shard
-- table on another (fbf_counter_load: ORed in, aligned on time), each
-- through a connection of its own (master_run_on_worker).  Called when a
-- Citus shard move or split ends (src/citus/citus_transfer.c),
-- while Citus still blocks writes to the shards.
CREATE FUNCTION fbf_copy_shard_window(
	source_name text, source_port integer, source_shard text,
	target_name text, target_port integer, target_shard text)
	RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	ok boolean;
	snapshot text;
BEGIN
	SELECT success, result INTO ok, snapshot
	  FROM pg_catalog.master_run_on_worker(ARRAY[source_name], ARRAY[source_port],
			ARRAY[pg_catalog.format('SELECT %s.fbf_snapshot(%L)', '@extschema@', source_shard)], false);
	IF NOT ok THEN
		RAISE EXCEPTION 'could not read the window of shard % on %:%: %',
			source_shard, source_name, source_port, snapshot
			USING ERRCODE = 'connection_failure';
	END IF;
	SELECT success, result INTO ok, snapshot
	  FROM pg_catalog.master_run_on_worker(ARRAY[target_name], ARRAY[target_port],
			ARRAY[pg_catalog.format('SELECT %s.fbf_counter_load(%L, %L)', '@extschema@',
									target_shard, snapshot)], false);
	IF NOT ok THEN
		RAISE EXCEPTION 'could not load the window of shard % on %:%: %',
			target_shard, target_name, target_port, snapshot
			USING ERRCODE = 'connection_failure';
	END IF;
END
$fn$;

COMMENT ON FUNCTION fbf_copy_shard_window(text, integer, text, text, integer, text) IS
	'load the window of a shard on one node into a shard on another (internal: Citus shard moves and splits carry counter windows with it)';

