# wal_consistency_checking = 'all' with exact streams: every page the
# STREAMS record and the pending add with its annex change is compared,
# after redo, with the primary's image, on a streaming standby and in
# crash recovery.  The workload: in-order and shuffled stream increments
# (bigint, text and uuid client ids, keyed and not, batches with the same
# (client, seq) twice), rollbacks, savepoints rolled back, a prepared
# transaction, retries, drains, a stream cap smaller than the clients
# (evictions), a changed max_streams (a new run, and a reset by a drain
# that meets an operation from before it), seqs at the int64 extremes.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;

my $conf = "wal_consistency_checking = 'all'\nautovacuum = off\nfbf.naptime = 200ms\nmax_prepared_transactions = 5\n";
my $primary = fbf_node('primary', $conf, allows_streaming => 1);
$primary->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('c', retention => '10 min', expected_rate => 1000,
									max_streams => 1);
	SELECT fbf_create_counter_table('q', retention => '10 min', expected_rate => 1000,
									filter => 'cuckoo', max_streams => 1);
	SELECT fbf_create_dedup('d', retention => '10 min', expected_rate => 1000);
	SELECT fbf_create_counter_table('ns', retention => '10 min', expected_rate => 1000,
									max_streams => 0);
});
my $standby = fbf_standby($primary, 'standby', slot => 1);

sub workload
{
	my ($ctr, $round) = @_;
	my $b = $round * 100;
	my $sum = $primary->safe_psql('postgres', qq{
		-- 260 in-order clients: more than a stream page holds (evictions)
		SELECT count(*) FILTER (WHERE idempotent_increment('$ctr', c, s, 1))
		FROM generate_series(1, 260) c, generate_series($b + 1, $b + 3) s;
		-- shuffled seqs of 20 clients, text and uuid ids, a key
		SELECT count(*) FILTER (WHERE idempotent_increment('$ctr', 'k', 't' || c, s, 1))
		FROM generate_series(1, 5) c, (SELECT s FROM generate_series($b + 1, $b + 70) s ORDER BY random()) x;
		SELECT count(*) FILTER (WHERE idempotent_increment('$ctr', md5(c::text)::uuid, s, 1))
		FROM generate_series(1, 5) c, generate_series($b + 1, $b + 4) s;
		-- a batch with the same (client, seq) twice
		SELECT idempotent_increment('$ctr', ARRAY[7, 7, 8]::bigint[], ARRAY[$b + 99, $b + 99, $b + 99]::bigint[], ARRAY[1, 1, 1]::bigint[]);
		-- batches, a run of operations on one page in one record: of one
		-- stream, of several in turn, and seqs at the int64 extremes
		SELECT count(*) FILTER (WHERE a) FROM unnest(idempotent_increment('$ctr', 'kb',
			array_fill(5000::bigint, ARRAY[300]),
			ARRAY(SELECT $b * 1000 + g FROM generate_series(1, 300) g)::bigint[],
			array_fill(1::bigint, ARRAY[300]))) a;
		SELECT count(*) FILTER (WHERE a) FROM unnest(idempotent_increment('$ctr', 'kb',
			ARRAY(SELECT 5001 + g % 7 FROM generate_series(1, 200) g)::bigint[],
			ARRAY(SELECT $b * 1000 + g FROM generate_series(1, 200) g)::bigint[],
			array_fill(1::bigint, ARRAY[200]))) a;
		SELECT idempotent_increment('$ctr', 'kb', ARRAY[5100, 5100, 5100, 5100]::bigint[],
			ARRAY[9223372036854775807 - $round, -9223372036854775808 + $round, 0,
				  9223372036854775806 - $round]::bigint[], ARRAY[1, 1, 1, 1]::bigint[]);
		-- retries
		SELECT count(*) FILTER (WHERE idempotent_increment('$ctr', c, s, 1))
		FROM generate_series(1, 260) c, generate_series($b + 1, $b + 3) s;
	});
	$primary->safe_psql('postgres', qq{
		BEGIN;
		SELECT idempotent_increment('$ctr', 1000 + c, $b + 1, 1) FROM generate_series(1, 20) c;
		ROLLBACK;
		BEGIN;
		SELECT idempotent_increment('$ctr', 2000, $b + 1, 1);
		SAVEPOINT a;
		SELECT idempotent_increment('$ctr', 2000, $b + 2, 1);
		ROLLBACK TO a;
		SELECT idempotent_increment('$ctr', 2000, $b + 3, 1);
		COMMIT;
		SELECT idempotent_increment('$ctr', 3000, 9223372036854775807 - $round, 1);
		SELECT idempotent_increment('$ctr', 3000, -9223372036854775808 + $round, 1);
		SELECT idempotent_increment('$ctr', 3001, -$b, 1);
		SELECT fbf_counter_maintain('$ctr');
	});
}

# a prepared transaction open across everything below
$primary->safe_psql('postgres', q{
	BEGIN;
	SELECT idempotent_increment('c', 'pk', 4000, 1, 1);
	SELECT idempotent_increment('q', 'pk', 4000, 1, 1);
	PREPARE TRANSACTION 'p1';
});

for my $round (1 .. 3)
{
	workload('c', $round);
	workload('q', $round);
	$primary->safe_psql('postgres', qq{
		SELECT count(*) FILTER (WHERE fbf_claim('d', c::bigint, s::bigint)) FROM generate_series(1, 20) c, generate_series(1, 5 * $round) s;
	});
	# a batch on a counter without streams: entries without annexes
	$primary->safe_psql('postgres', qq{
		SELECT idempotent_increment('ns', 'kb', array_fill(1::bigint, ARRAY[500]),
			ARRAY(SELECT $round * 1000 + g FROM generate_series(1, 500) g)::bigint[],
			array_fill(1::bigint, ARRAY[500]));
	});
}

cmp_ok($primary->safe_psql('postgres', q{
		SELECT stream_evictions FROM fbf_counter_stats() WHERE counter = 'c'::regclass}),
	'>', 0, 'streams were evicted (more clients than a stream page holds)');

# a new run of stream pages while operations (the prepared one) are in flight
$primary->safe_psql('postgres', q{
	ALTER INDEX c_fbf SET (max_streams = 300);
	ALTER INDEX q_fbf SET (max_streams = 300);
	SELECT fbf_counter_maintain('c');
	SELECT fbf_counter_maintain('q');
});
workload('c', 4);
workload('q', 4);
$primary->safe_psql('postgres', q{
	COMMIT PREPARED 'p1';
	SELECT fbf_counter_maintain('c');
	SELECT fbf_counter_maintain('q');
	VACUUM c; VACUUM q;
});

$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', q{SELECT fbf_counter_value('c') > 0 AND fbf_counter_value('q') > 0}),
	't', 'the standby replays the streams, consistency-checked');

# crash recovery, consistency-checked too
workload('c', 5);
workload('q', 5);
$primary->stop('immediate');
$primary->start;
is($primary->safe_psql('postgres', q{
		SELECT count(*) FILTER (WHERE idempotent_increment('c', c, s, 1))
		FROM generate_series(1, 260) c, generate_series(501, 503) s}),
	'0', 'after crash recovery the counter remembers every operation');

my $log = slurp_file($standby->logfile) . slurp_file($primary->logfile);
unlike($log, qr/inconsistent page found/, 'no page was found inconsistent');
unlike($log, qr/PANIC|TRAP/, 'no PANIC or assertion');

$standby->stop;
$primary->stop;
done_testing();
