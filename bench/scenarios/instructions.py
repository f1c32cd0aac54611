"""instructions: what encryption costs in CPU instructions, without the noise.

On a small shared VM timings vary by tens of percent and there are no
hardware performance counters, so this scenario counts instructions instead:
each workload is a fixed SQL file (fixed data, statements from seeded random
generators) run by ONE single-user backend (`postgres --single`) under
valgrind's callgrind, stock PostgreSQL against pgcipher.  The counts repeat
to about 10 parts per million, so a ratio of 1.02 means 2 %.

    seq-scan-os-cache   shared_buffers = 1MB: every page of pgbench_accounts
                        comes from the OS cache and is decrypted, per scan;
    select-only         pgbench -S as a batch: N primary-key lookups, all
                        pages already in shared_buffers (the hot path);
    tpcb-like           N transactions of pgbench's TPC-B-like script as
                        SQL, each committing (and flushing WAL) on its own;
    copy                COPY FROM a generated server-side text file;
    wal-heavy-insert    INSERT ... SELECT generate_series, mostly WAL;
    sort-spill          ORDER BY with work_mem = 1MB: the sort spills to
                        temporary files, which pgcipher encrypts.

Per configuration one cluster is made (initdb, checksums on) and loaded with
the normal server (pgbench -i, tables, VACUUM, CHECKPOINT, stop); every
measurement runs on a fresh copy of that loaded data directory, so all
rounds start from the same bytes.  Each SQL file has a marker statement,
`SELECT pg_sleep(0)`, and callgrind dumps its counters when pg_sleep is
entered (--dump-before): what precedes the marker (backend start, key
command, the warm-up that reads the pages into shared_buffers for the hot
paths) lands in a first part, what follows it up to the exit (including
the shutdown checkpoint, which writes what the workload dirtied) is the
measured count.  Instructions are also attributed by function: libcrypto,
pg_checksum_page/block, memcpy/memmove, the rest.

callgrind runs a simulated CPU: valgrind 3.19 does not emulate AVX-512 or
VAES, so OpenSSL takes its AES-NI code path under callgrind, not the VAES
path the real machine takes (4x fewer instructions per page).  So the
scenario also counts, once per run, the instructions of one XTS page call
on the real CPU (`bench_pagecrypt --native-instructions`, single-stepped
with ptrace) and under callgrind (`bench_pagecrypt --calls`, two call
counts subtracted), and reports beside each measured count the count "as
the CPU runs the cipher": the self instructions of OpenSSL's XTS core
(aesni_xts_*) scaled by native / callgrind per call; the WAL's CTR core
(aesni_ctr32_encrypt_blocks) is calibrated the same way (OpenSSL has no
VAES CTR, so its factor is about 1); everything else — EVP, tweaks,
checksums, copies — stays as callgrind counted it (those run the same
code natively).  The targets are judged on that figure; the raw callgrind
ratio stays in the tables.  Each ratio is split in two: the cipher alone
(libcrypto's extra instructions, as the CPU runs them) and what pgcipher's
own code adds around it, which is what can be removed without a faster
cipher.
Targets (encrypted / stock instructions) from the issue, in the report
only.  No vendor report to reproduce (SEED = None)."""

import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from bench import peer, plots, stats
from bench.interleave import interleaved
from bench.scenarios import common

NAME = "instructions"
TITLE = "Instruction counts under callgrind: stock vs encrypted, deterministic workloads"
SEED = None

WORKLOADS = ["seq-scan-os-cache", "select-only", "tpcb-like", "copy", "wal-heavy-insert", "sort-spill"]
# encrypted / stock instructions; None: reported, no target
TARGETS = {
    "seq-scan-os-cache": 1.15,
    "select-only": 1.03,
    "tpcb-like": 1.03,
    "copy": 1.05,
    "wal-heavy-insert": None,
    "sort-spill": 1.10,
}
CATEGORIES = ["libcrypto", "checksum", "memcpy", "other"]

VALGRIND = "/usr/bin/valgrind"
# the statement that separates set-up and warm-up from the measured part
MARKER = "SELECT pg_sleep(0);"
MARKER_FUNCTION = "pg_sleep"

COPY_TABLE = "copy_accounts"
INSERT_TABLE = "wal_insert"
SORT_TABLE = "sort_src"
# one line of the COPY input: aid, bid, abalance and an 84-character filler
# (pgbench_accounts' columns), tab-separated: about 102 bytes
COPY_BYTES_PER_ROW = 102

# full: about 7 minutes on the 2-core VM (callgrind runs 50-100x slower than
# the CPU); stock vs aes-256 vs aes-128 (aes-128's cipher has fewer rounds).
# jobs: callgrind runs at once (each is one single-threaded process; the
# counts do not depend on what else runs, only the wall time does).
PROFILES = {
    "quick": dict(
        configs=["stock", "aes-256"],
        repetitions=1,
        scale=2,
        seq_scans=2,
        select_queries=2000,
        tpcb_transactions=300,
        copy_mb=10,
        insert_rows=20000,
        sort_rows=50000,
        work_mem="1MB",
        shared_buffers_mb=128,
        jobs=2,
    ),
    "full": dict(
        configs=["stock", "aes-256", "aes-128"],
        repetitions=2,
        scale=10,
        seq_scans=2,
        select_queries=20000,
        tpcb_transactions=2000,
        copy_mb=100,
        insert_rows=200000,
        sort_rows=300000,
        work_mem="1MB",
        shared_buffers_mb=128,
        jobs=2,
    ),
}
# demo: the demo's headline, the quick sizes with half the work
PROFILES["demo"] = dict(
    PROFILES["quick"],
    select_queries=1000,
    tpcb_transactions=150,
    copy_mb=5,
    insert_rows=10000,
    sort_rows=25000,
)

# seconds under callgrind per unit of work on the 2-core VM (aes-256), for
# the time estimate only
_SECONDS = {
    "seq-scan-os-cache": ("scale", 1.2),
    "select-only": ("select_queries", 1.4e-3),
    "tpcb-like": ("tpcb_transactions", 1.1e-2),
    "copy": ("copy_mb", 0.5),
    "wal-heavy-insert": ("insert_rows", 8e-5),
    "sort-spill": ("sort_rows", 4e-5),
}
# functions per configuration and round named in the report as the largest
# increases over the baseline
TOP_FUNCTIONS = 5


def _expected(p, workload):
    """Expected seconds of one measurement (copy of the data, start-up, run)."""
    key, per = _SECONDS[workload]
    units = p[key] * (p["seq_scans"] if workload == "seq-scan-os-cache" else 1)
    return 2 + p["scale"] * 0.1 + units * per


def _jobs(p):
    return max(1, min(p.get("jobs", 1), os.cpu_count() or 1))


def plan(profile, overrides=None):
    p = dict(PROFILES[profile])
    p.update(overrides or {})
    p.setdefault("workloads", list(WORKLOADS))
    p["steps"] = len(p["configs"]) * len(p["workloads"]) * p["repetitions"]
    setup = (
        len(p["configs"]) * (4 + 2 * p["scale"] + p["copy_mb"] / 30 + p["sort_rows"] / 1e5)
        + p["copy_mb"] / 30
    )
    p["setup_share"] = setup / p["steps"]
    p["est_seconds"] = setup + len(p["configs"]) * p["repetitions"] * sum(
        _expected(p, w) for w in p["workloads"]
    ) / _jobs(p)
    return p


def settings(p):
    """postgresql.conf of every cluster: the loading server and, with the
    overrides of single_user_options, the measured single-user backend."""
    return {
        "shared_buffers": f"{p['shared_buffers_mb']}MB",
        "max_connections": 20,
        "wal_level": "replica",
        "synchronous_commit": "on",
        "full_page_writes": "on",
        "wal_compression": "off",
        "max_wal_size": "8GB",
        "checkpoint_timeout": "1h",
        "autovacuum": "off",
        "jit": "off",
        "max_parallel_workers_per_gather": 0,
    }


def single_user_options(p, workload):
    """-c options of the measured backend: shared_buffers per workload (1MB
    for the OS-cache scan, so no page stays in shared_buffers; the loading
    server's otherwise), and log_temp_files to see the sort spill."""
    sb = "1MB" if workload == "seq-scan-os-cache" else f"{p['shared_buffers_mb']}MB"
    opts = {"shared_buffers": sb}
    if workload == "sort-spill":
        opts["log_temp_files"] = "0"
    return opts


# --- the workloads, as SQL (one statement per line: single-user mode without -j) ---


def _aids(n, scale, seed=1):
    rng = random.Random(seed)
    return [rng.randint(1, 100000 * scale) for _ in range(n)]


def _warm_accounts(aids):
    """Reads every page the lookups will touch into shared_buffers (a bitmap
    scan over the primary key, not a seq scan: that would go through a ring)."""
    return [
        "SET enable_seqscan = off;",
        "SELECT count(abalance) FROM pgbench_accounts WHERE aid = ANY('{"
        + ",".join(map(str, sorted(set(aids))))
        + "}'::int[]);",
        "RESET enable_seqscan;",
    ]


def workload_sql(workload, p, copy_file=None):
    """The statements of one workload, the marker among them: deterministic
    for the parameters (random.Random(1) for keys and values)."""
    if workload == "seq-scan-os-cache":
        return [MARKER] + ["SELECT sum(abalance) FROM pgbench_accounts;"] * p["seq_scans"]
    if workload == "select-only":
        aids = _aids(p["select_queries"], p["scale"])
        return (
            _warm_accounts(aids)
            + [MARKER]
            + [f"SELECT abalance FROM pgbench_accounts WHERE aid = {a};" for a in aids]
        )
    if workload == "tpcb-like":
        # pgbench's built-in tpcb-like script with its random ranges; a fixed
        # mtime instead of CURRENT_TIMESTAMP keeps the output identical
        rng = random.Random(1)
        n, s = p["tpcb_transactions"], p["scale"]
        tx = []
        for _ in range(n):
            aid, bid = rng.randint(1, 100000 * s), rng.randint(1, s)
            tid, delta = rng.randint(1, 10 * s), rng.randint(-5000, 5000)
            tx.append((aid, bid, tid, delta))
        lines = _warm_accounts([t[0] for t in tx]) + [
            "SELECT count(*) FROM pgbench_tellers;",
            "SELECT count(*) FROM pgbench_branches;",
            MARKER,
        ]
        for aid, bid, tid, delta in tx:
            lines += [
                "BEGIN;",
                f"UPDATE pgbench_accounts SET abalance = abalance + {delta} WHERE aid = {aid};",
                f"SELECT abalance FROM pgbench_accounts WHERE aid = {aid};",
                f"UPDATE pgbench_tellers SET tbalance = tbalance + {delta} WHERE tid = {tid};",
                f"UPDATE pgbench_branches SET bbalance = bbalance + {delta} WHERE bid = {bid};",
                "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) "
                f"VALUES ({tid}, {bid}, {aid}, {delta}, '2026-01-01 00:00:00');",
                "END;",
            ]
        return lines
    if workload == "copy":
        return [MARKER, f"COPY {COPY_TABLE} FROM '{copy_file}';"]
    if workload == "wal-heavy-insert":
        return [
            MARKER,
            f"INSERT INTO {INSERT_TABLE} SELECT i, i % 1000, lpad(i::text, 100, 'x') "
            f"FROM generate_series(1, {p['insert_rows']}) i;",
        ]
    if workload == "sort-spill":
        return [
            f"SET work_mem = '{p['work_mem']}';",
            f"SELECT count(*) FROM {SORT_TABLE};",
            MARKER,
            f"SELECT count(*) FROM (SELECT * FROM {SORT_TABLE} ORDER BY h OFFSET 0) s;",
        ]
    raise ValueError(workload)


def copy_rows(p):
    return int(p["copy_mb"] * 2**20 / COPY_BYTES_PER_ROW)


def write_copy_input(path, rows, seed=1):
    """The COPY input: pgbench_accounts-like text rows, deterministic for a seed."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        buf = []
        for aid in range(1, rows + 1):
            buf.append(
                f"{aid}\t{(aid - 1) // 100000 + 1}\t{rng.randint(-5000, 5000)}\t{rng.getrandbits(336):084x}\n"
            )
            if len(buf) >= 10000:
                f.write("".join(buf))
                buf.clear()
        f.write("".join(buf))
    return os.path.getsize(path)


# --- callgrind output ---

_NAMED = re.compile(r"\((\d+)\)(?: (.*))?$")


def parse_callgrind(path):
    """Self (exclusive) instructions per (object, function) of a callgrind
    output file, and its total: (total, {(object, function): Ir}).

    Follows the callgrind format: compressed names "(id) name" / "(id)",
    ob/cob share ids as do fn/cfn; the cost line after calls= is the
    inclusive cost of that call, not the caller's own."""
    names = {"ob": {}, "fn": {}}
    kind_of = {"ob": "ob", "cob": "ob", "fn": "fn", "cfn": "fn"}
    npos, ev = 1, 0
    ob, fn = "???", "???"
    total, summary = None, None
    costs = {}
    after_calls = False
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line[0] == "#":
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                if after_calls:  # the call's inclusive cost
                    after_calls = False
                    continue
                fields = line.split()
                if len(fields) > npos + ev:
                    key = (ob, fn)
                    costs[key] = costs.get(key, 0) + int(fields[npos + ev])
                continue
            key, sep, value = line.partition("=")
            if sep and key in kind_of:
                m = _NAMED.match(value)
                table = names[kind_of[key]]
                if m:
                    if m.group(2) is not None:
                        table[m.group(1)] = m.group(2)
                    name = table.get(m.group(1), "???")
                else:
                    name = value
                if key == "ob":
                    ob = name
                elif key == "fn":
                    fn = name
                continue
            if sep and key == "calls":
                after_calls = True
                continue
            if sep:  # fl, fi, fe, cfi, cfl, jump, jcnd: no cost of their own
                continue
            key, sep, value = line.partition(":")
            if key == "positions":
                npos = len(value.split())
            elif key == "events":
                names_ev = value.split()
                ev = names_ev.index("Ir") if "Ir" in names_ev else 0
            elif key == "summary":
                summary = int(value.split()[ev])
            elif key == "totals":
                total = (total or 0) + int(value.split()[ev])
    if total is None:
        total = summary if summary is not None else sum(costs.values())
    return total, costs


def category(obj, fn):
    """Which of CATEGORIES an (object, function) counts toward."""
    if "libcrypto" in os.path.basename(obj):
        return "libcrypto"
    if fn.startswith("pg_checksum_page") or fn.startswith("pg_checksum_block"):
        return "checksum"
    if re.search(r"mem(cpy|move)", fn):
        return "memcpy"
    return "other"


_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def function_key(obj, fn):
    """(object file name, function) with callgrind's recursion suffix ('2) dropped,
    so that the same function of two builds compares.  Functions without a
    symbol (PLT stubs, stripped libraries) are named by address, which differs
    between builds: they count together per object, as "(unnamed)"."""
    fn = re.sub(r"'\d+$", "", fn)
    return os.path.basename(obj), "(unnamed)" if _ADDRESS.fullmatch(fn) else fn


def top_increases(costs, baseline, n=TOP_FUNCTIONS):
    """The n functions with the most self instructions above the baseline's:
    [("function (object)", extra instructions)], costs and baseline as
    {function_key: Ir}."""
    extra = {k: v - baseline.get(k, 0) for k, v in costs.items()}
    top = sorted((k for k in extra if extra[k] > 0), key=lambda k: -extra[k])[:n]
    return [(f"{fn} ({obj})", extra[(obj, fn)]) for obj, fn in top]


def breakdown(path):
    """{"instructions": total, "libcrypto": ..., "checksum": ..., "memcpy": ...,
    "other": ...} of a callgrind output file, the libcrypto object seen, and
    the self instructions per function_key."""
    total, costs = parse_callgrind(path)
    out = {k: 0 for k in CATEGORIES}
    lib = None
    by_function = {}
    for (obj, fn), v in costs.items():
        cat = category(obj, fn)
        out[cat] += v
        if cat == "libcrypto" and v:
            lib = obj
        k = function_key(obj, fn)
        by_function[k] = by_function.get(k, 0) + v
    out["other"] += total - sum(out.values())  # whatever the file's total has beyond its cost lines
    out["instructions"] = total
    return out, lib, by_function


def temp_file_bytes(log):
    """Bytes of temporary files a backend logged (log_temp_files = 0)."""
    return sum(int(m) for m in re.findall(r"temporary file: path \"[^\"]*\", size (\d+)", log))


def result_digest(stdout):
    """Digest of the results a single-user backend printed (column lines and
    values, which start with a tab after the prompt), to check that every
    configuration computed the same answers."""
    h = hashlib.sha256()
    for line in stdout.splitlines():
        line = re.sub(r"^(backend> )+", "", line)  # the prompt precedes the first line of a result
        if line.startswith("\t"):
            h.update(line.encode() + b"\n")
    return h.hexdigest()


# --- running ---


def load(run, c, p, copy_file):
    """Data every selected workload needs, loaded with the normal server;
    returns {metric: value} about it."""
    ws = p["workloads"]
    info = {}
    if any(w in ws for w in ("seq-scan-os-cache", "select-only", "tpcb-like")):
        _, cmd, _ = c.pgbench(["-i", "-q", "-s", str(p["scale"])], timeout=7200)
        run.command(cmd.replace(c.dir, "$CLUSTER"))
        info["accounts_pages"] = int(c.psql("SELECT pg_relation_size('pgbench_accounts') / 8192"))
    if "copy" in ws:
        c.psql(f"CREATE TABLE {COPY_TABLE} (aid int, bid int, abalance int, filler char(84))")
    if "wal-heavy-insert" in ws:
        c.psql(f"CREATE TABLE {INSERT_TABLE} (id bigint, k int, pad text)")
    if "sort-spill" in ws:
        c.psql(
            f"CREATE TABLE {SORT_TABLE} AS SELECT i AS id, md5(i::text) AS h "
            f"FROM generate_series(1, {p['sort_rows']}) i"
        )
        info["sort_table_pages"] = int(c.psql(f"SELECT pg_relation_size('{SORT_TABLE}') / 8192"))
        plan_text = c.psql(
            f"SET work_mem = '{p['work_mem']}'; EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "
            f"SELECT count(*) FROM (SELECT * FROM {SORT_TABLE} ORDER BY h OFFSET 0) s"
        )
        m = re.search(r"Sort Method: external \w+\s+Disk: (\d+)kB", plan_text)
        info["sort_explain_disk_kb"] = int(m.group(1)) if m else 0
    # hint bits set and visibility map filled now, so no measured read dirties a page
    c.psql("VACUUM (FREEZE, ANALYZE)")
    c.psql("CHECKPOINT")
    return info


def _loaded_tables(p):
    """The tables load() made for p's workloads (what the peer must encrypt)."""
    ws = p["workloads"]
    tables = []
    if any(w in ws for w in ("seq-scan-os-cache", "select-only", "tpcb-like")):
        tables += common.PGBENCH_TABLES + ["pgbench_accounts_pkey"]
    for w, t in (("copy", COPY_TABLE), ("wal-heavy-insert", INSERT_TABLE), ("sort-spill", SORT_TABLE)):
        if w in ws:
            tables.append(t)
    return tables


# the cipher calls calibrated (bench_pagecrypt's cases) and the libcrypto
# functions that do their AES rounds
CASES = ("xts-encrypt", "xts-decrypt", "ctr-wal")
CORES = {
    "xts-encrypt": re.compile(r"aesni_xts_.*encrypt"),
    "xts-decrypt": re.compile(r"aesni_xts_.*decrypt"),
    "ctr-wal": re.compile(r"aesni_ctr32_encrypt_blocks"),
}


def cipher_core(by_function):
    """Self instructions of OpenSSL's AES core functions per calibrated case:
    {"xts-encrypt": Ir, "xts-decrypt": Ir, "ctr-wal": Ir}, by_function as
    {function_key: Ir}."""
    out = {case: 0 for case in CASES}
    for (obj, fn), v in by_function.items():
        if "libcrypto" not in obj:
            continue
        for case, pattern in CORES.items():
            if pattern.search(fn):
                out[case] += v
                break
    return out


def calibrate(run, tool, ciphers, workdir, calls=8):
    """Per cipher and case (CASES): instructions of one 8 kB call on the
    real CPU and under callgrind (all of it, and its AES core's self
    instructions).  Returns {(cipher, case): {"native": n, "callgrind": c,
    "callgrind_core": k}}."""
    out = {}
    native = subprocess.run(
        [tool, "--native-instructions"], capture_output=True, text=True, check=True
    ).stdout
    run.command(f"{os.path.basename(tool)} --native-instructions")
    for line in native.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            out.setdefault((d["cipher"], d["case"]), {})["native"] = d["native_instructions_per_call"]
    os.makedirs(workdir, exist_ok=True)
    for cipher in ciphers:
        for case in CASES:
            counted = []
            for n in (0, calls):
                f = os.path.join(workdir, f"calls-{cipher}-{case}-{n}.out")
                cmd = [
                    VALGRIND,
                    "--tool=callgrind",
                    f"--callgrind-out-file={f}",
                    "--dump-instr=no",
                    tool,
                    "--calls",
                    cipher,
                    case,
                    str(n),
                ]
                subprocess.run(cmd, capture_output=True, text=True, check=True)
                run.command(" ".join(cmd).replace(workdir, "$RUN").replace(os.path.dirname(tool) + "/", ""))
                total, costs = parse_callgrind(f)
                core = cipher_core({function_key(o, fn): v for (o, fn), v in costs.items()})[case]
                counted.append((total, core))
            d = out.setdefault((cipher, case), {})
            d["callgrind"] = (counted[1][0] - counted[0][0]) / calls
            d["callgrind_core"] = (counted[1][1] - counted[0][1]) / calls
    return out


def as_the_cpu_runs_it(instructions, core, calib, cipher):
    """The measured count with the cipher cores' instructions scaled to what
    the real CPU executes for the same calls (see the module docstring)."""
    adjusted = instructions
    for case in CASES:
        d = calib.get((cipher, case))
        if d and d.get("callgrind_core") and "native" in d:
            saved_per_call = d["callgrind"] - d["native"]
            adjusted -= core.get(case, 0) * saved_per_call / d["callgrind_core"]
    return adjusted


def measure(run, c, workload, sql_path, p, tag):
    """One callgrind run of a workload on a fresh copy of c's loaded data
    (in c.dir/run-TAG): {metric: value}, the libcrypto object, the digest of
    its answers and the self instructions per function."""
    rundir = os.path.join(c.dir, f"run-{tag}")
    data = os.path.join(rundir, "data")
    shutil.rmtree(rundir, ignore_errors=True)
    shutil.copytree(c.data, data, symlinks=True)
    out_file = os.path.join(rundir, "callgrind.out")
    opts = [a for k, v in single_user_options(p, workload).items() for a in ("-c", f"{k}={v}")]
    cmd = [
        VALGRIND,
        "--tool=callgrind",
        f"--callgrind-out-file={out_file}",
        "--dump-instr=no",
        "--collect-atstart=yes",
        f"--dump-before={MARKER_FUNCTION}",
        c.install.bin("postgres"),
        "--single",
        "-D",
        data,
        *opts,
        "postgres",
    ]
    stdout_path, stderr_path = os.path.join(rundir, "stdout"), os.path.join(rundir, "stderr")
    t0 = time.perf_counter()
    with open(sql_path) as stdin, open(stdout_path, "w") as so, open(stderr_path, "w") as se:
        r = subprocess.run(cmd, stdin=stdin, stdout=so, stderr=se, timeout=7200)
    seconds = time.perf_counter() - t0
    stdout, stderr = open(stdout_path).read(), open(stderr_path).read()
    errors = [ln for ln in (stdout + stderr).splitlines() if re.search(r"\b(ERROR|FATAL|PANIC):", ln)]
    if r.returncode != 0 or errors:
        raise RuntimeError(
            f"{workload} on {c.config.name}: single-user backend exited {r.returncode}: "
            + "\n".join(errors[:5] or stderr.splitlines()[-15:])
        )
    if not os.path.exists(out_file + ".1"):
        raise RuntimeError(
            f"{workload} on {c.config.name}: callgrind never saw {MARKER_FUNCTION}() "
            "(no dump before the measured part)"
        )
    run.command(" ".join(cmd).replace(rundir, "$RUN") + f" < {workload}.sql")
    m, lib, by_function = breakdown(out_file)
    for case, v in cipher_core(by_function).items():
        m[f"{case}_core"] = v
    m["startup_instructions"], _ = parse_callgrind(out_file + ".1")
    m["valgrind_seconds"] = seconds
    if workload == "sort-spill":
        m["temp_file_mb"] = temp_file_bytes(stderr) / 2**20
    shutil.rmtree(rundir, ignore_errors=True)
    return m, lib, result_digest(stdout), by_function


def run(run, p):
    if not os.access(VALGRIND, os.X_OK):
        raise RuntimeError(f"valgrind not found at {VALGRIND} (apt-get install valgrind)")
    cfgs = common.configs(p["configs"])
    input_dir = os.path.join(run.workdir, NAME, "input")
    os.makedirs(input_dir, exist_ok=True)
    copy_file = os.path.join(input_dir, "copy.txt")
    clusters = {}
    try:
        copy_mb = None
        if "copy" in p["workloads"]:
            copy_mb = write_copy_input(copy_file, copy_rows(p)) / 2**20
            run.progress.note(f"{NAME}: generated {copy_file} ({copy_rows(p):,} rows, {copy_mb:,.1f} MiB)")
        sql = {}
        for w in p["workloads"]:
            sql[w] = os.path.join(input_dir, f"{w}.sql")
            with open(sql[w], "w") as f:
                f.write("\n".join(workload_sql(w, p, copy_file)) + "\n")
        for cfg in cfgs:
            c = run.cluster(cfg, settings(p), NAME)
            clusters[cfg.name] = c
            c.initdb()
            c.start()
            info = load(run, c, p, copy_file)
            common.check_peer(run, NAME, c, _loaded_tables(p))
            enc = c.psql(
                "SELECT coalesce(string_agg(name || '=' || setting, ', ' ORDER BY name), 'none') "
                "FROM pg_settings WHERE name LIKE '%encrypt%' "
                "AND name NOT IN ('password_encryption', 'encryption_key_command')"
            )
            c.stop()
            if copy_mb is not None:
                info["copy_input_mib"] = round(copy_mb, 1)
            for metric, value in info.items():
                run.record(NAME, cfg.name, 0, metric, value, workload="setup", detail=enc)
            run.progress.note(
                f"{NAME}: {cfg.name} loaded ({enc}): " + ", ".join(f"{k} {v:,}" for k, v in info.items())
            )
        # the cipher on the real CPU vs under callgrind, once per run
        tool = run.installs["pgcipher"].micro_bench
        # the peer (open_pg_tde) is calibrated as the pgcipher cipher of its key size: the same
        # OpenSSL XTS cores through EVP (its WAL's CTR is ECB over counter blocks: not calibrated)
        ciphers = list(dict.fromkeys(c.cipher for c in cfgs if c.cipher))
        calib = (
            calibrate(run, tool, ciphers, os.path.join(run.workdir, NAME, "calibration")) if ciphers else {}
        )
        for (cipher, case), d in calib.items():
            for k, v in d.items():
                run.record(NAME, cipher, 0, f"calibration_{k}", v, workload="calibration", case=case)
        if calib:
            run.progress.note(
                f"{NAME}: instructions per 8 kB cipher call, real CPU vs callgrind: "
                + ", ".join(
                    f"{ci} {ca} {d.get('native', 0):,.0f} vs {d.get('callgrind', 0):,.0f}"
                    for (ci, ca), d in sorted(calib.items())
                    if ci in ciphers
                )
            )
        # submitted in the interleaved order and recorded in it; answers and
        # functions are compared with the baseline's (the first configuration)
        # of the same workload and round, whichever ran first
        base = cfgs[0].name
        done = {}
        with ThreadPoolExecutor(_jobs(p)) as pool:
            todo = [
                (rep, w, cfg, pool.submit(measure, run, clusters[cfg.name], w, sql[w], p, f"{w}-{rep}"))
                for rep, w, cfg in interleaved(cfgs, p["repetitions"], p["workloads"])
            ]
            try:
                for rep, w, cfg, fut in todo:
                    m, lib, digest, by_function = fut.result()
                    for metric, value in m.items():
                        name = (
                            metric
                            if metric
                            in (
                                "instructions",
                                "startup_instructions",
                                "valgrind_seconds",
                                "temp_file_mb",
                                *(f"{case}_core" for case in CASES),
                            )
                            else f"instructions_{metric}"
                        )
                        extra = {"detail": lib} if name == "instructions_libcrypto" and lib else {}
                        run.record(NAME, cfg.name, rep, name, value, workload=w, **extra)
                    core = {case: m.get(f"{case}_core", 0) for case in CASES}
                    run.record(
                        NAME,
                        cfg.name,
                        rep,
                        "instructions_native_cipher",
                        as_the_cpu_runs_it(m["instructions"], core, calib, cfg.cipher),
                        workload=w,
                    )
                    run.progress.step(
                        f"{NAME} {w} {cfg.name} round {rep}: {m['instructions'] / 1e6:,.1f} M "
                        f"instructions, libcrypto {100 * m['libcrypto'] / m['instructions']:.1f} % "
                        f"({m['valgrind_seconds']:.0f} s under callgrind)",
                        _expected(p, w) / _jobs(p) + p["setup_share"],
                    )
                    got = done.setdefault((w, rep), {})
                    got[cfg.name] = (digest, by_function)
                    if base not in got:
                        continue
                    base_digest, base_functions = got[base]
                    for name in [n for n in got if n != base]:
                        digest, by_function = got.pop(name)
                        run.record(
                            NAME, name, rep, "same_answers", 1 if digest == base_digest else 0, workload=w
                        )
                        if digest != base_digest:
                            run.progress.note(
                                f"{NAME}: {w} round {rep}: {name}'s ANSWERS DIFFER from {base}'s"
                            )
                        for rank, (fn, extra_ir) in enumerate(top_increases(by_function, base_functions), 1):
                            run.record(
                                NAME,
                                name,
                                rep,
                                "extra_instructions",
                                extra_ir,
                                workload=w,
                                rank=rank,
                                detail=fn,
                            )
            except BaseException:
                for *_, fut in todo:
                    fut.cancel()
                raise
    finally:
        common.stop_all(clusters)
        shutil.rmtree(input_dir, ignore_errors=True)


# --- report ---


def _values(rows, cfg, workload, metric):
    return [
        r["value"]
        for r in rows
        if r["config"] == cfg and r.get("workload") == workload and r["metric"] == metric
    ]


def _med(rows, cfg, workload, metric):
    return stats.median(_values(rows, cfg, workload, metric))


def verdict(ratio, target):
    if target is None or ratio != ratio:
        return "–"
    return "met" if ratio <= target else "not met"


def _spread(vals):
    """(max - min) / median of the rounds, percent."""
    if len(vals) < 2:
        return "–"
    return f"{100 * (max(vals) - min(vals)) / stats.median(vals):.3f} %"


def _pct(part, whole):
    return f"{100 * part / whole:.1f} %" if whole and part == part else "–"


def cipher_alone(rows, c, w, base="stock"):
    """c's ratio to base on workload w if pgcipher added nothing but the
    cipher: 1 + libcrypto's extra instructions (as the CPU runs the cipher)
    / base's instructions.  NaN without the figures."""
    b = _med(rows, base, w, "instructions")
    lib = _med(rows, c, w, "instructions_libcrypto")
    native = _med(rows, c, w, "instructions_native_cipher")
    tot = _med(rows, c, w, "instructions")
    if not (b == b and b and lib == lib and native == native):
        return float("nan")
    base_lib = _med(rows, base, w, "instructions_libcrypto")
    base_lib = base_lib if base_lib == base_lib else 0.0
    return 1 + (lib - (tot - native) - base_lib) / b


def _split_lines(rows, ws, base, encs, native_ratios):
    """The table that splits each ratio as the CPU runs it (native_ratios,
    {(workload, config): ratio}) into the cipher alone and pgcipher's own
    code around it; no lines when no ratio has both."""
    own = "pgcipher's own code" if peer.NAME not in encs else f"own code (pgcipher's; {peer.NAME}'s)"
    md = [
        "\nEach ratio as the CPU runs it, split: *the cipher alone* is 1 + libcrypto's extra instructions "
        "(stock's subtracted, the cores as the CPU runs them) / stock's count, the ratio pgcipher would have "
        "if it added nothing but OpenSSL's cipher calls; *pgcipher's own code* is the rest of the increase "
        "(tweaks, buffers, the WAL page cache, read-backs): what can be removed without a faster cipher or "
        "fewer bytes through it.  A target below the cipher alone cannot be met by removing pgcipher's code."
        + (
            f"  For {peer.NAME} the same split reads as its own code (its storage manager, key lookups, "
            "buffers) against its cipher calls."
            if peer.NAME in encs
            else ""
        )
        + "\n",
        f"| workload | config | as the CPU runs it | the cipher alone | {own} | target |",
        "|---|---|---|---|---|---|",
    ]
    table = []
    for w in ws:
        for c in encs:
            n = native_ratios.get((w, c), float("nan"))
            alone = cipher_alone(rows, c, w, base)
            if n != n or alone != alone:
                continue
            t = TARGETS.get(w)
            table.append(
                f"| `{w}` | {c} | {n:.3f} | {alone:.3f} | {n - alone:+.3f} | "
                + (f"≤ {t:.2f}" + (" (below the cipher alone)" if alone > t else "") if t else "–")
                + " |"
            )
    return md + table if table else []


def report(rows, p, out_dir):
    cfgs = [c for c in p["configs"] if any(r["config"] == c for r in rows)]
    base = "stock"
    encs = [c for c in cfgs if c != base]
    ws = [w for w in p.get("workloads", WORKLOADS) if any(r.get("workload") == w for r in rows)]
    setup = {
        c: {r["metric"]: r["value"] for r in rows if r["config"] == c and r.get("workload") == "setup"}
        for c in cfgs
    }
    md = [
        f"Configurations: {', '.join(cfgs)}, data checksums on in all.  Instructions of one single-user "
        f"backend (`postgres --single`) per workload under valgrind's callgrind, counted from the marker "
        f"statement `{MARKER}` to the backend's exit (its shutdown checkpoint included); backend start, the "
        "key command and the warm-up statements before the marker are not counted.  Every measurement runs on a "
        "fresh copy of a data directory loaded once per configuration by the normal server (pgbench -i, "
        "VACUUM (FREEZE, ANALYZE), CHECKPOINT).  "
        f"{p['repetitions']} round(s), configurations interleaved; medians, and the spread of the rounds "
        "((max − min) / median).  Workloads (scale "
        f"{p['scale']}, fixed SQL, keys from random.Random(1)):\n",
        f"- `seq-scan-os-cache`: `SELECT sum(abalance) FROM pgbench_accounts` {p['seq_scans']}×, "
        "shared_buffers = 1MB, so every page is read from the OS cache (decrypted) on each scan;",
        f"- `select-only`: {p['select_queries']:,} `SELECT abalance FROM pgbench_accounts WHERE aid = k` "
        f"(pgbench -S as a batch), shared_buffers = {p['shared_buffers_mb']}MB, every page they touch read "
        "into shared_buffers before the marker (one bitmap scan for all keys): the hot path;",
        f"- `tpcb-like`: {p['tpcb_transactions']:,} transactions of pgbench's TPC-B-like script as SQL, each "
        "committed (WAL flushed) on its own, same warm-up of the accounts' pages; the shutdown checkpoint "
        "writes what they dirtied;",
        f"- `copy`: `COPY` of a generated server-side text file of {copy_rows(p):,} pgbench_accounts-like rows "
        + (
            f"({setup[base]['copy_input_mib']:,.1f} MiB) "
            if setup.get(base, {}).get("copy_input_mib")
            else ""
        )
        + "into an empty table without indexes;",
        f"- `wal-heavy-insert`: `INSERT ... SELECT` of {p['insert_rows']:,} rows from generate_series "
        "(about 150 bytes each) into an empty table; generate_series in FROM keeps its rows in a tuplestore, "
        "which goes to a temporary file beyond work_mem (4MB);",
        f"- `sort-spill`: `SELECT count(*) FROM (SELECT * FROM {SORT_TABLE} ORDER BY h OFFSET 0) s` over "
        f"{p['sort_rows']:,} rows (md5 text keys) with work_mem = {p['work_mem']}, the table read into "
        "shared_buffers before the marker: the sort's temporary files, which pgcipher encrypts.\n",
        "Two ratios per encrypted configuration: *callgrind* is the count on callgrind's CPU, where OpenSSL "
        "runs AES-XTS without VAES; *as the CPU runs it* replaces the self instructions of OpenSSL's AES cores "
        "(aesni_xts_* for pages and temporary files, aesni_ctr32_encrypt_blocks for the WAL) by what this "
        "machine's CPU executes for the same calls (calibrated below); the targets are judged on it.\n",
        "| workload | "
        + " | ".join(f"{c} (M instr.)" for c in cfgs)
        + " | "
        + " | ".join(f"{c} / {base}, callgrind | {c} / {base}, as the CPU runs it" for c in encs)
        + " | target | "
        + " | ".join(f"{c} vs target" for c in encs)
        + " |",
        "|" + "---|" * (2 + len(cfgs) + 3 * len(encs)),
    ]
    ratios, native_ratios = {}, {}
    for w in ws:
        cells = [f"`{w}`"]
        for c in cfgs:
            v = _med(rows, c, w, "instructions")
            cells.append(f"{v / 1e6:,.1f}" if v == v else "–")
        b = _med(rows, base, w, "instructions")
        for c in encs:
            r = _med(rows, c, w, "instructions") / b if b == b and b else float("nan")
            n = _med(rows, c, w, "instructions_native_cipher") / b if b == b and b else float("nan")
            ratios[(w, c)] = r
            native_ratios[(w, c)] = n
            cells.append(f"{r:.3f}" if r == r else "–")
            cells.append(f"{n:.3f}" if n == n else "–")
        t = TARGETS.get(w)
        cells.append(f"≤ {t:.2f}" if t else "none (reported)")
        cells += [
            verdict(
                native_ratios[(w, c)] if native_ratios[(w, c)] == native_ratios[(w, c)] else ratios[(w, c)], t
            )
            for c in encs
        ]
        md.append("| " + " | ".join(cells) + " |")
    md += _split_lines(rows, ws, base, encs, native_ratios)
    calib = [r for r in rows if r.get("workload") == "calibration"]
    if calib:

        def cal(cipher, case, k):
            return stats.median(
                [
                    r["value"]
                    for r in calib
                    if r["config"] == cipher and r.get("case") == case and r["metric"] == f"calibration_{k}"
                ]
            )

        lines = []
        for cipher in sorted({r["config"] for r in calib}):
            for case in CASES:
                nat, cg, core = (cal(cipher, case, k) for k in ("native", "callgrind", "callgrind_core"))
                if nat == nat and cg == cg:
                    lines.append(
                        f"{cipher} {case}: {nat:,.0f} on the CPU, {cg:,.0f} under callgrind "
                        f"(of which {core:,.0f} in the AES core)"
                    )
        md.append(
            "\nCalibration, instructions per cipher call on one 8 kB page (XTS: 8,176 bytes, the WAL's CTR: "
            "8,192): " + "; ".join(lines) + ".  On the CPU: `bench_pagecrypt --native-instructions`, which "
            "single-steps a child process through the calls with ptrace and counts the steps (this VM "
            "exposes no performance counters); under callgrind: `bench_pagecrypt --calls` with 0 and 8 "
            "calls, subtracted.  The call is the same EVP code either way; only OpenSSL's choice of "
            "AES-XTS routine differs (VAES/AVX-512 on the CPU, AES-NI under valgrind), so the difference "
            "is charged to the core's instructions in proportion; OpenSSL's CTR has one AES-NI routine "
            "on both, so its two counts agree."
        )
    md.append(
        "\nWhere the instructions go, per workload and configuration (shares of the measured count: "
        "libcrypto = every function in the object file libcrypto*; checksum = pg_checksum_page / "
        "pg_checksum_block; memcpy = memcpy / memmove; the rest):"
    )
    for w in ws:
        md += [
            "",
            f"`{w}`" + (f" (target ≤ {TARGETS[w]:.2f}×)" if TARGETS.get(w) else "") + ":",
            "",
            "| config | M instructions | spread of rounds | vs stock | libcrypto | checksum | memcpy | "
            "other | answers as stock |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        b = _med(rows, base, w, "instructions")
        for c in cfgs:
            vals = _values(rows, c, w, "instructions")
            if not vals:
                continue
            tot = stats.median(vals)
            shares = [_pct(_med(rows, c, w, f"instructions_{k}"), tot) for k in CATEGORIES]
            same = _values(rows, c, w, "same_answers")
            md.append(
                f"| {c} | {tot / 1e6:,.1f} | {_spread(vals)} | "
                + (f"{tot / b:.3f}" if b == b and b else "–")
                + " | "
                + " | ".join(shares)
                + " | "
                + ("–" if c == base or not same else "yes" if all(same) else "NO")
                + " |"
            )
        tops = []
        for c in encs:
            top = sorted(
                (
                    r
                    for r in rows
                    if r["config"] == c
                    and r.get("workload") == w
                    and r["metric"] == "extra_instructions"
                    and r["rep"] == 1
                ),
                key=lambda r: r.get("rank", 0),
            )
            extra = _med(rows, c, w, "instructions") - b
            # not the noise; not a function named by its address (results of
            # runs before function_key folded those: they differ per build)
            top = [
                r
                for r in top
                if extra == extra
                and r["value"] >= 0.01 * abs(extra)
                and not re.match(r"0x[0-9a-fA-F]+ \(", r.get("detail", ""))
            ]
            if top:
                tops.append(
                    f"{c} {'+' if extra >= 0 else '−'}{abs(extra) / 1e6:,.1f} M in all: "
                    + ", ".join(f"{r['detail']} +{r['value'] / 1e6:,.1f} M" for r in top)
                )
        if tops:
            md.append(
                "\nLargest increases over stock by function (self instructions, round 1): "
                + "; ".join(tops)
                + "."
            )
        if w == "sort-spill":
            tmp = {c: _med(rows, c, w, "temp_file_mb") for c in cfgs}
            md.append(
                "\nTemporary files written by the measured sort (log_temp_files = 0): "
                + ", ".join(f"{c} {v:,.1f} MB" for c, v in tmp.items() if v == v)
                + (
                    f"; EXPLAIN ANALYZE at load: external sort, {setup[base].get('sort_explain_disk_kb', 0):,} kB "
                    "on disk"
                    if setup.get(base, {}).get("sort_explain_disk_kb")
                    else ""
                )
                + "."
            )
    # per page read and decrypted, seq-scan
    w = "seq-scan-os-cache"
    if w in ws and setup.get(base, {}).get("accounts_pages"):
        pages = setup[base]["accounts_pages"] * p["seq_scans"]
        b = _med(rows, base, w, "instructions")
        lines = []
        for c in encs:
            lib = _med(rows, c, w, "instructions_libcrypto") - _med(rows, base, w, "instructions_libcrypto")
            extra = _med(rows, c, w, "instructions") - b
            if lib == lib:
                lines.append(
                    f"{c}: {lib / pages:,.0f} libcrypto instructions per page decrypted, "
                    f"{extra / pages:,.0f} more instructions per page than stock in all"
                )
        md.append(
            f"\nPer page in `{w}` ({setup[base]['accounts_pages']:,} pages of pgbench_accounts × "
            f"{p['seq_scans']} scans = {pages:,} pages read from the OS cache): "
            + "; ".join(lines)
            + " (stock's libcrypto instructions subtracted; the page cipher alone, under callgrind's AES-NI "
            "path: see below)."
        )
    md.append(
        "\nInstruction counts come from callgrind's simulated CPU, not from the machine's counters (this VM "
        "has none).  valgrind 3.19 does not emulate AVX-512 or VAES, so OpenSSL's VAES code paths are NOT "
        "taken under callgrind: libcrypto's count is that of its AES-NI path, which overstates the cipher's "
        "share of the real machine's instructions (the `micro` scenario measures the real cipher speed).  "
        "An instruction is not a cycle: AES rounds, memcpy of whole pages and checksums run many bytes per "
        "instruction, so these ratios approximate CPU time but do not equal it, and I/O waits are not in "
        "them at all.  Counts repeat to within the spread shown (backend start-up, hash seeds)."
    )
    md.append(
        "\nThe libcrypto instructions of stock (and some of the encrypted configurations') are OpenSSL's "
        "clean-up at process exit, inside the measured part.  libcrypto's share is not the whole cost of "
        "encryption: pgcipher's own code around the cipher (tweaks, buffers, the temporary files' "
        'read-back of units a write covers in part) counts under "other"; the largest increases by '
        "function above show where it goes."
    )
    enc = {}
    for r in rows:
        if r.get("workload") == "setup" and r.get("detail"):
            enc.setdefault(r["config"], r["detail"])
    libs = {}
    for r in rows:
        if r["metric"] == "instructions_libcrypto" and r.get("detail"):
            libs.setdefault(r["config"], r["detail"])
    if enc:
        md.append(
            "\nEncryption settings of each configuration: "
            + "; ".join(f"{c}: `{enc[c]}`" for c in cfgs if c in enc)
            + ".  libcrypto mapped: "
            + "; ".join(f"{c}: `{libs[c]}`" for c in cfgs if c in libs)
            + "."
        )
    pngs = []
    labels, values = [], []
    for (w, c), r in ratios.items():
        if r == r:
            labels.append(f"{w} {c}")
            values.append((r - 1) * 100)
    if labels and plots.bars(
        labels,
        values,
        os.path.join(out_dir, f"{NAME}-ratio.png"),
        "Instructions, encrypted vs stock (callgrind)",
        "% more instructions than stock",
    ):
        pngs.append(f"{NAME}-ratio.png")
    if _breakdown_plot(rows, ws, cfgs, os.path.join(out_dir, f"{NAME}-breakdown.png")):
        pngs.append(f"{NAME}-breakdown.png")
    return "\n".join(md), pngs


def _breakdown_plot(rows, ws, cfgs, path):
    """Stacked bars: M instructions per workload and configuration, by category."""
    import matplotlib.pyplot as plt

    labels, parts = [], {k: [] for k in CATEGORIES}
    for w in ws:
        for c in cfgs:
            tot = _med(rows, c, w, "instructions")
            if tot != tot:
                continue
            labels.append(f"{w} {c}")
            for k in CATEGORIES:
                v = _med(rows, c, w, f"instructions_{k}")
                parts[k].append((v if v == v else 0) / tot * 100)
    if not labels:
        return False
    fig, ax = plt.subplots(figsize=(8, max(3, 0.28 * len(labels) + 1.2)))
    left = [0.0] * len(labels)
    y = list(range(len(labels)))
    for i, k in enumerate(CATEGORIES):
        ax.barh(y, parts[k], left=left, label=k, color=f"C{i}")
        left = [a + b for a, b in zip(left, parts[k])]
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("% of the workload's instructions")
    ax.set_title("Where the instructions go (callgrind, AES-NI path)")
    # below the axes: every bar fills the width
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=len(CATEGORIES))
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return True
