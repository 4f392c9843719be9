# test/lib.sh: helpers shared by test/check.sh, test/demo.sh and the
# benchmarks.  Source it; it defines functions and sets nothing else up.
#
# PostgreSQL refuses to run as root, so clusters run as the `postgres` OS
# user in a scratch directory, on a free port, with fbf preloaded; the
# caller registers fbf_cluster_stop in an EXIT trap so they always stop.

FBF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_BINDIR=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
# bison, flex, libreadline-dev and zlib1g-dev build PostgreSQL 16 and 18 (fbf_pg_install)
FBF_PACKAGES="postgresql-server-dev-15 libxxhash-dev libipc-run-perl bison flex libreadline-dev zlib1g-dev"

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

# Citus, for the distributed tests (test/t/022_citus.pl), built from the
# vendored source tarball: Debian 12 has no Citus package, and tests never
# download anything.  Without the tarball the Citus tests skip themselves.
FBF_CITUS_TARBALL=${FBF_CITUS_TARBALL:-$FBF_ROOT/../shared/vendor/citus-13.2.2.tar.gz}
FBF_CITUS_PACKAGES="libkrb5-dev liblz4-dev libzstd-dev"

fbf_citus_install() {
	local control dir patchfile p missing=""
	control="$(pg_config --sharedir)/extension/citus.control"
	if [ -f "$(pg_config --pkglibdir)/citus.so" ] && grep -q "^default_version = '13.2-" "$control" 2>/dev/null; then
		fbf_log "Citus 13.2 is already installed"
		return 0
	fi
	if [ ! -f "$FBF_CITUS_TARBALL" ]; then
		fbf_log "SKIP Citus: no source tarball at $FBF_CITUS_TARBALL; test/t/022_citus.pl will skip"
		return 0
	fi
	for p in $FBF_CITUS_PACKAGES; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing="$missing $p"
	done
	if [ -n "$missing" ]; then
		fbf_log "installing (for Citus):$missing"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq $FBF_CITUS_PACKAGES >/dev/null
	fi
	fbf_log "building Citus from $FBF_CITUS_TARBALL (about 70 s)"
	dir=$(mktemp -d /tmp/fbf-citus.XXXXXX)
	tar xzf "$FBF_CITUS_TARBALL" -C "$dir" || return 1
	# PostgreSQL 15.20's headers define what Citus 13.2.2 defines again
	patchfile="$(dirname "$FBF_CITUS_TARBALL")/citus-13.2.2-pg15.20.patch"
	if [ -f "$patchfile" ] && (cd "$dir"/citus-* && patch -p1 --dry-run -s <"$patchfile" >/dev/null 2>&1); then
		(cd "$dir"/citus-* && patch -p1 -s <"$patchfile") || return 1
	fi
	(cd "$dir"/citus-* && ./configure --without-libcurl >"$dir/configure.log" 2>&1 &&
		make -s -j2 >"$dir/make.log" 2>&1 && make -s install >"$dir/install.log" 2>&1) || {
		tail -20 "$dir"/*.log >&2
		return 1
	}
	rm -rf "$dir"
}

# PostgreSQL 16 and 18, the other server versions the suite runs against
# (and pg_upgrade's targets in test/pg_upgrade.sh), built from the vendored
# source trees: Debian 12 packages only 15.  `fbf_pg_install 16|18` builds
# one once per machine, as a release build (no assertions) with the TAP
# modules, pg_isolation_regress and the contrib modules the tests use
# ($FBF_PG_CONTRIB), into a prefix under $FBF_PG<V>_CACHE (default
# /var/cache/fbf) named postgresql-<V>-<sha256 of the tarball>-r<recipe>,
# the recipe ($FBF_PG_RECIPE) bumped when what is built changes, so a
# changed tarball or recipe builds afresh and an unchanged one is reused (a
# stamp file marks a finished install).  $FBF_PG<V>_TARBALL overrides the
# source; $FBF_PG_NICE (say, "nice -n 10") runs the build at a lower
# priority.  Prints the prefix's bin directory on stdout; prints nothing,
# logs SKIP and succeeds when there is no tarball.
FBF_PG16_TARBALL=${FBF_PG16_TARBALL:-$FBF_ROOT/../shared/vendor/postgresql-16.2-src.tar.xz}
FBF_PG18_TARBALL=${FBF_PG18_TARBALL:-$FBF_ROOT/../shared/vendor/postgresql-18.3-src.tar.xz}
FBF_PG16_CACHE=${FBF_PG16_CACHE:-/var/cache/fbf}
FBF_PG18_CACHE=${FBF_PG18_CACHE:-/var/cache/fbf}
FBF_PG_CONTRIB="pg_walinspect"
FBF_PG_RECIPE=2
fbf_pg_install() {
	local v=$1 tarball cache sum prefix dir m
	case "$v" in
	16) tarball=$FBF_PG16_TARBALL cache=$FBF_PG16_CACHE ;;
	18) tarball=$FBF_PG18_TARBALL cache=$FBF_PG18_CACHE ;;
	*)
		fbf_log "fbf_pg_install: no recipe for PostgreSQL $v"
		return 1
		;;
	esac
	if [ ! -f "$tarball" ]; then
		fbf_log "SKIP PostgreSQL $v: no source tarball at $tarball"
		return 0
	fi
	sum=$(sha256sum "$tarball" | cut -c1-16)
	prefix="$cache/postgresql-$v-$sum-r$FBF_PG_RECIPE"
	if [ -f "$prefix/.fbf-installed" ]; then
		fbf_log "PostgreSQL $v is already built in $prefix"
		echo "$prefix/bin"
		return 0
	fi
	fbf_log "building PostgreSQL $v from $tarball into $prefix (about 5 min)"
	rm -rf "$prefix"
	mkdir -p "$cache"
	dir=$(mktemp -d "$cache/build.XXXXXX")
	tar xJf "$tarball" -C "$dir" || return 1
	(cd "$dir"/postgresql-* &&
		${FBF_PG_NICE:-} ./configure --prefix="$prefix" --without-icu --enable-tap-tests \
			>"$dir/configure.log" 2>&1 &&
		${FBF_PG_NICE:-} make -s -j2 >"$dir/make.log" 2>&1 &&
		make -s install >"$dir/install.log" 2>&1 &&
		make -s -C src/test/isolation install >>"$dir/install.log" 2>&1 &&
		make -s -C src/test/perl install >>"$dir/install.log" 2>&1 &&
		for m in $FBF_PG_CONTRIB; do
			${FBF_PG_NICE:-} make -s -C "contrib/$m" install >>"$dir/install.log" 2>&1 || exit 1
		done) || {
		tail -30 "$dir"/*.log >&2
		return 1
	}
	rm -rf "$dir"
	touch "$prefix/.fbf-installed"
	echo "$prefix/bin"
}
fbf_pg16_install() { fbf_pg_install 16; }
fbf_pg18_install() { fbf_pg_install 18; }

# Build with warnings as errors and install into the server's directories.
fbf_build_install() {
	fbf_log "building and installing fbf"
	make -C "$FBF_ROOT" -s clean >/dev/null
	make -C "$FBF_ROOT" -s >/dev/null
	make -C "$FBF_ROOT" -s install >/dev/null
}

# Build fbf against the PostgreSQL whose bin directory is $1 and install it
# there, from a scratch copy of the source tree, so that the tree's own
# build (for the PostgreSQL of PATH) is left as it is.
fbf_build_install_into() {
	local bindir=$1 dir rc
	fbf_log "building and installing fbf for $("$bindir/pg_config" --version)"
	dir=$(mktemp -d /tmp/fbf-build.XXXXXX)
	(cd "$FBF_ROOT" && tar cf - --exclude=./.git --exclude='*.o' --exclude='*.so' \
		--exclude='*.bc' --exclude=./results --exclude=./tmp_check --exclude=./test/isolation/output .) |
		(cd "$dir" && tar xf -)
	make -C "$dir" -s clean PG_CONFIG="$bindir/pg_config" >/dev/null &&
		make -C "$dir" -s -j2 PG_CONFIG="$bindir/pg_config" >/dev/null &&
		make -C "$dir" -s install PG_CONFIG="$bindir/pg_config" >/dev/null
	rc=$?
	rm -rf "$dir"
	return $rc
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
# postgresql.conf lines may be passed as arguments.  With --plain first,
# postgresql.conf gets nothing but shared_preload_libraries = 'fbf' (every
# other setting at its default: the worker on, random window keys,
# max_prepared_transactions = 0, fsync on); where to listen is given on the
# server's command line instead.
fbf_cluster_start() {
	local plain=""
	if [ "${1:-}" = --plain ]; then
		plain=1
		shift
	fi
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
	local opts=""
	if [ -n "$plain" ]; then
		echo "shared_preload_libraries = 'fbf'" >>"$FBF_SCRATCH/data/postgresql.conf"
		opts="-c listen_addresses= -p $PGPORT -k $FBF_SCRATCH"
	else
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
	fi
	as_postgres "$PG_BINDIR/pg_ctl" -D "$FBF_SCRATCH/data" -l "$FBF_SCRATCH/server.log" \
		${opts:+-o "$opts"} -w -t 60 start >/dev/null || {
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

# Run the TAP tests of test/t (their module in test/perl) through PGXS
# (make prove_installcheck), as the postgres user (initdb refuses root),
# from a scratch copy of the source tree it can write to.  fbf must be
# installed.  $1: scratch dir;
# FBF_PROVE_TESTS, if set, names the tests to run (test/t/NNN_name.pl ...),
# in the order given; FBF_PROVE_JOBS, if set, how many run at once (prove
# -j).  Every run reserves its servers' ports in one directory,
# $FBF_TAP_PORT_DIR, so that runs side by side never pick the same port.
FBF_TAP_PORT_DIR=${FBF_TAP_PORT_DIR:-/tmp/fbf-tap-portlock}
fbf_run_tap() {
	local dir=$1
	rm -rf "$dir"
	mkdir -p "$dir"
	(cd "$FBF_ROOT" && tar cf - Makefile fbf.control sql/fbf.sql src/core/sources.mk test/t test/perl) |
		(cd "$dir" && tar xf -)
	# the Citus test runs the retry storm client, the forgery test forge_ops
	make -s -C "$FBF_ROOT/test/bench" retry_storm >/dev/null &&
		cp "$FBF_ROOT/test/bench/retry_storm" "$dir/retry_storm"
	make -s -C "$FBF_ROOT/test/core" SANITIZE= forge_ops >/dev/null &&
		cp "$FBF_ROOT/test/core/forge_ops" "$dir/forge_ops"
	chown -R postgres: "$dir"
	mkdir -p "$FBF_TAP_PORT_DIR"
	chmod 1777 "$FBF_TAP_PORT_DIR"
	(cd "$dir" && runuser -u postgres -- env -u PGPORT -u PGHOST -u PGUSER -u PGDATABASE \
		PATH="$PG_BINDIR:$PATH" FBF_RETRY_STORM="$dir/retry_storm" FBF_FORGE_OPS="$dir/forge_ops" \
		PG_TEST_PORT_DIR="$FBF_TAP_PORT_DIR" \
		make -s prove_installcheck PROVE_FLAGS="-v --timer${FBF_PROVE_JOBS:+ -j$FBF_PROVE_JOBS}" \
		${FBF_PROVE_TESTS:+PROVE_TESTS="$FBF_PROVE_TESTS"})
}

# fbf_tap_ok GOT EXPECTED NAME: one TAP line of a shell test (test/upgrade.sh,
# test/pg_upgrade.sh), numbered by the caller's $n, failures counted in its
# $bad, with what was expected and got when they differ.
fbf_tap_ok() {
	n=$((n + 1))
	if [ "$1" = "$2" ]; then
		echo "ok $n - $3"
	else
		bad=$((bad + 1))
		echo "not ok $n - $3"
		echo "#   expected: $2"
		echo "#        got: $1"
	fi
}
