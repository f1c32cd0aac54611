"""rights_audit_cost.py — what decryption rights (design 13.12) and the
audit log (design 15.15) cost on Alibaba's s1 point and write statements
through pgcipher-proxy (issue 44, item 7).

s1's table (k enc_int4 EQ, c and pad enc_text RND; the alibaba-sysbench
scenario's DDL and rows) twice in one cluster: "enc", whose columns have
no right (every role may use them, as before rights existed), and
"enc_r", whose three columns grant the benchmark's role read, signed by
pgcipher-keys.  Configurations, interleaved over the rounds:

    base          enc through a proxy without an audit log
    rights        enc_r through another such proxy: every statement's uses
                  and every result's columns checked against the grants
    rights+audit  enc_r through a proxy writing the audit log (a record per
                  statement, MAC-chained)
    rights+req    enc_r through a proxy with audit-required on (a record
                  before each statement is sent, and one after)
    base-again    base measured again in each round: its ratio to base is
                  the noise floor the others' ratios are read against

Workloads, pgbench -M prepared, one client: point (SELECT c FROM t WHERE
id = ?) and write (s1's transaction: UPDATE SET k = k + 1 computed by the
proxy, UPDATE SET c, DELETE and INSERT, in BEGIN/COMMIT).  Printed per
round; then the medians over the rounds of TPS, the proxy's CPU and the
server's CPU per transaction, and each configuration's TPS and proxy CPU
against base's, with the spread (min-max) of the per-round ratios.

    runuser -u pgcipher -- env PGCIPHER_BUILD=$PWD/build \\
        build/venv/bin/python -m bench.experiments.rights_audit_cost [ROUNDS [SECONDS [ROWS [WARMUP]]]]

The first WARMUP rounds (default 2) are run and printed but left out of
the medians: on this project's VM the first rounds of a fresh cluster
ran at a third of the later ones' TPS, in every configuration alike.
"""

import os
import statistics
import subprocess
import sys

from bench import procs
from bench.experiments.rmw_server_cpu import STATEMENTS, _Commands, script, started_cluster, teardown
from bench.scenarios import alibaba_sysbench as ali

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PGCIPHER_BUILD", os.path.join(TOP, "build"))
WORKLOADS = {
    "point": "SELECT c FROM @T WHERE id = :id;",
    "write": "\n".join(STATEMENTS.values()),
}
CONFIGS = ("base", "base-again", "rights", "rights+audit", "rights+req")


def grant(keys_bin, cmk, wrapped, table, col, role):
    r = subprocess.run(
        [
            keys_bin,
            "grant",
            "--cmk-file",
            cmk,
            "--cmk-name",
            "bench",
            "--key-name",
            "test1",
            "--wrapped-cek",
            wrapped,
            "--column",
            f"public.{table}.{col}",
            "--role",
            role,
            "--access",
            "read",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return r.stdout


def spread(xs):
    return f"{min(xs):.3f}-{max(xs):.3f}"


def against_base(tps, ptx, w, cfg):
    """cfg's median TPS and proxy CPU ratios to base's, with the spread of
    the per-round ratios ("" for base itself)."""
    if cfg == "base":
        return ""
    rt = [a / b for a, b in zip(tps[(w, cfg)], tps[(w, "base")])]
    rp = [a / b for a, b in zip(ptx[(w, cfg)], ptx[(w, "base")])]
    return (
        f"   TPS x{statistics.median(rt):.3f} [{spread(rt)}]"
        f"   proxy CPU x{statistics.median(rp):.3f} [{spread(rp)}]"
    )


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    rows = int(sys.argv[3]) if len(sys.argv) > 3 else 10_000
    warmup = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    c = started_cluster("rights")
    keys_bin = os.path.join(BUILD, "bin", "pgcipher-keys")
    proxy_bin = os.path.join(BUILD, "bin", "pgcipher-proxy")
    proxies = {}
    try:
        cmk = procs.new_cmk(keys_bin, c)
        audit = os.path.join(c.dir, "audit.log")
        # a proxy process per configuration: a process's own state (its
        # heap, its garbage collector's pace) is then in base-again's
        # noise floor, not in a configuration's cost
        for name in ("base", "base-again", "rights"):
            proxies[name] = procs.start_proxy(proxy_bin, c, name, cmk)
        proxies["rights+audit"] = procs.start_proxy(proxy_bin, c, "audit", cmk, extra=["--audit-log", audit])
        proxies["rights+req"] = procs.start_proxy(
            proxy_bin, c, "req", cmk, extra=["--audit-log", audit + "-req", "--audit-required", "on"]
        )
        port = proxies["base"].port
        data = os.path.join(c.dir, "t.tsv")
        with open(data, "w") as f:
            f.write("".join(f"{i}\t{k}\t{cc}\t{pad}\n" for i, k, cc, pad in ali._rows(rows, 20261128)))
        procs.psql_tcp(c, port, "SELECT pgcipher.add_column_key('test1')")
        _, cols, binds, _ = ali.SCENARIOS["s1"]
        for table in ("enc", "enc_r"):
            procs.psql_tcp(c, port, f"CREATE TABLE {table} ({cols})")
            for col, level in binds.items():
                procs.psql_tcp(
                    c, port, f"SELECT pgcipher.encrypt_column('{table}', '{col}', 'test1', '{level}')"
                )
            procs.psql_tcp(c, port, f"\\copy {table} FROM '{data}'")
            c.psql(f"CREATE INDEX ON {table} (k)")
        wrapped = c.psql(
            "SELECT encode(wrapped_cek, 'hex') FROM pgcipher.column_keys WHERE key_name = 'test1'"
        ).strip()
        for col in binds:
            procs.psql_tcp(c, port, grant(keys_bin, cmk, wrapped, "enc_r", col, "postgres"))
        c.psql("VACUUM ANALYZE")
        c.psql("CHECKPOINT")
        where = {
            "base": ("enc", "base"),
            "base-again": ("enc", "base-again"),
            "rights": ("enc_r", "rights"),
            "rights+audit": ("enc_r", "rights+audit"),
            "rights+req": ("enc_r", "rights+req"),
        }
        files = {}
        for w, body in WORKLOADS.items():
            for cfg, (table, _) in where.items():
                path = os.path.join(c.dir, f"{w}-{cfg}.sql")
                with open(path, "w") as f:
                    f.write(script(rows, body.replace("@T", table)))
                files[(w, cfg)] = path
        cpu = procs.ServerCPU(procs.postmaster_pid(c))
        tps, ptx, stx = {}, {}, {}
        for r in range(warmup + rounds):
            for w in WORKLOADS:
                for cfg in CONFIGS:
                    px = proxies[where[cfg][1]]
                    before, pbefore = cpu.read(), procs.process_cpu_s(px.pid)
                    args = ["-n", "-M", "prepared", "-c", "1", "-T", str(seconds), "-f", files[(w, cfg)]]
                    m, _ = procs.pgbench(_Commands, c, px.port, args, timeout=seconds + 120)
                    used, pused = cpu.read() - before, procs.process_cpu_s(px.pid) - pbefore
                    tx = m["transactions"]
                    tag = f"warmup {r + 1}/{warmup}" if r < warmup else f"round {r - warmup + 1}/{rounds}"
                    print(
                        f"{tag} {w:6} {cfg:13} {tx / seconds:8.0f} TPS, proxy "
                        f"{pused / tx * 1e6:6.1f} us CPU/tx, server {used / tx * 1e6:6.1f}",
                        flush=True,
                    )
                    if r < warmup:
                        continue
                    tps.setdefault((w, cfg), []).append(tx / seconds)
                    ptx.setdefault((w, cfg), []).append(pused / tx * 1e6)
                    stx.setdefault((w, cfg), []).append(used / tx * 1e6)
        records = sum(1 for _ in open(audit)) if os.path.exists(audit) else 0
        print(f"\naudit log: {records} records ({os.path.getsize(audit)} bytes) without audit-required")
        print("medians over the rounds: TPS, proxy and server CPU per transaction (us);")
        print("ratios to base: median TPS ratio [per-round spread], median proxy CPU ratio [spread]")
        for w in WORKLOADS:
            for cfg in CONFIGS:
                t, p, s = (statistics.median(x[(w, cfg)]) for x in (tps, ptx, stx))
                print(
                    f"{w:6} {cfg:13} {t:8.0f} TPS {p:7.1f} proxy {s:7.1f} server"
                    + against_base(tps, ptx, w, cfg)
                )
    finally:
        teardown(c, proxies.values())


if __name__ == "__main__":
    main()
