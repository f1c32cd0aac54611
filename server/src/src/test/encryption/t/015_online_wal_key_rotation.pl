# Copyright (c) 2026, pgcipher developers
#
# The WAL key's generations (design 7, 9.6; walkeys.c): pg_rotate_data_keys()
# draws a new WAL key too, and new WAL is written under it from a segment
# boundary, each page naming its key slot in its clear header
# (XLP_WAL_KEY_B).  Crash recovery, pg_waldump, pg_rewind, a standby, a
# logical subscriber and a point-in-time recovery from the archive read
# WAL of both keys.  The old WAL key stays while this server may still
# read WAL under it: pg_encryption_drop_old_wal_key() and the next
# rotation say what holds it (a replication slot, the archiver, a running
# backup) and checkpoint by themselves when only the redo point does.
# Once dropped, WAL from before the switch reads only with the key ring of
# a backup taken before.  No marker is in the WAL, the archive or the
# data; an unencrypted control finds them.
use strict;
use warnings FATAL => 'all';
use File::Basename;
use FindBin;
use lib "$FindBin::RealBin/..";
use LeakScan;
use OnlineOps;
use PostgreSQL::Test::BackgroundPsql;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $run = int(rand(1_000_000));
my @markers;
my $marker = sub {
	my $text = "PGCW_$_[0]_$run";
	push @markers, { name => $_[0], bytes => $text };
	return $text;
};

my $node = PostgreSQL::Test::Cluster->new('wal_keys');
$node->init(
	allows_streaming => 'logical',
	has_archiving => 1,
	extra => [ '--data-checksums', LeakScan::encryption_options('aes-128') ]);
$node->append_conf(
	'postgresql.conf', qq(
wal_log_hints = on
checkpoint_timeout = 1h
max_wal_size = 1GB
wal_keep_size = 1GB
autovacuum = off
));
$node->start;
my $pgdata = $node->data_dir;

sub lsn
{
	my ($text) = @_;
	my ($hi, $lo) = split m{/}, $text;
	return hex($hi) * 2**32 + hex($lo);
}

sub page_state
{
	return scalar slurp_file(($_[0] // $pgdata) . '/pg_encryption/pages');
}

sub wait_done
{
	my ($n) = @_;
	return $n->poll_query_until('postgres',
		"SELECT operation || ' ' || phase = 'none idle' FROM pg_stat_progress_encryption"
	);
}

# The encrypted pages of the WAL segments in $dir, by the key slot their
# clear header names, before and after the LSN $switch; pages left over
# from a recycled segment (another address) are not counted
sub wal_slots
{
	my ($dir, $switch) = @_;
	my %count = map { $_ => { A => 0, B => 0 } } qw(before after);
	for my $file (glob("$dir/*"))
	{
		next
		  unless basename($file) =~ /^[0-9A-F]{8}([0-9A-F]{8})([0-9A-F]{8})$/;
		my $start = (hex($1) * 256 + hex($2)) * 16 * 1024 * 1024;
		open(my $fh, '<:raw', $file) or next;
		for (my $i = 0; read($fh, my $page, 8192) == 8192; $i++)
		{
			my ($magic, $info, $tli, $addr) = unpack('v v V Q<', $page);
			next unless $addr == $start + $i * 8192 && ($info & 0x10);
			my $side = $addr < $switch ? 'before' : 'after';
			my $slot = ($info & 0x20) ? 'B' : 'A';
			$count{$side}{$slot}++;
		}
		close $fh;
	}
	return \%count;
}

# --- before the rotation: WAL under slot A, a standby, a backup, a slot ---
$node->safe_psql(
	'postgres', qq(
CREATE TABLE t (id int PRIMARY KEY, v text);
INSERT INTO t SELECT g, '@{[ $marker->('before') ]}' || g FROM generate_series(1, 1000) g;
SELECT pg_create_physical_replication_slot('lagging', true);
CHECKPOINT;));
$node->backup('before');

# a logical subscriber (unencrypted): decoding reads WAL of both keys
my $sub = PostgreSQL::Test::Cluster->new('wal_keys_sub');
$sub->init;
$sub->start;
$sub->safe_psql('postgres', 'CREATE TABLE t (id int PRIMARY KEY, v text)');
$node->safe_psql('postgres', 'CREATE PUBLICATION p FOR TABLE t');
$sub->safe_psql('postgres',
		"CREATE SUBSCRIPTION s CONNECTION '"
	  . $node->connstr
	  . " dbname=postgres' PUBLICATION p");
$sub->wait_for_subscription_sync($node, 's');
my $standby = PostgreSQL::Test::Cluster->new('wal_keys_standby');
$standby->init_from_backup($node, 'before', has_streaming => 1);
$standby->start;
my $start_lsn = $node->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
$node->safe_psql('postgres',
	"INSERT INTO t SELECT g, 'x' || g FROM generate_series(1001, 2000) g");

# the archiver fails for now: a segment before the switch stays unarchived
$node->safe_psql('postgres',
	"ALTER SYSTEM SET archive_command = 'false'; SELECT pg_reload_conf()");
$node->safe_psql('postgres', 'SELECT pg_switch_wal()');

# --- the rotation: a new WAL key from a segment boundary ---
$node->safe_psql('postgres', 'SELECT pg_rotate_data_keys(0, 10000)');
ok(wait_done($node), 'the rotation completes');
my ($switch_text) = page_state() =~ m{wal_switch_lsn (\S+)};
my $switch = lsn($switch_text);
like(
	page_state(),
	qr/wal_generation 2\n/,
	'pg_encryption/pages: WAL generation 2');
is($switch % (16 * 1024 * 1024),
	0, "the switch ($switch_text) is a segment boundary");
my $controldata = `pg_controldata -D $pgdata`;
like(
	$controldata,
	qr/WAL generation 2 \(slot B\) from \Q$switch_text\E/,
	'pg_controldata shows the WAL generation and its switch');
$node->safe_psql('postgres',
	"INSERT INTO t SELECT g, '@{[ $marker->('after') ]}' || g FROM generate_series(2001, 3000) g"
);
my $end_lsn = $node->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
my $slots = wal_slots("$pgdata/pg_wal", $switch);
ok( $slots->{before}{A} > 0
	  && $slots->{before}{B} == 0
	  && $slots->{after}{B} > 0
	  && $slots->{after}{A} == 0,
	"WAL pages before the switch under slot A ($slots->{before}{A}), after it under slot B ($slots->{after}{B})"
);

$node->wait_for_catchup('s');
is( $sub->safe_psql('postgres', 'SELECT count(*), count(DISTINCT v) FROM t'),
	'3000|3000',
	'logical replication carries the rows from both sides of the switch');
$sub->safe_psql('postgres', 'DROP SUBSCRIPTION s');
$sub->stop;

# pg_waldump reads across the switch
my ($stdout, $stderr);
IPC::Run::run(
	[
		'pg_waldump', '-p', "$pgdata/pg_wal", '--start',
		$start_lsn, '--end', $end_lsn
	],
	'>',
	\$stdout,
	'2>',
	\$stderr);
like($stdout, qr/ENCRYPTION_KEYS/, 'pg_waldump decodes the key change');
my @lsns = map { lsn($_) } $stdout =~ /lsn: ([0-9A-F]+\/[0-9A-F]+)/g;
ok( (grep { $_ < $switch } @lsns) && (grep { $_ > $switch } @lsns),
	'pg_waldump reads records on both sides of the switch');
ok(scalar(@lsns) > 2000,
	'pg_waldump decodes every insert, before and after the switch');
unlike($stderr, qr/error/i, 'pg_waldump reports no error');

# crash recovery from a redo point before the switch reads both keys
ok( lsn($node->safe_psql(
			'postgres', 'SELECT redo_lsn FROM pg_control_checkpoint()')
	) < $switch,
	'crash recovery would start before the switch');
$node->stop('immediate');
$node->start;
is( $node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT v) FROM t'),
	'3000|3000',
	'crash recovery across the switch reads every row');

# --- the old WAL key is still needed: the drop and the next rotation say why ---
my ($ret, $out, $err) =
  $node->psql('postgres', 'SELECT pg_encryption_drop_old_wal_key()');
like(
	$err,
	qr/the WAL key of generation 1 is still needed.*Replication slot "lagging" keeps WAL from/s,
	'drop refused: a replication slot keeps WAL from before the switch');
($ret, $out, $err) = $node->psql('postgres', 'SELECT pg_rotate_data_keys()');
like(
	$err,
	qr/cannot rotate the data keys while the WAL key of generation 1 is still needed.*Replication slot "lagging"/s,
	'the next rotation refused while the old WAL key is needed');
$node->safe_psql('postgres', "SELECT pg_drop_replication_slot('lagging')");
($ret, $out, $err) =
  $node->psql('postgres', 'SELECT pg_encryption_drop_old_wal_key()');
like(
	$err,
	qr/WAL segment [0-9A-F]{24}, before the WAL switch, is not archived yet/,
	'drop refused: a segment before the switch is not archived');
$node->safe_psql('postgres',
	"ALTER SYSTEM RESET archive_command; SELECT pg_reload_conf()");
my $segment_before = $node->safe_psql('postgres',
	"SELECT pg_walfile_name('$switch_text'::pg_lsn - 1)");
$node->poll_query_until('postgres',
	"SELECT last_archived_wal >= '$segment_before' FROM pg_stat_archiver")
  or die 'the archiver did not catch up';

my $backup = $node->background_psql('postgres');
$backup->query_safe("SELECT pg_backup_start('wal keys test')");
($ret, $out, $err) =
  $node->psql('postgres', 'SELECT pg_encryption_drop_old_wal_key()');
like($err, qr/A base backup is running/, 'drop refused: a backup is running');
$backup->query_safe(
	'SET client_min_messages = warning; SELECT pg_backup_stop()');
$backup->quit;

$node->safe_psql('postgres',
	"CREATE ROLE plain LOGIN; GRANT EXECUTE ON FUNCTION pg_encryption_drop_old_wal_key() TO plain"
);
($ret, $out, $err) = $node->psql(
	'postgres',
	'SELECT pg_encryption_drop_old_wal_key()',
	extra_params => [ '-U', 'plain' ]);
like(
	$err,
	qr/permission denied to drop the old WAL key/,
	'drop refused to a role that is not superuser');
($ret, $out, $err) =
  $standby->psql('postgres', 'SELECT pg_encryption_drop_old_wal_key()');
like(
	$err,
	qr/cannot drop the old WAL key during recovery/,
	'drop refused on a standby');

# --- nothing holds it: dropped ---
is( $node->safe_psql('postgres', 'SELECT pg_encryption_drop_old_wal_key()'),
	'dropped the WAL key of generation 1',
	'the old WAL key is dropped');
is( $node->safe_psql('postgres', 'SELECT pg_encryption_drop_old_wal_key()'),
	'no old WAL key: WAL generation 2 is the only one',
	'a second drop has nothing to do');

# WAL from before the switch: unreadable with the key ring now, readable
# with the key ring of the backup taken before
my $segment_inserts =
  $node->safe_psql('postgres', "SELECT pg_walfile_name('$start_lsn')");
my $archived = $node->archive_dir . "/$segment_inserts";
ok(-f $archived, "segment $segment_inserts, before the switch, was archived");
{
	local $ENV{PGDATA} = $pgdata;
	my $rc = IPC::Run::run([ 'pg_waldump', $archived ],
		'>', \$stdout, '2>', \$stderr);
	ok( !$rc
		  && $stdout !~ /rmgr: Heap/
		  && $stderr =~ /could not find a valid record/,
		'the archived segment before the switch does not decrypt with the key ring now'
	);
	$ENV{PGDATA} = $node->backup_dir . '/before';
	IPC::Run::run([ 'pg_waldump', $archived ], '>', \$stdout, '2>', \$stderr);
	like(
		$stdout,
		qr/rmgr: Heap .*INSERT/,
		'the key ring of a backup taken before reads it');
}

# --- the standby followed: generation 2, and it restarts ---
$node->wait_for_catchup($standby);
like(
	page_state($standby->data_dir),
	qr/wal_generation 2\n/,
	'the standby follows the WAL generation');
ok( $standby->log_contains(
		qr/keeping the WAL key of generation 1: crash recovery of this server starts before/
	),
	'the standby keeps the old WAL key while its own restartpoint precedes the switch'
);
$standby->restart;
is($standby->safe_psql('postgres', 'SELECT count(*) FROM t'),
	'3000', 'the standby restarts and reads every row');

# --- point-in-time recovery from the archive, across the switch ---
my $pitr = PostgreSQL::Test::Cluster->new('wal_keys_pitr');
$pitr->init_from_backup($node, 'before', has_restoring => 1);
$pitr->append_conf('postgresql.conf',
	"recovery_target_lsn = '$end_lsn'\nrecovery_target_action = 'promote'");
my $segment_end =
  $node->safe_psql('postgres', "SELECT pg_walfile_name('$end_lsn')");
$node->safe_psql('postgres', 'SELECT pg_switch_wal()');
$node->poll_query_until('postgres',
	"SELECT last_archived_wal >= '$segment_end' FROM pg_stat_archiver")
  or die 'the archiver did not archive the end of the PITR';
$pitr->start;
$pitr->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'PITR did not end';
is( $pitr->safe_psql('postgres', 'SELECT count(*), count(DISTINCT v) FROM t'),
	'3000|3000',
	'PITR from the archive across the switch reads every row');
like(
	page_state($pitr->data_dir),
	qr/wal_generation 2\n/,
	'PITR replays the WAL generation');
$pitr->stop;

# --- pg_rewind across a rotation ---
$node->safe_psql('postgres', 'CHECKPOINT');
$node->backup('for_rewind');
my $other = PostgreSQL::Test::Cluster->new('wal_keys_rewind');
$other->init_from_backup($node, 'for_rewind', has_streaming => 1);
$other->start;
$node->safe_psql('postgres', 'SELECT pg_rotate_data_keys(0, 10000)');
ok(wait_done($node), 'a second rotation completes: WAL generation 3');
like(page_state(), qr/wal_generation 3\n/, 'WAL generation 3 (slot A again)');
$node->safe_psql('postgres',
	"INSERT INTO t VALUES (3001, 'on the old primary')");
$node->wait_for_catchup($other);
$other->promote;
$other->safe_psql('postgres',
	"INSERT INTO t VALUES (3002, 'on the new primary')");
$node->safe_psql('postgres',
	"INSERT INTO t VALUES (3003, 'lost by the rewind')");
$node->stop;
rewind_onto($node, $other,
	'pg_rewind reads the target WAL of both generations');
$other->wait_for_catchup($node);
is($node->safe_psql('postgres', 'SELECT count(*), max(id) FROM t'),
	'3002|3002', 'the rewound node follows its new primary');

# --- back to back: a rotation and a drop checkpoint when only the redo
# point holds the old WAL key ---
for my $gen (4, 5)
{
	$other->safe_psql('postgres', 'SELECT pg_rotate_data_keys(0, 10000)');
	ok(wait_done($other),
		"rotation to generation $gen right after the last one");
	like(
		page_state($other->data_dir),
		qr/wal_generation $gen\n/,
		"WAL generation $gen");
}
my ($switch5) = page_state($other->data_dir) =~ m{wal_switch_lsn (\S+)};
ok( lsn($other->safe_psql(
			'postgres', 'SELECT redo_lsn FROM pg_control_checkpoint()')
	) < lsn($switch5),
	'the redo point is before the last switch');
is( $other->safe_psql('postgres', 'SELECT pg_encryption_drop_old_wal_key()'),
	'dropped the WAL key of generation 4',
	'the drop checkpoints, then drops the old WAL key');
ok( lsn($other->safe_psql(
			'postgres', 'SELECT redo_lsn FROM pg_control_checkpoint()')
	) >= lsn($switch5),
	'the redo point moved past the switch');
$other->wait_for_catchup($node);
like(
	page_state($pgdata),
	qr/wal_generation 5\n/,
	'the rewound node, now a standby, follows');
is($node->safe_psql('postgres', 'SELECT count(*) FROM t'),
	'3002', 'the standby reads every row');

# --- no marker in the WAL, the archive or the data; the control finds them ---
$other->safe_psql('postgres', 'CHECKPOINT');
LeakScan::markers_nowhere(
	LeakScan::scan_for_markers(
		\@markers, $pgdata, $other->data_dir, $node->archive_dir),
	\@markers,
	'two WAL generations');
my $control = PostgreSQL::Test::Cluster->new('wal_keys_control');
$control->init;
$control->start;
$control->safe_psql('postgres',
	"CREATE TABLE t (v text); INSERT INTO t SELECT '@{[ $markers[1]{bytes} ]}' || g FROM generate_series(1, 10) g"
);
ok( scalar(
		@{
			LeakScan::scan_for_markers([ $markers[1] ],
				$control->data_dir . '/pg_wal')->{after} // []
		}),
	'control: the scan finds the marker in unencrypted WAL');
$control->stop;
$node->stop;
$other->stop;
$standby->stop;

done_testing();
