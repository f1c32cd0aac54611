package wire

import (
	"testing"

	"github.com/pgcipher/pgcipher/proxy/rewrite"
)

func TestLike(t *testing.T) {
	for _, tc := range []struct {
		s, p string
		want bool
	}{
		{"hello world", "hello%", true},
		{"hello world", "%world", true},
		{"hello world", "%lo w%", true},
		{"hello world", "h_llo%", true},
		{"hello", "hello_", false},
		{"", "%", true},
		{"", "_", false},
		{"100%", `100\%`, true},
		{"1000", `100\%`, false},
		{"a_b", `a\_b`, true},
		{"axb", `a\_b`, false},
		{"ünïcode", "_n_code", true},
		{"abc", "ABC", false},
		{"aaa", "%a%a%a%", true},
		{"aa", "%a%a%a%", false},
	} {
		got, err := like(tc.s, tc.p)
		if err != nil || got != tc.want {
			t.Errorf("%q LIKE %q = %v, %v; want %v", tc.s, tc.p, got, err, tc.want)
		}
	}
	if _, err := like("x", `x\`); err == nil {
		t.Error("a pattern ending in an escape was accepted")
	}
}

func TestCopyRows(t *testing.T) {
	text := &copyStream{plan: &rewrite.CopyPlan{Delimiter: '\t', Null: `\N`}}
	csv := &copyStream{plan: &rewrite.CopyPlan{CSV: true, Delimiter: ',', Quote: '"', Escape: '"'}}
	for _, tc := range []struct {
		c      *copyStream
		in     string
		end    int
		fields []string
	}{
		{text, "1\tab\\tc\t\\N\nrest", 11, []string{"1", `ab\tc`, `\N`}},
		{text, "1\ta\\\tb\n", 7, []string{"1", "a\\\tb"}},
		{text, "no newline yet", -1, nil},
		{csv, "1,\"a,b\",\"x\ny\"\n2", 14, []string{"1", `"a,b"`, "\"x\ny\""}},
		{csv, "1,\"say \"\"hi\"\"\",\n", 16, []string{"1", `"say ""hi"""`, ""}},
	} {
		if got := tc.c.rowEnd([]byte(tc.in)); got != tc.end {
			t.Errorf("rowEnd(%q) = %d, want %d", tc.in, got, tc.end)
			continue
		}
		if tc.end < 0 {
			continue
		}
		body, _ := trimEOL([]byte(tc.in[:tc.end]))
		got := tc.c.splitRow(body)
		if len(got) != len(tc.fields) {
			t.Errorf("splitRow(%q) = %q, want %q", body, got, tc.fields)
			continue
		}
		for i := range got {
			if string(got[i]) != tc.fields[i] {
				t.Errorf("splitRow(%q)[%d] = %q, want %q", body, i, got[i], tc.fields[i])
			}
		}
	}
	if got := string(unescapeText([]byte(`a\tb\\c\x41\101\n`))); got != "a\tb\\cAA\n" {
		t.Errorf("unescapeText = %q", got)
	}
	v, null := csv.unquote([]byte(`"say ""hi"""`))
	if null || string(v) != `say "hi"` {
		t.Errorf("unquote = %q, %v", v, null)
	}
	if _, null := csv.unquote([]byte(``)); !null {
		t.Error("CSV: an unquoted empty field is NULL")
	}
	if v, null := csv.unquote([]byte(`""`)); null || len(v) != 0 {
		t.Error("CSV: a quoted empty field is the empty string")
	}
	if got := string(csv.quote(nil, "a,b")); got != `"a,b"` {
		t.Errorf("quote = %s", got)
	}
	if got := string(text.quote(nil, "a\tb\\")); got != `a\tb\\` {
		t.Errorf("quote = %s", got)
	}
}

// FuzzCopySplit: no input makes the COPY row scanner panic, and a row
// split and joined again is the row.
func FuzzCopySplit(f *testing.F) {
	f.Add([]byte("1\ta\\tb\n"), false)
	f.Add([]byte("1,\"a\"\"b\",\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, isCSV bool) {
		c := &copyStream{plan: &rewrite.CopyPlan{Delimiter: '\t', Null: `\N`}}
		if isCSV {
			c.plan = &rewrite.CopyPlan{CSV: true, Delimiter: ',', Quote: '"', Escape: '"'}
		}
		n := c.rowEnd(data)
		if n < -1 || n > len(data) {
			t.Fatalf("rowEnd = %d of %d bytes", n, len(data))
		}
		row := data
		if n > 0 {
			row, _ = trimEOL(data[:n])
		}
		fields := c.splitRow(row)
		var joined []byte
		for i, f := range fields {
			if i > 0 {
				joined = append(joined, c.plan.Delimiter)
			}
			joined = append(joined, f...)
			c.unquote(f)
		}
		if string(joined) != string(row) {
			t.Fatalf("split and joined %q, got %q", row, joined)
		}
	})
}
