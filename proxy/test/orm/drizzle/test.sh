#!/usr/bin/env bash
# Drizzle ORM's application (harness.mjs) on node-postgres; $1: the prefix
# of the result file.  drizzle-kit generates the migration of the table
# declared in declare-schema.mjs first.  The packages (package-lock.json: npm ci) live in
# $PGCIPHER_BUILD/orm/drizzle, installed again when the lock changes; the
# harness runs from there, beside them.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${PGCIPHER_BUILD:?}/orm/drizzle
stamp=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$dir/.lock" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$dir" && mkdir -p "$dir"
    cp "$here/package.json" "$here/package-lock.json" "$dir/"
    (cd "$dir" && NPM_CONFIG_UPDATE_NOTIFIER=false npm ci --no-audit --no-fund --loglevel=error)
    echo "$stamp" > "$dir/.lock"
fi
cp "$here/harness.mjs" "$here/encrypted.mjs" "$here/declare-schema.mjs" "$dir/"
# the declared table's migration, as an application makes it
rm -rf "$1-migrations"
(cd "$dir" && node_modules/.bin/drizzle-kit generate --dialect postgresql --schema ./declare-schema.mjs \
    --out "$1-migrations" --name declare > "$1-drizzle-kit.log" 2>&1) || { cat "$1-drizzle-kit.log"; exit 1; }
echo "drizzle, node-postgres:"
DRIZZLE_MIGRATIONS=$1-migrations node "$dir/harness.mjs" "$1-node-postgres.json" | sed 's/^/    /'
