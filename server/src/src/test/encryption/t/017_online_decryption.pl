# Copyright (c) 2026, pgcipher developers
#
# Decrypting a running cluster, the way back (design 9.7; enabling.c):
# pg_disable_encryption() on an encrypted cluster while pgbench runs
# without a failed transaction.  New pages and files are written in clear
# at once, WAL from the next segment; the launcher decrypts the SLRUs and
# its workers every block; once no WAL from before the switch is needed,
# a two-phase file written encrypted is rewritten in clear, encryption is
# turned off, pg_control records it and the key files are removed: the
# cluster restarts without a key command, every page without a mark and
# readable by stock tools (pg_checksums).  A streaming standby follows and
# finishes when promoted, and so do a standby promoted half-way and a
# point-in-time recovery to a point half-way; pg_rewind brings the node
# it diverged from back as its standby; a logical subscriber gets the
# rows of both sides of the switch.  Bad input changes nothing; a kill -9 of the
# server at each step leaves a cluster that starts, finishes and reads
# every row.
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

my @encryption = LeakScan::encryption_options('aes-256');
my ($command) =
  map { /^--encryption-key-command=(.*)$/ ? $1 : () } @encryption;

my $node = PostgreSQL::Test::Cluster->new('disable');
$node->init(
	allows_streaming => 1,
	extra => [ '--data-checksums', @encryption ]);
$node->append_conf(
	'postgresql.conf', qq(
max_prepared_transactions = 5
autovacuum = off
));
$node->start;
my $pgdata = $node->data_dir;

# Every non-zero page of every relation fork of $datadir: how many carry
# a key mark
sub marked_pages
{
	my $m = page_key_marks($_[0]);
	return $m->{A} + $m->{B};
}

sub wait_decrypted
{
	my ($n) = @_;
	for (1 .. 900)
	{
		return 1 unless -e $n->data_dir . '/pg_encryption/keyring';
		usleep(100_000);
	}
	return 0;
}

sub rows
{
	my ($n) = @_;
	return $n->safe_psql('postgres',
		'SELECT count(*), sum(aid) FROM pgbench_accounts; SELECT count(*) FROM marked;'
	);
}

command_ok(
	[
		'pgbench', '-i', '-s', '2',
		'-h', $node->host, '-p', $node->port,
		'postgres'
	],
	'pgbench -i');
$node->safe_psql('postgres',
	"CREATE TABLE marked AS SELECT g AS id, 'PGCD_' || g AS v FROM generate_series(1, 2000) g"
);

# refused while the data keys rotate
$node->safe_psql('postgres', 'SELECT pg_rotate_data_keys(0, 10000)');
my ($ret, $out, $err) =
  $node->psql('postgres', 'SELECT pg_disable_encryption()');
like($err, qr/is being re-keyed/, 'refused while the data keys rotate');
$node->poll_query_until('postgres',
	"SELECT operation || ' ' || phase = 'none idle' FROM pg_stat_progress_encryption"
);

$node->safe_psql(
	'postgres', q(
BEGIN; INSERT INTO marked VALUES (-1, 'prepared'); PREPARE TRANSACTION 'before';
CHECKPOINT;));
$node->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('disable_standby');
$standby->init_from_backup($node, 'base', has_streaming => 1);
$standby->start;

# --- bad input changes nothing ---
($ret, $out, $err) =
  $node->psql('postgres', 'SELECT pg_disable_encryption(0, 0)');
like($err, qr/cost_limit must be between/, 'cost_limit 0 is refused');
($ret, $out, $err) =
  $standby->psql('postgres', 'SELECT pg_disable_encryption()');
like($err, qr/during recovery/, 'a standby refuses');
is($node->safe_psql('postgres', 'SHOW data_encryption'),
	'aes-256', 'still encrypted');

# --- the decryption, under pgbench ---
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
is($node->safe_psql('postgres', 'SELECT pg_disable_encryption(0, 10000)'),
	'decrypting', 'pg_disable_encryption returns at once');
($ret, $out, $err) = $node->psql('postgres',
	"SELECT pg_enable_encryption('aes-128', '$command')");
like($err, qr/already encrypted/, 'an enable meanwhile is refused');
# a transaction prepared before holds the workers back (it may have
# written encrypted pages into a file no catalog shows yet); it commits
# from its encrypted state file
ok( $node->poll_query_until(
		'postgres',
		"SELECT phase = 'waiting for older transactions' FROM pg_stat_progress_encryption"
	),
	'the workers wait for the transaction prepared before');
$node->safe_psql('postgres', "COMMIT PREPARED 'before'");
$bench->finish;
like(
	$bench_out,
	qr/number of failed transactions: 0 /,
	'pgbench: no failed transaction');
$node->wait_for_catchup($standby, 'replay');
ok(wait_decrypted($node), 'the key files are removed');
is($node->safe_psql('postgres', 'SHOW data_encryption'),
	'off', 'SHOW data_encryption says off');
is( $node->safe_psql('postgres', 'SELECT count(*) FROM marked WHERE id = -1'),
	'1',
	'the transaction prepared before committed');
my $expected = rows($node);

# the standby follows, and finishes once promoted
$node->wait_for_catchup($standby, 'replay');
is(rows($standby), $expected, 'the standby reads every row');
$standby->promote;
ok(wait_decrypted($standby), 'the promoted standby removes its key files');
is(rows($standby), $expected, 'the promoted standby reads every row');
$standby->stop;
is(marked_pages($standby->data_dir), 0, 'no page of the standby under a key');

# --- at rest: stock bytes, no key needed ---
$node->safe_psql('postgres', 'CHECKPOINT');
$node->stop;
command_like(
	[ 'pg_controldata', $pgdata ],
	qr/^Data encryption:\s+off$/m,
	'pg_controldata: off');
command_ok(
	[ 'pg_checksums', '--check', '-D', $pgdata ],
	'pg_checksums: every block verifies');
is(marked_pages($pgdata), 0, 'no page under a key');
my $found = scan_for_markers([ { name => 'row', bytes => 'PGCD_1999' } ],
	"$pgdata/base");
ok(defined $found->{row}, 'the rows are in clear on disk again');
$node->append_conf('postgresql.conf', "encryption_key_command = ''");
$node->start;
is(rows($node), $expected,
	'it restarts without a key command and reads every row');
$node->stop;

# --- half-way: a logical subscriber, a point-in-time recovery to a point
#     half-way and pg_rewind onto a standby promoted half-way ---
my $half = PostgreSQL::Test::Cluster->new('disable_half');
$half->init(
	allows_streaming => 'logical',
	has_archiving => 1,
	extra => [ '--data-checksums', @encryption ]);
$half->start;
$half->safe_psql(
	'postgres', q(
CREATE TABLE t AS SELECT g FROM generate_series(1, 100000) g;));
my $sub = logical_subscriber($half, 'disable_sub');
$half->safe_psql('postgres', "INSERT INTO logged VALUES (1, 'before')");
$half->backup('half_base');
my $promoted = PostgreSQL::Test::Cluster->new('disable_promoted');
$promoted->init_from_backup($half, 'half_base', has_streaming => 1);
$promoted->start;
$half->safe_psql('postgres',
	'SELECT pg_disable_encryption(0, 10000); SELECT pg_encryption_pause()');
$half->safe_psql('postgres',
	"INSERT INTO logged VALUES (2, 'after the switch')");
my $halfway_wal = restore_point_halfway($half);
$half->wait_for_catchup($promoted, 'replay');
$promoted->promote;
$half->safe_psql('postgres', 'SELECT pg_encryption_resume()');
ok(wait_decrypted($half), 'the node decrypted half-way finishes');
$half->safe_psql('postgres',
	"INSERT INTO logged VALUES (3, 'after the decryption')");
$half->wait_for_catchup('s');
is( $sub->safe_psql(
		'postgres', "SELECT string_agg(side, ',' ORDER BY id) FROM logged"),
	'before,after the switch,after the decryption',
	'a logical subscriber gets the rows of both sides of the switch');
$sub->stop;

my $pitr =
  recover_to_halfway($half, 'half_base', 'disable_pitr', $halfway_wal);
is( $pitr->safe_psql(
		'postgres',
		"SELECT count(*), sum(g) FROM t; SELECT string_agg(side, ',' ORDER BY id) FROM logged"
	),
	"100000|5000050000\nbefore,after the switch",
	'a point-in-time recovery to a point half-way reads every row');
$pitr->safe_psql('postgres', 'SELECT pg_encryption_resume()');
ok(wait_decrypted($pitr), 'the recovered cluster finishes the decryption');
$pitr->stop;
is(marked_pages($pitr->data_dir),
	0, 'no page of the recovered cluster under a key');

$promoted->safe_psql('postgres', 'SELECT pg_encryption_resume()');
ok(wait_decrypted($promoted), 'the standby promoted half-way finishes');
$promoted->stop;
is(marked_pages($promoted->data_dir),
	0, 'no page of the promoted standby under a key');
$half->stop;

# pg_rewind of a node stopped half-way (its key ring still there: WAL from
# before the switch stays encrypted, and once a decryption is over the
# keys that read it are gone, design 9.7) onto the standby promoted from
# it, which then finishes; the rewound node follows it
my $old = PostgreSQL::Test::Cluster->new('disable_rewound');
$old->init(
	allows_streaming => 1,
	extra => [ '--data-checksums', @encryption ]);
$old->append_conf('postgresql.conf', 'wal_keep_size = 1GB');
$old->start;
$old->safe_psql('postgres',
	'CREATE TABLE t AS SELECT g FROM generate_series(1, 100000) g');
$old->backup('rewind_base');
my $new = PostgreSQL::Test::Cluster->new('disable_new_primary');
$new->init_from_backup($old, 'rewind_base', has_streaming => 1);
$new->start;
$old->safe_psql('postgres',
	'SELECT pg_disable_encryption(0, 10000); SELECT pg_encryption_pause()');
$old->safe_psql('postgres', 'INSERT INTO t VALUES (1)');
$old->wait_for_catchup($new, 'replay');
$new->promote;
$old->safe_psql('postgres', 'INSERT INTO t VALUES (-1)');    # lost
$old->stop;
rewind_onto($old, $new, 'pg_rewind across the online decryption');
$new->safe_psql('postgres', 'SELECT pg_encryption_resume()');
ok(wait_decrypted($new), 'the new primary finishes the decryption');
$new->safe_psql('postgres', 'INSERT INTO t VALUES (0)');
$new->wait_for_catchup($old, 'replay');
is($old->safe_psql('postgres', 'SELECT count(*), sum(g) FROM t'),
	'100002|5000050001', 'the rewound node follows the new primary');
$old->stop;
$new->stop;
is(marked_pages($new->data_dir), 0, 'no page of the new primary under a key');

# --- kill -9 at every step: the server starts, finishes, reads all ---
for my $step (
	'disable-begun', 'wal-switched', 'slru-committed', 'database-done',
	'decrypted', 'control-off')
{
	my $n = PostgreSQL::Test::Cluster->new("disable_$step");
	$n->init(extra => [@encryption]);
	$n->start;
	$n->safe_psql('postgres',
		"CREATE TABLE t AS SELECT g FROM generate_series(1, 20000) g; CHECKPOINT"
	);
	local $ENV{PGCIPHER_TEST_DATA_ROTATION_CRASH_AT} = $step;
	$n->restart;
	my ($pid) = split /\n/, slurp_file($n->data_dir . '/postmaster.pid');
	$n->psql('postgres', 'SELECT pg_disable_encryption(0, 10000)');
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
	ok(wait_decrypted($n), "kill -9 at step $step: the decryption finishes");
	is($n->safe_psql('postgres', 'SELECT count(*), sum(g) FROM t'),
		'20000|200010000', "kill -9 at step $step: every row");
	$n->stop;
	is(marked_pages($n->data_dir),
		0, "kill -9 at step $step: no page under a key");
	command_like(
		[ 'pg_controldata', $n->data_dir ],
		qr/^Data encryption:\s+off$/m,
		"kill -9 at step $step: pg_control records off");
}

done_testing();
