#!/usr/bin/env bash
# test/bench/cuckoo_growth_bench.sh: latency of lookups while a load grows
# the index from one page, cuckoo against hash and btree, in one run.
#
#   bash test/bench/cuckoo_growth_bench.sh [out.csv]
#
# Environment (defaults in brackets):
#   GROWTH_BENCH_ROWS     rows of each load [1000000]
#   GROWTH_BENCH_BATCH    rows per INSERT statement [1000]
#   GROWTH_BENCH_ROUNDS   loads per index type, types interleaved [3]
#
# Each round, for each type in turn: a fresh table t(k int8, pad text) with
# the index created on it empty (cuckoo: one bucket page), then a loader
# (one psql session, autocommit) inserts keys 1 .. ROWS in ascending
# order, BATCH rows a statement, while one pgbench client (-M prepared,
# enable_seqscan and enable_bitmapscan off, so every lookup goes through
# the index) looks up random keys of 1 .. ROWS:
#     SELECT count(*) FROM t WHERE k = :k;
# and logs every lookup's latency (pgbench -l).  Only lookups that started
# and ended while the load ran count.  Per round: lookups, median, p99.9
# and max latency (ms), and the load's seconds; then, per type, the median
# over the rounds of each figure, and the worst max.  A cuckoo index whose
# doubling stopped the world (before incremental growth) made every lookup
# wait for the whole doubling: its max latency grew with the index.
#
# Scratch cluster from test/lib.sh (fbf preloaded, fsync off: the load's
# commits do not wait for the disk), shared_buffers 512MB, autovacuum off.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../lib.sh
source "$here/test/lib.sh"
out=${1:-/dev/null}
rows=${GROWTH_BENCH_ROWS:-1000000}
batch=${GROWTH_BENCH_BATCH:-1000}
rounds=${GROWTH_BENCH_ROUNDS:-3}
work=$(mktemp -d /tmp/fbf-growth.XXXXXX)
chmod 777 "$work"

fbf_cluster_start "shared_buffers = '512MB'" "autovacuum = off" "max_wal_size = '4GB'"
trap 'fbf_cluster_stop; [ -n "${GROWTH_BENCH_KEEP:-}" ] || rm -rf "$work"' EXIT
q() { psql -X -qAt -v ON_ERROR_STOP=1 -c "$1"; }
q "CREATE EXTENSION fbf"

cat >"$work/lookup.sql" <<EOF
\\set k random(1, $rows)
SELECT count(*) FROM t WHERE k = :k;
EOF
{
	for ((i = 1; i <= rows; i += batch)); do
		echo "INSERT INTO t SELECT g, 'pad' FROM generate_series($i, $((i + batch - 1 < rows ? i + batch - 1 : rows))) g;"
	done
} >"$work/load.sql"

echo "round,type,lookups,median_ms,p999_ms,max_ms,load_s" >"$out"
fbf_log "cuckoo_growth_bench: $(date -u +%FT%TZ) on $(uname -n), $rows rows, $batch a statement, $rounds rounds"
for ((r = 1; r <= rounds; r++)); do
	for type in cuckoo hash btree; do
		q "DROP TABLE IF EXISTS t"
		q "CREATE TABLE t (k int8, pad text) WITH (autovacuum_enabled = off)"
		q "CREATE INDEX t_k ON t USING $type (k)"
		q "CHECKPOINT"
		rm -f "$work"/lookups.*
		(cd "$work" && PGOPTIONS="-c enable_seqscan=off -c enable_bitmapscan=off" \
			exec pgbench -n -M prepared -c 1 -T 600 -l --log-prefix="$work/lookups" \
			-f "$work/lookup.sql" >"$work/pgbench.out" 2>&1) &
		reader=$!
		sleep 1
		start=$(date +%s.%N)
		psql -X -q -v ON_ERROR_STOP=1 -f "$work/load.sql" >/dev/null
		end=$(date +%s.%N)
		# end the reader: its backend goes, the client aborts, pgbench
		# exits and flushes its log
		q "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'pgbench'" >/dev/null
		wait "$reader" 2>/dev/null || true
		# pgbench -l: client tx latency_us script epoch_s epoch_us (at the end)
		cat "$work"/lookups.* | awk -v s="$start" -v e="$end" '{
				done = $5 + $6 / 1e6; began = done - $3 / 1e6;
				if (began >= s && done <= e) print $3 / 1000.0 }' | sort -g >"$work/lat"
		n=$(wc -l <"$work/lat")
		if [ "$n" -eq 0 ]; then
			echo "no lookups logged for $type" >&2
			cat "$work/pgbench.out" >&2
			exit 1
		fi
		median=$(awk -v n="$n" 'NR == int((n + 1) / 2) { printf "%.3f", $1 }' "$work/lat")
		p999=$(awk -v n="$n" 'NR == (int(n * 0.999) > 0 ? int(n * 0.999) : 1) { printf "%.3f", $1 }' "$work/lat")
		max=$(tail -1 "$work/lat" | awk '{ printf "%.3f", $1 }')
		load=$(echo "$end - $start" | bc)
		printf 'round %d %-7s lookups %7d  median %7s ms  p99.9 %8s ms  max %9s ms  load %6.1f s\n' \
			"$r" "$type" "$n" "$median" "$p999" "$max" "$load"
		echo "$r,$type,$n,$median,$p999,$max,$load" >>"$out"
	done
done

if [ "$out" != /dev/null ]; then
	echo "medians over $rounds rounds (max: the worst round):"
	for type in cuckoo hash btree; do
		grep ",$type," "$out" | awk -F, -v t="$type" '
			{ n[NR] = $3; m[NR] = $4; p[NR] = $5; x[NR] = $6; l[NR] = $7; if ($6 > worst) worst = $6 }
			function med(a, k,   i, j, tmp) {
				for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
					if (a[j] + 0 < a[i] + 0) { tmp = a[i]; a[i] = a[j]; a[j] = tmp }
				return a[int((k + 1) / 2)]
			}
			END { printf "%-7s lookups %7d  median %7.3f ms  p99.9 %8.3f ms  max %9.3f ms (worst %9.3f)  load %6.1f s\n",
				t, med(n, NR), med(m, NR), med(p, NR), med(x, NR), worst, med(l, NR) }'
	done
fi
