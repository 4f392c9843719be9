--
-- The fbf type: construction, membership, the sliding window, resizing,
-- union, the build aggregate, estimates and I/O round trips.
--

-- shape of a fresh filter
SELECT nbits, nhashes, npast, nparts, nlive, epoch, period, counts, bytes, estimated_fpp
FROM fbf_info(fbf_create(6250, 5));

SELECT (fbf_info(fbf_create(1024, 3, 4))).npast;

-- a blocked filter: 4 partitions of 1024 bits; every element still found
SELECT nparts, counts, bytes,
       (SELECT count(*) FROM generate_series(1, 500) g WHERE fbf_contains(f, g)) AS found
FROM (SELECT fbf_add(fbf_create(1024, 4, 1, 4), ARRAY(SELECT generate_series(1, 500)::bigint)) AS f) s,
     fbf_info(f);

-- add and contains, for each element type
WITH f AS (SELECT fbf_add(fbf_add(fbf_add(fbf_create(4096, 4), 'apple'), 42), '\xdeadbeef'::bytea) AS f)
SELECT fbf_contains(f, 'apple') AS apple,
       fbf_contains(f, 42) AS "42",
       fbf_contains(f, '\xdeadbeef'::bytea) AS deadbeef,
       fbf_contains(f, 'pear') AS pear,
       fbf_contains(f, 43) AS "43",
       -- text and bytea hash by their bytes; bigint by its 8 bytes
       fbf_contains(f, 'apple'::bytea) AS apple_bytes,
       fbf_contains(f, '42') AS "'42'"
FROM f;

-- adding many at once; NULLs are skipped; same result as one by one
SELECT fbf_add(fbf_create(4096, 4), ARRAY[1, NULL, 2, 3]::bigint[])::text =
       fbf_add(fbf_add(fbf_add(fbf_create(4096, 4), 1), 2), 3)::text AS same_as_one_by_one,
       fbf_contains(fbf_add(fbf_create(4096, 4), ARRAY['a', 'b']), 'b') AS text_array,
       fbf_contains(fbf_add(fbf_create(4096, 4), ARRAY['\x01'::bytea]), '\x01'::bytea) AS bytea_array,
       fbf_add(fbf_create(4096, 4), '{}'::bigint[])::text = fbf_create(4096, 4)::text AS empty_array;

-- adding an element twice counts it once
SELECT (fbf_info(fbf_add(fbf_add(fbf_create(4096, 4), 'x'), 'x'))).counts;

-- every check variant answers for its inserted elements
SELECT c, fbf_contains(fbf_add(fbf_create(4096, 4), 'x'), 'x', c)
FROM unnest(ARRAY['simple', 'optimized', 'paired']) AS c;

-- the window: an element survives npast + 1 refreshes, and is forgotten
-- after npast + 2 (its two filters are gone)
SELECT r AS refreshes,
       fbf_contains(fbf_refresh(fbf_add(fbf_create(4096, 4, 2), 'op-1'), r), 'op-1') AS remembered
FROM generate_series(0, 5) AS r;

-- refresh shifts the counts toward the past; epoch counts refreshes
SELECT epoch, counts
FROM fbf_info(fbf_refresh(fbf_add(fbf_add(fbf_create(4096, 4, 2), 'a'), 'b')));
SELECT epoch, counts FROM fbf_info(fbf_refresh(fbf_create(64, 1), 1000000));

-- a window of operations: 1000 ops arrive over 4 periods, one refresh
-- between periods
CREATE TABLE ops AS
SELECT g::bigint AS op, g / 250 AS period FROM generate_series(0, 999) AS g;

CREATE TABLE window_state (f fbf);
DO $$
DECLARE
	f fbf := fbf_create(8192, 5, 2);
BEGIN
	FOR p IN 0..3 LOOP
		IF p > 0 THEN
			f := fbf_refresh(f);
		END IF;
		f := fbf_add(f, ARRAY(SELECT op FROM ops WHERE period = p ORDER BY op));
	END LOOP;
	INSERT INTO window_state VALUES (f);
END $$;
SELECT epoch, counts FROM window_state, fbf_info(f);

-- no false negatives: every op is remembered (period 0 is still inside the
-- window: with 2 past filters an op survives 3 refreshes)
SELECT count(*) FILTER (WHERE fbf_contains(f, op)) AS remembered, count(*) AS total
FROM ops, window_state;

-- false positives among 20000 never-inserted ops stay near the estimate
SELECT (SELECT count(*) FROM generate_series(100000, 119999) AS g
        WHERE fbf_contains(f, g)) < 20000 * 0.01 AS few_false_positives,
       fbf_estimated_fpp(f) < 0.01 AS low_estimate
FROM window_state;

-- the paper's simple check has more false positives than the optimized one
-- (and "paired", future AND present, answers exactly as "optimized": the
-- future filter's bits are a subset of the present filter's)
SELECT simple > optimized AS simple_is_worse,
       paired = optimized AS paired_equals_optimized,
       fbf_estimated_fpp(f, 'simple') > fbf_estimated_fpp(f, 'optimized') AS simple_estimate_higher
FROM window_state,
     LATERAL (SELECT count(*) FILTER (WHERE fbf_contains(f, g, 'simple')) AS simple,
                     count(*) FILTER (WHERE fbf_contains(f, g, 'optimized')) AS optimized,
                     count(*) FILTER (WHERE fbf_contains(f, g, 'paired')) AS paired
              FROM generate_series(100000, 199999) AS g) AS c;

-- resizing: growing keeps every element and adds unborn filters at the old
-- end; the extra filters lengthen the window
WITH f AS (SELECT fbf_add(fbf_create(4096, 4, 1), 'kept') AS f)
SELECT npast, nlive, counts,
       fbf_contains(g, 'kept') AS kept,
       fbf_contains(fbf_refresh(g, 3), 'kept') AS kept_after_3,
       fbf_contains(fbf_refresh(g, 4), 'kept') AS kept_after_4,
       fbf_contains(fbf_refresh(fbf_resize(g, 1), 3), 'kept') AS lost_when_shrunk
FROM f, fbf_resize(f, 3) AS g, fbf_info(g);

-- shrinking drops the oldest filters at once
WITH f AS (SELECT fbf_refresh(fbf_refresh(fbf_add(fbf_create(4096, 4, 3), 'old'), 3)) AS f)
SELECT fbf_contains(f, 'old') AS before, fbf_contains(fbf_resize(f, 1), 'old') AS after
FROM f;

-- union of same-shaped filters holds both, aligned on the newer window
WITH a AS (SELECT fbf_add(fbf_create(4096, 4), 'left') AS f),
     b AS (SELECT fbf_refresh(fbf_add(fbf_create(4096, 4), 'right')) AS f)
SELECT fbf_contains(u, 'left') AS has_left, fbf_contains(u, 'right') AS has_right,
       (fbf_info(u)).epoch
FROM a, b, fbf_union(a.f, b.f) AS u;

-- union is commutative and idempotent
WITH a AS (SELECT fbf_agg(g, 2048, 3, 1) AS f FROM generate_series(1, 100) g),
     b AS (SELECT fbf_agg(g, 2048, 3, 1) AS f FROM generate_series(50, 150) g)
SELECT fbf_union(a.f, b.f)::text = fbf_union(b.f, a.f)::text AS commutative,
       fbf_union(a.f, a.f)::text = a.f::text AS idempotent
FROM a, b;

-- the aggregate: NULLs skipped, empty input gives NULL, text elements too
SELECT (fbf_info(fbf_agg(x, 1024, 3, 1))).counts
FROM (VALUES ('a'), (NULL), ('b'), ('a')) AS v(x);
SELECT fbf_agg(x, 1024, 3, 1) IS NULL AS empty_is_null
FROM (SELECT 'a'::text WHERE false) AS v(x);
SELECT fbf_contains(fbf_agg(x::bytea, 1024, 3, 1), 'b')
FROM (VALUES ('a'), ('b')) AS v(x);

-- the aggregate with parallel workers (combine via fbf_union)
CREATE TABLE many AS SELECT g FROM generate_series(1, 200000) g;
ANALYZE many;
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
EXPLAIN (COSTS OFF) SELECT fbf_agg(g, 1 << 20, 4, 1) FROM many;
WITH f AS (SELECT fbf_agg(g, 1 << 20, 4, 1) AS f FROM many)
SELECT (SELECT count(*) FROM many WHERE fbf_contains(f, g)) AS found,
       -- merged counts are estimated from the set bits
       (fbf_info(f)).counts[2] BETWEEN 190000 AND 205000 AS count_close
FROM f;
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;

-- sizing from a workload: retention 30 s, 1% target, 100 ops/s
SELECT nbits, nhashes, npast, period, period * (npast + 1) >= '30 s' AS covers_retention,
       round(nbits * (npast + 2) / (30 * 100.0), 1) AS bits_per_window_element
FROM fbf_info(fbf_create('30 s', 0.01, 100));

-- a planned filter run at its planned rate for three windows stays under
-- its target
CREATE TABLE planned_run (f fbf);
DO $$
DECLARE
	f fbf := fbf_create('10 s', 0.01, 50);
	per_period int := ceil(50 * extract(epoch FROM (fbf_info(f)).period));
	periods int := 3 * ((fbf_info(f)).npast + 2);
BEGIN
	FOR p IN 0..periods - 1 LOOP
		f := fbf_add(f, ARRAY(SELECT generate_series(p * per_period, (p + 1) * per_period - 1)::bigint));
		IF p < periods - 1 THEN
			f := fbf_refresh(f);
		END IF;
	END LOOP;
	INSERT INTO planned_run VALUES (f);
END $$;
SELECT (SELECT count(*) FROM generate_series(1, 100000) AS g
        WHERE fbf_contains(f, -g)) < 100000 * 0.013 AS under_target,
       fbf_estimated_fpp(f) < 0.01 AS estimate_under_target
FROM planned_run;

-- text round trip, and the text form starts with the magic "FBF\0" v1
SELECT f::text::fbf::text = f::text AS text_round_trip,
       substr(f::text, 1, 12) AS magic_and_version
FROM window_state;

-- binary round trip through COPY
CREATE TABLE copy_src (id int, f fbf);
INSERT INTO copy_src SELECT 1, f FROM window_state;
INSERT INTO copy_src VALUES (2, fbf_create(64, 1)), (3, fbf_resize(fbf_add(fbf_create(100, 2), 'x'), 5));
\set copyfile '/tmp/fbf_regress_copy.bin'
COPY copy_src TO :'copyfile' WITH (FORMAT binary);
CREATE TABLE copy_dst (LIKE copy_src);
COPY copy_dst FROM :'copyfile' WITH (FORMAT binary);
SELECT s.id, s.f::text = d.f::text AS same
FROM copy_src s JOIN copy_dst d USING (id) ORDER BY id;
SELECT count(*) FILTER (WHERE fbf_contains(d.f, op)) AS remembered_after_copy
FROM copy_dst d, ops WHERE d.id = 1;

-- fbf_send output is the documented layout
SELECT substr(fbf_send(fbf_create(64, 1))::text, 1, 34) AS header_start,
       length(fbf_send(fbf_create(64, 1))) AS bytes;

-- values survive TOAST (large filters are stored out of line)
CREATE TABLE big (f fbf);
INSERT INTO big SELECT fbf_agg(g, 1 << 18, 4, 2) FROM generate_series(1, 1000) g;
SELECT fbf_contains(f, 500) AS found, fbf_contains(f, 5000) AS not_found
FROM big;
SELECT pg_relation_size(reltoastrelid) > 0 AS toasted
FROM pg_class WHERE relname = 'big';
