# Copyright (c) 2026, pgcipher developers
#
# Temporary files against a model: test_tempcrypt makes thousands of random
# writes, reads, truncations and (for files in a file set) re-opens of one
# temporary file and checks every read and size against a copy in memory,
# reaching each edge of tempcrypt.c's units (block-sized XTS units, a short
# last unit, a remainder under 16 bytes joined to the unit before, the
# 32-byte form of files under 16 bytes, holes, writes that cover units in
# part).  The same runs without encryption check the model itself, and the
# bytes on disk tell the two apart: the plain files hold the data, the
# encrypted ones never do.  The same model runs on an extension's scratch
# file, mostly appended to in rows, whose last unit tempcrypt.c holds back
# in memory (write-behind): the encrypted file on disk is seen shorter than
# its size, and everything reads back after re-opens.  A write far larger
# than a block grows the cipher's shared buffer, which the next small write
# gives back.
#
# Then an extension's scratch file, as Citus writes its intermediate
# results under base/pgsql_job_cache (tempcrypt.c encrypts them as
# temporary files): written in chunks of several sizes with O_APPEND and
# O_TRUNC, read back by another spelling of its path and as a stdio stream
# (as COPY FROM reads it); a marker in it is nowhere on an encrypted
# cluster's disk and found on the plain one; O_APPEND alone is refused
# when encrypted.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib "$FindBin::RealBin/..";
use LeakScan;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $keyfile = PostgreSQL::Test::Utils::tempdir() . '/kek';
PostgreSQL::Test::Utils::append_to_file($keyfile, ('a5' x 32) . "\n");

for my $encrypted (0, 1)
{
	my $label = $encrypted ? 'encrypted' : 'plain';
	my $node = PostgreSQL::Test::Cluster->new("node_$label");
	$node->init(
		extra => $encrypted
		? [ '--encryption=aes-256', "--encryption-key-command=cat $keyfile" ]
		: []);
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION test_tempcrypt');

	# (seed, operations, largest size): files of a few blocks, and of a few
	# bytes, where the short forms and joined remainders come up most
	my ($short, $joined, $held) = (0, 0, 0);
	for my $run (
		[ 1, 3000, 65536 ],
		[ 2, 3000, 200000 ],
		[ 3, 4000, 40 ],
		[ 4, 3000, 9000 ])
	{
		my ($seed, $nops, $max) = @$run;
		for my $kind ('private', 'shared', 'scratch')
		{
			my ($ret, $out, $err) = $node->psql('postgres',
				"SELECT test_tempcrypt_random($seed, $nops, $max, '$kind')");
			is($err, '',
				"$label, seed $seed, max $max, $kind: every read and size as the model says"
			);
			my ($size) = $out =~ /final size (\d+)/;
			$short  += $1 if $out =~ /(\d+) times under 16 bytes/;
			$joined += $1 if $out =~ /(\d+) with a remainder under 16 bytes/;
			$held   += $1 if $out =~ /(\d+) times held back/;
			if (defined $size && $size >= 16)
			{
				like(
					$out,
					$encrypted
					? qr/disk differs from the data/
					: qr/disk equals the data/,
					"$label, seed $seed, $kind: the file on disk "
					  . ($encrypted ? 'is not the data' : 'is the data')
					  . " ($out)");
			}
		}
	}
	cmp_ok($short, '>', 0,
		"$label: files under 16 bytes came up ($short times)");
	cmp_ok($joined, '>', 0,
		"$label: remainders under 16 bytes past a block came up ($joined times)"
	);
	if ($encrypted)
	{
		cmp_ok($held, '>', 0,
			"$label: appends to scratch files were held back ($held times)");
	}
	else
	{
		is($held, 0, "$label: nothing is held back without encryption");
	}

	# the shared buffer: 8 MB written off a block boundary, then 100 bytes
	my @kept = split /\n/,
	  $node->safe_psql(
		'postgres',
		join(';',
			map { "SELECT test_tempcrypt_buffer($_)" } 100, 8_000_000,
			100));
	if ($encrypted)
	{
		cmp_ok($kept[1] - $kept[0],
			'>=', 7_000_000,
			"$label: a write of 8 MB grows the shared buffer");
	}
	else
	{
		cmp_ok($kept[1] - $kept[0],
			'<', 1_000_000,
			"$label: a write of 8 MB keeps no buffer without encryption");
	}
	cmp_ok($kept[2] - $kept[0], '<', 1_000_000,
			"$label: the next small write gives the large buffer back ("
		  . join(', ', @kept)
		  . ")");

	# scratch files of an extension (Citus's job cache)
	my $marker = sprintf('PGCX_scratch_%08x', int(rand(0xffffffff)));
	my $data = join('', map { "$marker row $_\n" } 1 .. 2500);
	for my $chunk (7, 100, 8192, 100000)
	{
		my ($ret, $out, $err) = $node->psql('postgres',
			"SELECT test_tempcrypt_scratch('chunks$chunk', '$data', $chunk)");
		is($err, '',
			"$label: scratch file in chunks of $chunk bytes reads back whole, by either name and as a stream"
		);
		like(
			$out,
			$encrypted ? qr/disk differs from the data/
			: qr/disk equals the data/,
			"$label: scratch file in chunks of $chunk: "
			  . (
				$encrypted ? 'the disk holds no data'
				: 'the disk holds the data'));
	}
	is( $node->safe_psql(
			'postgres',
			"SELECT test_tempcrypt_scratch('tiny', 'PGCX12', 2) ~ '^6 bytes'"
		),
		't',
		"$label: a scratch file under 16 bytes reads back whole");
	my $found = scan_for_markers(
		[ { name => 'scratch', bytes => $marker } ],
		$node->data_dir . '/base/pgsql_job_cache');
	if ($encrypted)
	{
		markers_nowhere($found, [ { name => 'scratch' } ],
			"$label job cache");
	}
	else
	{
		is(scalar(@{ $found->{scratch} // [] }),
			4, "$label: the marker is in each scratch file (the control)");
	}
	# COPY TO and FROM a scratch file (a write stream, flushed in stdio's
	# chunks; the path spelled with "//", the same file)
	my $jc = $node->data_dir . '/base//pgsql_job_cache';
	$node->safe_psql(
		'postgres', qq{
		COPY (SELECT '$marker copied ' || g FROM generate_series(1, 3001) g) TO '$jc//copied.txt';
		CREATE TABLE copied_back (t text);
		COPY copied_back FROM '$jc/copied.txt';
	});
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*), max(t) FROM copied_back WHERE t LIKE '$marker copied %'"
		),
		"3001|$marker copied 999",
		"$label: COPY TO a scratch file and back");
	# 8197 bytes: the last 5 join the unit before, which the write reads back
	$node->safe_psql(
		'postgres', qq{
		COPY (SELECT rpad('$marker copied long', 8196, 'y')) TO '$jc/long.txt';
		COPY copied_back FROM '$jc/long.txt';
	});
	is( $node->safe_psql(
			'postgres',
			"SELECT length(t) FROM copied_back WHERE t LIKE '$marker copied long%'"
		),
		'8196',
		"$label: a COPY TO ending 5 bytes into a unit and back");
	$found = scan_for_markers(
		[ { name => 'copied', bytes => "$marker copied" } ],
		$node->data_dir . '/base/pgsql_job_cache');
	is( scalar(@{ $found->{copied} // [] }),
		$encrypted ? 0 : 2,
		"$label: the marker of the COPY is "
		  . ($encrypted ? 'not on disk' : 'on disk (the control)'));

	my ($ret, $out, $err) = $node->psql('postgres',
		"SELECT test_tempcrypt_scratch('appended', 'more data here', 4, true)"
	);
	if ($encrypted)
	{
		like(
			$err,
			qr/cannot append to encrypted scratch file "base\/pgsql_job_cache\/appended" with O_APPEND/,
			"$label: O_APPEND without O_TRUNC on a scratch file is refused");
	}
	else
	{
		is($err, '', "$label: O_APPEND without O_TRUNC is a plain append");
	}
	$node->stop;
}

done_testing();
