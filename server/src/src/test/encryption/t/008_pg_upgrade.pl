# Copyright (c) 2026, pgcipher developers
#
# pg_upgrade into, out of and between encrypted clusters (design 9.2):
#
#  - from Debian's stock PostgreSQL 15 and from stock 17 (on 18: stock
#    18; server/build.sh --stock) into an aes-256 cluster: copy mode encrypts every block of
#    every fork and the pg_xact and pg_multixact pages; link mode is
#    refused before anything changes, with the mode that works named;
#  - pgcipher to pgcipher with the old relation key (initdb
#    --encryption-keys-from): --link moves the files as they are;
#  - pgcipher to pgcipher with new keys: --copy re-encrypts every block
#    (the offline re-key), and no page of the new cluster is left as it was
#    under the old key;
#  - pgcipher to unencrypted: copy mode decrypts;
#  - a kill -9 of pg_upgrade in the middle of its copy leaves the old
#    cluster as it was, and it starts;
#  - on 18, from pgcipher 17 aes-256 (PGCIPHER_PG17_BINDIR): the re-key
#    in copy mode, --swap refused where blocks must change, and --link
#    with the old relation key.
#
# The dataset covers heap, TOAST, btree, GIN and hash indexes, a sequence,
# a materialized view, large objects, an unlogged table, a second
# tablespace, two databases and multixacts in pg_multixact.  After every
# upgrade the new cluster answers like the old one (a digest of every
# table, index scans, pg_dump --data-only), amcheck passes on every btree,
# and the marker scan finds nothing in an encrypted new cluster while the
# unencrypted old one (the control) shows every marker.
#
# Needs PGCIPHER_STOCK_BINDIR (stock 17) and PGCIPHER_PG15_BINDIR; the
# suite pg_upgrade of scripts/test.sh sets both.
use strict;
use warnings FATAL => 'all';
use Cwd;
use File::Find;
use Digest::MD5;
use IPC::Run;
use FindBin;
use lib "$FindBin::RealBin/..";
use LeakScan;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $stock_bindir = $ENV{PGCIPHER_STOCK_BINDIR};
my $pg15_bindir = $ENV{PGCIPHER_PG15_BINDIR};
plan skip_all =>
  'PGCIPHER_STOCK_BINDIR and PGCIPHER_PG15_BINDIR are not set (suite pg_upgrade sets them)'
  unless $stock_bindir && $pg15_bindir;
die "no stock PostgreSQL 17 in $stock_bindir"
  unless -x "$stock_bindir/postgres";
die "no PostgreSQL 15 in $pg15_bindir" unless -x "$pg15_bindir/postgres";

my $newbin;    # our bin directory, from the first pgcipher node
my $run = sprintf('%08x', int(rand(0xffffffff)));
my @markers = map { { name => $_, bytes => "PGUP_${_}_$run" } }
  qw(heap toast btree gin mview lobject unlogged tablespace db2 sequence);
my %m = map { $_->{name} => $_->{bytes} } @markers;

# --- the dataset, on the old cluster (any version) ---
# pg_upgrade refuses tablespaces between clusters of the same catalog
# version (their directories would collide), so only the upgrade from 15
# has the second tablespace; the others keep in_ts2 in the default one
sub load_dataset
{
	my ($node, $with_tablespace) = @_;
	my $ts = $node->basedir . '/ts2';
	if ($with_tablespace)
	{
		mkdir $ts or die "mkdir $ts: $!";
		$node->safe_psql('postgres', "CREATE TABLESPACE ts2 LOCATION '$ts'");
	}
	my $tablespace = $with_tablespace ? 'TABLESPACE ts2' : '';
	$node->safe_psql(
		'postgres', qq(
CREATE TABLE heap_t (id int PRIMARY KEY, v text, big text);
INSERT INTO heap_t SELECT g, '$m{heap} ' || g,
  CASE WHEN g % 50 = 0 THEN '$m{toast}' || (SELECT string_agg(md5(g::text || x::text), '') FROM generate_series(1, 200) x) END
  FROM generate_series(1, 3000) g;
CREATE TABLE keyed (k text PRIMARY KEY, doc text, h int);
INSERT INTO keyed SELECT '$m{btree}_' || lpad(g::text, 6, '0'), 'word$m{gin} ' || g, g % 97 FROM generate_series(1, 2000) g;
CREATE INDEX keyed_gin ON keyed USING gin (to_tsvector('simple', doc));
CREATE INDEX keyed_hash ON keyed USING hash (h);
CREATE SEQUENCE seq START 1000;
SELECT nextval('seq') FROM generate_series(1, 7);
CREATE TABLE seqname (s text DEFAULT '$m{sequence}');
INSERT INTO seqname DEFAULT VALUES;
CREATE MATERIALIZED VIEW mv AS SELECT id, '$m{mview}' || id AS v FROM heap_t WHERE id % 10 = 0;
SELECT lo_from_bytea(424242, convert_to(repeat('$m{lobject} ', 500), 'UTF8'));
CREATE UNLOGGED TABLE unlogged_t AS SELECT g AS id, '$m{unlogged} ' || g AS v FROM generate_series(1, 500) g;
CREATE TABLE in_ts2 (id int, v text) $tablespace;
INSERT INTO in_ts2 SELECT g, '$m{tablespace} ' || g FROM generate_series(1, 500) g;
CREATE TABLE big_t AS SELECT g AS id, md5(g::text) || ' $m{heap}' AS v FROM generate_series(1, 100000) g;
CREATE TABLE locked (id int PRIMARY KEY, v int);
INSERT INTO locked SELECT g, g FROM generate_series(1, 10) g;
CREATE DATABASE db2;));
	$node->safe_psql(
		'db2', qq(
CREATE TABLE other (id int PRIMARY KEY, v text);
INSERT INTO other SELECT g, '$m{db2} ' || g FROM generate_series(1, 300) g;));

	$node->safe_psql('postgres', 'VACUUM ANALYZE');
	# multixacts: (after VACUUM, which would clear them) rows share-locked by several transactions at once
	my @s = map { $node->background_psql('postgres') } 1 .. 3;
	$_->query_safe('BEGIN; SELECT * FROM locked FOR SHARE;') for @s;
	$_->query_safe('COMMIT;')                                for @s;
	$_->quit                                                 for @s;
	$node->safe_psql('postgres', 'CHECKPOINT');
}

# What the dataset answers, as one string: digests of every table and index
# scans forced through each index kind
sub answers
{
	my ($node) = @_;
	my $q = sub { $node->safe_psql($_[0], $_[1]) };
	return join(
		"\n",
		$q->(
			'postgres',
			"SELECT md5(string_agg(t::text, '|' ORDER BY id)) FROM heap_t t"),
		# 8 MB: more than pg_upgrade's in-memory chunks, so it goes through the
		# two-thread pipeline
		$q->(
			'postgres',
			"SELECT pg_relation_size('big_t') > 4 * 1024 * 1024, md5(string_agg(v, '|' ORDER BY id)) FROM big_t"
		),
		$q->(
			'postgres',
			"SET enable_seqscan = off; SELECT count(*), min(k), max(k) FROM keyed WHERE k > '$m{btree}_000100'"
		),
		$q->(
			'postgres',
			"SET enable_seqscan = off; SELECT count(*) FROM keyed WHERE to_tsvector('simple', doc) @@ to_tsquery('simple', '1999')"
		),
		$q->(
			'postgres',
			"SET enable_seqscan = off; SET enable_bitmapscan = on; SELECT count(*) FROM keyed WHERE h = 42"
		),
		$q->('postgres', "SELECT last_value FROM seq"),
		$q->(
			'postgres', "SELECT md5(string_agg(v, '|' ORDER BY id)) FROM mv"),
		$q->('postgres', "SELECT md5(lo_get(424242))"),
		$q->(
			'postgres',
			"SELECT count(*), md5(string_agg(v, '|' ORDER BY id)) FROM unlogged_t"
		),
		$q->(
			'postgres',
			"SELECT count(*), md5(string_agg(v, '|' ORDER BY id)) FROM in_ts2"
		),
		# read from pg_multixact: 10 rows, each locked by a multixact of 3
		$q->(
			'postgres',
			"SELECT count(*), string_agg(DISTINCT m.mode, ',') FROM locked l, pg_get_multixact_members(l.xmax) m"
		),
		$q->(
			'db2',
			"SELECT count(*), md5(string_agg(v, '|' ORDER BY id)) FROM other")
	);
}

sub data_dump
{
	my ($node, $db) = @_;
	my ($out, $err);
	IPC::Run::run(
		[
			"$newbin/pg_dump", '--data-only',
			'--no-sync', '-d',
			$node->connstr($db)
		],
		'>',
		\$out,
		'2>',
		\$err) or die "pg_dump failed: $err";
	# the server version and the random \restrict key differ by design
	$out =~ s/^-- Dumped from database version .*$//mg;
	$out =~ s/^\\(un)?restrict .*$//mg;
	return $out;
}

sub digest_tree
{
	my ($dir) = @_;
	my %d;
	find(
		{
			no_chdir => 1,
			wanted => sub {
				return unless -f $_;
				open(my $fh, '<:raw', $_) or return;
				$d{ substr($_, length($dir)) } =
				  Digest::MD5->new->addfile($fh)->hexdigest;
			}
		},
		$dir);
	return \%d;
}

# pg_upgrade from $old to $new (both stopped) in $mode; returns (ok, output)
sub upgrade
{
	my ($old, $new, @opts) = @_;
	my $cwd = Cwd::getcwd();
	my $dir = PostgreSQL::Test::Utils::tempdir();
	chdir $dir;
	my ($out, $err);
	my $ok = IPC::Run::run(
		[
			"$newbin/pg_upgrade", '--no-sync',
			'-d', $old->data_dir,
			'-D', $new->data_dir,
			'-b', $old->config_data('--bindir'),
			'-B', $new->config_data('--bindir'),
			'-s', $new->host,
			'-p', $old->port,
			'-P', $new->port,
			@opts
		],
		'>',
		\$out,
		'2>',
		\$err);
	chdir $cwd;
	return ($ok, $out . $err);
}

sub new_cluster
{
	my ($name, @extra) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(extra => [ '--data-checksums', @extra ]);
	$node->append_conf('postgresql.conf', "autovacuum = off\n");
	return $node;
}

sub check_upgraded
{
	my ($label, $new, $expected, $expected_dump, $encrypted) = @_;
	$new->start;
	is(answers($new), $expected,
		"$label: every answer matches the old cluster");
	is(data_dump($new, 'postgres'),
		$expected_dump,
		"$label: pg_dump --data-only matches the old cluster");
	$new->safe_psql('postgres', 'CREATE EXTENSION IF NOT EXISTS amcheck');
	is( $new->safe_psql(
			'postgres', q{
		SELECT count(*) FROM (SELECT bt_index_check(c.oid, true)
		  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		  JOIN pg_am a ON a.oid = c.relam
		  WHERE a.amname = 'btree' AND c.relpersistence <> 't') s}
		) > 0 ? 'ok' : 'none',
		'ok',
		"$label: amcheck (heapallindexed) passes on every btree");
	$new->stop;
	command_ok(
		[ "$newbin/pg_checksums", '--check', '-D', $new->data_dir ],
		"$label: pg_checksums verifies every page of the new cluster");
	if ($encrypted)
	{
		my $found =
		  scan_for_markers(\@markers, $new->data_dir, $new->basedir . '/ts2');
		markers_nowhere($found, \@markers, "$label: new cluster");
	}
}

# A cluster of an older major: TEMP_CONFIG (./pgcipher test --io-method)
# holds 18's io_method, a setting older servers refuse to start with.
sub init_older_major
{
	my ($node, @args) = @_;
	local $ENV{TEMP_CONFIG};
	$node->init(@args);
}

# ---------------------------------------------------------------- 15 → aes-256
my $old15 = PostgreSQL::Test::Cluster->new('old15',
	install_path => ($pg15_bindir =~ s{/bin/?$}{}r));
init_older_major($old15, extra => ['--data-checksums']);
$old15->append_conf('postgresql.conf', "autovacuum = off\n");
$old15->start;
load_dataset($old15, 1);

# Debian's 15.20 (bookworm-security) writes "pg_attver=N" into every
# column's options, which no PostgreSQL 17 accepts: our pg_dump leaves it
# out as 15.20's own does (patch 0022), and a column option a user set
# survives the upgrade
$old15->safe_psql(
	'postgres', q{
CREATE TABLE attopts (a int, b text);
INSERT INTO attopts SELECT g, 'v' || g FROM generate_series(1, 100) g;
ALTER TABLE attopts ALTER COLUMN a SET (n_distinct = 5);});
my $pg15_version = $old15->safe_psql('postgres', 'SHOW server_version_num');
my $attver_columns = $old15->safe_psql('postgres',
	q{SELECT count(*) FROM pg_attribute WHERE array_to_string(attoptions, ',') ~ 'pg_attver='}
);
SKIP:
{
	skip
	  "Debian's PostgreSQL 15 here is $pg15_version, older than 15.20: no pg_attver to upgrade",
	  1
	  if $pg15_version < 150020;
	ok( $attver_columns > 0,
		"the old cluster ($pg15_version) has pg_attver in $attver_columns columns' options"
	);
}

my $enc_a = new_cluster('enc_from15', encryption_options('aes-256'));
$newbin = $enc_a->config_data('--bindir');
my $expected = answers($old15);
my $expected_dump = data_dump($old15, 'postgres');
$old15->stop;

my $found =
  scan_for_markers(\@markers, $old15->data_dir, $old15->basedir . '/ts2');
is_deeply(
	[ sort grep { @{ $found->{$_} // [] } } map { $_->{name} } @markers ],
	[ sort map { $_->{name} } @markers ],
	'control: every marker is found in the unencrypted old cluster');

my $old_digest = digest_tree($old15->data_dir);
my ($ok, $out) = upgrade($old15, $enc_a, '--link', '--check');
ok(!$ok, '15 → aes-256 --link --check is refused');
like(
	$out,
	qr/The old cluster is not encrypted and the new one is, so every block must be encrypted as it is copied: --link cannot be used\.\nUse --copy \(the default\) instead\./,
	'and the refusal names the mode that works');
($ok, $out) = upgrade($old15, $enc_a, '--link');
ok(!$ok, '15 → aes-256 --link is refused');
is_deeply(digest_tree($old15->data_dir),
	$old_digest, 'the refused --link changed nothing in the old cluster');

($ok, $out) = upgrade($old15, $enc_a, '--check');
ok($ok, '15 → aes-256 --check passes');
like(
	$out,
	qr/Data encryption: off to aes-256; copy mode encrypts every block of the old cluster\./,
	'--check reports that copy mode encrypts every block');

# kill -9 of pg_upgrade while it copies: the old cluster is left as it was
{
	my $cwd = Cwd::getcwd();
	my $dir = PostgreSQL::Test::Utils::tempdir();
	chdir $dir;
	my ($o, $e) = ('', '');
	my $h = IPC::Run::start(
		[
			"$newbin/pg_upgrade", '--no-sync',
			'--verbose', '-d',
			$old15->data_dir, '-D',
			$enc_a->data_dir, '-b',
			$old15->config_data('--bindir'), '-B',
			$newbin, '-s',
			$enc_a->host, '-p',
			$old15->port, '-P',
			$enc_a->port
		],
		'>',
		\$o,
		'2>',
		\$e);
	my $seen = 0;
	for (1 .. 1200)
	{
		$h->pump_nb;
		if ($o =~ /copying "/) { $seen = 1; last; }
		last unless $h->pumpable;
		select(undef, undef, undef, 0.05);
	}
	ok($seen, 'pg_upgrade reached its file copy');
	$h->signal('KILL');
	eval { $h->finish };
	chdir $cwd;
	# a server it may have left running is stopped by the next pg_ctl calls
	system("$pg15_bindir/pg_ctl", '-D', $old15->data_dir, '-m', 'immediate',
		'stop');
	system(
		"$newbin/pg_ctl", '-D', $enc_a->data_dir,
		'-m', 'immediate', 'stop');
	$old15->start;
	is(answers($old15), $expected,
		'after kill -9 of pg_upgrade the old cluster starts and answers as before'
	);
	$old15->stop;
	# the interrupted new cluster is discarded with its tablespace
	# directories (PG_17_* or PG_18_*: this build's major), as
	# pg_upgrade's documentation says
	my $ts_dir =
	  $old15->basedir . '/ts2/PG_' . $enc_a->pg_version->major . '_*';
	unlink glob("$ts_dir/*/*");
	rmdir $_ for glob("$ts_dir/*");
	rmdir $_ for glob($ts_dir);
	$enc_a = new_cluster('enc_from15_again', encryption_options('aes-256'));
}

($ok, $out) = upgrade($old15, $enc_a);
ok($ok, '15 → aes-256 in copy mode') or diag($out);
check_upgraded('15 → aes-256', $enc_a, $expected, $expected_dump, 1);
$enc_a->start;
is( $enc_a->safe_psql(
		'postgres', q{
	SELECT string_agg(attname || ' ' || coalesce(array_to_string(attoptions, ','), '-'), '; ' ORDER BY attnum)
	FROM pg_attribute WHERE attrelid = 'attopts'::regclass AND attnum > 0}),
	'a n_distinct=5; b -',
	'15 → aes-256: the user\'s column option kept, pg_attver left out');
is( $enc_a->safe_psql(
		'postgres',
		q{SELECT count(*) FROM pg_attribute WHERE array_to_string(attoptions, ',') ~ 'pg_attver='}
	),
	'0',
	'15 → aes-256: no pg_attver in the new cluster');
$enc_a->stop;

# pg_xact and pg_multixact were encrypted: none of their pages is left as it was
sub slru_pages_changed
{
	my ($old, $new, $sub) = @_;
	my ($same, $total) = (0, 0);
	opendir(my $dh, $old->data_dir . "/$sub") or die;
	for my $f (grep { /^[0-9A-F]+$/ } readdir $dh)
	{
		my $a = slurp_file($old->data_dir . "/$sub/$f");
		my $b = slurp_file($new->data_dir . "/$sub/$f");
		for (my $off = 0; $off < length($a); $off += 8192)
		{
			my $pa = substr($a, $off, 8192);
			next if $pa =~ /^\0*$/;
			$total++;
			$same++ if $pa eq substr($b, $off, 8192);
		}
	}
	return ($same, $total);
}
for my $sub ('pg_xact', 'pg_multixact/offsets', 'pg_multixact/members')
{
	my ($same, $total) = slru_pages_changed($old15, $enc_a, $sub);
	ok($total > 0 && $same == 0,
		"15 → aes-256: all $total used pages of $sub encrypted");
}

# ------------------------------------------------------- stock 17 → aes-256
my $old17 = PostgreSQL::Test::Cluster->new('old17',
	install_path => ($stock_bindir =~ s{/bin/?$}{}r));
$old17->init(extra => ['--data-checksums']);
$old17->append_conf('postgresql.conf', "autovacuum = off\n");
$old17->start;
load_dataset($old17, 0);
my $expected17 = answers($old17);
my $expected17_dump = data_dump($old17, 'postgres');
$old17->stop;
my $enc_b = new_cluster('enc_from17', encryption_options('aes-256'));
($ok, $out) = upgrade($old17, $enc_b);
ok($ok, 'stock 17 → aes-256 in copy mode') or diag($out);
check_upgraded('stock 17 → aes-256', $enc_b, $expected17, $expected17_dump,
	1);

# ---------------------------------------- aes-256 → aes-256, new data keys
# $enc_b (from stock 17) is the old cluster of the re-key; copy mode leaves
# it as it was, for the --link upgrade below
my $rekeyed = new_cluster('rekeyed', encryption_options('aes-256'));
($ok, $out) = upgrade($enc_b, $rekeyed, '--link');
ok(!$ok, 'aes-256 → aes-256 with new keys: --link is refused');
like(
	$out,
	qr/The old and new clusters are encrypted with different data keys, so every block must be re-encrypted as it is copied: --link cannot be used\.\nUse --copy to re-encrypt every block under the new keys, or create the new cluster with initdb --encryption-keys-from=/,
	'and the refusal says how to re-key or keep the keys');
($ok, $out) = upgrade($enc_b, $rekeyed, '--copy');
ok($ok, 'aes-256 → aes-256 with new keys in copy mode (the offline re-key)')
  or diag($out);
like(
	$out,
	qr/copy mode re-encrypts every block under the new cluster's keys/,
	'pg_upgrade says it re-encrypts');
check_upgraded('re-key', $rekeyed, $expected17, $expected17_dump, 1);

# no page of the re-keyed cluster is still under the old key: relfilenumbers
# are preserved, so the same file in both clusters holds the same plaintext,
# and a page left as it was would be byte-identical
{
	my ($same_pages, $pages, $files) = (0, 0, 0);
	my $olddir = $enc_b->data_dir . '/base';
	find(
		{
			no_chdir => 1,
			wanted => sub {
				return unless -f $_ && m{/base/\d+/\d+(_fsm|_vm)?(\.\d+)?$};
				my $rel = substr($_, length($olddir));
				my $newfile = $rekeyed->data_dir . "/base$rel";
				return unless -f $newfile;
				my $a = slurp_file($_);
				my $b = slurp_file($newfile);
				return if length($a) != length($b);
				$files++;

				for (my $off = 0; $off < length($a); $off += 8192)
				{
					my $pa = substr($a, $off, 8192);
					next if $pa =~ /^\0*$/;
					$pages++;
					$same_pages++
					  if substr($pa, 16) eq substr($b, $off + 16, 8176);
				}
			}
		},
		$olddir);
	ok( $pages > 100 && $same_pages == 0,
		"re-key: none of the $pages pages in $files relation files is left under the old key"
	);
}

# ------------------------------------- aes-256 → aes-256, same relation key
my $same = new_cluster(
	'same_keys',
	encryption_options('aes-256'),
	'--encryption-keys-from=' . $enc_b->data_dir);
($ok, $out) = upgrade($enc_b, $same, '--check', '--link');
ok($ok, 'aes-256 → aes-256 with the old relation key: --link --check passes')
  or diag($out);
like(
	$out,
	qr/both clusters have the same relation key: files are transferred as they are/,
	'--check says the files move as they are');
my $t0 = time();
($ok, $out) = upgrade($enc_b, $same, '--link');
ok($ok, 'aes-256 → aes-256 with --link') or diag($out);
note sprintf('pg_upgrade --link took %d s', time() - $t0);
check_upgraded('aes-256 → aes-256 --link',
	$same, $expected17, $expected17_dump, 1);

# -------------------------------------------------- aes-256 → unencrypted
my $plain = new_cluster('plain_again');
($ok, $out) = upgrade($rekeyed, $plain, '--link');
ok(!$ok, 'aes-256 → unencrypted: --link is refused');
like(
	$out,
	qr/The old cluster is encrypted and the new one is not, so every block must be decrypted as it is copied: --link cannot be used\./,
	'and the refusal says why');
($ok, $out) = upgrade($rekeyed, $plain);
ok($ok, 'aes-256 → unencrypted in copy mode decrypts') or diag($out);
check_upgraded('aes-256 → unencrypted',
	$plain, $expected17, $expected17_dump, 0);
$found = scan_for_markers(\@markers, $plain->data_dir);
ok( scalar(grep { @{ $found->{ $_->{name} } // [] } } @markers) >= 8,
	'the decrypted cluster holds the plaintext again (markers found)');

# --------------------------- after an online rotation of the data keys
# The old cluster's pages are under page key slot B and its WAL under WAL
# key slot B (design 9.6): --copy re-keys each page by its mark; --link
# with the old keys (initdb --encryption-keys-from) carries
# pg_encryption/pages, the new cluster's own WAL at generation 1.
{
	$same->start;
	$same->safe_psql('postgres', 'SELECT pg_rotate_data_keys(0, 10000)');
	$same->poll_query_until('postgres',
		"SELECT operation || ' ' || phase = 'none idle' FROM pg_stat_progress_encryption"
	) or die 'the rotation did not finish';
	like(
		slurp_file($same->data_dir . '/pg_encryption/pages'),
		qr/^generation 2\n.*^wal_generation 2\n/ms,
		'the old cluster rotated: pages and WAL under generation 2');
	$same->stop;

	my $rotated_rekeyed =
	  new_cluster('rotated_rekeyed', encryption_options('aes-256'));
	($ok, $out) = upgrade($same, $rotated_rekeyed, '--copy');
	ok($ok,
		'rotated → new keys in copy mode: each page decrypted by its mark')
	  or diag($out);
	check_upgraded('rotated → --copy re-key',
		$rotated_rekeyed, $expected17, $expected17_dump, 1);

	my $rotated_same = new_cluster(
		'rotated_same_keys',
		encryption_options('aes-256'),
		'--encryption-keys-from=' . $same->data_dir);
	($ok, $out) = upgrade($same, $rotated_same, '--link');
	ok($ok, 'rotated → the same page key: --link') or diag($out);
	like(
		slurp_file($rotated_same->data_dir . '/pg_encryption/pages'),
		qr/^generation 2\n.*^wal_generation 1\nwal_switch_lsn 0\/0\n/ms,
		'--link carries the page key state; the new WAL starts at generation 1'
	);
	check_upgraded('rotated → --link',
		$rotated_same, $expected17, $expected17_dump, 1);
}

# ------------------------------ a damaged page is not hidden by the rewrite
{
	my $bad = PostgreSQL::Test::Cluster->new('damaged',
		install_path => ($stock_bindir =~ s{/bin/?$}{}r));
	$bad->init(extra => ['--data-checksums']);
	$bad->start;
	$bad->safe_psql('postgres',
		"CREATE TABLE d AS SELECT g FROM generate_series(1, 1000) g; CHECKPOINT;"
	);
	my $file = $bad->data_dir . '/'
	  . $bad->safe_psql('postgres', "SELECT pg_relation_filepath('d')");
	$bad->stop;
	open(my $fh, '+<:raw', $file) or die;
	seek($fh, 4000, 0);
	print $fh 'X';
	close $fh;
	my $target = new_cluster('from_damaged', encryption_options('aes-256'));
	($ok, $out) = upgrade($bad, $target);
	ok(!$ok, 'an old page failing its checksum stops the upgrade');
	like(
		$out,
		qr/block 0 of file ".*" fails its checksum in the old cluster, and pg_upgrade would hide that by rewriting it/,
		'and says which block, instead of re-checksumming the damage');
}

# ------------------------- pgcipher 17 aes-256 → pgcipher 18 aes-256 (on 18)
# Across majors: the re-key in copy mode, --swap refused where blocks must
# change (as --link is), and --link with the old relation key.
SKIP:
{
	my $pgc17 = $ENV{PGCIPHER_PG17_BINDIR};
	skip 'not PostgreSQL 18, or PGCIPHER_PG17_BINDIR (the 17 build) not set',
	  1
	  unless $pgc17 && $enc_b->pg_version >= 18;
	my $old = PostgreSQL::Test::Cluster->new('pgcipher17',
		install_path => ($pgc17 =~ s{/bin/?$}{}r));
	init_older_major($old,
		extra => [ '--data-checksums', encryption_options('aes-256') ]);
	$old->append_conf('postgresql.conf', "autovacuum = off\n");
	$old->start;
	load_dataset($old, 0);
	my $expected = answers($old);
	my $expected_dump = data_dump($old, 'postgres');
	$old->stop;

	my $rekeyed18 =
	  new_cluster('from17_rekeyed', encryption_options('aes-256'));
	($ok, $out) = upgrade($old, $rekeyed18, '--swap');
	ok(!$ok, 'pgcipher 17 → 18 with new keys: --swap is refused');
	like(
		$out,
		qr/every block must be re-encrypted as it is copied: --swap cannot be used/,
		'and the refusal names --swap');
	($ok, $out) = upgrade($old, $rekeyed18, '--copy');
	ok($ok, 'pgcipher 17 → 18 with new keys in copy mode (re-key)')
	  or diag($out);
	check_upgraded('pgcipher 17 → 18 --copy re-key',
		$rekeyed18, $expected, $expected_dump, 1);

	my $same18 = new_cluster(
		'from17_same_keys',
		encryption_options('aes-256'),
		'--encryption-keys-from=' . $old->data_dir);
	($ok, $out) = upgrade($old, $same18, '--link');
	ok($ok, 'pgcipher 17 → 18 with the old relation key: --link')
	  or diag($out);
	like(
		$out,
		qr/both clusters have the same relation key: files are transferred as they are/,
		'the files move as they are');
	check_upgraded('pgcipher 17 → 18 --link',
		$same18, $expected, $expected_dump, 1);
}

done_testing();
