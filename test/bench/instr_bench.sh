#!/usr/bin/env bash
# test/bench/instr_bench.sh: the instructions a server executes per
# increment against per plain UPDATE, counted by callgrind: a measure of
# the hot path's own work that the machine's other load does not move
# (the same binary and inputs count the same, whatever else runs), for
# changes too small for tps to tell apart on a shared machine.
#
#   bash test/bench/instr_bench.sh [operations]     # default 20000: ~3 min
#
#   FBF_INSTR_KEEP=DIR keeps the callgrind profiles there (callgrind.SIDE.N,
#   for callgrind_annotate --inclusive=yes).
#
# Builds and installs fbf, makes a scratch cluster (as the postgres user;
# shared_preload_libraries = 'fbf', the worker off, fsync off) with the
# tables of counter_bench.sh's section a (1,000 keys; a counter with 16
# shard rows a key, planned for 2,000 operations a second over a
# retention of 10 minutes: a window of the size counter_bench.sh's
# grows to, which never needs to grow here, and whose refreshes come
# every 40 s however much callgrind slows the operations), then runs the
# server in single-user mode under `valgrind --tool=callgrind`, one run
# per side and count: a procedure that makes N operations, each in a
# transaction of its own (COMMIT in the loop), on a key and seq that are
# fixed functions of the loop's counter:
#   plain  UPDATE plain SET value = value + 1 WHERE key = $k AND shard = 0
#   fbf    SELECT idempotent_increment('idem', $k, 7, seq, 1) (a query
#          through SPI and the executor, as a client's statement), seqs
#          spread over the int8 range (every operation new, as
#          counter_bench.sh's random seqs)
# Each side runs with N and 2N operations; (Ir(2N) - Ir(N)) / N is its
# instructions per operation, the server's start, the setup and the
# procedure's compilation cancelled out.  Prints both, their difference
# (what an increment adds) and fbf / plain.  Network, client and kernel
# are left out, which in pgbench are about half of all CPU: the ratio is
# that of the server's own work only.  Not a test.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/bench_lib.sh"

n=${1:-20000}
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }

bench_begin instr
fbf_cluster_start "fbf.worker_enabled = off"
psqlq <<SQL
CREATE EXTENSION fbf;
CREATE TABLE plain (key text, shard int, value bigint NOT NULL DEFAULT 0, PRIMARY KEY (key, shard));
INSERT INTO plain SELECT g::text, 0, 0 FROM generate_series(1, 1000) g;
SELECT fbf_create_counter_table('idem', retention => '10 min', target_fpp => 0.001,
	expected_rate => 2000, shards => 16) \gset
INSERT INTO idem SELECT g::text, s, 0 FROM generate_series(1, 1000) g, generate_series(0, 15) s;
CREATE PROCEDURE run_plain(n int, first int) LANGUAGE plpgsql AS \$\$
BEGIN
	FOR i IN first .. first + n - 1 LOOP
		UPDATE plain SET value = value + 1 WHERE key = (1 + (i * 7919) % 1000)::text AND shard = 0;
		COMMIT;
	END LOOP;
END \$\$;
CREATE PROCEDURE run_fbf(n int, first int) LANGUAGE plpgsql AS \$\$
DECLARE
	dismissed int := 0;
	applied bool;
BEGIN
	FOR i IN first .. first + n - 1 LOOP
		-- a query, as a client's SELECT is (an IF would call it directly)
		SELECT idempotent_increment('idem', (1 + (i * 7919) % 1000)::text, 7::int8,
									pg_catalog.hashint8extended(i, 42), 1::int8)
			INTO applied;
		IF NOT applied THEN
			dismissed := dismissed + 1;
		END IF;
		COMMIT;
	END LOOP;
	RAISE WARNING 'fbf dismissed % of % new operations', dismissed, n;
END \$\$;
VACUUM ANALYZE plain, idem;
SQL
fbf_log "stopping the cluster: single-user runs follow"
as_postgres "$PG_BINDIR/pg_ctl" -D "$FBF_SCRATCH/data" -w stop >/dev/null

# instructions of one single-user run of `CALL run_SIDE(count, first)`
count_ir() {
	local side=$1 count=$2 first=$3 out="$FBF_SCRATCH/callgrind.$side.$2"
	echo "CALL run_$side($count, $first);" |
		as_postgres valgrind --tool=callgrind --callgrind-out-file="$out" \
			"$PG_BINDIR/postgres" --single -D "$FBF_SCRATCH/data" -c fsync=off postgres \
			>"$FBF_SCRATCH/single.$side.$count.log" 2>&1 &&
		! grep -q 'ERROR' "$FBF_SCRATCH/single.$side.$count.log" ||
		{ grep -v '^==' "$FBF_SCRATCH/single.$side.$count.log" | tail -20 >&2; return 1; }
	sed -n 's/^summary: \([0-9]*\).*/\1/p' "$out"
	[ -z "${FBF_INSTR_KEEP:-}" ] || { mkdir -p "$FBF_INSTR_KEEP"; cp "$out" "$FBF_INSTR_KEEP/"; }
}

declare -A per_op
for side in plain fbf; do
	fbf_log "$side: $n and $((2 * n)) operations under callgrind"
	a=$(count_ir "$side" "$n" 1)
	b=$(count_ir "$side" $((2 * n)) $((n + 1)))
	per_op[$side]=$(( (b - a) / n ))
	echo "$side: $a instructions for $n operations, $b for $((2 * n)): ${per_op[$side]} per operation"
done
echo "instructions per operation: plain UPDATE ${per_op[plain]}, idempotent_increment ${per_op[fbf]}," \
	"added $((per_op[fbf] - per_op[plain])), fbf / plain" \
	"$(awk -v f="${per_op[fbf]}" -v p="${per_op[plain]}" 'BEGIN { printf "%.2f", f / p }')"
grep -ho 'fbf dismissed [0-9]* of [0-9]* new operations' "$FBF_SCRATCH"/single.fbf.*.log
