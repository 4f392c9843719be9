# The background worker serves a counter whose creation commits after a
# maintenance pass has already looked: the creator notes the database
# when it builds the window (before its commit) and again at its commit.
#
# A database with the extension and no counter; a session creates a
# counter in a transaction and keeps it open while the launcher (naptime
# 200 ms) runs passes there, which list no counter and, without the note
# at commit, would set the database's next pass a minute ahead (an idle
# database's); it commits, and the worker must refresh the counter on its
# period (1 s) within a few seconds.  Nothing increments the counter
# (a backend that increments also refreshes).
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

use FbfTest;

my $node = fbf_node('late', q{
fbf.naptime = 200ms
});
$node->safe_psql('postgres', 'CREATE DATABASE late');
$node->safe_psql('late', 'CREATE EXTENSION fbf');
# the launcher has looked at the new database: it has the extension and
# no counter
usleep(1_000_000);

my ($in, $out, $err) = ('', '', '');
my $h = IPC::Run::start(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('late') ],
	'<', \$in, '>', \$out, '2>', \$err);
$in .= q{BEGIN;
SELECT fbf_create_counter_table('c', retention => '4 s', target_fpp => 0.01,
								nbits => 2048, nhashes => 4, npast => 3);
SELECT 'created';
};
my $t0 = time;
$h->pump until $out =~ /created/ || time - $t0 > 60;
like($out, qr/created/, 'the counter is created, its transaction still open');
# passes run meanwhile (every 200 ms while the database is due)
usleep(2_000_000);
$in .= "COMMIT;\n\\q\n";
$h->finish;
is($h->result(0), 0, 'and committed') or diag($err);

# within 2 periods plus slack of a refresh, for a few seconds
my $refreshed = 0;
$t0 = time;
while (time - $t0 < 20)
{
	my $age = $node->safe_psql('late',
		'SELECT extract(epoch FROM now() - last_refresh) FROM fbf_counter_stats');
	if (time - $t0 > 3 && $age < 2.5)
	{
		$refreshed = 1;
		last;
	}
	usleep(500_000);
}
ok($refreshed, 'the worker refreshes the counter after its creation commits')
  or diag('last refresh age: ' . $node->safe_psql('late',
	'SELECT extract(epoch FROM now() - last_refresh) FROM fbf_counter_stats'));

$node->stop;
done_testing();
