#!/usr/bin/env bash
# fetch-source.sh — fetch the pinned PostgreSQL 17 source from Debian trixie.
#
# Uses a private apt configuration inside the build directory (its own
# sources.list, lists and cache), so the machine's apt setup is never
# edited.  The mirror is the one this machine's apt already uses for
# Debian; only the suite (trixie) and the type (deb-src) differ.
# Verifies the orig tarball's sha256; build.sh unpacks it.
#
# Usage: server/fetch-source.sh BUILD_DIR
set -euo pipefail

PG_SRC_PACKAGE=postgresql-17
PG_SRC_VERSION=17.11-0+deb13u1
PG_UPSTREAM_VERSION=17.11
PG_ORIG_SHA256=dd27f2b3c59e73ed14aa3324901242bf69a032a6347805f274e6260322d42979

build=${1:?usage: fetch-source.sh BUILD_DIR}
mkdir -p "$build"
build=$(cd "$build" && pwd)
apt_dir=$build/apt
src_dir=$build/source
orig=$src_dir/${PG_SRC_PACKAGE}_${PG_UPSTREAM_VERSION}.orig.tar.bz2

die() { echo "fetch-source: $*" >&2; exit 1; }

verify() {
    echo "$PG_ORIG_SHA256  $1" | sha256sum --quiet -c - 2>/dev/null
}

if [ ! -f "$orig" ] || ! verify "$orig"; then
    # Find the Debian mirror this machine already uses (deb822 or one-line format).
    mirror=$( { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}';
                grep -hsE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}'; } \
              | grep -E '/debian/?$' | head -n 1) || true
    [ -n "$mirror" ] || die "no Debian mirror found in this machine's apt configuration"
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    [ -f "$keyring" ] || die "$keyring is missing (apt-get install debian-archive-keyring)"

    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$src_dir"
    echo "deb-src [signed-by=$keyring] $mirror trixie main" > "$apt_dir/sources.list"
    : > "$apt_dir/empty.d.placeholder"
    mkdir -p "$apt_dir/sources.list.d"
    apt_opts=(-o Dir::Etc::SourceList="$apt_dir/sources.list"
              -o Dir::Etc::SourceParts="$apt_dir/sources.list.d"
              -o Dir::State::Lists="$apt_dir/lists"
              -o Dir::Cache="$apt_dir/cache"
              -o Dir::Cache::Archives="$apt_dir/cache/archives"
              -o Acquire::Languages=none
              -o APT::Sandbox::User=root)
    echo "fetch-source: fetching $PG_SRC_PACKAGE=$PG_SRC_VERSION (trixie) with a private apt configuration"
    apt-get "${apt_opts[@]}" -qq update || die "apt-get update of the private trixie deb-src list failed"
    if ! (cd "$src_dir" && apt-get "${apt_opts[@]}" -qq --download-only source "$PG_SRC_PACKAGE=$PG_SRC_VERSION"); then
        # A point release replaces the version in trixie's index while the
        # mirror's pool still serves the pinned files for a while: fetch the
        # upstream tarball from the pool by name; the pinned sha256 below
        # stands in for the .dsc's signature.
        pool=${mirror%/}/pool/main/${PG_SRC_PACKAGE:0:1}/$PG_SRC_PACKAGE
        echo "fetch-source: $PG_SRC_VERSION is no longer in trixie's index; fetching the pinned tarball from $pool"
        curl -fsSL --retry 3 -o "$orig" "$pool/$(basename "$orig")" \
            || die "could not download source package $PG_SRC_PACKAGE=$PG_SRC_VERSION (is it still in trixie?)"
    fi
    [ -f "$orig" ] || die "download finished but $orig is missing"
    verify "$orig" || die "sha256 mismatch for $orig (expected $PG_ORIG_SHA256)"
fi

echo "fetch-source: $orig verified (sha256 $PG_ORIG_SHA256)"
