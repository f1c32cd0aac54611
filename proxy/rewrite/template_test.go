package rewrite

// A statement planned from the template of its shape must be the
// statement planned on its own: the same SQL once ciphertexts are masked,
// the same plaintexts in them, encrypted the same way (query operand or
// value), the same LIKE patterns to recheck.

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/internal/testcat"
)

var castRE = regexp.MustCompile(`'([A-Za-z0-9+/=]{40,})'::[a-z_."]+`)

// ciphertexts returns what each encrypted literal of sql decrypts to, and
// its header flags.
func ciphertexts(t *testing.T, cat *catalog.Catalog, keys *catalog.Keys, sql string) (plain []string, flags []byte, tokens []string) {
	t.Helper()
	cols := map[colcrypt.Header][]*colcrypt.Column{}
	for _, b := range cat.Bindings() {
		c, err := keys.Column(b)
		if err != nil {
			t.Fatal(err)
		}
		cols[c.Header().Identity()] = append(cols[c.Header().Identity()], c)
	}
	for _, m := range castRE.FindAllStringSubmatch(sql, -1) {
		ct, err := base64.StdEncoding.DecodeString(m[1])
		if err != nil {
			t.Fatal(err)
		}
		x, err := colcrypt.Parse(ct)
		if err != nil {
			t.Fatalf("%s: %v", m[1], err)
		}
		flags = append(flags, x.Header.Flags)
		got := "(no payload)"
		for _, c := range cols[x.Header.Identity()] {
			if p, err := c.Decrypt(ct); err == nil {
				got = p
				break
			}
		}
		plain = append(plain, got)
		// the token tells a value's (deterministic) from a range
		// bound's (all 0x00 or 0xff)
		tokens = append(tokens, fmt.Sprintf("%x", x.Token))
	}
	return plain, flags, tokens
}

func TestTemplateMatchesAnalyze(t *testing.T) {
	cat, keys := testcat.New(t)
	for _, tc := range []struct {
		sql      string
		template bool // the shape has a template
	}{
		{"SELECT id, i4 FROM enc_t WHERE i4 = 5", true},
		{"SELECT id FROM enc_t WHERE i8o BETWEEN 1 AND 100 AND id = 7", true},
		{"SELECT id FROM enc_t WHERE i4o < 300", true},
		{"INSERT INTO enc_t (id, i4, t) VALUES (1, 2, 'it''s')", true},
		{"UPDATE enc_t SET t = 'abc' WHERE id = 3", true},
		{"SELECT t FROM enc_t WHERE tm LIKE '%abc%'", true},
		{"SELECT t FROM enc_t WHERE tm NOT LIKE '%abc%' AND i4 = 9", true},
		{"SELECT id FROM enc_t WHERE i4 IN (1, 2, 3)", true},
		{"SELECT id FROM enc_t WHERE i4 = 5 ORDER BY 1", true},
		{"SELECT id FROM enc_t WHERE i8o > -5", false},       // -$1: not a value
		{"SELECT id FROM enc_t WHERE t = E'a\\nb'", false},   // an escape string
		{"SELECT sum(i4) FROM enc_t WHERE id < 10", false},   // computed by the proxy
		{"UPDATE enc_t SET i4 = i4 + 1 WHERE id = 2", false}, // read-modify-write
		{"SELECT id FROM enc_t WHERE id = int4 '5' AND i4 = int4 '6'", true},
		// a cast's modifier is a literal of the shape: never a template,
		// so templates never apply one (a range's recheck included)
		{"SELECT id FROM enc_t WHERE t = 'abcdef'::varchar(3)", false},
		{"SELECT id FROM enc_t WHERE to2 > 'abcdef'::varchar(3)", false},
		{"SELECT id FROM enc_t WHERE i4 = 5::numeric(2, 0)", false},
		// rechecked ranges on a prefix-ordered column: bounds, operands
		{"SELECT t FROM enc_t WHERE to2 > 'abc' AND to2 <= 'abz'", true},
		{"SELECT t FROM enc_t WHERE to2 BETWEEN 'a' AND 'bcd' AND id > 2", true},
	} {
		p1, err := Analyze(tc.sql, cat, keys)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		shape, lits, ok := Shape(tc.sql)
		var tpl *Template
		if ok {
			tpl, err = NewTemplate(shape, len(lits), tc.sql, cat, keys)
		}
		if (tpl != nil) != tc.template {
			t.Errorf("%s: template %v (shape %q, %v), want %v", tc.sql, tpl != nil, shape, err, tc.template)
			continue
		}
		if tpl == nil {
			continue
		}
		p2, err := tpl.Plan(lits, rand.Reader)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		if m1, m2 := castRE.ReplaceAllString(p1.SQL, "CT"), castRE.ReplaceAllString(p2.SQL, "CT"); m1 != m2 {
			t.Errorf("%s:\n  alone:    %s\n  template: %s", tc.sql, m1, m2)
		}
		v1, f1, k1 := ciphertexts(t, cat, keys, p1.SQL)
		v2, f2, k2 := ciphertexts(t, cat, keys, p2.SQL)
		if len(v1) == 0 && p1.SQL != tc.sql && len(p1.Filters) == 0 {
			t.Errorf("%s: no ciphertext found in %s (the check could not fail)", tc.sql, p1.SQL)
		}
		if len(v1) != len(v2) || len(f1) != len(f2) {
			t.Fatalf("%s: %d and %d ciphertexts", tc.sql, len(v1), len(v2))
		}
		for i := range v1 {
			if v1[i] != v2[i] || f1[i] != f2[i] {
				t.Errorf("%s: ciphertext %d: %q (flags %#x) alone, %q (flags %#x) from the template", tc.sql, i, v1[i], f1[i], v2[i], f2[i])
			}
			if k1[i] != k2[i] {
				t.Errorf("%s: ciphertext %d: token %s alone, %s from the template", tc.sql, i, k1[i], k2[i])
			}
		}
		if len(p1.Filters) != len(p2.Filters) {
			t.Fatalf("%s: filters %d and %d", tc.sql, len(p1.Filters), len(p2.Filters))
		}
		for i := range p1.Filters {
			if p1.Filters[i].Pattern != p2.Filters[i].Pattern || p1.Filters[i].Not != p2.Filters[i].Not ||
				p1.Filters[i].Op != p2.Filters[i].Op || p2.Filters[i].Param != 0 {
				t.Errorf("%s: filter %d: %+v and %+v", tc.sql, i, p1.Filters[i], p2.Filters[i])
			}
		}
		if p1.Touches != p2.Touches || p1.Hidden != p2.Hidden || len(p1.Resorts) != len(p2.Resorts) {
			t.Errorf("%s: plans differ: %+v and %+v", tc.sql, p1, p2)
		}
	}
}

// One template serves every statement of its shape.
func TestTemplateOtherLiterals(t *testing.T) {
	cat, keys := testcat.New(t)
	shape, lits, ok := Shape("SELECT id FROM enc_t WHERE i4 = 5 AND id = 1")
	if !ok {
		t.Fatal("no shape")
	}
	tpl, err := NewTemplate(shape, len(lits), "SELECT id FROM enc_t WHERE i4 = 5 AND id = 1", cat, keys)
	if err != nil {
		t.Fatal(err)
	}
	shape2, lits2, _ := Shape("SELECT id FROM enc_t WHERE i4 = 77 AND id = 12")
	if shape2 != shape {
		t.Fatalf("shapes %q and %q", shape, shape2)
	}
	p, err := tpl.Plan(lits2, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := ciphertexts(t, cat, keys, p.SQL); len(v) != 1 || v[0] != "77" || !regexp.MustCompile(`id = 12\b`).MatchString(p.SQL) {
		t.Errorf("plan %s: encrypted %v", p.SQL, v)
	}
	if _, err := tpl.Plan(lits2[:1], rand.Reader); err == nil {
		t.Error("a literal short: planned")
	}
	if _, err := tpl.Plan([]Literal{{"'x'", "x"}, {"1", "1"}}, rand.Reader); err == nil {
		t.Error("a text for an int4 column: planned")
	}
}

func TestShape(t *testing.T) {
	for _, tc := range []struct {
		sql, shape string
		n          int
	}{
		{"SELECT 1", "SELECT $1", 1},
		{"SELECT 'a''b', 2.5 FROM t ORDER BY 1, 2 LIMIT 3", "SELECT $1, $2 FROM t ORDER BY 1, 2 LIMIT $3", 3},
		{"SELECT x FROM t GROUP BY 1 HAVING count(*) > 2", "SELECT x FROM t GROUP BY 1 HAVING count(*) > $1", 1},
		{"SELECT $1", "", 0},
		{"SELECT x FROM t", "", 0},
		{"SELECT E'\\n'", "", 0},
		{"SELECT 'a\\b'", "", 0},
		{"SELECT $$x$$", "", 0},
	} {
		shape, lits, ok := Shape(tc.sql)
		if ok != (tc.n > 0) || shape != tc.shape || len(lits) != tc.n {
			t.Errorf("Shape(%q) = %q, %d literals, %v; want %q, %d", tc.sql, shape, len(lits), ok, tc.shape, tc.n)
		}
	}
	if _, lits, _ := Shape("SELECT 'it''s'"); lits[0].Value != "it's" || lits[0].Text != "'it''s'" {
		t.Errorf("literal %+v", lits[0])
	}
}

// The cost of planning one statement with an encrypted literal, alone and
// from its shape's template (Shape included): a point select on an EQ
// column, as a driver binding on the client side sends it.
func BenchmarkPlanAlone(b *testing.B) { benchPlan(b, false) }

func BenchmarkPlanFromTemplate(b *testing.B) { benchPlan(b, true) }

func benchPlan(b *testing.B, template bool) {
	cat, keys := testcat.New(b)
	const first = "SELECT id, t, tr FROM enc_t WHERE i4 = 4711"
	shape, lits, _ := Shape(first)
	tpl, err := NewTemplate(shape, len(lits), first, cat, keys)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		sql := "SELECT id, t, tr FROM enc_t WHERE i4 = " + strconv.Itoa(i)
		if !template {
			if _, err := Analyze(sql, cat, keys); err != nil {
				b.Fatal(err)
			}
			continue
		}
		_, lits, ok := Shape(sql)
		if !ok {
			b.Fatal("no shape")
		}
		if _, err := tpl.Plan(lits, rand.Reader); err != nil {
			b.Fatal(err)
		}
	}
}
