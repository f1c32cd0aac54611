# shellcheck shell=bash
# third_party.sh — sourced by test/extensions/run.sh, test/tools/run.sh,
# test/citus/run.sh (and scripts/test.sh, for test_kek): what building someone else's source against our tree
# and running its tests on encrypted clusters needs in each of them.
#
# vendored TAG NAME: the pinned source NAME of scripts/vendor.tsv, checked
# by its tree hash (scripts/vendor.py): ../shared/vendor's copy
# ($PGCIPHER_VENDOR), else one downloaded before into
# $PGCIPHER_BUILD/source, else downloaded now from its upstream URL (or
# $PGCIPHER_VENDOR_MIRROR), with progress; prints its path.  Its top
# directory is upstream's or the vendored copy's: unpack it with
# --strip-components=1.  Returns 2 (a skip, said in one line beginning
# "TAG: SKIPPED:") where it cannot be had, 1 when a hash differs.
vendored() {
    python3 "${PGCIPHER_TOP:?}/scripts/vendor.py" get "$2" --tag "$1" --dest "${PGCIPHER_BUILD:?}/source"
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
