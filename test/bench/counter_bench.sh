#!/usr/bin/env bash
# test/bench/counter_bench.sh: idempotent_increment against a plain UPDATE
# and against the exact op-id table, with pgbench, in one run.
#
#   bash test/bench/counter_bench.sh [seconds-per-run] [csv-file]
#
# Starts a scratch cluster (fbf preloaded), builds three tables of the same
# layout (key text, shard int, value bigint, primary key (key, shard)),
# 1,000 keys, and runs pgbench with 2 clients for each workload, with
# synchronous_commit off and on:
#   plain  UPDATE t SET value = value + 1 WHERE key = $k AND shard = 0
#   fbf    SELECT idempotent_increment('t', $k, client, seq, 1)
#   exact  INSERT INTO ops (client, seq) ... ON CONFLICT DO NOTHING, then
#          the UPDATE if the insert happened (one statement)
# plus one hot key (plain vs fbf), and the bytes each approach keeps per
# remembered operation.  Prints a table; writes CSV.  Not part of the tests.
set -euo pipefail

. "$(dirname "$0")/../lib.sh"
cd "$FBF_ROOT"

SECS=${1:-20}
CSV=${2:-docs/bench_counters.csv}
CLIENTS=2
RETENTION_S=20

trap 'fbf_cluster_stop' EXIT
fbf_install_deps
fbf_build_install
# durable settings, as in production: every commit of a synchronous run
# waits for its WAL flush
fbf_cluster_start "fsync = on" "shared_buffers = '512MB'" "max_wal_size = '4GB'" \
	"checkpoint_timeout = '30min'" "fbf.naptime = '1s'"

work=$(mktemp -d /tmp/fbf-bench.XXXXXX)
PGBENCH="$PG_BINDIR/pgbench"
psqlq() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }

setup_tables() {
	local rate=$1
	psqlq <<SQL
DROP TABLE IF EXISTS plain, exact, ops, idem, hot_plain, hot_idem;
DROP EXTENSION IF EXISTS fbf CASCADE;
CREATE EXTENSION fbf;
CREATE TABLE plain (key text, shard int, value bigint NOT NULL DEFAULT 0, PRIMARY KEY (key, shard));
CREATE TABLE exact (LIKE plain INCLUDING ALL);
CREATE TABLE ops (client_id bigint, seq bigint, PRIMARY KEY (client_id, seq));
INSERT INTO plain SELECT g::text, 0, 0 FROM generate_series(1, 1000) g;
INSERT INTO exact SELECT * FROM plain;
SELECT fbf_create_counter_table('idem', retention => '${RETENTION_S} s',
	target_fpp => 0.001, expected_rate => $rate, shards => 16);
INSERT INTO idem SELECT g::text, s, 0 FROM generate_series(1, 1000) g, generate_series(0, 15) s;
CREATE TABLE hot_plain (LIKE plain INCLUDING ALL);
INSERT INTO hot_plain VALUES ('hot', 0, 0);
SELECT fbf_create_counter_table('hot_idem', retention => '${RETENTION_S} s',
	target_fpp => 0.001, expected_rate => $rate, shards => 16);
VACUUM ANALYZE;
SQL
}

# the pgbench scripts, shared with counter_scaling.sh
cp "$FBF_ROOT"/test/bench/workloads/*.sql "$work/"

# tps of one pgbench run (prepared statements, CLIENTS clients); leaves
# the run's transaction count in $work/$script.xacts
run() {
	local script=$1 sync=$2 secs=${3:-$SECS}
	PGOPTIONS="-c synchronous_commit=$sync" "$PGBENCH" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" \
		-T "$secs" -f "$work/$script.sql" >"$work/$script.out" 2>"$work/$script.err"
	sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$work/$script.out" >"$work/$script.xacts"
	sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$work/$script.out"
}

# WAL written between two LSNs, from pg_waldump --stats: "records bytes fpi_bytes"
wal_between() {
	"$PG_BINDIR/pg_waldump" -p "$FBF_SCRATCH/data/pg_wal" -s "$1" -e "$2" --stats 2>/dev/null |
		sed -n 's/\[[^]]*\]//g; s/^Total *//p' | awk '{ print $1, $2, $3 }'
}
lsn() { psql -X -At -c "SELECT pg_current_wal_insert_lsn()"; }

# size the filter for the load it will see: calibrate with the plain update
fbf_log "calibrating"
setup_tables 1000
rate=$(run plain off 5)
rate=$(awk -v r="$rate" 'BEGIN { printf "%.0f", r * 1.2 }')
fbf_log "expected rate for the filters: $rate/s"

echo "workload,synchronous_commit,clients,seconds,tps,wal_record_bytes_per_xact,wal_fpi_bytes_per_xact" >"$CSV"
declare -A TPS WAL FPI DISMISSED

# "dismissed of attempted (rate)" for a counter: the workloads send unique
# operations (random 63-bit seq), so every dismissal is a false one
dismissed() {
	psql -X -At -c "SELECT dismissed || ' of ' || (applied + dismissed) || ' (' ||
		round(100.0 * dismissed / greatest(applied + dismissed, 1), 4) || '%)'
		FROM fbf_counter_stats WHERE counter = '$1'::regclass"
}
for sync in off on; do
	# fresh tables per mode, so each filter starts at its planned shape
	setup_tables "$rate"
	for w in plain fbf exact; do
		fbf_log "$w, synchronous_commit = $sync"
		psqlq -c "CHECKPOINT"
		start=$(lsn)
		TPS[$w,$sync]=$(run "$w" "$sync")
		end=$(lsn)
		read -r nrec bytes fpi <<<"$(wal_between "$start" "$end")"
		xacts=$(cat "$work/$w.xacts")
		WAL[$w,$sync]=$(awk -v b="$bytes" -v x="$xacts" 'BEGIN { printf "%.1f", b / x }')
		FPI[$w,$sync]=$(awk -v b="$fpi" -v x="$xacts" 'BEGIN { printf "%.1f", b / x }')
		echo "$w,$sync,$CLIENTS,$SECS,${TPS[$w,$sync]},${WAL[$w,$sync]},${FPI[$w,$sync]}" >>"$CSV"
		if [ "$w" = fbf ]; then
			psql -X -At -F ' ' -c "SELECT bytes, filters, live_filters, period, nbits, partitions, estimated_fpp
				FROM fbf_counter_stats WHERE counter = 'idem'::regclass" >"$work/shape_$sync"
			DISMISSED[$w,$sync]=$(dismissed idem)
		fi
		if [ "$w" = exact ]; then
			psql -X -At -c "SELECT round(pg_total_relation_size('ops')::numeric / count(*), 1) FROM ops" >"$work/ops_$sync"
		fi
	done
done
for sync in off on; do
	setup_tables "$rate"
	for w in hot_plain hot_fbf; do
		fbf_log "$w, synchronous_commit = $sync"
		psqlq -c "CHECKPOINT"
		TPS[$w,$sync]=$(run "$w" "$sync")
		echo "$w,$sync,$CLIENTS,$SECS,${TPS[$w,$sync]}" >>"$CSV"
		[ "$w" = hot_fbf ] && DISMISSED[$w,$sync]=$(dismissed hot_idem)
	done
done

# memory per remembered operation.  The filter remembers the last
# RETENTION_S seconds of operations; the op-id table every one it got.
fbf_log "measuring bytes per remembered operation"
filter_rate=${TPS[fbf,off]}
read -r filter_bytes shape <"$work/shape_off"
remembered=$(awk -v r="$filter_rate" -v s="$RETENTION_S" 'BEGIN { print r * s }')
ops_bytes_per_op=$(cat "$work/ops_off")
filter_bytes_per_op=$(awk -v b="$filter_bytes" -v n="$remembered" 'BEGIN { printf "%.1f", b / n }')
echo "$shape" >"$work/shape"
echo "bytes_per_op,fbf_filter,$filter_bytes_per_op" >>"$CSV"
echo "bytes_per_op,exact_ops_table,$ops_bytes_per_op" >>"$CSV"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo
echo "pgbench, $CLIENTS clients, ${SECS}s per run, 1,000 keys, prepared statements"
printf '%-22s %12s %12s\n' "" "sync off" "sync on"
for w in plain fbf exact; do
	printf '%-22s %12s %12s\n' "$w tps" "${TPS[$w,off]}" "${TPS[$w,on]}"
done
printf '%-22s %12s %12s\n' "fbf / plain" "$(ratio "${TPS[fbf,off]}" "${TPS[plain,off]}")" "$(ratio "${TPS[fbf,on]}" "${TPS[plain,on]}")"
printf '%-22s %12s %12s\n' "fbf / exact" "$(ratio "${TPS[fbf,off]}" "${TPS[exact,off]}")" "$(ratio "${TPS[fbf,on]}" "${TPS[exact,on]}")"
echo "fbf false dismissals (unique operations): sync off ${DISMISSED[fbf,off]}, sync on ${DISMISSED[fbf,on]}"
echo
echo "WAL per transaction, bytes of records (+ bytes of full-page images), from pg_waldump --stats"
for sync in off on; do
	printf '%-10s plain %s (+%s)   fbf %s (+%s)   exact %s (+%s)   fbf / plain %s (records)\n' "sync $sync" \
		"${WAL[plain,$sync]}" "${FPI[plain,$sync]}" "${WAL[fbf,$sync]}" "${FPI[fbf,$sync]}" \
		"${WAL[exact,$sync]}" "${FPI[exact,$sync]}" "$(ratio "${WAL[fbf,$sync]}" "${WAL[plain,$sync]}")"
done
echo
for sync in off on; do
	echo "one hot key, sync $sync: plain ${TPS[hot_plain,$sync]} tps, fbf ${TPS[hot_fbf,$sync]} tps, fbf / plain $(ratio "${TPS[hot_fbf,$sync]}" "${TPS[hot_plain,$sync]}"), false dismissals ${DISMISSED[hot_fbf,$sync]}"
done
echo
echo "bytes per remembered operation (sync off run): fbf filter $filter_bytes_per_op (filter $filter_bytes bytes for ${RETENTION_S}s at ${filter_rate}/s), op-id table $ops_bytes_per_op; ratio $(ratio "$filter_bytes_per_op" "$ops_bytes_per_op")"
echo "filter after the sync off run (filters, live, period, bits per filter, partitions, estimated FPP): $(cat "$work/shape_off")"
echo "filter after the sync on run: $(cat "$work/shape_on")"
rm -rf "$work"
