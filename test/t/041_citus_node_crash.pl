# Counters distributed by Citus: node crashes during a retrying workload
# lose nothing and count nothing twice.
#
# A coordinator and two workers, as in 022_citus.pl (skipped without
# Citus), every node running Citus' two-phase commit recovery each second.
# Background clients send increments through every node, each operation a
# (key, client_id, seq) numbered in order per client, a third of them two
# increments in one explicit transaction on keys of both workers (Citus
# commits those with two-phase commit).  A client retries each operation,
# through the next node, until it gets a definite answer (the call, or the
# transaction's COMMIT, returned); a connection lost, a node starting up,
# a timeout or any error leaves the operation in doubt and it is sent
# again, unchanged.  Mid-traffic:
#   - worker1 is stopped in immediate mode while transactions over both
#     workers have prepared their parts, the coordinator has committed
#     them and not yet sent COMMIT PREPARED (its commits held by a
#     synchronous standby that never comes); released, they are committed
#     on worker2 and answered; after worker1's restart their parts are
#     still prepared there, and Citus' recovery commits them;
#   - later the coordinator is stopped in immediate mode in the same state:
#     their clients lose the answer, the workers keep their parts prepared
#     while it is down, and after its restart the clients' retries (through
#     any node) wait for Citus' recovery to commit them.
# Then, once no prepared transaction is left on any node:
#   - each key counts exactly the operations sent on it (each one retried
#     to a definite answer, so each is applied once: none lost by a crash,
#     none counted twice by a retry of an operation that had applied, or
#     that was prepared when its node crashed and committed by recovery);
#   - no operation was dismissed at its first send, the retries of those
#     committed in doubt were dismissed, and the two increments of a
#     transaction were answered alike;
#   - a retry of every operation, through each node, is dismissed and
#     changes no value.
use strict;
use warnings;

use IPC::Run;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FbfTest;
use Time::HiRes qw(usleep time);

my @nodes = fbf_citus_cluster(q{
max_connections = 100
wal_level = replica
max_wal_senders = 2
max_prepared_transactions = 50
citus.recover_2pc_interval = '1s'
fbf.naptime = 500ms
});
my ($coord, $w1, $w2) = @nodes;
$coord->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('likes', retention => '10 min', target_fpp => 1e-9);
	SELECT fbf_distribute_counter('likes', shard_count => 8);
});
is($coord->safe_psql('postgres', q{
	SELECT count(DISTINCT p.groupid) FROM pg_dist_placement p
	  JOIN pg_dist_shard s USING (shardid) WHERE s.logicalrelid = 'likes'::regclass}),
	2, 'the counter\'s shards are on both workers');

# four keys on each worker
my (@on1, @on2);
for my $i (1 .. 400)
{
	last if @on1 >= 4 && @on2 >= 4;
	my $port = $coord->safe_psql('postgres', qq{
		SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
		 WHERE p.shardid = get_shard_id_for_distribution_column('likes', 'key$i')});
	my $list = $port == $w1->port ? \@on1 : \@on2;
	push @$list, "key$i" if @$list < 4;
}
is(scalar(@on1) . scalar(@on2), '44', 'four keys on each worker');
my @keys = (@on1, @on2);

# ---- the clients ----
my $nclients = 4;
my $dir = PostgreSQL::Test::Utils::tempdir;
my @ports = map { $_->port } @nodes;

# The keys of operation `seq` of `client`: every third one is a
# transaction over a key of each worker, the others a single increment.
sub op_keys
{
	my ($client, $seq) = @_;
	return ($on1[ $seq % 4 ], $on2[ ($seq + $client) % 4 ]) if $seq % 3 == 0;
	return ($keys[ ($seq * 3 + $client) % 8 ]);
}

# One client, in a child process: operations 1, 2, ... until the file
# "stop" exists, each sent until it is answered.  Each answer is a line of
# its log, "seq answers attempts": the answers, 't' or 'f' per key, in
# op_keys' order; attempts counts the sends.
sub run_client
{
	my ($client) = @_;
	open(my $log, '>', "$dir/client$client.log") or die $!;
	$log->autoflush(1);
	local $ENV{PGOPTIONS} = '-c statement_timeout=60s -c client_min_messages=error';
	local $ENV{PGCONNECT_TIMEOUT} = '5';
	for (my $seq = 1; !-e "$dir/stop"; $seq++)
	{
		# traffic through every node, each kind of operation too: the
		# first send to a node that changes with seq, every retry to the next
		my $next = $client + $seq + int($seq / 3);
		my @k = op_keys($client, $seq);
		my $sql = join('', map {
			"SELECT idempotent_increment('likes', '$_', $client, $seq, 1);\n" } @k);
		$sql = "BEGIN;\n${sql}COMMIT;\n" if @k > 1;
		my $attempts = 0;
		while (1)
		{
			my $port = $ports[ $next++ % 3 ];
			my ($out, $err) = ('', '');
			$attempts++;
			my $ok = eval {
				IPC::Run::run(
					[ 'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d',
						"host=127.0.0.1 port=$port dbname=postgres" ],
					'<', \$sql, '>', \$out, '2>', \$err, IPC::Run::timeout(90));
			};
			my @answers = split /\n/, $out;
			if ($ok && @answers == @k && !grep { !/^[tf]$/ } @answers)
			{
				print $log "$seq " . join('', @answers) . " $attempts\n";
				last;
			}
			# in doubt: the same operation again, after a pause
			usleep(100_000);
		}
	}
	close $log;
}

my @pids;
for my $client (1 .. $nclients)
{
	my $pid = fork;
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		# no END blocks, even when it dies: they would stop the nodes
		eval { run_client($client); };
		print STDERR "client $client: $@" if $@;
		POSIX::_exit($@ ? 1 : 0);
	}
	push @pids, $pid;
}

# operations answered so far, by every client
sub answered
{
	my $n = 0;
	for my $client (1 .. $nclients)
	{
		open(my $fh, '<', "$dir/client$client.log") or next;
		$n++ while <$fh>;
		close $fh;
	}
	return $n;
}

# wait until `more` operations more than now are answered
sub wait_progress
{
	my ($more, $what) = @_;
	my $goal = answered() + $more;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	usleep(200_000) while answered() < $goal && time < $deadline;
	cmp_ok(answered(), '>=', $goal, "$more operations answered $what");
}

# Holding the coordinator's commits: a transaction of both workers that
# commits there has prepared its part on each worker and written its
# commit record, and waits (for a synchronous standby that never comes)
# before it sends COMMIT PREPARED (needs max_wal_senders > 0; a statement
# timeout does not end that wait).  Returns how many wait so, once two do
# or after 30 s.
sub hold_commits
{
	$coord->append_conf('postgresql.conf', "synchronous_standby_names = 'fbf_nobody'");
	$coord->reload;
	my $deadline = time + 30;
	my $held;
	while (1)
	{
		$held = $coord->safe_psql('postgres', q{
			SELECT count(*) FROM pg_stat_activity
			 WHERE backend_type = 'client backend' AND wait_event = 'SyncRep'});
		last if $held >= 2 || time > $deadline;
		usleep(100_000);
	}
	return $held;
}

# prepared transactions on a node, those the coordinator began if `gids`
# says so
sub prepared
{
	my ($node, $gids) = @_;
	return $node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'
		  . ($gids ? " WHERE gid LIKE 'citus\\_0\\_%'" : ''));
}

wait_progress(100, 'before the crashes');

# ---- worker1 crashes with transactions prepared on it ----
# (the coordinator's recovery waits until worker1's restart has been seen:
# turned off by hold_commits' reload)
$coord->append_conf('postgresql.conf', 'citus.recover_2pc_interval = -1');
my $held = hold_commits();
cmp_ok($held, '>=', 1,
	'transactions over both workers committed on the coordinator, prepared on worker1, wait');
$w1->stop('immediate');
# their COMMIT PREPARED reaches worker2, not worker1: they are committed
# (the clients are answered); worker1's parts stay prepared in its WAL
$coord->adjust_conf('postgresql.conf', 'synchronous_standby_names', "''");
$coord->reload;
usleep(1_000_000);
$w1->start;
cmp_ok(prepared($w1, 1), '>=', $held,
	'after worker1\'s restart their parts are still prepared there, in doubt');
$coord->adjust_conf('postgresql.conf', 'citus.recover_2pc_interval', "'1s'");
$coord->reload;
wait_progress(100, 'after worker1 crashed and restarted');

# ---- the coordinator crashes with transactions in doubt ----
$held = hold_commits();
cmp_ok($held, '>=', 1,
	'transactions over both workers committed on the coordinator, prepared on the workers, wait');
$coord->stop('immediate');
$coord->adjust_conf('postgresql.conf', 'synchronous_standby_names', "''");
# their clients lost the answer; only the coordinator's recovery can
# finish them, and it is down
my $in_doubt = prepared($w1, 1) . ' ' . prepared($w2, 1);
like($in_doubt, qr/^[1-9]\d* [1-9]\d*$/,
	'while the coordinator is down, their prepared parts wait on both workers');
note("prepared by the coordinator, on worker1 and worker2: $in_doubt");
usleep(1_000_000);
$coord->start;
wait_progress(100, 'after the coordinator crashed and restarted');

open(my $stop, '>', "$dir/stop") or die $!;
close $stop;
my $deadline = time + 3 * $PostgreSQL::Test::Utils::timeout_default;
my %running = map { $_ => 1 } @pids;
my $failed = 0;
while (%running && time < $deadline)
{
	for my $pid (keys %running)
	{
		next unless waitpid($pid, POSIX::WNOHANG()) == $pid;
		$failed++ if $? != 0;
		delete $running{$pid};
	}
	usleep(100_000) if %running;
}
ok(!%running && !$failed, 'every client got an answer for each of its operations');
kill 'KILL', keys %running;

# ---- what the clients were answered ----
my %sent;
my ($ops, $retried, $attempts, $dismissed, $first_dismissed, $uneven) = (0) x 6;
for my $client (1 .. $nclients)
{
	open(my $fh, '<', "$dir/client$client.log") or die $!;
	while (my $line = <$fh>)
	{
		my ($seq, $answers, $n) = $line =~ /^(\d+) ([tf]+) (\d+)$/
		  or die "client $client: bad log line $line";
		my @k = op_keys($client, $seq);
		$sent{$_}++ for @k;
		$ops += @k;
		$attempts += $n;
		$retried++ if $n > 1;
		$uneven++ if $answers =~ /t/ && $answers =~ /f/;
		next unless $answers =~ /f/;
		$dismissed += @k;
		$first_dismissed += @k if $n == 1;
	}
	close $fh;
}
note("$ops increments in $attempts sends; $retried operations sent more than once; "
	  . "$dismissed increments answered as retries");
cmp_ok($retried, '>', 0, 'sends failed during the crashes, and were retried');
is($first_dismissed, 0, 'no operation was dismissed the first time it was sent');
cmp_ok($dismissed, '>', 0,
	'operations applied before their answer was lost were dismissed when retried');
is($uneven, 0, 'the two increments of every transaction were answered alike');

# ---- after Citus' recovery ----
my $left;
$deadline = time + $PostgreSQL::Test::Utils::timeout_default;
while (1)
{
	$coord->safe_psql('postgres', 'SELECT recover_prepared_transactions()');
	$left = join('|', map { prepared($_) } @nodes);
	last if $left eq '0|0|0' || time > $deadline;
	usleep(500_000);
}
is($left, '0|0|0', 'Citus\' recovery resolved every prepared transaction on every node');

my $expected = join(',', map { "$_=" . ($sent{$_} // 0) } sort @keys);
sub values_on
{
	my ($node) = @_;
	my %got = map { split /\|/ } split /\n/, $node->safe_psql('postgres',
		'SELECT key, sum(value) FROM likes GROUP BY key');
	return join(',', map { "$_=" . ($got{$_} // 0) } sort @keys);
}
is(values_on($coord), $expected,
	'each key counts every operation sent on it exactly once: nothing lost, nothing twice');

# every operation once more, through each node
my @rows;
for my $client (1 .. $nclients)
{
	open(my $fh, '<', "$dir/client$client.log") or die $!;
	while (my $line = <$fh>)
	{
		my ($seq) = $line =~ /^(\d+) /;
		push @rows, "('$_', $client, $seq)" for op_keys($client, $seq);
	}
	close $fh;
}
my $retry_all = 'SELECT count(*) FILTER (WHERE idempotent_increment(\'likes\', k, c, s, 1)) '
  . 'FROM (VALUES ' . join(', ', @rows) . ') v(k, c, s)';
for my $node (@nodes)
{
	is($node->safe_psql('postgres', $retry_all), 0,
		'a retry of every operation through ' . $node->name . ' is dismissed');
}
is(values_on($w2), $expected, 'and the values are unchanged, as a worker reads them');

$_->stop for @nodes;
done_testing();
