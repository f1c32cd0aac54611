"""Encrypted fields for Django models, in a few lines: a field of a
pgcipher enc_* type at a level, and the migration operations that bind it
(pgcipher.encrypt_column) and move a live plaintext column to encrypted.

    class Visit(models.Model):
        reason = EncryptedCharField(max_length=80, level="MATCH")
        cost = EncryptedDecimalField(max_digits=9, decimal_places=2, level="ORD")

    # in a migration, after the field is added (through pgcipher-proxy):
    EncryptColumn("visit", "reason", key="k1", level="MATCH", case_insensitive=True)
    # an existing plaintext column: add the encrypted one, copy, swap
    EncryptExistingColumn("visit", "email", key="k1", level="EQ")

The application reads and writes plaintext; the proxy encrypts.  See
docs/orm/declaring.md."""

from django.db import migrations, models

# the plain types Django's fields store, and their pgcipher types
ENC_TYPES = {
    "CharField": "text",
    "TextField": "text",
    "IntegerField": "int4",
    "BigIntegerField": "int8",
    "DecimalField": "numeric",
    "FloatField": "float8",
    "DateField": "date",
    "DateTimeField": "timestamptz",
    "BooleanField": "bool",
    "BinaryField": "bytea",
}


class EncryptedMixin:
    """A field stored in pgcipher's enc_T (enc_T_ord at level ORD)."""

    def __init__(self, *args, level="EQ", **kwargs):
        self.level = level.upper()
        super().__init__(*args, **kwargs)

    def db_type(self, connection):
        plain = ENC_TYPES[super().get_internal_type()]
        return f"enc_{plain}{'_ord' if self.level == 'ORD' else ''}"

    def cast_db_type(self, connection):
        # Django casts values to cast_db_type (bulk_update's CASE); the
        # plain type keeps them plaintext for the proxy to encrypt
        return super().db_type(connection)

    def deconstruct(self):
        name, path, args, kwargs = super().deconstruct()
        kwargs["level"] = self.level
        return name, path, args, kwargs


class EncryptedCharField(EncryptedMixin, models.CharField):
    pass


class EncryptedTextField(EncryptedMixin, models.TextField):
    pass


class EncryptedIntegerField(EncryptedMixin, models.IntegerField):
    pass


class EncryptedDecimalField(EncryptedMixin, models.DecimalField):
    pass


class EncryptedDateField(EncryptedMixin, models.DateField):
    pass


def EncryptColumn(table, column, key, level, join_group=None, case_insensitive=False):
    """Binds an enc_* column to a column key at a level (run through the
    proxy, which holds the key); case_insensitive (MATCH): iexact,
    icontains and istartswith are served too."""
    return migrations.RunSQL(
        [
            (
                "SELECT pgcipher.encrypt_column(%s, %s, %s, %s, %s, %s)",
                [table, column, key, level, join_group, case_insensitive],
            )
        ],
        reverse_sql=migrations.RunSQL.noop,
    )


def EncryptExistingColumn(table, column, key, level, plain_type="text"):
    """Moves a live plaintext column to encrypted, through the proxy: the
    old column renamed aside, a new enc_* column under the column's name
    bound at the level (its values are bound to that name: an encrypted
    column is never renamed), every value copied (UPDATE t SET new = old:
    the proxy reads, encrypts and writes each row back), the old column
    dropped.  NOT NULL, defaults and indexes are the application's to add
    again; the old values stay in dead tuples until VACUUM FULL (or a table
    rewrite) removes them.  Runs outside a transaction (a migration with
    atomic = False): the proxy binds columns only there."""
    enc = f"enc_{plain_type}{'_ord' if level.upper() == 'ORD' else ''}"
    old = f"{column}__pgcipher_old"
    return migrations.RunSQL(
        [
            f'ALTER TABLE "{table}" RENAME COLUMN "{column}" TO "{old}"',
            f'ALTER TABLE "{table}" ADD COLUMN "{column}" {enc}',
            ("SELECT pgcipher.encrypt_column(%s, %s, %s, %s)", [table, column, key, level]),
            f'UPDATE "{table}" SET "{column}" = "{old}"',
            f'ALTER TABLE "{table}" DROP COLUMN "{old}"',
        ],
        reverse_sql=migrations.RunSQL.noop,
    )
