# Copyright (c) 2026, pgcipher developers
#
# initdb takes its encryption options from the environment where the
# command line leaves them out (src/bin/initdb/encryption.c), so that
# harnesses running initdb with fixed arguments (pg_createcluster, Citus's
# test driver) make encrypted clusters: PGCIPHER_ENCRYPTION,
# PGCIPHER_ENCRYPTION_KEY_COMMAND and PGCIPHER_ENCRYPTION_KEY_COMMAND_TIMEOUT.
# Set: an aes-256 cluster that starts, and initdb says where each setting
# came from.  Unset: unencrypted.  The command line wins, option by option.
# Empty, invalid and conflicting values fail with a clear message before
# initdb creates anything.
use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $tmp = PostgreSQL::Test::Utils::tempdir();
my $keyfile = "$tmp/kek";
PostgreSQL::Test::Utils::append_to_file($keyfile, ('5a' x 32) . "\n");
my $key_command = "cat $keyfile";
my $sockdir = PostgreSQL::Test::Utils::tempdir_short();

delete $ENV{$_} for qw(PGCIPHER_ENCRYPTION PGCIPHER_ENCRYPTION_KEY_COMMAND
  PGCIPHER_ENCRYPTION_KEY_COMMAND_TIMEOUT PGCIPHER_ENCRYPTION_KEY_MODE);

# initdb with the environment given; returns (exit code, stdout, stderr)
sub initdb_env
{
	my ($env, $dir, @args) = @_;
	local %ENV = (%ENV, %$env);
	my ($stdout, $stderr);
	my $ok =
	  IPC::Run::run([ 'initdb', '-A', 'trust', '-N', '-D', $dir, @args ],
		'>', \$stdout, '2>', \$stderr);
	return ($ok, $stdout, $stderr);
}

# the cipher the server started on a data directory runs with
sub cipher_of
{
	my ($dir) = @_;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	system_or_bail('pg_ctl', '-D', $dir, '-l', "$dir/server.log", '-w',
		'-o', "-p $port -k $sockdir -c listen_addresses=''", 'start');
	my $cipher =
	  `psql -X -At -h $sockdir -p $port -d postgres -c 'SHOW data_encryption'`;
	chomp $cipher;
	system_or_bail('pg_ctl', '-D', $dir, '-m', 'fast', '-w', 'stop');
	return $cipher;
}

my %both = (
	PGCIPHER_ENCRYPTION => 'aes-256',
	PGCIPHER_ENCRYPTION_KEY_COMMAND => $key_command);

# Set: the cluster is aes-256, the key command and the timeout go into
# postgresql.conf as if given as options, and initdb says where from
my ($ok, $out, $err) =
  initdb_env({ %both, PGCIPHER_ENCRYPTION_KEY_COMMAND_TIMEOUT => '45' },
	"$tmp/env");
ok($ok, 'initdb with the encryption options in the environment') or diag $err;
like(
	$out,
	qr/The cipher \(aes-256\) comes from environment variable PGCIPHER_ENCRYPTION\./,
	'initdb says the cipher came from the environment');
like(
	$out,
	qr/The key command comes from environment variable PGCIPHER_ENCRYPTION_KEY_COMMAND\./,
	'initdb says the key command came from the environment');
like($out, qr/Data encryption is enabled \(aes-256/, 'encryption enabled');
my $conf = slurp_file("$tmp/env/postgresql.conf");
like(
	$conf,
	qr/^encryption_key_command = 'cat \Q$keyfile\E'/m,
	'the key command is in postgresql.conf');
like(
	$conf,
	qr/^encryption_key_command_timeout = 45/m,
	'the timeout from the environment is in postgresql.conf');
is(cipher_of("$tmp/env"),
	'aes-256', 'the cluster made from the environment runs aes-256');

# Unset: an unencrypted cluster, and no word about the environment
($ok, $out, $err) = initdb_env({}, "$tmp/unset");
ok($ok, 'initdb without the variables');
unlike(
	$out,
	qr/environment variable|Data encryption is enabled/,
	'nothing said about encryption when nothing asks for it');
unlike(
	slurp_file("$tmp/unset/postgresql.conf"),
	qr/^encryption_key_command =/m,
	'no key command without the variables');

# The command line wins, option by option
my $other = "$tmp/kek2";
PostgreSQL::Test::Utils::append_to_file($other, ('a5' x 32) . "\n");
($ok, $out, $err) = initdb_env(\%both, "$tmp/cli",
	'--encryption=aes-128', "--encryption-key-command=cat $other");
ok($ok, 'initdb with both the variables and the options') or diag $err;
like(
	$out,
	qr/Data encryption is enabled \(aes-128/,
	'--encryption on the command line wins over PGCIPHER_ENCRYPTION');
unlike(
	$out,
	qr/environment variable/,
	'nothing taken from the environment when the options are all given');
like(
	slurp_file("$tmp/cli/postgresql.conf"),
	qr/^encryption_key_command = 'cat \Q$other\E'/m,
	'--encryption-key-command wins over the variable');
is(cipher_of("$tmp/cli"), 'aes-128', 'the cluster runs aes-128');

# A cipher from the command line, the key command from the environment
($ok, $out, $err) =
  initdb_env({ PGCIPHER_ENCRYPTION_KEY_COMMAND => $key_command },
	"$tmp/mixed", '--encryption=aes-256');
ok($ok,
	'the cipher from the command line, the key command from the environment')
  or diag $err;
like(
	$out,
	qr/The key command comes from environment variable/,
	'initdb says which one came from the environment');
unlike($out, qr/The cipher .* comes from/, 'and not the other');

# --encryption=off on the command line: the key command variable is ignored,
# and initdb says so
($ok, $out, $err) = initdb_env(\%both, "$tmp/off", '--encryption=off');
ok($ok, '--encryption=off with the variables set') or diag $err;
like(
	$out,
	qr/PGCIPHER_ENCRYPTION_KEY_COMMAND ignored: --encryption=off on the command line\./,
	'initdb says it ignored the key command variable');
unlike($out, qr/Data encryption is enabled/, 'the cluster is not encrypted');

# Empty, invalid and conflicting values: a clear error, nothing created
my @refusals = (
	[
		'empty cipher',
		{ %both, PGCIPHER_ENCRYPTION => '' },
		qr/environment variable PGCIPHER_ENCRYPTION is set but empty/
	],
	[
		'empty key command',
		{ %both, PGCIPHER_ENCRYPTION_KEY_COMMAND => '' },
		qr/environment variable PGCIPHER_ENCRYPTION_KEY_COMMAND is set but empty/
	],
	[
		'unknown cipher',
		{ %both, PGCIPHER_ENCRYPTION => 'aes-192' },
		qr/invalid value "aes-192" for environment variable PGCIPHER_ENCRYPTION\n.*hint: Use aes-128, aes-256 or off\./
	],
	[
		'a key command with the cipher off',
		{ %both, PGCIPHER_ENCRYPTION => 'off' },
		qr/PGCIPHER_ENCRYPTION_KEY_COMMAND is set, but no cipher is\n.*hint: PGCIPHER_ENCRYPTION is "off"/
	],
	[
		'a key command without a cipher',
		{ PGCIPHER_ENCRYPTION_KEY_COMMAND => $key_command },
		qr/PGCIPHER_ENCRYPTION_KEY_COMMAND is set, but no cipher is\n.*hint: Set PGCIPHER_ENCRYPTION=aes-256/
	],
	[
		'a cipher without a key command',
		{ PGCIPHER_ENCRYPTION => 'aes-256' },
		qr/--encryption needs --encryption-key-command\n.*hint: Give --encryption-key-command or set PGCIPHER_ENCRYPTION_KEY_COMMAND\./
	],
	[
		'a timeout that is not a number',
		{ %both, PGCIPHER_ENCRYPTION_KEY_COMMAND_TIMEOUT => '30s' },
		qr/invalid value "30s" for environment variable PGCIPHER_ENCRYPTION_KEY_COMMAND_TIMEOUT/
	],
	[
		'a timeout out of range',
		{ %both, PGCIPHER_ENCRYPTION_KEY_COMMAND_TIMEOUT => '0' },
		qr/invalid value "0" for environment variable PGCIPHER_ENCRYPTION_KEY_COMMAND_TIMEOUT\n.*hint: Give a number of seconds from 1 to 3600\./
	],
	[
		'an unknown key mode',
		{ %both, PGCIPHER_ENCRYPTION_KEY_MODE => 'envelope' },
		qr/invalid value "envelope" for environment variable PGCIPHER_ENCRYPTION_KEY_MODE\n.*hint: Use kek or unwrap\./
	],
	[
		'the unwrap mode with a command that only prints a key',
		{ %both, PGCIPHER_ENCRYPTION_KEY_MODE => 'unwrap' },
		qr/encryption key command "\Q$key_command\E wrap" failed/
	],);
my $i = 0;
for my $r (@refusals)
{
	my ($what, $env, $message) = @$r;
	my $dir = "$tmp/refused" . $i++;
	($ok, $out, $err) = initdb_env($env, $dir);
	ok(!$ok, "$what: initdb fails");
	like($err, $message, "$what: the message says why");
	ok(!-e $dir, "$what: no data directory is created");
}

done_testing();
