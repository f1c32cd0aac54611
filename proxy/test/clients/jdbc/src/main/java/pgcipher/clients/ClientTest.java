package pgcipher.clients;

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ParameterMetaData;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.LocalDate;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Properties;

/**
 * pgJDBC through pgcipher-proxy (run by test.sh, from ../run.sh).
 *
 * <p>The same operations on enc_t and on plain_t, through the proxy, with
 * ordinary JDBC code: PreparedStatements run 10 times each with
 * prepareThreshold 0, 1 and 5 and with preferQueryMode=simple, batch
 * inserts (addBatch/executeBatch, also with reWriteBatchedInserts),
 * setObject with and without explicit java.sql.Types, typed setters,
 * ResultSet getters for every type, result and parameter metadata,
 * transactions.  Every result is recorded as text, with the marker prefix
 * PGCMARK-E / PGCMARK-P replaced, and the two tables' records must be
 * equal.  Then, on enc_t, statements the proxy must refuse (SQLSTATE
 * PC001), after which the connection must stay usable.
 */
public final class ClientTest {
    static final String COLS = "id, i4, i4o, i8, i8o, f8, num, t, tm, tr, b, d, ts, bo";
    static final String PH = "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?";
    static final int[] SQL_TYPES = {Types.INTEGER, Types.INTEGER, Types.INTEGER, Types.BIGINT, Types.BIGINT,
        Types.DOUBLE, Types.NUMERIC, Types.VARCHAR, Types.VARCHAR, Types.VARCHAR, Types.BINARY, Types.DATE,
        Types.TIMESTAMP_WITH_TIMEZONE, Types.BOOLEAN};
    static final List<String> problems = new ArrayList<>();
    static String host, port, user, db;
    static boolean direct;

    interface Op {
        String run() throws Exception;
    }

    static final class Side {
        final String tab, mk;
        final List<String[]> items = new ArrayList<>();

        Side(String tab, String mk) {
            this.tab = tab;
            this.mk = mk;
        }

        void add(String label, String value) {
            items.add(new String[] {label.replace(mk, "MK"), value.replace(mk, "MK")});
        }
    }

    static Connection connect(String params) throws SQLException {
        Properties p = new Properties();
        p.setProperty("user", user);
        p.setProperty("sslmode", "disable");
        p.setProperty("connectTimeout", "10");
        p.setProperty("options", "-c TimeZone=UTC");
        return DriverManager.getConnection("jdbc:postgresql://" + host + ":" + port + "/" + db
            + (params.isEmpty() ? "" : "?" + params), p);
    }

    static String firstLine(String s) {
        if (s == null) {
            return "";
        }
        int n = s.indexOf('\n');
        return n < 0 ? s : s.substring(0, n);
    }

    /** An error is a result too: it differs from plain_t's, which has none. */
    static void op(Connection c, Side s, String label, Op fn) {
        try {
            s.add(label, fn.run());
        } catch (Exception e) {
            String state = e instanceof SQLException se ? se.getSQLState() : e.getClass().getSimpleName();
            try {
                if (!c.getAutoCommit()) {
                    c.rollback();
                }
            } catch (SQLException ignored) {
                // the connection is gone: later steps will say so
            }
            s.add(label, "ERROR " + state + ": " + firstLine(e.getMessage()));
        }
    }

    static Object[] row(int i, String mk) {
        Object[] r = {i, i % 7, i * 3 - 50, (long) (i % 5) * 3000000000L - 6000000000L, 1000000000L - i * 123456789L,
            i * 1.1 - 7, new BigDecimal(String.format("%d.%02d", i % 9 - 4, (i * 7) % 100)), mk + "-jdbc-t" + (i % 6),
            mk + "-jdbc-m" + i + " word" + (i % 4) + " lorem", mk + "-jdbc-r" + i,
            new byte[] {(byte) (i % 16), (byte) (255 - i % 5)}, LocalDate.of(2024, 1 + i % 12, 1 + (i * 7) % 28),
            OffsetDateTime.of(2024, 1 + (i * 5) % 12, 1 + i % 28, i % 24, i % 60, (i * 7) % 60, (i * 1000 % 999999) * 1000,
                ZoneOffset.ofHours(i % 3)),
            i % 3 == 0};
        int[] nullEvery = {0, 10, 17, 11, 13, 12, 9, 9, 14, 4, 8, 15, 16, 7};
        for (int k = 1; k < r.length; k++) {
            if (i % nullEvery[k] == 0) {
                r[k] = null;
            }
        }
        return r;
    }

    /** Typed setters (setInt, setLong, ..., setNull with its type). */
    static void setTyped(PreparedStatement ps, Object[] r) throws SQLException {
        for (int k = 0; k < r.length; k++) {
            int p = k + 1;
            if (r[k] == null) {
                ps.setNull(p, SQL_TYPES[k]);
                continue;
            }
            switch (k) {
                case 0, 1, 2 -> ps.setInt(p, (Integer) r[k]);
                case 3, 4 -> ps.setLong(p, (Long) r[k]);
                case 5 -> ps.setDouble(p, (Double) r[k]);
                case 6 -> ps.setBigDecimal(p, (BigDecimal) r[k]);
                case 7, 8, 9 -> ps.setString(p, (String) r[k]);
                case 10 -> ps.setBytes(p, (byte[]) r[k]);
                case 11 -> ps.setDate(p, java.sql.Date.valueOf((LocalDate) r[k]));
                case 12 -> ps.setTimestamp(p, Timestamp.from(((OffsetDateTime) r[k]).toInstant()));
                default -> ps.setBoolean(p, (Boolean) r[k]);
            }
        }
    }

    /** Every column through the getters of its type, getObject and getString. */
    static String rows(ResultSet rs) throws SQLException {
        StringBuilder sb = new StringBuilder();
        ResultSetMetaData md = rs.getMetaData();
        int n = 0;
        while (rs.next()) {
            n++;
            sb.append('(');
            for (int i = 1; i <= md.getColumnCount(); i++) {
                if (i > 1) {
                    sb.append(", ");
                }
                sb.append(value(rs, i, md.getColumnLabel(i)));
            }
            sb.append(")\n");
        }
        return sb.append(n).append(" rows").toString();
    }

    static String value(ResultSet rs, int i, String name) throws SQLException {
        Object o = rs.getObject(i);
        if (o == null) {
            return rs.wasNull() ? "NULL" : "null but not wasNull";
        }
        String typed = switch (name) {
            case "id", "i4", "i4o" -> Integer.toString(rs.getInt(i));
            case "i8", "i8o" -> Long.toString(rs.getLong(i)) + "/" + rs.getBigDecimal(i);
            case "f8" -> Double.toString(rs.getDouble(i)) + "/" + rs.getFloat(i);
            case "num" -> rs.getBigDecimal(i).toPlainString() + "/" + rs.getDouble(i);
            case "t", "tm", "tr" -> "'" + rs.getString(i) + "'";
            case "b" -> HexFormat.of().formatHex(rs.getBytes(i));
            case "d" -> rs.getDate(i) + "/" + rs.getObject(i, LocalDate.class);
            case "ts" -> rs.getTimestamp(i).toInstant() + "/" + rs.getObject(i, OffsetDateTime.class);
            case "bo" -> Boolean.toString(rs.getBoolean(i));
            default -> rs.getString(i);
        };
        String s = o instanceof byte[] ? "bytes" : rs.getString(i);
        return typed + ":" + o.getClass().getSimpleName() + ":" + s;
    }

    static String query(Connection c, String sql, Object... params) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            for (int k = 0; k < params.length; k++) {
                ps.setObject(k + 1, params[k]);
            }
            try (ResultSet rs = ps.executeQuery()) {
                return rows(rs);
            }
        }
    }

    interface Binder {
        void bind(PreparedStatement ps, int k) throws SQLException;
    }

    static void run(Side s) throws SQLException {
        String tab = s.tab, mk = s.mk;
        try (Connection c = connect("")) {
            // batches: typed setters; setObject without types; setObject with types
            String ins = "INSERT INTO " + tab + " (" + COLS + ") VALUES (" + PH + ")";
            op(c, s, "batch insert, typed setters", () -> {
                try (PreparedStatement ps = c.prepareStatement(ins)) {
                    for (int i = 1; i <= 20; i++) {
                        setTyped(ps, row(i, mk));
                        ps.addBatch();
                    }
                    return Arrays.toString(ps.executeBatch());
                }
            });
            op(c, s, "batch insert, setObject(i, v)", () -> {
                try (PreparedStatement ps = c.prepareStatement(ins)) {
                    for (int i = 21; i <= 40; i++) {
                        Object[] r = row(i, mk);
                        for (int k = 0; k < r.length; k++) {
                            if (r[k] == null) {
                                ps.setNull(k + 1, SQL_TYPES[k]);
                            } else {
                                ps.setObject(k + 1, r[k]);
                            }
                        }
                        ps.addBatch();
                    }
                    return Arrays.toString(ps.executeBatch());
                }
            });
            op(c, s, "batch insert, setObject(i, v, Types.X)", () -> {
                try (PreparedStatement ps = c.prepareStatement(ins)) {
                    for (int i = 41; i <= 60; i++) {
                        Object[] r = row(i, mk);
                        for (int k = 0; k < r.length; k++) {
                            ps.setObject(k + 1, r[k], SQL_TYPES[k]);
                        }
                        ps.addBatch();
                    }
                    return Arrays.toString(ps.executeBatch());
                }
            });
            op(c, s, "setObject(i, String, Types.X) conversions", () -> {
                try (PreparedStatement ps = c.prepareStatement(ins)) {
                    String[] text = {"61", "42", "-7", "5000000000", "-5000000000", "2.5", "99.990", mk + "-jdbc-conv",
                        mk + "-jdbc-conv text", mk + "-jdbc-rconv", null, null, null, "true"};
                    for (int k = 0; k < text.length; k++) {
                        if (text[k] == null) {
                            ps.setNull(k + 1, SQL_TYPES[k]);
                        } else {
                            ps.setObject(k + 1, text[k], SQL_TYPES[k]);
                        }
                    }
                    ps.setObject(11, new byte[0], Types.VARBINARY);
                    ps.setObject(12, java.sql.Date.valueOf("2024-02-29"), Types.DATE);
                    ps.setObject(13, OffsetDateTime.parse("2024-02-29T23:59:59.123456+05:30"), Types.TIMESTAMP_WITH_TIMEZONE);
                    return Integer.toString(ps.executeUpdate());
                }
            });
            try (Connection rw = connect("reWriteBatchedInserts=true")) {
                op(rw, s, "batch insert, reWriteBatchedInserts", () -> {
                    try (PreparedStatement ps = rw.prepareStatement(ins)) {
                        for (int i = 62; i <= 70; i++) {
                            setTyped(ps, row(i, mk));
                            ps.addBatch();
                        }
                        return Arrays.toString(ps.executeBatch());
                    }
                });
            }
            op(c, s, "SELECT * getters", () -> query(c, "SELECT " + COLS + " FROM " + tab + " ORDER BY id"));
            op(c, s, "result metadata", () -> {
                try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT " + COLS + " FROM " + tab + " LIMIT 1")) {
                    ResultSetMetaData md = rs.getMetaData();
                    StringBuilder sb = new StringBuilder();
                    for (int i = 1; i <= md.getColumnCount(); i++) {
                        sb.append(md.getColumnLabel(i)).append(' ').append(md.getColumnTypeName(i)).append(' ')
                            .append(md.getColumnType(i)).append(' ').append(md.getColumnClassName(i)).append("; ");
                    }
                    return sb.toString();
                }
            });
            op(c, s, "parameter metadata", () -> {
                try (PreparedStatement ps = c.prepareStatement("SELECT id FROM " + tab
                        + " WHERE i4 = ? AND i8o < ? AND f8 > ? AND num = ? AND t = ? AND b = ? AND d > ? AND ts < ? AND bo = ?")) {
                    ParameterMetaData pm = ps.getParameterMetaData();
                    StringBuilder sb = new StringBuilder();
                    for (int i = 1; i <= pm.getParameterCount(); i++) {
                        sb.append(pm.getParameterTypeName(i)).append(' ').append(pm.getParameterType(i)).append("; ");
                    }
                    return sb.toString();
                }
            });

            // each query 10 times per connection setting: prepareThreshold 0
            // (never a named statement), 1 (named from the first run, binary
            // results), 5 (switches after 5 runs), and the simple protocol
            String sel = "SELECT " + COLS + " FROM " + tab + " WHERE ";
            Object[][] queries = {
                {sel + "i4 = ? ORDER BY id", (Binder) (ps, k) -> ps.setInt(1, k % 7)},
                {sel + "i4 IN (?, ?) ORDER BY id", (Binder) (ps, k) -> {
                    ps.setInt(1, k % 7);
                    ps.setObject(2, (k + 3) % 7);
                }},
                {sel + "i4o BETWEEN ? AND ? ORDER BY i4o", (Binder) (ps, k) -> {
                    ps.setInt(1, k * 10 - 50);
                    ps.setInt(2, k * 10 - 30);
                }},
                {sel + "i8o < ? ORDER BY i8o DESC LIMIT 4", (Binder) (ps, k) -> ps.setLong(1, -k * 500000000L)},
                {sel + "i8 = ? ORDER BY id", (Binder) (ps, k) -> ps.setObject(1, (k % 5) * 3000000000L - 6000000000L, Types.BIGINT)},
                {sel + "f8 >= ? ORDER BY f8 LIMIT 5", (Binder) (ps, k) -> ps.setDouble(1, k * 5.5 - 3)},
                {sel + "num = ? ORDER BY id", (Binder) (ps, k) -> ps.setBigDecimal(1, new BigDecimal(String.format("%d.%02d", k % 9 - 4, (k * 7) % 100)))},
                {sel + "t = ? ORDER BY id", (Binder) (ps, k) -> ps.setString(1, mk + "-jdbc-t" + (k % 6))},
                {sel + "tm LIKE ? ORDER BY id", (Binder) (ps, k) -> ps.setString(1, "%jdbc-m" + k + "%")},
                {sel + "b = ? ORDER BY id", (Binder) (ps, k) -> ps.setBytes(1, new byte[] {(byte) (k % 16), (byte) (255 - k % 5)})},
                {sel + "bo = ? AND i4 = ? ORDER BY id", (Binder) (ps, k) -> {
                    ps.setBoolean(1, k % 2 == 0);
                    ps.setObject(2, k % 7, Types.INTEGER);
                }},
                {sel + "d > ? ORDER BY d, id LIMIT 4", (Binder) (ps, k) -> ps.setDate(1, java.sql.Date.valueOf(LocalDate.of(2024, 1 + k, 10)))},
                {sel + "d <= ? ORDER BY d DESC, id LIMIT 4", (Binder) (ps, k) -> ps.setObject(1, LocalDate.of(2024, 2 + k, 1))},
                {sel + "ts < ? ORDER BY ts DESC LIMIT 4", (Binder) (ps, k) -> ps.setTimestamp(1, Timestamp.from(
                    OffsetDateTime.of(2024, 1 + k, 15, 0, 0, 0, 0, ZoneOffset.UTC).toInstant()))},
                {sel + "ts >= ? ORDER BY ts LIMIT 4", (Binder) (ps, k) -> ps.setObject(1,
                    OffsetDateTime.of(2024, 2 + k, 1, 12, 0, 0, 0, ZoneOffset.ofHours(2)))},
                {sel + "i4 IS NULL AND id > ? ORDER BY id", (Binder) (ps, k) -> ps.setInt(1, k * 5)},
                {"SELECT i4, count(*), min(id) FROM " + tab + " WHERE i4o > ? GROUP BY i4 ORDER BY 3",
                    (Binder) (ps, k) -> ps.setInt(1, k * 10 - 50)},
                {"SELECT min(ts), max(d), min(f8), max(i8o) FROM " + tab + " WHERE t <> ?",
                    (Binder) (ps, k) -> ps.setString(1, mk + "-jdbc-t" + (k % 6))},
            };
            for (String mode : new String[] {"prepareThreshold=0", "prepareThreshold=1", "prepareThreshold=5",
                    "preferQueryMode=simple"}) {
                try (Connection q = connect(mode)) {
                    for (Object[] qb : queries) {
                        String sql = (String) qb[0];
                        Binder b = (Binder) qb[1];
                        op(q, s, mode + " 10x " + sql.replace(tab, "TAB"), () -> {
                            StringBuilder sb = new StringBuilder();
                            try (PreparedStatement ps = q.prepareStatement(sql)) {
                                for (int k = 0; k < 10; k++) {
                                    b.bind(ps, k);
                                    try (ResultSet rs = ps.executeQuery()) {
                                        sb.append(k).append(": ").append(rows(rs)).append('\n');
                                    }
                                }
                            }
                            return sb.toString();
                        });
                    }
                    op(q, s, mode + " 10x UPDATE", () -> {
                        StringBuilder sb = new StringBuilder();
                        try (PreparedStatement ps = q.prepareStatement("UPDATE " + tab + " SET tr = ?, i4o = ? WHERE i4 = ? AND id < ?")) {
                            for (int k = 0; k < 10; k++) {
                                ps.setString(1, mk + "-jdbc-upd-" + k);
                                ps.setInt(2, 1000 + k);
                                ps.setInt(3, k % 7);
                                ps.setInt(4, 10 + k * 4);
                                sb.append(ps.executeUpdate()).append(' ');
                            }
                        }
                        return sb.toString();
                    });
                }
            }

            op(c, s, "batch UPDATE", () -> {
                try (PreparedStatement ps = c.prepareStatement("UPDATE " + tab + " SET tm = ?, d = ? WHERE t = ?")) {
                    for (int k = 0; k < 6; k++) {
                        ps.setString(1, mk + "-jdbc-bupd" + k);
                        ps.setObject(2, LocalDate.of(2030, 1, 1 + k));
                        ps.setString(3, mk + "-jdbc-t" + k);
                        ps.addBatch();
                    }
                    return Arrays.toString(ps.executeBatch());
                }
            });
            op(c, s, "DELETE", () -> {
                try (PreparedStatement ps = c.prepareStatement("DELETE FROM " + tab + " WHERE i4o > ? AND bo = ?")) {
                    ps.setInt(1, 100);
                    ps.setBoolean(2, true);
                    return Integer.toString(ps.executeUpdate());
                }
            });
            op(c, s, "transaction rolled back", () -> {
                c.setAutoCommit(false);
                try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + tab + " (id, t, ts) VALUES (?, ?, ?)")) {
                    ps.setInt(1, 90);
                    ps.setString(2, mk + "-jdbc-rb");
                    ps.setObject(3, OffsetDateTime.now());
                    ps.executeUpdate();
                    String inside = query(c, "SELECT id, t FROM " + tab + " WHERE t = ?", mk + "-jdbc-rb");
                    c.rollback();
                    return inside + " / after: " + query(c, "SELECT id FROM " + tab + " WHERE id = ?", 90);
                } finally {
                    c.setAutoCommit(true);
                }
            });
            op(c, s, "final SELECT *", () -> query(c, "SELECT " + COLS + " FROM " + tab + " ORDER BY id"));
        }
    }

    static int refusals() throws SQLException {
        int n = 0;
        String[][] cases = {
            {"prepareThreshold=0", "SELECT md5(t) FROM enc_t", null},
            {"prepareThreshold=1", "SELECT id FROM enc_t WHERE tr = ?", "PGCMARK-E-jdbc-x"},
            {"prepareThreshold=5", "SELECT id FROM enc_t WHERE i4 < ?", "3"},
            {"preferQueryMode=simple", "SELECT string_agg(t, ',') FROM enc_t WHERE t = ?", "PGCMARK-E-jdbc-y"},
        };
        for (String[] cs : cases) {
            try (Connection c = connect(cs[0])) {
                c.setAutoCommit(false);
                try (PreparedStatement ps = c.prepareStatement("INSERT INTO enc_t (id, t) VALUES (?, ?)")) {
                    ps.setInt(1, 95);
                    ps.setString(2, "PGCMARK-E-jdbc-refused");
                    ps.executeUpdate();
                }
                try (PreparedStatement ps = c.prepareStatement(cs[1])) {
                    if (cs[2] != null) {
                        ps.setString(1, cs[2]);
                    }
                    ps.executeQuery().close();
                    problems.add("refusal " + cs[0] + " " + cs[1] + ": not refused");
                } catch (SQLException e) {
                    if (!"PC001".equals(e.getSQLState())) {
                        problems.add("refusal " + cs[0] + " " + cs[1] + ": SQLSTATE " + e.getSQLState() + ", want PC001: "
                            + firstLine(e.getMessage()));
                    }
                    n++;
                }
                c.rollback();
                String after = query(c, "SELECT count(*) FROM enc_t WHERE id = ? OR t = ?", 95, "PGCMARK-E-jdbc-refused");
                if (!after.startsWith("(0:")) {
                    problems.add("refusal " + cs[0] + ": after rollback: " + after);
                }
            }
        }
        return n;
    }

    public static void main(String[] args) throws Exception {
        host = System.getenv("PGC_HOST");
        port = System.getenv("PGC_PORT");
        user = System.getenv("PGC_USER");
        db = System.getenv("PGC_DB");
        direct = "1".equals(System.getenv("PGC_DIRECT"));
        Side enc = new Side("enc_t", "PGCMARK-E"), plain = new Side("plain_t", "PGCMARK-P");
        run(enc);
        run(plain);
        String scratch = System.getenv("PGC_SCRATCH");
        for (Side s : new Side[] {enc, plain}) {
            StringBuilder sb = new StringBuilder();
            for (String[] it : s.items) {
                sb.append(it[0]).append("\n    ").append(it[1].replace("\n", "\n    ")).append('\n');
            }
            java.nio.file.Files.writeString(java.nio.file.Path.of(scratch, "results-" + s.tab + ".txt"), sb);
        }
        for (String[] it : plain.items) {
            if (it[1].startsWith("ERROR")) {
                problems.add("plain_t (a bug of the test): " + it[0] + ": " + it[1]);
            }
        }
        if (enc.items.size() != plain.items.size()) {
            problems.add("the two runs recorded a different number of steps");
        }
        int differ = 0;
        for (int i = 0; i < Math.min(enc.items.size(), plain.items.size()); i++) {
            String e = enc.items.get(i)[1], p = plain.items.get(i)[1];
            if (!e.equals(p)) {
                differ++;
                int at = 0;
                while (at < Math.min(e.length(), p.length()) && e.charAt(at) == p.charAt(at)) {
                    at++;
                }
                int lo = Math.max(0, at - 120);
                problems.add("differs: " + enc.items.get(i)[0] + " (at character " + at + ")\n      plain_t: ..."
                    + p.substring(lo, Math.min(p.length(), at + 200)).replace("\n", "\\n") + "\n      enc_t:   ..."
                    + e.substring(lo, Math.min(e.length(), at + 200)).replace("\n", "\\n"));
            }
        }
        if (differ == 0 && problems.isEmpty()) {
            System.out.println("check: pgJDBC " + org.postgresql.Driver.getVersion() + ": " + enc.items.size()
                + " results identical on enc_t and plain_t (prepareThreshold 0/1/5 and preferQueryMode=simple, 10 runs"
                + " of each statement; batches, reWriteBatchedInserts, setObject with and without Types, getters of every type,"
                + " metadata, rollback)");
        }
        if (!direct) {
            int before = problems.size();
            int n = refusals();
            if (problems.size() == before) {
                System.out.println("check: " + n + " statements refused with PC001 (prepareThreshold 0/1/5, simple mode);"
                    + " the refused transaction rolls back, the connection stays usable");
            }
        }
        for (int i = 0; i < problems.size(); i++) {
            if (i == 40) {
                System.out.println("jdbc: ... and " + (problems.size() - 40) + " more (results-*.txt in the scratch directory)");
                break;
            }
            System.out.println("jdbc: " + problems.get(i));
        }
        System.exit(problems.isEmpty() ? 0 : 1);
    }
}
