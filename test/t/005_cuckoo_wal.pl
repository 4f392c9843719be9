# Copyright: the fbf authors.  TAP test, run by test/check.sh.
#
# WAL of the cuckoo index access method, in the manner of contrib/bloom's
# t/001_wal.pl: a primary and a streaming standby; after every round of
# changes on the primary the standby replays them, and a batch of lookups
# (keys present, deleted and absent, through an index scan and through a
# bitmap scan) must give on both nodes what a sequential scan gives on the
# primary.  The rounds: inserts that make both indexes double several
# times, many rows with one key (overflow pages), deletes, VACUUM, and
# inserts and updates that reuse the freed slots.  The standby's index must
# be page for page the primary's (same sizes and counters), and its plans
# must use it.
#
# Then:
#   - a node restored from a base backup with recovery stopped in the
#     middle of a doubling (the target is one of the doubling's WAL
#     records, found with pg_walinspect) is exactly what a crash during
#     growth leaves: readers must find every row while the table is half
#     split, cuckoo_index_verify must accept it, and the next insert must
#     finish the doubling;
#   - an UNLOGGED table's cuckoo index after a crash of the primary
#     (immediate stop) is empty and usable: inserts, lookups, verify;
#   - the standby, promoted, takes inserts and answers lookups, and
#     cuckoo_index_verify accepts both indexes (and its own unlogged one).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;

my $primary = fbf_node('primary', "autovacuum = off\nlog_statement = none\n",
	allows_streaming => 1, has_archiving => 1);
$primary->safe_psql('postgres', q{
	CREATE EXTENSION pg_walinspect;
	CREATE TABLE t (id serial PRIMARY KEY, k int8, s text);
	CREATE INDEX t_k ON t USING cuckoo (k);
	CREATE INDEX t_s ON t USING cuckoo (s) WITH (fingerprint_bits = 16, bucket_size = 8);
});

# The standby is made from a backup of the empty indexes (the restored
# node below starts from it too), so everything after that reaches it
# through WAL.  It neither archives (it would race the restored node for
# the primary's archive) nor runs autovacuum.
$primary->backup('base');
my $standby = fbf_standby($primary, 'standby', backup => 'base', conf => "archive_mode = off\n");

# One standby session lives through every round: its backend caches each
# index's metapage (rd_amcache) at its first lookup, so after the rounds'
# doublings are replayed its cached addressing is stale, and its lookups
# must notice that on the bucket pages (their generation stamps) rather
# than return the wrong page's entries.
my $standby_session = $standby->background_psql('postgres', on_error_stop => 1);
$standby_session->query_safe(
	'SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_indexscan = on;');

# ---- lookups ----

# keys 1.. are inserted below, 777777 is the duplicated one; stride 7
# covers every residue of the deletes (k % 3); negatives and the top are
# absent
my $keys = q{(SELECT generate_series(-50, 30000, 7) UNION ALL SELECT 777777) AS keys(g)};
my %column = (
	k => { index => 't_k', expr => 'g' },
	s => { index => 't_s', expr => q{'key' || g} },
);
my %mode_gucs = (
	index  => 'SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_indexscan = on;',
	bitmap => 'SET enable_seqscan = off; SET enable_indexscan = off; SET enable_bitmapscan = on;',
	seq    => 'SET enable_indexscan = off; SET enable_bitmapscan = off; SET enable_seqscan = on;',
);

# "key:count,..." for every key of $keys, looked up in column $col
sub lookup_query
{
	my ($col, $mode) = @_;
	my $e = $column{$col}{expr};
	return "SELECT string_agg(g || ':' || c, ',' ORDER BY g) FROM "
	  . "(SELECT g, count(t.$col) AS c FROM $keys LEFT JOIN t ON t.$col = $e GROUP BY g) x"
	  if $mode eq 'seq';
	return "SELECT string_agg(g || ':' || (SELECT count(*) FROM t WHERE $col = $e), ',' "
	  . "ORDER BY g) FROM $keys";
}

sub lookups
{
	my ($node, $col, $mode) = @_;
	my $out = $node->safe_psql('postgres',
		$mode_gucs{$mode} . ' ' . lookup_query($col, $mode));
	my %counts = map { split /:/ } split /,/, $out;
	return \%counts;
}

# the plan of a lookup batch must be the one the mode asks for
sub check_plan
{
	my ($node, $name, $col, $mode) = @_;
	my $plan = $node->safe_psql('postgres',
		$mode_gucs{$mode} . ' EXPLAIN (COSTS OFF) ' . lookup_query($col, $mode));
	my $idx = $column{$col}{index};
	my $re =
		$mode eq 'index'  ? qr/Index Scan using $idx on t/
	  : $mode eq 'bitmap' ? qr/Bitmap Index Scan on $idx/
	  :                     qr/Seq Scan on t/;
	like($plan, $re, "$name: the $mode lookups of $col use the plan asked for")
	  or diag($plan);
}

# Every mode on every node must agree with a sequential scan on the
# primary, key by key.  Returns the primary's counts of column k.
sub compare_lookups
{
	my ($round, @nodes) = @_;
	my $result;
	for my $col (sort keys %column)
	{
		my $expected = lookups($primary, $col, 'seq');
		my $present = grep { $_ > 0 } values %$expected;
		note "$round: $present of " . scalar(keys %$expected)
		  . " keys of $col are present (seq scan on the primary)";
		$result = $expected if $col eq 'k';
		for my $node (@nodes)
		{
			for my $mode ('index', 'bitmap')
			{
				my $got = lookups($node, $col, $mode);
				my @bad = grep { ($got->{$_} // 'none') ne $expected->{$_} }
				  sort { $a <=> $b } keys %$expected;
				is(scalar(@bad), 0,
					"$round: $mode scans of $col on the " . $node->name
					  . ' match the seq scan on the primary')
				  or diag(join("\n", map {
						"  key $_: seq scan $expected->{$_}, $mode scan "
						  . ($got->{$_} // 'none') } @bad[0 .. ($#bad < 9 ? $#bad : 9)]));
			}
		}
		# the long-lived standby session, with its cache from the last round
		# (16's BackgroundPsql leaves the output's final newline, 17's
		# and later remove it: exactly one is taken off)
		my $out = $standby_session->query_safe(lookup_query($col, 'index'));
		$out =~ s/\r?\n\z//;
		my $got = { map { split /:/ } split /,/, $out };
		my @bad = grep { ($got->{$_} // 'none') ne $expected->{$_} }
		  sort { $a <=> $b } keys %$expected;
		is(scalar(@bad), 0,
			"$round: index scans of $col in a standby session that cached the metapage rounds ago match")
		  or diag(join("\n", map {
				"  key $_: seq scan $expected->{$_}, index scan "
				  . ($got->{$_} // 'none') } @bad[0 .. ($#bad < 9 ? $#bad : 9)]));
	}
	return $result;
}

# the standby's index is the primary's, page for page (dead_entries, the
# kill_prior_tuple hints, are not WAL-logged and may differ)
sub compare_stats
{
	my ($round) = @_;
	for my $index ('t_k', 't_s')
	{
		my $p = cuckoo_stats($primary, $index);
		my $s = cuckoo_stats($standby, $index);
		my $fields = 'pages bucket_pages overflow_pages entries overflow_entries slots kicks doublings growing';
		is(join(' ', @$s{ split / /, $fields }), join(' ', @$p{ split / /, $fields }),
			"$round: $index on the standby has the primary's shape ($fields)");
		note "$round: $index on the primary: "
		  . join(', ', map { "$_ $p->{$_}" } sort keys %$p);
	}
}

# the standby session caches both indexes' addressing now, at one page
$standby_session->query_safe(lookup_query($_, 'index')) for sort keys %column;

# cuckoo_index_verify raises an error on any inconsistency; returns
# "entries|heap_tuples|dead_entries"
sub verify
{
	my ($node, $index, $what) = @_;
	my ($rc, $out, $err) = $node->psql('postgres',
		"SELECT entries, heap_tuples, dead_entries FROM cuckoo_index_verify('$index')");
	is($rc, 0, "$what: cuckoo_index_verify('$index') on the " . $node->name . ' is clean')
	  or diag($err);
	note "$what: verify $index: entries|heap_tuples|dead_entries = $out";
	return $out;
}

sub round_done
{
	my ($round) = @_;
	$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
	my $counts = compare_lookups($round, $primary, $standby);
	compare_stats($round);
	verify($primary, $_, $round) for ('t_k', 't_s');
	return $counts;
}

# ---- round 1: growth ----

my $lsn_before_growth = $primary->lsn('insert');
for my $part (0 .. 3)
{
	my ($lo, $hi) = ($part * 6000 + 1, ($part + 1) * 6000);
	$primary->safe_psql('postgres',
		"INSERT INTO t (k, s) SELECT g, 'key' || g FROM generate_series($lo, $hi) g");
}
my $lsn_after_growth = $primary->lsn('flush');
my $counts = round_done('inserts (growth)');
is(scalar(grep { $_ > 0 } values %$counts), scalar(grep { $_ >= 1 && $_ <= 24000 } keys %$counts),
	'inserts (growth): exactly the inserted keys are found');
my %doublings;
for my $index ('t_k', 't_s')
{
	my $s = cuckoo_stats($primary, $index);
	cmp_ok($s->{doublings}, '>=', 3, "$index doubled several times ($s->{doublings})");
	is($s->{growing}, 'f', "$index is not left growing");
	$doublings{$index} = $s->{doublings};
}

# plans on both nodes, once
for my $node ($primary, $standby)
{
	for my $col (sort keys %column)
	{
		check_plan($node, $node->name, $col, $_) for ('index', 'bitmap');
	}
}
check_plan($primary, 'primary', 'k', 'seq');
like($standby->safe_psql('postgres',
		'SET enable_seqscan = off; EXPLAIN (COSTS OFF) SELECT * FROM t WHERE k = 42'),
	qr/Scan using t_k on t|Bitmap Index Scan on t_k/,
	'a plain lookup on the standby uses the cuckoo index');
is($standby->safe_psql('postgres',
		q{SET enable_seqscan = off; SELECT id || ':' || s FROM t WHERE k = 4242 AND s = 'key4242'}),
	'4242:key4242', 'and finds its row');

# ---- round 2: many rows with one key ----

$primary->safe_psql('postgres',
	"INSERT INTO t (k, s) SELECT 777777, 'key777777' FROM generate_series(1, 3000)");
$counts = round_done('duplicates');
is($counts->{777777}, 3000, 'duplicates: all 3000 rows of the duplicated key are found');
for my $index ('t_k', 't_s')
{
	my $s = cuckoo_stats($primary, $index);
	cmp_ok($s->{overflow_pages}, '>=', 2,
		"$index: the duplicates went to overflow pages ($s->{overflow_pages})");
	is($s->{doublings}, $doublings{$index}, "$index: and did not double the table");
}

# ---- round 3: deletes ----

$primary->safe_psql('postgres', q{
	DELETE FROM t WHERE k % 3 = 0 AND k <= 24000;
	DELETE FROM t WHERE k = 777777 AND id % 2 = 0;
});
$counts = round_done('deletes');
is($counts->{777777}, 1500, 'deletes: half of the duplicated key is left');
is(scalar(grep { $_ % 3 == 0 && $_ >= 1 && $_ <= 24000 && $counts->{$_} > 0 } keys %$counts),
	0, 'deletes: no deleted key is found');
# the lookups marked the deleted entries (hints, on the primary only)
note 'deletes: dead entries marked by scans on the primary: t_k '
  . cuckoo_stats($primary, 't_k')->{dead_entries} . ', t_s '
  . cuckoo_stats($primary, 't_s')->{dead_entries};

# ---- round 4: VACUUM ----

# INDEX_CLEANUP ON: PostgreSQL skips the index pass when few heap pages
# have dead items; this round is about the index pass
$primary->safe_psql('postgres', 'VACUUM (INDEX_CLEANUP ON) t');
$counts = round_done('vacuum');
my $live = $primary->safe_psql('postgres', 'SELECT count(*) FROM t');
for my $index ('t_k', 't_s')
{
	my $s = cuckoo_stats($primary, $index);
	is("$s->{entries} $s->{dead_entries}", "$live 0",
		"vacuum: $index holds one entry per live row ($live) and no dead one");
	is(cuckoo_stats($standby, $index)->{entries}, $live, "vacuum: and so does the standby's");
}

# ---- round 5: inserts and updates into the freed slots ----

my %before = map { $_ => cuckoo_stats($primary, $_) } ('t_k', 't_s');
$primary->safe_psql('postgres', q{
	INSERT INTO t (k, s) SELECT g, 'key' || g FROM generate_series(3, 9000, 3) g;
	INSERT INTO t (k, s) SELECT g, 'key' || g FROM generate_series(24001, 25000) g;
	INSERT INTO t (k, s) SELECT 777777, 'key777777' FROM generate_series(1, 300);
	UPDATE t SET s = s || 'u' WHERE k BETWEEN 100 AND 400;
});
$counts = round_done('reuse');
is($counts->{777777}, 1800, 'reuse: the duplicated key has its 1800 rows');
is(scalar(grep { $_ % 3 == 0 && $_ <= 9000 && $_ >= 1 && $counts->{$_} != 1 } keys %$counts),
	0, 're-inserted keys are found once');
for my $index ('t_k', 't_s')
{
	my $s = cuckoo_stats($primary, $index);
	is("$s->{bucket_pages} $s->{overflow_pages}",
		"$before{$index}{bucket_pages} $before{$index}{overflow_pages}",
		"reuse: $index took the new entries into freed slots, without new pages");
}

# ---- a doubling interrupted by the end of WAL ----

# The doublings of t_k in round 1: a record that touches only the metapage
# (the doubling begins), then one per step with the metapage, old page q
# (marked moved; not for q = 0, whose block is new page 0) and new pages
# 2q and 2q + 1.  Stop recovery right after a step in the middle of the
# largest doubling.
my ($dboid, $filenode) = split /\|/, $primary->safe_psql('postgres',
	q{SELECT (SELECT oid FROM pg_database WHERE datname = current_database()),
			 pg_relation_filenode('t_k')});
my @meta_records = split /\n/, $primary->safe_psql('postgres', qq{
	SELECT start_lsn || ' ' || block_ref
	FROM pg_get_wal_records_info('$lsn_before_growth', '$lsn_after_growth')
	WHERE resource_manager = 'fbf'
	  AND block_ref ~ 'blkref #0: rel [0-9]+/$dboid/$filenode (fork main )?blk 0( |\$)'
	ORDER BY start_lsn});
my @doublings;
for my $rec (@meta_records)
{
	my ($lsn, $refs) = split / /, $rec, 2;
	my $nrefs = () = $refs =~ /blkref #/g;
	if ($nrefs == 1) { push @doublings, [] }
	elsif (($nrefs == 3 || $nrefs == 4) && @doublings) { push @{ $doublings[-1] }, $lsn }
}
note 'steps of the doublings of t_k found in WAL: '
  . join(', ', map { scalar @$_ } @doublings);
is(scalar(@doublings), $doublings{t_k}, 'WAL holds one beginning per doubling of t_k');
my ($largest) = sort { @$b <=> @$a } @doublings;
cmp_ok(scalar(@$largest), '>=', 4, 'the largest doubling has several steps');
my $target = $largest->[ int(@$largest / 2) - 1 ];
note "recovery target: step " . int(@$largest / 2) . " of " . scalar(@$largest) . " at $target";

my $segment = $primary->safe_psql('postgres', 'SELECT pg_walfile_name(pg_switch_wal())');
$primary->poll_query_until('postgres',
	"SELECT last_archived_wal >= '$segment' FROM pg_stat_archiver")
  or die 'the WAL was not archived';

# not a standby: restored from the backup and the archive up to a point
# in the WAL, then promoted
my $halfway = fbf_restore_to_lsn($primary, 'base', 'halfway', $target);
my $h = cuckoo_stats($halfway, 't_k');
is($h->{growing}, 't', 'restored halfway: t_k is in the middle of a doubling');
verify($halfway, 't_k', 'restored halfway (growing)');
for my $mode ('index', 'bitmap')
{
	my $expected = lookups($halfway, 'k', 'seq');
	my $got = lookups($halfway, 'k', $mode);
	my @bad = grep { ($got->{$_} // 'none') ne $expected->{$_} } keys %$expected;
	is(scalar(@bad), 0, "restored halfway: $mode scans of the half-split table match a seq scan")
	  or diag("first mismatching keys: @bad[0 .. ($#bad < 9 ? $#bad : 9)]");
}
# the doubling goes on a step per insert: the inserts
# that follow end it, several of them (half its steps were left)
$halfway->safe_psql('postgres', "INSERT INTO t (k, s) VALUES (-1, 'key-1')");
my $inserts = 1;
while (cuckoo_stats($halfway, 't_k')->{growing} eq 't' && $inserts < 2 * @$largest)
{
	$halfway->safe_psql('postgres', "INSERT INTO t (k, s) VALUES (-2, 'key-2')");
	$inserts++;
}
my $h2 = cuckoo_stats($halfway, 't_k');
is("$h2->{growing} $h2->{doublings}", "f $h->{doublings}",
	"restored halfway: the next inserts finished the doubling, a step each ($inserts inserts), and began no other");
cmp_ok($inserts, '>', 1, 'restored halfway: no single insert ran the rest of the doubling');
verify($halfway, 't_k', 'restored halfway (finished)');
is($halfway->safe_psql('postgres',
		q{SET enable_seqscan = off; SET enable_bitmapscan = off;
		  SELECT count(*) FROM t WHERE k IN (-1, -2)}),
	$inserts, 'restored halfway: the new rows are found through the index');
{
	my $expected = lookups($halfway, 'k', 'seq');
	my $got = lookups($halfway, 'k', 'index');
	my @bad = grep { ($got->{$_} // 'none') ne $expected->{$_} } keys %$expected;
	is(scalar(@bad), 0, 'restored halfway: after the doubling, index scans match a seq scan');
}
$halfway->stop;

# ---- an unlogged table across a crash of the primary ----

$primary->safe_psql('postgres', q{
	CREATE UNLOGGED TABLE u (k int8);
	CREATE INDEX u_k ON u USING cuckoo (k);
	INSERT INTO u SELECT g FROM generate_series(1, 5000) g;
});
cmp_ok(cuckoo_stats($primary, 'u_k')->{doublings}, '>=', 1, 'the unlogged index grew');
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
$primary->stop('immediate');
$primary->start;
is($primary->safe_psql('postgres', 'SELECT count(*) FROM u'), '0',
	'after a crash the unlogged table is empty');
my $u = cuckoo_stats($primary, 'u_k');
is("$u->{entries} $u->{bucket_pages} $u->{growing}", '0 1 f',
	'and its index is back to one empty bucket page');
$primary->safe_psql('postgres', q{
	INSERT INTO u SELECT g FROM generate_series(1, 3000) g;
	INSERT INTO u SELECT 42 FROM generate_series(1, 50);
});
is($primary->safe_psql('postgres', q{
		SET enable_seqscan = off; SET enable_bitmapscan = off;
		SELECT count(*) FILTER (WHERE (SELECT count(*) FROM u WHERE u.k = g) <> CASE WHEN g = 42 THEN 51 WHEN g BETWEEN 1 AND 3000 THEN 1 ELSE 0 END)
		FROM generate_series(-10, 3100) g}),
	'0', 'the unlogged index takes inserts and finds every key after the crash');
verify($primary, 'u_k', 'unlogged after crash');
# the logged table came through the crash as it was
$counts = round_done('after the crash of the primary');
is($counts->{777777}, 1800, 'the logged table came through the crash');

# ---- promotion ----

$standby_session->quit;
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'the standby did not promote';
$standby->safe_psql('postgres', q{
	INSERT INTO t (k, s) SELECT g, 'key' || g FROM generate_series(25001, 30000) g;
	INSERT INTO t (k, s) SELECT 777777, 'key777777' FROM generate_series(1, 200);
	DELETE FROM t WHERE k BETWEEN 1 AND 1000;
});
for my $col (sort keys %column)
{
	my $expected = lookups($standby, $col, 'seq');
	for my $mode ('index', 'bitmap')
	{
		my $got = lookups($standby, $col, $mode);
		my @bad = grep { ($got->{$_} // 'none') ne $expected->{$_} } keys %$expected;
		is(scalar(@bad), 0, "promoted: $mode scans of $col match a seq scan")
		  or diag("first mismatching keys: @bad[0 .. ($#bad < 9 ? $#bad : 9)]");
	}
	is($expected->{777777}, 2000, "promoted: the duplicated key has its 2000 rows ($col)");
}
verify($standby, $_, 'promoted') for ('t_k', 't_s');
$standby->safe_psql('postgres', 'VACUUM (INDEX_CLEANUP ON) t');
my $pv = verify($standby, 't_k', 'promoted, vacuumed');
my $plive = $standby->safe_psql('postgres', 'SELECT count(*) FROM t');
is($pv, "$plive|$plive|0", 'promoted, vacuumed: one entry per row and no dead one');
is($standby->safe_psql('postgres', 'SELECT count(*) FROM u'), '0',
	'promoted: the unlogged table starts empty');
$standby->safe_psql('postgres', 'INSERT INTO u SELECT g FROM generate_series(1, 2000) g');
is($standby->safe_psql('postgres', q{
		SET enable_seqscan = off; SET enable_bitmapscan = off;
		SELECT count(*) FILTER (WHERE (SELECT count(*) FROM u WHERE u.k = g) <> CASE WHEN g BETWEEN 1 AND 2000 THEN 1 ELSE 0 END)
		FROM generate_series(-10, 2100) g}),
	'0', 'promoted: its index takes inserts and finds every key');
verify($standby, 'u_k', 'promoted, unlogged');

$standby->stop;
$primary->stop;
done_testing();
