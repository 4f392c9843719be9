#!/usr/bin/env bash
# test/bench/citus_claim_bench.sh: fbf_claim on a dedup table distributed
# with Citus against INSERT ... ON CONFLICT DO NOTHING into a distributed
# table of processed ids (processed(id bigint PRIMARY KEY), distributed by
# id), both through the coordinator, same clients, in the same run, in
# interleaved rounds; reports each side's median transactions per second,
# their ratio, and the dedup table's duplicates (every id is new: each
# duplicate is a false positive).  synchronous_commit is off on every node
# for both sides; FBF_BENCH_SYNC=on sets it on instead.  On its own scratch
# cluster it also reports the CPU each side's transaction costs on the
# coordinator and on the two workers together (every process of each
# node, in microseconds per transaction, medians of the rounds): where
# the difference is.
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

# one run of a side: its tps to $dir/<side>.tps, and with the cluster's
# own nodes its CPU per transaction (µs) to $dir/<side>.coord and .workers
run() {
	local side=$1 r=$2 out tps tx before after line=""
	before=($(node_cpu_ticks))
	out=$(PGOPTIONS="-c synchronous_commit=$sync" \
		"$PG_BINDIR/pgbench" -n -M prepared -c "$clients" -j "$clients" -T "$secs" -f "$dir/$side.sql" 2>/dev/null)
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out")
	tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
	echo "$tps" >>"$dir/$side.tps"
	if [ ${#before[@]} -eq 3 ] && [ "${tx:-0}" -gt 0 ]; then
		sleep 1 # the sessions end and are counted
		after=($(node_cpu_ticks))
		awk -v a="${after[0]}" -v b="${before[0]}" -v hz="$hz" -v n="$tx" \
			'BEGIN {printf "%.0f\n", (a - b) * 1e6 / hz / n}' >>"$dir/$side.coord"
		awk -v a="$((after[1] + after[2]))" -v b="$((before[1] + before[2]))" -v hz="$hz" -v n="$tx" \
			'BEGIN {printf "%.0f\n", (a - b) * 1e6 / hz / n}' >>"$dir/$side.workers"
		line="; CPU per transaction: coordinator $(tail -1 "$dir/$side.coord") µs, workers $(tail -1 "$dir/$side.workers") µs"
	fi
	echo "round $r $side: $tps tps$line"
}

hz=$(getconf CLK_TCK)
for side in fbf plain; do : >"$dir/$side.tps"; : >"$dir/$side.coord"; : >"$dir/$side.workers"; done
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then order="fbf plain"; else order="plain fbf"; fi
	for side in $order; do
		run "$side" "$r"
	done
done
fbf=$(median <"$dir/fbf.tps")
plain=$(median <"$dir/plain.tps")
if [ -s "$dir/fbf.coord" ]; then
	echo "median CPU per transaction: fbf_claim coordinator $(median <"$dir/fbf.coord") µs, workers $(median <"$dir/fbf.workers") µs;" \
		"INSERT coordinator $(median <"$dir/plain.coord") µs, workers $(median <"$dir/plain.workers") µs"
fi
psql -X -q -At -c "SELECT 'duplicates (false positives): ' || sum(duplicates) || ' of ' || sum(claimed + duplicates)
	FROM fbf_dedup_stats WHERE dedup = 'bench_dedup'::regclass"
echo "median tps: fbf_claim $fbf, INSERT ON CONFLICT DO NOTHING $plain, ratio $(awk -v a="$fbf" -v b="$plain" 'BEGIN {printf "%.2f", a / b}')"
psql -X -q -c "DROP TABLE bench_dedup, bench_processed"
