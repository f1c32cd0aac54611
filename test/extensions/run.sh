#!/usr/bin/env bash
# run.sh — third-party extensions on encrypted clusters: the ABI rule of
# docs/design.md section 12 (extensions built for stock PostgreSQL load and
# work unchanged), tested with pgvector and TimescaleDB (Debian trixie's
# source packages on 17, upstream's release tags on 18: major_pins below),
# built from source against the build's install tree.
#
#   run.sh pgvector     build and install pgvector (PGXS); its 14 regression
#                       tests (installcheck) on an aes-256 cluster made here,
#                       6 of its TAP files (370 tests: WAL replay on a standby,
#                       VACUUM, concurrent inserts, TOAST storage, input
#                       parsing) on aes-256 clusters (PG_TEST_INITDB_EXTRA_OPTS),
#                       and t/pgvector_leak.pl (markers absent from the data
#                       directory and WAL, found on an unencrypted control)
#   run.sh timescaledb  build and install TimescaleDB's Apache edition (cmake);
#                       t/timescaledb_smoke.pl: hypertable, chunks, aggregates,
#                       drop_chunks, crash and recovery, marker scan with control
#
# Sources: on 17 the pinned source packages below (on 18 upstream's tags,
# below); scripts/fetch-debian-source.sh
# fetches and verifies each orig tarball into $PGCIPHER_BUILD/source (a
# private apt configuration, as for PostgreSQL).  Each is unpacked afresh
# into $PGCIPHER_BUILD/ext/NAME when the tarball or its build options change,
# built there with ccache (nothing is written into the checkout) and
# installed into $PGCIPHER_BUILD/install.  Debian's packaging patches are not
# applied: like the server, the extensions are built from the upstream
# tarballs (TimescaleDB's "+dfsg" tarball is upstream without the
# Timescale-licensed tsl/ directory, hence APACHE_ONLY).
#
# Usage: test/extensions/run.sh pgvector|timescaledb
#   (PGCIPHER_TOP, PGCIPHER_BUILD as for scripts/test.sh; pgvector's own
#    tests use test.sh's key file $PGCIPHER_BUILD/test-keys/kek, made if missing)
set -euo pipefail
# what is unpacked, built and installed must not depend on the caller's umask
umask 022

# Debian's source package names; these and major_pins' variables are read
# by ext_source, through ${!name}
# shellcheck disable=SC2034
PGVECTOR_PACKAGE=pgvector TIMESCALEDB_PACKAGE=timescaledb
# pgvector's TAP tests run here (issue 13: 6 files, 370 tests): WAL replay
# of both index types on a streaming standby (001, 010), HNSW VACUUM (011),
# concurrent HNSW inserts of duplicates from pgbench (015), TOAST storage
# (019), malformed input (037).  Its other 38 files measure recall and
# planner costs on 10^4-10^5 rows: they test pgvector's algorithms, not the
# storage under them, and take far longer.  The counts are checked, so a
# new pin or a skipped file cannot pass unnoticed.
PGVECTOR_TAP="001_ivfflat_wal 010_hnsw_wal 011_hnsw_vacuum 015_hnsw_vector_duplicates 019_storage 037_inputs"

# One pin per PostgreSQL major.  On 17, trixie's source packages (a
# private apt configuration, as for PostgreSQL).  trixie's versions know 17
# but not 18 (pgvector 0.8.0 calls vacuum_delay_point() without 18's
# argument, TimescaleDB 2.19 refuses 18), and sid's, which do, are listed
# by this machine's mirror but not served (November 2026); Debian's binary
# packages built for 18 need sid's glibc (2.38; Debian 12 has 2.36).  So on
# 18 both come from their upstream release tags, pgvector 0.8.6 and
# TimescaleDB 2.29.2: ../shared/vendor's copy where it is there, else the
# tag's archive downloaded from GitHub, checked by the tree hash pinned in
# scripts/vendor.tsv (test/third_party.sh's vendored, NAME_VENDORED below).
# PGVECTOR_TAP_COUNT is empty where it has not been counted yet: then only
# the file count and "All tests successful" are checked.
# shellcheck disable=SC2034
major_pins() {
    case $1 in
        17)
            PGVECTOR_VERSION=0.8.0-1 PGVECTOR_SUITE=trixie
            PGVECTOR_ORIG=pgvector_0.8.0.orig.tar.gz
            PGVECTOR_SHA256=867a2c328d4928a5a9d6f052cd3bc78c7d60228a9b914ad32aa3db88e9de27b0
            PGVECTOR_REGRESS_COUNT=14 PGVECTOR_TAP_COUNT=370
            TIMESCALEDB_VERSION=2.19.3+dfsg-1+deb13u1 TIMESCALEDB_SUITE=trixie
            TIMESCALEDB_ORIG=timescaledb_2.19.3+dfsg.orig.tar.xz
            TIMESCALEDB_SHA256=09fd11191768c220b071f61a108df9bd1df5522fbe4e7c2229f30f69b195454a
            ;;
        18)
            PGVECTOR_VERSION=0.8.6 PGVECTOR_VENDORED=pgvector
            PGVECTOR_REGRESS_COUNT=14 PGVECTOR_TAP_COUNT=370
            TIMESCALEDB_VERSION=2.29.2 TIMESCALEDB_VENDORED=timescaledb
            ;;
        *) echo "extensions: no pinned extension sources for PostgreSQL $1" >&2; exit 1 ;;
    esac
}

top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}
here=$top/test/extensions
prefix=$build/install
pg_config=$prefix/bin/pg_config
ext=$build/ext
jobs=${JOBS:-$(nproc)}
[ -x "$pg_config" ] || { echo "extensions: $pg_config missing: run scripts/build.sh first" >&2; exit 1; }
major=$("$pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
major_pins "$major"

export PATH=$prefix/bin:$PATH
# the server's compiler cache (server/build.sh)
# shellcheck source=test/third_party.sh
. "$top/test/third_party.sh"
use_ccache "$build"
kek=$(test_kek "$build")
aes256_opts="--encryption=aes-256 --encryption-key-command='cat $kek'"

# unpack NAME TARBALL SHA256 STAMP: a fresh $ext/NAME when tarball or stamp
# changed (TARBALL: a path, or a file name in $build/source)
unpack() {
    local name=$1 orig=$2 stamp
    [[ $orig == /* ]] || orig=$build/source/$orig
    stamp=$(echo "$3 $4" | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$ext/$name/.pgcipher-ext" 2>/dev/null)" != "$stamp" ]; then
        echo "extensions: unpacking $(basename "$orig") into $ext/$name"
        rm -rf "${ext:?}/$name" "$ext/$name.tmp"
        mkdir -p "$ext/$name.tmp"
        tar -xf "$orig" -C "$ext/$name.tmp" --strip-components=1 --no-same-owner
        echo "$stamp" > "$ext/$name.tmp/.pgcipher-ext"
        mv "$ext/$name.tmp" "$ext/$name"
    fi
}

# our own TAP files t/NAME.pl (clusters and logs in $ext/tap/NAME/tmp_check)
# shellcheck source=test/prove_tap.sh
. "$top/test/prove_tap.sh"

# OPTFLAGS="": no -march=native (as Debian builds it), so the build and
# ccache's entries do not depend on this machine's CPU
pgvector_make=(PG_CONFIG="$pg_config" OPTFLAGS=)

# fetch PACKAGE VERSION ORIG SHA256 SUITE: the pinned orig tarball, or
# return 2 (a skip, said plainly) where this machine's mirror lists the
# version but does not serve its files (sid's pool, seen in November 2026)
fetch() {
    local out
    if out=$("$top/scripts/fetch-debian-source.sh" "$build" "$@" 2>&1); then
        echo "$out"
        return 0
    fi
    echo "$out"
    if grep -q "could not download" <<< "$out"; then
        echo "extensions: SKIPPED: this machine's Debian mirror does not serve $1 $2 ($5), the version pinned for PostgreSQL $major;"
        echo "extensions: nothing else here builds against $major (see test/extensions/run.sh); ./pgcipher test --pg 17 $1 runs it on 17"
        return 2
    fi
    return 1
}

# ext_source NAME: the pinned source of extension NAME (pgvector, timescaledb)
# on this major into SOURCE and SOURCE_ID: a vendored tarball's path and the
# version, or the Debian orig tarball fetched into $build/source and its
# sha256; returns 2 (a skip) where it cannot be had
ext_source() {
    local up=${1^^} path
    local vendored_name=${up}_VENDORED version=${up}_VERSION
    if [ -n "${!vendored_name:-}" ]; then
        path=$(vendored extensions "${!vendored_name}") || return
        SOURCE=$path SOURCE_ID=${!version}
        return 0
    fi
    local pkg=${up}_PACKAGE orig=${up}_ORIG sha=${up}_SHA256 suite=${up}_SUITE
    fetch "${!pkg}" "${!version}" "${!orig}" "${!sha}" "${!suite}" || return
    SOURCE=${!orig} SOURCE_ID=${!sha}
}

build_pgvector() {
    ext_source pgvector || return
    unpack pgvector "$SOURCE" "$SOURCE_ID" "${pgvector_make[*]}"
    echo "extensions: building pgvector $PGVECTOR_VERSION"
    make -C "$ext/pgvector" -s -j"$jobs" "${pgvector_make[@]}" all
    make -C "$ext/pgvector" -s "${pgvector_make[@]}" install
}

test_pgvector() {
    local dir=$ext/pgvector t tests=() rc=0
    # regression tests (installcheck) on an aes-256 cluster of our own: a
    # socket in a private directory, no TCP, stopped afterwards
    local cl=$dir/regress-cluster port=55197
    # one left running by an interrupted run
    [ -f "$cl/data/postmaster.pid" ] && { pg_ctl -D "$cl/data" -m immediate -w stop > /dev/null 2>&1 || true; }
    rm -rf "$cl" "$dir/results" "$dir/regression.diffs"; mkdir -p "$cl"
    eval "initdb -D '$cl/data' -A trust -N $aes256_opts" > "$cl/initdb.log" \
        || { cat "$cl/initdb.log"; return 1; }
    pg_ctl -D "$cl/data" -l "$cl/server.log" -w -o "-p $port -k '$cl' -c listen_addresses=''" start > /dev/null \
        || { cat "$cl/server.log"; return 1; }
    if [ "$(psql -h "$cl" -p $port -X -At -d postgres -c 'SHOW data_encryption')" != aes-256 ]; then
        echo "extensions: the regression cluster is not aes-256" >&2; rc=1
    elif ! PGHOST=$cl PGPORT=$port make -C "$dir" "${pgvector_make[@]}" installcheck | tee "$dir/regress.out"; then
        head -100 "$dir/regression.diffs" 2>/dev/null; rc=1
    elif ! grep -q "^# All ${PGVECTOR_REGRESS_COUNT:-[0-9]*} tests passed" "$dir/regress.out"; then
        echo "extensions: expected $PGVECTOR_REGRESS_COUNT regression tests of pgvector" >&2; rc=1
    fi
    pg_ctl -D "$cl/data" -m fast -w stop > /dev/null
    [ $rc = 0 ] || return $rc
    # TAP tests: every cluster PostgreSQL::Test::Cluster makes is aes-256
    # (checked in each test's log)
    for t in $PGVECTOR_TAP; do tests+=("test/t/$t.pl"); done
    PG_TEST_INITDB_EXTRA_OPTS="$aes256_opts" TESTDATADIR="$dir/tmp_check" TESTLOGDIR="$dir/tmp_check/log" \
        make -C "$dir" "${pgvector_make[@]}" prove_installcheck PROVE_TESTS="${tests[*]}" | tee "$dir/tap.out"
    grep -q "^Files=${#tests[@]}, Tests=${PGVECTOR_TAP_COUNT:-[0-9]*}," "$dir/tap.out" \
        || { echo "extensions: expected ${#tests[@]} TAP files with $PGVECTOR_TAP_COUNT tests of pgvector" >&2; return 1; }
    for t in $PGVECTOR_TAP; do
        grep -q '^Data encryption is enabled (aes-256' "$dir/tmp_check/log/regress_log_$t" \
            || { echo "extensions: $t did not run on an aes-256 cluster" >&2; return 1; }
    done
    # markers in a vector table: absent with aes-256, found without
    PGVECTOR_EXTVERSION=${PGVECTOR_VERSION%-*} prove_tap "$ext/tap/pgvector_leak" "$here/t/pgvector_leak.pl"
}

build_timescaledb() {
    ext_source timescaledb || return
    local cc=gcc launcher=()
    command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache)
    # Apache edition only; no tests of its own (they need its source tree's
    # test harness, not an installation), no telemetry (as Debian builds it);
    # no git: the tree sits inside pgcipher's checkout, whose commit must
    # not end up in the library (nor in ccache's keys)
    local cmake_opts=(-DPG_CONFIG="$pg_config" -DCMAKE_BUILD_TYPE=RelWithDebInfo
        -DCMAKE_C_COMPILER="$cc" "${launcher[@]}"
        -DAPACHE_ONLY=ON -DREGRESS_CHECKS=OFF -DTAP_CHECKS=OFF -DWARNINGS_AS_ERRORS=OFF
        -DSEND_TELEMETRY_DEFAULT=OFF -DUSE_TELEMETRY=OFF -DCMAKE_DISABLE_FIND_PACKAGE_Git=ON)
    unpack timescaledb "$SOURCE" "$SOURCE_ID" "${cmake_opts[*]}"
    local dir=$ext/timescaledb
    if [ ! -f "$dir/build/Makefile" ]; then
        echo "extensions: cmake ${cmake_opts[*]}"
        (cd "$dir" && cmake -S . -B build "${cmake_opts[@]}" > "$dir/cmake.log" 2>&1) \
            || { tail -30 "$dir/cmake.log" >&2; echo "extensions: cmake failed, see $dir/cmake.log" >&2; return 1; }
    fi
    echo "extensions: building timescaledb $TIMESCALEDB_VERSION"
    make -C "$dir/build" -s -j"$jobs" > "$dir/make.log" 2>&1 \
        || { grep -E 'error|Error' "$dir/make.log" | head -40 >&2; echo "extensions: make failed, see $dir/make.log" >&2; return 1; }
    make -C "$dir/build" -s install > "$dir/install.log" 2>&1 \
        || { tail -20 "$dir/install.log" >&2; return 1; }
}

test_timescaledb() {
    TIMESCALEDB_EXTVERSION=${TIMESCALEDB_VERSION%%+*} prove_tap "$ext/tap/timescaledb_smoke" "$here/t/timescaledb_smoke.pl"
}

# a skip (2) ends the suite with success, its reason printed
run() {
    local rc=0
    "build_$1" || rc=$?
    [ $rc = 2 ] && exit 0
    [ $rc = 0 ] || exit $rc
    "test_$1"
}

case ${1:-} in
    pgvector)    run pgvector ;;
    timescaledb) run timescaledb ;;
    *) echo "usage: run.sh pgvector|timescaledb" >&2; exit 1 ;;
esac
