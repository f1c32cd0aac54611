#!/usr/bin/env bash
# Decryption rights (run by ../run.sh; design 13.12): the rights matrix
# through the proxy with psql (simple protocol, literals) and psycopg
# (extended protocol, parameters): three roles and the superuser, two
# columns, read, write, compare and compute, checked against the
# expected table; then a right the superuser forges himself.
set -euo pipefail
: "${PGC_BIN:?}" "${PGC_DB:?}" "${PGC_SCRATCH:?}" "${PGC_HERE:?}" "${PGC_CACHE:?}" "${PGC_TOP:?}"
if [ "$PGC_DIRECT" = 1 ]; then
    echo "check: rights need the proxy (direct mode: skipped)"
    exit 0
fi
as() {  # ROLE psql-arguments...
    local role=$1
    shift
    "$PGC_BIN/psql" -X -d "$PGC_DB" -h "$PGC_HOST" -p "$PGC_PORT" -U "$role" "$@"
}
as "$PGC_USER" -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE TABLE people (id int PRIMARY KEY, ssn enc_text, score enc_int4);
SELECT pgcipher.encrypt_column('people', 'ssn', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('people', 'score', 'k1', 'EQ');
CREATE TABLE people_plain (id int, ssn text);
INSERT INTO people VALUES (1, 'PGCMARK-E-rights-1', 10);
INSERT INTO people_plain VALUES (1, 'PGCMARK-P-rights-1');
DROP ROLE IF EXISTS r_owner;
DROP ROLE IF EXISTS r_analyst;
DROP ROLE IF EXISTS r_loader;
CREATE ROLE r_owner LOGIN;
CREATE ROLE r_analyst LOGIN;
CREATE ROLE r_loader LOGIN;
GRANT ALL ON people TO r_owner, r_analyst, r_loader;
SQL
# the owner's grants, signed with the CMK for the column key k1, stored
# through the proxy by the superuser (who cannot sign any)
wrapped=$(as "$PGC_USER" -At -c "SELECT encode(wrapped_cek, 'hex') FROM pgcipher.column_keys WHERE key_name = 'k1'")
for g in "ssn r_owner read" "score r_owner read" "ssn r_loader write" "score r_loader write" "score r_analyst read"; do
    read -r col role acc <<< "$g"
    "$PGC_BUILD/bin/pgcipher-keys" grant --cmk-file "$PGC_CMK" --cmk-name main --key-name k1 \
        --wrapped-cek "$wrapped" --column "public.people.$col" --role "$role" --access "$acc"
done | as "$PGC_USER" -q -v ON_ERROR_STOP=1 > /dev/null

# role, then per operation: ok or the SQLSTATE
expected="r_owner ok ok ok ok ok ok ok
r_analyst PC005 PC005 PC005 ok ok ok ok
r_loader PC005 ok PC005 PC005 ok PC005 PC005
$PGC_USER PC005 PC005 PC005 PC005 PC005 PC005 PC005"
ops=("SELECT ssn FROM people WHERE id = 1"
    "INSERT INTO people (id, ssn) VALUES (@ID@, 'x')"
    "SELECT id FROM people WHERE ssn = 'PGCMARK-E-rights-1'"
    "SELECT score FROM people WHERE id = 1"
    "UPDATE people SET score = 11 WHERE id = 1"
    "SELECT id FROM people WHERE score = 11"
    "UPDATE people SET score = score + 1 WHERE id = 1")
id=100
got=""
for role in r_owner r_analyst r_loader "$PGC_USER"; do
    line=$role
    for op in "${ops[@]}"; do
        id=$((id + 1))
        out=$(as "$role" -At -v VERBOSITY=sqlstate -c "${op//@ID@/$id}" 2>&1 > /dev/null) && line+=" ok" ||
            line+=" $(sed -n 's/^ERROR:  //p' <<< "$out" | head -1)"
    done
    got+="$line"$'\n'
done
if [ "${got%$'\n'}" != "$expected" ]; then
    printf 'psql: the rights matrix differs\ngot:\n%s\nwant:\n%s\n' "$got" "$expected"
    exit 1
fi
echo "check: psql: rights matrix of 4 roles x 7 operations (read, write, compare on ssn; read, write, compare, compute on score) as expected"

venv=$PGC_CACHE/venv-psycopg
"$PGC_TOP/scripts/venv.sh" "$PGC_HERE/psycopg/requirements.txt" "$venv"
RIGHTS_EXPECTED=$expected "$venv/bin/python" "$PGC_HERE/rights/matrix.py"

# the superuser copies the owner's signed row to his own name: it does
# not verify (PC003), and he reads nothing
as "$PGC_USER" -q -v ON_ERROR_STOP=1 -c "INSERT INTO pgcipher.column_rights
    SELECT label, current_user, key_name, access, serial, mac FROM pgcipher.column_rights
     WHERE role = 'r_owner' AND label = 'public.people.ssn'"
out=$(as "$PGC_USER" -At -v VERBOSITY=sqlstate -c "SELECT ssn FROM people" 2>&1 > /dev/null) || true
if [ "$out" != "ERROR:  PC003" ]; then
    echo "a right the superuser wrote himself: $out, want ERROR:  PC003"
    exit 1
fi
echo "check: a right the superuser copied to his own name does not verify (PC003)"
