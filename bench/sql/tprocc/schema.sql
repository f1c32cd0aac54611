-- TPROC-C (TPC-C-like) schema: the nine tables of the TPC-C specification.
CREATE TABLE warehouse (
  w_id int PRIMARY KEY, w_name varchar(10), w_street_1 varchar(20), w_street_2 varchar(20),
  w_city varchar(20), w_state char(2), w_zip char(9), w_tax numeric(4,4), w_ytd numeric(12,2));
CREATE TABLE district (
  d_id int, d_w_id int, d_name varchar(10), d_street_1 varchar(20), d_street_2 varchar(20),
  d_city varchar(20), d_state char(2), d_zip char(9), d_tax numeric(4,4), d_ytd numeric(12,2),
  d_next_o_id int, PRIMARY KEY (d_w_id, d_id));
CREATE TABLE customer (
  c_id int, c_d_id int, c_w_id int, c_first varchar(16), c_middle char(2), c_last varchar(16),
  c_street_1 varchar(20), c_street_2 varchar(20), c_city varchar(20), c_state char(2), c_zip char(9),
  c_phone char(16), c_since timestamp, c_credit char(2), c_credit_lim numeric(12,2),
  c_discount numeric(4,4), c_balance numeric(12,2), c_ytd_payment numeric(12,2),
  c_payment_cnt int, c_delivery_cnt int, c_data varchar(500), PRIMARY KEY (c_w_id, c_d_id, c_id));
CREATE TABLE history (
  h_c_id int, h_c_d_id int, h_c_w_id int, h_d_id int, h_w_id int, h_date timestamp,
  h_amount numeric(6,2), h_data varchar(24));
CREATE TABLE new_order (no_o_id int, no_d_id int, no_w_id int, PRIMARY KEY (no_w_id, no_d_id, no_o_id));
CREATE TABLE orders (
  o_id int, o_d_id int, o_w_id int, o_c_id int, o_entry_d timestamp, o_carrier_id int,
  o_ol_cnt int, o_all_local int, PRIMARY KEY (o_w_id, o_d_id, o_id));
CREATE TABLE order_line (
  ol_o_id int, ol_d_id int, ol_w_id int, ol_number int, ol_i_id int, ol_supply_w_id int,
  ol_delivery_d timestamp, ol_quantity int, ol_amount numeric(6,2), ol_dist_info char(24),
  PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number));
CREATE TABLE item (i_id int PRIMARY KEY, i_im_id int, i_name varchar(24), i_price numeric(5,2), i_data varchar(50));
CREATE TABLE stock (
  s_i_id int, s_w_id int, s_quantity int,
  s_dist_01 char(24), s_dist_02 char(24), s_dist_03 char(24), s_dist_04 char(24), s_dist_05 char(24),
  s_dist_06 char(24), s_dist_07 char(24), s_dist_08 char(24), s_dist_09 char(24), s_dist_10 char(24),
  s_ytd int, s_order_cnt int, s_remote_cnt int, s_data varchar(50), PRIMARY KEY (s_w_id, s_i_id));

-- Random strings and TPC-C's non-uniform random numbers and last names
CREATE FUNCTION tpcc_astring(lo int, hi int) RETURNS text LANGUAGE sql AS
$$ SELECT substr(repeat(md5(random()::text), 2), 1, lo + floor(random() * (hi - lo + 1))::int) $$;
CREATE FUNCTION tpcc_nurand(a int, x int, y int, c int) RETURNS int LANGUAGE sql AS
$$ SELECT ((((floor(random() * (a + 1)))::int | (x + floor(random() * (y - x + 1)))::int) + c) % (y - x + 1)) + x $$;
CREATE FUNCTION tpcc_lastname(n int) RETURNS text LANGUAGE sql IMMUTABLE AS
$$ SELECT s[n / 100 + 1] || s[(n / 10) % 10 + 1] || s[n % 10 + 1]
   FROM (SELECT ARRAY['BAR','OUGHT','ABLE','PRI','PRES','ESE','ANTI','CALLY','ATION','EING'] AS s) x $$;
