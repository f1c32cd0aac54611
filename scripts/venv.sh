#!/usr/bin/env bash
# venv.sh — the benchmark suite's Python environment in $PGCIPHER_BUILD/venv,
# with the pinned bench/requirements.txt; recreated when that file changes.
set -euo pipefail
top=${PGCIPHER_TOP:?}
venv=${PGCIPHER_BUILD:?}/venv
stamp=$(sha256sum "$top/bench/requirements.txt" | cut -d' ' -f1)
if [ "$(cat "$venv/.requirements" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$top/bench/requirements.txt"
    echo "$stamp" > "$venv/.requirements"
fi
