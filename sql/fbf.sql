-- fbf: idempotent counters on Forgetful Bloom Filters.
-- Source of the install script (the Makefile copies it to fbf--<version>.sql).

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION fbf" to load this file. \quit

------------------------------------------------------------------------
-- The fbf type: a Forgetful Bloom Filter as a SQL value
------------------------------------------------------------------------

CREATE TYPE fbf;

CREATE FUNCTION fbf_in(cstring) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_in'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_out(fbf) RETURNS cstring
	AS 'MODULE_PATHNAME', 'fbf_out'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_recv(internal) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_recv'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_send(fbf) RETURNS bytea
	AS 'MODULE_PATHNAME', 'fbf_send'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE fbf (
	INPUT = fbf_in,
	OUTPUT = fbf_out,
	RECEIVE = fbf_recv,
	SEND = fbf_send,
	INTERNALLENGTH = VARIABLE,
	ALIGNMENT = double,
	STORAGE = external
);

COMMENT ON TYPE fbf IS
	'Forgetful Bloom Filter: a sliding window of Bloom filters (future, present, N past)';

-- Constructors

CREATE FUNCTION fbf_create(nbits integer, nhashes integer, npast integer DEFAULT 1,
						   nparts integer DEFAULT 1)
	RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_create_shape'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_create(integer, integer, integer, integer) IS
	'empty FBF of npast + 2 filters of nparts blocks of nbits bits, nhashes hash functions';

CREATE FUNCTION fbf_create(retention interval, target_fpp double precision,
						   rate double precision)
	RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_create_for'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_create(interval, double precision, double precision) IS
	'smallest empty FBF that remembers rate elements per second for retention under target_fpp';

-- Elements (text and bytea hash by their bytes; bigint by its 8 little-endian bytes)

CREATE FUNCTION fbf_add(filter fbf, element text) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_add_text'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_add(filter fbf, element bytea) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_add_text'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_add(filter fbf, element bigint) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_add_int8'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_add(filter fbf, elements bigint[]) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_add_array'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_add(filter fbf, elements text[]) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_add_array'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_add(filter fbf, elements bytea[]) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_add_array'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_add(fbf, bigint[]) IS 'the filter with every non-null element inserted, in order';
COMMENT ON FUNCTION fbf_add(fbf, text[]) IS 'the filter with every non-null element inserted, in order';
COMMENT ON FUNCTION fbf_add(fbf, bytea[]) IS 'the filter with every non-null element inserted, in order';
COMMENT ON FUNCTION fbf_add(fbf, text) IS 'the filter with element inserted (unless already present)';
COMMENT ON FUNCTION fbf_add(fbf, bytea) IS 'the filter with element inserted (unless already present)';
COMMENT ON FUNCTION fbf_add(fbf, bigint) IS 'the filter with element inserted (unless already present)';

CREATE FUNCTION fbf_contains(filter fbf, element text, "check" text DEFAULT 'optimized')
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_contains_text'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_contains(filter fbf, element bytea, "check" text DEFAULT 'optimized')
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_contains_text'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fbf_contains(filter fbf, element bigint, "check" text DEFAULT 'optimized')
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_contains_int8'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_contains(fbf, text, text) IS
	'true if element may be in the window (check: simple, optimized or paired)';
COMMENT ON FUNCTION fbf_contains(fbf, bytea, text) IS
	'true if element may be in the window (check: simple, optimized or paired)';
COMMENT ON FUNCTION fbf_contains(fbf, bigint, text) IS
	'true if element may be in the window (check: simple, optimized or paired)';

-- The window

CREATE FUNCTION fbf_refresh(filter fbf, times integer DEFAULT 1) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_refresh_n'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_refresh(fbf, integer) IS
	'the filter rotated times times: the oldest filter is dropped, an empty future added';

CREATE FUNCTION fbf_resize(filter fbf, npast integer) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_resize_past'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_resize(fbf, integer) IS
	'the filter with npast past filters: growing adds empty ones at the old end, shrinking forgets the oldest';

CREATE FUNCTION fbf_union(a fbf, b fbf) RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_union'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_union(fbf, fbf) IS
	'union of two same-shaped filters, aligned on the newer one''s window';

-- Inspection

CREATE FUNCTION fbf_estimated_fpp(filter fbf, "check" text DEFAULT 'optimized')
	RETURNS double precision
	AS 'MODULE_PATHNAME', 'fbf_estimated_fpp'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_estimated_fpp(fbf, text) IS
	'estimated false-positive probability of a membership check';

CREATE FUNCTION fbf_info(filter fbf,
						 OUT nbits integer,
						 OUT nhashes integer,
						 OUT npast integer,
						 OUT nlive integer,
						 OUT epoch bigint,
						 OUT period interval,
						 OUT counts bigint[],
						 OUT bytes bigint,
						 OUT estimated_fpp double precision,
						 OUT nparts integer)
	AS 'MODULE_PATHNAME', 'fbf_info'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fbf_info(fbf) IS
	'shape, window bookkeeping and per-filter element counts (newest first) of a filter';

-- The build aggregate

CREATE FUNCTION fbf_agg_trans(state fbf, element text, nbits integer,
							  nhashes integer, npast integer)
	RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_agg_trans_text'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION fbf_agg_trans(state fbf, element bytea, nbits integer,
							  nhashes integer, npast integer)
	RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_agg_trans_text'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION fbf_agg_trans(state fbf, element bigint, nbits integer,
							  nhashes integer, npast integer)
	RETURNS fbf
	AS 'MODULE_PATHNAME', 'fbf_agg_trans_int8'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION fbf_agg_trans(fbf, text, integer, integer, integer) IS 'transition function of fbf_agg';
COMMENT ON FUNCTION fbf_agg_trans(fbf, bytea, integer, integer, integer) IS 'transition function of fbf_agg';
COMMENT ON FUNCTION fbf_agg_trans(fbf, bigint, integer, integer, integer) IS 'transition function of fbf_agg';

CREATE AGGREGATE fbf_agg(element text, nbits integer, nhashes integer, npast integer) (
	SFUNC = fbf_agg_trans,
	STYPE = fbf,
	COMBINEFUNC = fbf_union,
	PARALLEL = SAFE
);

CREATE AGGREGATE fbf_agg(element bytea, nbits integer, nhashes integer, npast integer) (
	SFUNC = fbf_agg_trans,
	STYPE = fbf,
	COMBINEFUNC = fbf_union,
	PARALLEL = SAFE
);

CREATE AGGREGATE fbf_agg(element bigint, nbits integer, nhashes integer, npast integer) (
	SFUNC = fbf_agg_trans,
	STYPE = fbf,
	COMBINEFUNC = fbf_union,
	PARALLEL = SAFE
);

COMMENT ON AGGREGATE fbf_agg(text, integer, integer, integer) IS 'FBF holding every non-null element, all in the present window';
COMMENT ON AGGREGATE fbf_agg(bytea, integer, integer, integer) IS 'FBF holding every non-null element, all in the present window';
COMMENT ON AGGREGATE fbf_agg(bigint, integer, integer, integer) IS 'FBF holding every non-null element, all in the present window';
