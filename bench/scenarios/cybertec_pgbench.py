"""cybertec-pgbench (seed 001): CYBERTEC's PostgreSQL 13 TDE analysis.

pgbench select-only (-S) and TPC-B-like at three scales relative to
shared_buffers — well below, about 90% of, and above shared_buffers but in
RAM — at several client counts, for stock PostgreSQL, pgcipher with
encryption off, aes-128 and aes-256.  CYBERTEC used a 16-core machine, 16 GB
of shared_buffers and scales 50 / 500 / 5000; we scale the same ratios down
to this machine."""
import os

from bench.scenarios import common
from bench import plots

NAME = "cybertec-pgbench"
TITLE = "pgbench select-only and TPC-B-like across scales (CYBERTEC, PG 13 TDE)"
SEED = "001_61837ef2c00d3fb1.txt"

# CYBERTEC's published TPS at scale 50 (880 MB), 12 and 16 clients: stock,
# TDE off (gcc 4.8), TDE on (gcc 4.8).  From the seed report.
VENDOR = {
    ("select-only", 12): (598004.94, 652870.65, 640867.94),
    ("select-only", 16): (717080.83, 806152.21, 795300.37),
}

PROFILES = {
    "quick": dict(configs=["stock", "aes-256"], shared_buffers_mb=128, scales={"above": 20},
                  clients=[2], workloads=["select-only", "tpcb-like"], repetitions=2, seconds=30),
    "full": dict(configs=["stock", "pgcipher-off", "aes-128", "aes-256"], shared_buffers_mb=256,
                 scales={"below": 2, "at-90%": 14, "above": 40},
                 clients=[1, 2, 4, 8, 16], workloads=["select-only", "tpcb-like"], repetitions=2, seconds=6),
}


def plan(profile, overrides=None):
    p = dict(PROFILES[profile])
    p.update(overrides or {})
    n = len(p["configs"]) * len(p["scales"]) * len(p["clients"]) * len(p["workloads"]) * p["repetitions"]
    p["steps"] = n
    p["est_seconds"] = n * (p["seconds"] + 1) + len(p["configs"]) * sum(p["scales"].values()) * 0.8
    return p


def run(run, p):
    settings = {"shared_buffers": f"{p['shared_buffers_mb']}MB", "max_connections": 100,
                "max_wal_size": "4GB", "checkpoint_timeout": "15min", "autovacuum": "off"}
    cfgs = common.configs(p["configs"])
    for scale_label, scale in p["scales"].items():
        clusters = common.start_clusters(run, NAME, cfgs, settings)
        try:
            common.pgbench_init(run, NAME, clusters, scale)
            # warm-up: one short select-only run each
            for c in clusters.values():
                c.pgbench(["-S", "-n", "-T", "2", "-c", "2", "-j", "2"])
            from bench.interleave import interleaved
            points = [(w, n) for w in p["workloads"] for n in p["clients"]]
            for rep, (workload, clients), cfg in interleaved(cfgs, p["repetitions"], points):
                c = clusters[cfg.name]
                args = (["-S"] if workload == "select-only" else []) + \
                    ["-n", "-T", str(p["seconds"]), "-c", str(clients), "-j", str(min(clients, os.cpu_count() or 1))]
                m, cmd, _ = c.pgbench(args, timeout=p["seconds"] * 10 + 120)
                run.command(cmd.replace(c.dir, "$CLUSTER"))
                for metric, value in m.items():
                    run.record(NAME, cfg.name, rep, metric, value, workload=workload, scale_label=scale_label,
                               scale=scale, clients=clients)
                run.progress.step(f"{NAME} {workload} scale {scale} ({scale_label}) {clients} clients "
                                  f"{cfg.name} round {rep}: {m['tps']:,.0f} tps", p["est_seconds"] / p["steps"])
        finally:
            common.stop_all(clusters)


def report(rows, p, out_dir):
    cfgs = [c for c in p["configs"]]
    md = [f"Configurations: {', '.join(cfgs)}; shared_buffers = {p['shared_buffers_mb']} MB; scales "
          + ", ".join(f"{v} ({k} shared_buffers)" for k, v in p["scales"].items())
          + f"; {p['repetitions']} interleaved rounds of {p['seconds']} s per point after a 2 s select-only "
          "warm-up run per cluster; TPS medians; "
          "ratios against stock with 95% bootstrap confidence intervals.\n"]
    table, summaries = common.ratio_table(rows, "stock", cfgs, ["workload", "scale", "clients"])
    md.append(table)
    md.append("\nSummary over all points (each point a median of its rounds):\n")
    md.append(common.geomean_summary(summaries, cfgs, "stock"))
    md.append("\nCYBERTEC's published numbers for reference (scale 50, 16-core Ryzen 5950X, TPS; "
              "TDE built with gcc 4.8):\n")
    md.append("| workload | clients | stock | TDE off | TDE on | TDE on / stock |\n|---|---|---|---|---|---|")
    for (w, n), (s, off, on) in VENDOR.items():
        md.append(f"| {w} | {n} | {s:,.0f} | {off:,.0f} | {on:,.0f} | {on / s:.3f} |")
    md.append("\nWhat differs: CYBERTEC ran 12–48 clients on 16 cores with 16 GB shared_buffers and "
              "compared packaged stock binaries with a locally built TDE (so compiler flags explain most "
              "of their differences); here every configuration is built from the same source with the "
              "same compiler and flags, on this machine's cores, with sizes scaled down.")
    pngs = []
    for w in p["workloads"]:
        for label, scale in p["scales"].items():
            name = f"{NAME}-{w}-scale{scale}-tps.png"
            if plots.tps_vs_clients(rows, w, scale, cfgs, os.path.join(out_dir, name),
                                    f"pgbench {w}, scale {scale} ({label} shared_buffers)"):
                pngs.append(name)
    for label, scale in p["scales"].items():
        part = {((g[0], f"{g[2]} clients"), c): v for (g, c), v in summaries.items() if g[1] == scale}
        name = f"{NAME}-overhead-scale{scale}.png"
        if plots.overhead_bars(part, os.path.join(out_dir, name),
                               f"TPS vs stock, scale {scale} ({label} shared_buffers), 95% CI"):
            pngs.append(name)
    return "\n".join(md), pngs
