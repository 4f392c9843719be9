# A maintenance pass stays in a busy database: one process serves it round
# after round, instead of a new one every fbf.naptime.  It leaves when
# asked: when another database waits for its slot or fbf.max_workers is
# lowered, when fbf.worker_enabled is turned off, and before the commands that no other
# session may outlast: DROP DATABASE (WITH (FORCE) too, by an owner who
# is no superuser and so could not terminate the pass), ALTER DATABASE
# ... RENAME TO and CREATE DATABASE ... TEMPLATE, which wait 5 s for the
# other sessions to leave.  Someone who may not drop the database cannot
# send the pass away.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep time);
use FbfTest;

# commits that wait for no disk: a stall of both clients longer than a
# naptime would make a round idle, and the pass leave
my $node = fbf_node('stays',
	"fbf.naptime = 200ms\nfbf.max_workers = 1\nsynchronous_commit = off\n");
$node->safe_psql('postgres', 'CREATE ROLE alice LOGIN; CREATE ROLE mallory LOGIN');

my $bindir = `pg_config --bindir`;
chomp $bindir;

# a database owned by alice, with her counter
sub make_db
{
	my ($db) = @_;

	$node->safe_psql('postgres', "CREATE DATABASE $db OWNER alice");
	$node->safe_psql($db, 'CREATE EXTENSION fbf');
	$node->safe_psql($db, q{
		SELECT fbf_create_counter_table('c', retention => '1 min', expected_rate => 1000)},
		extra_params => [ '-U', 'alice' ]);
}

# alice's clients: 2 connections, 100 new operations a second each
sub start_load
{
	my ($db) = @_;
	my $file = "${PostgreSQL::Test::Utils::tmp_check}/load_$db.sql";
	my ($out, $err) = ('', '');

	open(my $fh, '>', $file) or die "$file: $!";
	print $fh "\\set k random(1, 100)\n\\set s random(1, 1000000000)\n"
	  . "SELECT idempotent_increment('c', :k::text, :client_id, :s, 1);\n";
	close $fh;
	my $h = IPC::Run::start([ "$bindir/pgbench", '-n', '-c', 2, '-R', 200, '-T', 300,
			'-h', $node->host, '-p', $node->port, '-U', 'alice', '-f', $file, $db ],
		'>', \$out, '2>', \$err);
	return $h;
}

sub stop_load
{
	my ($h, $db) = @_;

	$h->kill_kill;
	$node->poll_query_until('postgres', qq{
		SELECT count(*) = 0 FROM pg_stat_activity
		WHERE datname = '$db' AND backend_type = 'client backend'})
	  or die "alice's clients in $db did not leave";
}

# the pid of the pass in $db, '' if none
sub pass_pid
{
	my ($db) = @_;

	return $node->safe_psql('postgres', qq{
		SELECT pid FROM pg_stat_activity
		WHERE backend_type = 'fbf maintenance pass' AND datname = '$db'});
}

sub wait_for_pass
{
	my ($db, $not) = @_;
	my $cond = defined $not ? "AND pid <> $not" : '';

	return $node->poll_query_until('postgres', qq{
		SELECT count(*) = 1 FROM pg_stat_activity
		WHERE backend_type = 'fbf maintenance pass' AND datname = '$db' $cond});
}

# Within $secs seconds, is there a pass in $db (other than $not, if
# given), or ($want false) none in any database?  Looked for every 10 ms:
# passes that make room for each other may live for one round only.
$node->safe_psql('postgres', q{
	CREATE FUNCTION pass_within(db text, secs float8, notpid int, want boolean)
	RETURNS boolean LANGUAGE plpgsql AS $$
	DECLARE
		t0 timestamptz := clock_timestamp();
	BEGIN
		LOOP
			PERFORM pg_stat_clear_snapshot();
			IF EXISTS (SELECT FROM pg_stat_activity
					   WHERE backend_type = 'fbf maintenance pass'
					   AND (db IS NULL OR datname = db)
					   AND pid IS DISTINCT FROM notpid) = want THEN
				RETURN true;
			END IF;
			EXIT WHEN clock_timestamp() - t0 > secs * interval '1 s';
			PERFORM pg_sleep(0.01);
		END LOOP;
		RETURN false;
	END $$});

sub pass_within
{
	my ($db, $secs, $not) = @_;

	return $node->safe_psql('postgres',
		"SELECT pass_within('$db', $secs, " . ($not // 'NULL') . ', true)') eq 't';
}

sub no_pass_within
{
	my ($secs) = @_;

	return $node->safe_psql('postgres',
		"SELECT pass_within(NULL, $secs, NULL, false)") eq 't';
}

sub set_conf
{
	my ($name, $value) = @_;

	$node->safe_psql('postgres', "ALTER SYSTEM SET $name = '$value'");
	$node->reload;
}

# 1. The pass stays while its database is busy, and drains all along.
make_db('busy');
my $load = start_load('busy');
ok(wait_for_pass('busy'), 'a pass serves the busy database');
my %pids;
my $high = 0;
for (1 .. 15)
{
	usleep(200_000);
	$pids{ pass_pid('busy') }++;
	my $pending = $node->safe_psql('busy', 'SELECT pending FROM fbf_counter_stats');
	$high = $pending if $pending > $high;
}
delete $pids{''};
cmp_ok(scalar(keys %pids), '<=', 3,
	'at most 3 processes serve it in 3 s (15 naptimes): ' . scalar(keys %pids));
cmp_ok($high, '<', 400,
	"it drains all along: at most $high entries pending (200 operations a second)");

# 2. Someone who may not drop the database cannot send the pass away.
my ($ret, $stdout, $stderr) = $node->psql('postgres', 'DROP DATABASE busy WITH (FORCE)',
	extra_params => [ '-U', 'mallory' ]);
like($stderr, qr/must be owner of database busy/, "mallory may not drop alice's database");
ok(pass_within('busy', 3), 'nor keep passes away from it');

# 3. Another database waits for the only slot: the pass makes room, and
# the two are served in turn.
my $pid = pass_pid('busy');
make_db('other');
my $other_load = start_load('other');
ok(pass_within('other', 5), 'the other database gets the slot within 5 s');
ok(pass_within('busy', 5, $pid), 'and the busy one gets it back within 5 s, a new pass');
for my $db ('busy', 'other')
{
	my $high = 0;
	for (1 .. 10)
	{
		usleep(300_000);
		my $pending = $node->safe_psql($db, 'SELECT pending FROM fbf_counter_stats');
		$high = $pending if $pending > $high;
	}
	cmp_ok($high, '<', 600, "$db is drained while the two share the slot (at most $high pending)");
}

# 3b. fbf.max_workers lowered under two passes that stay: one leaves, and
# from then on the two databases take turns in the one slot, never two
# passes at once (without the launcher asking, both would stay for five
# minutes).
$node->safe_psql('postgres', q{
	CREATE FUNCTION most_passes(secs float8) RETURNS int LANGUAGE plpgsql AS $$
	DECLARE
		t0 timestamptz := clock_timestamp();
		most int := 0;
	BEGIN
		LOOP
			PERFORM pg_stat_clear_snapshot();
			most := greatest(most, (SELECT count(*) FROM pg_stat_activity
									WHERE backend_type = 'fbf maintenance pass'));
			EXIT WHEN clock_timestamp() - t0 > secs * interval '1 s';
			PERFORM pg_sleep(0.01);
		END LOOP;
		RETURN most;
	END $$});
set_conf('fbf.max_workers', 2);
my $t0;
ok( $node->poll_query_until('postgres', q{
		SELECT count(DISTINCT datname) = 2 FROM pg_stat_activity
		WHERE backend_type = 'fbf maintenance pass'}),
	'with two slots, each busy database has a pass');
set_conf('fbf.max_workers', 1);
$t0 = time;
ok( $node->poll_query_until('postgres', q{
		SELECT count(*) <= 1 FROM pg_stat_activity
		WHERE backend_type = 'fbf maintenance pass'}),
	'fbf.max_workers lowered to 1: a pass leaves');
cmp_ok(time - $t0, '<', 5, 'within 5 s');
is($node->safe_psql('postgres', 'SELECT most_passes(3) <= 1'), 't',
	'and no two passes run at once for the next 3 s, both databases busy');
ok(pass_within('busy', 5) && pass_within('other', 5), 'both are still served');

stop_load($other_load, 'other');
$node->safe_psql('postgres', 'DROP DATABASE other');
# from here on no database waits for a slot: a pass leaves for the reason
# under test, not to make room
set_conf('fbf.max_workers', 4);

# 4. DROP DATABASE WITH (FORCE) by the owner, no superuser, while her
# clients run and the pass stays: the pass leaves first, the clients are
# terminated, the database is gone.
ok(wait_for_pass('busy'), 'a pass is in the busy database');
$t0 = time;
($ret, $stdout, $stderr) = $node->psql('postgres', 'DROP DATABASE busy WITH (FORCE)',
	extra_params => [ '-U', 'alice' ]);
is($ret, 0, 'the owner drops her busy database WITH (FORCE)') or diag($stderr);
cmp_ok(time - $t0, '<', 3, 'at once (the pass left first)');
$load->finish;
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'busy'"),
	'0', 'it is gone');

# 5. Commands that wait 5 s for other sessions to leave: a pass that stays
# (here until a naptime of 30 s is over) leaves for them.
sub staying_pass
{
	my ($db) = @_;

	set_conf('fbf.naptime', '200ms');
	my $h = start_load($db);
	wait_for_pass($db) or die "no pass in $db";
	# a round under the long naptime, which finds operations: the pass
	# then waits 30 s for the next
	set_conf('fbf.naptime', '30s');
	usleep(1_500_000);
	stop_load($h, $db);
	my $pid = pass_pid($db);
	die "the pass left $db" if $pid eq '';
	return $pid;
}

make_db('renamed');
staying_pass('renamed');
$t0 = time;
($ret, $stdout, $stderr) = $node->psql('postgres', 'ALTER DATABASE renamed RENAME TO renamed2');
is($ret, 0, 'ALTER DATABASE ... RENAME TO succeeds while a pass stays there') or diag($stderr);
cmp_ok(time - $t0, '<', 3, 'within 3 s (the pass saw the lock taken)');

make_db('source');
staying_pass('source');
$t0 = time;
($ret, $stdout, $stderr) = $node->psql('postgres', 'CREATE DATABASE copied TEMPLATE source');
is($ret, 0, 'CREATE DATABASE ... TEMPLATE succeeds while a pass stays in the template')
  or diag($stderr);
cmp_ok(time - $t0, '<', 3, 'within 3 s');
is($node->safe_psql('copied', q{SELECT count(*) FROM fbf_counter_stats}), '1',
	'the copy has the counter');

# 6. fbf.worker_enabled turned off: the pass leaves.
set_conf('fbf.naptime', '200ms');
make_db('third');
my $third_load = start_load('third');
ok(wait_for_pass('third'), 'a pass serves the third database');
set_conf('fbf.worker_enabled', 'off');
ok(no_pass_within(5),
	'the pass leaves within 5 s when the worker is turned off, its clients still busy');
set_conf('fbf.worker_enabled', 'on');
ok(wait_for_pass('third'), 'and one comes back when it is turned on');

# 7. The launcher terminated (pg_terminate_backend, a superuser's) comes
# back after its restart time (10 s), as after an error: one that exited
# with 0 would be unregistered, and no pass would start until the server
# restarted.
my $launcher = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'fbf launcher'});
like($launcher, qr/^\d+$/, 'one launcher runs');
is($node->safe_psql('postgres', "SELECT pg_terminate_backend($launcher)"), 't',
	'a superuser terminates it');
ok($node->poll_query_until('postgres', qq{
	SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'fbf launcher' AND pid <> $launcher}),
	'the postmaster starts another');
my $staying = pass_pid('third');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($staying)") if $staying ne '';
ok(wait_for_pass('third', $staying || undef), 'which starts passes again');
stop_load($third_load, 'third');

$node->stop;
done_testing();
