-- refuse.sql — statements the proxy must refuse on enc_t (SQLSTATE PC001,
-- "cannot be computed on encrypted columns"), never sent to the server;
-- the session stays usable, and a refusal inside a transaction aborts it
-- as a server error would.  test.sh checks every "result" line.
\set ON_ERROR_STOP off
SET TimeZone = 'UTC';
SELECT id FROM enc_t WHERE i4 + 1 = 2;
\echo result arith :SQLSTATE
SELECT tr FROM enc_t WHERE tr = 'PGCMARK-E-psql-rnd';
\echo result rnd_equality :SQLSTATE
SELECT id FROM enc_t WHERE i4 < 3;
\echo result eq_range :SQLSTATE
SELECT id FROM enc_t ORDER BY t;
\echo result eq_order_by :SQLSTATE
SELECT id FROM enc_t WHERE t LIKE 'PGCMARK-E-psql-like%';
\echo result eq_like :SQLSTATE
SELECT md5(t) FROM enc_t;
\echo result function :SQLSTATE
SELECT sum(t) FROM enc_t;
\echo result sum :SQLSTATE
UPDATE enc_t SET i4 = i4 + 1 RETURNING i4;
\echo result update_expr :SQLSTATE
INSERT INTO enc_t (id, i4) SELECT g, g FROM generate_series(900, 901) g;
\echo result insert_select :SQLSTATE
SELECT 1 AS still_usable;
\echo result usable :SQLSTATE
BEGIN;
INSERT INTO enc_t (id, t) VALUES (300, 'PGCMARK-E-psql-refusetx');
SELECT md5(t) FROM enc_t;
\echo result in_tx :SQLSTATE
SELECT 1;
\echo result aborted_tx :SQLSTATE
ROLLBACK;
SELECT count(*) AS n300 FROM enc_t WHERE id = 300 \gset
\echo result rolled_back :n300
