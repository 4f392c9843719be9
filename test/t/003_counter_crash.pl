# Crash and restart: no double counts and no lost operations.
#
# Several clients send increments, each in its own transaction, while the
# filter refreshes every few seconds and an administrator resizes its ring
# back and forth (fbf_counter_resize); the server is stopped at a random
# moment, immediately (a crash) or with a fast shutdown.  After the restart
# every client retries every operation it sent, answered or not:
#   - every operation the client saw applied (its commit was acknowledged)
#     is dismissed;
#   - an operation whose transaction never committed (in flight at the
#     crash, or rolled back) applies;
#   - the counter ends equal to the number of distinct operations.
# A design that kept the filter only in memory fails the first check.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use FbfTest;

my $node = fbf_node('crash', q{
fbf.naptime = 100ms
fbf.aimd_period_step = 100ms
fbf.period_min = 100ms
});
# Sized so that a false dismissal is practically impossible over the test
# (each would make a retry look like a loss): 6 filters of 8 million bits
# and 20 hashes, each holding at most a few tens of thousands of
# operations.  Refreshes happen every 6 s, and the resizer moves the ring
# between 6 and 12 filters (within the 16 lanes of a partition page).
$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('c', retention => '30 s', nbits => 8000000,
									nhashes => 20, npast => 4)});

my $nclients = 3;
my $ops_per_client = 100000;
my $total_ops = 0;
my $iterations = $ENV{FBF_CRASH_ITERATIONS} // 4;

# Start a client that sends increments for client id $id, seq 1.., one
# transaction each, printing each answer to a file as it comes (psql runs
# on its own; IPC::Run only collects it at the end).  Returns the harness
# and the output file.
my $tmp = PostgreSQL::Test::Utils::tempdir();
sub start_client
{
	my ($id) = @_;
	my $script = "$tmp/client_$id.sql";
	my $out = "$tmp/client_$id.out";
	open my $fh, '>', $script or die "$script: $!";
	print $fh "SELECT idempotent_increment('c', $id, $_, 1);\n" for 1 .. $ops_per_client;
	close $fh;
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1', '-f', $script,
		  '-d', $node->connstr('postgres') ],
		'>', $out, '2>', "$out.err");
	return ($h, $out);
}

for my $iter (1 .. $iterations)
{
	my $mode = $iter % 2 ? 'immediate' : 'fast';
	my @clients;
	for my $c (1 .. $nclients)
	{
		my $id = $iter * 100 + $c;
		my ($h, $out) = start_client($id);
		push @clients, { id => $id, h => $h, out => $out };
		usleep(50_000);
	}

	# a transaction that increments, then stays open across the stop
	my $open_id = $iter * 100 + 99;
	my $open_in = "BEGIN;\nSELECT idempotent_increment('c', $open_id, 1, 1000000);\nSELECT 'opened';\n";
	my $open_out = '';
	my $timer = IPC::Run::timer(60);
	my $open = IPC::Run::start(
		[ 'psql', '-X', '-At', '-d', $node->connstr('postgres') ],
		'<', \$open_in, '>', \$open_out, '2>', \my $open_err, $timer);
	$open->pump until $open_out =~ /opened/ || $timer->is_expired;

	# an administrator resizing the ring back and forth meanwhile
	my $resize_script = "$tmp/resize_$iter.sql";
	open my $rfh, '>', $resize_script or die "$resize_script: $!";
	print $rfh "SELECT fbf_counter_resize('c', 12);\nSELECT pg_sleep(0.05);\n"
	  . "SELECT fbf_counter_resize('c', 6);\nSELECT pg_sleep(0.05);\n"
	  for 1 .. 200;
	close $rfh;
	my $resizer = IPC::Run::start(
		[ 'psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1', '-f', $resize_script,
		  '-d', $node->connstr('postgres') ],
		'>', "$tmp/resize_$iter.out", '2>', "$tmp/resize_$iter.err");

	# and one that rolled back before the stop
	$node->safe_psql('postgres', qq{
		BEGIN; SELECT idempotent_increment('c', $open_id, 2, 1000000); ROLLBACK;});

	usleep(int(300_000 + rand(1_500_000)));
	$node->stop($mode);
	for my $cl (@clients) { eval { $cl->{h}->finish; }; }
	eval { $resizer->finish; };
	eval { $open->kill_kill; };
	$node->start;

	# every client retries everything it sent, answered or not
	my $answered = 0;
	my $dismissed_ok = 1;
	for my $cl (@clients)
	{
		my @answers = grep { /^[tf]$/ } split /\n/, slurp_file($cl->{out});
		my $n = scalar @answers;
		my $upto = $n + 1;	# the last one may have been in flight
		$answered += $n;
		my $retries = $node->safe_psql('postgres', qq{
			SELECT string_agg(substr(idempotent_increment('c', $cl->{id}, g, 1)::text, 1, 1), '' ORDER BY g)
			FROM generate_series(1, $upto) g});
		my @retried = split //, $retries;
		for my $i (0 .. $n - 1)
		{
			# applied and acknowledged: the retry must be dismissed
			if ($answers[$i] eq 't' && $retried[$i] ne 'f')
			{
				$dismissed_ok = 0;
				diag("client $cl->{id}: the retry of acknowledged operation @{[$i + 1]} applied");
			}
			# applied once, either time (a first answer 'f' was a false
			# dismissal: the operation applies on retry, or never)
			$total_ops++ if $answers[$i] eq 't' || $retried[$i] eq 't';
		}
		# the unacknowledged one: applied before the stop (its retry is
		# dismissed) or by its retry
		$total_ops++;
	}
	ok($dismissed_ok && $answered > 0,
		"iteration $iter ($mode stop): all $answered acknowledged operations dismissed on retry");

	is($node->safe_psql('postgres', qq{
			SELECT idempotent_increment('c', $open_id, 1, 1)::text ||
				   idempotent_increment('c', $open_id, 2, 1)::text}),
		'truetrue',
		"iteration $iter: operations of transactions that never committed apply on retry");
	$total_ops += 2;

	is($node->safe_psql('postgres', q{SELECT fbf_counter_value('c')}), $total_ops,
		"iteration $iter: the counter equals the number of distinct operations ($total_ops)");
}

my ($resizes, $filters) = split /\|/, $node->safe_psql('postgres',
	q{SELECT resizes, filters FROM fbf_counter_stats});
cmp_ok($resizes, '>', 0, "the ring was resized during the runs ($resizes times)");
note "$filters filters now";

$node->stop;
done_testing();
