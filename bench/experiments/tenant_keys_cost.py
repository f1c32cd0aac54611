"""tenant_keys_cost.py — what tenant keys (design 13.13) cost on Alibaba's
s1 point and write statements through pgcipher-proxy, with 10,000 tenants
(issue 44, item 7), and how long shredding one of them takes.

s1's table (k enc_int4 EQ, c and pad enc_text RND; the alibaba-sysbench
scenario's DDL and rows) twice in one cluster: "enc", under its column
key, and "enc_t", with a tenant column, its three encrypted columns bound
tenant-keyed (tenant_by 'session'); row id belongs to tenant
(id mod TENANTS) + 1, 10,000 tenants in all, each with its key.  Every
transaction first sets pgcipher.tenant to its row's tenant, on both
tables, so the configurations differ in the keys alone:

    base          enc through a proxy
    base-again    base measured again in each round: the noise floor
    warm          enc_t through a proxy whose tenant-column cache holds
                  every tenant's columns (after the warm-up rounds)
    cold          enc_t through a proxy whose cache holds one tenant's
                  columns: every transaction's tenant is unwrapped from
                  pgcipher.tenant_keys under the keyring and its column
                  keys derived again (HKDF, AES key schedules, ORE)

Workloads, pgbench -M simple (SET takes no parameter), one client:
point (SELECT c WHERE id = ?) and write (s1's transaction: UPDATE SET
k = k + 1 computed by the proxy, UPDATE SET c, DELETE and INSERT, in
BEGIN/COMMIT).  Printed per round; then the medians over the rounds of
TPS and the proxy's CPU per transaction, each configuration against
base with the per-round spread; then pgcipher-keys shred-tenant on one
of the 10,000 tenants, timed (the other 9,999 keys rewrapped).

    runuser -u pgcipher -- env PGCIPHER_BUILD=$PWD/build \\
        build/venv/bin/python -m bench.experiments.tenant_keys_cost [ROUNDS [SECONDS [TENANTS [WARMUP]]]]
"""

import os
import statistics
import subprocess
import sys
import time

from bench import procs
from bench.experiments.rights_audit_cost import against_base
from bench.experiments.rmw_server_cpu import STATEMENTS, _Commands, started_cluster, teardown
from bench.scenarios import alibaba_sysbench as ali

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PGCIPHER_BUILD", os.path.join(TOP, "build"))
CONFIGS = ("base", "base-again", "warm", "cold")


def workload(name, table, rows, tenants):
    """pgbench script: the row, its tenant set, then the statements."""
    body = "SELECT c FROM @T WHERE id = :id;" if name == "point" else "\n".join(STATEMENTS.values())
    if table == "enc_t":
        body = body.replace("INSERT INTO @T (id, k,", "INSERT INTO @T (id, tenant, k,").replace(
            "VALUES (:id, :n,", "VALUES (:id, :tid, :n,"
        )
    return (
        f"\\set id random(1, {rows})\n\\set n random(1, {rows})\n\\set tid :id % {tenants} + 1\n"
        f"SET pgcipher.tenant = :tid;\nBEGIN;\n{body.replace('@T', table)}\nCOMMIT;\n"
    )


def keys(keys_bin, *args, stdin=None):
    r = subprocess.run([keys_bin, *args], input=stdin, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"pgcipher-keys {args[0]}: {r.stderr.strip()}")
    return r.stdout


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    tenants = int(sys.argv[3]) if len(sys.argv) > 3 else 10_000
    warmup = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    rows = tenants
    c = started_cluster("tenants")
    keys_bin = os.path.join(BUILD, "bin", "pgcipher-keys")
    proxy_bin = os.path.join(BUILD, "bin", "pgcipher-proxy")
    proxies = {}
    try:
        cmk = procs.new_cmk(keys_bin, c)
        ring = os.path.join(c.dir, "tenant-keyring")
        kf = ["--cmk-file", cmk, "--cmk-name", "bench", "--keyring", ring]
        keys(keys_bin, "keyring-init", *kf)
        t0 = time.monotonic()
        names = "".join(f"{i}\n" for i in range(1, tenants + 1))
        calls = os.path.join(c.dir, "tenants.sql")
        with open(calls, "w") as f:
            f.write(keys(keys_bin, "add-tenant", *kf, "--tenant", "-", stdin=names))
        c.psql(f"\\i {calls}")
        print(f"{tenants} tenant keys drawn and stored in {time.monotonic() - t0:.1f} s", flush=True)
        ring_args = ["--tenant-keyring", ring]
        # a proxy process per configuration (its heap and garbage
        # collector's pace are then in base-again's noise floor)
        for name in ("base", "base-again"):
            proxies[name] = procs.start_proxy(proxy_bin, c, name, cmk, extra=ring_args)
        proxies["warm"] = procs.start_proxy(
            proxy_bin, c, "warm", cmk, extra=[*ring_args, "--tenant-key-cache", str(4 * tenants)]
        )
        proxies["cold"] = procs.start_proxy(
            proxy_bin, c, "cold", cmk, extra=[*ring_args, "--tenant-key-cache", "3"]
        )
        port = proxies["base"].port
        _, cols, binds, _ = ali.SCENARIOS["s1"]
        procs.psql_tcp(c, port, "SELECT pgcipher.add_column_key('test1')")
        procs.psql_tcp(c, port, f"CREATE TABLE enc ({cols})")
        procs.psql_tcp(c, port, f"CREATE TABLE enc_t ({cols}, tenant text)")
        for table, extra in (("enc", ""), ("enc_t", ", tenant_by => 'session'")):
            for col, level in binds.items():
                procs.psql_tcp(
                    c, port, f"SELECT pgcipher.encrypt_column('{table}', '{col}', 'test1', '{level}'{extra})"
                )
        t0 = time.monotonic()
        data = os.path.join(c.dir, "load.sql")
        with open(data, "w") as f:
            for i, k, cc, pad in ali._rows(rows, 20261128):
                tid = i % tenants + 1
                f.write(f"INSERT INTO enc VALUES ({i}, {k}, '{cc}', '{pad}');\n")
                f.write(f"SET pgcipher.tenant = '{tid}';\n")
                f.write(f"INSERT INTO enc_t VALUES ({i}, {k}, '{cc}', '{pad}', '{tid}');\n")
        procs.psql_tcp(c, port, f"\\i {data}")
        print(f"{rows} rows loaded into each table in {time.monotonic() - t0:.1f} s", flush=True)
        for table in ("enc", "enc_t"):
            c.psql(f"CREATE INDEX ON {table} (k)")
        c.psql("VACUUM ANALYZE")
        c.psql("CHECKPOINT")
        files = {}
        for w in ("point", "write"):
            for table in ("enc", "enc_t"):
                path = os.path.join(c.dir, f"{w}-{table}.sql")
                with open(path, "w") as f:
                    f.write(workload(w, table, rows, tenants))
                files[(w, table)] = path
        table_of = {"base": "enc", "base-again": "enc", "warm": "enc_t", "cold": "enc_t"}
        tps, ptx = {}, {}
        for r in range(warmup + rounds):
            for w in ("point", "write"):
                for cfg in CONFIGS:
                    px = proxies[cfg]
                    pbefore = procs.process_cpu_s(px.pid)
                    args = [
                        "-n",
                        "-M",
                        "simple",
                        "-c",
                        "1",
                        "-T",
                        str(seconds),
                        "-f",
                        files[(w, table_of[cfg])],
                    ]
                    m, _ = procs.pgbench(_Commands, c, px.port, args, timeout=seconds + 120)
                    pused = procs.process_cpu_s(px.pid) - pbefore
                    tx = m["transactions"]
                    tag = f"warmup {r + 1}/{warmup}" if r < warmup else f"round {r - warmup + 1}/{rounds}"
                    print(
                        f"{tag} {w:6} {cfg:11} {tx / seconds:8.0f} TPS, proxy {pused / tx * 1e6:6.1f} us CPU/tx",
                        flush=True,
                    )
                    if r >= warmup:
                        tps.setdefault((w, cfg), []).append(tx / seconds)
                        ptx.setdefault((w, cfg), []).append(pused / tx * 1e6)
        print("\nmedians over the rounds: TPS and proxy CPU per transaction (us);")
        print("ratios to base: median TPS ratio [per-round spread], median proxy CPU ratio [spread]")
        for w in ("point", "write"):
            for cfg in CONFIGS:
                t, p = statistics.median(tps[(w, cfg)]), statistics.median(ptx[(w, cfg)])
                print(f"{w:6} {cfg:11} {t:8.0f} TPS {p:7.1f} proxy" + against_base(tps, ptx, w, cfg))
        dsn = f"host={c.dir} port={c.port} dbname=postgres user=postgres"
        shred = []
        for victim in ("7", "8", "9"):
            t0 = time.monotonic()
            out = keys(keys_bin, "shred-tenant", *kf, "--tenant", victim, "--dsn", dsn)
            shred.append(time.monotonic() - t0)
            print(out.strip())
        print(
            f"\nshred-tenant with {tenants} tenants: {statistics.median(shred) * 1000:.0f} ms median of 3 "
            f"(the command's whole run: process start, CMK and keyring read, the transaction, two keyring writes)"
        )
    finally:
        teardown(c, proxies.values())


if __name__ == "__main__":
    main()
