# Forged stream pages and stream fields of the metapage never crash the
# server: a stream page whose slot count or use is not the code's is
# refused (XX002, "invalid stream page"), a run of stream pages that
# leaves the relation or lands on other pages is refused, and slots
# holding any values at all (times at the int64 extremes, seqs at both
# ends) are read without overflow or crash.
use strict;
use warnings;
no warnings 'portable';    # 64-bit literals: the test needs a 64-bit perl

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;

# page contents start after the page header; offsets of
# FbfWindowMetaPageData's stream fields (FbfTest.pm) and of FbfStreamPage's
use constant {
	CONTENTS => FBF_PAGE_CONTENTS, STREAM_START_AT => FBF_META_STREAM_START,
	STREAM_PAGES_AT => FBF_META_STREAM_PAGES, NSLOTS_AT => 32, NUSED_AT => 36, SLOTS_AT => 40, SLOT => 40, BLCKSZ => 8192,
};

my $node = fbf_node('main', "fbf.worker_enabled = off\nautovacuum = off\n",
	no_data_checksums => 1);

$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('f', max_streams => 300);
	SELECT count(*) FROM generate_series(1, 40) c, generate_series(1, 3) s
	WHERE idempotent_increment('f', c, s, 1);
	SELECT fbf_counter_maintain('f');});
my $path = $node->data_dir . '/'
  . $node->safe_psql('postgres', "SELECT pg_relation_filepath('f_fbf')");

sub rd
{
	my ($fh, $at, $fmt, $len) = @_;
	my $buf;
	sysseek($fh, $at, 0) or die "seek: $!";
	sysread($fh, $buf, $len) == $len or die "read: $!";
	return unpack($fmt, $buf);
}

sub wr
{
	my ($fh, $at, $bytes) = @_;
	sysseek($fh, $at, 0) or die "seek: $!";
	syswrite($fh, $bytes) == length($bytes) or die "write: $!";
}

# run $edit on the file with the server stopped; returns the old bytes of the
# stream pages and the metapage, to put back
sub edit
{
	my ($edit) = @_;
	$node->safe_psql('postgres', 'CHECKPOINT');
	$node->stop;
	open(my $fh, '+<:raw', $path) or die "open $path: $!";
	my $start = rd($fh, CONTENTS + STREAM_START_AT, 'V', 4);
	my $pages = rd($fh, CONTENTS + STREAM_PAGES_AT, 'V', 4);
	my $saved;
	sysseek($fh, 0, 0);
	sysread($fh, $saved, ($start + $pages) * BLCKSZ);
	$edit->($fh, $start, $pages);
	close $fh;
	$node->start;
	return $saved;
}

sub restore
{
	my ($saved) = @_;
	$node->stop;
	open(my $fh, '+<:raw', $path) or die "open $path: $!";
	wr($fh, 0, $saved);
	close $fh;
	$node->start;
}

sub try
{
	my ($sql) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', $sql,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	return ($rc, $out, $err);
}

# 1. a slot count that is not the code's, on every stream page
my $saved = edit(sub {
	my ($fh, $start, $pages) = @_;
	wr($fh, ($start + $_) * BLCKSZ + CONTENTS + NSLOTS_AT, pack('V', 0xFFFFFFFF))
	  for 0 .. $pages - 1;
});
my ($rc, $out, $err) = try(q{SELECT idempotent_increment('f', 1, 4, 1)});
like($err, qr/XX002: index "f_fbf" has an invalid stream page/, 'nslots forged: refused');
($rc, $out, $err) = try(q{SELECT streams FROM fbf_counter_stats() WHERE counter = 'f'::regclass});
like($err, qr/XX002/, 'nslots forged: the stats refuse it too');
restore($saved);

# 2. more slots in use than there are
$saved = edit(sub {
	my ($fh, $start, $pages) = @_;
	wr($fh, ($start + $_) * BLCKSZ + CONTENTS + NUSED_AT, pack('V', 0xFFFFFFFF))
	  for 0 .. $pages - 1;
});
($rc, $out, $err) = try(q{SELECT idempotent_increment('f', 1, 4, 1)});
like($err, qr/XX002: index "f_fbf" has an invalid stream page/, 'nused forged: refused');
restore($saved);

# 3. a run that ends past the relation, or lies on the partition pages
for my $case ([ 'past the end', sub { $_[0] + 100000 } ], [ 'on other pages', sub { 3 } ],
			[ 'a page early', sub { $_[0] - 1 } ])
{
	my ($name, $start_of) = @$case;
	$saved = edit(sub {
		my ($fh, $start, $pages) = @_;
		wr($fh, CONTENTS + STREAM_START_AT, pack('V', $start_of->($start)));
	});
	($rc, $out, $err) = try(q{
		SELECT count(*) FROM generate_series(1, 40) c WHERE idempotent_increment('f', c, 4, 1)});
	isnt($rc, 0, "stream run $name: refused ($err)");
	($rc, $out, $err) = try(q{SELECT streams FROM fbf_counter_stats() WHERE counter = 'f'::regclass});
	isnt($rc, 0, "stream run $name: the stats refuse it");
	restore($saved);
}

# 4. slots of any values: times and seqs at the int64 extremes
$saved = edit(sub {
	my ($fh, $start, $pages) = @_;
	for my $p (0 .. $pages - 1)
	{
		my $base = ($start + $p) * BLCKSZ + CONTENTS;
		my $nslots = rd($fh, $base + NSLOTS_AT, 'V', 4);
		# since in the far future, evicted_until just above "always"
		wr($fh, $base, pack('q<q<', 0x7FFFFFFFFFFFFFFF, -0x7FFFFFFFFFFFFFFF));
		for my $i (0 .. $nslots - 1)
		{
			my $at = $base + SLOTS_AT + $i * SLOT;
			my $id = rd($fh, $at, 'Q<', 8);
			next if $id == 0;
			# high at an extreme, every bit set, seen and born at extremes
			wr($fh, $at + 8, pack('q<Q<q<q<',
				$i % 2 ? 0x7FFFFFFFFFFFFFFF : -0x7FFFFFFFFFFFFFFF - 1,
				0xFFFFFFFFFFFFFFFF,
				$i % 3 ? 0x7FFFFFFFFFFFFFFF : -0x7FFFFFFFFFFFFFFF - 1,
				$i % 5 ? -0x7FFFFFFFFFFFFFFF - 1 : 0x7FFFFFFFFFFFFFFF));
		}
	}
});
# (a forged slot answers as it says, as forged bits do: only no crash and
# no overflow is asked of it; UBSan builds check the latter)
for my $round (1 .. 2)
{
	($rc, $out, $err) = try(q{
		SELECT count(*) FROM generate_series(1, 40) c,
			(VALUES (1), (4), (65), (9223372036854775807), (-9223372036854775808)) s(s)
		WHERE idempotent_increment('f', c, s, 1)});
	is($rc, 0, "slots forged to extremes, round $round: operations run ($err)");
	$node->safe_psql('postgres', q{SELECT fbf_counter_maintain('f')});
}
like($node->safe_psql('postgres', q{SELECT streams FROM fbf_counter_stats() WHERE counter = 'f'::regclass}),
	qr/^\d+$/, 'slots forged to extremes: the stats read them');
restore($saved);

my $log = slurp_file($node->logfile);
unlike($log, qr/PANIC|TRAP|terminated by signal/, 'no crash');
done_testing();
