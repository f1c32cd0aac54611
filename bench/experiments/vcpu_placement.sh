#!/usr/bin/env bash
# vcpu_placement.sh — why pgbench select-only at 2 clients swings by 3x on
# a 2-vCPU machine, whatever the server (bench README, "Noise at two
# clients").
#
# One stock cluster (pgbench scale 40 by default, shared_buffers = 256MB:
# the cybertec-pgbench point "above shared_buffers"), and pgbench -S run
# with the clients and their backends placed on the vCPUs in six ways,
# interleaved over the rounds:
#
#   free        -c 2 -j 2, no pinning: what the benchmark suite does
#   pairs       each client thread on the vCPU of its own backend (two
#               pgbench -c 1, each started while the postmaster is pinned
#               to that vCPU, so its backend inherits it): no handoff
#               between a client and its backend crosses vCPUs
#   split       both client threads on vCPU 0, both backends on vCPU 1:
#               every handoff crosses vCPUs
#   one-free    -c 1, no pinning
#   one-same    -c 1, client and backend on one vCPU
#   one-split   -c 1, client on vCPU 0, backend on vCPU 1
#
# Prints one line per run and a table (median, min, max TPS per placement).
# A run that fails stops the script with pgbench's error.  Run as an
# unprivileged user (PostgreSQL refuses root) on a machine with exactly two
# vCPUs, with the stock build in place (./pgcipher bench builds it):
#
#   bench/experiments/vcpu_placement.sh [ROUNDS [SECONDS [SCALE]]]
set -euo pipefail
rounds=${1:-5}
seconds=${2:-6}
scale=${3:-40}
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=${PGCIPHER_BUILD:-$top/build}/stock/install/bin
[ -x "$bin/postgres" ] || { echo "no stock build in $bin (./pgcipher bench builds it)" >&2; exit 1; }
[ "$(nproc)" -eq 2 ] || { echo "needs exactly 2 vCPUs (0 and 1)" >&2; exit 1; }
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
"$bin/pgbench" -i -q -s "$scale" > "$work/init.log" 2>&1 || { cat "$work/init.log" >&2; exit 1; }
"$bin/pgbench" -S -n -T 5 -c 2 -j 2 >/dev/null       # warm-up: the OS cache
postmaster=$(head -1 "$work/data/postmaster.pid")

# TPS of one pgbench run, from its output file; the error if it has none
tps() {
    local t
    t=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$1" | head -1)
    [ -n "$t" ] || { echo "pgbench failed:" >&2; cat "$1" >&2; return 1; }
    echo "$t"
}
# pgbench -S for the run's length, pinned to vCPU $1 ("" for none)
select_only() {
    local cpu=$1 out=$2; shift 2
    if [ -n "$cpu" ]; then
        taskset -c "$cpu" "$bin/pgbench" -S -n -T "$seconds" "$@" > "$out" 2>&1
    else
        "$bin/pgbench" -S -n -T "$seconds" "$@" > "$out" 2>&1
    fi
}
pin_postmaster() { taskset -p -c "$1" "$postmaster" >/dev/null; }
backends() {
    "$bin/psql" -Atc "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'"
}

# A backend inherits the postmaster's vCPU when it is forked, so pinning
# the postmaster before a client connects places its backend.
run_placement() {
    local out=$work/run t0 t1
    case $1 in
        free)      select_only "" "$out" -c 2 -j 2; tps "$out" ;;
        one-free)  select_only "" "$out" -c 1; tps "$out" ;;
        pairs)
            pin_postmaster 0
            select_only 0 "$work/p0" -c 1 &
            # the first client's backend must exist before the re-pinning
            for _ in $(seq 100); do [ "$(backends)" -ge 1 ] && break; sleep 0.01; done
            pin_postmaster 1
            select_only 1 "$work/p1" -c 1
            wait
            pin_postmaster 0,1
            t0=$(tps "$work/p0") && t1=$(tps "$work/p1") || return 1
            awk -v a="$t0" -v b="$t1" 'BEGIN { print a + b }' ;;
        split)     pin_postmaster 1; select_only 0 "$out" -c 2 -j 2; pin_postmaster 0,1; tps "$out" ;;
        one-same)  pin_postmaster 0; select_only 0 "$out" -c 1; pin_postmaster 0,1; tps "$out" ;;
        one-split) pin_postmaster 1; select_only 0 "$out" -c 1; pin_postmaster 0,1; tps "$out" ;;
    esac
}

placements=(free pairs split one-free one-same one-split)
echo "vcpu_placement: $rounds rounds of ${seconds} s, scale $scale, stock $("$bin/postgres" --version), $(nproc) vCPUs"
: > "$work/results"
n=${#placements[@]}
for ((r = 1; r <= rounds; r++)); do
    for ((i = 0; i < n; i++)); do
        # ABBA: even rounds in reverse
        pl=${placements[$(( r % 2 ? i : n - 1 - i ))]}
        t=$(run_placement "$pl") || exit 1
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
