// Encrypted columns for Drizzle ORM schemas, in a few lines: a column type
// created as pgcipher's enc_T that reads and writes as its plain type, and
// the SQL steps that bind it (pgcipher.encrypt_column) and move a live
// plaintext column to encrypted.
//
//   export const visit = pgTable("visit", {
//     id: integer("id").primaryKey(),
//     reason: encrypted("text", "MATCH")("reason"),   // enc_text
//     cost: encrypted("numeric", "ORD")("cost"),      // enc_numeric_ord
//   });
//   // drizzle-kit generate writes CREATE TABLE with the enc_* types; run the
//   // migration directly on the server (drizzle's migrator runs it in a
//   // transaction, which the proxy refuses for encrypted columns), then
//   // through pgcipher-proxy, outside a transaction:
//   await encryptColumns(proxyPool, "visit", { reason: "MATCH", cost: "ORD" }, "k1");
//   await moveToEncrypted(proxyPool, "visit", "email", "k1", "EQ");
//
// The application reads and writes plaintext; the proxy encrypts.  See
// docs/orm/declaring.md.
import { customType } from "drizzle-orm/pg-core";

// encrypted(plain, level) is a column builder of type enc_<plain>
// (enc_<plain>_ord at level ORD): plain is text, int4, int8, numeric,
// float8, date, timestamptz, bool or bytea
export const encrypted = (plain, level = "EQ") =>
  customType({ dataType: () => `enc_${plain}${level.toUpperCase() === "ORD" ? "_ord" : ""}` });

// encryptColumns binds each named column of table to key at its level
// (one statement each, outside a transaction: pool.query autocommits)
export async function encryptColumns(pool, table, levels, key) {
  for (const [column, level] of Object.entries(levels)) {
    await pool.query("SELECT pgcipher.encrypt_column($1, $2, $3, $4)", [table, column, key, level]);
  }
}

// moveToEncrypted moves a live plaintext column to encrypted, through the
// proxy: the old column renamed aside, a new enc_* column under its name
// bound at the level (an encrypted column is never renamed: its values
// are bound to that name), every value copied (the proxy reads, encrypts
// and writes each row back), the old column dropped.  NOT NULL, defaults
// and indexes are the application's to add again; VACUUM FULL afterwards
// removes the old values from dead tuples.
export async function moveToEncrypted(pool, table, column, key, level, plain = "text") {
  const old = `${column}__pgcipher_old`;
  const q = (s) => `"${s.replaceAll('"', '""')}"`;
  await pool.query(`ALTER TABLE ${q(table)} RENAME COLUMN ${q(column)} TO ${q(old)}`);
  await pool.query(`ALTER TABLE ${q(table)} ADD COLUMN ${q(column)} enc_${plain}${level.toUpperCase() === "ORD" ? "_ord" : ""}`);
  await pool.query("SELECT pgcipher.encrypt_column($1, $2, $3, $4)", [table, column, key, level]);
  await pool.query(`UPDATE ${q(table)} SET ${q(column)} = ${q(old)}`);
  await pool.query(`ALTER TABLE ${q(table)} DROP COLUMN ${q(old)}`);
}
