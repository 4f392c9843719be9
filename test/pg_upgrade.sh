#!/usr/bin/env bash
# test/pg_upgrade.sh: a PostgreSQL 15 cluster running fbf is upgraded with
# pg_upgrade to a newer PostgreSQL (16 or 18) and keeps what its counters
# remember.  Run by test/check.sh, as root, after fbf is installed into
# both servers (the 15 of PATH's pg_config, the target of $FBF_PG_NEW_BINDIR
# or of test/lib.sh's fbf_pg_install); prints TAP.
#
#   bash test/pg_upgrade.sh [16|18]        (default 18)
#
#   1. on 15: counters (a Bloom window and a cuckoo window) with operations
#      on the default key and other keys, bigint/text/uuid clients, a
#      rolled-back operation, some drained into the filter and some still
#      pending; a dedup table with claims; a cuckoo index, with duplicates;
#      and, in a second database, fbf 1.1's SQL objects with a counter;
#   2. pg_upgrade (copy mode) to a new cluster of the target: the window and
#      cuckoo index files are carried as they are, so it must read 15's pages;
#   3. on the target: every retry of a remembered operation and every
#      repeated claim is dismissed, the rolled-back operation applies, the
#      counters are exact, cuckoo_index_verify is clean and the index
#      answers, new operations and claims count once; after a crash the same
#      holds (the target replays fbf's WAL records); ALTER EXTENSION fbf
#      UPDATE takes the 1.1 database to the current version with its memory.
set -uo pipefail

. "$(dirname "$0")/lib.sh"
cd "$FBF_ROOT"

NEW_V=${1:-18}
OLD_BIN=$PG_BINDIR
# (FBF_PG18_BINDIR: the name this variable had when 18 was the only target)
NEW_BIN=${FBF_PG_NEW_BINDIR:-}
[ -n "$NEW_BIN" ] || [ "$NEW_V" != 18 ] || NEW_BIN=${FBF_PG18_BINDIR:-}
if [ -z "$NEW_BIN" ]; then
	NEW_BIN=$(fbf_pg_install "$NEW_V") || NEW_BIN=""
fi
if [ -z "$NEW_BIN" ] || [ ! -x "$NEW_BIN/pg_upgrade" ]; then
	echo "# SKIP: no PostgreSQL $NEW_V to upgrade to; pg_upgrade test not run"
	echo "1..0"
	exit 0
fi
if [ "$("$NEW_BIN/pg_config" --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/')" != "$NEW_V" ]; then
	echo "not ok 1 - $NEW_BIN is PostgreSQL $NEW_V"
	exit 1
fi
if [ ! -f "$("$NEW_BIN/pg_config" --pkglibdir)/fbf.so" ] ||
	[ ! -f "$("$OLD_BIN/pg_config" --pkglibdir)/fbf.so" ]; then
	echo "not ok 1 - fbf is installed into both PostgreSQL 15 and $NEW_V"
	exit 1
fi

work=$(mktemp -d /tmp/fbf-pg-upgrade.XXXXXX)
chown postgres: "$work"
chmod 755 "$work"
n=0
bad=0

# stop whichever cluster runs (safe when none does), remove the scratch
stop_all() {
	local d
	for d in old new; do
		if [ -f "$work/$d/postmaster.pid" ]; then
			local bin=$OLD_BIN
			[ "$d" = new ] && bin=$NEW_BIN
			as_postgres "$bin/pg_ctl" -D "$work/$d" -m immediate -w stop >/dev/null 2>&1 || true
		fi
	done
	if [ -n "${FBF_KEEP_LOG:-}" ]; then
		cat "$work"/*.log "$work"/new/pg_upgrade_output.d/*/log/*.log >"$FBF_KEEP_LOG" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap stop_all EXIT

export PGHOST=$work PGUSER=postgres
PGPORT=$(fbf_free_port)
export PGPORT
q() { psql -X -At -v ON_ERROR_STOP=1 -d upg -c "$1"; }
q11() { psql -X -At -v ON_ERROR_STOP=1 -d upg11 -c "$1"; }

# a cluster of the server in $1 in $work/$2, fbf preloaded, the worker off
# (its timing would move the windows) and every window under the same key
make_cluster() {
	local bin=$1 dir=$2
	shift 2
	as_postgres "$bin/initdb" -D "$work/$dir" -A trust -E UTF8 --locale=C.UTF-8 "$@" \
		>"$work/initdb-$dir.log" 2>&1 || { cat "$work/initdb-$dir.log"; return 1; }
	cat >>"$work/$dir/postgresql.conf" <<-EOF
		shared_preload_libraries = 'fbf'
		listen_addresses = ''
		port = $PGPORT
		unix_socket_directories = '$work'
		fsync = off
		fbf.worker_enabled = off
		fbf.fixed_window_keys = on
	EOF
}
start() { as_postgres "$1/pg_ctl" -D "$work/$2" -l "$work/$2.log" -w -t 60 start >/dev/null || { cat "$work/$2.log"; return 1; }; }
stop() { as_postgres "$1/pg_ctl" -D "$work/$2" -m "${3:-fast}" -w stop >/dev/null; }

# ---- 1. PostgreSQL 15 ----
fbf_log "filling a PostgreSQL 15 cluster"
make_cluster "$OLD_BIN" old || exit 1
start "$OLD_BIN" old || exit 1
psql -X -q -d postgres -c "CREATE DATABASE upg" -c "CREATE DATABASE upg11"
fbf_tap_ok "$(q "SHOW server_version_num" | cut -c1-2)" "15" "the old cluster runs PostgreSQL 15"
q "CREATE EXTENSION fbf" >/dev/null
q "SELECT fbf_create_counter_table('likes', retention => '1 hour', expected_rate => 100)" >/dev/null
q "SELECT fbf_create_counter_table('views', retention => '1 hour', expected_rate => 100, filter => 'cuckoo')" >/dev/null
q "SELECT fbf_create_dedup('events', retention => '1 hour', expected_rate => 100)" >/dev/null
q "CREATE TABLE items (id int8, name text)" >/dev/null
q "INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 5000) g" >/dev/null
q "CREATE INDEX items_id ON items USING cuckoo (id)" >/dev/null
q "CREATE TABLE dups (id int8, k int8)" >/dev/null
q "CREATE INDEX dups_k ON dups USING cuckoo (k)" >/dev/null
q "INSERT INTO dups SELECT g, g % 50 FROM generate_series(1, 5000) g" >/dev/null
ops() {
	q "SELECT (SELECT count(*) FROM generate_series(1, 300) g WHERE idempotent_increment('likes', 1, g, 1))
		+ (SELECT count(*) FROM generate_series(1, 300) g WHERE idempotent_increment('likes', 'post:' || (g % 7), 2, g, 1))
		+ (SELECT count(*) FROM generate_series(1, 100) g WHERE idempotent_increment('likes', 'post:1', 'client-' || g, g, 1))
		+ (SELECT count(*) FROM generate_series(1, 100) g WHERE idempotent_increment('views', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, g, 1))
		+ (SELECT count(*) FROM generate_series(1, 100) g WHERE idempotent_increment('views', 'page:' || (g % 3), 7, g, 1))"
}
claims() {
	q "SELECT (SELECT count(*) FROM generate_series(1, 400) g WHERE fbf_claim('events', g))
		+ (SELECT count(*) FROM generate_series(1, 100) g WHERE fbf_claim('events', 'order-' || g))
		+ (SELECT count(*) FROM unnest(fbf_claim('events', ARRAY(SELECT md5(g::text)::uuid FROM generate_series(1, 100) g))) c WHERE c)"
}
fbf_tap_ok "$(ops)" "900" "15 applies every operation once"
fbf_tap_ok "$(claims)" "600" "15 grants every claim once"
psql -X -q -d upg -c "BEGIN" -c "SELECT idempotent_increment('likes', 9, 1, 1000)" -c "ROLLBACK" >/dev/null
# part drained into the filters, the operations that follow still pending
q "SELECT fbf_counter_maintain('likes')" >/dev/null
q "SELECT fbf_counter_maintain('views')" >/dev/null
q "SELECT count(*) FROM generate_series(301, 350) g WHERE idempotent_increment('likes', 1, g, 1)" >/dev/null
q "SELECT count(*) FROM generate_series(401, 450) g WHERE fbf_claim('events', g)" >/dev/null
values() {
	q "SELECT fbf_counter_value('likes', '') || '/' || (SELECT sum(value) FROM likes) || '/' ||
		fbf_counter_value('views', 'page:1') || '/' || (SELECT sum(value) FROM views)"
}
before=$(values)
fbf_tap_ok "$before" "350/750/34/200" "15's counters hold every operation once"
verify_before=$(q "SELECT entries || '/' || heap_tuples FROM cuckoo_index_verify('items_id')")

# a database whose fbf objects are 1.1's (this library serves them, as
# test/upgrade.sh shows): ALTER EXTENSION fbf UPDATE runs on the target
q11 "CREATE EXTENSION fbf VERSION '1.1'" >/dev/null
q11 "SELECT fbf_create_counter_table('old', retention => '1 hour', expected_rate => 100)" >/dev/null
fbf_tap_ok "$(q11 "SELECT count(*) FROM generate_series(1, 200) g WHERE idempotent_increment('old', 5, g, 1)")" "200" \
	"15 counts on fbf 1.1's objects"
# PostgreSQL 15.20 (November 2026) keeps an attribute version in the
# options of every column ("pg_attver=N"), and its pg_dump knows them;
# 18.3 (February 2026) and 16.2 (February 2024) are older, do not, and
# their pg_dump, which pg_upgrade runs, copies them as column options the
# new server refuses
# ("unrecognized parameter"), for any table, fbf or not.  Only for this
# pairing of releases: drop them from the old cluster's own relations.
if [ -n "$(q "SELECT 1 FROM pg_attribute WHERE attoptions::text LIKE '%pg_attver=%' LIMIT 1")" ]; then
	for db in upg upg11; do
		psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "UPDATE pg_attribute
			SET attoptions = NULLIF(ARRAY(SELECT o FROM unnest(attoptions) o WHERE o NOT LIKE 'pg_attver=%'), '{}')
			WHERE attrelid >= 16384 AND attoptions::text LIKE '%pg_attver=%'" || exit 1
	done
fi
stop "$OLD_BIN" old || exit 1

# ---- 2. pg_upgrade ----
fbf_log "pg_upgrade to PostgreSQL $NEW_V"
# 18's initdb turns data checksums on by default (16's has no option to
# turn them off: they are off); the old cluster has none
if [ "$NEW_V" -ge 18 ]; then
	make_cluster "$NEW_BIN" new --no-data-checksums || exit 1
else
	make_cluster "$NEW_BIN" new || exit 1
fi
if (cd "$work" && as_postgres "$NEW_BIN/pg_upgrade" -b "$OLD_BIN" -B "$NEW_BIN" \
	-d "$work/old" -D "$work/new" -p "$PGPORT" -P "$PGPORT" -s "$work" \
	>"$work/pg_upgrade.log" 2>&1); then
	fbf_tap_ok "ran" "ran" "pg_upgrade from 15 to $NEW_V"
else
	fbf_tap_ok "failed" "ran" "pg_upgrade from 15 to $NEW_V"
	tail -30 "$work/pg_upgrade.log"
	cat "$work"/new/pg_upgrade_output.d/*/log/*.log 2>/dev/null | tail -40
	echo "1..$n"
	exit 1
fi

# ---- 3. the target ----
start "$NEW_BIN" new || exit 1
fbf_tap_ok "$(q "SHOW server_version_num" | cut -c1-2)" "$NEW_V" "the upgraded cluster runs PostgreSQL $NEW_V"
fbf_tap_ok "$(values)" "$before" "the counters' values are 15's"
fbf_tap_ok "$(ops)" "0" "every retry of an operation 15 remembered is dismissed"
fbf_tap_ok "$(q "SELECT count(*) FROM generate_series(301, 350) g WHERE idempotent_increment('likes', 1, g, 1)")" "0" \
	"so are the retries of operations 15 still had pending"
fbf_tap_ok "$(claims)" "0" "every repeated claim is refused"
fbf_tap_ok "$(q "SELECT count(*) FROM generate_series(401, 450) g WHERE fbf_claim('events', g)")" "0" \
	"so are the claims 15 still had pending"
fbf_tap_ok "$(q "SELECT idempotent_increment('likes', 9, 1, 1000)")" "t" \
	"the operation 15 rolled back applies"
fbf_tap_ok "$(q "SELECT count(*) FROM generate_series(1001, 1100) g WHERE idempotent_increment('likes', 'post:' || (g % 5), 3, g, 1)
	AND NOT idempotent_increment('likes', 'post:' || (g % 5), 3, g, 1)")" "100" \
	"new operations apply once"
fbf_tap_ok "$(q "SELECT count(*) FROM generate_series(1001, 1100) g WHERE idempotent_increment('views', 'page:9', 11, g, 2)
	AND NOT idempotent_increment('views', 'page:9', 11, g, 2)")" "100" \
	"on the cuckoo window too"
fbf_tap_ok "$(q "SELECT count(*) FROM generate_series(5001, 5100) g WHERE fbf_claim('events', g) AND NOT fbf_claim('events', g)")" "100" \
	"new claims are granted once"
fbf_tap_ok "$(values)" "1350/1850/34/400" "the counters are exact"
fbf_tap_ok "$(q "SELECT entries || '/' || heap_tuples FROM cuckoo_index_verify('items_id')")" "$verify_before" \
	"cuckoo_index_verify is clean on the index 15 built"
fbf_tap_ok "$(PGOPTIONS="-c enable_seqscan=off -c enable_bitmapscan=off" q "SELECT count(*) FROM items WHERE id IN (1, 2500, 5000, 5001)")" "3" \
	"and its lookups answer"
q "INSERT INTO items SELECT g, 'item ' || g FROM generate_series(5001, 20000) g" >/dev/null
q "INSERT INTO dups SELECT g, g % 50 FROM generate_series(5001, 10000) g" >/dev/null
q "DELETE FROM dups WHERE id % 3 = 0" >/dev/null
q "VACUUM items, dups" >/dev/null
fbf_tap_ok "$(PGOPTIONS="-c enable_seqscan=off -c enable_bitmapscan=off" q "SELECT count(*) FROM dups WHERE k IN (SELECT generate_series(0, 49))")" \
	"$(q "SELECT count(*) FROM dups")" \
	"after inserts (growing the index), deletes and VACUUM on $NEW_V, lookups find every row"
# each index: entries / heap tuples / dead entries, from cuckoo_index_verify
verify_both() {
	q "SELECT string_agg(i::text || ':' || (v).entries || '/' || (v).heap_tuples || '/' || (v).dead_entries, ' ' ORDER BY i::text)
		FROM (SELECT i, cuckoo_index_verify(i) AS v FROM unnest(ARRAY['items_id', 'dups_k']::regclass[]) i) s"
}
rows="$(q "SELECT count(*) FROM dups")"
fbf_tap_ok "$(verify_both)" "dups_k:$rows/$rows/0 items_id:20000/20000/0" \
	"and both indexes verify clean"

# the target replays fbf's WAL records after a crash
stop "$NEW_BIN" new immediate
start "$NEW_BIN" new || exit 1
fbf_tap_ok "$(ops)" "0" "after a crash, every retry is still dismissed"
fbf_tap_ok "$(values)" "1350/1850/34/400" "the counters are exact after the crash"
fbf_tap_ok "$(q "SELECT count(*) FROM generate_series(1001, 1100) g WHERE idempotent_increment('likes', 'post:' || (g % 5), 3, g, 1)
	OR idempotent_increment('views', 'page:9', 11, g, 2) OR fbf_claim('events', g + 4000)")" "0" \
	"and so are the retries of operations made on $NEW_V"
# (VACUUM's WAL is not flushed when it ends, as it has no transaction id:
# the crash may undo it, leaving entries of dead rows for the next one)
fbf_tap_ok "$(q "SELECT string_agg(i::text || ':' || ((v).entries = (v).heap_tuples + (v).dead_entries) || '/' || (v).heap_tuples, ' ' ORDER BY i::text)
	FROM (SELECT i, cuckoo_index_verify(i) AS v FROM unnest(ARRAY['items_id', 'dups_k']::regclass[]) i) s")" \
	"dups_k:true/$rows items_id:true/20000" \
	"the cuckoo indexes verify clean after the crash"

# the 1.1 database: its objects are updated on the target, its window kept
fbf_tap_ok "$(q11 "SELECT count(*) FROM generate_series(1, 200) g WHERE idempotent_increment('old', 5, g, 1)")" "0" \
	"fbf 1.1's counter dismisses every retry on $NEW_V"
q11 "ALTER EXTENSION fbf UPDATE" >/dev/null
fbf_tap_ok "$(q11 "SELECT extversion FROM pg_extension WHERE extname = 'fbf'")" \
	"$(sed -n "s/^default_version = '\(.*\)'/\1/p" fbf.control)" \
	"ALTER EXTENSION fbf UPDATE on $NEW_V reaches the current version"
fbf_tap_ok "$(q11 "SELECT count(*) FROM generate_series(1, 200) g WHERE idempotent_increment('old', 5, g, 1)")" "0" \
	"and every retry is still dismissed"
fbf_tap_ok "$(q11 "SELECT idempotent_increment('old', 5, 201, 1)")/$(q11 "SELECT idempotent_increment('old', 5, 201, 1)")/$(q11 "SELECT fbf_counter_value('old')")" \
	"t/f/201" "new operations count once"
PGOPTIONS="-c client_min_messages=warning" q "ALTER EXTENSION fbf UPDATE" >/dev/null
fbf_tap_ok "$(q "SELECT extversion FROM pg_extension WHERE extname = 'fbf'")" \
	"$(sed -n "s/^default_version = '\(.*\)'/\1/p" fbf.control)" \
	"the current version's database needs no update"
fbf_tap_ok "$(grep -c 'PANIC\|TRAP' "$work/new.log")" "0" "the $NEW_V server logged no PANIC"

echo "1..$n"
[ "$bad" -eq 0 ]
