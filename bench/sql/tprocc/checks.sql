-- TPC-C consistency conditions (clause 3.3.2.1-4 and 6); each query returns
-- the number of warehouses or districts that violate it.
-- name|query
1|SELECT count(*) FROM warehouse w WHERE w_ytd <> (SELECT sum(d_ytd) FROM district WHERE d_w_id = w.w_id)
2|SELECT count(*) FROM district d WHERE d_next_o_id - 1 <> (SELECT max(o_id) FROM orders WHERE o_w_id = d.d_w_id AND o_d_id = d.d_id) OR d_next_o_id - 1 <> coalesce((SELECT max(no_o_id) FROM new_order WHERE no_w_id = d.d_w_id AND no_d_id = d.d_id), d_next_o_id - 1)
3|SELECT count(*) FROM (SELECT no_w_id, no_d_id FROM new_order GROUP BY 1, 2 HAVING max(no_o_id) - min(no_o_id) + 1 <> count(*)) x
4|SELECT count(*) FROM district d WHERE (SELECT sum(o_ol_cnt) FROM orders WHERE o_w_id = d.d_w_id AND o_d_id = d.d_id) <> (SELECT count(*) FROM order_line WHERE ol_w_id = d.d_w_id AND ol_d_id = d.d_id)
6|SELECT count(*) FROM (SELECT 1 FROM orders o JOIN order_line l ON l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id AND l.ol_o_id = o.o_id GROUP BY o.o_w_id, o.o_d_id, o.o_id, o.o_ol_cnt HAVING count(*) <> o.o_ol_cnt) x
