#!/usr/bin/env bash
# test/bench/cuckoo_bench.sh: the cuckoo index access method against btree,
# hash and contrib/bloom on equality lookups, in one run.
#
#   bash test/bench/cuckoo_bench.sh
#
# Environment (defaults in brackets; the defaults take about 10 minutes):
#   CUCKOO_BENCH_SECONDS        pgbench seconds per present-key run [15]
#   CUCKOO_BENCH_COLD_SECONDS   seconds of deleted-key pass 1 [3]
#   CUCKOO_BENCH_PASS_SECONDS   seconds of deleted-key passes 2 and 3 [5]
#   CUCKOO_BENCH_SWEEP_SECONDS  seconds per point of the sweep [10]
#   CUCKOO_BENCH_ROUNDS         builds, present-key runs, and deleted-key
#                               passes 2 and 3 per index type; the median
#                               is reported [3]
#   CUCKOO_BENCH_ROWS           rows of the table (even) [1000000]
#   CUCKOO_BENCH_PASS_KEYS      deleted keys the passes probe [all of them:
#                               rows / 2]
# e.g. CUCKOO_BENCH_SECONDS=2 CUCKOO_BENCH_COLD_SECONDS=1
# CUCKOO_BENCH_PASS_SECONDS=1 CUCKOO_BENCH_SWEEP_SECONDS=1
# CUCKOO_BENCH_ROUNDS=1 CUCKOO_BENCH_ROWS=200000 for a one-minute smoke run.
#
# Scratch cluster (fbf preloaded; fsync off, as test/lib.sh sets it: the
# lookups are read-only), shared_buffers 1GB so that every table and index
# of the run stays cached (this measures CPU and buffer work, not I/O),
# autovacuum off (VACUUM runs where the protocol says), builds without
# parallel workers (max_parallel_maintenance_workers = 0) and with 256MB of
# maintenance_work_mem (btree's sort stays in memory).  pg_prewarm loads
# each table and index before it is measured, and a CHECKPOINT precedes
# every measured run.
#
# One table t(k int8, pad text, k4 int4): keys 1..rows inserted in shuffled
# order, pad = md5(k), k4 = k.  contrib/bloom has operator classes for int4
# and text only, so the bloom index is on k4 (same values; the column costs
# the heap nothing: rows are 72 bytes with or without it).  Indexes, each
# alone on its table so that every plan is unambiguous:
#   btree   USING btree (k)
#   hash    USING hash (k)
#   cuckoo  USING cuckoo (k)                       default options
#   bloom   USING bloom (k4) WITH (length = 80, col1 = 8)
# (one column: col1 = 8 gives about no false positives, where the
# documentation's col1 = 2, meant for many columns, gives ~300 per lookup).
#
# 1. Per index type, ROUNDS times (types interleaved): CREATE INDEX timed
#    with clock_timestamp() around it, pg_relation_size, then pgbench
#    (-M prepared, 2 clients, SECONDS) on present keys:
#        \set k random(1, rows)
#        SELECT pad FROM t WHERE k = :k;          (bloom: k4 = :k)
#    Medians; and cuckoo / hash, the targets of the cached metapage
#    (lookups/s >= 1.05, buffers per lookup <= 1), median and per round.
#    First round: the generic plan must use the index, and the
#    buffers per lookup are the mean of EXPLAIN (ANALYZE, BUFFERS) over 200
#    random present keys (every plan checked for the index's name); and
#    over 2,000 absent keys (rows + 1 ..), with the rows the index returned
#    that the recheck removed: false positives, each a heap visit.  Btree
#    is also built with 2 parallel workers, for information.
# 2. Deleted keys.  One copy d_<type> of t per index type (same physical
#    order), all four at once: CREATE INDEX, VACUUM ANALYZE, DELETE the
#    even keys (50%).  Then each step below runs for the four types in
#    turn (so the protocol is the same for every type, and a slow spell of
#    the machine hits one measurement, not one type):
#      pass 1  COLD_SECONDS of lookups of deleted keys never probed before
#              (the pass set, PASS_KEYS keys in a golden-ratio permutation,
#              each client walking its half): cold entries, the heap says
#              dead, kill_prior_tuple marks them.  Then, untimed, the rest
#              of the set, so that every key of the set has been probed
#              once, as fast or slow as the index was
#      pass 2  PASS_SECONDS of lookups of the same keys, before VACUUM
#              (ROUNDS times, median)
#      sweep   before VACUUM, after the passes: lookups where 0, 25, 50, 75,
#              100% of the probed keys are deleted (drawn from the keys the
#              passes killed; present keys are the odd ones), SWEEP_SECONDS
#              each
#      VACUUM (INDEX_CLEANUP ON)
#      pass 3  PASS_SECONDS of lookups of the same keys, after VACUUM
#              (ROUNDS times, median)
#    Bloom's scans are bitmap scans, which kill nothing, and a lookup reads
#    the whole index: its pass 1 has no untimed rest.
#    Buffers per deleted-key lookup (EXPLAIN, 100 keys of the pass set) cold
#    (before pass 1; those 100 keys are then already killed when pass 1
#    reaches them), after pass 2 and after VACUUM.
#
# Every ratio is against btree measured in the same run and state.  Prints
# tables; writes docs/figures/cuckoo.csv, docs/figures/cuckoo_sweep.csv and,
# with gnuplot (installed from Debian's packages if missing),
# docs/figures/cuckoo_sweep.png.  Not part of the tests.
set -euo pipefail

. "$(dirname "$0")/../lib.sh"
cd "$FBF_ROOT"

SECS=${CUCKOO_BENCH_SECONDS:-15}
SWEEP_SECS=${CUCKOO_BENCH_SWEEP_SECONDS:-10}
COLD_SECS=${CUCKOO_BENCH_COLD_SECONDS:-3}
PASS_SECS=${CUCKOO_BENCH_PASS_SECONDS:-5}
ROUNDS=${CUCKOO_BENCH_ROUNDS:-3}
ROWS=${CUCKOO_BENCH_ROWS:-1000000}
NDEL=$((ROWS / 2))
PASS=${CUCKOO_BENCH_PASS_KEYS:-$NDEL}
CLIENTS=2
TYPES="btree hash cuckoo bloom"
FRACTIONS="0 25 50 75 100"
CSV=docs/figures/cuckoo.csv
SWEEP_CSV=docs/figures/cuckoo_sweep.csv
PNG=docs/figures/cuckoo_sweep.png

if [ $((ROWS % 2)) -ne 0 ] || [ "$PASS" -gt "$NDEL" ] || [ $((PASS % CLIENTS)) -ne 0 ]; then
	echo "CUCKOO_BENCH_ROWS must be even, CUCKOO_BENCH_PASS_KEYS <= rows / 2 and a multiple of $CLIENTS" >&2
	exit 1
fi
PER_CLIENT=$((PASS / CLIENTS))

# The deleted keys in probe order: j -> 2 * (1 + (A * j + B) mod NDEL), a
# bijection of 0 .. NDEL - 1 when gcd(A, NDEL) = 1.  A near NDEL / phi
# spreads consecutive probes over the whole key range.
gcd() { local a=$1 b=$2 t; while [ "$b" -ne 0 ]; do t=$((a % b)); a=$b; b=$t; done; echo "$a"; }
PERM_A=$((NDEL * 618034 / 1000000))
while [ "$(gcd "$PERM_A" "$NDEL")" -ne 1 ]; do PERM_A=$((PERM_A + 1)); done
PERM_B=12345
perm_expr() { echo "2 * (1 + ($PERM_A * ($1) + $PERM_B) % $NDEL)"; }

if ! command -v gnuplot >/dev/null; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null
fi

work=""
trap 'fbf_cluster_stop; if [ -n "$work" ]; then rm -rf "$work"; fi' EXIT
fbf_install_deps
fbf_build_install
fbf_cluster_start "shared_buffers = '1GB'" "autovacuum = off" \
	"maintenance_work_mem = '256MB'" "max_parallel_maintenance_workers = 0" \
	"max_wal_size = '4GB'" "checkpoint_timeout = '30min'"

work=$(mktemp -d /tmp/fbf-cuckoo-bench.XXXXXX)
# other work on the machine skews every number: note the load around the run
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
PGBENCH="$PG_BINDIR/pgbench"
psqlq() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
val() { psql -X -q -At -F ' ' -v ON_ERROR_STOP=1 -c "$1"; }
# mean buffers per lookup (2 decimals) of a query over keys, checking the index
buffers() { val "SELECT round(buffers::numeric, 2) FROM bench_explain('$1', $2, '$3')"; }
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
num() { awk -v v="$1" -v d="${2:-0}" 'BEGIN { printf "%.*f", d, v }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

col() { if [ "$1" = bloom ]; then echo k4; else echo k; fi; }
coltype() { if [ "$1" = bloom ]; then echo int4; else echo int8; fi; }
ddl() {	# type table index
	case $1 in
	bloom) echo "CREATE INDEX $3 ON $2 USING bloom (k4) WITH (length = 80, col1 = 8)" ;;
	btree_parallel) echo "CREATE INDEX $3 ON $2 USING btree (k)" ;;
	*) echo "CREATE INDEX $3 ON $2 USING $1 (k)" ;;
	esac
}

# tps of one pgbench run; extra arguments go to pgbench (-T or -t, -D)
bench() {
	local script=$1
	shift
	if ! "$PGBENCH" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" "$@" -f "$work/$script.sql" \
		>"$work/$script.out" 2>"$work/$script.err"; then
		cat "$work/$script.err" "$work/$script.out" >&2
		return 1
	fi
	sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$work/$script.out"
}

# The generic plan (what pgbench -M prepared ends up running) must use the
# index.  type table index
check_generic_plan() {
	local plan
	plan=$(psql -X -q -At -v ON_ERROR_STOP=1 <<SQL
SET plan_cache_mode = force_generic_plan;
PREPARE q($(coltype "$1")) AS SELECT pad FROM $2 WHERE $(col "$1") = \$1;
EXPLAIN (COSTS OFF) EXECUTE q(1);
SQL
)
	if ! grep -Eq "(using|on) $3( |\$)" <<<"$plan"; then
		echo "the generic plan of the $1 lookup does not use index $3:" >&2
		echo "$plan" >&2
		return 1
	fi
}

prewarm() { val "SELECT sum(pg_prewarm(c)) FROM unnest(ARRAY[$(printf "'%s'," "$@" | sed 's/,$//')]::regclass[]) c" >/dev/null; }

fbf_log "creating the table: $ROWS rows"
psqlq <<SQL
CREATE EXTENSION fbf;
CREATE EXTENSION bloom;
CREATE EXTENSION pg_prewarm;
DO \$\$ BEGIN PERFORM setseed(0.42); END \$\$;
CREATE TABLE t (k int8, pad text, k4 int4);
INSERT INTO t SELECT g, md5(g::text), g FROM generate_series(1, $ROWS) g ORDER BY random();
VACUUM ANALYZE t;

-- milliseconds of one DDL statement
CREATE FUNCTION bench_ms(stmt text) RETURNS float8 LANGUAGE plpgsql AS \$\$
DECLARE
	t0 timestamptz := clock_timestamp();
BEGIN
	EXECUTE stmt;
	RETURN extract(epoch FROM clock_timestamp() - t0) * 1000;
END \$\$;

-- mean shared buffers (hit + read) of EXPLAIN (ANALYZE, BUFFERS) of
-- format(query, key) over the keys, and mean rows removed by the index
-- recheck (false positives that cost a heap visit); every plan must use
-- index "want"
CREATE FUNCTION bench_explain(query text, keys int8[], want text,
	OUT buffers float8, OUT rechecked float8)
LANGUAGE plpgsql AS \$\$
DECLARE
	plan json;
	key int8;
BEGIN
	buffers := 0;
	rechecked := 0;
	-- a first lookup in a session also reads catalog pages (support
	-- functions): warm up with key 1, present in every table here
	EXECUTE 'EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) ' || format(query, 1) INTO plan;
	FOREACH key IN ARRAY keys LOOP
		EXECUTE 'EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) ' || format(query, key) INTO plan;
		IF position(format('"Index Name": "%s"', want) IN plan::text) = 0 THEN
			RAISE EXCEPTION 'the plan of % does not use %: %', format(query, key), want, plan;
		END IF;
		buffers := buffers + (plan->0->'Plan'->>'Shared Hit Blocks')::bigint
			+ (plan->0->'Plan'->>'Shared Read Blocks')::bigint;
		rechecked := rechecked + coalesce((plan->0->'Plan'->>'Rows Removed by Index Recheck')::bigint, 0);
	END LOOP;
	buffers := buffers / cardinality(keys);
	rechecked := rechecked / cardinality(keys);
END \$\$;
SQL

# ---- 1. size, build time, present-key lookups ----

for type in $TYPES; do
	cat >"$work/present_$type.sql" <<EOF
\set k random(1, $ROWS)
SELECT pad FROM t WHERE $(col "$type") = :k;
EOF
done

declare -A BUILD SIZE TPS BUF FP
for r in $(seq 1 "$ROUNDS"); do
	for type in $TYPES btree_parallel; do
		ix="t_$type"
		prewarm t
		psqlq -c "CHECKPOINT"
		if [ "$type" = btree_parallel ]; then
			BUILD[$type]="${BUILD[$type]:-} $(val "SET max_parallel_maintenance_workers = 2; SELECT bench_ms('$(ddl "$type" t "$ix")')")"
			psqlq -c "DROP INDEX $ix"
			continue
		fi
		fbf_log "round $r: $type"
		BUILD[$type]="${BUILD[$type]:-} $(val "SELECT bench_ms('$(ddl "$type" t "$ix")')")"
		SIZE[$type]=$(val "SELECT pg_relation_size('$ix')")
		prewarm t "$ix"
		if [ "$r" = 1 ]; then
			check_generic_plan "$type" t "$ix"
			BUF[present,$type]=$(buffers "SELECT pad FROM t WHERE $(col "$type") = %s" \
				"(SELECT array_agg(1 + floor(random() * $ROWS)::int8) FROM generate_series(1, 200))" "$ix")
			# keys that were never in the table: the index's false positives
			read -r BUF[absent,$type] FP[$type] <<<"$(val "SELECT round(buffers::numeric, 3), round(rechecked::numeric, 4)
				FROM bench_explain('SELECT pad FROM t WHERE $(col "$type") = %s',
					(SELECT array_agg(g) FROM generate_series($((ROWS + 1)), $((ROWS + 2000))) g), '$ix')")"
		fi
		psqlq -c "CHECKPOINT"
		TPS[present,$type]="${TPS[present,$type]:-} $(bench "present_$type" -T "$SECS")"
		psqlq -c "DROP INDEX $ix"
	done
done

# ---- 2. deleted keys: passes, sweep, VACUUM ----

# one copy of t per index type, all present at once, so that every step
# runs for the four types one after the other (a slow spell of the machine
# then hits one measurement, not one index type)
for type in $TYPES; do
	c=$(col "$type")
	# each client walks its half of the pass set once (pass 1) ...
	cat >"$work/pass_$type.sql" <<EOF
\set i :i + 1
\set k $(perm_expr ":client_id * $PER_CLIENT + :i - 1")
SELECT pad FROM d_$type WHERE $c = :k;
EOF
	# ... or round and round (passes 2 and 3)
	cat >"$work/wpass_$type.sql" <<EOF
\set i :i + 1
\set k $(perm_expr ":client_id * $PER_CLIENT + (:i - 1) % $PER_CLIENT")
SELECT pad FROM d_$type WHERE $c = :k;
EOF
	for f in $FRACTIONS; do
		cat >"$work/sweep_${type}_$f.sql" <<EOF
\set u random(1, 100)
\set k case when :u <= $f then $(perm_expr "random(0, $((PASS - 1)))") else 2 * random(1, $NDEL) - 1 end
SELECT pad FROM d_$type WHERE $c = :k;
EOF
	done
done
# keys of the pass set for EXPLAIN: the first 100 of the probe order (cold),
# and 100 at random from the set (killed, vacuumed)
cold_keys="(SELECT array_agg($(perm_expr "j::int8")) FROM generate_series(0, 99) j)"
set_keys="(SELECT array_agg($(perm_expr "floor(random() * $PASS)::int8")) FROM generate_series(1, 100))"
dbuffers() { buffers "SELECT pad FROM d_$1 WHERE $(col "$1") = %s" "$2" "d_$1_k"; }

# Pass 1: COLD_SECS of lookups of keys not probed before (each client walks
# its half of the pass set), then, untimed, the rest of the set, so that
# every deleted key has been probed once whatever the index's speed.  A
# fixed-work pass would be timed to its last client: on this 2-core machine
# one of the two clients often finishes seconds before the other, and a
# lone client runs at a fraction of the rate.  Bloom kills nothing: no rest.
# Per-client counts (one client per pgbench thread) from the aggregated log.
declare -A COLD_WARN
cold_pass() {
	local type=$1 tps f n
	psqlq -c "CHECKPOINT"
	rm -f "$work/cold_$type".*
	tps=$(bench "pass_$type" -T "$COLD_SECS" -D i=0 -l --aggregate-interval=1 --log-prefix="$work/cold_$type")
	for f in "$work/cold_$type".*; do
		n=$(awk '{ s += $2 } END { print s + 0 }' "$f")
		if [ "$n" -gt "$PER_CLIENT" ]; then
			COLD_WARN[$type]="a client ran out of cold keys ($n > $PER_CLIENT): shorten CUCKOO_BENCH_COLD_SECONDS"
		fi
	done
	if [ "$type" != bloom ]; then
		bench "pass_$type" -t "$PER_CLIENT" -D i=0 >/dev/null
	fi
	echo "$tps"
}
# passes 2 and 3: PASS_SECS of lookups of keys of the pass set, round and round
warm_pass() {
	psqlq -c "CHECKPOINT"
	bench "wpass_$1" -T "$PASS_SECS" -D i=0
}

# ROUNDS interleaved warm passes of every index type, into TPS[$1,type]
warm_rounds() {
	local pass=$1 label=$2 r type
	for r in $(seq 1 "$ROUNDS"); do
		for type in $TYPES; do
			fbf_log "deleted keys, $label, round $r: $type"
			TPS[$pass,$type]="${TPS[$pass,$type]:-} $(warm_pass "$type")"
		done
	done
}

fbf_log "deleted keys: building the four tables"
for type in $TYPES; do
	psqlq <<SQL
CREATE TABLE d_$type AS SELECT * FROM t;
$(ddl "$type" "d_$type" "d_${type}_k");
VACUUM ANALYZE d_$type;
DELETE FROM d_$type WHERE k % 2 = 0;
SQL
done
psqlq -c "DROP TABLE t" -c "CHECKPOINT"
for type in $TYPES; do
	prewarm "d_$type" "d_${type}_k"
	check_generic_plan "$type" "d_$type" "d_${type}_k"
	BUF[cold,$type]=$(dbuffers "$type" "$cold_keys")
done
for type in $TYPES; do
	fbf_log "deleted keys, pass 1: $type"
	cold_pass "$type" >"$work/cold_tps"
	TPS[pass1,$type]=$(cat "$work/cold_tps")
done
warm_rounds pass2 "pass 2"
declare -A SWEEP CUCKOO_STATE
for type in $TYPES; do
	BUF[killed,$type]=$(dbuffers "$type" "$set_keys")
done
CUCKOO_STATE[killed]=$(val "SELECT format('entries %s, dead (killed) %s, overflow pages %s', entries, dead_entries, overflow_pages) FROM cuckoo_index_stats('d_cuckoo_k')")
for f in $FRACTIONS; do
	for type in $TYPES; do
		fbf_log "sweep, $f% deleted: $type"
		psqlq -c "CHECKPOINT"
		SWEEP[$f,$type]=$(bench "sweep_${type}_$f" -T "$SWEEP_SECS")
	done
done
for type in $TYPES; do
	fbf_log "VACUUM: $type"
	psqlq -c "VACUUM (INDEX_CLEANUP ON) d_$type"
	prewarm "d_$type" "d_${type}_k"
	BUF[vacuumed,$type]=$(dbuffers "$type" "$set_keys")
	SIZE[vacuumed,$type]=$(val "SELECT pg_relation_size('d_${type}_k')")
done
warm_rounds pass3 "after VACUUM"
CUCKOO_STATE[vacuumed]=$(val "SELECT format('entries %s, dead %s; verify: %s entries, %s heap tuples', s.entries, s.dead_entries, v.entries, v.heap_tuples) FROM cuckoo_index_stats('d_cuckoo_k') s, cuckoo_index_verify('d_cuckoo_k') v")
rm -rf "$work"

# ---- results ----

declare -A MED
for type in $TYPES btree_parallel; do
	MED[build,$type]=$(echo "${BUILD[$type]}" | median)
done
for type in $TYPES; do
	for m in present pass2 pass3; do
		MED[$m,$type]=$(echo "${TPS[$m,$type]}" | median)
	done
	MED[pass1,$type]=${TPS[pass1,$type]}
done

{
	echo "index,metric,value,ratio_to_btree,runs"
	for type in $TYPES; do
		echo "$type,size_bytes,${SIZE[$type]},$(ratio "${SIZE[$type]}" "${SIZE[btree]}"),"
	done
	for type in $TYPES btree_parallel; do
		echo "$type,build_ms_median,${MED[build,$type]},$(ratio "${MED[build,$type]}" "${MED[build,btree]}"),${BUILD[$type]# }"
	done
	for type in $TYPES; do
		echo "$type,present_tps_median,${MED[present,$type]},$(ratio "${MED[present,$type]}" "${MED[present,btree]}"),${TPS[present,$type]# }"
	done
	echo "cuckoo,present_tps_ratio_to_hash,$(ratio "${MED[present,cuckoo]}" "${MED[present,hash]}"),,"
	echo "cuckoo,present_buffers_ratio_to_hash,$(ratio "${BUF[present,cuckoo]}" "${BUF[present,hash]}"),,"
	for type in $TYPES; do
		echo "$type,present_buffers_per_lookup,${BUF[present,$type]},$(ratio "${BUF[present,$type]}" "${BUF[present,btree]}"),"
	done
	for type in $TYPES; do
		echo "$type,absent_buffers_per_lookup,${BUF[absent,$type]},$(ratio "${BUF[absent,$type]}" "${BUF[absent,btree]}"),"
	done
	for type in $TYPES; do
		echo "$type,absent_false_positives_per_lookup,${FP[$type]},,"
	done
	for p in pass1 pass2 pass3; do
		for type in $TYPES; do
			echo "$type,deleted_${p}_tps,${MED[$p,$type]},$(ratio "${MED[$p,$type]}" "${MED[$p,btree]}"),${TPS[$p,$type]# }"
		done
	done
	for s in cold killed vacuumed; do
		for type in $TYPES; do
			echo "$type,deleted_buffers_per_lookup_$s,${BUF[$s,$type]},$(ratio "${BUF[$s,$type]}" "${BUF[$s,btree]}"),"
		done
	done
	for type in $TYPES; do
		echo "$type,size_bytes_after_delete_vacuum,${SIZE[vacuumed,$type]},$(ratio "${SIZE[vacuumed,$type]}" "${SIZE[vacuumed,btree]}"),"
	done
} >"$CSV"
{
	echo "deleted_pct,btree,hash,cuckoo,bloom"
	for f in $FRACTIONS; do
		echo "$f,${SWEEP[$f,btree]},${SWEEP[$f,hash]},${SWEEP[$f,cuckoo]},${SWEEP[$f,bloom]}"
	done
} >"$SWEEP_CSV"

row() {	# label, then one value per type; prints values and ratios to btree
	local label=$1 b=$2
	shift
	printf '%-34s' "$label"
	for v in "$@"; do printf ' %12s' "$v"; done
	printf '   |'
	for v in "${@:2}"; do printf ' %6s' "$(ratio "$v" "$b")"; done
	printf '\n'
}
echo
echo "$ROWS rows, pgbench -M prepared, $CLIENTS clients; present-key runs ${SECS}s, median of $ROUNDS"
printf '%-34s %12s %12s %12s %12s   | %6s %6s %6s  (/ btree)\n' "" btree hash cuckoo bloom hash cuckoo bloom
row "index size (bytes)" "${SIZE[btree]}" "${SIZE[hash]}" "${SIZE[cuckoo]}" "${SIZE[bloom]}"
row "build ms (median)" "$(num "${MED[build,btree]}" 1)" "$(num "${MED[build,hash]}" 1)" "$(num "${MED[build,cuckoo]}" 1)" "$(num "${MED[build,bloom]}" 1)"
row "present keys: lookups/s" "$(num "${MED[present,btree]}")" "$(num "${MED[present,hash]}")" "$(num "${MED[present,cuckoo]}")" "$(num "${MED[present,bloom]}")"
row "present keys: buffers/lookup" "${BUF[present,btree]}" "${BUF[present,hash]}" "${BUF[present,cuckoo]}" "${BUF[present,bloom]}"
row "absent keys: buffers/lookup" "${BUF[absent,btree]}" "${BUF[absent,hash]}" "${BUF[absent,cuckoo]}" "${BUF[absent,bloom]}"
echo "cuckoo / hash (targets: lookups/s >= 1.05, buffers/lookup <= 1.00): present keys: lookups/s $(ratio "${MED[present,cuckoo]}" "${MED[present,hash]}"), buffers/lookup $(ratio "${BUF[present,cuckoo]}" "${BUF[present,hash]}")"
echo "runs, cuckoo / hash per round: $(paste -d' ' <(tr ' ' '\n' <<<"${TPS[present,cuckoo]# }") <(tr ' ' '\n' <<<"${TPS[present,hash]# }") | while read -r c h; do printf '%s ' "$(ratio "$c" "$h")"; done)"
echo "absent keys: false positives (heap rows rechecked) per lookup: btree ${FP[btree]}, hash ${FP[hash]}, cuckoo ${FP[cuckoo]}, bloom ${FP[bloom]}"
echo "btree built with 2 parallel workers: $(num "${MED[build,btree_parallel]}" 1) ms; cuckoo / that $(ratio "${MED[build,cuckoo]}" "${MED[build,btree_parallel]}")"
echo "runs: build ms: btree${BUILD[btree]}, hash${BUILD[hash]}, cuckoo${BUILD[cuckoo]}, bloom${BUILD[bloom]}, btree parallel${BUILD[btree_parallel]}"
echo "runs: lookups/s: btree${TPS[present,btree]}, hash${TPS[present,hash]}, cuckoo${TPS[present,cuckoo]}, bloom${TPS[present,bloom]}"
echo
echo "deleted keys (50% of rows deleted; pass set $PASS keys; pass 1: ${COLD_SECS}s of keys probed for the first time; passes 2 and 3: ${PASS_SECS}s, median of $ROUNDS)"
for type in $TYPES; do
	if [ -n "${COLD_WARN[$type]:-}" ]; then echo "WARNING: pass 1 of $type: ${COLD_WARN[$type]}"; fi
done
row "pass 1 (cold): lookups/s" "$(num "${MED[pass1,btree]}")" "$(num "${MED[pass1,hash]}")" "$(num "${MED[pass1,cuckoo]}")" "$(num "${MED[pass1,bloom]}")"
row "pass 2 (before VACUUM), median" "$(num "${MED[pass2,btree]}")" "$(num "${MED[pass2,hash]}")" "$(num "${MED[pass2,cuckoo]}")" "$(num "${MED[pass2,bloom]}")"
row "after VACUUM, median" "$(num "${MED[pass3,btree]}")" "$(num "${MED[pass3,hash]}")" "$(num "${MED[pass3,cuckoo]}")" "$(num "${MED[pass3,bloom]}")"
row "buffers/lookup, cold" "${BUF[cold,btree]}" "${BUF[cold,hash]}" "${BUF[cold,cuckoo]}" "${BUF[cold,bloom]}"
row "buffers/lookup, killed" "${BUF[killed,btree]}" "${BUF[killed,hash]}" "${BUF[killed,cuckoo]}" "${BUF[killed,bloom]}"
row "buffers/lookup, after VACUUM" "${BUF[vacuumed,btree]}" "${BUF[vacuumed,hash]}" "${BUF[vacuumed,cuckoo]}" "${BUF[vacuumed,bloom]}"
echo "runs: pass 2: btree${TPS[pass2,btree]}, hash${TPS[pass2,hash]}, cuckoo${TPS[pass2,cuckoo]}, bloom${TPS[pass2,bloom]}"
echo "runs: after VACUUM: btree${TPS[pass3,btree]}, hash${TPS[pass3,hash]}, cuckoo${TPS[pass3,cuckoo]}, bloom${TPS[pass3,bloom]}"
row "index size after VACUUM (bytes)" "${SIZE[vacuumed,btree]}" "${SIZE[vacuumed,hash]}" "${SIZE[vacuumed,cuckoo]}" "${SIZE[vacuumed,bloom]}"
echo "cuckoo after pass 2: ${CUCKOO_STATE[killed]}"
echo "cuckoo after VACUUM: ${CUCKOO_STATE[vacuumed]}"
echo
echo "sweep: lookups/s by share of probed keys that were deleted (before VACUUM, after the passes; ${SWEEP_SECS}s each)"
for f in $FRACTIONS; do
	row "$f% deleted" "$(num "${SWEEP[$f,btree]}")" "$(num "${SWEEP[$f,hash]}")" "$(num "${SWEEP[$f,cuckoo]}")" "$(num "${SWEEP[$f,bloom]}")"
done

gnuplot <<GP
set terminal pngcairo size 1000,440 font "sans,10" noenhanced
set output "$PNG"
set datafile separator ","
set multiplot layout 1,2 title "Lookups of present and deleted keys: $ROWS rows, 50% deleted, before VACUUM,\nafter passes that killed the deleted keys' entries (pgbench -M prepared, $CLIENTS clients, ${SWEEP_SECS} s per point)"
set grid
set key center right
set xlabel "share of probed keys that were deleted (%)"
set xtics 25
set xrange [-5:105]
set ylabel "lookups per second"
set logscale y
set format y "%.0f"
set title "throughput"
plot "$SWEEP_CSV" using 1:2 skip 1 with linespoints lw 2 pt 7 lc rgb "black" title "btree", \
     "" using 1:3 skip 1 with linespoints lw 2 pt 5 lc rgb "#1b9e77" title "hash", \
     "" using 1:4 skip 1 with linespoints lw 2 pt 9 lc rgb "#d95f02" title "cuckoo", \
     "" using 1:5 skip 1 with linespoints lw 2 pt 13 lc rgb "#7570b3" title "bloom (k4, length 80, col1 8)"
unset logscale y
set format y "%g"
set ylabel "lookups per second / btree's"
set title "ratio to btree (bloom: see the table)"
set yrange [0:*]
set key bottom right
plot "$SWEEP_CSV" using 1:(\$3 / \$2) skip 1 with linespoints lw 2 pt 5 lc rgb "#1b9e77" title "hash / btree", \
     "" using 1:(\$4 / \$2) skip 1 with linespoints lw 2 pt 9 lc rgb "#d95f02" title "cuckoo / btree", \
     1 with lines dashtype 2 lc rgb "gray" notitle
unset multiplot
GP
echo
echo "load average (1, 5, 15 min) at the start: $LOAD_START; at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "wrote $CSV, $SWEEP_CSV, $PNG"
