// Predicates (WHERE, HAVING, JOIN ON) and the values compared with
// encrypted columns: literals are encrypted in place, parameters typed.

package rewrite

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/values"
)

// predicate checks a boolean expression.  conj: n is a top-level
// conjunct of the top query's WHERE, where LIKE can be rechecked.
func (a *analyzer) predicate(sc *scope, n *pg.Node, conj bool) error {
	switch {
	case n == nil:
		return nil
	case n.GetBoolExpr() != nil:
		b := n.GetBoolExpr()
		inner := conj && b.Boolop == pg.BoolExprType_AND_EXPR
		if b.Boolop == pg.BoolExprType_NOT_EXPR {
			// under NOT, a tenant-keyed comparison would reach the other
			// tenants' values (tenantFilter)
			a.negated++
			defer func() { a.negated-- }()
		}
		for _, x := range b.Args {
			if err := a.predicate(sc, x, inner); err != nil {
				return err
			}
		}
		return nil
	case n.GetNullTest() != nil:
		if c, err := a.encCol(sc, n.GetNullTest().Arg); c != nil || err != nil {
			return err
		}
		return a.generic(sc, n, "")
	case n.GetAExpr() != nil:
		return a.aexpr(sc, n, conj)
	case n.GetSubLink() != nil:
		return a.sublink(sc, n.GetSubLink())
	}
	return a.generic(sc, n, "")
}

// need returns the level that an operator needs: EQ for =, <>, IN and
// IS DISTINCT FROM (any level with a token), ORD for order.
func need(op string) (colcrypt.Level, bool) {
	switch op {
	case "=", "<>", "!=":
		return colcrypt.EQ, true
	case "<", "<=", ">", ">=":
		return colcrypt.ORD, true
	}
	return 0, false
}

func (a *analyzer) aexpr(sc *scope, n *pg.Node, conj bool) error {
	e := n.GetAExpr()
	op := opName(e)
	if c, fn, err := a.caseCall(sc, e.Lexpr); c != nil || err != nil {
		if err != nil {
			return err
		}
		return a.caseSearch(sc, n, c, fn, op, conj)
	}
	l, err := a.encCol(sc, e.Lexpr)
	if err != nil {
		return err
	}
	r, err := a.encCol(sc, e.Rexpr)
	if err != nil {
		return err
	}
	if l == nil && r == nil {
		return a.aexprPlain(sc, n, op)
	}
	if err := a.tenantFilter(e, l, r, op); err != nil {
		return err
	}
	switch e.Kind {
	case pg.A_Expr_Kind_AEXPR_OP, pg.A_Expr_Kind_AEXPR_DISTINCT, pg.A_Expr_Kind_AEXPR_NOT_DISTINCT:
		if err := a.operator(sc, e, l, r, op, conj); err != nil {
			return err
		}
		return a.tenantRange(n, l, r)
	case pg.A_Expr_Kind_AEXPR_IN:
		if l == nil {
			return refuse(hintAllowed, "pgcipher: encrypted column %q cannot be used in an IN list", r.name)
		}
		for _, x := range e.Rexpr.GetList().GetItems() {
			if err := a.compared(sc, l, x, colcrypt.EQ, "IN"); err != nil {
				return err
			}
		}
		return nil
	case pg.A_Expr_Kind_AEXPR_OP_ANY, pg.A_Expr_Kind_AEXPR_OP_ALL:
		return a.anyAll(sc, e, l, op)
	case pg.A_Expr_Kind_AEXPR_BETWEEN, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN,
		pg.A_Expr_Kind_AEXPR_BETWEEN_SYM, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM:
		if l == nil {
			return refuse(hintAllowed, "pgcipher: encrypted column %q cannot be a bound of BETWEEN", r.name)
		}
		items := e.Rexpr.GetList().GetItems()
		if level(l) == colcrypt.ORD && prefixOrder(l.attr.Enc.Plain) && conj && a.cur != nil && e.Kind == pg.A_Expr_Kind_AEXPR_BETWEEN && len(items) == 2 {
			// the server's prefix order gives a superset of the rows
			// (BETWEEN is inclusive), the proxy rechecks both bounds
			for i, x := range items {
				if err := a.rangeFilter(sc, l, x, []string{">=", "<="}[i]); err != nil {
					return err
				}
			}
			return nil
		}
		for _, x := range items {
			if err := a.compared(sc, l, x, colcrypt.ORD, "BETWEEN"); err != nil {
				return err
			}
		}
		return nil
	case pg.A_Expr_Kind_AEXPR_LIKE:
		if l == nil {
			return refuse(hintAllowed, "pgcipher: encrypted column %q cannot be a LIKE pattern", r.name)
		}
		return a.like(sc, n, l, op == "!~~", conj, likeCase{})
	case pg.A_Expr_Kind_AEXPR_ILIKE:
		if l == nil {
			return refuse(hintAllowed, "pgcipher: encrypted column %q cannot be an ILIKE pattern", r.name)
		}
		// PostgreSQL's ILIKE is lower(value) LIKE lower(pattern)
		return a.like(sc, n, l, op == "!~~*", conj, likeCase{col: "lower", pat: "lower", what: "ILIKE"})
	}
	c := l
	if c == nil {
		c = r
	}
	return refuse(hintAllowed, "pgcipher: operator %s cannot be computed on encrypted column %q", op, c.name)
}

// operator: a binary operator (or IS [NOT] DISTINCT FROM) with an
// encrypted column on one side or both.
func (a *analyzer) operator(sc *scope, e *pg.A_Expr, l, r *col, op string, conj bool) error {
	lvl, ok := need(op)
	if !ok || e.Kind != pg.A_Expr_Kind_AEXPR_OP && lvl != colcrypt.EQ {
		c := l
		if c == nil {
			c = r
		}
		return refuse(hintAllowed, "pgcipher: operator %s cannot be computed on encrypted column %q", op, c.name)
	}
	if l != nil && r != nil {
		if err := a.joinable(l, r); err != nil {
			return err
		}
		return a.levelFits(l, lvl, op)
	}
	c, v, cop := l, e.Rexpr, op
	if l == nil {
		c, v, cop = r, e.Lexpr, flipped[op]
	}
	if lvl == colcrypt.ORD && conj && a.cur != nil && level(c) == colcrypt.ORD && prefixOrder(c.attr.Enc.Plain) && e.Kind == pg.A_Expr_Kind_AEXPR_OP {
		if err := a.rangeFilter(sc, c, v, cop); err != nil {
			return err
		}
		if op == "<" || op == ">" {
			// strict order on the prefixes would lose the values that
			// share the operand's prefix: the server tests <= or >=
			e.Name = []*pg.Node{pg.MakeStrNode(op + "=")}
			a.changed = true
		}
		return nil
	}
	return a.compared(sc, c, v, lvl, op)
}

// tenantFilter refuses the comparisons of a tenant-keyed column with a
// value that would be true of other tenants' values (design 13.13): a
// value of another tenant is never equal, never matches, and orders by
// key id, so <>, NOT LIKE, NOT BETWEEN, IS DISTINCT FROM, ANY/ALL and
// anything under NOT would select the other tenants' rows too.  Two
// columns compared with each other are the server's (a join: equal within
// a tenant only).
func (a *analyzer) tenantFilter(e *pg.A_Expr, l, r *col, op string) error {
	if (l == nil) == (r == nil) {
		return nil
	}
	c := l
	if c == nil {
		c = r
	}
	if b := c.binding(); b == nil || b.TenantBy == "" {
		return nil
	}
	negative := a.negated > 0
	switch e.Kind {
	case pg.A_Expr_Kind_AEXPR_OP:
		negative = negative || op == "<>" || op == "!=" || op == "!~~" || op == "!~~*"
	case pg.A_Expr_Kind_AEXPR_LIKE, pg.A_Expr_Kind_AEXPR_ILIKE:
		negative = negative || op == "!~~" || op == "!~~*"
	case pg.A_Expr_Kind_AEXPR_IN:
		negative = negative || op == "<>"
	case pg.A_Expr_Kind_AEXPR_BETWEEN, pg.A_Expr_Kind_AEXPR_NOT_DISTINCT:
	default:
		negative = true // NOT BETWEEN, IS DISTINCT FROM, ANY, ALL
	}
	if negative {
		return &Refusal{Code: CodeTenant,
			Message: fmt.Sprintf("pgcipher: encrypted column %q is tenant-keyed: this comparison would be true of every other tenant's values", c.name),
			Hint:    "Compare a tenant-keyed column positively (=, IN, <, >, BETWEEN, LIKE), outside NOT; restrict rows by the tenant column for the rest."}
	}
	return nil
}

// tenantRange completes a half-open range on a tenant-keyed column with
// the other bound of the tenant (design 13.13): the server orders two
// tenants' values by key id, so c > x alone would return the values of
// every tenant with a higher key id too.  n is the comparison, already
// rewritten; it becomes (n AND c <= extreme), or >= for < and <=.
func (a *analyzer) tenantRange(n *pg.Node, l, r *col) error {
	e := n.GetAExpr()
	if e == nil || e.Kind != pg.A_Expr_Kind_AEXPR_OP || (l == nil) == (r == nil) {
		return nil
	}
	c, side, op := l, e.Lexpr, opName(e)
	if l == nil {
		c, side, op = r, e.Rexpr, flipped[op]
	}
	b := c.binding()
	if b == nil || b.TenantBy == "" {
		return nil
	}
	var high bool
	switch op {
	case ">", ">=":
		high = true
	case "<", "<=":
	default:
		return nil
	}
	cc, err := a.crypt(c, colcrypt.AccessRead)
	if err != nil {
		return err
	}
	ct, err := cc.EncryptExtreme(high)
	if err != nil {
		return refuse("Move the column to order format 2 (pgcipher-keys reencrypt-column), or give both bounds (BETWEEN).",
			"pgcipher: a half-open range on tenant-keyed column %q needs order format 2", c.name)
	}
	bop := ">="
	if high {
		bop = "<="
	}
	bound := &pg.Node{Node: &pg.Node_AExpr{AExpr: &pg.A_Expr{Kind: pg.A_Expr_Kind_AEXPR_OP,
		Name:  []*pg.Node{pg.MakeStrNode(bop)},
		Lexpr: proto.Clone(side).(*pg.Node),
		Rexpr: &pg.Node{Node: &pg.Node_TypeCast{TypeCast: &pg.TypeCast{
			Arg: pg.MakeAConstStrNode(base64.StdEncoding.EncodeToString(ct), -1),
			TypeName: &pg.TypeName{Names: []*pg.Node{pg.MakeStrNode(a.cat.ExtSchema), pg.MakeStrNode(c.attr.Enc.Name)},
				Typemod: -1, Location: -1},
			Location: -1}}},
		Location: -1}}}
	orig := &pg.Node{Node: n.Node}
	n.Node = &pg.Node_BoolExpr{BoolExpr: &pg.BoolExpr{Boolop: pg.BoolExprType_AND_EXPR, Args: []*pg.Node{orig, bound}, Location: -1}}
	a.changed = true
	a.plan.Cacheable = false
	return nil
}

// flipped is the operator with its operands swapped (a < b is b > a).
var flipped = map[string]string{"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "<>": "<>", "!=": "!="}

// rangeFilter serves c op v (op one of < <= > >=) on an ORD column whose
// order covers a 16-byte prefix (text, bytea, numeric): the server's
// comparison of prefixes, made inclusive by the caller, returns every row
// that satisfies it and some that do not; the proxy rechecks each on
// the decrypted value, as it rechecks LIKE (a hidden output column).
// Only at the top level of the top query's WHERE, ANDed.
func (a *analyzer) rangeFilter(sc *scope, c *col, v *pg.Node, op string) error {
	cc, err := a.crypt(c, colcrypt.AccessRead)
	if err != nil {
		return err
	}
	f := Filter{Hidden: a.plan.Hidden, Column: cc, Op: op}
	// the operand is a bound whose token lets equal prefixes through
	bound := -1
	if op == "<" || op == "<=" {
		bound = 1
	}
	var mod *CastMod
	if tc := v.GetTypeCast(); tc != nil && (tc.Arg.GetAConst() != nil || tc.Arg.GetParamRef() != nil) {
		// as value does: the server sees the encrypted type, the proxy
		// applies a modifier of the column's type (numeric(3,0) rounds)
		mod, _ = castMod(c.attr.Enc.Plain, tc.TypeName)
		v.Node = tc.Arg.Node
		a.changed = true
	}
	switch {
	case v.GetParamRef() != nil:
		f.Param = int(v.GetParamRef().Number)
		if f.Param <= len(a.plan.Params) && a.plan.Params[f.Param-1] != nil {
			// its ciphertext is a bound's, which matches nothing by =
			return refuse("Use a separate parameter for each bound.", "pgcipher: parameter $%d is a range bound and has another use", f.Param)
		}
		if err := a.param(c, f.Param, false, false, true, true); err != nil {
			return err
		}
		if err := a.paramMod(f.Param, mod); err != nil {
			return err
		}
		a.plan.Params[f.Param-1].Bound = bound
	case v.GetAConst() != nil && v.GetAConst().Isnull:
		return nil // c >= NULL: no row, as the server answers it
	case v.GetAConst() != nil:
		s, ok := constText(v.GetAConst())
		if !ok {
			return refuse(hintAllowed, "pgcipher: a bit-string literal cannot be compared with encrypted column %q", c.name)
		}
		if s, err = mod.Apply(c.attr.Enc.Plain, s); err != nil {
			return &Refusal{Code: CodeValue, Message: "pgcipher: invalid value for encrypted column " + strconv.Quote(c.name), Detail: err.Error()}
		}
		// the recheck's operand is the value the server would compare
		f.Pattern = s
		if err := a.encryptLiteral(c, v, s, false, true, bound); err != nil {
			return err
		}
	default:
		return refuse(hintAllowed, "pgcipher: a range comparison on encrypted column %q needs a literal or a parameter", c.name)
	}
	a.recheck(c, f)
	return nil
}

// recheck adds filter f on column c to the plan: the column, hidden at
// the end of the select list, for the proxy to recheck the rows on.
func (a *analyzer) recheck(c *col, f Filter) {
	fields := []*pg.Node{}
	for _, q := range c.qualifier() {
		fields = append(fields, pg.MakeStrNode(q))
	}
	a.cur.TargetList = append(a.cur.TargetList, pg.MakeResTargetNodeWithVal(pg.MakeColumnRefNode(fields, -1), -1))
	a.plan.Hidden++
	a.plan.Filters = append(a.plan.Filters, f)
	a.changed = true
}

// anyAll: c op ANY/ALL (ARRAY[...] | $n | '{...}') with encrypted column c.
func (a *analyzer) anyAll(sc *scope, e *pg.A_Expr, l *col, op string) error {
	lvl, ok := need(op)
	if l == nil || !ok {
		return refuse(hintAllowed, "pgcipher: this ANY/ALL cannot be computed on encrypted columns")
	}
	if err := a.levelFits(l, lvl, op); err != nil {
		return err
	}
	if arr := e.Rexpr.GetAArrayExpr(); arr != nil {
		for _, x := range arr.Elements {
			if err := a.compared(sc, l, x, lvl, op+" ANY"); err != nil {
				return err
			}
		}
		return nil
	}
	if p := e.Rexpr.GetParamRef(); p != nil {
		return a.param(l, int(p.Number), false, true, false, true)
	}
	if lit := arrayLiteral(e.Rexpr); lit != nil {
		// '{a,b}' (pgx's simple protocol writes arrays so): each element
		// encrypted, the literal becomes ARRAY[...]
		var elems []string
		if err := arrayParser.Scan(pgtype.TextArrayOID, 0, []byte(*lit), &elems); err != nil {
			return &Refusal{Code: CodeValue, Message: "pgcipher: malformed array literal for " + strconv.Quote(l.name), Detail: err.Error()}
		}
		arr := &pg.A_ArrayExpr{Location: -1}
		for _, x := range elems {
			n := pg.MakeAConstStrNode(x, -1)
			if err := a.encryptLiteral(l, n, x, false, true, 0); err != nil {
				return err
			}
			arr.Elements = append(arr.Elements, n)
		}
		if len(arr.Elements) == 0 {
			return refuse("", "pgcipher: an empty array cannot be typed for encrypted column %q", l.name)
		}
		e.Rexpr = &pg.Node{Node: &pg.Node_AArrayExpr{AArrayExpr: arr}}
		return nil
	}
	return refuse(hintAllowed, "pgcipher: %s ANY on encrypted column %q needs an ARRAY[...] of values or one parameter", op, l.name)
}

// aexprPlain: an operator expression without a direct encrypted column;
// its operands may still hide one (refused by generic), or a subquery.
func (a *analyzer) aexprPlain(sc *scope, n *pg.Node, op string) error {
	e := n.GetAExpr()
	if sl := e.Rexpr.GetSubLink(); sl != nil && e.Lexpr != nil {
		if err := a.generic(sc, e.Lexpr, "operator "+op); err != nil {
			return err
		}
		return a.sublink(sc, sl)
	}
	return a.generic(sc, n, "")
}

// levelFits: a column's level supports what an operator needs.
func (a *analyzer) levelFits(c *col, lvl colcrypt.Level, op string) error {
	have := level(c)
	if lvl == colcrypt.EQ && !have.HasToken() {
		return refuse("Bind the column at level EQ, ORD or MATCH to compare it.",
			"pgcipher: operator %s on encrypted column %q needs level EQ or ORD; it is %s", op, c.name, have)
	}
	if lvl == colcrypt.ORD {
		if have != colcrypt.ORD {
			return refuse("Bind the column at level ORD (type enc_T_ord).",
				"pgcipher: operator %s on encrypted column %q needs level ORD; it is %s", op, c.name, have)
		}
		if prefixOrder(c.attr.Enc.Plain) {
			return refuse("Compare with = or IN, or use ORDER BY without LIMIT (the proxy sorts), or an ORD column of a fixed-size type.",
				"pgcipher: range comparison %s on %q is refused: the ORD order of %s covers only a 16-byte prefix", op, c.name, c.attr.Enc.Plain)
		}
	}
	return nil
}

// compared checks the other side of a comparison with encrypted column c:
// a literal (encrypted in place), a parameter (typed and encrypted at
// Bind), NULL, a cast of those, or a subquery over a joinable column.
func (a *analyzer) compared(sc *scope, c *col, v *pg.Node, lvl colcrypt.Level, op string) error {
	if err := a.levelFits(c, lvl, op); err != nil {
		return err
	}
	return a.value(sc, c, v, op, false)
}

// value handles a value bound for encrypted column c, in a comparison
// (write == false) or a write.
func (a *analyzer) value(sc *scope, c *col, v *pg.Node, what string, write bool) error {
	return a.valueMod(sc, c, v, what, write, nil)
}

// valueMod is value with mod, the modifier of a cast around it (a CASE's
// or an array's, ::varchar(40)), applied to the values it holds.
func (a *analyzer) valueMod(sc *scope, c *col, v *pg.Node, what string, write bool, mod *CastMod) error {
	if v == nil {
		return nil
	}
	if tc := v.GetTypeCast(); tc != nil && (tc.Arg.GetAConst() != nil || tc.Arg.GetParamRef() != nil) {
		// '2024-01-01'::date, $1::int: the value is the literal or
		// parameter; the server sees the encrypted type instead (so the
		// statement is sent as rewritten, without the cast); the proxy
		// applies a modifier of the column's type (varchar(n))
		if m, ok := castMod(c.attr.Enc.Plain, tc.TypeName); ok {
			mod = m
		}
		v.Node = tc.Arg.Node
		a.changed = true
	}
	if write {
		if ce, m := a.valueCase(sc, c, v); ce != nil {
			if v.GetTypeCast() != nil {
				v.Node = v.GetTypeCast().Arg.Node // a cast of the CASE to the column's type
				a.changed = true
			}
			return a.caseValues(sc, c, ce, m)
		}
	}
	switch {
	case v.GetAConst() != nil:
		k := v.GetAConst()
		if k.Isnull {
			return nil
		}
		s, ok := constText(k)
		if !ok {
			return refuse(hintAllowed, "pgcipher: a bit-string literal cannot be a value of encrypted column %q", c.name)
		}
		s, err := mod.Apply(c.attr.Enc.Plain, s)
		if err != nil {
			return &Refusal{Code: CodeValue, Message: "pgcipher: invalid value for encrypted column " + strconv.Quote(c.name), Detail: err.Error()}
		}
		return a.encryptLiteral(c, v, s, false, !write, 0)
	case v.GetParamRef() != nil:
		num := int(v.GetParamRef().Number)
		if err := a.param(c, num, false, false, !write, !write); err != nil {
			return err
		}
		return a.paramMod(num, mod)
	case v.GetSetToDefault() != nil:
		if write {
			return nil
		}
	case v.GetColumnRef() != nil:
		x, err := a.encCol(sc, v)
		if err != nil {
			return err
		}
		if x != nil {
			if write {
				return a.assignFrom(c, x)
			}
			return a.joinable(c, x)
		}
	case v.GetSubLink() != nil && v.GetSubLink().SubLinkType == pg.SubLinkType_EXPR_SUBLINK && !write:
		r, err := a.selectStmt(sc, v.GetSubLink().Subselect.GetSelectStmt(), false)
		if err != nil {
			return err
		}
		if r == nil || len(r.Attrs) != 1 {
			return refuse(hintAllowed, "pgcipher: encrypted column %q is compared with a subquery that does not return a column of its join group", c.name)
		}
		return a.joinable(c, &col{attr: r.Attrs[0], name: r.Attrs[0].Name})
	}
	if write {
		return refuse(hintAllowed, "pgcipher: the value written to encrypted column %q cannot be computed by the server; give a literal or a parameter", c.name)
	}
	return refuse(hintAllowed, "pgcipher: encrypted column %q can be compared (%s) only with a literal, a parameter or a column of its join group", c.name, what)
}

// valueCase is CASE … THEN value … END written into encrypted column c
// (Django's bulk_update), perhaps cast to c's own plain type (with a
// modifier the proxy applies to each result: ::varchar(40)), when each
// result is a literal, a parameter, NULL or c itself: the server picks
// one of the values, each encrypted for c; nil for anything else.
func (a *analyzer) valueCase(sc *scope, c *col, v *pg.Node) (*pg.CaseExpr, *CastMod) {
	var mod *CastMod
	if tc := v.GetTypeCast(); tc != nil {
		m, ok := castMod(c.attr.Enc.Plain, tc.TypeName)
		if !ok && !noopCast(c.attr.Enc.Plain, tc.TypeName) {
			return nil, nil
		}
		v, mod = tc.Arg, m
	}
	ce := v.GetCaseExpr()
	if ce == nil {
		return nil, nil
	}
	isValue := func(n *pg.Node) bool {
		if n == nil {
			return true
		}
		if tc := n.GetTypeCast(); tc != nil {
			n = tc.Arg
		}
		switch {
		case n.GetAConst() != nil, n.GetParamRef() != nil:
			return true
		case n.GetColumnRef() != nil:
			x, _ := a.encCol(sc, n)
			return x != nil && x.binding() != nil && c.binding() != nil && x.binding().Spec == c.binding().Spec
		}
		return false
	}
	for _, w := range ce.Args {
		if cw := w.GetCaseWhen(); cw == nil || !isValue(cw.Result) {
			return nil, nil
		}
	}
	if !isValue(ce.Defresult) {
		return nil, nil
	}
	return ce, mod
}

// caseValues checks a valueCase: its conditions as predicates (or, for
// CASE x WHEN v, comparisons of x), its results as values of c, with the
// modifier of the CASE's cast (the conditions compare without it).
func (a *analyzer) caseValues(sc *scope, c *col, ce *pg.CaseExpr, mod *CastMod) error {
	arg, err := a.encCol(sc, ce.Arg)
	if err != nil {
		return err
	}
	if arg == nil {
		if err := a.generic(sc, ce.Arg, "CASE"); err != nil {
			return err
		}
	}
	for _, w := range ce.Args {
		cw := w.GetCaseWhen()
		switch {
		case ce.Arg == nil:
			err = a.predicate(sc, cw.Expr, false)
		case arg != nil:
			err = a.compared(sc, arg, cw.Expr, colcrypt.EQ, "CASE … WHEN")
		default:
			err = a.generic(sc, cw.Expr, "CASE … WHEN")
		}
		if err == nil {
			err = a.valueMod(sc, c, cw.Result, "CASE … THEN", true, mod)
		}
		if err != nil {
			return err
		}
	}
	return a.valueMod(sc, c, ce.Defresult, "CASE … ELSE", true, mod)
}

// paramMod records the cast modifier the proxy applies to parameter
// $num's value at Bind (none: nil); one parameter cannot take two.
func (a *analyzer) paramMod(num int, mod *CastMod) error {
	if mod == nil {
		return nil
	}
	p := a.plan.Params[num-1]
	if p.Mod != nil && *p.Mod != *mod {
		return refuse("Use a separate parameter for each use.", "pgcipher: parameter $%d is cast two ways", num)
	}
	p.Mod = mod
	return nil
}

// assignFrom: encrypted column c takes the ciphertext of column x, which
// decrypts under c's label only if x is bound as c is (SET c = c,
// EXCLUDED.c, INSERT … SELECT from a copy of the table).
func (a *analyzer) assignFrom(c, x *col) error {
	if b := c.binding(); b != nil && b.TenantBy != "" && b.TenantBy != "session" {
		// the value stays under the key it came with, whatever the row's
		// tenant (design 13.13)
		return &Refusal{Code: CodeTenant,
			Message: fmt.Sprintf("pgcipher: column %s takes its tenant from its row: a value copied from another row could be another tenant's", b.Spec.Label),
			Hint:    "Read the values through the proxy and INSERT them with their rows' tenant."}
	}
	if x.binding() != nil && c.binding() != nil && x.binding().Spec == c.binding().Spec {
		return nil
	}
	return refuse("Copy values between encrypted columns by reading them through the proxy and writing them back.",
		"pgcipher: encrypted column %q cannot be assigned from column %q (another column's ciphertext does not decrypt under this column's label)", c.name, x.name)
}

var arrayParser = pgtype.NewMap()

// arrayLiteral returns the text of '{...}' or '{...}'::T[], or nil.
func arrayLiteral(n *pg.Node) *string {
	if tc := n.GetTypeCast(); tc != nil {
		n = tc.Arg
	}
	if k := n.GetAConst(); k != nil && k.GetSval() != nil && strings.HasPrefix(strings.TrimSpace(k.GetSval().Sval), "{") {
		s := k.GetSval().Sval
		return &s
	}
	return nil
}

// constText returns the text of a literal as PostgreSQL's input function
// would read it.
func constText(k *pg.A_Const) (string, bool) {
	switch {
	case k.GetIval() != nil:
		return strconv.FormatInt(int64(k.GetIval().Ival), 10), true
	case k.GetFval() != nil:
		return k.GetFval().Fval, true
	case k.GetSval() != nil:
		return k.GetSval().Sval, true
	case k.GetBoolval() != nil:
		if k.GetBoolval().Boolval {
			return "true", true
		}
		return "false", true
	}
	return "", false
}

// encryptLiteral replaces literal node v by its ciphertext, cast to the
// column's encrypted type: a comparison's operand (EncryptOperand), a
// range's bound (bound -1 or +1, encryptPayload) or a value to store.
func (a *analyzer) encryptLiteral(c *col, v *pg.Node, plain string, pattern, operand bool, bound int) error {
	cc, err := a.crypt(c, accessOf(pattern || operand))
	if err != nil {
		return err
	}
	if a.tenantParam != nil {
		a.tenantParam = nil
		return &Refusal{Code: CodeTenant,
			Message: fmt.Sprintf("pgcipher: a literal of column %q cannot be encrypted: its row's tenant is a parameter", c.name),
			Hint:    "Give the value as a parameter too, or the tenant as a literal."}
	}
	var ct []byte
	if pattern {
		ct, err = cc.EncryptPattern(plain, rand.Reader)
	} else {
		var p []byte
		if p, err = values.Encode(c.attr.Enc.Plain, plain); err == nil {
			ct, err = encryptPayload(cc, p, operand, bound, rand.Reader)
		}
	}
	if err != nil {
		return &Refusal{Code: CodeValue, Message: "pgcipher: invalid value for encrypted column " + strconv.Quote(c.name), Detail: err.Error(),
			Hint: "Give a value of the column's plain type " + c.attr.Enc.Plain.String() + "."}
	}
	v.Node = &pg.Node_TypeCast{TypeCast: &pg.TypeCast{
		Arg: pg.MakeAConstStrNode(base64.StdEncoding.EncodeToString(ct), -1),
		TypeName: &pg.TypeName{Names: []*pg.Node{pg.MakeStrNode(a.cat.ExtSchema), pg.MakeStrNode(c.attr.Enc.Name)},
			Typemod: -1, Location: -1},
		Location: -1,
	}}
	a.changed = true
	a.plan.Cacheable = false
	for i := range a.plan.Uses {
		if a.plan.Uses[i].Binding == c.binding() {
			a.plan.Uses[i].Literals++
		}
	}
	return nil
}

// param records that parameter $num carries a value of column c, only
// compared with (operand) or also stored; compared: the statement
// compares with it (a read, whatever its encryption).
func (a *analyzer) param(c *col, num int, pattern, array, operand, compared bool) error {
	cc, err := a.crypt(c, accessOf(compared || pattern || operand))
	if err != nil {
		return err
	}
	if num < 1 || num > 65535 {
		return refuse("", "pgcipher: parameter $%d out of range", num)
	}
	for len(a.plan.Params) < num {
		a.plan.Params = append(a.plan.Params, nil)
	}
	p := &Param{Attr: c.attr, Column: cc, EncType: c.attr.Enc, Pattern: pattern, Array: array, Operand: operand}
	if t := a.tenantParam; t != nil {
		// the row's tenant comes with parameter t.param (design 13.13)
		a.tenantParam = nil
		p.TenantParam, p.TenantOID = t.param, t.oid
	}
	if old := a.plan.Params[num-1]; old != nil {
		if old.Bound != 0 {
			return refuse("Use a separate parameter for each bound.", "pgcipher: parameter $%d is a range bound and has another use", num)
		}
		if old.Column != cc || old.Pattern != pattern || old.Array != array || old.TenantParam != p.TenantParam {
			return refuse("Use a separate parameter for each use.",
				"pgcipher: parameter $%d is used for two encrypted columns or in two ways", num)
		}
		old.Operand = old.Operand && operand // stored once: a value
		return nil
	}
	if array {
		p.ArrayOID = a.cat.ArrayOf(c.attr.Enc.OID)
		if p.ArrayOID == 0 {
			return refuse("", "pgcipher: no array type of %s", c.attr.Enc.Name)
		}
	}
	a.plan.Params[num-1] = p
	return nil
}

// like rewrites LIKE on a MATCH column into the Bloom-filter candidate
// test @> and asks the proxy to recheck the rows on their plaintext;
// NOT LIKE leaves the server no test and is rechecked alone.
// likeCase: how a pattern search treats case.  col and pat: the function
// ("upper", "lower" or "") PostgreSQL applies to the column's value and
// to the pattern before it matches (ILIKE: lower both); literal: the
// pattern is a value to be equal to, its % and _ literal (upper(c) =
// upper($1), Django's iexact); what names the search in messages.
type likeCase struct {
	col, pat string
	literal  bool
	what     string
}

// caseCall reads upper(c) or lower(c) of an encrypted column c (a no-op
// cast of c allowed): the column and the function's name.
func (a *analyzer) caseCall(sc *scope, n *pg.Node) (*col, string, error) {
	fn := caseFunc(n)
	if fn == "" {
		return nil, "", nil
	}
	arg := n.GetFuncCall().Args[0]
	c, err := a.encCol(sc, arg)
	if err != nil || c == nil {
		return nil, "", err
	}
	return c, fn, nil
}

// caseFunc is "upper" or "lower" for a plain call of either on one
// argument, else "".
func caseFunc(n *pg.Node) string {
	f := n.GetFuncCall()
	if f == nil || len(f.Args) != 1 || f.AggStar || f.AggDistinct || f.Over != nil || f.AggFilter != nil || len(f.AggOrder) > 0 {
		return ""
	}
	switch name := strings.ToLower(funcName(f)); name {
	case "upper", "lower":
		return name
	}
	return ""
}

// caseSearch: fn(c) LIKE p, fn(c) = v or fn(c) <> v with fn upper or
// lower of encrypted column c: searches of a case-insensitive MATCH
// column, candidates by the folded filters, rechecked by the proxy.
func (a *analyzer) caseSearch(sc *scope, n *pg.Node, c *col, fn, op string, conj bool) error {
	e := n.GetAExpr()
	e.Lexpr = n.GetAExpr().Lexpr.GetFuncCall().Args[0] // c itself, its no-op cast gone
	a.changed = true
	switch {
	case e.Kind == pg.A_Expr_Kind_AEXPR_LIKE:
		return a.like(sc, n, c, op == "!~~", conj, likeCase{col: fn, what: fn + "() LIKE"})
	case e.Kind == pg.A_Expr_Kind_AEXPR_OP && (op == "=" || op == "<>" || op == "!="):
		return a.like(sc, n, c, op != "=", conj, likeCase{col: fn, literal: true, what: fn + "() " + op})
	}
	return refuse("Compare the exact value, or search a MATCH column bound case-insensitive with upper() or lower() on both sides of LIKE or =, or with ILIKE.",
		"pgcipher: %s() of encrypted column %q cannot be computed by the server for operator %s", fn, c.name, op)
}

// escapeLike writes s as a LIKE pattern (backslash escapes) that matches s
// alone.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(s)
}

// applyCase applies "upper", "lower" or "" to s, as the proxy computes
// them in select lists (Unicode's mappings).
func applyCase(fn, s string) string {
	switch fn {
	case "upper":
		return strings.ToUpper(s)
	case "lower":
		return strings.ToLower(s)
	}
	return s
}

func (a *analyzer) like(sc *scope, n *pg.Node, c *col, not, conj bool, lc likeCase) error {
	e := n.GetAExpr()
	if lc.what == "" {
		lc.what = "LIKE"
	}
	if level(c) != colcrypt.MATCH {
		if lc.col != "" {
			return refuse("Bind the column at level MATCH with case_insensitive => true (pgcipher.encrypt_column) to search it so.",
				"pgcipher: %s on encrypted column %q needs level MATCH, case-insensitive; it is %s", lc.what, c.name, level(c))
		}
		return refuse("Bind the column at level MATCH to search it with LIKE.",
			"pgcipher: LIKE on encrypted column %q needs level MATCH; it is %s", c.name, level(c))
	}
	if !conj || a.cur == nil {
		return refuse("Put the search at the top level of the WHERE clause (ANDed), in a query without GROUP BY, DISTINCT or aggregates.",
			"pgcipher: %s on encrypted column %q is allowed only where the proxy can recheck the rows it returns", lc.what, c.name)
	}
	cc, err := a.crypt(c, colcrypt.AccessRead)
	if err != nil {
		return err
	}
	if lc.col != "" && !cc.Spec().CaseInsensitive {
		return refuse("Bind the column with pgcipher.encrypt_column(table, column, key, 'MATCH', case_insensitive => true): its filters are then of the case-folded text (docs/design.md, 13.5a).",
			"pgcipher: %s on encrypted column %q is refused: its MATCH filters are of the exact text, so a case-insensitive search cannot find its candidates", lc.what, c.name)
	}
	f := Filter{Hidden: a.plan.Hidden, Column: cc, Not: not, ColCase: lc.col}
	pat := e.Rexpr
	if fc := pat.GetFuncCall(); fc != nil && strings.ToLower(funcName(fc)) == "like_escape" && len(fc.Args) == 2 {
		// LIKE p ESCAPE e: the pattern is read with e, and sent as the
		// candidate test without it
		k := fc.Args[1].GetAConst()
		if tc := fc.Args[1].GetTypeCast(); tc != nil {
			k = tc.Arg.GetAConst()
		}
		if k == nil || k.GetSval() == nil {
			return refuse("Give ESCAPE a literal character.", "pgcipher: LIKE on encrypted column %q needs a literal ESCAPE", c.name)
		}
		esc := k.GetSval().Sval
		f.Escape = &esc
		pat = fc.Args[0]
	}
	if fn := caseFunc(pat); fn != "" {
		// upper($1), lower('%x%'): the proxy applies it to the pattern
		if lc.pat != "" {
			return refuse("Write the pattern without the case function: ILIKE folds it.",
				"pgcipher: %s on encrypted column %q with %s() of the pattern is not served", lc.what, c.name, fn)
		}
		lc.pat, pat = fn, pat.GetFuncCall().Args[0]
	}
	if tc := pat.GetTypeCast(); tc != nil && (tc.Arg.GetAConst() != nil || tc.Arg.GetParamRef() != nil) {
		pat = tc.Arg
	}
	f.PatternForm.Case, f.PatternForm.Literal = lc.pat, lc.literal
	if pat.GetAExpr() != nil {
		// '%' || $1 || '%' (SQLAlchemy's contains, startswith): the
		// pattern is the literals and at most one parameter joined
		var err error
		if pat, f.Prefix, f.Suffix, err = joinedPattern(pat); err != nil {
			return refuse(hintAllowed, "pgcipher: LIKE on encrypted column %q needs a pattern of literals and at most one parameter joined with ||", c.name)
		}
	}
	switch {
	case pat.GetAConst() != nil && pat.GetAConst().GetSval() != nil:
		var err error
		if f.Pattern, err = f.ParamPattern(pat.GetAConst().GetSval().Sval); err != nil {
			return &Refusal{Code: CodeValue, Message: "pgcipher: invalid LIKE pattern", Detail: err.Error()}
		}
		f.PatternForm = PatternForm{}
		if _, err := colcrypt.LikeRuns(f.Pattern); err != nil {
			return &Refusal{Code: CodeValue, Message: "pgcipher: invalid LIKE pattern", Detail: err.Error()}
		}
		if !not {
			if err := a.encryptLiteral(c, pat, f.Pattern, true, true, 0); err != nil {
				return err
			}
			e.Rexpr = pat
		}
	case pat.GetParamRef() != nil:
		// NOT LIKE leaves the server no test, but the parameter still
		// travels in Bind: encrypted as a pattern, typed and unused
		f.Param = int(pat.GetParamRef().Number)
		if err := a.param(c, f.Param, true, false, true, true); err != nil {
			return err
		}
		prm := a.plan.Params[f.Param-1]
		if !prm.sharable(f.PatternForm) && len(a.plan.Filters) > 0 && a.usedAsPattern(f.Param) {
			return refuse("Use a separate parameter for each LIKE.", "pgcipher: parameter $%d is the pattern of two LIKEs", f.Param)
		}
		prm.PatternForm = f.PatternForm
		if !not {
			e.Rexpr = pat
		}
	default:
		return refuse(hintAllowed, "pgcipher: LIKE on encrypted column %q needs a literal pattern or a parameter", c.name)
	}
	if not {
		n.Node = &pg.Node_AConst{AConst: &pg.A_Const{Val: &pg.A_Const_Boolval{Boolval: &pg.Boolean{Boolval: true}}, Location: -1}}
	} else {
		e.Kind = pg.A_Expr_Kind_AEXPR_OP
		e.Name = []*pg.Node{pg.MakeStrNode("@>")}
		if a.cat.ExtSchema != "" {
			e.Name = []*pg.Node{pg.MakeStrNode(a.cat.ExtSchema), pg.MakeStrNode("@>")}
		}
	}
	a.recheck(c, f)
	return nil
}

// joinedPattern reads a || b || … of string literals and at most one
// parameter: the parameter (or the whole literal) and the literals before
// and after a parameter.
func joinedPattern(n *pg.Node) (*pg.Node, string, string, error) {
	var parts []*pg.Node
	var flatten func(n *pg.Node) bool
	flatten = func(n *pg.Node) bool {
		if tc := n.GetTypeCast(); tc != nil {
			n = tc.Arg
		}
		if e := n.GetAExpr(); e != nil {
			return e.Kind == pg.A_Expr_Kind_AEXPR_OP && opName(e) == "||" && e.Lexpr != nil &&
				flatten(e.Lexpr) && flatten(e.Rexpr)
		}
		if n.GetParamRef() != nil || n.GetAConst() != nil && n.GetAConst().GetSval() != nil {
			parts = append(parts, n)
			return true
		}
		return false
	}
	if !flatten(n) {
		return nil, "", "", errors.New("not a joined pattern")
	}
	var param *pg.Node
	var before, after strings.Builder
	for _, p := range parts {
		switch {
		case p.GetParamRef() != nil && param != nil:
			return nil, "", "", errors.New("two parameters")
		case p.GetParamRef() != nil:
			param = p
		case param == nil:
			before.WriteString(p.GetAConst().GetSval().Sval)
		default:
			after.WriteString(p.GetAConst().GetSval().Sval)
		}
	}
	if param == nil {
		return pg.MakeAConstStrNode(before.String(), -1), "", "", nil
	}
	return param, before.String(), after.String(), nil
}

// usedAsPattern: parameter num already holds a LIKE filter's pattern.
func (a *analyzer) usedAsPattern(num int) bool {
	for _, f := range a.plan.Filters {
		if f.Param == num {
			return true
		}
	}
	return false
}

// sublink checks EXISTS, IN (SELECT …) and = ANY (SELECT …).
func (a *analyzer) sublink(sc *scope, sl *pg.SubLink) error {
	r, err := a.selectStmt(sc, sl.Subselect.GetSelectStmt(), false)
	if err != nil {
		return err
	}
	if sl.Testexpr == nil {
		return nil
	}
	c, err := a.encCol(sc, sl.Testexpr)
	if err != nil {
		return err
	}
	var out *col
	if r != nil && len(r.Attrs) > 0 {
		out = &col{attr: r.Attrs[0], name: r.Attrs[0].Name}
	}
	if c == nil && out == nil {
		return a.generic(sc, sl.Testexpr, "a subquery test")
	}
	if c == nil || out == nil {
		return refuse(hintAllowed, "pgcipher: a subquery compares an encrypted column with a value the server cannot compare it with")
	}
	return a.joinable(c, out)
}

// accessOf is the access a value of a column needs: read where the
// statement only compares with it, write where it stores it.
func accessOf(compared bool) colcrypt.Access {
	if compared {
		return colcrypt.AccessRead
	}
	return colcrypt.AccessWrite
}
