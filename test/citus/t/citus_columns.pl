# Copyright (c) 2026, pgcipher developers
#
# citus_columns.pl — always-encrypted columns, distributed by Citus, through
# pgcipher-proxy in front of the coordinator (issue 27, section 5).
#
# A coordinator and two workers (aes-256), pgcipher_columns on every node
# (Citus propagates CREATE EXTENSION), the proxy in test mode (--record:
# every byte it sends the coordinator is kept).  Through the proxy, with
# psql: patients distributed by an EQ column (ssn), with an ORD column
# (age), a MATCH column (note) and an EQ integer (balance), and its
# plaintext twin patients_plain distributed the same way, then the same
# statements on both, in the simple and the extended protocol (psql's
# \bind): router queries on the distribution column, co-located joins on
# it, a reference table with an encrypted column, ranges and ORDER BY on
# ORD across shards, LIKE on MATCH, SUM/AVG and balance = balance + 1
# computed by the proxy over rows from many shards, COPY into the
# distributed table.  Every answer must equal the twin's.
#
# Directly on the coordinator: rows with equal plaintext (equal EQ tokens)
# are on one shard, and each router query touched one shard.  The record
# holds no marker written to an encrypted column; it holds the twin's
# (the control).
use strict;
use warnings FATAL => 'all';
use LeakScan;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use IO::Socket::INET;

my $bindir = $ENV{PGCIPHER_BIN}
  or plan skip_all =>
  'PGCIPHER_BIN (pgcipher-proxy, pgcipher-keys) is not set';
my $run = sprintf('%08x', int(rand(0xffffffff)));
my $enc_marker = "PGCE${run}";      # written to encrypted columns only
my $plain_marker = "PGCP${run}";    # written to the twin only
my $tmp = PostgreSQL::Test::Utils::tempdir();

my @nodes;
for my $name (qw(coord w1 w2))
{
	my $node = PostgreSQL::Test::Cluster->new("cols_$name");
	$node->init(extra => [ encryption_options('aes-256') ]);
	$node->append_conf(
		'postgresql.conf', q{
shared_preload_libraries = 'citus'
listen_addresses = 'localhost'
citus.enable_statistics_collection = off
max_prepared_transactions = 20
autovacuum = off
});
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION citus');
	push @nodes, $node;
}
my ($coord, $w1, $w2) = @nodes;
$coord->safe_psql(
	'postgres', qq{
	SELECT citus_set_coordinator_host('localhost', @{[$coord->port]});
	SELECT citus_add_node('localhost', @{[$w1->port]});
	SELECT citus_add_node('localhost', @{[$w2->port]});
	CREATE EXTENSION pgcipher_columns;
});
is( $w2->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_extension WHERE extname = 'pgcipher_columns'"
	),
	'1',
	'pgcipher_columns propagated to the workers');

# the proxy in front of the coordinator
system("$bindir/pgcipher-keys new-cmk > $tmp/cmk.hex") == 0
  or die 'new-cmk failed';
my $port = do
{
	my $s = IO::Socket::INET->new(
		Listen => 1,
		LocalAddr => '127.0.0.1',
		LocalPort => 0);
	my $p = $s->sockport;
	close $s;
	$p;
};
my $record = "$tmp/record";
my $proxy_pid = fork();
if ($proxy_pid == 0)
{
	open(STDERR, '>', "$tmp/proxy.log");
	exec(
		"$bindir/pgcipher-proxy", '--listen',
		"127.0.0.1:$port", '--upstream',
		'host=' . $coord->host . ' port=' . $coord->port, '--cmk-file',
		"$tmp/cmk.hex", '--cmk-name',
		'cmk', '--record',
		$record, '--log-level',
		'warn');
	die "exec pgcipher-proxy: $!";
}
END { kill 'TERM', $proxy_pid if $proxy_pid; }
for (1 .. 100)
{
	last if IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port");
	usleep(100_000);
}

# psql through the proxy; returns its stdout, dies on error
sub via_proxy
{
	my ($sql) = @_;
	my ($out, $err);
	IPC::Run::run(
		[
			'psql', '-X', '-At', '-v',
			'ON_ERROR_STOP=1', '-h', '127.0.0.1', '-p',
			$port, '-d', 'postgres', '-f',
			'-'
		],
		'<',
		\$sql,
		'>',
		\$out,
		'2>',
		\$err) or die "psql through the proxy failed: $err\n$sql";
	chomp $out;
	return $out;
}

# The schema, through the proxy (it draws the column key); the twin in
# plaintext types; both distributed by ssn, co-located with their visits.
# Co-location needs equal tokens for equal ssn in both tables: one join
# group (without it each column has tokens of its own, and the proxy
# refuses the join)
via_proxy(
	q{
	SELECT pgcipher.add_column_key('k1');
	CREATE TABLE patients (ssn enc_text, name text, age enc_int4_ord, balance enc_int8, note enc_text);
	SELECT pgcipher.encrypt_column('patients', 'ssn', 'k1', 'EQ', join_group => 'ssn');
	SELECT pgcipher.encrypt_column('patients', 'age', 'k1', 'ORD');
	SELECT pgcipher.encrypt_column('patients', 'balance', 'k1', 'EQ');
	SELECT pgcipher.encrypt_column('patients', 'note', 'k1', 'MATCH');
	CREATE TABLE visits (ssn enc_text, clinic int, cost int);
	SELECT pgcipher.encrypt_column('visits', 'ssn', 'k1', 'EQ', join_group => 'ssn');
	CREATE TABLE clinics (id int PRIMARY KEY, city enc_text);
	SELECT pgcipher.encrypt_column('clinics', 'city', 'k1', 'EQ');
	CREATE TABLE patients_plain (ssn text, name text, age int, balance int8, note text);
	CREATE TABLE visits_plain (ssn text, clinic int, cost int);
	CREATE TABLE clinics_plain (id int PRIMARY KEY, city text);
	SET citus.shard_count = 8;
	SELECT create_distributed_table('patients', 'ssn');
	SELECT create_distributed_table('visits', 'ssn', colocate_with => 'patients');
	SELECT create_reference_table('clinics');
	SELECT create_distributed_table('patients_plain', 'ssn');
	SELECT create_distributed_table('visits_plain', 'ssn', colocate_with => 'patients_plain');
	SELECT create_reference_table('clinics_plain');
});

# the same rows into both, some ssn repeated (equal plaintext, many rows)
my (@rows, @visits);
for my $i (1 .. 60)
{
	my $ssn = sprintf('SSN-%03d', $i % 25);
	push @rows, [ $ssn, "name$i", 20 + ($i * 7) % 50, $i * 100, "note $i" ];
	push @visits, [ $ssn, $i % 3, $i ];
}
for my $t ([ 'patients', $enc_marker ], [ 'patients_plain', $plain_marker ])
{
	my ($table, $m) = @$t;
	my $sql = join(
		'',
		map {
			sprintf(
				"INSERT INTO $table VALUES ('%s', '%s', %d, %d, '%s');\n",
				@$_[ 0 .. 3 ],
				$_->[4] . ($_->[1] eq 'name5' ? " $m" : ''))
		} @rows);
	(my $vt = $table) =~ s/patients/visits/;
	$sql .= join('',
		map { "INSERT INTO $vt VALUES ('$_->[0]', $_->[1], $_->[2]);\n" }
		  @visits);
	(my $ct = $table) =~ s/patients/clinics/;
	$sql .=
	  "INSERT INTO $ct VALUES (0, 'Lyon'), (1, 'Oslo'), (2, 'Rome'), (3, '$m-city');\n";
	# COPY through the proxy into the distributed table
	$sql .=
	  "COPY $table FROM STDIN;\nSSN-900\tcopied\t41\t7\tcopied $m\n\\.\n";
	via_proxy($sql);
}

# The same statements on the encrypted tables and on the twin, simple and
# extended protocol (\bind); %s is the table suffix
my @queries = (
	[
		'router on the distribution column',
		"SELECT name, age, balance FROM patients%s WHERE ssn = 'SSN-007' ORDER BY name"
	],
	[
		'router, extended protocol',
		"SELECT name, age FROM patients%s WHERE ssn = \$1 ORDER BY name \\bind 'SSN-011' \\g"
	],
	[
		'range and ORDER BY on ORD across shards',
		"SELECT ssn, name, age FROM patients%s WHERE age BETWEEN 30 AND 45 ORDER BY age, name"
	],
	[
		'ORD range, extended protocol',
		"SELECT name, age FROM patients%s WHERE age > \$1 ORDER BY age DESC, name LIMIT 5 \\bind 60 \\g"
	],
	[
		'LIKE on MATCH',
		"SELECT name FROM patients%s WHERE note LIKE '%%note 1%%' ORDER BY name"
	],
	[
		'co-located join on the EQ column',
		"SELECT p.name, v.cost FROM patients%s p JOIN visits%s v ON p.ssn = v.ssn WHERE p.ssn = 'SSN-003' ORDER BY 1, 2"
	],
	[
		'multi-shard co-located join',
		"SELECT count(*) FROM patients%s p JOIN visits%s v ON p.ssn = v.ssn"
	],
	[
		'reference table with an encrypted column',
		"SELECT v.cost, c.city FROM visits%s v JOIN clinics%s c ON c.id = v.clinic WHERE v.ssn = 'SSN-004' ORDER BY 1"
	],
	[
		'SUM and AVG over many shards (computed by the proxy)',
		"SELECT sum(balance), avg(balance), count(*) FROM patients%s WHERE age < 50"
	],
	[
		'COPY into the distributed table',
		"SELECT name, age, balance FROM patients%s WHERE ssn = 'SSN-900'"
	],
	[
		'GROUP BY the distribution column',
		"SELECT count(*) FROM (SELECT ssn FROM patients%s GROUP BY ssn HAVING count(*) > 2) x"
	],);
for my $q (@queries)
{
	my ($what, $sql) = @$q;
	my $n = () = $sql =~ /%s/g;
	my @protocols = ([ '', $sql ]);
	# the others in the extended protocol too (\bind without parameters)
	push @protocols, [ ', extended protocol', "$sql \\bind \\g" ]
	  unless $sql =~ /\\bind/;
	for my $p (@protocols)
	{
		my $enc = via_proxy(sprintf($p->[1], ('') x $n));
		my $plain = via_proxy(sprintf($p->[1], ('_plain') x $n));
		isnt($plain, '', "$what$p->[0]: the twin answers");
		is($enc, $plain, "$what$p->[0]: same answer as the plaintext twin");
	}
}

# what the proxy cannot compute is refused, distributed or not
eval { via_proxy('SELECT ssn FROM patients ORDER BY ssn'); };
like(
	$@,
	qr/ERROR:  pgcipher: .*ssn/,
	'ORDER BY an EQ column is refused by the proxy, saying why');

# distributed by an RND column: the values cannot be hashed, so no shard
# can be chosen; the first row says so
via_proxy(
	q{
	CREATE TABLE notes_rnd (v enc_text, n int);
	SELECT pgcipher.encrypt_column('notes_rnd', 'v', 'k1', 'RND');
	SELECT create_distributed_table('notes_rnd', 'v');
});
eval { via_proxy("INSERT INTO notes_rnd VALUES ('$enc_marker-rnd', 1)"); };
like(
	$@,
	qr/ERROR:  hashing needs encrypted values of level EQ, not RND/,
	'a table distributed by an RND column refuses rows, saying why');

# balance = balance + 1 on a distributed table, by the proxy
via_proxy("UPDATE patients$_ SET balance = balance + 1 WHERE ssn = 'SSN-002'")
  for ('', '_plain');
is( via_proxy(
		"SELECT name, balance FROM patients WHERE ssn = 'SSN-002' ORDER BY name"
	),
	via_proxy(
		"SELECT name, balance FROM patients_plain WHERE ssn = 'SSN-002' ORDER BY name"
	),
	'balance = balance + 1 across a shard: same as the twin');

# directly on the coordinator: equal EQ tokens, one shard
is( $coord->safe_psql(
		'postgres',
		"SELECT count(*) FROM (SELECT DISTINCT ssn, get_shard_id_for_distribution_column('patients', ssn) FROM patients) x"
	),
	$coord->safe_psql(
		'postgres',
		'SELECT count(*) FROM (SELECT DISTINCT ssn FROM patients) x'),
	'rows with equal plaintext ssn are on one shard');
is( $coord->safe_psql(
		'postgres',
		'SELECT count(*) FROM (SELECT DISTINCT ssn FROM patients) x'),
	$coord->safe_psql(
		'postgres',
		'SELECT count(*) FROM (SELECT DISTINCT ssn FROM patients_plain) x'),
	'as many distinct ssn tokens as plaintext values');
my %shards = map { $_ => 1 } split /\n/,
  $coord->safe_psql('postgres',
	"SELECT get_shard_id_for_distribution_column('patients', ssn) FROM patients"
  );
cmp_ok(scalar(keys %shards),
	'>', 1, 'the encrypted table is spread over several shards');
my $one_ssn =
  $coord->safe_psql('postgres', 'SELECT ssn::text FROM patients LIMIT 1');
like(
	$coord->safe_psql(
		'postgres',
		"EXPLAIN (COSTS OFF) SELECT name FROM patients WHERE ssn = '$one_ssn'"
	),
	qr/Task Count: 1\b/,
	'a query on one ssn goes to one shard (router)');

# what the proxy sent the coordinator
kill 'TERM', $proxy_pid;
waitpid($proxy_pid, 0);
$proxy_pid = 0;
open(my $fh, '<:raw', $record) or die "no record: $!";
my $sent = do { local $/; <$fh> };
close $fh;
cmp_ok(length($sent), '>', 1000, 'the proxy recorded what it sent');
is(index($sent, $enc_marker),
	-1, 'no marker written to an encrypted column reached the coordinator');
cmp_ok(index($sent, $plain_marker),
	'>=', 0, "the twin's marker did (the control)");

# and no node holds it on disk
$_->safe_psql('postgres', 'CHECKPOINT') for @nodes;
my $found =
  scan_for_markers([ { name => 'encrypted column', bytes => $enc_marker } ],
	map { $_->data_dir } @nodes);
is_deeply($found->{'encrypted column'} // [],
	[], 'no node holds the marker of an encrypted column');

done_testing();
