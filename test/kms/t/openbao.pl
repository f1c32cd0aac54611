# Copyright (c) 2026, pgcipher developers
#
# openbao.pl — an encrypted cluster and pgcipher-proxy keyed by a real
# OpenBao server (bao server -dev -dev-tls, started here) through
# pgcipher-kms (docs/design.md, section 9.3).
#
# An aes-256 cluster whose encryption_key_command is "pgcipher-kms
# openbao-kv" (its KEK a field of a KV v2 secret) starts, keeps a row
# across a restart, and its KEK is exactly the secret's.  With the cluster
# stopped, each way the KMS can fail at start-up — OpenBao down, a CA that
# did not sign its certificate, a revoked token, the secret deleted, a
# token file readable by others — stops the server with pgcipher-kms's one
# line and the FATAL, and leaves every file of the data directory
# byte-identical; the same cluster starts again once the KMS is healthy
# (the control).  Then pg_rotate_encryption_key() moves the cluster to
# "pgcipher-kms openbao-transit" (a fresh data key that Transit returns
# only wrapped, written by openbao-transit-new): it restarts with that
# command, the old command no longer opens it, and a damaged wrapped file
# is refused the same way.  Last, pgcipher-proxy takes its column master
# key from "pgcipher-kms openbao-kv --cmk-command" and serves an encrypted
# column, and refuses to start when the command fails.  Last, the unwrap
# mode (design 9.4): a cluster made with --encryption-key-mode=unwrap and
# "pgcipher-kms openbao-transit-keyring" has its data keys wrapped by a
# Transit key, no KEK anywhere; it restarts, pg_waldump reads its WAL,
# a command naming another Transit key is refused with nothing written,
# a rotation to a second Transit key survives a kill -9 at each of its
# steps, it moves to a KEK in KV and back, and OpenBao down stops it.
#
# BAO_ADDR, BAO_CACERT and BAO_TOKEN (the root token) are set in the
# environment of every server started here: pgcipher-kms must ignore them,
# or the revoked-token and wrong-CA cases would start.
use strict;
use warnings FATAL => 'all';
use File::Copy;
use IO::Socket::INET;
use Time::HiRes qw(usleep);
use LeakScan;
use KmsTap;
use KeyRotationTap;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $bao = $ENV{PGCIPHER_BAO};
my $kms = $ENV{PGCIPHER_KMS};
my $proxy = $ENV{PGCIPHER_PROXY};
plan skip_all =>
  'PGCIPHER_BAO, PGCIPHER_KMS and PGCIPHER_PROXY are not all set (test/kms/run.sh sets them)'
  unless $bao && $kms && $proxy;

my $tmp = PostgreSQL::Test::Utils::tempdir();
my $run = sprintf('%08x', int(rand(0xffffffff)));

# --- OpenBao ---------------------------------------------------------------

# two consecutive free ports: the dev listener and its cluster port
my ($bao_port, $next);
do
{
	$bao_port = PostgreSQL::Test::Cluster::get_free_port();
	$next = PostgreSQL::Test::Cluster::get_free_port();
} until $next == $bao_port + 1;
my $addr = "https://127.0.0.1:$bao_port";
my $ca = "$tmp/ca.pem";    # the CA file the key commands name
my $token_file = "$tmp/token";
my ($bao_h, $bao_log, $root_token);
my $bao_runs = 0;

# start the dev server on $bao_port; read its root token and CA from what
# it prints ("Root Token: ...", "$ export BAO_CACERT='...'"); copy the CA
# to $ca
sub start_bao
{
	$bao_runs++;
	my $dir = "$tmp/bao$bao_runs";
	mkdir "$dir" or die;
	mkdir "$dir/tls" or die;
	$bao_log = "$dir/bao.log";
	$bao_h = IPC::Run::start(
		[
			$bao,
			'server',
			'-dev',
			'-dev-tls',
			'-dev-no-store-token',
			"-dev-tls-cert-dir=$dir/tls",
			"-dev-listen-address=127.0.0.1:$bao_port"
		],
		'<',
		\undef,
		'>&', $bao_log);
	my ($cacert, $log);
	for (1 .. 900)
	{
		$log = slurp_file($bao_log);
		($root_token) = $log =~ /^Root Token: (\S+)$/m;
		($cacert) = $log =~ /^\s*\$ export BAO_CACERT='([^']+)'$/m;
		last if $root_token && $cacert;
		die "bao server exited:\n$log" unless $bao_h->pumpable;
		usleep(100_000);
	}
	die "bao server printed no root token:\n$log" unless $root_token;
	copy($cacert, $ca) or die;
	# every server started from here on gets these, which pgcipher-kms ignores
	$ENV{BAO_ADDR} = $addr;
	$ENV{BAO_CACERT} = $cacert;
	$ENV{BAO_TOKEN} = $root_token;
	# the CLI answers once the server is unsealed
	for (1 .. 100)
	{
		my ($ok) = bao_cli_result('status');
		return if $ok;
		usleep(100_000);
	}
	die "bao server does not answer:\n" . slurp_file($bao_log);
}

sub stop_bao
{
	$bao_h->signal('TERM');
	$bao_h->finish;
	# connections refused from now on
	my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$bao_port");
	die "something still listens on $bao_port" if $s;
}

sub bao_cli_result
{
	my ($stdout, $stderr) = ('', '');
	my $ok = IPC::Run::run([ $bao, @_ ],
		'<', \undef, '>', \$stdout, '2>', \$stderr, IPC::Run::timeout(60));
	chomp $stdout;
	return ($ok, $stdout, $stderr);
}

# run the bao CLI as root; die on failure; its stdout
sub bao_cli
{
	my ($ok, $stdout, $stderr) = bao_cli_result(@_);
	die "bao @_ failed: $stderr" unless $ok;
	return $stdout;
}

sub write_private
{
	my ($path, $content) = @_;
	unlink $path;
	PostgreSQL::Test::Utils::append_to_file($path, $content);
	chmod 0600, $path or die;
}

# a token that may read the keys and use Transit key "pgcipher"
sub new_token
{
	return bao_cli(
		'token', 'create',
		'-policy=pgcipher-server', '-no-default-policy',
		'-field=token');
}

my $kek = join('', map { sprintf('%02x', int(rand(256))) } 1 .. 32);
my $cmk = join('', map { sprintf('%02x', int(rand(256))) } 1 .. 32);

# what a KMS holds for pgcipher: the KEK and the CMK in KV, a Transit key,
# a policy and a token for both in $token_file
sub populate_bao
{
	PostgreSQL::Test::Utils::append_to_file(
		"$tmp/policy$bao_runs.hcl", q{
path "secret/data/pgcipher/*" { capabilities = ["read"] }
path "transit/datakey/wrapped/pgcipher" { capabilities = ["update"] }
path "transit/decrypt/pgcipher" { capabilities = ["update"] }
path "transit/encrypt/pgcipher-ring*" { capabilities = ["update"] }
path "transit/decrypt/pgcipher-ring*" { capabilities = ["update"] }
});
	bao_cli('policy', 'write', 'pgcipher-server', "$tmp/policy$bao_runs.hcl");
	bao_cli('kv', 'put', '-mount=secret', 'pgcipher/kek', "kek=$kek");
	bao_cli('kv', 'put', '-mount=secret', 'pgcipher/cmk', "cmk=$cmk");
	bao_cli('secrets', 'enable', 'transit');
	bao_cli('write', '-f', "transit/keys/$_")
	  for ('pgcipher', 'pgcipher-ring', 'pgcipher-ring2');
	write_private($token_file, new_token() . "\n");
}

start_bao();
populate_bao();

my $common = "--addr $addr --ca-cert $ca --token-file $token_file";
my $kv_cmd = "$kms openbao-kv $common --path pgcipher/kek";

# --- a cluster keyed by KV ---------------------------------------------------

my $node = PostgreSQL::Test::Cluster->new('kms');
$node->init(
	extra => [ '--encryption=aes-256', "--encryption-key-command=$kv_cmd" ]);
$node->start;
is($node->safe_psql('postgres', 'SHOW data_encryption'),
	'aes-256', 'initdb and start with the KEK from OpenBao KV v2');
$node->safe_psql('postgres',
	"CREATE TABLE marker (v text); INSERT INTO marker VALUES ('kms-$run')");
$node->restart;
is($node->safe_psql('postgres', 'SELECT v FROM marker'),
	"kms-$run", 'restarted with openbao-kv: the marker row is there');
$node->stop;

my $datadir = $node->data_dir;
# the KEK is exactly the secret's: the cluster starts with it from a file
PostgreSQL::Test::Utils::append_to_file("$tmp/kek.hex", "$kek\n");
my $with_command = sub {
	my ($cmd) = @_;
	my $log_offset = -s $node->logfile;
	my $ret = PostgreSQL::Test::Utils::system_log(
		'pg_ctl', '--wait',
		'--pgdata' => $datadir,
		'--log' => $node->logfile,
		'--options' => "-c encryption_key_command='$cmd'",
		'start');
	if ($ret == 0)
	{
		PostgreSQL::Test::Utils::system_log(
			'pg_ctl',
			'--pgdata' => $datadir,
			'stop');
	}
	return ($ret == 0,
		PostgreSQL::Test::Utils::slurp_file($node->logfile, $log_offset));
};
my ($started) = $with_command->("cat $tmp/kek.hex");
ok($started,
	'the KEK is the KV secret\'s: the cluster starts with it from a file');

# --- refusals at start-up ------------------------------------------------

# start; refused as KmsTap::refuses_to_start() says, data directory untouched
sub refuses { refuses_to_start($node, @_) }

sub starts
{
	my ($name) = @_;
	$node->start;
	is($node->safe_psql('postgres', 'SELECT v FROM marker'),
		"kms-$run", "$name: the cluster starts and reads its marker row");
	$node->stop;
}

stop_bao();
refuses(
	'OpenBao down',
	$kv_cmd,
	qr/\Qpgcipher-kms: openbao-kv: cannot connect to OpenBao at $addr: connection refused (is it running, and is --addr right?)\E/
);

# the dev server starts afresh (in memory: new root token, new CA, no
# secrets); the KMS is given the same KEK again, and the old CA is kept as
# one that did not sign the new server's certificate
copy($ca, "$tmp/old-ca.pem") or die;
start_bao();
populate_bao();
starts('control, OpenBao back with the same KEK');

copy("$tmp/old-ca.pem", $ca) or die;
refuses(
	'a CA that did not sign OpenBao\'s certificate',
	$kv_cmd,
	qr/\Qpgcipher-kms: openbao-kv: the TLS certificate of OpenBao at $addr is not signed by a CA in --ca-cert $ca: x509: certificate signed by unknown authority\E(?: \(possibly because of .*\))?/
);
copy($ENV{BAO_CACERT}, $ca) or die;

my $good_token = slurp_file($token_file);
my $revoked = new_token();
bao_cli('token', 'revoke', $revoked);
write_private($token_file, "$revoked\n");
refuses(
	'a revoked token',
	$kv_cmd,
	qr/\Qpgcipher-kms: openbao-kv: OpenBao at $addr refused the token in $token_file (403 permission denied) for read on secret\/data\/pgcipher\/kek: the token is wrong, expired or revoked, or its policy does not allow that\E/
);
write_private($token_file, $good_token);

bao_cli('kv', 'delete', '-mount=secret', 'pgcipher/kek');
refuses(
	'the secret deleted',
	$kv_cmd,
	qr/\Qpgcipher-kms: openbao-kv: secret pgcipher\/kek (KV v2 mount "secret", version 1) was deleted on \E\S+\Q: undelete it (bao kv undelete) or name a live version\E/
);
bao_cli('kv', 'undelete', '-mount=secret', '-versions=1', 'pgcipher/kek');

chmod 0644, $token_file or die;
refuses(
	'a token file readable by others',
	$kv_cmd,
	qr/\Qpgcipher-kms: openbao-kv: token file $token_file has permissions 0644: it must not be accessible by group or others (chmod 600 $token_file)\E/
);
chmod 0600, $token_file or die;

starts('control, the KMS healthy again');

# --- rotation to Transit (design 9.1) ------------------------------------

my $wrapped = "$tmp/kek.wrapped";
my ($stdout, $stderr) = run_command(
	[
		$kms, 'openbao-transit-new', split(/ /, $common),
		'--key', 'pgcipher', '--file', $wrapped
	]);
like(
	$stdout,
	qr/^wrote \Q$wrapped\E: a new 256-bit key wrapped by Transit key "pgcipher" \(mount "transit"\) \(vault:v1\)$/,
	'openbao-transit-new wrote a wrapped key');
like(
	slurp_file($wrapped),
	qr/^vault:v1:[A-Za-z0-9+\/=]+\n$/,
	'the file holds only the Transit ciphertext');
($stdout, $stderr) = run_command(
	[
		$kms, 'openbao-transit-new', split(/ /, $common),
		'--key', 'pgcipher', '--file', $wrapped
	]);
is( $stderr,
	"pgcipher-kms: openbao-transit-new: $wrapped exists: a key file is never overwritten (move it away first, if it is no longer needed)",
	'openbao-transit-new never overwrites');

my $transit_cmd =
  "$kms openbao-transit $common --key pgcipher --file $wrapped";
$node->start;
like(
	$node->safe_psql(
		'postgres', "SELECT pg_rotate_encryption_key('$transit_cmd')"),
	qr/^[0-9a-f]{16}$/,
	'pg_rotate_encryption_key to openbao-transit returns the new fingerprint'
);
$node->restart;
is($node->safe_psql('postgres', 'SHOW encryption_key_command'),
	$transit_cmd, 'restarted with the Transit command');
is($node->safe_psql('postgres', 'SELECT v FROM marker'),
	"kms-$run", 'the marker row read under the Transit-wrapped KEK');
$node->stop;

my $before = file_digests($datadir);
my $log;
($started, $log) = $with_command->($kv_cmd);
ok(!$started, 'the old command (openbao-kv) no longer opens the cluster');
like(
	$log,
	qr/FATAL:  could not unwrap the data encryption keys: wrong key-encryption key/,
	'old command: wrong key-encryption key');
is(scalar(changed_files($before, file_digests($datadir))),
	0, 'old command: data directory byte-identical');

copy($wrapped, "$wrapped.good") or die;
my $ct = slurp_file($wrapped);
substr($ct, -6, 1) = substr($ct, -6, 1) eq 'A' ? 'B' : 'A';
unlink $wrapped;
PostgreSQL::Test::Utils::append_to_file($wrapped, $ct);
refuses(
	'a damaged wrapped key file',
	$transit_cmd,
	qr/\Qpgcipher-kms: openbao-transit: wrapped key file $wrapped: Transit key "pgcipher" (mount "transit") cannot decrypt the ciphertext (400 \E[^)]+\Q): damaged, or wrapped by another key\E/
);
copy("$wrapped.good", $wrapped) or die;
starts('control, the wrapped key file restored');

# --- pgcipher-proxy's CMK from OpenBao -----------------------------------

$node->start;
$node->safe_psql('postgres', 'CREATE ROLE pgc_tester SUPERUSER LOGIN');
my $cmk_cmd = "$kms openbao-kv $common --path pgcipher/cmk --field cmk";
my $proxy_port = PostgreSQL::Test::Cluster::get_free_port();
my @proxy_args = (
	'--listen' => "127.0.0.1:$proxy_port",
	'--upstream' => 'host=' . $node->host . ' port=' . $node->port);

# the proxy refuses to start when its key command fails
($stdout, $stderr) = ('', '');
IPC::Run::run(
	[
		$proxy,
		@proxy_args,
		'--cmk-command' => "$kms openbao-kv $common --path pgcipher/nonesuch"
	],
	'<',
	\undef,
	'>',
	\$stdout,
	'2>',
	\$stderr,
	IPC::Run::timeout(60));
like(
	$stderr,
	qr/^\Qpgcipher-kms: openbao-kv: secret pgcipher\/nonesuch (KV v2 mount "secret") not found (404)\E.*\n.*CMK command/m,
	'pgcipher-proxy does not start when the CMK command fails, pgcipher-kms says why'
);

proxy_serves_encrypted_column($proxy, $node, $cmk_cmd,
	'pgcipher-kms openbao-kv',
	$run, $tmp);
$node->stop;

# --- the unwrap mode: no KEK outside OpenBao (design 9.4) -----------------

# Transit keys pgcipher-ring and pgcipher-ring2 wrap the data keys
# themselves; the server hands the wrapped key ring to the command
my $ring_cmd = sub { "$kms openbao-transit-keyring $common --key $_[0]" };
my ($unode, $marker) =
  unwrap_mode_cluster('unwrap', $ring_cmd->('pgcipher-ring'),
	qr/vault:v1:[A-Za-z0-9+\/=]+/, 'Transit', $run);
my $udata = $unode->data_dir;
$unode->start;
my $walfile = $unode->safe_psql('postgres',
	'SELECT pg_walfile_name(pg_current_wal_insert_lsn())');
$unode->stop;

# a frontend program loads the keys the same way (pg_waldump: the WAL key)
my ($ok_dump, $dump_out, $dump_err) = ('', '', '');
$ok_dump =
  IPC::Run::run([ 'pg_waldump', '--limit=5', "$udata/pg_wal/$walfile" ],
	'>', \$dump_out, '2>', \$dump_err);
like($dump_out, qr/^rmgr: /m,
	'unwrap mode: pg_waldump reads the encrypted WAL through Transit')
  or diag($dump_err);

# a command naming another Transit key: refused, nothing written
{
	my $before = file_digests($udata);
	my $log_offset = -s $unode->logfile;
	my $other = $ring_cmd->('pgcipher');
	my $ret = PostgreSQL::Test::Utils::system_log(
		'pg_ctl', '--wait',
		'--pgdata' => $udata,
		'--log' => $unode->logfile,
		'--options' => "-c encryption_key_command='$other'",
		'start');
	PostgreSQL::Test::Utils::system_log(
		'pg_ctl',
		'--pgdata' => $udata,
		'stop') if $ret == 0;
	ok($ret != 0,
		'unwrap mode: a command with another Transit key is refused');
	like(
		PostgreSQL::Test::Utils::slurp_file($unode->logfile, $log_offset),
		qr/\Qpgcipher-kms: openbao-transit-keyring: Transit key "pgcipher" (mount "transit") cannot decrypt the wrapped key ring (400 \E[^)]+\Q): damaged, or wrapped by another key\E\n(?:.*\n)*?.*FATAL:  encryption key command "\Q$other unwrap\E" failed/,
		'unwrap mode: pgcipher-kms says why, then the FATAL names the action'
	);
	is(scalar(changed_files($before, file_digests($udata))),
		0, 'unwrap mode, another Transit key: data directory byte-identical');
}

# rotations between two Transit keys, killed at each step
$unode->start;
my $ucmd = rotation_survives_kill_9(
	$unode, 'unwrap',
	$ring_cmd->('pgcipher-ring'),
	$ring_cmd->('pgcipher-ring2'), $marker);

# out of the unwrap mode to a KEK in KV, and back
like(
	$unode->safe_psql(
		'postgres', "SELECT pg_rotate_encryption_key('$kv_cmd', 'kek')"),
	qr/^[0-9a-f]{16}$/,
	'unwrap mode to a KEK from KV');
$unode->restart;
is(keyring_format($udata), 2, 'the key ring is of format 2 again');
is($marker->($unode), "unwrap-$run", 'restarted with the KEK from KV');
like(
	$unode->safe_psql(
		'postgres', "SELECT pg_rotate_encryption_key('$ucmd', 'unwrap')"),
	qr/^[0-9a-f]{16}$/,
	'a KEK from KV to the unwrap mode');
$unode->restart;
is(keyring_format($udata), 3, 'the key ring is of format 3 again');
is($marker->($unode), "unwrap-$run", 'restarted in the unwrap mode');
my ($ret_mode, $out_mode, $err_mode) = $unode->psql('postgres',
	"SELECT pg_rotate_encryption_key('$ucmd', 'envelope')");
like(
	$err_mode,
	qr/ERROR:  invalid key mode "envelope"/,
	'an unknown key mode is refused');
$unode->stop;

# OpenBao down: the unwrap mode cannot start either
stop_bao();
refuses_to_start(
	$unode,
	'unwrap mode, OpenBao down',
	"$ucmd unwrap",
	qr/\Qpgcipher-kms: openbao-transit-keyring: cannot connect to OpenBao at $addr: connection refused (is it running, and is --addr right?)\E/
);
done_testing();
