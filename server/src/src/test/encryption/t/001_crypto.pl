# Copyright (c) 2026, pgcipher developers
#
# Crypto unit tests: IEEE 1619 XTS vectors, RFC 5649 key wrap vectors, the
# key ring format (round trip, wrong key, every bit flip and truncation) and
# the key command runner, and the known outputs of every cipher use.  The
# work is done by test_cipher (C, linked with the same src/common code as
# the server); this script checks its verdicts.
#
# test_cipher runs twice: with the OpenSSL the build links (server/
# openssl.sh, with a VAES XTS path) and, through LD_LIBRARY_PATH, with the
# machine's OpenSSL 3.0 that pgcipher linked before: both must pass every
# check, known outputs included, so clusters written with either read with
# the other.
use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Utils;
use Test::More;

my ($stdout, $stderr);
my $ok =
  IPC::Run::run([ 'test_cipher', 'vectors' ], '>', \$stdout, '2>', \$stderr);
like(
	$stdout,
	qr/^# linked with OpenSSL 3\.([5-9]|\d\d)\./m,
	'test_cipher runs with the pinned OpenSSL (3.5 or later)');

my @lines = split /\n/, $stdout;
my @passed = grep { /^ok \d+/ } @lines;
my @failed = grep { /^not ok \d+/ } @lines;
note $_ for @failed;
note $stderr if $stderr;

ok($ok, 'test_cipher exits with status 0');
is(scalar(@failed), 0, 'no crypto check failed');
cmp_ok(scalar(@passed), '>=', 100, 'at least 100 crypto checks ran');
ok( (grep { /XTS encrypt .*Vector 10/ } @passed),
	'XTS-AES-256 IEEE 1619 vector 10 checked');
ok( (grep { /XTS encrypt .*Vector 4\b/ } @passed),
	'XTS-AES-128 IEEE 1619 vector 4 checked');
ok((grep { /KWP wrap.*RFC 5649/ } @passed), 'RFC 5649 vectors checked');
cmp_ok(
	scalar(
		grep { /unwrap mode|opens keyring\.next of the other mode|format 3/ }
		  @passed),
	'>=', 15,
	'the unwrap mode\'s key ring checks ran (design 9.4)');
ok((grep { /single-bit flips detected/ } @passed),
	'key ring bit flips checked');
is( scalar(grep { /known output aes-\d+ \S+ unchanged/ } @passed),
	10,
	'the known outputs of pages, XTS lengths, CTR, WAL pages and temporary files are unchanged'
);

# The same checks with the machine's OpenSSL (Debian 12's libssl3)
# (its directory from the dynamic linker's cache, which lists only the
# machine's libraries, e.g. /usr/lib/x86_64-linux-gnu)
my ($system_lib) = (`/sbin/ldconfig -p 2>/dev/null` // '') =~
  m{\slibcrypto\.so\.3 \(.*\) => (/\S+)/libcrypto\.so\.3$}m;
$system_lib //= '/usr/lib/x86_64-linux-gnu';
SKIP:
{
	skip "no system libcrypto.so.3 in $system_lib", 3
	  unless -e "$system_lib/libcrypto.so.3";
	local $ENV{LD_LIBRARY_PATH} = $system_lib;
	my ($out2, $err2);
	my $ok2 =
	  IPC::Run::run([ 'test_cipher', 'vectors' ], '>', \$out2, '2>', \$err2);
	my ($ours) = $stdout =~ /^# linked with (.*)$/m;
	my ($system) = $out2 =~ /^# linked with (.*)$/m;
	isnt($system, $ours,
		"test_cipher also ran with the system's library ($system)");
	ok($ok2, 'every check passes with the system\'s OpenSSL too');
	is(scalar(grep { /^ok \d+ - known output/ } split /\n/, $out2),
		10, 'the system\'s OpenSSL gives the same known outputs');
}

done_testing();
