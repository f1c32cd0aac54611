#!/usr/bin/env bash
# openssl.sh — build the pinned OpenSSL that pgcipher's server links, into
# BUILD_DIR/openssl/install (lib/, include/, bin/openssl).
#
# Why not Debian 12's OpenSSL 3.0: its AES-XTS has no VAES/AVX-512 path, and
# the page cipher runs at half of what this class of CPU can do (design
# section 4, "Which OpenSSL").
# OpenSSL 3.5 (Debian trixie's source, pinned and sha256-checked like
# PostgreSQL's) has one.
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
# fetch-debian-source.sh), unpack, configure, make, install.
#
# Usage: server/openssl.sh BUILD_DIR     (prints nothing else on success
#                                          but where it installed)
set -euo pipefail
umask 022	# libraries every OS user running a server can read

OPENSSL_SRC_VERSION=3.5.7-1~deb13u2
OPENSSL_UPSTREAM_VERSION=3.5.7
OPENSSL_ORIG_SHA256=a8c0d28a529ca480f9f36cf5792e2cd21984552a3c8e4aa11a24aa31aeac98e8

here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: openssl.sh BUILD_DIR}
mkdir -p "$build"
build=$(cd "$build" && pwd)
orig_file=openssl_$OPENSSL_UPSTREAM_VERSION.orig.tar.gz
"$here/../scripts/fetch-debian-source.sh" "$build" openssl "$OPENSSL_SRC_VERSION" "$orig_file" "$OPENSSL_ORIG_SHA256" >/dev/null

dir=$build/openssl
tree=$dir/src
prefix=$dir/install
jobs=${JOBS:-$(nproc)}
cc="gcc"
command -v ccache >/dev/null && cc="ccache gcc"
# no-tests/no-docs: nothing of them is installed; the run path makes
# libssl find this libcrypto, and programs linked against both find them.
config=(linux-x86_64 --prefix="$prefix" --libdir=lib --openssldir=/usr/lib/ssl
        shared no-tests no-docs "-Wl,-rpath,$prefix/lib")
stamp=$(echo "$OPENSSL_ORIG_SHA256 $cc ${config[*]}" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$prefix/.pgcipher-openssl" 2>/dev/null)" != "$stamp" ]; then
    echo "openssl: building OpenSSL $OPENSSL_UPSTREAM_VERSION (Debian $OPENSSL_SRC_VERSION) into $prefix (log: $dir/build.log)" >&2
    rm -rf "$tree" "$prefix"
    mkdir -p "$tree"
    tar -xzf "$build/source/$orig_file" -C "$tree" --strip-components=1
    export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$build} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
    if ! (cd "$tree" && CC="$cc" ./Configure "${config[@]}" > "$dir/build.log" 2>&1 \
          && make -j"$jobs" build_sw >> "$dir/build.log" 2>&1 \
          && make install_sw >> "$dir/build.log" 2>&1); then
        tail -30 "$dir/build.log" >&2
        echo "openssl: build failed, see $dir/build.log" >&2
        exit 1
    fi
    echo "$stamp" > "$prefix/.pgcipher-openssl"
fi
echo "$prefix"
