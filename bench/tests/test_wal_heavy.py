"""wal-heavy: plan, COPY input, WAL-flag check and report on synthetic rows
(no server needed; the smoke test runs it for real)."""
import json
import os

import pytest

from bench import cli
from bench.report import write_report
from bench.runner import save_results
from bench.scenarios import SCENARIOS, wal_heavy

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
DATA = os.path.join(os.path.dirname(__file__), "data", "tiny-results.json")

# encrypted / stock throughput per workload in the synthetic rows
FACTORS = {"tpcb": 0.99, "copy": 0.90, "ctas": 0.96, "vacuum-full": 1.00}


def synthetic_rows(configs=("stock", "aes-256"), reps=3, factors=FACTORS, wal_flag=0):
    rows = []

    def rec(cfg, rep, metric, value, workload):
        rows.append({"scenario": "wal-heavy", "config": cfg, "rep": rep, "metric": metric,
                     "value": value, "workload": workload})
    for cfg in configs:
        rows.append({"scenario": "wal-heavy", "config": cfg, "rep": 0, "metric": "input_mb", "value": 80.0,
                     "workload": "setup", "detail": "none" if cfg == "stock" else f"data_encryption={cfg}"})
        rec(cfg, 0, "wal_encrypted", 0 if cfg == "stock" else wal_flag, "setup")
    for rep in range(1, reps + 1):
        noise = 1 + 0.004 * (rep - 2)          # small, same for every configuration
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
    assert p["steps"] == len(p["configs"]) * len(wal_heavy.WORKLOADS) * p["repetitions"]
    assert p["rows"] == p["size_mb"] * wal_heavy.ROWS_PER_MB
    assert p["est_seconds"] > p["steps"]
    if profile == "full":
        assert p["size_mb"] == 1024 and p["repetitions"] >= 3
    else:
        assert p["est_seconds"] < 6 * 60       # short enough for the demo


def test_tiny_plan_is_tiny():
    p = wal_heavy.plan("quick", cli.TINY["wal-heavy"])
    assert p["size_mb"] <= 4 and p["seconds"] <= 2
    assert p["est_seconds"] < 60


def test_same_settings_for_every_configuration():
    s = wal_heavy.settings(wal_heavy.plan("full"))
    assert s["synchronous_commit"] == "on" and s["wal_level"] == "replica"
    assert s["max_wal_size"] == "8GB" and s["autovacuum"] == "off"


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
    for line in text.splitlines():          # the first table: the one with the targets
        if line.startswith("| "):
            rows.setdefault(line.split(" | ")[0].lstrip("| "), line)
    assert rows["COPY FROM file"].rstrip(" |").endswith("not met")        # 0.90 vs 0.97
    assert rows["VACUUM FULL"].rstrip(" |").endswith("met")               # 1.00 vs 0.95
    assert "MB/s" in text and "checkpoint" in text
    assert "WAL pages encrypted: no" in text
    assert "instead of the issue's 1 GB" in text
    assert pngs == ["wal-heavy-overhead.png"]
    with open(tmp_path / pngs[0], "rb") as f:
        assert f.read(8) == PNG_MAGIC


def test_report_with_three_configs_and_missing_rows(tmp_path):
    p = wal_heavy.plan("full", {"configs": ["stock", "aes-128", "aes-256"]})
    rows = [r for r in synthetic_rows(("stock", "aes-128", "aes-256"), wal_flag=1)
            if not (r["config"] == "aes-128" and r.get("workload") == "ctas")]
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
    save_results(str(tmp_path), meta, synthetic_rows(), ["COPY wal_heavy FROM '$DATA/wal-heavy.csv' (FORMAT csv)"],
                 {"wal-heavy": wal_heavy.settings(p)})
    text = open(write_report(str(tmp_path))).read()
    assert "## wal-heavy:" in text
    assert "`synchronous_commit = on`" in text and "`max_wal_size = 4GB`" in text
    assert "![wal-heavy-overhead.png](wal-heavy-overhead.png)" in text
