# Copyright (c) 2026, pgcipher developers
#
# Nothing lost: a wrong or missing key stops the server with a clear
# message before it writes anything.  For each failure — wrong key, missing,
# corrupt or truncated key file, a key command that fails, prints garbage
# or hangs, a wrong passphrase, a key ring in an unencrypted cluster — the
# server must refuse to start with its own message, and every file in the
# data directory must be byte-identical before and after.  initdb's option
# checks are tested too.
use strict;
use warnings FATAL => 'all';
use Cwd;
use File::Copy;
use FindBin;
use lib "$FindBin::RealBin/..";
use LeakScan;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $tmp = PostgreSQL::Test::Utils::tempdir();
my $keyscript = "$tmp/key.sh";

sub set_key_command_body
{
	my ($body) = @_;
	open(my $fh, '>', $keyscript) or die;
	print $fh "#!/bin/sh\n$body\n";
	close $fh;
	chmod 0700, $keyscript;
}

my $good_key = ('c0ffee' x 10) . 'c0ff';    # 64 hex digits
set_key_command_body("echo $good_key");

my $node = PostgreSQL::Test::Cluster->new('refusals');
$node->init(extra =>
	  [ '--encryption=aes-256', "--encryption-key-command=$keyscript" ]);
$node->append_conf('postgresql.conf', 'encryption_key_command_timeout = 3s');
$node->start;
$node->safe_psql('postgres',
	"CREATE TABLE t AS SELECT g FROM generate_series(1, 1000) g");
$node->stop;
my ($stdout, $stderr) =
  PostgreSQL::Test::Utils::run_command([ 'pg_controldata', $node->data_dir ]);
like(
	$stdout,
	qr/^Data encryption:\s+aes-256$/m,
	'pg_controldata shows the cipher');

my $datadir = $node->data_dir;
my $keyring = "$datadir/pg_encryption/keyring";
is(sprintf('%04o', (stat($keyring))[2] & 07777),
	'0600', 'key ring is readable by its owner only');
ok( !-e "$keyring.tmp",
	'no temporary key ring left behind (written to a temporary file, then renamed)'
);
my $pristine = file_digests($datadir);

# Try to start; expect failure with a message matching $expect and no file changed
sub refuses
{
	my ($name, $expect, $expected_snapshot) = @_;
	my $log_offset = -s $node->logfile;
	my $started = $node->start(fail_ok => 1);
	ok(!$started, "$name: server refuses to start");
	$node->stop if $started;
	my $log =
	  PostgreSQL::Test::Utils::slurp_file($node->logfile, $log_offset);
	like($log, $expect, "$name: clear message");
	like($log, qr/FATAL:.*\n(?:.*DETAIL:.*\n)?.*HINT:/, "$name: with a hint")
	  unless $name =~ /unknown cipher/;
	my @diff =
	  changed_files($expected_snapshot // $pristine, file_digests($datadir));
	is(scalar(@diff), 0, "$name: data directory unchanged")
	  or diag(join("\n", @diff));
}

# Wrong key
set_key_command_body('echo ' . ('ab' x 32));
refuses(
	'wrong key',
	qr/FATAL:  could not unwrap the data encryption keys: wrong key-encryption key/
);

# Key command fails, prints garbage, prints nothing, hangs
set_key_command_body("echo $good_key; exit 3");
refuses(
	'failing command',
	qr/FATAL:  encryption key command ".*" failed\n.*DETAIL:  The command exited with status 3/
);
set_key_command_body(q{printf '\001\002\377\376binary garbage\n'});
refuses(
	'garbage output',
	qr/FATAL:  encryption key command printed a control character\n.*DETAIL:  Byte 1 of the output is a control character\./
);
set_key_command_body(q{printf '\303\251t\303\251 passphrase\n'});
refuses(
	'output that is not ASCII',
	qr/FATAL:  encryption key command printed a byte that is not ASCII\n.*DETAIL:  Byte 1 of the output/
);
set_key_command_body(q{printf 'line one\nline two\n'});
refuses('two lines',
	qr/FATAL:  encryption key command printed more than one line/);
set_key_command_body('echo ' . substr($good_key, 0, 63) . 'g');
refuses(
	'64 characters, one not hexadecimal',
	qr/FATAL:  encryption key command printed a key with a character that is not a hexadecimal digit\n.*DETAIL:  Character 64 of the 64 is not a hexadecimal digit/
);
set_key_command_body("echo ${good_key}0");
refuses(
	'65 hexadecimal digits',
	qr/FATAL:  encryption key command printed a key that is too long\n.*DETAIL:  .*the command printed 65 characters/
);
set_key_command_body('true');
refuses('empty output', qr/FATAL:  encryption key command printed nothing/);
set_key_command_body('echo not-a-hex-key-at-all');
refuses(
	'passphrase for a hex-key cluster',
	qr/FATAL:  encryption key command printed a key that is too short\n.*DETAIL:  The cluster was initialized with a hexadecimal key of 64 digits; the command printed 20 characters\./
);
set_key_command_body("sleep 300; echo $good_key");
my $t0 = time;
refuses('hanging command',
	qr/FATAL:  encryption key command did not finish within 3 seconds/);
cmp_ok(time - $t0, '<', 60,
	'hanging command: killed at the timeout, not waited for');
set_key_command_body("echo $good_key");

# Key file missing, corrupt, truncated
move($keyring, "$keyring.saved") or die;
my $missing = file_digests($datadir);
refuses('missing key file',
	qr/FATAL:  encryption key file "pg_encryption\/keyring" is missing/,
	$missing);
copy("$keyring.saved", $keyring) or die;

my $content = PostgreSQL::Test::Utils::slurp_file($keyring);
my $flipped = $content;
substr($flipped, 100, 1) = chr(ord(substr($flipped, 100, 1)) ^ 0x10);
PostgreSQL::Test::Utils::append_to_file("$keyring.new", $flipped);
move("$keyring.new", $keyring) or die;
refuses(
	'corrupt key file (one bit flipped)',
	qr/FATAL:  encryption key file "pg_encryption\/keyring" is corrupt/,
	file_digests($datadir));

truncate($keyring, 0) or die;
PostgreSQL::Test::Utils::append_to_file($keyring, substr($content, 0, 40));
refuses(
	'truncated key file',
	qr/FATAL:  encryption key file "pg_encryption\/keyring" is truncated/,
	file_digests($datadir));

unlink($keyring);
copy("$keyring.saved", $keyring) or die;
unlink("$keyring.saved");
is(scalar(changed_files($pristine, file_digests($datadir))),
	0, 'key file restored');

# The good key still works, and the data is intact
$node->start;
is($node->safe_psql('postgres', 'SELECT sum(g) FROM t'),
	'500500', 'starts with the right key; data intact');
$node->stop;

# Passphrase cluster: scrypt, and a wrong passphrase is a wrong key
my $pass_node = PostgreSQL::Test::Cluster->new('passphrase');
set_key_command_body('echo "correct horse battery staple"');
$pass_node->init(extra =>
	  [ '--encryption=aes-128', "--encryption-key-command=$keyscript" ]);
$pass_node->start;
is($pass_node->safe_psql('postgres', 'SHOW data_encryption'),
	'aes-128', 'passphrase cluster runs aes-128');
$pass_node->stop;
set_key_command_body('echo "correct horse battery stapler"');
ok(!$pass_node->start(fail_ok => 1), 'wrong passphrase: refused');
like(
	PostgreSQL::Test::Utils::slurp_file($pass_node->logfile),
	qr/wrong key-encryption key/,
	'wrong passphrase: reported as a wrong key');

# An unencrypted cluster that contains a key ring is refused
my $plain = PostgreSQL::Test::Cluster->new('plain');
$plain->init;
mkdir($plain->data_dir . '/pg_encryption');
copy($keyring, $plain->data_dir . '/pg_encryption/keyring') or die;
ok(!$plain->start(fail_ok => 1),
	'unencrypted cluster with a key ring: refused');
like(
	PostgreSQL::Test::Utils::slurp_file($plain->logfile),
	qr/cluster is not encrypted, but it contains an encryption key file/,
	'unencrypted cluster with a key ring: message');

# initdb's checks
my $d = "$tmp/initdb";
command_fails_like(
	[
		'initdb', '-D', "$d/a", '--encryption=aes-192',
		"--encryption-key-command=$keyscript"
	],
	qr/invalid value "aes-192" for option --encryption/,
	'initdb refuses an unknown cipher');
command_fails_like(
	[ 'initdb', '-D', "$d/b", '--encryption=aes-256' ],
	qr/--encryption needs --encryption-key-command/,
	'initdb needs a key command');
command_fails_like(
	[ 'initdb', '-D', "$d/c", "--encryption-key-command=$keyscript" ],
	qr/--encryption-key-command needs --encryption/,
	'initdb needs a cipher with a key command');
set_key_command_body('exit 1');
command_fails_like(
	[
		'initdb', '-D', "$d/d", '--encryption=aes-256',
		"--encryption-key-command=$keyscript"
	],
	qr/encryption key command ".*" failed/,
	'initdb stops when the key command fails');
ok(!-d "$d/d", 'initdb removed the data directory after the failure');
set_key_command_body('echo short');
command_fails_like(
	[
		'initdb', '-D', "$d/e", '--encryption=aes-256',
		"--encryption-key-command=$keyscript"
	],
	qr/passphrase is too short/,
	'initdb refuses a short passphrase');

# pg_resetwal shows the cipher, and keeps it when it must guess pg_control
($stdout, $stderr) = PostgreSQL::Test::Utils::run_command(
	[ 'pg_resetwal', '-n', $node->data_dir ]);
like(
	$stdout,
	qr/^Data encryption:\s+aes-256$/m,
	'pg_resetwal -n shows the cipher');
{
	my $pass_dir = $pass_node->data_dir;
	truncate("$pass_dir/global/pg_control", 0) or die;
	set_key_command_body('echo "correct horse battery staple"');
	command_ok(
		[ 'pg_resetwal', '-f', $pass_dir ],
		'pg_resetwal -f rebuilds a lost pg_control');
	($stdout, $stderr) =
	  PostgreSQL::Test::Utils::run_command([ 'pg_controldata', $pass_dir ]);
	like(
		$stdout,
		qr/^Data encryption:\s+aes-128$/m,
		'the rebuilt pg_control keeps the cipher from the key ring');
}

# pg_upgrade into, out of and between encrypted clusters: 008_pg_upgrade.pl

done_testing();
