# A drain pins no more buffers than a small server has.
#
# A drain holds its whole pending chain and the partition pages of a
# round, and records the streams of what the round stores while it holds
# them (the store decides what it takes, then the drain records those
# operations' streams, then the store writes).  Recording 32 stream pages
# at once beside 8 partition pages and a chain of 88 pages took 129 of a
# 1 MB server's 128 buffers: "no unpinned buffers available", and a chain
# that cannot be drained only grows older, until every operation on it
# fails the same way.  The stream pages a recording locks at a time are
# now fewer by the partition pages held.
#
# Here one transaction applies 15,000 operations, each of its own stream,
# on a counter of one chain of eight partitions, and VACUUM drains it;
# what the period's filters cannot take waits for the next period's, and
# later passes of the worker's maintenance drain it then.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

use FbfTest;

my $node = fbf_node('drain_pins', "shared_buffers = 1MB\nfbf.worker_enabled = off\n");

$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('pins', retention => '1 min', expected_rate => 180);
});
is($node->safe_psql('postgres', q{
	SELECT partitions FROM fbf_counter_stats WHERE counter = 'pins'::regclass}),
	'8', 'the counter has eight partitions, one chain');

is($node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE idempotent_increment('pins', 'k', g, 1, 1))
	  FROM generate_series(1, 15000) g}),
	'15000', '15,000 operations of as many streams applied in one transaction');
my ($pending) = $node->safe_psql('postgres', q{
	SELECT pending FROM fbf_counter_stats WHERE counter = 'pins'::regclass});
cmp_ok($pending, '>=', 15000, "they wait on the chain ($pending entries)");

my ($ret, $out, $err) = $node->psql('postgres', 'VACUUM pins');
is($ret, 0, 'VACUUM drains the chain') or diag($err);

# what this period's filters cannot take waits for the next period's, and
# the worker's passes (run here, as the worker is off) drain it then
my $period = $node->safe_psql('postgres', q{
	SELECT extract(epoch FROM period) FROM fbf_counter_stats WHERE counter = 'pins'::regclass});
my $left;
for my $try (1 .. 20)
{
	$left = $node->safe_psql('postgres', q{
		SELECT pending FROM fbf_counter_stats WHERE counter = 'pins'::regclass});
	last if $left == 0;
	note("$left entries wait for the next period's filters");
	sleep($period / 2);
	($ret, $out, $err) = $node->psql('postgres', "SELECT fbf_counter_maintain('pins')");
	is($ret, 0, "a later pass drains the chain (try $try)") or diag($err);
}
is($left, '0', 'nothing is left on the chain');
is($node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE idempotent_increment('pins', 'k', g, 1, 1))
	  FROM generate_series(1, 15000) g}),
	'0', 'every retry is dismissed');
is($node->safe_psql('postgres', "SELECT fbf_counter_value('pins', 'k')"), '15000',
	'the counter counted each operation once');

$node->stop;
done_testing();
