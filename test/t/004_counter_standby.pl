# Replication and backups: a streaming standby replays the filter and
# dismisses the same retries; after promotion, retries sent to the new
# primary are dismissed and new operations apply; a server restored from
# pg_basebackup dismisses retries of operations committed before the
# backup.  Increments on a standby are refused.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;

my $primary = fbf_node('primary', "fbf.naptime = 200ms\n", allows_streaming => 1);
$primary->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('c', retention => '10 min', expected_rate => 2000,
									target_fpp => 0.000001)});

# some operations, one rolled back, one drained into the bits and one not
$primary->safe_psql('postgres', q{
	SELECT count(*) FROM generate_series(1, 500) g WHERE idempotent_increment('c', 1, g, 1)});
$primary->safe_psql('postgres', q{
	BEGIN; SELECT idempotent_increment('c', 2, 1, 100); ROLLBACK;});
$primary->safe_psql('postgres', q{SELECT fbf_counter_maintain('c')});
$primary->safe_psql('postgres', q{
	SELECT count(*) FROM generate_series(501, 600) g WHERE idempotent_increment('c', 1, g, 1)});

# a base backup (the restored server below starts from it too), and a
# standby streaming from it
$primary->backup('base');
my $standby = fbf_standby($primary, 'standby', backup => 'base');

# operations after the backup reach the standby through WAL only
$primary->safe_psql('postgres', q{
	SELECT count(*) FROM generate_series(601, 800) g WHERE idempotent_increment('c', 1, g, 1)});
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));

my $remembered = q{
	SELECT count(*) FILTER (WHERE fbf_contains(s, fbf_operation(1::bigint, g))) ||
		   '/' || count(*)
	FROM fbf_snapshot('c') s, generate_series(1, 800) g};
is($standby->safe_psql('postgres', $remembered), '800/800',
	'the standby\'s replayed filter remembers every committed operation');
is($standby->safe_psql('postgres', q{
	SELECT fbf_contains(fbf_snapshot('c'), fbf_operation(2::bigint, 1))}),
	'f', 'and not the rolled-back one');
is($standby->safe_psql('postgres', q{SELECT fbf_counter_value('c')}), '800',
	'the standby reads the counter');

my ($rc, $out, $err) = $standby->psql('postgres',
	q{SELECT idempotent_increment('c', 1, 1, 1)});
isnt($rc, 0, 'increments are refused on a standby');
like($err, qr/cannot execute idempotent_increment\(\) in a read-only transaction|during recovery/,
	'with a read-only error');

# promotion: the new primary dismisses retries and applies new operations
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'standby did not promote';
is($standby->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE NOT idempotent_increment('c', 1, g, 1))
	FROM generate_series(1, 800) g}),
	'800', 'after promotion, every retry of a committed operation is dismissed');
is($standby->safe_psql('postgres', q{
	SELECT idempotent_increment('c', 2, 1, 1)::text || idempotent_increment('c', 1, 801, 1)::text}),
	'truetrue', 'and new operations (and the rolled-back one) apply');
is($standby->safe_psql('postgres', q{SELECT fbf_counter_value('c')}), '802',
	'the counter is exact on the new primary');

# a server restored from the base backup (taken after 600 operations)
my $restored = PostgreSQL::Test::Cluster->new('restored');
$restored->init_from_backup($primary, 'base');
$restored->start;
is($restored->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE NOT idempotent_increment('c', 1, g, 1))
	FROM generate_series(1, 600) g}),
	'600', 'a restored base backup dismisses retries of operations committed before it');
is($restored->safe_psql('postgres', q{SELECT fbf_counter_value('c')}), '600',
	'and counts nothing twice');

$restored->stop;
$standby->stop;
$primary->stop;
done_testing();
