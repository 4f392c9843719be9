--
-- Loading a snapshot into a counter (fbf_counter_load), and saving and
-- restoring them from a table filled by fbf_counter_save with
-- fbf_counter_restore: what a dump and restore relies on.
--
\set SHOW_CONTEXT never

CREATE FUNCTION load_sqlstate_of(query text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE query;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END $$;

-- how many of the operations (client, 1 .. n) on key k apply to counter t
CREATE FUNCTION applied(t regclass, k text, client bigint, n int) RETURNS bigint
LANGUAGE sql AS $$
	SELECT count(*) FILTER (WHERE idempotent_increment(t, k, client, g, 1))
	FROM generate_series(1, n) g
$$;

-- planned for more than the test's rate, so that no split depends on
-- timing; and left alone by the background worker and autovacuum (whose
-- VACUUM drains too), so that what is drained and what still waits on the
-- pending chains is what the test's own statements leave (set as it is
-- created, before either can see it)
BEGIN;
SELECT fbf_create_counter_table('src', retention => '10 min', expected_rate => 10000);
ALTER INDEX src_fbf SET (worker_maintenance = off);
ALTER TABLE src SET (autovacuum_enabled = off);
COMMIT;
SELECT applied('src', '', 1, 300), applied('src', 'k', 2, 200);
-- some drained into the bits, some still on the pending chains
SELECT fbf_counter_maintain('src');
SELECT applied('src', 'k', 3, 100);
CREATE TABLE saved AS SELECT fbf_snapshot('src') AS s;
GRANT SELECT ON saved TO PUBLIC;

-- a new, empty counter with the same options takes the snapshot whole
BEGIN;
SELECT fbf_create_counter_table('dst', retention => '10 min', expected_rate => 10000);
ALTER INDEX dst_fbf SET (worker_maintenance = off);
ALTER TABLE dst SET (autovacuum_enabled = off);
COMMIT;
SELECT fbf_counter_load('dst', s) FROM saved;
SELECT applied('dst', '', 1, 300) AS retries_applied,
	   applied('dst', 'k', 2, 200) AS retries_applied,
	   applied('dst', 'k', 3, 100) AS retries_applied;
SELECT applied('dst', 'k', 4, 100) AS new_applied;
SELECT counter, partitions, nbits, nhashes, elements[1:3] FROM fbf_counter_stats
WHERE counter IN ('src'::regclass, 'dst'::regclass) ORDER BY 1;

-- loading again merges: nothing is forgotten, nothing counted twice
SELECT fbf_counter_load('dst', s) FROM saved;
SELECT applied('dst', 'k', 4, 100) AS retries_applied, applied('dst', '', 1, 300) AS retries_applied;
SELECT elements[1:3] FROM fbf_counter_stats WHERE counter = 'dst'::regclass;

-- an empty counter of another shape adopts the snapshot's (its ring as
-- the snapshot has it: no pass of the worker tunes it meanwhile)
BEGIN;
SELECT fbf_create_counter_table('other', retention => '1 min', nbits => 20000, nhashes => 5, npast => 4);
ALTER INDEX other_fbf SET (worker_maintenance = off);
ALTER TABLE other SET (autovacuum_enabled = off);
COMMIT;
SELECT partitions, filters FROM fbf_counter_stats WHERE counter = 'other'::regclass;
SELECT fbf_counter_load('other', s) FROM saved;
SELECT partitions, filters FROM fbf_counter_stats WHERE counter = 'other'::regclass;
SELECT applied('other', '', 1, 300) AS retries_applied, applied('other', 'k', 5, 50) AS new_applied;

-- a counter of another shape that holds operations refuses it
SELECT fbf_create_counter_table('busy', retention => '1 min', nbits => 20000, nhashes => 5, npast => 4);
SELECT applied('busy', '', 9, 1);
SELECT fbf_counter_load('busy', s) FROM saved;
SELECT load_sqlstate_of($q$SELECT fbf_counter_load('busy', s) FROM saved$q$);
SELECT applied('busy', '', 9, 1) AS still_remembered, applied('busy', '', 1, 5) AS not_loaded;

-- a snapshot merges into a filter that holds operations under the same
-- key: an empty counter takes the key with the snapshot, and keeps it as
-- its partitions split.  Twice the partitions, same bits per partition:
-- each snapshot partition goes into the two that hold its operations (as
-- a split copies it).  The worker leaves both alone: only the test splits
-- them (at 100 operations a moment apart, the worker may find 'one' over
-- its rate and split it too)
SELECT fbf_create_counter_table('one', retention => '1 min', nbits => 3000, nhashes => 6, npast => 4);
SELECT fbf_create_counter_table('two', retention => '1 min', nbits => 3000, nhashes => 6, npast => 4);
ALTER INDEX one_fbf SET (worker_maintenance = off);
ALTER INDEX two_fbf SET (worker_maintenance = off);
SELECT fbf_counter_load('two', fbf_snapshot('one'));
SELECT applied('two', '', 2, 3000), applied('one', '', 1, 100);
SELECT fbf_counter_maintain('two') IS NOT NULL AS maintained;
SELECT counter, partitions > 1 AS split, nbits / partitions AS bits_per_partition
FROM fbf_counter_stats WHERE counter IN ('one'::regclass, 'two'::regclass) ORDER BY 1;
SELECT fbf_counter_load('two', fbf_snapshot('one'));
SELECT applied('two', '', 1, 100) AS retries_applied, applied('two', '', 2, 3000) AS retries_applied,
	   applied('two', '', 3, 10) AS new_applied;
-- and the other way round: two partitions into one is ORing them (as a merge)
SELECT fbf_counter_load('one', fbf_snapshot('two'));
SELECT applied('one', '', 3, 10) AS retries_applied;
-- (a snapshot of another counter, under another key, is refused by a
-- filter that holds operations: test/t/025_forged_collisions.pl, and
-- fbf_edges.sql; 'two' took the key of 'one' with its snapshot, so these
-- loads merge whatever the keys)

-- values that are not a counter's snapshot
SELECT fbf_counter_load('dst', fbf_create(4096, 3, 2));
SELECT load_sqlstate_of($q$SELECT fbf_counter_load('dst', fbf_create(4096, 3, 2))$q$);
SELECT fbf_counter_load('saved', s) FROM saved;
SELECT fbf_counter_load('dst', NULL) IS NULL AS strict;

-- privileges: only the owner loads or saves
CREATE ROLE fbf_load_owner;
CREATE ROLE fbf_load_other;
GRANT CREATE ON SCHEMA public TO fbf_load_owner;
GRANT SELECT, UPDATE ON dst TO fbf_load_other;
SET ROLE fbf_load_owner;
SELECT fbf_create_counter_table('owned', retention => '1 min', expected_rate => 100);
SELECT applied('owned', '', 1, 10);
SELECT name, snapshot IS NOT NULL AS has_snapshot FROM fbf_counter_save();
SELECT fbf_counter_load('dst', s) FROM saved;
SELECT load_sqlstate_of($q$SELECT fbf_counter_load('dst', s) FROM saved$q$);
SELECT * FROM fbf_counter_save('dst');
SELECT load_sqlstate_of($q$SELECT * FROM fbf_counter_save('dst')$q$);
RESET ROLE;
SET ROLE fbf_load_other;
SELECT count(*) AS saved_none FROM fbf_counter_save();
RESET ROLE;
SELECT * FROM fbf_counter_save('plain_table_for_save');
CREATE TABLE plain_table_for_save (i int);
SELECT * FROM fbf_counter_save('plain_table_for_save');
SELECT load_sqlstate_of($q$SELECT * FROM fbf_counter_save('plain_table_for_save')$q$);
DROP TABLE plain_table_for_save;
-- a name that needs quotes is quoted once
CREATE TABLE "Mixed T" (i int);
SELECT * FROM fbf_counter_save('"Mixed T"');
DROP TABLE "Mixed T";

-- save every counter (other tests' too) into a table of one's own, as
-- before a pg_dump; then restore: each row loaded into its counter
CREATE TABLE fbf_saved AS SELECT * FROM fbf_counter_save();
SELECT count(*) >= 7 AS saved_all FROM fbf_saved;
SELECT name, saved_at <= clock_timestamp() AS saved FROM fbf_saved
WHERE name IN ('public.src', 'public.dst', 'public.busy', 'public.owned')
ORDER BY 1;
DROP TABLE owned;
SELECT fbf_create_counter_table('fresh_dst', retention => '10 min', expected_rate => 10000);
UPDATE fbf_saved SET name = 'public.fresh_dst' WHERE name = 'public.src';
SELECT name, outcome FROM fbf_counter_restore('fbf_saved')
WHERE name IN ('public.fresh_dst', 'public.dst', 'public.busy', 'public.owned')
ORDER BY 1;
SELECT applied('fresh_dst', '', 1, 300) AS retries_applied, applied('fresh_dst', 'k', 3, 100) AS retries_applied;
SELECT * FROM fbf_counter_restore('no_such_saved_table');

DROP TABLE src, dst, other, busy, one, two, fresh_dst, saved, fbf_saved;
DROP ROLE fbf_load_other;
REVOKE CREATE ON SCHEMA public FROM fbf_load_owner;
DROP ROLE fbf_load_owner;
DROP FUNCTION applied(regclass, text, bigint, int);
DROP FUNCTION load_sqlstate_of(text);
