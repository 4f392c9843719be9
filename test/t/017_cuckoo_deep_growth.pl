# Copyright: the fbf authors.  TAP test, run by test/check.sh.
#
# A cuckoo index grown from one bucket page through 17 doublings, with
# entries inserted while it had one page.
#
# A tag keeps 15 rest bits; each doubling after an entry's insertion uses
# up one (cuckoo_tag_split).  An entry inserted at one page has none left
# after 15 doublings, and from then on every split copies it to both
# halves: 2 copies after the 16th doubling, 4 after the 17th, 2^(d - 15)
# after d.  cuckoo_index_verify must accept that (it used to allow at most
# 2 copies of a heap TID), lookups must still find every row exactly once,
# and VACUUM must remove every copy.
#
# 2^17 bucket pages are 1 GiB, far too many rows to reach by ordinary
# growth in a test.  So the keys are chosen: the index's operator class
# here hashes an int8 to itself (int8pl(k, 0) = k), and cuckoo_key() takes
# a key's page address from fmix64(hash), which is invertible, so the test
# picks each key's address.  Doubling samples the load of 16 pages, at
# fractions i/16 + 1/32 of the address space; "window" keys are put in the
# 2^-16-wide slice just above each of those 16 points.  Up to 2^16 pages
# each slice lies within one page, the sampled one, so once those 16 pages
# are dense every insert into them begins a doubling (once the one under
# way has ended), and the doublings run on until the slices are split, at
# 2^17 pages.  The table is UNLOGGED
# so that the gigabyte of split pages writes no WAL.
use strict;
use warnings;

use Math::BigInt;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('deep');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'fbf'
autovacuum = off
fbf.worker_enabled = off
});
$node->start;

# ---- keys with chosen addresses ----

my $two64 = Math::BigInt->new(2)->bpow(64);
my $two63 = Math::BigInt->new(2)->bpow(63);
my $inv1 = Math::BigInt->from_hex('ff51afd7ed558ccd')->bmodinv($two64);
my $inv2 = Math::BigInt->from_hex('c4ceb9fe1a85ec53')->bmodinv($two64);

sub xorshift33
{
	my ($h) = @_;
	return $h->copy->bxor($h->copy->brsft(33));
}

# The int8 whose fmix64 (murmur3's finaliser, cuckoo_key's address) is
# $addr, a Math::BigInt in [0, 2^64).
sub key_for_addr
{
	my ($addr) = @_;
	my $h = xorshift33($addr);
	$h = $h->bmul($inv2)->bmod($two64);
	$h = xorshift33($h);
	$h = $h->bmul($inv1)->bmod($two64);
	$h = xorshift33($h);
	$h->bsub($two64) if $h->bcmp($two63) >= 0;
	return $h->bstr;
}

srand(17);

# an address anywhere: 16 random bits at a time
sub random_addr
{
	my $a = Math::BigInt->new(0);
	$a = $a->blsft(16)->badd(int(rand(65536))) for 1 .. 4;
	return $a;
}

# an address in the slice [i/16 + 1/32, i/16 + 1/32 + 2^-16)
my $slice = Math::BigInt->new(2)->bpow(48);
sub window_addr
{
	my ($i) = @_;
	my $r = Math::BigInt->new(int(rand(65536)))->blsft(32)
	  ->badd(int(rand(65536)) * 65536 + int(rand(65536)));
	return Math::BigInt->new($i)->blsft(60)
	  ->badd(Math::BigInt->new(2)->bpow(59))->badd($r->bmod($slice));
}

my %used;
sub insert_keys
{
	my ($kind, @keys) = @_;
	my @fresh = grep { !$used{$_}++ } @keys;
	return 0 unless @fresh;
	$node->safe_psql('postgres',
		    "INSERT INTO g (k, kind) SELECT k, '$kind' FROM unnest('{"
		  . join(',', @fresh)
		  . "}'::int8[]) AS k");
	return scalar @fresh;
}

$node->safe_psql('postgres', q{
	CREATE EXTENSION fbf;
	-- hash(k) = k + 0: the test chooses each key's hash
	CREATE OPERATOR CLASS cuckoo_int8_identity FOR TYPE int8 USING cuckoo AS
		OPERATOR 1 = (int8, int8),
		FUNCTION 1 int8pl(int8, int8);
	CREATE UNLOGGED TABLE g (id serial PRIMARY KEY, k int8, kind text);
	CREATE INDEX g_k ON g USING cuckoo (k cuckoo_int8_identity);
});
is($node->safe_psql('postgres',
		'SELECT bucket_pages, doublings FROM cuckoo_index_stats(\'g_k\')'),
	'1|0', 'the index starts at one bucket page');

# entries inserted while the table has one page (and, with some luck,
# two: the window keys below also fill page 0)
my $early = insert_keys('early', map { key_for_addr(random_addr()) } 1 .. 300);
is($node->safe_psql('postgres', 'SELECT doublings FROM cuckoo_index_stats(\'g_k\')'),
	'0', 'the early entries went into a one-page table');

# window keys, round robin over the 16 slices, until the cascade has run.
# A doubling of n pages is carried out by the n inserts that follow it, a
# split step each (issue 16, item 4): while one is under way, rows with
# random keys ("filler", spread over the whole table, so they leave the
# sampled pages the densest) drive it to its end.
my $doublings = 0;
my $growing = 'f';
my ($batches, $fillers) = (0, 0);
while (($doublings < 17 || $growing eq 't') && $batches < 400)
{
	if ($growing eq 't')
	{
		$node->safe_psql('postgres', q{
			INSERT INTO g (k, kind)
			SELECT (random() * 9.2e18)::int8, 'filler' FROM generate_series(1, 20000)});
		$fillers += 20000;
	}
	else
	{
		insert_keys('window', map { key_for_addr(window_addr($_ % 16)) } 0 .. 799);
	}
	$batches++;
	($doublings, $growing) = split /\|/, $node->safe_psql('postgres',
		'SELECT doublings, CASE WHEN growing THEN \'t\' ELSE \'f\' END FROM cuckoo_index_stats(\'g_k\')');
}
note "batches: $batches, filler rows: $fillers, doublings: $doublings";
is($doublings, 17, 'the index doubled 17 times');
is($node->safe_psql('postgres',
		'SELECT bucket_pages >= 131072, growing FROM cuckoo_index_stats(\'g_k\')'),
	't|f', '2^17 bucket pages, not growing');

# some entries inserted at the end, anywhere
insert_keys('late', map { key_for_addr(random_addr()) } 1 .. 300);

# every early entry is in 4 pages now: 3 extra copies each (entries
# inserted at two pages have 2, and none has more than 4)
my ($rows, $entries) = split /\|/, $node->safe_psql('postgres', q{
	SELECT (SELECT count(*) FROM g), entries FROM cuckoo_index_stats('g_k')});
cmp_ok($entries - $rows, '>=', 3 * $early,
	"early entries have 4 copies ($rows rows, $entries entries)");

my ($ok, $out, $err) = (0, '', '');
($ok, $out, $err) = $node->psql('postgres',
	"SELECT entries, heap_tuples, dead_entries FROM cuckoo_index_verify('g_k')");
is($ok, 0, 'cuckoo_index_verify accepts 4 copies of an entry')
  or diag($err);
is($out, "$entries|$rows|0", 'verify counts every copy, one tuple each');

# lookups through the index equal a sequential scan, for every key (and
# for absent ones)
sub lookups
{
	my ($via_index) = @_;
	my $settings = $via_index
	  ? 'SET enable_seqscan = off; SET enable_hashjoin = off; SET enable_mergejoin = off; SET enable_bitmapscan = off;'
	  : 'SET enable_indexscan = off; SET enable_bitmapscan = off;';
	return $node->safe_psql('postgres', qq{
		$settings
		SELECT count(*), md5(string_agg(a.k || ':' || b.id, ',' ORDER BY a.k, b.id))
		FROM (SELECT k FROM g UNION ALL SELECT k + 1 FROM g) a
		JOIN g b ON b.k = a.k});
}
my $plan = $node->safe_psql('postgres', q{
	SET enable_seqscan = off; SET enable_hashjoin = off;
	SET enable_mergejoin = off; SET enable_bitmapscan = off;
	EXPLAIN (COSTS OFF) SELECT * FROM (SELECT k FROM g) a JOIN g b ON b.k = a.k});
like($plan, qr/Index Scan using g_k/, 'the index lookups use the cuckoo index');
is(lookups(1), lookups(0), 'index lookups equal a sequential scan, every key');

# VACUUM removes every copy of a deleted row
$node->safe_psql('postgres', q{
	DELETE FROM g WHERE kind = 'early';
	VACUUM (INDEX_CLEANUP ON) g;
});
($rows, $entries) = split /\|/, $node->safe_psql('postgres', q{
	SELECT (SELECT count(*) FROM g), entries FROM cuckoo_index_stats('g_k')});
($ok, $out, $err) = $node->psql('postgres',
	"SELECT entries, heap_tuples, dead_entries FROM cuckoo_index_verify('g_k')");
is($ok, 0, 'cuckoo_index_verify accepts the vacuumed index') or diag($err);
is($out, "$entries|$rows|0", 'no copy of a deleted row is left');
is(lookups(1), lookups(0), 'lookups after VACUUM equal a sequential scan');

$node->safe_psql('postgres', 'DROP TABLE g');
$node->stop;
done_testing();
