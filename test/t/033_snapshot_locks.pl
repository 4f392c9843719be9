# Snapshots do not hold the window still for their whole read.
#
# fbf_snapshot reads a large window page by page.  A reader that may only
# SELECT can take snapshots in a loop; if each one held the window's
# metapage (share) throughout, an increment that must refresh the window
# (an exclusive lock of the metapage) would wait until no snapshot is in
# progress, which two readers looping never leave.  A snapshot now copies
# the metapage under a short lock and holds only one chain at a time, so
# increments of another role, refreshing the window every few seconds,
# never wait long while two readers snapshot a ~50 MB window in a loop.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FbfTest;

my $seconds = 20;

my $node = fbf_node('main', "fbf.worker_enabled = off\n");
# ~50 MB of window, refreshed every 4 s (a 1-minute retention),
# each refresh done by the increment that finds it due (no worker); a plan
# for 150,000 operations a second over the pages' capacity part (three
# quarters) is the shape a plan for 200,000 had, within the default
# fbf.max_filter_size
$node->safe_psql('postgres', q{
	CREATE ROLE fbf_writer LOGIN;
	CREATE ROLE fbf_reader LOGIN;
	CREATE SEQUENCE seqs;
	SELECT fbf_create_counter_table('c', retention => '1 min', expected_rate => 150000);
	GRANT SELECT, INSERT, UPDATE ON c TO fbf_writer;
	GRANT USAGE ON SEQUENCE seqs TO fbf_writer;
	GRANT SELECT ON c TO fbf_reader});
my $period = $node->safe_psql('postgres',
	q{SELECT extract(epoch FROM period) FROM fbf_counter_stats WHERE counter = 'c'::regclass});
note("refresh period: $period s");
cmp_ok($period, '<', $seconds / 3, 'the window refreshes several times during the test');

my $tmp = PostgreSQL::Test::Utils::tempdir();
sub pgbench
{
	my ($name, $user, $clients, $duration, $sql, @extra) = @_;
	open my $fh, '>', "$tmp/$name.sql" or die "$tmp/$name.sql: $!";
	print $fh $sql;
	close $fh;
	return IPC::Run::start(
		[ 'pgbench', '-n', '-c', $clients, '-T', $duration, '-f', "$tmp/$name.sql",
		  @extra, '-U', $user, '-d', $node->connstr('postgres') ],
		'>', "$tmp/$name.out", '2>', "$tmp/$name.err");
}

# two readers snapshot the window in a loop (not sending it: only its size)
my $readers = pgbench('snap', 'fbf_reader', 2, $seconds + 4,
	"SELECT pg_column_size(fbf_snapshot('c'));\n");
sleep 2;
# a writer increments meanwhile, each transaction's latency logged
my $writer = pgbench('inc', 'fbf_writer', 1, $seconds,
	"SELECT idempotent_increment('c', 1, nextval('seqs'), 1);\n",
	'-l', "--log-prefix=$tmp/inc");
$writer->finish;
$readers->finish;

my ($n, $max) = (0, 0);
for my $log (glob("$tmp/inc.*"))
{
	open my $fh, '<', $log or die "$log: $!";
	while (<$fh>)
	{
		# client transaction latency(us) script epoch us
		my @f = split ' ';
		$n++;
		$max = $f[2] if $f[2] > $max;
	}
	close $fh;
}
note("$n increments, the slowest took " . $max / 1000 . " ms");
note(slurp_file("$tmp/snap.out"));
like(slurp_file("$tmp/snap.out"), qr/number of transactions actually processed: (\d{2,})/,
	'the readers took snapshots meanwhile');
cmp_ok($n, '>', 100, 'the writer incremented meanwhile');
my $refreshes = $node->safe_psql('postgres',
	q{SELECT now() - last_refresh < interval '30 s' FROM fbf_counter_stats WHERE counter = 'c'::regclass});
is($refreshes, 't', 'the increments refreshed the window');
cmp_ok($max, '<', 1_000_000, 'no increment waited a second for the snapshots');

$node->stop;
done_testing();
