package values

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// TestNumericSend compares with what PostgreSQL 17's numeric_send writes
// (SELECT numeric_send('…'::numeric)).
func TestNumericSend(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0", "0000000000000000"},
		{"0.00", "0000000000000002"},
		{"12.50", "0002000000000002000c1388"},
		{"-1.5", "000200004000000100011388"},
		{"1e3", "000100000000000003e8"},
		{"10000", "00010001000000000001"},
		{"0.0001", "0001ffff000000040001"},
		{"123456789.123", "0004000200000003000109291a8504ce"},
		{"NaN", "00000000c0000000"},
		{"Infinity", "00000000d0000020"},
		{"-Infinity", "00000000f0000020"},
		{"1.5e-3", "0001ffff00000004000f"},
	} {
		got, err := numericSend(nil, tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		want, _ := hex.DecodeString(tc.want)
		if !bytes.Equal(got, want) {
			t.Errorf("numeric_send(%s) = %x, want %s", tc.in, got, tc.want)
		}
	}
}

func TestPayloadAcrossTypes(t *testing.T) {
	for _, tc := range []struct {
		t      colcrypt.Type
		oid    uint32
		format int16
		in     []byte
		want   string
	}{
		{colcrypt.Int4, oidInt8, 1, []byte{0, 0, 0, 0, 0, 0, 0, 42}, "42"},
		{colcrypt.Int4, oidInt2, 1, []byte{0xff, 0xfe}, "-2"},
		{colcrypt.Text, oidVarchar, 1, []byte("abc"), "abc"},
		{colcrypt.Int8, 0, 0, []byte(" 7 "), "7"},
		{colcrypt.Float8, oidFloat4, 1, []byte{0x3f, 0xc0, 0, 0}, "1.5"},
		{colcrypt.Date, 0, 0, []byte("2024-02-08 +00"), "2024-02-08"},
		// timestamp (psycopg's naive datetime) into timestamptz, and
		// dates beyond time.Duration's ±292 years as text
		{colcrypt.Timestamptz, oidTimestamp, 1, []byte{0xff, 0xfc, 0xa2, 0xfe, 0xc4, 0xc8, 0x20, 0x00}, "1970-01-01 00:00:00+00"},
		{colcrypt.Text, oidTimestamptz, 1, []byte{0xff, 0xa6, 0x4f, 0x4b, 0xa4, 0xad, 0x40, 0x00}, "1200-01-01 00:00:00+00"},
	} {
		p, err := Payload(tc.t, tc.oid, tc.format, tc.in)
		if err != nil {
			t.Fatalf("%v: %v", tc, err)
		}
		got, _ := colcrypt.Decode(tc.t, p)
		if got != tc.want {
			t.Errorf("%v: got %q, want %q", tc, got, tc.want)
		}
	}
	if _, err := Payload(colcrypt.Int4, oidInt8, 1, []byte{0, 0, 0, 1, 0, 0, 0, 0}); err == nil {
		t.Error("an int8 beyond int4's range was accepted for an int4 column")
	}
}

func TestNumericText(t *testing.T) {
	for in, want := range map[string]string{"1E+20": "100000000000000000000", "1e3": "1000", "12.50": "12.50",
		"1.5e-3": "0.0015", "-0.00": "0.00", "007": "7", "0": "0", "-12": "-12", "nan": "NaN", "-infinity": "-Infinity",
		".5": "0.5", "+3.10": "3.10"} {
		got, err := NumericText(in)
		if err != nil || got != want {
			t.Errorf("NumericText(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
