# Dedup tables distributed by Citus: each id claimed once across a cluster.
#
# A coordinator and two workers on loopback ports, with Citus (skipped
# when it is not installed), as in 022_citus.pl.  A dedup table
# distributed with fbf_distribute_dedup:
#   - claims of many ids through the coordinator are true once, then
#     false, and land in the windows of both workers' shards; ids of each
#     type (bigint, text, bytea, uuid, (client_id, seq)) likewise;
#   - a batch spanning shards answers in the ids' order, an id repeated
#     within it false after its first occurrence, and in one transaction;
#   - a rolled-back claim is forgotten;
#   - a claim through a worker (Citus MX) gets the same answer as through
#     the coordinator;
#   - the fast path: a statement that is one claim of one id (each type,
#     and (client_id, seq)) is sent as the routed statement in one round
#     trip; it and the function route remember each other's claims; NULL
#     arguments get fbf_claim's own errors; prepared, past its fifth
#     execution (or under force_generic_plan), it runs a generic plan
#     routed by the id's anchor, in and out of transaction blocks and
#     pipelines, under EXPLAIN and EXPLAIN ANALYZE, with a NULL id, and
#     while a shard moves;
#   - shard transfers carry the shards' windows: every claimed id is still
#     a duplicate after citus_move_shard_placement (block_writes, and
#     logical replication), citus_split_shard_by_split_points,
#     citus_drain_node and the rebalancer's background moves;
#   - the shell's window is refused (0A000); a role without INSERT cannot
#     claim (42501), a role with INSERT alone can (thanks to the grants on
#     the empty table's anchor column fbf_distribute_dedup makes, without
#     which it cannot: 42501); fbf_claim_on_placement
#     refuses ids outside the shard it was routed to (22023);
#   - the shards' windows are planned for their share of expected_rate
#     (8,000/s over 4 shards: 2,000/s each, as a local dedup table of
#     2,000/s) and remember;
#   - fbf_distribute_dedup refuses a dedup table that has claimed ids
#     (55000), a counter or a plain table (42809) and colocate_with NULL
#     (22004).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FbfTest;
use Time::HiRes qw(usleep);

my ($coord, $w1, $w2) = fbf_citus_cluster(citus_transfer_conf() . qq{fbf.naptime = 500ms
});
$coord->safe_psql('postgres', q{
	SELECT fbf_create_dedup('inbox', retention => '10 min', target_fpp => 1e-9);
	SELECT fbf_distribute_dedup('inbox', shard_count => 8);
});

# (rc, stdout, stderr with SQLSTATEs) of `sql` on `node`, as `role`
sub try_sql
{
	my ($node, $sql, $role) = @_;
	return $node->psql('postgres', $sql,
		extra_params => [ ($role ? ('-U', $role) : ()), '-v', 'VERBOSITY=verbose' ]);
}

# how many of the bigint ids from..to a claim through `node` finds new
sub claim_range
{
	my ($node, $from, $to) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT count(*) FILTER (WHERE fbf_claim('inbox', g::bigint))
		  FROM generate_series($from, $to) g});
}

# ---- the shell ----
my ($rc, $out, $err) = try_sql($coord, "SELECT fbf_snapshot('inbox')");
like($err, qr/0A000: "inbox" is distributed by Citus/, 'the shell\'s window is refused (0A000)');

# the shards share the table's expected rate (as a counter's: 022_citus.pl)
$coord->safe_psql('postgres', q{
	SELECT fbf_create_dedup('rated', retention => '10 min', expected_rate => 8000);
	SELECT fbf_distribute_dedup('rated', shard_count => 4);
	SELECT fbf_create_dedup('local_2000', retention => '10 min', expected_rate => 2000);});
is(citus_shard_windows($coord, 'rated'),
	'expected_rate=2000 ' . $coord->safe_psql('postgres', "SELECT pg_relation_size('local_2000_fbf')"),
	'8,000/s over 4 shards: each shard\'s window is planned for 2,000/s, and takes what a dedup table of 2,000/s takes');
is(join(' ', map { $coord->safe_psql('postgres', "SELECT fbf_claim('rated', 7::bigint)") } 1 .. 2),
	't f', 'and remembers');
is($coord->safe_psql('postgres', q{
	SELECT partmethod::text || ':' || (SELECT attname FROM pg_attribute
								  WHERE attrelid = 'inbox'::regclass AND attnum = 1)
	  FROM pg_dist_partition WHERE logicalrelid = 'inbox'::regclass}),
	'h:anchor', 'distributed by hash of its anchor');

# ---- claims through the coordinator ----
is(claim_range($coord, 1, 500), 500, '500 ids claimed through the coordinator');
is(claim_range($coord, 1, 500), 0, 'claimed again: all 500 are duplicates');
my %per_node = map { split /\|/ } split /\n/, $coord->safe_psql('postgres', q{
	SELECT node_port, sum(claimed) FROM fbf_dedup_stats
	 WHERE dedup = 'inbox'::regclass GROUP BY 1});
ok(($per_node{ $w1->port } // 0) > 50 && ($per_node{ $w2->port } // 0) > 50,
	'the claims landed in shards of both workers (fbf_dedup_stats on the coordinator)');
is(($per_node{ $w1->port } // 0) + ($per_node{ $w2->port } // 0), 500,
	'each claimed id counted in one shard');

is($coord->safe_psql('postgres', "SELECT count(*) FROM fbf_counter_stats WHERE counter = 'inbox'::regclass"),
	0, 'fbf_counter_stats leaves the dedup table\'s shards to fbf_dedup_stats');

my $types = q{
	SELECT fbf_claim('inbox', 'msg-' || g), fbf_claim('inbox', ('\x' || lpad(to_hex(g), 8, '0'))::bytea),
		   fbf_claim('inbox', md5(g::text)::uuid), fbf_claim('inbox', 77::bigint, g::bigint),
		   fbf_claim('inbox', 'client'::text, g::bigint),
		   fbf_claim('inbox', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, g::bigint)
	  FROM generate_series(1, 40) g};
my $first = $coord->safe_psql('postgres', $types);
is(scalar(() = $first =~ /t/g), 240, 'text, bytea, uuid and (client_id, seq) ids claimed once each');
my $again = $coord->safe_psql('postgres', $types);
is(scalar(() = $again =~ /t/g), 0, 'and all of them duplicates the second time');
is($coord->safe_psql('postgres', "SELECT fbf_claim('inbox', '1'::text), fbf_claim('inbox', '1'::text)"),
	't|f', 'the text id \'1\' is not the bigint id 1: claimed once');

# ---- batches spanning shards ----
is($coord->safe_psql('postgres',
		"SELECT fbf_claim('inbox', ARRAY[1001, 1002, 1001, 3, 1003, 1004, 1005, 1002]::bigint[])"),
	'{t,t,f,f,t,t,t,f}',
	'a batch over several shards answers in order, repeats within it false');
is($coord->safe_psql('postgres',
		"SELECT fbf_claim('inbox', ARRAY[1001, 1002, 1003, 1006]::bigint[])"),
	'{f,f,f,t}', 'the batch\'s claims are remembered');
is($coord->safe_psql('postgres',
		"SELECT fbf_claim('inbox', ARRAY['x', 'y', 'x', 'z']::text[])"),
	'{t,t,f,t}', 'text batches too');
is($coord->safe_psql('postgres',
		"SELECT fbf_claim('inbox', ARRAY[5, 5, 6, 5]::bigint[], ARRAY[1, 1, 1, 2]::bigint[])"),
	'{t,f,t,t}', '(client_id, seq) batches too');
my $big = $coord->safe_psql('postgres', q{
	SELECT (SELECT count(*) FROM unnest(fbf_claim('inbox', array_agg(g::bigint))) a WHERE a)
	  FROM generate_series(2001, 3000) g});
is($big, 1000, 'a batch of 1000 ids over every shard');
is($coord->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE a) FROM unnest(fbf_claim('inbox',
		(SELECT array_agg(g::bigint ORDER BY g DESC) FROM generate_series(1501, 3000) g))) a}),
	500, 'then a batch overlapping it: only the 500 new ids are claimed');

# ---- rolled back ----
$coord->safe_psql('postgres', q{
	BEGIN;
	SELECT fbf_claim('inbox', ARRAY[5001, 5002, 5003, 5004]::bigint[]);
	SELECT fbf_claim('inbox', 5005::bigint);
	ROLLBACK;});
is(claim_range($coord, 5001, 5005), 5, 'claims rolled back are forgotten');
is($coord->safe_psql('postgres', q{
	BEGIN;
	SELECT fbf_claim('inbox', ARRAY[6001, 6002, 6003, 6004, 6005, 6006]::bigint[]);
	COMMIT;
	SELECT count(*) FILTER (WHERE fbf_claim('inbox', g::bigint)) FROM generate_series(6001, 6006) g}),
	"{t,t,t,t,t,t}\n0", 'claims of an explicit transaction over both workers commit together');

# ---- through the workers (MX) ----
is(claim_range($w1, 1, 500), 0, 'claimed through the coordinator, duplicates through worker 1');
is(claim_range($w2, 1, 500), 0, '... and through worker 2');
is(claim_range($w1, 7001, 7100), 100, 'new ids claimed through worker 1');
is(claim_range($w2, 7001, 7100), 0, '... are duplicates through worker 2');
is(claim_range($coord, 7001, 7100), 0, '... and through the coordinator');

# ---- the fast path: a claim of one id is the routed statement ----
my $issued;
($rc, $out, $err, $issued) = fbf_citus_sent($coord, "SELECT fbf_claim('inbox', 9501::bigint) AS c");
is($out, 't', 'fast path: a claim of one id');
is(scalar(@$issued), 1, 'fast path: one statement sent in autocommit') or diag(join "\n", @$issued);
like($issued->[0] // '', qr/^WITH touch AS \(UPDATE public\.inbox_\d+ inbox .* SELECT public\.fbf_claim_on_placement\('public\.inbox'::regclass, '9501'::bigint\) AS c$/,
	'fast path: the routed statement, on the anchor\'s shard, keeping the client\'s column name');
unlike(join("\n", @$issued), qr/BEGIN|assign_distributed_transaction_id|COMMIT/,
	'fast path: no transaction block on the placement');
($rc, $out, $err, $issued) = fbf_citus_sent($coord, "SELECT fbf_claim('inbox', 9501::bigint)");
is($out, 'f', 'fast path: claimed again, a duplicate');
is(join('', map { $coord->safe_psql('postgres', "SELECT fbf_claim('inbox', $_)") }
		("'fp-1'::text", "'\\x0102'::bytea", "'b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid",
		 "'fp-client'::text, 1::bigint", "'fp-1'::text", "'fp-client'::text, 1::bigint")),
	'ttttff', 'fast path: each claimable type, and (client_id, seq)');
is(join('', map { $coord->safe_psql('postgres', "SELECT fbf_claim('inbox', ${_}::bigint)") } 9502 .. 9506),
	'ttttt', 'fast path: five more ids');
is(claim_range($coord, 9501, 9510), 4, 'the function route remembers the fast path\'s claims');
is(join('', map { $w1->safe_psql('postgres', "SELECT fbf_claim('inbox', ${_}::bigint)") } 9505 .. 9510),
	'ffffff', 'and the fast path, through a worker, the function route\'s');
($rc, $out, $err, $issued) = fbf_citus_sent($coord, "SELECT fbf_claim('inbox', NULL::bigint)");
like($err, qr/22004: id of fbf_claim must not be null/, 'fast path: a NULL id is refused as fbf_claim refuses it (22004)');
($rc, $out, $err, $issued) = fbf_citus_sent($coord, "SELECT fbf_claim('inbox', 'fp-client'::text, NULL)");
like($err, qr/22004: seq of fbf_claim must not be null/, 'fast path: a NULL seq too (22004)');
# prepared statements with parameters, in autocommit: each claim sent as the
# statement that commits on its own (a read of the anchor's shard, grouped
# to one row), ids and (client_id, seq) pairs
my $bindir = `pg_config --bindir`;
chomp $bindir;
my $pfile = "${PostgreSQL::Test::Utils::tmp_check}/claims.sql";
open(my $pfh, '>', $pfile) or die "$pfile: $!";
print $pfh "\\set id :id + 1\nSELECT fbf_claim('inbox', :id::bigint);\nSELECT fbf_claim('inbox', 'pc'::text, :id::bigint);\n";
close $pfh;
my ($po, $pe) = ('', '');
{
	local $ENV{PGOPTIONS} = '-c citus.log_remote_commands=on -c client_min_messages=log';
	IPC::Run::run([ "$bindir/pgbench", '-n', '-M', 'prepared', '-c', 1, '-t', 5, '-D', 'id=9600',
		'-h', '127.0.0.1', '-p', $coord->port, '-f', $pfile, 'postgres' ], '>', \$po, '2>', \$pe);
}
my $alone = () = $pe =~ /issuing SELECT public\.fbf_claim_on_placement\(public\.fbf_outside_transaction_block\('public\.inbox'::regclass\), '[^()]+'::(?:bigint|text)(?:, '\d+'::bigint)?\) AS fbf_claim FROM public\.inbox_\d+ inbox WHERE .* GROUP BY \(\)$/mg;
is($alone, 10, 'fast path, prepared: each claim as the statement that commits on its own') or diag($pe);
unlike($pe, qr/issuing (?:BEGIN|WITH touch)|ERROR/, 'no transaction block, no data-modifying CTE, no error');
is(claim_range($coord, 9601, 9605), 0, 'its ids are claimed');
is($coord->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE fbf_claim('inbox', 'pc'::text, s)) FROM generate_series(9601, 9605) s}),
	0, 'and its (client_id, seq) pairs');

# The same prepared claims past their fifth execution: the plan cache keeps
# a generic plan, the statement that commits on its own routed by a
# parameter of fbf's own, which the coordinator binds to the id's anchor
# when the plan starts to run and Citus prunes by.  In a transaction block
# and in a pipeline the same statements are planned again when they start,
# as the routed statement that joins the transaction.  Each claim true
# once: the script fails (1/0) otherwise.
my $gclaims = <<'EOS';
\set n :n + 1
\set id 9700 + :n
\set id2 9800 + :n
\set id3 9900 + :n
SELECT fbf_claim('inbox', :id::bigint) AS a \gset
SELECT fbf_claim('inbox', :id::bigint) AS b \gset
SELECT fbf_claim('inbox', 'gc'::text, :id::bigint) AS c \gset
SELECT fbf_claim('inbox', 'gc'::text, :id::bigint) AS d \gset
BEGIN;
SELECT fbf_claim('inbox', :id2::bigint) AS e \gset
SELECT fbf_claim('inbox', :id2::bigint) AS f \gset
COMMIT;
\startpipeline
SELECT fbf_claim('inbox', :id3::bigint);
SELECT fbf_claim('inbox', :id3::bigint);
\endpipeline
\if :a and not :b and :c and not :d and :e and not :f
\else
SELECT 1/0;
\endif
EOS
my ($grc, $gout, $gerr);
{
	local $ENV{PGOPTIONS} = '-c client_min_messages=debug2';
	($grc, $gout, $gerr) = fbf_pgbench_prepared($coord, 'generic_claims', $gclaims, 12);
}
is($grc, 0, 'prepared claims past the fifth execution, in and out of transaction blocks and pipelines: run')
	or diag($gerr);
unlike($gerr, qr/ERROR/, 'each answered true once, then false') or diag($gerr);
like($gerr, qr/Deferred pruning for a fast-path router query/,
	'the plan cache kept generic plans, which Citus prunes when they run');
like($gerr, qr/the generic plan of this call of fbf_claim is planned again for this execution: it is not its transaction's first statement/,
	'in the transaction block, planned again when they start') or diag($gerr);
is(claim_range($coord, 9701, 9712) . claim_range($coord, 9801, 9812) . claim_range($coord, 9901, 9912),
	'000', 'every id they claimed is a duplicate afterwards');
is($coord->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE fbf_claim('inbox', 'gc'::text, s)) FROM generate_series(9701, 9712) s}),
	0, 'and every (client_id, seq) pair');
{
	local $ENV{PGOPTIONS} = '-c plan_cache_mode=force_generic_plan';
	($grc, $gout, $gerr) = fbf_pgbench_prepared($coord, 'generic_claims_forced',
		$gclaims =~ s/ 9(\d)00 \+ :n/ 1${1}000 + :n/gr, 4);
}
is($grc, 0, 'force_generic_plan: each claim true once') or diag($gerr);
is(claim_range($coord, 17001, 17004) . claim_range($coord, 18001, 18004) . claim_range($coord, 19001, 19004),
	'000', 'force_generic_plan: claimed');
# Outside transaction blocks the generic plans run as they are, every
# time, with their arguments by position or by name: never planned again.
{
	local $ENV{PGOPTIONS} = '-c client_min_messages=debug1';
	($grc, $gout, $gerr) = fbf_pgbench_prepared($coord, 'generic_claims_alone', <<'EOS', 10);
\set n :n + 1
\set id 40000 + :n
SELECT fbf_claim('inbox', :id::bigint) AS a \gset
SELECT fbf_claim(id => :id::bigint, dedup => 'inbox') AS b \gset
SELECT fbf_claim(dedup => 'inbox', client_id => 'gn'::text, seq => :id::bigint) AS c \gset
SELECT fbf_claim('inbox', 'gn'::text, :id::bigint) AS d \gset
\if :a and not :b and :c and not :d
\else
SELECT 1/0;
\endif
EOS
}
is($grc, 0, 'generic plans in autocommit, arguments by position and by name: each claim true once')
	or diag($gerr);
unlike($gerr, qr/planned again|function route/, 'none planned again, none on the function route') or diag($gerr);
is(claim_range($coord, 40001, 40010), 0, 'their ids are claimed');

# That generic plan run from SQL (EXECUTE of the prepared statement,
# never the client's own statement) is planned again as its call, before
# Citus prunes: under EXPLAIN it claims nothing, under EXPLAIN ANALYZE
# (where Citus would run the read inside a subtransaction on the
# placement) it claims once, and a NULL id gets fbf_claim's own error.
($grc, $gout, $gerr) = fbf_pgbench_prepared($coord, 'generic_claims_sql', <<'EOS', 8);
\set n :n + 1
\set id 9950 + :n
SELECT fbf_claim('inbox', :id::bigint);
\if :n = 6
EXPLAIN (COSTS OFF) EXECUTE "P_0"('9990');
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE "P_0"('9991');
\endif
\if :n = 7
EXECUTE "P_0"(NULL);
\endif
EOS
isnt($grc, 0, 'a NULL id bound to the generic plan: refused');
like($gerr, qr/id of fbf_claim must not be null/, 'with fbf_claim\'s error') or diag($gerr);
unlike($gerr, qr/ERROR:  (?!id of fbf_claim must not be null)/, 'and no other error') or diag($gerr);
is(claim_range($coord, 9990, 9990), 1, 'EXPLAIN claimed nothing');
is(claim_range($coord, 9991, 9991), 0, 'EXPLAIN ANALYZE claimed once');
is(claim_range($coord, 9951, 9957), 0, 'the claims before the NULL were applied');

# ---- shard moves carry the windows ----
sub shard_of
{
	my ($anchor_of_id) = @_;
	my ($shard, $port) = split /\|/, $coord->safe_psql('postgres', q{
		SELECT p.shardid, n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
		  JOIN pg_dist_shard s USING (shardid)
		 WHERE s.logicalrelid = 'inbox'::regclass ORDER BY p.shardid LIMIT 1});
	my $other = $port == $w1->port ? $w2->port : $w1->port;
	return ($shard, $port, $other);
}
# The first move, in block_writes mode, while two clients claim new ids
# through their prepared statements' generic plans (after the fifth
# execution), one shard's ids among them: the coordinator takes the shard's
# metadata lock as each starts to run, so each claim is answered true once
# (the script fails otherwise) and none is lost.
my ($shard, $from, $to) = shard_of();
my ($mh, $mo, $me);
{
	local $ENV{PGOPTIONS} = '-c client_min_messages=debug2';
	($mh, $mo, $me) = fbf_pgbench_start($coord, 'generic_claims_move', <<'EOS',
\set n :n + 1
\set id 20000 + :client_id * 5000 + :n
SELECT fbf_claim('inbox', :id::bigint) AS a \gset
\if :a
\else
SELECT 1/0;
\endif
EOS
		'-c', 2, '-j', 2, '-t', 1500, '-D', 'n=0');
}
usleep(300_000);
$coord->safe_psql('postgres', qq{
	SELECT citus_move_shard_placement($shard, '127.0.0.1', $from, '127.0.0.1', $to,
									  shard_transfer_mode => 'block_writes')});
note('the clients were ' . ($mh->pumpable ? 'still' : 'no longer') . ' running when the move committed');
$mh->finish;
is($mh->result(0), 0, 'generic plans of claims during a move: each claim true once, none failed')
	or diag(join("\n", grep { !/^DEBUG/ } split /\n/, $$me));
like($$me, qr/Deferred pruning for a fast-path router query/, 'the clients ran generic plans');
is(claim_range($coord, 20001, 21500) + claim_range($coord, 25001, 26500), 0,
	'and every id they claimed is a duplicate after the move');
is(claim_range($coord, 1, 500) + claim_range($coord, 2001, 3000), 0,
	'after citus_move_shard_placement (block_writes) every claimed id is a duplicate');
is(claim_range($coord, 8001, 8300), 300, 'new ids claimed after the move');
($shard, $from, $to) = shard_of();
$coord->safe_psql('postgres', qq{
	SELECT citus_move_shard_placement($shard, '127.0.0.1', $from, '127.0.0.1', $to)});
is(claim_range($coord, 1, 500) + claim_range($coord, 8001, 8300), 0,
	'after citus_move_shard_placement (auto: logical replication) every claimed id is a duplicate');
is(claim_range($w2, 1, 500), 0, '... through a worker too');

# every claimed id so far (1..500, 2001..3000, 7001..7100, 8001..8300):
# how many a claim through the coordinator finds new
sub reclaim_all
{
	return claim_range($coord, 1, 500) + claim_range($coord, 2001, 3000) +
	  claim_range($coord, 7001, 7100) + claim_range($coord, 8001, 8300);
}

# a split: the shard's window goes to both halves
($shard, $from, $to) = shard_of();
my ($nshards, $split_shards) = citus_split_shard($coord, 'inbox', $shard, $from, $to);
is($split_shards, $nshards + 1, 'a shard is split in two');
is(reclaim_all(), 0, 'after citus_split_shard_by_split_points every claimed id is a duplicate');

# the rebalancer: drain worker 1, then rebalance in background tasks
# (rated dropped: the transfers move only inbox's shards)
$coord->safe_psql('postgres', 'DROP TABLE rated');
$coord->safe_psql('postgres', sprintf(q{
	SELECT citus_drain_node('127.0.0.1', %d, shard_transfer_mode => 'block_writes')}, $w1->port));
is(citus_shards_on($coord, $w1, 'inbox'), '0', 'citus_drain_node moved every shard off worker 1');
is(reclaim_all(), 0, 'after citus_drain_node every claimed id is a duplicate');
$coord->safe_psql('postgres', sprintf(q{
	SELECT citus_set_node_property('127.0.0.1', %d, 'shouldhaveshards', true)}, $w1->port));
$coord->safe_psql('postgres', q{SELECT citus_rebalance_start()});
$coord->safe_psql('postgres', q{SELECT citus_rebalance_wait()});
cmp_ok(citus_shards_on($coord, $w1, 'inbox'), '>', 0, 'citus_rebalance_start (auto) moved shards back to worker 1');
is(reclaim_all(), 0, 'after the rebalancer\'s background moves every claimed id is a duplicate');
is(claim_range($w1, 1, 500) + claim_range($w2, 8001, 8300), 0, '... through the workers too');

# ---- privileges ----
$coord->safe_psql('postgres', q{
	CREATE ROLE outsider LOGIN;
	CREATE ROLE claimer LOGIN;
	GRANT INSERT ON inbox TO claimer;});
($rc, $out, $err) = try_sql($coord, "SELECT fbf_claim('inbox', 9001::bigint)", 'outsider');
like($err, qr/42501/, 'a role without INSERT cannot claim (42501)');
($rc, $out, $err) = try_sql($w1, "SELECT fbf_claim('inbox', 9001::bigint)", 'outsider');
like($err, qr/42501/, '... nor through a worker');
is($coord->safe_psql('postgres', "SELECT fbf_claim('inbox', 9001::bigint)",
		extra_params => [ '-U', 'claimer' ]),
	't', 'a role with INSERT alone claims');
is($coord->safe_psql('postgres', "SELECT fbf_claim('inbox', ARRAY[9001, 9002, 9003]::bigint[])",
		extra_params => [ '-U', 'claimer' ]),
	'{f,t,t}', '... batches too');
# what fbf_distribute_dedup's column grants are for: the routed statement's
# CTE reads and updates the anchor column
$coord->safe_psql('postgres', 'REVOKE SELECT (anchor), UPDATE (anchor) ON inbox FROM PUBLIC');
($rc, $out, $err) = try_sql($coord, "SELECT fbf_claim('inbox', 9004::bigint)", 'claimer');
like($err, qr/42501/, 'without the grants on anchor, a role with INSERT alone cannot claim');
$coord->safe_psql('postgres', 'GRANT SELECT (anchor), UPDATE (anchor) ON inbox TO PUBLIC');
is($coord->safe_psql('postgres', "SELECT fbf_claim('inbox', 9004::bigint)",
		extra_params => [ '-U', 'claimer' ]),
	't', 'with them back, it claims');

# the placement recomputes anchors: ids routed to the wrong shard are refused
my ($ashard, $aport) = split /\|/, $coord->safe_psql('postgres', q{
	SELECT p.shardid, n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
	  JOIN pg_dist_shard s USING (shardid)
	 WHERE s.logicalrelid = 'inbox'::regclass AND s.shardminvalue::int <= 0
	   AND s.shardmaxvalue::int >= 0});
my $anode = $aport == $w1->port ? $w1 : $w2;
# the anchor whose shard is $ashard: 0's, and ids of many shards
($rc, $out, $err) = try_sql($anode, q{
	SELECT fbf_claim_on_placement('inbox', a, ARRAY[1, 2, 3, 4, 5, 6, 7, 8]::bigint[], NULL)
	  FROM generate_series(-100000, 100000) a
	 WHERE get_shard_id_for_distribution_column('inbox', a) = } . $ashard . q{ LIMIT 1});
like($err, qr/22023: \d+ ids do not belong to the shard/,
	'fbf_claim_on_placement refuses ids outside the shard it is called for (22023)');

# the one-id form (the fast path's) finds the shard from the id itself:
# only on the node that holds it, and with fbf_claim's checks
my $oid = $coord->safe_psql('postgres', qq{
	SELECT g FROM generate_series(20000, 40000) g
	 WHERE get_shard_id_for_distribution_column('inbox', fbf_claim_anchor(g::bigint)) = $ashard LIMIT 1});
my $other = $anode == $w1 ? $w2 : $w1;
($rc, $out, $err) = try_sql($other, "SELECT fbf_claim_on_placement('inbox', ${oid}::bigint)");
like($err, qr/55000: shard \d+ of "inbox" is not placed on this node/,
	'fbf_claim_on_placement of one id refuses to claim where its shard is not placed (55000)');
is($anode->safe_psql('postgres', "SELECT fbf_claim_on_placement('inbox', ${oid}::bigint)"), 't',
	'... and claims it on the node of its shard');
is($coord->safe_psql('postgres', "SELECT fbf_claim('inbox', ${oid}::bigint)"), 'f',
	'... where fbf_claim finds it claimed');
($rc, $out, $err) = try_sql($anode, "SELECT fbf_claim_on_placement('inbox', NULL::bigint)");
like($err, qr/22004/, 'fbf_claim_on_placement of a NULL id: 22004');
($rc, $out, $err) = try_sql($anode, "SELECT fbf_claim_on_placement('inbox', 'c'::text, NULL)");
like($err, qr/22004/, 'fbf_claim_on_placement of a NULL seq: 22004');
($rc, $out, $err) = try_sql($anode, "SELECT fbf_claim_on_placement('inbox', 1.5::numeric)");
like($err, qr/42804: ids of type numeric cannot be claimed/,
	'fbf_claim_on_placement of an id of another type: 42804');
($rc, $out, $err) = try_sql($anode, "SELECT fbf_claim_on_placement('inbox', ${oid}::bigint)", 'claimer');
is($out, 'f', 'a role that may claim may call it (a duplicate now)') or diag($err);

# ---- fbf_distribute_dedup refuses ----
$coord->safe_psql('postgres', q{
	SELECT fbf_create_dedup('used', retention => '10 min');
	SELECT fbf_claim('used', 1::bigint);
	SELECT fbf_create_counter_table('ctr', retention => '10 min');
	CREATE TABLE plain (anchor integer);});
($rc, $out, $err) = try_sql($coord, "SELECT fbf_distribute_dedup('used')");
like($err, qr/55000: dedup table "used" has already claimed ids/,
	'a dedup table that has claimed ids is refused (55000)');
($rc, $out, $err) = try_sql($coord, "SELECT fbf_distribute_dedup('ctr')");
like($err, qr/42809: "ctr" is not a dedup table/, 'a counter table is refused (42809)');
($rc, $out, $err) = try_sql($coord, "SELECT fbf_distribute_dedup('plain')");
like($err, qr/42809: "plain" is not a dedup table/, 'a plain table is refused (42809)');
($rc, $out, $err) = try_sql($coord, q{
	SELECT fbf_create_dedup('unplaced', retention => '10 min');
	SELECT fbf_distribute_dedup('unplaced', colocate_with => NULL)});
like($err, qr/22004: colocate_with must not be NULL/,
	'colocate_with NULL is refused (22004), where create_distributed_table would do nothing');
$coord->safe_psql('postgres', q{
	SELECT fbf_create_dedup('fresh', retention => '10 min');
	GRANT INSERT ON fresh TO claimer;});
($rc, $out, $err) = try_sql($coord, "SELECT fbf_distribute_dedup('fresh')", 'claimer');
like($err, qr/42501: must be owner of table fresh/, 'only the owner distributes (42501)');

done_testing();
