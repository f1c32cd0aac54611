# Copyright (c) 2026, pgcipher developers
#
# Crypto unit tests: IEEE 1619 XTS vectors, RFC 5649 key wrap vectors, the
# key ring format (round trip, wrong key, every bit flip and truncation) and
# the key command runner.  The work is done by test_cipher (C, linked with
# the same src/common code as the server); this script checks its verdicts.
use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Utils;
use Test::More;

my ($stdout, $stderr);
my $ok = IPC::Run::run([ 'test_cipher', 'vectors' ], '>', \$stdout, '2>', \$stderr);

my @lines = split /\n/, $stdout;
my @passed = grep { /^ok \d+/ } @lines;
my @failed = grep { /^not ok \d+/ } @lines;
note $_ for @failed;
note $stderr if $stderr;

ok($ok, 'test_cipher exits with status 0');
is(scalar(@failed), 0, 'no crypto check failed');
cmp_ok(scalar(@passed), '>=', 100, 'at least 100 crypto checks ran');
ok((grep { /XTS encrypt .*Vector 10/ } @passed), 'XTS-AES-256 IEEE 1619 vector 10 checked');
ok((grep { /XTS encrypt .*Vector 4\b/ } @passed), 'XTS-AES-128 IEEE 1619 vector 4 checked');
ok((grep { /KWP wrap.*RFC 5649/ } @passed), 'RFC 5649 vectors checked');
ok((grep { /single-bit flips detected/ } @passed), 'key ring bit flips checked');

done_testing();
