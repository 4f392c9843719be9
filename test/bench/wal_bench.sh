#!/usr/bin/env bash
# test/bench/wal_bench.sh: the WAL an increment writes, record type by
# record type, against a plain UPDATE's, in one run.
#
#   bash test/bench/wal_bench.sh [operations [warm-up operations]]
#
#   defaults: 40,000 operations a side after 20,000 of warm-up; about two
#   minutes on a 2-vCPU machine.  Environment: CLIENTS (2), RATE (the
#   counter's expected_rate, 20000), SEQS (random, or inorder: each client
#   numbers its operations of a key 1, 2, 3 ...).
#
# A scratch cluster with the settings of counter_bench.sh (bench_lib.sh),
# the tables of its section a (1,000 keys; a counter of 16 shards), and
# pgbench -M prepared, CLIENTS clients, -t operations / CLIENTS each:
#       plain  UPDATE plain SET value = value + 1 WHERE key = $k AND shard = 0
#       fbf    SELECT idempotent_increment('idem', $k, client, seq, 1)
# Each side: a CHECKPOINT, the warm-up (so the window has grown to the rate
# and the pages touched after the checkpoint have had their full-page
# images), then the measured run, between two WAL insert positions.  For
# each side, pg_waldump --stats=record of that stretch, per operation:
# records, record bytes, full-page-image bytes, and the total; fbf's own
# resource manager (custom170 in pg_waldump, which cannot load fbf) by the
# names its record types have in the server (src/common/fbf_xlog.h).  Then
# the ratio of the totals, fbf / plain.  The WAL is everything the cluster
# wrote meanwhile (the fbf worker's passes, autovacuum).  Not a test.
set -euo pipefail

. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/bench_lib.sh"
cd "$FBF_ROOT"

OPS=${1:-40000}
WARM=${2:-20000}
CLIENTS=${CLIENTS:-2}
RATE=${RATE:-20000}
SEQS=${SEQS:-random}

bench_begin wal
bench_cluster_start "synchronous_commit = off" "autovacuum = off"
datadir=$(sql "SHOW data_directory")

psqlq <<SQL
SET client_min_messages = warning;
CREATE EXTENSION fbf;
CREATE TABLE plain (key text, shard int, value bigint NOT NULL DEFAULT 0, PRIMARY KEY (key, shard));
INSERT INTO plain SELECT g::text, 0, 0 FROM generate_series(1, 1000) g;
SELECT fbf_create_counter_table('idem', retention => '20 s', target_fpp => 0.001,
	expected_rate => $RATE, shards => 16) \gset
INSERT INTO idem SELECT g::text, s, 0 FROM generate_series(1, 1000) g, generate_series(0, 15) s;
CREATE SEQUENCE inorder CACHE 1000;
VACUUM ANALYZE plain, idem;
SQL

# the seq of an operation: random 63 bits, or a client's next one for the
# key (a per-client sequence number keeps a (key, client) stream in order;
# the plain side draws it too, so both sides pay for it)
case $SEQS in
	random) seq='\set s random(1, 9223372036854775806)' ;;
	inorder) seq='SELECT nextval('"'inorder'"') AS s \gset' ;;
	*) echo "SEQS is random or inorder, not $SEQS" >&2; exit 2 ;;
esac
cat >"$work/plain.sql" <<EOF
\\set k random(1, 1000)
$seq
UPDATE plain SET value = value + 1 WHERE key = :k::text AND shard = 0;
EOF
cat >"$work/fbf.sql" <<EOF
\\set k random(1, 1000)
$seq
SELECT idempotent_increment('idem', :k::text, :client_id, :s, 1);
EOF

run_side() {
	"$PGBENCH" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -t $(($1 / CLIENTS)) \
		-f "$work/$2.sql" >"$work/$2.pgbench" 2>&1 || { tail -3 "$work/$2.pgbench" >&2; exit 1; }
}

# fbf's record types by their info code, which pg_waldump prints in hex
# (src/common/fbf_xlog.h)
fbf_names='s#custom170/UNKNOWN (0)#fbf/PAGES#; s#custom170/UNKNOWN (10)#fbf/PENDING_ADD#;
	s#custom170/UNKNOWN (20)#fbf/DRAIN_V1#; s#custom170/UNKNOWN (30)#fbf/STREAMS#;
	s#custom170/UNKNOWN (40)#fbf/PENDING_ADDS#; s#custom170/UNKNOWN (50)#fbf/PENDING_OPS#;
	s#custom170/UNKNOWN (60)#fbf/DRAIN#'

declare -A total
for side in plain fbf; do
	sql "CHECKPOINT" >/dev/null
	run_side "$WARM" "$side"
	start=$(lsn)
	run_side "$OPS" "$side"
	end=$(lsn)
	sql "SELECT pg_switch_wal()" >/dev/null	# so that pg_waldump can read to $end
	total[$side]=$(sql "SELECT round(pg_wal_lsn_diff('$end', '$start') / $OPS, 1)")
	echo "== $side: $OPS operations, $(grep -m1 '^tps' "$work/$side.pgbench" | cut -d' ' -f3) tps, ${total[$side]} bytes of WAL each"
	"$PG_BINDIR/pg_waldump" -p "$datadir/pg_wal" --stats=record -s "$start" -e "$end" 2>/dev/null |
		sed "$fbf_names" |
		sed -E 's/\( *[0-9.]+\)//g; s/\[[0-9.%]+\]//g' |
		awk -v n="$OPS" 'NR > 2 && $1 != "Total" && $2 + 0 > 0 {
			printf "  %-26s %8.3f %9.1f %9.1f %9.1f\n", $1, $2 / n, $3 / n, $4 / n, $5 / n }' |
		sort -k5 -g -r | { printf "  %-26s %8s %9s %9s %9s\n" "record type, per operation" records bytes fpi total; cat; }
done
echo "WAL per operation, fbf / plain: $(awk -v a="${total[fbf]}" -v b="${total[plain]}" 'BEGIN { printf "%.2f", a / b }')"
