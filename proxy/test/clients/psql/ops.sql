-- ops.sql — what the psql client test does, once on enc_t and once on
-- plain_t: test.sh replaces @TAB@ (the table), @MK@ (the marker prefix,
-- PGCMARK-E or PGCMARK-P), @SIDE@ (enc or plain) and @DIR@ (scratch
-- directory), runs both through the proxy and diffs the outputs.
-- Ranges, ORDER BY, MIN/MAX only on ORD columns (i4o i8o f8 d ts),
-- equality on EQ and ORD columns, LIKE on tm (MATCH); tr (RND) is only
-- read and written; count(DISTINCT) only on ORD columns (the server sorts
-- the values).  Results without ORDER BY go through `\g | sort`.
\set ON_ERROR_STOP off
\pset null '<null>'
\pset footer on
SET TimeZone = 'UTC';

\echo == load: psql copy FROM (text)
\copy @TAB@ FROM '@DIR@/rows-@SIDE@.tsv'
SELECT count(*) FROM @TAB@;

\echo == INSERT with literals of every type, NULLs, RETURNING
INSERT INTO @TAB@ VALUES (101, 1, 2, 3, 4, 0.1, 12.50, '@MK@-psql-ins1',
  '@MK@-psql-ins1 alpha beta', '@MK@-psql-rins1', '\xdeadbeef', '2024-02-29',
  '2024-02-29 23:59:59.123456+00', false);
INSERT INTO @TAB@ (id) VALUES (102);
INSERT INTO @TAB@ VALUES (103, -2147483648, 2147483647, -9223372036854775808,
  9223372036854775807, 'Infinity', -0.000001, '', '', 'x', '\x', '1999-12-31',
  '1970-01-01 00:00:00+05:30', true) RETURNING id, i4, i4o, i8, i8o, f8, num, t, b, d, ts, bo;
INSERT INTO @TAB@ (id, f8, t, tm, tr, ts) VALUES
  (104, '-Infinity', 'quote''s "dq" \back', 'üñï©ødé @MK@-psql-ins4', E'tab\there', '2024-06-01 12:00:00-07'),
  (105, 1e-300, '@MK@-psql-t1', 'line1
line2', NULL, '2038-01-19 03:14:08+00')
  RETURNING id, f8, t, tm, tr, ts;

\echo == equality on EQ and ORD columns
SELECT id FROM @TAB@ WHERE i4 = 3 ORDER BY id;
SELECT id FROM @TAB@ WHERE i4 <> 3 ORDER BY id;
SELECT id FROM @TAB@ WHERE 3 = i4 AND id < 40 ORDER BY id;
SELECT id FROM @TAB@ WHERE i4 IN (1, 2, 5) ORDER BY id;
SELECT id FROM @TAB@ WHERE i4 NOT IN (1, 2, 5) ORDER BY id;
SELECT id FROM @TAB@ WHERE i8 = 3000000000 ORDER BY id;
SELECT id FROM @TAB@ WHERE i8 = -9223372036854775808 OR i8o = 9223372036854775807 ORDER BY id;
SELECT id FROM @TAB@ WHERE num = 12.50 ORDER BY id;
SELECT id FROM @TAB@ WHERE num IN ('-3.07', '0.35', '1.14') ORDER BY id;
SELECT id FROM @TAB@ WHERE t = '@MK@-psql-t3' ORDER BY id;
SELECT id, t FROM @TAB@ WHERE t IN ('@MK@-psql-t1', '') ORDER BY id;
SELECT id FROM @TAB@ WHERE t = 'quote''s "dq" \back';
SELECT id FROM @TAB@ WHERE b = '\x0aff' ORDER BY id;
SELECT id FROM @TAB@ WHERE b = '\xdeadbeef' OR b = '\x' ORDER BY id;
SELECT id FROM @TAB@ WHERE bo = true ORDER BY id;
SELECT id FROM @TAB@ WHERE i4o = 13 ORDER BY id;
SELECT id FROM @TAB@ WHERE d = '2024-03-08' ORDER BY id;
SELECT id FROM @TAB@ WHERE ts = '2024-02-29 23:59:59.123456+00' ORDER BY id;
SELECT id FROM @TAB@ WHERE ts = '2024-03-01 04:59:59.123456+05' ORDER BY id;
SELECT id FROM @TAB@ WHERE f8 = 0.1 ORDER BY id;

\echo == ranges and ORDER BY on ORD columns
SELECT id, i4o FROM @TAB@ WHERE i4o BETWEEN -10 AND 20 ORDER BY id;
SELECT id, i4o FROM @TAB@ WHERE i4o < 0 ORDER BY i4o, id;
SELECT id, i4o FROM @TAB@ WHERE i4o >= 100 ORDER BY i4o DESC;
SELECT id, i8o FROM @TAB@ WHERE i8o > -1000000000 ORDER BY i8o, id;
SELECT id, i8o FROM @TAB@ WHERE i8o <= -5000000000 ORDER BY i8o DESC LIMIT 5;
SELECT id, f8 FROM @TAB@ WHERE f8 >= 2.5 AND f8 < 30 ORDER BY f8 DESC, id;
SELECT id, f8 FROM @TAB@ WHERE f8 < 0 ORDER BY f8, id;
SELECT id, f8 FROM @TAB@ ORDER BY f8 NULLS FIRST, id LIMIT 8;
SELECT id, d FROM @TAB@ WHERE d BETWEEN '2024-03-01' AND '2024-06-30' ORDER BY d, id;
SELECT id, d FROM @TAB@ WHERE d > '2024-11-01' OR d < '2000-01-01' ORDER BY d DESC, id;
SELECT id, ts FROM @TAB@ WHERE ts > '2024-06-01 00:00:00+00' ORDER BY ts DESC, id LIMIT 7;
SELECT id, ts FROM @TAB@ WHERE ts BETWEEN '2024-03-01 00:00:00+00' AND '2024-05-01 12:00:00+02' ORDER BY ts, id;
SELECT id, i4o, i8o, f8, d, ts FROM @TAB@ ORDER BY i4o DESC NULLS LAST, id LIMIT 10;
SELECT id, d, ts FROM @TAB@ WHERE id < 30 ORDER BY d, ts DESC, id;
SELECT id FROM @TAB@ WHERE id > 50 ORDER BY ts NULLS FIRST, id;

\echo == LIKE on the MATCH column
SELECT id, tm FROM @TAB@ WHERE tm LIKE '%psql-m1%' ORDER BY id;
SELECT id FROM @TAB@ WHERE tm LIKE '@MK@-psql-m2_ %' ORDER BY id;
SELECT id FROM @TAB@ WHERE tm LIKE '%word3 lorem' ORDER BY id;
SELECT id FROM @TAB@ WHERE tm LIKE '%alpha%beta' ORDER BY id;
SELECT id FROM @TAB@ WHERE tm NOT LIKE '%word1%' ORDER BY id;
SELECT id FROM @TAB@ WHERE tm LIKE '%üñï©%' ORDER BY id;
SELECT id FROM @TAB@ WHERE tm = '@MK@-psql-m7 word3 lorem';

\echo == IS NULL
SELECT id FROM @TAB@ WHERE i4 IS NULL ORDER BY id;
SELECT id FROM @TAB@ WHERE tr IS NULL OR b IS NULL ORDER BY id;
SELECT id FROM @TAB@ WHERE ts IS NOT NULL AND d IS NULL ORDER BY id;
SELECT count(*) FROM @TAB@ WHERE tm IS NULL;
SELECT count(*) FROM @TAB@ WHERE bo IS NULL AND tr IS NOT NULL;

\echo == count, GROUP BY, DISTINCT on EQ columns; MIN/MAX on ORD
SELECT count(*), count(i4), count(tr), count(DISTINCT i4o), count(DISTINCT d) FROM @TAB@;
SELECT count(*) FROM (SELECT t FROM @TAB@ GROUP BY t) s;
SELECT count(*) FROM (SELECT DISTINCT i8 FROM @TAB@) s;
SELECT i4, count(*), min(id) FROM @TAB@ GROUP BY i4 ORDER BY min(id);
SELECT t, bo, count(*) AS n, min(id) FROM @TAB@ GROUP BY t, bo ORDER BY min(id);
SELECT num, count(*) FROM @TAB@ GROUP BY num HAVING count(*) > 1 \g | sort
SELECT DISTINCT t FROM @TAB@ \g | sort
SELECT DISTINCT b, bo FROM @TAB@ \g | sort
SELECT DISTINCT i4o FROM @TAB@ WHERE i4o < 10 ORDER BY i4o;
SELECT min(i4o), max(i4o), min(i8o), max(i8o), min(f8), max(f8) FROM @TAB@;
SELECT min(d), max(d), min(ts), max(ts) FROM @TAB@ WHERE id < 100;
SELECT bo, min(d), max(ts), count(*) FROM @TAB@ GROUP BY bo \g | sort

\echo == self-join on an EQ column
SELECT a.id, b.id FROM @TAB@ a JOIN @TAB@ b ON a.t = b.t WHERE a.id < b.id AND a.id < 15 ORDER BY 1, 2;
SELECT a.id, count(b.id) FROM @TAB@ a LEFT JOIN @TAB@ b ON a.i8 = b.i8 AND a.id <> b.id
  WHERE a.id BETWEEN 20 AND 30 GROUP BY a.id ORDER BY a.id;

\echo == psql gset
SELECT t AS got_t, i4o AS got_i4o, ts AS got_ts FROM @TAB@ WHERE id = 14 \gset
\echo got :got_t :got_i4o :got_ts
SELECT id FROM @TAB@ WHERE t = :'got_t' AND i4o = :got_i4o AND ts = :'got_ts' ORDER BY id;
SELECT count(*) AS n_before FROM @TAB@ \gset
\echo rows :n_before

\echo == extended protocol from psql (psql bind, untyped parameters)
SELECT id, t FROM @TAB@ WHERE i4 = $1 AND i4o > $2 ORDER BY id \bind 4 -20 \g
SELECT id FROM @TAB@ WHERE tm LIKE $1 ORDER BY id \bind '%m3%' \g
INSERT INTO @TAB@ (id, i4, t, tm, d) VALUES ($1, $2, $3, $4, $5) \bind 106 6 '@MK@-psql-bind6' '@MK@-psql-bind6 m' '2025-05-05' \g
SELECT id, i4, t, tm, d FROM @TAB@ WHERE id = $1 \bind 106 \g

\echo == UPDATE and DELETE
UPDATE @TAB@ SET i4 = 99, tm = '@MK@-psql-upd', tr = '@MK@-psql-rupd' WHERE i4o < -30;
SELECT id, i4, tm, tr FROM @TAB@ WHERE i4 = 99 ORDER BY id;
UPDATE @TAB@ SET t = '@MK@-psql-upd2', f8 = -1.5, d = '2030-01-01' WHERE t = '@MK@-psql-t2' RETURNING id, t, f8, d \g | sort
UPDATE @TAB@ SET b = NULL, bo = NULL WHERE ts < '2024-03-01 00:00:00+00' RETURNING id \g | sort
UPDATE @TAB@ SET num = 7.000 WHERE id IN (1, 2, 3);
SELECT id, num FROM @TAB@ WHERE num = 7 ORDER BY id;
DELETE FROM @TAB@ WHERE d < '2024-02-01' RETURNING id \g | sort
DELETE FROM @TAB@ WHERE t = '@MK@-psql-t4';
SELECT count(*) FROM @TAB@;

\echo == transactions with ROLLBACK
BEGIN;
UPDATE @TAB@ SET t = '@MK@-psql-rolledback', i4o = 0 WHERE id = 11;
INSERT INTO @TAB@ (id, t) VALUES (200, '@MK@-psql-rolledback');
SELECT id, t, i4o FROM @TAB@ WHERE t = '@MK@-psql-rolledback' ORDER BY id;
ROLLBACK;
SELECT id, t, i4o FROM @TAB@ WHERE id IN (11, 200) ORDER BY id;
BEGIN;
INSERT INTO @TAB@ (id, t, i4) VALUES (201, '@MK@-psql-sp', 1);
SAVEPOINT s1;
UPDATE @TAB@ SET i4 = 2 WHERE id = 201;
ROLLBACK TO SAVEPOINT s1;
UPDATE @TAB@ SET tr = '@MK@-psql-rsp' WHERE id = 201;
COMMIT;
SELECT id, t, i4, tr FROM @TAB@ WHERE id = 201;

\echo == psql copy TO (text and csv) and back
\copy @TAB@ TO '@DIR@/out-@SIDE@.txt'
\copy @TAB@ TO '@DIR@/out-@SIDE@.csv' WITH (FORMAT csv, HEADER)
TRUNCATE @TAB@;
\copy @TAB@ (id, i4, i4o, i8, i8o, f8, num, t, tm, tr, b, d, ts, bo) FROM '@DIR@/out-@SIDE@.csv' WITH (FORMAT csv, HEADER)
SELECT count(*), count(DISTINCT ts), min(ts), max(i8o) FROM @TAB@;
TRUNCATE @TAB@;
\copy @TAB@ FROM '@DIR@/out-@SIDE@.txt'
SELECT count(*), count(DISTINCT ts), min(ts), max(i8o) FROM @TAB@;
SELECT * FROM @TAB@ ORDER BY id;
