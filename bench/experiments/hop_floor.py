"""hop_floor.py — the cheapest hop Go allows, against PgBouncer's and the
proxy's (issue 43, item 6: "an event loop over the sockets, or one
goroutine per direction …; your measurements decide").

The pooler scenario measures pgcipher-proxy at 2.2-3.1 times PgBouncer's
CPU per prepared select-only transaction; its profile puts most of it in
system calls and Go's scheduler, not in the proxy's own work.  This
experiment separates the two: hopfloor (proxy/test/hopfloor) relays bytes
and parses nothing, once with two goroutines per client on Go's netpoller
(the proxy's shape) and once with one event loop over epoll (PgBouncer's
shape).  Paths, interleaved in every round (ABBA order), pgbench over TCP
on 127.0.0.1, each hop reaching the server over its Unix socket:

    pgbouncer        PgBouncer (Debian's), pool_mode = session
    pgbouncer-again  a second, identical PgBouncer: the noise floor
    proxy            pgcipher-proxy, --pool-mode session (what ships)
    goroutines       hopfloor -mode goroutines (GOMAXPROCS as Go sets it)
    goroutines-p1    the same with GOMAXPROCS=1
    goroutines-raw   the same goroutines, each read and write a raw system
                     call inside syscall.RawConn (hopfloor -mode
                     goroutines-raw): parked by the netpoller as before,
                     never in the scheduler's system-call state
    epoll            hopfloor -mode epoll
    epoll-raw        the same loop waiting in a raw system call, unseen by
                     Go's scheduler (hopfloor -mode epoll-raw)

Per run: TPS, the hop process's CPU (utime + stime, and utime alone: Go's
scheduler and the proxy's own work are user time, the system calls and
the wake-ups they cause system time) per transaction, and the server's.
Then, per path, the ratio of the medians to PgBouncer's with a 95 %
bootstrap CI.  Last, with --syscalls, one more run per path under
`strace -c -f` counts the hop's system calls per transaction (strace
slows the hop: counts, not times).

    runuser -u pgcipher -- env PGCIPHER_BUILD=$PWD/build \\
        build/venv/bin/python -m bench.experiments.hop_floor [--rounds N] [--seconds S] \\
        [--clients 1,16] [--modes prepared,simple] [--syscalls] [--proxy NAME=BINARY ...]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from bench import procs, stats
from bench.cluster import free_port
from bench.experiments.rmw_server_cpu import _Commands, started_cluster, teardown

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PGCIPHER_BUILD", os.path.join(TOP, "build"))
PATHS = (
    "pgbouncer",
    "pgbouncer-again",
    "proxy",
    "goroutines",
    "goroutines-p1",
    "goroutines-raw",
    "epoll",
    "epoll-raw",
)
SCALE = 10


def build_hopfloor():
    """hopfloor built from this tree (Go's cache makes a second build quick)."""
    go = subprocess.run(
        [os.path.join(TOP, "scripts", "go.sh"), "path"], capture_output=True, text=True, check=True
    ).stdout.strip()
    out = os.path.join(tempfile.mkdtemp(prefix="hopfloor"), "hopfloor")
    subprocess.run(
        [go, "build", "-o", out, "./test/hopfloor"],
        cwd=os.path.join(TOP, "proxy"),
        env={**os.environ, "GOFLAGS": "-buildvcs=false"},
        check=True,
    )
    return out


def start_hopfloor(binary, c, mode, tag, procs_env=None):
    port = free_port()
    args = [binary, "-mode", mode, "-listen", f"127.0.0.1:{port}", "-upstream", f"{c.dir}/.s.PGSQL.{c.port}"]
    return procs.Daemon(
        f"hopfloor ({tag})",
        args,
        port,
        os.path.join(c.dir, f"hopfloor-{tag}.log"),
        env={**os.environ, **(procs_env or {})},
    )


def syscalls_per_tx(c, d, args, seconds):
    """System calls of the hop per transaction, by name, under strace -c."""
    out = os.path.join(c.dir, f"strace-{d.pid}.txt")
    tracer = subprocess.Popen(
        ["strace", "-c", "-f", "-o", out, "-p", str(d.pid)], stderr=subprocess.PIPE, text=True
    )
    time.sleep(0.5)
    m, _ = procs.pgbench(_Commands, c, d.port, [*args, "-T", str(seconds)], timeout=seconds + 120)
    tracer.terminate()
    _, err = tracer.communicate(timeout=30)
    counts = {}
    with open(out) as f:
        for line in f:
            parts = line.split()
            # % time, seconds, usecs/call, calls, [errors,] syscall
            if len(parts) >= 5 and re.match(r"^\d", parts[0]) and parts[-1] != "total":
                calls = int(parts[3])
                errors = int(parts[4]) if len(parts) == 6 else 0
                counts[parts[-1]] = (calls, errors)
    if not counts:
        raise RuntimeError(f"strace counted nothing on {d.name}: {err.strip()[-500:]}")
    tx = max(m["transactions"], 1)
    return {k: (v[0] / tx, v[1] / tx) for k, v in counts.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1, help="rounds run and printed, left out of the medians")
    ap.add_argument("--clients", default="1,16")
    ap.add_argument("--modes", default="prepared,simple")
    ap.add_argument("--syscalls", action="store_true")
    ap.add_argument(
        "--proxy",
        action="append",
        default=[],
        metavar="NAME=BINARY",
        help="another pgcipher-proxy binary as one more path (an earlier build, say)",
    )
    a = ap.parse_args()
    os.environ.pop("GOMAXPROCS", None)  # Go's own choice, but where a path sets it
    extra = dict(x.split("=", 1) for x in a.proxy)
    paths = PATHS[:3] + tuple(extra) + PATHS[3:]
    clients = [int(x) for x in a.clients.split(",")]
    modes = a.modes.split(",")
    binary = build_hopfloor()
    proxy_bin = os.path.join(BUILD, "bin", "pgcipher-proxy")
    keys_bin = os.path.join(BUILD, "bin", "pgcipher-keys")
    bouncer_bin = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    c = started_cluster("hopfloor")
    hops = {}
    try:
        c.pgbench(["-i", "-q", "-s", str(SCALE)], timeout=600)
        c.psql("VACUUM ANALYZE")
        cmk = procs.new_cmk(keys_bin, c)
        hops["pgbouncer"] = procs.start_pgbouncer(bouncer_bin, c, "a", 60)
        hops["pgbouncer-again"] = procs.start_pgbouncer(bouncer_bin, c, "b", 60)
        hops["proxy"] = procs.start_proxy(proxy_bin, c, "session", cmk)
        for name, b in extra.items():
            hops[name] = procs.start_proxy(b, c, name, cmk)
        hops["goroutines"] = start_hopfloor(binary, c, "goroutines", "goroutines")
        hops["goroutines-p1"] = start_hopfloor(binary, c, "goroutines", "goroutines-p1", {"GOMAXPROCS": "1"})
        hops["goroutines-raw"] = start_hopfloor(binary, c, "goroutines-raw", "goroutines-raw")
        hops["epoll"] = start_hopfloor(binary, c, "epoll", "epoll")
        hops["epoll-raw"] = start_hopfloor(binary, c, "epoll-raw", "epoll-raw")
        version = subprocess.run([bouncer_bin, "--version"], capture_output=True, text=True).stdout.split(
            "\n"
        )[0]
        cpu = procs.ServerCPU(procs.postmaster_pid(c))
        points = [(m, n) for m in modes for n in clients]
        print(
            f"hop_floor: {os.cpu_count()} CPUs, {version}, pgbench scale {SCALE} select-only, "
            f"{a.warmup}+{a.rounds} rounds of {a.seconds} s, points {points}",
            flush=True,
        )
        hop, usr, srv, tps = {}, {}, {}, {}
        for r in range(a.warmup + a.rounds):
            order = paths if r % 2 == 0 else tuple(reversed(paths))
            for mode, n in points:
                for path in order:
                    d = hops[path]
                    args = ["-n", "-S", "-M", mode, "-c", str(n), "-j", str(min(n, os.cpu_count() or 1))]
                    (h0, u0), s0 = procs.process_user_system_s(d.pid), cpu.read()
                    m, _ = procs.pgbench(_Commands, c, d.port, [*args, "-T", str(a.seconds)], a.seconds + 120)
                    tx = max(m["transactions"], 1)
                    s1 = cpu.read()  # waits for the backends to end: the hop's teardown counts
                    h1, u1 = procs.process_user_system_s(d.pid)
                    hu, uu, su = (h1 - h0) * 1e6 / tx, (u1 - u0) * 1e6 / tx, (s1 - s0) * 1e6 / tx
                    tag = f"warmup {r + 1}" if r < a.warmup else f"round {r - a.warmup + 1}/{a.rounds}"
                    print(
                        f"{tag} -M {mode:8} {n:3} clients {path:15} {tx / a.seconds:8.0f} TPS, hop "
                        f"{hu:6.1f} us CPU/tx ({uu:5.1f} user), server {su:6.1f}",
                        flush=True,
                    )
                    if r >= a.warmup:
                        key = (mode, n, path)
                        hop.setdefault(key, []).append(hu)
                        usr.setdefault(key, []).append(uu)
                        srv.setdefault(key, []).append(su)
                        tps.setdefault(key, []).append(tx / a.seconds)
        print("\nmedians over the rounds; hop CPU / PgBouncer's with its 95 % bootstrap CI")
        print(
            "| -M | clients | path | TPS | hop µs/tx | of it user | of it system | server µs/tx | hop / PgBouncer |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for mode, n in points:
            base = hop[(mode, n, "pgbouncer")]
            for path in paths:
                key = (mode, n, path)
                s = stats.summarize(hop[key], base)
                ratio = (
                    "–" if path == "pgbouncer" else f"{s['ratio']:.2f} ({s['ci_low']:.2f}–{s['ci_high']:.2f})"
                )
                print(
                    f"| {mode} | {n} | {path} | {stats.median(tps[key]):,.0f} | {stats.median(hop[key]):.1f} | "
                    f"{stats.median(usr[key]):.1f} | {stats.median([h - u for h, u in zip(hop[key], usr[key])]):.1f} | "
                    f"{stats.median(srv[key]):.1f} | {ratio} |",
                    flush=True,
                )
        if a.syscalls:
            print("\nsystem calls of the hop per transaction (strace -c -f; calls, of them errors)")
            for mode, n in points:
                for path in paths:
                    if path == "pgbouncer-again":
                        continue
                    d = hops[path]
                    args = ["-n", "-S", "-M", mode, "-c", str(n), "-j", str(min(n, os.cpu_count() or 1))]
                    counts = syscalls_per_tx(c, d, args, 3)
                    top = sorted(counts.items(), key=lambda kv: -kv[1][0])[:6]
                    total = sum(v[0] for v in counts.values())
                    print(
                        f"-M {mode} {n} clients {path:14} {total:5.2f} per tx: "
                        + ", ".join(
                            f"{k} {v[0]:.2f}" + (f" ({v[1]:.2f} err)" if v[1] >= 0.005 else "")
                            for k, v in top
                        ),
                        flush=True,
                    )
    finally:
        teardown(c, hops.values())


if __name__ == "__main__":
    sys.exit(main())
