--
-- Counters and dedup tables on both filters, 'bloom' (the default) and
-- 'cuckoo': the same statements (fbf_window_kinds.inc), the same results.
-- Then what differs: the measures fbf_counter_stats shows, growth by
-- load, and what a cuckoo window refuses.
--
\set filter bloom
\i test/sql/fbf_window_kinds.inc
\set filter cuckoo
\i test/sql/fbf_window_kinds.inc

-- a cuckoo window's snapshot is an fbf value of its own kind (format
-- version 2): its blocks' bits, no hash count, 16 live epochs
CREATE TEMP TABLE csnap AS SELECT fbf_snapshot('kc_cuckoo') AS v;
SELECT substr(fbf_send(v), 1, 6) AS header, i.nbits BETWEEN 8000 * 8 AND 8144 * 8 AS block_bits,
	   i.nhashes, i.npast, i.nlive, i.period, i.bytes = length(fbf_send(v)) AS bytes,
	   i.counts[1] > 0 AS current_epoch_holds, i.estimated_fpp < 0.01 AS low_fpp,
	   fbf_estimated_fpp(v) = i.estimated_fpp AS same_fpp
FROM csnap, fbf_info(v) i;
-- functions of Bloom filters refuse it (0A000), and so does the other kind
\set VERBOSITY terse
SELECT fbf_add(v, 'x'::text) FROM csnap;
\echo :SQLSTATE
SELECT fbf_add(v, 1::bigint) FROM csnap;
\echo :SQLSTATE
SELECT fbf_add(v, ARRAY[1::bigint]) FROM csnap;
\echo :SQLSTATE
SELECT fbf_refresh(v) FROM csnap;
\echo :SQLSTATE
SELECT fbf_resize(v, 3) FROM csnap;
\echo :SQLSTATE
SELECT fbf_union(v, v) FROM csnap;
\echo :SQLSTATE
SELECT fbf_union(fbf_create(64, 1, 1, 1), v) FROM csnap;
\echo :SQLSTATE
SELECT fbf_contains(v, 'x'::text, 'nonsense') FROM csnap;
\echo :SQLSTATE
-- loads: into a Bloom window, a Bloom snapshot into a cuckoo window, into
-- a cuckoo window that holds operations: refused, nothing written
SELECT fbf_counter_load('kc_bloom', v) FROM csnap;
\echo :SQLSTATE
SELECT fbf_counter_load('kc_cuckoo', fbf_snapshot('kc_bloom'));
\echo :SQLSTATE
SELECT fbf_counter_load('kc_cuckoo', v) FROM csnap;
\echo :SQLSTATE
SELECT idempotent_increment('kc_cuckoo', 1, 1, 10) AS retry_still_dismissed;

-- the measures: a cuckoo window's live load, fingerprint bits and blocks
SELECT counter, filter, nhashes, fingerprint_bits, load > 0 AS loaded,
	   estimated_fpp < target_fpp AS under_target, nbits = partitions * 8144 * 8 AS block_bits
FROM fbf_counter_stats WHERE counter::text LIKE 'kc\_%' AND counter::text NOT LIKE '%short'
ORDER BY 1;

-- growth by load: a cuckoo window planned for 10 operations a second
-- takes 20,000 in one go, splitting its partitions (no entry lost: every
-- retry is dismissed)
-- (one statement holds more entries in flight than a role's share: no
-- shares; and only the test's own statements drain or resize it, neither
-- the worker nor autovacuum, as every table below whose pending chains or
-- shape the test shows)
BEGIN;
SELECT fbf_create_counter_table('cw_grow', retention => '1 min', expected_rate => 10,
								filter => 'cuckoo') IS NOT NULL AS created;
ALTER INDEX cw_grow_fbf SET (share_by = 'none', worker_maintenance = off);
ALTER TABLE cw_grow SET (autovacuum_enabled = off);
COMMIT;
SELECT partitions AS planned FROM fbf_counter_stats WHERE counter = 'cw_grow'::regclass;
SELECT count(*) FILTER (WHERE idempotent_increment('cw_grow', 1, g, 1)) AS applied
FROM generate_series(1, 20000) g;
SELECT fbf_counter_maintain('cw_grow') IN ('grow', 'hold') AS maintained;
SELECT count(*) FILTER (WHERE idempotent_increment('cw_grow', 1, g, 1)) AS retries_applied
FROM generate_series(1, 20000) g;
-- what its blocks take under the target in the period of the split is
-- stored, the rest waits on the pending chain for the next period (a
-- split adds no room for the entries of its own period): every operation
-- is remembered, once
SELECT partitions > 1 AS grew, load < 0.97 AS room,
	   estimated_fpp <= target_fpp AS under_target,
	   pending + (SELECT sum(e) FROM unnest(elements) e) AS remembered
FROM fbf_counter_stats WHERE counter = 'cw_grow'::regclass;

-- epochs keyed with different partition counts: a window that grew, then
-- refreshed (period 2 s), takes more (keyed with the new count) and may grow
-- again; refreshed again, a lookup computes each live epoch's fingerprint
-- with the partitions it began with (meta->cuckoo.parts, shifted by age)
BEGIN;
SELECT fbf_create_counter_table('cw_epochs', retention => '30 s', expected_rate => 10,
								filter => 'cuckoo') IS NOT NULL AS created;
ALTER INDEX cw_epochs_fbf SET (share_by = 'none', worker_maintenance = off);
ALTER TABLE cw_epochs SET (autovacuum_enabled = off);
COMMIT;
SELECT count(*) FILTER (WHERE idempotent_increment('cw_epochs', 1, g, 1)) AS applied
FROM generate_series(1, 10000) g;
SELECT fbf_counter_maintain('cw_epochs') IN ('grow', 'hold') AS maintained;
SELECT pg_sleep(4.5);
SELECT count(*) FILTER (WHERE idempotent_increment('cw_epochs', 2, g, 1)) > 0 AS applied
FROM generate_series(1, 20000) g;
SELECT fbf_counter_maintain('cw_epochs') IN ('grow', 'hold') AS maintained;
SELECT pg_sleep(4.5);
SELECT count(*) FILTER (WHERE idempotent_increment('cw_epochs', 1, g, 1)) AS retries_applied
FROM generate_series(1, 10000) g;
SELECT count(*) FILTER (WHERE idempotent_increment('cw_epochs', 2, g, 1)) AS retries_applied
FROM generate_series(1, 20000) g;
SELECT partitions > 1 AS grew, pending,
	   (SELECT count(*) FROM unnest(elements) e WHERE e > 0) > 1 AS epochs
FROM fbf_counter_stats WHERE counter = 'cw_epochs'::regclass;

-- waiting operations that do not fit in the snapshot's blocks: the load
-- splits them (as a refused drain makes the window grow) and stores all
BEGIN;
SELECT fbf_create_counter_table('cw_wait', retention => '1 min', expected_rate => 1,
								filter => 'cuckoo') IS NOT NULL AS created;
ALTER INDEX cw_wait_fbf SET (worker_maintenance = off);
ALTER TABLE cw_wait SET (autovacuum_enabled = off);
COMMIT;
SELECT count(*) FILTER (WHERE idempotent_increment('cw_wait', 1, g, 1)) AS applied
FROM generate_series(1, 6000) g;
SELECT partitions, pending FROM fbf_counter_stats WHERE counter = 'cw_wait'::regclass;
SELECT i.nparts, i.counts[1] AS waiting FROM fbf_info(fbf_snapshot('cw_wait')) i;
BEGIN;
SELECT fbf_create_counter_table('cw_wait_copy', retention => '1 min', expected_rate => 1,
								filter => 'cuckoo') IS NOT NULL AS created;
ALTER INDEX cw_wait_copy_fbf SET (worker_maintenance = off);
ALTER TABLE cw_wait_copy SET (autovacuum_enabled = off);
COMMIT;
SELECT fbf_counter_load('cw_wait_copy', fbf_snapshot('cw_wait')) AS loaded;
SELECT partitions, pending, load > 0.5 AS stored FROM fbf_counter_stats WHERE counter = 'cw_wait_copy'::regclass;
SELECT count(*) FILTER (WHERE idempotent_increment('cw_wait_copy', 1, g, 1)) AS retries_applied
FROM generate_series(1, 6000) g;
DROP TABLE cw_wait, cw_wait_copy;
-- malformed input of the new kind
SELECT '\x464246000201'::fbf;
\echo :SQLSTATE
SELECT (substr(v::text, 1, 20) || '00' || substr(v::text, 23))::fbf FROM csnap;
\echo :SQLSTATE
-- saved like any other: named, and among all of one's tables
SELECT name, snapshot IS NOT NULL AS saved FROM fbf_counter_save('kc_cuckoo');
CREATE ROLE fbf_filters_owner;
GRANT CREATE ON SCHEMA public TO fbf_filters_owner;
SET ROLE fbf_filters_owner;
SELECT fbf_create_counter_table('owned_bloom', retention => '1 min') IS NOT NULL AS bloom,
	   fbf_create_counter_table('owned_cuckoo', retention => '1 min', filter => 'cuckoo') IS NOT NULL AS cuckoo;
SELECT name, (fbf_info(snapshot)).nlive > 0 AS saved FROM fbf_counter_save() ORDER BY name;
RESET ROLE;
DROP TABLE owned_bloom, owned_cuckoo;
REVOKE CREATE ON SCHEMA public FROM fbf_filters_owner;
DROP ROLE fbf_filters_owner;
DROP TABLE csnap;
-- no explicit shape, no ring to resize
SELECT fbf_counter_resize('kc_cuckoo', 8);
SELECT fbf_create_counter_table('cw_shape', nbits => 4096, nhashes => 4, npast => 2,
								filter => 'cuckoo');
\set VERBOSITY default
