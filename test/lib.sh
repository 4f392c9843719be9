# test/lib.sh: helpers shared by test/check.sh, test/demo.sh and the
# benchmarks.  Source it; it defines functions and sets nothing else up.
#
# PostgreSQL refuses to run as root, so clusters run as the `postgres` OS
# user in a scratch directory, on a free port, with fbf preloaded; the
# caller registers fbf_cluster_stop in an EXIT trap so they always stop.

FBF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_BINDIR=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
FBF_PACKAGES="postgresql-server-dev-15 libxxhash-dev libipc-run-perl"

fbf_log() { printf '==> %s\n' "$*" >&2; }

# Install the Debian packages the build and the tests need.  PostgreSQL 15
# itself is already on the machine.  Skips apt when all are present.
fbf_install_deps() {
	local missing=""
	local p
	for p in $FBF_PACKAGES; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing="$missing $p"
	done
	if [ -n "$missing" ]; then
		fbf_log "installing:$missing"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq $FBF_PACKAGES >/dev/null
	fi
	PG_BINDIR=$(pg_config --bindir)
}

# Build with warnings as errors and install into the server's directories.
fbf_build_install() {
	fbf_log "building and installing fbf"
	make -C "$FBF_ROOT" -s clean >/dev/null
	make -C "$FBF_ROOT" -s >/dev/null
	make -C "$FBF_ROOT" -s install >/dev/null
}

# A TCP port nothing listens on.
fbf_free_port() {
	local port
	while :; do
		port=$((20000 + RANDOM % 30000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "$port"
			return
		fi
	done
}

as_postgres() { runuser -u postgres -- "$@"; }

# Start a scratch cluster with fbf preloaded.  Sets FBF_SCRATCH, PGHOST,
# PGPORT, PGUSER, PGDATABASE for the clients that follow.  Extra
# postgresql.conf lines may be passed as arguments.
fbf_cluster_start() {
	FBF_SCRATCH=$(mktemp -d /tmp/fbf-cluster.XXXXXX)
	chown postgres: "$FBF_SCRATCH"
	chmod 755 "$FBF_SCRATCH"
	export PGPORT
	PGPORT=$(fbf_free_port)
	export PGHOST="$FBF_SCRATCH"
	export PGUSER=postgres
	export PGDATABASE=postgres
	fbf_log "starting a scratch cluster in $FBF_SCRATCH on port $PGPORT"
	as_postgres "$PG_BINDIR/initdb" -D "$FBF_SCRATCH/data" -A trust -E UTF8 \
		--locale=C.UTF-8 >"$FBF_SCRATCH/initdb.log" 2>&1 || {
		cat "$FBF_SCRATCH/initdb.log" >&2
		return 1
	}
	{
		echo "shared_preload_libraries = 'fbf'"
		echo "listen_addresses = ''"
		echo "port = $PGPORT"
		echo "unix_socket_directories = '$FBF_SCRATCH'"
		echo "fsync = off"
		echo "max_prepared_transactions = 10"
		local line
		for line in "$@"; do echo "$line"; done
	} >>"$FBF_SCRATCH/data/postgresql.conf"
	as_postgres "$PG_BINDIR/pg_ctl" -D "$FBF_SCRATCH/data" -l "$FBF_SCRATCH/server.log" \
		-w -t 60 start >/dev/null || {
		cat "$FBF_SCRATCH/server.log" >&2
		return 1
	}
}

# Stop the scratch cluster (if any) and remove it.  Safe to call twice.
fbf_cluster_stop() {
	if [ -n "${FBF_SCRATCH:-}" ] && [ -d "$FBF_SCRATCH" ]; then
		if [ -f "$FBF_SCRATCH/data/postmaster.pid" ]; then
			as_postgres "$PG_BINDIR/pg_ctl" -D "$FBF_SCRATCH/data" -m fast -w stop \
				>/dev/null 2>&1 ||
				as_postgres "$PG_BINDIR/pg_ctl" -D "$FBF_SCRATCH/data" -m immediate -w stop \
					>/dev/null 2>&1 || true
		fi
		if [ -n "${FBF_KEEP_LOG:-}" ] && [ -f "$FBF_SCRATCH/server.log" ]; then
			cp "$FBF_SCRATCH/server.log" "$FBF_KEEP_LOG" || true
		fi
		rm -rf "$FBF_SCRATCH"
	fi
	FBF_SCRATCH=""
}

# Run the TAP tests of test/t through PGXS (make prove_installcheck), as
# the postgres user (initdb refuses root), from a scratch copy of the
# source tree it can write to.  fbf must be installed.  $1: scratch dir.
fbf_run_tap() {
	local dir=$1
	rm -rf "$dir"
	mkdir -p "$dir"
	(cd "$FBF_ROOT" && tar cf - Makefile fbf.control sql/fbf.sql src/core/sources.mk test/t) |
		(cd "$dir" && tar xf -)
	chown -R postgres: "$dir"
	(cd "$dir" && runuser -u postgres -- env -u PGPORT -u PGHOST -u PGUSER -u PGDATABASE \
		PATH="$PG_BINDIR:$PATH" \
		make -s prove_installcheck PROVE_FLAGS=-v)
}
