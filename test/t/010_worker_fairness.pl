# The background worker is fair to every database: with more databases
# that have counters than free worker slots (max_worker_processes = 8 and
# 13 databases with fbf), every counter is still refreshed on schedule and
# AIMD still runs in the last database of pg_database, and parallel query
# still gets its workers while maintenance passes run.
#
# The extension stays in 'postgres' (fbf_node creates it there, with no
# counter): 13 databases with fbf, postgres first in pg_database order.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep time);
use FbfTest;

my $node = fbf_node('fairness', q{
max_worker_processes = 8
max_parallel_workers = 8
fbf.naptime = 200ms
fbf.aimd_period_step = 200ms
fbf.period_min = 100ms
});

# Each counter has 5 filters over its 4 s retention (a period of 1 s): a
# counter planned from a rate gets 16 (periods of 0.27 s), which would make
# the schedule's slack for 12 databases on 2 workers, rather than fairness,
# the thing measured.
my @dbs = map { sprintf('db%02d', $_) } 1 .. 12;
for my $db (@dbs)
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION fbf');
	$node->safe_psql($db, q{
		SELECT fbf_create_counter_table('c', retention => '4 s', target_fpp => 0.01,
										nbits => 2048, nhashes => 4, npast => 3)});
}
note 'pg_database order: ' . join(' ', split /\n/, $node->safe_psql('postgres',
	'SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY ctid'));

# Refreshes on schedule everywhere.  No one increments these counters
# while sampling (a backend that increments also refreshes when overdue),
# so only the worker can keep last_refresh recent: a refresh is due every
# period, so with passes every 200 ms the newest filter is never older than
# 2 periods (plus slack for the sample itself).
my $slack = 0.5;
my %late = map { $_ => [] } @dbs;
my %samples = map { $_ => 0 } @dbs;
my %worst = map { $_ => 0 } @dbs;
my $t0 = time;
while (time - $t0 < 15)
{
	my $round = time;
	for my $db (@dbs)
	{
		my ($age, $period) = split /\|/, $node->safe_psql($db, q{
			SELECT extract(epoch FROM now() - last_refresh), extract(epoch FROM period)
			FROM fbf_counter_stats});
		next if time - $t0 < 3;    # warm-up
		$samples{$db}++;
		$worst{$db} = $age if $age > $worst{$db};
		push @{ $late{$db} }, sprintf('%.1f s: refreshed %.2f s ago, period %.2f s',
			time - $t0, $age, $period)
		  if $age > 2 * $period + $slack;
	}
	my $left = 1 - (time - $round);
	usleep(int($left * 1_000_000)) if $left > 0;
}
for my $db (@dbs)
{
	my @l = @{ $late{$db} };
	ok(@l == 0,
		"$db: counter refreshed on schedule by the worker ($samples{$db} samples, "
		  . sprintf('oldest refresh %.2f s', $worst{$db}) . ')')
	  or diag("$db starved: " . scalar(@l) . " late samples, first: $l[0]; last: $l[-1]");
}

# The controller runs in the last database too: about 2000 new operations
# a second, 40 times the planned rate, for 6 s, each batch in its own
# transaction.  The filter grows (the increments themselves may split it at
# once); once the load stops, only the worker's passes merge it back.
my $last = $dbs[-1];
my ($parts0, $filters0, $period0, $resizes0) = split /\|/, $node->safe_psql($last,
	q{SELECT partitions, filters, extract(epoch FROM period), resizes FROM fbf_counter_stats});
note "$last before the load: $parts0 partitions, $filters0 filters, period $period0 s, $resizes0 resizes";
my ($load_out, $load_err) = ('', '');
my $load = IPC::Run::start(
	[
		$node->installed_command('psql'), '-XAtq', '-v', 'ON_ERROR_STOP=1',
		'-d', $node->connstr($last), '-c', q{
DO $$
DECLARE
	seq bigint := 0;
	t0 timestamptz := clock_timestamp();
	batch_start timestamptz;
	applied bigint := 0;
BEGIN
	WHILE clock_timestamp() < t0 + interval '6 s' LOOP
		batch_start := clock_timestamp();
		FOR i IN 1 .. 200 LOOP
			seq := seq + 1;
			IF idempotent_increment('c', 42, seq, 1) THEN
				applied := applied + 1;
			END IF;
		END LOOP;
		COMMIT;
		PERFORM pg_sleep(greatest(0, 0.1 - extract(epoch FROM clock_timestamp() - batch_start)));
	END LOOP;
	RAISE NOTICE 'load: % operations sent, % applied', seq, applied;
END
$$}
	],
	'>', \$load_out, '2>', \$load_err);

my $grew = 0;
my $t1 = time;
my $row;
while (time - $t1 < 12)
{
	$row = $node->safe_psql($last,
		q{SELECT partitions, filters, extract(epoch FROM period), resizes, estimated_fpp FROM fbf_counter_stats});
	my ($n, $f, $p, $r) = split /\|/, $row;
	if ($n > $parts0 || $r > $resizes0 || $f > $filters0 || $p < $period0)
	{
		$grew = 1;
		last;
	}
	usleep(250_000);
}
$load->finish;
note "load: $load_err";
ok($grew, "the filter in $last, the last database, grows under load")
  or diag(sprintf('%s after %.1f s of load (partitions|filters|period|resizes|fpp): %s',
	$last, time - $t1, $row));
my $peak = $node->safe_psql($last, 'SELECT partitions FROM fbf_counter_stats');
ok($node->poll_query_until($last,
		"SELECT partitions < $peak OR $peak = $parts0 FROM fbf_counter_stats"),
	"the worker's passes in $last merge it back once the load stops (peak $peak partitions)");

# Parallel query still gets its workers while passes run.
$node->safe_psql('db01', 'CREATE TABLE t AS SELECT g AS x FROM generate_series(1, 100000) g');
$node->safe_psql('db01', 'ANALYZE t');
my $launched = 0;
my $runs = 10;
for my $i (1 .. $runs)
{
	my $plan = $node->safe_psql('db01', q{
		SET max_parallel_workers_per_gather = 2;
		SET parallel_setup_cost = 0;
		SET parallel_tuple_cost = 0;
		SET min_parallel_table_scan_size = 0;
		EXPLAIN (ANALYZE, COSTS OFF) SELECT count(*) FROM t});
	$launched++ if $plan =~ /Workers Launched: [12]/;
	usleep(150_000);
}
cmp_ok($launched, '>=', 1,
	"parallel query gets workers while passes run ($launched of $runs runs)");

$node->stop;
done_testing();
