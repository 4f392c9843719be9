#!/usr/bin/env bash
# test/bench/ab_bench.sh: counter_bench.sh for two revisions of fbf,
# interleaved, to tell a change's cost from the machine's noise.
#
#   bash test/bench/ab_bench.sh BEFORE AFTER [rounds [counter_bench.sh args...]]
#
#   e.g. HOT_CLIENTS=2 bash test/bench/ab_bench.sh b3551a4 main 3 8 /dev/null 3 12
#
# BEFORE and AFTER are git revisions of this repository.  Each is checked
# out into a scratch worktree and built into its own copy of the
# PostgreSQL installation that pg_config names (Debian's layout: lib,
# share and include under /usr), so the two builds never overwrite each
# other and neither touches the system's.  Then counter_bench.sh runs
# BEFORE, AFTER, BEFORE, AFTER ... `rounds` times (default 3), each run
# with its own scratch cluster and the same arguments (default: 8 s per
# run, 3 rounds, 12 s of steady state), and the script prints each run's
# fbf / plain ratios (1,000 keys; the hot key at the first HOT_CLIENTS),
# plain / fbf server CPU per transaction (1,000 keys, sync off) and false
# dismissals, then the medians of each side.  Both revisions are measured
# by this checkout's harness (counter_bench.sh, bench_lib.sh and the
# workloads, copied into each worktree; each revision builds itself with
# its own test/lib.sh).  Every ratio is
# measured inside one run of counter_bench.sh, against its own plain
# UPDATE; alternating the revisions spreads the machine's drift over both.
# Every run's counters are planned for one rate (counter_bench.sh's
# PLAN_RATE), so that a revision that calibrates faster is not measured
# on a larger window than the other: PLAN_RATE if it is set, else the
# larger of the two revisions' calibrations, made once before the rounds
# (counter_bench.sh's CALIBRATE_ONLY).
# Logs and CSVs stay in the scratch directory it prints.  Not a test.
set -euo pipefail

. "$(dirname "$0")/../lib.sh"

[ $# -ge 2 ] || { sed -n '2,8p' "$0"; exit 2; }
before=$1
after=$2
rounds=${3:-3}
shift $(( $# >= 3 ? 3 : 2 ))
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(8 /dev/null 3 12)
case ${PLAN_RATE:-} in
'') ;;
*[!0-9]* | 0*) echo "PLAN_RATE is a positive whole number of operations a second, not $PLAN_RATE" >&2; exit 2 ;;
esac

work=$(mktemp -d /var/tmp/fbf-ab.XXXXXX)
chmod 755 "$work"
cleanup() {
	local side
	for side in before after; do
		[ -d "$work/src-$side" ] && git -C "$FBF_ROOT" worktree remove --force "$work/src-$side" >/dev/null 2>&1
	done
	return 0
}
trap cleanup EXIT

pg_lib=$(dirname "$(dirname "$(pg_config --bindir)")")	# /usr/lib/postgresql
for side in before after; do
	rev=${!side}
	git -C "$FBF_ROOT" worktree add -q --detach "$work/src-$side" "$rev"
	cp "$FBF_ROOT/test/bench/counter_bench.sh" "$FBF_ROOT/test/bench/bench_lib.sh" "$work/src-$side/test/bench/"
	cp -r "$FBF_ROOT/test/bench/workloads/." "$work/src-$side/test/bench/workloads/"
	prefix="$work/pg-$side"
	mkdir -p "$prefix/usr/lib" "$prefix/usr/share" "$prefix/usr/include"
	cp -a "$pg_lib" "$prefix/usr/lib/"
	cp -a /usr/share/postgresql "$prefix/usr/share/"
	cp -a /usr/include/postgresql "$prefix/usr/include/"
	fbf_log "$side = $rev ($(git -C "$work/src-$side" log --oneline -1))"
done
bindir_of() { echo "$work/pg-$1$(pg_config --bindir)"; }

plan=${PLAN_RATE:-}
if [ -z "$plan" ]; then
	for side in before after; do
		fbf_log "calibrating $side"
		log="$work/${side}_calibration.log"
		(cd "$work/src-$side" && PATH="$(bindir_of "$side"):$PATH" CALIBRATE_ONLY=1 \
			bash test/bench/counter_bench.sh "${args[@]}") >"$log" 2>&1 ||
			{ echo "ab_bench.sh: the calibration failed: $log" >&2; exit 1; }
		rate=$(sed -n 's|^==> expected rate for the filters: \([0-9]*\)/s .*|\1|p' "$log" | head -1)
		[ -n "$rate" ] || { echo "ab_bench.sh: no planned rate in $log" >&2; exit 1; }
		fbf_log "$side: $rate/s"
		[ -n "$plan" ] && [ "$plan" -ge "$rate" ] || plan=$rate
	done
fi
fbf_log "every run's counters planned for $plan/s"
for round in $(seq 1 "$rounds"); do
	for side in before after; do
		fbf_log "round $round: $side"
		csv="$work/${side}_$round.csv"
		a=("${args[@]}")
		a[1]=$csv
		(cd "$work/src-$side" && PATH="$(bindir_of "$side"):$PATH" PLAN_RATE=$plan \
			bash test/bench/counter_bench.sh "${a[@]}") >"$work/${side}_$round.log" 2>&1
	done
done

# the ratios of one run: "a_off a_on hot_off hot_on cpu_off" (cpu_off:
# plain / fbf server CPU per transaction, 1,000 keys, sync off; "-" from a
# counter_bench.sh that does not measure it)
ratios() {
	local log=$1
	awk '
		/^== a\./ { sec = "a" } /^== b\./ { sec = "b" } /^== c\./ { sec = "" }
		sec == "a" && /^fbf \/ plain/ { aoff = $4; aon = $5 }
		sec == "a" && /^plain \/ fbf server CPU/ { cpu = $6 }
		sec == "b" && $1 ~ /^[0-9]+$/ && !hot[$2]++ { h[$2] = $5 }
		END { printf "%s %s %s %s %s\n", aoff, aon, h["off"], h["on"], cpu == "" ? "-" : cpu }' "$log"
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo
echo "fbf / plain tps, counter_bench.sh ${args[*]} (HOT_CLIENTS=${HOT_CLIENTS:-1 2 4}: the hot key at its first)"
printf '%-8s %-6s %10s %10s %12s %12s %12s\n' side round "1k off" "1k on" "hot off" "hot on" "CPU 1k off"
for side in before after; do
	for round in $(seq 1 "$rounds"); do
		read -r aoff aon hoff hon cpu <<<"$(ratios "$work/${side}_$round.log")"
		printf '%-8s %-6s %10s %10s %12s %12s %12s\n' "$side" "$round" "$aoff" "$aon" "$hoff" "$hon" "$cpu"
		echo "$aoff $aon $hoff $hon $cpu" >>"$work/$side.ratios"
	done
	m=()
	for col in 1 2 3 4 5; do
		m+=("$(awk -v c=$col '$c != "-" { print $c }' "$work/$side.ratios" | median)")
	done
	printf '%-8s %-6s %10s %10s %12s %12s %12s\n' "$side" median "${m[@]}"
done
echo "(CPU: plain / fbf server CPU time per transaction, the cluster's processes from /proc)"
echo
echo "false dismissals (unique operations), by run:"
for side in before after; do
	for round in $(seq 1 "$rounds"); do
		echo "$side $round: $(grep -m1 '^fbf false dismissals' "$work/${side}_$round.log" | sed 's/^fbf false dismissals (unique operations): //')"
	done
done
echo "counters planned for $plan/s in every run; logs: $work"
