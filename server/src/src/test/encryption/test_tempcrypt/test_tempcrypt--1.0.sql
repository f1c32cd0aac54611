/* src/test/encryption/test_tempcrypt/test_tempcrypt--1.0.sql */

\echo Use "CREATE EXTENSION test_tempcrypt" to load this file. \quit

-- nops random operations on one file, checked against a model: kind is
-- private (a temporary file), shared (in a file set, also closed and
-- re-opened at random) or scratch (an extension's scratch file, mostly
-- appended to, also closed and re-opened); raises an error at the first
-- difference, returns a summary otherwise
CREATE FUNCTION test_tempcrypt_random(seed bigint, nops int, max_size int,
									  kind text)
RETURNS text
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

-- an extension's scratch file, as Citus writes its intermediate results:
-- base/pgsql_job_cache/NAME written in chunks of chunk bytes through
-- PathNameOpenFilePerm() with O_APPEND | O_TRUNC at tracked offsets, read
-- back through a virtual file descriptor by its absolute path and through
-- AllocateFile() (as COPY FROM a file reads it); raises an error at the
-- first difference, returns a summary saying whether the bytes on disk
-- are the data; with append_only, opens it with O_APPEND alone (refused
-- when encrypted)
CREATE FUNCTION test_tempcrypt_scratch(name text, data text, chunk int,
									   append_only bool DEFAULT false)
RETURNS text
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

-- len bytes written to a temporary file off a block boundary; returns the
-- memory TopMemoryContext holds (with its children) afterwards
CREATE FUNCTION test_tempcrypt_buffer(len int)
RETURNS bigint
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;
