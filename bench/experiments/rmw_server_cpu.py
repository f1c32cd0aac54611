"""rmw_server_cpu.py — where the server's CPU of Alibaba's s1 write goes
(issue 43, item 7; bench/scenarios/alibaba_sysbench.py).

The s1 write is one transaction of four statements on test1(id, k, c,
pad): UPDATE SET k = k + 1, UPDATE SET c = ?, DELETE and INSERT.  On the
encrypted table (k enc_int4 EQ, indexed; c and pad enc_text RND) the
proxy computes k + 1 itself: a lock query (SELECT ctid, tableoid, k ...
FOR UPDATE) and a write-back by ctid, two statements where the plaintext
has one.  This runs each statement of the transaction alone, and the
whole transaction, with pgbench -M prepared at one client, in these
configurations, interleaved over the rounds:

    plain-direct   the plaintext table, straight to the server
    plain-proxy    the plaintext table through pgcipher-proxy (what the
                   hop alone does to the server)
    plain-rmw      the plaintext table, straight to the server, k + 1 done
                   as the proxy does it (lock query, then the write by
                   ctid; pgbench's \\gset carries k between them): the
                   read-modify-write's cost on the server without any
                   ciphertext
    enc-proxy      the encrypted table through pgcipher-proxy
    enc-nocheck    a copy of it without the CHECK constraints that
                   pgcipher.encrypt_column() adds (enc_binding_ok): what
                   they cost (PostgreSQL prepares a table's CHECK
                   expressions again in every statement that writes it)

and prints the server's CPU per transaction (the postmaster's tree, as the
alibaba scenario reads it) and the proxy's, medians over the rounds, and
plain-direct's server CPU over each configuration's (metric (a) of the
scenario).  Every transaction is wrapped in
BEGIN/COMMIT, as sysbench's write is.

    runuser -u pgcipher -- env PGCIPHER_BUILD=$PWD/build \\
        build/venv/bin/python -m bench.experiments.rmw_server_cpu [ROUNDS [SECONDS [ROWS]]]
"""

import os
import statistics
import sys
import tempfile

from bench import procs
from bench.cluster import STANDARD_CONFIGS, Cluster, Install
from bench.scenarios import alibaba_sysbench as ali

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PGCIPHER_BUILD", os.path.join(TOP, "build"))
C = "'" + "-".join(["01234567890"] * 10) + "'"  # sysbench's c: 119 characters
PAD = "'" + "-".join(["01234567890"] * 5) + "'"

# statement -> SQL on table @T (pgbench variables :id, :n)
STATEMENTS = {
    "inc": "UPDATE @T SET k = k + 1 WHERE id = :id;",
    "setc": f"UPDATE @T SET c = {C} WHERE id = :id;",
    "del+ins": f"DELETE FROM @T WHERE id = :id;\nINSERT INTO @T (id, k, c, pad) VALUES (:id, :n, {C}, {PAD});",
}
RMW_INC = (
    "SELECT ctid AS t, tableoid AS o, k FROM @T WHERE id = :id FOR UPDATE \\gset\n"
    "UPDATE @T SET k = :k + 1 WHERE ctid = :t AND tableoid = :o;"
)


class _Commands:
    """What procs.pgbench records its command lines in (here: nothing)."""

    @staticmethod
    def command(_line):
        pass


def script(rows, body):
    return f"\\set id random(1, {rows})\n\\set n random(1, {rows})\nBEGIN;\n{body}\nCOMMIT;\n"


def teardown(c, daemons=()):
    """The end of an experiment: its daemons stopped, then its cluster,
    which is removed."""
    for d in daemons:
        if d is not None:
            d.stop()
    c.stop()
    c.destroy()


def started_cluster(prefix):
    """An unencrypted cluster of this build, started, with the settings
    these experiments share (checkpoints and autovacuum held off)."""
    inst = Install("pgcipher", os.path.join(BUILD, "install"))
    settings = {
        "shared_buffers": "256MB",
        "max_wal_size": "4GB",
        "autovacuum": "off",
        "checkpoint_timeout": "1h",
        "listen_addresses": "'127.0.0.1'",
    }
    c = Cluster(inst, STANDARD_CONFIGS["pgcipher-off"], tempfile.mkdtemp(prefix=prefix), settings, None)
    c.initdb()
    c.start()
    return c


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    rows = int(sys.argv[3]) if len(sys.argv) > 3 else 10_000
    c = started_cluster("rmw")
    proxy = None
    try:
        cmk = procs.new_cmk(os.path.join(BUILD, "bin", "pgcipher-keys"), c)
        proxy = procs.start_proxy(os.path.join(BUILD, "bin", "pgcipher-proxy"), c, "rmw", cmk)
        data = os.path.join(c.dir, "t.tsv")
        with open(data, "w") as f:
            f.write("".join(f"{i}\t{k}\t{cc}\t{pad}\n" for i, k, cc, pad in ali._rows(rows, 20261128)))
        c.psql(f"CREATE TABLE plain ({ali.PLAIN_COLUMNS})")
        c.psql(f"\\copy plain FROM '{data}'")
        c.psql("CREATE INDEX ON plain (k)")
        procs.psql_tcp(c, proxy.port, "SELECT pgcipher.add_column_key('test1')")
        # s1's table as the alibaba-sysbench scenario makes it, and a copy
        # whose binding CHECKs are dropped
        _, cols, binds, _ = ali.SCENARIOS["s1"]
        for table, checks in (("enc", True), ("enc_nc", False)):
            procs.psql_tcp(c, proxy.port, f"CREATE TABLE {table} ({cols})")
            for col, level in binds.items():
                procs.psql_tcp(
                    c, proxy.port, f"SELECT pgcipher.encrypt_column('{table}', '{col}', 'test1', '{level}')"
                )
                if not checks:
                    c.psql(f"ALTER TABLE {table} DROP CONSTRAINT pgcipher_{col}")
            procs.psql_tcp(c, proxy.port, f"\\copy {table} FROM '{data}'")
            c.psql(f"CREATE INDEX ON {table} (k)")
        c.psql("VACUUM ANALYZE")
        c.psql("CHECKPOINT")

        cases = []  # (workload, config, table, port, body)
        for w, body in list(STATEMENTS.items()) + [("write", "\n".join(STATEMENTS.values()))]:
            cases.append((w, "plain-direct", "plain", c.port, body))
            if w in ("inc", "write"):
                cases.append((w, "plain-rmw", "plain", c.port, body.replace(STATEMENTS["inc"], RMW_INC)))
            cases.append((w, "plain-proxy", "plain", proxy.port, body))
            cases.append((w, "enc-proxy", "enc", proxy.port, body))
            cases.append((w, "enc-nocheck", "enc_nc", proxy.port, body))
        files = {}
        for w, cfg, table, _, body in cases:
            path = os.path.join(c.dir, f"{w}-{cfg}.sql")
            with open(path, "w") as f:
                f.write(script(rows, body.replace("@T", table)))
            files[(w, cfg)] = path
        cpu = procs.ServerCPU(procs.postmaster_pid(c))
        per_tx, proxy_tx = {}, {}
        for r in range(rounds):
            for w, cfg, _, port, _ in cases:
                before, pbefore = cpu.read(), procs.process_cpu_s(proxy.pid)
                args = ["-n", "-M", "prepared", "-c", "1", "-T", str(seconds), "-f", files[(w, cfg)]]
                m, _ = procs.pgbench(_Commands, c, port, args, timeout=seconds + 120)
                used, pused = cpu.read() - before, procs.process_cpu_s(proxy.pid) - pbefore
                tx = m["transactions"]
                per_tx.setdefault((w, cfg), []).append(used / tx * 1e6)
                proxy_tx.setdefault((w, cfg), []).append(pused / tx * 1e6)
                print(
                    f"round {r + 1}/{rounds} {w:8} {cfg:13} {tx / seconds:8.0f} TPS "
                    f"{used / tx * 1e6:7.1f} us server CPU/tx, proxy {pused / tx * 1e6:6.1f}",
                    flush=True,
                )
        cfgs = ("plain-direct", "plain-rmw", "plain-proxy", "enc-nocheck", "enc-proxy")
        print("\nmedians over the rounds, us per transaction: server CPU (plain-direct's / this), proxy CPU")
        print(f"{'':8} " + "".join(f"{cfg:>26}" for cfg in cfgs))
        for w in list(STATEMENTS) + ["write"]:
            base = statistics.median(per_tx[(w, "plain-direct")])
            line = f"{w:8} "
            for cfg in cfgs:
                if (w, cfg) not in per_tx:
                    line += f"{'-':>26}"
                    continue
                m = statistics.median(per_tx[(w, cfg)])
                pm = statistics.median(proxy_tx[(w, cfg)])
                line += f"{m:8.1f} ({base / m:.3f}) {pm:7.1f}  "
            print(line)
    finally:
        teardown(c, [proxy])


if __name__ == "__main__":
    main()
