# shellcheck shell=bash
# lib.sh — shell helpers of the proxy's test harnesses (clients/run.sh,
# pgx-suite/run.sh), sourced, not run.

# stop_proxy: stop the proxy started in the background as $proxy_pid.
stop_proxy() {
    if [ -n "${proxy_pid:-}" ]; then
        kill "$proxy_pid" 2>/dev/null || true
        wait "$proxy_pid" 2>/dev/null || true
        proxy_pid=
    fi
}

# free_port [BUSY]: a free TCP port on 127.0.0.1 in 20000-31999, other
# than BUSY.  The range lies below Linux's ephemeral ports (32768-60999):
# there an outgoing connection of any other suite can hold the port as its
# local end, which no connect() probe sees and which makes the server's
# bind() fail (CI, stop 54: "could not bind ... Address already in use").
# It lies inside the range of PostgreSQL's TAP clusters (10200-32767),
# which run in the other lane: the port is reserved for this harness as
# PostgreSQL::Test::Cluster reserves its own (reserve_port), so neither
# takes the other's.
free_port() {
    local p lo
    lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    for _ in $(seq 200); do
        p=$((20000 + (RANDOM * 32768 + RANDOM + $$) % 12000))
        [ "$p" = "${1:-}" ] && continue
        [ "$p" -lt "$lo" ] || continue
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue
        reserve_port "$p" || continue
        echo "$p"; return 0
    done
    echo "run.sh: no free port" >&2; return 1
}

# reserve_port PORT: PORT's reservation in $PG_TEST_PORT_DIR (scripts/
# test.sh sets it) for this harness's process, in the format and under the
# lock of PostgreSQL::Test::Cluster's _reserve_port: a file PORT.rsv
# holding the pid, taken while that process lives.  Fails if a live process
# holds it; nothing to do without the directory.
reserve_port() {
    local dir=${PG_TEST_PORT_DIR:-} fd holder
    [ -n "$dir" ] || return 0
    mkdir -p "$dir" || return 1
    exec {fd}<>"$dir/$1.rsv" || return 1
    flock "$fd" || { exec {fd}>&-; return 1; }
    read -r holder <&"$fd" || true
    if [ "${holder:-0}" -gt 0 ] 2>/dev/null && kill -0 "$holder" 2>/dev/null; then
        exec {fd}>&-
        return 1
    fi
    printf '%10d\n' "$$" 1<> "$dir/$1.rsv"
    exec {fd}>&-
}

# wait_proxy PORT LOG: wait until the proxy started as $proxy_pid listens
# on 127.0.0.1:PORT; if it exits first, print its log LOG and fail.
wait_proxy() {
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        kill -0 "$proxy_pid" 2>/dev/null || { cat "$2"; return 1; }
        sleep 0.1
    done
    echo "the proxy does not listen on $1"; return 1
}
