# The registry's statistics: entries go with their table or database, so
# counters made after thousands of others were created and dropped are
# still counted (the registry holds 4,096 entries; before, the 4,097th
# (database, table) pair ever seen showed 0 applied forever).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;

my $node = fbf_node('registry', "fbf.worker_enabled = off\n");

# 4,100 counters (more than the 4,096 entries), each counted once and dropped, one transaction each
$node->safe_psql('postgres', q{
	CREATE PROCEDURE churn(n int) LANGUAGE plpgsql AS $$
	BEGIN
		FOR i IN 1..n LOOP
			PERFORM fbf_create_counter_table('churn', retention => '1 min',
											 expected_rate => 10);
			PERFORM idempotent_increment('churn', 1, i, 1);
			DROP TABLE churn;
			COMMIT;
		END LOOP;
	END $$;
	CALL churn(4100);
});

$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('fresh', retention => '1 min', expected_rate => 10);
	SELECT idempotent_increment('fresh', 1, 1, 1);
	SELECT idempotent_increment('fresh', 1, 2, 1);
	SELECT idempotent_increment('fresh', 1, 2, 1);
});
is($node->safe_psql('postgres',
		q{SELECT applied || '/' || dismissed FROM fbf_counter_stats WHERE counter = 'fresh'::regclass}),
	'2/1', 'a counter made after 4,100 dropped ones is counted');

# a dropped database takes its entries along
$node->safe_psql('postgres', 'CREATE DATABASE gone');
$node->safe_psql('gone', q{
	CREATE EXTENSION fbf;
	SELECT fbf_create_counter_table('c', retention => '1 min', expected_rate => 10);
	SELECT idempotent_increment('c', 1, 1, 1);
});
$node->safe_psql('postgres', 'DROP DATABASE gone');
is($node->safe_psql('postgres',
		q{SELECT applied FROM fbf_counter_stats WHERE counter = 'fresh'::regclass}),
	'2', 'dropping another database leaves this one\'s entries');

# a table dropped and recreated under the same name starts from zero
$node->safe_psql('postgres', q{
	DROP TABLE fresh;
	SELECT fbf_create_counter_table('fresh', retention => '1 min', expected_rate => 10);
});
is($node->safe_psql('postgres',
		q{SELECT applied || '/' || dismissed FROM fbf_counter_stats WHERE counter = 'fresh'::regclass}),
	'0/0', 'a recreated counter starts from zero');

$node->stop;
done_testing();
