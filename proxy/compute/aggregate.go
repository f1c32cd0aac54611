// Aggregates over the decrypted values the server collected for a group
// (array_agg of the column): sum, avg, count, min and max with
// PostgreSQL's result types.

package compute

import (
	"fmt"
	"math"
	"sort"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// Agg is an aggregate over the elements of array inputs: Arg is
// evaluated once per element (nil: count(*), whose count is Count's).
type Agg struct {
	Fn   string // sum, avg, count, min, max
	Arg  Expr
	Over int // an array input whose length is the group's row count
	T    colcrypt.Type
	// Distinct: fn(DISTINCT arg), over the distinct non-NULL values
	Distinct bool
}

// NewAgg types fn(arg); over is an array input of the group.
func NewAgg(fn string, arg Expr, over int) (Expr, error) {
	e := &Agg{Fn: fn, Arg: arg, Over: over}
	var at colcrypt.Type
	if arg != nil {
		at = arg.Type()
	}
	switch fn {
	case "count":
		e.T = colcrypt.Int8
	case "sum":
		switch at {
		case colcrypt.Int4:
			e.T = colcrypt.Int8
		case colcrypt.Int8, colcrypt.Numeric:
			e.T = colcrypt.Numeric
		case colcrypt.Float8:
			e.T = colcrypt.Float8
		}
	case "avg":
		switch at {
		case colcrypt.Int4, colcrypt.Int8, colcrypt.Numeric:
			e.T = colcrypt.Numeric
		case colcrypt.Float8:
			e.T = colcrypt.Float8
		}
	case "min", "max":
		if arg != nil && at != colcrypt.Bool && at != colcrypt.Bytea { // PostgreSQL has neither
			e.T = at
		}
	}
	if e.T == 0 || arg == nil && fn != "count" {
		return nil, unsupported("%s(%s)", fn, at)
	}
	return e, nil
}

func (e *Agg) Type() colcrypt.Type { return e.T }

func (e *Agg) Eval(env *Env) (Value, error) {
	if env.inAgg {
		return Value{}, fmt.Errorf("compute: aggregate inside an aggregate")
	}
	if e.Over >= len(env.Arrays) {
		return Value{}, fmt.Errorf("compute: no array input %d", e.Over)
	}
	n := len(env.Arrays[e.Over])
	env.inAgg = true
	defer func() { env.inAgg = false }()
	var (
		count int64
		acc   Value
		have  bool
		vals  []Value // DISTINCT: the values, aggregated once sorted
	)
	add := func(v Value) (err error) {
		count++
		if !have {
			acc, have = start(e.Fn, v), true
			return nil
		}
		acc, err = step(e.Fn, acc, v)
		return err
	}
	for env.elem = 0; env.elem < n; env.elem++ {
		if e.Arg == nil {
			count++
			continue
		}
		v, err := e.Arg.Eval(env)
		if err != nil {
			return Value{}, err
		}
		switch {
		case v.Null:
		case e.Distinct:
			vals = append(vals, v)
		default:
			if err := add(v); err != nil {
				return Value{}, err
			}
		}
	}
	for _, v := range distinct(vals) {
		if err := add(v); err != nil {
			return Value{}, err
		}
	}
	switch e.Fn {
	case "count":
		return Value{Type: colcrypt.Int8, Int: count}, nil
	case "avg":
		if !have {
			return Null(e.T), nil
		}
		if e.T == colcrypt.Float8 {
			return Value{Type: e.T, Float: acc.Float / float64(count)}, nil
		}
		d, err := acc.Num.Div(DecimalFromInt(count))
		return Value{Type: e.T, Num: d}, err
	}
	if !have {
		return Null(e.T), nil
	}
	return acc, nil
}

// distinct sorts vals and keeps one of each run of equal values.
func distinct(vals []Value) []Value {
	sort.SliceStable(vals, func(i, j int) bool { return Compare(vals[i], vals[j]) < 0 })
	out := vals[:0]
	for i, v := range vals {
		if i == 0 || Compare(v, out[len(out)-1]) != 0 {
			out = append(out, v)
		}
	}
	return out
}

// start is the state after the first non-NULL value.
func start(fn string, v Value) Value {
	switch fn {
	case "sum", "avg":
		switch v.Type {
		case colcrypt.Int4:
			if fn == "sum" {
				return Value{Type: colcrypt.Int8, Int: v.Int}
			}
			return Value{Type: colcrypt.Numeric, Num: DecimalFromInt(v.Int)}
		case colcrypt.Int8:
			return Value{Type: colcrypt.Numeric, Num: DecimalFromInt(v.Int)}
		}
	}
	return v
}

func step(fn string, acc, v Value) (Value, error) {
	switch fn {
	case "min":
		if Compare(v, acc) < 0 {
			return v, nil
		}
		return acc, nil
	case "max":
		if Compare(v, acc) > 0 {
			return v, nil
		}
		return acc, nil
	}
	// sum, avg
	switch acc.Type {
	case colcrypt.Int8: // sum(int4)
		r := acc.Int + v.Int
		if (r > acc.Int) != (v.Int > 0) && v.Int != 0 {
			return Value{}, outOfRange(colcrypt.Int8)
		}
		acc.Int = r
	case colcrypt.Numeric:
		x := v.Num
		if v.Type != colcrypt.Numeric {
			x = DecimalFromInt(v.Int)
		}
		acc.Num = acc.Num.Add(x)
	case colcrypt.Float8:
		r := acc.Float + v.Float
		if math.IsInf(r, 0) && !math.IsInf(acc.Float, 0) && !math.IsInf(v.Float, 0) {
			return Value{}, outOfRange(colcrypt.Float8)
		}
		acc.Float = r
	}
	return acc, nil
}
