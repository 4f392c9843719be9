--
-- The fbf type: every error a user can cause, with its SQLSTATE.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
\set ON_ERROR_STOP 0

CREATE OR REPLACE FUNCTION sqlstate_of(query text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE query;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END $$;

-- shapes
SELECT fbf_create(63, 3);
SELECT fbf_create(1073741825, 3);
SELECT fbf_create(6250, 0);
SELECT fbf_create(6250, 33);
SELECT fbf_create(6250, 5, 0);
SELECT fbf_create(6250, 5, 63);
SELECT fbf_create(1073741824, 5, 10);
SELECT fbf_create(-1, 5);
SELECT fbf_create(64, 5, 1, 0);
SELECT fbf_create(64, 5, 1, 1048577);
SELECT fbf_union(fbf_create(64, 1, 1, 2), fbf_create(64, 1, 1, 3));
SELECT sqlstate_of('SELECT fbf_create(63, 3)');

-- workload-based constructor
SELECT fbf_create('0.5 s', 0.01, 10);
SELECT fbf_create('-1 min', 0.01, 10);
SELECT fbf_create('1 min'::interval, 0, 10);
SELECT fbf_create('1 min'::interval, 1, 10);
SELECT fbf_create('1 min'::interval, 'NaN', 10);
SELECT fbf_create('1 min', 0.01, -1);
SELECT fbf_create('1 min', 0.01, 'Infinity');
SELECT fbf_create('1 year', 1e-12, 1e9);

-- checks
SELECT fbf_contains(fbf_create(64, 1), 'x', 'fast');
SELECT fbf_estimated_fpp(fbf_create(64, 1), '');
SELECT sqlstate_of($q$SELECT fbf_contains(fbf_create(64, 1), 'x', 'fast')$q$);

-- window operations
SELECT fbf_refresh(fbf_create(64, 1), -1);
SELECT fbf_resize(fbf_create(64, 1), 0);
SELECT fbf_resize(fbf_create(64, 1), 63);

-- union of different shapes
SELECT fbf_union(fbf_create(64, 1), fbf_create(128, 1));
SELECT fbf_union(fbf_create(64, 1), fbf_create(64, 2));
SELECT fbf_union(fbf_create(64, 1, 1), fbf_create(64, 1, 2));
SELECT fbf_union(fbf_create('1 min', 0.01, 10), fbf_resize(fbf_create('1 min', 0.01, 10), 1));
SELECT sqlstate_of('SELECT fbf_union(fbf_create(64, 1), fbf_create(128, 1))');

-- aggregate
SELECT fbf_agg(x, 64, 1, 0) FROM (VALUES (1::bigint)) v(x);
SELECT fbf_agg(x, n, 1, 1) FROM (VALUES (1::bigint, 64), (2, 128)) v(x, n);
SELECT fbf_agg(x, NULL, 1, 1) FROM (VALUES (1::bigint)) v(x);
SELECT fbf_agg_trans(NULL, 1::bigint, 64, 1, 1);

-- text input
SELECT ''::fbf;
SELECT 'FBF'::fbf;
SELECT '\x'::fbf;
SELECT '\x4'::fbf;
SELECT '\x4642460g'::fbf;
SELECT '\x46424600'::fbf;
SELECT ' \x46424600'::fbf;
-- a valid value with one byte changed in each header field
CREATE TABLE good AS SELECT fbf_add(fbf_create(64, 1), 'x')::text AS t;
SELECT length(t) FROM good;
SELECT overlay(t placing '47' from 3 for 2)::fbf FROM good;  -- magic
SELECT overlay(t placing '03' from 11 for 2)::fbf FROM good; -- version
SELECT overlay(t placing '02' from 11 for 2)::fbf FROM good; -- version 2: a cuckoo window snapshot's
SELECT overlay(t placing '00' from 13 for 2)::fbf FROM good; -- nhashes
SELECT overlay(t placing '41' from 15 for 2)::fbf FROM good; -- nfilters
SELECT overlay(t placing '3f' from 19 for 2)::fbf FROM good; -- nbits
SELECT overlay(t placing 'ffff' from 23 for 4)::fbf FROM good; -- nbits huge
SELECT overlay(t placing '01' from 27 for 2)::fbf FROM good; -- nlive
SELECT overlay(t placing '01' from 31 for 2)::fbf FROM good; -- flags: keyed, no key
SELECT overlay(t placing '04' from 31 for 2)::fbf FROM good; -- flags: reserved
SELECT overlay(t placing '00' from 35 for 2)::fbf FROM good; -- nparts
SELECT overlay(t placing '01' from 43 for 2)::fbf FROM good; -- reserved
SELECT overlay(t placing '00' from 51 for 2)::fbf FROM good; -- epoch
SELECT overlay(t placing '80' from 81 for 2)::fbf FROM good; -- period sign
SELECT substr(t, 1, length(t) - 2)::fbf FROM good;            -- truncated
SELECT (t || '00')::fbf FROM good;                            -- trailing byte
SELECT overlay(t placing '00' from 3 + 2 * (40 + 16 + 8) for 2)::fbf FROM good; -- count
SELECT sqlstate_of($q$SELECT '\x46424600'::fbf$q$);

-- binary input: fbf_recv through COPY BINARY of a bytea column
CREATE TABLE raw (b bytea);
INSERT INTO raw SELECT fbf_send(fbf_add(fbf_create(64, 1), 'x'));
\set copyfile '/tmp/fbf_regress_errors.bin'
COPY raw TO :'copyfile' WITH (FORMAT binary);
CREATE TABLE typed (f fbf);
COPY typed FROM :'copyfile' WITH (FORMAT binary);
SELECT fbf_contains(f, 'x') FROM typed;
-- the same bytes with a bad version byte
UPDATE raw SET b = set_byte(b, 4, 9);
COPY raw TO :'copyfile' WITH (FORMAT binary);
COPY typed FROM :'copyfile' WITH (FORMAT binary);
-- truncated
UPDATE raw SET b = substr(set_byte(b, 4, 1), 1, 40);
COPY raw TO :'copyfile' WITH (FORMAT binary);
COPY typed FROM :'copyfile' WITH (FORMAT binary);
-- nothing was applied by the failed COPYs
SELECT count(*) FROM typed;
SELECT sqlstate_of(format('COPY typed FROM %L WITH (FORMAT binary)', :'copyfile'));
