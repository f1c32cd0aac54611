-- pgcipher_columns: always-encrypted column types (docs/design.md, section 13).
-- This file is assembled by the Makefile from head.sql, one copy of
-- enc_type.sql.in per type (plus enc_eq.sql.in or enc_ord.sql.in) and
-- catalog.sql.

\echo Use "CREATE EXTENSION pgcipher_columns" to load this file. \quit

