# Two-phase commit and crashes: an operation applied in a prepared
# transaction stays in flight across crashes until COMMIT PREPARED (then it
# is remembered) or ROLLBACK PREPARED (then it is forgotten).
#
# Two transactions apply increments and claims and are prepared; the
# worker and VACUUM drain the window meanwhile; the server crashes (with a
# checkpoint between two crashes, so that the prepared state is read both
# from WAL and from its state files).  After the restarts:
#   - a duplicate of a prepared operation waits (it times out on its lock);
#   - once one transaction is committed and the other rolled back, retries
#     of the first's operations are dismissed and of the second's applied,
#     and the counter equals the distinct operations that committed;
#   - that survives one more crash.
# A window that took a prepared transaction's entries for aborted at
# recovery (or drained them away) counts the first's retries again.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;

my $node = fbf_node('prepared', q{
max_prepared_transactions = 10
fbf.naptime = 100ms
});
$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('c', retention => '5 min', expected_rate => 1000);
	SELECT fbf_create_dedup('d', retention => '5 min', expected_rate => 1000)});

my $n = 200;

# Client $client's operations 1 .. $n, on key 'k<client>'; returns how
# many applied.  Each client has its own key: a prepared transaction keeps
# the lock on the counter row it updated, as any UPDATE's, so increments
# of its key from the same row would wait for it.
sub send_ops
{
	my ($client) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT count(*) FILTER (WHERE idempotent_increment('c', 'k$client', $client, s, 1))
		FROM generate_series(1, $n) s});
}

sub claims
{
	my ($prefix) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT count(*) FILTER (WHERE fbf_claim('d', '$prefix-' || s))
		FROM generate_series(1, $n) s});
}

# the counter's total over every key
sub value
{
	return $node->safe_psql('postgres', q{SELECT sum(value) FROM c});
}

is(send_ops(1), $n, 'committed operations applied');

# two prepared transactions, each with increments and claims
for my $gid ('keep', 'drop')
{
	my $client = $gid eq 'keep' ? 2 : 3;
	$node->safe_psql('postgres', qq{
		BEGIN;
		SELECT count(*) FROM generate_series(1, $n) s
		WHERE idempotent_increment('c', 'k$client', $client, s, 1);
		SELECT count(*) FROM generate_series(1, $n) s WHERE fbf_claim('d', '$gid-' || s);
		PREPARE TRANSACTION '$gid'});
}
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), 2,
	'two transactions prepared');

# the worker drains every 100 ms; VACUUM drains too
sleep 1;
$node->safe_psql('postgres', 'VACUUM c; VACUUM d');
ok($node->safe_psql('postgres',
		q{SELECT pending FROM fbf_counter_stats WHERE counter = 'c'::regclass}) >= 2 * $n,
	'the prepared operations stay pending through drains');

# a duplicate of a prepared operation waits for it
sub waits
{
	my ($sql, $name) = @_;
	my ($ret, $out, $err) = $node->psql('postgres',
		"SET lock_timeout = '200ms'; $sql");
	like($err, qr/lock timeout/, $name);
}

$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), 2,
	'both prepared transactions recovered from WAL');
waits(q{SELECT idempotent_increment('c', 'k2', 2, 1, 1)},
	'after a crash, a duplicate of a prepared increment waits');
waits(q{SELECT fbf_claim('d', 'drop-7')},
	'after a crash, a duplicate of a prepared claim waits');
is(value(), $n, 'the counter holds only the committed operations');

# once more, with the prepared state in its files after a checkpoint
$node->safe_psql('postgres', 'CHECKPOINT; VACUUM c; VACUUM d');
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), 2,
	'both prepared transactions recovered from their state files');
waits(qq{SELECT idempotent_increment('c', 'k3', 3, $n, 1)},
	'after a second crash, a duplicate still waits');

$node->safe_psql('postgres', q{COMMIT PREPARED 'keep'});
$node->safe_psql('postgres', q{ROLLBACK PREPARED 'drop'});

is(send_ops(1), 0, 'retries of the committed operations dismissed');
is(send_ops(2), 0, 'retries of the committed prepared operations dismissed');
is(send_ops(3), $n, 'retries of the rolled-back prepared operations applied');
is(claims('keep'), 0, 'claims of the committed prepared transaction dismissed');
is(claims('drop'), $n, 'claims of the rolled-back prepared transaction applied');
is(value(), 3 * $n, 'the counter equals the distinct committed operations');

# the worker drains the now-committed entries; a crash keeps them
sleep 1;
$node->safe_psql('postgres', 'VACUUM c; VACUUM d');
$node->stop('immediate');
$node->start;
is(send_ops(2) + send_ops(3), 0, 'after another crash, every retry dismissed');
is(claims('keep') + claims('drop'), 0, 'and every claim');
is(value(), 3 * $n, 'the counter is unchanged');

$node->stop;
done_testing();
