\set w_id random(1, :warehouses)
\set carrier random(1, 10)
SELECT tpcc_delivery(:w_id, :carrier);
