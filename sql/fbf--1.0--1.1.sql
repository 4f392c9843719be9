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

-- The outcome on a retry: applied, and the key's value after the call.
CREATE FUNCTION idempotent_increment_outcome(counter regclass, client_id bigint, seq bigint, delta bigint,
	OUT applied boolean, OUT value bigint)
	AS 'MODULE_PATHNAME', 'fbf_increment_outcome_int8'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment_outcome(counter regclass, client_id text, seq bigint, delta bigint,
	OUT applied boolean, OUT value bigint)
	AS 'MODULE_PATHNAME', 'fbf_increment_outcome_text'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment_outcome(counter regclass, client_id uuid, seq bigint, delta bigint,
	OUT applied boolean, OUT value bigint)
	AS 'MODULE_PATHNAME', 'fbf_increment_outcome_uuid'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment_outcome(counter regclass, key text, client_id bigint, seq bigint, delta bigint,
	OUT applied boolean, OUT value bigint)
	AS 'MODULE_PATHNAME', 'fbf_increment_outcome_int8'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment_outcome(counter regclass, key text, client_id text, seq bigint, delta bigint,
	OUT applied boolean, OUT value bigint)
	AS 'MODULE_PATHNAME', 'fbf_increment_outcome_text'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment_outcome(counter regclass, key text, client_id uuid, seq bigint, delta bigint,
	OUT applied boolean, OUT value bigint)
	AS 'MODULE_PATHNAME', 'fbf_increment_outcome_uuid'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotent_increment_outcome(regclass, bigint, bigint, bigint) IS
	'idempotent_increment on the default key, and the key''s value after the call (applied or not)';
COMMENT ON FUNCTION idempotent_increment_outcome(regclass, text, bigint, bigint) IS
	'idempotent_increment on the default key, and the key''s value after the call (applied or not)';
COMMENT ON FUNCTION idempotent_increment_outcome(regclass, uuid, bigint, bigint) IS
	'idempotent_increment on the default key, and the key''s value after the call (applied or not)';
COMMENT ON FUNCTION idempotent_increment_outcome(regclass, text, bigint, bigint, bigint) IS
	'idempotent_increment on key, and the key''s value after the call (applied or not)';
COMMENT ON FUNCTION idempotent_increment_outcome(regclass, text, text, bigint, bigint) IS
	'idempotent_increment on key, and the key''s value after the call (applied or not)';
COMMENT ON FUNCTION idempotent_increment_outcome(regclass, text, uuid, bigint, bigint) IS
	'idempotent_increment on key, and the key''s value after the call (applied or not)';

-- Batches: operation i is (client_ids[i], seqs[i]) adding deltas[i].
CREATE FUNCTION idempotent_increment(counter regclass, client_ids bigint[], seqs bigint[], deltas bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_increment_batch_int8'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment(counter regclass, client_ids text[], seqs bigint[], deltas bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_increment_batch_text'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment(counter regclass, client_ids uuid[], seqs bigint[], deltas bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_increment_batch_uuid'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment(counter regclass, key text, client_ids bigint[], seqs bigint[], deltas bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_increment_batch_int8'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment(counter regclass, key text, client_ids text[], seqs bigint[], deltas bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_increment_batch_text'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idempotent_increment(counter regclass, key text, client_ids uuid[], seqs bigint[], deltas bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_increment_batch_uuid'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotent_increment(regclass, bigint[], bigint[], bigint[]) IS
	'a batch on the default key: operation i adds deltas[i] once per (client_ids[i], seqs[i]); element i is true if it applied';
COMMENT ON FUNCTION idempotent_increment(regclass, text[], bigint[], bigint[]) IS
	'a batch on the default key: operation i adds deltas[i] once per (client_ids[i], seqs[i]); element i is true if it applied';
COMMENT ON FUNCTION idempotent_increment(regclass, uuid[], bigint[], bigint[]) IS
	'a batch on the default key: operation i adds deltas[i] once per (client_ids[i], seqs[i]); element i is true if it applied';
COMMENT ON FUNCTION idempotent_increment(regclass, text, bigint[], bigint[], bigint[]) IS
	'a batch on key: operation i adds deltas[i] once per (client_ids[i], seqs[i]); element i is true if it applied';
COMMENT ON FUNCTION idempotent_increment(regclass, text, text[], bigint[], bigint[]) IS
	'a batch on key: operation i adds deltas[i] once per (client_ids[i], seqs[i]); element i is true if it applied';
COMMENT ON FUNCTION idempotent_increment(regclass, text, uuid[], bigint[], bigint[]) IS
	'a batch on key: operation i adds deltas[i] once per (client_ids[i], seqs[i]); element i is true if it applied';
