/*
 * pgcipher_functions.sql
 *
 * pgcipher's SQL functions and its progress view, for a database whose
 * catalog stock PostgreSQL's initdb made: a data directory stock
 * PostgreSQL wrote, started by pgcipher's server, has the functions built
 * into the server but not declared in its catalog.  The definitions are
 * initdb's (pg_proc.dat, system_functions.sql and system_views.sql, marked
 * pgcipher), the functions in pg_catalog; a superuser runs this file in
 * each database that calls them (design 9.7):
 *
 *	 psql -d postgres -f "$(pg_config --sharedir)/pgcipher_functions.sql"
 *
 * Running it again, or in a database pgcipher's initdb made, changes
 * nothing.  TAP test 011 compares what it declares with initdb's catalog.
 *
 * src/backend/catalog/pgcipher_functions.sql
 */

CREATE OR REPLACE FUNCTION
  pg_catalog.pg_rotate_encryption_key(new_key_command text)
  RETURNS text STRICT VOLATILE PARALLEL UNSAFE LANGUAGE INTERNAL
  AS 'pg_rotate_encryption_key';

CREATE OR REPLACE FUNCTION
  pg_catalog.pg_rotate_encryption_key(new_key_command text, mode text)
  RETURNS text STRICT VOLATILE PARALLEL UNSAFE LANGUAGE INTERNAL
  AS 'pg_rotate_encryption_key_mode';

CREATE OR REPLACE FUNCTION
  pg_catalog.pg_rotate_data_keys(cost_delay integer DEFAULT 2, cost_limit integer DEFAULT 200)
  RETURNS text STRICT VOLATILE PARALLEL UNSAFE LANGUAGE INTERNAL
  AS 'pg_rotate_data_keys';

CREATE OR REPLACE FUNCTION
  pg_catalog.pg_encryption_pause()
  RETURNS void STRICT VOLATILE PARALLEL UNSAFE LANGUAGE INTERNAL
  AS 'pg_encryption_pause';

CREATE OR REPLACE FUNCTION
  pg_catalog.pg_encryption_resume(cost_delay integer DEFAULT NULL, cost_limit integer DEFAULT NULL)
  RETURNS void VOLATILE PARALLEL UNSAFE LANGUAGE INTERNAL
  AS 'pg_encryption_resume';

CREATE OR REPLACE FUNCTION
  pg_catalog.pg_stat_get_encryption_progress(OUT pid integer, OUT operation text,
    OUT phase text, OUT generation bigint, OUT datid oid, OUT relid oid,
    OUT fork text, OUT blocks_done bigint, OUT blocks_total bigint,
    OUT databases_done integer, OUT databases_total integer,
    OUT blocks_rewritten bigint, OUT cost_delay integer,
    OUT cost_limit integer)
  RETURNS record STRICT VOLATILE PARALLEL RESTRICTED LANGUAGE INTERNAL
  AS 'pg_stat_get_encryption_progress';

CREATE OR REPLACE FUNCTION
  pg_catalog.pg_encryption_drop_old_wal_key()
  RETURNS text STRICT VOLATILE PARALLEL UNSAFE LANGUAGE INTERNAL
  AS 'pg_encryption_drop_old_wal_key';

CREATE OR REPLACE FUNCTION
  pg_catalog.pg_enable_encryption(cipher text, key_command text DEFAULT NULL,
                       cost_delay integer DEFAULT 2, cost_limit integer DEFAULT 200,
                       key_mode text DEFAULT 'kek')
  RETURNS text VOLATILE PARALLEL UNSAFE LANGUAGE INTERNAL
  AS 'pg_enable_encryption';

CREATE OR REPLACE FUNCTION
  pg_catalog.pg_disable_encryption(cost_delay integer DEFAULT 2, cost_limit integer DEFAULT 200)
  RETURNS text VOLATILE PARALLEL UNSAFE LANGUAGE INTERNAL
  AS 'pg_disable_encryption';

-- superusers only (the functions check too)
REVOKE EXECUTE ON FUNCTION pg_catalog.pg_rotate_data_keys(integer, integer) FROM public;
REVOKE EXECUTE ON FUNCTION pg_catalog.pg_encryption_pause() FROM public;
REVOKE EXECUTE ON FUNCTION pg_catalog.pg_encryption_resume(integer, integer) FROM public;
REVOKE EXECUTE ON FUNCTION pg_catalog.pg_encryption_drop_old_wal_key() FROM public;
REVOKE EXECUTE ON FUNCTION pg_catalog.pg_enable_encryption(text, text, integer, integer, text) FROM public;
REVOKE EXECUTE ON FUNCTION pg_catalog.pg_disable_encryption(integer, integer) FROM public;

-- the view: pg_catalog's where initdb made it; otherwise in the search
-- path's first schema (public by default), since a view cannot go into
-- pg_catalog (allow_system_table_mods)
DO $$
BEGIN
  IF to_regclass('pg_catalog.pg_stat_progress_encryption') IS NULL THEN
    CREATE OR REPLACE VIEW pg_stat_progress_encryption AS
      SELECT
          P.pid, P.operation, P.phase, P.generation, P.datid, D.datname,
          P.relid, P.fork, P.blocks_done, P.blocks_total,
          P.databases_done, P.databases_total, P.blocks_rewritten,
          P.cost_delay, P.cost_limit
      FROM pg_catalog.pg_stat_get_encryption_progress() P
          LEFT JOIN pg_catalog.pg_database D ON P.datid = D.oid;
  END IF;
END
$$;
