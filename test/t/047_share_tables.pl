# The server's share tables (512, one per counter charging at once) cannot
# all be held by one role's transactions so that everyone else's counters
# are refused: a counter that can have none takes its operations unshared
# while its filter is not at its cap.
#
# A victim (role t2) increments its own key of a shared counter app.c in
# database postgres, with the default at_capacity = 'refuse'; role mallory
# works in database other.
#
#   1. mallory, with nothing but TEMP there, makes 512 temporary counters
#      and holds an operation in flight on each in an open transaction:
#      temporary counters take no share table, the victim is admitted.
#   2. mallory, owner of a schema there, makes 512 counters, takes an
#      operation on each and prepares the transaction, holding every
#      table (the victim's counter's too, idle meanwhile): within
#      FBF_SHARE_STALE_SECS (10 s) the victim's counter has none and is
#      admitted unshared (before, refused: "no share ... can be counted
#      now", SQLSTATE 53400); after it, the tables of a transaction begun
#      that long ago are given to counters that need one, prepared or
#      not, and after ROLLBACK PREPARED too.  A counter whose filter is
#      at its cap (a 64kB fbf.max_filter_size; its streams answer every
#      operation exactly, so the filter refuses none itself) takes a new
#      operation with a table of its own, and refuses it without one.
#      A counter of one pending chain filled by one transaction's batches
#      refuses them at the role's share of the chain with a table, and
#      without one where they reach the chain's reserve (its last fifth);
#      its next operation is admitted.  (The tables' age is that of the
#      transaction's start: the 10 s run from mallory's BEGIN.)
#   3. mallory, in 8 sessions, keeps 640 small counters of its own
#      charging (each session 80 of them, in transactions of 0.3 s), so
#      that tables pass from counter to counter while other sessions
#      charge them: no backend crashes (a table given to another counter
#      was cleared whole, the pointer to its lock too, while a backend
#      that had found it before read which lock to take: signal 11 within
#      two seconds), and the victim's new operations, one every 0.2 s
#      meanwhile, are all admitted (before, 27% to 49% were refused for
#      want of a table), and so once the sessions are done.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

use FbfTest;

my $node = fbf_node('share_tables', q{
max_prepared_transactions = 10
});

$node->safe_psql('postgres', q{
	CREATE ROLE t2 LOGIN;
	CREATE ROLE mallory LOGIN;
	CREATE SCHEMA app;
	GRANT USAGE ON SCHEMA app TO t2;
	SELECT fbf_create_counter_table('app.c');
	ALTER TABLE app.c ENABLE ROW LEVEL SECURITY;
	CREATE POLICY own ON app.c USING (key = current_user) WITH CHECK (key = current_user);
	GRANT SELECT, INSERT, UPDATE ON app.c TO t2;
	CREATE DATABASE other;
});
$node->safe_psql('other', q{
	CREATE EXTENSION fbf;
	CREATE SCHEMA m AUTHORIZATION mallory;
});

# the victim's next new operation: 'applied', or the error's SQLSTATE and message
my $victim_seq = 0;
sub victim
{
	$victim_seq++;
	my ($ret, $out, $err) = $node->psql('postgres',
		"SELECT idempotent_increment('app.c', 't2', 4242, $victim_seq, 1)",
		extra_params => [ '-U', 't2', '-v', 'VERBOSITY=verbose' ]);
	return $ret == 0 ? ($out eq 't' ? 'applied' : "answered $out") : $err;
}

is(victim(), 'applied', 'the victim is admitted before anything');

# mallory in a background psql, fed statements one by one
my %m = (in => '', out => '', err => '');
$m{h} = IPC::Run::start(
	[ 'psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1', '-U', 'mallory', '-d', $node->connstr('other') ],
	'<', \$m{in}, '>', \$m{out}, '2>', \$m{err}, IPC::Run::timeout(600));
sub mallory
{
	my ($sql, $want) = @_;
	$m{in} .= "$sql\n";
	$m{h}->pump until $m{out} =~ $want || $m{err} ne '';
	diag("mallory: $m{err}") if $m{err} ne '';
	return $m{err} eq '';
}

# SQL that makes 512 counters named $prefix || i and opens a transaction
# that holds an operation in flight on each
sub hold_512
{
	my ($prefix) = @_;
	return qq{
	DO \$\$ BEGIN
		FOR i IN 1 .. 512 LOOP
			PERFORM fbf_create_counter_table('$prefix' || i);
		END LOOP;
	END \$\$;
	BEGIN;
	DO \$\$ BEGIN
		FOR i IN 1 .. 512 LOOP
			PERFORM idempotent_increment(('$prefix' || i)::regclass, 'k', 1, 1, 1);
		END LOOP;
	END \$\$;
};
}

# ---------------------------------------------------------------------
# 1. temporary counters take no share table
# ---------------------------------------------------------------------
ok(mallory(hold_512('pg_temp.t') . "SELECT 'held temporary';", qr/held temporary/),
	'mallory holds an operation in flight on each of 512 temporary counters');
is(victim(), 'applied', 'temporary counters: the victim is admitted');
ok(mallory("ROLLBACK;\nSELECT 'rolled back';", qr/rolled back/), 'mallory rolls back');

# ---------------------------------------------------------------------
# 2. a prepared transaction on 512 counters
# ---------------------------------------------------------------------
# a counter at its cap: filled with the cap at 64kB, taking everything
# (at_capacity = 'dismiss') until capped, then refusing again
$node->safe_psql('postgres', q{
	SET fbf.max_filter_size = '64kB';
	SELECT fbf_create_counter_table('capme', retention => '10 min', nbits => 1024, nhashes => 3, npast => 1);
	ALTER INDEX capme_fbf SET (at_capacity = 'dismiss');
	SELECT count(*) FROM generate_series(1, 3000) g WHERE idempotent_increment('capme', 1, g, 1);
	SELECT count(fbf_counter_maintain('capme')) FROM generate_series(1, 3);
	ALTER INDEX capme_fbf SET (at_capacity = 'refuse');
});
is($node->safe_psql('postgres', q{SELECT capped FROM fbf_counter_stats WHERE counter = 'capme'::regclass}),
	't', 'a counter at its cap');
# a new client's operation, 'applied' or the error
my $capme_client = 100;
sub capme
{
	$capme_client++;
	my ($ret, $out, $err) = $node->psql('postgres',
		"SELECT idempotent_increment('capme', $capme_client, 1, 1)",
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	return $ret == 0 ? ($out eq 't' ? 'applied' : "answered $out") : $err;
}
is(capme(), 'applied', 'with a share table, the counter at its cap takes a new operation');

# a counter of one pending chain (the explicit shape of 1,024 bits makes
# one partition, one chain of up to 128 pages, the last fifth its
# reserve), filled with operations in flight by batches of 5,000 in one
# transaction until one is refused (each operation takes two entries: its
# own and its stream's annex): the number admitted and the error
$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('resv', retention => '10 min', nbits => 1024, nhashes => 3, npast => 1);
});
sub fill_resv
{
	my ($ret, $out, $err) = $node->psql('postgres', q{
	BEGIN;
	DO $$ BEGIN
		FOR b IN 0 .. 19 LOOP
			PERFORM idempotent_increment('resv', 'k', array_fill(7::bigint, ARRAY[5000]),
				ARRAY(SELECT b * 5000 + g FROM generate_series(1, 5000) g)::bigint[],
				array_fill(1::bigint, ARRAY[5000]));
			RAISE NOTICE 'admitted %', (b + 1) * 5000;
		END LOOP;
	END $$;
	ROLLBACK;
}, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	my @admitted = $err =~ /admitted (\d+)/g;
	return ($admitted[-1] // 0, $err);
}
my ($resv_admitted, $resv_err) = fill_resv();
like($resv_err, qr/ERROR:  53400: role "[^"]+" holds its share of the operations in flight on counter filter "resv_fbf"/,
	'with a share table, the batches are refused at their share of the chain (53400)');
cmp_ok($resv_admitted, '>=', 10000, "after $resv_admitted operations in flight");

ok(mallory(hold_512('m.c') . "PREPARE TRANSACTION 'pin';\nSELECT 'prepared';", qr/prepared/),
	'mallory prepares a transaction with an operation on each of 512 counters');
my $prepared_at = time();

# the victim's counter's table was idle meanwhile: the 512th of mallory's
# counters took it, and none is free until the stale age
is(victim(), 'applied', 'right after the PREPARE the victim, whose counter has no share table, is admitted');
is($node->safe_psql('postgres', q{SELECT capped FROM fbf_counter_stats WHERE counter = 'app.c'::regclass}),
	'f', 'its filter is not at its cap');
like(capme(), qr/53400.*no share of counter filter "capme_fbf"'s capacity can be counted now.*and the filter is at its cap/s,
	'without one, the counter at its cap refuses it (53400)');
($resv_admitted, $resv_err) = fill_resv();
like($resv_err, qr/ERROR:  53400: no share of counter filter "resv_fbf"'s capacity can be counted now\nDETAIL:  .*the filter is filling the last fifth of its pending pages\./,
	'without one, the batches are refused where they reach the reserve of the chain (53400)');
cmp_ok($resv_admitted, '>=', 10000, "after $resv_admitted operations in flight taken unshared");
is($node->safe_psql('postgres', q{SELECT idempotent_increment('resv', 'k', 8, 1, 1)}), 't',
	'still without one, the next operation is admitted: the aborted batches left nothing on the chain');
my $wait = 11 - (time() - $prepared_at);
usleep($wait * 1_000_000) if $wait > 0;
is(victim(), 'applied', 'past the stale age the victim is admitted, the transaction still prepared');

# after ROLLBACK PREPARED, on a counter no one used since
$node->safe_psql('other', q{ROLLBACK PREPARED 'pin'});
$node->safe_psql('postgres', q{
	SELECT fbf_create_counter_table('app.d');
	GRANT SELECT, INSERT, UPDATE ON app.d TO t2;
});
{
	my ($ret, $out, $err) = $node->psql('postgres',
		"SELECT idempotent_increment('app.d', 't2', 4343, 1, 1)", extra_params => [ '-U', 't2' ]);
	is($ret == 0 ? $out : $err, 't', 'after ROLLBACK PREPARED a new counter is admitted');
}

# ---------------------------------------------------------------------
# 3. tables passed between counters while others charge them
# ---------------------------------------------------------------------
$node->safe_psql('postgres', q{CREATE SCHEMA churn AUTHORIZATION mallory});
$node->safe_psql('postgres', q{
	DO $$ BEGIN
		FOR i IN 1 .. 640 LOOP
			PERFORM fbf_create_counter_table('churn.c' || i, retention => '10 s',
											 expected_rate => 1, max_streams => 0);
		END LOOP;
	END $$;
	-- an operation on each counter lo .. hi; a counter refused a share
	-- table (53400) is passed over
	CREATE FUNCTION churn.touch(lo int, hi int) RETURNS int LANGUAGE plpgsql AS $f$
	DECLARE
		n int := 0;
	BEGIN
		FOR i IN lo .. hi LOOP
			BEGIN
				PERFORM idempotent_increment(('churn.c' || i)::regclass, 'k', 1,
											 (random() * 9e18)::bigint, 1);
				n := n + 1;
			EXCEPTION WHEN insufficient_resources THEN NULL;
			END;
		END LOOP;
		RETURN n;
	END $f$;
}, extra_params => [ '-U', 'mallory' ]);
my $script = "${PostgreSQL::Test::Utils::tmp_check}/churn.sql";
open(my $fh, '>', $script) or die "$script: $!";
print $fh q{BEGIN;
\set lo :client_id * 80 + 1
\set hi :lo + 79
SELECT churn.touch(:lo, :hi);
SELECT pg_sleep(0.3);
COMMIT;
};
close $fh;
my $log_offset = -s $node->logfile;
my ($out, $err) = ('', '');
my $bench = IPC::Run::start(
	[ 'pgbench', '-n', '-U', 'mallory', '-c', 8, '-j', 2, '-T', 15, '-f', $script,
	  '-d', $node->connstr('postgres') ],
	'>', \$out, '2>', \$err);
# the victim meanwhile, from the second second to the thirteenth
usleep(2_000_000);
my %during;
for (1 .. 50)
{
	my $v = victim();
	$during{$v =~ /^(applied|ERROR:  \w+)/ ? $1 : $v}++;
	usleep(200_000);
}
my $done = $bench->finish;
ok($done, 'churn: eight sessions charged 640 counters to the end') or diag($err);
is(join(', ', map { "$_: $during{$_}" } sort keys %during), 'applied: 50',
	'churn: each of the victim\'s 50 new operations meanwhile is admitted');
ok(!$node->log_contains(qr/terminated by signal/, $log_offset),
	'churn: no backend crashed while tables passed between counters');
like($out, qr/number of failed transactions: 0 /, 'churn: no transaction failed');
is(victim(), 'applied', 'churn: the victim is admitted once the sessions are done');

$m{in} .= "\\q\n";
$m{h}->finish;
$node->stop;
done_testing();
