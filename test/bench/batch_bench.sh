#!/usr/bin/env bash
# test/bench/batch_bench.sh: batches of idempotent_increment against single
# calls, operations per second, every ratio from one run of this script.
#
#   bash test/bench/batch_bench.sh [seconds-per-run [csv-file [rounds]]]
#
#   defaults: 10 s per run, docs/bench_batch.csv, 5 rounds: about 4
#   minutes on a 2-vCPU machine.  Environment: CLIENTS (2), BATCH (100
#   operations per batch call), SYNCS ("off on").
#   A short check of the script itself: batch_bench.sh 2 /tmp/b.csv 1
#
# Starts a scratch cluster with the settings of counter_bench.sh (fsync =
# on, shared_buffers 512MB, no checkpoint during a run, fbf.naptime 1 s),
# and runs pgbench with prepared statements (-M prepared), the same
# clients and settings for both sides, 1,000 keys of 16 shard rows each:
#
#   single  SELECT idempotent_increment('idem_single', $k, client, $s, 1)
#   batch   SELECT idempotent_increment('idem_batch', $k, client_ids,
#               seqs, deltas): BATCH operations of one client on one key,
#               seqs $s .. $s + BATCH - 1, built by the statement from $s
#
# $s is a random 63-bit number, so every operation is unique and every
# dismissal a false one: the dismissal rate of each run (from
# fbf_counter_stats) is reported beside its throughput.  Each side has its
# own counter table, its filter planned for that side's rate (measured by
# a calibration run first; filters grow at once beyond it anyway).
#
# Rounds are interleaved (single before batch, for each synchronous_commit
# setting, in every round), a CHECKPOINT precedes every run, and the
# tables report medians over the rounds.  The target printed beside the
# ratio (PASS/MISS: batch operations per second >= 10 x those of single
# calls) is the batch path's; a MISS never fails the script.  The CSV has one
# row per run and one per median (round = median).  Not part of the tests.
set -euo pipefail

. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/bench_lib.sh"
cd "$FBF_ROOT"

SECS=${1:-10}
CSV=${2:-docs/bench_batch.csv}
ROUNDS=${3:-5}
CLIENTS=${CLIENTS:-2}
BATCH=${BATCH:-100}
SYNCS=${SYNCS:-"off on"}
T_RATIO=10 # batch / single operations per second

bench_begin batch-bench
bench_cluster_start

cat >"$work/single.sql" <<'SQL'
\set k random(1, 1000)
\set s random(1, 9223372036854775806)
SELECT idempotent_increment('idem_single', :k::text, :client_id, :s, 1);
SQL
cat >"$work/batch.sql" <<SQL
\set k random(1, 1000)
\set s random(1, $((9223372036854775807 - BATCH)))
SELECT idempotent_increment('idem_batch', :k::text, array_fill(:client_id::bigint, ARRAY[$BATCH]),
	(SELECT array_agg(:s::bigint + g) FROM generate_series(0, $((BATCH - 1))) g),
	array_fill(1::bigint, ARRAY[$BATCH]));
SQL

# both counters, 1,000 keys of 16 shard rows, their filters planned for
# $1 (single) and $2 (batch) operations per second
setup_tables() {
	psqlq <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS idem_single, idem_batch;
CREATE EXTENSION IF NOT EXISTS fbf;
SELECT fbf_create_counter_table('idem_single', retention => '20 s', target_fpp => 0.001,
	expected_rate => $1, shards => 16) \gset
SELECT fbf_create_counter_table('idem_batch', retention => '20 s', target_fpp => 0.001,
	expected_rate => $2, shards => 16) \gset
INSERT INTO idem_single SELECT g::text, s, 0 FROM generate_series(1, 1000) g, generate_series(0, 15) s;
INSERT INTO idem_batch SELECT * FROM idem_single;
VACUUM ANALYZE idem_single, idem_batch;
SQL
}

echo "workload,synchronous_commit,clients,batch,round,seconds,xacts,tps,ops_per_s,applied,dismissed,dismissal_pct" >"$CSV"

# run_one WORKLOAD SYNC ROUND: one pgbench run, measured; appends its row
run_one() {
	local w=$1 sync=$2 round=$3 per=1
	[ "$w" = batch ] && per=$BATCH
	fbf_log "$w, $CLIENTS clients, synchronous_commit = $sync, round $round"
	psqlq -c "CHECKPOINT"
	local a0 d0 a1 d1
	bench_counts_into "idem_$w" a0 d0
	if ! PGOPTIONS="-c synchronous_commit=$sync" "$PGBENCH" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" \
		-T "$SECS" -f "$work/$w.sql" >"$work/run.out" 2>"$work/run.err"; then
		cat "$work/run.out" "$work/run.err" >&2
		return 1
	fi
	bench_counts_into "idem_$w" a1 d1
	local xacts tps ops applied=$((a1 - a0)) dismissed=$((d1 - d0))
	xacts=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$work/run.out")
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$work/run.out")
	ops=$(awk -v t="$tps" -v p="$per" 'BEGIN { printf "%.1f", t * p }')
	echo "$w,$sync,$CLIENTS,$per,$round,$SECS,$xacts,$tps,$ops,$applied,$dismissed,$(awk -v a="$applied" -v d="$dismissed" \
		'BEGIN { printf "%.4f", a + d ? 100 * d / (a + d) : 0 }')" >>"$CSV"
}

# the median of a column over a group's rounds
median() { bench_median "$CSV" "$1" workload="$2" synchronous_commit="$3"; }
# the sum of a column over a group's rounds
total() {
	awk -F, -v c="$1" -v w="$2" -v y="$3" '
		NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next }
		$1 == w && $2 == y && $5 != "median" { t += $k } END { print t + 0 }' "$CSV"
}

# size each side's filter for its load: a calibration run of each
fbf_log "calibrating"
setup_tables 1000 10000
rates=""
for w in single batch; do
	PGOPTIONS="-c synchronous_commit=off" "$PGBENCH" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T 5 \
		-f "$work/$w.sql" >"$work/calib.out" 2>&1
	per=1
	[ "$w" = batch ] && per=$BATCH
	rates="$rates $(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$work/calib.out" |
		awk -v p="$per" '{ printf "%.0f", $1 * p * 1.2 }')"
done
fbf_log "expected rates for the filters (single, batch):$rates/s"
# shellcheck disable=SC2086
setup_tables $rates

for round in $(seq 1 "$ROUNDS"); do
	for sync in $SYNCS; do
		for w in single batch; do
			run_one "$w" "$sync" "$round"
		done
	done
done

# medians, appended to the CSV
for sync in $SYNCS; do
	for w in single batch; do
		per=1
		[ "$w" = batch ] && per=$BATCH
		a=$(total applied "$w" "$sync")
		d=$(total dismissed "$w" "$sync")
		echo "$w,$sync,$CLIENTS,$per,median,$SECS,$(median xacts "$w" "$sync"),$(median tps "$w" "$sync"),$(median ops_per_s "$w" "$sync"),$a,$d,$(awk -v a="$a" -v d="$d" \
			'BEGIN { printf "%.4f", a + d ? 100 * d / (a + d) : 0 }')" >>"$CSV"
	done
done

echo
echo "== batches of $BATCH against single calls: 1,000 keys, $CLIENTS clients, ${SECS} s per run, median of $ROUNDS rounds"
echo "   (pgbench -M prepared, fsync on; unique operations: every dismissal is false)"
printf '%-6s %-7s %12s %14s %22s\n' sync side "calls/s" "operations/s" "dismissed (rate)"
for sync in $SYNCS; do
	for w in single batch; do
		a=$(total applied "$w" "$sync")
		d=$(total dismissed "$w" "$sync")
		printf '%-6s %-7s %12.0f %14.0f %22s\n' "$sync" "$w" "$(median tps "$w" "$sync")" \
			"$(median ops_per_s "$w" "$sync")" \
			"$(awk -v a="$a" -v d="$d" 'BEGIN { printf "%d of %d (%.4f%%)", d, a + d, a + d ? 100 * d / (a + d) : 0 }')"
	done
	r=$(awk -v b="$(median ops_per_s batch "$sync")" -v s="$(median ops_per_s single "$sync")" \
		'BEGIN { printf "%.1f", (s > 0 ? b / s : 0) }')
	printf '%-6s batch / single operations per second: %s   target >= %s: %s\n' "$sync" "$r" "$T_RATIO" \
		"$(awk -v r="$r" -v t="$T_RATIO" 'BEGIN { print (r + 0 >= t + 0 ? "PASS" : "MISS") }')"
	printf '%-6s runs, operations/s single / batch:' "$sync"
	for round in $(seq 1 "$ROUNDS"); do
		printf ' %s / %s' \
			"$(awk -F, -v r="$round" -v y="$sync" '$1 == "single" && $2 == y && $5 == r { printf "%.0f", $9 }' "$CSV")" \
			"$(awk -F, -v r="$round" -v y="$sync" '$1 == "batch" && $2 == y && $5 == r { printf "%.0f", $9 }' "$CSV")"
	done
	echo
done
psql -X -At -F ' ' -c "SELECT counter, partitions, filters, estimated_fpp, bytes FROM fbf_counter_stats ORDER BY 1" |
	sed 's/^/filter at the end (counter, partitions, filters, estimated FPP, bytes): /'
echo
echo "every run: $CSV"
