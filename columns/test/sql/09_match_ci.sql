-- Case-insensitive MATCH (design 13.5a, extension 0.3): a column bound
-- with case_insensitive => true holds Bloom filters of its values'
-- case-folded text, flag 0x04 in every value and query, so that ILIKE and
-- upper()/lower() searches find their candidates.  The vectors: MATCHCI
-- values, PATTERNCI queries (mixed case).
\getenv abs_srcdir PG_ABS_SRCDIR
\set setup_file :abs_srcdir '/setup.sql'
\i :setup_file
CREATE TABLE cdocs (n int, plain text, v enc_text);
INSERT INTO cdocs SELECT n, plain, ct::enc_text FROM vectors WHERE level = 'MATCHCI';
CREATE TABLE cpatterns (n int, pattern text, q enc_text);
INSERT INTO cpatterns SELECT n, plain, ct::enc_text FROM vectors WHERE level = 'PATTERNCI';
SELECT enc_describe(v) FROM cdocs ORDER BY n LIMIT 1;

-- No false negatives for ILIKE: every value the pattern matches whatever
-- the case is a candidate; and what each query selects.
SELECT count(*) AS missed FROM cdocs d, cpatterns p
 WHERE d.plain ILIKE p.pattern AND NOT (d.v @> p.q);
SELECT p.pattern, count(*) FILTER (WHERE d.v @> p.q) AS candidates,
       count(*) FILTER (WHERE d.plain ILIKE p.pattern) AS matches
  FROM cpatterns p, cdocs d GROUP BY p.n, p.pattern ORDER BY p.n;

-- A GIN index answers @> on folded filters too.
CREATE INDEX cdocs_v ON cdocs USING gin (v enc_text_match_ops);
SET enable_seqscan = off;
SELECT q::text AS zebra FROM cpatterns WHERE pattern = '%zebra%' \gset
SELECT plain FROM cdocs WHERE v @> :'zebra' ORDER BY n;
RESET enable_seqscan;

-- Equality tokens stay of the exact value: 'ZEBRA' and 'zebra' differ.
SELECT count(*) AS equal_pairs FROM cdocs a JOIN cdocs b ON a.v = b.v;

-- A folded query cannot test an exact filter, nor an exact query a folded
-- one: their bits mean nothing to each other.
SELECT ct AS exact_query FROM vectors WHERE level = 'PATTERN' ORDER BY n LIMIT 1 \gset
SELECT count(*) FROM cdocs WHERE v @> :'exact_query';
SELECT ct AS exact_value FROM vectors WHERE level = 'MATCH' ORDER BY n LIMIT 1 \gset
SELECT :'exact_value'::enc_text @> :'zebra'::enc_text;

-- Bindings: the CHECK holds the variant; a value of the other variant
-- is refused; only MATCH can be case-insensitive.
SELECT pgcipher.add_column_key('k1', 'cmk', decode(repeat('01', 61), 'hex'));
CREATE TABLE public.vec (v enc_text);
SELECT pgcipher.encrypt_column('public.vec', 'v', 'k1', 'MATCH', case_insensitive => true);
SELECT level, case_insensitive FROM pgcipher.columns WHERE table_name = 'vec';
SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'public.vec'::regclass;
INSERT INTO vec SELECT v FROM cdocs;
INSERT INTO vec VALUES (:'exact_value');
CREATE TABLE public.vec2 (v enc_text);
SELECT pgcipher.encrypt_column('public.vec2', 'v', 'k1', 'MATCH', 'public.vec.v');
INSERT INTO vec2 VALUES (:'exact_value');
INSERT INTO vec2 SELECT v FROM cdocs LIMIT 1;
CREATE TABLE public.vec3 (v enc_text);
SELECT pgcipher.encrypt_column('public.vec3', 'v', 'k1', 'EQ', case_insensitive => true);
SELECT pgcipher.encrypt_column('public.vec3', 'v', 'k1', 'EQ');
UPDATE pgcipher.encrypted_columns SET case_insensitive = true WHERE relid = 'public.vec3'::regclass;

DROP TABLE cdocs, cpatterns, vec, vec2, vec3;
DELETE FROM pgcipher.column_keys WHERE key_name = 'k1';
