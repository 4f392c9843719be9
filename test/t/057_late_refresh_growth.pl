# A window refreshed late is not grown as if it had taken a flood.
#
# A refresh that finds several periods due rotates that many filters in
# at once, each born then, so the present filter may be microseconds old
# when a growth measures the rate since its birth.  Measured over that,
# an idle window's few entries in flight read as tens of thousands of
# operations a second: before the fix, 50 dedup tables planned for one
# claim a second, each given one claim every four seconds, grew to up to
# 256 partitions each (logged at 31,496 operations a second), and a
# tenant's 1,280 such tables reached 42 GB.  The rate is now measured over
# a period at least.
#
# Here the worker's naptime (10 s) is long beside the tables' period
# (1 s), so its passes find periods due; each round claims an id in each
# table inside a transaction that stays open for four seconds.  No growth
# may read more than 100 operations a second (what the claims make of it
# is 2 at most: the committed ones wait on the chains for the worker), and
# no table may grow past 8 partitions.  The tables have the shape a plan
# for one claim a second had before planned filters filled their pages
# (64 bits a page): small enough to grow for a few claims.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FbfTest;

my $node = fbf_node('late_refresh', "fbf.naptime = 10s\n");

$node->safe_psql('postgres', q{
	SELECT count(fbf_create_dedup('tiny' || g, retention => '10 s', nbits => 64,
								  nhashes => 4, npast => 9, max_streams => 0))
	  FROM generate_series(1, 50) g;
});
my $log_offset = -s $node->logfile;
for my $round (1 .. 6)
{
	$node->safe_psql('postgres', q{
		BEGIN;
		SELECT count(fbf_claim(('tiny' || g)::regclass, (random() * 9e18)::bigint))
		  FROM generate_series(1, 50) g;
		SELECT pg_sleep(4);
		COMMIT;
	});
}

my $log = substr(slurp_file($node->logfile), $log_offset);
my @rates = $log =~ /fbf: grew "tiny\d+_fbf" from \d+ to \d+ partitions at once \((\d+) operations per second/g;
# the worker measured them (each grows a little: the claims committed
# wait on the chains for its passes, and count with the period's)
ok(scalar(@rates) > 0, 'growths of the idle tables were measured');
my @high = grep { $_ > 100 } @rates;
is(scalar(@high), 0, 'no growth of an idle table read more than 100 operations a second')
  or diag('rates read: ' . join(', ', @rates));
cmp_ok($node->safe_psql('postgres', q{
	SELECT max(partitions) FROM fbf_dedup_stats WHERE dedup::text LIKE 'tiny%'}),
	'<=', 8, 'no idle table grew past 8 partitions');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM fbf_dedup_stats WHERE dedup::text LIKE 'tiny%'}),
	'50', 'the statistics read every table');

$node->stop;
done_testing();
