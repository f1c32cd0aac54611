package wire

// The shape generator: random INSERT, UPDATE, DELETE, COPY, MERGE and
// SELECT statements over random tables — column orders, *, subqueries,
// CTEs, UNNEST, VALUES, RETURNING, ON CONFLICT — whose values for
// encrypted columns are markers.  Whatever the proxy does with a shape
// (rewrite it or refuse it) and whatever the server answers (every
// statement accepted, or every one rejected), no marker may reach the
// server in plaintext; the same shape on the table unencrypted (the
// control) must send them.
//
// go test runs it for PGCIPHER_SHAPES_TIME (default 10s) from seed
// PGCIPHER_SHAPES_SEED (default: the clock, logged); the benchmark-like
// job (scripts/shapes.sh) runs it for longer.

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/internal/testcat"
)

// shapeCol is a generated column: its catalog entry and SQL type.
type shapeCol struct {
	testcat.Col
	sqlType string // the plain type, as a cast names it
}

func (c shapeCol) enc() bool { return c.Level != 0 }

// shapeGen builds one statement: its SQL, its parameters (extended
// protocol) and the markers it holds.
type shapeGen struct {
	rng     *rand.Rand
	table   string
	cols    []shapeCol
	params  bool // the extended protocol: values may be parameters
	args    [][]byte
	markers []string
}

var shapeTypes = []struct {
	plain   colcrypt.Type
	sqlType string
	oid     uint32
	levels  []colcrypt.Level
}{
	{colcrypt.Int4, "int4", 23, []colcrypt.Level{colcrypt.RND, colcrypt.EQ, colcrypt.ORD}},
	{colcrypt.Int8, "int8", 20, []colcrypt.Level{colcrypt.EQ, colcrypt.ORD}},
	{colcrypt.Numeric, "numeric", 1700, []colcrypt.Level{colcrypt.EQ, colcrypt.ORD}},
	{colcrypt.Text, "text", 25, []colcrypt.Level{colcrypt.RND, colcrypt.EQ, colcrypt.MATCH, colcrypt.ORD}},
	{colcrypt.Date, "date", 1082, []colcrypt.Level{colcrypt.EQ, colcrypt.ORD}},
}

// newShapeGen draws a table of 2 to 7 columns, at least one encrypted,
// in a random order.
func newShapeGen(rng *rand.Rand, n int) *shapeGen {
	g := &shapeGen{rng: rng, table: fmt.Sprintf("gt%d", n)}
	ncols := 2 + rng.Intn(6)
	for i := 0; i < ncols; i++ {
		st := shapeTypes[rng.Intn(len(shapeTypes))]
		c := shapeCol{Col: testcat.Col{Name: fmt.Sprintf("c%d", i), Plain: st.plain, TypeOID: st.oid}, sqlType: st.sqlType}
		if i == 0 || rng.Intn(3) > 0 {
			c.Level = st.levels[rng.Intn(len(st.levels))]
			if st.plain == colcrypt.Text && rng.Intn(2) == 0 {
				c.Level = colcrypt.MATCH // the level with the most rewrites
			}
			c.CaseInsensitive = c.Level == colcrypt.MATCH && rng.Intn(2) == 0
		}
		g.cols = append(g.cols, c)
	}
	rng.Shuffle(len(g.cols), func(i, j int) { g.cols[i], g.cols[j] = g.cols[j], g.cols[i] })
	return g
}

func (g *shapeGen) pick(n int) int { return g.rng.Intn(n) }

// marker is a value of c's type that appears nowhere else.
func (g *shapeGen) marker(c shapeCol) string {
	var m string
	switch c.Plain {
	case colcrypt.Int4:
		m = strconv.Itoa(975300000 + g.pick(99999))
	case colcrypt.Int8:
		m = strconv.FormatInt(97531000000000+int64(g.pick(999999999)), 10)
	case colcrypt.Numeric:
		m = fmt.Sprintf("97532%04d.%02d", g.pick(9999), g.pick(99))
	case colcrypt.Date:
		m = fmt.Sprintf("2097-%02d-%02d", 1+g.pick(12), 1+g.pick(28))
	default:
		m = "MKR"
		for i := 0; i < 8; i++ {
			m += string(rune('A' + g.pick(26)))
		}
	}
	g.markers = append(g.markers, m)
	return m
}

// raw is a value of c's type as text: a marker where it lands in an
// encrypted column (or is compared with one), a small value otherwise.
func (g *shapeGen) raw(c shapeCol, mark bool) string {
	if mark {
		return g.marker(c)
	}
	switch c.Plain {
	case colcrypt.Text:
		return "pln"
	case colcrypt.Date:
		return "2001-01-01"
	}
	return strconv.Itoa(g.pick(500))
}

func quoted(c shapeCol, s string) string {
	switch c.Plain {
	case colcrypt.Text, colcrypt.Date:
		return "'" + s + "'"
	}
	return s
}

// param adds a parameter and returns its reference.
func (g *shapeGen) param(v string) string {
	g.args = append(g.args, []byte(v))
	return "$" + strconv.Itoa(len(g.args))
}

// value is one value of c's type, in one of the ways clients write it.
func (g *shapeGen) value(c shapeCol, mark bool) string {
	if g.pick(12) == 0 {
		return "NULL"
	}
	v := g.raw(c, mark)
	if g.params && g.pick(2) == 0 {
		p := g.param(v)
		switch g.pick(3) {
		case 0:
			return p + "::" + c.sqlType
		case 1:
			return "CAST(" + p + " AS " + c.sqlType + ")"
		}
		return p
	}
	lit := quoted(c, v)
	switch g.pick(9) {
	case 0:
		return "'" + v + "'::" + c.sqlType
	case 1:
		return "CAST('" + v + "' AS " + c.sqlType + ")"
	case 2:
		return "(" + lit + ")"
	case 3:
		return "coalesce(" + lit + ", NULL)" // computed: refused for an encrypted column
	case 4:
		return "(SELECT " + lit + ")"
	}
	return lit
}

// array is an array of values of c's type (an argument of UNNEST).
func (g *shapeGen) array(c shapeCol, n int, mark bool) string {
	var elems []string
	for i := 0; i < n; i++ {
		elems = append(elems, g.raw(c, mark))
	}
	if g.params && g.pick(2) == 0 {
		p := g.param("{" + strings.Join(elems, ",") + "}")
		if g.pick(3) == 0 {
			return p
		}
		return p + "::" + c.sqlType + "[]"
	}
	switch g.pick(3) {
	case 0:
		return "'{" + strings.Join(elems, ",") + "}'::" + c.sqlType + "[]"
	case 1:
		var q []string
		for _, e := range elems {
			q = append(q, quoted(c, e))
		}
		return "ARRAY[" + strings.Join(q, ", ") + "]::" + c.sqlType + "[]"
	}
	var q []string
	for _, e := range elems {
		q = append(q, "'"+e+"'::"+c.sqlType)
	}
	return "ARRAY[" + strings.Join(q, ", ") + "]"
}

// targets draws the columns an INSERT names (nil: all, in table order).
func (g *shapeGen) targets() []shapeCol {
	if g.pick(4) == 0 {
		return nil
	}
	cols := append([]shapeCol(nil), g.cols...)
	g.rng.Shuffle(len(cols), func(i, j int) { cols[i], cols[j] = cols[j], cols[i] })
	return cols[:1+g.pick(len(cols))]
}

func colNames(cols []shapeCol) string {
	var out []string
	for _, c := range cols {
		out = append(out, c.Name)
	}
	return strings.Join(out, ", ")
}

// row is a row of values of cols' types; the k-th lands in written[k].
func (g *shapeGen) row(cols, written []shapeCol) string {
	var out []string
	for k, c := range cols {
		out = append(out, g.value(c, lands(written, k)))
	}
	return "(" + strings.Join(out, ", ") + ")"
}

// lands: position k of written is an encrypted column.
func lands(written []shapeCol, k int) bool { return k >= 0 && k < len(written) && written[k].enc() }

// landsFrom: an encrypted column at position k of written or later.
func landsFrom(written []shapeCol, k int) bool {
	for ; k < len(written); k++ {
		if written[k].enc() {
			return true
		}
	}
	return false
}

// insert: INSERT … VALUES, … SELECT * FROM UNNEST / VALUES, … SELECT of
// values, with ON CONFLICT and RETURNING, perhaps in a CTE.
func (g *shapeGen) insert() string {
	cols := g.targets()
	written := cols
	head := "INSERT INTO " + g.table
	if cols != nil {
		head += " (" + colNames(cols) + ")"
	} else {
		written = g.cols
	}
	// the types the values are of: often the columns', at times others
	feed := written
	if g.pick(5) == 0 {
		feed = append([]shapeCol(nil), g.cols...)
		g.rng.Shuffle(len(feed), func(i, j int) { feed[i], feed[j] = feed[j], feed[i] })
		feed = feed[:1+g.pick(len(feed))]
	}
	// extra is a value after a * of width w
	extra := func(w int) string {
		return g.value(g.cols[g.pick(len(g.cols))], w < 0 || lands(written, w))
	}
	var body string
	switch g.pick(7) {
	case 0, 1:
		var rows []string
		for i := 0; i <= g.pick(3); i++ {
			rows = append(rows, g.row(feed, written))
		}
		body = "VALUES " + strings.Join(rows, ", ")
	case 2:
		var arrs []string
		n := 1 + g.pick(3)
		for k, c := range feed {
			arrs = append(arrs, g.array(c, n, lands(written, k)))
		}
		w := len(feed)
		from := " FROM unnest(" + strings.Join(arrs, ", ") + ")"
		if g.pick(6) == 0 {
			from += " WITH ORDINALITY"
			w++
		}
		if g.pick(4) == 0 {
			from += ", generate_series(1, 1)"
			w = -1 // the proxy does not know what a function in FROM gives
			if landsFrom(written, 0) {
				w = -2
			}
		}
		sel := "*"
		if g.pick(3) == 0 {
			if w == -1 {
				w = len(written) // only plaintext columns can follow
			}
			sel = "*, " + extra(w)
		}
		body = "SELECT " + sel + from
	case 3:
		// named columns of UNNEST, selected in another order: array j
		// lands where the select list puts u_j
		order := g.rng.Perm(len(feed))
		var arrs, as, sel []string
		at := make([]int, len(feed))
		for k, j := range order {
			at[j] = k
		}
		for j, c := range feed {
			arrs = append(arrs, g.array(c, 2, lands(written, at[j])))
			as = append(as, fmt.Sprintf("u%d", j))
		}
		for _, j := range order {
			sel = append(sel, as[j])
		}
		body = "SELECT " + strings.Join(sel, ", ") + " FROM unnest(" + strings.Join(arrs, ", ") + ") AS u(" +
			strings.Join(as, ", ") + ")"
	case 4:
		var rows []string
		for i := 0; i <= g.pick(3); i++ {
			rows = append(rows, g.row(feed, written))
		}
		sel := "*"
		if g.pick(2) == 0 {
			var vs []string
			for i := range feed {
				vs = append(vs, fmt.Sprintf("v.column%d", i+1))
			}
			sel = strings.Join(vs, ", ")
		}
		body = "SELECT " + sel + " FROM (VALUES " + strings.Join(rows, ", ") + ") v"
	case 5:
		body = "SELECT " + g.row(feed, written)[1:]
		body = body[:len(body)-1]
		if g.pick(2) == 0 {
			body += " FROM " + g.table + " WHERE " + g.pred()
		}
	case 6:
		from, w := g.table, len(g.cols)
		switch g.pick(3) {
		case 0:
			// a relation the proxy does not know: any column may follow
			from, w = "plain_x", -1
			if !landsFrom(written, 0) {
				w = len(written)
			}
		case 1:
			row := g.row(feed, written)
			from, w = "(SELECT "+row[1:len(row)-1]+") s", len(feed)
			if landsFrom(written, 0) {
				w = -1
			}
		}
		body = "SELECT * FROM " + from
		if g.pick(2) == 0 {
			body = "SELECT *, " + extra(w) + " FROM " + from
		}
	}
	stmt := head + " " + body
	if g.pick(3) == 0 {
		c := g.cols[g.pick(len(g.cols))]
		switch g.pick(3) {
		case 0:
			stmt += " ON CONFLICT DO NOTHING"
		case 1:
			stmt += " ON CONFLICT (" + g.cols[0].Name + ") DO UPDATE SET " + c.Name + " = EXCLUDED." + c.Name
		default:
			stmt += " ON CONFLICT (" + g.cols[0].Name + ") DO UPDATE SET " + c.Name + " = " + g.value(c, c.enc())
		}
	}
	if g.pick(3) == 0 {
		stmt += " RETURNING " + []string{"*", g.cols[0].Name}[g.pick(2)]
		if g.pick(3) == 0 {
			stmt = "WITH w AS (" + stmt + ") SELECT * FROM w"
		}
	}
	return stmt
}

// pred is a WHERE condition comparing columns with values.
func (g *shapeGen) pred() string {
	c := g.cols[g.pick(len(g.cols))]
	for i := 0; i < 2 && !c.enc(); i++ {
		c = g.cols[g.pick(len(g.cols))] // encrypted columns more often
	}
	var p string
	m := c.enc()
	k := g.pick(10)
	if c.Plain == colcrypt.Text && g.pick(3) == 0 {
		k = 4 // LIKE more often
	}
	switch k {
	case 0:
		p = g.value(c, m) + " = " + c.Name
	case 1:
		p = c.Name + " IN (" + g.value(c, m) + ", " + g.value(c, m) + ")"
	case 2:
		p = c.Name + " = ANY(" + g.array(c, 2, m) + ")"
	case 3:
		p = c.Name + " BETWEEN " + g.value(c, m) + " AND " + g.value(c, m)
	case 4:
		if c.Plain == colcrypt.Text {
			p = c.Name + []string{" LIKE ", " NOT LIKE ", "::text LIKE ", " ILIKE ", " NOT ILIKE "}[g.pick(5)] + g.likePattern(c)
			if g.pick(3) == 0 {
				p += " ESCAPE '!'"
			}
		} else {
			p = c.Name + "::text = '" + g.raw(c, m) + "'"
		}
	case 5:
		switch g.pick(3) {
		case 0:
			p = "upper(" + c.Name + "::text) = '" + g.raw(c, m) + "'"
		case 1:
			p = "upper(" + c.Name + "::text) = upper(" + g.value(c, m) + ")" // Django's iexact
		default:
			p = "lower(" + c.Name + ") LIKE lower(" + g.likePattern(c) + ")"
		}
	case 6:
		p = c.Name + " IS NULL"
	case 7:
		p = c.Name + " > " + g.value(c, m)
	case 8:
		p = c.Name + " IN (SELECT " + c.Name + " FROM " + g.table + " WHERE " + c.Name + " = " + g.value(c, m) + ")"
	default:
		p = c.Name + " = " + g.value(c, m)
	}
	switch g.pick(6) {
	case 0:
		return p + " AND " + g.pred()
	case 1:
		return p + " OR " + g.pred()
	case 2:
		return "NOT (" + p + ")"
	}
	return p
}

func (g *shapeGen) likePattern(c shapeCol) string {
	m := g.raw(c, c.enc())
	pat := "%" + m + "%"
	if g.params && g.pick(2) == 0 {
		if g.pick(2) == 0 {
			return "'%' || " + g.param(m) + " || '%'" // SQLAlchemy's contains()
		}
		return g.param(pat)
	}
	return "'" + pat + "'"
}

func (g *shapeGen) update() string {
	var sets []string
	for _, c := range g.targets() {
		switch g.pick(4) {
		case 0:
			sets = append(sets, c.Name+" = CASE WHEN "+g.cols[0].Name+" = "+g.value(g.cols[0], g.cols[0].enc())+
				" THEN "+g.value(c, c.enc())+" ELSE "+c.Name+" END")
		default:
			sets = append(sets, c.Name+" = "+g.value(c, c.enc()))
		}
	}
	if len(sets) == 0 {
		sets = []string{g.cols[0].Name + " = " + g.value(g.cols[0], g.cols[0].enc())}
	}
	stmt := "UPDATE " + g.table + " SET " + strings.Join(sets, ", ")
	if g.pick(4) == 0 {
		stmt += " FROM (VALUES " + g.row(g.cols[:1], g.cols[:1]) + ") v WHERE " + g.cols[0].Name + " = v.column1"
	} else if g.pick(4) > 0 {
		stmt += " WHERE " + g.pred()
	}
	if g.pick(3) == 0 {
		stmt += " RETURNING *"
	}
	return stmt
}

func (g *shapeGen) selectStmt() string {
	kind := g.pick(5)
	if kind == 0 {
		inner := g.pred()
		return "WITH c AS (SELECT * FROM " + g.table + " WHERE " + inner + ") SELECT * FROM c WHERE " + g.pred()
	}
	sel := []string{"*", colNames(g.cols), "count(*)", g.cols[0].Name + ", 1"}[g.pick(4)]
	if c := g.cols[g.pick(len(g.cols))]; g.pick(4) == 0 {
		// a value computed with the column (by the proxy where encrypted)
		sel = "coalesce(" + c.Name + ", " + g.value(c, c.enc()) + ")"
	}
	switch kind {
	case 1:
		return "SELECT * FROM (SELECT " + sel + " FROM " + g.table + " WHERE " + g.pred() + ") s"
	case 2:
		return "SELECT " + sel + " FROM " + g.table + " WHERE " + g.pred() + " LIMIT " + strconv.Itoa(1+g.pick(5))
	}
	return "SELECT " + sel + " FROM " + g.table + " WHERE " + g.pred()
}

// copyIn is COPY … FROM STDIN and its data.
func (g *shapeGen) copyIn() (string, []byte) {
	cols := g.targets()
	written := cols
	stmt := "COPY " + g.table
	if cols != nil {
		stmt += " (" + colNames(cols) + ")"
	} else {
		written = g.cols
	}
	stmt += " FROM STDIN"
	csv := g.pick(2) == 0
	if csv {
		stmt += " WITH (FORMAT csv)"
	}
	var data bytes.Buffer
	for r := 0; r <= g.pick(3); r++ {
		var fields []string
		for _, c := range written {
			fields = append(fields, g.raw(c, c.enc()))
		}
		sep := "\t"
		if csv {
			sep = ","
		}
		data.WriteString(strings.Join(fields, sep) + "\n")
	}
	return stmt, data.Bytes()
}

func (g *shapeGen) merge() string {
	c := g.cols[g.pick(len(g.cols))]
	return "MERGE INTO " + g.table + " t USING (VALUES " + g.row([]shapeCol{c}, []shapeCol{c}) + ") v(x) ON t." + c.Name +
		" = v.x WHEN NOT MATCHED THEN INSERT (" + c.Name + ") VALUES (v.x)"
}

// messages is the client's side of one statement.
func (g *shapeGen) messages() ([]byte, string) {
	g.params = g.pick(2) == 0
	var sql string
	var copyData []byte
	switch k := g.pick(20); {
	case k < 8:
		sql = g.insert()
	case k < 11:
		sql = g.update()
	case k < 12:
		sql = "DELETE FROM " + g.table + " WHERE " + g.pred()
	case k < 17:
		sql = g.selectStmt()
	case k < 19:
		g.params = false
		sql, copyData = g.copyIn()
	default:
		sql = g.merge()
	}
	if copyData != nil {
		return encode(&pgproto3.Query{String: sql}, &pgproto3.CopyData{Data: copyData}, &pgproto3.CopyDone{}), sql
	}
	if !g.params {
		return encode(&pgproto3.Query{String: sql}), sql
	}
	return encode(&pgproto3.Parse{Query: sql}, &pgproto3.Bind{Parameters: g.args}, &pgproto3.Describe{ObjectType: 'P'},
		&pgproto3.Execute{}, &pgproto3.Sync{}), sql
}

// TestShapes: no generated statement sends a marker of an encrypted column
// to the server in plaintext; the control (the same table unencrypted)
// sends them.
func TestShapes(t *testing.T) {
	limit := 10 * time.Second
	if s := os.Getenv("PGCIPHER_SHAPES_TIME"); s != "" {
		var err error
		if limit, err = time.ParseDuration(s); err != nil {
			t.Fatalf("PGCIPHER_SHAPES_TIME: %v", err)
		}
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("PGCIPHER_SHAPES_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d (PGCIPHER_SHAPES_SEED), for %v (PGCIPHER_SHAPES_TIME)", seed, limit)
	var tried, sent, refused, withMarkers int
	deadline := time.Now().Add(limit)
	for n := 0; time.Now().Before(deadline); n++ {
		g := newShapeGen(rng, n)
		input, sql := g.messages()
		tried++
		var cols []testcat.Col
		for _, c := range g.cols {
			cols = append(cols, c.Col)
		}
		cat, keys := testcat.Build(t, testcat.Table{Name: g.table, Cols: cols})
		got := runSessionWith(t, cat, keys, n%2 == 1, input, readyFor(1))
		for _, m := range g.markers {
			// case-insensitive: a pattern the proxy folded must not leak either
			if bytes.Contains(bytes.ToLower(got), bytes.ToLower([]byte(m))) {
				t.Fatalf("shape %d: marker %s of an encrypted column reached the server in plaintext\n%s\nargs %q\ntable %+v\nsent: %q",
					n, m, sql, g.args, g.cols, got)
			}
		}
		if bytes.Contains(got, []byte(g.table)) {
			sent++
		} else {
			refused++
		}
		if len(g.markers) == 0 {
			continue
		}
		withMarkers++
		// the control: the table without encryption passes untouched
		for i := range cols {
			cols[i].Level = 0
		}
		pcat, pkeys := testcat.Build(t, testcat.Table{Name: g.table, Cols: cols})
		plain := runSessionWith(t, pcat, pkeys, false, input, readyFor(1))
		found := false
		for _, m := range g.markers {
			found = found || bytes.Contains(plain, []byte(m))
		}
		if !found {
			t.Fatalf("shape %d: control: no marker reached the server from the unencrypted table\n%s\n%q", n, sql, plain)
		}
	}
	t.Logf("shapes: %d tried (%d with markers), %d sent rewritten, %d refused; no marker in plaintext", tried, withMarkers, sent, refused)
}
