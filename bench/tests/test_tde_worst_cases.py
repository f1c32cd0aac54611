"""tde-worst-cases: plan, report on synthetic rows (no server needed), and a
tiny smoke run: every workload measured in every configuration (the peer
where it is built), a report row per workload, nothing left behind."""

import json
import os

from bench import cli, peer
from bench.scenarios import SCENARIOS
from bench.scenarios import tde_worst_cases as wc
from bench.tests.test_smoke import PEER_BUILT, PEER_WHY, SMOKE, _bench, _processes_mentioning

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# throughput per configuration and workload in the synthetic rows, per round
BASE = {"ctas": 1e6, "alter": 8e5, "vacuum-full": 9e5, "updates": 300.0}
FACTORS = {"stock-2": 1.0, "aes-256": 0.97, peer.NAME: 0.70}


def synthetic_rows(configs=("stock", "stock-2", "aes-256", peer.NAME), reps=4):
    rows = []
    for rep in range(1, reps + 1):
        for w, v in BASE.items():
            for cfg in configs:
                value = v * FACTORS.get(cfg, 1.0) * (1 + 0.005 * (rep % 2))
                metrics = {"throughput": value}
                if w == "updates":
                    metrics.update(tps=value, latency_ms=8 / value * 1000, wal_mb=20.0)
                else:
                    metrics.update(
                        seconds=500_000 / value, checkpoint_seconds=0.3, table_mb=64.0, wal_mb=65.0
                    )
                for metric, x in metrics.items():
                    rows.append(
                        {
                            "scenario": wc.NAME,
                            "config": cfg,
                            "rep": rep,
                            "metric": metric,
                            "value": x,
                            "workload": w,
                        }
                    )
    return rows


def test_registered_with_a_tiny_entry_and_the_peer():
    assert SCENARIOS[wc.NAME] is wc
    assert wc.NAME in cli.TINY and wc.NAME in peer.SCENARIOS
    for profile in ("quick", "full"):
        assert wc.PROFILES[profile]["configs"] == ["stock", "stock-2", "aes-256"]
    full = wc.plan("full")
    # the full profile's table does not fit in shared_buffers
    assert full["scale"] * wc.MB_PER_SCALE > 2 * full["shared_buffers_mb"]


def test_plan_counts_every_measurement():
    p = wc.plan("quick", {"configs": ["stock", "stock-2", "aes-256", peer.NAME]})
    assert p["steps"] == 4 * len(wc.WORKLOADS) * p["repetitions"]
    assert p["rows"] == p["scale"] * 100_000
    assert 0 < p["est_seconds"] <= 6 * 60  # the quick profile fits in 6 minutes
    assert set(wc.LABELS) == set(wc.WORKLOADS) == set(wc.PERCONA) == set(wc.UNITS)
    assert "generate_series(1, 100)" in wc.UPDATE_SCRIPT and ":naccounts" in wc.UPDATE_SCRIPT


def test_target_verdict():
    assert wc.target_verdict({"ratio": 0.99, "ci_low": 0.96, "ci_high": 1.01}) == "met"
    assert wc.target_verdict({"ratio": 0.96, "ci_low": 0.93, "ci_high": 0.99}) == "met by the median"
    assert wc.target_verdict({"ratio": 0.93, "ci_low": 0.90, "ci_high": 0.96}) == "not met by the median"
    assert wc.target_verdict({"ratio": 0.80, "ci_low": 0.78, "ci_high": 0.82}) == "not met"
    assert wc.target_verdict(None) == "–"


def test_report_on_synthetic_rows(tmp_path):
    p = wc.plan("quick", {"configs": ["stock", "stock-2", "aes-256", peer.NAME]})
    text, pngs = wc.report(synthetic_rows(), p, str(tmp_path))
    head = (
        "| workload | stock | stock-2 | aes-256 | open_pg_tde | stock-2 / stock (95% CI) | "
        "aes-256 / stock (95% CI) | open_pg_tde / stock (95% CI) | target | verdict | "
        "Percona's pg_tde (published) |"
    )
    assert head in text.splitlines()
    lines = {}
    for line in text.splitlines():  # the first table's rows: the one with the ratios
        if line.startswith("| "):
            lines.setdefault(line.split(" | ")[0].lstrip("| "), line)
    for w in wc.WORKLOADS:
        line = lines[wc.LABELS[w]]
        assert wc.PERCONA[w] in line
        assert "aes-256: met" in line and "open_pg_tde: not met, slower" in line
        assert "0.970 (" in line and "0.700 (" in line and "1.000 (" in line
    assert " TPS |" in lines[wc.LABELS["updates"]]
    assert "k rows/s" in lines[wc.LABELS["ctas"]]
    assert "did not run" not in text
    assert pngs == [f"{wc.NAME}-overhead.png"]
    assert (tmp_path / pngs[0]).read_bytes()[:8] == PNG_MAGIC


def test_report_without_the_peer(tmp_path):
    p = wc.plan("quick")
    text, _ = wc.report(synthetic_rows(("stock", "stock-2", "aes-256")), p, str(tmp_path))
    assert "open_pg_tde did not run in this report" in text
    assert "| open_pg_tde" not in text


@SMOKE
def test_tde_worst_cases_smoke(tmp_path):
    r, out, work = _bench(tmp_path, "--scenario", wc.NAME, timeout=900)
    assert r.returncode == 0
    assert f"{wc.NAME} updates aes-256 round 2:" in r.stdout  # progress lines
    data = json.loads((out / "results.json").read_text())
    rows = [row for row in data["results"] if row["scenario"] == wc.NAME]
    cfgs = ["stock", "stock-2", "aes-256"] + ([peer.NAME] if PEER_BUILT else [])
    got = {(row["config"], row["workload"], row["metric"], row["rep"]) for row in rows}
    for cfg in cfgs:
        for w in wc.WORKLOADS:
            for rep in (1, 2):
                assert (cfg, w, "throughput", rep) in got, (cfg, w, rep)
    assert all(row["value"] > 0 for row in rows if row["metric"] == "throughput")
    report = (out / "report.md").read_text()
    assert f"## {wc.NAME}:" in report
    section = report.split(f"## {wc.NAME}:")[1]
    for w in wc.WORKLOADS:
        line = next(x for x in section.splitlines() if x.startswith(f"| {wc.LABELS[w]} |"))
        cells = line.strip("| ").split(" | ")
        assert "–" not in cells[1 : 1 + len(cfgs)], line  # a median per configuration
    assert "**Noise floor.**" in section
    assert (out / f"{wc.NAME}-overhead.png").read_bytes()[:8] == PNG_MAGIC
    if PEER_BUILT:
        assert f"{wc.NAME}: open_pg_tde: wc_copy tde_heap in postgres" in r.stdout
    else:
        assert f"run without open_pg_tde: {PEER_WHY}" in r.stdout
        assert "open_pg_tde did not run" in section
    assert not os.path.exists(os.path.join(work, wc.NAME)), "clusters left behind"
    assert not _processes_mentioning(work), "processes left behind"
