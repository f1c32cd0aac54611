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
free_port() {
    local p lo
    lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    for _ in $(seq 200); do
        p=$((20000 + (RANDOM * 32768 + RANDOM + $$) % 12000))
        [ "$p" = "${1:-}" ] && continue
        [ "$p" -lt "$lo" ] || continue
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
    done
    echo "run.sh: no free port" >&2; return 1
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
