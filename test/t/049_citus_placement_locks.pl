# The placement functions lock their shard as a routed write does: a
# direct call on a worker cannot slip into a shard transfer.
#
# A coordinator and two workers, as in 022_citus.pl (skipped without
# Citus).  A shard move or split blocks writes by holding the shard's
# metadata lock in ExclusiveLock on the coordinator and, through
# `lock_shard_metadata(7, ...)`, on every worker, from before it copies
# the shard's last writes until it commits.  A routed write holds that lock
# in ShareLock on the coordinator; the placement functions (which anyone
# with the table's privileges may call on a worker) take it on the node
# where they run.  On the worker of a counter's and a dedup table's shard,
# as a role with only the privileges to write (SELECT, INSERT and UPDATE
# on the counter, INSERT on the dedup table):
#   - while another session holds `lock_shard_metadata(7, ARRAY[shard])`
#     in an open transaction, as a move would, fbf_increment_on_placement
#     (single and batch), fbf_increment_outcome_on_placement,
#     fbf_apply_on_placement and fbf_claim_on_placement (its array form
#     and its one-id forms) for a key of that shard wait for it and fail
#     with lock_timeout (55P03), recording nothing; once the holder
#     commits, the same calls apply;
#   - a session that locked the shard before (whose later locks take the
#     tag it saw Citus' function lock) waits for a transfer's lock too;
#   - a holder in ShareLock (what routed writes take) does not block them;
#   - a routed increment through the coordinator, and one through the
#     other worker (Citus MX), still apply;
#   - a real move in block_writes mode waits for a direct call's open
#     transaction on the shard's worker, so the call's operation reaches
#     the new placement (a retry is dismissed, its delta counted once);
#     afterwards a direct call on the old worker is refused (55000), in a
#     new session and in the one that called there before the move;
#   - a move while a session on the coordinator increments keys of the
#     moving shard, each in its own transaction: every operation counted
#     once, every retry dismissed;
#   - the fast path's statement that commits on its own (a prepared
#     statement in autocommit), which Citus sends as a read and does not
#     lock for: it takes the shard's metadata lock on the coordinator, so
#     it waits for a transfer's lock there (55P03 with lock_timeout), in a
#     new session and in one that sent it before, and
#     a move in block_writes mode while clients send it fails none of
#     them, counts each operation once and dismisses every retry;
#   - a move onto the coordinator in a transaction block, rolled back:
#     the session's direct call there applied inside the block, and is
#     refused after the rollback (55000);
#   - what a session keeps of a shard's lock tag survives other
#     relations' invalidations, and not a split of an earlier shard of the
#     table, which changes the tag: the session then waits for a transfer's
#     lock as Citus computes it; a kept tag a transfer held while the
#     session waited, dropped by the transfer's commit, is learned again
#     and kept; a session whose call found the lock already held keeps no
#     tag, learns it in a later transaction, gives up after two such
#     transactions, and still waits for a transfer's lock; more shards
#     than the 64 an earlier version kept are all kept; a call that waits
#     for the lock of a shard being split fails with the split's 55000,
#     with the tag kept or not; on the coordinator, the statement that
#     commits on its own then moves on to the new shard.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FbfTest;
use Time::HiRes qw(usleep);

my @nodes = fbf_citus_cluster(citus_transfer_conf());
my ($coord, $w1, $w2) = @nodes;
$coord->safe_psql('postgres', q{
	CREATE ROLE writer LOGIN;
	SELECT fbf_create_counter_table('likes', retention => '10 min', target_fpp => 1e-9);
	SELECT fbf_distribute_counter('likes', shard_count => 4, colocate_with => 'none');
	SELECT fbf_create_dedup('inbox', retention => '10 min', target_fpp => 1e-9);
	SELECT fbf_distribute_dedup('inbox');
	GRANT SELECT, INSERT, UPDATE ON likes TO writer;
	GRANT INSERT ON inbox TO writer;
});

# the node (of the workers) holding shard `shard`
sub node_of
{
	my ($shard) = @_;
	my $port = $coord->safe_psql('postgres', qq{
		SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
		 WHERE p.shardid = $shard});
	return $port == $w1->port ? $w1 : $port == $w2->port ? $w2 : undef;
}

# Drop what earlier moves left (their shards' old placements) before the
# next: a move first drops the orphans itself, and refuses if one is left,
# which it is when Citus' maintenance daemon is dropping it at that moment
# (seen once: the move found the record the daemon deleted 0.2 s later).
sub settle_orphans
{
	for (1 .. 60)
	{
		$coord->safe_psql('postgres', 'CALL citus_cleanup_orphaned_resources()');
		return if $coord->safe_psql('postgres', 'SELECT count(*) FROM pg_dist_cleanup') eq '0';
		usleep(500_000);
	}
	die 'the orphaned placements of earlier moves were not dropped';
}

# as writer on `node`: (rc, stdout, stderr with SQLSTATEs)
sub as_writer
{
	my ($node, $sql) = @_;
	return $node->psql('postgres', $sql,
		extra_params => [ '-U', 'writer', '-v', 'VERBOSITY=verbose' ]);
}

# a session on `node` holding the metadata lock of `shard` in `mode` (7:
# ExclusiveLock, as a transfer takes it; 5: ShareLock, as a routed write)
sub hold_lock
{
	my ($node, $shard, $mode) = @_;
	my $holder = $node->background_psql('postgres');
	$holder->query_safe("BEGIN; SELECT lock_shard_metadata($mode, ARRAY[$shard]::bigint[])");
	return $holder;
}

my $key = 'k1';
my $shard = $coord->safe_psql('postgres',
	"SELECT get_shard_id_for_distribution_column('likes', '$key')");
my $node = node_of($shard);
ok($node, "the shard of '$key' is on a worker");
my $other = $node == $w1 ? $w2 : $w1;

my $anchor = $node->safe_psql('postgres', 'SELECT fbf_claim_anchor(42::bigint)');
my $dshard = $coord->safe_psql('postgres',
	"SELECT get_shard_id_for_distribution_column('inbox', $anchor)");
my $dnode = node_of($dshard);
ok($dnode, 'the shard of the claim of 42 is on a worker');

# the direct calls, each as one statement: what each returns when it applies
my %calls = (
	'fbf_increment_on_placement' => [
		"SELECT fbf_increment_on_placement('likes', '$key', 1::bigint, 1, 1)", 't' ],
	'fbf_increment_on_placement (batch)' => [
		"SELECT fbf_increment_on_placement('likes', '$key', ARRAY[2, 2]::bigint[], ARRAY[1, 2]::bigint[], ARRAY[1, 1]::bigint[])",
		'{t,t}' ],
	'fbf_increment_outcome_on_placement' => [
		"SELECT (fbf_increment_outcome_on_placement('likes', '$key', 3::bigint, 1, 1)).applied", 't' ],
	'fbf_apply_on_placement' => [
		"SELECT (fbf_apply_on_placement('likes', '$key', ARRAY[4]::bigint[], ARRAY[1]::bigint[], ARRAY[1]::bigint[], false)).applied",
		'{t}' ],
);

# ---- a transfer's lock held: the direct calls wait, then time out ----
my $holder = hold_lock($node, $shard, 7);
for my $name (sort keys %calls)
{
	my ($rc, $out, $err) = as_writer($node, "SET lock_timeout = '2s'; $calls{$name}[0]");
	like($err, qr/55P03/, "$name waits for a transfer's lock on the shard: lock timeout (55P03)");
}
my $dholder = hold_lock($dnode, $dshard, 7);
my $claim = "SELECT fbf_claim_on_placement('inbox', $anchor, ARRAY[42]::bigint[], NULL)";
my ($rc, $out, $err) = as_writer($dnode, "SET lock_timeout = '2s'; $claim");
like($err, qr/55P03/, 'fbf_claim_on_placement waits for a transfer\'s lock on the shard: lock timeout (55P03)');
# the one-id forms (the fast path's), for an id and a client of that shard
my $one_id = $coord->safe_psql('postgres', qq{
	SELECT g FROM generate_series(100, 100000) g
	 WHERE get_shard_id_for_distribution_column('inbox', fbf_claim_anchor(g::bigint)) = $dshard LIMIT 1});
my $one_client = $coord->safe_psql('postgres', qq{
	SELECT 'c' || g FROM generate_series(100, 100000) g
	 WHERE get_shard_id_for_distribution_column('inbox', fbf_claim_anchor(('c' || g)::text, 1::bigint)) = $dshard
	 LIMIT 1});
my %claims = (
	'fbf_claim_on_placement of one id' => "SELECT fbf_claim_on_placement('inbox', ${one_id}::bigint)",
	'fbf_claim_on_placement of one (client_id, seq)' =>
	  "SELECT fbf_claim_on_placement('inbox', '$one_client'::text, 1)",
);
for my $name (sort keys %claims)
{
	($rc, $out, $err) = as_writer($dnode, "SET lock_timeout = '2s'; $claims{$name}");
	like($err, qr/55P03/, "$name waits for a transfer's lock on the shard: lock timeout (55P03)");
}

# ---- the holders commit: the same calls apply ----
$holder->query_safe('COMMIT');
$holder->quit;
$dholder->query_safe('COMMIT');
$dholder->quit;
for my $name (sort keys %calls)
{
	($rc, $out, $err) = as_writer($node, "SET lock_timeout = '2s'; $calls{$name}[0]");
	is($out, $calls{$name}[1], "$name applies once the lock is released (nothing was recorded before)")
	  or diag($err);
}
($rc, $out, $err) = as_writer($dnode, "SET lock_timeout = '2s'; $claim");
is($out, '{t}', 'fbf_claim_on_placement claims once the lock is released') or diag($err);
for my $name (sort keys %claims)
{
	($rc, $out, $err) = as_writer($dnode, "SET lock_timeout = '2s'; $claims{$name}");
	is($out, 't', "$name claims once the lock is released (nothing was recorded before)") or diag($err);
}
is($coord->safe_psql('postgres', "SELECT fbf_counter_value('likes', '$key')"), 5,
	'the five direct operations counted once');

# ---- a session that locked the shard before waits too ----
# Its first lock of the shard went through Citus' lock_shard_metadata; its
# later ones take the tag it saw that function lock.
my $again = $node->background_psql('postgres', on_error_stop => 0,
	extra_params => [ '-U', 'writer' ]);
$again->query_safe('\\set VERBOSITY verbose');
$again->query_safe("SELECT fbf_increment_on_placement('likes', '$key', 10::bigint, 1, 1)");
$holder = hold_lock($node, $shard, 7);
$again->query("SET lock_timeout = '2s'; SELECT fbf_increment_on_placement('likes', '$key', 10::bigint, 2, 1)");
like($again->{stderr}, qr/55P03/,
	'a session that locked the shard before waits for a transfer\'s lock too (55P03)');
$holder->query_safe('COMMIT');
$holder->quit;
$again->{stderr} = '';
my $applied = $again->query_safe("SELECT fbf_increment_on_placement('likes', '$key', 10::bigint, 2, 1)");
chomp $applied;
is($applied, 't', 'and applies once it is released (nothing was recorded before)');
$again->quit;
is($coord->safe_psql('postgres', "SELECT fbf_counter_value('likes', '$key')"), 7,
	'both of its operations counted once');

# ---- a routed write's lock (ShareLock) does not block them ----
$holder = hold_lock($node, $shard, 5);
($rc, $out, $err) = as_writer($node, "SET lock_timeout = '2s'; "
	  . "SELECT fbf_increment_on_placement('likes', '$key', 1::bigint, 2, 1)");
is($out, 't', 'a direct call while another session holds the shard\'s lock in ShareLock') or diag($err);
$holder->query_safe('COMMIT');
$holder->quit;

# ---- routed increments ----
($rc, $out, $err) = as_writer($coord, "SELECT idempotent_increment('likes', '$key', 5, 1, 1)");
is($out, 't', 'a routed increment through the coordinator applies') or diag($err);
($rc, $out, $err) = as_writer($coord, "SELECT idempotent_increment('likes', '$key', 5, 1, 1)");
is($out, 'f', 'and its retry is dismissed');
($rc, $out, $err) = as_writer($other, "SELECT idempotent_increment('likes', '$key', 6, 1, 1)");
is($out, 't', 'a routed increment through the other worker (Citus MX) applies') or diag($err);
($rc, $out, $err) = as_writer($coord, q{
	BEGIN;
	SELECT idempotent_increment('likes', 'k1', 7, 1, 1);
	SELECT fbf_claim('inbox', 43::bigint);
	COMMIT;});
is($out, "t\nt", 'a transaction of routed writes through the coordinator commits') or diag($err);
is($coord->safe_psql('postgres', "SELECT fbf_counter_value('likes', '$key')"), 11,
	'every operation counted once');

# ---- a real move waits for a direct call's transaction ----
my $writer = $node->background_psql('postgres', on_error_stop => 0,
	extra_params => [ '-U', 'writer' ]);
$writer->query_safe("BEGIN; SELECT fbf_increment_on_placement('likes', '$key', 8::bigint, 1, 10)");
my $mover = $coord->background_psql('postgres', on_error_stop => 0);
$mover->query_safe('SET client_min_messages = error');
$mover->query_until(qr/moving/, sprintf(qq{\\echo moving
	SELECT citus_move_shard_placement($shard, '127.0.0.1', %d, '127.0.0.1', %d,
									  shard_transfer_mode => 'block_writes');
}, $node->port, $other->port));
my $waiting = 0;
for (my $i = 0; $i < 600 && !$waiting; $i++)
{
	$waiting = $node->safe_psql('postgres', q{
		SELECT count(*) FROM pg_stat_activity
		 WHERE wait_event_type = 'Lock' AND query LIKE '%lock_shard_metadata(7%'});
	usleep(50_000) unless $waiting;
}
ok($waiting, 'the move waits on the worker for the shard\'s lock the direct call holds');
is($coord->safe_psql('postgres', "SELECT fbf_counter_value('likes', '$key')"), 11,
	'the direct call\'s delta is not visible while its transaction is open');
$writer->query_safe('COMMIT');
($out) = $mover->query(q{SELECT 'moved'});
my $move_err = $mover->{stderr};
$mover->quit;
like($out, qr/moved/, 'the move completes once the direct call commits');
unlike($move_err, qr/ERROR/, 'without error');
is(node_of($shard)->port, $other->port, 'the shard is on the other worker');
$coord->safe_psql('postgres', 'CALL citus_cleanup_orphaned_resources()');
is($coord->safe_psql('postgres', "SELECT fbf_counter_value('likes', '$key')"), 21,
	'the direct call\'s delta reached the new placement');
is($coord->safe_psql('postgres', "SELECT idempotent_increment('likes', '$key', 8, 1, 10)"), 'f',
	'and its operation is remembered there: a retry is dismissed');
($rc, $out, $err) = as_writer($node, "SELECT fbf_increment_on_placement('likes', '$key', 8::bigint, 2, 1)");
like($err, qr/55000: shard $shard of "likes" is not placed on this node/,
	'a direct call on the old worker is refused (55000)');
# the direct call's session found the shard placed here before the move:
# what it kept of that does not outlive the move
$writer->query_safe('\\set VERBOSITY verbose');
$writer->query("SELECT fbf_increment_on_placement('likes', '$key', 8::bigint, 3, 1)");
like($writer->{stderr}, qr/55000: shard $shard of "likes" is not placed on this node/,
	'and so is one in the session that called there before the move (55000)');
$writer->quit;

# ---- a move while routed increments run ----
my @keys = split /\n/, $coord->safe_psql('postgres', qq{
	SELECT k FROM generate_series(1, 2000) i, LATERAL (SELECT 'm' || i AS k) s
	 WHERE get_shard_id_for_distribution_column('likes', k) = $shard LIMIT 20});
is(scalar(@keys), 20, '20 keys of the shard');
my $keylist = join(',', map { "'$_'" } @keys);
my $incrementer = $coord->background_psql('postgres', on_error_stop => 0);
$incrementer->query_until(qr/incrementing/, qq{\\echo incrementing
	DO \$\$
	DECLARE
		k text;
		s int;
	BEGIN
		FOR s IN 1..50 LOOP
			FOREACH k IN ARRAY ARRAY[$keylist] LOOP
				PERFORM idempotent_increment('likes', k, 9, s, 1);
				COMMIT;
			END LOOP;
		END LOOP;
	END \$\$;
});
usleep(200_000);
# the DO block's statement, running (not yet done) on the coordinator
my $incrementing = q{
	SELECT count(*) FROM pg_stat_activity
	 WHERE state = 'active' AND query LIKE '%PERFORM idempotent_increment%'
	   AND pid <> pg_backend_pid()};
is($coord->safe_psql('postgres', $incrementing), 1, 'the increments are running when the move starts');
$coord->safe_psql('postgres', sprintf(q{
	SELECT citus_move_shard_placement(%d, '127.0.0.1', %d, '127.0.0.1', %d,
									  shard_transfer_mode => 'block_writes')},
	$shard, $other->port, $node->port));
note('the increments were ' . ($coord->safe_psql('postgres', $incrementing) ? 'still' : 'no longer')
	  . ' running when the move committed');
($out) = $incrementer->query(q{SELECT 'done'});
my $inc_err = $incrementer->{stderr};
$incrementer->quit;
like($out, qr/done/, 'the increments during the move complete') or diag($inc_err);
unlike($inc_err, qr/ERROR/, 'none of them failed');
is(node_of($shard)->port, $node->port, 'the shard moved back');
is($coord->safe_psql('postgres', qq{
	SELECT sum(fbf_counter_value('likes', k)) FROM unnest(ARRAY[$keylist]) k}),
	1000, 'every increment during the move counted once');
is($coord->safe_psql('postgres', qq{
	SELECT count(*) FILTER (WHERE idempotent_increment('likes', k, 9, s, 1))
	  FROM unnest(ARRAY[$keylist]) k, generate_series(1, 50) s}),
	0, 'and every retry dismissed');

# ---- the statement that commits on its own waits for a transfer ----
# A prepared statement with parameters, in autocommit: the fast path sends
# it as a read (SELECT ... GROUP BY ()), for which Citus takes no lock; the
# planner takes the shard's metadata lock on the coordinator instead.
my $chold = hold_lock($coord, $shard, 7);
{
	local $ENV{PGOPTIONS} = '-c lock_timeout=2s -c citus.log_remote_commands=on -c client_min_messages=log';
	my ($h, $o, $e) = fbf_pgbench_start($coord, 'alone_wait',
		"SELECT idempotent_increment('likes', :k, 20, 1, 1);\n", '-c', '1', '-t', '1', '-D', "k=$key");
	$h->finish;
	like($$e, qr/lock timeout/, 'the statement that commits on its own waits for a transfer\'s lock on the coordinator (lock_timeout)');
	unlike($$e, qr/issuing/, 'and sends nothing meanwhile');
}
$chold->query_safe('COMMIT');
$chold->quit;
# a session that sent it before: its later locks of the shard take the tag
# it saw Citus' lock_shard_metadata lock.  One pgbench client sends it,
# then waits on an advisory lock this test holds until it has taken the
# transfer's lock, then sends it again.
my $gate = $coord->background_psql('postgres');
$gate->query_safe('SELECT pg_advisory_lock(4242)');
{
	local $ENV{PGOPTIONS} = '-c citus.log_remote_commands=on -c client_min_messages=log';
	my ($h, $o, $e) = fbf_pgbench_start($coord, 'alone_again', <<"EOS", '-c', '1', '-t', '1', '-D', "k=$key");
SELECT idempotent_increment('likes', :k, 21, 1, 1);
SELECT pg_advisory_lock(4242);
SELECT pg_advisory_unlock(4242);
SET lock_timeout = '2s';
SELECT idempotent_increment('likes', :k, 21, 2, 1);
EOS
	my $gated = 0;
	for (my $i = 0; $i < 1200 && !$gated; $i++)
	{
		$gated = $coord->safe_psql('postgres', q{
			SELECT count(*) FROM pg_locks
			 WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted});
		usleep(50_000) unless $gated;
	}
	ok($gated, 'a client sent the statement that commits on its own, and waits at the gate');
	$chold = hold_lock($coord, $shard, 7);
	$gate->query_safe('SELECT pg_advisory_unlock(4242)');
	$h->finish;
	my @sent = $$e =~ /issuing SELECT .*fbf_outside_transaction_block\(.* GROUP BY \(\)/g;
	is(scalar(@sent), 1, 'its first was sent as the statement that commits on its own') or diag($$e);
	like($$e, qr/lock timeout/,
		'its next waits for a transfer\'s lock on the coordinator (lock_timeout) and sends nothing');
	$chold->query_safe('COMMIT');
	$chold->quit;
}
$gate->quit;
{
	local $ENV{PGOPTIONS} = '-c citus.log_remote_commands=on -c client_min_messages=log';
	my ($h, $o, $e) = fbf_pgbench_start($coord, 'alone_once',
		"SELECT idempotent_increment('likes', :k, 20, 1, 1);\n", '-c', '1', '-t', '1', '-D', "k=$key");
	$h->finish;
	is($h->result(0), 0, 'it applies once the lock is released') or diag($$e);
	like($$e, qr/issuing SELECT .*fbf_outside_transaction_block\(.* GROUP BY \(\)/,
		'as the statement that commits on its own');
}

# a move in block_writes mode while two clients send it, each operation new
my $arr = 'ARRAY[' . $keylist . ']';
my ($bh, $bo, $be) = fbf_pgbench_start($coord, 'alone_move', <<"EOS", '-c', '2', '-j', '2', '-t', '400', '-D', 'seq=0');
\\set seq :seq + 1
SELECT idempotent_increment('likes', ($arr)[1 + :seq % 20], 30 + :client_id, :seq, 1);
EOS
usleep(300_000);
$coord->safe_psql('postgres', sprintf(q{
	SELECT citus_move_shard_placement(%d, '127.0.0.1', %d, '127.0.0.1', %d,
									  shard_transfer_mode => 'block_writes')},
	$shard, $node->port, $other->port));
my $moved_during = $bh->pumpable ? 1 : 0;
note('the clients were ' . ($moved_during ? 'still' : 'no longer') . ' running when the move committed');
$bh->finish;
is($bh->result(0), 0, 'no client\'s statement failed during the move') or diag($$be);
is(node_of($shard)->port, $other->port, 'the shard moved');
is($coord->safe_psql('postgres', qq{
	SELECT sum(fbf_counter_value('likes', k)) FROM unnest($arr) k}),
	1000 + 800, 'every operation during the move counted once');
is($coord->safe_psql('postgres', qq{
	SELECT count(*) FILTER (WHERE idempotent_increment('likes', ($arr)[1 + s % 20], c, s, 1))
	  FROM generate_series(30, 31) c, generate_series(1, 400) s}),
	0, 'and every retry dismissed');

# the same with the key a parameter of its own (numbers, as pgbench sends
# its variables): past the fifth execution each client runs the generic
# plan, which Citus prunes by the parameter when it runs, and whose shard
# metadata lock the coordinator takes as it starts to run it.  The shard
# moves back meanwhile.
my @gkeys = split /\n/, $coord->safe_psql('postgres', qq{
	SELECT i FROM generate_series(100000, 120000) i
	 WHERE get_shard_id_for_distribution_column('likes', i::text) = $shard LIMIT 4});
is(scalar(@gkeys), 4, '4 numeric keys of the shard');
# the shard moves back to where the move above left its old placement
settle_orphans();
my ($gh, $go, $ge);
{
	local $ENV{PGOPTIONS} = '-c client_min_messages=debug2';
	($gh, $go, $ge) = fbf_pgbench_start($coord, 'generic_move', <<'EOS', '-c', '2', '-j', '2', '-t', '400',
\set seq :seq + 1
\set j :seq % 4
\if :j = 0
\set kv :k0
\elif :j = 1
\set kv :k1
\elif :j = 2
\set kv :k2
\else
\set kv :k3
\endif
\set cid 60 + :client_id
SELECT idempotent_increment('likes', :kv, :cid, :seq, 1);
EOS
	'-D', 'seq=0', map { ('-D', "k$_=$gkeys[$_]") } 0 .. 3);
}
usleep(300_000);
$coord->safe_psql('postgres', sprintf(q{
	SELECT citus_move_shard_placement(%d, '127.0.0.1', %d, '127.0.0.1', %d,
									  shard_transfer_mode => 'block_writes')},
	$shard, $other->port, $node->port));
note('the clients were ' . ($gh->pumpable ? 'still' : 'no longer') . ' running when the move committed');
$gh->finish;
is($gh->result(0), 0, 'generic plans: no client\'s statement failed during the move')
	or diag(join("\n", grep { !/^DEBUG/ } split /\n/, $$ge));
like($$ge, qr/Deferred pruning for a fast-path router query/, 'the clients ran generic plans');
is(node_of($shard)->port, $node->port, 'the shard moved back');
my $garr = 'ARRAY[' . join(',', map { "'$_'" } @gkeys) . ']';
is($coord->safe_psql('postgres', qq{
	SELECT sum(fbf_counter_value('likes', k)) FROM unnest(${garr}::text[]) k}),
	800, 'generic plans: every operation during the move counted once');
is($coord->safe_psql('postgres', qq{
	SELECT count(*) FILTER (WHERE idempotent_increment('likes', (${garr}::text[])[1 + s % 4], c::text, s, 1))
	  FROM generate_series(60, 61) c, generate_series(1, 400) s}),
	0, 'generic plans: and every retry dismissed (the client ids text, as pgbench sent them)');
# what follows calls the shard's node the other
($node, $other) = ($other, $node);

# ---- a placement the session made itself, then rolled back ----
# A move onto the coordinator inside a transaction block: the session sees
# its own new placement there, and a direct call applies on it.  Once the
# move rolls back, the shard is not placed on the coordinator, and the
# session's next call there is refused: what it kept of the placement
# does not outlive the rollback, and nothing is written to the table the
# move made (which its cleanup drops).
$coord->safe_psql('postgres', sprintf(q{
	SELECT citus_set_node_property('127.0.0.1', %d, 'shouldhaveshards', true)}, $coord->port));
my $own = $coord->background_psql('postgres', on_error_stop => 0);
$own->query_safe('\\set VERBOSITY verbose');
$own->query_safe('SET client_min_messages = error');
$own->query_safe('BEGIN');
$own->query_safe(sprintf(q{
	SELECT citus_move_shard_placement(%d, '127.0.0.1', %d, '127.0.0.1', %d,
									  shard_transfer_mode => 'block_writes')},
	$shard, $other->port, $coord->port));
# (BackgroundPsql keeps the output's last newline in some versions)
my $inside = $own->query_safe("SELECT fbf_increment_on_placement('likes', '$key', 40::bigint, 1, 1)");
chomp $inside;
is($inside, 't',
	'inside the move\'s transaction block, a direct call applies on the coordinator\'s new placement');
$own->query_safe('ROLLBACK');
is(node_of($shard)->port, $other->port, 'the move rolled back');
$own->query("SELECT fbf_increment_on_placement('likes', '$key', 40::bigint, 2, 1)");
like($own->{stderr}, qr/55000: shard $shard of "likes" is not placed on this node/,
	'after the rollback, the same session\'s next call on the coordinator is refused (55000)');
$own->quit;
is($coord->safe_psql('postgres', qq{
	SELECT idempotent_increment('likes', '$key', 40, 2, 1)}), 't',
	'and that operation, never applied, applies when routed to the placement');

# ---- what a session keeps of a shard's lock, and what drops it ----
# Citus' tag for a shard's metadata lock holds the shard's index among its
# table's shards.  A session keeps the tag it saw Citus lock for a shard
# (DEBUG1 says when) until the table is invalidated: other relations'
# invalidations (another session's temporary tables) keep it; a split of
# an earlier shard of the table, which shifts the shard's index, drops it,
# and the session's next call locks the shard as Citus computes it now.
my ($first, $firstmin, $firstmax) = split /\|/, $coord->safe_psql('postgres', q{
	SELECT shardid, shardminvalue, shardmaxvalue FROM pg_dist_shard
	 WHERE logicalrelid = 'likes'::regclass ORDER BY shardminvalue::int LIMIT 1});
my $last = $coord->safe_psql('postgres', q{
	SELECT shardid FROM pg_dist_shard
	 WHERE logicalrelid = 'likes'::regclass ORDER BY shardminvalue::int DESC LIMIT 1});
my $lkey = $coord->safe_psql('postgres', qq{
	SELECT k FROM generate_series(1, 1000) i, LATERAL (SELECT 's' || i AS k) s
	 WHERE get_shard_id_for_distribution_column('likes', k) = $last LIMIT 1});
my $lnode = node_of($last);
ok($lnode && node_of($first), 'the first and the last shard of the table are on workers');
# the tag a transfer's lock of `shard` on `node` takes (index/colocation/class)
sub transfer_tag
{
	my ($node, $shard) = @_;
	my $h = hold_lock($node, $shard, 7);
	my $tag = $node->safe_psql('postgres', q{
		SELECT classid || '/' || objid || '/' || objsubid FROM pg_locks
		 WHERE locktype = 'advisory' AND mode = 'ExclusiveLock' AND granted});
	$h->query_safe('COMMIT');
	$h->quit;
	return $tag;
}
my $tag_before = transfer_tag($lnode, $last);
my $kept = qr/metadata lock tag of shard $last of "likes" is kept/;
my $learner = $lnode->background_psql('postgres', on_error_stop => 0,
	extra_params => [ '-U', 'writer' ]);
$learner->query_safe('\\set VERBOSITY verbose');
$learner->query_safe('SET client_min_messages = debug1');
my $placed = qr/shard $last of "likes" is found placed on this node/;
$learner->query("SELECT fbf_increment_on_placement('likes', '$lkey', 11::bigint, 1, 1)");
like($learner->{stderr}, $placed, 'a session\'s first call reads where the shard is placed');
like($learner->{stderr}, $kept, 'and keeps the tag of its shard\'s lock');
$lnode->safe_psql('postgres',
	join('', map { "CREATE TEMP TABLE churn$_ (a int); DROP TABLE churn$_;" } 1 .. 20),
	extra_params => [ '-U', 'writer' ]);
$learner->{stderr} = '';
$learner->query("SELECT fbf_increment_on_placement('likes', '$lkey', 11::bigint, 2, 1)");
unlike($learner->{stderr}, qr/found placed|is kept|ERROR/,
	'another session\'s temporary tables drop neither the placement nor the tag: the next call reads neither');
my $nodeid = $coord->safe_psql('postgres',
	'SELECT nodeid FROM pg_dist_node WHERE nodeport = ' . node_of($first)->port);
my $mid = int(($firstmin + $firstmax) / 2);
$coord->safe_psql('postgres', qq{
	SELECT citus_split_shard_by_split_points($first, ARRAY['$mid'], ARRAY[$nodeid, $nodeid],
											 shard_transfer_mode => 'block_writes')});
my $tag_after = transfer_tag($lnode, $last);
isnt($tag_after, $tag_before, "the split of the first shard changed the last shard's tag ($tag_before, $tag_after)");
$holder = hold_lock($lnode, $last, 7);
$learner->{stderr} = '';
$learner->query("SET lock_timeout = '2s'; SELECT fbf_increment_on_placement('likes', '$lkey', 11::bigint, 3, 1)");
like($learner->{stderr}, qr/55P03/,
	'after the split, the session that kept the old tag waits for a transfer\'s lock (55P03)');
$holder->query_safe('COMMIT');
$holder->quit;
$learner->{stderr} = '';
my $third = $learner->query("RESET lock_timeout; SELECT fbf_increment_on_placement('likes', '$lkey', 11::bigint, 3, 1)");
like($learner->{stderr}, $kept, 'and then keeps the new tag');
like($third, qr/^t/, 'its operation applies once the lock is released');
# the kept tag is the one a transfer holds: the session waits for it, and
# the transfer's commit (here a change of the shard's placement row, whose
# trigger invalidates the table, as a move's does) drops the tag; the
# session releases the lock it waited for and locks through Citus again,
# which it then sees take the tag, and keeps it
$holder = hold_lock($lnode, $last, 7);
$learner->{stderr} = '';
$learner->query_until(qr/waiting/,
	"\\echo waiting\nSELECT fbf_increment_on_placement('likes', '$lkey', 11::bigint, 4, 1);\n");
ok($lnode->poll_query_until('postgres', q{
		SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted}),
	'the session waits for the transfer\'s lock on its kept tag');
$holder->query_safe("UPDATE pg_dist_placement SET shardlength = shardlength WHERE shardid = $last");
$holder->query_safe('COMMIT');
$holder->quit;
my $fourth = $learner->query('SELECT 1');
like($fourth, qr/^t\n1\n?$/, 'once the transfer commits, its operation applies');
like($learner->{stderr}, $kept, 'and the tag, dropped by the transfer\'s commit, is learned again and kept');
like($learner->{stderr}, $placed, 'and where its shard is placed is read again');
$learner->quit;
is($coord->safe_psql('postgres', "SELECT fbf_counter_value('likes', '$lkey')"), 4,
	'its four operations counted once');
# a session that already held the shard's lock when it called (as a
# statement Citus routes to a shard of its own node does): no new lock is
# seen; the next transaction looks again, and after two such transactions
# no later call looks for it; its locks still go through Citus
my $held = $lnode->background_psql('postgres', on_error_stop => 0);
$held->query_safe('\\set VERBOSITY verbose');
$held->query_safe('SET client_min_messages = debug1');
for my $try (1, 2)
{
	$held->{stderr} = '';
	$held->query("BEGIN; SELECT lock_shard_metadata(5, ARRAY[$last]::bigint[]); "
		  . "SELECT fbf_increment_on_placement('likes', '$lkey', 12::bigint, $try, 1); COMMIT");
	like($held->{stderr}, qr/metadata lock tag of shard $last of "likes" is not seen/,
		"a call that finds the shard's lock already held sees no tag (transaction $try)");
}
$held->{stderr} = '';
$held->query("SELECT fbf_increment_on_placement('likes', '$lkey', 12::bigint, 3, 1)");
unlike($held->{stderr}, qr/metadata lock tag of shard|ERROR/,
	'after two such transactions, its next call does not look for it again');
$holder = hold_lock($lnode, $last, 7);
$held->{stderr} = '';
$held->query("SET lock_timeout = '2s'; SELECT fbf_increment_on_placement('likes', '$lkey', 12::bigint, 4, 1)");
like($held->{stderr}, qr/55P03/, 'its calls still wait for a transfer\'s lock (55P03)');
$holder->query_safe('COMMIT');
$holder->quit;
$held->quit;
# a session whose first call found the lock held, and whose next
# transaction's did not: that one learns the tag and keeps it
my $once = $lnode->background_psql('postgres', on_error_stop => 0);
$once->query_safe('SET client_min_messages = debug1');
$once->query("BEGIN; SELECT lock_shard_metadata(5, ARRAY[$last]::bigint[]); "
	  . "SELECT fbf_increment_on_placement('likes', '$lkey', 13::bigint, 1, 1); COMMIT");
like($once->{stderr}, qr/metadata lock tag of shard $last of "likes" is not seen/,
	'a first call that finds the lock held sees no tag');
$once->{stderr} = '';
$once->query("SELECT fbf_increment_on_placement('likes', '$lkey', 13::bigint, 2, 1)");
like($once->{stderr}, $kept, 'the next transaction\'s call learns it and keeps it');
$once->quit;
is($coord->safe_psql('postgres', "SELECT fbf_counter_value('likes', '$lkey')"), 9,
	'the operations before the transfer\'s lock counted once');

# a session that writes to more shards than an earlier version kept (64):
# each tag is learned once, and kept while the session goes round them
# (its shards spread over the three nodes; one connection per node, as
# many prepared transactions as the cluster allows)
$coord->safe_psql('postgres', q{
	SET citus.multi_shard_modify_mode TO 'sequential';
	SELECT fbf_create_counter_table('wide', retention => '10 min', target_fpp => 1e-6);
	SELECT fbf_distribute_counter('wide', shard_count => 240, colocate_with => 'none');
	GRANT SELECT, INSERT, UPDATE ON wide TO writer;
});
my $wkeys = $coord->safe_psql('postgres', sprintf(q{
	SELECT string_agg(quote_literal(k), ',') FROM (
	  SELECT DISTINCT ON (sh) k FROM (
	    SELECT 'w' || i AS k, get_shard_id_for_distribution_column('wide', 'w' || i) AS sh
	      FROM generate_series(1, 20000) i) x
	   WHERE sh IN (SELECT p.shardid FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
	                 WHERE n.nodeport = %d)
	   ORDER BY sh, k LIMIT 70) y}, $w1->port));
my @wkeys = split /,/, $wkeys;
is(scalar(@wkeys), 70, 'keys of 70 shards placed on one worker');
my $round = qq{DO \$\$ DECLARE k text; BEGIN
	FOREACH k IN ARRAY ARRAY[$wkeys] LOOP
		PERFORM fbf_increment_on_placement('wide', k, 1::bigint, nextval('s'), 1);
	END LOOP; END \$\$;};
my $wide = $w1->background_psql('postgres', on_error_stop => 0, extra_params => [ '-U', 'writer' ]);
$wide->query_safe('CREATE TEMP SEQUENCE s');
$wide->query_safe('SET client_min_messages = debug1');
my @learned;
for my $r (1 .. 2)
{
	$wide->{stderr} = '';
	$wide->query($round);
	push @learned, scalar(() = $wide->{stderr} =~ /metadata lock tag of shard \d+ of "wide" is kept/g);
}
$wide->quit;
is("@learned", '70 0', 'the first round learns each of the 70 tags, the second none');
is($coord->safe_psql('postgres', q{SELECT sum(value) FROM wide}), 140,
	'every operation of the two rounds counted once');

# a call that waits for its shard's lock while that very shard is split:
# once the split commits, the shard is gone, and the call fails with the
# split's retryable error (55000), whether the session had kept the tag
# (it then looks the shard up again rather than asking Citus to lock the
# old one, which Citus no longer knows: XX000) or not; on the coordinator,
# the statement that commits on its own moves on to the new shard
# (objsubid 4 and 8 are the classes of Citus' shard metadata locks)
$coord->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('halves', retention => '10 min', target_fpp => 1e-9);
	SELECT fbf_distribute_counter('halves', shard_count => 8, colocate_with => 'none');
	GRANT SELECT, INSERT, UPDATE ON halves TO writer;
});
# split the shard of `key` while `call` (a query the session `s` runs)
# waits for its lock, held meanwhile by a session on `node` (the node of
# the lock the call waits for: the shard's worker, or the coordinator)
sub split_while_calling
{
	my ($s, $key, $node, $call) = @_;
	my $shard = $coord->safe_psql('postgres',
		"SELECT get_shard_id_for_distribution_column('halves', '$key')");
	my ($min, $max) = split /\|/, $coord->safe_psql('postgres',
		"SELECT shardminvalue, shardmaxvalue FROM pg_dist_shard WHERE shardid = $shard");
	my $mid = int(($min + $max) / 2);
	my $nodeid = $coord->safe_psql('postgres',
		'SELECT nodeid FROM pg_dist_node WHERE nodeport = ' . node_of($shard)->port);
	my $h = hold_lock($node, $shard, 5);
	my $sp = $coord->background_psql('postgres', on_error_stop => 0);
	$sp->query_until(qr/splitting/, qq{\\echo splitting
		SELECT citus_split_shard_by_split_points($shard, ARRAY['$mid'], ARRAY[$nodeid, $nodeid],
												 shard_transfer_mode => 'block_writes');
	});
	$node->poll_query_until('postgres', q{
		SELECT count(*) > 0 FROM pg_locks
		 WHERE locktype = 'advisory' AND objsubid IN (4, 8) AND mode = 'ExclusiveLock' AND NOT granted})
	  or die 'the split does not wait';
	$s->{stderr} = '';
	$s->query_until(qr/calling/, "\\echo calling\n$call;\n");
	$node->poll_query_until('postgres', q{
		SELECT count(*) = 2 FROM pg_locks WHERE locktype = 'advisory' AND objsubid IN (4, 8) AND NOT granted})
	  or die 'the call does not wait';
	$h->query_safe('COMMIT');
	$h->quit;
	$sp->query_safe('SELECT 1');
	$sp->quit;
	my $out = $s->query('SELECT 1');
	return ($shard, $out);
}
for my $kept (1, 0)
{
	my $shard = $coord->safe_psql('postgres', q{
		SELECT shardid FROM pg_dist_shard WHERE logicalrelid = 'halves'::regclass
		 ORDER BY shardminvalue::int LIMIT 1 OFFSET 2});
	my $key = $coord->safe_psql('postgres', qq{
		SELECT k FROM generate_series(1, 5000) i, LATERAL (SELECT 'h$kept-' || i AS k) s
		 WHERE get_shard_id_for_distribution_column('halves', k) = $shard LIMIT 1});
	my $node = node_of($shard);
	my $s = $node->background_psql('postgres', on_error_stop => 0, extra_params => [ '-U', 'writer' ]);
	$s->query_safe('\\set VERBOSITY verbose');
	$s->query_safe("SELECT fbf_increment_on_placement('halves', '$key', 1::bigint, 1, 1)") if $kept;
	my ($split, $out) = split_while_calling($s, $key, $node,
		"SELECT fbf_increment_on_placement('halves', '$key', 2::bigint, 1, 1)");
	like($s->{stderr}, qr/55000: shard $split of "halves" was split while the call waited for its lock/,
		'a call waiting for the lock of a shard being split fails with 55000 once it is split ('
		  . ($kept ? 'the tag kept' : 'the tag not kept') . ')');
	$s->quit;
	is($coord->safe_psql('postgres', "SELECT fbf_counter_value('halves', '$key')"), $kept,
		'and applies nothing');
	$coord->safe_psql('postgres', 'CALL citus_cleanup_orphaned_resources()');
}
# on the coordinator: a prepared statement (pgbench) sent as the statement
# that commits on its own keeps its shard's tag; its next, sent while the
# shard is being split, waits for the tag, then moves on to the new shard
{
	my $shard = $coord->safe_psql('postgres', q{
		SELECT shardid FROM pg_dist_shard WHERE logicalrelid = 'halves'::regclass
		 ORDER BY shardminvalue::int DESC LIMIT 1});
	my $key = $coord->safe_psql('postgres', qq{
		SELECT k FROM generate_series(1, 5000) i, LATERAL (SELECT 'hc-' || i AS k) s
		 WHERE get_shard_id_for_distribution_column('halves', k) = $shard LIMIT 1});
	my ($min, $max) = split /\|/, $coord->safe_psql('postgres',
		"SELECT shardminvalue, shardmaxvalue FROM pg_dist_shard WHERE shardid = $shard");
	my $mid = int(($min + $max) / 2);
	my $nodeid = $coord->safe_psql('postgres',
		'SELECT nodeid FROM pg_dist_node WHERE nodeport = ' . node_of($shard)->port);
	my $cgate = $coord->background_psql('postgres');
	$cgate->query_safe('SELECT pg_advisory_lock(4243)');
	my ($h, $o, $e);
	{
		local $ENV{PGOPTIONS} = '-c client_min_messages=debug1';
		($h, $o, $e) = fbf_pgbench_start($coord, 'alone_split', <<"EOS", '-c', '1', '-t', '1', '-D', "k=$key");
SELECT idempotent_increment('halves', :k, 3, 1, 1);
SELECT pg_advisory_lock(4243);
SELECT pg_advisory_unlock(4243);
SELECT idempotent_increment('halves', :k, 3, 2, 1);
EOS
	}
	# (pgbench's output read meanwhile, so that it never waits to write)
	my $until = sub
	{
		my ($sql) = @_;
		for (my $i = 0; $i < 600; $i++)
		{
			$h->pump_nb if $h->pumpable;
			return 1 if $coord->safe_psql('postgres', $sql) eq 't';
			usleep(100_000);
		}
		return 0;
	};
	ok($until->(q{SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND objid = 4243 AND NOT granted}),
		'on the coordinator, a client sent the statement that commits on its own, and waits at the gate');
	my $ch = hold_lock($coord, $shard, 5);
	my $sp = $coord->background_psql('postgres', on_error_stop => 0);
	$sp->query_until(qr/splitting/, qq{\\echo splitting
		SELECT citus_split_shard_by_split_points($shard, ARRAY['$mid'], ARRAY[$nodeid, $nodeid],
												 shard_transfer_mode => 'block_writes');
	});
	ok($until->(q{SELECT count(*) > 0 FROM pg_locks
				   WHERE locktype = 'advisory' AND objsubid IN (4, 8) AND mode = 'ExclusiveLock' AND NOT granted}),
		'a split of its shard waits for the lock on the coordinator');
	$cgate->query_safe('SELECT pg_advisory_unlock(4243)');
	ok($until->(q{SELECT count(*) = 2 FROM pg_locks
				   WHERE locktype = 'advisory' AND objsubid IN (4, 8) AND NOT granted}),
		'the client\'s next statement waits behind the split');
	$ch->query_safe('COMMIT');
	$ch->quit;
	$sp->query('SELECT 1');
	unlike($sp->{stderr}, qr/ERROR/, 'the split commits');
	$sp->quit;
	$cgate->quit;
	$h->finish;
	is($h->result(0), 0, 'once the split commits, the statement goes on to the new shard') or diag($$e);
	like($$e, qr/metadata lock tag of shard $shard of "halves" is kept/,
		'its first statement had kept the tag of the old shard');
	is($coord->safe_psql('postgres', "SELECT fbf_counter_value('halves', '$key')"), 2,
		'both operations counted once');
}
$_->stop for @nodes;
done_testing();
