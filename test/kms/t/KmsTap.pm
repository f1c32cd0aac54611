# Copyright (c) 2026, pgcipher developers
#
# KmsTap: what openbao.pl and kmip.pl check the same way of a cluster or
# a proxy keyed through pgcipher-kms (the rotations killed at each step:
# KeyRotationTap, shared with TAP 007).
package KmsTap;

use strict;
use warnings FATAL => 'all';
use Exporter 'import';
use IO::Socket::INET;
use Time::HiRes qw(usleep);
use KeyRotationTap;
use LeakScan;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(refuses_to_start proxy_serves_encrypted_column
  unwrap_mode_cluster);

# Start $node; it must fail with pgcipher-kms's line ($kms_says: a regex,
# the line exactly, with what varies) followed by the FATAL of the
# command $cmd, show no stack trace, and leave every file of the data
# directory as it was.
sub refuses_to_start
{
	my ($node, $name, $cmd, $kms_says) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $datadir = $node->data_dir;
	my $before = file_digests($datadir);
	my $log_offset = -s $node->logfile;
	my $started = $node->start(fail_ok => 1);
	ok(!$started, "$name: the server refuses to start");
	$node->stop if $started;
	my $log =
	  PostgreSQL::Test::Utils::slurp_file($node->logfile, $log_offset);
	like(
		$log,
		qr/^$kms_says\n(?:.*\n)*?.*FATAL:  encryption key command "\Q$cmd\E" failed\n.*DETAIL:  The command exited with status 1\./m,
		"$name: pgcipher-kms says why in one line, then the FATAL");
	unlike($log, qr/goroutine|panic:/, "$name: no stack trace");
	my @diff = changed_files($before, file_digests($datadir));
	is(scalar(@diff), 0, "$name: data directory byte-identical")
	  or diag(join("\n", @diff));
}

# pgcipher-proxy ($proxy) in front of the running $node, its CMK printed
# by $cmk_cmd ($what names it in the test names): it starts, serves an
# enc_text EQ column to the role pgc_tester (which must exist) with
# plaintext in and out, and the server holds only ciphertext ($run: a
# marker unique to the run; $tmp: where the proxy logs).
sub proxy_serves_encrypted_column
{
	my ($proxy, $node, $cmk_cmd, $what, $run, $tmp) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $log = "$tmp/proxy.log";
	my $h = IPC::Run::start(
		[
			$proxy,
			'--listen' => "127.0.0.1:$port",
			'--upstream' => 'host=' . $node->host . ' port=' . $node->port,
			'--cmk-command' => $cmk_cmd
		],
		'<',
		\undef,
		'>&', $log);
	my $listening;
	for (1 .. 300)
	{
		$listening = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port")
		  and last;
		last unless $h->pumpable;
		usleep(100_000);
	}
	ok($listening, "pgcipher-proxy started with --cmk-command $what")
	  or diag(slurp_file($log));
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			'psql', '-X', '-A', '-t',
			'-q', '-v', 'ON_ERROR_STOP=1', '-h',
			'127.0.0.1', '-p', $port, '-U',
			'pgc_tester', '-d', 'postgres'
		],
		'<',
		\"CREATE EXTENSION pgcipher_columns;
SELECT pgcipher.add_column_key('k1');
CREATE TABLE patients (id int PRIMARY KEY, ssn enc_text);
SELECT pgcipher.encrypt_column('patients', 'ssn', 'k1', 'EQ');
INSERT INTO patients VALUES (1, 'ssn-$run');
SELECT id, ssn FROM patients WHERE ssn = 'ssn-$run';",
		'>',
		\$out,
		'2>',
		\$err,
		IPC::Run::timeout(60));
	like($out, qr/^1\|ssn-\Q$run\E$/m,
		"through the proxy keyed by $what: plaintext in, plaintext out, = on it"
	) or diag($err);
	my $stored = $node->safe_psql('postgres',
		'SELECT ssn::text FROM public.patients WHERE id = 1');
	ok( $stored ne '' && $stored !~ /\Qssn-$run\E/,
		'the server holds only ciphertext');
	$h->signal('TERM');
	$h->finish;
}

# A cluster named $name made by initdb in the unwrap mode with the key
# command $cmd (design 9.4): its key ring of format 3 holds the data keys
# in the form $form (a regex) that the KMS ($kms names it) gave; a marker
# row ('unwrap-$run') reads back after a restart.  Returns the node,
# stopped, and a function giving a node's marker row.
sub unwrap_mode_cluster
{
	my ($name, $cmd, $form, $kms, $run) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(
		extra => [
			'--encryption=aes-256', "--encryption-key-command=$cmd",
			'--encryption-key-mode=unwrap'
		]);
	my $datadir = $node->data_dir;
	is(keyring_format($datadir),
		3, 'unwrap mode: initdb wrote a key ring of format 3');
	like(slurp_file("$datadir/pg_encryption/keyring"), $form,
		"unwrap mode: the key ring holds the data keys as $kms wrapped them");
	$node->start;
	$node->safe_psql('postgres',
		"CREATE TABLE marker (v text); INSERT INTO marker VALUES ('unwrap-$run')"
	);
	my $marker = sub { $_[0]->safe_psql('postgres', 'SELECT v FROM marker') };
	$node->restart;
	is($marker->($node), "unwrap-$run",
		"unwrap mode: restarted, $kms unwrapped the key ring");
	$node->stop;
	return ($node, $marker);
}

1;
