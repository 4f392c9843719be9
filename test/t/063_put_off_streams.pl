# An operation a drain puts off is recorded in its stream when a later
# drain stores it, and a VACUUM lets it wait.
#
# A drain records the stream of an operation only when its store takes
# the entry (the store decides, the drain records what it took, then the
# store writes).  An entry the store leaves on its chain (its page's lane
# full for this period, or its cuckoo block full) is answered exactly from
# the chain while it waits; once a later drain stores it, only its stream
# answers it exactly.  Were it then not recorded, its stream's bit would
# be clear below the stream's highest seq, and a retry would be proven new
# and applied a second time.
#
# VACUUM drains so that no entry outlives the commit log, but an entry
# put off was judged committed, which a truncated commit log answers for
# it too: it waits there as at any drain.  VACUUM used to store every
# entry, and so poured a flood's backlog into pages sized for a tenth of
# it, far past the target.
#
# For each format (Bloom, cuckoo): a counter planned for 10 operations a
# second, the worker off so that the test runs its passes
# (fbf_counter_maintain, which drains as the worker does).  One session,
# its window held to its planned size, applies committed batches of 100
# operations over 50 streams (each stream's seqs in order) until it is
# refused for its share of the capacity; a pass at once must leave some of
# them waiting, and a VACUUM right after must leave them waiting too, the
# window's estimate within its target (a new counter is flooded again, up
# to three times, if none waits: a period may end just then).  Then, a
# pass every half period until nothing waits; every operation of a
# committed batch, sent again, must be dismissed, and the counter must
# hold each once.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

use FbfTest;

my $node = fbf_node('put_off_streams', "fbf.worker_enabled = off\n");

$node->safe_psql('postgres', q{
	CREATE TABLE sent (counter text, first bigint, size int);
	CREATE TABLE refused (counter text, message text);
});

# an operation of the flood: g's stream is g % 50 (of key 'k'), its seq
# g / 50
sub op
{
	my ($counter, $g) = @_;
	return "idempotent_increment('$counter', 'k', ($g) % 50, ($g) / 50, 1)";
}

sub pending
{
	my ($counter) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT pending FROM fbf_counter_stats WHERE counter = '$counter'::regclass});
}

# A new counter `c` of format `filter` and its flood, each batch recorded
# in `sent` in its own transaction, then at once a pass, then a VACUUM:
# the period, the operations committed, the refusal that ended the flood,
# the entries the pass left on the chains, those the VACUUM left, and
# whether the window's estimate was then within its target (and the
# estimate).
sub flood
{
	my ($c, $filter) = @_;

	$node->safe_psql('postgres', qq{
		SELECT fbf_create_counter_table('$c', retention => '2 min', expected_rate => 10,
										filter => '$filter');
	});
	my ($period, $bytes) = split /\|/, $node->safe_psql('postgres', qq{
		SELECT extract(epoch FROM period), bytes
		  FROM fbf_counter_stats WHERE counter = '$c'::regclass});

	my $waiting = $node->safe_psql('postgres', qq{
		SET fbf.max_filter_size = '${bytes}B';
		DO \$\$
		DECLARE
			next bigint := 0;
		BEGIN
			LOOP
				BEGIN
					PERFORM count(*) FILTER (WHERE ${\ op($c, 'g')})
					   FROM generate_series(next, next + 99) g;
					INSERT INTO sent VALUES ('$c', next, 100);
				EXCEPTION WHEN SQLSTATE '53400' THEN
					INSERT INTO refused VALUES ('$c', SQLERRM);
					EXIT;
				END;
				COMMIT;
				next := next + 100;
			END LOOP;
		END \$\$;
		DO \$\$ BEGIN PERFORM fbf_counter_maintain('$c'); END \$\$;
		SELECT pending FROM fbf_counter_stats WHERE counter = '$c'::regclass;
		VACUUM $c;
		SELECT pending, estimated_fpp <= target_fpp, estimated_fpp
		  FROM fbf_counter_stats WHERE counter = '$c'::regclass;
	});
	my ($after, $within, $fpp);
	($waiting, $after) = split /\n/, $waiting;
	($after, $within, $fpp) = split /\|/, $after;
	my ($sent, $refusal) = split /\|/, $node->safe_psql('postgres', qq{
		SELECT (SELECT sum(size) FROM sent WHERE counter = '$c'),
			   (SELECT string_agg(message, '; ') FROM refused WHERE counter = '$c')});
	return ($period, $sent, $refusal // '', $waiting, $after, $within, $fpp);
}

for my $filter ('bloom', 'cuckoo')
{
	# a flood that ends as a period begins may see all of it stored by
	# the pass: then once more, on a new counter (three tries)
	my ($c, $period, $sent, $refusal, $waiting, $after, $within, $fpp);
	for my $try (1 .. 3)
	{
		$c = "c_${filter}_$try";
		($period, $sent, $refusal, $waiting, $after, $within, $fpp) = flood($c, $filter);
		note("$filter, try $try: $sent operations committed, then refused: $refusal; "
			  . "period $period s; $waiting entries wait, $after after VACUUM (estimate $fpp)");
		last if $waiting > 0 && $after > 0;
	}
	cmp_ok($sent, '>=', 1000, "$filter: the flood committed batches");
	like($refusal, qr/is over its share of the capacity/,
		"$filter: until it was refused for its share of the capacity");
	cmp_ok($waiting, '>', 0, "$filter: a pass put some of them off ($waiting entries wait)");
	# VACUUM drains so that no entry outlives the commit log, but an
	# entry put off was judged committed: it may wait there too (poured
	# in, a Bloom window's backlog filled pages sized for a tenth of it:
	# estimate 0.35 against a target of 0.001)
	cmp_ok($after, '>', 0, "$filter: a VACUUM lets them wait ($after entries)");
	is($within, 't', "$filter: and the window's estimate stays within its target ($fpp)");

	# later periods' passes store them
	my $tries = 0;
	while (pending($c) > 0 && $tries++ < 20)
	{
		sleep($period / 2);
		$node->safe_psql('postgres', "SELECT fbf_counter_maintain('$c')");
	}
	is(pending($c), '0', "$filter: later passes stored every one");

	is($node->safe_psql('postgres', qq{
		SELECT count(*) FILTER (WHERE ${\ op($c, 'g')})
		  FROM sent, generate_series(first, first + size - 1) g
		 WHERE counter = '$c'}),
		'0', "$filter: every operation of a committed batch, sent again, is dismissed");
	is($node->safe_psql('postgres', "SELECT fbf_counter_value('$c', 'k')"), $sent,
		"$filter: the counter holds each operation once");
}

$node->stop;
done_testing();
