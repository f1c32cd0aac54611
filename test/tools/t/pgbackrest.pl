# Copyright (c) 2026, pgcipher developers
#
# pgbackrest.pl — pgBackRest, the backup tool PostgreSQL users run most,
# backs up and restores an encrypted cluster as it does a stock one, and
# its repository holds only ciphertext.
#
# For an aes-256 cluster with data checksums, then an unencrypted control:
# stanza-create and check (which read pg_control and check its CRC at the
# stock layout, and archive a WAL segment whose header they read), a full
# backup (which verifies every page's checksum: over the ciphertext, as
# stored), rows committed after it (only in archived WAL), a restore into a
# new data directory with recovery through archive-get, and the restored
# cluster's answers compared with the original's.  The repository is kept
# uncompressed so that a scan of its every byte (backup and archive) can
# find the markers: on aes-256 none, on the control every one.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib "$FindBin::RealBin/../../../server/src/src/test/encryption";
use LeakScan;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $pgbackrest = $ENV{PGCIPHER_PGBACKREST};
plan skip_all =>
  'PGCIPHER_PGBACKREST is not set (test/tools/run.sh builds pgBackRest)'
  unless $pgbackrest;

my $run = sprintf('%08x', int(rand(0xffffffff)));

sub pgbackrest
{
	my ($conf, @args) = @_;
	my ($stdout, $stderr) = ('', '');
	my $ok =
	  IPC::Run::run([ $pgbackrest, "--config=$conf", '--stanza=main', @args ],
		'>', \$stdout, '2>', \$stderr, IPC::Run::timeout(300));
	return ($ok, $stdout . $stderr);
}

my $answer_sql =
  q{SELECT count(*) || ' ' || md5(string_agg(v, ',' ORDER BY id)) FROM secrets};

sub run_cluster
{
	my ($cipher) = @_;
	my $encrypted = $cipher ne 'off';
	my @markers = map { { name => $_, bytes => "PGBR_${_}_${cipher}_$run" } }
	  qw(backup wal);
	my %m = map { $_->{name} => $_->{bytes} } @markers;

	my $node = PostgreSQL::Test::Cluster->new("pgbr_$cipher");
	$node->init(
		allows_streaming => 1,
		extra => [
			$encrypted ? encryption_options($cipher) : (),
			'--data-checksums'
		]);
	my $base = $node->basedir;
	my $conf = "$base/pgbackrest.conf";
	PostgreSQL::Test::Utils::append_to_file(
		$conf, qq{[global]
repo1-path=$base/repo
repo1-retention-full=1
compress-type=none
log-path=$base/pgbackrest-log
lock-path=$base/pgbackrest-lock
spool-path=$base/pgbackrest-spool
log-level-console=info
log-level-file=off
start-fast=y

[main]
pg1-path=@{[ $node->data_dir ]}
pg1-socket-path=@{[ $node->host ]}
pg1-port=@{[ $node->port ]}
});
	$node->append_conf(
		'postgresql.conf', qq{
archive_mode = on
archive_command = '$pgbackrest --config=$conf --stanza=main archive-push %p'
});
	$node->start;
	is($node->safe_psql('postgres', 'SHOW data_encryption'),
		$cipher, "$cipher: the cluster's cipher");
	$node->safe_psql(
		'postgres', qq{
CREATE TABLE secrets (id int PRIMARY KEY, v text);
INSERT INTO secrets SELECT g, '$m{backup} ' || g FROM generate_series(1, 5000) g;
CHECKPOINT;});

	my ($ok, $out) = pgbackrest($conf, 'stanza-create');
	ok($ok, "$cipher: pgbackrest stanza-create") or diag($out);
	($ok, $out) = pgbackrest($conf, 'check');
	ok($ok, "$cipher: pgbackrest check") or diag($out);
	like(
		$out,
		qr/WAL segment \S+ successfully archived/,
		"$cipher: check archived a WAL segment");
	($ok, $out) = pgbackrest($conf, '--type=full', 'backup');
	ok($ok, "$cipher: pgbackrest backup --type=full") or diag($out);
	unlike(
		$out,
		qr/invalid page checksum|checksum.*(error|mismatch)/i,
		"$cipher: the backup found every page checksum valid");

	# rows that only the archived WAL holds
	$node->safe_psql('postgres',
		qq{INSERT INTO secrets SELECT g, '$m{wal} ' || g FROM generate_series(5001, 6000) g}
	);
	my $expected = $node->safe_psql('postgres', $answer_sql);
	$node->safe_psql('postgres', 'SELECT pg_switch_wal()');
	($ok, $out) = pgbackrest($conf, 'check');
	ok($ok, "$cipher: pgbackrest check after more WAL") or diag($out);
	$node->stop;

	($ok, $out) = pgbackrest($conf, 'info');
	like(
		$out,
		qr/full backup/,
		"$cipher: pgbackrest info lists the full backup");

	# restore into a new data directory, recovering from the archive
	my $restored = PostgreSQL::Test::Cluster->new("pgbr_${cipher}_restored");
	($ok, $out) =
	  pgbackrest($conf, '--pg1-path=' . $restored->data_dir, 'restore');
	ok($ok, "$cipher: pgbackrest restore") or diag($out);
	$restored->append_conf(
		'postgresql.conf', qq{
port = @{[ $restored->port ]}
unix_socket_directories = '@{[ $restored->host ]}'
archive_mode = off
});
	$restored->start;
	$restored->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
	  or die "the restored cluster did not finish recovery";
	is($restored->safe_psql('postgres', 'SHOW data_encryption'),
		$cipher, "$cipher: the restored cluster is $cipher");
	is( $restored->safe_psql('postgres', $answer_sql),
		$expected,
		"$cipher: the restored cluster answers as the original, rows from the archived WAL included"
	);
	$restored->stop;

	my $found = scan_for_markers(\@markers, "$base/repo");
	if ($encrypted)
	{
		foreach my $mk (@markers)
		{
			is_deeply(
				$found->{ $mk->{name} } // [],
				[],
				"$cipher: marker $mk->{name} nowhere in the repository (backup and archive)"
			);
		}
	}
	else
	{
		ok( scalar(grep { m{/backup/} } @{ $found->{backup} // [] }),
			'control: the backup marker found in the repository\'s backup');
		ok( scalar(grep { m{/archive/} } @{ $found->{wal} // [] }),
			'control: the WAL marker found in the repository\'s archive');
	}
}

run_cluster('aes-256');
run_cluster('off');

done_testing();
