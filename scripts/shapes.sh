#!/usr/bin/env bash
# shapes.sh — the shape generator of proxy/wire (design 15.13) for longer
# than the test suite runs it: random statements over random tables, no
# marker of an encrypted column may reach the server in plaintext.
#
#   scripts/shapes.sh [DURATION]     DURATION as Go writes it (default 10m)
#   PGCIPHER_SHAPES_SEED=N           replays a run (its seed is printed)
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
go=$("$top/scripts/go.sh" path)
duration=${1:-10m}
cd "$top/proxy"
PGCIPHER_SHAPES_TIME=$duration GOFLAGS=-buildvcs=false \
    "$go" test -count=1 -v -run '^TestShapes$' -timeout 0 ./wire 2>&1 | grep -v '^=== RUN'
