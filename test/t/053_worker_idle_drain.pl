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
# it takes a naptime, the idle wait is a minute (an hour's retention
# refreshes less often than that).
#
# An operation whose transaction stays open while passes come and go (a
# slow client, or a two-phase commit's PREPARE waiting for its COMMIT
# PREPARED: both are run) keeps the database busy: a pass finds its entry
# in flight on the chain and comes back soon, so the entry is drained soon
# after the commit, not after the idle wait.  Soon: a naptime, doubled
# for each pass in a row that found only such entries, so that a
# transaction open for long costs few passes (counted as below).
#
# Telling the launcher again never brings passes closer than a naptime:
# operations on a counter with worker_maintenance off, beside an idle one,
# each after a pass put the database off, cost a pass per naptime, not a
# pass per operation.  Passes are counted by their commits (four: as it
# connects, the list of counters, and one for each counter); twice the naptime's rate
# is allowed, for autovacuum's commits and a loaded machine's timing, so
# a version that starts a pass for some operations (the first version of
# the fix did, some 1.6 passes a naptime) may pass here.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use IPC::Run;
use FbfTest;

my $node = fbf_node('idle_drain', "fbf.naptime = 200ms\nmax_prepared_transactions = 5\n");
$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('c', retention => '1 hour')});

my $pending = q{SELECT pending FROM fbf_counter_stats WHERE counter = 'c'::regclass};

# check that the worker drains c's chains within 25 s from now, as `what`
sub drained_within_25s
{
	my ($what) = @_;
	my $start = time;
	my $left;

	while (time < $start + 25)
	{
		$left = $node->safe_psql('postgres', $pending);
		last if $left == 0;
		usleep(100_000);
	}
	is($left, 0, "$what within 25 s");
	note sprintf('drained after %.1f s', time - $start);
}

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

drained_within_25s('the worker drains the operation after the idle spell');
is($node->safe_psql('postgres', q{SELECT fbf_counter_value('c', 'k')}), 2,
	'both operations applied');

# an operation in a transaction open for 3 s (fifteen naptimes)
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT idempotent_increment('c', 'k', 1, 3, 1);
	SELECT pg_sleep(3);
	COMMIT;});
drained_within_25s('an operation of a transaction open across passes: drained after its commit');

# the same, prepared for 3 s before COMMIT PREPARED, as a two-phase
# commit's participant is (Citus' workers)
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT idempotent_increment('c', 'k', 1, 4, 1);
	PREPARE TRANSACTION 'fbf_053';});
sleep 3;
$node->safe_psql('postgres', q{COMMIT PREPARED 'fbf_053'});
drained_within_25s('an operation of a transaction prepared across passes: drained after its commit');
is($node->safe_psql('postgres', q{SELECT fbf_counter_value('c', 'k')}), 4,
	'the four operations applied');

# an operation in a transaction open for 10 s (fifty naptimes): the
# passes that find only it wait twice as long each time (0.2, 0.4, ..
# 6.4 s), some seven of them, not fifty; it is drained after the commit
my $commits = q{SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'};
my $before = $node->safe_psql('postgres', $commits);
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT idempotent_increment('c', 'k', 1, 5, 1);
	SELECT pg_sleep(10);
	COMMIT;});
my $after = $node->safe_psql('postgres', $commits);
# the transaction's commit and the first read's; a pass commits three
# times (as it connects, the list of counters, and c)
my $waiting = ($after - $before - 2) / 3;
note "$waiting passes while the transaction was open";
cmp_ok($waiting, '<=', 15,
	'passes back off while only an open transaction keeps the database busy');
drained_within_25s('an operation of a transaction open for fifty naptimes: drained after its commit');

# 100 transactions of an operation each, 0.1 s apart, on a counter the
# worker does not maintain; 'c' stays idle.
$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('off', retention => '1 hour');
	ALTER INDEX off_fbf SET (worker_maintenance = off);
	ALTER SYSTEM SET fbf.naptime = '1s';
	SELECT pg_reload_conf();});
sleep 3;
$before = $node->safe_psql('postgres', $commits);
my $start = time;
$node->safe_psql('postgres', q{
	DO $$
	BEGIN
		FOR i IN 1 .. 100 LOOP
			PERFORM idempotent_increment('off', 1, i, 1);
			COMMIT;
			PERFORM pg_sleep(0.1);
		END LOOP;
	END
	$$});
my $secs = time - $start;
sleep 2;
$after = $node->safe_psql('postgres', $commits);
# the client's 100 commits, its DO's own and the first read's
my $passes = ($after - $before - 102) / 4;
note sprintf('%d passes in %.1f s of operations', $passes, $secs);
cmp_ok($passes, '<=', 2 * ($secs + 2) + 2,
	'operations after idle passes bring a pass per naptime, not one per operation');

done_testing();
