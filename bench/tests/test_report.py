"""Report generation on recorded data (a --tiny run, committed)."""

import csv
import json
import os

from bench.report import write_report
from bench.runner import save_results
from bench.scenarios import SCENARIOS

DATA = os.path.join(os.path.dirname(__file__), "data", "tiny-results.json")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def make_results_dir(tmp_path):
    with open(DATA) as f:
        data = json.load(f)
    save_results(str(tmp_path), data["meta"], data["results"], data["commands"], data["settings"])
    return data


def test_report_has_every_scenario_and_valid_plots(tmp_path):
    data = make_results_dir(tmp_path)
    path = write_report(str(tmp_path))
    text = open(path).read()
    for name in data["meta"]["scenarios"]:
        assert f"## {name}:" in text
    assert "| CPU |" in text and "AES-NI" in text
    assert "95% bootstrap" in text or "95% CI" in text
    images = [line[line.index("(") + 1 : -1] for line in text.splitlines() if line.startswith("![")]
    assert len(images) >= 4
    for img in images:
        with open(os.path.join(tmp_path, img), "rb") as f:
            assert f.read(8) == PNG_MAGIC, img


def test_csv_has_every_raw_repetition(tmp_path):
    data = make_results_dir(tmp_path)
    with open(os.path.join(tmp_path, "results.csv")) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(data["results"])
    assert {"scenario", "config", "rep", "metric", "value"} <= set(rows[0])
    assert {r["scenario"] for r in rows} == set(data["meta"]["scenarios"])


def test_vendor_tables_present(tmp_path):
    make_results_dir(tmp_path)
    text = open(write_report(str(tmp_path))).read()
    assert "CYBERTEC's published numbers" in text
    assert "EDB's published result" in text
    assert "No 192-bit row here" in text


def test_every_scenario_module_is_complete():
    for name, mod in SCENARIOS.items():
        assert mod.NAME == name
        for fn in ("plan", "run", "report"):
            assert callable(getattr(mod, fn))
        for profile in ("quick", "full"):
            p = mod.plan(profile)
            assert p["steps"] > 0 and p["est_seconds"] > 0
