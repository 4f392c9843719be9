--
-- Two-phase commit: an operation applied in a prepared transaction stays
-- in flight until COMMIT PREPARED (remembered) or ROLLBACK PREPARED
-- (forgotten); a duplicate meanwhile waits for it, as for any open
-- transaction.  Drains leave it pending.  test/isolation/specs/
-- counter_prepared.spec shows the waits end; test/t/020_prepared_crash.pl
-- a crash between prepare and commit.
--
\set SHOW_CONTEXT never

CREATE OR REPLACE FUNCTION sqlstate_of(query text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE query;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END $$;

-- Prepared transactions are off by default (max_prepared_transactions =
-- 0).  Then PREPARE TRANSACTION fails and aborts the transaction, whose
-- operations are forgotten as a rolled-back one's are, and the rest of
-- this test cannot run (test/expected/fbf_prepared_1.out, as PostgreSQL's own
-- prepared_xacts_1.out)
SELECT current_setting('max_prepared_transactions')::int > 0 AS prepared_enabled \gset
\if :prepared_enabled
\else
SELECT fbf_create_counter_table('pc_off', retention => '1 min', expected_rate => 100);
BEGIN;
SELECT idempotent_increment('pc_off', 'k', 1, 1, 100) AS applied;
\set VERBOSITY terse
PREPARE TRANSACTION 'fbf_prep_off';
\set VERBOSITY default
SELECT count(*) AS left_prepared FROM pg_prepared_xacts WHERE gid LIKE 'fbf_prep%';
SELECT idempotent_increment('pc_off', 'k', 1, 1, 100) AS retry_applied;
SELECT fbf_counter_value('pc_off', 'k') AS value;
DROP TABLE pc_off;
DROP FUNCTION sqlstate_of(text);
\quit
\endif

SELECT fbf_create_counter_table('pc', retention => '1 min', expected_rate => 100);
SELECT fbf_create_dedup('pd', retention => '1 min', expected_rate => 100);

-- prepared, then committed: a duplicate waits meanwhile (55P03 under a
-- lock timeout), and is dismissed once it commits
BEGIN;
SELECT idempotent_increment('pc', 'k', 1, 1, 100) AS applied;
SELECT fbf_claim('pd', 'm-1') AS claimed;
PREPARE TRANSACTION 'fbf_prep_commit';
SET lock_timeout = '100ms';
SELECT sqlstate_of($q$SELECT idempotent_increment('pc', 'k', 1, 1, 100)$q$) AS duplicate_waits;
SELECT sqlstate_of($q$SELECT fbf_claim('pd', 'm-1')$q$) AS duplicate_claim_waits;
SELECT sqlstate_of($q$SELECT idempotent_increment('pc', 'k', ARRAY[1, 1], ARRAY[2, 1], ARRAY[1, 100])$q$) AS batch_waits;
RESET lock_timeout;
SELECT fbf_counter_value('pc', 'k') AS not_yet_counted;
-- a drain (VACUUM) keeps the entries of a prepared transaction pending
VACUUM pc;
VACUUM pd;
SELECT pending FROM fbf_counter_stats WHERE counter = 'pc'::regclass;
COMMIT PREPARED 'fbf_prep_commit';
SELECT idempotent_increment('pc', 'k', 1, 1, 100) AS retry_applied,
	   fbf_claim('pd', 'm-1') AS retry_claimed;
SELECT fbf_counter_value('pc', 'k') AS value;
-- and after the drain, from the filter's bits
VACUUM pc;
VACUUM pd;
SELECT pending FROM fbf_counter_stats WHERE counter = 'pc'::regclass;
SELECT idempotent_increment('pc', 'k', 1, 1, 100) AS retry_applied,
	   fbf_claim('pd', 'm-1') AS retry_claimed;

-- prepared, then rolled back: forgotten, and the retry applies
BEGIN;
SELECT idempotent_increment('pc', 'k', 1, 2, 20) AS applied;
SELECT fbf_claim('pd', 'm-2') AS claimed;
PREPARE TRANSACTION 'fbf_prep_rollback';
VACUUM pc;
ROLLBACK PREPARED 'fbf_prep_rollback';
SELECT fbf_counter_value('pc', 'k') AS value;
SELECT idempotent_increment('pc', 'k', 1, 2, 20) AS retry_applied,
	   fbf_claim('pd', 'm-2') AS retry_claimed;
SELECT fbf_counter_value('pc', 'k') AS value;

-- savepoints inside a prepared transaction: a released one's operation
-- commits with it, a rolled-back one's is forgotten
BEGIN;
SAVEPOINT a;
SELECT idempotent_increment('pc', 'k', 1, 3, 3) AS released;
RELEASE SAVEPOINT a;
SAVEPOINT b;
SELECT idempotent_increment('pc', 'k', 1, 4, 4) AS rolled_back;
ROLLBACK TO SAVEPOINT b;
PREPARE TRANSACTION 'fbf_prep_savepoints';
SET lock_timeout = '100ms';
SELECT sqlstate_of($q$SELECT idempotent_increment('pc', 'k', 1, 3, 3)$q$) AS released_waits;
RESET lock_timeout;
COMMIT PREPARED 'fbf_prep_savepoints';
SELECT idempotent_increment('pc', 'k', 1, 3, 3) AS released_retry,
	   idempotent_increment('pc', 'k', 1, 4, 4) AS rolled_back_retry;
SELECT fbf_counter_value('pc', 'k') AS value;

-- an operation prepared on another key does not hold up this key's
BEGIN;
SELECT idempotent_increment('pc', 'other', 1, 5, 1) AS applied;
PREPARE TRANSACTION 'fbf_prep_other';
SET lock_timeout = '100ms';
SELECT idempotent_increment('pc', 'k', 1, 5, 5) AS same_ids_other_key;
RESET lock_timeout;
ROLLBACK PREPARED 'fbf_prep_other';

-- in either filter, a prepared operation is in flight until it commits:
-- a pass meanwhile keeps it, and the retry after COMMIT PREPARED is
-- dismissed
SELECT fbf_create_counter_table('pk_' || f, retention => '1 min', expected_rate => 100,
								shards => 1, filter => f) IS NOT NULL AS created
FROM unnest(ARRAY['bloom', 'cuckoo']) f;
BEGIN;
SELECT idempotent_increment('pk_bloom', 4, 1, 5) AND idempotent_increment('pk_cuckoo', 4, 1, 5)
	AS prepared_ops;
PREPARE TRANSACTION 'fbf_prep_kinds';
SELECT fbf_counter_maintain('pk_bloom') IN ('grow', 'hold', 'shrink') AS bloom_maintained,
	   fbf_counter_maintain('pk_cuckoo') IN ('grow', 'hold', 'shrink') AS cuckoo_maintained;
SELECT counter, pending FROM fbf_counter_stats WHERE counter::text LIKE 'pk\_%' ORDER BY 1;
COMMIT PREPARED 'fbf_prep_kinds';
SELECT idempotent_increment('pk_bloom', 4, 1, 5) AS bloom_retry_after_commit_prepared,
	   idempotent_increment('pk_cuckoo', 4, 1, 5) AS cuckoo_retry_after_commit_prepared;
SELECT fbf_counter_maintain('pk_bloom') IS NOT NULL AND fbf_counter_maintain('pk_cuckoo') IS NOT NULL
	AS drained;
SELECT idempotent_increment('pk_bloom', 4, 1, 5) AS bloom_retry_drained,
	   idempotent_increment('pk_cuckoo', 4, 1, 5) AS cuckoo_retry_drained;
SELECT (SELECT sum(value) FROM pk_bloom) AS bloom_value, (SELECT sum(value) FROM pk_cuckoo) AS cuckoo_value;
DROP TABLE pk_bloom, pk_cuckoo;

SELECT count(*) AS left_prepared FROM pg_prepared_xacts WHERE gid LIKE 'fbf_prep%';
DROP TABLE pc, pd;
DROP FUNCTION sqlstate_of(text);
