# Copyright (c) 2026, pgcipher developers
#
# pgvector_leak.pl — pgvector's data on an encrypted cluster never reaches
# disk in plaintext.
#
# A table of vectors with a text column beside them, an HNSW and an IVFFlat
# index; one row holds a marker text and a marker vector (eight floats that
# spell a run-specific byte string).  The marker row is found again through
# each index, the cluster checkpoints, and every byte under the data
# directory (pg_wal included) is scanned, then again after a clean shutdown.
# On an aes-256 cluster no marker may appear; on an unencrypted control
# cluster the same run must find the text and the vector in the table's
# file, the vector in both index files and both in pg_wal, so the scan is
# proven able to fail.
use strict;
use warnings FATAL => 'all';
use Cwd qw(realpath);
use LeakScan;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# Distinct per run, so a marker cannot be found by accident.  The vector's
# components are exact in float4 (integer part below 2^20, eighths), so
# its bytes on disk are pack('f<', ...) of them.
my $run = sprintf('%08x', int(rand(0xffffffff)));
my $text_marker = "PGCX_pgvector_text_$run";
my @components = map { int(rand(1 << 20)) + (1 + int(rand(7))) / 8 } 1 .. 8;
my $vector_literal = '[' . join(',', @components) . ']';
my $vector_bytes = pack('f<*', @components);

sub run_cluster
{
	my ($encrypted) = @_;
	my $label = $encrypted ? 'aes-256' : 'unencrypted';
	my $node = PostgreSQL::Test::Cluster->new("pgvector_$label");
	$node->init(extra => [ $encrypted ? encryption_options('aes-256') : () ]);
	$node->append_conf('postgresql.conf', "autovacuum = off\n");
	$node->start;
	is( $node->safe_psql('postgres', 'SHOW data_encryption'),
		$encrypted ? 'aes-256' : 'off',
		"$label: data_encryption");

	$node->safe_psql(
		'postgres', qq{
		CREATE EXTENSION vector;
		CREATE TABLE items (id bigint PRIMARY KEY, label text, embedding vector(8));
		INSERT INTO items
			SELECT g, 'filler ' || g, (SELECT array_agg(random() * 1000)::vector(8) FROM generate_series(1, 8) WHERE g > 0)
			FROM generate_series(1, 2000) g;
		INSERT INTO items VALUES (0, '$text_marker', '$vector_literal');
		CREATE INDEX items_hnsw ON items USING hnsw (embedding vector_l2_ops);
		CREATE INDEX items_ivfflat ON items USING ivfflat (embedding vector_l2_ops) WITH (lists = 10);
	});
	# the pinned version of this major (test/extensions/run.sh)
	my $want = $ENV{PGVECTOR_EXTVERSION} // '0.8.0';
	is( $node->safe_psql(
			'postgres',
			"SELECT extversion FROM pg_extension WHERE extname = 'vector'"),
		$want,
		"$label: pgvector $want loaded");

	# the marker row is the nearest neighbour of its own vector, through each index
	for my $index ('items_hnsw', 'items_ivfflat')
	{
		my $other = $index eq 'items_hnsw' ? 'items_ivfflat' : 'items_hnsw';
		my $query =
		  "SELECT label FROM items ORDER BY embedding <-> '$vector_literal' LIMIT 1";
		my $setup =
		  "SET LOCAL enable_seqscan = off; SET LOCAL ivfflat.probes = 10; DROP INDEX $other;";
		my $result = $node->safe_psql('postgres',
			"BEGIN; $setup EXPLAIN (COSTS OFF) $query; $query; ROLLBACK;");
		like(
			$result,
			qr/Index Scan using $index/,
			"$label: nearest neighbour through $index");
		like($result, qr/\Q$text_marker\E$/,
			"$label: $index finds the marker row");
	}

	$node->safe_psql('postgres', 'CHECKPOINT');
	my %files = map {
		$_ => realpath(
			$node->data_dir . '/'
			  . $node->safe_psql(
				'postgres', "SELECT pg_relation_filepath('$_')"))
	} qw(items items_hnsw items_ivfflat);

	my @markers = (
		{ name => 'text', bytes => $text_marker },
		{ name => 'vector', bytes => $vector_bytes });
	scan_at_rest(
		$node,
		\@markers,
		$label,
		$encrypted,
		sub {
			my ($found, $what) = @_;
			my $in = sub {
				my ($name, $pattern) = @_;
				return scalar grep { /$pattern/ } @{ $found->{$name} // [] };
			};
			ok( $in->('text', qr/\Q$files{items}\E$/),
				"$what: text marker found in the table");
			ok( $in->('vector', qr/\Q$files{items}\E$/),
				"$what: vector marker found in the table");
			ok( $in->('vector', qr/\Q$files{items_hnsw}\E$/),
				"$what: vector marker found in the HNSW index");
			ok( $in->('vector', qr/\Q$files{items_ivfflat}\E$/),
				"$what: vector marker found in the IVFFlat index");
			ok($in->('text', qr{/pg_wal/}),
				"$what: text marker found in pg_wal");
			ok($in->('vector', qr{/pg_wal/}),
				"$what: vector marker found in pg_wal");
		});
}

run_cluster(1);
run_cluster(0);

done_testing();
