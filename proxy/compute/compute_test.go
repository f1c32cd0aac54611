package compute

import (
	"testing"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// Expected values are PostgreSQL 17's own answers.
func TestDecimalDiv(t *testing.T) {
	for _, tc := range []struct{ a, b, want string }{
		{"3", "2", "1.5000000000000000"},
		{"1", "3", "0.33333333333333333333"},
		{"10", "4", "2.5000000000000000"},
		{"179", "21", "8.5238095238095238"},
		{"-258000000000", "21", "-12285714285.71428571"},
		{"2", "3", "0.66666666666666666667"},
		{"1.50", "3", "0.50000000000000000000"},
		{"100000", "7", "14285.714285714286"},
		{"0", "5", "0.00000000000000000000"},
	} {
		a, _ := ParseDecimal(tc.a)
		b, _ := ParseDecimal(tc.b)
		got, err := a.Div(b)
		if err != nil || got.String() != tc.want {
			t.Errorf("%s / %s = %s (%v), want %s", tc.a, tc.b, got, err, tc.want)
		}
	}
	if _, err := DecimalFromInt(1).Div(DecimalFromInt(0)); err != ErrDivisionByZero {
		t.Errorf("1/0: %v", err)
	}
}

func ints(t colcrypt.Type, vs ...any) []Value {
	var out []Value
	for _, v := range vs {
		if v == nil {
			out = append(out, Null(t))
			continue
		}
		out = append(out, Int(t, int64(v.(int))))
	}
	return out
}

func TestAggregates(t *testing.T) {
	in := &Input{Idx: 0, T: colcrypt.Int4}
	for _, tc := range []struct {
		fn   string
		vals []Value
		want string // text, or "NULL"
		code string // SQLSTATE of an error
		typ  colcrypt.Type
	}{
		{fn: "sum", vals: ints(colcrypt.Int4, 1, 2, nil, 4), want: "7", typ: colcrypt.Int8},
		{fn: "sum", vals: ints(colcrypt.Int4), want: "NULL", typ: colcrypt.Int8},
		{fn: "sum", vals: ints(colcrypt.Int4, nil, nil), want: "NULL", typ: colcrypt.Int8},
		{fn: "count", vals: ints(colcrypt.Int4, nil, 3, nil), want: "1", typ: colcrypt.Int8},
		{fn: "count", vals: ints(colcrypt.Int4), want: "0", typ: colcrypt.Int8},
		{fn: "avg", vals: ints(colcrypt.Int4, 1, 2), want: "1.5000000000000000", typ: colcrypt.Numeric},
		{fn: "min", vals: ints(colcrypt.Int4, 5, nil, -3, 9), want: "-3", typ: colcrypt.Int4},
		{fn: "max", vals: ints(colcrypt.Int4, 5, nil, -3, 9), want: "9", typ: colcrypt.Int4},
		{fn: "sum", vals: ints(colcrypt.Int4, 2147483647, 2147483647, 2147483647), want: "6442450941", typ: colcrypt.Int8},
	} {
		e, err := NewAgg(tc.fn, in, 0)
		if err != nil {
			t.Fatal(err)
		}
		if e.Type() != tc.typ {
			t.Errorf("%s(int4) is %s, want %s", tc.fn, e.Type(), tc.typ)
		}
		v, err := e.Eval(&Env{Arrays: [][]Value{tc.vals}})
		got := "NULL"
		if err == nil && !v.Null {
			got, _ = v.Text()
		}
		if err != nil || got != tc.want {
			t.Errorf("%s(%v) = %s (%v), want %s", tc.fn, tc.vals, got, err, tc.want)
		}
	}
	// sum(int8) is numeric: no overflow
	big, _ := NewAgg("sum", &Input{T: colcrypt.Int8}, 0)
	v, err := big.Eval(&Env{Arrays: [][]Value{ints(colcrypt.Int8, 9223372036854775807, 9223372036854775807)}})
	if s, _ := v.Text(); err != nil || s != "18446744073709551614" {
		t.Errorf("sum(int8) = %s (%v)", s, err)
	}
	for _, fn := range []string{"sum", "avg"} {
		if _, err := NewAgg(fn, &Input{T: colcrypt.Text}, 0); err == nil {
			t.Errorf("%s(text) accepted", fn)
		}
	}
}

func TestArithmetic(t *testing.T) {
	i4 := func(v int64) Expr { return &Const{V: Int(colcrypt.Int4, v)} }
	for _, tc := range []struct {
		op   string
		l, r Expr
		want string
		code string
	}{
		{"+", i4(2147483647), i4(1), "", "22003"},
		{"*", i4(65536), i4(32768), "", "22003"},
		{"/", i4(7), i4(2), "3", ""},
		{"%", i4(-7), i4(2), "-1", ""},
		{"/", i4(1), i4(0), "", "22012"},
		{"/", i4(-2147483648), i4(-1), "", "22003"},
		{"+", i4(1), &Const{V: Int(colcrypt.Int8, 1<<40)}, "1099511627777", ""},
		{"*", &Const{V: Value{Type: colcrypt.Text, Str: "1.5"}, Unknown: true}, &Const{V: Value{Type: colcrypt.Numeric, Num: DecimalFromInt(3)}}, "4.5", ""},
		{"||", &Const{V: Value{Type: colcrypt.Text, Str: "a"}}, i4(7), "a7", ""},
	} {
		e, err := NewBinary(tc.op, tc.l, tc.r)
		if err != nil {
			t.Fatalf("%s: %v", tc.op, err)
		}
		v, err := e.Eval(&Env{})
		if tc.code != "" {
			if ce, ok := err.(*Error); !ok || ce.Code != tc.code {
				t.Errorf("%v %s %v: %v, want SQLSTATE %s", tc.l, tc.op, tc.r, err, tc.code)
			}
			continue
		}
		if s, _ := v.Text(); err != nil || s != tc.want {
			t.Errorf("%v %s %v = %s (%v), want %s", tc.l, tc.op, tc.r, s, err, tc.want)
		}
	}
	if _, err := NewBinary("+", &Const{V: Value{Type: colcrypt.Date}}, i4(1)); err == nil {
		t.Error("date + int4 accepted: the proxy does not compute it")
	}
}

func TestParseArray(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // "<nil>" for NULL
	}{
		{"{}", nil},
		{"{AAE=,NULL,Zm9v}", []string{"AAE=", "<nil>", "Zm9v"}},
		{`{"a b","c\"d",NULL,"NULL"}`, []string{"a b", `c"d`, "<nil>", "NULL"}},
		{"[0:1]={1,2}", []string{"1", "2"}},
	} {
		got, err := ParseArray(tc.in)
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("%s: %d elements (%v), want %d", tc.in, len(got), err, len(tc.want))
			continue
		}
		for i, g := range got {
			s := "<nil>"
			if g != nil {
				s = *g
			}
			if s != tc.want[i] {
				t.Errorf("%s: element %d is %q, want %q", tc.in, i, s, tc.want[i])
			}
		}
	}
	for _, bad := range []string{"", "{", "{{1}}", `{"a}`, "1,2"} {
		if _, err := ParseArray(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestDecimalTypmod(t *testing.T) {
	for _, tc := range []struct {
		in         string
		prec, sc   int32
		want       string
		overflowed bool
	}{
		{in: "12.345", prec: 12, sc: 2, want: "12.35"},
		{in: "-12.345", prec: 12, sc: 2, want: "-12.35"},
		{in: "12", prec: 12, sc: 2, want: "12.00"},
		{in: "0.004", prec: 3, sc: 2, want: "0.00"},
		{in: "999.995", prec: 5, sc: 2, overflowed: true},
		{in: "99.994", prec: 4, sc: 2, want: "99.99"},
		{in: "123", prec: 2, sc: 0, overflowed: true},
		{in: "NaN", prec: 4, sc: 2, want: "NaN"},
		{in: "Infinity", prec: 4, sc: 2, overflowed: true},
	} {
		d, err := ParseDecimal(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.Typmod(tc.prec, tc.sc)
		if tc.overflowed != (err != nil) || err == nil && got.String() != tc.want {
			t.Errorf("numeric(%d, %d) of %s = %v, %v; want %s (overflow %v)", tc.prec, tc.sc, tc.in, got, err, tc.want, tc.overflowed)
		}
	}
}
