# test/bench/citus_cluster.sh: a scratch Citus cluster for the Citus
# benchmarks, sourced after test/lib.sh: a coordinator and two workers on
# loopback ports, run as the postgres user (shared_preload_libraries =
# 'citus,fbf', fsync on), with fbf and Citus built and installed, stopped
# on exit.  citus_cluster_start [extra postgresql.conf lines] leaves
# PGHOST, PGPORT, PGUSER and PGDATABASE naming the coordinator, with the
# extensions created; with PGPORT already set (an existing cluster that
# has fbf: docs/user-guide.md, "Scaling out with Citus") it does nothing.
# $dir is the scratch directory (the benchmark's scripts go there too).
# median: the median of the numbers on standard input, one per line.
# node_cpu_ticks: the CPU time, in clock ticks, that each node of the
# scratch cluster has used so far (its postmaster's children that ended,
# and those alive), one line per node, coordinator first; nothing for an
# existing cluster.

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
	local name=$1 port=$2 extra=$3
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
$extra
CONF
	as_postgres "$PG_BINDIR/pg_ctl" -D "$dir/$name" -l "$dir/$name.log" -w start >/dev/null
	nodes+=("$dir/$name")
	psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c 'CREATE EXTENSION citus'
}

citus_cluster_start() {
	local extra=${1:-} name port ports=()

	[ -z "${PGPORT:-}" ] || return 0
	fbf_install_deps
	fbf_citus_install
	if [ ! -f "$(pg_config --pkglibdir)/citus.so" ]; then
		echo "Citus is not installed and cannot be built here" >&2
		exit 1
	fi
	fbf_build_install
	for name in coordinator worker1 worker2; do
		port=$(fbf_free_port)
		start_node "$name" "$port" "$extra"
		ports+=("$port")
	done
	export PGHOST=127.0.0.1 PGPORT=${ports[0]} PGUSER=postgres PGDATABASE=postgres
	psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
SELECT citus_set_coordinator_host('127.0.0.1', ${ports[0]});
SELECT citus_add_node('127.0.0.1', ${ports[1]});
SELECT citus_add_node('127.0.0.1', ${ports[2]});
CREATE EXTENSION fbf;
SQL
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

node_cpu_ticks() {
	local n pm child
	for n in "${nodes[@]}"; do
		pm=$(head -1 "$n/postmaster.pid")
		{
			awk '{print $16 + $17}' "/proc/$pm/stat"
			for child in $(pgrep -P "$pm"); do
				awk '{print $14 + $15}' "/proc/$child/stat" 2>/dev/null || true
			done
		} | awk '{s += $1} END {print s}'
	done
}
