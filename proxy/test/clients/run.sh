#!/usr/bin/env bash
# run.sh — real PostgreSQL clients through pgcipher-proxy (README.md here).
#
# Starts a throwaway cluster (build/install/bin), creates one database per
# client and runs each client's test through pgcipher-proxy in test mode
# (--record: every byte sent to the server is appended to one file):
# psql, pgbench, psycopg 3, pgJDBC, pgx and sysbench, then the decryption
# rights matrix with psql and psycopg (rights).  Each client's
# database gets schema.sql through the proxy (the proxy draws its column
# key), and each test does the same operations on the encrypted table enc_t
# and its plaintext twin plain_t and fails on any difference.  Each client
# has a proxy process of its own (same CMK, same record file), so that one
# client's trouble cannot spill into the next; "multidb" then checks one
# proxy serving all those databases.  Last, the leak check: markers written
# to encrypted columns (PGCMARK-E-...) must be absent from the record and
# from the data directory after a CHECKPOINT, while the plaintext twins'
# markers (PGCMARK-P-<client>-...) must be found in both.
#
# Usage: run.sh [CLIENT...]   (default: all of psql pgbench psycopg jdbc pgx sysbench rights)
# Environment: PGCIPHER_TOP, PGCIPHER_BUILD (as scripts/test.sh);
#   PGCIPHER_CLIENTS_DIRECT=1  no proxy: clients talk to the server, enc_t is
#                              a plaintext table (checks the harness itself)
#   PGCIPHER_CLIENTS_KEEP=1    keep the temporary directory (logs, results)
#   PGCIPHER_CLIENTS_TIMEOUT   seconds a client may take (default 180)
#   PGCIPHER_CLIENTS_POOL_MODE=transaction  the proxy pools (design 15.14):
#                              a server connection per transaction from a
#                              pool of 3, clients logged in by the proxy
# Prints one line per client (ok/FAILED) and exits non-zero if any failed.
set -euo pipefail
top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}
here=$top/proxy/test/clients
bin=$build/install/bin
direct=${PGCIPHER_CLIENTS_DIRECT:-0}
pool_mode=${PGCIPHER_CLIENTS_POOL_MODE:-session}
case $pool_mode in session|transaction) ;; *) echo "run.sh: PGCIPHER_CLIENTS_POOL_MODE is session or transaction" >&2; exit 2 ;; esac
[ "$direct" = 1 ] || direct=0
limit=${PGCIPHER_CLIENTS_TIMEOUT:-180}
# build outputs of the clients (venv, classes, pgx binary) are kept here
export PGC_CACHE=$build/clients
mkdir -p "$PGC_CACHE"

all=(psql pgbench psycopg jdbc pgx sysbench rights)
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=("${all[@]}")
for c in "${clients[@]}"; do
    [[ " ${all[*]} " == *" $c "* ]] || { echo "run.sh: unknown client $c (${all[*]})" >&2; exit 2; }
done

[ -x "$bin/postgres" ] || { echo "run.sh: no server in $bin (./pgcipher build)" >&2; exit 2; }
[ "$direct" = 1 ] || [ -x "$build/bin/pgcipher-proxy" ] ||
    { echo "run.sh: no $build/bin/pgcipher-proxy (./pgcipher build)" >&2; exit 2; }

# shellcheck source=proxy/test/lib.sh
. "$top/proxy/test/lib.sh"
tmp=$(mktemp -d /tmp/pgc-clients.XXXXXX)
sock=$tmp/sock
mkdir -p "$sock"
proxy_pid=
cleanup() {
    stop_proxy
    "$bin/pg_ctl" -D "$tmp/data" -m immediate stop > /dev/null 2>&1 || true
    if [ "${PGCIPHER_CLIENTS_KEEP:-}" = 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# the cluster: trust on the socket directory and 127.0.0.1, no locale (so
# text sorts by bytes on both tables).  The superuser is not named after
# the OS user: for a user "pgcipher", search_path's "$user" would put the
# tables into the extension's schema pgcipher.
"$bin/initdb" -D "$tmp/data" -A trust -U pgc_tester --no-locale -E UTF8 > "$tmp/initdb.log" 2>&1 ||
    { cat "$tmp/initdb.log"; exit 1; }
server_port=$(free_port)
cat >> "$tmp/data/postgresql.conf" <<EOF
port = $server_port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$sock'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 40
shared_buffers = 32MB
timezone = 'UTC'
log_min_messages = warning
EOF
"$bin/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -w start > /dev/null ||
    { cat "$tmp/server.log"; exit 1; }
admin() { "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$sock" -p "$server_port" -U pgc_tester "$@"; }

record=$tmp/record.bin
port=$server_port
if [ "$direct" = 1 ]; then
    echo "clients: DIRECT mode: no proxy, enc_t is a plaintext table (harness check only)"
else
    echo "clients: through pgcipher-proxy in $pool_mode mode"
    "$build/bin/pgcipher-keys" new-cmk > "$tmp/cmk.hex"
    port=$(free_port "$server_port")
fi
# (re)start the proxy on $port; its log goes to $1, at debug level (every
# statement: the leak check scans it)
start_proxy() {
    [ "$direct" = 0 ] || return 0
    "$build/bin/pgcipher-proxy" --listen "127.0.0.1:$port" --upstream "host=$sock port=$server_port" \
        --cmk-file "$tmp/cmk.hex" --cmk-name main --record "$record" \
        --pool-mode "$pool_mode" --auth-type trust --default-pool-size 3 \
        --log-level debug --log-format json > "$1" 2>&1 &
    proxy_pid=$!
    wait_proxy "$port" "$1"
}

# what every client test gets
PGC_USER=pgc_tester
export PGC_BIN=$bin PGC_HERE=$here PGC_TOP=$top PGC_BUILD=$build PGC_DIRECT=$direct
export PGC_HOST=127.0.0.1 PGC_PORT=$port PGC_USER PGC_CMK=$tmp/cmk.hex
# libpq-based clients (psql, pgbench, sysbench) also read these
export PGHOST=127.0.0.1 PGPORT=$port PGUSER=$PGC_USER PGTZ=UTC PGSSLMODE=disable PGCONNECT_TIMEOUT=10
unset PGDATABASE PGSERVICE PGOPTIONS PGPASSWORD PGSERVICEFILE

# a client's database, with schema.sql created through the proxy
setup_db() {
    admin -d postgres -c "CREATE DATABASE $1 TEMPLATE template0"
    "$bin/psql" -X -q -v ON_ERROR_STOP=1 -v direct="$direct" -d "$1" \
        -c 'CREATE EXTENSION pgcipher_columns' -f "$here/schema.sql" > /dev/null
}

failed=()
report() {  # $1 name, $2 start, $3 log, $4 status
    if [ "$4" = 0 ]; then
        printf 'client %-9s ok (%ds)\n' "$1" $((SECONDS - $2))
        sed -n 's/^check: /    /p' "$3"
    else
        printf 'client %-9s FAILED (%ds)\n' "$1" $((SECONDS - $2))
        [ $((SECONDS - $2)) -lt "$limit" ] || echo "    (killed after ${limit}s: PGCIPHER_CLIENTS_TIMEOUT)"
        sed 's/^/    /' "$3" | tail -n 200
        failed+=("$1")
    fi
}

for c in "${clients[@]}"; do
    export PGC_DB=c_$c PGC_SCRATCH=$tmp/$c
    mkdir -p "$PGC_SCRATCH"
    start=$SECONDS
    log=$tmp/$c.log
    # a hang (a proxy that never answers) is a failure, not a stuck suite;
    # the limit also covers a first build (pip, Maven, go build)
    status=0
    { start_proxy "$tmp/proxy-$c.log" && setup_db "$PGC_DB" &&
        timeout -k 10 "$limit" bash "$here/$c/test.sh"; } > "$log" 2>&1 || status=$?
    if [ -n "$proxy_pid" ] && ! kill -0 "$proxy_pid" 2>/dev/null; then
        echo "the proxy died:" >> "$log"; tail -n 20 "$tmp/proxy-$c.log" >> "$log"; status=1
    elif [ "$status" != 0 ] && [ "$direct" = 0 ]; then
        { echo "proxy log (last lines):"; tail -n 10 "$tmp/proxy-$c.log"; } >> "$log"
    fi
    stop_proxy
    report "$c" "$start" "$log" "$status"
done

[ "$direct" = 1 ] && { echo "client multidb   skipped (direct mode)"; echo "client leak      skipped (direct mode)"; }

# one proxy in front of every client's database: each has its own enc_t
# (same labels public.enc_t.*) under its own column key
multidb() {
    local c n=0
    for c in "${clients[@]}"; do
        "$bin/psql" -X -q -A -t -v ON_ERROR_STOP=1 -d "c_$c" \
            -c "SELECT count(*) FROM enc_t WHERE i4 IS NOT NULL OR i4 IS NULL" \
            -c "SELECT count(*) FROM (SELECT t FROM enc_t LIMIT 5) s" > /dev/null || return 1
        n=$((n + 1))
    done
    echo "check: one proxy, $n databases with their own enc_t and key k1: read in turn"
}
if [ "$direct" = 0 ] && [ ${#clients[@]} -gt 1 ]; then
    start=$SECONDS status=0
    { start_proxy "$tmp/proxy-multidb.log" && multidb; } > "$tmp/multidb.log" 2>&1 || status=$?
    stop_proxy
    report multidb "$start" "$tmp/multidb.log" "$status"
fi

# the leak check: markers of encrypted columns never reached the server,
# the plaintext twin's did (so the scan can fail)
leak_check() {
    admin -d postgres -c CHECKPOINT
    local ok=0 c m
    if grep -aqF 'PGCMARK-E-' "$record"; then
        echo "LEAK: encrypted-column markers were sent to the server:"
        grep -aoE 'PGCMARK-E-[A-Za-z0-9_-]*' "$record" | sort | uniq -c | head; ok=1
    fi
    if grep -raqF 'PGCMARK-E-' "$tmp/data"; then
        echo "LEAK: encrypted-column markers are in the data directory:"
        grep -ralF 'PGCMARK-E-' "$tmp/data" | head; ok=1
    fi
    for c in "${clients[@]}"; do
        m=PGCMARK-P-$c-
        grep -aqF "$m" "$record" || { echo "control: $m not in what the proxy sent"; ok=1; }
        grep -raqF "$m" "$tmp/data" || { echo "control: $m not in the data directory"; ok=1; }
    done
    # the proxies' debug logs (each statement with the SQL the server got):
    # no encrypted-column marker; the twins' markers sent as SQL text are
    # there (clients that bind them as parameters send them as values,
    # which are never logged)
    local logs=("$tmp"/proxy-*.log) found=()
    if grep -aqF 'PGCMARK-E-' "${logs[@]}"; then
        echo "LEAK: encrypted-column markers are in the proxy's log:"
        grep -aoE 'PGCMARK-E-[A-Za-z0-9_-]*' "${logs[@]}" | sort | uniq -c | head; ok=1
    fi
    for c in "${clients[@]}"; do
        grep -aqF "PGCMARK-P-$c-" "${logs[@]}" && found+=("$c")
    done
    [ ${#found[@]} -gt 0 ] || { echo "control: no PGCMARK-P- marker in the proxy's debug log"; ok=1; }
    [ $ok = 0 ] || return 1
    echo "check: $(stat -c %s "$record") bytes sent to the server: no PGCMARK-E- marker, every client's PGCMARK-P- marker"
    echo "check: $(awk 'END { print NR }' "${logs[@]}") lines the proxy logged at debug level: no PGCMARK-E- marker, the PGCMARK-P- markers of ${found[*]}"
    echo "check: data directory after CHECKPOINT: no PGCMARK-E- marker, every client's PGCMARK-P- marker"
}
if [ "$direct" = 0 ]; then
    start=$SECONDS status=0
    leak_check > "$tmp/leak.log" 2>&1 || status=$?
    report leak "$start" "$tmp/leak.log" "$status"
fi

if [ ${#failed[@]} -gt 0 ]; then
    echo "clients failed: ${failed[*]}"
    exit 1
fi
echo "clients: all passed"
