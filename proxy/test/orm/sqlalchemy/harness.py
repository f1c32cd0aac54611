"""SQLAlchemy 2 (ORM and Core) through pgcipher-proxy, unchanged.

Every operation of OPERATIONS runs on PlainPatient (the plaintext twin,
connected directly to the server) and on Patient (encrypted columns,
through the proxy) and the results are compared, as in ../django (see
../common.py for the verdicts).

Usage: harness.py psycopg|asyncpg OUT.json
  psycopg: the ORM and Core on psycopg 3 (server-side parameters);
  asyncpg: the same operations on asyncpg, through AsyncSession.run_sync.
Environment: PGC_HOST, PGC_SERVER_PORT (direct), PGC_PROXY_PORT, PGC_DB,
PGC_USER.
"""

import asyncio
import datetime
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import sqlalchemy as sa  # noqa: E402
from common import CITIES, D, declared_rows, declared_want, plain, registry, report, save, seed_rows, verdict  # noqa: E402
from encrypted import Encrypted, encrypt_columns, move_to_encrypted  # noqa: E402
from sqlalchemy import exc, func, select  # noqa: E402
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship, selectinload  # noqa: E402

MODE = sys.argv[1]
OUT = sys.argv[2]


class Base(DeclarativeBase):
    pass


class Ward(Base):
    __tablename__ = "ward"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(60))


def patient_columns():
    """The columns of both tables; which are encrypted is the server's
    business, not the application's."""
    return dict(
        id=mapped_column(sa.Integer, primary_key=True),
        city=mapped_column(sa.String(40)),  # EQ
        name=mapped_column(sa.String(80)),  # MATCH
        ssn=mapped_column(sa.String(20), unique=True),  # EQ
        born=mapped_column(sa.Date),  # ORD
        balance=mapped_column(sa.Numeric(12, 2)),  # ORD
        visits=mapped_column(sa.Integer),  # ORD
        notes=mapped_column(sa.Text, nullable=True),  # RND
        active=mapped_column(sa.Boolean, default=True),  # plaintext
        ward_id=mapped_column(sa.ForeignKey("ward.id"), nullable=True),
    )


class Patient(Base):
    __tablename__ = "patient"
    locals().update(patient_columns())
    ward = relationship(Ward)


class Visit(Base):
    """Declared from SQLAlchemy (encrypted.py): made by create_all through
    the proxy; email plaintext until moved."""

    __tablename__ = "visit"
    id: Mapped[int] = mapped_column(primary_key=True)
    reason = mapped_column(Encrypted(sa.String(80), "MATCH"))
    cost = mapped_column(Encrypted(sa.Numeric(9, 2), "ORD"))
    day = mapped_column(Encrypted(sa.Date(), "ORD"))
    email = mapped_column(sa.String(80))


class PlainPatient(Base):
    __tablename__ = "patient_plain"
    locals().update(patient_columns())
    ward = relationship(Ward)


FIELDS = ["id", "city", "name", "ssn", "born", "balance", "visits", "notes", "active", "ward_id"]


def norm(v):
    """A result as comparable plain data."""
    if isinstance(v, (Patient, PlainPatient)):
        return tuple(plain(getattr(v, f)) for f in FIELDS)
    if isinstance(v, sa.Row):
        return tuple(norm(x) for x in v)
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    return plain(v)


def unordered(rows):
    return sorted(norm(rows), key=repr)


OPERATIONS, op = registry()


# --- ORM reads -----------------------------------------------------------
@op("select all")
def _(M, s):
    return unordered(s.scalars(select(M)).all())


@op("session.get by pk")
def _(M, s):
    return norm(s.get(M, 3))


@op("where == (EQ)")
def _(M, s):
    return norm(s.scalars(select(M).where(M.ssn == "PGCM-E-105-35")).one())


@op("where != (EQ)")
def _(M, s):
    return unordered(s.scalars(select(M).where(M.city != "PGCM-E-Oslo")).all())


@op("in_ (EQ)")
def _(M, s):
    return unordered(s.scalars(select(M).where(M.city.in_(["PGCM-E-Rome", "PGCM-E-Lima"]))).all())


@op("in_ expanding empty (EQ)")
def _(M, s):
    return unordered(s.scalars(select(M).where(M.city.in_([]))).all())


@op("contains (MATCH)")
def _(M, s):
    return unordered(s.scalars(select(M).where(M.name.contains("PGCM-E-name-1"))).all())


@op("startswith (MATCH)")
def _(M, s):
    return unordered(s.scalars(select(M).where(M.name.startswith("PGCM-E-name-2"))).all())


@op("endswith autoescape (MATCH)")
def _(M, s):
    return unordered(s.scalars(select(M).where(M.name.endswith("Smith", autoescape=True))).all())


@op("like (MATCH)")
def _(M, s):
    return unordered(s.scalars(select(M).where(M.name.like("%Jones"))).all())


@op("ilike (MATCH)")
def _(M, s):
    return unordered(s.scalars(select(M).where(M.name.ilike("%smith"))).all())


@op("> date (ORD)")
def _(M, s):
    return unordered(s.scalars(select(M).where(M.born > datetime.date(1980, 1, 1))).all())


@op("between int (ORD)")
def _(M, s):
    return unordered(s.scalars(select(M).where(M.visits.between(3, 9))).all())


@op("is_(None) (RND)")
def _(M, s):
    return unordered(s.scalars(select(M).where(M.notes.is_(None))).all())


@op("or_ and_")
def _(M, s):
    return unordered(
        s.scalars(select(M).where(sa.or_(M.city == "PGCM-E-Lima", sa.and_(M.visits >= 15, M.active)))).all()
    )


@op("== on RND")
def _(M, s):
    return unordered(s.scalars(select(M).where(M.notes == "PGCM-E-note-1")).all())


@op("order_by date, limit")
def _(M, s):
    return norm(s.scalars(select(M).order_by(M.born).limit(5)).all())


@op("order_by desc decimal, offset")
def _(M, s):
    return norm(s.scalars(select(M).order_by(M.balance.desc(), M.id).offset(3).limit(4)).all())


@op("order_by EQ")
def _(M, s):
    return norm(s.scalars(select(M).order_by(M.city, M.id)).all())


@op("contains with limit")
def _(M, s):
    return norm(s.scalars(select(M).where(M.name.contains("Jones")).order_by(M.id).limit(2)).all())


@op("count, exists")
def _(M, s):
    n = s.scalar(select(func.count()).select_from(M).where(M.visits > 3))
    e = s.scalar(select(sa.exists().where(M.city == "PGCM-E-Rome")))
    return [n, e]


@op("distinct (EQ)")
def _(M, s):
    return unordered(s.scalars(select(M.city).distinct()).all())


@op("aggregates")
def _(M, s):
    return norm(
        s.execute(
            select(
                func.count(M.id),
                func.sum(M.balance),
                func.avg(M.visits),
                func.min(M.balance),
                func.max(M.born),
            )
        ).one()
    )


@op("count distinct (EQ)")
def _(M, s):
    return s.scalar(select(func.count(M.city.distinct())))


@op("aggregate filter")
def _(M, s):
    return norm(
        s.execute(
            select(func.sum(M.balance).filter(M.city == "PGCM-E-Oslo"), func.count(M.id).filter(M.visits > 5))
        ).one()
    )


@op("group_by EQ, sum")
def _(M, s):
    return unordered(s.execute(select(M.city, func.sum(M.balance), func.count()).group_by(M.city)).all())


@op("expression with parameters")
def _(M, s):
    return norm(s.execute(select(M.id, M.balance * 2 + 1).order_by(M.id)).all())


@op("join ward")
def _(M, s):
    return unordered(s.execute(select(M.ssn, Ward.name).join(Ward).where(Ward.name == "PGCM-P-ward-1")).all())


@op("selectinload ward")
def _(M, s):
    return [(norm(p), p.ward.name) for p in s.scalars(select(M).options(selectinload(M.ward)).order_by(M.id))]


@op("subquery in (EQ)")
def _(M, s):
    sub = select(M.id).where(M.city == "PGCM-E-Rome").scalar_subquery()
    return unordered(s.scalars(select(M.ssn).where(M.id.in_(sub))).all())


# --- Core -----------------------------------------------------------------
@op("Core select where")
def _(M, s):
    t = M.__table__
    return unordered(s.execute(t.select().where(t.c.city == "PGCM-E-Oslo", t.c.visits < 10)).all())


@op("Core insert many", write=True)
def _(M, s):
    t = M.__table__
    rows = [
        dict(
            id=300 + i,
            city=CITIES[i % 3],
            name=f"PGCM-E-core-{i} Jones",
            ssn=f"PGCM-E-600-{i:02d}",
            born=datetime.date(1991, 1, i + 1),
            balance=D(f"{i}.25"),
            visits=i,
            notes=None,
            active=True,
            ward_id=1,
        )
        for i in range(4)
    ]
    return s.execute(t.insert(), rows).rowcount


@op("Core insert returning", write=True)
def _(M, s):
    t = M.__table__
    r = s.execute(
        t.insert()
        .values(
            id=310,
            city="PGCM-E-Rome",
            name="PGCM-E-ret",
            ssn="PGCM-E-610-00",
            born=datetime.date(1980, 5, 5),
            balance=D("3.5"),
            visits=2,
            active=False,
        )
        .returning(t.c.id, t.c.city, t.c.balance)
    )
    return norm(r.all())


@op("Core update where", write=True)
def _(M, s):
    t = M.__table__
    return s.execute(t.update().where(t.c.city == "PGCM-E-Lima").values(notes="PGCM-E-core-upd")).rowcount


# --- ORM writes --------------------------------------------------------------
@op("add and flush", write=True)
def _(M, s):
    p = M(
        id=200,
        city="PGCM-E-Oslo",
        name="PGCM-E-name-new Jones",
        ssn="PGCM-E-900-01",
        born=datetime.date(2001, 2, 3),
        balance=D("12.34"),
        visits=1,
        notes="PGCM-E-note-new",
        active=True,
        ward_id=1,
    )
    s.add(p)
    s.flush()
    return p.id


@op("change attributes", write=True)
def _(M, s):
    p = s.scalars(select(M).where(M.ssn == "PGCM-E-900-01")).one()
    p.name, p.balance, p.notes = "PGCM-E-name-saved Smith", D("99.99"), None
    s.flush()
    return norm(p)


@op("add_all", write=True)
def _(M, s):
    objs = [
        M(
            id=210 + i,
            city=CITIES[i % 3],
            name=f"PGCM-E-bulk-{i} Jones",
            ssn=f"PGCM-E-800-{i:02d}",
            born=datetime.date(1990, 1, i + 1),
            balance=D(f"{i}.50"),
            visits=i,
            notes=f"PGCM-E-bulk-note-{i}",
            active=True,
            ward_id=2,
        )
        for i in range(5)
    ]
    s.add_all(objs)
    s.flush()
    return len(objs)


@op("bulk update by primary key", write=True)
def _(M, s):
    s.execute(sa.update(M), [{"id": 210 + i, "city": "PGCM-E-Lima", "visits": 40 + i} for i in range(3)])
    return True


@op("update where, synchronize", write=True)
def _(M, s):
    return s.execute(sa.update(M).where(M.city == "PGCM-E-Rome").values(visits=M.visits + 1)).rowcount


@op("with_for_update", write=True)
def _(M, s):
    p = s.scalars(select(M).where(M.ssn == "PGCM-E-105-35").with_for_update()).one()
    p.visits += 10
    s.flush()
    return p.visits


@op("savepoint rollback", write=True)
def _(M, s):
    s.execute(sa.update(M).where(M.id == 1).values(city="PGCM-E-Rome"))
    sp = s.begin_nested()
    s.execute(sa.update(M).where(M.id == 2).values(city="PGCM-E-Lima"))
    sp.rollback()
    return [s.get(M, 1).city, s.get(M, 2).city]


@op("unique violation", write=True)
def _(M, s):
    sp = s.begin_nested()
    try:
        s.execute(
            sa.insert(M).values(
                id=400,
                city="x",
                name="PGCM-E-dup",
                ssn="PGCM-E-101-07",
                born=datetime.date(2000, 1, 1),
                balance=1,
                visits=1,
            )
        )
        sp.commit()
    except exc.IntegrityError:
        sp.rollback()
        return "IntegrityError"
    return "no error"


@op("delete where", write=True)
def _(M, s):
    return s.execute(sa.delete(M).where(M.city == "PGCM-E-Lima", M.visits < 3)).rowcount


def state(M, s):
    return norm(s.scalars(select(M).order_by(M.id)).all())


def url(port, driver):
    host, db, user = os.environ.get("PGC_HOST", "127.0.0.1"), os.environ["PGC_DB"], os.environ["PGC_USER"]
    return f"postgresql+{driver}://{user}@{host}:{port}/{db}"


def error_kind(e):
    orig = getattr(e, "orig", None)
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if code is None and orig is not None:  # asyncpg, under SQLAlchemy's adapter
        code = getattr(getattr(orig, "__cause__", None), "sqlstate", None)
    return code, str(orig or e).strip().splitlines()[0]


def seed(s, M):
    s.execute(sa.insert(M), seed_rows())


def run_ops(plain_s, enc_s):
    """Runs every operation; each in its own transaction on each side."""
    with enc_s.begin():
        # the wards through the proxy: the plaintext control marker
        for table in ("patient", "patient_plain", "ward"):
            enc_s.execute(sa.text(f"DELETE FROM {table}"))
        enc_s.execute(
            sa.text("INSERT INTO ward (id, name) VALUES (1, 'PGCM-P-ward-1'), (2, 'PGCM-P-ward-2')")
        )
        seed(enc_s, Patient)
    with plain_s.begin():
        seed(plain_s, PlainPatient)
    results = []
    for name, f, write in OPERATIONS:
        outcome = {}
        for M, s, key in ((PlainPatient, plain_s, "plain"), (Patient, enc_s, "enc")):
            try:
                with s.begin():
                    outcome[key] = ("ok", f(M, s))
            except exc.DBAPIError as e:
                outcome[key] = ("error", error_kind(e))
            s.expunge_all()
        res = verdict(outcome["plain"], outcome["enc"])
        if write:
            with plain_s.begin():
                a = state(PlainPatient, plain_s)
            with enc_s.begin():
                b = state(Patient, enc_s)
            if a != b:
                if res[0] == "equal":
                    res = ("wrong", "the tables differ after the write")
                # the next operation starts from the same rows again
                with enc_s.begin():
                    enc_s.execute(sa.text("DELETE FROM patient"))
                    rows = [
                        dict(zip(FIELDS, r, strict=True))
                        for r in plain_s.execute(sa.text("SELECT * FROM patient_plain"))
                    ]
                    enc_s.execute(sa.insert(Patient), rows)
            plain_s.expunge_all()
            enc_s.expunge_all()
        report(results, name, res[0], res[1], write)
    return results


def declaring(results, s):
    """Encrypted columns declared from SQLAlchemy (encrypted.py): the table
    made by create_all through the proxy and bound by encrypt_columns; then
    a live plaintext column moved to encrypted by move_to_encrypted.  Each
    step is checked against what the application wrote (no twin: the point
    is the schema)."""
    rows = declared_rows()

    def ddl(f):
        # the proxy binds columns outside a transaction only: a
        # connection of the session's engine in AUTOCOMMIT
        with s.get_bind().connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            f(conn)

    def types(conn, col=None):
        q = "SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = 'visit'::regclass AND attnum > 0"
        q += f" AND attname = '{col}'" if col else " ORDER BY attnum"
        return [r[0] for r in conn.execute(sa.text(q))]

    def step(name, f):
        try:
            got, want = f()
            res = ("equal", "") if got == want else ("wrong", f"got {got!r:.200} want {want!r:.200}")
        except exc.DBAPIError as e:
            code, msg = error_kind(e)
            res = ("refused" if (code or "").startswith("PC") else "wrong", f"{code}: {msg}")
        s.expunge_all()
        report(results, name, res[0], res[1], True)

    def create():
        def run(conn):
            conn.execute(sa.text("DROP TABLE IF EXISTS visit"))
            Visit.__table__.create(conn)
            encrypt_columns(conn, Visit.__table__)

        ddl(run)
        with s.begin():
            got = types(s.connection())
        return got, ["integer", "enc_text", "enc_numeric_ord", "enc_date_ord", "character varying"]

    def use():
        with s.begin():
            s.execute(sa.insert(Visit), rows)
        with s.begin():
            got = [
                sorted(s.scalars(select(Visit.reason).where(Visit.reason.contains("flu")))),
                [
                    str(c)
                    for c in s.scalars(
                        select(Visit.cost).where(Visit.day > datetime.date(2024, 6, 1)).order_by(Visit.cost)
                    )
                ],
                [d.isoformat() for d in s.scalars(select(Visit.day).order_by(Visit.day).limit(3))],
            ]
        return got, declared_want(rows)

    def move():
        def emails(when):
            # a statement of its own after the swap: asyncpg's statement
            # cache holds the old column's type (0A000, "cached statement
            # plan is invalid", as without the proxy)
            with s.begin():
                return [
                    tuple(r)
                    for r in s.execute(sa.text(f"SELECT id, email FROM visit /* {when} */ ORDER BY id"))
                ]

        before = emails("before")
        ddl(lambda conn: move_to_encrypted(conn, "visit", "email", "k1", "EQ"))
        after = emails("after")
        with s.begin():
            typ = types(s.connection(), "email")
        return [after, typ], [before, ["enc_text"]]

    def after_move():
        with s.begin():
            s.add(
                Visit(
                    id=100,
                    reason="PGCM-E-reason-new",
                    cost=D("1"),
                    day=datetime.date(2025, 1, 1),
                    email="PGCM-E-mail-new",
                )
            )
        with s.begin():
            return s.scalars(
                select(Visit.reason).where(Visit.email == "PGCM-E-mail-new")
            ).one(), "PGCM-E-reason-new"

    step("declare: create_all with Encrypted columns, encrypt_columns", create)
    step("declare: inserts and lookups on the declared columns", use)
    step("declare: move_to_encrypted moves a live column", move)
    step("declare: writes and lookups on the moved column", after_move)
    return results


def main_psycopg():
    plain_e = sa.create_engine(url(os.environ["PGC_SERVER_PORT"], "psycopg"))
    enc_e = sa.create_engine(url(os.environ["PGC_PROXY_PORT"], "psycopg"))
    with Session(plain_e, autobegin=False) as ps, Session(enc_e, autobegin=False) as es:
        return declaring(run_ops(ps, es), es)


async def main_asyncpg():
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    plain_e = create_async_engine(url(os.environ["PGC_SERVER_PORT"], "asyncpg"))
    enc_e = create_async_engine(url(os.environ["PGC_PROXY_PORT"], "asyncpg"))
    async with AsyncSession(plain_e, autobegin=False) as ps, AsyncSession(enc_e, autobegin=False) as es:
        # the same synchronous operations, on asyncpg: both sessions' I/O
        # runs in the greenlet that run_sync starts
        return await es.run_sync(lambda enc_sync: declaring(run_ops(ps.sync_session, enc_sync), enc_sync))


if __name__ == "__main__":
    results = main_psycopg() if MODE == "psycopg" else asyncio.run(main_asyncpg())
    save(OUT, MODE, sa.__version__, results)
