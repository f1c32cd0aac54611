"""What each configuration leaves in plaintext on disk: a coverage table.

    build/venv/bin/python -m bench.peer.coverage --out DIR

For stock (the control), aes-256 (pgcipher) and open_pg_tde (the peer, where
built), a cluster made as the benchmark makes it (bench/cluster.py: the same
initdb, the same set-up of the peer) gets a distinct marker string in every
place data can go (PLACES): a table and its index, TOAST, WAL, a temporary
file, a temporary table, an unlogged table, a materialized view, the system
catalogs (names, a comment, a CHECK constraint, a function body, a view
definition), pg_statistic, pg_stat_statements' query texts, a two-phase
state file, a logical decoding spill file, an SLRU (NOTIFY payloads) and the
server log.  The markers are written so that a statement's text never holds
one whole (concatenated on the server, or DDL run through EXECUTE), except
where a place needs the literal (a GID, the statement kept by
pg_stat_statements, the logged statement): so a marker found in a file was
stored there as data, not echoed from a statement.

Every byte of every file is then searched for every marker: the data
directory twice, once while the server runs with the short-lived files held
open (a cursor's sort spilled to a temporary file, a temporary table pushed
out of temp_buffers, a NOTIFY queue a listener has not read, a large
uncommitted transaction decoded by pg_recvlogical, so spilled), and once
after a CHECKPOINT, a WAL switch and a clean stop; a base backup taken as
each configuration's documentation says (pg_basebackup -X stream; the peer's
own open_pg_tde_basebackup -E, its documented way with WAL encryption); the
WAL archive (archive_command = cp: the segments as pg_wal holds them); and
the server log (outside the data directory; log_statement = 'all').

The result: DIR/coverage.md (the table, place by configuration, "not found"
or the kinds of file the plaintext was found in, then every file by name)
and DIR/coverage.json.  The control must find each marker somewhere, or the
search could not have failed there: the table says so where it does not."""

import argparse
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from bench import peer
from bench.cluster import STANDARD_CONFIGS, Cluster, Install, _tail

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PGCIPHER_BUILD", os.path.join(TOP, "build"))

# (key, label, what is written); keys are [a-z_] (they end a marker: "PGCMARK-<token>-<key>.")
PLACES = [
    ("heap", "table (heap; tde_heap on the peer)", "three rows of a table with the marker in a text column"),
    ("index", "its index", "an expression index on (k || marker): the marker only in the index's keys"),
    ("toast", "TOAST", "a 6 kB value, STORAGE EXTERNAL (uncompressed), the marker at its start"),
    ("wal", "WAL", "pg_logical_emit_message(false, ...) three times: the marker only in WAL"),
    (
        "tempfile",
        "temporary file",
        "ORDER BY of 200,000 generated rows with work_mem = 64kB, a cursor held open",
    ),
    ("temptable", "temporary table", "20,000 rows (5 MB) into a temporary table with temp_buffers = 800kB"),
    ("unlogged", "unlogged table", "three rows of an unlogged table"),
    ("matview", "materialized view", "a materialized view whose rows hold the marker"),
    ("cat_table", "catalog: table name", "CREATE TABLE with the marker as its name (pg_class)"),
    ("cat_column", "catalog: column name", "a column named by the marker (pg_attribute)"),
    ("cat_comment", "catalog: comment", "COMMENT ON TABLE (pg_description)"),
    (
        "cat_check",
        "catalog: CHECK constraint",
        "CONSTRAINT <marker> CHECK (v <> '<marker>') (pg_constraint)",
    ),
    ("cat_function", "catalog: function body", "a SQL function returning the marker (pg_proc.prosrc)"),
    (
        "cat_view",
        "catalog: view definition",
        "a view with a column alias of the marker (pg_rewrite, pg_attribute)",
    ),
    (
        "statistic",
        "pg_statistic",
        "ANALYZE of a table where half the rows are the marker: a most common value",
    ),
    ("pgss", "pg_stat_statements query texts", 'SELECT 1 AS "<marker>" (track_utility = off)'),
    ("twophase", "two-phase state file", "PREPARE TRANSACTION '<marker>', then CHECKPOINT (pg_twophase)"),
    (
        "spill",
        "logical decoding spill file",
        "an uncommitted 20,000-row INSERT decoded by pg_recvlogical (test_decoding, "
        "logical_decoding_work_mem = 64kB)",
    ),
    ("slru", "SLRU (pg_notify)", "400 NOTIFY payloads of 1 kB unread by a listener (notify_buffers = 16)"),
    ("log", "server log", "SELECT '<marker>' with log_statement = 'all': plaintext in every configuration"),
]
KEYS = [k for k, _, _ in PLACES]
CONFIGS = ["stock", "aes-256", peer.NAME]
SLOT = "cov_slot"


def marker(token, key):
    return f"PGCMARK-{token}-{key}."


def split_lit(text):
    """A SQL expression for text that never holds it whole: 'PGCMA' || 'RK-...'."""
    return f"('{text[:5]}' || '{text[5:]}')"


def settings(config, archive_dir):
    preload = "pg_stat_statements" if config != peer.NAME else "open_pg_tde,pg_stat_statements"
    return {
        "shared_buffers": "32MB",
        "max_connections": 30,
        "shared_preload_libraries": f"'{preload}'",
        "pg_stat_statements.track_utility": "off",
        "wal_level": "logical",
        "max_wal_senders": 6,
        "max_replication_slots": 6,
        "logical_decoding_work_mem": "'64kB'",
        "max_prepared_transactions": 4,
        "archive_mode": "on",
        "archive_command": f"'cp %p {archive_dir}/%f'",
        "log_statement": "'all'",
        "autovacuum": "off",
        "checkpoint_timeout": "1h",
    }


class Session:
    """One psql session held open (a cursor, a temporary table, a listener,
    an open transaction): statements in, output read to a sync line."""

    SYNC = "__COVERAGE_SYNC__"

    def __init__(self, c):
        self.c = c
        self.proc = subprocess.Popen(
            [c.install.bin("psql"), "-X", "-q", "-At", *c.conninfo(), "-d", "postgres"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )

    def run(self, sql, timeout=300):
        timer = threading.Timer(timeout, self.proc.kill)
        timer.start()
        try:
            # the statement ends with ";" or psql keeps it in its buffer past the \echo
            self.proc.stdin.write(sql.rstrip().rstrip(";") + f";\n\\echo {self.SYNC}\n")
            self.proc.stdin.flush()
            out = []
            while True:
                line = self.proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"psql session ended: {''.join(out)[-500:]}")
                if line.rstrip("\n") == self.SYNC:
                    break
                out.append(line)
        finally:
            timer.cancel()
        errors = [x for x in out if "ERROR:" in x or "FATAL:" in x]
        if errors:
            raise RuntimeError("".join(errors).strip()[:500])
        return "".join(out)

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


def _do(ddl_format, *args):
    """A DO block running format(ddl_format, args...): the statement logged holds no whole marker."""
    body = ", ".join(args)
    return f"DO $cov$ BEGIN EXECUTE format({_q(ddl_format)}, {body}); END $cov$"


def _q(s):
    return "'" + s.replace("'", "''") + "'"


def write_places(c, token, errors):
    """The places written with the server running and nothing held open."""
    m = {k: split_lit(marker(token, k)) for k in KEYS}
    steps = {
        "heap": [
            "CREATE TABLE cov_heap (id int, v text)",
            f"INSERT INTO cov_heap SELECT g, {m['heap']} || ' row ' || g FROM generate_series(1, 3) g",
        ],
        "index": [
            "CREATE TABLE cov_idx (k text)",
            "INSERT INTO cov_idx SELECT 'k' || g FROM generate_series(1, 100) g",
            _do("CREATE INDEX cov_idx_expr ON cov_idx ((k || %L))", m["index"]),
        ],
        "toast": [
            "CREATE TABLE cov_toast (id int, v text)",
            "ALTER TABLE cov_toast ALTER COLUMN v SET STORAGE EXTERNAL",
            f"INSERT INTO cov_toast SELECT g, {m['toast']} || repeat(md5(g::text), 200) "
            "FROM generate_series(1, 3) g",
        ],
        "wal": [
            f"SELECT count(pg_logical_emit_message(false, 'cov', {m['wal']} || ' ' || g)) "
            "FROM generate_series(1, 3) g"
        ],
        "unlogged": [
            "CREATE UNLOGGED TABLE cov_unlogged (id int, v text)",
            f"INSERT INTO cov_unlogged SELECT g, {m['unlogged']} || ' row ' || g FROM generate_series(1, 3) g",
        ],
        "matview": [
            _do(
                "CREATE MATERIALIZED VIEW cov_matview AS SELECT g, %L || ' row ' || g AS v "
                "FROM generate_series(1, 3) g",
                m["matview"],
            )
        ],
        "cat_table": [_do("CREATE TABLE %I (id int)", m["cat_table"])],
        "cat_column": [_do("CREATE TABLE cov_cols (%I int)", m["cat_column"])],
        "cat_comment": [_do("COMMENT ON TABLE cov_heap IS %L", m["cat_comment"])],
        "cat_check": [
            _do(
                "CREATE TABLE cov_check (v text CONSTRAINT %I CHECK (v <> %L))",
                m["cat_check"],
                m["cat_check"],
            )
        ],
        "cat_function": [
            _do(
                "CREATE FUNCTION cov_fn() RETURNS text LANGUAGE sql AS %L",
                f"'SELECT ' || quote_literal({m['cat_function']})",
            )
        ],
        "cat_view": [_do("CREATE VIEW cov_view AS SELECT id AS %I FROM cov_heap", m["cat_view"])],
        "statistic": [
            "CREATE TABLE cov_stats (v text)",
            f"INSERT INTO cov_stats SELECT CASE WHEN g % 2 = 0 THEN {m['statistic']} ELSE md5(g::text) END "
            "FROM generate_series(1, 1000) g",
            "ANALYZE cov_stats",
        ],
        # the literal is the point here: pg_stat_statements keeps the alias, not a constant
        "pgss": [f'SELECT 1 AS "{marker(token, "pgss")}"'],
        "log": [f"SELECT '{marker(token, 'log')}' AS logged"],
    }
    for key, statements in steps.items():
        try:
            for sql in statements:
                c.psql(sql)
        except RuntimeError as e:
            errors[key] = str(e).splitlines()[0]
    # a two-phase state file: PREPARE TRANSACTION needs the GID as a literal
    try:
        c.psql("CREATE TABLE cov_2pc (id int)")
        c.psql(f"BEGIN; INSERT INTO cov_2pc VALUES (1); PREPARE TRANSACTION '{marker(token, 'twophase')}'")
    except RuntimeError as e:
        errors["twophase"] = str(e).splitlines()[0]
    c.psql("CHECKPOINT")  # writes the prepared transaction's state file, and the pages


def hold_live_places(c, token, errors, notes):
    """Open what lives only while a session or a query does; returns
    (sessions, pg_recvlogical process) to close after the live scan."""
    m = {k: split_lit(marker(token, k)) for k in KEYS}
    sessions, recv = [], None
    a = Session(c)
    sessions.append(a)
    try:
        a.run("SET temp_buffers = '800kB'")  # the least: 100 buffers
        a.run(
            "CREATE TEMP TABLE cov_temp (id int, v text); "
            f"INSERT INTO cov_temp SELECT g, {m['temptable']} || repeat('t', 200) || g "
            "FROM generate_series(1, 20000) g"
        )
    except RuntimeError as e:
        errors["temptable"] = str(e).splitlines()[0]
    try:
        a.run(
            "SET work_mem = '64kB'; BEGIN; DECLARE cov_cur CURSOR FOR SELECT g, md5(g::text) || "
            f"{m['tempfile']} AS v FROM generate_series(1, 200000) g ORDER BY v; FETCH 1 FROM cov_cur"
        )
    except RuntimeError as e:
        errors["tempfile"] = str(e).splitlines()[0]
    # NOTIFY payloads: a listener inside a transaction reads none, so the queue keeps them
    b = Session(c)
    sessions.append(b)
    try:
        b.run("LISTEN cov; BEGIN; SELECT 1")
        c.psql(
            f"SELECT count(pg_notify('cov', {m['slru']} || ' ' || g || ' ' || repeat('n', 1000))) "
            "FROM generate_series(1, 400) g"
        )
    except RuntimeError as e:
        errors["slru"] = str(e).splitlines()[0]
    # a large transaction decoded while it is open: its changes spill to pg_replslot
    try:
        recv = subprocess.Popen(
            [
                c.install.bin("pg_recvlogical"),
                *c.conninfo(),
                "-d",
                "postgres",
                "-S",
                SLOT,
                "--start",
                "-f",
                "/dev/null",
                "-s",
                "1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        s = Session(c)
        sessions.append(s)
        s.run(
            "BEGIN; INSERT INTO cov_spill SELECT g, "
            f"{m['spill']} || repeat('s', 200) FROM generate_series(1, 20000) g"
        )
        slotdir = os.path.join(c.data, "pg_replslot", SLOT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if any(f.endswith(".spill") for f in os.listdir(slotdir)):
                break
            if recv.poll() is not None:
                raise RuntimeError(f"pg_recvlogical exited: {recv.stderr.read().strip()[:300]}")
            time.sleep(0.5)
        else:
            notes.append(f"{c.config.name}: no spill file appeared in pg_replslot/{SLOT} within 60 s")
    except (RuntimeError, OSError) as e:
        errors["spill"] = str(e).splitlines()[0]
    return sessions, recv


def release(sessions, recv):
    for s in sessions:
        try:
            s.close()
        except Exception:
            pass
    if recv and recv.poll() is None:
        recv.terminate()
        try:
            recv.wait(timeout=30)
        except subprocess.TimeoutExpired:
            recv.kill()
            recv.wait()


def relation_names(c):
    """{"base/5/16384": "cov_heap", ...} of every relation with storage in postgres,
    plus the shared catalogs (global/)."""
    out = c.psql(
        "SELECT pg_relation_filepath(oid), relname FROM pg_class WHERE pg_relation_filepath(oid) IS NOT NULL"
    )
    names = {}
    for line in out.splitlines():
        path, name = line.split("|", 1)
        names[path] = name
    return names


_SEGMENT = re.compile(r"[0-9A-F]{24}(\.partial)?$")
_SLRU = ("pg_xact", "pg_subtrans", "pg_multixact", "pg_notify", "pg_commit_ts", "pg_serial")


def kind_of(rel, names):
    """(kind, detail) of a file by its path relative to a data directory."""
    parts = rel.split(os.sep)
    base = os.path.basename(rel)
    if "pgsql_tmp" in parts:
        return "temporary file", rel
    if parts[0] in ("base", "global") and len(parts) >= 2:
        if re.match(r"t\d+_\d+", base):
            return "temporary relation", rel
        stem = re.sub(r"(_fsm|_vm|_init)?(\.\d+)?$", "", rel)
        name = names.get(stem)
        if name is None and re.fullmatch(r"\d+", os.path.basename(stem)):
            name = f"relfilenode {os.path.basename(stem)}"
        if name:
            return "relation", name
        return "other", rel
    if parts[0] == "pg_wal":
        return ("WAL", base) if _SEGMENT.match(base) else ("other", rel)
    if parts[0] in _SLRU:
        return f"SLRU {parts[0]}", rel
    if parts[0] == "pg_twophase":
        return "two-phase state", rel
    if parts[0] == "pg_replslot":
        return ("spill file", rel) if base.endswith(".spill") else ("replication slot", rel)
    if parts[0] in ("pg_stat_tmp", "pg_stat") and ("pgss" in base or "pg_stat_statements" in base):
        return "pg_stat_statements texts", rel
    return "other", rel


def scan(root, pattern, names, where):
    """{key: [(where, kind, detail, path)]} of every marker found in any file under root."""
    found = {}
    if os.path.isfile(root):
        files = [(root, os.path.basename(root))]
    else:
        files = []
        for d, _, fs in os.walk(root):
            for f in fs:
                p = os.path.join(d, f)
                files.append((p, os.path.relpath(p, root)))
    for p, rel in files:
        if os.path.islink(p):
            continue
        try:
            with open(p, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        keys = {k.decode() for k in pattern.findall(data)}
        if not keys:
            continue
        kind, detail = (
            ("server log", rel)
            if where == "log"
            else ("WAL", rel)
            if where == "archive" and _SEGMENT.match(os.path.basename(rel))
            else kind_of(rel, names)
        )
        for k in keys:
            found.setdefault(k, []).append((where, kind, detail, rel))
    return found


def merge(into, more):
    for k, v in more.items():
        for item in v:
            if item not in into.setdefault(k, []):
                into[k].append(item)


def base_backup(c, dest, notes):
    """A base backup as the configuration's documentation says: pg_basebackup -X
    stream; for the peer, open_pg_tde_basebackup --encrypt-wal=aes_256 (-E) with its key files copied
    into the destination first (its backup-wal-enabled guide)."""
    args = [*c.conninfo(), "-D", dest, "-X", "stream", "-c", "fast", "--no-sync"]
    if c.config.peer:
        os.makedirs(dest)
        shutil.copytree(os.path.join(c.data, "open_pg_tde"), os.path.join(dest, "open_pg_tde"))
        cmd = [c.install.bin("open_pg_tde_basebackup"), *args, "--encrypt-wal=aes_256"]
    else:
        cmd = [c.install.bin("pg_basebackup"), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    shown = " ".join(os.path.basename(cmd[0]) if i == 0 else a for i, a in enumerate(cmd))
    shown = shown.replace(dest, "$BACKUP").replace(c.dir, "$CLUSTER")
    if r.returncode != 0:
        notes.append(f"{c.config.name}: `{shown}` failed: {r.stderr.strip()[-400:]}")
        return None
    if r.stderr.strip():
        notes.append(f"{c.config.name}: `{shown}` said: {r.stderr.strip()[-400:]}")
    return shown


def wait_archived(c, segment, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        last = c.psql("SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver")
        if last and last[:24] >= segment:
            return True
        time.sleep(0.5)
    return False


def versions(c):
    v = {"server": c.psql("SELECT version()")}
    if c.config.peer:
        v["open_pg_tde"] = c.psql("SELECT extversion FROM pg_extension WHERE extname = 'open_pg_tde'")
    v["pg_stat_statements"] = c.psql(
        "SELECT extversion FROM pg_extension WHERE extname = 'pg_stat_statements'"
    )
    v["encryption settings"] = c.psql(
        "SELECT coalesce(string_agg(name || '=' || setting, ', ' ORDER BY name), 'none') "
        "FROM pg_settings WHERE (name LIKE '%encrypt%' OR name LIKE 'open_pg_tde.%') "
        "AND name NOT IN ('password_encryption', 'encryption_key_command')"
    )
    return v


def cover(install, config_name, workdir, key_file, token, progress=print):
    """Run one configuration; returns its result dict."""
    cfg = STANDARD_CONFIGS[config_name]
    archive = os.path.join(workdir, config_name + "-archive")
    backup = os.path.join(workdir, config_name + "-backup")
    os.makedirs(archive, exist_ok=True)
    c = Cluster(install, cfg, workdir, settings(config_name, archive), key_file)
    errors, notes, found = {}, [], {}
    pattern = re.compile(rb"PGCMARK-" + token.encode() + rb"-([a-z_]+)\.")
    result = {"config": config_name}
    try:
        c.initdb()
        c.start()
        progress(f"coverage: {config_name}: started on port {c.port}")
        c.psql("CREATE EXTENSION pg_stat_statements")
        if cfg.peer:
            c.psql("CREATE EXTENSION IF NOT EXISTS open_pg_tde")
        # the slot first: creating it waits for running transactions, the prepared one too
        c.psql(f"SELECT pg_create_logical_replication_slot('{SLOT}', 'test_decoding')")
        c.psql("CREATE TABLE cov_spill (id int, v text)")
        result["versions"] = versions(c)
        write_places(c, token, errors)
        if cfg.peer:
            tables = [
                "cov_heap",
                "cov_idx",
                "cov_idx_expr",
                "cov_toast",
                "cov_unlogged",
                "cov_matview",
                "cov_stats",
            ]
            try:
                got = peer.encrypted_tables(c, tables)
                result["peer_tables"] = {t: f"{am}, encrypted: {enc}" for t, (am, enc) in got.items()}
            except RuntimeError as e:
                notes.append(f"{config_name}: open_pg_tde_is_encrypted: {e}")
        sessions, recv = hold_live_places(c, token, errors, notes)
        try:
            names = relation_names(c)
            live = scan(c.data, pattern, names, "running")
        finally:
            release(sessions, recv)
        merge(found, live)
        progress(f"coverage: {config_name}: live scan found {len(live)} markers")
        c.psql("CHECKPOINT")
        shown = base_backup(c, backup, notes)
        result["backup"] = shown
        # some WAL first: a switch at the very start of a segment (after the backup's own) switches nothing
        c.psql("SELECT pg_logical_emit_message(false, 'cov', 'switch')")
        seg = c.psql("SELECT pg_walfile_name(pg_switch_wal())")
        if not wait_archived(c, seg):
            notes.append(f"{config_name}: segment {seg} not archived within 60 s")
        names = relation_names(c)
        c.stop()
        merge(found, scan(c.data, pattern, names, "data"))
        if shown:
            merge(found, scan(backup, pattern, names, "backup"))
        merge(found, scan(archive, pattern, names, "archive"))
        merge(found, scan(os.path.join(c.dir, "server.log"), pattern, names, "log"))
        result["archived"] = sorted(os.listdir(archive))
    except Exception as e:
        notes.append(f"{config_name}: failed: {e}")
        notes.append(_tail(os.path.join(c.dir, "server.log"), 1500))
    finally:
        c.destroy()
        shutil.rmtree(archive, ignore_errors=True)
        shutil.rmtree(backup, ignore_errors=True)
    result.update(found=found, errors=errors, notes=notes)
    return result


WHERE = {"running": "", "data": "", "backup": "base backup: ", "archive": "WAL archive: ", "log": ""}


def cell(result, key):
    if key in result["errors"]:
        return "error: " + result["errors"][key].replace("|", "\\|")
    items = result["found"].get(key, [])
    if not items:
        return "not found"
    groups = {}
    for where, kind, detail, _ in items:
        label = WHERE[where] + kind
        if kind == "relation":
            groups.setdefault(label, set()).add(detail)
        else:
            groups.setdefault(label, set())
    order = sorted(groups, key=lambda g: (g.startswith("base backup"), g.startswith("WAL archive"), g))
    parts = [g + (f" ({', '.join(sorted(groups[g]))})" if groups[g] else "") for g in order]
    return "**found**: " + "; ".join(parts)


def markdown(results, token):
    cfgs = [r["config"] for r in results]
    by = {r["config"]: r for r in results}
    md = [
        "| place | what is written | " + " | ".join(cfgs) + " |",
        "|" + "---|" * (2 + len(cfgs)),
    ]
    for key, label, what in PLACES:
        md.append(f"| {label} | {what} | " + " | ".join(cell(by[c], key) for c in cfgs) + " |")
    control = by.get("stock")
    if control:
        missed = [label for key, label, _ in PLACES if not control["found"].get(key)]
        md.append(
            "\nThe control (stock) "
            + (
                "found every marker, so the search could have failed in every row."
                if not missed
                else "did not find the marker of: " + ", ".join(missed) + " (the search there cannot fail)."
            )
        )
    md.append(f"\nMarkers: `PGCMARK-{token}-<place>.`; every file where one was found:\n")
    for r in results:
        md.append(f"- **{r['config']}**:")
        for key, label, _ in PLACES:
            items = r["found"].get(key, [])
            if items:
                files = ", ".join(
                    f"`{('' if w in ('running', 'data') else w + ':')}{rel}`"
                    + (" (while running)" if w == "running" else "")
                    for w, _, _, rel in sorted(items, key=lambda i: (i[0], i[3]))
                )
                md.append(f"  - {label}: {files}")
        for n in r["notes"]:
            md.append(f"  - note: {n}")
    return "\n".join(md)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.peer.coverage", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="where coverage.md and coverage.json go")
    ap.add_argument("--pgcipher", default=os.path.join(BUILD, "install"))
    ap.add_argument("--stock", default=os.path.join(BUILD, "stock", "install"))
    ap.add_argument("--open-pg-tde", default=os.path.join(BUILD, "open_pg_tde", "install"))
    ap.add_argument("--config", action="append", choices=CONFIGS, help="repeatable; default: all three")
    args = ap.parse_args(argv)
    names = args.config or list(CONFIGS)
    prefixes = {"stock": args.stock, "aes-256": args.pgcipher, peer.NAME: args.open_pg_tde}
    if peer.NAME in names:
        built, why = peer.status(args.open_pg_tde, args.stock)
        if not built:
            print(f"coverage: run without open_pg_tde: {why}", flush=True)
            names.remove(peer.NAME)
    os.makedirs(args.out, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="pgcov")  # short: Unix socket paths live here
    key_file = os.path.join(workdir, "kek")
    with open(key_file, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    os.chmod(key_file, 0o600)
    token = secrets.token_hex(4)
    results = []
    try:
        for name in names:
            install = STANDARD_CONFIGS[name].install
            results.append(
                cover(Install(install, prefixes[name]), name, workdir, key_file, token, progress=_note)
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text = markdown(results, token)
    with open(os.path.join(args.out, "coverage.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "coverage.json"), "w") as f:
        json.dump({"token": token, "places": PLACES, "results": results}, f, indent=1)
    print(text)
    failed = [r["config"] for r in results if any(n.startswith(f"{r['config']}: failed") for n in r["notes"])]
    return 1 if failed else 0


def _note(msg):
    print(msg, flush=True)


if __name__ == "__main__":
    sys.exit(main())
