# Exact streams under a changing max_streams: pgbench clients number their
# operations in order (a session's seq), retry recent ones (within and
# beyond the streams' 64-seq map) and roll back the next one before
# sending it for real, while another session keeps changing max_streams
# (0, below the clients, above them: new runs, streams off and on, resets
# by drains that meet operations from before a run) and maintaining the
# counter.  Bloom and cuckoo windows; every unique operation counts once.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;

my $node = fbf_node('chaos', "fbf.naptime = 100ms\n");
my $tmp = PostgreSQL::Test::Utils::tempdir();

my %filter = (st => 'bloom', sq => 'cuckoo');
for my $c (sort keys %filter)
{
	$node->safe_psql('postgres', qq{
		SELECT fbf_create_counter_table('$c', retention => '10 min', target_fpp => 0.000001,
										max_streams => 250, filter => '$filter{$c}')});
	open my $fh, '>', "$tmp/inc_$c.sql" or die;
	print $fh <<"SQL";
\\set s :s + 1
\\set cid :client_id + 100 * :base
SELECT idempotent_increment('$c', :cid, :s, 1);
\\set r :s - random(0, 80)
\\set r greatest(:r, 1)
SELECT idempotent_increment('$c', :cid, :r, 1);
\\set r2 :s - random(0, 400)
\\set r2 greatest(:r2, 1)
SELECT idempotent_increment('$c', :cid, :r2, 1);
BEGIN;
\\set n :s + 1
SELECT idempotent_increment('$c', :cid, :n, 1);
ROLLBACK;
SQL
	close $fh;
	open $fh, '>', "$tmp/chaos_$c.sql" or die;
	print $fh <<"SQL";
\\set m random(0, 3)
SELECT CASE :m WHEN 0 THEN 0 WHEN 1 THEN 150 WHEN 2 THEN 250 ELSE 600 END AS ms \\gset
ALTER INDEX ${c}_fbf SET (max_streams = :ms);
SELECT fbf_counter_maintain('$c');
SELECT pg_sleep(0.1);
SQL
	close $fh;
}

my @conn = ('-h', $node->host, '-p', $node->port, 'postgres');
my $chaos = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '1', '-T', '600', '-f', "$tmp/chaos_st.sql",
	  '-f', "$tmp/chaos_sq.sql", @conn ],
	'>', "$tmp/chaos.out", '2>&1');
my $rounds = 20;
for my $base (1 .. $rounds)
{
	my @runs = map {
		IPC::Run::start(
			[ 'pgbench', '-n', '-c', '4', '-j', '1', '-t', '100', '-D', 's=0',
			  '-D', "base=$base", '-f', "$tmp/inc_$_.sql", @conn ],
			'>>', "$tmp/inc_$_.out", '2>&1')
	} sort keys %filter;
	$_->finish for @runs;
}
$chaos->kill_kill;

for my $c (sort keys %filter)
{
	my $out = slurp_file("$tmp/inc_$c.out");
	my $done = () = $out =~ m{actually processed: 400/400}g;
	is($done, $rounds, "$c: every pgbench run completed");
	is($node->safe_psql('postgres', "SELECT fbf_counter_value('$c')"), $rounds * 4 * 100,
		"$filter{$c}: every unique operation counted once, through changes of max_streams");
}
my $alters = () = slurp_file($node->logfile) =~ /statement: ALTER INDEX s[tq]_fbf SET \(max_streams/g;
cmp_ok($alters, '>=', 10, "max_streams kept changing ($alters changes)");
unlike(slurp_file($node->logfile), qr/PANIC|TRAP|deadlock detected/, 'no crash, no deadlock');
done_testing();
