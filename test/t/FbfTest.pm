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
#
#   my ($coord, $w1, $w2) = fbf_citus_cluster("max_prepared_transactions = 20\n");
#
# fbf_citus_cluster makes the Citus tests' cluster, or skips the test
# (plan skip_all) where Citus cannot run: on PostgreSQL 18 (Citus 13.2
# supports 15 to 17) or without citus.so (test/check.sh builds it from
# ../shared/vendor when the tarball is there).  A coordinator and two
# workers, named so, with Citus and fbf preloaded, fbf.fixed_window_keys
# on, listening on 127.0.0.1, the given lines appended; Citus created on
# each, the workers added to the coordinator's metadata and fbf created
# (Citus creates it on the workers).
#
#   my ($rc, $stdout, $stderr, $sent) = fbf_citus_sent($coord, $sql);
#
# fbf_citus_sent runs $sql on a node of such a cluster with
# citus.log_remote_commands on and errors in verbose form (with their
# SQLSTATEs), and also returns the statements Citus sent to other nodes
# for it, in order (an array reference).
package FbfTest;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Cluster;
use Test::More;

our @EXPORT = qw(fbf_node fbf_citus_cluster fbf_citus_sent);

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

sub fbf_citus_cluster
{
	my ($conf) = @_;
	my ($pg_major) = `pg_config --version` =~ /PostgreSQL (\d+)/;
	my $pkglibdir = `pg_config --pkglibdir`;
	my @nodes;

	plan skip_all => "Citus 13.2 supports PostgreSQL 15 to 17, not $pg_major; "
	  . "the Citus tests run on PostgreSQL 15"
	  if $pg_major >= 18;
	chomp $pkglibdir;
	plan skip_all => "Citus is not installed in $pkglibdir (test/check.sh builds it from "
	  . "../shared/vendor/citus-13.2.2.tar.gz when that file exists)"
	  unless -f "$pkglibdir/citus.so";

	for my $name (qw(coordinator worker1 worker2))
	{
		my $node = PostgreSQL::Test::Cluster->new($name);

		$node->init;
		$node->append_conf('postgresql.conf',
			"shared_preload_libraries = 'citus,fbf'\nfbf.fixed_window_keys = on\n"
			  . "listen_addresses = '127.0.0.1'\n" . ($conf // ''));
		$node->start;
		$node->safe_psql('postgres', 'CREATE EXTENSION citus');
		push @nodes, $node;
	}
	$nodes[0]->safe_psql('postgres', sprintf(q{
		SELECT citus_set_coordinator_host('127.0.0.1', %d);
		SELECT citus_add_node('127.0.0.1', %d);
		SELECT citus_add_node('127.0.0.1', %d);
		CREATE EXTENSION fbf;}, map { $_->port } @nodes));
	return @nodes;
}

sub fbf_citus_sent
{
	my ($node, $sql) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', qq{
		SET citus.log_remote_commands = on;
		SET client_min_messages = log;
		$sql}, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	my @sent = $err =~ /issuing (.*)/g;

	return ($rc, $out, $err, \@sent);
}

1;
