# Shares on Citus: one role's flood on a distributed dedup table or
# counter cannot make the shards' windows dismiss or refuse another
# role's operations.
#
# A distributed table's shards each have a window on their worker, and
# each window its shares (share_by = 'role', the default): Citus connects
# to the workers as the current role, so the placement's operations are
# charged to it there.  fbf.max_filter_size (2MB here) caps how far a
# shard's window grows, and so what it takes in a period.  The tables
# remember 2 minutes.  In each scenario a victim (role t2) sends, through
# the coordinator, a batch of 50 new operations and one in-order
# operation of its own stream every 100 ms at most (well within its
# share), and logs every answer; a flood (role t1, two sessions) sends
# batches of 1,000 new operations through the coordinator for 30 s, and
# on until refused 20 times:
#   1. claims on a dedup table of two shards, of the default plan (1,000
#      operations a second a shard);
#   2. increments on a counter of two shards, of the default plan, each
#      role limited by row security to its own keys (the flood's batches
#      on new keys of its own, spread over both shards);
#   3. the same on a counter planned for 100 operations a second (50 a
#      shard), the victim's batches of 100 (up to 10 times the plan): the
#      shards' pending chains, planned for the table's rate, fill with
#      entries that wait for the next period's bits while the windows
#      grow, and the flood is refused for its share of them too (53400,
#      `holds its share of the pending pages`, or at their reserve).
#      Before the chains were shared, the flood within its share of the
#      rate filled them up to their reserve, and the victim, light there,
#      was refused for having spent its part of it (0 to 11 times in a
#      run); before a flood was weighed there by what it asked, a flood
#      refused batch after batch (each rolled back) soon weighed less than
#      the victim, which was refused as heavy (0, 3 and 32 times in three
#      runs); while the flood's share of the chains counted only its
#      entries that found their lane full, its entries in flight and
#      those put off later still took it to the reserve under load, and
#      the victim was refused for having spent its part of it (6 times in
#      one run under the whole suite's load).
# From the flood's start to its end:
#   - the flood is refused for its share of the capacity (53400, `role
#     "t1" is over its share ...`) by the shards' workers (Citus' context
#     of a remote error), the refusal reaching it through the coordinator
#     with its SQLSTATE and message; it meets no error but refusals of
#     its share (nor the window's refusal of everyone, `counter filter
#     ... is at its capacity`);
#   - the victim is never refused, its in-order operations are never
#     dismissed, and at most 0.1% of its new ones are; far over the plan
#     (3.), it may be refused for its own share of the pending pages, at
#     most for 5% of its calls, and for nothing else: there its own
#     entries wait too, and the chains are shared by halves between the
#     two roles.  Under the whole suite's load, with drains lagging, its
#     backlog reached its half (17,358 entries against a share of 17,356
#     on one shard: refused for 2 of 487 calls, the flood 1,691 times, in
#     one of 15 runs); refusing it there is the fairness the flood is
#     owed, and taking more would take the flood's half;
# and nothing of the victim's was lost: every id it was told it claimed in
# the last 90 s is a duplicate when claimed again, and its keys add up to
# the increments it was told were applied.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;

my ($coord, $w1, $w2) = fbf_citus_cluster("fbf.max_filter_size = '2MB'\n");

$coord->safe_psql('postgres', q{
	CREATE ROLE t1 LOGIN;
	CREATE ROLE t2 LOGIN;
	SELECT fbf_create_dedup('ids', retention => '2 min');
	SELECT fbf_distribute_dedup('ids', shard_count => 2, colocate_with => 'none');
	GRANT SELECT, INSERT ON ids TO t1, t2;
	SELECT fbf_create_counter_table('likes', retention => '2 min');
	SELECT fbf_distribute_counter('likes', shard_count => 2, colocate_with => 'none');
	-- planned as 100/s was before plans took the pages' capacity part
	SELECT fbf_create_counter_table('likes_low', retention => '2 min', expected_rate => 75);
	SELECT fbf_distribute_counter('likes_low', shard_count => 2, colocate_with => 'none');
	GRANT SELECT, INSERT, UPDATE ON likes, likes_low TO t1, t2;
	ALTER TABLE likes ENABLE ROW LEVEL SECURITY;
	CREATE POLICY own ON likes USING (key LIKE current_user || ':%')
		WITH CHECK (key LIKE current_user || ':%');
	ALTER TABLE likes_low ENABLE ROW LEVEL SECURITY;
	CREATE POLICY own ON likes_low USING (key LIKE current_user || ':%')
		WITH CHECK (key LIKE current_user || ':%');

	-- on the coordinator only (not distributed)
	CREATE SCHEMA app;
	GRANT USAGE ON SCHEMA app TO t1, t2;
	CREATE TABLE app.log (at timestamptz, who text, kind text, outcome text,
						  detail text, ids bigint[], context text);
	GRANT INSERT, SELECT ON app.log TO t1, t2;

	-- batches of `batch` new ids (claims) or new operations on a new key of
	-- the flood's own on `counter` (increments) for `secs` seconds, and on until it has
	-- been refused 20 times (a slower machine floods longer), `most`
	-- seconds at most; a refusal is logged with its SQLSTATE, message,
	-- detail and context
	CREATE PROCEDURE app.flood(what text, counter regclass, secs float8, most float8, batch int)
	LANGUAGE plpgsql AS $$
	DECLARE
		start timestamptz := clock_timestamp();
		refused int := 0;
		d text;
		c text;
	BEGIN
		INSERT INTO app.log VALUES (clock_timestamp(), 'flood', 'start', '');
		COMMIT;
		WHILE clock_timestamp() < start + make_interval(secs => most) AND
			  (clock_timestamp() < start + make_interval(secs => secs) OR refused < 20) LOOP
			BEGIN
				IF what = 'claims' THEN
					PERFORM fbf_claim('ids', (SELECT array_agg((random() * 4e18)::bigint)
											   FROM generate_series(1, batch)));
				ELSE
					PERFORM idempotent_increment(counter, 't1:' || (random() * 1e9)::bigint,
						(SELECT array_agg((random() * 4e18)::bigint) FROM generate_series(1, batch)),
						array_fill(1::bigint, ARRAY[batch]), array_fill(1::bigint, ARRAY[batch]));
				END IF;
				INSERT INTO app.log VALUES (clock_timestamp(), 'flood', 'batch', 'ok');
			EXCEPTION WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL, c = PG_EXCEPTION_CONTEXT;
				INSERT INTO app.log VALUES (clock_timestamp(), 'flood', 'batch',
											SQLSTATE || ' ' || SQLERRM, d, NULL, c);
				refused := refused + 1;
			END;
			COMMIT;
		END LOOP;
		INSERT INTO app.log VALUES (clock_timestamp(), 'flood', 'end', '');
		COMMIT;
	END $$;

	-- the victim: a batch of `batch` new ids (claims) or new operations of
	-- new clients on one of its keys of `counter` (increments), then one
	-- in-order claim or increment of its own stream, every `pause` seconds
	-- at most (50 every 100 ms: at most 500 new operations a second, about
	-- a third of its share of what a shard's window at its cap takes,
	-- whatever the machine's speed), until both
	-- floods have ended and `secs` seconds more, `most` seconds at most;
	-- every answer logged ('applied' or 'dismissed', and the ids it was
	-- told it claimed), every error with its SQLSTATE and message
	CREATE PROCEDURE app.victim(what text, counter regclass, secs float8, most float8,
								batch int, pause float8)
	LANGUAGE plpgsql AS $$
	DECLARE
		stop timestamptz := clock_timestamp() + make_interval(secs => most);
		ended timestamptz;
		me bigint := (random() * 4e18)::bigint;
		seq bigint := 0;
		ops bigint[];
		res boolean[];
		ok boolean;
		t timestamptz;
		d text;
	BEGIN
		WHILE clock_timestamp() < least(stop, ended + make_interval(secs => secs)) LOOP
			t := clock_timestamp();
			ops := (SELECT array_agg((random() * 4e18)::bigint) FROM generate_series(1, batch));
			BEGIN
				IF what = 'claims' THEN
					res := fbf_claim('ids', ops);
				ELSE
					res := idempotent_increment(counter, 't2:k' || floor(random() * 101)::int,
						ops, array_fill(1::bigint, ARRAY[batch]), array_fill(1::bigint, ARRAY[batch]));
				END IF;
				INSERT INTO app.log
					SELECT t, 'victim', 'new', CASE WHEN a THEN 'applied' ELSE 'dismissed' END,
						   NULL, CASE WHEN a AND what = 'claims' THEN ARRAY[i] END
					FROM unnest(res, ops) u(a, i);
			EXCEPTION WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
				INSERT INTO app.log VALUES (t, 'victim', 'new', SQLSTATE || ' ' || SQLERRM, d);
			END;
			COMMIT;
			seq := seq + 1;
			t := clock_timestamp();
			BEGIN
				IF what = 'claims' THEN
					ok := fbf_claim('ids', me, seq);
				ELSE
					ok := idempotent_increment(counter, 't2:inorder', me, seq, 1);
				END IF;
				INSERT INTO app.log VALUES (t, 'victim', 'inorder',
											CASE WHEN ok THEN 'applied' ELSE 'dismissed' END);
			EXCEPTION WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
				INSERT INTO app.log VALUES (t, 'victim', 'inorder', SQLSTATE || ' ' || SQLERRM, d);
			END;
			COMMIT;
			PERFORM pg_sleep(pause);
			IF ended IS NULL THEN
				ended := (SELECT max(at) FROM app.log WHERE who = 'flood' AND kind = 'end'
						  HAVING count(*) FILTER (WHERE kind = 'end') = 2);
			END IF;
		END LOOP;
	END $$;
});

# A flood of `what` ('claims' or 'increments', these on `counter`) by t1
# while t2 is the victim, with batches of `batch` every `pause` seconds,
# and the assertions of the file's head (but the last), named after
# `label`.  With `far` (a counter planned far below the load), the flood
# is refused for its share of the pending chains (or at their reserve)
# too.
sub flood_scenario
{
	my ($label, $what, $counter, $batch, $pause, $far) = @_;
	my ($warm, $flood_secs, $most) = (4, 30, 80);

	$coord->safe_psql('postgres', 'TRUNCATE app.log');
	my $victim = fbf_start_call($coord, 't2',
		"CALL app.victim('$what', '$counter', 3, " . ($warm + $most + 3) . ", $batch, $pause)",
		$warm + $most + 240);
	sleep $warm;
	my @floods = map {
		fbf_start_call($coord, 't1', "CALL app.flood('$what', '$counter', $flood_secs, $most, 1000)",
			$most + 240)
	} 1 .. 2;
	ok(fbf_finish_call($_), "$label: a flood session ran to its end") for @floods;
	ok(fbf_finish_call($victim), "$label: the victim ran to its end");

	# its refusals for its share of the capacity, and of those, the ones
	# raised on a worker (Citus' context of a remote error); all its
	# refusals for its shares (in flight, the chains too), those for the
	# chains (its share of them, their reserve), and anything else
	my ($ok, $refused, $remote, $shares, $at_chains, $other, $message) =
	  split /\|/, $coord->safe_psql('postgres', q{
		SELECT count(*) FILTER (WHERE outcome = 'ok'),
			   count(*) FILTER (WHERE outcome LIKE '53400 role "t1" is over its share of the capacity %'),
			   count(*) FILTER (WHERE outcome LIKE '53400 role "t1" is over its share of the capacity %'
									AND context LIKE '%while executing command on %'),
			   count(*) FILTER (WHERE outcome LIKE '53400 role "t1" %'),
			   count(*) FILTER (WHERE outcome LIKE '53400 role "t1" has filled the pending pages %'
									OR outcome LIKE '53400 role "t1" holds its share of the pending pages %'),
			   count(*) FILTER (WHERE outcome NOT IN ('ok', '') AND outcome NOT LIKE '53400 role "t1" %'),
			   coalesce(string_agg(DISTINCT outcome, '; ') FILTER (WHERE outcome NOT IN ('ok', '')), '')
		  FROM app.log WHERE who = 'flood'}), -1;
	my ($new, $dismissed, $inorder, $inorder_dismissed, $errors, $own_pending, $error_text) =
	  split /\|/, $coord->safe_psql('postgres', q{
		WITH span AS (SELECT min(at) FILTER (WHERE kind = 'start') AS s,
							 max(at) FILTER (WHERE kind = 'end') AS e
						FROM app.log WHERE who = 'flood')
		SELECT count(*) FILTER (WHERE kind = 'new' AND outcome IN ('applied', 'dismissed')),
			   count(*) FILTER (WHERE kind = 'new' AND outcome = 'dismissed'),
			   count(*) FILTER (WHERE kind = 'inorder' AND outcome IN ('applied', 'dismissed')),
			   count(*) FILTER (WHERE kind = 'inorder' AND outcome = 'dismissed'),
			   count(*) FILTER (WHERE outcome NOT IN ('applied', 'dismissed')),
			   count(*) FILTER (WHERE outcome LIKE '53400 role "t2" holds its share of the pending pages %'),
			   coalesce(string_agg(DISTINCT outcome || ' (' || coalesce(detail, '') || ')', '; ')
							FILTER (WHERE outcome NOT IN ('applied', 'dismissed')), '')
		  FROM app.log, span WHERE who = 'victim' AND at >= span.s AND at < span.e}), -1;
	diag(sprintf('%s: flood: %d batches of 1000 applied, %d refused for its share of the capacity (53400; %d by a worker), %d for other shares, %d other errors%s',
			$label, $ok, $refused, $remote, $shares - $refused, $other, $message ne '' ? " ($message)" : ''));
	diag(sprintf('%s: victim during the flood: %d new, %d dismissed (%.3f%%), %d in-order, %d dismissed, %d errors',
			$label, $new, $dismissed, $new ? 100 * $dismissed / $new : 0, $inorder, $inorder_dismissed,
			$errors));
	diag(sprintf('%s: flood for %s s', $label, $coord->safe_psql('postgres', q{
		SELECT round(extract(epoch FROM max(at) - min(at))::numeric, 1) FROM app.log WHERE who = 'flood'})));
	my $stats = $what eq 'claims'
	  ? q{fbf_dedup_stats WHERE dedup = 'ids'::regclass}
	  : qq{fbf_counter_stats WHERE counter = '$counter'::regclass};
	diag("$label: " . $coord->safe_psql('postgres', qq{
		SELECT string_agg(shard || ': ' || partitions || ' partitions, ' || bytes || ' bytes, capped '
						  || capped || ', estimate ' || round(estimated_fpp::numeric, 6), '; '
						  ORDER BY shard)
		  FROM $stats}));

	cmp_ok($refused, '>', 0,
		"$label: the flood was refused for its role's share of the capacity (53400), through the coordinator");
	is($remote, $refused, "$label: each time by the worker of the shard");
	is($other, 0, "$label: and refused for nothing but its share");
	cmp_ok($new, '>=', 1000, "$label: the victim sent new operations during the flood");
	cmp_ok($inorder, '>=', 10, "$label: and operations of its stream");
	if ($far)
	{
		cmp_ok($at_chains, '>', 0,
			"$label: the flood was refused for its share of the pending chains too");
	}
	if ($far)
	{
		# its own backlog may reach its half of the chains (see the head)
		is($errors - $own_pending, 0,
			"$label: the victim was never refused but for its own entries over its half of the pending pages")
		  or diag($error_text);
		cmp_ok($own_pending, '<=', 0.05 * ($new / $batch + $inorder + $errors),
			"$label: and that for at most 5% of its calls") or diag($error_text);
	}
	else
	{
		is($errors, 0, "$label: the victim was never refused") or diag($error_text);
	}
	is($inorder_dismissed, 0, "$label: its in-order operations were never dismissed");
	cmp_ok($dismissed, '<=', $new / 1000, "$label: at most 0.1% of its new operations were dismissed");
}

flood_scenario('claims', 'claims', 'likes', 50, 0.1);
# every id the victim claimed is remembered: claimed again, a duplicate
# (those of the last 90 s: the table remembers 2 min)
my ($claimed, $again) = split /\|/, $coord->safe_psql('postgres', q{
	SELECT count(*), count(*) FILTER (WHERE a)
	  FROM unnest(fbf_claim('ids', (SELECT array_agg(id) FROM app.log, unnest(ids) id
									 WHERE who = 'victim' AND kind = 'new'
									   AND at > now() - interval '90 s'))) a});
cmp_ok($claimed, '>=', 1000, 'claims: the victim\'s claimed ids, claimed again');
is($again, 0, 'claims: are each a duplicate: none was lost to the flood');

# the victim's keys of `counter` hold what it was told was applied, once
# each (named after `label`)
sub victim_sum
{
	my ($label, $counter) = @_;
	my ($applied, $sum) = split /\|/, $coord->safe_psql('postgres', qq{
		SELECT (SELECT count(*) FROM app.log WHERE who = 'victim' AND outcome = 'applied'),
			   (SELECT coalesce(sum(value), 0) FROM $counter WHERE key LIKE 't2:%')});
	cmp_ok($applied, '>=', 1000, "$label: the victim was told its increments were applied");
	is($sum, $applied, "$label: and its keys add up to them: none lost, none applied twice");
}

flood_scenario('increments', 'increments', 'likes', 50, 0.1);
victim_sum('increments', 'likes');

# a counter planned far below its load (100 a second, 50 a shard; the
# victim sends up to 500 a shard): its pending chains stay in their
# reserve while its windows grow, and the flood, refused there and for its
# share, must weigh what it asked, not what its aborted batches kept
flood_scenario('increments far over the plan', 'increments', 'likes_low', 100, 0.1, 1);
victim_sum('increments far over the plan', 'likes_low');

done_testing();
