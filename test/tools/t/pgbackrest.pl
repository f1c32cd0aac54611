# Copyright (c) 2026, pgcipher developers
#
# pgbackrest.pl — pgBackRest, the backup tool PostgreSQL users run most,
# backs up and restores an encrypted cluster as it does a stock one with
# every integrity check it has turned on, and its repository and spool
# hold only ciphertext.
#
# For an aes-256 cluster with data checksums, then an unencrypted control,
# with archive-async=y (WAL pushed and fetched through the spool by
# pgBackRest's asynchronous processes), archive-header-check=y,
# checksum-page=y, page-header-check=y, archive-check=y and
# archive-mode-check=y stated in the configuration: stanza-create and check
# (which read pg_control and check its CRC at the stock layout, and archive
# a WAL segment), a full, a differential and an incremental backup with rows
# committed before each (every page's checksum verified: over the
# ciphertext, as stored), rows only in archived WAL, a restore point and
# rows after it; pgbackrest info listing the three backups and pgbackrest
# verify finding every file and segment valid; a restore of the latest
# backup recovered through asynchronous archive-get to the end of the
# archive, and a point-in-time recovery to the restore point (the later
# rows absent), each started with the key, still of the cluster's cipher
# (SHOW data_encryption, pg_controldata) and answering as the source did.
# Then evidence that the checks were live: the asynchronous push and get
# logged as such (the segment fetched ahead past the target kept from the
# spool when the fetcher's queue held it: timing, so noted, not asserted),
# a segment whose header names another system refused by the header
# check, and a page changed on disk reported by the page check.  The
# repository is kept uncompressed so that a scan of its every byte (backups
# and archive) and of the spool can find the markers: on aes-256 none, on
# the control every one, each where it belongs.
use strict;
use warnings FATAL => 'all';
use File::Copy qw(copy);
use LeakScan;
use BackupTap;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

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

# the rows of each marker, by marker: "backup 5000 diff 500 ..."
my $rows_sql =
  q{SELECT string_agg(m || ' ' || n, ' ' ORDER BY m) FROM (SELECT split_part(v, '_', 2) AS m, count(*) AS n FROM secrets GROUP BY 1) s};


sub run_cluster
{
	my ($cipher) = @_;
	my $encrypted = $cipher ne 'off';
	my @markers = map { { name => $_, bytes => "PGBR_${_}_${cipher}_$run" } }
	  qw(backup diff incr wal late);
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
	my $spool = "$base/pgbackrest-spool";
	my $logdir = "$base/pgbackrest-log";
	mkdir $logdir or die "mkdir $logdir: $!";

	# every integrity check pgBackRest has, stated even where it is the
	# default: WAL pushed and fetched through the spool by asynchronous
	# processes; each segment's header checked against the stanza's system
	# and version before it is pushed (archive-header-check); every page's
	# checksum checked by the backup (checksum-page), and a page that looks
	# new checked to be all zeros (page-header-check: pgcipher keeps
	# pd_upper in clear); a backup waits for its WAL to be archived
	# (archive-check); WAL pushed only from the stanza's own primary
	# (archive-mode-check)
	PostgreSQL::Test::Utils::append_to_file(
		$conf, qq{[global]
repo1-path=$base/repo
repo1-retention-full=1
compress-type=none
log-path=$logdir
lock-path=$base/pgbackrest-lock
spool-path=$spool
archive-async=y
archive-header-check=y
archive-check=y
archive-mode-check=y
checksum-page=y
page-header-check=y
log-level-console=info
log-level-file=info
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
CREATE TABLE victim (id int, v text);
INSERT INTO victim SELECT g, 'victim ' || g FROM generate_series(1, 10) g;
CHECKPOINT;});
	my $victim =
	  $node->data_dir . '/'
	  . $node->safe_psql('postgres',
		q{SELECT pg_relation_filepath('victim')});

	my ($ok, $out) = pgbackrest($conf, 'stanza-create');
	ok($ok, "$cipher: pgbackrest stanza-create") or diag($out);
	($ok, $out) = pgbackrest($conf, 'check');
	ok($ok, "$cipher: pgbackrest check") or diag($out);
	like(
		$out,
		qr/WAL segment \S+ successfully archived/,
		"$cipher: check archived a WAL segment");
	note_line("$cipher: check", $out, qr/successfully archived/);

	my $no_checksum_error =
	  qr/invalid page checksum|checksum.*(error|mismatch)/i;
	($ok, $out) = pgbackrest($conf, '--type=full', 'backup');
	ok($ok, "$cipher: pgbackrest backup --type=full") or diag($out);
	unlike($out, $no_checksum_error,
		"$cipher: the full backup found every page checksum valid");
	note_line("$cipher: full", $out, qr/new backup label/);

	$node->safe_psql('postgres',
		qq{INSERT INTO secrets SELECT g, '$m{diff} ' || g FROM generate_series(5001, 5500) g}
	);
	($ok, $out) = pgbackrest($conf, '--type=diff', 'backup');
	ok($ok, "$cipher: pgbackrest backup --type=diff") or diag($out);
	unlike($out, $no_checksum_error,
		"$cipher: the differential backup found every page checksum valid");
	note_line("$cipher: diff", $out, qr/new backup label/);

	$node->safe_psql('postgres',
		qq{INSERT INTO secrets SELECT g, '$m{incr} ' || g FROM generate_series(5501, 6000) g}
	);
	($ok, $out) = pgbackrest($conf, '--type=incr', 'backup');
	ok($ok, "$cipher: pgbackrest backup --type=incr") or diag($out);
	unlike($out, $no_checksum_error,
		"$cipher: the incremental backup found every page checksum valid");
	note_line("$cipher: incr", $out, qr/new backup label/);

	# rows that only the archived WAL holds, a restore point, and rows after
	# it that a recovery to the point must not have, in the next segment:
	# the recovery stops before it, but archive-get's asynchronous process
	# fetches it ahead into the spool, where the scan below reads it
	$node->safe_psql('postgres',
		qq{INSERT INTO secrets SELECT g, '$m{wal} ' || g FROM generate_series(6001, 7000) g}
	);
	my $expected_pitr = $node->safe_psql('postgres', $answer_sql);
	# a time after every commit so far and before the late rows' commit
	my $target_time =
	  $node->safe_psql('postgres', 'SELECT clock_timestamp()');
	$node->safe_psql('postgres',
		q{SELECT pg_create_restore_point('pgbr_before_late')});
	$node->safe_psql('postgres', 'SELECT pg_switch_wal()');
	$node->safe_psql('postgres',
		qq{INSERT INTO secrets SELECT g, '$m{late} ' || g FROM generate_series(7001, 7100) g}
	);
	my $late_segment = $node->safe_psql('postgres',
		'SELECT pg_walfile_name(pg_current_wal_lsn())');
	my $expected = $node->safe_psql('postgres', $answer_sql);
	isnt($expected, $expected_pitr,
		"$cipher: the late rows change the answer");
	$node->safe_psql('postgres', 'SELECT pg_switch_wal()');
	($ok, $out) = pgbackrest($conf, 'check');
	ok($ok, "$cipher: pgbackrest check after more WAL") or diag($out);
	$node->stop;

	($ok, $out) = pgbackrest($conf, 'info');
	ok($ok, "$cipher: pgbackrest info") or diag($out);
	my @types = $out =~ /^\s+(full|diff|incr) backup: /mg;
	is( "@types",
		'full diff incr',
		"$cipher: pgbackrest info lists a full, a differential and an incremental backup"
	) or diag($out);
	note(
		"$cipher: info: "
		  . join('; ',
			map { s/^\s+//r } grep { /backup: |status: / } split /\n/, $out));

	# every file of every backup and every WAL segment in the archive read
	# back and checked against the checksums pgBackRest recorded
	($ok, $out) = pgbackrest($conf, '--verbose', 'verify');
	ok($ok, "$cipher: pgbackrest verify") or diag($out);
	like($out, qr/^\s*status: ok$/m, "$cipher: verify's status is ok")
	  or diag($out);
	unlike(
		$out,
		qr/status: error|(missing|invalid|other): [1-9]/,
		"$cipher: verify counts no missing, invalid or otherwise bad file"
	) or diag($out);
	my @wal = $out =~ /total WAL checked: (\d+), total valid WAL: (\d+)/;
	ok(@wal && $wal[0] > 0 && $wal[0] == $wal[1],
		"$cipher: verify found every archived WAL segment valid")
	  or diag($out);
	like(
		$out,
		qr/backup: \S+I, status: valid/,
		"$cipher: verify checked the incremental backup");
	note(
		"$cipher: verify: "
		  . join('; ',
			map { s/^\s+//r } grep { /status: |total/ } split /\n/, $out));

	# the latest backup, recovering through archive-get (asynchronous: the
	# spool's queue) to the end of the archive
	my $restored = PostgreSQL::Test::Cluster->new("pgbr_${cipher}_restored");
	($ok, $out) =
	  pgbackrest($conf, '--pg1-path=' . $restored->data_dir, 'restore');
	ok($ok, "$cipher: pgbackrest restore of the latest backup") or diag($out);
	start_restored($cipher, $restored, 'restored cluster');
	is( $restored->safe_psql('postgres', $answer_sql),
		$expected,
		"$cipher: the restored cluster answers as the original, rows from the archived WAL included"
	);
	is( $restored->safe_psql('postgres', $rows_sql),
		"backup 5000 diff 500 incr 500 late 100 wal 1000",
		"$cipher: the restored cluster has the rows of every backup and of the archive"
	);
	$restored->stop;

	# point-in-time recovery to the restore point: the rows after it absent
	my $pitr = PostgreSQL::Test::Cluster->new("pgbr_${cipher}_pitr");
	($ok, $out) = pgbackrest($conf, '--pg1-path=' . $pitr->data_dir,
		'--type=name', '--target=pgbr_before_late',
		'--target-action=promote', 'restore');
	ok($ok, "$cipher: pgbackrest restore --type=name") or diag($out);
	check_recovered_to_target(
		$cipher,
		$pitr,
		'the restore point',
		$answer_sql,
		$expected_pitr,
		$rows_sql,
		"backup 5000 diff 500 incr 500 wal 1000",
		qr/recovery stopping at restore point "pgbr_before_late"/);

	# and to a time: the first commit after it (the late rows) not replayed
	my $pitr_time =
	  PostgreSQL::Test::Cluster->new("pgbr_${cipher}_pitr_time");
	($ok, $out) = pgbackrest($conf, '--pg1-path=' . $pitr_time->data_dir,
		'--type=time', "--target=$target_time",
		'--target-action=promote', 'restore');
	ok($ok, "$cipher: pgbackrest restore --type=time") or diag($out);
	check_recovered_to_target(
		$cipher,
		$pitr_time,
		"the time $target_time",
		$answer_sql,
		$expected_pitr,
		$rows_sql,
		"backup 5000 diff 500 incr 500 wal 1000",
		qr/recovery stopping before commit of transaction \d+, time /);

	# asynchronous archiving was used: the foreground's lines in the
	# server's log, the asynchronous processes' own logs
	my $async_push =
	  qr/pushed WAL file '[0-9A-F]{24}' to the archive asynchronously/;
	like(slurp_file($node->logfile),
		$async_push, "$cipher: archive-push pushed WAL asynchronously");
	note_line("$cipher: archive-push",
		slurp_file($node->logfile), $async_push);
	ok(-s "$logdir/main-archive-push-async.log",
		"$cipher: the asynchronous archive-push process logged");
	my $async_get = qr/found [0-9A-F]{24} in the archive asynchronously/;
	like(slurp_file($restored->logfile),
		$async_get, "$cipher: archive-get fetched WAL asynchronously");
	note_line("$cipher: archive-get",
		slurp_file($restored->logfile), $async_get);
	# the segment of the late rows, fetched ahead past the target into the
	# spool's queue: kept by a hard link the moment it is there (the
	# fetcher may drop its queue again; whether it fetched that far at all
	# depends on timing, so it is noted, not asserted)
	my $held = "$base/spool-held";
	mkdir $held or die "mkdir $held: $!";
	my ($waited, $kept) = (0, 0);
	while (!$kept && $waited++ < 600)
	{
		$kept =
		  link("$spool/archive/main/in/$late_segment", "$held/$late_segment");
		usleep(100_000) unless $kept;
	}
	note(
		$kept
		? "$cipher: the spool held WAL segment $late_segment (the late rows), fetched ahead past the target"
		: "$cipher: the fetcher's queue did not hold $late_segment within 60 s; the spool is scanned as it is"
	);

	# the repository and the spool: no marker on aes-256, every one on the
	# control
	my $found = scan_for_markers(\@markers, "$base/repo", $spool, $held);
	if ($encrypted)
	{
		foreach my $mk (@markers)
		{
			is_deeply(
				$found->{ $mk->{name} } // [],
				[],
				"$cipher: marker $mk->{name} nowhere in the repository (backups and archive) or the spool"
			);
		}
	}
	else
	{
		my @where = (
			[ backup => qr{/backup/main/\d{8}-\d{6}F/}, 'the full backup' ],
			[
				diff => qr{/backup/main/\d{8}-\d{6}F_\d{8}-\d{6}D/},
				'the differential backup'
			],
			[
				incr => qr{/backup/main/\d{8}-\d{6}F_\d{8}-\d{6}I/},
				'the incremental backup'
			],
			[ wal => qr{/repo/archive/main/}, 'the archive' ],
			[ late => qr{/repo/archive/main/}, 'the archive' ],
			$kept
			? ([ late => qr{/spool-held/}, 'the segment the spool held' ])
			: ());
		foreach my $w (@where)
		{
			my ($name, $re, $what) = @$w;
			ok(scalar(grep { $_ =~ $re } @{ $found->{$name} // [] }),
				"control: marker $name found in $what")
			  or diag(explain($found));
		}
	}

	# archive-header-check read every pushed segment's header (version and
	# system identifier): a segment whose header names another system is
	# refused
	my ($archived) =
	  glob("$base/repo/archive/main/*/0000000100000000/$late_segment-*");
	my $foreign = "$base/0000000100000000000000F0";
	copy($archived, $foreign)
	  or die "copy $archived: $!";
	open(my $wal, '+<:raw', $foreign) or die "open $foreign: $!";
	seek($wal, 24, 0) or die "seek: $!";    # xlp_sysid of the long header
	read($wal, my $sysid, 8) == 8 or die "read: $!";
	seek($wal, 24, 0) or die "seek: $!";
	print $wal ($sysid ^ "\x01" . ("\0" x 7)) or die "write: $!";
	close($wal) or die "close: $!";
	($ok, $out) =
	  pgbackrest($conf, '--no-archive-async', 'archive-push', $foreign);
	ok(!$ok, "$cipher: archive-push refuses a segment of another system");
	like(
		$out,
		qr/WAL file '\S+' version \S+, system-id \d+ do not match stanza version \S+, system-id \d+/,
		"$cipher: archive-header-check says why") or diag($out);
	note_line("$cipher: archive-header-check", $out, qr/do not match/);

	# a page whose checksum is wrong is reported: one page of a relation
	# changed on disk while the cluster is stopped, then a backup
	open(my $fh, '+<:raw', $victim) or die "open $victim: $!";
	seek($fh, 4000, 0) or die "seek: $!";
	print $fh 'CORRUPTED PAGE' or die "write: $!";
	close($fh) or die "close: $!";
	$node->start;
	($ok, $out) = pgbackrest($conf, '--type=incr', 'backup');
	ok($ok,
		"$cipher: a backup with a corrupted page completes, with a warning")
	  or diag($out);
	like(
		$out,
		qr/invalid page checksum found in file \S+ at page 0/,
		"$cipher: checksum-page reports the corrupted page") or diag($out);
	note_line("$cipher: corrupted page", $out, qr/invalid page checksum/);
	$node->stop;
}

run_cluster('aes-256');
run_cluster('off');

done_testing();
