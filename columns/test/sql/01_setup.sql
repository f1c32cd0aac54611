-- The extension and the shared test vectors (encrypted by the Go library,
-- proxy/cmd/pgcipher-keys vectors), loaded by setup.sql as in every test:
-- what they hold, and that every one goes in and comes back out.
\getenv abs_srcdir PG_ABS_SRCDIR
\set setup_file :abs_srcdir '/setup.sql'
\i :setup_file

SELECT type, level, key_id, count(*) AS values, count(DISTINCT plain) AS plaintexts
  FROM vectors GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;

-- Every vector is accepted by its type and prints back unchanged.
CREATE FUNCTION roundtrip_failures() RETURNS SETOF vectors LANGUAGE plpgsql AS $$
DECLARE
	v vectors;
	out text;
BEGIN
	FOR v IN SELECT * FROM vectors LOOP
		EXECUTE format('SELECT $1::enc_%s%s::text', v.type,
					   CASE WHEN v.level LIKE 'ORD%' THEN '_ord' ELSE '' END)
			INTO out USING v.ct;
		IF out IS DISTINCT FROM v.ct THEN
			RETURN NEXT v;
		END IF;
	END LOOP;
END $$;
SELECT count(*) AS roundtrip_failures FROM roundtrip_failures();

-- What the server sees of a value, and bytes per stored value.
SELECT type, level, min(pg_column_size(decode(ct, 'base64'))) AS min_bytes,
       max(pg_column_size(decode(ct, 'base64'))) AS max_bytes
  FROM vectors WHERE key_id = 1 GROUP BY 1, 2 ORDER BY 1, 2;
SELECT enc_describe(ct::enc_int4_ord) FROM vectors
 WHERE type = 'int4' AND level = 'ORD' AND key_id = 1 ORDER BY n LIMIT 1;

DROP FUNCTION roundtrip_failures();
