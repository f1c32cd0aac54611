# Copyright (c) 2026, pgcipher developers
#
# Online rotation of the page key (design 9.6): pg_rotate_data_keys()
# returns at once; background workers rewrite every block of every
# database under the new key while pgbench runs without a failed
# transaction; a relation holds pages of both keys meanwhile (each page's
# mark says which); the rotation pauses, resumes re-throttled, waits for
# temporary tables older than it, and ends with every page of every fork
# under the new key, the old key gone from the key ring, pg_checksums and
# amcheck satisfied (pg_checksums also counts every block under the new
# key, and finds a file of the old one) and no marker in any file.  A kill -9 of the server at
# every step of it (the test hook of datarotation.c) leaves a cluster that
# starts, resumes, finishes and reads every row.  The changes travel in the
# WAL (keylog.c): a standby follows its primary's rotation, and a base
# backup taken half-way restores, resumes and finishes it.
use strict;
use warnings FATAL => 'all';
use File::Copy;
use File::Find;
use FindBin;
use Time::HiRes qw(usleep);
use lib "$FindBin::RealBin/..";
use LeakScan;
use PostgreSQL::Test::BackgroundPsql;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('rotate_data');
$node->init(
	allows_streaming => 1,
	extra => [ '--data-checksums', LeakScan::encryption_options('aes-256') ]);
# in-place tablespaces: the standbys on this host replay CREATE TABLESPACE;
# the standbys stream without a slot, and the rotations' full-page images
# make checkpoints come often: keep the WAL they have not received
$node->append_conf('postgresql.conf',
	"max_worker_processes = 16\nallow_in_place_tablespaces = on\nwal_keep_size = 1GB\n"
);
$node->start;
my $pgdata = $node->data_dir;
my $bin = $node->config_data('--bindir');

# Every non-zero page by the slot its mark names (LeakScan)
sub page_marks
{
	my ($datadir) = @_;
	return page_key_marks($datadir // $pgdata);
}

sub progress
{
	my ($col, $n) = @_;
	return ($n // $node)
	  ->safe_psql('postgres', "SELECT $col FROM pg_stat_progress_encryption");
}

# Wait until no rotation runs and no unused page key is left in the ring
sub wait_done
{
	my ($what, $n) = @_;
	$n //= $node;
	for (1 .. 600)
	{
		my ($ret, $out) = $n->psql('postgres',
			"SELECT operation || ' ' || phase FROM pg_stat_progress_encryption"
		);
		return 1 if $ret == 0 && $out eq 'none idle';
		usleep(100_000);
	}
	diag("$what: still " . progress('operation, phase', $n));
	return 0;
}

sub page_state
{
	my ($datadir) = @_;
	return scalar slurp_file(($datadir // $pgdata) . '/pg_encryption/pages');
}

# What pgbench does not change; the unlogged table too but after a crash
my $checks = sub {
	my ($n, $crashed) = @_;
	return $n->safe_psql(
		'postgres',
		'SELECT count(*), sum(aid), sum(bid) FROM pgbench_accounts;
		 SELECT count(*), string_agg(v, \',\' ORDER BY id) FROM marked;
		 SELECT last_value FROM counter;
		 SELECT count(*) FROM mv;'
		  . ($crashed ? '' : 'SELECT count(*) FROM unlogged_rows;'))
	  . "\n"
	  . $n->safe_psql('other', 'SELECT count(*), sum(g) FROM t');
};

# --- data: pgbench's tables, markers, every kind of relation ---
command_ok(
	[
		'pgbench', '-i', '-s', '3',
		'-h', $node->host, '-p', $node->port,
		'postgres'
	],
	'pgbench -i');
my @markers = map {
	{
		name => "marker$_",
		bytes => "PGCIPHER-ROTATE-MARKER-$_-" . ('z' x 20)
	}
} 1 .. 3;
$node->safe_psql(
	'postgres',
	"CREATE TABLE marked (id int PRIMARY KEY, v text);
	 INSERT INTO marked VALUES "
	  . join(',', map { "($_, '$markers[$_-1]{bytes}')" } 1 .. 3) . ";
	 CREATE UNLOGGED TABLE unlogged_rows AS SELECT g FROM generate_series(1, 20000) g;
	 CREATE INDEX ON unlogged_rows (g);
	 CREATE SEQUENCE counter; SELECT setval('counter', 4242);
	 CREATE MATERIALIZED VIEW mv AS SELECT aid FROM pgbench_accounts WHERE aid % 7 = 0;
	 CREATE DATABASE other;
	 CHECKPOINT;");
$node->safe_psql('other',
	'CREATE TABLE t AS SELECT g FROM generate_series(1, 50000) g');
my $expected = $checks->($node);
my $expected_crashed = $checks->($node, 1);

# A node that took the rotation over half-way finishes it: every page under
# slot B, every row as on the primary
my $finished = sub {
	my ($n, $what) = @_;
	ok(wait_done($what, $n), "the $what finishes the rotation");
	my $m = page_marks($n->data_dir);
	is_deeply(
		$m,
		{ A => 0, B => $m->{B}, clear => 0 },
		"the ${what}'s pages all under slot B ($m->{B})");
	is($checks->($n, 1), $expected_crashed, "the $what reads every row");
};

# a standby made before the rotation, which follows it through the WAL,
# and one promoted half-way, which finishes it
$node->backup('before');
my $standby = PostgreSQL::Test::Cluster->new('rotate_standby');
$standby->init_from_backup($node, 'before', has_streaming => 1);
$standby->start;
my $promoted = PostgreSQL::Test::Cluster->new('rotate_promoted');
$promoted->init_from_backup($node, 'before', has_streaming => 1);
$promoted->start;
my $before = page_marks();
ok( $before->{A} > 0 && $before->{B} == 0 && $before->{clear} == 0,
	"before: every page marked under slot A ($before->{A})");
like(
	`$bin/pg_controldata $pgdata`,
	qr/Data encryption page keys:\s+generation 1 \(slot A\), no operation/,
	'pg_controldata: generation 1');

# --- refusals: nothing changes ---
my $state_before_refusals = page_state();
$node->safe_psql('postgres', 'CREATE ROLE alice LOGIN');
my ($ret, $out, $err) = $node->psql(
	'postgres',
	'SELECT pg_rotate_data_keys()',
	extra_params => [ '-U', 'alice' ]);
like(
	$err,
	qr/permission denied for function pg_rotate_data_keys/,
	'only superusers rotate');
($ret, $out, $err) =
  $node->psql('postgres', 'SELECT pg_rotate_data_keys(2, 0)');
like($err, qr/cost_limit must be between 1 and 10000/,
	'cost_limit 0 refused');
($ret, $out, $err) =
  $node->psql('postgres', 'SELECT pg_rotate_data_keys(1000, 200)');
like(
	$err,
	qr/cost_delay must be between 0 and 100 milliseconds/,
	'cost_delay 1000 refused');
($ret, $out, $err) = $node->psql('postgres', 'SELECT pg_encryption_pause()');
like($err, qr/no rotation of the data keys is running/, 'nothing to pause');
# a key command that fails: refused before anything is written
my ($keyfile) =
  $node->safe_psql('postgres', 'SHOW encryption_key_command') =~
  /^cat (\S+)$/;
chmod 0, $keyfile;
($ret, $out, $err) = $node->psql('postgres', 'SELECT pg_rotate_data_keys()');
chmod 0600, $keyfile;
like(
	$err,
	qr/encryption key command .* failed/,
	'a failing key command refuses the rotation');
is(page_state(), $state_before_refusals, 'a refused rotation wrote no state');
is(page_marks()->{B}, 0, 'refusals changed no page');

# --- the rotation under pgbench, paused, resumed, waiting for a temp table ---
my $temp = $node->background_psql('postgres');
$temp->query_safe(
	'CREATE TEMP TABLE old_temp AS SELECT g FROM generate_series(1, 1000) g');
# a transaction older than the rotation writes a new table's pages under
# the old key, in a file no catalog snapshot shows until it commits
my $older = $node->background_psql('postgres');
$older->query_safe(
	'BEGIN; CREATE TABLE written_before AS SELECT g, repeat(\'x\', 200) AS pad FROM generate_series(1, 30000) g'
);
my ($pgbench_out, $pgbench_err) = ('', '');
my $pgbench = IPC::Run::start(
	[
		'pgbench', '-n', '-c', '2',
		'-T', '25', '-h', $node->host,
		'-p', $node->port, 'postgres'
	],
	'>',
	\$pgbench_out,
	'2>',
	\$pgbench_err);
sleep 1;
is( $node->safe_psql('postgres', 'SELECT pg_rotate_data_keys(10, 20)'),
	'rotating to generation 2',
	'pg_rotate_data_keys returns at once');
($ret, $out, $err) = $node->psql('postgres', 'SELECT pg_rotate_data_keys()');
like(
	$err,
	qr/a rotation of the data keys is already running/,
	'a second rotation refused while one runs');
like(
	`$bin/pg_controldata $pgdata`,
	qr/Data encryption page keys:\s+generation 2 \(slot B\), rotating/,
	'pg_controldata: rotating to generation 2');
my $older_wait;

for (1 .. 100)
{
	last
	  if $older_wait =
	  (progress('phase') eq 'waiting for older transactions');
	usleep(100_000);
}
ok($older_wait, 'the rotation waits for transactions older than it');
$older->query_safe(
	'INSERT INTO written_before SELECT g, \'after\' FROM generate_series(30001, 31000) g'
);
$older->query_safe('COMMIT');
$older->quit;
my $mixed;
for (1 .. 300)
{
	my $m = page_marks();
	if ($m->{A} > 0 && $m->{B} > 0) { $mixed = $m; last; }
	usleep(100_000);
}
ok($mixed, 'relations hold pages under both keys while the workers run');
my $rewriting;
for (1 .. 100)
{
	last if $rewriting = (progress('phase') eq 'rewriting');
	usleep(100_000);
}
ok($rewriting, 'progress: rewriting');
$node->safe_psql('postgres', 'SELECT pg_encryption_pause()');
usleep(1_500_000);
is(progress('phase'), 'paused', 'progress: paused');
my $done_paused = progress('blocks_rewritten');
usleep(1_500_000);
is(progress('blocks_rewritten'), $done_paused, 'paused: no block rewritten');
$node->backup('halfway');

# what rewrites, copies or moves files while the rotation runs: every file
# it makes is written under the new key, and a database copied as files
# from a template is one more database for the workers
$node->safe_psql('postgres', "CREATE TABLESPACE ts1 LOCATION ''");
$node->safe_psql('postgres',
	'CREATE DATABASE copied TEMPLATE other STRATEGY FILE_COPY');
$node->safe_psql('postgres',
	'CREATE DATABASE logged TEMPLATE other STRATEGY WAL_LOG');
$node->safe_psql('postgres', 'VACUUM FULL pgbench_branches');
$node->safe_psql('postgres',
	'CLUSTER pgbench_tellers USING pgbench_tellers_pkey');
$node->safe_psql('postgres',
	'REINDEX INDEX CONCURRENTLY pgbench_accounts_pkey');
$node->safe_psql('postgres', 'ALTER TABLE marked SET TABLESPACE ts1');
$node->safe_psql('postgres',
	'TRUNCATE unlogged_rows; INSERT INTO unlogged_rows SELECT generate_series(1, 20000)'
);
$node->wait_for_catchup($promoted);
$promoted->promote;
like(
	page_state($promoted->data_dir),
	qr/generation 2\noperation rotate\nmarked yes\npaused yes/,
	'a standby promoted half-way holds the rotation, paused, through the WAL'
);
$promoted->safe_psql('postgres', 'SELECT pg_encryption_resume(0, 10000)');
is($checks->($node), $expected,
	'paused: every row readable from a mixed cluster');
$node->safe_psql('postgres', 'SELECT pg_encryption_resume(0, 10000)');
is(progress('cost_limit'), '10000', 'resumed with a new throttle');
my $waiting;

for (1 .. 600)
{
	last if $waiting = (progress('phase') eq 'waiting for temporary tables');
	usleep(100_000);
}
ok($waiting, 'the rotation waits for a temporary table older than it');
is($temp->query_safe('SELECT count(*) FROM old_temp'),
	'1000', 'the older temporary table reads while it waits');
$temp->quit;
ok(wait_done('first rotation'), 'the rotation completes');
{
	my ($hi, $lo) = page_state() =~ m{wal_switch_lsn ([0-9A-F]+)/([0-9A-F]+)};
	ok( defined($lo)
		  && (hex($hi) * 2**32 + hex($lo)) % (16 * 1024 * 1024) == 0
		  && hex($hi) + hex($lo) > 0,
		"under pgbench, new WAL switched to the new WAL key at a segment boundary ($hi/$lo)"
	);
}
$pgbench->finish;
is($?, 0, 'pgbench ran through the rotation');
like(
	$pgbench_out,
	qr/number of failed transactions: 0 /,
	'pgbench: no failed transaction');

my $after = page_marks();
is_deeply(
	$after,
	{ A => 0, B => $after->{B}, clear => 0 },
	"every page of every fork under slot B ($after->{B})");
like(
	page_state(),
	qr/generation 2\noperation none\nmarked yes\n/,
	'pg_encryption/pages: generation 2, marked');
like(
	slurp_file($node->logfile),
	qr/the page key of generation 1 left the key ring/,
	'the old page key left the key ring');
unlike(
	slurp_file($node->logfile),
	qr/data key rotation worker .* failed|ERROR: .*xlog flush/,
	'no worker failed on the way');
is($checks->($node), $expected, 'every row as before');
is( $node->safe_psql(
		'postgres',
		'SELECT count(*), sum(g), count(*) FILTER (WHERE pad = \'after\') FROM written_before'
	),
	'31000|480515500|1000',
	'a table an older transaction wrote before the switch reads under the new key'
);
$node->safe_psql('postgres', 'CREATE EXTENSION amcheck');
is( $node->safe_psql(
		'postgres',
		"SELECT count(bt_index_check(c.oid, true)) > 0 FROM pg_index i
		 JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
		 WHERE a.amname = 'btree' AND c.relpersistence <> 't'"),
	't',
	'amcheck: every btree index intact');
$node->safe_psql('postgres', 'CHECKPOINT');
my $found = LeakScan::scan_for_markers(\@markers, $pgdata);
LeakScan::markers_nowhere($found, \@markers, 'after the rotation');

# the control: the same rows in an unencrypted cluster, which the same scan
# must find, so that the scan above can fail
my $control = PostgreSQL::Test::Cluster->new('rotate_control');
$control->init;
$control->start;
$control->safe_psql(
	'postgres',
	"CREATE TABLE marked (id int PRIMARY KEY, v text);
	 INSERT INTO marked VALUES "
	  . join(',', map { "($_, '$markers[$_-1]{bytes}')" } 1 .. 3) . ';
	 CHECKPOINT');
my $control_found = LeakScan::scan_for_markers(\@markers, $control->data_dir);
ok(scalar(@{ $control_found->{ $_->{name} } // [] }),
	"control: the scan finds $_->{name} in an unencrypted cluster")
  for @markers;
$control->stop;
$node->stop;
my ($stdout, $stderr);
ok( IPC::Run::run(
		[ 'pg_checksums', '--check', '-D', $pgdata ],
		'>', \$stdout, '2>', \$stderr),
	'pg_checksums: every checksum over the new ciphertext verifies');
like(
	$stdout,
	qr/Blocks under page key generation 2 \(slot B\): [1-9]\d*\nBlocks under another page key or none: 0\n/,
	'pg_checksums: every block under generation 2, none under another key');

# a file restored from a backup of the old generation: pg_checksums finds it
my $authid = "$pgdata/global/1260";
my $saved = PostgreSQL::Test::Utils::tempdir() . '/1260';
copy($authid, $saved) or die $!;
copy($node->backup_dir . '/before/global/1260', $authid) or die $!;
my $rc = IPC::Run::run([ 'pg_checksums', '--check', '-D', $pgdata ],
	'>', \$stdout, '2>', \$stderr);
ok( !$rc
	  && $stdout =~ /Blocks under another page key or none: [1-9]/
	  && $stderr =~
	  /blocks are under another page key than generation 2, the one "pg_encryption\/pages" says/,
	'pg_checksums fails on a file of the old generation restored from a backup'
) or diag("pg_checksums: $stdout\n$stderr");
copy($saved, $authid) or die $!;
$node->start;
is($checks->($node), $expected, 'after a restart, every row as before');

# --- the standby followed through the WAL ---
$node->wait_for_catchup($standby);
like(
	page_state($standby->data_dir),
	qr/generation 2\noperation none\n/,
	'the standby follows: generation 2, done');
$standby->safe_psql('postgres', 'CHECKPOINT')
  ;    # a restartpoint writes its pages
my $sm = page_marks($standby->data_dir);
is_deeply(
	$sm,
	{ A => 0, B => $sm->{B}, clear => 0 },
	"the standby's pages, written by its restartpoint, all under slot B ($sm->{B})"
);
is($checks->($standby, 1), $expected_crashed, 'the standby reads every row');
$standby->restart;
is($checks->($standby, 1),
	$expected_crashed, 'the standby restarts with the key ring it replayed');

# --- a base backup taken half-way restores, resumes and finishes ---
my $restored = PostgreSQL::Test::Cluster->new('rotate_restored');
$restored->init_from_backup($node, 'halfway');
$restored->start;
like(
	page_state($restored->data_dir),
	qr/generation 2\noperation rotate\nmarked yes\npaused yes/,
	'the half-way backup restores paused half-way');
$restored->safe_psql('postgres', 'SELECT pg_encryption_resume(0, 10000)');
$finished->($restored, 'restored backup');
$restored->stop;

# --- the standby promoted half-way finished it ---
$finished->($promoted, 'promoted standby');
$promoted->stop;
for my $db ('copied', 'logged')
{
	is($node->safe_psql($db, 'SELECT count(*), sum(g) FROM t'),
		'50000|1250025000', "database $db, made during the rotation, reads");
}
ok( scalar(glob("$pgdata/pg_tblspc/*/PG_*/*/*")),
	'the scans counted a tablespace\'s files too');

# --- a second rotation returns to slot A, unthrottled ---
$node->safe_psql('postgres', 'SELECT pg_rotate_data_keys(0, 10000)');
ok(wait_done('second rotation'), 'a second rotation completes');
$after = page_marks();
is_deeply(
	$after,
	{ A => $after->{A}, B => 0, clear => 0 },
	'second rotation: every page under slot A');
is($checks->($node), $expected, 'second rotation: every row as before');

# --- kill -9 at every step: the server starts, resumes and completes ---
for my $step (
	'keyring-written', 'switched',
	'wal-switched', 'database-rewritten',
	'database-done', 'completed',
	'old-key-dropped')
{
	my ($gen) = page_state() =~ /generation (\d+)/;
	local $ENV{PGCIPHER_TEST_DATA_ROTATION_CRASH_AT} = $step;
	$node->restart;
	my ($pid) = split /\n/, slurp_file("$pgdata/postmaster.pid");
	$node->psql('postgres', 'SELECT pg_rotate_data_keys(0, 10000)');
	my $dead;
	for (1 .. 300)
	{
		last if $dead = !kill(0, $pid);
		usleep(100_000);
	}
	ok($dead, "kill -9 at step $step: the server died there");
	$node->kill9;
	delete $ENV{PGCIPHER_TEST_DATA_ROTATION_CRASH_AT};
	my $started;
	for (1 .. 50)
	{
		last if $started = $node->start(fail_ok => 1);
		usleep(200_000);
	}
	ok($started, "kill -9 at step $step: the server starts");
	ok(wait_done($step),
		"kill -9 at step $step: the work resumes and completes");
	my ($now) = page_state() =~ /generation (\d+)/;
	my $want = $step eq 'keyring-written' ? $gen : $gen + 1;
	is($now, $want, "kill -9 at step $step: generation $want");
	my $slot = $want % 2 ? 'A' : 'B';
	my $m = page_marks();
	is( $m->{$slot} > 0
		  && $m->{clear} == 0
		  && $m->{ $slot eq 'A' ? 'B' : 'A' } == 0,
		1,
		"kill -9 at step $step: every page under slot $slot");
	is($checks->($node, 1),
		$expected_crashed,
		"kill -9 at step $step: every row as before (unlogged ones reset)");
	like(
		page_state(),
		qr/wal_generation $want\nwal_switch_lsn (?!0\/0\n)/,
		"kill -9 at step $step: new WAL under WAL generation $want, switched"
	);
}

done_testing();
