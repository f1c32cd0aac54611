# Copyright (c) 2026, pgcipher developers
#
# barman.pl — WAL streamed off an encrypted cluster by pg_receivewal, alone
# and under Barman, is ciphertext, and restores.
#
# For an aes-256 cluster with data checksums, then an unencrypted control:
# first pg_receivewal alone (PostgreSQL's own) streams WAL through a
# replication slot into a directory while marker rows are committed; a base
# backup taken without WAL (pg_basebackup -X none) recovers with those
# streamed segments as its only restore_command source, and answers as the
# source did.  Then Barman (Debian's 3.4.0, run as this user with its own
# configuration and barman_home, no service, no ssh) with
# backup_method = postgres and streaming_archiver = on, its path_prefix at
# our binaries so that the pg_receivewal it runs is ours: barman check
# passing, switch-wal --force --archive, a backup, marker rows after it and a
# restore point, barman recover of the latest backup (local) and a
# point-in-time barman recover --target-name, each started with the key and
# answering as the source did there.  Last, a scan of every byte of
# barman_home (base backups and WAL) and of pg_receivewal's directory: on
# aes-256 no marker, on the control every one, each where it belongs.
use strict;
use warnings FATAL => 'all';
use LeakScan;
use BackupTap;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $barman = $ENV{PGCIPHER_BARMAN};
plan skip_all =>
  'PGCIPHER_BARMAN is not set (test/tools/run.sh finds Debian\'s barman)'
  unless $barman;

my $run = sprintf('%08x', int(rand(0xffffffff)));
my $bindir = $ENV{PGCIPHER_BINDIR} or die 'PGCIPHER_BINDIR is not set';

my $answer_sql =
  q{SELECT count(*) || ' ' || md5(string_agg(v, ',' ORDER BY id)) FROM secrets};
my $rows_sql =
  q{SELECT string_agg(m || ' ' || n, ' ' ORDER BY m) FROM (SELECT split_part(v, '_', 2) AS m, count(*) AS n FROM secrets GROUP BY 1) s};

# barman's configuration files, to stop their receive-wal at the end
my @confs;

sub barman
{
	my ($conf, @args) = @_;
	my ($stdout, $stderr) = ('', '');
	my $ok = IPC::Run::run([ $barman, '-c', $conf, @args ],
		'>', \$stdout, '2>', \$stderr, IPC::Run::timeout(300));
	return ($ok, $stdout . $stderr);
}



sub insert
{
	my ($node, $marker, $from, $to) = @_;
	$node->safe_psql('postgres',
		qq{INSERT INTO secrets SELECT g, '$marker ' || g FROM generate_series($from, $to) g}
	);
}

sub run_cluster
{
	my ($cipher) = @_;
	my $encrypted = $cipher ne 'off';
	my @markers =
	  map { { name => $_, bytes => "BARMAN_${_}_${cipher}_$run" } }
	  qw(rwbase rwstream bbase bafter blate);
	my %m = map { $_->{name} => $_->{bytes} } @markers;

	my $node = PostgreSQL::Test::Cluster->new("barman_$cipher");
	$node->init(
		allows_streaming => 1,
		extra => [
			$encrypted ? encryption_options($cipher) : (),
			'--data-checksums'
		]);
	$node->start;
	is($node->safe_psql('postgres', 'SHOW data_encryption'),
		$cipher, "$cipher: the cluster's cipher");
	my $base = $node->basedir;

	# 1. pg_receivewal alone, through a slot of its own
	my $rwdir = "$base/receivewal";
	mkdir $rwdir or die "mkdir $rwdir: $!";
	my @conn = ('--host' => $node->host, '--port' => $node->port);
	command_ok([ 'pg_receivewal', @conn, '--slot' => 'rw', '--create-slot' ],
		"$cipher: pg_receivewal --create-slot");
	my ($rw_out, $rw_err) = ('', '');
	my $rw = IPC::Run::start(
		[
			'pg_receivewal', @conn,
			'--slot' => 'rw',
			'--directory' => $rwdir,
			'--no-loop', '--verbose'
		],
		'>',
		\$rw_out,
		'2>',
		\$rw_err);
	$node->poll_query_until('postgres',
		q{SELECT active FROM pg_replication_slots WHERE slot_name = 'rw'})
	  or die 'pg_receivewal did not connect';
	$node->safe_psql('postgres',
		'CREATE TABLE secrets (id int PRIMARY KEY, v text)');
	insert($node, $m{rwbase}, 1, 2000);
	$node->backup('rw', backup_options => [ '--wal-method' => 'none' ]);
	insert($node, $m{rwstream}, 2001, 3000);
	my $rw_expected = $node->safe_psql('postgres', $answer_sql);
	my $last = $node->safe_psql('postgres',
		'SELECT pg_walfile_name(pg_current_wal_lsn())');
	$node->safe_psql('postgres', 'SELECT pg_switch_wal()');
	my $waited = 0;
	usleep(100_000) while !-f "$rwdir/$last" && $waited++ < 600;
	ok( -f "$rwdir/$last",
		"$cipher: pg_receivewal wrote segment $last (the streamed rows) in full"
	);
	$rw->signal('TERM');
	$rw->finish;
	note_line("$cipher: pg_receivewal", $rw_err, qr/finished segment/);

	my $rwrest = PostgreSQL::Test::Cluster->new("barman_${cipher}_rw");
	$rwrest->init_from_backup($node, 'rw');
	$rwrest->append_conf('postgresql.conf',
		qq{restore_command = 'cp "$rwdir/%f" "%p"'});
	$rwrest->set_recovery_mode;
	start_restored($cipher, $rwrest,
		'cluster restored from pg_receivewal\'s segments');
	is( $rwrest->safe_psql('postgres', $answer_sql),
		$rw_expected,
		"$cipher: restored from a base backup and the streamed WAL, it answers as the source"
	);
	is( $rwrest->safe_psql('postgres', $rows_sql),
		'rwbase 2000 rwstream 1000',
		"$cipher: the rows only the streamed WAL held are there");
	$rwrest->stop;
	like(
		slurp_file($rwrest->logfile),
		qr/restored log file "[0-9A-F]{24}" from archive/,
		"$cipher: the recovery read pg_receivewal's segments through restore_command"
	);
	$node->safe_psql('postgres', q{SELECT pg_drop_replication_slot('rw')});

	# 2. Barman: backup_method = postgres, streaming_archiver = on, our
	# pg_receivewal and pg_basebackup through path_prefix
	my $home = "$base/barman";
	my $conf = "$base/barman.conf";
	mkdir $home or die "mkdir $home: $!";
	mkdir "$base/barman.d" or die "mkdir: $!";
	my $user = getpwuid($<);
	my $libpq =
	  'host=' . $node->host . ' port=' . $node->port . " user=$user";
	PostgreSQL::Test::Utils::append_to_file(
		$conf, qq{[barman]
barman_home = $home
barman_user = $user
log_file = $base/barman.log
log_level = INFO
configuration_files_directory = $base/barman.d

[pg]
description = "pgcipher $cipher"
conninfo = $libpq dbname=postgres
streaming_conninfo = $libpq
backup_method = postgres
streaming_archiver = on
slot_name = barman
path_prefix = $bindir
});
	push @confs, $conf;
	my ($ok, $out) = barman($conf, 'receive-wal', '--create-slot', 'pg');
	ok($ok, "$cipher: barman receive-wal --create-slot") or diag($out);
	# barman cron starts receive-wal (its pg_receivewal) in the background
	($ok, $out) = barman($conf, 'cron');
	ok($ok, "$cipher: barman cron") or diag($out);
	$node->poll_query_until('postgres',
		q{SELECT active FROM pg_replication_slots WHERE slot_name = 'barman'})
	  or die 'barman receive-wal did not connect';
	($ok, $out) = barman($conf, 'switch-wal', '--force', '--archive', 'pg');
	ok($ok, "$cipher: barman switch-wal --force --archive") or diag($out);
	note_line("$cipher: switch-wal", $out, qr/closed|Processing/);
	($ok, $out) = barman($conf, 'check', 'pg');
	ok($ok, "$cipher: barman check") or diag($out);
	unlike($out, qr/FAILED/, "$cipher: no check of barman check failed");

	for my $check (
		'PostgreSQL',
		'PostgreSQL streaming',
		'wal_level',
		'replication slot',
		'pg_basebackup compatible',
		'pg_receivexlog compatible',
		'receive-wal running')
	{
		like(
			$out,
			qr/^\s+\Q$check\E: OK/m,
			"$cipher: barman check: $check OK");
	}
	note("$cipher: check: "
		  . join('; ', map { s/^\s+//r } grep { /: / } split /\n/, $out));

	insert($node, $m{bbase}, 3001, 5000);
	($ok, $out) = barman($conf, 'backup', 'pg');
	ok($ok, "$cipher: barman backup") or diag($out);
	note_line("$cipher: backup", $out, qr/Backup completed|Backup size/);
	# the backup's last segment, then rows only in streamed WAL, a restore
	# point and rows after it
	($ok, $out) = barman($conf, 'switch-wal', '--force', '--archive', 'pg');
	ok($ok, "$cipher: barman switch-wal after the backup") or diag($out);
	insert($node, $m{bafter}, 5001, 6000);
	my $expected_pitr = $node->safe_psql('postgres', $answer_sql);
	# a time after every commit so far and before the late rows' commit
	my $target_time =
	  $node->safe_psql('postgres', 'SELECT clock_timestamp()');
	# a commit after it in the same segment: Barman copies the WAL up to
	# the target time only, and recovery must see a later commit to stop
	$node->safe_psql('postgres', 'SELECT pg_current_xact_id()');
	$node->safe_psql('postgres',
		q{SELECT pg_create_restore_point('barman_before_late')});
	$node->safe_psql('postgres', 'SELECT pg_switch_wal()');
	insert($node, $m{blate}, 6001, 6100);
	my $expected = $node->safe_psql('postgres', $answer_sql);
	($ok, $out) = barman($conf, 'switch-wal', '--force', '--archive', 'pg');
	ok($ok, "$cipher: barman switch-wal after the late rows") or diag($out);
	# cron marks the backup DONE once every segment it needs is archived;
	# receive-wal closes the last one asynchronously, so cron and look
	# again until it is (WAITING_FOR_WALS meanwhile) or a minute has passed
	my $cron_ok = 1;
	for my $try (1 .. 60)
	{
		($ok, $out) = barman($conf, 'cron');
		$cron_ok &&= $ok;
		diag($out) unless $ok;
		($ok, $out) = barman($conf, 'show-backup', 'pg', 'latest');
		last if $out =~ /^\s*Status\s*: DONE$/m;
		sleep 1;
	}
	ok($cron_ok, "$cipher: barman cron after the backup");
	like(
		$out,
		qr/^\s*Status\s*: DONE$/m,
		"$cipher: barman show-backup: the backup is DONE") or diag($out);
	($ok, $out) = barman($conf, 'list-backups', 'pg');
	like($out, qr/^pg \d{8}T\d{6} /m, "$cipher: barman list-backups lists it")
	  or diag($out);
	note("$cipher: list-backups: $out");
	# the backup's files against its manifest (pg_verifybackup, ours)
	($ok, $out) = barman($conf, 'verify-backup', 'pg', 'latest');
	ok($ok, "$cipher: barman verify-backup") or diag($out);
	note("$cipher: verify-backup: $out");

	my $recovered = PostgreSQL::Test::Cluster->new("barman_${cipher}_rec");
	($ok, $out) =
	  barman($conf, 'recover', 'pg', 'latest', $recovered->data_dir);
	ok($ok, "$cipher: barman recover of the latest backup") or diag($out);
	note_line("$cipher: recover", $out, qr/successfully prepared/);
	chmod 0700, $recovered->data_dir;
	start_restored($cipher, $recovered, 'cluster barman recovered');
	is($recovered->safe_psql('postgres', $answer_sql),
		$expected,
		"$cipher: barman's recovered cluster answers as the source");
	is( $recovered->safe_psql('postgres', $rows_sql),
		'bafter 1000 bbase 2000 blate 100 rwbase 2000 rwstream 1000',
		"$cipher: it has the rows of the backup and of the streamed WAL");
	$recovered->stop;

	my $pitr = PostgreSQL::Test::Cluster->new("barman_${cipher}_pitr");
	($ok, $out) = barman(
		$conf, 'recover',
		'--target-name', 'barman_before_late',
		'--target-action', 'promote',
		'pg', 'latest',
		$pitr->data_dir);
	ok($ok, "$cipher: barman recover --target-name") or diag($out);
	chmod 0700, $pitr->data_dir;
	check_recovered_to_target(
		$cipher,
		$pitr,
		'the restore point',
		$answer_sql,
		$expected_pitr,
		$rows_sql,
		'bafter 1000 bbase 2000 rwbase 2000 rwstream 1000',
		qr/recovery stopping at restore point "barman_before_late"/);

	# and to a time: the first commit after it (the late rows) not replayed
	my $pitr_time =
	  PostgreSQL::Test::Cluster->new("barman_${cipher}_pitr_time");
	($ok, $out) = barman(
		$conf, 'recover',
		'--target-time', $target_time,
		'--target-action', 'promote',
		'pg', 'latest',
		$pitr_time->data_dir);
	ok($ok, "$cipher: barman recover --target-time") or diag($out);
	chmod 0700, $pitr_time->data_dir;
	check_recovered_to_target(
		$cipher,
		$pitr_time,
		"the time $target_time",
		$answer_sql,
		$expected_pitr,
		$rows_sql,
		'bafter 1000 bbase 2000 rwbase 2000 rwstream 1000',
		qr/recovery stopping before commit of transaction \d+, time /);

	($ok, $out) = barman($conf, 'receive-wal', '--stop', 'pg');
	ok($ok, "$cipher: barman receive-wal --stop") or diag($out);
	$node->stop;

	# 3. barman_home and pg_receivewal's directory: no marker on aes-256,
	# every one on the control
	my $found = scan_for_markers(\@markers, $home, $rwdir);
	if ($encrypted)
	{
		foreach my $mk (@markers)
		{
			is_deeply(
				$found->{ $mk->{name} } // [],
				[],
				"$cipher: marker $mk->{name} nowhere in barman_home or pg_receivewal's directory"
			);
		}
	}
	else
	{
		my @where = (
			[ rwstream => qr{/receivewal/}, "pg_receivewal's directory" ],
			[ rwbase => qr{/barman/pg/base/}, "Barman's base backup" ],
			[ bbase => qr{/barman/pg/base/}, "Barman's base backup" ],
			[ bafter => qr{/barman/pg/wals/}, "Barman's WAL archive" ],
			[ blate => qr{/barman/pg/wals/}, "Barman's WAL archive" ]);
		foreach my $w (@where)
		{
			my ($name, $re, $what) = @$w;
			ok(scalar(grep { $_ =~ $re } @{ $found->{$name} // [] }),
				"control: marker $name found in $what")
			  or diag(explain($found));
		}
	}
}

END
{
	# a receive-wal left running by a failure; the test's exit status kept
	local $?;
	system($barman, '-c', $_, '-q', 'receive-wal', '--stop', 'pg')
	  for $barman ? @confs : ();
}

run_cluster('aes-256');
run_cluster('off');

done_testing();
