# An idle database costs the worker next to nothing: a database with the
# extension but no counter, and one whose counter is idle, get a pass when
# there is something to do (a refresh due), not every fbf.naptime.  Passes
# commit transactions in their database, so pg_stat_database.xact_commit
# counts them.  (Before, the launcher started a pass in every database with
# the extension every naptime: about 50 in 10 s here.)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use FbfTest;

my $node = fbf_node('idle', "fbf.naptime = 200ms\n");

$node->safe_psql('postgres', 'CREATE DATABASE empty_db');
$node->safe_psql('postgres', 'CREATE DATABASE idle_db');
$node->safe_psql('postgres', 'CREATE DATABASE busy_db');
$node->safe_psql('empty_db', 'CREATE EXTENSION fbf');
for my $db ('idle_db', 'busy_db')
{
	$node->safe_psql($db, q{
		CREATE EXTENSION fbf;
		SELECT fbf_create_counter_table('c', retention => '10 min', expected_rate => 10);
	});
}

# let the first passes (discovery, the counters' creation) happen
sleep 3;
my %before = map { $_ => db_commits($node, $_) } qw(empty_db idle_db busy_db);
my $seq = 0;
my $t0 = time;
while (time - $t0 < 10)
{
	# busy_db's counter is in use: its database stays due every naptime
	$node->safe_psql('busy_db', "SELECT idempotent_increment('c', 1, " . ++$seq . ", 1)");
	usleep(200_000);
}
my %delta = map { $_ => db_commits($node, $_) - $before{$_} } qw(empty_db idle_db busy_db);
note "transactions in 10 s: empty_db $delta{empty_db}, idle_db $delta{idle_db}, busy_db $delta{busy_db}";

cmp_ok($delta{empty_db}, '<=', 2,
	'a database with the extension and no counter gets no pass every naptime');
cmp_ok($delta{idle_db}, '<=', 4,
	'a database whose counter is idle gets passes only as refreshes fall due');
# busy_db's own increments commit too; the passes add about one per naptime
cmp_ok($delta{busy_db} - $seq, '>=', 10,
	'a database whose counter is in use is maintained every naptime');

$node->stop;
done_testing();
