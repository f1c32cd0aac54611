#!/usr/bin/env bash
# run.sh — drivers' own test suites through pgcipher-proxy (README.md here).
#
# Starts a throwaway aes-256 cluster with TLS (a self-signed certificate
# for localhost) and SCRAM for one role, and pgcipher-proxy in front of it
# as a DBA would set it up: the server's own certificate and key (SCRAM
# channel binding passes through for clients that come with TLS) and a
# TLS link to the server with sslmode=prefer (a client that comes without
# TLS and supports binding gets a plain one).  Each driver's suite runs
# twice, directly and through the proxy, on a fresh database each time;
# compare.py then requires the same result test by test, except what
# known.txt lists with its reason; what differs runs once more on both
# sides and must differ again (asyncpg's pool tests fail now and then
# directly on a busy machine).  A hang is a failure (a timeout per
# test file).
#   asyncpg         asyncpg 0.32.0's tests/ (PyPI's sdist) with pytest,
#                   against a running server (PGHOST: the tests that
#                   manage clusters of their own skip on both sides);
#                   asyncpg's default sslmode=prefer: TLS on both legs
#   node-postgres   node-postgres 8.16.3's test/integration (Debian's
#                   source of node-pg; npm's tarball has no tests) with
#                   its lib, file by file as its Makefile runs them, with
#                   its SCRAM tests on (channel binding asked for over a
#                   plain link) and its TLS tests
#
# Usage: run.sh [DRIVER...]   (default: asyncpg node-postgres)
# Environment: PGCIPHER_TOP, PGCIPHER_BUILD (as scripts/test.sh);
#   PGCIPHER_DRIVERS_KEEP=1   keep the temporary directory on success
set -euo pipefail
top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}
here=$top/proxy/test/drivers
bin=$build/install/bin
cache=$build/drivers
all=(asyncpg node-postgres)
drivers=("$@")
[ ${#drivers[@]} -gt 0 ] || drivers=("${all[@]}")
for d in "${drivers[@]}"; do
    [[ " ${all[*]} " == *" $d "* ]] || { echo "run.sh: unknown driver $d (${all[*]})" >&2; exit 2; }
done
[ "$(id -u)" != 0 ] || { echo "run.sh: run as an ordinary user (PostgreSQL refuses root)" >&2; exit 2; }
[ -x "$build/bin/pgcipher-proxy" ] || { echo "run.sh: no pgcipher-proxy in $build/bin (./pgcipher build)" >&2; exit 2; }
mkdir -p "$cache"

# --- the pinned sources ---------------------------------------------------
asyncpg_version=0.32.0
asyncpg_sha256=45e64e56714d888330b884aad1dfb363d0bf43fb343e3d1a8968525f3bade478
asyncpg_url=https://files.pythonhosted.org/packages/80/4e/59dc964f962f09e3ed472e5d2d3ba670a41a2be25080dc62ab3db507ff5e/asyncpg-$asyncpg_version.tar.gz
nodepg_version=8.16.3
nodepg_debian=8.16.3+~cs35.24.27-5
nodepg_orig=node-postgres_8.16.3+~cs35.24.27.orig.tar.gz
nodepg_sha256=03803c9ccfca47b63bf57bf3f166002ee64652a7e26c2d91fb94da19d769381e
# snapshot.debian.org keeps every file Debian published, by its sha1
nodepg_snapshot=https://snapshot.debian.org/file/e917142122a594b78506f34e634f9ce473d4bf86

verified() { echo "$2  $1" | sha256sum --quiet -c - 2>/dev/null; }

asyncpg_tests() {
    local tarball=$cache/asyncpg-$asyncpg_version.tar.gz
    if ! verified "$tarball" "$asyncpg_sha256"; then
        curl -fsSL --retry 3 -o "$tarball" "$asyncpg_url" || { echo "run.sh: cannot download $asyncpg_url" >&2; return 1; }
        verified "$tarball" "$asyncpg_sha256" || { echo "run.sh: sha256 mismatch for $tarball" >&2; return 1; }
        rm -rf "$cache/asyncpg-$asyncpg_version"
    fi
    [ -d "$cache/asyncpg-$asyncpg_version/tests" ] ||
        tar -xzf "$tarball" -C "$cache" "asyncpg-$asyncpg_version/tests"
    "$top/scripts/venv.sh" "$here/asyncpg/requirements.txt" "$cache/venv-asyncpg"
}

nodepg_tree() {
    local tree=$cache/node-postgres-pg-$nodepg_version stamp
    if ! verified "$cache/$nodepg_orig" "$nodepg_sha256"; then
        # Debian's pool (the private apt configuration of the server's
        # sources), then snapshot.debian.org once sid has moved on
        "$top/scripts/fetch-debian-source.sh" "$cache" node-postgres "$nodepg_debian" "$nodepg_orig" \
            "$nodepg_sha256" sid > "$cache/fetch.log" 2>&1 && cp "$cache/source/$nodepg_orig" "$cache/" ||
            curl -fsSL --retry 3 -o "$cache/$nodepg_orig" "$nodepg_snapshot" ||
            { cat "$cache/fetch.log"; echo "run.sh: cannot download $nodepg_orig" >&2; return 1; }
        verified "$cache/$nodepg_orig" "$nodepg_sha256" || { echo "run.sh: sha256 mismatch for $nodepg_orig" >&2; return 1; }
        rm -rf "$tree"
    fi
    [ -d "$tree" ] || tar -xzf "$cache/$nodepg_orig" -C "$cache"
    # the lib's dependencies and the tests' (async, co, bluebird,
    # pg-copy-streams), pinned by our lock file; no peer "pg" from npm
    stamp=$(cat "$here/node-postgres/package.json" "$here/node-postgres/package-lock.json" | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$tree/.pgcipher-deps" 2>/dev/null)" != "$stamp" ]; then
        cp "$here/node-postgres/package.json" "$here/node-postgres/package-lock.json" "$tree/"
        (cd "$tree" && npm ci --no-audit --no-fund --legacy-peer-deps > "$cache/npm.log" 2>&1) ||
            { cat "$cache/npm.log"; return 1; }
        echo "$stamp" > "$tree/.pgcipher-deps"
    fi
}

for d in "${drivers[@]}"; do
    case $d in
        asyncpg) asyncpg_tests ;;
        node-postgres) nodepg_tree ;;
    esac
done

# --- the server and the proxy ---------------------------------------------
# shellcheck source=proxy/test/lib.sh
. "$top/proxy/test/lib.sh"
tmp=$(mktemp -d /tmp/pgc-drv.XXXXXX)
proxy_pid=
status=1
# shellcheck disable=SC2317  # run by the trap
cleanup() {
    stop_proxy
    "$bin/pg_ctl" -D "$tmp/data" -m immediate stop > /dev/null 2>&1 || true
    if [ "$status" = 0 ] && [ "${PGCIPHER_DRIVERS_KEEP:-}" != 1 ]; then rm -rf "$tmp"; else echo "kept $tmp"; fi
}
trap cleanup EXIT

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$tmp/server.key" -out "$tmp/server.crt" > "$tmp/openssl.log" 2>&1 || { cat "$tmp/openssl.log"; exit 1; }
chmod 600 "$tmp/server.key"
# shellcheck source=test/third_party.sh
. "$top/test/third_party.sh"
kek=$(test_kek "$build")
"$bin/initdb" -D "$tmp/data" -A trust -U postgres --no-locale -E UTF8 \
    --encryption=aes-256 --encryption-key-command="cat $kek" > "$tmp/initdb.log" 2>&1 ||
    { cat "$tmp/initdb.log"; exit 1; }
server_port=$(free_port)
cat >> "$tmp/data/postgresql.conf" <<CONF
port = $server_port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$tmp'
max_connections = 200
fsync = off
ssl = on
ssl_cert_file = '$tmp/server.crt'
ssl_key_file = '$tmp/server.key'
password_encryption = 'scram-sha-256'
# node-postgres's empty-password test leaves its login unanswered: the
# server ends it after this, directly and through the proxy alike
authentication_timeout = 5s
log_min_messages = warning
CONF
# node-postgres's SCRAM tests: a role that must prove its password
{ echo "host all scram_test 127.0.0.1/32 scram-sha-256"; cat "$tmp/data/pg_hba.conf"; } > "$tmp/hba"
mv "$tmp/hba" "$tmp/data/pg_hba.conf"
"$bin/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -w start > /dev/null || { cat "$tmp/server.log"; exit 1; }
"$bin/psql" -X -q -h "$tmp" -p "$server_port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
    -c "CREATE ROLE scram_test LOGIN PASSWORD 'test4scram'" > /dev/null
"$build/bin/pgcipher-keys" new-cmk > "$tmp/cmk.hex"
proxy_port=$(free_port "$server_port")
"$build/bin/pgcipher-proxy" --listen "127.0.0.1:$proxy_port" \
    --upstream "host=127.0.0.1 port=$server_port sslmode=prefer" \
    --catalog "host=$tmp port=$server_port user=postgres" \
    --tls-cert "$tmp/server.crt" --tls-key "$tmp/server.key" \
    --cmk-file "$tmp/cmk.hex" > "$tmp/proxy.log" 2>&1 &
proxy_pid=$!
wait_proxy "$proxy_port" "$tmp/proxy.log"

# fresh_db NAME: a new database for one run, made directly
fresh_db() {
    PGOPTIONS='-c client_min_messages=warning' "$bin/psql" -X -q -h "$tmp" -p "$server_port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
        -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1" > /dev/null
}

# --- the runs ----------------------------------------------------------------
# run_asyncpg VARIANT PORT: pytest over asyncpg's tests, a JUnit XML report
run_asyncpg() {
    local out=$tmp/asyncpg-$1
    mkdir -p "$out"
    fresh_db "asyncpg_$1"
    # its tests import "tests" from the working directory
    (cd "$cache/asyncpg-$asyncpg_version" &&
        PGHOST=127.0.0.1 PGPORT=$2 PGUSER=postgres PGDATABASE=asyncpg_$1 \
        timeout 900 "$cache/venv-asyncpg/bin/python" -m pytest -q -p no:cacheprovider \
            -o faulthandler_timeout=120 --junitxml="$out/results.xml" tests > "$out/log" 2>&1) || true
    tail -n 1 "$out/log"
}

# rerun_asyncpg VARIANT PORT NAMES: the tests named (JUnit classname.name,
# one a line in NAMES) again, into rerun.xml
rerun_asyncpg() {
    local out=$tmp/asyncpg-$1 ids=() n mod rest
    while read -r n; do
        # tests.test_pool.TestPool.test_x -> tests/test_pool.py::TestPool::test_x
        mod=${n%.*.*} rest=${n#"${n%.*.*}".}
        ids+=("${mod//.//}.py::${rest/./::}")
    done < "$3"
    (cd "$cache/asyncpg-$asyncpg_version" &&
        PGHOST=127.0.0.1 PGPORT=$2 PGUSER=postgres PGDATABASE=asyncpg_$1 \
        timeout 600 "$cache/venv-asyncpg/bin/python" -m pytest -q -p no:cacheprovider \
            -o faulthandler_timeout=120 --junitxml="$out/rerun.xml" "${ids[@]}" > "$out/rerun.log" 2>&1) || true
}

# run_nodepg VARIANT PORT [NAMES]: every test/integration file (or those
# named, one a line as compare.py writes them), one node each
run_nodepg() {
    local out=$tmp/node-postgres-$1 f name rc
    mkdir -p "$out"
    [ -n "${3:-}" ] || fresh_db "nodepg_$1"
    cd "$cache/node-postgres-pg-$nodepg_version/packages/pg"
    export PGHOST=127.0.0.1 PGPORT=$2 PGUSER=postgres PGDATABASE=nodepg_$1
    export SCRAM_TEST_PGUSER=scram_test SCRAM_TEST_PGPASSWORD=test4scram SCRAM_TEST_PGDATABASE=nodepg_$1
    if [ -z "${3:-}" ]; then
        node script/create-test-tables.js postgres:// > "$out/create-test-tables.log" 2>&1 ||
            { cat "$out/create-test-tables.log"; return 1; }
    fi
    while read -r f; do
        name=$(tr / _ <<< "${f#test/integration/}")
        [ -z "${3:-}" ] || grep -qxF "$name" "$3" || continue
        rc=0
        timeout 120 node "$f" > "$out/$name.log" 2>&1 || rc=$?
        echo "$rc" > "$out/$name.rc"
    done < <(find test/integration -name '*-tests.js' | sort)
    unset PGHOST PGPORT PGUSER PGDATABASE SCRAM_TEST_PGUSER SCRAM_TEST_PGPASSWORD SCRAM_TEST_PGDATABASE
    cd - > /dev/null
    echo "$(find "$out" -name '*.rc' | wc -l) files run"
}

rc=0
for d in "${drivers[@]}"; do
    for v in direct proxy; do
        port=$server_port
        [ "$v" = direct ] || port=$proxy_port
        echo "$d $v: ..."
        start=$SECONDS
        case $d in
            asyncpg) run_asyncpg "$v" "$port" | sed 's/^/    /' ;;
            node-postgres) run_nodepg "$v" "$port" | sed 's/^/    /' ;;
        esac
        echo "$d $v: done in $((SECONDS - start)) s"
    done
    if ! python3 "$here/compare.py" "$d" "$tmp/$d-direct" "$tmp/$d-proxy" "$here/known.txt" \
            --differing "$tmp/$d-differing" > "$tmp/$d-compare.txt"; then
        # a difference must reproduce: what differed runs again on both
        # sides (a test that fails now and then, either way, agrees)
        cat "$tmp/$d-compare.txt"
        echo "$d: running again what differed: $(paste -sd' ' "$tmp/$d-differing")"
        for v in direct proxy; do
            port=$server_port
            [ "$v" = direct ] || port=$proxy_port
            case $d in
                asyncpg) rerun_asyncpg "$v" "$port" "$tmp/$d-differing" ;;
                node-postgres) run_nodepg "$v" "$port" "$tmp/$d-differing" > /dev/null ;;
            esac
        done
        python3 "$here/compare.py" "$d" "$tmp/$d-direct" "$tmp/$d-proxy" "$here/known.txt" || rc=1
    else
        cat "$tmp/$d-compare.txt"
    fi
done
if grep -q -E 'panic|level=ERROR' "$tmp/proxy.log"; then
    echo "the proxy logged errors:"; grep -E 'panic|level=ERROR' "$tmp/proxy.log" | head -20; rc=1
fi
status=$rc
exit "$rc"
