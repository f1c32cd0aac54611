#!/usr/bin/env bash
# SQLAlchemy's application (harness.py): the ORM and Core on psycopg 3 and
# the ORM on asyncpg; $1: the prefix of the result files.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=${PGCIPHER_BUILD:?}/orm/venv-sqlalchemy
"${PGCIPHER_TOP:?}/scripts/venv.sh" "$here/requirements.txt" "$venv"
rc=0
for mode in psycopg asyncpg; do
    echo "sqlalchemy, $mode:"
    "$venv/bin/python" "$here/harness.py" "$mode" "$1-$mode.json" | sed 's/^/    /' || rc=1
done
exit "$rc"
