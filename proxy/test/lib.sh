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

# free_port [BUSY]: a free TCP port on 127.0.0.1 in 55000-55999, other
# than BUSY.
free_port() {
    local p
    for _ in $(seq 200); do
        p=$((55000 + (RANDOM + $$) % 1000))
        [ "$p" = "${1:-}" ] && continue
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
