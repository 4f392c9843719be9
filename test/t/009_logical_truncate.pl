# Logical replication: a TRUNCATE replicated to a subscriber is run by the
# apply worker (ExecuteTruncateGuts, not ProcessUtility).  The subscriber's
# operation filter must be carried over it like over a local TRUNCATE:
# retries of operations applied on the subscriber before the TRUNCATE are
# still dismissed, and the filter is never reset silently.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;

my $create = q{
	SELECT fbf_create_counter_table('c', retention => '10 min', expected_rate => 100)};

# allows_streaming => 'logical' sets wal_level = logical and max_wal_senders
my $publisher = fbf_node('publisher', "wal_level = logical\n",
	allows_streaming => 'logical');
# NOTICEs of background workers reach the log only at this level
my $subscriber = fbf_node('subscriber', "log_min_messages = notice\n");

$publisher->safe_psql('postgres', $create);
$subscriber->safe_psql('postgres', $create);

$publisher->safe_psql('postgres', 'CREATE PUBLICATION p FOR TABLE c');
my $connstr = $publisher->connstr . ' dbname=postgres';
$subscriber->safe_psql('postgres',
	"CREATE SUBSCRIPTION s CONNECTION '$connstr' PUBLICATION p");

$publisher->wait_for_catchup('s');
$subscriber->poll_query_until('postgres', q{
	SELECT count(*) > 0 AND bool_and(srsubstate = 'r') FROM pg_subscription_rel})
  or die 'the subscription did not finish its initial sync';

# operations applied locally on the subscriber
is($subscriber->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE idempotent_increment('c', 7::bigint, g, 1))
	FROM generate_series(1, 100) g}),
	'100', 'subscriber: 100 local operations apply');
is($subscriber->safe_psql('postgres', q{SELECT fbf_counter_value('c', '')}),
	'100', 'subscriber: the counter is 100 before the TRUNCATE');
ok($subscriber->safe_psql('postgres', 'SELECT count(*) FROM c') > 0,
	'subscriber: the counter table has rows before the TRUNCATE');

# a TRUNCATE on the publisher, applied by the subscriber's apply worker
my $log_offset = -s $subscriber->logfile;
$publisher->safe_psql('postgres', 'TRUNCATE c');
$publisher->wait_for_catchup('s');

is($subscriber->safe_psql('postgres', 'SELECT count(*) FROM c'), '0',
	'subscriber: the replicated TRUNCATE arrived (the table is empty)');

my $log = slurp_file($subscriber->logfile, $log_offset);
unlike($log, qr/ERROR:/,
	'subscriber: no ERROR in the log after the replicated TRUNCATE');
unlike($log, qr/logical replication (apply )?worker.*exited/,
	'subscriber: the apply worker did not exit');
is($subscriber->safe_psql('postgres', q{
	SELECT pid IS NOT NULL FROM pg_stat_subscription WHERE subname = 's'}),
	't', 'subscriber: the subscription worker is still running');

# retries of the operations applied before the TRUNCATE
is($subscriber->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE NOT idempotent_increment('c', 7::bigint, g, 1))
	FROM generate_series(1, 100) g}),
	'100', 'subscriber: every retry of an operation applied before the replicated TRUNCATE is dismissed');
is($subscriber->safe_psql('postgres', q{SELECT fbf_counter_value('c', '')}),
	'0', 'subscriber: nothing was re-applied after the replicated TRUNCATE');

$log = slurp_file($subscriber->logfile, $log_offset);
unlike($log, qr/was reset/,
	'subscriber: the operation filter was not reset by the replicated TRUNCATE');

# control: a new operation still applies
is($subscriber->safe_psql('postgres', q{
	SELECT idempotent_increment('c', 7::bigint, 101, 1)}),
	't', 'subscriber: a new operation (client 7, seq 101) applies');

$subscriber->stop;
$publisher->stop;
done_testing();
