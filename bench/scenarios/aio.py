"""aio: PostgreSQL 18's asynchronous reads, per io_method, stock vs aes-256.

On 18 every buffered read completes in md.c's completion callback, where
pgcipher decrypts the pages (docs/design.md, section 4.1).  With
io_method = worker that callback runs in the I/O worker that did the read,
so the decryption can move off the backend; with sync and io_uring it runs
in the backend.  Two workloads, each under io_method = sync, worker with 1,
2 and 3 I/O workers, and io_uring (skipped, saying why, where the kernel
refuses it):

    seq-scan-os-cache   shared_buffers = 1MB, no parallel workers: a
                        sequential scan of pgbench_accounts whose every page
                        comes from the OS cache (the first scan of each
                        measurement warms it); seconds per scan and MB/s
    select-only         pgbench -S above shared_buffers: TPS

Beside each timing, where the CPU went: the server's CPU time (user +
system, from /proc: the postmaster's reaped children and every live child)
per scan or per transaction, and the part of it spent in I/O workers.
This VM has no hardware performance counters (perf stat: "not supported"),
so instruction counts come from the instructions scenario, whose
seq-scan-os-cache and select-only workloads run the same code paths under
callgrind (in a single-user backend, where every read completes in the
backend).

Three clusters, stock, stock-2 (the noise floor) and aes-256, loaded once;
each round restarts them under each io_method and runs the configurations
in ABBA order.  PostgreSQL 17 has no io_method: there the scenario records
nothing and its report says so."""

import os
import re

from bench import plots, procs, stats
from bench.interleave import interleaved
from bench.scenarios import common

NAME = "aio"
TITLE = "PostgreSQL 18 asynchronous I/O: io_method sync, worker 1-3, io_uring; stock vs aes-256"
SEED = None
METRIC = "tps"

# io_workers is written every time (3 is 18's default): each restart
# appends its settings to postgresql.conf, and the last line wins
IO_METHODS = {
    "sync": {"io_method": "sync", "io_workers": 3},
    "worker-1": {"io_method": "worker", "io_workers": 1},
    "worker-2": {"io_method": "worker", "io_workers": 2},
    "worker-3": {"io_method": "worker", "io_workers": 3},
    "io_uring": {"io_method": "io_uring", "io_workers": 3},
}
WORKLOADS = ["seq-scan-os-cache", "select-only"]

PROFILES = {
    "quick": dict(
        configs=["stock", "stock-2", "aes-256"],
        io_methods=list(IO_METHODS),
        scale=20,
        scans=3,
        select_shared_buffers_mb=32,
        clients=2,
        seconds=8,
        repetitions=2,
    ),
    "full": dict(
        configs=["stock", "stock-2", "aes-256"],
        io_methods=list(IO_METHODS),
        scale=50,
        scans=5,
        select_shared_buffers_mb=64,
        clients=2,
        seconds=20,
        repetitions=4,
    ),
}

CLK_TCK = os.sysconf("SC_CLK_TCK")


def plan(profile, overrides=None):
    p = dict(PROFILES[profile])
    p.update(overrides or {})
    per_round = len(p["configs"]) * len(p["io_methods"])
    p["steps"] = per_round * len(WORKLOADS) * p["repetitions"]
    # a scan of ~15 MB per scale unit from the OS cache at ~1 GB/s, twice
    # per cluster restart; pgbench runs its seconds
    scan_s = (p["scans"] + 1) * p["scale"] * 15 / 1000 + 2
    p["est_seconds"] = per_round * p["repetitions"] * (scan_s + p["seconds"] + 4) + len(p["configs"]) * (
        p["scale"] * 0.8
    )
    return p


def major(install):
    """18 from "PostgreSQL 18.6" (or "PostgreSQL 19rc1")."""
    return int(re.match(r"PostgreSQL (\d+)", install.pg_config("--version")).group(1))


def _stat_ticks(pid):
    """utime + stime (own) and cutime + cstime (reaped children) of pid."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3): utime is field 14
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def _children(ppid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
            with open(f"/proc/{d}/cmdline") as f:
                cmd = f.read().replace("\0", " ")
        except OSError:
            continue
        if int(s.rsplit(")", 1)[1].split()[1]) == ppid:
            out.append((int(d), cmd))
    return out


def _postmaster(c):
    with open(os.path.join(c.data, "postmaster.pid")) as f:
        return int(f.readline())


def cluster_cpu(c):
    """Seconds of CPU the cluster has used so far: the postmaster, its
    reaped children (backends that exited), its live children; and the
    part in live I/O workers.  Read again where the postmaster reaped a
    child meanwhile (its CPU would be in neither term or in both, as in
    proxy.tree_cpu_s)."""
    pm = _postmaster(c)
    for _ in range(100):
        _, reaped0 = _stat_ticks(pm)
        kids, io = 0, 0
        for pid, cmd in _children(pm):
            try:
                t = _stat_ticks(pid)
            except OSError:
                continue
            kids += t[0] + t[1]
            if "io worker" in cmd:
                io += t[0]
        own, reaped = _stat_ticks(pm)
        if reaped == reaped0:
            break
    return (own + reaped + kids) / CLK_TCK, io / CLK_TCK


def _restart(c, settings):
    c.stop()
    c.settings = dict(settings)
    c.start()


def _quiet_cpu(c, settle=0.3):
    # the backends that just exited are gone and reaped: the postmaster's
    # children stayed the same for `settle` seconds, none of them a zombie
    procs.settle_children(_postmaster(c), quiet=settle)
    return cluster_cpu(c)


def measure_scan(run, c, p, script):
    """Seconds per scan, MB/s, server CPU ms per scan, I/O worker part."""
    # the first scan brings the table into the OS cache and is not timed
    c.pgbench(["-n", "-f", script, "-t", "1"])
    cpu0, io0 = _quiet_cpu(c)
    m, cmd, _ = c.pgbench(["-n", "-f", script, "-t", str(p["scans"])], timeout=3600)
    cpu1, io1 = _quiet_cpu(c)
    run.command(cmd.replace(c.dir, "$CLUSTER"))
    seconds = m["latency_ms"] / 1000
    mb = int(c.psql("SELECT pg_relation_size('pgbench_accounts')")) / 2**20
    return {
        "seconds_per_scan": seconds,
        "mb_per_s": mb / seconds,
        "server_cpu_ms_per_scan": (cpu1 - cpu0) * 1000 / p["scans"],
        "io_worker_cpu_ms_per_scan": (io1 - io0) * 1000 / p["scans"],
    }


def measure_select(run, c, p):
    cpu0, io0 = _quiet_cpu(c)
    n = str(p["clients"])
    m, cmd, _ = c.pgbench(
        ["-S", "-n", "-T", str(p["seconds"]), "-c", n, "-j", n], timeout=p["seconds"] * 10 + 120
    )
    cpu1, io1 = _quiet_cpu(c)
    run.command(cmd.replace(c.dir, "$CLUSTER"))
    tx = max(m.get("transactions", 0), 1)
    return {
        "tps": m["tps"],
        "server_cpu_us_per_tx": (cpu1 - cpu0) * 1e6 / tx,
        "io_worker_cpu_us_per_tx": (io1 - io0) * 1e6 / tx,
    }


def run(run, p):
    v = major(run.installs["pgcipher"])
    if v < 18:
        run.progress.note(
            f"aio: PostgreSQL {v} has no io_method; nothing to measure (./pgcipher bench --pg 18)"
        )
        for _ in range(p["steps"]):
            run.progress.step("aio: skipped on PostgreSQL 17", 0)
        return
    base = {
        "max_connections": 20,
        "max_wal_size": "4GB",
        "autovacuum": "off",
        "max_parallel_workers_per_gather": 0,
    }
    cfgs = common.configs(p["configs"])
    clusters = common.start_clusters(run, NAME, cfgs, dict(base, shared_buffers="128MB"))
    # what each measurement ran with (the clusters are restarted per point)
    run.settings[NAME] = dict(
        base,
        shared_buffers=f"1MB (seq-scan-os-cache), {p['select_shared_buffers_mb']}MB (select-only)",
        io_method="per row, io_workers as the row says (3 otherwise)",
    )
    script = os.path.join(run.workdir, NAME, "seqscan.sql")
    with open(script, "w") as f:
        f.write("SELECT count(*), sum(abalance) FROM pgbench_accounts;\n")
    unavailable = {}
    try:
        common.pgbench_init(run, NAME, clusters, p["scale"])
        points = [(io, w) for io in p["io_methods"] for w in WORKLOADS]
        for rep, (io, w), cfg in interleaved(cfgs, p["repetitions"], points):
            if io in unavailable:
                run.progress.step(f"aio {io} {w} {cfg.name} round {rep}: skipped ({unavailable[io]})", 0)
                continue
            c = clusters[cfg.name]
            sb = "1MB" if w == "seq-scan-os-cache" else f"{p['select_shared_buffers_mb']}MB"
            try:
                _restart(c, dict(base, shared_buffers=sb, **IO_METHODS[io]))
            except RuntimeError as e:
                if io != "io_uring":
                    raise
                why = next((ln for ln in str(e).splitlines() if "io_uring" in ln.lower()), str(e)[:200])
                unavailable[io] = f"this kernel refuses io_uring: {why.strip()}"
                run.progress.note(f"aio: {unavailable[io]}")
                c.settings = dict(base, shared_buffers=sb, **IO_METHODS["worker-3"])
                c.start()
                run.progress.step(f"aio {io} {w} {cfg.name} round {rep}: skipped", 0)
                continue
            got = c.psql("SHOW io_method")
            if got != IO_METHODS[io]["io_method"]:
                raise RuntimeError(f"{cfg.name} runs io_method={got}, not {io}")
            if w == "seq-scan-os-cache":
                m = measure_scan(run, c, p, script)
                msg = f"{m['mb_per_s']:,.0f} MB/s, CPU {m['server_cpu_ms_per_scan']:.0f} ms/scan"
            else:
                m = measure_select(run, c, p)
                msg = f"{m['tps']:,.0f} tps, CPU {m['server_cpu_us_per_tx']:.0f} µs/tx"
            for metric, value in m.items():
                run.record(NAME, cfg.name, rep, metric, value, io_method=io, workload=w)
            run.progress.step(f"aio {io} {w} {cfg.name} round {rep}: {msg}", p["est_seconds"] / p["steps"])
        for io, why in unavailable.items():
            run.record(NAME, "all", 0, "unavailable", 1, io_method=io, detail=why)
    finally:
        common.stop_all(clusters)


def _fmt_ratio(s):
    return f"{s['ratio']:.3f} ({s['ci_low']:.3f}–{s['ci_high']:.3f})" if s["n"] and s["n_baseline"] else "–"


def report(rows, p, out_dir):
    if not [r for r in rows if r["metric"] in ("tps", "mb_per_s")]:
        return (
            "Not measured: the server is PostgreSQL 17, which has no io_method "
            "(run `./pgcipher bench --pg 18 --scenario aio`).",
            [],
        )
    md = [
        f"pgbench scale {p['scale']} ({p['scale'] * 15} MB of pgbench_accounts, roughly); "
        f"{p['repetitions']} interleaved rounds (ABBA), each restarting the clusters under each io_method; "
        "medians; ratios to stock with 95% bootstrap CIs; stock-2 / stock is the noise floor.\n",
        f"**seq-scan-os-cache**: shared_buffers = 1MB, no parallel workers, {p['scans']} timed scans "
        "after one that warms the OS cache.  Higher MB/s is better.\n",
    ]

    def table(workload, metric):
        return common.ratio_table(
            [r for r in rows if r.get("workload") == workload],
            "stock",
            p["configs"],
            ["io_method"],
            metric=metric,
            verdicts=True,
        )

    t1, summaries = table("seq-scan-os-cache", "mb_per_s")
    md.append(t1)
    md.append(
        "\nWith shared_buffers = 1MB, 18 sizes `io_max_concurrency` to 1 (NBuffers / (MaxBackends + 38 "
        "auxiliary processes), `AioChooseMaxConcurrency()`): a backend has one read in flight, and under "
        "`worker` each read waits for its hand-off to an I/O worker and back, so the scan is about ten times "
        "slower than under `sync` or `io_uring`, in stock and pgcipher alike: upstream's behaviour at this "
        "setting, not the cipher's.  The I/O workers' CPU column below shows the decryption moving there."
    )
    md.append(
        f"\n**select-only**: pgbench -S, {p['clients']} clients, {p['seconds']} s, "
        f"shared_buffers = {p['select_shared_buffers_mb']}MB (the table is larger).\n"
    )
    t2, s2 = table("select-only", "tps")
    md.append(t2)
    md.append(
        "\n**Where the CPU went** (medians): the server's CPU time per scan or per transaction, "
        "and the part in I/O workers; aes-256 / stock of the server's CPU.\n"
    )
    md.append(
        "| io_method | scan: stock CPU ms | of which I/O workers | aes-256 CPU ms | of which I/O workers "
        "| aes-256 / stock | select: stock CPU µs/tx | aes-256 CPU µs/tx | of which I/O workers | aes-256 / stock |"
    )
    md.append("|---|---|---|---|---|---|---|---|---|---|")

    def vals(cfg, io, metric):
        return [
            r["value"]
            for r in rows
            if r["config"] == cfg and r.get("io_method") == io and r["metric"] == metric
        ]

    for io in p["io_methods"]:
        if not vals("stock", io, "server_cpu_ms_per_scan"):
            why = next(
                (r.get("detail") for r in rows if r["metric"] == "unavailable" and r["io_method"] == io), ""
            )
            md.append(f"| {io} | not measured: {why} |" + " |" * 8)
            continue
        sc = stats.summarize(
            vals("aes-256", io, "server_cpu_ms_per_scan"), vals("stock", io, "server_cpu_ms_per_scan")
        )
        tc = stats.summarize(
            vals("aes-256", io, "server_cpu_us_per_tx"), vals("stock", io, "server_cpu_us_per_tx")
        )
        md.append(
            f"| {io} | {stats.median(vals('stock', io, 'server_cpu_ms_per_scan')):.0f} "
            f"| {stats.median(vals('stock', io, 'io_worker_cpu_ms_per_scan')):.0f} "
            f"| {stats.median(vals('aes-256', io, 'server_cpu_ms_per_scan')):.0f} "
            f"| {stats.median(vals('aes-256', io, 'io_worker_cpu_ms_per_scan')):.0f} "
            f"| {_fmt_ratio(sc)} "
            f"| {stats.median(vals('stock', io, 'server_cpu_us_per_tx')):.0f} "
            f"| {stats.median(vals('aes-256', io, 'server_cpu_us_per_tx')):.0f} "
            f"| {stats.median(vals('aes-256', io, 'io_worker_cpu_us_per_tx')):.1f} "
            f"| {_fmt_ratio(tc)} |"
        )
    md.append(
        "\nCPU times come from /proc in clock ticks (10 ms): per scan they are exact to a few per cent, "
        "per transaction they are averages over the run.  Instruction counts of the same paths: the "
        "instructions scenario (callgrind; this VM has no hardware counters)."
    )
    # both workloads' points, told apart by the workload in the group
    both = {((w,) + g, c): sm for w, ss in (("scan", summaries), ("select", s2)) for (g, c), sm in ss.items()}
    md.append("\n" + common.geomean_summary(both, p["configs"], "stock"))
    pngs = []
    if plots.overhead_bars(
        both,
        os.path.join(out_dir, f"{NAME}-overhead.png"),
        "io_method: aes-256 and stock-2 vs stock (95% CI)",
    ):
        pngs.append(f"{NAME}-overhead.png")
    return "\n".join(md), pngs
