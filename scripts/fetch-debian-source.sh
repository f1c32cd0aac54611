#!/usr/bin/env bash
# fetch-debian-source.sh — fetch one file of a pinned Debian source package
# (from trixie, or the suite named): its orig tarball, or its debian.tar.xz,
# into BUILD_DIR/source, and verify its sha256.
#
# Uses a private apt configuration inside the build directory (its own
# sources.list, lists and cache: BUILD_DIR/apt), so the machine's apt setup
# is never edited.  The mirror is the one this machine's apt already uses for
# Debian; only the suite (trixie unless SUITE names another, e.g. sid for
# postgresql-18) and the type (deb-src) differ.
# When a newer upload replaces the pinned version in the suite's index while
# the mirror's pool still serves the pinned files, the file is
# fetched from the pool by name; the pinned sha256 stands in for the .dsc's
# signature.  Nothing is downloaded when the tarball is already there and
# verifies.
#
# Used by server/fetch-source.sh (PostgreSQL) and test/extensions/build.sh
# (pgvector, TimescaleDB), which hold the pins.
#
# Usage: scripts/fetch-debian-source.sh BUILD_DIR PACKAGE VERSION FILE SHA256 [SUITE]
#   e.g. ... build postgresql-17 17.11-0+deb13u1 postgresql-17_17.11.orig.tar.bz2 dd27f2b3...
set -euo pipefail

usage="usage: fetch-debian-source.sh BUILD_DIR PACKAGE VERSION FILE SHA256 [SUITE]"
build=${1:?$usage}
package=${2:?$usage}
version=${3:?$usage}
orig_file=${4:?$usage}
sha256=${5:?$usage}
suite=${6:-trixie}
mkdir -p "$build"
build=$(cd "$build" && pwd)
# one private apt directory per suite: each has its own index
apt_dir=$build/apt
[ "$suite" = trixie ] || apt_dir=$build/apt-$suite
src_dir=$build/source
orig=$src_dir/$orig_file

die() { echo "fetch-source: $*" >&2; exit 1; }

# The private apt configuration: the suite's deb-src index only
set_up_private_apt() {
    local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    [ -f "$keyring" ] || die "$keyring is missing (apt-get install debian-archive-keyring)"
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/sources.list.d"
    echo "deb-src [signed-by=$keyring] $mirror $suite main" > "$apt_dir/sources.list"
    apt_opts=(-o Dir::Etc::SourceList="$apt_dir/sources.list"
              -o Dir::Etc::SourceParts="$apt_dir/sources.list.d"
              -o Dir::State::Lists="$apt_dir/lists"
              -o Dir::Cache="$apt_dir/cache"
              -o Dir::Cache::Archives="$apt_dir/cache/archives"
              -o Acquire::Languages=none
              -o APT::Sandbox::User=root)
}

# The version the suite's index names for the package now (the index is
# refreshed when older than a day; empty when it cannot be read)
indexed_version() {
    if [ -z "$(find "$apt_dir/lists" -maxdepth 1 -name '*_Sources*' -mmin -1440 2>/dev/null)" ]; then
        apt-get "${apt_opts[@]}" -qq update 2>/dev/null || true
    fi
    apt-cache "${apt_opts[@]}" showsrc "$package" 2>/dev/null \
        | awk -v p="$package" '$1 == "Package:" { hit = ($2 == p) } hit && $1 == "Version:" { print $2 }' \
        | sort -V | tail -n 1
}

verify() {
    echo "$sha256  $1" | sha256sum --quiet -c - 2>/dev/null
}

# The package's directory in the mirror's pool (lib* packages under "libX")
pool_dir() {
    local prefix=${package:0:1}
    case $package in lib?*) prefix=${package:0:4} ;; esac
    echo "${mirror%/}/pool/main/$prefix/$package"
}

# the mirror this machine's apt already uses for Debian
mirror=$("$(dirname "$0")/debian-mirror.sh") || die "no Debian mirror found in this machine's apt configuration"
set_up_private_apt

if [ ! -f "$orig" ] || ! verify "$orig"; then
    mkdir -p "$src_dir"
    echo "fetch-source: fetching $package=$version ($suite) with a private apt configuration"
    apt-get "${apt_opts[@]}" -qq update || die "apt-get update of the private $suite deb-src list failed"
    if ! (cd "$src_dir" && apt-get "${apt_opts[@]}" -qq --download-only source "$package=$version"); then
        # A newer upload (a point release) replaces the version in the suite's
        # index while the mirror's pool still serves the pinned files for a
        # while: fetch the file from the pool by name; the pinned
        # sha256 stands in for the .dsc's signature.
        pool=$(pool_dir)
        echo "fetch-source: $version is no longer in $suite's index; fetching the pinned tarball from $pool"
        curl -fsSL --retry 3 -o "$orig" "$pool/$orig_file" \
            || die "could not download source package $package=$version (is it still in $suite?)"
    fi
    [ -f "$orig" ] || die "download finished but $orig is missing"
    verify "$orig" || die "sha256 mismatch for $orig (expected $sha256)"
fi

echo "fetch-source: $orig verified (sha256 $sha256)"

# A newer upload in the suite is a point release (for PostgreSQL, a minor
# release with security fixes): say so plainly, and whether its files can
# be had yet (README.md, "Security releases")
newest=$(indexed_version)
if [ -n "$newest" ] && dpkg --compare-versions "$newest" gt "$version"; then
    newest_dsc=$(pool_dir)/${package}_${newest#*:}.dsc
    if curl -fsI --retry 2 -o /dev/null "$newest_dsc" 2>/dev/null; then
        served="this machine's mirror serves its files: rebase now (server/README.md)"
    else
        served="this machine's mirror does not serve its files yet ($newest_dsc)"
    fi
    echo "fetch-source: WARNING: Debian $suite's index names $package $newest, newer than the pinned $version:" >&2
    echo "fetch-source: WARNING: this build lacks the fixes of that release; $served" >&2
fi
