"""The demo's Django application (./pgcipher demo, step 4c'): the model of
harness.py, unchanged Django, through pgcipher-proxy.  It writes patients
with bulk_create, then looks them up as an application does; the demo then
shows the DBA's view of the same rows.

Environment: PGC_HOST, PGC_PROXY_PORT, PGC_DB, PGC_USER."""

import datetime
import decimal
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import django  # noqa: E402
from django.conf import settings  # noqa: E402

settings.configure(
    DATABASES={
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ["PGC_DB"],
            "USER": os.environ["PGC_USER"],
            "HOST": os.environ.get("PGC_HOST", "127.0.0.1"),
            "PORT": os.environ["PGC_PROXY_PORT"],
        }
    },
    INSTALLED_APPS=["patients"],
    USE_TZ=True,
    DEFAULT_AUTO_FIELD="django.db.models.AutoField",
)
django.setup()

from django.db.models import Avg, Count, Sum  # noqa: E402
from patients.models import Patient, Ward  # noqa: E402

D = decimal.Decimal
ward = Ward.objects.create(id=1, name="Cardiology")
Patient.objects.bulk_create(
    Patient(
        city=["Oslo", "Rome", "Lima"][i % 3],
        name=f"{['Ada', 'Bob', 'Eve', 'Ola'][i % 4]} {['Smith', 'Jones'][i % 2]}",
        ssn=f"SSN-{100 + i}-{i * 7 % 100:02d}",
        born=datetime.date(1950 + i, i % 12 + 1, 1),
        balance=D(f"{i * 37 % 500}.50"),
        visits=i % 9,
        notes=f"private note {i}",
        ward=ward,
    )
    for i in range(1, 41)
)
print("Patient.objects.bulk_create(40 patients)                ->", Patient.objects.count(), "rows")
p = Patient.objects.get(ssn="SSN-107-49")
print('Patient.objects.get(ssn="SSN-107-49")                  ->', p.name, p.city, p.born, p.balance)
print(
    'filter(name__icontains="ola", born__lt=1970)           ->',
    # name is MATCH, case-insensitive: Django's UPPER(name) LIKE UPPER(%s)
    list(
        Patient.objects.filter(name__icontains="ola", born__lt=datetime.date(1970, 1, 1)).values_list(
            "ssn", flat=True
        )
    ),
)
print(
    'filter(city="Oslo").order_by("-balance")[:3]           ->',
    list(Patient.objects.filter(city="Oslo").order_by("-balance", "id").values_list("name", "balance")[:3]),
)
print(
    'filter(balance__range=(400, 450)).order_by("id")       ->',
    # numeric ORD orders by a 16-byte prefix: the server narrows, the
    # proxy rechecks each row's plaintext
    list(Patient.objects.filter(balance__range=(400, 450)).order_by("id").values_list("ssn", "balance")),
)
print(
    'values("city").annotate(Sum("balance"), Count("id"))   ->',
    sorted(
        (r["city"], str(r["s"]), r["n"])
        for r in Patient.objects.values("city").annotate(s=Sum("balance"), n=Count("id"))
    ),
)
print(
    'aggregate(Avg("visits"))                                ->',
    Patient.objects.aggregate(a=Avg("visits"))["a"],
)
n = Patient.objects.filter(city="Lima").update(notes="moved to the Lima ward")
print('filter(city="Lima").update(notes=...)                   ->', n, "rows")
