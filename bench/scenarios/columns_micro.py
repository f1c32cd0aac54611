"""columns-micro: what always-encrypted columns cost on the server.

One pgcipher cluster (TDE off: this measures the column types alone), one
table per column kind, each holding the same N random int8 values:

    int8          the plaintext type, the baseline;
    enc_int8 RND  ciphertext only (no server-side comparison exists);
    enc_int8 EQ   + equality token (=, hash and btree for uniqueness);
    enc_int8_ord  + Lewi-Wu ORE ciphertext (<, ORDER BY, ranges): ORD in
                  order format 2 (AES; the probe a query operand, left part
                  only), ORD1 in format 1 (HMAC and SHA-256), design 13.5b;
    text          24 random lowercase letters, the baseline of
    enc_text MATCH the same values with a trigram Bloom filter: value @> query
                  (candidates for a LIKE pattern) beside text LIKE, and a
                  GIN index (enc_text_match_ops).

Values are encrypted by the Go key tool (pgcipher-keys encrypt), whose time
per value is reported too (client side, one core).  Measured, with column
kinds interleaved in every round:

    ns per comparison   a sequential scan with the filter (c = k, c < k)
                        minus the same scan with the filter c IS NULL, over
                        N rows, from EXPLAIN ANALYZE's execution time
                        (TIMING OFF), median of three runs, no parallel
                        workers.  Both scans read every value and count
                        (almost) no rows: k is the median value for = (one
                        match) and the smallest for < (none), so the
                        difference is the operator call alone;
    index build         CREATE INDEX (btree; hash for EQ), seconds, no
                        parallel workers, maintenance_work_mem large enough
                        for an in-memory sort;
    bytes per value     pg_column_size of the stored datum; table and index
                        bytes per row.

No vendor report to reproduce (SEED = None); the issue asks for these numbers."""

import os
import random
import re
import statistics
import subprocess
import time

from bench import plots, stats
from bench.cluster import STANDARD_CONFIGS

NAME = "columns-micro"
TITLE = "Encrypted columns: ns per comparison, index build time, bytes per value"
SEED = None

# name -> (SQL type, level or None for plaintext, plaintext type)
KINDS = {
    "int8": ("int8", None, "int8"),
    "RND": ("enc_int8", "RND", "int8"),
    "EQ": ("enc_int8", "EQ", "int8"),
    "ORD": ("enc_int8_ord", "ORD", "int8"),
    "ORD1": ("enc_int8_ord", "ORD", "int8"),
    "text": ("text", None, "text"),
    "MATCH": ("enc_text", "MATCH", "text"),
}
# the order format of each ORD kind (pgcipher.set_ore_format); others: 2
ORE_FORMAT = {"ORD1": "1"}
# (kind, operator, the plaintext (kind, operator) it stands for)
COMPARISONS = [
    ("int8", "=", ("int8", "=")),
    ("int8", "<", ("int8", "<")),
    ("EQ", "=", ("int8", "=")),
    ("ORD", "=", ("int8", "=")),
    ("ORD", "<", ("int8", "<")),
    ("ORD1", "=", ("int8", "=")),
    ("ORD1", "<", ("int8", "<")),
    ("text", "LIKE", ("text", "LIKE")),
    ("MATCH", "@>", ("text", "LIKE")),
]
# (kind, method, operator class or "")
INDEXES = [
    ("int8", "btree", ""),
    ("EQ", "btree", ""),
    ("EQ", "hash", ""),
    ("ORD", "btree", ""),
    ("ORD1", "btree", ""),
    ("MATCH", "gin", "enc_text_match_ops"),
]

PROFILES = {"quick": dict(rows=100_000, repetitions=3), "full": dict(rows=1_000_000, repetitions=3)}

# rough costs on a 2-core machine, for the time estimate only (seconds per row)
_ENCRYPT_S = {"RND": 2e-6, "EQ": 3e-6, "ORD": 80e-6, "ORD1": 80e-6, "MATCH": 20e-6}
_ROUND_S_PER_ROW = 50e-6


def plan(profile, overrides=None):
    p = dict(PROFILES[profile])
    p.update(overrides or {})
    p["steps"] = 1 + p["repetitions"]
    p["est_seconds"] = (
        10 + p["rows"] * (sum(_ENCRYPT_S.values()) + 4e-6) + p["repetitions"] * p["rows"] * _ROUND_S_PER_ROW
    )
    return p


def settings(p):
    return {
        "shared_buffers": "2GB",
        "work_mem": "64MB",
        "maintenance_work_mem": "2GB",
        "max_parallel_workers_per_gather": 0,
        "max_parallel_maintenance_workers": 0,
        "jit": "off",
        "autovacuum": "off",
        "max_wal_size": "8GB",
        "checkpoint_timeout": "1h",
    }


def _tool(run, *args, stdin=None, stdout=None, stdin_text=None):
    tool = run.installs["pgcipher"].keys_tool
    r = subprocess.run(
        [tool, *args],
        stdin=stdin,
        input=stdin_text,
        stdout=stdout or subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if r.returncode != 0:
        raise RuntimeError(f"pgcipher-keys {args[0]} failed: {r.stderr.strip()}")
    return r.stdout


def _exec_ms(c, sql):
    out = c.psql(f"EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON) {sql}")
    return float(re.search(r"Execution Time: ([0-9.]+) ms", out).group(1))


def _median_ms(c, sql, runs=3):
    return statistics.median(_exec_ms(c, sql) for _ in range(runs))


def run(run, p):
    n = p["rows"]
    c = run.cluster(STANDARD_CONFIGS["pgcipher-off"], settings(p), NAME)
    c.initdb()
    c.start()
    work = c.dir
    c.psql("CREATE EXTENSION pgcipher_columns")
    cmk = os.path.join(work, "cmk.hex")
    with open(cmk, "w") as f:
        f.write(_tool(run, "new-cmk"))
    keyargs = ["--cmk-file", cmk, "--cmk-name", "bench-cmk", "--key-name", "bench"]
    c.psql(_tool(run, "new-cek", *keyargs))
    wrapped = c.psql("SELECT encode(wrapped_cek, 'hex') FROM pgcipher.column_keys WHERE key_name = 'bench'")
    key_id = c.psql("SELECT key_id FROM pgcipher.column_keys WHERE key_name = 'bench'")

    rng = random.Random(20261123)
    values = [rng.randrange(-(2**63), 2**63) for _ in range(n)]
    texts = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=24)) for _ in range(n)]
    plain = {"int8": os.path.join(work, "int8.txt"), "text": os.path.join(work, "text.txt")}
    with open(plain["int8"], "w") as f:
        f.write("".join(f"{v}\n" for v in values))
    with open(plain["text"], "w") as f:
        f.write("".join(f"{v}\n" for v in texts))
    ordered = sorted(values)
    # = against the median (one match), < against the minimum (no match),
    # LIKE a 5-letter substring of one value (about one match): the filters
    # count (almost) nothing, like the IS NULL baseline
    probe_values = {"=": ordered[n // 2], "<": ordered[0]}
    pattern = f"%{texts[n // 2][8:13]}%"
    files = dict(plain)
    colargs_of = {}
    for kind, (sqltype, level, ptype) in KINDS.items():
        table = f"t_{kind.lower()}"
        c.psql(f"CREATE TABLE public.{table} (c {sqltype})")
        fmt = ORE_FORMAT.get(kind, "2")
        if level:
            c.psql(f"SELECT pgcipher.encrypt_column('public.{table}', 'c', 'bench', '{level}')")
            if level == "ORD" and fmt != "2":
                c.psql(f"SELECT pgcipher.set_ore_format('public.{table}', 'c', '{fmt}')")
            files[kind] = os.path.join(work, f"{kind}.txt")
            t0 = time.perf_counter()
            colargs = [
                "--wrapped-cek",
                wrapped,
                "--key-id",
                key_id,
                "--type",
                ptype,
                "--level",
                level,
                "--label",
                f"public.{table}.c",
                "--ore-format",
                fmt,
            ]
            colargs_of[kind] = colargs
            with open(plain[ptype]) as fin, open(files[kind], "w") as fout:
                _tool(run, "encrypt", *keyargs, *colargs, stdin=fin, stdout=fout)
            us = (time.perf_counter() - t0) * 1e6 / n
            run.record(NAME, kind, 0, "client_us_per_value", us)
            run.command(f"pgcipher-keys encrypt --type {ptype} --level {level} < {n} values")
            if level == "MATCH":
                match_query = _tool(
                    run, "encrypt", *keyargs, *colargs, "--pattern", stdin_text=pattern + "\n"
                ).strip()
        c.psql(f"COPY public.{table} FROM '{files[kind]}'")
        c.psql(f"VACUUM (ANALYZE) public.{table}")
        run.record(
            NAME, kind, 0, "datum_bytes", float(c.psql(f"SELECT avg(pg_column_size(c)) FROM public.{table}"))
        )
        run.record(
            NAME,
            kind,
            0,
            "table_bytes_per_row",
            int(c.psql(f"SELECT pg_relation_size('public.{table}')")) / n,
        )
    # the probe constants of each kind, as the proxy sends them
    probe = {}
    for op, v in probe_values.items():
        probe[("int8", op)] = str(v)
        for kind in ("EQ", "ORD", "ORD1"):
            # a comparison operand as the proxy sends it (format 2: a query)
            probe[(kind, op)] = _tool(
                run, "encrypt", *keyargs, *colargs_of[kind], "--operand", stdin_text=f"{v}\n"
            ).strip()
    probe[("text", "LIKE")] = pattern
    probe[("MATCH", "@>")] = match_query
    # how many candidates the Bloom filter lets through, beside true matches
    run.record(
        NAME,
        "MATCH",
        0,
        "candidates",
        int(c.psql(f"SELECT count(*) FROM public.t_match WHERE c @> '{match_query}'")),
    )
    run.record(
        NAME,
        "text",
        0,
        "matches",
        int(c.psql(f"SELECT count(*) FROM public.t_text WHERE c LIKE '{pattern}'")),
    )
    c.psql("CHECKPOINT")
    run.progress.step(f"{NAME} loaded {n} rows per kind", None)

    for rep in range(1, p["repetitions"] + 1):
        for kind, op, _ in COMPARISONS:
            table = f"public.t_{kind.lower()}"
            sqltype = KINDS[kind][0]
            base = _median_ms(c, f"SELECT count(*) FROM {table} WHERE c IS NULL")
            filt = _median_ms(
                c, f"SELECT count(*) FROM {table} WHERE c {op} '{probe[(kind, op)]}'::{sqltype}"
            )
            run.record(NAME, kind, rep, "ns_per_comparison", (filt - base) * 1e6 / n, op=op)
        for kind, method, opclass in INDEXES:
            table = f"public.t_{kind.lower()}"
            t0 = time.perf_counter()
            c.psql(f"CREATE INDEX bench_idx ON {table} USING {method} (c {opclass})")
            run.record(NAME, kind, rep, "index_build_s", time.perf_counter() - t0, method=method)
            run.record(
                NAME,
                kind,
                rep,
                "index_bytes_per_row",
                int(c.psql("SELECT pg_relation_size('public.bench_idx')")) / n,
                method=method,
            )
            c.psql("DROP INDEX public.bench_idx")
        run.progress.step(f"{NAME} round {rep}", p["rows"] * _ROUND_S_PER_ROW)
    c.destroy()


def _med(rows, kind, metric, **match):
    vals = [
        r["value"]
        for r in rows
        if r["config"] == kind and r["metric"] == metric and all(r.get(k) == v for k, v in match.items())
    ]
    return stats.median(vals) if vals else float("nan")


def _times(x, ref):
    """x / ref as "N.N×"; a reference at or below zero (a difference of two
    timings inside the noise, as with --tiny sizes) has no ratio."""
    return f"{x / ref:.1f}×" if ref > 0 else "n/a (reference within noise)"


def report(rows, p, out_dir):
    n = p["rows"]
    md = [
        f"{n:,} random int8 values (text: 24 random letters) per column kind, TDE off, one backend, no parallel workers; "
        f"medians of {p['repetitions']} interleaved rounds.\n",
        "| column | operator | ns per comparison | vs plaintext |",
        "|---|---|---|---|",
    ]
    labels, values = [], []
    for kind, op, (ref_kind, ref_op) in COMPARISONS:
        ns = _med(rows, kind, "ns_per_comparison", op=op)
        ref = _med(rows, ref_kind, "ns_per_comparison", op=ref_op)
        md.append(
            f"| {kind} ({KINDS[kind][0]}) | `{op}` | {ns:,.1f} | {_times(ns, ref)} {ref_kind} `{ref_op}` |"
        )
        labels.append(f"{kind} {op}")
        values.append(ns)
    md += ["", "| column | index | build (s) | vs int8 | index bytes/row |", "|---|---|---|---|---|"]
    ref = _med(rows, "int8", "index_build_s", method="btree")
    for kind, method, _ in INDEXES:
        s = _med(rows, kind, "index_build_s", method=method)
        b = _med(rows, kind, "index_bytes_per_row", method=method)
        md.append(f"| {kind} | {method} | {s:.2f} | {_times(s, ref)} | {b:.0f} |")
    md += [
        "",
        "| column | stored datum (bytes) | table bytes/row | client encrypt (µs/value) |",
        "|---|---|---|---|",
    ]
    for kind in KINDS:
        d = _med(rows, kind, "datum_bytes")
        t = _med(rows, kind, "table_bytes_per_row")
        u = _med(rows, kind, "client_us_per_value")
        md.append(f"| {kind} | {d:.0f} | {t:.0f} | {'—' if u != u else f'{u:.1f}'} |")
    md.append(
        f"\nMATCH query for a 5-letter substring (`%xxxxx%`): "
        f"{_med(rows, 'MATCH', 'candidates'):,.0f} candidates for "
        f"{_med(rows, 'text', 'matches'):,.0f} true matches among {n:,} rows (the client rechecks)."
    )
    md.append(
        "\nA comparison's cost is (scan filtered by the operator − scan filtered by IS NULL) / rows: "
        "the operator's fmgr call, detoasting and parsing included, as the executor pays them.  ORD `<` (order format 2, its probe "
        "a query operand) computes one AES-128 key schedule and block per comparison, ORD1 `<` (format 1) one SHA-256 "
        "(design 13.5, 13.5b); `=` on EQ and ORD compares 16-byte tokens and left parts; MATCH `@>` tests 32 bytes of Bloom "
        "filter, text `LIKE` runs the pattern over the plaintext."
    )
    pngs = []
    if labels and plots.bars(
        labels, values, os.path.join(out_dir, f"{NAME}-ns.png"), "ns per comparison", "ns (lower is better)"
    ):
        pngs.append(f"{NAME}-ns.png")
    return "\n".join(md), pngs
