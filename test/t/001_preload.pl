# Copyright: the fbf authors.  TAP test, run by test/check.sh.
#
# fbf must be preloaded: CREATE EXTENSION on a server without it fails with
# a hint and leaves nothing behind; with it, the extension installs and fbf
# values stored in tables survive a restart.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('preload');
$node->init;
$node->start;

my ($rc, $stdout, $stderr) = $node->psql('postgres', 'CREATE EXTENSION fbf');
isnt($rc, 0, 'CREATE EXTENSION fails without shared_preload_libraries');
like($stderr, qr/fbf must be loaded via shared_preload_libraries/,
	'the error names the cause');
like($stderr, qr/HINT:\s+Add fbf to the shared_preload_libraries/,
	'the error carries a hint');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_extension WHERE extname = 'fbf'"),
	'0', 'nothing was installed');

$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fbf'");
$node->restart;
$node->safe_psql('postgres', 'CREATE EXTENSION fbf');
$node->safe_psql('postgres', q{
	CREATE TABLE filters AS
	SELECT fbf_agg(g, 8192, 5, 2) AS f FROM generate_series(1, 1000) g;
});
my $before = $node->safe_psql('postgres', 'SELECT f::text FROM filters');

$node->restart;
is($node->safe_psql('postgres', 'SELECT f::text FROM filters'),
	$before, 'a stored fbf value is unchanged after a restart');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM filters, generate_series(1, 1000) g
	WHERE fbf_contains(f, g)}),
	'1000', 'and still answers for every element');

$node->stop;
done_testing();
