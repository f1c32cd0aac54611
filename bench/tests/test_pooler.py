"""pooler: plan, which paths run at which client counts, the report on
synthetic rows (no server needed; test_smoke.py runs the scenario)."""

import pytest

from bench import cli
from bench.scenarios import SCENARIOS, pooler


def test_registered_needs_no_stock_build():
    assert SCENARIOS["pooler"] is pooler
    assert "pooler" in cli.TINY
    assert cli.needed_installs(["pooler"]) == {"pgcipher"}


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_plan(profile):
    p = pooler.plan(profile)
    assert p["steps"] == 1 + p["repetitions"] * len(pooler.points(p)) + 1
    assert max(p["clients"]) > p["max_connections"]  # pooled paths only, there
    if profile == "full":
        assert 1000 in p["clients"] and p["idle_clients"] == 10_000 and p["pool_size"] == 20


def test_session_paths_only_where_they_fit():
    p = pooler.plan("quick")
    pts = pooler.points(p)
    big = max(p["clients"])
    assert {path for w, m, n, path in pts if n == big} == pooler.POOLED
    assert {path for w, m, n, path in pts if n == 1 and w == "select-only"} == set(pooler.PATHS)
    assert {path for w, m, n, path in pts if w == "enc-point"} <= set(pooler.ENC_PATHS)


def test_tiny_plan_is_tiny():
    p = pooler.plan("quick", cli.TINY["pooler"])
    assert p["seconds"] <= 1 and p["repetitions"] == 1 and p["est_seconds"] < 120


def test_report_on_synthetic_rows():
    p = pooler.plan("quick", cli.TINY["pooler"])
    rows = [
        dict(
            scenario="pooler",
            config="pgbouncer-transaction",
            rep=0,
            metric="version_seen",
            value=1,
            part="setup",
            detail="PgBouncer 1.18.0",
        )
    ]
    for rep in (1, 2, 3):
        for w, mode, n, path in pooler.points(p):
            sent = "extended" if path == "pgbouncer-transaction" and mode == "prepared" else mode
            for metric, v in (
                ("tps", 100.0 + rep),
                ("hop_cpu_us_per_tx", 10.0 + rep),
                ("p50_ms", 1.0),
                ("p99_ms", 3.0),
            ):
                if metric == "hop_cpu_us_per_tx" and path == "direct":
                    continue
                rows.append(
                    dict(
                        scenario="pooler",
                        config=path,
                        rep=rep,
                        metric=metric,
                        value=v,
                        workload=w,
                        mode=mode,
                        clients=n,
                        sent_mode=sent,
                    )
                )
    for name in ("proxy-transaction", "pgbouncer-transaction"):
        for metric, v in (
            ("rss_kib_1", 9000),
            ("rss_kib_k", 11000),
            ("rss_kib_per_client", 10.0),
            ("many_errors", 0),
            ("many_seconds", 1.0),
        ):
            rows.append(
                dict(scenario="pooler", config=name, rep=0, metric=metric, value=v, part="many", clients=200)
            )
    md, pngs = pooler.report(rows, p, "/nonexistent")
    assert "PgBouncer 1.18.0" in md and "†" in md
    assert "| select-only -M prepared | 40 | proxy-transaction | 102 |" in md
    assert "1.00 (" in md  # proxy / PgBouncer CPU, equal here
    assert "| proxy-transaction | 9,000 | 11,000 | 10.0 | 0 |" in md
    assert pngs == []
