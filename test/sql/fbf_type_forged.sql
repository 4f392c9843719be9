--
-- fbf values that are not what a function expects: a cuckoo window's
-- snapshot where a Bloom filter is read, aggregate states of a user's
-- making (INITCOND, a moving aggregate's inverse function, a compressed
-- value from a table), shapes that do not match.  Every function taking an
-- fbf checks the value's kind, header and size first: each case is a clean
-- error (or a correct answer), never a crash.  Then a fuzz round feeds
-- mutated values of both kinds through every function and aggregate that
-- takes one.
--
\set VERBOSITY terse
\set SHOW_CONTEXT never

-- an unprivileged role: TEMP is all it takes to make an aggregate
CREATE ROLE regress_fbf_forger;
SET ROLE regress_fbf_forger;

-- n little-endian bytes of v
CREATE FUNCTION pg_temp.le(v bigint, n int) RETURNS bytea LANGUAGE sql AS $$
	SELECT string_agg(set_byte('\x00'::bytea, 0, ((v >> (8 * i)) & 255)::int), ''::bytea ORDER BY i)
	FROM generate_series(0, n - 1) i $$;

-- the text of an empty cuckoo window snapshot (format version 2, kind 1)
-- of one block of nbuckets buckets of fp-bit fingerprints
CREATE FUNCTION pg_temp.cuckoo_text(fp int, nbuckets int, nlive int DEFAULT 2) RETURNS text
LANGUAGE sql AS $$
	SELECT '\x' || encode('\x4642460002'::bytea || pg_temp.le(1, 1) || pg_temp.le(fp, 1) ||
		pg_temp.le(nlive, 1) || pg_temp.le(nbuckets, 4) || pg_temp.le(1, 4) || pg_temp.le(0, 8) ||
		pg_temp.le(nlive - 1, 8) || pg_temp.le(0, 8) ||
		(SELECT string_agg(pg_temp.le((i < nlive)::int, 4), ''::bytea ORDER BY i)
		 FROM generate_series(0, 15) i) ||
		decode(repeat('00', 128 + ((72 + (nbuckets * (12 + 4 * fp) + 7) / 8 + 16 + 7) / 8) * 8), 'hex'),
		'hex') $$;

-- a valid value: read as a Bloom filter's header, its fields would say
-- nbits = 12, nhashes = 1000, nfilters = 0
SELECT i.nbits, i.nhashes, i.npast, i.nlive, i.nparts
FROM fbf_info(pg_temp.cuckoo_text(12, 1000)::fbf) i;

-- 1. INITCOND a cuckoo snapshot: refused (0A000), whatever the arguments
DO $$ BEGIN
	EXECUTE format('CREATE AGGREGATE pg_temp.forged_init(text, int, int, int) '
				   '(SFUNC = fbf_agg_trans, STYPE = fbf, INITCOND = %L)',
				   pg_temp.cuckoo_text(12, 1000));
END $$;
SELECT pg_temp.forged_init('x', 12, 1000, -2);
\echo :SQLSTATE
SELECT pg_temp.forged_init(NULL, 12, 1000, -2);
\echo :SQLSTATE
SELECT pg_temp.forged_init('x', 64, 1, 1);
\echo :SQLSTATE

-- 2. a moving aggregate whose inverse function returns a cuckoo snapshot
CREATE FUNCTION pg_temp.forged_inv(s fbf, e text, nbits int, nhashes int, npast int)
RETURNS fbf LANGUAGE plpgsql AS $$
BEGIN
	RETURN pg_temp.cuckoo_text(12, 1000)::fbf;
END $$;
CREATE AGGREGATE pg_temp.forged_moving(text, int, int, int) (
	SFUNC = fbf_agg_trans, STYPE = fbf,
	MSFUNC = fbf_agg_trans, MINVFUNC = pg_temp.forged_inv, MSTYPE = fbf);
-- (rows 1 and 2 make a state of a valid shape; row 3 states the shape the
-- snapshot's fields would give, after the inverse function returned it)
SELECT pg_temp.forged_moving(g::text, CASE WHEN g < 3 THEN 64 ELSE 12 END,
							 CASE WHEN g < 3 THEN 1 ELSE 1000 END,
							 CASE WHEN g < 3 THEN 1 ELSE -2 END)
	   OVER (ORDER BY g ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
FROM generate_series(1, 3) g;
\echo :SQLSTATE

-- 3. the inverse returns a Bloom filter of another shape: 22023
CREATE OR REPLACE FUNCTION pg_temp.forged_inv(s fbf, e text, nbits int, nhashes int, npast int)
RETURNS fbf LANGUAGE sql AS $$ SELECT fbf_create(128, 33 - nhashes, npast + 1) $$;
SELECT fbf_info(pg_temp.forged_moving(g::text, 64, 2, 1) OVER (ROWS BETWEEN 1 PRECEDING AND CURRENT ROW))
FROM generate_series(1, 3) g;
\echo :SQLSTATE

-- 4. the inverse returns a value stored compressed in a table: read as the
-- value it is (detoasted), so the window gives what the plain value gives
CREATE TEMP TABLE kept (f fbf);
ALTER TABLE kept ALTER f SET STORAGE main;
INSERT INTO kept SELECT fbf_add(fbf_create(65536, 4, 1), 'kept');
SELECT pg_column_compression(f) IS NOT NULL AS compressed FROM kept;
CREATE OR REPLACE FUNCTION pg_temp.forged_inv(s fbf, e text, nbits int, nhashes int, npast int)
RETURNS fbf LANGUAGE sql AS $$ SELECT f FROM pg_temp.kept $$;
SELECT g, fbf_contains(w, 'kept') AS has_kept, fbf_contains(w, g::text) AS has_own,
	   (fbf_info(w)).counts
FROM (SELECT g, pg_temp.forged_moving(g::text, 65536, 4, 1)
				OVER (ORDER BY g ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS w
	  FROM generate_series(1, 3) g) s;

-- 5. mismatched shapes in INITCOND: 22023; a Bloom filter of the right
-- shape, partitioned, is a state like any other
DO $$ BEGIN
	EXECUTE format('CREATE AGGREGATE pg_temp.init_shape(text, int, int, int) '
				   '(SFUNC = fbf_agg_trans, STYPE = fbf, INITCOND = %L)',
				   fbf_create(64, 1, 1, 2)::text);
END $$;
SELECT (fbf_info(pg_temp.init_shape(e, 64, 1, 1))).counts FROM (VALUES ('a'), ('b')) v(e);
SELECT pg_temp.init_shape('a', 64, 2, 1);
\echo :SQLSTATE
SELECT pg_temp.init_shape('a', 128, 1, 1);
\echo :SQLSTATE
SELECT pg_temp.init_shape('a', 64, 1, 2);
\echo :SQLSTATE

-- 6. Bloom values with forged header fields never become values: the
-- input function refuses them (22P02) when the aggregate is created
CREATE FUNCTION pg_temp.forge(field_offset int, bytes bytea) RETURNS text LANGUAGE sql AS $$
	SELECT '\x' || encode(overlay(fbf_send(fbf_create(64, 1, 1, 2)) PLACING bytes
								  FROM field_offset + 1 FOR length(bytes)), 'hex') $$;
DO $$
DECLARE
	forged record;
BEGIN
	FOR forged IN
		SELECT * FROM (VALUES ('nhashes 200', pg_temp.forge(5, '\xc8')),
							  ('nhashes 0', pg_temp.forge(5, '\x00')),
							  ('nfilters 0', pg_temp.forge(6, '\x0000')),
							  ('nfilters 65', pg_temp.forge(6, '\x4100')),
							  ('nbits 2^31', pg_temp.forge(8, '\x00000080')),
							  ('nlive 9', pg_temp.forge(12, '\x0900')),
							  ('nparts 0', pg_temp.forge(16, '\x00000000')),
							  ('nparts 3', pg_temp.forge(16, '\x03000000')),
							  ('epoch -1', pg_temp.forge(24, '\xffffffffffffffff')),
							  ('version 2', pg_temp.forge(4, '\x02'))) AS f(what, t)
	LOOP
		BEGIN
			EXECUTE format('CREATE AGGREGATE pg_temp.forged_header(text, int, int, int) '
						   '(SFUNC = fbf_agg_trans, STYPE = fbf, INITCOND = %L)', forged.t);
			RAISE NOTICE '%: accepted', forged.what;
		EXCEPTION WHEN OTHERS THEN
			RAISE NOTICE '%: %', forged.what, SQLSTATE;
		END;
	END LOOP;
END $$;

-- 7. every function of Bloom filters refuses a cuckoo snapshot (0A000);
-- those that read both kinds read it
CREATE TEMP TABLE ck AS SELECT pg_temp.cuckoo_text(13, 3, 3)::fbf AS v;
SELECT fbf_add(v, 'x'::text) FROM ck;
\echo :SQLSTATE
SELECT fbf_add(v, '\x01'::bytea) FROM ck;
\echo :SQLSTATE
SELECT fbf_add(v, 1::bigint) FROM ck;
\echo :SQLSTATE
SELECT fbf_add(v, ARRAY['x']) FROM ck;
\echo :SQLSTATE
SELECT fbf_add(v, ARRAY['\x01'::bytea]) FROM ck;
\echo :SQLSTATE
SELECT fbf_add(v, ARRAY[1::bigint]) FROM ck;
\echo :SQLSTATE
SELECT fbf_refresh(v, 2) FROM ck;
\echo :SQLSTATE
SELECT fbf_resize(v, 2) FROM ck;
\echo :SQLSTATE
SELECT fbf_union(fbf_create(64, 1), v) FROM ck;
\echo :SQLSTATE
SELECT fbf_union(v, fbf_create(64, 1)) FROM ck;
\echo :SQLSTATE
SELECT fbf_contains(v, 'x'::text) AS t, fbf_contains(v, '\x01'::bytea) AS b,
	   fbf_contains(v, 1::bigint) AS i, fbf_estimated_fpp(v) AS fpp,
	   (fbf_info(v)).npast, v::text = pg_temp.cuckoo_text(13, 3, 3) AS out,
	   fbf_send(v) = decode(substr(pg_temp.cuckoo_text(13, 3, 3), 3), 'hex') AS send
FROM ck;

RESET ROLE;

-- 8. fuzz: mutations (bit flips, byte and field edits) of valid values of
-- both kinds, seeded; each one the input function accepts goes through
-- every function and aggregate taking an fbf, each call in a subtransaction.
-- A call returns or raises one of the errors of a sound value; a crash
-- would end the test here.
SELECT setseed(0.2323);
SELECT fbf_create_counter_table('forged_bloom', retention => '1 min', expected_rate => 10,
								shards => 1) IS NOT NULL AS created;
SELECT fbf_create_counter_table('forged_cuckoo', retention => '1 min', expected_rate => 10,
								shards => 1, filter => 'cuckoo') IS NOT NULL AS created;
SELECT count(*) FILTER (WHERE idempotent_increment('forged_cuckoo', 1, g, 1)) AS applied
FROM generate_series(1, 20) g;

CREATE TABLE fuzz_seeds (b bytea, header int);
INSERT INTO fuzz_seeds
SELECT fbf_send(f), 40
FROM (VALUES (fbf_add(fbf_create(64, 1), 'x')),
			 (fbf_refresh(fbf_add(fbf_add(fbf_create(200, 3, 2), 1), 2))),
			 (fbf_add(fbf_create(64, 32, 1, 2), ARRAY[1, 2, 3]::bigint[]))) AS v(f);
INSERT INTO fuzz_seeds
SELECT decode(substr(pg_temp.cuckoo_text(12, 2), 3), 'hex'), 232
UNION ALL SELECT decode(substr(pg_temp.cuckoo_text(27, 3, 16), 3), 'hex'), 232
UNION ALL SELECT fbf_send(fbf_snapshot('forged_cuckoo')), 232;

-- 1 to 3 edits: a bit flipped, a byte, a header byte or a 32-bit header
-- field set to an edge value
CREATE FUNCTION fuzz_mutate(b bytea, header int) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
	pos int;
	edge int;
BEGIN
	FOR i IN 1..1 + floor(random() * 3)::int LOOP
		pos := floor(random() * length(b))::int;
		edge := (ARRAY[0, 1, 2, 3, 15, 16, 17, 32, 33, 63, 64, 65, 127, 128, 255])[1 + floor(random() * 15)::int];
		CASE floor(random() * 4)::int
			WHEN 0 THEN b := set_byte(b, pos, get_byte(b, pos) # (1 << floor(random() * 8)::int));
			WHEN 1 THEN b := set_byte(b, pos, floor(random() * 256)::int);
			WHEN 2 THEN b := set_byte(b, floor(random() * header)::int, edge);
			ELSE
				pos := 4 * floor(random() * header / 4)::int;
				b := overlay(b PLACING pg_temp.le(edge, 4) FROM pos + 1 FOR 4);
		END CASE;
	END LOOP;
	RETURN b;
END $$;

CREATE TABLE fuzz_state (f fbf);
CREATE FUNCTION fuzz_inverse(s fbf, e text, nbits int, nhashes int, npast int)
RETURNS fbf LANGUAGE sql AS $$ SELECT f FROM fuzz_state $$;
CREATE AGGREGATE fuzz_moving(text, int, int, int) (
	SFUNC = fbf_agg_trans, STYPE = fbf,
	MSFUNC = fbf_agg_trans, MINVFUNC = fuzz_inverse, MSTYPE = fbf);
CREATE AGGREGATE fuzz_combined(fbf) (SFUNC = fbf_union, STYPE = fbf);

CREATE TABLE fuzz_outcomes (kind text, fn text, state text);
DO $$
DECLARE
	seed record;
	t text;
	v fbf;
	kind text;
	shape text;
	calls text[] := ARRAY[
		'fbf_out', 'SELECT fbf_out($1)',
		'fbf_send', 'SELECT fbf_send($1)',
		'fbf_add(text)', 'SELECT fbf_add($1, ''e''::text)',
		'fbf_add(bytea)', 'SELECT fbf_add($1, ''\x01''::bytea)',
		'fbf_add(bigint)', 'SELECT fbf_add($1, 7::bigint)',
		'fbf_add(text[])', 'SELECT fbf_add($1, ARRAY[''a'', NULL, ''b''])',
		'fbf_add(bytea[])', 'SELECT fbf_add($1, ARRAY[''\x02''::bytea])',
		'fbf_add(bigint[])', 'SELECT fbf_add($1, ARRAY[1, 2, 3]::bigint[])',
		'fbf_contains(text)', 'SELECT fbf_contains($1, ''e''::text, ''paired'')',
		'fbf_contains(bytea)', 'SELECT fbf_contains($1, ''\x01''::bytea, ''simple'')',
		'fbf_contains(bigint)', 'SELECT fbf_contains($1, 7::bigint)',
		'fbf_refresh', 'SELECT fbf_refresh($1, 3)',
		'fbf_resize', 'SELECT fbf_resize($1, 5)',
		'fbf_union', 'SELECT fbf_union($1, $1)',
		'fbf_union(other)', 'SELECT fbf_union(fbf_refresh($1), $1)',
		'fbf_estimated_fpp', 'SELECT fbf_estimated_fpp($1, ''optimized'')',
		'fbf_info', 'SELECT fbf_info($1)',
		'fuzz_combined', 'SELECT fuzz_combined(f) FROM (VALUES ($1), ($1)) v(f)',
		'fbf_counter_load(bloom)', 'SELECT fbf_counter_load(''forged_bloom'', $1)',
		'fbf_counter_load(cuckoo)', 'SELECT fbf_counter_load(''forged_cuckoo'', $1)'];
BEGIN
	FOR i IN 1..240 LOOP
		SELECT * INTO seed FROM fuzz_seeds OFFSET i % 6 LIMIT 1;
		t := '\x' || encode(fuzz_mutate(seed.b, seed.header), 'hex');
		BEGIN
			v := t::fbf;
		EXCEPTION WHEN invalid_text_representation THEN
			INSERT INTO fuzz_outcomes VALUES ('-', 'fbf_in', SQLSTATE);
			CONTINUE;
		END;
		kind := CASE WHEN get_byte(fbf_send(v), 4) = 2 THEN 'cuckoo' ELSE 'bloom' END;
		INSERT INTO fuzz_outcomes VALUES (kind, 'fbf_in', '00000');
		FOR c IN 1..array_length(calls, 1) BY 2 LOOP
			BEGIN
				EXECUTE calls[c + 1] USING v;
				INSERT INTO fuzz_outcomes VALUES (kind, calls[c], '00000');
				-- a load is undone: the next value meets the same counters
				IF calls[c] LIKE 'fbf_counter_load%' THEN
					RAISE SQLSTATE 'P0004';
				END IF;
			EXCEPTION WHEN assert_failure THEN
				NULL;
			WHEN OTHERS THEN
				INSERT INTO fuzz_outcomes VALUES (kind, calls[c], SQLSTATE);
			END;
		END LOOP;

		-- the aggregates: the value as INITCOND, and as what a moving
		-- aggregate's inverse returns, with the shape it states (if any)
		SELECT format('%s, %s, %s', i.nbits, coalesce(i.nhashes, 1), i.npast)
		INTO shape FROM fbf_info(v) i;
		BEGIN
			EXECUTE format('CREATE OR REPLACE AGGREGATE fuzz_init(text, int, int, int) '
						   '(SFUNC = fbf_agg_trans, STYPE = fbf, INITCOND = %L)', t);
			EXECUTE format('SELECT fuzz_init(e, %s) FROM (VALUES (''a''), (NULL), (''b'')) v(e)', shape);
			INSERT INTO fuzz_outcomes VALUES (kind, 'INITCOND', '00000');
		EXCEPTION WHEN OTHERS THEN
			INSERT INTO fuzz_outcomes VALUES (kind, 'INITCOND', SQLSTATE);
		END;
		TRUNCATE fuzz_state;
		INSERT INTO fuzz_state VALUES (v);
		BEGIN
			EXECUTE format('SELECT fuzz_moving(g::text, %s) OVER (ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) '
						   'FROM generate_series(1, 4) g', shape);
			INSERT INTO fuzz_outcomes VALUES (kind, 'MINVFUNC', '00000');
		EXCEPTION WHEN OTHERS THEN
			INSERT INTO fuzz_outcomes VALUES (kind, 'MINVFUNC', SQLSTATE);
		END;
	END LOOP;
END $$;

-- mutated values were refused, and accepted, of both kinds
SELECT kind, state, count(*) > 0 AS seen FROM fuzz_outcomes WHERE fn = 'fbf_in'
GROUP BY 1, 2 ORDER BY 1, 2;
-- every call returned or raised the clean error of its case: 0A000 (a
-- cuckoo snapshot where a Bloom filter is read), 22023 (shapes,
-- arguments), 54000 (limits), 55000
-- (a cuckoo window that holds operations); never XX001 (a value's
-- check failing) or an internal error
SELECT kind, fn, count(*) > 0 AS ran,
	   bool_and(state IN ('00000', '0A000', '22023', '54000', '55000')) AS clean
FROM fuzz_outcomes WHERE kind <> '-'
GROUP BY 1, 2 ORDER BY 1, 2;
SELECT DISTINCT kind, fn, state FROM fuzz_outcomes
WHERE state NOT IN ('00000', '0A000', '22023', '54000', '55000', '22P02');
SELECT DISTINCT state FROM fuzz_outcomes ORDER BY 1;

DROP AGGREGATE fuzz_init(text, int, int, int);
DROP AGGREGATE fuzz_moving(text, int, int, int);
DROP AGGREGATE fuzz_combined(fbf);
DROP FUNCTION fuzz_inverse(fbf, text, int, int, int);
DROP FUNCTION fuzz_mutate(bytea, int);
DROP TABLE fuzz_outcomes, fuzz_state, fuzz_seeds, forged_bloom, forged_cuckoo;
DROP OWNED BY regress_fbf_forger;
DROP ROLE regress_fbf_forger;
