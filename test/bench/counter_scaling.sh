#!/usr/bin/env bash
# test/bench/counter_scaling.sh: throughput and latency of
# idempotent_increment against a plain UPDATE and the exact op-id table,
# with 1, 2 and 4 clients, synchronous_commit off and on.
#
#   bash test/bench/counter_scaling.sh [seconds-per-run]
#
# Same tables and statements as counter_bench.sh (1,000 keys; fresh tables
# for every run), pgbench with prepared statements.  Each point is the
# median of three runs (single runs on this 2-vCPU machine occasionally
# come out several times slower).  Writes docs/figures/scaling.csv and,
# with gnuplot, docs/figures/scaling.png.
set -euo pipefail

. "$(dirname "$0")/../lib.sh"
cd "$FBF_ROOT"

SECS=${1:-8}
CSV=docs/figures/scaling.csv

trap 'fbf_cluster_stop' EXIT
fbf_install_deps
fbf_build_install
fbf_cluster_start "fsync = on" "shared_buffers = '512MB'" "max_wal_size = '4GB'" \
	"checkpoint_timeout = '30min'"

work=$(mktemp -d /tmp/fbf-scaling.XXXXXX)
# the pgbench scripts, shared with counter_bench.sh
cp "$FBF_ROOT"/test/bench/workloads/*.sql "$work/"

setup() {
	psql -X -q -v ON_ERROR_STOP=1 <<SQL
DROP TABLE IF EXISTS plain, exact, ops, idem;
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fbf;
CREATE TABLE plain (key text, shard int, value bigint NOT NULL DEFAULT 0, PRIMARY KEY (key, shard));
CREATE TABLE exact (LIKE plain INCLUDING ALL);
CREATE TABLE ops (client_id bigint, seq bigint, PRIMARY KEY (client_id, seq));
INSERT INTO plain SELECT g::text, 0, 0 FROM generate_series(1, 1000) g;
INSERT INTO exact SELECT * FROM plain;
SELECT fbf_create_counter_table('idem', retention => '1 min', target_fpp => 0.001,
	expected_rate => 50000) \gset
VACUUM ANALYZE;
CHECKPOINT;
SQL
}

echo "synchronous_commit,clients,workload,tps,latency_ms" >"$CSV"
for sync in off on; do
	for clients in 1 2 4; do
		for w in plain fbf exact; do
			fbf_log "$w, $clients clients, synchronous_commit = $sync"
			: >"$work/runs"
			for rep in 1 2 3; do
				setup
				PGOPTIONS="-c synchronous_commit=$sync" "$PG_BINDIR/pgbench" -n -M prepared \
					-c "$clients" -j "$clients" -T "$SECS" -f "$work/$w.sql" >"$work/out" 2>&1
				tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$work/out")
				lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$work/out")
				echo "$tps $lat" >>"$work/runs"
			done
			# the median run by throughput
			read -r tps lat <<<"$(sort -n "$work/runs" | sed -n 2p)"
			echo "$sync,$clients,$w,$tps,$lat" >>"$CSV"
		done
	done
done
rm -rf "$work"
column -s, -t "$CSV"

if command -v gnuplot >/dev/null; then
	# one data file per series, so gnuplot draws each as a line
	series=$(mktemp -d /tmp/fbf-scaling-series.XXXXXX)
	awk -F, -v dir="$series" 'NR > 1 { print $2, $4, $5 > (dir "/" $3 "_" $1 ".dat") }' "$CSV"
	gnuplot <<GP
set terminal pngcairo size 1000,420 font "sans,10" noenhanced
set output "docs/figures/scaling.png"
set multiplot layout 1,2 title "idempotent_increment against a plain UPDATE and the exact op-id table (pgbench, 1,000 keys, median of 3 runs)"
set grid
set key top left
set xlabel "clients"
set xtics 1
set ylabel "transactions per second"
set title "throughput"
plot for [w in "plain fbf exact"] for [s in "off on"] "$series/".w."_".s.".dat" using 1:2 with linespoints title w.", sync ".s
set ylabel "average latency (ms)"
set title "latency"
set logscale y
plot for [w in "plain fbf exact"] for [s in "off on"] "$series/".w."_".s.".dat" using 1:3 with linespoints title w.", sync ".s
unset multiplot
GP
	rm -rf "$series"
fi
