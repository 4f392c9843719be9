# Tenants cannot aim their operations' bits at another tenant's.
#
# Under the public hash, whoever knows a counter's shape (fbf_counter_stats
# shows it to every reader) can compute offline which operations of their
# own set every bit of someone else's next operation: test/core/forge_ops
# does it in a fraction of a second.  A tenant whom row security limits
# to key 'a' sends them; under the public hash the other tenant's first
# operation on key 'b' would then be dismissed as a retry and lost.  Each
# window hashes under a secret key of its own, so the forged operations
# land elsewhere and the victim's operation applies.  The test first
# shows that the forged set does cover the victim under the public hash
# (an fbf value of the counter's shape, which hashes publicly), so it
# would fail if the window still hashed publicly.
#
# Then: the key travels with the window's snapshot (through its text form
# too) into a new counter, which dismisses the same retries; a snapshot
# shows whether it is keyed; a tenant under row security cannot take one.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;

my $forge = $ENV{FBF_FORGE_OPS} // '';
plan skip_all => 'FBF_FORGE_OPS names no forge_ops binary (test/core)'
  unless -x $forge;

# every filter with a random key of its own, as in production
my $node = fbf_node('forge', "fbf.worker_enabled = off\nfbf.fixed_window_keys = off\n");
$node->safe_psql('postgres', q{
	CREATE ROLE tenant_a LOGIN;
	CREATE ROLE tenant_b LOGIN;
	SELECT fbf_create_counter_table('likes', retention => '10 min', nbits => 20000,
									nhashes => 7, npast => 4);
	ALTER TABLE likes ENABLE ROW LEVEL SECURITY;
	CREATE POLICY own_key ON likes
		USING (key = CASE current_user WHEN 'tenant_a' THEN 'a' WHEN 'tenant_b' THEN 'b' END);
	GRANT SELECT, INSERT, UPDATE ON likes TO tenant_a, tenant_b;
});

my ($nparts, $nbits, $nhashes) = split /\|/, $node->safe_psql('postgres',
	q{SELECT partitions, nbits / partitions, nhashes FROM fbf_counter_stats
	  WHERE counter = 'likes'::regclass});
my @ids = grep { /^\d+$/ } split /\n/, `$forge $nparts $nbits $nhashes b 42 1 a`;
ok(@ids > 0 && $? == 0, "forge_ops found operations on key 'a' covering (42, 1) on 'b' ("
	. scalar(@ids) . " of them)");

# the forged set does cover the victim under the public hash
is( $node->safe_psql('postgres', qq{
		SELECT fbf_contains(fbf_add(fbf_create($nbits, $nhashes, 4, $nparts),
									(SELECT array_agg(fbf_operation('a', id, 1))
									 FROM unnest(ARRAY[@{[ join ',', @ids ]}]::bigint[]) id)),
							fbf_operation('b', 42::bigint, 1))}),
	't', 'under the public hash, the forged operations hold every bit of the victim\'s');

# the attack: tenant a sends them, the worker's drain puts them in the bits
my $n = scalar @ids;
is( $node->safe_psql('postgres', qq{
		SET ROLE tenant_a;
		SELECT count(*) FILTER (WHERE a)
		FROM unnest(idempotent_increment('likes', 'a', ARRAY[@{[ join ',', @ids ]}]::bigint[],
										 array_fill(1::bigint, ARRAY[$n]),
										 array_fill(1::bigint, ARRAY[$n]))) a}),
	$n, 'tenant a applies its forged operations');
$node->safe_psql('postgres', q{SELECT fbf_counter_maintain('likes')});
is($node->safe_psql('postgres', q{SELECT pending FROM fbf_counter_stats
	WHERE counter = 'likes'::regclass}), '0', 'they are in the bits');

is( $node->safe_psql('postgres', q{
		SET ROLE tenant_b;
		SELECT idempotent_increment('likes', 'b', 42, 1, 5)}),
	't', "tenant b's first operation applies: the forged bits missed it");
is( $node->safe_psql('postgres', q{
		SET ROLE tenant_b;
		SELECT idempotent_increment('likes', 'b', 42, 1, 5)}),
	'f', 'its retry is dismissed');
is($node->safe_psql('postgres', q{SELECT fbf_counter_value('likes', 'b')}),
	'5', "tenant b's count is exact");

# nor the counter's statistics (its figures count the other tenant's
# operations too: a retry of theirs would show in `dismissed`)
is( $node->safe_psql('postgres', q{
		SET ROLE tenant_a;
		SELECT count(*) FROM fbf_counter_stats WHERE counter = 'likes'::regclass}),
	'0', 'a tenant under row security sees no statistics of the shared counter');

# a tenant under row security sees no snapshot (it would reveal the key)
my ($rc, $out, $err) = $node->psql('postgres',
	q{SET ROLE tenant_a; SELECT fbf_snapshot('likes') IS NOT NULL});
like($err, qr/not allowed under row security/,
	'a tenant under row security cannot take a snapshot');

# the key travels with the snapshot, through its text form, into a new
# counter, which then dismisses the same retries
is( $node->safe_psql('postgres', q{
		SELECT get_byte(fbf_send(fbf_snapshot('likes')), 14) & 1}),
	'1', 'the snapshot is keyed (flag bit 0 of its portable form)');
is( $node->safe_psql('postgres', q{
		SELECT fbf_contains(fbf_snapshot('likes'), fbf_operation('b', 42::bigint, 1))
		   AND NOT fbf_contains(fbf_snapshot('likes'), fbf_operation('b', 42::bigint, 2))}),
	't', 'fbf_contains asks a keyed snapshot under its key');
$node->safe_psql('postgres', q{
	CREATE TABLE saved AS SELECT fbf_snapshot('likes')::text AS s;
	SELECT fbf_create_counter_table('likes2', retention => '10 min', nbits => 20000,
									nhashes => 7, npast => 4);
	SELECT fbf_counter_load('likes2', s::fbf) FROM saved});
is( $node->safe_psql('postgres', qq{
		SELECT count(*) FILTER (WHERE idempotent_increment('likes2', 'a', id, 1, 1))
		FROM unnest(ARRAY[@{[ join ',', @ids ]}]::bigint[]) id}),
	'0', "the copy dismisses tenant a's retries");
is($node->safe_psql('postgres', q{SELECT idempotent_increment('likes2', 'b', 42, 1, 5)}),
	'f', "and tenant b's");
is($node->safe_psql('postgres', q{SELECT idempotent_increment('likes2', 'b', 42, 2, 5)}),
	't', 'and applies new operations');

# every counter has a key of its own: the last 16 bytes of a snapshot
$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('other', retention => '10 min', nbits => 20000,
									nhashes => 7, npast => 4)});
is( $node->safe_psql('postgres', q{
		SELECT substr(fbf_send(fbf_snapshot('likes')), length(fbf_send(fbf_snapshot('likes'))) - 15)
			<> substr(fbf_send(fbf_snapshot('other')), length(fbf_send(fbf_snapshot('other'))) - 15)}),
	't', 'two counters have different keys');

# a snapshot under another key is refused by a filter that holds
# operations (their bits could not be told apart), and nothing is loaded
$node->safe_psql('postgres', q{SELECT idempotent_increment('other', 'b', 7, 1, 1)});
($rc, $out, $err) = $node->psql('postgres',
	q{SELECT fbf_counter_load('other', fbf_snapshot('likes'))});
like($err, qr/it was taken under another key and the counter's filter is not empty/,
	'a snapshot under another key is refused by a filter that holds operations');
is($node->safe_psql('postgres', q{SELECT idempotent_increment('other', 'b', 42, 1, 5)}),
	't', 'and nothing of it was loaded');

# a keyed snapshot can be read, not changed
($rc, $out, $err) = $node->psql('postgres',
	q{SELECT fbf_add(fbf_snapshot('likes'), 1::bigint)});
like($err, qr/does not take a counter's snapshot/, 'fbf_add refuses a keyed snapshot');

$node->stop;
done_testing();
