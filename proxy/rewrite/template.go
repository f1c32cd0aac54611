// Templates of statements sent with their literals inline (the simple
// protocol, and drivers that bind on the client side, such as psycopg2):
// a statement's shape, its literals replaced by parameters, is analysed
// once; each statement of that shape is planned by encrypting its
// literals into the shape's rewritten text (design 15.12).

package rewrite

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/values"
)

// Literal is one literal of a statement: as written, and its value.
type Literal struct {
	Text  string // as the statement writes it ('it''s', 42)
	Value string // what the server reads (it's, 42)
}

// Shape returns the shape of sql (each literal replaced by $1, $2, … in
// order) and its literals.  ok is false when sql has no literal, has
// parameters of its own, or a literal the shape cannot stand for: a
// string with escapes or backslashes (its value depends on settings), and
// any literal in ORDER BY or GROUP BY (where an integer is a position).
func Shape(sql string) (shape string, lits []Literal, ok bool) {
	res, err := pg.Scan(sql)
	if err != nil {
		return "", nil, false
	}
	var b strings.Builder
	last := 0
	inSortOrGroup := false
	prev := pg.Token_NUL
	for _, t := range res.Tokens {
		start, end := int(t.Start), int(t.End)
		if start < last || end > len(sql) {
			return "", nil, false
		}
		text := sql[start:end]
		switch t.Token {
		case pg.Token_PARAM:
			return "", nil, false
		case pg.Token_BY:
			if prev == pg.Token_ORDER || prev == pg.Token_GROUP_P {
				inSortOrGroup = true
			}
		case pg.Token_LIMIT, pg.Token_OFFSET, pg.Token_FETCH, pg.Token_HAVING, pg.Token_WINDOW,
			pg.Token_FOR, pg.Token_UNION, pg.Token_INTERSECT, pg.Token_EXCEPT, pg.Token_ASCII_41, pg.Token_ASCII_59:
			inSortOrGroup = false
		}
		prev = t.Token
		var value string
		switch t.Token {
		case pg.Token_ICONST, pg.Token_FCONST:
			value = text
		case pg.Token_SCONST:
			// 'standard' strings only: E'', U&'', $$ and backslashes
			// (standard_conforming_strings) stay out
			if len(text) < 2 || text[0] != '\'' || text[len(text)-1] != '\'' || strings.ContainsRune(text, '\\') {
				return "", nil, false
			}
			value = strings.ReplaceAll(text[1:len(text)-1], "''", "'")
		default:
			continue
		}
		if inSortOrGroup {
			continue
		}
		lits = append(lits, Literal{Text: text, Value: value})
		b.WriteString(sql[last:start])
		b.WriteString("$" + strconv.Itoa(len(lits)))
		last = end
	}
	if len(lits) == 0 {
		return "", nil, false
	}
	b.WriteString(sql[last:])
	return b.String(), lits, true
}

// Template is the analysed shape of a statement.
type Template struct {
	plan  *Plan
	parts []string // plan.SQL cut at each of its parameters
	slots []int    // the parameter (0-based) between parts[i] and parts[i+1]
	n     int      // literals of the shape
	ext   string   // the extension's schema, quoted for a cast
}

// ErrNoTemplate: the shape cannot stand for its statements (the caller
// analyses each statement on its own).
var ErrNoTemplate = errors.New("rewrite: statement shape has no template")

// NewTemplate analyses a shape of n literals, as Shape returned it, and
// checks that its plan depends on the literals only where they are
// encrypted: no computed result or read-modify-write, no COPY, no catalog
// change, one statement, and a plan like first's, the statement it was
// made from (a literal that means more than its value, such as a
// position, would make them differ).
func NewTemplate(shape string, n int, first string, cat *catalog.Catalog, keys *catalog.Keys) (*Template, error) {
	p, err := Analyze(shape, cat, keys)
	if err != nil || !p.Parsed || !p.Cacheable || p.Reload || p.Compute != nil || p.Update != nil ||
		p.Copy != nil || p.Limited || len(p.Names) > 0 || p.Statements != 1 {
		return nil, ErrNoTemplate
	}
	for _, prm := range p.Params {
		// (a row's tenant given as a literal: each statement on its own)
		if prm != nil && (prm.Array || prm.TenantParam > 0) {
			return nil, ErrNoTemplate
		}
	}
	if typmodLiteral(shape) {
		return nil, ErrNoTemplate
	}
	q, err := Analyze(first, cat, keys)
	if err != nil || !samePlanShape(p, q) {
		return nil, ErrNoTemplate
	}
	t := &Template{plan: p, n: n, ext: castIdent(cat.ExtSchema)}
	res, err := pg.Scan(p.SQL)
	if err != nil {
		return nil, ErrNoTemplate
	}
	last := 0
	for _, tok := range res.Tokens {
		if tok.Token != pg.Token_PARAM {
			continue
		}
		num, err := strconv.Atoi(p.SQL[tok.Start+1 : tok.End])
		if err != nil || num < 1 || num > n {
			return nil, ErrNoTemplate
		}
		t.parts = append(t.parts, p.SQL[last:tok.Start])
		t.slots = append(t.slots, num-1)
		last = int(tok.End)
	}
	t.parts = append(t.parts, p.SQL[last:])
	// the proof: first, planned from the template, is first planned alone
	_, lits, ok := Shape(first)
	if !ok {
		return nil, ErrNoTemplate
	}
	f, err := t.Plan(lits, rand.Reader)
	if err != nil || maskCiphertexts(f.SQL) != maskCiphertexts(q.SQL) {
		return nil, ErrNoTemplate
	}
	return t, nil
}

// ciphertextLiteral is an encrypted literal as the rewrite writes it.
var ciphertextLiteral = regexp.MustCompile(`'[A-Za-z0-9+/]{38,}={0,2}'::`)

// maskCiphertexts replaces every encrypted literal of sql by one text, so
// that two plans of one statement compare equal.
func maskCiphertexts(sql string) string {
	return ciphertextLiteral.ReplaceAllString(sql, "'…'::")
}

// typmodLiteral: a literal of the shape is a type modifier
// ('x'::varchar(3), 2.6::numeric(2, 0)), which means more than its value:
// the proxy applies the modifier to the value it encrypts (CastMod), and
// a template would not.
func typmodLiteral(shape string) bool {
	tree, err := pg.Parse(shape)
	if err != nil {
		return true
	}
	for _, st := range tree.Stmts {
		if hasMessage(st.Stmt, func(m protoreflect.Message) bool {
			tn, ok := m.Interface().(*pg.TypeName)
			return ok && slices.ContainsFunc(tn.Typmods, func(n *pg.Node) bool { return n.GetParamRef() != nil })
		}) {
			return true
		}
	}
	return false
}

// samePlanShape: a shape's plan and a statement's plan do the same
// things apart from the literals' encryption.
func samePlanShape(a, b *Plan) bool {
	if a.Touches != b.Touches || a.Reload != b.Reload || a.Hidden != b.Hidden || len(a.Filters) != len(b.Filters) ||
		len(a.Resorts) != len(b.Resorts) || (b.Compute != nil) || (b.Update != nil) || (b.Copy != nil) ||
		a.Statements != b.Statements || len(b.Names) > 0 {
		return false
	}
	for i := range a.Resorts {
		if a.Resorts[i] != b.Resorts[i] {
			return false
		}
	}
	return true
}

// Plan returns the plan of a statement of the template's shape whose
// literals are lits: the shape's plan with the literals written into its
// text, those bound for encrypted columns encrypted (a comparison's
// operand or a stored value, a LIKE pattern as a query), the others as
// the statement wrote them.
func (t *Template) Plan(lits []Literal, rand io.Reader) (*Plan, error) {
	if len(lits) != t.n {
		return nil, fmt.Errorf("rewrite: %d literals for a shape of %d", len(lits), t.n)
	}
	texts := make([]string, t.n)
	for i, l := range lits {
		texts[i] = l.Text
	}
	out := *t.plan
	out.Params = nil
	out.Cacheable = false
	out.Uses = append([]Use(nil), t.plan.Uses...) // their literals counted below
	out.Filters = append([]Filter(nil), t.plan.Filters...)
	for i := range out.Filters {
		f := &out.Filters[i]
		if f.Param == 0 {
			continue
		}
		f.Pattern, f.Param = lits[f.Param-1].Value, 0
		// as the statement alone would check it (NOT LIKE included; a
		// range's operand is checked as it is encrypted, below)
		if f.Op != "" {
			continue
		}
		var err error
		if f.Pattern, err = f.ParamPattern(f.Pattern); err != nil {
			return nil, err
		}
		f.PatternForm = PatternForm{}
		if _, err := colcrypt.LikeRuns(f.Pattern); err != nil {
			return nil, err
		}
	}
	for i, p := range t.plan.Params {
		if p == nil || i >= t.n {
			continue
		}
		v := lits[i].Value
		var ct []byte
		var err error
		switch {
		case p.Pattern:
			if v, err = p.ParamPattern(v); err == nil {
				ct, err = p.Column.EncryptPattern(v, rand)
			}
		default:
			var payload []byte
			if payload, err = values.Encode(p.EncType.Plain, v); err == nil {
				ct, err = p.EncryptPayload(payload, rand)
			}
		}
		if err != nil {
			return nil, err
		}
		texts[i] = "'" + base64.StdEncoding.EncodeToString(ct) + "'::" + t.ext + "." + castIdent(p.EncType.Name)
		for k := range out.Uses {
			if out.Uses[k].Binding.Spec.Label == p.Column.Spec().Label {
				out.Uses[k].Literals++
			}
		}
	}
	var b strings.Builder
	for i, part := range t.parts {
		b.WriteString(part)
		if i < len(t.slots) {
			b.WriteString(texts[t.slots[i]])
		}
	}
	out.SQL = b.String()
	return &out, nil
}

// castIdent quotes an identifier of a cast as the deparser does: where
// PostgreSQL needs it quoted (other than lower-case letters, digits and _,
// or a keyword).
func castIdent(s string) string {
	simple := s != ""
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || i > 0 && (r >= '0' && r <= '9' || r == '$')) {
			simple = false
			break
		}
	}
	if simple {
		if res, err := pg.Scan(s); err == nil && len(res.Tokens) == 1 && res.Tokens[0].KeywordKind == pg.KeywordKind_NO_KEYWORD {
			return s
		}
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// Tenant is the tenant the template's plan encrypts for ("" when it uses
// no tenant-keyed column): a template is used under that tenant only.
func (t *Template) Tenant() string { return t.plan.Tenant }
