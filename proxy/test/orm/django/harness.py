"""Django 5.2 (psycopg 3) through pgcipher-proxy, unchanged.

Every operation of OPERATIONS runs twice: on PlainPatient (the plaintext
twin, connected directly to the server) and on Patient (encrypted columns,
through the proxy), and the results are compared.  Each operation ends as
  equal    the same result (rows, values, counts, errors of the same kind);
  refused  the proxy refused it (SQLSTATE PC0xx) with its reason;
  wrong    anything else: a different result, or another error.
After every write the two tables are compared whole.  Values written to or
compared with encrypted text columns carry the marker PGCM-E-; run.sh
counts them in what the proxy sent to the server (it must find none) and
the control marker PGCM-P-, written through the proxy to a plaintext
column (it must find it).

Usage: harness.py client|server OUT.json
  client: Django's default client-side binding (literals in the SQL);
  server: OPTIONS server_side_binding=True (parameters).
Environment: PGC_HOST, PGC_SERVER_PORT (direct), PGC_PROXY_PORT, PGC_DB,
PGC_USER.
"""

import datetime
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import django  # noqa: E402
from django.conf import settings  # noqa: E402

MODE = sys.argv[1]
OUT = sys.argv[2]


def database(port):
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ["PGC_DB"],
        "USER": os.environ["PGC_USER"],
        "HOST": os.environ.get("PGC_HOST", "127.0.0.1"),
        "PORT": port,
        "OPTIONS": {"server_side_binding": MODE == "server", "sslmode": "disable"},
    }


settings.configure(
    DATABASES={
        "default": database(os.environ["PGC_SERVER_PORT"]),
        "enc": database(os.environ["PGC_PROXY_PORT"]),
    },
    INSTALLED_APPS=["patients"],
    USE_TZ=True,
    TIME_ZONE="UTC",
    DEFAULT_AUTO_FIELD="django.db.models.AutoField",
)
django.setup()

from common import CITIES, D, declared_rows, declared_want, plain, registry, report, save, seed_rows, verdict  # noqa: E402
from django.db import DatabaseError, IntegrityError, connections, transaction  # noqa: E402
from django.db.models import Avg, Count, F, Max, Min, Q, Sum  # noqa: E402
from django.db.models.functions import Upper  # noqa: E402
from patients.models import Patient, PlainPatient, Ward  # noqa: E402


def norm(v):
    """A result as comparable plain data."""
    if isinstance(v, (PlainPatient, Patient)):
        return tuple(norm(getattr(v, f.attname)) for f in v._meta.concrete_fields)
    if isinstance(v, Ward):
        return ("ward", v.id, v.name)
    if hasattr(v, "query") and hasattr(v, "ordered"):  # a QuerySet
        out = [norm(x) for x in v]
        return out if v.ordered else sorted(out, key=repr)
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    if isinstance(v, dict):
        return {k: norm(x) for k, x in sorted(v.items())}
    return plain(v)


def qs(M, db):
    return M.objects.using(db)


def rel(M):
    return M._meta.model_name + "_set"


OPERATIONS, op = registry()


# --- reads: every lookup ------------------------------------------------
@op("all")
def _(M, db):
    return qs(M, db).all()


@op("get by pk")
def _(M, db):
    return qs(M, db).get(pk=3)


@op("get by ssn (EQ)")
def _(M, db):
    return qs(M, db).get(ssn="PGCM-E-105-35")


@op("filter exact city (EQ)")
def _(M, db):
    return qs(M, db).filter(city="PGCM-E-Oslo")


@op("exclude city (EQ)")
def _(M, db):
    return qs(M, db).exclude(city="PGCM-E-Oslo")


@op("filter in (EQ)")
def _(M, db):
    return qs(M, db).filter(city__in=["PGCM-E-Rome", "PGCM-E-Lima"])


@op("filter iexact (EQ)")
def _(M, db):
    return qs(M, db).filter(city__iexact="pgcm-e-oslo")


@op("filter contains (MATCH)")
def _(M, db):
    return qs(M, db).filter(name__contains="PGCM-E-name-1")


@op("filter startswith (MATCH)")
def _(M, db):
    return qs(M, db).filter(name__startswith="PGCM-E-name-2")


@op("filter endswith (MATCH)")
def _(M, db):
    return qs(M, db).filter(name__endswith="Smith")


@op("filter icontains (MATCH)")
def _(M, db):
    return qs(M, db).filter(name__icontains="smith")


@op("filter iexact (MATCH)")
def _(M, db):
    return qs(M, db).filter(name__iexact="pgcm-e-name-04 smith")


@op("filter istartswith (MATCH)")
def _(M, db):
    return qs(M, db).filter(name__istartswith="pgcm-e-name-1")


@op("filter contains and exact")
def _(M, db):
    return qs(M, db).filter(name__contains="Jones", city="PGCM-E-Rome")


@op("filter gt date (ORD)")
def _(M, db):
    return qs(M, db).filter(born__gt=datetime.date(1980, 1, 1))


@op("filter range decimal (ORD)")
def _(M, db):
    return qs(M, db).filter(balance__range=(D("100"), D("300.5")))


@op("filter lte int (ORD)")
def _(M, db):
    return qs(M, db).filter(visits__lte=5)


@op("filter isnull (RND)")
def _(M, db):
    return qs(M, db).filter(notes__isnull=True)


@op("filter Q or")
def _(M, db):
    return qs(M, db).filter(Q(city="PGCM-E-Lima") | Q(visits__gte=15))


@op("filter year (ORD)")
def _(M, db):
    return qs(M, db).filter(born__year=1970)


@op("filter regex (MATCH)")
def _(M, db):
    return qs(M, db).filter(name__regex="^PGCM-E-name-0")


@op("filter exact notes (RND)")
def _(M, db):
    return qs(M, db).filter(notes="PGCM-E-note-1")


@op("filter plaintext and join")
def _(M, db):
    return qs(M, db).filter(active=True, ward__name="PGCM-P-ward-1")


# --- ordering and slicing -------------------------------------------------
@op("order_by date (ORD)")
def _(M, db):
    return qs(M, db).order_by("born")


@op("order_by -decimal, id")
def _(M, db):
    return qs(M, db).order_by("-balance", "id")


@op("order_by city (EQ)")
def _(M, db):
    return qs(M, db).order_by("city", "id")


@op("slice [:3] by visits, id")
def _(M, db):
    return qs(M, db).order_by("visits", "id")[:3]


@op("slice [:3] by -balance, id (ORD numeric)")
def _(M, db):
    return qs(M, db).order_by("-balance", "id")[:3]


@op("slice [2:5] by born")
def _(M, db):
    return qs(M, db).order_by("born")[2:5]


@op("first / last by born")
def _(M, db):
    return [qs(M, db).order_by("born").first(), qs(M, db).order_by("born").last()]


@op("contains with slice [:2]")
def _(M, db):
    return qs(M, db).filter(name__contains="Jones").order_by("id")[:2]


@op("exists / count")
def _(M, db):
    return [qs(M, db).filter(city="PGCM-E-Rome").exists(), qs(M, db).filter(visits__gt=3).count()]


@op("values_list flat")
def _(M, db):
    return qs(M, db).order_by("id").values_list("ssn", flat=True)


@op("values only/defer")
def _(M, db):
    return [list(qs(M, db).order_by("id").values("id", "city")), norm(qs(M, db).defer("notes").get(pk=2))]


@op("distinct city (EQ)")
def _(M, db):
    return qs(M, db).values_list("city", flat=True).distinct()


# --- aggregates ------------------------------------------------------------
@op("aggregate count, sum, avg, min, max")
def _(M, db):
    return qs(M, db).aggregate(
        n=Count("id"), s=Sum("balance"), a=Avg("visits"), lo=Min("balance"), hi=Max("born")
    )


@op("aggregate count distinct (EQ)")
def _(M, db):
    return qs(M, db).aggregate(n=Count("city", distinct=True))


@op("aggregate with filter=Q")
def _(M, db):
    return qs(M, db).aggregate(
        s=Sum("balance", filter=Q(city="PGCM-E-Oslo")), n=Count("id", filter=Q(visits__gt=5))
    )


@op("values(city).annotate(sum)")
def _(M, db):
    return qs(M, db).values("city").annotate(s=Sum("balance"), n=Count("id"))


@op("annotate F * 2 + 1")
def _(M, db):
    return qs(M, db).annotate(x=F("balance") * 2 + 1).order_by("id").values_list("id", "x")


@op("annotate Upper (MATCH)")
def _(M, db):
    return qs(M, db).annotate(u=Upper("name")).order_by("id").values_list("u", flat=True)


@op("related count per ward")
def _(M, db):
    return Ward.objects.using(db).annotate(n=Count(rel(M))).order_by("id").values_list("name", "n")


# --- joins and prefetching ---------------------------------------------------
@op("select_related ward")
def _(M, db):
    return [(norm(p), p.ward.name) for p in qs(M, db).select_related("ward").order_by("id")]


@op("prefetch_related from ward")
def _(M, db):
    return [
        (w.name, sorted(norm(p) for p in getattr(w, rel(M)).all()))
        for w in Ward.objects.using(db).prefetch_related(rel(M)).order_by("id")
    ]


# --- writes ---------------------------------------------------------------
@op("create", write=True)
def _(M, db):
    p = qs(M, db).create(
        city="PGCM-E-Oslo",
        name="PGCM-E-name-new Jones",
        ssn="PGCM-E-900-01",
        born=datetime.date(2001, 2, 3),
        balance=D("12.34"),
        visits=1,
        notes="PGCM-E-note-new",
        ward_id=1,
    )
    return p.id


@op("save() changes", write=True)
def _(M, db):
    p = qs(M, db).get(ssn="PGCM-E-900-01")
    p.name, p.balance, p.notes = "PGCM-E-name-saved Smith", D("99.99"), None
    p.save()
    return norm(qs(M, db).get(pk=p.pk))


@op("bulk_create", write=True)
def _(M, db):
    objs = [
        M(
            city=CITIES[i % 3],
            name=f"PGCM-E-bulk-{i} Jones",
            ssn=f"PGCM-E-800-{i:02d}",
            born=datetime.date(1990, 1, i + 1),
            balance=D(f"{i}.50"),
            visits=i,
            notes=f"PGCM-E-bulk-note-{i}",
            ward_id=2,
        )
        for i in range(5)
    ]
    return [o.id for o in qs(M, db).bulk_create(objs)]


@op("bulk_update", write=True)
def _(M, db):
    objs = list(qs(M, db).filter(ssn__in=[f"PGCM-E-800-{i:02d}" for i in range(3)]).order_by("id"))
    for i, o in enumerate(objs):
        o.city, o.visits = "PGCM-E-Lima", 40 + i
    return qs(M, db).bulk_update(objs, ["city", "visits"])


@op("queryset update()", write=True)
def _(M, db):
    return qs(M, db).filter(city="PGCM-E-Lima", visits__gt=30).update(notes="PGCM-E-updated")


@op("update F + 1", write=True)
def _(M, db):
    return qs(M, db).filter(city="PGCM-E-Rome").update(visits=F("visits") + 1)


@op("get_or_create", write=True)
def _(M, db):
    o, created = qs(M, db).get_or_create(
        ssn="PGCM-E-700-01",
        defaults=dict(
            city="PGCM-E-Rome",
            name="PGCM-E-goc",
            born=datetime.date(1999, 9, 9),
            balance=D("1"),
            visits=2,
            ward_id=1,
        ),
    )
    o2, created2 = qs(M, db).get_or_create(ssn="PGCM-E-700-01", defaults=dict(city="x"))
    return [created, created2, o.pk == o2.pk]


@op("update_or_create", write=True)
def _(M, db):
    o, created = qs(M, db).update_or_create(ssn="PGCM-E-700-01", defaults=dict(visits=9, notes="PGCM-E-uoc"))
    return [created, norm(qs(M, db).get(pk=o.pk))]


@op("select_for_update in atomic", write=True)
def _(M, db):
    with transaction.atomic(using=db):
        p = qs(M, db).select_for_update().get(ssn="PGCM-E-105-35")
        p.visits += 10
        p.save()
    return p.visits


@op("savepoint rollback", write=True)
def _(M, db):
    with transaction.atomic(using=db):
        qs(M, db).filter(pk=1).update(city="PGCM-E-Rome")
        try:
            with transaction.atomic(using=db):
                qs(M, db).filter(pk=2).update(city="PGCM-E-Lima")
                raise RuntimeError("roll back the savepoint")
        except RuntimeError:
            pass
    return [qs(M, db).get(pk=1).city, qs(M, db).get(pk=2).city]


@op("unique violation", write=True)
def _(M, db):
    try:
        with transaction.atomic(using=db):
            qs(M, db).create(
                city="x",
                name="PGCM-E-dup",
                ssn="PGCM-E-101-07",
                born=datetime.date(2000, 1, 1),
                balance=1,
                visits=1,
            )
    except IntegrityError:
        return "IntegrityError"
    return "no error"


@op("delete", write=True)
def _(M, db):
    return qs(M, db).filter(city="PGCM-E-Lima", visits__lt=3).delete()[0]


def declaring(results):
    """Encrypted fields declared from Django (patients.encrypted): the
    table made by Django's schema editor through the proxy and bound by
    EncryptColumn; then a live plaintext column moved to encrypted by
    EncryptExistingColumn.  Each step is checked against what the
    application wrote (there is no twin: the point is the schema)."""
    from django.db import connections as conns
    from patients.encrypted import EncryptColumn, EncryptExistingColumn
    from patients.models import Visit

    enc = conns["enc"]
    with enc.cursor() as c:
        c.execute("DROP TABLE IF EXISTS visit")
    rows = declared_rows()

    def step(name, f):
        try:
            got, want = f()
            res = ("equal", "") if got == want else ("wrong", f"got {got!r:.200} want {want!r:.200}")
        except DatabaseError as e:
            code, msg = error_kind(e)
            res = ("refused" if (code or "").startswith("PC") else "wrong", f"{code}: {msg}")
        report(results, name, res[0], res[1], True)

    def create():
        with enc.schema_editor(atomic=False) as se:
            se.create_model(Visit)
            for col, level in (("reason", "MATCH"), ("cost", "ORD"), ("day", "ORD")):
                EncryptColumn("visit", col, "k1", level, case_insensitive=col == "reason").database_forwards(
                    "patients", se, None, None
                )
        with enc.cursor() as c:
            c.execute(
                "SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = 'visit'::regclass AND attnum > 0 ORDER BY attnum"
            )
            types = [r[0] for r in c.fetchall()]
        return types, ["integer", "enc_text", "enc_numeric_ord", "enc_date_ord", "character varying"]

    def use():
        Visit.objects.using("enc").bulk_create(
            Visit(**{k: v for k, v in r.items() if k != "id"}) for r in rows
        )
        got = [
            sorted(
                Visit.objects.using("enc").filter(reason__icontains="FLU").values_list("reason", flat=True)
            ),
            [
                str(c)
                for c in Visit.objects.using("enc")
                .filter(day__gt=datetime.date(2024, 6, 1))
                .order_by("cost")
                .values_list("cost", flat=True)
            ],
            [
                d.isoformat()
                for d in Visit.objects.using("enc").order_by("day").values_list("day", flat=True)[:3]
            ],
        ]
        return got, declared_want(rows)

    def move():
        before = list(Visit.objects.using("enc").order_by("id").values_list("id", "email"))
        with enc.schema_editor(atomic=False) as se:
            EncryptExistingColumn("visit", "email", "k1", "EQ").database_forwards("patients", se, None, None)
        after = list(Visit.objects.using("enc").order_by("id").values_list("id", "email"))
        with enc.cursor() as c:
            c.execute(
                "SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = 'visit'::regclass AND attname = 'email'"
            )
            typ = c.fetchone()[0]
        return [after, typ], [before, "enc_text"]

    def after_move():
        Visit.objects.using("enc").create(
            reason="PGCM-E-reason-new", cost=D("1"), day=datetime.date(2025, 1, 1), email="PGCM-E-mail-new"
        )
        got = Visit.objects.using("enc").get(email="PGCM-E-mail-new").reason
        return got, "PGCM-E-reason-new"

    step("declare: create_model with encrypted fields, EncryptColumn", create)
    step("declare: bulk_create and lookups on the declared fields", use)
    step("declare: EncryptExistingColumn moves a live column", move)
    step("declare: writes and lookups on the moved column", after_move)


def state(M, db):
    return norm(qs(M, db).order_by("id"))


def error_kind(e):
    cause = e.__cause__ or e
    return getattr(cause, "sqlstate", None), str(e).strip().splitlines()[0] if str(e).strip() else type(
        e
    ).__name__


def run():
    # the plaintext control marker, written through the proxy
    with connections["enc"].cursor() as c:
        c.execute("DELETE FROM patient; DELETE FROM patient_plain; DELETE FROM ward")
        c.execute("INSERT INTO ward (id, name) VALUES (1, 'PGCM-P-ward-1'), (2, 'PGCM-P-ward-2')")
    for M, db in ((PlainPatient, "default"), (Patient, "enc")):
        for r in seed_rows():
            qs(M, db).create(**r)
        with connections[db].cursor() as c:
            c.execute(f"SELECT setval(pg_get_serial_sequence('{M._meta.db_table}', 'id'), 100)")
    results = []
    for name, f, write in OPERATIONS:
        outcome = {}
        for M, db, key in ((PlainPatient, "default", "plain"), (Patient, "enc", "enc")):
            try:
                outcome[key] = ("ok", norm(f(M, db)))
            except DatabaseError as e:
                outcome[key] = ("error", error_kind(e))
                if connections[db].in_atomic_block:
                    raise
        res = verdict(outcome["plain"], outcome["enc"])
        if write and state(PlainPatient, "default") != state(Patient, "enc"):
            if res[0] == "equal":
                res = ("wrong", "the tables differ after the write")
            # a refused or wrong write: the next operation starts from the
            # same rows again
            with connections["enc"].cursor() as c:
                c.execute("DELETE FROM patient")
            for row in qs(PlainPatient, "default").order_by("id").values():
                qs(Patient, "enc").create(**row)
        report(results, name, res[0], res[1], write)
    declaring(results)
    save(OUT, MODE, django.get_version(), results)


if __name__ == "__main__":
    run()
