#!/usr/bin/env bash
# openssl.sh — build the pinned OpenSSL that pgcipher's server links, into
# BUILD_DIR/openssl/install (lib/, include/, bin/openssl).
#
# Why not Debian 12's OpenSSL 3.0: its AES-XTS has no VAES/AVX-512 path, and
# the page cipher runs at half of what this class of CPU can do (design
# section 4, "Which OpenSSL").
# OpenSSL 3.5 has one: Debian trixie's source package, pinned and
# sha256-checked like PostgreSQL's, with Debian's patch series applied (its
# security fixes backported to the release among them).
#
# One OpenSSL per process: the libraries keep their soname (libcrypto.so.3,
# libssl.so.3) and carry a run path to their own directory, and the server's
# binaries and libpq are linked with the same run path (build.sh).  A library
# loaded later that needs libcrypto.so.3 (pgcrypto, TimescaleDB, Python's
# ssl module in plpython) gets the copy already mapped, because the dynamic
# linker matches by soname; OpenSSL 3.5 keeps 3.0's ABI and symbol versions.
# The configuration directory stays Debian's (/usr/lib/ssl), so TLS reads
# the machine's openssl.cnf and CA certificates.  TAP test 009 checks that a
# backend maps exactly one libcrypto, this one.
#
# Steps, each skipped when already up to date: fetch (scripts/
# fetch-debian-source.sh: the orig tarball and Debian's debian.tar.xz),
# unpack, apply Debian's patches, configure, make, install.
#
# Usage: server/openssl.sh BUILD_DIR     (prints nothing else on success
#                                          but where it installed)
# PGCIPHER_OPENSSL_BUILD, when set, is the build directory instead.
set -euo pipefail
umask 022	# libraries every OS user running a server can read

OPENSSL_SRC_VERSION=3.5.7-1~deb13u2
OPENSSL_UPSTREAM_VERSION=3.5.7
OPENSSL_ORIG_SHA256=a8c0d28a529ca480f9f36cf5792e2cd21984552a3c8e4aa11a24aa31aeac98e8
OPENSSL_DEBIAN_SHA256=593a47654ead460a3b609503733f80bef552ff0802799d3b47784faacc50809f

here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: openssl.sh BUILD_DIR}
# one OpenSSL for both majors' builds: ./pgcipher names where (./build)
build=${PGCIPHER_OPENSSL_BUILD:-$build}
mkdir -p "$build"
build=$(cd "$build" && pwd -P)	# physical: the run paths must match /proc/PID/maps
orig_file=openssl_$OPENSSL_UPSTREAM_VERSION.orig.tar.gz
debian_file=openssl_$OPENSSL_SRC_VERSION.debian.tar.xz
"$here/../scripts/fetch-debian-source.sh" "$build" openssl "$OPENSSL_SRC_VERSION" "$orig_file" "$OPENSSL_ORIG_SHA256" >/dev/null
"$here/../scripts/fetch-debian-source.sh" "$build" openssl "$OPENSSL_SRC_VERSION" "$debian_file" "$OPENSSL_DEBIAN_SHA256" >/dev/null

dir=$build/openssl
mkdir -p "$dir"
chmod go+rx "$dir"	# made earlier under another umask, perhaps (build.sh: "$build")
# both majors' builds use one OpenSSL (./pgcipher: PGCIPHER_OPENSSL_BUILD):
# one builds it while the other waits, then finds it built
exec 9> "$dir/.lock"
flock 9
tree=$dir/src
prefix=$dir/install
jobs=${JOBS:-$(nproc)}
cc="gcc"
command -v ccache >/dev/null && cc="ccache gcc"
# no-tests/no-docs: nothing of them is installed; the run path makes
# libssl find this libcrypto, and programs linked against both find them.
# No target is named: Configure picks the machine's (linux-x86_64 here).
config=(--prefix="$prefix" --libdir=lib --openssldir=/usr/lib/ssl
        shared no-tests no-docs "-Wl,-rpath,$prefix/lib")
stamp=$(echo "$OPENSSL_ORIG_SHA256 $OPENSSL_DEBIAN_SHA256 $cc ${config[*]}" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$prefix/.pgcipher-openssl" 2>/dev/null)" != "$stamp" ]; then
    echo "openssl: building OpenSSL $OPENSSL_UPSTREAM_VERSION (Debian $OPENSSL_SRC_VERSION) into $prefix (log: $dir/build.log)" >&2
    # Installed into a staging directory and moved into place at the end, so a
    # failed or interrupted build leaves the previous install untouched.
    stage=$dir/stage
    rm -rf "$tree" "$stage"
    mkdir -p "$tree"
    tar -xzf "$build/source/$orig_file" -C "$tree" --strip-components=1
    # Debian's series, in order (quilt's default -p1; none is optional)
    tar -xJf "$build/source/$debian_file" -C "$tree"
    while read -r patch _; do
        case $patch in ''|'#'*) continue ;; esac
        patch -d "$tree" -p1 --quiet --forward --batch < "$tree/debian/patches/$patch" \
            || { echo "openssl: Debian patch $patch does not apply" >&2; exit 1; }
    done < "$tree/debian/patches/series"
    export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$build} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
    if ! (cd "$tree" && CC="$cc" ./Configure "${config[@]}" > "$dir/build.log" 2>&1 \
          && make -j"$jobs" build_sw >> "$dir/build.log" 2>&1 \
          && make install_sw DESTDIR="$stage" >> "$dir/build.log" 2>&1); then
        tail -30 "$dir/build.log" >&2
        echo "openssl: build failed, see $dir/build.log" >&2
        exit 1
    fi
    echo "$stamp" > "$stage$prefix/.pgcipher-openssl"
    rm -rf "$prefix"
    mv "$stage$prefix" "$prefix"
    rm -rf "$stage"
fi
echo "$prefix"
