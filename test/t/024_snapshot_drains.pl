# A snapshot taken while drains run remembers every committed operation.
#
# A drain moves committed entries off a pending chain into the bits of
# that chain's partition pages.  fbf_snapshot reads both, so it must never
# read a partition page before a drain sets the bits and the chain after
# the drain removed the entries: it would hold the operation nowhere.  On
# a primary, fbf_counter_maintain drains in a loop while one writer applies
# operations in order (client 1, seq 1, 2, ...); on a streaming standby the
# same drains arrive as WAL records, replayed under the snapshot's feet.
# On both, a checker reads the counter's value v (operations 1 .. v have
# committed) and then takes a snapshot, which must hold each of the last
# operations up to v, for several seconds of checks.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FbfTest;

# snapshots are taken for this long, and until each node took 11 (on a
# loaded machine 8 s gave the standby 9), for 120 s at most
my $seconds = 8;
my $max_seconds = 120;

my $primary = fbf_node('primary', "fbf.worker_enabled = off\n", allows_streaming => 1);
# many partitions, so that a snapshot takes a while to read
$primary->safe_psql('postgres', q{
	CREATE SEQUENCE seqs;
	SELECT fbf_create_counter_table('c', retention => '1 min', expected_rate => 20000)});
my $standby = fbf_standby($primary, 'standby');

my $tmp = PostgreSQL::Test::Utils::tempdir();
sub loop_script
{
	my ($name, $sql) = @_;
	open my $fh, '>', "$tmp/$name.sql" or die "$tmp/$name.sql: $!";
	print $fh $sql;
	close $fh;
	return IPC::Run::start(
		[ 'pgbench', '-n', '-c', '1', '-T', 2 * $seconds + 5, '-f', "$tmp/$name.sql",
		  '-d', $primary->connstr('postgres') ],
		'>', "$tmp/$name.out", '2>', "$tmp/$name.err");
}
my $writer = loop_script('writer',
	"SELECT idempotent_increment('c', 1, nextval('seqs'), 1);\n");
my $drainer = loop_script('drainer', "SELECT fbf_counter_maintain('c');\n");

# how many of the last committed operations one snapshot misses
my $check = q{
	SELECT fbf_counter_value('c') AS v \gset
	SELECT count(*) FILTER (WHERE NOT fbf_contains(s, fbf_operation(1::bigint, g)))
	FROM fbf_snapshot('c') s, generate_series(greatest(1, :v - 2000), :v) g;
};

for my $node ($primary, $standby)
{
	my ($checks, $missing, $missed) = (0, 0, 0);
	my $start = time();
	while ((time() < $start + $seconds || $checks <= 10) &&
		   time() < $start + $max_seconds)
	{
		my $n = $node->safe_psql('postgres', $check);
		$checks++;
		if ($n ne '0')
		{
			$missed++;
			$missing += $n;
		}
	}
	note("$checks snapshots on the " . $node->name);
	cmp_ok($checks, '>', 10, 'the ' . $node->name . ' took snapshots while drains ran');
	is("$missed snapshots missed $missing operations", '0 snapshots missed 0 operations',
		'every snapshot on the ' . $node->name . ' holds every committed operation');
}

$writer->finish;
$drainer->finish;
my $applied = $primary->safe_psql('postgres', q{SELECT fbf_counter_value('c')});
note("$applied operations applied");
cmp_ok($applied, '>', 1000, 'the writer applied operations meanwhile');

$standby->stop;
$primary->stop;
done_testing();
