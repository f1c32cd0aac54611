-- The extension is trusted: a database owner creates it without being a
-- superuser, and ordinary users index and bind their own columns.
-- (the test user may be named pgcipher, whose "$user" schema is the extension's)
SET search_path = public;
CREATE ROLE pgcipher_alice LOGIN;
CREATE ROLE pgcipher_bob LOGIN;
\set regression_db :DBNAME
\set superuser :USER
CREATE DATABASE pgcipher_priv OWNER pgcipher_alice;
\c pgcipher_priv pgcipher_alice
CREATE EXTENSION pgcipher_columns;
CREATE TABLE t (a enc_int8_ord, b enc_text);
CREATE INDEX ON t (a);
CREATE INDEX ON t USING hash (b);
SELECT pgcipher.add_column_key('alice-key', 'cmk', decode(repeat('01', 61), 'hex'));
SELECT pgcipher.encrypt_column('t', 'a', 'alice-key', 'ORD');
GRANT SELECT ON t TO pgcipher_bob;
GRANT CREATE ON DATABASE pgcipher_priv TO pgcipher_bob;
\c pgcipher_priv pgcipher_bob
-- bob can read the catalog but not bind alice's columns or change her keys
SELECT table_name, column_name, level, key_name FROM pgcipher.columns;
SELECT pgcipher.encrypt_column('t', 'b', 'alice-key', 'EQ');
UPDATE pgcipher.column_keys SET wrapped_cek = decode(repeat('02', 61), 'hex');
DELETE FROM pgcipher.encrypted_columns;
SELECT count(*) FROM pgcipher.column_keys WHERE wrapped_cek = decode(repeat('01', 61), 'hex');
-- a function of bob's in front of pg_catalog does not hijack encrypt_column
CREATE SCHEMA bob;
CREATE FUNCTION bob.upper(text) RETURNS text LANGUAGE sql AS $$ SELECT 'ORD' $$;
SET search_path = bob, pg_catalog, public;
CREATE TABLE bob.mine (x enc_int4);
SELECT pgcipher.add_column_key('bob-key', 'cmk', decode(repeat('03', 61), 'hex'));
SELECT pgcipher.encrypt_column('bob.mine', 'x', 'bob-key', 'eq');
SELECT table_name, column_name, level, label FROM pgcipher.columns ORDER BY 1;
RESET search_path;
\c :regression_db :superuser
DROP DATABASE pgcipher_priv;
DROP ROLE pgcipher_alice;
DROP ROLE pgcipher_bob;
