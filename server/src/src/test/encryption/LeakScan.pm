# Copyright (c) 2026, pgcipher developers
#
# LeakScan: find marker byte strings in every file under some directories.
# The TAP tests of src/test/encryption use it to prove that no plaintext
# reaches disk (and, on an unencrypted control cluster, that it would have
# been found).
package LeakScan;

use strict;
use warnings FATAL => 'all';
use Cwd qw(realpath);
use Digest::SHA;
use File::Find;
use Exporter 'import';
use Test::More;
use PostgreSQL::Test::Utils;

our @EXPORT =
  qw(scan_for_markers markers_nowhere scan_at_rest encryption_options
  file_digests changed_files page_key_marks);

# $markers: [ { name => ..., bytes => ... }, ... ]; returns
# { name => [ files holding it ] }.  Files may vanish while we look.
sub scan_for_markers
{
	my ($markers, @dirs) = @_;
	my %found;
	find(
		{
			no_chdir => 1,
			wanted => sub {
				return if -d $_ || !-f $_;
				open(my $fh, '<:raw', $_) or return;
				local $/;
				my $content = <$fh>;
				close $fh;
				return unless defined $content;
				foreach my $m (@$markers)
				{
					push @{ $found{ $m->{name} } },
					  realpath($File::Find::name)
					  if index($content, $m->{bytes}) >= 0;
				}
			}
		},
		grep { -e $_ } @dirs);
	return \%found;
}

# One test per marker: found in no file of the scan $found.  $what names the
# scan in the test names ("aes-256 after CHECKPOINT").
sub markers_nowhere
{
	my ($found, $markers, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	foreach my $m (@$markers)
	{
		is_deeply($found->{ $m->{name} } // [],
			[], "$what: $m->{name} marker nowhere in the data directory");
	}
}

# The scan at rest of a node whose markers were written and checkpointed
# (or of every node of a cluster: $node an array of them), now, then again
# after a clean shutdown (which stops them).  Encrypted, no marker
# anywhere; unencrypted (the control), $control->($found, $what) runs the
# test's own checks that the markers were found, so the scan can fail.
sub scan_at_rest
{
	my ($node, $markers, $label, $encrypted, $control) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my @nodes = ref($node) eq 'ARRAY' ? @$node : ($node);
	for my $when ('after CHECKPOINT', 'after shutdown')
	{
		if ($when eq 'after shutdown') { $_->stop for @nodes; }
		my $found = scan_for_markers($markers, map { $_->data_dir } @nodes);
		if ($encrypted)
		{
			markers_nowhere($found, $markers, "$label $when");
		}
		else
		{
			$control->($found, "$label $when");
		}
	}
}

# initdb's options for a cluster encrypted with $cipher ("aes-256"), its key
# command printing a key from a file of this test run: one key for every
# cluster, or with $key_name a key of that name (a node with a key of its
# own)
my %keyfiles;

sub encryption_options
{
	my ($cipher, $key_name) = @_;
	$key_name //= 'kek';
	if (!defined $keyfiles{$key_name})
	{
		$keyfiles{$key_name} =
		  PostgreSQL::Test::Utils::tempdir() . "/$key_name";
		PostgreSQL::Test::Utils::append_to_file($keyfiles{$key_name},
			join('', map { sprintf('%02x', int(rand(256))) } 1 .. 32) . "\n");
	}
	return ("--encryption=$cipher",
		"--encryption-key-command=cat $keyfiles{$key_name}");
}

# sha256 of every file under a directory, by path relative to it, but the
# ones whose path matches $skip (a regex), if given: a test that something
# changed nothing compares two of these
sub file_digests
{
	my ($dir, $skip) = @_;
	my %sums;
	find(
		{
			no_chdir => 1,
			wanted => sub {
				return unless -f $_;
				my $rel = substr($File::Find::name, length($dir) + 1);
				return if $skip && $rel =~ $skip;
				$sums{$rel} = Digest::SHA->new(256)->addfile($_)->hexdigest;
			}
		},
		$dir);
	return \%sums;
}

# The files whose digest differs between two file_digests(), or that are in
# one only, sorted
sub changed_files
{
	my ($before, $after) = @_;
	my %all = (%$before, %$after);
	my @changed =
	  grep { ($before->{$_} // '') ne ($after->{$_} // '') } sort keys %all;
	return @changed;
}


# Every non-zero page of every relation fork of $datadir (tablespaces
# included), by the key slot its clear mark names (design 4.2):
# { A => pages, B => pages, clear => pages }
sub page_key_marks
{
	my ($datadir) = @_;
	my %count = (A => 0, B => 0, clear => 0);
	find(
		{
			no_chdir => 1,
			wanted => sub {
				return unless -f $_ && m{/\d+(_(fsm|vm|init))?(\.\d+)?$};
				return
				  if
				  m{/pg_(wal|xact|multixact|subtrans|commit_ts|serial|notify|replslot|logical)/};
				open(my $fh, '<:raw', $_) or return;
				while (read($fh, my $page, 8192) == 8192)
				{
					next if $page !~ /[^\0]/;
					my $flags = unpack('S', substr($page, 10, 2));
					$count{
						 !($flags & 0x8000) ? 'clear'
						: ($flags & 0x4000) ? 'B'
						:                     'A'
					}++;
				}
				close $fh;
			}
		},
		(map { "$datadir/$_" } qw(base global)),
		map { readlink($_) // $_ } glob("$datadir/pg_tblspc/*"));
	return \%count;
}

1;
