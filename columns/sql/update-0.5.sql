
-- Tenant keys (design 13.13): a column bound tenant-keyed holds each
-- tenant's values under a key of that tenant (flag 0x08 and the tenant
-- key's id in each value), so that destroying one tenant's key makes its
-- values undecryptable wherever they are: the table, the WAL, archives,
-- backups, replicas.  The tenant comes from the session's setting
-- pgcipher.tenant (tenant_by 'session') or from a plaintext column of the
-- row (tenant_by names it).  The binding's CHECK takes key id 0: any
-- tenant key, of the column's type, level and join group.
ALTER TABLE pgcipher.encrypted_columns ADD COLUMN tenant_by text;

-- Each tenant's key, wrapped by the client under the tenant keyring key of
-- an epoch, which the server never sees and which shredding destroys.
CREATE TABLE pgcipher.tenant_keys (
	key_id int PRIMARY KEY CHECK (key_id > 0),
	tenant text NOT NULL UNIQUE CHECK (tenant <> ''),
	epoch int NOT NULL CHECK (epoch > 0),
	wrapped bytea NOT NULL CHECK (length(wrapped) = 61),
	created timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('pgcipher.tenant_keys', '');

-- The tenant keys destroyed: the client says "destroyed", not "unknown".
CREATE TABLE pgcipher.shredded_tenants (
	key_id int PRIMARY KEY,
	tenant text NOT NULL,
	shredded timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('pgcipher.shredded_tenants', '');

-- The keyring epoch every tenant key is wrapped under: one row, made by
-- the first tenant key; the shredding moves it on with the keys (one
-- transaction).  A key of another epoch is refused, however it is written:
-- it would be lost when its epoch is destroyed.
CREATE TABLE pgcipher.tenant_epoch (
	epoch int NOT NULL CHECK (epoch > 0),
	one bool PRIMARY KEY DEFAULT true CHECK (one)
);
SELECT pg_catalog.pg_extension_config_dump('pgcipher.tenant_epoch', '');

-- Tenants are the database's: its owner (or a superuser) changes them.
CREATE FUNCTION pgcipher.check_tenants_write() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF NOT pg_has_role((SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE') THEN
		RAISE EXCEPTION 'permission denied to change the tenant keys of database "%"', current_database()
			USING ERRCODE = 'insufficient_privilege',
				  HINT = 'Only the owner of the database (or a superuser) adds and shreds tenants.';
	END IF;
	RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END;
END
$$;
CREATE TRIGGER check_write BEFORE INSERT OR UPDATE OR DELETE ON pgcipher.tenant_keys
	FOR EACH ROW EXECUTE FUNCTION pgcipher.check_tenants_write();
CREATE TRIGGER check_write BEFORE INSERT OR UPDATE OR DELETE ON pgcipher.shredded_tenants
	FOR EACH ROW EXECUTE FUNCTION pgcipher.check_tenants_write();
CREATE TRIGGER check_write BEFORE INSERT OR UPDATE OR DELETE ON pgcipher.tenant_epoch
	FOR EACH ROW EXECUTE FUNCTION pgcipher.check_tenants_write();
GRANT SELECT, INSERT, UPDATE, DELETE ON pgcipher.tenant_keys, pgcipher.shredded_tenants,
	pgcipher.tenant_epoch TO PUBLIC;

-- Every tenant key written is under the current epoch.  FOR SHARE waits
-- for a shredding that moves the epoch on and reads its outcome (READ
-- COMMITTED), or fails (a snapshot older than it: REPEATABLE READ).  The
-- first key sets the epoch.
CREATE FUNCTION pgcipher.check_tenant_epoch() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	current_epoch int;
BEGIN
	SELECT e.epoch INTO current_epoch FROM pgcipher.tenant_epoch e FOR SHARE;
	IF current_epoch IS NULL THEN
		INSERT INTO pgcipher.tenant_epoch (epoch) VALUES (NEW.epoch) ON CONFLICT DO NOTHING;
		SELECT e.epoch INTO current_epoch FROM pgcipher.tenant_epoch e FOR SHARE;
	END IF;
	IF NEW.epoch <> current_epoch THEN
		RAISE EXCEPTION 'tenant key wrapped under keyring epoch %, the tenant keys are under epoch %', NEW.epoch, current_epoch
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Use the newest tenant keyring (a shredding may have moved it on: SIGHUP the proxy), or finish a shredding with pgcipher-keys shred-tenant.';
	END IF;
	RETURN NEW;
END
$$;
CREATE TRIGGER check_epoch BEFORE INSERT OR UPDATE OF epoch ON pgcipher.tenant_keys
	FOR EACH ROW EXECUTE FUNCTION pgcipher.check_tenant_epoch();

-- A tenant's key, as pgcipher-keys add-tenant prints it: the key id is the
-- client's (it is bound into the wrapping), the epoch the keyring's newest,
-- which must be tenant_epoch's.
CREATE FUNCTION pgcipher.add_tenant_key(tenant text, key_id int, epoch int, wrapped bytea)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	LOCK TABLE pgcipher.tenant_keys IN SHARE ROW EXCLUSIVE MODE;
	IF EXISTS (SELECT 1 FROM pgcipher.tenant_keys t WHERE t.tenant = add_tenant_key.tenant) THEN
		RAISE EXCEPTION 'tenant "%" has a key already', tenant
			USING ERRCODE = 'duplicate_object',
				  HINT = 'A tenant has one key; pgcipher-keys shred-tenant destroys it.';
	END IF;
	IF EXISTS (SELECT 1 FROM pgcipher.tenant_keys t WHERE t.key_id = add_tenant_key.key_id) OR
	   EXISTS (SELECT 1 FROM pgcipher.shredded_tenants s WHERE s.key_id = add_tenant_key.key_id) THEN
		RAISE EXCEPTION 'tenant key id % is taken', key_id
			USING ERRCODE = 'duplicate_object', HINT = 'Run pgcipher-keys add-tenant again: it draws another.';
	END IF;
	-- (the epoch: checked by the trigger check_epoch)
	INSERT INTO pgcipher.tenant_keys (key_id, tenant, epoch, wrapped)
	VALUES (key_id, tenant, epoch, wrapped);
END
$$;

-- encrypt_column gains tenant_by; calls without it bind as before.
DROP FUNCTION pgcipher.encrypt_column(regclass, name, text, text, text, bool);
CREATE FUNCTION pgcipher.encrypt_column(tbl regclass, col name, key_name text,
										level text, join_group text DEFAULT NULL,
										case_insensitive bool DEFAULT false,
										tenant_by text DEFAULT NULL)
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
	-- the row's tenant: a plaintext column of the same table, of a type
	-- whose text the client can tell from what it is given (design 13.13)
	IF tenant_by IS NOT NULL AND tenant_by <> 'session' AND NOT EXISTS (
		SELECT 1 FROM pg_attribute a
		 WHERE a.attrelid = tbl AND a.attname = tenant_by AND a.attnum > 0 AND NOT a.attisdropped
		   AND a.atttypid IN ('text'::regtype, 'varchar'::regtype, 'int2'::regtype, 'int4'::regtype,
							  'int8'::regtype, 'uuid'::regtype)) THEN
		RAISE EXCEPTION 'tenant_by "%" is neither ''session'' nor a column of table % of type text, varchar, an integer or uuid', tenant_by, tbl
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Name the column holding each row''s tenant, or ''session'' for the setting pgcipher.tenant.';
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
											ore_format, case_insensitive, tenant_by)
	VALUES (tbl, col, kid, lvl, lbl, grp, CASE WHEN lvl = 'ORD' THEN '2' END, case_insensitive,
			tenant_by);
	-- key id 0: any tenant's key (13.13)
	EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I CHECK (@extschema@.enc_binding_ok(%I, %s, %s, %L::bytea, %L%s))',
				   tbl, 'pgcipher_' || col, col, CASE WHEN tenant_by IS NULL THEN kid ELSE 0 END,
				   CASE lvl WHEN 'RND' THEN 1 WHEN 'EQ' THEN 2 WHEN 'ORD' THEN 3 ELSE 4 END,
				   pgcipher.group_tag(grp), lbl, CASE WHEN case_insensitive THEN ', 1' ELSE '' END);
	-- a new ORD column holds order format 2 (design 13.5b)
	IF lvl = 'ORD' THEN
		PERFORM pgcipher.set_ore_format(tbl, col, '2');
		EXECUTE format('ALTER TABLE %s VALIDATE CONSTRAINT %I', tbl, 'pgcipher_' || col);
	END IF;
END
$$;

-- set_ore_format puts a tenant-keyed column's CHECK back with key id 0.
CREATE OR REPLACE FUNCTION pgcipher.set_ore_format(tbl regclass, col name, fmt text)
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
				   tbl, cname, col, CASE WHEN b.tenant_by IS NULL THEN b.key_id ELSE 0 END,
				   pgcipher.group_tag(b.join_group), b.label, pgcipher.ore_format_mask(fmt));
END
$$;

CREATE OR REPLACE VIEW pgcipher.columns AS
SELECT n.nspname AS schema_name, c.relname AS table_name, e.attname AS column_name,
	   a.atttypid::regtype AS type, e.level, k.key_id, k.key_name, k.cmk_name,
	   k.wrapped_cek, k.cmk_name_next, k.wrapped_cek_next, e.label, e.join_group,
	   e.ore_format, e.case_insensitive, e.tenant_by
  FROM pgcipher.encrypted_columns e
  JOIN pg_class c ON c.oid = e.relid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_attribute a ON a.attrelid = e.relid AND a.attname = e.attname AND NOT a.attisdropped
  JOIN pgcipher.column_keys k ON k.key_id = e.key_id;
