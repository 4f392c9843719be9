-- The statement that commits on its own, as the node of its shard receives
-- it: a read of the shard table grouped by the empty set, one row whatever
-- the table holds, planned as its target alone (no scan planned). Here on
-- a local counter table, which is what a shard is on its node.
SET client_min_messages = warning;
SELECT fbf_create_counter_table('placed', retention => '5 min') IS NOT NULL AS created;
RESET client_min_messages;
SELECT idempotent_increment('placed', 'k', 1, 1, 1), idempotent_increment('placed', 'j', 1, 1, 1);
-- planning a scan opens every index of the table; fbf's own look at the
-- table opens its primary key, so the window index tells them apart
CREATE VIEW placed_index_locks AS
	SELECT count(*) AS index_locks FROM pg_locks l JOIN pg_index i ON i.indexrelid = l.relation
	 WHERE i.indrelid = 'placed'::regclass AND NOT i.indisprimary AND l.pid = pg_backend_pid();

-- the plan is a Result, and planning it opened no index
BEGIN;
EXPLAIN (COSTS OFF)
SELECT fbf_increment_on_placement(fbf_outside_transaction_block('placed'), 'k', 1::bigint, 1, 1)
  FROM placed WHERE key = 'k' AND shard < 0 GROUP BY ();
SELECT * FROM placed_index_locks;
COMMIT;
-- a claim's form: the one-id twin's result, and the array twin's
-- subscripted (as a coordinator of an older library sends it)
BEGIN;
EXPLAIN (COSTS OFF)
SELECT fbf_claim_on_placement(fbf_outside_transaction_block('placed'), 1::bigint)
  FROM placed WHERE shard < 0 GROUP BY ();
SELECT * FROM placed_index_locks;
COMMIT;
BEGIN;
EXPLAIN (COSTS OFF)
SELECT (fbf_claim_on_placement(fbf_outside_transaction_block('placed'), 7, ARRAY[1::bigint], NULL))[1]
  FROM placed WHERE shard < 0 GROUP BY ();
SELECT * FROM placed_index_locks;
COMMIT;
-- a volatile qual: planned as written (the indexes opened to plan the scan)
BEGIN;
EXPLAIN (COSTS OFF)
SELECT fbf_increment_on_placement(fbf_outside_transaction_block('placed'), 'k', 1::bigint, 1, 1)
  FROM placed WHERE key = 'k' AND shard < 0 AND random() < 2 GROUP BY ();
SELECT * FROM placed_index_locks;
COMMIT;
-- without the guard, or with anything more, planned as written
BEGIN;
EXPLAIN (COSTS OFF)
SELECT fbf_increment_on_placement('placed', 'k', 1::bigint, 1, 1)
  FROM placed WHERE key = 'k' AND shard < 0 GROUP BY ();
SELECT * FROM placed_index_locks;
COMMIT;
BEGIN;
EXPLAIN (COSTS OFF)
SELECT fbf_increment_on_placement(fbf_outside_transaction_block('placed'), 'k', 1::bigint, 1, 1)
  FROM placed WHERE key = 'k' AND shard < 0 GROUP BY () HAVING true;
SELECT * FROM placed_index_locks;
COMMIT;
-- a table with inheritance children: planned as written (its children
-- locked, as planning the scan locks them)
CREATE TABLE placed_child () INHERITS (placed);
BEGIN;
EXPLAIN (COSTS OFF)
SELECT fbf_increment_on_placement(fbf_outside_transaction_block('placed'), 'k', 1::bigint, 1, 1)
  FROM placed WHERE key = 'k' AND shard < 0 GROUP BY ();
SELECT count(*) AS child_locks FROM pg_locks
 WHERE relation = 'placed_child'::regclass AND pid = pg_backend_pid();
COMMIT;
DROP TABLE placed_child;

-- the same rows and calls as the statement planned as written: one row,
-- the target evaluated once, whatever the quals; two empty grouping sets
-- are two rows (planned as written; GROUP BY (), () is one empty set)
CREATE FUNCTION placed_probe(t regclass, n int) RETURNS int LANGUAGE plpgsql
	AS $$BEGIN RAISE NOTICE 'probe % %', t, n; RETURN n; END$$;
SELECT placed_probe(fbf_outside_transaction_block('placed'), 1) FROM placed WHERE key = 'k' GROUP BY ();
SELECT placed_probe(fbf_outside_transaction_block('placed'), 2) FROM placed WHERE key = 'k' AND random() < 2 GROUP BY ();
SELECT placed_probe(fbf_outside_transaction_block('placed'), 3) FROM placed WHERE false GROUP BY ();
SELECT placed_probe(fbf_outside_transaction_block('placed'), 4) FROM placed GROUP BY GROUPING SETS ((), ());
SELECT (ARRAY[placed_probe(fbf_outside_transaction_block('placed'), 5)])[1] FROM placed WHERE key = 'j' GROUP BY ();
-- a generic plan, planned again after the table changes
SET plan_cache_mode = force_generic_plan;
PREPARE placed_read(text) AS
	SELECT placed_probe(fbf_outside_transaction_block('placed'), 6) FROM placed WHERE key = $1 GROUP BY ();
EXECUTE placed_read('k');
ALTER TABLE placed ADD COLUMN note text;
EXECUTE placed_read('k');
DEALLOCATE placed_read;
RESET plan_cache_mode;

-- the table is still the statement's: its SELECT privilege on the columns
-- the quals name is checked, and it is locked
CREATE ROLE regress_fbf_placed;
GRANT UPDATE ON placed TO regress_fbf_placed;
SET ROLE regress_fbf_placed;
EXPLAIN (COSTS OFF)
SELECT fbf_increment_on_placement(fbf_outside_transaction_block('placed'), 'k', 1::bigint, 1, 1)
  FROM placed WHERE key = 'k' AND shard < 0 GROUP BY ();
RESET ROLE;
BEGIN;
EXPLAIN (COSTS OFF)
SELECT fbf_increment_on_placement(fbf_outside_transaction_block('placed'), 'k', 1::bigint, 1, 1)
  FROM placed WHERE key = 'k' AND shard < 0 GROUP BY ();
SELECT mode FROM pg_locks WHERE relation = 'placed'::regclass AND pid = pg_backend_pid();
COMMIT;
-- run, it is the placement function's call: here, on a table Citus does
-- not distribute, its error
SELECT fbf_increment_on_placement(fbf_outside_transaction_block('placed'), 'k', 1::bigint, 1, 1)
  FROM placed WHERE key = 'k' AND shard < 0 GROUP BY ();

DROP FUNCTION placed_probe(regclass, int);
DROP VIEW placed_index_locks;
DROP TABLE placed;
DROP ROLE regress_fbf_placed;
