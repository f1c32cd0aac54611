// Computations the server cannot run on ciphertext (design 15.8): the
// select list's aggregates and expressions over encrypted columns become
// fields the server returns (the column, or array_agg of it per group)
// and expressions the proxy evaluates; UPDATE … SET of a computed value
// becomes a read-modify-write of the locked rows.

package rewrite

import (
	"fmt"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/compute"
	"github.com/pgcipher/pgcipher/proxy/values"
)

const hintCompute = "The proxy computes sum, avg, count, min, max, + - * / %, ||, upper, lower, length, abs, coalesce and casts over encrypted columns in a single statement's select list, HAVING and UPDATE … SET (see docs/design.md, section 15.8)."

// Input is one field the server returns for a computation.
type Input struct {
	Type  colcrypt.Type // what the proxy computes with
	Array bool          // array_agg of the column: the values of a group
	Enc   bool          // an encrypted column's ciphertext
}

// Output is one field the client sees.
type Output struct {
	Name string
	Expr compute.Expr // nil: input Input is handed on as it is (decrypted)
	In   int
}

// SortKey orders a computed result in the proxy.
type SortKey struct {
	Expr       compute.Expr
	Desc       bool
	NullsFirst bool
}

// ComputePlan: the server returns Inputs, the proxy evaluates Outputs.
type ComputePlan struct {
	Inputs  []Input
	Outputs []Output
	Having  compute.Expr // nil: none left for the proxy
	Order   []SortKey    // non-empty: the proxy sorts (and applies the limits)
	Limit   int64        // -1: none
	Offset  int64
	// Params: the client's parameters that computed outputs read, and as
	// which type; ParamOIDs: their types for the server, which no longer
	// sees them in the select list
	Params    map[int]colcrypt.Type
	ParamOIDs map[int]uint32
	// Unsent: those of Params the server's query does not read: sent to
	// the server as NULL (a value computed with an encrypted column, as
	// coalesce(c, $1), must not travel in plaintext)
	Unsent []int
}

// Buffered: the proxy needs every row before it sends the first.
func (c *ComputePlan) Buffered() bool { return len(c.Order) > 0 || c.Limit >= 0 || c.Offset > 0 }

// UpdatePlan: UPDATE … SET with computed values, run as LockSQL (the
// rows' ctid, tableoid and Inputs, locked FOR UPDATE) and the plan's SQL
// executed once per row with the computed values in parameters Sets[i].Param
// and the row in CtidParam and TableoidParam.
type UpdatePlan struct {
	LockSQL       string
	NParams       int // the client's parameters
	Inputs        []Input
	Sets          []Set
	CtidParam     int
	TableoidParam int
	// LockParams[i]: the lock query reads parameter $i+1 (the others
	// are sent to it as NULL)
	LockParams []bool
	// ExprParams: the client's parameters that computed values read, and
	// as which type
	ExprParams map[int]colcrypt.Type
	// ParamOIDs: the type of each parameter the server must be told of,
	// by number (computed values, the row, client parameters used only
	// in computed expressions)
	ParamOIDs map[int]uint32
}

// Set is one computed assignment.
type Set struct {
	Column string
	Expr   compute.Expr
	Param  int
	Enc    *colcrypt.Column // nil: a plaintext column, sent as text
	Type   colcrypt.Type
}

// builder turns expressions into compute.Exprs and the server fields
// they read.
type builder struct {
	a       *analyzer
	sc      *scope
	inputs  []Input
	targets []*pg.Node // the server's select list, one per input
	params  bool       // $n allowed (UPDATE), typed by their context
	ptypes  map[int]colcrypt.Type
	grouped bool
	names   map[int]string // aliases of the inputs handed on as they are
	inAgg   bool
	arrays  []int // array inputs made while building the current aggregate's argument
	// filter: the current aggregate's FILTER (WHERE …), as the server
	// runs it, which its array inputs take too
	filter *pg.Node
}

func (b *builder) input(in Input, n *pg.Node) int {
	b.inputs = append(b.inputs, in)
	b.targets = append(b.targets, n)
	return len(b.inputs) - 1
}

func colRefNode(fields []string) *pg.Node {
	var f []*pg.Node
	for _, s := range fields {
		f = append(f, pg.MakeStrNode(s))
	}
	return &pg.Node{Node: &pg.Node_ColumnRef{ColumnRef: &pg.ColumnRef{Fields: f, Location: -1}}}
}

func arrayAgg(n *pg.Node) *pg.Node {
	return &pg.Node{Node: &pg.Node_FuncCall{FuncCall: &pg.FuncCall{
		Funcname: []*pg.Node{pg.MakeStrNode("pg_catalog"), pg.MakeStrNode("array_agg")},
		Args:     []*pg.Node{n}, Funcformat: pg.CoercionForm_COERCE_EXPLICIT_CALL, Location: -1}}}
}

// plainTypeOf: the computed-with type of a column, encrypted or not.
func (b *builder) column(cr *pg.ColumnRef) (compute.Expr, error) {
	c, err := b.a.resolve(b.sc, cr)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range cr.Fields {
		if f.GetString_() != nil {
			names = append(names, f.GetString_().Sval)
		}
	}
	var in Input
	switch {
	case c != nil && c.attr == nil:
		return nil, refuse("Name the columns you need.", "pgcipher: a whole-row reference %q cannot be computed with", c.name)
	case c != nil:
		if _, err := b.a.crypt(c, colcrypt.AccessRead); err != nil {
			return nil, err
		}
		in = Input{Type: c.attr.Enc.Plain, Enc: true}
	default:
		at := b.plainAttr(names)
		if at == nil {
			return nil, refuse(hintCompute, "pgcipher: column %q cannot be computed with by the proxy: only columns of relations with encrypted columns have types the proxy knows", strings.Join(names, "."))
		}
		t, ok := values.PlainType(at.TypeOID)
		if !ok {
			return nil, refuse(hintCompute, "pgcipher: column %q is of a type the proxy does not compute with", strings.Join(names, "."))
		}
		in = Input{Type: t}
	}
	n := colRefNode(names)
	if b.inAgg {
		in.Array = true
		n = arrayAgg(n)
		if b.filter != nil {
			n.GetFuncCall().AggFilter = proto.Clone(b.filter).(*pg.Node)
		}
	} else if b.grouped && !b.a.grouping(names) {
		// the server checks GROUP BY; this keeps its error ours and early
		return nil, refuse("Group by the column or aggregate it.",
			"pgcipher: column %q must appear in the GROUP BY clause or be used in an aggregate function", strings.Join(names, "."))
	}
	i := b.input(in, n)
	if in.Array {
		b.arrays = append(b.arrays, i)
	}
	return &compute.Input{Idx: i, T: in.Type}, nil
}

// plainAttr finds a plaintext column of a relation the catalog knows.
func (b *builder) plainAttr(names []string) *catalog.Attr {
	col := names[len(names)-1]
	qual := names[:len(names)-1]
	for s := b.sc; s != nil; s = s.parent {
		for _, r := range s.rels {
			if r.r == nil || len(qual) > 0 && qual[len(qual)-1] != r.alias {
				continue
			}
			if at := r.r.Attr(col); at != nil && at.Enc == nil {
				return at
			}
		}
	}
	return nil
}

// typeName maps a cast's type name to the types the proxy computes with.
func typeName(tn *pg.TypeName) (colcrypt.Type, bool) {
	if tn == nil || len(tn.Typmods) > 0 || len(tn.ArrayBounds) > 0 {
		return 0, false
	}
	name := ""
	if len(tn.Names) > 0 && tn.Names[len(tn.Names)-1].GetString_() != nil {
		name = tn.Names[len(tn.Names)-1].GetString_().Sval
	}
	switch name {
	case "int4", "int", "integer", "int2", "smallint":
		return colcrypt.Int4, true
	case "int8", "bigint":
		return colcrypt.Int8, true
	case "numeric", "decimal":
		return colcrypt.Numeric, true
	case "float8", "float4", "double precision":
		return colcrypt.Float8, true
	case "text", "varchar":
		return colcrypt.Text, true
	}
	return 0, false
}

func constant(k *pg.A_Const) (compute.Expr, error) {
	switch {
	case k.Isnull:
		return &compute.Const{V: compute.Value{Type: colcrypt.Text, Null: true}, Unknown: true}, nil
	case k.GetIval() != nil:
		return &compute.Const{V: compute.Int(colcrypt.Int4, int64(k.GetIval().Ival))}, nil
	case k.GetFval() != nil:
		s := k.GetFval().Fval
		if !strings.ContainsAny(s, ".eE") { // an integer beyond int4
			v, err := compute.FromText(colcrypt.Int8, s)
			if err == nil {
				return &compute.Const{V: v}, nil
			}
		}
		v, err := compute.FromText(colcrypt.Numeric, s)
		return &compute.Const{V: v}, err
	case k.GetSval() != nil:
		return &compute.Const{V: compute.Value{Type: colcrypt.Text, Str: k.GetSval().Sval}, Unknown: true}, nil
	case k.GetBoolval() != nil:
		v := compute.Value{Type: colcrypt.Bool}
		if k.GetBoolval().Boolval {
			v.Int = 1
		}
		return &compute.Const{V: v}, nil
	}
	return nil, refuse(hintCompute, "pgcipher: this literal cannot be computed with by the proxy")
}

func wrapUnsupported(err error) error {
	if u, ok := err.(*compute.ErrUnsupported); ok {
		return refuse(hintCompute, "pgcipher: %s", u.Error())
	}
	if e, ok := err.(*compute.Error); ok {
		return &Refusal{Code: e.Code, Message: "pgcipher: " + e.Message}
	}
	return err
}

// expr builds the proxy's expression for n.
func (b *builder) expr(n *pg.Node) (compute.Expr, error) {
	e, err := b.build(n, 0)
	return e, wrapUnsupported(err)
}

// build: want is the type a parameter here takes (0: unknown).
func (b *builder) build(n *pg.Node, want colcrypt.Type) (compute.Expr, error) {
	switch {
	case n.GetColumnRef() != nil:
		return b.column(n.GetColumnRef())
	case n.GetAConst() != nil:
		return constant(n.GetAConst())
	case n.GetParamRef() != nil:
		num := int(n.GetParamRef().Number)
		if !b.params {
			return nil, refuse(hintCompute, "pgcipher: parameter $%d cannot be computed with here", num)
		}
		if want == 0 {
			want = b.ptypes[num]
		}
		if want == 0 {
			return nil, refuse("Cast the parameter: $n::int4.", "pgcipher: the type of parameter $%d cannot be told from its use", num)
		}
		if old, ok := b.ptypes[num]; ok && old != want {
			return nil, refuse("Use a separate parameter for each use.", "pgcipher: parameter $%d is used as two types", num)
		}
		b.ptypes[num] = want
		return &compute.Param{N: num, T: want}, nil
	case n.GetTypeCast() != nil:
		tc := n.GetTypeCast()
		t, ok := typeName(tc.TypeName)
		if !ok {
			return nil, refuse(hintCompute, "pgcipher: the proxy does not compute casts to this type")
		}
		e, err := b.build(tc.Arg, t)
		if err != nil {
			return nil, err
		}
		return compute.NewCast(e, t)
	case n.GetAExpr() != nil:
		x := n.GetAExpr()
		op := opName(x)
		if x.Kind != pg.A_Expr_Kind_AEXPR_OP {
			return nil, refuse(hintCompute, "pgcipher: the proxy does not compute this kind of expression (%s)", op)
		}
		if x.Lexpr == nil {
			if op != "-" {
				return nil, refuse(hintCompute, "pgcipher: the proxy does not compute prefix operator %s", op)
			}
			e, err := b.build(x.Rexpr, want)
			if err != nil {
				return nil, err
			}
			return compute.NewNeg(e)
		}
		l, r, err := b.pair(x.Lexpr, x.Rexpr, want)
		if err != nil {
			return nil, err
		}
		if _, cmp := need(op); cmp {
			return compute.NewCmp(op, l, r)
		}
		return compute.NewBinary(op, l, r)
	case n.GetBoolExpr() != nil:
		be := n.GetBoolExpr()
		out := &compute.Bool{Op: map[pg.BoolExprType]string{pg.BoolExprType_AND_EXPR: "and",
			pg.BoolExprType_OR_EXPR: "or", pg.BoolExprType_NOT_EXPR: "not"}[be.Boolop]}
		for _, x := range be.Args {
			e, err := b.build(x, colcrypt.Bool)
			if err != nil {
				return nil, err
			}
			if e.Type() != colcrypt.Bool {
				return nil, refuse(hintCompute, "pgcipher: an argument of %s is not boolean", strings.ToUpper(out.Op))
			}
			out.Args = append(out.Args, e)
		}
		return out, nil
	case n.GetNullTest() != nil:
		e, err := b.build(n.GetNullTest().Arg, 0)
		if err != nil {
			return nil, err
		}
		return &compute.IsNull{E: e, Not: n.GetNullTest().Nulltesttype == pg.NullTestType_IS_NOT_NULL}, nil
	case n.GetFuncCall() != nil:
		return b.funcCall(n.GetFuncCall(), want)
	case n.GetCoalesceExpr() != nil:
		// the arguments share a type: a parameter takes the others'
		xs := n.GetCoalesceExpr().Args
		args := make([]compute.Expr, len(xs))
		for pass := 0; pass < 2; pass++ {
			for i, x := range xs {
				if (x.GetParamRef() != nil) != (pass == 1) {
					continue
				}
				e, err := b.build(x, want)
				if err != nil {
					return nil, err
				}
				if c, ok := e.(*compute.Const); want == 0 && !(ok && c.Unknown) {
					want = e.Type()
				}
				args[i] = e
			}
		}
		return compute.NewFunc("coalesce", args)
	}
	return nil, refuse(hintCompute, "pgcipher: the proxy cannot compute this expression over encrypted columns")
}

// pair builds the operands of a binary operator; a parameter takes the
// other operand's type.
func (b *builder) pair(ln, rn *pg.Node, want colcrypt.Type) (compute.Expr, compute.Expr, error) {
	lp, rp := ln.GetParamRef() != nil, rn.GetParamRef() != nil
	var l, r compute.Expr
	var err error
	if lp && !rp {
		if r, err = b.build(rn, want); err != nil {
			return nil, nil, err
		}
		l, err = b.build(ln, r.Type())
		return l, r, err
	}
	if l, err = b.build(ln, want); err != nil {
		return nil, nil, err
	}
	rw := l.Type()
	if c, ok := l.(*compute.Const); ok && c.Unknown {
		rw = want
	}
	r, err = b.build(rn, rw)
	return l, r, err
}

var aggregates = map[string]bool{"sum": true, "avg": true, "count": true, "min": true, "max": true}

func (b *builder) funcCall(f *pg.FuncCall, want colcrypt.Type) (compute.Expr, error) {
	name := strings.ToLower(funcName(f))
	if f.Over != nil || len(f.AggOrder) > 0 || f.AggWithinGroup || f.FuncVariadic ||
		!aggregates[name] && (f.AggDistinct || f.AggFilter != nil) {
		return nil, refuse(hintCompute, "pgcipher: the proxy does not compute %s() with DISTINCT, FILTER, ORDER BY, WITHIN GROUP or OVER", name)
	}
	if aggregates[name] {
		if b.inAgg {
			return nil, refuse("", "pgcipher: aggregate function calls cannot be nested")
		}
		if f.AggFilter != nil {
			// FILTER (WHERE …): the server selects the rows, its
			// predicate checked and rewritten like a WHERE
			if err := b.a.predicate(b.sc, f.AggFilter, false); err != nil {
				return nil, err
			}
		}
		if f.AggStar {
			// count(*): the server counts
			i := b.input(Input{Type: colcrypt.Int8}, &pg.Node{Node: &pg.Node_FuncCall{FuncCall: f}})
			return &compute.Input{Idx: i, T: colcrypt.Int8}, nil
		}
		if len(f.Args) != 1 {
			return nil, refuse(hintCompute, "pgcipher: %s() takes one argument", name)
		}
		b.inAgg, b.arrays, b.filter = true, nil, f.AggFilter
		arg, err := b.build(f.Args[0], 0)
		b.inAgg, b.filter = false, nil
		if err != nil {
			return nil, err
		}
		if len(b.arrays) == 0 {
			return nil, refuse(hintCompute, "pgcipher: %s() of an expression without a column is not computed by the proxy", name)
		}
		agg, err := compute.NewAgg(name, arg, b.arrays[0])
		if err == nil {
			agg.(*compute.Agg).Distinct = f.AggDistinct
		}
		return agg, err
	}
	var args []compute.Expr
	for _, x := range f.Args {
		e, err := b.build(x, want)
		if err != nil {
			return nil, err
		}
		args = append(args, e)
	}
	return compute.NewFunc(name, args)
}

// refsEncrypted: n reads an encrypted column of scope sc.
func (a *analyzer) refsEncrypted(sc *scope, n *pg.Node) bool {
	return hasNode(n, func(m *pg.Node) bool {
		if cr := m.GetColumnRef(); cr != nil {
			c, _ := a.resolve(sc, cr)
			return c != nil
		}
		return false
	})
}

// serverComputable: a select-list item the server runs on ciphertext (a
// column, count, MIN/MAX of fixed-size ORD columns) or one without
// encrypted columns.
func (a *analyzer) serverComputable(sc *scope, n *pg.Node) bool {
	if !a.refsEncrypted(sc, n) {
		return true
	}
	if n.GetColumnRef() != nil || n.GetSubLink() != nil {
		return true // a scalar subquery is analysed as a query of its own
	}
	f := n.GetFuncCall()
	if f == nil || len(f.Args) != 1 || f.Over != nil || f.AggFilter != nil {
		return false
	}
	c, err := a.encCol(sc, f.Args[0])
	if err != nil || c == nil {
		return false
	}
	switch strings.ToLower(funcName(f)) {
	case "count":
		return !f.AggDistinct || level(c) == colcrypt.ORD
	case "min", "max":
		return level(c) == colcrypt.ORD && !prefixOrder(c.attr.Enc.Plain)
	}
	return false
}

// isAggregate: a call of an aggregate the proxy knows.
func isAggregate(n *pg.Node) bool {
	f := n.GetFuncCall()
	return f != nil && aggregates[strings.ToLower(funcName(f))]
}

// grouping: the query being computed groups by this column.
func (a *analyzer) grouping(names []string) bool {
	if a.computing == nil {
		return true
	}
	for _, g := range a.computing.GroupClause {
		cr := g.GetColumnRef()
		if cr == nil {
			continue
		}
		var gn []string
		for _, f := range cr.Fields {
			if f.GetString_() != nil {
				gn = append(gn, f.GetString_().Sval)
			}
		}
		if len(gn) > 0 && gn[len(gn)-1] == names[len(names)-1] &&
			(len(gn) == 1 || len(names) == 1 || gn[len(gn)-2] == names[len(names)-2]) {
			return true
		}
	}
	return false
}

// computeSelect plans a top-level query whose select list or HAVING
// needs the proxy; it reports false when the server can run it all.
// It is called after the FROM clause is in scope, before the select list
// is analysed; it leaves in s the query the server runs.
func (a *analyzer) computeSelect(sc *scope, s *pg.SelectStmt) (bool, error) {
	needed, havingNeeds, err := a.computeNeeded(sc, s)
	if !needed && !havingNeeds || err != nil {
		return false, err
	}
	a.computing = s
	defer func() { a.computing = nil }()
	grouped := len(s.GroupClause) > 0 || hasNode(&pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: &pg.SelectStmt{TargetList: s.TargetList, HavingClause: s.HavingClause}}},
		func(n *pg.Node) bool {
			f := n.GetFuncCall()
			return f != nil && aggregates[strings.ToLower(funcName(f))]
		})
	b := &builder{a: a, sc: sc, grouped: grouped, names: map[int]string{}, params: true, ptypes: map[int]colcrypt.Type{}}
	cp := &ComputePlan{Limit: -1}
	names, err := a.computeOutputs(sc, s, b, cp)
	if err != nil {
		return false, err
	}
	if havingNeeds {
		e, err := b.expr(s.HavingClause)
		if err != nil {
			return false, err
		}
		if e.Type() != colcrypt.Bool {
			return false, refuse("", "pgcipher: argument of HAVING must be type boolean")
		}
		cp.Having = e
		s.HavingClause = nil
	}
	if err := a.computeOrder(sc, s, b, cp, names, havingNeeds); err != nil {
		return false, err
	}
	// the server's select list: one field per input
	s.TargetList = nil
	for i, n := range b.targets {
		s.TargetList = append(s.TargetList, &pg.Node{Node: &pg.Node_ResTarget{ResTarget: &pg.ResTarget{Name: b.names[i], Val: n, Location: -1}}})
	}
	cp.Inputs = b.inputs
	if len(b.ptypes) > 0 {
		cp.Params, cp.ParamOIDs = b.ptypes, map[int]uint32{}
		read := map[int]bool{} // by the server's query
		hasNode(&pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: s}}, func(n *pg.Node) bool {
			if p := n.GetParamRef(); p != nil {
				read[int(p.Number)] = true
			}
			return false
		})
		for num, t := range b.ptypes {
			cp.ParamOIDs[num] = values.PlainOID(t)
			if !read[num] {
				cp.Unsent = append(cp.Unsent, num)
			}
		}
	}
	a.plan.Compute = cp
	a.changed = true
	return true, nil
}

// computeNeeded reports whether the proxy must compute the select list
// or HAVING of s, and refuses the queries where it cannot.
func (a *analyzer) computeNeeded(sc *scope, s *pg.SelectStmt) (needed, havingNeeds bool, err error) {
	for _, t := range s.TargetList {
		if rt := t.GetResTarget(); rt != nil && rt.Val != nil && !a.serverComputable(sc, rt.Val) {
			needed = true
		}
	}
	havingNeeds = s.HavingClause != nil && a.refsEncrypted(sc, s.HavingClause) &&
		hasNode(s.HavingClause, func(n *pg.Node) bool {
			f := n.GetFuncCall()
			return f != nil && aggregates[strings.ToLower(funcName(f))] && !a.serverComputable(sc, n)
		})
	if !needed && !havingNeeds {
		return false, false, nil
	}
	if !a.top {
		return false, false, refuse("Send the statement on its own.",
			"pgcipher: computations over encrypted columns are supported only in a statement sent on its own, not in a multi-statement query")
	}
	if len(s.DistinctClause) > 0 || len(s.WindowClause) > 0 || s.IntoClause != nil || s.LockingClause != nil {
		return false, false, refuse(hintCompute, "pgcipher: DISTINCT, windows, INTO and FOR UPDATE are not supported with computations over encrypted columns")
	}
	for i, g := range s.GroupClause {
		if k := g.GetAConst(); k != nil && k.GetIval() != nil {
			// GROUP BY 2 (Django's values().annotate()): the server's
			// select list changes, so the position becomes what it names
			p := int(k.GetIval().Ival) - 1
			if p >= 0 && p < len(s.TargetList) && s.TargetList[p].GetResTarget() != nil {
				if v := s.TargetList[p].GetResTarget().Val; v != nil && !hasNode(v, isAggregate) {
					g = proto.Clone(v).(*pg.Node)
					s.GroupClause[i] = g
					a.changed = true
				}
			}
		}
		if c, err := a.encCol(sc, g); err != nil {
			return false, false, err
		} else if c != nil {
			continue // a no-op cast of an encrypted column is the column
		}
		if g.GetAConst() != nil || g.GetColumnRef() == nil && a.refsEncrypted(sc, g) {
			return false, false, refuse("Group by columns, by their positions in the select list or by expressions of plaintext columns.",
				"pgcipher: with computations over encrypted columns, GROUP BY takes columns, positions of columns and expressions without encrypted columns")
		}
	}
	return needed, havingNeeds, nil
}

// computeOutputs makes the outputs of a computed select list: a field the
// server computes is an input handed on, the others expressions over the
// inputs.  It returns the outputs' names (for ORDER BY).
func (a *analyzer) computeOutputs(sc *scope, s *pg.SelectStmt, b *builder, cp *ComputePlan) (map[string]int, error) {
	names := map[string]int{}
	for _, t := range s.TargetList {
		rt := t.GetResTarget()
		if rt == nil || rt.Val == nil {
			continue
		}
		name := rt.Name
		if cr := rt.Val.GetColumnRef(); cr != nil && isStar(cr) {
			return nil, refuse("Name the columns.", "pgcipher: * is not supported with computations over encrypted columns")
		}
		if name == "" {
			name = defaultName(rt.Val)
		}
		if a.serverComputable(sc, rt.Val) {
			if _, err := a.targetList(sc, []*pg.Node{t}); err != nil {
				return nil, err
			}
			i := b.input(Input{}, rt.Val)
			b.names[i] = rt.Name
			cp.Outputs = append(cp.Outputs, Output{Name: name, In: i})
		} else {
			e, err := b.expr(rt.Val)
			if err != nil {
				return nil, err
			}
			cp.Outputs = append(cp.Outputs, Output{Name: name, Expr: e})
		}
		names[name] = len(cp.Outputs) - 1
	}
	return names, nil
}

// computeOrder leaves ORDER BY to the server unless it sorts by what the
// proxy computes (or a computed HAVING comes with LIMIT or OFFSET): then
// the proxy sorts, and applies LIMIT and OFFSET itself.
func (a *analyzer) computeOrder(sc *scope, s *pg.SelectStmt, b *builder, cp *ComputePlan, names map[string]int, havingNeeds bool) error {
	proxySort := havingNeeds && (s.LimitCount != nil || s.LimitOffset != nil)
	for _, n := range s.SortClause {
		sb := n.GetSortBy()
		if sb == nil || a.serverComputable(sc, sb.Node) && !outputComputed(sb.Node, names, cp) {
			continue
		}
		proxySort = true
	}
	if !proxySort {
		// ORDER BY 2 names an output: the server sorts by its input
		for _, n := range s.SortClause {
			if sb := n.GetSortBy(); sb != nil {
				if i, ok := outputRef(sb.Node, names, len(cp.Outputs)); ok && sb.Node.GetAConst() != nil {
					sb.Node = pg.MakeAConstIntNode(int64(cp.Outputs[i].In+1), -1)
				}
			}
		}
		return nil
	}
	for _, n := range s.SortClause {
		sb := n.GetSortBy()
		if sb == nil || sb.SortbyDir == pg.SortByDir_SORTBY_USING {
			return refuse(hintCompute, "pgcipher: this ORDER BY cannot be computed by the proxy")
		}
		var e compute.Expr
		if i, ok := outputRef(sb.Node, names, len(cp.Outputs)); ok && cp.Outputs[i].Expr != nil {
			e = cp.Outputs[i].Expr
		} else {
			var err error
			if e, err = b.expr(sb.Node); err != nil {
				return err
			}
		}
		desc, nf := sortDirection(sb)
		cp.Order = append(cp.Order, SortKey{Expr: e, Desc: desc, NullsFirst: nf})
	}
	s.SortClause = nil
	var err error
	if cp.Limit, err = limitValue(s.LimitCount, -1); err != nil {
		return err
	}
	if cp.Offset, err = limitValue(s.LimitOffset, 0); err != nil {
		return err
	}
	s.LimitCount, s.LimitOffset = nil, nil
	return nil
}

// outputRef resolves ORDER BY n or ORDER BY name to an output.
func outputRef(n *pg.Node, names map[string]int, count int) (int, bool) {
	if k := n.GetAConst(); k != nil && k.GetIval() != nil {
		i := int(k.GetIval().Ival) - 1
		return i, i >= 0 && i < count
	}
	if cr := n.GetColumnRef(); cr != nil && len(cr.Fields) == 1 && cr.Fields[0].GetString_() != nil {
		i, ok := names[cr.Fields[0].GetString_().Sval]
		return i, ok
	}
	return 0, false
}

func outputComputed(n *pg.Node, names map[string]int, cp *ComputePlan) bool {
	i, ok := outputRef(n, names, len(cp.Outputs))
	return ok && cp.Outputs[i].Expr != nil
}

func limitValue(n *pg.Node, none int64) (int64, error) {
	if n == nil {
		return none, nil
	}
	if k := n.GetAConst(); k != nil {
		if k.Isnull {
			return none, nil
		}
		if k.GetIval() != nil && k.GetIval().Ival >= 0 {
			return int64(k.GetIval().Ival), nil
		}
	}
	return 0, refuse("Give LIMIT and OFFSET as integer literals.", "pgcipher: LIMIT and OFFSET of a result the proxy sorts must be integer literals")
}

// defaultName is the column name PostgreSQL gives an unnamed item
// (FigureColname): a column's or function's name, else ?column?.
func defaultName(n *pg.Node) string {
	switch {
	case n.GetColumnRef() != nil:
		f := n.GetColumnRef().Fields
		if s := f[len(f)-1].GetString_(); s != nil {
			return s.Sval
		}
	case n.GetFuncCall() != nil:
		f := n.GetFuncCall().Funcname
		return f[len(f)-1].GetString_().Sval
	case n.GetTypeCast() != nil:
		if name := defaultName(n.GetTypeCast().Arg); name != "?column?" {
			return name
		}
		tn := n.GetTypeCast().TypeName.Names
		return tn[len(tn)-1].GetString_().Sval
	}
	return "?column?"
}

// maxParam is the highest $n in n.
func maxParam(n *pg.Node) int {
	m := 0
	hasNode(n, func(x *pg.Node) bool {
		if p := x.GetParamRef(); p != nil && int(p.Number) > m {
			m = int(p.Number)
		}
		return false
	})
	return m
}

// computedSet: an assignment the server cannot do on ciphertext.
func (a *analyzer) computedSet(sc *scope, r *catalog.Relation, rt *pg.ResTarget) bool {
	if rt == nil || rt.Val == nil || rt.Val.GetMultiAssignRef() != nil {
		return false
	}
	var at *catalog.Attr
	if r != nil {
		at = r.Attr(rt.Name)
	}
	v := rt.Val
	if tc := v.GetTypeCast(); tc != nil && (tc.Arg.GetAConst() != nil || tc.Arg.GetParamRef() != nil) {
		return false
	}
	if at == nil || at.Enc == nil {
		return a.refsEncrypted(sc, v)
	}
	switch {
	case v.GetAConst() != nil, v.GetParamRef() != nil, v.GetSetToDefault() != nil:
		return false
	case v.GetColumnRef() != nil:
		x, _ := a.encCol(sc, v)
		return x == nil || x.binding() == nil || at.Binding == nil || x.binding().Spec != at.Binding.Spec
	}
	ce, _ := a.valueCase(sc, attrCol(r, at), v)
	return ce == nil
}

// computeUpdate plans UPDATE … SET with computed values; it reports
// false when every assignment is one the server can do.  Called after
// the target is in scope, before the SET list is analysed.
func (a *analyzer) computeUpdate(sc *scope, s *pg.UpdateStmt, r *catalog.Relation, alias string) (bool, error) {
	var computed []*pg.ResTarget
	var rest []*pg.Node
	for _, t := range s.TargetList {
		if rt := t.GetResTarget(); a.computedSet(sc, r, rt) {
			computed = append(computed, rt)
		} else {
			rest = append(rest, t)
		}
	}
	if len(computed) == 0 {
		return false, nil
	}
	if !a.top || s.WithClause != nil || len(s.FromClause) > 0 || len(s.ReturningList) > 0 {
		return false, refuse("Send the UPDATE on its own, without WITH, FROM and RETURNING.",
			"pgcipher: UPDATE … SET of a value computed from encrypted columns is supported only in a statement on its own, without WITH, FROM or RETURNING")
	}
	n := maxParam(&pg.Node{Node: &pg.Node_UpdateStmt{UpdateStmt: s}})
	b := &builder{a: a, sc: sc, params: true, ptypes: map[int]colcrypt.Type{}}
	up := &UpdatePlan{NParams: n, ParamOIDs: map[int]uint32{}}
	next := n
	for _, rt := range computed {
		at := r.Attr(rt.Name)
		if len(rt.Indirection) > 0 || at == nil {
			return false, refuse("", "pgcipher: column %q cannot be set from a computed value here", rt.Name)
		}
		var want colcrypt.Type
		if at.Enc != nil {
			want = at.Enc.Plain
		} else if t, ok := values.PlainType(at.TypeOID); ok {
			want = t
		} else {
			return false, refuse(hintCompute, "pgcipher: column %q is of a type the proxy does not compute", rt.Name)
		}
		e, err := b.build(rt.Val, want)
		if err == nil && e.Type() != want && !compute.Assignable(e.Type(), want) {
			return false, refuse(hintCompute, "pgcipher: a value of type %s cannot be assigned to column %q of type %s", e.Type(), rt.Name, want)
		}
		if err == nil && e.Type() != want {
			e, err = compute.NewCast(e, want)
		}
		if err != nil {
			return false, wrapUnsupported(err)
		}
		next++
		set := Set{Column: rt.Name, Expr: e, Param: next, Type: want}
		var typ *pg.TypeName
		if at.Enc != nil {
			// read-modify-write: the proxy decrypts the old value
			if set.Enc, err = a.crypt(attrCol(r, at), colcrypt.AccessRead); err != nil {
				return false, err
			}
			typ = &pg.TypeName{Names: []*pg.Node{pg.MakeStrNode(a.cat.ExtSchema), pg.MakeStrNode(at.Enc.Name)}, Typemod: -1, Location: -1}
			up.ParamOIDs[next] = at.Enc.OID
		}
		ref := &pg.Node{Node: &pg.Node_ParamRef{ParamRef: &pg.ParamRef{Number: int32(next), Location: -1}}}
		rt.Val = ref
		if at.Enc != nil {
			rt.Val = &pg.Node{Node: &pg.Node_TypeCast{TypeCast: &pg.TypeCast{Arg: ref, TypeName: typ, Location: -1}}}
		} else {
			up.ParamOIDs[next] = at.TypeOID // sent as text, read by the column's type
		}
		up.Sets = append(up.Sets, set)
	}
	for num, t := range b.ptypes {
		up.ParamOIDs[num] = values.PlainOID(t)
	}
	up.Inputs = b.inputs
	up.ExprParams = b.ptypes
	up.CtidParam, up.TableoidParam = next+1, next+2
	up.ParamOIDs[next+1], up.ParamOIDs[next+2] = 27, 26 // tid, oid
	a.plan.Update = up
	a.changed = true
	// the SET list the server can do is analysed as usual
	s.TargetList = rest
	a.pendingSets = computed
	a.updateAlias = alias
	a.updateTargets = b.targets
	return true, nil
}

// finishUpdate builds the lock query and the per-row UPDATE once the
// WHERE clause is analysed (its literals encrypted).
func (a *analyzer) finishUpdate(s *pg.UpdateStmt) error {
	up := a.plan.Update
	rv := proto.Clone(s.Relation).(*pg.RangeVar)
	lock := &pg.SelectStmt{
		FromClause:    []*pg.Node{{Node: &pg.Node_RangeVar{RangeVar: rv}}},
		WhereClause:   s.WhereClause,
		LockingClause: []*pg.Node{{Node: &pg.Node_LockingClause{LockingClause: &pg.LockingClause{Strength: pg.LockClauseStrength_LCS_FORUPDATE, WaitPolicy: pg.LockWaitPolicy_LockWaitBlock}}}},
	}
	for _, n := range append([]*pg.Node{colRefNode([]string{a.updateAlias, "ctid"}), colRefNode([]string{a.updateAlias, "tableoid"})}, a.updateTargets...) {
		lock.TargetList = append(lock.TargetList, &pg.Node{Node: &pg.Node_ResTarget{ResTarget: &pg.ResTarget{Val: n, Location: -1}}})
	}
	sql, err := pg.Deparse(&pg.ParseResult{Version: a.version, Stmts: []*pg.RawStmt{{Stmt: &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: lock}}}}})
	if err != nil {
		return fmt.Errorf("rewrite: deparsing the lock query: %w", err)
	}
	up.LockSQL = sql
	up.LockParams = make([]bool, up.NParams)
	hasNode(s.WhereClause, func(x *pg.Node) bool {
		if p := x.GetParamRef(); p != nil && int(p.Number) <= up.NParams && p.Number > 0 {
			up.LockParams[p.Number-1] = true
		}
		return false
	})
	for _, rt := range a.pendingSets {
		s.TargetList = append(s.TargetList, &pg.Node{Node: &pg.Node_ResTarget{ResTarget: rt}})
	}
	param := func(n int, typ string) *pg.Node {
		return &pg.Node{Node: &pg.Node_TypeCast{TypeCast: &pg.TypeCast{
			Arg:      &pg.Node{Node: &pg.Node_ParamRef{ParamRef: &pg.ParamRef{Number: int32(n), Location: -1}}},
			TypeName: &pg.TypeName{Names: []*pg.Node{pg.MakeStrNode("pg_catalog"), pg.MakeStrNode(typ)}, Typemod: -1, Location: -1}, Location: -1}}}
	}
	eq := func(l, r *pg.Node) *pg.Node {
		return &pg.Node{Node: &pg.Node_AExpr{AExpr: &pg.A_Expr{Kind: pg.A_Expr_Kind_AEXPR_OP,
			Name: []*pg.Node{pg.MakeStrNode("=")}, Lexpr: l, Rexpr: r, Location: -1}}}
	}
	conds := []*pg.Node{
		eq(colRefNode([]string{a.updateAlias, "ctid"}), param(up.CtidParam, "tid")),
		eq(colRefNode([]string{a.updateAlias, "tableoid"}), param(up.TableoidParam, "oid")),
	}
	if s.WhereClause != nil {
		conds = append([]*pg.Node{s.WhereClause}, conds...)
	}
	s.WhereClause = &pg.Node{Node: &pg.Node_BoolExpr{BoolExpr: &pg.BoolExpr{Boolop: pg.BoolExprType_AND_EXPR, Args: conds, Location: -1}}}
	a.pendingSets, a.updateTargets = nil, nil
	return nil
}
