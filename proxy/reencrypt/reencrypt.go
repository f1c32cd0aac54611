// The online move of a column to order format 2: its states, the batches
// that rewrite its rows, and the validation that ends each pass.

package reencrypt

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Options tune a move.
type Options struct {
	Batch   int                           // rows per transaction (default 500)
	Retries int                           // validations retried after stragglers (default 5)
	Log     func(format string, a ...any) // progress; nil: none
}

// Result says what a move did.
type Result struct {
	From  string // the order format the column was in
	Moved int    // rows rewritten
}

// next is the state after each state, and the value format (enc_format)
// that must be gone from the column before it is entered.
var next = map[string]struct {
	state  string
	before int
}{
	"1":   {"1+2", 0},
	"1+2": {"12", 1},
	"12":  {"2+1", 0},
	"2+1": {"2", 3},
}

// Column moves column of table (a name as SQL writes it, e.g.
// public.accounts) to order format 2 through conn, a connection to
// pgcipher-proxy outside any transaction.
func Column(ctx context.Context, conn *pgconn.PgConn, table, column string, o Options) (Result, error) {
	if o.Batch <= 0 {
		o.Batch = 500
	}
	if o.Retries <= 0 {
		o.Retries = 5
	}
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	var res Result
	rel, err := one(ctx, conn, "SELECT $1::pg_catalog.regclass::pg_catalog.text", table)
	if err != nil {
		return res, fmt.Errorf("reencrypt: table %s: %w", table, err)
	}
	ext, err := one(ctx, conn, "SELECT nspname FROM pg_catalog.pg_namespace WHERE oid = (SELECT extnamespace FROM pg_catalog.pg_extension WHERE extname = 'pgcipher_columns')")
	if err != nil {
		return res, fmt.Errorf("reencrypt: the extension pgcipher_columns: %w", err)
	}
	state, err := one(ctx, conn, "SELECT coalesce(ore_format, level) FROM pgcipher.encrypted_columns WHERE relid = $1::pg_catalog.regclass AND attname = $2", rel, column)
	if err != nil {
		return res, fmt.Errorf("reencrypt: column %s of %s: %w", column, rel, err)
	}
	if _, ok := next[state]; !ok && state != "2" {
		return res, fmt.Errorf("reencrypt: column %s of %s is not an ORD column (level or format %s)", column, rel, state)
	}
	res.From = state
	m := mover{conn: conn, rel: rel, col: pgx.Identifier{column}.Sanitize(),
		format: pgx.Identifier{ext, "enc_format"}.Sanitize(), batch: o.Batch, logf: logf}
	for state != "2" {
		step := next[state]
		if step.before != 0 {
			n, err := m.move(ctx, step.before)
			res.Moved += n
			if err != nil {
				return res, err
			}
		}
		if step.state == "2+1" {
			// a btree keeps format-1 keys after their rows moved (the
			// keys of dead rows, and copies in its inner pages), and a
			// format-2 key cannot be compared with one: the indexes
			// are built again, online, from values that carry both
			if err := reindex(ctx, conn, rel); err != nil {
				return res, err
			}
			logf("%s: indexes rebuilt", rel)
		}
		// a catalog change: the simple protocol, as the proxy wants it
		if _, err := exec(ctx, conn, fmt.Sprintf("SELECT pgcipher.set_ore_format(%s, %s, %s)",
			literal(rel), literal(column), literal(step.state))); err != nil {
			return res, fmt.Errorf("reencrypt: entering format %s: %w", step.state, err)
		}
		logf("column %s of %s: order format %s", column, rel, step.state)
		// rows a session one step behind wrote meanwhile fail the
		// validation: moved, then validated again
		for try := 0; ; try++ {
			_, err := exec(ctx, conn, fmt.Sprintf("ALTER TABLE %s VALIDATE CONSTRAINT %s", rel, pgx.Identifier{"pgcipher_" + column}.Sanitize()))
			var pe *pgconn.PgError
			if err == nil {
				break
			}
			if !errors.As(err, &pe) || pe.Code != "23514" || try == o.Retries || step.before == 0 {
				return res, fmt.Errorf("reencrypt: validating format %s: %w", step.state, err)
			}
			n, err := m.move(ctx, step.before)
			res.Moved += n
			if err != nil {
				return res, err
			}
		}
		state = step.state
		if state == "2" {
			// every value is of format 2 now and no other can be
			// written: a last rebuild leaves no older key in any index
			if err := reindex(ctx, conn, rel); err != nil {
				return res, err
			}
			// statistics of format 2, so that estimates use them again
			if _, err := exec(ctx, conn, "ANALYZE "+rel); err != nil {
				return res, fmt.Errorf("reencrypt: analyzing %s: %w", rel, err)
			}
		}
	}
	return res, nil
}

// rebuildCopy names the copies REINDEX CONCURRENTLY makes of an index.
var rebuildCopy = regexp.MustCompile(`_cc(new|old)[0-9]*$`)

// reindex rebuilds the indexes of rel concurrently.  A rebuild killed
// half-way leaves an invalid copy (name ending in _ccnew or _ccold) that
// REINDEX skips but writes still maintain: those are dropped first.  An
// invalid index of another name is the DBA's, and may hold keys of format
// 1 that no rebuild would replace: the move stops and names it.
func reindex(ctx context.Context, conn *pgconn.PgConn, rel string) error {
	rows, err := exec(ctx, conn, "SELECT c.relname, i.indexrelid::pg_catalog.regclass::pg_catalog.text FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = $1::pg_catalog.regclass AND NOT i.indisvalid", rel)
	if err != nil {
		return fmt.Errorf("reencrypt: the indexes of %s: %w", rel, err)
	}
	for _, r := range rows {
		name, qualified := string(r[0]), string(r[1])
		if !rebuildCopy.MatchString(name) {
			return fmt.Errorf("reencrypt: index %s of %s is invalid: drop it or rebuild it (REINDEX INDEX), then run the move again", qualified, rel)
		}
		if _, err := exec(ctx, conn, "DROP INDEX CONCURRENTLY "+qualified); err != nil {
			return fmt.Errorf("reencrypt: dropping %s, left by a rebuild that did not end: %w", qualified, err)
		}
	}
	if _, err := exec(ctx, conn, "REINDEX TABLE CONCURRENTLY "+rel); err != nil {
		return fmt.Errorf("reencrypt: rebuilding the indexes of %s: %w", rel, err)
	}
	return nil
}

// mover rewrites the rows of one column whose values have one format.
type mover struct {
	conn     *pgconn.PgConn
	rel, col string
	format   string
	batch    int
	logf     func(string, ...any)
}

// move rewrites, in transactions of m.batch rows locked FOR UPDATE, every
// row whose value has format f, until none is left; the proxy decrypts
// each value and encrypts it again in the column's current format.
func (m *mover) move(ctx context.Context, f int) (int, error) {
	sel := fmt.Sprintf("SELECT ctid, %s FROM %s WHERE %s(%s) = %d LIMIT %d FOR UPDATE",
		m.col, m.rel, m.format, m.col, f, m.batch)
	upd := fmt.Sprintf("UPDATE %s SET %s = $1 WHERE ctid = $2::pg_catalog.tid", m.rel, m.col)
	total := 0
	for {
		if _, err := exec(ctx, m.conn, "BEGIN"); err != nil {
			return total, fmt.Errorf("reencrypt: %w", err)
		}
		rows, err := exec(ctx, m.conn, sel)
		if err == nil {
			for _, r := range rows {
				if _, err = exec(ctx, m.conn, upd, string(r[1]), string(r[0])); err != nil {
					break
				}
			}
		}
		if err != nil {
			exec(ctx, m.conn, "ROLLBACK")
			return total, fmt.Errorf("reencrypt: rewriting rows of format %d: %w", f, err)
		}
		if _, err := exec(ctx, m.conn, "COMMIT"); err != nil {
			return total, fmt.Errorf("reencrypt: %w", err)
		}
		total += len(rows)
		if len(rows) > 0 {
			m.logf("%s: %d rows of format %d rewritten", m.rel, total, f)
		}
		if len(rows) < m.batch {
			return total, nil
		}
	}
}

// exec runs sql with text parameters (NULL for none) and returns the rows
// as text.
func exec(ctx context.Context, conn *pgconn.PgConn, sql string, args ...string) ([][][]byte, error) {
	params := make([][]byte, len(args))
	for i, a := range args {
		params[i] = []byte(a)
	}
	var rr *pgconn.ResultReader
	if len(args) == 0 {
		res, err := conn.Exec(ctx, sql).ReadAll()
		if err != nil {
			return nil, err
		}
		if len(res) == 0 {
			return nil, nil
		}
		return res[len(res)-1].Rows, nil
	}
	rr = conn.ExecParams(ctx, sql, params, nil, nil, nil)
	res := rr.Read()
	return res.Rows, res.Err
}

// literal quotes s as an SQL string literal (standard_conforming_strings).
func literal(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// one returns the single value of a query.
func one(ctx context.Context, conn *pgconn.PgConn, sql string, args ...string) (string, error) {
	rows, err := exec(ctx, conn, sql, args...)
	if err != nil {
		return "", err
	}
	if len(rows) != 1 || len(rows[0]) != 1 || rows[0][0] == nil {
		return "", errors.New("not found (" + strconv.Itoa(len(rows)) + " rows)")
	}
	return string(rows[0][0]), nil
}
