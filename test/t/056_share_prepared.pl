# Prepared transactions cannot carry a role past its share of the entries
# in flight.
#
# A role's open and prepared transactions hold at most its share of 80% of
# the pending chains' entries; a prepared transaction's charge stays in a
# row of the counter's share table with its xid until it ends.  Before, a
# table kept 64 such rows and let go of the charges of any more: a role
# that first prepared 64 transactions of one operation could then hold
# nearly all the chains in prepared transactions, and another role's
# transaction was refused ("at its capacity").  Now a table has a row for
# every transaction the server may have prepared at once
# (max_prepared_transactions), up to 256; beyond that many, PREPARE is
# refused (53400) instead.
#
#   1. t2 applies an operation (so that two roles share the counter); t1
#      prepares 70 transactions of one new operation each, then
#      transactions of 2,000 until one is refused: refused for its share
#      of the operations in flight (53400), holding no more than it;
#   2. t2's transaction of 20,000 new operations commits, all applied;
#      every prepared transaction rolled back, t1's own of 20,000 does;
#   3. on a server with max_prepared_transactions = 300, the 257th prepared
#      transaction holding operations of one counter is refused at PREPARE
#      (53400, "cannot prepare"), and its operation is not applied;
#   4. a prepared transaction takes one row of a table however many units
#      it charged: restarted with max_prepared_transactions = 100, on a
#      counter shared by key, t1 prepares two transactions of 150 keys
#      each, and t2 then prepares one of its own (before, a transaction
#      took a row per slot it charged, up to 129: t1's first was refused,
#      and one of 99 keys would have left t2 none);
#   5. a PREPARE that fails after its charges took their row (a GID in
#      use) gives back both (the abort's callback, or the sweep that finds
#      the xid ended): 120 such failures of 500 new operations each
#      (more than the rows, and than t1's share in flight), then t1 still
#      prepares a transaction, and commits one of 10,000.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;

my $node = fbf_node('share_prepared', "fbf.worker_enabled = off\nmax_prepared_transactions = 300\n");

$node->safe_psql('postgres', q{
	CREATE ROLE t1 LOGIN;
	CREATE ROLE t2 LOGIN;
	SELECT fbf_create_counter_table('pp', retention => '1 hour', expected_rate => 10);
	SELECT fbf_create_counter_table('many', retention => '1 hour');
	SELECT fbf_create_counter_table('kk', retention => '1 hour');
	SELECT fbf_create_counter_table('dd', retention => '1 hour', expected_rate => 10);
	ALTER INDEX kk_fbf SET (share_by = 'key');
	GRANT SELECT, INSERT, UPDATE ON pp, many, kk, dd TO t1, t2;});

# SQL of a transaction of role t1 prepared as `gid`: `size` new operations
# (new clients from `base`) on `counter`, of a key of its own (a prepared
# transaction keeps its rows locked)
sub prepared_batch
{
	my ($counter, $gid, $base, $size) = @_;
	return qq{BEGIN;
SELECT 'applied', count(*) FILTER (WHERE a) FROM unnest(idempotent_increment('$counter', '$gid/$base',
	ARRAY(SELECT $base + g FROM generate_series(1, $size) g),
	array_fill(1::bigint, ARRAY[$size]), array_fill(1::bigint, ARRAY[$size]))) a;
PREPARE TRANSACTION '$gid';
};
}

# run `sql` as t1 in one session, going on after errors: the operations
# its transactions applied, and its first error
sub as_t1
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', $sql, on_error_stop => 0,
		extra_params => [ '-U', 't1' ]);
	my $applied = 0;
	for my $line (split /\n/, $out)
	{
		my ($what, $n) = split /\|/, $line;
		$applied += $n if $what eq 'applied';
	}
	my ($first) = $err =~ /(ERROR: .*?)(?=\npsql:|\z)/s;
	return ($applied, $first // '');
}

is($node->safe_psql('postgres', "SELECT idempotent_increment('pp', 'b', 1, 1, 1)",
	extra_params => [ '-U', 't2' ]), 't', 't2 applies an operation');

# ---- 1. t1 prepares 70 small transactions, then large ones ----
my $sql = '';
$sql .= prepared_batch('pp', "small$_", 1_000_000 + $_, 1) for 1 .. 70;
my ($small, $err) = as_t1($sql);
is($small, 70, 't1 prepared 70 transactions of one new operation');
is($err, '', '... none refused');

$sql = '';
$sql .= prepared_batch('pp', "large$_", 2_000_000 + 10_000 * $_, 2000) for 1 .. 100;
my ($large, $refusal) = as_t1($sql);
my ($held, $share, $capacity) = $refusal =~ /hold (\d+) entries in flight; its share is (\d+) of the (\d+)/;
note "t1 prepared $large more operations; refused: $refusal";
like($refusal, qr/role "t1" holds its share of the operations in flight on counter filter "pp_fbf"/,
	't1\'s large prepared transactions are refused for its share of the operations in flight');
# each of its operations (a client's, numbered) holds two entries: its own
# and its stream annex
my $in_flight = 2 * $node->safe_psql('postgres',
	q{SELECT pending FROM fbf_counter_stats WHERE counter = 'pp'::regclass});
cmp_ok($in_flight, '<=', ($share // 0) + 2 * 2000,
	"t1's prepared transactions hold no more than its share and a batch ($in_flight entries, share " . ($share // '?') . ")");

# ---- 2. t2's transaction ----
my ($ret, $out, $t2_err) = $node->psql('postgres', q{
	SELECT count(*) FILTER (WHERE a) FROM unnest(idempotent_increment('pp', 'b',
		ARRAY(SELECT 5000000 + g FROM generate_series(1, 20000) g),
		array_fill(1::bigint, ARRAY[20000]), array_fill(1::bigint, ARRAY[20000]))) a},
	extra_params => [ '-U', 't2' ]);
is($out, '20000', 't2\'s transaction of 20,000 new operations is all applied beside t1\'s prepared ones')
  or diag($t2_err);

# ---- rolled back, what they held is let go ----
for my $gid (split /\n/, $node->safe_psql('postgres', 'SELECT gid FROM pg_prepared_xacts'))
{
	$node->safe_psql('postgres', "ROLLBACK PREPARED '$gid'");
}
my ($again, $again_err) = as_t1("SELECT 'applied', count(*) FILTER (WHERE a) FROM unnest(idempotent_increment('pp', 'a',
	ARRAY(SELECT 9000000 + g FROM generate_series(1, 20000) g),
	array_fill(1::bigint, ARRAY[20000]), array_fill(1::bigint, ARRAY[20000]))) a");
is("$again $again_err", '20000 ', 't1 applies a transaction of 20,000 after its prepared ones are rolled back');


# ---- 3. beyond the rows a table keeps, PREPARE is refused ----
$sql = '';
$sql .= prepared_batch('many', "many$_", 1_000_000 + $_, 1) for 1 .. 257;
my ($many, $many_err) = as_t1($sql);
like($many_err, qr/cannot prepare a transaction that holds new operations of counter "many"\s+DETAIL:\s+256 prepared transactions/,
	'the 257th prepared transaction on one counter is refused at PREPARE');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE 'many%'"),
	'256', '256 of them are prepared');
$node->safe_psql('postgres', "COMMIT PREPARED 'many1'");
is($node->safe_psql('postgres', "SELECT sum(value) FROM many"), '1',
	'only what a committed prepared transaction applied is counted (not the refused one\'s)');

# ---- 4. one row a prepared transaction, however many units ----
for my $gid (split /\n/, $node->safe_psql('postgres', 'SELECT gid FROM pg_prepared_xacts'))
{
	$node->safe_psql('postgres', "ROLLBACK PREPARED '$gid'");
}
$node->append_conf('postgresql.conf', "max_prepared_transactions = 100\n");
$node->restart;
$sql = '';
for my $x (1, 2)
{
	$sql .= "BEGIN;\n";
	$sql .= "SELECT 'applied', count(*) FROM idempotent_increment('kk', 'h${x}_$_', 1, 1, 1) a WHERE a;\n" for 1 .. 150;
	$sql .= "PREPARE TRANSACTION 'hog$x';\n";
}
my ($hog, $hog_err) = as_t1($sql);
is("$hog $hog_err", '300 ', 't1 prepares two transactions of 150 keys each on a counter shared by key');
($ret, $out, $err) = $node->psql('postgres', q{
	BEGIN;
	SELECT idempotent_increment('kk', 'victim', 1, 1, 1);
	PREPARE TRANSACTION 'victim';},
	extra_params => [ '-U', 't2' ]);
is("$ret $err", '0 ', 't2 then prepares a transaction of its own there');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_prepared_xacts WHERE gid IN ('hog1', 'hog2', 'victim')"),
	'3', 'all three are prepared');
$node->safe_psql('postgres', "COMMIT PREPARED '$_'") for qw(hog1 hog2 victim);
is($node->safe_psql('postgres', "SELECT count(*), sum(value) FROM kk"), '301|301',
	'their operations are counted once each');

# ---- 5. a PREPARE that fails gives back its row and its charge ----
$node->safe_psql('postgres', "SELECT idempotent_increment('dd', 'b', 1, 1, 1)",
	extra_params => [ '-U', 't2' ]);
my ($dup) = as_t1(prepared_batch('dd', 'dup', 1, 1));
is($dup, 1, 't1 prepares a transaction "dup"');
$sql = '';
$sql .= prepared_batch('dd', 'dup', 1_000_000 * $_, 500) for 1 .. 120;
my ($dups, $dup_err) = as_t1($sql);
like($dup_err, qr/transaction identifier "dup" is already in use/,
	'PREPARE of another transaction as "dup" fails (120 times)');
is(($node->psql('postgres', "BEGIN; SELECT idempotent_increment('dd', 'after', 1, 1, 1); PREPARE TRANSACTION 'after'",
	extra_params => [ '-U', 't1' ]))[0], 0, 't1 prepares another transaction: the failures left no row taken');
my ($big, $big_err) = as_t1("SELECT 'applied', count(*) FILTER (WHERE a) FROM unnest(idempotent_increment('dd', 'a',
	ARRAY(SELECT 500000000 + g FROM generate_series(1, 10000) g),
	array_fill(1::bigint, ARRAY[10000]), array_fill(1::bigint, ARRAY[10000]))) a");
is("$big $big_err", '10000 ', 't1 commits 10,000 new operations: the failures left no charge in flight');
$node->safe_psql('postgres', "COMMIT PREPARED '$_'") for qw(dup after);
is($node->safe_psql('postgres', "SELECT sum(value) FROM dd"), '10003',
	'dd counted what was committed, none of the failures');

done_testing();
