// Hibernate ORM 6 on pgJDBC through pgcipher-proxy, unchanged.
//
// Every operation of OPERATIONS runs on PlainPatient (patient_plain, the
// plaintext twin, through a SessionFactory connected directly to the
// server) and on Patient (patient, encrypted columns, through one connected
// to the proxy) and the results are compared, as the Python harnesses do
// (../common.py: the verdicts, the markers PGCM-E- and PGCM-P-).
//
// Usage: java pgcipher.orm.Harness OUT.json
// Environment: PGC_HOST, PGC_SERVER_PORT (direct), PGC_PROXY_PORT, PGC_DB,
// PGC_USER.
package pgcipher.orm;

import jakarta.persistence.Column;
import jakarta.persistence.Entity;
import jakarta.persistence.FetchType;
import jakarta.persistence.Id;
import jakarta.persistence.JoinColumn;
import jakarta.persistence.LockModeType;
import jakarta.persistence.ManyToOne;
import jakarta.persistence.MappedSuperclass;
import jakarta.persistence.Table;
import jakarta.persistence.criteria.CriteriaBuilder;
import jakarta.persistence.criteria.CriteriaQuery;
import jakarta.persistence.criteria.Root;
import java.io.FileWriter;
import java.io.IOException;
import java.math.BigDecimal;
import java.sql.SQLException;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.function.BiFunction;
import org.hibernate.Session;
import org.hibernate.SessionFactory;
import org.hibernate.Transaction;
import org.hibernate.cfg.Configuration;

public final class Harness {
    static final String[] CITIES = {"PGCM-E-Oslo", "PGCM-E-Rome", "PGCM-E-Lima"};

    @Entity(name = "Ward")
    @Table(name = "ward")
    public static class Ward {
        @Id Integer id;
        String name;

        // a lazy reference's identifier, without loading it
        public Integer getId() {
            return id;
        }
    }

    /** The columns of both tables; which are encrypted is the server's business. */
    @MappedSuperclass
    public abstract static class Base {
        @Id Integer id;
        String city; // EQ
        String name; // MATCH
        String ssn; // EQ
        LocalDate born; // ORD
        BigDecimal balance; // ORD
        Integer visits; // ORD
        String notes; // RND
        Boolean active; // plaintext
        @ManyToOne(fetch = FetchType.LAZY)
        @JoinColumn(name = "ward_id")
        Ward ward;

        String row() {
            return String.join("|", String.valueOf(id), city, name, ssn, String.valueOf(born),
                    balance == null ? "null" : balance.stripTrailingZeros().toPlainString(), String.valueOf(visits),
                    String.valueOf(notes), String.valueOf(active), ward == null ? "null" : String.valueOf(ward.getId()));
        }
    }

    @Entity(name = "Patient")
    @Table(name = "patient")
    public static class Patient extends Base {}

    @Entity(name = "PlainPatient")
    @Table(name = "patient_plain")
    public static class PlainPatient extends Base {}

    /** Declared from Hibernate (Encrypted.java): the table made by Hibernate's schema export. */
    @Entity(name = "Visit")
    @Table(name = "visit")
    public static class Visit {
        @Id Integer id;
        @Column(columnDefinition = "enc_text") String reason; // MATCH
        @Column(columnDefinition = "enc_numeric_ord") BigDecimal cost; // ORD
        @Column(columnDefinition = "enc_date_ord") LocalDate day; // ORD
        @Column(length = 80) String email; // plaintext until moved
    }

    /** One operation: f(session, entity class name, entity class) gives a comparable result. */
    record Op(String name, boolean write, BiFunction<Session, Class<? extends Base>, Object> f) {}

    static final List<Op> OPERATIONS = new ArrayList<>();

    static void op(String name, BiFunction<Session, Class<? extends Base>, Object> f) {
        OPERATIONS.add(new Op(name, false, f));
    }

    static void write(String name, BiFunction<Session, Class<? extends Base>, Object> f) {
        OPERATIONS.add(new Op(name, true, f));
    }

    static String e(Class<? extends Base> c) {
        return c.getSimpleName();
    }

    static Object norm(Object v) {
        if (v instanceof Base b) return b.row();
        if (v instanceof BigDecimal d) return d.stripTrailingZeros().toPlainString();
        if (v instanceof Double d) return String.format("%.6f", d);
        if (v instanceof Object[] a) {
            List<Object> l = new ArrayList<>();
            for (Object x : a) l.add(norm(x));
            return l;
        }
        if (v instanceof List<?> l) {
            List<Object> out = new ArrayList<>();
            for (Object x : l) out.add(norm(x));
            return out;
        }
        return v == null ? null : v.toString();
    }

    static Object unordered(List<?> rows) {
        List<String> out = new ArrayList<>();
        for (Object r : rows) out.add(String.valueOf(norm(r)));
        Collections.sort(out);
        return out;
    }

    static <T extends Base> T fill(T p, int id, String city, String name, String ssn, LocalDate born, String balance,
            int visits, String notes, boolean active, Session s, Integer ward) {
        p.id = id;
        p.city = city;
        p.name = name;
        p.ssn = ssn;
        p.born = born;
        p.balance = new BigDecimal(balance);
        p.visits = visits;
        p.notes = notes;
        p.active = active;
        p.ward = ward == null ? null : s.getReference(Ward.class, ward);
        return p;
    }

    static Base newRow(Class<? extends Base> c) {
        return c == Patient.class ? new Patient() : new PlainPatient();
    }

    /** The starting rows, as ../common.py's seed_rows. */
    static void seed(Session s, Class<? extends Base> c) {
        for (int i = 1; i <= 24; i++) {
            s.persist(fill(newRow(c), i, CITIES[i % 3], String.format("PGCM-E-name-%02d %s", i, i % 4 == 0 ? "Smith" : "Jones"),
                    String.format("PGCM-E-%d-%02d", 100 + i, i * 7 % 100), LocalDate.of(1950 + i * 2, i % 12 + 1, i % 27 + 1),
                    String.format("%d.%d5", (i * 37) % 500, i % 10), (i * 5) % 17, i % 5 == 0 ? null : "PGCM-E-note-" + i,
                    i % 3 != 0, s, (i % 2) + 1));
        }
    }

    static {
        // --- reads -----------------------------------------------------------
        op("from Patient (all)", (s, c) -> unordered(s.createQuery("from " + e(c), c).list()));
        op("find by id", (s, c) -> norm(s.find(c, 3)));
        op("where = :p (EQ)", (s, c) -> norm(s.createQuery("from " + e(c) + " p where p.ssn = :v", c)
                .setParameter("v", "PGCM-E-105-35").getSingleResult()));
        op("where <> (EQ)", (s, c) -> unordered(s.createQuery("from " + e(c) + " p where p.city <> :v", c)
                .setParameter("v", "PGCM-E-Oslo").list()));
        op("in (:list) (EQ)", (s, c) -> unordered(s.createQuery("from " + e(c) + " p where p.city in (:v)", c)
                .setParameterList("v", List.of("PGCM-E-Rome", "PGCM-E-Lima")).list()));
        op("like contains (MATCH)", (s, c) -> unordered(s.createQuery("from " + e(c) + " p where p.name like :v", c)
                .setParameter("v", "%PGCM-E-name-1%").list()));
        op("like prefix and = (MATCH, EQ)", (s, c) -> unordered(s.createQuery(
                "from " + e(c) + " p where p.name like :v and p.city = :c", c)
                .setParameter("v", "PGCM-E-name-2%").setParameter("c", "PGCM-E-Oslo").list()));
        op("lower() like (MATCH)", (s, c) -> unordered(s.createQuery("from " + e(c) + " p where lower(p.name) like :v", c)
                .setParameter("v", "%smith").list()));
        op("> date (ORD)", (s, c) -> unordered(s.createQuery("from " + e(c) + " p where p.born > :v", c)
                .setParameter("v", LocalDate.of(1980, 1, 1)).list()));
        op("between int (ORD)", (s, c) -> unordered(s.createQuery("from " + e(c) + " p where p.visits between :a and :b", c)
                .setParameter("a", 3).setParameter("b", 9).list()));
        op(">= numeric (ORD)", (s, c) -> unordered(s.createQuery("from " + e(c) + " p where p.balance >= :v", c)
                .setParameter("v", new BigDecimal("300")).list()));
        op("is null (RND)", (s, c) -> unordered(s.createQuery("from " + e(c) + " p where p.notes is null", c).list()));
        op("or", (s, c) -> unordered(s.createQuery("from " + e(c) + " p where p.city = :c or p.visits >= :v", c)
                .setParameter("c", "PGCM-E-Lima").setParameter("v", 15).list()));
        op("= on RND", (s, c) -> unordered(s.createQuery("from " + e(c) + " p where p.notes = :v", c)
                .setParameter("v", "PGCM-E-note-1").list()));
        op("criteria equal (EQ)", (s, c) -> {
            CriteriaBuilder cb = s.getCriteriaBuilder();
            CriteriaQuery<? extends Base> q = cb.createQuery(c);
            Root<? extends Base> r = q.from(c);
            q.where(cb.equal(r.get("city"), "PGCM-E-Rome"));
            return unordered(s.createQuery(q).list());
        });
        op("order by date, max results", (s, c) -> norm(s.createQuery("from " + e(c) + " p order by p.born", c)
                .setMaxResults(5).list()));
        op("order by int desc, id, first result", (s, c) -> norm(s.createQuery(
                "from " + e(c) + " p order by p.visits desc, p.id", c).setFirstResult(3).setMaxResults(4).list()));
        op("order by EQ", (s, c) -> norm(s.createQuery("from " + e(c) + " p order by p.city, p.id", c).list()));
        op("like with max results", (s, c) -> norm(s.createQuery("from " + e(c) + " p where p.name like :v order by p.id", c)
                .setParameter("v", "%Jones%").setMaxResults(2).list()));
        op("count", (s, c) -> norm(s.createQuery("select count(p) from " + e(c) + " p where p.visits > 3", Long.class)
                .getSingleResult()));
        op("select distinct (EQ)", (s, c) -> unordered(s.createQuery("select distinct p.city from " + e(c) + " p", String.class)
                .list()));
        op("aggregates", (s, c) -> norm(s.createQuery("select count(p.id), sum(p.balance), avg(p.visits), min(p.visits), "
                + "max(p.born) from " + e(c) + " p", Object[].class).getSingleResult()));
        op("count distinct (EQ)", (s, c) -> norm(s.createQuery("select count(distinct p.city) from " + e(c) + " p", Long.class)
                .getSingleResult()));
        op("group by EQ, sum", (s, c) -> unordered(s.createQuery(
                "select p.city, sum(p.balance), count(p) from " + e(c) + " p group by p.city", Object[].class).list()));
        op("expression with a parameter", (s, c) -> norm(s.createQuery(
                "select p.id, p.visits * :k + 1 from " + e(c) + " p order by p.id", Object[].class)
                .setParameter("k", 2).list()));
        op("join ward", (s, c) -> unordered(s.createQuery(
                "select p.ssn, w.name from " + e(c) + " p join p.ward w where w.name = :n", Object[].class)
                .setParameter("n", "PGCM-P-ward-1").list()));
        op("native query (EQ)", (s, c) -> norm(s.createNativeQuery(
                "select count(*) from " + (c == Patient.class ? "patient" : "patient_plain") + " where city = :v", Long.class)
                .setParameter("v", "PGCM-E-Rome").getSingleResult()));

        // --- writes ----------------------------------------------------------
        write("persist one", (s, c) -> {
            s.persist(fill(newRow(c), 200, "PGCM-E-Oslo", "PGCM-E-name-new Jones", "PGCM-E-900-01", LocalDate.of(2001, 2, 3),
                    "12.34", 1, "PGCM-E-note-new", true, s, 1));
            s.flush();
            return "ok";
        });
        write("persist many (batched)", (s, c) -> {
            for (int i = 0; i < 5; i++) {
                s.persist(fill(newRow(c), 210 + i, CITIES[i % 3], "PGCM-E-bulk-" + i + " Jones",
                        String.format("PGCM-E-800-%02d", i), LocalDate.of(1990, 1, i + 1), i + ".50", i,
                        "PGCM-E-bulk-note-" + i, true, s, 2));
            }
            s.flush();
            return "ok";
        });
        write("dirty checking update", (s, c) -> {
            Base p = s.find(c, 4);
            p.notes = "PGCM-E-dirty";
            p.balance = p.balance.add(BigDecimal.ONE);
            s.flush();
            return "ok";
        });
        write("update set where (HQL)", (s, c) -> s.createMutationQuery(
                "update " + e(c) + " p set p.notes = :n, p.visits = 33 where p.city = :c")
                .setParameter("n", "PGCM-E-updated").setParameter("c", "PGCM-E-Lima").executeUpdate());
        write("update set visits + 1 (HQL)", (s, c) -> s.createMutationQuery(
                "update " + e(c) + " p set p.visits = p.visits + 1 where p.city = :c")
                .setParameter("c", "PGCM-E-Rome").executeUpdate());
        write("merge a detached entity", (s, c) -> {
            Base p = fill(newRow(c), 5, "PGCM-E-Oslo", "PGCM-E-merged Jones", "PGCM-E-105-35", LocalDate.of(1960, 6, 6),
                    "185.55", 8, "PGCM-E-merged", true, s, 2);
            s.merge(p);
            s.flush();
            return "ok";
        });
        write("pessimistic lock, update", (s, c) -> {
            Base p = s.createQuery("from " + e(c) + " p where p.ssn = :v", c).setParameter("v", "PGCM-E-106-42")
                    .setLockMode(LockModeType.PESSIMISTIC_WRITE).getSingleResult();
            p.visits = p.visits + 10;
            s.flush();
            return p.visits;
        });
        write("remove", (s, c) -> {
            s.remove(s.find(c, 7));
            s.flush();
            return "ok";
        });
        write("delete where (HQL)", (s, c) -> s.createMutationQuery(
                "delete from " + e(c) + " p where p.city = :c and p.visits < 3")
                .setParameter("c", "PGCM-E-Lima").executeUpdate());
    }

    static SessionFactory factory(String port) {
        return config(port).addAnnotatedClass(Ward.class).addAnnotatedClass(Patient.class)
                .addAnnotatedClass(PlainPatient.class).setProperty("hibernate.hbm2ddl.auto", "none").buildSessionFactory();
    }

    static Configuration config(String port) {
        String url = "jdbc:postgresql://" + System.getenv().getOrDefault("PGC_HOST", "127.0.0.1") + ":" + port + "/"
                + System.getenv("PGC_DB") + "?sslmode=disable";
        return new Configuration()
                .setProperty("hibernate.connection.url", url)
                .setProperty("hibernate.connection.username", System.getenv("PGC_USER"))
                .setProperty("hibernate.connection.pool_size", "2")
                .setProperty("hibernate.jdbc.batch_size", "20");
    }

    interface Check {
        String[] run(); // what was got, what was wanted
    }

    /**
     * Encrypted columns declared from Hibernate (Encrypted.java): the table made by Hibernate's schema
     * export (hbm2ddl create) through the proxy and bound by encryptColumns; then a live plaintext column
     * moved to encrypted by moveToEncrypted. Each step is checked against what the application wrote (no
     * twin: the point is the schema).
     */
    static void declaring(StringBuilder out, int[] n) {
        List<Visit> rows = new ArrayList<>();
        for (int i = 1; i <= 12; i++) {
            Visit v = new Visit();
            v.id = i;
            v.reason = "PGCM-E-reason-" + i + (i % 2 == 1 ? " flu" : " checkup");
            v.cost = new BigDecimal((i * 13) % 90 + ".25");
            v.day = LocalDate.of(2024, i % 12 + 1, i % 27 + 1);
            v.email = "PGCM-L-" + i + "@example.org"; // plaintext until moved: not a leak
            rows.add(v);
        }
        SessionFactory[] sf = new SessionFactory[1];
        String types = "select format_type(atttypid, NULL) from pg_attribute where attrelid = 'visit'::regclass and attnum > 0";
        step(out, n, "declare: schema export (create), encryptColumns", () -> {
            sf[0] = config(System.getenv("PGC_PROXY_PORT")).addAnnotatedClass(Visit.class)
                    .setProperty("hibernate.hbm2ddl.auto", "create").buildSessionFactory();
            sf[0].inSession(s -> Encrypted.encryptColumns(s, "visit",
                    java.util.Map.of("reason", "MATCH", "cost", "ORD", "day", "ORD"), "k1"));
            return new String[] {sf[0].fromSession(s -> s.createNativeQuery(
                    "select attname || ' ' || format_type(atttypid, NULL) from pg_attribute where attrelid = 'visit'::regclass"
                    + " and attnum > 0 order by attname", String.class).list().toString()),
                    "[cost enc_numeric_ord, day enc_date_ord, email character varying, id integer, reason enc_text]"};
        });
        step(out, n, "declare: persist and lookups on the declared columns", () -> {
            sf[0].inTransaction(s -> rows.forEach(s::persist));
            List<String> want1 = new ArrayList<>(), want2 = new ArrayList<>(), want3 = new ArrayList<>();
            rows.stream().filter(r -> r.reason.contains("flu")).forEach(r -> want1.add(r.reason));
            Collections.sort(want1);
            rows.stream().filter(r -> r.day.isAfter(LocalDate.of(2024, 6, 1))).map(r -> r.cost).sorted()
                    .forEach(c -> want2.add(c.toPlainString()));
            rows.stream().map(r -> r.day).sorted().limit(3).forEach(d -> want3.add(d.toString()));
            String got = sf[0].fromSession(s -> {
                List<String> a = new ArrayList<>(s.createQuery("select v.reason from Visit v where v.reason like :p",
                        String.class).setParameter("p", "%flu%").list());
                Collections.sort(a);
                List<String> b = new ArrayList<>();
                s.createQuery("select v.cost from Visit v where v.day > :d order by v.cost", BigDecimal.class)
                        .setParameter("d", LocalDate.of(2024, 6, 1)).list().forEach(c -> b.add(c.toPlainString()));
                List<String> c = new ArrayList<>();
                s.createQuery("select v.day from Visit v order by v.day", LocalDate.class).setMaxResults(3).list()
                        .forEach(d -> c.add(d.toString()));
                return List.of(a, b, c).toString();
            });
            return new String[] {got, List.of(want1, want2, want3).toString()};
        });
        step(out, n, "declare: moveToEncrypted moves a live column", () -> {
            String q = "select id || ' ' || email from visit order by id";
            String before = sf[0].fromSession(s -> s.createNativeQuery(q, String.class).list().toString());
            sf[0].inSession(s -> Encrypted.moveToEncrypted(s, "visit", "email", "k1", "EQ", "text"));
            // as an application restarts after a migration: statements its
            // connections prepared name the old column (the proxy refuses
            // them, as the server refuses a parameter type that no longer
            // fits)
            sf[0].close();
            sf[0] = config(System.getenv("PGC_PROXY_PORT")).addAnnotatedClass(Visit.class)
                    .setProperty("hibernate.hbm2ddl.auto", "none").buildSessionFactory();
            String after = sf[0].fromSession(s -> s.createNativeQuery(q, String.class).list().toString());
            String typ = sf[0].fromSession(s -> s.createNativeQuery(types + " and attname = 'email'", String.class)
                    .getSingleResult());
            return new String[] {after + " " + typ, before + " enc_text"};
        });
        step(out, n, "declare: writes and lookups on the moved column", () -> {
            Visit v = new Visit();
            v.id = 100;
            v.reason = "PGCM-E-reason-new";
            v.cost = BigDecimal.ONE;
            v.day = LocalDate.of(2025, 1, 1);
            v.email = "PGCM-E-mail-new";
            sf[0].inTransaction(s -> s.persist(v));
            return new String[] {sf[0].fromSession(s -> s.createQuery("select v.reason from Visit v where v.email = :e",
                    String.class).setParameter("e", "PGCM-E-mail-new").getSingleResult()), "PGCM-E-reason-new"};
        });
        if (sf[0] != null) sf[0].close();
    }

    static void step(StringBuilder out, int[] n, String name, Check f) {
        String[] v;
        try {
            String[] r = f.run();
            v = r[0].equals(r[1]) ? new String[] {"equal", ""} : new String[] {"wrong", "got " + r[0] + " want " + r[1]};
        } catch (RuntimeException ex) {
            String[] k = errorKind(ex);
            v = new String[] {k[0] != null && k[0].startsWith("PC") ? "refused" : "wrong", k[0] + ": " + k[1]};
        }
        report(out, n, name, v, true);
    }

    static void report(StringBuilder out, int[] n, String name, String[] v, boolean write) {
        System.out.printf("%-8s %s%s%n", v[0], name, v[1].isEmpty() ? "" : ": " + v[1]);
        out.append(n[0]++ == 0 ? "" : ",\n").append("  {\"operation\": ").append(json(name))
                .append(", \"outcome\": ").append(json(v[0])).append(", \"detail\": ").append(json(v[1]))
                .append(", \"write\": ").append(write).append('}');
    }

    static String[] errorKind(Throwable t) {
        for (Throwable x = t; x != null; x = x.getCause()) {
            if (x instanceof SQLException q) {
                for (SQLException n = q; n != null; n = n.getNextException()) {
                    if (n.getSQLState() != null) return new String[] {n.getSQLState(), firstLine(n.getMessage())};
                }
            }
        }
        return new String[] {null, firstLine(String.valueOf(t))};
    }

    static String firstLine(String s) {
        s = s == null ? "" : s.strip();
        int i = s.indexOf('\n');
        return (i < 0 ? s : s.substring(0, i)).replaceFirst("^ERROR: ", "");
    }

    /** ("ok", result) or ("error", sqlstate, message). */
    static Object[] run(SessionFactory sf, Class<? extends Base> c, Op op) {
        try (Session s = sf.openSession()) {
            Transaction tx = s.beginTransaction();
            try {
                Object r = op.f().apply(s, c);
                tx.commit();
                return new Object[] {"ok", String.valueOf(norm(r))};
            } catch (RuntimeException ex) {
                if (tx.isActive()) tx.rollback();
                String[] k = errorKind(ex);
                return new Object[] {"error", k[0], k[1]};
            }
        }
    }

    static String state(SessionFactory sf, Class<? extends Base> c) {
        try (Session s = sf.openSession()) {
            return String.valueOf(norm(s.createQuery("from " + e(c) + " p order by p.id", c).list()));
        }
    }

    static String[] verdict(Object[] plain, Object[] enc) {
        if (enc[0].equals("error") && enc[1] != null && ((String) enc[1]).startsWith("PC")) {
            return new String[] {"refused", enc[1] + ": " + enc[2]};
        }
        if (plain[0].equals("ok") && enc[0].equals("ok") && plain[1].equals(enc[1])) return new String[] {"equal", ""};
        if (plain[0].equals("error") && enc[0].equals("error") && Objects.equals(plain[1], enc[1])) {
            return new String[] {"equal", "both fail with " + plain[1]};
        }
        return new String[] {"wrong", ("plaintext " + String.join(" ", asStrings(plain))).substring(0,
                Math.min(300, 10 + String.join(" ", asStrings(plain)).length())) + " encrypted "
                + String.join(" ", asStrings(enc))};
    }

    static List<String> asStrings(Object[] a) {
        List<String> l = new ArrayList<>();
        for (Object x : a) l.add(String.valueOf(x));
        return l;
    }

    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            switch (ch) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                default -> {
                    if (ch < 0x20) b.append(String.format("\\u%04x", (int) ch));
                    else b.append(ch);
                }
            }
        }
        return b.append('"').toString();
    }

    public static void main(String[] args) throws IOException {
        SessionFactory plain = factory(System.getenv("PGC_SERVER_PORT"));
        SessionFactory enc = factory(System.getenv("PGC_PROXY_PORT"));
        enc.inTransaction(s -> {
            // the wards through the proxy: the plaintext control marker
            s.createNativeMutationQuery("DELETE FROM patient").executeUpdate();
            s.createNativeMutationQuery("DELETE FROM patient_plain").executeUpdate();
            s.createNativeMutationQuery("DELETE FROM ward").executeUpdate();
            s.createNativeMutationQuery("INSERT INTO ward (id, name) VALUES (1, 'PGCM-P-ward-1'), (2, 'PGCM-P-ward-2')")
                    .executeUpdate();
            seed(s, Patient.class);
        });
        plain.inTransaction(s -> seed(s, PlainPatient.class));
        StringBuilder out = new StringBuilder();
        int[] n = {0};
        for (Op op : OPERATIONS) {
            Object[] a = run(plain, PlainPatient.class, op);
            Object[] b = run(enc, Patient.class, op);
            String[] v = verdict(a, b);
            if (op.write()) {
                String sa = state(plain, PlainPatient.class);
                String sb = state(enc, Patient.class);
                if (!sa.equals(sb)) {
                    if (v[0].equals("equal")) v = new String[] {"wrong", "the tables differ after the write"};
                    // the next operation starts from the same rows again
                    enc.inTransaction(s -> s.createNativeMutationQuery("DELETE FROM patient").executeUpdate());
                    List<PlainPatient> rows = plain.fromSession(
                            s -> s.createQuery("from PlainPatient p left join fetch p.ward", PlainPatient.class).list());
                    enc.inTransaction(s -> {
                        for (PlainPatient r : rows) {
                            s.persist(fill(new Patient(), r.id, r.city, r.name, r.ssn, r.born, r.balance.toPlainString(),
                                    r.visits, r.notes, r.active, s, r.ward == null ? null : r.ward.getId()));
                        }
                    });
                }
            }
            report(out, n, op.name(), v, op.write());
        }
        declaring(out, n);
        try (FileWriter w = new FileWriter(args[0])) {
            w.write("{\"mode\": \"pgjdbc\", \"version\": " + json(org.hibernate.Version.getVersionString())
                    + ", \"results\": [\n" + out + "\n]}\n");
        }
        plain.close();
        enc.close();
    }
}
