# Large batches stop soon after a cancel, a statement timeout or a
# terminate, and leave nothing applied; VACUUM of a cuckoo index stops
# inside one key's posting lists (the last section).
#
# Batches of idempotent_increment and fbf_claim, fbf_add with a large
# array, and passes over one large fbf value (the core's transposes and
# unions, through core/fbf_interrupt.h) loop over input of the caller's
# size; each loop must check for interrupts, or a statement_timeout of 1 s
# lets a batch run to its end (tens of seconds for the sizes here on a slow
# machine; the sizes are such that a machine several times as fast as this
# 2-core one still runs each batch longer than the premise below needs).
# The inputs are built first, in a table, so that the timeout falls inside the loop and
# not in the building of the arrays.  Every bound below is a generous
# margin over the 0.5 s the loops take to notice, so that the test holds on
# a loaded machine; each batch takes longer than the timeout and its bound
# together, which the test checks first (else a batch that ignored
# interrupts would pass by ending in time).  The windows take every
# operation (at_capacity = 'dismiss': no share of their capacity refuses a
# batch first) and have room in flight for all of them (expected_rate:
# chains enough); the counter records each operation's delta identity too
# (track_mismatch), which makes its batch about twice as slow per
# operation as without it (1.5 against 0.8 microseconds for a million on
# this 2-core machine with PostgreSQL 15, test/bench/batch_scaling.sh;
# flat as the batch grows: each delta identity is recorded after the
# operations, in its own canonical order, a chain at a time).  The claims are (client_id, seq)
# pairs of a thousand clients, each asked of its stream too: plain ids
# ran 4 million in 2.6 s with PostgreSQL 18, too few for the premise.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);
use FbfTest;

my $nops = 3_000_000;
my $nclaims = 4_000_000;
my $nadd = 6_000_000;
my $bound = 3.0;    # seconds from the timeout (1 s) or the signal to the error
my $min_bound = 1.5;	# a batch's own bound, no less (see the premise)

my $node = fbf_node('main', "fbf.worker_enabled = off\n");

$node->safe_psql('postgres', qq{
	SELECT fbf_create_counter_table('c', expected_rate => 16000);
	ALTER INDEX c_fbf SET (at_capacity = 'dismiss', track_mismatch = on);
	SELECT fbf_create_dedup('d', expected_rate => 20000);
	ALTER INDEX d_fbf SET (at_capacity = 'dismiss');
	CREATE UNLOGGED TABLE batch (ids bigint[], ones bigint[], clients bigint[],
								 claims bigint[], adds bigint[]);
	ALTER TABLE batch ALTER ids SET STORAGE EXTERNAL,
		ALTER ones SET STORAGE EXTERNAL, ALTER clients SET STORAGE EXTERNAL,
		ALTER claims SET STORAGE EXTERNAL, ALTER adds SET STORAGE EXTERNAL;
	INSERT INTO batch
		SELECT array(SELECT g FROM generate_series(1, ${nops}::bigint) g),
			   array_fill(1::bigint, ARRAY[$nops]),
			   array(SELECT g % 1000 FROM generate_series(1, ${nclaims}::bigint) g),
			   array(SELECT g FROM generate_series(1, ${nclaims}::bigint) g),
			   array(SELECT g FROM generate_series(1, ${nadd}::bigint) g);
});

my $increment = q{SELECT cardinality(idempotent_increment('c', 'k', ids, ids, ones)) FROM batch};
my $claim = q{SELECT cardinality(fbf_claim('d', clients, claims)) FROM batch};

# the premise: run to its end (and rolled back), each batch takes longer
# than the timeout and its bound together.  A batch's bound is $bound, or
# four fifths of what the batch takes beyond the timeout where that is
# less (this 2-core machine runs the 4 million claims in 4.9 s, the 3
# million increments in 5.6 s, with PostgreSQL 18), so that a batch
# that ignored interrupts would always end after it; and never less than
# $min_bound, three times what the loops take to notice.
my %bound_of;
for my $case ([ 'batch of increments', $increment ], [ 'batch of claims', $claim ])
{
	my ($name, $sql) = @$case;
	my $start = time;
	$node->safe_psql('postgres', "BEGIN; $sql; ROLLBACK;");
	my $secs = time - $start;
	$bound_of{$name} = 0.8 * ($secs - 1) < $bound ? 0.8 * ($secs - 1) : $bound;
	note(sprintf('%s: %.2f s to its end; its bound %.2f s', $name, $secs,
		$bound_of{$name}));
	cmp_ok($bound_of{$name}, '>=', $min_bound,
		"$name: runs longer than the timeout and the bound");
}
my $add = q{SELECT fbf_estimated_fpp(fbf_add(fbf_create(400000000, 32, 1), adds)) FROM batch};
# passes over one large value (240 MB): unions and the binary form, each
# seconds long in the core's loops (fbf_union_into, the transposes)
my $passes = q{SELECT length(fbf_send(fbf_union(fbf_union(fbf_union(fbf_union(v, v), v), v), v)))
	FROM (SELECT fbf_create(134217728, 3, 13) AS v) s};
# the add and the passes have steps between checks (a copy or a zeroing
# of 240 MB, a filter's allocation) that slow down with the machine: their
# bound is also half of what they take to their end, where that is more,
# which a run that ignored interrupts still exceeds (a loaded machine took
# 6 s to stop either, 3 s over $bound)
for my $case ([ 'fbf_add of an array', $add ], [ 'passes over a large value', $passes ])
{
	my ($name, $sql) = @$case;
	my $start = time;
	$node->safe_psql('postgres', $sql);
	my $secs = time - $start;
	my $b = 0.8 * ($secs - 1) < $bound ? 0.8 * ($secs - 1) : $bound;
	$bound_of{$name} = 0.5 * ($secs - 1) > $b ? 0.5 * ($secs - 1) : $b;
	note(sprintf('%s: %.2f s to its end; its bound %.2f s', $name, $secs, $bound_of{$name}));
	cmp_ok($bound_of{$name}, '>=', $min_bound,
		"$name: runs longer than the timeout and the bound");
}

# run $sql under a 1 s statement timeout: its error and the seconds it took
sub timed_out
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	my $start = time;
	$node->psql('postgres', "SET statement_timeout = '1s';\n$sql",
		stdout => \$out, stderr => \$err);
	return ($err, time - $start);
}

for my $case ([ 'batch of increments', $increment ],
			  [ 'batch of claims', $claim ],
			  [ 'fbf_add of an array', $add ],
			  [ 'passes over a large value', $passes ])
{
	my ($name, $sql) = @$case;
	my ($err, $secs) = timed_out($sql);
	like($err, qr/canceling statement due to statement timeout/,
		"$name: cancelled by statement_timeout");
	note(sprintf('%s: error after %.2f s', $name, $secs));
	cmp_ok($secs, '<', 1 + ($bound_of{$name} // $bound),
		"$name: stopped soon after the timeout");
}

# nothing of the cancelled batches applied: their first operations apply now
is($node->safe_psql('postgres', q{
	SELECT fbf_counter_value('c', 'k'),
		   idempotent_increment('c', 'k', 1::bigint, 1, 1),
		   fbf_claim('d', 1::bigint, 1::bigint);
	SELECT fbf_counter_value('c', 'k')}),
	"0|t|t\n1", 'a cancelled batch applies nothing');

# a batch in another session, stopped by pg_cancel_backend or
# pg_terminate_backend once it is well into its loop
sub signalled
{
	my ($sql, $signal) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1', '-c',
		  "SET application_name = 'batch'; $sql",
		  '-d', $node->connstr('postgres') ],
		'>', \$out, '2>', \$err);
	$node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity
		WHERE application_name = 'batch' AND state = 'active'})
	  or die 'the batch did not start';
	# past the reading and sorting of its arrays (well under a second)
	usleep(800_000);
	my $start = time;
	$node->safe_psql('postgres', qq{
		SELECT $signal(pid) FROM pg_stat_activity
		WHERE application_name = 'batch'});
	$h->finish;
	return ($err, time - $start);
}

for my $case ([ 'batch of increments', $increment ], [ 'batch of claims', $claim ])
{
	my ($name, $sql) = @$case;
	my ($err, $secs) = signalled($sql, 'pg_cancel_backend');
	like($err, qr/canceling statement due to user request/,
		"$name: cancelled by pg_cancel_backend");
	note(sprintf('%s: error %.2f s after the cancel', $name, $secs));
	cmp_ok($secs, '<', $bound_of{$name}, "$name: stopped soon after the cancel");
}

my ($err, $secs) = signalled($increment, 'pg_terminate_backend');
like($err, qr/terminating connection due to administrator command/,
	'batch of increments: terminated by pg_terminate_backend');
note(sprintf('batch of increments: error %.2f s after the terminate', $secs));
cmp_ok($secs, '<', $bound_of{'batch of increments'},
	'batch of increments: stopped soon after the terminate');

is($node->safe_psql('postgres', q{
	SELECT fbf_counter_value('c', 'k'),
		   idempotent_increment('c', 'k', 1::bigint, 1, 1),
		   idempotent_increment('c', 'k', 2::bigint, 2, 1),
		   fbf_claim('d', 2::bigint, 2::bigint);
	SELECT fbf_counter_value('c', 'k')}),
	"1|f|t|t\n2", 'nothing of the signalled batches applied');

# a batch of claims over the limit (4,194,304 ids) is refused (54000)
# from its array's dimensions, before its ids are read
my ($cap_out, $cap_err) = ('', '');
$node->psql('postgres', q{
	SELECT fbf_claim('d', array_fill(1::bigint, ARRAY[4194305]))},
	stdout => \$cap_out, stderr => \$cap_err);
like($cap_err, qr/ids of fbf_claim has 4194305 elements, more than the 4194304 a batch may have/,
	'a batch of claims over the limit is refused');

######################################################################
# VACUUM of a cuckoo index stops inside one key's posting lists
######################################################################
# All 300,000 rows have one key: one bucket page's lists hold every entry,
# and VACUUM walks and tidies them (a tenth of a second or so) with that
# bucket page locked, which holds interrupts off.  A try deletes 15,000 of
# the rows and prunes the heap (INDEX_CLEANUP OFF), so that the VACUUM
# below goes to the index at once; another session watches it and cancels
# it the moment it begins its index, where the walk begins too: the walk
# must stop between two pages of the lists, some of the dead entries gone
# and not all of them.  (A walk that let the cancel wait would run to the
# end of the lists, and leave none.)  A cancel that comes after the walk
# (the watcher is slow on a loaded machine, and a delay point does not
# sleep while the bucket page is locked, so the walk cannot be slowed) or
# before it proves nothing either way: the test tries again, up to 12
# times, with the rows left (5 tries all came too late in a run on a
# loaded 2-core machine; the walk is over all the key's entries, so it
# takes as long with fewer of them dead).
$node->safe_psql('postgres', q{
	CREATE TABLE one_key (g int, k int) WITH (autovacuum_enabled = off);
	INSERT INTO one_key SELECT g, 7 FROM generate_series(1, 300000) g;
	CREATE INDEX one_key_k ON one_key USING cuckoo (k)});
my $dead_at = sub {
	(split /\|/, $node->safe_psql('postgres',
		q{SELECT entries, heap_tuples, dead_entries FROM cuckoo_index_verify('one_key_k')}))[2];
};
my ($inside, $cancelled) = (0, 0);
for my $try (1 .. 12)
{
	$node->safe_psql('postgres', qq{
		DELETE FROM one_key WHERE g % 20 = $try;
		VACUUM (INDEX_CLEANUP OFF) one_key});
	my $before = $dead_at->();
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-At', '-c', "SET application_name = 'vacuum_one'",
		  '-c', 'VACUUM one_key', '-d', $node->connstr('postgres') ],
		'>', \$out, '2>', \$err);
	$node->safe_psql('postgres', q{
		DO $$
		BEGIN
			FOR i IN 1 .. 60000 LOOP
				PERFORM pg_stat_clear_snapshot();
				IF EXISTS (SELECT FROM pg_stat_progress_vacuum p JOIN pg_stat_activity a USING (pid)
						   WHERE a.application_name = 'vacuum_one'
							 AND p.phase = 'vacuuming indexes') THEN
					PERFORM pg_cancel_backend(pid) FROM pg_stat_activity
					 WHERE application_name = 'vacuum_one';
					RETURN;
				END IF;
				PERFORM pg_sleep(0.001);
			END LOOP;
		END $$});
	$h->finish;
	my $dead = $dead_at->();
	$cancelled = $err =~ /canceling statement due to user request/;
	note("one key, try $try: $dead of $before dead entries left"
		  . ($cancelled ? ', cancelled' : ', not cancelled'));
	if ($dead > 0 && $dead < $before)
	{
		$inside = 1;
		last;
	}
}
ok($inside && $cancelled,
	'one key: a cancelled VACUUM stopped inside the lists (some of their dead entries left, not all), and the index verifies');
$node->safe_psql('postgres', 'VACUUM one_key');
is($dead_at->(), 0, 'one key: the next VACUUM removes the rest, and the index verifies');
my $live = $node->safe_psql('postgres', 'SELECT count(*) FROM one_key');
is($node->safe_psql('postgres', q{
	SET enable_seqscan = off; SET enable_bitmapscan = off;
	SELECT count(*) FROM one_key WHERE k = 7}),
	$live, "one key: the index finds every live row ($live)");

$node->stop;
done_testing();
