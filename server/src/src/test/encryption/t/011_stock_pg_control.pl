# Copyright (c) 2026, pgcipher developers
#
# pg_control that every tool can read, and a stock server that stops on an
# encrypted cluster before it writes anything (design section 10).
#
# pg_control of an encrypted cluster is byte for byte a stock PostgreSQL
# pg_control of the same major (version 1700 on 17, 1800 on 18, the same
# struct, its CRC-32C where stock has it) plus pgcipher's 16-byte record of the cipher in the padding after the
# struct.  Checked against a cluster made by stock initdb: the CRC's offset
# is found in the stock file by computing CRC-32C here, and must hold in
# ours; stock pg_controldata reads ours without a CRC warning and prints
# what ours prints.  The record: damaged, the server refuses; pg_resetwal
# rebuilds it from the key ring; pg_checksums keeps it.
#
# A stock server started on an encrypted cluster: refused by the
# configuration file (encryption_key_command is unknown to it) before the
# lock file; with that setting removed, refused by the WAL (the checkpoint
# record's page carries XLP_ENCRYPTED, an info bit stock does not accept)
# before redo, after a clean shutdown and after a crash.  Every file of the
# data directory but postmaster.opts (the command line of the last start)
# must be byte-identical afterwards.  The other way round, pgcipher starts a
# cluster stock initdb made as an unencrypted one, and encrypts it online
# (pg_enable_encryption()).
#
# Needs PGCIPHER_STOCK_BINDIR: the same PostgreSQL (17 or 18) built without
# pgcipher's patches (scripts/test.sh builds it).
use strict;
use warnings FATAL => 'all';
use File::Copy;
use File::Path qw(rmtree);
use FindBin;
use lib $FindBin::RealBin . '/..';
use LeakScan;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $stock_bindir = $ENV{PGCIPHER_STOCK_BINDIR};
plan skip_all =>
  'PGCIPHER_STOCK_BINDIR (a stock PostgreSQL build) is not set'
  unless $stock_bindir;
die "no stock postgres in $stock_bindir" unless -x "$stock_bindir/postgres";
# PG_CONTROL_VERSION is the major times 100 on 17 and 18
my ($major) = `"$stock_bindir/pg_config" --version` =~ /PostgreSQL (\d+)/
  or die "no version from $stock_bindir/pg_config";
my $control_version = $major * 100;

use constant RECORD_OFFSET => 496;
use constant RECORD_SIZE => 16;
use constant CONTROL_SIZE => 8192;

# CRC-32C (Castagnoli, reflected), as PostgreSQL computes pg_control's
my @crc_table = map {
	my $c = $_;
	$c = ($c & 1) ? (($c >> 1) ^ 0x82F63B78) : ($c >> 1) for 1 .. 8;
	$c
} 0 .. 255;

sub crc32c
{
	my ($bytes) = @_;
	my $crc = 0xFFFFFFFF;
	$crc = $crc_table[ ($crc ^ $_) & 0xFF ] ^ ($crc >> 8)
	  for unpack('C*', $bytes);
	return $crc ^ 0xFFFFFFFF;
}

sub control_bytes
{
	my ($datadir) = @_;
	open(my $fh, '<:raw', "$datadir/global/pg_control")
	  or die "pg_control: $!";
	local $/;
	my $bytes = <$fh>;
	close $fh;
	return $bytes;
}

# The offset of the CRC: the first 4-aligned offset whose 4 bytes are the
# CRC-32C of everything before them
sub crc_offset
{
	my ($bytes) = @_;
	for (my $o = 4; $o <= RECORD_OFFSET - 4; $o += 4)
	{
		return $o
		  if unpack('V', substr($bytes, $o, 4)) ==
		  crc32c(substr($bytes, 0, $o));
	}
	return -1;
}

sub controldata
{
	my ($bindir, $datadir) = @_;
	my ($stdout, $stderr) =
	  run_command([ "$bindir/pg_controldata", '-D', $datadir ]);
	return ($stdout, $stderr);
}

my ($node_port, $node_host);    # of the aes-256 cluster, set below

# postgres of bindir started on dir, in the foreground: (whether it ran
# and exited 0, what it printed on stderr)
sub start_refused
{
	my ($bindir, $dir) = @_;
	my ($stdout, $stderr) = ('', '');
	my $ok = IPC::Run::run(
		[
			"$bindir/postgres", '-D', $dir, '-p',
			$node_port, '-k', $node_host, '-c',
			'listen_addresses='
		],
		'>',
		\$stdout,
		'2>',
		\$stderr,
		IPC::Run::timeout(120));
	return ($ok, $stderr);
}

# A copy of a stopped cluster's data directory, to break
sub copy_cluster
{
	my ($datadir, $name) = @_;
	my $copy = PostgreSQL::Test::Utils::tempdir() . "/$name";
	PostgreSQL::Test::RecursiveCopy::copypath($datadir, $copy);
	chmod 0700, $copy;
	return $copy;
}

# A stock cluster: the layout to compare with
my $stock = PostgreSQL::Test::Cluster->new('stock',
	install_path => ($stock_bindir =~ s{/bin/?$}{}r));
$stock->init;
my $stock_bytes = control_bytes($stock->data_dir);
my $crc_at = crc_offset($stock_bytes);
ok($crc_at > 0,
	"stock pg_control: CRC-32C of the struct found at offset $crc_at");
is(length($stock_bytes), CONTROL_SIZE, 'stock pg_control is 8192 bytes');
ok( $stock_bytes =~ /^.{$crc_at}.{4}\0+$/s,
	'stock pg_control: zeros after the CRC');
my ($stock_out) = controldata($stock_bindir, $stock->data_dir);
like(
	$stock_out,
	qr/^pg_control version number:\s+$control_version$/m,
	"stock pg_control version is $control_version");

my %clusters;
foreach my $cipher ('aes-256', 'aes-128', 'off')
{
	my $node = PostgreSQL::Test::Cluster->new("pgcipher_$cipher");
	$node->init(
		extra => [
			$cipher eq 'off' ? () : encryption_options($cipher),
			'--data-checksums'
		]);
	$node->start;
	$node->safe_psql('postgres',
		'CREATE TABLE t AS SELECT g, md5(g::text) AS m FROM generate_series(1, 2000) g'
	);
	$node->stop;
	$clusters{$cipher} = $node;
	my $bytes = control_bytes($node->data_dir);

	is(length($bytes), CONTROL_SIZE,
		"$cipher: pg_control is 8192 bytes, as stock");
	is(crc_offset($bytes), $crc_at,
		"$cipher: the CRC is valid at stock's offset");
	ok(substr($bytes, $crc_at + 4, RECORD_OFFSET - $crc_at - 4) =~ /^\0*$/,
		"$cipher: zeros between the struct and the record");
	ok(substr($bytes, RECORD_OFFSET + RECORD_SIZE) =~ /^\0*$/,
		"$cipher: zeros after the record");
	my $record = substr($bytes, RECORD_OFFSET, RECORD_SIZE);

	if ($cipher eq 'off')
	{
		is( $record,
			"\0" x RECORD_SIZE,
			'off: no record, the padding as stock writes it');
	}
	else
	{
		my ($magic, $version, $code, $crc) = unpack('a8 n n N', $record);
		is($magic, 'PGCIPHER', "$cipher: the record's magic");
		is($version, 1, "$cipher: record version 1");
		is( $code,
			$cipher eq 'aes-128' ? 1 : 2,
			"$cipher: the record names the cipher");
		is( $crc,
			crc32c(substr($record, 0, 12)),
			"$cipher: the record's CRC-32C");
	}

	my ($out, $err) = controldata($stock_bindir, $node->data_dir);
	unlike($err, qr/WARNING|CRC/,
		"$cipher: stock pg_controldata reads it without a warning");
	like(
		$out,
		qr/^pg_control version number:\s+$control_version$/m,
		"$cipher: version $control_version for stock pg_controldata");
	my ($ours) = run_command([ 'pg_controldata', '-D', $node->data_dir ]);
	like(
		$ours,
		qr/^Data encryption:\s+\Q$cipher\E$/m,
		"$cipher: pg_controldata shows the cipher");
	is( $out,
		$ours =~ s/\n?^Data encryption( page keys)?:.*$//mgr,
		"$cipher: stock pg_controldata prints what ours prints, but our two lines"
	);
}

my $node = $clusters{'aes-256'};
my $datadir = $node->data_dir;
my $ourbin = $node->config_data('--bindir');
($node_port, $node_host) = ($node->port, $node->host);

# pg_checksums rewrites pg_control: the record is carried over
command_ok([ 'pg_checksums', '--disable', '-D', $datadir ],
	'pg_checksums --disable on aes-256');
command_ok([ 'pg_checksums', '--enable', '-D', $datadir ],
	'pg_checksums --enable on aes-256');
is(substr(control_bytes($datadir), RECORD_OFFSET, 8),
	'PGCIPHER', 'pg_checksums kept the record');
$node->start;
is($node->safe_psql('postgres', 'SHOW data_encryption'),
	'aes-256', 'the cluster starts encrypted after pg_checksums');
is($node->safe_psql('postgres', 'SELECT count(*) FROM t'),
	'2000', 'and reads its table');
$node->stop;

# A stock tool that rewrites pg_control drops the record (it writes the
# padding as zeros): the server refuses, and pgcipher's pg_resetwal
# restores the record from the key ring
command_ok(
	[ "$stock_bindir/pg_checksums", '--disable', '-D', $datadir ],
	'stock pg_checksums --disable rewrites pg_control of the aes-256 cluster'
);
is( substr(control_bytes($datadir), RECORD_OFFSET, RECORD_SIZE),
	"\0" x RECORD_SIZE,
	'the stock tool dropped the record');
{
	my ($ok, $stderr) = start_refused($ourbin, $datadir);
	ok(!$ok, 'the server refuses the cluster whose record was dropped');
	like(
		$stderr,
		qr/FATAL:  cluster is not encrypted, but it contains an encryption key file/,
		'with its message');
	like(
		$stderr,
		qr/HINT:  If a program without pgcipher rewrote pg_control, pgcipher's pg_resetwal restores/,
		'and the way back in its hint');
}
command_ok([ 'pg_resetwal', '-D', $datadir ], "pgcipher's pg_resetwal");
is(substr(control_bytes($datadir), RECORD_OFFSET, 8),
	'PGCIPHER', 'restored the record from the key ring');
command_ok([ 'pg_checksums', '--enable', '-D', $datadir ],
	'pg_checksums --enable again');
$node->start;
is($node->safe_psql('postgres', 'SELECT count(*) FROM t'),
	'2000', 'the cluster starts and reads its table');
$node->stop;

# A damaged record stops the server before it writes; pg_resetwal rebuilds it
{
	my $copy = copy_cluster($datadir, 'damaged');
	my $bytes = control_bytes($copy);
	substr($bytes, RECORD_OFFSET + 10, 1) =
	  "\x07";    # cipher code, CRC not fixed
	open(my $fh, '>:raw', "$copy/global/pg_control") or die;
	print $fh $bytes;
	close $fh;
	my ($out) = run_command([ 'pg_controldata', '-D', $copy ]);
	like(
		$out,
		qr/^Data encryption:\s+damaged record$/m,
		'pg_controldata: a damaged record');
	my $before = file_digests($copy);
	my ($ok, $stderr) = start_refused($ourbin, $copy);
	ok(!$ok, 'the server refuses a damaged record');
	like(
		$stderr,
		qr/FATAL:  pg_control's record of the encryption cipher is damaged/,
		'with its message');
	like($stderr, qr/HINT:  .*pg_resetwal/, 'and a hint');
	is_deeply([ changed_files($before, file_digests($copy)) ],
		[], 'the data directory is byte-identical after the refusal');
	# a tool rewriting pg_control without a key ring to rebuild the record
	# from keeps the damaged bytes: nothing may guess "unencrypted"
	rename("$copy/pg_encryption", "$copy/pg_encryption.away") or die;
	command_ok([ 'pg_checksums', '--disable', '-D', $copy ],
		'pg_checksums --disable with the record damaged and no key ring');
	($out) = run_command([ 'pg_controldata', '-D', $copy ]);
	like(
		$out,
		qr/^Data encryption:\s+damaged record$/m,
		'the damaged record is kept, not rewritten as "off"');
	rename("$copy/pg_encryption.away", "$copy/pg_encryption") or die;
	command_ok([ 'pg_resetwal', '-f', '-D', $copy ], 'pg_resetwal -f');
	($out) = run_command([ 'pg_controldata', '-D', $copy ]);
	like(
		$out,
		qr/^Data encryption:\s+aes-256$/m,
		'pg_resetwal rebuilt the record from the key ring');
	rmtree($copy);
}

# A stock server on an encrypted cluster
my $before = file_digests($datadir);
my ($ok, $err) = start_refused($stock_bindir, $datadir);
ok(!$ok, 'stock postgres refuses the encrypted cluster');
like(
	$err,
	qr/unrecognized configuration parameter "encryption_key_command"/,
	'because it does not know encryption_key_command');
is_deeply(
	[ changed_files($before, file_digests($datadir)) ],
	[],
	'every file of the data directory is byte-identical, and no lock file is left'
);

foreach my $state ('shut down', 'crashed')
{
	# the cluster with the setting removed, as a DBA might try
	if ($state eq 'crashed')
	{
		$node->start;
		$node->safe_psql('postgres',
			'INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 500) g'
		);
		$node->stop('immediate');
	}
	my $copy = copy_cluster($datadir, 'stock_' . ($state =~ s/ /_/r));
	foreach my $conf ('postgresql.conf', 'postgresql.auto.conf')
	{
		my $text = slurp_file("$copy/$conf");
		$text =~ s/^\s*encryption_key_command.*$//mg;
		open(my $fh, '>', "$copy/$conf") or die;
		print $fh $text;
		close $fh;
	}
	my $skip = qr{^postmaster\.opts$};
	my $snap = file_digests($copy, $skip);
	($ok, $err) = start_refused($stock_bindir, $copy);
	ok(!$ok,
		"$state, without encryption_key_command: stock postgres refuses it");
	like(
		$err,
		qr/invalid info bits 00.. in WAL segment/,
		"$state: the WAL page's XLP_ENCRYPTED stops it");
	like(
		$err,
		qr/PANIC:  could not locate a valid checkpoint record/,
		"$state: before redo");
	is_deeply([ changed_files($snap, file_digests($copy, $skip)) ],
		[], "$state: every file but postmaster.opts is byte-identical");
	ok(!-e "$copy/postmaster.pid", "$state: no lock file left");
	rmtree($copy);
}

# And the other way round: pgcipher opens a stock cluster, unencrypted
$stock->start;
$stock->safe_psql('postgres', 'CREATE TABLE s AS SELECT 1 AS a');
$stock->stop;
{
	my $stock_dir = $stock->data_dir;
	my $stdout;
	command_ok(
		[
			'pg_ctl', '-D',
			$stock_dir, '-w',
			'-l', $stock->logfile,
			'-o', '-p ' . $stock->port,
			'start'
		],
		'pgcipher starts a cluster made by stock initdb');
	($stdout) = run_command(
		[
			'psql',
			'-X',
			'-At',
			'-h',
			$stock->host,
			'-p',
			$stock->port,
			'-d',
			'postgres',
			'-c',
			"SELECT current_setting('data_encryption') || ' ' || (SELECT count(*) FROM s)"
		]);
	is($stdout, 'off 1', 'as an unencrypted cluster');
	command_ok([ 'pg_ctl', '-D', $stock_dir, '-w', 'stop' ], 'and stops it');
	is( substr(control_bytes($stock_dir), RECORD_OFFSET, RECORD_SIZE),
		"\0" x RECORD_SIZE,
		'no record written into a stock cluster');

	# ... and encrypts it online (design 9.7): a copy, the stock one stays
	# as it is
	my $copy = copy_cluster($stock_dir, 'stock_encrypted');
	my $key = PostgreSQL::Test::Utils::tempdir() . '/kek';
	append_to_file($key,
		join('', map { sprintf('%02x', $_ * 7 % 256) } 1 .. 32) . "\n");
	my @psql = (
		'psql', '-X', '-At', '-h', $stock->host, '-p',
		$stock->port, '-d', 'postgres', '-c');
	command_ok(
		[
			'pg_ctl', '-D', $copy, '-w',
			'-l', $stock->logfile, '-o', '-p ' . $stock->port,
			'start'
		],
		'pgcipher starts a copy of the stock cluster');
	# stock initdb's catalog lacks pgcipher's functions: each is built in,
	# and pgcipher_functions.sql declares them as initdb does (design 9.7):
	# the same functions, arguments, defaults, properties and rights, and
	# the same view, as a catalog pgcipher's initdb made, where running it
	# changes nothing
	my ($sharedir) = run_command([ 'pg_config', '--sharedir' ]);
	my $script = "$sharedir/pgcipher_functions.sql";
	my $catalog_query = q{
SELECT n.nspname || '.' || p.proname || '(' || pg_get_function_arguments(p.oid)
       || ') ' || pg_get_function_result(p.oid) || ' ' || p.proisstrict
       || ' ' || p.provolatile::text || p.proparallel::text || ' ' || p.prosrc
       || ' public ' || coalesce((SELECT bool_or(a.grantee = 0)
                                  FROM aclexplode(p.proacl) a), true)
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.prosrc ~ '^pg_(rotate_encryption_key|rotate_data_keys|encryption_|stat_get_encryption_progress|enable_encryption|disable_encryption)'
UNION ALL SELECT pg_get_viewdef('pg_stat_progress_encryption')
ORDER BY 1};
	my $reference = PostgreSQL::Test::Cluster->new('catalog_reference');
	$reference->init;
	$reference->start;
	my $expected = $reference->safe_psql('postgres', $catalog_query);
	$reference->command_ok(
		[
			'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1',
			'-d', $reference->connstr('postgres'),
			'-f', $script
		],
		'pgcipher_functions.sql runs in a catalog pgcipher made');
	is($reference->safe_psql('postgres', $catalog_query),
		$expected, '... and changes nothing there');
	$reference->stop;
	command_ok(
		[
			'psql', '-X', '-q', '-v',
			'ON_ERROR_STOP=1', '-h', $stock->host, '-p',
			$stock->port, '-d', 'postgres', '-f',
			$script
		],
		'pgcipher_functions.sql declares the functions in a catalog stock initdb made'
	);
	($stdout) = run_command([ @psql, $catalog_query ]);
	is($stdout, $expected, '... as pgcipher\'s initdb does');
	($stdout) = run_command(
		[
			@psql,
			"SELECT pg_enable_encryption('aes-256', 'cat $key', 0, 10000)"
		]);
	is( $stdout,
		'encrypting with aes-256',
		'pg_enable_encryption() on a data directory stock initdb wrote');
	my $encrypted;

	for (1 .. 600)
	{
		($stdout) = run_command([ @psql, 'SHOW data_encryption' ]);
		last if $encrypted = ($stdout eq 'aes-256');
		usleep(100_000);
	}
	ok($encrypted, 'it ends encrypted with aes-256');
	($stdout) = run_command([ @psql, 'SELECT count(*) FROM s' ]);
	is($stdout, '1', 'and reads its rows');
	command_ok([ 'pg_ctl', '-D', $copy, '-w', 'stop' ], 'and stops');
	my ($out) = controldata($stock_bindir, $copy);
	like(
		$out,
		qr/^pg_control version number:\s+$control_version$/m,
		'stock pg_controldata still reads its pg_control');
	command_like(
		[ 'pg_controldata', $copy ],
		qr/^Data encryption:\s+aes-256$/m,
		'which records aes-256');
}

done_testing();
