--
-- idempotent_increment_outcome (applied, and the key's value after the
-- call) and batches of idempotent_increment (arrays of client ids, seqs
-- and deltas on one key; src/counter/counter_batch.c).  Concurrency is in
-- test/isolation/specs/counter_batch.spec.
--
-- Errors are shown as SQLSTATE: message.
CREATE FUNCTION batch_error(query text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE query;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- one shard, so that each key has one row
SELECT fbf_create_counter_table('b', retention => '1 min', expected_rate => 100, shards => 1);

-- ---------------------------------------------------------------------
-- The outcome
-- ---------------------------------------------------------------------

-- applied, with the value including the delta; a retry is dismissed and
-- answers the current value
SELECT * FROM idempotent_increment_outcome('b', 1, 1, 5);
SELECT * FROM idempotent_increment_outcome('b', 1, 1, 5) AS retry;
SELECT * FROM idempotent_increment_outcome('b', 1, 2, 7);
SELECT idempotent_increment('b', 1, 3, 100);
SELECT * FROM idempotent_increment_outcome('b', 1, 1, 5) AS retry_sees_later_ops;
-- text and uuid client ids, keyed forms
SELECT * FROM idempotent_increment_outcome('b', 'web-1', 1, 1000);
SELECT * FROM idempotent_increment_outcome('b', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, 1, 10000);
SELECT * FROM idempotent_increment_outcome('b', 'k', 1, 1, 3);
SELECT * FROM idempotent_increment_outcome('b', 'k', 'web-1', 1, 4);
SELECT * FROM idempotent_increment_outcome('b', 'k', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, 1, 5);
SELECT * FROM idempotent_increment_outcome('b', 'k', 1, 1, 3) AS retry;
SELECT key, value FROM b ORDER BY key;
-- within a transaction, the value includes its earlier changes
BEGIN;
SELECT idempotent_increment('b', 'k', 1, 2, 30);
SELECT * FROM idempotent_increment_outcome('b', 'k', 1, 3, 300);
SELECT * FROM idempotent_increment_outcome('b', 'k', 1, 2, 30) AS retry_in_transaction;
ROLLBACK;
SELECT * FROM idempotent_increment_outcome('b', 'k', 1, 2, 30) AS after_rollback_applies;
-- a key without rows
SELECT * FROM idempotent_increment_outcome('b', 'empty', 1, 1, 0);
-- errors
SELECT batch_error($q$SELECT idempotent_increment_outcome('b', 1, NULL, 1)$q$) AS null_seq;
SELECT batch_error($q$SELECT idempotent_increment_outcome('b', NULL, 1, 1, 1)$q$) AS null_key;
SELECT batch_error($q$SELECT idempotent_increment_outcome('b', 1, 1, 9223372036854775807)$q$) AS dismissed_no_overflow;
SELECT batch_error($q$SELECT idempotent_increment_outcome('b', 1, 99, 9223372036854775807)$q$) AS overflow;
SELECT batch_error($q$SELECT idempotent_increment_outcome('pg_class', 1, 1, 1)$q$) AS not_a_counter;
BEGIN READ ONLY;
SELECT batch_error($q$SELECT idempotent_increment_outcome('b', 1, 100, 1)$q$) AS read_only;
ROLLBACK;

-- ---------------------------------------------------------------------
-- Batches
-- ---------------------------------------------------------------------

-- element i answers operation i; repeats within a batch count once (the
-- first occurrence applies); values as single calls would leave them
SELECT idempotent_increment('b', 'batch', ARRAY[1, 2, 3, 2, 1], ARRAY[1, 1, 1, 1, 2],
							ARRAY[1, 10, 100, 1000, 10000]) AS in_batch_repeat;
SELECT fbf_counter_value('b', 'batch');
-- across batches, and against single calls, in both directions
SELECT idempotent_increment('b', 'batch', ARRAY[3, 4, 1], ARRAY[1, 1, 2], ARRAY[1, 1, 1]) AS across_batches;
SELECT idempotent_increment('b', 'batch', 4, 1, 1) AS single_after_batch;
SELECT idempotent_increment('b', 'batch', 5, 1, 100000);
SELECT idempotent_increment('b', 'batch', ARRAY[5, 6], ARRAY[1, 1], ARRAY[1, 1]) AS batch_after_single;
SELECT fbf_counter_value('b', 'batch');
-- a batch adds the sum of its applied deltas in one update: one new row
-- version, where single calls make one each
BEGIN;
SELECT n_tup_upd AS u0 FROM pg_stat_xact_user_tables WHERE relid = 'b'::regclass \gset
SELECT idempotent_increment('b', 'batch', ARRAY[7, 8, 9], ARRAY[1, 1, 1], ARRAY[1, -2, 3]);
SELECT n_tup_upd - :u0 AS row_updates FROM pg_stat_xact_user_tables WHERE relid = 'b'::regclass;
SELECT idempotent_increment('b', 'batch', 10, 1, 1), idempotent_increment('b', 'batch', 11, 1, 1);
SELECT n_tup_upd - :u0 AS row_updates FROM pg_stat_xact_user_tables WHERE relid = 'b'::regclass;
COMMIT;
SELECT value FROM b WHERE key = 'batch';
-- the same operation on another key is another operation
SELECT idempotent_increment('b', 'other', ARRAY[1, 2], ARRAY[1, 1], ARRAY[1, 1]) AS other_key;
-- a batch and single calls share the identity of an operation
SELECT fbf_operation('batch', 1, 1) = fbf_operation('batch', 1::bigint, 1) AS same_identity;
-- text and uuid client ids; the default key
SELECT idempotent_increment('b', 'texts', ARRAY['web-1', 'web-2', 'web-1'], ARRAY[1, 1, 1],
							ARRAY[1, 2, 4]) AS text_ids;
SELECT idempotent_increment('b', 'texts', 'web-2', 1, 8) AS single_text_retry;
SELECT idempotent_increment('b', 'uuids',
							ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
								  'b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11']::uuid[],
							ARRAY[1, 1], ARRAY[1, 2]) AS uuid_ids;
SELECT idempotent_increment('b', ARRAY[1, 50], ARRAY[1, 1], ARRAY[1, 1]) AS default_key;
SELECT idempotent_increment('b', ARRAY['web-1', 'web-50'], ARRAY[1, 1], ARRAY[1, 1]) AS default_key_text;
SELECT idempotent_increment('b', ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11']::uuid[], ARRAY[1], ARRAY[1])
	AS default_key_uuid;
SELECT key, value FROM b ORDER BY key;
-- empty arrays: an empty answer, nothing done
SELECT idempotent_increment('b', 'batch', '{}'::bigint[], '{}', '{}') AS empty;
SELECT idempotent_increment('b', ARRAY[]::text[], ARRAY[]::bigint[], ARRAY[]::bigint[]) AS empty;
-- arrays of any lower bound; the answer starts at 1
SELECT idempotent_increment('b', 'bounds', '[0:1]={1,2}'::bigint[], '[5:6]={1,1}'::bigint[],
							'{1,1}'::bigint[]) AS lower_bounds;

-- overload resolution: typical calls reach the intended forms
SELECT pg_typeof(idempotent_increment('b', 1, 200, 1)) AS scalar,
	   pg_typeof(idempotent_increment('b', 'k', 1, 200, 1)) AS scalar_keyed,
	   pg_typeof(idempotent_increment('b', ARRAY[1], ARRAY[201], ARRAY[1])) AS batch,
	   pg_typeof(idempotent_increment('b', 'k', ARRAY[1], ARRAY[201], ARRAY[1])) AS batch_keyed;
SELECT idempotent_increment('b', 'k', ARRAY[1, 2]::int[], ARRAY[202, 202]::int[], ARRAY[1, 1]::int[]) AS int_arrays;
SELECT idempotent_increment('b', 'k', '{1,2}'::bigint[], '{203,203}', '{1,1}') AS typed_first_array;
PREPARE batch_stmt(text, bigint[], bigint[], bigint[]) AS
	SELECT idempotent_increment('b', $1, $2, $3, $4);
EXECUTE batch_stmt('k', '{1,2}', '{204,204}', '{1,1}');
DEALLOCATE batch_stmt;
-- untyped literals alone fit the scalar and the batch forms: cast them
SELECT batch_error($q$SELECT idempotent_increment('b', 'k', '{1,2}', '{205,205}', '{1,1}')$q$) AS untyped;

-- errors: the whole batch is refused, nothing applied
SELECT batch_error($q$SELECT idempotent_increment('b', 'e', ARRAY[1, 2], ARRAY[1], ARRAY[1, 1])$q$) AS lengths;
SELECT batch_error($q$SELECT idempotent_increment('b', 'e', ARRAY[[1, 2]], ARRAY[[1, 1]], ARRAY[[1, 1]])$q$) AS two_dimensions;
SELECT batch_error($q$SELECT idempotent_increment('b', 'e', ARRAY[1, 2], ARRAY[1, NULL], ARRAY[1, 1])$q$) AS null_element;
SELECT batch_error($q$SELECT idempotent_increment('b', 'e', ARRAY['x', NULL], ARRAY[1, 1], ARRAY[1, 1])$q$) AS null_client;
SELECT batch_error($q$SELECT idempotent_increment('b', 'e', NULL::bigint[], ARRAY[1], ARRAY[1])$q$) AS null_array;
SELECT batch_error($q$SELECT idempotent_increment('b', NULL, ARRAY[1], ARRAY[1], ARRAY[1])$q$) AS null_key;
SELECT batch_error($q$SELECT idempotent_increment(NULL, 'e', ARRAY[1], ARRAY[1], ARRAY[1])$q$) AS null_counter;
SELECT batch_error($q$SELECT idempotent_increment('pg_class', 'e', ARRAY[1], ARRAY[1], ARRAY[1])$q$) AS not_a_counter;
SELECT batch_error($q$SELECT idempotent_increment('pg_class', 'e', '{}'::bigint[], '{}', '{}')$q$) AS empty_not_a_counter;
-- more than the 4,194,304 operations a batch may have: refused from the
-- arrays' dimensions, before anything is read or allocated per operation
SELECT batch_error($q$SELECT idempotent_increment('b', 'e', a, a, a)
					 FROM (SELECT array_fill(1::bigint, ARRAY[4194305]) OFFSET 0) x(a)$q$) AS over_limit;
SELECT batch_error($q$SELECT idempotent_increment('b', a, a, a)
					 FROM (SELECT array_fill(1::bigint, ARRAY[4194305]) OFFSET 0) x(a)$q$) AS over_limit_default_key;
-- the sum of the applied deltas overflows: nothing applied, not remembered
SELECT batch_error($q$SELECT idempotent_increment('b', 'e', ARRAY[1, 2], ARRAY[1, 1],
												   ARRAY[9223372036854775807, 1])$q$) AS sum_overflow;
-- ... but a dismissed operation's delta is not part of the sum
SELECT idempotent_increment('b', 'e', 1, 1, -5);
SELECT idempotent_increment('b', 'e', ARRAY[1, 2], ARRAY[1, 1], ARRAY[9223372036854775807, 1]) AS dismissed_not_summed;
SELECT idempotent_increment('b', 'e', ARRAY[3, 4, 5], ARRAY[1, 1, 1],
							ARRAY[9223372036854775807, 9223372036854775807, -9223372036854775807]) AS sum_fits;
-- the row's new value overflows
SELECT batch_error($q$SELECT idempotent_increment('b', 'e', ARRAY[6], ARRAY[1], ARRAY[9223372036854775807])$q$) AS row_overflow;
SELECT value AS unchanged FROM b WHERE key = 'e';
SELECT idempotent_increment('b', 'e', ARRAY[6, 2], ARRAY[1, 1], ARRAY[-1, -1]) AS retries_apply;
SELECT key, value FROM b WHERE key IN ('e', 'bounds') ORDER BY key;
BEGIN READ ONLY;
SELECT batch_error($q$SELECT idempotent_increment('b', 'e', ARRAY[7], ARRAY[1], ARRAY[1])$q$) AS read_only;
ROLLBACK;

-- a rolled back batch is forgotten, a savepoint's too
BEGIN;
SELECT idempotent_increment('b', 'rb', ARRAY[1, 2, 3], ARRAY[1, 1, 1], ARRAY[1, 1, 1]);
ROLLBACK;
BEGIN;
SAVEPOINT s;
SELECT idempotent_increment('b', 'rb', ARRAY[1, 2], ARRAY[1, 1], ARRAY[1, 1]);
ROLLBACK TO SAVEPOINT s;
SELECT idempotent_increment('b', 'rb', ARRAY[3, 2, 1], ARRAY[1, 1, 1], ARRAY[1, 10, 100]) AS after_rollback;
COMMIT;
SELECT fbf_counter_value('b', 'rb');

-- every operation of a batch is counted in the statistics, repeats too
SELECT applied AS a0, dismissed AS d0 FROM fbf_counter_stats WHERE counter = 'b'::regclass \gset
SELECT idempotent_increment('b', 'stats', ARRAY[1, 2, 1, 3], ARRAY[1, 1, 1, 1], ARRAY[1, 1, 1, 1]);
SELECT idempotent_increment('b', 'stats', ARRAY[3, 4], ARRAY[1, 1], ARRAY[1, 1]);
SELECT applied - :a0 AS applied, dismissed - :d0 AS dismissed
FROM fbf_counter_stats WHERE counter = 'b'::regclass;

-- a batch long enough to leave many pages of entries in flight on every
-- chain of a default counter: the window keeps each chain locked, and
-- indexed, across the batch's run of operations on it, and must answer
-- exactly what a page-by-page search would.  The counter is new, so its
-- filter holds nothing and every answer here is exact: this
-- transaction's own entries are duplicates, a rolled back savepoint's
-- are not, and after the commit every operation is a duplicate.
SELECT fbf_create_counter_table('long_batch') AS long_batch;
ALTER INDEX long_batch_fbf SET (worker_maintenance = off);
CREATE FUNCTION long_batch(lo int, hi int) RETURNS bigint
	LANGUAGE sql AS $$
	SELECT count(*) FILTER (WHERE a)
	FROM unnest(idempotent_increment('long_batch', 'k',
		array_fill(1::bigint, ARRAY[hi - lo + 1]),
		array(SELECT g::bigint FROM generate_series(lo, hi) g),
		array_fill(1::bigint, ARRAY[hi - lo + 1]))) a $$;
BEGIN;
SELECT long_batch(1, 20000) AS applied_20000;
SELECT long_batch(10001, 30000) AS applied_10000;
SAVEPOINT s;
SELECT long_batch(30001, 35000) AS applied_5000;
ROLLBACK TO s;
SELECT long_batch(29001, 35000) AS applied_5000_again;
SELECT idempotent_increment('long_batch', 'k', 1, 34999, 1) AS one_duplicate;
COMMIT;
SELECT long_batch(1, 35000) AS applied_none;
SELECT fbf_counter_value('long_batch', 'k') AS value_35000;
SELECT pending > 0 AS still_pending FROM fbf_counter_stats
WHERE counter = 'long_batch'::regclass;
DROP TABLE long_batch;
DROP FUNCTION long_batch(int, int);

-- privileges: as idempotent_increment, SELECT and UPDATE are required,
-- for duplicates too, and for empty batches
CREATE ROLE fbf_batch_reader;
CREATE ROLE fbf_batch_writer;
GRANT SELECT ON b TO fbf_batch_reader;
GRANT SELECT, UPDATE, INSERT ON b TO fbf_batch_writer;
SET ROLE fbf_batch_reader;
SELECT batch_error($q$SELECT idempotent_increment('b', 'p', ARRAY[1], ARRAY[1], ARRAY[1])$q$) AS batch;
SELECT batch_error($q$SELECT idempotent_increment('b', 'batch', ARRAY[1], ARRAY[1], ARRAY[1])$q$) AS batch_duplicate;
SELECT batch_error($q$SELECT idempotent_increment('b', 'p', '{}'::bigint[], '{}', '{}')$q$) AS empty_batch;
SELECT batch_error($q$SELECT idempotent_increment_outcome('b', 'p', 1, 1, 1)$q$) AS outcome;
SELECT batch_error($q$SELECT idempotent_increment_outcome('b', 1, 1, 5)$q$) AS outcome_duplicate;
RESET ROLE;
SET ROLE fbf_batch_writer;
SELECT idempotent_increment('b', 'p', ARRAY[1, 2], ARRAY[1, 1], ARRAY[1, 1]) AS writer;
SELECT * FROM idempotent_increment_outcome('b', 'p', 1, 1, 1) AS writer_retry;
RESET ROLE;

DROP TABLE b;
DROP ROLE fbf_batch_reader, fbf_batch_writer;
DROP FUNCTION batch_error(text);
