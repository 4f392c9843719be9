#!/usr/bin/env bash
# test/check.sh: the whole test suite, from a fresh Debian 12 machine, as root.
#
#   bash test/check.sh
#
# Installs what it needs, builds with warnings as errors, then runs every
# layer: the standalone C tests of the pure core (under AddressSanitizer and
# UBSan), the decoder fuzzer, `make installcheck` (pg_regress and isolation
# specs) against a scratch cluster it starts and always stops, then again
# on a cluster with nothing but shared_preload_libraries = 'fbf' (every
# other setting at its default), and the TAP tests (crash, restart,
# replication, the worker, Citus); then the same suites against
# PostgreSQL 16 and 18 (built once per machine from the vendored sources,
# test/lib.sh's fbf_pg_install; Citus is built for 16 too, and its tests
# skip on 18, which Citus 13.2 does not support), and pg_upgrade
# from 15 to 16 and from 15 to 18 (test/pg_upgrade.sh).  Prints how long
# each part took, and ends with the line "N passed, N failed"; exits
# non-zero on any failure.
#
# To stay within an hour on a 2-core machine:
#   - PostgreSQL 16 and 18 are built (when not cached) in the background,
#     under nice, one after the other, from the start, while 15's suites run;
#     16's and 18's suites wait for them;
#   - the TAP tests run two at a time (prove -j$FBF_TAP_JOBS, default 2),
#     the longest first, except those that measure time or rates
#     ($FBF_TAP_SERIAL), which run one at a time once nothing else runs
#     (the builds are done);
#   - 16 and 18 leave out the longest TAP tests whose code has no
#     version seam ($FBF_TAP_SKIP_16, $FBF_TAP_SKIP_18); they run on 15;
#   - each Citus TAP test runs once, on 15 or on 16 ($FBF_TAP_SKIP_15),
#     so that both builds of Citus are tried.
# FBF_CORE_SUITES=1 adds PostgreSQL's own suites with and without fbf
# (test/pg_core_suites.sh; long).
set -uo pipefail

. "$(dirname "$0")/lib.sh"
cd "$FBF_ROOT"

passed=0
failed=0
failures=()
todos=()	# "not ok ... # TODO": known open, counted neither way, listed
logdir=$(mktemp -d /tmp/fbf-check-logs.XXXXXX)
chmod 755 "$logdir"  # the TAP tests write below it as postgres

# the background builds of PostgreSQL 16 and 18 (a session of their own,
# so that an early exit stops all of it)
bg_pid=""
cleanup() {
	if [ -n "$bg_pid" ] && kill -0 "$bg_pid" 2>/dev/null; then
		kill -- -"$bg_pid" 2>/dev/null
	fi
	fbf_cluster_stop
}
trap cleanup EXIT

# the TAP tests that measure time or rates, run alone (by number)
FBF_TAP_SERIAL=${FBF_TAP_SERIAL-044 060 014 010 059}
# the longest, started first so that the parallel run ends evenly
FBF_TAP_FIRST=${FBF_TAP_FIRST-022 011 049 042 041 032 017 006 005 007 002 018 013}
# the versions besides 15 whose TAP tests run with Citus (built for each)
FBF_CITUS_VERSIONS=${FBF_CITUS_VERSIONS-16}
# TAP tests left out on 16 and 18, for time: the longest whose code has
# no version seam (shares under a flood, the registry through 4,100
# counters made and dropped, the interrupt checks of batches and of passes
# over large values, share tables passed between 640 counters, the
# reserve of the chains, growth after a late refresh: the share table's
# and the registry's shared memory, loops and arithmetic in fbf's own
# code, the same on every version); they run on 15.  The Citus tests
# are split between 15 and 16 (where Citus is built for 16): the two
# longest, the distributed counters and dedup tables, run on 16, the
# transfers, node crashes, placement locks and shares under a flood on 15.
# Set a list empty (FBF_TAP_SKIP_16=) to run everything on that version.
if [[ " $FBF_CITUS_VERSIONS " == *" 16 "* ]]; then
	FBF_TAP_SKIP_15=${FBF_TAP_SKIP_15-022 042}
	FBF_TAP_SKIP_16=${FBF_TAP_SKIP_16-044 011 032 047 054 057 037 041 049 050 060}
else
	FBF_TAP_SKIP_15=${FBF_TAP_SKIP_15-}
	FBF_TAP_SKIP_16=${FBF_TAP_SKIP_16-044 011 032 047 054 057}
fi
FBF_TAP_SKIP_18=${FBF_TAP_SKIP_18-044 011 032 047 054 057}
FBF_TAP_JOBS=${FBF_TAP_JOBS:-2}

# how long each part takes: `part NAME` ends the part before and starts
# one; finish prints them
part_names=()
digest=()
part_secs=()
part_name=""
part_start=$SECONDS
part() {
	if [ -n "$part_name" ]; then
		part_names+=("$part_name")
		part_secs+=($((SECONDS - part_start)))
		# as it ends too, for a run cut short
		fbf_log "part done in $((SECONDS - part_start)) s (at $SECONDS s): $part_name"
	fi
	part_name=$1
	part_start=$SECONDS
}

# the "not ok" lines of a TAP stream marked TODO (known open), listed
note_todos() {
	local file=$1 label=$2 line
	while IFS= read -r line; do
		todos+=("$label: $line")
	done < <(grep -E '^ *not ok [0-9]+.*# TODO' "$file")
}

# count the "ok"/"not ok" lines of a TAP stream saved in a file
count_tap() {
	local file=$1 label=$2 ok notok
	ok=$(grep -c '^ok ' "$file")
	notok=$(grep '^not ok ' "$file" | grep -vc '# TODO')
	passed=$((passed + ok))
	failed=$((failed + notok))
	note_todos "$file" "$label"
	if [ "$notok" -gt 0 ]; then
		failures+=("$label: $(grep '^not ok ' "$file" | grep -v '# TODO' | tr '\n' ';')")
	fi
}

# count the per-assertion results of a verbose prove run
count_tap_prove() {
	local file=$1 ok
	ok=$(grep -cE '^ *ok [0-9]+' "$file")
	tap_bad=$(grep -E '^ *not ok [0-9]+' "$file" | grep -vc '# TODO')
	passed=$((passed + ok))
	failed=$((failed + tap_bad))
	note_todos "$file" TAP
	if [ "$tap_bad" -gt 0 ]; then
		failures+=("TAP: $(grep -E '^ *not ok [0-9]+' "$file" | grep -v '# TODO' | tr '\n' ';')")
		# what the failed assertions said (diag lines around them)
		digest+=("TAP, the failed assertions and the lines around each:"
			"$(grep -E -B 6 -A 8 '^ *not ok [0-9]+' "$file" | grep -v '# TODO' | head -n 80)")
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

# a test script that prints TAP: run it, show and count its lines; an exit
# status other than 0 with no failed line counts as one failure.
# $1: label, $2: log name, then the command
run_script() {
	local label=$1 log="$logdir/$2.tap" rc
	shift 2
	fbf_log "$label ($*)"
	if "$@" >"$log" 2>&1; then rc=0; else rc=$?; fi
	cat "$log"
	count_tap "$log" "$label"
	[ $rc -eq 0 ] || [ "$(grep -c '^not ok' "$log")" -gt 0 ] ||
		{ failed=$((failed + 1)); failures+=("$label: $* exited $rc"); }
}

finish() {
	part ""
	echo
	local i
	for i in "${!part_names[@]}"; do
		printf 'time: %5d s  %s\n' "${part_secs[$i]}" "${part_names[$i]}"
	done
	printf 'time: %5d s  in all\n' "$SECONDS"
	[ ${#todos[@]} -eq 0 ] || printf 'TODO (known open, not counted): %s\n' "${todos[@]}"
	if [ ${#failures[@]} -gt 0 ]; then
		[ ${#digest[@]} -eq 0 ] || printf '%s\n' "${digest[@]}"
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

# ---- PostgreSQL 16 and 18, built in the background (once per machine) ----
# one after the other, niced, while 15's suites run; each leaves its bin
# directory (empty: no tarball, skipped), exit status and seconds in $logdir
FBF_PG_NICE="nice -n 10" setsid bash -c '
	. test/lib.sh
	for v in 16 18; do
		s=$SECONDS
		fbf_pg_install "$v" >"$1/pg$v.bin" 2>"$1/pg$v.build.log"
		echo $? >"$1/pg$v.rc"
		echo $((SECONDS - s)) >"$1/pg$v.secs"
	done' fbf-pg-builds "$logdir" &
bg_pid=$!
fbf_log "building PostgreSQL 16 and 18 in the background (pid $bg_pid; logs in $logdir/pg*.build.log)"

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
fbf_log "layers.pl finds a call up planted into a copy of the objects (test/layers_test.sh)"
if bash test/layers_test.sh >"$logdir/layers_test.log" 2>&1; then
	passed=$((passed + 1))
	cat "$logdir/layers_test.log"
else
	cat "$logdir/layers_test.log"
	failed=$((failed + 1))
	failures+=("test/layers_test.sh")
fi

# ---- 1. the pure core, standalone, under ASan + UBSan ----
part "core tests and fuzzer"
fbf_log "standalone tests of the pure core (ASan + UBSan)"
require "build core tests" make -C test/core -s clean all
# a program of test/core that prints TAP, run in test/core: show and count
# its lines; an exit status other than 0 with no failed line counts as one
# failure.  $1: label (and log name), then the program and its arguments
run_core() {
	local label=$1 prog=$2 log="$logdir/$1.tap" rc
	shift 2
	(cd test/core && "./$prog" "$@") >"$log" 2>&1
	rc=$?
	cat "$log"
	count_tap "$log" "$label"
	[ $rc -eq 0 ] || [ "$(grep -c '^not ok' "$log")" -gt 0 ] ||
		{ failed=$((failed + 1)); failures+=("$prog exited $rc"); }
}
for t in core cuckoo cwin stream; do
	run_core "$t" "test_$t"
done

fbf_log "fuzzing the fbf decoders (bounded)"
run_core fuzz fuzz_decode 300000

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
		# shown, and kept with the logs (the next run overwrites the tree's)
		[ -f "$diffs" ] && cat "$diffs" && cp "$diffs" "${log%.log}.diffs"
		[ "$bad" -gt 0 ] || failed=$((failed + 1))
		failures+=("installcheck ($label)")
		# the tail of a CI run is often all one sees of it: the start of
		# the diffs and the tests that failed are printed again at the end,
		# the tests last
		digest+=("$([ -f "$diffs" ] && head -n 40 "$diffs")"
			"installcheck ($label), exit $rc:"
			"$(grep -E '\.\.\. (FAILED|failed)|^not ok [0-9]+ ' "$log")")
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

# ---- the cuckoo index against PostgreSQL's hash index ----
# PostgreSQL's hash_index.sql (16.2's and 18.3's) USING hash and USING
# cuckoo give the same output: run with bash and the bin directory of the
# server to test (15 here, then 16 and 18 in suites_on); it starts its own
# cluster and prints TAP, counted here
hash_compare=test/cuckoo_hash_index.sh
run_hash_compare() {
	local v=$1 bin=$2
	[ -n "$hash_compare" ] || return 0
	run_script "cuckoo against hash (PostgreSQL $v)" "hash_compare$v" bash "$hash_compare" "$bin"
}
run_hash_compare 15 "$PG_BINDIR"

# ---- 2b. the same with nothing but fbf preloaded ----
# every other setting at its default: the worker on, random window keys,
# max_prepared_transactions = 0
part "pg_regress and isolation, default settings (PostgreSQL 15)"
require "start a scratch cluster with default settings" fbf_cluster_start --plain
run_installcheck "pg_regress, default settings" "$logdir/regress-plain.log" regression.diffs \
	ISOLATION= TAP_TESTS=
# twice in a row on the same server: what the first run left does not matter
run_installcheck "pg_regress, default settings, again" "$logdir/regress-plain2.log" regression.diffs \
	ISOLATION= TAP_TESTS=
run_installcheck "isolation, default settings" "$logdir/isolation-plain.log" \
	test/isolation/output/regression.diffs REGRESS= TAP_TESTS=
fbf_cluster_stop

# ---- 3. upgrade from 1.0 (installs 1.0, then this build again) ----
part "upgrade from fbf 1.0 and 1.1, and 1.4's WAL replayed (PostgreSQL 15)"
run_script "upgrade from 1.0" upgrade bash test/upgrade.sh

# ---- 4. TAP tests (PostgreSQL::Test::Cluster), as the postgres user ----
# the tests of test/t, $FBF_TAP_FIRST first, but those numbered in $1;
# tap_par: those that run $FBF_TAP_JOBS at a time, tap_ser: those of
# $FBF_TAP_SERIAL
tap_lists() {
	local skip=${1:-} f n
	tap_par=""
	tap_ser=""
	for n in $FBF_TAP_FIRST; do
		case " $skip $FBF_TAP_SERIAL " in *" $n "*) continue ;; esac
		for f in test/t/"$n"_*.pl; do
			[ -f "$f" ] && tap_par="$tap_par $f"
		done
	done
	for f in test/t/*.pl; do
		n=$(basename "$f" | cut -d_ -f1)
		case " $skip " in *" $n "*) continue ;; esac
		case " $FBF_TAP_SERIAL " in
		*" $n "*) tap_ser="$tap_ser $f" ;;
		*) case " $FBF_TAP_FIRST " in *" $n "*) ;; *) tap_par="$tap_par $f" ;; esac ;;
		esac
	done
}
tap_lists "$FBF_TAP_SKIP_15"
# run TAP tests and count them; $1: label, $2: log name, $3: how many at
# once, then the tests
run_tap() {
	local label=$1 name=$2 log="$logdir/$2.log" jobs=$3 rc
	shift 3
	[ $# -gt 0 ] || return 0
	fbf_log "TAP tests (prove -j$jobs, $label)"
	if FBF_PROVE_JOBS=$jobs FBF_PROVE_TESTS="$*" fbf_run_tap "$logdir/$name" >"$log" 2>&1; then
		rc=0
	else
		rc=$?
	fi
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

part "TAP tests, with Citus${FBF_TAP_SKIP_15:+, without $FBF_TAP_SKIP_15}, $FBF_TAP_JOBS at a time (PostgreSQL 15)"
# Citus for test/t/022_citus.pl, from the vendored tarball (skipped without it)
require "build and install Citus" fbf_citus_install
# shellcheck disable=SC2086
run_tap "PostgreSQL 15" tap $FBF_TAP_JOBS $tap_par

# ---- 5. the builds of PostgreSQL 16 and 18 ----
part "waiting for the background builds of PostgreSQL 16 and 18"
wait "$bg_pid"
bg_pid=""
declare -A pg_bin
for v in 16 18; do
	secs=$(cat "$logdir/pg$v.secs" 2>/dev/null || echo "?")
	fbf_log "PostgreSQL $v, in the background ($secs s): $(tail -1 "$logdir/pg$v.build.log" 2>/dev/null | sed 's/^==> //')"
	if [ "$(cat "$logdir/pg$v.rc" 2>/dev/null)" != 0 ]; then
		cat "$logdir/pg$v.build.log" >&2
		failed=$((failed + 1))
		failures+=("build PostgreSQL $v")
		finish
	fi
	pg_bin[$v]=$(cat "$logdir/pg$v.bin")
	part_names+=("PostgreSQL $v: build or cache (in the background, niced)")
	part_secs+=("$secs")
done

part "TAP tests that measure time, one at a time (PostgreSQL 15)"
# shellcheck disable=SC2086
run_tap "PostgreSQL 15, one at a time" tap-serial 1 $tap_ser

# ---- 6. PostgreSQL 16 and 18: the same suites, and pg_upgrade from 15 ----
# $1: the major version; $2: its bin directory
suites_on() {
	local v=$1 bin=$2 pg15_path=$PATH pg15_bindir=$PG_BINDIR
	part "fbf build, pg_regress and isolation (PostgreSQL $v)"
	require "build (warnings as errors) and install for PostgreSQL $v" \
		fbf_build_install_into "$bin"
	# the clients, pg_regress and the TAP tests take the server from PATH
	# and PG_BINDIR; the tree's build (for 15) is not touched
	export PATH="$bin:$PATH"
	PG_BINDIR=$bin
	require "start a PostgreSQL $v scratch cluster" fbf_cluster_start \
		"fbf.worker_enabled = off" "fbf.fixed_window_keys = on"
	run_installcheck "pg_regress, PostgreSQL $v" "$logdir/regress$v.log" regression.diffs \
		ISOLATION= TAP_TESTS= PG_CONFIG="$bin/pg_config"
	run_installcheck "isolation, PostgreSQL $v" "$logdir/isolation$v.log" \
		test/isolation/output/regression.diffs REGRESS= TAP_TESTS= PG_CONFIG="$bin/pg_config"
	fbf_cluster_stop
	run_hash_compare "$v" "$bin"

	# Citus for its tests, where Citus 13.2 supports the version (16; its
	# tests skip on 18)
	local skip_var=FBF_TAP_SKIP_$v citus="without Citus"
	if [[ " $FBF_CITUS_VERSIONS " == *" $v "* ]]; then
		part "Citus build and install (PostgreSQL $v)"
		require "build and install Citus for PostgreSQL $v" fbf_citus_install
		citus="with Citus"
	fi
	part "TAP tests, $citus${!skip_var:+, without ${!skip_var}} (PostgreSQL $v)"
	tap_lists "${!skip_var:-}"
	# shellcheck disable=SC2086
	run_tap "PostgreSQL $v" "tap$v" "$FBF_TAP_JOBS" $tap_par
	# shellcheck disable=SC2086
	run_tap "PostgreSQL $v, one at a time" "tap$v-serial" 1 $tap_ser
	export PATH=$pg15_path
	PG_BINDIR=$pg15_bindir

	# pg_upgrade from 15 keeps what the counters remember
	part "pg_upgrade from 15 to $v"
	export FBF_PG_NEW_BINDIR=$bin
	run_script "pg_upgrade from 15 to $v" "pg_upgrade$v" bash test/pg_upgrade.sh "$v"
	unset FBF_PG_NEW_BINDIR
}
for v in 16 18; do
	if [ -n "${pg_bin[$v]}" ]; then
		suites_on "$v" "${pg_bin[$v]}"
	fi
done

# ---- 7. PostgreSQL's own suites, with and without fbf (optional, long) ----
if [ "${FBF_CORE_SUITES:-}" = 1 ]; then
	part "PostgreSQL's own suites, with and without fbf (FBF_CORE_SUITES=1)"
	if [ -f test/pg_core_suites.sh ]; then
		run_script "PostgreSQL's own suites" core-suites bash test/pg_core_suites.sh
	else
		failed=$((failed + 1))
		failures+=("FBF_CORE_SUITES=1 but no test/pg_core_suites.sh")
	fi
fi

finish
