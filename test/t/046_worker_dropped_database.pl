# A database dropped while the worker serves databases is an ordinary event:
# the launcher skips a database dropped since it listed them, and a pass
# whose database is dropped just before it connects exits quietly.  No
# FATAL "database ... does not exist" in the log, no pass exiting with
# code 1, and the launcher goes on serving the databases that remain.
# (Before, the launcher kept its list for a naptime and started passes in
# databases dropped meanwhile: each one's connection failed with a FATAL
# and the pass exited with code 1.)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use FbfTest;

# log_min_messages = debug1 shows the passes that found their database gone
my $node = fbf_node('dropped_db',
	"fbf.naptime = 100ms\nfbf.max_workers = 4\nlog_min_messages = debug1\n");

$node->safe_psql('postgres', 'CREATE DATABASE kept_db');
$node->safe_psql('kept_db', q{
	CREATE EXTENSION fbf;
	SELECT fbf_create_counter_table('c', retention => '10 min', expected_rate => 10);
});

ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'fbf launcher'"),
	'the launcher runs');
my $launcher = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'fbf launcher'");

my $seq = 0;

# Databases come and go: some with a counter in use (due every naptime),
# some without the extension (due at once, as new databases are), each
# dropped after a random moment, often while the launcher has it listed.
for my $i (1 .. 40)
{
	my $db = "gone_$i";
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	if ($i % 2)
	{
		$node->safe_psql($db, q{
			CREATE EXTENSION fbf;
			SELECT fbf_create_counter_table('c', retention => '10 min', expected_rate => 10);
			SELECT idempotent_increment('c', 1, 1, 1);
		});
	}
	$node->safe_psql('kept_db', "SELECT idempotent_increment('c', 1, " . ++$seq . ", 1)");
	usleep(int(rand(250_000)));
	# no FORCE: a pass connected there is short, and DROP waits for it
	$node->safe_psql('postgres', "DROP DATABASE $db");
}

# the databases that remain are still served: kept_db's counter is in use,
# so its passes go on every naptime
my $before = db_commits($node, 'kept_db');
for (1 .. 10)
{
	$node->safe_psql('kept_db', "SELECT idempotent_increment('c', 1, " . ++$seq . ", 1)");
	usleep(200_000);
}
my $passes = db_commits($node, 'kept_db') - $before - 10;
cmp_ok($passes, '>=', 5, "kept_db is still maintained ($passes passes in 2 s)");

is($node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'fbf launcher'"),
	$launcher, 'the launcher was not restarted');

my $log = slurp_file($node->logfile);
my @fatal = $log =~ /^.*FATAL:.*$/mg;
is(scalar(@fatal), 0, 'no FATAL')
  or diag(join("\n", @fatal[0 .. ($#fatal < 4 ? $#fatal : 4)]));
my @exit1 = $log =~ /^.*fbf (?:maintenance pass|launcher).*exited with exit code 1.*$/mg;
is(scalar(@exit1), 0, 'no fbf process exited with code 1')
  or diag(join("\n", @exit1[0 .. ($#exit1 < 4 ? $#exit1 : 4)]));
my @skipped = $log =~ /no maintenance pass in database \d+/g;
note scalar(@skipped) . ' passes found their database dropped as they connected';

$node->stop;
done_testing();
