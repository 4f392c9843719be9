# Dump and restore keep a counter's memory (fbf_counter_save, fbf_counter_restore).
#
# Counters on one server apply operations (one planned for its rate, one
# keyed in another schema, one that outgrew its plan and split); their
# windows are saved (fbf_counter_save, into a table of the user's) and the
# database dumped with pg_dump, then restored into a fresh cluster, where
# fbf_counter_restore loads every saved window from that table.  There every operation is retried: none may
# apply, and every counter equals its original.  New operations still
# apply.  Then the restored server crashes (immediate stop) and restarts:
# the loaded windows were WAL-logged, so every retry is still dismissed.
# Without the saved windows, every retry would apply again.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use FbfTest;

my $old = fbf_node('dump_source', "fbf.naptime = 200ms\n");

$old->safe_psql('postgres', q{
	CREATE SCHEMA shop;
	SELECT fbf_create_counter_table('likes', retention => '10 min', expected_rate => 1000);
	SELECT fbf_create_counter_table('shop.carts', retention => '10 min', expected_rate => 1000);
	SELECT fbf_create_counter_table('small', retention => '10 min', expected_rate => 10);
	SELECT fbf_create_dedup('inbox', retention => '10 min', expected_rate => 1000);
});

# every operation of the test, as one query returning how many applied
my %ops = (
	likes => q{SELECT count(*) FILTER (WHERE idempotent_increment('likes', c, s, 1))
			   FROM generate_series(1, 3) c, generate_series(1, 2000) s},
	carts => q{SELECT count(*) FILTER (WHERE idempotent_increment('shop.carts', 'cart:' || (s % 50), c, s, s % 7))
			   FROM generate_series(10, 11) c, generate_series(1, 1500) s},
	small => q{SELECT count(*) FILTER (WHERE idempotent_increment('small', c::text, s, 2))
			   FROM generate_series(1, 2) c, generate_series(1, 3000) s},
	inbox => q{SELECT count(*) FILTER (WHERE claimed)
			   FROM unnest(fbf_claim('inbox', ARRAY(SELECT 'msg-' || g FROM generate_series(1, 2500) g))) claimed},
);
my %expected = (likes => 6000, carts => 3000, small => 6000, inbox => 2500);

for my $name (sort keys %ops)
{
	is($old->safe_psql('postgres', $ops{$name}), $expected{$name},
		"$name: every operation applies on the source");
}
# some drained into the bits, some still pending when saved
$old->safe_psql('postgres', q{SELECT fbf_counter_maintain('likes')});
# The small counter grows for the burst it just took: a maintenance pass
# splits its partitions for the rate at once.  Let that happen here, not
# in the worker between the count below and the save.
$old->safe_psql('postgres', q{SELECT fbf_counter_maintain('small')});

my $values_query = q{
	SELECT string_agg(format('%s=%s', t, v), ' ' ORDER BY t) FROM (
		SELECT 'likes' AS t, sum(value) AS v FROM likes
		UNION ALL SELECT 'carts', sum(value) FROM shop.carts
		UNION ALL SELECT 'small', sum(value) FROM small) s};
my $values = $old->safe_psql('postgres', $values_query);
my $small_parts = $old->safe_psql('postgres',
	q{SELECT partitions FROM fbf_counter_stats WHERE counter = 'small'::regclass});
cmp_ok($small_parts, '>', 1, "the small counter outgrew its plan ($small_parts partitions)");

# save right before the dump, with no writer running
$old->safe_psql('postgres', 'CREATE TABLE fbf_saved AS SELECT * FROM fbf_counter_save()');
is($old->safe_psql('postgres', 'SELECT count(*) FROM fbf_saved'), '4', 'four windows saved');

my $tmp = PostgreSQL::Test::Utils::tempdir();
my $dump = "$tmp/source.dump";
command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $old->connstr('postgres') ],
	'pg_dump');

# a fresh cluster
my $new = fbf_node('dump_target', "fbf.naptime = 200ms\n");
$new->safe_psql('postgres', 'CREATE DATABASE restored');
command_ok([ 'pg_restore', '--exit-on-error', '-d', $new->connstr('restored'), $dump ],
	'pg_restore into a fresh cluster');

is($new->safe_psql('restored', 'SELECT count(*) FROM fbf_saved'), '4',
	'the saved windows came with the dump');
# what a restore without the second step would do: a new counter's window is empty
is($new->safe_psql('restored',
	q{SELECT elements[1] + elements[2] FROM fbf_counter_stats WHERE counter = 'likes'::regclass}),
	'0', 'the restored windows start empty');

is($new->safe_psql('restored',
	q{SELECT string_agg(format('%s %s', name, outcome), ', ' ORDER BY name)
	  FROM fbf_counter_restore('fbf_saved')}),
	'public.inbox adopted, public.likes adopted, public.small adopted, shop.carts adopted',
	'fbf_counter_restore loads every saved window');
is($new->safe_psql('restored',
	q{SELECT partitions FROM fbf_counter_stats WHERE counter = 'small'::regclass}),
	$small_parts, 'the split counter keeps its partitions');

is($new->safe_psql('restored', $values_query), $values, 'counter values are equal');
for my $name (sort keys %ops)
{
	is($new->safe_psql('restored', $ops{$name}), '0',
		"$name: every retry is dismissed after the restore");
}
is($new->safe_psql('restored', $values_query), $values, 'and the values did not change');
is($new->safe_psql('restored',
	q{SELECT count(*) FILTER (WHERE idempotent_increment('likes', 99, s, 1))
	  FROM generate_series(1, 100) s}),
	'100', 'new operations apply');

# a crash right after: the loaded windows were WAL-logged
$new->stop('immediate');
$new->start;
for my $name (sort keys %ops)
{
	is($new->safe_psql('restored', $ops{$name}), '0',
		"$name: every retry is still dismissed after a crash");
}
is($new->safe_psql('restored',
	q{SELECT count(*) FILTER (WHERE idempotent_increment('likes', 99, s, 1))
	  FROM generate_series(1, 100) s}),
	'0', 'and so are the operations applied after the restore');

$new->stop;
$old->stop;
done_testing();
