# Copyright (c) 2026, pgcipher developers
#
# BackupTap: what pgbackrest.pl and barman.pl do the same way with the
# clusters their tools restore.
package BackupTap;

use strict;
use warnings FATAL => 'all';
use Exporter 'import';
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(note_line start_restored);

# one line of a tool's output for the log of the run: the first that
# matches $re
sub note_line
{
	my ($what, $out, $re) = @_;
	my ($line) = grep { /$re/ } split /\n/, $out;
	note("$what: " . ($line // '(no such line)'));
}

# a restored cluster: started, out of recovery, with the key; its cipher
# checked by the server and by pg_controldata
sub start_restored
{
	my ($cipher, $restored, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$restored->append_conf(
		'postgresql.conf', qq{
port = @{[ $restored->port ]}
unix_socket_directories = '@{[ $restored->host ]}'
archive_mode = off
});
	$restored->start;
	$restored->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
	  or die "the $what did not finish recovery";
	is($restored->safe_psql('postgres', 'SHOW data_encryption'),
		$cipher, "$cipher: the $what is $cipher");
	my ($control) =
	  run_command([ 'pg_controldata', '-D', $restored->data_dir ]);
	like(
		$control,
		qr/^Data encryption:\s+\Q$cipher\E$/m,
		"$cipher: pg_controldata of the $what says $cipher");
}

1;
