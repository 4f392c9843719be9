#!/usr/bin/env bash
# test/bench/checkpoint_bench.sh: increments against a plain UPDATE, each
# side measured both ways in the same run, interleaved: from a CHECKPOINT
# (the run pays the full-page image of every page it changes first, as a
# server does in the seconds after each checkpoint) and after a warm-up
# (the images already written, as between checkpoints).  How much of the
# increment's price is the images of its window's pages.
#
#   bash test/bench/checkpoint_bench.sh [seconds-per-run [rounds [warm-up-seconds]]]
#
#   defaults: 8 s runs, 6 rounds, a 2 s warm-up: about 6 minutes on a
#   2-vCPU machine, with the build (with the burst mode too, about 8).
#   Environment: CLIENTS (2), SYNC (on: synchronous_commit of every run;
#   off), CSV (a file for one row per run, kept; by default the rows go
#   with the work directory), MODES ("cold warm": one or more of cold,
#   warm and burst, each once, each measured every round), BURST
#   (seconds-per-run: the burst mode's burst).
#
# The burst mode measures a run after a load like the asynchronous runs
# that a durable run of counter_bench.sh comes after: the counter is
# driven with synchronous_commit off for BURST s (unmeasured), then come
# the run's CHECKPOINT and the run, on either side.
#
# A scratch cluster with the settings of counter_bench.sh (bench_lib.sh,
# and pg_stat_statements loaded, track = top), its section a's tables
# (1,000 keys; a counter of 16 shard rows a key, retention 20 s, target
# 0.1%, planned, as there, for 1.2 times the plain UPDATE's rate with
# synchronous_commit off in a 5 s calibration), pgbench -M prepared,
# CLIENTS clients:
#       plain  UPDATE plain SET value = value + 1 WHERE key = $k AND shard = 0
#       fbf    SELECT idempotent_increment('idem', $k, client, random seq, 1)
# In each round the runs (plain and fbf in each mode) each follow their
# own CHECKPOINT; the order of the modes and of the sides turns from round
# to round (an even number of rounds balances them).  Reports, for each
# mode: each side's median tps, fbf / plain of the medians and the median
# of the rounds' own ratios, WAL bytes per transaction (the insert
# position's advance over the run / its transactions) and fbf / plain,
# and the counter's false dismissals (every seq is new).  Not part of the
# tests.
set -euo pipefail

. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/bench_lib.sh"
cd "$FBF_ROOT"

SECS=${1:-8}
ROUNDS=${2:-6}
WARM=${3:-2}
CLIENTS=${CLIENTS:-2}
SYNC=${SYNC:-on}
MODES=${MODES:-cold warm}
BURST=${BURST:-$SECS}
for v in "$SECS" "$ROUNDS" "$WARM" "$CLIENTS" "$BURST"; do
	case $v in
	'' | *[!0-9]* | 0*) echo "seconds, rounds, warm-up, CLIENTS and BURST are positive whole numbers, not '$v'" >&2; exit 2 ;;
	esac
done
read -r -a modes_list <<<"$MODES"
if [ "${#modes_list[@]}" = 0 ]; then
	echo "MODES names at least one of cold, warm and burst" >&2
	exit 2
fi
seen=" "
for m in "${modes_list[@]}"; do
	case $m in
	cold | warm | burst) ;;
	*) echo "MODES are cold, warm and burst, not '$m'" >&2; exit 2 ;;
	esac
	case $seen in
	*" $m "*) echo "MODES names $m twice" >&2; exit 2 ;;
	esac
	seen="$seen$m "
done
case $SYNC in
on | off) ;;
*) echo "SYNC is on or off, not $SYNC" >&2; exit 2 ;;
esac

if [ -n "${CSV:-}" ]; then
	: >"$CSV"
fi
bench_begin checkpoint
bench_cluster_start \
	"shared_preload_libraries = 'fbf,pg_stat_statements'" "pg_stat_statements.track = top"
cp "$FBF_ROOT"/test/bench/workloads/plain.sql "$FBF_ROOT"/test/bench/workloads/fbf.sql "$work/"
rows=$work/runs.csv
echo "mode,workload,round,xacts,tps,wal_bytes_per_xact,applied,dismissed" >"$rows"

setup_tables() {
	psqlq <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS plain, idem;
CREATE EXTENSION IF NOT EXISTS fbf;
CREATE TABLE plain (key text, shard int, value bigint NOT NULL DEFAULT 0, PRIMARY KEY (key, shard));
INSERT INTO plain SELECT g::text, 0, 0 FROM generate_series(1, 1000) g;
SELECT fbf_create_counter_table('idem', retention => '20 s',
	target_fpp => 0.001, expected_rate => $1, shards => 16) \gset
INSERT INTO idem SELECT g::text, s, 0 FROM generate_series(1, 1000) g, generate_series(0, 15) s;
VACUUM ANALYZE plain, idem;
SQL
}
bench() {
	PGOPTIONS="-c synchronous_commit=$SYNC" "$PGBENCH" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" "$@"
}

fbf_log "calibrating"
setup_tables 1000
rate=$(bench_calibrate "$work/plain.sql" "$CLIENTS" 1.2)
fbf_log "expected rate for the counter: $rate/s"
setup_tables "$rate"

# run_one MODE WORKLOAD ROUND: the burst if MODE is burst, a CHECKPOINT,
# the warm-up if MODE is warm, then the measured run; appends its row
run_one() {
	local mode=$1 w=$2 round=$3 a0="" d0="" a1="" d1="" start end xacts tps wal
	fbf_log "$mode: $w, synchronous_commit = $SYNC, round $round"
	if [ "$mode" = burst ]; then
		if ! SYNC=off bench -T "$BURST" -f "$work/fbf.sql" >"$work/burst.out" 2>&1; then
			cat "$work/burst.out" >&2
			return 1
		fi
	fi
	psqlq -c "CHECKPOINT"
	if [ "$mode" = warm ]; then
		if ! bench -T "$WARM" -f "$work/$w.sql" >"$work/warm.out" 2>&1; then
			cat "$work/warm.out" >&2
			return 1
		fi
	fi
	if [ "$w" = fbf ]; then bench_counts_into idem a0 d0; fi
	start=$(lsn)
	if ! bench -T "$SECS" -f "$work/$w.sql" >"$work/run.out" 2>&1; then
		cat "$work/run.out" >&2
		return 1
	fi
	end=$(lsn)
	if [ "$w" = fbf ]; then bench_counts_into idem a1 d1; fi
	xacts=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$work/run.out")
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$work/run.out")
	wal=$(sql "SELECT round(pg_wal_lsn_diff('$end', '$start') / $xacts, 1)")
	local applied="" dismissed=""
	if [ "$w" = fbf ]; then
		applied=$((a1 - a0))
		dismissed=$((d1 - d0))
	fi
	echo "$mode,$w,$round,$xacts,$tps,$wal,$applied,$dismissed" >>"$rows"
	if [ -n "${CSV:-}" ]; then
		cp "$rows" "$CSV"
	fi
}

for round in $(seq 1 "$ROUNDS"); do
	for mode in $(bench_turn "$round" "${modes_list[@]}"); do
		for w in $(bench_turn "$round" plain fbf); do
			run_one "$mode" "$w" "$round"
		done
	done
done

med() { bench_median "$rows" "$1" mode="$2" workload="$3"; }
echo
settings=""
case $seen in *" warm "*) settings="$settings, warm-up ${WARM} s" ;; esac
case $seen in *" burst "*) settings="$settings, burst ${BURST} s" ;; esac
echo "== increments / plain UPDATE, synchronous_commit = $SYNC, $CLIENTS clients, ${SECS} s runs, median of $ROUNDS rounds$settings"
printf '%-6s %12s %12s %12s %14s %10s %10s %10s %s\n' mode "plain tps" "fbf tps" "fbf / plain" "rounds' ratio" "plain WAL" "fbf WAL" "WAL ratio" "false dismissals"
for mode in "${modes_list[@]}"; do
	p=$(med tps "$mode" plain)
	f=$(med tps "$mode" fbf)
	if [ -z "$p" ] || [ -z "$f" ]; then
		echo "no runs of $mode to report" >&2
		exit 1
	fi
	pw=$(med wal_bytes_per_xact "$mode" plain)
	fw=$(med wal_bytes_per_xact "$mode" fbf)
	rr=$(awk -F, -v m="$mode" 'NR > 1 && $1 == m { if ($2 == "plain") p[$3] = $5; else f[$3] = $5 }
		END { for (r in p) if (r in f) print f[r] / p[r] }' "$rows" | bench_median_lines |
		awk '{ printf "%.2f", $1 }')
	a=$(bench_total "$rows" applied mode="$mode" workload=fbf)
	d=$(bench_total "$rows" dismissed mode="$mode" workload=fbf)
	printf '%-6s %12.0f %12.0f %12.2f %14s %10.1f %10.1f %10.2f %s\n' "$mode" "$p" "$f" \
		"$(awk -v a="$f" -v b="$p" 'BEGIN { print a / b }')" "$rr" "$pw" "$fw" \
		"$(awk -v a="$fw" -v b="$pw" 'BEGIN { print a / b }')" \
		"$d of $((a + d)) ($(awk -v a="$a" -v d="$d" 'BEGIN { printf "%.4f%%", a + d ? 100 * d / (a + d) : 0 }'))"
done
echo "runs (mode, workload, round, tps, WAL bytes per transaction):"
awk -F, 'NR > 1 { printf "  %s %s %s %s %s\n", $1, $2, $3, $5, $6 }' "$rows"
