// The table the harness declares from Drizzle (encrypted.mjs): drizzle-kit
// generate reads this file (test.sh) and the harness queries it.
import { date, integer, pgTable, varchar } from "drizzle-orm/pg-core";
import { encrypted } from "./encrypted.mjs";

export const visit = pgTable("visit", {
  id: integer("id").primaryKey(),
  reason: encrypted("text", "MATCH")("reason"),
  cost: encrypted("numeric", "ORD")("cost"),
  day: encrypted("date", "ORD")("day"),
  email: varchar("email", { length: 80 }), // plaintext until moved
});
export const levels = { reason: "MATCH", cost: "ORD", day: "ORD" };
