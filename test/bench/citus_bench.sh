#!/usr/bin/env bash
# test/bench/citus_bench.sh: idempotent_increment on a counter distributed
# with Citus against a plain distributed UPDATE, in the same run, in
# interleaved rounds, over the same keys and clients:
#   coordinator  both sent to the coordinator;
#   workers      both sent to the workers (half the clients to each; Citus
#                routes from there, locally when the key's shard is there);
#   batch        batches of 100 operations on one key through the
#                coordinator, against single increments through it
#                (operations per second).
# Clients number their operations in order (each its own seqs, per key:
# its streams), as idempotent clients do.  Reports each side's median
# transactions per second, the ratios, and the counter's dismissal rate
# (dismissed / operations, from fbf_counter_stats: every operation is new,
# so every dismissal is a false one).
#
#   bash test/bench/citus_bench.sh [rounds [seconds [clients]]]
#
#   defaults: 5 rounds of 10 s per side, 4 clients, prepared statements
#   (pgbench -M prepared: the key 'k' || $1 is a text parameter
#   concatenated); FBF_BENCH_MODE=simple sends each statement on its own
#   instead (the key 'k' || 42, a number concatenated: a stable function,
#   as users write it in SQL).  FBF_BENCH_KEY replaces the key expression
#   on both sides (default 'k' || :k; 'k' || :k::int makes it a stable
#   function of a parameter; :k makes it the text parameter itself, the
#   keys '1' to '10000'), and the tables are filled with the same keys.  FBF_BENCH_DELEGATED=1 adds a side:
#   deleg, the increment through a function of the user's own,
#   `bench_incr(key, client_id, seq, delta)` in PL/pgSQL, distributed with
#   create_distributed_function by its key and colocated with the counter,
#   so that Citus delegates the whole call to the key's worker (one round
#   trip), sent to the coordinator.  FBF_BENCH_CUSTOM=1 adds a side:
#   custom, the increment through the coordinator under plan_cache_mode =
#   force_custom_plan (planned for every execution, as before the key
#   parameter had a generic plan; as the fbf side is where its key is not
#   a parameter of its own).  FBF_BENCH_SEQS=random gives each
#   operation a random seq instead of its client's next one (the filter
#   answers such operations alone, so false dismissals at the counter's
#   target may show).  FBF_BENCH_BATCH=arrays sends a batch's client ids
#   and seqs as array parameters, as a driver sends arrays, instead of
#   arrays built from 100 expressions in the statement: the batch's
#   statement is then parameters and constants (a generic plan, as a
#   single increment's with the key :k); pgbench cannot make an array,
#   so each batch first fetches its arrays' text from the coordinator (a
#   round trip and a query more per batch, which the batch side pays).
#   Builds and installs
#   fbf (and Citus from the vendored tarball, test/lib.sh), starts a
#   coordinator and two workers on loopback ports as the postgres user
#   (shared_preload_libraries = 'citus,fbf', fsync on), and stops them on
#   exit (test/bench/citus_cluster.sh).  With PGHOST and PGPORT naming the
#   coordinator of a Citus cluster that has fbf (docs/user-guide.md,
#   "Scaling out with Citus"), runs there instead.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/citus_cluster.sh"
rounds=${1:-5}
secs=${2:-10}
clients=${3:-4}
keys=10000
mode=${FBF_BENCH_MODE:-prepared}
key=${FBF_BENCH_KEY:-"'k' || :k"}
# the keys the clients write, for filling the tables: the expression of i
fill="(${key//:k/i})::text"
if [ "${FBF_BENCH_SEQS:-ordered}" = random ]; then
	next_seq='random(1, 4611686018427387903)'
	next_batch='random(100, 4611686018427387903)'
else
	next_seq=':seq + 1'
	next_batch=':seq + 100'
fi

citus_cluster_start

psql -X -q -v ON_ERROR_STOP=1 <<SQL
DROP TABLE IF EXISTS bench_fbf, bench_plain;
SELECT fbf_create_counter_table('bench_fbf', retention => '5 min', expected_rate => 5000);
SELECT fbf_distribute_counter('bench_fbf');
CREATE TABLE bench_plain (key text NOT NULL, shard integer NOT NULL, value bigint NOT NULL DEFAULT 0,
						  PRIMARY KEY (key, shard));
SELECT create_distributed_table('bench_plain', 'key', colocate_with => 'bench_fbf');
INSERT INTO bench_plain SELECT $fill, 0, 0 FROM generate_series(1, $keys) i;
-- the counter's rows exist too, as after warm-up
SELECT count(*) FROM (SELECT idempotent_increment('bench_fbf', $fill, -1, i, 0)
						FROM generate_series(1, $keys) i) s;
SQL
delegated=${FBF_BENCH_DELEGATED:-0}
if [ "$delegated" = 1 ]; then
	psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE OR REPLACE FUNCTION bench_incr(key text, client_id bigint, seq bigint, delta bigint)
RETURNS boolean LANGUAGE plpgsql AS
$$BEGIN RETURN idempotent_increment('bench_fbf', key, client_id, seq, delta); END$$;
SELECT create_distributed_function('bench_incr(text,bigint,bigint,bigint)', '$1',
								   colocate_with => 'bench_fbf');
SQL
fi

# each transaction a new operation, numbered in order by its client as
# idempotent clients do: client :base + :client_id (base apart for each
# side and pgbench), seqs from :seq (apart for each round) up
cat >"$dir/fbf.sql" <<SQL
\set k random(1, $keys)
\set seq $next_seq
\set cid :base + :client_id
SELECT idempotent_increment('bench_fbf', $key, :cid, :seq, 1);
SQL
cat >"$dir/deleg.sql" <<SQL
\set k random(1, $keys)
\set seq $next_seq
\set cid :base + :client_id
SELECT bench_incr($key, :cid, :seq, 1);
SQL
cat >"$dir/plain.sql" <<SQL
\set k random(1, $keys)
UPDATE bench_plain SET value = value + 1 WHERE key = $key AND shard = 0;
SQL
# a batch: 100 new operations of one client on one key
{
	echo "\\set k random(1, $keys)"
	echo "\\set seq $next_batch"
	echo "\\set cid :base + :client_id"
	if [ "${FBF_BENCH_BATCH:-expressions}" = arrays ]; then
		echo "SELECT array_fill(:cid::bigint, ARRAY[100])::text AS cids, ARRAY(SELECT :seq::bigint - 99 + g FROM generate_series(0, 99) g)::text AS seqs \\gset"
		echo "SELECT idempotent_increment('bench_fbf', $key, :cids::bigint[], :seqs::bigint[], array_fill(1::bigint, ARRAY[100]));"
	else
		printf "SELECT idempotent_increment('bench_fbf', %s, array_fill(:cid::bigint, ARRAY[100]), ARRAY[" "$key"
		for i in $(seq 1 100); do printf "%s:seq::bigint - %d" "$([ "$i" -gt 1 ] && echo ", ")" "$((100 - i))"; done
		echo "]::bigint[], array_fill(1::bigint, ARRAY[100]));"
	fi
} >"$dir/batch.sql"

# the workers' ports, from Citus' metadata
mapfile -t workers < <(psql -X -q -At -c "SELECT nodeport FROM pg_dist_node WHERE noderole = 'primary' AND groupid <> 0 ORDER BY nodeid")

# side round: fbf, plain, batch through the coordinator; fbf_w, plain_w
# through the workers (the clients split between them, the transactions
# summed); custom through the coordinator.  Client ids: 0.. through the
# coordinator, 100.. and 200.. through the workers, 1000.. in batches,
# 2000.. delegated, 3000.. custom; each round's
# seqs start at round * 10^9.
run() {
	local side=${1%_w} seq0=$(($2 * 1000000000)) base=0 n i=0 plans=
	[ "$side" != batch ] || base=1000
	[ "$side" != deleg ] || base=2000
	if [ "$side" = custom ]; then
		side=fbf base=3000 plans='-c plan_cache_mode=force_custom_plan'
	fi
	if [ "$side" = "$1" ] || [ -n "$plans" ]; then
		PGOPTIONS="${PGOPTIONS:-} $plans" "$PG_BINDIR/pgbench" -n -M "$mode" -c "$clients" -j "$clients" -T "$secs" \
			-D base=$base -D seq=$seq0 -f "$dir/$side.sql" 2>/dev/null |
			sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
		return
	fi
	n=$(( (clients + ${#workers[@]} - 1) / ${#workers[@]} ))
	for p in "${workers[@]}"; do
		i=$((i + 1))
		PGPORT=$p "$PG_BINDIR/pgbench" -n -M "$mode" -c "$n" -j "$n" -T "$secs" \
			-D base=$((i * 100)) -D seq=$seq0 -f "$dir/$side.sql" 2>/dev/null |
			sed -n 's/^tps = \([0-9.]*\) .*/\1/p' &
	done | awk '{t += $1} END {print t}'
	wait
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
# the ratio of side $1 to side $2 in each round, and their median (steadier
# than the ratio of the medians when the machine's speed drifts over a run)
rounds_ratio() {
	local r
	r=$(paste "$dir/$1.tps" "$dir/$2.tps" | awk '{printf "%.2f\n", $1 / $2}')
	echo "$(echo $r) (median $(echo "$r" | median))"
}

sides="fbf plain fbf_w plain_w batch"
[ "$delegated" != 1 ] || sides="$sides deleg"
[ "${FBF_BENCH_CUSTOM:-0}" != 1 ] || sides="$sides custom"
for side in $sides; do : >"$dir/$side.tps"; done
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then order=$sides; else order=$(echo $sides | tr ' ' '\n' | tac | tr '\n' ' '); fi
	for side in $order; do
		tps=$(run "$side" "$r")
		echo "$tps" >>"$dir/$side.tps"
		echo "round $r $side: $tps tps"
	done
done
for side in $sides; do eval "m_$side=\$(median <\"$dir/$side.tps\")"; done
psql -X -q -At -c "SELECT 'dismissal rate: ' || sum(dismissed) || ' of ' || sum(applied + dismissed)
	|| ' (' || round(100.0 * sum(dismissed) / greatest(sum(applied + dismissed), 1), 4) || '%)'
	FROM fbf_counter_stats WHERE counter = 'bench_fbf'::regclass"
echo "coordinator: median tps idempotent_increment $m_fbf, plain UPDATE $m_plain, ratio $(ratio "$m_fbf" "$m_plain"); by round $(rounds_ratio fbf plain)"
echo "workers: median tps idempotent_increment $m_fbf_w, plain UPDATE $m_plain_w, ratio $(ratio "$m_fbf_w" "$m_plain_w"); by round $(rounds_ratio fbf_w plain_w)"
[ "${FBF_BENCH_CUSTOM:-0}" != 1 ] ||
	echo "custom plans, coordinator: median tps $m_custom, ratio $(ratio "$m_custom" "$m_plain") to the plain UPDATE; the generic plan $(ratio "$m_fbf" "$m_custom") of it, by round $(rounds_ratio fbf custom)"
[ "$delegated" != 1 ] ||
	echo "delegated function, coordinator: median tps $m_deleg, ratio $(ratio "$m_deleg" "$m_plain") to the plain UPDATE, $(ratio "$m_deleg" "$m_fbf") to idempotent_increment"
echo "batches of 100: median tps $m_batch ($(awk -v a="$m_batch" 'BEGIN {printf "%.0f", a * 100}') operations/s), $(ratio "$(awk -v a="$m_batch" 'BEGIN {print a * 100}')" "$m_fbf")x single increments through the coordinator"
[ "$delegated" != 1 ] || psql -X -q -c "DROP FUNCTION bench_incr"
psql -X -q -c "DROP TABLE bench_fbf, bench_plain"
