-- Every pair of vectors compared on ciphertext agrees with the same pair
-- compared on plaintext: = for EQ and ORD, and < <= > >= for ORD.
-- Text and bytea are ordered by their first 16 bytes (C collation); pairs
-- that share those bytes but differ later have an arbitrary (consistent)
-- order, so they are only checked for inequality.
\getenv abs_srcdir PG_ABS_SRCDIR
\set setup_file :abs_srcdir '/setup.sql'
\i :setup_file
CREATE FUNCTION disagreements(t text, lvl text, op text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	enc text := 'enc_' || t || CASE WHEN lvl = 'ORD' THEN '_ord' ELSE '' END;
	plain_type text := CASE t WHEN 'text' THEN 'text COLLATE "C"' ELSE t END;
	prefix_tie text := CASE
		WHEN t = 'text' THEN 'substr(a.plain, 1, 16) = substr(b.plain, 1, 16)'
		WHEN t = 'bytea' THEN 'substr(a.plain::bytea, 1, 16) = substr(b.plain::bytea, 1, 16)'
		ELSE 'false' END;
	n bigint;
BEGIN
	EXECUTE format($q$
		SELECT count(*) FROM vectors a JOIN vectors b USING (type, level, key_id)
		 WHERE type = %L AND level = %L AND key_id = 1
		   AND (%L IN ('=', '<>') OR a.plain = b.plain OR NOT (%s))
		   AND (a.ct::%s %s b.ct::%s) IS DISTINCT FROM (a.plain::%s %s b.plain::%s)$q$,
		t, lvl, op, prefix_tie, enc, op, enc, plain_type, op, plain_type) INTO n;
	RETURN n;
END $$;

SELECT t, lvl, op, disagreements(t, lvl, op),
       (SELECT count(*) FROM vectors WHERE type = t AND level = lvl AND key_id = 1) ^ 2 AS pairs
  FROM unnest(ARRAY['int4', 'int8', 'float8', 'numeric', 'text', 'bytea', 'date', 'timestamptz', 'bool']) t,
       unnest(ARRAY['EQ', 'ORD']) lvl,
       unnest(ARRAY['=', '<>', '<', '<=', '>', '>=']) op
 WHERE lvl = 'ORD' OR op IN ('=', '<>')
 ORDER BY 1, 2, 3;

-- The check can fail: < on ciphertext is true for some pairs and false for
-- others, as often as on plaintext.
SELECT count(*) FILTER (WHERE a.ct::enc_int8_ord < b.ct::enc_int8_ord) AS ciphertext_less,
       count(*) FILTER (WHERE a.plain::int8 < b.plain::int8) AS plaintext_less,
       count(*) AS pairs
  FROM vectors a JOIN vectors b USING (type, level, key_id)
 WHERE type = 'int8' AND level = 'ORD' AND key_id = 1;

-- ORDER BY on ciphertext gives the plaintext order; MIN and MAX too.
SELECT array_agg(plain ORDER BY ct::enc_float8_ord) FROM vectors
 WHERE type = 'float8' AND level = 'ORD' AND key_id = 1 AND n % 2 = 0;
SELECT array_agg(plain ORDER BY ct::enc_numeric_ord DESC) FROM vectors
 WHERE type = 'numeric' AND level = 'ORD' AND key_id = 1 AND n % 2 = 1;
SELECT array_agg(plain ORDER BY ct::enc_text_ord) FROM vectors
 WHERE type = 'text' AND level = 'ORD' AND key_id = 1 AND n % 2 = 0;
SELECT (SELECT plain FROM vectors WHERE ct = min(v.ct::enc_timestamptz_ord)::text) AS min,
       (SELECT plain FROM vectors WHERE ct = max(v.ct::enc_timestamptz_ord)::text) AS max
  FROM vectors v WHERE type = 'timestamptz' AND level = 'ORD' AND key_id = 1;

-- GROUP BY and DISTINCT on ciphertext count the plaintexts.
SELECT type, count(DISTINCT plain) AS plaintexts,
       (SELECT count(*) FROM (SELECT DISTINCT ct::enc_int8 FROM vectors
         WHERE type = 'int8' AND level = 'EQ' AND key_id = 1) s) AS distinct_int8
  FROM vectors WHERE type = 'int8' AND level = 'EQ' AND key_id = 1 GROUP BY type;
SELECT count(*) AS groups FROM (SELECT ct::enc_text FROM vectors
  WHERE type = 'text' AND level = 'EQ' AND key_id = 1 GROUP BY 1) g;

DROP FUNCTION disagreements(text, text, text);
