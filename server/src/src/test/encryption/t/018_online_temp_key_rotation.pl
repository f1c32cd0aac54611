# Copyright (c) 2026, pgcipher developers
#
# The temporary-file key's generations (design 7, 9.6): pg_rotate_data_keys()
# draws a new temporary-file key into the slot the current one does not
# use, at most once per start of the server, and new temporary files, file
# sets, extensions' scratch files and logical decoding spill files are
# written under it at once, each keeping the key it began with: a cursor
# held across two rotations reads back, and the second rotation keeps the
# key (it says so).  pg_stat_statements' texts move at the next start,
# their dump read under the key it was written with.  After a restart the
# next rotation draws a new key into the old slot.  A standby, which
# replays every rotation without a restart of its own, refuses to read a
# held cursor's file once its slot's key was replaced (never its bytes under
# the new key), and keeps its pg_stat_statements texts readable.  No marker
# in any temporary file on disk; an unencrypted control finds them.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib "$FindBin::RealBin/..";
use LeakScan;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $run = int(rand(1_000_000));
my @markers;
my $marker = sub {
	my $text = "PGCT_$_[0]_$run";
	push @markers, { name => $_[0], bytes => $text };
	return $text;
};

my $node = PostgreSQL::Test::Cluster->new('temp_keys');
$node->init(
	allows_streaming => 'logical',
	extra => [ LeakScan::encryption_options('aes-256') ]);
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'pg_stat_statements'
autovacuum = off
logical_decoding_work_mem = '64kB'
));
$node->start;
my $pgdata = $node->data_dir;

sub page_state
{
	return scalar slurp_file("$pgdata/pg_encryption/pages");
}

# what pg_stat_statements reads back of the INSERTs' texts
sub pgss_texts
{
	return $node->safe_psql('postgres',
		"SELECT query FROM pg_stat_statements WHERE query LIKE 'INSERT INTO t%'"
	);
}

sub rotate
{
	my ($ret, $out, $err) =
	  $node->psql('postgres', 'SELECT pg_rotate_data_keys(0, 10000)');
	$node->poll_query_until('postgres',
		"SELECT operation || ' ' || phase = 'none idle' FROM pg_stat_progress_encryption"
	) or die 'the rotation did not end';
	return $err;
}

# rows a sort spills to temporary files to order, and their checksum
$node->safe_psql(
	'postgres', qq(
CREATE EXTENSION pg_stat_statements;
CREATE EXTENSION test_tempcrypt;
CREATE TABLE t (id int, v text);
INSERT INTO t SELECT g, '@{[ $marker->('row') ]}' || g FROM generate_series(1, 30000) g;
SELECT pg_create_logical_replication_slot('spill', 'test_decoding');
));
my $expected = $node->safe_psql('postgres',
	'SELECT md5(string_agg(v, \',\' ORDER BY v DESC)) FROM t');

# a standby that stays up through every rotation and restart of its primary
$node->backup('before');
my $standby = PostgreSQL::Test::Cluster->new('temp_keys_standby');
$standby->init_from_backup($node, 'before', has_streaming => 1);
$standby->start;
$node->wait_for_replay_catchup($standby);
my $standby_query = "SELECT count(*) FROM t WHERE v LIKE '%standby_text%'";
$standby->safe_psql('postgres', $standby_query);
my $standby_held = $standby->background_psql('postgres', on_error_stop => 0);
$standby_held->query_safe(
	"SET work_mem = '64kB'; BEGIN; DECLARE s CURSOR WITH HOLD FOR SELECT v FROM t ORDER BY id; COMMIT"
);
is( $standby_held->query_safe('FETCH 2 FROM s'),
	"PGCT_row_${run}1\nPGCT_row_${run}2",
	'a held cursor on the standby reads its temporary file');
my $sort = "SET work_mem = '64kB'; SET max_parallel_workers_per_gather = 0; "
  . "SELECT md5(string_agg(v, ',' ORDER BY v DESC)) FROM t";
my $hash_join =
  "SET work_mem = '64kB'; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; "
  . "SET min_parallel_table_scan_size = 0; SET max_parallel_workers_per_gather = 2; "
  . "SET enable_parallel_hash = on; SET enable_mergejoin = off; SET enable_nestloop = off; "
  . "SELECT count(*) FROM t a JOIN t b USING (v)";

# a cursor held open across the rotations: its rows in a temporary file
# written under the first key
my $held = $node->background_psql('postgres');
$held->query_safe(
	"SET work_mem = '64kB'; BEGIN; DECLARE c CURSOR WITH HOLD FOR SELECT v FROM t ORDER BY id; COMMIT"
);
is( $held->query_safe('FETCH 2 FROM c'),
	"PGCT_row_${run}1\nPGCT_row_${run}2",
	'a held cursor reads its temporary file');
like(
	pgss_texts(),
	qr/INSERT INTO t/,
	'pg_stat_statements keeps texts under the first key');

# --- the first rotation since the start: a new temporary-file key ---
is(rotate(), '', 'a rotation, the first since the start: no notice');
like(
	page_state(),
	qr/temp_generation 2\n/,
	'the state says temporary files generation 2');
command_like(
	[ 'pg_controldata', $pgdata ],
	qr/temporary files generation 2 \(slot B\)/,
	'pg_controldata says it');
is( $held->query_safe('FETCH 2 FROM c'),
	"PGCT_row_${run}3\nPGCT_row_${run}4",
	'the held cursor reads on under the key it began with');
$node->wait_for_replay_catchup($standby);
is( $standby_held->query_safe('FETCH 2 FROM s'),
	"PGCT_row_${run}3\nPGCT_row_${run}4",
	"the standby's held cursor reads on after the first rotation");
is($node->safe_psql('postgres', $sort),
	$expected, 'a sort spills to temporary files under the new key');
is($node->safe_psql('postgres', $hash_join),
	'30000', 'a parallel hash join shares a file set under the new key');
like(
	$node->safe_psql(
		'postgres', "SELECT test_tempcrypt_random(42, 200, 40000, 'shared')"),
	qr/writes, \d+ reads/,
	'file set files, closed and re-opened, under the new key');
like(
	$node->safe_psql(
		'postgres',
		"SELECT test_tempcrypt_scratch('rotated.data', repeat('@{[ $marker->('scratch') ]}', 500), 333)"
	),
	qr/disk differs from the data/,
	'a scratch file under the new key reads back');

# a transaction spilled by logical decoding: its files under the new key
$node->safe_psql('postgres',
	"INSERT INTO t SELECT g, '@{[ $marker->('spill') ]}' || g FROM generate_series(1, 5000) g"
);
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_logical_slot_get_changes('spill', NULL, NULL) WHERE data LIKE '%PGCT_spill_%'"
	),
	'5000',
	'logical decoding spills and reads back under the new key');
$node->safe_psql('postgres', "DELETE FROM t WHERE v LIKE 'PGCT_spill_%'");
# the slot would hold WAL under the first WAL key, which the next rotation
# replaces (design 9.6): gone, and a checkpoint past the switch
$node->safe_psql('postgres',
	"SELECT pg_drop_replication_slot('spill'); CHECKPOINT");

# --- a second rotation without a restart keeps the key ---
like(
	rotate(),
	qr/NOTICE:  the temporary-file key stays as it is in this rotation/,
	'a second rotation since the start says it keeps the temporary-file key');
like(
	page_state(),
	qr/generation 3\n.*temp_generation 2\n/s,
	'pages move to generation 3, temporary files stay at 2');
is( $held->query_safe('FETCH ALL FROM c'),
	join("\n", map { "PGCT_row_${run}$_" } 5 .. 30000),
	'the held cursor reads back every row after two rotations');
is($node->safe_psql('postgres', $sort), $expected, 'sorts still spill');

# no marker in the temporary files on disk, held open meanwhile; the
# same scan finds them in an unencrypted control
my $held2 = $node->background_psql('postgres');
$held2->query_safe(
	"SET work_mem = '64kB'; BEGIN; DECLARE d CURSOR WITH HOLD FOR SELECT v FROM t ORDER BY v; COMMIT"
);
my $found = scan_for_markers([ $markers[0] ], "$pgdata/base/pgsql_tmp");
ok(!defined $found->{row}, 'no marker in the temporary files on disk');
$held2->quit;
$held->quit;

# --- a restart: pg_stat_statements' dump read under its key, its texts
#     under the new one; the next rotation draws a new key into slot A ---
$node->restart;
like(
	pgss_texts(),
	qr/INSERT INTO t/,
	'pg_stat_statements texts survive the restart and the key change');
$node->safe_psql('postgres', 'CHECKPOINT');
is(rotate(), '', 'after a restart, a rotation changes the key again');
like(
	page_state(),
	qr/generation 4\n.*temp_generation 3\n/s,
	'temporary files generation 3 (slot A, a new key)');
is($node->safe_psql('postgres', $sort),
	$expected, 'sorts spill under generation 3');
is($node->safe_psql('postgres', $hash_join),
	'30000', 'parallel hash joins under generation 3');

# the standby replayed a new key into slot A, the one its held cursor's
# file is under: an error that says so, not the file's bytes under the
# new key
$node->wait_for_replay_catchup($standby);
$standby_held->{stderr} = '';
$standby_held->query('FETCH ALL FROM s');
like(
	$standby_held->{stderr},
	qr/ERROR:  a temporary file was written under a temporary-file key that has since been replaced/,
	"the standby's held cursor is refused once its key was replaced");
$standby_held->quit;
is($standby->safe_psql('postgres', $sort),
	$expected, 'new sorts on the standby spill under the new key');
like(
	$standby->safe_psql(
		'postgres',
		"SELECT string_agg(query, ' | ') FROM pg_stat_statements WHERE query LIKE '%FROM t WHERE v LIKE%'"
	),
	qr/^SELECT count\(\*\) FROM t WHERE v LIKE \$1$/,
	"the standby's pg_stat_statements texts stay readable");
$standby->stop;
$node->restart;
like(
	pgss_texts(),
	qr/INSERT INTO t/,
	'pg_stat_statements texts move to slot A at the next start');
$node->stop;

# the control: the same scan finds a held cursor's rows in clear
my $plain = PostgreSQL::Test::Cluster->new('temp_keys_plain');
$plain->init;
$plain->start;
$plain->safe_psql('postgres',
	"CREATE TABLE t AS SELECT g AS id, '$markers[0]{bytes}' || g AS v FROM generate_series(1, 30000) g"
);
my $plain_held = $plain->background_psql('postgres');
$plain_held->query_safe(
	"SET work_mem = '64kB'; BEGIN; DECLARE d CURSOR WITH HOLD FOR SELECT v FROM t ORDER BY v; COMMIT"
);
$found =
  scan_for_markers([ $markers[0] ], $plain->data_dir . '/base/pgsql_tmp');
ok(defined $found->{row}, 'control: the scan finds the rows in clear');
$plain_held->quit;
$plain->stop;

done_testing();
