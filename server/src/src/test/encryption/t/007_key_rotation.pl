# Copyright (c) 2026, pgcipher developers
#
# Online rotation of the key-encryption key (design 9.1):
# pg_rotate_encryption_key() re-wraps the data keys under a new KEK in
# milliseconds, and a kill -9 of the server at every step of it leaves a
# cluster that starts with the old KEK or with the new one, never neither;
# the start-up error names the fingerprint of the KEK it expects.  Standbys
# are independent of their primary's rotation and rotate on their own; a
# base backup carries the key ring and command of its moment, so an older
# backup needs the older KEK; pg_rewind hands the rewound node its source's
# key ring and command.  A KEK that its key command no longer prints (a KMS
# key rolled) is replaced while the server runs: the old command never runs.
use strict;
use warnings FATAL => 'all';
use File::Copy;
use FindBin;
use Time::HiRes qw(usleep);
use lib "$FindBin::RealBin/..";
use KeyRotationTap;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $keydir = PostgreSQL::Test::Utils::tempdir();
my %key = (
	k1 => ('a1' x 32),
	k2 => 'a passphrase for the second KEK',
	k3 => ('c3' x 32),
	k4 => 'the fourth key-encryption passphrase',);
for my $k (keys %key)
{
	PostgreSQL::Test::Utils::append_to_file("$keydir/$k", "$key{$k}\n");
}
sub cmd { return "cat $keydir/$_[0]"; }

my $node = PostgreSQL::Test::Cluster->new('rotate');
$node->init(
	allows_streaming => 1,
	extra => [
		'--data-checksums', '--encryption=aes-256',
		'--encryption-key-command=' . cmd('k1'), '--allow-group-access',
		'--encryption-key-command-timeout=45'
	]);
$node->append_conf("postgresql.conf",
	"wal_log_hints = on\nwal_keep_size = 256MB\n");
$node->start;
$node->safe_psql(
	'postgres',
	"CREATE TABLE t (id int PRIMARY KEY, v text);
	 INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 1000) g;");
my $pgdata = $node->data_dir;
my $rows =
  sub { $_[0]->safe_psql('postgres', 'SELECT count(*), sum(id) FROM t') };
my $expected_rows = $rows->($node);

# --- refusals: nothing written ---
my ($ret, $out, $err) =
  $node->psql('postgres', "SELECT pg_rotate_encryption_key('')");
like($err, qr/the new key command must not be empty/,
	'empty command refused');
($ret, $out, $err) =
  $node->psql('postgres', "SELECT pg_rotate_encryption_key('exit 3')");
like(
	$err,
	qr/encryption key command "exit 3" failed/,
	'failing new command refused with its own error');
$node->safe_psql('postgres', 'CREATE ROLE alice LOGIN');
($ret, $out, $err) = $node->psql(
	'postgres',
	"SELECT pg_rotate_encryption_key('" . cmd('k2') . "')",
	extra_params => [ '-U', 'alice' ]);
like(
	$err,
	qr/permission denied to rotate the key-encryption key/,
	'only superusers rotate');
# a keyring.next left by a rotation that did not complete is never overwritten
PostgreSQL::Test::Utils::append_to_file("$pgdata/pg_encryption/keyring.next",
	'pending');
($ret, $out, $err) = $node->psql('postgres',
	"SELECT pg_rotate_encryption_key('" . cmd('k2') . "')");
like(
	$err,
	qr/an earlier rotation of the key-encryption key did not complete/,
	'a pending keyring.next is refused, not overwritten');
is(slurp_file("$pgdata/pg_encryption/keyring.next"),
	'pending', 'and left as it was');
unlink "$pgdata/pg_encryption/keyring.next";
ok(!-e "$pgdata/pg_encryption/keyring.next",
	'refusals leave no keyring.next');
is($node->safe_psql('postgres', 'SHOW encryption_key_command'),
	cmd('k1'), 'refusals leave the key command alone');

# --- a rotation: milliseconds, data keys unchanged ---
my $t0 = [ Time::HiRes::gettimeofday() ];
my $fp2 = $node->safe_psql('postgres',
	"SELECT pg_rotate_encryption_key('" . cmd('k2') . "')");
my $ms = 1000 * Time::HiRes::tv_interval($t0);
like($fp2, qr/^[0-9a-f]{16}$/,
	"rotation returns the new KEK's fingerprint ($fp2)");
note sprintf('rotation (hex KEK to passphrase, scrypt included) took %.0f ms',
	$ms);
is( $node->safe_psql('postgres', 'SHOW encryption_key_command'),
	cmd('k1'),
	'the running server keeps the setting it started with (postmaster-only)');
like(
	slurp_file("$pgdata/postgresql.auto.conf"),
	qr/encryption_key_command = '\Q@{[cmd('k2')]}\E'/,
	'the new command is saved with ALTER SYSTEM');
is( sprintf('%04o', (stat("$pgdata/pg_encryption/keyring"))[2] & 07777),
	'0640',
	'the rotated key ring keeps the data directory\'s group access (initdb -g)'
);
$node->restart;
is($node->safe_psql('postgres', 'SHOW encryption_key_command'),
	cmd('k2'), 'after a restart the new command is in effect');
is($node->safe_psql('postgres', 'SHOW encryption_key_command_timeout'),
	'45s', 'initdb --encryption-key-command-timeout is in postgresql.conf');
is($rows->($node), $expected_rows, 'data readable under the new KEK');

# the old KEK opens nothing any more, and the error says which KEK it wants
$node->stop;
my $auto = slurp_file("$pgdata/postgresql.auto.conf");
(my $old_auto = $auto) =~ s/\Q@{[cmd('k2')]}\E/@{[cmd('k1')]}/;
open(my $fh, '>', "$pgdata/postgresql.auto.conf") or die;
print $fh $old_auto;
close $fh;
my $logstart = (-s $node->logfile) // 0;
ok(!$node->start(fail_ok => 1), 'the old KEK no longer starts the cluster');
my $log = substr(slurp_file($node->logfile), $logstart);
like(
	$log,
	qr/wrong key-encryption key.*\n.*DETAIL:  The key ring was wrapped on \S+ \S+ UTC under the key-encryption key with fingerprint $fp2; the key command's key has fingerprint [0-9a-f]{16}\./,
	'the start-up error names the fingerprint the key ring expects');
open($fh, '>', "$pgdata/postgresql.auto.conf") or die;
print $fh $auto;
close $fh;
$node->start;

# --- kill -9 of the server at every step (KeyRotationTap) ---
my $current_cmd =
  rotation_survives_kill_9($node, 'kek', cmd('k2'), cmd('k3'), $rows);
my ($current) = $current_cmd =~ m{/(k\d)$};

# a stale keyring.tmp (a crash of initdb or of an older tool) is removed
PostgreSQL::Test::Utils::append_to_file("$pgdata/pg_encryption/keyring.tmp",
	'garbage');
$node->restart;
ok( !-e "$pgdata/pg_encryption/keyring.tmp",
	'a stale keyring.tmp is removed at start');

# --- standbys and base backups ---
$node->backup('before');
my $before_cmd = $current;
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($node, 'before', has_streaming => 1);
$standby->start;
my $fp_new = $node->safe_psql('postgres',
	"SELECT pg_rotate_encryption_key('" . cmd('k4') . "')");
$node->restart;
$current = 'k4';
$node->safe_psql('postgres', "INSERT INTO t VALUES (1001, 'after rotation')");
$node->wait_for_catchup($standby);
is( $standby->safe_psql('postgres', 'SELECT v FROM t WHERE id = 1001'),
	'after rotation',
	'the standby replays across its primary\'s rotation');
$standby->restart;
is($standby->safe_psql('postgres', 'SHOW encryption_key_command'),
	cmd($before_cmd), 'the standby keeps its own key ring and command');
my $fp_standby = $standby->safe_psql('postgres',
	"SELECT pg_rotate_encryption_key('" . cmd('k4') . "')");
$standby->restart;
is($standby->safe_psql('postgres', 'SHOW encryption_key_command'),
	cmd('k4'), 'a hot standby rotates on its own with the same function');
is($rows->($standby), $rows->($node),
	'standby data intact after its rotation');

$node->backup('after');
my $from_after = PostgreSQL::Test::Cluster->new('from_after');
$from_after->init_from_backup($node, 'after', has_streaming => 1);
$from_after->start;
is($from_after->safe_psql('postgres', 'SHOW encryption_key_command'),
	cmd('k4'), 'a backup taken after the rotation starts with the new KEK');
$from_after->stop;

# an older backup needs the KEK of its time; without it the error says which
my $restored = PostgreSQL::Test::Cluster->new('restored_old');
$restored->init_from_backup($node, 'before');
rename("$keydir/$before_cmd", "$keydir/$before_cmd.kept") or die;
PostgreSQL::Test::Utils::append_to_file("$keydir/$before_cmd",
	('ee' x 32) . "\n");
$logstart = (-s $restored->logfile) // 0;
ok(!$restored->start(fail_ok => 1),
	'an older backup does not start once its KEK is gone');
like(
	substr(slurp_file($restored->logfile), $logstart),
	qr/The key ring was wrapped on .* under the key-encryption key with fingerprint [0-9a-f]{16}; the key command's key has fingerprint/,
	'and its error names the fingerprint of the KEK it needs');
rename("$keydir/$before_cmd.kept", "$keydir/$before_cmd") or die;
$restored->start;
is($rows->($restored), $expected_rows,
	'with the kept old KEK the older backup restores');
$restored->stop;

# --- pg_rewind: the rewound node takes its source's key ring and command ---
$standby->promote;
$standby->safe_psql('postgres',
	"SELECT pg_rotate_encryption_key('" . cmd('k1') . "')");
$standby->safe_psql('postgres', "INSERT INTO t VALUES (2000, 'new primary')");
$standby->safe_psql('postgres', 'CHECKPOINT');
$node->safe_psql('postgres', "INSERT INTO t VALUES (3000, 'diverged')");
$node->stop;
# pg_rewind copies every configuration file; keep this node's own
# postgresql.conf (port, socket), as PostgreSQL's own rewind tests do
copy("$pgdata/postgresql.conf", "$pgdata/../postgresql.conf.kept") or die;
command_ok(
	[
		'pg_rewind',
		'--target-pgdata' => $pgdata,
		'--source-server' => $standby->connstr('postgres'),
		'--no-sync'
	],
	'pg_rewind from a promoted standby that rotated');
is( slurp_file("$pgdata/pg_encryption/keyring"),
	slurp_file($standby->data_dir . '/pg_encryption/keyring'),
	'the rewound node holds its source\'s key ring');
copy("$pgdata/../postgresql.conf.kept", "$pgdata/postgresql.conf") or die;
$node->enable_streaming($standby);
$node->start;
is( $node->safe_psql('postgres', 'SHOW encryption_key_command'),
	cmd('k1'),
	'and its source\'s key command (postgresql.auto.conf), and starts with it'
);
$standby->safe_psql('postgres', "INSERT INTO t VALUES (2001, 'streamed')");
$standby->wait_for_catchup($node);
is( $node->safe_psql(
		'postgres', 'SELECT count(*) FROM t WHERE id IN (2000, 2001, 3000)'),
	'2',
	'the rewound node follows its new primary (its diverged row is gone)');

# --- a KMS rolled the KEK: the command now prints a new key ---
my $kms = "$keydir/kms";
PostgreSQL::Test::Utils::append_to_file($kms, ('0f' x 32) . "\n");
$standby->safe_psql('postgres',
	"SELECT pg_rotate_encryption_key('cat $kms')");
$standby->restart;
open($fh, '>', $kms) or die;
print $fh (('f0' x 32) . "\n");    # the KMS rolled: the old version is gone
close $fh;
# the server still runs with its keys; the rotation never runs the old command
$standby->safe_psql('postgres',
	"SELECT pg_rotate_encryption_key('cat $kms')");
$standby->restart;
is($rows->($standby), $rows->($node),
	'a rolled KMS key is taken over by a rotation, without the old key');

# --- a configuration that lost encryption_key_command (design 8) ---
# Debian's pg_upgradecluster replaces a new cluster's postgresql.conf and
# postgresql.auto.conf with the old cluster's: the command the latest
# rotation recorded in pg_encryption/command is run instead
my $sdata = $standby->data_dir;
is(slurp_file("$sdata/pg_encryption/command"),
	"cat $kms\n", 'the rotation recorded its command');
$standby->stop;
for my $conf ('postgresql.conf', 'postgresql.auto.conf')
{
	my $text = slurp_file("$sdata/$conf");
	$text =~ s/^\s*encryption_key_command\s*=.*$//mg;
	open($fh, '>', "$sdata/$conf") or die;
	print $fh $text;
	close $fh;
}
$logstart = (-s $standby->logfile) // 0;
$standby->start;
like(
	substr(slurp_file($standby->logfile), $logstart),
	qr/LOG:  encryption_key_command is not set: running the key command recorded in "pg_encryption\/command"/,
	'without the setting, start-up says it runs the recorded command');
is($standby->safe_psql('postgres', 'SHOW encryption_key_command'),
	"cat $kms", 'SHOW shows the recorded command');
is($rows->($standby), $rows->($node), 'and the data reads back');
unlink "$sdata/pg_encryption/command";
$standby->stop;
ok(!$standby->start(fail_ok => 1),
	'with neither the setting nor a recorded command, it does not start');
like(
	substr(slurp_file($standby->logfile), $logstart),
	qr/FATAL:  encryption_key_command is not set/,
	'and says that the key command is not set');

done_testing();
