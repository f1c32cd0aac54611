# Copyright: pgcipher project
#
# 002_dump.pl — a database owner who is not a superuser creates the
# (trusted) extension, keys and bound columns, dumps the database with
# pg_dump and restores it into another database: keys, bindings, the CHECK
# constraints and the ciphertexts come back, and comparisons still work.
use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE ROLE alice LOGIN;
	CREATE DATABASE d1 OWNER alice;
	CREATE DATABASE d2 OWNER alice;
});

# the shared vectors: key 1, label and join group public.vec.v
my $vectors = slurp_file('test/data/vectors.csv');    # prove runs in columns/
my @ord = map { (split /,/)[7] } grep { /^int4,ORD,1,/ } split /\n/, $vectors;
ok(@ord >= 10, 'int4 ORD vectors found');

$node->safe_psql(
	'd1', q{
	CREATE EXTENSION pgcipher_columns;
	SELECT pgcipher.add_column_key('k1', 'cmk', decode(repeat('01', 61), 'hex'));
	CREATE TABLE public.vec (v enc_int4_ord);
	SELECT pgcipher.encrypt_column('public.vec', 'v', 'k1', 'ORD');
	-- the vectors are of order format 1: a column as extension 0.1 made
	-- them, which a dump and restore must keep readable and ordered
	SELECT pgcipher.set_ore_format('public.vec', 'v', '1');
	CREATE INDEX ON public.vec (v);
	-- a signed right (design 13.12; the server cannot check its MAC)
	SELECT pgcipher.set_column_right('public.vec.v', 'alice', 'k1', 'read', 1,
									 decode(repeat('07', 32), 'hex'));
} . join('', map { "INSERT INTO public.vec VALUES ('$_');\n" } @ord),
	extra_params => [ '-U', 'alice' ]);

my $dump = PostgreSQL::Test::Utils::tempdir . '/d1.sql';
$node->command_ok(
	[ 'pg_dump', '-U', 'alice', '-d', $node->connstr('d1'), '-f', $dump ],
	'pg_dump as the non-superuser database owner');
$node->command_ok(
	[
		'psql', '-X', '-v', 'ON_ERROR_STOP=1',
		'-U', 'alice', '-d', $node->connstr('d2'),
		'-f', $dump
	],
	'restore as the same owner');

# ties (two encryptions of one plaintext) broken by the text form
my $order =
  q{SELECT md5(string_agg(v::text, ',' ORDER BY v, v::text)) FROM public.vec};
is( $node->safe_psql('d2', $order),
	$node->safe_psql('d1', $order),
	'restored ciphertexts sort the same way');
is( $node->safe_psql(
		'd2',
		'SELECT table_name, column_name, level, key_name, label FROM pgcipher.columns'
	),
	'vec|v|ORD|k1|public.vec.v',
	'binding restored');
is( $node->safe_psql(
		'd2',
		'SELECT label, role, access, serial, encode(mac, \'hex\') = repeat(\'07\', 32) FROM pgcipher.column_rights'
	),
	'public.vec.v|alice|read|1|t',
	'rights restored by the database owner, their MACs unchanged');
is( $node->safe_psql(
		'd2',
		"SELECT pgcipher.add_column_key('k2', 'cmk', decode(repeat('02', 61), 'hex'))",
		extra_params => [ '-U', 'alice' ]),
	'2',
	'key ids continue after the restored ones');
my ($ret, $out, $err) = $node->psql('d2',
	"INSERT INTO public.vec SELECT v FROM public.vec LIMIT 1; UPDATE public.vec SET v = NULL WHERE false;"
);
is($ret, 0, 'values of the column still pass its CHECK');

# An installed 0.2 updated in place to 0.3 (case-insensitive MATCH): its
# MATCH column keeps its binding and its values, and new columns may be
# bound case-insensitive.
my @match = map { (split /,/)[7] } grep { /^text,MATCH,1,/ } split /\n/,
  $vectors;
my @folded = map { (split /,/)[7] } grep { /^text,MATCHCI,1,/ } split /\n/,
  $vectors;
ok(@match >= 10 && @folded >= 5, 'MATCH and MATCHCI vectors found');
$node->safe_psql('postgres', 'CREATE DATABASE d3 OWNER alice');
$node->safe_psql(
	'd3', q{
	CREATE EXTENSION pgcipher_columns VERSION '0.2';
	SELECT pgcipher.add_column_key('k1', 'cmk', decode(repeat('01', 61), 'hex'));
	CREATE TABLE public.vec (v enc_text);
	SELECT pgcipher.encrypt_column('public.vec', 'v', 'k1', 'MATCH');
} . join('', map { "INSERT INTO public.vec VALUES ('$_');\n" } @match) . q{
	ALTER EXTENSION pgcipher_columns UPDATE;
	CREATE TABLE public.ci (v enc_text);
	SELECT pgcipher.encrypt_column('public.ci', 'v', 'k1', 'MATCH', 'public.vec.v', case_insensitive => true);
} . join('', map { "INSERT INTO public.ci VALUES ('$_');\n" } @folded),
	extra_params => [ '-U', 'alice' ]);
is( $node->safe_psql(
		'd3',
		q{SELECT e.extversion, string_agg(c.table_name || ':' || c.case_insensitive, ',' ORDER BY c.table_name)
		  FROM pg_extension e, pgcipher.columns c WHERE e.extname = 'pgcipher_columns' GROUP BY 1}
	),
	'0.5|ci:true,vec:false',
	'0.2 updated to 0.5: the old binding case-sensitive, the new one not');
($ret, $out, $err) = $node->psql('d3',
	"INSERT INTO public.vec SELECT v FROM public.vec LIMIT 1");
is($ret, 0, 'the updated column still takes its own values');
($ret, $out, $err) =
  $node->psql('d3', "INSERT INTO public.vec SELECT v FROM public.ci LIMIT 1");
like(
	$err,
	qr/has a case-folded filter, the column is bound case-sensitive/,
	'and refuses case-folded ones');

$node->stop;
done_testing();
