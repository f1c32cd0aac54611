#!/usr/bin/env bash
# bench.sh — build pgcipher and the stock baseline (same source, compiler
# and flags, no patches), set up the suite's Python environment, and run
# the benchmark suite:  ./pgcipher bench [--profile quick|full] [...]
# (arguments go to `python -m bench run`; `./pgcipher bench report DIR`
# rewrites a report).
set -euo pipefail
top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}

"$top/scripts/build.sh"
"$top/server/build.sh" "$build" --stock
"$top/scripts/venv.sh"
cd "$top"
if [ "${1:-}" = report ]; then
    exec "$build/venv/bin/python" -m bench "$@"
fi
exec "$build/venv/bin/python" -u -m bench run "$@"
