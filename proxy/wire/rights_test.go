package wire_test

// Decryption rights end to end (design 13.12): the rights matrix through
// the proxy, a right revoked inside an open transaction, grants the
// superuser forges or removes, and what reaches the DBA's client.

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/wire"
)

const rightsMarker = "SSN-MARKER-4711"

// signRight is the call pgcipher-keys grant prints.
func (e *env) signRight(t *testing.T, label, role string, acc colcrypt.Access, serial int64) string {
	t.Helper()
	key, err := colcrypt.RightsKey(e.cmk, "main")
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(context.Background(), e.upstream+" dbname="+e.db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var wrapped []byte
	if err := c.QueryRow(context.Background(), "SELECT wrapped_cek FROM pgcipher.column_keys WHERE key_name = 'kr'").Scan(&wrapped); err != nil {
		t.Fatal(err)
	}
	g := colcrypt.Grant{Label: label, KeyName: "kr", Role: role, Access: acc, Serial: serial, WrappedCEK: wrapped}
	return fmt.Sprintf(`SELECT pgcipher.set_column_right('%s', '%s', 'kr', '%s', %d, '\x%s')`,
		label, role, acc, serial, hex.EncodeToString(g.MAC(key)))
}

// tap relays connections to the proxy at conninfo's port and records
// every byte the proxy sends to its clients; it returns conninfo with
// the tap's port instead.
func tap(t *testing.T, conninfo string) (string, *syncBuffer) {
	t.Helper()
	pc, err := pgconn.ParseConfig(conninfo)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	rec := &syncBuffer{}
	target := fmt.Sprintf("127.0.0.1:%d", pc.Port)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(io.MultiWriter(c, rec), up); c.Close() }()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return strings.Replace(conninfo, fmt.Sprintf("port=%d", pc.Port), "port="+port, 1), rec
}

// asRole is conninfo with another user.
func asRole(conninfo, role string) string {
	f := strings.Fields(conninfo)
	for i, x := range f {
		if strings.HasPrefix(x, "user=") {
			f[i] = "user=" + role
		}
	}
	return strings.Join(f, " ")
}

// outcome is "ok", or err's SQLSTATE.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	return sqlstate(err)
}

func TestRights(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	conninfo, srv := e.serve(t, wire.Config{})
	dbaInfo, dbaSaw := tap(t, conninfo)
	dba := connect(t, dbaInfo) // the test's superuser: the DBA
	owner, analyst, loader := e.db+"_owner", e.db+"_analyst", e.db+"_loader"
	mustExec(t, dba, "CREATE EXTENSION pgcipher_columns")
	mustExec(t, dba, "SELECT pgcipher.add_column_key('kr')")
	mustExec(t, dba, "CREATE TABLE people (id int PRIMARY KEY, ssn enc_text, score enc_int4)")
	mustExec(t, dba, "SELECT pgcipher.encrypt_column('people', 'ssn', 'kr', 'EQ')")
	mustExec(t, dba, "SELECT pgcipher.encrypt_column('people', 'score', 'kr', 'EQ')")
	for _, r := range []string{owner, analyst, loader} {
		mustExec(t, dba, "CREATE ROLE "+r+" LOGIN")
		mustExec(t, dba, "GRANT ALL ON people TO "+r)
	}
	// before any right: every role, as before rights existed
	mustExec(t, dba, "INSERT INTO people VALUES (1, '"+rightsMarker+"', 10)")
	R, W := colcrypt.AccessRead, colcrypt.AccessWrite
	for _, g := range []struct {
		col, role string
		acc       colcrypt.Access
	}{
		{"ssn", owner, R}, {"score", owner, R},
		{"ssn", loader, W}, {"score", loader, W},
		{"score", analyst, R},
	} {
		// the owner hands the DBA what pgcipher-keys printed; the proxy
		// reloads its catalog after it
		mustExec(t, dba, e.signRight(t, "public.people."+g.col, g.role, g.acc, 1))
	}

	// the rights matrix: roles × columns × read, write, compare, compute,
	// in the extended and the simple protocol
	ops := []struct {
		name string
		sql  string
		args func(id int) []any
	}{
		{"ssn read", "SELECT ssn FROM people WHERE id = 1", nil},
		{"ssn write", "INSERT INTO people (id, ssn) VALUES ($1, $2)", func(id int) []any { return []any{id, "x"} }},
		{"ssn compare", "SELECT id FROM people WHERE ssn = $1", func(int) []any { return []any{rightsMarker} }},
		{"score read", "SELECT score FROM people WHERE id = 1", nil},
		{"score write", "UPDATE people SET score = $1 WHERE id = 1", func(int) []any { return []any{11} }},
		{"score compare", "SELECT id FROM people WHERE score = $1", func(int) []any { return []any{11} }},
		{"score compute", "UPDATE people SET score = score + 1 WHERE id = 1", nil},
	}
	want := map[string]string{ // role → per op: ok or the SQLSTATE
		owner:        "ok ok ok ok ok ok ok",
		analyst:      "PC005 PC005 PC005 ok ok ok ok",
		loader:       "PC005 ok PC005 PC005 ok PC005 PC005",
		"pgc_tester": "PC005 PC005 PC005 PC005 PC005 PC005 PC005",
	}
	id := 100
	cells := 0
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		for role, w := range want {
			c := dba
			if role != "pgc_tester" {
				c = connect(t, asRole(conninfo, role))
			}
			var got []string
			for _, op := range ops {
				args := []any{mode}
				if op.args != nil {
					id++
					args = append(args, op.args(id)...)
				}
				rows, err := c.Query(ctx, op.sql, args...)
				if err == nil {
					for rows.Next() {
					}
					rows.Close()
					err = rows.Err()
				}
				got = append(got, outcome(err))
				cells++
			}
			if strings.Join(got, " ") != w {
				t.Errorf("%s (mode %v): %v, want %v", role, mode, got, w)
			}
		}
	}
	t.Logf("rights matrix: %d cells (4 roles × 2 columns × read, write, compare, compute × 2 protocols)", cells)

	// a right revoked while the analyst's transaction is open counts at
	// its next statement
	ac := connect(t, asRole(conninfo, analyst))
	tx, err := ac.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var score int32
	if err := tx.QueryRow(ctx, "SELECT score FROM people WHERE id = 1").Scan(&score); err != nil {
		t.Fatalf("the analyst reads score: %v", err)
	}
	mustExec(t, dba, e.signRight(t, "public.people.score", analyst, colcrypt.AccessNone, 2))
	err = tx.QueryRow(ctx, "SELECT score FROM people WHERE id = 1").Scan(&score)
	if sqlstate(err) != "PC005" {
		t.Errorf("after the revocation, inside the transaction: %v, want PC005", err)
	}
	tx.Rollback(ctx)

	// bad input: the server refuses a right for a column or role that
	// does not exist, and an old grant sent again
	for _, tc := range []struct{ sql, code string }{
		{e.signRight(t, "public.people.nosuch", owner, R, 5), "42704"},
		{e.signRight(t, "public.people.ssn", "no_such_role", R, 5), "42704"},
		{e.signRight(t, "public.people.score", analyst, R, 1), "22023"},
	} {
		if _, err := dba.Exec(ctx, tc.sql, pgx.QueryExecModeSimpleProtocol); sqlstate(err) != tc.code {
			t.Errorf("%s: %v, want %s", firstLine(tc.sql), err, tc.code)
		}
	}

	// the superuser edits the rights: widens the loader's, writes one of
	// his own, puts back the analyst's revoked one; none verifies
	direct := connect(t, e.upstream+" dbname="+e.db)
	mustExec(t, direct, "UPDATE pgcipher.column_rights SET access = 'read' WHERE role = '"+loader+"' AND label = 'public.people.ssn'")
	mustExec(t, direct, "INSERT INTO pgcipher.column_rights VALUES ('public.people.ssn', 'pgc_tester', 'kr', 'read', 9, '\\x"+strings.Repeat("00", 32)+"')")
	old := e.signRight(t, "public.people.score", analyst, R, 1)
	mustExec(t, direct, "DELETE FROM pgcipher.column_rights WHERE role = '"+analyst+"'")
	mustExec(t, direct, old)
	srv.Reload() // what a SIGHUP does
	lc := connect(t, asRole(conninfo, loader))
	for _, tc := range []struct {
		c    *pgx.Conn
		sql  string
		code string
	}{
		{lc, "SELECT ssn FROM people WHERE id = 1", "PC003"},
		{dba, "SELECT ssn FROM people WHERE id = 1", "PC003"},
		{ac, "SELECT score FROM people WHERE id = 1", "PC003"},
	} {
		rows, err := tc.c.Query(ctx, tc.sql)
		if err == nil {
			for rows.Next() {
			}
			rows.Close()
			err = rows.Err()
		}
		if sqlstate(err) != tc.code {
			t.Errorf("forged rights: %s: %v, want %s", tc.sql, err, tc.code)
		}
	}
	// every right of ssn removed: the column does not fall back to every role
	mustExec(t, direct, "DELETE FROM pgcipher.column_rights WHERE label = 'public.people.ssn'")
	srv.Reload()
	if _, err := dba.Exec(ctx, "SELECT ssn FROM people"); sqlstate(err) != "PC005" {
		t.Errorf("rights removed by the superuser: %v, want PC005", err)
	}
	// ciphertext in other forms: a whole row, COPY, RETURNING
	for _, sql := range []string{"SELECT * FROM people", "SELECT p FROM people p",
		"UPDATE people SET id = id WHERE id = 1 RETURNING ssn"} {
		if _, err := dba.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol); err == nil {
			t.Errorf("the DBA ran %s", sql)
		}
	}
	if _, err := dba.PgConn().CopyTo(ctx, io.Discard, "COPY people TO STDOUT"); err == nil {
		t.Errorf("the DBA copied the table out")
	}
	// nothing the DBA's client received holds the value; the owner's
	// (the control) does
	if strings.Contains(string(dbaSaw.Bytes()), rightsMarker) {
		t.Errorf("the DBA's client received the plaintext")
	}
	ownerInfo, ownerSaw := tap(t, conninfo)
	mustExec(t, direct, e.signRight(t, "public.people.ssn", owner, R, 20))
	srv.Reload()
	oc := connect(t, asRole(ownerInfo, owner))
	var ssn string
	if err := oc.QueryRow(ctx, "SELECT ssn FROM people WHERE id = 1").Scan(&ssn); err != nil || ssn != rightsMarker {
		t.Fatalf("the owner reads %q, %v", ssn, err)
	}
	if !strings.Contains(string(ownerSaw.Bytes()), rightsMarker) {
		t.Errorf("control: the owner's client did not receive the plaintext (the scan cannot see it)")
	}
}
