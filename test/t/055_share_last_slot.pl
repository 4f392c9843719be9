# A unit of a share table's last slot that floods takes nothing from the
# other units of that slot.
#
# A counter's share table tells 128 units apart; the units beyond share
# its last slot, which is judged as one unit of as many shares as it saw
# units.  Before, one of them that flooded filled the slot up to its level
# and every other unit of it was then refused (53400, "over its share"):
# one role's load refusing others.  Now the slot keeps its heaviest units'
# counts apart (a Misra-Gries summary), and past its level those of its
# units within a share of their own (1/n) are still admitted, up to the
# slot's share beyond its level.
#
#   1. 128 roles take the table's slots with an operation each; 12 more
#      roles, in the last slot, an operation each;
#   2. m129, of the last slot, floods with committed batches of 100 new
#      operations until it is refused: "over its share" (53400);
#   3. the 11 other roles of the last slot then send 50 new operations
#      each, within a share of their own (1/140 of the period): none is
#      refused;
#   4. m129 is refused again, among them;
#   5. the 12 roles of the last slot send batches of 100 in turn, more
#      of them than the summary's 8 counts can follow: the slot takes no
#      more than its level and its share, whatever each reads as.
# A 2 MB fbf.max_filter_size and a counter planned for 50 a second, so that a
# flood reaches the window's capacity at its cap quickly (its period's
# capacity is a count, whatever the period's length); the worker off and
# a retention of an hour, so that the whole test is one period.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;

my $node = fbf_node('share_last_slot', q{
fbf.max_filter_size = '2MB'
fbf.worker_enabled = off
});

$node->safe_psql('postgres', q{
	CREATE TABLE log (who int, outcome text, detail text);
	SELECT fbf_create_counter_table('m', retention => '1 hour', expected_rate => 50);
	DO $$
	BEGIN
		FOR i IN 1 .. 140 LOOP
			EXECUTE format('CREATE ROLE m%s', i);
			EXECUTE format('GRANT SELECT, INSERT, UPDATE ON m TO m%s', i);
			EXECUTE format('GRANT INSERT ON log TO m%s', i);
		END LOOP;
	END $$;
	-- as role m<i>, a committed batch of n new operations on its own key,
	-- its outcome logged (with how many it applied)
	CREATE PROCEDURE batch(i int, n int) LANGUAGE plpgsql AS $$
	DECLARE
		m text;
		d text;
		applied bigint;
	BEGIN
		EXECUTE format('SET ROLE m%s', i);
		BEGIN
			SELECT count(*) FILTER (WHERE a) INTO applied
			  FROM unnest(idempotent_increment('m', 'm' || i,
				(SELECT array_agg((random() * 4e18)::bigint) FROM generate_series(1, n)),
				array_fill(1::bigint, ARRAY[n]), array_fill(1::bigint, ARRAY[n]))) a;
			INSERT INTO log VALUES (i, 'ok', applied::text);
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL;
			INSERT INTO log VALUES (i, SQLSTATE || ' ' || m, d);
		END;
		RESET ROLE;
		COMMIT;
	END $$;});

# ---- 1. the slots, and the last one ----
$node->safe_psql('postgres', q{
	DO $$
	BEGIN
		FOR i IN 1 .. 140 LOOP
			CALL batch(i, 1);
		END LOOP;
	END $$;});
is($node->safe_psql('postgres', "SELECT count(*) FROM log WHERE outcome = 'ok'"), '140',
	'140 roles applied an operation each');

# ---- 2. m129 floods ----
$node->safe_psql('postgres', q{
	DO $$
	BEGIN
		FOR b IN 1 .. 1000 LOOP
			CALL batch(129, 100);
			EXIT WHEN EXISTS (SELECT FROM log WHERE who = 129 AND outcome LIKE '53400%');
		END LOOP;
	END $$;});
my ($flood_batches, $flood_refusal) = split /\|/, $node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE outcome = 'ok') - 1,
		   coalesce(max(outcome || ' (' || detail || ')') FILTER (WHERE outcome LIKE '53400%'), '')
	  FROM log WHERE who = 129});
note "m129 applied $flood_batches batches of 100, then: $flood_refusal";
like($flood_refusal, qr/^53400 role "m129" is over its share of the capacity/,
	'm129, of the last slot, is refused over its share');

# ---- 3. the others of the last slot ----
$node->safe_psql('postgres', q{
	DO $$
	BEGIN
		FOR i IN 130 .. 140 LOOP
			CALL batch(i, 50);
		END LOOP;
	END $$;});
my ($ok, $refused) = split /\|/, $node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE outcome = 'ok'),
		   coalesce(string_agg(who || ': ' || outcome, '; ') FILTER (WHERE outcome <> 'ok'), '')
	  FROM log WHERE who > 129});
is($refused, '', 'none of the 11 other roles of the last slot is refused');
is($ok, 11 * 2, 'each of them had its 50 new operations (and its first) taken');
my ($keys_right, $dismissed) = split /\|/, $node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE fbf_counter_value('m', 'm' || who) = applied),
		   11 * 51 - sum(applied)
	  FROM (SELECT who, sum(detail::bigint) AS applied FROM log
			 WHERE who > 129 AND outcome = 'ok' GROUP BY who) k});
is($keys_right, '11', 'each of their keys counted once each operation its batches applied');
note "of their 561 new operations, $dismissed were not applied (dismissed by the filter, or refused)";

# ---- 4. m129 again ----
$node->safe_psql('postgres', 'CALL batch(129, 100)');
like($node->safe_psql('postgres',
		'SELECT outcome FROM log WHERE who = 129 ORDER BY ctid DESC LIMIT 1'),
	qr/^53400 role "m129" is over its share/, 'm129 is refused again');

# ---- 5. more of them than the summary follows ----
my ($capacity) = $flood_refusal =~ /\((\d+) operations\)/;
$node->safe_psql('postgres', q{
	DO $$
	BEGIN
		FOR r IN 1 .. 20 LOOP
			FOR i IN 129 .. 140 LOOP
				CALL batch(i, 100);
			END LOOP;
		END LOOP;
	END $$;});
my $slot_took = $node->safe_psql('postgres', q{
	SELECT sum(fbf_counter_value('m', 'm' || i)) FROM generate_series(129, 140) i});
note "the last slot's 12 roles took $slot_took operations of a period of $capacity";
ok(defined $capacity && $slot_took <= $capacity * (0.75 + 13 / 140) + 100,
	"the last slot took no more than its level and its share ($slot_took of $capacity)");

done_testing();
