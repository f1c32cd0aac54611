// Parameter values in, result values out.

package values

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// OIDs of PostgreSQL's built-in types used here.
const (
	oidBool        = 16
	oidBytea       = 17
	oidName        = 19
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidFloat4      = 700
	oidFloat8      = 701
	oidUnknown     = 705
	oidBpchar      = 1042
	oidVarchar     = 1043
	oidDate        = 1082
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidNumeric     = 1700
)

// ErrFormat: a binary value of a type the proxy cannot read.
var ErrFormat = errors.New("values: cannot read this binary value")

// plainTypes: each plaintext type's OID, its array type's OID and its
// length (-1: variable), the one table of them.
var plainTypes = map[colcrypt.Type]struct {
	oid, array uint32
	len        int16
}{
	colcrypt.Int4:        {oidInt4, 1007, 4},
	colcrypt.Int8:        {oidInt8, 1016, 8},
	colcrypt.Float8:      {oidFloat8, 1022, 8},
	colcrypt.Numeric:     {oidNumeric, 1231, -1},
	colcrypt.Text:        {oidText, 1009, -1},
	colcrypt.Bytea:       {oidBytea, 1001, -1},
	colcrypt.Date:        {oidDate, 1182, 4},
	colcrypt.Timestamptz: {oidTimestamptz, 1185, 8},
	colcrypt.Bool:        {oidBool, 1000, 1},
}

// PlainOID is the OID of the plaintext type of t (0: none).
func PlainOID(t colcrypt.Type) uint32 { return plainTypes[t].oid }

// PlainArrayOID is the OID of the array of the plaintext type of t.
func PlainArrayOID(t colcrypt.Type) uint32 { return plainTypes[t].array }

// PlainType maps the OID of a plaintext column to the type whose values
// the proxy computes with (the inverse of PlainOID, plus int2, float4,
// varchar, bpchar and name) (false: not one it computes with).
func PlainType(oid uint32) (colcrypt.Type, bool) {
	switch oid {
	case oidInt2, oidInt4:
		return colcrypt.Int4, true
	case oidInt8:
		return colcrypt.Int8, true
	case oidFloat4, oidFloat8:
		return colcrypt.Float8, true
	case oidNumeric:
		return colcrypt.Numeric, true
	case oidText, oidVarchar, oidBpchar, oidName:
		return colcrypt.Text, true
	case oidBytea:
		return colcrypt.Bytea, true
	case oidDate:
		return colcrypt.Date, true
	case oidTimestamptz:
		return colcrypt.Timestamptz, true
	case oidBool:
		return colcrypt.Bool, true
	}
	return 0, false
}

// PlainLen is pg_type.typlen of the plaintext type of t (-1: varlena).
func PlainLen(t colcrypt.Type) int16 {
	if p, ok := plainTypes[t]; ok {
		return p.len
	}
	return -1
}

// Payload turns a parameter value, sent by the client in format (0 text,
// 1 binary) as type oid (0: the column's plain type), into the payload of
// column type t.
func Payload(t colcrypt.Type, oid uint32, format int16, v []byte) ([]byte, error) {
	if oid == 0 || oid == oidUnknown {
		oid = PlainOID(t)
	}
	if format == 0 {
		return Encode(t, string(v))
	}
	if t == colcrypt.Timestamptz && oid == oidTimestamp {
		oid = oidTimestamptz // the same 8 bytes of µs (taken as UTC)
	}
	if oid == PlainOID(t) && t != colcrypt.Numeric {
		if m := t.PayloadSize(); m > 0 && len(v) != m {
			return nil, fmt.Errorf("values: binary %s of %d bytes, want %d", t, len(v), m)
		}
		if t == colcrypt.Bool && v[0] > 1 {
			return nil, fmt.Errorf("values: binary bool %d", v[0])
		}
		return v, nil
	}
	s, err := BinaryText(oid, v)
	if err != nil {
		return nil, err
	}
	return Encode(t, s)
}

// Encode is colcrypt.Encode with what PostgreSQL's input functions
// accept beyond it: a date followed by a time or zone, which date_in
// ignores (pgJDBC's setDate sends '2024-02-08 +00').
func Encode(t colcrypt.Type, s string) ([]byte, error) {
	p, err := colcrypt.Encode(t, s)
	if err != nil && t == colcrypt.Date {
		if d, _, ok := strings.Cut(strings.TrimSpace(s), " "); ok {
			if p2, err2 := colcrypt.Encode(t, d); err2 == nil {
				return p2, nil
			}
		}
	}
	return p, err
}

// BinaryText returns the text form of a binary value of type oid.
func BinaryText(oid uint32, v []byte) (string, error) {
	need := func(n int) error {
		if len(v) != n {
			return fmt.Errorf("values: binary value of type %d has %d bytes, want %d", oid, len(v), n)
		}
		return nil
	}
	switch oid {
	case oidBool:
		if err := need(1); err != nil {
			return "", err
		}
		if v[0] != 0 {
			return "t", nil
		}
		return "f", nil
	case oidInt2:
		if err := need(2); err != nil {
			return "", err
		}
		return strconv.FormatInt(int64(int16(binary.BigEndian.Uint16(v))), 10), nil
	case oidInt4:
		if err := need(4); err != nil {
			return "", err
		}
		return strconv.FormatInt(int64(int32(binary.BigEndian.Uint32(v))), 10), nil
	case oidInt8:
		if err := need(8); err != nil {
			return "", err
		}
		return strconv.FormatInt(int64(binary.BigEndian.Uint64(v)), 10), nil
	case oidFloat4:
		if err := need(4); err != nil {
			return "", err
		}
		return colcrypt.FormatFloat8(float64(math.Float32frombits(binary.BigEndian.Uint32(v)))), nil
	case oidFloat8:
		if err := need(8); err != nil {
			return "", err
		}
		return colcrypt.FormatFloat8(math.Float64frombits(binary.BigEndian.Uint64(v))), nil
	case oidText, oidVarchar, oidBpchar, oidName, oidUnknown:
		return string(v), nil
	case oidBytea:
		return `\x` + fmt.Sprintf("%x", v), nil
	case oidNumeric:
		var n pgtype.Numeric
		if err := typeMap.Scan(oidNumeric, 1, v, &n); err != nil {
			return "", fmt.Errorf("values: binary numeric: %w", err)
		}
		return numericText(n)
	case oidDate:
		var d pgtype.Date
		if err := typeMap.Scan(oidDate, 1, v, &d); err != nil {
			return "", fmt.Errorf("values: binary date: %w", err)
		}
		switch d.InfinityModifier {
		case pgtype.Infinity:
			return "infinity", nil
		case pgtype.NegativeInfinity:
			return "-infinity", nil
		}
		return d.Time.Format("2006-01-02"), nil
	case oidTimestamp, oidTimestamptz:
		if err := need(8); err != nil {
			return "", err
		}
		us := int64(binary.BigEndian.Uint64(v))
		switch us {
		case math.MaxInt64:
			return "infinity", nil
		case math.MinInt64:
			return "-infinity", nil
		}
		// days and the rest apart: time.Duration spans only ±292 years
		days, rem := us/86400e6, us%86400e6
		if rem < 0 {
			days, rem = days-1, rem+86400e6
		}
		t := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(days)).Add(time.Duration(rem) * time.Microsecond)
		return t.Format("2006-01-02 15:04:05.999999") + "+00", nil
	}
	return "", fmt.Errorf("%w (type OID %d)", ErrFormat, oid)
}

var typeMap = pgtype.NewMap()

func numericText(n pgtype.Numeric) (string, error) {
	v, err := n.Value()
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", errors.New("values: numeric without a text form")
	}
	return s, nil
}

// Result turns a decrypted payload of type t into the client's format
// (0 text, 1 binary of the plain type), appending to buf.
func Result(buf []byte, t colcrypt.Type, payload []byte, format int16) ([]byte, error) {
	if format == 0 {
		if t == colcrypt.Numeric {
			s, err := NumericText(string(payload))
			if err != nil {
				return nil, err
			}
			return append(buf, s...), nil
		}
		s, err := colcrypt.Decode(t, payload)
		if err != nil {
			return nil, err
		}
		return append(buf, s...), nil
	}
	if t != colcrypt.Numeric {
		return append(buf, payload...), nil
	}
	return numericSend(buf, string(payload))
}

// NumericText writes a numeric as numeric_out does: no exponent, the
// digits after the point that the value was given with.
func NumericText(s string) (string, error) {
	n, err := scanNumeric(s)
	if err != nil {
		return "", err
	}
	switch {
	case n.NaN:
		return "NaN", nil
	case n.InfinityModifier == pgtype.Infinity:
		return "Infinity", nil
	case n.InfinityModifier == pgtype.NegativeInfinity:
		return "-Infinity", nil
	}
	digits, sign := n.Int.String(), ""
	if strings.HasPrefix(digits, "-") {
		sign, digits = "-", digits[1:]
	}
	if n.Exp >= 0 {
		digits += strings.Repeat("0", int(n.Exp))
		if strings.Trim(digits, "0") == "" {
			sign = ""
		}
		return sign + strings.TrimLeft(digits[:len(digits)-1], "0") + digits[len(digits)-1:], nil
	}
	scale := int(-n.Exp)
	if len(digits) <= scale {
		digits = strings.Repeat("0", scale-len(digits)+1) + digits
	}
	if strings.Trim(digits, "0") == "" {
		sign = ""
	}
	return sign + digits[:len(digits)-scale] + "." + digits[len(digits)-scale:], nil
}

// scanNumeric reads a numeric's text form: special values in any case,
// exponents, spaces around.
func scanNumeric(s string) (pgtype.Numeric, error) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case "nan":
		return pgtype.Numeric{NaN: true, Valid: true}, nil
	case "infinity", "+infinity", "inf", "+inf":
		return pgtype.Numeric{InfinityModifier: pgtype.Infinity, Valid: true}, nil
	case "-infinity", "-inf":
		return pgtype.Numeric{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, nil
	}
	d, ok := colcrypt.ScanDecimal(t)
	if !ok {
		return pgtype.Numeric{}, fmt.Errorf("values: numeric %q: invalid syntax", s)
	}
	coef, _ := new(big.Int).SetString(d.Digits, 10)
	if d.Neg {
		coef.Neg(coef)
	}
	return pgtype.Numeric{Int: coef, Exp: int32(-d.Scale()), Valid: true}, nil
}

// numericSend writes numeric's binary form as numeric_send does: base
// 10000 digits with leading and trailing zero digits stripped, the
// weight of the first, the sign, and the display scale of the text.
func numericSend(buf []byte, s string) ([]byte, error) {
	head := func(ndigits int, weight int16, sign uint16, dscale uint16) []byte {
		buf = binary.BigEndian.AppendUint16(buf, uint16(ndigits))
		buf = binary.BigEndian.AppendUint16(buf, uint16(weight))
		buf = binary.BigEndian.AppendUint16(buf, sign)
		return binary.BigEndian.AppendUint16(buf, dscale)
	}
	n, err := scanNumeric(s)
	if err != nil {
		return nil, err
	}
	switch {
	case n.NaN:
		return head(0, 0, 0xC000, 0), nil
	case n.InfinityModifier == pgtype.Infinity:
		return head(0, 0, 0xD000, 32), nil // numeric_send's scale of infinities
	case n.InfinityModifier == pgtype.NegativeInfinity:
		return head(0, 0, 0xF000, 32), nil
	}
	sign := uint16(0)
	digits := n.Int.String()
	if strings.HasPrefix(digits, "-") {
		sign, digits = 0x4000, digits[1:]
	}
	exp := int(n.Exp)
	dscale := 0
	if exp < 0 {
		dscale = -exp
	} else {
		digits += strings.Repeat("0", exp)
		exp = 0
	}
	// split at the decimal point and pad both sides to whole groups of 4
	point := len(digits) - dscale
	if point < 0 {
		digits = strings.Repeat("0", -point) + digits
		point = 0
	}
	intPart, frac := digits[:point], digits[point:]
	intPart = strings.Repeat("0", (4-len(intPart)%4)%4) + intPart
	frac += strings.Repeat("0", (4-len(frac)%4)%4)
	all := intPart + frac
	groups := make([]uint16, 0, len(all)/4)
	for i := 0; i < len(all); i += 4 {
		v, _ := strconv.Atoi(all[i : i+4])
		groups = append(groups, uint16(v))
	}
	weight := len(intPart)/4 - 1
	for len(groups) > 0 && groups[0] == 0 {
		groups, weight = groups[1:], weight-1
	}
	for len(groups) > 0 && groups[len(groups)-1] == 0 {
		groups = groups[:len(groups)-1]
	}
	if len(groups) == 0 {
		weight, sign = 0, 0
	}
	buf = head(len(groups), int16(weight), sign, uint16(dscale))
	for _, g := range groups {
		buf = binary.BigEndian.AppendUint16(buf, g)
	}
	return buf, nil
}
