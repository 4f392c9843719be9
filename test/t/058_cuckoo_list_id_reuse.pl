# Copyright: the fbf authors.  TAP test, run by test/check.sh.
#
# VACUUM drops the pointer of a posting list it leaves with nothing in the
# list's head in the record that does so, so that no state of the index,
# whatever record it is recovered to, has a pointer naming a list id its
# head no longer holds: that id would be given to another key's new list
# there.
#
# A list is named in its head, a posting page shared by the lists of many
# keys, by its list tag (the key's fingerprint and an id that new_list_id
# makes unique among the tags present in the head, starting from the tag's
# rest bits).  VACUUM walks a bucket page's lists with that page locked,
# emptying each list's dead entries page by page, and tidies them after
# (CuckooListVacuum): it unlinks pages left with nothing of the list, and
# drops the pointer of a list left empty.  Were the pointer dropped in a
# record of its own, the state before it (reached by a crash there, by a
# VACUUM that fails, or live by another bucket page's inserts while the
# walk goes on) has the pointer naming an id its head no longer holds.  An
# insert under another bucket page that makes a list at that head, for a
# key of the same fingerprint and rest bits, is given the same id, and two
# pointers name one list: a lookup of the first key reads the other's rows
# (the recheck drops them), and the first key's next insert, finding the
# head full, moves its small list (move_list) to another page with every
# slot of the tag, the other key's rows too, and only its own pointer
# follows them.  The other key's rows are then lost to lookups, and
# cuckoo_index_verify finds tuples the index cannot reach.
#
# The keys are chosen (the operator class hashes an int8 to itself, and
# cuckoo_key_for_addr picks a key whose cuckoo_key address is given): in
# a table of two bucket pages, key X in page 0 (bucket page A, block 1) and
# key C in page 1 (block 2), with one fingerprint and one rest (bits 62..48
# of the address), so one hint for new_list_id, and key Y in page 0.  X's
# rows, more than its two buckets hold, are a list made in a new posting
# page H (block 3, id = the hint); C's first 8 rows fill its two buckets.
# A base backup is taken; X's rows are deleted and VACUUM removes them.  A
# node restored from the backup and the archive up to a record of that
# VACUUM (found with pg_walinspect), and promoted, is the state just after
# it.  There C's ninth row makes C's list in H (the free space map of the
# backup still offers H, where X's slots are free); a lookup of X must read
# no row of C's; after X's next row, index scans must find C's 9 rows and
# X's one, and cuckoo_index_verify accept the index.  Two cases:
#   1. X's list of 9 rows in H, which Y's list then fills (and goes on in
#      pages of its own): the record is the walk's, that empties X's list
#      in H.  Were X's pointer left, X's row would move C's away;
#   2. X's list fills H and goes on in a page of its own: the record is the
#      tidy's, that unlinks that page and so leaves H with nothing of X's.
#      Were X's pointer left, a lookup of X would read C's 9 rows.
use strict;
use warnings;

use Math::BigInt;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;

my $node = fbf_node('reuse', "autovacuum = off\nfbf.worker_enabled = off\n",
	allows_streaming => 1, has_archiving => 1);

# An address in page $page of 2 with rest bits $rest (15 bits) and low
# bits $low (48 bits): the page is bit 63, the rest bits 62..48.
sub addr
{
	my ($page, $rest, $low) = @_;
	return Math::BigInt->new($page)->blsft(63)
	  ->badd(Math::BigInt->new($rest)->blsft(48))->badd($low);
}

my $rest = 0x2345;
my $kx = cuckoo_key_for_addr(addr(0, $rest, 0x12345678));
my $fp = cuckoo_fingerprint($kx);
my ($kc, $ky);
for (my $low = 1; !defined $kc; $low++)
{
	my $k = cuckoo_key_for_addr(addr(1, $rest, $low));
	$kc = $k if cuckoo_fingerprint($k) == $fp;
}
for (my $low = 1; !defined $ky; $low++)
{
	my $k = cuckoo_key_for_addr(addr(0, 0x0F0F, $low));
	$ky = $k if cuckoo_fingerprint($k) != $fp;
}
note "key X $kx, key C $kc (fingerprint $fp, rest bits $rest), key Y $ky";

$node->safe_psql('postgres', q{
	CREATE EXTENSION pg_walinspect;
	-- hash(k) = k + 0: the test chooses each key's hash
	CREATE OPERATOR CLASS cuckoo_int8_identity FOR TYPE int8 USING cuckoo AS
		OPERATOR 1 = (int8, int8),
		FUNCTION 1 int8pl(int8, int8);
});
my $dboid = $node->safe_psql('postgres',
	q{SELECT oid FROM pg_database WHERE datname = current_database()});

# fbf records of an index from an LSN on: their LSN and the index's
# blocks each names, in order
sub records_sql
{
	my ($filenode, $from) = @_;
	return qq{
		SELECT r.start_lsn, array_agg(m.b[1]::int ORDER BY m.b[1]::int) AS blocks
		FROM pg_get_wal_records_info('$from', pg_current_wal_flush_lsn()) r,
			 regexp_matches(r.block_ref,
				'rel [0-9]+/$dboid/$filenode (?:fork main )?blk ([0-9]+)', 'g') AS m(b)
		WHERE r.resource_manager = 'fbf'
		GROUP BY r.start_lsn};
}

# One case, in table $t: X's list of $nx rows, Y's of $ny (none if 0),
# C's 8 rows; a backup; X's rows deleted and vacuumed; a node restored to
# just after the first record of the index that names all of the blocks
# @$target_blocks (H, or H and the page after it), where C's ninth row
# makes C's list; then X's next row.
sub run_case
{
	my ($t, $what, $nx, $ny, $target_of) = @_;
	my $blocks = sub {
		$node->safe_psql('postgres',
			"SELECT pg_relation_size('${t}_k') / current_setting('block_size')::int");
	};

	$node->safe_psql('postgres', qq{
		CREATE TABLE $t (id bigint, k int8, kind text) WITH (autovacuum_enabled = off);
		-- other keys, enough for two bucket pages at fillfactor 10
		INSERT INTO $t SELECT g, g, 'filler' FROM generate_series(1, 150) g;
		CREATE INDEX ${t}_k ON $t USING cuckoo (k cuckoo_int8_identity) WITH (fillfactor = 10);
	});
	my ($bucket_pages, $nslots) = split /\|/, $node->safe_psql('postgres',
		"SELECT bucket_pages, bucket_size * buckets_per_page FROM cuckoo_index_stats('${t}_k')");
	is($bucket_pages, 2, "$what: the index has two bucket pages");

	# X: one more row than its two buckets hold makes a list, in a new
	# page H; the rest follow it there, and where H is full, in a page
	# of X's own after it
	$nx = $nx->($nslots);
	$node->safe_psql('postgres',
		"INSERT INTO $t SELECT 1000 + g, $kx, 'x' FROM generate_series(1, 9) g");
	my $h_blk = $blocks->() - 1;
	is($h_blk, 3, "$what: X's rows went to a list in a new posting page, block 3 (H)");
	$node->safe_psql('postgres',
		"INSERT INTO $t SELECT 1000 + g, $kx, 'x' FROM generate_series(10, $nx) g")
	  if $nx > 9;

	# Y: a list made in H, that fills it and goes on in pages of its own
	$ny = $ny->($nslots);
	$node->safe_psql('postgres',
		"INSERT INTO $t SELECT 100000 + g, $ky, 'y' FROM generate_series(1, $ny) g")
	  if $ny > 0;
	my $pages = $blocks->() - 1 - $h_blk;
	note "$what: $pages posting pages after H";

	# C: 8 rows, its two buckets full, no list yet
	my $listed = sub {
		$node->safe_psql('postgres', "SELECT overflow_entries FROM cuckoo_index_stats('${t}_k')");
	};
	my $listed_before = $listed->();
	$node->safe_psql('postgres',
		"INSERT INTO $t SELECT 2000 + g, $kc, 'c' FROM generate_series(1, 8) g");
	is($listed->(), $listed_before, "$what: C's 8 rows are in its buckets");

	$node->backup($t);
	my $filenode = $node->safe_psql('postgres', "SELECT pg_relation_filenode('${t}_k')");

	# X's rows dead; the heap pruned first, then VACUUM of the index
	$node->safe_psql('postgres', qq{
		DELETE FROM $t WHERE kind = 'x';
		VACUUM (INDEX_CLEANUP OFF) $t});
	my $start = $node->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
	$node->safe_psql('postgres', "VACUUM $t");

	# VACUUM commits asynchronously (it has no xid): switching the WAL
	# segment flushes its records, and the archive gets them
	my $segment = $node->safe_psql('postgres', 'SELECT pg_walfile_name(pg_switch_wal())');
	$node->poll_query_until('postgres',
		"SELECT last_archived_wal >= '$segment' FROM pg_stat_archiver")
	  or die 'the WAL was not archived';
	my @want = $target_of->($h_blk);
	my ($target, $refs) = split /\|/, $node->safe_psql('postgres',
		"SELECT start_lsn, array_to_string(blocks, ' ') FROM ("
		  . records_sql($filenode, $start)
		  . ") w WHERE w.blocks @> '{" . join(',', @want) . "}'::int[] ORDER BY start_lsn LIMIT 1");
	ok(defined $target && $target ne '',
		"$what: VACUUM wrote a record of blocks @want (" . ($refs // '') . ')');

	# restored from the backup and the archive up to that record, then
	# promoted
	my $after = fbf_restore_to_lsn($node, $t, "after_$t", $target);

	my $scan = qq{SET enable_seqscan = off; SET enable_bitmapscan = off;
		EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM $t WHERE k = };
	# rows an index scan for a key finds, and candidates its recheck drops
	my $lookup = sub {
		my ($k) = @_;
		my $plan = $after->safe_psql('postgres', $scan . $k);
		die "not an index scan of ${t}_k: $plan" unless $plan =~ /Index Scan using ${t}_k/;
		my ($rows) = $plan =~ /Index Scan using ${t}_k .* rows=(\d+)(?:\.\d+)? loops/;
		my ($dropped) = $plan =~ /Rows Removed by Index Recheck: (\d+)/;
		return ($rows, $dropped // 0);
	};

	# C's ninth row makes its list, in H
	my $before = $after->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
	$after->safe_psql('postgres', "INSERT INTO $t VALUES (2009, $kc, 'c')");
	my $made = $after->safe_psql('postgres',
		q{SELECT string_agg(array_to_string(w.blocks, ' '), ',') FROM (}
		  . records_sql($filenode, $before) . ') w WHERE 2 = ANY (w.blocks)');
	is($made, "2 $h_blk", "$what: C's ninth row made its list in H (bucket page and head: $made)");
	is(join(' ', $lookup->($kx)), '0 0',
		"$what: a lookup of X finds no row, and reads no other key's (rows, rechecked away)");

	# X's next row
	$after->safe_psql('postgres', "INSERT INTO $t VALUES (3000, $kx, 'x')");
	for my $key ([ 'C', $kc, 9 ], [ 'X', $kx, 1 ], [ 'Y', $ky, $ny ])
	{
		my ($name, $k, $n) = @$key;
		is(($lookup->($k))[0], $n,
			"$what, then X's next row: an index scan finds every row of key $name ($n)");
	}
	my ($rc, $out, $err) = $after->psql('postgres',
		"SELECT entries, heap_tuples, dead_entries FROM cuckoo_index_verify('${t}_k')");
	is($rc, 0, "$what: cuckoo_index_verify accepts the index") or diag($err);
	$after->stop;
}

# X's list in H alone (9 rows); Y fills H, so X's next row moves X's list
# out of H (move_list): VACUUM's record that empties X's list in H
run_case('t1', 'a list of one page', sub { 9 }, sub { 3 * $_[0] },
	sub { ($_[0]) });
# X's list in H and the page after it (H full of X's rows): the tidy's
# record that unlinks that page, which leaves H with nothing of X's
run_case('t2', 'a list of two pages', sub { $_[0] + 20 }, sub { 0 },
	sub { ($_[0], $_[0] + 1) });

$node->stop;
done_testing();
