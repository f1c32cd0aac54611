"""proxy: plan, /proc readings, the counting relay, the idle-connection
client, PgBouncer's configuration and the report on synthetic rows (no
server needed; test_smoke.py runs the scenario for real)."""

import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

from bench import cli, procs
from bench.report import write_report
from bench.runner import save_results
from bench.scenarios import SCENARIOS, proxy

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
DATA = os.path.join(os.path.dirname(__file__), "data", "tiny-results.json")
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_registered_needs_no_stock_build():
    assert SCENARIOS["proxy"] is proxy
    assert "proxy" in cli.TINY
    assert cli.needed_installs(["proxy"]) == {"pgcipher"}
    assert cli.needed_installs(["proxy", "micro"]) == {"pgcipher", "stock"}


@pytest.mark.parametrize(
    "args,rc",
    [
        (["--scenario", "proxy"], 1),
        (["--scenario", "proxy", "--profile", "full"], 1),
        (["--scenario", "proxy", "--scenario", "tproc-c"], 0),
        ([], 0),
    ],
)
def test_needs_stock(args, rc):
    r = subprocess.run([sys.executable, "-m", "bench", "needs-stock", *args], cwd=TOP)
    assert r.returncode == rc


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_plan(profile):
    p = proxy.plan(profile)
    hop = len(p["workloads"]) * len(p["modes"]) * len(proxy.PATHS)
    assert p["steps"] == 1 + p["repetitions"] * (hop + len(p["ps_configs"])) + 2
    assert set(p["workloads"]) == {"select-only", "tpcb-like"} and set(p["modes"]) == {"prepared", "simple"}
    assert set(p["ps_configs"]) >= {"enc-proxy", "plain-proxy", "plain-direct"}
    assert p["clients"] == 4 and p["scale"] == 10 and p["idle_connections"] == 300
    assert p["probe_transactions"][0] < p["probe_transactions"][1]
    if profile == "quick":
        assert p["rows"] == 20_000 and p["est_seconds"] < 5 * 60
    else:
        assert p["rows"] == 100_000 and p["repetitions"] >= 5


def test_tiny_plan_is_tiny():
    p = proxy.plan("quick", cli.TINY["proxy"])
    assert p["seconds"] <= 1 and p["rows"] <= 1000 and p["scale"] == 1
    assert p["est_seconds"] < 90


def test_settings_listen_on_tcp_for_direct_clients():
    s = proxy.settings(proxy.plan("quick"))
    assert s["listen_addresses"] == "'127.0.0.1'"
    assert s["max_connections"] >= 2 * 50


def test_proc_readings_of_this_process():
    f = procs.stat_fields(os.getpid())
    assert int(f[1]) == os.getppid()
    sum(range(2_000_000))  # burn a little CPU
    own = procs.process_cpu_s(os.getpid())
    assert own > 0
    # the process's own time first: it only grows while the tree is read
    assert procs.tree_cpu_s(os.getpid()) >= own
    assert procs.rss_kib(os.getpid()) > 1000


def test_tree_cpu_s_counts_a_child_reaped_while_the_children_are_listed(monkeypatch):
    # a fake /proc: the postmaster (1) has used 10 ticks itself and 100 in
    # children it reaped; its one backend (2) has used 50 and is reaped while
    # the children are being listed, as a run's backends are when read at once
    state = {"reaped": False}

    def stat_fields(pid):
        cut = 150 if state["reaped"] else 100
        return ["S", "0"] + ["0"] * 9 + ["6", "4", str(cut), "0"]

    def children(pid):
        state["reaped"] = True  # reaped after the postmaster was read
        return []

    monkeypatch.setattr(procs, "stat_fields", stat_fields)
    monkeypatch.setattr(procs, "_children", children)
    # its 50 ticks are neither lost (read before the reaping, gone from
    # the listing) nor counted twice
    assert procs.tree_cpu_s(1) == pytest.approx(160 / os.sysconf("SC_CLK_TCK"))


# a stand-in postmaster: on each line it forks a "backend" that works for
# 0.3 CPU-seconds after its client has gone, then exits, and reaps it only
# 0.3 s after it exited
_POSTMASTER = """
import os, sys, time
print("ready", flush=True)
for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        while time.process_time() < 0.3:
            pass
        os._exit(0)
    print(pid, flush=True)
    while open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.01)
    time.sleep(0.3)
    os.waitpid(pid, 0)
"""


def test_server_cpu_waits_for_the_runs_backends_to_exit_and_be_reaped():
    pm = subprocess.Popen(
        [sys.executable, "-c", _POSTMASTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert pm.stdout.readline() == "ready\n"
        server = procs.ServerCPU(pm.pid)
        cpu0 = server.read()
        assert server.settled and server.pids == set()
        pm.stdin.write("go\n")
        pm.stdin.flush()
        backend = int(pm.stdout.readline())  # the run is over; its backend still works
        cpu1 = server.read()
        assert server.settled
        assert backend not in procs.child_states(pm.pid)  # exited and reaped
        # all of the backend's CPU is in this run's reading (read at once, it was ~0)
        assert cpu1 - cpu0 >= 0.28
    finally:
        pm.kill()
        pm.wait()


def test_settle_children_times_out_on_a_zombie():
    me = os.getpid()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.time() + 30
        while procs.child_states(me).get(child.pid) != "Z" and time.time() < deadline:
            time.sleep(0.01)
        pids, settled = procs.settle_children(me, timeout=0.3)
        assert not settled and child.pid not in pids
    finally:
        child.wait()
    pids, settled = procs.settle_children(me, timeout=5)
    assert settled and child.pid not in pids


def test_stat_fields_with_spaces_and_parentheses_in_the_name(tmp_path, monkeypatch):
    line = "42 (a (b) c) S 1 42 42 0 -1 4194304 100 0 0 0 7 3 11 13 20 0 1 0 100 1000 200\n"
    real_open = open
    monkeypatch.setattr(
        "builtins.open",
        lambda path, *a, **k: (
            real_open(tmp_path / "stat", *a, **k) if path == "/proc/42/stat" else real_open(path, *a, **k)
        ),
    )
    (tmp_path / "stat").write_text(line)
    f = procs.stat_fields(42)
    assert f[0] == "S" and f[1] == "1" and f[11:15] == ["7", "3", "11", "13"]
    assert procs.process_cpu_s(42) == pytest.approx(10 / os.sysconf("SC_CLK_TCK"))


def _echo_server():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return

            def echo(c=c):
                while True:
                    d = c.recv(4096)
                    if not d:
                        break
                    c.sendall(d * 2)
                c.close()

            threading.Thread(target=echo, daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return srv


def test_counting_relay_counts_both_directions():
    srv = _echo_server()
    relay = procs.CountingRelay(srv.getsockname()[1])
    try:
        for payload in (b"hello", b"x" * 100_000):
            s = socket.create_connection(("127.0.0.1", relay.port))
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            got = b""
            while True:
                d = s.recv(65536)
                if not d:
                    break
                got += d
            s.close()
            assert got == payload * 2
        assert relay.counts() == (5 + 100_000, 2 * (5 + 100_000))
    finally:
        relay.close()
        srv.close()


def _fake_postgres(messages):
    """A server that reads a startup message and answers with messages."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    seen = {}

    def serve():
        c, _ = srv.accept()
        n = struct.unpack("!I", c.recv(4))[0]
        body = b""
        while len(body) < n - 4:
            body += c.recv(n - 4 - len(body))
        seen["startup"] = body
        c.sendall(b"".join(messages))
        seen["after"] = c.recv(5)
        c.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv, seen


def _msg(kind, payload):
    return kind + struct.pack("!I", len(payload) + 4) + payload


def test_idle_connection_reaches_ready_for_query():
    srv, seen = _fake_postgres(
        [_msg(b"R", struct.pack("!I", 0)), _msg(b"S", b"a\0b\0"), _msg(b"K", bytes(8)), _msg(b"Z", b"I")]
    )
    s = procs.idle_connection(srv.getsockname()[1])
    procs.close_connection(s)
    srv.close()
    assert seen["startup"] == struct.pack("!I", 196608) + b"user\0postgres\0database\0postgres\0\0"


def test_idle_connection_refuses_passwords():
    srv, _ = _fake_postgres([_msg(b"R", struct.pack("!I", 3))])
    with pytest.raises(RuntimeError, match="password"):
        procs.idle_connection(srv.getsockname()[1])
    srv.close()


class FakeCluster:
    def __init__(self, d):
        self.dir = d
        self.port = 5999


def test_pgbouncer_ini_session_trust_socket(tmp_path):
    ini = procs.pgbouncer_ini(FakeCluster(str(tmp_path / "c")), 6544, str(tmp_path), 54)
    text = open(ini).read()
    for line in (
        "pool_mode = session",
        "auth_type = trust",
        "listen_addr = 127.0.0.1",
        "listen_port = 6544",
        f"postgres = host={tmp_path / 'c'} port=5999 dbname=postgres",
        "default_pool_size = 54",
        "unix_socket_dir =\n",
    ):
        assert line in text
    assert (tmp_path / "userlist.txt").read_text() == '"postgres" ""\n'


def test_proxy_args():
    args = procs.proxy_args("/b/pgcipher-proxy", FakeCluster("/w/c"), 7000, "/w/c/cmk.hex", record="/w/r")
    assert args == [
        "/b/pgcipher-proxy",
        "--listen",
        "127.0.0.1:7000",
        "--upstream",
        "host=/w/c port=5999",
        "--cmk-file",
        "/w/c/cmk.hex",
        "--cmk-name",
        "bench",
        "--record",
        "/w/r",
    ]


class FakeRun:
    def __init__(self, installs):
        self.installs = installs


class FakeInstall:
    prefix = "/nowhere/install"


def test_missing_proxy_is_a_clear_error(tmp_path):
    inst = FakeInstall()
    inst.proxy = str(tmp_path / "pgcipher-proxy")
    inst.keys_tool = inst.pgbouncer = "/bin/true"
    with pytest.raises(
        RuntimeError, match=r"pgcipher-proxy not found at .*pgcipher-proxy \(./pgcipher build"
    ):
        procs.find_tools(FakeRun({"pgcipher": inst}))
    inst.proxy, inst.pgbouncer = "/bin/true", str(tmp_path / "pgbouncer")
    with pytest.raises(RuntimeError, match="pgbouncer not found .*Debian package pgbouncer"):
        procs.find_tools(FakeRun({"pgcipher": inst}))


# ---------------------------------------------------------------- report

# TPS per path (hop) and per configuration (point select)
HOP = {"direct": 10_000, "proxy": 6_000, "pgbouncer": 7_000}
PS = {"enc-proxy": 5_800, "plain-proxy": 6_000, "plain-direct": 10_000, "enc-direct": 9_900}


def synthetic_rows(reps=3, ps=PS):
    rows = []

    def rec(cfg, rep, metric, value, **kw):
        rows.append(dict(scenario="proxy", config=cfg, rep=rep, metric=metric, value=value, **kw))

    rec("pgbouncer", 0, "version_seen", 1, part="setup", detail="PgBouncer 1.18.0")
    for cfg in ("enc-proxy", "plain-proxy"):
        rec(cfg, 0, "load_rows_per_s", 50_000.0, part="load")
    rec("enc-direct", 0, "datum_bytes", 180.0, part="load")
    rec("plain-direct", 0, "datum_bytes", 121.0, part="load")
    rec("enc-proxy", 0, "decrypt_ok", 1, part="load")
    for rep in range(1, reps + 1):
        noise = 1 + 0.004 * (rep - 2)
        for w in ("select-only", "tpcb-like"):
            for mode in ("prepared", "simple"):
                for path, tps in HOP.items():
                    kw = dict(part="hop", workload=w, mode=mode)
                    rec(path, rep, "tps", tps * noise, **kw)
                    rec(path, rep, "server_cpu_us_per_tx", 20.0, **kw)
                    rec(path, rep, "client_cpu_us_per_tx", 10.0, **kw)
                    if path != "direct":
                        rec(path, rep, "hop_cpu_us_per_tx", 30.0 if path == "proxy" else 15.0, **kw)
        for cfg, tps in ps.items():
            kw = dict(part="point-select", workload="point-select", mode="prepared")
            rec(cfg, rep, "tps", tps * noise, **kw)
            rec(cfg, rep, "latency_ms", 0.4, **kw)
            rec(cfg, rep, "server_cpu_us_per_tx", 15.0, **kw)
            if cfg.endswith("proxy"):
                rec(cfg, rep, "hop_cpu_us_per_tx", 33.0, **kw)
    for w in ("select-only", "point-select"):
        cfg = "proxy" if w == "select-only" else "enc-proxy"
        kw = dict(part="bytes", workload=w, mode="prepared")
        rec(cfg, 0, "bytes_client_to_proxy_per_tx", 49.0, **kw)
        rec(cfg, 0, "bytes_proxy_to_server_per_tx", 49.0, **kw)
        rec(cfg, 0, "bytes_proxy_to_client_per_tx", 183.0, **kw)
        rec(cfg, 0, "bytes_client_to_proxy_per_connection", 758.0, **kw)
        rec(cfg, 0, "bytes_proxy_to_server_per_connection", 752.0, **kw)
    for name, (r0, r1, rk) in (("proxy", (17_000, 17_100, 19_060)), ("pgbouncer", (8_600, 8_640, 8_738))):
        for metric, v in (
            ("rss_kib_0", r0),
            ("rss_kib_1", r1),
            ("rss_kib_k", rk),
            ("rss_kib_per_connection", (rk - r1) / 49),
        ):
            rec(name, 0, metric, v, part="memory", connections=50)
    return rows


def _line(text, start):
    return next(line for line in text.splitlines() if line.startswith(start))


def test_report_on_synthetic_rows(tmp_path):
    p = proxy.plan("quick")
    text, pngs = proxy.report(synthetic_rows(), p, str(tmp_path))
    assert (
        "| workload | mode | direct | proxy | pgbouncer | proxy / direct (95% CI) | pgbouncer / direct (95% CI) |"
        in text
    )
    assert _line(text, "| select-only | prepared | 10,000 | 6,000 | 7,000 | 0.600 (")
    assert "proxy / pgbouncer (TPS, 95% CI): select-only prepared 0.857 (" in text
    assert "PgBouncer: PgBouncer 1.18.0." in text
    # CPU: server + middle + pgbench, and the middle's share of the direct total
    assert _line(text, "| select-only | prepared | proxy | 20 | 30 | 10 | 60 | 1.00 |")
    assert _line(text, "| select-only | prepared | pgbouncer | 20 | 15 | 10 | 45 | 0.50 |")
    target = _line(text, "| enc-proxy / plain-proxy | 0.967 (")
    assert "≥ 0.90" in target and target.rstrip(" |").endswith("met")
    assert _line(text, "| enc-proxy / plain-direct | 0.580 (")
    assert "stored 180 bytes per value against 121" in text
    assert _line(text, "| point-select | enc-proxy | prepared | 49.0 | 49.0 | 1.000 | 183.0 | 758 | 752 |")
    assert _line(text, "| proxy | 17,000 | 17,100 | 19,060 | 40.0 |")
    assert _line(text, "| pgbouncer | 8,600 | 8,640 | 8,738 | 2.0 |")
    assert "correct" in text
    assert pngs == ["proxy-tps.png"]
    with open(tmp_path / pngs[0], "rb") as f:
        assert f.read(8) == PNG_MAGIC


def test_report_target_not_met_and_missing_parts(tmp_path):
    p = proxy.plan("quick", {"ps_configs": ["enc-proxy", "plain-proxy", "plain-direct"]})
    rows = [
        r
        for r in synthetic_rows(ps=dict(PS, **{"enc-proxy": 4_000}))
        if r.get("part") not in ("bytes", "memory") and r["config"] != "enc-direct"
    ]
    text, _ = proxy.report(rows, p, str(tmp_path))
    assert _line(text, "| enc-proxy / plain-proxy | 0.667 (").rstrip(" |").endswith("not met")
    assert "enc-direct" not in text
    assert "### Bytes per transaction" not in text and "### Memory per connection" not in text


def test_full_report_includes_proxy(tmp_path):
    with open(DATA) as f:
        data = json.load(f)
    p = proxy.plan("quick")
    meta = dict(data["meta"], scenarios={"proxy": p})
    save_results(
        str(tmp_path),
        meta,
        synthetic_rows(),
        ["pgbench -h 127.0.0.1 -p 5432 -S"],
        {"proxy": proxy.settings(p)},
    )
    text = open(write_report(str(tmp_path))).read()
    assert "## proxy:" in text and "`listen_addresses = '127.0.0.1'`" in text
    assert "![proxy-tps.png](proxy-tps.png)" in text
