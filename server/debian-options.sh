# debian-options.sh — the configure options and compiler flags of Debian's
# own PostgreSQL packages, for every pgcipher build (sourced by
# server/build.sh for ours and the benchmarks' stock build, by
# bench/peer/build-open-pg-tde.sh, and by scripts/package.sh).
#
# Debian's postgresql-17 and postgresql-18 take their options from
# postgresql-common's server/postgresql.mk; what it gave the pinned uploads
# is what their pg_config --configure prints (postgresql-client-MAJOR), and
# the packages suite compares our package's with it (test/packages: the
# pinned .deb, paths and the tools' versions aside; the suite
# debian-options compares this file with it, both majors).  Paths are the
# caller's.
#
# debian_options MAJOR sets two arrays and four strings:
#   debian_features  feature options, e.g. --with-llvm, in Debian's order
#   debian_tools     the tools Debian names (AWK=mawk, PYTHON=...), and
#                    LLVM_CONFIG and CLANG: the newest LLVM installed, as
#                    postgresql.mk picks it
#   debian_cflags, debian_cppflags, debian_cxxflags, debian_ldflags
#                    the compiler flags Debian's upload was built with:
#                    dpkg-buildflags' with all hardening, as postgresql.mk
#                    exports them, -fno-omit-frame-pointer on amd64 as it
#                    adds; the dpkg that built the upload (trixie's and
#                    later) adds -Werror=implicit-function-declaration and
#                    -fstack-clash-protection -fcf-protection, Debian 12's
#                    does not: added here.  No -ffile-prefix-map: Debian's
#                    flags lack it, and it names the directory the flags
#                    were asked in, which would keep two checkouts from
#                    sharing ccache's objects.
# The OpenSSL is Debian's --with-openssl spelling; ours is the pinned 3.5
# (server/openssl.sh), given by the caller with --with-includes/--with-libraries.

# shellcheck shell=bash
debian_options() {
    local major=$1 llvm_config
    debian_features=(--with-tcl --with-perl --with-python --with-pam --with-openssl
                     --with-libxml --with-libxslt --enable-nls --enable-thread-safety
                     --enable-debug --disable-rpath --with-uuid=e2fs --with-gnu-ld
                     --with-gssapi --with-ldap --with-pgport=5432
                     --with-system-tzdata=/usr/share/zoneinfo --enable-tap-tests
                     --with-icu --with-llvm --with-lz4 --with-zstd)
    # 18: OAuth's libcurl, NUMA, io_method=io_uring
    [ "$major" -ge 18 ] && debian_features+=(--with-libcurl --with-libnuma --with-liburing)
    debian_features+=(--with-systemd --with-selinux --enable-dtrace)
    llvm_config=$(find /usr/bin -maxdepth 1 -name 'llvm-config-*' | sort -V | tail -n 1)
    if [ -z "$llvm_config" ]; then
        echo "no /usr/bin/llvm-config-*: install llvm-dev and clang (./pgcipher deps)" >&2
        return 1
    fi
    debian_tools=(AWK=mawk "MKDIR_P=/bin/mkdir -p" PROVE=/usr/bin/prove PYTHON=/usr/bin/python3
                  TAR=/bin/tar "XSLTPROC=xsltproc --nonet"
                  LLVM_CONFIG="$llvm_config" CLANG="/usr/bin/clang-${llvm_config##*-}")
    # 18: libnuma named without pkg-config, as postgresql.mk does
    [ "$major" -ge 18 ] && debian_tools+=("LIBNUMA_CFLAGS= " LIBNUMA_LIBS=-lnuma)
    debian_cflags="$(debian_buildflag CFLAGS) -Werror=implicit-function-declaration"
    [ "$(dpkg-architecture -qDEB_HOST_ARCH 2> /dev/null)" = amd64 ] && debian_cflags+=" -fno-omit-frame-pointer"
    debian_cppflags=$(debian_buildflag CPPFLAGS)
    debian_cxxflags=$(debian_buildflag CXXFLAGS)
    debian_ldflags=$(debian_buildflag LDFLAGS)
    return 0
}

# dev_configure MAJOR PREFIX OPENSSL: sets build_config, the configure
# arguments of pgcipher's development builds, word for word the same for
# server/build.sh (ours and --stock) and the benchmarks' peer
# (bench/peer/build-open-pg-tde.sh): a plain "gcc" (pg_config --cc hands it
# to every extension; ccache works through its masquerade directory first
# in PATH), Debian's flags (CFLAGS in the environment replaces theirs) with
# a run path to the pinned OpenSSL, Debian's options but --disable-rpath
# (the install tree is used where it is, its programs find its libpq by
# their run path), LLVM's clang through ccache where it has a masquerade
# for it, --enable-depend, and PGCIPHER_CONFIGURE_EXTRA split into words.
dev_configure() {
    local major=$1 prefix=$2 openssl=$3 o
    debian_options "$major" || return 1
    build_config=(CC=gcc "CFLAGS=${CFLAGS:-$debian_cflags}" "CPPFLAGS=$debian_cppflags"
                  "CXXFLAGS=$debian_cxxflags" "LDFLAGS=$debian_ldflags -Wl,-rpath,$openssl/lib"
                  --prefix="$prefix")
    for o in "${debian_features[@]}"; do [ "$o" = --disable-rpath ] || build_config+=("$o"); done
    for o in "${debian_tools[@]}"; do
        case $o in CLANG=*) o=CLANG=$(ccache_clang) ;; esac
        build_config+=("$o")
    done
    # shellcheck disable=SC2206 # split into words on purpose
    build_config+=(--with-includes="$openssl/include" --with-libraries="$openssl/lib"
                   --enable-depend ${PGCIPHER_CONFIGURE_EXTRA:-})
}

# ccache_direct TREE PATH...: after configure, ccache's settings for the
# PostgreSQL build in TREE, so that a build of the same source in another
# checkout (CI's clone, after the last one's) takes its objects in direct
# mode, without running the preprocessor (a preprocessed hit costs an
# eighth of a compile's CPU):
#  - paths relative to the directory above TREE and each PATH (OpenSSL's
#    headers);
#  - pg_config.h, whose CONFIGURE_ARGS names the checkout's paths, left out
#    of the manifests (ignore_headers_in_manifest, matched against the
#    path as the compiler names it: an entry per depth), and the rest of it
#    hashed instead, as OBJC_INCLUDE_PATH, which a C compiler does not read
#    and ccache hashes in direct mode alone, so preprocessed hits stay
#    shared with builds whose pg_config.h differs (a JIT or not, the
#    packages').  Its manual does not say so: each build checks it first
#    (ccache_hashes_objc_path), and ignores nothing where it does not hold;
#  - but ../../src/include/pg_config.h, src/common's (and src/port's and
#    contrib's): config_info.c prints CONFIGURE_ARGS (pg_config
#    --configure), and must not come from a build with another prefix.
ccache_direct() {
    local tree=$1 base=$1 p up="" ignore="" key
    shift
    for p in "$@"; do
        while [ "$base" != / ] && [ "${p#"$base"/}" = "$p" ]; do base=$(dirname "$base"); done
    done
    export CCACHE_BASEDIR=$base
    ccache_hashes_objc_path || return 0
    while [ ${#up} -le 30 ]; do
        [ "$up" = ../../ ] || ignore+=${ignore:+:}${up}src/include/pg_config.h
        up+=../
    done
    key=$(grep -v '^#define CONFIGURE_ARGS ' "$tree/src/include/pg_config.h" | sha256sum | cut -c1-32)
    export CCACHE_IGNOREHEADERS=$ignore
    export OBJC_INCLUDE_PATH=/nonexistent/pgcipher-pg_config-$key${OBJC_INCLUDE_PATH:+:$OBJC_INCLUDE_PATH}
}

# ccache_hashes_objc_path: whether this ccache hashes OBJC_INCLUDE_PATH in
# direct mode and not in preprocessor mode (Debian 12's 4.7 does): two
# compiles of one file in a cache of their own, the variable changed
ccache_hashes_objc_path() {
    local t stats ok=1 v
    command -v ccache > /dev/null || return 1
    t=$(mktemp -d)
    echo 'int pgcipher;' > "$t/a.c"
    for v in a b; do
        (cd "$t" && OBJC_INCLUDE_PATH=/nonexistent/$v CCACHE_DIR=$t/cache ccache gcc -c a.c -o a.o) || ok=0
    done
    stats=$(CCACHE_DIR=$t/cache ccache --print-stats 2> /dev/null)
    rm -rf "$t"
    [ $ok = 1 ] && grep -qx $'direct_cache_hit\t0' <<< "$stats" && grep -qx $'preprocessed_cache_hit\t1' <<< "$stats"
}

# ccache_clang: after debian_options, Debian's CLANG, through ccache's
# masquerade directory where it has one for it (LLVM's bitcode is compiled
# once per object, as the objects are)
ccache_clang() {
    local o clang=
    for o in "${debian_tools[@]}"; do case $o in CLANG=*) clang=${o#CLANG=} ;; esac; done
    if [ -x "/usr/lib/ccache/${clang##*/}" ]; then echo "/usr/lib/ccache/${clang##*/}"; else echo "$clang"; fi
}

# debian_buildflag NAME: one of dpkg-buildflags' variables, as above
debian_buildflag() {
    local flags f out=
    flags=$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get "$1")
    case $1 in CFLAGS | CXXFLAGS) for f in -fstack-clash-protection -fcf-protection; do
        [[ " $flags " == *" $f "* ]] || flags+=" $f"; done ;; esac
    for f in $flags; do [[ $f == -ffile-prefix-map=* ]] || out+="${out:+ }$f"; done
    echo "$out"
}
