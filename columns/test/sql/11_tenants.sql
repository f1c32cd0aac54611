-- Tenant-keyed values (design 13.13): the tenant vectors (proxy/cmd/
-- pgcipher-keys vectors -tenants) hold values of one column under tenant
-- t1's key (id 101), t2's (id 202) and the column key itself (id 1).
\getenv abs_srcdir PG_ABS_SRCDIR
\set setup_file :abs_srcdir '/setup.sql'
\i :setup_file
CREATE TEMP TABLE tvec (type text, level text, tenant text, key_id int, n int, plain text, ct text);
\set tenant_file :abs_srcdir '/data/tenant_vectors.csv'
COPY tvec FROM :'tenant_file' WITH (FORMAT csv, HEADER true);

-- The server parses the tenant flag and shows it.
SELECT tenant, type, level, enc_describe(ct::enc_int4) FROM tvec
 WHERE type = 'int4' AND plain = '1' ORDER BY n;
SELECT tenant, enc_describe(ct::enc_int8_ord) FROM tvec
 WHERE type = 'int8' AND plain = '7' ORDER BY n;

-- Equality within a tenant is the plaintext's; across tenants, never.
SELECT a.tenant AS ta, b.tenant AS tb,
       count(*) FILTER (WHERE (a.ct::enc_int4 = b.ct::enc_int4) <> (a.tenant = b.tenant AND a.plain = b.plain)) AS wrong,
       count(*) FILTER (WHERE a.ct::enc_int4 = b.ct::enc_int4) AS equal
  FROM tvec a JOIN tvec b USING (type, level)
 WHERE type = 'int4' AND a.tenant <> '-' AND b.tenant <> '-'
 GROUP BY 1, 2 ORDER BY 1, 2;

-- Order within a tenant is the plaintext's; across tenants, by key id.
SELECT a.tenant AS ta, b.tenant AS tb,
       count(*) FILTER (WHERE enc_int8_ord_cmp(a.ct::enc_int8_ord, b.ct::enc_int8_ord) <>
                        CASE WHEN a.key_id <> b.key_id THEN sign(a.key_id - b.key_id)
                             ELSE sign(a.plain::int8 - b.plain::int8) END) AS wrong,
       count(*) FILTER (WHERE a.ct::enc_int8_ord < b.ct::enc_int8_ord) AS less
  FROM tvec a JOIN tvec b USING (type, level)
 WHERE type = 'int8' AND a.tenant <> '-' AND b.tenant <> '-'
 GROUP BY 1, 2 ORDER BY 1, 2;

-- A substring search finds its own tenant's values only.
SELECT p.tenant, p.plain AS pattern, string_agg(v.tenant || ':' || v.plain, ' ' ORDER BY v.n) AS candidates
  FROM tvec p JOIN tvec v ON v.type = 'text' AND v.level = 'MATCH' AND v.tenant <> '-'
 WHERE p.level = 'PATTERN' AND p.tenant <> '-'
   AND v.ct::enc_text @> p.ct::enc_text
 GROUP BY 1, 2 ORDER BY 1, 2;

-- A tenant's value never compares with a value that is not a tenant's.
SELECT a.ct::enc_int4 = b.ct::enc_int4 FROM tvec a, tvec b
 WHERE a.type = 'int4' AND b.type = 'int4' AND a.tenant = '-' AND b.tenant = 't1' LIMIT 1;

-- A column bound tenant-keyed (public.tv.v, the vectors' label): its
-- CHECK takes any tenant's values, and a btree over several tenants
-- answers each tenant's ranges.
CREATE TABLE tv (id int, tenant text, v enc_int8_ord);
SELECT pgcipher.add_column_key('vk', 'main', decode(repeat('00', 61), 'hex')) AS vk \gset
SELECT pgcipher.encrypt_column('tv', 'v', 'vk', 'ORD', tenant_by => 'tenant');
SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'pgcipher_v' AND conrelid = 'tv'::regclass;
INSERT INTO tv SELECT n, tenant, ct::enc_int8_ord FROM tvec WHERE type = 'int8' AND tenant <> '-';
INSERT INTO tv SELECT n, tenant, ct::enc_int8_ord FROM tvec WHERE type = 'int8' AND tenant = '-' LIMIT 1;
CREATE INDEX ON tv (v);
SET enable_seqscan = off;
SELECT t.id, t.tenant FROM tv t, tvec q
 WHERE q.type = 'int8' AND q.tenant = 't2' AND q.plain = '0' AND t.v >= q.ct::enc_int8_ord
   AND t.v < (SELECT max(v) FROM tv)
 ORDER BY t.v;
SELECT t.id, t.tenant FROM tv t, tvec q
 WHERE q.type = 'int8' AND q.tenant = 't1' AND q.plain = '7' AND t.v = q.ct::enc_int8_ord;
RESET enable_seqscan;
SELECT tenant_by FROM pgcipher.encrypted_columns WHERE relid = 'tv'::regclass;

-- A column that is not tenant-keyed refuses tenants' values.
CREATE TABLE tv_plain (v enc_int4);
SELECT pgcipher.encrypt_column('tv_plain', 'v', 'vk', 'EQ');
INSERT INTO tv_plain SELECT ct::enc_int4 FROM tvec WHERE type = 'int4' AND tenant = 't1' LIMIT 1;
INSERT INTO tv_plain SELECT ct::enc_int4 FROM tvec WHERE type = 'int4' AND tenant = '-' LIMIT 1;

-- Bad bindings.
SELECT pgcipher.encrypt_column('tv_plain', 'v', 'vk', 'EQ', tenant_by => 'nosuch');
CREATE TABLE tv_bad (v enc_int4, w enc_int4);
SELECT pgcipher.encrypt_column('tv_bad', 'v', 'vk', 'EQ', tenant_by => 'w');
SELECT pgcipher.encrypt_column('tv_bad', 'v', 'vk', 'EQ', tenant_by => 'session');
SELECT tenant_by FROM pgcipher.encrypted_columns WHERE relid = 'tv_bad'::regclass;

-- Tenant keys: added under the keyring's epoch, one per tenant, ids unique.
SELECT pgcipher.add_tenant_key('t1', 101, 1, decode(repeat('01', 61), 'hex'));
SELECT pgcipher.add_tenant_key('t1', 102, 1, decode(repeat('01', 61), 'hex'));
SELECT pgcipher.add_tenant_key('t2', 101, 1, decode(repeat('01', 61), 'hex'));
SELECT pgcipher.add_tenant_key('t2', 202, 2, decode(repeat('01', 61), 'hex'));
SELECT pgcipher.add_tenant_key('t2', 202, 1, decode(repeat('01', 61), 'hex'));
\set VERBOSITY terse
SELECT pgcipher.add_tenant_key('t3', 303, 1, decode(repeat('01', 60), 'hex'));
SELECT pgcipher.add_tenant_key('', 303, 1, decode(repeat('01', 61), 'hex'));
\set VERBOSITY default
INSERT INTO pgcipher.shredded_tenants (key_id, tenant) VALUES (404, 't4');
SELECT pgcipher.add_tenant_key('t4', 404, 1, decode(repeat('01', 61), 'hex'));
SELECT tenant, key_id, epoch FROM pgcipher.tenant_keys ORDER BY key_id;

-- Only the database's owner changes them.
CREATE ROLE tv_other;
GRANT USAGE ON SCHEMA public TO tv_other;
SET ROLE tv_other;
SELECT pgcipher.add_tenant_key('t5', 505, 1, decode(repeat('01', 61), 'hex'));
DELETE FROM pgcipher.tenant_keys;
SELECT count(*) FROM pgcipher.tenant_keys;
RESET ROLE;
REVOKE USAGE ON SCHEMA public FROM tv_other;
DROP ROLE tv_other;

DELETE FROM pgcipher.tenant_keys;
DELETE FROM pgcipher.shredded_tenants;
DELETE FROM pgcipher.tenant_epoch;
DROP TABLE tv, tv_plain, tv_bad;
DELETE FROM pgcipher.column_keys WHERE key_name = 'vk';
