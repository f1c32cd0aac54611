# Copyright (c) 2026, pgcipher developers
#
# KeyRotationTap: a rotation of a cluster's key (design 9.1, 9.4) killed
# with SIGKILL at each of its steps, as TAP 007 runs it with key files and
# the suite kms (test/kms) with OpenBao and KMIP; and the format of a key
# ring, from its header.
package KeyRotationTap;

use strict;
use warnings FATAL => 'all';
use Exporter 'import';
use Time::HiRes qw(usleep);
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(keyring_format rotation_survives_kill_9);

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
