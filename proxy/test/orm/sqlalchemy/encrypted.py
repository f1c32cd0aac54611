"""Encrypted columns for SQLAlchemy models, in a few lines: a column type
that behaves as its plain type and is created as pgcipher's enc_T, and the
DDL steps that bind it (pgcipher.encrypt_column) and move a live plaintext
column to encrypted.

    class Visit(Base):
        __tablename__ = "visit"
        reason = mapped_column(Encrypted(sa.String(80), "MATCH"))   # enc_text
        cost = mapped_column(Encrypted(sa.Numeric(9, 2), "ORD"))     # enc_numeric_ord

    # through pgcipher-proxy, outside a transaction (AUTOCOMMIT):
    Base.metadata.create_all(conn)
    encrypt_columns(conn, Visit.__table__)
    move_to_encrypted(conn, "visit", "email", "k1", "EQ")

The application reads and writes plaintext; the proxy encrypts.  See
docs/orm/declaring.md."""

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles

# the plain types and their pgcipher names
ENC_TYPES = [
    (sa.Text, "text"),
    (sa.String, "text"),
    (sa.BigInteger, "int8"),
    (sa.Integer, "int4"),
    (sa.Numeric, "numeric"),
    (sa.Float, "float8"),
    (sa.DateTime, "timestamptz"),
    (sa.Date, "date"),
    (sa.Boolean, "bool"),
    (sa.LargeBinary, "bytea"),
]


class Encrypted(sa.types.TypeDecorator):
    """A column of pgcipher's enc_T (enc_T_ord at level ORD) that binds and
    reads as its plain type T; key names the column key encrypt_columns
    binds it to."""

    impl = sa.types.TypeEngine
    cache_ok = True

    def __init__(self, plain, level="EQ", key="k1"):
        super().__init__()
        self.impl = plain
        self.level, self.key = level.upper(), key

    def enc_name(self):
        base = next(name for t, name in ENC_TYPES if isinstance(self.impl, t))
        return f"enc_{base}{'_ord' if self.level == 'ORD' else ''}"


@compiles(Encrypted, "postgresql")
def _enc_ddl(t, compiler, **kw):
    return t.enc_name()


def encrypt_columns(conn, table):
    """Binds every Encrypted column of table to its key at its level."""
    for c in table.columns:
        if isinstance(c.type, Encrypted):
            conn.execute(
                sa.text("SELECT pgcipher.encrypt_column(:t, :c, :k, :l)"),
                dict(t=table.name, c=c.name, k=c.type.key, l=c.type.level),
            )


def move_to_encrypted(conn, table, column, key, level, plain="text"):
    """Moves a live plaintext column to encrypted, through the proxy: the
    old column renamed aside, a new enc_* column under its name bound at
    the level (an encrypted column is never renamed: its values are bound
    to that name), every value copied (the proxy reads, encrypts and
    writes each row back), the old column dropped.  NOT NULL, defaults and
    indexes are the application's to add again; VACUUM FULL afterwards
    removes the old values from dead tuples."""
    enc = f"enc_{plain}{'_ord' if level.upper() == 'ORD' else ''}"
    old = f"{column}__pgcipher_old"
    conn.execute(sa.text(f'ALTER TABLE "{table}" RENAME COLUMN "{column}" TO "{old}"'))
    conn.execute(sa.text(f'ALTER TABLE "{table}" ADD COLUMN "{column}" {enc}'))
    conn.execute(
        sa.text("SELECT pgcipher.encrypt_column(:t, :c, :k, :l)"), dict(t=table, c=column, k=key, l=level)
    )
    conn.execute(sa.text(f'UPDATE "{table}" SET "{column}" = "{old}"'))
    conn.execute(sa.text(f'ALTER TABLE "{table}" DROP COLUMN "{old}"'))
