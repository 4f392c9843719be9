# test/t/FbfTest.pm: what every TAP test of fbf needs to start a node.
#
#   use FindBin;
#   use lib $FindBin::Bin;
#   use FbfTest;
#   my $node = fbf_node('name', "fbf.naptime = 200ms\n", allows_streaming => 1);
#
# fbf_node makes a PostgreSQL::Test::Cluster with fbf preloaded and
# fbf.fixed_window_keys on, the given postgresql.conf lines appended and
# the init options passed on, starts it and creates the extension in the
# postgres database.
package FbfTest;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Cluster;

our @EXPORT = qw(fbf_node);

sub fbf_node
{
	my ($name, $conf, %init) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);

	$node->init(%init);
	# every filter gets the same key, so that its false positives do not
	# change from run to run (fbf.fixed_window_keys); a test of the keys
	# themselves turns it off in $conf, which comes after
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'fbf'\nfbf.fixed_window_keys = on\n" . ($conf // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION fbf');
	return $node;
}

1;
