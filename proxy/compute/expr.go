// Expressions: inputs of a row, constants, parameters, arithmetic,
// comparisons, casts and a few functions, typed when they are built (so
// that what cannot be computed is refused before anything is sent).

package compute

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"unicode/utf8"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// Env is what an expression is evaluated against: one result row.
type Env struct {
	Inputs []Value   // the row's scalar fields, by input index
	Arrays [][]Value // the row's array fields (array_agg of a column), by input index
	Params []Value   // $n is Params[n-1]
	elem   int       // the element of Arrays an aggregate's argument reads
	inAgg  bool
}

// Expr is an expression the proxy evaluates.
type Expr interface {
	Type() colcrypt.Type
	Eval(env *Env) (Value, error)
}

// ErrUnsupported: the expression cannot be computed by the proxy.
type ErrUnsupported struct{ What string }

func (e *ErrUnsupported) Error() string { return "the proxy cannot compute " + e.What }

func unsupported(format string, args ...any) error {
	return &ErrUnsupported{What: fmt.Sprintf(format, args...)}
}

// Input is field Idx of the row (inside an aggregate's argument: the
// current element of the array in field Idx).
type Input struct {
	Idx int
	T   colcrypt.Type
}

func (e *Input) Type() colcrypt.Type { return e.T }

func (e *Input) Eval(env *Env) (Value, error) {
	if env.inAgg {
		if e.Idx >= len(env.Arrays) || env.elem >= len(env.Arrays[e.Idx]) {
			return Value{}, fmt.Errorf("compute: array input %d has no element %d", e.Idx, env.elem)
		}
		return env.Arrays[e.Idx][env.elem], nil
	}
	if e.Idx >= len(env.Inputs) {
		return Value{}, fmt.Errorf("compute: no input %d", e.Idx)
	}
	return env.Inputs[e.Idx], nil
}

// Const is a literal.  A string literal of no stated type is Unknown
// until an operator or cast gives it one, as in PostgreSQL.
type Const struct {
	V       Value
	Unknown bool
}

func (e *Const) Type() colcrypt.Type      { return e.V.Type }
func (e *Const) Eval(*Env) (Value, error) { return e.V, nil }

// Param is $N, read as type T.
type Param struct {
	N int
	T colcrypt.Type
}

func (e *Param) Type() colcrypt.Type { return e.T }

func (e *Param) Eval(env *Env) (Value, error) {
	if e.N < 1 || e.N > len(env.Params) {
		return Value{}, fmt.Errorf("compute: no value for parameter $%d", e.N)
	}
	return Cast(env.Params[e.N-1], e.T)
}

// numeric type promotion: int4 < int8 < numeric < float8
func rank(t colcrypt.Type) int {
	switch t {
	case colcrypt.Int4:
		return 1
	case colcrypt.Int8:
		return 2
	case colcrypt.Numeric:
		return 3
	case colcrypt.Float8:
		return 4
	}
	return 0
}

// resolveUnknown gives an untyped literal the type of the other operand.
func resolveUnknown(e Expr, t colcrypt.Type) (Expr, error) {
	if c, ok := e.(*Const); ok && c.Unknown {
		v, err := FromText(t, c.V.Str)
		if err != nil {
			return nil, errorf("22P02", "invalid input syntax for type %s: %q", sqlName(t), c.V.Str)
		}
		return &Const{V: v}, nil
	}
	return e, nil
}

// Binary is an arithmetic operator (+ - * / %) or text concatenation (||).
type Binary struct {
	Op   string
	L, R Expr
	T    colcrypt.Type
}

// NewBinary types l op r.
func NewBinary(op string, l, r Expr) (Expr, error) {
	var err error
	if op == "||" {
		if l.Type() != colcrypt.Text && r.Type() != colcrypt.Text {
			return nil, unsupported("%s || %s", l.Type(), r.Type())
		}
		return &Binary{Op: op, L: l, R: r, T: colcrypt.Text}, nil
	}
	if !strings.Contains("+-*/%", op) || len(op) != 1 {
		return nil, unsupported("operator %s", op)
	}
	if l, err = resolveUnknown(l, r.Type()); err != nil {
		return nil, err
	}
	if r, err = resolveUnknown(r, l.Type()); err != nil {
		return nil, err
	}
	rl, rr := rank(l.Type()), rank(r.Type())
	if rl == 0 || rr == 0 {
		return nil, unsupported("%s %s %s", l.Type(), op, r.Type())
	}
	t := l.Type()
	if rr > rl {
		t = r.Type()
	}
	if op == "%" && t == colcrypt.Float8 {
		return nil, unsupported("%% on double precision")
	}
	return &Binary{Op: op, L: l, R: r, T: t}, nil
}

func (e *Binary) Type() colcrypt.Type { return e.T }

func (e *Binary) Eval(env *Env) (Value, error) {
	a, err := e.L.Eval(env)
	if err != nil {
		return Value{}, err
	}
	b, err := e.R.Eval(env)
	if err != nil {
		return Value{}, err
	}
	if a.Null || b.Null {
		return Null(e.T), nil
	}
	if e.Op == "||" {
		as, err := Cast(a, colcrypt.Text)
		if err != nil {
			return Value{}, err
		}
		bs, err := Cast(b, colcrypt.Text)
		if err != nil {
			return Value{}, err
		}
		return Value{Type: colcrypt.Text, Str: as.Str + bs.Str}, nil
	}
	if a, err = Cast(a, e.T); err != nil {
		return Value{}, err
	}
	if b, err = Cast(b, e.T); err != nil {
		return Value{}, err
	}
	return Arith(e.Op, a, b)
}

// Arith applies op to two values of one numeric type.
func Arith(op string, a, b Value) (Value, error) {
	t := a.Type
	switch t {
	case colcrypt.Int4, colcrypt.Int8:
		x, y := a.Int, b.Int
		var r int64
		ok := true
		switch op {
		case "+":
			r = x + y
			ok = (r > x) == (y > 0) || y == 0
		case "-":
			r = x - y
			ok = (r < x) == (y > 0) || y == 0
		case "*":
			r = x * y
			ok = x == 0 || (r/x == y && !(x == -1 && y == math.MinInt64))
		case "/", "%":
			if y == 0 {
				return Value{}, ErrDivisionByZero
			}
			if y == -1 { // MinInt / -1 overflows; x % -1 is 0
				if op == "%" {
					return Value{Type: t}, nil
				}
				r = -x
				ok = x != math.MinInt64
			} else if op == "/" {
				r = x / y
			} else {
				r = x % y
			}
		}
		if !ok || t == colcrypt.Int4 && (r > math.MaxInt32 || r < math.MinInt32) {
			return Value{}, outOfRange(t)
		}
		return Value{Type: t, Int: r}, nil
	case colcrypt.Float8:
		x, y := a.Float, b.Float
		var r float64
		switch op {
		case "+":
			r = x + y
		case "-":
			r = x - y
		case "*":
			r = x * y
		case "/":
			if y == 0 {
				return Value{}, ErrDivisionByZero
			}
			r = x / y
		}
		if math.IsInf(r, 0) && !math.IsInf(x, 0) && !math.IsInf(y, 0) {
			return Value{}, outOfRange(t)
		}
		if r == 0 && x != 0 && op == "*" && y != 0 || r == 0 && op == "/" && x != 0 && !math.IsInf(y, 0) {
			return Value{}, errorf("22003", "value out of range: underflow")
		}
		return Value{Type: t, Float: r}, nil
	case colcrypt.Numeric:
		var d Decimal
		var err error
		switch op {
		case "+":
			d = a.Num.Add(b.Num)
		case "-":
			d = a.Num.Add(b.Num.Neg())
		case "*":
			d = a.Num.Mul(b.Num)
		case "/":
			d, err = a.Num.Div(b.Num)
		case "%":
			d, err = a.Num.Mod(b.Num)
		}
		return Value{Type: t, Num: d}, err
	}
	return Value{}, unsupported("%s %s %s", t, op, t)
}

// Mod is numeric_mod: a - trunc(a/b)·b, at the larger scale.
func (d Decimal) Mod(e Decimal) (Decimal, error) {
	if d.Special == nan || e.Special == nan {
		return Decimal{Special: nan}, nil
	}
	if e.Special == finite && e.Coef.Sign() == 0 {
		return Decimal{}, ErrDivisionByZero
	}
	if d.Special != finite {
		return Decimal{Special: nan}, nil
	}
	if e.Special != finite {
		return d, nil
	}
	s := max(d.Scale, e.Scale)
	x, y := d.coefAt(s), e.coefAt(s)
	return Decimal{Coef: new(big.Int).Rem(x, y), Scale: s}, nil
}

// Neg is unary minus.
type Neg struct{ E Expr }

func (e *Neg) Type() colcrypt.Type { return e.E.Type() }

func (e *Neg) Eval(env *Env) (Value, error) {
	v, err := e.E.Eval(env)
	if err != nil || v.Null {
		return v, err
	}
	switch v.Type {
	case colcrypt.Int4, colcrypt.Int8:
		return Arith("-", Value{Type: v.Type}, v)
	case colcrypt.Float8:
		v.Float = -v.Float
	case colcrypt.Numeric:
		v.Num = v.Num.Neg()
	}
	return v, nil
}

// NewNeg types -e.
func NewNeg(e Expr) (Expr, error) {
	if rank(e.Type()) == 0 {
		return nil, unsupported("unary minus on %s", e.Type())
	}
	return &Neg{E: e}, nil
}

// Assignable: a value of type from may be stored in a column of type to
// (PostgreSQL's implicit and assignment casts among these types).
func Assignable(from, to colcrypt.Type) bool {
	return from == to || to == colcrypt.Text || rank(from) > 0 && rank(to) > 0
}

// CastTo is e::T.
type CastTo struct {
	E Expr
	T colcrypt.Type
}

// NewCast types e::t.
func NewCast(e Expr, t colcrypt.Type) (Expr, error) {
	if c, ok := e.(*Const); ok && c.Unknown {
		return resolveUnknown(c, t)
	}
	from := e.Type()
	ok := from == t || t == colcrypt.Text || from == colcrypt.Text ||
		rank(from) > 0 && rank(t) > 0 || from == colcrypt.Bool && t == colcrypt.Int4
	if !ok {
		return nil, unsupported("a cast from %s to %s", from, t)
	}
	return &CastTo{E: e, T: t}, nil
}

func (e *CastTo) Type() colcrypt.Type { return e.T }

func (e *CastTo) Eval(env *Env) (Value, error) {
	v, err := e.E.Eval(env)
	if err != nil {
		return v, err
	}
	return Cast(v, e.T)
}

// Func is one of the functions the proxy computes.
type Func struct {
	Name string
	Args []Expr
	T    colcrypt.Type
}

// NewFunc types name(args): upper, lower, length, abs, coalesce.
func NewFunc(name string, args []Expr) (Expr, error) {
	switch name {
	case "upper", "lower", "length", "char_length":
		if len(args) != 1 {
			break
		}
		a, err := resolveUnknown(args[0], colcrypt.Text)
		if err != nil || a.Type() != colcrypt.Text {
			break
		}
		t := colcrypt.Text
		if name == "length" || name == "char_length" {
			t = colcrypt.Int4
		}
		return &Func{Name: name, Args: []Expr{a}, T: t}, nil
	case "abs":
		if len(args) == 1 && rank(args[0].Type()) > 0 {
			return &Func{Name: name, Args: args, T: args[0].Type()}, nil
		}
	case "coalesce":
		if len(args) == 0 {
			break
		}
		t := args[0].Type()
		for _, a := range args {
			if c, ok := a.(*Const); !ok || !c.Unknown {
				t = a.Type()
				break
			}
		}
		out := make([]Expr, len(args))
		for i, a := range args {
			var err error
			if out[i], err = resolveUnknown(a, t); err != nil {
				return nil, err
			}
			if out[i].Type() != t {
				if out[i], err = NewCast(out[i], t); err != nil || rank(t) == 0 {
					return nil, unsupported("coalesce of %s and %s", t, a.Type())
				}
			}
		}
		return &Func{Name: name, Args: out, T: t}, nil
	}
	return nil, unsupported("function %s() of these arguments", name)
}

func (e *Func) Type() colcrypt.Type { return e.T }

func (e *Func) Eval(env *Env) (Value, error) {
	if e.Name == "coalesce" {
		for _, a := range e.Args {
			v, err := a.Eval(env)
			if err != nil || !v.Null {
				if err == nil {
					v, err = Cast(v, e.T)
				}
				return v, err
			}
		}
		return Null(e.T), nil
	}
	v, err := e.Args[0].Eval(env)
	if err != nil || v.Null {
		return Value{Type: e.T, Null: true}, err
	}
	switch e.Name {
	case "upper":
		return Value{Type: e.T, Str: strings.ToUpper(v.Str)}, nil
	case "lower":
		return Value{Type: e.T, Str: strings.ToLower(v.Str)}, nil
	case "length", "char_length":
		return Value{Type: e.T, Int: int64(utf8.RuneCountInString(v.Str))}, nil
	case "abs":
		if Compare(v, zeroOf(v.Type)) < 0 {
			return (&Neg{E: &Const{V: v}}).Eval(env)
		}
		return v, nil
	}
	return Value{}, unsupported("function %s()", e.Name)
}

func zeroOf(t colcrypt.Type) Value {
	if t == colcrypt.Numeric {
		return Value{Type: t, Num: DecimalFromInt(0)}
	}
	return Value{Type: t}
}

// Compare is a comparison (= <> < <= > >=); it yields bool.
type Cmp struct {
	Op   string
	L, R Expr
}

// NewCmp types l op r.
func NewCmp(op string, l, r Expr) (Expr, error) {
	var err error
	if op == "!=" {
		op = "<>"
	}
	switch op {
	case "=", "<>", "<", "<=", ">", ">=":
	default:
		return nil, unsupported("operator %s", op)
	}
	if l, err = resolveUnknown(l, r.Type()); err != nil {
		return nil, err
	}
	if r, err = resolveUnknown(r, l.Type()); err != nil {
		return nil, err
	}
	if l.Type() != r.Type() {
		if rank(l.Type()) == 0 || rank(r.Type()) == 0 {
			return nil, unsupported("a comparison of %s with %s", l.Type(), r.Type())
		}
	}
	return &Cmp{Op: op, L: l, R: r}, nil
}

func (e *Cmp) Type() colcrypt.Type { return colcrypt.Bool }

func (e *Cmp) Eval(env *Env) (Value, error) {
	a, err := e.L.Eval(env)
	if err != nil {
		return a, err
	}
	b, err := e.R.Eval(env)
	if err != nil {
		return b, err
	}
	if a.Null || b.Null {
		return Null(colcrypt.Bool), nil
	}
	if a.Type != b.Type {
		t := a.Type
		if rank(b.Type) > rank(t) {
			t = b.Type
		}
		if a, err = Cast(a, t); err != nil {
			return a, err
		}
		if b, err = Cast(b, t); err != nil {
			return b, err
		}
	}
	c := Compare(a, b)
	var r bool
	switch e.Op {
	case "=":
		r = c == 0
	case "<>":
		r = c != 0
	case "<":
		r = c < 0
	case "<=":
		r = c <= 0
	case ">":
		r = c > 0
	case ">=":
		r = c >= 0
	}
	return boolValue(r), nil
}

func boolValue(b bool) Value {
	v := Value{Type: colcrypt.Bool}
	if b {
		v.Int = 1
	}
	return v
}

// Bool is AND, OR or NOT with SQL's three-valued logic.
type Bool struct {
	Op   string // "and", "or", "not"
	Args []Expr
}

func (e *Bool) Type() colcrypt.Type { return colcrypt.Bool }

func (e *Bool) Eval(env *Env) (Value, error) {
	if e.Op == "not" {
		v, err := e.Args[0].Eval(env)
		if err != nil || v.Null {
			return v, err
		}
		return boolValue(v.Int == 0), nil
	}
	sawNull := false
	for _, a := range e.Args {
		v, err := a.Eval(env)
		if err != nil {
			return v, err
		}
		switch {
		case v.Null:
			sawNull = true
		case e.Op == "and" && v.Int == 0:
			return boolValue(false), nil
		case e.Op == "or" && v.Int != 0:
			return boolValue(true), nil
		}
	}
	if sawNull {
		return Null(colcrypt.Bool), nil
	}
	return boolValue(e.Op == "and"), nil
}

// IsNull is e IS [NOT] NULL.
type IsNull struct {
	E   Expr
	Not bool
}

func (e *IsNull) Type() colcrypt.Type { return colcrypt.Bool }

func (e *IsNull) Eval(env *Env) (Value, error) {
	v, err := e.E.Eval(env)
	if err != nil {
		return v, err
	}
	return boolValue(v.Null != e.Not), nil
}
