/* sql/fbf--1.3--1.4.sql: from 1.3 to 1.4 (ALTER EXTENSION fbf UPDATE) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fbf UPDATE TO '1.4'" to load this file. \quit

-- 1.4 sends an increment on a counter distributed by Citus in one round
-- trip (docs/user-guide.md, "Scaling out with Citus"): the statement Citus
-- routes calls these twins of the front ends on the node of the key's
-- shard.  Update every node of the cluster (Citus propagates ALTER
-- EXTENSION to its workers).

-- The placement twins of idempotent_increment, idempotent_increment_outcome
-- and the batch form: the fast path of a counter distributed by Citus hands
-- Citus a statement that calls them on the node of the key's shard
-- (src/counter/counter_citus_plan.c), where they apply the operations to
-- the shard table, with the front ends' checks, messages and results.
-- Left executable by PUBLIC, as fbf_apply_on_placement is, for the same
-- reasons.
CREATE FUNCTION fbf_increment_on_placement(counter regclass, key text, client_id bigint, seq bigint, delta bigint)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_increment_on_placement_int8'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_increment_on_placement(counter regclass, key text, client_id text, seq bigint, delta bigint)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_increment_on_placement_text'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_increment_on_placement(counter regclass, key text, client_id uuid, seq bigint, delta bigint)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'fbf_increment_on_placement_uuid'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_increment_on_placement(counter regclass, key text, client_ids bigint[], seqs bigint[], deltas bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_increment_batch_on_placement_int8'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_increment_on_placement(counter regclass, key text, client_ids text[], seqs bigint[], deltas bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_increment_batch_on_placement_text'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_increment_on_placement(counter regclass, key text, client_ids uuid[], seqs bigint[], deltas bigint[])
	RETURNS boolean[]
	AS 'MODULE_PATHNAME', 'fbf_increment_batch_on_placement_uuid'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_increment_outcome_on_placement(counter regclass, key text, client_id bigint, seq bigint, delta bigint,
	OUT applied boolean, OUT value bigint)
	AS 'MODULE_PATHNAME', 'fbf_increment_outcome_on_placement_int8'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_increment_outcome_on_placement(counter regclass, key text, client_id text, seq bigint, delta bigint,
	OUT applied boolean, OUT value bigint)
	AS 'MODULE_PATHNAME', 'fbf_increment_outcome_on_placement_text'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fbf_increment_outcome_on_placement(counter regclass, key text, client_id uuid, seq bigint, delta bigint,
	OUT applied boolean, OUT value bigint)
	AS 'MODULE_PATHNAME', 'fbf_increment_outcome_on_placement_uuid'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION fbf_increment_on_placement(regclass, text, bigint, bigint, bigint) IS
	'idempotent_increment on the local shard of a distributed counter (internal: the Citus fast path calls it)';
COMMENT ON FUNCTION fbf_increment_on_placement(regclass, text, text, bigint, bigint) IS
	'idempotent_increment on the local shard of a distributed counter (internal: the Citus fast path calls it)';
COMMENT ON FUNCTION fbf_increment_on_placement(regclass, text, uuid, bigint, bigint) IS
	'idempotent_increment on the local shard of a distributed counter (internal: the Citus fast path calls it)';
COMMENT ON FUNCTION fbf_increment_on_placement(regclass, text, bigint[], bigint[], bigint[]) IS
	'a batch of idempotent_increment on the local shard of a distributed counter (internal: the Citus fast path calls it)';
COMMENT ON FUNCTION fbf_increment_on_placement(regclass, text, text[], bigint[], bigint[]) IS
	'a batch of idempotent_increment on the local shard of a distributed counter (internal: the Citus fast path calls it)';
COMMENT ON FUNCTION fbf_increment_on_placement(regclass, text, uuid[], bigint[], bigint[]) IS
	'a batch of idempotent_increment on the local shard of a distributed counter (internal: the Citus fast path calls it)';
COMMENT ON FUNCTION fbf_increment_outcome_on_placement(regclass, text, bigint, bigint, bigint) IS
	'idempotent_increment_outcome on the local shard of a distributed counter (internal: the Citus fast path calls it)';
COMMENT ON FUNCTION fbf_increment_outcome_on_placement(regclass, text, text, bigint, bigint) IS
	'idempotent_increment_outcome on the local shard of a distributed counter (internal: the Citus fast path calls it)';
COMMENT ON FUNCTION fbf_increment_outcome_on_placement(regclass, text, uuid, bigint, bigint) IS
	'idempotent_increment_outcome on the local shard of a distributed counter (internal: the Citus fast path calls it)';

-- The key by which Citus routes the fast path's statement: the key, or the
-- front end's error if it is NULL (src/counter/counter_citus_plan.c).
CREATE FUNCTION fbf_routing_key(key text, fname text) RETURNS text
	AS 'MODULE_PATHNAME', 'fbf_routing_key'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION fbf_routing_key(text, text) IS
	'the key by which a distributed counter''s increment is routed; error if NULL (internal: the Citus fast path calls it)';
