--
-- Exact streams in snapshots: fbf_snapshot carries what the window's
-- stream pages know (and the committed operations still on its chains),
-- so that after fbf_counter_save / fbf_counter_restore, or a snapshot
-- loaded into a fresh counter, an in-order client's retries and new
-- operations are answered by its stream at once (exact_answers), with no
-- false dismissal; a value without streams (taken before snapshots
-- carried them) still loads, its streams reset (docs/user-guide.md,
-- "Exact streams"; docs/design.md, "Exact streams in snapshots").
--
-- Errors are shown as SQLSTATE: message.
CREATE FUNCTION snap_error(query text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE query;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

CREATE FUNCTION st(counter regclass)
RETURNS TABLE (applied bigint, dismissed bigint, exact bigint, filter bigint,
			   streams bigint, exact_now boolean)
LANGUAGE sql AS $$
	SELECT applied, dismissed, exact_answers, filter_answers, streams,
		   streams_exact_from IS NULL
	FROM fbf_counter_stats WHERE counter = $1
$$;

-- does a snapshot's portable form carry streams (the flag bit 2)?
CREATE FUNCTION has_streams(s fbf) RETURNS boolean
LANGUAGE sql AS $$ SELECT (get_byte(fbf_send(s), 14) & 4) <> 0 $$;

-- the same snapshot as a build before streams wrote it: no flag, no
-- streams, no length; the key at the end
CREATE FUNCTION without_streams(s fbf) RETURNS fbf
LANGUAGE plpgsql AS $$
DECLARE
	b bytea := fbf_send(s);
	n integer := length(b);
	slen bigint := 0;
	old bytea;
BEGIN
	FOR i IN 0 .. 7 LOOP
		slen := slen + (get_byte(b, n - 24 + i)::bigint << (8 * i));
	END LOOP;
	old := substring(b FROM 1 FOR n - 24 - slen::integer) || substring(b FROM n - 15 FOR 16);
	old := set_byte(old, 14, get_byte(old, 14) & ~4);
	RETURN ('\x' || encode(old, 'hex'))::fbf;
END $$;

-- ---------------------------------------------------------------------
-- A counter with three in-order clients: two drained into their stream
-- pages, one operation still pending (committed) when the snapshot is taken
-- ---------------------------------------------------------------------
SELECT fbf_create_counter_table('orig', retention => '10 min', expected_rate => 100, shards => 1);
-- only this file's statements drain its counters: a pass of the worker,
-- on a server where it runs, could drain one between two statements and
-- change which answer (a chain's, a stream's, the filter's) counts next
ALTER INDEX orig_fbf SET (worker_maintenance = off);
SELECT count(*) FILTER (WHERE idempotent_increment('orig', 1, g, 1)) AS applied
FROM generate_series(1, 100) g;
SELECT count(*) FILTER (WHERE idempotent_increment('orig', 'two', g, 1)) AS applied
FROM generate_series(1, 50) g;
SELECT fbf_counter_maintain('orig') IS NOT NULL AS drained;
SELECT idempotent_increment('orig', 3, 1, 1) AS pending_applied;
SELECT streams FROM fbf_counter_stats WHERE counter = 'orig'::regclass;

CREATE TABLE saved AS SELECT * FROM fbf_counter_save('orig');
SELECT has_streams(snapshot) FROM saved;
-- the text form round-trips, streams and all
SELECT fbf_send(snapshot::text::fbf) = fbf_send(snapshot) AS round_trip FROM saved;

-- ---------------------------------------------------------------------
-- Restored into a fresh counter: the streams come with the window
-- ---------------------------------------------------------------------
DROP TABLE orig;
SELECT fbf_create_counter_table('orig', retention => '10 min', expected_rate => 100, shards => 1);
ALTER INDEX orig_fbf SET (worker_maintenance = off);
SELECT name, outcome FROM fbf_counter_restore('saved');
SELECT * FROM st('orig');
-- retries of the last ten of each drained client and of the pending one:
-- all dismissed, each by its stream
SELECT count(*) FILTER (WHERE idempotent_increment('orig', 1, g, 1)) AS retries_applied
FROM generate_series(91, 100) g;
SELECT count(*) FILTER (WHERE idempotent_increment('orig', 'two', g, 1)) AS retries_applied
FROM generate_series(41, 50) g;
SELECT idempotent_increment('orig', 3, 1, 1) AS pending_retry_applied;
-- new operations: all applied (no false dismissal), each by its stream
SELECT count(*) FILTER (WHERE idempotent_increment('orig', 1, g, 1)) AS new_applied
FROM generate_series(101, 150) g;
SELECT count(*) FILTER (WHERE idempotent_increment('orig', 'two', g, 1)) AS new_applied
FROM generate_series(51, 60) g;
SELECT count(*) FILTER (WHERE idempotent_increment('orig', 3, g, 1)) AS new_applied
FROM generate_series(2, 5) g;
SELECT * FROM st('orig');

-- ---------------------------------------------------------------------
-- Loaded into a counter with another number of stream pages: each stream
-- re-placed by its id
-- ---------------------------------------------------------------------
SELECT fbf_create_counter_table('small', retention => '10 min', expected_rate => 100,
								shards => 1, max_streams => 300);
ALTER INDEX small_fbf SET (worker_maintenance = off);
SELECT stream_capacity < 16384 AS fewer_pages FROM fbf_counter_stats
WHERE counter = 'small'::regclass;
SELECT fbf_counter_load('small', snapshot) FROM saved;
SELECT * FROM st('small');
SELECT count(*) FILTER (WHERE idempotent_increment('small', 1, g, 1)) AS retries_applied
FROM generate_series(95, 100) g;
SELECT count(*) FILTER (WHERE idempotent_increment('small', 1, g, 1)) AS new_applied
FROM generate_series(101, 110) g;
SELECT * FROM st('small');

-- ---------------------------------------------------------------------
-- Merged into a window that remembers operations of its own (the same
-- counter's snapshot, loaded back after more operations): each stream
-- keeps the union of what both knew, exact where both were
-- ---------------------------------------------------------------------
CREATE TABLE later AS SELECT snapshot FROM fbf_counter_save('orig');
SELECT count(*) FILTER (WHERE idempotent_increment('orig', 1, g, 1)) AS new_applied
FROM generate_series(151, 160) g;
SELECT fbf_counter_maintain('orig') IS NOT NULL AS drained;
SELECT fbf_counter_load('orig', snapshot) FROM later;
SELECT count(*) FILTER (WHERE idempotent_increment('orig', 1, g, 1)) AS retries_applied
FROM generate_series(141, 160) g;
SELECT count(*) FILTER (WHERE idempotent_increment('orig', 1, g, 1)) AS new_applied
FROM generate_series(161, 170) g;
SELECT * FROM st('orig');

-- ---------------------------------------------------------------------
-- A snapshot without streams (as fbf 1.5's first builds wrote it) loads
-- as before: its operations dismissed by the filter, the streams reset
-- ---------------------------------------------------------------------
SELECT has_streams(without_streams(snapshot)) FROM saved;
SELECT fbf_create_counter_table('old', retention => '10 min', expected_rate => 100, shards => 1);
ALTER INDEX old_fbf SET (worker_maintenance = off);
SELECT fbf_counter_load('old', without_streams(snapshot)) FROM saved;
SELECT streams, exact_now FROM st('old');
SELECT count(*) FILTER (WHERE idempotent_increment('old', 1, g, 1)) AS retries_applied
FROM generate_series(91, 100) g;
SELECT dismissed, exact, filter FROM st('old');

-- ---------------------------------------------------------------------
-- Malformed streams are refused as input
-- ---------------------------------------------------------------------
-- the section's magic, just after the Bloom value's form
SELECT snap_error(format($q$SELECT %L::fbf$q$,
	'\x' || encode(set_byte(fbf_send(snapshot),
							length(fbf_send(without_streams(snapshot))) - 16, 0),
				   'hex'))) AS bad_magic
FROM saved;
-- a length past the value
SELECT snap_error(format($q$SELECT %L::fbf$q$,
	'\x' || encode(set_byte(fbf_send(snapshot), length(fbf_send(snapshot)) - 18, 255),
				   'hex'))) AS bad_length
FROM saved;

-- ---------------------------------------------------------------------
-- fbf_dedup_stats shows a dedup table's streams as fbf_counter_stats does
-- ---------------------------------------------------------------------
SELECT array_agg(attname ORDER BY attnum) FROM pg_attribute
WHERE attrelid = 'fbf_dedup_stats'::regclass AND attnum BETWEEN 22 AND 28;
SELECT fbf_create_dedup('claims', retention => '10 min', expected_rate => 100);
ALTER INDEX claims_fbf SET (worker_maintenance = off);
SELECT count(*) FILTER (WHERE fbf_claim('claims', 'c1', g::bigint)) AS claimed
FROM generate_series(1, 20) g;
SELECT fbf_counter_maintain('claims') IS NOT NULL AS drained;
SELECT count(*) FILTER (WHERE fbf_claim('claims', 'c1', g::bigint)) AS claimed
FROM generate_series(15, 25) g;
SELECT streams, stream_capacity > 0 AS has_capacity, stream_evictions, exact_answers,
	   filter_answers, streams_exact_from IS NULL AS exact_now
FROM fbf_dedup_stats WHERE dedup = 'claims'::regclass;

DROP TABLE saved, later, orig, small, old, claims;
DROP FUNCTION snap_error(text), st(regclass), has_streams(fbf), without_streams(fbf);
