#!/usr/bin/env bash
# build.sh — build pgcipher's server (and its test programs) into $PGCIPHER_BUILD.
set -euo pipefail
top=${PGCIPHER_TOP:?}
"$top/server/build.sh" "$PGCIPHER_BUILD"
make -C "$PGCIPHER_BUILD/postgresql/src/test/encryption" -s all
