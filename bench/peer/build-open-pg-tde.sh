#!/usr/bin/env bash
# build-open-pg-tde.sh — build the open-source peer the benchmarks compare
# pgcipher with: open_pg_tde 2.4.0 (github.com/commandprompt/open_pg_tde, a
# fork of Percona's pg_tde that runs on upstream PostgreSQL with its own
# core patch series), into BUILD_DIR/open_pg_tde/install, for the bench
# configuration "open_pg_tde" (bench/cluster.py, bench/peer.py).
#
# So that the comparison is of TDE and nothing else, PostgreSQL is built
# exactly as the benchmark's "stock" server (server/build.sh --stock): the
# same pinned source tarball (server/fetch-source.sh, found in
# BUILD_DIR/source), the same compiler (gcc, through ccache), the same
# configure options and the same pinned OpenSSL (BUILD_DIR/openssl/install,
# linked with a run path), and the same major (PGCIPHER_PG, default 18;
# checked against BUILD_DIR/stock/install when it is built: its
# `pg_config --configure` must equal ours but for the prefix).  On that
# tree: open_pg_tde's core patches for the major
# (patches/postgresql/MAJOR/*.patch), with the hooks compiled in by
# defining USE_TDE_HOOKS in pg_config_manual.h, the way its
# install-from-source.md gives where configure cannot be regenerated
# (PostgreSQL's configure.ac wants autoconf 2.69, Debian 12 has 2.71): the
# configure options stay stock's, and the extension, built against the
# installed headers, sees the macro too.  Then the extension, with meson
# (buildtype debugoptimized: -O2 -g, as the server's CFLAGS), against the
# pinned OpenSSL, installed into the same prefix.
#
# Its source is open_pg_tde's tag 2.4.0 (scripts/vendor.tsv, pin
# open_pg_tde: ../shared/vendor's copy, else the tag's archive downloaded
# from GitHub into BUILD_DIR/source; scripts/vendor.py checks either by
# its tree hash).  A tag's archive leaves out the contents of the one
# submodule, src/libkmip (github.com/Percona-Lab/libkmip at the commit the
# tag pins), and meson refuses to configure without it (open_pg_tde builds
# its KMIP key provider into the extension, used or not), so that commit's
# archive comes the same way (pin libkmip).  Where either cannot be had,
# says so in one line and exits 0 without building: the bench then runs
# without the peer and says why.
#
# Idempotent: skipped when the install exists and the hash of its inputs
# (both tarballs, the OpenSSL build, the configure options, this script)
# matches the stamp it left.  The build is timed.
#
# Usage: bench/peer/build-open-pg-tde.sh [BUILD_DIR]   (default: $PGCIPHER_BUILD, else ./build)
# Run as the user who owns BUILD_DIR (pgcipher), never as root.
set -euo pipefail
umask 022	# the install is read by whoever runs the servers

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
name=open_pg_tde-2.4.0
# the pins' lines (name, file, tree hash, URL): part of the build's inputs
pins=$(grep -E '^(open_pg_tde|libkmip)\b' "$top/scripts/vendor.tsv")

say() { echo "build-open-pg-tde: $*"; }
die() { echo "build-open-pg-tde: $*" >&2; exit 1; }

[ "$(id -u)" != 0 ] || die "run as the user who owns the build directory (su pgcipher -c ...), not as root"
build=${1:-${PGCIPHER_BUILD:-$top/build}}
mkdir -p "$build"
build=$(cd "$build" && pwd -P)	# physical: run paths and /proc/PID/maps agree

# a source by its pin: its path; where it cannot be had (vendor.py says so
# in one line), exit 0 without building
source_of() { python3 "$top/scripts/vendor.py" get "$1" --tag build-open-pg-tde --dest "$build/source"; }
rc=0
tarball=$(source_of open_pg_tde) || rc=$?
if [ $rc = 0 ]; then libkmip=$(source_of libkmip) || rc=$?; fi
case $rc in
    0) ;;
    2) exit 0 ;;
    *) die "a source does not match its pin in scripts/vendor.tsv (above)" ;;
esac
major=${PGCIPHER_PG:-18}
dir=$build/open_pg_tde
prefix=$dir/install
tree=$dir/postgresql
stamp_file=$prefix/.open_pg_tde-stamp
jobs=${JOBS:-$(nproc)}
start=$(date +%s)


# The stock build's major and configure options, where it is built
stock=$build/stock/install
if [ -f "$stock/.pgcipher-major" ] && [ "$(cat "$stock/.pgcipher-major")" != "$major" ]; then
    die "the stock build in $stock is PostgreSQL $(cat "$stock/.pgcipher-major"), not $major: build the peer on the stock's major (PGCIPHER_PG=$(cat "$stock/.pgcipher-major"))"
fi

# The pinned PostgreSQL source: the tarball server/build.sh --stock unpacks
read -r package _ upstream pg_sha256 _ < <("$top/server/fetch-source.sh" --pin "$major")
pg_orig=$build/source/${package}_$upstream.orig.tar.bz2
if [ ! -f "$pg_orig" ]; then
    say "fetching the pinned PostgreSQL $major source (server/fetch-source.sh)"
    pg_orig=$("$top/server/fetch-source.sh" "$build" "$major" | tail -n 1)
fi
[ "$(sha256sum "$pg_orig" | cut -d' ' -f1)" = "$pg_sha256" ] || die "$pg_orig does not match its pinned sha256"

# The pinned OpenSSL the stock and pgcipher servers link
openssl=$build/openssl/install
if [ ! -f "$openssl/.pgcipher-openssl" ]; then
    say "building the pinned OpenSSL (server/openssl.sh)"
    openssl=$("$top/server/openssl.sh" "$build" | tail -n 1)
fi

# server/build.sh's compiler and configure options, word for word
if command -v ccache >/dev/null && [ -x /usr/lib/ccache/gcc ]; then
    export PATH=/usr/lib/ccache:$PATH
fi
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$dir} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
# (server/debian-options.sh: Debian's options and flags, as server/build.sh)
# shellcheck source=server/debian-options.sh
. "$top/server/debian-options.sh"
dev_configure "$major" "$prefix" "$openssl" || die "cannot configure as server/build.sh does"
configure_line="${build_config[*]}"
# the extension's link: the server's flags and run path
ldflags="$debian_ldflags -Wl,-rpath,$openssl/lib"

# stock's own record of its configure options: ours but for the prefix
if [ -x "$stock/bin/pg_config" ]; then
    theirs=$("$stock/bin/pg_config" --configure | sed "s|$stock|PREFIX|g; s|^ *||; s| *\$||")
    ours=$(printf " '%s'" "${build_config[@]}" | sed "s|$prefix|PREFIX|g; s|^ *||")
    [ "$theirs" = "$ours" ] || die "configure options differ from the stock build's (server/build.sh changed?):
  stock: $theirs
  peer:  $ours"
fi

{ command -v meson && command -v ninja; } >/dev/null || die "meson and ninja are needed (apt-get install meson ninja-build)"
pkg-config --exists libcurl || die "libcurl's headers are needed by open_pg_tde's key providers (apt-get install libcurl4-openssl-dev)"

inputs=$( { echo "$pins $pg_sha256 $major"; cat "$openssl/.pgcipher-openssl"; echo "$configure_line";
            sha256sum "$0" | cut -d' ' -f1; } | sha256sum | cut -d' ' -f1)
if [ -x "$prefix/bin/postgres" ] && [ -f "$("$prefix/bin/pg_config" --pkglibdir)/open_pg_tde.so" ] \
   && [ "$(cat "$stamp_file" 2>/dev/null)" = "$inputs" ]; then
    say "up to date: $name on PostgreSQL $major in $prefix"
    exit 0
fi

say "building $name on PostgreSQL $major ($(basename "$pg_orig")) into $prefix"
rm -rf "$tree" "$dir/src" "$dir/extension-build" "$prefix" "$dir"/*.log
ext=$dir/src/$name
mkdir -p "$ext" "$tree"
tar -xzf "$tarball" -C "$ext" --strip-components=1
mkdir -p "$ext/src/libkmip"
tar -xzf "$libkmip" -C "$ext/src/libkmip" --strip-components=1
tar -xjf "$pg_orig" -C "$tree" --strip-components=1
patches=$ext/patches/postgresql/$major
[ -d "$patches" ] || die "open_pg_tde has no core patches for PostgreSQL $major ($patches)"
for p in "$patches"/*.patch; do
    say "patch $(basename "$p")"
    patch -d "$tree" -p1 --quiet --forward --no-backup-if-mismatch < "$p" \
        || die "$(basename "$p") does not apply to $(basename "$pg_orig")"
done
# the hooks on (install-from-source.md: "or uncomment the USE_TDE_HOOKS define")
manual=$tree/src/include/pg_config_manual.h
grep -qx '/\* #define USE_TDE_HOOKS 1 \*/' "$manual" || die "no USE_TDE_HOOKS line to enable in $manual"
sed -i 's|^/\* #define USE_TDE_HOOKS 1 \*/$|#define USE_TDE_HOOKS 1|' "$manual"

say "configure $configure_line"
(cd "$tree" && ./configure "${build_config[@]}" > "$dir/configure.log" 2>&1) \
    || { tail -30 "$dir/configure.log" >&2; die "configure failed, see $dir/configure.log"; }
say "make -j$jobs (log: $dir/make.log)"
if ! (cd "$tree" && make -j"$jobs" -s > "$dir/make.log" 2>&1 \
      && make -C contrib -j"$jobs" -s >> "$dir/make.log" 2>&1 \
      && make -s install >> "$dir/make.log" 2>&1 \
      && make -C contrib -s install >> "$dir/make.log" 2>&1); then
    grep -E 'error|Error' "$dir/make.log" | head -40 >&2
    die "make failed, see $dir/make.log"
fi
grep -q '^#define USE_TDE_HOOKS 1' "$("$prefix/bin/pg_config" --includedir-server)/pg_config_manual.h" \
    || die "the installed headers lack USE_TDE_HOOKS"

say "meson setup + ninja install of the extension (log: $dir/extension.log)"
if ! (cd "$ext" \
      && PKG_CONFIG_PATH=$openssl/lib/pkgconfig meson setup "$dir/extension-build" \
             --buildtype=debugoptimized -Dpg_config="$prefix/bin/pg_config" \
             -Dc_link_args="$ldflags" > "$dir/extension.log" 2>&1 \
      && ninja -C "$dir/extension-build" -j"$jobs" >> "$dir/extension.log" 2>&1 \
      && ninja -C "$dir/extension-build" install >> "$dir/extension.log" 2>&1); then
    tail -40 "$dir/extension.log" >&2
    die "the extension's build failed, see $dir/extension.log"
fi
pkglibdir=$("$prefix/bin/pg_config" --pkglibdir)
[ -f "$pkglibdir/open_pg_tde.so" ] || die "open_pg_tde.so was not installed into $pkglibdir"

echo "$major" > "$prefix/.pgcipher-major"
echo "$inputs" > "$stamp_file"
elapsed=$(( $(date +%s) - start ))
say "installed $name on PostgreSQL $major into $prefix in $((elapsed / 60))m$(printf %02d $((elapsed % 60)))s"
