"""many_cores.py — issue 30, section 4: the benchmarks on many cores, run on
the lent device machine by bench/device/run-on-device.sh (as an
unprivileged user; PostgreSQL refuses root), from the carry that
bench/device/carry.sh packs.

It drives the suite's own code (bench/cluster.py, bench/runner.py, the
alibaba-sysbench scenario's data loading, sysbench invocation and Lua
script, the tproc-c scenario's schema, load, transactions and checks, the
proxy scenario's helpers, bench/interleave.py's ABBA order), so the
tables, the encrypted columns and the statements are the suite's; what
differs is the placement and the scale.  Parts (--parts, measured in that
order):

  alibaba   one pgcipher cluster (pgcipher-off: TDE off, as in the suite's
            scenario, so this measures the encrypted columns and the proxy),
            sysbench's alibaba.lua at 8, 16, 32 and 64 threads,
            plaintext-direct vs encrypted-through-pgcipher-proxy (and
            plaintext-through-the-proxy, the hop alone, where --runs asks:
            `plainproxy:point`); TPS, server and proxy CPU per transaction
            (/proc).  Each write run starts on a freshly vacuumed table
            (autovacuum is off, as in the suite; --no-vacuum-before-write:
            as the first device run, where dead rows piled up run to run).
  tprocc    the suite's TPROC-C-like workload (bench/sql/tprocc) on
            --warehouses warehouses at 16, 32 and 64 virtual users for stock
            and aes-256; NOPM, TPM, server CPU per transaction; the TPC-C
            consistency conditions checked after the runs.
  pgbench   cybertec-pgbench's select-only and TPC-B-like (-n, --no-vacuum)
            at 16, 32 and 64 clients for stock, aes-256 and stock-2 (a second
            identical stock server: the noise floor).

Placement: the server pinned to the first half of the CPUs, the clients
(sysbench, pgbench, the proxy, this driver) to the other half
(sched_setaffinity, inherited by every child).  Every cluster of every part
is created and loaded first, the loads running concurrently; then the parts
are measured one after the other, configurations interleaved ABBA, each
part's clusters removed when it is done.  The server's CPU per run is read
once the run's backends have exited and been reaped (proxy.ServerCPU).

Whether the affinity took effect is measured, not assumed: Cpus_allowed of
the server, a backend, the proxy and this driver, and a busy-loop test (k
spinning processes pinned to one CPU should get about one CPU-second per
wall second between them; unpinned, about k).

Every measurement is a row of results.json in the suite's format, saved
after each part; bench/device/summarize.py makes the report's tables.
--budget PART=SECONDS (seconds from the start) cuts a part short where its
time is spent, and --total-budget all of them; what was cut is in the meta.

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

from bench import procs  # noqa: E402
from bench.cluster import STANDARD_CONFIGS, Install  # noqa: E402
from bench.interleave import interleaved  # noqa: E402
from bench.runner import Progress, Run, save_results, timestamp  # noqa: E402
from bench.scenarios import alibaba_sysbench as ali  # noqa: E402
from bench.scenarios import tprocc as tp  # noqa: E402

# (scenario or None for the plaintext table, workload, configuration), one
# round at one thread count; plain point serves s1 and s2, plain range s1
# and s2, plain write s1 (and s2), plain range_k s3; plainproxy: the
# plaintext table through the proxy (the hop alone)
DEFAULT_RUNS = (
    "plain:point,plain:range,plain:write,plain:range_k,"
    "s1:point,s1:range,s1:write,s2:point,s2:range,s3:range_k"
)
CONFIG_OF = {"plain": "plain-direct", "plainproxy": "plain-proxy"}


def parse_runs(spec):
    out = []
    for item in spec.split(","):
        s, w = item.split(":")
        if s in CONFIG_OF:
            out.append((None, w, CONFIG_OF[s]))
        elif s in ali.SCENARIOS and w in ali.SCENARIOS[s][3]:
            out.append((s, w, "enc-proxy"))
        else:
            raise ValueError(f"no sysbench run {item!r} (scenarios and workloads: {ali.SCENARIOS})")
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


def libcrypto_of(pid):
    try:
        with open(f"/proc/{pid}/maps") as f:
            return sorted({line.split()[-1] for line in f if "libcrypto" in line})
    except OSError as e:
        return [f"unreadable ({e})"]


def _ppid(pid):
    try:
        return int(procs.stat_fields(pid)[1])
    except (OSError, ValueError, IndexError):
        return -1


def _tail(d):
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if name.endswith(".log"):
            with open(os.path.join(d, name), errors="replace") as f:
                print(f"--- {name} (tail)\n{f.read()[-3000:]}", flush=True)


class Part:
    """One part: its clusters are created (setup, in the main thread: the
    server's placement is set per thread), loaded (load, concurrently with
    the other parts'), measured (measure, one part at a time) and removed
    (close).  A failure is recorded in meta["failed"] and ends this part
    only."""

    name = None

    def __init__(self, run, a, place, meta):
        self.run, self.a, self.place, self.meta = run, a, place, meta
        self.clusters = {}
        self.ok = True

    def deadline(self):
        return self.a.t0 + min(self.a.budget.get(self.name, self.a.total_budget), self.a.total_budget)

    def out_of_time(self, **where):
        if time.time() > self.deadline():
            self.run.progress.note(f"{self.name}: its time is spent; the rest is skipped")
            self.meta[f"{self.name}_cut_at"] = where
            return True
        return False

    def new_cluster(self, config, settings, scenario):
        c = self.run.cluster(STANDARD_CONFIGS[config], settings, scenario)
        c.initdb()
        with self.place.as_server():
            c.start()
        self.clusters[config] = c
        return c

    def guarded(self, step):
        if not self.ok:
            return
        try:
            getattr(self, step)()
        except Exception:
            traceback.print_exc()
            for c in self.clusters.values():
                _tail(c.dir)
            self.meta.setdefault("failed", []).append(f"{self.name} ({step})")
            self.ok = False

    def setup(self):
        raise NotImplementedError

    def load(self):
        raise NotImplementedError

    def measure(self):
        raise NotImplementedError

    def close(self):
        for c in self.clusters.values():
            try:
                c.destroy()
            except Exception:
                traceback.print_exc()
        self.clusters = {}


# ------------------------------------------------------------------ alibaba


class Alibaba(Part):
    name = "alibaba"

    def setup(self):
        a = self.a
        p = dict(ali.PROFILES["full"])
        p.update(
            rows=a.rows,
            threads=ints(a.threads),
            seconds=a.sb_seconds,
            repetitions=a.rounds,
            warmup_seconds=a.warmup,
            shared_buffers_mb=a.shared_buffers_mb,
        )
        self.p = p
        self.settings = ali.settings(p)
        self.settings["max_connections"] = max(ints(a.threads)) + 50
        self.runs = parse_runs(a.runs)
        self.proxy = None
        c = self.new_cluster(p["config"], self.settings, "alibaba-many")
        self.pm = procs.postmaster_pid(c)
        cmk = procs.new_cmk(a.keys, c)
        self.proxy = procs.start_proxy(a.proxy, c, "sysbench", cmk)

    def load(self):
        c = self.clusters[self.p["config"]]
        t0 = time.time()
        ali._load(self.run, c, self.proxy, self.p)
        self.run.progress.note(
            f"alibaba: {self.p['rows']:,} rows per table loaded in {time.time() - t0:.1f} s"
        )

    def measure(self):
        run, a, p, meta = self.run, self.a, self.p, self.meta
        c = self.clusters[p["config"]]
        pm = self.pm
        backend = next((int(e) for e in os.listdir("/proc") if e.isdigit() and _ppid(e) == pm), None)
        meta["alibaba_placement"] = {
            "postmaster": cpus_allowed(pm),
            "a_backend": cpus_allowed(backend) if backend else "none",
            "proxy": cpus_allowed(self.proxy.pid),
            "driver (sysbench's parent)": cpus_allowed(os.getpid()),
            "postmaster_libcrypto": libcrypto_of(pm),
        }
        run.progress.note(f"alibaba placement: {meta['alibaba_placement']}")
        meta["alibaba"] = {k: v for k, v in p.items() if k not in ("steps", "est_seconds")}
        meta["alibaba"].update(runs=a.runs, vacuum_before_write=a.vacuum_before_write)
        run.settings["alibaba"] = self.settings
        ports = {"plain-direct": c.port, "plain-proxy": self.proxy.port, "enc-proxy": self.proxy.port}
        if a.warmup:
            for s, w, cfg in self.runs:
                ali.sysbench(run, ports[cfg], ali._table(s, w), w, max(p["threads"]), a.warmup, p["rows"])
            run.progress.note("alibaba: warm-up done")
        server = procs.ServerCPU(pm)
        for rep, threads, (s, w, cfg) in interleaved(self.runs, p["repetitions"], p["threads"]):
            if self.out_of_time(round=rep, threads=threads, run=f"{s or 'plain'}:{w}:{cfg}"):
                break
            table = ali._table(s, w)
            if w == "write" and a.vacuum_before_write:
                c.psql(f"VACUUM {table}")  # the dead rows of the runs before
            server0, settled0 = server.read(), server.settled
            proxy0 = procs.process_cpu_s(self.proxy.pid)
            m = ali.sysbench(run, ports[cfg], table, w, threads, p["seconds"], p["rows"])
            tx = max(m["transactions"], 1)
            m["server_cpu_us_per_tx"] = (server.read() - server0) * 1e6 / tx
            m["server_cpu_settled"] = 1 if settled0 and server.settled else 0
            if cfg != "plain-direct":
                m["proxy_cpu_us_per_tx"] = (procs.process_cpu_s(self.proxy.pid) - proxy0) * 1e6 / tx
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

    def close(self):
        if getattr(self, "proxy", None):
            self.proxy.stop()
            self.proxy = None
        super().close()


# ------------------------------------------------------------------ tproc-c


class TProcC(Part):
    name = "tprocc"

    def setup(self):
        a = self.a
        self.settings = {
            "shared_buffers": f"{a.tpcc_shared_buffers_mb}MB",
            "max_connections": max(ints(a.tpcc_clients)) + 30,
            "max_wal_size": "4GB",
            "checkpoint_timeout": "15min",
        }
        self.run.settings["tproc-c"] = self.settings
        for name in a.tpcc_configs.split(","):
            self.new_cluster(name, self.settings, "tprocc-many")

    def load(self):
        w = self.a.warehouses

        def one(item):
            name, c = item
            t0 = time.time()
            tp.load(self.run, c, w)
            counts = tp.row_counts(c)
            bad = tp.check_initial_counts(counts, w)
            self.run.record("tproc-c", name, 0, "initial_counts_ok", 0 if bad else 1, phase="load")
            if bad:
                raise RuntimeError(f"TPROC-C initial row counts wrong on {name}: {bad}")
            size = c.psql("SELECT pg_size_pretty(pg_database_size('tpcc'))")
            self.run.progress.note(
                f"tproc-c: {name} loaded {w} warehouses ({size}) in {time.time() - t0:.1f} s"
            )

        with ThreadPoolExecutor(len(self.clusters)) as ex:
            list(ex.map(one, self.clusters.items()))

    def measure(self):
        run, a, meta = self.run, self.a, self.meta
        cfgs = [STANDARD_CONFIGS[n] for n in a.tpcc_configs.split(",")]
        meta["tprocc"] = dict(
            configs=a.tpcc_configs,
            warehouses=a.warehouses,
            clients=a.tpcc_clients,
            seconds=a.tpcc_seconds,
            rounds=a.tpcc_rounds,
            warmup_seconds=a.warmup,
            shared_buffers_mb=a.tpcc_shared_buffers_mb,
        )
        servers = {}
        for n, c in self.clusters.items():
            if a.warmup:
                tp.measure(run, c, max(ints(a.tpcc_clients)), max(a.warmup, 2), a.warehouses)
            servers[n] = procs.ServerCPU(procs.postmaster_pid(c))
        meta["tprocc_placement"] = {n: cpus_allowed(s.pid) for n, s in servers.items()}
        for rep, vus, cfg in interleaved(cfgs, a.tpcc_rounds, ints(a.tpcc_clients)):
            if self.out_of_time(round=rep, vus=vus, config=cfg.name):
                break
            c, server = self.clusters[cfg.name], servers[cfg.name]
            cpu0, settled0 = server.read(), server.settled
            m = tp.measure(run, c, vus, a.tpcc_seconds, a.warehouses)
            tx = max(m["tpm"] * a.tpcc_seconds / 60.0, 1)
            m["server_cpu_us_per_tx"] = (server.read() - cpu0) * 1e6 / tx
            m["server_cpu_settled"] = 1 if settled0 and server.settled else 0
            for k, v in m.items():
                run.record("tproc-c", cfg.name, rep, k, v, phase="ramp", vus=vus, warehouses=a.warehouses)
            run.progress.step(
                f"tproc-c round {rep} {vus:2d} VUs {cfg.name}: {m['nopm']:,.0f} NOPM, {m['tpm']:,.0f} TPM, "
                f"server {m['server_cpu_us_per_tx']:.0f} µs/tx",
                a.tpcc_seconds + 0.5,
            )
        if time.time() + 20 < self.a.t0 + self.a.total_budget:

            def check(item):
                name, c = item
                result = tp.consistency(c)
                ok = all(v == 0 for v in result.values())
                run.record(
                    "tproc-c",
                    name,
                    0,
                    "consistency_ok",
                    1 if ok else 0,
                    phase="check",
                    detail=";".join(f"{k}={v}" for k, v in result.items()),
                )
                run.progress.note(
                    f"tproc-c: {name} consistency conditions " + ("all hold" if ok else f"VIOLATED {result}")
                )

            with ThreadPoolExecutor(len(self.clusters)) as ex:
                list(ex.map(check, self.clusters.items()))
        else:
            run.progress.note("tproc-c: no time left for the consistency checks")


# ------------------------------------------------------------------ pgbench


class Pgbench(Part):
    name = "pgbench"

    def setup(self):
        a = self.a
        self.settings = {
            "shared_buffers": f"{a.pgb_shared_buffers_mb}MB",
            "max_connections": max(ints(a.clients)) + 50,
            "max_wal_size": "4GB",
            "checkpoint_timeout": "15min",
            "autovacuum": "off",
        }
        self.run.settings["pgbench"] = self.settings
        for name in a.pgb_configs.split(","):
            self.new_cluster(name, self.settings, "pgbench-many")

    def load(self):
        t0 = time.time()

        def init(c):
            _, cmd, _ = c.pgbench(["-i", "-q", "-s", str(self.a.scale)], timeout=1800)
            c.psql("VACUUM ANALYZE")
            c.psql("CHECKPOINT")
            return cmd

        with ThreadPoolExecutor(len(self.clusters)) as ex:
            for cmd in ex.map(init, self.clusters.values()):
                self.run.command(cmd)
        sizes = {
            n: c.psql("SELECT pg_size_pretty(pg_database_size(current_database()))")
            for n, c in self.clusters.items()
        }
        self.run.progress.note(
            f"pgbench: initialized scale {self.a.scale} in {time.time() - t0:.1f} s: {sizes}"
        )

    def measure(self):
        run, a, place, meta = self.run, self.a, self.place, self.meta
        configs = [STANDARD_CONFIGS[n] for n in a.pgb_configs.split(",")]
        clusters = self.clusters
        pm = {n: procs.postmaster_pid(c) for n, c in clusters.items()}
        meta["pgbench_placement"] = {n: cpus_allowed(p) for n, p in pm.items()}
        meta["pgbench_libcrypto"] = {n: libcrypto_of(p) for n, p in pm.items()}
        meta["pgbench"] = dict(
            configs=a.pgb_configs,
            scale=a.scale,
            clients=a.clients,
            workloads=a.workloads,
            seconds=a.pgb_seconds,
            rounds=a.pgb_rounds,
            shared_buffers_mb=a.pgb_shared_buffers_mb,
        )
        ncl = len(place.client)
        for c in clusters.values():  # warm-up: caches
            if a.warmup:
                c.pgbench(["-S", "-n", "-T", str(a.warmup), "-c", "16", "-j", str(min(16, ncl))])
        servers = {n: procs.ServerCPU(p) for n, p in pm.items()}
        points = [(w, n) for w in a.workloads.split(",") for n in ints(a.clients)]
        for rep, (w, n), cfg in interleaved(configs, a.pgb_rounds, points):
            if self.out_of_time(round=rep, workload=w, clients=n):
                break
            c, server = clusters[cfg.name], servers[cfg.name]
            args = (["-S"] if w == "select-only" else []) + [
                "-n",
                "-T",
                str(a.pgb_seconds),
                "-c",
                str(n),
                "-j",
                str(min(n, ncl)),
            ]
            cpu0, settled0 = server.read(), server.settled
            m, cmd, _ = c.pgbench(args, timeout=a.pgb_seconds * 10 + 120)
            m["server_cpu_us_per_tx"] = (server.read() - cpu0) * 1e6 / max(m.get("transactions", 1), 1)
            m["server_cpu_settled"] = 1 if settled0 and server.settled else 0
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


PARTS = {"alibaba": Alibaba, "tprocc": TProcC, "pgbench": Pgbench}


# ------------------------------------------------------------------ main


def budgets(spec):
    """{part: seconds from the start} from "alibaba=300,pgbench=120"."""
    out = {}
    for item in spec.split(",") if spec else []:
        k, v = item.split("=")
        if k not in PARTS:
            raise ValueError(f"no part {k!r} (parts: {', '.join(PARTS)})")
        out[k] = float(v)
    return out


def counts(a, parts):
    """Measurements per part and their expected seconds."""
    n = {
        "alibaba": (len(parse_runs(a.runs)) * len(ints(a.threads)) * a.rounds, a.sb_seconds + 0.5),
        "tprocc": (
            len(a.tpcc_configs.split(",")) * len(ints(a.tpcc_clients)) * a.tpcc_rounds,
            a.tpcc_seconds + 0.5,
        ),
        "pgbench": (
            len(a.pgb_configs.split(",")) * len(a.workloads.split(",")) * len(ints(a.clients)) * a.pgb_rounds,
            a.pgb_seconds + 0.5,
        ),
    }
    return {k: n[k] for k in parts}


def arguments(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--pgcipher", required=True, help="pgcipher install prefix")
    ap.add_argument("--stock", required=True, help="stock install prefix")
    ap.add_argument("--proxy", required=True)
    ap.add_argument("--keys", required=True, help="pgcipher-keys")
    ap.add_argument(
        "--parts", default="alibaba,pgbench", help=f"measured in this order; of {', '.join(PARTS)}"
    )
    ap.add_argument("--server-cpus", type=int, default=0, help="default: half of the allowed CPUs")
    ap.add_argument("--rounds", type=int, default=2, help="alibaba's rounds, and the others' by default")
    ap.add_argument("--warmup", type=int, default=1, help="seconds of warm-up per run kind")
    # alibaba
    ap.add_argument("--threads", default="8,16,32,64")
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--sb-seconds", type=int, default=2)
    ap.add_argument("--runs", default=DEFAULT_RUNS)
    ap.add_argument("--shared-buffers-mb", type=int, default=512)
    ap.add_argument(
        "--no-vacuum-before-write", dest="vacuum_before_write", action="store_false", help="as the first run"
    )
    # tproc-c
    ap.add_argument("--tpcc-configs", default="stock,aes-256")
    ap.add_argument("--tpcc-clients", default="16,32,64")
    ap.add_argument("--warehouses", type=int, default=8)
    ap.add_argument("--tpcc-seconds", type=int, default=5)
    ap.add_argument("--tpcc-rounds", type=int, default=0, help="default: --rounds")
    ap.add_argument("--tpcc-shared-buffers-mb", type=int, default=256)
    # pgbench
    ap.add_argument("--pgb-configs", default="stock,aes-256,stock-2")
    ap.add_argument("--clients", default="16,32,64")
    ap.add_argument("--workloads", default="select-only,tpcb-like")
    ap.add_argument("--scale", type=int, default=30)
    ap.add_argument("--pgb-seconds", type=int, default=3)
    ap.add_argument("--pgb-rounds", type=int, default=0, help="default: --rounds")
    ap.add_argument("--pgb-shared-buffers-mb", type=int, default=256)
    # time
    ap.add_argument("--budget", default="", help="PART=SECONDS,...: a part stops at SECONDS from the start")
    ap.add_argument("--alibaba-budget", type=int, default=0, help="as --budget alibaba=SECONDS")
    ap.add_argument("--total-budget", type=int, default=420, help="seconds from the start")
    a = ap.parse_args(argv)
    a.tpcc_rounds = a.tpcc_rounds or a.rounds
    a.pgb_rounds = a.pgb_rounds or a.rounds
    a.budget = budgets(a.budget)
    if a.alibaba_budget:
        a.budget.setdefault("alibaba", a.alibaba_budget)
    a.parts = [x for x in a.parts.split(",") if x]
    for x in a.parts:
        if x not in PARTS:
            ap.error(f"no part {x!r} (parts: {', '.join(PARTS)})")
    parse_runs(a.runs)
    return a


def main(argv=None):
    a = arguments(argv)
    a.t0 = time.time()

    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.workdir, exist_ok=True)
    place = Placement(a.server_cpus or None)
    installs = {"pgcipher": Install("pgcipher", a.pgcipher), "stock": Install("stock", a.stock)}
    key_file = os.path.join(a.workdir, "kek")
    with open(key_file, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    os.chmod(key_file, 0o600)
    n = counts(a, a.parts)
    progress = Progress(sum(k for k, _ in n.values()), sum(k * s for k, s in n.values()) + 60)
    run = Run(a.out, installs, "many-cores", key_file, a.workdir, progress)
    meta = {
        "profile": "many-cores (issue 30, section 4)",
        "started": timestamp(),
        "argv": sys.argv[1:] if argv is None else list(argv),
        "parts": a.parts,
        "placement": place.describe(),
        "nproc": os.cpu_count(),
        "order": "ABBA",
        "installs": {
            name: {
                "prefix": i.prefix,
                "version": i.pg_config("--version"),
                "configure": i.pg_config("--configure"),
            }
            for name, i in installs.items()
        },
    }
    progress.note(
        "many-cores: "
        + ", ".join(f"{k} {c} measurements" for k, (c, _) in n.items())
        + f"; placement {place.describe()}"
    )
    parts = [PARTS[x](run, a, place, meta) for x in a.parts]
    try:
        meta["affinity"] = affinity_check(place, run)
        t0 = time.time()
        for part in parts:  # the main thread: the servers' placement
            part.guarded("setup")
        progress.note(f"clusters created and started in {time.time() - t0:.1f} s; loading all parts at once")
        with ThreadPoolExecutor(len(parts)) as ex:
            list(ex.map(lambda part: part.guarded("load"), parts))
        meta["loaded_at_s"] = round(time.time() - a.t0, 1)
        progress.note(f"all parts loaded in {time.time() - t0:.1f} s")
        for part in parts:
            progress.note(f"== {part.name}")
            part.guarded("measure")
            part.close()
            save_results(a.out, meta, run.rows, run.commands, run.settings)
    finally:
        for part in parts:
            part.close()
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
