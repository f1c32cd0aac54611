"""tde-worst-cases: the operations Percona names as its pg_tde's worst cases.

Percona's community blog of 2026-07-20 lists where its pg_tde costs most
against plaintext PostgreSQL: CREATE TABLE AS (30 % slower), an ALTER TABLE
that rewrites the table (15 %), VACUUM FULL (10 %), and many sessions each
running UPDATEs of 100 random rows (60 % of plaintext's throughput, about
80 % with pg_tde 2.2.3).  This scenario runs those four, per round and
configuration, interleaved (ABBA: bench/interleave.py):

    ctas          CREATE TABLE wc_copy AS SELECT * FROM pgbench_accounts;
    alter         ALTER TABLE wc_copy ALTER COLUMN abalance TYPE bigint: a
                  full rewrite of the table just made;
    vacuum-full   VACUUM FULL wc_copy after an untimed DELETE of a third of
                  its rows (dead rows to drop);
    updates       pgbench -c N with one script: UPDATE pgbench_accounts of 100
                  random rows (aid = ANY of 100 random ids) per transaction.

The three bulk operations are timed wall-clock from the client, each after an
untimed CHECKPOINT, the CHECKPOINT after it timed separately (as wal-heavy
does); their throughput is rows per second of the table written.  The
updates are measured in TPS, followed by an untimed VACUUM of
pgbench_accounts so every configuration starts the next round with the same
table.  Configurations: stock, stock-2 (a second stock server: the noise
floor), aes-256 (pgcipher) and, where it is built, open_pg_tde (the
open-source peer, a fork of Percona's pg_tde: bench/peer).  Target from this
scenario's brief: encrypted >= 0.95 of stock on every workload.  No vendor
report in bench/vendor_reports.py (SEED = None): Percona's figures are quoted
in the report for reference."""

import os

from bench import plots, stats
from bench.interleave import interleaved
from bench.scenarios import common, wal_heavy
from bench.scenarios.wal_heavy import _lsn, _table_mb, _timed

NAME = "tde-worst-cases"
TITLE = "Percona's pg_tde worst cases: CREATE TABLE AS, ALTER TABLE rewrite, VACUUM FULL, 100-row UPDATEs"
SEED = None
# the noise floor's metric (report.py): rows/s of the bulk operations, TPS of the updates
METRIC = "throughput"

WORKLOADS = ["ctas", "alter", "vacuum-full", "updates"]
LABELS = {
    "ctas": "CREATE TABLE AS SELECT",
    "alter": "ALTER TABLE … ALTER COLUMN … TYPE (rewrite)",
    "vacuum-full": "VACUUM FULL (a third of the rows dead)",
    "updates": "UPDATE of 100 random rows, concurrent sessions",
}
UNITS = {"ctas": "rows/s", "alter": "rows/s", "vacuum-full": "rows/s", "updates": "TPS"}
# what Percona published for pg_tde (community blog, 2026-07-20)
PERCONA = {
    "ctas": "30 % slower",
    "alter": "15 % slower",
    "vacuum-full": "10 % slower",
    "updates": "60 % of plaintext (~80 % with 2.2.3)",
}
TARGET = 0.95

SOURCE = "pgbench_accounts"
COPY = "wc_copy"
UPDATE_SCRIPT = (
    f"UPDATE {SOURCE} SET abalance = abalance + 1 WHERE aid = ANY (ARRAY("
    "SELECT 1 + floor(random() * :naccounts)::int FROM generate_series(1, 100)));\n"
)
# pgbench_accounts: 100,000 rows per unit of scale, about 13 MB of heap
ROWS_PER_SCALE = 100_000
MB_PER_SCALE = 13

PROFILES = {
    # about 4 minutes here with the peer: 4 rounds, so the CIs have something to resample
    "quick": dict(
        configs=["stock", "stock-2", "aes-256"],
        scale=10,
        clients=8,
        seconds=10,
        warmup_seconds=3,
        repetitions=4,
        shared_buffers_mb=32,
        max_wal_size="4GB",
    ),
    # the table (about 1.3 GB) well above shared_buffers
    "full": dict(
        configs=["stock", "stock-2", "aes-256"],
        scale=100,
        clients=8,
        seconds=60,
        warmup_seconds=10,
        repetitions=4,
        shared_buffers_mb=256,
        max_wal_size="16GB",
    ),
}

# rough rates on the 2-core bench VM, for the time estimate only (MB of table per second;
# measured at scale 5: 150-230 for CTAS, 110-150 for ALTER and VACUUM FULL)
_MB_PER_S = {"ctas": 150.0, "alter": 120.0, "vacuum-full": 120.0}
_CHECKPOINT_MB_PER_S = 600.0


def _expected(p, workload):
    """Expected seconds of one measurement, with its checkpoints and the untimed steps."""
    mb = p["scale"] * MB_PER_SCALE
    if workload == "updates":
        return p["seconds"] + 1 + mb / 200
    extra = mb / 150 if workload == "vacuum-full" else 0.0  # the untimed DELETE
    return mb / _MB_PER_S[workload] + 2 * mb / _CHECKPOINT_MB_PER_S + extra + 0.5


def plan(profile, overrides=None):
    p = dict(PROFILES[profile])
    p.update(overrides or {})
    p["rows"] = p["scale"] * ROWS_PER_SCALE
    p["steps"] = len(p["configs"]) * len(WORKLOADS) * p["repetitions"]
    mb = p["scale"] * MB_PER_SCALE
    # initdb and start, pgbench -i, VACUUM, and the warm-up (one CTAS and a short update run)
    setup = len(p["configs"]) * (5 + p["scale"] * 0.3 + mb / _MB_PER_S["ctas"] + p["warmup_seconds"])
    p["setup_share"] = setup / p["steps"]
    p["est_seconds"] = setup + len(p["configs"]) * p["repetitions"] * sum(_expected(p, w) for w in WORKLOADS)
    return p


def settings(p):
    """postgresql.conf for every configuration (the report lists it)."""
    return {
        "shared_buffers": f"{p['shared_buffers_mb']}MB",
        "max_connections": 30,
        "wal_level": "replica",
        "synchronous_commit": "on",
        "max_wal_size": p["max_wal_size"],
        "checkpoint_timeout": "1h",
        # VACUUM and VACUUM FULL run when the scenario says
        "autovacuum": "off",
    }


def update_args(p, script):
    clients = p["clients"]
    return [
        "-n",
        "-f",
        script,
        "-D",
        f"naccounts={p['rows']}",
        "-c",
        str(clients),
        "-j",
        str(min(clients, os.cpu_count() or 1)),
        # 100 rows locked per transaction by 8 sessions: a deadlock is retried, not a failed client
        "--max-tries=10",
    ]


def measure(run, c, workload, p, script):
    """One measurement on one cluster: {metric: value}; "throughput" is the
    one the ratios use (rows/s of the table written, or TPS)."""
    m = {}
    if workload == "updates":
        c.psql("CHECKPOINT")
        lsn0 = _lsn(c)
        res, cmd, _ = c.pgbench(
            ["-T", str(p["seconds"]), *update_args(p, script)], timeout=p["seconds"] * 10 + 120
        )
        run.command(cmd.replace(c.dir, "$CLUSTER").replace(script, "$SCRIPT"))
        m.update(throughput=res["tps"], tps=res["tps"], latency_ms=res.get("latency_ms", 0.0))
        m["wal_mb"] = (_lsn(c) - lsn0) / 2**20
        # the next round starts from the same table in every configuration
        c.psql(f"VACUUM {SOURCE}")
        c.psql("CHECKPOINT")
        return m
    if workload == "ctas":
        c.psql(f"DROP TABLE IF EXISTS {COPY}")
        op = f"CREATE TABLE {COPY} AS SELECT * FROM {SOURCE}"
    elif workload == "alter":
        op = f"ALTER TABLE {COPY} ALTER COLUMN abalance TYPE bigint"
    elif workload == "vacuum-full":
        c.psql(f"DELETE FROM {COPY} WHERE aid % 3 = 0")
        op = f"VACUUM FULL {COPY}"
    else:
        raise ValueError(workload)
    c.psql("CHECKPOINT")
    lsn0 = _lsn(c)
    m["seconds"] = _timed(c, op)
    m["wal_mb"] = (_lsn(c) - lsn0) / 2**20
    m["checkpoint_seconds"] = _timed(c, "CHECKPOINT")
    m["table_mb"] = _table_mb(c, COPY)
    # the rows written: all of pgbench_accounts (aid 1..rows), less every third after the DELETE
    m["rows"] = p["rows"] - (p["rows"] // 3 if workload == "vacuum-full" else 0)
    m["throughput"] = m["rows"] / m["seconds"]
    m["mb_per_s"] = m["table_mb"] / m["seconds"]
    run.command(op)
    return m


def _describe(workload, m):
    if workload == "updates":
        return f"{m['tps']:,.0f} tps, {m['wal_mb']:,.0f} MB WAL"
    return (
        f"{m['seconds']:.2f} s ({m['rows']:,} rows, {m['table_mb']:,.1f} MB, {m['mb_per_s']:,.1f} MB/s), "
        f"checkpoint {m['checkpoint_seconds']:.2f} s, {m['wal_mb']:,.0f} MB WAL"
    )


def run(run, p):
    cfgs = common.configs(p["configs"])
    script = os.path.join(run.workdir, NAME, "update-100.sql")
    clusters = {}
    try:
        clusters = common.start_clusters(run, NAME, cfgs, settings(p))
        with open(script, "w") as f:
            f.write(UPDATE_SCRIPT)
        common.pgbench_init(run, NAME, clusters, p["scale"])
        for name, c in clusters.items():
            # warm-up, untimed: one CTAS (checked on the peer) and a short update run
            c.psql(f"CREATE TABLE {COPY} AS SELECT * FROM {SOURCE}")
            common.check_peer(run, NAME, c, [COPY])
            c.psql(f"DROP TABLE {COPY}")
            if p.get("warmup_seconds"):
                c.pgbench(["-T", str(p["warmup_seconds"]), *update_args(p, script)])
                c.psql(f"VACUUM {SOURCE}")
            c.psql("CHECKPOINT")
            run.progress.note(f"{NAME}: {name} warmed up")
        for rep, workload, cfg in interleaved(cfgs, p["repetitions"], WORKLOADS):
            m = measure(run, clusters[cfg.name], workload, p, script)
            for metric, value in m.items():
                run.record(NAME, cfg.name, rep, metric, value, workload=workload)
            run.progress.step(
                f"{NAME} {workload} {cfg.name} round {rep}: {_describe(workload, m)}",
                _expected(p, workload) + p["setup_share"],
            )
    finally:
        common.stop_all(clusters)
        if os.path.exists(script):
            os.remove(script)


def _values(rows, cfg, workload, metric=METRIC):
    return wal_heavy._values(rows, cfg, workload, metric)


def summaries(rows, cfgs, baseline=common.BASELINE):
    """{(workload, config): stats.summarize(...)} of the throughput against the baseline."""
    out = {}
    for w in WORKLOADS:
        base = _values(rows, baseline, w)
        for cfg in cfgs:
            vals = _values(rows, cfg, w)
            if cfg != baseline and vals and base:
                out[(w, cfg)] = stats.summarize(vals, base)
    return out


def target_verdict(s, target=TARGET):
    """wal_heavy.verdict of a ratio (encrypted / stock) against the target,
    without its parenthesis: "met", "met by the median", "not met by the
    median" or "not met" ("–" without a ratio)."""
    return wal_heavy.verdict(s, target).split(" (")[0]


def _cell(rows, cfg, w):
    vals = _values(rows, cfg, w)
    if not vals:
        return "–"
    if w == "updates":
        return f"{stats.median(vals):,.0f} TPS"
    secs = _values(rows, cfg, w, "seconds")
    return f"{stats.median(vals) / 1000:,.0f} k rows/s ({stats.median(secs):.2f} s)"


def report(rows, p, out_dir):
    cfgs = [c for c in p["configs"] if any(r["config"] == c for r in rows)] or list(p["configs"])
    base, noise = common.BASELINE, common.NOISE
    encs = [c for c in cfgs if c not in (base, noise)]
    sums = summaries(rows, cfgs, base)
    table_mb = _values(rows, base, "ctas", "table_mb")
    mb = p["scale"] * MB_PER_SCALE
    md = [
        f"Configurations: {', '.join(cfgs)}.  Per round and configuration, interleaved "
        f"({p['repetitions']} rounds, ABBA, configurations innermost), on pgbench_accounts at scale "
        f"{p['scale']} ({p['rows']:,} rows; a copy of it is "
        f"{_fmt(table_mb, '{:,.0f}')} MB of heap, shared_buffers = {p['shared_buffers_mb']} MB"
        + (", so the table does not fit" if mb > p["shared_buffers_mb"] else "")
        + "): `CREATE TABLE wc_copy AS SELECT * FROM pgbench_accounts`; `ALTER TABLE wc_copy ALTER "
        "COLUMN abalance TYPE bigint` (a rewrite of the whole table); `VACUUM FULL wc_copy` after an untimed DELETE of every third row; and "
        f"pgbench with {p['clients']} clients for {p['seconds']} s running one script, "
        "`UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = ANY (ARRAY(SELECT 1 + "
        "floor(random() * :naccounts)::int FROM generate_series(1, 100)))` (100 random rows per "
        "transaction; a deadlock is retried, `--max-tries=10`), followed by an untimed VACUUM.  Each "
        "bulk operation starts after an untimed CHECKPOINT and is timed from the client (one psql call); "
        "the CHECKPOINT after it is timed separately and not in the ratio.  Before the rounds, each "
        f"cluster ran an untimed CREATE TABLE AS and {p['warmup_seconds']} s of the updates.  Medians "
        "of the rounds; throughput is rows of the table written per second (TPS for the updates); "
        "ratios to stock with 95% bootstrap CI.\n",
        "| workload | "
        + " | ".join(cfgs)
        + " | "
        + " | ".join(f"{c} / {base} (95% CI)" for c in cfgs if c != base)
        + " | target | verdict | Percona's pg_tde (published) |",
        "|" + "---|" * (1 + len(cfgs) + len(cfgs) - 1 + 3),
    ]
    for w in WORKLOADS:
        cells = [LABELS[w]] + [_cell(rows, c, w) for c in cfgs]
        for c in cfgs:
            if c == base:
                continue
            s = sums.get((w, c))
            cells.append(f"{s['ratio']:.3f} ({s['ci_low']:.3f}–{s['ci_high']:.3f})" if s else "–")
        cells.append(f"≥ {TARGET:.2f} of {base}")
        floor = sums.get((w, noise))
        verdicts = []
        for c in encs:
            s = sums.get((w, c))
            if s:
                verdicts.append(f"{c}: {target_verdict(s)}, {stats.verdict(s, floor)}")
        cells.append("; ".join(verdicts) if verdicts else "–")
        cells.append(PERCONA[w])
        md.append("| " + " | ".join(cells) + " |")
    md.append(
        '\nVerdict: first against the target ("met": the whole CI at or above it; "met by the median": '
        'the median ratio is, the CI reaches below; "not met": the whole CI below), then against the '
        f"noise floor ({noise} / {base} at the same workload): *inside the noise*, *slower* or *faster*.  "
        "Percona's column quotes its community blog of 2026-07-20 on its own pg_tde against plaintext "
        "PostgreSQL, on its own hardware; open_pg_tde is a fork of pg_tde, not pg_tde itself."
    )
    if not any(r["config"] == "open_pg_tde" for r in rows):
        md.append("\nopen_pg_tde did not run in this report (not built where it ran, or left out).")
    md.append(
        "\nThe bulk operations in detail (median seconds of the operation + the CHECKPOINT after it; "
        "MB of table written; WAL MB):\n"
    )
    md.append("| workload | " + " | ".join(cfgs) + " |")
    md.append("|" + "---|" * (1 + len(cfgs)))
    for w in WORKLOADS:
        cells = [LABELS[w]]
        for c in cfgs:
            wal = _values(rows, c, w, "wal_mb")
            if w == "updates":
                lat = _values(rows, c, w, "latency_ms")
                cells.append(
                    f"{_fmt(lat, '{:.1f}')} ms latency, {_fmt(wal, '{:,.0f}')} MB WAL" if lat else "–"
                )
                continue
            secs, ck = _values(rows, c, w, "seconds"), _values(rows, c, w, "checkpoint_seconds")
            tmb = _values(rows, c, w, "table_mb")
            cells.append(
                f"{_fmt(secs, '{:.2f}')} + {_fmt(ck, '{:.2f}')} s, {_fmt(tmb, '{:,.0f}')} MB, "
                f"{_fmt(wal, '{:,.0f}')} MB WAL"
                if secs
                else "–"
            )
        md.append("| " + " | ".join(cells) + " |")
    if mb <= p["shared_buffers_mb"]:
        md.append(
            f"\nThis profile's table (scale {p['scale']}) fits in shared_buffers; the full profile's "
            "does not."
        )
    pngs = []
    part = {((w,), c): s for (w, c), s in sums.items()}
    if plots.overhead_bars(
        part,
        os.path.join(out_dir, f"{NAME}-overhead.png"),
        f"TDE worst cases: throughput vs stock (95% CI), | = target {TARGET}",
        targets={(w,): TARGET for w in WORKLOADS},
    ):
        pngs.append(f"{NAME}-overhead.png")
    return "\n".join(md), pngs


def _fmt(vals, fmt):
    return fmt.format(stats.median(vals)) if vals else "–"
