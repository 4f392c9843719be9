# Capacity that follows the load (window_split.c): a window's partitions
# split when the rate outgrows its bits and merge back when it falls, one
# partition page at a time, online.  Neither may forget an operation:
#   1. across several splits, the retry of every operation applied so far
#      is dismissed (a split that copied a partition page into only one of
#      its new pages, or a drain that set bits in the wrong page, makes
#      some retries apply);
#   2. a split left in progress (fbf.split_batch = 1) survives a crash:
#      operations applied while it is under way, drained into split and
#      unsplit pages or still pending, are remembered after recovery and
#      after the split is finished;
#   3. partitions merge back when the load falls, and operations applied
#      while they merge are remembered;
#   4. a streaming standby replays all of it with wal_consistency_checking
#      (every page an fbf record touches is compared with the primary's),
#      agrees with the primary, and dismisses the retries once promoted.
# The worker is off: maintenance passes happen only when the test calls
# fbf_counter_maintain().  Every operation is unique, and the ones applied
# are recorded in the table `ops`, in the same transaction as the increment,
# so that the test knows exactly which retries must be dismissed.
#
# The counters' plans are small, and each batch is sized to what the window
# can take: one batch that fills a window's bits makes it dismiss nearly
# every new operation as a false positive until the filters holding it age
# out (a split copies the bits, it cannot thin them), which would leave
# nothing applied to check.  New operations dismissed as false positives
# are counted and reported, not asserted: the assertions are on retries.
use strict;
use warnings;

use List::Util qw(min max sum);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use FbfTest;

my $t0 = time;
my $conf = "wal_consistency_checking = 'fbf'\nautovacuum = off\nfbf.worker_enabled = off\n";
my $primary = fbf_node('primary', $conf, allows_streaming => 1);
$primary->safe_psql('postgres', q{
	CREATE TABLE ops (counter text, client int8, seq int8, at timestamptz NOT NULL,
					  PRIMARY KEY (counter, client, seq));
});
my $standby = fbf_standby($primary, 'standby', slot => 1);

# Apply operations (client, lo .. hi) to a counter in one transaction,
# recording those applied; returns how many were.
sub apply_ops
{
	my ($node, $counter, $client, $lo, $hi) = @_;
	return $node->safe_psql('postgres', qq{
		WITH a AS (
			INSERT INTO ops
			SELECT '$counter', $client, g, clock_timestamp() FROM generate_series($lo, $hi) g
			WHERE idempotent_increment('$counter', $client, g, 1)
			RETURNING 1)
		SELECT count(*) FROM a});
}

# The SQL that retries every recorded operation of a counter applied less
# than $age ago: "retried|applied again|the first of those".  The
# operations are chosen before any is retried (MATERIALIZED), so that no
# other row reaches idempotent_increment().
sub retry_sql
{
	my ($counter, $age) = @_;
	return qq{
		WITH todo AS MATERIALIZED (
			SELECT client, seq FROM ops
			WHERE counter = '$counter' AND at > clock_timestamp() - interval '$age'),
		r AS MATERIALIZED (
			SELECT client, seq, idempotent_increment('$counter', client, seq, 1) AS again
			FROM todo)
		SELECT count(*), count(*) FILTER (WHERE again),
			   coalesce(left(string_agg(client || ':' || seq, ' ') FILTER (WHERE again), 200), '')
		FROM r};
}

sub retry_ops
{
	my ($node, $counter, $age) = @_;
	return split /\|/, $node->safe_psql('postgres', retry_sql($counter, $age)), -1;
}

# Retry and assert that every retry is dismissed.
sub all_dismissed
{
	my ($node, $counter, $age, $what) = @_;
	my ($tried, $again, $which) = retry_ops($node, $counter, $age);
	ok($tried > 0 && $again == 0,
		"$what: all $tried operations applied to $counter are dismissed on retry")
	  or diag("$again retries applied: $which");
}

sub value_ok
{
	my ($node, $counter, $what) = @_;
	my ($value, $n) = split /\|/, $node->safe_psql('postgres', qq{
		SELECT fbf_counter_value('$counter'), (SELECT count(*) FROM ops WHERE counter = '$counter')});
	is($value, $n, "$what: the value of $counter is the number of operations applied ($n)");
}

sub maintain
{
	my ($node, $counter, $batch) = @_;
	return $node->safe_psql('postgres',
		"SET fbf.split_batch = $batch; SELECT fbf_counter_maintain('$counter')");
}

# partitions (the metapage's), and partitions as readers see them (a
# snapshot's): F * P while a split by F is in progress
sub parts
{
	my ($node, $counter) = @_;
	return split /\|/, $node->safe_psql('postgres', qq{
		SELECT partitions, (fbf_info(fbf_snapshot('$counter'))).nparts
		FROM fbf_counter_stats WHERE counter = '$counter'::regclass});
}

# Wait until the standby has replayed all the primary's WAL; false at once
# if its replay stopped on an inconsistent page (or after 3 minutes).
sub catch_up
{
	my $lsn = $primary->lsn('insert');
	for (1 .. 1800)
	{
		my ($rc, $out) = $standby->psql('postgres',
			"SELECT pg_last_wal_replay_lsn() >= '$lsn'::pg_lsn");
		return 1 if $rc == 0 && $out eq 't';
		return 0 if slurp_file($standby->logfile) =~ /inconsistent page found|PANIC/;
		usleep(100_000);
	}
	return 0;
}

# The standby, caught up, sees what the primary sees: the same partitions
# (also of a split in progress) and the same snapshot, and in it every
# operation applied less than $age ago.  A snapshot's birth times are read
# against the clock, so the snapshots are compared by their shape, counts
# and which of 20,000 operations never applied they contain (false
# positives: a fingerprint of the bits).
sub standby_agrees
{
	my ($counter, $age, $what) = @_;
	ok(catch_up(), "$what: the standby replays the primary's WAL, consistency-checked")
	  or return;
	my $shape = qq{
		WITH f AS MATERIALIZED (SELECT fbf_snapshot('$counter') AS s)
		SELECT (SELECT partitions FROM fbf_counter_stats WHERE counter = '$counter'::regclass)
			   || ' ' || (SELECT i::text FROM f, fbf_info(f.s) i)
			   || ' ' || (SELECT md5(coalesce(string_agg(g::text, ',' ORDER BY g), ''))
						  FROM f, generate_series(1, 20000) g
						  WHERE fbf_contains(f.s, fbf_operation(-1::bigint, g)))};
	my $on_primary = $primary->safe_psql('postgres', $shape);
	is($standby->safe_psql('postgres', $shape), $on_primary,
		"$what: the standby has the primary's partitions, counts and bits of $counter");
	# The operations applied in the last $age before the counter's last one:
	# no pass has run since, so the window still holds them, however long
	# a loaded machine took to get here (the clock would leave none).
	my $contains = qq{
		WITH f AS MATERIALIZED (SELECT fbf_snapshot('$counter') AS s)
		SELECT count(*), count(*) FILTER (WHERE NOT fbf_contains(f.s, fbf_operation(client, seq)))
		FROM ops, f
		WHERE counter = '$counter'
		  AND at > (SELECT max(at) FROM ops WHERE counter = '$counter') - interval '$age'};
	my ($n, $missing) = split /\|/, $standby->safe_psql('postgres', $contains);
	ok($n > 0 && $missing == 0,
		"$what: the standby's snapshot of $counter holds all $n operations applied ($missing missing)");
}

######################################################################
# 1. No false negative across splits
######################################################################
# The shape a plan for 10/s would have if it did not fill its page (a
# planned filter has every bit of it): small, so that batches of 15
# operations a partition split it.
$primary->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('c', retention => '30 s', target_fpp => 0.01,
									nbits => 440, nhashes => 8, npast => 14)});
my ($c_start) = parts($primary, 'c');
my ($seq, $applied, $dismissed) = (0, 0, 0);
for my $round (1 .. 12)
{
	my ($p) = parts($primary, 'c');
	my $batch = min(15 * $p, 3000);
	my $n = apply_ops($primary, 'c', 1, $seq + 1, $seq + $batch);
	$seq += $batch;
	$applied += $n;
	$dismissed += $batch - $n;
	my $action = maintain($primary, 'c', 0);
	my ($p2) = parts($primary, 'c');
	# the window keeps 30 s; the rounds take less, but leave a margin
	my ($tried, $again, $which) = retry_ops($primary, 'c', '28 s');
	ok($again == 0 && $tried > 0,
		"round $round: $n of $batch new operations applied, pass: $action, $p -> $p2 partitions; "
		  . "all $tried operations applied so far are dismissed on retry")
	  or diag("$again retries applied: $which");
	usleep(300_000);
}
my ($c_end) = parts($primary, 'c');
cmp_ok($c_end, '>', $c_start,
	"the partitions of c grew over the rounds ($c_start -> $c_end)");
note("c: $applied operations applied, $dismissed new ones dismissed as false positives ("
	  . sprintf('%.2f%%', 100 * $dismissed / ($applied + $dismissed)) . ')');
value_ok($primary, 'c', 'after the splits');
standby_agrees('c', '28 s', 'after the splits');

######################################################################
# 2. A split in progress survives a crash
######################################################################

# Apply batches of new operations (client $client), each twice the one
# before (up to 16 times the first), with fbf.split_batch = 1, until an
# increment or the pass after the batch starts a split of the counter and
# leaves it in progress; returns the partitions then and in the readers'
# view.  Doubled batches reach a rate that splits on any machine, however
# slow; the check comes before the pass too, which would take a step more.
sub start_split
{
	my ($node, $counter, $client, $batch) = @_;
	my $next = 1;
	my $most = 16 * $batch;

	# increments that find the window overfull split it themselves, a
	# batch at a time too
	$node->safe_psql('postgres', 'ALTER SYSTEM SET fbf.split_batch = 1');
	$node->reload;
	for my $i (1 .. 40)
	{
		apply_ops($node, $counter, $client, $next, $next + $batch - 1);
		$next += $batch;
		my ($p, $v) = parts($node, $counter);
		return ($p, $v) if $v > $p;
		maintain($node, $counter, 1);
		($p, $v) = parts($node, $counter);
		return ($p, $v) if $v > $p;
		$batch = min(2 * $batch, $most);
	}
	return parts($node, $counter);
}

# 14 partitions at creation.  Until the crash the split takes at most four
# steps of one partition each (fbf.split_batch = 1): two in the pass that
# starts it, two in the pass below.  So it stays in progress, as long as
# no increment finds a chain full of operations waiting for bits (that
# finishes a split at once), and 14 partitions take the operations below
# with room to spare.  (With 4, a slow machine's passes finished it.)
$primary->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('s', retention => '30 s', target_fpp => 0.01, expected_rate => 1200)});
my ($s_p0) = parts($primary, 's');
cmp_ok($s_p0, '>=', 8, "s has $s_p0 partitions at creation");
my ($s_p, $s_v) = start_split($primary, 's', 1, 150);
cmp_ok($s_v, '>', $s_p,
	"a pass with fbf.split_batch = 1 leaves the split of s in progress ($s_p partitions, $s_v in the readers' view)");

# Operations while it is in progress, in several transactions (1,200 over
# 14 partitions: some hash to the split ones, some not, but for a chance of
# (13/14)^1200): when the chain is full, an operation drains the committed
# entries before it into the partition pages, split or not, and so does
# VACUUM.  A second pass splits one more partition, whose page then holds
# bits drained during the split.  The last batch is left pending.  Crash
# recovery is consistency-checked too.
my @steps = (
	[ 'apply 2:1..400', sub { apply_ops($primary, 's', 2, 1, 400) } ],
	[ 'apply 2:401..800', sub { apply_ops($primary, 's', 2, 401, 800) } ],
	[ 'apply 2:801..1200', sub { apply_ops($primary, 's', 2, 801, 1200) } ],
	[ 'VACUUM', sub { $primary->safe_psql('postgres', 'VACUUM s') } ],
	[ 'a pass', sub { maintain($primary, 's', 1) } ],
	[ 'apply 3:1..400', sub { apply_ops($primary, 's', 3, 1, 400) } ],
	[ 'VACUUM', sub { $primary->safe_psql('postgres', 'VACUUM s') } ],
	[ 'apply 4:1..400', sub { apply_ops($primary, 's', 4, 1, 400) } ]);
for my $step (@steps)
{
	$step->[1]->();
	note("s after $step->[0]: " . join(' ', parts($primary, 's')));
}
my @before = parts($primary, 's');
is("@before", "$s_p $s_v", 'the split of s is still in progress before the crash');
cmp_ok($primary->safe_psql('postgres', q{SELECT pending FROM fbf_counter_stats WHERE counter = 's'::regclass}),
	'>', 0, 'with operations still pending');
standby_agrees('s', '28 s', 'during the split');

$primary->stop('immediate');
$primary->start;
my @after = parts($primary, 's');
is("@after", "$s_p $s_v", 'crash recovery restores the split in progress');
all_dismissed($primary, 's', '28 s', 'after the crash, the split in progress');
value_ok($primary, 's', 'after the crash');

# more while it is still in progress, then finish it
apply_ops($primary, 's', 5, 1, 400);
maintain($primary, 's', 0);
my ($s_done, $s_view) = parts($primary, 's');
ok($s_done >= $s_v && $s_view == $s_done,
	"a pass with fbf.split_batch = 0 finishes the split ($s_p -> $s_done partitions)");
$primary->safe_psql('postgres', 'ALTER SYSTEM RESET fbf.split_batch');
$primary->reload;
all_dismissed($primary, 's', '28 s', 'after the split is finished');
value_ok($primary, 's', 'after the split is finished');
standby_agrees('s', '28 s', 'after the split is finished');

######################################################################
# 3. Merge back when the load falls
######################################################################

# Retention 3 s (a refresh period of 0.2 s).  One psql session runs the
# passes, every ~0.05 s, with fbf.split_batch = 1 so that splits and merges
# stay in progress between passes while operations arrive: first a load of
# 50 new operations per pass, then a trickle of 2 per pass for ~3
# retentions, so that the rate is known but low.  After each pass of the
# trickle, every operation applied less than 2 s ago is retried.
#
# The passes must come more often than the refresh period: a pass that
# refreshes more than once gives every filter it recycles the same birth
# time, arrival_rate() (window_ring.c) then finds a period of length 0 and
# reports the rate unknown, and FbfWindowMergeFactor never merges without
# a rate (while FbfWindowSplitFactor doubles the partitions on every such
# pass whose estimate is over the threshold, which splitting cannot lower).
$primary->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('m', retention => '3 s', target_fpp => 0.01, expected_rate => 100)});
my ($m_plan) = parts($primary, 'm');
my $script = "SET fbf.split_batch = 1;\n";
my $stat = q{(SELECT partitions FROM fbf_counter_stats WHERE counter = 'm'::regclass)};
for my $i (1 .. 40)
{
	my ($lo, $hi) = (($i - 1) * 50 + 1, $i * 50);
	$script .= qq{
		INSERT INTO ops SELECT 'm', 1, g, clock_timestamp() FROM generate_series($lo, $hi) g
		WHERE idempotent_increment('m', 1, g, 1);
		SELECT 'L', fbf_counter_maintain('m'), $stat;
		SELECT pg_sleep(0.05);};
}
for my $i (1 .. 150)
{
	my ($lo, $hi) = (($i - 1) * 2 + 1, $i * 2);
	my $retry = retry_sql('m', '2 s');
	$script .= qq{
		INSERT INTO ops SELECT 'm', 2, g, clock_timestamp() FROM generate_series($lo, $hi) g
		WHERE idempotent_increment('m', 2, g, 1);
		SELECT 'T', fbf_counter_maintain('m'), $stat;
		$retry;
		SELECT pg_sleep(0.05);};
}
my $t3 = time;
my @lines = grep { $_ ne '' } split /\n/, $primary->safe_psql('postgres', $script);
my (@load, @trickle, @retries);
for (my $i = 0; $i < @lines; $i++)
{
	my @f = split /\|/, $lines[$i], -1;
	if ($f[0] eq 'L') { push @load, $f[2]; }
	elsif ($f[0] eq 'T')
	{
		push @trickle, $f[2];
		push @retries, [ split /\|/, $lines[++$i], -1 ];
	}
}
my $m_peak = max(@load, @trickle);
my $m_end = $trickle[-1];
note(sprintf('m, %.1f s: partitions under load %s; in the trickle %s',
	time - $t3, join(' ', @load), join(' ', @trickle)));
is(scalar(@trickle), 150, 'every pass of the load and trickle ran');
cmp_ok($m_peak, '>', $m_plan, "the load grew m ($m_plan -> $m_peak partitions)");
cmp_ok($m_end, '<', $m_peak, "the trickle merged m back ($m_peak -> $m_end partitions, $m_plan planned)");
my $m_tried = sum(map { $_->[0] } @retries);
my $m_again = sum(map { $_->[1] } @retries);
ok($m_tried > 0 && $m_again == 0,
	"while m merged, every operation applied less than 2 s before was dismissed on retry ($m_tried retries)")
  or diag("$m_again retries applied: " . join(' ', map { $_->[2] } grep { $_->[1] > 0 } @retries));
value_ok($primary, 'm', 'after the merges');
standby_agrees('m', '2 s', 'after the merges');

######################################################################
# 4. The standby, with every record consistency-checked, and promoted
######################################################################

# A split in progress on the primary when the standby is promoted
$primary->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('w', retention => '30 s', target_fpp => 0.01, expected_rate => 300)});
my ($w_p, $w_v) = start_split($primary, 'w', 1, 150);
cmp_ok($w_v, '>', $w_p, "the split of w is in progress ($w_p partitions, $w_v in the readers' view)");
apply_ops($primary, 'w', 2, 1, 400);
apply_ops($primary, 'w', 2, 401, 800);
$primary->safe_psql('postgres', 'VACUUM w');
apply_ops($primary, 'w', 3, 1, 300);
standby_agrees('w', '28 s', 'before the promotion');

my $log = slurp_file($standby->logfile) . slurp_file($primary->logfile);
unlike($log, qr/inconsistent page found/, 'no page was found inconsistent on replay');

$standby->promote;
my @promoted = parts($standby, 'w');
is("@promoted", "$w_p $w_v", 'the promoted standby has the split in progress');
all_dismissed($standby, 'w', '28 s', 'promoted standby, split in progress');
value_ok($standby, 'w', 'promoted standby');
apply_ops($standby, 'w', 4, 1, 300);
maintain($standby, 'w', 0);
my ($w_done, $w_view) = parts($standby, 'w');
ok($w_done >= $w_v && $w_view == $w_done,
	"the promoted standby finishes the split ($w_p -> $w_done partitions)");
all_dismissed($standby, 'w', '28 s', 'promoted standby, split finished');
value_ok($standby, 'w', 'promoted standby, split finished');

$log = slurp_file($standby->logfile) . slurp_file($primary->logfile);
unlike($log, qr/inconsistent page found/, 'still no page found inconsistent');
note(sprintf('total %.1f s', time - $t0));

$standby->stop;
$primary->stop;
done_testing();
