-- test/demo.sql: what test/demo.sh shows.
\pset footer off
CREATE EXTENSION fbf;

\echo
\echo '== A Forgetful Bloom Filter as a SQL value'
\echo 'Size one for a workload: remember each operation for 30 s, at 100 ops/s,'
\echo 'with at most 1% false positives.'
CREATE TEMP TABLE demo AS SELECT fbf_create('30 s', 0.01, 100) AS f;
SELECT nbits, nhashes, npast, period, bytes FROM demo, fbf_info(f);

\echo
\echo '== A window of operations'
\echo 'Ops 1..300 arrive during one period (t = 3 s); the filter remembers them.'
UPDATE demo SET f = fbf_add(f, ARRAY(SELECT generate_series(1, 300)::bigint));
SELECT fbf_contains(f, 42) AS "op 42 seen?", fbf_contains(f, 4242) AS "op 4242 seen?",
       round(fbf_estimated_fpp(f)::numeric, 6) AS estimated_fpp
FROM demo;

\echo
\echo '== A retried operation is caught as a duplicate'
\echo 'Client sends op 42 again after a timeout: contains says yes, so it is dismissed.'
SELECT CASE WHEN fbf_contains(f, 42) THEN 'duplicate: dismissed' ELSE 'new: applied' END AS "retry of op 42",
       CASE WHEN fbf_contains(f, 301) THEN 'duplicate: dismissed' ELSE 'new: applied' END AS "op 301"
FROM demo;

\echo
\echo '== Old operations are forgotten'
\echo 'Every period t the window slides (refresh).  After r refreshes at least'
\echo '(r - 1) * t has passed since the op arrived.  It is forgotten only once'
\echo 'the 30 s retention is over:'
SELECT r AS refreshes, (greatest(r - 1, 0) * period) AS "elapsed, at least",
       fbf_contains(fbf_refresh(f, r), 42) AS "op 42 remembered?"
FROM demo, fbf_info(f), generate_series(0, npast + 2) AS r
WHERE r IN (0, npast, npast + 1, npast + 2);

\echo
\echo '== False positives stay near the estimate'
\echo '100,000 ops that were never sent, checked against the window:'
\echo 'First the window after one period, then a full window in steady state'
\echo '(each period 300 new ops, one refresh between periods).'
SELECT 'after one period' AS "window", false_positives,
       round(false_positives / 100000.0, 5) AS measured_fpp,
       round(fbf_estimated_fpp(f)::numeric, 5) AS estimated_fpp
FROM demo, LATERAL (SELECT count(*) FILTER (WHERE fbf_contains(f, g)) AS false_positives
                    FROM generate_series(1000000, 1099999) AS g) AS c;
DO $$
BEGIN
	FOR p IN 1..14 LOOP
		UPDATE demo SET f = fbf_add(fbf_refresh(f),
			ARRAY(SELECT generate_series(p * 300 + 1, (p + 1) * 300)::bigint));
	END LOOP;
END $$;
SELECT 'steady state' AS "window", false_positives,
       round(false_positives / 100000.0, 5) AS measured_fpp,
       round(fbf_estimated_fpp(f)::numeric, 5) AS estimated_fpp
FROM demo, LATERAL (SELECT count(*) FILTER (WHERE fbf_contains(f, g)) AS false_positives
                    FROM generate_series(1000000, 1099999) AS g) AS c;

\echo
\echo '== Counting with retries: a plain counter against an idempotent one'
\echo 'A client sends 10,000 likes.  For 6% of its requests the response is lost'
\echo '(a timeout), although the server applied the increment, so the client'
\echo 'sends the same request again.  Each attempt is its own transaction.'
\echo 'The counter remembers operations for a minute, sized for 5,000 per second.'
SELECT fbf_create_counter_table('likes', retention => '1 min', target_fpp => 0.001,
                                expected_rate => 5000) AS counter_table;
CREATE TABLE plain_likes (value bigint NOT NULL);
INSERT INTO plain_likes VALUES (0);
DO $$
DECLARE
	attempts int := 0;
BEGIN
	PERFORM setseed(0.42);
	FOR seq IN 1..10000 LOOP
		LOOP
			attempts := attempts + 1;
			UPDATE plain_likes SET value = value + 1;			-- the plain way
			PERFORM idempotent_increment('likes', 1, seq, 1);	-- the fbf way
			COMMIT;
			EXIT WHEN random() >= 0.06;	-- response arrived; else retry
		END LOOP;
	END LOOP;
	RAISE NOTICE 'the client made % attempts for 10000 likes', attempts;
END $$;
SELECT 10000 AS likes_sent,
       (SELECT value FROM plain_likes) AS plain_counter,
       fbf_counter_value('likes') AS idempotent_counter;
SELECT applied, dismissed, filters, period, estimated_fpp
FROM fbf_counter_stats WHERE counter = 'likes'::regclass;

\echo
\echo '== The cuckoo index: equality lookups in one page, deleted keys free'
CREATE TABLE orders (ref bigint, note text);
INSERT INTO orders SELECT g, 'order ' || g FROM generate_series(1, 200000) g;
CREATE INDEX orders_ref ON orders USING cuckoo (ref);
VACUUM ANALYZE orders;
SELECT note FROM orders WHERE ref = 1;	-- warms this session's caches
\echo 'A lookup: the metapage and one bucket page of the index, one heap page.'
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, SUMMARY OFF)
	SELECT note FROM orders WHERE ref = 4242;
\echo 'Delete half the rows.  The first lookup of each deleted key finds its'
\echo 'row dead and marks the entry; the next lookup does not visit the heap.'
DELETE FROM orders WHERE ref % 2 = 0;
SELECT count(*) AS found FROM orders WHERE ref = 4242;
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, SUMMARY OFF)
	SELECT note FROM orders WHERE ref = 4242;
SELECT pg_size_pretty(pg_relation_size('orders_ref')) AS size, entries,
       dead_entries, round(load_factor::numeric, 2) AS load_factor
FROM cuckoo_index_stats('orders_ref');
VACUUM orders;
SELECT entries, heap_tuples, dead_entries FROM cuckoo_index_verify('orders_ref');
