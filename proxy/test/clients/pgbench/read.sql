-- read.sql — pgbench script: point reads by EQ and ORD columns, a range on
-- an ORD column, LIKE on the MATCH column (@TAB@ is enc_t or plain_t)
\set id random(1, 200)
\set lo random(-300, 300)
\set hi :lo + 40
SELECT t, tm, i4o, ts FROM @TAB@ WHERE i4 = :id;
SELECT id, t FROM @TAB@ WHERE t = :mk;
SELECT count(*) FROM @TAB@ WHERE i4o BETWEEN :lo AND :hi;
SELECT id, d FROM @TAB@ WHERE i8o > :lo ORDER BY i8o LIMIT 3;
SELECT id FROM @TAB@ WHERE tm LIKE :pat;
