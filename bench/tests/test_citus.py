"""The citus scenario, tiny: three Citus clusters of three nodes each,
every workload measured on each, the report's tables, nothing left
behind.  Where Citus cannot be had (no ../shared/vendor), the scenario
records why and its report says so."""

import json
import os

from bench.scenarios import SCENARIOS, citus
from bench.tests.test_smoke import SMOKE, _bench


def test_plan_counts_every_measurement():
    assert SCENARIOS["citus"] is citus
    p = citus.plan("quick", {"repetitions": 2, "sysbench_threads": [1, 4]})
    sysbench_runs = len(citus.SYSBENCH_CONFIGS) * len(citus.SYSBENCH_WORKLOADS) * 2 * 2
    assert p["steps"] == 3 * len(citus.WORKLOADS) * 2 + sysbench_runs
    assert p["est_seconds"] > 0
    assert set(citus.UNITS) == set(citus.WORKLOADS)


def test_report_of_an_unavailable_citus():
    md, pngs = citus.report(
        [
            {
                "scenario": "citus",
                "config": "all",
                "rep": 0,
                "metric": "unavailable",
                "value": 1,
                "detail": "no tarball",
            }
        ],
        citus.plan("quick"),
        "/nonexistent",
    )
    assert md.startswith("Not measured: no tarball") and pngs == []


@SMOKE
def test_citus_smoke(tmp_path):
    r, out, work = _bench(tmp_path, "--scenario", "citus")
    assert r.returncode == 0
    data = json.loads((out / "results.json").read_text())
    rows = [row for row in data["results"] if row["scenario"] == "citus"]
    report = (out / "report.md").read_text()
    assert "## citus:" in report
    if any(row["metric"] == "unavailable" for row in rows):
        assert "Not measured:" in report
        return
    got = {(row["config"], row["workload"], row["metric"]) for row in rows}
    for cfg in citus.CONFIGS:
        for w in citus.WORKLOADS:
            assert (cfg, w, citus.UNITS[w]) in got
    assert all(row["value"] > 0 for row in rows)
    for w in citus.WORKLOADS:
        assert f"| {w} |" in report
    for cfg in citus.SYSBENCH_CONFIGS:
        for w in citus.SYSBENCH_WORKLOADS:
            assert (cfg, f"sysbench-{w}", "tps") in got
    assert "| sysbench-range | 1 |" in report
    assert not os.path.exists(os.path.join(work, "citus", "stock-coord")), "clusters left behind"
    assert not os.path.exists(os.path.join(work, "citus", "copy.tsv")), "COPY input left behind"
