--
-- The delta of an increment is added without SPI where that behaves as
-- `UPDATE t SET value = value + delta WHERE key = k AND shard = s` would
-- (src/counter/counter_delta.c), and by that UPDATE through SPI where it
-- could not.  Both must give the same results: constraints, indexes,
-- generated columns, overflow, triggers, rules, privileges.
--
-- Errors show their context here: one raised by the UPDATE through SPI
-- carries its statement (CONTEXT: SQL statement "UPDATE ..."), one raised
-- on the direct path has none, so the expected output also tells which
-- path ran.  (Concurrency is in test/isolation/specs/counter_direct.spec.)
--
\set SHOW_CONTEXT errors

CREATE OR REPLACE FUNCTION sqlstate_of(query text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE query;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END $$;

-- one shard, so every increment of a key goes to one row
SELECT fbf_create_counter_table('d', retention => '1 min', expected_rate => 100, shards => 1);

-- the first increment of a key inserts its row (SPI upsert), later ones
-- update it (direct); two in one statement, and reads later in the
-- transaction, see every earlier one
SELECT idempotent_increment('d', 1, 1, 1) AS first;
SELECT idempotent_increment('d', 1, 2, 10) AS second, idempotent_increment('d', 1, 3, 100) AS third;
BEGIN;
SELECT idempotent_increment('d', 1, 4, 1000);
SELECT value FROM d;
SELECT idempotent_increment('d', 1, 4, 1000) AS retry_in_transaction, fbf_counter_value('d');
COMMIT;
DO $$
BEGIN
	PERFORM idempotent_increment('d', 1, 5, 10000);
	RAISE NOTICE 'seen in the same function: %', (SELECT value FROM d);
END $$;
SELECT key, shard, value FROM d;

-- an index on value is maintained (the update is no longer HOT): found
-- through the index at every step
CREATE INDEX d_value ON d (value);
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT key FROM d WHERE value = 11111;
SELECT count(*) AS found_at_11111 FROM d WHERE value = 11111;
SELECT idempotent_increment('d', 1, 6, 1);
SELECT (SELECT count(*) FROM d WHERE value = 11112) AS found_at_11112,
       (SELECT count(*) FROM d WHERE value = 11111) AS gone_at_11111;
SELECT idempotent_increment('d', 1, 7, 1), idempotent_increment('d', 1, 8, 1);
SELECT value FROM d WHERE value = 11114;
RESET enable_seqscan;
RESET enable_bitmapscan;
-- the primary key still finds the newest version after non-HOT updates
SELECT idempotent_increment('d', 'k2', 1, 1, 5) AS new_key,
       idempotent_increment('d', 'k2', 1, 2, 5) AS same_key_again;
SELECT key, value FROM d ORDER BY key;

-- a unique index on value: a duplicate value is refused (23505), nothing
-- applied, the operation forgotten
CREATE UNIQUE INDEX d_value_unique ON d (value);
SELECT idempotent_increment('d', 'k2', 1, 3, 11104);
SELECT sqlstate_of($q$SELECT idempotent_increment('d', 'k2', 1, 3, 11104)$q$);
SELECT key, value FROM d ORDER BY key;
SELECT idempotent_increment('d', 'k2', 1, 3, 1) AS retry_applies;
DROP INDEX d_value_unique;

-- a CHECK constraint the increment would violate: 23514, nothing applied,
-- the operation forgotten (its retry applies)
ALTER TABLE d ADD CONSTRAINT value_at_most_20000 CHECK (value <= 20000);
SELECT idempotent_increment('d', 1, 9, 10000);
SELECT sqlstate_of($q$SELECT idempotent_increment('d', 1, 9, 10000)$q$);
SELECT value AS unchanged FROM d WHERE key = '';
SELECT idempotent_increment('d', 1, 9, 1) AS retry_applies;
ALTER TABLE d DROP CONSTRAINT value_at_most_20000;

-- overflow, up and down: 22003 as int8pl raises it, nothing applied,
-- the operation forgotten
UPDATE d SET value = 9223372036854775800 WHERE key = '';
SELECT idempotent_increment('d', 1, 10, 8);
SELECT sqlstate_of($q$SELECT idempotent_increment('d', 1, 10, 8)$q$);
SELECT value AS unchanged FROM d WHERE key = '';
SELECT idempotent_increment('d', 1, 10, 7) AS retry_applies;
SELECT value AS max FROM d WHERE key = '';
UPDATE d SET value = -9223372036854775800 WHERE key = '';
SELECT idempotent_increment('d', 1, 11, -9);
SELECT sqlstate_of($q$SELECT idempotent_increment('d', 1, 11, -9)$q$);
SELECT idempotent_increment('d', 1, 11, -8) AS retry_applies;
SELECT value AS min FROM d WHERE key = '';
UPDATE d SET value = 0 WHERE key = '';

-- a stored generated column is computed again
ALTER TABLE d ADD COLUMN doubled bigint GENERATED ALWAYS AS (value * 2) STORED;
SELECT idempotent_increment('d', 1, 12, 1), idempotent_increment('d', 'k2', 1, 4, 1);
SELECT key, value, doubled FROM d ORDER BY key;
ALTER TABLE d DROP COLUMN doubled;

-- a BEFORE UPDATE row trigger still fires (the UPDATE through SPI runs
-- it), and can change the row as for any UPDATE; dropped, the direct path
-- is back (no trigger, no CONTEXT in an error)
CREATE TABLE d_log (old_value bigint, new_value bigint);
CREATE FUNCTION d_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO d_log VALUES (OLD.value, NEW.value);
	IF NEW.value > 100000 THEN
		RAISE EXCEPTION 'value % too large for the trigger', NEW.value;
	END IF;
	NEW.value := NEW.value * 2;
	RETURN NEW;
END $$;
CREATE TRIGGER d_audit BEFORE UPDATE ON d FOR EACH ROW EXECUTE FUNCTION d_audit();
UPDATE d SET value = 10 WHERE key = '';
TRUNCATE d_log;
SELECT idempotent_increment('d', 1, 13, 5) AS with_trigger;
SELECT * FROM d_log;
SELECT value AS doubled_by_trigger FROM d WHERE key = '';
SELECT idempotent_increment('d', 1, 14, 100000);
DROP TRIGGER d_audit ON d;
SELECT idempotent_increment('d', 1, 15, 5) AS without_trigger;
SELECT count(*) AS log_rows, (SELECT value FROM d WHERE key = '') AS value FROM d_log;
-- an AFTER trigger, per statement: fires once per increment
CREATE FUNCTION d_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO d_log VALUES (NULL, NULL);
	RETURN NULL;
END $$;
CREATE TRIGGER d_count AFTER UPDATE ON d FOR EACH STATEMENT EXECUTE FUNCTION d_count();
SELECT idempotent_increment('d', 1, 16, 1), idempotent_increment('d', 1, 17, 1);
SELECT count(*) FILTER (WHERE new_value IS NULL) AS statement_trigger_fired FROM d_log;
DROP TRIGGER d_count ON d;

-- a rule on UPDATE applies
CREATE RULE d_also_log AS ON UPDATE TO d DO ALSO INSERT INTO d_log VALUES (OLD.value, NEW.value);
TRUNCATE d_log;
SELECT idempotent_increment('d', 1, 18, 1) AS with_rule;
SELECT * FROM d_log;
DROP RULE d_also_log ON d;

-- inheritance: the UPDATE also updates a child's row of the same key and
-- shard, and so does the increment
CREATE TABLE d_child () INHERITS (d);
INSERT INTO d_child VALUES ('', 0, 1000);
SELECT idempotent_increment('d', 1, 19, 1) AS with_child;
SELECT tableoid::regclass, value FROM d WHERE key = '' ORDER BY 1;
-- (the table is taken to have children until ANALYZE finds none left)
DROP TABLE d_child;
ANALYZE d;

-- privileges are those of the UPDATE: column grants are enough; UPDATE
-- on another column, or no SELECT on key, is not
CREATE ROLE fbf_direct_columns;
GRANT SELECT (key, shard, value), UPDATE (value) ON d TO fbf_direct_columns;
CREATE ROLE fbf_direct_wrong_column;
GRANT SELECT ON d TO fbf_direct_wrong_column;
GRANT UPDATE (key) ON d TO fbf_direct_wrong_column;
CREATE ROLE fbf_direct_no_key;
GRANT SELECT (shard, value), UPDATE (value) ON d TO fbf_direct_no_key;
SET ROLE fbf_direct_columns;
SELECT idempotent_increment('d', 2, 1, 1) AS column_grants_apply;
SELECT idempotent_increment('d', 2, 4, 9223372036854775807);  -- direct: no CONTEXT
SET ROLE fbf_direct_wrong_column;
SELECT idempotent_increment('d', 2, 2, 1);
SET ROLE fbf_direct_no_key;
SELECT idempotent_increment('d', 2, 3, 1);
RESET ROLE;
SELECT value FROM d WHERE key = '';
REVOKE ALL ON d FROM fbf_direct_columns, fbf_direct_wrong_column, fbf_direct_no_key;
DROP ROLE fbf_direct_columns, fbf_direct_wrong_column, fbf_direct_no_key;

-- a table altered so that the direct path cannot serve it falls back to
-- the UPDATE: no primary key (a unique index instead, which the upsert
-- needs); its error carries the UPDATE.  With the primary key back, the
-- direct path is back.
ALTER TABLE d DROP CONSTRAINT d_pkey;
CREATE UNIQUE INDEX d_key_shard ON d (key, shard);
SELECT idempotent_increment('d', 1, 20, 1) AS without_primary_key;
SELECT idempotent_increment('d', 1, 21, 9223372036854775807);
ALTER TABLE d ADD PRIMARY KEY USING INDEX d_key_shard;
SELECT idempotent_increment('d', 1, 21, 9223372036854775807);
SELECT idempotent_increment('d', 1, 22, 1) AS with_primary_key;
SELECT value FROM d WHERE key = '';
-- a NULL value stays NULL, as value + delta does
ALTER TABLE d ALTER COLUMN value DROP NOT NULL;
UPDATE d SET value = NULL WHERE key = 'k2';
SELECT idempotent_increment('d', 'k2', 1, 5, 1) AS applied_to_null;
SELECT key, value FROM d ORDER BY key;

-- a BRIN index on value: from PostgreSQL 16 an update that changes only
-- a summarized column stays HOT but must still widen the range's summary
-- (the indexes are opened then); before 16 it is not HOT.  The row exists
-- before the index, so its page range is summarized; the increments move
-- the value far outside it, and the bitmap scan through the summary must
-- still find the row.
SELECT fbf_create_counter_table('d_brin', retention => '1 min', expected_rate => 100, shards => 1);
SELECT idempotent_increment('d_brin', 1, 1, 5) AS inserted;
CREATE INDEX d_brin_value ON d_brin USING brin (value);
SELECT idempotent_increment('d_brin', 1, 2, 1000000) AS hot_summarized,
       idempotent_increment('d_brin', 1, 3, 1000000) AS again;
SET enable_seqscan = off;
SET enable_indexscan = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM d_brin WHERE value = 2000005;
SELECT count(*) AS found_through_brin FROM d_brin WHERE value = 2000005;
RESET enable_seqscan;
RESET enable_indexscan;
DROP TABLE d_brin;

-- a backend looks for a key's row first where it last wrote it; a row
-- changed since is found through the primary key: after a plain UPDATE,
-- after it is deleted and inserted again, after VACUUM truncated the table
-- to no block (the place is past its end), after TRUNCATE (new storage).
-- Temporary, so that what VACUUM removes does not depend on other
-- sessions' snapshots.  (Other backends' changes:
-- test/isolation/specs/counter_row_places.spec.)
SELECT fbf_create_counter_table('pg_temp.d_places', retention => '1 min', expected_rate => 100, shards => 1);
SELECT idempotent_increment('pg_temp.d_places', 1, 1, 1) AS inserted,
       idempotent_increment('pg_temp.d_places', 1, 2, 1) AS remembered;
UPDATE d_places SET value = value + 100;
SELECT idempotent_increment('pg_temp.d_places', 1, 3, 1) AS after_update;
SELECT value AS value_103 FROM d_places;
DELETE FROM d_places;
INSERT INTO d_places VALUES ('', 0, 5000);
SELECT idempotent_increment('pg_temp.d_places', 1, 4, 1) AS after_reinsert;
SELECT value AS value_5001 FROM d_places;
DELETE FROM d_places;
VACUUM d_places;
SELECT pg_relation_size('d_places') AS truncated_to_no_block;
SELECT idempotent_increment('pg_temp.d_places', 1, 5, 1) AS inserted_again,
       idempotent_increment('pg_temp.d_places', 1, 6, 1) AS remembered_again;
TRUNCATE d_places;
SELECT idempotent_increment('pg_temp.d_places', 1, 7, 10) AS after_truncate;
SELECT key, value AS value_10 FROM d_places;
DROP TABLE d_places;

-- renamed table and schema: the new names are used
CREATE SCHEMA dir_s;
SELECT fbf_create_counter_table('dir_s.c', shards => 1);
SELECT idempotent_increment('dir_s.c', 1, 1, 1), idempotent_increment('dir_s.c', 1, 2, 1);
ALTER SCHEMA dir_s RENAME TO dir_t;
ALTER TABLE dir_t.c RENAME TO c2;
SELECT idempotent_increment('dir_t.c2', 'new', 1, 1, 1) AS upsert_after_renames,
       idempotent_increment('dir_t.c2', 1, 3, 1) AS update_after_renames;
SELECT key, value FROM dir_t.c2 ORDER BY key;
DROP SCHEMA dir_t CASCADE;

DROP TABLE d, d_log;
DROP FUNCTION d_audit(), d_count();
