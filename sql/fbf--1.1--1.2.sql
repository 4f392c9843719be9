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

-- ---------------------------------------------------------------------
-- fbf_counter_save() skips what is not a plain table: an fbf_filter index
-- an older version let a materialized view or a partitioned table carry
-- made every save of the database fail.  (Such indexes can no longer be
-- created; the statistics and the worker skip those left.)
-- ---------------------------------------------------------------------
CREATE OR REPLACE FUNCTION fbf_counter_save(counter regclass DEFAULT NULL,
								 OUT name text, OUT snapshot fbf, OUT saved_at timestamptz)
	RETURNS SETOF record
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
			   pg_catalog.format('%I.%I', n.nspname, c.relname) AS relname
		FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE (one IS NULL OR c.oid = one)
		  AND c.relkind = 'r'
		  AND c.relpersistence <> 't'
		  AND pg_catalog.pg_has_role(c.relowner, 'USAGE')
		  AND EXISTS (SELECT FROM pg_catalog.pg_index i
					  JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
					  JOIN pg_catalog.pg_am a ON a.oid = ic.relam
					  WHERE i.indrelid = c.oid AND i.indisvalid
						AND a.amname = 'fbf_filter')
		ORDER BY 2
	LOOP
		name := r.relname;
		snapshot := @extschema@.fbf_snapshot(r.rel);
		saved_at := pg_catalog.clock_timestamp();
		saved := saved + 1;
		RETURN NEXT;
	END LOOP;
	IF one IS NOT NULL AND saved = 0 THEN
		RAISE EXCEPTION '"%" is not a counter or dedup table', one
			USING ERRCODE = 'wrong_object_type',
				  HINT = 'Create counter tables with fbf_create_counter_table() and dedup tables with fbf_create_dedup().';
	END IF;
END
$fn$;
