# wal_consistency_checking = 'all' on loads that install a snapshot's
# streams: every stream page an adoption or a merge writes (one logged
# change each) is compared, after redo, with the primary's image, on a
# streaming standby and in crash recovery; the standby and the recovered
# primary answer the loaded streams exactly.  Loads: a Bloom snapshot
# adopted by a counter with as many stream pages and by one with fewer
# (re-placed by id), merged back into its own counter (the union), and a
# cuckoo window's snapshot adopted; with operations drained and some still
# pending when the snapshots are taken.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;

my $conf = "wal_consistency_checking = 'all'\nautovacuum = off\nfbf.worker_enabled = off\n";
my $primary = fbf_node('primary', $conf, allows_streaming => 1);
my $standby = fbf_standby($primary, 'standby', slot => 1);

# applied and dismissed by a query of increments, as "applied/total"
sub ops
{
	my ($node, $counter, $from, $to) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT count(*) FILTER (WHERE idempotent_increment('$counter', c, g, 1)) || '/' || count(*)
		FROM generate_series(1, 300) c, generate_series($from, $to) g});
}

for my $filter ('bloom', 'cuckoo')
{
	$primary->safe_psql('postgres', qq{
		SELECT fbf_create_counter_table('src_$filter', retention => '10 min',
										expected_rate => 1000, filter => '$filter');
		SELECT fbf_create_counter_table('dst_$filter', retention => '10 min',
										expected_rate => 1000, filter => '$filter');
		SELECT fbf_create_counter_table('few_$filter', retention => '10 min',
										expected_rate => 1000, filter => '$filter',
										max_streams => 300)});
	is(ops($primary, "src_$filter", 1, 10), '3000/3000', "$filter: operations apply");
	$primary->safe_psql('postgres', qq{SELECT fbf_counter_maintain('src_$filter')});
	is(ops($primary, "src_$filter", 11, 12), '600/600', "$filter: more, left pending");
	is($primary->safe_psql('postgres', qq{
		CREATE TABLE snap_$filter AS SELECT fbf_snapshot('src_$filter') AS s;
		SELECT fbf_counter_load('dst_$filter', s) || ' ' || fbf_counter_load('few_$filter', s)
		  FROM snap_$filter}),
		'adopted adopted', "$filter: adopted by a counter of as many stream pages, and of fewer");
}
# a merge: the Bloom counter's own snapshot back into it, after more
is(ops($primary, 'src_bloom', 13, 14), '600/600', 'bloom: more operations');
$primary->safe_psql('postgres', q{SELECT fbf_counter_maintain('src_bloom')});
is($primary->safe_psql('postgres', q{
	SELECT fbf_counter_load('src_bloom', s) FROM snap_bloom}), 'merged',
	'bloom: its snapshot merged back into it');

$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', q{
	SELECT string_agg(format('%s %s %s', counter, streams, streams_exact_from IS NULL), ', '
					  ORDER BY counter::text)
	  FROM fbf_counter_stats WHERE counter::text ~ '^(dst|few)_'}),
	'dst_bloom 300 t, dst_cuckoo 300 t, few_bloom 300 t, few_cuckoo 300 t',
	'the standby replays the installed streams, consistency-checked');

# crash recovery, consistency-checked too: the loaded streams answer
$primary->stop('immediate');
$primary->start;
for my $c ('dst_bloom', 'few_bloom', 'dst_cuckoo', 'few_cuckoo', 'src_bloom')
{
	my $high = $c eq 'src_bloom' ? 14 : 12;
	my $before = counter_stats($primary, $c)->{filter_answers};

	is(ops($primary, $c, $high - 9, $high), '0/3000', "$c: after recovery every retry dismissed");
	is(ops($primary, $c, $high + 1, $high + 2), '600/600', "$c: new operations apply");
	is(counter_stats($primary, $c)->{filter_answers}, $before, "$c: all answered by the streams");
}

my $log = slurp_file($standby->logfile) . slurp_file($primary->logfile);
unlike($log, qr/inconsistent page found/, 'no page was found inconsistent');
unlike($log, qr/PANIC|TRAP/, 'no PANIC or assertion');

$standby->stop;
$primary->stop;
done_testing();
