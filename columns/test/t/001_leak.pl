# Copyright: pgcipher project
#
# 001_leak.pl — values of encrypted columns never reach the server's files
# in plaintext, even on a cluster without TDE.
#
# Markers are encrypted on the client side by pgcipher-keys (the Go
# library), stored in EQ and ORD columns with a btree index, pushed to disk
# (checkpoint, WAL switch), and every byte under the data directory is
# scanned: no marker may appear.  The same table holds a control column of
# plaintext markers, which the scan must find on a cluster without TDE, so
# the scan can fail (and must not find on a TDE cluster).
# Reading the column back and decrypting it on the client gives the markers.
use strict;
use warnings FATAL => 'all';
use File::Find;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $keys = $ENV{PGCIPHER_KEYS} // 'pgcipher-keys';
my $dir = PostgreSQL::Test::Utils::tempdir;

my $node = PostgreSQL::Test::Cluster->new('leak');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION pgcipher_columns');

# A column master key on the client side, a wrapped CEK in the catalog.
my ($stdout, $stderr);
run_log([ $keys, 'new-cmk' ], '>', "$dir/cmk") or die "$keys new-cmk failed";
my @cmk = ('--cmk-file', "$dir/cmk", '--cmk-name', 'test-cmk');
IPC::Run::run([ $keys, 'new-cek', @cmk, '--key-name', 'k1' ],
	'>', \$stdout, '2>', \$stderr)
  or die "new-cek failed: $stderr";
$node->safe_psql('postgres', $stdout);
my $wrapped = $node->safe_psql('postgres',
	"SELECT encode(wrapped_cek, 'hex') FROM pgcipher.column_keys WHERE key_name = 'k1'"
);

$node->safe_psql(
	'postgres', q{
	CREATE TABLE public.leak (id int, secret enc_text, ranked enc_text_ord, searchable enc_text,
							  control text);
	SELECT pgcipher.encrypt_column('public.leak', 'secret', 'k1', 'EQ');
	SELECT pgcipher.encrypt_column('public.leak', 'searchable', 'k1', 'MATCH');
	CREATE INDEX ON public.leak USING gin (searchable enc_text_match_ops);
	SELECT pgcipher.encrypt_column('public.leak', 'ranked', 'k1', 'ORD');
	CREATE INDEX ON public.leak (ranked);
	CREATE INDEX ON public.leak (secret);
});

sub encrypt_lines
{
	my ($level, $label, @lines) = @_;
	my ($out, $err);
	my @pattern = ($level eq 'PATTERN') ? ('--pattern') : ();
	$level = 'MATCH' if $level eq 'PATTERN';
	IPC::Run::run(
		[
			$keys, 'encrypt', @cmk, '--key-name',
			'k1', '--wrapped-cek', $wrapped, '--key-id',
			'1', '--type', 'text', '--level',
			$level, '--label', $label, @pattern
		],
		'<',
		\(join("\n", @lines) . "\n"),
		'>',
		\$out,
		'2>',
		\$err) or die "encrypt failed: $err";
	return split /\n/, $out;
}

my $n = 300;
my @secret = map { sprintf('pgcipher-eq-marker-%05d', $_) } 1 .. $n;
# ORD text is ordered by its first 16 bytes: put the number first
my @ranked = map { sprintf('%05d-pgcipher-ord-marker', $_) } 1 .. $n;
my @searchable = map { sprintf('pgcipher-match-marker-%05d', $_) } 1 .. $n;
my @secret_ct = encrypt_lines('EQ', 'public.leak.secret', @secret);
my @ranked_ct = encrypt_lines('ORD', 'public.leak.ranked', @ranked);
my @searchable_ct =
  encrypt_lines('MATCH', 'public.leak.searchable', @searchable);
is(scalar(@secret_ct) + scalar(@ranked_ct) + scalar(@searchable_ct),
	3 * $n, 'client encrypted every marker');

my $copy = join(
	'',
	map {
		sprintf(
			"%d\t%s\t%s\t%s\tpgcipher-ctl-marker-%05d\n",
			$_,
			$secret_ct[ $_ - 1 ],
			$ranked_ct[ $_ - 1 ],
			$searchable_ct[ $_ - 1 ], $_)
	} 1 .. $n);
$node->safe_psql('postgres', "COPY public.leak FROM STDIN;\n$copy\\.\n");
$node->safe_psql('postgres',
	'CHECKPOINT; SELECT pg_switch_wal(); CHECKPOINT;');

# The server answers order queries on the ciphertext.
is( $node->safe_psql(
		'postgres',
		'SELECT count(*) FROM public.leak a JOIN public.leak b ON a.ranked < b.ranked WHERE a.id < b.id'
	),
	$n * ($n - 1) / 2,
	'ORD column ordered like its plaintext');

# ... and substring-search candidates through the GIN index.
my ($query) =
  encrypt_lines('PATTERN', 'public.leak.searchable', '%marker-00042%');
# (candidates: keys are random per run, so a false positive may join row 42)
like(
	$node->safe_psql(
		'postgres', qq{
	SET enable_seqscan = off;
	SELECT string_agg(id::text, ',' ORDER BY id) FROM public.leak WHERE searchable @> '$query'}
	),
	qr/(^|,)42(,|$)/,
	'MATCH query finds its row among the candidates');

# Scan every byte under the data directory.
my %found;
my $datadir = $node->data_dir;
find(
	{
		no_chdir => 1,
		wanted => sub {
			return unless -f $_;
			my $content = slurp_file($_);
			for my $kind ('eq', 'ord', 'match', 'ctl')
			{
				$found{$kind}++
				  if index($content, "pgcipher-$kind-marker") >= 0;
			}
		}
	},
	$datadir);
# Without TDE the plaintext control column must be found (the scan works);
# on a TDE cluster (PG_TEST_INITDB_EXTRA_OPTS=--encryption=...) it must not.
if (($ENV{PG_TEST_INITDB_EXTRA_OPTS} // '') =~ /--encryption=aes/)
{
	ok(!$found{ctl},
		'TDE: plaintext control column absent from the data directory too');
}
else
{
	ok($found{ctl},
			'control: plaintext markers found in '
		  . ($found{ctl} // 0)
		  . ' files');
}
ok(!$found{eq}, 'EQ column markers absent from the data directory');
ok(!$found{ord}, 'ORD column markers absent from the data directory');
ok(!$found{match}, 'MATCH column markers absent from the data directory');

# The client decrypts what the server returns.
my $back =
  $node->safe_psql('postgres', 'SELECT secret FROM public.leak ORDER BY id');
my ($plain, $err);
IPC::Run::run(
	[
		$keys, 'decrypt',
		@cmk, '--key-name',
		'k1', '--wrapped-cek',
		$wrapped, '--key-id',
		'1', '--type',
		'text', '--level',
		'EQ', '--label',
		'public.leak.secret'
	],
	'<',
	\"$back\n",
	'>',
	\$plain,
	'2>',
	\$err) or die "decrypt failed: $err";
is($plain, join("\n", @secret) . "\n", 'client decrypts the stored values');

$node->stop;
done_testing();
