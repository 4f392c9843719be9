# Dump and restore keep a counter's memory (fbf_counter_save, fbf_counter_restore).
#
# Counters on one server apply operations (one planned for its rate, one
# keyed in another schema, one that outgrew its plan and split, one on a
# cuckoo window that outgrew its plan too, and dedup tables on both
# filters); their
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
use FbfTest;

# no worker on the source: drains happen where the test says, so that some
# operations are still pending when the windows are saved
my $old = fbf_node('dump_source', "fbf.worker_enabled = off\n");

$old->safe_psql('postgres', q{
	CREATE SCHEMA shop;
	SELECT fbf_create_counter_table('likes', retention => '10 min', expected_rate => 1000);
	SELECT fbf_create_counter_table('shop.carts', retention => '10 min', expected_rate => 1000);
	SELECT fbf_create_counter_table('small', retention => '10 min', expected_rate => 10);
	SELECT fbf_create_dedup('inbox', retention => '10 min', expected_rate => 1000);
	SELECT fbf_create_counter_table('cuckoo_small', retention => '10 min', expected_rate => 10,
									filter => 'cuckoo');
	SELECT fbf_create_dedup('cuckoo_inbox', retention => '10 min', expected_rate => 1000,
							filter => 'cuckoo');
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
	cuckoo_small => q{SELECT count(*) FILTER (WHERE idempotent_increment('cuckoo_small', c::text, s, 3))
			   FROM generate_series(1, 2) c, generate_series(1, 4000) s},
	cuckoo_inbox => q{SELECT count(*) FILTER (WHERE claimed)
			   FROM unnest(fbf_claim('cuckoo_inbox', ARRAY(SELECT 'msg-' || g FROM generate_series(1, 2500) g))) claimed},
);
my %expected = (likes => 6000, carts => 3000, small => 6000, inbox => 2500,
	cuckoo_small => 8000, cuckoo_inbox => 2500);

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
$old->safe_psql('postgres', q{SELECT fbf_counter_maintain('cuckoo_small')});
# operations applied after the last drain: still on the pending chains
# when saved, part of the snapshot as committed entries
my %late = (
	likes => q{SELECT count(*) FILTER (WHERE idempotent_increment('likes', 50, s, 1))
			   FROM generate_series(1, 300) s},
	cuckoo_small => q{SELECT count(*) FILTER (WHERE idempotent_increment('cuckoo_small', 'late', s, 1))
			   FROM generate_series(1, 300) s},
);
for my $name (sort keys %late)
{
	is($old->safe_psql('postgres', $late{$name}), '300', "$name: late operations apply");
}
my $values_query = q{
	SELECT string_agg(format('%s=%s', t, v), ' ' ORDER BY t) FROM (
		SELECT 'likes' AS t, sum(value) AS v FROM likes
		UNION ALL SELECT 'carts', sum(value) FROM shop.carts
		UNION ALL SELECT 'small', sum(value) FROM small
		UNION ALL SELECT 'cuckoo_small', sum(value) FROM cuckoo_small) s};
my $values = $old->safe_psql('postgres', $values_query);
my $small_parts = $old->safe_psql('postgres',
	q{SELECT partitions FROM fbf_counter_stats WHERE counter = 'small'::regclass});
cmp_ok($small_parts, '>', 1, "the small counter outgrew its plan ($small_parts partitions)");
my $cuckoo_parts = $old->safe_psql('postgres',
	q{SELECT partitions FROM fbf_counter_stats WHERE counter = 'cuckoo_small'::regclass});
cmp_ok($cuckoo_parts, '>', 1, "the small cuckoo counter outgrew its plan ($cuckoo_parts partitions)");
cmp_ok($old->safe_psql('postgres',
	q{SELECT sum(pending) FROM fbf_counter_stats WHERE counter IN ('likes'::regclass, 'cuckoo_small'::regclass)}),
	'>=', 600, 'the late operations are pending when saved');

# save right before the dump, with no writer running
$old->safe_psql('postgres', 'CREATE TABLE fbf_saved AS SELECT * FROM fbf_counter_save()');
is($old->safe_psql('postgres', 'SELECT count(*) FROM fbf_saved'), '6', 'six windows saved, cuckoo ones too');

my $tmp = PostgreSQL::Test::Utils::tempdir();
my $dump = "$tmp/source.dump";
command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $old->connstr('postgres') ],
	'pg_dump');

# a fresh cluster
my $new = fbf_node('dump_target', "fbf.naptime = 200ms\n");
$new->safe_psql('postgres', 'CREATE DATABASE restored');
command_ok([ 'pg_restore', '--exit-on-error', '-d', $new->connstr('restored'), $dump ],
	'pg_restore into a fresh cluster');

is($new->safe_psql('restored', 'SELECT count(*) FROM fbf_saved'), '6',
	'the saved windows came with the dump');
# what a restore without the second step would do: a new counter's window is empty
is($new->safe_psql('restored',
	q{SELECT elements[1] + elements[2] FROM fbf_counter_stats WHERE counter = 'likes'::regclass}),
	'0', 'the restored windows start empty');

is($new->safe_psql('restored',
	q{SELECT string_agg(format('%s %s', name, outcome), ', ' ORDER BY name)
	  FROM fbf_counter_restore('fbf_saved')}),
	'public.cuckoo_inbox adopted, public.cuckoo_small adopted, public.inbox adopted, public.likes adopted, public.small adopted, shop.carts adopted',
	'fbf_counter_restore loads every saved window');
is($new->safe_psql('restored',
	q{SELECT partitions FROM fbf_counter_stats WHERE counter = 'small'::regclass}),
	$small_parts, 'the split counter keeps its partitions');
cmp_ok($new->safe_psql('restored',
	q{SELECT partitions FROM fbf_counter_stats WHERE counter = 'cuckoo_small'::regclass}),
	'>=', $cuckoo_parts, 'the split cuckoo counter keeps its partitions');

is($new->safe_psql('restored', $values_query), $values, 'counter values are equal');
for my $name (sort keys %ops)
{
	is($new->safe_psql('restored', $ops{$name}), '0',
		"$name: every retry is dismissed after the restore");
}
for my $name (sort keys %late)
{
	is($new->safe_psql('restored', $late{$name}), '0',
		"$name: every retry of an operation pending when saved is dismissed");
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
for my $name (sort keys %late)
{
	is($new->safe_psql('restored', $late{$name}), '0',
		"$name: and so is every retry of an operation pending when saved");
}
is($new->safe_psql('restored',
	q{SELECT count(*) FILTER (WHERE idempotent_increment('likes', 99, s, 1))
	  FROM generate_series(1, 100) s}),
	'0', 'and so are the operations applied after the restore');

$new->stop;
$old->stop;
done_testing();
