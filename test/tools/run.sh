#!/usr/bin/env bash
# run.sh — backup tools that no one here wrote, on encrypted clusters.
#
#   run.sh pgbackrest   build pgBackRest 2.59.1 and run t/pgbackrest.pl:
#                       on an aes-256 cluster with data checksums, with
#                       archive-async, archive-header-check and checksum-page
#                       on: stanza-create, check, full, differential and
#                       incremental backups, verify, a restore of the latest
#                       and a point-in-time recovery to a restore point, each
#                       check shown live (async push and get, a foreign WAL
#                       header refused, a corrupted page reported), and a
#                       scan of the repository and the spool for markers
#                       (absent; found with an unencrypted control)
#   run.sh barman       run t/barman.pl with Debian's barman (scripts/deps.sh
#                       installs it): pg_receivewal alone, then Barman with
#                       backup_method = postgres and streaming_archiver = on
#                       (its path_prefix at our bin/), on an aes-256 cluster
#                       with data checksums: check, switch-wal, backup,
#                       recover of the latest and to a restore point, and a
#                       scan of barman_home and pg_receivewal's directory for
#                       markers (absent; found with an unencrypted control)
#
# pgBackRest is in no registry this machine reaches in a version that knows
# PostgreSQL 17 (Debian bookworm's 2.45 predates it), so its source comes
# from ../shared/vendor beside the checkout where that is there, else from
# upstream's archive of tag release/2.59.1
# (https://github.com/pgbackrest/pgbackrest), downloaded into
# $PGCIPHER_BUILD/source; either is checked against the tree hash pinned in
# scripts/vendor.tsv.  Where neither can be had, the suite says so and
# skips.  It is built with meson into $PGCIPHER_BUILD/tools; nothing is
# written into the checkout.
#
# Usage: test/tools/run.sh pgbackrest|barman   (PGCIPHER_TOP, PGCIPHER_BUILD as for
#                                               scripts/test.sh)
set -euo pipefail
umask 022

PGBACKREST_VERSION=2.59.1	# scripts/vendor.tsv pins its source

top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}
here=$top/test/tools
prefix=$build/install
tools=$build/tools
[ -x "$prefix/bin/pg_config" ] || { echo "tools: $prefix missing: run scripts/build.sh first" >&2; exit 1; }
export PATH=$prefix/bin:$PATH

build_pgbackrest() {
    local tarball src=$tools/pgbackrest-$PGBACKREST_VERSION
    tarball=$(vendored tools pgbackrest) || return
    if [ ! -x "$src/build/src/pgbackrest" ]; then
        echo "tools: building pgBackRest $PGBACKREST_VERSION (meson, about half a minute)"
        rm -rf "$src"; mkdir -p "$src"
        tar -xzf "$tarball" -C "$src" --strip-components=1 --no-same-owner
        (cd "$src" && meson setup build --buildtype=release -Dlibssh2=disabled -Dlibsystemd=disabled \
            > "$tools/pgbackrest-meson.log" 2>&1 && ninja -C build > "$tools/pgbackrest-ninja.log" 2>&1) \
            || { tail -30 "$tools"/pgbackrest-*.log >&2; return 1; }
    fi
    PGBACKREST=$src/build/src/pgbackrest
    "$PGBACKREST" version
}

# shellcheck source=test/prove_tap.sh
. "$top/test/prove_tap.sh"
# shellcheck source=test/third_party.sh
. "$top/test/third_party.sh"

case ${1:-} in
    pgbackrest)
        rc=0; build_pgbackrest || rc=$?
        [ $rc = 2 ] && exit 0
        [ $rc = 0 ] || exit $rc
        PGCIPHER_PGBACKREST=$PGBACKREST prove_tap "$tools/tap/pgbackrest" "$here/t/pgbackrest.pl" ;;
    barman)
        barman=$(command -v barman) || { echo "tools: barman missing: run 'sudo ./pgcipher deps'" >&2; exit 1; }
        "$barman" --version
        PGCIPHER_BARMAN=$barman PGCIPHER_BINDIR=$prefix/bin prove_tap "$tools/tap/barman" "$here/t/barman.pl" ;;
    *) echo "usage: run.sh pgbackrest|barman" >&2; exit 1 ;;
esac
