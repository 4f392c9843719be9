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
