# Copyright (c) 2026, pgcipher developers
#
# Every way the server reads relation pages gives back the plaintext, under
# every io_method of PostgreSQL 18 (whose buffered reads are asynchronous
# even with io_method=sync, and decrypt in md.c's completion callback, in
# whichever process completes the I/O: design section 4.1), and once on 17.
#
# A table twenty times larger than shared_buffers is read by a sequential
# scan, a bitmap heap scan, an index scan and an index-only scan, by
# pg_prewarm, VACUUM and ANALYZE (read streams), and through local buffers
# as a temporary table; each answer must equal the control's: a cluster of
# the stock build (PGCIPHER_STOCK_INSTALL, when the stock build is there)
# or else an unencrypted cluster of this build.  Then one byte of one
# page's ciphertext is flipped: the read must fail as a damaged page (the
# checksum over the ciphertext), never return plaintext garbage.
use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $keyfile = PostgreSQL::Test::Utils::tempdir() . '/kek';
PostgreSQL::Test::Utils::append_to_file($keyfile, ('3c' x 32) . "\n");

my $stock = $ENV{PGCIPHER_STOCK_INSTALL};
$stock = undef unless defined $stock && -x "$stock/bin/postgres";
my $enc = PostgreSQL::Test::Cluster->new('encrypted');
my $ctl = PostgreSQL::Test::Cluster->new('control',
	defined $stock ? (install_path => $stock) : ());
note 'control: '
  . (
	defined $stock
	? "stock build in $stock"
	: 'unencrypted cluster of this build');
my $pg18 = $enc->pg_version >= 18;

# 17 leaves checksums off unless asked; 18 turns them on by default
my @checksums = $pg18 ? () : ('--data-checksums');
$enc->init(
	extra => [
		'--encryption=aes-256', "--encryption-key-command=cat $keyfile",
		@checksums
	]);
$ctl->init(extra => [@checksums]);
for my $node ($enc, $ctl)
{
	# 128 buffers for a 2,600-page table: every scan reads from the files
	$node->append_conf('postgresql.conf',
		"shared_buffers = 1MB\ntemp_buffers = 1MB\nautovacuum = off\n");
}

my $setup = q{
CREATE EXTENSION pg_prewarm;
CREATE TABLE t (id int, v text) WITH (fillfactor = 90);
INSERT INTO t SELECT g, repeat(md5(g::text), 4) FROM generate_series(1, 150000) g;
CREATE INDEX t_id ON t (id);
CHECKPOINT;
};

# Each check: a name, and statements whose last answer is compared
my @checks = (
	[
		'sequential scan',
		'SET enable_indexscan = off; SET enable_bitmapscan = off;'
		  . ' SELECT count(*), sum(hashtext(v)) FROM t'
	],
	[
		'bitmap heap scan',
		'SET enable_seqscan = off; SET enable_indexscan = off;'
		  . ' SELECT count(*), sum(hashtext(v)) FROM t WHERE id BETWEEN 2000 AND 90000'
	],
	[
		'index scan',
		'SET enable_seqscan = off; SET enable_bitmapscan = off;'
		  . ' SELECT count(*), sum(hashtext(v)) FROM t WHERE id BETWEEN 500 AND 70000'
	],
	[
		'index-only scan',
		'VACUUM t; SET enable_seqscan = off; SET enable_bitmapscan = off;'
		  . ' SELECT count(*), sum(id) FROM t WHERE id > 1000'
	],
	[
		'pg_prewarm (buffer and read modes)',
		"SELECT pg_prewarm('t'), pg_prewarm('t', 'read'), pg_prewarm('t_id');"
		  . ' SELECT count(*), sum(hashtext(v)) FROM t'
	],
	[
		'VACUUM after deletes',
		'DELETE FROM t WHERE id % 7 = 0; VACUUM (FREEZE) t;'
		  . " SELECT count(*), sum(hashtext(v)) FROM t; SELECT pg_relation_size('t')"
	],
	[
		'ANALYZE (every row sampled)',
		'SET default_statistics_target = 10000; ANALYZE t;'
		  . " SELECT reltuples, relpages FROM pg_class WHERE relname = 't';"
		  . " SELECT attname, null_frac, n_distinct, avg_width FROM pg_stats WHERE tablename = 't' ORDER BY attname"
	],
	[
		'temporary table (local buffers)',
		'CREATE TEMP TABLE tt AS SELECT * FROM t; SELECT count(*), sum(hashtext(v)) FROM tt'
	],);

# The variants: every io_method of 18 (io_workers 1 and 3 for "worker"),
# the one read path of 17
my @variants =
  $pg18
  ? (
	[ 'sync', "io_method = sync" ],
	[ 'worker, 1 I/O worker', "io_method = worker\nio_workers = 1" ],
	[ 'worker, 3 I/O workers', "io_method = worker\nio_workers = 3" ],
	[ 'io_uring', "io_method = io_uring" ])
  : ([ 'PostgreSQL 17', '' ]);

my $loaded = 0;
for my $variant (@variants)
{
	my ($name, $conf) = @$variant;
	for my $node ($enc, $ctl)
	{
		$node->stop if $node->{_pid};
		$node->append_conf('postgresql.conf', $conf) if $conf ne '';
	}
	unless ($enc->start(fail_ok => 1))
	{
		my $log = slurp_file($enc->logfile);
		if ($name eq 'io_uring' && $log =~ /io_uring/i)
		{
			# say so plainly: the kernel or its seccomp policy refuses it
			my ($why) = $log =~ /^.*io_uring.*$/mi;
			note "io_method=io_uring refused on this machine: $why";
			ok(1, "$name: not available on this kernel (skipped)");
			$enc->append_conf('postgresql.conf', "io_method = worker\n");
			$ctl->append_conf('postgresql.conf', "io_method = worker\n");
			next;
		}
		BAIL_OUT("encrypted cluster does not start with $name");
	}
	$ctl->start;
	if ($pg18)
	{
		my ($method) = $conf =~ /io_method = (\w+)/;
		is($enc->safe_psql('postgres', 'SHOW io_method'),
			$method, "$name: the server runs with io_method=$method");
	}
	unless ($loaded++)
	{
		$_->safe_psql('postgres', $setup) for ($enc, $ctl);
		cmp_ok(
			$enc->safe_psql(
				'postgres', "SELECT pg_relation_size('t') / 8192"),
			'>',
			20 * 128,
			'the table is over twenty times shared_buffers');
	}
	for my $check (@checks)
	{
		my ($what, $sql) = @$check;

		# each variant starts with cold shared buffers: restarted above
		my $want = $ctl->safe_psql('postgres', $sql);
		my $got = $enc->safe_psql('postgres', $sql);
		is($got, $want, "$name: $what answers as the control");
	}
	# the deletes of one variant are the next one's starting point
	$_->safe_psql('postgres',
		'TRUNCATE t; INSERT INTO t SELECT g, repeat(md5(g::text), 4) FROM generate_series(1, 150000) g; CHECKPOINT'
	) for ($enc, $ctl);
}

# One flipped byte of ciphertext in block 100 of t: reported as a damaged
# page by the checksum over the ciphertext, under the last io_method
$enc->start unless defined $enc->{_pid};
my $relpath = $enc->safe_psql('postgres', "SELECT pg_relation_filepath('t')");
$enc->stop;
my $file = $enc->data_dir . "/$relpath";
open(my $fh, '+<:raw', $file) or die "open $file: $!";
seek($fh, 100 * 8192 + 5000, 0);
my $byte;
read($fh, $byte, 1);
seek($fh, 100 * 8192 + 5000, 0);
print $fh chr(ord($byte) ^ 0x20);
close $fh;
$enc->start;
my ($ret, $stdout, $stderr) = $enc->psql('postgres',
	'SET enable_indexscan = off; SET enable_bitmapscan = off; SELECT v FROM t'
);
isnt($ret, 0, 'a damaged page fails the scan');
like(
	$stderr,
	qr/invalid page in block 100 of relation|invalid pages? among blocks/,
	'the damaged block is reported as such');
like(
	slurp_file($enc->logfile),
	qr/page verification failed, calculated checksum \d+ but expected \d+/,
	'the server log shows the checksum failure');

$enc->stop;
$ctl->stop;
done_testing();
