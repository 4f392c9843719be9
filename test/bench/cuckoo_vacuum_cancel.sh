#!/usr/bin/env bash
# test/bench/cuckoo_vacuum_cancel.sh: how soon a VACUUM busy in a cuckoo
# index's posting lists ends after pg_cancel_backend, against how soon a
# pg_sleep does, in one run.
#
#   bash test/bench/cuckoo_vacuum_cancel.sh
#
# Environment (defaults in brackets; the defaults take about 2 minutes):
#   CANCEL_ROUNDS   interleaved rounds; medians are reported [5]
#   CANCEL_ROWS     rows of the table, all of one of 3 keys [3000000]
#
# A round: the table is emptied and filled again (CANCEL_ROWS rows, k =
# g % 3, a cuckoo index on k: three keys, each a posting list of a million
# entries at the default size), nine rows in ten deleted and the heap
# pruned (VACUUM (INDEX_CLEANUP OFF)); then a VACUUM starts, and a second
# session cancels it 0.1 s after it reaches its index ("vacuuming
# indexes"); then, for the baseline, a `SELECT pg_sleep(10)` is cancelled
# the same way 0.5 s after it starts.  Each latency runs from the moment
# before the cancelling psql starts to the moment the cancelled psql has
# exited: the same clients, the same overheads on both sides.  Reported:
# each round's two latencies, their medians, and the median of VACUUM /
# pg_sleep, and whether the VACUUM ended by the cancel (a VACUUM that
# finished first is reported as such, its latency negative).
# cuckoo_index_verify must accept the index after every round.
#
# Scratch cluster from test/lib.sh (fbf preloaded, fsync off), stopped at
# the end.  Not a test.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../lib.sh
source "$here/test/lib.sh"
rounds=${CANCEL_ROUNDS:-5}
rows=${CANCEL_ROWS:-3000000}

fbf_cluster_start
trap fbf_cluster_stop EXIT
q() { psql -X -qAt -v ON_ERROR_STOP=1 "$@"; }
work=$(mktemp -d /tmp/fbf-cancel.XXXXXX)

q -c "CREATE EXTENSION fbf" \
  -c "CREATE TABLE big (g int, k int) WITH (autovacuum_enabled = off)" \
  -c "CREATE INDEX big_k ON big USING cuckoo (k)"
fbf_log "cuckoo_vacuum_cancel: $(date -u +%FT%TZ) on $(uname -n), $rounds rounds, $rows rows"

# $1: application name, $2: phase to wait for ('' for none), $3: seconds
# to wait after it; cancels the backend running as $1 and prints the time
# just before the cancelling psql started
cancel_after() {
	local app=$1 phase=$2 delay=$3 t0 _
	for _ in $(seq 1 3000); do
		if [ -n "$phase" ]; then
			[ "$(q -c "SELECT count(*) FROM pg_stat_progress_vacuum p JOIN pg_stat_activity a USING (pid)
					   WHERE a.application_name = '$app' AND p.phase = '$phase'")" = 1 ] && break
		else
			[ "$(q -c "SELECT count(*) FROM pg_stat_activity
					   WHERE application_name = '$app' AND state = 'active'")" = 1 ] && break
		fi
		sleep 0.01
	done
	sleep "$delay"
	t0=$(date +%s.%N)
	q -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = '$app'" >/dev/null
	echo "$t0"
}

vac=()
slp=()
for r in $(seq 1 "$rounds"); do
	q -c "TRUNCATE big" -c "INSERT INTO big SELECT g, g % 3 FROM generate_series(1, $rows) g" \
	  -c "DELETE FROM big WHERE g % 10 <> 0" -c "VACUUM (INDEX_CLEANUP OFF) big"
	( psql -X -qAt -c "SET application_name = 'vacuum_big'" -c "VACUUM big" \
		> "$work/vacuum_big.out" 2>&1 || true; date +%s.%N > "$work/vacuum_big.end" ) &
	t0=$(cancel_after vacuum_big 'vacuuming indexes' 0.1)
	wait
	v=$(echo "$(cat "$work/vacuum_big.end") - $t0" | bc)
	grep -q "canceling statement" "$work/vacuum_big.out" || v="-$v"
	q -c "SELECT 1 FROM cuckoo_index_verify('big_k')" >/dev/null
	( psql -X -qAt -c "SET application_name = 'sleep'" -c "SELECT pg_sleep(10)" \
		> "$work/sleep.out" 2>&1 || true; date +%s.%N > "$work/sleep.end" ) &
	t0=$(cancel_after sleep '' 0.5)
	wait
	s=$(echo "$(cat "$work/sleep.end") - $t0" | bc)
	printf 'round %d: VACUUM ended %.3f s after the cancel%s, pg_sleep %.3f s\n' "$r" "${v#-}" \
		"$([ "${v:0:1}" = - ] && echo ' (it had finished: not cancelled)')" "$s"
	vac+=("$v")
	slp+=("$s")
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
mv=$(median "${vac[@]}")
ms=$(median "${slp[@]}")
printf 'median: VACUUM %.3f s, pg_sleep %.3f s, VACUUM / pg_sleep %.2f\n' "$mv" "$ms" \
	"$(echo "$mv / $ms" | bc -l)"
rm -rf "$work"
