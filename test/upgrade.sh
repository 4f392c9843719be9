#!/usr/bin/env bash
# test/upgrade.sh: a server running fbf 1.0 gets this build, and keeps every
# counter and every remembered operation.  Run by test/check.sh, as root
# (it installs both builds); prints TAP and leaves this build installed.
#
#   1. build 1.0 from git history (FBF_1_0_COMMIT) and install it;
#   2. on a scratch cluster: counters with operations on the default key and
#      on other keys, bigint/text/uuid clients, a rolled-back operation,
#      some drained into the bits and some still pending, and a cuckoo
#      index;
#   3. stop, install this build, start: every retry is dismissed before and
#      after ALTER EXTENSION fbf UPDATE, the rolled-back one applies, the
#      filters log their upgrade, and new operations count as usual; fbf
#      values stored in a table by 1.0 read back as 1.0 wrote them;
#   4. the updated extension describes (\dx+, every function's definition)
#      as a fresh install of this version; 1.1's dedup tables, batches and outcomes
#      work on it, and claims and operations survive a crash;
#   5. fbf 1.1 built from git history (FBF_1_1_COMMIT): its windows, which
#      hashed under the public seed, get a secret key of their own and
#      forget nothing: committed operations in the bits and on the chains,
#      one in flight in a prepared transaction, a 1.1 snapshot loaded;
#   6. fbf 1.4 built from git history (FBF_1_4_COMMIT) writes WAL of the
#      records this build no longer writes (PENDING_ADD, a drain's byte
#      per entry) and crashes; this build's crash recovery replays them and
#      forgets nothing.
set -uo pipefail

. "$(dirname "$0")/lib.sh"
cd "$FBF_ROOT"

FBF_1_0_COMMIT=174f8dd
FBF_1_1_COMMIT=fa6fe46
FBF_1_4_COMMIT=d79f448
work=$(mktemp -d /tmp/fbf-upgrade.XXXXXX)
n=0
bad=0
trap 'fbf_cluster_stop; rm -rf "$work"' EXIT

q() { psql -X -At -v ON_ERROR_STOP=1 -d upg -c "$1"; }

# build fbf VERSION from git history (COMMIT) into $work/vVERSION and
# install it; a failure ends the test
install_from_history() {
	local version=$1 commit=$2
	fbf_log "building fbf $version ($commit)"
	mkdir -p "$work/v$version"
	git -C "$FBF_ROOT" archive "$commit" | tar -x -C "$work/v$version"
	if ! (make -C "$work/v$version" -s >/dev/null 2>&1 && make -C "$work/v$version" -s install >/dev/null 2>&1); then
		echo "not ok $((n + 1)) - build and install fbf $version"
		exit 1
	fi
}

# 1.0 comes from this repository's history; a copy without it (an
# exported tarball, a shallow clone) cannot run this test: say so, count
# nothing
if ! git -C "$FBF_ROOT" cat-file -e "$FBF_1_0_COMMIT^{commit}" 2>/dev/null; then
	echo "# SKIP: version 1.0 ($FBF_1_0_COMMIT) is not in this checkout's history; upgrade test not run"
	echo "1..0"
	exit 0
fi

fbf_log "building fbf 1.0 ($FBF_1_0_COMMIT)"
git -C "$FBF_ROOT" archive "$FBF_1_0_COMMIT" | tar -x -C "$work"
if ! (make -C "$work" -s >/dev/null 2>&1 && make -C "$work" -s install >/dev/null 2>&1); then
	echo "not ok 1 - build and install fbf 1.0"
	exit 1
fi

fbf_cluster_start "fbf.worker_enabled = off" "fbf.fixed_window_keys = on" || exit 1
psql -X -q -c "CREATE DATABASE upg"
q "CREATE EXTENSION fbf" >/dev/null
fbf_tap_ok "$(q "SELECT extversion FROM pg_extension WHERE extname = 'fbf'")" "1.0" \
	"the server runs fbf 1.0"
q "SELECT fbf_create_counter_table('likes', retention => '10 min', expected_rate => 100)" >/dev/null
q "SELECT fbf_create_counter_table('views', retention => '10 min', expected_rate => 100)" >/dev/null
q "CREATE TABLE items (id int8, name text)" >/dev/null
q "INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 5000) g" >/dev/null
q "CREATE INDEX items_id ON items USING cuckoo (id)" >/dev/null
# duplicates in a 1.0 index: 1.0 sends them to overflow chains
q "CREATE TABLE dups (id int8, k int8)" >/dev/null
q "CREATE INDEX dups_k ON dups USING cuckoo (k)" >/dev/null
q "INSERT INTO dups SELECT g, g % 50 FROM generate_series(1, 5000) g" >/dev/null
q "SELECT count(*) FROM generate_series(1, 300) g WHERE idempotent_increment('likes', 1, g, 1)" >/dev/null
q "SELECT count(*) FROM generate_series(1, 300) g WHERE idempotent_increment('likes', 'post:' || (g % 7), 2, g, 1)" >/dev/null
q "SELECT count(*) FROM generate_series(1, 100) g WHERE idempotent_increment('likes', 'post:1', 'client-' || g, g, 1)" >/dev/null
q "SELECT count(*) FROM generate_series(1, 100) g WHERE idempotent_increment('views', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, g, 1)" >/dev/null
psql -X -q -d upg -c "BEGIN" -c "SELECT idempotent_increment('likes', 9, 1, 1000)" -c "ROLLBACK" >/dev/null
# half of them drained into the bits, the rest still pending
q "SELECT fbf_counter_maintain('views')" >/dev/null
# fbf values stored in a table by 1.0, in its in-memory layout (per-filter
# bit arrays): several shapes, a rotated ring, a grown one with unborn
# filters, partitions, 64 filters, one large enough to be toasted; and
# their portable form as 1.0 wrote it
q "CREATE TABLE stored (id int, f fbf, portable text)" >/dev/null
q "INSERT INTO stored (id, f) VALUES
	(1, fbf_add(fbf_create(6250, 5), ARRAY['a', 'b', 'c'])),
	(2, fbf_add(fbf_refresh(fbf_add(fbf_refresh(fbf_add(fbf_create(1000, 3, 9), 'a'), 4), 'b'), 3), 'c')),
	(3, fbf_add(fbf_resize(fbf_refresh(fbf_add(fbf_create(777, 4, 2, 3), ARRAY['a', 'b']), 2), 20), 'c')),
	(4, fbf_add(fbf_refresh(fbf_add(fbf_create(4096, 6, 62), ARRAY['a', 'b']), 40), 'c')),
	(5, fbf_add(fbf_refresh(fbf_add(fbf_create(400000, 7, 5), ARRAY['a', 'b']), 2), 'c'))" >/dev/null
q "UPDATE stored SET portable = f::text" >/dev/null
before=$(q "SELECT fbf_counter_value('likes', '') || '/' || (SELECT sum(value) FROM likes) || '/' || fbf_counter_value('views', '')")
fbf_tap_ok "$before" "300/700/100" "1.0 counted every operation once"
as_postgres "$PG_BINDIR/pg_ctl" -D "$FBF_SCRATCH/data" -m fast -w stop >/dev/null

fbf_log "installing this build over 1.0"
if ! (make -C "$FBF_ROOT" -s >/dev/null 2>&1 && make -C "$FBF_ROOT" -s install >/dev/null 2>&1); then
	echo "not ok $((n + 1)) - build and install this version"
	exit 1
fi
as_postgres "$PG_BINDIR/pg_ctl" -D "$FBF_SCRATCH/data" -l "$FBF_SCRATCH/server.log" \
	-w -t 60 start >/dev/null || { cat "$FBF_SCRATCH/server.log"; exit 1; }

retries() {
	q "SELECT (SELECT count(*) FROM generate_series(1, 300) g WHERE idempotent_increment('likes', 1, g, 1))
		+ (SELECT count(*) FROM generate_series(1, 300) g WHERE idempotent_increment('likes', 'post:' || (g % 7), 2, g, 1))
		+ (SELECT count(*) FROM generate_series(1, 100) g WHERE idempotent_increment('likes', 'post:1', 'client-' || g, g, 1))
		+ (SELECT count(*) FROM generate_series(1, 100) g WHERE idempotent_increment('views', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, g, 1))"
}

fbf_tap_ok "$(retries)" "0" "with the new library and the 1.0 SQL objects, every retry is dismissed"
fbf_tap_ok "$(q "SELECT idempotent_increment('likes', 9, 1, 1000)")" "t" \
	"the operation 1.0 rolled back applies"
fbf_tap_ok "$(grep -c 'upgraded the filter of counter' "$FBF_SCRATCH/server.log")" "2" \
	"both counters' filters were upgraded in place, and said so"
q "ALTER EXTENSION fbf UPDATE" >/dev/null
current=$(sed -n "s/^default_version = '\(.*\)'/\1/p" fbf.control)
fbf_tap_ok "$(q "SELECT extversion FROM pg_extension WHERE extname = 'fbf'")" "$current" \
	"ALTER EXTENSION fbf UPDATE reaches $current"
fbf_tap_ok "$(retries)" "0" "after ALTER EXTENSION fbf UPDATE, every retry is still dismissed"
fbf_tap_ok "$(q "SELECT fbf_counter_value('likes', '') || '/' || (SELECT sum(value) FROM likes) || '/' || fbf_counter_value('views', '')")" \
	"1300/1700/100" "the counters are exact"
fbf_tap_ok "$(q "SELECT idempotent_increment('likes', 'post:3', 2, 1000000, 1) AND NOT idempotent_increment('likes', 'post:3', 2, 1000000, 1)")" \
	"t" "new keyed operations apply once"
fbf_tap_ok "$(q "SELECT fbf_contains(fbf_snapshot('likes'), fbf_operation('post:3', 2, 1000000))")" "t" \
	"the window remembers them under their keyed identity"
fbf_tap_ok "$(q "SELECT count(*) FROM items WHERE id IN (1, 2500, 5000)")" "3" \
	"the cuckoo index built by 1.0 still answers"
fbf_tap_ok "$(q "SELECT entries FROM cuckoo_index_verify('items_id')")" "5000" \
	"and verifies clean"
fbf_tap_ok "$(q "SELECT overflow_pages > 0 FROM cuckoo_index_stats('dups_k')")" "t" \
	"the 1.0 index of a column with duplicates has overflow chains"
q "INSERT INTO dups SELECT g, g % 50 FROM generate_series(5001, 10000) g" >/dev/null
q "DELETE FROM dups WHERE id % 3 = 0" >/dev/null
q "VACUUM dups" >/dev/null
fbf_tap_ok "$(PGOPTIONS="-c enable_seqscan=off -c enable_bitmapscan=off" q "SELECT count(*) FROM dups WHERE k IN (SELECT generate_series(0, 49))")" \
	"$(q "SELECT count(*) FROM dups")" \
	"after more duplicates (posting lists beside 1.0's chains), deletes and VACUUM, its lookups find every row"
fbf_tap_ok "$(q "SELECT entries = heap_tuples FROM cuckoo_index_verify('dups_k')")" "t" \
	"and it verifies clean"
# 1.5: the 1.0 index scans backward (a cursor walked both ways over its
# chains and lists returns the same rows) and takes fillfactor
fbf_tap_ok "$(psql -X -At -v ON_ERROR_STOP=1 -d upg -c "SET enable_seqscan = off" -c "SET enable_bitmapscan = off" \
	-c "BEGIN" -c "DECLARE c SCROLL CURSOR FOR SELECT id FROM dups WHERE k = 7" \
	-c "MOVE FORWARD ALL FROM c" \
	-c "MOVE BACKWARD ALL FROM c" -c "FETCH ALL FROM c" -c "COMMIT" | grep -c '^[0-9]')" \
	"$(q "SELECT count(*) FROM dups WHERE k = 7")" \
	"the 1.0 index scans backward: a cursor moved to the end and back fetches every row of its key"
q "ALTER INDEX dups_k SET (fillfactor = 50)" >/dev/null
q "INSERT INTO dups SELECT g, g % 50 FROM generate_series(10001, 11000) g" >/dev/null
fbf_tap_ok "$(q "SELECT (SELECT reloptions::text FROM pg_class WHERE relname = 'dups_k') || ' ' || (entries = heap_tuples) FROM cuckoo_index_verify('dups_k')")" \
	"{fillfactor=50} true" "the 1.0 index takes fillfactor, and inserts after it verify clean"
fbf_tap_ok "$(q "SELECT count(*) FROM fbf_counter_stats WHERE pending >= 0")" "2" \
	"both counters show in fbf_counter_stats"
fbf_tap_ok "$(q "SELECT count(*) FROM stored WHERE f::text = portable")" "5" \
	"fbf values stored by 1.0 read back as the very values 1.0 wrote"
fbf_tap_ok "$(q "SELECT count(*) FROM stored WHERE fbf_contains(f, 'a') AND fbf_contains(f, 'b') AND fbf_contains(f, 'c') AND NOT fbf_contains(f, 'never added')")" "5" \
	"and remember what they held"
fbf_tap_ok "$(q "SELECT count(*) FROM stored WHERE fbf_contains(fbf_add(f, 'd'), 'd') AND (fbf_info(fbf_add(f, 'd'))).counts[1] = (fbf_info(f)).counts[1] + 1 AND fbf_add(f, 'd')::text::fbf::text = fbf_add(f, 'd')::text")" "5" \
	"and take new elements"
# the same objects as a fresh install: psql's description of the
# extension, and every function's definition
psql -X -q -c "CREATE DATABASE fresh" >/dev/null
psql -X -q -d fresh -c "CREATE EXTENSION fbf" >/dev/null
describe() {
	psql -X -At -d "$1" -c '\dx+ fbf'
	psql -X -At -d "$1" -c "SELECT p.oid::regprocedure::text || ' ' || md5(pg_get_functiondef(p.oid))
		FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
		JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
		WHERE e.extname = 'fbf' AND d.deptype = 'e' AND p.prokind <> 'a' ORDER BY 1"
}
describe upg >"$work/described.upgraded"
describe fresh >"$work/described.fresh"
fbf_tap_ok "$(diff "$work/described.upgraded" "$work/described.fresh" >"$work/described.diff" && echo same || cat "$work/described.diff")" \
	"same" "the updated extension describes as a fresh $current install (\\dx+ and every function's definition)"
fbf_tap_ok "$([ "$(wc -l <"$work/described.fresh")" -gt 150 ] && echo yes)" "yes" \
	"(and the description is the whole extension: $(wc -l <"$work/described.fresh") lines)"

# what 1.1 adds works on the updated database: dedup tables, batches, outcomes
q "SELECT fbf_create_dedup('inbox', retention => '10 min', expected_rate => 100)" >/dev/null
fbf_tap_ok "$(q "SELECT fbf_claim('inbox', ARRAY(SELECT 'msg-' || g FROM generate_series(1, 500) g)) = array_fill(true, ARRAY[500])")" \
	"t" "a dedup table claims every new id"
fbf_tap_ok "$(q "SELECT idempotent_increment('likes', 'post:9', ARRAY[5, 5, 6]::bigint[], ARRAY[1, 1, 1]::bigint[], ARRAY[2, 2, 3]::bigint[])")" \
	"{t,f,t}" "a batch applies each operation once"
fbf_tap_ok "$(q "SELECT (idempotent_increment_outcome('likes', 'post:9', 5, 1, 2)).value")" "5" \
	"a retry's outcome is the key's value"
as_postgres "$PG_BINDIR/pg_ctl" -D "$FBF_SCRATCH/data" -m immediate -w stop >/dev/null
as_postgres "$PG_BINDIR/pg_ctl" -D "$FBF_SCRATCH/data" -l "$FBF_SCRATCH/server.log" \
	-w -t 60 start >/dev/null || { cat "$FBF_SCRATCH/server.log"; exit 1; }
fbf_tap_ok "$(q "SELECT count(*) FROM unnest(fbf_claim('inbox', ARRAY(SELECT 'msg-' || g FROM generate_series(1, 500) g))) c WHERE c")" \
	"0" "after a crash, every claim is remembered"
fbf_tap_ok "$(retries)" "0" "and every counter operation since 1.0"

q "UPDATE stored SET f = fbf_refresh(f, 0)" >/dev/null
fbf_tap_ok "$(q "SELECT count(*) FROM stored WHERE f::text = portable AND fbf_contains(f, 'a')")" "5" \
	"rewritten in the new layout (fbf_refresh(f, 0)), they are the same values"

# ---- from 1.1: windows written without a key get one, forgetting nothing ----
# 1.1 hashed every identity under the public seed, so a tenant who knew a
# counter's shape could aim bits at another's operations.  This build gives
# each such window a secret key at its first refresh and looks identities
# up under the public hash too until what was recorded under it has aged
# out (src/window/window_key.c): committed operations in the bits and on
# the chains, and one still in flight in a prepared transaction.
fbf_cluster_stop
install_from_history 1.1 "$FBF_1_1_COMMIT"
fbf_cluster_start "fbf.worker_enabled = off" "fbf.fixed_window_keys = on" || exit 1
psql -X -q -c "CREATE DATABASE upg11"
q11() { psql -X -At -v ON_ERROR_STOP=1 -d upg11 -c "$1"; }
q11 "CREATE EXTENSION fbf" >/dev/null
fbf_tap_ok "$(q11 "SELECT extversion FROM pg_extension WHERE extname = 'fbf'")" "1.1" \
	"the server runs fbf 1.1"
q11 "SELECT fbf_create_counter_table('long11', retention => '10 min', expected_rate => 100)" >/dev/null
q11 "SELECT fbf_create_counter_table('short11', retention => '3 s', expected_rate => 100)" >/dev/null
q11 "SELECT fbf_create_counter_table('ck11', retention => '10 min', expected_rate => 100, filter => 'cuckoo')" >/dev/null
q11 "SELECT fbf_create_dedup('dd11', retention => '10 min', expected_rate => 100)" >/dev/null
retries11() {
	q11 "SELECT (SELECT count(*) FROM generate_series(1, 300) g WHERE idempotent_increment('long11', 1, g, 1))
		+ (SELECT count(*) FROM generate_series(1, 100) g WHERE idempotent_increment('long11', 'k', 2, g, 1))
		+ (SELECT count(*) FROM generate_series(1, 200) g WHERE idempotent_increment('ck11', 3, g, 1))
		+ (SELECT count(*) FROM unnest(fbf_claim('dd11', ARRAY(SELECT 'id-' || g FROM generate_series(1, 100) g))) c WHERE c)"
}
fbf_tap_ok "$(retries11)" "700" "1.1 applies 700 operations and claims"
# some drained into the bits, some left on the chains
q11 "SELECT fbf_counter_maintain('long11'), fbf_counter_maintain('ck11')" >/dev/null
q11 "SELECT count(*) FROM generate_series(301, 350) g WHERE idempotent_increment('long11', 1, g, 1)" >/dev/null
# one operation in flight (prepared), one to be rolled back (on another
# key: the first keeps its row locked)
psql -X -q -d upg11 -c "BEGIN" -c "SELECT idempotent_increment('long11', 7, 1, 10)" \
	-c "PREPARE TRANSACTION 'upg_p1'" >/dev/null
psql -X -q -d upg11 -c "BEGIN" -c "SELECT idempotent_increment('long11', 'other', 7, 2, 10)" \
	-c "PREPARE TRANSACTION 'upg_p2'" >/dev/null
q11 "CREATE TABLE snap11 AS SELECT fbf_snapshot('long11') AS s" >/dev/null
fbf_tap_ok "$(q11 "SELECT get_byte(fbf_send(s), 14) FROM snap11")" "0" "1.1's snapshot has no key"
as_postgres "$PG_BINDIR/pg_ctl" -D "$FBF_SCRATCH/data" -m fast -w stop >/dev/null

fbf_log "installing this build over 1.1"
if ! (make -C "$FBF_ROOT" -s >/dev/null 2>&1 && make -C "$FBF_ROOT" -s install >/dev/null 2>&1); then
	echo "not ok $((n + 1)) - build and install this version"
	exit 1
fi
as_postgres "$PG_BINDIR/pg_ctl" -D "$FBF_SCRATCH/data" -l "$FBF_SCRATCH/server.log" \
	-w -t 60 start >/dev/null || { cat "$FBF_SCRATCH/server.log"; exit 1; }
# four clients at once, from the first operation on: the one that gives
# the window its key makes the others' operations, hashed before it,
# hashed again; retries of 1.1's operations never apply, new operations
# apply once each
cat >"$work/race.sql" <<'EOSQL'
\set s random(1, 50)
SELECT idempotent_increment('long11', 1, :s, 1);
SELECT idempotent_increment('long11', 'new', :client_id, :s, 1);
EOSQL
"$PG_BINDIR/pgbench" -n -c 4 -t 100 -f "$work/race.sql" -d upg11 >"$work/race.log" 2>&1 ||
	cat "$work/race.log"
fbf_tap_ok "$(q11 "SELECT fbf_counter_value('long11', '')")" "350" \
	"four clients racing the window's keying: no retry of 1.1's operations applies"
sent=$(q11 "SELECT fbf_counter_value('long11', 'new')")
fbf_tap_ok "$((sent + $(q11 "SELECT count(*) FROM generate_series(0, 3) c, generate_series(1, 50) g
	WHERE idempotent_increment('long11', 'new', c, g, 1)")))" "200" \
	"and each of their new operations applied once (what they sent, plus what applies when all are sent again)"
fbf_tap_ok "$(retries11)" "0" "with this library, every retry of 1.1's operations and claims is dismissed"
keyflags() { q11 "SELECT get_byte(fbf_send(fbf_snapshot('$1')), $2) & 3"; }
fbf_tap_ok "$(keyflags long11 14)/$(keyflags ck11 20)/$(keyflags dd11 14)" "3/3/3" \
	"the windows have keys now, and still ask the public hash (snapshot flags keyed and public)"
fbf_tap_ok "$(q11 "SELECT count(*) FROM generate_series(301, 350) g WHERE idempotent_increment('long11', 1, g, 1)")" "0" \
	"operations left on the chains by 1.1 are dismissed too"
q11 "SELECT fbf_counter_maintain('long11')" >/dev/null
fbf_tap_ok "$(keyflags long11 14)" "3" "while 1.1's prepared operation is in flight, the public hash is still asked"
q11 "COMMIT PREPARED 'upg_p1'" >/dev/null
q11 "ROLLBACK PREPARED 'upg_p2'" >/dev/null
fbf_tap_ok "$(q11 "SELECT idempotent_increment('long11', 7, 1, 10)")/$(q11 "SELECT idempotent_increment('long11', 'other', 7, 2, 10)")" \
	"f/t" "the prepared operation that committed is dismissed, the rolled back one applies"
fbf_tap_ok "$(q11 "SELECT fbf_counter_value('long11', '') || '/' || fbf_counter_value('long11', 'other')")" "360/10" \
	"the counter is exact (350 + 10 on the default key, 10 on the other)"
q11 "SELECT fbf_create_counter_table('copy11', retention => '10 min', expected_rate => 100)" >/dev/null
fbf_tap_ok "$(q11 "SELECT fbf_counter_load('copy11', s) FROM snap11")" \
	"adopted" "1.1's snapshot (no key) is adopted by a new counter"
fbf_tap_ok "$(q11 "SELECT count(*) FROM generate_series(1, 350) g WHERE idempotent_increment('copy11', 1, g, 1)")" "0" \
	"which dismisses every retry it remembers"
q11 "ALTER EXTENSION fbf UPDATE" >/dev/null
fbf_tap_ok "$(q11 "SELECT extversion FROM pg_extension WHERE extname = 'fbf'")" "$current" \
	"ALTER EXTENSION fbf UPDATE reaches $current from 1.1"
fbf_tap_ok "$(retries11)" "0" "and every retry is still dismissed"
# short11 (retention 3 s): once its public operations have all aged out,
# its window asks the public hash no more
q11 "SELECT idempotent_increment('short11', 1, 1, 1)" >/dev/null
for _ in $(seq 1 60); do
	q11 "SELECT fbf_counter_maintain('short11')" >/dev/null
	[ "$(keyflags short11 14)" = "1" ] && break
	sleep 0.5
done
fbf_tap_ok "$(keyflags short11 14)" "1" "a retention after it got its key, a window asks only its key"
fbf_tap_ok "$(q11 "SELECT idempotent_increment('short11', 1, 2, 1) AND NOT idempotent_increment('short11', 1, 2, 1)")" "t" \
	"and applies operations once"

# ---- 6. WAL that fbf 1.4 wrote, replayed by this build ----
# 1.4 logged an operation with its xid and epoch (PENDING_ADD, info 0x10)
# and a drain with a byte per entry (DRAIN, now DRAIN_V1, 0x20); this
# build writes neither and replays both (src/window/window_xlog.c).  After
# a checkpoint, 1.4 applies operations of a stream one transaction each, a
# batch, one rolled back, drains them and applies more, and the server
# crashes; this build's crash recovery replays that WAL.
fbf_cluster_stop
install_from_history 1.4 "$FBF_1_4_COMMIT"
fbf_cluster_start "fbf.worker_enabled = off" "fbf.fixed_window_keys = on" || exit 1
psql -X -q -c "CREATE DATABASE upg14"
q14() { psql -X -At -v ON_ERROR_STOP=1 -d upg14 -c "$1"; }
q14 "CREATE EXTENSION fbf" >/dev/null
fbf_tap_ok "$(q14 "SELECT extversion FROM pg_extension WHERE extname = 'fbf'")" "1.4" \
	"the server runs fbf 1.4"
q14 "SELECT fbf_create_counter_table('c14', retention => '10 min', expected_rate => 100)" >/dev/null
q14 "CHECKPOINT" >/dev/null
wal_from=$(q14 "SELECT pg_current_wal_insert_lsn()")
# each statement its own transaction: one PENDING_ADD each
for g in $(seq 1 100); do echo "SELECT idempotent_increment('c14', 1, $g, 1);"; done |
	psql -X -q -v ON_ERROR_STOP=1 -d upg14 >/dev/null
q14 "SELECT count(*) FROM generate_series(101, 300) g WHERE idempotent_increment('c14', 1, g, 1)" >/dev/null
psql -X -q -d upg14 -c "BEGIN" -c "SELECT idempotent_increment('c14', 9, 1, 1000)" -c "ROLLBACK" >/dev/null
q14 "SELECT fbf_counter_maintain('c14')" >/dev/null
for g in $(seq 301 350); do echo "SELECT idempotent_increment('c14', 1, $g, 1);"; done |
	psql -X -q -v ON_ERROR_STOP=1 -d upg14 >/dev/null
wal_to=$(q14 "SELECT pg_current_wal_insert_lsn()")
q14 "SELECT pg_switch_wal()" >/dev/null
as_postgres "$PG_BINDIR/pg_ctl" -D "$FBF_SCRATCH/data" -m immediate -w stop >/dev/null
# pg_waldump names fbf's records by their info code, in hex
fbf_tap_ok "$("$PG_BINDIR/pg_waldump" -p "$FBF_SCRATCH/data/pg_wal" --stats=record \
	-s "$wal_from" -e "$wal_to" 2>/dev/null | grep -c 'custom170/UNKNOWN (10)\|custom170/UNKNOWN (20)')" "2" \
	"1.4 wrote PENDING_ADD and its DRAIN after the checkpoint, and crashed"

fbf_log "installing this build over 1.4, crash recovery"
if ! (make -C "$FBF_ROOT" -s >/dev/null 2>&1 && make -C "$FBF_ROOT" -s install >/dev/null 2>&1); then
	echo "not ok $((n + 1)) - build and install this version"
	exit 1
fi
as_postgres "$PG_BINDIR/pg_ctl" -D "$FBF_SCRATCH/data" -l "$FBF_SCRATCH/server.log" \
	-w -t 60 start >/dev/null || { cat "$FBF_SCRATCH/server.log"; exit 1; }
fbf_tap_ok "$(q14 "SELECT count(*) FROM generate_series(1, 350) g WHERE idempotent_increment('c14', 1, g, 1)")" "0" \
	"this build replayed 1.4's WAL: every retry of its operations is dismissed"
fbf_tap_ok "$(q14 "SELECT idempotent_increment('c14', 9, 1, 1000)")" "t" \
	"the operation 1.4 rolled back applies"
fbf_tap_ok "$(q14 "SELECT fbf_counter_value('c14')")" "1350" \
	"the counter is exact (350 operations, and the one rolled back, once)"

echo "1..$n"
[ "$bad" -eq 0 ]
