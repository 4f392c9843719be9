--
-- Dedup tables: fbf_claim returns true once per id within the retention,
-- with the counters' semantics (transactional, privileges), in single and
-- batch form; and every error a caller can cause, with its SQLSTATE.
--
\set SHOW_CONTEXT never

CREATE OR REPLACE FUNCTION sqlstate_of(query text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE query;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END $$;

SELECT fbf_create_dedup('inbox', retention => '1 min', expected_rate => 1000);
\d inbox
SELECT fbf_create_dedup('"Odd Schema-less"', retention => '1 min');

-- each id once; ids of different types are different claims
SELECT fbf_claim('inbox', 'msg-1') AS first, fbf_claim('inbox', 'msg-1') AS again;
SELECT fbf_claim('inbox', 'msg-1'::bytea) AS bytea_is_another_id,
	   fbf_claim('inbox', 'msg-1'::bytea) AS again;
SELECT fbf_claim('inbox', 42) AS bigint_id, fbf_claim('inbox', 42::bigint) AS again,
	   fbf_claim('inbox', '42') AS text_42_is_another_id;
SELECT fbf_claim('inbox', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid) AS uuid_id,
	   fbf_claim('inbox', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid) AS again;
SELECT fbf_claim('inbox', 7, 1) AS op, fbf_claim('inbox', 7, 1) AS again,
	   fbf_claim('inbox', 7, 2) AS next_seq, fbf_claim('inbox', '7', 1) AS text_client;
SELECT fbf_claim('"Odd Schema-less"', 'msg-1') AS other_table_other_window;

-- batches: answers in the ids' order, a repeated id claimed once (first)
SELECT fbf_claim('inbox', ARRAY['b1', 'b2', 'msg-1', 'b1', 'b3']);
SELECT fbf_claim('inbox', ARRAY['b1', 'b2', 'b3', 'b4']) AS retried;
SELECT fbf_claim('inbox', ARRAY[100, 101, 100]::bigint[]);
SELECT fbf_claim('inbox', ARRAY['\x01', '\x02']::bytea[]);
SELECT fbf_claim('inbox', ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
								 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12']::uuid[]);
SELECT fbf_claim('inbox', ARRAY[7, 7, 8]::bigint[], ARRAY[1, 3, 1]::bigint[]);
SELECT fbf_claim('inbox', ARRAY['u', 'u']::text[], ARRAY[1, 1]::bigint[]);
SELECT fbf_claim('inbox', '{}'::text[]) AS empty;
SELECT fbf_claim('inbox', ARRAY(SELECT 'many-' || g FROM generate_series(1, 1000) g)) =
	   array_fill(true, ARRAY[1000]) AS thousand_new;
SELECT fbf_claim('inbox', ARRAY(SELECT 'many-' || g FROM generate_series(1, 1000) g)) =
	   array_fill(false, ARRAY[1000]) AS thousand_seen;

-- a claim is transactional: rolled back, it is forgotten
BEGIN;
SELECT fbf_claim('inbox', 'tx-1') AS in_tx, fbf_claim('inbox', 'tx-1') AS again_in_tx;
ROLLBACK;
SELECT fbf_claim('inbox', 'tx-1') AS after_rollback;
BEGIN;
SELECT fbf_claim('inbox', 'sp-1');
SAVEPOINT s;
SELECT fbf_claim('inbox', ARRAY['sp-2', 'sp-1']);
ROLLBACK TO s;
SELECT fbf_claim('inbox', ARRAY['sp-2', 'sp-1']) AS after_savepoint_rollback;
COMMIT;
-- a batch that errors claims nothing
SELECT sqlstate_of($q$SELECT fbf_claim('inbox', ARRAY['err-1', NULL])$q$);
SELECT fbf_claim('inbox', 'err-1') AS not_claimed_by_the_failed_batch;

-- the window remembers the claims: fbf_claim_id names them
SELECT fbf_contains(fbf_snapshot('inbox'), fbf_claim_id('msg-1')) AS msg_1,
	   fbf_contains(fbf_snapshot('inbox'), fbf_claim_id(42)) AS id_42,
	   fbf_contains(fbf_snapshot('inbox'), fbf_claim_id(7, 3)) AS op_7_3,
	   fbf_contains(fbf_snapshot('inbox'), fbf_claim_id('never claimed')) AS never;
SELECT count(*) FILTER (WHERE fbf_contains(s, fbf_claim_id('never-' || g))) < 10 AS few_false_positives
  FROM fbf_snapshot('inbox') s, generate_series(1, 1000) g;
SELECT fbf_claim_id('a'), fbf_claim_id('a'::bytea), fbf_claim_id(1), fbf_claim_id(1, 2),
	   fbf_claim_id('1', 2);

-- statistics: claims and duplicates; dedups are not counters
SELECT dedup, claimed, duplicates, pending >= 0 AS has_pending
  FROM fbf_dedup_stats ORDER BY dedup::text;
SELECT count(*) AS dedups_among_counters FROM fbf_counter_stats
 WHERE counter IN ('inbox'::regclass, '"Odd Schema-less"'::regclass);
SELECT fbf_counter_maintain('inbox') IN ('grow', 'shrink', 'hold') AS maintained;
SELECT fbf_claim('inbox', 'msg-1') AS still_remembered_after_maintenance;

-- errors, each with its SQLSTATE; nothing is claimed
SELECT fbf_create_counter_table('dc', retention => '1 min', expected_rate => 10);
CREATE TABLE dplain (id text);
SELECT fbf_claim('no_such_table', 'x');
SELECT fbf_claim('dplain', 'x');
SELECT sqlstate_of($q$SELECT fbf_claim('dplain', 'x')$q$);
SELECT fbf_claim('dc', 'x');
SELECT sqlstate_of($q$SELECT fbf_claim('dc', 'x')$q$);
SELECT idempotent_increment('inbox', 1, 1, 1);
SELECT sqlstate_of($q$SELECT idempotent_increment('inbox', 1, 1, 1)$q$);
SELECT fbf_counter_value('inbox');
SELECT fbf_claim(NULL, 'x');
SELECT fbf_claim('inbox', NULL::text);
SELECT fbf_claim('inbox', NULL::bigint, 1);
SELECT fbf_claim('inbox', 1, NULL);
SELECT fbf_claim('inbox', NULL::text[]);
SELECT fbf_claim('inbox', ARRAY['x', NULL]);
SELECT sqlstate_of($q$SELECT fbf_claim('inbox', ARRAY['x', NULL])$q$);
SELECT fbf_claim('inbox', ARRAY[[1, 2], [3, 4]]::bigint[]);
SELECT sqlstate_of($q$SELECT fbf_claim('inbox', ARRAY[[1, 2], [3, 4]]::bigint[])$q$);
SELECT fbf_claim('inbox', ARRAY[1, 2]::bigint[], ARRAY[1]::bigint[]);
SELECT sqlstate_of($q$SELECT fbf_claim('inbox', ARRAY[1, 2]::bigint[], ARRAY[1]::bigint[])$q$);
-- more than the 4,194,304 ids a batch may have: refused from the array's
-- dimensions, before anything is read or allocated per id
SELECT fbf_claim('inbox', a) FROM (SELECT array_fill(1::bigint, ARRAY[4194305]) OFFSET 0) x(a);
SELECT sqlstate_of($q$SELECT fbf_claim('inbox', a, a)
					  FROM (SELECT array_fill(1::bigint, ARRAY[4194305]) OFFSET 0) x(a)$q$) AS over_limit_op_claims;
SELECT fbf_claim('inbox', ARRAY['x', 'y', 'z']) AS none_of_them_was_claimed;
BEGIN READ ONLY;
SELECT sqlstate_of($q$SELECT fbf_claim('inbox', 'ro')$q$);
ROLLBACK;
-- the table holds no rows
INSERT INTO inbox VALUES (1);
SELECT sqlstate_of($q$INSERT INTO inbox VALUES (1)$q$);
SELECT fbf_create_dedup('inbox');
SELECT sqlstate_of($q$SELECT fbf_create_dedup('inbox')$q$);
SELECT sqlstate_of($q$SELECT fbf_create_dedup('a.b.c')$q$);
SELECT sqlstate_of($q$SELECT fbf_create_dedup('d', retention => '0.5 s')$q$);
SELECT sqlstate_of($q$SELECT fbf_create_dedup('d', target_fpp => 0.9)$q$);
SELECT sqlstate_of($q$SELECT fbf_create_dedup('d', nbits => 1024)$q$);
SELECT sqlstate_of($q$SELECT fbf_create_dedup('d', filter => 'cukoo')$q$) AS bad_filter,
	   sqlstate_of($q$SELECT fbf_create_dedup('d', filter => 'cuckoo', nbits => 1024, nhashes => 2, npast => 2)$q$) AS cuckoo_shape;

-- privileges: INSERT on the table to claim, SELECT to read its window
CREATE ROLE fbf_dedup_reader;
CREATE ROLE fbf_dedup_claimer;
GRANT SELECT ON inbox TO fbf_dedup_reader;
GRANT INSERT ON inbox TO fbf_dedup_claimer;
SET ROLE fbf_dedup_reader;
SELECT fbf_claim('inbox', 'priv-1');
SELECT sqlstate_of($q$SELECT fbf_claim('inbox', 'priv-1')$q$);
SELECT fbf_contains(fbf_snapshot('inbox'), fbf_claim_id('msg-1')) AS reader_sees;
SELECT count(*) AS reader_stats_rows FROM fbf_dedup_stats WHERE dedup = 'inbox'::regclass;
SELECT fbf_counter_maintain('inbox');
RESET ROLE;
SET ROLE fbf_dedup_claimer;
SELECT fbf_claim('inbox', 'priv-1') AS claimer_claims, fbf_claim('inbox', 'priv-1') AS again;
SELECT fbf_snapshot('inbox');
SELECT count(*) AS claimer_stats_rows FROM fbf_dedup_stats;
RESET ROLE;
SELECT fbf_claim('inbox', 'priv-1') AS owner_sees_the_claim;

-- the anchor by which a distributed dedup table routes a claim: the same
-- for the same id, fbf_claim's errors for what it cannot claim
SELECT fbf_claim_anchor('m'::text) = fbf_claim_anchor('m'::text) AS anchor_is_stable,
	   fbf_claim_anchor(7::bigint, 1) = fbf_claim_anchor(7::bigint, 2) AS a_streams_claims_share_it;
SELECT sqlstate_of($$SELECT fbf_claim_anchor(1.5::numeric)$$) AS numeric_id,
	   sqlstate_of($$SELECT fbf_claim_anchor(ROW(1, 2))$$) AS record_id,
	   sqlstate_of($$SELECT fbf_claim_anchor('\x01'::bytea, 1)$$) AS bytea_client_id,
	   sqlstate_of($$SELECT fbf_claim_anchor(NULL::bigint)$$) AS null_id,
	   sqlstate_of($$SELECT fbf_claim_anchor(7::bigint, NULL)$$) AS null_seq;

DROP TABLE inbox, "Odd Schema-less", dc, dplain;
DROP ROLE fbf_dedup_reader, fbf_dedup_claimer;
DROP FUNCTION sqlstate_of(text);
