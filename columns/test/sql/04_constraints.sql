-- UNIQUE, PRIMARY KEY, FOREIGN KEY and ON CONFLICT on ciphertext, and the
-- binding of a column to its key, level and join group.
\getenv abs_srcdir PG_ABS_SRCDIR
\set setup_file :abs_srcdir '/setup.sql'
\i :setup_file
SELECT pgcipher.add_column_key('k1', 'cmk', decode(repeat('01', 61), 'hex'));
SELECT pgcipher.add_column_key('k2', 'cmk', decode(repeat('02', 61), 'hex'));

-- The vectors' label and join group are public.vec.v.
CREATE TABLE public.vec (v enc_int4 PRIMARY KEY, note text);
SELECT pgcipher.encrypt_column('vec', 'v', 'k1', 'EQ');
SELECT schema_name, table_name, column_name, type, level, key_id, key_name, label, join_group
  FROM pgcipher.columns;

-- the first encryption of each plaintext goes in
INSERT INTO vec SELECT DISTINCT ON (plain) ct::enc_int4, plain FROM vectors
 WHERE type = 'int4' AND level = 'EQ' AND key_id = 1 ORDER BY plain, n;
SELECT count(*) FROM vec;
-- a second encryption of 0 (another ciphertext, same token) is a duplicate
INSERT INTO vec SELECT ct::enc_int4, 'again' FROM vectors
 WHERE type = 'int4' AND level = 'EQ' AND key_id = 1 AND plain = '0' ORDER BY n DESC LIMIT 1;
-- ON CONFLICT finds the row by ciphertext
INSERT INTO vec SELECT ct::enc_int4, 'updated' FROM vectors
 WHERE type = 'int4' AND level = 'EQ' AND key_id = 1 AND plain = '0' ORDER BY n DESC LIMIT 1
ON CONFLICT (v) DO UPDATE SET note = excluded.note RETURNING note;
SELECT note FROM vec WHERE note IN ('updated', '0');

-- foreign keys
CREATE TABLE payments (id int, account enc_int4 REFERENCES vec (v));
INSERT INTO payments SELECT n, ct::enc_int4 FROM vectors
 WHERE type = 'int4' AND level = 'EQ' AND key_id = 1 AND plain IN ('1', '-1');
SELECT count(*) FROM payments p JOIN vec ON vec.v = p.account;
DELETE FROM vec WHERE note = '1';

-- the binding refuses values of another level, key or join group
INSERT INTO vec SELECT ct::enc_int4, 'rnd' FROM vectors
 WHERE type = 'int4' AND level = 'RND' AND key_id = 1 LIMIT 1;
INSERT INTO vec SELECT ct::enc_int4, 'key2' FROM vectors
 WHERE type = 'int4' AND level = 'EQ' AND key_id = 2 LIMIT 1;
CREATE TABLE public.vec2 (v enc_int4);
SELECT pgcipher.encrypt_column('vec2', 'v', 'k1', 'EQ');
INSERT INTO vec2 SELECT ct::enc_int4 FROM vectors
 WHERE type = 'int4' AND level = 'EQ' AND key_id = 1 LIMIT 1;
-- bindings that cannot be
SELECT pgcipher.encrypt_column('vec', 'note', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('vec2', 'v', 'k1', 'ORD');
SELECT pgcipher.encrypt_column('vec2', 'v', 'nokey', 'EQ');
SELECT pgcipher.encrypt_column('vec2', 'v', 'k1', 'SECRET');

-- ordered columns: unique and range constraints work on ORD values
CREATE TABLE ranked (r enc_int4_ord UNIQUE);
INSERT INTO ranked SELECT DISTINCT ON (plain) ct::enc_int4_ord FROM vectors
 WHERE type = 'int4' AND level = 'ORD' AND key_id = 1 ORDER BY plain, n;
INSERT INTO ranked SELECT ct::enc_int4_ord FROM vectors
 WHERE type = 'int4' AND level = 'ORD' AND key_id = 1 AND plain = '16' ORDER BY n DESC LIMIT 1;

-- ANALYZE (and so autovacuum) works on columns whose values cannot be
-- compared (RND, or mixed keys): null fraction and width only.
CREATE TABLE public.unsorted (r enc_int4, mixed enc_int4_ord);
INSERT INTO unsorted
SELECT r.ct::enc_int4, m.ct::enc_int4_ord
  FROM (SELECT ct, row_number() OVER (ORDER BY n) AS rn FROM vectors
         WHERE type = 'int4' AND level = 'RND') r
  JOIN (SELECT ct, row_number() OVER (ORDER BY key_id DESC, n) AS rn FROM vectors
         WHERE type = 'int4' AND level = 'ORD') m USING (rn);
ANALYZE unsorted;
SELECT attname, null_frac, avg_width > 0 AS has_width, n_distinct,
       most_common_vals IS NULL AS no_mcv, histogram_bounds IS NULL AS no_histogram
  FROM pg_stats WHERE tablename = 'unsorted' ORDER BY attname;
-- where values compare, the statistics are the standard ones, on ciphertext
ANALYZE vec, ranked;
SELECT tablename, n_distinct, histogram_bounds IS NOT NULL AS histogram
  FROM pg_stats WHERE tablename IN ('vec', 'ranked') AND attname IN ('v', 'r') ORDER BY 1;

-- Statistics of another key (the table was reloaded since ANALYZE) do not
-- break planning: the estimators fall back to defaults.
CREATE TABLE public.reloaded (v enc_int4_ord);
INSERT INTO reloaded SELECT ct::enc_int4_ord FROM vectors
 WHERE type = 'int4' AND level = 'ORD' AND key_id = 1;
ANALYZE reloaded;
TRUNCATE reloaded;
INSERT INTO reloaded SELECT ct::enc_int4_ord FROM vectors
 WHERE type = 'int4' AND level = 'ORD' AND key_id = 2;
SELECT ct AS k2 FROM vectors WHERE type = 'int4' AND level = 'ORD' AND key_id = 2 ORDER BY n LIMIT 1 \gset
SELECT count(*) FROM reloaded WHERE v = :'k2';
SELECT count(*) FROM reloaded WHERE v <= :'k2';
SELECT count(*) FROM reloaded a JOIN ranked b ON a.v = b.r;

-- Bindings go with their column or table; both tables are dumped.
ALTER TABLE vec2 DROP COLUMN v;
DROP TABLE unsorted;
SELECT table_name, column_name FROM pgcipher.columns ORDER BY 1, 2;
SELECT count(*) AS bindings FROM pgcipher.encrypted_columns;
SELECT unnest(extconfig)::regclass AS dumped FROM pg_extension WHERE extname = 'pgcipher_columns' ORDER BY 1;

DROP TABLE payments, vec, vec2, ranked, reloaded;
DELETE FROM pgcipher.column_keys WHERE key_name IN ('k1', 'k2');
