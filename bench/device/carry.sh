#!/usr/bin/env bash
# carry.sh — pack what the many-core benchmarks (issue 30, section 4) need on
# the lent device machine into one tarball the device tool can carry:
# build/device/carry/pgcb.tar.xz (build/ is ignored by .gitignore; the
# tool's `carry` takes that path).  bench/device/run-on-device.sh unpacks it
# there into /opt/pgcb and runs the benchmarks.
#
# The device is another image (Ubuntu-like, gVisor or Firecracker, no
# compiler, no network), so the carry holds its own binaries, built for the
# benchmarks only:
#   /opt/pgcb/pgcipher, /opt/pgcb/stock   PostgreSQL $PGCIPHER_PG (default 18)
#        from the same pinned source server/build.sh builds (fetch-source.sh),
#        pgcipher with server/patches and server/src as committed at HEAD
#        (git archive: the working tree may hold someone's unfinished edits),
#        stock without them; configured as server/build.sh does but
#        --without-icu (the device's libicu has another soname) and without
#        the TAP tests; installed with that fixed prefix (DESTDIR staging),
#        so every run path resolves there as it does here; stripped, no docs,
#        headers and static libraries dropped after pgcipher_columns (HEAD's
#        columns/) is built against the staged pgcipher
#   /opt/pgcb/lib         the private OpenSSL 3.5 (server/openssl.sh's, which
#        both servers link, by the run path -Wl,-rpath,/opt/pgcb/lib) and the
#        servers' other non-glibc libraries (lz4, zstd, liburing, readline, …)
#   /opt/pgcb/bin         pgcipher-proxy and pgcipher-keys, built from HEAD's
#        proxy/ with scripts/go.sh's Go, and wrappers for sysbench and PgBouncer, this
#        machine's Debian binaries in /opt/pgcb/libexec with every non-glibc
#        library they load in /opt/pgcb/syslib (LD_LIBRARY_PATH set by the
#        wrapper, for them alone)
#   /opt/pgcb/harness     the bench harness (bench/*.py, scenarios, the
#        sysbench script alibaba.lua, TPROC-C's SQL, bench/device/*.py)
#   /opt/pgcb/MANIFEST    commit, dirty files, versions, configure lines
#
# Builds are skipped when up to date (stamps); the tarball is always made
# afresh.  Needs the pinned OpenSSL and source that ./pgcipher build fetches
# and builds (server/openssl.sh, server/fetch-source.sh: run again here, they
# do nothing when up to date).  Usage: bench/device/carry.sh   (JOBS=N: make -jN)
set -euo pipefail
umask 022

top=$(cd "$(dirname "$0")/../.." && pwd)
build=${PGCIPHER_BUILD:-$top/build}
build=$(cd "$build" && pwd -P)
dev=$build/device
prefix=/opt/pgcb
stage=$dev/stage        # make install DESTDIR=: the installs, kept as installed
sroot=$stage$prefix
root=$dev/pack$prefix   # what is packed: a stripped copy and the rest
major=${PGCIPHER_PG:-18}
jobs=${JOBS:-$(nproc)}
carry=$dev/carry
limit_mib=60

say() { echo "carry: $*"; }
die() { echo "carry: $*" >&2; exit 1; }

command -v sysbench >/dev/null || die "sysbench is not installed (./pgcipher deps)"
command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || die "pgbouncer is not installed (./pgcipher deps)"

# the pinned source and OpenSSL that ./pgcipher build left, checked; fetched
# or built by server/build.sh's own scripts where absent
read -r package _ upstream sha256 _ < <("$top/server/fetch-source.sh" --pin "$major")
orig=$build/source/${package}_$upstream.orig.tar.bz2
if ! echo "$sha256  $orig" | sha256sum -c --quiet 2>/dev/null; then
    orig=$("$top/server/fetch-source.sh" "$build" "$major" | tail -n 1)
fi
openssl=$build/openssl/install
[ -f "$openssl/.pgcipher-openssl" ] || openssl=$("$top/server/openssl.sh" "$build" | tail -n 1)
[ -f "$openssl/lib/libcrypto.so.3" ] || die "no OpenSSL in $openssl"

# HEAD's server patches and overlay, columns/ and proxy/: what is committed
mkdir -p "$dev"
head=$(git -C "$top" rev-parse HEAD)
src=$dev/src-$head
if [ ! -d "$src" ]; then
    rm -rf "$dev"/src-*
    mkdir -p "$src.tmp"
    git -C "$top" archive HEAD server/patches/"$major" server/src columns proxy | tar -x -C "$src.tmp"
    mv "$src.tmp" "$src"
fi

# ccache as server/build.sh uses it
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache} CCACHE_NOHASHDIR=1
if command -v ccache >/dev/null && [ -x /usr/lib/ccache/gcc ]; then
    export PATH=/usr/lib/ccache:$PATH
fi

# build FLAVOR (pgcipher or stock): unpack, patch, overlay, configure, make,
# install into the stage
build_pg() {
    local flavor=$1 dir=$dev/$1 tree=$dev/$1/postgresql
    local config=(--prefix="$prefix/$flavor" --with-ssl=openssl --with-lz4 --with-zstd --without-icu
                  --with-includes="$openssl/include" --with-libraries="$openssl/lib" --enable-debug)
    [ "$major" -ge 18 ] && config+=(--with-liburing)
    local ldflags="-Wl,-rpath,$prefix/lib"
    local patches=/nonexistent overlay=/nonexistent
    if [ "$flavor" = pgcipher ]; then patches=$src/server/patches/$major overlay=$src/server/src; fi
    local stamp
    stamp=$( (sha256sum "$orig" | cut -d' ' -f1; echo "${config[*]} $ldflags"; cat "$openssl/.pgcipher-openssl"
              if [ -d "$patches" ]; then (cd "$src" && find server -type f | sort | xargs sha256sum); fi) \
             | sha256sum | cut -d' ' -f1)
    mkdir -p "$dir"
    if [ "$(cat "$dir/.stamp" 2>/dev/null)" = "$stamp" ] && [ -x "$sroot/$flavor/bin/postgres" ]; then
        say "$flavor: up to date"
        return
    fi
    say "$flavor: unpacking $(basename "$orig")"
    rm -rf "$tree" "${sroot:?}/${flavor:?}" "$dir/.stamp"
    mkdir -p "$tree"
    tar -xjf "$orig" -C "$tree" --strip-components=1
    for p in "$patches"/*.patch; do
        [ -e "$p" ] || continue
        patch -d "$tree" -p1 --quiet --forward --no-backup-if-mismatch < "$p" \
            || die "patch $(basename "$p") does not apply"
    done
    if [ -d "$overlay" ]; then
        (cd "$overlay" && find . -type f) | while read -r f; do
            [ -e "$tree/${f#./}" ] && die "overlay would replace upstream file ${f#./}"
            mkdir -p "$(dirname "$tree/${f#./}")"
            cp "$overlay/${f#./}" "$tree/${f#./}"
        done
    fi
    say "$flavor: configure ${config[*]} LDFLAGS=$ldflags (log: $dir/configure.log)"
    (cd "$tree" && CCACHE_BASEDIR=$dir ./configure CC=gcc LDFLAGS="$ldflags" "${config[@]}" > "$dir/configure.log" 2>&1) \
        || { tail -20 "$dir/configure.log" >&2; die "configure of $flavor failed"; }
    say "$flavor: make -j$jobs (log: $dir/make.log)"
    (cd "$tree" && CCACHE_BASEDIR=$dir make -j"$jobs" -s > "$dir/make.log" 2>&1 \
        && make -s install DESTDIR="$stage" >> "$dir/make.log" 2>&1) \
        || { grep -E 'error|Error' "$dir/make.log" | head -20 >&2; die "make of $flavor failed"; }
    echo "$stamp" > "$dir/.stamp"
}

build_pg pgcipher
build_pg stock

# pgcipher_columns, HEAD's columns/, built against the staged pgcipher (its
# pg_config reports the staged paths: PostgreSQL's installs are relocatable)
ext=$("$sroot/pgcipher/bin/pg_config" --sharedir)/extension
if [ ! -f "$ext/pgcipher_columns.control" ] || [ "$(cat "$dev/columns.tree" 2>/dev/null)" != "$(git -C "$top" rev-parse HEAD:columns)" ]; then
    say "pgcipher_columns against the staged pgcipher"
    rm -rf "$dev/columns"
    mkdir -p "$dev/columns"
    make -C "$dev/columns" -f "$src/columns/Makefile" -s PG_CONFIG="$sroot/pgcipher/bin/pg_config" \
        all install > "$dev/columns.log" 2>&1 || { tail -20 "$dev/columns.log" >&2; die "pgcipher_columns failed"; }
    [ -f "$ext/pgcipher_columns.control" ] || die "pgcipher_columns was not installed into $ext"
    git -C "$top" rev-parse HEAD:columns > "$dev/columns.tree"
fi

# the proxy and the key tool; pg_query_go compiles PostgreSQL's parser with
# cgo the first time (minutes), then Go's build cache keeps it
if [ ! -x "$dev/bin/pgcipher-proxy" ] || [ "$(cat "$dev/bin/.tree" 2>/dev/null)" != "$(git -C "$top" rev-parse HEAD:proxy)" ]; then
    go=$("$top/scripts/go.sh" path)
    say "pgcipher-proxy, pgcipher-keys: go build ($("$go" env GOVERSION))"
    mkdir -p "$dev/bin"
    for cmd in pgcipher-proxy pgcipher-keys; do
        (cd "$src/proxy" && GOFLAGS=-buildvcs=false "$go" build -o "$dev/bin/$cmd" "./cmd/$cmd")
    done
    git -C "$top" rev-parse HEAD:proxy > "$dev/bin/.tree"
fi

# what the servers, the proxy and the clients load besides glibc
glibc='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libresolv|libutil|libanl|libnss_.*)\.so'
deps() {  # deps FILE...: paths of the non-glibc libraries ldd resolves
    ldd "$@" 2>/dev/null | awk '/=> \//{print $1, $3}' \
        | while read -r name path; do [[ $name =~ $glibc ]] || echo "$path"; done | sort -u
}

say "packing"
rm -rf "$dev/pack"
mkdir -p "$root/lib" "$root/syslib" "$root/bin" "$root/libexec" "$root/harness"
cp -a "$sroot/pgcipher" "$sroot/stock" "$root/"
cp -L "$openssl/lib/libcrypto.so.3" "$openssl/lib/libssl.so.3" "$root/lib/"
for f in pgcipher stock; do
    # the servers' own libraries (libpq, …) are in their prefix; OpenSSL is ours
    for lib in $(LD_LIBRARY_PATH=$root/$f/lib:$root/lib deps "$root/$f/bin/"{postgres,psql,pgbench,initdb,pg_ctl} "$root/$f/lib/libpq.so.5"); do
        case $(basename "$lib") in libssl.so.*|libcrypto.so.*|libpq.so.*) continue ;; esac
        cp -Ln "$lib" "$root/lib/"
    done
done
cp "$dev/bin/pgcipher-proxy" "$dev/bin/pgcipher-keys" "$root/bin/"
for lib in $(deps "$root/bin/pgcipher-proxy" "$root/bin/pgcipher-keys"); do cp -Ln "$lib" "$root/syslib/"; done
bouncer=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
for prog in "$(command -v sysbench)" "$bouncer"; do
    name=$(basename "$prog")
    cp "$prog" "$root/libexec/$name"
    for lib in $(deps "$prog"); do cp -Ln "$lib" "$root/syslib/"; done
    cat > "$root/bin/$name" <<EOF
#!/bin/sh
# $name from the machine that packed this carry, with the libraries it loads
LD_LIBRARY_PATH=$prefix/syslib exec $prefix/libexec/$name "\$@"
EOF
    chmod 755 "$root/bin/$name"
done

# stripped, no docs, no headers or static libraries (the extension is built)
find "$root" -type f \( -perm -u+x -o -name '*.so*' \) -print0 \
    | xargs -0 file | awk -F: '/ELF/{print $1}' | xargs -r strip --strip-unneeded
rm -rf "$root"/{pgcipher,stock}/{include,share/doc,share/man} "$root"/{pgcipher,stock}/lib/postgresql/pgxs
find "$root"/{pgcipher,stock}/lib -name '*.a' -delete

# the harness: the suite's Python, the sysbench script, TPROC-C's SQL, this directory's
(cd "$top" && tar -cf - bench/__init__.py bench/*.py bench/peer/*.py bench/scenarios/*.py bench/sysbench/alibaba.lua \
    bench/sql/tprocc/*.sql bench/device/*.py) \
    | tar -xf - -C "$root/harness"

{
    echo "packed $(date -u +%FT%TZ) on $(hostname) by bench/device/carry.sh"
    echo "commit $head"
    echo "dirty files of the working tree (the servers, columns and the proxy are built from HEAD; the harness is copied from the tree):"
    git -C "$top" status --short | sed 's/^/  /'
    echo "openssl $(head -c 16 "$openssl/.pgcipher-openssl" 2>/dev/null) from $openssl"
    for f in pgcipher stock; do
        echo "$f: $("$root/$f/bin/postgres" --version)"
        echo "  configure: $(grep -m1 '^  \$ ./configure' "$dev/$f/postgresql/config.log" | sed 's/^  \$ //')"
    done
    echo "sysbench: $(sysbench --version)"
    echo "pgbouncer: $("$bouncer" --version 2>&1 | head -1)"
    echo "lib:    $(cd "$root/lib" && printf '%s ' *)"
    echo "syslib: $(cd "$root/syslib" && printf '%s ' *)"
} > "$root/MANIFEST"
chmod -R a+rX "$root"

mkdir -p "$carry"
rm -f "$carry/pgcb.tar.xz"
tar -C "$dev/pack" -cf - "${prefix#/}" | xz -T"$jobs" -6 > "$carry/pgcb.tar.xz.tmp"
mv "$carry/pgcb.tar.xz.tmp" "$carry/pgcb.tar.xz"
size=$(stat -c %s "$carry/pgcb.tar.xz")
say "$carry/pgcb.tar.xz: $((size / 1024 / 1024)) MiB ($(du -sh "$root" | cut -f1) unpacked)"
[ "$size" -le $((limit_mib * 1024 * 1024)) ] || die "the carry is over $limit_mib MiB"
