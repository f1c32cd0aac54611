// Numeric arithmetic as PostgreSQL's numeric.c does it: exact sums and
// products, quotients rounded at select_div_scale's display scale.

package compute

import (
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// Decimal is a numeric: Coef × 10^-Scale, or NaN or ±Infinity.  Scale is
// PostgreSQL's display scale (digits shown after the point).
type Decimal struct {
	Special special
	Coef    *big.Int
	Scale   int32
}

type special int8

const (
	finite special = iota
	nan
	posInf
	negInf
)

// Display-scale limits of numeric.c.
const (
	minSigDigits    = 16
	maxDisplayScale = 1000
)

var (
	bigTen   = big.NewInt(10)
	bigTenK  = big.NewInt(10000)
	bigOne   = big.NewInt(1)
	bigZeroD = Decimal{Coef: new(big.Int)}
)

// DecimalFromInt is the numeric of an integer.
func DecimalFromInt(i int64) Decimal { return Decimal{Coef: big.NewInt(i)} }

// ParseDecimal reads numeric_in's input: sign, digits, point, exponent,
// NaN and Infinity.
func ParseDecimal(s string) (Decimal, error) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case "nan":
		return Decimal{Special: nan}, nil
	case "infinity", "+infinity", "inf", "+inf":
		return Decimal{Special: posInf}, nil
	case "-infinity", "-inf":
		return Decimal{Special: negInf}, nil
	}
	d, ok := colcrypt.ScanDecimal(t)
	if !ok || d.Exp > 1000 || d.Exp < -1000 {
		return Decimal{}, fmt.Errorf("compute: invalid numeric %q", s)
	}
	coef, _ := new(big.Int).SetString(d.Digits, 10)
	scale := int64(d.Scale())
	if scale < 0 {
		coef.Mul(coef, pow10(int32(-scale)))
		scale = 0
	}
	if d.Neg {
		coef.Neg(coef)
	}
	return Decimal{Coef: coef, Scale: int32(scale)}, nil
}

func pow10(n int32) *big.Int { return new(big.Int).Exp(bigTen, big.NewInt(int64(n)), nil) }

// String is numeric_out: no exponent, Scale digits after the point.
func (d Decimal) String() string {
	switch d.Special {
	case nan:
		return "NaN"
	case posInf:
		return "Infinity"
	case negInf:
		return "-Infinity"
	}
	s := new(big.Int).Abs(d.Coef).String()
	if d.Scale > 0 {
		if len(s) <= int(d.Scale) {
			s = strings.Repeat("0", int(d.Scale)-len(s)+1) + s
		}
		s = s[:len(s)-int(d.Scale)] + "." + s[len(s)-int(d.Scale):]
	}
	if d.Coef.Sign() < 0 {
		s = "-" + s
	}
	return s
}

// rescale returns d's coefficient at scale s ≥ d.Scale.
func (d Decimal) coefAt(s int32) *big.Int {
	if s == d.Scale {
		return d.Coef
	}
	return new(big.Int).Mul(d.Coef, pow10(s-d.Scale))
}

func (d Decimal) infSign() int {
	switch d.Special {
	case posInf:
		return 1
	case negInf:
		return -1
	}
	return 0
}

func signedInf(sign int) Decimal {
	if sign > 0 {
		return Decimal{Special: posInf}
	}
	return Decimal{Special: negInf}
}

// Add is numeric_add.
func (d Decimal) Add(e Decimal) Decimal {
	if d.Special == nan || e.Special == nan {
		return Decimal{Special: nan}
	}
	if d.Special != finite || e.Special != finite {
		a, b := d.infSign(), e.infSign()
		if a != 0 && b != 0 && a != b {
			return Decimal{Special: nan}
		}
		return signedInf(a + b)
	}
	s := max(d.Scale, e.Scale)
	return Decimal{Coef: new(big.Int).Add(d.coefAt(s), e.coefAt(s)), Scale: s}
}

// Neg is numeric_uminus.
func (d Decimal) Neg() Decimal {
	switch d.Special {
	case posInf:
		return Decimal{Special: negInf}
	case negInf:
		return Decimal{Special: posInf}
	case nan:
		return d
	}
	return Decimal{Coef: new(big.Int).Neg(d.Coef), Scale: d.Scale}
}

func (d Decimal) sign() int {
	if d.Special != finite {
		return d.infSign()
	}
	return d.Coef.Sign()
}

// Mul is numeric_mul (exact: PostgreSQL's result scale is the sum of the
// scales, which holds every digit of the product).
func (d Decimal) Mul(e Decimal) Decimal {
	if d.Special == nan || e.Special == nan {
		return Decimal{Special: nan}
	}
	if d.Special != finite || e.Special != finite {
		s := d.sign() * e.sign()
		if s == 0 {
			return Decimal{Special: nan}
		}
		return signedInf(s)
	}
	s := d.Scale + e.Scale
	if s > maxDisplayScale {
		return Decimal{Coef: roundDiv(new(big.Int).Mul(d.Coef, e.Coef), pow10(s-maxDisplayScale)), Scale: maxDisplayScale}
	}
	return Decimal{Coef: new(big.Int).Mul(d.Coef, e.Coef), Scale: s}
}

// ErrDivisionByZero is numeric_div's and int4div's error.
var ErrDivisionByZero = &Error{Code: "22012", Message: "division by zero"}

// Div is numeric_div: rounded half away from zero at select_div_scale.
func (d Decimal) Div(e Decimal) (Decimal, error) {
	if d.Special == nan || e.Special == nan {
		return Decimal{Special: nan}, nil
	}
	if e.Special == finite && e.Coef.Sign() == 0 {
		return Decimal{}, ErrDivisionByZero
	}
	if d.Special != finite {
		if e.Special != finite {
			return Decimal{Special: nan}, nil
		}
		return signedInf(d.infSign() * e.Coef.Sign()), nil
	}
	if e.Special != finite {
		return bigZeroD, nil
	}
	rscale := selectDivScale(d, e)
	// d/e at rscale: d.Coef·10^(rscale - d.Scale + e.Scale) / e.Coef
	num := new(big.Int).Set(d.Coef)
	den := new(big.Int).Set(e.Coef)
	if k := rscale - d.Scale + e.Scale; k >= 0 {
		num.Mul(num, pow10(k))
	} else {
		den.Mul(den, pow10(-k))
	}
	return Decimal{Coef: roundDiv(num, den), Scale: rscale}, nil
}

// roundDiv is num/den rounded half away from zero.
func roundDiv(num, den *big.Int) *big.Int {
	q, r := new(big.Int).QuoRem(num, den, new(big.Int))
	r2 := new(big.Int).Abs(r)
	r2.Lsh(r2, 1)
	if r2.Cmp(new(big.Int).Abs(den)) >= 0 {
		if (num.Sign() < 0) != (den.Sign() < 0) {
			q.Sub(q, bigOne)
		} else {
			q.Add(q, bigOne)
		}
	}
	return q
}

// nbaseLead returns the weight and first digit of |d| in numeric.c's
// base-10000 representation (0, 0 for zero).
func nbaseLead(d Decimal) (int, int64) {
	abs := new(big.Int).Abs(d.Coef)
	if abs.Sign() == 0 {
		return 0, 0
	}
	e10 := len(abs.String()) - 1 - int(d.Scale) // exponent of the leading digit
	w := e10 / 4
	if e10 < 0 && e10%4 != 0 {
		w--
	}
	// the base-10000 digit of weight w: floor(|d| / 10^(4w)) mod 10000
	shift := int32(4*w) + d.Scale // |d| / 10^(4w) = abs / 10^(Scale+4w)
	var x *big.Int
	if shift >= 0 {
		x = new(big.Int).Quo(abs, pow10(shift))
	} else {
		x = new(big.Int).Mul(abs, pow10(-shift))
	}
	return w, new(big.Int).Rem(x, bigTenK).Int64()
}

// selectDivScale is numeric.c's select_div_scale.
func selectDivScale(a, b Decimal) int32 {
	w1, f1 := nbaseLead(a)
	w2, f2 := nbaseLead(b)
	qweight := w1 - w2
	if f1 <= f2 {
		qweight--
	}
	rscale := int32(minSigDigits - qweight*4)
	rscale = max(rscale, a.Scale, b.Scale, 0)
	return min(rscale, maxDisplayScale)
}

// Cmp orders numerics as PostgreSQL does: NaN above everything.
func (d Decimal) Cmp(e Decimal) int {
	rank := func(x Decimal) int {
		switch x.Special {
		case negInf:
			return 0
		case posInf:
			return 2
		case nan:
			return 3
		}
		return 1
	}
	if ra, rb := rank(d), rank(e); ra != rb || ra != 1 {
		return ra - rb
	}
	s := max(d.Scale, e.Scale)
	return d.coefAt(s).Cmp(e.coefAt(s))
}

// Int64 returns the numeric rounded to an integer, and whether it fits.
func (d Decimal) Int64() (int64, bool) {
	if d.Special != finite {
		return 0, false
	}
	q := d.Coef
	if d.Scale > 0 {
		q = roundDiv(d.Coef, pow10(d.Scale))
	}
	return q.Int64(), q.IsInt64()
}

// Float64 is numeric_float8.
func (d Decimal) Float64() float64 {
	switch d.Special {
	case nan:
		return math.NaN()
	case posInf:
		return math.Inf(1)
	case negInf:
		return math.Inf(-1)
	}
	f, _ := new(big.Rat).SetFrac(d.Coef, pow10(d.Scale)).Float64()
	return f
}

// Typmod applies numeric(precision, scale) as PostgreSQL's apply_typmod
// does: rounded half away from zero to scale digits after the point, and
// 22003 "numeric field overflow" when more than precision - scale digits
// remain before it (or for ±Infinity); NaN passes.
func (d Decimal) Typmod(precision, scale int32) (Decimal, error) {
	switch d.Special {
	case nan:
		return d, nil
	case posInf, negInf:
		return Decimal{}, &Error{Code: "22003", Message: "numeric field overflow"}
	}
	c := new(big.Int).Set(d.Coef)
	switch {
	case d.Scale > scale:
		c = roundDiv(c, pow10(d.Scale-scale))
	case d.Scale < scale:
		c.Mul(c, pow10(scale-d.Scale))
	}
	whole := new(big.Int).Quo(new(big.Int).Abs(c), pow10(scale))
	if whole.Sign() != 0 && int32(len(whole.String())) > precision-scale {
		return Decimal{}, &Error{Code: "22003", Message: "numeric field overflow",
			Hint: fmt.Sprintf("A field with precision %d, scale %d must round to an absolute value less than 10^%d.", precision, scale, precision-scale)}
	}
	return Decimal{Coef: c, Scale: scale}, nil
}
