# A corrupted or forged window metapage is refused (XX002, "invalid fbf
# metapage"), whatever the window's format.
#
# The counts of operations waiting on the chains at the future's and the
# present's births (pending_at) are never negative: the growth's measure
# takes them from what was drained since (window_split.c, grow), and a
# forged negative count would make every window read as busier than it
# is, and grow.  A metapage holding one is refused.
#
# A cuckoo window's metapage holds 1 in the Bloom fields nbits and
# nhashes, which it does not use; the metapage check has always held
# nbits to the range of a Bloom page for every format, so a cuckoo
# metapage whose nbits is 0 or past that range is refused as a Bloom
# one is, not read as if it were sound.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;

my $node = fbf_node('main', "fbf.worker_enabled = off\nautovacuum = off\n",
	no_data_checksums => 1);
is($node->safe_psql('postgres', 'SHOW data_checksums'), 'off',
	'no data checksums: the test may edit pages');

for my $filter ('bloom', 'cuckoo')
{
	for my $nbits (0, 0xFFFFFFFF)
	{
		my $t = "m_${filter}_$nbits";
		my $path = window_file($t, $filter);

		# the metapage is block 0; nbits is its third uint32
		forge($path, FBF_PAGE_CONTENTS + FBF_META_NBITS, pack('V', $nbits));
		refused($t, "$filter window, nbits $nbits");
	}

	for my $i (0, 1)
	{
		my $t = "p_${filter}_$i";
		my $path = window_file($t, $filter);
		forge($path, FBF_PAGE_CONTENTS + FBF_META_PENDING_AT + 8 * $i,
			pack('q<', -1));
		refused($t, "$filter window, pending_at[$i] -1");
	}
}

# a counter of $filter with one operation applied, its window's file, the server
# stopped after a checkpoint so that the file is what the server reads next
sub window_file
{
	my ($t, $filter) = @_;
	$node->safe_psql('postgres', qq{
		SELECT fbf_create_counter_table('$t', filter => '$filter');
		SELECT idempotent_increment('$t', 'k', 'c1', 1, 1)});
	my $path = $node->data_dir . '/'
	  . $node->safe_psql('postgres', "SELECT pg_relation_filepath('${t}_fbf')");
	$node->safe_psql('postgres', 'CHECKPOINT');
	$node->stop;
	return $path;
}

# write $bytes at $offset of $path, and start the server again
sub forge
{
	my ($path, $offset, $bytes) = @_;
	open(my $fh, '+<:raw', $path) or die "open $path: $!";
	sysseek($fh, $offset, 0) or die "seek: $!";
	syswrite($fh, $bytes) == length($bytes) or die "write: $!";
	close $fh;
	$node->start;
	return;
}

# the next operation on $t is refused for its metapage, and nothing else
sub refused
{
	my ($t, $what) = @_;
	my ($rc, $out, $err) = $node->psql('postgres',
		"SELECT idempotent_increment('$t', 'k', 'c2', 1, 1)",
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/XX002: index "${t}_fbf" has an invalid fbf metapage/,
		"$what: the metapage is refused");
	$node->safe_psql('postgres', "DROP TABLE $t");
	return;
}

done_testing();
