# Copyright (c) 2026, pgcipher developers
#
# One OpenSSL per process, and TLS working with it.
#
# pgcipher links the OpenSSL that server/openssl.sh builds (for its VAES
# AES-XTS); the machine has Debian's OpenSSL 3.0 under the same soname.  An
# encrypted server runs with TLS on; a backend that has served a TLS
# connection and loaded pgcrypto (which links libcrypto itself) must map
# exactly one libcrypto and one libssl, both the build's, as must an
# auxiliary process (the checkpointer); psql's libpq and the postgres
# binary resolve to the same library.
use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $tmp = PostgreSQL::Test::Utils::tempdir();
my $keyfile = "$tmp/kek";
PostgreSQL::Test::Utils::append_to_file($keyfile, ('cd' x 32) . "\n");

# a self-signed certificate, made by the machine's openssl tool
system_or_bail(
	'openssl', 'req', '-x509', '-newkey',
	'rsa:2048', '-nodes', '-subj', '/CN=localhost',
	'-days', '2', '-keyout', "$tmp/server.key",
	'-out', "$tmp/server.crt");
chmod 0600, "$tmp/server.key";

my $node = PostgreSQL::Test::Cluster->new('tls');
$node->init(extra =>
	  [ '--encryption=aes-256', "--encryption-key-command=cat $keyfile" ]);
$node->append_conf(
	'postgresql.conf', qq{
listen_addresses = '127.0.0.1'
ssl = on
ssl_cert_file = '$tmp/server.crt'
ssl_key_file = '$tmp/server.key'
});
$node->append_conf('pg_hba.conf', 'hostssl all all 127.0.0.1/32 trust');
$node->start;

my $tls =
  'host=127.0.0.1 port=' . $node->port . ' dbname=postgres sslmode=require';
$node->safe_psql('postgres', 'CREATE EXTENSION pgcrypto');

# A TLS session that uses pgcrypto, then reports on itself
my $out = $node->safe_psql(
	'postgres', q{
SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid();
SELECT encode(digest('pgcipher', 'sha256'), 'hex');
SELECT pg_read_file('/proc/self/maps');
}, connstr => $tls);
my @lines = split /\n/, $out;
like($lines[0], qr/^t\|TLSv1\.[23]$/, "the connection is TLS ($lines[0])");
is($lines[1], sha256_hex_of('pgcipher'), 'pgcrypto computes SHA-256 right');

# every path of the libraries mapped by a process
sub mapped
{
	my ($maps, $lib) = @_;
	my %paths = map { (split ' ', $_, 6)[5] => 1 }
	  grep { m{/\Q$lib\E\.so[.\d]*$} } split /\n/, $maps;
	return sort keys %paths;
}

my $maps = join "\n", @lines[ 2 .. $#lines ];
my @crypto = mapped($maps, 'libcrypto');
my @ssl = mapped($maps, 'libssl');
is(scalar(@crypto), 1,
	'the TLS backend with pgcrypto maps one libcrypto: '
	  . join(', ', @crypto));
is(scalar(@ssl), 1, 'and one libssl: ' . join(', ', @ssl));
unlike($crypto[0] // '',
	qr{^/usr/lib/}, 'the libcrypto is the build\'s, not the system\'s');
my ($dir) = ($crypto[0] // '') =~ m{^(.*)/[^/]+$};
like($ssl[0] // '', qr{^\Q$dir\E/}, 'libssl comes from the same directory');

my $checkpointer_maps = slurp_file(
	'/proc/'
	  . $node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'}
	  )
	  . '/maps');
is_deeply([ mapped($checkpointer_maps, 'libcrypto') ],
	\@crypto, 'an auxiliary process maps the same single libcrypto');

# psql's libpq and the server binary resolve to the same library
my $bindir = $node->config_data('--bindir');
for my $program ("$bindir/psql", "$bindir/postgres")
{
	my ($ldd) = run_command([ 'ldd', $program ]);
	my ($resolved) = $ldd =~ /libcrypto\.so\.3 => (\S+)/;
	is($resolved, $crypto[0],
		"$program resolves libcrypto.so.3 to the build's");
}

$node->stop;
done_testing();

# SHA-256 in hex, computed by the test (Digest::SHA ships with Perl)
sub sha256_hex_of
{
	require Digest::SHA;
	return Digest::SHA::sha256_hex(shift);
}
