# Copyright (c) 2026, pgcipher developers
#
# Nothing leaked: write marker values into every kind of relation file
# (heap, btree/GIN/hash indexes, TOAST compressed with lz4 and pglz and
# uncompressed, a sequence, a materialized view, catalog entries, unlogged
# and temporary tables, a second tablespace, databases created with
# FILE_COPY and WAL_LOG, tables and databases moved between tablespaces),
# force them to disk, and scan every byte under the data directory and the
# tablespace.  An encrypted cluster must show no marker; the same run on an
# unencrypted cluster must find each marker in its relation file, so the
# scan is proven able to fail.
#
# pg_wal is scanned too (WAL is encrypted); 005 covers archives, standbys
# and backups.
use strict;
use warnings FATAL => 'all';
use Cwd qw(realpath);
use FindBin;
use lib "$FindBin::RealBin/..";
use LeakScan;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $keyfile = PostgreSQL::Test::Utils::tempdir() . '/kek';
PostgreSQL::Test::Utils::append_to_file($keyfile, ('ab' x 32) . "\n");

# Distinct per run, so a marker cannot be found by accident
my $run = sprintf('%08x', int(rand(0xffffffff)));

sub run_cluster
{
	my ($encrypted) = @_;
	my $label = $encrypted ? 'aes-256' : 'unencrypted';
	my $node = PostgreSQL::Test::Cluster->new("leak_$label");
	my @extra = ('--data-checksums');
	push @extra, '--encryption=aes-256',
	  "--encryption-key-command=cat $keyfile"
	  if $encrypted;
	$node->init(extra => \@extra);
	$node->append_conf('postgresql.conf',
		"temp_buffers = 800kB\nautovacuum = off\n");
	$node->start;
	is( $node->safe_psql('postgres', 'SHOW data_encryption'),
		$encrypted ? 'aes-256' : 'off',
		"$label: data_encryption");

	my $tsdir = PostgreSQL::Test::Utils::tempdir_short();
	my @markers;
	my $marker = sub {
		my ($name, %opt) = @_;
		my $text = "PGCM_${name}_$run";
		push @markers,
		  {
			name => $name,
			bytes => $opt{bytes} // $text,
			relation => $opt{relation},
			db => $opt{db} // 'postgres',
			needs_stop => $opt{needs_stop}
		  };
		return $text;
	};

	my $m;
	$m = $marker->('heap', relation => 'heap_t');
	$node->safe_psql('postgres',
		"CREATE TABLE heap_t(id int, v text); INSERT INTO heap_t SELECT g, '$m' FROM generate_series(1, 100) g"
	);

	$m = $marker->('btree', relation => 'btree_i');
	$node->safe_psql('postgres',
		"CREATE TABLE btree_t(k text); INSERT INTO btree_t VALUES ('$m'); CREATE INDEX btree_i ON btree_t(k)"
	);

	$m = $marker->('gin', relation => 'gin_i');
	$node->safe_psql('postgres',
		"CREATE TABLE gin_t(a text[]); INSERT INTO gin_t VALUES (ARRAY['$m', 'x']); CREATE INDEX gin_i ON gin_t USING gin(a) WITH (fastupdate = off)"
	);

	# A hash index stores only the 32-bit hash code of the key, in a tuple
	# whose t_info (its size, 16, no flags) precedes it: six bytes, where
	# four alone match ciphertext by chance about once in a hundred runs
	my $hash =
	  $node->safe_psql('postgres', "SELECT hashtext('PGCM_hash_$run')");
	$m = $marker->(
		'hash',
		relation => 'hash_i',
		bytes => pack('vl<', 16, $hash));
	$node->safe_psql('postgres',
		"CREATE TABLE hash_t(k text); CREATE INDEX hash_i ON hash_t USING hash(k); INSERT INTO hash_t VALUES ('PGCM_hash_$run')"
	);

	# TOAST: compressed out of line with lz4 and with pglz (whose literals
	# come 8 at a time between control bytes, hence an 8-byte marker), and
	# uncompressed.  Each md5 repeated twice compresses to about half: too
	# big to stay inline.
	my $halfcompressible =
	  "(SELECT string_agg(md5(g::text) || md5(g::text), '') FROM generate_series(1, 2000) g)";
	$m = $marker->('toast_lz4', relation => 'toast:toast_lz4_t');
	$node->safe_psql('postgres',
		"CREATE TABLE toast_lz4_t(v text COMPRESSION lz4); INSERT INTO toast_lz4_t VALUES ('$m' || $halfcompressible)"
	);
	my $pglz = substr($run, 0, 4) . 'Pglz';
	$m = $marker->(
		'toast_pglz',
		relation => 'toast:toast_pglz_t',
		bytes => $pglz);
	$node->safe_psql('postgres',
		"CREATE TABLE toast_pglz_t(v text COMPRESSION pglz); INSERT INTO toast_pglz_t VALUES ('$pglz' || $halfcompressible)"
	);
	is( $node->safe_psql(
			'postgres',
			"SELECT pg_column_compression(v) || ' ' || pg_column_compression(w) FROM toast_lz4_t, (SELECT v AS w FROM toast_pglz_t) p"
		),
		'lz4 pglz',
		"$label: TOAST values compressed with lz4 and pglz");
	$m = $marker->('toast_external', relation => 'toast:toast_ext_t');
	$node->safe_psql('postgres',
		"CREATE TABLE toast_ext_t(v text); ALTER TABLE toast_ext_t ALTER v SET STORAGE EXTERNAL; INSERT INTO toast_ext_t SELECT '$m' || string_agg(md5(g::text), '') FROM generate_series(1, 200) g"
	);

	# A sequence's value, as the 8 bytes it is stored as
	my $seqval = 7364928571938475619;
	$m = $marker->(
		'sequence',
		relation => 'seq_s',
		bytes => pack('q<', $seqval));
	$node->safe_psql('postgres',
		"CREATE SEQUENCE seq_s; SELECT setval('seq_s', $seqval)");

	$m = $marker->('matview', relation => 'mat_v');
	$node->safe_psql('postgres',
		"CREATE MATERIALIZED VIEW mat_v AS SELECT '$m'::text AS v");

	# Catalog entries: a table and a column named with markers
	my $tname = $marker->('catalog_table', relation => 'pg_class');
	my $cname = $marker->('catalog_column', relation => 'pg_attribute');
	$node->safe_psql('postgres', "CREATE TABLE \"$tname\" (\"$cname\" int)");

	# Unlogged buffers reach disk at the shutdown checkpoint
	$m = $marker->('unlogged', relation => 'unlogged_t', needs_stop => 1);
	$node->safe_psql('postgres',
		"CREATE UNLOGGED TABLE unlogged_t(v text); INSERT INTO unlogged_t SELECT '$m' FROM generate_series(1, 100)"
	);

	# Second tablespace, and a table moved into it
	$node->safe_psql('postgres', "CREATE TABLESPACE ts LOCATION '$tsdir'");
	$m = $marker->('tablespace', relation => 'ts_t');
	$node->safe_psql('postgres',
		"CREATE TABLE ts_t(v text) TABLESPACE ts; INSERT INTO ts_t VALUES ('$m')"
	);
	$m = $marker->('moved_table', relation => 'moved_t');
	$node->safe_psql('postgres',
		"CREATE TABLE moved_t(v text); INSERT INTO moved_t VALUES ('$m'); CHECKPOINT; ALTER TABLE moved_t SET TABLESPACE ts"
	);

	# Databases copied from a template with each strategy, and a database moved
	my $tmpl = $marker->('template', relation => 'tmpl_t', db => 'tmpl');
	$node->safe_psql('postgres', 'CREATE DATABASE tmpl');
	$node->safe_psql('tmpl',
		"CREATE TABLE tmpl_t(v text); INSERT INTO tmpl_t VALUES ('$tmpl')");
	$node->safe_psql('postgres', 'CHECKPOINT');
	foreach my $strategy ('file_copy', 'wal_log')
	{
		$node->safe_psql('postgres',
			"CREATE DATABASE db_$strategy TEMPLATE tmpl STRATEGY $strategy");
		is( $node->safe_psql("db_$strategy", 'SELECT v FROM tmpl_t'),
			$tmpl,
			"$label: template data readable in database created with $strategy"
		);
		$m = $marker->(
			"db_$strategy",
			relation => 'own_t',
			db => "db_$strategy");
		$node->safe_psql("db_$strategy",
			"CREATE TABLE own_t(v text); INSERT INTO own_t VALUES ('$m')");
	}
	$m = $marker->('moved_db', relation => 'mv_t', db => 'moved_db');
	$node->safe_psql('postgres', 'CREATE DATABASE moved_db');
	$node->safe_psql('moved_db',
		"CREATE TABLE mv_t(v text); INSERT INTO mv_t VALUES ('$m')");
	$node->safe_psql('postgres', 'ALTER DATABASE moved_db SET TABLESPACE ts');
	is($node->safe_psql('moved_db', 'SELECT v FROM mv_t'),
		$m, "$label: data readable after ALTER DATABASE SET TABLESPACE");

	# Relation file of each marker, to prove the control finds it where it belongs
	foreach my $mk (@markers)
	{
		my $rel = $mk->{relation};
		my $expr =
		  $rel =~ /^toast:(.*)/
		  ? "(SELECT reltoastrelid FROM pg_class WHERE relname = '$1')"
		  : "'$rel'::regclass";
		my $path =
		  $node->safe_psql($mk->{db}, "SELECT pg_relation_filepath($expr)");
		$mk->{file} =
		  realpath($path =~ m{^/} ? $path : $node->data_dir . "/$path");
	}

	# A temporary table, spilled from local buffers; scanned while it exists
	$m = $marker->('temp', relation => 'temp_t');
	my $session = $node->background_psql('postgres');
	$session->query_safe(
		"CREATE TEMP TABLE temp_t(v text); INSERT INTO temp_t SELECT '$m' || g FROM generate_series(1, 50000) g"
	);
	my $temp_path =
	  $session->query_safe("SELECT pg_relation_filepath('temp_t')");
	$temp_path =~ s/\s+$//;
	$markers[-1]{file} = realpath($node->data_dir . "/$temp_path");

	$node->safe_psql('postgres', 'CHECKPOINT');
	my @dirs = ($node->data_dir, $tsdir);
	my $while_running = scan_for_markers(\@markers, @dirs);
	$session->quit;

	$node->stop;
	my $after_stop = scan_for_markers(\@markers, @dirs);

	# The data must still be readable after a restart
	$node->start;
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM heap_t WHERE v = 'PGCM_heap_$run'"),
		'100',
		"$label: heap readable after restart");
	is($node->safe_psql('postgres', "SELECT v FROM ts_t"),
		"PGCM_tablespace_$run",
		"$label: tablespace table readable after restart");
	is($node->safe_psql('postgres', "SELECT v FROM moved_t"),
		"PGCM_moved_table_$run",
		"$label: moved table readable after restart");
	is($node->safe_psql('postgres', "SELECT count(*) FROM unlogged_t"),
		'100', "$label: unlogged table readable after clean restart");
	is( $node->safe_psql('postgres', "SELECT length(v) FROM toast_lz4_t"),
		length("PGCM_toast_lz4_$run") + 128000,
		"$label: TOAST value readable after restart");
	is($node->safe_psql('db_file_copy', "SELECT v FROM own_t"),
		"PGCM_db_file_copy_$run",
		"$label: FILE_COPY database readable after restart");
	is($node->safe_psql('postgres', "SELECT last_value FROM seq_s"),
		$seqval, "$label: sequence readable after restart");
	$node->safe_psql('postgres',
		'SET enable_seqscan = off; SELECT count(*) FROM btree_t WHERE k > \'\''
	);

	# Crash recovery replays full-page images and writes the pages again
	$node->safe_psql('postgres',
		"CHECKPOINT; UPDATE heap_t SET id = id + 1000; INSERT INTO heap_t SELECT g, 'after' FROM generate_series(1, 5000) g"
	);
	$node->stop('immediate');
	$node->start;
	is( $node->safe_psql('postgres', "SELECT count(*), sum(id) FROM heap_t"),
		'5100|12607550',
		"$label: data intact after crash recovery");
	$node->stop;

	return (\@markers, $while_running, $after_stop);
}

# Control: unencrypted, every marker must be found in its own relation file
my ($markers, $running, $stopped) = run_cluster(0);
foreach my $m (@$markers)
{
	my @files = (
		@{ $running->{ $m->{name} } // [] },
		@{ $stopped->{ $m->{name} } // [] });
	ok( (grep { $_ eq $m->{file} } @files),
		"unencrypted: marker $m->{name} found in its relation file (scan can fail)"
	) or diag("expected in $m->{file}, found in: @files");
}

# Encrypted: no marker anywhere, pg_wal included
($markers, $running, $stopped) = run_cluster(1);
foreach my $m (@$markers)
{
	my @files = (
		@{ $running->{ $m->{name} } // [] },
		@{ $stopped->{ $m->{name} } // [] });
	is(scalar(@files), 0, "aes-256: marker $m->{name} not on disk")
	  or diag("found in: @files");
}

done_testing();
