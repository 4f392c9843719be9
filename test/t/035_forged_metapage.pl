# A corrupted or forged window metapage is refused (XX002, "invalid fbf
# metapage"), whatever the window's format.
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

use constant { CONTENTS => 24, NBITS_AT => 8 };

my $node = fbf_node('main', "fbf.worker_enabled = off\nautovacuum = off\n",
	no_data_checksums => 1);
is($node->safe_psql('postgres', 'SHOW data_checksums'), 'off',
	'no data checksums: the test may edit pages');

for my $filter ('bloom', 'cuckoo')
{
	for my $nbits (0, 0xFFFFFFFF)
	{
		my $t = "m_${filter}_$nbits";
		$node->safe_psql('postgres', qq{
			SELECT fbf_create_counter_table('$t', filter => '$filter');
			SELECT idempotent_increment('$t', 'k', 'c1', 1, 1)});
		my $path = $node->data_dir . '/'
		  . $node->safe_psql('postgres',
			"SELECT pg_relation_filepath('${t}_fbf')");
		$node->safe_psql('postgres', 'CHECKPOINT');
		$node->stop;

		# the metapage is block 0; nbits is its third uint32
		open(my $fh, '+<:raw', $path) or die "open $path: $!";
		sysseek($fh, CONTENTS + NBITS_AT, 0) or die "seek: $!";
		syswrite($fh, pack('V', $nbits)) == 4 or die "write: $!";
		close $fh;
		$node->start;

		my ($rc, $out, $err) = $node->psql('postgres',
			"SELECT idempotent_increment('$t', 'k', 'c2', 1, 1)",
			extra_params => [ '-v', 'VERBOSITY=verbose' ]);
		like($err, qr/XX002: index "${t}_fbf" has an invalid fbf metapage/,
			"$filter window, nbits $nbits: the metapage is refused");
		$node->safe_psql('postgres', "DROP TABLE $t");
	}
}

done_testing();
