/* sql/fbf--1.3--1.4.sql: from 1.3 to 1.4 (ALTER EXTENSION fbf UPDATE) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fbf UPDATE TO '1.4'" to load this file. \quit

-- 1.4 sends an increment on a counter distributed by Citus in one round
-- trip (docs/user-guide.md, "Scaling out with Citus"): the statement Citus
-- routes calls these twins of the front ends on the node of the key's
-- shard.  Update every node of the cluster (Citus propagates ALTER
-- EXTENSION to its workers).

-- The placement twins of idempotent_increment, idempotent_increment_outcome
-- and the batch form: the fast path of a counter distributed by Citus hands
-- Citus a statement that calls them on the node of the key's shard
-- (src/counter/counter_citus_plan.c), where they apply the operations to
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
-- front end's error if it is NULL (src/counter/counter_citus_plan.c).
CREATE FUNCTION fbf_routing_key(key text, fname text) RETURNS text
	AS 'MODULE_PATHNAME', 'fbf_routing_key'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION fbf_routing_key(text, text) IS
	'the key by which a distributed counter''s increment is routed; error if NULL (internal: the Citus fast path calls it)';

-- ---------------------------------------------------------------------
-- Block: dedup tables distributed by Citus (src/counter/dedup_citus.c):
-- fbf_distribute_dedup, fbf_claim_on_placement (to which fbf_claim routes
-- claims by anchor), and the statistics of their shards on the
-- coordinator (fbf_dedup_stats; fbf_counter_stats leaves them out).  As in
-- sql/fbf.sql.
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

-- The anchor of a claim, by which Citus routes the fast path's statement
-- of fbf_claim on a distributed dedup table; fbf_claim's error if an
-- argument is NULL (src/counter/counter_citus_plan.c, dedup_citus.c).
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

-- Distribute a dedup table with Citus by its anchor column, each claim's
-- routing value (a hash of its id): an id's claims and the window that
-- remembers them live on one shard.  Only a dedup table that has claimed
-- nothing yet: its window's memory would not reach the new shards.  For
-- fbf_distribute_dedup, which names the table to colocate with
-- schema-qualified (this function runs with search_path = pg_catalog,
-- pg_temp).
CREATE FUNCTION fbf_distribute_dedup_window(
	dedup regclass,
	shard_count integer,
	colocate_with text)
	RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	remembered bigint;
	-- the table as messages name it (a regclass would print qualified here)
	shown text := (SELECT pg_catalog.quote_ident(c.relname) FROM pg_catalog.pg_class c
					WHERE c.oid = dedup);
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
		RAISE EXCEPTION 'fbf_distribute_dedup needs the citus extension'
			USING ERRCODE = 'feature_not_supported',
				  HINT = 'Preload citus before fbf (shared_preload_libraries = ''citus,fbf''), then CREATE EXTENSION citus.';
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_index i
					 JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
					 JOIN pg_catalog.pg_am a ON a.oid = c.relam
					WHERE i.indrelid = dedup AND a.amname = 'fbf_filter'
					  AND 'kind=dedup' = ANY (COALESCE(c.reloptions, '{}'))) THEN
		RAISE EXCEPTION '"%" is not a dedup table', shown
			USING ERRCODE = 'wrong_object_type',
				  HINT = 'Create dedup tables with fbf_create_dedup(); distribute counter tables with fbf_distribute_counter().';
	END IF;
	IF NOT pg_catalog.pg_has_role((SELECT relowner FROM pg_catalog.pg_class WHERE oid = dedup), 'USAGE') THEN
		RAISE EXCEPTION 'must be owner of table %', shown
			USING ERRCODE = 'insufficient_privilege';
	END IF;
	SELECT COALESCE(pg_catalog.sum(e), 0) INTO remembered
	  FROM pg_catalog.unnest((@extschema@.fbf_info(@extschema@.fbf_snapshot(dedup))).counts) AS e;
	IF remembered > 0 THEN
		RAISE EXCEPTION 'dedup table "%" has already claimed ids', shown
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'The shards of a distributed dedup table start with empty windows: the ids this table remembers would be claimed again.',
				  HINT = 'Distribute a dedup table right after creating it.';
	END IF;
	-- The routed statement's CTE (UPDATE dedup SET anchor = anchor WHERE
	-- anchor = $2) reads and updates the anchor column, which the executor
	-- checks: on a table that holds no rows these grant nothing to read or
	-- change (and, being column grants, no LOCK TABLE), so that INSERT,
	-- checked by fbf_claim, stays the privilege to claim.  Granted before
	-- the shards exist, which copy the table's grants.
	EXECUTE pg_catalog.format('GRANT SELECT (anchor), UPDATE (anchor) ON %s TO PUBLIC', dedup);
	-- Citus moves shards by logical replication only with a replica
	-- identity; the table holds no rows, so FULL costs nothing
	EXECUTE pg_catalog.format('ALTER TABLE %s REPLICA IDENTITY FULL', dedup);
	PERFORM pg_catalog.create_distributed_table(dedup, 'anchor', colocate_with => colocate_with,
												shard_count => shard_count);
	-- one placement per shard: a copy would be a second window for the same ids
	IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
				WHERE logicalrelid = dedup AND repmodel <> 's') THEN
		RAISE EXCEPTION 'dedup table "%" would have more than one placement per shard', shown
			USING ERRCODE = 'feature_not_supported',
				  HINT = 'Set citus.shard_replication_factor = 1.';
	END IF;
END
$fn$;

COMMENT ON FUNCTION fbf_distribute_dedup_window(regclass, integer, text) IS
	'distribute a new dedup table with Citus by its anchor (internal: use fbf_distribute_dedup)';

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
	SELECT @extschema@.fbf_distribute_dedup_window(dedup, shard_count,
		COALESCE((SELECT pg_catalog.format('%I.%I', n.nspname, c.relname)
					FROM pg_catalog.pg_class c
					JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
				   WHERE pg_catalog.lower(colocate_with) OPERATOR(pg_catalog.<>) ALL (ARRAY['default', 'none'])
					 AND c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(colocate_with)::pg_catalog.oid),
				 colocate_with));
END;

COMMENT ON FUNCTION fbf_distribute_dedup(regclass, integer, text) IS
	'distribute a new dedup table with Citus by its anchor: claims anywhere in the cluster go to the window of the id''s shard';
-- fbf_counter_stats leaves distributed dedup tables to fbf_dedup_stats
-- (its shards' rows are counters' only).
-- Every counter the user may read: this node's (fbf_local_counter_stats),
-- and on a Citus coordinator each shard of every distributed counter, read
-- on the shard's node, as a row of the distributed table with the node and
-- the shard table named.  On a worker, its shard tables are its own rows.
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
							 WHERE i.indrelid = p.logicalrelid AND a.amname = 'fbf_filter'
							   AND NOT ('kind=dedup' = ANY (COALESCE(ic.reloptions, '{}'))))
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

-- fbf_dedup_stats lists, on a Citus coordinator, each shard of every
-- distributed dedup table, as fbf_counter_stats does for counters: 1.3's
-- C function becomes fbf_local_dedup_stats, under a wrapper that adds
-- node_name, node_port and shard (the view goes and comes back with them).
DROP VIEW fbf_dedup_stats;
DROP FUNCTION fbf_dedup_stats();

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
	OUT fingerprint_bits integer)
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
	OUT node_name text,
	OUT node_port integer,
	OUT shard text)
	RETURNS SETOF record
	LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	d regclass;
	r record;
	s pg_catalog.jsonb;
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
	FOR d IN SELECT p.logicalrelid FROM pg_catalog.pg_dist_partition p
			  WHERE EXISTS (SELECT FROM pg_catalog.pg_index i
							  JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
							  JOIN pg_catalog.pg_am a ON a.oid = ic.relam
							 WHERE i.indrelid = p.logicalrelid AND a.amname = 'fbf_filter'
							   AND 'kind=dedup' = ANY (COALESCE(ic.reloptions, '{}')))
				AND pg_catalog.has_table_privilege(p.logicalrelid, 'SELECT')
			  ORDER BY 1
	LOOP
		-- run on the shard's node with the search_path Citus gives its
		-- connection: each operator is pg_catalog's, named
		FOR r IN SELECT * FROM pg_catalog.run_command_on_placements(d,
				'SELECT pg_catalog.row_to_json(s) FROM @extschema@.fbf_local_dedup_stats() s '
				'WHERE s.dedup::pg_catalog.oid OPERATOR(pg_catalog.=) ''%s''::pg_catalog.regclass::pg_catalog.oid')
				 ORDER BY 3
		LOOP
			IF NOT r.success THEN
				RAISE EXCEPTION 'could not read the window of shard % on %:%: %',
					r.shardid, r.nodename, r.nodeport, r.result
					USING ERRCODE = 'connection_failure';
			END IF;
			-- a shard the caller may not read on its node has no row
			CONTINUE WHEN r.result IS NULL OR r.result = '';
			s := r.result::pg_catalog.jsonb;
			SELECT * INTO dedup, filters, live_filters, period, retention, nbits, nhashes,
					partitions, elements, estimated_fpp, target_fpp, claimed, duplicates, bytes,
					last_refresh, resizes, capped, pending, filter, load, fingerprint_bits,
					node_name, node_port, shard
			  FROM pg_catalog.jsonb_populate_record(NULL::@extschema@.fbf_dedup_stats,
													 s - 'dedup');
			dedup := d;
			node_name := r.nodename;
			node_port := r.nodeport;
			shard := s->>'dedup';
			RETURN NEXT;
		END LOOP;
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
-- (end of block: dedup tables distributed by Citus)
