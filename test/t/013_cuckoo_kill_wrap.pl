# Copyright: the fbf authors.  TAP test, run by test/check.sh.
#
# Late kill marking of the cuckoo index must not survive 65,536 VACUUMs.
#
# A scan remembers the entries whose heap rows the executor found dead and
# marks their slots killed only when it is done with its matches, without
# a pin or lock in between.  Meanwhile VACUUM may empty such a slot, and a
# new row with the same key may take the same heap TID and the same slot:
# the same tag and TID, but a live row, which a late kill must leave
# alone.  The first version told the cases apart by a 16-bit count of the
# VACUUMs that emptied slots of the page: after 65,536 of them the count
# is back where the scan saw it, the late kill marks the live row's entry
# dead, and index and bitmap scans stop finding the row.
#
# The scenario is the isolation spec cuckoo_kill_reuse's (the same table,
# index and steps): 1000 rows, k = g % 100; the k = 5 rows with id < 500
# are deleted; a cursor in s2 (index scans only) fetches 2 rows, stepping
# over the deleted ones, so the executor reports them dead and the scan
# queues their kills; VACUUM empties their slots; five new rows with
# k = 5 take their heap TIDs (checked below) and, being inserted like
# them, their slots.  Then, with the cursor still open, 65,535 rounds of
# an aborted insert of k = 5 followed by VACUUM: each round's entry goes to
# the page where k = 5's inserts go (its overflow chain page, which holds
# one of the new rows' entries), and VACUUM empties it again, one more
# cleanup of that page per round (checked through cuckoo_index_stats on
# the first rounds: the entry is added to an overflow page and removed).
# Only then does the cursor run to its end, which is when its queued kills
# are applied.  Afterwards index, bitmap and sequential scans of k = 5 must
# return the same ten rows, no entry may be killed (every row left is
# live), and cuckoo_index_verify must accept the index (it raises XX002 on
# a killed entry pointing at a live tuple).
#
# The rounds go to one psql process as one script; the cursor's session
# is a background psql that stays open throughout.
#
# Not tested here: a doubling, which set the count of a split page to the
# old page's count + 1 (so it could move backwards).  Bringing a block's
# count back to a scan's value through a split needs a different key with
# the same fingerprint and rest bits at the same slot and heap TID, which
# no deterministic scenario of reasonable cost provides.
use strict;
use warnings;

use FbfTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $started = time;
my $rounds = 65_535;    # after the first VACUUM's cleanup: 65,536 in all
my $sample_rounds = 3;  # the first rounds, one at a time with checks

my $node = fbf_node('kill_wrap', "autovacuum = off\n");

# Rows 1001 .. 1300 (other keys) fill the heap page of the last k = 5 rows,
# so that the rounds' aborted rows go to a page of their own: the cursor
# holds a pin on the heap page of the row it stands on, and VACUUM cannot
# prune a page pinned by someone else (which row that is depends on the
# order a key's entries come back in, which the index does not promise).
$node->safe_psql('postgres', q{
	CREATE TABLE kv (id int, k int) WITH (autovacuum_enabled = off);
	INSERT INTO kv SELECT g, g % 100 FROM generate_series(1, 1000) g;
	INSERT INTO kv SELECT g, 1000 + g FROM generate_series(1001, 1300) g;
	CREATE INDEX kv_k ON kv USING cuckoo (k);
});

# ---- helpers ----

sub show
{
	my ($s) = @_;
	return "entries $s->{entries}, overflow_entries $s->{overflow_entries}, "
	  . "dead_entries $s->{dead_entries}";
}

my %gucs = (
	index  => 'SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_indexscan = on;',
	bitmap => 'SET enable_seqscan = off; SET enable_bitmapscan = on; SET enable_indexscan = off;',
	seq    => 'SET enable_seqscan = on; SET enable_bitmapscan = off; SET enable_indexscan = off;',
);

# the ids of the rows with k = 5 through a scan of the given kind
sub ids
{
	my ($mode) = @_;
	return $node->safe_psql('postgres',
		"$gucs{$mode} SELECT coalesce(array_agg(id ORDER BY id)::text, '{}') FROM kv WHERE k = 5");
}

# ---- the plans the checks rely on ----

for my $mode ('index', 'bitmap', 'seq')
{
	my $plan = $node->safe_psql('postgres',
		"$gucs{$mode} EXPLAIN (COSTS OFF) SELECT id FROM kv WHERE k = 5");
	like($plan,
		  $mode eq 'index'  ? qr/Index Scan using kv_k on kv/
		: $mode eq 'bitmap' ? qr/Bitmap Index Scan on kv_k/
		:                     qr/Seq Scan on kv/,
		"the $mode scan of k = 5 uses the plan asked for")
	  or diag($plan);
}

# ---- the isolation spec's steps, up to the reuse ----

my $deleted_tids = $node->safe_psql('postgres',
	q{SELECT string_agg(ctid::text, ' ' ORDER BY id) FROM kv WHERE k = 5 AND id < 500});
is($node->safe_psql('postgres', q{
		WITH d AS (DELETE FROM kv WHERE k = 5 AND id < 500 RETURNING id) SELECT count(*) FROM d}),
	'5', 's1 deletes the five k = 5 rows with id < 500');

my $s2 = $node->background_psql('postgres', on_error_stop => 1);
$s2->set_query_timer_restart;
$s2->query_safe('SET enable_seqscan = off; SET enable_bitmapscan = off;');
like($s2->query_safe('EXPLAIN (COSTS OFF) SELECT id FROM kv WHERE k = 5'),
	qr/Index Scan using kv_k on kv/, "s2's cursor query is an index scan");
$s2->query_safe('BEGIN; DECLARE c CURSOR FOR SELECT id FROM kv WHERE k = 5;');
my @first = split /\n/, $s2->query_safe('FETCH 2 FROM c');
is(join(' ', map { ($_ % 100 == 5 && $_ >= 500 && $_ < 1000) ? 'live' : $_ } @first), 'live live',
	's2 fetches two live k = 5 rows (stepping over dead rows, whose kills it queues): '
	  . join(' ', @first));

my $before_vacuum = cuckoo_stats($node, 'kv_k');
$node->safe_psql('postgres', 'VACUUM (INDEX_CLEANUP ON, TRUNCATE OFF) kv');
my $vacuumed = cuckoo_stats($node, 'kv_k');
note 'before the first VACUUM: ' . show($before_vacuum) . '; after: ' . show($vacuumed);
is($vacuumed->{entries}, $before_vacuum->{entries} - 5,
	"s3's VACUUM empties the deleted rows' five slots");

my $new_tids = $node->safe_psql('postgres', q{
	WITH i AS (INSERT INTO kv SELECT 20000 + g, 5 FROM generate_series(1, 5) g RETURNING id, ctid)
	SELECT string_agg(ctid::text, ' ' ORDER BY id) FROM i});
is($new_tids, $deleted_tids,
	"s1's five new k = 5 rows take the deleted rows' heap TIDs ($deleted_tids)");
my $inserted = cuckoo_stats($node, 'kv_k');
note 'after the new rows: ' . show($inserted);
is($inserted->{entries}, $vacuumed->{entries} + 5, 'and get five entries');

# ---- 65,535 more cleanups of the page, the cursor still open ----

my $round_id = 100000;
my $round_sql = sub {
	my $id = $round_id++;
	return "BEGIN; INSERT INTO kv VALUES ($id, 5); ROLLBACK;\n"
	  . "VACUUM (INDEX_CLEANUP ON, TRUNCATE OFF) kv;\n";
};

# the first rounds one at a time: the aborted row's entry goes to an
# overflow page (k = 5's chain) and the VACUUM empties its slot again
for my $r (1 .. $sample_rounds)
{
	my $id = $round_id++;
	my $during = $node->safe_psql('postgres', qq{
		BEGIN;
		INSERT INTO kv VALUES ($id, 5);
		SELECT entries || ' ' || overflow_entries FROM cuckoo_index_stats('kv_k');
		ROLLBACK;
	});
	$node->safe_psql('postgres', 'VACUUM (INDEX_CLEANUP ON, TRUNCATE OFF) kv');
	my $after = cuckoo_stats($node, 'kv_k');
	note "round $r: with the aborted row: entries and overflow_entries $during; "
	  . 'after VACUUM: ' . show($after);
	is("$during | $after->{entries} $after->{overflow_entries}",
		($inserted->{entries} + 1) . ' ' . ($inserted->{overflow_entries} + 1)
		  . " | $inserted->{entries} $inserted->{overflow_entries}",
		"round $r: the aborted row's entry goes to k = 5's overflow page, and VACUUM empties its slot");
}

my $script = "SET log_statement = none;\n"
  . join('', map { $round_sql->() } ($sample_rounds + 1) .. $rounds);
my $loop_started = time;
my ($rc, $out, $err) = $node->psql('postgres', $script, timeout => 3600);
my $loop_seconds = time - $loop_started;
is($rc, 0, sprintf('the other %d rounds ran in one psql (%.1f s)',
		$rounds - $sample_rounds, $loop_seconds))
  or diag($err);
note sprintf('%d rounds of an aborted insert and a VACUUM: %.1f s for the last %d',
	$rounds, $loop_seconds, $rounds - $sample_rounds);
my $looped = cuckoo_stats($node, 'kv_k');
note 'after the rounds: ' . show($looped);
is("$looped->{entries} $looped->{overflow_entries} $looped->{dead_entries}",
	"$inserted->{entries} $inserted->{overflow_entries} 0",
	'after the rounds the index holds the same entries as before them, none killed');

# ---- the cursor runs to its end: its queued kills are applied now ----

my @rest = split /\n/, $s2->query_safe('FETCH ALL FROM c');
is(join(' ', sort { $a <=> $b } (@first, @rest)), '505 605 705 805 905',
	's2 fetches the rest of its rows (the new rows are not in its snapshot)');
$s2->query_safe('COMMIT');
$s2->quit;

my $expected = '{505,605,705,805,905,20001,20002,20003,20004,20005}';
my %got = map { $_ => ids($_) } ('index', 'bitmap', 'seq');
is($got{seq}, $expected, 'a sequential scan finds the ten k = 5 rows');
is($got{index}, $got{seq}, 'an index scan finds the same rows as a sequential scan');
is($got{bitmap}, $got{seq}, 'a bitmap scan finds the same rows as a sequential scan');
is(cuckoo_stats($node, 'kv_k')->{dead_entries}, '0',
	'no entry is killed (every row the index points at is live)');
my ($vrc, $vout, $verr) = $node->psql('postgres',
	q{SELECT entries, heap_tuples, dead_entries FROM cuckoo_index_verify('kv_k')});
is($vrc == 0 ? $vout : "error: $verr", '1300|1300|0',
	'cuckoo_index_verify accepts the index: one entry per row, none dead');

note sprintf('total %.1f s', time - $started);
$node->stop;
done_testing();
