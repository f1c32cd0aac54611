-- Order format 2 (design 13.5b): ORE on AES, query operands that carry the
-- left part alone, and values carrying both formats while a column is
-- moved.  Every pair of the format-2 vectors (and of each mixture the
-- server must compare) is ordered as the plaintexts are; the comparisons
-- it must refuse are refused; bindings hold the formats their state allows.
\getenv abs_srcdir PG_ABS_SRCDIR
\set setup_file :abs_srcdir '/setup.sql'
\i :setup_file
CREATE FUNCTION disagreements2(t text, la text, lb text, op text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	enc text := 'enc_' || t || '_ord';
	plain_type text := CASE t WHEN 'text' THEN 'text COLLATE "C"' ELSE t END;
	prefix_tie text := CASE
		WHEN t = 'text' THEN 'substr(a.plain, 1, 16) = substr(b.plain, 1, 16)'
		WHEN t = 'bytea' THEN 'substr(a.plain::bytea, 1, 16) = substr(b.plain::bytea, 1, 16)'
		ELSE 'false' END;
	n bigint;
BEGIN
	EXECUTE format($q$
		SELECT count(*) FROM vectors a JOIN vectors b USING (type, key_id)
		 WHERE type = %L AND a.level = %L AND b.level = %L AND key_id = 1
		   AND (%L IN ('=', '<>') OR a.plain = b.plain OR NOT (%s))
		   AND (a.ct::%s %s b.ct::%s) IS DISTINCT FROM (a.plain::%s %s b.plain::%s)$q$,
		t, la, lb, op, prefix_tie, enc, op, enc, plain_type, op, plain_type) INTO n;
	RETURN n;
END $$;

-- format 2 with format 2, a query with format 2 (both ways), format 2
-- carrying 1 with itself, with format 2 and with format 1: no disagreement
SELECT pair, sum(disagreements2(t, la, lb, op)) AS disagreements, count(*) AS checks
  FROM unnest(ARRAY['int4', 'int8', 'float8', 'numeric', 'text', 'bytea', 'date', 'timestamptz', 'bool']) t,
       (VALUES ('ORD2', 'ORD2'), ('ORD2Q', 'ORD2'), ('ORD2', 'ORD2Q'), ('ORD12', 'ORD12'),
               ('ORD12', 'ORD2'), ('ORD2Q', 'ORD12'), ('ORD12', 'ORD'), ('ORD', 'ORD12')) p(la, lb),
       unnest(ARRAY['=', '<>', '<', '<=', '>', '>=']) op,
       LATERAL (SELECT la || ' ' || lb AS pair) x
 GROUP BY pair ORDER BY pair;

-- The check can fail: a query is less than some stored values, not others.
SELECT count(*) FILTER (WHERE a.ct::enc_int8_ord < b.ct::enc_int8_ord) AS ciphertext_less,
       count(*) FILTER (WHERE a.plain::int8 < b.plain::int8) AS plaintext_less
  FROM vectors a JOIN vectors b USING (type, key_id)
 WHERE type = 'int8' AND a.level = 'ORD2Q' AND b.level = 'ORD2' AND key_id = 1;

-- What the server sees, and each value's format.
SELECT level, enc_describe(ct::enc_int4_ord), enc_format(ct::enc_int4_ord)
  FROM vectors WHERE type = 'int4' AND level LIKE 'ORD%' AND plain = '0' AND key_id = 1
 ORDER BY n LIMIT 5;

-- Refused: formats 1 and 2 alone, two query operands.
SELECT (SELECT ct FROM vectors WHERE type = 'int4' AND level = 'ORD' LIMIT 1)::enc_int4_ord <
       (SELECT ct FROM vectors WHERE type = 'int4' AND level = 'ORD2' LIMIT 1)::enc_int4_ord;
SELECT (SELECT ct FROM vectors WHERE type = 'int4' AND level = 'ORD2Q' LIMIT 1)::enc_int4_ord <
       (SELECT ct FROM vectors WHERE type = 'int4' AND level = 'ORD2Q' OFFSET 1 LIMIT 1)::enc_int4_ord;
-- a query operand cut short, or with a payload after it
SELECT encode(substr(decode(ct, 'base64'), 1, 40), 'base64')::enc_int4_ord
  FROM vectors WHERE type = 'int4' AND level = 'ORD2Q' LIMIT 1;
SELECT translate(encode(decode(ct, 'base64') || '\x00'::bytea, 'base64'), E'\n', '')::enc_int4_ord
  FROM vectors WHERE type = 'int4' AND level = 'ORD2Q' LIMIT 1;

-- A new ORD column is bound at format 2; each state holds its formats.
SELECT pgcipher.add_column_key('k1', 'cmk', decode(repeat('00', 61), 'hex')) > 0 AS key_added;
CREATE TABLE ord2 (id int, v enc_int8_ord);
SELECT pgcipher.encrypt_column('ord2', 'v', 'k1', 'ORD', 'public.vec.v');
SELECT level, ore_format FROM pgcipher.encrypted_columns WHERE relid = 'ord2'::regclass;
INSERT INTO ord2 SELECT n, ct::enc_int8_ord FROM vectors WHERE type = 'int8' AND level = 'ORD2';
INSERT INTO ord2 SELECT n, ct::enc_int8_ord FROM vectors WHERE type = 'int8' AND level = 'ORD' LIMIT 1;
INSERT INTO ord2 SELECT n, ct::enc_int8_ord FROM vectors WHERE type = 'int8' AND level = 'ORD12' LIMIT 1;
INSERT INTO ord2 SELECT n, ct::enc_int8_ord FROM vectors WHERE type = 'int8' AND level = 'ORD2Q' LIMIT 1;
-- an index scan with a query operand finds what the plaintext does
CREATE INDEX ON ord2 (v);
SET enable_seqscan = off;
SELECT count(*) AS found,
       (SELECT count(*) FROM vectors WHERE type = 'int8' AND level = 'ORD2' AND plain::int8 > 255) AS expected
  FROM ord2 WHERE v > (SELECT ct FROM vectors WHERE type = 'int8' AND level = 'ORD2Q' AND plain = '255')::enc_int8_ord;
RESET enable_seqscan;
-- back to 2 with 1: values carrying both are accepted, format 1 still not
SELECT pgcipher.set_ore_format('ord2', 'v', '2+1');
INSERT INTO ord2 SELECT n, ct::enc_int8_ord FROM vectors WHERE type = 'int8' AND level = 'ORD12' LIMIT 1;
INSERT INTO ord2 SELECT n, ct::enc_int8_ord FROM vectors WHERE type = 'int8' AND level = 'ORD' LIMIT 1;
-- the state's CHECK is validated against the rows there
ALTER TABLE ord2 VALIDATE CONSTRAINT pgcipher_v;
SELECT pgcipher.set_ore_format('ord2', 'v', '1');
ALTER TABLE ord2 VALIDATE CONSTRAINT pgcipher_v;
-- statistics of format 1 do not take planning down when a query of
-- format 2 meets them: the estimate falls back to the default
TRUNCATE ord2;
INSERT INTO ord2 SELECT n, ct::enc_int8_ord FROM vectors WHERE type = 'int8' AND level = 'ORD';
ANALYZE ord2;
SELECT most_common_vals IS NOT NULL OR histogram_bounds IS NOT NULL AS has_statistics
  FROM pg_stats WHERE tablename = 'ord2' AND attname = 'v';
SELECT ct AS q2 FROM vectors WHERE type = 'int8' AND level = 'ORD2Q' AND plain = '255' \gset
EXPLAIN (COSTS OFF) SELECT id FROM ord2 WHERE v > :'q2'::enc_int8_ord;
EXPLAIN (COSTS OFF) SELECT id FROM ord2 WHERE v = :'q2'::enc_int8_ord;
SELECT pgcipher.set_ore_format('ord2', 'v', '3');
SELECT pgcipher.reencrypt_column('ord2', 'v');
DROP TABLE ord2;
DELETE FROM pgcipher.column_keys WHERE key_name = 'k1';
DROP FUNCTION disagreements2;
