# Exact streams through Citus shard transfers: a shard's window carries its
# streams (fbf_snapshot and fbf_counter_load through fbf_copy_shard_window),
# so in-order clients are answered exactly right after a move or a split.
#
# A coordinator and two workers on loopback ports, with Citus (skipped
# when it is not installed), as in 022_citus.pl.  A distributed counter
# whose filter is planned for a high false-positive rate, so that the
# filter alone would dismiss new operations falsely; clients numbering
# their operations in order on many keys.  After citus_move_shard_placement
# (block_writes, and logical replication) and citus_split_shard_by_split_points:
#   - every retry is dismissed and every new operation applied (no false
#     dismissal);
#   - every one of those answers was exact (the filter answered none:
#     filter_answers unchanged), on every shard, the moved ones included;
#   - every shard's streams are exact already (streams_exact_from NULL)
#     and know their streams (streams > 0).
# A shard's streams learn its operations when the worker drains them off
# their chains (until then the chains answer them exactly): the test waits
# for every shard's streams to know their operations, rather than for a
# time a loaded machine may outrun.  A moved shard's streams are known at
# once or never: it gets no operation between the transfer and the wait,
# and its chains travel in its snapshot's streams, not as chains.  No wait
# hides streams that are not exact: they stay so for at least a retention.
# The same for a distributed dedup table's (client_id, seq) claims through
# both kinds of move: every repeated claim refused, every new one granted,
# all answered by the streams.
# And a move in a database where fbf lives in a schema whose name format()
# would read as a pattern (fbf%s): the window moves with the shard; there,
# fbf_counter_save() saves the node's own counters on the coordinator and
# on a worker, and passes over the distributed one (with a notice); a
# shard named on the worker that holds it is saved.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FbfTest;

my ($coord, $w1, $w2) = fbf_citus_cluster(citus_transfer_conf() . qq{fbf.naptime = 500ms
});
$coord->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('likes', retention => '10 min', target_fpp => 0.2,
									expected_rate => 10);
	SELECT fbf_distribute_counter('likes', shard_count => 4);
});

my $nkeys = 40;

# operations seq from..to of client `client` on every key; how many applied
sub apply_range
{
	my ($client, $from, $to) = @_;
	return $coord->safe_psql('postgres', qq{
		SELECT count(*) FILTER (WHERE idempotent_increment('likes', 'k' || k, $client, s, 1))
		  FROM generate_series(1, $nkeys) k, generate_series($from, $to) s});
}

# the answers of every shard: exact, filter
sub answers
{
	return split /\|/, $coord->safe_psql('postgres', q{
		SELECT sum(exact_answers), sum(filter_answers) FROM fbf_counter_stats
		 WHERE counter = 'likes'::regclass});
}

# Wait until every shard of the table knows its streams, and none is
# waiting for them to be exact: the shards whose streams are not exact
# yet, and those that know none, are '0|0'.
sub streams_known
{
	my ($view, $column, $table, $what) = @_;
	ok($coord->poll_query_until('postgres', qq{
		SELECT count(*) FILTER (WHERE streams_exact_from IS NOT NULL) || '|' ||
			   count(*) FILTER (WHERE streams = 0)
		  FROM $view WHERE $column = '$table'::regclass}, '0|0'),
		"$what: every shard's streams exact already, and known")
	  or diag($coord->safe_psql('postgres', qq{
		SELECT now(), shard, node_port, streams, pending, streams_exact_from, last_refresh
		  FROM $view WHERE $column = '$table'::regclass ORDER BY shard}));
}

sub shard_of
{
	my ($key) = @_;
	my ($shard, $port) = split /\|/, $coord->safe_psql('postgres', qq{
		SELECT p.shardid, n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
		 WHERE p.shardid = get_shard_id_for_distribution_column('likes', '$key')});
	my $other = $port == $w1->port ? $w2->port : $w1->port;
	return ($shard, $port, $other);
}

# after a transfer: retries of the last ten and ten new operations on every
# key, all answered exactly
sub check_after
{
	my ($what, $client, $high) = @_;
	my ($exact0, $filter0) = answers();

	streams_known('fbf_counter_stats', 'counter', 'likes', $what);
	is(apply_range($client, $high - 9, $high), 0, "$what: every retry dismissed");
	is(apply_range($client, $high + 1, $high + 10), 10 * $nkeys,
		"$what: every new operation applied (no false dismissal)");
	my ($exact1, $filter1) = answers();
	is($filter1 - $filter0, 0, "$what: the filter answered none of them");
	is($exact1 - $exact0, 20 * $nkeys, "$what: the streams answered all of them");
}

is(apply_range(1, 1, 20), 20 * $nkeys, 'in-order operations on every key applied');
streams_known('fbf_counter_stats', 'counter', 'likes', 'in-order operations');

my ($shard, $from, $to) = shard_of('k1');
$coord->safe_psql('postgres', qq{
	SELECT citus_move_shard_placement($shard, '127.0.0.1', $from, '127.0.0.1', $to,
									  shard_transfer_mode => 'block_writes')});
check_after('citus_move_shard_placement (block_writes)', 1, 20);

($shard, $from, $to) = shard_of('k2');
$coord->safe_psql('postgres', qq{
	SELECT citus_move_shard_placement($shard, '127.0.0.1', $from, '127.0.0.1', $to)});
check_after('citus_move_shard_placement (logical replication)', 1, 30);

($shard, $from, $to) = shard_of('k3');
my ($nshards, $split_shards) = citus_split_shard($coord, 'likes', $shard, $from, $to);
is($split_shards, $nshards + 1, 'the shard is split in two');
check_after('citus_split_shard_by_split_points', 1, 40);

# a client that starts after the transfers is new everywhere, and exact
is(apply_range(2, 1, 5), 5 * $nkeys, 'a new client\'s operations applied');

# ---- a distributed dedup table's streams: (client_id, seq) claims ----

$coord->safe_psql('postgres', q{
	SELECT fbf_create_dedup('inbox', retention => '10 min', target_fpp => 0.2,
							expected_rate => 10);
	SELECT fbf_distribute_dedup('inbox', shard_count => 4);
});
my $nclients = 40;

# claims seq from..to of every client; how many were new
sub claim_range
{
	my ($from, $to) = @_;
	return $coord->safe_psql('postgres', qq{
		SELECT count(*) FILTER (WHERE fbf_claim('inbox', 'client-' || c, s))
		  FROM generate_series(1, $nclients) c, generate_series($from, $to) s});
}

sub dedup_answers
{
	return split /\|/, $coord->safe_psql('postgres', q{
		SELECT sum(exact_answers), sum(filter_answers) FROM fbf_dedup_stats
		 WHERE dedup = 'inbox'::regclass});
}

# the shard that holds client `c`'s claims, its node and the other node
sub dedup_shard_of
{
	my ($c) = @_;
	my ($shard, $port) = split /\|/, $coord->safe_psql('postgres', qq{
		SELECT p.shardid, n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
		 WHERE p.shardid = get_shard_id_for_distribution_column('inbox',
			fbf_claim_anchor('client-$c'::text, 1))});
	return ($shard, $port, $port == $w1->port ? $w2->port : $w1->port);
}

sub dedup_check_after
{
	my ($what, $high) = @_;
	my ($exact0, $filter0) = dedup_answers();

	streams_known('fbf_dedup_stats', 'dedup', 'inbox', "dedup table, $what");
	is(claim_range($high - 9, $high), 0, "dedup table, $what: every repeated claim refused");
	is(claim_range($high + 1, $high + 10), 10 * $nclients,
		"dedup table, $what: every new claim granted (no false dismissal)");
	my ($exact1, $filter1) = dedup_answers();
	is($filter1 - $filter0, 0, "dedup table, $what: the filter answered none of them");
	is($exact1 - $exact0, 20 * $nclients, "dedup table, $what: the streams answered all of them");
}

is(claim_range(1, 20), 20 * $nclients, 'in-order claims of every client granted');
streams_known('fbf_dedup_stats', 'dedup', 'inbox', 'dedup table, in-order claims');

($shard, $from, $to) = dedup_shard_of(1);
$coord->safe_psql('postgres', qq{
	SELECT citus_move_shard_placement($shard, '127.0.0.1', $from, '127.0.0.1', $to,
									  shard_transfer_mode => 'block_writes')});
dedup_check_after('citus_move_shard_placement (block_writes)', 20);

($shard, $from, $to) = dedup_shard_of(2);
$coord->safe_psql('postgres', qq{
	SELECT citus_move_shard_placement($shard, '127.0.0.1', $from, '127.0.0.1', $to)});
dedup_check_after('citus_move_shard_placement (logical replication)', 30);

# ---- fbf in schema fbf%s: the window's copy names it ----

for my $node ($coord, $w1, $w2)
{
	$node->safe_psql('postgres', 'CREATE DATABASE odd');
	$node->safe_psql('odd', 'CREATE EXTENSION citus');
}
$coord->safe_psql('odd', sprintf(q{
	SELECT citus_set_coordinator_host('127.0.0.1', %d);
	SELECT citus_add_node('127.0.0.1', %d);
	SELECT citus_add_node('127.0.0.1', %d);
	CREATE SCHEMA "fbf%%s";
	CREATE EXTENSION fbf SCHEMA "fbf%%s";
	SET search_path = public, "fbf%%s";
	SELECT fbf_create_counter_table('odd_likes', retention => '10 min');
	SELECT fbf_distribute_counter('odd_likes', shard_count => 2);
	SELECT count(*) FILTER (WHERE idempotent_increment('odd_likes', 'k' || k, 1, 1, 1))
	  FROM generate_series(1, 20) k;}, map { $_->port } ($coord, $w1, $w2)));
my ($oshard, $ofrom, $oto) = split /\|/, $coord->safe_psql('odd', sprintf(q{
	SELECT s.shardid, n.nodeport, CASE n.nodeport WHEN %d THEN %d ELSE %d END
	  FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
	  JOIN pg_dist_node n USING (groupid)
	 WHERE s.logicalrelid = 'odd_likes'::regclass AND n.nodeport IN (%d, %d)
	 ORDER BY s.shardid LIMIT 1}, $w1->port, $w2->port, $w1->port, $w1->port, $w2->port));
my ($orc, $oout, $oerr) = $coord->psql('odd', qq{
	SELECT citus_move_shard_placement($oshard, '127.0.0.1', $ofrom, '127.0.0.1', $oto,
									  shard_transfer_mode => 'block_writes')});
is($orc, 0, 'fbf in schema fbf%s: a shard moves') or diag($oerr);
is($coord->safe_psql('odd', qq{
	SELECT count(*) > 0 FROM generate_series(1, 20) k
	 WHERE get_shard_id_for_distribution_column('odd_likes', 'k' || k) = $oshard}), 't',
	'fbf in schema fbf%s: the moved shard holds keys');
is($coord->safe_psql('odd', q{
	SET search_path = public, "fbf%s";
	SELECT count(*) FILTER (WHERE idempotent_increment('odd_likes', 'k' || k, 1, 1, 1))
	  FROM generate_series(1, 20) k}), '0',
	'fbf in schema fbf%s: after the move every retry is dismissed');
is($coord->safe_psql('odd', q{SELECT sum(value) FROM odd_likes}), '20',
	'fbf in schema fbf%s: each operation applied once');

$coord->safe_psql('odd', q{
	SET search_path = public, "fbf%s";
	SELECT fbf_create_counter_table('odd_local', retention => '10 min');
	SELECT idempotent_increment('odd_local', 'k', 1, 1, 1);});
# the coordinator, and the worker that holds both shards now
for my $node ($coord, $oto == $w1->port ? $w1 : $w2)
{
	my $where = $node == $coord ? 'the coordinator' : 'a worker';
	my ($src, $sout, $serr) = $node->psql('odd',
		q{SELECT coalesce(string_agg(name, ',' ORDER BY name), '-') FROM "fbf%s".fbf_counter_save()});
	is("$src $sout", $node == $coord ? '0 public.odd_local' : '0 -',
		"fbf_counter_save() on $where saves the node's own counters")
	  or diag($serr);
	like($serr, qr/NOTICE:  table public\.odd_likes is distributed by Citus and is not saved/,
		"fbf_counter_save() on $where passes over the distributed counter, with a notice");
}
# a shard named on the worker that holds it is saved (Citus hides shards
# from a client session's reads of pg_class), and its snapshot loads back
my $holder = $oto == $w1->port ? $w1 : $w2;
my $oshard_name = $coord->safe_psql('odd',
	qq{SELECT shard_name('odd_likes'::regclass, $oshard)});
is($holder->safe_psql('odd', qq{
	CREATE TABLE saved_shard AS
		SELECT * FROM "fbf%s".fbf_counter_save('$oshard_name');
	SELECT string_agg(name, ','), count(*) FILTER (WHERE snapshot IS NOT NULL)
	  FROM saved_shard}), "public.$oshard_name|1",
	'fbf_counter_save() on a worker saves a shard named there');
is($holder->safe_psql('odd', qq{
	SELECT "fbf%s".fbf_counter_load('$oshard_name', snapshot) FROM saved_shard}),
	'merged', 'the shard\'s snapshot loads back into it');

done_testing();
