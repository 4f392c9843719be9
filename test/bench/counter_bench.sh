#!/usr/bin/env bash
# test/bench/counter_bench.sh: the hot path of idempotent_increment against
# its baselines, every ratio from one run of this script.
#
#   bash test/bench/counter_bench.sh [seconds-per-run [csv-file [rounds [steady-seconds]]]]
#
#   defaults: 8 s per run, docs/bench_counters.csv, 4 rounds, 60 s steady
#   state: about 15 minutes on a 2-vCPU machine.  Environment: CLIENTS (2),
#   HOT_CLIENTS ("1 2 4"), STEADY_ROUNDS (2), TAIL_S (30), OPS_AT_INDEX (1),
#   SEQS (random: each operation's seq drawn from 63 bits; inorder: each
#   pgbench client numbers its increments in order, from a start above
#   every earlier run's, so each (key, client) stream is in order, as an
#   in-order client's; the plain and exact sides are unchanged),
#   WARMUP_S (0: each run starts at its CHECKPOINT, so it pays every
#   full-page image of the pages it touches, once per 8 s run where a
#   server pays them once per checkpoint interval; N: each run of sections
#   a and b is first driven N s unmeasured after its CHECKPOINT, so that it
#   measures the operations after those images, as if checkpoints never
#   came; section c's runs are not warmed up), PLAN_RATE (unset: the
#   counters' expected_rate is calibrated, below; N: they are planned for
#   N operations a second, as ab_bench.sh does so that two revisions are
#   measured on windows of one size), CALIBRATE_ONLY (1: print the planned
#   rate's line and stop, as ab_bench.sh asks each revision before its
#   rounds).
#   A short check of the script itself: counter_bench.sh 2 /tmp/c.csv 1 12
#
# Starts a scratch cluster (fsync = on, shared_preload_libraries = 'fbf,
# pg_stat_statements'), pgbench with prepared statements (-M prepared), the
# same clients and settings for both sides of every ratio:
#
#  a. 1,000 keys, CLIENTS clients, synchronous_commit off and on:
#       plain  UPDATE plain SET value = value + 1 WHERE key = $k AND shard = 0
#       fbf    SELECT idempotent_increment('idem', $k, client, random seq, 1)
#     fbf / plain tps, and the server's CPU time per transaction (all the
#     cluster's processes, from /proc: what the machine's other load
#     delays but does not add to), plain / fbf.
#  b. one hot key (hot_plain, hot_fbf) at each of HOT_CLIENTS clients, both
#     synchronous_commit settings: fbf / plain tps and plain / fbf CPU per
#     transaction (a scaling figure:
#     <csv-file without .csv>_hot_key.png, drawn if gnuplot is installed);
#     at a's clients, that ratio as a product: plain / hot plain (the
#     plain side's loss to its one row), times a's fbf / plain, times
#     hot fbf / fbf.
#  c. steady state, synchronous_commit off, steady-seconds (>= 60 for the
#     issue's figure) per side, fresh tables, retention 20 s:
#       fbf    as in a
#       exact  INSERT INTO ops (client_id, seq, at = now()) ... ON CONFLICT
#              DO NOTHING, and the UPDATE of the key if the insert happened
#              (one statement; workloads/exact.sql), while a pruning job
#              beside the clients runs psql "DELETE FROM ops WHERE at <
#              now() - '20 s'" every second (autovacuum as by default; ops
#              has an index on at unless OPS_AT_INDEX=0)
#     tps over the whole run and over its last TAIL_S seconds (from pgbench
#     -P 5 progress lines: pgbench prints none for the last interval, so the
#     tail's transactions are the total less those of the intervals before
#     it), fbf / exact, and the op table's size at the end.
#  d. for every run, WAL bytes per transaction: pg_wal_lsn_diff of
#     pg_current_wal_insert_lsn() after and before the run (everything the
#     cluster wrote meanwhile: fbf's worker, autovacuum, the pruning job) /
#     pgbench's transactions; fbf / plain.  (The insert position, not
#     pg_current_wal_lsn(), which is the write position and lags by up to
#     wal_writer_delay with synchronous_commit off.)  The pg_waldump --stats
#     breakdown by resource manager of the last fbf run of a, sync off.
#  e. for every run, shared buffers accessed per statement, from
#     pg_stat_statements (reset before each run; track = top, so the
#     increment's own UPDATE through SPI counts in its statement):
#     (shared_blks_hit + shared_blks_read) / calls; fbf - plain.
#  f. for every counter run, false dismissals: the applied and dismissed
#     deltas of fbf_counter_stats (the operations are unique, random 63-bit
#     seqs or each client's in order, so every dismissal is a false one).
#
# Rounds are interleaved (every run of a and b in each round; plain before
# fbf in odd rounds, fbf before plain in even ones, and in c fbf's run
# before the exact table's in odd rounds: an odd number of rounds gives
# one order a round more, and the script warns of it), a CHECKPOINT
# precedes every run, and the tables report medians over the rounds.  The
# targets printed beside the figures (PASS/MISS) are the issue's; a MISS
# never fails the script.  The CSV has one row per run and one per median
# (round = median).  Not part of the tests.
set -euo pipefail

. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/bench_lib.sh"
cd "$FBF_ROOT"

SECS=${1:-8}
CSV=${2:-docs/bench_counters.csv}
ROUNDS=${3:-4}
STEADY_SECS=${4:-60}
CLIENTS=${CLIENTS:-2}
HOT_CLIENTS=${HOT_CLIENTS:-"1 2 4"}
STEADY_ROUNDS=${STEADY_ROUNDS:-2}
TAIL_S=${TAIL_S:-30}
OPS_AT_INDEX=${OPS_AT_INDEX:-1}
SEQS=${SEQS:-random}
WARMUP_S=${WARMUP_S:-0}
case $WARMUP_S in
'' | *[!0-9]*) echo "WARMUP_S is a whole number of seconds, not $WARMUP_S" >&2; exit 2 ;;
esac
PLAN_RATE=${PLAN_RATE:-}
case $PLAN_RATE in
'') ;;
*[!0-9]* | 0*) echo "PLAN_RATE is a positive whole number of operations a second, not $PLAN_RATE" >&2; exit 2 ;;
esac
for v in "$ROUNDS" "$STEADY_ROUNDS"; do
	case $v in
	'' | *[!0-9]* | 0*) echo "rounds and STEADY_ROUNDS are positive whole numbers, not '$v'" >&2; exit 2 ;;
	esac
	if [ $((v % 2)) = 1 ]; then
		echo "warning: $v rounds run one order of the sides once more than the other" >&2
	fi
done
RETENTION_S=20
# the targets printed beside the figures (PASS/MISS)
T_RATIO=0.95 # fbf / plain tps, 1,000 keys, synchronous_commit off
T_RATIO_ON=0.98 # the same, synchronous_commit on
T_HOT=1.5    # fbf / plain tps, one hot key
T_EXACT=1.5  # fbf / exact tps, steady state
T_WAL=1.5    # fbf / plain WAL bytes per transaction (1.25 the aim beyond)
T_BLKS=3     # fbf - plain buffers per statement

# the tail is the last TAIL_S seconds, at most half a (short) run, from
# the end of a 5 s progress interval (TAIL_LEN seconds)
if [ $((TAIL_S * 2)) -gt "$STEADY_SECS" ]; then
	TAIL_S=$((STEADY_SECS / 2 / 5 * 5))
	[ "$TAIL_S" -ge 5 ] || TAIL_S=5
fi
TAIL_CUT=$(((STEADY_SECS - TAIL_S) / 5 * 5))
TAIL_LEN=$((STEADY_SECS - TAIL_CUT))

bench_begin bench
# durable settings, as in production: every commit of a synchronous run
# waits for its WAL flush; no checkpoint during a run
bench_cluster_start \
	"shared_preload_libraries = 'fbf,pg_stat_statements'" "pg_stat_statements.track = top"


# the pgbench scripts, shared with counter_scaling.sh
cp "$FBF_ROOT"/test/bench/workloads/*.sql "$work/"
# in order: the increments' seq is the client's last plus one (pgbench
# keeps a client's variables from one transaction to the next), starting
# from run_one's -D s=, the time in microseconds: above the last seq of
# any earlier run, which no client outpaces at a million a second
case $SEQS in
random) ;;
inorder)
	sed -i 's/^\\set s random(.*)$/\\set s :s + 1/' "$work/fbf.sql" "$work/hot_fbf.sql"
	# a workload whose seq line changed would run random seqs labelled in order
	for f in fbf hot_fbf; do
		grep -q '^\\set s :s + 1$' "$work/$f.sql" || { echo "workloads/$f.sql: no random seq line to put in order" >&2; exit 2; }
	done
	;;
*) echo "SEQS is random or inorder, not $SEQS" >&2; exit 2 ;;
esac

# 1,000 keys in plain, exact (the same layout) and idem (16 shard rows
# each); one hot key; the op table (client_id, seq, at)
setup_tables() {
	local rate=$1
	psqlq <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS plain, exact, ops, idem, hot_plain, hot_idem;
CREATE EXTENSION IF NOT EXISTS fbf;
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
CREATE TABLE plain (key text, shard int, value bigint NOT NULL DEFAULT 0, PRIMARY KEY (key, shard));
CREATE TABLE exact (LIKE plain INCLUDING ALL);
INSERT INTO plain SELECT g::text, 0, 0 FROM generate_series(1, 1000) g;
INSERT INTO exact SELECT * FROM plain;
CREATE TABLE ops (client_id bigint, seq bigint, at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (client_id, seq));
SELECT fbf_create_counter_table('idem', retention => '${RETENTION_S} s',
	target_fpp => 0.001, expected_rate => $rate, shards => 16) \gset
INSERT INTO idem SELECT g::text, s, 0 FROM generate_series(1, 1000) g, generate_series(0, 15) s;
CREATE TABLE hot_plain (LIKE plain INCLUDING ALL);
INSERT INTO hot_plain VALUES ('hot', 0, 0);
SELECT fbf_create_counter_table('hot_idem', retention => '${RETENTION_S} s',
	target_fpp => 0.001, expected_rate => $rate, shards => 16) \gset
VACUUM ANALYZE plain, exact, idem, hot_plain, hot_idem;
SQL
	if [ "$OPS_AT_INDEX" = 1 ]; then
		psqlq -c "CREATE INDEX ops_at ON ops (at)"
	fi
}


# the pruning job of the exact op table: a DELETE every second

echo "section,workload,synchronous_commit,clients,round,seconds,xacts,tps,tail_tps,wal_bytes_per_xact,blks_per_call,calls,applied,dismissed,false_dismissal_pct,cpu_us_per_xact" >"$CSV"

# run_one SECTION WORKLOAD SYNC CLIENTS SECS ROUND [pgbench options]:
# one pgbench run, measured; appends its CSV row.
run_one() {
	local section=$1 w=$2 sync=$3 clients=$4 secs=$5 round=$6
	shift 6
	local counter="" pattern
	case $w in
	plain) pattern='^UPDATE plain ' ;;
	hot_plain) pattern='^UPDATE hot_plain ' ;;
	fbf) pattern='^SELECT idempotent_increment' counter=idem ;;
	hot_fbf) pattern='^SELECT idempotent_increment' counter=hot_idem ;;
	exact) pattern='INSERT INTO ops' ;;
	esac
	fbf_log "$section: $w, $clients clients, synchronous_commit = $sync, round $round"
	psqlq -c "CHECKPOINT"
	if [ "$WARMUP_S" -gt 0 ] && [ "$section" != c ]; then
		# unmeasured: the pages' first changes after the checkpoint write
		# their full-page images here, as they do once per checkpoint
		# interval on a server rather than once per run (not section c,
		# whose whole run is the steady state from fresh tables)
		local wd=()
		[ -z "$counter" ] || [ "$SEQS" != inorder ] || wd=(-D "s=$(date +%s%6N)")
		if ! PGOPTIONS="-c synchronous_commit=$sync" "$PGBENCH" -n -M prepared -c "$clients" -j "$clients" \
			-T "$WARMUP_S" "$@" ${wd[@]+"${wd[@]}"} -f "$work/$w.sql" >"$work/warmup.out" 2>&1; then
			cat "$work/warmup.out" >&2
			return 1
		fi
		sleep 0.2	# the warm-up's backends exit, and are reaped
	fi
	sql "SELECT pg_stat_statements_reset()" >/dev/null
	local a0=0 d0=0 a1=0 d1=0
	if [ -n "$counter" ]; then bench_counts_into "$counter" a0 d0; fi
	local start end cpu0 cpu1 cpu=""
	[ -z "$counter" ] || [ "$SEQS" != inorder ] || set -- "$@" -D "s=$(date +%s%6N)"
	start=$(lsn)
	cpu0=$(server_cpu_ticks)
	if ! PGOPTIONS="-c synchronous_commit=$sync" "$PGBENCH" -n -M prepared -c "$clients" -j "$clients" \
		-T "$secs" "$@" -f "$work/$w.sql" >"$work/run.out" 2>"$work/run.err"; then
		cat "$work/run.out" "$work/run.err" >&2
		return 1
	fi
	sleep 0.2	# the clients' backends exit, and are reaped
	cpu1=$(server_cpu_ticks)
	end=$(lsn)
	if [ -n "$counter" ]; then bench_counts_into "$counter" a1 d1; fi
	local xacts tps tail="" wal blks calls
	xacts=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$work/run.out")
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$work/run.out")
	if grep -q '^progress:' "$work/run.err"; then
		# "progress: 35.0 s, 23456.7 tps, lat ...", every 5 s but for the
		# last interval, which pgbench never prints: the transactions of
		# the last TAIL_S seconds are all of them less those of the
		# intervals before
		tail=$(awk -v secs="$secs" -v cut="$TAIL_CUT" -v n="$xacts" '
			$1 == "progress:" && $2 + 0 <= cut { before += 5 * $4 }
			END { printf "%.1f", (n - before) / (secs - cut) }' "$work/run.err")
		awk -v secs="$secs" -v n="$xacts" '$1 == "progress:" { t = $2 + 0; printf " %.0f", $4; done += 5 * $4 }
			END { if (secs > t) printf " %.0f", (n - done) / (secs - t) }' "$work/run.err" >"$work/progress_${w}_$round"
	fi
	wal=$(sql "SELECT round(pg_wal_lsn_diff('$end', '$start') / $xacts, 1)")
	local bc
	bc=$(psql -X -At -F ' ' -v ON_ERROR_STOP=1 -c "SELECT round(sum(shared_blks_hit + shared_blks_read)::numeric
		/ greatest(sum(calls), 1), 2), sum(calls) FROM pg_stat_statements WHERE query ~ '$pattern'")
	read -r blks calls <<<"$bc"
	# the server's CPU time per transaction: its own work, which the
	# machine's other load delays but does not add to as it does to tps
	[ -z "$cpu0" ] || cpu=$(awk -v t="$((cpu1 - cpu0))" -v hz="$(getconf CLK_TCK)" -v n="$xacts" \
		'BEGIN { printf "%.1f", t * 1e6 / hz / n }')
	local applied="" dismissed="" pct=""
	if [ -n "$counter" ]; then
		applied=$((a1 - a0))
		dismissed=$((d1 - d0))
		pct=$(awk -v a="$applied" -v d="$dismissed" 'BEGIN { printf "%.4f", a + d ? 100 * d / (a + d) : 0 }')
	fi
	if [ "$section" = a ] && [ "$w" = fbf ] && [ "$sync" = off ]; then
		# the breakdown by resource manager; pg_waldump reads what is flushed
		while [ "$(sql "SELECT pg_current_wal_flush_lsn() >= '$end'")" != t ]; do sleep 0.1; done
		"$PG_BINDIR/pg_waldump" -p "$FBF_SCRATCH/data/pg_wal" -s "$start" -e "$end" --stats \
			>"$work/waldump_fbf" 2>&1 || true
	fi
	echo "$section,$w,$sync,$clients,$round,$secs,$xacts,$tps,$tail,$wal,$blks,$calls,$applied,$dismissed,$pct,$cpu" >>"$CSV"
}

# the median of a column over a group's rounds (empty if none)
median() {
	bench_median "$CSV" "$1" section="$2" workload="$3" synchronous_commit="$4" clients="$5"
}
# the sum of a column over a group's rounds
total() {
	local col=$1 section=$2 w=$3 sync=$4 clients=$5
	awk -F, -v c="$col" -v s="$section" -v w="$w" -v y="$sync" -v n="$clients" '
		NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next }
		$1 == s && $2 == w && $3 == y && $4 == n && $5 != "median" { t += $k } END { print t + 0 }' "$CSV"
}
# "dismissed of attempted (rate%)" over a group's rounds
dismissals() {
	local a d
	a=$(total applied "$@")
	d=$(total dismissed "$@")
	awk -v a="$a" -v d="$d" 'BEGIN { printf "%d of %d (%.4f%%)", d, a + d, a + d ? 100 * d / (a + d) : 0 }'
}
# a / b with two decimals, "-" if either is missing
ratio() { awk -v a="${1:-}" -v b="${2:-}" 'BEGIN { if (a == "" || b == "" || a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }
diffr() { awk -v a="${1:-}" -v b="${2:-}" 'BEGIN { if (a == "" || b == "" || a == "-" || b == "-") print "-"; else printf "%.2f", a - b }'; }
# PASS/MISS of "value OP target"; OP is >= or <=
verdict() {
	awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN { if (v == "-" || v == "") print "-";
		else if ((op == ">=" && v + 0 >= t + 0) || (op == "<=" && v + 0 <= t + 0)) print "PASS"; else print "MISS" }'
}
fmt0() { awk -v v="${1:-}" 'BEGIN { if (v == "") print "-"; else printf "%.0f", v }'; }
fmt1() { awk -v v="${1:-}" 'BEGIN { if (v == "") print "-"; else printf "%.1f", v }'; }
fmt2() { awk -v v="${1:-}" 'BEGIN { if (v == "") print "-"; else printf "%.2f", v }'; }

# size the filters for the load they will see: the faster of the plain
# update and the increment itself (on a window planned for twice the
# plain rate, so that it does not grow while it is measured; random seqs,
# as the workload's own file has them: the in-order one needs run_one's
# -D), with room.  Planned from the plain rate alone, a run's increments
# went past the plan (up to 1.23 times it by 5 s) and grew its windows.
if [ -n "$PLAN_RATE" ]; then
	rate=$PLAN_RATE
	fbf_log "expected rate for the filters: $rate/s (PLAN_RATE)"
else
	fbf_log "calibrating"
	setup_tables 1000
	plain_rate=$(bench_calibrate "$work/plain.sql" "$CLIENTS" 1)
	setup_tables $((plain_rate * 2))
	fbf_rate=$(bench_calibrate "$FBF_ROOT/test/bench/workloads/fbf.sql" "$CLIENTS" 1)
	rate=$(awk -v p="$plain_rate" -v f="$fbf_rate" 'BEGIN { printf "%.0f", 1.2 * (p > f ? p : f) }')
	fbf_log "expected rate for the filters: $rate/s (1.2 times the faster of plain $plain_rate/s and fbf $fbf_rate/s)"
fi
[ "${CALIBRATE_ONLY:-}" != 1 ] || exit 0
setup_tables "$rate"

# each round's sides by bench_turn: plain first in odd rounds, so a
# side's place after the other (its checkpoint's writes, the worker's
# work on the other's burst) falls to both alike
# a and b: interleaved rounds
for round in $(seq 1 "$ROUNDS"); do
	for sync in off on; do
		for w in $(bench_turn "$round" plain fbf); do
			run_one a "$w" "$sync" "$CLIENTS" "$SECS" "$round"
		done
	done
	for clients in $HOT_CLIENTS; do
		for sync in off on; do
			for w in $(bench_turn "$round" hot_plain hot_fbf); do
				run_one b "$w" "$sync" "$clients" "$SECS" "$round"
			done
		done
	done
done
psql -X -At -F ' ' -c "SELECT filters, live_filters, period, nbits, partitions, estimated_fpp, bytes
	FROM fbf_counter_stats WHERE counter = 'idem'::regclass" >"$work/shape_a"

# c: steady state, fresh tables for each side
for round in $(seq 1 "$STEADY_ROUNDS"); do
	for w in $(bench_turn "$round" fbf exact); do
		setup_tables "$rate"
		if [ "$w" = fbf ]; then
			run_one c fbf off "$CLIENTS" "$STEADY_SECS" "$round" -P 5
			psql -X -At -F ' ' -c "SELECT bytes, pg_relation_size('idem_fbf'), filters, live_filters, period, nbits,
				estimated_fpp FROM fbf_counter_stats WHERE counter = 'idem'::regclass" >"$work/shape_c_$round"
		else
			prune_start ops off
			run_one c exact off "$CLIENTS" "$STEADY_SECS" "$round" -P 5
			prune_stop
			psql -X -At -F ' ' -c "SELECT pg_total_relation_size('ops'), pg_relation_size('ops'),
				pg_indexes_size('ops'), count(*) FROM ops" >"$work/ops_$round"
			awk '/^DELETE/ { n++; rows += $2 } END { printf "%d %d\n", n, rows }' "$work/prune.log" >"$work/prune_$round"
		fi
	done
done

# medians, appended to the CSV
for g in $(awk -F, 'NR > 1 && $5 != "median" { print $1 "," $2 "," $3 "," $4 }' "$CSV" | sort -u); do
	IFS=, read -r s w y n <<<"$g"
	row="$s,$w,$y,$n,median,$(median seconds "$s" "$w" "$y" "$n"),$(median xacts "$s" "$w" "$y" "$n")"
	for col in tps tail_tps wal_bytes_per_xact blks_per_call calls; do
		row="$row,$(median "$col" "$s" "$w" "$y" "$n")"
	done
	a=$(total applied "$s" "$w" "$y" "$n")
	d=$(total dismissed "$s" "$w" "$y" "$n")
	if [ "$w" = fbf ] || [ "$w" = hot_fbf ]; then
		row="$row,$a,$d,$(awk -v a="$a" -v d="$d" 'BEGIN { printf "%.4f", a + d ? 100 * d / (a + d) : 0 }')"
	else
		row="$row,,,"
	fi
	row="$row,$(median cpu_us_per_xact "$s" "$w" "$y" "$n")"
	echo "$row" >>"$CSV"
done

M() { median "$@"; }
echo
echo "== a. 1,000 keys, $CLIENTS clients, ${SECS} s per run, median of $ROUNDS rounds (pgbench -M prepared, fsync on, $SEQS seqs, warm-up ${WARMUP_S} s${BENCH_CONF:+, $BENCH_CONF})"
printf '%-34s %14s %14s   %s\n' "" "sync off" "sync on" "target"
for w in plain fbf; do
	printf '%-34s %14s %14s\n' "$w tps" "$(fmt0 "$(M tps a $w off "$CLIENTS")")" "$(fmt0 "$(M tps a $w on "$CLIENTS")")"
done
r_off=$(ratio "$(M tps a fbf off "$CLIENTS")" "$(M tps a plain off "$CLIENTS")")
r_on=$(ratio "$(M tps a fbf on "$CLIENTS")" "$(M tps a plain on "$CLIENTS")")
printf '%-34s %14s %14s   >= %s / %s: %s / %s\n' "fbf / plain" "$r_off" "$r_on" "$T_RATIO" "$T_RATIO_ON" \
	"$(verdict "$r_off" ">=" "$T_RATIO")" "$(verdict "$r_on" ">=" "$T_RATIO_ON")"
echo "fbf false dismissals (unique operations): sync off $(dismissals a fbf off "$CLIENTS"), sync on $(dismissals a fbf on "$CLIENTS")"
for w in plain fbf; do
	printf '%-34s %14s %14s\n' "$w server CPU us per transaction" \
		"$(fmt1 "$(M cpu_us_per_xact a $w off "$CLIENTS")")" "$(fmt1 "$(M cpu_us_per_xact a $w on "$CLIENTS")")"
done
printf '%-34s %14s %14s\n' "plain / fbf server CPU" \
	"$(ratio "$(M cpu_us_per_xact a plain off "$CLIENTS")" "$(M cpu_us_per_xact a fbf off "$CLIENTS")")" \
	"$(ratio "$(M cpu_us_per_xact a plain on "$CLIENTS")" "$(M cpu_us_per_xact a fbf on "$CLIENTS")")"
for sync in off on; do
	printf 'runs, sync %s, tps plain / fbf:' "$sync"
	for round in $(seq 1 "$ROUNDS"); do
		printf ' %s / %s' \
			"$(awk -F, -v r="$round" -v y="$sync" '$1 == "a" && $2 == "plain" && $3 == y && $5 == r { printf "%.0f", $8 }' "$CSV")" \
			"$(awk -F, -v r="$round" -v y="$sync" '$1 == "a" && $2 == "fbf" && $3 == y && $5 == r { printf "%.0f", $8 }' "$CSV")"
	done
	echo
done
echo "filter after the rounds (filters, live, period, bits per filter, partitions, estimated FPP, bytes): $(cat "$work/shape_a")"

echo
echo "== b. one hot key, ${SECS} s per run, median of $ROUNDS rounds"
printf '%-8s %-6s %12s %12s %12s %8s %12s   %s\n' clients sync "plain tps" "fbf tps" "fbf / plain" target "plain / fbf CPU" "fbf false dismissals"
for clients in $HOT_CLIENTS; do
	for sync in off on; do
		r=$(ratio "$(M tps b hot_fbf "$sync" "$clients")" "$(M tps b hot_plain "$sync" "$clients")")
		printf '%-8s %-6s %12s %12s %12s %8s %12s   %s\n' "$clients" "$sync" \
			"$(fmt0 "$(M tps b hot_plain "$sync" "$clients")")" "$(fmt0 "$(M tps b hot_fbf "$sync" "$clients")")" \
			"$r" "$(verdict "$r" ">=" "$T_HOT")" \
			"$(ratio "$(M cpu_us_per_xact b hot_plain "$sync" "$clients")" "$(M cpu_us_per_xact b hot_fbf "$sync" "$clients")")" \
			"$(dismissals b hot_fbf "$sync" "$clients")"
	done
done
# The hot key's ratio, at a's clients, as the product of three: the
# plain side's loss to its one row (what an increment costing exactly a
# plain UPDATE would reach), fbf / plain over 1,000 keys, and fbf's own
# change from 1,000 keys to one
for sync in off on; do
	case " $HOT_CLIENTS " in *" $CLIENTS "*) ;; *) continue ;; esac
	printf 'hot key, %s clients, sync %s: plain / hot plain %s x fbf / plain %s x hot fbf / fbf %s\n' \
		"$CLIENTS" "$sync" \
		"$(ratio "$(M tps a plain "$sync" "$CLIENTS")" "$(M tps b hot_plain "$sync" "$CLIENTS")")" \
		"$(ratio "$(M tps a fbf "$sync" "$CLIENTS")" "$(M tps a plain "$sync" "$CLIENTS")")" \
		"$(ratio "$(M tps b hot_fbf "$sync" "$CLIENTS")" "$(M tps a fbf "$sync" "$CLIENTS")")"
done

echo
echo "== c. steady state: ${STEADY_SECS} s per side, retention ${RETENTION_S} s, synchronous_commit off, $CLIENTS clients, median of $STEADY_ROUNDS"
echo "   (exact: pruning DELETE every second beside the clients; ops index on at: $([ "$OPS_AT_INDEX" = 1 ] && echo yes || echo no))"
printf '%-34s %14s %14s %12s   %s\n' "" "fbf" "exact" "fbf / exact" "target"
for col in tps tail_tps; do
	label="tps, whole run"
	[ "$col" = tail_tps ] && label="tps, last ${TAIL_LEN} s"
	f=$(M "$col" c fbf off "$CLIENTS")
	e=$(M "$col" c exact off "$CLIENTS")
	r=$(ratio "$f" "$e")
	printf '%-34s %14s %14s %12s   >= %s: %s\n' "$label" "$(fmt0 "$f")" "$(fmt0 "$e")" "$r" "$T_EXACT" "$(verdict "$r" ">=" "$T_EXACT")"
done
printf '%-34s %14s %14s %12s\n' "WAL bytes per transaction" "$(fmt1 "$(M wal_bytes_per_xact c fbf off "$CLIENTS")")" \
	"$(fmt1 "$(M wal_bytes_per_xact c exact off "$CLIENTS")")" \
	"$(ratio "$(M wal_bytes_per_xact c fbf off "$CLIENTS")" "$(M wal_bytes_per_xact c exact off "$CLIENTS")")"
printf '%-34s %14s %14s\n' "buffers per statement" "$(fmt2 "$(M blks_per_call c fbf off "$CLIENTS")")" \
	"$(fmt2 "$(M blks_per_call c exact off "$CLIENTS")")"
echo "fbf false dismissals: $(dismissals c fbf off "$CLIENTS")"
for round in $(seq 1 "$STEADY_ROUNDS"); do
	read -r ops_total ops_heap ops_idx ops_rows <"$work/ops_$round"
	read -r fbytes findex ffilters flive fperiod fnbits ffpp <"$work/shape_c_$round"
	read -r nprune npruned <"$work/prune_$round"
	ftps=$(awk -F, -v r="$round" '$1 == "c" && $2 == "fbf" && $5 == r { print $8 }' "$CSV")
	echo "round $round: op table at the end: $ops_total bytes (heap $ops_heap, indexes $ops_idx), $ops_rows rows," \
		"$(awk -v b="$ops_total" -v n="$ops_rows" 'BEGIN { printf "%.1f", n ? b / n : 0 }') bytes per row;" \
		"pruning: $nprune DELETEs, $npruned rows"
	echo "round $round: fbf filter at the end: $fbytes bytes (index $findex), $ffilters filters ($flive live), period $fperiod," \
		"estimated FPP $ffpp; $(awk -v b="$fbytes" -v r="$ftps" -v s="$RETENTION_S" 'BEGIN { printf "%.1f", b / (r * s) }')" \
		"bytes per remembered operation (${RETENTION_S} s at ${ftps}/s)"
	for w in fbf exact; do
		[ -f "$work/progress_${w}_$round" ] || continue
		echo "round $round: $w tps by 5 s:$(cat "$work/progress_${w}_$round")"
	done
done

echo
echo "== d. WAL bytes per transaction (LSN difference over the run, all of the cluster's WAL / transactions), medians"
printf '%-26s %12s %12s %12s %10s   %s\n' "" "plain" "fbf" "fbf / plain" "target" ""
for sync in off on; do
	p=$(fmt1 "$(M wal_bytes_per_xact a plain "$sync" "$CLIENTS")")
	f=$(fmt1 "$(M wal_bytes_per_xact a fbf "$sync" "$CLIENTS")")
	r=$(ratio "$f" "$p")
	printf '%-26s %12s %12s %12s %10s   %s\n' "1,000 keys, sync $sync" "$p" "$f" "$r" "<= $T_WAL" "$(verdict "$r" "<=" "$T_WAL")"
done
for clients in $HOT_CLIENTS; do
	for sync in off on; do
		p=$(fmt1 "$(M wal_bytes_per_xact b hot_plain "$sync" "$clients")")
		f=$(fmt1 "$(M wal_bytes_per_xact b hot_fbf "$sync" "$clients")")
		printf '%-26s %12s %12s %12s\n' "hot key, $clients cl, sync $sync" "$p" "$f" "$(ratio "$f" "$p")"
	done
done
echo "pg_waldump --stats of the last fbf run (1,000 keys, sync off; custom170 is fbf's own resource manager):"
sed 's/^/    /' "$work/waldump_fbf"

echo
echo "== e. shared buffers (hit + read) per statement, pg_stat_statements, medians"
printf '%-26s %12s %12s %12s %10s   %s\n' "" "plain" "fbf" "fbf - plain" "target" ""
for sync in off on; do
	p=$(fmt2 "$(M blks_per_call a plain "$sync" "$CLIENTS")")
	f=$(fmt2 "$(M blks_per_call a fbf "$sync" "$CLIENTS")")
	dd=$(diffr "$f" "$p")
	printf '%-26s %12s %12s %12s %10s   %s\n' "1,000 keys, sync $sync" "$p" "$f" "$dd" "<= $T_BLKS" "$(verdict "$dd" "<=" "$T_BLKS")"
done
for clients in $HOT_CLIENTS; do
	for sync in off on; do
		p=$(fmt2 "$(M blks_per_call b hot_plain "$sync" "$clients")")
		f=$(fmt2 "$(M blks_per_call b hot_fbf "$sync" "$clients")")
		printf '%-26s %12s %12s %12s\n' "hot key, $clients cl, sync $sync" "$p" "$f" "$(diffr "$f" "$p")"
	done
done

# b as a figure, with gnuplot if it is there: median tps by clients
PNG=${CSV%.csv}_hot_key.png
if command -v gnuplot >/dev/null; then
	for sync in off on; do
		for w in hot_plain hot_fbf; do
			awk -F, -v w="$w" -v y="$sync" '$1 == "b" && $2 == w && $3 == y && $5 == "median" { print $4, $8 }' "$CSV" |
				sort -n >"$work/${w}_$sync.dat"
		done
	done
	gnuplot <<GP
set terminal pngcairo size 900,450 font "sans,10" noenhanced
set output "$PNG"
set title "one hot key: idempotent_increment against a plain UPDATE\n(pgbench -M prepared, fsync on, ${SECS} s per run, median of $ROUNDS)"
set grid
set key outside right
set xlabel "clients"
set xtics 1
set yrange [0:*]
set ylabel "transactions per second"
plot for [s in "off on"] for [w in "hot_plain hot_fbf"] "$work/".w."_".s.".dat" using 1:2 with linespoints title w.", sync ".s
GP
fi
echo
echo "every run: $CSV$([ -f "$PNG" ] && echo "; hot key figure: $PNG")"
