-- Windows belong on plain tables only, and one object that is not a
-- counter breaks neither monitoring, nor saves, nor REINDEX elsewhere.
\set VERBOSITY default
SELECT fbf_create_counter_table('wt_counter', retention => '1 min', expected_rate => 100);
SELECT idempotent_increment('wt_counter', 1, 1, 1);

-- an fbf_filter index on a materialized view or a partitioned table
CREATE MATERIALIZED VIEW wt_mv AS
	SELECT 'a'::text AS key, 0 AS shard, 1::bigint AS value;
CREATE INDEX wt_mv_fbf ON wt_mv USING fbf_filter (shard);
CREATE TABLE wt_parted (key text, shard integer, value bigint) PARTITION BY LIST (shard);
CREATE INDEX wt_parted_fbf ON wt_parted USING fbf_filter (shard);
CREATE TABLE wt_part0 PARTITION OF wt_parted FOR VALUES IN (0);
CREATE INDEX wt_parted_fbf ON wt_parted USING fbf_filter (shard);
SELECT count(*) FROM pg_class c JOIN pg_am a ON a.oid = c.relam
WHERE a.amname = 'fbf_filter' AND c.relname LIKE 'wt_%';

-- such indexes, as an older version let them be made (forged here in the
-- catalog), are skipped by the statistics and saves
CREATE TABLE wt_old_mv (key text, shard integer, value bigint);
CREATE INDEX wt_old_mv_fbf ON wt_old_mv USING fbf_filter (shard);
UPDATE pg_class SET relkind = 'm' WHERE oid = 'wt_old_mv'::regclass;
CREATE INDEX wt_parted_idx ON wt_parted (shard);
UPDATE pg_class SET relam = (SELECT oid FROM pg_am WHERE amname = 'fbf_filter')
WHERE oid = 'wt_parted_idx'::regclass;
SELECT counter, applied FROM fbf_counter_stats WHERE counter::text LIKE 'wt\_%' ORDER BY 1;
SELECT count(*) >= 0 FROM fbf_dedup_stats;
SELECT name FROM fbf_counter_save() WHERE name LIKE 'public.wt\_%' ORDER BY 1;
SELECT name FROM fbf_counter_save('wt_old_mv');
SELECT name FROM fbf_counter_save('wt_parted');
-- an oid of no relation
SELECT name FROM fbf_counter_save(0::regclass);
UPDATE pg_class SET relkind = 'r' WHERE oid = 'wt_old_mv'::regclass;
DROP TABLE wt_old_mv;
DROP INDEX wt_parted_idx;

-- REINDEX CONCURRENTLY of a schema without counters is not refused
CREATE SCHEMA wt_other;
CREATE TABLE wt_other.t (x integer);
CREATE INDEX ON wt_other.t (x);
REINDEX SCHEMA CONCURRENTLY wt_other;
-- of a schema with one, it is
CREATE SCHEMA wt_counters;
SELECT fbf_create_counter_table('wt_counters.c', retention => '1 min', expected_rate => 100);
REINDEX SCHEMA CONCURRENTLY wt_counters;
REINDEX SCHEMA wt_counters;

DROP SCHEMA wt_other CASCADE;
DROP SCHEMA wt_counters CASCADE;
DROP MATERIALIZED VIEW wt_mv;
DROP TABLE wt_parted;
DROP TABLE wt_counter;
