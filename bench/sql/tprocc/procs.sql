-- TPROC-C's five transactions as PL/pgSQL functions (as HammerDB's
-- PostgreSQL driver does), following TPC-C clause 2.  Parameters the
-- specification has the terminal choose are chosen by the pgbench scripts;
-- the item list of a new order is drawn here.

-- New-Order (clause 2.4): 1% roll back on an unused item number.
CREATE FUNCTION tpcc_neword(p_w int, p_d int, p_c int, p_ol_cnt int, p_rbk boolean, p_warehouses int)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  items int[]; supply int[]; qty int[];
  v_o_id int; v_w_tax numeric; v_d_tax numeric; v_disc numeric; v_all_local int := 1;
  v_price numeric; v_dist char(24); r record;
BEGIN
  FOR i IN 1..p_ol_cnt LOOP
    items[i] := tpcc_nurand(8191, 1, 100000, 7911);
    supply[i] := p_w;
    IF p_warehouses > 1 AND random() < 0.01 THEN
      supply[i] := 1 + (p_w + floor(random() * (p_warehouses - 1))::int) % p_warehouses;
      v_all_local := 0;
    END IF;
    qty[i] := 1 + floor(random() * 10)::int;
  END LOOP;
  IF p_rbk THEN
    items[p_ol_cnt] := 100001;   -- not an item: the transaction rolls back
  END IF;
  BEGIN
    SELECT w_tax INTO v_w_tax FROM warehouse WHERE w_id = p_w;
    UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = p_w AND d_id = p_d
      RETURNING d_next_o_id - 1, d_tax INTO v_o_id, v_d_tax;
    SELECT c_discount INTO v_disc FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = p_c;
    INSERT INTO orders VALUES (v_o_id, p_d, p_w, p_c, now(), NULL, p_ol_cnt, v_all_local);
    INSERT INTO new_order VALUES (v_o_id, p_d, p_w);
    -- stock rows in (warehouse, item) order, so concurrent new orders cannot deadlock
    FOR r IN SELECT t.item, t.sup, t.q, t.n FROM unnest(items, supply, qty) WITH ORDINALITY AS t(item, sup, q, n)
             ORDER BY t.sup, t.item LOOP
      SELECT i_price INTO v_price FROM item WHERE i_id = r.item;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'tpcc_rollback';
      END IF;
      UPDATE stock SET s_quantity = CASE WHEN s_quantity - r.q >= 10 THEN s_quantity - r.q ELSE s_quantity - r.q + 91 END,
                       s_ytd = s_ytd + r.q, s_order_cnt = s_order_cnt + 1,
                       s_remote_cnt = s_remote_cnt + (r.sup <> p_w)::int
        WHERE s_w_id = r.sup AND s_i_id = r.item
        RETURNING CASE p_d WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03 WHEN 4 THEN s_dist_04
                           WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06 WHEN 7 THEN s_dist_07 WHEN 8 THEN s_dist_08
                           WHEN 9 THEN s_dist_09 ELSE s_dist_10 END INTO v_dist;
      INSERT INTO order_line VALUES (v_o_id, p_d, p_w, r.n, r.item, r.sup, NULL, r.q, r.q * v_price, v_dist);
    END LOOP;
    RETURN 1;
  EXCEPTION WHEN raise_exception THEN
    RETURN 0;   -- everything above is rolled back with the block
  END;
END $$;

-- Payment and Order-Status by last name (clause 2.5.2.2): the customer at
-- position ceil(n / 2) of those with that name, sorted by first name.
CREATE FUNCTION tpcc_customer_by_name(p_w int, p_d int, p_name_n int, p_default int)
RETURNS int LANGUAGE sql STABLE AS $$
  SELECT coalesce(ids[(array_length(ids, 1) + 1) / 2], p_default)
  FROM (SELECT array_agg(c_id ORDER BY c_first) AS ids FROM customer
        WHERE c_w_id = p_w AND c_d_id = p_d AND c_last = tpcc_lastname(p_name_n)) x
$$;

-- Payment (clause 2.5): 60% by last name, 15% for a customer of another warehouse.
CREATE FUNCTION tpcc_payment(p_w int, p_d int, p_c int, p_by_name boolean, p_name_n int, p_amount numeric, p_warehouses int)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  v_c_w int := p_w; v_c_d int := p_d; v_c int := p_c;
BEGIN
  IF p_warehouses > 1 AND random() < 0.15 THEN
    v_c_w := 1 + (p_w + floor(random() * (p_warehouses - 1))::int) % p_warehouses;
    v_c_d := 1 + floor(random() * 10)::int;
  END IF;
  UPDATE warehouse SET w_ytd = w_ytd + p_amount WHERE w_id = p_w;
  UPDATE district SET d_ytd = d_ytd + p_amount WHERE d_w_id = p_w AND d_id = p_d;
  IF p_by_name THEN
    v_c := tpcc_customer_by_name(v_c_w, v_c_d, p_name_n, p_c);
  END IF;
  UPDATE customer SET c_balance = c_balance - p_amount, c_ytd_payment = c_ytd_payment + p_amount,
                      c_payment_cnt = c_payment_cnt + 1,
                      c_data = CASE WHEN c_credit = 'BC'
                                    THEN substr(format('%s %s %s %s %s %s|', v_c, v_c_d, v_c_w, p_d, p_w, p_amount) || c_data, 1, 500)
                                    ELSE c_data END
    WHERE c_w_id = v_c_w AND c_d_id = v_c_d AND c_id = v_c;
  INSERT INTO history VALUES (v_c, v_c_d, v_c_w, p_d, p_w, now(), p_amount, 'payment');
  RETURN 1;
END $$;

-- Order-Status (clause 2.6): read-only.
CREATE FUNCTION tpcc_ostat(p_w int, p_d int, p_c int, p_by_name boolean, p_name_n int)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  v_c int := p_c; v_o int; v_lines int;
BEGIN
  IF p_by_name THEN
    v_c := tpcc_customer_by_name(p_w, p_d, p_name_n, p_c);
  END IF;
  PERFORM c_balance, c_first, c_middle, c_last FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = v_c;
  SELECT o_id INTO v_o FROM orders WHERE o_w_id = p_w AND o_d_id = p_d AND o_c_id = v_c ORDER BY o_id DESC LIMIT 1;
  SELECT count(*) INTO v_lines FROM order_line WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id = v_o;
  RETURN v_lines;
END $$;

-- Delivery (clause 2.7): the oldest undelivered order of each district.
CREATE FUNCTION tpcc_delivery(p_w int, p_carrier int)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  v_o int; v_c int; v_sum numeric; v_done int := 0;
BEGIN
  FOR d IN 1..10 LOOP
    SELECT no_o_id INTO v_o FROM new_order WHERE no_w_id = p_w AND no_d_id = d
      ORDER BY no_o_id LIMIT 1 FOR UPDATE;
    CONTINUE WHEN NOT FOUND;
    DELETE FROM new_order WHERE no_w_id = p_w AND no_d_id = d AND no_o_id = v_o;
    UPDATE orders SET o_carrier_id = p_carrier WHERE o_w_id = p_w AND o_d_id = d AND o_id = v_o
      RETURNING o_c_id INTO v_c;
    UPDATE order_line SET ol_delivery_d = now() WHERE ol_w_id = p_w AND ol_d_id = d AND ol_o_id = v_o;
    SELECT sum(ol_amount) INTO v_sum FROM order_line WHERE ol_w_id = p_w AND ol_d_id = d AND ol_o_id = v_o;
    UPDATE customer SET c_balance = c_balance + v_sum, c_delivery_cnt = c_delivery_cnt + 1
      WHERE c_w_id = p_w AND c_d_id = d AND c_id = v_c;
    v_done := v_done + 1;
  END LOOP;
  RETURN v_done;
END $$;

-- Stock-Level (clause 2.8): read-only.
CREATE FUNCTION tpcc_slev(p_w int, p_d int, p_threshold int)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  v_next int; v_count int;
BEGIN
  SELECT d_next_o_id INTO v_next FROM district WHERE d_w_id = p_w AND d_id = p_d;
  SELECT count(DISTINCT s_i_id) INTO v_count FROM order_line, stock
    WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id >= v_next - 20 AND ol_o_id < v_next
      AND s_w_id = p_w AND s_i_id = ol_i_id AND s_quantity < p_threshold;
  RETURN v_count;
END $$;
