"""proxy-orm: what pgcipher-proxy costs for the work it adds to ORMs' SQL.

The shapes ORMs send that the proxy serves on encrypted columns by doing
more than encrypting a parameter (issue 40, design §15), each measured on
an encrypted table through the proxy beside its plaintext twin through the
proxy and directly, in interleaved rounds:

    bulk-unnest   Django's bulk_create: INSERT INTO t (id, city, name, v)
                  SELECT * FROM unnest($1::int[], $2::text[], $3::text[],
                  $4::int[]) with R rows per statement, the proxy encrypting
                  every element of three arrays (EQ, MATCH, ORD); rows/s;
    group-sum     values('city').annotate(Sum('v'), Count('id')): SELECT
                  city, sum(v), count(*) FROM t GROUP BY city — the server
                  groups by the EQ token, the proxy decrypts v and sums per
                  group; queries/s over N rows;
    like-limit    filter(name__contains=...)[:10]: SELECT id, name FROM t
                  WHERE name LIKE $1 ORDER BY id LIMIT 10 — the server
                  filters by MATCH tokens without the LIMIT, the proxy
                  rechecks each candidate and applies it; queries/s.
                  Names are "city-NNNNNN-random"; the pattern, '%oslo-000%',
                  matches an eighth of the first 999 rows.

pgbench (-M prepared: the extended protocol, parameters as ORMs bind them;
arrays and the pattern are pgbench variables, -D) with one client, TPS as
statements per second.  Around every run the CPU time of the proxy process
is read and divided by the statements run (µs per statement).  A second
plaintext-direct configuration measured like the first (plain-direct-2) is
the noise floor.  One pgcipher cluster, TDE off (this measures the proxy).
No vendor report to reproduce (SEED = None)."""

import os
import random

from bench import plots, stats
from bench.cluster import STANDARD_CONFIGS
from bench.procs import Daemon, find_tools, new_cmk, pgbench, process_cpu_s, psql_tcp, start_proxy
from bench.scenarios import common

NAME = "proxy-orm"
TITLE = "pgcipher-proxy on ORMs' SQL: array encryption, per-group aggregation, rechecked LIMIT"
SEED = None
INSTALLS = ("pgcipher",)

WORKLOADS = ["bulk-unnest", "group-sum", "like-limit"]
# configuration -> (table, path)
CONFIGS = {
    "enc-proxy": ("enc_o", "proxy"),
    "plain-proxy": ("plain_o", "proxy"),
    "plain-direct": ("plain_o", "direct"),
    "plain-direct-2": ("plain_o", "direct"),
}
BASELINE = "plain-proxy"
NOISE = "plain-direct-2"
CITIES = ["Oslo", "Rome", "Lima", "Kyiv", "Oran", "Pune", "Cusco", "Hue"]
SEED_RANDOM = 20261127
# like-limit's pattern: Oslo's rows with ids below 1000 (an eighth of
# them), long enough for MATCH's trigrams to narrow the candidates
PATTERN = "%oslo-000%"

PROFILES = {
    "quick": dict(config="pgcipher-off", rows=2000, batch=100, seconds=5, repetitions=4, warmup_seconds=2),
    "full": dict(config="pgcipher-off", rows=20000, batch=500, seconds=15, repetitions=6, warmup_seconds=5),
}


def plan(profile, overrides=None):
    p = dict(PROFILES[profile])
    p.update(overrides or {})
    p.setdefault("workloads", list(WORKLOADS))
    p.setdefault("configs", list(CONFIGS))
    p["steps"] = p["repetitions"] * len(p["workloads"]) * len(p["configs"])
    p["est_seconds"] = 30 + p["steps"] * (p["seconds"] + 1.5)
    return p


def settings(p):
    return {
        "shared_buffers": "128MB",
        "listen_addresses": "'127.0.0.1'",
        "max_wal_size": "4GB",
        "checkpoint_timeout": "15min",
        "autovacuum": "off",
    }


def _name(rng, i):
    return f"{rng.choice(CITIES).lower()}-{i:06d}-" + "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=12))


def _load(run, c, port, p):
    """The key, both tables and N rows, through the proxy."""
    psql_tcp(c, port, "SELECT pgcipher.add_column_key('bench')")
    for table, enc in (("enc_o", True), ("plain_o", False)):
        types = (
            ("enc_text", "enc_text", "enc_int4_ord")
            if enc
            else ('text COLLATE "C"', 'text COLLATE "C"', "int4")
        )
        psql_tcp(c, port, f"CREATE TABLE {table} (id int, city {types[0]}, name {types[1]}, v {types[2]})")
        psql_tcp(
            c, port, f"CREATE TABLE {table}_bulk (id int, city {types[0]}, name {types[1]}, v {types[2]})"
        )
        if enc:
            for t in (table, f"{table}_bulk"):
                for col, level in (("city", "EQ"), ("name", "MATCH"), ("v", "ORD")):
                    psql_tcp(c, port, f"SELECT pgcipher.encrypt_column('{t}', '{col}', 'bench', '{level}')")
    rng = random.Random(SEED_RANDOM)
    rows = [(i, rng.choice(CITIES), _name(rng, i), rng.randrange(1000)) for i in range(1, p["rows"] + 1)]
    data = os.path.join(c.dir, "rows.tsv")
    with open(data, "w") as f:
        f.write("".join(f"{i}\t{city}\t{name}\t{v}\n" for i, city, name, v in rows))
    for table in ("enc_o", "plain_o"):
        psql_tcp(c, port, f"\\copy {table} FROM '{data}'")
    c.psql("VACUUM ANALYZE enc_o, plain_o")
    # the answers through the proxy are the plaintext twin's
    for sql in (
        "SELECT city, sum(v), count(*) FROM {t} GROUP BY city",
        f"SELECT id, name FROM {{t}} WHERE name LIKE '{PATTERN}' ORDER BY id LIMIT 10",
    ):
        # sorted here: ORDER BY an EQ column is refused
        a, b = (sorted(psql_tcp(c, port, sql.format(t=t)).splitlines()) for t in ("enc_o", "plain_o"))
        if a != b or not a:
            raise RuntimeError(f"{NAME}: the proxy's answer differs from the plaintext twin's for {sql}")
    run.record(NAME, "enc-proxy", 0, "answers_ok", 1, part="load")
    run.progress.note(
        f"{NAME}: {p['rows']:,} rows loaded through the proxy into enc_o and plain_o; answers checked"
    )
    return rows


def _scripts(c, p, rows):
    """pgbench scripts and -D variables per workload and table."""
    batch = rows[: p["batch"]]
    arrays = {
        "ids": "{" + ",".join(str(r[0]) for r in batch) + "}",
        "cities": "{" + ",".join(r[1] for r in batch) + "}",
        "names": "{" + ",".join(r[2] for r in batch) + "}",
        "vs": "{" + ",".join(str(r[3]) for r in batch) + "}",
    }
    sql = {
        "bulk-unnest": "INSERT INTO {t}_bulk (id, city, name, v) "
        "SELECT * FROM unnest(:ids::int[], :cities::text[], :names::text[], :vs::int[]);",
        "group-sum": "SELECT city, sum(v), count(*) FROM {t} GROUP BY city;",
        "like-limit": "SELECT id, name FROM {t} WHERE name LIKE :pat ORDER BY id LIMIT 10;",
    }
    out = {}
    for w, text in sql.items():
        for t in ("enc_o", "plain_o"):
            path = os.path.join(c.dir, f"{w}-{t}.sql")
            with open(path, "w") as f:
                f.write(text.format(t=t) + "\n")
            args = ["-f", path]
            if w == "bulk-unnest":
                args += [f"-D{k}={v}" for k, v in arrays.items()]
            elif w == "like-limit":
                args += [f"-Dpat={PATTERN}"]
            out[(w, t)] = args
    return out


def run(run, p):
    proxy_bin, keys_bin, _ = find_tools(run)
    c = run.cluster(STANDARD_CONFIGS[p["config"]], settings(p), NAME)
    daemons: list[Daemon] = []
    try:
        c.initdb()
        c.start()
        cmk = new_cmk(keys_bin, c)
        px = start_proxy(proxy_bin, c, "orm", cmk)
        daemons.append(px)
        run.progress.note(
            f"{NAME}: {c.config.name} on port {c.port}, pgcipher-proxy on {px.port} (pid {px.pid})"
        )
        rows = _load(run, c, px.port, p)
        scripts = _scripts(c, p, rows)
        ports = {"proxy": px.port, "direct": c.port}
        base = ["-n", "-M", "prepared", "-c", "1", "-j", "1"]
        for w in p["workloads"]:
            for cfg in p["configs"]:
                table, path = CONFIGS[cfg]
                pgbench(
                    run, c, ports[path], [*base, *scripts[(w, table)], "-T", str(p["warmup_seconds"])], 600
                )
        run.progress.step(f"{NAME} set-up and warm-up done", 30)
        for rep in range(1, p["repetitions"] + 1):
            for w in p["workloads"]:
                # ABBA: the order of the configurations turns every round
                order = p["configs"] if rep % 2 else list(reversed(p["configs"]))
                for cfg in order:
                    table, path = CONFIGS[cfg]
                    if w == "bulk-unnest":
                        c.psql(f"TRUNCATE {table}_bulk")
                    cpu0 = process_cpu_s(px.pid)
                    m, _ = pgbench(
                        run,
                        c,
                        ports[path],
                        [*base, *scripts[(w, table)], "-T", str(p["seconds"])],
                        p["seconds"] * 10 + 120,
                    )
                    tx = max(m.get("transactions", 0), 1)
                    rec = {"tps": m["tps"], "latency_ms": m.get("latency_ms", 1000.0 / max(m["tps"], 1e-9))}
                    if w == "bulk-unnest":
                        rec["rows_per_s"] = m["tps"] * p["batch"]
                    if path == "proxy":
                        rec["proxy_cpu_us_per_stmt"] = (process_cpu_s(px.pid) - cpu0) * 1e6 / tx
                    for metric, value in rec.items():
                        run.record(NAME, cfg, rep, metric, value, workload=w)
                    cpu = (
                        f", proxy {rec['proxy_cpu_us_per_stmt']:.0f} µs/stmt"
                        if "proxy_cpu_us_per_stmt" in rec
                        else ""
                    )
                    run.progress.step(
                        f"{NAME} {w} {cfg} round {rep}: {m['tps']:,.1f} stmt/s{cpu}", p["seconds"] + 1.5
                    )
        first = "|".join(map(str, rows[0]))
        for t in ("enc_o_bulk", "plain_o_bulk"):
            # what the last bulk run wrote reads back through the proxy:
            # whole batches, the first row as loaded
            n = int(psql_tcp(c, px.port, f"SELECT count(*) FROM {t}"))
            got = psql_tcp(c, px.port, f"SELECT id, city, name, v FROM {t} WHERE id = {rows[0][0]} LIMIT 1")
            if n == 0 or n % p["batch"] or got != first:
                raise RuntimeError(f"{NAME}: {t} holds {n} rows, its first {got!r}, not batches of {first!r}")
            run.record(
                NAME,
                "enc-proxy" if t.startswith("enc") else "plain-proxy",
                0,
                "bulk_check",
                1,
                detail=f"{n} rows",
            )
    finally:
        for d in daemons:
            d.stop()
        c.destroy()


def _vals(rows, config, metric, **match):
    return [
        r["value"]
        for r in rows
        if r["config"] == config and r["metric"] == metric and all(r.get(k) == v for k, v in match.items())
    ]


def report(rows, p, out_dir):
    timed = [r for r in rows if r.get("workload")]
    md = [
        f"One pgcipher cluster ({p['config']}), tables of {p['rows']:,} rows (id, city EQ, name MATCH, v ORD "
        f"int4 on enc_o; their plain types on plain_o), pgbench -M prepared with one client, "
        f"{p['repetitions']} interleaved rounds (ABBA) of {p['seconds']} s per point after {p['warmup_seconds']} s "
        f"warm-ups; bulk-unnest inserts {p['batch']} rows per statement.  Statements per second, medians; "
        f"ratios to {BASELINE} with 95% bootstrap CIs; {NOISE} is plain-direct measured again (the noise floor).\n",
    ]
    table, _ = common.ratio_table(timed, BASELINE, p["configs"], ["workload"], noise=NOISE)
    md.append(table)
    cpu = []
    for w in p["workloads"]:
        a, b = (
            _vals(timed, "enc-proxy", "proxy_cpu_us_per_stmt", workload=w),
            _vals(timed, "plain-proxy", "proxy_cpu_us_per_stmt", workload=w),
        )
        if a and b:
            cpu.append(
                f"| {w} | {stats.median(a):,.0f} | {stats.median(b):,.0f} | {stats.median(a) - stats.median(b):+,.0f} |"
            )
    if cpu:
        md += [
            "\nThe proxy's CPU per statement (µs, medians): what it adds on the encrypted table.\n",
            "| workload | enc-proxy | plain-proxy | added |",
            "|---|---|---|---|",
            *cpu,
        ]
    bulk = _vals(timed, "enc-proxy", "rows_per_s", workload="bulk-unnest")
    plain_bulk = _vals(timed, "plain-proxy", "rows_per_s", workload="bulk-unnest")
    if bulk and plain_bulk:
        md.append(
            f"\nbulk-unnest: {stats.median(bulk):,.0f} rows/s encrypted through the proxy, "
            f"{stats.median(plain_bulk):,.0f} rows/s plaintext through it."
        )
    floor = []
    for w in p["workloads"]:
        a, b = _vals(timed, NOISE, "tps", workload=w), _vals(timed, "plain-direct", "tps", workload=w)
        if a and b:
            s = stats.summarize(a, b)
            floor.append(f"{w} {s['ratio']:.3f} ({s['ci_low']:.3f}–{s['ci_high']:.3f})")
    if floor:
        md.append(
            f"\n**Noise floor.** {NOISE} / plain-direct, the same path and table measured twice in each round: "
            + "; ".join(floor)
            + ".  A ratio of enc-proxy to plain-proxy inside this band is no measured difference."
        )
    pngs = []
    labels, meds = [], []
    for w in p["workloads"]:
        a, b = _vals(timed, "enc-proxy", "tps", workload=w), _vals(timed, BASELINE, "tps", workload=w)
        if a and b:
            labels.append(w)
            meds.append(stats.median(a) / stats.median(b))
    if labels:
        png = os.path.join(out_dir, "proxy_orm_ratios.png")
        plots.bars(labels, meds, png, "enc-proxy / plain-proxy, statements per second", "ratio of medians")
        pngs.append(os.path.basename(png))
    return "\n".join(md) + "\n", pngs
