// Writes: INSERT (VALUES, SELECT, ON CONFLICT), UPDATE, DELETE, COPY,
// and the key function pgcipher.add_column_key(name) that the proxy
// completes with a key it draws and wraps.

package rewrite

import (
	"encoding/hex"
	"strconv"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// target is the relation a write statement changes, in a scope.
func (a *analyzer) target(sc *scope, rv *pg.RangeVar) *catalog.Relation {
	r := a.relation(rv)
	alias := rv.Relname
	if rv.Alias != nil {
		alias = rv.Alias.Aliasname
	}
	sc.rels = append(sc.rels, rel{alias: alias, name: rv.Relname, r: r, full: r != nil})
	return r
}

func attrCol(r *catalog.Relation, at *catalog.Attr) *col {
	return &col{attr: at, rel: r, name: at.Name, fields: []string{at.Name}}
}

func (a *analyzer) insertStmt(parent *scope, s *pg.InsertStmt) error {
	sc := &scope{parent: parent}
	if err := a.withClause(sc, s.WithClause); err != nil {
		return err
	}
	r := a.relation(s.Relation)
	// the columns written, in order
	var targets []*catalog.Attr
	if r != nil {
		if len(s.Cols) == 0 {
			targets = r.Attrs
		}
		for _, cn := range s.Cols {
			rt := cn.GetResTarget()
			at := r.Attr(rt.Name)
			if at != nil && at.Enc != nil && len(rt.Indirection) > 0 {
				return refuse("", "pgcipher: encrypted column %q cannot be written through a subscript or field", rt.Name)
			}
			targets = append(targets, at)
		}
	}
	to := &into{r: r, attrs: targets}
	if q := s.SelectStmt.GetSelectStmt(); q != nil {
		if len(q.ValuesLists) > 0 {
			qs := &scope{parent: sc}
			if err := a.withClause(qs, q.WithClause); err != nil {
				return err
			}
			for _, row := range q.ValuesLists {
				// the row, where a column bound tenant_by a column finds
				// its tenant (design 13.13)
				a.insertRow = &insertRow{items: row.GetList().GetItems(), targets: targets}
				for i, v := range row.GetList().GetItems() {
					if c := to.col(i); c != nil {
						if err := a.value(qs, c, v, "INSERT", true); err != nil {
							a.insertRow = nil
							return err
						}
					} else if err := a.plainValue(qs, v, "INSERT"); err != nil {
						a.insertRow = nil
						return err
					}
				}
				a.insertRow = nil
			}
		} else {
			if _, err := a.selectStmt(sc, q, false); err != nil {
				return err
			}
			if err := a.selectInto(sc, q, to); err != nil {
				return err
			}
		}
	}
	if oc := s.OnConflictClause; oc != nil {
		us := &scope{parent: sc}
		a.target(us, s.Relation)
		us.rels = append(us.rels, rel{alias: "excluded", name: "excluded", r: r})
		if err := a.setList(us, r, oc.TargetList); err != nil {
			return err
		}
		if err := a.predicate(us, oc.WhereClause, false); err != nil {
			return err
		}
		if oc.Infer != nil {
			if err := a.predicate(us, oc.Infer.WhereClause, false); err != nil {
				return err
			}
		}
	}
	return a.returningList(sc, s.Relation, s.ReturningList)
}

// plainValue: a value written to a plaintext column must not be an
// encrypted column's ciphertext.
func (a *analyzer) plainValue(sc *scope, v *pg.Node, what string) error {
	return a.generic(sc, v, "a value written to a plaintext column ("+what+")")
}

// selectInto checks INSERT … SELECT: the select list feeds the columns,
// each * as every column it stands for.  Where the proxy cannot tell what
// a * stands for, no encrypted column may come at or after it: a value
// the client wrote could land there as plaintext.
func (a *analyzer) selectInto(sc *scope, q *pg.SelectStmt, to *into) error {
	if q.Op != pg.SetOperation_SETOP_NONE && q.Op != pg.SetOperation_SET_OPERATION_UNDEFINED {
		return refuse("Insert each part separately.", "pgcipher: INSERT … SELECT with UNION, INTERSECT or EXCEPT is not supported on encrypted columns")
	}
	qs := &scope{parent: sc}
	if err := a.withClause(qs, q.WithClause); err != nil {
		return err
	}
	for _, f := range q.FromClause {
		if err := a.fromItem(qs, f); err != nil {
			return err
		}
	}
	pos := 0 // the column the next value goes to; -1 once unknown
	for _, t := range q.TargetList {
		rt := t.GetResTarget()
		if rt == nil || rt.Val == nil {
			continue
		}
		srcs := []source{a.sourceOf(qs, rt.Val)}
		if cr := rt.Val.GetColumnRef(); cr != nil && isStar(cr) {
			var known bool
			if srcs, known = a.expand(qs, cr); !known {
				if at := to.encFrom(pos); pos >= 0 && at != nil {
					return refuse("Name the columns in the select list, or select from VALUES, UNNEST or a relation with encrypted columns.",
						"pgcipher: INSERT … SELECT *: the proxy cannot tell which values * stands for, and encrypted column %q would take one of them", at.Name)
				}
				pos = -1
				continue
			}
		}
		for _, src := range srcs {
			var c *col
			if pos >= 0 {
				c = to.col(pos)
				pos++
			}
			if err := a.write(qs, c, src); err != nil {
				return err
			}
		}
	}
	return nil
}

// setList checks UPDATE … SET and ON CONFLICT … DO UPDATE SET.
func (a *analyzer) setList(sc *scope, r *catalog.Relation, list []*pg.Node) error {
	for _, t := range list {
		rt := t.GetResTarget()
		if rt == nil {
			continue
		}
		if rt.Val.GetMultiAssignRef() != nil {
			if err := a.generic(sc, rt.Val, "a multiple-column assignment"); err != nil {
				return err
			}
			if r != nil && r.Attr(rt.Name) != nil && r.Attr(rt.Name).Enc != nil {
				return refuse("Assign the columns one by one.", "pgcipher: encrypted column %q cannot be set by a multiple-column assignment", rt.Name)
			}
			continue
		}
		var at *catalog.Attr
		if r != nil {
			at = r.Attr(rt.Name)
		}
		if at == nil || at.Enc == nil {
			if err := a.plainValue(sc, rt.Val, "SET "+rt.Name); err != nil {
				return err
			}
			continue
		}
		if len(rt.Indirection) > 0 {
			return refuse("", "pgcipher: encrypted column %q cannot be written through a subscript or field", rt.Name)
		}
		if err := a.value(sc, attrCol(r, at), rt.Val, "SET", true); err != nil {
			return err
		}
	}
	return nil
}

func (a *analyzer) updateStmt(parent *scope, s *pg.UpdateStmt) error {
	sc := &scope{parent: parent}
	if err := a.withClause(sc, s.WithClause); err != nil {
		return err
	}
	r := a.target(sc, s.Relation)
	for _, f := range s.FromClause {
		if err := a.fromItem(sc, f); err != nil {
			return err
		}
	}
	alias := s.Relation.Relname
	if s.Relation.Alias != nil {
		alias = s.Relation.Alias.Aliasname
	}
	computed, err := a.computeUpdate(sc, s, r, alias)
	if err != nil {
		return err
	}
	if err := a.setList(sc, r, s.TargetList); err != nil {
		return err
	}
	if err := a.predicate(sc, s.WhereClause, false); err != nil {
		return err
	}
	if computed {
		return a.finishUpdate(s)
	}
	return a.returningList(sc, s.Relation, s.ReturningList)
}

func (a *analyzer) deleteStmt(parent *scope, s *pg.DeleteStmt) error {
	sc := &scope{parent: parent}
	if err := a.withClause(sc, s.WithClause); err != nil {
		return err
	}
	a.target(sc, s.Relation)
	for _, f := range s.UsingClause {
		if err := a.fromItem(sc, f); err != nil {
			return err
		}
	}
	if err := a.predicate(sc, s.WhereClause, false); err != nil {
		return err
	}
	return a.returningList(sc, s.Relation, s.ReturningList)
}

func (a *analyzer) returningList(sc *scope, rv *pg.RangeVar, list []*pg.Node) error {
	a.returning = nil
	if len(list) == 0 {
		return nil
	}
	rs := &scope{parent: sc}
	a.target(rs, rv)
	r, err := a.targetList(rs, list)
	a.returning = r
	return err
}

// copyStmt plans COPY of a relation with encrypted columns to or from the
// client; files and programs on the server are refused (they would hold
// ciphertext as if it were data, or feed plaintext to the server).
func (a *analyzer) copyStmt(s *pg.CopyStmt) error {
	if s.Query != nil {
		r, err := a.selectStmt(nil, s.Query.GetSelectStmt(), false)
		if err != nil {
			return err
		}
		if r != nil {
			return refuse("COPY the table itself (COPY t (columns) TO STDOUT), or SELECT.",
				"pgcipher: COPY (query) TO with encrypted columns in its result is not supported")
		}
		return nil
	}
	r := a.relation(s.Relation)
	if r == nil || !hasEncrypted(r) {
		return nil
	}
	if s.Filename != "" || s.IsProgram {
		return refuse("Use COPY … FROM STDIN / TO STDOUT (psql's \\copy), through the proxy.",
			"pgcipher: COPY of relation %q with encrypted columns to or from a server file or program is refused", r.Name)
	}
	if s.WhereClause != nil {
		sc := &scope{}
		a.target(sc, s.Relation)
		if err := a.generic(sc, s.WhereClause, "COPY … WHERE"); err != nil {
			return err
		}
	}
	cp, err := copyOptions(s.IsFrom, s.Options)
	if err != nil {
		return err
	}
	attrs := r.Attrs
	if len(s.Attlist) > 0 {
		attrs = nil
		for _, n := range s.Attlist {
			at := r.Attr(n.GetString_().Sval)
			if at == nil {
				return nil // the server reports the unknown column
			}
			attrs = append(attrs, at)
		}
	}
	for _, at := range attrs {
		cp.Names = append(cp.Names, at.Name)
		if at.Enc == nil {
			cp.Columns = append(cp.Columns, nil)
			continue
		}
		var cc *colcrypt.Column
		var err error
		if b := at.Binding; b != nil && b.TenantBy != "" && !s.IsFrom {
			// COPY TO decrypts each value under the tenant key it
			// names: the binding's crypto stands for the column
			if cc, err = a.keys.Column(b); err != nil {
				return &Refusal{Code: CodeKey, Message: "pgcipher: " + err.Error()}
			}
			a.plan.use(b, colcrypt.AccessRead)
		} else if cc, err = a.crypt(attrCol(r, at), accessOf(!s.IsFrom)); err != nil {
			return err
		}
		cp.Columns = append(cp.Columns, cc)
	}
	if a.plan.Copy != nil {
		return refuse("Send one COPY per query.", "pgcipher: several COPY statements in one query are not supported")
	}
	a.plan.Copy = cp
	return nil
}

// copyOptions reads COPY's options into a plan's format (the columns
// are the caller's); options that would change what the proxy must split
// or write are refused.
func copyOptions(from bool, options []*pg.Node) (*CopyPlan, error) {
	cp := &CopyPlan{From: from, Delimiter: '\t', Null: `\N`, Quote: '"', Escape: '"'}
	delimSet, nullSet, escSet := false, false, false
	for _, o := range options {
		d := o.GetDefElem()
		if d == nil {
			continue
		}
		val := optionValue(d.Arg)
		switch strings.ToLower(d.Defname) {
		case "format":
			switch strings.ToLower(val) {
			case "csv":
				cp.CSV = true
			case "binary":
				if !from {
					return nil, refuse("Use FORMAT text or csv for COPY TO.", "pgcipher: COPY TO with FORMAT binary is not supported on relations with encrypted columns")
				}
				cp.Binary = true
			case "text":
			default:
				return nil, refuse("Use FORMAT text or csv.", "pgcipher: COPY FORMAT %s is not supported on relations with encrypted columns", val)
			}
		case "delimiter":
			if len(val) != 1 {
				return nil, refuse("", "pgcipher: COPY delimiter must be a single one-byte character")
			}
			cp.Delimiter, delimSet = val[0], true
		case "null":
			cp.Null, nullSet = val, true
		case "header":
			cp.Header = val == "" || val == "true" || val == "1" || strings.EqualFold(val, "on") || strings.EqualFold(val, "match")
		case "quote":
			if len(val) != 1 {
				return nil, refuse("", "pgcipher: COPY quote must be a single one-byte character")
			}
			cp.Quote = val[0]
		case "escape":
			if len(val) != 1 {
				return nil, refuse("", "pgcipher: COPY escape must be a single one-byte character")
			}
			cp.Escape, escSet = val[0], true
		case "encoding", "force_quote", "force_not_null", "force_null", "freeze", "default", "on_error", "log_verbosity":
			if strings.ToLower(d.Defname) == "default" {
				return nil, refuse("", "pgcipher: COPY DEFAULT is not supported on relations with encrypted columns")
			}
		default:
			return nil, refuse("", "pgcipher: COPY option %s is not supported on relations with encrypted columns", d.Defname)
		}
	}
	if cp.CSV {
		if !delimSet {
			cp.Delimiter = ','
		}
		if !nullSet {
			cp.Null = ""
		}
		if !escSet {
			cp.Escape = cp.Quote
		}
	}
	return cp, nil
}

// optionValue is an option's argument as text ("" when it has none).
func optionValue(arg *pg.Node) string {
	switch {
	case arg == nil:
		return ""
	case arg.GetString_() != nil:
		return arg.GetString_().Sval
	case arg.GetBoolean() != nil:
		return strconv.FormatBool(arg.GetBoolean().Boolval)
	case arg.GetInteger() != nil:
		if arg.GetInteger().Ival == 0 {
			return "0"
		}
		return "1"
	case arg.GetAStar() != nil:
		return "*"
	}
	return ""
}

// keyFunction recognizes SELECT pgcipher.add_column_key('name').
func (a *analyzer) keyFunction(s *pg.SelectStmt) string {
	if len(s.TargetList) != 1 || len(s.FromClause) != 0 || s.WhereClause != nil {
		return ""
	}
	rt := s.TargetList[0].GetResTarget()
	if rt == nil || rt.Val.GetFuncCall() == nil {
		return ""
	}
	f := rt.Val.GetFuncCall()
	switch name := strings.ToLower(funcName(f)); {
	case name == "pgcipher.add_column_key" && len(f.Args) == 1:
		return "add_column_key"
	case name == "pgcipher.add_tenant_key" && len(f.Args) == 1:
		return "add_tenant_key"
	}
	return ""
}

// keyCall completes pgcipher.add_column_key(name): the proxy draws a key,
// wraps it under its CMK and passes the wrapped key to the server; and
// pgcipher.add_tenant_key(tenant): the proxy draws a tenant key and its
// id, and wraps it under its tenant keyring's newest epoch (13.13).
func (a *analyzer) keyCall(s *pg.SelectStmt, fn string) error {
	f := s.TargetList[0].GetResTarget().Val.GetFuncCall()
	if fn == "add_tenant_key" {
		return a.tenantKeyCall(f)
	}
	k := f.Args[0].GetAConst()
	if k == nil || k.GetSval() == nil {
		return refuse("Give the key's name as a string literal.", "pgcipher: pgcipher.add_column_key(name) needs a literal name")
	}
	if a.keys == nil {
		return &Refusal{Code: CodeKey, Message: "pgcipher: the proxy has no column master key"}
	}
	name := k.GetSval().Sval
	wrapped, err := a.keys.NewWrappedKey(name)
	if err != nil {
		return &Refusal{Code: CodeKey, Message: "pgcipher: drawing a column key: " + err.Error()}
	}
	f.Args = append(f.Args, pg.MakeAConstStrNode(a.keys.CMKName(), -1), byteaLiteral(wrapped))
	a.plan.Reload = true
	a.plan.Cacheable = false
	a.changed = true
	return nil
}

func (a *analyzer) tenantKeyCall(f *pg.FuncCall) error {
	k := f.Args[0].GetAConst()
	if k == nil || k.GetSval() == nil {
		return refuse("Give the tenant's name as a string literal.", "pgcipher: pgcipher.add_tenant_key(tenant) needs a literal name")
	}
	if a.keys == nil {
		return &Refusal{Code: CodeKey, Message: "pgcipher: the proxy has no column master key"}
	}
	id, epoch, wrapped, err := a.keys.NewTenantKey(k.GetSval().Sval)
	if err != nil {
		return &Refusal{Code: CodeKey, Message: "pgcipher: drawing a tenant key: " + err.Error(),
			Hint: "The proxy needs its tenant keyring (--tenant-keyring; pgcipher-keys keyring-init makes one)."}
	}
	f.Args = append(f.Args, pg.MakeAConstIntNode(int64(id), -1), pg.MakeAConstIntNode(int64(epoch), -1),
		byteaLiteral(wrapped))
	a.plan.Reload = true
	a.plan.Cacheable = false
	a.changed = true
	return nil
}

// byteaLiteral is '\x...'::pg_catalog.bytea of b.
func byteaLiteral(b []byte) *pg.Node {
	return &pg.Node{Node: &pg.Node_TypeCast{TypeCast: &pg.TypeCast{
		Arg:      pg.MakeAConstStrNode(`\x`+hex.EncodeToString(b), -1),
		TypeName: &pg.TypeName{Names: []*pg.Node{pg.MakeStrNode("pg_catalog"), pg.MakeStrNode("bytea")}, Typemod: -1, Location: -1},
		Location: -1}}}
}
