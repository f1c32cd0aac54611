# Copyright (c) 2026, pgcipher developers
#
# timescaledb_smoke.pl — TimescaleDB (Apache edition) works on an encrypted
# cluster, survives a crash, and its chunks never reach disk in plaintext.
#
# With timescaledb in shared_preload_libraries: a hypertable with one-day
# chunks, rows carrying a marker text across ten days (ten chunks), an index,
# time_bucket aggregates checked against the same aggregates computed
# without TimescaleDB, drop_chunks of the oldest three, then a checkpoint,
# more rows (a new chunk) and an UPDATE that only WAL holds, a crash
# (immediate stop) and a restart with recovery: chunks, rows and aggregates
# must be as before the crash.  Then a checkpoint and a scan of every byte
# under the data directory (pg_wal included), again after a clean shutdown.
# On an aes-256 cluster no marker may appear; on an unencrypted control
# cluster the markers must be found in a chunk's file and in pg_wal, so the
# scan is proven able to fail.
use strict;
use warnings FATAL => 'all';
use Cwd qw(realpath);
use LeakScan;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# Distinct per run, so a marker cannot be found by accident
my $run = sprintf('%08x', int(rand(0xffffffff)));
my $marker = "PGCX_timescaledb_$run";
my $marker_wal = "PGCX_timescaledb_wal_$run";

my $scheduler_sql = q{
	SELECT count(*) > 0 FROM pg_stat_activity
	WHERE backend_type = 'TimescaleDB Background Worker Scheduler' AND datname = 'postgres'};
# everything the crash must not change
my $state_sql = q{
	SELECT (SELECT count(*) FROM show_chunks('metrics')) || ' chunks; '
	  || (SELECT count(*) || ' rows, ' || count(DISTINCT device) || ' devices, sum ' || sum(value)
		  || ', ' || min(time) || ' .. ' || max(time) || ', ' || count(*) FILTER (WHERE note LIKE '%updated')
		  || ' updated' FROM metrics)};
my $buckets_sql = q{
	SELECT string_agg(format('%s %s %s %s', b, n, round(a::numeric, 6), mx), E'\n' ORDER BY b)
	FROM (SELECT time_bucket('1 day', time) AS b, count(*) AS n, avg(value) AS a, max(value) AS mx
		  FROM metrics GROUP BY 1) s};
my $plain_buckets_sql = q{
	SELECT string_agg(format('%s %s %s %s', b, n, round(a::numeric, 6), mx), E'\n' ORDER BY b)
	FROM (SELECT date_trunc('day', time) AS b, count(*) AS n, avg(value) AS a, max(value) AS mx
		  FROM metrics_plain GROUP BY 1) s};

sub run_cluster
{
	my ($encrypted) = @_;
	my $label = $encrypted ? 'aes-256' : 'unencrypted';
	my $node = PostgreSQL::Test::Cluster->new("timescaledb_$label");
	$node->init(extra => [ $encrypted ? encryption_options('aes-256') : () ]);
	$node->append_conf(
		'postgresql.conf', qq{
shared_preload_libraries = 'timescaledb'
timezone = 'UTC'
autovacuum = off
});
	$node->start;
	is( $node->safe_psql('postgres', 'SHOW data_encryption'),
		$encrypted ? 'aes-256' : 'off',
		"$label: data_encryption");

	$node->safe_psql('postgres', 'CREATE EXTENSION timescaledb');
	# the version run.sh built for this major
	my $want = $ENV{TIMESCALEDB_EXTVERSION} // '2.19.3';
	is( $node->safe_psql(
			'postgres',
			"SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'"
		),
		$want,
		"$label: timescaledb $want loaded");
	is($node->safe_psql('postgres', 'SHOW timescaledb.license'),
		'apache', "$label: Apache edition");
	# its background workers run too (in the Apache edition the scheduler's
	# job 3, the job-history retention policy, logs "functionality not
	# supported under the current apache license", as on stock PostgreSQL)
	ok($node->poll_query_until('postgres', $scheduler_sql),
		"$label: TimescaleDB's scheduler runs");

	# ten days, an hour apart, three devices: 720 rows in ten one-day chunks
	$node->safe_psql(
		'postgres', qq{
		CREATE TABLE metrics (time timestamptz NOT NULL, device int NOT NULL, value double precision, note text);
		SELECT create_hypertable('metrics', by_range('time', INTERVAL '1 day'));
		CREATE INDEX metrics_device_time ON metrics (device, time DESC);
		INSERT INTO metrics
			SELECT t, d, d * 1000 + extract(epoch FROM t - '2026-01-01') / 3600, '$marker device ' || d
			FROM generate_series(timestamptz '2026-01-01', '2026-01-10 23:00', '1 hour') t,
				 generate_series(1, 3) d;
		CREATE TABLE metrics_plain AS SELECT * FROM metrics;
	});
	is( $node->safe_psql(
			'postgres', "SELECT count(*) FROM show_chunks('metrics')"),
		'10',
		"$label: ten chunks");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM ONLY metrics'),
		'0', "$label: no rows in the hypertable's root");
	is( $node->safe_psql('postgres', $buckets_sql),
		$node->safe_psql('postgres', $plain_buckets_sql),
		"$label: time_bucket aggregates match a plain table's");
	like(
		$node->safe_psql(
			'postgres',
			"EXPLAIN (COSTS OFF) SELECT * FROM metrics WHERE time >= '2026-01-09' AND device = 2"
		),
		qr/_hyper_\d+_\d+_chunk/,
		"$label: chunk exclusion plans chunks");
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM metrics WHERE time >= '2026-01-09' AND device = 2"
		),
		'48',
		"$label: query over two chunks");

	# drop the oldest three days
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM drop_chunks('metrics', older_than => timestamptz '2026-01-04')"
		),
		'3',
		"$label: drop_chunks dropped three chunks");
	$node->safe_psql('postgres',
		"DELETE FROM metrics_plain WHERE time < '2026-01-04'");
	is( $node->safe_psql('postgres', $buckets_sql),
		$node->safe_psql('postgres', $plain_buckets_sql),
		"$label: aggregates after drop_chunks");

	# what only WAL holds at the crash: a new chunk, an update
	$node->safe_psql('postgres', 'CHECKPOINT');
	$node->safe_psql(
		'postgres', qq{
		INSERT INTO metrics
			SELECT t, d, d * 1000 + extract(epoch FROM t - '2026-01-01') / 3600, '$marker_wal device ' || d
			FROM generate_series(timestamptz '2026-01-11', '2026-01-11 23:00', '1 hour') t,
				 generate_series(1, 3) d;
		UPDATE metrics SET value = value + 0.5, note = note || ' updated'
			WHERE time >= '2026-01-05' AND time < '2026-01-06' AND device = 1;
	});
	my $state = $node->safe_psql('postgres', $state_sql);
	is( $state,
		'8 chunks; 576 rows, 3 devices, sum 1248492, 2026-01-04 00:00:00+00 .. 2026-01-11 23:00:00+00, 24 updated',
		"$label: state before the crash");
	my $buckets = $node->safe_psql('postgres', $buckets_sql);

	$node->stop('immediate');
	$node->start;
	ok( $node->log_contains(
			'database system was interrupted|database system was not properly shut down'
		),
		"$label: restart ran crash recovery");
	is($node->safe_psql('postgres', $state_sql),
		$state, "$label: chunks and rows survived the crash");
	ok( $node->poll_query_until('postgres', $scheduler_sql),
		"$label: the scheduler runs after recovery");
	is($node->safe_psql('postgres', $buckets_sql),
		$buckets, "$label: aggregates survived the crash");
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM metrics WHERE device = 3 AND note = '$marker_wal device 3'"
		),
		'24',
		"$label: rows written after the last checkpoint replayed");
	# and the hypertable still takes rows into new chunks
	$node->safe_psql('postgres',
		"INSERT INTO metrics VALUES ('2026-01-12 12:00', 1, 1.0, '$marker after recovery')"
	);
	is( $node->safe_psql(
			'postgres', "SELECT count(*) FROM show_chunks('metrics')"),
		'9',
		"$label: a new chunk after recovery");

	$node->safe_psql('postgres', 'CHECKPOINT');
	my $chunk = realpath(
		$node->data_dir . '/'
		  . $node->safe_psql(
			'postgres',
			"SELECT pg_relation_filepath(c) FROM show_chunks('metrics', older_than => timestamptz '2026-01-05') c"
		  ));
	my @markers = (
		{ name => 'marker', bytes => $marker },
		{ name => 'wal marker', bytes => $marker_wal });
	scan_at_rest(
		$node,
		\@markers,
		$label,
		$encrypted,
		sub {
			my ($found, $what) = @_;
			ok((grep { $_ eq $chunk } @{ $found->{marker} // [] }),
				"$what: marker found in a chunk's file");
			ok((grep { m{/pg_wal/} } @{ $found->{marker} // [] }),
				"$what: marker found in pg_wal");
			ok( (grep { m{/pg_wal/} } @{ $found->{'wal marker'} // [] }),
				"$what: marker written before the crash found in pg_wal");
		});
}

run_cluster(1);
run_cluster(0);

done_testing();
