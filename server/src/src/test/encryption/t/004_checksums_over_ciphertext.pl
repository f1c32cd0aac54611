# Copyright (c) 2026, pgcipher developers
#
# Checksums are computed over the ciphertext: pg_checksums verifies,
# enables and disables them on an encrypted cluster without the key, and a
# single flipped byte of ciphertext is caught both by pg_checksums and by
# the server when it reads the page.
use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $keyfile = PostgreSQL::Test::Utils::tempdir() . '/kek';
PostgreSQL::Test::Utils::append_to_file($keyfile, ('5a' x 32) . "\n");

my $node = PostgreSQL::Test::Cluster->new('checksums');
# 18's initdb turns checksums on unless told not to
my @no_checksums = $node->pg_version >= 18 ? ('--no-data-checksums') : ();
$node->init(
	extra => [
		'--encryption=aes-128', "--encryption-key-command=cat $keyfile",
		@no_checksums
	]);
$node->start;
$node->safe_psql('postgres',
	"CREATE TABLE t(id int, v text); INSERT INTO t SELECT g, repeat('x', 100) FROM generate_series(1, 5000) g; CREATE INDEX ON t(id)"
);
my $relpath =
  $node->safe_psql('postgres', "SELECT pg_relation_filepath('t')");
$node->stop;
my $pgdata = $node->data_dir;

# Initialized without checksums: enable them offline, without the key
command_ok(
	[ 'pg_checksums', '--enable', '-D', $pgdata ],
	'pg_checksums --enable on an encrypted cluster');
command_ok(
	[ 'pg_checksums', '--check', '-D', $pgdata ],
	'pg_checksums --check passes after --enable');
$node->start;
is($node->safe_psql('postgres', 'SHOW data_checksums'), 'on', 'checksums on');
is($node->safe_psql('postgres', 'SELECT sum(id) FROM t'),
	'12502500', 'server reads pages checksummed offline');
$node->safe_psql('postgres',
	"UPDATE t SET v = 'y' WHERE id % 7 = 0; CHECKPOINT");
$node->stop;
command_ok([ 'pg_checksums', '--check', '-D', $pgdata ],
	'pg_checksums --check passes on pages written by the server');

# Flip one byte of ciphertext in block 1 of the table
my $file = "$pgdata/$relpath";
open(my $fh, '+<:raw', $file) or die "open $file: $!";
seek($fh, 8192 + 4000, 0);
my $byte;
read($fh, $byte, 1);
seek($fh, 8192 + 4000, 0);
print $fh chr(ord($byte) ^ 0x01);
close $fh;

command_fails_like(
	[ 'pg_checksums', '--check', '-D', $pgdata ],
	qr/checksum verification failed in file ".*", block 1:/,
	'pg_checksums --check finds one flipped byte of ciphertext');

$node->start;
my ($ret, $stdout, $stderr) =
  $node->psql('postgres', 'SELECT count(*) FROM t');
isnt($ret, 0, 'server refuses to read the damaged page');
like(
	$stderr,
	qr/invalid page in block 1 of relation/,
	'server reports the damaged block');
like(
	PostgreSQL::Test::Utils::slurp_file($node->logfile),
	qr/page verification failed, calculated checksum \d+ but expected \d+/,
	'server log shows the checksum failure');
$node->stop;

# Disable and re-enable: the new checksum covers the damaged ciphertext, so
# nothing detects the damage any more.  XTS has no integrity of its own: the
# flipped byte garbles only its own 16-byte block of plaintext (see
# integrity in docs/design.md, section 2), as an unencrypted page would have
# one wrong byte.
command_ok(
	[ 'pg_checksums', '--disable', '-D', $pgdata ],
	'pg_checksums --disable on an encrypted cluster');
command_ok([ 'pg_checksums', '--enable', '-D', $pgdata ],
	'pg_checksums --enable again');
$node->start;
is( $node->safe_psql('postgres', 'SELECT count(*) FROM t'),
	'5000',
	'after re-enabling, the page is read: XTS damage stays within one 16-byte block'
);
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM t WHERE v NOT IN ('y', repeat('x', 100))"),
	'1',
	'exactly one row shows the garbled 16-byte block');
$node->stop;

done_testing();
