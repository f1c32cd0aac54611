/* src/test/encryption/test_tempcrypt/test_tempcrypt--1.0.sql */

\echo Use "CREATE EXTENSION test_tempcrypt" to load this file. \quit

-- nops random operations on one temporary file (in a file set if shared,
-- then also closed and re-opened at random), checked against a model;
-- raises an error at the first difference, returns a summary otherwise
CREATE FUNCTION test_tempcrypt_random(seed bigint, nops int, max_size int,
									  shared bool)
RETURNS text
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;
