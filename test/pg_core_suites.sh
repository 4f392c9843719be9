#!/bin/bash
# test/pg_core_suites.sh [TARBALL]: does fbf leave PostgreSQL's own behaviour
# unchanged?  Runs PostgreSQL's core regression suite (installcheck-parallel)
# and isolation suite (installcheck) from the source tarball TARBALL
# (default: the vendored 18.3, $FBF_PG18_TARBALL; 16.2 works too) against
# three servers of that version:
#
#   plain      fbf installed, not loaded
#   preload    shared_preload_libraries = 'fbf' (its hooks and worker run)
#   extension  preloaded, and every test database has the extension
#              (pg_regress --load-extension=fbf, as EXTRA_REGRESS_OPTS would)
#
# and compares: the plain server's results are the reference (PostgreSQL
# without fbf), and each other server's may differ from them only in the
# lines the list ALLOWED below names, each explained there and in
# docs/operations.md ("PostgreSQL's own test suites").  Prints TAP; exits 1
# if a line is not ok.
#
# The servers are the build of fbf_pg_install (test/lib.sh); running the
# suites needs a configured and built source tree, which is kept beside it
# under $FBF_PG_CORE_CACHE (default /var/cache/fbf), named after the
# install's prefix with "-tree", and reused while the tarball and the recipe
# are the same.  Only the test drivers and the modules the tests load are
# built there (a few minutes, once); the suites then take about 10 minutes
# per server on two cores.  fbf itself is built from this tree and installed
# into that server (fbf_build_install_into).  Outputs stay in
# $FBF_CORE_OUT (default a new /tmp/fbf-core.XXXXXX): per server and
# suite, pg_regress's output directory and log.
#
# FBF_CORE_WHICH="regress isolation" picks the suites (FBF_CORE_SUITES=1 is
# test/check.sh's switch that runs this script);
# FBF_CORE_COMPARE_ONLY=1 with FBF_CORE_OUT compares a run's outputs again.
set -u
FBF_ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$FBF_ROOT/test/lib.sh"

tarball=${1:-$FBF_PG18_TARBALL}
suites=${FBF_CORE_WHICH:-regress isolation}
if [ ! -f "$tarball" ]; then
	echo "1..0 # SKIP no PostgreSQL source tarball at $tarball"
	exit 0
fi
tarball=$(cd "$(dirname "$tarball")" && pwd)/$(basename "$tarball")
version=$(basename "$tarball")
version=${version#postgresql-}
version=${version%%-src*}
version=${version%%.tar*}
major=${version%%.*}

# ---- the allowed differences -------------------------------------------
# Each test's output with fbf (preload, extension) is compared with its
# output without fbf, line for line.  Only the tests listed here may
# differ, and only by lines fbf adds that name its own objects: catalog
# listings of a database where the extension was created.  Their outputs
# are compared with spacing ignored and table rules and row counts left
# out (the new rows widen the columns and change the counts); each added
# line must match the test's pattern, and no line may go.
#   suite|test|extended regex for an added line (spaces squeezed)
ALLOWED=(
	# amutils lists the properties of every index access method: fbf's
	# two, cuckoo and fbf_filter, add six rows each.
	'regress|amutils|^(cuckoo|fbf_filter) [|] '
	# opr_sanity lists every access method's strategies with their
	# operators' names, by the method's OID: cuckoo's equality strategy,
	# under an OID that is not built in (5 digits or more).
	'regress|opr_sanity|^[0-9]{5,} [|] [0-9]+ [|] =$'
	# opr_sanity lists operator classes with no operators in their
	# family: fbf_filter_int4_ops, the window index's operator class,
	# which needs none (a window is never searched by operator).
	'regress|opr_sanity|^fbf_filter_int4_ops [|] [0-9]+$'
	# psql's \dA and \dA+ list every access method, fbf's two among them.
	'regress|psql|^(cuckoo|fbf_filter) [|] Index( [|]|$)'
)

# the pattern ALLOWED has for test $2 of suite $1, if any
allowed_pattern() {
	local entry pats=""
	for entry in "${ALLOWED[@]}"; do
		if [ "${entry%%|*}" = "$1" ]; then
			entry=${entry#*|}
			if [ "${entry%%|*}" = "$2" ]; then
				pats="${pats:+$pats|}(${entry#*|})"
			fi
		fi
	done
	printf '%s' "$pats"
}

# file $1 with spacing squeezed, table rules and row counts left out
normalized() {
	sed -E 's/[[:space:]]+/ /g; s/^ //; s/ $//' "$1" | grep -Ev '^[-+]+$|^\([0-9]+ rows?\)$'
}

# Compare suite $1's outputs on server $2 with the reference's: prints the
# differences not allowed ("test: line"), and the number of allowed lines
# on the last line, "allowed N".
compare_outputs() {
	local suite=$1 name=$2 ref=$out/plain/$1/results other=$out/$2/$1/results
	local t pat nallowed=0 diffs
	for t in $( (ls "$ref"; ls "$other") 2>/dev/null | sed -n 's/\.out$//p' | sort -u); do
		if [ ! -f "$ref/$t.out" ] || [ ! -f "$other/$t.out" ]; then
			echo "$t: output missing on one server"
			continue
		fi
		pat=$(allowed_pattern "$suite" "$t")
		if [ -z "$pat" ]; then
			diff "$ref/$t.out" "$other/$t.out" | grep -E '^[<>]' | sed "s/^/$t: /"
			continue
		fi
		diffs=$(diff <(normalized "$ref/$t.out") <(normalized "$other/$t.out") | grep -E '^[<>]')
		[ -z "$diffs" ] && continue
		printf '%s\n' "$diffs" | grep -E '^<' | sed "s/^/$t: (gone) /"
		printf '%s\n' "$diffs" | grep -E '^>' | sed 's/^> //' | grep -Ev -- "$pat" | sed "s/^/$t: /"
		nallowed=$((nallowed + $(printf '%s\n' "$diffs" | grep -E '^>' | sed 's/^> //' | grep -Ec -- "$pat")))
	done
	echo "allowed $nallowed"
}

# ---- the server and the source tree --------------------------------------
bindir=$(fbf_pg_install "$major") || exit 1
if [ -z "$bindir" ]; then
	echo "1..0 # SKIP no build of PostgreSQL $major"
	exit 0
fi
prefix=$(dirname "$bindir")
cache=${FBF_PG_CORE_CACHE:-$(dirname "$prefix")}
tree=$cache/$(basename "$prefix")-tree
if [ ! -f "$tree/.fbf-built" ]; then
	fbf_log "building the PostgreSQL $version test tree in $tree (a few minutes)"
	rm -rf "$tree"
	mkdir -p "$tree"
	tar xJf "$tarball" -C "$tree" --strip-components=1 || exit 1
	# configured as fbf_pg_install's build, so that pg_regress finds its
	# bindir; only the test drivers, the modules the tests load (regress.so,
	# contrib/spi) and what they need are built: the server is the install's
	(cd "$tree" &&
		${FBF_PG_NICE:-} ./configure --prefix="$prefix" --without-icu --enable-tap-tests \
			>"$tree/fbf-configure.log" 2>&1 &&
		for d in src/backend/generated-headers src/common src/port src/interfaces/libpq \
			src/fe_utils src/test/regress src/test/isolation contrib/spi; do
			case $d in
			*/generated-headers) t=generated-headers d=src/backend ;;
			*) t=all ;;
			esac
			${FBF_PG_NICE:-} make -s -j2 -C "$d" "$t" >>"$tree/fbf-make.log" 2>&1 || exit 1
		done) || {
		tail -30 "$tree"/fbf-*.log >&2
		exit 1
	}
	touch "$tree/.fbf-built"
fi
[ -n "${FBF_CORE_COMPARE_ONLY:-}" ] || fbf_build_install_into "$bindir" || exit 1

out=${FBF_CORE_OUT:-$(mktemp -d /tmp/fbf-core.XXXXXX)}
mkdir -p "$out"
chown postgres: "$out"
chmod 755 "$out"
fbf_log "PostgreSQL $version's core suites; outputs in $out"

# start server $1 (plain|preload|extension) in $out/$1, on a free port
start_server() {
	local name=$1 data=$out/$1/data port
	port=$(fbf_free_port)
	rm -rf "$out/$name"
	mkdir -p "$out/$name"
	chown postgres: "$out/$name"
	as_postgres "$bindir/initdb" -D "$data" -A trust -E UTF8 --locale=C.UTF-8 \
		>"$out/$name/initdb.log" 2>&1 || {
		cat "$out/$name/initdb.log" >&2
		return 1
	}
	{
		echo "listen_addresses = ''"
		echo "port = $port"
		echo "unix_socket_directories = '$out/$name'"
		echo "fsync = off"
		# the isolation suite's prepared-transaction tests need these
		echo "max_prepared_transactions = 10"
		[ "$name" != plain ] && echo "shared_preload_libraries = 'fbf'"
	} >>"$data/postgresql.conf"
	as_postgres "$bindir/pg_ctl" -D "$data" -l "$out/$name/server.log" -w start >/dev/null || {
		tail -20 "$out/$name/server.log" >&2
		return 1
	}
	echo "$port"
}

stop_server() {
	as_postgres "$bindir/pg_ctl" -D "$out/$1/data" -m fast -w stop >/dev/null 2>&1
}

# run suite $2 against server $1 on port $3: outputs in $out/$1/$2, the
# per-test status in $out/$1/$2.status ("test<TAB>ok|failed")
run_suite() {
	local name=$1 suite=$2 port=$3 dir=$out/$1/$2 opts=""
	local driver inputdir schedule
	[ "$name" = extension ] && opts="--load-extension=fbf"
	mkdir -p "$dir"
	chown postgres: "$dir"
	if [ "$suite" = regress ]; then
		driver=$tree/src/test/regress/pg_regress
		inputdir=$tree/src/test/regress
		schedule=$inputdir/parallel_schedule
		# the data files the tests' COPY ... TO writes go to the output dir
		(cd "$tree/src/test/regress" && as_postgres env PGHOST="$out/$name" PGPORT="$port" \
			"$driver" --inputdir="$inputdir" --outputdir="$dir" --bindir="$bindir" \
			--dlpath="$tree/src/test/regress" --max-concurrent-tests=20 \
			--schedule="$schedule" $opts) >"$out/$name/$suite.log" 2>&1
	else
		driver=$tree/src/test/isolation/pg_isolation_regress
		inputdir=$tree/src/test/isolation
		schedule=$inputdir/isolation_schedule
		(cd "$tree/src/test/isolation" && as_postgres env PGHOST="$out/$name" PGPORT="$port" \
			"$driver" --inputdir="$inputdir" --outputdir="$dir" --bindir="$bindir" \
			--schedule="$schedule" $opts) >"$out/$name/$suite.log" 2>&1
	fi
	# "ok 12    - name   34 ms", "not ok 13  - name ...", "ok 14 + name" (parallel groups)
	sed -nE 's/^(not ok|ok) +[0-9]+ +[-+] +([^ ]+).*/\2\t\1/p' "$out/$name/$suite.log" |
		sed -e 's/\tnot ok$/\tfailed/' >"$out/$name/$suite.status"
}

n=0
bad=0
tap() {
	n=$((n + 1))
	if [ "$1" = ok ]; then
		echo "ok $n - $2"
	else
		bad=$((bad + 1))
		echo "not ok $n - $2"
	fi
}

for name in plain preload extension; do
	# FBF_CORE_COMPARE_ONLY=1: compare the outputs already in $FBF_CORE_OUT
	[ -n "${FBF_CORE_COMPARE_ONLY:-}" ] && break
	port=$(start_server "$name") || {
		tap "not ok" "PostgreSQL $version, $name: the server starts"
		continue
	}
	for suite in $suites; do
		fbf_log "$suite suite, server $name"
		run_suite "$name" "$suite" "$port"
	done
	if [ "$name" != plain ]; then
		as_postgres "$bindir/psql" -h "$out/$name" -p "$port" -d postgres -Atc \
			"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'fbf launcher'" \
			>"$out/$name/launcher" 2>&1
	fi
	stop_server "$name"
done

for suite in $suites; do
	total=$(wc -l <"$out/plain/$suite.status")
	failed=$(grep -c $'\tfailed$' "$out/plain/$suite.status")
	if [ "$total" -gt 0 ] && [ "$failed" -eq 0 ]; then
		tap ok "$suite, without fbf: all $total tests pass (the reference)"
	else
		tap "not ok" "$suite, without fbf: $failed of $total tests fail (the reference)"
		grep $'\tfailed$' "$out/plain/$suite.status" | sed 's/^/# /'
	fi
	for name in preload extension; do
		others=$(wc -l <"$out/$name/$suite.status")
		result=$(compare_outputs "$suite" "$name")
		allowed=$(printf '%s\n' "$result" | sed -n 's/^allowed //p')
		extra=$(printf '%s\n' "$result" | grep -v '^allowed ')
		failed=$(grep $'\tfailed$' "$out/$name/$suite.status" | cut -f1 | tr '\n' ' ')
		if [ "$others" -eq "$total" ] && [ -z "$extra" ]; then
			tap ok "$suite, fbf $name: the same outputs as without fbf ($allowed allowed lines added${failed:+, to $failed})"
		else
			tap "not ok" "$suite, fbf $name: $others tests (reference $total); differences not allowed:"
			printf '%s\n' "$extra" | head -40 | sed 's/^/# /'
		fi
	done
done
for name in preload extension; do
	if [ "$(cat "$out/$name/launcher" 2>/dev/null)" = 1 ]; then
		tap ok "fbf $name: the fbf launcher ran through the suites"
	else
		tap "not ok" "fbf $name: the fbf launcher ran through the suites ($(cat "$out/$name/launcher" 2>/dev/null))"
	fi
done
for name in preload extension; do
	if grep -Eq 'PANIC|server process .* was terminated by signal|TRAP:' "$out/$name/server.log"; then
		tap "not ok" "fbf $name: no crash in the server log"
	else
		tap ok "fbf $name: no crash in the server log"
	fi
done
echo "1..$n"
echo "# PostgreSQL $version; outputs in $out"
[ "$bad" -eq 0 ]
