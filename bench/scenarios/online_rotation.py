"""online-rotation: pg_rotate_data_keys() on a running aes-256 cluster under
pgbench (design 9.6), beside the offline way, pg_upgrade --copy into a
cluster with new data keys (design 9.2).

One aes-256 cluster with data checksums, loaded with pgbench at the
profile's scale.  Each round, for each throttle (cost_delay ms, cost_limit)
in the profile's order, rotated each round (A B, B A, ...):

    before   pgbench -c CLIENTS -T BEFORE -P 1 (select and update, the default
             script): TPS of each second
    during   the same pgbench started, pg_rotate_data_keys(delay, limit)
             two seconds later, pg_stat_progress_encryption polled until
             the rotation is done (old key dropped), pgbench stopped: TPS of
             each second from the call to the end, failed transactions
             (pgbench's progress lines count them), the time to done, the
             conversion rate (bytes of every database / time to done) and the
             WAL written (pg_current_wal_lsn() before and after)
    after    as before

After the rounds the cluster is stopped and pg_upgrade --copy re-keys it
into a fresh aes-256 cluster (new data keys: every block decrypted and
encrypted again; design 9.2), timed: its rate on the same data, and its
downtime (pg_upgrade's time; starting the new cluster not counted).

The TPS ratio is during / before of the per-second samples of one round:
medians, with a 95% bootstrap CI over those seconds (they are correlated in
time, so the interval is narrower than a between-round one would be).  The
issue's goals (benchmarks, not tests): with the default throttle, TPS during
>= 0.85 of before, and no failed transaction; unthrottled, a rate at least
half of pg_upgrade --copy's."""

import os
import re
import shutil
import signal
import subprocess
import time

from bench import stats
from bench.cluster import Config
from bench.scenarios.pg_upgrade import pg_upgrade

NAME = "online-rotation"
TITLE = (
    "pg_rotate_data_keys() under pgbench: TPS before, during and after, rate, WAL; pg_upgrade --copy beside"
)
SEED = None
INSTALLS = ("pgcipher",)

CONFIG = Config("aes-256", "pgcipher", "aes-256")
DEFAULT_THROTTLE = (2, 200)  # the functions' defaults, VACUUM's
GOAL_TPS_RATIO = 0.85
GOAL_RATE_VS_UPGRADE = 0.5

PROFILES = {
    "quick": dict(
        scale=20,
        clients=4,
        rounds=1,
        before_seconds=10,
        after_seconds=10,
        throttles=[DEFAULT_THROTTLE, (0, 10000)],
    ),
    "full": dict(
        scale=100,
        clients=8,
        rounds=2,
        before_seconds=30,
        after_seconds=30,
        throttles=[DEFAULT_THROTTLE, (2, 1000), (0, 10000)],
    ),
}

SETTINGS = {
    "shared_buffers": "512MB",
    "max_wal_size": "8GB",
    "checkpoint_timeout": "30min",
    "max_connections": 40,
    "max_worker_processes": 16,
}

PROGRESS = re.compile(r"^progress: ([\d.]+) s, ([\d.]+) tps, lat [\d.]+ ms stddev [\d.]+, (\d+) failed", re.M)


def plan(profile, overrides=None):
    p = dict(PROFILES[profile])
    p.update(overrides or {})
    p["throttles"] = [tuple(t) for t in p["throttles"]]
    p["steps"] = p["rounds"] * len(p["throttles"]) + 1
    mb = p["scale"] * 15.6
    est_rotation = sum(mb / (40 if t == DEFAULT_THROTTLE else 120) + 10 for t in p["throttles"])
    p["est_seconds"] = (
        p["scale"] * 1.2
        + p["rounds"] * (len(p["throttles"]) * (p["before_seconds"] + p["after_seconds"] + 5) + est_rotation)
        + mb / 60
    )
    return p


def _pgbench_process(c, clients, seconds):
    cmd = [
        c.install.bin("pgbench"),
        *c.conninfo(),
        "-n",
        "-c",
        str(clients),
        "-j",
        str(min(clients, 4)),
        "-T",
        str(seconds),
        "-P",
        "1",
        "postgres",
    ]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True), cmd


def _samples(output):
    """(seconds since pgbench's start, tps, failed) of each progress line"""
    return [(float(t), float(tps), int(f)) for t, tps, f in PROGRESS.findall(output)]


def _lsn(c):
    return int(c.psql("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"))


def _measure(c, clients, seconds):
    """pgbench alone: (samples, command, WAL bytes per second)"""
    lsn0, t0 = _lsn(c), time.perf_counter()
    proc, cmd = _pgbench_process(c, clients, seconds)
    out, _ = proc.communicate(timeout=seconds * 5 + 120)
    if proc.returncode != 0:
        raise RuntimeError(f"{NAME}: pgbench failed:\n{out[-1500:]}")
    return _samples(out), cmd, (_lsn(c) - lsn0) / (time.perf_counter() - t0)


def _rotate(run, c, clients, delay, limit, budget_s):
    """pgbench running, one rotation; (samples during, seconds to done, WAL bytes)"""
    proc, cmd = _pgbench_process(c, clients, int(budget_s))
    time.sleep(2)
    lsn0 = _lsn(c)
    t_call = time.perf_counter()
    started = time.monotonic()
    said = c.psql(f"SELECT pg_rotate_data_keys({delay}, {limit})")
    last = 0.0
    while True:
        phase = c.psql("SELECT phase || ' ' || blocks_rewritten FROM pg_stat_progress_encryption")
        if phase.startswith("idle"):
            break
        if time.monotonic() - last > 15:
            run.progress.note(f"{NAME}: ({delay} ms, {limit}) {phase} blocks rewritten")
            last = time.monotonic()
        if time.monotonic() - started > budget_s - 5:
            proc.kill()
            raise RuntimeError(
                f"{NAME}: the rotation ({delay}, {limit}) did not finish in {budget_s:.0f} s: {phase}"
            )
        time.sleep(0.5)
    done_s = time.perf_counter() - t_call
    wal = _lsn(c) - lsn0
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    # the seconds from the call on (pgbench started 2 s before it)
    samples = [s for s in _samples(out) if s[0] > 2.0]
    run.command(
        " ".join(cmd).replace(c.dir, "$CLUSTER") + f"  # and SELECT pg_rotate_data_keys({delay}, {limit})"
    )
    return samples, done_s, wal, said


def run(run, p):
    c = run.cluster(CONFIG, SETTINGS, NAME)
    try:
        c.initdb()
        c.start()
        _, cmd, _ = c.pgbench(["-i", "-q", "-s", str(p["scale"])], timeout=7200)
        run.command(cmd.replace(c.dir, "$CLUSTER"))
        c.psql("VACUUM ANALYZE")
        c.psql("CHECKPOINT")
        size = int(c.psql("SELECT sum(pg_database_size(oid)) FROM pg_database"))
        p["bytes"] = size
        run.progress.note(f"{NAME}: scale {p['scale']}, {size / 2**20:,.0f} MiB in every database")
        order = list(p["throttles"])
        for rep in range(1, p["rounds"] + 1):
            for delay, limit in order if rep % 2 else list(reversed(order)):
                point = dict(cost_delay=delay, cost_limit=limit)
                # the last rotation's WAL key is dropped once crash recovery
                # starts after its switch: checkpoint here, not inside the
                # next rotation's call (which would checkpoint by itself)
                c.psql("CHECKPOINT")
                before, _, wal_rate = _measure(c, p["clients"], p["before_seconds"])
                budget = 60 + size / 2**20 / (5 if delay else 20) * 2
                during, done_s, wal, said = _rotate(run, c, p["clients"], delay, limit, budget)
                after, cmd, _ = _measure(c, p["clients"], p["after_seconds"])
                run.command(" ".join(cmd).replace(c.dir, "$CLUSTER"))
                for phase, samples in (("before", before), ("during", during), ("after", after)):
                    for t, tps, _ in samples:
                        run.record(NAME, CONFIG.name, rep, f"tps_{phase}", tps, second=t, **point)
                failed = sum(f for *_, f in before + during + after)
                run.record(NAME, CONFIG.name, rep, "failed", failed, **point)
                run.record(NAME, CONFIG.name, rep, "done_s", done_s, **point)
                run.record(NAME, CONFIG.name, rep, "rate_mb_s", size / 2**20 / done_s, **point)
                run.record(NAME, CONFIG.name, rep, "wal_mb", wal / 2**20, **point)
                # what pgbench alone writes in that time, at its rate before
                run.record(NAME, CONFIG.name, rep, "wal_pgbench_mb", wal_rate * done_s / 2**20, **point)
                ratio = stats.median([s[1] for s in during]) / stats.median([s[1] for s in before])
                run.progress.step(
                    f"{NAME} round {rep} ({delay} ms, {limit}): {said}, done in {done_s:.1f} s "
                    f"({size / 2**20 / done_s:,.1f} MiB/s), TPS during/before {ratio:.3f}, "
                    f"WAL {wal / 2**20:,.0f} MiB, {failed} failed",
                    p["est_seconds"] / p["steps"],
                )
        # the offline way on the same data: pg_upgrade --copy into new data keys
        c.stop()
        new = run.cluster(Config("aes-256-rekeyed", "pgcipher", "aes-256"), SETTINGS, NAME)
        new.initdb()
        scratch = os.path.join(c.dir, "..", "upgrade-scratch")
        m = pg_upgrade(
            run,
            c.install,
            c.install.bindir,
            c.data,
            new.data,
            "copy",
            os.path.abspath(scratch),
            1,
            {c.data: "$OLD", new.data: "$NEW", c.install.bindir: "$BINDIR"},
        )
        run.record(NAME, "pg_upgrade --copy", 1, "done_s", m["elapsed_s"])
        run.record(NAME, "pg_upgrade --copy", 1, "rate_mb_s", size / 2**20 / m["elapsed_s"])
        run.progress.step(
            f"{NAME}: pg_upgrade --copy re-keyed {size / 2**20:,.0f} MiB in {m['elapsed_s']:.1f} s "
            f"({size / 2**20 / m['elapsed_s']:,.1f} MiB/s) of downtime",
            p["est_seconds"] / p["steps"],
        )
        shutil.rmtree(new.dir, ignore_errors=True)
    finally:
        c.destroy()


def _median_or_dash(values):
    return f"{stats.median(values):,.0f}" if values else "–"


def _values(rows, metric, **point):
    return [
        r["value"] for r in rows if r["metric"] == metric and all(r.get(k) == v for k, v in point.items())
    ]


def report_table(rows, p, intro, done_at):
    """The table and the verdicts against the goals, shared with online-encryption:
    (markdown lines, verdict lines)"""
    md = [
        f"{intro}, pgbench scale {p['scale']} "
        f"({p.get('bytes', 0) / 2**20:,.0f} MiB in every database), `pgbench -c {p['clients']}` "
        f"(the default select-and-update script) throughout; {p['rounds']} round(s), the throttles' order "
        "reversed every other round.  TPS: medians of pgbench's per-second progress; the ratio during / "
        "before with a 95% bootstrap CI over those seconds (correlated in time: narrower than a "
        f"between-round interval).  Rate: bytes of every database / seconds from the call to {done_at}.\n",
        "| cost_delay ms | cost_limit | round | TPS before | during | after | during / before (95% CI) "
        "| failed | time to done s | rate MiB/s | WAL MiB | of which pgbench's (its rate before) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    best_rate = 0.0
    for delay, limit in p["throttles"]:
        for rep in range(1, p["rounds"] + 1):
            point = dict(cost_delay=delay, cost_limit=limit, rep=rep)
            before = _values(rows, "tps_before", **point)
            during = _values(rows, "tps_during", **point)
            after = _values(rows, "tps_after", **point)
            if not (before and during):
                continue
            s = stats.summarize(during, before)
            failed = sum(_values(rows, "failed", **point))
            rate = stats.median(_values(rows, "rate_mb_s", **point))
            best_rate = max(best_rate, rate) if (delay, limit) != DEFAULT_THROTTLE else best_rate
            md.append(
                f"| {delay} | {limit} | {rep} | {stats.median(before):,.0f} | {stats.median(during):,.0f} "
                f"| {stats.median(after):,.0f} | {s['ratio']:.3f} ({s['ci_low']:.3f}–{s['ci_high']:.3f}) "
                f"| {failed} | {stats.median(_values(rows, 'done_s', **point)):.1f} | {rate:,.1f} "
                f"| {stats.median(_values(rows, 'wal_mb', **point)):,.0f} "
                f"| {_median_or_dash(_values(rows, 'wal_pgbench_mb', **point))} |"
            )
            if (delay, limit) == DEFAULT_THROTTLE:
                verdicts.append(
                    f"- default throttle, round {rep}: TPS during / before {s['ratio']:.3f} "
                    f"(CI {s['ci_low']:.3f}–{s['ci_high']:.3f}) against the goal ≥ {GOAL_TPS_RATIO}: "
                    + (
                        "met"
                        if s["ci_low"] >= GOAL_TPS_RATIO
                        else "met by the median only"
                        if s["ratio"] >= GOAL_TPS_RATIO
                        else "not met"
                    )
                    + f"; {failed} failed transaction(s) (goal 0)"
                )
    up = _values(rows, "rate_mb_s", config="pg_upgrade --copy")
    if up:
        md.append(
            f"\npg_upgrade --copy, the cluster stopped: "
            f"{stats.median(_values(rows, 'done_s', config='pg_upgrade --copy')):.1f} s of downtime, "
            f"{stats.median(up):,.1f} MiB/s."
        )
        if best_rate:
            verdicts.append(
                f"- unthrottled rate {best_rate:,.1f} MiB/s = {best_rate / stats.median(up):.2f} of pg_upgrade "
                f"--copy's (goal ≥ {GOAL_RATE_VS_UPGRADE}): "
                + ("met" if best_rate / stats.median(up) >= GOAL_RATE_VS_UPGRADE else "not met")
            )
    return md, verdicts


def report(rows, p, out_dir):
    md, verdicts = report_table(rows, p, "One aes-256 cluster with data checksums", "the old key's removal")
    md.append("\nAgainst the goals of issue 42 (benchmarks, not tests):\n")
    md += verdicts
    md.append(
        "\nThe rotation rewrites every block through shared buffers with a full-page image in the WAL "
        "(so standbys and restores follow): the WAL it adds is about the data's size; the WAL column is "
        "everything written from the call to done, pgbench's TPC-B-like updates (with their own full-page "
        "images after each checkpoint) included, estimated in the next column at pgbench's rate before.  "
        "pg_upgrade --copy writes no WAL, but the cluster is down while it runs."
    )
    return "\n".join(md), []
