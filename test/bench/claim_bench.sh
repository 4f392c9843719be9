#!/usr/bin/env bash
# test/bench/claim_bench.sh: fbf_claim against the processed-events table
# it replaces, every ratio from one run of this script.
#
#   bash test/bench/claim_bench.sh [seconds-per-run [csv-file [rounds]]]
#
#   defaults: 40 s per run, docs/bench_claims.csv, 3 rounds: about 9
#   minutes on a 2-vCPU machine (17 with batches).  Environment: CLIENTS
#   (2), TAIL_S (20), BATCH (ids per call of the batch runs; 0, the
#   default: no batch runs).
#   A short check of the script itself: claim_bench.sh 10 /tmp/c.csv 1
#
# Starts a scratch cluster (fsync = on), pgbench with prepared statements
# (-M prepared), the same clients and settings for both sides of a ratio,
# every run on fresh tables (steady state: runs last longer than the 20 s
# retention, and the tail is what counts):
#
#   claim  SELECT fbf_claim('inbox', client_id, seq)       (workloads/claim.sql)
#   exact  INSERT INTO processed (client_id, seq, at = now()) VALUES (...)
#          ON CONFLICT DO NOTHING                          (workloads/processed.sql)
#          with an index on at for the pruning job beside the clients, psql
#          "DELETE FROM processed WHERE at < now() - '20 s'" every second
#   claim_batch / exact_batch: BATCH ids per call, fbf_claim(inbox, ids[])
#          against one INSERT ... SELECT FROM unnest ... ON CONFLICT DO
#          NOTHING (ids per second is tps * BATCH)
#
# at synchronous_commit off and on.  Reported: tps over the whole run and
# over its last TAIL_S seconds (from pgbench -P 5), claim / exact, the
# processed table's size at the end, and the claims' false duplicates (ids
# are unique, random 63-bit seq: every "false" answer is a false one).
# Rounds are interleaved, a CHECKPOINT precedes every run, and the figures
# are medians over the rounds.  Target: claim / exact >= 1.3,
# steady state.  A MISS never fails the script.  Not part of the tests.
set -euo pipefail

. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/bench_lib.sh"
cd "$FBF_ROOT"

SECS=${1:-40}
CSV=${2:-docs/bench_claims.csv}
ROUNDS=${3:-3}
CLIENTS=${CLIENTS:-2}
TAIL_S=${TAIL_S:-20}
BATCH=${BATCH:-0}
WORKLOADS="exact claim"
[ "$BATCH" -gt 0 ] && WORKLOADS="exact claim exact_batch claim_batch"
RETENTION_S=20
T_CLAIM=1.3

if [ $((TAIL_S * 2)) -gt "$SECS" ]; then
	TAIL_S=$((SECS / 2 / 5 * 5))
	[ "$TAIL_S" -ge 5 ] || TAIL_S=5
fi
TAIL_CUT=$(((SECS - TAIL_S) / 5 * 5))

bench_begin claim-bench
bench_cluster_start

cp "$FBF_ROOT"/test/bench/workloads/{claim,processed}.sql "$work/"
if [ "$BATCH" -gt 0 ]; then
	sed "s/@BATCH@/$BATCH/g" "$FBF_ROOT/test/bench/workloads/claim_batch.sql" >"$work/claim_batch.sql"
	sed "s/@BATCH@/$BATCH/g" "$FBF_ROOT/test/bench/workloads/processed_batch.sql" >"$work/exact_batch.sql"
fi
cp "$work/processed.sql" "$work/exact.sql"

setup_tables() {
	psqlq <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS inbox, processed;
CREATE EXTENSION IF NOT EXISTS fbf;
CREATE TABLE processed (client_id bigint, seq bigint, at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (client_id, seq));
CREATE INDEX processed_at ON processed (at);
SELECT fbf_create_dedup('inbox', retention => '${RETENTION_S} s', target_fpp => 0.001,
	expected_rate => $1) \gset
SQL
}


claim_counts() { psql -X -At -F ' ' -c "SELECT claimed, duplicates FROM fbf_dedup_stats WHERE dedup = 'inbox'::regclass"; }

echo "workload,synchronous_commit,clients,round,seconds,xacts,tps,tail_tps,ids_per_call,claimed,false_duplicates,processed_bytes" >"$CSV"

# run_one WORKLOAD SYNC ROUND: one pgbench run on fresh tables; a CSV row
run_one() {
	local w=$1 sync=$2 round=$3 per=1 c0=0 d0=0 c1=0 d1=0 size=""
	case $w in *_batch) per=$BATCH ;; esac
	fbf_log "$w, $CLIENTS clients, synchronous_commit = $sync, round $round"
	setup_tables "$rate"
	psqlq -c "CHECKPOINT"
	case $w in exact*) prune_start processed "$sync" ;; esac
	if ! PGOPTIONS="-c synchronous_commit=$sync" "$PGBENCH" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" \
		-T "$SECS" -P 5 -f "$work/$w.sql" >"$work/run.out" 2>"$work/run.err"; then
		cat "$work/run.out" "$work/run.err" >&2
		return 1
	fi
	case $w in
	exact*)
		prune_stop
		size=$(sql "SELECT pg_total_relation_size('processed')")
		;;
	*) read -r c1 d1 <<<"$(claim_counts)" ;;
	esac
	local xacts tps tail
	xacts=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$work/run.out")
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$work/run.out")
	tail=$(awk -v secs="$SECS" -v cut="$TAIL_CUT" -v n="$xacts" '
		$1 == "progress:" && $2 + 0 <= cut { before += 5 * $4 }
		END { printf "%.1f", (n - before) / (secs - cut) }' "$work/run.err")
	local claimed="" dups=""
	case $w in claim*) claimed=$((c1 - c0)) dups=$((d1 - d0)) ;; esac
	echo "$w,$sync,$CLIENTS,$round,$SECS,$xacts,$tps,$tail,$per,$claimed,$dups,$size" >>"$CSV"
}

median() { bench_median "$CSV" "$1" workload="$2" synchronous_commit="$3"; }
total() { bench_total "$CSV" "$1" workload="$2" synchronous_commit="$3"; }
ratio() { awk -v a="${1:-}" -v b="${2:-}" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }
verdict() { awk -v v="$1" -v t="$2" 'BEGIN { if (v == "-") print "-"; else if (v + 0 >= t + 0) print "PASS"; else print "MISS" }'; }

# size the window for the load it will see: calibrate with the insert
fbf_log "calibrating"
setup_tables 1000
rate=$(bench_calibrate "$work/exact.sql" "$CLIENTS" 1.5)
fbf_log "expected rate for the window: $rate/s"

for round in $(seq 1 "$ROUNDS"); do
	for sync in off on; do
		for w in $WORKLOADS; do
			run_one "$w" "$sync" "$round"
		done
	done
done

for w in $WORKLOADS; do
	for sync in off on; do
		echo "$w,$sync,$CLIENTS,median,$SECS,$(median xacts "$w" "$sync"),$(median tps "$w" "$sync"),$(median tail_tps "$w" "$sync"),,$(total claimed "$w" "$sync"),$(total false_duplicates "$w" "$sync"),$(median processed_bytes "$w" "$sync")" >>"$CSV"
	done
done

echo
echo "== claims against INSERT ... ON CONFLICT DO NOTHING into a pruned processed table"
echo "   $CLIENTS clients, ${SECS} s per run (tail: last ${TAIL_S} s), retention ${RETENTION_S} s, median of $ROUNDS rounds"
printf '%-28s %12s %12s %12s %12s\n' "" "off: tps" "off: tail" "on: tps" "on: tail"
for w in $WORKLOADS; do
	printf '%-28s %12s %12s %12s %12s\n' "$w" "$(median tps "$w" off)" "$(median tail_tps "$w" off)" \
		"$(median tps "$w" on)" "$(median tail_tps "$w" on)"
done
pairs=("claim exact")
[ "$BATCH" -gt 0 ] && pairs+=("claim_batch exact_batch")
for pair in "${pairs[@]}"; do
	read -r a b <<<"$pair"
	r_off=$(ratio "$(median tail_tps "$a" off)" "$(median tail_tps "$b" off)")
	r_on=$(ratio "$(median tail_tps "$a" on)" "$(median tail_tps "$b" on)")
	printf '%-28s %12s %25s   target >= %s (steady state, tail): %s / %s\n' "$a / $b" "$r_off" "$r_on" \
		"$T_CLAIM" "$(verdict "$r_off" "$T_CLAIM")" "$(verdict "$r_on" "$T_CLAIM")"
done
for w in $WORKLOADS; do
	[ "${w#claim}" != "$w" ] || continue
	for sync in off on; do
		c=$(total claimed "$w" "$sync")
		d=$(total false_duplicates "$w" "$sync")
		echo "$w, sync $sync: $d false duplicates of $((c + d)) unique ids ($(awk -v c="$c" -v d="$d" 'BEGIN { printf "%.4f", c + d ? 100 * d / (c + d) : 0 }')%)"
	done
done
echo "processed table at the end of a run (median bytes): sync off $(median processed_bytes exact off), on $(median processed_bytes exact on)"
echo "CSV: $CSV"
