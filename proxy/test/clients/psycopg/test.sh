#!/usr/bin/env bash
# psycopg 3 client test (run by ../run.sh): a venv with the pinned
# requirements.txt in $PGCIPHER_BUILD/clients/venv-psycopg (recreated when
# that file changes, by scripts/venv.sh), then test_client.py.
set -euo pipefail
: "${PGC_CACHE:?}" "${PGC_HERE:?}" "${PGC_TOP:?}"
venv=$PGC_CACHE/venv-psycopg
"$PGC_TOP/scripts/venv.sh" "$PGC_HERE/psycopg/requirements.txt" "$venv"
exec "$venv/bin/python" "$PGC_HERE/psycopg/test_client.py"
