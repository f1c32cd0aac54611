#!/usr/bin/env bash
# run.sh — pgx v5.12.0's own test suite through pgcipher-proxy (README.md here).
#
# Copies pgx's module (its *_test.go files included) out of the Go module
# cache and runs `go test -json ./...` there against a throwaway aes-256
# cluster prepared as pgx's testsetup/ says (pg_hba.conf, TLS certificates
# from generate_certs.go, database pgx_test from postgresql_setup.sql:
# hstore, ltree, domain uint64, the pgx_* roles), once per variant:
#   direct     the PGX_TEST_* connection strings name the server
#   proxy      they name pgcipher-proxy in front of it (authentication relayed)
#   proxy-enc  as proxy, with pgcipher_columns created through the proxy and
#              an encrypted table public.foo (foo is the name of most of
#              pgx's temporary tables: the proxy must resolve to those)
#   proxy-tls  as proxy, with TLS from pgx to the proxy and from the proxy to
#              the server; the TLS connection strings set too
#   proxy-enc-tls  proxy-enc and proxy-tls at once (what CI runs, beside
#              proxy-tx: every leg of session mode in one pass)
#   proxy-tx   as proxy, the proxy pooling (--pool-mode transaction, design
#              15.14): it logs the pgx_* roles in itself with SCRAM from an
#              auth file holding their passwords, which it also uses to log
#              in to the server; the tests that cannot pass in transaction
#              mode are listed in known.txt with the reason
# Each variant gets a fresh pgx_test (a copy of a template database).  The
# TLS strings (and the Unix socket's, the proxy has none) are set only where
# they can reach what is tested: the direct run and proxy-*tls; a test that
# skips because its variable is unset is not compared.  compare.py then
# requires every variant's result to equal direct's, test by test, except
# those listed in known.txt.  A hang is a failure: each package has
# PGCIPHER_PGX_TIMEOUT; the tests it left unfinished count as failed.
#
# Usage: run.sh [VARIANT...]   (default: direct proxy proxy-enc; direct is
#                               always run first, as the reference)
# Environment: PGCIPHER_TOP, PGCIPHER_BUILD (as scripts/test.sh);
#   PGCIPHER_PGX_KEEP=1      keep the temporary directory (logs, JSON) on success
#   PGCIPHER_PGX_TIMEOUT     go test -timeout per package (default 300s)
#   PGCIPHER_PGX_PARALLEL    go test -p: packages run at once (default 2)
#   PGCIPHER_PGX_RUN         go test -run pattern (default: every test)
#   PGCIPHER_PGX_PKGS        packages to test (default ./...)
# Prints one line per variant start and end, then compare.py's report; exits
# non-zero if any variant differs from direct.
set -euo pipefail
top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}
here=$top/proxy/test/pgx-suite
bin=$build/install/bin
proxy=$build/bin/pgcipher-proxy
pgx_version=v5.12.0
pkg_timeout=${PGCIPHER_PGX_TIMEOUT:-300s}
# two packages at a time, as pgx's own CI runs them (go test's default
# -p): they share pgx_test, and each waits on the server most of the time
pkg_parallel=${PGCIPHER_PGX_PARALLEL:-2}
run_pattern=${PGCIPHER_PGX_RUN:-}
read -r -a packages <<< "${PGCIPHER_PGX_PKGS:-./...}"

all=(direct proxy proxy-enc proxy-tls proxy-enc-tls proxy-tx)
variants=(direct)
for v in "${@:-proxy proxy-enc}"; do
    for w in $v; do
        [[ " ${all[*]} " == *" $w "* ]] || { echo "run.sh: unknown variant $w (${all[*]})" >&2; exit 2; }
        [[ " ${variants[*]} " == *" $w "* ]] || variants+=("$w")
    done
done

[ "$(id -u)" != 0 ] || { echo "run.sh: run as an ordinary user (PostgreSQL refuses root)" >&2; exit 2; }
[ -x "$bin/postgres" ] || { echo "run.sh: no server in $bin (./pgcipher build)" >&2; exit 2; }
[ -x "$proxy" ] || { echo "run.sh: no $proxy (./pgcipher build)" >&2; exit 2; }
for ext in hstore ltree pgcipher_columns; do
    [ -f "$build/install/share/postgresql/extension/$ext.control" ] ||
        { echo "run.sh: extension $ext is not installed in $build/install" >&2; exit 2; }
done
go=$("$top/scripts/go.sh" path)

# shellcheck source=proxy/test/lib.sh
. "$top/proxy/test/lib.sh"
tmp=$(mktemp -d /tmp/pgc-pgx.XXXXXX)
sock=$tmp/sock
mkdir -p "$sock"
proxy_pid=
status=1
cleanup() {
    stop_proxy
    "$bin/pg_ctl" -D "$tmp/data" -m immediate stop > /dev/null 2>&1 || true
    if [ "$status" = 0 ] && [ "${PGCIPHER_PGX_KEEP:-}" != 1 ]; then
        rm -rf "$tmp"
    else
        echo "pgx-suite: logs in $tmp"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- pgx's module, writable, with its dependencies --------------------------
# (downloaded outside any module: proxy/go.sum is not touched)
modcache=$("$go" env GOMODCACHE)
src=$modcache/github.com/jackc/pgx/v5@$pgx_version
if [ ! -f "$src/go.mod" ]; then
    (cd "$tmp" && GOFLAGS=-mod=mod "$go" mod download "github.com/jackc/pgx/v5@$pgx_version") ||
        { echo "run.sh: cannot download pgx $pgx_version" >&2; exit 1; }
fi
pgx=$tmp/pgx
cp -R "$src" "$pgx"
chmod -R u+w "$pgx"
export GOFLAGS=-buildvcs=false
(cd "$pgx" && "$go" mod download) > "$tmp/go-mod-download.log" 2>&1 ||
    { cat "$tmp/go-mod-download.log"; exit 1; }
# compile every test binary once, so that the variants' times are the tests'
(cd "$pgx" && "$go" test -count=1 -vet=off -run '^$' "${packages[@]}") > "$tmp/go-build.log" 2>&1 ||
    { tail -n 50 "$tmp/go-build.log"; exit 1; }

# --- TLS material: pgx's own generator (CA, localhost, pgx_sslcert) --------
(cd "$pgx/testsetup" && "$go" run generate_certs.go) > "$tmp/certs.log" 2>&1 ||
    { cat "$tmp/certs.log"; exit 1; }
certs=$pgx/testsetup
chmod 600 "$certs/localhost.key" "$certs/pgx_sslcert.key"

# --- the cluster -------------------------------------------------------------
# aes-256 as scripts/test.sh's enc_opts, with a key-encryption key of its own
{ od -An -tx1 -N32 /dev/urandom | tr -d ' \n'; echo; } > "$tmp/kek"
chmod 600 "$tmp/kek"
enc_opts=(--encryption=aes-256 "--encryption-key-command=cat $tmp/kek")
# superuser postgres as in pgx's CI (pg_hba.conf names it); the OS user is
# created by postgresql_setup.sql's \set whoami block
"$bin/initdb" -D "$tmp/data" -U postgres -E UTF8 --locale=C.UTF-8 "${enc_opts[@]}" > "$tmp/initdb.log" 2>&1 ||
    { cat "$tmp/initdb.log"; exit 1; }
server_port=$(free_port)
cp "$pgx/testsetup/pg_hba.conf" "$tmp/data/pg_hba.conf"
cp "$certs/ca.pem" "$tmp/data/root.crt"
cp "$certs/localhost.crt" "$tmp/data/server.crt"
cp "$certs/localhost.key" "$tmp/data/server.key"
chmod 600 "$tmp/data/server.key"
{
    cat << EOF
port = $server_port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$sock'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 100
log_min_messages = warning
EOF
    cat "$pgx/testsetup/postgresql_ssl.conf"
} >> "$tmp/data/postgresql.conf"
"$bin/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -w start > /dev/null ||
    { cat "$tmp/server.log"; exit 1; }
admin() { "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$sock" -p "$server_port" -U postgres "$@"; }

# pgx_template: pgx_test as postgresql_setup.sql makes it (the roles are the
# cluster's); each variant's pgx_test is a fresh copy of it
{ admin -d postgres -c "CREATE DATABASE pgx_template" &&
    admin -d pgx_template -f "$pgx/testsetup/postgresql_setup.sql"; } > "$tmp/setup.log" 2>&1 ||
    { cat "$tmp/setup.log"; exit 1; }
fresh_db() {
    admin -d postgres -c "DROP DATABASE IF EXISTS pgx_test WITH (FORCE)" \
        -c "CREATE DATABASE pgx_test TEMPLATE pgx_template"
}

# --- the proxy -----------------------------------------------------------------
"$build/bin/pgcipher-keys" new-cmk > "$tmp/cmk.hex"
proxy_port=$(free_port "$server_port")
# start_proxy LOG [tls]: the proxy on $proxy_port, to the server over TCP
# (so that pg_hba.conf's md5, scram-sha-256 and password lines apply)
# The proxy reads the encrypted-column catalog on connections of its own,
# as the superuser over the Unix socket (the pgx_* roles log in with
# passwords the proxy does not have).  With TLS it shows clients the
# server's own certificate, so that SCRAM channel binding passes through,
# verifies clients' certificates against pgx's CA and presents
# pgx_sslcert's certificate upstream for a client that proved it.
start_proxy() {
    local args=(--upstream "host=127.0.0.1 port=$server_port sslmode=disable")
    if [ "${2:-}" = tls ]; then
        mkdir -p "$tmp/upstream-certs"
        cp "$certs/pgx_sslcert.crt" "$tmp/upstream-certs/"
        # the proxy's copy of the key, unencrypted (generate_certs.go labels
        # its encrypted PEM block CERTIFICATE, which openssl will not read)
        sed 's/ CERTIFICATE-----/ RSA PRIVATE KEY-----/' "$certs/pgx_sslcert.key" |
            openssl pkey -passin pass:certpw -out "$tmp/upstream-certs/pgx_sslcert.key" 2> "$tmp/openssl.log" ||
            { cat "$tmp/openssl.log"; return 1; }
        chmod 600 "$tmp/upstream-certs/pgx_sslcert.key"
        args=(--upstream "host=localhost port=$server_port sslmode=require"
            --tls-cert "$certs/localhost.crt" --tls-key "$certs/localhost.key"
            --tls-client-ca "$certs/ca.pem" --upstream-certs "$tmp/upstream-certs")
    fi
    if [ "${2:-}" = tx ]; then
        printf '"%s" "secret"\n' pgx_md5 pgx_pw pgx_scram > "$tmp/userlist.txt"
        args+=(--pool-mode transaction --auth-file "$tmp/userlist.txt" --default-pool-size 8 --max-client-conn 1000)
    fi
    "$proxy" --listen "127.0.0.1:$proxy_port" "${args[@]}" \
        --catalog "host=$sock port=$server_port user=postgres" \
        --cmk-file "$tmp/cmk.hex" --cmk-name main > "$1" 2>&1 &
    proxy_pid=$!
    wait_proxy "$proxy_port" "$1"
}

# proxy-enc: the columns extension and an encrypted public.foo, made through
# the proxy (which draws the column key k1 and wraps it with its CMK)
encrypted_foo() {
    PGPASSWORD=secret "$bin/psql" -X -q -v ON_ERROR_STOP=1 \
        "host=127.0.0.1 port=$proxy_port user=pgx_md5 dbname=pgx_test sslmode=disable" << 'EOF'
CREATE EXTENSION pgcipher_columns;
SELECT pgcipher.add_column_key('k1');
CREATE TABLE public.foo (a int, b enc_text);
SELECT pgcipher.encrypt_column('foo', 'b', 'k1', 'EQ');
INSERT INTO public.foo VALUES (1, 'one'), (2, 'two');
EOF
    local got
    got=$(PGPASSWORD=secret "$bin/psql" -X -A -t -v ON_ERROR_STOP=1 \
        "host=127.0.0.1 port=$proxy_port user=pgx_md5 dbname=pgx_test sslmode=disable" \
        -c "SELECT a FROM public.foo WHERE b = 'two'")
    [ "$got" = 2 ] || { echo "public.foo through the proxy: expected 2, got: $got"; return 1; }
}

# --- the variables pgx's tests read (pgx's scripts/lib/test_targets.rb) ------
pgx_vars=(PGX_TEST_DATABASE PGX_TEST_UNIX_SOCKET_CONN_STRING PGX_TEST_TCP_CONN_STRING
    PGX_TEST_MD5_PASSWORD_CONN_STRING PGX_TEST_PLAIN_PASSWORD_CONN_STRING
    PGX_TEST_SCRAM_PASSWORD_CONN_STRING PGX_TEST_SCRAM_PLUS_CONN_STRING PGX_TEST_TLS_CONN_STRING
    PGX_TEST_TLS_CLIENT_CONN_STRING PGX_SSL_PASSWORD PGX_TEST_PGBOUNCER_CONN_STRING
    PGX_TEST_CRATEDB_CONN_STRING PGX_TEST_OAUTH PGX_TEST_LIBPQ_URI_REGRESS PGX_TEST_STRESS_FACTOR)
# libpq's variables, which pgconn's config tests read: none
pg_vars=(PGHOST PGHOSTADDR PGPORT PGUSER PGDATABASE PGPASSWORD PGPASSFILE PGSERVICE PGSERVICEFILE
    PGSSLMODE PGSSLCERT PGSSLKEY PGSSLROOTCERT PGSSLPASSWORD PGSSLSNI PGSSLCERTMODE PGAPPNAME
    PGCONNECT_TIMEOUT PGTARGETSESSIONATTRS PGTZ PGOPTIONS PGCHANNELBINDING PGSSLNEGOTIATION
    PGMINPROTOCOLVERSION PGMAXPROTOCOLVERSION PGREQUIREAUTH PGKRBSRVNAME)
unset "${pgx_vars[@]}" "${pg_vars[@]}"
# pgx_env PORT [tls]: writes NAME=VALUE lines
pgx_env() {
    local hp="host=127.0.0.1 port=$1" tls="host=localhost port=$1 sslmode=verify-full sslrootcert=$certs/ca.pem"
    echo "PGX_TEST_DATABASE=$hp user=pgx_md5 password=secret dbname=pgx_test"
    echo "PGX_TEST_TCP_CONN_STRING=$hp user=pgx_md5 password=secret dbname=pgx_test"
    echo "PGX_TEST_MD5_PASSWORD_CONN_STRING=$hp user=pgx_md5 password=secret dbname=pgx_test"
    echo "PGX_TEST_PLAIN_PASSWORD_CONN_STRING=$hp user=pgx_pw password=secret dbname=pgx_test"
    echo "PGX_TEST_SCRAM_PASSWORD_CONN_STRING=$hp user=pgx_scram password=secret dbname=pgx_test channel_binding=disable"
    [ "${2:-}" = tls ] || return 0
    echo "PGX_TEST_SCRAM_PLUS_CONN_STRING=$tls user=pgx_ssl password=secret dbname=pgx_test channel_binding=require"
    echo "PGX_TEST_TLS_CONN_STRING=$tls user=pgx_ssl password=secret dbname=pgx_test channel_binding=disable"
    echo "PGX_TEST_TLS_CLIENT_CONN_STRING=$tls user=pgx_sslcert sslcert=$certs/pgx_sslcert.crt sslkey=$certs/pgx_sslcert.key dbname=pgx_test"
    echo "PGX_SSL_PASSWORD=certpw"
}

# --- the variants ------------------------------------------------------------------
go_args=(test -json -count=1 -p "$pkg_parallel" -vet=off -timeout "$pkg_timeout")
[ -z "$run_pattern" ] || go_args+=(-run "$run_pattern")
# a package's hang ends at its -timeout; this only guards against go test
# itself getting stuck
suite_limit=$((4 * 3600))
total_start=$SECONDS
for v in "${variants[@]}"; do
    start=$SECONDS
    echo "pgx-suite: $v: start"
    fresh_db > "$tmp/$v-setup.log" 2>&1 || { cat "$tmp/$v-setup.log"; exit 1; }
    case $v in
        direct)
            {
                pgx_env "$server_port" tls
                echo "PGX_TEST_UNIX_SOCKET_CONN_STRING=host=$sock port=$server_port dbname=pgx_test"
            } > "$tmp/$v.env" ;;
        proxy | proxy-enc)
            start_proxy "$tmp/proxy-$v.log" >> "$tmp/$v-setup.log" 2>&1 || { cat "$tmp/$v-setup.log"; exit 1; }
            if [ "$v" = proxy-enc ]; then
                encrypted_foo >> "$tmp/$v-setup.log" 2>&1 || { cat "$tmp/$v-setup.log"; exit 1; }
            fi
            pgx_env "$proxy_port" > "$tmp/$v.env" ;;
        proxy-tx)
            start_proxy "$tmp/proxy-$v.log" tx >> "$tmp/$v-setup.log" 2>&1 || { cat "$tmp/$v-setup.log"; exit 1; }
            pgx_env "$proxy_port" > "$tmp/$v.env" ;;
        proxy-tls | proxy-enc-tls)
            start_proxy "$tmp/proxy-$v.log" tls >> "$tmp/$v-setup.log" 2>&1 || { cat "$tmp/$v-setup.log"; exit 1; }
            if [ "$v" = proxy-enc-tls ]; then
                encrypted_foo >> "$tmp/$v-setup.log" 2>&1 || { cat "$tmp/$v-setup.log"; exit 1; }
            fi
            pgx_env "$proxy_port" tls > "$tmp/$v.env" ;;
    esac
    rc=0
    skip=()
    # LISTEN is refused in transaction mode, and TestListenNotifyWhileBusyIsSafe
    # then waits for a notification until go test's timeout, taking its
    # package's other tests with it; TestConnCheckConn waits 120 s for its
    # killed backend's connection to fail (the pool replaced it) and
    # TestFatalRxError 10 s: not run, failures known.txt explains
    [ "$v" != proxy-tx ] || skip=(-skip '^(TestListenNotifyWhileBusyIsSafe|TestConnCheckConn|TestFatalRxError)$')
    (
        cd "$pgx"
        while IFS= read -r kv; do export "${kv?}"; done < "$tmp/$v.env"
        exec timeout -k 30 "$suite_limit" "$go" "${go_args[@]}" "${skip[@]}" "${packages[@]}"
    ) > "$tmp/$v.json" 2> "$tmp/$v.stderr" || rc=$?
    # go test exits 1 when a test failed; anything else is the harness's
    case $rc in 0 | 1) ;; *) echo "pgx-suite: $v: go test exited $rc"; tail -n 20 "$tmp/$v.stderr" ;; esac
    if [ -n "$proxy_pid" ] && ! kill -0 "$proxy_pid" 2>/dev/null; then
        echo "pgx-suite: $v: the proxy died:"; tail -n 20 "$tmp/proxy-$v.log"
    fi
    stop_proxy
    echo "pgx-suite: $v: $(python3 "$here/compare.py" counts "$tmp/$v.json") ($((SECONDS - start))s)"
done
echo "pgx-suite: all variants: $((SECONDS - total_start))s"

# status decides in cleanup whether $tmp is kept
if python3 "$here/compare.py" compare --known "$here/known.txt" "$tmp" "${variants[@]}"; then
    status=0
else
    echo "pgx-suite: FAILED: results differ from direct"
fi
[ "$status" = 0 ]
