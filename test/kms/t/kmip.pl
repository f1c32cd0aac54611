# Copyright (c) 2026, pgcipher developers
#
# kmip.pl — an encrypted cluster keyed by a real KMIP server (PyKMIP's
# pykmip-server, started here over mutual TLS with certificates made here)
# through pgcipher-kms (docs/design.md, section 9.3).
#
# "pgcipher-kms kmip-new" has the server create an AES-256 key and
# encrypt a fresh 256-bit KEK with it; an aes-256 cluster whose
# encryption_key_command is "pgcipher-kms kmip" (the server decrypts the
# file) starts and keeps a row across a restart.  With the KMIP server
# down, a CA file that did not sign its certificate, and a client key
# readable by others, the cluster refuses to start with pgcipher-kms's one line and the FATAL, its data directory
# byte-identical; with the same KMIP server back (its database kept) it
# starts (the control).  Last, a cluster keyed by a file moves to KMIP
# with pg_rotate_encryption_key() and restarts with it, and the old
# command no longer opens it; and pgcipher-proxy takes its column master
# key from the KMIP server (kmip-new, --cmk-command 'pgcipher-kms kmip').
# Then the unwrap mode (design 9.4): kmip-create-key makes two keys; a
# cluster whose data keys one of them wraps ("pgcipher-kms kmip-keyring")
# rotates to the other with a kill -9 at each step, is refused while the
# KMIP server is down and starts once it is back, and the file-keyed
# cluster moves into the unwrap mode.
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

my $pykmip = $ENV{PGCIPHER_PYKMIP};
my $kms = $ENV{PGCIPHER_KMS};
plan skip_all =>
  'PGCIPHER_PYKMIP and PGCIPHER_KMS are not both set (test/kms/run.sh sets them)'
  unless $pykmip && $kms;

my $tmp = PostgreSQL::Test::Utils::tempdir();
my $run = sprintf('%08x', int(rand(0xffffffff)));

# --- certificates: a CA, the server's for 127.0.0.1, a client's ---------

sub openssl
{
	my ($stdout, $stderr) = run_command([ 'openssl', @_ ]);
	return $stdout;
}

openssl(
	'req', '-x509',
	'-newkey', 'ec',
	'-pkeyopt', 'ec_paramgen_curve:P-256',
	'-nodes', '-keyout',
	"$tmp/ca-key.pem", '-out',
	"$tmp/ca.pem", '-days',
	'2', '-subj',
	'/CN=kmip.pl CA');
for my $leaf (
	[
		'server',
		"subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
	],
	[ 'client', "extendedKeyUsage=clientAuth\n" ])
{
	my ($name, $ext) = @$leaf;
	PostgreSQL::Test::Utils::append_to_file("$tmp/$name.ext", $ext);
	openssl(
		'req', '-newkey',
		'ec', '-pkeyopt',
		'ec_paramgen_curve:P-256', '-nodes',
		'-keyout', "$tmp/$name-key.pem",
		'-out', "$tmp/$name.csr",
		'-subj', "/CN=pgcipher $name");
	openssl(
		'x509', '-req',
		'-in', "$tmp/$name.csr",
		'-CA', "$tmp/ca.pem",
		'-CAkey', "$tmp/ca-key.pem",
		'-set_serial', int(rand(1 << 30)),
		'-out', "$tmp/$name.pem",
		'-days', '2',
		'-extfile', "$tmp/$name.ext");
	chmod 0600, "$tmp/$name-key.pem" or die;
}

# --- the KMIP server -------------------------------------------------------

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $addr = "127.0.0.1:$port";
mkdir "$tmp/policies" or die;
PostgreSQL::Test::Utils::append_to_file(
	"$tmp/server.conf", "[server]
hostname=127.0.0.1
port=$port
certificate_path=$tmp/server.pem
key_path=$tmp/server-key.pem
ca_path=$tmp/ca.pem
auth_suite=TLS1.2
enable_tls_client_auth=True
logging_level=INFO
database_path=$tmp/pykmip.db
policy_path=$tmp/policies
");
my $kmip_h;

sub start_kmip
{
	$ENV{PYTHONWARNINGS} = 'ignore';
	$kmip_h = IPC::Run::start(
		[ $pykmip, '-f', "$tmp/server.conf", '-l', "$tmp/server.log" ],
		'<', \undef, '>>', "$tmp/server.out", '2>>', "$tmp/server.out");
	for (1 .. 600)
	{
		return if IO::Socket::INET->new(PeerAddr => $addr);
		die "pykmip-server exited:\n" . slurp_file("$tmp/server.out")
		  unless $kmip_h->pumpable;
		usleep(100_000);
	}
	die "pykmip-server does not listen on $addr";
}

sub stop_kmip
{
	# SIGINT: on SIGTERM pykmip-server goes on blocking in accept()
	$kmip_h->signal('INT');
	$kmip_h->finish;
	die "something still listens on $addr"
	  if IO::Socket::INET->new(PeerAddr => $addr);
}

start_kmip();

my $tls =
  "--addr $addr --ca-cert $tmp/ca.pem --client-cert $tmp/client.pem --client-key $tmp/client-key.pem";
my $file = "$tmp/kek.kmip";
my ($stdout, $stderr) =
  run_command([ $kms, 'kmip-new', split(/ /, $tls), '--file', $file ]);
like(
	$stdout,
	qr/^wrote \Q$file\E: a new 256-bit key wrapped by KMIP key \S+ at \Q$addr\E \(AES-256-GCM\)$/,
	'kmip-new wrote a wrapped key');
like(
	slurp_file($file),
	qr/\Apgcipher-kms kmip wrapped key v1\nunique-identifier \S+\nalgorithm AES-256-GCM\niv [0-9a-f]{24}\ndata [0-9a-f]{64}\ntag [0-9a-f]{32}\n\z/,
	'the file holds the identifier, IV, ciphertext and tag');
($stdout, $stderr) =
  run_command([ $kms, 'kmip-new', split(/ /, $tls), '--file', $file ]);
is( $stderr,
	"pgcipher-kms: kmip-new: $file exists: a key file is never overwritten (move it away first, if it is no longer needed)",
	'kmip-new never overwrites');

# --- a cluster keyed by KMIP -----------------------------------------------

my $kmip_cmd = "$kms kmip $tls --file $file";
my $node = PostgreSQL::Test::Cluster->new('kmip');
$node->init(
	extra => [ '--encryption=aes-256', "--encryption-key-command=$kmip_cmd" ]
);
$node->start;
is($node->safe_psql('postgres', 'SHOW data_encryption'),
	'aes-256', 'initdb and start with the KEK unwrapped by the KMIP server');
$node->safe_psql('postgres',
	"CREATE TABLE marker (v text); INSERT INTO marker VALUES ('kmip-$run')");
$node->restart;
is($node->safe_psql('postgres', 'SELECT v FROM marker'),
	"kmip-$run", 'restarted with pgcipher-kms kmip: the marker row is there');
$node->stop;
my $datadir = $node->data_dir;

# start; refused as KmsTap::refuses_to_start() says, data directory untouched
sub refuses { refuses_to_start($node, @_) }

sub starts
{
	my ($name) = @_;
	$node->start;
	is($node->safe_psql('postgres', 'SELECT v FROM marker'),
		"kmip-$run", "$name: the cluster starts and reads its marker row");
	$node->stop;
}

stop_kmip();
refuses(
	'KMIP server down',
	$kmip_cmd,
	qr/\Qpgcipher-kms: kmip: cannot connect to the KMIP server at $addr: connection refused (is it running, and is --addr right?)\E/
);
start_kmip();
starts('control, the KMIP server back (its database kept)');

# a CA that did not sign the KMIP server's certificate, in the file the
# command names
copy("$tmp/ca.pem", "$tmp/ca.pem.good") or die;
openssl(
	'req', '-x509',
	'-newkey', 'ec',
	'-pkeyopt', 'ec_paramgen_curve:P-256',
	'-nodes', '-keyout',
	"$tmp/other-ca-key.pem", '-out',
	"$tmp/ca.pem", '-days',
	'2', '-subj',
	'/CN=another CA');
refuses(
	'a CA that did not sign the KMIP server\'s certificate',
	$kmip_cmd,
	qr/\Qpgcipher-kms: kmip: the TLS certificate of the KMIP server at $addr is not signed by a CA in --ca-cert $tmp\/ca.pem: x509: certificate signed by unknown authority\E/
);
copy("$tmp/ca.pem.good", "$tmp/ca.pem") or die;

chmod 0644, "$tmp/client-key.pem" or die;
refuses(
	'a client key readable by others',
	$kmip_cmd,
	qr/\Qpgcipher-kms: kmip: client key $tmp\/client-key.pem has permissions 0644: it must not be accessible by group or others (chmod 600 $tmp\/client-key.pem)\E/
);
chmod 0600, "$tmp/client-key.pem" or die;
starts('control, the client key private again');

# --- rotation from a file key to KMIP (design 9.1) --------------------------

my $kek = join('', map { sprintf('%02x', int(rand(256))) } 1 .. 32);
PostgreSQL::Test::Utils::append_to_file("$tmp/kek.hex", "$kek\n");
my $file_cmd = "cat $tmp/kek.hex";
my $node2 = PostgreSQL::Test::Cluster->new('rotated');
$node2->init(
	extra => [ '--encryption=aes-256', "--encryption-key-command=$file_cmd" ]
);
$node2->start;
$node2->safe_psql('postgres',
	"CREATE TABLE marker (v text); INSERT INTO marker VALUES ('file-$run')");
my $file2 = "$tmp/kek2.kmip";
run_command([ $kms, 'kmip-new', split(/ /, $tls), '--file', $file2 ]);
my $kmip_cmd2 = "$kms kmip $tls --file $file2";
like(
	$node2->safe_psql(
		'postgres', "SELECT pg_rotate_encryption_key('$kmip_cmd2')"),
	qr/^[0-9a-f]{16}$/,
	'pg_rotate_encryption_key from a file key to KMIP returns the new fingerprint'
);
$node2->restart;
is($node2->safe_psql('postgres', 'SHOW encryption_key_command'),
	$kmip_cmd2, 'restarted with the KMIP command');
is($node2->safe_psql('postgres', 'SELECT v FROM marker'),
	"file-$run", 'the marker row read under the KMIP-wrapped KEK');
$node2->stop;

my $datadir2 = $node2->data_dir;
my $before = file_digests($datadir2);
my $log_offset = -s $node2->logfile;
my $ret = PostgreSQL::Test::Utils::system_log(
	'pg_ctl', '--wait',
	'--pgdata' => $datadir2,
	'--log' => $node2->logfile,
	'--options' => "-c encryption_key_command='$file_cmd'",
	'start');
PostgreSQL::Test::Utils::system_log(
	'pg_ctl',
	'--pgdata' => $datadir2,
	'stop') if $ret == 0;
ok($ret != 0, 'the old command (the file key) no longer opens the cluster');
like(
	PostgreSQL::Test::Utils::slurp_file($node2->logfile, $log_offset),
	qr/FATAL:  could not unwrap the data encryption keys: wrong key-encryption key/,
	'old command: wrong key-encryption key');
is(scalar(changed_files($before, file_digests($datadir2))),
	0, 'old command: data directory byte-identical');

# --- pgcipher-proxy's CMK from the KMIP server -------------------------

my $proxy = $ENV{PGCIPHER_PROXY};
SKIP:
{
	skip 'PGCIPHER_PROXY is not set (test/kms/run.sh sets it)', 3
	  unless $proxy;
	my $cmkfile = "$tmp/cmk.kmip";
	run_command([ $kms, 'kmip-new', split(/ /, $tls), '--file', $cmkfile ]);
	$node2->start;
	$node2->safe_psql('postgres', 'CREATE ROLE pgc_tester SUPERUSER LOGIN');
	proxy_serves_encrypted_column(
		$proxy, $node2,
		"$kms kmip $tls --file $cmkfile",
		'pgcipher-kms kmip',
		$run, $tmp);
	$node2->stop;
}

# --- the unwrap mode: no KEK outside the KMIP server (design 9.4) ---------

my @ids;
for (1 .. 2)
{
	($stdout, $stderr) =
	  run_command([ $kms, 'kmip-create-key', split(/ /, $tls) ]);
	like($stdout, qr/^\S+$/, 'kmip-create-key prints a key identifier');
	push @ids, $stdout;
}
my $ring_cmd = sub { "$kms kmip-keyring $tls --key-id $_[0]" };
my ($unode, $marker) = unwrap_mode_cluster(
	'unwrap',
	$ring_cmd->($ids[0]),
	qr/kmip:v1:[A-Za-z0-9_-]+:[0-9a-f]{24}:[0-9a-f]+:[0-9a-f]{32}/,
	'the KMIP server', $run);
$unode->start;

# rotations between two KMIP keys, killed at each step
my $ucmd = rotation_survives_kill_9(
	$unode, 'unwrap',
	$ring_cmd->($ids[0]),
	$ring_cmd->($ids[1]), $marker);
$unode->stop;

# the KMIP server down: refused, nothing written; back: it starts
stop_kmip();
refuses_to_start(
	$unode,
	'unwrap mode, KMIP server down',
	"$ucmd unwrap",
	qr/\Qpgcipher-kms: kmip-keyring: cannot connect to the KMIP server at $addr: connection refused (is it running, and is --addr right?)\E/
);
start_kmip();
$unode->start;
is($marker->($unode), "unwrap-$run",
	'unwrap mode, control: the KMIP server back, the cluster starts');

# the file-keyed cluster moves into the unwrap mode
$node2->start;
like(
	$node2->safe_psql(
		'postgres',
		"SELECT pg_rotate_encryption_key('"
		  . $ring_cmd->($ids[0])
		  . "', 'unwrap')"),
	qr/^[0-9a-f]{16}$/,
	'a cluster keyed by KMIP-wrapped KEK moves to the unwrap mode');
$node2->restart;
is(keyring_format($node2->data_dir), 3, 'its key ring is of format 3');
is($node2->safe_psql('postgres', 'SELECT v FROM marker'),
	"file-$run", 'restarted in the unwrap mode: the marker row is there');
$node2->stop;
$unode->stop;

stop_kmip();
done_testing();
