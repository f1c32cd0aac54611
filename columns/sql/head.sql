-- pgcipher_columns: always-encrypted column types (docs/design.md, section 13).
-- This file is assembled by the Makefile from head.sql, one copy of
-- enc_type.sql.in per type (plus enc_eq.sql.in or enc_ord.sql.in) and
-- catalog.sql.

\echo Use "CREATE EXTENSION pgcipher_columns" to load this file. \quit

-- Selectivity estimators shared by every type: PostgreSQL's, behind a
-- check that the column's statistics hold values of the query's key and
-- join group (design 13.7).
CREATE FUNCTION enc_eqsel(internal, oid, internal, integer) RETURNS float8
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION enc_neqsel(internal, oid, internal, integer) RETURNS float8
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION enc_scalarltsel(internal, oid, internal, integer) RETURNS float8
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION enc_scalarlesel(internal, oid, internal, integer) RETURNS float8
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION enc_scalargtsel(internal, oid, internal, integer) RETURNS float8
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION enc_scalargesel(internal, oid, internal, integer) RETURNS float8
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION enc_eqjoinsel(internal, oid, internal, smallint, internal) RETURNS float8
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION enc_neqjoinsel(internal, oid, internal, smallint, internal) RETURNS float8
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;
