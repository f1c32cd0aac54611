"""pg-upgrade: plan, ABBA order, CPU of waited-for children (and not of
orphans), pg_upgrade's failure messages, report on synthetic rows (no server
needed); and, when BENCH_SMOKE=1, the scenario for real at scale 2 (needs
both builds and Debian's PostgreSQL 15; BENCH_STOCK=PREFIX points at a stock
build elsewhere than build/stock/install)."""

import json
import os
import resource
import stat
import subprocess
import sys
import tempfile

import pytest

from bench import cli
from bench.report import write_report
from bench.runner import save_results
from bench.scenarios import SCENARIOS, pg_upgrade
from bench.tests.test_smoke import _processes_mentioning

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
DATA = os.path.join(os.path.dirname(__file__), "data", "tiny-results.json")
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMOKE = pytest.mark.skipif(
    os.environ.get("BENCH_SMOKE") != "1", reason="set BENCH_SMOKE=1 (needs both builds and PostgreSQL 15)"
)

# encrypted / stock per (mode, metric) in the synthetic rows
FACTORS = {
    ("copy", "elapsed_s"): 1.01,
    ("copy", "cpu_s"): 1.25,
    ("link", "elapsed_s"): 1.0,
    ("link", "cpu_s"): 1.0,
}


def synthetic_rows(configs=("stock", "aes-256"), reps=4, factors=FACTORS, link=True):
    rows = [
        {
            "scenario": "pg-upgrade",
            "config": "old",
            "rep": 0,
            "metric": "old_mb",
            "value": 5600.0,
            "mode": "setup",
            "detail": "PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu",
        }
    ]

    def rec(cfg, rep, metric, value, mode, **kw):
        rows.append(
            dict(scenario="pg-upgrade", config=cfg, rep=rep, metric=metric, value=value, mode=mode, **kw)
        )

    for rep, cfg in pg_upgrade.abba(list(configs), reps):
        noise = 1 + 0.003 * (rep - 2)
        for mode in ("copy", "link") if link else ("copy",):
            secs = (60.0 if mode == "copy" else 3.0) * noise
            cpu = (30.0 if mode == "copy" else 0.8) * noise
            if cfg != "stock":
                secs *= factors[(mode, "elapsed_s")]
                cpu *= factors[(mode, "cpu_s")]
            detail = (
                {
                    "detail": "none; data_checksums=on"
                    if cfg == "stock"
                    else "data_encryption=aes-256; data_checksums=on"
                }
                if mode == "copy"
                else {}
            )
            rec(cfg, rep, "elapsed_s", secs, mode, **detail)
            rec(cfg, rep, "cpu_s", cpu, mode)
            rec(cfg, rep, "user_s", cpu * 0.7, mode)
            rec(cfg, rep, "sys_s", cpu * 0.3, mode)
            rec(cfg, rep, "maxrss_mb", 60.0, mode)
            rec(cfg, rep, "base_mb", 5500.0, mode)
            if mode == "copy":
                rec(cfg, rep, "mb_per_s", 5500.0 / secs, mode)
                rec(cfg, rep, "pages_rewritten", 0 if cfg == "stock" else 1, mode)
            else:
                rec(cfg, rep, "files_linked", 1, mode)
    return rows


def test_registered_needs_both_builds_and_tiny():
    assert SCENARIOS["pg-upgrade"] is pg_upgrade
    assert "pg-upgrade" in cli.TINY
    assert cli.needed_installs(["pg-upgrade"]) == {"pgcipher", "stock"}
    assert pg_upgrade.SEED == "edb-tde-epas15"


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_plan(profile):
    p = pg_upgrade.plan(profile)
    assert p["configs"] == ["stock", "aes-256"] and p["link"]
    assert p["steps"] == 2 * p["repetitions"] * 2
    assert p["repetitions"] % 2 == 0  # whole ABBA pairs
    assert p["old_prefix"] == "/usr/lib/postgresql/15"
    assert p["est_seconds"] > p["steps"]
    if profile == "full":
        assert p["scale"] == 350 and p["old_mb_estimate"] >= 5 * 1024 and p["repetitions"] >= 6
    else:
        assert p["scale"] <= 50 and p["est_seconds"] < 6 * 60


def test_tiny_plan_is_tiny():
    p = pg_upgrade.plan("quick", cli.TINY["pg-upgrade"])
    assert p["scale"] <= 2 and p["repetitions"] == 2


def test_abba_order():
    order = [(rep, c) for rep, c in pg_upgrade.abba(["A", "B"], 4)]
    assert [c for _, c in order] == list("ABBAABBA")
    assert [rep for rep, _ in order] == [1, 1, 2, 2, 3, 3, 4, 4]
    assert [c for _, c in pg_upgrade.abba(["A"], 3)] == ["A", "A", "A"]


def _burn(seconds):
    return [
        sys.executable,
        "-c",
        f"import time\nt = time.process_time()\nwhile time.process_time() - t < {seconds}: pass",
    ]


def test_timed_run_counts_waited_children_not_orphans(tmp_path):
    """pg_upgrade's CPU: its own and that of the children it waited for
    (system()), not that of the servers pg_ctl leaves running (orphans)."""
    waited = " ".join(f"'{a}'" for a in _burn(0.3))
    orphan = " ".join(f"'{a}'" for a in _burn(0.6))
    script = f"{waited}; ({orphan} & ); exit 0"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    rc, m = pg_upgrade.timed_run(["sh", "-c", script], str(tmp_path), str(tmp_path / "log"), timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert rc == 0
    assert 0.28 <= m["cpu_s"] < 0.55, m
    assert m["cpu_s"] == pytest.approx(m["user_s"] + m["sys_s"])
    assert m["elapsed_s"] >= 0.28 and m["maxrss_mb"] > 0
    delta = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert delta == pytest.approx(m["cpu_s"], abs=0.02)  # what RUSAGE_CHILDREN says too


def test_timed_run_kills_at_timeout(tmp_path):
    rc, m = pg_upgrade.timed_run(["sleep", "30"], str(tmp_path), str(tmp_path / "log"), timeout=0.3)
    assert rc < 0 and m["elapsed_s"] < 10


def test_dir_bytes(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "1").write_bytes(bytes(8192))
    (tmp_path / "2").write_bytes(bytes(100))
    os.link(tmp_path / "2", tmp_path / "a" / "3")
    assert pg_upgrade.dir_bytes(str(tmp_path)) == 8192 + 200


class _FakeInstall:
    def __init__(self, bindir):
        self.name, self.bindir = "pgcipher", bindir

    def bin(self, program):
        return os.path.join(self.bindir, program)


class _FakeRun:
    def __init__(self):
        self.commands = []

    def command(self, cmd):
        self.commands.append(cmd)


def _fake_pg_upgrade(tmp_path, body):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "pg_upgrade"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return _FakeInstall(str(bindir))


def test_command_shown_with_names_and_no_ports(tmp_path):
    inst = _fake_pg_upgrade(tmp_path, "exit 0\n")
    run = _FakeRun()
    new = str(tmp_path / "new" / "data")
    m = pg_upgrade.pg_upgrade(
        run,
        inst,
        "/old/bin",
        "/w/old-pg15/data",
        new,
        "copy",
        str(tmp_path / "scratch"),
        1,
        {"/w/old-pg15/data": "$OLD", new: "$NEW", str(tmp_path / "bin"): "$PGCIPHER/bin"},
    )
    assert m["elapsed_s"] > 0
    assert run.commands == [
        "cd $SCRATCH && $PGCIPHER/bin/pg_upgrade -b /old/bin -B $PGCIPHER/bin -d $OLD -D $NEW "
        "-U postgres -s $SCRATCH -p $PORT -P $PORT -j 1 --copy"
    ]
    assert not os.path.exists(tmp_path / "scratch"), "scratch directory left behind"


def test_not_yet_is_said_clearly(tmp_path):
    inst = _fake_pg_upgrade(
        tmp_path,
        "echo 'Checking cluster versions   ok'\n"
        f"echo 'pg_upgrade {pg_upgrade.NOT_YET}: it copies data files as they are'\n"
        "exit 1\n",
    )
    with pytest.raises(RuntimeError, match="cannot write encrypted clusters yet .*rebuild pgcipher"):
        pg_upgrade.pg_upgrade(
            _FakeRun(),
            inst,
            "/old/bin",
            "/old",
            str(tmp_path / "new"),
            "copy",
            str(tmp_path / "scratch"),
            1,
            {},
        )


def test_other_failures_carry_pg_upgrade_logs(tmp_path):
    new = tmp_path / "new"
    logs = new / "pg_upgrade_output.d" / "20261123T000000.000" / "log"
    logs.mkdir(parents=True)
    (logs / "pg_upgrade_server.log").write_text("FATAL:  database files are incompatible with server\n")
    inst = _fake_pg_upgrade(tmp_path, "echo 'Failure, exiting'; exit 1\n")
    with pytest.raises(RuntimeError) as e:
        pg_upgrade.pg_upgrade(
            _FakeRun(), inst, "/old/bin", "/old", str(new), "link", str(tmp_path / "s"), 1, {}
        )
    text = str(e.value)
    assert "pg_upgrade --link" in text and "exit 1" in text and "Failure, exiting" in text
    assert "pg_upgrade_server.log" in text and "incompatible with server" in text


def test_verdict_and_noise():
    s = lambda r, lo, hi: {"ratio": r, "ci_low": lo, "ci_high": hi}  # noqa: E731
    assert pg_upgrade.verdict(s(1.01, 0.99, 1.02), 1.03) == "met"
    assert pg_upgrade.verdict(s(1.02, 1.00, 1.05), 1.03).startswith("met by the median")
    assert pg_upgrade.verdict(s(1.04, 1.02, 1.06), 1.03).startswith("not met by the median")
    assert pg_upgrade.verdict(s(1.25, 1.20, 1.30), 1.10) == "not met"
    assert pg_upgrade.verdict(None, 1.03) == "–"
    assert pg_upgrade.noise(s(1.01, 0.99, 1.02)) == "yes"
    assert pg_upgrade.noise(s(1.04, 1.02, 1.06)) == "no"
    assert pg_upgrade.noise(s(float("nan"), float("nan"), float("nan"))) == "–"


def test_summaries_are_time_ratios():
    sums = pg_upgrade.summaries(synthetic_rows(), ["stock", "aes-256"])
    assert set(sums) == {(m, k, "aes-256") for m, k in FACTORS}
    for (mode, metric), f in FACTORS.items():
        s = sums[(mode, metric, "aes-256")]
        assert s["ratio"] == pytest.approx(f, rel=1e-9)
        assert s["ci_low"] <= s["ratio"] <= s["ci_high"] and s["n"] == 4


def test_report_on_synthetic_rows(tmp_path):
    p = pg_upgrade.plan("full")
    text, pngs = pg_upgrade.report(synthetic_rows(), p, str(tmp_path))
    lines = {
        line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| `--")
    }
    copy_elapsed, copy_cpu = lines["`--copy` elapsed"], lines["`--copy` CPU (user + sys)"]
    assert "1.010 (" in copy_elapsed and "1.003 (+0.3 %)" in copy_elapsed and "≤ 1.03" in copy_elapsed
    assert copy_elapsed.rstrip(" |").endswith("met")
    assert "1.250 (" in copy_cpu and "1.110 (+11.0 %)" in copy_cpu and "≤ 1.10" in copy_cpu
    assert copy_cpu.rstrip(" |").endswith("not met") and "| no |" in copy_cpu
    assert "`--link` elapsed" in lines and "seconds, any size" in lines["`--link` elapsed"]
    assert "--jobs` parallelises the file transfer across tablespaces only" in text
    assert "runs in one process" in text
    assert "Not counted" in text and "pg_ctl does not wait for them" in text
    assert "PostgreSQL 15.18 (Debian 15.18-0+deb12u1)" in text and "at least the 5 GB" in text
    assert "first page rewritten" in text and "first page copied unchanged" in text
    assert "hard-linked" in text and "data_encryption=aes-256" in text
    assert "instead of 350" not in text
    assert pngs == ["pg-upgrade-overhead.png"]
    assert (tmp_path / pngs[0]).read_bytes()[:8] == PNG_MAGIC


def test_report_with_link_skipped_and_quick(tmp_path):
    p = pg_upgrade.plan("quick")
    rows = [r for r in synthetic_rows() if not (r["config"] == "aes-256" and r["mode"] == "link")]
    rows.append(
        {
            "scenario": "pg-upgrade",
            "config": "aes-256",
            "rep": 1,
            "metric": "link_skipped",
            "value": 1,
            "mode": "link",
            "detail": "initdb does not know --encryption-keys-from",
        }
    )
    text, _ = pg_upgrade.report(rows, p, str(tmp_path))
    assert "`--link` for aes-256 was skipped: initdb does not know --encryption-keys-from" in text
    link = next(line for line in text.splitlines() if line.startswith("| `--link` elapsed"))
    assert "–" in link
    assert "instead of 350" in text


def test_full_report_includes_pg_upgrade(tmp_path):
    with open(DATA) as f:
        data = json.load(f)
    p = pg_upgrade.plan("quick")
    meta = dict(data["meta"], scenarios={"pg-upgrade": p})
    save_results(
        str(tmp_path),
        meta,
        synthetic_rows(),
        [
            "cd $SCRATCH && $PGCIPHER/bin/pg_upgrade -b /usr/lib/postgresql/15/bin -B $PGCIPHER/bin "
            "-d $OLD -D $NEW -U postgres -s $SCRATCH -p $PORT -P $PORT -j 1 --copy"
        ],
        {},
    )
    text = open(write_report(str(tmp_path))).read()
    assert "## pg-upgrade:" in text and "TDE-Postgres-Advanced-Server-15-Launch" in text
    assert "![pg-upgrade-overhead.png](pg-upgrade-overhead.png)" in text
    assert "pg_upgrade -b /usr/lib/postgresql/15/bin" in text


@SMOKE
def test_pg_upgrade_smoke(tmp_path):
    """The scenario for real at scale 2: both configurations in ABBA order,
    copy and link, every metric, the checks, the report; nothing left
    behind."""
    out = tmp_path / "results"
    work = tempfile.mkdtemp(prefix="pgb")  # short: Unix socket paths live here
    stock = ["--stock", os.environ["BENCH_STOCK"]] if os.environ.get("BENCH_STOCK") else []
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "run",
            "--profile",
            "quick",
            "--tiny",
            "--out",
            str(out),
            "--workdir",
            work,
            "--scenario",
            "pg-upgrade",
            *stock,
        ],
        cwd=TOP,
        capture_output=True,
        text=True,
        timeout=900,
    )
    print(r.stdout[-4000:], r.stderr[-4000:])
    assert r.returncode == 0
    steps = [line.split("] ", 1)[1] for line in r.stdout.splitlines() if "left] pg-upgrade copy" in line]
    assert [s.split(" round")[0] for s in steps] == [
        "pg-upgrade copy stock",
        "pg-upgrade copy aes-256",
        "pg-upgrade copy aes-256",
        "pg-upgrade copy stock",
    ]
    data = json.loads((out / "results.json").read_text())
    rows = [row for row in data["results"] if row["scenario"] == "pg-upgrade"]
    assert all(isinstance(row["value"], (int, float)) for row in rows)
    got = {(row["config"], row["mode"], row["metric"]) for row in rows}
    for cfg in ("stock", "aes-256"):
        for metric in ("elapsed_s", "cpu_s", "user_s", "sys_s", "base_mb", "mb_per_s", "pages_rewritten"):
            assert (cfg, "copy", metric) in got, (cfg, metric)
    rewritten = {row["config"]: row["value"] for row in rows if row["metric"] == "pages_rewritten"}
    assert rewritten == {"stock": 0, "aes-256": 1}
    assert all(row["value"] > 0 for row in rows if row["metric"] in ("elapsed_s", "cpu_s", "base_mb"))
    assert ("stock", "link", "elapsed_s") in got
    linked = [row["value"] for row in rows if row["metric"] == "files_linked"]
    assert linked and all(v == 1 for v in linked)
    if ("aes-256", "link", "link_skipped") in got:  # initdb without --encryption-keys-from
        assert "skipped: initdb does not know --encryption-keys-from" in r.stdout
    else:
        assert ("aes-256", "link", "elapsed_s") in got and len(linked) == 4
    detail = [
        row["detail"]
        for row in rows
        if row["config"] == "aes-256" and row["metric"] == "elapsed_s" and row.get("detail")
    ]
    assert detail and "aes-256" in detail[0] and "data_checksums=on" in detail[0]
    report = (out / "report.md").read_text()
    assert "## pg-upgrade:" in report and "aes-256 / stock (95% CI)" in report
    assert "EDB (EPAS 14 → 15, 300 GB)" in report and "≤ 1.03" in report and "≤ 1.10" in report
    assert (out / "pg-upgrade-overhead.png").read_bytes()[:8] == PNG_MAGIC
    assert not os.path.exists(os.path.join(work, "pg-upgrade")), "clusters left behind"
    assert not _processes_mentioning(work), "processes left behind"
