/* sql/fbf--1.4--1.5.sql: from 1.4 to 1.5 (ALTER EXTENSION fbf UPDATE) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fbf UPDATE TO '1.5'" to load this file. \quit

-- 1.5 makes the cuckoo index access method a drop-in for hash
-- (docs/user-guide.md, "The cuckoo index"): an operator class for every
-- type with a default hash operator class, under hash's names; the
-- reloption fillfactor and backward scans come with the library and need
-- no SQL.  Indexes built under 1.4 keep working as they are.

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

-- fbf_dedup_stats shows a dedup table's exact streams as fbf_counter_stats
-- shows a counter's: the streams, their slots and evictions, the answers
-- they gave and those left to the filter, and from when a stream without
-- a slot is proven new (1.3's columns of the counters).  The C function
-- fills them for a declaration that has them, and reads a 1.4 database's
-- declaration, without them, as it did.
DROP VIEW fbf_dedup_stats;
DROP FUNCTION fbf_dedup_stats();
DROP FUNCTION fbf_local_dedup_stats();

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

-- fbf_counter_stats and fbf_dedup_stats read the shards' windows on a Citus
-- coordinator with one command per node (fbf_shard_window_stats), where
-- they sent one per shard placement and each node read all its windows
-- for each.

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

-- The fast path's statements that commit on their own pass their table
-- through this on the placement: the table, or an error (25001) if a
-- transaction block is open there (src/citus/citus_plan.c).
CREATE FUNCTION fbf_outside_transaction_block(counter regclass) RETURNS regclass
	AS 'MODULE_PATHNAME', 'fbf_outside_transaction_block'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION fbf_outside_transaction_block(regclass) IS
	'the table, or an error if a transaction block is open (internal: the Citus fast path calls it)';

-- fbf_claim_on_placement for the fast path's lone claim of one id, or of
-- one (client_id, seq): the anchor is the id's own, computed here, and the
-- answer is fbf_claim's (src/citus/citus_plan.c).  As executable, and
-- checking as much, as the array form.
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

-- New distributed tables plan their shards' windows for each shard's
-- share of the table's expected rate (docs/user-guide.md, "Scaling out
-- with Citus"): tables distributed before keep their windows.
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

-- fbf_distribute_counter and fbf_distribute_dedup share it: the two
-- functions each of them called before are gone
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
	SELECT @extschema@.fbf_distribute_table(counter, 'counter', shard_count,
		COALESCE((SELECT pg_catalog.format('%I.%I', n.nspname, c.relname)
					FROM pg_catalog.pg_class c
					JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
				   WHERE pg_catalog.lower(colocate_with) OPERATOR(pg_catalog.<>) ALL (ARRAY['default', 'none'])
					 AND c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(colocate_with)::pg_catalog.oid),
				 colocate_with));
END;

CREATE OR REPLACE FUNCTION fbf_distribute_dedup(
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

DROP FUNCTION fbf_distribute_window(regclass, integer, text);
DROP FUNCTION fbf_distribute_dedup_window(regclass, integer, text);

-- A window's options are written as given: before, a caller's
-- extra_float_digits below 0 rounded target_fpp and expected_rate
-- (0.0012 became 0.001, 12345 became 1.2e+04)
ALTER FUNCTION fbf_create_window(text, text, interval, double precision, double precision,
								 integer, integer, integer, integer, text, integer)
	SET extra_float_digits = 1;

-- The extension's schema goes into the commands as an argument of format(),
-- not into its pattern: a schema named fbf%s made every shard move fail.
CREATE OR REPLACE FUNCTION fbf_copy_shard_window(
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

-- Saving every counter skips the tables Citus distributes (their shells
-- have no window: fbf_snapshot refused them, and the whole save failed on
-- every node of a cluster with one), and messages name a table once quoted
CREATE OR REPLACE FUNCTION fbf_counter_save(counter regclass DEFAULT NULL,
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
