"""pooler: pgcipher-proxy as the pooler, against PgBouncer.

One pgcipher cluster (TDE off: this measures the hop) whose max_connections
is far below the largest client count.  pgbench reaches it over TCP on
127.0.0.1 along five paths, interleaved in every round:

    direct                 pgbench to the server
    pgbouncer-session      PgBouncer, pool_mode = session
    pgbouncer-transaction  PgBouncer, pool_mode = transaction
    proxy-session          pgcipher-proxy, --pool-mode session
    proxy-transaction      pgcipher-proxy, --pool-mode transaction

PgBouncer and the proxy reach the server over its Unix socket, both with
trust, the pools of the same size.  Paths that hold a server connection per
client (direct and the session modes) run only while the clients fit in
max_connections.  Workloads: pgbench select-only -M prepared and -M simple,
TPC-B-like -M prepared, and an encrypted point select (the proxy paths
only: `SELECT c FROM enc_ps WHERE id = :id`, c enc_text at EQ, decrypted by
the proxy).  PgBouncer before 1.21 cannot keep prepared statements in
transaction mode: there its -M prepared runs are -M extended (unnamed
statements, parsed each time), and the report says so.

Per run: TPS; the CPU time (utime + stime, /proc) of the proxy or PgBouncer
per transaction; the latency of every transaction (pgbench -l), median and
99th percentile.  After the rounds, on fresh processes in transaction mode:
VmRSS with 1 and with K idle clients (per client), then every one of the K
clients runs a statement over the pool (errors counted).

Goals (from the issue; benchmarks, not tests): proxy CPU per prepared
select-only transaction <= 1.1 x PgBouncer's in both modes; <= 16 KiB RSS
per idle client at 10,000 idle clients; 10,000 clients over 20 server
connections without an error; p99/p50 at 1,000 clients no worse than
PgBouncer's.  No vendor report to reproduce (SEED = None)."""

import glob
import os
import resource
import shutil
import subprocess
import time

from bench import stats
from bench.cluster import STANDARD_CONFIGS
from bench.procs import (
    ServerCPU,
    close_connection,
    find_tools,
    idle_connection,
    new_cmk,
    pgbench,
    postmaster_pid,
    process_cpu_s,
    psql_tcp,
    rss_kib,
    start_pgbouncer,
    start_proxy,
)
from bench.scenarios import common

NAME = "pooler"
TITLE = "pgcipher-proxy as the pooler: session and transaction mode against PgBouncer's"
SEED = None
INSTALLS = ("pgcipher",)

PATHS = ["direct", "pgbouncer-session", "pgbouncer-transaction", "proxy-session", "proxy-transaction"]
POOLED = {"pgbouncer-transaction", "proxy-transaction"}
# (workload, pgbench mode): the encrypted point select runs on the proxy's paths
WORKLOADS = [
    ("select-only", "prepared"),
    ("select-only", "simple"),
    ("tpcb-like", "prepared"),
    ("enc-point", "prepared"),
]
ENC_PATHS = ["proxy-session", "proxy-transaction"]
ROWS = 10_000
CPU_GOAL = 1.1
RSS_GOAL_KIB = 16

PROFILES = {
    "quick": dict(
        config="pgcipher-off",
        scale=10,
        clients=[1, 16, 200, 1000],
        pool_size=20,
        max_connections=80,
        seconds=5,
        repetitions=3,
        warmup_seconds=2,
        idle_clients=10_000,
        workloads=[w for w, _ in WORKLOADS],
    ),
    "full": dict(
        config="pgcipher-off",
        scale=10,
        clients=[1, 10, 100, 1000],
        pool_size=20,
        max_connections=150,
        seconds=15,
        repetitions=5,
        warmup_seconds=5,
        idle_clients=10_000,
        workloads=[w for w, _ in WORKLOADS],
    ),
}

_RUN_OVERHEAD_S = 1.0  # connections of up to 1,000 clients, logs read


def plan(profile, overrides=None):
    p = dict(PROFILES[profile])
    p.update(overrides or {})
    p["runs_per_round"] = len(points(p))
    p["steps"] = 1 + p["repetitions"] * p["runs_per_round"] + 1
    p["est_seconds"] = (
        20
        + p["scale"] * 1.5
        + len(PATHS) * p["warmup_seconds"]
        + p["repetitions"] * p["runs_per_round"] * (p["seconds"] + _RUN_OVERHEAD_S)
        + p["idle_clients"] * 0.004
    )
    return p


def fits(p, path, n):
    """A path that holds a server connection per client runs only while the
    clients fit in max_connections (with room for the pools)."""
    return path in POOLED or n <= p["max_connections"] - 2 * p["pool_size"] - 5


def points(p):
    """One round: (workload, mode, clients, path), the paths of a point one
    after the other."""
    out = []
    for w, mode in WORKLOADS:
        if w not in p["workloads"]:
            continue
        for n in p["clients"]:
            for path in ENC_PATHS if w == "enc-point" else PATHS:
                if fits(p, path, n):
                    out.append((w, mode, n, path))
    return out


def settings(p):
    return {
        "shared_buffers": "256MB",
        "max_connections": p["max_connections"],
        "listen_addresses": "'127.0.0.1'",
        "max_wal_size": "4GB",
        "checkpoint_timeout": "15min",
        "autovacuum": "off",
    }


def bouncer_version(bouncer_bin):
    out = subprocess.run([bouncer_bin, "--version"], capture_output=True, text=True).stdout
    first = (out.splitlines() or ["?"])[0].strip()
    try:
        major, minor = (int(x) for x in first.split()[1].split(".")[:2])
    except (IndexError, ValueError):
        major, minor = 0, 0
    return first, (major, minor)


def run(run, p):
    proxy_bin, keys_bin, bouncer_bin = find_tools(run)
    # 1,000 clients and 10,000 idle ones: file descriptors for them
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    version, vnum = bouncer_version(bouncer_bin)
    bouncer_prepared = vnum >= (1, 21)
    c = run.cluster(STANDARD_CONFIGS[p["config"]], settings(p), NAME)
    daemons = []
    try:
        c.initdb()
        c.start()
        server = ServerCPU(postmaster_pid(c))
        common.pgbench_init(run, NAME, {c.config.name: c}, p["scale"])
        cmk = new_cmk(keys_bin, c)
        most = max(p["clients"]) + 50
        pool = [
            "--max-client-conn",
            str(max(most, p["idle_clients"] + 50)),
            "--default-pool-size",
            str(p["pool_size"]),
            "--auth-type",
            "trust",
        ]
        ports, pids = {"direct": c.port}, {}
        for mode in ("session", "transaction"):
            px = start_proxy(proxy_bin, c, mode, cmk, extra=["--pool-mode", mode, *pool])
            pb = start_pgbouncer(
                bouncer_bin, c, mode, p["pool_size"] if mode == "transaction" else most, mode, most
            )
            daemons += [px, pb]
            ports[f"proxy-{mode}"], pids[f"proxy-{mode}"] = px.port, px.pid
            ports[f"pgbouncer-{mode}"], pids[f"pgbouncer-{mode}"] = pb.port, pb.pid
        run.command(
            "pgcipher-proxy --pool-mode transaction --default-pool-size "
            f"{p['pool_size']} --auth-type trust --upstream 'host=$CLUSTER port=$PORT' --cmk-file cmk.hex"
        )
        run.command(
            f"pgbouncer pgbouncer.ini   # pool_mode = transaction, default_pool_size = {p['pool_size']}"
        )
        run.record(NAME, "pgbouncer-transaction", 0, "version_seen", 1, part="setup", detail=version)
        _load(run, c, ports["proxy-session"])
        script = os.path.join(c.dir, "enc-point.sql")
        with open(script, "w") as f:
            f.write(f"\\set id random(1, {ROWS})\nSELECT c FROM enc_ps WHERE id = :id;\n")
        for path in PATHS:
            pgbench(run, c, ports[path], ["-n", "-S", "-T", str(p["warmup_seconds"]), "-c", "2"], 120)
        run.progress.step(
            f"{NAME} set-up: scale {p['scale']}, {ROWS:,} encrypted rows, max_connections "
            f"{p['max_connections']}, pools of {p['pool_size']}; {version}",
            20,
        )
        round_points = points(p)
        for rep in range(1, p["repetitions"] + 1):
            for w, mode, n, path in round_points:
                used = mode
                if path == "pgbouncer-transaction" and mode == "prepared" and not bouncer_prepared:
                    used = "extended"
                args = ["-n", "-M", used] + (["-S"] if w == "select-only" else [])
                if w == "enc-point":
                    args += ["-f", script]
                m = _timed(run, c, server, ports[path], pids.get(path), args, n, p)
                for metric, value in m.items():
                    run.record(
                        NAME, path, rep, metric, value, workload=w, mode=mode, clients=n, sent_mode=used
                    )
                run.progress.step(
                    f"{NAME} {w} -M {used} {n} clients {path} round {rep}: {m['tps']:,.0f} tps, "
                    f"p50 {m['p50_ms']:.2f} ms, p99 {m['p99_ms']:.2f} ms"
                    + (
                        f", {m['hop_cpu_us_per_tx']:.0f} µs/tx in the middle"
                        if "hop_cpu_us_per_tx" in m
                        else ""
                    ),
                    p["seconds"] + _RUN_OVERHEAD_S,
                )
        for d in daemons:
            d.stop()
        daemons.clear()
        # memory and many clients, on fresh processes in transaction mode
        px = start_proxy(proxy_bin, c, "memory", cmk, extra=["--pool-mode", "transaction", *pool])
        pb = start_pgbouncer(bouncer_bin, c, "memory", p["pool_size"], "transaction", p["idle_clients"] + 50)
        daemons += [px, pb]
        for name, d in (("proxy-transaction", px), ("pgbouncer-transaction", pb)):
            _many(run, name, d, p)
        run.progress.step(
            f"{NAME}: {p['idle_clients']:,} idle clients, then a statement each, per pooler", 10
        )
    finally:
        for d in daemons:
            d.stop()
        c.destroy()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _load(run, c, port):
    """The encrypted table, through the proxy (the key drawn and wrapped by it)."""
    psql_tcp(c, port, "SELECT pgcipher.add_column_key('bench')")
    psql_tcp(c, port, "CREATE TABLE enc_ps (id int PRIMARY KEY, c enc_text)")
    psql_tcp(c, port, "SELECT pgcipher.encrypt_column('enc_ps', 'c', 'bench', 'EQ')")
    data = os.path.join(c.dir, "rows.tsv")
    with open(data, "w") as f:
        f.write("".join(f"{i}\tvalue-{i:08d}-{'x' * 100}\n" for i in range(1, ROWS + 1)))
    psql_tcp(c, port, f"\\copy enc_ps FROM '{data}'")
    c.psql("VACUUM ANALYZE enc_ps")
    got = psql_tcp(c, port, "SELECT c FROM enc_ps WHERE id = 7")
    if not got.startswith("value-00000007-"):
        raise RuntimeError(f"the proxy's answer is wrong: {got[:40]!r}")


def _timed(run, c, server, port, pid, args, n, p):
    """One timed pgbench run of n clients: TPS, the middle process's CPU per
    transaction, and every transaction's latency (pgbench -l)."""
    logs = os.path.join(c.dir, "txlog")
    shutil.rmtree(logs, ignore_errors=True)
    os.makedirs(logs)
    threads = min(n, os.cpu_count() or 1)
    hop0 = process_cpu_s(pid) if pid else None
    server0 = server.read()
    m, _ = pgbench(
        run,
        c,
        port,
        [
            *args,
            "-T",
            str(p["seconds"]),
            "-c",
            str(n),
            "-j",
            str(threads),
            "-l",
            "--log-prefix",
            os.path.join(logs, "tx"),
        ],
        p["seconds"] * 10 + 300,
    )
    tx = max(m.get("transactions", 0), 1)
    m["server_cpu_us_per_tx"] = (server.read() - server0) * 1e6 / tx
    if pid:
        m["hop_cpu_us_per_tx"] = (process_cpu_s(pid) - hop0) * 1e6 / tx
    lat = []
    for f in glob.glob(os.path.join(logs, "tx*")):
        with open(f) as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 3:
                    lat.append(int(parts[2]))
    lat.sort()
    if not lat:
        raise RuntimeError("pgbench -l wrote no transaction")
    m["p50_ms"] = lat[len(lat) // 2] / 1000
    m["p99_ms"] = lat[min(len(lat) - 1, int(len(lat) * 0.99))] / 1000
    shutil.rmtree(logs, ignore_errors=True)
    return m


def _query(s):
    """A simple query on an idle client socket; the error's text or None."""
    s.sendall(b"Q" + (4 + 9).to_bytes(4, "big") + b"SELECT 1\0")
    err = None
    while True:
        head = b""
        while len(head) < 5:
            chunk = s.recv(5 - len(head))
            if not chunk:
                return "connection closed"
            head += chunk
        size = int.from_bytes(head[1:], "big") - 4
        body = b""
        while len(body) < size:
            chunk = s.recv(size - len(body))
            if not chunk:
                return "connection closed"
            body += chunk
        if head[:1] == b"E":
            err = body.decode(errors="replace")
        if head[:1] == b"Z":
            return err


def _many(run, name, d, p):
    """VmRSS with 1 and K idle clients; then a statement on each of them."""
    k = p["idle_clients"]
    time.sleep(0.3)
    conns = [idle_connection(d.port)]
    time.sleep(0.3)
    rss1 = rss_kib(d.pid)
    errors = 0
    try:
        conns += [idle_connection(d.port) for _ in range(k - 1)]
        time.sleep(0.5)
        rssk = rss_kib(d.pid)
        t0 = time.perf_counter()
        for s in conns:
            if _query(s) is not None:
                errors += 1
        took = time.perf_counter() - t0
    finally:
        for s in conns:
            close_connection(s)
    for metric, value in (
        ("rss_kib_1", rss1),
        ("rss_kib_k", rssk),
        ("rss_kib_per_client", (rssk - rss1) / max(k - 1, 1)),
        ("many_errors", errors),
        ("many_seconds", took),
    ):
        run.record(NAME, name, 0, metric, value, part="many", clients=k)
    run.progress.note(
        f"{NAME} {name}: {(rssk - rss1) / max(k - 1, 1):.1f} KiB per idle client at {k:,}; "
        f"{k:,} statements over {p['pool_size']} server connections, {errors} errors"
    )


# ---------------------------------------------------------------- report


_vals, _med = common.vals, common.med


def _ci(s):
    return (
        f"{s['ratio']:.2f} ({s['ci_low']:.2f}–{s['ci_high']:.2f})" if s and s["ratio"] == s["ratio"] else "–"
    )


def report(rows, p, out_dir):
    version = [r.get("detail") for r in rows if r["metric"] == "version_seen"]
    md = [
        f"One pgcipher cluster ({p['config']}, max_connections {p['max_connections']}), pgbench scale "
        f"{p['scale']}, pools of {p['pool_size']} server connections, {p['repetitions']} interleaved rounds "
        f"of {p['seconds']} s per point.  {version[0] if version else 'PgBouncer'} against pgcipher-proxy, "
        "both with trust and over the server's Unix socket.  Medians; ratios with 95% bootstrap CIs.  "
        "Paths that hold a server connection per client run only while the clients fit in "
        "max_connections.\n",
    ]
    subst = any(
        r.get("sent_mode") != r.get("mode") for r in rows if r.get("config") == "pgbouncer-transaction"
    )
    if subst:
        md.append(
            "PgBouncer before 1.21 keeps no prepared statements in transaction mode: its `-M prepared` "
            "points ran `-M extended` (each statement parsed in every transaction), marked † below.\n"
        )
    timed = [r for r in rows if r.get("part") is None and r.get("workload")]
    md += [
        "| workload | clients | path | TPS | middle µs/tx | p50 ms | p99 ms | p99/p50 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for w, mode in WORKLOADS:
        for n in p["clients"]:
            for path in PATHS:
                sel = dict(workload=w, mode=mode, clients=n)
                if not _vals(timed, path, "tps", **sel):
                    continue
                p50, p99 = _vals(timed, path, "p50_ms", **sel), _vals(timed, path, "p99_ms", **sel)
                tail = (
                    f"{stats.median(p99) / stats.median(p50):.1f}"
                    if p50 and p99 and stats.median(p50)
                    else "–"
                )
                mark = " †" if path == "pgbouncer-transaction" and subst and mode == "prepared" else ""
                md.append(
                    f"| {w} -M {mode} | {n} | {path}{mark} | {_med(timed, path, 'tps', **sel)} | "
                    f"{_med(timed, path, 'hop_cpu_us_per_tx', '{:.1f}', **sel)} | "
                    f"{_med(timed, path, 'p50_ms', '{:.2f}', **sel)} | {_med(timed, path, 'p99_ms', '{:.2f}', **sel)} | {tail} |"
                )
    md += [
        f"\n**CPU of the hop per transaction, proxy / PgBouncer** (goal ≤ {CPU_GOAL}):\n",
        "| workload | clients | session mode | transaction mode |",
        "|---|---|---|---|",
    ]
    for w, mode in WORKLOADS:
        if w == "enc-point":
            continue
        for n in p["clients"]:
            cells = []
            for m in ("session", "transaction"):
                sel = dict(workload=w, mode=mode, clients=n)
                a = _vals(timed, f"proxy-{m}", "hop_cpu_us_per_tx", **sel)
                b = _vals(timed, f"pgbouncer-{m}", "hop_cpu_us_per_tx", **sel)
                cells.append(_ci(stats.summarize(a, b)) if a and b else "–")
            md.append(f"| {w} -M {mode} | {n} | {cells[0]} | {cells[1]} |")
    many = [r for r in rows if r.get("part") == "many"]
    if many:
        k = many[0].get("clients")
        md += [
            f"\n**{k:,} idle clients, then a statement each** (transaction mode, {p['pool_size']} server "
            f"connections; goal ≤ {RSS_GOAL_KIB} KiB per idle client, no error):\n",
            "| pooler | RSS with 1 client KiB | with all KiB | KiB per idle client | errors | seconds for all statements |",
            "|---|---|---|---|---|---|",
        ]
        for name in ("proxy-transaction", "pgbouncer-transaction"):
            md.append(
                f"| {name} | {_med(many, name, 'rss_kib_1')} | {_med(many, name, 'rss_kib_k')} | "
                f"{_med(many, name, 'rss_kib_per_client', '{:.1f}')} | {_med(many, name, 'many_errors')} | "
                f"{_med(many, name, 'many_seconds', '{:.1f}')} |"
            )
    md.append(
        "\nOn a 2-core machine pgbench, the pooler and the server share the CPUs: the CPU per "
        "transaction of the middle process is the figure to compare across machines."
    )
    return "\n".join(md), []
