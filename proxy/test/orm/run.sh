#!/usr/bin/env bash
# run.sh — unchanged ORMs through pgcipher-proxy (README.md here).
#
# Starts a throwaway cluster and a proxy in test mode (--record: every byte
# sent to the server), creates each ORM's database and tables through the
# proxy, and runs the ORM's application twice (its binding modes) against
# an encrypted table through the proxy and its plaintext twin directly,
# comparing every operation.  Fails on a wrong result, on a marker of an
# encrypted column in what the proxy sent, or on a results table that
# differs from the committed one in docs/orm/ (PGCIPHER_ORM_UPDATE=1
# writes it instead).
#
# Usage: run.sh [ORM...]   (default: django sqlalchemy drizzle hibernate)
set -euo pipefail
top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}
here=$top/proxy/test/orm
bin=$build/install/bin
cache=$build/orm
mkdir -p "$cache"
all=(django sqlalchemy drizzle hibernate)
orms=("$@")
[ ${#orms[@]} -gt 0 ] || orms=("${all[@]}")

# shellcheck source=proxy/test/lib.sh
. "$top/proxy/test/lib.sh"
tmp=$(mktemp -d /tmp/pgc-orm.XXXXXX)
sock=$tmp/sock
mkdir -p "$sock"
proxy_pid=
# shellcheck disable=SC2317  # run by the trap
cleanup() {
    stop_proxy
    "$bin/pg_ctl" -D "$tmp/data" -m immediate stop > /dev/null 2>&1 || true
    if [ "${PGCIPHER_ORM_KEEP:-}" = 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

"$bin/initdb" -D "$tmp/data" -A trust -U pgc_tester --no-locale -E UTF8 > "$tmp/initdb.log" 2>&1 ||
    { cat "$tmp/initdb.log"; exit 1; }
server_port=$(free_port)
cat >> "$tmp/data/postgresql.conf" <<CONF
port = $server_port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$sock'
fsync = off
synchronous_commit = off
timezone = 'UTC'
log_min_messages = warning
log_statement = 'all'
CONF
"$bin/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -w start > /dev/null || { cat "$tmp/server.log"; exit 1; }
"$build/bin/pgcipher-keys" new-cmk > "$tmp/cmk.hex"
port=$(free_port "$server_port")
record=$tmp/record.bin
"$build/bin/pgcipher-proxy" --listen "127.0.0.1:$port" --upstream "host=$sock port=$server_port" \
    --cmk-file "$tmp/cmk.hex" --record "$record" > "$tmp/proxy.log" 2>&1 &
proxy_pid=$!
wait_proxy "$port" "$tmp/proxy.log"
export PGC_HOST=127.0.0.1 PGC_SERVER_PORT=$server_port PGC_PROXY_PORT=$port PGC_USER=pgc_tester
export PGTZ=UTC PGSSLMODE=disable
unset PGDATABASE PGSERVICE PGOPTIONS PGPASSWORD

rc=0
for orm in "${orms[@]}"; do
    export PGC_DB=orm_$orm
    "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$sock" -p "$server_port" -U pgc_tester -d postgres \
        -c "CREATE DATABASE $PGC_DB TEMPLATE template0"
    "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U pgc_tester -d "$PGC_DB" \
        -c 'CREATE EXTENSION pgcipher_columns' -f "$here/schema.sql" > /dev/null
    : > "$record"
    "$here/$orm/test.sh" "$tmp/$orm" || rc=1
    # every marker of an encrypted column stayed off the wire; the
    # plaintext control marker (a ward's name, through the proxy) did not
    leaks=$({ grep -aoE 'PGCM-E-[A-Za-z0-9-]*' "$record" || true; } | sort -u | wc -l)
    grep -aqF 'PGCM-P-' "$record" || { echo "$orm: control: the plaintext marker PGCM-P- is not in what the proxy sent"; rc=1; }
    "$top/proxy/test/orm/table.py" "$orm" "$leaks" "$tmp/$orm"-*.json > "$tmp/$orm.md" || rc=1
    sed -n '/^| mode/,/^$/p' "$tmp/$orm.md"
    if [ "$leaks" != 0 ]; then
        echo "$orm: LEAK: $leaks markers of encrypted columns in what the proxy sent:"
        grep -aoE 'PGCM-E-[A-Za-z0-9-]*' "$record" | sort -u | head
        rc=1
    fi
    doc=$top/docs/orm/$orm.md
    cp "$tmp/$orm.md" "$cache/$orm.md" # the page of the last run
    if [ "${PGCIPHER_ORM_UPDATE:-}" = 1 ]; then
        if cp "$tmp/$orm.md" "$doc"; then
            echo "$orm: wrote docs/orm/$orm.md"
        else
            echo "$orm: docs/orm/ is not writable: cp $cache/$orm.md docs/orm/"; rc=1
        fi
    elif ! diff -u "$doc" "$tmp/$orm.md" > "$tmp/$orm.diff"; then
        echo "$orm: the results differ from docs/orm/$orm.md (PGCIPHER_ORM_UPDATE=1 writes it; this run's page: $cache/$orm.md):"
        head -40 "$tmp/$orm.diff"
        rc=1
    fi
done
exit "$rc"
