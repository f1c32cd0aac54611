
-- The key and column catalog that the client side reads (design 13.8).
-- The server stores wrapped keys only; it cannot unwrap them.
CREATE SCHEMA pgcipher;
GRANT USAGE ON SCHEMA pgcipher TO PUBLIC;

CREATE TABLE pgcipher.column_keys (
	key_id int PRIMARY KEY CHECK (key_id > 0),	-- see add_column_key()
	key_name text NOT NULL UNIQUE,
	cmk_name text NOT NULL,
	wrapped_cek bytea NOT NULL CHECK (length(wrapped_cek) = 61),
	cmk_name_next text,			-- a second copy, wrapped by the next CMK,
	wrapped_cek_next bytea		-- while the CMK is rotated
		CHECK (length(wrapped_cek_next) = 61),
	owner name NOT NULL DEFAULT current_user,
	created timestamptz NOT NULL DEFAULT now(),
	CHECK ((cmk_name_next IS NULL) = (wrapped_cek_next IS NULL))
);
SELECT pg_catalog.pg_extension_config_dump('pgcipher.column_keys', '');

-- Columns are named, not numbered, so a dump and restore (which renumbers
-- columns after a dropped one) cannot attach a binding to another column.
CREATE TABLE pgcipher.encrypted_columns (
	relid regclass NOT NULL,
	attname name NOT NULL,
	key_id int NOT NULL REFERENCES pgcipher.column_keys,
	level text NOT NULL CHECK (level IN ('RND', 'EQ', 'ORD', 'MATCH')),
	label text NOT NULL,
	join_group text NOT NULL,
	PRIMARY KEY (relid, attname)
);
SELECT pg_catalog.pg_extension_config_dump('pgcipher.encrypted_columns', '');


-- Anyone may read both tables, add keys and bind columns of tables they
-- own; only the owner of a key or of a table (or a superuser) may change
-- its rows.  A trigger rather than row-level security, because pg_dump
-- refuses tables whose rows RLS would hide from it.
CREATE FUNCTION pgcipher.may_change_key(owner name) RETURNS bool
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
	SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = owner)
				THEN pg_has_role(owner, 'USAGE')
				ELSE (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) END
$$;
CREATE FUNCTION pgcipher.may_change_binding(relid oid) RETURNS bool
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
	SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_class WHERE oid = relid)
				THEN pg_has_role((SELECT relowner FROM pg_class WHERE oid = relid), 'USAGE')
				ELSE (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) END
$$;
CREATE FUNCTION pgcipher.check_catalog_write() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF TG_TABLE_NAME = 'column_keys' THEN
		IF (TG_OP <> 'INSERT' AND NOT pgcipher.may_change_key(OLD.owner)) OR
		   (TG_OP <> 'DELETE' AND NOT pgcipher.may_change_key(NEW.owner)) THEN
			RAISE EXCEPTION 'permission denied to change column key "%"', coalesce(OLD.key_name, NEW.key_name)
				USING ERRCODE = 'insufficient_privilege', HINT = 'Only its owner may change a key.';
		END IF;
	ELSIF (TG_OP <> 'INSERT' AND NOT pgcipher.may_change_binding(OLD.relid)) OR
		  (TG_OP <> 'DELETE' AND NOT pgcipher.may_change_binding(NEW.relid)) THEN
		RAISE EXCEPTION 'permission denied to change the encryption of %', coalesce(OLD.relid, NEW.relid)
			USING ERRCODE = 'insufficient_privilege', HINT = 'Only the owner of a table may bind its columns.';
	END IF;
	RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END;
END
$$;
CREATE TRIGGER check_write BEFORE INSERT OR UPDATE OR DELETE ON pgcipher.column_keys
	FOR EACH ROW EXECUTE FUNCTION pgcipher.check_catalog_write();
CREATE TRIGGER check_write BEFORE INSERT OR UPDATE OR DELETE ON pgcipher.encrypted_columns
	FOR EACH ROW EXECUTE FUNCTION pgcipher.check_catalog_write();
GRANT SELECT, INSERT, UPDATE, DELETE ON pgcipher.column_keys, pgcipher.encrypted_columns TO PUBLIC;

-- Bindings go with their table or column (a binding left behind would be
-- dumped as a bare OID and could attach to another table after a restore).
CREATE FUNCTION pgcipher.forget_dropped() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	DELETE FROM pgcipher.encrypted_columns e
	 USING pg_event_trigger_dropped_objects() d
	 WHERE e.relid = d.objid AND d.classid = 'pg_class'::regclass
	   AND (d.object_type = 'table' OR
			(d.object_type = 'table column' AND
			 e.attname = d.address_names[array_length(d.address_names, 1)]));
END
$$;
CREATE EVENT TRIGGER pgcipher_forget_dropped ON sql_drop
	EXECUTE FUNCTION pgcipher.forget_dropped();

-- Key ids are the next free number, not a sequence: a sequence would have
-- to be dumped with setval(), which needs a privilege on it that would let
-- anyone reset it.
CREATE FUNCTION pgcipher.add_column_key(key_name text, cmk_name text, wrapped_cek bytea)
RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	id int;
BEGIN
	LOCK TABLE pgcipher.column_keys IN SHARE ROW EXCLUSIVE MODE;
	INSERT INTO pgcipher.column_keys AS k (key_id, key_name, cmk_name, wrapped_cek)
	SELECT coalesce(max(key_id), 0) + 1, add_column_key.key_name, add_column_key.cmk_name,
		   add_column_key.wrapped_cek
	  FROM pgcipher.column_keys
	RETURNING k.key_id INTO id;
	RETURN id;
END
$$;

-- The join-group tag that every value of the group carries (design 13.3).
CREATE FUNCTION pgcipher.group_tag(join_group text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
	SELECT substr(sha256(convert_to('pgcipher group v1', 'UTF8') || '\x00'::bytea ||
						 convert_to(join_group, 'UTF8')), 1, 4)
$$;

CREATE FUNCTION pgcipher.encrypt_column(tbl regclass, col name, key_name text,
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
	INSERT INTO pgcipher.encrypted_columns VALUES (tbl, col, kid, lvl, lbl, grp);
	EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I CHECK (@extschema@.enc_binding_ok(%I, %s, %s, %L::bytea, %L))',
				   tbl, 'pgcipher_' || col, col, kid,
				   CASE lvl WHEN 'RND' THEN 1 WHEN 'EQ' THEN 2 WHEN 'ORD' THEN 3 ELSE 4 END,
				   pgcipher.group_tag(grp), lbl);
END
$$;

CREATE VIEW pgcipher.columns AS
SELECT n.nspname AS schema_name, c.relname AS table_name, e.attname AS column_name,
	   a.atttypid::regtype AS type, e.level, k.key_id, k.key_name, k.cmk_name,
	   k.wrapped_cek, k.cmk_name_next, k.wrapped_cek_next, e.label, e.join_group
  FROM pgcipher.encrypted_columns e
  JOIN pg_class c ON c.oid = e.relid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_attribute a ON a.attrelid = e.relid AND a.attname = e.attname AND NOT a.attisdropped
  JOIN pgcipher.column_keys k ON k.key_id = e.key_id;
GRANT SELECT ON pgcipher.columns TO PUBLIC;
