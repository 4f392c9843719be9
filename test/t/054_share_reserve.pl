# The pending chains are shared: a unit's new operations that wait there
# for the next period's bits take at most its share of the chains before
# their last fifth, and that fifth is kept for the units that did not
# flood them.
#
# A split frees no room in the filters of the current period, so a flood
# of new operations beyond what they take waits on the pending chains for
# the next period's bits.  The shares of the rate judge a unit against the
# capacity of the window grown to its cap, which a small window's flood is
# far from: before the reserve, such a flood filled the chains, grew the
# window to its cap within the period (each full chain splits it, which
# frees no room), and then every operation that found its chain full was
# refused (53400, "at its capacity"), the victim's too.  With the reserve
# alone, a flood within its share of the rate still filled the rest of the
# chains, and a light unit beside it found only the reserve, of which it
# may take half (so that a newcomer finds the rest): refused there for
# having spent its part, for the flood's sake.  Now a unit whose entries
# wait is judged against its share of the chains before their reserve
# (53400, "holds its share of the pending pages"), and an operation that
# would take room on the last fifth of its chain asks the shares first: a
# unit that asked more than its share of the last two periods is refused
# there (53400, "has filled the pending pages ... up to the part kept for
# others"), a light one once it has taken half of what was left there.
#
#   1. t2 applies a few operations; t1 floods a counter planned for 10
#      operations a second with committed batches of 5,000 new operations
#      until it is refused, then of 100, then of 10 (so that its entries
#      fill the chains as far as it may): it is refused for its share of
#      the pending pages (53400), never at the reserve nor "at its
#      capacity"; what its batches applied is counted once;
#   2. then t2's 300 new operations, one a statement, are all applied
#      (none refused, none dismissed);
#   3. t1 is refused again;
#   4. a unit alone takes the reserve only while the window can grow: on
#      a second counter, t1 alone runs the same flood from one session (so
#      that the rate grows the window once, and the reserve does the rest
#      of its growth): the batch that first meets the reserve grows the
#      window to its cap (fbf.max_filter_size) and is then refused there
#      ("has filled the pending pages", "It alone sends"), never "at its
#      capacity"; then t2, a newcomer, has its 300 new operations all
#      applied (before, t1 alone filled the chains to the last page and t2
#      found them full: refused "at its capacity" 189 times of 300), and
#      t1 is refused again, now for its share of the pending pages;
#   5. the reserve is not first come, first served: on that counter, t3,
#      light beside t1, floods the reserve t1 left with the same committed
#      batches until it is refused at the reserve, having spent its part
#      of it (half of what was left when it came); then t4, a newcomer,
#      has its 300 new operations all applied (before, t3 took the whole
#      reserve and t4 found the chains full: refused "at its capacity"
#      183 times of 300);
#   6. a unit is weighed by what it asked, not by what it kept: on a third
#      counter, t1 applies 10 operations, then sends 40 batches of 5,000
#      new operations, each rolled back (or refused), so that it keeps
#      only its 10; t2 then floods with the committed batches of 1. until
#      refused for its share of the pending pages, and t1 floods the rest
#      the same way: t1 is refused at the reserve as heavy, since it asked
#      far more than t2 (weighed by what each kept, t1 would be the light
#      one, and take the reserve).
#   7. sections 1 and 3b again on a cuckoo window (which grows when a
#      block is full, so that its flood meets its share of the rate
#      first): t1's flood is refused for a share of its own, and t2's
#      9,000 new operations are never refused, and dismissed within the
#      target (before, each split of the flood's let its blocks take more
#      of the period's entries than their spent fingerprint bits allow:
#      the estimate reached 3.4 times the target, and 31 of t2's 9,000
#      were dismissed).
#   8. what a unit has in flight counts among its entries on the chains:
#      on a fourth counter, t2 applies 10 operations; t1 records 20,000
#      new operations in a transaction it keeps open (40,000 entries,
#      within its share in flight, recorded while the filter's pages had
#      room), and floods from another session: refused for its share of
#      the pending pages, with what it has in flight counted (it applies
#      no more with its open transaction than the first counter's flood
#      did alone); t2's 9,000
#      new operations then are never refused (counting only the entries
#      that found their page full, t1's flood took the chains to their
#      reserve beside its open transaction);
#   9. a flood among the units the table cannot tell apart: on a counter
#      shared by key, key c applies 10 operations and 127 decoy keys one
#      each, so that every slot of the table is held, and key a, in its
#      last slot, floods with committed batches of 300: refused only for
#      its share of the pending pages; then key e, a newcomer to the last
#      slot, has its 300 new operations and key c its 9,000 all taken
#      (before, the last slot was judged on the rate alone and light at
#      the reserve: the flood filled the chains to the last page, and key
#      c was refused "at its capacity" 86 times of 90 batches);
#  10. a subtransaction that rolls back gives back what its operations
#      hold in flight: on a fifth counter t2 applies 10 operations, and t1
#      in one transaction records 20,000 new operations in a savepoint it
#      rolls back, 20,000 more, 5,000 in a PL/pgSQL block whose error is
#      caught, and 5,000 more in a savepoint it releases: none refused
#      (before, the rolled back operations stayed charged until the
#      transaction ended, and the second batch was refused for t1's share
#      in flight); then 2,100 more are refused in flight, the released
#      savepoint's operations counted;
#  11. a flood among many units of one tenant: on a counter shared by key,
#      key v applies 10 operations, t1 then 1,000 keys one operation each
#      (so that the last slot stands for a thousand shares), and key a, in
#      that slot, floods with 70 committed batches of 1,000, refused once
#      the slot holds its share of the pending pages; then key v's 300 new
#      operations, one a transaction, are all taken (before, the others'
#      max-min weighed the flood as a thousand light keys, and v's level
#      there fell to a share: refused for its share of the pending pages
#      249 times of 300).
# The background worker is off, so that no pass drains or refreshes the
# window meanwhile, and a period lasts minutes (a retention of an hour):
# the backlog waits on the chains for the whole test.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;

my $node = fbf_node('share_reserve', "fbf.worker_enabled = off\n");

# The Bloom counters are planned for 7.5 operations a second: a plan for
# the rate over the pages' capacity part (three quarters) has the shape
# that the figures below were measured on (docs/design.md, "Planned for
# what its pages take"); the cuckoo window is planned for its rate.
$node->safe_psql('postgres', q{
	CREATE ROLE t1 LOGIN;
	CREATE ROLE t2 LOGIN;
	CREATE ROLE t3 LOGIN;
	CREATE ROLE t4 LOGIN;
	SELECT fbf_create_counter_table('fl', retention => '1 hour', expected_rate => 7.5);
	SELECT fbf_create_counter_table('alone', retention => '1 hour', expected_rate => 7.5);
	SELECT fbf_create_counter_table('asks', retention => '1 hour', expected_rate => 7.5);
	SELECT fbf_create_counter_table('ck', retention => '1 hour', expected_rate => 10, filter => 'cuckoo');
	SELECT fbf_create_counter_table('inf', retention => '1 hour', expected_rate => 7.5);
	SELECT fbf_create_counter_table('many', retention => '1 hour', expected_rate => 7.5);
	ALTER INDEX many_fbf SET (share_by = 'key');
	SELECT fbf_create_counter_table('sub', retention => '1 hour', expected_rate => 7.5);
	SELECT fbf_create_counter_table('keys', retention => '1 hour', expected_rate => 7.5);
	ALTER INDEX keys_fbf SET (share_by = 'key');
	GRANT SELECT, INSERT, UPDATE ON fl, alone, asks, ck, inf, many, sub, keys TO t1, t2, t3, t4;});

# one batch of `size` new operations (new clients from `base`) as role
# `role` (t1 unless given) on `counter`, key 'a': how many it applied (the
# filter answers a new client's first operation, and may dismiss it at its
# target rate), or undef and the error's message
sub flood_batch
{
	my ($counter, $base, $size, $role) = @_;
	$role //= 't1';
	my ($ret, $out, $err) = $node->psql('postgres', qq{
		SELECT count(*) FILTER (WHERE a) FROM unnest(idempotent_increment('$counter', 'a',
			ARRAY(SELECT $base + g FROM generate_series(1, $size) g),
			array_fill(1::bigint, ARRAY[$size]), array_fill(1::bigint, ARRAY[$size]))) a},
		extra_params => [ '-U', $role ]);
	return ($out, '') if $ret == 0;
	$err =~ s/^psql:[^:]*:\d+: //;
	return (undef, $err);
}

# a flood of `counter` by `role` (t1 unless given): committed batches of
# 5,000 new operations from client `base` (1,000,000 unless given) until
# one is refused, then of 100, then of 10, so that its committed entries
# fill the chains as far as it may: the operations applied, and the first
# refusal
sub flood
{
	my ($counter, $role, $base) = @_;
	my ($applied, $first) = (0, undef);
	$base //= 1_000_000;
	for my $size (5000, 100, 10)
	{
		for (1 .. 200)
		{
			my ($n, $err) = flood_batch($counter, $base, $size, $role);
			$base += 10_000;
			if (!defined $n)
			{
				$first //= $err;
				last;
			}
			$applied += $n;
		}
	}
	return ($applied, $first // '');
}

# t1 alone floods `counter` from one session, with the flood's batches,
# each followed by the window's partitions: the operations applied, the
# partitions before and after the first refused batch, and its error
sub flood_alone
{
	my ($counter) = @_;
	my ($sql, $base) = ('', 1_000_000);
	for my $size ((5000) x 30, (100) x 30, (10) x 30)
	{
		$sql .= qq{SELECT 'applied', count(*) FILTER (WHERE a) FROM unnest(idempotent_increment('$counter', 'a',
			ARRAY(SELECT $base + g FROM generate_series(1, $size) g),
			array_fill(1::bigint, ARRAY[$size]), array_fill(1::bigint, ARRAY[$size]))) a;
			SELECT 'parts', partitions FROM fbf_counter_stats WHERE counter = '$counter'::regclass;
};
		$base += 10_000;
	}
	my ($ret, $out, $err) = $node->psql('postgres', $sql, on_error_stop => 0,
		extra_params => [ '-U', 't1' ]);
	my ($applied, $prev, $last, $before, $after) = (0, '', 0, undef, undef);
	for my $line (split /\n/, $out)
	{
		my ($what, $n) = split /\|/, $line;
		$applied += $n if $what eq 'applied';
		if ($what eq 'parts')
		{
			# a batch refused: no 'applied' line before its partitions
			($before, $after) = ($last, $n) if $prev ne 'applied' && !defined $before;
			$last = $n;
		}
		$prev = $what;
	}
	my ($first) = $err =~ /(ERROR: .*?)(?=\npsql:|\z)/s;
	return ($applied, $before // -1, $after // -1, $first // '');
}

# t2 is a unit of the counter's shares before the flood
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM generate_series(1, 10) g
	 WHERE idempotent_increment('fl', 'b', 100 + g, 1, 1)},
	extra_params => [ '-U', 't2' ]), '10', 't2 applies 10 operations');

# ---- 1. the flood, until refused ----
my ($t1_applied, $refusal) = flood('fl');
note "t1 applied $t1_applied operations, first refused: $refusal";
like($refusal, qr/role "t1" holds its share of the pending pages of counter filter "fl_fbf"/,
	"t1's flood is refused for its share of the pending pages, before the chains' reserve");
is($node->safe_psql('postgres', "SELECT fbf_counter_value('fl', 'a')"), $t1_applied,
	't1\'s batches counted each operation they applied once');

# ---- 2. t2 takes the reserve ----

# 300 new operations of `role` (t2 unless given) on `counter`, key 'b',
# new clients from `from` + 1, one a statement: "applied refused dismissed"
sub newcomer
{
	my ($counter, $from, $role) = @_;
	my ($applied, $refused, $dismissed) =
	  fbf_ops_one_by_one($node, $role // 't2', $counter, 'b', "$from + g, 1", 300);
	return "$applied $refused $dismissed";
}

is(newcomer('fl', 1000), '300 0 0',
	't2\'s 300 new operations after the flood are all applied: none refused, none dismissed');
is($node->safe_psql('postgres', "SELECT fbf_counter_value('fl', 'b')"), '310',
	't2\'s key counted each of its operations once');

# ---- 3. t1 is still refused ----
like((flood_batch('fl', 9_000_000, 10))[1], qr/role "t1" holds its share of the pending pages/,
	't1 is refused again, after t2\'s operations');

# ---- 3b. t2's load within its share of the chains ----

# `n` committed batches of `size` new operations of `role` on `counter`,
# key `key` ('c' unless given), from one session: the operations applied,
# and the errors
sub batches
{
	my ($counter, $role, $base, $n, $size, $key) = @_;
	my $sql = '';
	$key //= 'c';
	for (1 .. $n)
	{
		$sql .= qq{SELECT count(*) FILTER (WHERE a) FROM unnest(idempotent_increment('$counter', '$key',
			ARRAY(SELECT $base + g FROM generate_series(1, $size) g),
			array_fill(1::bigint, ARRAY[$size]), array_fill(1::bigint, ARRAY[$size]))) a;
};
		$base += 10_000;
	}
	my ($ret, $out, $err) = $node->psql('postgres', $sql, on_error_stop => 0,
		extra_params => [ '-U', $role ]);
	my $applied = 0;
	$applied += $_ for split /\n/, $out;
	my @errors = $err =~ /(?:ERROR|FATAL|PANIC):\s+(.*)/g;
	# without ON_ERROR_STOP psql ends well after an error: not so a lost
	# connection
	push @errors, "psql exited with $ret" if $ret != 0;
	return ($applied, @errors);
}

# 9,000 new operations (18,000 entries with their streams' annexes): more
# than half of the reserve t2 would find beside a flood that filled the
# rest (about 13,000 entries of its 26,000 here), less than what t1 left
# before the reserve (26,000)
my ($t2_applied, @t2_errors) = batches('fl', 't2', 60_000_000, 90, 100);
note "t2 applied $t2_applied of 9000 beside t1's flood; errors: @t2_errors";
is(scalar(@t2_errors), 0,
	't2\'s 9,000 new operations beside t1\'s flood are never refused');
cmp_ok($t2_applied, '>=', 8990, 'and are applied (at most 0.1% dismissed)');

# ---- 4. a unit alone, then a newcomer ----
my ($alone_applied, $parts_before, $parts_after, $alone_refusal) = flood_alone('alone');
my ($bytes, $cap) = split /\|/, $node->safe_psql('postgres', q{
	SELECT bytes, pg_size_bytes(current_setting('fbf.max_filter_size'))
	  FROM fbf_counter_stats WHERE counter = 'alone'::regclass});
note "t1 alone applied $alone_applied operations; its first refused batch grew the window from $parts_before to $parts_after partitions, $bytes bytes (cap $cap); refused: $alone_refusal";
like($alone_refusal, qr/role "t1" has filled the pending pages of counter filter "alone_fbf" up to the part kept for others\s+DETAIL:\s+It alone sends new operations/,
	'alone, t1 is refused at the reserve as a unit alone, not "at its capacity"');
cmp_ok($parts_after, '>', $parts_before,
	'alone, the batch that met the reserve grew the window first');
cmp_ok($bytes, '>', $cap / 2, 'alone, t1 was refused once the window was at its cap');
is($node->safe_psql('postgres', "SELECT fbf_counter_value('alone', 'a')"), $alone_applied,
	't1\'s batches alone counted each operation they applied once');
is(newcomer('alone', 0), '300 0 0',
	'a newcomer after the flood of a unit alone has its 300 new operations all applied');
like((flood_batch('alone', 9_000_000, 5000))[1],
	qr/role "t1" holds its share of the pending pages of counter filter "alone_fbf"/,
	't1 is refused again, now for its share of the pending pages beside the newcomer');

# ---- 5. the reserve is not first come, first served ----
my ($t3_applied, $t3_refusal) = flood('alone', 't3', 20_000_000);
note "t3 applied $t3_applied operations, first refused: $t3_refusal";
like($t3_refusal, qr/role "t3" has filled the pending pages of counter filter "alone_fbf" up to the part kept for others\s+DETAIL:\s+It put as many new operations on the last fifth/,
	"t3, light beside t1, is refused at the reserve once it took its part");
cmp_ok($t3_applied, '>', 1000, 't3 took a part of the reserve before');
is(newcomer('alone', 5000, 't4'), '300 0 0',
	'a newcomer after t3 has its 300 new operations all applied');

# ---- 6. weighed by what it asked ----
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM generate_series(1, 10) g
	 WHERE idempotent_increment('asks', 'a', 100 + g, 1, 1)},
	extra_params => [ '-U', 't1' ]), '10', 't1 applies 10 operations on a third counter');
my $asked_sql = '';
for my $b (1 .. 40)
{
	my $base = 30_000_000 + $b * 10_000;
	$asked_sql .= qq{BEGIN;
		SELECT count(*) FROM unnest(idempotent_increment('asks', 'a',
			ARRAY(SELECT $base + g FROM generate_series(1, 5000) g),
			array_fill(1::bigint, ARRAY[5000]), array_fill(1::bigint, ARRAY[5000])));
		ROLLBACK;
};
}
$node->psql('postgres', $asked_sql, on_error_stop => 0, extra_params => [ '-U', 't1' ]);
is($node->safe_psql('postgres', "SELECT fbf_counter_value('asks', 'a')"), '10',
	't1 kept only its 10 operations: its batches were rolled back');
my ($asks_applied, $asks_refusal) = flood('asks', 't2', 40_000_000);
note "t2 applied $asks_applied operations beside t1's rolled back batches, first refused: $asks_refusal";
# t1 heavy beside t2 needs t2's demand well under t1's (max-min over four
# fifths of the two): t1 asked 200,010
cmp_ok($asks_applied, '<', 120_000, 't2 asked well under two thirds of what t1 asked');
like($asks_refusal, qr/role "t2" holds its share of the pending pages of counter filter "asks_fbf"/,
	't2, beside t1\'s rolled back batches, is refused for its share of the pending pages');
is($node->safe_psql('postgres', "SELECT fbf_counter_value('asks', 'a')"), $asks_applied + 10,
	't2\'s batches counted each operation they applied once');
my ($t1_kept, $t1_refusal) = flood('asks', 't1', 50_000_000);
note "t1 then applied $t1_kept operations, first refused: $t1_refusal";
cmp_ok($t1_kept, '>', 1000, 't1 took what t2 left before the reserve');
like($t1_refusal,
	qr/role "t1" has filled the pending pages of counter filter "asks_fbf" up to the part kept for others\s+DETAIL:\s+It asked for more than its share/,
	't1, which kept far less than t2 but asked 200,000 more, is refused at the reserve as heavy');

# ---- 7. the same on a cuckoo window ----
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM generate_series(1, 10) g
	 WHERE idempotent_increment('ck', 'b', 100 + g, 1, 1)},
	extra_params => [ '-U', 't2' ]), '10', 't2 applies 10 operations on a cuckoo counter');
my ($ck_applied, $ck_refusal) = flood('ck');
note "t1 applied $ck_applied operations on the cuckoo counter, first refused: $ck_refusal";
like($ck_refusal, qr/role "t1" (holds its share of the pending pages|is over its share of the capacity) of counter filter "ck_fbf"/,
	"cuckoo: t1's flood is refused for a share of its own");
$node->safe_psql('postgres', 'CREATE EXTENSION pg_walinspect');
my $ck_start = $node->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
my ($ck_t2, @ck_errors) = batches('ck', 't2', 60_000_000, 90, 100);
note "t2 applied $ck_t2 of 9000 beside t1's flood on the cuckoo counter; errors: @ck_errors";
# An entry that waits on its chain is recorded in its stream when it is
# stored, not by every drain that passes over it: before, each of t2's
# drains recorded the streams of all the flood's waiting entries again.
my $ck_end = $node->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
$node->safe_psql('postgres', 'SELECT pg_switch_wal()');
my ($ck_streams, $ck_stores, $ck_bytes) = split /\|/, $node->safe_psql('postgres', qq{
	SELECT count(*) FILTER (WHERE record_type = 'STREAMS'),
		   count(*) FILTER (WHERE record_type = 'PAGES'), sum(record_length)
	  FROM pg_get_wal_records_info('$ck_start', '$ck_end') WHERE resource_manager = 'fbf'});
note "fbf's WAL of t2's 9,000 operations: $ck_bytes bytes, $ck_streams streams records, $ck_stores stores";
cmp_ok($ck_bytes / 9000, '<', 500,
	"cuckoo: t2's operations beside the flood's waiting entries write no more fbf WAL than their own");
is(scalar(@ck_errors), 0, 'cuckoo: t2\'s 9,000 new operations beside t1\'s flood are never refused');
# A split spends a routing bit of every fingerprint of the epochs that
# began before it, this period's too: a block holds this period's entries
# only up to its capacity with each weighed by two to the bits it spent,
# and the rest waits for the next period.  Before, the flood's entries
# filled every block it split, and the window's estimate reached 3.4
# times the target: 31 of t2's 9,000 were dismissed (0.34%).
my ($ck_fpp, $ck_target, $ck_parts) = split /\|/, $node->safe_psql('postgres', q{
	SELECT estimated_fpp, target_fpp, partitions FROM fbf_counter_stats
	 WHERE counter = 'ck'::regclass});
note "cuckoo window after the flood: $ck_parts partitions, estimated false-positive rate $ck_fpp (target $ck_target)";
cmp_ok($ck_fpp, '<=', $ck_target, 'cuckoo: the flood leaves the estimate within the target');
cmp_ok($ck_t2, '>=', 8982, 'cuckoo: t2\'s operations are applied (at most twice the target dismissed)');

# ---- 8. entries in flight count on the chains ----
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM generate_series(1, 10) g
	 WHERE idempotent_increment('inf', 'b', 100 + g, 1, 1)},
	extra_params => [ '-U', 't2' ]), '10', 't2 applies 10 operations on a fourth counter');
my $open = $node->background_psql('postgres', on_error_stop => 1, extra_params => [ '-U', 't1' ]);
is($open->query_safe(q{
	BEGIN;
	SELECT count(*) FILTER (WHERE a) FROM unnest(idempotent_increment('inf', 'o',
		ARRAY(SELECT 90000000 + g FROM generate_series(1, 20000) g),
		array_fill(1::bigint, ARRAY[20000]), array_fill(1::bigint, ARRAY[20000]))) a}),
	'20000', 't1 records 20,000 new operations in a transaction it keeps open');
my ($inf_applied, $inf_refusal) = flood('inf');
note "t1 then applied $inf_applied operations from another session, first refused: $inf_refusal";
like($inf_refusal, qr/role "t1" holds its share of the pending pages of counter filter "inf_fbf"/,
	't1\'s flood beside its open transaction is refused for its share of the pending pages');
# the first counter's flood, alone on the chains, reached its share with
# 44,290 operations: here its open transaction's 20,000 count among them
cmp_ok($inf_applied + 20_000, '<=', $t1_applied + 1_000,
	'counting the entries its open transaction holds in flight');
my ($inf_t2, @inf_errors) = batches('inf', 't2', 60_000_000, 90, 100);
note "t2 applied $inf_t2 of 9000 beside t1's open transaction and flood; errors: @inf_errors";
is(scalar(@inf_errors), 0,
	't2\'s 9,000 new operations beside t1\'s open transaction and flood are never refused');
$open->query_safe('ROLLBACK');
$open->quit;

# ---- 9. a flood among the units the table cannot tell apart ----
# as `role` on `counter`, `n` new operations in one statement, each on key
# `key` (an SQL expression of g, 1 .. n) from client `base` + g: how many
# it applied
sub keyed_ops
{
	my ($counter, $role, $n, $key, $base) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT count(*) FROM generate_series(1, $n) g
		 WHERE idempotent_increment('$counter', $key, $base + g, 1, 1)},
		extra_params => [ '-U', $role ]);
}
is(keyed_ops('many', 't2', 10, q{'c'}, 100), '10', 'key c applies 10 operations on a counter shared by key');
is(keyed_ops('many', 't1', 127, q{'d' || g}, 200), '127', '127 decoy keys apply one operation each');
# key a of t1 floods `counter` with `n` committed batches of `size` new
# operations from client `base` (`where`: which units it is among, for the
# tests' names): refused, and only for its share of the pending pages, and
# each operation it applied counted once; what it applied
sub key_flood
{
	my ($counter, $base, $n, $size, $where) = @_;
	my ($applied, @refusals) = batches($counter, 't1', $base, $n, $size, 'a');
	note "key a, $where, applied $applied operations, refused "
	  . scalar(@refusals) . " times, first: " . ($refusals[0] // '');
	cmp_ok(scalar(@refusals), '>', 0, "the flood $where is refused");
	is(scalar(grep { !/^key "a" holds its share of the pending pages of counter filter "${counter}_fbf"/ } @refusals), 0,
		"... always for its share of the pending pages ($where): never at the reserve, nor \"at its capacity\"");
	is($node->safe_psql('postgres', "SELECT fbf_counter_value('$counter', 'a')"), $applied,
		"the flood's batches ($where) counted each operation they applied once");
	return $applied;
}
# the flood's batches of 300 (600 entries: within a share in flight of 129)
key_flood('many', 5_000_000, 300, 300, 'in the table\'s last slot');
my ($many_e, @many_e_errors) = batches('many', 't2', 70_000_000, 3, 100, 'e');
note "key e, a newcomer to the last slot, applied $many_e of 300; errors: @many_e_errors";
is(scalar(@many_e_errors), 0,
	'key e\'s 300 new operations in the last slot beside the flood there are never refused');
my ($many_c, @many_errors) = batches('many', 't2', 60_000_000, 90, 100, 'c');
note "key c applied $many_c of 9000 beside the flood in the last slot; errors: @many_errors";
is(scalar(@many_errors), 0,
	'key c\'s 9,000 new operations beside a flood in the last slot are never refused');

# ---- 10. a subtransaction that rolls back gives back its charges ----
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM generate_series(1, 10) g
	 WHERE idempotent_increment('sub', 'b', 100 + g, 1, 1)},
	extra_params => [ '-U', 't2' ]), '10', 't2 applies 10 operations on a fifth counter');
# `size` new operations (20,000 unless given) from client `base` on key 'o'
sub sub_batch
{
	my ($base, $size) = @_;
	$size //= 20_000;
	return qq{SELECT count(*) FILTER (WHERE a) FROM unnest(idempotent_increment('sub', 'o',
		ARRAY(SELECT $base + g FROM generate_series(1, $size) g),
		array_fill(1::bigint, ARRAY[$size]), array_fill(1::bigint, ARRAY[$size]))) a;};
}
my ($sub_ret, $sub_out, $sub_err) = $node->psql('postgres', 'BEGIN; SAVEPOINT s; ' . sub_batch(90_000_000)
	. ' ROLLBACK TO SAVEPOINT s; ' . sub_batch(91_000_000) . q{
	DO $$
	BEGIN
		PERFORM idempotent_increment('sub', 'o', 95000000 + g, 1, 1) FROM generate_series(1, 5000) g;
		RAISE EXCEPTION 'caught';
	EXCEPTION WHEN raise_exception THEN NULL;
	END $$;
	SAVEPOINT k; } . sub_batch(92_000_000, 5_000) . q{ RELEASE SAVEPOINT k;
	SAVEPOINT m; } . sub_batch(93_000_000, 2_100) . q{ ROLLBACK TO SAVEPOINT m;
	COMMIT;},
	on_error_stop => 0, extra_params => [ '-U', 't1' ]);
note "t1's transaction: $sub_out $sub_err";
# 20,000 operations take 40,000 entries in flight with their streams'
# annexes: t1's share is 80% of the chains' 130,176 over two, 52,070, which
# the committed 50,000 are within; counting the rolled back ones, the
# second batch would hold 80,000.  A savepoint released leaves its charge
# to the transaction: the last batch's 4,200 entries are over the share.
is($sub_out, "20000\n20000\n5000",
	't1\'s batches after a savepoint and a PL/pgSQL block that rolled back are not refused in flight');
my @sub_errors = $sub_err =~ /ERROR:\s+(.*)/g;
is(scalar(@sub_errors), 1, 'one batch of t1\'s is refused ...');
like($sub_errors[0] // '', qr/^role "t1" holds its share of the operations in flight on counter filter "sub_fbf"/,
	'... the one after a released savepoint, whose operations still count in flight');
is($node->safe_psql('postgres', "SELECT fbf_counter_value('sub', 'o')"), '25000',
	'only the batches that committed are counted');

# ---- 11. a flood among many units of one tenant ----
is(keyed_ops('keys', 't2', 10, q{'v'}, 100), '10', 'key v applies 10 operations on a counter shared by key');
is(keyed_ops('keys', 't1', 1000, q{'d' || g}, 200), '1000', 't1\'s 1,000 keys apply one operation each');
# batches of 1,000 (2,000 entries: within the last slot's share in flight,
# which stands for the thousand keys)
my $keys_applied = key_flood('keys', 7_000_000, 70, 1000, 'among t1\'s 1,000 keys');
# so that v meets the chains the flood filled to the slot's share
cmp_ok($keys_applied, '>', 40_000, 'the flood among t1\'s keys took more than 40,000 operations');
# one operation a statement, each its own transaction: a key's share in
# flight is 1/1,015 of 80% of the chains (about 100 entries)
my ($keys_ret, $keys_out, $keys_err) = $node->psql('postgres',
	join('', map { "SELECT idempotent_increment('keys', 'v', " . (80_000_000 + $_) . ", 1, 1);\n" } 1 .. 300),
	on_error_stop => 0, extra_params => [ '-U', 't2' ]);
my @keys_v_errors = $keys_err =~ /ERROR:\s+(.*)/g;
my $keys_v = () = $keys_out =~ /^t$/mg;
note "key v applied $keys_v of 300 beside the flood among t1's keys; errors: "
  . scalar(@keys_v_errors) . ", first: " . ($keys_v_errors[0] // '');
is(scalar(@keys_v_errors), 0,
	'key v\'s 300 new operations beside a flood among a tenant\'s 1,000 keys are never refused');
cmp_ok($keys_v, '>=', 299, 'and are applied (the filter may dismiss one at its target)');

done_testing();
