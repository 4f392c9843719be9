#!/bin/bash
# Small batches against chains that another transaction keeps long.
#
# While one transaction holds 300,000 claims in flight (a default dedup
# window's chains, ~44 pages each), other sessions claim in calls of 40
# ids: a call has about two operations per chain, too few to repay
# indexing a whole chain (FbfWindowHold, window_chain_index.c: a run
# indexes its chain from its 32nd operation on it), so batches must stay
# cheaper than single calls here too.  Prints the time of 8000 claims made
# as 200 calls of 40, as 8000 single calls, and both again with no chain
# long.  Not a test: a check of that cost by eye.
# Usage: PGHOST=... PGPORT=... bash test/bench/small_batch_long_chains.sh
set -e
psql -Atq -c "DROP TABLE IF EXISTS sblc" -c "SELECT fbf_create_dedup('sblc') IS NOT NULL" \
	-c "ALTER INDEX sblc_fbf SET (worker_maintenance = off)" -c "ALTER TABLE sblc SET (autovacuum_enabled = off)" \
	-c "CREATE OR REPLACE FUNCTION sblc_calls(base bigint, ncalls int, per int, single bool) RETURNS int
	LANGUAGE plpgsql AS \$\$
	DECLARE n int := 0; ids bigint[]; i bigint;
	BEGIN
	  FOR c IN 1..ncalls LOOP
	    ids := array(SELECT (base + c * per + g)::bigint FROM generate_series(1, per) g);
	    IF single THEN
	      FOREACH i IN ARRAY ids LOOP n := n + fbf_claim('sblc', i)::int; END LOOP;
	    ELSE
	      n := n + (SELECT count(*) FILTER (WHERE a) FROM unnest(fbf_claim('sblc', ids)) a);
	    END IF;
	  END LOOP;
	  RETURN n;
	END \$\$" > /dev/null
run() { psql -At -c '\timing on' -c "SELECT sblc_calls($1, 200, 40, false)" \
	-c "SELECT sblc_calls($2, 8000, 1, true)" | grep Time | sed "1s/^/$3 batches of 40: /;2s/^/$3 single calls:  /"; }
run 1000000 2000000 "short chains"
psql -Atq -c "BEGIN" -c "SELECT count(*) FROM unnest(fbf_claim('sblc', array(SELECT generate_series(90000001, 90300000)::bigint)))" \
	-c "SELECT pg_sleep(30)" -c "ROLLBACK" > /dev/null &
sleep 8
run 3000000 4000000 "long chains "
wait
psql -Atq -c "DROP TABLE sblc" -c "DROP FUNCTION sblc_calls(bigint, int, int, bool)"
