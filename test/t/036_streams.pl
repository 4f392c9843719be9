# Exact streams: clients that number their operations in order are never
# falsely dismissed, and nothing is ever counted twice, through crashes,
# resets of the streams and a memory cap smaller than the clients.
#
#   1. In-order clients, concurrent, each with up to 8 operations in flight
#      (sent in shuffled blocks of 8) and retries of recent ones, against a
#      counter whose filter is saturated (it takes most new operations for
#      retries): every new operation applies, every retry is dismissed, the
#      counter is exact, and the stats show the false dismissals averted.
#   2. A crash (immediate stop) while clients send in-order operations,
#      with a transaction open and one rolled back: after the restart every
#      client retries everything it sent: the acknowledged are dismissed,
#      what never committed applies once, the counter is exact.
#   3. Streams reset (the path of a counter gaining streams after an
#      upgrade, and of a changed max_streams): a counter without streams
#      takes operations, then ALTER INDEX ... SET (max_streams = ...) and a
#      refresh give it streams that know nothing of them: every retry is
#      still dismissed (the filter answers meanwhile, streams_exact_from
#      says until when), new operations apply.  The same through
#      ALTER EXTENSION fbf UPDATE from 1.2, and after a rebuild (VACUUM FULL).
#   4. More streams than max_streams: evictions (stream_evictions > 0), and
#      still every retry dismissed, every new operation applied.
use strict;
use warnings;

use IPC::Run;
use List::Util qw(shuffle);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use FbfTest;

my $node = fbf_node('streams', q{
fbf.naptime = 100ms
max_prepared_transactions = 10
});
my $tmp = PostgreSQL::Test::Utils::tempdir();
srand($ENV{FBF_STREAMS_SEED} // 36);

# The answers (t/f, one a line) of psql running $lines in $db, each
# statement in its own transaction; started in the background.
sub start_script
{
	my ($name, $db, $lines) = @_;
	my $script = "$tmp/$name.sql";
	my $out = "$tmp/$name.out";
	open my $fh, '>', $script or die "$script: $!";
	print $fh @$lines;
	close $fh;
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1', '-f', $script,
		  '-d', $node->connstr($db) ],
		'>', $out, '2>', "$out.err");
	return { h => $h, out => $out, name => $name };
}

sub answers_of
{
	my ($run) = @_;
	return [ grep { /^[tf]$/ } split /\n/, slurp_file($run->{out}) ];
}

# Client $id's plan: seqs 1 .. $n in blocks of 8 shuffled (8 in flight,
# completed in any order), each followed now and then by a retry of a seq
# sent at most 63 below the highest sent (within the streams' bitmap).  Returns [ [seq, expected answer] ... ].
sub in_order_plan
{
	my ($n) = @_;
	my @plan;
	my $max = 0;
	for (my $b = 1; $b <= $n; $b += 8)
	{
		my $top = $b + 7 > $n ? $n : $b + 7;
		my %sent_of_block;
		for my $seq (shuffle($b .. $top))
		{
			push @plan, [ $seq, 't' ];
			$sent_of_block{$seq} = 1;
			$max = $seq if $seq > $max;
			next unless rand() < 0.3;
			# a retry of a seq sent, at most 63 below the highest sent
			my $r = $max - int(rand(64));
			$r = $seq if $r < 1 || ($r >= $b && !$sent_of_block{$r});
			push @plan, [ $r, 'f' ];
		}
	}
	return \@plan;
}

# A session that begins a transaction, runs $sql in it and stays open;
# end_session commits it (or rolls it back) and waits for the session.
sub open_session
{
	my ($db, $sql) = @_;
	my %s = (in => "BEGIN;\n$sql;\nSELECT 'opened';\n", out => '', err => '');
	$s{timer} = IPC::Run::timer(180);
	$s{h} = IPC::Run::start(
		[ 'psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr($db) ],
		'<', \$s{in}, '>', \$s{out}, '2>', \$s{err}, $s{timer});
	$s{h}->pump until $s{out} =~ /opened/ || $s{timer}->is_expired;
	die "session did not open: $s{err}" unless $s{out} =~ /opened/;
	return \%s;
}

sub end_session
{
	my ($s, $how) = @_;
	$s->{in} .= "$how;\n\\q\n";
	$s->{h}->finish;
	return $s->{out};
}

# ---------------------------------------------------------------------
# 1. In-order clients against a saturated filter
# ---------------------------------------------------------------------
$node->safe_psql('postgres', q{
	ALTER SYSTEM SET fbf.max_filter_size = '64kB';
	SELECT pg_reload_conf();
	SELECT fbf_create_counter_table('sat', retention => '10 min', nbits => 1024, nhashes => 3,
									npast => 1, shards => 1);
	-- a filter that takes everything, saturated: only at_capacity = dismiss
	-- lets it (the default refuses what is over the role's share)
	ALTER INDEX sat_fbf SET (at_capacity = 'dismiss')});
my $s = counter_stats($node, 'sat');
is($s->{learning}, 'f', 'a new counter\'s streams are exact from the start');
cmp_ok($s->{stream_capacity}, '>=', 16384,
	"stream capacity from fbf.max_streams ($s->{stream_capacity})");

my $nclients = 24;
my $nper = 400;
my (@runs, %plans);
for my $group (0 .. 3)
{
	my @lines;
	my @expect;
	for my $c (1 .. $nclients)
	{
		next unless $c % 4 == $group;
		$plans{$c} = in_order_plan($nper);
	}
	# the group's clients interleaved, each in its own order
	my %pos = map { $_ => 0 } grep { $_ % 4 == $group } keys %plans;
	while (%pos)
	{
		for my $c (sort { $a <=> $b } keys %pos)
		{
			my $p = $plans{$c};
			my ($seq, $want) = @{ $p->[ $pos{$c}++ ] };
			push @lines, "SELECT idempotent_increment('sat', $c, $seq, 1);\n";
			push @expect, "client $c seq $seq:$want";
			delete $pos{$c} if $pos{$c} >= @$p;
		}
	}
	my $run = start_script("inorder_$group", 'postgres', \@lines);
	$run->{expect} = \@expect;
	push @runs, $run;
}
my ($wrong, $total, $news) = (0, 0, 0);
for my $run (@runs)
{
	$run->{h}->finish;
	my $got = answers_of($run);
	is(scalar @$got, scalar @{ $run->{expect} }, "$run->{name}: every operation answered");
	for my $i (0 .. $#{ $run->{expect} })
	{
		my ($what, $want) = split /:/, $run->{expect}[$i];
		$total++;
		$news++ if $want eq 't';
		next if defined $got->[$i] && $got->[$i] eq $want;
		$wrong++;
		diag("$what: answered " . ($got->[$i] // 'nothing') . ", wanted $want") if $wrong <= 10;
	}
}
is($wrong, 0, "in-order clients: all $news new operations applied, all " . ($total - $news)
	  . ' retries dismissed (no false dismissal on a saturated filter)');
is($node->safe_psql('postgres', q{SELECT fbf_counter_value('sat')}), $nclients * $nper,
	'the counter is exact');
$node->safe_psql('postgres', q{SELECT fbf_counter_maintain('sat')});
$s = counter_stats($node, 'sat');
is($s->{streams}, $nclients, "one stream a client ($s->{streams})");
is($s->{filter_answers}, 0, 'no answer was the filter\'s');
is($s->{exact_answers}, $total, "every answer was exact ($s->{exact_answers})");
cmp_ok($s->{dismissals_averted}, '>', 0,
	"the streams averted false dismissals ($s->{dismissals_averted})");
is($s->{stream_evictions}, 0, 'no stream evicted');
$node->safe_psql('postgres', q{
	ALTER SYSTEM RESET fbf.max_filter_size;
	SELECT pg_reload_conf()});

# ---------------------------------------------------------------------
# 2. A crash with stream operations committed, in flight and rolled back
# ---------------------------------------------------------------------
$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('c', retention => '10 min', expected_rate => 2000,
									target_fpp => 0.000001)});
my $total_ops = 0;
for my $iter (1 .. 2)
{
	my @clients;
	for my $k (1 .. 3)
	{
		my $id = $iter * 100 + $k;
		my @lines = map { "SELECT idempotent_increment('c', $id, $_, 1);\n" } 1 .. 50000;
		my $run = start_script("crash_${iter}_$k", 'postgres', \@lines);
		$run->{id} = $id;
		push @clients, $run;
	}

	# a transaction that stays open across the crash, after a committed seq
	my $open_id = $iter * 100 + 99;
	$node->safe_psql('postgres', qq{SELECT idempotent_increment('c', $open_id, 1, 1)});
	my $open = open_session('postgres', qq{
		SELECT idempotent_increment('c', $open_id, 2, 1000);
		SELECT idempotent_increment('c', $open_id, 3, 1000)});
	# and one rolled back between two committed seqs, then drained
	$node->safe_psql('postgres', qq{
		BEGIN; SELECT idempotent_increment('c', $open_id, 5, 1000); ROLLBACK;
		SELECT idempotent_increment('c', $open_id, 4, 1);
		SELECT idempotent_increment('c', $open_id, 6, 1);
		SELECT fbf_counter_maintain('c');});

	usleep(int(500_000 + rand(1_500_000)));
	$node->stop('immediate');
	for my $cl (@clients) { eval { $cl->{h}->finish; }; }
	eval { $open->{h}->kill_kill; };
	$node->start;

	my ($answered, $bad) = (0, 0);
	for my $cl (@clients)
	{
		my $answers = answers_of($cl);
		my $n = scalar @$answers;
		$answered += $n;
		# everything sent, and the one that may have been in flight
		my $retries = $node->safe_psql('postgres', qq{
			SELECT string_agg(substr(idempotent_increment('c', $cl->{id}, g, 1)::text, 1, 1), ''
							  ORDER BY g)
			FROM generate_series(1, @{[$n + 1]}) g});
		my @retried = split //, $retries;
		for my $i (0 .. $n - 1)
		{
			if ($answers->[$i] ne 't')
			{
				$bad++;
				diag("client $cl->{id}: new operation @{[$i + 1]} answered $answers->[$i]");
			}
			if ($retried[$i] ne 'f')
			{
				$bad++;
				diag("client $cl->{id}: the retry of acknowledged @{[$i + 1]} applied")
				  if $bad <= 10;
			}
		}
		$total_ops += $n + 1;	# the unacknowledged one: applied once, either time
	}
	is($bad, 0, "crash $iter: all $answered acknowledged operations applied and dismissed on retry");
	is($node->safe_psql('postgres', qq{
			SELECT string_agg(idempotent_increment('c', $open_id, g, 1)::text, ' ' ORDER BY g)
			FROM generate_series(1, 7) g}),
		'false true true false true false true',
		"crash $iter: the open transaction's seqs (2, 3) and the rolled-back one (5) apply on "
		  . 'retry, the committed (1, 4, 6) are dismissed, a new one (7) applies');
	$total_ops += 7;
	is($node->safe_psql('postgres', q{SELECT fbf_counter_value('c')}), $total_ops,
		"crash $iter: the counter equals the distinct operations ($total_ops)");
}
$s = counter_stats($node, 'c');
cmp_ok($s->{exact_answers}, '>', 0, "exact answers after the crashes ($s->{exact_answers})");
cmp_ok($s->{streams}, '>=', 8, "the streams survived the crashes ($s->{streams})");

# ---------------------------------------------------------------------
# 3. Streams reset: a counter gains streams that know nothing of its past
# ---------------------------------------------------------------------
$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('r', retention => '10 min', expected_rate => 2000,
									target_fpp => 0.000001, max_streams => 0)});
is($node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE idempotent_increment('r', c, g, 1))
	FROM generate_series(1, 20) c, generate_series(1, 200) g}),
	4000, 'a counter without streams applies');
$node->safe_psql('postgres', q{SELECT fbf_counter_maintain('r')});
$s = counter_stats($node, 'r');
is("$s->{streams}/$s->{stream_capacity}", '0/0', 'no streams with max_streams = 0');

# an in-flight operation across the change, committed after it
my $bg = open_session('postgres', q{SELECT idempotent_increment('r', 21, 1, 1)});

$node->safe_psql('postgres', q{
	ALTER INDEX r_fbf SET (max_streams = 500);
	SELECT fbf_counter_maintain('r')});
$s = counter_stats($node, 'r');
cmp_ok($s->{stream_capacity}, '>=', 500,
	"streams after the refresh (capacity $s->{stream_capacity})");
is($s->{learning}, 't', 'streams_exact_from is ahead: the streams are learning');
end_session($bg, 'COMMIT');

my $before = counter_stats($node, 'r');
is($node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE idempotent_increment('r', c, g, 1))
	FROM generate_series(1, 21) c, generate_series(1, 200) g WHERE c < 21 OR g = 1}),
	0, 'every retry of an operation from before the streams is dismissed');
my $after = counter_stats($node, 'r');
cmp_ok($after->{filter_answers} - $before->{filter_answers}, '>', 0,
	'the filter answered them (' . ($after->{filter_answers} - $before->{filter_answers}) . ')');
is($node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE idempotent_increment('r', c, g, 1))
	FROM generate_series(1, 21) c, generate_series(201, 260) g}),
	21 * 60, 'new operations apply');
$node->safe_psql('postgres', q{SELECT fbf_counter_maintain('r')});
is($node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE idempotent_increment('r', c, g, 1))
	FROM generate_series(1, 21) c, generate_series(1, 260) g WHERE c < 21 OR g = 1 OR g > 200}),
	0, 'and every retry, old or new, is dismissed once the streams learned the new');
cmp_ok(counter_stats($node, 'r')->{streams}, '>', 0, 'the streams learned');

# a changed max_streams: a new run, reset again
$node->safe_psql('postgres', q{
	ALTER INDEX r_fbf SET (max_streams = 2000);
	SELECT fbf_counter_maintain('r')});
$s = counter_stats($node, 'r');
cmp_ok($s->{stream_capacity}, '>=', 2000,
	"a changed max_streams takes a new run ($s->{stream_capacity})");
is($s->{learning}, 't', 'which learns again');
is($node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE idempotent_increment('r', c, g, 1))
	FROM generate_series(1, 21) c, generate_series(1, 260) g WHERE c < 21 OR g = 1 OR g > 200}),
	0, 'every retry is still dismissed');
is($node->safe_psql('postgres', q{SELECT fbf_counter_value('r')}), 4000 + 1 + 21 * 60,
	'the counter is exact');

# a rebuild of the table carries the window (and what its streams know, or
# resets them): still every retry dismissed, new operations applied
$node->safe_psql('postgres', q{SELECT fbf_counter_maintain('r')});
$node->safe_psql('postgres', 'VACUUM FULL r');
is($node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE idempotent_increment('r', c, g, 1))
	FROM generate_series(1, 21) c, generate_series(1, 270) g WHERE c < 21 OR g = 1 OR g > 200}),
	21 * 10, 'after VACUUM FULL every retry is dismissed, new operations apply');
is($node->safe_psql('postgres', q{SELECT fbf_counter_value('r')}), 4000 + 1 + 21 * 70,
	'the counter is exact');

# the same through an upgrade from 1.2 (no streams in 1.2's SQL)
$node->safe_psql('postgres', 'CREATE DATABASE old');
$node->safe_psql('old', q{
	CREATE EXTENSION fbf VERSION '1.2';
	SET fbf.max_streams = 0;
	SELECT fbf_create_counter_table('u', retention => '10 min', expected_rate => 2000,
									target_fpp => 0.000001)});
is($node->safe_psql('old', q{
	SELECT count(*) FILTER (WHERE idempotent_increment('u', c, g, 1))
	FROM generate_series(1, 10) c, generate_series(1, 100) g}),
	1000, '1.2: operations apply');
$node->safe_psql('old', q{
	ALTER EXTENSION fbf UPDATE;
	SELECT fbf_counter_maintain('u')});
is($node->safe_psql('old', q{SELECT extversion FROM pg_extension WHERE extname = 'fbf'}),
	$node->safe_psql('old', q{SELECT default_version FROM pg_available_extensions WHERE name = 'fbf'}),
	'updated to the current version');
$s = counter_stats($node, 'u', 'old');
cmp_ok($s->{stream_capacity}, '>', 0,
	"after the update the counter has streams ($s->{stream_capacity})");
is($s->{learning}, 't', 'learning what its filter remembers');
is($node->safe_psql('old', q{
	SELECT count(*) FILTER (WHERE idempotent_increment('u', c, g, 1))
	FROM generate_series(1, 10) c, generate_series(1, 100) g}),
	0, 'after the update every retry is dismissed');
is($node->safe_psql('old', q{
	SELECT count(*) FILTER (WHERE idempotent_increment('u', c, g, 1))
	FROM generate_series(1, 10) c, generate_series(101, 150) g}),
	500, 'and new operations apply');
is($node->safe_psql('old', q{SELECT fbf_counter_value('u')}), 1500, 'the counter is exact');

# ---------------------------------------------------------------------
# 4. More streams than max_streams
# ---------------------------------------------------------------------
$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('cap', retention => '10 min', expected_rate => 5000,
									target_fpp => 0.000001, max_streams => 100)});
$s = counter_stats($node, 'cap');
cmp_ok($s->{stream_capacity}, '<', 1000, "a small cap ($s->{stream_capacity} streams)");
my $nstreams = 3000;
for my $round (1 .. 3)
{
	is($node->safe_psql('postgres', qq{
		SELECT count(*) FILTER (WHERE idempotent_increment('cap', c, $round, 1))
		FROM generate_series(1, $nstreams) c}),
		$nstreams, "round $round: every stream's new operation applies");
	$node->safe_psql('postgres', q{SELECT fbf_counter_maintain('cap')});
}
is($node->safe_psql('postgres', qq{
	SELECT count(*) FILTER (WHERE idempotent_increment('cap', c, g, 1))
	FROM generate_series(1, $nstreams) c, generate_series(1, 3) g}),
	0, 'every retry is dismissed, evicted streams\' too');
$s = counter_stats($node, 'cap');
cmp_ok($s->{stream_evictions}, '>', 0, "streams were evicted ($s->{stream_evictions})");
cmp_ok($s->{streams}, '<=', $s->{stream_capacity}, "no more streams than the cap ($s->{streams})");
cmp_ok($s->{filter_answers}, '>', 0, "the filter answered for the evicted ($s->{filter_answers})");
is($node->safe_psql('postgres', q{SELECT fbf_counter_value('cap')}), 3 * $nstreams,
	'the counter is exact');

$node->stop;
done_testing();
