"""TPROC-C pieces that need no server: the mix, the checks, the counts."""

import os

from bench.scenarios import tprocc


def test_mix_is_the_standard_one():
    assert dict(tprocc.MIX) == {"neword": 45, "payment": 43, "ostat": 4, "delivery": 4, "slev": 4}
    for script, _ in tprocc.MIX:
        assert os.path.exists(os.path.join(tprocc.SQL_DIR, script + ".sql"))


def test_consistency_conditions_listed():
    with open(os.path.join(tprocc.SQL_DIR, "checks.sql")) as f:
        names = [line.split("|")[0] for line in f if line[:1].isdigit()]
    assert names == ["1", "2", "3", "4", "6"]


def test_initial_counts_checked():
    good = {
        "warehouse": 2,
        "district": 20,
        "customer": 60000,
        "history": 60000,
        "new_order": 18000,
        "orders": 60000,
        "order_line": 600000,
        "item": 100000,
        "stock": 200000,
    }
    assert tprocc.check_initial_counts({k: str(v) for k, v in good.items()}, 2) == {}
    bad = dict(good, stock=199999, order_line=10)
    problems = tprocc.check_initial_counts({k: str(v) for k, v in bad.items()}, 2)
    assert set(problems) == {"stock", "order_line"}


def test_recorded_run_passed_its_checks():
    import json

    with open(os.path.join(os.path.dirname(__file__), "data", "tiny-results.json")) as f:
        rows = json.load(f)["results"]
    checks = [r for r in rows if r["scenario"] == "tproc-c" and r["metric"] == "consistency_ok"]
    assert checks and all(r["value"] == 1 for r in checks)
