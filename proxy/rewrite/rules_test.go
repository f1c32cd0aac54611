package rewrite

// Table-driven tests of single rules: COPY's options, what statements do
// to name resolution, and how a session's names change what a statement
// resolves to.

import (
	"reflect"
	"strings"
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/internal/testcat"
)

func TestCopyOptions(t *testing.T) {
	type fmtWant struct {
		csv, binary, header bool
		delim, quote, esc   byte
		null                string
	}
	text := fmtWant{delim: '\t', quote: '"', esc: '"', null: `\N`}
	csv := fmtWant{csv: true, delim: ',', quote: '"', esc: '"'}
	for _, tc := range []struct {
		sql     string
		want    fmtWant
		refused bool
	}{
		{sql: "COPY t FROM STDIN", want: text},
		{sql: "COPY t FROM STDIN WITH (FORMAT text)", want: text},
		{sql: "COPY t FROM STDIN WITH (FORMAT csv)", want: csv},
		{sql: "COPY t FROM STDIN WITH (FORMAT csv, HEADER)", want: fmtWant{csv: true, header: true, delim: ',', quote: '"', esc: '"'}},
		{sql: "COPY t FROM STDIN WITH (FORMAT csv, HEADER false)", want: csv},
		{sql: "COPY t FROM STDIN WITH (FORMAT csv, HEADER match)", want: fmtWant{csv: true, header: true, delim: ',', quote: '"', esc: '"'}},
		{sql: "COPY t FROM STDIN WITH (FORMAT csv, QUOTE '''')", want: fmtWant{csv: true, delim: ',', quote: '\'', esc: '\''}},
		{sql: "COPY t FROM STDIN WITH (FORMAT csv, QUOTE '''', ESCAPE '\\')", want: fmtWant{csv: true, delim: ',', quote: '\'', esc: '\\'}},
		{sql: "COPY t FROM STDIN WITH (DELIMITER '|', NULL 'nil')", want: fmtWant{delim: '|', quote: '"', esc: '"', null: "nil"}},
		{sql: "COPY t FROM STDIN WITH (FORMAT binary)", want: fmtWant{binary: true, delim: '\t', quote: '"', esc: '"', null: `\N`}},
		{sql: "COPY t FROM STDIN WITH (FREEZE, ENCODING 'UTF8')", want: text},
		{sql: "COPY t TO STDOUT WITH (FORMAT binary)", refused: true},
		{sql: "COPY t FROM STDIN WITH (FORMAT xml)", refused: true},
		{sql: "COPY t FROM STDIN WITH (DELIMITER '||')", refused: true},
		{sql: "COPY t FROM STDIN WITH (QUOTE 'ab')", refused: true},
		{sql: "COPY t FROM STDIN WITH (ESCAPE '')", refused: true},
		{sql: "COPY t FROM STDIN WITH (DEFAULT 'x')", refused: true},
		{sql: "COPY t FROM STDIN WITH (SOMETHING_NEW 1)", refused: true},
	} {
		tree, err := pg.Parse(tc.sql)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		c := tree.Stmts[0].Stmt.GetCopyStmt()
		cp, err := copyOptions(c.IsFrom, c.Options)
		if tc.refused {
			if err == nil {
				t.Errorf("%s: accepted, want a refusal", tc.sql)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.sql, err)
			continue
		}
		got := fmtWant{csv: cp.CSV, binary: cp.Binary, header: cp.Header, delim: cp.Delimiter, quote: cp.Quote, esc: cp.Escape, null: cp.Null}
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.sql, got, tc.want)
		}
	}
}

func TestNameChanges(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		want []NameChange
	}{
		{"SELECT 1", nil},
		{"SET search_path TO app, public", []NameChange{{Kind: SetPath, Value: "app, public"}}},
		{`SET search_path = "$user", public, "My Schema"`, []NameChange{{Kind: SetPath, Value: `"$user", public, "My Schema"`}}},
		{"SET LOCAL search_path = app", []NameChange{{Kind: SetPath, Value: "app", Local: true}}},
		{"SET search_path TO DEFAULT", []NameChange{{Kind: ResetPath}}},
		{"RESET search_path", []NameChange{{Kind: ResetPath}}},
		{"RESET ALL", []NameChange{{Kind: ResetPath}, {Kind: SetTenant}}},
		{"SET search_path FROM CURRENT", []NameChange{{Kind: UnknownPath}}},
		{"SELECT set_config('search_path', 'app, public', false)", []NameChange{{Kind: SetPath, Value: "app, public"}}},
		{"SELECT pg_catalog.set_config('search_path', '', false)", []NameChange{{Kind: SetPath, Value: ""}}},
		{"SELECT set_config('search_path', 'app', true)", []NameChange{{Kind: SetPath, Value: "app", Local: true}}},
		{"SELECT set_config('search_path', current_setting('x'), false)", []NameChange{{Kind: UnknownPath}}},
		{"SELECT set_config('application_name', 'x', false)", nil},
		{"SELECT set_config($1, $2, false)", []NameChange{{Kind: UnknownPath}, {Kind: UnknownTenant}}},
		{"SELECT set_config('search' || '_path', 'app', false)", []NameChange{{Kind: UnknownPath}, {Kind: UnknownTenant}}},
		{"SET ROLE alice", []NameChange{{Kind: SetRole, Value: "alice"}}},
		{"SET ROLE NONE", []NameChange{{Kind: SetRole}}},
		{"RESET ROLE", []NameChange{{Kind: SetRole}}},
		{"SET SESSION AUTHORIZATION bob", []NameChange{{Kind: SetRole, Value: "bob"}}},
		{"CREATE TEMP TABLE foo (a int)", []NameChange{{Kind: CreateTemp, Value: "foo"}}},
		{"CREATE TEMPORARY TABLE foo (a int) ON COMMIT DROP", []NameChange{{Kind: CreateTemp, Value: "foo", OnCommitDrop: true}}},
		{"CREATE TABLE pg_temp.foo (a int)", []NameChange{{Kind: CreateTemp, Value: "foo"}}},
		{"CREATE TABLE foo (a int)", nil},
		{"CREATE TEMP TABLE foo AS SELECT 1", []NameChange{{Kind: CreateTemp, Value: "foo"}}},
		{"SELECT 1 AS a INTO TEMP foo", []NameChange{{Kind: CreateTemp, Value: "foo"}}},
		{"CREATE TEMP VIEW foo AS SELECT 1", []NameChange{{Kind: CreateTemp, Value: "foo"}}},
		{"CREATE TEMP SEQUENCE foo", []NameChange{{Kind: CreateTemp, Value: "foo"}}},
		{"DROP TABLE foo, s.bar", []NameChange{{Kind: DropName, Value: "foo"}}},
		{"DROP TABLE IF EXISTS foo", []NameChange{{Kind: DropName, Value: "foo"}}},
		{"DISCARD TEMP", []NameChange{{Kind: DiscardTemp}}},
		{"DISCARD ALL", []NameChange{{Kind: DiscardAll}}},
		{"DISCARD PLANS", nil},
		// the tenant of tenant-keyed columns (design 13.13)
		{"SET pgcipher.tenant = 't42'", []NameChange{{Kind: SetTenant, Value: "t42"}}},
		{"SET pgcipher.tenant TO t42", []NameChange{{Kind: SetTenant, Value: "t42"}}},
		{"SET pgcipher.tenant = 42", []NameChange{{Kind: SetTenant, Value: "42"}}},
		{"SET LOCAL pgcipher.tenant = 'a''b'", []NameChange{{Kind: SetTenant, Value: "a'b", Local: true}}},
		{"RESET pgcipher.tenant", []NameChange{{Kind: SetTenant}}},
		{"SET pgcipher.tenant TO DEFAULT", []NameChange{{Kind: SetTenant}}},
		{"SET pgcipher.tenant FROM CURRENT", []NameChange{{Kind: UnknownTenant}}},
		{"SELECT set_config('pgcipher.tenant', 't7', false)", []NameChange{{Kind: SetTenant, Value: "t7", Func: true}}},
		{"SELECT pg_catalog.set_config('pgcipher.tenant', 't7', true)", []NameChange{{Kind: SetTenant, Value: "t7", Local: true, Func: true}}},
		{"SELECT set_config('pgcipher.tenant', $1, false)", []NameChange{{Kind: UnknownTenant, Func: true}}},
		// a call the proxy cannot be sure runs, or one in a comment or a string: unknown
		{"SELECT set_config('pgcipher.tenant', 't7', false) WHERE false", []NameChange{{Kind: UnknownTenant, Func: true}}},
		{"SELECT 1 /* set_config('pgcipher.tenant', 't7', false) */", []NameChange{{Kind: UnknownTenant, Func: true}}},
		{"SELECT 'set_config(''pgcipher.tenant'', ''x'', false)'", []NameChange{{Kind: UnknownPath}, {Kind: UnknownTenant}}},
		{"SELECT set_config('pgcipher.tenant', 'a', false), set_config('pgcipher.tenant', 'b', false)",
			[]NameChange{{Kind: UnknownTenant, Func: true}}},
		{"SET pgcipher.other = 'x'", nil},
	} {
		tree, err := pg.Parse(tc.sql)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		if got := nameChanges(tc.sql, tree); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.sql, got, tc.want)
		}
	}
}

func TestNameResolution(t *testing.T) {
	base, keys := testcat.New(t)
	base.AddPlainNamed("app", "enc_t")
	for _, tc := range []struct {
		name    string
		session catalog.Session
		sql     string
		want    string // a substring of the SQL sent; "" for a refusal
	}{
		{"default path", catalog.Session{SearchPath: []string{"pg_temp", "pg_catalog", "public"}},
			"INSERT INTO enc_t (id, t) VALUES (1, 'x')", "::public.enc_text"},
		{"a temporary table hides it", catalog.Session{SearchPath: []string{"pg_temp", "pg_catalog", "public"}, Temps: map[string]bool{"enc_t": true}},
			"INSERT INTO enc_t (id, t) VALUES (1, 'x')", "INSERT INTO pg_temp.enc_t (id, t) VALUES (1, 'x')"},
		{"qualified past a temporary table", catalog.Session{SearchPath: []string{"pg_temp", "public"}, Temps: map[string]bool{"enc_t": true}},
			"INSERT INTO public.enc_t (id, t) VALUES (1, 'x')", "::public.enc_text"},
		{"another schema first", catalog.Session{SearchPath: []string{"pg_temp", "pg_catalog", "app", "public"}},
			"INSERT INTO enc_t (id, t) VALUES (1, 'x')", "VALUES (1, 'x')"},
		{"that schema later", catalog.Session{SearchPath: []string{"pg_temp", "pg_catalog", "public", "app"}},
			"INSERT INTO enc_t (id, t) VALUES (1, 'x')", "::public.enc_text"},
		{"unknown path", catalog.Session{SearchPath: []string{"public"}, PathUnknown: true},
			"INSERT INTO enc_t (id, t) VALUES (1, 'x')", ""},
		{"unknown path, qualified", catalog.Session{SearchPath: []string{"public"}, PathUnknown: true},
			"INSERT INTO public.enc_t (id, t) VALUES (1, 'x')", "::public.enc_text"},
		{"unknown path, other relations", catalog.Session{PathUnknown: true},
			"INSERT INTO plain_table (id) VALUES (1)", "INSERT INTO plain_table"},
	} {
		p, err := Analyze(tc.sql, base.ForSession(tc.session), keys)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%s: sent %s, want a refusal", tc.name, p.SQL)
		case tc.want != "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && !strings.Contains(p.SQL, tc.want):
			t.Errorf("%s: sent %s, want it to contain %q", tc.name, p.SQL, tc.want)
		}
	}
}

// TestRefusedAcrossStatements: what the proxy cannot follow within one
// query string, or in a temporary relation, is refused.
func TestRefusedAcrossStatements(t *testing.T) {
	cat, keys := testcat.New(t)
	for _, tc := range []struct {
		sql     string
		refused bool
	}{
		{"CREATE TEMP TABLE s (x enc_text)", true},
		{"CREATE TEMP TABLE s (x public.enc_int4)", true},
		{"CREATE TEMP TABLE s (LIKE enc_t)", true},
		{"CREATE TEMP TABLE s AS SELECT * FROM enc_t", true},
		{"CREATE TEMP TABLE s AS SELECT id FROM enc_t", false},
		{"SELECT t INTO TEMP s FROM enc_t", true},
		{"CREATE TEMP TABLE enc_t (a int, b varchar)", false},
		{"CREATE TABLE t2 (x enc_text); SELECT pgcipher.encrypt_column('t2', 'x', 'k1', 'EQ')", false},
		{"CREATE TABLE t2 (x enc_text); SELECT pgcipher.encrypt_column('t2', 'x', 'k1', 'EQ'); INSERT INTO t2 VALUES ('MARKER')", true},
		{"CREATE TABLE t2 (x enc_text); COPY t2 FROM STDIN", true},
		{"CREATE INDEX ON enc_t (i4); SELECT count(*) FROM enc_t", false},
		{"COPY plain_table FROM STDIN; COPY enc_t (id, t) FROM STDIN", true},
		{"COPY enc_t (id, t) FROM STDIN; SELECT 1", true},
	} {
		_, err := Analyze(tc.sql, cat, keys)
		if tc.refused != (err != nil) {
			t.Errorf("%s: error %v, want refused = %v", tc.sql, err, tc.refused)
		}
	}
}
