#!/usr/bin/env bash
# test/bench/citus_claim_bench.sh: fbf_claim on a dedup table distributed
# with Citus against INSERT ... ON CONFLICT DO NOTHING into a distributed
# table of processed ids (processed(id bigint PRIMARY KEY), distributed by
# id), both through the coordinator, same clients, in the same run, in
# interleaved rounds; reports each side's median transactions per second,
# their ratio, and the dedup table's duplicates (every id is new: each
# duplicate is a false positive).  synchronous_commit is off on every node
# for both sides; FBF_BENCH_SYNC=on sets it on instead.
#
#   bash test/bench/citus_claim_bench.sh [rounds [seconds [clients]]]
#
#   defaults: 5 rounds of 10 s per side, 4 clients.  The cluster: as
#   citus_bench.sh (test/bench/citus_cluster.sh).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/citus_cluster.sh"
rounds=${1:-5}
secs=${2:-10}
clients=${3:-4}
sync=${FBF_BENCH_SYNC:-off}
case $sync in on | off) ;; *) echo "FBF_BENCH_SYNC: on or off" >&2; exit 2 ;; esac

citus_cluster_start "synchronous_commit = $sync"

psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench_dedup, bench_processed;
SELECT fbf_create_dedup('bench_dedup', retention => '5 min', expected_rate => 20000);
SELECT fbf_distribute_dedup('bench_dedup');
CREATE TABLE bench_processed (id bigint PRIMARY KEY);
SELECT create_distributed_table('bench_processed', 'id');
SQL

# each transaction a new id: random 62-bit
cat >"$dir/fbf.sql" <<SQL
\set id random(1, 4611686018427387903)
SELECT fbf_claim('bench_dedup', :id::bigint);
SQL
cat >"$dir/plain.sql" <<SQL
\set id random(1, 4611686018427387903)
INSERT INTO bench_processed (id) VALUES (:id) ON CONFLICT DO NOTHING;
SQL

run() {
	PGOPTIONS="-c synchronous_commit=$sync" \
		"$PG_BINDIR/pgbench" -n -M prepared -c "$clients" -j "$clients" -T "$secs" -f "$dir/$1.sql" 2>/dev/null |
		sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}

: >"$dir/fbf.tps"
: >"$dir/plain.tps"
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then order="fbf plain"; else order="plain fbf"; fi
	for side in $order; do
		tps=$(run "$side")
		echo "$tps" >>"$dir/$side.tps"
		echo "round $r $side: $tps tps"
	done
done
fbf=$(median <"$dir/fbf.tps")
plain=$(median <"$dir/plain.tps")
psql -X -q -At -c "SELECT 'duplicates (false positives): ' || sum(duplicates) || ' of ' || sum(claimed + duplicates)
	FROM fbf_dedup_stats WHERE dedup = 'bench_dedup'::regclass"
echo "median tps: fbf_claim $fbf, INSERT ON CONFLICT DO NOTHING $plain, ratio $(awk -v a="$fbf" -v b="$plain" 'BEGIN {printf "%.2f", a / b}')"
psql -X -q -c "DROP TABLE bench_dedup, bench_processed"
