"""Smoke run of the quick profile with tiny sizes and durations: every output
is produced and well formed.  Needs both builds (and, for the proxy
scenario, pgcipher-proxy and PgBouncer); runs when BENCH_SMOKE=1
(./pgcipher test sets it), skipped otherwise."""

import csv
import json
import os
import subprocess
import sys
import tempfile

import pytest

from bench import headline, peer
from bench.scenarios import SCENARIOS

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PGCIPHER_BUILD", os.path.join(TOP, "build"))
# the open-source peer joins its scenarios where it is built (bench/peer)
PEER_BUILT, PEER_WHY = peer.status(
    os.path.join(BUILD, "open_pg_tde", "install"), os.path.join(BUILD, "stock", "install")
)

SMOKE = pytest.mark.skipif(
    os.environ.get("BENCH_SMOKE") != "1", reason="set BENCH_SMOKE=1 (needs both builds)"
)
# proxy has a smoke run of its own below (it needs the proxy and PgBouncer);
# pg-upgrade has its own in test_pg_upgrade.py (it needs PostgreSQL 15),
# aio in test_aio.py (it needs PostgreSQL 18), citus in test_citus.py (it
# needs Citus from ../shared/vendor), tde-worst-cases in test_tde_worst_cases.py
OWN_SMOKE = {
    "proxy",
    "pooler",
    "proxy-orm",
    "alibaba-sysbench",
    "pg-upgrade",
    "aio",
    "citus",
    "tde-worst-cases",
}


def _bench(tmp_path, *args, timeout=1800):
    out = tmp_path / "results"
    work = tempfile.mkdtemp(prefix="pgb")  # short: Unix socket paths live here
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "run",
            "--profile",
            "quick",
            "--tiny",
            "--out",
            str(out),
            "--workdir",
            work,
            *args,
        ],
        cwd=TOP,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    print(r.stdout[-3000:], r.stderr[-3000:])
    return r, out, work


# the quick profile's scenarios without a smoke run of their own, in two
# runs that pytest-xdist can give to two workers: the servers' workloads,
# and the cipher's (micro's limits and the instruction counts that the
# headline compares with them stay in one run)
SERVER_GROUP = (
    "cybertec-pgbench",
    "cybertec-1mb",
    "tproc-c",
    "wal-heavy",
    "online-rotation",
    "online-encryption",
)
CIPHER_GROUP = ("micro", "columns-micro", "instructions")


def test_groups_cover_every_scenario_once():
    assert sorted(SERVER_GROUP + CIPHER_GROUP) == sorted(n for n in SCENARIOS if n not in OWN_SMOKE)


@SMOKE
@pytest.mark.parametrize("group", [SERVER_GROUP, CIPHER_GROUP], ids=["servers", "cipher"])
def test_quick_profile_smoke(tmp_path, group):
    r, out, work = _bench(tmp_path, *[a for n in group for a in ("--scenario", n)])
    assert r.returncode == 0
    assert "elapsed" in r.stdout and "left]" in r.stdout  # progress lines
    data = json.loads((out / "results.json").read_text())
    scenarios = set(data["meta"]["scenarios"])
    assert scenarios == set(group)
    assert {row["scenario"] for row in data["results"]} == scenarios
    assert all(isinstance(row["value"], (int, float)) for row in data["results"])
    with open(out / "results.csv") as f:
        assert len(list(csv.DictReader(f))) == len(data["results"])
    report = (out / "report.md").read_text()
    for s in scenarios:
        assert f"## {s}:" in report
    pngs = list(out.glob("*.png"))
    assert len(pngs) >= (4 if group == SERVER_GROUP else 1)
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for name in group:
        assert not os.path.exists(os.path.join(work, name)), f"{name}: clusters or files left behind"
    if group == SERVER_GROUP:
        checks = [row for row in data["results"] if row["metric"] == "consistency_ok"]
        assert checks and all(row["value"] == 1 for row in checks)
        wal = {(row["workload"], row["metric"]) for row in data["results"] if row["scenario"] == "wal-heavy"}
        for w in ("copy", "ctas", "vacuum-full"):
            assert (w, "mb_per_s") in wal and (w, "wal_mb") in wal
        assert ("tpcb", "tps") in wal
    else:
        _cipher_group_checks(data, out)
    # the peer ran in each of its scenarios where built, and said why not where not
    peer_rows = {row["scenario"] for row in data["results"] if row["config"].startswith(peer.NAME)}
    if PEER_BUILT:
        assert peer_rows == (set(peer.SCENARIOS) - OWN_SMOKE) & scenarios
        assert data["meta"]["peer"] in report
        if group == SERVER_GROUP:
            assert "tde_heap in postgres: open_pg_tde_is_encrypted = true" in r.stdout
            assert "tde_heap in tpcc: open_pg_tde_is_encrypted = true" in r.stdout
            walenc = [
                row["value"]
                for row in data["results"]
                if row["metric"] == "wal_encrypted" and row["config"] == peer.NAME
            ]
            assert walenc == [1]
    else:
        assert not peer_rows and f"run without open_pg_tde: {PEER_WHY}" in r.stdout


def _cipher_group_checks(data, out):
    cols = {(row["config"], row["metric"]) for row in data["results"] if row["scenario"] == "columns-micro"}
    for kind in ("int8", "EQ", "ORD", "ORD1", "MATCH"):
        assert (kind, "ns_per_comparison") in cols and (kind, "index_build_s") in cols
    assert ("MATCH", "candidates") in cols and ("text", "matches") in cols
    assert ("ORD", "client_us_per_value") in cols and ("RND", "datum_bytes") in cols
    ins = [row for row in data["results"] if row["scenario"] == "instructions"]
    counted = {
        (row["config"], row["workload"])
        for row in ins
        if row["metric"] == "instructions" and row["value"] > 0
    }
    ins_cfgs = ("stock", "aes-256") + ((peer.NAME,) if PEER_BUILT else ())
    assert counted == {(c, w) for c in ins_cfgs for w in SCENARIOS["instructions"].WORKLOADS}
    assert all(row["value"] == 1 for row in ins if row["metric"] == "same_answers")
    spilled = [row["value"] for row in ins if row["metric"] == "temp_file_mb"]
    assert spilled and all(v > 0 for v in spilled)  # the sort wrote temporary files
    # the cipher calibrated on both CPUs for XTS and the WAL's CTR; three limits in micro
    calibrated = {
        row["case"] for row in ins if row["workload"] == "calibration" and row["config"] == "aes-256"
    }
    assert calibrated == set(SCENARIOS["instructions"].CASES)
    limits = {row["case"] for row in data["results"] if row["scenario"] == "micro"}
    assert {"openssl-speed", "openssl-wheel", "openssl-speed-ctr", "openssl-wheel-ctr"} <= limits
    lines = headline.headline(headline.load(str(out)))
    assert any("the cipher alone" in ln for ln in lines if ln.startswith("instructions "))


@SMOKE
def test_proxy_orm_smoke(tmp_path):
    """The proxy-orm scenario alone, tiny: every workload on every
    configuration, the proxy's CPU, the answers checked, the report."""
    r, out, work = _bench(tmp_path, "--scenario", "proxy-orm", timeout=900)
    assert r.returncode == 0
    data = json.loads((out / "results.json").read_text())
    rows = [row for row in data["results"] if row["scenario"] == "proxy-orm"]
    got = {(row["config"], row["metric"], row.get("workload")) for row in rows}
    for w in ("bulk-unnest", "group-sum", "like-limit"):
        for cfg in ("enc-proxy", "plain-proxy", "plain-direct", "plain-direct-2"):
            assert (cfg, "tps", w) in got
        for cfg in ("enc-proxy", "plain-proxy"):
            assert (cfg, "proxy_cpu_us_per_stmt", w) in got
    assert ("enc-proxy", "rows_per_s", "bulk-unnest") in got
    assert [row["value"] for row in rows if row["metric"] == "answers_ok"] == [1]
    report = (out / "report.md").read_text()
    assert "## proxy-orm:" in report and "Noise floor" in report
    assert list(out.glob("proxy_orm_ratios.png"))


@SMOKE
def test_proxy_smoke(tmp_path):
    """The proxy scenario alone, tiny: every metric, the report's sections
    and plot, no process or cluster left behind."""
    r, out, work = _bench(tmp_path, "--scenario", "proxy", timeout=900)
    assert r.returncode == 0
    assert "proxy hop select-only -M prepared proxy round 1:" in r.stdout
    assert "proxy point-select enc-proxy round 2:" in r.stdout
    data = json.loads((out / "results.json").read_text())
    rows = [row for row in data["results"] if row["scenario"] == "proxy"]
    assert set(data["meta"]["scenarios"]) == {"proxy"}
    assert "stock" not in data["meta"]["system"]["installs"]  # runs without the stock build
    assert all(isinstance(row["value"], (int, float)) for row in rows)
    got = {(row["config"], row["metric"], row.get("workload"), row.get("mode")) for row in rows}
    for w in ("select-only", "tpcb-like"):
        for mode in ("prepared", "simple"):
            for path in ("direct", "proxy", "pgbouncer"):
                assert (path, "tps", w, mode) in got and (path, "server_cpu_us_per_tx", w, mode) in got
            for path in ("proxy", "pgbouncer"):
                assert (path, "hop_cpu_us_per_tx", w, mode) in got
            assert ("proxy", "bytes_proxy_to_server_per_tx", w, mode) in got
    for cfg in ("enc-proxy", "plain-proxy", "plain-direct", "enc-direct"):
        assert (cfg, "tps", "point-select", "prepared") in got
    assert ("enc-proxy", "hop_cpu_us_per_tx", "point-select", "prepared") in got
    assert [row["value"] for row in rows if row["metric"] == "decrypt_ok"] == [1]
    for metric in (
        "bytes_client_to_proxy_per_tx",
        "bytes_proxy_to_server_per_tx",
        "bytes_proxy_to_client_per_tx",
    ):
        values = [row["value"] for row in rows if row["metric"] == metric]
        assert len(values) == 6 and all(v > 0 for v in values)
    for name in ("proxy", "pgbouncer"):
        assert (name, "rss_kib_per_connection", None, None) in got
    report = (out / "report.md").read_text()
    assert (
        "## proxy:" in report
        and "proxy / direct (95% CI)" in report
        and "pgbouncer / direct (95% CI)" in report
    )
    assert "enc-proxy / plain-proxy" in report and "≥ 0.90" in report
    assert "![proxy-tps.png](proxy-tps.png)" in report
    assert (out / "proxy-tps.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not os.path.exists(os.path.join(work, "proxy")), "cluster left behind"
    assert not _processes_mentioning(work), "processes left behind"


@SMOKE
def test_pooler_smoke(tmp_path):
    """The pooler scenario alone, tiny: every path where it fits, the CPU
    of the hop, latencies, many clients over a small pool without an
    error, the report."""
    r, out, work = _bench(tmp_path, "--scenario", "pooler", timeout=900)
    assert r.returncode == 0
    data = json.loads((out / "results.json").read_text())
    rows = [row for row in data["results"] if row["scenario"] == "pooler"]
    got = {(row["config"], row["metric"], row.get("workload"), row.get("clients")) for row in rows}
    for path in (
        "direct",
        "pgbouncer-session",
        "pgbouncer-transaction",
        "proxy-session",
        "proxy-transaction",
    ):
        assert (path, "tps", "select-only", 2) in got and (path, "p99_ms", "select-only", 2) in got
    for path in ("pgbouncer-transaction", "proxy-transaction"):
        assert (path, "tps", "select-only", 40) in got  # 40 clients, max_connections 30: pooled only
        assert (path, "hop_cpu_us_per_tx", "select-only", 40) in got
    assert ("direct", "tps", "select-only", 40) not in got
    assert ("proxy-transaction", "tps", "enc-point", 40) in got
    many = {row["config"]: row["value"] for row in rows if row["metric"] == "many_errors"}
    assert many == {"proxy-transaction": 0, "pgbouncer-transaction": 0}
    report = (out / "report.md").read_text()
    assert "## pooler:" in report and "proxy / PgBouncer" in report and "idle clients" in report
    assert not _processes_mentioning(work), "processes left behind"


@SMOKE
def test_alibaba_sysbench_smoke(tmp_path):
    """Alibaba's sysbench statements through the proxy, tiny: every scenario
    and workload ran through unchanged sysbench (SUM(k) and k = k + 1 on
    encrypted k computed by the proxy), answers checked, report and plot."""
    r, out, work = _bench(tmp_path, "--scenario", "alibaba-sysbench", timeout=900)
    assert r.returncode == 0
    data = json.loads((out / "results.json").read_text())
    rows = [row for row in data["results"] if row["scenario"] == "alibaba-sysbench"]
    got = {(row["config"], row["metric"], row.get("case")) for row in rows}
    timed = {(row["config"], row["workload"]) for row in rows if row["metric"] == "tps"}
    for w in ("point", "range", "write", "point_k", "range_k"):
        for cfg in ("plain-direct", "plain-proxy", "enc-proxy"):
            assert (cfg, w) in timed, (cfg, w)
    assert all(row["value"] > 0 for row in rows if row["metric"] == "tps")
    assert [row["value"] for row in rows if row["metric"] == "answers_ok"] == [1, 1, 1]
    for case in ("s1", "s2", "s3"):
        assert ("enc-proxy", "load_rows_per_s", case) in got and ("enc-proxy", "answers_ok", case) in got
    # both placements: (a) from the free one, (b) from the pinned one
    placements = {row.get("placement") for row in rows if row["metric"] == "tps"}
    assert placements == {"free", "pinned"}, placements
    report = (out / "report.md").read_text()
    assert "## alibaba-sysbench:" in report and "enc-proxy / plain-direct (95% CI)" in report
    assert "(a) The server's CPU per transaction" in report and "(b) TPS with the server pinned" in report
    assert "| s3 | range_k | 2 |" in report.split("(b) TPS")[1]
    assert (out / "alibaba-ratios.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not os.path.exists(os.path.join(work, "alibaba-sysbench")), "cluster left behind"
    assert not _processes_mentioning(work), "processes left behind"


def _processes_mentioning(text):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and "pytest" not in cmdline:
            found.append(cmdline)
    return found


@SMOKE
def test_proxy_scenario_without_the_proxy_fails_clearly(tmp_path):
    r, out, work = _bench(
        tmp_path, "--scenario", "proxy", "--proxy", str(tmp_path / "no-such-proxy"), timeout=120
    )
    assert r.returncode == 1
    assert f"pgcipher-proxy not found at {tmp_path / 'no-such-proxy'}" in r.stdout + r.stderr
    assert "proxy FAILED" in r.stdout
    assert "No results" in (out / "report.md").read_text()


@SMOKE
def test_second_run_refused_in_a_busy_workdir(tmp_path):
    """A run removes its working directory when it ends, so a second run in
    the same one would delete the first one's clusters under its servers:
    it is refused while the first holds the directory's lock."""
    import fcntl

    work = tempfile.mkdtemp(prefix="pgb")
    with open(os.path.join(work, ".lock"), "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        r = subprocess.run(
            [sys.executable, "-m", "bench", "run", "--tiny", "--scenario", "micro"]
            + ["--workdir", work, "--out", str(tmp_path / "out")],
            cwd=TOP,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "another benchmark run is using" in r.stderr
    assert os.path.exists(os.path.join(work, ".lock")), "the busy directory was removed"
