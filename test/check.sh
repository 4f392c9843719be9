#!/usr/bin/env bash
# test/check.sh: the whole test suite, from a fresh Debian 12 machine, as root.
#
#   bash test/check.sh
#
# Installs what it needs, builds with warnings as errors, then runs every
# layer: the standalone C tests of the pure core (under AddressSanitizer and
# UBSan), the decoder fuzzer, `make installcheck` (pg_regress and isolation
# specs) against a scratch cluster it starts and always stops, and the TAP
# tests (crash, restart, replication, the worker); then the same suites
# against PostgreSQL 18 (built once per machine from the vendored source,
# test/lib.sh's fbf_pg18_install; Citus' tests skip there), and pg_upgrade
# from 15 to 18 (test/pg_upgrade.sh).  Prints how long each part took, and
# ends with the line "N passed, N failed"; exits non-zero on any failure.
set -uo pipefail

. "$(dirname "$0")/lib.sh"
cd "$FBF_ROOT"

passed=0
failed=0
failures=()
logdir=$(mktemp -d /tmp/fbf-check-logs.XXXXXX)
chmod 755 "$logdir"  # the TAP tests write below it as postgres

trap 'fbf_cluster_stop' EXIT

# how long each part takes: `part NAME` ends the part before and starts
# one; finish prints them
part_names=()
part_secs=()
part_name=""
part_start=$SECONDS
part() {
	if [ -n "$part_name" ]; then
		part_names+=("$part_name")
		part_secs+=($((SECONDS - part_start)))
	fi
	part_name=$1
	part_start=$SECONDS
}

# count the "ok"/"not ok" lines of a TAP stream saved in a file
count_tap() {
	local file=$1 label=$2 ok notok
	ok=$(grep -c '^ok ' "$file")
	notok=$(grep -c '^not ok ' "$file")
	passed=$((passed + ok))
	failed=$((failed + notok))
	if [ "$notok" -gt 0 ]; then
		failures+=("$label: $(grep '^not ok ' "$file" | tr '\n' ';')")
	fi
}

# count the per-assertion results of a verbose prove run
count_tap_prove() {
	local file=$1 ok
	ok=$(grep -cE '^ *ok [0-9]+' "$file")
	tap_bad=$(grep -cE '^ *not ok [0-9]+' "$file")
	passed=$((passed + ok))
	failed=$((failed + tap_bad))
	if [ "$tap_bad" -gt 0 ]; then
		failures+=("TAP: $(grep -E '^ *not ok [0-9]+' "$file" | tr '\n' ';')")
	fi
}

# a step that must succeed before tests can run; counts as one test
require() {
	local label=$1
	shift
	if "$@" >"$logdir/step.log" 2>&1; then
		return 0
	fi
	cat "$logdir/step.log" >&2
	failed=$((failed + 1))
	failures+=("$label")
	finish
}

finish() {
	part ""
	echo
	local i
	for i in "${!part_names[@]}"; do
		printf 'time: %5d s  %s\n' "${part_secs[$i]}" "${part_names[$i]}"
	done
	printf 'time: %5d s  in all\n' "$SECONDS"
	if [ ${#failures[@]} -gt 0 ]; then
		printf 'FAILED: %s\n' "${failures[@]}"
		echo "logs kept in $logdir"
	else
		rm -rf "$logdir"
	fi
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
}

part "dependencies, build and install (PostgreSQL 15)"
require "install dependencies" fbf_install_deps
require "build (warnings as errors) and install" fbf_build_install

# ---- 0. the shape of the code: files call down only ----
fbf_log "the call graph between the extension's files (test/layers.pl)"
if perl test/layers.pl >"$logdir/layers.log" 2>&1; then
	passed=$((passed + 1))
	cat "$logdir/layers.log"
	echo "ok - no call cycle between files, no call up the layers of src/layers.txt"
else
	cat "$logdir/layers.log"
	failed=$((failed + 1))
	failures+=("test/layers.pl")
fi

# ---- 1. the pure core, standalone, under ASan + UBSan ----
part "core tests and fuzzer"
fbf_log "standalone tests of the pure core (ASan + UBSan)"
require "build core tests" make -C test/core -s clean all
(cd test/core && ./test_core) >"$logdir/core.tap" 2>&1
rc=$?
cat "$logdir/core.tap"
count_tap "$logdir/core.tap" "core"
[ $rc -eq 0 ] || [ "$(grep -c '^not ok' "$logdir/core.tap")" -gt 0 ] ||
	{ failed=$((failed + 1)); failures+=("test_core exited $rc"); }
(cd test/core && ./test_cuckoo) >"$logdir/cuckoo.tap" 2>&1
rc=$?
cat "$logdir/cuckoo.tap"
count_tap "$logdir/cuckoo.tap" "cuckoo"
[ $rc -eq 0 ] || [ "$(grep -c '^not ok' "$logdir/cuckoo.tap")" -gt 0 ] ||
	{ failed=$((failed + 1)); failures+=("test_cuckoo exited $rc"); }
(cd test/core && ./test_cwin) >"$logdir/cwin.tap" 2>&1
rc=$?
cat "$logdir/cwin.tap"
count_tap "$logdir/cwin.tap" "cwin"
[ $rc -eq 0 ] || [ "$(grep -c '^not ok' "$logdir/cwin.tap")" -gt 0 ] ||
	{ failed=$((failed + 1)); failures+=("test_cwin exited $rc"); }
(cd test/core && ./test_stream) >"$logdir/stream.tap" 2>&1
rc=$?
cat "$logdir/stream.tap"
count_tap "$logdir/stream.tap" "stream"
[ $rc -eq 0 ] || [ "$(grep -c '^not ok' "$logdir/stream.tap")" -gt 0 ] ||
	{ failed=$((failed + 1)); failures+=("test_stream exited $rc"); }

fbf_log "fuzzing the fbf decoders (bounded)"
(cd test/core && ./fuzz_decode 300000) >"$logdir/fuzz.tap" 2>&1
rc=$?
cat "$logdir/fuzz.tap"
count_tap "$logdir/fuzz.tap" "fuzz"
[ $rc -eq 0 ] || [ "$(grep -c '^not ok' "$logdir/fuzz.tap")" -gt 0 ] ||
	{ failed=$((failed + 1)); failures+=("fuzz_decode exited $rc"); }

# ---- 2. pg_regress against a scratch cluster ----
part "pg_regress, isolation and retry storm (PostgreSQL 15)"
# the worker stays off here so outputs do not depend on its timing;
# test/t/ checks it on its own
# and every filter gets the same key, so that its false positives are the
# same from run to run (fbf.fixed_window_keys: for tests only)
require "start a scratch cluster" fbf_cluster_start "fbf.worker_enabled = off" \
	"fbf.fixed_window_keys = on"
# pg_regress and the isolation tester are two runs, so that a failure in
# one does not hide the other's results
run_installcheck() {
	local label=$1 log=$2 diffs=$3
	shift 3
	fbf_log "make installcheck ($label)"
	make -s installcheck "$@" >"$log" 2>&1
	local rc=$?
	cat "$log"
	local ok bad
	# 15's pg_regress prints "test NAME ... ok", 16's and later TAP lines
	ok=$(grep -cE '^(test| ) +[a-z0-9_]+ +\.\.\. ok|^ok [0-9]+ +- ' "$log")
	bad=$(grep -cE '\.\.\. (FAILED|failed)|^not ok [0-9]+ ' "$log")
	passed=$((passed + ok))
	failed=$((failed + bad))
	if [ "$bad" -gt 0 ] || [ $rc -ne 0 ]; then
		[ -f "$diffs" ] && cat "$diffs"
		[ "$bad" -gt 0 ] || failed=$((failed + 1))
		failures+=("installcheck ($label)")
	fi
}
# (TAP_TESTS= : the TAP tests run below, as the postgres user)
run_installcheck "pg_regress" "$logdir/regress.log" regression.diffs ISOLATION= TAP_TESTS=
run_installcheck "isolation" "$logdir/isolation.log" test/isolation/output/regression.diffs REGRESS= TAP_TESTS=

# ---- end to end: clients cut off (dropped, killed, timed out) and retrying ----
fbf_log "retry storm (test/bench/retry_storm)"
if make -s -C test/bench retry_storm >"$logdir/storm.log" 2>&1 &&
	psql -X -q -c "DROP DATABASE IF EXISTS storm" -c "CREATE DATABASE storm" >>"$logdir/storm.log" 2>&1 &&
	psql -X -q -d storm -c "CREATE EXTENSION fbf" >>"$logdir/storm.log" 2>&1 &&
	test/bench/retry_storm -d "host=$PGHOST port=$PGPORT dbname=storm user=postgres" \
		-c 6 -n 500 -p 0.15 -s 7 >>"$logdir/storm.log" 2>&1; then
	passed=$((passed + 1))
	cat "$logdir/storm.log"
	echo "ok - every retried operation counted once by the idempotent counter"
else
	cat "$logdir/storm.log"
	failed=$((failed + 1))
	failures+=("retry storm")
fi
fbf_cluster_stop

# ---- 3. TAP tests (PostgreSQL::Test::Cluster), as the postgres user ----
part "TAP tests, with Citus (PostgreSQL 15)"
# Citus for test/t/022_citus.pl, from the vendored tarball (skipped without it)
require "build and install Citus" fbf_citus_install
# run the TAP tests and count them; $1: label, $2: log name
run_tap() {
	local label=$1 log="$logdir/$2.log" rc
	fbf_log "TAP tests (prove, $label)"
	if fbf_run_tap "$logdir/$2" >"$log" 2>&1; then rc=0; else rc=$?; fi
	cat "$log"
	count_tap_prove "$log"
	if grep -q '^Result: NOTESTS' "$log"; then
		failed=$((failed + 1))
		failures+=("prove found no TAP tests ($label)")
	elif [ $rc -ne 0 ] && [ "$tap_bad" -eq 0 ]; then
		failed=$((failed + 1))
		failures+=("prove exited $rc ($label)")
	fi
}
run_tap "PostgreSQL 15" tap

# ---- 4. upgrade from 1.0 (installs 1.0, then this build again) ----
part "upgrade from fbf 1.0 and 1.1 (PostgreSQL 15)"
fbf_log "upgrade from 1.0 (test/upgrade.sh)"
if bash test/upgrade.sh >"$logdir/upgrade.tap" 2>&1; then rc=0; else rc=$?; fi
cat "$logdir/upgrade.tap"
count_tap "$logdir/upgrade.tap" "upgrade"
[ $rc -eq 0 ] || [ "$(grep -c '^not ok' "$logdir/upgrade.tap")" -gt 0 ] ||
	{ failed=$((failed + 1)); failures+=("test/upgrade.sh exited $rc"); }

# ---- 5. PostgreSQL 18: the same suites against the newest server ----
# built once per machine (cached under $FBF_PG18_CACHE, keyed by the
# source tarball's sha256); without the tarball this part is skipped
part "PostgreSQL 18: build it (once per machine) and fbf"
fbf_log "PostgreSQL 18 (test/lib.sh: fbf_pg18_install)"
if ! pg18_bin=$(fbf_pg18_install); then
	failed=$((failed + 1))
	failures+=("build PostgreSQL 18")
	finish
fi
if [ -n "$pg18_bin" ]; then
	require "build (warnings as errors) and install for PostgreSQL 18" \
		fbf_build_install_into "$pg18_bin"
	# the clients, pg_regress and the TAP tests take the server from PATH
	# and PG_BINDIR; the tree's build (for 15) is not touched
	pg15_path=$PATH
	pg15_bindir=$PG_BINDIR
	export PATH="$pg18_bin:$PATH"
	PG_BINDIR=$pg18_bin

	part "pg_regress and isolation (PostgreSQL 18)"
	require "start a PostgreSQL 18 scratch cluster" fbf_cluster_start \
		"fbf.worker_enabled = off" "fbf.fixed_window_keys = on"
	run_installcheck "pg_regress, PostgreSQL 18" "$logdir/regress18.log" regression.diffs \
		ISOLATION= TAP_TESTS= PG_CONFIG="$pg18_bin/pg_config"
	run_installcheck "isolation, PostgreSQL 18" "$logdir/isolation18.log" \
		test/isolation/output/regression.diffs REGRESS= TAP_TESTS= PG_CONFIG="$pg18_bin/pg_config"
	fbf_cluster_stop

	# test/t/022_citus.pl skips itself: Citus 13.2 supports 15 to 17
	part "TAP tests, without Citus (PostgreSQL 18)"
	run_tap "PostgreSQL 18" tap18
	export PATH=$pg15_path
	PG_BINDIR=$pg15_bindir

	# ---- 6. pg_upgrade from 15 to 18 keeps what the counters remember ----
	part "pg_upgrade from 15 to 18"
	fbf_log "pg_upgrade from 15 to 18 (test/pg_upgrade.sh)"
	if FBF_PG18_BINDIR=$pg18_bin bash test/pg_upgrade.sh >"$logdir/pg_upgrade.tap" 2>&1; then rc=0; else rc=$?; fi
	cat "$logdir/pg_upgrade.tap"
	count_tap "$logdir/pg_upgrade.tap" "pg_upgrade"
	[ $rc -eq 0 ] || [ "$(grep -c '^not ok' "$logdir/pg_upgrade.tap")" -gt 0 ] ||
		{ failed=$((failed + 1)); failures+=("test/pg_upgrade.sh exited $rc"); }
fi

finish
