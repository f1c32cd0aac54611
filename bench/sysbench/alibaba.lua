-- The statement templates of Alibaba Cloud's Always-confidential sysbench
-- report (https://www.alibabacloud.com/help/en/rds/apsaradb-rds-for-postgresql/
-- performance-testing-reports-of-fully-encrypted-databases; bench/vendor_reports.py),
-- as a sysbench 1.0 script for its pgsql
-- driver, unchanged whether it talks to the server or to pgcipher-proxy:
--
--   point     SELECT c FROM t WHERE id = ?
--   range     SELECT SUM(k) FROM t WHERE id BETWEEN ? AND ?   (range 100)
--   write     one transaction of UPDATE t SET k = k + 1 WHERE id = ?,
--             UPDATE t SET c = ? WHERE id = ?, DELETE FROM t WHERE id = ?
--             and INSERT INTO t (id, k, c, pad) VALUES (?, ?, ?, ?)
--             (the deleted row, so the table keeps its size)
--   point_k   SELECT c FROM t WHERE k = ?                     (scenario 3)
--   range_k   SELECT SUM(k) FROM t WHERE k BETWEEN ? AND ?    (scenario 3)
--
-- Every statement is prepared once per thread (server-side with
-- --db-ps-mode=auto, the default).

sysbench.cmdline.options = {
   table = {"Table to query", "test1"},
   table_size = {"Rows in the table (ids 1..table_size)", 10000},
   workload = {"point, range, write, point_k or range_k", "point"},
   range_size = {"Rows a range covers", 100},
}

local function random_string(len)
   local t = {}
   for i = 1, len do
      t[i] = string.char(48 + sysbench.rand.uniform(0, 9))
   end
   return table.concat(t)
end

function thread_init()
   drv = sysbench.sql.driver()
   con = drv:connect()
   local t = sysbench.opt.table
   local w = sysbench.opt.workload
   local INT, CHAR = sysbench.sql.type.INT, sysbench.sql.type.CHAR
   stmts = {}
   local function prepare(name, sql, ...)
      local s = con:prepare(sql)
      local params = {}
      for i, spec in ipairs({...}) do
         params[i] = s:bind_create(spec[1], spec[2])
      end
      if #params > 0 then
         s:bind_param(unpack(params))
      end
      stmts[name] = {stmt = s, params = params}
   end
   if w == "point" then
      prepare("q", "SELECT c FROM " .. t .. " WHERE id = ?", {INT})
   elseif w == "range" then
      prepare("q", "SELECT SUM(k) FROM " .. t .. " WHERE id BETWEEN ? AND ?", {INT}, {INT})
   elseif w == "point_k" then
      prepare("q", "SELECT c FROM " .. t .. " WHERE k = ?", {INT})
   elseif w == "range_k" then
      prepare("q", "SELECT SUM(k) FROM " .. t .. " WHERE k BETWEEN ? AND ?", {INT}, {INT})
   elseif w == "write" then
      prepare("inc", "UPDATE " .. t .. " SET k = k + 1 WHERE id = ?", {INT})
      prepare("setc", "UPDATE " .. t .. " SET c = ? WHERE id = ?", {CHAR, 120}, {INT})
      prepare("del", "DELETE FROM " .. t .. " WHERE id = ?", {INT})
      prepare("ins", "INSERT INTO " .. t .. " (id, k, c, pad) VALUES (?, ?, ?, ?)",
              {INT}, {INT}, {CHAR, 120}, {CHAR, 60})
   else
      error("unknown workload " .. w)
   end
end

function thread_done()
   for _, s in pairs(stmts) do
      s.stmt:close()
   end
   con:disconnect()
end

local function id()
   return sysbench.rand.default(1, sysbench.opt.table_size)
end

local function run(name, ...)
   local s = stmts[name]
   for i, v in ipairs({...}) do
      s.params[i]:set(v)
   end
   s.stmt:execute()
end

function event()
   local w = sysbench.opt.workload
   local n = sysbench.opt.table_size
   if w == "point" or w == "point_k" then
      run("q", id())
   elseif w == "range" or w == "range_k" then
      local lo = sysbench.rand.default(1, n - sysbench.opt.range_size + 1)
      run("q", lo, lo + sysbench.opt.range_size - 1)
   else
      con:query("BEGIN")
      run("inc", id())
      run("setc", random_string(120), id())
      local victim = id()
      run("del", victim)
      run("ins", victim, sysbench.rand.default(1, n), random_string(120), random_string(60))
      con:query("COMMIT")
   end
end
