// Tests of the plaintext encodings: parsing and printing each type's text
// form, token inputs and order inputs.

package colcrypt

import (
	"bytes"
	"encoding/hex"
	"math"
	"testing"
)

func TestEncodeDecode(t *testing.T) {
	cases := []struct {
		ty       Type
		in       string
		payload  string // hex, "" to skip
		out      string
		wantFail bool
	}{
		{ty: Int4, in: "0", payload: "00000000", out: "0"},
		{ty: Int4, in: "-1", payload: "ffffffff", out: "-1"},
		{ty: Int4, in: " +42\n", payload: "0000002a", out: "42"},
		{ty: Int4, in: "-2147483648", payload: "80000000", out: "-2147483648"},
		{ty: Int4, in: "2147483647", payload: "7fffffff", out: "2147483647"},
		{ty: Int4, in: "2147483648", wantFail: true},
		{ty: Int4, in: "1_000", wantFail: true},
		{ty: Int4, in: "", wantFail: true},
		{ty: Int4, in: "0x10", wantFail: true},
		{ty: Int8, in: "-9223372036854775808", payload: "8000000000000000", out: "-9223372036854775808"},
		{ty: Int8, in: "9223372036854775807", payload: "7fffffffffffffff", out: "9223372036854775807"},
		{ty: Int8, in: "9223372036854775808", wantFail: true},
		{ty: Int8, in: "1.5", wantFail: true},
		{ty: Float8, in: "1.5", payload: "3ff8000000000000", out: "1.5"},
		{ty: Float8, in: "-0", payload: "8000000000000000", out: "-0"},
		{ty: Float8, in: "0", out: "0"},
		{ty: Float8, in: "NaN", payload: "7ff8000000000000", out: "NaN"},
		{ty: Float8, in: "nan", out: "NaN"},
		{ty: Float8, in: "Infinity", payload: "7ff0000000000000", out: "Infinity"},
		{ty: Float8, in: "-INFINITY", out: "-Infinity"},
		{ty: Float8, in: "inf", out: "Infinity"},
		{ty: Float8, in: "-inf", out: "-Infinity"},
		{ty: Float8, in: "+inf", out: "Infinity"},
		{ty: Float8, in: "1e20", out: "1e+20"},
		{ty: Float8, in: "1.5e-5", out: "1.5e-05"},
		{ty: Float8, in: "0.0001", out: "0.0001"},
		{ty: Float8, in: "0.001", out: "0.001"},
		{ty: Float8, in: "123456789012", out: "123456789012"},
		{ty: Float8, in: "123456789012345", out: "123456789012345"},
		{ty: Float8, in: "1e15", out: "1e+15"},
		{ty: Float8, in: "1e100", out: "1e+100"},
		{ty: Float8, in: "5e-324", out: "5e-324"},
		{ty: Float8, in: "-1e308", out: "-1e+308"},
		{ty: Float8, in: "0.1", out: "0.1"},
		{ty: Float8, in: ".5", out: "0.5"},
		{ty: Float8, in: "5.", out: "5"},
		{ty: Float8, in: "1e400", wantFail: true},
		{ty: Float8, in: "1e-400", wantFail: true},
		{ty: Float8, in: "-nan", wantFail: true},
		{ty: Float8, in: "0x1p3", wantFail: true},
		{ty: Float8, in: "1_0", wantFail: true},
		{ty: Float8, in: "--1", wantFail: true},
		{ty: Float8, in: "e5", wantFail: true},
		{ty: Float8, in: "", wantFail: true},
		{ty: Numeric, in: " 1.00 ", payload: hex.EncodeToString([]byte("1.00")), out: "1.00"},
		{ty: Numeric, in: "-123.45", out: "-123.45"},
		{ty: Numeric, in: "1e10", out: "1e10"},
		{ty: Numeric, in: "NaN", out: "NaN"},
		{ty: Numeric, in: "-inf", out: "-inf"},
		{ty: Numeric, in: "1e1001", wantFail: true},
		{ty: Numeric, in: "1.2.3", wantFail: true},
		{ty: Numeric, in: "abc", wantFail: true},
		{ty: Numeric, in: "-NaN", wantFail: true},
		{ty: Numeric, in: ".", wantFail: true},
		{ty: Text, in: "", payload: "", out: ""},
		{ty: Text, in: " café ", out: " café "},
		{ty: Text, in: "\xff\xfe", payload: "fffe", out: "\xff\xfe"},
		{ty: Bytea, in: `\x`, payload: "", out: `\x`},
		{ty: Bytea, in: `\x0A1b`, payload: "0a1b", out: `\x0a1b`},
		{ty: Bytea, in: `\x0`, wantFail: true},
		{ty: Bytea, in: `\xzz`, wantFail: true},
		{ty: Bytea, in: `abc`, wantFail: true},
		{ty: Date, in: "2000-01-01", payload: "00000000", out: "2000-01-01"},
		{ty: Date, in: "1999-12-31", payload: "ffffffff", out: "1999-12-31"},
		{ty: Date, in: "2024-02-29", out: "2024-02-29"},
		{ty: Date, in: "0001-01-01", out: "0001-01-01"},
		{ty: Date, in: "9999-12-31", out: "9999-12-31"},
		{ty: Date, in: "infinity", payload: "7fffffff", out: "infinity"},
		{ty: Date, in: "-Infinity", payload: "80000000", out: "-infinity"},
		{ty: Date, in: "2023-02-29", wantFail: true},
		{ty: Date, in: "2023-13-01", wantFail: true},
		{ty: Date, in: "0000-01-01", wantFail: true},
		{ty: Date, in: "2023-1-01", wantFail: true},
		{ty: Timestamptz, in: "2000-01-01 00:00:00", payload: "0000000000000000", out: "2000-01-01 00:00:00+00"},
		{ty: Timestamptz, in: "2000-01-01 00:00:01+00", payload: "00000000000f4240", out: "2000-01-01 00:00:01+00"},
		{ty: Timestamptz, in: "1999-12-31 23:59:59.999999+00", payload: "ffffffffffffffff", out: "1999-12-31 23:59:59.999999+00"},
		{ty: Timestamptz, in: "2024-06-01 12:00:00.5+02", out: "2024-06-01 10:00:00.5+00"},
		{ty: Timestamptz, in: "2024-06-01T12:00:00.123Z", out: "2024-06-01 12:00:00.123+00"},
		{ty: Timestamptz, in: "2024-06-01 12:00:00-05:30", out: "2024-06-01 17:30:00+00"},
		{ty: Timestamptz, in: "2024-06-01 12:00:00 +01", out: "2024-06-01 11:00:00+00"},
		{ty: Timestamptz, in: "0001-01-01 00:00:00", out: "0001-01-01 00:00:00+00"},
		{ty: Timestamptz, in: "9999-12-31 23:59:59.999999", out: "9999-12-31 23:59:59.999999+00"},
		{ty: Timestamptz, in: "infinity", payload: "7fffffffffffffff", out: "infinity"},
		{ty: Timestamptz, in: "-infinity", payload: "8000000000000000", out: "-infinity"},
		{ty: Timestamptz, in: "0001-01-01 00:00:00+01", wantFail: true},
		{ty: Timestamptz, in: "2024-06-01 24:00:00", wantFail: true},
		{ty: Timestamptz, in: "2024-06-01 12:00:00.1234567", wantFail: true},
		{ty: Timestamptz, in: "2024-06-01 12:00:00.", wantFail: true},
		{ty: Timestamptz, in: "2024-06-01 12:00:00+2", wantFail: true},
		{ty: Timestamptz, in: "2024-06-01 12:00:00 PST", wantFail: true},
		{ty: Timestamptz, in: "2024-06-01", wantFail: true},
		{ty: Bool, in: "t", payload: "01", out: "t"},
		{ty: Bool, in: "FALSE", payload: "00", out: "f"},
		{ty: Bool, in: "yes", out: "t"},
		{ty: Bool, in: "Off", out: "f"},
		{ty: Bool, in: "1", out: "t"},
		{ty: Bool, in: "0", out: "f"},
		{ty: Bool, in: "maybe", wantFail: true},
		{ty: Bool, in: "", wantFail: true},
	}
	for _, tc := range cases {
		p, err := Encode(tc.ty, tc.in)
		if tc.wantFail {
			if err == nil {
				t.Errorf("Encode(%s, %q) = %x, want error", tc.ty, tc.in, p)
			}
			continue
		}
		if err != nil {
			t.Errorf("Encode(%s, %q): %v", tc.ty, tc.in, err)
			continue
		}
		if tc.payload != "" || tc.ty == Text || tc.ty == Bytea {
			if hex.EncodeToString(p) != tc.payload && tc.payload != "" {
				t.Errorf("Encode(%s, %q) = %x, want %s", tc.ty, tc.in, p, tc.payload)
			}
		}
		out, err := Decode(tc.ty, p)
		if err != nil || out != tc.out {
			t.Errorf("Decode(%s, Encode(%q)) = %q, %v; want %q", tc.ty, tc.in, out, err, tc.out)
		}
	}
}

func TestDecodeBadPayload(t *testing.T) {
	for _, tc := range []struct {
		ty Type
		p  []byte
	}{
		{Int4, []byte{1, 2, 3}}, {Int8, []byte{1}}, {Bool, []byte{2}}, {Bool, nil},
		{Numeric, []byte("x")}, {Date, []byte{0x7f, 0, 0, 0}}, {Timestamptz, []byte{0x7f, 0, 0, 0, 0, 0, 0, 0}},
		{Type(0), nil},
	} {
		if s, err := Decode(tc.ty, tc.p); err == nil {
			t.Errorf("Decode(%s, %x) = %q, want error", tc.ty, tc.p, s)
		}
	}
}

func TestFloatFormatRoundTrip(t *testing.T) {
	for _, f := range []float64{math.MaxFloat64, math.SmallestNonzeroFloat64, 1.0 / 3, -2.5e-300, 1e14, 9.999999999999999e14, 1e-4, 9.9e-5} {
		p := make([]byte, 8)
		s := FormatFloat8(f)
		p2, err := Encode(Float8, s)
		if err != nil {
			t.Fatalf("%v -> %q: %v", f, s, err)
		}
		_ = p
		if back, _ := Decode(Float8, p2); back != s {
			t.Errorf("%v: %q -> %q", f, s, back)
		}
		if math.Float64frombits(uint64FromBytes(p2)) != f {
			t.Errorf("%v: %q does not round-trip", f, s)
		}
	}
}

func uint64FromBytes(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

func TestNumericCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0", "0"}, {"-0", "0"}, {"0.000", "0"}, {"000", "0"}, {"+0e5", "0"},
		{"1", "1"}, {"1.0", "1"}, {"1.00", "1"}, {"001.500", "1.5"}, {"+7", "7"},
		{"-123.45", "-123.45"}, {".5", "0.5"}, {"5.", "5"}, {"-0.05", "-0.05"},
		{"1e10", "10000000000"}, {"1.5E-3", "0.0015"}, {"12.5e1", "125"}, {"1250e-1", "125"},
		{"NaN", "NaN"}, {"nan", "NaN"}, {"inf", "Infinity"}, {"+Infinity", "Infinity"},
		{"-INF", "-Infinity"}, {"-infinity", "-Infinity"},
		{"12345678901234567890.123456789", "12345678901234567890.123456789"},
	} {
		got, err := TokenInput(Numeric, []byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("TokenInput(numeric %q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestNumericOrderKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"-Infinity", "00000000000000000000000000000000"},
		{"0", "02000000000000000000000000000000"},
		{"Infinity", "04000000000000000000000000000000"},
		{"NaN", "05000000000000000000000000000000"},
		// 1 = 0.1 × 10¹: e + 2²³ = 0x800001, digit 1.
		{"1", "03800001100000000000000000000000"},
		{"123.45", "03800003123450000000000000000000"},
		{"0.05", "037fffff500000000000000000000000"},
		{"-1", "017ffffeefffffffffffffffffffffff"},
		// Only the first 24 digits count.
		{"1234567890123456789012345", "03800019123456789012345678901234"},
	} {
		got, err := OrderInput(Numeric, []byte(tc.in))
		if err != nil || hex.EncodeToString(got) != tc.want {
			t.Errorf("OrderInput(numeric %q) = %x, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestOrderInputs(t *testing.T) {
	for _, tc := range []struct {
		ty       Type
		in, want string
	}{
		{Int4, "0", "80000000"}, {Int4, "-1", "7fffffff"}, {Int4, "-2147483648", "00000000"},
		{Int8, "1", "8000000000000001"},
		{Float8, "0", "8000000000000000"}, {Float8, "-0", "8000000000000000"},
		{Float8, "1", "bff0000000000000"}, {Float8, "-1", "400fffffffffffff"},
		{Float8, "NaN", "fff8000000000000"}, {Float8, "Infinity", "fff0000000000000"},
		{Float8, "-Infinity", "000fffffffffffff"},
		{Bool, "t", "01"}, {Bool, "f", "00"},
		{Text, "ab", "61620000000000000000000000000000"},
		{Text, "0123456789abcdefXYZ", hex.EncodeToString([]byte("0123456789abcdef"))},
		{Bytea, `\xff`, "ff000000000000000000000000000000"},
		{Date, "2000-01-01", "80000000"}, {Timestamptz, "-infinity", "0000000000000000"},
	} {
		p, err := Encode(tc.ty, tc.in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := OrderInput(tc.ty, p)
		if err != nil || hex.EncodeToString(got) != tc.want {
			t.Errorf("OrderInput(%s %q) = %x, %v; want %s", tc.ty, tc.in, got, err, tc.want)
		}
		if len(got) != tc.ty.OrderInputSize() {
			t.Errorf("%s: order input of %d bytes", tc.ty, len(got))
		}
	}
	if _, err := OrderInput(Int4, []byte{1}); err == nil {
		t.Error("OrderInput accepted a short int4 payload")
	}
	if _, err := TokenInput(Float8, nil); err == nil {
		t.Error("TokenInput accepted an empty float8 payload")
	}
	if p, _ := TokenInput(Float8, []byte{0xff, 0xf0, 0, 0, 0, 0, 0, 1}); !bytes.Equal(p, []byte{0x7f, 0xf8, 0, 0, 0, 0, 0, 0}) {
		t.Errorf("NaN with payload not canonical: %x", p)
	}
}

// FuzzEncode: parsing any text as any type must not panic, and what
// parses must print to a form that parses to the same payload.
func FuzzEncode(f *testing.F) {
	for ty, vals := range edgeValues {
		for _, v := range vals {
			f.Add(byte(ty), v)
		}
	}
	f.Add(byte(Float8), "1e-400")
	f.Add(byte(Timestamptz), "2024-06-01T12:00:00.5-05:30")
	f.Fuzz(func(t *testing.T, code byte, s string) {
		ty := Type(code%9 + 1)
		p, err := Encode(ty, s)
		if err != nil {
			return
		}
		out, err := Decode(ty, p)
		if err != nil {
			t.Fatalf("Decode(%s, Encode(%q)): %v", ty, s, err)
		}
		q, err := Encode(ty, out)
		if err != nil || !bytes.Equal(p, q) {
			t.Fatalf("%s %q -> %q -> %x, %v; want %x", ty, s, out, q, err, p)
		}
		if _, err := TokenInput(ty, p); err != nil {
			t.Fatal(err)
		}
		o, err := OrderInput(ty, p)
		if err != nil || len(o) != ty.OrderInputSize() {
			t.Fatalf("OrderInput: %x, %v", o, err)
		}
	})
}
