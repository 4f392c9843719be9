#!/usr/bin/env bash
# test/bench/cuckoo_dup_bench.sh: index pages per lookup on duplicate-heavy
# columns, cuckoo against hash and btree, in one run.
#
#   bash test/bench/cuckoo_dup_bench.sh [out.csv]
#
# For each shape (keys x rows per key: 2,000 x 100 and 400 x 250), a table
# per index type (cuckoo, hash, btree, each alone on its table), the index
# created empty and the rows inserted round robin (key = g % keys, the
# order that spreads a key's rows worst), then:
#   absent   index pages read by 1,000 lookups of absent keys, per lookup
#   present  index pages read by a lookup of each of 50 present keys (of
#            the half never deleted),
#            per lookup (each reads its keys' rows: rows per key TIDs)
#   pages    pg_relation_size / 8192
# and the same after REINDEX, and after DELETE of half the keys, VACUUM and
# a load of as many rows of other keys ("reload": pages shows whether the
# freed pages were reused).  Pages read are the transaction's blocks
# fetched for the index (pg_stat_get_xact_blocks_fetched: hits and reads),
# a count, not a timing: one round suffices and the types need no
# interleaving.  Index scans only (enable_seqscan, enable_bitmapscan off).
#
# Scratch cluster from test/lib.sh (fbf preloaded), stopped at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../lib.sh
source "$here/test/lib.sh"
out=${1:-/dev/null}

fbf_cluster_start
trap fbf_cluster_stop EXIT
q() { psql -X -qAt -v ON_ERROR_STOP=1 -c "$1"; }

q "CREATE EXTENSION fbf"
q "CREATE FUNCTION index_pages(query text, idx regclass) RETURNS int8 LANGUAGE plpgsql AS \$\$
DECLARE before int8 := pg_stat_get_xact_blocks_fetched(idx);
BEGIN EXECUTE query; RETURN pg_stat_get_xact_blocks_fetched(idx) - before; END \$\$"

measure() {
	local type=$1 keys=$2 phase=$3
	local set="SET enable_seqscan = off; SET enable_bitmapscan = off;"
	local absent present pages
	absent=$(psql -X -qAt -v ON_ERROR_STOP=1 -c "$set" -c "SELECT round(index_pages(
		'SELECT count(*) FROM t_$type WHERE k = ANY (ARRAY(SELECT 10000000 + g FROM generate_series(1, 1000) g)::int8[])',
		't_${type}_k') / 1000.0, 2)")
	present=$(psql -X -qAt -v ON_ERROR_STOP=1 -c "$set" -c "SELECT round(sum(index_pages(
		format('SELECT count(*) FROM t_$type WHERE k = %s', $keys / 2 + g * ($keys / 100)), 't_${type}_k')) / 50.0, 2)
		FROM generate_series(0, 49) g")
	pages=$(q "SELECT pg_relation_size('t_${type}_k') / 8192")
	printf '%-7s %-11s %-8s absent %6s  present %6s  pages %6s\n' "$type" "$keys" "$phase" "$absent" "$present" "$pages"
	echo "$type,$keys,$rows,$phase,$absent,$present,$pages" >>"$out"
}

echo "type,keys,rows_per_key,phase,pages_per_absent_lookup,pages_per_present_lookup,index_pages" >"$out"
fbf_log "cuckoo_dup_bench: $(date -u +%FT%TZ) on $(uname -n)"
for shape in "2000 100" "400 250"; do
	read -r keys rows <<<"$shape"
	total=$((keys * rows))
	for type in cuckoo hash btree; do
		q "DROP TABLE IF EXISTS t_$type"
		q "CREATE TABLE t_$type (id int8, k int8) WITH (autovacuum_enabled = off)"
		q "CREATE INDEX t_${type}_k ON t_$type USING $type (k)"
		q "INSERT INTO t_$type SELECT g, g % $keys FROM generate_series(1, $total) g"
		measure "$type" "$keys" inserted
		q "REINDEX INDEX t_${type}_k"
		measure "$type" "$keys" reindexed
		q "DELETE FROM t_$type WHERE k < $keys / 2"
		q "VACUUM t_$type"
		q "INSERT INTO t_$type SELECT g, $keys * 10 + g % ($keys / 2) FROM generate_series(1, $total / 2) g"
		measure "$type" "$keys" reload
	done
done
