#!/usr/bin/env bash
# test/bench/cuckoo_vacuum_bench.sh: VACUUM of a table with a cuckoo index
# against the same table with a hash index, in one run.
#
#   bash test/bench/cuckoo_vacuum_bench.sh
#
# Environment (defaults in brackets; the defaults take about 3 minutes):
#   CUCKOO_VACUUM_ROUNDS   interleaved rounds; medians are reported [5]
#   CUCKOO_VACUUM_N        VACUUMs per type per round [500]
#
# Two shapes, each a table per index type (t_cuckoo, t_hash: the same rows
# in the same order, each table with its one index), autovacuum off:
#   small   1,300 rows: 1,000 with k = g % 100 (ten rows a key: in the
#           cuckoo index, posting lists sharing their head pages) and 300
#           keys of one row;
#   large   200,000 rows, k = g % 2,000 (100 rows a key).
# A step is an aborted insert of a row of key 5 and a VACUUM of the table
# (which empties that row's index entry: every VACUUM has a dead tuple to
# remove and an index to clean); a round runs N steps in one psql per
# type, the types in turn (the order alternating between rounds), and
# times each psql.  Reported: seconds per VACUUM for each type, and
# cuckoo / hash per round and its median.  The heap's part of a VACUUM is
# the same for both types, so the ratio compares whole VACUUMs as a user
# pays for them.  Afterwards cuckoo_index_verify must accept both cuckoo
# indexes.
#
# Scratch cluster from test/lib.sh (fbf preloaded, fsync off), stopped at
# the end.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../lib.sh
source "$here/test/lib.sh"
rounds=${CUCKOO_VACUUM_ROUNDS:-5}
n=${CUCKOO_VACUUM_N:-500}

fbf_cluster_start
trap fbf_cluster_stop EXIT
q() { psql -X -qAt -v ON_ERROR_STOP=1 -c "$1"; }

q "CREATE EXTENSION fbf"
fbf_log "cuckoo_vacuum_bench: $(date -u +%FT%TZ) on $(uname -n), $rounds rounds of $n VACUUMs a type"

# $1: shape name; creates t_<shape>_<type> for both types
make_tables() {
	local shape=$1 type
	for type in cuckoo hash; do
		q "CREATE TABLE t_${shape}_$type (id int8, k int8) WITH (autovacuum_enabled = off)"
		case $shape in
		small)
			q "INSERT INTO t_${shape}_$type SELECT g, g % 100 FROM generate_series(1, 1000) g"
			q "INSERT INTO t_${shape}_$type SELECT g, 1000 + g FROM generate_series(1001, 1300) g"
			;;
		large)
			q "INSERT INTO t_${shape}_$type SELECT g, g % 2000 FROM generate_series(1, 200000) g"
			;;
		esac
		q "CREATE INDEX t_${shape}_${type}_k ON t_${shape}_$type USING $type (k)"
		q "VACUUM t_${shape}_$type"
	done
}

# $1: table; prints the seconds of N steps
steps() {
	local table=$1 script start end
	script=$(mktemp)
	{
		echo "SET log_statement = none;"
		for ((i = 0; i < n; i++)); do
			echo "BEGIN; INSERT INTO $table VALUES (-1, 5); ROLLBACK;"
			echo "VACUUM (INDEX_CLEANUP ON, TRUNCATE OFF) $table;"
		done
	} >"$script"
	chmod 644 "$script"
	start=$(date +%s.%N)
	psql -X -q -v ON_ERROR_STOP=1 -f "$script" >/dev/null
	end=$(date +%s.%N)
	rm -f "$script"
	calc "$end - $start"
}

# $1: an arithmetic expression; prints its value
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

for shape in small large; do
	make_tables "$shape"
	c_all=()
	h_all=()
	r_all=()
	for ((r = 1; r <= rounds; r++)); do
		if ((r % 2)); then
			c=$(steps "t_${shape}_cuckoo")
			h=$(steps "t_${shape}_hash")
		else
			h=$(steps "t_${shape}_hash")
			c=$(steps "t_${shape}_cuckoo")
		fi
		ratio=$(calc "$c / $h")
		printf '%-6s round %d: cuckoo %.3f ms, hash %.3f ms a VACUUM; cuckoo / hash %.2f\n' \
			"$shape" "$r" "$(calc "$c * 1000 / $n")" "$(calc "$h * 1000 / $n")" "$ratio"
		c_all+=("$c")
		h_all+=("$h")
		r_all+=("$ratio")
	done
	printf '%-6s median: cuckoo %.3f ms, hash %.3f ms a VACUUM; cuckoo / hash %.2f\n' "$shape" \
		"$(calc "$(printf '%s\n' "${c_all[@]}" | median) * 1000 / $n")" \
		"$(calc "$(printf '%s\n' "${h_all[@]}" | median) * 1000 / $n")" \
		"$(printf '%s\n' "${r_all[@]}" | median)"
	q "SELECT 'cuckoo_index_verify: ' || entries || ' entries, ' || heap_tuples || ' rows, '
	   || dead_entries || ' dead' FROM cuckoo_index_verify('t_${shape}_cuckoo_k')"
done
