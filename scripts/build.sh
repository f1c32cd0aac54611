#!/usr/bin/env bash
# build.sh — build pgcipher into $PGCIPHER_BUILD: the server (and its test
# programs), the pgcipher_columns extension installed into it, and the
# client-side key tool pgcipher-keys, the wire proxy pgcipher-proxy and the
# KMS key command pgcipher-kms.
#
# Usage: build.sh [--for-tests [--no-packages]]
#        (./pgcipher build [--for-tests [--no-packages]])
set -euo pipefail
umask 022	# install trees readable by every user: see server/build.sh
top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}
"$top/server/build.sh" "$build"
make -C "$build/postgresql/src/test/encryption" -s all

# columns/ is built out of tree (PGXS VPATH build), so the checkout stays clean
mkdir -p "$build/columns"
make -C "$build/columns" -f "$top/columns/Makefile" -s \
    PG_CONFIG="$build/install/bin/pg_config" all install

go=$("$top/scripts/go.sh" path)
(cd "$top/proxy" && GOFLAGS=-buildvcs=false "$go" build -o "$build/bin/pgcipher-keys" ./cmd/pgcipher-keys)
# the key command that fetches keys from OpenBao (docs/design.md, section 9.3)
(cd "$top/proxy" && GOFLAGS=-buildvcs=false "$go" build -o "$build/bin/pgcipher-kms" ./cmd/pgcipher-kms)
# the wire proxy; pg_query_go compiles PostgreSQL's parser with cgo the
# first time (minutes), then Go's build cache keeps it like ccache
(cd "$top/proxy" && GOFLAGS=-buildvcs=false "$go" build -o "$build/bin/pgcipher-proxy" ./cmd/pgcipher-proxy)

# --for-tests: also what the suites build before they need it, the stock
# baseline of the same source (scripts/test.sh's build_stock), Citus
# against both (test/citus/run.sh; bench's citus scenario) and the Debian
# packages (the packages suite; kept while the checkout is clean and at the
# same commit): .ci/run builds 18's servers and Citus so beside the 17
# leg's suites, which mostly wait on servers, and the packages (no install
# tree of the suites' in them) beside the 18 leg's (--no-packages)
if [ "${1:-}" = --for-tests ]; then
    "$top/server/build.sh" "$build" --stock
    "$top/test/citus/run.sh" build
    "$top/test/citus/run.sh" build-stock
    [ "${2:-}" = --no-packages ] || "$top/scripts/package.sh"
fi
