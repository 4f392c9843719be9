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

SELECT count(*) AS left_prepared FROM pg_prepared_xacts WHERE gid LIKE 'fbf_prep%';
DROP TABLE pc, pd;
DROP FUNCTION sqlstate_of(text);
