#!/usr/bin/env bash
# test/bench/growth_bench.sh: does a counter driven at its planned rate keep
# the partitions it was planned with?  A window grows when the rate it
# measures is past what its pages take (docs/design.md, "Growing at
# once"); at its own rate that is a misreading, paid for with a copy of
# the window (a full-page image a page) and its memory.
#
#   bash test/bench/growth_bench.sh [seconds-per-round [rounds [rate]]]
#
#   defaults: 60 s, 3 rounds, rate: calibrated (below); about 4 minutes
#   on a 2-vCPU machine.  Environment: CLIENTS (2), FACTOR (1.0: the plan
#   as a multiple of the calibrated rate).
#
# Starts a scratch cluster (bench_lib.sh), calibrates: the increments'
# own rate (pgbench, random seqs, synchronous_commit off, 5 s) on a
# counter planned far above it, times FACTOR, is the rate each round's
# counter is planned for (retention 20 s, target 0.1%, 16 shards, 1,000
# keys: counter_bench.sh's steady state).  Each round creates the counter
# afresh and runs the increments for seconds-per-round, looking at the
# window every 2 s.  Reported a round: its rate against the plan, the
# growths and merges the server logged, the partitions planned and at
# most, the relation's size at the end, and the false dismissals (every
# operation is unique).  Not part of the tests.
set -euo pipefail

. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/bench_lib.sh"
cd "$FBF_ROOT"

SECS=${1:-60}
ROUNDS=${2:-3}
RATE=${3:-}
CLIENTS=${CLIENTS:-2}
FACTOR=${FACTOR:-1.0}
RETENTION_S=20

bench_begin growth
bench_cluster_start


make_counter() {
	psqlq <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS idem;
CREATE EXTENSION IF NOT EXISTS fbf;
SELECT fbf_create_counter_table('idem', retention => '${RETENTION_S} s',
	target_fpp => 0.001, expected_rate => $1, shards => 16) \gset
INSERT INTO idem SELECT g::text, s, 0 FROM generate_series(1, 1000) g, generate_series(0, 15) s;
VACUUM ANALYZE idem;
SQL
}

shape() {
	sql "SELECT partitions, pg_relation_size('idem_fbf') FROM fbf_counter_stats WHERE counter = 'idem'::regclass"
}

if [ -z "$RATE" ]; then
	make_counter 1000000
	RATE=$(bench_calibrate test/bench/workloads/fbf.sql "$CLIENTS" "$FACTOR")
fi
fbf_log "counters planned for $RATE/s"

log="$FBF_SCRATCH/server.log"
printf '%-6s %9s %9s %6s %6s %10s %9s %9s %s\n' round tps "tps/plan" grew merged partitions "at most" MB "false dismissals"
for round in $(seq 1 "$ROUNDS"); do
	make_counter "$RATE"
	IFS='|' read -r planned _ <<<"$(shape)"
	from=$(wc -l <"$log")
	PGOPTIONS="-c synchronous_commit=off" "$PGBENCH" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" \
		-T "$SECS" -f test/bench/workloads/fbf.sql >"$work/pgbench_$round" 2>&1 &
	pgb=$!
	most=$planned
	while kill -0 "$pgb" 2>/dev/null; do
		sleep 2
		IFS='|' read -r parts _ <<<"$(shape)"
		[ -n "$parts" ] && [ "$parts" -gt "$most" ] && most=$parts
	done
	wait "$pgb" || { cat "$work/pgbench_$round" >&2; exit 1; }
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$work/pgbench_$round" | head -1)
	IFS='|' read -r parts bytes <<<"$(shape)"
	bench_counts_into idem applied dismissed
	grew=$(tail -n +"$((from + 1))" "$log" | grep -c 'fbf: grew "idem_fbf"' || true)
	merged=$(tail -n +"$((from + 1))" "$log" | grep -c 'fbf: shrank "idem_fbf" from [0-9]* to [0-9]* partitions' || true)
	printf '%-6s %9.0f %9.2f %6s %6s %4s -> %-3s %9s %9.1f %s of %s (%.4f%%)\n' "$round" "$tps" \
		"$(awk -v t="$tps" -v r="$RATE" 'BEGIN { print t / r }')" "$grew" "$merged" \
		"$planned" "$parts" "$most" "$(awk -v b="$bytes" 'BEGIN { print b / 1048576 }')" \
		"$dismissed" "$((applied + dismissed))" \
		"$(awk -v a="$applied" -v d="$dismissed" 'BEGIN { print a + d ? 100 * d / (a + d) : 0 }')"
done
