"""alibaba-sysbench: the plan, the registration and the Lua script's
statement templates (the report's, unchanged)."""

import os

from bench import cli
from bench.scenarios import SCENARIOS
from bench.scenarios import alibaba_sysbench as ab


def test_registered_and_needs_no_stock_build():
    assert SCENARIOS["alibaba-sysbench"] is ab
    assert "alibaba-sysbench" in cli.TINY
    assert cli.needed_installs(["alibaba-sysbench"]) == {"pgcipher"}


def test_plan_counts_every_run():
    p = ab.plan("quick")
    runs = ab._runs(p)
    # plaintext: 5 workloads × (direct, proxy); encrypted: 3 + 3 + 2
    assert len(runs) == 10 + 8
    assert p["steps"] == 1 + len(runs) * len(p["threads"]) * p["repetitions"]
    assert set(ab.TARGETS) == set(ab.ALIBABA) == {(s, w) for s, v in ab.SCENARIOS.items() for w in v[3]}


def test_lua_has_the_reports_statements():
    with open(ab.LUA) as f:
        lua = f.read()
    for sql in (
        'SELECT c FROM " .. t .. " WHERE id = ?',
        'SELECT SUM(k) FROM " .. t .. " WHERE id BETWEEN ? AND ?',
        "SET k = k + 1 WHERE id = ?",
        "SET c = ? WHERE id = ?",
        'DELETE FROM " .. t .. " WHERE id = ?',
        'INSERT INTO " .. t .. " (id, k, c, pad) VALUES (?, ?, ?, ?)',
        'SELECT c FROM " .. t .. " WHERE k = ?',
        'SELECT SUM(k) FROM " .. t .. " WHERE k BETWEEN ? AND ?',
    ):
        assert sql in lua, sql
    assert os.path.basename(os.path.dirname(ab.LUA)) == "sysbench"
