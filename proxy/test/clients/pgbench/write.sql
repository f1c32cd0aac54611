-- write.sql — pgbench script: deterministic updates (the new values depend
-- on the id only, so the final table does not depend on how the two
-- clients interleave), run with the same --random-seed on both tables
\set id random(1, 200)
\set v :id * 7 - 300
\set w :id * -1000003
BEGIN;
UPDATE @TAB@ SET i4o = :v, i8o = :w, t = :mk, tr = :mk, d = '2025-01-31', bo = false WHERE id = :id;
SELECT i4o, t, tr FROM @TAB@ WHERE id = :id;
END;
