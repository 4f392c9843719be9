# A filter keyed while fbf.fixed_window_keys was on gives up the fixed,
# public key once the setting is off: its next refresh gives it a random
# key, and it keeps looking operations up under the fixed key until they
# have aged out, so nothing it remembers is forgotten early.
#
# With the setting on, a counter (Bloom), a cuckoo counter and a dedup
# table take operations and claims: some drained into the bits, some
# committed and still pending, some in a prepared transaction that stays
# in flight across the change.  A maintenance pass with the setting on
# keeps the fixed key.  Then the setting goes off (ALTER SYSTEM, reload):
#   - fbf_counter_maintain gives each a new key (the last 16 bytes of a
#     snapshot), and a counter with a short period gets one at its first
#     operation once a period has passed;
#   - every operation and claim applied before is still dismissed as a
#     retry, the prepared transaction's are waited for, new ones apply;
#   - so after the second step (a pass once nothing recorded under the
#     fixed key is left in flight) and after a crash (the metapage is
#     replayed from WAL);
#   - a filter created with the setting off keeps its random key.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use FbfTest;

my $node = fbf_node('rekey', q{
fbf.worker_enabled = off
max_prepared_transactions = 10
});

# "\0fbftest" "fixedkey": the key of fbf.fixed_window_keys, as a snapshot
# ends with it
my $fixed = '\x006662667465737466697865646b6579';

sub key_of
{
	my ($table) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT substr(s, length(s) - 15)
		FROM (SELECT fbf_send(fbf_snapshot('$table')) s) x});
}

$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('c', retention => '10 min');
	SELECT fbf_create_counter_table('cc', retention => '10 min', filter => 'cuckoo');
	SELECT fbf_create_dedup('d', retention => '10 min');
	SELECT fbf_create_counter_table('p', retention => '30 s')});
is(key_of($_), $fixed, "$_ has the fixed key") for qw(c cc d p);

# operations (client_id, 1) for client ids $lo .. $hi on key $key of each
# counter, one batch each; how many applied, by counter
sub increments
{
	my ($key, $lo, $hi) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT string_agg(n::text, ',' ORDER BY t)
		FROM (VALUES ('c'), ('cc'), ('p')) v(t),
			 LATERAL (SELECT count(*) FILTER (WHERE a) n
					  FROM unnest(idempotent_increment(t::regclass, '$key',
							(SELECT array_agg(g) FROM generate_series(${lo}::bigint, $hi) g),
							array_fill(1::bigint, ARRAY[$hi - $lo + 1]),
							array_fill(1::bigint, ARRAY[$hi - $lo + 1]))) a) x});
}

sub claims
{
	my ($prefix, $lo, $hi) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT count(*) FILTER (WHERE a)
		FROM unnest(fbf_claim('d', (SELECT array_agg('$prefix-' || g)
									FROM generate_series($lo, $hi) g))) a});
}

sub values_of
{
	return $node->safe_psql('postgres', q{
		SELECT fbf_counter_value('c', 'k') || ',' || fbf_counter_value('cc', 'k') || ','
			   || fbf_counter_value('p', 'k') || ',' || coalesce(fbf_counter_value('c', 'kp'), 0)});
}

# with the setting on: in the bits, pending, and in flight (prepared)
is(increments('k', 1, 300), '300,300,300', 'operations 1-300 apply');
is(claims('a', 1, 300), '300', 'claims a-1..300 apply');
$node->safe_psql('postgres', q{
	SELECT fbf_counter_maintain(t) FROM unnest(ARRAY['c', 'cc', 'd', 'p']::regclass[]) t});
is($node->safe_psql('postgres', q{
	SELECT string_agg(pending::text, ',' ORDER BY counter::text) FROM fbf_counter_stats}),
	'0,0,0', 'they are drained into the bits');
my $period = $node->safe_psql('postgres', q{
	SELECT extract(epoch FROM period) FROM fbf_counter_stats WHERE counter = 'p'::regclass});
is(increments('k', 301, 400), '100,100,100', 'operations 301-400 apply');
is(claims('a', 301, 400), '100', 'claims a-301..400 apply');
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT idempotent_increment('c', 'kp', g, 1, 1) FROM generate_series(1, 50) g;
	SELECT fbf_claim('d', 'p-' || g) FROM generate_series(1, 50) g;
	PREPARE TRANSACTION 'before'});
is(values_of(), '400,400,400,0', 'values before the change');

# a pass with the setting on keeps the fixed key
$node->safe_psql('postgres', q{SELECT fbf_counter_maintain('c')});
is(key_of('c'), $fixed, 'a pass with the setting on keeps the fixed key');

# the setting off
$node->safe_psql('postgres', q{
	ALTER SYSTEM SET fbf.fixed_window_keys = off;
	SELECT pg_reload_conf()});
ok($node->poll_query_until('postgres',
		q{SELECT current_setting('fbf.fixed_window_keys') = 'off'}),
	'the setting is off');
$node->safe_psql('postgres', q{SELECT fbf_create_counter_table('r', retention => '10 min')});
my $r_key = key_of('r');
isnt($r_key, $fixed, 'a counter created with the setting off has a random key');

# the first step: a new key at the next refresh
$node->safe_psql('postgres', q{
	SELECT fbf_counter_maintain(t) FROM unnest(ARRAY['c', 'cc', 'd', 'r']::regclass[]) t});
my %key;
for my $t (qw(c cc d))
{
	$key{$t} = key_of($t);
	isnt($key{$t}, $fixed, "$t has given up the fixed key at its refresh");
	like($key{$t}, qr/^\\x[0-9a-f]{32}$/, "$t has a key");
}
isnt($key{c}, $key{cc}, 'the new keys are random');
is(key_of('r'), $r_key, 'a random key is kept');

# a counter refreshed by its period: its first operation after one
usleep(int(($period + 0.5) * 1_000_000));
is($node->safe_psql('postgres', q{SELECT idempotent_increment('p', 'new', 1, 1, 1)}),
	't', 'an operation on a counter whose refresh is due applies');
isnt(key_of('p'), $fixed, 'and its refresh gave the counter a new key');

# everything applied before is still a retry; the prepared transaction's
# operations are waited for
sub retries
{
	my ($when) = @_;
	is(increments('k', 1, 400), '0,0,0', "$when: operations 1-400 are dismissed as retries");
	is(claims('a', 1, 400), '0', "$when: claims a-1..400 are dismissed as retries");
}
retries('after the new key');
my ($rc, $out, $err) = $node->psql('postgres', q{
	SET statement_timeout = '500ms';
	SELECT idempotent_increment('c', 'kp', 7, 1, 1)});
like($err, qr/canceling statement due to statement timeout/,
	'a retry of an operation in flight under the fixed key waits for its transaction');
($rc, $out, $err) = $node->psql('postgres', q{
	SET statement_timeout = '500ms';
	SELECT fbf_claim('d', 'p-7')});
like($err, qr/canceling statement due to statement timeout/,
	'so does a retry of a claim in flight');
$node->safe_psql('postgres', q{COMMIT PREPARED 'before'});
is($node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE idempotent_increment('c', 'kp', g, 1, 1))
		   || ',' || count(*) FILTER (WHERE fbf_claim('d', 'p-' || g))
	FROM generate_series(1, 50) g}),
	'0,0', 'once it commits, its operations and claims are retries');
is(values_of(), '400,400,400,50', 'the values count every operation once');

# new operations apply under the new key
is(increments('k', 1001, 1100), '100,100,100', 'new operations apply');
is(claims('a', 1001, 1100), '100', 'new claims apply');

# the second step: nothing recorded under the fixed key is in flight; the
# fixed key is still asked
$node->safe_psql('postgres', q{
	SELECT fbf_counter_maintain(t) FROM unnest(ARRAY['c', 'cc', 'd', 'p']::regclass[]) t});
is(key_of('c'), $key{c}, 'the second step keeps the new key');
retries('after the second step');

# a crash: the metapage comes back from WAL
$node->stop('immediate');
$node->start;
is(key_of($_), $key{$_}, "$_ has its new key after a crash") for qw(c cc d);
retries('after a crash');
is(increments('k', 1001, 1100), '0,0,0', 'after a crash: the new operations are retries');
is(increments('k', 2001, 2010), '10,10,10', 'after a crash: new operations apply');
is(values_of(), '510,510,510,50', 'after a crash: the values count every operation once');

$node->stop;
done_testing();
