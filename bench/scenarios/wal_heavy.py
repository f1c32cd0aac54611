"""wal-heavy: the write paths that produce most WAL and write most pages.

Four workloads, each timed, stock PostgreSQL against pgcipher, configurations
interleaved A B A B for every workload and round:

    tpcb          pgbench's built-in TPC-B-like read/write transaction for N
                  seconds, synchronous_commit on (TPS);
    copy          COPY of a generated CSV file (server-side, from a file in
                  the work directory, generated once per run and read by every
                  configuration) into a freshly truncated table;
    ctas          CREATE TABLE AS SELECT * FROM that table;
    vacuum-full   VACUUM FULL of that table.

The three bulk operations are timed wall-clock (seconds, and MB/s of table
written); each starts from a clean state (an untimed CHECKPOINT before it) and
is followed by a CHECKPOINT that is timed separately, so that no cluster
flushes while another one is measured, and so that pages the operation left
dirty are paid for somewhere visible.  WAL volume per operation comes from
pg_current_wal_lsn().  Targets from the issue ("benchmarks, not tests"):
encrypted >= 0.98 of stock for tpcb, >= 0.97 for COPY, >= 0.95 for the
rewrites.  No vendor report to reproduce (SEED = None)."""
import os
import random
import shutil
import time

from bench.interleave import interleaved
from bench.scenarios import common
from bench import plots, stats

NAME = "wal-heavy"
TITLE = "WAL-heavy writes: pgbench TPC-B-like, COPY, CREATE TABLE AS, VACUUM FULL"
SEED = None

WORKLOADS = ["tpcb", "copy", "ctas", "vacuum-full"]
LABELS = {"tpcb": "pgbench tpcb-like (read/write)", "copy": "COPY FROM file",
          "ctas": "CREATE TABLE AS SELECT", "vacuum-full": "VACUUM FULL"}
# encrypted / stock, of TPS (tpcb) or of MB/s (the rest); from the issue
TARGETS = {"tpcb": 0.98, "copy": 0.97, "ctas": 0.95, "vacuum-full": 0.95}

TABLE = "wal_heavy"
SCHEMA = (f"CREATE TABLE {TABLE} (id bigint, k integer, v double precision, "
          "ts timestamptz, pad text)")
# heap tuple: 24 header + 8 + 4 (+4 align) + 8 + 8 + 97 = 153 -> 160 + 4 line
# pointer = 164 bytes, 49 per 8 kB page: 6272 rows per MB of table
ROWS_PER_MB = 6272

# pgbench data per scale factor (pgbench_accounts and its index), MB
PGBENCH_MB_PER_SCALE = 16

# XLP_ENCRYPTED in pgcipher's common/wal_encryption.h: set in the clear
# xlp_info of every WAL page written encrypted; outside stock's XLP_ALL_FLAGS.
XLP_ENCRYPTED = 0x0010

# stock vs aes-256 only: aes-128's cipher is cheaper per page (micro), so
# aes-256 bounds it, and on a 2-core machine the time buys more rounds.
PROFILES = {
    "quick": dict(configs=["stock", "aes-256"], size_mb=64, scale=5, clients=4, seconds=10,
                  warmup_seconds=5, repetitions=2, shared_buffers_mb=128, max_wal_size="4GB"),
    "full": dict(configs=["stock", "aes-256"], size_mb=1024, scale=20, clients=4, seconds=30,
                 warmup_seconds=10, repetitions=4, shared_buffers_mb=512, max_wal_size="8GB"),
}

# rough rates on a 2-core machine, for the time estimate only
_MB_PER_S = {"copy": 40.0, "ctas": 60.0, "vacuum-full": 60.0}
_CHECKPOINT_MB_PER_S = 300.0


def _expected(p, workload):
    """Expected seconds of one measurement (operation, checkpoints, cleanup)."""
    if workload == "tpcb":
        return p["seconds"] + 2
    return p["size_mb"] / _MB_PER_S[workload] + 2 * p["size_mb"] / _CHECKPOINT_MB_PER_S + 0.5


def plan(profile, overrides=None):
    p = dict(PROFILES[profile])
    p.update(overrides or {})
    p["rows"] = p["size_mb"] * ROWS_PER_MB
    p["steps"] = len(p["configs"]) * len(WORKLOADS) * p["repetitions"]
    setup = len(p["configs"]) * (5 + p["scale"] * 0.8 + p["warmup_seconds"] + _expected(p, "copy")) \
        + p["rows"] / 1e6
    p["setup_share"] = setup / p["steps"]
    p["est_seconds"] = setup + len(p["configs"]) * p["repetitions"] * sum(_expected(p, w) for w in WORKLOADS)
    return p


def settings(p):
    """postgresql.conf for every configuration (the report lists it)."""
    return {"shared_buffers": f"{p['shared_buffers_mb']}MB", "max_connections": 20,
            "wal_level": "replica", "synchronous_commit": "on", "full_page_writes": "on",
            "wal_compression": "off", "max_wal_size": p["max_wal_size"], "checkpoint_timeout": "1h",
            "autovacuum": "off"}


def write_data(path, rows, seed=20261123):
    """The COPY input: CSV rows for SCHEMA, deterministic for a seed."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        buf = []
        for i in range(1, rows + 1):
            buf.append(f"{i},{rng.getrandbits(31)},{rng.random() * 1000:.3f},"
                       f"2026-{1 + i % 12:02d}-{1 + i % 28:02d} {i % 24:02d}:{i % 60:02d}:{i // 60 % 60:02d}+00,"
                       f"{rng.getrandbits(384):096x}\n")
            if len(buf) >= 10000:
                f.write("".join(buf))
                buf.clear()
        f.write("".join(buf))
    return os.path.getsize(path)


def _sql_literal(s):
    return "'" + s.replace("'", "''") + "'"


def _lsn(c):
    return int(c.psql("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"))


def _timed(c, sql, timeout=7200):
    t0 = time.perf_counter()
    c.psql(sql, timeout=timeout)
    return time.perf_counter() - t0


def _table_mb(c, table):
    return int(c.psql(f"SELECT pg_relation_size('{table}')")) / 2**20


def wal_encrypted(c):
    """1 if the WAL page the cluster last flushed into carries XLP_ENCRYPTED
    (pgcipher with WAL encryption), 0 otherwise: read from pg_wal, not assumed."""
    c.psql("CHECKPOINT")
    seg = c.psql("SELECT pg_walfile_name(pg_current_wal_flush_lsn())")
    with open(os.path.join(c.data, "pg_wal", seg), "rb") as f:
        header = f.read(4)
    info = int.from_bytes(header[2:4], "little")
    return 1 if info & XLP_ENCRYPTED else 0


def measure(run, c, workload, p, data_file):
    """One timed measurement on one cluster: {metric: value}."""
    m = {}
    if workload == "tpcb":
        c.psql("CHECKPOINT")
        lsn0 = _lsn(c)
        clients = p["clients"]
        res, cmd, _ = c.pgbench(["-n", "-T", str(p["seconds"]), "-c", str(clients),
                                 "-j", str(min(clients, os.cpu_count() or 1))],
                                timeout=p["seconds"] * 10 + 120)
        run.command(cmd.replace(c.dir, "$CLUSTER"))
        m.update(tps=res["tps"], latency_ms=res.get("latency_ms", 0.0))
        m["wal_mb"] = (_lsn(c) - lsn0) / 2**20
        m["checkpoint_seconds"] = _timed(c, "CHECKPOINT")
        return m
    if workload == "copy":
        prep, op, table, after = (f"TRUNCATE {TABLE}",
                                  f"COPY {TABLE} FROM {_sql_literal(data_file)} (FORMAT csv)", TABLE, None)
    elif workload == "ctas":
        prep, op, table, after = (f"DROP TABLE IF EXISTS {TABLE}_ctas",
                                  f"CREATE TABLE {TABLE}_ctas AS SELECT * FROM {TABLE}", f"{TABLE}_ctas",
                                  f"DROP TABLE {TABLE}_ctas")
    elif workload == "vacuum-full":
        prep, op, table, after = None, f"VACUUM FULL {TABLE}", TABLE, None
    else:
        raise ValueError(workload)
    if prep:
        c.psql(prep)
    c.psql("CHECKPOINT")
    lsn0 = _lsn(c)
    m["seconds"] = _timed(c, op)
    m["wal_mb"] = (_lsn(c) - lsn0) / 2**20
    m["checkpoint_seconds"] = _timed(c, "CHECKPOINT")
    m["table_mb"] = _table_mb(c, table)
    m["mb_per_s"] = m["table_mb"] / m["seconds"]
    if after:
        c.psql(after)
    run.command(op.replace(data_file, "$DATA/wal-heavy.csv"))
    return m


def _describe(workload, m):
    if workload == "tpcb":
        return f"{m['tps']:,.0f} tps, {m['wal_mb']:,.0f} MB WAL"
    return f"{m['seconds']:.2f} s, {m['mb_per_s']:,.1f} MB/s, {m['wal_mb']:,.0f} MB WAL"


def run(run, p):
    cfgs = common.configs(p["configs"])
    input_dir = os.path.join(run.workdir, NAME, "input")
    os.makedirs(input_dir, exist_ok=True)
    data_file = os.path.join(input_dir, "wal-heavy.csv")
    clusters = {}
    try:
        t0 = time.perf_counter()
        input_mb = write_data(data_file, p["rows"]) / 2**20
        run.progress.note(f"{NAME}: generated {data_file} ({p['rows']:,} rows, {input_mb:,.1f} MB) "
                          f"in {time.perf_counter() - t0:.1f} s")
        clusters = common.start_clusters(run, NAME, cfgs, settings(p))
        common.pgbench_init(run, NAME, clusters, p["scale"])
        for name, c in clusters.items():
            c.psql(SCHEMA)
            enc = c.psql("SELECT coalesce(string_agg(name || '=' || setting, ', ' ORDER BY name), 'none') "
                         "FROM pg_settings WHERE name LIKE '%encrypt%' "
                         "AND name NOT IN ('password_encryption', 'encryption_key_command')")
            run.record(NAME, name, 0, "input_mb", input_mb, workload="setup", detail=enc)
            # warm-up, untimed: a short tpcb run and one COPY (also puts the file in the page cache)
            if p.get("warmup_seconds"):
                c.pgbench(["-n", "-T", str(p["warmup_seconds"]), "-c", str(p["clients"]),
                           "-j", str(min(p["clients"], os.cpu_count() or 1))])
            c.psql(f"COPY {TABLE} FROM {_sql_literal(data_file)} (FORMAT csv)", timeout=7200)
            walenc = wal_encrypted(c)
            run.record(NAME, name, 0, "wal_encrypted", walenc, workload="setup")
            run.progress.note(f"{NAME}: {name} ready: encryption settings {enc}; WAL pages encrypted: "
                              f"{'yes' if walenc else 'no'}")
        for rep, workload, cfg in interleaved(cfgs, p["repetitions"], WORKLOADS):
            m = measure(run, clusters[cfg.name], workload, p, data_file)
            for metric, value in m.items():
                run.record(NAME, cfg.name, rep, metric, value, workload=workload)
            run.progress.step(f"{NAME} {workload} {cfg.name} round {rep}: {_describe(workload, m)}",
                              _expected(p, workload) + p["setup_share"])
    finally:
        common.stop_all(clusters)
        shutil.rmtree(input_dir, ignore_errors=True)


def verdict(s, target):
    """Honest reading of a ratio (encrypted / stock) against a target."""
    if not s or s["ratio"] != s["ratio"]:
        return "–"
    if s["ci_low"] == s["ci_low"] and s["ci_low"] >= target:
        return "met"
    if s["ratio"] >= target:
        return "met by the median (CI reaches below)"
    if s["ci_high"] == s["ci_high"] and s["ci_high"] >= target:
        return "not met by the median (CI reaches the target)"
    return "not met"


def _values(rows, cfg, workload, metric):
    return [r["value"] for r in rows if r["config"] == cfg and r.get("workload") == workload and r["metric"] == metric]


def summaries(rows, cfgs, baseline="stock"):
    """{(workload, config): stats.summarize(...)} of the throughput metric
    (TPS for tpcb, MB/s of table written for the rest) against the baseline."""
    out = {}
    for w in WORKLOADS:
        metric = "tps" if w == "tpcb" else "mb_per_s"
        base = _values(rows, baseline, w, metric)
        for cfg in cfgs:
            if cfg == baseline:
                continue
            vals = _values(rows, cfg, w, metric)
            if vals and base:
                out[(w, cfg)] = stats.summarize(vals, base)
    return out


def _with_checkpoint(rows, cfg, w):
    """Throughput per round counting the CHECKPOINT after the operation."""
    out = []
    for r in rows:
        if r["config"] == cfg and r.get("workload") == w and r["metric"] == "seconds":
            ck = [x["value"] for x in rows if x["config"] == cfg and x.get("workload") == w
                  and x["rep"] == r["rep"] and x["metric"] == "checkpoint_seconds"]
            mb = [x["value"] for x in rows if x["config"] == cfg and x.get("workload") == w
                  and x["rep"] == r["rep"] and x["metric"] == "table_mb"]
            if ck and mb:
                out.append(mb[0] / (r["value"] + ck[0]))
    return out


def _fmt_median(vals, fmt):
    return fmt.format(stats.median(vals)) if vals else "–"


def report(rows, p, out_dir):
    cfgs = list(p["configs"])
    base = "stock"
    encs = [c for c in cfgs if c != base]
    sums = summaries(rows, cfgs, base)
    input_mb = [r["value"] for r in rows if r["metric"] == "input_mb"]
    table_mb = [r["value"] for r in rows if r["metric"] == "table_mb" and r.get("workload") == "copy"]
    pgbench_mb = p["scale"] * PGBENCH_MB_PER_SCALE
    md = [f"Configurations: {', '.join(cfgs)}.  Per round and configuration, interleaved "
          f"({p['repetitions']} rounds, configurations innermost): pgbench's TPC-B-like read/write "
          f"transaction for {p['seconds']} s with {p['clients']} clients at scale {p['scale']} "
          + (f"(about {pgbench_mb} MB, fits in shared_buffers = {p['shared_buffers_mb']} MB, so it measures "
             "the WAL and commit path; " if pgbench_mb < p["shared_buffers_mb"] else
             f"(about {pgbench_mb} MB, shared_buffers = {p['shared_buffers_mb']} MB; ")
          + "synchronous_commit = on); a server-side `COPY ... FROM` of a generated CSV file "
          f"({p['rows']:,} rows, {_fmt_median(input_mb, '{:,.0f}')} MB, generated once per run and read "
          "by every configuration from the page cache) into the freshly truncated table "
          f"(about {p['size_mb']:,} MB of heap; measured {_fmt_median(table_mb, '{:,.0f}')} MB); "
          "`CREATE TABLE AS SELECT *` from it; `VACUUM FULL` of it.  Each bulk operation starts "
          "after an untimed CHECKPOINT and is timed wall-clock from the client (one psql call); the "
          "CHECKPOINT after it is timed separately.  Before the rounds, each cluster ran an untimed "
          f"warm-up: {p['warmup_seconds']} s of tpcb and one COPY.  Medians; encrypted / stock of TPS or of "
          "MB/s of table written, with 95% bootstrap CI.\n",
          "| workload | " + " | ".join(cfgs) + " | "
          + " | ".join(f"{c} / {base} (95% CI)" for c in encs) + " | target | "
          + " | ".join(f"{c} vs target" for c in encs) + " |",
          "|" + "---|" * (2 + len(cfgs) + 2 * len(encs))]
    for w in WORKLOADS:
        cells = [LABELS[w]]
        for c in cfgs:
            if w == "tpcb":
                cells.append(_fmt_median(_values(rows, c, w, "tps"), "{:,.0f} tps"))
            else:
                mbs, secs = _values(rows, c, w, "mb_per_s"), _values(rows, c, w, "seconds")
                cells.append(f"{stats.median(mbs):,.1f} MB/s ({stats.median(secs):.2f} s)" if mbs else "–")
        for c in encs:
            s = sums.get((w, c))
            cells.append(f"{s['ratio']:.3f} ({s['ci_low']:.3f}–{s['ci_high']:.3f})" if s else "–")
        cells.append(f"≥ {TARGETS[w]:.2f}")
        cells += [verdict(sums.get((w, c)), TARGETS[w]) for c in encs]
        md.append("| " + " | ".join(cells) + " |")
    md.append("\n\"met\": the whole CI is at or above the target; \"met by the median\": the median ratio "
              "is, but the CI reaches below it (more rounds would tell); \"not met\": the whole CI is below.")
    # counting the checkpoint after each bulk operation
    md.append("\nThe same bulk operations counting the CHECKPOINT that follows each (MB/s of table over "
              "operation + checkpoint; the checkpoint writes and fsyncs what the operation left):\n")
    md.append("| workload | " + " | ".join(f"{c} s + checkpoint s" for c in cfgs) + " | "
              + " | ".join(f"{c} / {base} (95% CI)" for c in encs) + " |")
    md.append("|" + "---|" * (1 + len(cfgs) + len(encs)))
    for w in WORKLOADS[1:]:
        cells = [LABELS[w]]
        for c in cfgs:
            secs, ck = _values(rows, c, w, "seconds"), _values(rows, c, w, "checkpoint_seconds")
            cells.append(f"{stats.median(secs):.2f} + {stats.median(ck):.2f}" if secs and ck else "–")
        base_vals = _with_checkpoint(rows, base, w)
        for c in encs:
            vals = _with_checkpoint(rows, c, w)
            if vals and base_vals:
                s = stats.summarize(vals, base_vals)
                cells.append(f"{s['ratio']:.3f} ({s['ci_low']:.3f}–{s['ci_high']:.3f})")
            else:
                cells.append("–")
        md.append("| " + " | ".join(cells) + " |")
    # WAL volume: the same work should write the same WAL in every configuration
    md.append("\nWAL written per measurement (median MB, from pg_current_wal_lsn(); for tpcb per run, so it "
              "grows with the transactions run):\n")
    md.append("| workload | " + " | ".join(cfgs) + " |")
    md.append("|" + "---|" * (1 + len(cfgs)))
    for w in WORKLOADS:
        md.append(f"| {LABELS[w]} | " + " | ".join(_fmt_median(_values(rows, c, w, "wal_mb"), "{:,.1f}")
                                                   for c in cfgs) + " |")
    tpcb_ck = {c: _values(rows, c, "tpcb", "checkpoint_seconds") for c in cfgs}
    if any(tpcb_ck.values()):
        md.append("\nCHECKPOINT after each tpcb run (median s; it writes the pages the run dirtied): "
                  + ", ".join(f"{c} {_fmt_median(v, '{:.2f}')}" for c, v in tpcb_ck.items()) + ".")
    # what was encrypted, as seen by the servers and in pg_wal
    lines = []
    for c in cfgs:
        enc = [r.get("detail", "") for r in rows if r["config"] == c and r["metric"] == "input_mb"]
        walenc = [r["value"] for r in rows if r["config"] == c and r["metric"] == "wal_encrypted"]
        lines.append(f"{c}: `{enc[0] if enc else '?'}`, WAL pages encrypted: "
                     + ("?" if not walenc else "yes" if walenc[0] else "no"))
    wal_enc = [r["value"] for r in rows if r["metric"] == "wal_encrypted" and r["config"] != base]
    md.append("\nWhat each configuration encrypts (its encryption settings, and whether the page header of "
              "its current WAL segment carries pgcipher's XLP_ENCRYPTED flag): " + "; ".join(lines) + ".")
    if wal_enc and all(wal_enc):
        md.append("The encrypted configurations encrypt every WAL page they write (the commit path of tpcb, "
                  "the WAL of COPY, CTAS and VACUUM FULL) as well as data pages: written by COPY, CTAS and "
                  "VACUUM FULL (through their ring buffers or bulk writes) and by the checkpoints, and read "
                  "back from the OS cache and decrypted by CTAS and VACUUM FULL, whose scans of a table larger "
                  "than a quarter of shared_buffers go through a small ring.")
    elif wal_enc:
        md.append("WAL is written in plaintext by the encrypted configurations marked \"no\": they pay only "
                  "for data pages, written by COPY, CTAS and VACUUM FULL (through their ring buffers or bulk "
                  "writes) and by the checkpoints, and read back from the OS cache and decrypted by CTAS and "
                  "VACUUM FULL, whose scans of a table larger than a quarter of shared_buffers go through a "
                  "small ring.")
    md.append("\nTargets (from the issue; benchmarks, not tests): encrypted ≥ 0.98 of stock for tpcb, ≥ 0.97 "
              "for COPY, ≥ 0.95 for CREATE TABLE AS and VACUUM FULL.")
    if p["size_mb"] < 1024:
        md.append(f"\nThis profile uses {p['size_mb']} MB instead of the issue's 1 GB to keep the run short; "
                  "the full profile uses 1 GB.")
    pngs = []
    part = {((LABELS[w],), c): s for (w, c), s in sums.items()}
    targets = {(LABELS[w],): t for w, t in TARGETS.items()}
    if plots.overhead_bars(part, os.path.join(out_dir, f"{NAME}-overhead.png"),
                           "WAL-heavy: TPS / MB/s vs stock (95% CI), | = target", targets=targets):
        pngs.append(f"{NAME}-overhead.png")
    return "\n".join(md), pngs
