#!/usr/bin/env bash
# test/bench/citus_bench.sh: idempotent_increment on a counter distributed
# with Citus against a plain distributed UPDATE, both through the
# coordinator, in the same run, in interleaved rounds; reports each side's
# median transactions per second, their ratio, and the counter's dismissal
# rate (dismissed / operations, from fbf_counter_stats: every
# operation is new, so every dismissal is a false positive).
#
#   bash test/bench/citus_bench.sh [rounds [seconds [clients]]]
#
#   defaults: 5 rounds of 10 s per side, 4 clients.  Builds and installs
#   fbf (and Citus from the vendored tarball, test/lib.sh), starts a
#   coordinator and two workers on loopback ports as the postgres user
#   (shared_preload_libraries = 'citus,fbf', fsync on), and stops them on
#   exit.  With PGHOST and PGPORT naming the coordinator of a Citus cluster
#   that has fbf (docs/user-guide.md, "Scaling out with Citus"), runs there
#   instead.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
rounds=${1:-5}
secs=${2:-10}
clients=${3:-4}
keys=10000
dir=$(mktemp -d /tmp/fbf-citus-bench.XXXXXX)
chown postgres: "$dir"
chmod 755 "$dir"
nodes=()

stop_nodes() {
	local n
	for n in "${nodes[@]}"; do
		as_postgres "$PG_BINDIR/pg_ctl" -D "$n" -m fast -w stop >/dev/null 2>&1 || true
	done
	rm -rf "$dir"
}
trap stop_nodes EXIT

# a node of the scratch cluster: its data directory under $dir, on `port`
start_node() {
	local name=$1 port=$2
	as_postgres "$PG_BINDIR/initdb" -D "$dir/$name" -A trust -E UTF8 --locale=C.UTF-8 \
		>"$dir/$name.initdb.log" 2>&1
	cat >>"$dir/$name/postgresql.conf" <<CONF
shared_preload_libraries = 'citus,fbf'
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 200
max_prepared_transactions = 50
shared_buffers = '256MB'
fsync = on
checkpoint_timeout = '30min'
max_wal_size = '4GB'
fbf.naptime = '1s'
CONF
	as_postgres "$PG_BINDIR/pg_ctl" -D "$dir/$name" -l "$dir/$name.log" -w start >/dev/null
	nodes+=("$dir/$name")
	psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c 'CREATE EXTENSION citus'
}

if [ -z "${PGPORT:-}" ]; then
	fbf_install_deps
	fbf_citus_install
	if [ ! -f "$(pg_config --pkglibdir)/citus.so" ]; then
		echo "citus_bench.sh: Citus is not installed and cannot be built here" >&2
		exit 1
	fi
	fbf_build_install
	ports=()
	for name in coordinator worker1 worker2; do
		port=$(fbf_free_port)
		start_node "$name" "$port"
		ports+=("$port")
	done
	export PGHOST=127.0.0.1 PGPORT=${ports[0]} PGUSER=postgres PGDATABASE=postgres
	psql -X -q -v ON_ERROR_STOP=1 <<SQL
SELECT citus_set_coordinator_host('127.0.0.1', ${ports[0]});
SELECT citus_add_node('127.0.0.1', ${ports[1]});
SELECT citus_add_node('127.0.0.1', ${ports[2]});
CREATE EXTENSION fbf;
SQL
fi

psql -X -q -v ON_ERROR_STOP=1 <<SQL
DROP TABLE IF EXISTS bench_fbf, bench_plain;
SELECT fbf_create_counter_table('bench_fbf', retention => '5 min', expected_rate => 5000);
SELECT fbf_distribute_counter('bench_fbf');
CREATE TABLE bench_plain (key text NOT NULL, shard integer NOT NULL, value bigint NOT NULL DEFAULT 0,
						  PRIMARY KEY (key, shard));
SELECT create_distributed_table('bench_plain', 'key', colocate_with => 'bench_fbf');
INSERT INTO bench_plain SELECT 'k' || i, 0, 0 FROM generate_series(1, $keys) i;
-- the counter's rows exist too, as after warm-up
SELECT count(*) FROM (SELECT idempotent_increment('bench_fbf', 'k' || i, -1, i, 0)
						FROM generate_series(1, $keys) i) s;
SQL

# each transaction a new operation: a random 62-bit seq per client
cat >"$dir/fbf.sql" <<SQL
\set k random(1, $keys)
\set seq random(1, 4611686018427387903)
SELECT idempotent_increment('bench_fbf', 'k' || :k, :client_id, :seq, 1);
SQL
cat >"$dir/plain.sql" <<SQL
\set k random(1, $keys)
UPDATE bench_plain SET value = value + 1 WHERE key = 'k' || :k AND shard = 0;
SQL

run() {
	"$PG_BINDIR/pgbench" -n -M prepared -c "$clients" -j "$clients" -T "$secs" -f "$dir/$1.sql" 2>/dev/null |
		sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

: >"$dir/fbf.tps"
: >"$dir/plain.tps"
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then order="fbf plain"; else order="plain fbf"; fi
	for side in $order; do
		tps=$(run "$side")
		echo "$tps" >>"$dir/$side.tps"
		echo "round $r $side: $tps tps"
	done
done
fbf=$(median <"$dir/fbf.tps")
plain=$(median <"$dir/plain.tps")
psql -X -q -At -c "SELECT 'dismissal rate: ' || sum(dismissed) || ' of ' || sum(applied + dismissed)
	|| ' (' || round(100.0 * sum(dismissed) / greatest(sum(applied + dismissed), 1), 4) || '%)'
	FROM fbf_counter_stats WHERE counter = 'bench_fbf'::regclass"
echo "median tps: idempotent_increment $fbf, plain UPDATE $plain, ratio $(awk -v a="$fbf" -v b="$plain" 'BEGIN {printf "%.2f", a / b}')"
psql -X -q -c "DROP TABLE bench_fbf, bench_plain"
