// Plaintext encodings (design 13.3, "Plaintext encodings"): PostgreSQL's
// text form of each plain type to and from the payload, and the payload to
// the canonical equality-token input and to the ORE order input.

package colcrypt

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// pgSpace is what PostgreSQL's input functions skip around a value (isspace).
const pgSpace = " \t\n\r\v\f"

// Sentinels of date and timestamptz, as PostgreSQL stores ±infinity.
const (
	dateNegInf = math.MinInt32
	datePosInf = math.MaxInt32
	tsNegInf   = math.MinInt64
	tsPosInf   = math.MaxInt64
)

// pgEpoch is PostgreSQL's epoch of date and timestamptz.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// canonicalNaN is the one NaN of float8 token and order inputs.
const canonicalNaN = 0x7FF8000000000000

// Encode parses s, the PostgreSQL text form of a value of type t, and
// returns the payload (the bytes that AES-GCM encrypts).
func Encode(t Type, s string) ([]byte, error) {
	var (
		b   []byte
		err error
	)
	switch t {
	case Int4:
		var v int64
		v, err = strconv.ParseInt(strings.Trim(s, pgSpace), 10, 32)
		b = binary.BigEndian.AppendUint32(nil, uint32(int32(v)))
	case Int8:
		var v int64
		v, err = strconv.ParseInt(strings.Trim(s, pgSpace), 10, 64)
		b = binary.BigEndian.AppendUint64(nil, uint64(v))
	case Float8:
		var v float64
		v, err = parseFloat8(strings.Trim(s, pgSpace))
		bits := math.Float64bits(v)
		if v != v {
			bits = canonicalNaN
		}
		b = binary.BigEndian.AppendUint64(nil, bits)
	case Numeric:
		s = strings.Trim(s, pgSpace)
		_, err = parseNumeric(s)
		b = []byte(s)
	case Text:
		b = []byte(s)
	case Bytea:
		b, err = parseBytea(s)
	case Date:
		var v int32
		v, err = parseDate(strings.Trim(s, pgSpace))
		b = binary.BigEndian.AppendUint32(nil, uint32(v))
	case Timestamptz:
		var v int64
		v, err = parseTimestamptz(strings.Trim(s, pgSpace))
		b = binary.BigEndian.AppendUint64(nil, uint64(v))
	case Bool:
		var v bool
		v, err = parseBool(strings.Trim(s, pgSpace))
		b = []byte{0}
		if v {
			b[0] = 1
		}
	default:
		return nil, fmt.Errorf("colcrypt: unknown type %d", t)
	}
	if err != nil {
		return nil, fmt.Errorf("colcrypt: invalid input for %s %q: %w", t, s, err)
	}
	return b, nil
}

// Decode returns the PostgreSQL text form of a payload of type t.
func Decode(t Type, p []byte) (string, error) {
	if m := t.PayloadSize(); m > 0 && len(p) != m {
		return "", fmt.Errorf("colcrypt: %s payload of %d bytes, want %d", t, len(p), m)
	}
	switch t {
	case Int4:
		return strconv.FormatInt(int64(int32(binary.BigEndian.Uint32(p))), 10), nil
	case Int8:
		return strconv.FormatInt(int64(binary.BigEndian.Uint64(p)), 10), nil
	case Float8:
		return FormatFloat8(math.Float64frombits(binary.BigEndian.Uint64(p))), nil
	case Numeric:
		if _, err := parseNumeric(string(p)); err != nil {
			return "", fmt.Errorf("colcrypt: numeric payload %q: %w", p, err)
		}
		return string(p), nil
	case Text:
		return string(p), nil
	case Bytea:
		return `\x` + hex.EncodeToString(p), nil
	case Date:
		return formatDate(int32(binary.BigEndian.Uint32(p)))
	case Timestamptz:
		return formatTimestamptz(int64(binary.BigEndian.Uint64(p)))
	case Bool:
		switch p[0] {
		case 0:
			return "f", nil
		case 1:
			return "t", nil
		}
		return "", fmt.Errorf("colcrypt: bool payload %d, want 0 or 1", p[0])
	}
	return "", fmt.Errorf("colcrypt: unknown type %d", t)
}

// TokenInput returns the canonical input of the equality token: equal
// values of the type give equal inputs (float8 -0 = 0 and one NaN;
// numeric 1.0 = 1.00).
func TokenInput(t Type, p []byte) ([]byte, error) {
	if m := t.PayloadSize(); m > 0 && len(p) != m {
		return nil, fmt.Errorf("colcrypt: %s payload of %d bytes, want %d", t, len(p), m)
	}
	switch t {
	case Float8:
		return binary.BigEndian.AppendUint64(nil, canonicalFloat8(p)), nil
	case Numeric:
		n, err := parseNumeric(string(p))
		if err != nil {
			return nil, fmt.Errorf("colcrypt: numeric payload %q: %w", p, err)
		}
		return []byte(n.canonical()), nil
	}
	if !t.Valid() {
		return nil, fmt.Errorf("colcrypt: unknown type %d", t)
	}
	return bytes.Clone(p), nil
}

// OrderInput returns the ORE order input (t.OrderInputSize() bytes) whose
// byte order is PostgreSQL's order of the values, exact except for the
// prefixes of text, bytea and numeric (design 13.3).
func OrderInput(t Type, p []byte) ([]byte, error) {
	if m := t.PayloadSize(); m > 0 && len(p) != m {
		return nil, fmt.Errorf("colcrypt: %s payload of %d bytes, want %d", t, len(p), m)
	}
	switch t {
	case Int4, Int8, Date, Timestamptz:
		o := bytes.Clone(p)
		o[0] ^= 0x80 // two's complement to offset binary
		return o, nil
	case Float8:
		bits := canonicalFloat8(p)
		if bits>>63 == 1 {
			bits = ^bits
		} else {
			bits |= 1 << 63
		}
		return binary.BigEndian.AppendUint64(nil, bits), nil
	case Bool:
		return bytes.Clone(p), nil
	case Numeric:
		n, err := parseNumeric(string(p))
		if err != nil {
			return nil, fmt.Errorf("colcrypt: numeric payload %q: %w", p, err)
		}
		return n.orderKey(), nil
	case Text, Bytea:
		o := make([]byte, 16)
		copy(o, p)
		return o, nil
	}
	return nil, fmt.Errorf("colcrypt: unknown type %d", t)
}

// canonicalFloat8 maps -0 to +0 and every NaN to one NaN.
func canonicalFloat8(p []byte) uint64 {
	bits := binary.BigEndian.Uint64(p)
	f := math.Float64frombits(bits)
	switch {
	case f != f:
		return canonicalNaN
	case f == 0:
		return 0
	}
	return bits
}

var (
	errSyntax = errors.New("invalid syntax")
	errRange  = errors.New("out of range")
)

// parseFloat8 accepts what float8in accepts: a decimal number with an
// optional exponent, NaN, [+-]Infinity and [+-]inf, case-insensitive.
// Overflow and underflow to zero are errors, as in PostgreSQL.
func parseFloat8(s string) (float64, error) {
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 {
		return 0, errSyntax
	}
	switch strings.ToLower(body) {
	case "nan":
		if body != s {
			return 0, errSyntax
		}
		return math.NaN(), nil
	case "inf", "infinity":
		if s[0] == '-' {
			return math.Inf(-1), nil
		}
		return math.Inf(1), nil
	}
	d, ok := scanDecimal(body)
	if !ok {
		return 0, errSyntax
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, errRange
		}
		return 0, errSyntax
	}
	if v == 0 && strings.Trim(d.Digits, "0") != "" {
		return 0, errRange // underflow
	}
	return v, nil
}

// FormatFloat8 writes f as PostgreSQL 12+ does with the default
// extra_float_digits: the shortest digits that read back as f, in
// exponential form ("1e+20", "1.5e-05") when the decimal exponent is
// below -4 or at least 15, else in plain decimal.
func FormatFloat8(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0"
		}
		return "0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 15 {
		return e
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// Decimal is the syntax of a finite number, the one reading of numeric
// input in the proxy (package values and compute take it from here):
// Digits (the integer and fraction digits together), Point (how many of
// them precede the decimal point) and the explicit exponent.
type Decimal struct {
	Neg    bool
	Digits string
	Point  int
	Exp    int
}

// Scale is the number of digits after the point once the exponent is
// applied (negative: zeros to append).
func (d Decimal) Scale() int { return len(d.Digits) - d.Point - d.Exp }

// ScanDecimal scans [+-]digits[.digits][e[+-]digits] (digits on at least
// one side of the point).
func ScanDecimal(s string) (Decimal, bool) { return scanDecimal(s) }

// scanDecimal is ScanDecimal.
func scanDecimal(s string) (Decimal, bool) {
	var d Decimal
	if s != "" && (s[0] == '+' || s[0] == '-') {
		d.Neg = s[0] == '-'
		s = s[1:]
	}
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intPart := s[:i]
	s = s[i:]
	frac := ""
	if s != "" && s[0] == '.' {
		s = s[1:]
		i = 0
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		frac = s[:i]
		s = s[i:]
	}
	if intPart == "" && frac == "" {
		return d, false
	}
	d.Digits = intPart + frac
	d.Point = len(intPart)
	if s != "" {
		if s[0] != 'e' && s[0] != 'E' {
			return d, false
		}
		e, err := strconv.Atoi(s[1:]) // base 10: sign and digits only
		if err != nil {
			return d, false
		}
		d.Exp = e
	}
	return d, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// numericClass is byte 0 of the numeric order key, in PostgreSQL's order.
type numericClass byte

const (
	numNegInf numericClass = iota
	numNeg
	numZero
	numPos
	numPosInf
	numNaN
)

// number is a parsed numeric: for a nonzero finite value,
// 0.digits × 10^exp with digits[0] != '0' and no trailing zeros.
type number struct {
	class  numericClass
	digits string
	exp    int
}

// orderExpBias is the bias of the order key's 24-bit exponent.
const orderExpBias = 1 << 23

// parseNumeric parses numeric's text form: a decimal number, NaN,
// [+-]Infinity or [+-]inf, case-insensitive; the string must already be
// trimmed.
func parseNumeric(s string) (number, error) {
	switch strings.ToLower(s) {
	case "nan":
		return number{class: numNaN}, nil
	case "infinity", "+infinity", "inf", "+inf":
		return number{class: numPosInf}, nil
	case "-infinity", "-inf":
		return number{class: numNegInf}, nil
	}
	d, ok := scanDecimal(s)
	if !ok || d.Exp < -1000 || d.Exp > 1000 { // PostgreSQL's limit
		return number{}, errSyntax
	}
	digits := d.Digits
	point := d.Point + d.Exp
	lead := len(digits) - len(strings.TrimLeft(digits, "0"))
	digits = strings.TrimRight(digits[lead:], "0")
	point -= lead
	if digits == "" {
		return number{class: numZero}, nil
	}
	if point < -orderExpBias || point >= orderExpBias {
		return number{}, errRange
	}
	n := number{class: numPos, digits: digits, exp: point}
	if d.Neg {
		n.class = numNeg
	}
	return n, nil
}

// canonical is the token input of a numeric: plain decimal without an
// exponent, leading zeros (other than the "0" before a point) or trailing
// fractional zeros; 0, NaN, Infinity, -Infinity.
func (n number) canonical() string {
	switch n.class {
	case numNaN:
		return "NaN"
	case numPosInf:
		return "Infinity"
	case numNegInf:
		return "-Infinity"
	case numZero:
		return "0"
	}
	var b strings.Builder
	if n.class == numNeg {
		b.WriteByte('-')
	}
	switch {
	case n.exp <= 0:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -n.exp))
		b.WriteString(n.digits)
	case n.exp >= len(n.digits):
		b.WriteString(n.digits)
		b.WriteString(strings.Repeat("0", n.exp-len(n.digits)))
	default:
		b.WriteString(n.digits[:n.exp])
		b.WriteByte('.')
		b.WriteString(n.digits[n.exp:])
	}
	return b.String()
}

// orderKey is the 16-byte numeric order key of design 13.3: class, then
// for nonzero finite values exp + 2²³ in 3 bytes and the first 24 digits
// as nibbles, all inverted for negative values.
func (n number) orderKey() []byte {
	k := make([]byte, 16)
	k[0] = byte(n.class)
	if n.class != numPos && n.class != numNeg {
		return k
	}
	e := uint32(n.exp + orderExpBias)
	k[1], k[2], k[3] = byte(e>>16), byte(e>>8), byte(e)
	for i := 0; i < 24 && i < len(n.digits); i++ {
		d := n.digits[i] - '0'
		if i%2 == 0 {
			k[4+i/2] |= d << 4
		} else {
			k[4+i/2] |= d
		}
	}
	if n.class == numNeg {
		for i := 1; i < 16; i++ {
			k[i] = ^k[i]
		}
	}
	return k
}

// parseBytea accepts the hex form \x followed by pairs of hex digits.
func parseBytea(s string) ([]byte, error) {
	if !strings.HasPrefix(s, `\x`) {
		return nil, errors.New(`want the hex form \xNN`)
	}
	b, err := hex.DecodeString(s[2:])
	if err != nil {
		return nil, errSyntax
	}
	return b, nil
}

// parseDate accepts YYYY-MM-DD (years 1 to 9999), infinity and -infinity
// and returns days since 2000-01-01.
func parseDate(s string) (int32, error) {
	switch strings.ToLower(s) {
	case "infinity", "+infinity":
		return datePosInf, nil
	case "-infinity":
		return dateNegInf, nil
	}
	t, err := parseYMD(s)
	if err != nil {
		return 0, err
	}
	// Unix seconds: time.Duration would overflow beyond ±292 years.
	return int32((t.Unix() - pgEpoch.Unix()) / 86400), nil
}

// parseYMD parses exactly YYYY-MM-DD and rejects dates that do not exist.
func parseYMD(s string) (time.Time, error) {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return time.Time{}, errSyntax
	}
	y, ok1 := atoiN(s[0:4])
	m, ok2 := atoiN(s[5:7])
	d, ok3 := atoiN(s[8:10])
	if !ok1 || !ok2 || !ok3 {
		return time.Time{}, errSyntax
	}
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	if y < 1 || t.Year() != y || int(t.Month()) != m || t.Day() != d {
		return time.Time{}, errRange
	}
	return t, nil
}

// atoiN parses a string of ASCII digits only.
func atoiN(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	v := 0
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
		v = v*10 + int(s[i]-'0')
	}
	return v, true
}

func formatDate(days int32) (string, error) {
	switch days {
	case datePosInf:
		return "infinity", nil
	case dateNegInf:
		return "-infinity", nil
	}
	t := pgEpoch.AddDate(0, 0, int(days))
	if t.Year() < 1 || t.Year() > 9999 {
		return "", fmt.Errorf("colcrypt: date %d days from 2000-01-01 outside years 1 to 9999", days)
	}
	return t.Format("2006-01-02"), nil
}

// parseTimestamptz accepts YYYY-MM-DD HH:MM:SS[.ffffff][zone] ('T' for the
// space too; zone Z, ±HH or ±HH:MM, optionally after a space, none
// meaning UTC), infinity and -infinity, and returns microseconds since
// 2000-01-01 00:00:00 UTC.  The instant in UTC must lie in years 1 to 9999.
func parseTimestamptz(s string) (int64, error) {
	switch strings.ToLower(s) {
	case "infinity", "+infinity":
		return tsPosInf, nil
	case "-infinity":
		return tsNegInf, nil
	}
	if len(s) < 19 || (s[10] != ' ' && s[10] != 'T' && s[10] != 't') ||
		s[13] != ':' || s[16] != ':' {
		return 0, errSyntax
	}
	day, err := parseYMD(s[:10])
	if err != nil {
		return 0, err
	}
	hh, ok1 := atoiN(s[11:13])
	mm, ok2 := atoiN(s[14:16])
	ss, ok3 := atoiN(s[17:19])
	if !ok1 || !ok2 || !ok3 {
		return 0, errSyntax
	}
	if hh > 23 || mm > 59 || ss > 59 {
		return 0, errRange
	}
	rest := s[19:]
	usec := 0
	if rest != "" && rest[0] == '.' {
		i := 1
		for i < len(rest) && isDigit(rest[i]) {
			i++
		}
		frac := rest[1:i]
		if frac == "" || len(frac) > 6 {
			return 0, errSyntax
		}
		usec, _ = atoiN(frac + strings.Repeat("0", 6-len(frac)))
		rest = rest[i:]
	}
	rest = strings.TrimLeft(rest, " ")
	offset := 0 // seconds east of UTC
	switch {
	case rest == "" || rest == "Z" || rest == "z":
	case rest[0] == '+' || rest[0] == '-':
		var oh, om int
		var ok bool
		switch len(rest) {
		case 3:
			oh, ok = atoiN(rest[1:3])
		case 6:
			if rest[3] != ':' {
				return 0, errSyntax
			}
			oh, ok = atoiN(rest[1:3])
			if ok {
				om, ok = atoiN(rest[4:6])
			}
		}
		if !ok {
			return 0, errSyntax
		}
		if oh > 15 || om > 59 {
			return 0, errRange
		}
		offset = oh*3600 + om*60
		if rest[0] == '-' {
			offset = -offset
		}
	default:
		return 0, errSyntax
	}
	t := day.Add(time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute +
		time.Duration(ss)*time.Second - time.Duration(offset)*time.Second)
	if t.Year() < 1 || t.Year() > 9999 {
		return 0, errRange
	}
	return (t.Unix()-pgEpoch.Unix())*1e6 + int64(usec), nil
}

func formatTimestamptz(us int64) (string, error) {
	switch us {
	case tsPosInf:
		return "infinity", nil
	case tsNegInf:
		return "-infinity", nil
	}
	sec, frac := us/1e6, us%1e6
	if frac < 0 {
		sec, frac = sec-1, frac+1e6
	}
	// Years 1 to 9999 lie beyond time.Duration's ±292 years: add days and
	// seconds separately.
	days := sec / 86400
	rem := sec % 86400
	if rem < 0 {
		days, rem = days-1, rem+86400
	}
	if days < -800000 || days > 3000000 {
		return "", fmt.Errorf("colcrypt: timestamptz %d µs outside years 1 to 9999", us)
	}
	t := pgEpoch.AddDate(0, 0, int(days)).Add(time.Duration(rem) * time.Second)
	if t.Year() < 1 || t.Year() > 9999 {
		return "", fmt.Errorf("colcrypt: timestamptz %d µs outside years 1 to 9999", us)
	}
	out := t.Format("2006-01-02 15:04:05")
	if frac != 0 {
		out += strings.TrimRight(fmt.Sprintf(".%06d", frac), "0")
	}
	return out + "+00", nil
}

// parseBool accepts t, f, true, false, yes, no, on, off, 1 and 0,
// case-insensitive.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "t", "true", "yes", "on", "1":
		return true, nil
	case "f", "false", "no", "off", "0":
		return false, nil
	}
	return false, errSyntax
}
