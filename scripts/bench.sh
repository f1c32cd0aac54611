#!/usr/bin/env bash
# bench.sh — build pgcipher and the stock baseline (same source, compiler
# and flags, no patches; skipped when the selected scenarios need no
# baseline), set up the suite's Python environment, and run
# the benchmark suite:  ./pgcipher bench [--profile quick|full] [...]
# (arguments go to `python -m bench run`; `./pgcipher bench report DIR`
# rewrites a report).
set -euo pipefail
top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}

"$top/scripts/build.sh"
"$top/scripts/venv.sh"
cd "$top"
if [ "${1:-}" = report ]; then
    exec "$build/venv/bin/python" -m bench "$@"
fi
# the stock baseline, unless every selected scenario does without it (proxy)
if "$build/venv/bin/python" -m bench needs-stock "$@"; then
    "$top/server/build.sh" "$build" --stock
fi
exec "$build/venv/bin/python" -u -m bench run "$@"
