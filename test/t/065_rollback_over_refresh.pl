# A tenant that rolls back batches which waited over refreshes cannot
# make another's operations refused or dismissed.
#
# Each refresh counts what waits on the chains for the filter it makes the
# future (docs/design.md, "Growing at once"), and the growth's measure of
# the rate takes those entries out of what was later drained into it.  A
# batch that waited over a refresh and then rolled back was counted there
# but is never drained: it cancels as many drained arrivals of that filter,
# for a period, and the next growth's measure reads low (never below what
# waits now).  Entries then wait longer on the chains, where the shares
# judge who may take them: the tenant that did it may be refused, no one
# else.
#
# On a counter of short period, with the worker off (so that operations
# do every refresh), t1 sends rounds of: a batch of 3,000 new operations
# in a transaction that sleeps over two periods and rolls back, and beside
# it committed batches of 1,000 new operations.  After each round's
# flood, t2's 300 new operations, one a statement, must all be taken:
# none refused, and dismissed no more than ten times the target would
# (every one is new, so each dismissal is a false one).  The same on a
# cuckoo window, where t1's flood reaches its share of the pending pages
# (refused about 50 times in 6 rounds) and so tests the shares under it.
#
# This is a probe of the pattern, not of one bug: the first form of the
# measure (1f4e91b), which could read no rate with a chain full and so
# refuse an operation "at its capacity", passed it too (t1's committed
# flood kept the measure up, and the shares held t2 harmless).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FbfTest;

my $node = fbf_node('rollback_over_refresh', "fbf.worker_enabled = off\n");

$node->safe_psql('postgres', q{
	CREATE ROLE t1 LOGIN;
	CREATE ROLE t2 LOGIN;
	SELECT fbf_create_counter_table('rb', retention => '3 s', expected_rate => 50,
									target_fpp => 0.001);
	SELECT fbf_create_counter_table('rc', retention => '3 s', expected_rate => 50,
									target_fpp => 0.001, filter => 'cuckoo');
	GRANT SELECT, INSERT, UPDATE ON rb, rc TO t1, t2;});

# a batch of `size` new operations of t1 from client `base`, committed:
# the operations applied, or undef and the error
sub t1_batch
{
	my ($counter, $base, $size) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', qq{
		SELECT count(*) FILTER (WHERE a) FROM unnest(idempotent_increment('$counter', 'a',
			ARRAY(SELECT $base + g FROM generate_series(1, $size) g),
			array_fill(1::bigint, ARRAY[$size]), array_fill(1::bigint, ARRAY[$size]))) a},
		extra_params => [ '-U', 't1' ]);
	return ($out, '') if $ret == 0;
	return (undef, $err);
}


for my $counter ('rb', 'rc')
{
	my $period = $node->safe_psql('postgres',
		"SELECT extract(epoch FROM period) FROM fbf_counter_stats WHERE counter = '$counter'::regclass");
	note "$counter: period $period s";
	my ($t1_applied, $t1_refused, $t2_applied, $t2_dismissed, $held_ran) = (0, 0, 0, 0, 0);
	my $base = 1_000_000;
	my $sleep = 2 * $period;
	for my $round (1 .. 6)
	{
		# the batch that waits over two refreshes, then rolls back
		my $held = fbf_start_call($node, 't1', qq{
			BEGIN;
			SELECT count(*) FROM unnest(idempotent_increment('$counter', 'a',
				ARRAY(SELECT $base + g FROM generate_series(1, 3000) g),
				array_fill(1::bigint, ARRAY[3000]), array_fill(1::bigint, ARRAY[3000])));
			SELECT pg_sleep($sleep);
			ROLLBACK;}, 120);
		$base += 10_000;

		# committed batches beside it, over the same periods (the refreshes
		# happen on these operations)
		my $until = time + $sleep + 1;
		while (time < $until)
		{
			my ($n, $err) = t1_batch($counter, $base, 1000);
			$base += 10_000;
			if (defined $n) { $t1_applied += $n; }
			else
			{
				$t1_refused++;
				like($err, qr/53400|capacity|share|pending pages/i,
					"$counter, round $round: t1 is refused only for capacity or its share")
				  if $t1_refused == 1;
			}
		}
		# the held batch may itself be refused: only its own tenant is
		$held_ran++ if fbf_finish_call($held);

		my ($applied, $refused, $dismissed, $why) =
		  fbf_ops_one_by_one($node, 't2', $counter, 'b', '2, ' . ($round * 1000) . ' + g', 300);
		is($refused, 0, "$counter, round $round: none of t2's 300 new operations refused")
		  or diag("first refusal: $why");
		$t2_applied += $applied;
		$t2_dismissed += $dismissed;
	}
	note "$counter: t1 applied $t1_applied in committed batches, refused $t1_refused batches";
	cmp_ok($held_ran, '>=', 1,
		"$counter: a batch waited over refreshes and rolled back in $held_ran rounds of 6");
	cmp_ok($t1_refused, '>', 0, "$counter: t1's flood reached its share ($t1_refused batches refused)")
	  if $counter eq 'rc';
	cmp_ok($t2_dismissed, '<=', 18,
		"$counter: t2's 1,800 new operations dismissed within ten times the target ($t2_dismissed)");
	is($node->safe_psql('postgres', "SELECT fbf_counter_value('$counter', 'b')"), $t2_applied,
		"$counter: t2's key counted each operation it applied once");
	my $stats = $node->safe_psql('postgres',
		qq{SELECT partitions || ' partitions, estimated fpp ' || round(estimated_fpp::numeric, 6)
		  FROM fbf_counter_stats WHERE counter = '$counter'::regclass});
	note "$counter at the end: $stats";
}

$node->stop;
done_testing();
