\set w_id random(1, :warehouses)
\set d_id random(1, 10)
\set threshold random(10, 20)
SELECT tpcc_slev(:w_id, :d_id, :threshold);
