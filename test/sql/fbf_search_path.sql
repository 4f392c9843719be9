--
-- search_path: no function of the extension runs an operator or a function
-- that another role put on the caller's search_path.
--
-- A role that may create objects in a schema on a superuser's search_path
-- (public before PostgreSQL 15, or any schema the superuser puts first)
-- creates operators and functions that shadow pg_catalog's for every type
-- the extension's queries use; each records that it ran.  A superuser then
-- calls every SQL-visible function of the extension: none may run.
--
\set SHOW_CONTEXT never

-- Every function of the extension not written in C runs with search_path =
-- pg_catalog, pg_temp, or has a SQL-standard body (BEGIN ATOMIC), bound when
-- created to pg_catalog's operators and functions and the extension's own.
CREATE VIEW sp_functions AS
	SELECT p.oid, p.oid::regprocedure AS fn, l.lanname, p.prokind, p.proconfig,
		   p.prosqlbody IS NOT NULL AS bound
	FROM pg_proc p
	JOIN pg_language l ON l.oid = p.prolang
	JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
	JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'fbf';
SELECT fn AS runs_with_callers_search_path FROM sp_functions
WHERE lanname NOT IN ('c', 'internal')
  AND NOT (bound OR coalesce(proconfig, '{}') @> ARRAY['search_path=pg_catalog, pg_temp'])
ORDER BY fn::text;
SELECT lanname, bound, proconfig, count(*) FROM sp_functions
WHERE lanname NOT IN ('c', 'internal') GROUP BY 1, 2, 3 ORDER BY 1, 2;
-- what the bound bodies use: pg_catalog's and the extension's objects only
SELECT f.fn, pg_describe_object(d.refclassid, d.refobjid, 0) AS foreign_object
FROM sp_functions f
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = f.oid AND d.deptype = 'n'
WHERE f.bound AND d.refclassid <> 'pg_namespace'::regclass
  AND NOT (d.refclassid = 'pg_proc'::regclass AND
		   (d.refobjid IN (SELECT oid FROM sp_functions) OR
			(SELECT pronamespace FROM pg_proc WHERE oid = d.refobjid) = 'pg_catalog'::regnamespace))
  AND NOT (d.refclassid = 'pg_operator'::regclass AND
		   (SELECT oprnamespace FROM pg_operator WHERE oid = d.refobjid) = 'pg_catalog'::regnamespace)
  AND NOT (d.refclassid = 'pg_type'::regclass AND
		   (SELECT typnamespace FROM pg_type WHERE oid = d.refobjid) = 'pg_catalog'::regnamespace)
  AND NOT (d.refclassid = 'pg_class'::regclass AND
		   (SELECT relnamespace FROM pg_class WHERE oid = d.refobjid) = 'pg_catalog'::regnamespace)
ORDER BY f.fn::text, 2;

------------------------------------------------------------------------
-- The hostile role and its objects
------------------------------------------------------------------------

CREATE ROLE fbf_sp_hostile;
-- public writable by all, as before PostgreSQL 15 (and after pg_upgrade)
GRANT CREATE ON SCHEMA public TO PUBLIC;
CREATE SCHEMA fbf_sp_hostile AUTHORIZATION fbf_sp_hostile;
SET ROLE fbf_sp_hostile;
SET search_path = pg_catalog;

-- fired counts every hostile call; a sequence, so that a call inside a
-- statement that fails later counts too
CREATE SEQUENCE fbf_sp_hostile.fired;
GRANT USAGE ON SCHEMA fbf_sp_hostile TO PUBLIC;
GRANT USAGE, UPDATE ON SEQUENCE fbf_sp_hostile.fired TO PUBLIC;
-- (the hostile functions run on search_path = pg_catalog themselves, not
-- to call one another)
CREATE FUNCTION fbf_sp_hostile.fire(what text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
	PERFORM pg_catalog.nextval('fbf_sp_hostile.fired');
	IF pg_catalog.current_setting('fbf_sp.quiet', true) IS DISTINCT FROM 'on' THEN
		RAISE NOTICE 'hostile % ran as %', what, current_user;
	END IF;
END $$;

-- Operators: each computes what pg_catalog's would, after firing.  In
-- public and in fbf_sp_hostile, for every operator name and pair of types
-- the extension's queries use (and more).
DO $$
DECLARE
	num text[] := ARRAY['smallint', 'integer', 'bigint', 'numeric', 'real', 'double precision'];
	same text[] := ARRAY['oid', 'regclass', 'text', 'name', '"char"', 'boolean', 'interval',
						 'timestamp with time zone', 'jsonb', 'bytea', 'uuid', 'text[]', 'bigint[]'];
	pairs text[] := '{}';		-- {op, left, right} flattened
	l text;
	r text;
	op text;
	res text;
	schema text;
	n integer := 0;
	i integer;
BEGIN
	FOREACH l IN ARRAY num LOOP
		FOREACH r IN ARRAY num LOOP
			FOREACH op IN ARRAY ARRAY['=', '<>', '<', '>', '<=', '>=', '+', '-', '*', '/'] LOOP
				pairs := pairs || ARRAY[op, l, r];
			END LOOP;
		END LOOP;
	END LOOP;
	FOREACH l IN ARRAY same LOOP
		FOREACH op IN ARRAY ARRAY['=', '<>', '<', '>', '<=', '>='] LOOP
			pairs := pairs || ARRAY[op, l, l];
		END LOOP;
	END LOOP;
	FOREACH op IN ARRAY ARRAY['=', '<>'] LOOP
		pairs := pairs || ARRAY[op, 'oid', 'regclass'] || ARRAY[op, 'regclass', 'oid']
			|| ARRAY[op, 'text', 'name'] || ARRAY[op, 'name', 'text'];
	END LOOP;
	pairs := pairs
		|| ARRAY['||', 'text', 'text'] || ARRAY['||', 'text[]', 'text[]'] || ARRAY['||', 'bytea', 'bytea']
		|| ARRAY['~~', 'text', 'text'] || ARRAY['!~~', 'text', 'text']
		|| ARRAY['->>', 'jsonb', 'text'] || ARRAY['->', 'jsonb', 'text'] || ARRAY['-', 'jsonb', 'text']
		|| ARRAY['@>', 'text[]', 'text[]'] || ARRAY['&&', 'text[]', 'text[]']
		|| ARRAY['*', 'interval', 'double precision'] || ARRAY['/', 'interval', 'double precision']
		|| ARRAY['+', 'interval', 'interval'] || ARRAY['-', 'interval', 'interval']
		|| ARRAY['+', 'timestamp with time zone', 'interval']
		|| ARRAY['-', 'timestamp with time zone', 'interval']
		|| ARRAY['-', 'timestamp with time zone', 'timestamp with time zone'];
	FOR i IN 1 .. pg_catalog.array_length(pairs, 1) / 3 LOOP
		op := pairs[3 * i - 2];
		l := pairs[3 * i - 1];
		r := pairs[3 * i];
		EXECUTE pg_catalog.format('SELECT pg_catalog.pg_typeof(NULL::%s OPERATOR(pg_catalog.%s) NULL::%s)::text',
								  l, op, r) INTO res;
		FOREACH schema IN ARRAY ARRAY['public', 'fbf_sp_hostile'] LOOP
			n := n + 1;
			EXECUTE pg_catalog.format(
				'CREATE FUNCTION %I.fbf_sp_op_%s(%s, %s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog AS %L',
				schema, n, l, r, res,
				pg_catalog.format('BEGIN PERFORM fbf_sp_hostile.fire(%L); RETURN $1 OPERATOR(pg_catalog.%s) $2; END',
								  pg_catalog.format('operator %s.%s(%s, %s)', schema, op, l, r), op));
			EXECUTE pg_catalog.format('CREATE OPERATOR %I.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %I.fbf_sp_op_%s)',
									  schema, op, l, r, schema, n);
		END LOOP;
	END LOOP;
END $$;

-- Functions: every signature of pg_catalog's functions of these names that
-- a SQL or PL/pgSQL function can have, in both schemas again.
DO $$
DECLARE
	p record;
	schema text;
	args text;
BEGIN
	FOR p IN
		SELECT f.proname, f.pronargs, f.proretset,
			   pg_catalog.pg_get_function_arguments(f.oid) AS identity,
			   pg_catalog.format_type(f.prorettype, NULL) AS result
		FROM pg_catalog.pg_proc f
		WHERE f.pronamespace = 'pg_catalog'::regnamespace AND f.prokind = 'f'
		  AND f.proallargtypes IS NULL AND f.provariadic = 0
		  AND f.proname = ANY (ARRAY['parse_ident', 'array_length', 'array_to_string', 'quote_ident',
			  'ceil', 'date_part', 'current_setting', 'format', 'left', 'pg_has_role', 'to_regclass',
			  'unnest', 'clock_timestamp', 'row_to_json', 'jsonb_populate_record', 'current_schema',
			  'lower', 'set_config', 'nextval', 'array_fill', 'now', 'length', 'substr', 'md5',
			  'quote_literal', 'coalesce', 'greatest', 'least', 'count', 'sum', 'to_json', 'int8',
			  'int4', 'text', 'regclass', 'obj_description', 'has_table_privilege'])
		  AND NOT (f.proargtypes::oid[] && ARRAY['internal', 'cstring', '"any"']::regtype[]::oid[])
		  AND f.prorettype NOT IN ('internal'::regtype, 'cstring'::regtype)
	LOOP
		SELECT pg_catalog.string_agg('$' || g, ', ') INTO args FROM pg_catalog.generate_series(1, p.pronargs) g;
		FOREACH schema IN ARRAY ARRAY['public', 'fbf_sp_hostile'] LOOP
			EXECUTE pg_catalog.format(
				'CREATE FUNCTION %I.%I(%s) RETURNS %s %s LANGUAGE plpgsql SET search_path = pg_catalog AS %L',
				schema, p.proname, p.identity, CASE WHEN p.proretset THEN 'SETOF' ELSE '' END, p.result,
				pg_catalog.format('BEGIN PERFORM fbf_sp_hostile.fire(%L); RETURN %s pg_catalog.%I(%s); END',
								  pg_catalog.format('function %s.%s(%s)', schema, p.proname, p.identity),
								  CASE WHEN p.proretset THEN 'QUERY SELECT * FROM' ELSE '' END,
								  p.proname, COALESCE(args, '')));
		END LOOP;
	END LOOP;
END $$;
RESET search_path;
RESET ROLE;

-- how many times a hostile operator or function ran
CREATE VIEW sp_fired AS
	SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS fired FROM fbf_sp_hostile.fired;

-- The probe: with fbf_sp_hostile ahead of pg_catalog, the parser chooses
-- every one of its operators over pg_catalog's; with public alone (and
-- pg_catalog implicitly first), those of the pairs of types pg_catalog has
-- no operator for, such as oid = regclass or double precision * integer.
CREATE TABLE sp_probe (path text, operators bigint, chosen bigint);
SET fbf_sp.quiet = on;
DO $$
DECLARE
	o record;
	path text;
	before bigint;
BEGIN
	FOREACH path IN ARRAY ARRAY['fbf_sp_hostile, pg_catalog', 'public'] LOOP
		SELECT fired INTO before FROM public.sp_fired;
		FOR o IN SELECT pg_catalog.format_type(oprleft, NULL) AS l, oprname,
						pg_catalog.format_type(oprright, NULL) AS r
				 FROM pg_catalog.pg_operator
				 WHERE oprnamespace = pg_catalog.split_part(path, ',', 1)::regnamespace
		LOOP
			PERFORM pg_catalog.set_config('search_path', path, false);
			EXECUTE pg_catalog.format('SELECT NULL::%s %s NULL::%s', o.l, o.oprname, o.r);
			PERFORM pg_catalog.set_config('search_path', 'pg_catalog', false);
		END LOOP;
		INSERT INTO public.sp_probe
			SELECT path, count(*), (SELECT fired FROM public.sp_fired) - before
			FROM pg_catalog.pg_operator
			WHERE oprnamespace = pg_catalog.split_part(path, ',', 1)::regnamespace;
	END LOOP;
END $$;
RESET search_path;
SELECT path, operators > 400 AS many, chosen = operators AS all_chosen,
	   chosen > 20 AS some_chosen
FROM sp_probe ORDER BY 1;
ALTER SEQUENCE fbf_sp_hostile.fired RESTART;
SET search_path = fbf_sp_hostile, pg_catalog;
SELECT 1 AS probe FROM (SELECT parse_ident('a.b'), array_length(ARRAY[1], 1), quote_ident('a'),
							   "left"('abc', 1)) p;
RESET search_path;
SELECT fired AS functions_chosen FROM sp_fired;
RESET fbf_sp.quiet;
ALTER SEQUENCE fbf_sp_hostile.fired RESTART;

------------------------------------------------------------------------
-- A superuser calls every function of the extension
------------------------------------------------------------------------

-- run under a hostile search_path: (function, call), in order; calls
-- depend on the objects earlier ones create
CREATE FUNCTION sp_keep() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $$ BEGIN RETURN NEW; END $$;
CREATE TABLE sp_calls (ord serial, fn text, call text);
INSERT INTO sp_calls (fn, call) VALUES
	-- the fbf type
	('fbf_create(integer,integer,integer,integer)', 'SELECT fbf_create(64, 2, 1, 1)'),
	('fbf_create(interval,double precision,double precision)', 'SELECT fbf_create(''1 min'', 0.01, 10)'),
	('fbf_out(fbf)', 'SELECT fbf_out(fbf_create(64, 2))'),
	('fbf_in(cstring)', 'SELECT fbf_in(fbf_out(fbf_create(64, 2)))'),
	('fbf_send(fbf)', 'SELECT fbf_send(fbf_create(64, 2))'),
	('fbf_recv(internal)', NULL),	-- binary input only: an internal argument
	('fbf_add(fbf,text)', 'SELECT fbf_add(fbf_create(64, 2), ''a''::text)'),
	('fbf_add(fbf,bytea)', 'SELECT fbf_add(fbf_create(64, 2), ''\x01''::bytea)'),
	('fbf_add(fbf,bigint)', 'SELECT fbf_add(fbf_create(64, 2), 1::bigint)'),
	('fbf_add(fbf,bigint[])', 'SELECT fbf_add(fbf_create(64, 2), ARRAY[1, 2]::bigint[])'),
	('fbf_add(fbf,text[])', 'SELECT fbf_add(fbf_create(64, 2), ARRAY[''a'', ''b''])'),
	('fbf_add(fbf,bytea[])', 'SELECT fbf_add(fbf_create(64, 2), ARRAY[''\x01''::bytea])'),
	('fbf_contains(fbf,text,text)', 'SELECT fbf_contains(fbf_create(64, 2), ''a''::text, ''paired'')'),
	('fbf_contains(fbf,bytea,text)', 'SELECT fbf_contains(fbf_create(64, 2), ''\x01''::bytea)'),
	('fbf_contains(fbf,bigint,text)', 'SELECT fbf_contains(fbf_create(64, 2), 1::bigint, ''simple'')'),
	('fbf_refresh(fbf,integer)', 'SELECT fbf_refresh(fbf_create(64, 2, 3), 2)'),
	('fbf_resize(fbf,integer)', 'SELECT fbf_resize(fbf_create(64, 2, 3), 5)'),
	('fbf_union(fbf,fbf)', 'SELECT fbf_union(fbf_create(64, 2), fbf_create(64, 2))'),
	('fbf_estimated_fpp(fbf,text)', 'SELECT fbf_estimated_fpp(fbf_create(64, 2))'),
	('fbf_info(fbf)', 'SELECT fbf_info(fbf_create(64, 2))'),
	-- (fbf_agg_trans: only in an aggregate, fbf_agg's)
	('fbf_agg(text,integer,integer,integer)', 'SELECT fbf_agg(x, 64, 2, 1) FROM (VALUES (''a''::text)) v(x)'),
	('fbf_agg(bytea,integer,integer,integer)', 'SELECT fbf_agg(x, 64, 2, 1) FROM (VALUES (''\x01''::bytea)) v(x)'),
	('fbf_agg(bigint,integer,integer,integer)', 'SELECT fbf_agg(x, 64, 2, 1) FROM (VALUES (1::bigint)) v(x)'),
	('fbf_agg_trans(fbf,text,integer,integer,integer)', 'SELECT fbf_agg(x, 64, 2, 1) FROM (VALUES (''b''::text)) v(x)'),
	('fbf_agg_trans(fbf,bytea,integer,integer,integer)', 'SELECT fbf_agg(x, 64, 2, 1) FROM (VALUES (''\x02''::bytea)) v(x)'),
	('fbf_agg_trans(fbf,bigint,integer,integer,integer)', 'SELECT fbf_agg(x, 64, 2, 1) FROM (VALUES (2::bigint)) v(x)'),
	-- counters (fbf_filter_handler: the window indexes)
	('fbf_create_counter_table(text,interval,double precision,double precision,integer,integer,integer,integer,text,integer)',
	 'SELECT fbf_create_counter_table(''likes'', retention => ''10 min'', expected_rate => 100)'),
	('fbf_filter_handler(internal)',
	 'SELECT fbf_create_counter_table(''cuckoo_likes'', ''10 min'', 0.01, 100, 4, filter => ''cuckoo'')'),
	('fbf_create_window(text,text,interval,double precision,double precision,integer,integer,integer,integer,text,integer)',
	 'SELECT fbf_create_window(''counter'', pg_catalog.format(''%I.shaped'', pg_catalog.current_schema()), ''10 min'', NULL, 100, 4, 1024, 3, 2, ''bloom'', NULL)'),
	('idempotent_increment(regclass,bigint,bigint,bigint)', 'SELECT idempotent_increment(''likes'', 1::bigint, 1, 1)'),
	('idempotent_increment(regclass,text,bigint,bigint)', 'SELECT idempotent_increment(''likes'', ''c''::text, 1, 1)'),
	('idempotent_increment(regclass,uuid,bigint,bigint)', 'SELECT idempotent_increment(''likes'', ''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11''::uuid, 1, 1)'),
	('idempotent_increment(regclass,text,bigint,bigint,bigint)', 'SELECT idempotent_increment(''likes'', ''k'', 1::bigint, 1, 1)'),
	('idempotent_increment(regclass,text,text,bigint,bigint)', 'SELECT idempotent_increment(''cuckoo_likes'', ''k'', ''c''::text, 1, 1)'),
	('idempotent_increment(regclass,text,uuid,bigint,bigint)', 'SELECT idempotent_increment(''shaped'', ''k'', ''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11''::uuid, 1, 1)'),
	('idempotent_increment_outcome(regclass,bigint,bigint,bigint)', 'SELECT idempotent_increment_outcome(''likes'', 1::bigint, 2, 1)'),
	('idempotent_increment_outcome(regclass,text,bigint,bigint)', 'SELECT idempotent_increment_outcome(''likes'', ''c''::text, 2, 1)'),
	('idempotent_increment_outcome(regclass,uuid,bigint,bigint)', 'SELECT idempotent_increment_outcome(''likes'', ''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11''::uuid, 2, 1)'),
	('idempotent_increment_outcome(regclass,text,bigint,bigint,bigint)', 'SELECT idempotent_increment_outcome(''likes'', ''k'', 1::bigint, 2, 1)'),
	('idempotent_increment_outcome(regclass,text,text,bigint,bigint)', 'SELECT idempotent_increment_outcome(''cuckoo_likes'', ''k'', ''c''::text, 2, 1)'),
	('idempotent_increment_outcome(regclass,text,uuid,bigint,bigint)', 'SELECT idempotent_increment_outcome(''shaped'', ''k'', ''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11''::uuid, 2, 1)'),
	('idempotent_increment(regclass,bigint[],bigint[],bigint[])', 'SELECT idempotent_increment(''likes'', ARRAY[1, 1]::bigint[], ARRAY[3, 4]::bigint[], ARRAY[1, 1]::bigint[])'),
	('idempotent_increment(regclass,text[],bigint[],bigint[])', 'SELECT idempotent_increment(''likes'', ARRAY[''c'']::text[], ARRAY[3]::bigint[], ARRAY[1]::bigint[])'),
	('idempotent_increment(regclass,uuid[],bigint[],bigint[])', 'SELECT idempotent_increment(''likes'', ARRAY[''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'']::uuid[], ARRAY[3]::bigint[], ARRAY[1]::bigint[])'),
	('idempotent_increment(regclass,text,bigint[],bigint[],bigint[])', 'SELECT idempotent_increment(''likes'', ''new key'', ARRAY[1]::bigint[], ARRAY[3]::bigint[], ARRAY[1]::bigint[])'),
	('idempotent_increment(regclass,text,text[],bigint[],bigint[])', 'SELECT idempotent_increment(''cuckoo_likes'', ''new key'', ARRAY[''c'']::text[], ARRAY[3]::bigint[], ARRAY[1]::bigint[])'),
	('idempotent_increment(regclass,text,uuid[],bigint[],bigint[])', 'SELECT idempotent_increment(''shaped'', ''new key'', ARRAY[''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'']::uuid[], ARRAY[3]::bigint[], ARRAY[1]::bigint[])'),
	-- a trigger: increments go through the UPDATE of SPI, not the direct path
	('fbf_create_counter_table(text,interval,double precision,double precision,integer,integer,integer,integer,text,integer)',
	 'SELECT fbf_create_counter_table(''audited'', shards => 1)'),
	(NULL, 'CREATE TRIGGER keep BEFORE UPDATE ON audited FOR EACH ROW EXECUTE FUNCTION public.sp_keep()'),
	('idempotent_increment(regclass,text,bigint,bigint,bigint)', 'SELECT idempotent_increment(''audited'', ''k'', 1::bigint, 1, 1)'),
	('idempotent_increment(regclass,text,bigint,bigint,bigint)', 'SELECT idempotent_increment(''audited'', ''k'', 1::bigint, 2, 1)'),
	('idempotent_increment_outcome(regclass,text,bigint,bigint,bigint)', 'SELECT idempotent_increment_outcome(''audited'', ''k'', 1::bigint, 3, 1)'),
	('fbf_operation(bigint,bigint)', 'SELECT fbf_operation(1::bigint, 1)'),
	('fbf_operation(text,bigint)', 'SELECT fbf_operation(''c''::text, 1)'),
	('fbf_operation(uuid,bigint)', 'SELECT fbf_operation(''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11''::uuid, 1)'),
	('fbf_operation(text,bigint,bigint)', 'SELECT fbf_operation(''k'', 1::bigint, 1)'),
	('fbf_operation(text,text,bigint)', 'SELECT fbf_operation(''k'', ''c''::text, 1)'),
	('fbf_operation(text,uuid,bigint)', 'SELECT fbf_operation(''k'', ''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11''::uuid, 1)'),
	('fbf_counter_value(regclass,text)', 'SELECT fbf_counter_value(''likes'', ''k'')'),
	('fbf_snapshot(regclass)', 'SELECT fbf_snapshot(''likes'')'),
	('fbf_counter_maintain(regclass)', 'SELECT fbf_counter_maintain(''likes'')'),
	('fbf_counter_resize(regclass,integer)', 'SELECT fbf_counter_resize(''likes'', 16)'),
	('fbf_local_counter_stats()', 'SELECT count(*) FROM fbf_local_counter_stats()'),
	('fbf_counter_stats()', 'SELECT count(*) FROM fbf_counter_stats()'),
	('fbf_counter_stats()', 'SELECT count(*) FROM fbf_counter_stats'),	-- the view
	-- dedup tables
	('fbf_create_dedup(text,interval,double precision,double precision,integer,integer,integer,text,integer)',
	 'SELECT fbf_create_dedup(''inbox'', retention => ''10 min'', expected_rate => 100)'),
	('fbf_claim(regclass,bigint)', 'SELECT fbf_claim(''inbox'', 1::bigint)'),
	('fbf_claim(regclass,text)', 'SELECT fbf_claim(''inbox'', ''m''::text)'),
	('fbf_claim(regclass,bytea)', 'SELECT fbf_claim(''inbox'', ''\x01''::bytea)'),
	('fbf_claim(regclass,uuid)', 'SELECT fbf_claim(''inbox'', ''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11''::uuid)'),
	('fbf_claim(regclass,bigint,bigint)', 'SELECT fbf_claim(''inbox'', 1::bigint, 1)'),
	('fbf_claim(regclass,text,bigint)', 'SELECT fbf_claim(''inbox'', ''c''::text, 1)'),
	('fbf_claim(regclass,uuid,bigint)', 'SELECT fbf_claim(''inbox'', ''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11''::uuid, 1)'),
	('fbf_claim(regclass,bigint[])', 'SELECT fbf_claim(''inbox'', ARRAY[2, 3]::bigint[])'),
	('fbf_claim(regclass,text[])', 'SELECT fbf_claim(''inbox'', ARRAY[''n'', ''o''])'),
	('fbf_claim(regclass,bytea[])', 'SELECT fbf_claim(''inbox'', ARRAY[''\x02''::bytea])'),
	('fbf_claim(regclass,uuid[])', 'SELECT fbf_claim(''inbox'', ARRAY[''b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'']::uuid[])'),
	('fbf_claim(regclass,bigint[],bigint[])', 'SELECT fbf_claim(''inbox'', ARRAY[1]::bigint[], ARRAY[2]::bigint[])'),
	('fbf_claim(regclass,text[],bigint[])', 'SELECT fbf_claim(''inbox'', ARRAY[''c'']::text[], ARRAY[2]::bigint[])'),
	('fbf_claim(regclass,uuid[],bigint[])', 'SELECT fbf_claim(''inbox'', ARRAY[''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'']::uuid[], ARRAY[2]::bigint[])'),
	('fbf_claim_id(bigint)', 'SELECT fbf_claim_id(1::bigint)'),
	('fbf_claim_id(text)', 'SELECT fbf_claim_id(''m''::text)'),
	('fbf_claim_id(bytea)', 'SELECT fbf_claim_id(''\x01''::bytea)'),
	('fbf_claim_id(uuid)', 'SELECT fbf_claim_id(''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11''::uuid)'),
	('fbf_claim_id(bigint,bigint)', 'SELECT fbf_claim_id(1::bigint, 1)'),
	('fbf_claim_id(text,bigint)', 'SELECT fbf_claim_id(''c''::text, 1)'),
	('fbf_claim_id(uuid,bigint)', 'SELECT fbf_claim_id(''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11''::uuid, 1)'),
	('fbf_dedup_stats()', 'SELECT count(*) FROM fbf_dedup_stats()'),
	('fbf_dedup_stats()', 'SELECT count(*) FROM fbf_dedup_stats'),	-- the view
	-- dump and restore
	('fbf_counter_load(regclass,fbf)', 'SELECT fbf_counter_load(''likes'', fbf_snapshot(''likes''))'),
	('fbf_counter_save(regclass)', 'SELECT count(*) FROM fbf_counter_save(''likes'')'),
	('fbf_counter_save(regclass)', 'SELECT count(*) FROM fbf_counter_save(''inbox'')'),
	('fbf_counter_save(regclass)', 'SELECT count(*) FROM fbf_counter_save(''pg_class'')'),	-- 42809
	('fbf_counter_save(regclass)', 'SELECT count(*) FROM fbf_counter_save()'),
	('fbf_counter_save(regclass)', 'CREATE TABLE saved AS SELECT * FROM fbf_counter_save(''likes'')'),
	('fbf_counter_restore(regclass)', 'SELECT count(*) FROM fbf_counter_restore(''saved'')'),
	-- the cuckoo index (cuckoo_handler: its creation and use)
	(NULL, 'CREATE TABLE items AS SELECT g AS id FROM pg_catalog.generate_series(1, 100) g'),
	('cuckoo_handler(internal)', 'CREATE INDEX items_id ON items USING cuckoo (id)'),
	('cuckoo_index_stats(regclass)', 'SELECT cuckoo_index_stats(''items_id'')'),
	('cuckoo_index_verify(regclass)', 'SELECT cuckoo_index_verify(''items_id'')'),
	-- Citus (not installed: each refuses, after its checks)
	('fbf_apply_on_placement(regclass,text,bigint[],bigint[],bigint[],boolean)',
	 'SELECT fbf_apply_on_placement(''likes'', ''k'', ARRAY[1]::bigint[], ARRAY[9]::bigint[], ARRAY[1]::bigint[], true)'),
	('fbf_apply_on_placement(regclass,text,text[],bigint[],bigint[],boolean)',
	 'SELECT fbf_apply_on_placement(''likes'', ''k'', ARRAY[''c'']::text[], ARRAY[9]::bigint[], ARRAY[1]::bigint[], true)'),
	('fbf_apply_on_placement(regclass,text,uuid[],bigint[],bigint[],boolean)',
	 'SELECT fbf_apply_on_placement(''likes'', ''k'', ARRAY[''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'']::uuid[], ARRAY[9]::bigint[], ARRAY[1]::bigint[], true)'),
	('fbf_increment_on_placement(regclass,text,bigint,bigint,bigint)',
	 'SELECT fbf_increment_on_placement(''likes'', ''k'', 1::bigint, 9, 1)'),
	('fbf_increment_on_placement(regclass,text,text,bigint,bigint)',
	 'SELECT fbf_increment_on_placement(''likes'', ''k'', ''c''::text, 9, 1)'),
	('fbf_increment_on_placement(regclass,text,uuid,bigint,bigint)',
	 'SELECT fbf_increment_on_placement(''likes'', ''k'', ''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11''::uuid, 9, 1)'),
	('fbf_increment_on_placement(regclass,text,bigint[],bigint[],bigint[])',
	 'SELECT fbf_increment_on_placement(''likes'', ''k'', ARRAY[1]::bigint[], ARRAY[9]::bigint[], ARRAY[1]::bigint[])'),
	('fbf_increment_on_placement(regclass,text,text[],bigint[],bigint[])',
	 'SELECT fbf_increment_on_placement(''likes'', ''k'', ARRAY[''c'']::text[], ARRAY[9]::bigint[], ARRAY[1]::bigint[])'),
	('fbf_increment_on_placement(regclass,text,uuid[],bigint[],bigint[])',
	 'SELECT fbf_increment_on_placement(''likes'', ''k'', ARRAY[''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'']::uuid[], ARRAY[9]::bigint[], ARRAY[1]::bigint[])'),
	('fbf_increment_outcome_on_placement(regclass,text,bigint,bigint,bigint)',
	 'SELECT fbf_increment_outcome_on_placement(''likes'', ''k'', 1::bigint, 9, 1)'),
	('fbf_increment_outcome_on_placement(regclass,text,text,bigint,bigint)',
	 'SELECT fbf_increment_outcome_on_placement(''likes'', ''k'', ''c''::text, 9, 1)'),
	('fbf_increment_outcome_on_placement(regclass,text,uuid,bigint,bigint)',
	 'SELECT fbf_increment_outcome_on_placement(''likes'', ''k'', ''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11''::uuid, 9, 1)'),
	('fbf_routing_key(text,text)', 'SELECT fbf_routing_key(''k'', ''idempotent_increment'')'),
	('fbf_outside_transaction_block(regclass)', 'SELECT fbf_outside_transaction_block(''likes'')'),
	('fbf_claim_anchor(anyelement)', 'SELECT fbf_claim_anchor(''m-1''::text)'),
	('fbf_claim_anchor(anyelement,bigint)', 'SELECT fbf_claim_anchor(7::bigint, 1)'),
	('fbf_distribute_counter(regclass,integer,text)', 'SELECT fbf_distribute_counter(''likes'', 4, ''cuckoo_likes'')'),
	('fbf_distribute_table(regclass,text,integer,text)', 'SELECT fbf_distribute_table(''likes'', ''counter'', 4, ''default'')'),
	('fbf_share_expected_rate(regclass,integer,text)',
	 'SELECT fbf_share_expected_rate(fbf_create_counter_table(''rated'', expected_rate => 8000), 4, ''default'')'),
	('fbf_copy_shard_window(text,integer,text,text,integer,text)',
	 'SELECT fbf_copy_shard_window(''localhost'', 1, ''likes'', ''localhost'', 1, ''likes'')'),
	('fbf_shard_window_stats(boolean)', 'SELECT count(*) FROM fbf_shard_window_stats(false)'),
	('fbf_local_shard_stats(boolean,integer[],name[],name[])',
	 'SELECT fbf_local_shard_stats(false, ''{1}'', ''{public}'', ''{likes}'')'),
	-- distributed dedup tables (not installed: each refuses, after its checks)
	('fbf_local_dedup_stats()', 'SELECT count(*) FROM fbf_local_dedup_stats()'),
	('fbf_claim_on_placement(regclass,integer,anyarray,bigint[])',
	 'SELECT fbf_claim_on_placement(''inbox'', 0, ARRAY[1]::bigint[], NULL)'),
	('fbf_claim_on_placement(regclass,integer,anyarray,bigint[])',
	 'SELECT fbf_claim_on_placement(''inbox'', 0, ARRAY[''c'']::text[], ARRAY[1]::bigint[])'),
	('fbf_claim_on_placement(regclass,anyelement)',
	 'SELECT fbf_claim_on_placement(''inbox'', 1::bigint)'),
	('fbf_claim_on_placement(regclass,anyelement,bigint)',
	 'SELECT fbf_claim_on_placement(''inbox'', ''c''::text, 1)'),
	('fbf_distribute_dedup(regclass,integer,text)', 'SELECT fbf_distribute_dedup(''inbox'', 4, ''cuckoo_likes'')'),
	('fbf_distribute_table(regclass,text,integer,text)', 'SELECT fbf_distribute_table(''inbox'', ''dedup'', 4, ''default'')');

-- every function of the extension is called above
SELECT fn AS not_called FROM sp_functions
WHERE oid NOT IN (SELECT to_regprocedure(fn) FROM sp_calls WHERE fn IS NOT NULL)
ORDER BY fn::text;
SELECT fn AS no_such_function FROM sp_calls WHERE fn IS NOT NULL AND to_regprocedure(fn) IS NULL;

-- Run each call twice, each time in a schema of its own, first on
-- search_path = <schema>, fbf_sp_hostile, pg_catalog, public (the hostile
-- schema ahead of pg_catalog), then on <schema>, public (public writable,
-- pg_catalog implicitly first).  Outcome: ok, or the error's SQLSTATE.
CREATE TABLE sp_outcomes (run integer, ord integer, outcome text);
CREATE SCHEMA sp_run1;
CREATE SCHEMA sp_run2;
DO $$
DECLARE
	paths text[] := ARRAY['sp_run1, fbf_sp_hostile, pg_catalog, public', 'sp_run2, public'];
	calls text[] := ARRAY(SELECT call FROM public.sp_calls ORDER BY ord);
	ords integer[] := ARRAY(SELECT ord FROM public.sp_calls ORDER BY ord);
	run integer;
	i integer;
	outcome text;
BEGIN
	FOR run IN 1 .. 2 LOOP
		FOR i IN 1 .. pg_catalog.array_length(calls, 1) LOOP
			CONTINUE WHEN calls[i] IS NULL;
			PERFORM pg_catalog.set_config('search_path', paths[run], false);
			BEGIN
				EXECUTE calls[i];
				outcome := 'ok';
			EXCEPTION WHEN OTHERS THEN
				outcome := SQLSTATE;
			END;
			PERFORM pg_catalog.set_config('search_path', 'pg_catalog', false);
			INSERT INTO public.sp_outcomes VALUES (run, ords[i], outcome);
		END LOOP;
	END LOOP;
END $$;
RESET search_path;

-- no hostile operator or function ran
SELECT fired AS hostile_calls FROM sp_fired;

-- the calls did their work: those that fail are the expected refusals
SELECT run, count(*) FILTER (WHERE outcome = 'ok') AS ok, count(*) AS calls
FROM sp_outcomes GROUP BY run ORDER BY run;
SELECT c.fn, o.outcome, count(*) AS runs
FROM sp_outcomes o JOIN sp_calls c USING (ord)
WHERE o.outcome <> 'ok' GROUP BY 1, 2 ORDER BY min(c.ord), 2;
-- created where CREATE TABLE would have put them
SELECT relnamespace::regnamespace, relname FROM pg_class
WHERE relname IN ('likes', 'cuckoo_likes', 'shaped', 'inbox', 'audited')
  AND relnamespace IN ('sp_run1'::regnamespace, 'sp_run2'::regnamespace)
ORDER BY relname, relnamespace::regnamespace::text;
-- fbf_share_expected_rate planned a table of 8000/s for one of 4 shards
SELECT relnamespace::regnamespace, o FROM pg_class, unnest(reloptions) o
WHERE relname = 'rated_fbf' AND o LIKE 'expected_rate=%'
  AND relnamespace IN ('sp_run1'::regnamespace, 'sp_run2'::regnamespace)
ORDER BY relnamespace::regnamespace::text;
SELECT fbf_counter_value('sp_run1.likes', '') AS run1, fbf_counter_value('sp_run2.likes', '') AS run2,
	   fbf_counter_value('sp_run1.audited', 'k') AS audited1, fbf_counter_value('sp_run2.audited', 'k') AS audited2;

-- an unqualified name and no schema to create in: 3F000, as CREATE TABLE
SET search_path = no_such_schema;
SELECT public.fbf_create_counter_table('nowhere');
RESET search_path;

DROP SCHEMA sp_run1, sp_run2 CASCADE;
DROP TABLE sp_calls, sp_outcomes, sp_probe;
DROP VIEW sp_fired, sp_functions;
DROP FUNCTION sp_keep();
DROP OWNED BY fbf_sp_hostile;
DROP ROLE fbf_sp_hostile;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
