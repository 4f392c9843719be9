/* sql/fbf--1.0--1.1.sql: from 1.0 to 1.1 (ALTER EXTENSION fbf UPDATE) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fbf UPDATE TO '1.1'" to load this file. \quit

-- An operation's identity includes its key: fbf_operation takes it.
-- (Windows written by 1.0 are upgraded in place by the library on first
-- use; see docs/operations.md, "Upgrades".)

COMMENT ON FUNCTION fbf_operation(bigint, bigint) IS
	'the identity of an operation on the default key as the counter filters hash it (for fbf_contains on fbf_snapshot)';
COMMENT ON FUNCTION fbf_operation(text, bigint) IS
	'the identity of an operation on the default key as the counter filters hash it (for fbf_contains on fbf_snapshot)';
COMMENT ON FUNCTION fbf_operation(uuid, bigint) IS
	'the identity of an operation on the default key as the counter filters hash it (for fbf_contains on fbf_snapshot)';

CREATE FUNCTION fbf_operation(key text, client_id bigint, seq bigint) RETURNS bytea
	AS 'MODULE_PATHNAME', 'fbf_operation_int8'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_operation(key text, client_id text, seq bigint) RETURNS bytea
	AS 'MODULE_PATHNAME', 'fbf_operation_text'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_operation(key text, client_id uuid, seq bigint) RETURNS bytea
	AS 'MODULE_PATHNAME', 'fbf_operation_uuid'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_operation(text, bigint, bigint) IS
	'the identity of an operation on key as the counter filters hash it (for fbf_contains on fbf_snapshot)';
COMMENT ON FUNCTION fbf_operation(text, text, bigint) IS
	'the identity of an operation on key as the counter filters hash it (for fbf_contains on fbf_snapshot)';
COMMENT ON FUNCTION fbf_operation(text, uuid, bigint) IS
	'the identity of an operation on key as the counter filters hash it (for fbf_contains on fbf_snapshot)';

-- Dump and restore carry a counter's memory (docs/user-guide.md, "Dump,
-- restore and moving a counter").
------------------------------------------------------------------------
-- Keeping a counter's memory across dump and restore
------------------------------------------------------------------------

CREATE FUNCTION fbf_counter_load(counter regclass, snapshot fbf)
	RETURNS text
	AS 'MODULE_PATHNAME', 'fbf_counter_load'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION fbf_counter_load(regclass, fbf) IS
	'merge a snapshot (as fbf_snapshot returns it) into the counter''s filter, aligned on time; returns adopted, merged or expired';

-- Saved snapshots, carried by pg_dump.  Each role sees and changes only
-- the rows of counters it owns (by membership in the owning role).
CREATE TABLE fbf_saved_windows (
	counter text PRIMARY KEY,
	snapshot fbf NOT NULL,
	saved_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);

COMMENT ON TABLE fbf_saved_windows IS
	'snapshots of counters'' filters saved by fbf_counter_save, for fbf_counter_restore after a pg_dump and restore';
COMMENT ON COLUMN fbf_saved_windows.counter IS
	'the counter table, schema-qualified and quoted';
COMMENT ON COLUMN fbf_saved_windows.snapshot IS
	'fbf_snapshot of the counter when it was saved';
COMMENT ON COLUMN fbf_saved_windows.saved_at IS
	'when it was saved';

SELECT pg_catalog.pg_extension_config_dump('fbf_saved_windows', '');

ALTER TABLE fbf_saved_windows ENABLE ROW LEVEL SECURITY;

CREATE POLICY fbf_saved_windows_owner ON fbf_saved_windows
	USING (pg_catalog.pg_has_role((SELECT c.relowner FROM pg_catalog.pg_class c
								   WHERE c.oid = pg_catalog.to_regclass(counter)), 'USAGE'));

GRANT SELECT, INSERT, UPDATE, DELETE ON fbf_saved_windows TO PUBLIC;

CREATE FUNCTION fbf_counter_save(counter regclass DEFAULT NULL)
	RETURNS integer
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	AS $fn$
DECLARE
	one regclass := counter;
	r record;
	saved integer := 0;
BEGIN
	IF one IS NOT NULL AND NOT pg_catalog.pg_has_role(
			(SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = one), 'USAGE') THEN
		RAISE EXCEPTION 'must be owner of table %', one
			USING ERRCODE = 'insufficient_privilege';
	END IF;
	FOR r IN
		SELECT c.oid::pg_catalog.regclass AS rel,
			   pg_catalog.format('%I.%I', n.nspname, c.relname) AS name
		FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE (one IS NULL OR c.oid = one)
		  AND c.relpersistence <> 't'
		  AND pg_catalog.pg_has_role(c.relowner, 'USAGE')
		  AND EXISTS (SELECT FROM pg_catalog.pg_index i
					  JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
					  JOIN pg_catalog.pg_am a ON a.oid = ic.relam
					  WHERE i.indrelid = c.oid AND i.indisvalid
						AND a.amname = 'fbf_filter')
		ORDER BY 2
	LOOP
		INSERT INTO @extschema@.fbf_saved_windows AS w (counter, snapshot, saved_at)
		VALUES (r.name, @extschema@.fbf_snapshot(r.rel), pg_catalog.clock_timestamp())
		ON CONFLICT ON CONSTRAINT fbf_saved_windows_pkey DO UPDATE
			SET snapshot = EXCLUDED.snapshot, saved_at = EXCLUDED.saved_at;
		saved := saved + 1;
	END LOOP;
	IF one IS NOT NULL AND saved = 0 THEN
		RAISE EXCEPTION '"%" is not a counter table', one
			USING ERRCODE = 'wrong_object_type',
				  HINT = 'Create counter tables with fbf_create_counter_table().';
	END IF;
	RETURN saved;
END
$fn$;

COMMENT ON FUNCTION fbf_counter_save(regclass) IS
	'save the snapshot of a counter (NULL: of every counter the user owns) in fbf_saved_windows, for pg_dump; returns the number saved';

CREATE FUNCTION fbf_counter_restore(OUT counter text, OUT saved_at timestamptz,
									OUT outcome text)
	RETURNS SETOF record
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	AS $fn$
DECLARE
	r record;
	rel regclass;
BEGIN
	FOR r IN
		SELECT w.counter, w.snapshot, w.saved_at
		FROM @extschema@.fbf_saved_windows w
		ORDER BY w.counter
	LOOP
		counter := r.counter;
		saved_at := r.saved_at;
		rel := pg_catalog.to_regclass(r.counter);
		IF rel IS NULL THEN
			outcome := 'no such table';
		ELSE
			BEGIN
				outcome := @extschema@.fbf_counter_load(rel, r.snapshot);
			EXCEPTION
				WHEN object_not_in_prerequisite_state OR invalid_parameter_value OR
					 program_limit_exceeded OR wrong_object_type THEN
					outcome := 'refused: ' || SQLERRM;
			END;
		END IF;
		RETURN NEXT;
	END LOOP;
END
$fn$;

COMMENT ON FUNCTION fbf_counter_restore() IS
	'load every saved snapshot the user may see into its counter (after a restore); one row per snapshot with the outcome';
