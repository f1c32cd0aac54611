-- TPROC-C initial population for :warehouses warehouses, following the
-- TPC-C specification's cardinalities (clause 4.3.3.1), generated in SQL.
INSERT INTO item
  SELECT i, 1 + floor(random() * 10000)::int, tpcc_astring(14, 24), 1 + floor(random() * 9900) / 100.0,
         CASE WHEN random() < 0.1 THEN 'ORIGINAL' || tpcc_astring(18, 42) ELSE tpcc_astring(26, 50) END
  FROM generate_series(1, 100000) i;
INSERT INTO warehouse
  SELECT w, tpcc_astring(6, 10), tpcc_astring(10, 20), tpcc_astring(10, 20), tpcc_astring(10, 20),
         'CA', '123451111', floor(random() * 2000) / 10000.0, 300000.00
  FROM generate_series(1, :warehouses) w;
INSERT INTO district
  SELECT d, w, tpcc_astring(6, 10), tpcc_astring(10, 20), tpcc_astring(10, 20), tpcc_astring(10, 20),
         'CA', '123451111', floor(random() * 2000) / 10000.0, 30000.00, 3001
  FROM generate_series(1, :warehouses) w, generate_series(1, 10) d;
INSERT INTO customer
  SELECT c, d, w, tpcc_astring(8, 16), 'OE',
         CASE WHEN c <= 1000 THEN tpcc_lastname(c - 1) ELSE tpcc_lastname(tpcc_nurand(255, 0, 999, 157)) END,
         tpcc_astring(10, 20), tpcc_astring(10, 20), tpcc_astring(10, 20), 'CA', '123451111',
         lpad((floor(random() * 1e16))::bigint::text, 16, '0'), now(),
         CASE WHEN random() < 0.1 THEN 'BC' ELSE 'GC' END, 50000.00, floor(random() * 5000) / 10000.0,
         -10.00, 10.00, 1, 0, tpcc_astring(300, 500)
  FROM generate_series(1, :warehouses) w, generate_series(1, 10) d, generate_series(1, 3000) c;
INSERT INTO history
  SELECT c_id, c_d_id, c_w_id, c_d_id, c_w_id, now(), 10.00, tpcc_astring(12, 24) FROM customer;
INSERT INTO stock
  SELECT i, w, 10 + floor(random() * 91)::int,
         tpcc_astring(24, 24), tpcc_astring(24, 24), tpcc_astring(24, 24), tpcc_astring(24, 24), tpcc_astring(24, 24),
         tpcc_astring(24, 24), tpcc_astring(24, 24), tpcc_astring(24, 24), tpcc_astring(24, 24), tpcc_astring(24, 24),
         0, 0, 0, CASE WHEN random() < 0.1 THEN 'ORIGINAL' || tpcc_astring(18, 42) ELSE tpcc_astring(26, 50) END
  FROM generate_series(1, :warehouses) w, generate_series(1, 100000) i;
-- 3000 orders per district, customers in a random permutation; the last
-- 900 undelivered (in new_order, no carrier, no delivery dates)
INSERT INTO orders
  SELECT o, d, w, row_number() OVER (PARTITION BY w, d ORDER BY random()), now(),
         CASE WHEN o < 2101 THEN 1 + floor(random() * 10)::int END, 5 + floor(random() * 11)::int, 1
  FROM generate_series(1, :warehouses) w, generate_series(1, 10) d, generate_series(1, 3000) o;
INSERT INTO order_line
  SELECT o_id, o_d_id, o_w_id, n, 1 + floor(random() * 100000)::int, o_w_id,
         CASE WHEN o_id < 2101 THEN o_entry_d END, 5,
         CASE WHEN o_id < 2101 THEN 0 ELSE floor(random() * 999999) / 100.0 + 0.01 END, tpcc_astring(24, 24)
  FROM orders, generate_series(1, 15) n WHERE n <= o_ol_cnt;
INSERT INTO new_order SELECT o_id, o_d_id, o_w_id FROM orders WHERE o_id >= 2101;
CREATE INDEX customer_by_name ON customer (c_w_id, c_d_id, c_last, c_first);
CREATE INDEX orders_by_customer ON orders (o_w_id, o_d_id, o_c_id, o_id);
VACUUM ANALYZE;
