#!/usr/bin/env bash
# test/bench/share_bench.sh: what the shares of a window's capacity cost on
# the hot path, every ratio from one run of this script.
#
#   bash test/bench/share_bench.sh [seconds-per-run [csv-file [rounds]]]
#
#   defaults: 8 s per run, docs/bench_shares.csv, 5 rounds: about 6
#   minutes on a 2-vCPU machine.  Environment: CLIENTS (2).
#
# Starts a scratch cluster (bench_lib.sh: fsync on, no checkpoint during a
# run) and runs pgbench with prepared statements (-M prepared), the same
# clients and settings on every side, synchronous_commit off (where the
# hot path's cost shows; with it on the commit's flush dominates):
#
#   plain     UPDATE plain SET value = value + 1 WHERE key = $k AND shard = 0
#   shared    SELECT idempotent_increment('idem', $k, client, random seq, 1)
#             on a counter with the defaults: at_capacity = refuse, shares
#             by role (every new operation charged to its role)
#   unshared  the same on a counter with at_capacity = dismiss (no shares:
#             no charge)
#
# 1,000 keys, retention 20 s.  Rounds are interleaved (plain, shared,
# unshared in each), a CHECKPOINT precedes every run; the table reports
# medians over the rounds, shared / unshared and shared / plain, and the
# false dismissals of each counter run (every operation is unique: any
# dismissal is a false one) and its refusals (pgbench errors: none are
# expected, one role well within the window's capacity).  Not part of the
# tests.
set -euo pipefail

. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/bench_lib.sh"
cd "$FBF_ROOT"

SECS=${1:-8}
CSV=${2:-docs/bench_shares.csv}
ROUNDS=${3:-5}
CLIENTS=${CLIENTS:-2}
RETENTION_S=20

bench_begin share_bench
bench_cluster_start

psqlq <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fbf;
CREATE TABLE plain (key text, shard int, value bigint NOT NULL DEFAULT 0, PRIMARY KEY (key, shard));
INSERT INTO plain SELECT g::text, 0, 0 FROM generate_series(1, 1000) g;
SELECT fbf_create_counter_table('idem', retention => '${RETENTION_S} s', shards => 16) \gset
SELECT fbf_create_counter_table('idem_unshared', retention => '${RETENTION_S} s', shards => 16) \gset
ALTER INDEX idem_unshared_fbf SET (at_capacity = 'dismiss');
INSERT INTO idem SELECT g::text, s, 0 FROM generate_series(1, 1000) g, generate_series(0, 15) s;
INSERT INTO idem_unshared SELECT * FROM idem;
VACUUM ANALYZE plain, idem, idem_unshared;
SQL

cp "$FBF_ROOT/test/bench/workloads/plain.sql" "$work/plain.sql"
cp "$FBF_ROOT/test/bench/workloads/fbf.sql" "$work/shared.sql"
sed "s/'idem'/'idem_unshared'/" "$FBF_ROOT/test/bench/workloads/fbf.sql" >"$work/unshared.sql"

echo "workload,round,seconds,xacts,tps,errors,applied,dismissed" >"$CSV"
for round in $(seq 1 "$ROUNDS"); do
	for w in plain shared unshared; do
		counter=""
		case $w in
		shared) counter=idem ;;
		unshared) counter=idem_unshared ;;
		esac
		fbf_log "$w, $CLIENTS clients, round $round"
		psqlq -c "CHECKPOINT"
		a0=0 d0=0 a1=0 d1=0
		if [ -n "$counter" ]; then bench_counts_into "$counter" a0 d0; fi
		PGOPTIONS="-c synchronous_commit=off" "$PGBENCH" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" \
			-T "$SECS" -f "$work/$w.sql" >"$work/run.out" 2>"$work/run.err" || true
		if [ -n "$counter" ]; then bench_counts_into "$counter" a1 d1; fi
		xacts=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$work/run.out")
		tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$work/run.out")
		errors=$(grep -c 'ERROR' "$work/run.err" || true)
		echo "$w,$round,$SECS,${xacts:-0},${tps:-0},$errors,$((a1 - a0)),$((d1 - d0))" >>"$CSV"
	done
done

med() { bench_median "$CSV" tps workload="$1"; }
plain=$(med plain)
shared=$(med shared)
unshared=$(med unshared)
echo
echo "share_bench: $CLIENTS clients, $SECS s runs, $ROUNDS interleaved rounds, synchronous_commit off (medians)"
printf '  %-9s %10s tps\n' plain "$plain" shared "$shared" unshared "$unshared"
awk -v s="$shared" -v u="$unshared" -v p="$plain" 'BEGIN {
	printf "  shared / unshared: %.3f\n  shared / plain:    %.3f\n  unshared / plain:  %.3f\n", s / u, s / p, u / p }'
for w in shared unshared; do
	awk -F, -v w="$w" '$1 == w { a += $7; d += $8; e += $6 }
		END { printf "  %-9s %d applied, %d false dismissals (%.4f%%), %d refused\n", w, a, d, a + d ? 100 * d / (a + d) : 0, e }' "$CSV"
done
echo "  per run: $CSV"
