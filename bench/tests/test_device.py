"""bench/device: the many-core driver's run list, CPU ranges and server-CPU
settling, and the report tables made from the committed device run."""

import json
import os
import subprocess
import sys
import time

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


def test_settled_cpu_waits_for_exited_children_to_be_reaped():
    me = os.getpid()
    live_before = mc.live_children(me)[0]
    # a child that exits at once, reaped only when waited for
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.time() + 30
    while mc.live_children(me)[1] == 0 and time.time() < deadline:
        time.sleep(0.01)
    cpu, settled = mc.settled_cpu_s(me, live_before, timeout=0.3)
    assert not settled  # the zombie is still there
    child.wait()
    cpu, settled = mc.settled_cpu_s(me, live_before, timeout=2)
    assert settled and cpu > 0


def test_summary_of_the_committed_run():
    with open(os.path.join(REPORT, "results.json")) as f:
        md = summarize.summary(json.load(f))
    assert "| s1 | point | 64 |" in md and "| s3 | range_k | 8 |" in md
    assert "| select-only | 64 |" in md and "inside the noise" in md
    # the committed summary.md is this function's output
    with open(os.path.join(REPORT, "summary.md")) as f:
        assert f.read() == md
