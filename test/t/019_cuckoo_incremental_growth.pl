# Copyright: the fbf authors.  TAP test, run by test/check.sh.
#
# The cuckoo index grows a page at a time: a doubling,
# once begun, is carried out by the inserts that follow, one split step
# each, so that no lookup or insert waits for a whole doubling.
#
# 1. A load in small statements into an index grown from one page is seen
#    in the middle of a doubling ("growing" in cuckoo_index_stats), where
#    lookups through the index find every row and cuckoo_index_verify
#    accepts it.  Before, a doubling ran whole inside one insert, and only
#    a crash could leave one half done: this check fails.
# 2. A crash in the middle of such a doubling: after recovery the index is
#    still growing, answers every lookup and verifies; later inserts end
#    the doubling.
# 3. statement_timeout cancels a load that keeps the index growing, at
#    once (within a few seconds of the timeout); the index verifies, and
#    the next inserts carry the doubling on.
use strict;
use warnings;

use FbfTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = fbf_node('grow', "autovacuum = off\n");
$node->safe_psql('postgres', q{
	CREATE TABLE t (id int8, k int8) WITH (autovacuum_enabled = off);
	CREATE INDEX t_k ON t USING cuckoo (k);
});

# t_k's growth, as "growing doublings bucket_pages" ("t 3 64"): the
# assertions below match its start, and show the rest if they fail
sub growth
{
	my $s = cuckoo_stats($node, 't_k');
	return "$s->{growing} $s->{doublings} $s->{bucket_pages}";
}

sub lookups_match
{
	my ($what) = @_;
	my $max = $node->safe_psql('postgres', 'SELECT coalesce(max(k), 0) FROM t');
	is($node->safe_psql('postgres', qq{
			SET enable_seqscan = off; SET enable_bitmapscan = off;
			SELECT count(*) FROM t WHERE k IN (SELECT generate_series(0, $max))}),
		$node->safe_psql('postgres', 'SELECT count(*) FROM t'),
		"$what: index lookups find every row");
	is($node->safe_psql('postgres', q{
			SELECT entries = heap_tuples FROM cuckoo_index_verify('t_k')}),
		't', "$what: cuckoo_index_verify accepts the index");
}

# ---- 1. a doubling under way, seen between statements ----

# 20,000 rows, then 10 at a time until a doubling of 32 pages or more is
# seen under way (a doubling of n pages takes about n inserts now)
$node->safe_psql('postgres', q{
	INSERT INTO t SELECT g, g FROM generate_series(1, 20000) g;
	CREATE FUNCTION load_until_growing(first int8, most int) RETURNS text
	LANGUAGE plpgsql AS $$
	DECLARE
		n int8 := first;
		s record;
	BEGIN
		FOR i IN 1 .. most LOOP
			INSERT INTO t SELECT g, g FROM generate_series(n, n + 9) g;
			n := n + 10;
			SELECT * INTO s FROM cuckoo_index_stats('t_k');
			IF s.growing AND s.bucket_pages >= 32 THEN
				RETURN n || ' ' || s.doublings || ' ' || s.bucket_pages;
			END IF;
		END LOOP;
		RETURN -n || ' none';
	END $$;
});
my ($next, $doubling, $pages) = split / /,
  $node->safe_psql('postgres', 'SELECT load_until_growing(20001, 5000)');
cmp_ok($next, '>', 0,
	"a doubling is seen under way between two inserts (doubling $doubling, "
	  . ($next - 1) . " rows, $pages bucket pages)");
is(growth() =~ /^t / ? 'growing' : 'not growing', 'growing',
	'and stays so, committed, while nothing is inserted');
lookups_match('in the middle of a doubling');

# ---- 2. a crash in the middle of it ----

$node->stop('immediate');
$node->start;
like(growth(), qr/^t /, 'after a crash the index is still growing');
lookups_match('after the crash');
my $rounds = 0;
while (growth() =~ /^t / && $rounds < 1000)
{
	$node->safe_psql('postgres',
		"INSERT INTO t SELECT g, g FROM generate_series($next, $next + 9) g");
	$next += 10;
	$rounds++;
}
like(growth(), qr/^f /, "later inserts end the doubling ($rounds statements of 10 rows)");
lookups_match('after the doubling ended');

# ---- 3. cancel during growth ----

my $started = time;
my ($rc, $out, $err) = $node->psql('postgres', qq{
	SET statement_timeout = '1s';
	INSERT INTO t SELECT g, g FROM generate_series($next, $next + 50000000) g;
});
my $took = time - $started;
like($err, qr/canceling statement due to statement timeout/,
	'statement_timeout cancels a load that grows the index');
cmp_ok($took, '<', 10, sprintf('and at once (%.1f s for a 1 s timeout)', $took));
lookups_match('after the cancel');
$rounds = 0;
$node->safe_psql('postgres',
	"INSERT INTO t SELECT g, g FROM generate_series($next, $next + 999) g");
$next += 1000;
while (growth() =~ /^t / && $rounds < 1000)
{
	$node->safe_psql('postgres',
		"INSERT INTO t SELECT g, g FROM generate_series($next, $next + 9) g");
	$next += 10;
	$rounds++;
}
like(growth(), qr/^f /, 'inserts after the cancel carry any doubling under way to its end');
lookups_match('at the end');

$node->stop;
done_testing();
