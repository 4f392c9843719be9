# Exact streams on copies of a counter: a streaming standby, its promotion,
# a snapshot loaded into another counter, and a dump restored into a fresh
# cluster.
#
#   1. Clients number their operations in order on a primary; the drains
#      record them in the stream pages, some before a base backup and some
#      only in WAL after it.  The standby shows the streams; once promoted,
#      retries within the streams' bitmap are answered exactly by them
#      (exact_answers, no filter answer), every older retry is dismissed by
#      the filter, a rolled-back seq and new seqs apply, the counter is
#      exact.
#   2. fbf_counter_load of a counter's snapshot into an empty counter (Bloom
#      and cuckoo windows): the snapshot carries the streams, so those of
#      the loaded counter know what it was loaded with and are exact at
#      once (streams_exact_from not ahead): retries within the bitmaps and
#      new operations are answered by them, older retries by the filter.
#   3. fbf_counter_save, pg_dump, pg_restore into a fresh cluster and
#      fbf_counter_restore, with operations drained and still pending when
#      saved: the restored streams exact at once, every retry dismissed,
#      new ones applied exactly, the counter equal, also after a crash of
#      the restored server.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;

# applied and dismissed by a query of increments, as "applied/total"
sub ops
{
	my ($node, $db, $counter, $clients, $from, $to) = @_;
	return $node->safe_psql($db, qq{
		SELECT count(*) FILTER (WHERE idempotent_increment('$counter', c, g, 1)) || '/' || count(*)
		FROM generate_series(1, $clients) c, generate_series($from, $to) g});
}

# ---------------------------------------------------------------------
# 1. Standby and promotion
# ---------------------------------------------------------------------
my $primary = fbf_node('primary', "fbf.naptime = 200ms\n", allows_streaming => 1);
$primary->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('c', retention => '10 min', expected_rate => 2000,
									target_fpp => 0.000001)});
is(ops($primary, 'postgres', 'c', 10, 1, 100), '1000/1000', 'in-order operations apply');
$primary->safe_psql('postgres', q{SELECT fbf_counter_maintain('c')});

my $standby = fbf_standby($primary, 'standby');

# after the backup: more seqs, one rolled back, drained into the streams
is(ops($primary, 'postgres', 'c', 10, 101, 200), '1000/1000', 'more after the backup');
$primary->safe_psql('postgres', q{
	BEGIN; SELECT idempotent_increment('c', 1, 201, 100); ROLLBACK;
	SELECT fbf_counter_maintain('c')});
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));

my $s = counter_stats($standby, 'c');
is($s->{streams}, 10, 'the standby\'s replayed stream pages hold the ten streams');
is($standby->safe_psql('postgres', q{SELECT fbf_counter_value('c')}), '2000',
	'the standby reads the counter');

$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'standby did not promote';
# the highest seq is 200: 137 .. 199 are in the bitmap, 200 is the highest
is(ops($standby, 'postgres', 'c', 10, 137, 200), '0/640',
	'after promotion, retries within the streams\' bitmap are dismissed');
$s = counter_stats($standby, 'c');
cmp_ok($s->{exact_answers}, '>=', 640, "answered exactly ($s->{exact_answers})");
is($s->{filter_answers}, 0, 'none by the filter');
is(ops($standby, 'postgres', 'c', 10, 1, 136), '0/1360', 'older retries are dismissed too');
cmp_ok(counter_stats($standby, 'c')->{filter_answers}, '>', 0, 'by the filter');
is($standby->safe_psql('postgres', q{
	SELECT idempotent_increment('c', 1, 201, 1)::text || ' ' ||
		   idempotent_increment('c', 2, 201, 1)::text || ' ' ||
		   idempotent_increment('c', 2, 201, 1)::text}),
	'true true false', 'the rolled-back seq and a new one apply, once');
is(ops($standby, 'postgres', 'c', 10, 202, 210), '90/90', 'new operations apply');
is($standby->safe_psql('postgres', q{SELECT fbf_counter_value('c')}), 2000 + 2 + 90,
	'the counter is exact on the new primary');
$standby->stop;
$primary->stop;

# ---------------------------------------------------------------------
# 2. A snapshot loaded into an empty counter
# ---------------------------------------------------------------------
my $node = fbf_node('loads', "fbf.naptime = 200ms\n");
for my $filter ('bloom', 'cuckoo')
{
	$node->safe_psql('postgres', qq{
		SELECT fbf_create_counter_table('src_$filter', retention => '10 min', expected_rate => 1000,
										target_fpp => 0.000001, filter => '$filter');
		SELECT fbf_create_counter_table('dst_$filter', retention => '10 min', expected_rate => 1000,
										target_fpp => 0.000001, filter => '$filter')});
	is(ops($node, 'postgres', "src_$filter", 5, 1, 300), '1500/1500', "$filter: operations apply");
	$node->safe_psql('postgres', qq{SELECT fbf_counter_maintain('src_$filter')});
	is($node->safe_psql('postgres', qq{
		SELECT fbf_counter_load('dst_$filter', fbf_snapshot('src_$filter'))}),
		'adopted', "$filter: the snapshot is loaded into the empty counter");
	$s = counter_stats($node, "dst_$filter");
	is($s->{learning}, 'f', "$filter: its streams came with the snapshot, exact at once");
	is($s->{streams}, 5, "$filter: they know the five streams");
	is(ops($node, 'postgres', "dst_$filter", 5, 237, 300), '0/320',
		"$filter: retries within the bitmaps are dismissed");
	$s = counter_stats($node, "dst_$filter");
	is($s->{filter_answers}, 0, "$filter: by the streams alone");
	is(ops($node, 'postgres', "dst_$filter", 5, 1, 300), '0/1500',
		"$filter: every operation of the snapshot is dismissed by the loaded counter");
	is(ops($node, 'postgres', "dst_$filter", 5, 301, 320), '100/100',
		"$filter: new operations apply");
	is(counter_stats($node, "dst_$filter")->{filter_answers}, $s->{filter_answers} + 1175,
		"$filter: the older retries by the filter, the new ones by the streams");
	$node->safe_psql('postgres', qq{SELECT fbf_counter_maintain('dst_$filter')});
	is(ops($node, 'postgres', "dst_$filter", 5, 250, 320), '0/355',
		"$filter: and are dismissed on retry, with the old");
	cmp_ok(counter_stats($node, "dst_$filter")->{streams}, '>=', 5,
		"$filter: the streams learned the new operations");
}
$node->stop;

# ---------------------------------------------------------------------
# 3. Save, dump, restore into a fresh cluster
# ---------------------------------------------------------------------
my $old = fbf_node('streams_dump_source', "fbf.worker_enabled = off\n");
$old->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('likes', retention => '10 min', expected_rate => 1000,
									target_fpp => 0.000001);
	SELECT fbf_create_dedup('inbox', retention => '10 min', expected_rate => 1000,
							target_fpp => 0.000001)});
is(ops($old, 'postgres', 'likes', 5, 1, 300), '1500/1500', 'source: operations apply');
is($old->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE fbf_claim('inbox', c, g))
	FROM generate_series(1, 5) c, generate_series(1, 300) g}), '1500', 'source: claims');
$old->safe_psql('postgres', q{
	SELECT fbf_counter_maintain('likes'); SELECT fbf_counter_maintain('inbox')});
# still pending when saved
is(ops($old, 'postgres', 'likes', 5, 301, 350), '250/250', 'source: late operations apply');
$old->safe_psql('postgres', 'CREATE TABLE fbf_saved AS SELECT * FROM fbf_counter_save()');

my $tmp = PostgreSQL::Test::Utils::tempdir();
my $dump = "$tmp/streams.dump";
command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $old->connstr('postgres') ], 'pg_dump');
my $new = fbf_node('streams_dump_target', "fbf.naptime = 200ms\n");
$new->safe_psql('postgres', 'CREATE DATABASE restored');
command_ok([ 'pg_restore', '--exit-on-error', '-d', $new->connstr('restored'), $dump ],
	'pg_restore into a fresh cluster');
is($new->safe_psql('restored', q{
	SELECT string_agg(format('%s %s', name, outcome), ', ' ORDER BY name)
	FROM fbf_counter_restore('fbf_saved')}),
	'public.inbox adopted, public.likes adopted', 'fbf_counter_restore loads the windows');
is(counter_stats($new, 'likes', 'restored')->{learning}, 'f',
	'the restored streams came with the snapshot, exact at once');

is(ops($new, 'restored', 'likes', 5, 1, 350), '0/1750',
	'every retry is dismissed after the restore, pending ones too');
is($new->safe_psql('restored', q{
	SELECT count(*) FILTER (WHERE fbf_claim('inbox', c, g))
	FROM generate_series(1, 5) c, generate_series(1, 300) g}), '0',
	'and every claim again refused');
my $filter_before = counter_stats($new, 'likes', 'restored')->{filter_answers};
is(ops($new, 'restored', 'likes', 5, 351, 400), '250/250', 'new operations apply');
is(counter_stats($new, 'likes', 'restored')->{filter_answers}, $filter_before,
	'each answered by its stream, the pending ones at the save included');
is($new->safe_psql('restored', q{SELECT fbf_counter_value('likes')}), 1750 + 250,
	'the counter is exact');

$new->stop('immediate');
$new->start;
is(ops($new, 'restored', 'likes', 5, 1, 400), '0/2000',
	'after a crash every retry is still dismissed');
is($new->safe_psql('restored', q{SELECT fbf_counter_value('likes')}), 2000,
	'and the counter is exact');

$new->stop;
$old->stop;
done_testing();
