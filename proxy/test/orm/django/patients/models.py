"""The application's models: patients with encrypted fields and their
plaintext twin, in wards (plaintext).  Ordinary Django fields: the tables
are made in SQL (schema.sql), the encrypted columns with pgcipher's
enc_* types, so the application does not know which columns are
encrypted."""

from django.db import models

from .encrypted import EncryptedCharField, EncryptedDateField, EncryptedDecimalField


class Ward(models.Model):
    name = models.CharField(max_length=60)

    class Meta:
        db_table = "ward"
        managed = False


class PatientBase(models.Model):
    city = models.CharField(max_length=40)  # EQ
    name = models.CharField(max_length=80)  # MATCH
    ssn = models.CharField(max_length=20, unique=True)  # EQ
    born = models.DateField()  # ORD
    balance = models.DecimalField(max_digits=12, decimal_places=2)  # ORD
    visits = models.IntegerField()  # ORD
    notes = models.TextField(null=True)  # RND
    active = models.BooleanField(default=True)  # plaintext
    ward = models.ForeignKey(Ward, null=True, on_delete=models.DO_NOTHING, related_name="%(class)s_set")

    class Meta:
        abstract = True


class Patient(PatientBase):
    class Meta:
        db_table = "patient"
        managed = False


class PlainPatient(PatientBase):
    class Meta:
        db_table = "patient_plain"
        managed = False


class Visit(models.Model):
    """Declared encrypted from Django (patients.encrypted): its table is
    made by Django's schema editor and bound by EncryptColumn, through the
    proxy; email starts plaintext and moves to encrypted while rows live
    in it (EncryptExistingColumn)."""

    reason = EncryptedCharField(max_length=80, level="MATCH")
    cost = EncryptedDecimalField(max_digits=9, decimal_places=2, level="ORD")
    day = EncryptedDateField(level="ORD")
    email = models.CharField(max_length=80)

    class Meta:
        db_table = "visit"
