"""proxy_ab.py — two builds of pgcipher-proxy, A and B, on plaintext
results: what a change to the proxy's per-message path saves (issue 43:
the proxy's own work per message, design 15.14).

One unencrypted cluster of this build (pgbench scale 1), both proxies in
session mode (--transaction: transaction mode, pools of 20) beside each other, `pgbench -M prepared -c 1` through each,
A and B alternating (ABBA) in every round:

    point      SELECT abalance … WHERE aid = :aid   (one row)
    rows1000   SELECT aid, bid, abalance, filler … WHERE aid <= 1000

Per run: the proxy's user and total (user + system) CPU per transaction
from /proc.  Then per workload the medians and B/A with the spread
(min–max) of the per-round ratios.

    runuser -u pgcipher -- env PGCIPHER_BUILD=$PWD/build \\
        build/venv/bin/python -m bench.experiments.proxy_ab A_BINARY B_BINARY [--rounds N] [--seconds S] \\
        [--transaction]
"""

import argparse
import os
import statistics

from bench import procs
from bench.experiments.rmw_server_cpu import _Commands, started_cluster, teardown

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PGCIPHER_BUILD", os.path.join(TOP, "build"))
WORKLOADS = {
    "point": "\\set aid random(1, 100000)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;",
    "rows1000": "SELECT aid, bid, abalance, filler FROM pgbench_accounts WHERE aid <= 1000;",
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", help="proxy binary A (before)")
    ap.add_argument("b", help="proxy binary B (after)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--transaction", action="store_true", help="both proxies in transaction mode")
    args = ap.parse_args()
    c = started_cluster("proxyab")
    hops = {}
    try:
        c.pgbench(["-i", "-q", "-s", "1"], timeout=600)
        c.psql("VACUUM ANALYZE")
        cmk = procs.new_cmk(os.path.join(BUILD, "bin", "pgcipher-keys"), c)
        mode = ["--pool-mode", "transaction", "--default-pool-size", "20", "--auth-type", "trust"]
        extra = mode if args.transaction else ()
        hops["A"] = procs.start_proxy(args.a, c, "A", cmk, extra=extra)
        hops["B"] = procs.start_proxy(args.b, c, "B", cmk, extra=extra)
        files = {}
        for w, sql in WORKLOADS.items():
            files[w] = os.path.join(c.dir, f"{w}.sql")
            with open(files[w], "w") as f:
                f.write(sql + "\n")
        res = {}
        for r in range(args.rounds):
            for w in WORKLOADS:
                for name in ("A", "B") if r % 2 == 0 else ("B", "A"):
                    d = hops[name]
                    run = ["-n", "-M", "prepared", "-c", "1", "-T", str(args.seconds), "-f", files[w]]
                    t0, u0 = procs.process_user_system_s(d.pid)
                    m, _ = procs.pgbench(_Commands, c, d.port, run, args.seconds + 60)
                    t1, u1 = procs.process_user_system_s(d.pid)
                    tx = max(m["transactions"], 1)
                    user, total = (u1 - u0) * 1e6 / tx, (t1 - t0) * 1e6 / tx
                    res.setdefault((w, name), []).append((user, total))
                    print(
                        f"round {r + 1}/{args.rounds} {w:9} {name} {tx / args.seconds:8.0f} TPS, proxy "
                        f"{total:8.1f} us CPU/tx ({user:7.1f} user)",
                        flush=True,
                    )
        print("\nmedians, us of the proxy's CPU per transaction; B/A median [min-max of the rounds]")
        for w in WORKLOADS:
            a, b = res[(w, "A")], res[(w, "B")]
            line = f"{w:9}"
            for k, what in ((0, "user"), (1, "total")):
                ratios = [y[k] / x[k] for x, y in zip(a, b)]
                line += (
                    f" | {what}: A {statistics.median(x[k] for x in a):8.1f} B {statistics.median(y[k] for y in b):8.1f}"
                    f" B/A {statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]"
                )
            print(line, flush=True)
    finally:
        teardown(c, hops.values())


if __name__ == "__main__":
    main()
