# Citus shard transfers of other tables, interleaved with transfers of
# counters: a transfer carries the windows of exactly the shards it moves.
#
# A coordinator and two workers, as in 022_citus.pl (skipped without
# Citus).  Citus runs transfers of different colocation groups, and moves
# of different shards of one group, at the same time:
#   - session 1 starts citus_move_shard_placement of an ordinary table's
#     shard and waits on a lock a third session holds on that table;
#     session 2 moves a counter shard between the same nodes and Citus drops
#     the old placement; session 1 then completes without error, and every
#     retry of the counter's operations is dismissed;
#   - the same move of the ordinary table waits while the background
#     rebalancer moves a counter's shards, several at a time
#     (parallel_transfer_colocated_shards); the rebalance ends with no task
#     failed or retried, the move completes, the counters stay exact;
#   - isolate_tenant_to_new_shard on a counter carries the tenant's shard's
#     window into the three shards it is split into.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FbfTest;
use Time::HiRes qw(usleep);

my @nodes = fbf_citus_cluster(citus_transfer_conf() . q{
citus.max_background_task_executors = 4
citus.max_background_task_executors_per_node = 2
citus.background_task_queue_interval = 200ms
});
my ($coord, $w1, $w2) = @nodes;
$coord->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('likes', retention => '10 min', target_fpp => 1e-9);
	SELECT fbf_distribute_counter('likes', shard_count => 4, colocate_with => 'none');
	CREATE TABLE plain (id bigint PRIMARY KEY, v text);
	SELECT create_distributed_table('plain', 'id', shard_count => 4, colocate_with => 'none');
	INSERT INTO plain SELECT g, 'row ' || g FROM generate_series(1, 1000) g;
});

# operations of `client` on `nkeys` keys of `counter`: how many applied
sub apply_all
{
	my ($counter, $client, $nkeys) = @_;
	return $coord->safe_psql('postgres', qq{
		SELECT count(*) FILTER (WHERE idempotent_increment('$counter', 'k' || k, $client, 1, 1))
		  FROM generate_series(1, $nkeys) k});
}

# the port of the node holding the shard
sub port_of
{
	my ($shard) = @_;
	return $coord->safe_psql('postgres', qq{
		SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
		 WHERE p.shardid = $shard});
}

# a shard of `table` on the node of `port`
sub shard_on
{
	my ($table, $port) = @_;
	return $coord->safe_psql('postgres', qq{
		SELECT min(s.shardid) FROM pg_dist_shard s
		  JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n USING (groupid)
		 WHERE s.logicalrelid = '$table'::regclass AND n.nodeport = $port});
}

sub move
{
	my ($shard, $from, $to) = @_;
	return qq{SELECT citus_move_shard_placement($shard, '127.0.0.1', $from, '127.0.0.1', $to,
									  shard_transfer_mode => 'block_writes')};
}

# session 1: a move of `shard` of plain that waits on a lock on plain held
# by another session; returns (the mover, the lock holder)
sub start_blocked_move
{
	my ($shard, $from, $to) = @_;
	my $holder = $coord->background_psql('postgres');
	$holder->query_safe('BEGIN; LOCK TABLE plain IN SHARE MODE');
	my $mover = $coord->background_psql('postgres', on_error_stop => 0);
	$mover->query_safe('SET client_min_messages = error');
	$mover->query_until(qr/moving/, "\\echo moving\n" . move($shard, $from, $to) . ";\n");
	my $waiting = 0;
	for (my $i = 0; $i < 600 && !$waiting; $i++)
	{
		$waiting = $coord->safe_psql('postgres', q{
			SELECT count(*) FROM pg_stat_activity
			 WHERE wait_event_type = 'Lock' AND query LIKE '%citus_move_shard_placement%'
			   AND pid <> pg_backend_pid()});
		usleep(50_000) unless $waiting;
	}
	ok($waiting, 'session 1: the move of the ordinary table\'s shard waits on the lock');
	return ($mover, $holder);
}

# release the lock; session 1's move completes: its errors, if any
sub finish_blocked_move
{
	my ($mover, $holder) = @_;
	$holder->query_safe('COMMIT');
	$holder->quit;
	my ($out, $ret) = $mover->query(q{SELECT 'moved'});
	my $err = $mover->{stderr};
	$mover->quit;
	return ($out =~ /moved/ && !$ret) ? '' : "$out\n$err";
}

# ---- a counter shard moved while a move of another table waits ----
is(apply_all('likes', 1, 100), 100, 'operations on 100 keys applied');
my $pshard = shard_on('plain', $w1->port);
my $lshard = shard_on('likes', $w1->port);
ok($pshard && $lshard, 'a shard of plain and of likes on worker1');
my ($mover, $holder) = start_blocked_move($pshard, $w1->port, $w2->port);

# session 2: the counter's shard, between the same nodes; Citus drops the
# old placement
$coord->safe_psql('postgres', move($lshard, $w1->port, $w2->port));
is(port_of($lshard), $w2->port, 'session 2: the counter shard moved to worker2');
$coord->safe_psql('postgres', 'CALL citus_cleanup_orphaned_resources()');
is($w1->safe_psql('postgres', qq{
	SELECT count(*) FROM pg_class WHERE relname = (SELECT shard_name('likes', $lshard, true))}),
	'0', 'its old placement on worker1 is dropped');

is(finish_blocked_move($mover, $holder), '',
	'session 1: the move of the ordinary table\'s shard completes without error');
is(port_of($pshard), $w2->port, 'and its shard is on worker2');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM plain'), 1000, 'with its rows');
is(apply_all('likes', 1, 100), 0, 'every retry of the counter\'s operations is dismissed');
is($coord->safe_psql('postgres', q{SELECT sum(value) FROM likes}), 100,
	'and every operation counted once');

# ---- a move of another table during a parallel rebalance of counters ----
# balance plain again, so that the rebalancer has nothing of it to move
$coord->safe_psql('postgres', move(shard_on('plain', $w2->port), $w2->port, $w1->port));
# a counter with every shard on worker2
$coord->safe_psql('postgres', sprintf(q{
	SELECT citus_set_node_property('127.0.0.1', %d, 'shouldhaveshards', false);
	SELECT fbf_create_counter_table('rlikes', retention => '10 min', target_fpp => 1e-9);
	SELECT fbf_distribute_counter('rlikes', shard_count => 8, colocate_with => 'none');
	SELECT citus_set_node_property('127.0.0.1', %d, 'shouldhaveshards', true);
}, $w1->port, $w1->port));
is(apply_all('rlikes', 2, 200), 200, 'operations on a second counter, all on worker2, applied');
is(apply_all('likes', 2, 100), 100, 'and on the first');

$pshard = shard_on('plain', $w1->port);
($mover, $holder) = start_blocked_move($pshard, $w1->port, $w2->port);
my $job = $coord->safe_psql('postgres', q{
	SELECT citus_rebalance_start(shard_transfer_mode => 'block_writes',
								 parallel_transfer_colocated_shards => true)});
like($job, qr/^\d+$/, 'the rebalancer starts a background job');
my ($state, $most) = ('', 0);
for (my $i = 0; $i < 1200; $i++)
{
	my $running;
	($state, $running) = split /\|/, $coord->safe_psql('postgres', qq{
		SELECT j.state, (SELECT count(*) FROM pg_dist_background_task t
						  WHERE t.job_id = j.job_id AND t.status = 'running')
		  FROM pg_dist_background_job j WHERE j.job_id = $job});
	$most = $running if $running > $most;
	last if $state =~ /^(finished|failed|cancelled)$/;
	usleep(100_000);
}
cmp_ok($most, '>=', 2, "the rebalancer's moves of the counter's shards ran in parallel (at most $most seen at once)");
is($state, 'finished', 'the rebalance finishes');
is($coord->safe_psql('postgres', qq{
	SELECT count(*) FILTER (WHERE status <> 'done' OR coalesce(retry_count, 0) > 0)
		   || ' of ' || count(*)
	  FROM pg_dist_background_task WHERE job_id = $job}),
	'0 of ' . $coord->safe_psql('postgres',
		"SELECT count(*) FROM pg_dist_background_task WHERE job_id = $job"),
	'no task of it failed or was retried') or diag($coord->safe_psql('postgres', qq{
		SELECT string_agg(status || ': ' || message, E'\n') FROM pg_dist_background_task
		 WHERE job_id = $job}));
cmp_ok(shard_on('rlikes', $w1->port), '>', 0, 'it moved shards of the counter to worker1');
$coord->safe_psql('postgres', 'CALL citus_cleanup_orphaned_resources()');
is(finish_blocked_move($mover, $holder), '',
	'the move of the ordinary table\'s shard, waiting meanwhile, completes without error');
is(port_of($pshard), $w2->port, 'and its shard is on worker2');
is(apply_all('rlikes', 2, 200) + apply_all('likes', 2, 100) + apply_all('likes', 1, 100), 0,
	'every retry of both counters\' operations is dismissed');
is($coord->safe_psql('postgres', q{SELECT (SELECT sum(value) FROM rlikes) || ' ' || (SELECT sum(value) FROM likes)}),
	'200 200', 'and every operation counted once');

# ---- isolate_tenant_to_new_shard: the tenant's shard, split in three ----
my $nshards = $coord->safe_psql('postgres',
	"SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'likes'::regclass");
$coord->safe_psql('postgres', q{
	SELECT isolate_tenant_to_new_shard('likes', 'k7', shard_transfer_mode => 'block_writes')});
cmp_ok($coord->safe_psql('postgres',
	"SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'likes'::regclass"),
	'>', $nshards, 'the tenant\'s shard is split');
is(apply_all('likes', 2, 100) + apply_all('likes', 1, 100), 0,
	'every retry is dismissed after isolate_tenant_to_new_shard');
is($coord->safe_psql('postgres', q{SELECT sum(value) FROM likes}), 200,
	'and every operation counted once');

$_->stop for @nodes;
done_testing();
