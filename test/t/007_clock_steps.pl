# Wall-clock steps: a counter's filter measures retention in real elapsed
# time (CLOCK_BOOTTIME), never by the wall clock.  A forward step must not
# make a retry of an operation acknowledged less than a retention ago apply
# again; a backward step must not stop refreshes, forgetting on schedule or
# AIMD; a step while the server is stopped changes nothing; a standby
# promoted with its wall clock an hour off keeps dismissing retries and
# keeps refreshing.  Each step a counter detects is logged once.
#
# How the server's wall clock is stepped: a small preload library, built
# here, adds to CLOCK_REALTIME (clock_gettime, gettimeofday, time) an offset
# in seconds that it rereads from a file of this test's on every call, and
# leaves every other clock (CLOCK_BOOTTIME, CLOCK_MONOTONIC) alone, as an
# NTP step would.  It is preloaded into the server only (the environment
# of pg_ctl start), never into psql.  libfaketime cannot do this for
# PostgreSQL 15: its select() wrapper marks the postmaster "do not fake"
# while it waits, and the postmaster starts background workers (the fbf
# launcher and passes among them) from signal handlers that run inside
# that select(), so they inherit the mark and see the real wall clock while
# backends see the stepped one.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use FbfTest;

my $tmp = PostgreSQL::Test::Utils::tempdir;

# Build the clock-stepping library
my $shim = "$tmp/clockstep.so";
{
	open my $fh, '>', "$tmp/clockstep.c" or die "could not write $tmp/clockstep.c: $!";
	print $fh <<'EOC';
/* CLOCK_REALTIME plus the offset (whole seconds) in $FBF_TEST_CLOCK_FILE */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int	(*real_clock_gettime) (clockid_t, struct timespec *);

__attribute__((constructor)) static void
clockstep_init(void)
{
	real_clock_gettime = (int (*) (clockid_t, struct timespec *))
		dlsym(RTLD_NEXT, "clock_gettime");
}

/* reread on every call (async-signal-safe calls only) */
static long long
offset_seconds(void)
{
	const char *file = getenv("FBF_TEST_CLOCK_FILE");
	char		buf[32];
	ssize_t		n;
	int			fd;

	if (file == NULL || (fd = open(file, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return strtoll(buf, NULL, 10);
}

static void
stepped_now(struct timespec *ts)
{
	real_clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += offset_seconds();
}

int
clock_gettime(clockid_t clk, struct timespec *ts)
{
	if (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)
	{
		stepped_now(ts);
		return 0;
	}
	return real_clock_gettime(clk, ts);
}

int
gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
	struct timespec ts;

	stepped_now(&ts);
	if (tv != NULL)
	{
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	return 0;
}

time_t
time(time_t *t)
{
	struct timespec ts;

	stepped_now(&ts);
	if (t != NULL)
		*t = ts.tv_sec;
	return ts.tv_sec;
}
EOC
	close $fh or die "could not write $tmp/clockstep.c: $!";
	my $cc = $ENV{CC} // 'cc';
	system_or_bail($cc, '-shared', '-fPIC', '-O2', '-o', $shim,
		"$tmp/clockstep.c", '-ldl');
}

# Set a node's wall-clock offset, in seconds: write its clock file
# (atomically, as the library rereads it on every clock call).
sub set_clock
{
	my ($file, $seconds) = @_;
	open my $fh, '>', "$file.new" or die "could not write $file.new: $!";
	print $fh "$seconds\n";
	close $fh or die "could not write $file.new: $!";
	rename "$file.new", $file or die "could not rename to $file: $!";
	note "wall clock of " . ($file =~ s{.*/}{}r) . " set to $seconds s off";
	return;
}

# Start a node with the library preloaded, reading its offset from $file.
sub start_stepped
{
	my ($node, $file) = @_;
	local $ENV{LD_PRELOAD} = $shim;
	local $ENV{FBF_TEST_CLOCK_FILE} = $file;
	$node->start;
	return;
}

sub Max { return $_[0] > $_[1] ? $_[0] : $_[1]; }

# Poll a boolean query every 100 ms until it returns true or $timeout
# seconds have passed (shorter than poll_query_until's default, so that a
# failure does not eat the time budget).  Returns whether it came true.
sub poll_for
{
	my ($node, $query, $timeout) = @_;
	my $deadline = time + $timeout;
	while (1)
	{
		return 1 if $node->safe_psql('postgres', $query) eq 't';
		return 0 if time > $deadline;
		usleep(100_000);
	}
}

# The counter the helpers below work on
my $counter = 'c';

# one column of the counter's row of fbf_counter_stats
sub stat_of
{
	my ($node, $column) = @_;
	return $node->safe_psql('postgres',
		"SELECT $column FROM fbf_counter_stats WHERE counter = '$counter'::regclass");
}

# the number of refreshes so far (the ring's epoch)
sub epoch_of
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT epoch FROM fbf_info(fbf_snapshot('$counter'))");
}

# Wait until the worker has drained every pending operation and then
# refreshed the ring at least once, so that the operations acknowledged so
# far sit in filters older than the future one (those a wall-clock step
# would wrongly drop).  Returns whether that happened within $timeout s.
sub wait_for_past
{
	my ($node, $timeout) = @_;
	my $deadline = time + $timeout;
	poll_for($node,
		"SELECT pending = 0 FROM fbf_counter_stats WHERE counter = '$counter'::regclass",
		$timeout) or return 0;
	my $epoch = epoch_of($node);
	return poll_for($node,
		"SELECT epoch > $epoch FROM fbf_info(fbf_snapshot('$counter'))",
		Max($deadline - time, 1));
}

# Wait until the counter refreshes: last_refresh moves by more than half a
# period from $before (either way: the test does not assume how a
# wall-clock time is derived after a step) and the epoch passes $epoch.
sub wait_for_refresh
{
	my ($node, $before, $epoch, $period, $timeout) = @_;
	my $moved = poll_for($node, qq{
		SELECT abs(extract(epoch FROM last_refresh - '$before'::timestamptz)) > $period / 2
		FROM fbf_counter_stats WHERE counter = '$counter'::regclass}, $timeout);
	my $rotated = poll_for($node,
		"SELECT epoch > $epoch FROM fbf_info(fbf_snapshot('$counter'))", $timeout);
	return ($moved, $rotated);
}

# Operations of `client`, seq $from .. $to: how many applied (as new)
sub apply_ops
{
	my ($node, $client, $from, $to) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT count(*) FROM generate_series($from, $to) g
		WHERE idempotent_increment('$counter', $client, g, 1)});
}

# Retries of the same: how many were dismissed
sub retry_ops
{
	my ($node, $client, $from, $to) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT count(*) FILTER (WHERE NOT idempotent_increment('$counter', $client, g, 1))
		FROM generate_series($from, $to) g});
}

sub value_of
{
	my ($node) = @_;
	return $node->safe_psql('postgres', "SELECT fbf_counter_value('$counter', '')");
}

sub create_counter
{
	my ($node, $name) = @_;
	$node->safe_psql('postgres', qq{
		SELECT fbf_create_counter_table('$name', retention => '20 s', target_fpp => 0.001,
										expected_rate => 200)});
	return;
}

# The steps (in seconds) that the log reports for counter "c"
my $step_line = qr/fbf: wall clock step of ([+-]\d+\.\d+) s detected by counter "c"/;

# how many logged steps of counter "c" are within 60 s of $seconds
sub steps_near
{
	my ($node, $seconds) = @_;
	my @steps = (slurp_file($node->logfile) =~ /$step_line/g);
	return scalar grep { abs($_ - $seconds) < 60 } @steps;
}

my $naptime = 0.2;
my $conf = "fbf.worker_enabled = on\nfbf.naptime = @{[$naptime * 1000]}ms\n";

#
# A node whose wall clock we step, with the worker on
#
my $node = fbf_node('clock', $conf);
my $node_clock = "$tmp/clock.offset";
set_clock($node_clock, 0);
$node->stop;
start_stepped($node, $node_clock);

create_counter($node, 'c');
my ($period, $retention) = split /\|/, $node->safe_psql('postgres', q{
	SELECT extract(epoch FROM period), extract(epoch FROM retention)
	FROM fbf_counter_stats WHERE counter = 'c'::regclass});
note "counter c: "
  . stat_of($node, 'filters')
  . " filters, period $period s, retention $retention s";
# how long a refresh may take to show up: two periods and the worker's lag
my $refresh_wait = 2 * $period + 5;

#
# 1. A forward step of one hour on a running server
#
my $t_ack = time;
is(apply_ops($node, 1, 1, 50), '50', '50 new operations apply');
my $value = value_of($node);
is($value, '50', 'the counter counts them');

# let them age into the ring's past, then step
usleep(2_000_000);
ok(wait_for_past($node, $refresh_wait),
	'the operations are drained and the ring refreshed since (before the step)');
set_clock($node_clock, 3600);

# give the worker a few passes under the new clock
my $deadline = time + 5;
usleep(100_000) while steps_near($node, 3600) == 0 && time < $deadline;
usleep(1_500_000);

my $age = sprintf('%.1f', time - $t_ack);
is(retry_ops($node, 1, 1, 50), '50',
	"after a +1 h step, every retry of an operation acknowledged $age s ago (real time) is dismissed");
is(value_of($node), $value, 'the counter counts nothing twice after the +1 h step');
is(steps_near($node, 3600), 1, 'the +1 h step is logged exactly once');
like(slurp_file($node->logfile), qr/LOG:  $step_line/,
	'as a LOG message giving the step in seconds');

#
# 2. A backward step of two hours (to one hour behind real time)
#
# let the worker's passes run a while after the last increment, so that
# its schedule holds times of the +1 h clock only
usleep(1_500_000);
set_clock($node_clock, -3600);
usleep(500_000);

# the worker alone, with no client incrementing (an increment's backend
# would tell the launcher its database is due): the launcher's schedule is
# in wall-clock time, and must not wait two hours for the clock to catch up
{
	my ($w_moved, $w_rotated) = wait_for_refresh($node, stat_of($node, 'last_refresh'),
		epoch_of($node), $period, $refresh_wait);
	ok($w_rotated, 'after a backward step, the worker alone keeps refreshing the ring');
}

my $refresh0 = stat_of($node, 'last_refresh');
my $epoch0 = epoch_of($node);

# an operation acknowledged right after the step
my $t_x = time;
is(apply_ops($node, 2, 1, 1), '1', 'an operation applies right after the backward step');
my $t_x_done = time;

my ($moved, $rotated) = wait_for_refresh($node, $refresh0, $epoch0, $period, $refresh_wait);
ok($moved, 'after a backward step, last_refresh keeps advancing');
ok($rotated, 'and the ring keeps refreshing');

# a load of about 20 new operations a second for five seconds: the
# estimated false-positive rate stays under the target
my $target = stat_of($node, 'target_fpp');
my $over = 0;
my @fpps;
for my $round (1 .. 10)
{
	apply_ops($node, 3, 10 * $round - 9, 10 * $round);
	usleep(500_000);
	my $fpp = stat_of($node, 'estimated_fpp');
	push @fpps, sprintf('%.2g', $fpp);
	$over++ if $fpp > $target;
}
is($over, 0, "after a backward step, estimated_fpp stays <= target_fpp under load (@fpps)");

# The operation is remembered for a retention of real time, and forgotten
# on schedule: by retention + 2 periods, plus the worker's lag, which adds
# up over the ring (each refresh comes up to a naptime or so after it is
# due, and the filter holding the operation is recycled only once every
# other filter has been refreshed), plus a margin.  Forgotten means what
# a retry would be told: by the filter and by the operation's stream,
# which remembers it up to a period longer than the filter may (so the
# filter alone is not asked); the retry is rolled back, recording
# nothing.
my $retry_x = q{BEGIN; SELECT idempotent_increment('c', 2, 1, 1); ROLLBACK;};
my ($period_now, $filters_now) = split /\|/,
  stat_of($node, 'extract(epoch FROM period), filters');
my $forget_by = $t_x_done + $retention + 2 * Max($period, $period_now)
  + Max($filters_now, 1) * 2 * $naptime + 2;
my $forgotten_at;
while (time < $forget_by)
{
	if ($node->safe_psql('postgres', $retry_x) eq 't')
	{
		# forgotten before this moment
		$forgotten_at = time;
		note sprintf('the operation was forgotten %.1f s after it was applied (deadline %.1f s)',
			$forgotten_at - $t_x, $forget_by - $t_x);
		last;
	}
	usleep(200_000);
}
if (defined $forgotten_at)
{
	cmp_ok($forgotten_at - $t_x, '>=', $retention,
		'the operation is remembered for at least the retention (real time)');
}
else
{
	pass('the operation is remembered for at least the retention (real time)');
	diag(sprintf 'still remembered %.1f s after it was applied', time - $t_x);
}
is($node->safe_psql('postgres', q{SELECT idempotent_increment('c', 2, 1, 1)}), 't',
	sprintf('after a backward step, a retry %.1f s (real) after the operation applies again',
		time - $t_x));
is(steps_near($node, -7200), 1, 'the backward step is logged exactly once');

#
# 3. A step while the server is stopped, on a new counter in a freshly
#    started server (so that its ring refreshes under the current clock
#    whatever the steps above did to c or to the worker)
#
$node->stop;
start_stepped($node, $node_clock);
$counter = 'c3';
create_counter($node, 'c3');
$t_ack = time;
is(apply_ops($node, 4, 1, 50), '50', 'new operations apply before the stop');
ok(wait_for_past($node, $refresh_wait),
	'they are drained and the ring refreshed since (before the stop)');
$value = value_of($node);
$node->stop('fast');
set_clock($node_clock, 3600);
start_stepped($node, $node_clock);
$age = sprintf('%.1f', time - $t_ack);
is(retry_ops($node, 4, 1, 50), '50',
	"after a +2 h step while stopped, every retry of an operation acknowledged $age s ago is dismissed");
is(value_of($node), $value, 'the counter counts nothing twice across the restart');
$node->stop;

#
# 4. Standbys promoted with their wall clock an hour ahead and behind
#
$counter = 'c';
my $primary = fbf_node('primary', $conf, allows_streaming => 1);
create_counter($primary, 'c');
$primary->backup('base');

my %standbys;
for my $skew (3600, -3600)
{
	# started below with a clock of its own (start_stepped), not by fbf_standby
	my $standby = fbf_standby($primary, $skew > 0 ? 'ahead' : 'behind',
		backup => 'base', start => 0);
	my $file = "$tmp/" . $standby->name . '.offset';
	set_clock($file, $skew);
	start_stepped($standby, $file);
	$standbys{$skew} = $standby;
}

$t_ack = time;
is(apply_ops($primary, 5, 1, 100), '100', 'operations apply on the primary');
ok(wait_for_past($primary, $refresh_wait),
	'they are drained and the primary\'s ring refreshed since');
$primary->wait_for_catchup($_, 'replay', $primary->lsn('insert')) for values %standbys;

# promote both, then retry on both (within a retention of the operations)
my (%refresh1, %epoch1);
for my $skew (3600, -3600)
{
	my $standby = $standbys{$skew};
	$standby->promote;
	$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
	  or die 'standby ' . $standby->name . ' did not promote';
	$refresh1{$skew} = stat_of($standby, 'last_refresh');
	$epoch1{$skew} = epoch_of($standby);
}
for my $skew (3600, -3600)
{
	my $standby = $standbys{$skew};
	my $name = sprintf('%+d h', $skew / 3600);
	$age = sprintf('%.1f', time - $t_ack);
	is(retry_ops($standby, 5, 1, 100), '100',
		"a standby promoted with its clock $name off dismisses every retry of operations committed on the primary $age s ago");
	is(apply_ops($standby, 5, 101, 110), '10', "new operations apply on it ($name)");
	is(value_of($standby), '110', "its counter is exact ($name)");
}
for my $skew (3600, -3600)
{
	my $standby = $standbys{$skew};
	my $name = sprintf('%+d h', $skew / 3600);
	my ($moved, $rotated) = wait_for_refresh($standby, $refresh1{$skew},
		$epoch1{$skew}, $period, $refresh_wait);
	ok($moved, "its last_refresh advances after promotion ($name)");
	ok($rotated, "and its ring keeps refreshing ($name)");
}

$_->stop for values %standbys;
$primary->stop;
done_testing();
