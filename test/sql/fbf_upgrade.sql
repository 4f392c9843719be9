-- Upgrades: a database created with 1.0 and updated with ALTER EXTENSION
-- has exactly the objects, definitions and comments of a fresh install.
\set VERBOSITY terse
SET client_min_messages = warning;

CREATE FUNCTION fbf_objects() RETURNS TABLE (object text, definition text)
LANGUAGE sql AS $$
	SELECT pg_describe_object(d.classid, d.objid, 0),
		   coalesce((SELECT format('%s(%s) %s %s %s %s %s %s %s', p.prosrc,
								   pg_get_function_arguments(p.oid),
								   pg_get_function_result(p.oid), p.prokind,
								   p.provolatile, p.proisstrict, p.proparallel,
								   p.proconfig, pg_get_function_sqlbody(p.oid))
					 FROM pg_proc p
					 WHERE d.classid = 'pg_proc'::regclass AND p.oid = d.objid), '') ||
		   coalesce(' -- ' || obj_description(d.objid, d.classid::regclass::name), '')
	FROM pg_depend d
	JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
	WHERE e.extname = 'fbf' AND d.deptype = 'e'
$$;

DROP EXTENSION fbf CASCADE;
CREATE EXTENSION fbf VERSION '1.0';
SELECT extversion FROM pg_extension WHERE extname = 'fbf';
-- 1.0 has no keyed fbf_operation
SELECT count(*) FROM pg_proc WHERE proname = 'fbf_operation';
ALTER EXTENSION fbf UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'fbf';
CREATE TABLE updated AS SELECT * FROM fbf_objects();

DROP EXTENSION fbf;
CREATE EXTENSION fbf;
CREATE TABLE fresh AS SELECT * FROM fbf_objects();

-- nothing in one that is not in the other
SELECT 'only after update' AS side, object FROM (TABLE updated EXCEPT TABLE fresh) u
UNION ALL
SELECT 'only in fresh install', object FROM (TABLE fresh EXCEPT TABLE updated) f
ORDER BY 1, 2;
SELECT count(*) AS objects_compared FROM fresh;

-- the new functions are there
SELECT fbf_operation('post:1', 42, 1) <> fbf_operation(42, 1) AS key_counts,
	   fbf_operation('', 42, 1) = fbf_operation(42, 1) AS default_key_is_1_0;

DROP TABLE updated, fresh;
DROP FUNCTION fbf_objects();
