#!/usr/bin/env bash
# test/check.sh: the whole test suite, from a fresh Debian 12 machine, as root.
#
#   bash test/check.sh
#
# Installs what it needs, builds with warnings as errors, then runs every
# layer: the standalone C tests of the pure core (under AddressSanitizer and
# UBSan), the decoder fuzzer, `make installcheck` (pg_regress and isolation
# specs) against a scratch cluster it starts and always stops, and the TAP
# tests (crash, restart, replication, the worker).  Ends with the line
# "N passed, N failed" and exits non-zero on any failure.
set -uo pipefail

. "$(dirname "$0")/lib.sh"
cd "$FBF_ROOT"

passed=0
failed=0
failures=()
logdir=$(mktemp -d /tmp/fbf-check-logs.XXXXXX)
chmod 755 "$logdir"  # the TAP tests write below it as postgres

trap 'fbf_cluster_stop' EXIT

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
	echo
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

fbf_log "fuzzing the fbf decoders (bounded)"
(cd test/core && ./fuzz_decode 300000) >"$logdir/fuzz.tap" 2>&1
rc=$?
cat "$logdir/fuzz.tap"
count_tap "$logdir/fuzz.tap" "fuzz"
[ $rc -eq 0 ] || [ "$(grep -c '^not ok' "$logdir/fuzz.tap")" -gt 0 ] ||
	{ failed=$((failed + 1)); failures+=("fuzz_decode exited $rc"); }

# ---- 2. pg_regress against a scratch cluster ----
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
	ok=$(grep -cE '^(test| ) +[a-z0-9_]+ +\.\.\. ok' "$log")
	bad=$(grep -cE '\.\.\. (FAILED|failed)' "$log")
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
# Citus for test/t/022_citus.pl, from the vendored tarball (skipped without it)
require "build and install Citus" fbf_citus_install
fbf_log "TAP tests (prove)"
if fbf_run_tap "$logdir/tap" >"$logdir/tap.log" 2>&1; then rc=0; else rc=$?; fi
cat "$logdir/tap.log"
count_tap_prove "$logdir/tap.log"
if grep -q '^Result: NOTESTS' "$logdir/tap.log"; then
	failed=$((failed + 1))
	failures+=("prove found no TAP tests")
elif [ $rc -ne 0 ] && [ "$tap_bad" -eq 0 ]; then
	failed=$((failed + 1))
	failures+=("prove exited $rc")
fi

# ---- 4. upgrade from 1.0 (installs 1.0, then this build again) ----
fbf_log "upgrade from 1.0 (test/upgrade.sh)"
if bash test/upgrade.sh >"$logdir/upgrade.tap" 2>&1; then rc=0; else rc=$?; fi
cat "$logdir/upgrade.tap"
count_tap "$logdir/upgrade.tap" "upgrade"
[ $rc -eq 0 ] || [ "$(grep -c '^not ok' "$logdir/upgrade.tap")" -gt 0 ] ||
	{ failed=$((failed + 1)); failures+=("test/upgrade.sh exited $rc"); }

finish
