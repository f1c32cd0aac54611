"""The aio scenario: its CPU accounting from /proc, its report from
synthetic rows (and on 17, where it measures nothing), and a tiny smoke run
on an 18 build (BENCH_SMOKE=1 and PGCIPHER_PG=18, as ./pgcipher test --pg 18
sets them)."""

import json
import os
import subprocess
import sys
import time

import pytest

from bench.scenarios import SCENARIOS, aio
from bench.tests.test_smoke import _bench


def test_registered_and_tiny():
    assert SCENARIOS["aio"] is aio
    p = aio.plan("quick", {"scale": 1, "repetitions": 2, "io_methods": ["sync", "worker-1"]})
    assert p["steps"] == 3 * 2 * 2 * 2
    assert p["est_seconds"] > 0


def test_stat_ticks_counts_this_process():
    own0, _ = aio._stat_ticks(os.getpid())
    t = time.process_time()
    while time.process_time() - t < 0.2:
        pass
    own1, _ = aio._stat_ticks(os.getpid())
    assert own1 - own0 >= 0.1 * aio.CLK_TCK


def test_stat_ticks_reaped_children():
    _, c0 = aio._stat_ticks(os.getpid())
    subprocess.run(
        [sys.executable, "-c", "import time\nt=time.process_time()\nwhile time.process_time()-t<0.3: pass"]
    )
    _, c1 = aio._stat_ticks(os.getpid())
    assert c1 - c0 >= 0.2 * aio.CLK_TCK


def _rows():
    rows = []
    for rep in (1, 2, 3):
        for io in ("sync", "worker-1"):
            for cfg, f in (("stock", 1.0), ("stock-2", 1.01), ("aes-256", 0.9)):
                point = dict(scenario="aio", config=cfg, rep=rep, io_method=io)
                for metric, value, w in (
                    ("mb_per_s", 1000 * f + rep, "seq-scan-os-cache"),
                    ("server_cpu_ms_per_scan", 300 / f, "seq-scan-os-cache"),
                    ("io_worker_cpu_ms_per_scan", 0 if io == "sync" else 200 / f, "seq-scan-os-cache"),
                    ("tps", 5000 * f + rep, "select-only"),
                    ("server_cpu_us_per_tx", 200 / f, "select-only"),
                    ("io_worker_cpu_us_per_tx", 0, "select-only"),
                ):
                    rows.append(dict(point, metric=metric, value=value, workload=w))
    rows.append(
        dict(
            scenario="aio",
            config="all",
            rep=0,
            metric="unavailable",
            value=1,
            io_method="io_uring",
            detail="refused",
        )
    )
    return rows


def test_report_from_rows(tmp_path):
    p = aio.plan("quick", {"io_methods": ["sync", "worker-1", "io_uring"]})
    md, pngs = aio.report(_rows(), p, str(tmp_path))
    assert "| sync |" in md and "| worker-1 |" in md
    assert "io_uring | not measured: refused" in md
    # 900 / 1000 MB/s: the ratio and a verdict against the noise floor
    assert "0.900" in md
    assert "slower" in md
    assert pngs == ["aio-overhead.png"] and (tmp_path / "aio-overhead.png").exists()


def test_report_on_17_says_so(tmp_path):
    md, pngs = aio.report([], aio.plan("quick"), str(tmp_path))
    assert "PostgreSQL 17" in md and pngs == []


@pytest.mark.skipif(
    os.environ.get("BENCH_SMOKE") != "1" or os.environ.get("PGCIPHER_PG", "17") == "17",
    reason="needs BENCH_SMOKE=1 and an 18 build (./pgcipher test --pg 18 bench)",
)
def test_smoke_on_18(tmp_path):
    r, out, _ = _bench(tmp_path, "--scenario", "aio")
    assert r.returncode == 0
    data = json.loads((out / "results.json").read_text())
    got = {
        (row["io_method"], row["config"]) for row in data["results"] if row["metric"] in ("tps", "mb_per_s")
    }
    for io in ("sync", "worker-1"):
        for cfg in ("stock", "stock-2", "aes-256"):
            assert (io, cfg) in got
    # io_uring measured, or said unavailable
    assert ("io_uring", "stock") in got or any(row["metric"] == "unavailable" for row in data["results"])
    # in worker mode the scan's reads complete in the I/O worker: CPU there
    w = [
        row["value"]
        for row in data["results"]
        if row["metric"] == "io_worker_cpu_ms_per_scan" and row["io_method"] == "worker-1"
    ]
    assert sum(w) > 0
    assert "## aio:" in (out / "report.md").read_text()
