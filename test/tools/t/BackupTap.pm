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

our @EXPORT = qw(note_line start_restored check_recovered_to_target);

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

# A cluster the tool restored to a recovery target ($target: a restore
# point's name, or a time): started as start_restored() does, it answers
# $sql as the source did there ($expected), its rows are $rows ($rows_sql)
# and its log says where recovery stopped ($stopped: a regex); stopped.
sub check_recovered_to_target
{
	my ($cipher, $pitr, $target, $sql, $expected, $rows_sql, $rows, $stopped)
	  = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	start_restored($cipher, $pitr, "cluster recovered to $target");
	is($pitr->safe_psql('postgres', $sql),
		$expected,
		"$cipher: recovered to $target, it answers as the source did there");
	is( $pitr->safe_psql('postgres', $rows_sql),
		$rows,
		"$cipher, $target: the rows before it present, the later ones absent"
	);
	$pitr->stop;
	like(slurp_file($pitr->logfile),
		$stopped, "$cipher: the recovery stopped at $target");
}

1;
