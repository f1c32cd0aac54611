// INSERT … SELECT: what each item of the select list writes, a star
// expanded into every column it stands for, and the values the client
// wrote in FROM (VALUES rows, UNNEST's arrays) encrypted for the column
// each one lands in.

package rewrite

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/pgcipher/pgcipher/proxy/catalog"
)

// feed is a FROM item whose columns are values the client wrote: the rows
// of VALUES, or the arrays UNNEST turns into rows.
type feed struct {
	names []string     // the columns' names: the alias's, or PostgreSQL's defaults
	cols  [][]*pg.Node // VALUES: each column's entry of every row; UNNEST: its array
	// unnest: each column is one array whose elements are the values
	unnest bool
	// ordinality: WITH ORDINALITY adds a last column of row numbers
	ordinality bool
	used       []bool // a column already written into an encrypted column
}

// valuesFeed is the feed of (VALUES …) AS alias(names), or nil.
func valuesFeed(rs *pg.RangeSubselect) *feed {
	q := rs.Subquery.GetSelectStmt()
	if q == nil || len(q.ValuesLists) == 0 {
		return nil
	}
	f := &feed{}
	for r, row := range q.ValuesLists {
		items := row.GetList().GetItems()
		if r == 0 {
			f.cols = make([][]*pg.Node, len(items))
		}
		if len(items) != len(f.cols) {
			return nil // the server refuses rows of different lengths
		}
		for i, it := range items {
			f.cols[i] = append(f.cols[i], it)
		}
	}
	for i := range f.cols {
		f.names = append(f.names, fmt.Sprintf("column%d", i+1))
	}
	if rs.Alias != nil {
		renameFeed(f.names, rs.Alias.Colnames)
	}
	f.used = make([]bool, len(f.cols))
	return f
}

// unnestFeed is the feed of unnest(a, b, …) [WITH ORDINALITY] AS
// alias(names), or nil for any other function.
func unnestFeed(rf *pg.RangeFunction) *feed {
	if rf.IsRowsfrom || len(rf.Functions) != 1 {
		return nil
	}
	l := rf.Functions[0].GetList().GetItems()
	if len(l) == 0 {
		return nil
	}
	fc := l[0].GetFuncCall()
	if fc == nil || len(fc.Args) == 0 || len(l) > 1 && l[1] != nil && l[1].Node != nil ||
		strings.ToLower(funcName(fc)) != "unnest" {
		return nil
	}
	f := &feed{unnest: true, ordinality: rf.Ordinality}
	for _, arg := range fc.Args {
		f.cols = append(f.cols, []*pg.Node{arg})
		f.names = append(f.names, "unnest")
	}
	if rf.Alias != nil {
		if len(fc.Args) == 1 {
			f.names[0] = rf.Alias.Aliasname // a one-column result takes the alias's name
		}
		renameFeed(f.names, rf.Alias.Colnames)
	}
	f.used = make([]bool, len(f.cols))
	return f
}

func renameFeed(names []string, colnames []*pg.Node) {
	for i, n := range colnames {
		if i < len(names) && n.GetString_() != nil {
			names[i] = n.GetString_().Sval
		}
	}
}

// source is what one column of an INSERT's select list carries.
type source struct {
	node  *pg.Node // an expression of the select list
	feed  *feed    // or a column of VALUES or UNNEST
	index int      // ... its index
	c     *col     // or an encrypted column of a relation
	plain string   // or a plaintext column (of a relation, or UNNEST's ordinality)
}

func (f *feed) sources() []source {
	var out []source
	for i := range f.cols {
		out = append(out, source{feed: f, index: i})
	}
	if f.ordinality {
		out = append(out, source{plain: "ordinality"})
	}
	return out
}

// expand lists what * or alias.* stands for in a select list whose FROM
// items are sc's; false when the proxy cannot tell (a relation without
// encrypted columns, whose columns it does not know, a subquery, a
// function, a join that merges columns).
func (a *analyzer) expand(sc *scope, cr *pg.ColumnRef) ([]source, bool) {
	var names []string
	for _, f := range cr.Fields {
		if f.GetString_() != nil {
			names = append(names, f.GetString_().Sval)
		}
	}
	if len(names) == 0 && sc.merged {
		return nil, false
	}
	var out []source
	found := false
	for _, r := range sc.rels {
		if len(names) > 0 && r.alias != names[len(names)-1] {
			continue
		}
		found = true
		switch {
		case r.feed != nil:
			out = append(out, r.feed.sources()...)
		case r.full:
			for _, at := range r.r.Attrs {
				if at.Enc == nil {
					out = append(out, source{plain: at.Name})
				} else {
					out = append(out, source{c: &col{attr: at, rel: r.r, name: r.alias + "." + at.Name, fields: []string{r.alias, at.Name}}})
				}
			}
		default:
			return nil, false
		}
	}
	return out, found || len(names) == 0
}

// sourceOf is what a select-list expression writes: a column of VALUES
// or UNNEST stands for the values the client wrote there.
func (a *analyzer) sourceOf(sc *scope, n *pg.Node) source {
	cr := n.GetColumnRef()
	if cr == nil || isStar(cr) {
		return source{node: n}
	}
	if x, _ := a.resolve(sc, cr); x != nil {
		return source{node: n}
	}
	var names []string
	for _, f := range cr.Fields {
		if f.GetString_() == nil {
			return source{node: n}
		}
		names = append(names, f.GetString_().Sval)
	}
	name, qual := names[len(names)-1], names[:len(names)-1]
	for s := sc; s != nil; s = s.parent {
		for _, r := range s.rels {
			if r.feed == nil || len(qual) > 0 && qual[len(qual)-1] != r.alias {
				continue
			}
			for i, fn := range r.feed.names {
				if fn == name {
					return source{feed: r.feed, index: i}
				}
			}
		}
	}
	return source{node: n}
}

// into is the list of columns an INSERT writes, in order (nil for a
// column the proxy does not know).
type into struct {
	r     *catalog.Relation
	attrs []*catalog.Attr
}

// col is the encrypted column at position i, or nil.
func (t *into) col(i int) *col {
	if i >= 0 && i < len(t.attrs) && t.attrs[i] != nil && t.attrs[i].Enc != nil {
		return attrCol(t.r, t.attrs[i])
	}
	return nil
}

// encFrom is the first encrypted column at position i or later, or nil.
func (t *into) encFrom(i int) *catalog.Attr {
	for ; i < len(t.attrs); i++ {
		if t.attrs[i] != nil && t.attrs[i].Enc != nil {
			return t.attrs[i]
		}
	}
	return nil
}

// write checks (and rewrites) what source s writes into column c, an
// encrypted column or nil for a plaintext one.
func (a *analyzer) write(sc *scope, c *col, s source) error {
	if c == nil {
		x := s.c
		if s.node != nil {
			var err error
			if x, err = a.encCol(sc, s.node); err != nil {
				return err
			}
		}
		if x != nil {
			return refuse("", "pgcipher: encrypted column %q cannot be written into a plaintext column", x.name)
		}
		return nil
	}
	switch {
	case s.c != nil:
		return a.assignFrom(c, s.c)
	case s.plain != "":
		return refuse("Write the values through the proxy, as literals or parameters.",
			"pgcipher: the value written to encrypted column %q would come from plaintext column %q", c.name, s.plain)
	case s.node != nil:
		return a.value(sc, c, s.node, "INSERT … SELECT", true)
	}
	if s.feed.used[s.index] {
		return refuse("Give each column its own values.",
			"pgcipher: a column of VALUES or UNNEST cannot be written into two columns when one is encrypted (%q)", c.name)
	}
	s.feed.used[s.index] = true
	for _, n := range s.feed.cols[s.index] {
		if s.feed.unnest {
			if err := a.arrayValue(sc, c, n); err != nil {
				return err
			}
		} else if err := a.value(sc, c, n, "VALUES", true); err != nil {
			return err
		}
	}
	return nil
}

// arrayValue: an array whose elements are values of encrypted column c
// (an argument of UNNEST).  ARRAY[…] and '{…}' are encrypted element by
// element, a parameter at Bind; the array is cast to c's encrypted array
// type, so that an empty one is typed too.
func (a *analyzer) arrayValue(sc *scope, c *col, n *pg.Node) error {
	v := n
	var mod *CastMod // ::varchar(40)[]: applied to each element
	if tc := v.GetTypeCast(); tc != nil {
		mod, _ = castMod(c.attr.Enc.Plain, tc.TypeName)
		v = tc.Arg
	}
	switch {
	case v.GetParamRef() != nil:
		num := int(v.GetParamRef().Number)
		if err := a.param(c, num, false, true, false, false); err != nil {
			return err
		}
		if err := a.paramMod(num, mod); err != nil {
			return err
		}
	case v.GetAArrayExpr() != nil:
		for _, x := range v.GetAArrayExpr().Elements {
			if err := a.valueMod(sc, c, x, "an array of UNNEST", true, mod); err != nil {
				return err
			}
		}
	case v.GetAConst() != nil && v.GetAConst().Isnull:
	case arrayLiteral(v) != nil:
		var elems []*string
		if err := arrayParser.Scan(pgtype.TextArrayOID, 0, []byte(*arrayLiteral(v)), &elems); err != nil {
			return &Refusal{Code: CodeValue, Message: "pgcipher: malformed array literal for " + strconv.Quote(c.name), Detail: err.Error()}
		}
		arr := &pg.A_ArrayExpr{Location: -1}
		for _, x := range elems {
			if x == nil {
				arr.Elements = append(arr.Elements, &pg.Node{Node: &pg.Node_AConst{AConst: &pg.A_Const{Isnull: true, Location: -1}}})
				continue
			}
			el := pg.MakeAConstStrNode(*x, -1)
			if err := a.valueMod(sc, c, el, "an array of UNNEST", true, mod); err != nil {
				return err
			}
			arr.Elements = append(arr.Elements, el)
		}
		v = &pg.Node{Node: &pg.Node_AArrayExpr{AArrayExpr: arr}}
	default:
		return refuse("Give UNNEST an array parameter, ARRAY[…] of literals or an array literal.",
			"pgcipher: the array written to encrypted column %q cannot be computed by the server", c.name)
	}
	n.Node = &pg.Node_TypeCast{TypeCast: &pg.TypeCast{Arg: &pg.Node{Node: v.Node}, TypeName: a.encArrayType(c), Location: -1}}
	a.changed = true
	return nil
}

// encArrayType is the type name of c's encrypted type's array.
func (a *analyzer) encArrayType(c *col) *pg.TypeName {
	return &pg.TypeName{Names: []*pg.Node{pg.MakeStrNode(a.cat.ExtSchema), pg.MakeStrNode(c.attr.Enc.Name)},
		ArrayBounds: []*pg.Node{{Node: &pg.Node_Integer{Integer: &pg.Integer{Ival: -1}}}}, Typemod: -1, Location: -1}
}
