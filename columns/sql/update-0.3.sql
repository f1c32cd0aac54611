
-- Case-insensitive MATCH (design 13.5a): a MATCH column bound with
-- case_insensitive => true holds Bloom filters of its values' case-folded
-- text (flag 0x04 in each value and query), so that the client can serve
-- ILIKE and upper()/lower() searches; its CHECK names the variant.
ALTER TABLE pgcipher.encrypted_columns
	ADD COLUMN case_insensitive bool NOT NULL DEFAULT false;
ALTER TABLE pgcipher.encrypted_columns
	ADD CHECK (NOT case_insensitive OR level = 'MATCH');

CREATE FUNCTION enc_binding_ok(enc_text, int4, int4, bytea, text, int4) RETURNS bool
	AS 'MODULE_PATHNAME', 'enc_binding_ok' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- encrypt_column gains its last argument; calls without it bind as before.
DROP FUNCTION pgcipher.encrypt_column(regclass, name, text, text, text);
CREATE FUNCTION pgcipher.encrypt_column(tbl regclass, col name, key_name text,
										level text, join_group text DEFAULT NULL,
										case_insensitive bool DEFAULT false)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	col_type name;
	kid int;
	lvl text := upper(level);
	lbl text;
	grp text;
BEGIN
	SELECT t.typname INTO col_type
	  FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
	 WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped
	   AND t.typnamespace = '@extschema@'::regnamespace AND t.typname ~ '^enc_';
	IF NOT FOUND THEN
		RAISE EXCEPTION 'column "%" of table % is not of an encrypted type', col, tbl
			USING ERRCODE = 'wrong_object_type',
				  HINT = 'Declare the column as enc_int4, enc_text, enc_int8_ord, ...';
	END IF;
	IF lvl NOT IN ('RND', 'EQ', 'ORD', 'MATCH') THEN
		RAISE EXCEPTION 'unknown encryption level "%"', level
			USING ERRCODE = 'invalid_parameter_value', HINT = 'Use RND, EQ, ORD or MATCH.';
	END IF;
	IF lvl = 'MATCH' AND col_type <> 'enc_text' THEN
		RAISE EXCEPTION 'level MATCH does not fit column "%" of type %', col, col_type
			USING ERRCODE = 'invalid_parameter_value', HINT = 'Only enc_text columns have level MATCH.';
	END IF;
	IF (lvl = 'ORD') <> (col_type ~ '_ord$') THEN
		RAISE EXCEPTION 'level % does not fit column "%" of type %', lvl, col, col_type
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Types enc_T_ord hold level ORD; types enc_T hold RND or EQ (and enc_text MATCH).';
	END IF;
	IF case_insensitive AND lvl <> 'MATCH' THEN
		RAISE EXCEPTION 'level % cannot be case-insensitive', lvl
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Only level MATCH searches case-insensitively; bind the column MATCH, or leave case_insensitive false.';
	END IF;
	SELECT k.key_id INTO kid FROM pgcipher.column_keys k WHERE k.key_name = encrypt_column.key_name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'column encryption key "%" does not exist', key_name
			USING ERRCODE = 'undefined_object',
				  HINT = 'Create it with pgcipher-keys new-cek and pgcipher.add_column_key().';
	END IF;
	-- quoted where needed, so that no two columns can share a label
	SELECT format('%I.%I.%I', n.nspname, c.relname, col) INTO lbl
	  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl;
	grp := coalesce(join_group, lbl);
	INSERT INTO pgcipher.encrypted_columns (relid, attname, key_id, level, label, join_group,
											ore_format, case_insensitive)
	VALUES (tbl, col, kid, lvl, lbl, grp, CASE WHEN lvl = 'ORD' THEN '2' END, case_insensitive);
	EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I CHECK (@extschema@.enc_binding_ok(%I, %s, %s, %L::bytea, %L%s))',
				   tbl, 'pgcipher_' || col, col, kid,
				   CASE lvl WHEN 'RND' THEN 1 WHEN 'EQ' THEN 2 WHEN 'ORD' THEN 3 ELSE 4 END,
				   pgcipher.group_tag(grp), lbl, CASE WHEN case_insensitive THEN ', 1' ELSE '' END);
	-- 0.2: a new ORD column holds order format 2 (design 13.5b); its
	-- CHECK is validated at once, as 0.1's was
	IF lvl = 'ORD' THEN
		PERFORM pgcipher.set_ore_format(tbl, col, '2');
		EXECUTE format('ALTER TABLE %s VALIDATE CONSTRAINT %I', tbl, 'pgcipher_' || col);
	END IF;
END
$$;

CREATE OR REPLACE VIEW pgcipher.columns AS
SELECT n.nspname AS schema_name, c.relname AS table_name, e.attname AS column_name,
	   a.atttypid::regtype AS type, e.level, k.key_id, k.key_name, k.cmk_name,
	   k.wrapped_cek, k.cmk_name_next, k.wrapped_cek_next, e.label, e.join_group,
	   e.ore_format, e.case_insensitive
  FROM pgcipher.encrypted_columns e
  JOIN pg_class c ON c.oid = e.relid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_attribute a ON a.attrelid = e.relid AND a.attname = e.attname AND NOT a.attisdropped
  JOIN pgcipher.column_keys k ON k.key_id = e.key_id;
