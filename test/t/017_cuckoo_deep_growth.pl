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
# and VACUUM must remove every copy.  A copy may also move into a posting
# list while the others stay in bucket pages (verify once took that for a
# TID indexed twice), and verify must still catch real duplicates: a TID
# that one lookup would return twice, copies in unrelated pages.
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
use FbfTest;

# pages are edited on disk below: no data checksums, which PostgreSQL 18's
# initdb turns on by default (15's Cluster ignores the parameter)
my $node = fbf_node('deep', "autovacuum = off\nfbf.worker_enabled = off\n",
	no_data_checksums => 1);

# ---- keys with chosen addresses (cuckoo_key_for_addr, FbfTest) ----

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
my $early = insert_keys('early', map { cuckoo_key_for_addr(random_addr()) } 1 .. 300);
is($node->safe_psql('postgres', 'SELECT doublings FROM cuckoo_index_stats(\'g_k\')'),
	'0', 'the early entries went into a one-page table');

# window keys, round robin over the 16 slices, until the cascade has run.
# A doubling of n pages is carried out by the n inserts that follow it, a
# split step each: while one is under way, rows with
# random keys ("filler", spread over the whole table, so they leave the
# sampled pages the densest) drive it to its end.
my $doublings = 0;
my $growing = 'f';
my ($batches, $fillers) = (0, 0);
while (($doublings < 17 || $growing eq 't') && $batches < 400)
{
	if ($growing eq 't')
	{
		# a seed per batch: the same rows in every run
		$node->safe_psql('postgres', qq{
			SELECT setseed($batches / 1000.0);
			INSERT INTO g (k, kind)
			SELECT (random() * 9.2e18)::int8, 'filler' FROM generate_series(1, 20000)});
		$fillers += 20000;
	}
	else
	{
		insert_keys('window', map { cuckoo_key_for_addr(window_addr($_ % 16)) } 0 .. 799);
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
insert_keys('late', map { cuckoo_key_for_addr(random_addr()) } 1 .. 300);

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

# Rows of one key whose two buckets are full go to a list, with the
# entries there that match the key's tag (CuckooListCreate): an early
# entry's copy (its tag exhausted, it matches any key of its fingerprint)
# moves with rows of its own key into a list in one page, while its other
# copies stay in their bucket pages.  The TID is then in a posting page
# and in bucket pages, as legitimately as in four bucket pages.
my $ek = $node->safe_psql('postgres',
	"SELECT k FROM g WHERE kind = 'early' ORDER BY id LIMIT 1");
my $listed = $node->safe_psql('postgres',
	"SELECT overflow_entries FROM cuckoo_index_stats('g_k')");
$node->safe_psql('postgres',
	"INSERT INTO g (k, kind) SELECT $ek, 'dup' FROM generate_series(1, 20)");
$listed = $node->safe_psql('postgres',
	"SELECT overflow_entries FROM cuckoo_index_stats('g_k')") - $listed;
cmp_ok($listed, '>=', 21,
	'an early entry went to a list with the 20 new rows of its key');
($rows, $entries) = split /\|/, $node->safe_psql('postgres', q{
	SELECT (SELECT count(*) FROM g), entries FROM cuckoo_index_stats('g_k')});
($ok, $out, $err) = $node->psql('postgres',
	"SELECT entries, heap_tuples, dead_entries FROM cuckoo_index_verify('g_k')");
is($ok, 0, 'cuckoo_index_verify accepts copies in bucket pages and a list')
  or diag($err);
is($out, "$entries|$rows|0", 'verify counts the listed copy once');
for my $scan (['indexscan', 'bitmapscan', 'an index scan'],
	['bitmapscan', 'indexscan', 'a bitmap scan'])
{
	my ($on, $off, $name) = @$scan;
	like($node->safe_psql('postgres', qq{
		SET enable_seqscan = off; SET enable_$off = off;
		EXPLAIN (COSTS OFF) SELECT ctid FROM g WHERE k = $ek}),
		$on eq 'indexscan' ? qr/^Index Scan using g_k/m : qr/Bitmap Index Scan on g_k/,
		"$name of g_k is planned");
	is($node->safe_psql('postgres', qq{
		SET enable_seqscan = off; SET enable_$off = off;
		SELECT count(*), count(DISTINCT ctid) FROM g WHERE k = $ek}),
		'21|21', "$name of the listed key returns each of its rows once");
}

# lookups through the index equal a sequential scan, for every key (and
# for absent ones).  The keys looked up are a materialized CTE: PostgreSQL
# 18 plans first for the fewest disabled nodes, and would otherwise scan g
# (disabled) once per row for the k + 1 branch rather than twice in all.
sub lookups
{
	my ($via_index) = @_;
	my $settings = $via_index
	  ? 'SET enable_seqscan = off; SET enable_hashjoin = off; SET enable_mergejoin = off; SET enable_bitmapscan = off;'
	  : 'SET enable_indexscan = off; SET enable_bitmapscan = off;';
	return $node->safe_psql('postgres', qq{
		$settings
		WITH a AS MATERIALIZED (SELECT k FROM g UNION ALL SELECT k + 1 FROM g)
		SELECT count(*), md5(string_agg(a.k || ':' || b.id, ',' ORDER BY a.k, b.id))
		FROM a JOIN g b ON b.k = a.k});
}
my $plan = $node->safe_psql('postgres', q{
	SET enable_seqscan = off; SET enable_hashjoin = off;
	SET enable_mergejoin = off; SET enable_bitmapscan = off;
	EXPLAIN (COSTS OFF) SELECT * FROM (SELECT k FROM g) a JOIN g b ON b.k = a.k});
like($plan, qr/Index Scan using g_k/, 'the index lookups use the cuckoo index');
is(lookups(1), lookups(0), 'index lookups equal a sequential scan, every key');

# ---- verify still catches real duplicates ----
# Pages of the index are edited on disk, the cluster stopped (no data
# checksums; an unlogged index survives a clean stop), then restored.
is($node->safe_psql('postgres', 'SHOW data_checksums'), 'off',
	'no data checksums: the test may edit pages');
my $relpath = $node->data_dir . '/'
  . $node->safe_psql('postgres', "SELECT pg_relation_filepath('g_k')");
my ($fp_bits, $bucket_size, $nbuckets) = split /\|/, $node->safe_psql('postgres',
	"SELECT fingerprint_bits, bucket_size, buckets_per_page FROM cuckoo_index_stats('g_k')");
my $nslots = $bucket_size * $nbuckets;
my $tag_bytes = $fp_bits + 16 <= 24 ? 3 : 4;
use constant { BLCKSZ => 8192, RELSEG_BLOCKS => 131072, CONTENTS => 24 };

# read block $blkno of the index, or write $data there
sub block_io
{
	my ($blkno, $data) = @_;
	my $seg = int($blkno / RELSEG_BLOCKS);
	my $file = $relpath . ($seg ? ".$seg" : '');
	open(my $fh, '+<:raw', $file) or die "open $file: $!";
	sysseek($fh, ($blkno % RELSEG_BLOCKS) * BLCKSZ, 0) or die "seek: $!";
	if (defined $data)
	{
		syswrite($fh, $data) == BLCKSZ or die "write: $!";
	}
	else
	{
		sysread($fh, $data, BLCKSZ) == BLCKSZ or die "read: $!";
	}
	close $fh;
	return $data;
}

# slots of a page (a string): tag, 6-byte TID; the special space's count
sub slot_tag
{
	my ($page, $s) = @_;
	my @b = unpack('C*', substr($page, CONTENTS + $s * $tag_bytes, $tag_bytes));
	my $tag = 0;
	$tag |= $b[$_] << (8 * $_) for 0 .. $#b;
	return $tag;
}
sub slot_tid
{
	my ($page, $s) = @_;
	return substr($page, CONTENTS + $nslots * $tag_bytes + $s * 6, 6);
}
sub put_slot
{
	my ($page, $s, $tag, $tid) = @_;
	substr($$page, CONTENTS + $s * $tag_bytes, $tag_bytes) =
	  pack('C*', map { ($tag >> (8 * $_)) & 255 } 0 .. $tag_bytes - 1);
	substr($$page, CONTENTS + $nslots * $tag_bytes + $s * 6, 6) = $tid;
}
sub add_nentries
{
	my ($page, $delta) = @_;
	my $at = unpack('v', substr($$page, 16, 2)) + 16;	# pd_special + nentries
	substr($$page, $at, 2) = pack('v', unpack('v', substr($$page, $at, 2)) + $delta);
}
sub tid_bytes
{
	my ($ctid) = @_;
	my ($blk, $off) = $ctid =~ /\((\d+),(\d+)\)/ or die "bad ctid $ctid";
	return pack('vvv', $blk >> 16, $blk & 0xffff, $off);
}

# the bucket page of an int8 key of this test (hash = key) at 2^17 pages:
# the top 17 bits of its address
sub page_of_key
{
	my ($k) = @_;
	return cuckoo_key_addr($k)->brsft(47)->numify;
}

my ($e2_key, $e2_ctid) = split /\|/, $node->safe_psql('postgres',
	"SELECT k, ctid FROM g WHERE kind = 'early' AND k <> $ek ORDER BY id LIMIT 1");
my $dup_ctid = $node->safe_psql('postgres',
	"SELECT ctid FROM g WHERE kind = 'dup' ORDER BY id LIMIT 1");
$node->stop;

# the metapage's extents: logical bucket page -> block
my $meta = block_io(0);
my @m = unpack('V11', substr($meta, CONTENTS, 44));
my ($npages, $nextents) = @m[6, 10];
my @ext = unpack('V' . (2 * $nextents), substr($meta, CONTENTS + 44, 8 * $nextents));
is($npages, 131072, 'the metapage says 2^17 pages');
sub page_block
{
	my ($p) = @_;
	my $i = $nextents - 1;
	$i-- while $i > 0 && $ext[2 * $i] > $p;
	return $ext[2 * $i + 1] + $p - $ext[2 * $i];
}

# a start with the index edited: verify's error
sub verify_error
{
	$node->start;
	my ($rc, $o, $e) = $node->psql('postgres',
		"SELECT entries FROM cuckoo_index_verify('g_k')");
	return $e;
}

# (a) An early entry's four copies sit in the pages descended from one
# page: 4q .. 4q + 3.  One moved to a page descended from another is no
# copy a split made, though the count is still four.
my $e2_tid = tid_bytes($e2_ctid);
my $e2_page = page_of_key($e2_key);
my $base = $e2_page & ~3;
my @copies;		# [page, slot]
for my $p ($base .. $base + 3)
{
	my $page = block_io(page_block($p));
	push @copies, map { [ $p, $_ ] }
	  grep { slot_tid($page, $_) eq $e2_tid } 0 .. $nslots - 1;
}
is(join(' ', map { "$_->[0]:$_->[1]" } @copies),
	join(' ', map { "$_:$copies[0][1]" } $base .. $base + 3),
	'an early entry has a copy in each page descended from its page, in one slot');
# move a copy other than the one lookups find
my ($from, $slot) = @{ (grep { $_->[0] != $e2_page } @copies)[0] };
my $to = $base ^ 0x10000;
$to += 4 while slot_tid(block_io(page_block($to)), $slot) ne "\0" x 6;
my %saved = map { $_ => block_io(page_block($_)) } ($from, $to);
{
	my $src = $saved{$from};
	my $dst = $saved{$to};
	put_slot(\$dst, $slot, slot_tag($src, $slot), $e2_tid);
	add_nentries(\$dst, 1);
	put_slot(\$src, $slot, 0, "\0" x 6);
	add_nentries(\$src, -1);
	block_io(page_block($from), $src);
	block_io(page_block($to), $dst);
}
$err = verify_error();
note $err;
like($err, qr/indexed more often than the doublings explain/,
	'verify rejects a copy in a page not descended from the others\' one');
$node->stop;
block_io(page_block($_), $saved{$_}) for keys %saved;

# (b) A row of the listed key planted in the pointer's bucket: a lookup
# of the key returns it from the bucket and from the list.
my $lpage = page_of_key($ek);
my $orig = block_io(page_block($lpage));
my @pointers = grep { unpack('v', substr(slot_tid($orig, $_), 4, 2)) & 0x8000 }
  grep { slot_tid($orig, $_) ne "\0" x 6 } 0 .. $nslots - 1;
is(scalar @pointers, 1, 'the listed key\'s page holds one pointer');
my $bucket = int($pointers[0] / $bucket_size);
my ($free) = grep { slot_tid($orig, $_) eq "\0" x 6 }
  $bucket * $bucket_size .. ($bucket + 1) * $bucket_size - 1;
ok(defined $free, 'the pointer\'s bucket has a free slot');
{
	my $p = $orig;
	put_slot(\$p, $free, slot_tag($orig, $pointers[0]), tid_bytes($dup_ctid));
	add_nentries(\$p, 1);
	block_io(page_block($lpage), $p);
}
$err = verify_error();
note $err;
like($err, qr/reachable twice from one bucket page/,
	'verify rejects a TID that one lookup returns twice');
is($node->safe_psql('postgres', qq{
	SET enable_seqscan = off; SET enable_bitmapscan = off;
	SELECT count(*), count(DISTINCT ctid) FROM g WHERE k = $ek}),
	'22|21', '(that lookup does return it twice)');
$node->stop;
block_io(page_block($lpage), $orig);
$node->start;
($ok, $out, $err) = $node->psql('postgres',
	"SELECT entries FROM cuckoo_index_verify('g_k')");
is($ok, 0, 'the restored index verifies') or diag($err);

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
