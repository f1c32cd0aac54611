# Copyright (c) 2026, pgcipher developers
#
# citus_cluster.pl — nothing leaked across an encrypted Citus cluster
# (issue 27, section 4).
#
# A coordinator and two workers, each aes-256 with a key command of its
# own, connected to each other over TLS (citus.node_conninfo with
# sslmode=verify-full and a CA this test makes; the workers refuse
# connections without TLS).  Markers are written through the coordinator
# where Citus puts data:
#
#   - a hash-distributed table, a reference table and a distributed
#     columnar table (Citus's access method, which writes through the
#     storage manager);
#   - a 2PC distributed transaction whose PREPARE on one worker is held
#     back by a deferred trigger, so that the other worker checkpoints a
#     prepared transaction into pg_twophase (its GID is the marker there)
#     while the coordinator keeps its pg_dist_transaction record;
#   - worker 2 joins later: citus_rebalance_start moves shards onto it in
#     the background (logical replication), and citus_move_shard_placement
#     moves the marker's shard back;
#   - an open transaction holding Citus's intermediate results on disk
#     (base/pgsql_job_cache): a CTE pushed to the workers, a repartition
#     join, create_intermediate_result, and a cursor over a multi-shard
#     query spilling to pgsql_tmp with a small work_mem.
#
# Every node's data directory (WAL, pgsql_tmp, the job cache, pg_twophase
# included) is scanned while the intermediate results exist, after a
# checkpoint and after a clean shutdown: no marker on the aes-256 cluster;
# on an unencrypted control cluster each is found where it was put, so the
# scan can fail.  Connections between nodes are shown to be TLS
# (pg_stat_ssl), and a coordinator that trusts another CA is refused.
use strict;
use warnings FATAL => 'all';
use LeakScan;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $run = sprintf('%08x', int(rand(0xffffffff)));
my %marker =
  map { $_ => "PGCX_cl_${_}_$run" }
  qw(dist ref columnar twopc move ir cte repart spill);
my $tmp = PostgreSQL::Test::Utils::tempdir();

# A CA, a server certificate for localhost signed by it, and a second CA
# that signed nothing here (the coordinator that trusts it must fail)
sub openssl
{
	my @cmd = ('openssl', @_);
	my ($out, $err);
	IPC::Run::run(\@cmd, '>', \$out, '2>', \$err)
	  or die "openssl @_ failed: $err";
}
for my $ca ('ca', 'otherca')
{
	openssl(
		'req', '-x509',
		'-newkey', 'rsa:2048',
		'-nodes', '-days',
		'2', '-subj',
		"/CN=pgcipher test $ca", '-keyout',
		"$tmp/$ca.key", '-out',
		"$tmp/$ca.crt");
}
openssl(
	'req', '-newkey', 'rsa:2048', '-nodes',
	'-subj', '/CN=localhost', '-keyout', "$tmp/server.key",
	'-out', "$tmp/server.csr");
PostgreSQL::Test::Utils::append_to_file("$tmp/san.ext",
	"subjectAltName=DNS:localhost,IP:127.0.0.1\n");
openssl(
	'x509', '-req',
	'-in', "$tmp/server.csr",
	'-CA', "$tmp/ca.crt",
	'-CAkey', "$tmp/ca.key",
	'-CAcreateserial', '-days',
	'2', '-extfile',
	"$tmp/san.ext", '-out',
	"$tmp/server.crt");
chmod 0600, "$tmp/server.key";

# A node: its own key file when encrypted, TLS, TCP on localhost
sub make_node
{
	my ($name, $encrypted) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(
		extra => [ $encrypted ? encryption_options('aes-256', $name) : () ]);
	$node->append_conf(
		'postgresql.conf', qq{
shared_preload_libraries = 'citus'
listen_addresses = 'localhost'
ssl = on
ssl_cert_file = '$tmp/server.crt'
ssl_key_file = '$tmp/server.key'
ssl_ca_file = '$tmp/ca.crt'
citus.node_conninfo = 'sslmode=verify-full sslrootcert=$tmp/ca.crt'
citus.enable_statistics_collection = off
citus.recover_2pc_interval = -1
max_prepared_transactions = 20
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
max_worker_processes = 20
output_plugin_libraries = 'pgoutput, citus'
autovacuum = off
});
	# TCP only over TLS; the socket (this test's psql) as before
	open(my $hba, '>', $node->data_dir . '/pg_hba.conf') or die;
	print $hba "local all all trust\n"
	  . "hostssl all all 127.0.0.1/32 trust\nhostssl all all ::1/128 trust\n"
	  . "hostnossl all all 0.0.0.0/0 reject\nhostnossl all all ::1/128 reject\n";
	close $hba;
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION citus');
	return $node;
}

# Wait until $sql on $node returns 't'
sub wait_for
{
	my ($node, $sql, $what) = @_;
	for (1 .. 600)
	{
		return 1 if $node->safe_psql('postgres', $sql) eq 't';
		usleep(100_000);
	}
	die "timed out waiting for $what";
}

sub run_cluster
{
	my ($encrypted) = @_;
	my $label = $encrypted ? 'aes-256' : 'unencrypted';
	my $coord = make_node("coord_$label", $encrypted);
	my $w1 = make_node("w1_$label", $encrypted);
	my $w2 = make_node("w2_$label", $encrypted);
	my @nodes = ($coord, $w1, $w2);
	for my $n (@nodes)
	{
		is( $n->safe_psql('postgres', 'SHOW data_encryption'),
			$encrypted ? 'aes-256' : 'off',
			"$label: " . $n->name . " data_encryption");
	}
	my $port = sub { $_[0]->port };

	# worker 1 first; worker 2 joins before the rebalance
	$coord->safe_psql(
		'postgres', qq{
		SELECT citus_set_coordinator_host('localhost', @{[$coord->port]});
		SELECT citus_add_node('localhost', @{[$w1->port]});
		CREATE EXTENSION citus_columnar;
		SET citus.shard_count = 8;
		SET citus.shard_replication_factor = 1;
		CREATE TABLE orders (id bigint PRIMARY KEY, region int, note text);
		SELECT create_distributed_table('orders', 'id');
		INSERT INTO orders
			SELECT g, g % 7, CASE WHEN g = 7 THEN '$marker{dist}' ELSE 'note ' || g END
			FROM generate_series(1, 5000) g;
		CREATE TABLE regions (code int PRIMARY KEY, name text);
		SELECT create_reference_table('regions');
		INSERT INTO regions SELECT g, 'region ' || g FROM generate_series(0, 6) g;
		INSERT INTO regions VALUES (99, '$marker{ref}');
		CREATE TABLE events (id bigint, body text) USING columnar;
		SELECT create_distributed_table('events', 'id', colocate_with => 'none');
		INSERT INTO events
			SELECT g, CASE WHEN g = 3 THEN '$marker{columnar}' ELSE 'event ' || g END
			FROM generate_series(1, 5000) g;
		CREATE TABLE items (id bigint PRIMARY KEY, order_note text, qty int);
		SELECT create_distributed_table('items', 'id');
		INSERT INTO items SELECT g, 'note ' || (g * 3), g FROM generate_series(1, 3000) g;
		INSERT INTO items VALUES (3001, '$marker{repart}', 1);
	});

	# TLS between nodes: each worker's session for the coordinator reports
	# its own connection
	like(
		$coord->safe_psql(
			'postgres',
			"SELECT string_agg(result, ',') FROM run_command_on_workers(\$\$SELECT ssl || ' ' || version FROM pg_stat_ssl WHERE pid = pg_backend_pid()\$\$)"
		),
		qr/^true TLSv1\.[23]$/,
		"$label: the coordinator's connection to worker 1 is TLS");

	# worker 2 joins; the rebalancer moves shards onto it (background jobs,
	# logical replication)
	$coord->safe_psql('postgres',
		"SELECT citus_add_node('localhost', @{[$w2->port]})");
	$coord->safe_psql('postgres',
		"SELECT citus_rebalance_start(shard_transfer_mode => 'block_writes')"
	);
	$coord->safe_psql('postgres', 'SELECT citus_rebalance_wait()');
	my $on_w2 = $coord->safe_psql('postgres',
		"SELECT count(*) FROM pg_dist_shard_placement WHERE nodeport = @{[$w2->port]}"
	);
	cmp_ok($on_w2, '>', 0, "$label: the rebalancer moved shards to worker 2");

	# a marker in a shard, then that shard moved to the other worker by
	# logical replication (and its co-located shard of items with it)
	my ($shard, $from) = split /\|/, $coord->safe_psql(
		'postgres', qq{
		INSERT INTO orders VALUES (900001, 1, '$marker{move}');
		SELECT s.shardid, p.nodeport FROM pg_dist_shard s JOIN pg_dist_placement pl USING (shardid)
			JOIN pg_dist_node p ON p.groupid = pl.groupid
		WHERE s.logicalrelid = 'orders'::regclass
		  AND get_shard_id_for_distribution_column('orders', 900001) = s.shardid});
	my $to = $from == $w1->port ? $w2->port : $w1->port;
	$coord->safe_psql('postgres',
		"SELECT citus_move_shard_placement($shard, 'localhost', $from, 'localhost', $to, shard_transfer_mode => 'force_logical')"
	);
	is( $coord->safe_psql(
			'postgres',
			"SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = $shard"
		),
		$to,
		"$label: shard $shard moved from $from to $to");
	is( $coord->safe_psql(
			'postgres', 'SELECT note FROM orders WHERE id = 900001'),
		$marker{move},
		"$label: the moved row answers");

	# 2PC: a transaction writing to both workers; worker 2's PREPARE waits
	# in a deferred trigger on its shard while worker 1 holds a prepared
	# transaction, checkpointed into pg_twophase
	my ($id1, $id2);
	for my $id (2_000_001 .. 2_000_400)
	{
		my $p = $coord->safe_psql('postgres',
			"SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = get_shard_id_for_distribution_column('orders', $id)"
		);
		$id1 //= $id if $p == $w1->port;
		$id2 //= $id if $p == $w2->port;
	}
	my $shard2 = $coord->safe_psql('postgres',
		"SELECT get_shard_id_for_distribution_column('orders', $id2)");
	$coord->safe_psql(
		'postgres', q{
		CREATE FUNCTION slow_prepare() RETURNS trigger LANGUAGE plpgsql AS
			$$BEGIN PERFORM pg_sleep(4); RETURN NULL; END$$;
	});
	$w2->safe_psql(
		'postgres', qq{
		SET citus.enable_ddl_propagation = off;
		SET citus.enable_manual_changes_to_shards = on;
		CREATE CONSTRAINT TRIGGER slow_prepare AFTER INSERT OR UPDATE ON orders_$shard2
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_prepare();
	});
	my $bg = $coord->background_psql('postgres');
	$bg->query_until(
		qr/twopc_started/, qq{
		BEGIN;
		INSERT INTO orders VALUES ($id1, 1, '$marker{twopc}');
		INSERT INTO orders VALUES ($id2, 2, '$marker{twopc}');
		\\echo twopc_started
		COMMIT;
	});
	wait_for(
		$w1,
		'SELECT count(*) > 0 FROM pg_prepared_xacts',
		'a prepared transaction on worker 1');
	my $gid = $w1->safe_psql('postgres', 'SELECT gid FROM pg_prepared_xacts');
	$w1->safe_psql('postgres', 'CHECKPOINT');
	my @state = glob($w1->data_dir . '/pg_twophase/*');
	is(scalar(@state), 1, "$label: worker 1 holds a two-phase state file");
	my $gid_marker = { name => 'twophase GID', bytes => $gid };
	my $in_state =
	  scan_for_markers([$gid_marker], $w1->data_dir . '/pg_twophase');
	$bg->quit;
	is( $coord->safe_psql(
			'postgres',
			"SELECT count(*) FROM orders WHERE note = '$marker{twopc}'"),
		'2',
		"$label: the 2PC transaction committed on both workers");
	cmp_ok(
		$coord->safe_psql(
			'postgres', 'SELECT count(*) FROM pg_dist_transaction'),
		'>', 0,
		"$label: the coordinator recorded its 2PC transactions");

	# intermediate results on disk, held by an open transaction: a CTE
	# broadcast to the workers, a repartition join, an explicit
	# intermediate result, and a cursor whose rows spill to pgsql_tmp
	# (each answer checked: the workers read what the coordinator sent
	# through the same files, and COPY FROM reads the explicit one)
	my $holder = $coord->background_psql('postgres');
	my $answers = $holder->query_safe(
		qq{
		BEGIN;
		SET LOCAL work_mem = '64kB';
		SET LOCAL citus.enable_repartition_joins = on;
		SELECT create_intermediate_result('pgcx_ir',
			\$\$SELECT '$marker{ir}' || g FROM generate_series(1, 2000) g\$\$);
		SELECT count(*), min(x), max(x) FROM read_intermediate_result('pgcx_ir', 'binary') AS r(x text);
		WITH c AS MATERIALIZED (
			SELECT CASE WHEN g > 100 THEN '$marker{cte}' || g ELSE 'note ' || g END AS v
			FROM generate_series(1, 2000) g)
			SELECT count(*), sum(o.id) FROM orders o JOIN c ON o.note = c.v;
		SELECT count(*), sum(o.id + i.qty) FROM orders o JOIN items i ON o.note = i.order_note;
		DECLARE spill CURSOR FOR
			SELECT o.id, o.note || '$marker{spill}' FROM orders o WHERE o.id <= 5000
			ORDER BY o.id DESC;
		FETCH 1 FROM spill;
	});
	is( $answers,
		"2000\n2000|${marker{ir}}1|${marker{ir}}999\n"
		  . "99|5043\n1666|5554444\n"
		  . "5000|note 5000$marker{spill}",
		"$label: intermediate results, the CTE and the repartition join answer right"
	);
	my @transient =
	  map { { name => $_, bytes => $marker{$_} } } qw(ir cte repart spill);
	my $found_open =
	  scan_for_markers(\@transient, map { $_->data_dir } @nodes);
	$holder->query_safe('COMMIT');
	$holder->quit;

	my @at_rest = map { { name => $_, bytes => $marker{$_} } }
	  qw(dist ref columnar move twopc repart);
	if ($encrypted)
	{
		is_deeply($in_state->{'twophase GID'} // [],
			[], "$label: the GID is not in the two-phase state file");
		markers_nowhere($found_open, \@transient,
			"$label: intermediate results held open");
	}
	else
	{
		ok( @{ $in_state->{'twophase GID'} // [] } == 1,
			"$label: the GID is found in the two-phase state file");
		for my $m (qw(ir cte repart spill))
		{
			ok( grep({ m{/pgsql_job_cache/|/pgsql_tmp/} }
					@{ $found_open->{$m} // [] }),
				"$label: the $m marker is found in a file of the job cache or pgsql_tmp"
			);
		}
	}

	# a coordinator that trusts another CA cannot reach its workers
	$coord->safe_psql('postgres',
		"ALTER SYSTEM SET citus.node_conninfo = 'sslmode=verify-full sslrootcert=$tmp/otherca.crt'"
	);
	$coord->reload;
	my ($rc, $out, $err) = $coord->psql('postgres',
		"SET citus.max_cached_conns_per_worker = 0; SELECT count(*) FROM orders"
	);
	like(
		$err,
		qr/certificate verify failed|could not establish any connections/,
		"$label: a coordinator trusting another CA is refused by the workers"
	);
	$coord->safe_psql('postgres', 'ALTER SYSTEM RESET citus.node_conninfo');
	$coord->reload;

	# at rest: every node after a checkpoint, then after a clean shutdown
	$_->safe_psql('postgres', 'CHECKPOINT') for @nodes;
	scan_at_rest(
		\@nodes,
		\@at_rest,
		"$label cluster",
		$encrypted,
		sub {
			my ($found, $what) = @_;
			ok( @{ $found->{ $_->{name} } // [] } > 0,
				"$what: $_->{name} marker found") for @at_rest;
		});
}

run_cluster(1);
run_cluster(0);
done_testing();
