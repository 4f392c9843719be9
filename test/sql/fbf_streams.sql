--
-- Exact streams: the operations of a client numbered in order, on one key
-- of a counter (or claimed by (client_id, seq) in a dedup table), are
-- answered exactly within 64 of the stream's highest seq; the rest is
-- answered by the filter, as without streams (docs/user-guide.md, "Exact
-- streams").  fbf_counter_stats counts who answered: exact_answers (a
-- pending chain, a stream, a repeat within a call), filter_answers, and
-- dismissals_averted (a stream's "new" where the filter said "seen").
--
-- fbf_counter_maintain drains the committed operations into the stream
-- pages, so that what follows is answered by the streams, not by the
-- pending chains; either answer is exact.
--
-- Errors are shown as SQLSTATE: message.
CREATE FUNCTION streams_error(query text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE query;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

CREATE FUNCTION st(counter regclass)
RETURNS TABLE (applied bigint, dismissed bigint, exact bigint, filter bigint, averted bigint)
LANGUAGE sql AS $$
	SELECT applied, dismissed, exact_answers, filter_answers, dismissals_averted
	FROM fbf_counter_stats WHERE counter = $1
$$;

CREATE FUNCTION drain(counter regclass) RETURNS boolean
LANGUAGE sql AS $$ SELECT fbf_counter_maintain($1) IS NOT NULL $$;

-- the seven columns follow the filter's three, before the Citus columns
SELECT attnum, attname, atttypid::regtype FROM pg_attribute
WHERE attrelid = 'fbf_counter_stats'::regclass AND attnum > 22 ORDER BY attnum;
SELECT proargnames[23] AS col23, proargnames[29] AS col29,
	   proargnames[array_upper(proargnames, 1)] AS last
FROM pg_proc WHERE proname = 'fbf_counter_stats';

-- ---------------------------------------------------------------------
-- An in-order client
-- ---------------------------------------------------------------------
SELECT fbf_create_counter_table('s', retention => '10 min', expected_rate => 100, shards => 1);
-- only this file's statements drain its counters: a pass of the worker,
-- on a server where it runs, could drain one between two statements and
-- change which answer (a chain's, a stream's, the filter's) counts next
ALTER INDEX s_fbf SET (worker_maintenance = off);
-- a new counter has streams, proven from its start
SELECT streams, stream_capacity >= 16384 AS capacity_from_setting, stream_evictions,
	   streams_exact_from IS NULL AS exact_already
FROM fbf_counter_stats WHERE counter = 's'::regclass;

SELECT count(*) FILTER (WHERE idempotent_increment('s', 1, g, 1)) AS applied
FROM generate_series(1, 100) g;
SELECT * FROM st('s');
-- retries of all, still pending: the chain answers them
SELECT count(*) FILTER (WHERE idempotent_increment('s', 1, g, 1)) AS applied
FROM generate_series(1, 100) g;
SELECT * FROM st('s');
-- retries of all, drained: the stream answers them (its high is 100 and
-- its bitmap holds 36 .. 99; 1 .. 35 are below it: the filter's)
SELECT drain('s');
SELECT streams FROM fbf_counter_stats WHERE counter = 's'::regclass;
SELECT count(*) FILTER (WHERE idempotent_increment('s', 1, g, 1)) AS applied
FROM generate_series(36, 100) g;
SELECT * FROM st('s');
SELECT fbf_counter_value('s') AS value;

-- ---------------------------------------------------------------------
-- Out of order within 64 of the highest: exact
-- ---------------------------------------------------------------------
SELECT idempotent_increment('s', 1, 150, 1) AS seq150;
SELECT drain('s');
SELECT idempotent_increment('s', 1, 120, 1) AS seq120_new,
	   idempotent_increment('s', 1, 101, 1) AS seq101_new,
	   idempotent_increment('s', 1, 150, 1) AS seq150_again;
SELECT drain('s');
SELECT idempotent_increment('s', 1, 120, 1) AS seq120_again,
	   idempotent_increment('s', 1, 101, 1) AS seq101_again,
	   idempotent_increment('s', 1, 149, 1) AS seq149_new;
SELECT * FROM st('s');

-- ---------------------------------------------------------------------
-- Far below the highest: the filter answers, as without streams
-- ---------------------------------------------------------------------
SELECT drain('s');
CREATE TABLE before AS SELECT * FROM st('s');
SELECT idempotent_increment('s', 1, 50, 1) AS seq50_retry,
	   idempotent_increment('s', 1, -7, 1) AS seq_minus7_new;
SELECT s.filter - b.filter AS filter_answers, s.exact - b.exact AS exact_answers
FROM st('s') s, before b;
DROP TABLE before;

-- ---------------------------------------------------------------------
-- Transactions: a rolled-back operation leaves its stream unchanged
-- ---------------------------------------------------------------------
BEGIN;
SELECT idempotent_increment('s', 1, 151, 1) AS in_rolled_back;
ROLLBACK;
SELECT drain('s');
SELECT idempotent_increment('s', 1, 151, 1) AS after_rollback;
SELECT idempotent_increment('s', 1, 151, 1) AS retried;
BEGIN;
SAVEPOINT a;
SELECT idempotent_increment('s', 1, 152, 1) AS in_savepoint;
ROLLBACK TO a;
SELECT idempotent_increment('s', 1, 152, 1) AS after_rollback_to;
COMMIT;
SELECT drain('s');
SELECT idempotent_increment('s', 1, 152, 1) AS retried;
SELECT fbf_counter_value('s') AS value;

-- ---------------------------------------------------------------------
-- Batches and keys: each (key, client) is a stream
-- ---------------------------------------------------------------------
SELECT idempotent_increment('s', ARRAY[1, 1, 2, 2, 2]::bigint[], ARRAY[153, 154, 1, 2, 2]::bigint[],
							ARRAY[1, 1, 1, 1, 1]::bigint[]) AS batch;
SELECT idempotent_increment('s', 'k', ARRAY[1, 1]::bigint[], ARRAY[1, 2]::bigint[],
							ARRAY[10, 10]::bigint[]) AS other_key;
SELECT drain('s');
SELECT idempotent_increment('s', ARRAY[1, 1, 2, 2]::bigint[], ARRAY[153, 154, 1, 2]::bigint[],
							ARRAY[1, 1, 1, 1]::bigint[]) AS batch_again;
SELECT idempotent_increment('s', 'k', ARRAY[1, 1, 1]::bigint[], ARRAY[1, 2, 3]::bigint[],
							ARRAY[10, 10, 10]::bigint[]) AS other_key_again;
SELECT idempotent_increment('s', 'k', 'text client', 1, 5) AS text_client,
	   idempotent_increment('s', 'k', '00000000-0000-0000-0000-000000000001'::uuid, 1, 5) AS uuid_client;
SELECT drain('s');
SELECT streams FROM fbf_counter_stats WHERE counter = 's'::regclass;
SELECT fbf_counter_value('s') AS value, fbf_counter_value('s', 'k') AS k;
SELECT applied, dismissed, filter, averted, exact + filter = applied + dismissed AS each_answered_once
FROM st('s');

-- ---------------------------------------------------------------------
-- Dedup tables: (client_id, seq) claims have streams, plain ids do not
-- ---------------------------------------------------------------------
SELECT fbf_create_dedup('sd', retention => '10 min', expected_rate => 100);
ALTER INDEX sd_fbf SET (worker_maintenance = off);
SELECT count(*) FILTER (WHERE fbf_claim('sd', 7, g)) AS claimed FROM generate_series(1, 50) g;
SELECT drain('sd');
SELECT count(*) FILTER (WHERE fbf_claim('sd', 7, g)) AS claimed_again FROM generate_series(1, 50) g;
SELECT fbf_claim('sd', 7, 51) AS next, fbf_claim('sd', ARRAY[7, 7]::bigint[], ARRAY[52, 51]::bigint[]) AS batch;
SELECT fbf_claim('sd', 'message-1'::text) AS plain, fbf_claim('sd', 'message-1'::text) AS plain_again;

-- ---------------------------------------------------------------------
-- max_streams: the option of the window index (NULL: fbf.max_streams)
-- ---------------------------------------------------------------------
SELECT streams_error($q$SELECT fbf_create_counter_table('bad', max_streams => -1)$q$) AS negative;
SELECT streams_error($q$SELECT fbf_create_counter_table('bad', max_streams => 10000001)$q$) AS too_many;
SELECT to_regclass('bad') AS none_made;
SELECT fbf_create_counter_table('s0', retention => '10 min', expected_rate => 100, shards => 1,
								max_streams => 0);
ALTER INDEX s0_fbf SET (worker_maintenance = off);
SELECT fbf_create_dedup('sd0', max_streams => 0);
ALTER INDEX sd0_fbf SET (worker_maintenance = off);
SELECT c.relname, c.reloptions @> ARRAY['max_streams=0'] AS has_option
FROM pg_class c WHERE c.relname IN ('s0_fbf', 'sd0_fbf') ORDER BY 1;
SELECT 'max_streams' = ANY (SELECT split_part(o, '=', 1) FROM unnest(reloptions) o) AS s_has_option
FROM pg_class WHERE relname = 's_fbf';
-- without streams a counter behaves as before: its pending chains answer
-- exactly, its filter the rest
SELECT streams, stream_capacity, stream_evictions, streams_exact_from
FROM fbf_counter_stats WHERE counter = 's0'::regclass;
SELECT count(*) FILTER (WHERE idempotent_increment('s0', 1, g, 1)) AS applied
FROM generate_series(1, 100) g;
SELECT count(*) FILTER (WHERE idempotent_increment('s0', 1, g, 1)) AS applied_pending
FROM generate_series(1, 100) g;
SELECT drain('s0');
SELECT count(*) FILTER (WHERE idempotent_increment('s0', 1, g, 1)) AS applied_drained
FROM generate_series(1, 100) g;
SELECT * FROM st('s0');
SELECT fbf_counter_value('s0') AS value;
SELECT count(*) FILTER (WHERE fbf_claim('sd0', 7, g)) AS claimed FROM generate_series(1, 50) g;
SELECT count(*) FILTER (WHERE fbf_claim('sd0', 7, g)) AS claimed_again FROM generate_series(1, 50) g;

-- ---------------------------------------------------------------------
-- A saturated filter: in-order operations are still all applied, and the
-- stream's "new" over the filter's "seen" is counted
-- ---------------------------------------------------------------------
SET fbf.max_filter_size = '64kB';
SELECT fbf_create_counter_table('sat', retention => '10 min', nbits => 1024, nhashes => 3, npast => 1,
								shards => 1);
ALTER INDEX sat_fbf SET (worker_maintenance = off);
-- taking everything, as only at_capacity = dismiss does
ALTER INDEX sat_fbf SET (at_capacity = 'dismiss');
SELECT count(*) FILTER (WHERE idempotent_increment('sat', 1, g, 1)) AS applied
FROM generate_series(1, 3000) g;
SELECT count(drain('sat')) AS passes FROM generate_series(1, 3);
SELECT count(*) FILTER (WHERE idempotent_increment('sat', 1, g, 1)) AS applied
FROM generate_series(3001, 4000) g;
SELECT fbf_counter_value('sat') AS value;
SELECT dismissals_averted > 0 AS averted FROM fbf_counter_stats WHERE counter = 'sat'::regclass;
RESET fbf.max_filter_size;

DROP TABLE s, s0, sd, sd0, sat;
DROP FUNCTION streams_error(text), st(regclass), drain(regclass);
