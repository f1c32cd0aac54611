"""cybertec-1mb (seed 004): CYBERTEC's "The Cost of TDE and Checksums in PGEE" (2025).

shared_buffers = 1MB so that nearly every page access misses the buffer
cache and goes through the OS cache: decrypt (and checksum) on every read.
pgbench -N (skip updates of the small tables), 3 clients, scale 50, no
encryption vs aes-128 vs aes-256, each with and without data checksums;
TPS, % of the unencrypted-without-checksums baseline, buffer-cache hit
ratio.  PGEE also offers 192-bit keys; pgcipher does not: XTS in OpenSSL
(and IEEE 1619) is defined for AES-128 and AES-256 only, and AES-192 buys
nothing over AES-256 in security or, with AES-NI, speed."""

import os

from bench import peer, plots, stats
from bench.cluster import Config
from bench.interleave import interleaved
from bench.scenarios import common

NAME = "cybertec-1mb"
TITLE = "shared_buffers = 1MB, pgbench -N, 3 clients (CYBERTEC, PGEE 17.6, 2025)"
SEED = "cybertec-tde-checksums-pgee"

# PGEE 17.6, TPS (average of a few 1-minute runs), from the seed report
VENDOR = {
    ("no TDE", False): 2455.6,
    ("no TDE", True): 2449.7,
    ("128 bits", False): 2440.9,
    ("128 bits", True): 2443.3,
    ("192 bits", False): 2439.6,
    ("192 bits", True): 2446.1,
    ("256 bits", False): 2450.3,
    ("256 bits", True): 2443.1,
}

PROFILES = {
    "quick": dict(
        scale=10,
        clients=3,
        repetitions=2,
        seconds=10,
        warmup_seconds=5,
        configs=[("off", False), ("off", True), ("aes-256", False), ("aes-256", True)],
    ),
    "full": dict(
        scale=50,
        clients=3,
        repetitions=2,
        seconds=30,
        warmup_seconds=10,
        configs=[
            ("off", False),
            ("off", True),
            ("aes-128", False),
            ("aes-128", True),
            ("aes-256", False),
            ("aes-256", True),
        ],
    ),
}


def _config(enc, checksums):
    name = f"{enc}{'+checksums' if checksums else ''}"
    if enc == peer.NAME:  # the open-source peer (bench/peer), its own binaries
        return Config(name, peer.NAME, None, checksums, peer=peer.NAME)
    return Config(name, "pgcipher", None if enc == "off" else enc, checksums)


def _encryption(cfg):
    return cfg.peer or cfg.encryption or "off"


def plan(profile, overrides=None):
    p = dict(PROFILES[profile])
    p.update(overrides or {})
    p["steps"] = len(p["configs"]) * p["repetitions"]
    p["est_seconds"] = p["steps"] * (p["seconds"] + 2) + len(p["configs"]) * (
        p["scale"] * 0.8 + p.get("warmup_seconds", 0)
    )
    return p


def run(run, p):
    settings = {"shared_buffers": "1MB", "max_connections": 20, "max_wal_size": "4GB", "autovacuum": "off"}
    cfgs = [_config(e, c) for e, c in p["configs"]]
    clusters = {}
    try:
        for cfg in cfgs:
            c = run.cluster(cfg, settings, NAME)
            c.initdb()
            c.start()
            clusters[cfg.name] = c
        common.pgbench_init(run, NAME, clusters, p["scale"])  # checks the peer's tables are encrypted
        for c in clusters.values():
            if p.get("warmup_seconds"):
                c.pgbench(
                    [
                        "-N",
                        "-n",
                        "-T",
                        str(p["warmup_seconds"]),
                        "-c",
                        str(p["clients"]),
                        "-j",
                        str(p["clients"]),
                    ]
                )
        for rep, _, cfg in interleaved(cfgs, p["repetitions"]):
            c = clusters[cfg.name]
            c.reset_stats()
            m, cmd, _ = c.pgbench(
                ["-N", "-n", "-T", str(p["seconds"]), "-c", str(p["clients"]), "-j", str(p["clients"])],
                timeout=p["seconds"] * 10 + 120,
            )
            run.command(cmd.replace(c.dir, "$CLUSTER"))
            hit = c.buffer_hit_ratio()
            for metric, value in m.items():
                run.record(
                    NAME,
                    cfg.name,
                    rep,
                    metric,
                    value,
                    encryption=_encryption(cfg),
                    checksums=cfg.checksums,
                )
            run.record(
                NAME,
                cfg.name,
                rep,
                "buffer_hit_ratio",
                hit,
                encryption=_encryption(cfg),
                checksums=cfg.checksums,
            )
            run.progress.step(
                f"{NAME} {cfg.name} round {rep}: {m['tps']:,.0f} tps, buffer hit ratio {hit:.1%}",
                p["est_seconds"] / p["steps"],
            )
    finally:
        common.stop_all(clusters)


def report(rows, p, out_dir):
    base = "off"
    md = [
        f"shared_buffers = 1MB, pgbench scale {p['scale']}, `-N`, {p['clients']} clients, "
        f"{p['repetitions']} interleaved rounds of {p['seconds']} s"
        + (
            f" after a {p['warmup_seconds']} s warm-up run per cluster"
            if p.get("warmup_seconds")
            else ", no warm-up run"
        )
        + "; medians; % of the baseline "
        "(no encryption, no checksums) with 95% bootstrap CI.\n",
        "Layout as in CYBERTEC's table: rows are the cipher, columns without / with data checksums.\n",
        "| encryption | no checksums TPS | % | data checksums TPS | % | buffer hit ratio |",
        "|---|---|---|---|---|---|",
    ]
    baseline = [r["value"] for r in rows if r["metric"] == "tps" and r["config"] == base]
    summaries = {}
    for enc in dict.fromkeys(e for e, _ in p["configs"]):
        cells = [enc]
        hits = []
        for checksums in (False, True):
            name = f"{enc}{'+checksums' if checksums else ''}"
            vals = [r["value"] for r in rows if r["metric"] == "tps" and r["config"] == name]
            hits += [r["value"] for r in rows if r["metric"] == "buffer_hit_ratio" and r["config"] == name]
            if not vals:
                cells += ["–", "–"]
                continue
            s = stats.summarize(vals, baseline)
            if name != base:
                summaries[((), name)] = s
            cells += [
                f"{s['median']:,.1f}",
                f"{s['ratio'] * 100:.2f} % ({s['ci_low'] * 100:.1f}–{s['ci_high'] * 100:.1f})",
            ]
        cells.append(f"{stats.median(hits):.1%}" if hits else "–")
        md.append("| " + " | ".join(cells) + " |")
    md.append(
        "\nCYBERTEC's published numbers (PGEE 17.6, scale 50, 3 clients, 1-minute runs; hit ratio 82.8 %):\n"
    )
    md.append("| TDE | no checksums TPS | % | data checksums TPS | % |\n|---|---|---|---|---|")
    b = VENDOR[("no TDE", False)]
    for k in ("no TDE", "128 bits", "192 bits", "256 bits"):
        a, c = VENDOR[(k, False)], VENDOR[(k, True)]
        md.append(f"| {k} | {a:,.1f} | {a / b * 100:.2f} % | {c:,.1f} | {c / b * 100:.2f} % |")
    md.append(
        "\nNo 192-bit row here: XTS is specified (IEEE 1619, NIST SP 800-38E) and implemented in "
        "OpenSSL for AES-128 and AES-256 only, and AES-192 offers nothing AES-256 does not."
    )
    if any(e == peer.NAME for e, _ in p["configs"]):
        md.append(
            f"\n{peer.NAME} (the open-source peer, its own binaries: see the report's opening) runs with data "
            "checksums only, as its documentation asks (without them it wants wal_log_hints = on, which "
            "the other configurations do not have); its % is of the same baseline as every row's: pgcipher's "
            "binaries with encryption off and no checksums."
        )
    if p["scale"] != 50:
        md.append(f"\nThis profile uses scale {p['scale']} instead of 50 to keep the run short.")
    pngs = []
    if plots.overhead_bars(
        summaries,
        os.path.join(out_dir, f"{NAME}-overhead.png"),
        "shared_buffers=1MB, pgbench -N: TPS vs baseline (95% CI)",
    ):
        pngs.append(f"{NAME}-overhead.png")
    return "\n".join(md), pngs
