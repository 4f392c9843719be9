# test/perl/FbfTest.pm: what the TAP tests of fbf (test/t) share: their
# nodes (a node with fbf, a streaming standby, a Citus cluster) and the
# stats they read.  prove finds it through the Makefile's -I test/perl
# (PG_PROVE_FLAGS), as it finds PostgreSQL::Test::Cluster.
#
#   use FbfTest;
#   my $node = fbf_node('name', "fbf.naptime = 200ms\n", allows_streaming => 1);
#
# fbf_node makes a PostgreSQL::Test::Cluster with fbf preloaded and
# fbf.fixed_window_keys on, the given postgresql.conf lines appended and
# the init options passed on, starts it and creates the extension in the
# postgres database.
#
#   my $standby = fbf_standby($primary, 'standby', slot => 1);
#
# fbf_standby makes a streaming standby of $primary (a node made with
# allows_streaming) named $name: a base backup of the primary named after
# the standby, a node initialised from it that streams from the primary,
# started, and waited for until it has replayed what the primary had
# written by then.  Options:
#   backup => NAME   start from the primary's existing backup NAME instead
#                    (several standbys from one backup, or a backup a test
#                    also restores otherwise) rather than take one;
#   slot => 1        stream through a physical replication slot named after
#                    the standby, created on the primary before the backup
#                    is taken (with backup: before the standby starts), so
#                    the primary keeps the WAL the standby has not yet
#                    received;
#   conf => LINES    lines appended to the standby's postgresql.conf (it
#                    starts with the primary's, from the backup);
#   start => 0       return it initialised but neither started nor caught
#                    up, for a test that starts it its own way.
#
#   my $node = fbf_restore_to_lsn($primary, 'base', 'halfway', $lsn);
#
# fbf_restore_to_lsn makes a node named $name from the primary's backup
# (the primary made with has_archiving) and its WAL archive, recovered up
# to and including the record that starts at $lsn, then promoted (not a
# standby: a point in time), started and waited for until it is out of
# recovery.  The primary must have archived the WAL up to there.
#
#   my $s = cuckoo_stats($node, 't_k');            # $s->{doublings}
#   my $c = counter_stats($node, 'c', 'restored');  # $c->{streams}
#
# cuckoo_stats returns a hash of what cuckoo_index_stats reports of the
# index, by column: pages, bucket_pages, overflow_pages, entries,
# overflow_entries, dead_entries, slots, kicks, doublings, growing.
# counter_stats returns the counter's row of fbf_counter_stats in the
# given database (postgres by default), by column: applied, dismissed,
# streams, stream_capacity, stream_evictions, exact_answers,
# filter_answers, dismissals_averted; and learning, whether the streams
# are still learning (streams_exact_from is ahead of now).  Values are as
# psql prints them (booleans 't' or 'f').
#
#   my ($coord, $w1, $w2) = fbf_citus_cluster("max_prepared_transactions = 20\n");
#
# fbf_citus_cluster makes the Citus tests' cluster, or skips the test
# (plan skip_all) where Citus cannot run: on PostgreSQL 18 (Citus 13.2
# supports 15 to 17) or without citus.so (test/check.sh builds it from
# ../shared/vendor when the tarball is there).  A coordinator and two
# workers, named so, with Citus and fbf preloaded, fbf.fixed_window_keys
# on, listening on 127.0.0.1, the given lines appended; Citus created on
# each, the workers added to the coordinator's metadata and fbf created
# (Citus creates it on the workers).
#
#   my ($rc, $stdout, $stderr, $sent) = fbf_citus_sent($coord, $sql);
#
# fbf_citus_sent runs $sql on a node of such a cluster with
# citus.log_remote_commands on and errors in verbose form (with their
# SQLSTATEs), and also returns the statements Citus sent to other nodes
# for it, in order (an array reference).
#
#   my @nodes = fbf_citus_cluster(citus_transfer_conf() . "fbf.naptime = 500ms\n");
#
# citus_transfer_conf returns the postgresql.conf lines of a cluster whose
# shards move and split: logical WAL and the senders and slots Citus' logical
# transfers take, prepared transactions for its two-phase commits, and its
# recovery of them off (the tests recover them when they choose).
#
#   my $n = citus_shards_on($coord, $w1, 'likes');
#
# citus_shards_on returns how many of the table's shard placements the
# coordinator's metadata puts on the node.
#
#   my $plan = citus_shard_windows($coord, 'likes');
#
# citus_shard_windows returns what the windows of the table's shards are
# planned for and take, as "expected_rate=R B" (R the window index's
# expected_rate option, B its size in bytes), the distinct values over
# all shards sorted and joined by "; ".
#
#   my ($before, $after) = citus_split_shard($coord, 'likes', $shard, $w1, $w2);
#   citus_split_shard($coord, 'likes', $shard, $w1, $w2, $point);
#
# citus_split_shard splits the shard $shard of the table in two at the
# middle of its hash range (or at $point, the lower half's last hash value),
# with block_writes, the lower half placed on the node $from and the
# upper on $to, and returns how many shards the table had before and has
# after, as the coordinator's metadata says.
#
#   my ($h, $out, $err) = fbf_pgbench_start($node, 'name', $script, '-c', 2, '-T', 5);
#
# fbf_pgbench_start starts pgbench on $node with the script $script
# (written to a file named after 'name' in the test's scratch directory),
# as prepared statements, with the further pgbench arguments given, and
# returns its IPC::Run handle and references to its output and errors.
# The server options of its sessions are the caller's PGOPTIONS.
#
#   my ($rc, $out, $err) = fbf_pgbench_prepared($node, 'name', $script, 12);
#
# fbf_pgbench_prepared runs such a script to its end: one client, that
# many transactions, the variable n set to 0; it returns pgbench's exit
# code, output and errors.
#
#   my $call = fbf_start_call($node, 't1', "CALL app.flood(...)", 300);
#   ok(fbf_finish_call($call), 'the flood ran to its end');
#
# fbf_start_call runs $sql as the role $role in $node's database postgres
# by psql in the background (stopping at its first error), killed by a
# timer after $timeout seconds at the latest; fbf_finish_call waits for
# it and returns whether it succeeded, what psql said on stderr and a
# timeout's error as diagnostics.
#
#   my ($applied, $refused, $dismissed, $why) =
#     fbf_ops_one_by_one($node, 't2', 'c', 'b', '1, 1000 + g', 300);
#
# fbf_ops_one_by_one applies $n operations of delta 1 to key $key of
# counter $counter as the role $role, the g-th (from 1) with the client
# and seq that $ids gives as SQL over g, one a statement of a PL/pgSQL
# loop, each in a block of its own so that a refusal ends only its
# operation; it returns how many were applied, refused and dismissed, and
# the first refusal's SQLSTATE and message ('' if none).
#
#   my $c = db_commits($node, 'idle_db');
#
# db_commits returns the transactions committed in the database so far,
# as pg_stat_database reports them on $node (its snapshot cleared first).
#
#   my $k = cuckoo_key_for_addr(Math::BigInt->new(1)->blsft(63));
#   my $page = cuckoo_key_addr($k)->brsft(64 - 17)->numify;
#   my $fp = cuckoo_fingerprint($k);
#
# For a cuckoo index whose operator class hashes an int8 to itself
# (FUNCTION 1 int8pl(int8, int8)), so that a test chooses where its keys
# go: cuckoo_key_for_addr returns the int8 (as a string) whose address,
# cuckoo_key's fmix64 of the hash, is $addr (a Math::BigInt in [0, 2^64):
# its top bits choose the bucket page, the next 15 the tag's rest bits);
# cuckoo_key_addr returns a key's address (a Math::BigInt), and
# cuckoo_fingerprint its 8-bit fingerprint.
package FbfTest;

use strict;
use warnings;

use Exporter 'import';
use Math::BigInt;
use PostgreSQL::Test::Cluster;
use Test::More;

our @EXPORT = qw(fbf_node fbf_standby fbf_restore_to_lsn cuckoo_stats counter_stats db_commits
  fbf_citus_cluster fbf_citus_sent citus_transfer_conf citus_shards_on
  citus_shard_windows citus_split_shard fbf_pgbench_start fbf_pgbench_prepared
  fbf_start_call fbf_finish_call fbf_ops_one_by_one
  cuckoo_key_for_addr cuckoo_key_addr cuckoo_fingerprint
  FBF_PAGE_CONTENTS FBF_META_NBITS FBF_META_STREAM_START FBF_META_STREAM_PAGES
  FBF_META_PENDING_AT);

# where a page's contents start (after its 24-byte header), and the
# offsets in a window metapage's contents of the fields tests forge or
# read on disk: asserted in src/window/window_page.h
use constant {
	FBF_PAGE_CONTENTS => 24,
	FBF_META_NBITS => 8,
	FBF_META_STREAM_START => 1232,
	FBF_META_STREAM_PAGES => 1236,
	FBF_META_PENDING_AT => 1248,
};

sub fbf_node
{
	my ($name, $conf, %init) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);

	$node->init(%init);
	# every filter gets the same key, so that its false positives do not
	# change from run to run (fbf.fixed_window_keys); a test of the keys
	# themselves turns it off in $conf, which comes after
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'fbf'\nfbf.fixed_window_keys = on\n" . ($conf // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION fbf');
	return $node;
}

sub fbf_standby
{
	my ($primary, $name, %opt) = @_;
	my $backup = $opt{backup} // $name;
	my $standby = PostgreSQL::Test::Cluster->new($name);

	$primary->safe_psql('postgres',
		"SELECT pg_create_physical_replication_slot('$name')")
	  if $opt{slot};
	$primary->backup($backup) unless defined $opt{backup};
	$standby->init_from_backup($primary, $backup, has_streaming => 1);
	$standby->append_conf('postgresql.conf', "primary_slot_name = '$name'\n")
	  if $opt{slot};
	$standby->append_conf('postgresql.conf', $opt{conf}) if defined $opt{conf};
	return $standby if defined $opt{start} && !$opt{start};
	$standby->start;
	$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
	return $standby;
}

# one row of a query, as a hash of the given names, in order
sub fbf_restore_to_lsn
{
	my ($primary, $backup, $name, $lsn) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);

	$node->init_from_backup($primary, $backup, has_restoring => 1, standby => 0);
	$node->append_conf('postgresql.conf', qq{
archive_mode = off
recovery_target_lsn = '$lsn'
recovery_target_inclusive = on
recovery_target_action = 'promote'
});
	$node->start;
	$node->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
	  or die "$name did not finish recovery";
	return $node;
}

sub stats_row
{
	my ($node, $db, $sql, @names) = @_;
	my %s;

	@s{@names} = split /\|/, $node->safe_psql($db, $sql);
	return \%s;
}

sub cuckoo_stats
{
	my ($node, $index) = @_;
	my @columns = qw(pages bucket_pages overflow_pages entries overflow_entries
	  dead_entries slots kicks doublings growing);

	return stats_row($node, 'postgres',
		'SELECT ' . join(', ', @columns) . " FROM cuckoo_index_stats('$index')",
		@columns);
}

sub counter_stats
{
	my ($node, $counter, $db) = @_;
	my @columns = qw(applied dismissed streams stream_capacity stream_evictions
	  exact_answers filter_answers dismissals_averted);

	return stats_row($node, $db // 'postgres',
		'SELECT ' . join(', ', @columns) . ', coalesce(streams_exact_from > now(), false) '
		  . "FROM fbf_counter_stats WHERE counter = '$counter'::regclass",
		@columns, 'learning');
}

sub fbf_ops_one_by_one
{
	my ($node, $role, $counter, $key, $ids, $n) = @_;

	return split /\|/, $node->safe_psql('postgres', qq{
		CREATE TEMP TABLE outcome (g int, o text);
		DO \$\$
		BEGIN
			FOR g IN 1 .. $n LOOP
				BEGIN
					INSERT INTO outcome VALUES (g, CASE WHEN idempotent_increment('$counter', '$key', $ids, 1)
														THEN 'applied' ELSE 'dismissed' END);
				EXCEPTION WHEN others THEN
					INSERT INTO outcome VALUES (g, SQLSTATE || ' ' || SQLERRM);
				END;
			END LOOP;
		END \$\$;
		SELECT count(*) FILTER (WHERE o = 'applied'), count(*) FILTER (WHERE o NOT IN ('applied', 'dismissed')),
			   count(*) FILTER (WHERE o = 'dismissed'),
			   coalesce((SELECT o FROM outcome WHERE o NOT IN ('applied', 'dismissed') ORDER BY g LIMIT 1), '')
		  FROM outcome},
		extra_params => [ '-U', $role ]);
}

sub db_commits
{
	my ($node, $db) = @_;

	$node->safe_psql('postgres', 'SELECT pg_stat_clear_snapshot()');
	return $node->safe_psql('postgres',
		"SELECT xact_commit FROM pg_stat_database WHERE datname = '$db'");
}

# murmur3's fmix64 and its inverse, modulo 2^64
my $two64 = Math::BigInt->new(2)->bpow(64);
my $two63 = Math::BigInt->new(2)->bpow(63);
my $c1 = Math::BigInt->from_hex('ff51afd7ed558ccd');
my $c2 = Math::BigInt->from_hex('c4ceb9fe1a85ec53');
my $inv1 = $c1->copy->bmodinv($two64);
my $inv2 = $c2->copy->bmodinv($two64);

sub xorshift33
{
	my ($h) = @_;
	return $h->copy->bxor($h->copy->brsft(33));
}

sub cuckoo_key_for_addr
{
	my ($addr) = @_;
	my $h = xorshift33($addr);

	$h = $h->bmul($inv2)->bmod($two64);
	$h = xorshift33($h);
	$h = $h->bmul($inv1)->bmod($two64);
	$h = xorshift33($h);
	$h->bsub($two64) if $h->bcmp($two63) >= 0;
	return $h->bstr;
}

# fmix64 of an int8 key, given as a string or number
sub fmix64_of_key
{
	my ($key, $xor) = @_;
	my $h = Math::BigInt->new($key);

	$h->badd($two64) if $h->is_neg;
	$h->bxor($xor) if defined $xor;
	$h = xorshift33($h)->bmul($c1)->bmod($two64);
	$h = xorshift33($h)->bmul($c2)->bmod($two64);
	return xorshift33($h);
}

sub cuckoo_key_addr
{
	my ($key) = @_;
	return fmix64_of_key($key);
}

sub cuckoo_fingerprint
{
	my ($key) = @_;
	return fmix64_of_key($key, Math::BigInt->from_hex('9e3779b97f4a7c15'))
	  ->brsft(56)->numify;
}

sub fbf_pgbench_start
{
	my ($node, $name, $script, @args) = @_;
	my $file = "${PostgreSQL::Test::Utils::tmp_check}/$name.sql";
	my $bindir = `pg_config --bindir`;
	my ($out, $err) = ('', '');

	chomp $bindir;
	open(my $fh, '>', $file) or die "$file: $!";
	print $fh $script;
	close $fh;
	my $h = IPC::Run::start([ "$bindir/pgbench", '-n', '-M', 'prepared', @args,
			'-h', $node->host, '-p', $node->port, '-f', $file, 'postgres' ],
		'>', \$out, '2>', \$err);
	return ($h, \$out, \$err);
}

sub fbf_pgbench_prepared
{
	my ($node, $name, $script, $tx) = @_;
	my ($h, $out, $err) = fbf_pgbench_start($node, $name, $script,
		'-c', 1, '-t', $tx, '-D', 'n=0');

	$h->finish;
	return ($h->result(0), $$out, $$err);
}

sub fbf_start_call
{
	my ($node, $role, $sql, $timeout) = @_;
	my %r = (out => '', err => '', sql => $sql);

	$r{h} = IPC::Run::start(
		[ 'psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1', '-U', $role,
		  '-d', $node->connstr('postgres'), '-c', $sql ],
		'>', \$r{out}, '2>', \$r{err}, IPC::Run::timeout($timeout));
	return \%r;
}

sub fbf_finish_call
{
	my ($r) = @_;
	my $ok = eval { $r->{h}->finish; 1 };

	unless ($ok)
	{
		$r->{h}->kill_kill;
		diag("$r->{sql}: $@");
		return 0;
	}
	diag("$r->{sql}: $r->{err}") if $r->{err} ne '';
	return $r->{h}->result == 0;
}

sub fbf_citus_cluster
{
	my ($conf) = @_;
	my ($pg_major) = `pg_config --version` =~ /PostgreSQL (\d+)/;
	my $pkglibdir = `pg_config --pkglibdir`;
	my @nodes;

	plan skip_all => "Citus 13.2 supports PostgreSQL 15 to 17, not $pg_major; "
	  . "the Citus tests run on PostgreSQL 15 and 16"
	  if $pg_major >= 18;
	chomp $pkglibdir;
	plan skip_all => "Citus is not installed in $pkglibdir (test/check.sh builds it from "
	  . "../shared/vendor/citus-13.2.2.tar.gz when that file exists)"
	  unless -f "$pkglibdir/citus.so";

	for my $name (qw(coordinator worker1 worker2))
	{
		my $node = PostgreSQL::Test::Cluster->new($name);

		$node->init;
		$node->append_conf('postgresql.conf',
			"shared_preload_libraries = 'citus,fbf'\nfbf.fixed_window_keys = on\n"
			  . "listen_addresses = '127.0.0.1'\n"
			  # not every statement: a shard window's copy is a literal of
			  # its pages, and the tests' logs would reach gigabytes
			  . "log_statement = 'ddl'\n" . ($conf // ''));
		$node->start;
		$node->safe_psql('postgres', 'CREATE EXTENSION citus');
		push @nodes, $node;
	}
	$nodes[0]->safe_psql('postgres', sprintf(q{
		SELECT citus_set_coordinator_host('127.0.0.1', %d);
		SELECT citus_add_node('127.0.0.1', %d);
		SELECT citus_add_node('127.0.0.1', %d);
		CREATE EXTENSION fbf;}, map { $_->port } @nodes));
	return @nodes;
}

sub fbf_citus_sent
{
	my ($node, $sql) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', qq{
		SET citus.log_remote_commands = on;
		SET client_min_messages = log;
		$sql}, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	my @sent = $err =~ /issuing (.*)/g;

	return ($rc, $out, $err, \@sent);
}

sub citus_transfer_conf
{
	return "max_prepared_transactions = 20\nwal_level = logical\nmax_wal_senders = 10\n"
	  . "max_replication_slots = 10\ncitus.recover_2pc_interval = -1\n";
}

sub citus_shards_on
{
	my ($coord, $node, $table) = @_;

	return $coord->safe_psql('postgres', sprintf(q{
		SELECT count(*) FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
		 JOIN pg_dist_shard s USING (shardid)
		 WHERE n.nodeport = %d AND s.logicalrelid = '%s'::regclass}, $node->port, $table));
}

sub citus_shard_windows
{
	my ($coord, $table) = @_;

	return $coord->safe_psql('postgres', sprintf(q{
		SELECT string_agg(DISTINCT result, '; ' ORDER BY result)
		  FROM run_command_on_shards('%s', $$
			SELECT o || ' ' || pg_relation_size(c.oid)
			  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
			  JOIN pg_am a ON a.oid = c.relam, unnest(c.reloptions) o
			 WHERE i.indrelid = '%%s'::regclass AND a.amname = 'fbf_filter'
			   AND o LIKE 'expected_rate=%%%%'$$)}, $table));
}

sub citus_split_shard
{
	my ($coord, $table, $shard, $from, $to, $point) = @_;
	my $count = sprintf(
		"SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = '%s'::regclass",
		$table);
	my $before = $coord->safe_psql('postgres', $count);
	my $at = defined $point ? "'$point'"
	  : sprintf(q{(SELECT ((shardminvalue::bigint + shardmaxvalue::bigint) / 2)::text
					 FROM pg_dist_shard WHERE shardid = %d)}, $shard);

	$coord->safe_psql('postgres', sprintf(q{
		SELECT citus_split_shard_by_split_points(%d, ARRAY[%s],
			ARRAY[(SELECT nodeid FROM pg_dist_node WHERE nodeport = %d),
				  (SELECT nodeid FROM pg_dist_node WHERE nodeport = %d)],
			shard_transfer_mode => 'block_writes')}, $shard, $at, $from, $to));
	return ($before, $coord->safe_psql('postgres', $count));
}

1;
