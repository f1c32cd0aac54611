// Queries: FROM, target lists, WHERE, GROUP BY, ORDER BY, and the
// generic walk that refuses encrypted columns everywhere else.

package rewrite

import (
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

const hintAllowed = "On encrypted columns the proxy runs comparisons with values (=, <>, <, >, BETWEEN, IN), IS NULL, ORDER BY, GROUP BY, DISTINCT, count, MIN/MAX and LIKE on MATCH columns, and computes sum, avg, arithmetic and a few functions in a statement's select list, HAVING and UPDATE … SET (see docs/design.md, section 15)."

// withClause adds the CTEs of w to sc.
func (a *analyzer) withClause(sc *scope, w *pg.WithClause) error {
	if w == nil {
		return nil
	}
	if sc.ctes == nil {
		sc.ctes = map[string]*catalog.Relation{}
	}
	for _, n := range w.Ctes {
		cte := n.GetCommonTableExpr()
		if cte == nil {
			continue
		}
		if w.Recursive {
			if err := a.generic(sc, cte.Ctequery, "a recursive WITH query"); err != nil {
				return err
			}
			sc.ctes[cte.Ctename] = nil
			continue
		}
		var r *catalog.Relation
		var err error
		q := cte.Ctequery
		switch {
		case q.GetSelectStmt() != nil:
			r, err = a.selectStmt(sc, q.GetSelectStmt(), false)
		case q.GetInsertStmt() != nil:
			err = a.insertStmt(sc, q.GetInsertStmt())
			r = a.returning
		case q.GetUpdateStmt() != nil:
			err = a.updateStmt(sc, q.GetUpdateStmt())
			r = a.returning
		case q.GetDeleteStmt() != nil:
			err = a.deleteStmt(sc, q.GetDeleteStmt())
			r = a.returning
		default:
			err = a.generic(sc, q, "this WITH query")
		}
		if err != nil {
			return err
		}
		if r != nil {
			renameAttrs(r, cte.Aliascolnames)
		}
		sc.ctes[cte.Ctename] = r
	}
	return nil
}

// selectStmt analyses a query and returns the relation it produces, with
// the bindings of the encrypted columns it passes through (nil when it
// passes none).  top: the statement's own query, whose result the proxy
// may post-process.
func (a *analyzer) selectStmt(parent *scope, s *pg.SelectStmt, top bool) (*catalog.Relation, error) {
	if s == nil {
		return nil, nil
	}
	sc := &scope{parent: parent}
	if err := a.withClause(sc, s.WithClause); err != nil {
		return nil, err
	}
	if s.Op != pg.SetOperation_SETOP_NONE && s.Op != pg.SetOperation_SET_OPERATION_UNDEFINED {
		return nil, a.setOperation(sc, s)
	}
	for _, vl := range s.ValuesLists {
		if err := a.generic(sc, vl, "VALUES"); err != nil {
			return nil, err
		}
	}
	for _, n := range s.FromClause {
		if err := a.fromItem(sc, n); err != nil {
			return nil, err
		}
	}
	var out *catalog.Relation
	computed := false
	if top {
		var err error
		if computed, err = a.computeSelect(sc, s); err != nil {
			return nil, err
		}
	}
	if !computed {
		var err error
		if out, err = a.targetList(sc, s.TargetList); err != nil {
			return nil, err
		}
	}
	if err := a.where(sc, s, top); err != nil {
		return nil, err
	}
	if top && a.top && len(a.plan.Filters) > 0 {
		// the server's LIMIT would count candidates the recheck drops:
		// the proxy counts what it keeps
		if err := a.proxyLimits(s); err != nil {
			return nil, err
		}
	}
	for _, g := range s.GroupClause {
		if err := a.groupItem(sc, s, g, "GROUP BY"); err != nil {
			return nil, err
		}
	}
	if s.HavingClause != nil {
		if err := a.predicate(sc, s.HavingClause, false); err != nil {
			return nil, err
		}
	}
	if err := a.distinct(sc, s, out); err != nil {
		return nil, err
	}
	for _, n := range s.SortClause {
		if err := a.sortItem(sc, s, n, top); err != nil {
			return nil, err
		}
	}
	for _, w := range s.WindowClause {
		if err := a.generic(sc, w, "a window"); err != nil {
			return nil, err
		}
	}
	return out, a.limits(sc, s)
}

// proxyLimits moves the LIMIT and OFFSET of the statement's query to the
// proxy (literals, or parameters read at Bind), which applies them to the
// rows it keeps, after its sort.
func (a *analyzer) proxyLimits(s *pg.SelectStmt) error {
	if s.LimitCount == nil && s.LimitOffset == nil {
		return nil
	}
	var err error
	if p := paramOf(s.LimitCount); p != nil {
		a.plan.LimitParam, a.plan.Limit = int(p.Number), -1
	} else if a.plan.Limit, err = limitValue(s.LimitCount, -1); err != nil {
		return err
	}
	if p := paramOf(s.LimitOffset); p != nil {
		a.plan.OffsetParam = int(p.Number)
	} else if a.plan.Offset, err = limitValue(s.LimitOffset, 0); err != nil {
		return err
	}
	a.plan.Limited, s.LimitCount, s.LimitOffset = true, nil, nil
	a.changed = true
	return nil
}

// paramOf is the parameter n is, perhaps cast ($2::INTEGER), or nil.
func paramOf(n *pg.Node) *pg.ParamRef {
	if tc := n.GetTypeCast(); tc != nil {
		n = tc.Arg
	}
	return n.GetParamRef()
}

// setOperation: UNION, INTERSECT or EXCEPT, of plaintext columns only.
func (a *analyzer) setOperation(sc *scope, s *pg.SelectStmt) error {
	l, err := a.selectStmt(sc, s.Larg, false)
	if err != nil {
		return err
	}
	r, err := a.selectStmt(sc, s.Rarg, false)
	if err != nil {
		return err
	}
	if l != nil || r != nil {
		return refuse("Run the parts as separate queries.",
			"pgcipher: UNION, INTERSECT and EXCEPT of encrypted columns are not supported")
	}
	out := &scope{parent: sc}
	for _, n := range s.SortClause {
		if err := a.generic(out, n, "ORDER BY of a UNION, INTERSECT or EXCEPT"); err != nil {
			return err
		}
	}
	return a.limits(sc, s)
}

// where analyses a query's WHERE: a top-level query's AND-ed conjuncts
// may hold LIKE rechecks (a.cur is the query they add hidden fields to).
func (a *analyzer) where(sc *scope, s *pg.SelectStmt, top bool) error {
	if s.WhereClause == nil {
		return nil
	}
	conj := top && a.top && a.filterable(s)
	saved := a.cur
	a.cur = nil
	if conj {
		a.cur = s
	}
	err := a.predicate(sc, s.WhereClause, conj)
	a.cur = saved
	return err
}

// distinct: DISTINCT needs a token (EQ or ORD) on every encrypted output
// column; DISTINCT ON's expressions are group items.
func (a *analyzer) distinct(sc *scope, s *pg.SelectStmt, out *catalog.Relation) error {
	if len(s.DistinctClause) == 0 {
		return nil
	}
	if len(s.DistinctClause) == 1 && s.DistinctClause[0] == nil || s.DistinctClause[0].Node == nil {
		for _, at := range outputAttrs(out) {
			if at.Binding == nil || !at.Binding.Spec.Level.HasToken() {
				return refuse("Bind the column at level EQ or ORD.",
					"pgcipher: DISTINCT on encrypted column %q needs level EQ or ORD", at.Name)
			}
		}
		return nil
	}
	for _, d := range s.DistinctClause {
		if err := a.groupItem(sc, s, d, "DISTINCT ON"); err != nil {
			return err
		}
	}
	return nil
}

func (a *analyzer) limits(sc *scope, s *pg.SelectStmt) error {
	if err := a.generic(sc, s.LimitCount, "LIMIT"); err != nil {
		return err
	}
	return a.generic(sc, s.LimitOffset, "OFFSET")
}

func outputAttrs(r *catalog.Relation) []*catalog.Attr {
	if r == nil {
		return nil
	}
	return r.Attrs
}

// filterable: a query whose rows the proxy may drop after the server
// (LIKE rechecks): no aggregation, grouping or DISTINCT, which would have
// been computed on rows that are then dropped.  LIMIT and OFFSET (integer
// literals or parameters) move to the proxy, except with FOR UPDATE,
// which would lock every candidate.
func (a *analyzer) filterable(s *pg.SelectStmt) bool {
	if len(s.GroupClause) > 0 || s.HavingClause != nil || len(s.DistinctClause) > 0 ||
		len(s.WindowClause) > 0 || s.IntoClause != nil || s.LockingClause != nil && (s.LimitCount != nil || s.LimitOffset != nil) {
		return false
	}
	for _, t := range s.TargetList {
		if hasNode(t, func(n *pg.Node) bool { return n.GetFuncCall() != nil || n.GetSubLink() != nil }) {
			return false
		}
	}
	return true
}

// hasNode reports whether any node under n satisfies f.
func hasNode(n *pg.Node, f func(*pg.Node) bool) bool {
	return hasMessage(n, func(m protoreflect.Message) bool {
		nn, ok := m.Interface().(*pg.Node)
		return ok && f(nn)
	})
}

// hasMessage reports whether n, or any message under it, satisfies f.
func hasMessage(n *pg.Node, f func(protoreflect.Message) bool) bool {
	found := false
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		if f(m) {
			found = true
			return
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			if fd.Kind() != protoreflect.MessageKind || fd.IsMap() {
				return true
			}
			if fd.IsList() {
				for i := 0; i < v.List().Len() && !found; i++ {
					walk(v.List().Get(i).Message())
				}
			} else {
				walk(v.Message())
			}
			return !found
		})
	}
	if n != nil {
		walk(n.ProtoReflect())
	}
	return found
}

// targetList checks a select list or RETURNING list and returns the
// derived relation of its encrypted outputs.
func (a *analyzer) targetList(sc *scope, list []*pg.Node) (*catalog.Relation, error) {
	out := &catalog.Relation{}
	for _, t := range list {
		rt := t.GetResTarget()
		if rt == nil || rt.Val == nil {
			continue
		}
		v := rt.Val
		switch {
		case v.GetColumnRef() != nil:
			c, err := a.resolve(sc, v.GetColumnRef())
			if err != nil {
				return nil, err
			}
			if c == nil {
				continue
			}
			if c.attr == nil {
				if !isStar(v.GetColumnRef()) {
					return nil, refuse("Name the columns you need.",
						"pgcipher: a whole-row reference %q to a relation with encrypted columns cannot be used here", c.name)
				}
				for _, at := range c.rel.Attrs {
					if at.Enc != nil {
						cp := *at
						out.Attrs = append(out.Attrs, &cp)
					}
				}
				continue
			}
			cp := *c.attr
			if rt.Name != "" {
				cp.Name = rt.Name
			}
			out.Attrs = append(out.Attrs, &cp)
		case v.GetFuncCall() != nil:
			at, err := a.aggregate(sc, v.GetFuncCall())
			if err != nil {
				return nil, err
			}
			if at != nil {
				cp := *at
				cp.Name = rt.Name
				if cp.Name == "" {
					cp.Name = funcName(v.GetFuncCall())
				}
				out.Attrs = append(out.Attrs, &cp)
			}
		case v.GetSubLink() != nil && v.GetSubLink().SubLinkType == pg.SubLinkType_EXPR_SUBLINK:
			r, err := a.selectStmt(sc, v.GetSubLink().Subselect.GetSelectStmt(), false)
			if err != nil {
				return nil, err
			}
			if r != nil && len(r.Attrs) > 0 {
				cp := *r.Attrs[0]
				cp.Name = rt.Name
				out.Attrs = append(out.Attrs, &cp)
			}
		default:
			if err := a.generic(sc, v, "an expression of the select list"); err != nil {
				return nil, err
			}
		}
	}
	if len(out.Attrs) == 0 {
		return nil, nil
	}
	return out, nil
}

func isStar(cr *pg.ColumnRef) bool {
	return len(cr.Fields) > 0 && cr.Fields[len(cr.Fields)-1].GetAStar() != nil
}

func funcName(f *pg.FuncCall) string {
	var parts []string
	for _, n := range f.Funcname {
		if n.GetString_() != nil {
			parts = append(parts, n.GetString_().Sval)
		}
	}
	if len(parts) > 1 && parts[0] == "pg_catalog" {
		parts = parts[1:]
	}
	return strings.Join(parts, ".")
}

// aggregate checks a function call of a select list: count, and MIN/MAX
// of ORD columns, run on ciphertext; the pgcipher catalog functions
// reload the catalog; any other function must not see encrypted columns.
func (a *analyzer) aggregate(sc *scope, f *pg.FuncCall) (*catalog.Attr, error) {
	name := strings.ToLower(funcName(f))
	if strings.HasPrefix(name, "pgcipher.") {
		a.plan.Reload = true
	}
	var c *col
	if len(f.Args) == 1 {
		var err error
		if c, err = a.encCol(sc, f.Args[0]); err != nil {
			return nil, err
		}
	}
	if c == nil || f.Over != nil || f.AggFilter != nil || len(f.AggOrder) > 0 {
		return nil, a.generic(sc, &pg.Node{Node: &pg.Node_FuncCall{FuncCall: f}}, "")
	}
	switch name {
	case "count":
		if f.AggDistinct && level(c) != colcrypt.ORD {
			return nil, refuse("Bind the column at level ORD (type enc_T_ord), or count with GROUP BY.",
				"pgcipher: count(DISTINCT %s) needs level ORD (the server sorts the values)", c.name)
		}
		if f.AggDistinct {
			// how many distinct values: a comparison, so a read
			if _, err := a.crypt(c, colcrypt.AccessRead); err != nil {
				return nil, err
			}
		}
		return nil, nil
	case "min", "max":
		if level(c) != colcrypt.ORD {
			return nil, refuse("Bind the column at level ORD (type enc_T_ord).",
				"pgcipher: %s(%s) needs level ORD", name, c.name)
		}
		if prefixOrder(c.attr.Enc.Plain) {
			return nil, refuse("Use ORDER BY without LIMIT and take the first row, or an ORD column of a fixed-size type.",
				"pgcipher: %s(%s) is refused: the ORD order of %s covers only a 16-byte prefix", name, c.name, c.attr.Enc.Plain)
		}
		if _, err := a.crypt(c, colcrypt.AccessRead); err != nil {
			return nil, err
		}
		return c.attr, nil
	}
	return nil, refuse(hintAllowed, "pgcipher: function %s() cannot be computed on encrypted column %q", name, c.name)
}

// groupItem checks a GROUP BY or DISTINCT ON item.
func (a *analyzer) groupItem(sc *scope, s *pg.SelectStmt, n *pg.Node, what string) error {
	c, err := a.sortTarget(sc, s, n)
	if err != nil || c == nil {
		if err == nil {
			err = a.generic(sc, n, what)
		}
		return err
	}
	if !level(c).HasToken() {
		return refuse("Bind the column at level EQ or ORD.",
			"pgcipher: %s on encrypted column %q needs level EQ or ORD", what, c.name)
	}
	// grouping tells which rows share a value: a read (design 13.12)
	_, err = a.crypt(c, colcrypt.AccessRead)
	return err
}

// sortTarget resolves an ORDER BY / GROUP BY item: a column, an output
// name or an output position.
func (a *analyzer) sortTarget(sc *scope, s *pg.SelectStmt, n *pg.Node) (*col, error) {
	if k := n.GetAConst(); k != nil && k.GetIval() != nil {
		i := int(k.GetIval().Ival) - 1
		if i >= 0 && i < len(s.TargetList) {
			if rt := s.TargetList[i].GetResTarget(); rt != nil && rt.Val != nil {
				return a.encCol(sc, rt.Val)
			}
		}
		return nil, nil
	}
	if cr := n.GetColumnRef(); cr != nil && len(cr.Fields) == 1 && cr.Fields[0].GetString_() != nil {
		name := cr.Fields[0].GetString_().Sval
		for _, t := range s.TargetList {
			if rt := t.GetResTarget(); rt != nil && rt.Name == name && rt.Val != nil {
				return a.encCol(sc, rt.Val)
			}
		}
	}
	return a.encCol(sc, n)
}

// sortItem checks an ORDER BY item; ORD columns of prefix-ordered types
// are sorted again by the proxy (top-level queries without LIMIT only).
func (a *analyzer) sortItem(sc *scope, s *pg.SelectStmt, n *pg.Node, top bool) error {
	sb := n.GetSortBy()
	if sb == nil {
		return a.generic(sc, n, "ORDER BY")
	}
	c, err := a.sortTarget(sc, s, sb.Node)
	if err != nil {
		return err
	}
	if c == nil {
		return a.generic(sc, sb.Node, "ORDER BY")
	}
	if level(c) != colcrypt.ORD || sb.SortbyDir == pg.SortByDir_SORTBY_USING {
		return refuse("Bind the column at level ORD (type enc_T_ord).",
			"pgcipher: ORDER BY on encrypted column %q needs level ORD", c.name)
	}
	// an order compares the values: a read (design 13.12)
	if _, err := a.crypt(c, colcrypt.AccessRead); err != nil {
		return err
	}
	if !prefixOrder(c.attr.Enc.Plain) {
		return nil
	}
	if !top || !a.top || len(s.SortClause) == 0 || s.LockingClause != nil && (s.LimitCount != nil || s.LimitOffset != nil) {
		return refuse("Order by it in the statement's own query (the proxy then sorts the rows), or order by an ORD column of a fixed-size type.",
			"pgcipher: ORDER BY %s in a subquery, or with LIMIT and FOR UPDATE, is refused: the ORD order of %s covers only a 16-byte prefix",
			c.name, c.attr.Enc.Plain)
	}
	// LIMIT and OFFSET count rows in the proxy's order: the proxy applies
	// them after its sort (the server returns every row)
	if err := a.proxyLimits(s); err != nil {
		return err
	}
	if len(a.plan.Resorts) > 0 || s.SortClause[0] != n {
		return refuse("Order by that column first.",
			"pgcipher: ORDER BY %s must be the first sort key: the ORD order of %s covers only a 16-byte prefix", c.name, c.attr.Enc.Plain)
	}
	if !a.inTargets(sc, s, c) {
		return refuse("Select the column too.",
			"pgcipher: ORDER BY %s needs the column in the select list: the proxy sorts by its plaintext", c.name)
	}
	if _, err := a.crypt(c, colcrypt.AccessRead); err != nil {
		return err
	}
	desc, nullsFirst := sortDirection(sb)
	a.plan.Resorts = append(a.plan.Resorts, Resort{Relid: c.rel.OID, Attnum: c.attr.Num,
		Type: c.attr.Enc.Plain, Desc: desc, NullsFirst: nullsFirst})
	return nil
}

// sortDirection reads DESC and NULLS FIRST/LAST (NULLS FIRST is the
// default of DESC, as in PostgreSQL).
func sortDirection(sb *pg.SortBy) (desc, nullsFirst bool) {
	desc = sb.SortbyDir == pg.SortByDir_SORTBY_DESC
	nullsFirst = desc
	switch sb.SortbyNulls {
	case pg.SortByNulls_SORTBY_NULLS_FIRST:
		nullsFirst = true
	case pg.SortByNulls_SORTBY_NULLS_LAST:
		nullsFirst = false
	}
	return desc, nullsFirst
}

// inTargets: the select list names column c directly or through a star.
func (a *analyzer) inTargets(sc *scope, s *pg.SelectStmt, c *col) bool {
	for _, t := range s.TargetList {
		rt := t.GetResTarget()
		if rt == nil || rt.Val == nil || rt.Val.GetColumnRef() == nil {
			continue
		}
		x, _ := a.resolve(sc, rt.Val.GetColumnRef())
		if x != nil && (x.attr == c.attr || x.attr == nil && x.rel == c.rel) {
			return c.rel.OID != 0
		}
	}
	return false
}

// formatOf: enc_format(c) of an encrypted column, the order format the
// server reads in the value's header (design 13.5b): what
// pgcipher-keys reencrypt-column selects the rows to move by.
func (a *analyzer) formatOf(sc *scope, f *pg.FuncCall) bool {
	name := strings.ToLower(funcName(f))
	if name != "enc_format" && name != strings.ToLower(a.cat.ExtSchema)+".enc_format" || len(f.Args) != 1 {
		return false
	}
	c, err := a.encCol(sc, f.Args[0])
	return err == nil && c != nil
}

// generic walks any node and refuses every encrypted column in it; what
// names the construct for the error message.
func (a *analyzer) generic(sc *scope, n *pg.Node, what string) error {
	if n == nil || n.Node == nil {
		return nil
	}
	switch {
	case n.GetColumnRef() != nil:
		c, err := a.resolve(sc, n.GetColumnRef())
		if err != nil || c == nil {
			return err
		}
		if what == "" {
			what = "this expression"
		}
		return refuse(hintAllowed, "pgcipher: encrypted column %q cannot be used in %s", c.name, what)
	case n.GetSelectStmt() != nil:
		_, err := a.selectStmt(sc, n.GetSelectStmt(), false)
		return err
	case n.GetFuncCall() != nil:
		name := funcName(n.GetFuncCall())
		if strings.HasPrefix(strings.ToLower(name), "pgcipher.") {
			a.plan.Reload = true
		}
		if a.formatOf(sc, n.GetFuncCall()) {
			return nil
		}
		if f := n.GetFuncCall(); len(f.Args) == 1 && (strings.EqualFold(name, "upper") || strings.EqualFold(name, "lower")) {
			if c, err := a.encCol(sc, f.Args[0]); err != nil || c != nil {
				if err == nil {
					err = refuse("Search a MATCH column bound case_insensitive => true with upper() or lower() of it on the left of LIKE, = or <>, or with ILIKE; or compute it in the select list.",
						"pgcipher: %s() of encrypted column %q cannot be computed by the server here: only a search of a case-insensitive MATCH column (%s(column) LIKE, = or <> a pattern) is served", name, c.name, name)
				}
				return err
			}
		}
		what = "function " + name + "()"
	case n.GetAExpr() != nil:
		what = "operator " + opName(n.GetAExpr())
	case n.GetTypeCast() != nil:
		what = "a cast"
	case n.GetParamRef() != nil:
		return nil
	}
	return a.walk(sc, n.ProtoReflect(), what)
}

func (a *analyzer) walk(sc *scope, m protoreflect.Message, what string) error {
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind || fd.IsMap() {
			return true
		}
		if fd.IsList() {
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = a.walkValue(sc, l.Get(i).Message(), what)
			}
			return err == nil
		}
		err = a.walkValue(sc, v.Message(), what)
		return err == nil
	})
	return err
}

func (a *analyzer) walkValue(sc *scope, m protoreflect.Message, what string) error {
	if n, ok := m.Interface().(*pg.Node); ok {
		return a.generic(sc, n, what)
	}
	return a.walk(sc, m, what)
}

func opName(e *pg.A_Expr) string {
	var parts []string
	for _, n := range e.Name {
		if n.GetString_() != nil {
			parts = append(parts, n.GetString_().Sval)
		}
	}
	return strings.Join(parts, ".")
}
