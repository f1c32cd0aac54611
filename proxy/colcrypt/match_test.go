// Tests of level MATCH: values and pattern queries round trip, sizes,
// Bloom filters, Parse's flag rules, and no false negatives of MayMatch
// against a reference LIKE matcher.

package colcrypt

import (
	"bytes"
	"crypto/rand"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// matchTexts are the text vector plaintexts (pgcipher-keys vectors) and
// the text edge values.
var matchTexts = func() []string {
	long := "The quick brown fox jumps over the lazy."
	v := []string{"", "a", "ab", "abc", "b", "Zebra", "zebra", "café",
		long, long[:16] + strings.Repeat("z", len(long)-16)}
	return append(v, edgeValues[Text]...)
}()

// matchPatterns are the vector patterns and a few more.
var matchPatterns = []string{`%a%`, `a%`, `%bra`, `Zeb%`, `%quick brown%`, `%`, ``,
	`caf_`, `%zzz%`, `abc`, `%e\%%`, `%own zz%`,
	`_`, `__`, `___`, `%_%`, `a_c`, `%ebr%`, `%fé`, `ca%é`, `\a\b\c`, `%b\_c%`,
	`The%lazy.`, `%jumps%over%`, `%zzzz%zzzz%`, `0123456789abcdef%`, `%cdef0`, `%\%%`}

func testMatchColumn(t testing.TB) *Column { return testColumn(t, Text, MATCH, "public.t.m") }

func mustPattern(t testing.TB, c *Column, p string) []byte {
	t.Helper()
	q, err := c.EncryptPattern(p, rand.Reader)
	if err != nil {
		t.Fatalf("EncryptPattern(%q): %v", p, err)
	}
	return q
}

func TestMatchValues(t *testing.T) {
	c := testMatchColumn(t)
	eq := testColumn(t, Text, EQ, "public.t.m")
	for _, v := range matchTexts {
		ct := mustEncrypt(t, c, v)
		if want := 88 + len(v); len(ct) != want || Size(Text, MATCH, len(v)) != want {
			t.Errorf("%q: %d bytes, Size %d, want %d", v, len(ct), Size(Text, MATCH, len(v)), want)
		}
		x, err := Parse(ct)
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if x.Header != c.Header() || x.IsQuery() || len(x.Token) != TokenSize || len(x.Bloom) != BloomSize ||
			x.ORE != nil || x.PayloadLen() != len(v) {
			t.Errorf("%q: parts %+v", v, x)
		}
		empty := bytes.Equal(x.Bloom, make([]byte, BloomSize))
		if empty != (len(v) < 3) {
			t.Errorf("%q: Bloom filter %x", v, x.Bloom)
		}
		if got, err := c.Decrypt(ct); err != nil || got != v {
			t.Errorf("%q decrypts to %q, %v", v, got, err)
		}
		// The token is EQ's; the Bloom filter is deterministic.
		if ok, err := Equal(ct, mustEncrypt(t, eq, v)); err != nil || !ok {
			t.Errorf("%q: Equal(MATCH, EQ) = %v, %v", v, ok, err)
		}
		y, _ := Parse(mustEncrypt(t, c, v))
		if !bytes.Equal(x.Bloom, y.Bloom) {
			t.Errorf("%q: Bloom filters differ", v)
		}
		// A value is a candidate for itself as a pattern of one literal
		// run (when it holds no wildcard).
		if !strings.ContainsAny(v, `%_\`) {
			if ok, err := MayMatch(ct, mustPattern(t, c, v)); err != nil || !ok {
				t.Errorf("%q: MayMatch(v, v) = %v, %v", v, ok, err)
			}
		}
	}
	// Bits: three per trigram at most, from the HMAC under k_match.
	x, _ := Parse(mustEncrypt(t, c, "abc"))
	if n := popcount(x.Bloom); n < 1 || n > 3 {
		t.Errorf("one trigram set %d bits", n)
	}
	// Another group, another k_match.
	g, _ := NewColumn(testCEK, Spec{KeyID: 1, Type: Text, Level: MATCH, Label: "public.t.m", Group: "g"})
	y, _ := Parse(mustEncrypt(t, g, "The quick brown fox"))
	z, _ := Parse(mustEncrypt(t, c, "The quick brown fox"))
	if bytes.Equal(y.Bloom, z.Bloom) {
		t.Error("two join groups give the same Bloom filter")
	}
}

func popcount(b []byte) int {
	n := 0
	for _, x := range b {
		for ; x != 0; x &= x - 1 {
			n++
		}
	}
	return n
}

func TestLikeRuns(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		runs    []string
	}{
		{``, nil}, {`%`, nil}, {`%%__%`, nil}, {`abc`, []string{"abc"}},
		{`%a%`, []string{"a"}}, {`%quick brown%`, []string{"quick brown"}},
		{`caf_`, []string{"caf"}}, {`ab_cd%ef`, []string{"ab", "cd", "ef"}},
		{`%e\%%`, []string{"e%"}}, {`\%\_\\`, []string{`%_\`}}, {`a\bc`, []string{"abc"}},
		{`x\_y_z`, []string{"x_y", "z"}}, {`café%`, []string{"café"}},
	} {
		runs, err := LikeRuns(tc.pattern)
		if err != nil {
			t.Errorf("LikeRuns(%q): %v", tc.pattern, err)
			continue
		}
		var got []string
		for _, r := range runs {
			got = append(got, string(r))
		}
		if !slices.Equal(got, tc.runs) {
			t.Errorf("LikeRuns(%q) = %q, want %q", tc.pattern, got, tc.runs)
		}
	}
	for _, bad := range []string{`\`, `abc\`, `%\`, `\\\`} {
		if _, err := LikeRuns(bad); err == nil {
			t.Errorf("LikeRuns(%q) accepted a trailing escape", bad)
		}
	}
}

func TestMatchQueries(t *testing.T) {
	c := testMatchColumn(t)
	bloomOf := func(values ...string) []byte {
		f := make([]byte, BloomSize)
		for _, v := range values {
			x, _ := Parse(mustEncrypt(t, c, v))
			for i := range f {
				f[i] |= x.Bloom[i]
			}
		}
		return f
	}
	for _, tc := range []struct {
		pattern string
		like    []string // the values whose trigrams make up its filter
	}{
		{`%a%`, nil}, {`a%`, nil}, {`%bra`, []string{"bra"}}, {`Zeb%`, []string{"Zeb"}},
		{`%quick brown%`, []string{"quick brown"}}, {`%`, nil}, {``, nil},
		{`caf_`, []string{"caf"}}, {`%zzz%`, []string{"zzz"}}, {`abc`, []string{"abc"}},
		{`%e\%%`, nil}, {`%own zz%`, []string{"own zz"}}, {`abc_def%gh`, []string{"abc", "def"}},
		{`%\%ab%`, []string{"%ab"}}, {`ab\_cd`, []string{"ab_cd"}},
	} {
		q := mustPattern(t, c, tc.pattern)
		if want := 88 + len(tc.pattern); len(q) != want {
			t.Errorf("%q: query of %d bytes, want %d", tc.pattern, len(q), want)
		}
		x, err := Parse(q)
		if err != nil {
			t.Fatalf("%q: %v", tc.pattern, err)
		}
		want := c.Header()
		want.Flags = FlagQuery
		if x.Header != want || !x.IsQuery() {
			t.Errorf("%q: header %+v", tc.pattern, x.Header)
		}
		if !bytes.Equal(x.Bloom, bloomOf(tc.like...)) {
			t.Errorf("%q: Bloom filter %x, want that of %q", tc.pattern, x.Bloom, tc.like)
		}
		if tok, _ := c.Token([]byte(tc.pattern)); !bytes.Equal(x.Token, tok) {
			t.Errorf("%q: token is not the pattern's", tc.pattern)
		}
		if got, err := c.Decrypt(q); err != nil || got != tc.pattern {
			t.Errorf("%q: query decrypts to %q, %v", tc.pattern, got, err)
		}
		// The flag is authenticated: a query does not pass for a value.
		v := bytes.Clone(q)
		v[3] = 0
		if _, err := c.Decrypt(v); err == nil {
			t.Errorf("%q: query with flags cleared decrypted", tc.pattern)
		}
	}
	val := mustEncrypt(t, c, "abc")
	val[3] = FlagQuery
	if _, err := c.Decrypt(val); err == nil {
		t.Error("value with the query flag decrypted")
	}
	if _, err := c.EncryptPattern(`ab\`, rand.Reader); err == nil {
		t.Error("EncryptPattern accepted a trailing escape")
	}
	for _, l := range []Level{RND, EQ, ORD} {
		if _, err := testColumn(t, Text, l, "public.t.m").EncryptPattern("%a%", rand.Reader); err == nil {
			t.Errorf("EncryptPattern at level %s", l)
		}
	}
	if _, err := c.EncryptPattern("%abc%", bytes.NewReader(nil)); err == nil {
		t.Error("EncryptPattern ignored a failing reader")
	}
}

func TestMatchTextOnly(t *testing.T) {
	for _, ty := range Types {
		_, err := NewColumn(testCEK, Spec{KeyID: 1, Type: ty, Level: MATCH, Label: "public.t.c"})
		if (err == nil) != (ty == Text) || ty.HasLevel(MATCH) != (ty == Text) {
			t.Errorf("%s MATCH: NewColumn error %v, HasLevel %v", ty, err, ty.HasLevel(MATCH))
		}
	}
	if l, err := ParseLevel("match"); err != nil || l != MATCH || MATCH.String() != "MATCH" {
		t.Errorf("ParseLevel(match) = %v, %v", l, err)
	}
}

// TestParseFlags: flag 0x01 only at MATCH, no other flag anywhere, MATCH
// only for text.
func TestParseFlags(t *testing.T) {
	c := testMatchColumn(t)
	val := mustEncrypt(t, c, "seven")
	q := mustPattern(t, c, "%eve%")
	set := func(ct []byte, i int, v byte) []byte { b := bytes.Clone(ct); b[i] = v; return b }
	for _, tc := range []struct {
		name string
		ct   []byte
		ok   bool
	}{
		{"MATCH value", val, true},
		{"MATCH query", q, true},
		{"MATCH flags 2", set(val, 3, 2), false},
		{"MATCH flags 3", set(q, 3, 3), false},
		{"MATCH flags 0x80", set(val, 3, 0x80), false},
		{"MATCH flags 0xff", set(q, 3, 0xff), false},
		{"RND flags 1", set(mustEncrypt(t, testColumn(t, Text, RND, "public.t.m"), "seven"), 3, 1), false},
		{"EQ flags 1", set(mustEncrypt(t, testColumn(t, Text, EQ, "public.t.m"), "seven"), 3, 1), false},
		{"ORD flags 1", set(mustEncrypt(t, testColumn(t, Text, ORD, "public.t.m"), "seven"), 3, 1), false},
		{"bytea MATCH", set(val, 1, byte(Bytea)), false},
		{"int4 MATCH query", set(q, 1, byte(Int4)), false},
		{"numeric MATCH", set(val, 1, byte(Numeric)), false},
		{"no payload", val[:HeaderSize+TokenSize+BloomSize+NonceSize+TagSize-1], false},
		{"empty payload", val[:HeaderSize+TokenSize+BloomSize+NonceSize+TagSize], true},
		{"no Bloom filter", val[:HeaderSize+TokenSize+BloomSize-1], false},
	} {
		x, err := Parse(tc.ct)
		if (err == nil) != tc.ok {
			t.Errorf("%s: Parse error %v", tc.name, err)
		}
		if err == nil && (len(x.Bloom) != BloomSize || x.IsQuery() != (tc.ct[3] == FlagQuery)) {
			t.Errorf("%s: parts %+v", tc.name, x)
		}
	}
}

func TestMayMatchRefuses(t *testing.T) {
	c := testMatchColumn(t)
	val := mustEncrypt(t, c, "seven")
	q := mustPattern(t, c, "%eve%")
	if ok, err := MayMatch(val, q); err != nil || !ok {
		t.Fatalf("MayMatch = %v, %v", ok, err)
	}
	otherGroup, _ := NewColumn(testCEK, Spec{KeyID: 1, Type: Text, Level: MATCH, Label: "public.t.m", Group: "g"})
	otherKey, _ := NewColumn(bytes.Repeat([]byte{7}, 32), Spec{KeyID: 2, Type: Text, Level: MATCH, Label: "public.t.m"})
	eq := testColumn(t, Text, EQ, "public.t.m")
	ord := testColumn(t, Text, ORD, "public.t.m")
	for _, tc := range []struct {
		name         string
		value, query []byte
	}{
		{"other group", mustEncrypt(t, otherGroup, "seven"), q},
		{"other key", val, mustPattern(t, otherKey, "%eve%")},
		{"EQ value", mustEncrypt(t, eq, "seven"), q},
		{"ORD value", mustEncrypt(t, ord, "seven"), q},
		{"EQ query", val, mustEncrypt(t, eq, "eve")},
		{"malformed", val[:20], q},
	} {
		if _, err := MayMatch(tc.value, tc.query); err == nil {
			t.Errorf("%s: MayMatch accepted", tc.name)
		}
	}
	// MATCH values have no ORE part.
	if _, err := Compare(val, mustEncrypt(t, c, "eight")); err == nil {
		t.Error("Compare on MATCH values")
	}
	if _, err := Compare(val, mustEncrypt(t, ord, "eight")); err == nil {
		t.Error("Compare of MATCH with ORD")
	}
}

// likeItem is one element of a parsed LIKE pattern: a literal character,
// `_` or `%`.
type likeItem struct {
	lit      string
	one, any bool
}

// like is a reference LIKE matcher (default escape `\`): `_` is one
// character, read as UTF-8 with every invalid byte a character of its
// own, as PostgreSQL's UTF-8 LIKE does for what it accepts.
func like(value, pattern string) bool {
	var items []likeItem
	for i := 0; i < len(pattern); {
		switch pattern[i] {
		case '%':
			items = append(items, likeItem{any: true})
			i++
			continue
		case '_':
			items = append(items, likeItem{one: true})
			i++
			continue
		case '\\':
			i++
		}
		_, n := utf8.DecodeRuneInString(pattern[i:])
		items = append(items, likeItem{lit: pattern[i : i+n]})
		i += n
	}
	var chars []string
	for i := 0; i < len(value); {
		_, n := utf8.DecodeRuneInString(value[i:])
		chars = append(chars, value[i:i+n])
		i += n
	}
	// m[j]: the items so far match chars[:j].
	m := make([]bool, len(chars)+1)
	m[0] = true
	for _, it := range items {
		next := make([]bool, len(chars)+1)
		for j := range m {
			switch {
			case it.any:
				next[j] = m[j] || j > 0 && next[j-1]
			case j == 0:
			case it.one:
				next[j] = m[j-1]
			default:
				next[j] = m[j-1] && chars[j-1] == it.lit
			}
		}
		m = next
	}
	return m[len(chars)]
}

func TestLikeReference(t *testing.T) {
	for _, tc := range []struct {
		v, p string
		want bool
	}{
		{"abc", "abc", true}, {"abc", "ab", false}, {"abc", "a%", true}, {"abc", "%c", true},
		{"abc", "_b_", true}, {"abc", "__", false}, {"", "%", true}, {"", "", true}, {"", "_", false},
		{"café", "caf_", true}, {"café", "caf__", false}, {"e%", `%e\%%`, true}, {"ex", `%e\%%`, false},
		{"a_c", `a\_c`, true}, {"abc", `a\_c`, false}, {"Zebra", "zeb%", false},
	} {
		if got := like(tc.v, tc.p); got != tc.want {
			t.Errorf("like(%q, %q) = %v", tc.v, tc.p, got)
		}
	}
}

// randomPattern derives a pattern from a value (so that many match): a
// random substring, some characters replaced by `_`, some runs by `%`,
// wildcards and escaped literals around them; or, half of the time, a
// random pattern from a small alphabet.
func randomPattern(r *mrand.Rand, v string) string {
	escape := func(s string) string {
		return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
	}
	if r.IntN(2) == 0 || v == "" {
		var b strings.Builder
		for n := r.IntN(8); n > 0; n-- {
			b.WriteString([]string{"a", "b", "A", "%", "_", `\%`, `\_`, `\\`, "é", "z"}[r.IntN(10)])
		}
		return b.String()
	}
	i := r.IntN(len(v) + 1)
	j := i + r.IntN(len(v)-i+1)
	var b strings.Builder
	if i > 0 {
		b.WriteString([]string{"%", "_%", "%_"}[r.IntN(3)])
	}
	for k := i; k < j; k++ {
		switch r.IntN(8) {
		case 0:
			b.WriteByte('_')
		case 1:
			b.WriteByte('%')
		default:
			b.WriteString(escape(v[k : k+1]))
		}
	}
	if j < len(v) {
		b.WriteString("%")
	}
	return b.String()
}

func randomText(r *mrand.Rand) string {
	var b strings.Builder
	for n := r.IntN(24); n > 0; n-- {
		b.WriteString([]string{"a", "b", "c", "A", "%", "_", `\`, "é", " ", "z"}[r.IntN(10)])
	}
	return b.String()
}

// TestMatchNoFalseNegatives: whenever a value matches a pattern, the
// server's MayMatch is true.
func TestMatchNoFalseNegatives(t *testing.T) {
	c := testMatchColumn(t)
	r := mrand.New(mrand.NewPCG(13, 14))
	values := slices.Clone(matchTexts)
	for i := 0; i < 200; i++ {
		values = append(values, randomText(r))
	}
	patterns := slices.Clone(matchPatterns)
	for _, v := range values {
		for k := 0; k < 3; k++ {
			patterns = append(patterns, randomPattern(r, v))
		}
	}
	patterns = slices.DeleteFunc(patterns, func(p string) bool {
		_, err := LikeRuns(p)
		return err != nil
	})
	cts := make([][]byte, len(values))
	for i, v := range values {
		cts[i] = mustEncrypt(t, c, v)
	}
	matches, candidates, pairs := 0, 0, 0
	for _, p := range patterns {
		q := mustPattern(t, c, p)
		for i, v := range values {
			ok, err := MayMatch(cts[i], q)
			if err != nil {
				t.Fatal(err)
			}
			pairs++
			if ok {
				candidates++
			}
			if like(v, p) {
				matches++
				if !ok {
					t.Errorf("%q LIKE %q but MayMatch is false", v, p)
				}
			}
		}
	}
	t.Logf("%d pairs, %d match, %d candidates", pairs, matches, candidates)
	if matches < pairs/50 || candidates == pairs {
		t.Errorf("weak test: %d pairs, %d match, %d candidates", pairs, matches, candidates)
	}
	// The vector patterns against the vector values: a few exact answers.
	for _, tc := range []struct {
		v, p string
		want bool
	}{
		{"Zebra", "%bra", true}, {"zebra", "Zeb%", false}, {"abc", "%zzz%", false},
		{"The quick brown zzzzzzzzzzzzzzzzzzzzzzzz", "%own zz%", true},
	} {
		ok, _ := MayMatch(mustEncrypt(t, c, tc.v), mustPattern(t, c, tc.p))
		if like(tc.v, tc.p) != tc.want || tc.want && !ok {
			t.Errorf("%q LIKE %q: like %v, MayMatch %v", tc.v, tc.p, like(tc.v, tc.p), ok)
		}
	}
}

func TestLikeEscape(t *testing.T) {
	for _, tc := range []struct {
		pattern, esc, want string
		bad                bool
	}{
		{pattern: `a\%b`, esc: `\`, want: `a\%b`},
		{pattern: `a!%b!!`, esc: "!", want: `a\%b\!`},
		{pattern: `a\b%`, esc: "!", want: `a\\b%`},
		{pattern: `a\b%`, esc: "", want: `a\\b%`},
		{pattern: `50#%#_é`, esc: "#", want: `50\%\_é`},
		{pattern: `ab!`, esc: "!", bad: true},
		{pattern: `ab`, esc: "!!", bad: true},
	} {
		got, err := LikeEscape(tc.pattern, tc.esc)
		if tc.bad != (err != nil) || got != tc.want {
			t.Errorf("LikeEscape(%q, %q) = %q, %v; want %q (error: %v)", tc.pattern, tc.esc, got, err, tc.want, tc.bad)
		}
	}
}
