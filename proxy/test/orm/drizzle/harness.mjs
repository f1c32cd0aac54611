// Drizzle ORM on node-postgres through pgcipher-proxy, unchanged.
//
// Every operation of OPERATIONS runs on patient_plain (the plaintext twin,
// connected directly to the server) and on patient (encrypted columns,
// through the proxy) and the results are compared, as the Python
// harnesses do (../common.py: the verdicts, the markers PGCM-E- and
// PGCM-P-).
//
// Usage: node harness.mjs OUT.json
// Environment: PGC_HOST, PGC_SERVER_PORT (direct), PGC_PROXY_PORT, PGC_DB,
// PGC_USER.

import fs from "node:fs";
import pg from "pg";
import { drizzle } from "drizzle-orm/node-postgres";
import { and, asc, avg, between, count, countDistinct, desc, eq, gt, gte, ilike, inArray, isNull, like, lt, lte, max, min, ne, or, sql, sum } from "drizzle-orm";
import { boolean, date, integer, numeric, pgTable, text, varchar } from "drizzle-orm/pg-core";
import { migrate } from "drizzle-orm/node-postgres/migrator";
import { encryptColumns, moveToEncrypted } from "./encrypted.mjs";
import { levels, visit } from "./declare-schema.mjs";

const out = process.argv[2];
const ward = pgTable("ward", { id: integer("id").primaryKey(), name: varchar("name", { length: 60 }).notNull() });
const columns = () => ({
  id: integer("id").primaryKey(),
  city: varchar("city", { length: 40 }).notNull(), // EQ
  name: varchar("name", { length: 80 }).notNull(), // MATCH
  ssn: varchar("ssn", { length: 20 }).notNull(), // EQ
  born: date("born").notNull(), // ORD
  balance: numeric("balance", { precision: 12, scale: 2 }).notNull(), // ORD
  visits: integer("visits").notNull(), // ORD
  notes: text("notes"), // RND
  active: boolean("active").notNull(), // plaintext
  wardId: integer("ward_id").references(() => ward.id),
});
const patient = pgTable("patient", columns());
const patientPlain = pgTable("patient_plain", columns());

const CITIES = ["PGCM-E-Oslo", "PGCM-E-Rome", "PGCM-E-Lima"];
const pad = (n) => String(n).padStart(2, "0");

// the starting rows, as ../common.py's seed_rows
function seedRows() {
  const rows = [];
  for (let i = 1; i <= 24; i++) {
    rows.push({
      id: i,
      city: CITIES[i % 3],
      name: `PGCM-E-name-${pad(i)} ${i % 4 === 0 ? "Smith" : "Jones"}`,
      ssn: `PGCM-E-${100 + i}-${pad((i * 7) % 100)}`,
      born: `${1950 + i * 2}-${pad((i % 12) + 1)}-${pad((i % 27) + 1)}`,
      balance: `${(i * 37) % 500}.${i % 10}5`,
      visits: (i * 5) % 17,
      notes: i % 5 === 0 ? null : `PGCM-E-note-${i}`,
      active: i % 3 !== 0,
      wardId: (i % 2) + 1,
    });
  }
  return rows;
}

// results as comparable data: numerics by value, unordered results sorted
const norm = (v) => JSON.parse(JSON.stringify(v, (k, x) => (typeof x === "string" && /^-?\d+\.\d+$/.test(x) ? String(Number(x)) : x)));
const unordered = (rows) => norm(rows).map((r) => JSON.stringify(r)).sort();

const OPERATIONS = [];
const op = (name, f, write = false) => OPERATIONS.push({ name, f, write });

// --- reads ----------------------------------------------------------------
op("select all", (db, t) => db.select().from(t).then(unordered));
op("eq (EQ)", (db, t) => db.select().from(t).where(eq(t.ssn, "PGCM-E-105-35")).then(norm));
op("ne (EQ)", (db, t) => db.select().from(t).where(ne(t.city, "PGCM-E-Oslo")).then(unordered));
op("inArray (EQ)", (db, t) => db.select().from(t).where(inArray(t.city, ["PGCM-E-Rome", "PGCM-E-Lima"])).then(unordered));
op("like contains (MATCH)", (db, t) => db.select().from(t).where(like(t.name, "%PGCM-E-name-1%")).then(unordered));
op("like prefix and eq (MATCH, EQ)", (db, t) =>
  db.select().from(t).where(and(like(t.name, "PGCM-E-name-2%"), eq(t.city, "PGCM-E-Oslo"))).then(unordered));
op("ilike (MATCH)", (db, t) => db.select().from(t).where(ilike(t.name, "%smith")).then(unordered));
op("gt date (ORD)", (db, t) => db.select().from(t).where(gt(t.born, "1980-01-01")).then(unordered));
op("between int (ORD)", (db, t) => db.select().from(t).where(between(t.visits, 3, 9)).then(unordered));
op("lte, gte int (ORD)", (db, t) => db.select().from(t).where(and(gte(t.visits, 2), lte(t.visits, 12))).then(unordered));
op("isNull (RND)", (db, t) => db.select().from(t).where(isNull(t.notes)).then(unordered));
op("or", (db, t) => db.select().from(t).where(or(eq(t.city, "PGCM-E-Lima"), gte(t.visits, 15))).then(unordered));
op("eq on RND", (db, t) => db.select().from(t).where(eq(t.notes, "PGCM-E-note-1")).then(unordered));
op("orderBy date, limit", (db, t) => db.select().from(t).orderBy(asc(t.born)).limit(5).then(norm));
op("orderBy desc int, id, offset", (db, t) => db.select().from(t).orderBy(desc(t.visits), asc(t.id)).limit(4).offset(3).then(norm));
op("orderBy EQ", (db, t) => db.select().from(t).orderBy(asc(t.city), asc(t.id)).then(norm));
op("like with limit", (db, t) => db.select().from(t).where(like(t.name, "%Jones%")).orderBy(asc(t.id)).limit(2).then(norm));
op("count", (db, t) => db.select({ n: count() }).from(t).where(gt(t.visits, 3)).then(norm));
op("$count", (db, t) => db.$count(t, eq(t.city, "PGCM-E-Rome")));
op("selectDistinct (EQ)", (db, t) => db.selectDistinct({ city: t.city }).from(t).then(unordered));
op("aggregates", (db, t) =>
  db.select({ n: count(t.id), s: sum(t.balance), a: avg(t.visits), lo: min(t.visits), hi: max(t.born) }).from(t).then(norm));
op("countDistinct (EQ)", (db, t) => db.select({ n: countDistinct(t.city) }).from(t).then(norm));
op("groupBy EQ, sum", (db, t) => db.select({ city: t.city, s: sum(t.balance), n: count() }).from(t).groupBy(t.city).then(unordered));
op("sql expression with a parameter", (db, t) =>
  db.select({ id: t.id, x: sql`${t.visits} * ${2} + 1` }).from(t).orderBy(asc(t.id)).then(norm));
op("innerJoin ward", (db, t) =>
  db.select({ ssn: t.ssn, ward: ward.name }).from(t).innerJoin(ward, eq(t.wardId, ward.id)).where(eq(ward.name, "PGCM-P-ward-1")).then(unordered));

// --- writes ---------------------------------------------------------------
op("insert one returning", (db, t) =>
  db.insert(t).values({ id: 200, city: "PGCM-E-Oslo", name: "PGCM-E-name-new Jones", ssn: "PGCM-E-900-01", born: "2001-02-03",
    balance: "12.34", visits: 1, notes: "PGCM-E-note-new", active: true, wardId: 1 }).returning().then(norm), true);
op("insert many", (db, t) =>
  db.insert(t).values([0, 1, 2, 3, 4].map((i) => ({ id: 210 + i, city: CITIES[i % 3], name: `PGCM-E-bulk-${i} Jones`,
    ssn: `PGCM-E-800-${pad(i)}`, born: `1990-01-${pad(i + 1)}`, balance: `${i}.50`, visits: i, notes: `PGCM-E-bulk-note-${i}`,
    active: true, wardId: 2 }))).then((r) => r.rowCount), true);
op("update set where", (db, t) =>
  db.update(t).set({ notes: "PGCM-E-updated", visits: 33 }).where(eq(t.city, "PGCM-E-Lima")).then((r) => r.rowCount), true);
op("update set sql + 1", (db, t) =>
  db.update(t).set({ visits: sql`${t.visits} + 1` }).where(eq(t.city, "PGCM-E-Rome")).then((r) => r.rowCount), true);
op("onConflictDoUpdate", (db, t) =>
  db.insert(t).values({ id: 200, city: "PGCM-E-Rome", name: "PGCM-E-upsert", ssn: "PGCM-E-900-01", born: "2001-02-03",
    balance: "1", visits: 2, active: true }).onConflictDoUpdate({ target: t.id, set: { name: "PGCM-E-upserted", visits: 7 } })
    .then((r) => r.rowCount), true);
op("transaction, for update", (db, t) =>
  db.transaction(async (tx) => {
    const [p] = await tx.select().from(t).where(eq(t.ssn, "PGCM-E-105-35")).for("update");
    await tx.update(t).set({ visits: p.visits + 10 }).where(eq(t.id, p.id));
    return p.visits + 10;
  }), true);
op("savepoint rollback", (db, t) =>
  db.transaction(async (tx) => {
    await tx.update(t).set({ city: "PGCM-E-Rome" }).where(eq(t.id, 1));
    try {
      await tx.transaction(async (sp) => {
        await sp.update(t).set({ city: "PGCM-E-Lima" }).where(eq(t.id, 2));
        sp.rollback();
      });
    } catch (e) {
      if (!String(e).includes("Rollback")) throw e;
    }
    const rows = await tx.select({ id: t.id, city: t.city }).from(t).where(inArray(t.id, [1, 2])).orderBy(asc(t.id));
    return norm(rows);
  }), true);
op("delete returning", (db, t) =>
  db.delete(t).where(and(eq(t.city, "PGCM-E-Lima"), lt(t.visits, 3))).returning({ id: t.id }).then(unordered), true);

const state = (db, t) => db.select().from(t).orderBy(asc(t.id)).then(norm);

function errorKind(e) {
  const c = e.cause || e;
  return [c.code || null, String(c.message || c).split("\n")[0]];
}

function verdict(plain, enc) {
  if (enc[0] === "error" && String(enc[1][0] || "").startsWith("PC")) return ["refused", `${enc[1][0]}: ${enc[1][1]}`];
  if (plain[0] === "ok" && enc[0] === "ok" && JSON.stringify(plain[1]) === JSON.stringify(enc[1])) return ["equal", ""];
  if (plain[0] === "error" && enc[0] === "error" && plain[1][0] === enc[1][0]) return ["equal", `both fail with ${plain[1][0]}`];
  return ["wrong", `plaintext ${JSON.stringify(plain).slice(0, 300)} encrypted ${JSON.stringify(enc).slice(0, 300)}`];
}

// Encrypted columns declared from Drizzle (encrypted.mjs): the table made
// by drizzle-kit's migration (directly on the server: drizzle's migrator
// runs it in a transaction) and bound through the proxy; then a live
// plaintext column moved to encrypted.  Each step is checked against what
// the application wrote (no twin: the point is the schema).
async function declaring(results, directDb, encDb, encPool) {
  const rows = [];
  for (let i = 1; i <= 12; i++) {
    rows.push({ id: i, reason: `PGCM-E-reason-${i} ${i % 2 ? "flu" : "checkup"}`, cost: `${(i * 13) % 90}.25`,
      day: `2024-${pad((i % 12) + 1)}-${pad((i % 27) + 1)}`, email: `PGCM-L-${i}@example.org` }); // plaintext until moved
  }
  const types = async (col) => (await encPool.query(
    "SELECT format_type(atttypid, NULL) AS t FROM pg_attribute WHERE attrelid = 'visit'::regclass AND attnum > 0" +
    (col ? " AND attname = $1" : " ORDER BY attnum"), col ? [col] : [])).rows.map((r) => r.t);
  const step = async (name, f) => {
    let res, detail = "";
    try {
      const [got, want] = await f();
      res = JSON.stringify(got) === JSON.stringify(want) ? "equal" : "wrong";
      if (res === "wrong") detail = `got ${JSON.stringify(got).slice(0, 200)} want ${JSON.stringify(want).slice(0, 200)}`;
    } catch (e) {
      const [code, msg] = errorKind(e);
      res = String(code || "").startsWith("PC") ? "refused" : "wrong";
      detail = `${code}: ${msg}`;
    }
    results.push({ operation: name, outcome: res, detail, write: true });
    console.log(`${res.padEnd(8)} ${name}${detail ? ": " + detail : ""}`);
  };
  await step("declare: drizzle-kit migration, encryptColumns", async () => {
    await encPool.query("DROP TABLE IF EXISTS visit");
    await migrate(directDb, { migrationsFolder: process.env.DRIZZLE_MIGRATIONS });
    await encryptColumns(encPool, "visit", levels, "k1");
    return [await types(), ["integer", "enc_text", "enc_numeric_ord", "enc_date_ord", "character varying"]];
  });
  await step("declare: inserts and lookups on the declared columns", async () => {
    await encDb.insert(visit).values(rows);
    const got = [
      (await encDb.select({ r: visit.reason }).from(visit).where(like(visit.reason, "%flu%"))).map((r) => r.r).sort(),
      (await encDb.select({ c: visit.cost }).from(visit).where(gt(visit.day, "2024-06-01")).orderBy(asc(visit.cost))).map((r) => r.c),
      (await encDb.select({ d: visit.day }).from(visit).orderBy(asc(visit.day)).limit(3)).map((r) => r.d),
    ];
    const want = [
      rows.filter((r) => r.reason.includes("flu")).map((r) => r.reason).sort(),
      rows.filter((r) => r.day > "2024-06-01").map((r) => r.cost).sort((a, b) => Number(a) - Number(b)),
      rows.map((r) => r.day).sort().slice(0, 3),
    ];
    return [got, want];
  });
  await step("declare: moveToEncrypted moves a live column", async () => {
    const emails = async () => (await encPool.query("SELECT id, email FROM visit ORDER BY id")).rows;
    const before = await emails();
    await moveToEncrypted(encPool, "visit", "email", "k1", "EQ");
    return [[await emails(), await types("email")], [before, ["enc_text"]]];
  });
  await step("declare: writes and lookups on the moved column", async () => {
    await encDb.insert(visit).values({ id: 100, reason: "PGCM-E-reason-new", cost: "1", day: "2025-01-01", email: "PGCM-E-mail-new" });
    const [r] = await encDb.select({ r: visit.reason }).from(visit).where(eq(visit.email, "PGCM-E-mail-new"));
    return [r.r, "PGCM-E-reason-new"];
  });
}

async function main() {
  const env = process.env;
  const pool = (port) => new pg.Pool({ host: env.PGC_HOST || "127.0.0.1", port: Number(port), database: env.PGC_DB, user: env.PGC_USER, max: 2 });
  const plainPool = pool(env.PGC_SERVER_PORT);
  const encPool = pool(env.PGC_PROXY_PORT);
  const plainDb = drizzle(plainPool);
  const encDb = drizzle(encPool);
  // the wards through the proxy: the plaintext control marker
  await encPool.query("DELETE FROM patient; DELETE FROM patient_plain; DELETE FROM ward");
  await encPool.query("INSERT INTO ward (id, name) VALUES (1, 'PGCM-P-ward-1'), (2, 'PGCM-P-ward-2')");
  await encDb.insert(patient).values(seedRows());
  await plainDb.insert(patientPlain).values(seedRows());
  const results = [];
  for (const { name, f, write } of OPERATIONS) {
    const outcome = {};
    for (const [db, t, key] of [[plainDb, patientPlain, "plain"], [encDb, patient, "enc"]]) {
      try {
        outcome[key] = ["ok", norm(await f(db, t))];
      } catch (e) {
        outcome[key] = ["error", errorKind(e)];
      }
    }
    let [res, detail] = verdict(outcome.plain, outcome.enc);
    if (write) {
      const a = await state(plainDb, patientPlain);
      const b = await state(encDb, patient);
      if (JSON.stringify(a) !== JSON.stringify(b)) {
        if (res === "equal") [res, detail] = ["wrong", "the tables differ after the write"];
        // the next operation starts from the same rows again
        await encPool.query("DELETE FROM patient");
        const rows = await plainDb.select().from(patientPlain);
        if (rows.length) await encDb.insert(patient).values(rows);
      }
    }
    results.push({ operation: name, outcome: res, detail, write });
    console.log(`${res.padEnd(8)} ${name}${detail ? ": " + detail : ""}`);
  }
  await declaring(results, plainDb, encDb, encPool);
  const version = JSON.parse(fs.readFileSync(new URL("./node_modules/drizzle-orm/package.json", import.meta.url))).version;
  fs.writeFileSync(out, JSON.stringify({ mode: "node-postgres", version, results }, null, 1));
  await plainPool.end();
  await encPool.end();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
