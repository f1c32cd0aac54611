"""What the ORM harnesses share: the starting rows (the same for the table
with encrypted columns and its plaintext twin), plain data to compare
results as, the verdict on one operation and the results file.

Values written to or compared with encrypted text columns carry the marker
PGCM-E-; run.sh looks for it in every byte the proxy sent."""

import datetime
import decimal
import json

D = decimal.Decimal
CITIES = ["PGCM-E-Oslo", "PGCM-E-Rome", "PGCM-E-Lima"]


def seed_rows():
    """The starting rows: cities (EQ), names (MATCH), ssn (EQ, unique),
    born (ORD date), balance (ORD numeric), visits (ORD int4), notes (RND,
    NULL every fifth), active (plaintext), ward_id (plaintext)."""
    rows = []
    for i in range(1, 25):
        rows.append(
            dict(
                id=i,
                city=CITIES[i % 3],
                name=f"PGCM-E-name-{i:02d} {'Smith' if i % 4 == 0 else 'Jones'}",
                ssn=f"PGCM-E-{100 + i}-{i * 7 % 100:02d}",
                born=datetime.date(1950 + i * 2, i % 12 + 1, i % 27 + 1),
                balance=D(f"{(i * 37) % 500}.{i % 10}5"),
                visits=(i * 5) % 17,
                notes=None if i % 5 == 0 else f"PGCM-E-note-{i}",
                active=i % 3 != 0,
                ward_id=(i % 2) + 1,
            )
        )
    return rows


def declared_rows():
    """The rows the declaring steps write into the table declared from the
    ORM: reason (MATCH), cost (ORD numeric), day (ORD date), and email,
    plaintext until it is moved (its marker PGCM-L- is no leak)."""
    return [
        dict(
            id=i,
            reason=f"PGCM-E-reason-{i} {'flu' if i % 2 else 'checkup'}",
            cost=D(f"{i * 13 % 90}.25"),
            day=datetime.date(2024, i % 12 + 1, i % 27 + 1),
            email=f"PGCM-L-{i}@example.org",
        )
        for i in range(1, 13)
    ]


def declared_want(rows):
    """What the declaring steps' lookups must find in rows: the reasons
    holding "flu" (sorted), the costs of the days after 2024-06-01 by cost,
    the first three days."""
    return [
        sorted(r["reason"] for r in rows if "flu" in r["reason"]),
        [str(c) for c in sorted(r["cost"] for r in rows if r["day"] > datetime.date(2024, 6, 1))],
        [d.isoformat() for d in sorted(r["day"] for r in rows)[:3]],
    ]


def plain(v):
    """A value as comparable plain data (lists, tuples and dicts inside)."""
    if isinstance(v, decimal.Decimal):
        return str(v.normalize()) if v == v else "NaN"
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {k: plain(x) for k, x in sorted(v.items())}
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    return v


def registry():
    """The list of operations and the decorator that adds one to it:
    @op(name, write=False) over a function of (model, connection)."""
    operations = []

    def op(name, write=False):
        def add(f):
            operations.append((name, f, write))
            return f

        return add

    return operations, op


def verdict(plain_outcome, enc_outcome):
    """equal, refused or wrong, and why, from each side's ("ok", result) or
    ("error", (sqlstate, message))."""
    if enc_outcome[0] == "error" and (enc_outcome[1][0] or "").startswith("PC"):
        return "refused", f"{enc_outcome[1][0]}: {enc_outcome[1][1]}"
    if plain_outcome[0] == enc_outcome[0] == "ok" and plain_outcome[1] == enc_outcome[1]:
        return "equal", ""
    if plain_outcome[0] == enc_outcome[0] == "error" and plain_outcome[1][0] == enc_outcome[1][0]:
        return "equal", f"both fail with {plain_outcome[1][0]}"
    return "wrong", f"plaintext {plain_outcome!r:.300} encrypted {enc_outcome!r:.300}"


def report(results, name, outcome, detail, write):
    results.append({"operation": name, "outcome": outcome, "detail": detail, "write": write})
    print(f"{outcome:8} {name}{': ' + detail if detail else ''}", flush=True)


def save(path, mode, version, results):
    with open(path, "w") as fh:
        json.dump({"mode": mode, "version": version, "results": results}, fh, indent=1)
