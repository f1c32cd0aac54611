package wire_test

// The audit log end to end (design 15.15): the records a session's
// statements leave, what they hold and never hold, their chain, and
// audit-required refusing what cannot be recorded.

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgcipher/pgcipher/proxy/audit"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/wire"
)

func TestAudit(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	key, err := audit.Key(e.cmk, "main")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "log")
	os.Mkdir(dir, 0o700)
	path := filepath.Join(dir, "audit.log")
	al, err := audit.Open(path, 0, key)
	if err != nil {
		t.Fatal(err)
	}
	conninfo, _ := e.serve(t, wire.Config{Audit: al, AuditRequired: true})
	c := connect(t, conninfo)
	mustExec(t, c, "CREATE EXTENSION pgcipher_columns")
	mustExec(t, c, "SELECT pgcipher.add_column_key('kr')")
	mustExec(t, c, "CREATE TABLE people (id int PRIMARY KEY, ssn enc_text, score enc_int4)")
	mustExec(t, c, "SELECT pgcipher.encrypt_column('people', 'ssn', 'kr', 'EQ')")
	mustExec(t, c, "SELECT pgcipher.encrypt_column('people', 'score', 'kr', 'EQ')")
	reader := e.db + "_reader"
	mustExec(t, c, "CREATE ROLE "+reader+" LOGIN")
	mustExec(t, c, "GRANT ALL ON people TO "+reader)
	for i := 1; i <= 3; i++ {
		if _, err := c.Exec(ctx, "INSERT INTO people VALUES ($1, $2, $3)", i, "AUDIT-MARKER-"+string(rune('0'+i)), 10*i); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(t, c, "INSERT INTO people VALUES (4, 'AUDIT-MARKER-4', 40)")
	rows, err := c.Query(ctx, "SELECT ssn, score FROM people WHERE id <= $1", 3)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
	}
	rows.Close()
	mustExec(t, c, "SELECT id FROM people") // touches the table, decrypts nothing: no record
	// a role refused for want of a right leaves a record too
	mustExec(t, c, e.signRight(t, "public.people.ssn", "pgc_tester", colcrypt.AccessRead, 1))
	rc := connect(t, asRole(conninfo, reader))
	if _, err := rc.Exec(ctx, "SELECT id FROM people WHERE ssn = $1", "AUDIT-MARKER-1"); outcome(err) != "PC005" {
		t.Fatalf("the reader compared ssn: %v", err)
	}

	// the records: the inserts, the read, the refusal; no value, no literal
	if err := al.Flush(); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if strings.Contains(string(raw), "AUDIT-MARKER") {
		t.Errorf("the audit log holds a value")
	}
	h, err := audit.Verify([]string{path}, key, "", true)
	if err != nil {
		t.Fatalf("the chain: %v", err)
	}
	var ends []audit.Record
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Outcome != "started" {
			ends = append(ends, r)
		}
	}
	summary := func(r audit.Record) string {
		var cols []string
		for _, c := range r.Columns {
			cols = append(cols, c.Column+":"+c.Access+":"+itoa(c.Decrypted)+"/"+itoa(c.Encrypted))
		}
		return r.Role + " " + strings.Join(cols, ",") + " " + r.Outcome
	}
	var got []string
	for _, r := range ends {
		if r.Statement == "" || r.Database != e.db || r.Client == "" {
			t.Errorf("record %d lacks its statement, database or client: %+v", r.Seq, r)
		}
		got = append(got, summary(r))
	}
	want := []string{
		"pgc_tester public.people.ssn:write:0/1,public.people.score:write:0/1 ok", // 3 inserts with parameters
		"pgc_tester public.people.ssn:write:0/1,public.people.score:write:0/1 ok",
		"pgc_tester public.people.ssn:write:0/1,public.people.score:write:0/1 ok",
		"pgc_tester public.people.ssn:write:0/1,public.people.score:write:0/1 ok", // with literals
		"pgc_tester public.people.ssn:read:3/0,public.people.score:read:3/0 ok",
		reader + " public.people.ssn:read:0/0 PC005",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	t.Logf("%d records (%d ends), chain verified to %s", h.Records, len(ends), h)

	// audit-required: the log cannot be written, nothing is decrypted
	al.Close()
	os.RemoveAll(dir)
	var ssn string
	err = c.QueryRow(ctx, "SELECT ssn FROM people WHERE id = 1").Scan(&ssn)
	if outcome(err) != "PC006" {
		t.Errorf("with the audit log gone: %q, %v, want PC006", ssn, err)
	}
	if _, err := c.Exec(ctx, "SELECT ssn FROM people WHERE id = 1", pgx.QueryExecModeSimpleProtocol); outcome(err) != "PC006" {
		t.Errorf("with the audit log gone, simple protocol: %v, want PC006", err)
	}
	mustExec(t, c, "SELECT 1") // what uses no key still runs
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
