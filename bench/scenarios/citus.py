"""citus: a Citus cluster on this machine, stock vs aes-256.

Three Citus clusters, each a coordinator and two workers on this machine
(TCP on localhost, no TLS: it would cost both configurations the same),
with Citus 14.0.1 built from the same tarball, compiler and flags against
each build (test/citus/run.sh build and build-stock):

    stock    every node stock PostgreSQL, Citus built against the stock
             build (the baseline)
    stock-2  a second, identical one: stock-2 / stock is the noise floor
    aes-256  every node pgcipher, aes-256, Citus built against pgcipher

Workloads, run on the coordinator in interleaved rounds (ABBA):

    select-only       pgbench -S: pgbench_accounts distributed by aid
                      (a router query per transaction), branches and
                      tellers reference tables, history distributed by aid
    tpcb-like         pgbench's default script on the same tables (each
                      transaction updates reference tables: a 2PC across
                      the nodes)
    copy              COPY of copy_rows rows from a file on the coordinator
                      into a distributed table (rows per second)
    multi-shard-agg   an aggregate over every shard of pgbench_accounts,
                      GROUP BY bid (ms per query)
    repartition-join  a join of two distributed tables on a column neither
                      is distributed by: Citus repartitions both through
                      intermediate result files (base/pgsql_job_cache,
                      encrypted as temporary files on aes-256 nodes:
                      docs/design.md section 7)

Then, on the aes-256 cluster, Alibaba's Always-confidential sysbench
statements (the alibaba-sysbench scenario's Lua script and its scenario
s1: id int, k enc_int4 EQ, c and pad enc_text RND) on tables distributed
by id: plain-direct (the plaintext table, to the coordinator),
plain-proxy (the same through pgcipher-proxy) and enc-proxy (the
encrypted table through the proxy, which computes SUM(k) over the rows
of every shard and k = k + 1), interleaved per round: point, range and
write, TPS.

Instruction counts: none here.  callgrind follows one process, and each of
these workloads runs in a dozen backends on three servers; the code paths
the cipher adds (pages, WAL, temporary files) are counted by the
instructions scenario."""

import os
import subprocess

from bench import plots, procs
from bench.cluster import Config
from bench.interleave import interleaved
from bench.scenarios import alibaba_sysbench as ali
from bench.scenarios import common

NAME = "citus"
TITLE = "Citus: a coordinator and two workers, stock vs aes-256 on every node"
SEED = None
METRIC = "tps"
INSTALLS = ("pgcipher", "stock")

BASELINE, NOISE, TREATMENT = "stock", "stock-2", "aes-256"
CONFIGS = {
    "stock": Config("stock", "stock"),
    "stock-2": Config("stock-2", "stock"),
    "aes-256": Config("aes-256", "pgcipher", "aes-256"),
}
WORKLOADS = ["select-only", "tpcb-like", "copy", "multi-shard-agg", "repartition-join"]
# what each workload records: tps and rows/s, higher is better; ms per
# query, lower is better
UNITS = {
    "select-only": "tps",
    "tpcb-like": "tps",
    "copy": "rows_per_s",
    "multi-shard-agg": "ms_per_query",
    "repartition-join": "ms_per_query",
}

PROFILES = {
    "quick": dict(
        configs=list(CONFIGS),
        scale=10,
        clients=4,
        seconds=10,
        copy_rows=1_000_000,
        agg_queries=5,
        join_rows=200_000,
        join_queries=3,
        repetitions=2,
        sysbench_rows=10_000,
        sysbench_threads=[1, 4],
        sysbench_seconds=5,
    ),
    "full": dict(
        configs=list(CONFIGS),
        scale=50,
        clients=8,
        seconds=30,
        copy_rows=1_000_000,
        agg_queries=10,
        join_rows=500_000,
        join_queries=5,
        repetitions=4,
        sysbench_rows=100_000,
        sysbench_threads=[1, 4, 8],
        sysbench_seconds=15,
    ),
}
SYSBENCH_CONFIGS = ["plain-direct", "plain-proxy", "enc-proxy"]
SYSBENCH_WORKLOADS = ["point", "range", "write"]

SETTINGS = {
    "shared_preload_libraries": "'citus'",
    "listen_addresses": "'localhost'",
    "max_connections": 100,
    "max_prepared_transactions": 100,
    "shared_buffers": "128MB",
    "max_wal_size": "4GB",
    "autovacuum": "off",
    "citus.enable_statistics_collection": "off",
}


def plan(profile, overrides=None):
    p = dict(PROFILES[profile])
    p.update(overrides or {})
    sysbench_runs = (
        len(SYSBENCH_CONFIGS) * len(SYSBENCH_WORKLOADS) * len(p["sysbench_threads"]) * p["repetitions"]
    )
    p["steps"] = len(p["configs"]) * len(WORKLOADS) * p["repetitions"] + sysbench_runs
    per_round = 2 * p["seconds"] + p["copy_rows"] / 150_000 + p["agg_queries"] * 0.5 + p["join_queries"] * 3
    p["est_seconds"] = (
        len(p["configs"]) * (p["repetitions"] * per_round + 60 + p["scale"] * 3)
        + sysbench_runs * (p["sysbench_seconds"] + 0.5)
        + p["sysbench_rows"] * 4e-4
    )
    return p


class CitusCluster:
    """A coordinator and two workers of one configuration."""

    def __init__(self, run, cfg):
        self.name = cfg.name
        self.nodes = {
            role: run.cluster(Config(f"{cfg.name}-{role}", cfg.install, cfg.encryption), SETTINGS, NAME)
            for role in ("coord", "w1", "w2")
        }
        self.coord = self.nodes["coord"]

    def start(self):
        for c in self.nodes.values():
            c.initdb()
            c.start()
            c.psql("CREATE EXTENSION citus")
        self.coord.psql(f"SELECT citus_set_coordinator_host('localhost', {self.coord.port})")
        for role in ("w1", "w2"):
            self.coord.psql(f"SELECT citus_add_node('localhost', {self.nodes[role].port})")

    def checkpoint(self):
        for c in self.nodes.values():
            c.psql("CHECKPOINT")

    def destroy(self):
        for c in self.nodes.values():
            c.destroy()


def ensure_citus(run):
    """Citus installed into the pgcipher build and the stock build
    (test/citus/run.sh build, build-stock, which build again only what
    changed: a citus.so built before against another server or with other
    options is not used); None, or why not."""
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for name, action in (("pgcipher", "build"), ("stock", "build-stock")):
        inst = run.installs[name]
        # the build directory: install/ of pgcipher's, stock/install of stock's
        build = os.path.dirname(inst.prefix)
        if name == "stock":
            build = os.path.dirname(build)
        env = dict(os.environ, PGCIPHER_TOP=top, PGCIPHER_BUILD=build)
        r = subprocess.run(
            [os.path.join(top, "test", "citus", "run.sh"), action], capture_output=True, text=True, env=env
        )
        if r.returncode != 0 or "SKIPPED" in r.stderr:
            return (r.stderr.strip().splitlines() or [f"test/citus/run.sh {action} failed"])[0]
    return None


def load(run, cc, p, copy_file):
    c = cc.coord
    # tables first, distributed while empty, then pgbench's client-side load
    # (COPY through the coordinator into the shards)
    c.pgbench(["-i", "-q", "-s", str(p["scale"]), "-I", "dt"])
    c.psql(
        "SELECT create_distributed_table('pgbench_accounts', 'aid'); "
        "SELECT create_distributed_table('pgbench_history', 'aid'); "
        "SELECT create_reference_table('pgbench_branches'); "
        "SELECT create_reference_table('pgbench_tellers');"
    )
    _, cmd, _ = c.pgbench(["-i", "-q", "-s", str(p["scale"]), "-I", "gvp"], timeout=7200)
    run.command(cmd.replace(c.dir, "$CLUSTER"))
    c.psql(
        "CREATE TABLE copy_target (id bigint, a int, note text); "
        "SELECT create_distributed_table('copy_target', 'id'); "
        "CREATE TABLE join_a (id bigint, k int, pad text); "
        "CREATE TABLE join_b (id bigint, k int, pad text); "
        "SELECT create_distributed_table('join_a', 'id'); "
        "SELECT create_distributed_table('join_b', 'id'); "
        f"INSERT INTO join_a SELECT g, g % 50000, md5(g::text) FROM generate_series(1, {p['join_rows']}) g; "
        f"INSERT INTO join_b SELECT g, (g * 7) % 50000, md5(g::text) FROM generate_series(1, {p['join_rows']}) g"
    )
    c.psql("VACUUM ANALYZE")
    cc.checkpoint()
    run.progress.note(
        f"{NAME}: {cc.name} loaded: scale {p['scale']}, "
        f"{c.psql('SELECT count(*) FROM pg_dist_shard')} shards on "
        f"{c.psql('SELECT count(*) FROM pg_dist_node')} nodes"
    )


def measure(run, cc, p, workload, scripts, copy_file):
    c = cc.coord
    n = str(p["clients"])
    if workload in ("select-only", "tpcb-like"):
        args = (["-S"] if workload == "select-only" else []) + [
            "-n",
            "-T",
            str(p["seconds"]),
            "-c",
            n,
            "-j",
            n,
        ]
        m, cmd, _ = c.pgbench(args, timeout=p["seconds"] * 10 + 300)
        run.command(cmd.replace(c.dir, "$CLUSTER"))
        return m["tps"], f"{m['tps']:,.0f} tps"
    if workload == "copy":
        c.psql("TRUNCATE copy_target")
        m, cmd, _ = c.pgbench(["-n", "-f", scripts["copy"], "-t", "1"], timeout=3600)
        run.command(cmd.replace(c.dir, "$CLUSTER"))
        rate = p["copy_rows"] / (m["latency_ms"] / 1000)
        return rate, f"{rate:,.0f} rows/s"
    key = "agg" if workload == "multi-shard-agg" else "join"
    count = p["agg_queries"] if key == "agg" else p["join_queries"]
    m, cmd, _ = c.pgbench(["-n", "-f", scripts[key], "-t", str(count)], timeout=3600)
    run.command(cmd.replace(c.dir, "$CLUSTER"))
    return m["latency_ms"], f"{m['latency_ms']:,.0f} ms/query"


def sysbench_part(run, p, cc):
    """Alibaba's sysbench statements on distributed tables of the aes-256
    cluster: plaintext direct, plaintext and encrypted through the proxy."""
    proxy_bin, keys_bin, _ = procs.find_tools(run)
    if subprocess.run(["sysbench", "--version"], capture_output=True).returncode != 0:
        raise RuntimeError("sysbench is not installed (sudo ./pgcipher deps installs Debian's sysbench)")
    c = cc.coord
    cmk = procs.new_cmk(keys_bin, c)
    proxy = procs.start_proxy(proxy_bin, c, "citus", cmk)
    try:
        data = os.path.join(c.dir, "test1.tsv")
        with open(data, "w") as f:
            f.write(
                "".join(f"{i}\t{k}\t{v}\t{pad}\n" for i, k, v, pad in ali._rows(p["sysbench_rows"], 20261125))
            )
        _, cols, binds, _ = ali.SCENARIOS["s1"]
        tables = {"plain": ali.PLAIN, "enc": ali.SCENARIOS["s1"][0]}
        procs.psql_tcp(c, proxy.port, "SELECT pgcipher.add_column_key('test1')")
        for kind, base in tables.items():
            for table in (base, base + ali.WRITTEN):
                if kind == "plain":
                    c.psql(f"CREATE TABLE {table} ({ali.PLAIN_COLUMNS})")
                else:
                    procs.psql_tcp(c, proxy.port, f"CREATE TABLE {table} ({cols})")
                    for col, level in binds.items():
                        procs.psql_tcp(
                            c,
                            proxy.port,
                            f"SELECT pgcipher.encrypt_column('{table}', '{col}', 'test1', '{level}')",
                        )
                c.psql(f"SELECT create_distributed_table('{table}', 'id')")
                procs.psql_tcp(c, proxy.port, f"\\copy {table} FROM '{data}'")
                c.psql(f"CREATE INDEX ON {table} (k)")
        os.remove(data)
        c.psql("VACUUM ANALYZE")
        q = "SELECT sum(k), count(*), min(c) FROM {} WHERE id BETWEEN 10 AND 60"
        got, want = (procs.psql_tcp(c, proxy.port, q.format(t)) for t in (tables["enc"], tables["plain"]))
        if got != want:
            raise RuntimeError(f"{tables['enc']} through the proxy answers {got!r}, the plaintext {want!r}")
        run.progress.note(
            f"{NAME}: sysbench tables of {p['sysbench_rows']:,} rows distributed by id on the aes-256 "
            "cluster; SUM/count/min through the proxy checked against the plaintext"
        )
        ports = {"plain-direct": c.port, "plain-proxy": proxy.port, "enc-proxy": proxy.port}

        def table(cfg, w):
            base = tables["enc"] if cfg == "enc-proxy" else tables["plain"]
            return base + ali.WRITTEN if w == "write" else base

        points = [(w, t) for w in SYSBENCH_WORKLOADS for t in p["sysbench_threads"]]
        for rep, (w, threads), cfg in interleaved(SYSBENCH_CONFIGS, p["repetitions"], points):
            m = ali.sysbench(
                run, ports[cfg], table(cfg, w), w, threads, p["sysbench_seconds"], p["sysbench_rows"]
            )
            run.record(NAME, cfg, rep, "tps", m["tps"], workload=f"sysbench-{w}", threads=threads)
            run.progress.step(
                f"{NAME} sysbench {w} {threads} threads {cfg} round {rep}: {m['tps']:,.0f} tps",
                p["sysbench_seconds"] + 0.5,
            )
    finally:
        proxy.stop()


def run(run, p):
    why = ensure_citus(run)
    if why:
        run.progress.note(f"{NAME}: not measured: {why}")
        for _ in range(p["steps"]):
            run.progress.step(f"{NAME}: skipped", 0)
        run.record(NAME, "all", 0, "unavailable", 1, detail=why)
        return
    work = os.path.join(run.workdir, NAME)
    os.makedirs(work, exist_ok=True)
    copy_file = os.path.join(work, "copy.tsv")
    with open(copy_file, "w") as f:
        for i in range(1, p["copy_rows"] + 1):
            f.write(f"{i}\t{i % 1000}\tnote {i:09d}\n")
    scripts = {
        "copy": ("copy.sql", f"COPY copy_target FROM '{copy_file}';\n"),
        "agg": (
            "agg.sql",
            "SELECT bid, count(*), sum(abalance), avg(aid) FROM pgbench_accounts GROUP BY bid;\n",
        ),
        "join": (
            "join.sql",
            "SET citus.enable_repartition_joins = on;\n"
            "SELECT count(*), sum(a.id + b.id) FROM join_a a JOIN join_b b ON a.k = b.k WHERE a.id % 4 = 0;\n",
        ),
    }
    for key, (fname, text) in scripts.items():
        path = os.path.join(work, fname)
        with open(path, "w") as f:
            f.write(text)
        scripts[key] = path
    cfgs = [CONFIGS[n] for n in p["configs"]]
    clusters = {}
    run.settings[NAME] = dict(
        SETTINGS, nodes="a coordinator and two workers per configuration, TCP on localhost"
    )
    try:
        for cfg in cfgs:
            cc = CitusCluster(run, cfg)
            cc.start()
            clusters[cfg.name] = cc
            run.progress.note(f"{NAME}: started {cfg.name}: coordinator on port {cc.coord.port}")
            load(run, cc, p, copy_file)
        for rep, w, cfg in interleaved(cfgs, p["repetitions"], WORKLOADS):
            value, msg = measure(run, clusters[cfg.name], p, w, scripts, copy_file)
            run.record(NAME, cfg.name, rep, UNITS[w], value, workload=w)
            run.progress.step(f"{NAME} {w} {cfg.name} round {rep}: {msg}", p["est_seconds"] / p["steps"])
        if "aes-256" in clusters:
            sysbench_part(run, p, clusters["aes-256"])
    finally:
        for cc in clusters.values():
            cc.destroy()
        os.remove(copy_file)


def report(rows, p, out_dir):
    gone = [r for r in rows if r["metric"] == "unavailable"]
    if gone:
        return f"Not measured: {gone[0].get('detail', 'Citus is not available')}.", []
    md = [
        "A coordinator and two workers per configuration on this machine: `stock` (every node stock "
        "PostgreSQL), `stock-2` (a second, identical cluster: stock-2 / stock is the noise floor) and "
        "`aes-256` (every node pgcipher, aes-256); Citus 14.0.1 built from the same tarball, compiler "
        "and flags against each build.  "
        f"pgbench scale {p['scale']}, pgbench_accounts and pgbench_history distributed by aid (32 shards), "
        f"branches and tellers reference tables; {p['clients']} clients, {p['seconds']} s per pgbench run; "
        f"COPY of {p['copy_rows']:,} rows from a file on the coordinator; the multi-shard aggregate "
        f"{p['agg_queries']} times and the repartition join ({p['join_rows']:,} rows each side) "
        f"{p['join_queries']} times per measurement.  {p['repetitions']} interleaved rounds (ABBA); "
        "medians; ratios to `stock` with 95% bootstrap CIs (for ms per query, lower is better).\n"
    ]
    # the run's own baseline and noise floor: runs before 2026-11-26 named
    # them off and off-2 (pgcipher's binaries, encryption off)
    base = p["configs"][0] if p.get("configs") else BASELINE
    noise = next((c for c in p.get("configs", []) if c.endswith("-2")), NOISE)
    speed = {}  # ((workload,), config): each workload's ratio as speed (higher is faster)
    for w in WORKLOADS:
        md.append(f"\n**{w}** ({UNITS[w]})\n")
        t, sums = common.ratio_table(
            [r for r in rows if r.get("workload") == w],
            base,
            p["configs"],
            ["workload"],
            metric=UNITS[w],
            fmt_value="{:,.0f}" if UNITS[w] != "ms_per_query" else "{:,.1f}",
            verdicts=True,
            noise=noise,
            higher_is_better=UNITS[w] != "ms_per_query",
        )
        md.append(t)
        for (_, cfg), sm in sums.items():
            if cfg == base:
                continue
            if UNITS[w] == "ms_per_query" and sm["ratio"] == sm["ratio"] and sm["ci_low"] > 0:
                # time per query: its inverse is the speed ratio
                sm = dict(sm, ratio=1 / sm["ratio"], ci_low=1 / sm["ci_high"], ci_high=1 / sm["ci_low"])
            speed[((w,), cfg)] = sm
    sb = [r for r in rows if str(r.get("workload", "")).startswith("sysbench-")]
    if sb:
        md.append(
            f"\n**Alibaba's sysbench statements on distributed tables** (aes-256 cluster; "
            f"{p['sysbench_rows']:,} rows distributed by id; scenario s1 of `alibaba-sysbench`: k enc_int4 "
            "EQ, c and pad RND; point `SELECT c WHERE id=?`, range `SELECT SUM(k) WHERE id BETWEEN` "
            "(100 rows from many shards, summed by the proxy), write (`k = k + 1` computed by the proxy, "
            f"UPDATE c, DELETE, INSERT); {p['sysbench_seconds']} s per run; TPS; ratios to plain-direct)\n"
        )
        t, _ = common.ratio_table(
            sb, "plain-direct", SYSBENCH_CONFIGS, ["workload", "threads"], metric="tps", noise=None
        )
        md.append(t)
    md.append(
        "\nNo instruction counts: callgrind follows one process, and these workloads run in many "
        "backends on three servers; the cipher's code paths are counted by the `instructions` scenario."
    )
    pngs = []
    if plots.overhead_bars(
        speed,
        os.path.join(out_dir, f"{NAME}-overhead.png"),
        f"Citus, three nodes: speed vs {base} (TPS; 1 / ms per query), 95% CI",
    ):
        pngs.append(f"{NAME}-overhead.png")
    return "\n".join(md), pngs
