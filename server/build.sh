#!/usr/bin/env bash
# build.sh — build pgcipher's PostgreSQL (17 or 18) into BUILD_DIR/install.
#
# Steps, each skipped when already up to date:
#   1. fetch the pinned source (fetch-source.sh) and unpack it to BUILD_DIR/postgresql;
#      the tree is unpacked afresh whenever the source or a patch changes;
#   2. apply server/patches/MAJOR/*.patch (small hook patches, one per concern);
#   3. overlay server/src/** into the tree as symbolic links, so editing one of
#      our files and running this again rebuilds incrementally;
#   4. configure with the options of Debian's own package of the major
#      (debian-options.sh: LLVM JIT, PL/Perl, PL/Python, PL/Tcl, uuid, XML,
#      PAM, LDAP, GSSAPI, systemd, ...), with ccache; make, make install.
#
# OpenSSL is the pinned one openssl.sh builds into BUILD_DIR/openssl/install,
# or, with PGCIPHER_OPENSSL_BUILD set (./pgcipher sets it: ./build), into
# that directory's, one build for both majors
# (Debian 12's has no VAES path for AES-XTS), linked with a run path so every
# binary and library of the install loads it; the stock build links the same
# one, so the benchmarks compare TDE and nothing else.
#
# With --stock, build the same source with the same compiler and flags but
# without our patches and files, into BUILD_DIR/stock/install: the baseline
# of the benchmarks.
#
# Usage: server/build.sh BUILD_DIR [--stock]
# The major is $PGCIPHER_PG (default 18); a build directory holds one major
# (an install tree made for another is removed first).
set -euo pipefail
# Install trees (and the directories above them) usable by every OS user,
# whatever the caller's umask: a server may run as another user than the
# one who built it
umask 022

here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: build.sh BUILD_DIR [--stock]}
stock=${2:-}
mkdir -p "$build"
build=$(cd "$build" && pwd -P)	# physical: run paths and /proc/PID/maps agree
chmod go+rx "$build"	# made earlier under another umask, perhaps
src_build=$build
if [ "$stock" = --stock ]; then
    build=$build/stock
    mkdir -p "$build"
    chmod go+rx "$build"
fi
tree=$build/postgresql
prefix=$build/install
jobs=${JOBS:-$(nproc)}

major=${PGCIPHER_PG:-18}
# its last line: the pinned tarball (build/source may hold other versions)
orig=$("$here/fetch-source.sh" "$src_build" "$major" | tail -n 1)
openssl=$("$here/openssl.sh" "$src_build" | tail -n 1)	# its last line: where it installed
patches=$here/patches/$major
[ -d "$patches" ] || { echo "build: no patch series for PostgreSQL $major ($patches)" >&2; exit 1; }
if [ -f "$prefix/.pgcipher-major" ] && [ "$(cat "$prefix/.pgcipher-major")" != "$major" ]; then
    echo "build: $prefix holds PostgreSQL $(cat "$prefix/.pgcipher-major"); removing it for $major"
    rm -rf "$prefix" "$tree"
fi
[ "$stock" = --stock ] && patches=/nonexistent

# 1+2: unpack and patch when the tarball or any patch changed.
tree_stamp=$( (sha256sum "$orig" | cut -d' ' -f1; { find "$patches" -name '*.patch' 2>/dev/null || true; } | sort | xargs -r cat) | sha256sum | cut -d' ' -f1)
if [ "$(cat "$tree/.pgcipher-tree" 2>/dev/null)" != "$tree_stamp" ]; then
    echo "build: unpacking $(basename "$orig") and applying $(find "$patches" -maxdepth 1 -name '*.patch' 2>/dev/null | wc -l) patches"
    rm -rf "$tree" "$tree.tmp"
    mkdir -p "$tree.tmp"
    tar -xjf "$orig" -C "$tree.tmp" --strip-components=1
    for p in "$patches"/*.patch; do
        [ -e "$p" ] || continue
        patch -d "$tree.tmp" -p1 --quiet --forward --no-backup-if-mismatch < "$p" \
            || { echo "build: patch $(basename "$p") does not apply" >&2; exit 1; }
    done
    echo "$tree_stamp" > "$tree.tmp/.pgcipher-tree"
    mv "$tree.tmp" "$tree"
fi

# 3: overlay our own files (symbolic links keep rebuilds incremental).
[ "$stock" = --stock ] || (cd "$here/src" && find . -type f) | while read -r f; do
    dst=$tree/${f#./}
    mkdir -p "$(dirname "$dst")"
    if [ "$(readlink "$dst" 2>/dev/null)" != "$here/src/${f#./}" ]; then
        [ -e "$dst" ] && [ ! -L "$dst" ] && { echo "build: overlay would replace upstream file ${f#./}; use a patch" >&2; exit 1; }
        ln -sfn "$here/src/${f#./}" "$dst"
    fi
done

# 4: configure once per set of options, then make.
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
# The compiler configure records is a plain "gcc": pg_config --cc and
# PGXS's Makefile.global hand it to every extension built against this
# tree, and some (Citus's configure) take CC as one word.  ccache stays in
# our own builds through its masquerade directory (Debian's ccache package:
# /usr/lib/ccache/gcc -> ccache) first in PATH.
if command -v ccache >/dev/null && [ -x /usr/lib/ccache/gcc ]; then
    export PATH=/usr/lib/ccache:$PATH
fi
# Debian's own options and compiler flags (server/debian-options.sh): the
# benchmarks measure what a package runs
# shellcheck source=server/debian-options.sh
. "$here/debian-options.sh"
dev_configure "$major" "$prefix" "$openssl"
config_stamp=$(echo "${build_config[*]} $(cat "$openssl/.pgcipher-openssl")" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$tree/.pgcipher-config" 2>/dev/null)" != "$config_stamp" ]; then
    echo "build: configure ${build_config[*]}"
    # objects built under other options (another OpenSSL's headers) go
    if [ -f "$tree/GNUmakefile" ]; then make -C "$tree" -s distclean > /dev/null 2>&1 || true; fi
    (cd "$tree" && ./configure "${build_config[@]}" > "$build/configure.log" 2>&1) \
        || { tail -30 "$build/configure.log" >&2; echo "build: configure failed, see $build/configure.log" >&2; exit 1; }
    echo "$config_stamp" > "$tree/.pgcipher-config"
fi

# Paths relative to the directory above the tree and OpenSSL's: the stock
# build (BUILD_DIR/stock) compiles with the same command lines as ours, and
# every object that no patched header reaches comes from the cache; another
# checkout's build of the same source takes them in direct mode
ccache_direct "$tree" "$openssl"
echo "build: make -j$jobs (log: $build/make.log)"
if ! (cd "$tree" && make -j"$jobs" -s > "$build/make.log" 2>&1 \
      && make -C contrib -j"$jobs" -s >> "$build/make.log" 2>&1 \
      && make -s install >> "$build/make.log" 2>&1 \
      && make -C contrib -s install >> "$build/make.log" 2>&1); then
    grep -E 'error|Error' "$build/make.log" | head -40 >&2
    echo "build: make failed, see $build/make.log" >&2
    exit 1
fi
echo "$major" > "$prefix/.pgcipher-major"
echo "build: installed PostgreSQL $major into $prefix"
