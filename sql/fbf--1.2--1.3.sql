/* sql/fbf--1.2--1.3.sql: from 1.2 to 1.3 (ALTER EXTENSION fbf UPDATE) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fbf UPDATE TO '1.3'" to load this file. \quit

-- 1.3 answers the operations of clients that number them in order exactly
-- (exact streams: docs/user-guide.md, "Exact streams").  The streams live
-- in pages of each window index, which the library adds at a window's next
-- refresh: a counter of 1.2 keeps what it remembers, and its streams are
-- exact from one retention after that refresh (docs/operations.md,
-- "Upgrades").  The SQL changes are the option that caps the streams, at
-- creation, and the statistics that show them.

-- fbf_create_window, fbf_create_counter_table and fbf_create_dedup take
-- max_streams, the window index's option (NULL: the setting
-- fbf.max_streams): new signatures, so the old functions go (the two
-- callers first: their bodies are bound to fbf_create_window's).
DROP FUNCTION fbf_create_counter_table(text, interval, double precision, double precision,
									   integer, integer, integer, integer, text);
DROP FUNCTION fbf_create_dedup(text, interval, double precision, double precision,
							   integer, integer, integer, text);
DROP FUNCTION fbf_create_window(text, text, interval, double precision, double precision,
								integer, integer, integer, integer, text);

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

-- fbf_counter_stats gains the columns of the exact streams: streams,
-- stream_capacity, stream_evictions, exact_answers, filter_answers,
-- dismissals_averted, streams_exact_from.  A view's and a function's
-- columns cannot be added in place: drop the view and both functions
-- (fbf_counter_stats() reads the local one's rows), make them anew.
DROP VIEW fbf_counter_stats;
DROP FUNCTION fbf_counter_stats();
DROP FUNCTION fbf_local_counter_stats();

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
					fingerprint_bits, streams, stream_capacity, stream_evictions,
					exact_answers, filter_answers, dismissals_averted, streams_exact_from,
					node_name, node_port, shard
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

COMMENT ON FUNCTION fbf_counter_stats() IS
	'one row per counter table the user may read, and on a Citus coordinator one per shard of each distributed counter';

CREATE VIEW fbf_counter_stats AS SELECT * FROM fbf_counter_stats();

COMMENT ON VIEW fbf_counter_stats IS
	'counter tables and their operation filters: shape, window, accuracy, activity';

-- rows are filtered by the caller's SELECT privilege on each counter table
GRANT SELECT ON fbf_counter_stats TO PUBLIC;
