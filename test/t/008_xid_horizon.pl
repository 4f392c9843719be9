# Transaction-id horizons: whatever the distance in xids between an
# operation's transaction and the retry, and whoever drained its pending
# entry (or nobody), a rolled-back operation is never remembered, a
# committed one always is, and no retry waits forever.
#
# Nothing drains on a schedule here (no worker, no autovacuum), and every
# VACUUM is (FREEZE, INDEX_CLEANUP OFF): it skips the window index's
# amvacuumcleanup, yet it freezes the counter table and lets relfrozenxid,
# datfrozenxid and the commit log's horizon move past the xids of entries
# still pending.  The xid counter is moved forward with pg_resetwal -x (and
# -e), as PostgreSQL's own tests do, with a zeroed pg_xact segment for the
# new next xid (always the first xid of a segment) and -u keeping the
# cluster's oldest xid as it was, so that no anti-wraparound autovacuum
# starts.
#
#   A: an operation committed and one rolled back; the xid counter jumps
#      2^21 ahead and every database is frozen, so the commit log is
#      truncated past both: their retries must still tell them apart.
#   B: operations committed and rolled back in a fresh cluster, then
#      B.1  no VACUUM at all, the next xid as far ahead as PostgreSQL lets
#           it go without an anti-wraparound autovacuum (~1.95e9 xids);
#      B.2  one freeze (the commit log forgets the entries), then the next
#           xid more than 2^31 after them: in 32-bit terms they look like
#           xids of the future, "in progress" forever;
#      B.3  one more freeze, then the next xid in the following xid epoch,
#           more than 2^32 after them.
#      PostgreSQL refuses xids more than 2^31 - 3e6 past the cluster's
#      oldest xid (xidStopLimit), and the oldest xid cannot pass the
#      entries' xids until a VACUUM has frozen the counter table; so more
#      than 2^31 of distance (B.2, B.3) is only reachable with a freeze in
#      between.  No VACUUM runs between the last jump and the retries.
#
# Every client call runs with statement_timeout = 20s, and psql itself is
# given up after 30s (a wait on a transaction's lock is not always
# interruptible), so a retry that hangs fails instead of blocking the test.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FbfTest;

my $started = time;

# xids per pg_xact segment (BLCKSZ 8192: 32768 xids a page, 32 pages)
use constant SEG => 32768 * 32;
use constant SEG_BYTES => 8192 * 32;

# No drain on a schedule: no worker, no autovacuum.  The anti-wraparound
# autovacuum that starts even so once the next xid passes oldest xid +
# autovacuum_freeze_max_age is pushed as far away as PostgreSQL allows.
my $conf = q{
fbf.worker_enabled = off
autovacuum = off
autovacuum_freeze_max_age = 2000000000
};

# ---- helpers ----

# pg_controldata of a stopped or running node, as a hash
sub controldata
{
	my ($node) = @_;
	my ($out, $err) = run_command([ 'pg_controldata', $node->data_dir ]);
	my %cd;
	for (split /\n/, $out)
	{
		$cd{$1} = $2 if /^([^:]+):\s*(.*)$/;
	}
	return \%cd;
}

# Has a client call of this node been given up?  Its backend may still
# wait, uninterruptibly: restart the node before any clean stop.
my %stuck;

# A client's call: statement_timeout 20s, psql given up after 30s.
# Returns (stdout, stderr, hung) where hung says the call timed out either
# way.
sub client
{
	my ($node, $sql) = @_;
	my ($out, $err, $timed_out) = ('', '', 0);
	$node->psql('postgres', "SET statement_timeout = '20s';\n$sql",
		stdout => \$out, stderr => \$err,
		timeout => 30, timed_out => \$timed_out);
	$out //= '';
	$err //= '';
	$stuck{ $node->name } = 1 if $timed_out;
	my $hung = $timed_out
	  || $err =~ /canceling statement due to statement timeout/;
	note "client call:\n$sql\n  -> '$out'"
	  . ($err ne '' ? "\n  stderr: $err" : '')
	  . ($timed_out ? "\n  (psql given up after 30s)" : '');
	return ($out, $err, $hung);
}

# An operation in its own transaction, committed or rolled back; returns
# its transaction's full xid.
sub apply_op
{
	my ($node, $counter, $client, $seq, $delta, $end) = @_;
	my $out = $node->safe_psql('postgres', qq{
		BEGIN;
		SELECT idempotent_increment('$counter', $client, $seq, $delta)::text || ' ' ||
			   pg_current_xact_id();
		$end;});
	my ($applied, $xid) = split / /, $out;
	die "operation ($client,$seq) was not applied: $out" unless $applied eq 'true';
	note "operation ($client,$seq) delta $delta applied by xid $xid, then $end";
	return $xid;
}

# A retry: its answer ('true', 'false', or '' on error or timeout) and
# whether it hung.
sub retry
{
	my ($node, $counter, $client, $seq, $delta) = @_;
	my ($out, $err, $hung) = client($node,
		"SELECT idempotent_increment('$counter', $client, $seq, $delta)::text");
	return ($out, $hung);
}

# Stop cleanly (pg_resetwal needs it), through a crash and restart first
# if a backend may be stuck.
sub clean_stop
{
	my ($node) = @_;
	if ($stuck{ $node->name })
	{
		note 'a client call was given up: immediate stop and restart first';
		$node->stop('immediate');
		$node->start;
		delete $stuck{ $node->name };
	}
	$node->stop;
	return;
}

# Restart a node whose client calls were given up, so that the rest of
# the test does not wait on its stuck backends.
sub unstick
{
	my ($node) = @_;
	return unless $stuck{ $node->name };
	$node->stop('immediate');
	$node->start;
	delete $stuck{ $node->name };
	return;
}

# Move the node's next xid to the 64-bit $next (the first xid of a pg_xact
# segment), keeping the oldest xid: stop, zeroed pg_xact segment,
# pg_resetwal -e -x -u, start.
sub jump_xid
{
	my ($node, $next) = @_;
	my $epoch = int($next / 2**32);
	my $xid = $next % 2**32;
	die "next xid $next is not the first of a pg_xact segment" if $xid % SEG;

	clean_stop($node);
	my $cd = controldata($node);
	my $oldest = $cd->{"Latest checkpoint's oldestXID"};
	note "before the jump: NextXID $cd->{q{Latest checkpoint's NextXID}}, oldestXID $oldest";

	my $seg = sprintf('%s/pg_xact/%04X', $node->data_dir, int($xid / SEG));
	unless (-e $seg)
	{
		open my $fh, '>', $seg or die "could not create $seg: $!";
		binmode $fh;
		print $fh "\0" x SEG_BYTES;
		close $fh or die "could not write $seg: $!";
	}
	system_or_bail('pg_resetwal', '-e', $epoch, '-x', $xid, '-u', $oldest,
		$node->data_dir);
	$cd = controldata($node);
	note "after pg_resetwal -e $epoch -x $xid -u $oldest: NextXID "
	  . $cd->{"Latest checkpoint's NextXID"}
	  . ", oldestXID $cd->{q{Latest checkpoint's oldestXID}}";
	$node->start;
	return;
}

# VACUUM (FREEZE, INDEX_CLEANUP OFF) every database (template0 too: its
# datfrozenxid holds the commit log back like any other), the tables in
# @$tables of postgres explicitly first, then CHECKPOINT.
sub freeze_all
{
	my ($node, $tables) = @_;
	$node->safe_psql('postgres',
		'ALTER DATABASE template0 WITH ALLOW_CONNECTIONS true');
	$node->safe_psql($_, 'VACUUM (FREEZE, INDEX_CLEANUP OFF)')
	  for qw(template0 template1);
	$node->safe_psql('postgres', "VACUUM (FREEZE, INDEX_CLEANUP OFF) $_")
	  for @$tables;
	$node->safe_psql('postgres', 'VACUUM (FREEZE, INDEX_CLEANUP OFF)');
	$node->safe_psql('postgres',
		'ALTER DATABASE template0 WITH ALLOW_CONNECTIONS false');
	$node->safe_psql('postgres', 'CHECKPOINT');
	return;
}

# The horizons, for the log; returns the checkpoint's oldest xid (32 bits).
sub show_horizons
{
	my ($node, $what) = @_;
	my $cp = $node->safe_psql('postgres',
		'SELECT next_xid || \' oldest_xid \' || oldest_xid FROM pg_control_checkpoint()');
	my $dbs = $node->safe_psql('postgres',
		q{SELECT string_agg(datname || '=' || datfrozenxid, ', ' ORDER BY datname) FROM pg_database});
	my @xact = sort map { s{.*/}{}r } glob($node->data_dir . '/pg_xact/*');
	my $pending = $node->safe_psql('postgres',
		q{SELECT string_agg(counter || ': ' || pending, ', ') FROM fbf_counter_stats});
	note "$what: checkpoint next_xid $cp; datfrozenxid $dbs; pg_xact [@xact]; pending entries $pending";
	my ($oldest) = $cp =~ /oldest_xid (\d+)/;
	return $oldest;
}

# What the commit log still knows of a transaction: committed, aborted, or
# '' once it is older than the commit log's horizon.
sub xact_status
{
	my ($node, $xid) = @_;
	return $node->safe_psql('postgres', "SELECT pg_xact_status('$xid'::xid8)");
}

sub align_up { my ($x) = @_; return (int($x / SEG) + 1) * SEG; }
sub align_down { my ($x) = @_; return int($x / SEG) * SEG; }

# ---- A: the commit log truncated past pending entries ----

my $na = fbf_node('xid_a', $conf);
$na->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('c', retention => '1 day', expected_rate => 100)});

my $a_commit = apply_op($na, 'c', 1, 1, 1, 'COMMIT');
my $a_abort = apply_op($na, 'c', 1, 2, 10, 'ROLLBACK');
show_horizons($na, 'A, operations applied');

# next xid: the first of the segment after the next one, so that a freeze
# leaves the entries' whole pg_xact segment behind
my $a_next = align_up($a_abort) + SEG;
note "A: entries' xids $a_commit (committed) and $a_abort (rolled back); next xid set to $a_next";
jump_xid($na, $a_next);
freeze_all($na, ['c']);
my $a_oldest = show_horizons($na, 'A, after the jump and the freeze');

ok( $a_oldest > $a_abort
	  && xact_status($na, $a_commit) eq ''
	  && xact_status($na, $a_abort) eq '',
	"A: the commit log's horizon ($a_oldest) is past both entries' xids ($a_commit, $a_abort)");

my ($r, $hung);
my $a_hung = 0;
($r, $hung) = retry($na, 'c', 1, 2, 10);
$a_hung ||= $hung;
is($r, 'true',
	'A: the retry of the rolled-back operation applies once the commit log forgot its xid');
($r, $hung) = retry($na, 'c', 1, 1, 1);
$a_hung ||= $hung;
is($r, 'false',
	'A: the retry of the committed operation is dismissed once the commit log forgot its xid');
ok(!$a_hung, 'A: no retry timed out');
unstick($na);
is($na->safe_psql('postgres', q{SELECT fbf_counter_value('c')}), '11',
	'A: the counter counts the committed operation and the retried one, once each (11)');
clean_stop($na);

# ---- B: more than 2^31, then 2^32, xids between the entries and retries ----

my $nb = fbf_node('xid_b', $conf);
$nb->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('c2', retention => '1 day', expected_rate => 100)});

# client 2 is retried in B.1, client 3 in B.2, client 4 in B.3; every
# operation has its own delta so that the counter shows which applied
my %x;
$x{'2,1'} = apply_op($nb, 'c2', 2, 1, 1, 'COMMIT');
$x{'2,2'} = apply_op($nb, 'c2', 2, 2, 10, 'ROLLBACK');
$x{'3,1'} = apply_op($nb, 'c2', 3, 1, 100, 'COMMIT');
$x{'3,2'} = apply_op($nb, 'c2', 3, 2, 1000, 'ROLLBACK');
$x{'4,1'} = apply_op($nb, 'c2', 4, 1, 10000, 'COMMIT');
$x{'4,2'} = apply_op($nb, 'c2', 4, 2, 100000, 'ROLLBACK');
my ($xmin) = sort { $a <=> $b } values %x;
my ($xmax) = sort { $b <=> $a } values %x;
show_horizons($nb, 'B, operations applied');

# B.1: no VACUUM; the next xid as far ahead as PostgreSQL lets it go
# without an anti-wraparound autovacuum (oldest xid + 2e9; its hard limit
# is oldest xid + 2^31 - 3e6), less than 2^31 after the entries
my $b_oldest = controldata($nb)->{"Latest checkpoint's oldestXID"};
my $b1_next = align_down($b_oldest + 1_950_000_000);
note "B.1: entries' xids $xmin .. $xmax, oldest xid $b_oldest; next xid set to $b1_next ("
  . ($b1_next - $xmin) . ' after the oldest entry)';
jump_xid($nb, $b1_next);
show_horizons($nb, 'B.1, after the jump');

my $b_hung = 0;
($r, $hung) = retry($nb, 'c2', 2, 2, 10);
$b_hung ||= $hung;
is($r, 'true',
	'B.1: ~1.95e9 xids later with no VACUUM, the retry of the rolled-back operation applies');
($r, $hung) = retry($nb, 'c2', 2, 1, 1);
$b_hung ||= $hung;
is($r, 'false',
	'B.1: ~1.95e9 xids later with no VACUUM, the retry of the committed operation is dismissed');
ok(!$b_hung, 'B.1: no retry timed out');
unstick($nb);
is($nb->safe_psql('postgres', q{SELECT fbf_counter_value('c2')}), '10111',
	'B.1: the counter is exact (10111)');

# B.2: freeze (the commit log forgets the entries), then the next xid
# more than 2^31 after them; no VACUUM after the jump
freeze_all($nb, []);
my $b2_oldest = show_horizons($nb, 'B.2, after the freeze');
my $b2_next = align_up($xmax + 2**31) + 512 * SEG;
die "B.2: next xid $b2_next too far for the oldest xid $b2_oldest"
  unless $b2_next - $b2_oldest < 1_990_000_000;
note "B.2: next xid set to $b2_next ("
  . ($b2_next - $xmax) . ' after the newest entry, 2^31 = ' . 2**31 . ')';
jump_xid($nb, $b2_next);
show_horizons($nb, 'B.2, after the jump');
my $b2_cur = $nb->safe_psql('postgres', 'SELECT pg_current_xact_id()');
ok($b2_cur - $xmax > 2**31,
	"B.2: the next xid ($b2_cur) is more than 2^31 after the entries' ($xmin .. $xmax)");

$b_hung = 0;
($r, $hung) = retry($nb, 'c2', 3, 2, 1000);
$b_hung ||= $hung;
is($r, 'true',
	'B.2: more than 2^31 xids later, the retry of the rolled-back operation applies');
($r, $hung) = retry($nb, 'c2', 3, 1, 100);
$b_hung ||= $hung;
is($r, 'false',
	'B.2: more than 2^31 xids later, the retry of the committed operation is dismissed');
my ($out, $err);
($out, $err, $hung) = client($nb, q{
	SELECT idempotent_increment('c2', 2, 1, 1)::text || ',' ||
		   idempotent_increment('c2', 2, 2, 10)::text});
$b_hung ||= $hung;
is($out, 'false,false',
	'B.2: retries of the operations of B.1 are dismissed (both committed by now)');
ok(!$b_hung, 'B.2: no retry timed out');
unstick($nb);
is($nb->safe_psql('postgres', q{SELECT fbf_counter_value('c2')}), '11111',
	'B.2: the counter is exact (11111)');

# B.3: freeze again, then the next xid in the following xid epoch, more
# than 2^32 after the entries; no VACUUM after the jump
freeze_all($nb, []);
my $b3_oldest = show_horizons($nb, 'B.3, after the freeze');
my $b3_next = 2**32 + 256 * SEG;
die "B.3: next xid $b3_next too far for the oldest xid $b3_oldest"
  unless $b3_next - $b3_oldest < 1_990_000_000;
note "B.3: next xid set to $b3_next (epoch 1, xid " . ($b3_next % 2**32) . ', '
  . ($b3_next - $xmax) . ' after the newest entry)';
jump_xid($nb, $b3_next);
show_horizons($nb, 'B.3, after the jump');
my $b3_cur = $nb->safe_psql('postgres', 'SELECT pg_current_xact_id()');
ok($b3_cur - $xmax > 2**32,
	"B.3: the next xid ($b3_cur, epoch 1) is more than 2^32 after the entries' ($xmin .. $xmax)");

$b_hung = 0;
($r, $hung) = retry($nb, 'c2', 4, 2, 100000);
$b_hung ||= $hung;
is($r, 'true',
	'B.3: in the next xid epoch, the retry of the rolled-back operation applies');
($r, $hung) = retry($nb, 'c2', 4, 1, 10000);
$b_hung ||= $hung;
is($r, 'false',
	'B.3: in the next xid epoch, the retry of the committed operation is dismissed');
($out, $err, $hung) = client($nb, q{
	SELECT idempotent_increment('c2', 2, 1, 1)::text || ',' ||
		   idempotent_increment('c2', 2, 2, 10)::text || ',' ||
		   idempotent_increment('c2', 3, 1, 100)::text || ',' ||
		   idempotent_increment('c2', 3, 2, 1000)::text});
$b_hung ||= $hung;
is($out, 'false,false,false,false',
	'B.3: retries of the operations of B.1 and B.2 are dismissed');
ok(!$b_hung, 'B.3: no retry timed out');
unstick($nb);
is($nb->safe_psql('postgres', q{SELECT fbf_counter_value('c2')}), '111111',
	'B.3: the counter is exact (111111)');

$nb->stop;
note sprintf('run time %.1f s', time - $started);
done_testing();
