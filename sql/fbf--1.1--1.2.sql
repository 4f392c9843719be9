/* sql/fbf--1.1--1.2.sql: from 1.1 to 1.2 (ALTER EXTENSION fbf UPDATE) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fbf UPDATE TO '1.2'" to load this file. \quit

-- 1.2 hardens the extension against hostile roles: each section below
-- names what it changes.

-- fbf_counter_restore: a row it cannot load (a malformed name, a counter
-- the caller does not own) is reported as refused, and the other rows are
-- loaded; it used to abort the whole restore.
CREATE OR REPLACE FUNCTION fbf_counter_restore(saved regclass,
									OUT name text, OUT saved_at timestamptz, OUT outcome text)
	RETURNS SETOF record
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	AS $fn$
DECLARE
	r record;
	rel regclass;
BEGIN
	FOR r IN EXECUTE pg_catalog.format(
		'SELECT name, snapshot, saved_at FROM %s ORDER BY name, saved_at', saved)
	LOOP
		name := r.name;
		saved_at := r.saved_at;
		-- each row on its own: a row refused (a malformed name, a counter
		-- of another owner, a snapshot that does not fit) is reported and
		-- the next is loaded; failures of the session (a deadlock, a
		-- cancel, out of memory) still end the restore
		BEGIN
			rel := pg_catalog.to_regclass(r.name);
			IF rel IS NULL THEN
				outcome := 'no such table';
			ELSIF r.snapshot IS NULL THEN
				outcome := 'refused: the row has no snapshot';
			ELSE
				outcome := @extschema@.fbf_counter_load(rel, r.snapshot);
			END IF;
		EXCEPTION
			WHEN syntax_error_or_access_rule_violation OR data_exception OR
				 object_not_in_prerequisite_state OR program_limit_exceeded OR
				 feature_not_supported THEN
				outcome := 'refused: ' || SQLERRM;
		END;
		RETURN NEXT;
	END LOOP;
END
$fn$;

COMMENT ON FUNCTION fbf_counter_restore(regclass) IS
	'load every snapshot of a table filled from fbf_counter_save (name, snapshot, saved_at) into its counter or dedup table; one row each, with the outcome (a row refused is reported, and the others are loaded)';
