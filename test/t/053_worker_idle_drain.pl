# The worker drains the operations of a connection that stays open
# through an idle spell after a naptime, not after the idle wait.
#
# A backend tells the launcher of its database's operations at its first
# one.  A pass that then finds no operation puts the database off until
# its first counter's next refresh is due, up to a minute for a long
# retention.  Operations the same backend sends after that must make the
# launcher come back at once: otherwise they stay on their pending chains
# (answered exactly, but not in the filter's pages or the stream pages)
# for up to that minute.  Before the fix, a pooled connection's
# operations after any idle spell waited so (a Citus worker's cached
# connections, say), which TAP 050 met on a loaded machine.
#
# One psql connection: an operation; wait until the worker drained it;
# three seconds (fifteen naptimes) for passes to find the database idle;
# another operation.  The worker must drain that one within 25 seconds:
# it takes a naptime, the idle wait is a minute.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use IPC::Run;
use FbfTest;

my $node = fbf_node('idle_drain', "fbf.naptime = 200ms\n");
$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('c', retention => '10 min')});

my $pending = q{SELECT pending FROM fbf_counter_stats WHERE counter = 'c'::regclass};

# one connection, one transaction per -c
my ($stdout, $stderr) = ('', '');
my $ok = IPC::Run::run(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
		'-c', q{SELECT idempotent_increment('c', 'k', 1, 1, 1)},
		'-c', qq{DO \$\$
			BEGIN
				WHILE ($pending) > 0 LOOP
					PERFORM pg_sleep(0.1);
				END LOOP;
			END
			\$\$},
		'-c', q{SELECT pg_sleep(3)},
		'-c', q{SELECT idempotent_increment('c', 'k', 1, 2, 1)} ],
	'<', \'', '>', \$stdout, '2>', \$stderr,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
ok($ok, 'an operation, drained, an idle spell, another operation, on one connection')
  or diag($stderr);

my $start = time;
my $left;
while (time < $start + 25)
{
	$left = $node->safe_psql('postgres', $pending);
	last if $left == 0;
	usleep(100_000);
}
is($left, 0, 'the worker drains the operation after the idle spell within 25 s');
note sprintf('drained after %.1f s', time - $start);
is($node->safe_psql('postgres', q{SELECT fbf_counter_value('c', 'k')}), 2,
	'both operations applied');

done_testing();
