# Counters distributed by Citus: exactly once across a cluster.
#
# A coordinator and two workers on loopback ports, with Citus (built by
# test/check.sh from the vendored tarball; skipped when it is not
# installed).  A counter distributed with fbf_distribute_counter:
#   - a shell's window is never used: fbf_snapshot on the shell is refused;
#   - an operation applied through one node is dismissed when retried
#     through any other (coordinator, either worker), inside explicit
#     transactions too;
#   - fbf_apply_on_placement, callable by anyone on a worker, is no back
#     door: a tenant limited by row security to its key, sharing a shard
#     with another tenant, can neither hand it operation hashes nor apply
#     or record operations on the other's key (42501); the other tenant's
#     operations then apply; non-counters, shards, local counters and
#     callers without UPDATE are refused (42809, 42501);
#   - the fast path: a statement that is one call of idempotent_increment
#     (single, outcome, batch, keyless) is sent as the routed statement in
#     one round trip, with the same answers and errors; a call with a
#     mutable argument, among other things, or in a DO block takes the
#     function route; both remember each other's operations; through a
#     worker; as prepared statements;
#   - transactions over keys of both workers commit with two-phase commit
#     (PREPARE TRANSACTION is sent to both) and roll back as a whole;
#   - a worker crash between PREPARE and COMMIT PREPARED: the prepared
#     operation stays in flight across the restart (a duplicate waits), and
#     Citus' recovery commits it (its retry is dismissed) or rolls it back
#     (its retry applies);
#   - retry_storm through the coordinator, clients cut off and retrying,
#     is exact; and again with a worker stopped in immediate mode and
#     restarted mid-run;
#   - Citus' shard transfers carry the windows: after
#     citus_move_shard_placement (writes blocked, and logical replication),
#     citus_split_shard_by_split_points, citus_drain_node and the
#     rebalancer's background moves (citus_rebalance_start), every retry of
#     an earlier operation is dismissed, on a Bloom and a cuckoo counter;
#   - the shards share the table's expected_rate: each shard's window is
#     planned for the rate over shard_count or citus.shard_count, or for
#     the share of the largest shard of the table colocate_with names
#     (after a split too), rounded up, never below 1,000/s unless the
#     table's own rate is lower, and takes what a local counter of that
#     rate takes; an explicit shape is kept; fbf_distribute_counter holds
#     the table locked; colocate_with NULL is refused (22004);
#   - every shard holds what Citus routes to it (the nodes' own maps of
#     the shards agree with Citus), across splits that make the ranges
#     uneven, in sessions that read the maps before a split, for keys and
#     ids whose hashes are the first and the last values of shards' ranges;
#   - operators a hostile role put ahead of pg_catalog on a superuser's
#     search_path, on every node, never run when the superuser distributes,
#     increments, reads and moves a counter.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FbfTest;
use Time::HiRes qw(usleep);

# Debian's PostgreSQL 15.20 lists the libraries allowed as logical decoding
# output plugins; Citus' logical shard splits decode with its own (`citus`;
# moves use pgoutput)
my $bindir = `pg_config --bindir`;
chomp $bindir;
my $output_plugins =
  `$bindir/postgres --describe-config 2>/dev/null` =~ /^output_plugin_libraries\t/m
  ? "output_plugin_libraries = 'pgoutput, test_decoding, citus'\n"
  : '';

my @nodes = fbf_citus_cluster(citus_transfer_conf() . qq{fbf.naptime = 500ms
$output_plugins});
my ($coord, $w1, $w2) = @nodes;
$coord->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('likes', retention => '10 min', target_fpp => 1e-9);
	SELECT fbf_distribute_counter('likes', shard_count => 8);
	SELECT fbf_create_counter_table('clikes', retention => '10 min', filter => 'cuckoo');
	SELECT fbf_distribute_counter('clikes');
});

# the worker node (1 or 2) of a key's shard
sub node_of
{
	my ($key) = @_;
	my $port = $coord->safe_psql('postgres', qq{
		SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
		 WHERE p.shardid = get_shard_id_for_distribution_column('likes', '$key')});
	return $port == $w1->port ? 1 : 2;
}

# keys on each worker
my (@on1, @on2);
for my $i (1 .. 200)
{
	last if @on1 >= 4 && @on2 >= 4;
	my $n = node_of("key$i");
	push @{ $n == 1 ? \@on1 : \@on2 }, "key$i" if @{ $n == 1 ? \@on1 : \@on2 } < 4;
}

sub incr
{
	my ($node, $key, $client, $seq) = @_;
	return $node->safe_psql('postgres',
		"SELECT idempotent_increment('likes', '$key', $client, $seq, 1)");
}

sub value
{
	my ($key) = @_;
	return $coord->safe_psql('postgres', "SELECT fbf_counter_value('likes', '$key')");
}

# run the pgbench script $text, $tx transactions of one client (-M
# prepared: named statements, Parse once, then Bind and Execute per
# transaction; :n starts at 0) through the coordinator: its exit status,
# stdout and stderr
sub prepared_script
{
	my ($name, $text, $tx) = @_;
	return fbf_pgbench_prepared($coord, $name, $text, $tx);
}

# ---- the shell's window ----
my ($rc, $out, $err) = $coord->psql('postgres', "SELECT fbf_snapshot('likes')",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/0A000: "likes" is distributed by Citus/, 'the shell\'s window is refused (0A000)');

# ---- the shards share the table's expected rate ----
# each shard's window is planned for its share of the table's rate, and
# takes what a counter planned for that rate takes: the rate over
# shard_count, over citus.shard_count, or the share of the largest shard
# of the table colocate_with names (after a split too); never below the
# default (1000/s) unless the table's own rate is lower; an explicit shape
# is kept.  The coordinator's table is planned for the whole rate before
# it is distributed: 20,000/s over 10 minutes takes 73 MB, over the
# default fbf.max_filter_size.
$coord->safe_psql('postgres', q{
	SET fbf.max_filter_size = '128MB';
	SELECT fbf_create_counter_table('rated', retention => '10 min', expected_rate => 20000);
	SELECT fbf_distribute_counter('rated', shard_count => 4);
	SELECT fbf_create_counter_table('rated_with', retention => '10 min', expected_rate => 20000);
	SELECT fbf_distribute_counter('rated_with', colocate_with => 'rated');
	SELECT fbf_create_counter_table('rated_default', retention => '10 min');
	SELECT fbf_distribute_counter('rated_default');
	SELECT fbf_create_counter_table('rated_floor', retention => '10 min', expected_rate => 2000);
	SELECT fbf_distribute_counter('rated_floor', shard_count => 4);
	SELECT fbf_create_counter_table('rated_odd', retention => '10 min', expected_rate => 10001);
	SELECT fbf_distribute_counter('rated_odd', shard_count => 4);
	SELECT fbf_create_counter_table('rated_low', retention => '10 min', expected_rate => 500);
	SELECT fbf_distribute_counter('rated_low', shard_count => 4);
	SELECT fbf_create_counter_table('shaped', retention => '10 min', expected_rate => 20000,
									nbits => 100000, nhashes => 7, npast => 10);
	SELECT fbf_distribute_counter('shaped', shard_count => 4);
	SELECT fbf_create_counter_table('local_5000', retention => '10 min', expected_rate => 5000);
	SELECT fbf_create_counter_table('local_1000', retention => '10 min', expected_rate => 1000);
	SELECT fbf_create_counter_table('local_500', retention => '10 min', expected_rate => 500);
	SELECT fbf_create_counter_table('rated_wide', retention => '1 min', expected_rate => 64000);
	SELECT fbf_distribute_counter('rated_wide');
	SET citus.shard_count = 8;
	SELECT fbf_create_counter_table('rated_eight', retention => '1 min', expected_rate => 64000);
	SELECT fbf_distribute_counter('rated_eight', colocate_with => 'none');
	SELECT fbf_create_counter_table('local_2000_1min', retention => '1 min', expected_rate => 2000);
	SELECT fbf_create_counter_table('local_8000_1min', retention => '1 min', expected_rate => 8000);});
my %size = map { $_ => $coord->safe_psql('postgres', "SELECT pg_relation_size('local_${_}_fbf')") }
  (5000, 1000, 500, '2000_1min', '8000_1min');
is(citus_shard_windows($coord, 'rated'), "expected_rate=5000 $size{5000}",
	'20,000/s over 4 shards: each shard\'s window is planned for 5,000/s, and takes what a counter of 5,000/s takes');
is(citus_shard_windows($coord, 'rated_with'), "expected_rate=5000 $size{5000}",
	'and so with colocate_with a table of 4 shards');
is(citus_shard_windows($coord, 'rated_default'), "expected_rate=1000 $size{1000}",
	'a default counter (1,000/s) over 32 shards: each keeps the default plan');
is(citus_shard_windows($coord, 'rated_floor'), "expected_rate=1000 $size{1000}",
	'2,000/s over 4 shards: not below the default');
like(citus_shard_windows($coord, 'rated_odd'), qr/^expected_rate=2501 \d+$/,
	'10,001/s over 4 shards: rounded up to 2,501/s');
is(citus_shard_windows($coord, 'rated_low'), "expected_rate=500 $size{500}",
	'500/s over 4 shards: a rate below the default is kept');
like(citus_shard_windows($coord, 'shaped'), qr/^expected_rate=20000 \d+$/,
	'an explicit shape is kept');
is(citus_shard_windows($coord, 'rated_wide'), "expected_rate=2000 $size{'2000_1min'}",
	'64,000/s over citus.shard_count (32) shards: 2,000/s each');
is(citus_shard_windows($coord, 'rated_eight'), "expected_rate=8000 $size{'8000_1min'}",
	'with citus.shard_count = 8 and colocate_with => none: 8,000/s each');
my ($rated_shard) = $coord->safe_psql('postgres',
	"SELECT min(shardid) FROM pg_dist_shard WHERE logicalrelid = 'rated'::regclass");
my ($rated_before, $rated_after) = citus_split_shard($coord, 'rated', $rated_shard, $w1->port, $w2->port);
$coord->safe_psql('postgres', q{
	SET fbf.max_filter_size = '128MB';
	SELECT fbf_create_counter_table('rated_split', retention => '10 min', expected_rate => 20000);
	SELECT fbf_distribute_counter('rated_split', colocate_with => 'rated');});
is("$rated_before $rated_after " . citus_shard_windows($coord, 'rated_split'),
	"4 5 expected_rate=5000 $size{5000}",
	'colocated with a table of 4 shards, one split in two: planned for the largest shard\'s share (5,000/s), not a fifth');
is(join(' ', map { $coord->safe_psql('postgres', $_) }
	  "SELECT idempotent_increment('rated', 'k', 1, 1, 1)",
	  "SELECT idempotent_increment('rated', 'k', 1, 1, 1)",
	  "SELECT fbf_counter_value('rated', 'k')"), 't f 1',
	'a shard\'s window so planned remembers');
($rc, $out, $err) = $coord->psql('postgres', q{
	SELECT fbf_create_counter_table('unplaced', retention => '10 min');
	SELECT fbf_distribute_counter('unplaced', colocate_with => NULL)},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/22004: colocate_with must not be NULL/,
	'colocate_with NULL is refused (22004), where create_distributed_table would do nothing');

# an increment in flight when a distribution starts: the distribution
# waits for it (the table is locked before the checks), then refuses the
# counter that has applied it (55000), where it would otherwise pass its
# checks first and distribute a table whose window does not reach the
# shards
$coord->safe_psql('postgres',
	"SELECT fbf_create_counter_table('raced', retention => '10 min', expected_rate => 8000)");
my $racer = $coord->background_psql('postgres', on_error_stop => 0);
$racer->query_safe("BEGIN; SELECT idempotent_increment('raced', 'k', 1, 1, 1)");
my $distributor = $coord->background_psql('postgres', on_error_stop => 0);
$distributor->query_safe('\\set VERBOSITY verbose');
$distributor->query_until(qr/distributing/, qq{\\echo distributing
	SELECT fbf_distribute_counter('raced', shard_count => 4);
});
my $distributing = 0;
for (my $i = 0; $i < 600 && !$distributing; $i++)
{
	$distributing = $coord->safe_psql('postgres', q{
		SELECT count(*) FROM pg_stat_activity
		 WHERE wait_event_type = 'Lock' AND query LIKE '%fbf_distribute_counter(''raced''%'});
	usleep(50_000) unless $distributing;
}
ok($distributing, 'a distribution waits for an increment in flight on the table');
$racer->query_safe('COMMIT');
$racer->quit;
$distributor->query(q{SELECT 'done'});
my $distribute_err = $distributor->{stderr};
$distributor->quit;
like($distribute_err, qr/55000: counter "raced" has already applied operations/,
	'then refuses the counter, which has applied it (55000)');
is($coord->safe_psql('postgres', q{
	SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = 'raced'::regclass;
	SELECT string_agg(o, ',') FROM pg_class, unnest(reloptions) o
	 WHERE relname = 'raced_fbf' AND o LIKE 'expected_rate=%';
	SELECT fbf_counter_value('raced', 'k')}), "0\nexpected_rate=8000\n1",
	'which stays a local counter with its window as it was, its operation counted once');
# (done with: the shard transfers below move only the shards they are about)
$coord->safe_psql('postgres', q{
	DROP TABLE rated, rated_with, rated_default, rated_floor, rated_odd, rated_low, shaped,
		rated_wide, rated_eight, rated_split, raced, unplaced});

# ---- retries through other nodes ----
my $k = $on1[0];
is(incr($coord, $k, 1, 1), 't', 'applied through the coordinator');
is(incr($w1, $k, 1, 1) . incr($w2, $k, 1, 1) . incr($coord, $k, 1, 1),
	'fff', 'its retries through worker1 (local shard), worker2 and the coordinator are dismissed');
is(incr($w2, $k, 1, 2), 't', 'applied through the worker that does not hold the shard');
is(incr($coord, $k, 1, 2) . incr($w1, $k, 1, 2), 'ff', 'retries dismissed');
is($coord->safe_psql('postgres', qq{
	BEGIN;
	SELECT idempotent_increment('likes', '$k', 1, 3, 1);
	SELECT idempotent_increment('likes', '$k', 1, 1, 1);
	COMMIT;}), "t\nf", 'inside an explicit transaction: new applied, retry dismissed');
is(value($k), 3, 'the key counts each operation once');
is($w1->safe_psql('postgres', "SELECT sum(value) FROM likes WHERE key = '$k'"), 3,
	'as every node sees it');

# ---- statistics: the shards' windows, not the shells' ----
is($coord->safe_psql('postgres', q{
	SELECT count(*) = (SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'likes'::regclass),
		   sum(applied), sum(dismissed), count(DISTINCT node_port)
	  FROM fbf_counter_stats WHERE counter = 'likes'::regclass}),
	't|3|6|2', 'fbf_counter_stats on the coordinator: one row per shard, on both workers, with what they applied and dismissed');
my $likes_shards = $coord->safe_psql('postgres',
	"SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'likes'::regclass");
is($coord->safe_psql('postgres', q{
	SELECT (SELECT count(*) FROM fbf_counter_stats
			 WHERE counter = 'likes'::regclass AND (shard IS NULL OR node_name IS NULL)),
		   (SELECT count(*) FROM fbf_counter_stats s
			  JOIN pg_dist_shard d ON d.logicalrelid = s.counter
			   AND s.shard = shard_name(d.logicalrelid, d.shardid)
			  JOIN pg_dist_placement p ON p.shardid = d.shardid
			  JOIN pg_dist_node n ON n.groupid = p.groupid
			 WHERE s.counter = 'likes'::regclass AND s.node_port = n.nodeport
			   AND s.estimated_fpp < 1e-6 AND s.filters > 0 AND s.nbits > 0 AND s.bytes > 0),
		   (SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'likes'::regclass)}),
	"0|$likes_shards|$likes_shards",
	'each row names its shard table and the node it is on, with its window\'s shape and estimate; no row is the shell\'s');

# a counter granted without its schema's USAGE: a role that may read it
# gets its shards' rows (looked up by schema and name, not through the
# search_path nor the schema's privileges), and no one's read fails
$coord->safe_psql('postgres', q{
	CREATE SCHEMA "we'ird ""s";
	SELECT fbf_create_counter_table('"we''ird ""s"."Odd, {name}"', retention => '10 min');
	SELECT fbf_distribute_counter('"we''ird ""s"."Odd, {name}"', shard_count => 2);
	SELECT idempotent_increment('"we''ird ""s"."Odd, {name}"', 'a', 1, 1, 1);
	CREATE ROLE stats_reader LOGIN;
	GRANT SELECT ON "we'ird ""s"."Odd, {name}" TO stats_reader;});
my $odd_stats = q{
	SELECT count(*), sum(applied)
	  FROM fbf_counter_stats WHERE counter::oid = (
		SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE n.nspname = 'we''ird "s' AND c.relname = 'Odd, {name}')};
my $odd_rows = $coord->safe_psql('postgres', $odd_stats);
is($odd_rows, '2|1',
	'fbf_counter_stats: a row per shard of a counter in a schema whose name needs quoting');
($rc, $out, $err) = $coord->psql('postgres', $odd_stats,
	extra_params => [ '-U', 'stats_reader', '-v', 'ON_ERROR_STOP=1' ]);
is("$rc $out", "0 $odd_rows",
	'and the same rows for a role granted SELECT on it without USAGE on its schema') or diag($err);
$coord->safe_psql('postgres', q{DROP SCHEMA "we'ird ""s" CASCADE});

# ---- text and uuid client ids: routed, and hashed as on one node ----
my $t = $on2[0];
is($coord->safe_psql('postgres', qq{
	SELECT idempotent_increment('likes', '$t', 'client-x'::text, 1, 1);
	SELECT idempotent_increment('likes', '$t', '8c6f1b2e-4d0e-4a7b-9b8e-2f1d3c4b5a69'::uuid, 1, 1);}),
	"t\nt", 'text and uuid client ids applied through the coordinator');
is($w1->safe_psql('postgres', qq{
	SELECT idempotent_increment('likes', '$t', 'client-x'::text, 1, 1);
	SELECT idempotent_increment('likes', '$t', '8c6f1b2e-4d0e-4a7b-9b8e-2f1d3c4b5a69'::uuid, 1, 1);
	SELECT idempotent_increment('likes', '$t', ARRAY['client-y', 'client-x', 'client-y'], ARRAY[1, 1, 1], ARRAY[1, 1, 1]);}),
	"f\nf\n{t,f,f}", 'retried through a worker: dismissed; a batch answers in its arrays\' order');
is(value($t), 3, 'the key counts each once');
my $tshard_name = $w2->safe_psql('postgres',
	"SELECT shard_name('likes', get_shard_id_for_distribution_column('likes', '$t'))");
is($w2->safe_psql('postgres', qq{
	SELECT fbf_contains(s, fbf_operation('$t', 'client-x'::text, 1))::text
		|| fbf_contains(s, fbf_operation('$t', '8c6f1b2e-4d0e-4a7b-9b8e-2f1d3c4b5a69'::uuid, 1))::text
		|| fbf_contains(s, fbf_operation('$t', 'client-z'::text, 1))::text
	  FROM fbf_snapshot('$tshard_name') s}),
	'truetruefalse', 'the shard\'s window holds the identities fbf_operation names, as a single node\'s');

# ---- the placement function is no back door ----
# fbf_apply_on_placement runs as the calling user on the shard's node (it
# is what the routed statement calls), so anyone may call it there: it must
# grant no more than idempotent_increment on the shard.  Tenants limited by
# row security to their own key share a shard; tenant_a tries to make an
# operation of tenant_b's be dismissed before tenant_b sends it.
$coord->safe_psql('postgres', q{
	CREATE ROLE tenant_a LOGIN;
	CREATE ROLE tenant_b LOGIN;
	CREATE ROLE outsider LOGIN;
	SELECT fbf_create_counter_table('tenants', retention => '10 min', target_fpp => 1e-9);
	SELECT fbf_distribute_counter('tenants');
	GRANT SELECT, INSERT, UPDATE ON tenants TO tenant_a, tenant_b;
	ALTER TABLE tenants ENABLE ROW LEVEL SECURITY;
	CREATE POLICY own_b ON tenants TO tenant_b USING (key = 'tenant-b') WITH CHECK (key = 'tenant-b');
});
# tenant_a's key: one on tenant-b's shard
my $akey = $coord->safe_psql('postgres', q{
	SELECT k FROM generate_series(1, 10000) i, LATERAL (SELECT 'tenant-a-' || i AS k) s
	 WHERE get_shard_id_for_distribution_column('tenants', k) =
		   get_shard_id_for_distribution_column('tenants', 'tenant-b')
	 LIMIT 1});
$coord->safe_psql('postgres',
	"CREATE POLICY own_a ON tenants TO tenant_a USING (key = '$akey') WITH CHECK (key = '$akey')");
my ($tshard, $tport) = split /\|/, $coord->safe_psql('postgres', q{
	SELECT shard_name('tenants', p.shardid), n.nodeport
	  FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
	 WHERE p.shardid = get_shard_id_for_distribution_column('tenants', 'tenant-b')});
my $tnode = $tport == $w1->port ? $w1 : $w2;

# as `role` on `node`: (rc, stdout, stderr with SQLSTATEs)
sub as_role
{
	my ($node, $role, $sql) = @_;
	return $node->psql('postgres', $sql,
		extra_params => [ '-U', $role, '-v', 'VERBOSITY=verbose' ]);
}

# does the shard's window hold tenant-b's operation (client 9, seq `seq`)?
sub b_remembered
{
	my ($seq) = @_;
	return $tnode->safe_psql('postgres',
		"SELECT fbf_contains(fbf_snapshot('$tshard'), fbf_operation('tenant-b', 9::bigint, $seq))");
}

($rc, $out) = as_role($coord, 'tenant_a',
	"SELECT idempotent_increment('tenants', '$akey', 1, 1, 1)");
is($out, 't', 'tenant_a increments its own key through the coordinator');
($rc, $out, $err) = as_role($coord, 'tenant_a',
	"SELECT idempotent_increment('tenants', 'tenant-b', 9, 1, 1)");
like($err, qr/42501/, 'tenant_a may not increment tenant-b (row security, 42501)');

# the operation hash of (tenant-b, 9, 1): XXH3-128 (seed "fbf_seed") of
# fbf_operation('tenant-b', 9::bigint, 1), as the window stores it; the
# placement function once took such hashes from its caller
($rc, $out, $err) = as_role($tnode, 'tenant_a', qq{
	SELECT fbf_apply_on_placement('tenants', '$akey',
		ARRAY[4534961567256300981, -3424408656471563744]::bigint[], NULL::bigint[],
		ARRAY[0]::bigint[], false)});
isnt($rc, 0, 'the placement function takes no operation hashes from its caller');
($rc, $out, $err) = as_role($tnode, 'tenant_a', q{
	SELECT fbf_apply_on_placement('tenants', 'tenant-b', ARRAY[9]::bigint[],
		ARRAY[1]::bigint[], ARRAY[0]::bigint[], false)});
like($err, qr/42501/, 'nor an operation on a key its caller may not update (row security, 42501)');
is(b_remembered(1), 'f', 'tenant-b\'s operation is not recorded on the shard');
($rc, $out, $err) = as_role($tnode, 'tenant_a', qq{
	SELECT (fbf_apply_on_placement('tenants', '$akey', ARRAY[9]::bigint[],
		ARRAY[2]::bigint[], ARRAY[1]::bigint[], false)).applied});
is($out, '{t}', 'an identity under its own key is its caller\'s own operation');
is(b_remembered(2), 'f', 'and not tenant-b\'s');
($rc, $out) = as_role($coord, 'tenant_b', q{
	SELECT idempotent_increment('tenants', 'tenant-b', 9, 1, 1);
	SELECT idempotent_increment('tenants', 'tenant-b', 9, 2, 1);});
is($out, "t\nt", 'tenant-b\'s operations apply when it sends them');
is($coord->safe_psql('postgres', "SELECT fbf_counter_value('tenants', 'tenant-b') || ' ' || fbf_counter_value('tenants', '$akey')"),
	'2 2', 'values of both tenants');
($rc, $out) = as_role($coord, 'tenant_b', q{
	SELECT idempotent_increment('tenants', 'tenant-b', 9, 1, 1)});
is($out, 'f', 'and are remembered: a retry is dismissed');

# the placement function's own checks, on the shard's node
($rc, $out, $err) = as_role($tnode, 'outsider', q{
	SELECT fbf_apply_on_placement('tenants', 'tenant-b', ARRAY[9]::bigint[],
		ARRAY[3]::bigint[], ARRAY[1]::bigint[], false)});
like($err, qr/42501: permission denied for table tenants/, 'a caller without UPDATE on the counter: 42501');
$coord->safe_psql('postgres', q{
	CREATE TABLE not_counter (key text, shard integer, value bigint, PRIMARY KEY (key, shard));
	SELECT create_distributed_table('not_counter', 'key', colocate_with => 'tenants');
	SELECT fbf_create_counter_table('local_counter');});
($rc, $out, $err) = $tnode->psql('postgres', q{
	SELECT fbf_apply_on_placement('not_counter', 'tenant-b', ARRAY[9]::bigint[],
		ARRAY[3]::bigint[], ARRAY[1]::bigint[], false)},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/42809: "not_counter" is not a counter table/, 'a distributed table that is no counter: 42809');
($rc, $out, $err) = $tnode->psql('postgres', qq{
	SELECT fbf_apply_on_placement('$tshard', 'tenant-b', ARRAY[9]::bigint[],
		ARRAY[3]::bigint[], ARRAY[1]::bigint[], false)},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/42809: "$tshard" is not a counter distributed by Citus/, 'a shard table: 42809 (its front door is idempotent_increment)');
($rc, $out, $err) = $coord->psql('postgres', q{
	SELECT fbf_apply_on_placement('local_counter', '', ARRAY[9]::bigint[],
		ARRAY[3]::bigint[], ARRAY[1]::bigint[], false)},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/42809: "local_counter" is not a counter distributed by Citus/, 'a counter not distributed: 42809');
($rc, $out, $err) = $tnode->psql('postgres', q{
	SELECT fbf_apply_on_placement('tenants', 'tenant-b', ARRAY[9, 9]::bigint[],
		ARRAY[3]::bigint[], ARRAY[1]::bigint[], false)},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/2202E/, 'arrays of different lengths: 2202E');
is(b_remembered(3), 'f', 'none of these recorded anything');
is($tnode->safe_psql('postgres', qq{
	SELECT applied, dismissed FROM fbf_counter_stats WHERE counter = '$tshard'::regclass}),
	'4|1', 'fbf_counter_stats on the shard\'s node lists the shard\'s window: both tenants\' operations');

# ---- two-phase commit over both workers ----
my ($a, $b) = ($on1[1], $on2[1]);
($rc, $out, $err) = $coord->psql('postgres', qq{
	SET citus.log_remote_commands = on;
	SET client_min_messages = log;
	BEGIN;
	SELECT idempotent_increment('likes', '$a', 2, 1, 1);
	SELECT idempotent_increment('likes', '$b', 2, 1, 1);
	COMMIT;});
is($rc, 0, 'a transaction over both workers commits') or diag($err);
my $prepares = () = $err =~ /issuing PREPARE TRANSACTION/g;
is($prepares, 2, 'with PREPARE TRANSACTION on both workers');
is(incr($coord, $a, 2, 1) . incr($w2, $b, 2, 1), 'ff', 'its operations are remembered');
($rc, $out, $err) = $coord->psql('postgres', qq{
	BEGIN;
	SELECT idempotent_increment('likes', '$a', 2, 2, 1);
	SELECT idempotent_increment('likes', '$b', 2, 2, 1);
	ROLLBACK;});
is(incr($w1, $a, 2, 2) . incr($coord, $b, 2, 2), 'tt', 'a rolled back one forgets them on both');
is(value($a) . value($b), '22', 'values after commit and rollback');

# ---- the fast path: the client's statement is the routed statement ----
# A statement that is one call of idempotent_increment (single, outcome or
# batch) on a distributed counter is handed to Citus as the routed statement
# itself: in autocommit, one statement on the placement and no transaction
# block; the same answers as the function route, which a statement with
# anything else in it still takes.
# a key of worker2 that nothing above used
my ($f) = grep { node_of($_) == 2 } map { "fast$_" } 1 .. 50;
my ($issued);
($rc, $out, $err, $issued) = fbf_citus_sent($coord, "SELECT idempotent_increment('likes', '$f', 40, 1, 5)");
is($out, 't', 'fast path: applied');
is(scalar(@$issued), 1, 'fast path: one statement sent in autocommit') or diag(join "\n", @$issued);
like($issued->[0] // '', qr/^WITH touch AS \(UPDATE public\.likes_\d+ likes .*fbf_increment_on_placement\(/,
	'fast path: the routed statement, on the key\'s shard');
unlike(join("\n", @$issued), qr/BEGIN|assign_distributed_transaction_id|COMMIT/,
	'fast path: no transaction block on the placement');
($rc, $out, $err, $issued) = fbf_citus_sent($coord, "SELECT idempotent_increment('likes', '$f', 40, 1, 5)");
is($out, 'f', 'fast path: its retry is dismissed');
($rc, $out, $err, $issued) = fbf_citus_sent($coord,
	"SELECT idempotent_increment_outcome('likes', '$f', 40, 2, 5) AS o");
is($out, '(t,10)', 'fast path: the outcome form, with the key\'s value');
like($err, qr/\bAS o\b/, 'fast path: the target keeps the client\'s name');
($rc, $out, $err, $issued) = fbf_citus_sent($coord, qq{
	SELECT idempotent_increment('likes', '$f', ARRAY[40, 40, 41, 41]::bigint[],
		ARRAY[2, 3, 3, 3]::bigint[], ARRAY[5, 5, 5, 5]::bigint[])});
is($out, '{f,t,t,f}', 'fast path: a batch, its answers in its order');
is(scalar(@$issued), 1, 'fast path: a batch is one statement');
($rc, $out, $err, $issued) = fbf_citus_sent($coord,
	"SELECT idempotent_increment('likes', 42::bigint, 1, 7)");
is($out, 't', 'fast path: the keyless form, on the default key');
is(value(''), '7', 'its value');
is(value($f), '20', 'the key\'s value after the fast path\'s operations');
($rc, $out, $err, $issued) = fbf_citus_sent($coord,
	"SELECT idempotent_increment('likes', NULL, 40, 9, 1)");
like($err, qr/22004: key of idempotent_increment must not be null/, 'fast path: a NULL key is refused as the front end refuses it (22004)');
($rc, $out, $err, $issued) = fbf_citus_sent($coord,
	"SELECT idempotent_increment_outcome('likes', '$f', 40, NULL, 1)");
like($err, qr/22004: seq of idempotent_increment_outcome must not be null/, 'fast path: a NULL seq too (22004)');
# an argument that is not immutable, in a statement sent on its own: its
# plan may be made again by the plan cache and reused, so the function route
# (which evaluates the arguments at each execution)
($rc, $out, $err, $issued) = fbf_citus_sent($coord,
	"SELECT idempotent_increment('likes', '$f', 40, 4 + 0 * extract(epoch FROM now())::bigint, 5)");
is($out, 't', 'with a mutable argument: applied');
like(join("\n", @$issued), qr/fbf_apply_on_placement/, 'through the function route');
$coord->safe_psql('postgres', 'CREATE SEQUENCE fast_seq; CREATE SEQUENCE fast_seq2; CREATE SEQUENCE fast_seq3; CREATE SEQUENCE fast_seq4');
($rc, $out, $err, $issued) = fbf_citus_sent($coord,
	"SELECT idempotent_increment('likes', 'fastvol', 41, nextval('fast_seq'), 1)");
is($out, 't', 'a volatile seq: applied') or diag($err);
is($coord->safe_psql('postgres', 'SELECT last_value FROM fast_seq'), '1', 'evaluated once');
# in a custom plan (a prepared statement with parameters: the plan cache
# makes one per execution and drops it), an argument that is not immutable
# is evaluated once, here, in the client's session, and the fast path
# sends its value: a key made with a parameter cast to a number (textanycat,
# stable) and a volatile seq, ten executions
{
	local $ENV{PGOPTIONS} = '-c citus.log_remote_commands=on -c client_min_messages=log';
	($rc, $out, $err) = prepared_script('fastcustom',
		"SELECT idempotent_increment('likes', 'fastp' || :client_id::int, 44, nextval('fast_seq4'), 1);\n", 10);
}
is($rc, 0, 'a prepared statement with a stable key and a volatile seq runs') or diag($err);
is(value('fastp0'), '10', 'each of its 10 executions applied, with a seq of its own');
is($coord->safe_psql('postgres', 'SELECT last_value FROM fast_seq4'), '10',
	'its volatile argument evaluated once per execution');
my $fast_sent = () = $err =~ /issuing WITH touch AS .*fbf_increment_on_placement\('public\.likes'::regclass, 'fastp0'::text,/g;
is($fast_sent, 10, 'each execution on the fast path, the key evaluated here')
	or diag($err);
unlike($err, qr/fbf_outside_transaction_block/,
	'with a volatile argument, never the statement that commits on its own');
# without a volatile argument, each execution of a custom plan in
# autocommit is the statement that commits on its own: a read of the key's
# shard, grouped to one row, no transaction block
{
	local $ENV{PGOPTIONS} = '-c citus.log_remote_commands=on -c client_min_messages=log';
	($rc, $out, $err) = prepared_script('fastalone',
		"\\set n :n + 1\nSELECT idempotent_increment('likes', 'fasta' || :client_id::int, 44, :n, 1);\n", 10);
}
is($rc, 0, 'a prepared statement with a stable key runs') or diag($err);
is(value('fasta0'), '10', 'each of its 10 executions applied');
$fast_sent = () = $err =~ /issuing SELECT public\.fbf_increment_on_placement\(public\.fbf_outside_transaction_block\('public\.likes'::regclass\), 'fasta0'::text, .* FROM public\.likes_\d+ likes WHERE .* GROUP BY \(\)$/mg;
is($fast_sent, 10, 'each execution as the statement that commits on its own') or diag($err);
unlike($err, qr/issuing (?:BEGIN|WITH touch)/, 'in autocommit: no transaction block, no data-modifying CTE');
# on the shard's node, that statement is planned as its call alone: the
# scan of the shard, which reads nothing, is not planned (its window index
# is not opened; fbf's own look at the table opens its primary key), while
# the statement still locks the shard table
my ($ka) = grep { node_of($_) == 1 } map { "plan$_" } 1 .. 50;
my $ka_shard = $w1->safe_psql('postgres',
	"SELECT shard_name('likes', get_shard_id_for_distribution_column('likes', '$ka'))");
my $placed_sql = "SELECT public.fbf_increment_on_placement(public.fbf_outside_transaction_block('public.likes'::regclass), "
  . "'$ka'::text, 46::bigint, 1::bigint, 1::bigint) FROM $ka_shard likes "
  . "WHERE key OPERATOR(pg_catalog.=) '$ka'::text AND shard OPERATOR(pg_catalog.<) 0 GROUP BY ()";
my $placed_locks = sub {
	my ($sql) = @_;
	return $w1->safe_psql('postgres', qq{
		BEGIN;
		EXPLAIN $sql;
		SELECT count(*) FILTER (WHERE i.indexrelid IS NOT NULL) || '/' || count(*) FILTER (WHERE l.relation = '$ka_shard'::regclass)
		  FROM pg_locks l LEFT JOIN pg_index i ON i.indexrelid = l.relation AND i.indrelid = '$ka_shard'::regclass
		   AND NOT i.indisprimary
		 WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation';
		COMMIT;});
};
is((split /\n/, $placed_locks->($placed_sql))[-1], '0/1',
	'on the placement, the statement that commits on its own is planned without its scan: its window index not opened, the shard locked');
like((split /\n/, $placed_locks->($placed_sql =~ s/ GROUP BY/ AND random() < 2 GROUP BY/r))[-1], qr{^[1-9]\d*/1$},
	'with a volatile qual, planned as written: the indexes opened to plan the scan');
is($w1->safe_psql('postgres', $placed_sql), 't', 'run on the placement, it applies the operation');
is(value($ka), '1', 'once');
# the same prepared statement in transaction blocks over both workers: the
# routed statement that joins the distributed transaction, committed with
# two-phase commit; fbf_outside_transaction_block never sent
my ($pa) = grep { node_of($_) == 1 } map { "blk$_" } 1 .. 50;
my ($pb) = grep { node_of($_) == 2 } map { "blk$_" } 1 .. 50;
{
	local $ENV{PGOPTIONS} = '-c citus.log_remote_commands=on -c client_min_messages=log';
	($rc, $out, $err) = prepared_script('fastblock', <<"EOS", 3);
\\set n :n + 1
BEGIN;
SELECT idempotent_increment('likes', '$pa', 45, :n, 1);
SELECT idempotent_increment('likes', '$pb', 45, :n, 1);
COMMIT;
EOS
}
is($rc, 0, 'a prepared statement in transaction blocks over both workers runs') or diag($err);
my $touch_sent = () = $err =~ /issuing WITH touch AS \(UPDATE public\.likes_\d+ likes /g;
is($touch_sent, 6, 'in a transaction block, the routed statement that joins the distributed transaction') or diag($err);
$prepares = () = $err =~ /issuing PREPARE TRANSACTION/g;
is($prepares, 6, 'committed with PREPARE TRANSACTION on both workers, each time');
unlike($err, qr/fbf_outside_transaction_block/, 'never the statement that commits on its own');
# on a placement, inside a transaction block, the statement that commits
# on its own is refused before it applies anything (a portal bound outside
# a transaction block and executed inside one)
($rc, $out, $err) = $w1->psql('postgres', q{
	BEGIN;
	SELECT fbf_outside_transaction_block('likes');},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/25001: this statement was planned to commit on its own, and runs inside a transaction block/,
	'fbf_outside_transaction_block inside a transaction block: 25001');
is($w1->safe_psql('postgres', q{SELECT fbf_outside_transaction_block('likes')}), 'likes',
	'outside one: the table');
# a pipeline (statements sent before a Sync share one transaction, outside
# any transaction block): after a first statement that keeps a distributed
# transaction open (a call with something else in it takes the function
# route), a prepared call is sent as the routed statement that joins it
my ($qa) = grep { node_of($_) == 1 } map { "pipe$_" } 1 .. 50;
my ($qb) = grep { node_of($_) == 2 } map { "pipe$_" } 1 .. 50;
{
	local $ENV{PGOPTIONS} = '-c citus.log_remote_commands=on -c client_min_messages=log';
	($rc, $out, $err) = prepared_script('fastpipe', <<"EOS", 3);
\\set n :n + 1
\\startpipeline
SELECT idempotent_increment('likes', '$qa', 46, :n, 1) AS a, 1 AS b;
SELECT idempotent_increment('likes', '$qb', 46, :n, 1);
\\endpipeline
EOS
}
is($rc, 0, 'a pipeline: a prepared call after a distributed statement runs') or diag($err);
is(value($qa) . value($qb), '33', 'a pipeline: every call applied');
unlike($err, qr/fbf_outside_transaction_block/, 'a pipeline: after its first statement, never the statement that commits on its own');
# a pipeline whose first statement is the call: it commits on its own
{
	local $ENV{PGOPTIONS} = '-c citus.log_remote_commands=on -c client_min_messages=log';
	($rc, $out, $err) = prepared_script('fastpipe2', <<"EOS", 3);
\\set n :n + 1
\\startpipeline
SELECT idempotent_increment('likes', '$qb', 47, :n, 1);
SELECT idempotent_increment('likes', '$qa', 47, :n, 1);
\\endpipeline
EOS
}
is($rc, 0, 'a pipeline whose first statement is a call runs') or diag($err);
is(value($qa) . value($qb), '66', 'every call applied');
my $alone_sent = () = $err =~ /issuing SELECT public\.fbf_increment_on_placement\(public\.fbf_outside_transaction_block/g;
my $joined_sent = () = $err =~ /issuing WITH touch/g;
is("$alone_sent/$joined_sent", '3/3', 'the first call of each pipeline commits on its own, the second joins')
	or diag($err);
unlike($err, qr/issuing .*(?:fbf_apply_on_placement|nextval)/,
	'never the function route, never the function sent');
# a plan that may run again keeps the function route: a prepared statement
# without parameters (its plan is made once, and reused), through the
# protocol and in SQL
($rc, $out, $err) = prepared_script('fastvol',
	"SELECT idempotent_increment('likes', 'fastvol2', 41, nextval('fast_seq2'), 1);\n", 10);
is($rc, 0, 'a prepared statement with a volatile argument runs') or diag($err);
is(value('fastvol2'), '10', 'each of its 10 executions applied, with a seq of its own');
($rc, $out, $err) = $coord->psql('postgres', q{
	PREPARE fastvol AS SELECT idempotent_increment('likes', 'fastvol3', 41, nextval('fast_seq3'), 1);
	EXECUTE fastvol;
	EXECUTE fastvol;});
is($out, "t\nt", 'EXECUTE of a PREPARE with a volatile argument, twice: applied twice') or diag($err);
is(value('fastvol3'), '2', 'its value');
# an argument's function that runs an increment of its own, in a custom
# plan: evaluated while the statement is planned, its increment is planned
# inside that planning, and takes the function route
$coord->safe_psql('postgres', q{
	CREATE FUNCTION fast_nested(bigint) RETURNS bigint LANGUAGE plpgsql AS $$
	BEGIN
		PERFORM idempotent_increment('likes', 'fastinner', 43, $1, 1);
		RETURN $1;
	END $$});
{
	local $ENV{PGOPTIONS} = '-c client_min_messages=debug1';
	($rc, $out, $err) = prepared_script('fastnested',
		"SELECT idempotent_increment('likes', 'fastouter' || :client_id, 43, fast_nested(1), 1);\n", 1);
}
is($rc, 0, 'an argument whose function increments: runs') or diag($err);
like($err, qr/this call of idempotent_increment on "likes" takes the function route: it is planned inside another statement/,
	'the inner increment takes the function route');
is(value('fastinner') . value('fastouter0'), '11', 'both applied once');
# the reason a call on a distributed counter keeps the function route, at DEBUG1
($rc, $out, $err) = $coord->psql('postgres', qq{
	SET client_min_messages = debug1;
	DO \$\$BEGIN PERFORM idempotent_increment('likes', '$f', 40, 100, 5); END\$\$});
like($err, qr/fbf: this call of idempotent_increment on "likes" takes the function route: it is planned inside another statement/,
	'DEBUG1 says why a call keeps the function route');
($rc, $out, $err) = $coord->psql('postgres', qq{
	SET client_min_messages = debug1;
	SELECT idempotent_increment('likes', '$f', 40, 101 + 0 * random()::bigint, 5)});
like($err, qr/takes the function route: an argument calls a function that is not immutable, and the plan may run again/,
	'and for a mutable argument outside a custom plan');

# What a plan cache may do to the plans of the fast path: plans made again
# after an invalidation (the plan cache analyzes the statement anew and
# plans it in the same message), the generic plan it tries at the sixth
# execution, force_generic_plan, and calls by a trigger at COMMIT (no portal
# runs them).  Each must apply every operation once.

# A prepared statement without parameters, analyzed anew at Bind after an
# invalidation (here a search_path change; GRANT or ANALYZE on 'likes', a
# shard move, DISCARD PLANS or a sinval reset do the same): the plan cache
# plans the Query it has just analyzed, in the same message, and keeps the
# generic plan.  Were nextval() evaluated into that plan, the executions
# after it would all send one seq, and all but one would be dismissed.
$coord->safe_psql('postgres', 'CREATE SEQUENCE atk_seq1');
my ($arc, $aout, $aerr) = prepared_script('atk1', <<'EOS', 10);
\set n :n + 1
SELECT idempotent_increment('likes', 'atk1', 61, nextval('atk_seq1'), 1);
\if :n = 2
SET search_path = pg_catalog, public;
\endif
EOS
is($arc, 0, 'invalidated, no parameters: runs') or diag($aerr);
is(value('atk1'), '10', 'invalidated, no parameters: each of its 10 executions applied');
is($coord->safe_psql('postgres', 'SELECT last_value FROM atk_seq1'), '10',
	'invalidated, no parameters: its volatile argument is evaluated at each execution');

# A prepared statement with parameters, invalidated just before its sixth
# execution (where the plan cache first builds a generic plan, to cost it,
# from the Query it analyzes anew): its parameters are not bound there, and
# must not be evaluated ("no value found for parameter 1", 42704).
($arc, $aout, $aerr) = prepared_script('atk2', <<'EOS', 8);
\set n :n + 1
SELECT idempotent_increment('likes', 'atk2', 62, :n, 1);
\if :n = 5
SET search_path = pg_catalog, public;
\endif
EOS
is($arc, 0, 'invalidated before the sixth execution: a prepared statement with parameters runs') or diag($aerr);
unlike($aerr, qr/no value found for parameter/, 'invalidated before the sixth execution: no 42704 from the planner hook');
is(value('atk2'), '8', 'invalidated before the sixth execution: 8 applied');

# The same under plan_cache_mode = force_generic_plan, where every
# execution after an invalidation runs such a generic plan: the function
# route ("a generic plan would run with a parameter unbound").
{
	local $ENV{PGOPTIONS} = '-c plan_cache_mode=force_generic_plan';
	($arc, $aout, $aerr) = prepared_script('atk2b', <<'EOS', 4);
\set n :n + 1
SELECT idempotent_increment('likes', 'atk2b', 64, :n, 1);
\if :n = 2
SET search_path = pg_catalog, public;
\endif
EOS
}
is($arc, 0, 'force_generic_plan and an invalidation: runs') or diag($aerr);
is(value('atk2b'), '4', 'force_generic_plan: 4 applied');

# A call planned outside any portal and outside any other planning, but
# not the client's: a deferred constraint trigger fires at COMMIT (no
# portal runs then) and calls a SQL function (not inlined: SECURITY
# DEFINER), whose plan functions.c keeps for the rest of the transaction
# and runs for every row.  Each row's call must draw its own seq.
$coord->safe_psql('postgres', q{
	CREATE SEQUENCE atk_seq3;
	CREATE TABLE atk_rows (a int);
	CREATE FUNCTION atk_bump() RETURNS boolean LANGUAGE sql SECURITY DEFINER
		AS $$ SELECT idempotent_increment('likes', 'atk3', 63, nextval('atk_seq3'), 1) $$;
	CREATE FUNCTION atk_trig() RETURNS trigger LANGUAGE plpgsql AS $$
	DECLARE b boolean;
	BEGIN
		b := atk_bump();
		RETURN NULL;
	END $$;
	CREATE CONSTRAINT TRIGGER atk_tr AFTER INSERT ON atk_rows
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION atk_trig();
});
$coord->safe_psql('postgres', 'INSERT INTO atk_rows VALUES (1), (2), (3)');
is(value('atk3'), '3', 'deferred trigger: its SQL function applies once per row');
is($coord->safe_psql('postgres', 'SELECT last_value FROM atk_seq3'), '3',
	'deferred trigger: its volatile argument is evaluated once per call');

# The same with the key a parameter of the SQL function: its body is
# planned without values for it, and must take the function route (a routed
# statement would carry a parameter Citus cannot route by, and evaluating it
# would fail with 42704).
$coord->safe_psql('postgres', q{
	CREATE TABLE atk_rows_b (a int);
	CREATE FUNCTION atk_bump_k(k text) RETURNS boolean LANGUAGE sql SECURITY DEFINER
		AS $$ SELECT idempotent_increment('likes', k, 65, 1, 1) $$;
	CREATE FUNCTION atk_trig_b() RETURNS trigger LANGUAGE plpgsql AS $$
	DECLARE b boolean;
	BEGIN
		b := atk_bump_k('atk3b_' || NEW.a);
		RETURN NULL;
	END $$;
	CREATE CONSTRAINT TRIGGER atk_tr_b AFTER INSERT ON atk_rows_b
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION atk_trig_b();
});
my ($brc, $bout, $berr) = $coord->psql('postgres', 'INSERT INTO atk_rows_b VALUES (1)',
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
is($brc, 0, 'deferred trigger, a key parameter: COMMIT runs') or diag($berr);
is(value('atk3b_1'), '1', 'deferred trigger, a key parameter: applied');
# so does a call among other things, and one in a DO block
($rc, $out, $err, $issued) = fbf_citus_sent($coord,
	"SELECT idempotent_increment('likes', '$f', 40, g, 5) FROM generate_series(5, 6) g");
is($out, "t\nt", 'a call per row: applied');
like(join("\n", @$issued), qr/fbf_apply_on_placement/, 'through the function route');
($rc, $out, $err, $issued) = fbf_citus_sent($coord,
	"DO \$\$BEGIN PERFORM idempotent_increment('likes', '$f', 40, 7, 5); END\$\$");
is($rc, 0, 'a call in a DO block applies');
like(join("\n", @$issued), qr/fbf_apply_on_placement/, 'through the function route');
is(incr($coord, $f, 40, 4) . incr($coord, $f, 40, 6) . incr($coord, $f, 40, 7), 'fff',
	'both routes remember each other\'s operations');
# through a worker, to a key of the other worker and to one of its own
($rc, $out, $err, $issued) = fbf_citus_sent($w1, "SELECT idempotent_increment('likes', '$f', 40, 8, 5)");
is($out, 't', 'fast path through a worker, to the other worker\'s shard');
($rc, $out, $err, $issued) = fbf_citus_sent($w1, "SELECT idempotent_increment('likes', '$on1[0]', 40, 8, 5)");
is($out, 't', 'fast path through a worker, to its own shard');
is(incr($coord, $f, 40, 8) . incr($w2, $on1[0], 40, 8), 'ff', 'remembered');
# prepared, through a worker (Citus MX): the statement that commits on its
# own, to the other worker's shard (sent) and to its own (executed by
# Citus' local execution, in the client's backend), in autocommit and, the
# same keys, in a transaction block over both (the routed statement that
# joins, committed with two-phase commit)
my ($ma) = grep { node_of($_) == 1 } map { "wmx$_" } 1 .. 50;
my ($mb) = grep { node_of($_) == 2 } map { "wmx$_" } 1 .. 50;
my $mxfile = "${PostgreSQL::Test::Utils::tmp_check}/mx.sql";
open(my $mxfh, '>', $mxfile) or die "$mxfile: $!";
print $mxfh "\\set n :n + 1\nSELECT idempotent_increment('likes', '$ma', 48, :n, 1);\n"
  . "SELECT idempotent_increment('likes', '$mb', 48, :n, 1);\n"
  . "BEGIN;\nSELECT idempotent_increment('likes', '$ma', 49, :n, 1);\n"
  . "SELECT idempotent_increment('likes', '$mb', 49, :n, 1);\nCOMMIT;\n";
close $mxfh;
my ($mo, $me) = ('', '');
{
	local $ENV{PGOPTIONS} = '-c citus.log_remote_commands=on -c citus.log_local_commands=on -c client_min_messages=log';
	IPC::Run::run([ "$bindir/pgbench", '-n', '-M', 'prepared', '-c', 1, '-t', 5, '-D', 'n=0',
		'-h', '127.0.0.1', '-p', $w1->port, '-f', $mxfile, 'postgres' ], '>', \$mo, '2>', \$me);
}
unlike($me, qr/ERROR/, 'prepared through a worker, to both shards, in and out of transaction blocks: no error')
	or diag($me);
is(value($ma) . ' ' . value($mb), '10 10', 'each operation applied once');
my $mx_local = () = $me =~ /executing the command locally: SELECT public\.fbf_increment_on_placement\(public\.fbf_outside_transaction_block/g;
my $mx_remote = () = $me =~ /issuing SELECT public\.fbf_increment_on_placement\(public\.fbf_outside_transaction_block/g;
is("$mx_local/$mx_remote", '5/5', 'in autocommit, the statement that commits on its own: executed locally on its own shard, sent to the other')
	or diag($me);
my $mx_prepares = () = $me =~ /issuing PREPARE TRANSACTION/g;
ok($mx_prepares >= 5, 'the transaction blocks commit with two-phase commit') or diag($me);
is(incr($coord, $ma, 48, 5) . incr($coord, $mb, 49, 5), 'ff', 'their retries through the coordinator are dismissed');
# prepared statements (the extended protocol, pgbench -M prepared): each
# client sends one operation 30 times, past the plan cache's fifth run
my $script = "${PostgreSQL::Test::Utils::tmp_check}/fastpath.sql";
open(my $fh, '>', $script) or die "$script: $!";
print $fh "SELECT idempotent_increment('likes', 'pb' || :client_id, 100 + :client_id, 1, 1);\n";
close $fh;
($out, $err) = ('', '');
my $pgbench = IPC::Run::start([ "$bindir/pgbench", '-n', '-M', 'prepared', '-c', 2, '-t', 30,
		'-h', '127.0.0.1', '-p', $coord->port, '-f', $script, 'postgres' ],
	'>', \$out, '2>', \$err);
$pgbench->finish;
is($pgbench->result(0), 0, 'prepared statements through the fast path run') or diag($err);
is($coord->safe_psql('postgres', q{
	SELECT fbf_counter_value('likes', 'pb0') || ' ' || fbf_counter_value('likes', 'pb1')}),
	'1 1', 'each client\'s operation, sent 30 times as a prepared statement, applied once');
# a caller without UPDATE keeps the front end's own error (no rewrite)
($rc, $out, $err) = as_role($coord, 'outsider', "SELECT idempotent_increment('tenants', 'tenant-b', 9, 5, 1)");
like($err, qr/42501: permission denied for table tenants/, 'fast path: a caller without UPDATE gets 42501');
# the arguments reach the placement as the client's session evaluates them:
# an immutable cast that reads a setting of the session (bytea_output) is
# folded on the node that plans the statement, not evaluated again on the
# placement with its own settings (which would route by one key and apply
# to another, or to none: "not placed on this node")
($rc, $out, $err, $issued) = fbf_citus_sent($coord, q{
	SET bytea_output = escape;
	SELECT idempotent_increment('likes', 'gucbytea'::bytea::text, 50, 1, 1)});
is($out, 't', 'fast path: a key cast with the session\'s bytea_output, applied') or diag($err);
like(join("\n", @$issued), qr/fbf_increment_on_placement\('public\.likes'::regclass, 'gucbytea'::text,/,
	'the placement receives the key the coordinator evaluated');
is(value('gucbytea'), '1', 'on the key the client named');
# a generic plan that runs (plan_cache_mode = force_generic_plan) cannot be
# routed by Citus while a parameter is unbound: the function route
{
	local $ENV{PGOPTIONS} = '-c plan_cache_mode=force_generic_plan';
	($out, $err) = ('', '');
	$pgbench = IPC::Run::start([ "$bindir/pgbench", '-n', '-M', 'prepared', '-c', 2, '-t', 10,
			'-h', '127.0.0.1', '-p', $coord->port, '-f', $script, 'postgres' ],
		'>', \$out, '2>', \$err);
	$pgbench->finish;
}
is($pgbench->result(0), 0, 'prepared statements with force_generic_plan run') or diag($err);
is($coord->safe_psql('postgres', q{
	SELECT fbf_counter_value('likes', 'pb0') || ' ' || fbf_counter_value('likes', 'pb1')}),
	'1 1', 'and their operations stay applied once');

# The key as a parameter of its own, as pgbench and drivers send it: from
# the sixth execution (at once under force_generic_plan) the plan cache
# keeps a generic plan, the statement that commits on its own routed by the
# parameter, which Citus prunes when it runs; the coordinator checks and
# locks when it starts to run it.  The same prepared statements in a
# transaction block and later in a pipeline are planned again when they
# start, as the routed statement that joins the transaction.
my $gscript = <<'EOS';
\set n :n + 1
\set gk 900001
SELECT idempotent_increment('likes', :gk, 72, :n, 1);
BEGIN;
SELECT idempotent_increment('likes', :gk, 73, :n, 1);
COMMIT;
\startpipeline
SELECT idempotent_increment('likes', :gk, 74, :n, 1);
SELECT idempotent_increment('likes', :gk, 75, :n, 1);
\endpipeline
EOS
{
	local $ENV{PGOPTIONS} = '-c client_min_messages=debug2';
	($arc, $aout, $aerr) = prepared_script('generic', $gscript, 12);
}
is($arc, 0, 'a key parameter, past the fifth execution, in and out of transaction blocks and pipelines: runs')
	or diag($aerr);
unlike($aerr, qr/ERROR/, 'no statement failed') or diag($aerr);
like($aerr, qr/Deferred pruning for a fast-path router query/,
	'the plan cache kept generic plans, which Citus prunes when they run');
is(value('900001'), '48', 'each of the 48 operations applied once');
($arc, $aout, $aerr) = prepared_script('generic', $gscript, 12);
is($arc, 0, 'their retries, through generic plans again: run') or diag($aerr);
is(value('900001'), '48', 'and are all dismissed');
{
	local $ENV{PGOPTIONS} = '-c plan_cache_mode=force_generic_plan';
	($arc, $aout, $aerr) = prepared_script('generic', $gscript =~ s/, 7(\d), :n/, 8$1, :n/gr, 6);
}
is($arc, 0, 'force_generic_plan, a key parameter: runs') or diag($aerr);
is(value('900001'), '72', 'force_generic_plan, a key parameter: each operation applied once');
# That generic plan run from SQL (EXECUTE of the prepared statement, which
# binds NULL where pgbench cannot): under EXPLAIN ANALYZE, where Citus
# would run the read inside a subtransaction on the placement, it is
# planned again as the call; a NULL key is refused as the front end
# refuses it, before Citus prunes by it.
($arc, $aout, $aerr) = prepared_script('generic_null', <<'EOS', 8);
\set n :n + 1
\set gk 900002
SELECT idempotent_increment('likes', :gk, 76, :n, 1);
\if :n = 7
EXPLAIN (ANALYZE, COSTS OFF) EXECUTE "P_0"('900003', 1000);
\endif
\if :n = 8
EXECUTE "P_0"(NULL, 1001);
\endif
EOS
isnt($arc, 0, 'a NULL key bound to the generic plan: refused');
like($aerr, qr/key of idempotent_increment must not be null/, 'with the front end\'s error') or diag($aerr);
is(value('900002'), '8', 'and nothing else applied or lost');
is(value('900003'), '1', 'EXPLAIN ANALYZE of the generic plan applies its operation once');
# run by another statement (SQL's EXECUTE in a DO block, in autocommit),
# it is planned again as its call, and rolls back with that statement
($arc, $aout, $aerr) = prepared_script('generic_nested', <<'EOS', 7);
\set n :n + 1
\set gk 900004
SELECT idempotent_increment('likes', :gk, 77, :n, 1);
\if :n = 7
DO $$BEGIN EXECUTE 'EXECUTE "P_0"(''900005'', 1)'; RAISE EXCEPTION 'rolled back'; END$$;
\endif
EOS
like($aerr, qr/rolled back/, 'the generic plan run inside a DO block that fails: the block fails') or diag($aerr);
is(value('900004') . ' ' . value('900005'), '7 0', 'and its operation is rolled back with it');
# in a read-only transaction it gets the front end's own error, as a
# custom plan does
($arc, $aout, $aerr) = prepared_script('generic_readonly', <<'EOS', 7);
\set n :n + 1
\set gk 900006
\if :n = 7
SET default_transaction_read_only = on;
\endif
SELECT idempotent_increment('likes', :gk, 78, :n, 1);
EOS
like($aerr, qr/cannot execute idempotent_increment\(\) in a read-only transaction/,
	'the generic plan in a read-only transaction: the front end\'s error') or diag($aerr);
is(value('900006'), '6', 'and nothing applied');
# a prepared call that names its arguments, in another order: each
# execution applies its own operation (custom plans take the arguments in
# their parameters' positions), and its retries are dismissed
my $named = <<'EOS';
\set n :n + 1
\set gk 900007
SELECT idempotent_increment('likes', :gk, seq => :n, delta => 1, client_id => 79);
EOS
($arc, $aout, $aerr) = prepared_script('named', $named, 7);
is($arc, 0, 'a prepared call with named arguments runs') or diag($aerr);
is(value('900007'), '7', 'each of its operations applied once');
($arc, $aout, $aerr) = prepared_script('named', $named, 7);
is(value('900007'), '7', 'and its retries dismissed');
# a read-only transaction gets the front end's own error
($rc, $out, $err) = $coord->psql('postgres', qq{
	SET default_transaction_read_only = on;
	SELECT idempotent_increment('likes', '$f', 40, 99, 1)});
like($err, qr/cannot execute idempotent_increment\(\) in a read-only transaction/,
	'fast path: a read-only transaction gets the front end\'s error');
# a 1.4 library on an extension not yet updated (no twins, no
# fbf_routing_key): the function route, not an error
$coord->safe_psql('postgres', 'ALTER FUNCTION fbf_routing_key(text, text) RENAME TO fbf_routing_key_away');
($rc, $out, $err, $issued) = fbf_citus_sent($coord, "SELECT idempotent_increment('likes', '$f', 40, 99, 1)");
$coord->safe_psql('postgres', 'ALTER FUNCTION fbf_routing_key_away(text, text) RENAME TO fbf_routing_key');
is($out, 't', 'without the 1.4 functions: applied') or diag($err);
like(join("\n", @$issued), qr/fbf_apply_on_placement/, 'through the function route');

# ---- a worker crash between PREPARE and COMMIT PREPARED ----
# The increment is prepared on worker2 as Citus' two-phase commit prepares
# it, under a name Citus' recovery knows (citus_<coordinator group>_...); a
# record in pg_dist_transaction says the distributed transaction committed
# (for $c1) or there is none (for $c2, as when the coordinator failed
# before its commit).
my ($c1, $c2) = ($on2[2], $on2[3]);
for my $case ([ $c1, 'citus_0_999901_900000001_1' ], [ $c2, 'citus_0_999902_900000002_1' ])
{
	my ($key, $gid) = @$case;
	# on the shard table, as the routed call applies it there (Citus
	# refuses a user's PREPARE TRANSACTION in its coordinated transactions)
	my $shard = $w2->safe_psql('postgres',
		"SELECT shard_name('likes', get_shard_id_for_distribution_column('likes', '$key'))");
	($rc, $out, $err) = $w2->psql('postgres', qq{
		BEGIN;
		SELECT idempotent_increment('$shard', '$key', 3, 1, 1);
		PREPARE TRANSACTION '$gid';});
	is($rc, 0, "an increment prepared on worker2 ($gid)") or diag($err);
}
$coord->safe_psql('postgres', sprintf(q{
	INSERT INTO pg_dist_transaction (groupid, gid)
	SELECT groupid, 'citus_0_999901_900000001_1' FROM pg_dist_node WHERE nodeport = %d}, $w2->port));
$w2->stop('immediate');
$w2->start;
is($w2->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), 2,
	'both prepared transactions survive the crash');
($rc, $out, $err) = $coord->psql('postgres', qq{
	SET statement_timeout = '1s';
	SELECT idempotent_increment('likes', '$c1', 3, 1, 1);});
like($err, qr/statement timeout|canceling statement/,
	'a duplicate of a prepared operation waits for it (after the restart)');
is($coord->safe_psql('postgres', 'SELECT recover_prepared_transactions()'), 2,
	'Citus recovers both');
is(incr($coord, $c1, 3, 1), 'f', 'the committed one is remembered: its retry is dismissed');
is(incr($coord, $c2, 3, 1), 't', 'the rolled back one is forgotten: its retry applies');
is(value($c1) . value($c2), '11', 'values after recovery');

# ---- retry storms through the coordinator ----
my $storm = "$ENV{FBF_RETRY_STORM}";
SKIP:
{
	skip 'FBF_RETRY_STORM names no retry_storm binary', 5 unless -x $storm;
	my $conninfo = sprintf('host=127.0.0.1 port=%d dbname=postgres', $coord->port);

	($out, $err) = ('', '');
	my $h = IPC::Run::start([ $storm, '-d', $conninfo, '-c', 4, '-n', 300, '-p', 0.15,
			'-s', 11, '-k', 64, '-D' ], '>', \$out, '2>', \$err);
	$h->finish;
	is($h->result(0), 0, 'retry storm through the coordinator: exact') or diag("$out\n$err");
	note($out);

	($out, $err) = ('', '');
	$coord->safe_psql('postgres', 'DROP TABLE storm_plain, storm_fbf');
	$h = IPC::Run::start([ $storm, '-d', $conninfo, '-c', 4, '-n', 500, '-p', 0.15,
			'-s', 12, '-k', 64, '-D' ], '>', \$out, '2>', \$err);
	# once the storm is under way (its setup recreates the tables)
	for (my $i = 0; $i < 300; $i++)
	{
		my ($r, $sum) = $coord->psql('postgres', q{
			SELECT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid::text = 'storm_fbf')});
		($r, $sum) = $coord->psql('postgres', 'SELECT sum(value) FROM storm_fbf')
		  if $r == 0 && $sum eq 't';
		last if $r == 0 && $sum ne '' && $sum ne 't' && $sum > 200;
		usleep(100_000);
	}
	ok($h->pumpable, 'the storm is under way when worker1 stops');
	$w1->stop('immediate');
	usleep(500_000);
	$w1->start;
	$h->finish;
	is($h->result(0), 0, 'retry storm with worker1 crashed and restarted mid-run: exact')
	  or diag("$out\n$err");
	like($out, qr/(\d+) other errors/, 'the storm saw the crash');
	note($out);
	$out =~ /(\d+) other errors/;
	cmp_ok($1, '>', 0, 'requests failed while worker1 was down, and were retried');
}

# ---- every shard holds what Citus routes to it ----
# The nodes find a routing value's shard from a map of the table's shards
# they keep (citus_shards.c), not by asking Citus: a map that disagreed
# with Citus would apply an increment in another shard of the node Citus
# sent it to (or refuse it, 55000), and record a claim in another shard's
# window.  Seven shards (uniform ranges, not a power of two), one split at
# a point of its own (ranges no longer uniform); keys incremented through
# the coordinator and through a worker (each node finds the shard where
# it routes the call and where it applies it) by sessions held across a
# second split, which must forget the maps they read before it.
$coord->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('mapped', retention => '10 min');
	SELECT fbf_distribute_counter('mapped', shard_count => 7, colocate_with => 'none');
	SELECT fbf_create_dedup('mapped_ids', retention => '10 min');
	SELECT fbf_distribute_dedup('mapped_ids', shard_count => 7, colocate_with => 'none');});

# a shard of `table` and its node, and the other worker's port
sub placed_shard
{
	my ($table, $nth) = @_;
	my ($shard, $port) = split /\|/, $coord->safe_psql('postgres', qq{
		SELECT s.shardid, n.nodeport
		  FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
		  JOIN pg_dist_node n USING (groupid)
		 WHERE s.logicalrelid = '$table'::regclass ORDER BY s.shardminvalue::int OFFSET $nth LIMIT 1});
	return ($shard, $port, $port == $w1->port ? $w2->port : $w1->port);
}
citus_split_shard($coord, 'mapped', placed_shard('mapped', 2));
citus_split_shard($coord, 'mapped_ids', placed_shard('mapped_ids', 4));

my $mapped_round = sub {
	my ($session, $client, $seq) = @_;
	my $sql = join '', map { "SELECT idempotent_increment('mapped', 'p$_', $client, $seq, 1);\n" } 1 .. 150;
	return scalar(() = $session->query_safe($sql) =~ /^t$/mg);
};
my $via_coord = $coord->background_psql('postgres');
my $via_worker = $w1->background_psql('postgres');
is($mapped_round->($via_coord, 1, 1) + $mapped_round->($via_worker, 2, 1), 300,
	'150 keys incremented through the coordinator and through a worker');
my ($mshards_before, $mshards_after) = citus_split_shard($coord, 'mapped', placed_shard('mapped', 5));
is($mapped_round->($via_coord, 1, 2) + $mapped_round->($via_worker, 2, 2), 300,
	'and again by the same sessions once another shard is split');
$via_coord->quit;
$via_worker->quit;
is("$mshards_before $mshards_after", '8 9', 'the counter has 9 shards after its two splits');

# on each node, the rows of each shard table of mapped placed there whose
# key Citus routes to another shard, and the keys among those `$which`
# (an SQL condition on key) that each shard table holds, summed
sub mapped_placement
{
	my ($which) = @_;
	my ($misplaced, $keys) = (0, 0);

	for my $node ($w1, $w2)
	{
		for my $line (split /\n/, $node->safe_psql('postgres', q{
			SELECT s.shardid || '|' || shard_name('mapped', s.shardid)
			  FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
			 WHERE s.logicalrelid = 'mapped'::regclass
			   AND p.groupid = (SELECT groupid FROM pg_dist_local_group)}))
		{
			my ($shardid, $name) = split /\|/, $line;
			my ($bad, $held) = split /\|/, $node->safe_psql('postgres', qq{
				SELECT count(*) FILTER (WHERE get_shard_id_for_distribution_column('mapped', key) <> $shardid),
					   count(DISTINCT key) FILTER (WHERE $which)
				  FROM $name});
			$misplaced += $bad;
			$keys += $held;
		}
	}
	return "$misplaced $keys";
}
is(mapped_placement('true'), '0 150', 'every key\'s row is in the shard Citus routes it to');
is($coord->safe_psql('postgres', q{SELECT count(DISTINCT key), sum(value) FROM mapped}), '150|600',
	'each key counts its four operations once');

my $claims = join '', map { "SELECT fbf_claim('mapped_ids', $_);\n" } 1 .. 200;
is(scalar(() = $coord->safe_psql('postgres', $claims) =~ /^t$/mg), 200,
	'200 ids claimed through the coordinator');
is($coord->safe_psql('postgres', q{
	SELECT count(*) FROM (
		SELECT shard, claimed FROM fbf_dedup_stats
		 WHERE dedup = 'mapped_ids'::regclass AND claimed > 0
		EXCEPT
		SELECT shard_name('mapped_ids', get_shard_id_for_distribution_column('mapped_ids', fbf_claim_anchor(id::bigint))),
			   count(*)
		  FROM generate_series(1, 200) id GROUP BY 1) wrong}), '0',
	'each shard\'s window holds the claims of the ids Citus routes to it');
is($coord->safe_psql('postgres', q{
	SELECT sum(claimed) FROM fbf_dedup_stats WHERE dedup = 'mapped_ids'::regclass}), '200',
	'and each id is claimed in one shard');

# a transaction on a worker that found a key's shard before another shard
# of the table was split, and takes no new lock of the table after it
# (direct placement calls): the look-up after the split sees it, as
# Citus' own look-up does, instead of naming the shard split away
my $w1_shards = sub {
	return $coord->safe_psql('postgres', sprintf(q{
		SELECT string_agg(s.shardid::text, ',' ORDER BY s.shardid)
		  FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
		  JOIN pg_dist_node n USING (groupid)
		 WHERE s.logicalrelid = 'mapped'::regclass AND n.nodeport = %d}, $w1->port));
};
my @on_w1 = split /,/, $w1_shards->();
my $key_in = sub {
	my ($shards) = @_;
	return $coord->safe_psql('postgres', qq{
		SELECT 'p' || i FROM generate_series(1, 150) i
		 WHERE get_shard_id_for_distribution_column('mapped', 'p' || i) IN ($shards)
		 ORDER BY i LIMIT 1});
};
my ($to_split, $kept) = @on_w1[0, 1];
my $before_key = $key_in->($kept);
my $held = $w1->background_psql('postgres', on_error_stop => 0);
my $place = sub {
	my ($key) = @_;
	return "SELECT (fbf_apply_on_placement('mapped', '$key', ARRAY[7]::bigint[], ARRAY[1]::bigint[], ARRAY[1]::bigint[], false)).applied;";
};
$held->query_safe('BEGIN; ' . $place->($before_key));
citus_split_shard($coord, 'mapped', $to_split, $w1->port, $w2->port);
my %old = map { $_ => 1 } @on_w1;
my $children = join ',', grep { !$old{$_} } split /,/, $w1_shards->();
my $after_key = $key_in->($children);
$held->query_safe('SET client_min_messages = debug2');
my $held_out = $held->query($place->($after_key));
my $held_err = $held->{stderr};
$held->query('COMMIT');
$held->quit;
# (PostgreSQL 16's BackgroundPsql may leave the line's newline on the output)
like($held_out, qr/\A\{t\}\n?\z/,
	'a worker\'s transaction that found a shard before a split finds the new shard after it');
unlike($held_err, qr/ERROR/, 'without an error');
unlike($held_err, qr/shard map of "mapped" declines/,
	'the shard map answered, not Citus\' function');
is($coord->safe_psql('postgres', qq{
	SELECT sum(value) FROM mapped WHERE key IN ('$before_key', '$after_key')}), 4 + 4 + 2,
	'and both its operations count once');

# the same for claims routed through a worker by a prepared statement's
# generic plan, in a transaction held across a split of another shard of
# the dedup table: the worker routes the next claim to the new shard, and
# the new shard's node finds it there
my $ids_on_w1 = sub {
	return split /,/, $coord->safe_psql('postgres', sprintf(q{
		SELECT string_agg(s.shardid::text, ',' ORDER BY s.shardid)
		  FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
		  JOIN pg_dist_node n USING (groupid)
		 WHERE s.logicalrelid = 'mapped_ids'::regclass AND n.nodeport = %d}, $w1->port));
};
my $id_in = sub {
	my ($shards) = @_;
	return $coord->safe_psql('postgres', qq{
		SELECT i FROM generate_series(1001, 5000) i
		 WHERE get_shard_id_for_distribution_column('mapped_ids', fbf_claim_anchor(i::bigint)) IN ($shards)
		 ORDER BY i LIMIT 1});
};
my @ids_w1 = $ids_on_w1->();
my ($ids_split, $ids_kept) = @ids_w1[0, 1];
my $before_id = $id_in->($ids_kept);
my $claimer = $w1->background_psql('postgres', on_error_stop => 0);
$claimer->query_safe(q{SET plan_cache_mode = force_generic_plan;
	PREPARE claim_one(bigint) AS SELECT fbf_claim('mapped_ids', $1)});
my $claimed_before = $claimer->query_safe("BEGIN; EXECUTE claim_one($before_id)");
citus_split_shard($coord, 'mapped_ids', $ids_split, $w1->port, $w2->port);
my %ids_old = map { $_ => 1 } @ids_w1;
my $after_id = $id_in->(join ',', grep { !$ids_old{$_} } $ids_on_w1->());
$claimer->query_safe('SET client_min_messages = debug2');
my $claimed_after = $claimer->query("EXECUTE claim_one($after_id)");
$claimer->query('COMMIT');
my $claimer_err = $claimer->{stderr};
$claimer->quit;
like("$claimed_before $claimed_after", qr/\At\n? t\n?\z/,
	'a worker\'s transaction that claimed an id by a generic plan before a split claims an id of a new shard after it');
unlike($claimer_err, qr/ERROR:/, 'without an error, nor at its commit');
unlike($claimer_err, qr/shard map of "mapped_ids" declines/,
	'the shard map answered, not Citus\' function');
is($coord->safe_psql('postgres', qq{
	SELECT fbf_claim('mapped_ids', $before_id) || ' ' || fbf_claim('mapped_ids', $after_id)}),
	'false false',
	'both claims are remembered where the coordinator routes them: claimed again, each is a duplicate');
# keys and ids at the edges of shards' ranges: a shard split at a key's
# hash, so that the key is its lower half's last value (shardmaxvalue),
# and another at a key's hash less one, so that the key is its upper
# half's first (shardminvalue); the same for two ids' anchors.  Each is
# incremented or claimed through the coordinator and both workers, whose
# maps answer for each (the placement's node finds the shard too), and
# lands in the shard Citus routes it to.
my $edge_point = sub {
	my ($table, $value, $end) = @_;
	my ($shard, $port, $other, $hash, $min, $max) = split /\|/, $coord->safe_psql('postgres', qq{
		SELECT s.shardid, n.nodeport, o.nodeport, worker_hash($value),
			   s.shardminvalue, s.shardmaxvalue
		  FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
		  JOIN pg_dist_node n USING (groupid)
		  JOIN pg_dist_node o ON o.nodeport <> n.nodeport AND o.noderole = 'primary' AND o.groupid <> 0
		 WHERE s.shardid = get_shard_id_for_distribution_column('$table', $value)
		 LIMIT 1});
	# a split point is a value of the range that is not its last
	return () unless $hash > $min && $hash < $max;
	return ($shard, $port, $other, $end eq 'max' ? $hash : $hash - 1);
};
my %edges = (mapped => {}, mapped_ids => {});
for my $case (['mapped', 'max', q{'edge%d'::text}], ['mapped', 'min', q{'edge%d'::text}],
	['mapped_ids', 'max', q{fbf_claim_anchor(%d::bigint)}],
	['mapped_ids', 'min', q{fbf_claim_anchor(%d::bigint)}])
{
	my ($table, $end, $form) = @$case;
	for my $i (7001 .. 7050)
	{
		next if grep { $_ == $i } values %{ $edges{$table} };
		my @split = $edge_point->($table, sprintf($form, $i), $end);
		next unless @split;
		citus_split_shard($coord, $table, @split);
		$edges{$table}{$end} = $i;
		last;
	}
}
is(join(' ', map { defined $_ ? 'set' : 'none' }
		@{ $edges{mapped} }{qw(max min)}, @{ $edges{mapped_ids} }{qw(max min)}),
	'set set set set', 'shards split at two keys\' and two ids\' hashes');
my ($key_max, $key_min) = map { "edge$_" } @{ $edges{mapped} }{qw(max min)};
my ($id_max, $id_min) = @{ $edges{mapped_ids} }{qw(max min)};
is($coord->safe_psql('postgres', qq{
	SELECT string_agg(CASE WHEN h = s.shardmaxvalue::int THEN 'max'
						   WHEN h = s.shardminvalue::int THEN 'min' ELSE 'inside' END, ' ' ORDER BY o)
	  FROM (VALUES (1, worker_hash('$key_max'::text), get_shard_id_for_distribution_column('mapped', '$key_max')),
				   (2, worker_hash('$key_min'::text), get_shard_id_for_distribution_column('mapped', '$key_min')),
				   (3, worker_hash(fbf_claim_anchor(${id_max}::bigint)),
					   get_shard_id_for_distribution_column('mapped_ids', fbf_claim_anchor(${id_max}::bigint))),
				   (4, worker_hash(fbf_claim_anchor(${id_min}::bigint)),
					   get_shard_id_for_distribution_column('mapped_ids', fbf_claim_anchor(${id_min}::bigint))))
			 v(o, h, shardid)
	  JOIN pg_dist_shard s USING (shardid)}), 'max min max min',
	'Citus routes each to the shard whose range it ends or begins');

$coord->safe_psql('postgres', q{
	CREATE TABLE edge_claims_before AS
	SELECT shard, claimed FROM fbf_dedup_stats WHERE dedup = 'mapped_ids'::regclass});
my @edge_answers;
my $edge_errors = '';
my $client = 40;
for my $node ($coord, $w1, $w2)
{
	$client++;
	my ($rc, $out, $err) = $node->psql('postgres', qq{
		SET client_min_messages = debug2;
		SELECT idempotent_increment('mapped', '$key_max', $client, 1, 1);
		SELECT idempotent_increment('mapped', '$key_min', $client, 1, 1);
		SELECT fbf_claim('mapped_ids', $id_max);
		SELECT fbf_claim('mapped_ids', $id_min);});
	push @edge_answers, join ' ', split /\n/, $out;
	$edge_errors .= $err;
}
is(join(' | ', @edge_answers), 't t t t | t t f f | t t f f',
	'through the coordinator and each worker: increments apply once each, the ids are claimed once');
unlike($edge_errors, qr/ERROR:/, 'without an error');
unlike($edge_errors, qr/shard map of "mapped(_ids)?" declines/,
	'the shard maps answered, not Citus\' function');
is($coord->safe_psql('postgres', qq{
	SELECT string_agg(v::text, ' ' ORDER BY key DESC)
	  FROM (SELECT key, sum(value) AS v FROM mapped
			 WHERE key IN ('$key_max', '$key_min') GROUP BY key) k}), '3 3',
	'each edge key counts its three operations, where Citus routes it');
is(mapped_placement("key IN ('$key_max', '$key_min')"), '0 2',
	'each edge key\'s row is in its shard, and nowhere else');
is($coord->safe_psql('postgres', q{
	SELECT string_agg(a.shard || ' +' || (a.claimed - coalesce(b.claimed, 0)), ', ' ORDER BY a.shard)
	  FROM fbf_dedup_stats a LEFT JOIN edge_claims_before b USING (shard)
	 WHERE a.dedup = 'mapped_ids'::regclass AND a.claimed IS DISTINCT FROM b.claimed}),
	$coord->safe_psql('postgres', qq{
	SELECT string_agg(shard || ' +' || n, ', ' ORDER BY shard)
	  FROM (SELECT shard_name('mapped_ids',
						get_shard_id_for_distribution_column('mapped_ids', fbf_claim_anchor(id::bigint))) AS shard,
				   count(*) AS n
			  FROM (VALUES ($id_max), ($id_min)) i(id) GROUP BY 1) s}),
	'the edge ids are claimed in the windows of the shards Citus routes them to, once each');
$coord->safe_psql('postgres', 'DROP TABLE edge_claims_before');
$coord->safe_psql('postgres', 'DROP TABLE mapped, mapped_ids');

# ---- shard moves and splits ----
# (done with the tenants' and the storms' tables: the transfers move only
# the shards of likes and the counter colocated with it)
$coord->safe_psql('postgres', 'DROP TABLE IF EXISTS tenants, not_counter, storm_plain, storm_fbf');
# operations on many keys, then the shard of $m is moved or split and
# every operation is retried
sub apply_all
{
	my ($client, $nkeys) = @_;
	my $sql = '';
	$sql .= "SELECT idempotent_increment('likes', 'm$_', $client, 1, 1);\n"
	  for 1 .. $nkeys;
	return scalar(() = $coord->safe_psql('postgres', $sql) =~ /^t$/mg);
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

is(apply_all(4, 60), 60, 'operations on 60 keys applied');
# a counter on the cuckoo window, colocated: its shards travel with likes'
my $cuckoo_ops = q{
	SELECT count(*) FILTER (WHERE idempotent_increment('clikes', 'm' || k, 9, s, 1))
	FROM generate_series(1, 60) k, generate_series(1, 5) s};
is($coord->safe_psql('postgres', $cuckoo_ops), 300, 'operations on a cuckoo counter applied');
my ($shard, $from, $to) = shard_of('m1');
$coord->safe_psql('postgres', qq{
	SELECT citus_move_shard_placement($shard, '127.0.0.1', $from, '127.0.0.1', $to,
									  shard_transfer_mode => 'block_writes')});
is(apply_all(4, 60), 0, 'after citus_move_shard_placement (block_writes) every retry is dismissed');

is(apply_all(5, 60), 60, 'operations of another client applied');
($shard, $from, $to) = shard_of('m2');
$coord->safe_psql('postgres', qq{
	SELECT citus_move_shard_placement($shard, '127.0.0.1', $from, '127.0.0.1', $to)});
is(apply_all(5, 60), 0,
	'after citus_move_shard_placement (auto: logical replication) every retry is dismissed');

is(apply_all(6, 60), 60, 'operations of a third client applied');
($shard, $from, $to) = shard_of('m3');
my ($nshards, $split_shards) = citus_split_shard($coord, 'likes', $shard, $from, $to);
is($split_shards, $nshards + 1, 'the shard is split in two');
is(apply_all(6, 60) + apply_all(5, 60) + apply_all(4, 60), 0,
	'after citus_split_shard_by_split_points every retry is dismissed');

# the rebalancer: citus_drain_node moves every shard off worker1 (each
# move a command of its own, through a connection of its own), and
# citus_rebalance_start moves about half back in background tasks.  Each
# may take minutes on a loaded machine (5.5 and 5.2 on one, when the
# cluster held some 200 shards; about 1 with likes' 8 and the tables
# before dropped), and the counters forget what is older than their
# retention (10 minutes): so what is retried after the rebalancer was
# applied after the drain.
is(apply_all(7, 60), 60, 'operations of a fourth client applied');
$coord->safe_psql('postgres', sprintf(q{
	SELECT citus_drain_node('127.0.0.1', %d, shard_transfer_mode => 'block_writes')}, $w1->port));
is(citus_shards_on($coord, $w1, 'likes'), '0', 'citus_drain_node moved every shard off worker1');
is(apply_all(7, 60) + apply_all(4, 60), 0, 'after citus_drain_node every retry is dismissed');
is($coord->safe_psql('postgres', $cuckoo_ops), 0,
	'the colocated cuckoo counter dismisses every retry after the same transfers');
is(apply_all(8, 60), 60, 'operations of a fifth client applied');
(my $cuckoo_after = $cuckoo_ops) =~ s/'m' \|\| k, 9,/'m' || k, 10,/;
is($coord->safe_psql('postgres', $cuckoo_after), 300, 'operations of another client on the cuckoo counter applied');
$coord->safe_psql('postgres', sprintf(q{
	SELECT citus_set_node_property('127.0.0.1', %d, 'shouldhaveshards', true)}, $w1->port));
$coord->safe_psql('postgres', q{
	SELECT citus_rebalance_start(shard_transfer_mode => 'block_writes')});
$coord->safe_psql('postgres', q{SELECT citus_rebalance_wait()});
cmp_ok(citus_shards_on($coord, $w1, 'likes'), '>', 0, 'citus_rebalance_start moved shards back to worker1');
is(apply_all(8, 60), 0, 'after the rebalancer\'s background moves every retry is dismissed');
is($coord->safe_psql('postgres', q{SELECT sum(value) FROM likes WHERE key LIKE 'm%'}),
	5 * 60, 'and every key of the moved shards counts each operation once');
is($coord->safe_psql('postgres', $cuckoo_after), 0,
	'the colocated cuckoo counter dismisses every retry after the rebalancer\'s moves');
is($coord->safe_psql('postgres', q{SELECT sum(value) FROM clikes}), 600,
	'and counts each operation once');

# ---- a hostile role's operators on a superuser's search_path ----
# A role that may create objects in a schema on a superuser's search_path
# (fbf_sp_hostile, ahead of pg_catalog, for the superuser fbf_sp_admin on
# every node: Citus' connections to the workers run with it too) creates
# operators for every pair of types the Citus paths' queries use, each
# counting its calls.  fbf_sp_admin creates and distributes a counter
# (colocated by name), increments it through the coordinator and a worker,
# reads its value and the cluster's statistics, and moves one of its shards
# (the transfer hook lists the placements and carries the window): no
# hostile operator ran, on any node.
my $hostile_setup = q{
	SET citus.enable_ddl_propagation = off;
	CREATE ROLE fbf_sp_hostile;
	CREATE ROLE fbf_sp_admin SUPERUSER LOGIN;
	ALTER ROLE fbf_sp_admin SET search_path = public, fbf_sp_hostile, pg_catalog;
	CREATE SCHEMA fbf_sp_hostile AUTHORIZATION fbf_sp_hostile;
	SET ROLE fbf_sp_hostile;
	SET search_path = pg_catalog;
	CREATE SEQUENCE fbf_sp_hostile.fired;
	GRANT USAGE ON SCHEMA fbf_sp_hostile TO PUBLIC;
	GRANT USAGE, UPDATE ON SEQUENCE fbf_sp_hostile.fired TO PUBLIC;
	CREATE FUNCTION fbf_sp_hostile.fire(what text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog AS $f$
	BEGIN
		PERFORM pg_catalog.nextval('fbf_sp_hostile.fired');
		RAISE WARNING 'hostile % ran as %', what, current_user;
	END $f$;
	DO $d$
	DECLARE
		num text[] := ARRAY['smallint', 'integer', 'bigint', 'numeric', 'double precision'];
		same text[] := ARRAY['oid', 'regclass', 'text', 'name', '"char"', 'boolean', 'jsonb',
							 'pg_catalog.noderole', 'text[]', 'timestamp with time zone'];
		pairs text[] := '{}';
		l text;
		r text;
		op text;
		res text;
		i integer;
	BEGIN
		FOREACH l IN ARRAY num LOOP
			FOREACH r IN ARRAY num LOOP
				FOREACH op IN ARRAY ARRAY['=', '<>', '<', '>', '<=', '>=', '+', '-', '*', '/'] LOOP
					pairs := pairs || ARRAY[op, l, r];
				END LOOP;
			END LOOP;
		END LOOP;
		FOREACH l IN ARRAY same LOOP
			FOREACH op IN ARRAY ARRAY['=', '<>', '<', '>', '<=', '>='] LOOP
				pairs := pairs || ARRAY[op, l, l];
			END LOOP;
		END LOOP;
		pairs := pairs || ARRAY['=', 'oid', 'regclass'] || ARRAY['=', 'regclass', 'oid']
			|| ARRAY['=', 'text', 'name'] || ARRAY['=', 'name', 'text']
			|| ARRAY['||', 'text', 'text'] || ARRAY['->>', 'jsonb', 'text']
			|| ARRAY['->', 'jsonb', 'text'] || ARRAY['-', 'jsonb', 'text'];
		FOR i IN 1 .. pg_catalog.array_length(pairs, 1) / 3 LOOP
			op := pairs[3 * i - 2];
			l := pairs[3 * i - 1];
			r := pairs[3 * i];
			EXECUTE pg_catalog.format('SELECT pg_catalog.pg_typeof(NULL::%s OPERATOR(pg_catalog.%s) NULL::%s)::text',
									  l, op, r) INTO res;
			EXECUTE pg_catalog.format(
				'CREATE FUNCTION fbf_sp_hostile.op_%s(%s, %s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog AS %L',
				i, l, r, res,
				pg_catalog.format('BEGIN PERFORM fbf_sp_hostile.fire(%L); RETURN $1 OPERATOR(pg_catalog.%s) $2; END',
								  pg_catalog.format('operator %s(%s, %s)', op, l, r), op));
			EXECUTE pg_catalog.format('CREATE OPERATOR fbf_sp_hostile.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = fbf_sp_hostile.op_%s)',
									  op, l, r, i);
		END LOOP;
	END $d$;
};
$_->safe_psql('postgres', $hostile_setup) for @nodes;
# the shards moved away above are dropped by Citus in the background: done
# first, so that none is dropped while fbf_counter_stats reads the windows
$coord->safe_psql('postgres', 'CALL citus_cleanup_orphaned_resources()');
my $fired_sql = q{SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM fbf_sp_hostile.fired};
sub fired_on_nodes
{
	return join('|', map { $_->safe_psql('postgres', $fired_sql) } @nodes);
}

# as fbf_sp_admin on `node`: (rc, stdout, stderr)
sub as_admin
{
	my ($node, $sql) = @_;
	return $node->psql('postgres', $sql,
		extra_params => [ '-U', 'fbf_sp_admin', '-v', 'ON_ERROR_STOP=1' ]);
}

# the probe: the parser chooses them, on the coordinator and on the workers
# through Citus' connections
($rc, $out, $err) = as_admin($coord, q{
	SELECT 1.5::double precision * 2;
	SELECT run_command_on_workers($$SELECT 'primary'::pg_catalog.noderole = 'primary'$$);});
is($rc, 0, 'the hostile probe runs') or diag($err);
like(fired_on_nodes(), qr/^[1-9]\d*\|[1-9]\d*\|[1-9]\d*$/,
	'the hostile operators are chosen on every node, through Citus\' connections too');
$_->safe_psql('postgres', 'ALTER SEQUENCE fbf_sp_hostile.fired RESTART') for @nodes;

my $hkeys = q{pg_catalog.format('h%s', g)};
($rc, $out, $err) = as_admin($coord, qq{
	SELECT fbf_create_counter_table('hlikes', retention => '10 min');
	SELECT fbf_distribute_counter('hlikes', colocate_with => 'likes');
	SELECT count(*) FILTER (WHERE idempotent_increment('hlikes', $hkeys, 1::bigint, g::bigint, 1::bigint))
	  FROM pg_catalog.generate_series(1, 40) g;
	SELECT count(*) FROM fbf_counter_stats;
	SELECT fbf_counter_value('hlikes', 'h7');});
is($rc, 0, 'as fbf_sp_admin: a counter distributed, incremented, read') or diag($err);
like($out, qr/\n40\n\d+\n1$/, 'every operation applied once');
is($coord->safe_psql('postgres', q{
	SELECT (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'hlikes'::regclass)
		 = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'likes'::regclass)}),
	't', 'colocated with the table colocate_with names, looked up in the caller\'s search_path');
($rc, $out, $err) = as_admin($w1, qq{
	SELECT count(*) FILTER (WHERE idempotent_increment('hlikes', $hkeys, 1::bigint, g::bigint, 1::bigint))
	  FROM pg_catalog.generate_series(1, 40) g;});
is($out, '0', 'retried through a worker: every retry dismissed') or diag($err);
my ($hshard, $hfrom, $hto) = split /\|/, $coord->safe_psql('postgres', q{
	SELECT p.shardid, n.nodeport, (SELECT nodeport FROM pg_dist_node o
									WHERE o.nodeport <> n.nodeport AND o.groupid <> 0 LIMIT 1)
	  FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
	 WHERE p.shardid = get_shard_id_for_distribution_column('hlikes', 'h7')});
# (Citus' own check of the target's disk space runs an unqualified
# integer + numeric on the workers: turned off, it is not fbf's)
($rc, $out, $err) = as_admin($coord, qq{
	SET citus.check_available_space_before_move = off;
	SELECT citus_move_shard_placement($hshard, '127.0.0.1', $hfrom, '127.0.0.1', $hto,
									  shard_transfer_mode => 'block_writes');
	SELECT count(*) FILTER (WHERE idempotent_increment('hlikes', $hkeys, 1::bigint, g::bigint, 1::bigint))
	  FROM pg_catalog.generate_series(1, 40) g;});
is($rc, 0, 'as fbf_sp_admin: one of its shards moved') or diag($err);
like($out, qr/^0$/m, 'after the move (the transfer hook carried the window) every retry is dismissed');
is($coord->safe_psql('postgres', 'SELECT sum(value) FROM hlikes'), 40, 'the counter counts each once');
is(fired_on_nodes(), '0|0|0', 'no hostile operator ran on any node') or diag($err);

$_->stop for @nodes;
done_testing();
