# test/bench/bench_lib.sh: what the pgbench-driven benchmarks share.
# Sourced after test/lib.sh (which owns packages, the build and scratch
# clusters); owns the benchmark side only:
#
#   bench_begin NAME    a work directory ($work, /tmp/fbf-NAME.XXXXXX), an
#                       EXIT trap that stops the pruner, the cluster and
#                       removes $work (and runs bench_cleanup_hook, if the
#                       script defines one), packages and the build
#   bench_cluster_start [conf lines]
#                       a scratch cluster with the durable settings every
#                       throughput comparison runs under: fsync on, 512 MB
#                       of shared buffers, no checkpoint during a run, the
#                       worker every second; more lines may override them,
#                       and BENCH_CONF, if set, is one more line after them
#                       (the same for every side: huge_pages = on, say),
#                       which overrides the script's own; the Citus scripts
#                       start their clusters otherwise and ignore it
#   PGBENCH, psqlq, sql the clients
#   lsn                 the WAL insert position
#   server_cpu_ticks    the CPU time the scratch cluster's processes have
#                       used so far (its postmaster and every process it
#                       started, live or exited), in clock ticks; nothing
#                       for a cluster that is not this script's
#   prune_start TABLE SYNC / prune_stop
#                       the pruning job of an exact table (the baseline of
#                       the counter and claim benchmarks): a DELETE of the
#                       rows older than $RETENTION_S seconds every second,
#                       under synchronous_commit = SYNC
#   bench_calibrate SQL-FILE CLIENTS FACTOR
#                       the rate to plan a window for: the pgbench script
#                       SQL-FILE run 5 s by CLIENTS clients with
#                       synchronous_commit off, its tps times FACTOR,
#                       rounded (the load the window will see, and room)
#   bench_counter_counts TABLE [COLUMN ...]
#                       "applied dismissed" of a counter or dedup table
#                       (fbf_counter_stats), then its other counts that
#                       COLUMN names, or a failure if it has none
#   bench_counts_into TABLE APPLIED-VAR DISMISSED-VAR
#                       bench_counter_counts TABLE into the caller's
#                       variables so named (a failure fails the caller)
#   bench_turn ROUND WORD ...
#                       the WORDs in their order in an odd ROUND, reversed
#                       in an even one: sides (or modes) taken in turn
#   bench_median_lines  the median of the numbers on standard input, one a
#                       line; nothing if there are none
#   bench_median CSV COLUMN [NAME=VALUE ...]
#                       the median of COLUMN over the rows of CSV whose
#                       columns NAME hold VALUE, leaving out the median
#                       rows (round = median) and empty cells; nothing if
#                       no row matches
#   bench_total CSV COLUMN [NAME=VALUE ...]
#                       the same rows' sum

PGBENCH="$PG_BINDIR/pgbench"
psqlq() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
sql() { psql -X -At -v ON_ERROR_STOP=1 -c "$1"; }
lsn() { sql "SELECT pg_current_wal_insert_lsn()"; }
# /proc/PID/stat past "PID (comm) ": utime, stime, cutime, cstime are the
# 12th to 15th fields; an exited child's time is in its parent's cutime
# and cstime once the postmaster has reaped it
server_cpu_ticks() {
	local pm
	[ -n "${FBF_SCRATCH:-}" ] && [ -r "$FBF_SCRATCH/data/postmaster.pid" ] || return 0
	pm=$(head -1 "$FBF_SCRATCH/data/postmaster.pid")
	{
		cat "/proc/$pm/stat"
		for c in $(pgrep -P "$pm"); do cat "/proc/$c/stat" 2>/dev/null || true; done
	} | sed 's/^.*) //' | awk '{ t += $12 + $13 + $14 + $15 } END { print t }'
}

PRUNER=""
bench_end() {
	if [ -n "$PRUNER" ]; then
		prune_stop
	fi
	if declare -F bench_cleanup_hook >/dev/null; then
		bench_cleanup_hook
	fi
	fbf_cluster_stop
	if [ -n "${work:-}" ]; then
		rm -rf "$work"
	fi
}

bench_begin() {
	work=$(mktemp -d "/tmp/fbf-$1.XXXXXX")
	trap bench_end EXIT
	fbf_install_deps
	fbf_build_install
}

bench_cluster_start() {
	fbf_cluster_start "fsync = on" "shared_buffers = '512MB'" "max_wal_size = '4GB'" \
		"checkpoint_timeout = '30min'" "fbf.naptime = '1s'" "$@" \
		${BENCH_CONF:+"$BENCH_CONF"}
}

prune_start() {
	local table=$1 sync=$2
	rm -f "$work/prune.stop"
	(
		while [ ! -e "$work/prune.stop" ]; do
			PGOPTIONS="-c synchronous_commit=$sync" psql -X -c \
				"DELETE FROM $table WHERE at < now() - interval '$RETENTION_S s'" || true
			sleep 1
		done
	) >"$work/prune.log" 2>&1 &
	PRUNER=$!
}

prune_stop() {
	touch "$work/prune.stop"
	wait "$PRUNER" 2>/dev/null || true
	PRUNER=""
}

# the cells of COLUMN in the rows of CSV matching every NAME=VALUE
bench_cells() {
	local csv=$1 col=$2
	shift 2
	awk -F, -v c="$col" -v conds="$*" '
		NR == 1 {
			for (i = 1; i <= NF; i++)
				idx[$i] = i
			if (!(c in idx)) {
				print "bench_cells: no column " c > "/dev/stderr"
				exit 1
			}
			n = split(conds, cs, " ")
			for (j = 1; j <= n; j++) {
				split(cs[j], kv, "=")
				col_of[j] = idx[kv[1]]
				want[j] = kv[2]
			}
			next
		}
		{
			for (j = 1; j <= n; j++)
				if ($col_of[j] != want[j])
					next
			if (("round" in idx && $idx["round"] == "median") || $idx[c] == "")
				next
			print $idx[c]
		}' "$csv"
}

bench_calibrate() {
	local file=$1 clients=$2 factor=$3 out tps
	out=$(PGOPTIONS="-c synchronous_commit=off" "$PGBENCH" -n -M prepared -c "$clients" -j "$clients" \
		-T 5 -f "$file" 2>&1) || { printf '%s\n' "$out" >&2; return 1; }
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out" | head -1)
	if ! awk -v t="${tps:-0}" 'BEGIN { exit !(t > 0) }'; then
		printf '%s\n' "$out" >&2
		echo "bench_calibrate: no rate in pgbench's output" >&2
		return 1
	fi
	awk -v t="$tps" -v f="$factor" 'BEGIN { printf "%.0f\n", t * f }'
}

bench_counter_counts() {
	local table=$1 cols=applied,dismissed c
	shift
	if [ $# -gt 0 ]; then cols=$cols,$(IFS=,; echo "$*"); fi
	c=$(psql -X -At -F ' ' -v ON_ERROR_STOP=1 \
		-c "SELECT $cols FROM fbf_counter_stats WHERE counter = '$table'::regclass")
	if ! [[ $c =~ ^[0-9]+(\ [0-9]+){$((1 + $#))}$ ]]; then
		echo "bench_counter_counts: no statistics of $table: '$c'" >&2
		return 1
	fi
	echo "$c"
}

bench_counts_into() {
	local bench_counts_c
	bench_counts_c=$(bench_counter_counts "$1") || return 1
	read -r "$2" "$3" <<<"$bench_counts_c"
}

bench_turn() {
	local round=$1
	shift
	if [ $((round % 2)) = 1 ]; then
		echo "$*"
	else
		printf '%s\n' "$@" | tac | tr '\n' ' '
	fi
}

bench_median_lines() {
	sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

bench_median() {
	bench_cells "$@" | bench_median_lines
}

bench_total() {
	bench_cells "$@" | awk '{ t += $1 } END { print t + 0 }'
}
