-- schema.sql — the tables of every client test (proxy/test/clients/), run
-- through the proxy with psql in each client's database:
--   enc_t    every encrypted type and level, bound to the column key k1
--   plain_t  its plaintext twin (same column names, plain types)
-- psql -v direct=1 (PGCIPHER_CLIENTS_DIRECT=1: no proxy, a check of the
-- harness) makes enc_t a second plaintext table.
\set ON_ERROR_STOP on
CREATE TABLE plain_t (id int PRIMARY KEY, i4 int4, i4o int4, i8 int8, i8o int8,
  f8 float8, num numeric, t text, tm text, tr text, b bytea, d date,
  ts timestamptz, bo bool);
\if :direct
CREATE TABLE enc_t (LIKE plain_t INCLUDING ALL);
\else
-- one argument: the proxy draws the column key, wraps it with its CMK and
-- stores it
SELECT pgcipher.add_column_key('k1');
CREATE TABLE enc_t (id int PRIMARY KEY, i4 enc_int4, i4o enc_int4_ord,
  i8 enc_int8, i8o enc_int8_ord, f8 enc_float8_ord, num enc_numeric,
  t enc_text, tm enc_text, tr enc_text, b enc_bytea, d enc_date_ord,
  ts enc_timestamptz_ord, bo enc_bool);
SELECT pgcipher.encrypt_column('enc_t', 'i4', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('enc_t', 'i4o', 'k1', 'ORD');
SELECT pgcipher.encrypt_column('enc_t', 'i8', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('enc_t', 'i8o', 'k1', 'ORD');
SELECT pgcipher.encrypt_column('enc_t', 'f8', 'k1', 'ORD');
SELECT pgcipher.encrypt_column('enc_t', 'num', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('enc_t', 't', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('enc_t', 'tm', 'k1', 'MATCH');
SELECT pgcipher.encrypt_column('enc_t', 'tr', 'k1', 'RND');
SELECT pgcipher.encrypt_column('enc_t', 'b', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('enc_t', 'd', 'k1', 'ORD');
SELECT pgcipher.encrypt_column('enc_t', 'ts', 'k1', 'ORD');
SELECT pgcipher.encrypt_column('enc_t', 'bo', 'k1', 'EQ');
\endif
