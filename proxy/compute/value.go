// Typed values: from and to the payloads that colcrypt encrypts, and from
// the text the server sends for plaintext columns.

package compute

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// Value is one SQL value of a plain type.
type Value struct {
	Type  colcrypt.Type
	Null  bool
	Int   int64   // int4, int8, date (days), timestamptz (µs), bool (0, 1)
	Float float64 // float8
	Num   Decimal // numeric
	Str   string  // text, bytea (the bytes)
}

// Error is a computation's failure, with PostgreSQL's SQLSTATE for it.
type Error struct {
	Code    string
	Message string
	Hint    string
}

func (e *Error) Error() string { return e.Message }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Null returns the NULL of type t.
func Null(t colcrypt.Type) Value { return Value{Type: t, Null: true} }

// Int returns an int8 (or, with t Int4, an int4) value.
func Int(t colcrypt.Type, i int64) Value { return Value{Type: t, Int: i} }

// FromPayload reads a decrypted payload of type t.
func FromPayload(t colcrypt.Type, p []byte) (Value, error) {
	if m := t.PayloadSize(); m > 0 && len(p) != m {
		return Value{}, fmt.Errorf("compute: %s payload of %d bytes, want %d", t, len(p), m)
	}
	v := Value{Type: t}
	switch t {
	case colcrypt.Int4, colcrypt.Date:
		v.Int = int64(int32(binary.BigEndian.Uint32(p)))
	case colcrypt.Int8, colcrypt.Timestamptz:
		v.Int = int64(binary.BigEndian.Uint64(p))
	case colcrypt.Float8:
		v.Float = math.Float64frombits(binary.BigEndian.Uint64(p))
	case colcrypt.Bool:
		v.Int = int64(p[0])
	case colcrypt.Numeric:
		d, err := ParseDecimal(string(p))
		if err != nil {
			return Value{}, err
		}
		v.Num = d
	case colcrypt.Text, colcrypt.Bytea:
		v.Str = string(p)
	default:
		return Value{}, fmt.Errorf("compute: unknown type %d", t)
	}
	return v, nil
}

// Payload is the payload of a non-NULL value, as colcrypt encrypts it.
func (v Value) Payload() []byte {
	switch v.Type {
	case colcrypt.Int4, colcrypt.Date:
		return binary.BigEndian.AppendUint32(nil, uint32(int32(v.Int)))
	case colcrypt.Int8, colcrypt.Timestamptz:
		return binary.BigEndian.AppendUint64(nil, uint64(v.Int))
	case colcrypt.Float8:
		return binary.BigEndian.AppendUint64(nil, math.Float64bits(v.Float))
	case colcrypt.Bool:
		return []byte{byte(v.Int)}
	case colcrypt.Numeric:
		return []byte(v.Num.String())
	}
	return []byte(v.Str)
}

// Text is the value's text form, as the type's output function writes it.
func (v Value) Text() (string, error) {
	if v.Type == colcrypt.Numeric {
		return v.Num.String(), nil
	}
	return colcrypt.Decode(v.Type, v.Payload())
}

// FromText reads the text form of a value of type t.
func FromText(t colcrypt.Type, s string) (Value, error) {
	if t == colcrypt.Numeric {
		d, err := ParseDecimal(s)
		return Value{Type: t, Num: d}, err
	}
	p, err := colcrypt.Encode(t, s)
	if err != nil {
		return Value{}, err
	}
	return FromPayload(t, p)
}

// Compare orders two non-NULL values of one type as PostgreSQL's btree
// operators do (text in C collation: byte order, as ORD columns sort).
func Compare(a, b Value) int {
	switch a.Type {
	case colcrypt.Float8:
		// NaN above everything, as float8_cmp_internal
		an, bn := math.IsNaN(a.Float), math.IsNaN(b.Float)
		switch {
		case an && bn:
			return 0
		case an:
			return 1
		case bn:
			return -1
		case a.Float < b.Float:
			return -1
		case a.Float > b.Float:
			return 1
		}
		return 0
	case colcrypt.Numeric:
		return a.Num.Cmp(b.Num)
	case colcrypt.Text, colcrypt.Bytea:
		return bytes.Compare([]byte(a.Str), []byte(b.Str))
	}
	switch {
	case a.Int < b.Int:
		return -1
	case a.Int > b.Int:
		return 1
	}
	return 0
}

// Cast converts v to type t as PostgreSQL's casts between these types do.
func Cast(v Value, t colcrypt.Type) (Value, error) {
	if v.Type == t || v.Null {
		v.Type = t
		return v, nil
	}
	switch t {
	case colcrypt.Int4, colcrypt.Int8:
		var i int64
		switch v.Type {
		case colcrypt.Int4, colcrypt.Int8:
			i = v.Int
		case colcrypt.Float8:
			if math.IsNaN(v.Float) || math.IsInf(v.Float, 0) || math.Abs(v.Float) >= 9.223372036854775807e18 {
				return Value{}, outOfRange(t)
			}
			i = int64(math.RoundToEven(v.Float))
		case colcrypt.Numeric:
			var ok bool
			if i, ok = v.Num.Int64(); !ok {
				if v.Num.Special == nan {
					return Value{}, errorf("0A000", "cannot convert NaN to %s", sqlName(t))
				}
				return Value{}, outOfRange(t)
			}
		case colcrypt.Text:
			n, err := strconv.ParseInt(strings.TrimSpace(v.Str), 10, 64)
			if err != nil {
				return Value{}, errorf("22P02", "invalid input syntax for type %s: %q", sqlName(t), v.Str)
			}
			i = n
		case colcrypt.Bool:
			if t == colcrypt.Int8 {
				return Value{}, noCast(v.Type, t)
			}
			i = v.Int
		default:
			return Value{}, noCast(v.Type, t)
		}
		if t == colcrypt.Int4 && (i > math.MaxInt32 || i < math.MinInt32) {
			return Value{}, outOfRange(t)
		}
		return Value{Type: t, Int: i}, nil
	case colcrypt.Float8:
		switch v.Type {
		case colcrypt.Int4, colcrypt.Int8:
			return Value{Type: t, Float: float64(v.Int)}, nil
		case colcrypt.Numeric:
			return Value{Type: t, Float: v.Num.Float64()}, nil
		case colcrypt.Text:
			return FromText(t, v.Str)
		}
	case colcrypt.Numeric:
		switch v.Type {
		case colcrypt.Int4, colcrypt.Int8:
			return Value{Type: t, Num: DecimalFromInt(v.Int)}, nil
		case colcrypt.Float8:
			d, err := ParseDecimal(colcrypt.FormatFloat8(v.Float))
			return Value{Type: t, Num: d}, err
		case colcrypt.Text:
			return FromText(t, v.Str)
		}
	case colcrypt.Text:
		if v.Type == colcrypt.Bool { // booltext, not boolout
			return Value{Type: t, Str: map[bool]string{true: "true", false: "false"}[v.Int != 0]}, nil
		}
		s, err := v.Text()
		return Value{Type: t, Str: s}, err
	default:
		if v.Type == colcrypt.Text {
			return FromText(t, v.Str)
		}
	}
	return Value{}, noCast(v.Type, t)
}

func noCast(from, to colcrypt.Type) *Error {
	return errorf("42846", "cannot cast type %s to %s", sqlName(from), sqlName(to))
}

func outOfRange(t colcrypt.Type) *Error {
	if t == colcrypt.Int4 {
		return errorf("22003", "integer out of range")
	}
	if t == colcrypt.Float8 {
		return errorf("22003", "value out of range: overflow")
	}
	return errorf("22003", "bigint out of range")
}

// sqlName is the type's name in PostgreSQL's messages.
func sqlName(t colcrypt.Type) string {
	switch t {
	case colcrypt.Int4:
		return "integer"
	case colcrypt.Int8:
		return "bigint"
	case colcrypt.Float8:
		return "double precision"
	case colcrypt.Timestamptz:
		return "timestamp with time zone"
	case colcrypt.Bool:
		return "boolean"
	}
	return t.String()
}
