#!/usr/bin/env bash
# psycopg 3 client test (run by ../run.sh): a venv with the pinned
# requirements.txt in $PGCIPHER_BUILD/clients/venv-psycopg (recreated when
# that file changes, like scripts/venv.sh), then test_client.py.
set -euo pipefail
: "${PGC_CACHE:?}" "${PGC_HERE:?}"
req=$PGC_HERE/psycopg/requirements.txt
venv=$PGC_CACHE/venv-psycopg
stamp=$(sha256sum "$req" | cut -d' ' -f1)
if [ "$(cat "$venv/.requirements" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
    echo "$stamp" > "$venv/.requirements"
fi
exec "$venv/bin/python" "$PGC_HERE/psycopg/test_client.py"
