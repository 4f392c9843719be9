# The background worker: refreshes on schedule without any client
# activity, and the controller grows a filter under a rate ramp (its
# partitions split: more bits) and shrinks it back when the load stops
# (they merge), keeping the estimated false-positive rate under the target
# once it has adapted.  Every change is logged.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use FbfTest;

my $node = fbf_node('worker', q{
fbf.naptime = 200ms
fbf.aimd_period_step = 200ms
fbf.period_min = 100ms
});
# The shape a plan for 50 operations a second had before planned filters
# filled their pages: small, so that the ramp below, to four times that,
# grows it.
$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('ramp', retention => '4 s', target_fpp => 0.01,
									nbits => 308, nhashes => 8, npast => 14)});

my ($filters0, $parts0) = split /\|/, $node->safe_psql('postgres',
	q{SELECT filters, partitions FROM fbf_counter_stats});
note "initial: $filters0 filters, $parts0 partitions";

# refreshes happen with no client touching the counter
my $refresh0 = $node->safe_psql('postgres', 'SELECT last_refresh FROM fbf_counter_stats');
ok($node->poll_query_until('postgres',
		"SELECT last_refresh > '$refresh0' FROM fbf_counter_stats"),
	'the worker refreshes the filter on schedule');

# Send `n` new operations in one transaction; returns how many applied.
my $seq = 0;
my $applied = 0;
sub send_ops
{
	my ($n) = @_;
	my $got = $node->safe_psql('postgres', qq{
		SELECT count(*) FROM generate_series(@{[$seq + 1]}, @{[$seq + $n]}) g
		WHERE idempotent_increment('ramp', 1, g, 1)});
	$seq += $n;
	$applied += $got;
	return $got;
}

# the ramp: from the 50 operations/s of its shape to about 200/s
for my $step (1 .. 60)
{
	send_ops(20);
	usleep(100_000);
}
ok($node->poll_query_until('postgres',
		"SELECT partitions > $parts0 FROM fbf_counter_stats"),
	'the filter grows its bits under the ramp');
my ($filters1, $parts1) = split /\|/, $node->safe_psql('postgres',
	q{SELECT filters, partitions FROM fbf_counter_stats});
note "after the ramp: $filters1 filters, $parts1 partitions";
cmp_ok($filters1, '<=', 16, 'the ring stays within the lanes of a partition page');

# keep the higher load while the controller settles: the estimate must
# come back under the target and stay there (it may split again meanwhile)
my $over = 0;
my $samples = 0;
my $sent_late = 0;
my $applied_late = 0;
for my $round (1 .. 80)
{
	my $got = send_ops(20);
	usleep(100_000);
	if ($round > 40 && $round % 2 == 0)
	{
		my $fpp = $node->safe_psql('postgres', 'SELECT estimated_fpp FROM fbf_counter_stats');
		$samples++;
		$over++ if $fpp >= 0.01;
	}
	if ($round > 40)
	{
		$sent_late += 20;
		$applied_late += $got;
	}
}
is($over, 0, "estimated FPP under the target once adapted ($samples samples)");
cmp_ok($applied_late, '>=', $sent_late * (1 - 2 * 0.01),
	"new operations are dismissed at most at about the target rate ($applied_late of $sent_late applied)");

# every applied operation counted exactly once
is($node->safe_psql('postgres', q{SELECT fbf_counter_value('ramp')}), $applied,
	"the counter equals the number of applied operations ($applied of $seq)");

# the load stops: the filters empty out, the operations that waited on the
# chains for bits drain (a lane takes its part each period, the window
# does not merge while they wait), and the partitions merge back to the
# plan
my $peak = $node->safe_psql('postgres', 'SELECT partitions FROM fbf_counter_stats');
ok($node->poll_query_until('postgres',
		"SELECT partitions = $parts0 AND estimated_fpp < 0.001 AND pending = 0 FROM fbf_counter_stats"),
	"the partitions merge back to the plan when the load stops (peak $peak)");

my $log = slurp_file($node->logfile);
like($log, qr/fbf: grew "ramp_fbf" from \d+ to \d+ partitions/, 'growth is logged');
like($log, qr/fbf: shrank "ramp_fbf" from \d+ to \d+ partitions/, 'shrinking is logged');

# a reload does not stop the worker
$node->safe_psql('postgres', q{ALTER SYSTEM SET fbf.naptime = '300ms'});
$node->reload;
my $refresh1 = $node->safe_psql('postgres', 'SELECT last_refresh FROM fbf_counter_stats');
ok($node->poll_query_until('postgres',
		"SELECT last_refresh > '$refresh1' FROM fbf_counter_stats"),
	'the worker goes on after a configuration reload');

# DROP DATABASE is not blocked by maintenance passes
$node->safe_psql('postgres', 'CREATE DATABASE scratch');
$node->safe_psql('scratch', 'CREATE EXTENSION fbf');
$node->safe_psql('scratch', q{SELECT fbf_create_counter_table('c', retention => '2 s')});
usleep(1_000_000);
$node->safe_psql('postgres', 'DROP DATABASE scratch');
pass('DROP DATABASE succeeds while the worker maintains counters there');

$node->stop;
done_testing();
