#!/usr/bin/env bash
# test/bench/mismatch_bench.sh: what the option track_mismatch costs the
# hot path of idempotent_increment, off against on, from one run of this
# script.
#
#   bash test/bench/mismatch_bench.sh [seconds-per-run [csv-file [rounds]]]
#
#   defaults: 15 s per run, docs/bench_mismatch.csv, 3 rounds: about 2
#   minutes on a 2-vCPU machine.  Environment: CLIENTS (2), RETRY_PCT (10:
#   the share of calls that retry the client's previous operation, half of
#   them with another delta), SYNCS ("off").
#   A short check of the script itself: mismatch_bench.sh 3 /tmp/m.csv 1
#
# Starts a scratch cluster with the settings of counter_bench.sh (fsync =
# on, shared_buffers 512MB, no checkpoint during a run, fbf.naptime 1 s),
# and runs pgbench with prepared statements (-M prepared), the same
# clients and settings for both sides, 1,000 keys of 16 shard rows each,
# retention 10 s, both filters planned for the same rate (they grow at once
# beyond it, from their measured distinct counts):
#
#   off  SELECT idempotent_increment('mm_off', $k, client, $s, 1)
#   on   the same on mm_on, whose window index has track_mismatch = on
#
# (client ids as text: pgbench's untyped parameter picks that form, as in
# counter_bench.sh.)  $s is a random 63-bit number, except in RETRY_PCT %
# of the calls, which send the client's previous (key, seq) again, with
# delta 1 or 2 (even odds): those are dismissed, and the ones with delta 2
# counted mismatched by the on side.  Reported, as medians over the rounds: tps and on / off;
# WAL bytes per transaction (pg_wal_lsn_diff of the insert position after
# and before the run, all of the cluster's WAL / transactions) and on /
# off; the dismissal and mismatch rates of each side (fbf_counter_stats);
# and each filter's bytes, partitions and estimated FPP after the last
# round (a steady state: each side ran longer than its retention).
#
# Rounds are interleaved, the side that goes first alternating from round
# to round; a CHECKPOINT precedes every run; one unmeasured warm-up run of
# each side lets both windows grow to their rate first.  The CSV has one
# row per run and one per median (round = median).  Not part of the tests.
set -euo pipefail

. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/bench_lib.sh"
cd "$FBF_ROOT"

SECS=${1:-15}
CSV=${2:-docs/bench_mismatch.csv}
ROUNDS=${3:-3}
CLIENTS=${CLIENTS:-2}
RETRY_PCT=${RETRY_PCT:-10}
SYNCS=${SYNCS:-"off"}

bench_begin mismatch-bench
bench_cluster_start

# pgbench keeps a client's variables from one transaction to the next:
# pk and ps are its previous operation (-D pk=1 -D ps=0 to begin with)
for side in off on; do
	cat >"$work/$side.sql" <<SQL
\set r random(1, 100)
\if :r <= $RETRY_PCT
\set d random(1, 2)
SELECT idempotent_increment('mm_$side', :pk::text, :client_id::text, :ps::bigint, :d::bigint);
\else
\set pk random(1, 1000)
\set ps random(1, 9223372036854775806)
SELECT idempotent_increment('mm_$side', :pk::text, :client_id, :ps, 1);
\endif
SQL
done

setup_tables() {
	psqlq <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS mm_off, mm_on;
CREATE EXTENSION IF NOT EXISTS fbf;
SELECT fbf_create_counter_table('mm_off', retention => '10 s', target_fpp => 0.001,
	expected_rate => 2000, shards => 16) \gset
SELECT fbf_create_counter_table('mm_on', retention => '10 s', target_fpp => 0.001,
	expected_rate => 2000, shards => 16) \gset
ALTER INDEX mm_on_fbf SET (track_mismatch = on);
INSERT INTO mm_off SELECT g::text, s, 0 FROM generate_series(1, 1000) g, generate_series(0, 15) s;
INSERT INTO mm_on SELECT * FROM mm_off;
VACUUM ANALYZE mm_off, mm_on;
SQL
}

echo "side,synchronous_commit,clients,round,seconds,xacts,tps,wal_bytes_per_xact,applied,dismissed,mismatched,dismissal_pct,mismatch_pct,filter_bytes" >"$CSV"

# run_one SIDE SYNC ROUND SECS: one pgbench run, measured; appends its row
# (ROUND "warmup": run, not recorded)
run_one() {
	local side=$1 sync=$2 round=$3 secs=$4
	fbf_log "track_mismatch $side, $CLIENTS clients, synchronous_commit = $sync, round $round"
	psqlq -c "CHECKPOINT"
	local a0 d0 m0 a1 d1 m1 start end c
	c=$(bench_counter_counts "mm_$side" mismatched)
	read -r a0 d0 m0 <<<"$c"
	start=$(lsn)
	if ! PGOPTIONS="-c synchronous_commit=$sync" "$PGBENCH" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" \
		-T "$secs" -D pk=1 -D ps=0 -f "$work/$side.sql" >"$work/run.out" 2>"$work/run.err"; then
		cat "$work/run.out" "$work/run.err" >&2
		return 1
	fi
	end=$(lsn)
	[ "$round" != warmup ] || return 0
	c=$(bench_counter_counts "mm_$side" mismatched)
	read -r a1 d1 m1 <<<"$c"
	local xacts tps wal bytes applied=$((a1 - a0)) dismissed=$((d1 - d0)) mismatched=$((m1 - m0))
	xacts=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$work/run.out")
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$work/run.out")
	wal=$(sql "SELECT round(pg_wal_lsn_diff('$end', '$start') / $xacts, 1)")
	bytes=$(sql "SELECT bytes FROM fbf_counter_stats WHERE counter = 'mm_$side'::regclass")
	echo "$side,$sync,$CLIENTS,$round,$secs,$xacts,$tps,$wal,$applied,$dismissed,$mismatched,$(awk -v a="$applied" \
		-v d="$dismissed" -v m="$mismatched" 'BEGIN { t = a + d; printf "%.4f,%.4f", t ? 100 * d / t : 0, t ? 100 * m / t : 0 }'),$bytes" >>"$CSV"
}

# the median of a column over a side's rounds
median() { bench_median "$CSV" "$1" side="$2" synchronous_commit="$3"; }
# the sum of a column over a side's rounds
total() {
	awk -F, -v c="$1" -v w="$2" -v y="$3" '
		NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next }
		$1 == w && $2 == y && $4 != "median" { t += $k } END { print t + 0 }' "$CSV"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.3f", a / b }'; }

setup_tables
for sync in $SYNCS; do
	run_one off "$sync" warmup 5
	run_one on "$sync" warmup 5
done
for round in $(seq 1 "$ROUNDS"); do
	for sync in $SYNCS; do
		if [ $((round % 2)) = 1 ]; then order="off on"; else order="on off"; fi
		for side in $order; do
			run_one "$side" "$sync" "$round" "$SECS"
		done
	done
done

# medians, appended to the CSV
for sync in $SYNCS; do
	for side in off on; do
		a=$(total applied "$side" "$sync")
		d=$(total dismissed "$side" "$sync")
		m=$(total mismatched "$side" "$sync")
		echo "$side,$sync,$CLIENTS,median,$SECS,$(median xacts "$side" "$sync"),$(median tps "$side" "$sync"),$(median wal_bytes_per_xact "$side" "$sync"),$a,$d,$m,$(awk \
			-v a="$a" -v d="$d" -v m="$m" 'BEGIN { t = a + d; printf "%.4f,%.4f", t ? 100 * d / t : 0, t ? 100 * m / t : 0 }'),$(median filter_bytes "$side" "$sync")" >>"$CSV"
	done
done

echo
echo "== track_mismatch off against on: 1,000 keys, $CLIENTS clients, ${SECS} s per run, median of $ROUNDS rounds"
echo "   (pgbench -M prepared, fsync on; $RETRY_PCT % of calls retry the previous operation, half of those with another delta)"
printf '%-6s %-5s %10s %14s %26s %26s\n' sync side tps "WAL B/xact" "dismissed (rate)" "mismatched (rate)"
for sync in $SYNCS; do
	for side in off on; do
		a=$(total applied "$side" "$sync")
		d=$(total dismissed "$side" "$sync")
		m=$(total mismatched "$side" "$sync")
		printf '%-6s %-5s %10.0f %14.1f %26s %26s\n' "$sync" "$side" "$(median tps "$side" "$sync")" \
			"$(median wal_bytes_per_xact "$side" "$sync")" \
			"$(awk -v a="$a" -v d="$d" 'BEGIN { printf "%d of %d (%.2f%%)", d, a + d, a + d ? 100 * d / (a + d) : 0 }')" \
			"$(awk -v a="$a" -v m="$m" -v d="$d" 'BEGIN { printf "%d of %d (%.2f%%)", m, a + d, a + d ? 100 * m / (a + d) : 0 }')"
	done
	printf '%-6s on / off: tps %s, WAL bytes per transaction %s\n' "$sync" \
		"$(ratio "$(median tps on "$sync")" "$(median tps off "$sync")")" \
		"$(ratio "$(median wal_bytes_per_xact on "$sync")" "$(median wal_bytes_per_xact off "$sync")")"
	printf '%-6s runs, tps off / on:' "$sync"
	for round in $(seq 1 "$ROUNDS"); do
		printf ' %s / %s' \
			"$(awk -F, -v r="$round" -v y="$sync" '$1 == "off" && $2 == y && $4 == r { printf "%.0f", $7 }' "$CSV")" \
			"$(awk -F, -v r="$round" -v y="$sync" '$1 == "on" && $2 == y && $4 == r { printf "%.0f", $7 }' "$CSV")"
	done
	echo
done
psql -X -At -F ' ' -c "SELECT counter, partitions, filters, nbits, estimated_fpp, bytes FROM fbf_counter_stats ORDER BY 1" |
	sed 's/^/filter at the end (counter, partitions, filters, bits per filter, estimated FPP, bytes): /'
echo
echo "every run: $CSV"
