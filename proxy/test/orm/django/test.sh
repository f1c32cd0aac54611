#!/usr/bin/env bash
# Django's application (harness.py) in both binding modes; $1: the prefix
# of the result files (PREFIX-client.json, PREFIX-server.json).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=${PGCIPHER_BUILD:?}/orm/venv-django
"${PGCIPHER_TOP:?}/scripts/venv.sh" "$here/requirements.txt" "$venv"
rc=0
for mode in client server; do
    echo "django, $mode-side binding:"
    "$venv/bin/python" "$here/harness.py" "$mode" "$1-$mode.json" | sed 's/^/    /' || rc=1
done
exit "$rc"
