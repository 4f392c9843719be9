--
-- Retries that do not match: the option track_mismatch of a counter's
-- window index counts, as `mismatched` in fbf_counter_stats, the dismissed
-- operations whose delta differs from the one the window holds for them
-- (src/counter/README.md, "Retries that do not match").
--
-- Errors are shown as SQLSTATE: message.
CREATE FUNCTION mismatch_error(query text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE query;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

CREATE FUNCTION mm_stats(counter regclass) RETURNS TABLE (applied bigint, dismissed bigint, mismatched bigint)
LANGUAGE sql AS $$
	SELECT applied, dismissed, mismatched FROM fbf_counter_stats WHERE counter = $1
$$;

-- the column follows 1.0's eighteen, before the filter's three and the
-- exact streams' seven
SELECT attnum, attname FROM pg_attribute
WHERE attrelid = 'fbf_counter_stats'::regclass AND attnum > 16 ORDER BY attnum;
SELECT proargnames[19] AS col19, proargnames[array_upper(proargnames, 1)] AS last
FROM pg_proc WHERE proname = 'fbf_counter_stats';

-- ---------------------------------------------------------------------
-- Off (the default): retries are dismissed, nothing is counted mismatched
-- ---------------------------------------------------------------------
SELECT fbf_create_counter_table('mm_off', retention => '1 min', expected_rate => 100, shards => 1);
SELECT idempotent_increment('mm_off', 1, 1, 5) AS applied,
	   idempotent_increment('mm_off', 1, 1, 5) AS same_delta,
	   idempotent_increment('mm_off', 1, 1, 6) AS other_delta;
SELECT * FROM mm_stats('mm_off');
SELECT reloptions FROM pg_class WHERE relname = 'mm_off_fbf';

-- ---------------------------------------------------------------------
-- On
-- ---------------------------------------------------------------------
SELECT fbf_create_counter_table('mm_likes', retention => '1 min', expected_rate => 100, shards => 1);
-- left alone by the worker and autovacuum (whose VACUUM drains too): what
-- waits on its pending chains is what this test's statements leave
ALTER INDEX mm_likes_fbf SET (worker_maintenance = off);
ALTER TABLE mm_likes SET (autovacuum_enabled = off);
ALTER INDEX mm_likes_fbf SET (track_mismatch = on);
SELECT 'track_mismatch=on' = ANY (reloptions) AS is_on FROM pg_class WHERE relname = 'mm_likes_fbf';

-- an applied operation is one operation: applied 1, no more
SELECT idempotent_increment('mm_likes', 1, 1, 5) AS applied;
SELECT * FROM mm_stats('mm_likes');
-- the same delta again: dismissed, not mismatched
SELECT idempotent_increment('mm_likes', 1, 1, 5) AS same_delta;
SELECT * FROM mm_stats('mm_likes');
-- another delta: dismissed and mismatched; the value keeps the first delta
SELECT idempotent_increment('mm_likes', 1, 1, 7) AS other_delta;
SELECT * FROM mm_stats('mm_likes');
SELECT fbf_counter_value('mm_likes', '') AS value;
-- the outcome takes the same path
SELECT * FROM idempotent_increment_outcome('mm_likes', 1, 1, 8);
SELECT * FROM idempotent_increment_outcome('mm_likes', 1, 1, 5);
SELECT * FROM mm_stats('mm_likes');
-- in the applying transaction too (its entries are its own)
BEGIN;
SELECT idempotent_increment('mm_likes', 1, 2, 1) AS applied,
	   idempotent_increment('mm_likes', 1, 2, 1) AS same_delta,
	   idempotent_increment('mm_likes', 1, 2, 2) AS other_delta;
COMMIT;
SELECT * FROM mm_stats('mm_likes');

-- a rolled-back operation is forgotten with its delta identity: a retry
-- with another delta is applied, and its own delta is the one remembered
BEGIN;
SELECT idempotent_increment('mm_likes', 2, 1, 100);
ROLLBACK;
SELECT idempotent_increment('mm_likes', 2, 1, 3) AS applied_after_rollback;
SELECT idempotent_increment('mm_likes', 2, 1, 100) AS rolled_back_delta,
	   idempotent_increment('mm_likes', 2, 1, 3) AS applied_delta;
SELECT * FROM mm_stats('mm_likes');
-- the same in a subtransaction
BEGIN;
SAVEPOINT s;
SELECT idempotent_increment('mm_likes', 3, 1, 100);
ROLLBACK TO SAVEPOINT s;
SELECT idempotent_increment('mm_likes', 3, 1, 4) AS applied_after_rollback;
COMMIT;
SELECT idempotent_increment('mm_likes', 3, 1, 100) AS rolled_back_delta;
SELECT * FROM mm_stats('mm_likes');

-- text and uuid client ids
SELECT idempotent_increment('mm_likes', 'web-1', 1, 1) AS applied,
	   idempotent_increment('mm_likes', 'web-1', 1, 1) AS same_delta,
	   idempotent_increment('mm_likes', 'web-1', 1, -1) AS other_delta;
SELECT idempotent_increment('mm_likes', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, 1, 1) AS applied,
	   idempotent_increment('mm_likes', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, 1, 2) AS other_delta;
SELECT * FROM mm_stats('mm_likes');

-- ---------------------------------------------------------------------
-- Keyed counters: the delta identity is the keyed operation's
-- ---------------------------------------------------------------------
SELECT idempotent_increment('mm_likes', 'post:1', 9, 1, 10) AS applied,
	   idempotent_increment('mm_likes', 'post:2', 9, 1, 20) AS other_key_applied,
	   idempotent_increment('mm_likes', 'post:1', 9, 1, 10) AS same_delta,
	   idempotent_increment('mm_likes', 'post:1', 9, 1, 20) AS other_keys_delta;
SELECT * FROM mm_stats('mm_likes');
SELECT key, value FROM mm_likes WHERE key LIKE 'post:%' ORDER BY key;

-- ---------------------------------------------------------------------
-- Batches: each applied operation records its delta identity, each
-- dismissed one is looked up; answers in the arrays' order
-- ---------------------------------------------------------------------
SELECT fbf_create_counter_table('mm_b', retention => '1 min', expected_rate => 100, shards => 1);
ALTER INDEX mm_b_fbf SET (track_mismatch = true);
SELECT idempotent_increment('mm_b', ARRAY[1, 1, 1]::bigint[], ARRAY[1, 2, 3]::bigint[], ARRAY[10, 20, 30]::bigint[]);
SELECT * FROM mm_stats('mm_b');
-- retries of 1 and 3 with their deltas, 2 with another, and a new one
SELECT idempotent_increment('mm_b', ARRAY[1, 1, 1, 1]::bigint[], ARRAY[3, 2, 4, 1]::bigint[],
							ARRAY[30, 21, 40, 10]::bigint[]);
SELECT * FROM mm_stats('mm_b');
-- a repeat within a batch: with the first occurrence's delta, not
-- mismatched; with another, mismatched
SELECT idempotent_increment('mm_b', ARRAY[2, 2, 2]::bigint[], ARRAY[1, 1, 1]::bigint[], ARRAY[5, 5, 6]::bigint[]);
SELECT * FROM mm_stats('mm_b');
-- keyed batch
SELECT idempotent_increment('mm_b', 'k', ARRAY['x', 'y']::text[], ARRAY[1, 1]::bigint[], ARRAY[1, 2]::bigint[]);
SELECT idempotent_increment('mm_b', 'k', ARRAY['y', 'x']::text[], ARRAY[1, 1]::bigint[], ARRAY[2, 9]::bigint[]);
SELECT * FROM mm_stats('mm_b');
SELECT key, value FROM mm_b ORDER BY key;

-- a batch long enough that its chain is indexed, for the delta identities
-- it records and for those its retry looks up: every second operation
-- retried with another delta.  (Between bounds: a pass of the worker may
-- drain the entries into the bits, whose false positives would hide a
-- mismatch or two.)
SELECT fbf_create_counter_table('mm_long', retention => '1 min', expected_rate => 1000, shards => 1);
ALTER INDEX mm_long_fbf SET (track_mismatch = true);
SELECT count(*) FILTER (WHERE a) AS applied
FROM unnest(idempotent_increment('mm_long', 'k',
		ARRAY(SELECT g FROM generate_series(1, 10000::bigint) g),
		ARRAY(SELECT g FROM generate_series(1, 10000::bigint) g),
		array_fill(1::bigint, ARRAY[10000]))) a;
SELECT count(*) FILTER (WHERE a) AS applied
FROM unnest(idempotent_increment('mm_long', 'k',
		ARRAY(SELECT g FROM generate_series(1, 10000::bigint) g),
		ARRAY(SELECT g FROM generate_series(1, 10000::bigint) g),
		ARRAY(SELECT 1 + g % 2 FROM generate_series(1, 10000::bigint) g))) a;
SELECT applied, dismissed, mismatched BETWEEN 4990 AND 5000 AS mismatched_5000
FROM mm_stats('mm_long');
SELECT value FROM mm_long;

-- ---------------------------------------------------------------------
-- The option survives a maintenance pass: the delta identities drain
-- into the bits with their operations, and are still found there
-- ---------------------------------------------------------------------
SELECT pending AS pending_before FROM fbf_counter_stats WHERE counter = 'mm_likes'::regclass;
SELECT fbf_counter_maintain('mm_likes') IS NOT NULL AS maintained;
SELECT pending AS pending_after FROM fbf_counter_stats WHERE counter = 'mm_likes'::regclass;
SELECT idempotent_increment('mm_likes', 1, 1, 5) AS same_delta_after_drain,
	   idempotent_increment('mm_likes', 1, 1, 9) AS other_delta_after_drain,
	   idempotent_increment('mm_likes', 'post:1', 9, 1, 10) AS keyed_same_delta,
	   idempotent_increment('mm_likes', 'post:1', 9, 1, 11) AS keyed_other_delta;
SELECT * FROM mm_stats('mm_likes');
-- and new operations still record theirs
SELECT idempotent_increment('mm_likes', 1, 100, 1) AS applied,
	   idempotent_increment('mm_likes', 1, 100, 2) AS other_delta;
SELECT * FROM mm_stats('mm_likes');

-- ---------------------------------------------------------------------
-- Off again: nothing more is counted (operations recorded while it was on
-- keep their delta identities until they age out)
-- ---------------------------------------------------------------------
ALTER INDEX mm_likes_fbf RESET (track_mismatch);
SELECT idempotent_increment('mm_likes', 1, 1, 12345) AS other_delta_while_off;
SELECT * FROM mm_stats('mm_likes');
-- an operation applied while off has no delta identity: once on, even a
-- retry with the same delta counts (until the operation ages out)
SELECT idempotent_increment('mm_likes', 1, 200, 1) AS applied_while_off;
ALTER INDEX mm_likes_fbf SET (track_mismatch = on);
SELECT idempotent_increment('mm_likes', 1, 200, 1) AS same_delta_applied_while_off;
SELECT * FROM mm_stats('mm_likes');

-- ---------------------------------------------------------------------
-- Dedup tables: claims have no delta, and the option is refused
-- ---------------------------------------------------------------------
SELECT fbf_create_dedup('mm_inbox', retention => '1 min', expected_rate => 100);
SELECT mismatch_error($$ALTER INDEX mm_inbox_fbf SET (track_mismatch = on)$$);
SELECT reloptions FROM pg_class WHERE relname = 'mm_inbox_fbf';
-- off is accepted (it is the default)
SELECT mismatch_error($$ALTER INDEX mm_inbox_fbf SET (track_mismatch = off)$$);
-- a counter's window with the option on cannot become a dedup window
SELECT mismatch_error($$ALTER INDEX mm_likes_fbf SET (kind = dedup)$$);
-- not a boolean
SELECT mismatch_error($$ALTER INDEX mm_likes_fbf SET (track_mismatch = maybe)$$);
-- fbf_dedup_stats has no such column
SELECT count(*) FROM pg_attribute WHERE attrelid = 'fbf_dedup_stats'::regclass AND attname = 'mismatched';

DROP TABLE mm_off, mm_likes, mm_b, mm_long, mm_inbox;
DROP FUNCTION mm_stats(regclass);
DROP FUNCTION mismatch_error(text);
