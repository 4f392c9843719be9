# Copyright: the fbf authors.  TAP test, run by test/check.sh.
#
# The cuckoo index under concurrency, and across crashes.
#
# Concurrency: for about 20 seconds, pgbench clients insert rows with random
# keys (and many rows with one hot key, which go to overflow chains),
# delete rows by key, look keys up through index and bitmap scans, and
# VACUUM the table in a loop, while the two indexes grow from one bucket
# page through several doublings.  Meanwhile a checker looks up "sentinel"
# keys, rows inserted before the run and never deleted, through index and
# bitmap scans of both indexes, and raises an error (which aborts its
# pgbench client and fails the test) if it ever sees a count other than
# the right one: a lookup must never miss a row because the table is
# being doubled, kicked about or vacuumed under it.  Afterwards, for every
# key, the count through the index (index scan, and bitmap scan) equals
# the count through a sequential scan, and cuckoo_index_verify accepts
# both indexes: one entry per heap tuple, and the others pointing at dead
# tuples; after a final VACUUM, exactly one entry per row.
#
# Crashes: three times, a fresh table whose three indexes start at one
# bucket page takes inserts (fast enough to double every moment or so),
# deletes, lookups and VACUUM, and the server is stopped in immediate mode
# (a crash): twice just as a doubling begins (a session watches the
# indexes' sizes: a doubling first extends an index by its size, then
# splits its pages one by one), once at a random moment.  After recovery,
# whether or not a doubling was cut short (cuckoo_index_stats says
# "growing"; the notes tell how often that was caught), cuckoo_index_verify
# accepts every index, lookups through them equal a sequential scan for
# every key, and the next insert leaves no index growing.
# t/005_cuckoo_wal.pl tests an interrupted doubling deterministically
# (recovery stopped in the middle of one).
#
# VACUUM runs with INDEX_CLEANUP ON: PostgreSQL skips the index pass when
# few heap pages have dead items, so without it ambulkdelete would rarely
# run alongside the rest, and the final VACUUM could leave dead entries.
#
# Every assertion is about the final or recovered state, or about errors
# a correct index never raises, so none depends on timing; timing only
# decides how much is exercised, which the notes report.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use FbfTest;

my $started = time;
# (Small WAL buffers, written often: a crash loses what WAL was not yet
# written out, and with it the last steps of a doubling it interrupts.)
my $node = fbf_node('stress', q{
wal_level = replica
autovacuum = off
log_statement = none
log_min_messages = warning
shared_buffers = 8MB
max_connections = 40
wal_buffers = 64kB
wal_writer_delay = 10ms
});

# keys of the random rows are 1 .. $kmax, the hot key is 0, the sentinels
# -1 .. -100 (three rows each)
my $kmax = 30000;

$node->safe_psql('postgres', qq{
	-- lookups under a given plan: 'index' (index scans only), 'bitmap'
	-- (bitmap scans only) or 'seq'; joins are nested loops unless 'seq'
	CREATE FUNCTION lookup_gucs(mode text) RETURNS void LANGUAGE plpgsql AS \$\$
	BEGIN
		PERFORM set_config('enable_seqscan', (mode = 'seq')::text, true);
		PERFORM set_config('enable_indexscan', (mode = 'index')::text, true);
		PERFORM set_config('enable_bitmapscan', (mode = 'bitmap')::text, true);
		PERFORM set_config('enable_hashjoin', (mode = 'seq')::text, true);
		PERFORM set_config('enable_mergejoin', 'off', true);
	END \$\$;

	-- the rows of each key lo..hi of column col of table tab, key g being
	-- keyexpr (g, or 'k' || g)
	CREATE FUNCTION lookup_sql(tab regclass, col name, keyexpr text, lo int8, hi int8)
	RETURNS text LANGUAGE sql IMMUTABLE AS \$\$
		SELECT format('SELECT g::int8, count(x.%I)::int8 FROM generate_series(%s::int8, %s::int8) g '
					  'LEFT JOIN %s x ON x.%I = %s GROUP BY g', col, lo, hi, tab, col, keyexpr)
	\$\$;

	-- the GUCs changed inside stay inside (a SET clause scopes them)
	CREATE FUNCTION key_counts(tab regclass, col name, keyexpr text, mode text, lo int8, hi int8)
	RETURNS TABLE (key int8, n int8) LANGUAGE plpgsql SET enable_seqscan = on AS \$\$
	BEGIN
		PERFORM lookup_gucs(mode);
		RETURN QUERY EXECUTE lookup_sql(tab, col, keyexpr, lo, hi);
	END \$\$;

	CREATE FUNCTION key_counts_plan(tab regclass, col name, keyexpr text, mode text, lo int8, hi int8)
	RETURNS SETOF text LANGUAGE plpgsql SET enable_seqscan = on AS \$\$
	BEGIN
		PERFORM lookup_gucs(mode);
		RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || lookup_sql(tab, col, keyexpr, lo, hi);
	END \$\$;

	-- the sentinel check the pgbench checker runs
	CREATE FUNCTION check_sentinel(key int8, expected int8) RETURNS void
	LANGUAGE plpgsql SET enable_seqscan = off AS \$\$
	DECLARE
		nk int8;
		ns int8;
		m text;
	BEGIN
		FOREACH m IN ARRAY ARRAY['index', 'bitmap'] LOOP
			PERFORM lookup_gucs(m);
			EXECUTE 'SELECT count(*) FROM t WHERE k = \$1' INTO nk USING key;
			EXECUTE 'SELECT count(*) FROM t WHERE s = \$1' INTO ns USING 'k' || key;
			IF nk <> expected OR ns <> expected THEN
				RAISE EXCEPTION 'sentinel key % seen through % scans: % rows by k, % by s, expected %',
					key, m, nk, ns, expected;
			END IF;
		END LOOP;
	END \$\$;

	-- Wait until one of the indexes grows by min_jump blocks or more
	-- within two milliseconds: a doubling of that many bucket pages or
	-- more has begun (it extends the index by its number of bucket pages
	-- in one go, then splits the pages one by one), while overflow pages
	-- come one at a time.  Returns the index, or 'timeout'.
	CREATE FUNCTION wait_for_doubling(indexes regclass[], min_jump int8, timeout_s float8)
	RETURNS text LANGUAGE plpgsql AS \$\$
	DECLARE
		deadline timestamptz := clock_timestamp() + timeout_s * interval '1 s';
		stamp timestamptz := clock_timestamp();
		cur int8[] := ARRAY(SELECT pg_relation_size(i) / 8192 FROM unnest(indexes) i);
		prev int8[] := cur;		-- sizes 0 to 1 ms ago
		prev2 int8[] := cur;	-- sizes 1 to 2 ms ago
	BEGIN
		LOOP
			cur := ARRAY(SELECT pg_relation_size(i) / 8192 FROM unnest(indexes) i);
			FOR n IN 1 .. array_length(indexes, 1) LOOP
				IF cur[n] - prev2[n] >= min_jump THEN
					RETURN indexes[n]::text;
				END IF;
			END LOOP;
			IF clock_timestamp() > stamp + interval '1 ms' THEN
				prev2 := prev;
				prev := cur;
				stamp := clock_timestamp();
			END IF;
			IF clock_timestamp() > deadline THEN
				RETURN 'timeout';
			END IF;
		END LOOP;
	END \$\$;

	CREATE TABLE t (id bigserial, k int8 NOT NULL, v int NOT NULL, s text);
	CREATE INDEX t_k ON t USING cuckoo (k);
	CREATE INDEX t_s ON t USING cuckoo (s) WITH (fingerprint_bits = 12, bucket_size = 2, max_kicks = 50);
	INSERT INTO t (k, v, s) SELECT -g, r, 'k' || -g FROM generate_series(1, 100) g, generate_series(1, 3) r;
});

# ---- helpers ----

my $scripts = $node->basedir . '/scripts';
mkdir $scripts;

# start pgbench in the background: $clients clients for $seconds, running
# the scripts (name => [weight, text]) at random by weight
sub start_pgbench
{
	my ($name, $clients, $seconds, %files) = @_;
	my @args;
	for my $f (sort keys %files)
	{
		my ($weight, $text) = @{ $files{$f} };
		my $path = "$scripts/$name-$f.sql";
		open my $fh, '>', $path or die "$path: $!";
		print $fh $text;
		close $fh;
		push @args, '-f', "$path\@$weight";
	}
	my ($out, $err) = ('', '');
	local $ENV{PGAPPNAME} = $name;
	my $h = IPC::Run::start(
		[ 'pgbench', '--no-vacuum', "--client=$clients", "--time=$seconds",
		  '-h', $node->host, '-p', $node->port, @args, 'postgres' ],
		'>', \$out, '2>', \$err);
	return { name => $name, h => $h, out => \$out, err => \$err };
}

# wait for a pgbench started by start_pgbench; it must have succeeded
sub finish_pgbench
{
	my ($p) = @_;
	my $ok = eval { $p->{h}->finish; 1 };
	my $rc = $ok ? $p->{h}->result(0) : 'none';
	my $n = ${ $p->{out} } =~ /number of transactions actually processed: (\d+)/ ? $1 : 0;
	ok($ok && $rc == 0 && ${ $p->{err} } !~ /aborted|ERROR/,
		"pgbench $p->{name}: every client ran to the end without an error ($n transactions)")
	  or diag("exit status $rc\nstderr:\n${ $p->{err} }\nstdout:\n${ $p->{out} }");
	return $n;
}

# after a crash: pgbench is expected to fail
sub reap_pgbench
{
	my ($p) = @_;
	my $h = ref $p eq 'HASH' ? $p->{h} : $p;
	eval { $h->finish; 1 } or eval { $h->kill_kill; };
}

sub show_stats
{
	my ($what, $index) = @_;
	my $s = cuckoo_stats($node, $index);
	note "$what: $index: " . join(', ', map { "$_ $s->{$_}" } sort keys %$s);
	return $s;
}

# cuckoo_index_verify must accept the index, and account for every entry:
# one per heap tuple, the rest pointing at dead tuples.  (An entry that
# outlives 15 doublings is copied to both halves and counted twice; none
# here sees more than about ten.)  Returns (entries, heap_tuples,
# dead_entries).
sub verify
{
	my ($what, $index) = @_;
	my ($rc, $out, $err) = $node->psql('postgres',
		"SELECT entries, heap_tuples, dead_entries FROM cuckoo_index_verify('$index')");
	my ($entries, $heap, $dead) = split /\|/, $out;
	ok($rc == 0 && defined $dead && $entries == $heap + $dead,
		"$what: cuckoo_index_verify('$index') is clean and counts one entry per heap tuple"
		  . ($rc == 0 ? " ($entries entries, $heap heap tuples, $dead dead)" : ''))
	  or diag($err);
	return ($entries, $heap, $dead);
}

# the number of keys lo..hi whose count through $mode scans of the index
# on $col differs from their count through a sequential scan; 0 expected
sub check_keys
{
	my ($what, $tab, $col, $keyexpr, $lo, $hi) = @_;
	for my $mode ('index', 'bitmap')
	{
		my $out = $node->safe_psql('postgres', qq{
			SELECT count(*) || '|' || coalesce(array_to_string(
				(array_agg(key || ': ' || i.n || ' by $mode scan, ' || s.n || ' by seq scan' ORDER BY key))[1:10],
				'; '), '')
			FROM key_counts('$tab', '$col', \$\$$keyexpr\$\$, '$mode', $lo, $hi) i
			JOIN key_counts('$tab', '$col', \$\$$keyexpr\$\$, 'seq', $lo, $hi) s USING (key)
			WHERE i.n <> s.n});
		my ($bad, $first) = split /\|/, $out, 2;
		is($bad, '0', "$what: $mode scans of $tab.$col agree with a seq scan for all keys $lo..$hi")
		  or diag("first mismatching keys: $first");
	}
}

# ---- the plans the checks rely on ----

for my $mode ('index', 'bitmap', 'seq')
{
	my $plan = $node->safe_psql('postgres',
		qq{SELECT string_agg(p, E'\\n') FROM key_counts_plan('t', 'k', 'g', '$mode', 1, 10) p});
	like($plan,
		  $mode eq 'index'  ? qr/Nested Loop.*Index Scan using t_k on t/s
		: $mode eq 'bitmap' ? qr/Nested Loop.*Bitmap Index Scan on t_k/s
		:                     qr/Hash .*Join.*Seq Scan on t/s,
		"the $mode key counts use the plan asked for")
	  or diag($plan);
}
for my $mode ('index', 'bitmap')
{
	my $plan = $node->safe_psql('postgres', qq{
		BEGIN; SELECT lookup_gucs('$mode');
		EXPLAIN (COSTS OFF) SELECT count(*) FROM t WHERE s = 'k-1'; COMMIT});
	like($plan, $mode eq 'index' ? qr/Index Scan using t_s on t/ : qr/Bitmap Index Scan on t_s/,
		"the sentinel checker's $mode lookups use the cuckoo index") or diag($plan);
}
$node->safe_psql('postgres', 'SELECT check_sentinel(-1, 3)');

# ---- concurrency ----

my $before = cuckoo_stats($node, 't_k');
my $seconds = 20;
my @runs = (
	start_pgbench('writers', 2, $seconds,
		insert => [ 10, "INSERT INTO t (k, v, s) SELECT x, (random() * 999)::int, 'k' || x
			FROM (SELECT 1 + (random() * ($kmax - 1))::int8 AS x FROM generate_series(1, 10)) r;\n" ],
		hot => [ 1, "INSERT INTO t (k, v, s) SELECT 0, (random() * 999)::int, 'k0' FROM generate_series(1, 10);\n" ]),
	# one deleter, so that deletes never wait for each other
	start_pgbench('deleter', 1, $seconds,
		delete => [ 1, "\\set key random(1, $kmax)\nDELETE FROM t WHERE k = :key;\n"
			  . "\\set v random(0, 999)\nDELETE FROM t WHERE k = 0 AND v = :v;\n" ]),
	start_pgbench('readers', 1, $seconds,
		index => [ 1, "\\set key random(-100, $kmax)\nSET enable_seqscan = off;\nSET enable_bitmapscan = off;\n"
			  . "SET enable_indexscan = on;\nSELECT count(*) FROM t WHERE k = :key;\n"
			  . "SELECT count(*) FROM t WHERE s = 'k' || :key;\nSELECT count(*) FROM t WHERE k = 0;\n" ],
		bitmap => [ 1, "\\set key random(-100, $kmax)\nSET enable_seqscan = off;\nSET enable_indexscan = off;\n"
			  . "SET enable_bitmapscan = on;\nSELECT count(*) FROM t WHERE k = :key;\n"
			  . "SELECT count(*) FROM t WHERE s = 'k' || :key;\n" ]),
	start_pgbench('sentinel-checker', 1, $seconds,
		check => [ 1, "\\set key random(1, 100)\nSELECT check_sentinel(-:key, 3);\n" ]),
	start_pgbench('vacuum', 1, $seconds,
		vacuum => [ 1, "VACUUM (INDEX_CLEANUP ON) t;\n" ]),
);
my %done = map { $_->{name} => finish_pgbench($_) } @runs;
cmp_ok($done{'sentinel-checker'}, '>', 0, 'the sentinel checker ran');
note 'concurrency phase done after ' . sprintf('%.1f', time - $started) . ' s';

my $after_k = show_stats('concurrency', 't_k');
my $after_s = show_stats('concurrency', 't_s');
cmp_ok($after_k->{doublings} - $before->{doublings}, '>=', 3,
	'the index on k doubled several times during the run');
is("$after_k->{growing} $after_s->{growing}", 'f f', 'and no index is left growing');
cmp_ok($after_k->{overflow_pages}, '>', 0, 'rows sharing a key (the hot one above all) went to overflow pages');

check_keys('concurrency', 't', 'k', 'g', -100, $kmax);
check_keys('concurrency', 't', 's', q{'k' || g}, -100, $kmax);
is($node->safe_psql('postgres', q{
		SELECT count(*) FROM key_counts('t', 'k', 'g', 'index', -100, -1) WHERE n <> 3}),
	'0', 'every sentinel key still has its three rows');
# keys of the other integer types of the operator family hash alike
is($node->safe_psql('postgres', q{
		SET enable_seqscan = off; SET enable_bitmapscan = off;
		SELECT (SELECT count(*) FROM t WHERE k = -5) || ' ' ||
			   (SELECT count(*) FROM t WHERE k = (-77)::int2) || ' ' ||
			   (SELECT count(*) FROM t WHERE k = 4294967291)}),
	'3 3 0', 'int4 and int2 keys find the int8 rows through the index');
verify('concurrency', $_) for ('t_k', 't_s');
$node->safe_psql('postgres', 'VACUUM (INDEX_CLEANUP ON) t');
my $rows = $node->safe_psql('postgres', 'SELECT count(*) FROM t');
for my $index ('t_k', 't_s')
{
	my ($entries, $heap, $dead) = verify('concurrency, vacuumed', $index);
	is("$entries $heap $dead", "$rows $rows 0",
		"concurrency, vacuumed: $index has one entry per row ($rows) and none dead");
}

# ---- crashes ----

my $growing_caught = 0;
for my $iter (1 .. 3)
{
	$node->safe_psql('postgres', q{
		DROP TABLE IF EXISTS c;
		CREATE TABLE c (k int8 NOT NULL, k2 int8 NOT NULL, v int NOT NULL, s text);
		CREATE INDEX c_k ON c USING cuckoo (k);
		CREATE INDEX c_k2 ON c USING cuckoo (k2) WITH (fingerprint_bits = 16, bucket_size = 2);
		CREATE INDEX c_s ON c USING cuckoo (s) WITH (fingerprint_bits = 12, bucket_size = 8);
	});
	my @crash_runs = (
		start_pgbench("crash$iter-writers", 2, 60,
			insert => [ 10, "INSERT INTO c (k, k2, v, s) SELECT x, x, (random() * 999)::int, 'k' || x
				FROM (SELECT 1 + (random() * ($kmax - 1))::int8 AS x FROM generate_series(1, 50)) r;\n" ],
			hot => [ 1, "INSERT INTO c (k, k2, v, s) SELECT 0, 0, (random() * 999)::int, 'k0' FROM generate_series(1, 20);\n" ]),
		start_pgbench("crash$iter-others", 1, 60,
			delete => [ 2, "\\set key random(1, $kmax)\nDELETE FROM c WHERE k = :key;\n" ],
			lookup => [ 2, "\\set key random(0, $kmax)\nSELECT count(*) FROM c WHERE k = :key;\n"
				  . "SELECT count(*) FROM c WHERE k2 = :key;\nSELECT count(*) FROM c WHERE s = 'k' || :key;\n" ]),
		start_pgbench("crash$iter-vacuum", 1, 60,
			vacuum => [ 1, "VACUUM (INDEX_CLEANUP ON) c;\n" ]),
	);
	# The first two crashes come as a doubling of 64 (then 128) pages or
	# more begins, so that one is likely cut short; the third at a random
	# moment.  (Stopping in immediate mode is sending the postmaster
	# SIGQUIT; sending it at once spares pg_ctl's start-up time.)
	my $when;
	if ($iter <= 2)
	{
		my $min_jump = $iter == 1 ? 40 : 80;	# doublings of 64, then 128 pages
		# the watcher must see the extension at once, and the doubling be
		# slow: the workload's backends yield the processor to it
		$node->poll_query_until('postgres', qq{
			SELECT count(*) = 4 FROM pg_stat_activity WHERE application_name LIKE 'crash$iter-%'})
		  or diag('the clients did not all connect');
		setpriority(0, $_, 10) for split /\n/, $node->safe_psql('postgres', qq{
			SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'crash$iter-%'});
		my $pid = (split /\n/, slurp_file($node->data_dir . '/postmaster.pid'))[0];
		my ($wout, $werr) = ('', '');
		my $watcher = IPC::Run::start(
			[ 'psql', '-XAtq', '-h', $node->host, '-p', $node->port, '-d', 'postgres',
			  '-c', "SELECT wait_for_doubling('{c_k,c_k2,c_s}', $min_jump, 10)" ],
			'>', \$wout, '2>', \$werr, IPC::Run::timeout(60));
		$watcher->pump while $wout !~ /\n/ && $watcher->pumpable;
		kill 'QUIT', $pid;
		chomp($wout);
		diag("the watcher failed: $werr") if $wout eq '';
		$when = $wout eq 'timeout' ? 'after 10 s' : "as a doubling of $wout began";
		usleep(10_000) while kill 0, $pid;
		reap_pgbench($watcher);
		$node->stop('immediate', fail_ok => 1);	# already stopped: only notes it
	}
	else
	{
		my $delay = 1.0 + rand(2.0);
		$when = sprintf('after %.2f s', $delay);
		usleep(int($delay * 1_000_000));
		$node->stop('immediate');
	}
	reap_pgbench($_) for @crash_runs;
	$node->start;

	# what the crash cut short: a doubling (the index is "growing"), or
	# the extension that begins one (zeroed blocks past the used ones)
	my (@grew, @extended);
	for my $index ('c_k', 'c_k2', 'c_s')
	{
		my $s = show_stats("crash $iter ($when), recovered", $index);
		push @grew, $index if $s->{growing} eq 't';
		push @extended, $index
		  if $s->{growing} eq 'f' && $s->{pages} > 1 + $s->{bucket_pages} + $s->{overflow_pages};
	}
	$growing_caught += @grew;
	note "crash $iter: "
	  . (@grew ? "doubling cut short in @grew" : 'no doubling was under way')
	  . (@extended ? "; unused blocks after an extension in @extended" : '');

	verify("crash $iter, recovered", $_) for ('c_k', 'c_k2', 'c_s');
	check_keys("crash $iter, recovered", 'c', 'k', 'g', 0, $kmax);
	check_keys("crash $iter, recovered", 'c', 'k2', 'g', 0, $kmax);
	check_keys("crash $iter, recovered", 'c', 's', q{'k' || g}, 0, $kmax);

	# a doubling cut short goes on a step per insert:
	# single-row inserts of other keys end it
	$node->safe_psql('postgres', "INSERT INTO c (k, k2, v, s) VALUES (-1, -1, 0, 'k-1')");
	my $still_sql = q{
		SELECT string_agg(i, ' ') FROM unnest(ARRAY['c_k', 'c_k2', 'c_s']) i
		WHERE (SELECT growing FROM cuckoo_index_stats(i::regclass))};
	my $more = 0;
	while ($node->safe_psql('postgres', $still_sql) ne '' && $more < 20)
	{
		$node->safe_psql('postgres', q{
			INSERT INTO c (k, k2, v, s) SELECT -1000 - g, -1000 - g, 0, 'x' FROM generate_series(1, 1000) g});
		$more++;
	}
	is($node->safe_psql('postgres', $still_sql), '',
		"crash $iter: inserts after it end any doubling under way ($more statements of 1,000 rows after the first)");
	is($node->safe_psql('postgres', q{
			SELECT string_agg(n::text, ' ' ORDER BY col, m)
			FROM unnest(ARRAY['index', 'bitmap']) m, unnest(ARRAY['k', 'k2', 's']) col,
				 LATERAL key_counts('c', col, CASE col WHEN 's' THEN $$'k' || g$$ ELSE 'g' END, m, -1, -1)}),
		'1 1 1 1 1 1', "crash $iter: the new row is found through every index");
	verify("crash $iter, after an insert", $_) for ('c_k', 'c_k2', 'c_s');
	my %column_of = (c_k => 'k', c_k2 => 'k2', c_s => 's');
	for my $index (@grew)
	{
		my $col = $column_of{$index};
		check_keys("crash $iter, doubling of $index finished", 'c', $col,
			$col eq 's' ? q{'k' || g} : 'g', 0, $kmax);
	}
	verify("crash $iter", 't_k');
}
note "doublings cut short by the 3 crashes: $growing_caught";
check_keys('after the crashes', 't', 'k', 'g', -100, $kmax);

note 'total ' . sprintf('%.1f', time - $started) . ' s';
$node->stop;
done_testing();
