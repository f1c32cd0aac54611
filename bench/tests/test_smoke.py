"""Smoke run of the quick profile with tiny sizes and durations: every output
is produced and well formed.  Needs both builds; runs when BENCH_SMOKE=1
(./pgcipher test sets it), skipped otherwise."""
import csv
import json
import os
import subprocess
import sys
import tempfile

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(os.environ.get("BENCH_SMOKE") != "1", reason="set BENCH_SMOKE=1 (needs both builds)")
def test_quick_profile_smoke(tmp_path):
    out = tmp_path / "results"
    work = tempfile.mkdtemp(prefix="pgb")     # short: Unix socket paths live here
    r = subprocess.run([sys.executable, "-m", "bench", "run", "--profile", "quick", "--tiny",
                        "--out", str(out), "--workdir", work],
                       cwd=TOP, capture_output=True, text=True, timeout=1800)
    print(r.stdout[-3000:], r.stderr[-3000:])
    assert r.returncode == 0
    assert "elapsed" in r.stdout and "left]" in r.stdout          # progress lines
    data = json.loads((out / "results.json").read_text())
    scenarios = set(data["meta"]["scenarios"])
    assert scenarios == {"cybertec-pgbench", "cybertec-1mb", "tproc-c", "wal-heavy", "micro", "columns-micro"}
    assert {row["scenario"] for row in data["results"]} == scenarios
    assert all(isinstance(row["value"], (int, float)) for row in data["results"])
    with open(out / "results.csv") as f:
        assert len(list(csv.DictReader(f))) == len(data["results"])
    report = (out / "report.md").read_text()
    for s in scenarios:
        assert f"## {s}:" in report
    pngs = list(out.glob("*.png"))
    assert len(pngs) >= 5
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    checks = [row for row in data["results"] if row["metric"] == "consistency_ok"]
    assert checks and all(row["value"] == 1 for row in checks)
    assert not os.path.exists(os.path.join(work, "cybertec-pgbench")), "clusters left behind"
    assert not os.path.exists(os.path.join(work, "wal-heavy")), "clusters or COPY input left behind"
    wal = {(row["workload"], row["metric"]) for row in data["results"] if row["scenario"] == "wal-heavy"}
    for w in ("copy", "ctas", "vacuum-full"):
        assert (w, "mb_per_s") in wal and (w, "wal_mb") in wal
    assert ("tpcb", "tps") in wal
    cols = {(row["config"], row["metric"]) for row in data["results"] if row["scenario"] == "columns-micro"}
    for kind in ("int8", "EQ", "ORD", "MATCH"):
        assert (kind, "ns_per_comparison") in cols and (kind, "index_build_s") in cols
    assert ("MATCH", "candidates") in cols and ("text", "matches") in cols
    assert ("ORD", "client_us_per_value") in cols and ("RND", "datum_bytes") in cols
