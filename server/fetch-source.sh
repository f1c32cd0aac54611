#!/usr/bin/env bash
# fetch-source.sh — fetch the pinned PostgreSQL source of one major from
# Debian: 17 from trixie, 18 from sid (trixie has none).
#
# The pins live here, one block per major; scripts/fetch-debian-source.sh
# does the fetching (a private apt configuration inside the build directory,
# so the machine's apt setup is never edited; the mirror's pool when a point
# release has replaced the pinned version in the suite's index) and verifies
# the orig tarball's sha256; build.sh unpacks it.
#
# Usage: server/fetch-source.sh BUILD_DIR [MAJOR]
#          fetch and verify; the last line printed is the tarball's path
#        server/fetch-source.sh --pin MAJOR
#          print the pin: PACKAGE VERSION UPSTREAM_VERSION SHA256 SUITE
# MAJOR defaults to $PGCIPHER_PG, else 18.
set -euo pipefail

pin() {
    case $1 in
        17) echo postgresql-17 17.11-0+deb13u1 17.11 dd27f2b3c59e73ed14aa3324901242bf69a032a6347805f274e6260322d42979 trixie ;;
        18) echo postgresql-18 18.6-3 18.6 555610c24d53e4316da5b7d3fc25c279d96856d5e0e23ee308c328c5fa881d9f sid ;;
        *) echo "fetch-source: no pinned PostgreSQL source for major \"$1\" (17 or 18)" >&2; return 1 ;;
    esac
}

if [ "${1:-}" = --pin ]; then
    pin "${2:?usage: fetch-source.sh --pin MAJOR}"
    exit
fi
build=${1:?usage: fetch-source.sh BUILD_DIR [MAJOR]}
major=${2:-${PGCIPHER_PG:-18}}
read -r package version upstream sha256 suite < <(pin "$major") || exit 1
here=$(cd "$(dirname "$0")" && pwd)
file=${package}_${upstream}.orig.tar.bz2
"$here/../scripts/fetch-debian-source.sh" "$build" "$package" "$version" "$file" "$sha256" "$suite"
echo "$(cd "$build" && pwd)/source/$file"
