#!/usr/bin/env bash
# fetch-source.sh — fetch the pinned PostgreSQL 17 source from Debian trixie.
#
# The pins live here; scripts/fetch-debian-source.sh does the fetching (a
# private apt configuration inside the build directory, so the machine's
# apt setup is never edited; the mirror's pool when a point release has
# replaced the pinned version in trixie's index) and verifies the orig
# tarball's sha256; build.sh unpacks it.
#
# Usage: server/fetch-source.sh BUILD_DIR
set -euo pipefail

PG_SRC_PACKAGE=postgresql-17
PG_SRC_VERSION=17.11-0+deb13u1
PG_UPSTREAM_VERSION=17.11
PG_ORIG_SHA256=dd27f2b3c59e73ed14aa3324901242bf69a032a6347805f274e6260322d42979

build=${1:?usage: fetch-source.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../scripts/fetch-debian-source.sh" "$build" "$PG_SRC_PACKAGE" "$PG_SRC_VERSION" \
    "${PG_SRC_PACKAGE}_${PG_UPSTREAM_VERSION}.orig.tar.bz2" "$PG_ORIG_SHA256"
