"""bench/peer/coverage.py without a server: markers, file kinds, the search,
and the table on a synthetic result (the script itself runs servers)."""

import re

from bench.peer import coverage as cov


def test_markers_are_never_whole_in_sql():
    m = cov.marker("abcd1234", "heap")
    assert m == "PGCMARK-abcd1234-heap."
    expr = cov.split_lit(m)
    assert m not in expr and expr == "('PGCMA' || 'RK-abcd1234-heap.')"
    assert all(re.fullmatch(r"[a-z_]+", k) for k in cov.KEYS) and len(set(cov.KEYS)) == len(cov.KEYS)
    assert m not in cov._do("CREATE TABLE %I (id int)", expr)


def test_kind_of():
    names = {"base/5/16384": "cov_heap", "base/5/2619": "pg_statistic"}
    assert cov.kind_of("base/5/16384", names) == ("relation", "cov_heap")
    assert cov.kind_of("base/5/16384_fsm", names) == ("relation", "cov_heap")
    assert cov.kind_of("base/5/2619.1", names) == ("relation", "pg_statistic")
    assert cov.kind_of("base/5/99999", names) == ("relation", "relfilenode 99999")
    assert cov.kind_of("base/5/t3_16400", names)[0] == "temporary relation"
    assert cov.kind_of("base/pgsql_tmp/pgsql_tmp123.0", names)[0] == "temporary file"
    assert cov.kind_of("pg_wal/000000010000000000000001", names) == ("WAL", "000000010000000000000001")
    assert cov.kind_of("pg_notify/0000", names)[0] == "SLRU pg_notify"
    assert cov.kind_of("pg_twophase/000002E1", names)[0] == "two-phase state"
    assert cov.kind_of("pg_replslot/cov_slot/xid-750-lsn-0-1000000.spill", names)[0] == "spill file"
    assert cov.kind_of("pg_stat_tmp/pgss_query_texts.stat", names)[0] == "pg_stat_statements texts"
    assert cov.kind_of("pg_stat/pg_stat_statements.stat", names)[0] == "pg_stat_statements texts"
    assert cov.kind_of("global/pg_control", names)[0] == "other"


def test_scan_finds_markers_by_file(tmp_path):
    token = "0badf00d"
    (tmp_path / "base" / "5").mkdir(parents=True)
    (tmp_path / "base" / "5" / "16384").write_bytes(b"\0" * 100 + cov.marker(token, "heap").encode() + b"x")
    (tmp_path / "pg_wal").mkdir()
    (tmp_path / "pg_wal" / "000000010000000000000001").write_bytes(
        (cov.marker(token, "wal") + cov.marker(token, "heap")).encode()
    )
    (tmp_path / "pg_wal" / "000000010000000000000002").write_bytes(b"PGCMARK-other-heap.")
    pattern = re.compile(rb"PGCMARK-" + token.encode() + rb"-([a-z_]+)\.")
    found = cov.scan(str(tmp_path), pattern, {"base/5/16384": "cov_heap"}, "data")
    assert sorted(found) == ["heap", "wal"]
    assert sorted(i[1] for i in found["heap"]) == ["WAL", "relation"]


def test_table(tmp_path):
    found = {"heap": [("data", "relation", "cov_heap", "base/5/16384"), ("archive", "WAL", "x", "x")]}
    results = [
        {"config": "stock", "found": found, "errors": {}, "notes": []},
        {"config": "aes-256", "found": {}, "errors": {"spill": "ERROR: a | b"}, "notes": ["n"]},
    ]
    md = cov.markdown(results, "0badf00d")
    row = next(line for line in md.splitlines() if line.startswith("| table (heap"))
    assert "**found**: relation (cov_heap); WAL archive: WAL | not found |" in row
    assert "error: ERROR: a \\| b" in md
    assert "did not find the marker of: its index" in md  # the control missed the rest
    assert "`base/5/16384`" in md and "note: n" in md
