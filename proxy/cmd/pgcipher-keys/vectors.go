// The shared test-vector file (design 13.9): every type at every level
// encrypted under fixed keys with a fixed random stream, so that the Go
// tests can regenerate it byte for byte and the C tests can load it.

package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// Fixed test keys: never use them for anything else.
const (
	vectorCMKHex  = "8f3a1c5e7b9d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c0e2b4d6f8a1c3e5b7d9f0a"
	vectorCEK1Hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	vectorCEK2Hex = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

	vectorLabel      = "public.vec.v"
	vectorOtherLabel = "public.vec.w"
	vectorOtherGroup = "other"
)

func vectorCEK(keyID uint32) []byte {
	h := vectorCEK1Hex
	if keyID == 2 {
		h = vectorCEK2Hex
	}
	b, _ := hex.DecodeString(h)
	return b
}

// seed returns a fixed ChaCha8 seed derived from a name.
func seed(name string) [32]byte {
	var s [32]byte
	copy(s[:], name)
	return s
}

// vectorPlains returns the plaintexts of one type; values draws the
// random ones.
func vectorPlains(t colcrypt.Type, values *mrand.Rand) []string {
	switch t {
	case colcrypt.Int4:
		p := []string{"-2147483648", "-1", "0", "1", "2147483647", "15", "16", "255", "256", "65535", "65536"}
		for i := 0; i < 5; i++ {
			p = append(p, strconv.Itoa(int(int32(values.Uint32()))))
		}
		return p
	case colcrypt.Int8:
		p := []string{"-9223372036854775808", "-1", "0", "1", "9223372036854775807", "15", "16", "255", "256",
			"65535", "65536", "2147483648", "-2147483649", "4294967296", "1000000000000000000"}
		for i := 0; i < 5; i++ {
			p = append(p, strconv.FormatInt(int64(values.Uint64()), 10))
		}
		return p
	case colcrypt.Float8:
		return []string{"-Infinity", "-1e308", "-1.5", "-0", "0", "5e-324", "1", "1.5", "1e20", "Infinity", "NaN"}
	case colcrypt.Numeric:
		return []string{"-Infinity", "-123.45", "-1", "0", "0.000", "1", "1.0", "1.00",
			"12345678901234567890.123456789", "1e10", "Infinity", "NaN"}
	case colcrypt.Text:
		long := "The quick brown fox jumps over the lazy."
		return []string{"", "a", "ab", "abc", "b", "Zebra", "zebra", "café",
			long, long[:16] + strings.Repeat("z", len(long)-16)}
	case colcrypt.Bytea:
		return []string{`\x`, `\x00`, `\x0001`, `\xff`, `\x61`}
	case colcrypt.Date:
		return []string{"-infinity", "1999-12-31", "2000-01-01", "2024-02-29", "infinity"}
	case colcrypt.Timestamptz:
		return []string{"-infinity", "1999-12-31 23:59:59.999999+00", "2000-01-01 00:00:00+00",
			"2024-06-01 12:00:00.5+02", "infinity"}
	case colcrypt.Bool:
		return []string{"f", "t"}
	}
	return nil
}

// vectorPatterns are the LIKE patterns of the PATTERN rows (MATCH queries
// of key 1 in public.vec.v), one row each.
var vectorPatterns = []string{`%a%`, `a%`, `%bra`, `Zeb%`, `%quick brown%`, `%`, ``,
	`caf_`, `%zzz%`, `abc`, `%e\%%`, `%own zz%`}

// patternLevel is the level column of a PATTERN row: ct is a MATCH query
// (flags 0x01) and plain its pattern.
const patternLevel = "PATTERN"

// otherPlains are the values of key 2, group "other", for mixing tests.
var otherPlains = map[colcrypt.Type][]string{
	colcrypt.Int4: {"-1", "0", "1", "65536"},
	colcrypt.Text: {"", "a", "abc", "zebra"},
}

// vectorRow is one line of the file.
type vectorRow struct {
	typ          colcrypt.Type
	level        colcrypt.Level
	keyID        uint32
	group, label string
	plain        string
	ct           []byte
	query        bool   // a MATCH query: level written as PATTERN
	tag          string // written instead of the level (order format 2 rows)
}

// vectorRows encrypts every plaintext twice, and every pattern once.  The
// MATCH and PATTERN rows come last and draw from a stream of their own,
// so that the rows before them do not change.
func vectorRows() ([]vectorRow, error) {
	values := mrand.New(mrand.NewChaCha8(seed("pgcipher vector values")))
	random := mrand.NewChaCha8(seed("pgcipher vector randomness"))
	var rows []vectorRow
	add := func(t colcrypt.Type, l colcrypt.Level, keyID uint32, group, label string, plains []string) error {
		col, err := colcrypt.NewColumn(vectorCEK(keyID), colcrypt.Spec{
			KeyID: keyID, Type: t, Level: l, Label: label, Group: group,
		})
		if err != nil {
			return err
		}
		for _, p := range plains {
			for k := 0; k < 2; k++ {
				ct, err := col.Encrypt(p, random)
				if err != nil {
					return err
				}
				rows = append(rows, vectorRow{t, l, keyID, group, label, p, ct, false, ""})
			}
		}
		return nil
	}
	for _, t := range colcrypt.Types {
		plains := vectorPlains(t, values)
		for _, l := range []colcrypt.Level{colcrypt.RND, colcrypt.EQ, colcrypt.ORD} {
			if err := add(t, l, 1, vectorLabel, vectorLabel, plains); err != nil {
				return nil, err
			}
		}
	}
	for _, t := range []colcrypt.Type{colcrypt.Int4, colcrypt.Text} {
		for _, l := range []colcrypt.Level{colcrypt.EQ, colcrypt.ORD} {
			if err := add(t, l, 2, vectorOtherGroup, vectorOtherLabel, otherPlains[t]); err != nil {
				return nil, err
			}
		}
	}
	random = mrand.NewChaCha8(seed("pgcipher vector match randomness"))
	if err := add(colcrypt.Text, colcrypt.MATCH, 1, vectorLabel, vectorLabel, vectorPlains(colcrypt.Text, nil)); err != nil {
		return nil, err
	}
	col, err := colcrypt.NewColumn(vectorCEK(1), colcrypt.Spec{
		KeyID: 1, Type: colcrypt.Text, Level: colcrypt.MATCH, Label: vectorLabel, Group: vectorLabel,
	})
	if err != nil {
		return nil, err
	}
	for _, p := range vectorPatterns {
		ct, err := col.EncryptPattern(p, random)
		if err != nil {
			return nil, err
		}
		rows = append(rows, vectorRow{colcrypt.Text, colcrypt.MATCH, 1, vectorLabel, vectorLabel, p, ct, true, ""})
	}
	if rows, err = ore2Rows(rows); err != nil {
		return nil, err
	}
	return foldedRows(rows)
}

// Case-insensitive MATCH (design 13.5a), after every row before it:
// values of a column bound case-insensitive (level written MATCHCI) and
// its queries (PATTERNCI), in mixed case.
const (
	foldedLevel        = "MATCHCI"
	foldedPatternLevel = "PATTERNCI"
)

var (
	foldedPlains   = []string{"Zebra Crossing", "ZEBRA", "zebra", "The Quick Brown Fox", "quick BROWN", "Ab", "", "Straße", "ÉCOLE élève"}
	foldedPatterns = []string{`%zebra%`, `%QUICK brown%`, `ab`, `%`, `%STRASSE%`, `%école%`, `%XYZ%`}
)

func foldedRows(rows []vectorRow) ([]vectorRow, error) {
	random := mrand.NewChaCha8(seed("pgcipher vector folded randomness"))
	col, err := colcrypt.NewColumn(vectorCEK(1), colcrypt.Spec{KeyID: 1, Type: colcrypt.Text, Level: colcrypt.MATCH,
		Label: vectorLabel, Group: vectorLabel, CaseInsensitive: true})
	if err != nil {
		return nil, err
	}
	for _, p := range foldedPlains {
		ct, err := col.Encrypt(p, random)
		if err != nil {
			return nil, err
		}
		rows = append(rows, vectorRow{colcrypt.Text, colcrypt.MATCH, 1, vectorLabel, vectorLabel, p, ct, false, foldedLevel})
	}
	for _, p := range foldedPatterns {
		ct, err := col.EncryptPattern(p, random)
		if err != nil {
			return nil, err
		}
		rows = append(rows, vectorRow{colcrypt.Text, colcrypt.MATCH, 1, vectorLabel, vectorLabel, p, ct, true, foldedPatternLevel})
	}
	return rows, nil
}

// Order format 2 (design 13.5b), after every format-1 row so that those
// keep their numbers: per type, values of format 2 (level written ORD2),
// of format 2 carrying format 1 (ORD12), and query operands (ORD2Q).
const (
	ore2Level  = "ORD2"
	ore12Level = "ORD12"
	ore2QLevel = "ORD2Q"
)

func ore2Rows(rows []vectorRow) ([]vectorRow, error) {
	values := mrand.New(mrand.NewChaCha8(seed("pgcipher vector ore2 values")))
	random := mrand.NewChaCha8(seed("pgcipher vector ore2 randomness"))
	for _, t := range colcrypt.Types {
		plains := vectorPlains(t, values)
		for _, f := range []struct{ format, tag string }{{"2", ore2Level}, {"1+2", ore12Level}, {"2", ore2QLevel}} {
			col, err := colcrypt.NewColumn(vectorCEK(1), colcrypt.Spec{KeyID: 1, Type: t, Level: colcrypt.ORD,
				Label: vectorLabel, Group: vectorLabel, OREFormat: f.format})
			if err != nil {
				return nil, err
			}
			for _, p := range plains {
				payload, err := colcrypt.Encode(t, p)
				if err != nil {
					return nil, err
				}
				var ct []byte
				if f.tag == ore2QLevel {
					ct, err = col.EncryptOperand(payload, random)
				} else {
					ct, err = col.EncryptPayload(payload, random)
				}
				if err != nil {
					return nil, err
				}
				rows = append(rows, vectorRow{t, colcrypt.ORD, 1, vectorLabel, vectorLabel, p, ct, false, f.tag})
			}
		}
	}
	return rows, nil
}

// csvField quotes a field when needed, and always when it is empty, so
// that PostgreSQL's COPY ... CSV reads an empty string, not NULL.
func csvField(s string) string {
	if s != "" && !strings.ContainsAny(s, ",\"\r\n") {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// vectors returns the CSV file: type,level,key_id,grp,label,n,plain,ct.
func vectors() ([]byte, error) {
	rows, err := vectorRows()
	if err != nil {
		return nil, fmt.Errorf("vectors: %w", err)
	}
	var b bytes.Buffer
	b.WriteString("type,level,key_id,grp,label,n,plain,ct\n")
	for i, r := range rows {
		level := r.level.String()
		if r.query {
			level = patternLevel
		}
		if r.tag != "" {
			level = r.tag
		}
		fields := []string{r.typ.String(), level, strconv.FormatUint(uint64(r.keyID), 10),
			r.group, r.label, strconv.Itoa(i + 1), r.plain, base64.StdEncoding.EncodeToString(r.ct)}
		for j, f := range fields {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(csvField(f))
		}
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}
