"""online-encryption: pg_enable_encryption() on a running cluster that was
not encrypted, under pgbench (design 9.7), beside the offline ways on the
same data: pg_upgrade --copy into an encrypted cluster and a dump/restore
into one (design 9.2).

One cluster initdb made without encryption, with data checksums, loaded
with pgbench at the profile's scale and stopped: the template.  Each round,
for each throttle (cost_delay ms, cost_limit) in the profile's order,
reversed every other round, a copy of the template is started and:

    before   pgbench -c CLIENTS -T BEFORE -P 1 (select and update, the default
             script): TPS of each second
    during   the same pgbench started, pg_enable_encryption('aes-256', ...,
             delay, limit) two seconds later, polled until SHOW
             data_encryption says aes-256 (every block encrypted), pgbench
             stopped: TPS of each second from the call to the end, failed
             transactions, the time to done, the conversion rate (bytes of
             every database / time to done) and the WAL written
    after    as before, now encrypted

Then the offline ways, each from the template: pg_upgrade --copy into a
fresh aes-256 cluster (every block read and encrypted; the cluster is down
while it runs), and pg_dump -Fc piped into pg_restore on a fresh aes-256
cluster (writes must stop for the dump to be the cluster's state): their
time is downtime, their rate the same bytes over it.

The TPS ratio is during / before of one round's per-second samples:
medians with a 95% bootstrap CI over those seconds.  The issue's goals
(benchmarks, not tests): with the default throttle, TPS during >= 0.85 of
before and no failed transaction; unthrottled, a rate at least half of
pg_upgrade --copy's."""

import os
import shutil
import subprocess
import time

from bench import stats
from bench.cluster import Config
from bench.scenarios import online_rotation as rotation
from bench.scenarios.pg_upgrade import pg_upgrade

NAME = "online-encryption"
TITLE = (
    "pg_enable_encryption() under pgbench: TPS before, during and after, rate, WAL; "
    "pg_upgrade --copy and dump/restore beside"
)
SEED = None
INSTALLS = ("pgcipher",)

TEMPLATE = Config("plain-template", "pgcipher")
DEFAULT_THROTTLE = rotation.DEFAULT_THROTTLE
GOAL_TPS_RATIO = rotation.GOAL_TPS_RATIO
GOAL_RATE_VS_UPGRADE = rotation.GOAL_RATE_VS_UPGRADE
CIPHER = "aes-256"

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

SETTINGS = rotation.SETTINGS


def plan(profile, overrides=None):
    p = dict(PROFILES[profile])
    p.update(overrides or {})
    p["throttles"] = [tuple(t) for t in p["throttles"]]
    p["steps"] = p["rounds"] * len(p["throttles"]) + 3
    mb = p["scale"] * 15.6
    est_enable = sum(mb / (40 if t == DEFAULT_THROTTLE else 120) + 10 + mb / 100 for t in p["throttles"])
    p["est_seconds"] = (
        p["scale"] * 1.2
        + p["rounds"] * (len(p["throttles"]) * (p["before_seconds"] + p["after_seconds"] + 5) + est_enable)
        + mb / 60
        + mb / 10
    )
    return p


def _copy_of(run, template, name):
    """A cluster whose data directory is a copy of the stopped template's"""
    c = run.cluster(Config(name, "pgcipher"), SETTINGS, NAME)
    shutil.rmtree(c.dir, ignore_errors=True)
    os.makedirs(c.dir)
    shutil.copytree(template.data, c.data, symlinks=True)
    return c


def _enable(run, c, clients, delay, limit, budget_s):
    """pgbench running, one encryption; (samples during, seconds to done, WAL bytes, what it said)"""
    proc, cmd = rotation._pgbench_process(c, clients, int(budget_s))
    time.sleep(2)
    lsn0 = rotation._lsn(c)
    t_call = time.perf_counter()
    started = time.monotonic()
    said = c.psql(f"SELECT pg_enable_encryption('{CIPHER}', 'cat {c.key_file}', {delay}, {limit})")
    last = 0.0
    while True:
        if c.psql("SHOW data_encryption") == CIPHER:
            break
        phase = c.psql("SELECT phase || ' ' || blocks_rewritten FROM pg_stat_progress_encryption")
        if time.monotonic() - last > 15:
            run.progress.note(f"{NAME}: ({delay} ms, {limit}) {phase} blocks encrypted")
            last = time.monotonic()
        if time.monotonic() - started > budget_s - 5:
            proc.kill()
            raise RuntimeError(
                f"{NAME}: the encryption ({delay}, {limit}) did not finish in {budget_s:.0f} s: {phase}"
            )
        time.sleep(0.5)
    done_s = time.perf_counter() - t_call
    wal = rotation._lsn(c) - lsn0
    proc.send_signal(2)  # SIGINT: pgbench prints its summary
    out, _ = proc.communicate(timeout=60)
    samples = [s for s in rotation._samples(out) if s[0] > 2.0]
    run.command(
        " ".join(cmd).replace(c.dir, "$CLUSTER")
        + f"  # and SELECT pg_enable_encryption('{CIPHER}', 'cat $KEY', {delay}, {limit})"
    )
    return samples, done_s, wal, said


def _dump_restore(run, template, size):
    """pg_dump -Fc of the template piped into pg_restore on a new aes-256 cluster: seconds"""
    new = run.cluster(Config("aes-256-restored", "pgcipher", CIPHER), SETTINGS, NAME)
    new.initdb()
    new.start()
    template.start()
    dump = [template.install.bin("pg_dump"), *template.conninfo(), "-Fc", "postgres"]
    restore = [new.install.bin("pg_restore"), *new.conninfo(), "-d", "postgres", "--no-owner"]
    t0 = time.perf_counter()
    d = subprocess.Popen(dump, stdout=subprocess.PIPE)
    r = subprocess.run(restore, stdin=d.stdout, capture_output=True, text=True, timeout=6 * 3600)
    d.stdout.close()
    d.wait()
    new.psql("CHECKPOINT")
    elapsed = time.perf_counter() - t0
    if d.returncode != 0 or r.returncode != 0:
        raise RuntimeError(f"{NAME}: dump/restore failed: {r.stderr[-1500:]}")
    run.command(
        " ".join(dump).replace(template.dir, "$OLD") + " | " + " ".join(restore).replace(new.dir, "$NEW")
    )
    template.stop()
    new.destroy()
    return elapsed


def run(run, p):
    template = run.cluster(TEMPLATE, SETTINGS, NAME)
    try:
        template.initdb()
        template.start()
        _, cmd, _ = template.pgbench(["-i", "-q", "-s", str(p["scale"])], timeout=7200)
        run.command(cmd.replace(template.dir, "$CLUSTER"))
        template.psql("VACUUM ANALYZE")
        template.psql("CHECKPOINT")
        size = int(template.psql("SELECT sum(pg_database_size(oid)) FROM pg_database"))
        p["bytes"] = size
        template.stop()
        run.progress.note(f"{NAME}: scale {p['scale']}, {size / 2**20:,.0f} MiB in every database")
        order = list(p["throttles"])
        n = 0
        for rep in range(1, p["rounds"] + 1):
            for delay, limit in order if rep % 2 else list(reversed(order)):
                n += 1
                point = dict(cost_delay=delay, cost_limit=limit)
                c = _copy_of(run, template, f"enable-{n}")
                try:
                    c.start()
                    c.psql("CHECKPOINT")
                    before, _, wal_rate = rotation._measure(c, p["clients"], p["before_seconds"])
                    budget = 60 + size / 2**20 / (5 if delay else 20) * 2
                    during, done_s, wal, said = _enable(run, c, p["clients"], delay, limit, budget)
                    after, cmd, _ = rotation._measure(c, p["clients"], p["after_seconds"])
                    run.command(" ".join(cmd).replace(c.dir, "$CLUSTER"))
                finally:
                    c.destroy()
                for phase, samples in (("before", before), ("during", during), ("after", after)):
                    for t, tps, _ in samples:
                        run.record(NAME, CIPHER, rep, f"tps_{phase}", tps, second=t, **point)
                failed = sum(f for *_, f in before + during + after)
                run.record(NAME, CIPHER, rep, "failed", failed, **point)
                run.record(NAME, CIPHER, rep, "done_s", done_s, **point)
                run.record(NAME, CIPHER, rep, "rate_mb_s", size / 2**20 / done_s, **point)
                run.record(NAME, CIPHER, rep, "wal_mb", wal / 2**20, **point)
                run.record(NAME, CIPHER, rep, "wal_pgbench_mb", wal_rate * done_s / 2**20, **point)
                ratio = stats.median([s[1] for s in during]) / stats.median([s[1] for s in before])
                run.progress.step(
                    f"{NAME} round {rep} ({delay} ms, {limit}): {said}, done in {done_s:.1f} s "
                    f"({size / 2**20 / done_s:,.1f} MiB/s), TPS during/before {ratio:.3f}, "
                    f"WAL {wal / 2**20:,.0f} MiB, {failed} failed",
                    p["est_seconds"] / p["steps"],
                )
        # unthrottled with no client: the rate to compare with the offline
        # ways, which have the machine to themselves
        c = _copy_of(run, template, "enable-idle")
        try:
            c.start()
            c.psql("CHECKPOINT")
            lsn0, t0 = rotation._lsn(c), time.perf_counter()
            c.psql(f"SELECT pg_enable_encryption('{CIPHER}', 'cat {c.key_file}', 0, 10000)")
            while c.psql("SHOW data_encryption") != CIPHER:
                time.sleep(0.2)
            idle_s = time.perf_counter() - t0
            idle_wal = rotation._lsn(c) - lsn0
        finally:
            c.destroy()
        run.record(NAME, "idle", 1, "done_s", idle_s, cost_delay=0, cost_limit=10000)
        run.record(NAME, "idle", 1, "rate_mb_s", size / 2**20 / idle_s, cost_delay=0, cost_limit=10000)
        run.record(NAME, "idle", 1, "wal_mb", idle_wal / 2**20, cost_delay=0, cost_limit=10000)
        run.progress.step(
            f"{NAME}: unthrottled with no client: done in {idle_s:.1f} s ({size / 2**20 / idle_s:,.1f} MiB/s), "
            f"WAL {idle_wal / 2**20:,.0f} MiB",
            p["est_seconds"] / p["steps"],
        )
        # the offline ways on the same data
        new = run.cluster(Config("aes-256-upgraded", "pgcipher", CIPHER), SETTINGS, NAME)
        new.initdb()
        scratch = os.path.join(template.dir, "..", "upgrade-scratch")
        m = pg_upgrade(
            run,
            template.install,
            template.install.bindir,
            template.data,
            new.data,
            "copy",
            os.path.abspath(scratch),
            1,
            {template.data: "$OLD", new.data: "$NEW", template.install.bindir: "$BINDIR"},
        )
        shutil.rmtree(new.dir, ignore_errors=True)
        run.record(NAME, "pg_upgrade --copy", 1, "done_s", m["elapsed_s"])
        run.record(NAME, "pg_upgrade --copy", 1, "rate_mb_s", size / 2**20 / m["elapsed_s"])
        run.progress.step(
            f"{NAME}: pg_upgrade --copy encrypted {size / 2**20:,.0f} MiB in {m['elapsed_s']:.1f} s "
            f"({size / 2**20 / m['elapsed_s']:,.1f} MiB/s) of downtime",
            p["est_seconds"] / p["steps"],
        )
        elapsed = _dump_restore(run, template, size)
        run.record(NAME, "dump/restore", 1, "done_s", elapsed)
        run.record(NAME, "dump/restore", 1, "rate_mb_s", size / 2**20 / elapsed)
        run.progress.step(
            f"{NAME}: pg_dump | pg_restore into aes-256 took {elapsed:.1f} s "
            f"({size / 2**20 / elapsed:,.1f} MiB/s) with writes stopped",
            p["est_seconds"] / p["steps"],
        )
    finally:
        template.destroy()


def report(rows, p, out_dir):
    md, verdicts = rotation.report_table(
        rows,
        p,
        "A copy of one cluster initdb made without encryption, with data checksums, for each run",
        "SHOW data_encryption saying aes-256",
    )
    idle = rotation._values(rows, "rate_mb_s", config="idle")
    up = rotation._values(rows, "rate_mb_s", config="pg_upgrade --copy")
    if idle:
        md.append(
            f"\nUnthrottled with no client (the machine to itself, as the offline ways have it): "
            f"{stats.median(rotation._values(rows, 'done_s', config='idle')):.1f} s, "
            f"{stats.median(idle):,.1f} MiB/s, WAL {stats.median(rotation._values(rows, 'wal_mb', config='idle')):,.0f} MiB."
        )
        if up:
            verdicts.append(
                f"- unthrottled with no client: {stats.median(idle):,.1f} MiB/s = "
                f"{stats.median(idle) / stats.median(up):.2f} of pg_upgrade --copy's (goal ≥ {GOAL_RATE_VS_UPGRADE}): "
                + ("met" if stats.median(idle) / stats.median(up) >= GOAL_RATE_VS_UPGRADE else "not met")
            )
    rate = rotation._values(rows, "rate_mb_s", config="dump/restore")
    if rate:
        md.append(
            f"\npg_dump -Fc | pg_restore of the database pgbench filled into an aes-256 cluster, writes stopped: "
            f"{stats.median(rotation._values(rows, 'done_s', config='dump/restore')):.1f} s of downtime, "
            f"{stats.median(rate):,.1f} MiB/s."
        )
    md.append("\nAgainst the goals of issue 42 (benchmarks, not tests):\n")
    md += verdicts
    md.append(
        "\nThe encryption rewrites every block through shared buffers with a full-page image in the WAL, "
        "as the rotation does (so standbys and restores follow); the WAL column is everything written from "
        "the call to done, pgbench's included, estimated in the next column at its rate before.  "
        "pg_upgrade --copy and dump/restore write no WAL here, but the cluster is down, or closed to "
        "writes, while they run."
    )
    return "\n".join(md), []
