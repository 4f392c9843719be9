# A refresh counts the operations on the window's chains once.
#
# Each refresh counts what waits on the chains, for the growth's measure
# of the rate (docs/design.md, "Growing at once"): a read of every chain,
# up to FBF_MAX_PENDING_PAGES pages each under a backlog.  Every backend
# that finds the refresh due calls it, and before the count was taken
# once, each of them read every chain and all but the one that rotated
# threw the count away, while the metapage's exclusive lock, which every
# operation on the window waits for, waited behind their reads.  Now they
# queue for a heavyweight lock on the metapage's block, and those after
# the first find the refresh done and count nothing.
#
# Eight clients apply single increments to a counter of short period for
# eight seconds, with the worker off, so that every refresh is one an
# operation found due.  The server logs each count and each refresh that
# rotated or was postponed (DEBUG1): there may be no more counts than
# those.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FbfTest;

my $node = fbf_node('counted_once',
	"fbf.worker_enabled = off\nlog_min_messages = debug1\n");

# many chains (a plan of 20,000 operations a second), a period of a
# fraction of a second
$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('c', retention => '2 s', expected_rate => 20000);
});
my $parts = $node->safe_psql('postgres',
	q{SELECT partitions FROM fbf_counter_stats WHERE counter = 'c'::regclass});
cmp_ok($parts, '>=', 16, "the window has $parts partitions");

my $script = $node->basedir . '/increment.sql';
open my $fh, '>', $script or die "$script: $!";
print $fh q{\set k random(1, 100)
SELECT idempotent_increment('c', 'k' || :k, :client_id, (random() * 9e18)::bigint, 1);
};
close $fh;

my $log_offset = -s $node->logfile;
my ($out, $err) = ('', '');
my $h = IPC::Run::start(
	[ 'pgbench', '--no-vacuum', '--client=8', '--jobs=2', '--time=8',
	  '-h', $node->host, '-p', $node->port, '-f', $script, 'postgres' ],
	'>', \$out, '2>', \$err);
my $ran = eval { $h->finish; 1 };
ok($ran && $h->result(0) == 0 && $err !~ /aborted|ERROR/,
	'every client ran to the end without an error')
  or diag("stderr:\n$err\nstdout:\n$out");

my $log = substr(slurp_file($node->logfile), $log_offset);
my $counts = () = $log =~ /fbf: counted \d+ operations on the chains of "c_fbf" for its refresh/g;
my $refreshes = () = $log =~ /fbf: refreshed "c_fbf": \d+ filters rotated in/g;
# a refresh that counted may still find the oldest filter covering the
# retention, and leave the rotation to a later one
my $postponed = () = $log =~ /fbf: refresh of "c_fbf" postponed/g;
cmp_ok($refreshes, '>=', 4, "the window was refreshed $refreshes times");
cmp_ok($counts, '>=', 1, 'the refreshes counted the chains');
cmp_ok($counts, '<=', $refreshes + $postponed,
	"the chains were counted $counts times, no more than once a refresh ($postponed postponed)");

$node->stop;
done_testing();
