-- The statement that commits on its own, as the node of its shard receives
-- it: a read of the shard table grouped by the empty set, one row whatever
-- the table holds, planned as its target alone (no scan planned). Here on
-- a local counter table, which is what a shard is on its node.
SET client_min_messages = warning;
SELECT fbf_create_counter_table('placed', retention => '5 min') IS NOT NULL AS created;
RESET client_min_messages;
CREATE VIEW placed_index_locks AS
	SELECT count(*) AS index_locks FROM pg_locks l JOIN pg_index i ON i.indexrelid = l.relation
	 WHERE i.indrelid = 'placed'::regclass AND l.pid = pg_backend_pid();

-- the plan is a Result, and planning it opened none of the table's indexes
-- (once the backend knows the table: fbf's first look at it opens them)
EXPLAIN (COSTS OFF)
SELECT fbf_increment_on_placement(fbf_outside_transaction_block('placed'), 'k', 1::bigint, 1, 1)
  FROM placed WHERE key = 'k' AND shard < 0 GROUP BY ();
BEGIN;
EXPLAIN (COSTS OFF)
SELECT fbf_increment_on_placement(fbf_outside_transaction_block('placed'), 'k', 1::bigint, 1, 1)
  FROM placed WHERE key = 'k' AND shard < 0 GROUP BY ();
SELECT * FROM placed_index_locks;
COMMIT;
-- a claim's form: the twin's result subscripted
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

DROP VIEW placed_index_locks;
DROP TABLE placed;
DROP ROLE regress_fbf_placed;
