--
-- Idempotent counters: every error a caller can cause, with its SQLSTATE,
-- and that nothing is applied or remembered when one is raised.
--
\set SHOW_CONTEXT never

CREATE OR REPLACE FUNCTION sqlstate_of(query text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE query;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END $$;

SELECT fbf_create_counter_table('c', retention => '1 min', expected_rate => 10);
-- left alone by the worker and autovacuum (whose VACUUM drains too): what
-- waits on its pending chains is what this test's statements leave
ALTER INDEX c_fbf SET (worker_maintenance = off);
ALTER TABLE c SET (autovacuum_enabled = off);
CREATE TABLE plain (key text, shard int, value bigint);

-- unknown table, not a counter table, wrong kind of relation
SELECT idempotent_increment('no_such_table', 1, 1, 1);
SELECT idempotent_increment('plain', 1, 1, 1);
SELECT idempotent_increment('c_pkey', 1, 1, 1);
SELECT sqlstate_of($q$SELECT idempotent_increment('plain', 1, 1, 1)$q$);
SELECT fbf_counter_value('plain');
SELECT fbf_snapshot('plain');

-- NULL arguments
SELECT idempotent_increment(NULL, 1, 1, 1);
SELECT idempotent_increment('c', NULL::bigint, 1, 1);
SELECT idempotent_increment('c', 1, NULL, 1);
SELECT idempotent_increment('c', 1, 1, NULL);
SELECT idempotent_increment('c', NULL::text, 1, 1, 1);
SELECT sqlstate_of($q$SELECT idempotent_increment('c', 1, NULL, 1)$q$);

-- delta overflow: an error, nothing applied, the operation not remembered
SELECT idempotent_increment('c', 1, 1, 5);
SELECT idempotent_increment('c', 1, 2, 9223372036854775807);
SELECT sqlstate_of($q$SELECT idempotent_increment('c', 1, 2, 9223372036854775807)$q$);
SELECT fbf_counter_value('c') AS unchanged;
SELECT idempotent_increment('c', 1, 2, 1) AS retry_applies;
SELECT fbf_counter_value('c');

-- read-only transaction
BEGIN READ ONLY;
SELECT idempotent_increment('c', 2, 1, 1);
ROLLBACK;
SELECT sqlstate_of($q$SELECT idempotent_increment('c', 2, 1, 1)$q$) AS outside_read_only;

-- privileges: UPDATE on the counter table is required
CREATE ROLE fbf_reader;
CREATE ROLE fbf_writer;
GRANT SELECT ON c TO fbf_reader;
GRANT SELECT, UPDATE, INSERT ON c TO fbf_writer;
SET ROLE fbf_reader;
SELECT idempotent_increment('c', 4, 1, 1);
SELECT sqlstate_of($q$SELECT idempotent_increment('c', 4, 1, 1)$q$);
SELECT fbf_counter_value('c');
RESET ROLE;
SET ROLE fbf_writer;
SELECT idempotent_increment('c', 4, 1, 1) AS writer_applies,
       idempotent_increment('c', 4, 1, 1) AS writer_retry;
RESET ROLE;
-- no membership oracle: a role with UPDATE but not SELECT learns nothing,
-- neither for an operation that exists (4, 1) nor for one that does not
CREATE ROLE fbf_blind;
GRANT UPDATE ON c TO fbf_blind;
SET ROLE fbf_blind;
SELECT sqlstate_of($q$SELECT idempotent_increment('c', 4, 1, 1)$q$) AS existing_op,
       sqlstate_of($q$SELECT idempotent_increment('c', 4, 99, 1)$q$) AS new_op;
RESET ROLE;
-- column grants count like table grants
CREATE ROLE fbf_columns;
GRANT SELECT (key, shard, value), UPDATE (value), INSERT ON c TO fbf_columns;
SET ROLE fbf_columns;
SELECT idempotent_increment('c', 4, 1, 1) AS column_grants_retry_dismissed;
RESET ROLE;
-- maintenance and resizing change every client's cost: owner only
SET ROLE fbf_writer;
SELECT sqlstate_of($q$SELECT fbf_counter_maintain('c')$q$) AS maintain_by_writer,
       sqlstate_of($q$SELECT fbf_counter_resize('c', 64)$q$) AS resize_by_writer;
RESET ROLE;
SELECT fbf_counter_maintain('c') IS NOT NULL AS maintain_by_owner;
-- a role that may not read the table sees no stats row for it
SET ROLE fbf_reader;
SELECT count(*) FROM fbf_counter_stats WHERE counter = 'c'::regclass;
RESET ROLE;
CREATE ROLE fbf_nobody;
SET ROLE fbf_nobody;
SELECT count(*) FROM fbf_counter_stats WHERE counter = 'c'::regclass;
SELECT fbf_counter_value('c');
RESET ROLE;
-- row security applies to the UPDATE the increment runs
ALTER TABLE c ENABLE ROW LEVEL SECURITY;
CREATE POLICY only_key_a ON c TO fbf_writer USING (key = 'a') WITH CHECK (key = 'a');
SET ROLE fbf_writer;
SELECT idempotent_increment('c', 'b', 5, 1, 1);
SELECT idempotent_increment('c', 'a', 5, 2, 1) AS allowed_key;
RESET ROLE;
-- nor may row security be used as an oracle: an operation on key 'b'
-- applied by the owner is as much an error for fbf_writer as a new one
SELECT idempotent_increment('c', 'b', 6, 1, 1) AS owner_applies_on_b;
SET ROLE fbf_writer;
SELECT sqlstate_of($q$SELECT idempotent_increment('c', 'b', 6, 1, 1)$q$) AS existing_op_on_b,
       sqlstate_of($q$SELECT idempotent_increment('c', 'b', 6, 2, 1)$q$) AS new_op_on_b,
       sqlstate_of($q$SELECT idempotent_increment('c', 'a', 5, 2, 1)$q$) AS retry_on_a;
-- and a snapshot would show every key's operations
SELECT sqlstate_of($q$SELECT fbf_snapshot('c')$q$) AS snapshot_under_rls;
RESET ROLE;
SELECT fbf_snapshot('c') IS NOT NULL AS owner_snapshot;
ALTER TABLE c DISABLE ROW LEVEL SECURITY;
DROP POLICY only_key_a ON c;

-- VACUUM drains in-flight operations in index cleanup: a counter table
-- cannot turn it off for good, and a VACUUM that skips it drains first
SELECT sqlstate_of($q$ALTER TABLE c SET (vacuum_index_cleanup = off)$q$) AS reloption_off;
SELECT sqlstate_of($q$ALTER TABLE c SET (vacuum_index_cleanup = false)$q$) AS reloption_false;
ALTER TABLE c SET (vacuum_index_cleanup = on);
ALTER TABLE c RESET (vacuum_index_cleanup);
SELECT idempotent_increment('c', 11, 1, 1) AS pending_op;
SELECT pending > 0 AS has_pending FROM fbf_counter_stats WHERE counter = 'c'::regclass;
VACUUM (INDEX_CLEANUP OFF) c;
SELECT pending AS pending_after_vacuum FROM fbf_counter_stats WHERE counter = 'c'::regclass;
CREATE TABLE no_cleanup (key text, shard int, value bigint, PRIMARY KEY (key, shard))
	WITH (vacuum_index_cleanup = off);
SELECT sqlstate_of($q$CREATE INDEX ON no_cleanup USING fbf_filter (shard)$q$) AS new_counter_without_cleanup;
DROP TABLE no_cleanup;

-- at its cap: a filter that cannot grow past fbf.max_filter_size takes so
-- many new operations a period under its target.  With at_capacity =
-- dismiss it takes everything, and dismisses new operations at its
-- false-positive rate once over its target (capped); with refuse (the
-- default) it refuses what only the filter can answer while capped (53400)
SET fbf.max_filter_size = '64kB';
SELECT fbf_create_counter_table('capme', retention => '10 min', nbits => 1024, nhashes => 3, npast => 1);
-- only this file's statements maintain it: the worker's pass, on a server
-- where it runs, works under the server's fbf.max_filter_size, not this
-- session's cap, and could reshape the window between the statements
ALTER INDEX capme_fbf SET (worker_maintenance = off);
ALTER INDEX capme_fbf SET (at_capacity = 'dismiss');
SELECT count(*) > 0 AS some_applied FROM generate_series(1, 3000) g WHERE idempotent_increment('capme', 1, g, 1);
SELECT count(fbf_counter_maintain('capme')) AS passes FROM generate_series(1, 3);
SELECT capped, filters, estimated_fpp > target_fpp AS over_target
FROM fbf_counter_stats WHERE counter = 'capme'::regclass;
CREATE TABLE capme_before AS SELECT fbf_counter_value('capme') AS v;
ALTER INDEX capme_fbf SET (at_capacity = 'refuse');
-- refused: what only the filter can answer (a seq more than 64 below its
-- stream's highest)
SELECT sqlstate_of($q$SELECT idempotent_increment('capme', 1, -100, 1)$q$) AS new_op_refused;
SELECT fbf_counter_value('capme') = v AS nothing_applied FROM capme_before;
-- a stream answers exactly, at the cap too
SELECT idempotent_increment('capme', 2, 1, 1) AS stream_op_applied;
ALTER INDEX capme_fbf SET (at_capacity = 'dismiss');
SELECT sqlstate_of($q$SELECT idempotent_increment('capme', 1, -100, 1)$q$) AS new_op_answered;
SELECT sqlstate_of($q$ALTER INDEX capme_fbf SET (at_capacity = 'sometimes')$q$) AS bad_value;
DROP TABLE capme, capme_before;

-- shares of the capacity: by default (at_capacity = refuse, share_by =
-- role) each role may take its share of what the filter takes a period;
-- beyond it its operations are refused (53400) and nothing is applied,
-- while the filter stays under its target
CREATE ROLE regress_fbf_tenant;
SELECT fbf_create_counter_table('shareme', retention => '10 min', nbits => 1024, nhashes => 3, npast => 1);
GRANT SELECT, INSERT, UPDATE ON shareme TO regress_fbf_tenant;
SELECT reloptions FROM pg_class WHERE relname = 'shareme_fbf';
SET ROLE regress_fbf_tenant;
\set VERBOSITY terse
SELECT count(*) FROM generate_series(1, 3000) g WHERE idempotent_increment('shareme', 'k1', 1, g, 1);
-- the refused statement aborted: what it took of the period is given
-- back, and one new operation applies
SELECT idempotent_increment('shareme', 'k1', 9, 1, 1);
RESET ROLE;
SELECT fbf_counter_value('shareme', 'k1') AS only_that_one;
SELECT capped, estimated_fpp <= target_fpp AS within_target
FROM fbf_counter_stats WHERE counter = 'shareme'::regclass;
-- shared by key: the message names the key, and another key has its own share
ALTER INDEX shareme_fbf SET (share_by = 'key');
SELECT count(*) FROM generate_series(1, 3000) g WHERE idempotent_increment('shareme', 'k2', 1, g, 1);
SELECT idempotent_increment('shareme', 'k3', 1, 1, 1) AS other_key_applied;
-- nobody's share: one pool, the filter's capacity
ALTER INDEX shareme_fbf SET (share_by = 'none');
SELECT count(*) FROM generate_series(1, 3000) g WHERE idempotent_increment('shareme', 'k4', 1, g, 1);
\set VERBOSITY default
SELECT sqlstate_of($q$ALTER INDEX shareme_fbf SET (share_by = 'everyone')$q$) AS bad_value;
DROP TABLE shareme;
RESET fbf.max_filter_size;
-- a dedup table has no key to share by
SELECT fbf_create_dedup('shared_claims') IS NOT NULL AS created;
ALTER INDEX shared_claims_fbf SET (share_by = 'key');
ALTER INDEX shared_claims_fbf SET (share_by = 'none');
DROP TABLE shared_claims;

-- too many operations in flight: one transaction, one small filter.  A
-- role's open and prepared transactions hold at most its share of the
-- entries its pending pages hold (53400; alone, 80% of them)
SELECT fbf_create_counter_table('tiny', retention => '1 min', nbits => 1024, nhashes => 3, npast => 1);
-- only this file's statements drain it: the worker's pass, on a server
-- where it runs, could drain or grow it between the statements below
ALTER INDEX tiny_fbf SET (worker_maintenance = off);
GRANT SELECT, INSERT, UPDATE ON tiny TO regress_fbf_tenant;
BEGIN;
SET LOCAL ROLE regress_fbf_tenant;
\set VERBOSITY terse
SELECT count(*) FROM generate_series(1, 21632) g WHERE idempotent_increment('tiny', 1, g, 1);
\set VERBOSITY default
ROLLBACK;
REVOKE ALL ON tiny FROM regress_fbf_tenant;
DROP ROLE regress_fbf_tenant;
-- without shares, the pending chain itself is full (53000)
ALTER INDEX tiny_fbf SET (share_by = 'none');
BEGIN;
SELECT count(*) FROM generate_series(1, 21632) g WHERE idempotent_increment('tiny', 1, g, 1);
SELECT idempotent_increment('tiny', 1, 21633, 1);
ROLLBACK;
ALTER INDEX tiny_fbf RESET (share_by);
SELECT fbf_counter_value('tiny') AS nothing_applied;
-- the same batch in smaller transactions is fine, and reuses the overflow
-- pages the big one left (the filter does not grow)
CREATE TABLE tiny_size AS SELECT bytes FROM fbf_counter_stats WHERE counter = 'tiny'::regclass;
SELECT count(*) FROM generate_series(1, 3000) g WHERE idempotent_increment('tiny', 1, g, 1);
SELECT s.bytes = t.bytes AS same_size, s.pending
FROM fbf_counter_stats s, tiny_size t WHERE s.counter = 'tiny'::regclass;

-- creating counter tables: bad settings and the memory cap
SELECT fbf_create_counter_table('bad', retention => '0.5 s');
SELECT fbf_create_counter_table('bad', target_fpp => 0);
SELECT fbf_create_counter_table('bad', target_fpp => 0.9);
SELECT fbf_create_counter_table('bad', expected_rate => -1);
SELECT fbf_create_counter_table('bad', shards => 0);
SELECT fbf_create_counter_table('bad', nbits => 1024);
SELECT fbf_create_counter_table('bad', nbits => 1024, nhashes => 40, npast => 1);
SELECT fbf_create_counter_table('a.b.c');
-- the filter: 'bloom' (the default) or 'cuckoo'; a cuckoo window has no
-- explicit shape; a window's filter is the format of its pages, which
-- ALTER INDEX cannot change (0A000)
SELECT fbf_create_counter_table('bad', filter => 'cukoo');
SELECT fbf_create_counter_table('bad', filter => NULL);
SELECT fbf_create_counter_table('bad', filter => 'cuckoo', nbits => 4096, nhashes => 4, npast => 2);
SELECT sqlstate_of($q$SELECT fbf_create_counter_table('bad', filter => 'cukoo')$q$) AS bad_filter,
	   sqlstate_of($q$SELECT fbf_create_counter_table('bad', filter => 'cuckoo', nbits => 4096, nhashes => 4, npast => 2)$q$) AS cuckoo_shape;
ALTER INDEX c_fbf SET (filter = cuckoo);
SELECT sqlstate_of($q$ALTER INDEX c_fbf SET (filter = cuckoo)$q$) AS alter_cuckoo,
	   sqlstate_of($q$ALTER INDEX c_fbf SET (filter = bloom)$q$) AS alter_bloom,
	   sqlstate_of($q$ALTER INDEX c_fbf RESET (filter)$q$) AS reset,
	   sqlstate_of($q$ALTER INDEX c_fbf SET (filter = 'cukoo')$q$) AS alter_bad,
	   sqlstate_of($q$CREATE TABLE bad_hand (key text NOT NULL DEFAULT '', shard int NOT NULL,
					  value bigint NOT NULL DEFAULT 0, PRIMARY KEY (key, shard));
					  CREATE INDEX ON bad_hand USING fbf_filter (shard) WITH (filter = nope)$q$) AS hand_made;
-- an explicit bloom is the default, and not written into the index's options
SELECT fbf_create_counter_table('explicit_bloom', filter => 'bloom');
SELECT reloptions FROM pg_class WHERE relname = 'explicit_bloom_fbf';
DROP TABLE explicit_bloom;
-- the options are the values given, whatever the caller's extra_float_digits
SET extra_float_digits = -15;
SELECT fbf_create_counter_table('digits', target_fpp => 0.0012, expected_rate => 12345.5);
SELECT reloptions FROM pg_class WHERE relname = 'digits_fbf';
RESET extra_float_digits;
DROP TABLE digits;
SET fbf.max_filter_size = '1MB';
SELECT fbf_create_counter_table('bad', retention => '1 hour', expected_rate => 1000, target_fpp => 0.001);
SELECT fbf_create_counter_table('bad', retention => '1 hour', expected_rate => 1e9, target_fpp => 1e-9);
RESET fbf.max_filter_size;
SELECT fbf_create_counter_table('c');
SELECT count(*) FROM pg_class WHERE relname LIKE 'bad%';
-- a hand-made fbf_filter index must sit on a counter-shaped table
CREATE TABLE not_a_counter (shard int);
CREATE INDEX ON not_a_counter USING fbf_filter (shard);
CREATE INDEX CONCURRENTLY ON c USING fbf_filter (shard);

-- the extension cannot be dropped from under counter tables; with CASCADE
-- the filters go and the tables stay; a table becomes a counter again by
-- recreating its filter index
\set VERBOSITY terse
DROP EXTENSION fbf;
\set VERBOSITY default
SET client_min_messages = warning;
DROP EXTENSION fbf CASCADE;
RESET client_min_messages;
SELECT count(*) AS plain_tables_left FROM pg_class WHERE relname IN ('c', 'tiny');
CREATE EXTENSION fbf;
CREATE INDEX c_fbf ON c USING fbf_filter (shard) WITH (retention_ms = 60000);
SELECT idempotent_increment('c', 9, 1, 1), idempotent_increment('c', 9, 1, 1);

-- distributing needs Citus (test/t/022_citus.pl tests it with Citus)
SELECT fbf_distribute_counter('c');

-- leave no roles behind: a second run on the same cluster creates them again
DROP OWNED BY fbf_reader, fbf_writer, fbf_blind, fbf_columns, fbf_nobody;
DROP ROLE fbf_reader, fbf_writer, fbf_blind, fbf_columns, fbf_nobody;
