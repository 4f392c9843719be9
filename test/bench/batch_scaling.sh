#!/usr/bin/env bash
# test/bench/batch_scaling.sh: what one operation of a batch costs as the
# batch grows, every ratio from one run of this script.
#
#   bash test/bench/batch_scaling.sh [rounds [csv-file]]
#
#   defaults: 5 rounds, docs/bench_batch_scaling.csv: about 3 minutes on a
#   2-vCPU machine.  Environment: SIZES_DEFAULT ("10000 100000 300000"),
#   SIZES_PLANNED and SIZES_MISMATCH ("10000 100000 1000000").
#   A short check of the script itself:
#   SIZES_DEFAULT=1000 SIZES_PLANNED=1000 SIZES_MISMATCH=1000 \
#   batch_scaling.sh 1 /tmp/s.csv
#
# Starts a scratch cluster with the settings of the other benchmarks
# (bench_lib.sh) and times single calls of idempotent_increment with a
# batch of n operations of one client on one key, new seqs, each call
# its own transaction, on a counter made for the run:
#
#   default   fbf_create_counter_table(name): 20 pending chains, whose
#             operations in flight a call may fill to its in-flight
#             share (some 347,000 operations with streams), so 300,000 is
#             the largest size
#   planned   the same with expected_rate => 10000 (191 chains) and
#             at_capacity = 'dismiss', which takes a batch of a million:
#             under 'refuse' (the default) one role's operations of a
#             period stop at what fbf.max_filter_size's filter takes under
#             the target (about 600,000), a share of the capacity rather
#             than a cost of the batch
#   mismatch  planned, with track_mismatch = on: each applied operation
#             records its delta identity too, on another chain
#
# The time is the call's alone (the arrays are built before it, in the
# same function; clock_timestamp() around it).  Every operation is new and
# the counter is new, so every dismissal is a false one: each run's count
# is reported beside its time.  Rounds are interleaved (every size of both
# counters in each round), and the tables report medians over the rounds:
# microseconds per operation, and each size's against the smallest of its
# counter.  The target printed beside them (PASS/MISS: the largest size
# costs at most 1.2 x per operation what the smallest does) never fails the
# script.  Not part of the tests.
set -euo pipefail

. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/bench_lib.sh"
cd "$FBF_ROOT"

ROUNDS=${1:-5}
CSV=${2:-docs/bench_batch_scaling.csv}
SIZES_DEFAULT=${SIZES_DEFAULT:-"10000 100000 300000"}
SIZES_PLANNED=${SIZES_PLANNED:-"10000 100000 1000000"}
SIZES_MISMATCH=${SIZES_MISMATCH:-"10000 100000 1000000"}
T_RATIO=1.2

bench_begin batch-scaling
bench_cluster_start

psqlq <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fbf;
CREATE FUNCTION bench_batch(counter regclass, n int, base bigint,
							OUT ms float8, OUT applied bigint)
LANGUAGE plpgsql AS $$
DECLARE
	ids bigint[] := array_fill(1::bigint, ARRAY[n]);
	seqs bigint[] := ARRAY(SELECT base + g FROM generate_series(1, n) g);
	deltas bigint[] := array_fill(1::bigint, ARRAY[n]);
	t0 timestamptz := clock_timestamp();
	answers boolean[];
BEGIN
	answers := idempotent_increment(counter, 'k', ids, seqs, deltas);
	ms := 1000 * extract(epoch FROM clock_timestamp() - t0);
	SELECT count(*) FILTER (WHERE a) INTO applied FROM unnest(answers) a;
END $$;
SQL

echo "counter,round,operations,ms,us_per_op,applied,dismissed" >"$CSV"

# one run: a new counter of kind $1, one batch of $2 operations
run() {
	local kind=$1 n=$2 round=$3 opts="" out ms applied
	sql "DROP TABLE IF EXISTS scaling" >/dev/null
	if [ "$kind" != default ]; then
		sql "SELECT fbf_create_counter_table('scaling', expected_rate => 10000)" >/dev/null
		sql "ALTER INDEX scaling_fbf SET (at_capacity = 'dismiss')" >/dev/null
	fi
	if [ "$kind" = mismatch ]; then
		sql "ALTER INDEX scaling_fbf SET (track_mismatch = on)" >/dev/null
	elif [ "$kind" = default ]; then
		sql "SELECT fbf_create_counter_table('scaling')" >/dev/null
	fi
	sql "CHECKPOINT" >/dev/null
	out=$(sql "SELECT ms, applied FROM bench_batch('scaling', $n, $((round * 10000000)))")
	ms=${out%%|*}
	applied=${out##*|}
	echo "$kind,$round,$n,$ms,$(awk -v m="$ms" -v n="$n" 'BEGIN { printf "%.3f", 1000 * m / n }'),$applied,$((n - applied))" >>"$CSV"
}

for round in $(seq 1 "$ROUNDS"); do
	for n in $SIZES_DEFAULT; do
		run default "$n" "$round"
	done
	for n in $SIZES_PLANNED; do
		run planned "$n" "$round"
	done
	for n in $SIZES_MISMATCH; do
		run mismatch "$n" "$round"
	done
done

echo
echo "== one batch call of n operations on a new counter, median of $ROUNDS rounds"
printf '%-8s %10s %12s %14s %12s %20s\n' counter operations "ms" "us/operation" "vs smallest" "false dismissals"
for kind in default planned mismatch; do
	case $kind in
		default) sizes=$SIZES_DEFAULT ;;
		planned) sizes=$SIZES_PLANNED ;;
		mismatch) sizes=$SIZES_MISMATCH ;;
	esac
	first=${sizes%% *}
	base=$(bench_median "$CSV" us_per_op counter="$kind" operations="$first")
	for n in $sizes; do
		per=$(bench_median "$CSV" us_per_op counter="$kind" operations="$n")
		ratio=$(awk -v p="$per" -v b="$base" 'BEGIN { printf "%.2f", (b > 0 ? p / b : 0) }')
		printf '%-8s %10d %12.1f %14.3f %12s %20s\n' "$kind" "$n" \
			"$(bench_median "$CSV" ms counter="$kind" operations="$n")" "$per" "$ratio" \
			"$(bench_total "$CSV" dismissed counter="$kind" operations="$n") of $((n * ROUNDS))"
		echo "$kind,median,$n,$(bench_median "$CSV" ms counter="$kind" operations="$n"),$per,," >>"$CSV"
	done
	last=${sizes##* }
	r=$(awk -v p="$(bench_median "$CSV" us_per_op counter="$kind" operations="$last")" -v b="$base" \
		'BEGIN { printf "%.2f", (b > 0 ? p / b : 0) }')
	printf '%-8s %s operations / %s, per operation: %s   target <= %s: %s\n' "$kind" "$last" "$first" "$r" "$T_RATIO" \
		"$(awk -v r="$r" -v t="$T_RATIO" 'BEGIN { print (r <= t ? "PASS" : "MISS") }')"
	printf '%-8s runs, us/operation by round:' "$kind"
	for n in $sizes; do
		printf ' %s:' "$n"
		for round in $(seq 1 "$ROUNDS"); do
			printf ' %s' "$(awk -F, -v k="$kind" -v r="$round" -v n="$n" '$1 == k && $2 == r && $3 == n { print $5 }' "$CSV")"
		done
	done
	echo
done
