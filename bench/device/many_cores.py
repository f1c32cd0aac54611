"""many_cores.py — issue 30, section 4: the benchmarks on many cores, run on
the lent device machine by bench/device/run-on-device.sh (as an
unprivileged user; PostgreSQL refuses root), from the carry that
bench/device/carry.sh packs.

It drives the suite's own code (bench/cluster.py, bench/runner.py, the
alibaba-sysbench scenario's data loading, sysbench invocation and Lua
script, the proxy scenario's helpers, bench/interleave.py's ABBA order), so
the tables, the encrypted columns and the statements are the suite's; what
differs is the placement and the scale:

  alibaba   one pgcipher cluster (pgcipher-off: TDE off, as in the suite's
            scenario, so this measures the encrypted columns and the proxy),
            sysbench's alibaba.lua at 8, 16, 32 and 64 threads,
            plaintext-direct vs encrypted-through-pgcipher-proxy, the server
            pinned to the first half of the CPUs, sysbench and the proxy to
            the other half (sched_setaffinity, inherited by every child);
            TPS, server and proxy CPU per transaction (/proc).
  pgbench   cybertec-pgbench's select-only and TPC-B-like (-n, --no-vacuum)
            at 16, 32 and 64 clients for stock, aes-256 and stock-2 (a second
            identical stock server: the noise floor), same placement,
            configurations interleaved ABBA.

Whether the affinity took effect is measured, not assumed: Cpus_allowed of
the server, a backend, the proxy and this driver, and a busy-loop test (k
spinning processes pinned to one CPU should get about one CPU-second per
wall second between them; unpinned, about k).

Every measurement is a row of results.json in the suite's format, saved
after each part; bench/device/summarize.py makes the report's tables.

Usage: python3 bench/device/many_cores.py --out DIR --workdir DIR
           --pgcipher PREFIX --stock PREFIX --proxy BIN --keys BIN [options]
"""

import argparse
import json
import os
import secrets
import subprocess
import sys
import time
import traceback
import types
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
try:  # the plots need matplotlib; nothing here draws one
    import matplotlib  # noqa: F401
except ImportError:
    import bench

    bench.plots = sys.modules["bench.plots"] = types.ModuleType("bench.plots")

from bench.cluster import STANDARD_CONFIGS, Install  # noqa: E402
from bench.interleave import interleaved  # noqa: E402
from bench.runner import Progress, Run, save_results, timestamp  # noqa: E402
from bench.scenarios import alibaba_sysbench as ali  # noqa: E402
from bench.scenarios import proxy as px  # noqa: E402

# (scenario or None for the plaintext table, workload, configuration), one
# round at one thread count; plain point serves s1 and s2, plain range s1
# and s2, plain write s1 (and s2), plain range_k s3
DEFAULT_RUNS = (
    "plain:point,plain:range,plain:write,plain:range_k,"
    "s1:point,s1:range,s1:write,s2:point,s2:range,s3:range_k"
)


def parse_runs(spec):
    out = []
    for item in spec.split(","):
        s, w = item.split(":")
        out.append((None, w, "plain-direct") if s == "plain" else (s, w, "enc-proxy"))
    return out


def ints(s):
    return [int(x) for x in s.split(",") if x]


# ------------------------------------------------------------------ placement


class Placement:
    """The server's CPUs and the clients' (sysbench, pgbench, the proxy,
    this driver): the allowed CPUs split in two halves."""

    def __init__(self, server_cpus=None):
        allowed = sorted(os.sched_getaffinity(0))
        n = server_cpus or max(len(allowed) // 2, 1)
        self.allowed = allowed
        self.server = set(allowed[:n])
        self.client = set(allowed[n:]) or set(allowed)
        os.sched_setaffinity(0, self.client)

    @contextmanager
    def as_server(self):
        """Processes started inside inherit the server's CPUs."""
        os.sched_setaffinity(0, self.server)
        try:
            yield
        finally:
            os.sched_setaffinity(0, self.client)

    def describe(self):
        return {
            "allowed": _ranges(self.allowed),
            "server": _ranges(self.server),
            "client": _ranges(self.client),
        }


def _ranges(cpus):
    cpus = sorted(cpus)
    out, start = [], None
    for i, c in enumerate(cpus):
        if start is None:
            start = c
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            out.append(f"{start}" if start == c else f"{start}-{c}")
            start = None
    return ",".join(out)


def cpus_allowed(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Cpus_allowed_list:"):
                    return line.split(":", 1)[1].strip()
    except OSError as e:
        return f"unreadable ({e})"
    return "absent"


_SPIN = "import time\nt = time.time()\nwhile time.time() - t < {s}:\n    pass\nprint(time.process_time())\n"


def spin_test(cpus, k, seconds=1.0):
    """CPU seconds k spinning processes got in total in `seconds` of wall
    time, each restricted to `cpus`."""

    def pin():
        os.sched_setaffinity(0, cpus)

    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SPIN.format(s=seconds)],
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=pin,
        )
        for _ in range(k)
    ]
    return sum(float(p.communicate()[0]) for p in procs)


def affinity_check(place, run):
    """Does sched_setaffinity restrict where processes run here?"""
    k = min(4, len(place.allowed))
    one = {min(place.client)}
    pinned = spin_test(one, k)
    free = spin_test(set(place.allowed), k)
    info = {
        "spinners": k,
        "cpu_s_pinned_to_one_cpu": round(pinned, 2),
        "cpu_s_unpinned": round(free, 2),
        # enforced: pinned ~ 1 CPU-second, unpinned ~ k; where the unpinned
        # spinners got much less than k, other work held the CPUs
        "enforced": (pinned < 0.6 * free and pinned < 1.5)
        if free > 0.6 * k
        else "inconclusive (the CPUs were busy)",
    }
    run.record("placement", "-", 0, "spin_cpu_s_pinned", pinned, spinners=k)
    run.record("placement", "-", 0, "spin_cpu_s_unpinned", free, spinners=k)
    run.progress.note(
        f"affinity: {k} spinners pinned to CPU {min(one)} got {pinned:.2f} CPU-s in 1 s, "
        f"unpinned {free:.2f}: affinity enforced: {info['enforced']}"
    )
    return info


def live_children(pid):
    """(live, zombie) children of pid."""
    live = zombie = 0
    for f in px._children(pid):
        if f[0] == "Z":
            zombie += 1
        else:
            live += 1
    return live, zombie


def settled_cpu_s(pm, live_before, timeout=5.0):
    """The server's CPU seconds (bench/scenarios/proxy.py's tree_cpu_s) once
    the backends of the run that just ended are gone and reaped: a backend
    that has exited but is not reaped yet (a zombie) is in none of
    tree_cpu_s's terms, so reading at once loses its CPU (reaped before the
    next run starts) or counts it in the next run (reaped during it).
    Returns (seconds, settled)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        live, zombie = live_children(pm)
        if zombie == 0 and live <= live_before:
            return px.tree_cpu_s(pm), True
        time.sleep(0.01)
    return px.tree_cpu_s(pm), False


def libcrypto_of(pid):
    try:
        with open(f"/proc/{pid}/maps") as f:
            return sorted({line.split()[-1] for line in f if "libcrypto" in line})
    except OSError as e:
        return [f"unreadable ({e})"]


# ------------------------------------------------------------------ alibaba


def alibaba(run, a, place, inst, meta):
    p = dict(ali.PROFILES["full"])
    p.update(
        rows=a.rows,
        threads=ints(a.threads),
        seconds=a.sb_seconds,
        repetitions=a.rounds,
        warmup_seconds=a.warmup,
        shared_buffers_mb=a.shared_buffers_mb,
    )
    settings = ali.settings(p)
    settings["max_connections"] = max(ints(a.threads)) + 50
    runs = parse_runs(a.runs)
    c = run.cluster(STANDARD_CONFIGS[p["config"]], settings, "alibaba-many")
    proxy = None
    deadline = a.t0 + a.alibaba_budget
    try:
        c.initdb()
        with place.as_server():
            c.start()
        pm = px.postmaster_pid(c)
        cmk = px.new_cmk(a.keys, c)
        proxy = px.start_proxy(a.proxy, c, "sysbench", cmk)
        t0 = time.time()
        ali._load(run, c, proxy, p)
        run.progress.note(f"alibaba: loaded in {time.time() - t0:.1f} s")
        backend = next((int(e) for e in os.listdir("/proc") if e.isdigit() and _ppid(e) == pm), None)
        meta["alibaba_placement"] = {
            "postmaster": cpus_allowed(pm),
            "a_backend": cpus_allowed(backend) if backend else "none",
            "proxy": cpus_allowed(proxy.pid),
            "driver (sysbench's parent)": cpus_allowed(os.getpid()),
            "postmaster_libcrypto": libcrypto_of(pm),
        }
        run.progress.note(f"alibaba placement: {meta['alibaba_placement']}")
        ports = {"plain-direct": c.port, "enc-proxy": proxy.port}
        if a.warmup:
            for s, w, cfg in runs:
                ali.sysbench(run, ports[cfg], ali._table(s, w), w, max(p["threads"]), a.warmup, p["rows"])
            run.progress.note("alibaba: warm-up done")
        for rep, threads, (s, w, cfg) in interleaved(runs, p["repetitions"], p["threads"]):
            if time.time() > deadline:
                run.progress.note(f"alibaba: budget of {a.alibaba_budget} s spent; the rest is skipped")
                meta["alibaba_cut_at"] = dict(round=rep, threads=threads)
                break
            table = ali._table(s, w)
            live0 = live_children(pm)[0]
            server0, _ = settled_cpu_s(pm, live0)
            proxy0 = px.process_cpu_s(proxy.pid)
            m = ali.sysbench(run, ports[cfg], table, w, threads, p["seconds"], p["rows"])
            tx = max(m["transactions"], 1)
            server1, settled = settled_cpu_s(pm, live0)
            m["server_cpu_us_per_tx"] = (server1 - server0) * 1e6 / tx
            m["server_cpu_settled"] = 1 if settled else 0
            if cfg != "plain-direct":
                m["proxy_cpu_us_per_tx"] = (px.process_cpu_s(proxy.pid) - proxy0) * 1e6 / tx
            for metric, value in m.items():
                run.record(
                    "alibaba-sysbench",
                    cfg,
                    rep,
                    metric,
                    value,
                    part="timed",
                    case=s or "plain",
                    workload=w,
                    threads=threads,
                )
            extra = f", proxy {m['proxy_cpu_us_per_tx']:.0f} µs/tx" if "proxy_cpu_us_per_tx" in m else ""
            run.progress.step(
                f"alibaba round {rep} {threads:2d} threads {s or 'plain'} {w} {cfg}: {m['tps']:,.0f} tps, "
                f"server {m['server_cpu_us_per_tx']:.0f} µs/tx{extra}",
                p["seconds"] + 0.5,
            )
        run.settings["alibaba"] = settings
        meta["alibaba"] = {k: v for k, v in p.items() if k not in ("steps", "est_seconds")}
        meta["alibaba"]["runs"] = a.runs
    except Exception:
        traceback.print_exc()
        _tail(c.dir)
        meta.setdefault("failed", []).append("alibaba")
    finally:
        if proxy:
            proxy.stop()
        c.destroy()


def _ppid(pid):
    try:
        return int(px.stat_fields(pid)[1])
    except (OSError, ValueError, IndexError):
        return -1


def _tail(d):
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if name.endswith(".log"):
            with open(os.path.join(d, name), errors="replace") as f:
                print(f"--- {name} (tail)\n{f.read()[-3000:]}", flush=True)


# ------------------------------------------------------------------ pgbench


def pgbench(run, a, place, meta):
    configs = [STANDARD_CONFIGS[n] for n in a.pgb_configs.split(",")]
    settings = {
        "shared_buffers": f"{a.pgb_shared_buffers_mb}MB",
        "max_connections": max(ints(a.clients)) + 50,
        "max_wal_size": "4GB",
        "checkpoint_timeout": "15min",
        "autovacuum": "off",
    }
    run.settings["pgbench"] = settings
    clusters = {}
    deadline = a.t0 + a.total_budget
    try:
        for cfg in configs:
            c = run.cluster(cfg, settings, "pgbench-many")
            c.initdb()
            with place.as_server():
                c.start()
            clusters[cfg.name] = c
        t0 = time.time()

        def init(c):
            _, cmd, _ = c.pgbench(["-i", "-q", "-s", str(a.scale)], timeout=1800)
            c.psql("VACUUM ANALYZE")
            c.psql("CHECKPOINT")
            return cmd

        with ThreadPoolExecutor(len(clusters)) as ex:
            for cmd in ex.map(init, clusters.values()):
                run.command(cmd)
        sizes = {
            n: c.psql("SELECT pg_size_pretty(pg_database_size(current_database()))")
            for n, c in clusters.items()
        }
        run.progress.note(f"pgbench: initialized scale {a.scale} in {time.time() - t0:.1f} s: {sizes}")
        pm = {n: px.postmaster_pid(c) for n, c in clusters.items()}
        meta["pgbench_placement"] = {n: cpus_allowed(p) for n, p in pm.items()}
        meta["pgbench_libcrypto"] = {n: libcrypto_of(p) for n, p in pm.items()}
        ncl = len(place.client)
        for c in clusters.values():  # warm-up: caches
            c.pgbench(["-S", "-n", "-T", str(a.warmup), "-c", "16", "-j", str(min(16, ncl))])
        points = [(w, n) for w in a.workloads.split(",") for n in ints(a.clients)]
        for rep, (w, n), cfg in interleaved(configs, a.rounds, points):
            if time.time() > deadline:
                run.progress.note(f"pgbench: total budget of {a.total_budget} s spent; the rest is skipped")
                meta["pgbench_cut_at"] = dict(round=rep, workload=w, clients=n)
                break
            c = clusters[cfg.name]
            args = (["-S"] if w == "select-only" else []) + [
                "-n",
                "-T",
                str(a.pgb_seconds),
                "-c",
                str(n),
                "-j",
                str(min(n, ncl)),
            ]
            live0 = live_children(pm[cfg.name])[0]
            cpu0, _ = settled_cpu_s(pm[cfg.name], live0)
            m, cmd, _ = c.pgbench(args, timeout=a.pgb_seconds * 10 + 120)
            cpu1, settled = settled_cpu_s(pm[cfg.name], live0)
            m["server_cpu_us_per_tx"] = (cpu1 - cpu0) * 1e6 / max(m.get("transactions", 1), 1)
            m["server_cpu_settled"] = 1 if settled else 0
            run.command(cmd.replace(c.dir, "$CLUSTER"))
            for metric, value in m.items():
                run.record(
                    "cybertec-pgbench",
                    cfg.name,
                    rep,
                    metric,
                    value,
                    workload=w,
                    scale=a.scale,
                    clients=n,
                )
            run.progress.step(
                f"pgbench round {rep} {w} {n:2d} clients {cfg.name}: {m['tps']:,.0f} tps, "
                f"server {m['server_cpu_us_per_tx']:.0f} µs/tx",
                a.pgb_seconds + 0.5,
            )
        meta["pgbench"] = dict(
            configs=a.pgb_configs,
            scale=a.scale,
            clients=a.clients,
            workloads=a.workloads,
            seconds=a.pgb_seconds,
            rounds=a.rounds,
            shared_buffers_mb=a.pgb_shared_buffers_mb,
        )
    except Exception:
        traceback.print_exc()
        for c in clusters.values():
            _tail(c.dir)
        meta.setdefault("failed", []).append("pgbench")
    finally:
        for c in clusters.values():
            c.destroy()


# ------------------------------------------------------------------ main


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--pgcipher", required=True, help="pgcipher install prefix")
    ap.add_argument("--stock", required=True, help="stock install prefix")
    ap.add_argument("--proxy", required=True)
    ap.add_argument("--keys", required=True, help="pgcipher-keys")
    ap.add_argument("--parts", default="alibaba,pgbench")
    ap.add_argument("--server-cpus", type=int, default=0, help="default: half of the allowed CPUs")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1, help="seconds of warm-up per run kind")
    # alibaba
    ap.add_argument("--threads", default="8,16,32,64")
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--sb-seconds", type=int, default=2)
    ap.add_argument("--runs", default=DEFAULT_RUNS)
    ap.add_argument("--shared-buffers-mb", type=int, default=512)
    ap.add_argument("--alibaba-budget", type=int, default=250, help="seconds from the start")
    # pgbench
    ap.add_argument("--pgb-configs", default="stock,aes-256,stock-2")
    ap.add_argument("--clients", default="16,32,64")
    ap.add_argument("--workloads", default="select-only,tpcb-like")
    ap.add_argument("--scale", type=int, default=30)
    ap.add_argument("--pgb-seconds", type=int, default=3)
    ap.add_argument("--pgb-shared-buffers-mb", type=int, default=256)
    ap.add_argument("--total-budget", type=int, default=420, help="seconds from the start")
    a = ap.parse_args(argv)
    a.t0 = time.time()

    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.workdir, exist_ok=True)
    place = Placement(a.server_cpus or None)
    parts = a.parts.split(",")
    installs = {"pgcipher": Install("pgcipher", a.pgcipher), "stock": Install("stock", a.stock)}
    key_file = os.path.join(a.workdir, "kek")
    with open(key_file, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    os.chmod(key_file, 0o600)
    n_ali = len(parse_runs(a.runs)) * len(ints(a.threads)) * a.rounds if "alibaba" in parts else 0
    n_pgb = (
        len(a.pgb_configs.split(",")) * len(a.workloads.split(",")) * len(ints(a.clients)) * a.rounds
        if "pgbench" in parts
        else 0
    )
    progress = Progress(n_ali + n_pgb, n_ali * (a.sb_seconds + 0.5) + n_pgb * (a.pgb_seconds + 0.5) + 60)
    run = Run(a.out, installs, "many-cores", key_file, a.workdir, progress)
    meta = {
        "profile": "many-cores (issue 30, section 4)",
        "started": timestamp(),
        "argv": sys.argv[1:],
        "placement": place.describe(),
        "nproc": os.cpu_count(),
        "order": "ABBA",
        "installs": {
            n: {
                "prefix": i.prefix,
                "version": i.pg_config("--version"),
                "configure": i.pg_config("--configure"),
            }
            for n, i in installs.items()
        },
    }
    progress.note(
        f"many-cores: {n_ali} sysbench and {n_pgb} pgbench measurements; placement {place.describe()}"
    )
    try:
        meta["affinity"] = affinity_check(place, run)
        if "alibaba" in parts:
            progress.note("== alibaba-sysbench: plaintext-direct vs encrypted-through-proxy")
            alibaba(run, a, place, installs["pgcipher"], meta)
            save_results(a.out, meta, run.rows, run.commands, run.settings)
        if "pgbench" in parts:
            progress.note("== cybertec-pgbench: " + a.pgb_configs)
            pgbench(run, a, place, meta)
    finally:
        run.cleanup()
        meta["finished"] = timestamp()
        meta["elapsed_s"] = round(time.time() - a.t0, 1)
        save_results(a.out, meta, run.rows, run.commands, run.settings)
    progress.note(f"many-cores: done in {time.time() - a.t0:.0f} s; results in {a.out}")
    try:
        from bench.device import summarize

        with open(os.path.join(a.out, "summary.md"), "w") as f:
            f.write(summarize.summary(json.load(open(os.path.join(a.out, "results.json")))))
    except Exception:
        traceback.print_exc()
    return 1 if meta.get("failed") else 0


if __name__ == "__main__":
    sys.exit(main())
