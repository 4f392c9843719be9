/* sql/fbf--1.1--1.2.sql: from 1.1 to 1.2 (ALTER EXTENSION fbf UPDATE) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fbf UPDATE TO '1.2'" to load this file. \quit

-- 1.2 hardens the extension against hostile roles: each section below
-- names what it changes.

-- fbf_counter_restore: a row it cannot load (a malformed name, a counter
-- the caller does not own) is reported as refused, and the other rows are
-- loaded; it used to abort the whole restore.
CREATE OR REPLACE FUNCTION fbf_counter_restore(saved regclass,
									OUT name text, OUT saved_at timestamptz, OUT outcome text)
	RETURNS SETOF record
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
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

-- ---------------------------------------------------------------------
-- fbf_counter_save() skips what is not a plain table: an fbf_filter index
-- an older version let a materialized view or a partitioned table carry
-- made every save of the database fail.  (Such indexes can no longer be
-- created; the statistics and the worker skip those left.)  Its new body
-- is in the search_path section below.
-- ---------------------------------------------------------------------

-- ---------------------------------------------------------------------
-- search_path: no function of the extension runs what another role put
-- on the caller's search_path
-- ---------------------------------------------------------------------

-- A role that could create objects in a schema on a superuser's
-- search_path (public, before PostgreSQL 15) could define operators, such
-- as >(double precision, integer), that the extension's PL/pgSQL bodies
-- then ran with the caller's privileges.  Every function written in
-- PL/pgSQL now runs with search_path = pg_catalog, pg_temp; the functions
-- that resolve a name in the caller's search_path (fbf_create_counter_table,
-- fbf_create_dedup, fbf_distribute_counter) are SQL-standard bodies, bound
-- when created, that hand it on schema-qualified.  The C functions name
-- pg_catalog's operators in every query they run.

CREATE OR REPLACE FUNCTION fbf_create_window(
	kind text,
	name text,
	retention interval,
	target_fpp double precision,
	expected_rate double precision,
	shards integer,
	nbits integer,
	nhashes integer,
	npast integer,
	filter text)
	RETURNS regclass
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
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

	options := pg_catalog.format('retention_ms = %s, target_fpp = %s, expected_rate = %s, shards = %s',
								 retention_ms, target, expected_rate, shards);
	IF filter <> 'bloom' THEN
		-- the index's option, so that pg_dump carries it; bloom is its default
		options := options || pg_catalog.format(', filter = %s', filter);
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

CREATE OR REPLACE FUNCTION fbf_create_counter_table(
	name text,
	retention interval DEFAULT NULL,
	target_fpp double precision DEFAULT NULL,
	expected_rate double precision DEFAULT 1000,
	shards integer DEFAULT 16,
	nbits integer DEFAULT NULL,
	nhashes integer DEFAULT NULL,
	npast integer DEFAULT NULL,
	filter text DEFAULT 'bloom')
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
		retention, target_fpp, expected_rate, shards, nbits, nhashes, npast, filter);
END;

CREATE OR REPLACE FUNCTION fbf_create_dedup(
	name text,
	retention interval DEFAULT NULL,
	target_fpp double precision DEFAULT NULL,
	expected_rate double precision DEFAULT 1000,
	nbits integer DEFAULT NULL,
	nhashes integer DEFAULT NULL,
	npast integer DEFAULT NULL,
	filter text DEFAULT 'bloom')
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
		retention, target_fpp, expected_rate, 16, nbits, nhashes, npast, filter);
END;

CREATE OR REPLACE FUNCTION fbf_counter_stats(
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
	OUT node_name text,
	OUT node_port integer,
	OUT shard text)
	RETURNS SETOF record
	LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	c regclass;
	r record;
	s pg_catalog.jsonb;
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
	FOR c IN SELECT p.logicalrelid FROM pg_catalog.pg_dist_partition p
			  WHERE EXISTS (SELECT FROM pg_catalog.pg_index i
							  JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
							  JOIN pg_catalog.pg_am a ON a.oid = ic.relam
							 WHERE i.indrelid = p.logicalrelid AND a.amname = 'fbf_filter')
				AND pg_catalog.has_table_privilege(p.logicalrelid, 'SELECT')
			  ORDER BY 1
	LOOP
		-- run on the shard's node with the search_path Citus gives its
		-- connection: each operator is pg_catalog's, named
		FOR r IN SELECT * FROM pg_catalog.run_command_on_placements(c,
				'SELECT pg_catalog.row_to_json(s) FROM @extschema@.fbf_local_counter_stats() s '
				'WHERE s.counter::pg_catalog.oid OPERATOR(pg_catalog.=) ''%s''::pg_catalog.regclass::pg_catalog.oid')
				 ORDER BY 3
		LOOP
			IF NOT r.success THEN
				RAISE EXCEPTION 'could not read the window of shard % on %:%: %',
					r.shardid, r.nodename, r.nodeport, r.result
					USING ERRCODE = 'connection_failure';
			END IF;
			s := r.result::pg_catalog.jsonb;
			SELECT * INTO counter, filters, live_filters, period, retention, nbits, nhashes,
					partitions, elements, estimated_fpp, target_fpp, applied, dismissed, bytes,
					last_refresh, resizes, capped, pending, mismatched, filter, load,
					fingerprint_bits, node_name, node_port, shard
			  FROM pg_catalog.jsonb_populate_record(NULL::@extschema@.fbf_counter_stats,
													 s - 'counter');
			counter := c;
			node_name := r.nodename;
			node_port := r.nodeport;
			shard := s->>'counter';
			RETURN NEXT;
		END LOOP;
	END LOOP;
END
$fn$;

CREATE OR REPLACE FUNCTION fbf_counter_save(counter regclass DEFAULT NULL,
								 OUT name text, OUT snapshot fbf, OUT saved_at timestamptz)
	RETURNS SETOF record
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	one regclass := counter;
	-- the table as messages name it (a regclass would print qualified here)
	shown text := (SELECT pg_catalog.quote_ident(c.relname) FROM pg_catalog.pg_class c
					WHERE c.oid = one);
	r record;
	saved integer := 0;
BEGIN
	IF one IS NOT NULL AND NOT pg_catalog.pg_has_role(
			(SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = one), 'USAGE') THEN
		RAISE EXCEPTION 'must be owner of table %', shown
			USING ERRCODE = 'insufficient_privilege';
	END IF;
	FOR r IN
		SELECT c.oid::pg_catalog.regclass AS rel,
			   pg_catalog.format('%I.%I', n.nspname, c.relname) AS relname
		FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE (one IS NULL OR c.oid = one)
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

ALTER FUNCTION fbf_counter_restore(regclass) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION fbf_copy_shard_window(text, integer, text, text, integer, text)
	SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION fbf_distribute_window(
	counter regclass,
	shard_count integer,
	colocate_with text)
	RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	has_rows boolean;
	remembered bigint;
	-- the table as messages name it (a regclass would print qualified here)
	shown text := (SELECT pg_catalog.quote_ident(c.relname) FROM pg_catalog.pg_class c
					WHERE c.oid = counter);
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
		RAISE EXCEPTION 'fbf_distribute_counter needs the citus extension'
			USING ERRCODE = 'feature_not_supported',
				  HINT = 'Preload citus before fbf (shared_preload_libraries = ''citus,fbf''), then CREATE EXTENSION citus.';
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_index i
					 JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
					 JOIN pg_catalog.pg_am a ON a.oid = c.relam
					WHERE i.indrelid = counter AND a.amname = 'fbf_filter'
					  AND NOT ('kind=dedup' = ANY (COALESCE(c.reloptions, '{}')))) THEN
		RAISE EXCEPTION '"%" is not a counter table', shown
			USING ERRCODE = 'wrong_object_type',
				  HINT = 'Create counter tables with fbf_create_counter_table().';
	END IF;
	IF NOT pg_catalog.pg_has_role((SELECT relowner FROM pg_catalog.pg_class WHERE oid = counter), 'USAGE') THEN
		RAISE EXCEPTION 'must be owner of table %', shown
			USING ERRCODE = 'insufficient_privilege';
	END IF;
	EXECUTE pg_catalog.format('SELECT EXISTS (SELECT FROM %s)', counter) INTO STRICT has_rows;
	SELECT COALESCE(pg_catalog.sum(e), 0) INTO remembered
	  FROM pg_catalog.unnest((@extschema@.fbf_info(@extschema@.fbf_snapshot(counter))).counts) AS e;
	IF has_rows OR remembered > 0 THEN
		RAISE EXCEPTION 'counter "%" has already applied operations', shown
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'The shards of a distributed counter start with empty windows: the operations this table remembers would be applied again.',
				  HINT = 'Distribute a counter right after creating it.';
	END IF;
	PERFORM pg_catalog.create_distributed_table(counter, 'key', colocate_with => colocate_with,
												shard_count => shard_count);
	-- one placement per shard: a copy would be a second window for the same keys
	IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
				WHERE logicalrelid = counter AND repmodel <> 's') THEN
		RAISE EXCEPTION 'counter "%" would have more than one placement per shard', shown
			USING ERRCODE = 'feature_not_supported',
				  HINT = 'Set citus.shard_replication_factor = 1.';
	END IF;
END
$fn$;

COMMENT ON FUNCTION fbf_distribute_window(regclass, integer, text) IS
	'distribute a new counter table with Citus by its key (internal: use fbf_distribute_counter)';

CREATE OR REPLACE FUNCTION fbf_distribute_counter(
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
	SELECT @extschema@.fbf_distribute_window(counter, shard_count,
		COALESCE((SELECT pg_catalog.format('%I.%I', n.nspname, c.relname)
					FROM pg_catalog.pg_class c
					JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
				   WHERE pg_catalog.lower(colocate_with) OPERATOR(pg_catalog.<>) ALL (ARRAY['default', 'none'])
					 AND c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(colocate_with)::pg_catalog.oid),
				 colocate_with));
END;
