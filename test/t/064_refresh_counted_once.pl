# A refresh counts the operations on the window's chains once.
#
# Each refresh counts what waits on the chains, for the growth's measure
# of the rate (docs/design.md, "Growing at once"): a read of every chain,
# up to FBF_MAX_PENDING_PAGES pages each under a backlog.  Every backend
# that finds the refresh due calls it, and before the count was taken
# once, each of them read every chain and all but the one that rotated
# threw the count away, while the metapage's exclusive lock, which every
# operation on the window waits for, waited behind their reads.  Now a
# refresh that is due is done under a heavyweight lock on the metapage's
# block: an operation that finds it taken leaves the refresh to its
# holder and counts nothing.
#
# Eight clients apply single increments to a counter of short period for
# eight seconds, with the worker off, so that every refresh is one an
# operation found due.  The server logs each count and each refresh that
# rotated or was postponed (DEBUG1): there may be no more counts than
# those.
#
# Then what the count is for: it is stored for the filter the refresh
# makes the future, and moves on with it when it becomes the present.  A
# transaction holds 500 operations in flight on another counter while
# single operations bring refreshes about: a refresh stores the 500 (and
# more) for its future, and the next, rotating once, has them for its
# present.
#
# Last, a window that adopts a snapshot starts its counts again: its
# chains are empty, and the filters it takes were born elsewhere.  A
# rolled-back batch leaves 500 entries on the chains, which a refresh
# counts before maintenance drains them; the window, empty again, adopts
# a snapshot, and its metapage's counts are 0 (kept, the 500 would read
# as arrivals drained before the adopted filters' births).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FbfTest;

my $node = fbf_node('counted_once',
	"fbf.worker_enabled = off\nlog_min_messages = debug1\n");

# many chains (a plan of 20,000 operations a second), a period of a
# fraction of a second
$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('c', retention => '2 s', expected_rate => 20000);
});
my $parts = $node->safe_psql('postgres',
	q{SELECT partitions FROM fbf_counter_stats WHERE counter = 'c'::regclass});
cmp_ok($parts, '>=', 16, "the window has $parts partitions");

my $script = $node->basedir . '/increment.sql';
open my $fh, '>', $script or die "$script: $!";
print $fh q{\set k random(1, 100)
SELECT idempotent_increment('c', 'k' || :k, :client_id, (random() * 9e18)::bigint, 1);
};
close $fh;

my $log_offset = -s $node->logfile;
my ($out, $err) = ('', '');
my $h = IPC::Run::start(
	[ 'pgbench', '--no-vacuum', '--client=8', '--jobs=2', '--time=8',
	  '-h', $node->host, '-p', $node->port, '-f', $script, 'postgres' ],
	'>', \$out, '2>', \$err);
my $ran = eval { $h->finish; 1 };
ok($ran && $h->result(0) == 0 && $err !~ /aborted|ERROR/,
	'every client ran to the end without an error')
  or diag("stderr:\n$err\nstdout:\n$out");

my $log = substr(slurp_file($node->logfile), $log_offset);
my $counts = () = $log =~ /fbf: counted \d+ operations on the chains of "c_fbf" for its refresh/g;
my $refreshes = () = $log =~ /fbf: refreshed "c_fbf" \(\d+ rotations\)/g;
# a refresh that counted may still find the oldest filter covering the
# retention, and leave the rotation to a later one
my $postponed = () = $log =~ /fbf: refresh of "c_fbf" postponed/g;
cmp_ok($refreshes, '>=', 4, "the window was refreshed $refreshes times");
cmp_ok($counts, '>=', 1, 'the refreshes counted the chains');
cmp_ok($counts, '<=', $refreshes + $postponed,
	"the chains were counted $counts times, no more than once a refresh ($postponed postponed)");

$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('w', retention => '3 s', expected_rate => 2000);});
my $period = $node->safe_psql('postgres',
	q{SELECT extract(epoch FROM period) FROM fbf_counter_stats WHERE counter = 'w'::regclass});
$node->safe_psql('postgres', q{
	CREATE ROLE w1 LOGIN;
	GRANT SELECT, INSERT, UPDATE ON w TO w1;});
$log_offset = -s $node->logfile;
my $held = fbf_start_call($node, 'w1', q{
	BEGIN;
	SELECT count(*) FROM unnest(idempotent_increment('w', 'a',
		ARRAY(SELECT 1000 + g FROM generate_series(1, 500) g),
		array_fill(1::bigint, ARRAY[500]), array_fill(1::bigint, ARRAY[500])));
	SELECT pg_sleep(8);
	COMMIT;}, 120);
$node->poll_query_until('postgres',
	q{SELECT pending >= 500 FROM fbf_counter_stats WHERE counter = 'w'::regclass})
  or die 'the batch never showed in flight';
# from one session, an operation each 1.25 periods: each brings about a
# refresh that rotates once
$node->safe_psql('postgres', qq{
	DO \$\$
	BEGIN
		FOR i IN 1 .. 8 LOOP
			PERFORM pg_sleep(1.25 * $period);
			PERFORM idempotent_increment('w', 'b', 2, i, 1);
			COMMIT;
		END LOOP;
	END \$\$;});
my @births;
for my $line (split /\n/, substr(slurp_file($node->logfile), $log_offset))
{
	push @births, [ $1, $2, $3 ] if $line =~
	  /fbf: refreshed "w_fbf" \((\d+) rotations\); operations waiting at the births of its future and present filters: (\d+), (\d+)/;
}
ok(fbf_finish_call($held), 'the batch in flight committed');
my @future = grep { $_->[1] >= 500 } @births;
ok(scalar(@future) >= 2,
	'refreshes counted the operations in flight for their future: ' . join('; ', map { "$_->[1], $_->[2]" } @births));
my $moved = 0;
for my $i (1 .. $#births)
{
	next unless $births[$i][0] == 1 && $births[$i - 1][1] >= 500;
	$moved++;
	is($births[$i][2], $births[$i - 1][1],
		"a refresh rotating once has its present's count where the one before had its future's ($births[$i - 1][1])");
}
ok($moved >= 1, 'a count moved on with its filter');

# a window whose counts stand at 500 adopts a snapshot: the counts, read
# from the metapage on disk after a checkpoint, are 0 after it
sub pending_at
{
	my ($t) = @_;
	$node->safe_psql('postgres', 'CHECKPOINT');
	my $at = FBF_PAGE_CONTENTS + FBF_META_PENDING_AT;
	my $hex = $node->safe_psql('postgres', qq{
		SELECT encode(pg_read_binary_file(pg_relation_filepath('${t}_fbf'),
			$at, 16), 'hex')});
	return [ unpack('q<q<', pack('H*', $hex)) ];
}

$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('a', retention => '3 s', expected_rate => 2000);
	SELECT fbf_create_counter_table('s', retention => '3 s', expected_rate => 2000);
	SELECT idempotent_increment('s', 'k', 9, 1, 1);
	GRANT SELECT, INSERT, UPDATE ON a TO w1;});
$period = $node->safe_psql('postgres',
	q{SELECT extract(epoch FROM period) FROM fbf_counter_stats WHERE counter = 'a'::regclass});
# 500 entries of a rolled-back batch on the chains, counted by the
# refresh that maintenance does a period later before it drains them
ok(fbf_finish_call(fbf_start_call($node, 'w1', q{
	BEGIN;
	SELECT count(*) FROM unnest(idempotent_increment('a', 'a',
		ARRAY(SELECT 1000 + g FROM generate_series(1, 500) g),
		array_fill(1::bigint, ARRAY[500]), array_fill(1::bigint, ARRAY[500])));
	ROLLBACK;}, 60)), 'a batch of 500 rolled back');
$node->safe_psql('postgres',
	"SELECT pg_sleep(1.25 * $period); SELECT fbf_counter_maintain('a');");
is($node->safe_psql('postgres',
	q{SELECT pending FROM fbf_counter_stats WHERE counter = 'a'::regclass}),
	'0', 'maintenance drained the rolled-back entries');
my $before = pending_at('a');
ok($before->[0] >= 500,
	"before the adoption, the window's counts are @$before");
is($node->safe_psql('postgres',
	q{SELECT fbf_counter_load('a', fbf_snapshot('s'))}),
	'adopted', 'the empty window adopted the snapshot');
is_deeply(pending_at('a'), [ 0, 0 ], "after it, they are 0");

$node->stop;
done_testing();
