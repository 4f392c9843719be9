#!/usr/bin/env bash
# test/cuckoo_hash_index.sh: the cuckoo index is a drop-in for hash.
# PostgreSQL's own regression test of hash indexes (hash_index.sql, with
# the data file it loads) is taken from the vendored 16.2 and 18.3 source
# tarballs and run twice on a scratch cluster with fbf: once as it is, and
# once with every "USING hash" (any case) turned into "USING cuckoo" by sed.
# The two outputs (psql -a, as pg_regress runs a test) must be identical
# once the same sed is applied to the first: every statement that runs
# with hash runs with cuckoo (operator classes under hash's names, the
# fillfactor reloption with hash's bounds and messages, backward scans of
# a cursor) and every query answers alike.  Also: the hash run matches the
# tarball's expected output when the server is that tarball's major
# version (the harness reproduces the upstream test), the cuckoo indexes
# left behind verify clean, and lookups went through them.
#
#   bash test/cuckoo_hash_index.sh [BINDIR]
#
# BINDIR: the bin directory of the PostgreSQL to test (default: pg_config's
# on PATH, as test/lib.sh chooses); fbf must be installed in it.  Run as
# root (the cluster runs as postgres).  Prints TAP; a tarball that is
# missing skips its part with a note.
set -uo pipefail

. "$(dirname "$0")/lib.sh"
cd "$FBF_ROOT"

if [ $# -ge 1 ]; then
	PG_BINDIR=$1
	export PATH="$1:$PATH"
fi

work=$(mktemp -d /tmp/fbf-hash-index.XXXXXX)
chmod 755 "$work"
n=0
bad=0
trap 'fbf_cluster_stop; rm -rf "$work"' EXIT

fbf_cluster_start "fbf.worker_enabled = off" || {
	echo "not ok 1 - start a scratch cluster"
	exit 1
}
server_major=$(($(psql -X -At -c "SHOW server_version_num") / 10000))
echo "# server: $(psql -X -At -c "SELECT version()")"

# pg_regress's client environment, so the hash run can match upstream's
# expected output
export PGTZ=PST8PDT PGDATESTYLE="Postgres, MDY" PGOPTIONS="-c intervalstyle=postgres_verbose"
export LC_MESSAGES=C

# run_test DB FILE SRCDIR OUT: a fresh database with fbf, the file fed to
# psql on stdin (messages carry no file name), as pg_regress does
run_test() {
	local db=$1 file=$2 srcdir=$3 out=$4
	psql -X -q -c "CREATE DATABASE $db TEMPLATE template0" &&
		psql -X -q -d "$db" -c "ALTER DATABASE $db SET lc_messages TO 'C'" \
			-c "ALTER DATABASE $db SET lc_monetary TO 'C'" \
			-c "ALTER DATABASE $db SET lc_numeric TO 'C'" \
			-c "ALTER DATABASE $db SET lc_time TO 'C'" \
			-c "CREATE EXTENSION fbf" || return 1
	PG_ABS_SRCDIR=$srcdir psql -X -a -q -d "$db" <"$file" >"$out" 2>&1
}

to_cuckoo() { sed -E 's/USING hash\b/USING cuckoo/gI' "$@"; }

for tarball in "$FBF_PG16_TARBALL" "$FBF_PG18_TARBALL"; do
	if [ ! -f "$tarball" ]; then
		echo "# SKIP: no source tarball at $tarball"
		continue
	fi
	top=$(basename "$tarball" -src.tar.xz)		# postgresql-18.3
	version=${top#postgresql-}
	major=${version%%.*}
	dir=$work/$version
	mkdir -p "$dir"
	tar -xJf "$tarball" -C "$dir" --strip-components=4 \
		"$top/src/test/regress/sql/hash_index.sql" \
		"$top/src/test/regress/expected/hash_index.out" \
		"$top/src/test/regress/data/hash.data" || {
		fbf_tap_ok "no" "yes" "extract hash_index.sql, its expected output and hash.data from $top"
		continue
	}
	chmod -R a+rX "$dir"
	to_cuckoo "$dir/sql/hash_index.sql" >"$dir/sql/cuckoo_index.sql"
	# every USING hash became USING cuckoo: the runs differ in the AM only
	fbf_tap_ok "$(grep -ci 'USING cuckoo' "$dir/sql/cuckoo_index.sql") $(grep -ciE "USING hash\\b" "$dir/sql/cuckoo_index.sql")" \
		"$(grep -ciE "USING hash\\b" "$dir/sql/hash_index.sql") 0" \
		"$version: sed turned every USING hash of hash_index.sql into USING cuckoo"

	db=v${major}
	run_test "hash_$db" "$dir/sql/hash_index.sql" "$dir" "$dir/hash.out"
	run_test "cuckoo_$db" "$dir/sql/cuckoo_index.sql" "$dir" "$dir/cuckoo.out"

	if [ "$major" = "$server_major" ]; then
		fbf_tap_ok "$(diff -u "$dir/expected/hash_index.out" "$dir/hash.out" >"$dir/upstream.diff" && echo same || head -40 "$dir/upstream.diff")" \
			"same" "$version: the hash run matches upstream's expected/hash_index.out"
	else
		echo "# $version on a $server_major server: the hash run is compared with the cuckoo run only" \
			"($(diff "$dir/expected/hash_index.out" "$dir/hash.out" | grep -c '^[<>]') lines differ from upstream's expected output)"
	fi

	to_cuckoo "$dir/hash.out" >"$dir/hash_as_cuckoo.out"
	fbf_tap_ok "$(diff -u "$dir/hash_as_cuckoo.out" "$dir/cuckoo.out" >"$dir/cuckoo.diff" && echo same || head -60 "$dir/cuckoo.diff")" \
		"same" "$version: hash_index.sql USING cuckoo gives hash's output, statement for statement ($(grep -c '' "$dir/cuckoo.out") lines)"
	fbf_tap_ok "$(grep -c '^ERROR' "$dir/cuckoo.out")" "$(grep -c '^ERROR' "$dir/hash.out")" \
		"$version: the cuckoo run raises exactly the errors the hash run does"

	# the cuckoo indexes the test leaves behind are consistent with their
	# tables, and the lookups used them
	verified=$(psql -X -At -d "cuckoo_$db" -c "
		SELECT count(*) || ' ' || count(*) FILTER (WHERE (cuckoo_index_verify(c.oid)).entries >= 0)
		FROM pg_class c JOIN pg_am a ON a.oid = c.relam
		WHERE a.amname = 'cuckoo' AND c.relkind = 'i'")
	fbf_tap_ok "$([ "${verified%% *}" -ge 4 ] && [ "${verified%% *}" = "${verified##* }" ] && echo clean || echo "$verified")" \
		"clean" "$version: every cuckoo index left behind (${verified%% *}) passes cuckoo_index_verify"
	fbf_tap_ok "$(psql -X -At -d "cuckoo_$db" -c "
		SELECT sum(s.idx_scan) > 0 FROM pg_stat_user_indexes s
		JOIN pg_class c ON c.oid = s.indexrelid JOIN pg_am a ON a.oid = c.relam
		WHERE a.amname = 'cuckoo'")" "t" "$version: the cuckoo run's lookups went through cuckoo indexes"
done

echo "1..$n"
[ "$bad" -eq 0 ]
