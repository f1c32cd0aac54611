#!/usr/bin/env bash
# run.sh — Citus, the distributed engine, built unchanged against pgcipher
# and run on encrypted nodes (issue 27).
#
#   run.sh build   configure and build Citus 14.0.1 as a PGXS extension
#                  against $PGCIPHER_BUILD/install, with the compiler
#                  pg_config reports (no CC override: server/build.sh keeps
#                  it a plain gcc, and Citus's configure takes CC as one
#                  word), and install it there
#   run.sh build-stock
#                  the same against the stock build, $PGCIPHER_BUILD/stock/
#                  install (the citus benchmark's baseline), built in
#                  $PGCIPHER_BUILD/stock/citus
#   run.sh tap     the build, then our TAP files: t/citus_smoke.pl (one
#                  aes-256 node holding its own shards: distributed,
#                  reference and columnar tables answer as without Citus)
#                  and t/citus_cluster.pl (a coordinator and two workers,
#                  each aes-256 with its own key, TLS between them: markers
#                  through distributed, reference and columnar tables, 2PC,
#                  a rebalance and a shard move, intermediate results,
#                  spills; every node's data directory scanned, with an
#                  unencrypted control cluster) and t/citus_columns.pl
#                  (always-encrypted columns distributed by Citus, through
#                  pgcipher-proxy in front of the coordinator: answers
#                  equal to a plaintext twin's, nothing sent in plaintext)
#   run.sh regress [--full|--schedule TARGET] [--control]
#                  the build, then Citus's own regression schedules on
#                  aes-256 nodes (coordinator and both workers).  Every
#                  failure must be one that regress-expected-failures
#                  explains (it fails on unencrypted nodes too: this
#                  machine, not encryption); a schedule with a failure it
#                  does not explain runs again on unencrypted nodes of the
#                  same build, which tells the two apart.  --control runs
#                  every schedule on both and requires each test to end the
#                  same way.  CI runs minimal, base, columnar and the first
#                  part of multi; --full runs all of multi and multi_1;
#                  --schedule TARGET runs one (check-multi,
#                  custom:multi_1_schedule)
#
# Citus is in no registry this machine reaches, so its source comes from
# ../shared/vendor beside the checkout where that is there, else from
# upstream's archive of tag v14.0.1 (https://github.com/citusdata/citus),
# downloaded into $PGCIPHER_BUILD/source; either is checked against the
# tree hash pinned in scripts/vendor.tsv (test/third_party.sh's vendored).
# Where neither can be had, the suite says so and skips.  Built in
# $PGCIPHER_BUILD/citus; nothing is written into the checkout.
#
# Usage: test/citus/run.sh build|build-stock|tap|regress [--full|--schedule TARGET] [--control]
#        (PGCIPHER_TOP, PGCIPHER_BUILD as for scripts/test.sh)
set -euo pipefail
umask 022

CITUS_VERSION=14.0.1	# scripts/vendor.tsv pins its source

top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}
here=$top/test/citus
case ${1:-} in
    build-stock) prefix=$build/stock/install citus_dir=$build/stock/citus ;;
    *) prefix=$build/install citus_dir=$build/citus ;;
esac
jobs=${JOBS:-$(nproc)}
[ -x "$prefix/bin/pg_config" ] || { echo "citus: $prefix missing: run scripts/build.sh first" >&2; exit 1; }
export PATH=$prefix/bin:$PATH
# shellcheck source=test/third_party.sh
. "$top/test/third_party.sh"
use_ccache "$build"

build_citus() {
    local tarball src=$citus_dir/citus-$CITUS_VERSION stamp
    tarball=$(vendored citus citus) || return
    # built again when the server's install tree changed under it
    # with libcurl, Citus's default: a PostgreSQL configured as Debian's
    # (18: --with-libcurl, for OAuth) defines HAVE_LIBCURL in pg_config.h,
    # which Citus's code reads too, so --without-libcurl would compile its
    # curl calls without linking libcurl (citus.so: undefined symbol
    # curl_easy_perform).  Its telemetry stays off all the same:
    # citus.enable_statistics_collection is off unless a packager defines
    # ENABLE_CITUS_STATISTICS_COLLECTION.
    local options=(PG_CONFIG="$prefix/bin/pg_config" --with-libcurl)
    # one build at a time: bench's citus scenario and the citus suites
    # (which run beside it, in the second lane of scripts/test.sh) both
    # call it; the lock goes with the process
    exec {lock}>"$build/citus-build.lock"
    flock "$lock"
    stamp=$( (cat "$prefix/.pgcipher-major" "$prefix/bin/pg_config"; echo "${options[*]}") | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$src/.pgcipher-citus" 2>/dev/null)" != "$stamp" ]; then
        echo "citus: building Citus $CITUS_VERSION against $prefix (pg_config --cc: $(pg_config --cc))"
        rm -rf "$citus_dir"; mkdir -p "$src"
        tar -xzf "$tarball" -C "$src" --strip-components=1 --no-same-owner
        (cd "$src" && ./configure "${options[@]}" > "$citus_dir/configure.log" 2>&1) \
            || { tail -30 "$citus_dir/configure.log" >&2; echo "citus: configure failed" >&2; return 1; }
        make -C "$src" -s -j"$jobs" > "$citus_dir/make.log" 2>&1 \
            || { grep -E 'error|Error' "$citus_dir/make.log" | head -30 >&2; return 1; }
        echo "$stamp" > "$src/.pgcipher-citus"
    fi
    # installed already, by this build: not again, since servers of the
    # other lane may be loading it
    if [ "$(cat "$citus_dir/.installed" 2>/dev/null)" = "$stamp" ] &&
        cmp -s "$src/src/backend/distributed/citus.so" "$(pg_config --pkglibdir)/citus.so"; then
        echo "citus: Citus $CITUS_VERSION is installed into $prefix"
        flock -u "$lock"
        return 0
    fi
    make -C "$src" -s install > "$citus_dir/install.log" 2>&1 \
        || { tail -20 "$citus_dir/install.log" >&2; return 1; }
    echo "$stamp" > "$citus_dir/.installed"
    flock -u "$lock"
    echo "citus: Citus $CITUS_VERSION installed into $prefix"
}

# shellcheck source=test/prove_tap.sh
. "$top/test/prove_tap.sh"

# Citus's regression schedules, run by its own driver (pg_regress_multi.pl,
# through its Makefile's targets).  The driver runs initdb with fixed
# arguments; initdb's environment defaults (PGCIPHER_ENCRYPTION,
# PGCIPHER_ENCRYPTION_KEY_COMMAND: docs/design.md section 8) make every
# node it creates aes-256 without a change to Citus.
#
# check-minimal loads the hll extension, whose Debian source package
# (postgresql-hll) this machine's mirror does not serve: its schedule runs
# through check-custom-schedule, which loads citus alone (no test in it uses
# hll; multi's two hll tests have expected outputs for its absence).
regress_targets() {
    case ${1:-} in
        --full) echo "custom:minimal_schedule check-base check-columnar check-multi custom:multi_1_schedule" ;;
        --schedule) echo "${2:?--schedule needs a target, e.g. custom:multi_1_schedule}" ;;
        *) echo "custom:minimal_schedule check-base check-columnar custom:multi_part_schedule" ;;
    esac
}
# How much of multi_schedule CI runs: its first lines (setup, then tests),
# a prefix so that each test finds what the ones before it made
MULTI_PART_LINES=60

# schedule_name TARGET: what a target's results are called
# (custom:multi_part_schedule -> multi_part, check-base -> base)
schedule_name() {
    local name=${1#custom:}
    name=${name%_schedule}
    echo "${name#check-}"
}

# run_schedule TARGET CONFIG: one target on aes-256 or unencrypted nodes;
# the test statuses in $out/CONFIG/NAME.status ("ok NAME" / "failed NAME")
run_schedule() {
    local target=$1 config=$2 regress=$src/src/test/regress name make_args=() d
    name=$(schedule_name "$target")
    if [[ $target == custom:* ]]; then make_args=(check-custom-schedule "SCHEDULE=${target#custom:}" WORKERCOUNT=2)
    else make_args=("$target"); fi
    d=$out/$config; mkdir -p "$d"
    rm -rf "$regress/results" "$regress/regression.diffs" "$regress/regression.out" "$regress/tmp_check"
    echo "citus: $name on $config nodes ($(date +%H:%M:%S))"
    if [ "$config" = aes-256 ]; then
        PGCIPHER_ENCRYPTION=aes-256 PGCIPHER_ENCRYPTION_KEY_COMMAND="cat $kek" \
            make -C "$regress" -s "${make_args[@]}" > "$d/$name.log" 2>&1 || true
    else
        env -u PGCIPHER_ENCRYPTION -u PGCIPHER_ENCRYPTION_KEY_COMMAND \
            make -C "$regress" -s "${make_args[@]}" > "$d/$name.log" 2>&1 || true
    fi
    cp "$regress/regression.diffs" "$d/$name.diffs" 2>/dev/null || true
    # every node the driver made has the configuration asked for
    local want=off node n=0
    [ "$config" = aes-256 ] && want=aes-256
    for node in "$regress"/tmp_check/master/data "$regress"/tmp_check/worker.*/data; do
        [ -f "$node/global/pg_control" ] || continue
        n=$((n + 1))
        pg_controldata "$node" | grep -q "^Data encryption: *$want\$" \
            || { echo "citus: $node is not $want" >&2; return 1; }
    done
    [ $n -ge 3 ] || { echo "citus: $name: expected a coordinator and two workers, found $n nodes" >&2; tail -20 "$d/$name.log" >&2; return 1; }
    # pg_regress's TAP-like lines: "ok 12 + name  34 ms", "not ok 13 - name"
    sed -nE 's/^ok +[0-9]+ +[-+]? *([^ ]+).*/ok \1/p; s/^not ok +[0-9]+ +[-+]? *([^ ]+).*/failed \1/p' \
        "$d/$name.log" | sort -k2 > "$d/$name.status"
    [ -s "$d/$name.status" ] || { echo "citus: $name ran no test on $config nodes" >&2; tail -20 "$d/$name.log" >&2; return 1; }
    echo "citus: $name on $config nodes: $(grep -c '^ok' "$d/$name.status") passed, $(grep -c '^failed' "$d/$name.status") failed"
}

# regress [--full|--schedule TARGET] [--control]: every target on aes-256
# nodes, then the verdicts.  A failure regress-expected-failures lists
# failed on unencrypted nodes too when it was listed; one it does not list
# sends its schedule to unencrypted nodes of the same build, the control,
# which tells an encryption bug (passes there) from this machine (fails
# there too: to be listed, with the reason).  --control runs every target
# on both configurations and requires the same status per test (as CI did
# before: twice the time for the same verdict when nothing fails).
regress() {
    local src=$build/citus/citus-$CITUS_VERSION out=$build/citus/regress target name rc=0 t
    local kek control=0 args=() unexplained
    for t in "$@"; do
        if [ "$t" = --control ]; then control=1; else args+=("$t"); fi
    done
    kek=$(test_kek "$build")
    head -n "$MULTI_PART_LINES" "$src/src/test/regress/multi_schedule" > "$src/src/test/regress/multi_part_schedule"
    rm -rf "$out"; mkdir -p "$out"
    local expected=$here/regress-expected-failures
    for target in $(regress_targets "${args[@]}"); do
        name=$(schedule_name "$target")
        run_schedule "$target" aes-256 || return 1
        unexplained=()
        while read -r t; do
            grep -q "^$t " "$expected" || unexplained+=("$t")
        done < <(sed -n 's/^failed //p' "$out/aes-256/$name.status")
        if [ "$control" = 1 ] || [ ${#unexplained[@]} -gt 0 ]; then
            run_schedule "$target" unencrypted || return 1
        fi
        if [ -f "$out/unencrypted/$name.status" ] &&
            ! diff -u "$out/unencrypted/$name.status" "$out/aes-256/$name.status" > "$out/$name.status.diff"; then
            echo "citus: $name: tests end differently on aes-256 and unencrypted nodes:" >&2
            cat "$out/$name.status.diff" >&2; rc=1
        fi
        for t in "${unexplained[@]}"; do
            if grep -q "^failed $t\$" "$out/unencrypted/$name.status"; then
                echo "citus: $name: $t failed on aes-256 and on unencrypted nodes (this machine?), and regress-expected-failures does not explain it:" >&2
            else
                echo "citus: $name: $t failed on aes-256 nodes only:" >&2
            fi
            sed -n "/^diff .*\/$t.out/,/^diff /p" "$out/aes-256/$name.diffs" | head -60 >&2
            rc=1
        done
        printf 'citus: %-8s %4d tests, %4d passed, %2d failed (%d of them unexplained), %s\n' "$name" \
            "$(wc -l < "$out/aes-256/$name.status")" "$(grep -c '^ok' "$out/aes-256/$name.status")" \
            "$(grep -c '^failed' "$out/aes-256/$name.status")" "${#unexplained[@]}" \
            "$(if [ ! -f "$out/unencrypted/$name.status" ]; then echo 'no control needed'
               elif [ -s "$out/$name.status.diff" ]; then echo 'NOT identical to unencrypted'
               else echo 'identical to unencrypted'; fi)"
    done
    return $rc
}

rc=0
case ${1:-} in
    build | build-stock) build_citus || rc=$? ;;
    tap)
        build_citus || rc=$?
        [ $rc = 0 ] && { prove_tap "$build/citus/tap/smoke" "$here/t/citus_smoke.pl" || rc=$?; }
        [ $rc = 0 ] && { prove_tap "$build/citus/tap/cluster" "$here/t/citus_cluster.pl" || rc=$?; }
        [ $rc = 0 ] && { PGCIPHER_BIN=$build/bin prove_tap "$build/citus/tap/columns" "$here/t/citus_columns.pl" || rc=$?; } ;;
    regress)
        shift
        build_citus || rc=$?
        [ $rc = 0 ] && { regress "$@" || rc=$?; } ;;
    *) echo "usage: run.sh build|build-stock|tap|regress [--full|--schedule TARGET] [--control]" >&2; exit 1 ;;
esac
# a skip (2) ends the suite with success, its reason printed
[ $rc = 2 ] && exit 0
exit $rc
