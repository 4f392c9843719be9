--
-- The cuckoo index access method: plans, results equal to a sequential
-- scan, NULLs, growth, duplicates, deletion, DDL, unlogged tables and
-- every error a user can cause.
--
\set VERBOSITY terse
SET enable_seqscan = off;

-- ck is temporary, so that what VACUUM removes below does not depend on the
-- snapshots of other sessions (the fbf worker's, autovacuum's) open in this
-- database at that moment
CREATE TEMP TABLE ck (
	id int4,
	big int8,
	name text,
	u uuid,
	small int2
);
INSERT INTO ck
	SELECT g, g * 1000003::int8, 'name-' || g,
		   md5(g::text)::uuid, (g % 20)::int2
	FROM generate_series(1, 20000) g;
INSERT INTO ck VALUES (NULL, NULL, NULL, NULL, NULL);

CREATE INDEX ck_id ON ck USING cuckoo (id);
CREATE INDEX ck_big ON ck USING cuckoo (big) WITH (fingerprint_bits = 16, bucket_size = 8);
CREATE INDEX ck_name ON ck USING cuckoo (name) WITH (fingerprint_bits = 12);
CREATE INDEX ck_u ON ck USING cuckoo (u);
CREATE INDEX ck_small ON ck USING cuckoo (small) WITH (max_kicks = 10);
ANALYZE ck;

-- equality uses the index: as an index scan and as a bitmap scan
EXPLAIN (COSTS OFF) SELECT * FROM ck WHERE id = 42;
EXPLAIN (COSTS OFF) SELECT * FROM ck WHERE big = 42000126;
EXPLAIN (COSTS OFF) SELECT * FROM ck WHERE name = 'name-42';
EXPLAIN (COSTS OFF) SELECT * FROM ck WHERE u = md5('42')::uuid;
SET enable_indexscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM ck WHERE id = 42;
RESET enable_indexscan;

-- no ranges, no ordering, no IS NULL: those fall back to other plans
EXPLAIN (COSTS OFF) SELECT * FROM ck WHERE id < 42;
EXPLAIN (COSTS OFF) SELECT * FROM ck WHERE id IS NULL;

-- other integer types of the family use the index (int8 = int4, int2 = int8)
EXPLAIN (COSTS OFF) SELECT * FROM ck WHERE big = 42000126::int4;
SELECT id FROM ck WHERE big = 42000126::int4;
SELECT id FROM ck WHERE big = 42000126::int8;
SELECT count(*) FROM ck WHERE small = 2::int8;
SELECT count(*) FROM ck WHERE id = 42::int2;

SELECT * FROM ck WHERE id = 42;
SELECT id FROM ck WHERE name = 'name-777';
SELECT id FROM ck WHERE u = md5('19999')::uuid;
SELECT count(*) FROM ck WHERE id = 0;
SELECT count(*) FROM ck WHERE name = 'nobody';

-- lists: "= ANY (array)" probes each element; repeats and NULLs are harmless
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM ck WHERE id IN (1, 2, 3);
SELECT id FROM ck WHERE id IN (5, 1, 5, NULL, 0, 19999) ORDER BY id;
SELECT id FROM ck WHERE id = ANY ('{}'::int4[]);
SELECT id FROM ck WHERE big = ANY (ARRAY[42000126, 7000021]::int4[]) ORDER BY id;
SELECT id FROM ck WHERE name = ANY (ARRAY['name-3', 'nobody', 'name-3']);
SELECT id FROM ck WHERE id = ANY (ARRAY[7, 8]) AND id = 8;
SET enable_indexscan = off;
RESET enable_bitmapscan;
EXPLAIN (COSTS OFF) SELECT * FROM ck WHERE id IN (1, 2, 3);
SELECT id FROM ck WHERE id IN (5, 1, 5, NULL, 0, 19999) ORDER BY id;
RESET enable_indexscan;

-- "col = NULL" matches nothing, and NULL rows are not indexed
SELECT count(*) FROM ck WHERE id = NULL::int4;
SELECT entries FROM cuckoo_index_stats('ck_id');

-- every key, through the index, equals a sequential scan
CREATE FUNCTION ck_mismatches(col text, keys text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	by_index bigint;
	by_seqscan bigint;
BEGIN
	-- one index probe per key
	SET LOCAL enable_seqscan = off;
	SET LOCAL enable_bitmapscan = off;
	EXECUTE format('SELECT sum(coalesce(hashint8(c.id::int8), 0) + c.n) '
				   'FROM %s AS k(key), LATERAL (SELECT count(*) AS n, min(id) AS id '
				   'FROM ck WHERE %I = k.key) c', keys, col)
		INTO by_index;
	-- the same from one sequential scan of the table
	SET LOCAL enable_seqscan = on;
	SET LOCAL enable_indexscan = off;
	EXECUTE format('SELECT sum(coalesce(hashint8(c.id::int8), 0) + coalesce(c.n, 0)) '
				   'FROM %s AS k(key) LEFT JOIN (SELECT %I AS key, count(*) AS n, '
				   'min(id) AS id FROM ck GROUP BY 1) c USING (key)', keys, col)
		INTO by_seqscan;
	RETURN by_index - by_seqscan;
END $$;

SELECT ck_mismatches('id', 'generate_series(-10, 20010)');
SELECT ck_mismatches('big', '(SELECT g * 1000003::int8 FROM generate_series(-5, 20005) g)');
SELECT ck_mismatches('name', '(SELECT ''name-'' || g FROM generate_series(-5, 20005) g)');
SELECT ck_mismatches('u', '(SELECT md5(g::text)::uuid FROM generate_series(-5, 20005) g)');
SELECT ck_mismatches('small', '(SELECT g::int2 FROM generate_series(-5, 25) g)');

-- the index's shape as built
SELECT bucket_pages > 0 AS has_pages, entries, overflow_pages, doublings,
	   fingerprint_bits, bucket_size, load_factor BETWEEN 0.5 AND 0.95 AS load_ok
FROM cuckoo_index_stats('ck_id');
SELECT fingerprint_bits, bucket_size, max_kicks FROM cuckoo_index_stats('ck_big');
SELECT fingerprint_bits, max_kicks FROM cuckoo_index_stats('ck_name');
SELECT max_kicks FROM cuckoo_index_stats('ck_small');
-- ck_small holds 1,000 copies of most keys: they spill to overflow pages
SELECT overflow_pages > 0 AS overflowed, overflow_entries > 0 AS spilled
FROM cuckoo_index_stats('ck_small');

SELECT entries, heap_tuples, dead_entries FROM cuckoo_index_verify('ck_id');
SELECT entries, heap_tuples, dead_entries FROM cuckoo_index_verify('ck_big');
SELECT entries, heap_tuples FROM cuckoo_index_verify('ck_name');
SELECT entries, heap_tuples FROM cuckoo_index_verify('ck_u');
SELECT entries, heap_tuples FROM cuckoo_index_verify('ck_small');

-- growth: 9x the rows doubles the table three times; nothing is lost
INSERT INTO ck
	SELECT g, g * 1000003::int8, 'name-' || g, md5(g::text)::uuid, (g % 20)::int2
	FROM generate_series(20001, 180000) g;
SELECT doublings >= 3 AS doubled, entries, growing FROM cuckoo_index_stats('ck_id');
SELECT ck_mismatches('id', 'generate_series(-10, 180010)');
SELECT ck_mismatches('name', '(SELECT ''name-'' || g FROM generate_series(1, 180000, 7) g)');
SELECT entries, heap_tuples FROM cuckoo_index_verify('ck_id');
SELECT entries, heap_tuples FROM cuckoo_index_verify('ck_name');

-- many rows with one key: overflow pages, not doublings
SELECT doublings AS doublings_before FROM cuckoo_index_stats('ck_id') \gset
INSERT INTO ck (id, name) SELECT 7, 'dup' FROM generate_series(1, 20000);
SELECT doublings = :doublings_before AS no_growth, overflow_pages > 0 AS overflowed
FROM cuckoo_index_stats('ck_id');
SELECT count(*) FROM ck WHERE id = 7;
SELECT count(*) FROM ck WHERE name = 'dup';
SELECT ck_mismatches('id', 'generate_series(1, 100)');
SELECT entries, heap_tuples FROM cuckoo_index_verify('ck_id');

-- DELETE: the rows disappear from index lookups at once
DELETE FROM ck WHERE id % 2 = 0 OR name = 'dup';
SELECT count(*) FROM ck WHERE id = 42;
SELECT count(*) FROM ck WHERE id = 43;
SELECT count(*) FROM ck WHERE id = 7;
SELECT ck_mismatches('id', 'generate_series(1, 1000)');

-- VACUUM empties the dead entries' slots and the counts agree again
VACUUM ck;
SELECT entries, dead_entries FROM cuckoo_index_stats('ck_id');
SELECT entries, heap_tuples, dead_entries FROM cuckoo_index_verify('ck_id');
SELECT ck_mismatches('id', 'generate_series(-10, 180010)');

-- freed slots take new entries without growing the table
SELECT bucket_pages AS pages_before FROM cuckoo_index_stats('ck_id') \gset
INSERT INTO ck (id) SELECT g * 2 FROM generate_series(1, 100000) g;
SELECT bucket_pages = :pages_before AS same_size FROM cuckoo_index_stats('ck_id');
SELECT count(*) FROM ck WHERE id = 42;
SELECT entries, heap_tuples FROM cuckoo_index_verify('ck_id');

-- rebuilds: VACUUM FULL, CLUSTER is refused, REINDEX, TRUNCATE
VACUUM FULL ck;
SELECT doublings, entries FROM cuckoo_index_stats('ck_id');
SELECT ck_mismatches('id', 'generate_series(1, 2000)');
CLUSTER ck USING ck_id;
REINDEX INDEX ck_name;
SELECT ck_mismatches('name', '(SELECT ''name-'' || g FROM generate_series(1, 2000) g)');
REINDEX TABLE ck;
SELECT entries, heap_tuples FROM cuckoo_index_verify('ck_u');
ALTER INDEX ck_id SET (fingerprint_bits = 16);
REINDEX INDEX ck_id;
SELECT fingerprint_bits FROM cuckoo_index_stats('ck_id');
SELECT ck_mismatches('id', 'generate_series(1, 2000)');
TRUNCATE ck;
SELECT entries, bucket_pages FROM cuckoo_index_stats('ck_id');
SELECT count(*) FROM ck WHERE id = 1;
INSERT INTO ck (id) VALUES (1), (1), (2);
SELECT count(*) FROM ck WHERE id = 1;

-- an unlogged table: the index starts from its init fork
CREATE UNLOGGED TABLE ck_unlogged (k text);
CREATE INDEX ck_unlogged_k ON ck_unlogged USING cuckoo (k);
INSERT INTO ck_unlogged SELECT 'k' || g FROM generate_series(1, 5000) g;
EXPLAIN (COSTS OFF) SELECT * FROM ck_unlogged WHERE k = 'k77';
SELECT * FROM ck_unlogged WHERE k = 'k77';
SELECT entries, heap_tuples FROM cuckoo_index_verify('ck_unlogged_k');

-- a temporary table
CREATE TEMP TABLE ck_temp (k int8);
CREATE INDEX ON ck_temp USING cuckoo (k);
INSERT INTO ck_temp SELECT g FROM generate_series(1, 3000) g;
SELECT count(*) FROM ck_temp WHERE k = 2999;

-- an empty table, then growth from a single bucket page
CREATE TABLE ck_empty (k int4);
CREATE INDEX ck_empty_k ON ck_empty USING cuckoo (k);
SELECT bucket_pages, entries FROM cuckoo_index_stats('ck_empty_k');
INSERT INTO ck_empty SELECT g FROM generate_series(1, 10000) g;
SELECT doublings > 0 AS grew, entries FROM cuckoo_index_stats('ck_empty_k');
SELECT count(*) FROM ck_empty WHERE k = 9999;
SELECT entries, heap_tuples FROM cuckoo_index_verify('ck_empty_k');

-- with a btree on the same column, the planner takes the cuckoo index for
-- equality, and the btree for ranges and lists (costs on, no enable_* forced)
RESET enable_seqscan;
CREATE TABLE ck_plan (k int8, pad text);
INSERT INTO ck_plan SELECT g, md5(g::text) FROM generate_series(1, 50000) g;
CREATE INDEX ck_plan_btree ON ck_plan USING btree (k);
CREATE INDEX ck_plan_cuckoo ON ck_plan USING cuckoo (k);
VACUUM ANALYZE ck_plan;
EXPLAIN (COSTS OFF) SELECT * FROM ck_plan WHERE k = 4242;
EXPLAIN (COSTS OFF) SELECT * FROM ck_plan WHERE k BETWEEN 10 AND 20;
EXPLAIN (COSTS OFF) SELECT * FROM ck_plan WHERE k IN (1, 2, 3);
DROP TABLE ck_plan;
SET enable_seqscan = off;

-- errors: reloptions
CREATE INDEX ck_bad ON ck USING cuckoo (id) WITH (fingerprint_bits = 10);
CREATE INDEX ck_bad ON ck USING cuckoo (id) WITH (fingerprint_bits = 32);
CREATE INDEX ck_bad ON ck USING cuckoo (id) WITH (bucket_size = 1);
CREATE INDEX ck_bad ON ck USING cuckoo (id) WITH (bucket_size = 9);
CREATE INDEX ck_bad ON ck USING cuckoo (id) WITH (max_kicks = 0);
CREATE INDEX ck_bad ON ck USING cuckoo (id) WITH (max_kicks = 5000);
CREATE INDEX ck_bad ON ck USING cuckoo (id) WITH (fillfactor = 9);
ALTER INDEX ck_id SET (fingerprint_bits = 9);

-- errors: what the access method cannot do
CREATE UNIQUE INDEX ck_bad ON ck USING cuckoo (id);
CREATE INDEX ck_bad ON ck USING cuckoo (id, big);
CREATE INDEX ck_bad ON ck USING cuckoo (id) INCLUDE (big);
CREATE INDEX ck_bad ON ck USING cuckoo ((point(id, id)));
CREATE INDEX CONCURRENTLY ck_conc ON ck USING cuckoo (big);
SELECT entries FROM cuckoo_index_stats('ck_conc');
DROP INDEX ck_conc;

-- errors: the inspection functions
CREATE INDEX ck_btree ON ck USING btree (id);
SELECT * FROM cuckoo_index_stats('ck_btree');
SELECT * FROM cuckoo_index_verify('ck_btree');
SELECT * FROM cuckoo_index_stats('ck');
SELECT * FROM cuckoo_index_stats(0);
CREATE ROLE ck_nobody;
SET ROLE ck_nobody;
SELECT * FROM cuckoo_index_stats('ck_id');
SELECT * FROM cuckoo_index_verify('ck_id');
RESET ROLE;
DROP ROLE ck_nobody;

-- operator classes pass validation
SELECT count(*) AS opclasses, bool_and(amvalidate(opc.oid)) AS all_valid
FROM pg_opclass opc JOIN pg_am am ON am.oid = opcmethod
WHERE amname = 'cuckoo';

DROP TABLE ck, ck_unlogged, ck_empty;
DROP FUNCTION ck_mismatches(text, text);
