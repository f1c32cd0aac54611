-- Decryption rights (design 13.12): the server stores the signed rows and
-- checks what it can (column, role, serial, who may change them); it
-- cannot check the MAC, which only the proxy can verify.
SET search_path = public;
CREATE ROLE pgcipher_carol LOGIN;
CREATE ROLE pgcipher_dave LOGIN;
\set regression_db :DBNAME
\set superuser :USER
CREATE DATABASE pgcipher_rights OWNER pgcipher_carol;
\c pgcipher_rights pgcipher_carol
CREATE EXTENSION pgcipher_columns;
CREATE TABLE t (a enc_text, b enc_int4);
SELECT pgcipher.add_column_key('k', 'cmk', decode(repeat('01', 61), 'hex'));
SELECT pgcipher.encrypt_column('t', 'a', 'k', 'EQ');
SELECT pgcipher.encrypt_column('t', 'b', 'k', 'EQ');
\set mac '\'\\x' `printf '%064d' 7` '\''
SELECT pgcipher.set_column_right('public.t.a', 'pgcipher_dave', 'k', 'read', 1, :mac);
SELECT pgcipher.set_column_right('public.t.b', 'pgcipher_dave', 'k', 'write', 1, :mac);
-- a newer serial replaces the right; an older or equal one is refused
SELECT pgcipher.set_column_right('public.t.a', 'pgcipher_dave', 'k', 'none', 2, :mac);
SELECT pgcipher.set_column_right('public.t.a', 'pgcipher_dave', 'k', 'read', 2, :mac);
SELECT label, role, key_name, access, serial FROM pgcipher.column_rights ORDER BY label;
-- bad input: a column that is not bound (or not under that key), a role
-- that does not exist, an unknown access, a MAC of the wrong length
SELECT pgcipher.set_column_right('public.t.nosuch', 'pgcipher_dave', 'k', 'read', 3, :mac);
SELECT pgcipher.set_column_right('public.t.a', 'pgcipher_dave', 'other-key', 'read', 3, :mac);
SELECT pgcipher.set_column_right('public.t.a', 'pgcipher_nobody', 'k', 'read', 3, :mac);
SELECT pgcipher.set_column_right('public.t.a', 'pgcipher_dave', 'k', 'decrypt', 3, :mac);
SELECT pgcipher.set_column_right('public.t.a', 'pgcipher_dave', 'k', 'read', 3, '\x00');
\c pgcipher_rights pgcipher_dave
-- dave reads the rights but may not change carol's
SELECT count(*) FROM pgcipher.column_rights;
DELETE FROM pgcipher.column_rights WHERE access = 'none';
UPDATE pgcipher.column_rights SET access = 'read';
SELECT pgcipher.set_column_right('public.t.b', 'pgcipher_dave', 'k', 'read', 9, :mac);
\c pgcipher_rights pgcipher_carol
-- a dropped column's rights go with its binding
ALTER TABLE t DROP COLUMN b;
SELECT label, access FROM pgcipher.column_rights ORDER BY label;
DROP TABLE t;
SELECT count(*) FROM pgcipher.column_rights;
\c :regression_db :superuser
DROP DATABASE pgcipher_rights;
DROP ROLE pgcipher_carol;
DROP ROLE pgcipher_dave;
