"""psycopg 3 through pgcipher-proxy (run by test.sh, from ../run.sh).

The same operations on enc_t and on plain_t, through the proxy, with the
ordinary psycopg API: server-side binding with parameters in the automatic,
text (%t) and binary (%b) formats, text and binary results
(cursor(binary=True)), executemany, pipeline mode, COPY FROM and TO
(cursor.copy), prepare=True and automatic preparation, a server-side
(named) cursor, transactions and rollbacks.  Every result is recorded as
the repr() of the Python values psycopg made of it (so types count too),
with the marker prefix PGCMARK-E / PGCMARK-P replaced, and the two tables'
records must be equal.  Then, on enc_t only, statements the proxy must
refuse (SQLSTATE PC001), after which the connection must stay usable.
Exits non-zero on any difference.
"""
import datetime as dt
import os
import sys
from decimal import Decimal

import psycopg

ENV = os.environ
DIRECT = ENV.get("PGC_DIRECT") == "1"
COLS = "id, i4, i4o, i8, i8o, f8, num, t, tm, tr, b, d, ts, bo"
UTC = dt.timezone.utc
problems = []


def connect(**kw):
    return psycopg.connect(host=ENV["PGC_HOST"], port=ENV["PGC_PORT"], user=ENV["PGC_USER"],
                           dbname=ENV["PGC_DB"], options="-c TimeZone=UTC", connect_timeout=10, **kw)


def make_row(i, mk):
    def n(every, v):
        return None if i % every == 0 else v
    return (i, n(10, i % 7), n(17, i * 3 - 50), n(11, (i % 5) * 3000000000 - 6000000000),
            n(13, 1000000000 - i * 123456789), n(12, i * 1.1 - 7),
            n(9, Decimal(f"{i % 9 - 4}.{(i * 7) % 100:02d}")), n(9, f"{mk}-psycopg-t{i % 6}"),
            n(14, f"{mk}-psycopg-m{i} word{i % 4} lorem"), n(4, f"{mk}-psycopg-r{i}"),
            n(8, bytes([i % 16, 255 - i % 5])), n(15, dt.date(2024, 1 + i % 12, 1 + (i * 7) % 28)),
            n(16, dt.datetime(2024, 1 + (i * 5) % 12, 1 + i % 28, i % 24, i % 60, (i * 7) % 60,
                              i * 1000 % 999999, tzinfo=dt.timezone(dt.timedelta(hours=i % 3)))),
            n(7, i % 3 == 0))


def special_rows(mk):
    big = dt.datetime(2038, 1, 19, 3, 14, 8, tzinfo=UTC)
    return [
        (61, -2147483648, 2147483647, -9223372036854775808, 9223372036854775807, float("inf"),
         Decimal("-0.000001"), f"{mk}-psycopg-ü€😀", f"{mk}-psycopg-quote's \"dq\" \\back", "x",
         bytes(range(256)), dt.date(1999, 12, 31), dt.datetime(1970, 1, 1, tzinfo=UTC), True),
        (62, 0, 0, 0, 0, float("-inf"), Decimal("12.50"), f"{mk}-psycopg-t1",
         f"{mk}-psycopg-multi\nline\ttab", None, b"\x00", dt.date(2000, 2, 29), big, False),
        (63, None, None, None, None, 1e-300, Decimal("1E+20"), "", "", "", b"", None, None, None),
    ]


class Side:
    """What one table gave: (label, repr) pairs, markers replaced."""

    def __init__(self, tab, mk):
        self.tab, self.mk, self.items = tab, mk, []

    def add(self, label, value):
        self.items.append((label.replace(self.mk, "MK"), repr(value).replace(self.mk, "MK")))


def run(conn, side):
    tab, mk = side.tab, side.mk
    cur = conn.cursor()
    bcur = conn.cursor(binary=True)

    def op(label, fn):
        # an error is a result too (it differs from plain_t's, which has none)
        try:
            side.add(label, fn())
        except Exception as e:  # noqa: BLE001 -- recorded, compared with plain_t's
            if conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
                conn.rollback()
            first = (str(e).splitlines() or [""])[0]
            side.add(label, f"ERROR {getattr(e, 'sqlstate', type(e).__name__)}: {first}")

    ph = ", ".join(["%s"] * 14)
    rows = [make_row(i, mk) for i in range(1, 61)]
    op("executemany %s", lambda: (cur.executemany(f"INSERT INTO {tab} ({COLS}) VALUES ({ph})", rows[0:20]),
                                 cur.rowcount)[1])
    op("executemany %t", lambda: (cur.executemany(
        f"INSERT INTO {tab} ({COLS}) VALUES ({', '.join(['%t'] * 14)})", rows[20:30]), cur.rowcount)[1])
    op("executemany %b", lambda: (cur.executemany(
        f"INSERT INTO {tab} ({COLS}) VALUES ({', '.join(['%b'] * 14)})", rows[30:40]), cur.rowcount)[1])

    def copy_in():
        with cur.copy(f"COPY {tab} ({COLS}) FROM STDIN") as cp:
            for r in rows[40:60]:
                cp.write_row(r)
        return cur.execute(f"SELECT count(*) FROM {tab}").fetchone()
    op("COPY FROM STDIN (write_row)", copy_in)
    for r in special_rows(mk):
        op(f"INSERT special row {r[0]}", lambda r=r: (cur.execute(
            f"INSERT INTO {tab} ({COLS}) VALUES ({ph}) RETURNING {COLS}", r), cur.fetchall())[1])

    op("SELECT * text", lambda: cur.execute(f"SELECT {COLS} FROM {tab} ORDER BY id").fetchall())
    op("SELECT * binary", lambda: bcur.execute(f"SELECT {COLS} FROM {tab} ORDER BY id").fetchall())
    op("description", lambda: [(c.name, c.type_code) for c in cur.execute(f"SELECT {COLS} FROM {tab} LIMIT 1").description])

    queries = [
        ("i4 = %s", (3,)),
        ("i4 <> %s", (3,)),
        ("i4 IN (%s, %s, %s)", (1, 2, 5)),
        ("t = ANY(%s)", ([f"{mk}-psycopg-t1", f"{mk}-psycopg-t3"],)),
        ("i8 = %s", (3000000000,)),
        ("i8 = %s OR i8o = %s", (-9223372036854775808, 9223372036854775807)),
        ("num = %s", (Decimal("-3.07"),)),
        ("num = %s", (Decimal("12.50"),)),
        ("b = %s", (bytes([3, 252]),)),
        ("b = %s", (bytes(range(256)),)),
        ("bo = %s", (True,)),
        ("bo = %s AND i4 = %s", (False, 4)),
        ("tm = %s", (f"{mk}-psycopg-quote's \"dq\" \\back",)),
        ("tm = %s", (f"{mk}-psycopg-multi\nline\ttab",)),
        ("t = %(t)s AND i4o > %(lo)s", {"t": f"{mk}-psycopg-t2", "lo": 0}),
        ("i4o = %s", (13,)),
        ("d = %s", (dt.date(2024, 3, 15),)),
        ("ts = %s", (dt.datetime(1970, 1, 1, tzinfo=UTC),)),
        ("f8 = %s", (float("inf"),)),
        ("i4 IS NULL", ()),
        ("tr IS NULL OR b IS NULL", ()),
        ("tm LIKE %s", ("%psycopg-m1%",)),
        ("tm LIKE %s", (f"{mk}-psycopg-m2_ %",)),
        ("i4o BETWEEN %s AND %s ORDER BY i4o", (-10, 20)),
        ("i4o < %s ORDER BY i4o DESC", (0,)),
        ("i8o < %s ORDER BY i8o DESC", (-2000000000,)),
        ("i8o >= %s ORDER BY i8o", (0,)),
        ("f8 > %s ORDER BY f8", (2.5,)),
        ("f8 < %s ORDER BY f8 DESC", (0.0,)),
        ("d >= %s AND d < %s ORDER BY d, id", (dt.date(2024, 3, 1), dt.date(2024, 7, 1))),
        ("ts > %s ORDER BY ts", (dt.datetime(2024, 6, 1, tzinfo=UTC),)),
        ("ts > %s ORDER BY ts", (dt.datetime(2024, 6, 1, 3, 0, tzinfo=dt.timezone(dt.timedelta(hours=3))),)),
        ("ts <= %s ORDER BY ts DESC", (dt.datetime(2024, 4, 1),)),  # naive: a timestamp parameter
        ("id > %s ORDER BY i4o NULLS FIRST, id LIMIT %s", (30, 10)),
    ]
    for where, params in queries:
        q = f"SELECT {COLS} FROM {tab} WHERE {where}"
        if "ORDER BY" not in where:
            q += " ORDER BY id"
        op(f"text {where} {params!r}", lambda q=q, p=params: cur.execute(q, p).fetchall())
        op(f"binary {where} {params!r}", lambda q=q, p=params: bcur.execute(q, p).fetchall())
    op("param formats %t %b", lambda: cur.execute(
        f"SELECT id FROM {tab} WHERE i4o > %t AND ts < %b AND t <> %t ORDER BY id",
        (-20, dt.datetime(2024, 9, 1, tzinfo=UTC), f"{mk}-psycopg-t0")).fetchall())
    op("GROUP BY", lambda: cur.execute(
        f"SELECT i4, count(*), min(id) FROM {tab} GROUP BY i4 ORDER BY min(id)").fetchall())
    op("GROUP BY binary", lambda: bcur.execute(
        f"SELECT t, bo, count(*), min(id) FROM {tab} GROUP BY t, bo ORDER BY min(id)").fetchall())
    op("DISTINCT", lambda: sorted(cur.execute(f"SELECT DISTINCT t FROM {tab}").fetchall(), key=repr))
    op("MIN/MAX", lambda: cur.execute(
        f"SELECT min(i4o), max(i4o), min(i8o), max(i8o), min(f8), max(f8), min(d), max(d), min(ts), max(ts) "
        f"FROM {tab} WHERE id <= 60").fetchall())
    op("MIN/MAX binary", lambda: bcur.execute(
        f"SELECT min(i4o), max(i8o), min(d), max(ts) FROM {tab} WHERE i4 = %s", (2,)).fetchall())
    op("count", lambda: cur.execute(f"SELECT count(*), count(i4), count(tr) FROM {tab}").fetchall())
    op("self-join", lambda: cur.execute(
        f"SELECT a.id, b.id FROM {tab} a JOIN {tab} b ON a.i8 = b.i8 WHERE a.id < b.id AND a.id < %s "
        f"ORDER BY 1, 2", (12,)).fetchall())

    # prepared statements: explicit, and psycopg's automatic preparation
    # after prepare_threshold executions
    op("prepare=True", lambda: [cur.execute(f"SELECT id, t, ts FROM {tab} WHERE i4 = %s ORDER BY id",
                                            (k,), prepare=True).fetchall() for k in range(4)])
    op("prepare=True binary", lambda: [bcur.execute(f"SELECT id, num, b FROM {tab} WHERE i4o > %s ORDER BY i4o LIMIT 3",
                                                    (k * 10,), prepare=True).fetchall() for k in range(4)])
    op("auto-prepared (8 executions)", lambda: [cur.execute(
        f"SELECT id, d FROM {tab} WHERE d > %s ORDER BY d, id LIMIT 2", (dt.date(2024, 1 + k, 1),)).fetchall()
        for k in range(8)])
    op("prepared UPDATE", lambda: [cur.execute(f"UPDATE {tab} SET tr = %s WHERE i4 = %s",
                                               (f"{mk}-psycopg-prep{k}", k), prepare=True).rowcount
                                   for k in range(3)])

    def pipeline():
        out = []
        with conn.pipeline() as p:
            c1 = conn.execute(f"INSERT INTO {tab} ({COLS}) VALUES ({ph})", make_row(70, mk))
            c2 = conn.execute(f"UPDATE {tab} SET t = %s, i4o = %s WHERE id = %s", (f"{mk}-psycopg-pipe", 555, 70))
            c3 = conn.execute(f"SELECT id, t, i4o, ts FROM {tab} WHERE t = %s", (f"{mk}-psycopg-pipe",))
            c4 = conn.cursor(binary=True).execute(f"SELECT id, i4o FROM {tab} WHERE i4o > %s ORDER BY i4o", (500,))
            c5 = conn.execute(f"DELETE FROM {tab} WHERE t = %s AND i4o > %s RETURNING id", (f"{mk}-psycopg-t5", 100))
            p.sync()
            out += [c1.rowcount, c2.rowcount, c3.fetchall(), c4.fetchall(), sorted(c5.fetchall())]
        return out
    op("pipeline", pipeline)
    op("executemany in a pipeline", lambda: (cur.executemany(
        f"UPDATE {tab} SET tm = %s WHERE i4o = %s", [(f"{mk}-psycopg-em{k}", k * 3 - 50) for k in range(1, 11)]),
        cur.rowcount)[1])
    def executemany_returning():
        c = conn.cursor()
        c.executemany(f"INSERT INTO {tab} (id, t, d) VALUES (%s, %s, %s) RETURNING id, t, d",
                      [(k, f"{mk}-psycopg-ret{k}", dt.date(2025, 1, k - 70)) for k in range(80, 84)], returning=True)
        out = []
        while True:
            out.append(c.fetchall())
            if not c.nextset():
                return out
    op("executemany returning", executemany_returning)

    op("UPDATE RETURNING", lambda: sorted(cur.execute(
        f"UPDATE {tab} SET i4 = %s, tm = %s WHERE i4o < %s RETURNING id, i4, tm",
        (99, f"{mk}-psycopg-upd", -30)).fetchall()))
    op("DELETE", lambda: cur.execute(f"DELETE FROM {tab} WHERE d < %s", (dt.date(2024, 2, 1),)).rowcount)

    def rolled_back():
        with conn.transaction():
            conn.execute(f"INSERT INTO {tab} (id, t) VALUES (%s, %s)", (90, f"{mk}-psycopg-rb"))
            conn.execute(f"UPDATE {tab} SET t = %s WHERE id = %s", (f"{mk}-psycopg-rb", 1))
            raise psycopg.Rollback()
        return cur.execute(f"SELECT id, t FROM {tab} WHERE id IN (1, 90) ORDER BY id").fetchall()
    op("transaction rolled back", rolled_back)

    def named_cursor():
        with conn.transaction():
            with conn.cursor(name="pgc_named") as nc:
                nc.execute(f"SELECT id, t, ts FROM {tab} WHERE i4o > %s ORDER BY i4o", (0,))
                return [nc.fetchmany(3), nc.fetchone(), nc.fetchall()]
    op("server-side cursor", named_cursor)

    def copy_out():
        with cur.copy(f"COPY {tab} ({COLS}) TO STDOUT") as cp:
            data = b"".join(bytes(b) for b in cp)
        return sorted(data.decode().splitlines())
    op("COPY TO STDOUT", copy_out)

    def copy_rows():
        with cur.copy(f"COPY {tab} (id, t, d, ts) TO STDOUT") as cp:
            return sorted(cp.rows())
    op("COPY TO STDOUT rows()", copy_rows)

    def copy_csv():
        with cur.copy(f"COPY {tab} (id, tm, f8, b, bo) TO STDOUT WITH (FORMAT csv, HEADER)") as cp:
            return sorted(b"".join(bytes(b) for b in cp).decode().splitlines())
    op("COPY TO STDOUT csv", copy_csv)
    op("final SELECT *", lambda: bcur.execute(f"SELECT {COLS} FROM {tab} ORDER BY id").fetchall())


def refusals():
    """enc_t only: what the proxy must refuse, and the connection after."""
    checked = 0

    def expect_refused(conn, what, fn):
        nonlocal checked
        try:
            fn()
        except psycopg.Error as e:
            if e.sqlstate != "PC001":
                problems.append(f"refusal {what}: SQLSTATE {e.sqlstate}, want PC001: {e}")
            checked += 1
            return
        problems.append(f"refusal {what}: not refused")

    with connect() as conn:     # a transaction: the refusal aborts it
        conn.execute("INSERT INTO enc_t (id, t) VALUES (%s, %s)", (95, "PGCMARK-E-psycopg-refused"))
        expect_refused(conn, "SELECT md5(t)", lambda: conn.execute("SELECT md5(t) FROM enc_t"))
        try:
            conn.execute("SELECT 1")
            problems.append("after a refusal the transaction is not aborted")
        except psycopg.errors.InFailedSqlTransaction:
            pass
        conn.rollback()
        n = conn.execute("SELECT count(*) FROM enc_t WHERE id = %s", (95,)).fetchone()[0]
        if n != 0:
            problems.append("the refused transaction's INSERT was not rolled back")
        expect_refused(conn, "RND equality with a parameter",
                       lambda: conn.execute("SELECT id FROM enc_t WHERE tr = %s", ("PGCMARK-E-psycopg-x",)))
        conn.rollback()
        expect_refused(conn, "range on EQ (prepare=True)",
                       lambda: conn.execute("SELECT id FROM enc_t WHERE i4 < %s", (3,), prepare=True))
        conn.rollback()
        conn.execute("SELECT count(*) FROM enc_t WHERE i4 = %s", (3,)).fetchone()
    with connect(autocommit=True) as conn:
        expect_refused(conn, "sum() in autocommit", lambda: conn.execute("SELECT sum(t) FROM enc_t"))
        conn.execute("SELECT count(*) FROM enc_t WHERE t = %s", ("PGCMARK-E-psycopg-t1",)).fetchone()

        def in_pipeline():
            with conn.pipeline():
                conn.execute("SELECT count(*) FROM enc_t WHERE i4 = %s", (1,))
                conn.execute("SELECT md5(t) FROM enc_t")
                conn.execute("SELECT count(*) FROM enc_t WHERE i4 = %s", (2,))
        expect_refused(conn, "in a pipeline", in_pipeline)
        if conn.execute("SELECT count(*) FROM enc_t WHERE i4 = %s", (1,)).fetchone()[0] < 1:
            problems.append("connection unusable after a refusal in a pipeline")
    return checked


def main():
    sides = [Side("enc_t", "PGCMARK-E"), Side("plain_t", "PGCMARK-P")]
    for side in sides:
        with connect(autocommit=True) as conn:
            run(conn, side)
    enc, plain = sides
    for side in sides:     # for reading after a failure (PGCIPHER_CLIENTS_KEEP=1)
        with open(os.path.join(ENV["PGC_SCRATCH"], f"results-{side.tab}.txt"), "w") as f:
            f.writelines(f"{lbl}\n    {v}\n" for lbl, v in side.items)
    errors_plain = [(lbl, v) for lbl, v in plain.items if v.startswith("'ERROR")]
    if errors_plain:
        problems.extend(f"plain_t (a bug of the test): {lbl}: {v}" for lbl, v in errors_plain)
    if [lbl for lbl, _ in enc.items] != [lbl for lbl, _ in plain.items]:
        problems.append("the two runs recorded different steps")
    differ = 0
    for (lbl, e), (_, p) in zip(enc.items, plain.items):
        if e != p:
            differ += 1
            at = next((k for k in range(min(len(e), len(p))) if e[k] != p[k]), min(len(e), len(p)))
            lo = max(0, at - 150)
            problems.append(f"differs: {lbl} (at character {at})\n      plain_t: ...{p[lo:at + 250]}\n"
                            f"      enc_t:   ...{e[lo:at + 250]}")
    if not differ and not problems:
        print(f"check: psycopg {psycopg.__version__} (libpq {psycopg.pq.version()}): {len(enc.items)} results "
              "identical on enc_t and plain_t (executemany %s/%t/%b, COPY FROM/TO, text and binary "
              "results, prepare=True, auto-prepare, pipeline, named cursor, rollback)")
    if not DIRECT:
        n = refusals()
        if not [p for p in problems if p.startswith("refusal") or "after a refusal" in p]:
            print(f"check: {n} statements refused with PC001 (transaction, prepare=True, autocommit, "
                  "pipeline); the connection stays usable, the refused transaction rolls back")
    for p in problems:
        print("psycopg:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
