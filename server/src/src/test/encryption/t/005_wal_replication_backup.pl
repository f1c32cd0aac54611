# Copyright (c) 2026, pgcipher developers
#
# WAL encryption end to end: markers written on an encrypted primary must not
# appear in its pg_wal, in the WAL archive, in what pg_receivewal writes, in
# base backups (-X stream), incremental backups and what pg_combinebackup
# makes of them, on streaming standbys (synchronous and cascading), in a
# point-in-time recovery from the archive, after a crash, or on an old
# primary rewound with pg_rewind after a failover.  Meanwhile every one of
# those copies must work: standbys replay and promote, PITR stops at its
# target, pg_verifybackup checks the WAL of a backup (through pg_waldump,
# which reads the key like the server does), logical decoding and logical
# replication to and from an unencrypted cluster carry the rows.  The same
# run without encryption must find the markers (so the scan can fail).
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib "$FindBin::RealBin/..";
use LeakScan;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $keyfile = PostgreSQL::Test::Utils::tempdir() . '/kek';
PostgreSQL::Test::Utils::append_to_file($keyfile, ('cd' x 32) . "\n");
my $run = sprintf('%08x', int(rand(0xffffffff)));

sub run_scenario
{
	my ($encrypted) = @_;
	my $label = $encrypted ? 'enc' : 'plain';
	my @enc =
	  $encrypted
	  ? ('--encryption=aes-128', "--encryption-key-command=cat $keyfile")
	  : ();
	my (@markers, @dirs);
	my $marker = sub {
		my $text = "PGCW_$_[0]_${label}_$run";
		push @markers, { name => $_[0], bytes => $text };
		return $text;
	};

	my $primary = PostgreSQL::Test::Cluster->new("primary_$label");
	$primary->init(
		allows_streaming => 'logical',
		has_archiving => 1,
		extra => [ '--data-checksums', @enc ]);
	$primary->append_conf(
		'postgresql.conf', qq(
summarize_wal = on
wal_keep_size = 256MB
autovacuum = off
));
	$primary->start;
	is( $primary->safe_psql('postgres', 'SHOW data_encryption'),
		$encrypted ? 'aes-128' : 'off',
		"$label: data_encryption");
	push @dirs, $primary->data_dir, $primary->archive_dir;

	$primary->safe_psql(
		'postgres', qq(
CREATE TABLE t (id serial PRIMARY KEY, v text);
INSERT INTO t (v) SELECT '@{[ $marker->('base') ]}' || g FROM generate_series(1, 200) g;
CHECKPOINT;));

	# full base backup with streamed WAL, and standby 1 from it
	$primary->backup('full');
	push @dirs, $primary->backup_dir;
	command_ok(
		[ 'pg_verifybackup', $primary->backup_dir . '/full' ],
		"$label: pg_verifybackup checks the backup and parses its WAL");

	my $standby1 = PostgreSQL::Test::Cluster->new("standby1_$label");
	$standby1->init_from_backup($primary, 'full', has_streaming => 1);
	$standby1->start;
	push @dirs, $standby1->data_dir;
	$standby1->backup('from_standby');
	my $standby2 = PostgreSQL::Test::Cluster->new("standby2_$label");
	$standby2->init_from_backup($standby1, 'from_standby',
		has_streaming => 1);
	$standby2->start;
	push @dirs, $standby2->data_dir;

	# pg_receivewal from a physical slot
	my $recvdir = PostgreSQL::Test::Utils::tempdir();
	push @dirs, $recvdir;
	$primary->safe_psql('postgres',
		"SELECT pg_create_physical_replication_slot('recv', true)");

	# synchronous replication to standby 1
	$primary->append_conf('postgresql.conf',
		"synchronous_standby_names = '" . $standby1->name . "'");
	$primary->reload;
	$primary->poll_query_until('postgres',
		"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = '"
		  . $standby1->name
		  . "'");
	$primary->safe_psql('postgres',
		"INSERT INTO t (v) VALUES ('@{[ $marker->('sync') ]}')");
	$primary->safe_psql('postgres',
		"SELECT pg_create_restore_point('before_late')");
	my $lsn = $primary->lsn('insert');
	$primary->safe_psql('postgres',
		"INSERT INTO t (v) VALUES ('@{[ $marker->('late') ]}'); SELECT pg_switch_wal();"
	);
	my $endpos = $primary->lsn('insert');
	# a commit past the switch: WAL up to $endpos is flushed and sent now,
	# not at the next background running-xacts record (15 s)
	$primary->safe_psql('postgres', 'SELECT pg_current_xact_id()');
	$primary->command_ok(
		[
			'pg_receivewal', '-D',
			$recvdir, '--slot',
			'recv', '--endpos',
			$endpos, '--no-loop',
			'--no-sync', '-d',
			$primary->connstr('postgres')
		],
		"$label: pg_receivewal");
	$primary->wait_for_replay_catchup($standby1);
	$standby1->wait_for_replay_catchup($standby2, $primary);
	is($standby2->safe_psql('postgres', 'SELECT count(*) FROM t'),
		'202', "$label: cascading standby has every row");

	# logical decoding and logical replication to an unencrypted cluster
	$primary->safe_psql('postgres',
		"SELECT pg_create_logical_replication_slot('dec', 'test_decoding')");
	$primary->safe_psql('postgres',
		"INSERT INTO t (v) VALUES ('@{[ $marker->('logical') ]}')");
	like(
		$primary->safe_psql(
			'postgres',
			"SELECT string_agg(data, ' ') FROM pg_logical_slot_get_changes('dec', NULL, NULL)"
		),
		qr/PGCW_logical_/,
		"$label: logical decoding reads encrypted WAL");
	my $sub = PostgreSQL::Test::Cluster->new("sub_$label");
	$sub->init(allows_streaming => 'logical');
	$sub->start;
	$sub->safe_psql('postgres',
		'CREATE TABLE t (id int PRIMARY KEY, v text); CREATE TABLE back (id int PRIMARY KEY, v text)'
	);
	$primary->safe_psql('postgres',
		'CREATE PUBLICATION p FOR TABLE t; CREATE TABLE back (id int PRIMARY KEY, v text)'
	);
	$sub->safe_psql('postgres',
			"CREATE SUBSCRIPTION s CONNECTION '"
		  . $primary->connstr
		  . " dbname=postgres' PUBLICATION p");
	$sub->safe_psql('postgres', "CREATE PUBLICATION pb FOR TABLE back");
	$primary->safe_psql('postgres',
			"CREATE SUBSCRIPTION sb CONNECTION '"
		  . $sub->connstr
		  . " dbname=postgres' PUBLICATION pb");
	$sub->wait_for_subscription_sync($primary, 's');
	$primary->wait_for_subscription_sync($sub, 'sb');
	$sub->safe_psql('postgres',
		"INSERT INTO back VALUES (1, '@{[ $marker->('back') ]}')");
	$sub->wait_for_catchup('sb');
	$primary->wait_for_catchup('s');
	is($sub->safe_psql('postgres', 'SELECT count(*) FROM t'),
		'203', "$label: rows replicated to an unencrypted subscriber");
	is( $primary->safe_psql(
			'postgres',
			"SELECT count(*) FROM back WHERE v LIKE 'PGCW_back_%'"),
		'1',
		"$label: rows replicated back from the unencrypted cluster");
	$primary->safe_psql('postgres', 'DROP SUBSCRIPTION sb');
	$sub->safe_psql('postgres', 'DROP SUBSCRIPTION s');
	$sub->stop;

	# incremental backup, combined, started
	$primary->safe_psql('postgres',
		"INSERT INTO t (v) VALUES ('@{[ $marker->('incr') ]}'); CHECKPOINT;");
	$primary->backup('incr',
		backup_options =>
		  [ '--incremental', $primary->backup_dir . '/full/backup_manifest' ]
	);
	my $combined = PostgreSQL::Test::Cluster->new("combined_$label");
	$combined->init_from_backup($primary, 'incr',
		combine_with_prior => ['full']);
	$combined->start;
	push @dirs, $combined->data_dir;
	is( $combined->safe_psql(
			'postgres', "SELECT count(*) FROM t WHERE v LIKE 'PGCW_incr_%'"),
		'1',
		"$label: pg_combinebackup result starts and has the row");
	$combined->stop;

	# point-in-time recovery from the archive, stopping before 'late'
	$primary->safe_psql('postgres', 'SELECT pg_switch_wal()');
	$primary->poll_query_until('postgres',
		"SELECT last_archived_wal IS NOT NULL AND last_failed_wal IS NULL FROM pg_stat_archiver"
	);
	my $pitr = PostgreSQL::Test::Cluster->new("pitr_$label");
	$pitr->init_from_backup($primary, 'full', has_restoring => 1);
	$pitr->append_conf('postgresql.conf',
		"recovery_target_name = 'before_late'\nrecovery_target_action = 'promote'"
	);
	$pitr->start;
	$pitr->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()');
	is( $pitr->safe_psql(
			'postgres', "SELECT count(*) FROM t WHERE v LIKE 'PGCW_late_%'"),
		'0',
		"$label: PITR stopped at its target");
	is( $pitr->safe_psql(
			'postgres', "SELECT count(*) FROM t WHERE v LIKE 'PGCW_sync_%'"),
		'1',
		"$label: PITR replayed the archive up to its target");
	push @dirs, $pitr->data_dir;
	$pitr->stop;

	# crash and recovery
	$primary->safe_psql('postgres',
		"INSERT INTO t (v) VALUES ('@{[ $marker->('crash') ]}')");
	$primary->stop('immediate');
	$primary->start;
	is( $primary->safe_psql(
			'postgres', "SELECT count(*) FROM t WHERE v LIKE 'PGCW_crash_%'"),
		'1',
		"$label: crash recovery replays encrypted WAL");

	# failover: promote standby 1, let the old primary diverge, rewind it
	$primary->append_conf('postgresql.conf',
		"synchronous_standby_names = ''");
	$primary->reload;
	$primary->wait_for_replay_catchup($standby1);
	$standby1->promote;
	$standby1->safe_psql('postgres',
		"INSERT INTO t (v) VALUES ('@{[ $marker->('promoted') ]}'); CHECKPOINT;"
	);
	$primary->safe_psql('postgres',
		"INSERT INTO t (v) VALUES ('@{[ $marker->('diverged') ]}')");
	$primary->stop;
	# pg_rewind copies the source's configuration: keep the target's
	my $conf = $primary->data_dir . '/postgresql.conf';
	my $saved = slurp_file($conf);
	command_ok(
		[
			'pg_rewind', '--target-pgdata',
			$primary->data_dir, '--source-server',
			$standby1->connstr('postgres'), '--no-sync'
		],
		"$label: pg_rewind of the old primary");
	unlink $conf;
	append_to_file($conf, $saved);
	$primary->enable_streaming($standby1);
	$primary->start;
	$standby1->wait_for_replay_catchup($primary);
	is( $primary->safe_psql(
			'postgres',
			"SELECT count(*) FROM t WHERE v LIKE 'PGCW_promoted_%' OR v LIKE 'PGCW_diverged_%'"
		),
		'1',
		"$label: rewound old primary follows the new timeline");
	$standby1->safe_psql('postgres', 'CHECKPOINT');

	my $found = scan_for_markers(\@markers, @dirs);
	$standby2->stop;
	$primary->stop;
	$standby1->stop;
	return (\@markers, $found);
}

my ($markers, $found) = run_scenario(0);
foreach my $m (@$markers)
{
	ok($found->{ $m->{name} },
		"control: marker $m->{name} found without encryption");
}
ok((grep { m{/pg_wal/} } map { @$_ } values %$found),
	'control: markers in pg_wal');

($markers, $found) = run_scenario(1);
foreach my $m (@$markers)
{
	ok(!$found->{ $m->{name} },
		"encrypted: marker $m->{name} on disk nowhere")
	  or diag(join("\n", @{ $found->{ $m->{name} } }));
}

done_testing();
