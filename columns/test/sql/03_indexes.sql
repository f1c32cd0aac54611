-- btree and hash indexes on ciphertext, and the plans that use them.
\getenv abs_srcdir PG_ABS_SRCDIR
\set setup_file :abs_srcdir '/setup.sql'
\i :setup_file
CREATE TABLE accounts (id int, balance enc_int8_ord, owner enc_text, plain_balance int8);
INSERT INTO accounts
SELECT n, ct::enc_int8_ord, NULL, plain::int8 FROM vectors
 WHERE type = 'int8' AND level = 'ORD' AND key_id = 1;
-- 20 owners (10 plaintexts, each encrypted twice) for the first 20 accounts
UPDATE accounts a SET owner = o.ct::enc_text
  FROM (SELECT row_number() OVER (ORDER BY n) AS rn, ct FROM vectors
         WHERE type = 'text' AND level = 'EQ' AND key_id = 1) o,
       (SELECT id, row_number() OVER (ORDER BY id) AS rn FROM accounts) x
 WHERE x.id = a.id AND x.rn = o.rn;
CREATE INDEX accounts_balance ON accounts (balance);
CREATE INDEX accounts_owner ON accounts USING hash (owner);
CREATE INDEX accounts_owner_btree ON accounts (owner);
ANALYZE accounts;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SET plan_cache_mode = force_generic_plan;

SELECT balance::text AS b5 FROM accounts WHERE plain_balance = 255 LIMIT 1 \gset
SELECT balance::text AS b6 FROM accounts WHERE plain_balance = 65536 LIMIT 1 \gset

PREPARE eq(enc_int8_ord) AS SELECT plain_balance FROM accounts WHERE balance = $1 ORDER BY id;
EXPLAIN (COSTS OFF) EXECUTE eq(:'b5');
EXECUTE eq(:'b5');

PREPARE lt(enc_int8_ord) AS SELECT plain_balance FROM accounts WHERE balance < $1 ORDER BY plain_balance;
EXPLAIN (COSTS OFF) EXECUTE lt(:'b5');
EXECUTE lt(:'b5');
SELECT count(*) = (SELECT count(*) FROM accounts WHERE plain_balance < 255) AS lt_right
  FROM accounts WHERE balance < :'b5';

PREPARE between_(enc_int8_ord, enc_int8_ord) AS
  SELECT plain_balance FROM accounts WHERE balance BETWEEN $1 AND $2 ORDER BY plain_balance;
EXPLAIN (COSTS OFF) EXECUTE between_(:'b5', :'b6');
EXECUTE between_(:'b5', :'b6');

PREPARE top3 AS SELECT plain_balance FROM accounts ORDER BY balance DESC LIMIT 3;
EXPLAIN (COSTS OFF) EXECUTE top3;
EXECUTE top3;

SELECT owner::text AS o1 FROM accounts WHERE owner IS NOT NULL ORDER BY id LIMIT 1 \gset
PREPARE by_owner(enc_text) AS SELECT count(*) FROM accounts WHERE owner = $1;
DROP INDEX accounts_owner_btree;
EXPLAIN (COSTS OFF) EXECUTE by_owner(:'o1');
EXECUTE by_owner(:'o1');

-- Hash and merge-free joins on EQ columns; ORDER BY an EQ column has no
-- meaning and fails.
RESET enable_seqscan;
RESET enable_bitmapscan;
SELECT count(*) AS self_join FROM accounts a JOIN accounts b ON a.owner = b.owner;
SELECT owner FROM accounts ORDER BY owner;
SELECT max(owner) FROM accounts;

DROP TABLE accounts;
