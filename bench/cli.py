"""python -m bench run --profile quick|full [--scenario NAME ...]
python -m bench report RESULTS_DIR
python -m bench headline RESULTS_DIR"""

import argparse
import fcntl
import os
import secrets
import shutil
import sys
import traceback

from bench import headline, peer, sysinfo
from bench.cluster import Install
from bench.report import write_report
from bench.runner import Progress, Run, fmt, save_results, timestamp
from bench.scenarios import SCENARIOS

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("PGCIPHER_BUILD", os.path.join(TOP, "build"))

# --tiny: the smoke test's overrides, to prove every output is produced
TINY = {
    "cybertec-pgbench": dict(
        scales={"above": 1},
        clients=[1],
        repetitions=2,
        seconds=1,
        shared_buffers_mb=16,
        configs=["stock", "stock-2", "aes-256"],
        workloads=["select-only", "tpcb-like"],
        max_extra_rounds=2,
    ),
    "cybertec-1mb": dict(scale=1, repetitions=2, seconds=1, configs=[("off", False), ("aes-256", True)]),
    "online-rotation": dict(
        scale=1, clients=2, rounds=1, before_seconds=2, after_seconds=2, throttles=[(0, 10000)]
    ),
    "online-encryption": dict(
        scale=1, clients=2, rounds=1, before_seconds=2, after_seconds=2, throttles=[(0, 10000)]
    ),
    "tproc-c": dict(warehouses=1, ramp=[1], ramp_seconds=2, steady_seconds=2, steady_vus=1, repetitions=2),
    "wal-heavy": dict(
        size_mb=2,
        scale=1,
        clients=2,
        seconds=1,
        warmup_seconds=1,
        repetitions=2,
        shared_buffers_mb=16,
        max_wal_size="1GB",
        configs=["stock", "aes-256"],
        lock_clients=[8, 16],
        lock_seconds=1,
    ),
    "tde-worst-cases": dict(
        scale=1,
        clients=2,
        seconds=1,
        warmup_seconds=1,
        repetitions=2,
        shared_buffers_mb=16,
        max_wal_size="1GB",
        configs=["stock", "stock-2", "aes-256"],
    ),
    "micro": dict(seconds=0.05, repetitions=2),
    "columns-micro": dict(rows=2000, repetitions=1),
    "proxy": dict(
        scale=1,
        seconds=1,
        repetitions=2,
        rows=500,
        clients=2,
        warmup_seconds=1,
        idle_connections=5,
        probe_transactions=[10, 30],
        shared_buffers_mb=32,
    ),
    "proxy-orm": dict(rows=300, batch=20, seconds=1, repetitions=2, warmup_seconds=1),
    "pooler": dict(
        scale=1,
        clients=[2, 40],
        pool_size=4,
        max_connections=30,
        seconds=1,
        repetitions=1,
        warmup_seconds=1,
        idle_clients=200,
        workloads=["select-only", "enc-point"],
    ),
    "alibaba-sysbench": dict(
        rows=300,
        threads=[2],
        seconds=1,
        repetitions=1,
        warmup_seconds=0,
        shared_buffers_mb=32,
        placements=["free", "pinned"],
    ),
    "pg-upgrade": dict(scale=2, repetitions=2),
    "aio": dict(scale=1, scans=1, seconds=1, repetitions=2, io_methods=["sync", "worker-1", "io_uring"]),
    "citus": dict(
        scale=1,
        clients=2,
        seconds=1,
        copy_rows=10000,
        agg_queries=1,
        join_rows=2000,
        join_queries=1,
        repetitions=2,
        sysbench_rows=500,
        sysbench_threads=[1],
        sysbench_seconds=1,
    ),
    "instructions": dict(
        scale=1,
        seq_scans=1,
        select_queries=200,
        tpcb_transactions=50,
        copy_mb=1,
        insert_rows=5000,
        sort_rows=20000,
        shared_buffers_mb=32,
        repetitions=1,
    ),
}


def needed_installs(names):
    """The builds the scenarios need: a scenario's INSTALLS, by default both."""
    return {i for n in names for i in getattr(SCENARIOS[n], "INSTALLS", ("pgcipher", "stock"))}


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the benchmarks and write results and report")
    r.add_argument(
        "--profile",
        choices=["demo", "quick", "full"],
        default="quick",
        help="demo: the demo's few minutes, the scenarios that have that profile (default for it)",
    )
    r.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="repeatable; default: all")
    r.add_argument(
        "--out",
        help="results directory (default $PGCIPHER_BUILD/bench-results/<timestamp>: "
        "./pgcipher run as root benchmarks as the user pgcipher, who owns the build "
        "directory but not the checkout)",
    )
    r.add_argument("--pgcipher", default=os.path.join(BUILD, "install"), help="pgcipher install prefix")
    r.add_argument("--stock", default=os.path.join(BUILD, "stock", "install"), help="stock install prefix")
    r.add_argument(
        "--micro-bench",
        default=os.path.join(BUILD, "postgresql", "src", "test", "encryption", "bench_pagecrypt"),
    )
    r.add_argument(
        "--keys-tool",
        default=os.path.join(BUILD, "bin", "pgcipher-keys"),
        help="the client-side key tool (columns-micro)",
    )
    r.add_argument(
        "--proxy", default=os.path.join(BUILD, "bin", "pgcipher-proxy"), help="the wire proxy (proxy)"
    )
    r.add_argument(
        "--pgbouncer",
        default=shutil.which("pgbouncer") or "/usr/sbin/pgbouncer",
        help="PgBouncer, the reference hop (proxy)",
    )
    r.add_argument(
        "--open-pg-tde",
        default=os.path.join(BUILD, "open_pg_tde", "install"),
        help="the open-source peer's install prefix (bench/peer/build-open-pg-tde.sh); "
        f"where built, {', '.join(peer.SCENARIOS)} measure it too",
    )
    r.add_argument("--no-peer", action="store_true", help="leave open_pg_tde out even where it is built")
    r.add_argument("--workdir", default=os.path.join(BUILD, "bench-work"), help="where clusters are created")
    r.add_argument("--tiny", action="store_true", help="tiny sizes and durations (smoke test)")
    rp = sub.add_parser("report", help="write report.md and plots from a results directory")
    rp.add_argument("results_dir")
    hl = sub.add_parser("headline", help="the demo's closing lines: aes-256 / stock ratios, CIs and verdicts")
    hl.add_argument("results_dir", help="a results directory (or its results.json)")
    ns = sub.add_parser(
        "needs-stock",
        help="exit 0 if the scenarios selected by the same arguments "
        "as run need the stock build, 1 otherwise (scripts/bench.sh)",
    )
    ns.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    args, extra = ap.parse_known_args(argv)
    if extra and args.cmd != "needs-stock":
        ap.error(f"unrecognized arguments: {' '.join(extra)}")

    if args.cmd == "report":
        print(write_report(args.results_dir))
        return 0
    if args.cmd == "headline":
        print("\n".join(headline.headline(headline.load(args.results_dir))))
        return 0
    if args.cmd == "needs-stock":
        return 0 if "stock" in needed_installs(args.scenario or list(SCENARIOS)) else 1

    names = args.scenario or [
        n for n in SCENARIOS if args.profile != "demo" or "demo" in getattr(SCENARIOS[n], "PROFILES", {})
    ]
    missing = [
        n for n in names if args.profile not in getattr(SCENARIOS[n], "PROFILES", {args.profile: None})
    ]
    if missing:
        ap.error(f"no {args.profile} profile in scenario(s) {', '.join(missing)}")
    installs = {"pgcipher": Install("pgcipher", args.pgcipher)}
    if "stock" in needed_installs(names):
        installs["stock"] = Install("stock", args.stock)
    installs["pgcipher"].micro_bench = args.micro_bench
    installs["pgcipher"].keys_tool = args.keys_tool
    installs["pgcipher"].proxy = args.proxy
    installs["pgcipher"].pgbouncer = args.pgbouncer
    # the open-source peer beside stock and pgcipher, where it is built
    with_peer = [n for n in names if n in peer.SCENARIOS]
    if with_peer and not args.no_peer:
        built, why = peer.status(args.open_pg_tde, args.stock if "stock" in installs else None)
        if built:
            installs[peer.NAME] = Install(peer.NAME, args.open_pg_tde)
        else:
            print(f"bench: {', '.join(with_peer)} run without open_pg_tde: {why}", flush=True)
            with_peer = []
    else:
        with_peer = []
    params = {}
    for n in names:
        overrides = dict(TINY.get(n, {})) if args.tiny else {}
        if n in with_peer:
            configs = overrides.get("configs", SCENARIOS[n].PROFILES[args.profile]["configs"])
            overrides["configs"] = peer.with_peer(n, configs)
        params[n] = SCENARIOS[n].plan(args.profile, overrides or None)
    out = args.out or os.path.join(BUILD, "bench-results", timestamp().replace(":", ""))
    os.makedirs(out, exist_ok=True)
    # absolute: servers run in their own directory and find sockets there
    args.workdir = os.path.abspath(args.workdir)
    os.makedirs(args.workdir, exist_ok=True)
    # a run removes its working directory when it ends: a second run in the
    # same one would delete the first one's clusters under its servers
    lock = open(os.path.join(args.workdir, ".lock"), "w")  # held until the process ends
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(
            f"bench: another benchmark run is using {args.workdir}; wait for it to end or give this one --workdir DIR",
            file=sys.stderr,
        )
        return 2
    key_file = os.path.join(args.workdir, "kek")
    with open(key_file, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    os.chmod(key_file, 0o600)

    total = sum(p["steps"] for p in params.values())
    est = sum(p["est_seconds"] for p in params.values())
    extra = sum(p.get("est_extra_seconds", 0) for p in params.values())
    progress = Progress(total, est)
    # order: rounds alternate (bench/interleave.py); older results.json lack it
    meta = {
        "profile": args.profile + (" (tiny)" if args.tiny else ""),
        "started": timestamp(),
        "system": sysinfo.collect(installs),
        "scenarios": params,
        "order": "ABBA",
    }
    if peer.NAME in installs:
        meta["peer"] = peer.describe()
    progress.note(
        f"bench: {args.profile} profile, scenarios {', '.join(names)}, {total} measurements, "
        f"estimated {est / 60:.0f} min"
        + (f" (up to {fmt(extra)} more for extra rounds where a CI comes out too wide)" if extra else "")
        + f"; results in {out}"
    )
    run = Run(out, installs, args.profile, key_file, args.workdir, progress)
    failed = []
    try:
        for n in names:
            progress.note(f"== {n}: {SCENARIOS[n].TITLE}")
            try:
                SCENARIOS[n].run(run, params[n])
            except Exception:
                traceback.print_exc()
                failed.append(n)
                progress.note(f"{n} FAILED; continuing with the next scenario")
            save_results(out, meta, run.rows, run.commands, run.settings)
    finally:
        run.cleanup()
    meta["finished"] = timestamp()
    save_results(out, meta, run.rows, run.commands, run.settings)
    path = write_report(out)
    progress.note(f"report: {path}")
    if failed:
        print(f"bench: scenarios failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
