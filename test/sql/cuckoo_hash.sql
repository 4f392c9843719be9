-- The cuckoo index as a drop-in for hash: hash's default operator classes
-- (answers equal to a sequential scan's, across the families' types),
-- fillfactor (what it changes, and its bounds), and scans in both
-- directions, with killed entries.  test/cuckoo_hash_index.sh runs
-- PostgreSQL's own hash_index.sql against cuckoo.
\set VERBOSITY terse
SET client_min_messages = warning;

-- every default operator class of hash has a cuckoo twin of the same
-- name, type and equality operators
SELECT h.opcname, h.opcintype::regtype
FROM pg_opclass h
WHERE h.opcmethod = (SELECT oid FROM pg_am WHERE amname = 'hash') AND h.opcdefault
  AND NOT EXISTS (
	SELECT 1 FROM pg_opclass c
	WHERE c.opcmethod = (SELECT oid FROM pg_am WHERE amname = 'cuckoo')
	  AND c.opcdefault AND c.opcname = h.opcname AND c.opcintype = h.opcintype);
SELECT hf.opfname, ho.amopopr::regoperator
FROM pg_amop ho JOIN pg_opfamily hf ON hf.oid = ho.amopfamily
JOIN pg_opclass hc ON hc.opcfamily = hf.oid AND hc.opcdefault
WHERE hf.opfmethod = (SELECT oid FROM pg_am WHERE amname = 'hash')
  AND NOT EXISTS (
	SELECT 1 FROM pg_amop co JOIN pg_opfamily cf ON cf.oid = co.amopfamily
	WHERE cf.opfmethod = (SELECT oid FROM pg_am WHERE amname = 'cuckoo')
	  AND cf.opfname = hf.opfname AND co.amopopr = ho.amopopr)
GROUP BY 1, 2 ORDER BY 1, 2;
-- and hashes as hash does (support function 2 of hash, 1 of cuckoo)
SELECT hc.opcname
FROM pg_opclass hc
JOIN pg_amproc hp ON hp.amprocfamily = hc.opcfamily AND hp.amproclefttype = hc.opcintype
  AND hp.amprocrighttype = hc.opcintype AND hp.amprocnum = 2
JOIN pg_opclass cc ON cc.opcname = hc.opcname AND cc.opcintype = hc.opcintype
  AND cc.opcmethod = (SELECT oid FROM pg_am WHERE amname = 'cuckoo')
LEFT JOIN pg_amproc cp ON cp.amprocfamily = cc.opcfamily AND cp.amproclefttype = cc.opcintype
  AND cp.amprocrighttype = cc.opcintype AND cp.amprocnum = 1
WHERE hc.opcmethod = (SELECT oid FROM pg_am WHERE amname = 'hash') AND hc.opcdefault
  AND cp.amproc IS DISTINCT FROM hp.amproc;

-- q's row count through the cuckoo index equals a sequential scan's
CREATE FUNCTION ckh_agree(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	plan text;
	by_index bigint;
	by_seqscan bigint;
BEGIN
	PERFORM set_config('enable_seqscan', 'off', true);
	PERFORM set_config('enable_bitmapscan', 'off', true);
	EXECUTE 'EXPLAIN (COSTS OFF) ' || q INTO plan;
	EXECUTE 'SELECT count(*) FROM (' || q || ') s' INTO by_index;
	PERFORM set_config('enable_seqscan', 'on', true);
	PERFORM set_config('enable_indexscan', 'off', true);
	EXECUTE 'SELECT count(*) FROM (' || q || ') s' INTO by_seqscan;
	PERFORM set_config('enable_indexscan', 'on', true);
	PERFORM set_config('enable_bitmapscan', 'on', true);
	RETURN format('%s rows%s%s', by_index,
				  CASE WHEN by_index <> by_seqscan THEN ', seq scan: ' || by_seqscan ELSE '' END,
				  CASE WHEN plan NOT LIKE 'Index Scan using %' THEN ', plan: ' || plan ELSE '' END);
END
$$;

CREATE TYPE ckh_mood AS ENUM ('sad', 'ok', 'happy');
CREATE TYPE ckh_pair AS (a int, b text);
CREATE TABLE ckh_types AS
SELECT g AS id,
	   (g % 2 = 0) AS b,
	   ('\x' || lpad(to_hex(g % 500), 4, '0'))::bytea AS by,
	   date '2024-01-01' + g % 400 AS d,
	   timestamptz '2024-01-01 00:00+00' + (g % 300) * interval '1 hour' AS tz,
	   (g % 250)::numeric / 10 AS num,
	   (g % 40) * interval '6 hours' AS iv,
	   jsonb_build_object('k', g % 30) AS j,
	   ARRAY[g % 20, g % 7] AS arr,
	   int4range(g % 15, g % 15 + 3) AS rng,
	   ROW(g % 12, 'x' || g % 5)::ckh_pair AS pair,
	   (ARRAY['sad', 'ok', 'happy'])[1 + g % 3]::ckh_mood AS mood,
	   ('10.0.' || g % 9 || '.1')::inet AS ip,
	   ((g % 100) / 4.0)::float4 AS f4,
	   CASE WHEN g % 50 = 0 THEN 'NaN'::float8 WHEN g % 50 = 1 THEN '-0'::float8 ELSE g % 50 END AS f8,
	   ('n' || g % 80)::name COLLATE "C" AS nm,
	   rpad('c' || g % 60, 1 + g % 3)::char(6) AS ch,
	   (g % 30)::int2 AS i2
FROM generate_series(1, 3000) g;
CREATE INDEX ON ckh_types USING cuckoo (b);
CREATE INDEX ON ckh_types USING cuckoo (by);
CREATE INDEX ON ckh_types USING cuckoo (d);
CREATE INDEX ON ckh_types USING cuckoo (tz);
CREATE INDEX ON ckh_types USING cuckoo (num);
CREATE INDEX ON ckh_types USING cuckoo (iv);
CREATE INDEX ON ckh_types USING cuckoo (j);
CREATE INDEX ON ckh_types USING cuckoo (arr);
CREATE INDEX ON ckh_types USING cuckoo (rng);
CREATE INDEX ON ckh_types USING cuckoo (pair);
CREATE INDEX ON ckh_types USING cuckoo (mood);
CREATE INDEX ON ckh_types USING cuckoo (ip inet_ops);
CREATE INDEX ON ckh_types USING cuckoo (f4);
CREATE INDEX ON ckh_types USING cuckoo (f8 float8_ops);
CREATE INDEX ON ckh_types USING cuckoo (nm name_ops);
CREATE INDEX ON ckh_types USING cuckoo (ch);
CREATE INDEX ON ckh_types USING cuckoo (i2);
ANALYZE ckh_types;

SELECT q, ckh_agree(q) FROM (VALUES
	('SELECT * FROM ckh_types WHERE b = (SELECT true)'),
	('SELECT * FROM ckh_types WHERE by = ''\x0007'''),
	('SELECT * FROM ckh_types WHERE d = ''2024-02-01'''),
	('SELECT * FROM ckh_types WHERE tz = ''2024-01-02 03:00+00'''),
	('SELECT * FROM ckh_types WHERE tz = ''2024-01-01 22:00-05'''),
	('SELECT * FROM ckh_types WHERE num = 1.50'),
	('SELECT * FROM ckh_types WHERE iv = ''1 day'''),
	('SELECT * FROM ckh_types WHERE j = ''{"k": 7}'''),
	('SELECT * FROM ckh_types WHERE arr = ARRAY[3, 3]'),
	('SELECT * FROM ckh_types WHERE rng = int4range(4, 7)'),
	('SELECT * FROM ckh_types WHERE pair = ROW(5, ''x0'')::ckh_pair'),
	('SELECT * FROM ckh_types WHERE mood = ''ok'''),
	('SELECT * FROM ckh_types WHERE ip = ''10.0.3.1'''),
	('SELECT * FROM ckh_types WHERE f4 = 2.5'),
	('SELECT * FROM ckh_types WHERE f4 = 2.5::float8'),
	('SELECT * FROM ckh_types WHERE f8 = ''NaN'''),
	('SELECT * FROM ckh_types WHERE f8 = 0'),
	('SELECT * FROM ckh_types WHERE f8 = 7::float4'),
	('SELECT * FROM ckh_types WHERE nm = ''n17'''),
	('SELECT * FROM ckh_types WHERE nm = ''n17''::text'),
	('SELECT * FROM ckh_types WHERE ch = ''c5'''),
	('SELECT * FROM ckh_types WHERE i2 = 12::int8'),
	('SELECT * FROM ckh_types WHERE nm = ANY (ARRAY[''n1'', ''n2'', ''n1''])')) v(q);

-- fillfactor: hash's bounds and messages
CREATE TABLE ckh_ff (id int);
CREATE INDEX ckh_ff_bad ON ckh_ff USING cuckoo (id) WITH (fillfactor = 9);
CREATE INDEX ckh_ff_bad ON ckh_ff USING cuckoo (id) WITH (fillfactor = 101);
INSERT INTO ckh_ff SELECT generate_series(1, 20000);
CREATE INDEX ckh_ff_75 ON ckh_ff USING cuckoo (id);
CREATE INDEX ckh_ff_10 ON ckh_ff USING cuckoo (id) WITH (fillfactor = 10);
-- a build lays out 86% of the slots at 75 and above, proportionally less below
SELECT a.bucket_pages >= 7 * b.bucket_pages AS ff10_sparser,
	   a.load_factor < 0.12 AS ff10_load, b.load_factor > 0.80 AS ff75_load
FROM cuckoo_index_stats('ckh_ff_75') b, cuckoo_index_stats('ckh_ff_10') a;
ALTER INDEX ckh_ff_10 SET (fillfactor = 101);
ALTER INDEX ckh_ff_10 SET (fillfactor = 30);
SELECT reloptions FROM pg_class WHERE relname = 'ckh_ff_10';
ALTER INDEX ckh_ff_10 RESET (fillfactor);
-- growth: an insert that finds its page full doubles the table once the
-- sampled load reaches the fillfactor; at 100 the table hardly ever does
-- and keys overflow instead; a change applies to the next insert
CREATE TABLE ckh_grow (id int);
CREATE INDEX ckh_grow_75 ON ckh_grow USING cuckoo (id);
CREATE INDEX ckh_grow_100 ON ckh_grow USING cuckoo (id) WITH (fillfactor = 100);
INSERT INTO ckh_grow SELECT generate_series(1, 20000);
SELECT a.doublings > b.doublings AS ff75_grew_more, b.overflow_entries > a.overflow_entries AS ff100_overflows
FROM cuckoo_index_stats('ckh_grow_75') a, cuckoo_index_stats('ckh_grow_100') b;
SELECT doublings AS before_doublings FROM cuckoo_index_stats('ckh_grow_100') \gset
ALTER INDEX ckh_grow_100 SET (fillfactor = 50);
INSERT INTO ckh_grow SELECT generate_series(20001, 40000);
SELECT doublings > :before_doublings AS grew_after_alter FROM cuckoo_index_stats('ckh_grow_100');
SELECT entries = 40000 AS all_there FROM cuckoo_index_verify('ckh_grow_100');
REINDEX INDEX ckh_grow_100;
SELECT entries = 40000 AS all_there FROM cuckoo_index_verify('ckh_grow_100');

-- scans in both directions: a scroll cursor over the index needs no
-- Materialize node
-- temporary, so that the entries a scan kills and VACUUM removes do not
-- depend on other sessions' snapshots (the fbf worker's, autovacuum's)
CREATE TEMP TABLE ckh_scroll (id int, k int);
INSERT INTO ckh_scroll SELECT g, g % 4 FROM generate_series(1, 4000) g;
CREATE INDEX ckh_scroll_k ON ckh_scroll USING cuckoo (k);
ANALYZE ckh_scroll;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) DECLARE c SCROLL CURSOR FOR SELECT id FROM ckh_scroll WHERE k = 1;

-- forward, then backward, then a mixed walk, through a scroll cursor:
-- returns "forward rows/rows equal to a seq scan/backward is the reverse/
-- the mixed walk saw what it should"
CREATE FUNCTION ckh_walk(key int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	c refcursor;
	x int;
	fwd int[] := '{}';
	bwd int[] := '{}';
	expect int[];
	mixed_ok boolean := true;
	pos int := 0;
BEGIN
	SELECT array_agg(id ORDER BY id) INTO expect FROM ckh_scroll WHERE k = key;
	OPEN c SCROLL FOR SELECT id FROM ckh_scroll WHERE k = key;
	LOOP
		FETCH NEXT FROM c INTO x;
		EXIT WHEN NOT FOUND;
		fwd := fwd || x;
	END LOOP;
	-- past the end: PRIOR returns the last row first
	LOOP
		FETCH PRIOR FROM c INTO x;
		EXIT WHEN NOT FOUND;
		bwd := x || bwd;
	END LOOP;
	-- before the start: three forward, one back, two forward, ...
	FOR i IN 1 .. coalesce(array_length(fwd, 1), 0) LOOP
		FETCH NEXT FROM c INTO x;
		pos := pos + 1;
		mixed_ok := mixed_ok AND FOUND AND x = fwd[pos];
		IF i % 3 = 0 AND pos > 1 THEN
			FETCH PRIOR FROM c INTO x;
			pos := pos - 1;
			mixed_ok := mixed_ok AND FOUND AND x = fwd[pos];
		END IF;
	END LOOP;
	MOVE BACKWARD ALL FROM c;
	FETCH NEXT FROM c INTO x;
	mixed_ok := mixed_ok AND (x IS NOT DISTINCT FROM fwd[1]);
	MOVE LAST FROM c;
	FETCH PRIOR FROM c INTO x;
	mixed_ok := mixed_ok AND (coalesce(array_length(fwd, 1), 0) < 2 OR x = fwd[array_length(fwd, 1) - 1]);
	CLOSE c;
	RETURN format('%s/%s/%s/%s', coalesce(array_length(fwd, 1), 0),
				  (SELECT array_agg(v ORDER BY v) FROM unnest(fwd) v) IS NOT DISTINCT FROM expect,
				  fwd = bwd, mixed_ok);
END
$$;
SELECT ckh_walk(1) AS key1, ckh_walk(9) AS no_rows;

-- rows deleted and found dead by scans: killed entries are skipped in
-- either direction, and the scroll still returns exactly the live rows
DELETE FROM ckh_scroll WHERE k = 2 AND id <= 2000;
SELECT ckh_walk(2) AS deleted_half;
SELECT dead_entries > 0 AS killed FROM cuckoo_index_stats('ckh_scroll_k');
SELECT ckh_walk(2) AS after_kills;
-- MOVE BACKWARD as hash_index.sql does it, in a transaction that goes on
BEGIN;
DECLARE c CURSOR FOR SELECT * FROM ckh_scroll WHERE k = 3;
MOVE FORWARD ALL FROM c;
MOVE BACKWARD 10000 FROM c;
MOVE BACKWARD ALL FROM c;
CLOSE c;
COMMIT;
VACUUM ckh_scroll;
SELECT ckh_walk(2) AS after_vacuum;
SELECT entries, dead_entries FROM cuckoo_index_verify('ckh_scroll_k');
RESET enable_seqscan;
RESET enable_bitmapscan;

DROP TABLE ckh_types, ckh_ff, ckh_grow, ckh_scroll;
DROP TYPE ckh_mood, ckh_pair;
DROP FUNCTION ckh_agree(text), ckh_walk(int);
