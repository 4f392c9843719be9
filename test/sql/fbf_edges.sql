--
-- Data safety at the edges: a table keeps its one window; a saved
-- snapshot older than its retention loads nothing, and a partly aged one
-- is remembered only for what is left of it; claims under row security;
-- a restore reports the rows it cannot load and goes on.
--
\set SHOW_CONTEXT never

CREATE FUNCTION edges_sqlstate_of(query text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE query;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END $$;

-- one window per table ------------------------------------------------

SELECT fbf_create_counter_table('edge_c', retention => '10 min');
SELECT idempotent_increment('edge_c', 'k', 1, 1, 1) AS applied;

-- a second window is refused: with two, dropping the first forgot it all
CREATE INDEX edge_c_second ON edge_c USING fbf_filter (shard);
SELECT edges_sqlstate_of('CREATE INDEX edge_c_second ON edge_c USING fbf_filter (shard)');
-- the window cannot be dropped while the table stays
DROP INDEX edge_c_fbf;
SELECT edges_sqlstate_of('DROP INDEX edge_c_fbf');
SELECT edges_sqlstate_of('DROP INDEX CONCURRENTLY edge_c_fbf');
SELECT edges_sqlstate_of('DROP INDEX edge_c_pkey, edge_c_fbf');
ALTER TABLE edge_c DROP COLUMN shard;
SELECT edges_sqlstate_of('ALTER TABLE edge_c DROP COLUMN shard CASCADE');
-- so the operation cannot be applied a second time
SELECT idempotent_increment('edge_c', 'k', 1, 1, 1) AS applied_twice;
SELECT value FROM edge_c WHERE key = 'k';

-- rebuilds carry the window over as before
REINDEX INDEX edge_c_fbf;
REINDEX TABLE edge_c;
VACUUM FULL edge_c;
CLUSTER edge_c USING edge_c_pkey;
ALTER TABLE edge_c ADD COLUMN note text DEFAULT 'x';
ALTER TABLE edge_c ALTER COLUMN note TYPE varchar(10);
-- a rewrite of the window's column drops and builds it again, carried over
ALTER TABLE edge_c ALTER COLUMN shard TYPE integer USING shard + 0;
SELECT idempotent_increment('edge_c', 'k', 1, 1, 1) AS applied_twice;
-- still refused concurrently, as before (outside a transaction block,
-- where PostgreSQL itself lets them run)
\set VERBOSITY terse
REINDEX TABLE CONCURRENTLY edge_c;
\echo :SQLSTATE
CREATE INDEX CONCURRENTLY edge_c_second ON edge_c USING fbf_filter (shard);
\echo :SQLSTATE
\set VERBOSITY default
SELECT count(*) AS windows FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = 'edge_c'::regclass AND a.amname = 'fbf_filter';

-- a dedup table alike; a plain table takes one window too
SELECT fbf_create_dedup('edge_d', retention => '10 min');
SELECT fbf_claim('edge_d', 7::bigint) AS claimed;
SELECT edges_sqlstate_of('CREATE INDEX ON edge_d USING fbf_filter (anchor) WITH (kind = dedup)');
SELECT edges_sqlstate_of('DROP INDEX edge_d_fbf');
SELECT fbf_claim('edge_d', 7::bigint) AS claimed_twice;
CREATE TABLE edge_plain (a integer);
CREATE INDEX edge_plain_w ON edge_plain USING fbf_filter (a) WITH (kind = dedup);
SELECT edges_sqlstate_of('CREATE INDEX ON edge_plain USING fbf_filter (a) WITH (kind = dedup)');
SELECT edges_sqlstate_of('DROP INDEX edge_plain_w');
-- other indexes come and go
CREATE INDEX edge_plain_b ON edge_plain (a);
DROP INDEX edge_plain_b;
-- DROP TABLE and DROP EXTENSION drop windows with their tables
DROP TABLE edge_plain;
BEGIN;
SET LOCAL client_min_messages = warning;
DROP EXTENSION fbf CASCADE;
SELECT count(*) AS tables_left FROM pg_class WHERE relname IN ('edge_c', 'edge_d');
ROLLBACK;

-- row security on a dedup table --------------------------------------

CREATE ROLE fbf_edges_claimer;
GRANT INSERT ON edge_d TO fbf_edges_claimer;
ALTER TABLE edge_d ENABLE ROW LEVEL SECURITY;
CREATE POLICY edge_d_none ON edge_d FOR INSERT WITH CHECK (false);
SET ROLE fbf_edges_claimer;
SELECT fbf_claim('edge_d', 8::bigint);
SELECT edges_sqlstate_of($q$SELECT fbf_claim('edge_d', 8::bigint)$q$);
SELECT edges_sqlstate_of($q$SELECT fbf_claim('edge_d', ARRAY[9, 10]::bigint[])$q$);
RESET ROLE;
-- nothing was claimed; the owner (row security does not apply) claims
SELECT fbf_claim('edge_d', 8::bigint) AS claimed;
-- a permissive policy does not make claims acceptable either
DROP POLICY edge_d_none ON edge_d;
CREATE POLICY edge_d_all ON edge_d FOR INSERT WITH CHECK (true);
SET ROLE fbf_edges_claimer;
SELECT edges_sqlstate_of($q$SELECT fbf_claim('edge_d', 11::bigint)$q$);
RESET ROLE;
ALTER TABLE edge_d DISABLE ROW LEVEL SECURITY;
SET ROLE fbf_edges_claimer;
SELECT fbf_claim('edge_d', 11::bigint) AS claimed;
RESET ROLE;
DROP POLICY edge_d_all ON edge_d;

-- a restore goes on past the rows it cannot load ----------------------

CREATE ROLE fbf_edges_owner;
GRANT CREATE ON SCHEMA public TO fbf_edges_owner;
CREATE TABLE edge_saved AS SELECT * FROM fbf_counter_save('edge_c');
INSERT INTO edge_saved SELECT 'a.b.c.d', snapshot, saved_at FROM edge_saved;
INSERT INTO edge_saved SELECT '"unterminated', snapshot, saved_at FROM edge_saved
WHERE name = 'public.edge_c';
INSERT INTO edge_saved SELECT 'otherdb.public.edge_c', snapshot, saved_at FROM edge_saved
WHERE name = 'public.edge_c';
INSERT INTO edge_saved SELECT 'public.edge_d', snapshot, saved_at FROM edge_saved
WHERE name = 'public.edge_c';
INSERT INTO edge_saved VALUES ('public.edge_mine', NULL, now());
GRANT SELECT, INSERT ON edge_saved TO fbf_edges_owner;
SET ROLE fbf_edges_owner;
SELECT fbf_create_counter_table('edge_mine', retention => '10 min');
INSERT INTO edge_saved VALUES ('public.edge_mine', (SELECT fbf_snapshot('edge_mine')), now());
RESET ROLE;
-- the caller owns edge_mine only: edge_c and edge_d are refused, edge_mine loaded
SET ROLE fbf_edges_owner;
SELECT name, outcome FROM fbf_counter_restore('edge_saved') ORDER BY name, outcome NULLS FIRST;
RESET ROLE;
-- as the owner of everything: the names still refused, the rest loaded,
-- but for edge_c's snapshot into edge_d, which holds claims: merged if the
-- two have one key (fbf.fixed_window_keys gives every window the same),
-- else refused (each window's random key); shown as the rule, and as it
-- is if it breaks it
SELECT name,
	   CASE WHEN name = 'public.edge_d' AND outcome =
				 CASE WHEN current_setting('fbf.fixed_window_keys')::bool THEN 'merged'
					  ELSE 'refused: cannot load the snapshot into counter "edge_d": it was taken under another key and the counter''s filter is not empty' END
			THEN 'merged under the same key, refused under another'
			ELSE outcome END AS outcome
FROM fbf_counter_restore('edge_saved') ORDER BY name, outcome NULLS FIRST;
SELECT idempotent_increment('edge_c', 'k', 1, 1, 1) AS applied_twice;

DROP TABLE edge_saved, edge_mine;
REVOKE CREATE ON SCHEMA public FROM fbf_edges_owner;
DROP ROLE fbf_edges_owner;
REVOKE INSERT ON edge_d FROM fbf_edges_claimer;
DROP ROLE fbf_edges_claimer;
DROP TABLE edge_c, edge_d;

-- a saved snapshot ages as its counter would have ----------------------
-- (retention 6 s: the snapshot's operation may be forgotten from about
-- 6.5 s after it was applied; a load used to keep it a retention after
-- the load, past 9 s here)

CREATE TEMP TABLE edge_t0 AS SELECT clock_timestamp() AS t0;
SELECT fbf_create_counter_table('edge_src', retention => '6 s');
SELECT fbf_create_counter_table('edge_src_ck', retention => '6 s', filter => 'cuckoo');
SELECT idempotent_increment('edge_src', 'k', 1, 1, 1) AND
	   idempotent_increment('edge_src_ck', 'k', 1, 1, 1) AS applied;
CREATE TABLE edge_snap AS
SELECT fbf_snapshot('edge_src') AS bloom, fbf_snapshot('edge_src_ck') AS cuckoo;

-- 3 s later: loaded, and the retry is dismissed
SELECT pg_sleep(extract(epoch FROM t0 + interval '3 s' - clock_timestamp())) FROM edge_t0;
SELECT fbf_create_counter_table('edge_dst', retention => '6 s');
SELECT fbf_create_counter_table('edge_dst_ck', retention => '6 s', filter => 'cuckoo');
-- refreshed by the retries only, when one is overdue: a worker's pass
-- late by a fraction of a period would move the ring's births later, and
-- the forgetting below with them
ALTER INDEX edge_dst_fbf SET (worker_maintenance = off);
ALTER INDEX edge_dst_ck_fbf SET (worker_maintenance = off);
SELECT fbf_counter_load('edge_dst', bloom) AS bloom,
	   fbf_counter_load('edge_dst_ck', cuckoo) AS cuckoo FROM edge_snap;
SELECT idempotent_increment('edge_dst', 'k', 1, 1, 1) AS bloom_retry_applied,
	   idempotent_increment('edge_dst_ck', 'k', 1, 1, 1) AS cuckoo_retry_applied;

-- 8 s after it was applied: the original could have forgotten it (had
-- it refreshed on time), and so has the counter that loaded it
SELECT pg_sleep(extract(epoch FROM t0 + interval '8 s' - clock_timestamp())) FROM edge_t0;
SELECT idempotent_increment('edge_dst', 'k', 1, 1, 1) AS bloom_retry_applied,
	   idempotent_increment('edge_dst_ck', 'k', 1, 1, 1) AS cuckoo_retry_applied;
-- and a snapshot that old loads nothing, into an empty counter or not
SELECT fbf_create_counter_table('edge_late', retention => '6 s');
SELECT fbf_create_counter_table('edge_late_ck', retention => '6 s', filter => 'cuckoo');
SELECT fbf_counter_load('edge_late', bloom) AS bloom,
	   fbf_counter_load('edge_late_ck', cuckoo) AS cuckoo,
	   fbf_counter_load('edge_dst', bloom) AS into_busy FROM edge_snap;
SELECT idempotent_increment('edge_late', 'k', 1, 1, 1) AS bloom_retry_applied,
	   idempotent_increment('edge_late_ck', 'k', 1, 1, 1) AS cuckoo_retry_applied;
-- a restore says so
CREATE TABLE edge_saved AS
SELECT 'public.edge_late' AS name, bloom AS snapshot, t0 AS saved_at FROM edge_snap, edge_t0;
SELECT name, outcome FROM fbf_counter_restore('edge_saved');

DROP TABLE edge_src, edge_src_ck, edge_dst, edge_dst_ck, edge_late, edge_late_ck,
	edge_snap, edge_saved;
DROP FUNCTION edges_sqlstate_of(text);
