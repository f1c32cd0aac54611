#!/usr/bin/env bash
# package.sh — Debian packages of pgcipher for one PostgreSQL major, in
# Debian's layout, into BUILD_DIR/packages (a local apt repository).
#
#   pgcipher-postgresql-MAJOR          the server (and contrib), as Debian's
#                                      postgresql-MAJOR: Provides, Conflicts,
#                                      Replaces it, /usr/lib/postgresql/MAJOR
#   pgcipher-postgresql-client-MAJOR   the client programs and PGXS
#   pgcipher-postgresql-server-dev-MAJOR  the server's headers
#   pgcipher-postgresql-MAJOR-jit      the LLVM JIT, as Debian's postgresql-MAJOR-jit
#   pgcipher-postgresql-plperl-MAJOR, -plpython3-MAJOR, -pltcl-MAJOR
#                                      the procedural languages, as Debian's
#   postgresql-MAJOR-pgcipher-columns  the encrypted column types
#   pgcipher-proxy                     the wire proxy: systemd unit, config
#                                      in /etc/pgcipher, its own system user
#   pgcipher-tools                     pgcipher-kms and pgcipher-keys
#   pgcipher-openssl                   the private OpenSSL 3.5, found by the
#                                      programs' run path, never the system's
#
# The server is the pinned source of server/fetch-source.sh with Debian's
# own layout patches (per-version directories, sockets in /var/run/postgresql,
# libpgport in pkglibdir: from the pinned Debian source package, sha256
# checked) and then ours, configured as Debian configures it
# (postgresql-common's server/postgresql.mk) with the hardening flags of
# dpkg-buildflags, installed into a DESTDIR and packaged with debhelper.
# lintian runs over every package: errors fail, the warnings left are
# explained in packaging/README.md.
#
# Usage: scripts/package.sh   (PGCIPHER_TOP, PGCIPHER_BUILD, PGCIPHER_PG as for
#                              scripts/build.sh; ./pgcipher package [--pg 17])
set -euo pipefail
umask 022
top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}
major=${PGCIPHER_PG:-18}
jobs=${JOBS:-$(nproc)}
here=$top/server
tmpl=$top/packaging/debian
version=$(cat "$top/VERSION")
work=$build/deb
tree=$work/postgresql
root=$work/root
out=$build/packages
mkdir -p "$work" "$out"
die() { echo "package: $*" >&2; exit 1; }
# one build at a time: .ci/run builds the packages beside the 18 leg,
# whose packages suite then waits here and finds them built
exec 8> "$work/.lock"
flock 8

# Packages built from a clean checkout's commit stay built: .ci/run builds
# them beside the 18 leg (./pgcipher package), and the packages suite then
# finds them.  A dirty tree, another commit or major builds again
# (ignored files do not count: a clean clone has none in the sources; nor
# do Debian's build dependencies, which change only between runs).
tree_state() {
    local changes
    changes=$(git -c safe.directory="$top" -C "$top" status --porcelain 2>/dev/null) && [ -z "$changes" ] &&
        echo "$(git -c safe.directory="$top" -C "$top" rev-parse HEAD) $major"
}
state=$(tree_state) || state=
built_from=$out/.built-from-$major
# a stamp is written after a whole build and every run removes them all
# first (the proxy, tools and OpenSSL packages are both majors'), so one
# that is there vouches for every package in $out
if [ -n "$state" ] && [ "$(cat "$built_from" 2>/dev/null)" = "$state" ] && [ -f "$out/Packages.gz" ]; then
    echo "package: built from this commit already ($state)"
    ls -1 "$out"/*.deb
    exit 0
fi
rm -f "$out"/.built-from-*

# --- sources --------------------------------------------------------------

read -r pgpackage pgdebversion pgupstream _ suite < <("$here/fetch-source.sh" --pin "$major")
orig=$("$here/fetch-source.sh" "$build" "$major" | tail -n 1)
# Debian's packaging of the same upload: only its layout patches are used
case $major in
    17) debian_sha256=82851f4dfeb372c99b94b412e2e3046a8eee7771098e42ac1fa234bef2611cbd ;;
    18) debian_sha256=5efd00aa59930757931d13e3b2a343b5ac983fdf646a54a3b96caa30cb40512b ;;
    *) die "no pinned Debian packaging for PostgreSQL $major" ;;
esac
debian_file=${pgpackage}_${pgdebversion}.debian.tar.xz
"$top/scripts/fetch-debian-source.sh" "$build" "$pgpackage" "$pgdebversion" \
    "$debian_file" "$debian_sha256" "$suite" > /dev/null
debian_tar=$build/source/$debian_file
openssl=$("$here/openssl.sh" "$build" | tail -n 1)
openssl_version=$(sed -n 's/^OPENSSL_SRC_VERSION=//p' "$here/openssl.sh")
layout_patches=(50-per-version-dirs.patch 51-default-sockets-in-var.patch libpgport-pkglibdir)

pgdeb=${pgdebversion}+pgcipher$version        # e.g. 18.6-3+pgcipher0.1.0
toolsdeb=$version                              # pgcipher-proxy, -tools, -openssl
extra=" (pgcipher $version, Debian $pgdebversion)"

# --- the server, in Debian's layout ---------------------------------------

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
# Debian's options and flags (server/debian-options.sh) in Debian's layout,
# the pinned OpenSSL instead of the system's.  The packages suite compares
# the result with Debian's (test/packages/like_debian.py).
# shellcheck source=server/debian-options.sh
. "$here/debian-options.sh"
debian_options "$major" || die "cannot configure as Debian does"
config=(--mandir="/usr/share/postgresql/$major/man"
        --docdir="/usr/share/doc/postgresql-doc-$major"
        --sysconfdir=/etc/postgresql-common
        --datarootdir=/usr/share/
        --datadir="/usr/share/postgresql/$major"
        --bindir="/usr/lib/postgresql/$major/bin"
        --libdir="/usr/lib/$multiarch/"
        --libexecdir=/usr/lib/postgresql/
        --includedir=/usr/include/postgresql/
        --prefix=/usr
        --with-extra-version="$extra"
        "${debian_features[@]}" "${debian_tools[@]}"
        --with-includes="$openssl/include" --with-libraries="$openssl/lib")
cflags=$debian_cflags cppflags=$debian_cppflags cxxflags=$debian_cxxflags
ldflags="$debian_ldflags -Wl,-rpath,/usr/lib/pgcipher/openssl"

# (our test files do not go into the packages)
stamp=$( (sha256sum "$orig" "$debian_tar"; find "$here/patches/$major" "$here/src" -type f ! -path '*/src/test/*' | sort | xargs cat | sha256sum
          echo "${config[*]} $cflags $cppflags $cxxflags $ldflags"; cat "$openssl/.pgcipher-openssl") | sha256sum | cut -d' ' -f1)
if [ "$(cat "$root/.pgcipher-deb" 2>/dev/null)" != "$stamp" ]; then
    echo "package: unpacking $(basename "$orig"), Debian's layout patches and ours"
    rm -rf "$tree" "$root" "$work/debian"
    mkdir -p "$tree"
    tar -xjf "$orig" -C "$tree" --strip-components=1
    tar -xJf "$debian_tar" -C "$work" debian/patches
    for p in "${layout_patches[@]}"; do
        patch -d "$tree" -p1 --quiet --forward --no-backup-if-mismatch < "$work/debian/patches/$p" \
            || die "Debian's patch $p does not apply"
    done
    for p in "$here/patches/$major"/*.patch; do
        patch -d "$tree" -p1 --quiet --forward --no-backup-if-mismatch < "$p" \
            || die "patch $(basename "$p") does not apply on Debian's layout"
    done
    (cd "$here/src" && find . -type f ! -path './src/test/*') | while read -r f; do
        mkdir -p "$(dirname "$tree/$f")"
        cp "$here/src/$f" "$tree/$f"
    done
    export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache} CCACHE_NOHASHDIR=1
    # the LLVM bitcode through ccache too, given to make alone: the CLANG
    # that pg_config records (and PGXS hands extensions) stays Debian's
    [ -x /usr/lib/ccache/gcc ] && export PATH=/usr/lib/ccache:$PATH
    # autodepend=yes, given to make alone (pg_config --configure stays
    # Debian's): the objects are compiled with the dependency options of
    # the development builds' --enable-depend, so that ccache serves this
    # build's objects that match theirs (all but those that name paths,
    # the version or the socket directory: .ci/run builds these after 18's)
    makeflags=(CLANG="$(ccache_clang)" autodepend=yes)
    echo "package: configure for Debian's layout (log: $work/configure.log)"
    (cd "$tree" && ./configure CC=gcc CFLAGS="$cflags" CPPFLAGS="$cppflags" CXXFLAGS="$cxxflags" \
        LDFLAGS="$ldflags" "${config[@]}" > "$work/configure.log" 2>&1) \
        || { tail -30 "$work/configure.log" >&2; die "configure failed"; }
    # relative paths; pg_config.h hashed without its CONFIGURE_ARGS, which
    # names this checkout (debian-options.sh)
    ccache_direct "$tree" "$openssl"
    echo "package: make -j$jobs (log: $work/make.log)"
    (cd "$tree" && make -j"$jobs" -s "${makeflags[@]}" > "$work/make.log" 2>&1 \
        && make -C contrib -j"$jobs" -s "${makeflags[@]}" >> "$work/make.log" 2>&1 \
        && make -s install DESTDIR="$root" >> "$work/make.log" 2>&1 \
        && make -C contrib -s install DESTDIR="$root" >> "$work/make.log" 2>&1) \
        || { grep -E 'error|Error' "$work/make.log" | head -30 >&2; die "make failed, see $work/make.log"; }
    echo "$stamp" > "$root/.pgcipher-deb"
fi

# the encrypted column types, built with the packaged tree's pg_config
# (relocatable: it names the DESTDIR's paths), installed beside it
rm -rf "$work/columns" "$root/columns"
mkdir -p "$work/columns"
make -C "$work/columns" -f "$top/columns/Makefile" -s PG_CONFIG="$root/usr/lib/postgresql/$major/bin/pg_config" all
make -C "$work/columns" -f "$top/columns/Makefile" -s PG_CONFIG="$root/usr/lib/postgresql/$major/bin/pg_config" \
    install DESTDIR="$work/columns-stage"
mkdir -p "$root/columns"
mv "$work/columns-stage$root/usr" "$root/columns/usr"
rm -rf "$work/columns-stage"

# The private libraries: OpenSSL 3.5 (/usr/lib/pgcipher/openssl) and this
# major's libpq (/usr/lib/postgresql/MAJOR/lib: psql and pg_dump of 18 call
# functions that Debian 12's libpq5, of 15, lacks; the system's libpq5
# stays).  Every program and module finds what it needs relative to itself
# ($ORIGIN/..., wherever it is installed); nothing else keeps a run path.
pklib=/usr/lib/postgresql/$major/lib
cp -L "$root/usr/lib/$multiarch/libpq.so.5" "$root$pklib/libpq.so.5"
find "$root/usr/lib/postgresql/$major" "$root/columns" -type f -print0 |
    while IFS= read -r -d '' f; do
        needed=$(patchelf --print-needed "$f" 2> /dev/null) || continue    # not ELF
        installed=${f#"$root"}
        installed=${installed#/columns}
        dir=$(dirname "$installed")
        rpath=
        if grep -qx 'libpq.so.5' <<< "$needed"; then
            rpath=\$ORIGIN/$(realpath -m --relative-to="$dir" "$pklib")
        fi
        if grep -qE '^lib(crypto|ssl)\.so\.3$' <<< "$needed"; then
            rpath=${rpath:+$rpath:}\$ORIGIN/$(realpath -m --relative-to="$dir" /usr/lib/pgcipher/openssl)
        fi
        if [ -n "$rpath" ]; then
            patchelf --set-rpath "${rpath//\/.\//\/}" "$f"
        else
            patchelf --remove-rpath "$f"
        fi
    done
mkdir -p "$root/usr/lib/pgcipher/openssl"
for l in libcrypto.so.3 libssl.so.3; do
    install -m 644 "$openssl/lib/$l" "$root/usr/lib/pgcipher/openssl/$l"
    # shellcheck disable=SC2016 # $ORIGIN is for the dynamic linker
    patchelf --set-rpath '$ORIGIN' "$root/usr/lib/pgcipher/openssl/$l"
done

# the Go programs
go=$("$top/scripts/go.sh" path)
mkdir -p "$root/usr/bin"
# position-independent, linked by the system's linker with Debian's
# hardening (relro, bind now), as lintian wants of every binary
for p in pgcipher-proxy pgcipher-kms pgcipher-keys; do
    (cd "$top/proxy" && CGO_ENABLED=1 GOFLAGS=-buildvcs=false "$go" build -trimpath -buildmode=pie \
        -ldflags="-s -linkmode=external -extldflags '-Wl,-z,relro -Wl,-z,now'" -o "$root/usr/bin/$p" "./cmd/$p")
done
# the proxy's configuration: every setting, commented (a conffile)
install -D -m 644 "$top/proxy/cmd/pgcipher-proxy/proxy.conf.example" "$root/etc/pgcipher/proxy.conf"

# --- debhelper --------------------------------------------------------------

# fill a template: @MAJOR@ and the other placeholders
maintainer=$(git -C "$top" log -1 --format='%ae' 2>/dev/null || echo "pgcipher@users.noreply.example.org")
fill() {
    sed -e "s|@MAINTAINER@|pgcipher developers <$maintainer>|g" -e "s|@MAJOR@|$major|g" -e "s|@PGVERSION@|$pgdebversion|g" -e "s|@PGUPSTREAM@|$pgupstream|g" \
        -e "s|@PGDEBVERSION@|$pgdebversion|g" -e "s|@VERSION@|$version|g" -e "s|@TOOLSVERSION@|$toolsdeb|g" \
        -e "s|@OPENSSL@|$openssl_version|g" -e "s|@ROOT@|$root|g" -e "s|@SOURCE@|$1|g" \
        -e "s|@DEBVERSION@|$2|g" -e "s|@DATE@|$(date -R -d @"${SOURCE_DATE_EPOCH:-$(git -C "$top" log -1 --format=%ct 2>/dev/null || date +%s)}")|g"
}

# make_source NAME DEBVERSION CONTROL: a source directory whose debian/
# holds the templates of its packages, built with dpkg-buildpackage -b
make_source() {
    local name=$1 debversion=$2 control=$3 dir=$work/src-$1 pkg f base
    rm -rf "$dir"
    mkdir -p "$dir/debian"
    fill "$name" "$debversion" < "$tmpl/$control" > "$dir/debian/control"
    fill "$name" "$debversion" < "$tmpl/changelog.in" > "$dir/debian/changelog"
    fill "$name" "$debversion" < "$tmpl/rules.in" > "$dir/debian/rules"
    chmod 755 "$dir/debian/rules"
    fill "$name" "$debversion" < "$tmpl/copyright" > "$dir/debian/copyright"
    sed -n 's/^Package: //p' "$dir/debian/control" | while read -r pkg; do
        # templates are named for the package with the major left out
        case $pkg in
            pgcipher-postgresql-"$major"-jit) base=jit ;;
            pgcipher-postgresql-pl*-"$major") base=${pkg#pgcipher-postgresql-}; base=${base%-"$major"} ;;
            *) base=$pkg ;;
        esac
        base=${base/pgcipher-postgresql-server-dev-$major/server-dev}
        base=${base/pgcipher-postgresql-client-$major/client}
        base=${base/pgcipher-postgresql-$major/server}
        base=${base/postgresql-$major-pgcipher-columns/columns}
        for f in "$tmpl/$base".*; do
            [ -e "$f" ] || continue
            fill "$name" "$debversion" < "$f" > "$dir/debian/$pkg.${f##*/"$base".}"
        done
    done
    echo "package: dpkg-buildpackage $name $debversion"
    (cd "$dir" && dpkg-buildpackage -b -us -uc > "$work/dpkg-$name.log" 2>&1) \
        || { tail -30 "$work/dpkg-$name.log" >&2; die "dpkg-buildpackage $name failed, see $work/dpkg-$name.log"; }
    mv "$work"/*.deb "$out/"
    rm -f "$work"/*.buildinfo "$work"/*.changes
}

rm -f "$out"/pgcipher-postgresql-*"$major"_*.deb "$out"/pgcipher-postgresql-"$major"-jit_*.deb "$out"/postgresql-"$major"-pgcipher-columns_*.deb
make_source "pgcipher-postgresql-$major" "$pgdeb" control.in
rm -f "$out"/pgcipher-proxy_*.deb "$out"/pgcipher-tools_*.deb "$out"/pgcipher-openssl_*.deb
make_source pgcipher "$toolsdeb" control.tools.in

# a local apt repository: deb [trusted=yes] file:$out ./
(cd "$out" && dpkg-scanpackages --multiversion . /dev/null > Packages 2>/dev/null && gzip -9nkf Packages)

# lintian: errors fail the build; warnings are listed (packaging/README.md
# explains each kind)
lintian --no-tag-display-limit --suppress-tags-from-file "$top/packaging/lintian-suppressed" \
    "$out"/*.deb > "$out/lintian.txt" 2>&1 || true
if grep -q '^E: ' "$out/lintian.txt"; then
    grep '^E: ' "$out/lintian.txt" >&2
    die "lintian found errors (all of its output: $out/lintian.txt)"
fi
echo "package: lintian: $(grep -c '^W: ' "$out/lintian.txt") warnings, 0 errors ($out/lintian.txt)"
# the stamp only if the tree is still the one the build started from
[ -z "$state" ] || [ "$(tree_state)" != "$state" ] || echo "$state" > "$built_from"
ls -1 "$out"/*.deb
