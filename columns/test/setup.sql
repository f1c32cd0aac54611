-- Set-up of every test that needs the extension or the vectors (\i), so
-- that each test runs alone as well as after the others.  The extension
-- is created quietly where an earlier test made it; the shared vectors
-- (encrypted by the Go library, proxy/cmd/pgcipher-keys vectors) go into
-- a temporary table that ends with the session.  Each test drops what
-- else it made.  Set abs_srcdir first (\getenv abs_srcdir PG_ABS_SRCDIR).
-- (the test user may be named pgcipher, whose "$user" schema is the extension's)
SET search_path = public;
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgcipher_columns;
RESET client_min_messages;
CREATE TEMP TABLE vectors (type text, level text, key_id int, grp text, label text,
                           n int, plain text, ct text);
\set vectors_file :abs_srcdir '/data/vectors.csv'
COPY vectors FROM :'vectors_file' WITH (FORMAT csv, HEADER true);
