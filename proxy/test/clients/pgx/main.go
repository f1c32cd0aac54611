package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

const cols = "id, i4, i4o, i8, i8o, f8, num, t, tm, tr, b, d, ts, bo"

var colNames = strings.Split(cols, ", ")

type side struct {
	tab, mk string
	items   [][2]string
}

func (s *side) add(label, value string) {
	s.items = append(s.items, [2]string{strings.ReplaceAll(label, s.mk, "MK"), strings.ReplaceAll(value, s.mk, "MK")})
}

var problems []string

func connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable connect_timeout=10",
		os.Getenv("PGC_HOST"), os.Getenv("PGC_PORT"), os.Getenv("PGC_USER"), os.Getenv("PGC_DB")))
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["TimeZone"] = "UTC"
	return pgx.ConnectConfig(ctx, cfg)
}

func numeric(s string) pgtype.Numeric {
	var n pgtype.Numeric
	if err := n.Scan(s); err != nil {
		panic(err)
	}
	return n
}

func date(y int, m time.Month, d int) pgtype.Date {
	return pgtype.Date{Time: time.Date(y, m, d, 0, 0, 0, 0, time.UTC), Valid: true}
}

func row(i int, mk string) []any {
	n := func(every int, v any) any {
		if i%every == 0 {
			return nil
		}
		return v
	}
	return []any{int32(i), n(10, int32(i%7)), n(17, int32(i*3-50)), n(11, int64(i%5)*3000000000-6000000000),
		n(13, 1000000000-int64(i)*123456789), n(12, float64(i)*1.1-7),
		n(9, numeric(fmt.Sprintf("%d.%02d", i%9-4, (i*7)%100))), n(9, fmt.Sprintf("%s-pgx-t%d", mk, i%6)),
		n(14, fmt.Sprintf("%s-pgx-m%d word%d lorem", mk, i, i%4)), n(4, fmt.Sprintf("%s-pgx-r%d", mk, i)),
		n(8, []byte{byte(i % 16), byte(255 - i%5)}), n(15, date(2024, time.Month(1+i%12), 1+(i*7)%28)),
		n(16, time.Date(2024, time.Month(1+(i*5)%12), 1+i%28, i%24, i%60, (i*7)%60, (i*1000%999999)*1000,
			time.FixedZone("", (i%3)*3600))),
		n(7, i%3 == 0)}
}

// format writes a value as pgx decoded it, with its Go type.
func format(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case pgtype.Numeric:
		dv, err := x.Value()
		if err != nil {
			return "numeric?" + err.Error()
		}
		return fmt.Sprintf("numeric:%v", dv)
	case time.Time:
		return "time:" + x.UTC().Format(time.RFC3339Nano)
	case []byte:
		return "bytes:" + hex.EncodeToString(x)
	case string:
		return fmt.Sprintf("text:%q", x)
	case float64:
		if math.IsNaN(x) {
			return "float64:NaN"
		}
		return fmt.Sprintf("float64:%v", x)
	default:
		return fmt.Sprintf("%T:%v", x, x)
	}
}

func collect(rows pgx.Rows) (string, error) {
	var b strings.Builder
	n := 0
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			rows.Close()
			return "", err
		}
		n++
		b.WriteString("(")
		for k, v := range vals {
			if k > 0 {
				b.WriteString(", ")
			}
			b.WriteString(format(v))
		}
		b.WriteString(")\n")
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "%d rows, %s", n, rows.CommandTag())
	return b.String(), nil
}

func errText(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return "ERROR " + pe.Code + ": " + pe.Message
	}
	return "ERROR " + strings.SplitN(err.Error(), "\n", 2)[0]
}

func run(ctx context.Context, s *side) error {
	conn, err := connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	tab, mk := s.tab, s.mk
	op := func(label string, fn func() (string, error)) {
		out, err := fn()
		if err != nil {
			out = errText(err)
			if conn.IsClosed() {
				if c, err2 := connect(ctx); err2 == nil {
					conn = c
				}
			}
		}
		s.add(label, out)
	}
	exec := func(sql string, args ...any) (string, error) {
		tag, err := conn.Exec(ctx, sql, args...)
		return tag.String(), err
	}
	query := func(sql string, args ...any) (string, error) {
		rows, err := conn.Query(ctx, sql, args...)
		if err != nil {
			return "", err
		}
		return collect(rows)
	}

	ins := "INSERT INTO " + tab + " (" + cols + ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
	for _, m := range []struct {
		mode   pgx.QueryExecMode
		lo, hi int
	}{{pgx.QueryExecModeCacheStatement, 1, 20}, {pgx.QueryExecModeExec, 21, 30}, {pgx.QueryExecModeSimpleProtocol, 31, 40}} {
		op(fmt.Sprintf("INSERT rows %d-%d, %v", m.lo, m.hi, m.mode), func() (string, error) {
			var out []string
			for i := m.lo; i <= m.hi; i++ {
				tag, err := conn.Exec(ctx, ins, append([]any{m.mode}, row(i, mk)...)...)
				if err != nil {
					return "", fmt.Errorf("row %d: %w", i, err)
				}
				out = append(out, tag.String())
			}
			return strings.Join(out, ","), nil
		})
	}
	op("Batch: 10 INSERTs, UPDATE, SELECTs", func() (string, error) {
		b := &pgx.Batch{}
		for i := 41; i <= 50; i++ {
			b.Queue(ins, row(i, mk)...)
		}
		b.Queue("UPDATE "+tab+" SET tr = $1, i4o = $2 WHERE id = $3", mk+"-pgx-batch", int32(777), int32(45))
		b.Queue("SELECT "+cols+" FROM "+tab+" WHERE id = $1", int32(45))
		b.Queue("SELECT count(*), min(i4o), max(ts) FROM "+tab+" WHERE id > $1", 40)
		br := conn.SendBatch(ctx, b)
		var out []string
		for i := 0; i < 11; i++ {
			tag, err := br.Exec()
			if err != nil {
				br.Close()
				return "", err
			}
			out = append(out, tag.String())
		}
		for i := 0; i < 2; i++ {
			rows, err := br.Query()
			if err != nil {
				br.Close()
				return "", err
			}
			r, err := collect(rows)
			if err != nil {
				br.Close()
				return "", err
			}
			out = append(out, r)
		}
		return strings.Join(out, "\n"), br.Close()
	})
	op("description", func() (string, error) {
		rows, err := conn.Query(ctx, "SELECT "+cols+" FROM "+tab+" LIMIT 1")
		if err != nil {
			return "", err
		}
		defer rows.Close()
		var out []string
		for _, f := range rows.FieldDescriptions() {
			out = append(out, fmt.Sprintf("%s oid %d format %d", f.Name, f.DataTypeOID, f.Format))
		}
		return strings.Join(out, "; "), nil
	})
	op("prepared statement description", func() (string, error) {
		sd, err := conn.Prepare(ctx, "pgx_desc", "SELECT id, t, ts FROM "+tab+" WHERE i4 = $1 AND i8o < $2 AND f8 > $3 AND num = $4 AND t = $5 AND b = $6 AND d > $7 AND ts < $8 AND bo = $9")
		if err != nil {
			return "", err
		}
		var out []string
		for _, oid := range sd.ParamOIDs {
			out = append(out, fmt.Sprint(oid))
		}
		for _, f := range sd.Fields {
			out = append(out, fmt.Sprintf("%s:%d", f.Name, f.DataTypeOID))
		}
		return strings.Join(out, " "), conn.Deallocate(ctx, "pgx_desc")
	})

	sel := "SELECT " + cols + " FROM " + tab + " WHERE "
	utc := time.UTC
	queries := []struct {
		sql  string
		args []any
	}{
		{sel + "i4 = $1 ORDER BY id", []any{int32(3)}},
		{sel + "i4 = $1 ORDER BY id", []any{4}}, // a Go int: int8 in exec mode
		{sel + "i4 <> $1 AND id < $2 ORDER BY id", []any{int32(3), 20}},
		{sel + "i4 IN ($1, $2, $3) ORDER BY id", []any{int32(1), int32(2), int32(5)}},
		{sel + "t = ANY($1) ORDER BY id", []any{[]string{mk + "-pgx-t1", mk + "-pgx-t3"}}},
		{sel + "i8 = $1 ORDER BY id", []any{int64(3000000000)}},
		{sel + "num = $1 ORDER BY id", []any{numeric("-3.07")}},
		{sel + "t = $1 ORDER BY id", []any{mk + "-pgx-t3"}},
		{sel + "t = $1 AND i4o > $2 ORDER BY id", []any{mk + "-pgx-t2", int32(0)}},
		{sel + "b = $1 ORDER BY id", []any{[]byte{3, 252}}},
		{sel + "bo = $1 AND i4 = $2 ORDER BY id", []any{true, int32(3)}},
		{sel + "i4o = $1", []any{int32(13)}},
		{sel + "d = $1 ORDER BY id", []any{date(2024, 3, 15)}},
		{sel + "i4 IS NULL ORDER BY id", nil},
		{sel + "tm LIKE $1 ORDER BY id", []any{"%pgx-m1%"}},
		{sel + "tm LIKE $1 ORDER BY id", []any{mk + "-pgx-m2_ %"}},
		{sel + "i4o BETWEEN $1 AND $2 ORDER BY i4o", []any{int32(-10), int32(20)}},
		{sel + "i4o < $1 ORDER BY i4o DESC", []any{int32(0)}},
		{sel + "i8o < $1 ORDER BY i8o DESC LIMIT 5", []any{int64(-2000000000)}},
		{sel + "f8 > $1 ORDER BY f8", []any{2.5}},
		{sel + "d >= $1 AND d < $2 ORDER BY d, id", []any{date(2024, 3, 1), date(2024, 7, 1)}},
		{sel + "ts > $1 ORDER BY ts", []any{time.Date(2024, 6, 1, 0, 0, 0, 0, utc)}},
		{sel + "ts <= $1 ORDER BY ts DESC", []any{time.Date(2024, 4, 1, 3, 0, 0, 0, time.FixedZone("", 3*3600))}},
		{sel + "id > $1 ORDER BY i4o NULLS FIRST, id LIMIT $2", []any{30, 10}},
		{"SELECT i4, count(*), min(id) FROM " + tab + " GROUP BY i4 ORDER BY 3", nil},
		{"SELECT t, bo, count(*), min(id) FROM " + tab + " WHERE id > $1 GROUP BY t, bo ORDER BY 4", []any{int32(5)}},
		{"SELECT min(i4o), max(i4o), min(i8o), max(i8o), min(f8), max(f8), min(d), max(d), min(ts), max(ts) FROM " + tab, nil},
		{"SELECT count(*), count(i4), count(tr) FROM " + tab + " WHERE d < $1", []any{date(2024, 8, 1)}},
		{"SELECT a.id, b.id FROM " + tab + " a JOIN " + tab + " b ON a.t = b.t WHERE a.id < b.id AND a.id < $1 ORDER BY 1, 2", []any{int32(10)}},
	}
	modes := []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol}
	for _, mode := range modes {
		for _, q := range queries {
			op(fmt.Sprintf("%v %s %v", mode, strings.ReplaceAll(q.sql, tab, "TAB"), q.args), func() (string, error) {
				return query(q.sql, append([]any{mode}, q.args...)...)
			})
		}
		op(fmt.Sprintf("%v UPDATE", mode), func() (string, error) {
			return exec("UPDATE "+tab+" SET tm = $1, i4o = $2 WHERE i4 = $3 AND id < $4",
				mode, fmt.Sprintf("%s-pgx-upd-%v", mk, mode), int32(200+int(mode)), int32(int(mode)%7), int32(30))
		})
	}
	op("UPDATE RETURNING", func() (string, error) {
		r, err := query("UPDATE "+tab+" SET i4 = $1, tr = $2 WHERE i4o < $3 RETURNING id, i4, tr", int32(99), mk+"-pgx-upd", int32(-30))
		lines := strings.Split(r, "\n")
		sort.Strings(lines)
		return strings.Join(lines, "\n"), err
	})
	op("DELETE", func() (string, error) {
		return exec("DELETE FROM "+tab+" WHERE d < $1 OR t = $2", date(2024, 2, 1), mk+"-pgx-t5")
	})
	op("transaction rolled back", func() (string, error) {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return "", err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+tab+" (id, t) VALUES ($1, $2)", int32(90), mk+"-pgx-rb"); err != nil {
			tx.Rollback(ctx)
			return "", err
		}
		if _, err := tx.Exec(ctx, "UPDATE "+tab+" SET t = $1 WHERE id = $2", mk+"-pgx-rb", int32(2)); err != nil {
			tx.Rollback(ctx)
			return "", err
		}
		if err := tx.Rollback(ctx); err != nil {
			return "", err
		}
		return query("SELECT id, t FROM "+tab+" WHERE id IN (2, 90) OR t = $1 ORDER BY id", mk+"-pgx-rb")
	})
	op("transaction committed", func() (string, error) {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO "+tab+" (id, t, ts) VALUES ($1, $2, $3)", int32(91), mk+"-pgx-tx", time.Date(2031, 1, 1, 0, 0, 0, 0, utc))
			return err
		})
		if err != nil {
			return "", err
		}
		return query("SELECT id, t, ts FROM "+tab+" WHERE t = $1", mk+"-pgx-tx")
	})
	op("final SELECT * before COPY", func() (string, error) {
		return query("SELECT " + cols + " FROM " + tab + " ORDER BY id")
	})
	// last, so that a failure does not change the results above
	op("CopyFrom (binary COPY)", func() (string, error) {
		var rows [][]any
		for i := 51; i <= 60; i++ {
			rows = append(rows, row(i, mk))
		}
		n, err := conn.CopyFrom(ctx, pgx.Identifier{tab}, colNames, pgx.CopyFromRows(rows))
		if err != nil {
			return "", err
		}
		r, err := query("SELECT "+cols+" FROM "+tab+" WHERE id > $1 AND id <= $2 ORDER BY id", 50, 60)
		return fmt.Sprintf("%d copied\n%s", n, r), err
	})
	return nil
}

func refusals(ctx context.Context) int {
	conn, err := connect(ctx)
	if err != nil {
		problems = append(problems, "refusals: "+err.Error())
		return 0
	}
	defer conn.Close(ctx)
	n := 0
	refused := func(what string, err error) {
		var pe *pgconn.PgError
		switch {
		case err == nil:
			problems = append(problems, "refusal "+what+": not refused")
		case !errors.As(err, &pe) || pe.Code != "PC001":
			problems = append(problems, "refusal "+what+": "+errText(err)+", want PC001")
		default:
			n++
		}
	}
	usable := func(what string) {
		var c int64
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM enc_t WHERE i4 = $1", int32(1)).Scan(&c); err != nil {
			problems = append(problems, "after refusal "+what+": "+errText(err))
		}
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		rows, err := conn.Query(ctx, "SELECT md5(t) FROM enc_t", mode)
		if err == nil {
			_, err = collect(rows)
		}
		refused(fmt.Sprintf("SELECT md5(t) (%v)", mode), err)
		usable(fmt.Sprintf("%v", mode))
		_, err = conn.Exec(ctx, "SELECT id FROM enc_t WHERE tr = $1", mode, "PGCMARK-E-pgx-x")
		refused(fmt.Sprintf("RND equality (%v)", mode), err)
		usable(fmt.Sprintf("RND equality %v", mode))
	}
	tx, err := conn.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, "INSERT INTO enc_t (id, t) VALUES ($1, $2)", int32(95), "PGCMARK-E-pgx-refused")
		if err == nil {
			_, err = tx.Exec(ctx, "SELECT string_agg(t, ',') FROM enc_t WHERE i4 = $1", int32(1))
			refused("in a transaction", err)
			if _, err := tx.Exec(ctx, "SELECT 1"); err == nil {
				problems = append(problems, "after a refusal the transaction is not aborted")
			}
		}
		tx.Rollback(ctx)
	}
	usable("in a transaction")
	var c int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM enc_t WHERE id = $1", int32(95)).Scan(&c); err != nil || c != 0 {
		problems = append(problems, fmt.Sprintf("refused transaction not rolled back: %d rows, %v", c, err))
	}
	b := &pgx.Batch{}
	b.Queue("SELECT count(*) FROM enc_t WHERE i4 = $1", int32(1))
	b.Queue("SELECT md5(t) FROM enc_t")
	b.Queue("SELECT count(*) FROM enc_t WHERE i4 = $1", int32(2))
	// pgx prepares a batch's statements before it runs any: the refusal
	// may come with the first result
	br := conn.SendBatch(ctx, b)
	_, err = br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	refused("in a batch", err)
	br.Close()
	usable("in a batch")
	return n
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sides := []*side{{tab: "enc_t", mk: "PGCMARK-E"}, {tab: "plain_t", mk: "PGCMARK-P"}}
	for _, s := range sides {
		if err := run(ctx, s); err != nil {
			fmt.Println("pgx:", s.tab, err)
			os.Exit(1)
		}
	}
	enc, plain := sides[0], sides[1]
	for _, s := range sides {
		var b strings.Builder
		for _, it := range s.items {
			fmt.Fprintf(&b, "%s\n    %s\n", it[0], strings.ReplaceAll(it[1], "\n", "\n    "))
		}
		os.WriteFile(filepath.Join(os.Getenv("PGC_SCRATCH"), "results-"+s.tab+".txt"), []byte(b.String()), 0o644)
	}
	for _, it := range plain.items {
		if strings.HasPrefix(it[1], "ERROR") {
			problems = append(problems, "plain_t (a bug of the test): "+it[0]+": "+it[1])
		}
	}
	if len(enc.items) != len(plain.items) {
		problems = append(problems, "the two runs recorded a different number of steps")
	}
	differ := 0
	for i := 0; i < len(enc.items) && i < len(plain.items); i++ {
		e, p := enc.items[i][1], plain.items[i][1]
		if e == p {
			continue
		}
		differ++
		at := 0
		for at < len(e) && at < len(p) && e[at] == p[at] {
			at++
		}
		lo := max(0, at-120)
		cut := func(s string) string { return strings.ReplaceAll(s[min(lo, len(s)):min(len(s), at+200)], "\n", `\n`) }
		problems = append(problems, fmt.Sprintf("differs: %s (at character %d)\n      plain_t: ...%s\n      enc_t:   ...%s",
			enc.items[i][0], at, cut(p), cut(e)))
	}
	if differ == 0 && len(problems) == 0 {
		fmt.Printf("check: pgx v5: %d results identical on enc_t and plain_t (query exec modes cache statement, cache describe, "+
			"describe exec, exec, simple protocol; binary parameters and results; Batch; transactions; CopyFrom)\n", len(enc.items))
	}
	if os.Getenv("PGC_DIRECT") != "1" {
		before := len(problems)
		n := refusals(ctx)
		if len(problems) == before {
			fmt.Printf("check: %d statements refused with PC001 (cache statement, exec, simple protocol, transaction, batch); "+
				"the connection stays usable, the refused transaction rolls back\n", n)
		}
	}
	for i, p := range problems {
		if i == 40 {
			fmt.Printf("pgx: ... and %d more (results-*.txt in the scratch directory)\n", len(problems)-40)
			break
		}
		fmt.Println("pgx:", p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}
