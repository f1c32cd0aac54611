# Copyright (c) 2026, pgcipher developers
#
# OnlineOps: what the TAP tests of the online operations on the data keys
# (014-018: a rotation, an encryption, a decryption; design 9.6, 9.7) do
# to a cluster half-way through one: a logical subscriber across the WAL
# switch, a point-in-time recovery to a restore point taken half-way, and
# pg_rewind of a node onto the standby promoted from it.
package OnlineOps;

use strict;
use warnings FATAL => 'all';
use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(logical_subscriber restore_point_halfway
  recover_to_halfway rewind_onto);

# A publication p of a table logged (id, side) on $publisher, and an
# unencrypted node $name subscribed to it, in sync; returns that node
sub logical_subscriber
{
	my ($publisher, $name) = @_;
	my $ddl = 'CREATE TABLE logged (id int PRIMARY KEY, side text)';
	$publisher->safe_psql('postgres',
		"$ddl; CREATE PUBLICATION p FOR TABLE logged");
	my $sub = PostgreSQL::Test::Cluster->new($name);
	$sub->init;
	$sub->start;
	$sub->safe_psql('postgres', $ddl);
	$sub->safe_psql('postgres',
			"CREATE SUBSCRIPTION s CONNECTION '"
		  . $publisher->connstr
		  . " dbname=postgres' PUBLICATION p");
	$sub->wait_for_subscription_sync($publisher, 's');
	return $sub;
}

# The restore point "halfway" on $node, its segment switched out to the
# archive; returns that segment's name
sub restore_point_halfway
{
	my ($node) = @_;
	my $wal = $node->safe_psql('postgres',
		"SELECT pg_walfile_name(pg_create_restore_point('halfway'))");
	$node->safe_psql('postgres', 'SELECT pg_switch_wal()');
	return $wal;
}

# A node $name restored from $node's backup $backup and its archive up to
# the restore point "halfway" (in segment $wal), promoted there; $conf:
# more postgresql.conf lines
sub recover_to_halfway
{
	my ($node, $backup, $name, $wal, $conf) = @_;
	$node->poll_query_until('postgres',
		"SELECT last_archived_wal >= '$wal' FROM pg_stat_archiver")
	  or die 'the archive did not catch up';
	my $pitr = PostgreSQL::Test::Cluster->new($name);
	$pitr->init_from_backup($node, $backup, has_restoring => 1);
	$pitr->append_conf(
		'postgresql.conf', qq(@{[ $conf // '' ]}
recovery_target_name = 'halfway'
recovery_target_action = 'promote'
));
	$pitr->start;
	$pitr->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
	  or die 'the point-in-time recovery did not end';
	return $pitr;
}

# pg_rewind of the stopped $target onto $source (a test named $label),
# then $target started as $source's standby.  pg_rewind copies the
# source's configuration: the target keeps its own.
sub rewind_onto
{
	my ($target, $source, $label) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $conf_file = $target->data_dir . '/postgresql.conf';
	my $conf = slurp_file($conf_file);
	command_ok(
		[
			'pg_rewind', '--target-pgdata',
			$target->data_dir, '--source-server',
			$source->connstr('postgres'), '--no-sync'
		],
		$label);
	open(my $fh, '>', $conf_file) or die $!;
	print $fh $conf;
	close $fh;
	$target->enable_streaming($source);
	$target->start;
	return;
}

1;
