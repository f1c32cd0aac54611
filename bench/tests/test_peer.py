"""The open-source peer, open_pg_tde (bench/peer): which scenarios list it,
the one line that says why it is left out, the build script's line where the
tarball is absent; and, where it is built (BENCH_SMOKE=1), a cluster set up
as the bench sets it up: its tables tde_heap and encrypted, a marker string
in a tde_heap table nowhere in the data directory's files (and found there
in a plain heap table, so the search works), none in its WAL."""

import os
import shutil
import subprocess
import tempfile

import pytest

from bench import peer
from bench.cluster import STANDARD_CONFIGS, Cluster, Install
from bench.scenarios import SCENARIOS

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PGCIPHER_BUILD", os.path.join(TOP, "build"))
PREFIX = os.path.join(BUILD, "open_pg_tde", "install")
BUILT, WHY = peer.status(PREFIX)


def test_listed_by_the_scenarios_that_compare_servers():
    for name in peer.SCENARIOS:
        assert name in SCENARIOS
        for profile in ("quick", "full"):
            configs = SCENARIOS[name].PROFILES[profile]["configs"]
            added = peer.with_peer(name, configs)
            assert added[: len(configs)] == list(configs)
            assert len(added) == len(configs) + 1
            assert peer.with_peer(name, added) == added  # once
    assert peer.with_peer("cybertec-1mb", [("off", False)]) == [("off", False), ("open_pg_tde", True)]
    cfg = STANDARD_CONFIGS["open_pg_tde"]
    assert (cfg.install, cfg.peer, cfg.encryption, cfg.cipher) == (
        "open_pg_tde",
        "open_pg_tde",
        None,
        "aes-256",
    )
    assert STANDARD_CONFIGS["stock"].cipher is None and STANDARD_CONFIGS["aes-128"].cipher == "aes-128"
    cfg1mb = SCENARIOS["cybertec-1mb"]._config("open_pg_tde", True)
    assert (cfg1mb.name, cfg1mb.install, cfg1mb.peer) == (
        "open_pg_tde+checksums",
        "open_pg_tde",
        "open_pg_tde",
    )


def test_why_not(tmp_path):
    built, why = peer.status(str(tmp_path / "install"))
    assert not built and why == peer.not_built_line(str(tmp_path / "install"))
    assert peer.BUILD_SCRIPT in why and "tag 2.4.0" in why and "scripts/vendor.tsv" in why and "\n" not in why
    # built, but on another major than the stock server
    inst, stock = tmp_path / "install", tmp_path / "stock"
    for d, major in ((inst, "17"), (stock, "18")):
        (d / "bin").mkdir(parents=True)
        (d / "bin" / "postgres").write_text("")
        (d / ".pgcipher-major").write_text(major + "\n")
    (inst / "lib" / "postgresql").mkdir(parents=True)
    (inst / "lib" / "postgresql" / "open_pg_tde.so").write_text("")
    assert peer.status(str(inst)) == (True, None)
    built, why = peer.status(str(inst), str(stock))
    assert not built and "PostgreSQL 17" in why and "18" in why


def test_build_script_without_the_source(tmp_path):
    """A clone without ../shared whose download fails: one line, exit 0,
    nothing built."""
    r = subprocess.run(
        ["bash", os.path.join(TOP, peer.BUILD_SCRIPT), str(tmp_path / "build")],
        env={**os.environ, "PGCIPHER_VENDOR": str(tmp_path), "PGCIPHER_VENDOR_MIRROR": "http://127.0.0.1:9"},
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "build-open-pg-tde: SKIPPED: open_pg_tde is neither in" in r.stderr
    assert not (tmp_path / "build" / "open_pg_tde").exists()


SMOKE = pytest.mark.skipif(
    os.environ.get("BENCH_SMOKE") != "1" or not BUILT,
    reason=f"set BENCH_SMOKE=1, and build the peer ({WHY})" if not BUILT else "set BENCH_SMOKE=1",
)


@SMOKE
def test_cluster_encrypts_tables_and_wal():
    work = tempfile.mkdtemp(prefix="pgb")  # short: the Unix socket lives here
    c = Cluster(
        Install(peer.NAME, PREFIX), STANDARD_CONFIGS[peer.NAME], work, {"shared_buffers": "16MB"}, None
    )
    try:
        c.initdb()
        c.start()
        show = {k: c.psql(f"SHOW {k}") for k in ("open_pg_tde.wal_encrypt", "default_table_access_method")}
        assert show == {"open_pg_tde.wal_encrypt": "on", "default_table_access_method": "tde_heap"}
        assert c.psql("SHOW open_pg_tde.data_cipher") == "aes_256_xts"
        assert c.psql("SHOW encrypt_temp_files") == "on"
        # its parallel index builds fail with encrypt_temp_files on (bench/peer CONF_BOOT)
        assert c.psql("SHOW max_parallel_maintenance_workers") == "0"
        # every database the benchmark makes has the extension: TPROC-C's comes from template1
        c.psql("CREATE DATABASE made_later")
        secret, plain = "pgcipher-peer-secret-marker", "pgcipher-peer-plain-marker"
        for db in ("postgres", "made_later"):
            c.psql(
                f"CREATE TABLE s (id int PRIMARY KEY, v text); INSERT INTO s VALUES (1, '{secret}')", db=db
            )
            c.psql(f"CREATE TABLE p (v text) USING heap; INSERT INTO p VALUES ('{plain}')", db=db)
            assert "s tde_heap" in peer.check_encrypted(c, ["s", "s_pkey"], db=db)
            with pytest.raises(RuntimeError):
                peer.check_encrypted(c, ["p"], db=db)
        c.psql("CHECKPOINT")
        assert peer.files_containing(os.path.join(c.data, "base"), secret.encode()) == []
        assert peer.files_containing(
            os.path.join(c.data, "base"), plain.encode()
        )  # the search finds plaintext
        assert peer.files_containing(os.path.join(c.data, "pg_wal"), secret.encode()) == []
        assert peer.wal_marker_absent(c) == 1
    finally:
        c.destroy()
        shutil.rmtree(work, ignore_errors=True)
