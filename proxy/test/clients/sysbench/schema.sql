-- schema.sql (sysbench) — sbtest1 as sysbench's oltp_common.lua creates it,
-- with k (EQ), c (ORD, for ORDER BY c and DISTINCT c) and pad (RND)
-- encrypted under the key k1 of ../schema.sql, and its plaintext twin
-- sbplain1.  In direct mode (-v direct=1) sbtest1 is a plaintext table.
\set ON_ERROR_STOP on
CREATE TABLE sbplain1 (id int PRIMARY KEY, k int NOT NULL DEFAULT 0,
  c text NOT NULL DEFAULT '', pad text NOT NULL DEFAULT '');
\if :direct
CREATE TABLE sbtest1 (LIKE sbplain1 INCLUDING ALL);
\else
CREATE TABLE sbtest1 (id serial PRIMARY KEY, k enc_int4 NOT NULL,
  c enc_text_ord NOT NULL, pad enc_text NOT NULL);
SELECT pgcipher.encrypt_column('sbtest1', 'k', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('sbtest1', 'c', 'k1', 'ORD');
SELECT pgcipher.encrypt_column('sbtest1', 'pad', 'k1', 'RND');
\endif
CREATE INDEX k_1 ON sbtest1 (k);
CREATE INDEX k_p ON sbplain1 (k);
