-- MATCH: substring search candidates on trigram Bloom filters (design
-- 13.5a).  The vectors hold text values at level MATCH and LIKE patterns
-- encrypted as MATCH queries (level PATTERN in the file).
\getenv abs_srcdir PG_ABS_SRCDIR
\set setup_file :abs_srcdir '/setup.sql'
\i :setup_file
CREATE TABLE docs (n int, plain text, v enc_text);
INSERT INTO docs SELECT n, plain, ct::enc_text FROM vectors
 WHERE type = 'text' AND level = 'MATCH' AND key_id = 1;
CREATE TABLE patterns (n int, pattern text, q enc_text);
INSERT INTO patterns SELECT n, plain, ct::enc_text FROM vectors
 WHERE type = 'text' AND level = 'PATTERN';
SELECT enc_describe(q) FROM patterns ORDER BY n LIMIT 1;

-- No false negatives: every value the pattern matches is a candidate.
SELECT count(*) AS missed FROM docs d, patterns p
 WHERE d.plain LIKE p.pattern AND NOT (d.v @> p.q);
-- Candidates per pattern beside true matches (the client rechecks).
SELECT p.pattern, count(*) FILTER (WHERE d.v @> p.q) AS candidates,
       count(*) FILTER (WHERE d.plain LIKE p.pattern) AS matches
  FROM patterns p, docs d GROUP BY p.n, p.pattern ORDER BY p.n;

-- A GIN index answers @>.
CREATE INDEX docs_v ON docs USING gin (v enc_text_match_ops);
SET enable_seqscan = off;
SELECT q::text AS quick FROM patterns WHERE pattern = '%quick brown%' \gset
EXPLAIN (COSTS OFF) SELECT n FROM docs WHERE v @> :'quick';
SELECT count(*) FROM docs WHERE v @> :'quick';
SELECT q::text AS everything FROM patterns WHERE pattern = '%' \gset
SELECT count(*) = (SELECT count(*) FROM docs) AS all_rows FROM docs WHERE v @> :'everything';
RESET enable_seqscan;

-- MATCH values compare for equality like EQ values.
SELECT count(*) AS equal_pairs FROM docs a JOIN docs b ON a.v = b.v;

-- Bindings: MATCH only for enc_text; queries cannot be stored.
-- (the vectors' key 1, their label and join group public.vec.v)
SELECT pgcipher.add_column_key('k1', 'cmk', decode(repeat('01', 61), 'hex'));
CREATE TABLE public.vec3 (v enc_text);
CREATE TABLE public.vec (v enc_text);
SELECT pgcipher.encrypt_column('public.vec', 'v', 'k1', 'MATCH');
INSERT INTO vec SELECT v FROM docs;
INSERT INTO vec SELECT q FROM patterns LIMIT 1;
SELECT pgcipher.encrypt_column('public.vec3', 'v', 'k1', 'match');  -- level names in any case
CREATE TABLE public.vec4 (v enc_int4);
SELECT pgcipher.encrypt_column('public.vec4', 'v', 'k1', 'MATCH');
-- operations a level does not allow; the error names the operand's level
-- that lacks it
SELECT count(*) FROM docs d, vectors e WHERE e.type = 'text' AND e.level = 'EQ' AND d.v @> e.ct::enc_text;
SELECT ct AS rnd_text FROM vectors WHERE type = 'text' AND level = 'RND' AND key_id = 1 ORDER BY n LIMIT 1 \gset
SELECT v = :'rnd_text' FROM docs ORDER BY n LIMIT 1;
CREATE INDEX ON vec4 USING gin (v enc_text_match_ops);

DROP TABLE docs, patterns, vec, vec3, vec4;
DELETE FROM pgcipher.column_keys WHERE key_name = 'k1';
