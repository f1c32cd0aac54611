#!/usr/bin/env bash
# vcpu_placement.sh — why pgbench select-only at 2 clients swings by 3x on
# a 2-vCPU machine, whatever the server (bench README, "Noise at two
# clients").
#
# One stock cluster (pgbench scale 40, shared_buffers = 256MB: the
# cybertec-pgbench point "above shared_buffers, 2 clients"), and pgbench -S
# run with the clients and their backends placed on the vCPUs in four ways,
# interleaved over the rounds:
#
#   free        -c 2 -j 2, no pinning: what the benchmark suite does
#   pairs       each client thread on the vCPU of its own backend (two
#               pgbench -c 1, each started while the postmaster is pinned
#               to that vCPU, so its backend inherits it): no handoff
#               between a client and its backend crosses vCPUs
#   split       both client threads on vCPU 0, both backends on vCPU 1:
#               every handoff crosses vCPUs
#   one-same    -c 1, client and backend on one vCPU
#   one-split   -c 1, client on vCPU 0, backend on vCPU 1
#
# Prints one line per run and a table (median, min, max TPS per placement).
# Run as an unprivileged user (PostgreSQL refuses root), with the stock
# build in place (./pgcipher bench builds it):
#
#   bench/experiments/vcpu_placement.sh [ROUNDS [SECONDS]]
set -euo pipefail
rounds=${1:-5}
seconds=${2:-6}
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=${PGCIPHER_BUILD:-$top/build}/stock/install/bin
[ -x "$bin/postgres" ] || { echo "no stock build in $bin (./pgcipher bench builds it)" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "needs 2 vCPUs" >&2; exit 1; }
work=$(mktemp -d)
port=54987
export PGHOST=$work PGPORT=$port PGUSER=postgres PGDATABASE=postgres
trap '"$bin/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

"$bin/initdb" -D "$work/data" -U postgres -A trust >/dev/null
cat >> "$work/data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$work'
port = $port
shared_buffers = 256MB
max_connections = 20
autovacuum = off
EOF
"$bin/pg_ctl" -D "$work/data" -l "$work/log" -w start >/dev/null
"$bin/pgbench" -i -q -s 40 >/dev/null 2>&1
"$bin/pgbench" -S -n -T 5 -c 2 -j 2 >/dev/null       # warm-up: the OS cache
postmaster=$(head -1 "$work/data/postmaster.pid")

tps() { sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -1; }
select_only() { "$bin/pgbench" -S -n -T "$seconds" "$@" 2>/dev/null; }

run_placement() {
    case $1 in
        free)  select_only -c 2 -j 2 | tps ;;
        pairs)
            # a backend inherits the postmaster's vCPU when it is forked
            taskset -p -c 0 "$postmaster" >/dev/null
            taskset -c 0 "$bin/pgbench" -S -n -T "$seconds" -c 1 > "$work/p0" 2>/dev/null &
            sleep 0.3
            taskset -p -c 1 "$postmaster" >/dev/null
            taskset -c 1 "$bin/pgbench" -S -n -T "$seconds" -c 1 > "$work/p1" 2>/dev/null
            wait
            taskset -p -c 0,1 "$postmaster" >/dev/null
            echo "$(tps < "$work/p0") $(tps < "$work/p1")" | awk '{ print $1 + $2 }' ;;
        split)
            taskset -p -c 1 "$postmaster" >/dev/null
            taskset -c 0 "$bin/pgbench" -S -n -T "$seconds" -c 2 -j 2 2>/dev/null | tps
            taskset -p -c 0,1 "$postmaster" >/dev/null ;;
        one-same)
            taskset -p -c 0 "$postmaster" >/dev/null
            taskset -c 0 "$bin/pgbench" -S -n -T "$seconds" -c 1 2>/dev/null | tps
            taskset -p -c 0,1 "$postmaster" >/dev/null ;;
        one-split)
            taskset -p -c 1 "$postmaster" >/dev/null
            taskset -c 0 "$bin/pgbench" -S -n -T "$seconds" -c 1 2>/dev/null | tps
            taskset -p -c 0,1 "$postmaster" >/dev/null ;;
    esac
}

placements=(free pairs split one-same one-split)
echo "vcpu_placement: $rounds rounds of ${seconds} s, stock $("$bin/postgres" --version), $(nproc) vCPUs"
: > "$work/results"
for ((r = 1; r <= rounds; r++)); do
    order=("${placements[@]}")
    # ABBA: even rounds in reverse
    if ((r % 2 == 0)); then order=($(printf '%s\n' "${placements[@]}" | tac)); fi
    for pl in "${order[@]}"; do
        t=$(run_placement "$pl")
        printf 'round %d %-10s %10.0f tps\n' "$r" "$pl" "$t"
        echo "$pl $t" >> "$work/results"
    done
done
echo
printf '| placement | median TPS | min | max |\n|---|---|---|---|\n'
for pl in "${placements[@]}"; do
    awk -v pl="$pl" '$1 == pl { print $2 }' "$work/results" | sort -n |
        awk -v pl="$pl" '{ v[NR] = $1 } END {
            m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            printf "| %s | %.0f | %.0f | %.0f |\n", pl, m, v[1], v[NR] }'
done
