# Copyright (c) 2026, pgcipher developers
#
# KmsTap: what openbao.pl and kmip.pl check the same way of a cluster or
# a proxy keyed through pgcipher-kms, and a key rotation killed at each of
# its steps.
package KmsTap;

use strict;
use warnings FATAL => 'all';
use Exporter 'import';
use IO::Socket::INET;
use Time::HiRes qw(usleep);
use LeakScan;
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(refuses_to_start proxy_serves_encrypted_column
  keyring_format rotation_survives_kill_9);

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

# The format of $datadir's key ring: 2 for a KEK, 3 for the unwrap mode
# (design 9), from its header
sub keyring_format
{
	my ($datadir) = @_;
	open(my $fh, '<:raw', "$datadir/pg_encryption/keyring") or die $!;
	read($fh, my $head, 20) == 20 or die 'short key ring';
	close $fh;
	my ($magic, $version, $cipher, $source) = unpack('a8 N N N', $head);
	die "not a key ring: $magic" unless $magic eq 'PGCIPHKR';
	return $version;
}

sub wait_for_death
{
	my ($pid) = @_;
	for (1 .. 300)
	{
		return if !kill(0, $pid);
		usleep(100_000);
	}
	die "postmaster $pid did not die";
}

# Rotate the running $node ($mode: kek or unwrap) from the key command
# $current to $next, and back, killing the server with SIGKILL at each
# step of the rotation (design 9.1, the test hook of keyrotation.c).
# After each kill the node starts with the old command when the kill came
# before the new one was saved and with the new one after, $check->($node)
# answers as before, only the key ring is left in pg_encryption, of the
# mode's format.  Returns the command the node ends with.
sub rotation_survives_kill_9
{
	my ($node, $mode, $current, $next, $check) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $pgdata = $node->data_dir;
	my $expected = $check->($node);
	my %new_after = (
		'command' => 0,
		'next-written' => 0,
		'next-installed' => 0,
		'command-saved' => 1,
		'completed' => 1);
	for my $step (
		'command', 'next-written',
		'next-installed', 'command-saved',
		'completed')
	{
		local $ENV{PGCIPHER_TEST_KEY_ROTATION_CRASH_AT} = $step;
		$node->restart;
		my ($pid) = split /\n/, slurp_file("$pgdata/postmaster.pid");
		my ($ret) = $node->psql('postgres',
			"SELECT pg_rotate_encryption_key('$next', '$mode')");
		isnt($ret, 0, "$mode mode, kill -9 at step $step: no answer");
		wait_for_death($pid);
		$node->kill9;    # (already dead) the node object forgets the pid
		delete $ENV{PGCIPHER_TEST_KEY_ROTATION_CRASH_AT};

		my $log_offset = -s $node->logfile;
		my $started;
		for (1 .. 50)
		{
			last if $started = $node->start(fail_ok => 1);
			usleep(200_000);    # children of the killed postmaster exiting
		}
		ok($started, "$mode mode, kill -9 at step $step: the server starts");
		my $want = $new_after{$step} ? $next : $current;
		is( $node->safe_psql('postgres', 'SHOW encryption_key_command'),
			$want,
			"$mode mode, kill -9 at step $step: with the "
			  . ($new_after{$step} ? 'new' : 'old')
			  . ' command');
		is($check->($node), $expected,
			"$mode mode, kill -9 at step $step: data intact");
		ok( !-e "$pgdata/pg_encryption/keyring.next"
			  && !-e "$pgdata/pg_encryption/keyring.next.tmp"
			  && !-e "$pgdata/pg_encryption/keyring.tmp",
			"$mode mode, kill -9 at step $step: only the key ring left");
		is( keyring_format($pgdata),
			$mode eq 'unwrap' ? 3 : 2,
			"$mode mode, kill -9 at step $step: the key ring's format");
		my $said = {
			'next-installed' =>
			  qr/removed the key ring of an interrupted rotation/,
			'command-saved' => qr/completed an interrupted rotation/
		}->{$step};
		like(slurp_file($node->logfile, $log_offset),
			$said,
			"$mode mode, kill -9 at step $step: start-up says what it did")
		  if $said;
		($current, $next) = ($next, $current) if $new_after{$step};
	}
	return $current;
}

1;
