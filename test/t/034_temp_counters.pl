# Other sessions' temporary counters break neither monitoring nor backups
# nor the worker.
#
# Any role with the TEMP privilege can make a temporary counter or dedup
# table.  No other session can open it ("cannot access temporary tables of
# other sessions"), so fbf_counter_stats, fbf_dedup_stats and the worker
# skip such tables, also those a crashed session left behind until they
# are dropped, instead of failing (the statistics, for everyone once the
# table's SELECT is granted to PUBLIC) or logging an ERROR per table and
# pass.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FbfTest;
use Time::HiRes qw(usleep);

my $node = fbf_node('main', "fbf.naptime = 100\nautovacuum = off\nrestart_after_crash = on\n");
$node->safe_psql('postgres', q{
	CREATE ROLE fbf_temp LOGIN;
	CREATE ROLE fbf_monitor LOGIN;
	SELECT fbf_create_counter_table('c', retention => '1 min', expected_rate => 100);
	GRANT SELECT ON c TO fbf_monitor;
	SELECT fbf_create_dedup('d', retention => '1 min', expected_rate => 100);
	GRANT SELECT ON d TO fbf_monitor});

# a role with nothing but TEMP makes temporary counters and dedup tables,
# and lets everyone read them
my $temp = $node->background_psql('postgres', on_error_stop => 1,
	extra_params => [ '-U', 'fbf_temp' ]);

# a query's output in the session, as safe_psql gives it: 16's
# BackgroundPsql leaves the output's final newline, 17's and later remove
# it; exactly one is taken off, so anything else still shows
sub temp_query
{
	my ($query) = @_;
	my $out = $temp->query_safe($query);
	$out =~ s/\r?\n\z//;
	return $out;
}
$temp->query_safe(q{
	SELECT fbf_create_counter_table('pg_temp.tc' || g, retention => '1 min',
									expected_rate => 100)
	FROM generate_series(1, 5) g;
	SELECT fbf_create_dedup('pg_temp.td', retention => '1 min', expected_rate => 100);
	GRANT SELECT ON pg_temp.tc1, pg_temp.td TO PUBLIC;
	SELECT idempotent_increment('pg_temp.tc1', 1, 1, 1);
	SELECT fbf_claim('pg_temp.td', 'x')});
is(temp_query(q{SELECT count(*) FROM fbf_counter_stats}), '5',
	'its own session sees its temporary counters');

sub check_others
{
	my ($when) = @_;
	for my $user ('postgres', 'fbf_monitor')
	{
		my ($rc, $out, $err) = $node->psql('postgres',
			q{SELECT string_agg(counter::text, ',' ORDER BY 1) FROM fbf_counter_stats},
			extra_params => [ '-U', $user ]);
		is("$rc $out $err", "0 c ", "$when: fbf_counter_stats as $user lists c only");
		($rc, $out, $err) = $node->psql('postgres',
			q{SELECT string_agg(dedup::text, ',' ORDER BY 1) FROM fbf_dedup_stats},
			extra_params => [ '-U', $user ]);
		is("$rc $out $err", "0 d ", "$when: fbf_dedup_stats as $user lists d only");
	}
	my ($rc, $out, $err) = $node->psql('postgres',
		q{SELECT string_agg(name, ',' ORDER BY 1) FROM fbf_counter_save()});
	is("$rc $out $err", "0 public.c,public.d ", "$when: fbf_counter_save() saves c and d");
}

# the worker's passes: no ERROR for the temporary counters
sub worker_errors
{
	my ($from) = @_;
	sleep 3;
	my $log = slurp_file($node->logfile, $from);
	my $errors = () = $log =~ /ERROR:.*temporary/g;
	return $errors;
}

check_others('while their session runs');
my $offset = -s $node->logfile;
is(worker_errors($offset), 0, 'the worker logs no error for them');

# a crash of their session's backend leaves them behind, orphaned, until
# their schema is reused
my $pid = temp_query('SELECT pg_backend_pid()');
like($pid, qr/^[0-9]+\z/, "the session's backend pid");
kill 'KILL', $pid or die "could not kill backend $pid: $!";
# Wait for the server to come back.  Not with poll_query_until: it feeds
# psql the query on its standard input, and a psql that exits before
# reading it (the server still restarting) makes IPC::Run die of a broken
# pipe.  Here the query is an argument, and the input /dev/null.
my $psql = `pg_config --bindir`;
chomp $psql;
$psql .= '/psql';
my $back = 0;
for (my $i = 0; !$back && $i < 10 * $PostgreSQL::Test::Utils::timeout_default; $i++)
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ $psql, '-XAt', '-d', $node->connstr('postgres'), '-c', 'SELECT 1' ],
		'<', '/dev/null', '>', \$out, '2>', \$err);
	$back = $out eq "1\n";
	usleep(100_000) unless $back;
}
$back or die 'the server did not come back after the crash';
is($node->safe_psql('postgres',
	q{SELECT count(*) FROM pg_class WHERE relname IN ('tc1', 'td') AND relpersistence = 't'}),
	'2', 'the crash left the temporary tables behind');
check_others('orphaned by a crash');
$offset = -s $node->logfile;
is(worker_errors($offset), 0, 'the worker logs no error for orphaned ones');

$node->stop;
done_testing();
