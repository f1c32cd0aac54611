#!/usr/bin/env bash
# pgx client test (run by ../run.sh): main.go here is package main of the
# proxy module (pgx v5 comes from proxy/go.mod); built with the Go
# toolchain of scripts/go.sh into $PGCIPHER_BUILD/clients/pgx-client.
set -euo pipefail
: "${PGC_CACHE:?}" "${PGC_TOP:?}"
go=$("$PGC_TOP/scripts/go.sh" path)
(cd "$PGC_TOP/proxy" && GOFLAGS=-buildvcs=false "$go" build -o "$PGC_CACHE/pgx-client" ./test/clients/pgx)
exec "$PGC_CACHE/pgx-client"
