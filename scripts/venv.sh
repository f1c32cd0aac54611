#!/usr/bin/env bash
# venv.sh — a Python environment with pinned requirements, recreated when
# the requirements file changes.
#
#   venv.sh                      the benchmark suite's: bench/requirements.txt
#                                in $PGCIPHER_BUILD/venv
#   venv.sh REQUIREMENTS DIR     another one (the proxy's psycopg client test)
set -euo pipefail
req=${1:-${PGCIPHER_TOP:?}/bench/requirements.txt}
venv=${2:-${PGCIPHER_BUILD:?}/venv}
stamp=$(sha256sum "$req" | cut -d' ' -f1)
if [ "$(cat "$venv/.requirements" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
    echo "$stamp" > "$venv/.requirements"
fi
