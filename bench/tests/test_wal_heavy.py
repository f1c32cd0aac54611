"""wal-heavy: plan, COPY input, WAL-flag check, the wal-lock sampler's
classification and protocol, and report on synthetic rows (no server needed;
the smoke test runs it for real)."""

import json
import os
import stat
import sys
import time

import pytest

from bench import cli
from bench.report import write_report
from bench.runner import save_results
from bench.scenarios import SCENARIOS, wal_heavy

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
DATA = os.path.join(os.path.dirname(__file__), "data", "tiny-results.json")

# encrypted / stock throughput per workload in the synthetic rows
FACTORS = {"tpcb": 0.99, "copy": 0.90, "ctas": 0.96, "vacuum-full": 1.00}


# wal-lock rows: per config, clients: tps, LWLock:WALWrite share per round
LOCK_TPS = {("stock", 8): 900.0, ("aes-256", 8): 880.0, ("stock", 16): 1000.0, ("aes-256", 16): 950.0}
LOCK_SHARE = {
    ("stock", 8): [0.20, 0.21, 0.22],
    ("aes-256", 8): [0.205, 0.215, 0.19],
    ("stock", 16): [0.20, 0.21, 0.22],
    ("aes-256", 16): [0.30, 0.31, 0.29],
}


def lock_rows(configs=("stock", "aes-256"), reps=3):
    rows = []
    for rep in range(1, reps + 1):
        for n in (8, 16):
            for cfg in configs:

                def rec(metric, value, _cfg=cfg, _rep=rep, _n=n, **kw):
                    rows.append(
                        dict(
                            {
                                "scenario": "wal-heavy",
                                "config": _cfg,
                                "rep": _rep,
                                "metric": metric,
                                "value": value,
                                "workload": wal_heavy.LOCK,
                                "clients": _n,
                            },
                            **kw,
                        )
                    )

                rec("tps", LOCK_TPS[(cfg, n)] * (1 + 0.004 * (rep - 2)))
                rec("samples", 16 * 900)
                rec("wal_mb", 20.0)
                rec("wal_write", 9000)
                rec("wal_sync", 8000)
                rec("wal_write_ms", 90.0 if cfg == "stock" else 108.0)
                rec("wal_sync_ms", 8000.0)
                rec("write_ms_per_mb", (90.0 if cfg == "stock" else 108.0) / 20.0)
                lock = LOCK_SHARE[(cfg, n)][rep - 1]
                rest = {
                    "LWLock:WALWrite": lock,
                    "IO:WalWrite": 0.02,
                    "IO:WalSync": 0.05,
                    "LWLock:WALInsert": 0.01,
                    "Lock:transactionid/tuple": 0.30,
                    "CPU": 0.12,
                }
                rest["Client"] = 0.25
                rest["other"] = 1 - sum(rest.values())
                for w in wal_heavy.WAIT_CATEGORIES:
                    rec(
                        "wait_share",
                        rest[w],
                        wait=w,
                        **({"detail": f"IPC:ProcArrayGroupUpdate {rep}.0%"} if w == "other" else {}),
                    )
    return rows


def synthetic_rows(configs=("stock", "aes-256"), reps=3, factors=FACTORS, wal_flag=0, lock=False):
    rows = lock_rows(configs, reps) if lock else []

    def rec(cfg, rep, metric, value, workload):
        rows.append(
            {
                "scenario": "wal-heavy",
                "config": cfg,
                "rep": rep,
                "metric": metric,
                "value": value,
                "workload": workload,
            }
        )

    for cfg in configs:
        rows.append(
            {
                "scenario": "wal-heavy",
                "config": cfg,
                "rep": 0,
                "metric": "input_mb",
                "value": 80.0,
                "workload": "setup",
                "detail": "none" if cfg == "stock" else f"data_encryption={cfg}",
            }
        )
        rec(cfg, 0, "wal_encrypted", 0 if cfg == "stock" else wal_flag, "setup")
    for rep in range(1, reps + 1):
        noise = 1 + 0.004 * (rep - 2)  # small, same for every configuration
        for w in wal_heavy.WORKLOADS:
            for cfg in configs:
                f = 1.0 if cfg == "stock" else factors[w]
                if w == "tpcb":
                    rec(cfg, rep, "tps", 1000 * f * noise, w)
                    rec(cfg, rep, "latency_ms", 4 / (f * noise), w)
                    rec(cfg, rep, "wal_mb", 30.0, w)
                    rec(cfg, rep, "checkpoint_seconds", 0.5, w)
                else:
                    secs = 2.0 / (f * noise)
                    rec(cfg, rep, "seconds", secs, w)
                    rec(cfg, rep, "table_mb", 64.0, w)
                    rec(cfg, rep, "mb_per_s", 64.0 / secs, w)
                    rec(cfg, rep, "wal_mb", 70.0, w)
                    rec(cfg, rep, "checkpoint_seconds", 0.25, w)
    return rows


def test_registered_and_in_tiny_overrides():
    assert SCENARIOS["wal-heavy"] is wal_heavy
    assert "wal-heavy" in cli.TINY


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_plan(profile):
    p = wal_heavy.plan(profile)
    assert p["configs"][0] == "stock" and len(p["configs"]) >= 2
    assert p["lock_clients"] == [8, 16]
    assert wal_heavy.points(p) == wal_heavy.WORKLOADS + [(wal_heavy.LOCK, 8), (wal_heavy.LOCK, 16)]
    assert p["steps"] == len(p["configs"]) * len(wal_heavy.points(p)) * p["repetitions"]
    assert p["rows"] == p["size_mb"] * wal_heavy.ROWS_PER_MB
    assert p["est_seconds"] > p["steps"]
    if profile == "full":
        assert p["size_mb"] == 1024 and p["repetitions"] >= 3 and p["lock_seconds"] == 30
    else:
        assert p["est_seconds"] < 6 * 60  # short enough for the demo
        # the wal-lock runs add at most about 2 minutes to the quick profile
        without = wal_heavy.plan(profile, {"lock_clients": []})
        assert p["est_seconds"] - without["est_seconds"] <= 120


def test_tiny_plan_is_tiny():
    p = wal_heavy.plan("quick", cli.TINY["wal-heavy"])
    assert p["size_mb"] <= 4 and p["seconds"] <= 2
    assert p["lock_clients"] == [8, 16] and p["lock_seconds"] <= 2  # the shape, not the length
    assert p["est_seconds"] < 60


def test_same_settings_for_every_configuration():
    s = wal_heavy.settings(wal_heavy.plan("full"))
    assert s["synchronous_commit"] == "on" and s["wal_level"] == "replica"
    assert s["max_wal_size"] == "8GB" and s["autovacuum"] == "off"
    assert s["track_wal_io_timing"] == "on"
    # 16 pgbench clients, the sampler and one psql fit
    assert s["max_connections"] >= max(wal_heavy.plan("full")["lock_clients"]) + 2


@pytest.mark.parametrize(
    "wait_type,wait,state,expected",
    [
        ("LWLock", "WALWrite", "active", "LWLock:WALWrite"),  # WALWriteLock
        ("IO", "WalWrite", "active", "IO:WalWrite"),  # PostgreSQL 17's spelling
        ("IO", "WalSync", "active", "IO:WalSync"),
        ("IO", "WALWrite", "active", "IO:WalWrite"),  # 16's
        ("IO", "WALSync", "active", "IO:WalSync"),
        ("LWLock", "WALInsert", "active", "LWLock:WALInsert"),
        ("Lock", "transactionid", "active", "Lock:transactionid/tuple"),
        ("Lock", "tuple", "active", "Lock:transactionid/tuple"),
        ("Lock", "relation", "active", "other"),
        ("", "", "active", "CPU"),  # psql -A prints NULL as ""
        (None, None, "active", "CPU"),
        ("", "", "idle", "other"),
        ("", "", "", "other"),
        ("Client", "ClientRead", "idle", "Client"),
        ("Client", "ClientRead", "idle in transaction", "Client"),
        ("IO", "WalInitSync", "active", "other"),
        ("IO", "DataFileRead", "active", "other"),
        ("LWLock", "BufferContent", "active", "other"),
        ("IPC", "SyncRep", "active", "other"),
    ],
)
def test_classify(wait_type, wait, state, expected):
    assert wal_heavy.classify(wait_type, wait, state) == expected
    assert expected in wal_heavy.WAIT_CATEGORIES


def test_count_sample_counts_client_backends_only():
    counts, others = {}, {}
    n = wal_heavy.count_sample(
        [
            "LWLock|WALWrite|active|client backend\n",
            "||active|client backend\n",
            "IO|WalWrite|active|client backend\n",
            "Lock|relation|active|client backend\n",
            "||idle|client backend\n",
            "Activity|WalWriterMain||walwriter\n",
            "IO|WalWrite||walwriter\n",
            "Activity|CheckpointerMain||checkpointer\n",
            "garbage\n",
        ],
        counts,
        others,
    )
    assert n == 5
    assert counts == {"LWLock:WALWrite": 1, "CPU": 1, "IO:WalWrite": 1, "other": 2}
    assert others == {"Lock:relation": 1, "no wait, idle": 1}


FAKE_PSQL = r"""#!PYTHON
import sys
# answers every sample with two client backends and the WAL writer
for line in sys.stdin:
    if line.startswith("\echo __END__"):
        print("LWLock|WALWrite|active|client backend")
        print("Client|ClientRead|idle|client backend")
        print("IO|WalWrite||walwriter")
        print("__END__", flush=True)
"""


class FakeInstall:
    def __init__(self, bindir):
        self.bindir = bindir

    def bin(self, program):
        return os.path.join(self.bindir, program)


class FakeSamplerCluster:
    def __init__(self, bindir):
        self.install = FakeInstall(bindir)
        self.config = type("Cfg", (), {"name": "fake"})()

    def conninfo(self):
        return ["-h", "/nonexistent"]


def test_sampler_protocol_with_a_fake_psql(tmp_path):
    psql = tmp_path / "psql"
    psql.write_text(FAKE_PSQL.replace("PYTHON", sys.executable))
    psql.chmod(psql.stat().st_mode | stat.S_IEXEC)
    s = wal_heavy.WaitSampler(FakeSamplerCluster(str(tmp_path)), interval=0.01).start()
    time.sleep(0.3)
    s.stop()
    assert 5 <= s.polls <= 40  # about every 10 ms, not a busy loop
    assert s.samples == 2 * s.polls
    shares = s.shares()
    assert list(shares) == wal_heavy.WAIT_CATEGORIES
    assert shares["LWLock:WALWrite"] == 0.5 and shares["Client"] == 0.5 and shares["CPU"] == 0.0
    assert s.other_detail() == "none"


def test_sampler_reports_a_dead_psql(tmp_path):
    psql = tmp_path / "psql"
    psql.write_text("#!/bin/sh\necho 'psql: error: connection refused' >&2\nexit 2\n")
    psql.chmod(0o755)
    s = wal_heavy.WaitSampler(FakeSamplerCluster(str(tmp_path))).start()
    time.sleep(0.1)  # psql gone before the sampler writes, or after
    with pytest.raises(RuntimeError, match="connection refused"):
        s.stop()


def test_lock_verdict():
    assert wal_heavy.lock_verdict([0.30, 0.31, 0.29], [0.20, 0.21, 0.22]) == "above"
    assert wal_heavy.lock_verdict([0.205, 0.215, 0.19], [0.20, 0.21, 0.22]) == "not above"
    # higher median but the rounds overlap: not meaningfully above
    assert wal_heavy.lock_verdict([0.30, 0.31, 0.20], [0.20, 0.21, 0.22]) == "not above"
    # rounds apart but less than the margin
    assert wal_heavy.lock_verdict([0.225, 0.226], [0.21, 0.22]) == "not above"
    assert wal_heavy.lock_verdict([], [0.2]) == "–"


def test_copy_input_is_deterministic_csv(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    size = wal_heavy.write_data(str(a), 1000)
    wal_heavy.write_data(str(b), 1000)
    assert size == os.path.getsize(a) and a.read_bytes() == b.read_bytes()
    lines = a.read_text().splitlines()
    assert len(lines) == 1000
    fields = lines[-1].split(",")
    assert len(fields) == 5 and fields[0] == "1000" and len(fields[4]) == 96
    assert fields[3].endswith("+00")


class FakeCluster:
    def __init__(self, data):
        self.data = data

    def psql(self, sql, **kw):
        return "000000010000000000000003" if "pg_walfile_name" in sql else ""


@pytest.mark.parametrize("info,expected", [(0x0002, 0), (0x0012, 1)])
def test_wal_flag_read_from_segment(tmp_path, info, expected):
    os.makedirs(tmp_path / "pg_wal")
    with open(tmp_path / "pg_wal" / "000000010000000000000003", "wb") as f:
        f.write((0xD116).to_bytes(2, "little") + info.to_bytes(2, "little") + bytes(8188))
    assert wal_heavy.wal_encrypted(FakeCluster(str(tmp_path))) == expected


def test_verdict():
    s = lambda r, lo, hi: {"ratio": r, "ci_low": lo, "ci_high": hi}  # noqa: E731
    assert wal_heavy.verdict(s(0.99, 0.985, 1.0), 0.98) == "met"
    assert wal_heavy.verdict(s(0.99, 0.97, 1.0), 0.98).startswith("met by the median")
    assert wal_heavy.verdict(s(0.97, 0.96, 0.99), 0.98).startswith("not met by the median")
    assert wal_heavy.verdict(s(0.90, 0.89, 0.91), 0.98) == "not met"
    assert wal_heavy.verdict(None, 0.98) == "–"
    assert wal_heavy.verdict(s(float("nan"), float("nan"), float("nan")), 0.98) == "–"


def test_summaries_are_throughput_ratios():
    sums = wal_heavy.summaries(synthetic_rows(), ["stock", "aes-256"])
    assert set(sums) == {(w, "aes-256") for w in wal_heavy.WORKLOADS}
    for w, f in FACTORS.items():
        s = sums[(w, "aes-256")]
        assert s["ratio"] == pytest.approx(f, rel=1e-9)
        assert s["ci_low"] <= s["ratio"] <= s["ci_high"]
        assert s["n"] == 3 and s["n_baseline"] == 3


def test_report_on_synthetic_rows(tmp_path):
    p = wal_heavy.plan("quick")
    text, pngs = wal_heavy.report(synthetic_rows(), p, str(tmp_path))
    for label in wal_heavy.LABELS.values():
        assert label in text
    assert "aes-256 / stock (95% CI)" in text
    assert "0.990 (" in text and "0.900 (" in text
    assert "≥ 0.98" in text and "≥ 0.97" in text and "≥ 0.95" in text
    rows = {}
    for line in text.splitlines():  # the first table: the one with the targets
        if line.startswith("| "):
            rows.setdefault(line.split(" | ")[0].lstrip("| "), line)
    assert rows["COPY FROM file"].rstrip(" |").endswith("not met")  # 0.90 vs 0.97
    assert rows["VACUUM FULL"].rstrip(" |").endswith("met")  # 1.00 vs 0.95
    assert "MB/s" in text and "checkpoint" in text
    assert "WAL pages encrypted: no" in text
    assert "instead of the issue's 1 GB" in text
    assert pngs == ["wal-heavy-overhead.png"]
    with open(tmp_path / pngs[0], "rb") as f:
        assert f.read(8) == PNG_MAGIC
    assert "WALWriteLock" not in text  # no wal-lock rows, no section


def test_report_wal_lock_section(tmp_path):
    p = wal_heavy.plan("quick")
    text, _ = wal_heavy.report(synthetic_rows(lock=True), p, str(tmp_path))
    # the four workloads' ratios are unchanged by the wal-lock rows
    plain, _ = wal_heavy.report(synthetic_rows(), p, str(tmp_path))
    assert text.startswith(plain.split("\nTargets (from the issue")[0])
    section = text.split("### Does encrypting WAL under WALWriteLock")[1]
    lines = section.splitlines()
    # TPS per client count with the ratio and its CI (common.ratio_table)
    assert "| clients | stock | aes-256 | aes-256 / stock (95% CI) |" in lines
    tps8 = next(line for line in lines if line.startswith("| 8 | 900 | 880 |"))
    assert "0.978 (" in tps8
    assert any(line.startswith("| 16 | 1,000 | 950 | 0.950 (") for line in lines)
    # wait shares: medians of the rounds, in percent
    assert "| clients | config | samples | " + " | ".join(wal_heavy.WAIT_CATEGORIES) + " |" in lines
    assert any(line.startswith("| 16 | aes-256 | 14,400 | 30.0 % | 2.0 % | 5.0 % |") for line in lines)
    assert any(line.startswith("| 16 | stock | 14,400 | 21.0 % |") for line in lines)
    assert any(line.startswith("| 8 | aes-256 | 14,400 | 20.5 % |") for line in lines)
    # pg_stat_wal: write ms per MB and per write call
    assert any(
        line.startswith("| 8 | stock | 20.0 | 9,000 | 8,000 | 90 | 4.5 | 10.0 | 1,000 |") for line in lines
    )
    assert any(
        line.startswith("| 8 | aes-256 | 20.0 | 9,000 | 8,000 | 108 | 5.4 | 12.0 | 1,000 |") for line in lines
    )
    assert "WriteWALPages()" in section and "include the encryption" in section
    assert "16 clients aes-256: IPC:ProcArrayGroupUpdate 3.0%" in section  # the last round's
    # the reading: not lengthened at 8 clients, lengthened at 16 (synthetic)
    r8 = next(line for line in lines if line.startswith("- 8 clients"))
    r16 = next(line for line in lines if line.startswith("- 16 clients"))
    assert "not meaningfully above" in r8 and "not lengthened enough to matter" in r8
    # 12 vs 10 µs per write, 1000 µs per sync, 8000 syncs per 9000 writes
    assert "12.0 µs vs 10.0 µs (+2.0 µs with the encryption), against 1000 µs per fsync: +0.2%" in r8
    assert "is meaningfully above" in r16 and "30.0% of samples vs 21.0%" in r16
    assert "Row locks dominate" not in section  # 30 % in the synthetic rows


def test_report_wal_lock_row_lock_caveat(tmp_path):
    rows = synthetic_rows(lock=True)
    for r in rows:
        if r.get("wait") == "Lock:transactionid/tuple":
            r["value"] = 0.7
    text, _ = wal_heavy.report(rows, wal_heavy.plan("quick"), str(tmp_path))
    assert "Row locks dominate (Lock:transactionid/tuple up to 70% of samples): at scale 5" in text


def test_report_wal_lock_without_stock_rows(tmp_path):
    p = wal_heavy.plan("quick")
    rows = [
        r
        for r in synthetic_rows(lock=True)
        if not (r["config"] == "stock" and r.get("workload") == wal_heavy.LOCK)
    ]
    text, _ = wal_heavy.report(rows, p, str(tmp_path))
    assert "- 8 clients, aes-256: no data." in text


def test_report_with_three_configs_and_missing_rows(tmp_path):
    p = wal_heavy.plan("full", {"configs": ["stock", "aes-128", "aes-256"]})
    rows = [
        r
        for r in synthetic_rows(("stock", "aes-128", "aes-256"), wal_flag=1)
        if not (r["config"] == "aes-128" and r.get("workload") == "ctas")
    ]
    text, _ = wal_heavy.report(rows, p, str(tmp_path))
    assert "aes-128 / stock (95% CI)" in text and "aes-256 vs target" in text
    assert "WAL pages encrypted: yes" in text
    ctas = next(line for line in text.splitlines() if line.startswith("| CREATE TABLE AS SELECT |"))
    assert "–" in ctas
    assert "instead of the issue's 1 GB" not in text


def test_full_report_includes_wal_heavy(tmp_path):
    with open(DATA) as f:
        data = json.load(f)
    p = wal_heavy.plan("quick")
    meta = dict(data["meta"], scenarios={"wal-heavy": p})
    save_results(
        str(tmp_path),
        meta,
        synthetic_rows(),
        ["COPY wal_heavy FROM '$DATA/wal-heavy.csv' (FORMAT csv)"],
        {"wal-heavy": wal_heavy.settings(p)},
    )
    text = open(write_report(str(tmp_path))).read()
    assert "## wal-heavy:" in text
    assert "`synchronous_commit = on`" in text and "`max_wal_size = 4GB`" in text
    assert "![wal-heavy-overhead.png](wal-heavy-overhead.png)" in text
