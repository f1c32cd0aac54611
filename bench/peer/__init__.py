"""The open-source peer measured beside stock and pgcipher: open_pg_tde
2.4.0 (github.com/commandprompt/open_pg_tde), a fork of Percona's pg_tde
that runs on upstream PostgreSQL with its own core patch series.

build-open-pg-tde.sh (next to this file) builds it on the same pinned
PostgreSQL source, with the same compiler, configure options and OpenSSL as
the stock server, into BUILD/open_pg_tde/install.  Where it is built, the
configuration "open_pg_tde" (bench/cluster.py) joins the scenarios in
SCENARIOS; where it is not, they run without it and say why in one line
(status()).

Its clusters are set up as open_pg_tde's documentation recommends for full
coverage (Cluster.initdb calls set_up()): the library preloaded; a global
file keyring provider; one principal key created in it and made both the
default key (of every database without its own) and the server key (WAL);
the extension created in template1 (so every database created later has it:
TPROC-C's tpcc) and in postgres; then, at the next start, WAL encryption on
and tde_heap as default_table_access_method, so every table the benchmarks
create (pgbench -i, TPROC-C's load, COPY targets) is encrypted; AES-256
where it offers a choice: AES-256-XTS for data files (data_cipher), 256-bit
principal and WAL keys (cipher; WAL is AES-CTR); temporary files encrypted
(encrypt_temp_files, AES-128-XTS: it offers no other), and so, to dodge its
bug there, index builds without parallel workers (CONF_BOOT)."""

import os
import re

NAME = "open_pg_tde"
VERSION = "2.4.0"
TARBALL = f"open_pg_tde-{VERSION}.tar.gz"
URL = "https://github.com/commandprompt/open_pg_tde"
HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
BUILD_SCRIPT = "bench/peer/build-open-pg-tde.sh"

# the scenarios that list the peer where it is built
SCENARIOS = ("cybertec-pgbench", "cybertec-1mb", "tproc-c", "wal-heavy", "instructions", "tde-worst-cases")
# the cipher of its data pages and WAL, for what needs one name (the
# instructions scenario calibrates OpenSSL's AES cores per cipher)
CIPHER = "aes-256"

# postgresql.conf before the keys exist (the library must be loaded to make them)
CONF_BOOT = {
    "shared_preload_libraries": "'open_pg_tde'",
    # AES-256-XTS for the data files of new tde_heap tables
    "open_pg_tde.data_cipher": "'aes_256_xts'",
    # 256-bit principal, internal and WAL keys
    "open_pg_tde.cipher": "'aes_256'",
    # query-spill files (the patch's own setting, no prefix)
    "encrypt_temp_files": "on",
    # with encrypt_temp_files on, 2.4.0 fails a parallel CREATE INDEX (pgbench -i's primary
    # key from scale 5: "could not seek to block N of temporary file", "invalid memory alloc
    # request size", once a crash): the leader reads its workers' sorted runs through
    # BufFileAppend() into its own BufFile, with its own salt and block numbers, not the
    # writers'.  Index builds in one process avoid it; no scenario times one.
    "max_parallel_maintenance_workers": "0",
}
# ... and once the server key is set: WAL encryption, every new table tde_heap
CONF_KEYED = {
    "open_pg_tde.wal_encrypt": "on",
    "default_table_access_method": "'tde_heap'",
}
PROVIDER = "bench-keyring"
KEY = "bench-principal"
KEYRING_FILE = "open_pg_tde-keyring.per"  # in the cluster's directory, beside (not in) its data


def not_built_line(prefix):
    """The one line where the peer is not built: how to build it, and where
    its source comes from."""
    return (
        f"open_pg_tde is not built in {prefix} (build it: su pgcipher -c {BUILD_SCRIPT}; its source is "
        f"../shared/vendor's {TARBALL} or tag {VERSION}'s archive from {URL}, pinned in scripts/vendor.tsv)"
    )


def status(prefix, stock_prefix=None):
    """(True, None) where the peer is built in prefix (on the stock build's
    major, where that is built), else (False, the one line that says why)."""
    # pkglibdir: lib/postgresql, or lib where the prefix names postgres or pgsql
    built = os.path.exists(os.path.join(prefix, "bin", "postgres")) and any(
        os.path.exists(os.path.join(prefix, lib, "open_pg_tde.so")) for lib in ("lib/postgresql", "lib")
    )
    if not built:
        return False, not_built_line(prefix)
    if stock_prefix:
        majors = [_major(p) for p in (prefix, stock_prefix)]
        if None not in majors and majors[0] != majors[1]:
            return False, (
                f"open_pg_tde in {prefix} is built on PostgreSQL {majors[0]}, the stock server is "
                f"{majors[1]} (rebuild it: su pgcipher -c {BUILD_SCRIPT})"
            )
    return True, None


def _major(prefix):
    try:
        with open(os.path.join(prefix, ".pgcipher-major")) as f:
            return f.read().strip()
    except OSError:
        return None


def with_peer(scenario, configs):
    """The scenario's configurations with the peer's added (last)."""
    configs = list(configs)
    if scenario == "cybertec-1mb":  # (encryption, checksums): open_pg_tde wants checksums (setup.md)
        return configs + [(NAME, True)] if (NAME, True) not in configs else configs
    return configs + [NAME] if NAME not in configs else configs


def conf_lines(conf):
    return "".join(f"{k} = {v}\n" for k, v in conf.items())


def setup_sql(keyring):
    """{database: [statements]}, in order, on the server started with CONF_BOOT."""
    lit = "'" + keyring.replace("'", "''") + "'"
    return {
        "template1": ["CREATE EXTENSION open_pg_tde"],
        "postgres": [
            "CREATE EXTENSION open_pg_tde",
            f"SELECT open_pg_tde_add_global_key_provider_file('{PROVIDER}', {lit})",
            f"SELECT open_pg_tde_create_key_using_global_key_provider('{KEY}', '{PROVIDER}')",
            # the principal key of every database without one of its own (all of them here)
            f"SELECT open_pg_tde_set_default_key_using_global_key_provider('{KEY}', '{PROVIDER}')",
            # the server key: WAL encryption needs it
            f"SELECT open_pg_tde_set_server_key_using_global_key_provider('{KEY}', '{PROVIDER}')",
        ],
    }


def describe():
    """One paragraph for reports: what the peer is and how it runs."""
    return (
        f"**open_pg_tde** is the open-source peer: open_pg_tde {VERSION} ({URL}), a fork of Percona's "
        "pg_tde for upstream PostgreSQL, built by `bench/peer/build-open-pg-tde.sh` on the same PostgreSQL "
        "source, compiler, configure options and OpenSSL as stock, with its core patches and hooks "
        "(USE_TDE_HOOKS).  Each of its clusters: "
        + ", ".join(f"`{k} = {v}`" for k, v in {**CONF_BOOT, **CONF_KEYED}.items())
        + "; a global file keyring provider and one principal key in it, set as the default key (every "
        "database) and the server key (WAL); the extension in template1 and postgres.  So every table "
        "and index the benchmark creates is tde_heap, encrypted with AES-256-XTS, and WAL with AES-256-CTR; "
        "temporary files with AES-128-XTS (its only choice).  `max_parallel_maintenance_workers = 0` "
        "on it alone: with encrypt_temp_files on, open_pg_tde 2.4.0 fails parallel index builds (the "
        "leader decrypts its workers' sorted runs with its own per-file salt); no scenario times an "
        "index build."
    )


def encrypted_tables(cluster, relations, db="postgres"):
    """{relation: (access method, open_pg_tde_is_encrypted)} of a peer
    cluster's tables and indexes (an index's access method is its own, btree)."""
    names = ",".join("'" + t.replace("'", "''") + "'" for t in relations)
    out = cluster.psql(
        "SELECT c.relname, a.amname, open_pg_tde_is_encrypted(c.oid) FROM pg_class c "
        f"JOIN pg_am a ON a.oid = c.relam WHERE c.relname IN ({names}) ORDER BY c.relname",
        db=db,
    )
    result = {}
    for line in out.splitlines():
        rel, am, enc = line.split("|")
        result[rel] = (am, enc == "t")
    return result


def check_encrypted(cluster, relations, db="postgres"):
    """Raise unless every relation is encrypted and every table tde_heap;
    returns a short text saying so."""
    got = encrypted_tables(cluster, relations, db)
    bad = {
        t: got.get(t)
        for t in relations
        if t not in got or not got[t][1] or (got[t][0] != "tde_heap" and got[t][0] != "btree")
    }
    if bad:
        raise RuntimeError(f"{cluster.config.name}: not tde_heap and encrypted in {db}: {bad}")
    tables = sorted(t for t in got if got[t][0] == "tde_heap")
    indexes = sorted(t for t in got if got[t][0] != "tde_heap")
    return (
        f"{', '.join(tables)} tde_heap"
        + (f", {', '.join(indexes)} ({'/'.join(sorted({got[i][0] for i in indexes}))})" if indexes else "")
        + f" in {db}: open_pg_tde_is_encrypted = true"
    )


def files_containing(root, marker):
    """Paths under root (relative) whose bytes contain marker (bytes)."""
    found = []
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            try:
                with open(p, "rb") as fh:
                    if marker in fh.read():
                        found.append(os.path.relpath(p, root))
            except OSError:
                continue
    return found


def wal_marker_absent(cluster, marker="pgcipher-bench-wal-marker"):
    """1 if a marker written to WAL (a logical message, flushed) cannot be
    found in pg_wal's current segment, 0 if it can: read from the files."""
    lsn = cluster.psql(f"SELECT pg_logical_emit_message(false, 'bench', '{marker}', true)")
    cluster.psql("CHECKPOINT")
    seg = cluster.psql(f"SELECT pg_walfile_name('{lsn}')")
    if not re.fullmatch(r"[0-9A-F]{24}", seg):
        raise RuntimeError(f"unexpected WAL file name {seg!r}")
    with open(os.path.join(cluster.data, "pg_wal", seg), "rb") as f:
        return 0 if marker.encode() in f.read() else 1
