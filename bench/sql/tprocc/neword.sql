\set w_id random(1, :warehouses)
\set d_id random(1, 10)
\set c_id ((random(0, 1023) | random(1, 3000)) + 259) % 3000 + 1
\set ol_cnt random(5, 15)
\set rbk random(1, 100)
SELECT tpcc_neword(:w_id, :d_id, :c_id, :ol_cnt, :rbk = 1, :warehouses);
