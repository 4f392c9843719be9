#!/usr/bin/env bash
# test/bench/filter_bench.sh: idempotent_increment on a Bloom window and on
# a cuckoo window (filter => 'cuckoo') against the plain UPDATE, every
# ratio from one run of this script.
#
#   bash test/bench/filter_bench.sh [seconds-per-run [rounds [csv-file]]]
#
#   defaults: 10 s per run, 3 rounds, docs/bench_filters.csv.
#   Environment: CLIENTS (2), SYNC (off: synchronous_commit of the runs),
#   WARMUP (25 s: more than the retention, in runs of 5 s).
#
# Starts a scratch cluster (fsync = on), 1,000 keys, pgbench -M prepared,
# CLIENTS clients, for each side:
#     plain   UPDATE plain SET value = value + 1 WHERE key = $k AND shard = 0
#     bloom   SELECT idempotent_increment('idem_bloom', $k, client, random seq, 1)
#     cuckoo  the same on 'idem_cuckoo' (filter => 'cuckoo')
# Both counters: retention 20 s, target 0.001, planned for 1,000/s (both
# grow to the rate they get: warm-up runs of 5 s for WARMUP seconds each, not
# measured, before the rounds; longer than the retention, so that what the
# windows remember from before their growth has expired: a cuckoo entry
# stored before k doublings keeps f - k useful fingerprint bits until then).  Rounds are interleaved (plain, bloom, cuckoo in each), a
# CHECKPOINT precedes every run, medians over the rounds.  Every seq is a
# random 63-bit number, so every dismissal is a false one: the applied and
# dismissed deltas of fbf_counter_stats over the measured runs give the
# false-dismissal rate beside the throughput.  Not part of the tests.
set -euo pipefail

. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/bench_lib.sh"
cd "$FBF_ROOT"

SECS=${1:-10}
ROUNDS=${2:-3}
CSV=${3:-docs/bench_filters.csv}
CLIENTS=${CLIENTS:-2}
SYNC=${SYNC:-off}
WARMUP=${WARMUP:-25}

work=$(mktemp -d /tmp/fbf-filter-bench.XXXXXX)
chmod 755 "$work"
trap 'fbf_cluster_stop; rm -rf "$work"' EXIT

fbf_build_install
fbf_cluster_start "fsync = on" "shared_buffers = '512MB'" "max_wal_size = '4GB'" \
	"checkpoint_timeout = '30min'" "fbf.naptime = '1s'"
PGBENCH="$PG_BINDIR/pgbench"
sql() { psql -X -At -v ON_ERROR_STOP=1 -c "$1"; }

psql -X -q -v ON_ERROR_STOP=1 <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fbf;
CREATE TABLE plain (key text, shard int, value bigint NOT NULL DEFAULT 0, PRIMARY KEY (key, shard));
INSERT INTO plain SELECT g::text, 0, 0 FROM generate_series(1, 1000) g;
SELECT fbf_create_counter_table('idem_bloom', retention => '20 s', target_fpp => 0.001,
	expected_rate => 1000, shards => 16) \gset
SELECT fbf_create_counter_table('idem_cuckoo', retention => '20 s', target_fpp => 0.001,
	expected_rate => 1000, shards => 16, filter => 'cuckoo') \gset
INSERT INTO idem_bloom SELECT g::text, s, 0 FROM generate_series(1, 1000) g, generate_series(0, 15) s;
INSERT INTO idem_cuckoo SELECT * FROM idem_bloom;
VACUUM ANALYZE plain, idem_bloom, idem_cuckoo;
SQL

cat >"$work/plain.sql" <<'EOF'
\set k random(1, 1000)
UPDATE plain SET value = value + 1 WHERE key = :k::text AND shard = 0;
EOF
for f in bloom cuckoo; do
	cat >"$work/$f.sql" <<EOF
\\set k random(1, 1000)
\\set s random(1, 9223372036854775806)
SELECT idempotent_increment('idem_$f', :k::text, :client_id, :s, 1);
EOF
done

# run SIDE ROUND [SECONDS]: one pgbench run; appends
# "side,round,tps,applied,dismissed,refused" (refused: the clients an error
# stopped, each named in the run's output; a counter's refusal of a new
# operation it cannot take under its target is one: 53400)
run() {
	local side=$1 round=$2 secs=${3:-$SECS} a0=0 d0=0 a1=0 d1=0 tps refused
	sql "CHECKPOINT" >/dev/null
	if [ "$side" != plain ]; then bench_counts_into "idem_$side" a0 d0; fi
	PGOPTIONS="-c synchronous_commit=$SYNC" "$PGBENCH" -n -M prepared -c "$CLIENTS" \
		-j "$CLIENTS" -T "$secs" -f "$work/$side.sql" >"$work/out" 2>&1 || true
	tps=$(awk '/^tps = / { print $3; exit }' "$work/out")
	refused=$(grep -c 'aborted in command' "$work/out" || true)
	if [ "$side" != plain ]; then bench_counts_into "idem_$side" a1 d1; fi
	echo "$side,$round,${tps:-0},$((a1 - a0)),$((d1 - d0)),$refused" >>"$CSV"
}

# warm SIDE: runs of 5 s for WARMUP seconds (a run whose clients were all
# refused ends early, and the next one goes on)
warm() {
	local end=$((SECONDS + WARMUP))
	while [ "$SECONDS" -lt "$end" ]; do run "$1" warmup 5; done
}

echo "side,round,tps,applied,dismissed,refused" >"$CSV"
fbf_log "warm-up: runs of each counter for ${WARMUP} s, not measured (the windows grow to the rate)"
for f in bloom cuckoo; do warm "$f"; done
for r in $(seq 1 "$ROUNDS"); do
	fbf_log "round $r of $ROUNDS"
	for side in plain bloom cuckoo; do run "$side" "$r"; done
done

median() {
	awk -F, -v s="$1" '$1 == s && $2 != "round" && $2 != "warmup" { print $3 }' "$CSV" |
		sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
dismissals() {
	awk -F, -v s="$1" '$1 == s && $2 != "warmup" { a += $4; d += $5; r += $6 }
		END { printf "%d of %d (%.4f%%), %d clients stopped by an error", d, a + d, a + d ? 100 * d / (a + d) : 0, r }' "$CSV"
}
P=$(median plain)
B=$(median bloom)
C=$(median cuckoo)
echo "== $CLIENTS clients, 1,000 keys, synchronous_commit $SYNC, ${SECS} s per run, median of $ROUNDS rounds (pgbench -M prepared, fsync on)"
printf '%-8s %10s %10s  %s\n' side tps "/ plain" "false dismissals (measured runs)"
printf '%-8s %10.0f %10s\n' plain "$P" 1
printf '%-8s %10.0f %10.3f  %s\n' bloom "$B" "$(awk -v a="$B" -v b="$P" 'BEGIN { print a / b }')" "$(dismissals bloom)"
printf '%-8s %10.0f %10.3f  %s\n' cuckoo "$C" "$(awk -v a="$C" -v b="$P" 'BEGIN { print a / b }')" "$(dismissals cuckoo)"
echo "cuckoo / bloom tps: $(awk -v a="$C" -v b="$B" 'BEGIN { printf "%.3f", a / b }')"
echo "warm-up (not in the medians): $(awk -F, '$2 == "warmup" { a[$1] += $4; d[$1] += $5; r[$1] += $6; n[$1]++ }
	END { for (s in n) printf "%s %d runs of 5 s, %d of %d dismissed, %d clients stopped by an error; ", s, n[s], d[s], a[s] + d[s], r[s] }' "$CSV")"
echo "== the windows at the end"
psql -X -c "SELECT counter, filter, partitions, bytes, estimated_fpp, load, fingerprint_bits, pending
	FROM fbf_counter_stats ORDER BY 1"
echo "(rows: $CSV)"
