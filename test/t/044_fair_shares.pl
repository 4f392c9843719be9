# Shares of a window's capacity: one role's (or one key's) flood of new
# operations cannot make the window dismiss or refuse anyone else's.
#
# A counter's window takes so many new operations per period under its
# target false-positive rate, and fbf.max_filter_size (2MB here) caps how
# far it grows.  Each unit (a role by default, a key with share_by = 'key')
# has its share of that; a unit over its share is refused (53400), and a
# unit's open and prepared transactions hold at most their share of the
# entries in flight.  In every scenario a victim (role t2) sends, in a
# loop, batches of 100 new operations of new clients on random keys and one
# in-order operation of its own stream, and logs every answer; the flood
# runs two concurrent sessions of batches of new operations; a scenario is
# measured from the flood's start to its end, per 5-second window.
#
# The counters take their defaults: a flood arrives while a window is well
# below its cap and makes it grow, and the filters of the periods it grows
# in must not be left denser than the shares plan (they keep that density,
# copied by each split, until they age out, checked alone once the
# oldest).  The flood of 1 sends batches of 100, so that its share is
# filled to the last operation of each period while the window grows.
#
#   1. Bloom counter, share_by = 'role' (the default): t1 floods, t2 is
#      never refused, its in-order operations are never dismissed, its new
#      operations at most 0.1% per window; t1 is refused (53400); the
#      filter is not capped at the end.
#   2. The same with share_by = 'key' on a counter used by t2 alone: the
#      key 't2:flood' floods, the other keys are the victim.
#   3. The in-flight share: a t1 transaction takes batches until it is
#      refused ("holds its share of the operations in flight"; refused for
#      its rate meanwhile, it waits and goes on) and stays open, then the
#      same prepared (PREPARE TRANSACTION): meanwhile t2 is
#      never refused and its in-order operations are never dismissed.
#   4. Without the feature (at_capacity = 'dismiss'): the flood (batches
#      of 10000) saturates the filter and t2's new operations are dismissed
#      beyond 0.1% (the silent loss the shares prevent); one pool
#      (share_by = 'none'): t2 is refused ("is at its capacity").
#   5. A cuckoo counter, share by role: t2 never refused, in-order never
#      dismissed, new operations dismissed at most 0.5% over the span (the
#      per-window rates are printed).
#   6. More roles than a share table tells apart (128): 128 roles take a
#      slot each, one of them floods until refused, then 12 more roles,
#      which share the table's last slot, send 500 new operations each:
#      max-min fairness over the 140 leaves each of them more than that,
#      so none is refused (counted as one unit, the 12 had half of what
#      the flood left, and the last of them was refused); the flood's next
#      refusal counts about 140 sharers.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use FbfTest;

my $node = fbf_node('fair_shares', q{
fbf.max_filter_size = '2MB'
max_prepared_transactions = 10
});

$node->safe_psql('postgres', q{
	CREATE ROLE t1 LOGIN;
	CREATE ROLE t2 LOGIN;
	CREATE SCHEMA app;
	GRANT USAGE ON SCHEMA app TO t1, t2;
	CREATE TABLE app.log (at timestamptz, who text, kind text, outcome text, detail text);
	GRANT INSERT, SELECT ON app.log TO t1, t2;

	-- batches of `batch` new operations (one new client each) on key k for
	-- `secs` seconds; a refusal is logged with its SQLSTATE and message
	CREATE PROCEDURE app.flood(c regclass, k text, secs float8, batch int,
							   tag text DEFAULT 'flood')
	LANGUAGE plpgsql AS $$
	DECLARE
		stop timestamptz := clock_timestamp() + make_interval(secs => secs);
		cid bigint;
		d text;
	BEGIN
		INSERT INTO app.log VALUES (clock_timestamp(), tag, 'start', '');
		COMMIT;
		WHILE clock_timestamp() < stop LOOP
			cid := (random() * 4e18)::bigint;
			BEGIN
				PERFORM idempotent_increment(c, k, array_fill(cid, ARRAY[batch]),
					(SELECT array_agg(g::bigint) FROM generate_series(1, batch) g),
					array_fill(0::bigint, ARRAY[batch]));
				INSERT INTO app.log VALUES (clock_timestamp(), tag, 'batch', 'ok');
			EXCEPTION WHEN configuration_limit_exceeded OR insufficient_resources THEN
				GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
				INSERT INTO app.log VALUES (clock_timestamp(), tag, 'batch',
											SQLSTATE || ' ' || SQLERRM, d);
			END;
			COMMIT;
		END LOOP;
		INSERT INTO app.log VALUES (clock_timestamp(), tag, 'end', '');
		COMMIT;
	END $$;

	-- the victim: a batch of 100 new operations of new clients on a random
	-- key, then one in-order operation of its own stream, for `secs` seconds;
	-- every answer logged, every error with its SQLSTATE and message
	CREATE PROCEDURE app.victim(c regclass, secs float8, tag text DEFAULT 'victim')
	LANGUAGE plpgsql AS $$
	DECLARE
		stop timestamptz := clock_timestamp() + make_interval(secs => secs);
		me bigint := (random() * 4e18)::bigint;
		seq bigint := 0;
		t timestamptz;
		res boolean[];
		ok boolean;
		d text;
	BEGIN
		WHILE clock_timestamp() < stop LOOP
			t := clock_timestamp();
			BEGIN
				res := idempotent_increment(c, 't2:k' || floor(random() * 101)::int,
					(SELECT array_agg((random() * 4e18)::bigint) FROM generate_series(1, 100)),
					array_fill(1::bigint, ARRAY[100]), array_fill(1::bigint, ARRAY[100]));
				INSERT INTO app.log
					SELECT t, tag, 'new', CASE WHEN a THEN 'applied' ELSE 'dismissed' END
					FROM unnest(res) a;
			EXCEPTION WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
				INSERT INTO app.log VALUES (t, tag, 'new', SQLSTATE || ' ' || SQLERRM, d);
			END;
			COMMIT;
			seq := seq + 1;
			t := clock_timestamp();
			BEGIN
				ok := idempotent_increment(c, 't2:inorder', me, seq, 1);
				INSERT INTO app.log VALUES (t, tag, 'inorder',
											CASE WHEN ok THEN 'applied' ELSE 'dismissed' END);
			EXCEPTION WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
				INSERT INTO app.log VALUES (t, tag, 'inorder', SQLSTATE || ' ' || SQLERRM, d);
			END;
			COMMIT;
			PERFORM pg_sleep(0.04);
		END LOOP;
	END $$;
});

# A fresh counter $name (dropped first), with row security (each role its
# own keys) unless $solo names the one role that may use it.
sub fresh_counter
{
	my ($name, %o) = @_;
	my $filter = $o{filter} ? ", filter => '$o{filter}'" : '';
	my $retention = $o{retention} // '20 s';
	my $sql = qq{
		DROP TABLE IF EXISTS $name;
		TRUNCATE app.log;
		SELECT fbf_create_counter_table('$name', retention => interval '$retention'$filter);
	};
	if ($o{solo})
	{
		$sql .= "GRANT SELECT, INSERT, UPDATE ON $name TO $o{solo};\n";
	}
	else
	{
		$sql .= qq{
			ALTER TABLE $name ENABLE ROW LEVEL SECURITY;
			CREATE POLICY own ON $name USING (key LIKE current_user || ':%')
				WITH CHECK (key LIKE current_user || ':%');
			GRANT SELECT, INSERT, UPDATE ON $name TO t1, t2;
		};
	}
	$sql .= "ALTER INDEX ${name}_fbf SET ($o{options});\n" if $o{options};
	$node->safe_psql('postgres', $sql);
}

# Samples of the counter's stats every second until $until (epoch seconds):
# whether it was ever capped, its highest estimate and its largest size.
sub watch
{
	my ($counter, $until) = @_;
	my %w = (capped => 0, fpp => 0, bytes => 0, partitions => 0, samples => 0);
	while (time() < $until)
	{
		my ($capped, $fpp, $bytes, $parts) = split /\|/, $node->safe_psql('postgres', qq{
			SELECT capped, estimated_fpp, bytes, partitions
			FROM fbf_counter_stats WHERE counter = '$counter'::regclass});
		$w{capped}++ if $capped eq 't';
		$w{fpp} = $fpp if $fpp > $w{fpp};
		$w{bytes} = $bytes if $bytes > $w{bytes};
		$w{partitions} = $parts if $parts > $w{partitions};
		$w{samples}++;
		sleep 1;
	}
	return \%w;
}

# The victim's answers from $from to $to (SQL timestamp expressions over
# the log), per window of $width seconds (the remainder joins the last):
# [ { w, new, dismissed, inorder, inorder_dismissed, refused, errors } ... ]
# and the totals.
sub victim_windows
{
	my ($from, $to, $width) = @_;
	my $rows = $node->safe_psql('postgres', qq{
		WITH span AS (SELECT ($from) AS s, ($to) AS e),
		nw AS (SELECT s, e, greatest(floor(extract(epoch FROM e - s) / $width), 1)::int AS n FROM span),
		v AS (SELECT least(floor(extract(epoch FROM l.at - nw.s) / $width)::int, nw.n - 1) AS w, l.*
			  FROM app.log l, nw WHERE l.who = 'victim' AND l.at >= nw.s AND l.at < nw.e)
		SELECT w,
			   count(*) FILTER (WHERE kind = 'new' AND outcome IN ('applied', 'dismissed')),
			   count(*) FILTER (WHERE kind = 'new' AND outcome = 'dismissed'),
			   count(*) FILTER (WHERE kind = 'inorder' AND outcome IN ('applied', 'dismissed')),
			   count(*) FILTER (WHERE kind = 'inorder' AND outcome = 'dismissed'),
			   count(*) FILTER (WHERE outcome NOT IN ('applied', 'dismissed')),
			   coalesce(string_agg(DISTINCT outcome, '; ') FILTER (WHERE outcome NOT IN ('applied', 'dismissed')), '')
		FROM v GROUP BY w ORDER BY w});
	my (@win, %tot);
	for my $line (split /\n/, $rows)
	{
		my %r;
		@r{qw(w new dismissed inorder inorder_dismissed refused errors)} = split /\|/, $line, 7;
		push @win, \%r;
		$tot{$_} += $r{$_} for qw(new dismissed inorder inorder_dismissed refused);
	}
	$tot{$_} //= 0 for qw(new dismissed inorder inorder_dismissed refused);
	return (\@win, \%tot);
}

sub rate_of
{
	my ($r) = @_;
	return $r->{new} ? sprintf('%.3f%%', 100 * $r->{dismissed} / $r->{new}) : 'n/a';
}

# The flood's span: its first start to its last end.
my $flood_from = q{(SELECT min(at) FROM app.log WHERE who = 'flood' AND kind = 'start')};
my $flood_to = q{(SELECT max(at) FROM app.log WHERE who = 'flood' AND kind = 'end')};

# The victim for $warm + $flood + 3 seconds, the flood (two sessions as
# $flooder on key $fkey, batches of $batch) after $warm seconds for $flood
# seconds.  Returns the windows, the totals and what watch saw.
sub flood_scenario
{
	my (%o) = @_;
	my $counter = $o{counter};
	my $victim_secs = $o{warm} + $o{flood} + 3;
	my $log_at = -s $node->logfile;
	my $victim = fbf_start_call($node, 't2', "CALL app.victim('$counter', $victim_secs)", $victim_secs + 180);
	sleep $o{warm};
	my @floods = map {
		fbf_start_call($node, $o{flooder}, "CALL app.flood('$counter', '$o{fkey}', $o{flood}, $o{batch})",
			$o{flood} + 180)
	} 1 .. 2;
	my $w = watch($counter, time() + $o{flood});
	ok(fbf_finish_call($_), "$o{name}: a flood session ran to its end") for @floods;
	ok(fbf_finish_call($victim), "$o{name}: the victim ran to its end");
	my ($win, $tot) = victim_windows($flood_from, $flood_to, 5);
	my $fl = $node->safe_psql('postgres', q{
		SELECT count(*) FILTER (WHERE outcome = 'ok') || '|' ||
			   count(*) FILTER (WHERE outcome LIKE '53400%') || '|' ||
			   count(*) FILTER (WHERE outcome NOT IN ('ok', '') AND outcome NOT LIKE '53400%') || '|' ||
			   round(extract(epoch FROM max(at) FILTER (WHERE kind = 'end') -
									   min(at) FILTER (WHERE kind = 'start'))::numeric, 1) || '|' ||
			   coalesce((SELECT string_agg(m.outcome || ' (' || m.n || ')', '; ')
						 FROM (SELECT outcome, count(*) AS n FROM app.log
							   WHERE who = 'flood' AND outcome NOT IN ('ok', '')
							   GROUP BY outcome) m), '')
		FROM app.log WHERE who = 'flood'});
	my %f;
	@f{qw(ok refused other secs message)} = split /\|/, $fl, 5;
	my ($capped, $fpp, $bytes, $parts) = split /\|/, $node->safe_psql('postgres', qq{
		SELECT capped, round(estimated_fpp::numeric, 6), bytes, partitions
		FROM fbf_counter_stats WHERE counter = '$counter'::regclass});
	diag(sprintf('%s: flood %s s, %d batches of %d applied, %d refused (53400), %d other errors; %s',
			$o{name}, $f{secs}, $f{ok}, $o{batch}, $f{refused}, $f{other}, $f{message}));
	diag(sprintf('%s: during the flood capped in %d of %d samples, highest estimate %g, up to %d bytes, %d partitions; at the end capped %s, estimate %s, %d bytes',
			$o{name}, $w->{capped}, $w->{samples}, $w->{fpp}, $w->{bytes}, $w->{partitions}, $capped, $fpp, $bytes));
	for my $r (@$win)
	{
		diag(sprintf('%s: window %d: new %d, dismissed %d (%s), in-order %d, dismissed %d, refused %d%s',
				$o{name}, $r->{w}, $r->{new}, $r->{dismissed}, rate_of($r), $r->{inorder},
				$r->{inorder_dismissed}, $r->{refused}, $r->{errors} ne '' ? " ($r->{errors})" : ''));
	}
	diag(sprintf('%s: span total: new %d, dismissed %d (%s), in-order %d, dismissed %d, refused %d',
			$o{name}, $tot->{new}, $tot->{dismissed}, rate_of($tot), $tot->{inorder},
			$tot->{inorder_dismissed}, $tot->{refused}));
	my @capped_at = slurp_file($node->logfile, $log_at) =~ /^(\S+ \S+) .*WARNING:  fbf: the filter "[^"]*" is at its cap/mg;
	diag("$o{name}: the server warned that the filter is at its cap at: @capped_at") if @capped_at;
	my $vd = $node->safe_psql('postgres', qq{
		SELECT to_char(at, 'HH24:MI:SS.MS') || ' ' || kind || ': ' || outcome || ' (' || coalesce(detail, '') || ')'
		FROM app.log WHERE who = 'victim' AND outcome NOT IN ('applied', 'dismissed')
		  AND at >= $flood_from AND at < $flood_to ORDER BY at LIMIT 5});
	diag("$o{name}: the victim's first errors:\n$vd") if $vd ne '';
	my $fd = $node->safe_psql('postgres', q{
		SELECT outcome || ' (' || coalesce(detail, '') || ')' FROM app.log
		WHERE who = 'flood' AND outcome LIKE '53400%' ORDER BY at DESC LIMIT 1});
	diag("$o{name}: the flood's last refusal: $fd") if $fd ne '';
	cmp_ok(scalar @$win, '>=', 3, "$o{name}: the victim ran through the flood ("
		  . scalar(@$win) . ' windows)');
	cmp_ok($tot->{new}, '>', 0, "$o{name}: the victim sent new operations during the flood");
	return ($win, $tot, \%f, { capped => $capped, fpp => $fpp, watch => $w });
}

# The assertions of a fair scenario: per window, the victim is never
# refused, its in-order operations never dismissed, and (with
# $per_window_rate) its new operations dismissed at most 0.1%; the flood
# was refused for its share; the filter is not capped at the end.
sub assert_fair
{
	my ($name, $win, $tot, $f, $end, $per_window_rate) = @_;
	for my $r (@$win)
	{
		is($r->{refused}, 0, "$name: window $r->{w}: the victim refused $r->{refused} times"
			  . ($r->{errors} ne '' ? " ($r->{errors})" : ''));
		is($r->{inorder_dismissed}, 0,
			"$name: window $r->{w}: in-order operations dismissed: $r->{inorder_dismissed} of $r->{inorder}");
		next unless $per_window_rate;
		ok($r->{dismissed} * 1000 <= $r->{new},
			"$name: window $r->{w}: new operations dismissed $r->{dismissed} of $r->{new} ("
			  . rate_of($r) . ') <= 0.1%');
	}
	cmp_ok($f->{refused}, '>', 0, "$name: the flood was refused beyond its share ($f->{refused} batches)");
	like($f->{message}, qr/is over its share of the capacity of counter filter/,
		"$name: the flood's refusal says it is over its share");
	is($end->{capped}, 'f', "$name: the filter is not capped at the end");
}

# ---------------------------------------------------------------------
# 1. Bloom counter, shared by role
# ---------------------------------------------------------------------
fresh_counter('app.d');
my ($win, $tot, $f, $end) = flood_scenario(name => 'bloom by role', counter => 'app.d',
	flooder => 't1', fkey => 't1:flood', batch => 100, warm => 8, flood => 25);
assert_fair('bloom by role', $win, $tot, $f, $end, 1);
like($f->{message}, qr/role "t1"/, 'bloom by role: the refusal names the role');

# ---------------------------------------------------------------------
# 2. Bloom counter, shared by key, one role
# ---------------------------------------------------------------------
fresh_counter('app.k', solo => 't2', options => "share_by = 'key'");
($win, $tot, $f, $end) = flood_scenario(name => 'bloom by key', counter => 'app.k',
	flooder => 't2', fkey => 't2:flood', batch => 1000, warm => 8, flood => 25);
assert_fair('bloom by key', $win, $tot, $f, $end, 1);
like($f->{message}, qr/key "t2:flood"/, 'bloom by key: the refusal names the key');
$node->safe_psql('postgres', 'DROP TABLE app.k');

# ---------------------------------------------------------------------
# 3. The in-flight share: an open, then a prepared, transaction of t1
# ---------------------------------------------------------------------
for my $variant ('open', 'prepared')
{
	my $name = "in flight, $variant";
	fresh_counter('app.d');
	my $victim = fbf_start_call($node, 't2', "CALL app.victim('app.d', 24)", 200);
	sleep 5;
	$node->safe_psql('postgres', q{INSERT INTO app.log VALUES (clock_timestamp(), 'hold', 'start', '')});
	# batches of t1 in one transaction until refused, the transaction kept
	my %s = (in => q{
		BEGIN;
		SELECT set_config('fbf_test.held', '0', false), set_config('fbf_test.refusal', 'none', false);
		-- refused for its rate (its share of the period's new operations),
		-- it waits and goes on: it stops at its share of the entries in flight
		DO $$
		DECLARE
			n int := 0;
			rate_refusals int := 0;
			stop timestamptz := clock_timestamp() + interval '60 s';
			cid bigint;
			m text;
			d text;
		BEGIN
			WHILE n < 1000 AND clock_timestamp() < stop LOOP
				cid := (random() * 4e18)::bigint;
				BEGIN
					PERFORM idempotent_increment('app.d', 't1:hold', array_fill(cid, ARRAY[1000]),
						(SELECT array_agg(g::bigint) FROM generate_series(1, 1000) g),
						array_fill(0::bigint, ARRAY[1000]));
					n := n + 1;
				EXCEPTION WHEN configuration_limit_exceeded OR insufficient_resources THEN
					GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL;
					IF m LIKE '%is over its share of the capacity%' THEN
						rate_refusals := rate_refusals + 1;
						PERFORM pg_sleep(0.3);
						CONTINUE;
					END IF;
					PERFORM set_config('fbf_test.refusal', SQLSTATE || ' ' || m || ' (' || d || ')', false);
					EXIT;
				END;
			END LOOP;
			PERFORM set_config('fbf_test.held', n || ':' || rate_refusals, false);
		END $$;
		SELECT 'filled:' || current_setting('fbf_test.held') || ':' || current_setting('fbf_test.refusal');
	}, out => '', err => '');
	$s{in} .= "PREPARE TRANSACTION 'x';\nSELECT 'prepared';\n" if $variant eq 'prepared';
	$s{timer} = IPC::Run::timer(120);
	$s{h} = IPC::Run::start(
		[ 'psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1', '-U', 't1', '-d', $node->connstr('postgres') ],
		'<', \$s{in}, '>', \$s{out}, '2>', \$s{err}, $s{timer});
	my $want = $variant eq 'prepared' ? qr/prepared/ : qr/filled:/;
	$s{h}->pump until $s{out} =~ $want || $s{timer}->is_expired || !$s{h}->pumpable;
	my ($held, $rate_refusals, $refusal) = $s{out} =~ /filled:(\d+):(\d+):(.*)/;
	diag("$name: t1 held " . ($held // '?') . ' batches of 1000 in flight (' . ($rate_refusals // '?')
		  . ' batches refused for its rate meanwhile), then: ' . ($refusal // "nothing ($s{out} $s{err})"));
	like($refusal // '', qr/^53400 role "t1" holds its share of the operations in flight/,
		"$name: t1 refused for its share of the operations in flight");
	my ($pending) = $node->safe_psql('postgres',
		q{SELECT pending FROM fbf_counter_stats WHERE counter = 'app.d'::regclass});
	diag("$name: pending entries while held: $pending");
	sleep 8;
	$node->safe_psql('postgres', q{INSERT INTO app.log VALUES (clock_timestamp(), 'hold', 'end', '')});
	if ($variant eq 'prepared')
	{
		$s{in} .= "\\q\n";
		$s{h}->finish;
		$node->safe_psql('postgres', "ROLLBACK PREPARED 'x'");
	}
	else
	{
		$s{in} .= "ROLLBACK;\n\\q\n";
		$s{h}->finish;
	}
	ok(fbf_finish_call($victim), "$name: the victim ran to its end");
	my ($w2, $t2) = victim_windows(q{(SELECT min(at) FROM app.log WHERE who = 'hold' AND kind = 'start')},
		q{(SELECT max(at) FROM app.log WHERE who = 'hold' AND kind = 'end')}, 5);
	for my $r (@$w2)
	{
		diag(sprintf('%s: window %d: new %d, dismissed %d (%s), in-order %d, dismissed %d, refused %d%s',
				$name, $r->{w}, $r->{new}, $r->{dismissed}, rate_of($r), $r->{inorder},
				$r->{inorder_dismissed}, $r->{refused}, $r->{errors} ne '' ? " ($r->{errors})" : ''));
	}
	cmp_ok($t2->{inorder}, '>', 0, "$name: the victim ran while t1 held its share ($t2->{inorder} in-order operations)");
	is($t2->{refused}, 0, "$name: the victim was never refused while t1 held its share");
	is($t2->{inorder_dismissed}, 0, "$name: no in-order operation of the victim dismissed");
	# once rolled back, t1's share is free again
	my ($rc, $out, $err) = $node->psql('postgres', q{
		SELECT array_length(idempotent_increment('app.d', 't1:after', ARRAY[1, 2, 3]::bigint[],
			ARRAY[1, 1, 1]::bigint[], ARRAY[1, 1, 1]::bigint[]), 1)},
		extra_params => [ '-U', 't1' ]);
	is($out, '3', "$name: after the rollback t1 is admitted again") or diag($err);
}

# ---------------------------------------------------------------------
# 4. Without the feature: at_capacity = 'dismiss'; and one pool
# ---------------------------------------------------------------------
fresh_counter('app.d', options => "at_capacity = 'dismiss'");
($win, $tot, $f, $end) = flood_scenario(name => 'dismiss (no shares)', counter => 'app.d',
	flooder => 't1', fkey => 't1:flood', batch => 10000, warm => 8, flood => 25);
ok($tot->{dismissed} * 1000 > $tot->{new},
	"dismiss (no shares): the flood made the filter dismiss the victim's new operations: $tot->{dismissed} of $tot->{new} ("
	  . rate_of($tot) . ') > 0.1%');
is($f->{refused}, 0, 'dismiss (no shares): nothing is refused');

fresh_counter('app.d', options => "share_by = 'none'");
($win, $tot, $f, $end) = flood_scenario(name => 'one pool', counter => 'app.d',
	flooder => 't1', fkey => 't1:flood', batch => 1000, warm => 5, flood => 15);
my $pool_refusals = $node->safe_psql('postgres', qq{
	SELECT count(*) FROM app.log
	WHERE who = 'victim' AND outcome LIKE '53400 counter filter % is at its capacity'
	  AND at >= $flood_from AND at < $flood_to});
cmp_ok($pool_refusals, '>', 0,
	"one pool: the victim is refused while the flood takes the pool ($pool_refusals refusals)");

# ---------------------------------------------------------------------
# 5. Cuckoo counter, shared by role
# ---------------------------------------------------------------------
fresh_counter('app.d', filter => 'cuckoo');
($win, $tot, $f, $end) = flood_scenario(name => 'cuckoo by role', counter => 'app.d',
	flooder => 't1', fkey => 't1:flood', batch => 1000, warm => 8, flood => 25);
assert_fair('cuckoo by role', $win, $tot, $f, $end, 0);
ok($tot->{dismissed} * 200 <= $tot->{new},
	"cuckoo by role: new operations dismissed $tot->{dismissed} of $tot->{new} ("
	  . rate_of($tot) . ') <= 0.5% over the span');

# ---------------------------------------------------------------------
# 6. More roles than a share table tells apart
# ---------------------------------------------------------------------
# a long retention (a 20 s period), so that all of it is one or two periods
fresh_counter('app.m', retention => '5 min');
$node->safe_psql('postgres', q{
	DO $$
	BEGIN
		FOR i IN 1 .. 140 LOOP
			EXECUTE format('CREATE ROLE m%s', i);
			EXECUTE format('GRANT SELECT, INSERT, UPDATE ON app.m TO m%s', i);
			EXECUTE format('GRANT USAGE ON SCHEMA app TO m%s', i);
			EXECUTE format('GRANT INSERT ON app.log TO m%s', i);
		END LOOP;
	END $$;
	-- as role m<i>, a batch of n new operations on its own key; its
	-- outcome logged as 'crowd'
	CREATE PROCEDURE app.crowd_batch(i int, n int) LANGUAGE plpgsql AS $$
	DECLARE
		m text;
		d text;
	BEGIN
		EXECUTE format('SET ROLE m%s', i);
		BEGIN
			PERFORM idempotent_increment('app.m', 'm' || i || ':k',
				(SELECT array_agg((random() * 4e18)::bigint) FROM generate_series(1, n)),
				array_fill(1::bigint, ARRAY[n]), array_fill(1::bigint, ARRAY[n]));
			INSERT INTO app.log VALUES (clock_timestamp(), 'crowd', i::text, 'ok');
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL;
			INSERT INTO app.log VALUES (clock_timestamp(), 'crowd', i::text,
										SQLSTATE || ' ' || m, d);
		END;
		RESET ROLE;
		COMMIT;
	END $$;
	CREATE PROCEDURE app.crowd() LANGUAGE plpgsql AS $$
	DECLARE
		refused boolean := false;
	BEGIN
		-- 128 roles take the table's slots
		FOR i IN 1 .. 128 LOOP
			CALL app.crowd_batch(i, 1);
		END LOOP;
		-- m1 floods until it is refused (at most 400 batches)
		FOR b IN 1 .. 400 LOOP
			CALL app.crowd_batch(1, 100);
			EXIT WHEN EXISTS (SELECT FROM app.log WHERE who = 'crowd' AND kind = '1'
							  AND outcome LIKE '53400%');
		END LOOP;
		-- 12 more roles, in the last slot, 500 new operations each
		FOR i IN 129 .. 140 LOOP
			FOR b IN 1 .. 5 LOOP
				CALL app.crowd_batch(i, 100);
			END LOOP;
		END LOOP;
		-- and m1 once more, refused among them all
		CALL app.crowd_batch(1, 100);
	END $$;
});
$node->safe_psql('postgres', 'CALL app.crowd()');
my ($crowd_ok, $crowd_refused, $flood_refusal) = split /\|/, $node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE kind::int > 128 AND outcome = 'ok'),
		   coalesce(string_agg(kind || ': ' || outcome, '; ') FILTER (WHERE kind::int > 128 AND outcome <> 'ok'), ''),
		   coalesce((SELECT detail FROM app.log WHERE who = 'crowd' AND kind = '1' AND outcome LIKE '53400%'
					 ORDER BY at DESC LIMIT 1), '')
	FROM app.log WHERE who = 'crowd'});
diag("more roles than slots: the flood's refusal: $flood_refusal");
is($crowd_refused, '', 'more roles than slots: none of the 12 roles of the last slot refused');
is($crowd_ok, 60, 'more roles than slots: the 12 roles of the last slot each had their 500 operations');
my ($sharers) = $flood_refusal =~ /shared by (\d+)/;
ok(defined $sharers && $sharers >= 132 && $sharers <= 148,
	'more roles than slots: the refusal counts about 140 sharers (' . ($sharers // 'none') . ')');

$node->stop;
done_testing();
