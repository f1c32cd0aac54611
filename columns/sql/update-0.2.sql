
-- Order format 2 (design 13.5b): each ORD column records the order
-- format(s) it holds; new ORD columns are bound at format 2, and a column
-- is moved from 1 to 2 online by pgcipher-keys reencrypt-column through
-- the proxy, which passes through 1+2 (values of format 1, or carrying
-- both), 12 (carrying both) and 2+1 (carrying both, or format 2).
ALTER TABLE pgcipher.encrypted_columns
	ADD COLUMN ore_format text CHECK (ore_format IN ('1', '1+2', '12', '2+1', '2'));
UPDATE pgcipher.encrypted_columns SET ore_format = '1' WHERE level = 'ORD';
ALTER TABLE pgcipher.encrypted_columns
	ADD CHECK ((level = 'ORD') = (ore_format IS NOT NULL));

-- The formats each state allows, as enc_binding_ok's bit mask (bit f for
-- enc_format() = f: 1 format 1, 2 format 2, 3 format 2 carrying 1).
CREATE FUNCTION pgcipher.ore_format_mask(fmt text) RETURNS int
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
	SELECT CASE fmt WHEN '1' THEN 2 WHEN '1+2' THEN 10 WHEN '12' THEN 8 WHEN '2+1' THEN 12 WHEN '2' THEN 4 END
$$;

-- Record a column's order format and put the CHECK that enforces it in
-- place, NOT VALID: ALTER TABLE ... VALIDATE CONSTRAINT checks the rows
-- already there without blocking writes.  Each step allows what the step
-- before it writes, so a client one step behind keeps working.
CREATE FUNCTION pgcipher.set_ore_format(tbl regclass, col name, fmt text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	b pgcipher.encrypted_columns;
	cname text := 'pgcipher_' || col;
BEGIN
	IF pgcipher.ore_format_mask(fmt) IS NULL THEN
		RAISE EXCEPTION 'unknown order format "%"', fmt
			USING ERRCODE = 'invalid_parameter_value', HINT = 'Use 1, 1+2, 12, 2+1 or 2.';
	END IF;
	SELECT * INTO b FROM pgcipher.encrypted_columns e WHERE e.relid = tbl AND e.attname = col;
	IF NOT FOUND OR b.level <> 'ORD' THEN
		RAISE EXCEPTION 'column "%" of table % is not encrypted at level ORD', col, tbl
			USING ERRCODE = 'wrong_object_type',
				  HINT = 'Order formats belong to ORD columns bound with pgcipher.encrypt_column().';
	END IF;
	UPDATE pgcipher.encrypted_columns e SET ore_format = fmt WHERE e.relid = tbl AND e.attname = col;
	EXECUTE format('ALTER TABLE %s DROP CONSTRAINT IF EXISTS %I', tbl, cname);
	EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I CHECK (@extschema@.enc_binding_ok(%I, %s, 3, %L::bytea, %L, %s)) NOT VALID',
				   tbl, cname, col, b.key_id, pgcipher.group_tag(b.join_group), b.label,
				   pgcipher.ore_format_mask(fmt));
END
$$;

-- encrypt_column binds new ORD columns at format 2.
CREATE OR REPLACE FUNCTION pgcipher.encrypt_column(tbl regclass, col name, key_name text,
										level text, join_group text DEFAULT NULL)
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
	INSERT INTO pgcipher.encrypted_columns VALUES (tbl, col, kid, lvl, lbl, grp,
		CASE WHEN lvl = 'ORD' THEN '2' END);
	EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I CHECK (@extschema@.enc_binding_ok(%I, %s, %s, %L::bytea, %L))',
				   tbl, 'pgcipher_' || col, col, kid,
				   CASE lvl WHEN 'RND' THEN 1 WHEN 'EQ' THEN 2 WHEN 'ORD' THEN 3 ELSE 4 END,
				   pgcipher.group_tag(grp), lbl);
	-- 0.2: a new ORD column holds order format 2 (design 13.5b); its
	-- CHECK is validated at once, as 0.1's was
	IF lvl = 'ORD' THEN
		PERFORM pgcipher.set_ore_format(tbl, col, '2');
		EXECUTE format('ALTER TABLE %s VALIDATE CONSTRAINT %I', tbl, 'pgcipher_' || col);
	END IF;
END
$$;

-- The move itself needs the column's key: the client side does it.
CREATE FUNCTION pgcipher.reencrypt_column(tbl regclass, col name)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	RAISE EXCEPTION 'the server cannot re-encrypt column "%" of table %: it has no key', col, tbl
		USING ERRCODE = 'feature_not_supported',
			  HINT = 'Run pgcipher-keys reencrypt-column through pgcipher-proxy; it moves the column to order format 2 online.';
END
$$;

CREATE OR REPLACE VIEW pgcipher.columns AS
SELECT n.nspname AS schema_name, c.relname AS table_name, e.attname AS column_name,
	   a.atttypid::regtype AS type, e.level, k.key_id, k.key_name, k.cmk_name,
	   k.wrapped_cek, k.cmk_name_next, k.wrapped_cek_next, e.label, e.join_group,
	   e.ore_format
  FROM pgcipher.encrypted_columns e
  JOIN pg_class c ON c.oid = e.relid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_attribute a ON a.attrelid = e.relid AND a.attname = e.attname AND NOT a.attisdropped
  JOIN pgcipher.column_keys k ON k.key_id = e.key_id;
