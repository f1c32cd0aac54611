# Copyright (c) 2026, pgcipher developers
#
# citus_smoke.pl — Citus, built unchanged against pgcipher, on an encrypted
# node.
#
# One node with citus in shared_preload_libraries, the coordinator holding
# its own shards (citus_set_coordinator_host, shouldhaveshards): a
# distributed table of four shards, a reference table and a columnar
# table (Citus's own access method, which writes through the storage
# manager), each with a marker row; answers of a router query, a
# multi-shard aggregate, a multi-shard UPDATE and a join with the
# reference table checked against the same data computed without Citus.
# Then a checkpoint and a scan of every byte under the data directory
# (pg_wal included), again after a clean shutdown: no marker on the
# aes-256 node; on an unencrypted control node each marker is found, so
# the scan can fail.  Citus's own regression schedules on encrypted nodes
# are the next step (issue 27, section 3).
use strict;
use warnings FATAL => 'all';
use LeakScan;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $run = sprintf('%08x', int(rand(0xffffffff)));
my %marker = map { $_ => "PGCX_citus_${_}_$run" } qw(dist ref columnar);

sub run_node
{
	my ($encrypted) = @_;
	my $label = $encrypted ? 'aes-256' : 'unencrypted';
	my $node = PostgreSQL::Test::Cluster->new("citus_$label");
	$node->init(extra => [ $encrypted ? encryption_options('aes-256') : () ]);
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'citus'\nmax_prepared_transactions = 10\n"
		  . "autovacuum = off\ncitus.enable_statistics_collection = off\n");
	$node->start;
	is( $node->safe_psql('postgres', 'SHOW data_encryption'),
		$encrypted ? 'aes-256' : 'off',
		"$label: data_encryption");

	my ($host, $port) = ($node->host, $node->port);
	$node->safe_psql(
		'postgres', qq{
		CREATE EXTENSION citus;
		CREATE EXTENSION citus_columnar;
		SELECT citus_set_coordinator_host('$host', $port);
		SELECT citus_set_node_property('$host', $port, 'shouldhaveshards', true);
		SET citus.shard_count = 4;
		CREATE TABLE orders (id bigint, region text, note text);
		SELECT create_distributed_table('orders', 'id');
		INSERT INTO orders
			SELECT g, 'r' || (g % 5), CASE WHEN g = 7 THEN '$marker{dist}' ELSE 'note ' || g END
			FROM generate_series(1, 2000) g;
		CREATE TABLE regions (code text PRIMARY KEY, name text);
		SELECT create_reference_table('regions');
		INSERT INTO regions SELECT 'r' || g, 'region ' || g FROM generate_series(0, 4) g;
		INSERT INTO regions VALUES ('rx', '$marker{ref}');
		CREATE TABLE events (id bigint, body text) USING columnar;
		INSERT INTO events
			SELECT g, CASE WHEN g = 3 THEN '$marker{columnar}' ELSE 'event ' || g END
			FROM generate_series(1, 5000) g;
	});
	like(
		$node->safe_psql(
			'postgres',
			"SELECT extversion FROM pg_extension WHERE extname = 'citus'"),
		qr/^14\.0/,
		"$label: Citus 14.0 loaded");
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'orders'::regclass"
		),
		'4',
		"$label: orders has four shards");

	# answers, each against the same computation without Citus
	is( $node->safe_psql('postgres', 'SELECT note FROM orders WHERE id = 7'),
		$marker{dist},
		"$label: router query finds the marker row");
	is( $node->safe_psql(
			'postgres',
			'SELECT count(*), sum(id), count(DISTINCT region) FROM orders'),
		'2000|2001000|5',
		"$label: multi-shard aggregate");
	$node->safe_psql('postgres',
		"UPDATE orders SET note = note || ' updated' WHERE id % 100 = 0");
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM orders WHERE note LIKE '% updated'"),
		'20',
		"$label: multi-shard UPDATE");
	is( $node->safe_psql(
			'postgres',
			'SELECT r.name, count(*) FROM orders o JOIN regions r ON r.code = o.region '
			  . 'GROUP BY r.name ORDER BY r.name'),
		join("\n", map { "region $_|400" } 0 .. 4),
		"$label: join with the reference table");
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*), max(body) FILTER (WHERE id = 3) FROM events"),
		"5000|$marker{columnar}",
		"$label: columnar table answers");

	$node->safe_psql('postgres', 'CHECKPOINT');
	my @markers =
	  map { { name => $_, bytes => $marker{$_} } } sort keys %marker;
	scan_at_rest(
		$node,
		\@markers,
		$label,
		$encrypted,
		sub {
			my ($found, $what) = @_;
			ok(scalar @{ $found->{$_} // [] },
				"$what: the $_ marker is found (the scan can fail)")
			  for sort keys %marker;
		});
}

run_node(1);
run_node(0);

done_testing();
