"""bench/device: the many-core driver's run list, CPU ranges and server-CPU
settling, and the report tables made from the committed device run."""

import json
import os

import pytest

from bench.device import many_cores as mc
from bench.device import summarize

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(os.path.dirname(HERE), "reports", "2026-11-26-many-cores")


def test_default_runs_pair_every_encrypted_run_with_its_plaintext():
    runs = mc.parse_runs(mc.DEFAULT_RUNS)
    plain = {w for s, w, cfg in runs if cfg == "plain-direct"}
    enc = [(s, w) for s, w, cfg in runs if cfg == "enc-proxy"]
    assert all(s is None for s, _, cfg in runs if cfg == "plain-direct")
    assert enc and all(w in plain for _, w in enc)


def test_cpu_ranges():
    assert mc._ranges({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert mc._ranges([3]) == "3"


def test_runs_of_the_second_run():
    runs = mc.parse_runs("plain:point,plainproxy:point,plain:point_k,s3:point_k,plain:write,s2:write")
    assert (None, "point", "plain-proxy") in runs
    assert ("s3", "point_k", "enc-proxy") in runs and ("s2", "write", "enc-proxy") in runs
    for bad in ("s3:point", "s9:point", "plainproxy"):
        with pytest.raises(ValueError):
            mc.parse_runs(bad)


def test_arguments_rounds_and_budgets():
    base = ["--out", "o", "--workdir", "w", "--pgcipher", "p", "--stock", "s", "--proxy", "x", "--keys", "k"]
    a = mc.arguments(base)
    assert a.parts == ["alibaba", "pgbench"] and a.vacuum_before_write
    assert a.pgb_rounds == a.tpcc_rounds == a.rounds == 2 and a.budget == {}
    a = mc.arguments(
        base
        + ["--parts", "pgbench,tprocc,alibaba", "--rounds", "2", "--pgb-rounds", "6"]
        + ["--budget", "pgbench=140,tprocc=225", "--alibaba-budget", "300", "--no-vacuum-before-write"]
    )
    assert a.parts == ["pgbench", "tprocc", "alibaba"] and a.pgb_rounds == 6 and a.tpcc_rounds == 2
    assert a.budget == {"pgbench": 140, "tprocc": 225, "alibaba": 300} and not a.vacuum_before_write
    n = mc.counts(a, a.parts)
    assert n["pgbench"][0] == 3 * 2 * 3 * 6 and n["tprocc"][0] == 2 * 3 * 2
    with pytest.raises(SystemExit):
        mc.arguments(base + ["--parts", "alibaba,peer"])


def _row(scenario, config, rep, metric, value, **kw):
    return dict(scenario=scenario, config=config, rep=rep, metric=metric, value=value, **kw)


def test_summary_of_tprocc_and_the_hop():
    rows = []
    for rep, (s, a) in enumerate([(1000.0, 950.0), (1100.0, 1000.0)], 1):
        for cfg, v in (("stock", s), ("aes-256", a)):
            rows += [
                _row("tproc-c", cfg, rep, "nopm", v, phase="ramp", vus=16),
                _row("tproc-c", cfg, rep, "tpm", 2.2 * v, phase="ramp", vus=16),
                _row("tproc-c", cfg, rep, "server_cpu_us_per_tx", 300.0, phase="ramp", vus=16),
                _row("tproc-c", cfg, rep, "server_cpu_settled", 1, phase="ramp", vus=16),
            ]
        for cfg, v in (("plain-direct", 100.0), ("plain-proxy", 60.0)):
            kw = dict(part="timed", case="plain", workload="point", threads=8)
            rows += [_row("alibaba-sysbench", cfg, rep, "tps", v * rep, **kw)]
            rows += [_row("alibaba-sysbench", cfg, rep, "server_cpu_us_per_tx", 20.0, **kw)]
    rows += [_row("tproc-c", c, 0, "consistency_ok", 1, phase="check") for c in ("stock", "aes-256")]
    rows += [_row("tproc-c", c, 0, "initial_counts_ok", 1, phase="load") for c in ("stock", "aes-256")]
    md = summarize.summary({"meta": {}, "results": rows})
    assert "## tproc-c" in md and "| 16 | 1,000 / 1,100 | 950 / 1,000 | 0.929 (" in md
    assert "stock hold, aes-256 hold" in md and "as specified" in md
    assert (
        "## the hop alone" in md
        and "| point | 8 | 100 / 200 | 60 / 120 | 0.600 (0.300–1.200) | 0.600–0.600 | 20 / 20 |" in md
    )
    assert "did not settle" not in md
    rows.append(_row("tproc-c", "stock", 3, "server_cpu_settled", 0, phase="ramp", vus=16))
    assert "did not settle within the timeout: 1" in summarize.summary({"meta": {}, "results": rows})


def test_summary_of_the_committed_run():
    with open(os.path.join(REPORT, "results.json")) as f:
        md = summarize.summary(json.load(f))
    assert "| s1 | point | 64 |" in md and "| s3 | range_k | 8 |" in md
    assert "| select-only | 64 |" in md and "inside the noise" in md
    # the committed summary.md is this function's output
    with open(os.path.join(REPORT, "summary.md")) as f:
        assert f.read() == md


def test_summary_of_the_second_run():
    run2 = os.path.join(REPORT, "run2")
    with open(os.path.join(run2, "results.json")) as f:
        md = summarize.summary(json.load(f))
    assert "| s3 | point_k | 64 |" in md and "| s2 | write | 8 |" in md
    assert "## the hop alone" in md and "## tproc-c" in md and "| select-only | 64 |" in md
    with open(os.path.join(run2, "summary.md")) as f:
        assert f.read() == md
