#!/usr/bin/env bash
# run.sh — Citus, the distributed engine, built unchanged against pgcipher
# and run on encrypted nodes (issue 27).
#
#   run.sh build   configure and build Citus 14.0.1 as a PGXS extension
#                  against $PGCIPHER_BUILD/install, with the compiler
#                  pg_config reports (no CC override: server/build.sh keeps
#                  it a plain gcc, and Citus's configure takes CC as one
#                  word), and install it there
#   run.sh smoke   the build, then t/citus_smoke.pl: an aes-256 coordinator
#                  that holds its own shards, a distributed and a reference
#                  table, a multi-shard query and a 2PC transaction, and a
#                  scan of the data directory for markers (none; found on an
#                  unencrypted control)
#
# Citus is in no registry this machine reaches, so its source comes from
# ../shared/vendor beside the checkout, pinned by the sha256 below.  A clone
# without ../shared says so and skips.  The same file is upstream's tag
# v14.0.1 (https://github.com/citusdata/citus): "git archive
# --format=tar.gz --prefix=citus-14.0.1/ v14.0.1"; put it at
# ../shared/vendor/citus-14.0.1.tar.gz, or point PGCIPHER_VENDOR at its
# directory.  Built in $PGCIPHER_BUILD/citus; nothing is written into the
# checkout.
#
# Usage: test/citus/run.sh build|smoke   (PGCIPHER_TOP, PGCIPHER_BUILD as
#                                         for scripts/test.sh)
set -euo pipefail
umask 022

CITUS_VERSION=14.0.1
CITUS_TARBALL=citus-$CITUS_VERSION.tar.gz
CITUS_SHA256=acfa9a77cd84a8e1edab26cca4a71355f39c910c01586da89560e0240d4b05ba

top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}
here=$top/test/citus
prefix=$build/install
jobs=${JOBS:-$(nproc)}
[ -x "$prefix/bin/pg_config" ] || { echo "citus: $prefix missing: run scripts/build.sh first" >&2; exit 1; }
export PATH=$prefix/bin:$PATH
# shellcheck source=test/third_party.sh
. "$top/test/third_party.sh"
use_ccache "$build"

build_citus() {
    local tarball src=$build/citus/citus-$CITUS_VERSION stamp
    tarball=$(vendored citus "$CITUS_TARBALL" "$CITUS_SHA256" \
        "make it from Citus's tag v$CITUS_VERSION with git archive (see test/citus/run.sh)") || return
    # built again when the server's install tree changed under it
    stamp=$(cat "$prefix/.pgcipher-major" "$prefix/bin/pg_config" | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$src/.pgcipher-citus" 2>/dev/null)" != "$stamp" ]; then
        echo "citus: building Citus $CITUS_VERSION against $prefix (pg_config --cc: $(pg_config --cc))"
        rm -rf "$build/citus"; mkdir -p "$build/citus"
        tar -xzf "$tarball" -C "$build/citus" --no-same-owner
        # no libcurl: it serves only Citus's telemetry, off here
        (cd "$src" && ./configure PG_CONFIG="$prefix/bin/pg_config" --without-libcurl \
            > "$build/citus/configure.log" 2>&1) \
            || { tail -30 "$build/citus/configure.log" >&2; echo "citus: configure failed" >&2; return 1; }
        make -C "$src" -s -j"$jobs" > "$build/citus/make.log" 2>&1 \
            || { grep -E 'error|Error' "$build/citus/make.log" | head -30 >&2; return 1; }
        echo "$stamp" > "$src/.pgcipher-citus"
    fi
    make -C "$src" -s install > "$build/citus/install.log" 2>&1 \
        || { tail -20 "$build/citus/install.log" >&2; return 1; }
    echo "citus: Citus $CITUS_VERSION installed into $prefix"
}

# shellcheck source=test/prove_tap.sh
. "$top/test/prove_tap.sh"

rc=0
case ${1:-} in
    build) build_citus || rc=$? ;;
    smoke)
        build_citus || rc=$?
        [ $rc = 0 ] && { prove_tap "$build/citus/tap/smoke" "$here/t/citus_smoke.pl" || rc=$?; } ;;
    *) echo "usage: run.sh build|smoke" >&2; exit 1 ;;
esac
# a skip (2) ends the suite with success, its reason printed
[ $rc = 2 ] && exit 0
exit $rc
