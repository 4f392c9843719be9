--
-- Idempotent counters: the API, exactly-once semantics in one session,
-- abort and savepoint rollback, the filter's window, and every error.
-- (Concurrency is in test/isolation; crash and replication in test/t.)
--
\set SHOW_CONTEXT never

SELECT fbf_create_counter_table('likes', retention => '1 min', target_fpp => 0.01,
                                expected_rate => 100);
\d likes
-- left alone by the worker and autovacuum (whose VACUUM drains too): what
-- waits on its pending chains is what this test's statements leave
ALTER INDEX likes_fbf SET (worker_maintenance = off);
ALTER TABLE likes SET (autovacuum_enabled = off);
SELECT counter, filters, live_filters, period, retention, nbits, nhashes, partitions,
       estimated_fpp, target_fpp, applied, dismissed, resizes, capped
FROM fbf_counter_stats;
-- a filter planned for a low rate still has every bit of its pages: a few
-- bits a page would dismiss far more than the estimate says
SELECT fbf_create_counter_table('slow', expected_rate => 1);
SELECT partitions, nbits / partitions AS bits_per_partition
FROM fbf_counter_stats WHERE counter = 'slow'::regclass;
DROP TABLE slow;

-- the brief's call: applied once per (client_id, seq)
SELECT idempotent_increment('likes', 42, 1, 1) AS first,
       idempotent_increment('likes', 42, 1, 1) AS retry,
       idempotent_increment('likes', 42, 2, 1) AS next_seq,
       idempotent_increment('likes', 43, 1, 1) AS other_client;
SELECT fbf_counter_value('likes') AS value, sum(value) AS plain_select FROM likes;

-- client ids as text and uuid; the type is part of the identity
SELECT idempotent_increment('likes', 'client-a', 1, 10) AS text_first,
       idempotent_increment('likes', 'client-a', 1, 10) AS text_retry,
       idempotent_increment('likes', '42', 1, 10) AS text_42_is_not_bigint_42,
       idempotent_increment('likes', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, 1, 100) AS uuid_first,
       idempotent_increment('likes', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, 1, 100) AS uuid_retry;
SELECT fbf_counter_value('likes');

-- keyed counters in the same table; the key is part of the identity: the
-- same (client_id, seq) on another key is another operation (tenants
-- sharing a table cannot cancel each other's operations)
SELECT idempotent_increment('likes', 'post-1', 7, 1, 5) AS post_1,
       idempotent_increment('likes', 'post-2', 7, 1, 5) AS same_op_other_key,
       idempotent_increment('likes', 'post-2', 7, 2, 5) AS post_2,
       idempotent_increment('likes', 'post-2', 7, 1, 5) AS retry_on_post_2;
SELECT fbf_contains(fbf_snapshot('likes'), fbf_operation('post-2', 7, 1)) AS keyed_op_known,
       fbf_contains(fbf_snapshot('likes'), fbf_operation('post-3', 7, 1)) AS other_key_unknown,
       fbf_operation('', 7, 1) = fbf_operation(7, 1) AS empty_key_is_default_key;
SELECT key, sum(value) FROM likes GROUP BY key ORDER BY key;
SELECT fbf_counter_value('likes', 'post-1') AS post_1, fbf_counter_value('likes', 'post-9') AS none;

-- negative deltas are fine
SELECT idempotent_increment('likes', 'post-1', 7, 3, -2), fbf_counter_value('likes', 'post-1');

-- the same operation twice in one transaction: the second is dismissed
BEGIN;
SELECT idempotent_increment('likes', 50, 1, 1) AS first, idempotent_increment('likes', 50, 1, 1) AS again;
COMMIT;

-- abort: a rolled-back operation is not remembered, its retry applies
BEGIN;
SELECT idempotent_increment('likes', 60, 1, 1000);
ROLLBACK;
SELECT idempotent_increment('likes', 60, 1, 1) AS retry_after_abort,
       idempotent_increment('likes', 60, 1, 1) AS retry_again;

-- savepoints: rolled back to, forgotten; released, remembered
BEGIN;
SAVEPOINT s1;
SELECT idempotent_increment('likes', 70, 1, 1000);
ROLLBACK TO SAVEPOINT s1;
SELECT idempotent_increment('likes', 70, 1, 1) AS after_rollback_to;
SAVEPOINT s2;
SELECT idempotent_increment('likes', 70, 2, 1);
RELEASE SAVEPOINT s2;
SELECT idempotent_increment('likes', 70, 2, 1) AS after_release;
COMMIT;
SELECT idempotent_increment('likes', 70, 1, 1) AS committed_1,
       idempotent_increment('likes', 70, 2, 1) AS committed_2;

-- an error inside a plpgsql exception block rolls the operation back too
DO $$
BEGIN
	PERFORM idempotent_increment('likes', 80, 1, 1);
	RAISE EXCEPTION 'client gave up';
EXCEPTION WHEN raise_exception THEN
	NULL;
END $$;
SELECT idempotent_increment('likes', 80, 1, 1) AS retry_after_exception;

-- nothing counted twice, nothing lost: 3 + 10 + 10 + 100 + 1 + 1 + 1 + 1 + 1
SELECT fbf_counter_value('likes') AS total;

-- the filter remembers committed operations, also after they are drained
-- from the pending pages into the Bloom filters
SELECT fbf_contains(fbf_snapshot('likes'), fbf_operation(42, 1)) AS op_42_1,
       fbf_contains(fbf_snapshot('likes'), fbf_operation(60, 1)) AS op_60_1,
       fbf_contains(fbf_snapshot('likes'), fbf_operation(999, 1)) AS op_999_1;
SELECT fbf_counter_maintain('likes');
SELECT (fbf_info(fbf_snapshot('likes'))).counts[1:2] AS drained_into_future_and_present;
SELECT idempotent_increment('likes', 42, 1, 1) AS retry_after_drain,
       fbf_contains(fbf_snapshot('likes'), fbf_operation(42, 1)) AS still_there;
SELECT applied, dismissed FROM fbf_counter_stats WHERE counter = 'likes'::regclass;

-- the window forgets: retention 1 s, 3 filters of explicit shape
SELECT fbf_create_counter_table('short', retention => '1 s', nbits => 4096, nhashes => 4, npast => 1);
SELECT period, retention FROM fbf_counter_stats WHERE counter = 'short'::regclass;
SELECT idempotent_increment('short', 1, 1, 1) AS applied,
       idempotent_increment('short', 1, 1, 1) AS dismissed_within_retention;
-- refreshes happen on access (or by the worker); after enough of them the
-- operation is past its retention and a retry applies again
DO $$
BEGIN
	FOR i IN 1..8 LOOP
		PERFORM pg_sleep(0.4);
		PERFORM fbf_counter_maintain('short');
	END LOOP;
END $$;
SELECT idempotent_increment('short', 1, 1, 1) AS applied_after_retention;

-- a filter sized for 1 op/s that receives 3000 grows its bits (its
-- partitions split) at once: an increment that finds the future filter
-- filling faster than its bits are for splits it, before the filters
-- saturate; the maintenance pass then has nothing to add
SELECT fbf_create_counter_table('ramp', retention => '1 min', target_fpp => 0.01,
                                expected_rate => 1);
SELECT filters, partitions, period FROM fbf_counter_stats WHERE counter = 'ramp'::regclass;
SELECT count(*) FILTER (WHERE idempotent_increment('ramp', 1, g, 1)) AS applied
FROM generate_series(1, 3000) g;
SELECT fbf_counter_maintain('ramp') AS step;
SELECT estimated_fpp < 0.01 AS under_target, filters, live_filters, partitions > 1 AS split
FROM fbf_counter_stats WHERE counter = 'ramp'::regclass;
-- growing never forgets: every operation is still dismissed
SELECT count(*) FILTER (WHERE NOT idempotent_increment('ramp', 1, g, 1)) AS dismissed
FROM generate_series(1, 3000) g;
SELECT fbf_counter_value('ramp');

-- DDL keeps the filter: rebuilds carry it over
SELECT idempotent_increment('likes', 90, 1, 1);
VACUUM FULL likes;
SELECT idempotent_increment('likes', 90, 1, 1) AS after_vacuum_full;
CLUSTER likes USING likes_pkey;
SELECT idempotent_increment('likes', 90, 1, 1) AS after_cluster;
REINDEX TABLE likes;
SELECT idempotent_increment('likes', 90, 1, 1) AS after_reindex;
ALTER TABLE likes ALTER COLUMN value TYPE bigint USING value + 0;
SELECT idempotent_increment('likes', 90, 1, 1) AS after_rewrite;
-- TRUNCATE empties the values but keeps the filter
TRUNCATE likes;
SELECT idempotent_increment('likes', 90, 1, 1) AS after_truncate,
       idempotent_increment('likes', 90, 2, 1) AS new_op,
       fbf_counter_value('likes');
-- rebuilds run from a DO block (or a procedure) are carried over too
SELECT idempotent_increment('likes', 91, 1, 1);
DO $$ BEGIN EXECUTE 'TRUNCATE likes'; END $$;
SELECT idempotent_increment('likes', 91, 1, 1) AS after_truncate_in_do;
-- a second rebuild in one transaction would find the first one's pages
-- gone: refused rather than forgetting
BEGIN;
TRUNCATE likes;
TRUNCATE likes;
ROLLBACK;
SELECT idempotent_increment('likes', 91, 1, 1) AS after_rollback;
-- VACUUM drains the pending pages into the filter
SELECT idempotent_increment('likes', 92, 1, 1);
SELECT pending > 0 AS pending_before FROM fbf_counter_stats WHERE counter = 'likes'::regclass;
VACUUM likes;
SELECT pending AS pending_after_vacuum FROM fbf_counter_stats WHERE counter = 'likes'::regclass;
SELECT idempotent_increment('likes', 92, 1, 1) AS still_dismissed;
-- unlogged and back: the filter follows the table's persistence and is
-- carried over both ways
ALTER TABLE likes SET UNLOGGED;
SELECT relpersistence, idempotent_increment('likes', 91, 1, 1) AS after_unlogged
FROM pg_class WHERE relname = 'likes_fbf';
ALTER TABLE likes SET LOGGED;
SELECT relpersistence, idempotent_increment('likes', 91, 1, 1) AS after_logged
FROM pg_class WHERE relname = 'likes_fbf';
-- REINDEX CONCURRENTLY cannot carry it over, so it is refused
REINDEX TABLE CONCURRENTLY likes;
-- a table truncated in the transaction that created it starts empty
BEGIN;
SELECT fbf_create_counter_table('fresh');
SELECT idempotent_increment('fresh', 1, 1, 1);
TRUNCATE fresh;
ROLLBACK;

-- settings changed with ALTER INDEX reach the filter at the next pass
ALTER INDEX likes_fbf SET (target_fpp = 0.05);
SELECT fbf_counter_maintain('likes');
SELECT target_fpp FROM fbf_counter_stats WHERE counter = 'likes'::regclass;

-- DROP TABLE releases the filter
SELECT count(*) FROM fbf_counter_stats;
DROP TABLE short;
SELECT count(*) FROM fbf_counter_stats;
SELECT count(*) FROM pg_class WHERE relname = 'short_fbf';

-- resizing by hand: grow, shrink back, and refuse a ring too short or
-- more filters than a partition page has lanes
SELECT fbf_create_counter_table('rs', retention => '1 min', nbits => 8192,
                                nhashes => 5, npast => 4);
SELECT idempotent_increment('rs', 42, 1, 1);
SELECT fbf_counter_resize('rs', 10) AS grown;
SELECT count(*) FILTER (WHERE NOT idempotent_increment('rs', 42, g, 1)) AS still_dismissed
FROM generate_series(1, 1) g;
SELECT fbf_counter_resize('rs', 6) AS back;
SELECT fbf_counter_resize('rs', 3);
SELECT fbf_counter_resize('rs', 17);
DROP TABLE rs;
