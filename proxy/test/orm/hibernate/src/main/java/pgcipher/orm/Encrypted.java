// Encrypted columns for Hibernate entities, in a few lines: the column's
// type named with JPA's columnDefinition, and the statements that bind it
// (pgcipher.encrypt_column) and move a live plaintext column to encrypted,
// run through pgcipher-proxy outside a transaction.
//
//   @Column(columnDefinition = "enc_text") String reason;           // MATCH
//   @Column(columnDefinition = "enc_numeric_ord") BigDecimal cost;  // ORD
//
//   Encrypted.encryptColumns(session, "visit", Map.of("reason", "MATCH", "cost", "ORD"), "k1");
//   Encrypted.moveToEncrypted(session, "visit", "email", "k1", "EQ", "text");
//
// The application reads and writes plaintext; the proxy encrypts.  See
// docs/orm/declaring.md.
package pgcipher.orm;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Statement;
import java.util.Map;
import org.hibernate.Session;

public final class Encrypted {
    private Encrypted() {}

    /** Binds each named column of table to key at its level, each on its own (autocommit). */
    public static void encryptColumns(Session s, String table, Map<String, String> levels, String key) {
        s.doWork(c -> autocommit(c, () -> {
            for (Map.Entry<String, String> e : levels.entrySet()) {
                bind(c, table, e.getKey(), key, e.getValue());
            }
        }));
    }

    /**
     * Moves a live plaintext column to encrypted, through the proxy: the old column renamed aside, a new
     * enc_* column under its name bound at the level (an encrypted column is never renamed: its values are
     * bound to that name), every value copied (the proxy reads, encrypts and writes each row back), the old
     * column dropped. NOT NULL, defaults and indexes are the application's to add again; VACUUM FULL
     * afterwards removes the old values from dead tuples.
     */
    public static void moveToEncrypted(Session s, String table, String column, String key, String level, String plain) {
        String old = column + "__pgcipher_old";
        String enc = "enc_" + plain + (level.equalsIgnoreCase("ORD") ? "_ord" : "");
        s.doWork(c -> autocommit(c, () -> {
            try (Statement st = c.createStatement()) {
                st.execute("ALTER TABLE " + q(table) + " RENAME COLUMN " + q(column) + " TO " + q(old));
                st.execute("ALTER TABLE " + q(table) + " ADD COLUMN " + q(column) + " " + enc);
                bind(c, table, column, key, level);
                st.execute("UPDATE " + q(table) + " SET " + q(column) + " = " + q(old));
                st.execute("ALTER TABLE " + q(table) + " DROP COLUMN " + q(old));
            }
        }));
    }

    interface Work {
        void run() throws java.sql.SQLException;
    }

    private static void autocommit(Connection c, Work w) throws java.sql.SQLException {
        boolean was = c.getAutoCommit();
        if (!was) c.commit(); // what the session did so far
        c.setAutoCommit(true);
        try {
            w.run();
        } finally {
            c.setAutoCommit(was);
        }
    }

    private static void bind(Connection c, String table, String column, String key, String level)
            throws java.sql.SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT pgcipher.encrypt_column(?, ?, ?, ?)")) {
            ps.setString(1, table);
            ps.setString(2, column);
            ps.setString(3, key);
            ps.setString(4, level);
            ps.execute();
        }
    }

    private static String q(String name) {
        return '"' + name.replace("\"", "\"\"") + '"';
    }
}
