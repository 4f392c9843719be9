# Copyright: the fbf authors.  TAP test, run by test/check.sh.
#
# The WAL of the hot path, read back with pg_walinspect, and replayed:
#   - a single increment writes one PENDING_OPS record whose xid is the
#     record header's: at most 71 bytes for an in-order stream's operation
#     (24 of record header, 20 of block reference, 17 of entry, 10 of
#     annex), and none of the records 1.4 wrote (PENDING_ADD, DRAIN_V1);
#   - a drain writes one DRAIN record per pending page, every partition
#     page of the chain in it (a new window's eight, where 1.4 took three
#     a record);
#   - replayed by a standby (before the drain and after it) and by crash
#     recovery, those records give back exactly what the primary had: every
#     committed operation remembered, including one of a released
#     savepoint (its own xid in the record), and neither a rolled-back one
#     nor one of a rolled-back savepoint; in a cluster in xid epoch 1, so
#     that an epoch taken as 0 would show.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;

my $primary = fbf_node('primary', "autovacuum = off\n", allows_streaming => 1);
# every xid of the cluster in epoch 1: redo that took an entry's epoch as 0
# would make its transaction's fate unreadable, a rolled-back one committed
$primary->stop;
command_ok([ 'pg_resetwal', '-e', '1', $primary->data_dir ], 'the cluster moved to epoch 1');
$primary->start;
is($primary->safe_psql('postgres', q{SELECT txid_current() >> 32}), '1', 'in epoch 1');
$primary->safe_psql('postgres', q{
	CREATE EXTENSION pg_walinspect;
	SELECT fbf_create_counter_table('c', retention => '5 min', expected_rate => 75);
	ALTER INDEX c_fbf SET (worker_maintenance = off);});
$primary->backup('base');
my $standby = fbf_standby($primary, 'standby', backup => 'base');

# 16 partitions in two chains of eight (a plan for 75 operations a second
# over the pages' capacity part of three quarters): a chain gets some 150
# operations
is($primary->safe_psql('postgres', q{
	SELECT partitions FROM fbf_counter_stats WHERE counter = 'c'::regclass}),
	'16', 'the window has two chains of eight partitions');

my $n = 300;
my $start = $primary->lsn('insert');
# each its own transaction: client 7, seqs 1..$n in order (a stream)
$primary->safe_psql('postgres',
	join('', map { "SELECT idempotent_increment('c', 7, $_, 1);\n" } 1 .. $n));
# a released savepoint's operation (its subtransaction's xid), a rolled-back
# savepoint's, and a rolled-back transaction's
$primary->safe_psql('postgres', q{
	BEGIN;
	SAVEPOINT a; SELECT idempotent_increment('c', 8, 1, 1); RELEASE a;
	SAVEPOINT b; SELECT idempotent_increment('c', 8, 2, 1); ROLLBACK TO b;
	COMMIT;
	BEGIN; SELECT idempotent_increment('c', 8, 3, 1); ROLLBACK;});
# pg_walinspect reads what is flushed: a switch flushes the rollbacks' too
$primary->safe_psql('postgres', q{SELECT pg_switch_wal()});
my $end = $primary->lsn('flush');

my $records = qq{pg_get_wal_records_info('$start', '$end') r WHERE r.resource_manager = 'fbf'};
# (a refresh of the window, due every period, may write other records too)
is($primary->safe_psql('postgres', qq{
	SELECT count(*) FILTER (WHERE record_type = 'PENDING_OPS') || ' ' ||
		   count(*) FILTER (WHERE record_type IN ('PENDING_ADD', 'PENDING_ADDS', 'DRAIN_V1'))
	FROM $records}),
	($n + 3) . ' 0',
	'each increment writes one PENDING_OPS record, and none of the others of an operation');
is($primary->safe_psql('postgres', qq{
	SELECT count(*) FROM $records
	AND record_type = 'PENDING_OPS' AND fpi_length = 0 AND record_length > 71}),
	'0', 'of at most 71 bytes for an in-order stream\'s operation');
cmp_ok($primary->safe_psql('postgres', qq{
	SELECT count(*) FROM $records
	AND record_type = 'PENDING_OPS' AND fpi_length = 0}), '>=', $n - 40,
	'(most of them without a full-page image)');

# what the standby replayed of PENDING_OPS alone (nothing drained yet): the
# operations' xids, a released savepoint's and a rolled-back one's
my $remembered = qq{
	SELECT (SELECT count(*) FILTER (WHERE fbf_contains(s, fbf_operation(7::bigint, g))) || '/' ||
				   count(*) FROM generate_series(1, $n) g) || ' ' ||
		   fbf_contains(s, fbf_operation(8::bigint, 1)) || ' ' ||
		   fbf_contains(s, fbf_operation(8::bigint, 2)) || ' ' ||
		   fbf_contains(s, fbf_operation(8::bigint, 3))
	FROM fbf_snapshot('c') s};
my $want = "$n/$n true false false";
is($primary->safe_psql('postgres', $remembered), $want, 'the primary remembers them');
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
is($standby->safe_psql('postgres', $remembered), $want,
	'the standby, from PENDING_OPS alone: every committed operation, no rolled-back one');

# the drain: one DRAIN per pending page, all of its chain's partition pages
$start = $primary->lsn('insert');
$primary->safe_psql('postgres', q{SELECT fbf_counter_maintain('c')});
$primary->safe_psql('postgres', q{SELECT pg_switch_wal()});
$end = $primary->lsn('flush');
my @drains = split /\n/, $primary->safe_psql('postgres', qq{
	SELECT block_ref FROM pg_get_wal_records_info('$start', '$end') r
	WHERE r.resource_manager = 'fbf' AND record_type = 'DRAIN' ORDER BY start_lsn});
my %pending_pages;
my $most = 0;
my $twice = 0;
foreach my $refs (@drains)
{
	my @blocks = $refs =~ /blkref #\d+: rel \d+\/\d+\/\d+ (?:fork \w+ )?blk (\d+)/g;
	$twice++ if $pending_pages{ $blocks[0] }++;
	$most = @blocks - 1 if @blocks - 1 > $most;
}
cmp_ok(scalar(@drains), '>', 0, 'the maintenance pass drains');
is($twice, 0, 'one DRAIN record per pending page');
is($most, 8, 'a drain writes all eight partition pages of its chain in one record');
is($primary->safe_psql('postgres', q{
	SELECT count(*) FROM fbf_counter_stats WHERE counter = 'c'::regclass AND pending = 0}),
	'1', 'and leaves nothing pending');

# the same operations, drained, replayed
is($primary->safe_psql('postgres', $remembered), $want, 'the primary remembers them drained');
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
is($standby->safe_psql('postgres', $remembered), $want,
	'the standby replayed the drain: the same');
is($standby->safe_psql('postgres', q{SELECT fbf_counter_value('c')}),
	$primary->safe_psql('postgres', q{SELECT fbf_counter_value('c')}),
	'and the same count');

# crash recovery of operations still pending (not drained) at the crash
$primary->safe_psql('postgres', q{CHECKPOINT});
$primary->safe_psql('postgres',
	join('', map { "SELECT idempotent_increment('c', 9, $_, 1);\n" } 1 .. 100));
$primary->safe_psql('postgres', q{
	BEGIN;
	SAVEPOINT a; SELECT idempotent_increment('c', 9, 101, 1); RELEASE a;
	SAVEPOINT b; SELECT idempotent_increment('c', 9, 102, 1); ROLLBACK TO b;
	COMMIT;});
$primary->stop('immediate');
$primary->start;
is($primary->safe_psql('postgres', q{
	SELECT sum(idempotent_increment('c', 9, g, 1)::int) FROM generate_series(1, 101) g}),
	'0', 'after a crash, every retry of an operation pending at the crash is dismissed');
is($primary->safe_psql('postgres', q{SELECT idempotent_increment('c', 9, 102, 1)}),
	't', 'and the rolled-back savepoint\'s operation applies');
is($primary->safe_psql('postgres', q{SELECT fbf_counter_value('c')}),
	$n + 1 + 102, 'and the counter counted each operation once');

done_testing();
