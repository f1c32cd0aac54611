# shellcheck shell=bash
# third_party.sh — sourced by test/extensions/run.sh, test/tools/run.sh,
# test/citus/run.sh (and scripts/test.sh, for test_kek): what building someone else's source against our tree
# and running its tests on encrypted clusters needs in each of them.
#
# vendored TAG FILE SHA256 HOW: the pinned tarball FILE from ../shared/vendor
# ($PGCIPHER_VENDOR), checked; prints its path.  Returns 2 (a skip, said
# plainly on stdout with HOW, where a user gets the same file) when absent,
# 1 when its sha256 differs.
vendored() {
    local tag=$1 file=$2 sha=$3 how=$4
    local tarball=${PGCIPHER_VENDOR:-${PGCIPHER_TOP:?}/../shared/vendor}/$file
    if [ ! -f "$tarball" ]; then
        echo "$tag: SKIPPED: $tarball is not here (a clone has no ../shared);" >&2
        echo "$tag: $how" >&2
        return 2
    fi
    echo "$sha  $tarball" | sha256sum --quiet -c - \
        || { echo "$tag: sha256 mismatch for $tarball" >&2; return 1; }
    echo "$tarball"
}

# use_ccache BUILD_DIR: the server's compiler cache for PGXS and cmake
# builds.  pg_config --cc is a plain gcc (server/build.sh), so ccache's
# masquerade directory goes first in PATH; paths relative to the build
# directory, so that other checkouts hit the same entries.
use_ccache() {
    export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$1} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
    if [ -x /usr/lib/ccache/gcc ]; then export PATH=/usr/lib/ccache:$PATH; fi
}

# test_kek BUILD_DIR: the key file of every encrypted cluster the suites
# make, BUILD_DIR/test-keys/kek (64 hex digits, made if missing); prints
# its path
test_kek() {
    local kek=$1/test-keys/kek
    if [ ! -s "$kek" ]; then
        mkdir -p "$(dirname "$kek")"
        { od -An -tx1 -N32 /dev/urandom | tr -d ' \n'; echo; } > "$kek"
    fi
    chmod 600 "$kek"
    echo "$kek"
}
