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
use File::Find;
use Exporter 'import';
use Test::More;

our @EXPORT = qw(scan_for_markers markers_nowhere);

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
					push @{ $found{ $m->{name} } }, realpath($File::Find::name)
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
		is_deeply($found->{ $m->{name} } // [], [],
			"$what: $m->{name} marker nowhere in the data directory");
	}
}

1;
