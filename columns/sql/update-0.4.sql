-- Decryption rights (design 13.12): which role may read (decrypt,
-- compare, compute) or only write (encrypt) each column.  The proxy
-- enforces them; each row carries an HMAC under a key derived from the
-- column master key, which the server does not have, so a row the server
-- forges or alters does not verify and the proxy refuses it.  The highest
-- serial of a column and role counts; a revocation is a row of access
-- 'none'.
CREATE TABLE pgcipher.column_rights (
	label text NOT NULL,
	role name NOT NULL,
	key_name text NOT NULL,
	access text NOT NULL CHECK (access IN ('none', 'write', 'read')),
	serial bigint NOT NULL,
	mac bytea NOT NULL CHECK (length(mac) = 32),
	PRIMARY KEY (label, role)
);
SELECT pg_catalog.pg_extension_config_dump('pgcipher.column_rights', '');

-- Only the owner of the column's table (or a superuser) may change the
-- column's rights: a row it cannot sign gains it nothing, but removing a
-- revocation must not be anyone's to do.  Rows of a label no column is
-- bound under protect nothing yet and may be written by anyone: pg_dump
-- restores this table before encrypted_columns, as the database's owner.
CREATE FUNCTION pgcipher.check_rights_write() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	r record;
BEGIN
	FOR r IN SELECT OLD.label AS label WHERE TG_OP <> 'INSERT'
			 UNION ALL SELECT NEW.label WHERE TG_OP <> 'DELETE' LOOP
		IF NOT coalesce((SELECT pgcipher.may_change_binding(e.relid)
						   FROM pgcipher.encrypted_columns e WHERE e.label = r.label LIMIT 1), true) THEN
			RAISE EXCEPTION 'permission denied to change the rights on column %', r.label
				USING ERRCODE = 'insufficient_privilege',
					  HINT = 'Only the owner of the column''s table may change its rights.';
		END IF;
	END LOOP;
	RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END;
END
$$;
CREATE TRIGGER check_write BEFORE INSERT OR UPDATE OR DELETE ON pgcipher.column_rights
	FOR EACH ROW EXECUTE FUNCTION pgcipher.check_rights_write();
GRANT SELECT, INSERT, UPDATE, DELETE ON pgcipher.column_rights TO PUBLIC;

-- set_column_right stores a grant that pgcipher-keys signed: the column
-- must be bound under that key and the role must exist; a serial not
-- above the stored one's is refused (an old grant sent again).
CREATE FUNCTION pgcipher.set_column_right(label text, role name, key_name text, access text,
										  serial bigint, mac bytea)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	prev bigint;
BEGIN
	IF access IS NULL OR access NOT IN ('none', 'write', 'read') THEN
		RAISE EXCEPTION 'unknown access "%"', access
			USING ERRCODE = 'invalid_parameter_value', HINT = 'A right is read, write or none.';
	END IF;
	IF mac IS NULL OR length(mac) <> 32 THEN
		RAISE EXCEPTION 'the right''s MAC is % bytes long, not 32', coalesce(length(mac), 0)
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Store the call pgcipher-keys grant or revoke printed, unchanged.';
	END IF;
	IF NOT EXISTS (SELECT 1 FROM pgcipher.encrypted_columns e
					 JOIN pgcipher.column_keys k ON k.key_id = e.key_id
					WHERE e.label = set_column_right.label AND k.key_name = set_column_right.key_name) THEN
		RAISE EXCEPTION 'no encrypted column % is bound to key "%"', label, key_name
			USING ERRCODE = 'undefined_object',
				  HINT = 'Give the column''s label (schema.table.column, as pgcipher.columns shows it) and its key''s name.';
	END IF;
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = set_column_right.role) THEN
		RAISE EXCEPTION 'role "%" does not exist', role
			USING ERRCODE = 'undefined_object', HINT = 'Create the role first, then grant it the right.';
	END IF;
	SELECT r.serial INTO prev FROM pgcipher.column_rights r
	 WHERE r.label = set_column_right.label AND r.role = set_column_right.role;
	IF prev >= serial THEN
		RAISE EXCEPTION 'a newer right of role "%" on column % is stored already', role, label
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Sign the grant again with pgcipher-keys: it takes a newer serial.';
	END IF;
	INSERT INTO pgcipher.column_rights AS r VALUES (label, role, key_name, access, serial, mac)
	ON CONFLICT ON CONSTRAINT column_rights_pkey DO UPDATE
	   SET key_name = EXCLUDED.key_name, access = EXCLUDED.access, serial = EXCLUDED.serial,
		   mac = EXCLUDED.mac;
END
$$;

-- A dropped column's rights go with its binding (a new column of that
-- name must not inherit them).
CREATE OR REPLACE FUNCTION pgcipher.forget_dropped() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	WITH gone AS (
		DELETE FROM pgcipher.encrypted_columns e
		 USING pg_event_trigger_dropped_objects() d
		 WHERE e.relid = d.objid AND d.classid = 'pg_class'::regclass
		   AND (d.object_type = 'table' OR
				(d.object_type = 'table column' AND
				 e.attname = d.address_names[array_length(d.address_names, 1)]))
		RETURNING e.label)
	DELETE FROM pgcipher.column_rights r USING gone WHERE r.label = gone.label;
END
$$;
