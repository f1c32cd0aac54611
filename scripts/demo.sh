#!/usr/bin/env bash
# demo.sh — the main job: build pgcipher, start an aes-256 cluster whose key
# comes from a passphrase file, load data, show queries working and grep
# finding nothing in the data files, then say what encryption costs:
# pgbench select-only and tpcb-like, unencrypted vs aes-256 from the same
# binaries, interleaved (A B A B ...), and the page cipher's ns per page
# beside `openssl speed` on this machine.
#
# Environment: DEMO_SECONDS (30) per pgbench run, DEMO_ROUNDS (2),
# DEMO_SCALE (20, ~300 MB: bigger than shared_buffers, so pages are really
# read and written through the cipher), DEMO_CLIENTS (nproc).
set -euo pipefail
top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}
seconds=${DEMO_SECONDS:-30}
rounds=${DEMO_ROUNDS:-2}
scale=${DEMO_SCALE:-20}
clients=${DEMO_CLIENTS:-$(nproc)}

"$top/scripts/build.sh"
export PATH=$build/install/bin:$PATH
demo=$build/demo
step() { printf '\n== %s\n' "$*"; }

pick_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

for d in "$demo"/*/data; do [ -f "$d/postmaster.pid" ] && pg_ctl -D "$d" stop -m fast >/dev/null 2>&1 || true; done
rm -rf "$demo"; mkdir -p "$demo"
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
psql_enc -At -c "SELECT 'table size: ' || pg_size_pretty(pg_total_relation_size('cards')) || ', file: ' || pg_relation_filepath('cards')"

step "3. grep the data files for the plaintext"
rel_hits=$( (grep -rlaF 'TOPSECRET-NOTE' "$demo/enc/data" --exclude-dir=pg_wal || true) | wc -l)
echo "files under $demo/enc/data (outside pg_wal) containing 'TOPSECRET-NOTE': $rel_hits"
wal_hits=$( (grep -rlaF 'TOPSECRET-NOTE' "$demo/enc/data/pg_wal" || true) | wc -l)
echo "WAL segments containing it: $wal_hits  (WAL is not encrypted yet: see docs/design.md)"
echo "first bytes of block 0 of the table on disk (LSN, checksum, flags, lower, upper in clear, then ciphertext):"
od -An -tx1 -N48 "$demo/enc/data/$(psql_enc -At -c "SELECT pg_relation_filepath('cards')")" | sed 's/^/   /'
[ "$rel_hits" = 0 ] || { echo "demo: plaintext found in relation files!" >&2; exit 1; }

step "4. What it costs: pgbench, unencrypted vs aes-256, same binaries, interleaved"
initdb -D "$demo/plain/data" --data-checksums -A trust -U postgres > "$demo/initdb-plain.log"
plain_port=$(start plain)
echo "scale $scale (about $((scale * 15)) MB, shared_buffers 128MB), $clients clients, ${seconds}s per run, $rounds rounds"
for name in plain enc; do
    port=$([ $name = enc ] && echo "$enc_port" || echo "$plain_port")
    pgbench -i -q -s "$scale" -h "$demo/$name" -p "$port" -U postgres postgres > "$demo/$name/pgbench-init.log" 2>&1
    psql -X -q -h "$demo/$name" -p "$port" -U postgres -d postgres -c "VACUUM ANALYZE" -c "CHECKPOINT"
done
results=$demo/pgbench.csv
echo "workload,config,round,tps" > "$results"
for workload in select-only tpcb-like; do
    flag=$([ $workload = select-only ] && echo "-S" || echo "")
    for round in $(seq 1 "$rounds"); do
        for name in plain enc; do
            port=$([ $name = enc ] && echo "$enc_port" || echo "$plain_port")
            tps=$(pgbench $flag -n -T "$seconds" -c "$clients" -j "$clients" -h "$demo/$name" -p "$port" -U postgres postgres 2>&1 \
                  | awk '/^tps = /{print $3}')
            label=$([ $name = enc ] && echo aes-256 || echo unencrypted)
            printf '   %-12s round %d  %-12s %10.1f tps\n' "$workload" "$round" "$label" "$tps"
            echo "$workload,$label,$round,$tps" >> "$results"
        done
    done
done
python3 - "$results" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("\n   %-12s %14s %14s %8s" % ("workload", "unencrypted", "aes-256", "ratio"))
for w in dict.fromkeys(r["workload"] for r in rows):
    med = {c: statistics.median(float(r["tps"]) for r in rows if r["workload"] == w and r["config"] == c)
           for c in ("unencrypted", "aes-256")}
    print("   %-12s %10.1f tps %10.1f tps %7.3fx" % (w, med["unencrypted"], med["aes-256"], med["aes-256"] / med["unencrypted"]))
print("   (median of rounds; ratio = aes-256 / unencrypted; the full benchmark suite is in bench/)")
PY

pg_ctl -D "$demo/plain/data" stop -m fast >/dev/null; pg_ctl -D "$demo/enc/data" stop -m fast >/dev/null

step "5. The page cipher against the machine's limit"
make -s -C "$build/postgresql/src/test/encryption" bench_pagecrypt >/dev/null
"$build/postgresql/src/test/encryption/bench_pagecrypt" 1 | grep -v '^{'
for c in aes-128-xts aes-256-xts; do
    openssl speed -evp "$c" -bytes 8192 -seconds 1 2>/dev/null | awk -v c=$c '
        toupper($1) == toupper(c) { v=$2; sub(/k$/, "", v); gbs = v * 1000 / 1e9;
            printf "openssl speed %s, 8192-byte blocks: %.0f ns/8kB, %.2f GB/s\n", c, 8192 / gbs, gbs }'
done

step "Done. Data and logs: $demo"
