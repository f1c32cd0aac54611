-- Malformed, truncated, mismatched and mixed ciphertexts: each a clear
-- error, never a crash or an answer.
\getenv abs_srcdir PG_ABS_SRCDIR
\set setup_file :abs_srcdir '/setup.sql'
\i :setup_file
SELECT ct AS good FROM vectors WHERE type = 'int4' AND level = 'ORD' AND key_id = 1 ORDER BY n LIMIT 1 \gset
SELECT ct AS good_eq FROM vectors WHERE type = 'int4' AND level = 'EQ' AND key_id = 1 ORDER BY n LIMIT 1 \gset
SELECT ct AS rnd FROM vectors WHERE type = 'int4' AND level = 'RND' AND key_id = 1 ORDER BY n LIMIT 1 \gset
SELECT ct AS other FROM vectors WHERE type = 'int4' AND level = 'ORD' AND key_id = 2 ORDER BY n LIMIT 1 \gset
SELECT ct AS text_ord FROM vectors WHERE type = 'text' AND level = 'ORD' AND key_id = 1 ORDER BY n LIMIT 1 \gset

CREATE FUNCTION mangle(ct text, pos int, bytes bytea) RETURNS text LANGUAGE sql AS $$
	SELECT translate(encode(overlay(decode(ct, 'base64') PLACING bytes FROM pos), 'base64'), E'\n', '')
$$;
CREATE FUNCTION cut(ct text, len int) RETURNS text LANGUAGE sql AS $$
	SELECT translate(encode(substr(decode(ct, 'base64'), 1, len), 'base64'), E'\n', '')
$$;

SELECT 'not base64!'::enc_int4;
SELECT ''::enc_int4;
SELECT cut(:'good', 11)::enc_int4_ord;                 -- shorter than the header
SELECT cut(:'good', 100)::enc_int4_ord;                -- ORE part cut
SELECT cut(:'good', length(decode(:'good', 'base64')) - 1)::enc_int4_ord;  -- payload cut
SELECT mangle(:'good', 1, '\x03')::enc_int4_ord;       -- version
SELECT mangle(:'good', 2, '\x0a')::enc_int4_ord;       -- type code
SELECT mangle(:'good', 3, '\x04')::enc_int4_ord;       -- level
SELECT mangle(:'good', 4, '\x01')::enc_int4_ord;       -- flags
SELECT :'good'::enc_int8_ord;                          -- another type
SELECT :'good'::enc_int4;                              -- ORD value in an EQ type
SELECT :'good_eq'::enc_int4_ord;                       -- EQ value in an ORD type
SELECT pg_input_is_valid('not base64!', 'enc_int4'), pg_input_is_valid(:'good_eq', 'enc_int4');
SELECT * FROM pg_input_error_info(cut(:'good', 11), 'enc_int4_ord');

-- operations a level does not allow
SELECT :'rnd'::enc_int4 = :'rnd'::enc_int4;
SELECT count(*) FROM (VALUES (:'rnd'::enc_int4)) v(x) GROUP BY x;
-- values of different keys or join groups
SELECT :'good'::enc_int4_ord < :'other'::enc_int4_ord;
-- an ORE ciphertext with impossible entries (3 in a mod-3 table) is refused on input
SELECT ct AS second FROM vectors WHERE type = 'int4' AND level = 'ORD' AND key_id = 1 AND plain <> (
  SELECT plain FROM vectors WHERE ct = :'good') ORDER BY n LIMIT 1 \gset
SELECT :'good'::enc_int4_ord < mangle(:'second', 12 + 16 + 8 * 16 + 4 + 16 + 1, decode(repeat('ff', 32), 'hex'))::enc_int4_ord;

DROP FUNCTION mangle(text, int, bytea), cut(text, int);
