# Copyright (c) 2026, pgcipher developers
#
# Encrypting a running cluster (design 9.7; enabling.c): a cluster initdb
# made without encryption, run by pgcipher's server, becomes aes-256 with
# pg_enable_encryption() while pgbench runs without a failed transaction.
# New writes are encrypted at once; the launcher encrypts the SLRUs and its
# workers every block; WAL switches at a segment boundary, and WAL from
# before is removed, never recycled.  A streaming standby follows with its
# own key command.  Then no marker is in any file of either node, while
# the same scan found them before (the control); pg_checksums counts no
# block under no key; a prepared transaction from before commits.  A
# backup taken half-way restores and finishes, and so does a standby
# promoted half-way, and so does a point-in-time recovery from the archive
# to a point half-way; pg_rewind brings the node it diverged from back as
# its standby; a logical subscriber gets the rows written on both sides of
# the switch; bad input changes nothing;
# a kill -9 of the server at each step leaves a cluster that starts,
# finishes and reads every row.
use strict;
use warnings FATAL => 'all';
use FindBin;
use File::Find;
use IPC::Run;
use Time::HiRes qw(usleep);
use lib "$FindBin::RealBin/..";
use LeakScan;
use OnlineOps;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $run = int(rand(1_000_000));
my @markers;
my $marker = sub {
	my $text = "PGCE_$_[0]_$run";
	push @markers, { name => $_[0], bytes => $text };
	return $text;
};

# the key command: a key in a file of this run
my $kek = PostgreSQL::Test::Utils::tempdir() . '/kek';
append_to_file($kek,
	join('', map { sprintf('%02x', int(rand(256))) } 1 .. 32) . "\n");
my $command = "cat $kek";

my $node = PostgreSQL::Test::Cluster->new('enable');
$node->init(allows_streaming => 1, extra => ['--data-checksums']);
$node->append_conf(
	'postgresql.conf', qq(
max_prepared_transactions = 5
autovacuum = off
checkpoint_timeout = 1h
max_wal_size = 1GB
));
$node->start;
my $pgdata = $node->data_dir;

# Every non-zero page of every relation fork of $datadir: how many carry
# no mark (in clear)
sub clear_pages
{
	return page_key_marks($_[0])->{clear};
}

sub wait_encrypted
{
	my ($n) = @_;
	return $n->poll_query_until('postgres',
		"SELECT current_setting('data_encryption') = 'aes-256'");
}

sub rows
{
	my ($n) = @_;
	return $n->safe_psql(
		'postgres',
		'SELECT count(*), sum(aid), sum(abalance) >= 0 FROM pgbench_accounts;
		 SELECT count(*), min(v) FROM marked;');
}

# --- the data: pgbench's tables, markers in a table, TOAST, an index, a
#     prepared transaction, a NOTIFY payload ---
command_ok(
	[
		'pgbench', '-i', '-s', '2',
		'-h', $node->host, '-p', $node->port,
		'postgres'
	],
	'pgbench -i');
$node->safe_psql(
	'postgres', qq(
CREATE TABLE marked (id int PRIMARY KEY, v text);
INSERT INTO marked SELECT g, '@{[ $marker->('row') ]}' || g FROM generate_series(1, 2000) g;
INSERT INTO marked VALUES (0, repeat('@{[ $marker->('toast') ]}', 500));
CREATE INDEX ON marked (v);
BEGIN; INSERT INTO marked VALUES (-1, '@{[ $marker->('prepared') ]}'); PREPARE TRANSACTION 'before';
NOTIFY ch, '@{[ $marker->('notify') ]}';
CHECKPOINT;));

# a streaming standby, with the key command it will need
$node->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('enable_standby');
$standby->init_from_backup($node, 'base', has_streaming => 1);
$standby->append_conf('postgresql.conf',
	"encryption_key_command = '$command'");
$node->safe_psql('postgres',
	"SELECT pg_create_physical_replication_slot('standby')");
$standby->append_conf('postgresql.conf', "primary_slot_name = 'standby'");
$standby->start;

# the control: not encrypted, the scan finds the markers
my $found = scan_for_markers(\@markers, $pgdata);
ok( defined $found->{row} && defined $found->{prepared},
	'control: the markers are found on disk before the encryption');

# --- bad input changes nothing ---
my ($ret, $out, $err) = $node->psql('postgres',
	"SELECT pg_enable_encryption('aes-512', '$command')");
like($err, qr/unknown cipher "aes-512"/, 'an unknown cipher is refused');
($ret, $out, $err) = $node->psql('postgres',
	"SELECT pg_enable_encryption('aes-256', '$command', 0, 0)");
like($err, qr/cost_limit must be between/, 'cost_limit 0 is refused');
($ret, $out, $err) =
  $node->psql('postgres', "SELECT pg_enable_encryption('aes-256', 'false')");
like($err, qr/key command/, 'a key command that fails is refused');
ok( !-e "$pgdata/pg_encryption/pages" && !-e "$pgdata/pg_encryption/keyring",
	'... and leaves no file behind');
($ret, $out, $err) = $standby->psql('postgres',
	"SELECT pg_enable_encryption('aes-256', '$command')");
like($err, qr/during recovery/, 'a standby refuses');
$node->safe_psql('postgres', 'CREATE ROLE plain LOGIN');
($ret, $out, $err) = $node->psql(
	'postgres',
	"SELECT pg_enable_encryption('aes-256', '$command')",
	extra_params => [ '-U', 'plain' ]);
like($err, qr/permission denied/, 'a role that is not superuser is refused');
is($node->safe_psql('postgres', 'SHOW data_encryption'),
	'off', 'still not encrypted');

# --- the encryption, under pgbench ---
my $bench = IPC::Run::start(
	[
		'pgbench', '-n', '-c', '4',
		'-T', '8', '-h', $node->host,
		'-p', $node->port, 'postgres'
	],
	'>',
	\my $bench_out,
	'2>',
	\my $bench_err);
usleep(1_000_000);
is( $node->safe_psql(
		'postgres',
		"SELECT pg_enable_encryption('aes-256', '$command', 0, 10000)"),
	'encrypting with aes-256',
	'pg_enable_encryption returns at once');
command_like(
	[ 'pg_controldata', $pgdata ],
	qr/Data encryption:\s+aes-256\n.*page keys:\s+generation 1 \(slot A\), encrypting/s,
	'pg_controldata: aes-256 at once, and the encryption running');
($ret, $out, $err) = $node->psql('postgres',
	"SELECT pg_enable_encryption('aes-128', '$command')");
like($err, qr/already encrypted/, 'a second enable is refused');
ok(wait_encrypted($node), 'the primary ends encrypted with aes-256');
$bench->finish;
like(
	$bench_out,
	qr/number of failed transactions: 0 /,
	'pgbench: no failed transaction');
like(
	slurp_file("$pgdata/pg_encryption/pages"),
	qr/operation none\n.*wal_switch_lsn (?!0\/0\n)/s,
	'the operation is over, WAL switched');

# a prepared transaction from before commits from its file in clear; one
# prepared after is encrypted
$node->safe_psql(
	'postgres', qq(
BEGIN; INSERT INTO marked VALUES (-2, '@{[ $marker->('prepared_after') ]}'); PREPARE TRANSACTION 'after';
CHECKPOINT;
COMMIT PREPARED 'before';));
is( $node->safe_psql('postgres', 'SELECT count(*) FROM marked WHERE id = -1'),
	'1',
	'the transaction prepared before commits');
$node->safe_psql('postgres', "COMMIT PREPARED 'after'");
# a large sort's temporary files and a parallel hash join's file set
$node->safe_psql('postgres',
	"SET work_mem = '64kB'; SELECT count(DISTINCT v) FROM marked");

# the standby follows
$node->wait_for_catchup($standby, 'replay');
ok(wait_encrypted($standby), 'the standby ends encrypted');
is(rows($standby), rows($node), 'the standby reads every row');
my $expected = rows($node);

# --- a backup taken half-way restores and finishes ---
my $half = PostgreSQL::Test::Cluster->new('enable_half');
$half->init(
	allows_streaming => 1,
	has_archiving => 1,
	extra => ['--data-checksums']);
# wal_keep_size: pg_rewind reads this node's WAL back to the last common
# checkpoint, which a timed checkpoint of a slow run would recycle (015 and
# 017 keep it so too)
$half->append_conf('postgresql.conf',
	"wal_level = logical\nwal_keep_size = 1GB");
$half->start;
$half->safe_psql('postgres',
	"CREATE TABLE t AS SELECT g FROM generate_series(1, 100000) g");
my $sub = logical_subscriber($half, 'enable_sub');
$half->safe_psql('postgres', "INSERT INTO logged VALUES (1, 'before')");
$half->backup('half_base');
my $promoted = PostgreSQL::Test::Cluster->new('enable_promoted');
$promoted->init_from_backup($half, 'half_base', has_streaming => 1);
$promoted->append_conf('postgresql.conf',
	"encryption_key_command = '$command'");
$promoted->start;
$half->safe_psql('postgres',
	"SELECT pg_enable_encryption('aes-256', '$command', 0, 10000); SELECT pg_encryption_pause();"
);
$half->safe_psql('postgres',
	"INSERT INTO logged VALUES (2, 'after the switch')");
my $halfway_wal = restore_point_halfway($half);
$half->backup('half');
$half->wait_for_catchup($promoted, 'replay');
$promoted->promote;
$half->safe_psql('postgres', 'SELECT pg_encryption_resume()');
ok(wait_encrypted($half), 'the node the backup came from finishes');
$half->safe_psql('postgres',
	"INSERT INTO logged VALUES (3, 'after the encryption')");
$half->wait_for_catchup('s');
is( $sub->safe_psql(
		'postgres', 'SELECT string_agg(side, \',\' ORDER BY id) FROM logged'),
	'before,after the switch,after the encryption',
	'a logical subscriber gets the rows of both sides of the switch');
$sub->stop;

# a point-in-time recovery from the archive to a point half-way: readable,
# and the encryption, paused there, finishes once resumed
my $pitr = recover_to_halfway($half, 'half_base', 'enable_pitr', $halfway_wal,
	"encryption_key_command = '$command'");
is( $pitr->safe_psql(
		'postgres',
		"SELECT count(*), sum(g) FROM t; SELECT string_agg(side, ',' ORDER BY id) FROM logged"
	),
	"100000|5000050000\nbefore,after the switch",
	'a point-in-time recovery to a point half-way reads every row');
$pitr->safe_psql('postgres', 'SELECT pg_encryption_resume()');
ok(wait_encrypted($pitr), 'the recovered cluster finishes the encryption');
$pitr->stop;
is(clear_pages($pitr->data_dir),
	0, 'no page of the recovered cluster in clear');
my $restored = PostgreSQL::Test::Cluster->new('enable_restored');
$restored->init_from_backup($half, 'half');
$restored->start;
$restored->safe_psql('postgres', 'SELECT pg_encryption_resume()');
ok(wait_encrypted($restored),
	'a backup taken half-way restores and finishes');
is($restored->safe_psql('postgres', 'SELECT count(*), sum(g) FROM t'),
	'100000|5000050000', 'the restored backup reads every row');
$promoted->safe_psql('postgres', 'SELECT pg_encryption_resume()');
ok(wait_encrypted($promoted), 'a standby promoted half-way finishes');
is($promoted->safe_psql('postgres', 'SELECT count(*), sum(g) FROM t'),
	'100000|5000050000', 'the promoted standby reads every row');

# pg_rewind: the node the standby was promoted from rewound onto it and
# back as its standby, across both encryptions
$half->stop;
rewind_onto($half, $promoted, 'pg_rewind across the online encryption');
$promoted->safe_psql('postgres', 'INSERT INTO t VALUES (0)');
$promoted->wait_for_catchup($half, 'replay');
is($half->safe_psql('postgres', 'SELECT count(*), sum(g) FROM t'),
	'100001|5000050000', 'the rewound node follows the promoted one');
$half->stop;
$promoted->stop;
is(clear_pages($promoted->data_dir),
	0, 'no page of the promoted standby in clear');
is(clear_pages($half->data_dir), 0, 'no page of the rewound node in clear');
$restored->stop;

# --- at rest: no marker anywhere, every block under a key ---
$node->safe_psql('postgres', 'CHECKPOINT');
$node->wait_for_catchup($standby, 'replay');
$standby->safe_psql('postgres', 'CHECKPOINT');
$node->stop;
$standby->stop;
command_like(
	[ 'pg_checksums', '--check', '-D', $pgdata ],
	qr/Blocks under another page key or none: 0/,
	'pg_checksums: every block under the page key');
is(clear_pages($pgdata), 0, 'no page of the primary in clear');
is(clear_pages($standby->data_dir), 0, 'no page of the standby in clear');
$found = scan_for_markers(\@markers, $pgdata, $standby->data_dir);
markers_nowhere($found, \@markers, 'after the encryption');
$node->start;
is(rows($node), $expected, 'the primary restarts and reads every row');
is($node->safe_psql('postgres', 'SHOW data_encryption'),
	'aes-256', 'SHOW data_encryption says aes-256 after a restart');
$node->stop;

# --- the disk: below encryption_min_free_space the workers wait, the
#     cluster serves, and the work goes on once the setting allows it (the
#     file systems' real free space, compared with a setting above it) ---
my $space = PostgreSQL::Test::Cluster->new('enable_space');
$space->init;
$space->append_conf(
	'postgresql.conf', qq(
encryption_min_free_space = '2147483647MB'
encryption_key_command_timeout = 2
));
$space->start;
# (first, a key command that hangs: stopped at the timeout, nothing done)
my $t0 = time;
($ret, $out, $err) = $space->psql('postgres',
	"SELECT pg_enable_encryption('aes-256', 'sleep 300; $command')");
like(
	$err,
	qr/encryption key command did not finish within 2 seconds/,
	'a key command that hangs is refused at the timeout');
cmp_ok(time - $t0, '<', 60, '... killed there, not waited for');
ok( !-e $space->data_dir . '/pg_encryption/pages'
	  && !-e $space->data_dir . '/pg_encryption/keyring',
	'... and leaves no file behind');
$space->safe_psql('postgres',
	"CREATE TABLE t AS SELECT g FROM generate_series(1, 20000) g");
$space->safe_psql('postgres',
	"SELECT pg_enable_encryption('aes-256', '$command', 0, 10000)");
ok( $space->poll_query_until(
		'postgres',
		"SELECT phase = 'waiting for disk space' FROM pg_stat_progress_encryption"
	),
	'disk space short: the workers wait');
ok( $space->wait_for_log(
		qr/the online encryption waits for disk space.*\n.*DETAIL:  \d+ MB are free in the file system of pg_wal or of the data directory/
	),
	'... and say why in the log');
$space->safe_psql('postgres', 'INSERT INTO t VALUES (0)');
is( $space->safe_psql(
		'postgres', "SELECT count(*), sum(g) FROM t; SHOW data_encryption"),
	"20001|200010000\noff",
	'meanwhile the cluster reads and writes, not encrypted yet');
$space->safe_psql('postgres',
	"ALTER SYSTEM SET encryption_min_free_space = '1MB'; SELECT pg_reload_conf()"
);
ok(wait_encrypted($space), 'space allowed again: the encryption finishes');
ok( $space->log_contains(
		'the online encryption goes on: disk space is free again'),
	'... and says so');
$space->stop;
is(clear_pages($space->data_dir), 0, 'no page in clear after the wait');

# --- kill -9 at every step: the server starts, finishes, reads all ---
for my $step (
	'enable-begun', 'keyring-written',
	'enabled', 'wal-switched',
	'slru-committed', 'database-done',
	'completed')
{
	my $n = PostgreSQL::Test::Cluster->new("enable_$step");
	$n->init;
	$n->append_conf('postgresql.conf', "max_prepared_transactions = 2");
	$n->start;
	$n->safe_psql('postgres',
		"CREATE TABLE t AS SELECT g FROM generate_series(1, 20000) g; CHECKPOINT"
	);
	local $ENV{PGCIPHER_TEST_DATA_ROTATION_CRASH_AT} = $step;
	$n->restart;
	my ($pid) = split /\n/, slurp_file($n->data_dir . '/postmaster.pid');
	$n->psql('postgres',
		"SELECT pg_enable_encryption('aes-256', '$command', 0, 10000)");
	my $dead;

	for (1 .. 300)
	{
		last if $dead = !kill(0, $pid);
		usleep(100_000);
	}
	ok($dead, "kill -9 at step $step: the server died there");
	$n->kill9;
	delete $ENV{PGCIPHER_TEST_DATA_ROTATION_CRASH_AT};
	ok($n->start(fail_ok => 1), "kill -9 at step $step: the server starts");
	if ($step eq 'enable-begun')
	{
		is($n->safe_psql('postgres', 'SHOW data_encryption'),
			'off', "kill -9 at step $step: not encrypted, nothing was");
		$n->safe_psql('postgres',
			"SELECT pg_enable_encryption('aes-256', '$command', 0, 10000)");
	}
	ok(wait_encrypted($n), "kill -9 at step $step: the encryption finishes");
	is($n->safe_psql('postgres', 'SELECT count(*), sum(g) FROM t'),
		'20000|200010000', "kill -9 at step $step: every row");
	$n->stop;
	is(clear_pages($n->data_dir),
		0, "kill -9 at step $step: no page in clear");
	command_like(
		[ 'pg_controldata', $n->data_dir ],
		qr/Data encryption:\s+aes-256/,
		"kill -9 at step $step: pg_control records aes-256");
}

done_testing();
