# Copyright (c) 2026, pgcipher developers
#
# Files other than relations and WAL that can hold user data: temporary
# files (an external sort and a hash join held open by cursors with
# work_mem = 64kB, a WITH HOLD cursor's tuplestore, the shared files of a
# parallel hash join paused in its probe phase), two-phase state files
# (pg_twophase, written at a checkpoint while a transaction stays
# prepared), the NOTIFY queue (pg_notify SLRU pages, written when a
# listener falls behind), logical decoding spill files
# (pg_replslot/<slot>/*.spill, written while a walsender decodes a large
# transaction that is still open), and pg_stat_statements' query texts
# (pg_stat_tmp while running, pg_stat after a clean shutdown).  Each is forced to disk and the data
# directory is scanned while the files exist.  The same run without
# encryption must find every marker in the file it went to.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib "$FindBin::RealBin/..";
use LeakScan;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $keyfile = PostgreSQL::Test::Utils::tempdir() . '/kek';
PostgreSQL::Test::Utils::append_to_file($keyfile, ('ef' x 32) . "\n");
my $run = sprintf('%08x', int(rand(0xffffffff)));

sub run_scenario
{
	my ($encrypted) = @_;
	my $label = $encrypted ? 'enc' : 'plain';
	my (@markers, %where);
	my $marker = sub {
		my ($name, $dir) = @_;
		my $text = "PGCF_${name}_${label}_$run";
		push @markers, { name => $name, bytes => $text };
		$where{$name} = $dir;
		return $text;
	};

	my $node = PostgreSQL::Test::Cluster->new("node_$label");
	$node->init(
		allows_streaming => 'logical',
		extra => $encrypted
		? [ '--encryption=aes-256', "--encryption-key-command=cat $keyfile" ]
		: []);
	$node->append_conf(
		'postgresql.conf', qq(
max_prepared_transactions = 5
logical_decoding_work_mem = 64kB
autovacuum = off
shared_preload_libraries = 'pg_stat_statements'
));
	$node->start;
	$node->safe_psql('postgres', 'CREATE TABLE t (v text)');
	$node->safe_psql('postgres',
		"SELECT pg_create_logical_replication_slot('spill', 'test_decoding')"
	);

	# two-phase state file
	my $gid = $marker->('gid', 'pg_twophase');
	$node->safe_psql('postgres',
		"BEGIN; INSERT INTO t VALUES ('x'); PREPARE TRANSACTION '$gid'; CHECKPOINT;"
	);

	# NOTIFY queue with a listener that stays in a transaction
	my $listener = $node->background_psql('postgres');
	$listener->query_safe('LISTEN c');
	$listener->query_safe('BEGIN');
	$listener->query_safe('SELECT 1');
	my $payload = $marker->('notify', 'pg_notify');
	$node->safe_psql(
		'postgres', qq(
DO \$\$ BEGIN FOR i IN 1..20000 LOOP PERFORM pg_notify('c', '$payload' || i || repeat('n', 900)); END LOOP; END \$\$;)
	);
	ok( $node->safe_psql('postgres',
			'SELECT pg_notification_queue_usage() > 0') eq 't',
		"$label: notifications queued behind the listener");

	# a large open transaction decoded by a walsender spills to disk
	my $spill = $marker->('spill', 'pg_replslot');
	my $writer = $node->background_psql('postgres');
	$writer->query_safe('BEGIN');
	$writer->query_safe(
		"INSERT INTO t SELECT '$spill' || g FROM generate_series(1, 20000) g"
	);
	# decoded rows to /dev/null: on a pipe no one reads, pg_recvlogical would
	# block on a full pipe and outlive the kill_kill's SIGTERM by its
	# 30 s grace
	my $err = '';
	my $recv = IPC::Run::start(
		[
			'pg_recvlogical', '-d',
			$node->connstr('postgres'), '-S',
			'spill', '--start',
			'--no-loop', '-f',
			'/dev/null'
		],
		'2>',
		\$err);
	my $slotdir = $node->data_dir . '/pg_replslot/spill';
	my $spilled = 0;

	foreach (1 .. 300)
	{
		opendir(my $dh, $slotdir) or last;
		$spilled = grep { /\.spill$/ } readdir($dh);
		closedir($dh);
		last if $spilled;
		usleep(100_000);
	}
	ok($spilled, "$label: walsender spilled the open transaction");

	# temporary files
	my $tmpm = $marker->('temp', 'pgsql_tmp');
	$node->safe_psql(
		'postgres', qq(
CREATE TABLE big AS SELECT g AS k, '$tmpm' || g AS v FROM generate_series(1, 30000) g;
CREATE TABLE bigger AS SELECT g % 30000 AS k, g AS w FROM generate_series(1, 300000) g;
ANALYZE big, bigger;));
	my $cur = $node->background_psql('postgres', on_error_stop => 0);
	$cur->query_safe(
		"SET work_mem = '64kB'; SET enable_mergejoin = off; SET enable_nestloop = off; SET max_parallel_workers_per_gather = 0"
	);
	$cur->query_safe('BEGIN');
	$cur->query_safe(
		'DECLARE s CURSOR FOR SELECT v FROM big ORDER BY v DESC');
	$cur->query_safe('FETCH 1 FROM s');
	$cur->query_safe(
		'DECLARE h CURSOR FOR SELECT a.v, b.v FROM big a JOIN big b ON a.k = b.k'
	);
	$cur->query_safe('FETCH 1 FROM h');
	$cur->query_safe('DECLARE m CURSOR WITH HOLD FOR SELECT v FROM big');
	$cur->query_safe('COMMIT');
	# temp_file_limit stops a sort in the middle of tempcrypt.c's own write
	# (fd.c throws): the held cursor's file, written before, must still read
	# back decrypted, and files written afterwards must still be encrypted
	$cur->query_safe("SET temp_file_limit = '64kB'");
	$cur->query('SELECT v FROM big ORDER BY v DESC OFFSET 29999');
	like(
		$cur->{stderr},
		qr/temporary file size exceeds "?temp_file_limit"?/
		,    # 18 quotes the name
		"$label: a sort stopped by temp_file_limit");
	$cur->{stderr} = '';    # query() leaves the error for the next query
	$cur->query_safe('RESET temp_file_limit');
	is($cur->query_safe('FETCH 2 FROM m'), "${tmpm}1\n${tmpm}2",
		"$label: the held cursor reads back after temp_file_limit stopped a sort"
	);
	$cur->query_safe('BEGIN');
	$cur->query_safe('DECLARE s2 CURSOR FOR SELECT v FROM big ORDER BY v');
	$cur->query_safe('FETCH 1 FROM s2');
	my ($pout, $perr) = ('', '');
	my $parallel = IPC::Run::start(
		[
			'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c', qq(
SET work_mem = '64kB'; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0; SET max_parallel_workers_per_gather = 2;
SET enable_mergejoin = off; SET enable_nestloop = off;
SELECT count(*) FROM bigger b JOIN big a ON a.k = b.k
 WHERE pg_sleep(CASE WHEN b.w = 1 THEN 6 ELSE 0 END) IS NOT NULL;)
		],
		'>',
		\$pout,
		'2>',
		\$perr);
	my $tmpdir = $node->data_dir . '/base/pgsql_tmp';
	my $filesets = 0;
	foreach (1 .. 300)
	{
		if (opendir(my $dh, $tmpdir))
		{
			$filesets = grep { /\.fileset$/ } readdir($dh);
			closedir($dh);
		}
		last if $filesets;
		usleep(50_000);
	}
	ok($filesets, "$label: parallel hash join has shared temporary files");

	# pg_stat_statements keeps utility statements' texts as they are
	my $pgss = $marker->('pgss', 'pg_stat');
	$node->safe_psql('postgres', "CREATE EXTENSION pg_stat_statements");
	$node->safe_psql('postgres', "CREATE TABLE \"$pgss\" (i int)");
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM pg_stat_statements WHERE query LIKE '%$pgss%'"
		),
		'1',
		"$label: pg_stat_statements reads its (encrypted) text file");

	my $found = scan_for_markers(\@markers, $node->data_dir);

	$parallel->finish;
	is($pout, "299990\n", "$label: parallel hash join result");
	is($cur->query_safe('FETCH 1 FROM s2'),
		"${tmpm}10", "$label: the spilled sort reads back");
	$cur->query_safe('COMMIT');
	is(scalar(split(/\n/, $cur->query_safe('FETCH ALL FROM m'))),
		29998, "$label: the held cursor reads back");
	$cur->quit;

	$writer->query_safe('COMMIT');
	$writer->quit;
	$listener->quit;
	$recv->kill_kill;
	$node->safe_psql('postgres', "COMMIT PREPARED '$gid'");
	is($node->safe_psql('postgres', "SELECT count(*) FROM t"),
		'20001', "$label: prepared and spilled transactions committed");
	# a clean shutdown dumps the texts into pg_stat/; a start reads them back
	$node->stop;
	my $dumped = scan_for_markers(\@markers, $node->data_dir . '/pg_stat');
	push @{ $found->{$_} }, @{ $dumped->{$_} } foreach keys %$dumped;
	$node->start;
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM pg_stat_statements WHERE query LIKE '%$pgss%'"
		),
		'1',
		"$label: pg_stat_statements texts survive a restart");
	$node->stop;
	return (\@markers, $found, \%where);
}

my ($markers, $found, $where) = run_scenario(0);
foreach my $m (@$markers)
{
	ok( (grep { m{/$where->{$m->{name}}/} }
			  @{ $found->{ $m->{name} } // [] }),
		"control: marker $m->{name} found in $where->{$m->{name}}");
}

($markers, $found) = run_scenario(1);
foreach my $m (@$markers)
{
	ok(!$found->{ $m->{name} },
		"encrypted: marker $m->{name} on disk nowhere")
	  or diag(join("\n", @{ $found->{ $m->{name} } }));
}

done_testing();
