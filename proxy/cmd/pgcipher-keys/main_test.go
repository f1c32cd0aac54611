// Tests of pgcipher-keys: the committed vector file is what the generator
// writes and decrypts to its plaintexts; the subcommands work end to end.

package main

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

const vectorFile = "../../../columns/test/data/vectors.csv"

func TestVectorsFileIsCurrent(t *testing.T) {
	want, err := vectors()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(vectorFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the generator's output; regenerate with\n"+
			"  go run ./cmd/pgcipher-keys vectors -o ../columns/test/data/vectors.csv", vectorFile)
	}
}

func TestTenantVectorsFileIsCurrent(t *testing.T) {
	want, err := tenantVectors()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../../columns/test/data/tenant_vectors.csv")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("columns/test/data/tenant_vectors.csv differs from the generator's output; regenerate with\n" +
			"  go run ./cmd/pgcipher-keys vectors -tenants -o ../columns/test/data/tenant_vectors.csv")
	}
}

func TestVectorsDecrypt(t *testing.T) {
	f, err := os.Open(vectorFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(recs[0], ",") != "type,level,key_id,grp,label,n,plain,ct" {
		t.Fatalf("header %v", recs[0])
	}
	seen := map[string]int{} // type/level/key → rows
	cts := map[string]bool{}
	for i, r := range recs[1:] {
		ty, err := colcrypt.ParseType(r[0])
		if err != nil {
			t.Fatal(err)
		}
		query := r[1] == patternLevel || r[1] == foldedPatternLevel
		folded := r[1] == foldedLevel || r[1] == foldedPatternLevel
		l := colcrypt.MATCH
		format := ""
		switch r[1] {
		case ore2Level, ore2QLevel:
			l, format = colcrypt.ORD, "2"
		case ore12Level:
			l, format = colcrypt.ORD, "1+2"
		}
		if !query && !folded && format == "" {
			if l, err = colcrypt.ParseLevel(r[1]); err != nil {
				t.Fatal(err)
			}
		}
		keyID, _ := strconv.Atoi(r[2])
		if n, _ := strconv.Atoi(r[5]); n != i+1 {
			t.Fatalf("row %d numbered %s", i+1, r[5])
		}
		col, err := colcrypt.NewColumn(vectorCEK(uint32(keyID)), colcrypt.Spec{
			KeyID: uint32(keyID), Type: ty, Level: l, Label: r[4], Group: r[3], OREFormat: format,
			CaseInsensitive: folded,
		})
		if err != nil {
			t.Fatal(err)
		}
		plain := r[6]
		ct, _ := base64.StdEncoding.DecodeString(r[7])
		want := col.Header()
		if query || r[1] == ore2QLevel {
			want.Flags |= colcrypt.FlagQuery
		}
		if x, err := colcrypt.Parse(ct); err != nil || x.Header != want {
			t.Errorf("row %d: header %+v, %v", i+1, x, err)
		}
		seen[r[0]+"/"+r[1]+"/"+r[2]]++
		if r[1] == ore2QLevel {
			// a query operand has no payload: it must equal its value's
			// row (same plaintext, format 2) in the server's order
			if _, err := col.DecryptText(r[7]); err == nil {
				t.Errorf("row %d: an order query decrypted", i+1)
			}
			continue
		}
		got, err := col.DecryptText(r[7])
		if err != nil {
			t.Fatalf("row %d (%s %s %q): %v", i+1, ty, l, plain, err)
		}
		if query && got != plain {
			t.Errorf("row %d (pattern): %q decrypts to %q", i+1, plain, got)
		} else if !query && !sameValue(t, ty, plain, got) {
			t.Errorf("row %d (%s %s): %q decrypts to %q", i+1, ty, l, plain, got)
		}
		if cts[r[7]] {
			t.Errorf("row %d: repeated ciphertext", i+1)
		}
		cts[r[7]] = true
	}
	for _, ty := range colcrypt.Types {
		for _, l := range colcrypt.Levels {
			if !ty.HasLevel(l) {
				if seen[ty.String()+"/"+l.String()+"/1"] > 0 {
					t.Errorf("rows for %s %s", ty, l)
				}
				continue
			}
			if seen[ty.String()+"/"+l.String()+"/1"] < 4 {
				t.Errorf("few rows for %s %s", ty, l)
			}
		}
	}
	if seen["text/PATTERN/1"] != len(vectorPatterns) {
		t.Errorf("%d pattern rows, want %d", seen["text/PATTERN/1"], len(vectorPatterns))
	}
	for _, k := range []string{"int4/EQ/2", "int4/ORD/2", "text/EQ/2", "text/ORD/2"} {
		if seen[k] == 0 {
			t.Errorf("no rows for %s", k)
		}
	}
}

// sameValue compares a vector's plaintext with its decryption: numeric by
// the text, float8 by value and NaN-ness, timestamptz by instant, others
// by PostgreSQL's output form.
func sameValue(t *testing.T, ty colcrypt.Type, plain, got string) bool {
	switch ty {
	case colcrypt.Numeric:
		return plain == got
	case colcrypt.Float8:
		a, err1 := strconv.ParseFloat(plain, 64)
		b, err2 := strconv.ParseFloat(got, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("float8 %q / %q: %v %v", plain, got, err1, err2)
		}
		return a == b || math.IsNaN(a) && math.IsNaN(b)
	}
	p, err := colcrypt.Encode(ty, plain)
	if err != nil {
		t.Fatal(err)
	}
	if ty == colcrypt.Timestamptz {
		q, err := colcrypt.Encode(ty, got)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Equal(p, q)
	}
	want, _ := colcrypt.Decode(ty, p)
	return want == got
}

// TestVectorMatchRows: the MATCH rows are the text plaintexts, the
// PATTERN rows the patterns, and every pattern of the form %literal% is a
// candidate (MayMatch) for every value containing its literal.
func TestVectorMatchRows(t *testing.T) {
	rows, err := vectorRows()
	if err != nil {
		t.Fatal(err)
	}
	var values, patterns []vectorRow
	for _, r := range rows {
		switch {
		case r.tag == foldedLevel || r.tag == foldedPatternLevel:
		case r.query:
			patterns = append(patterns, r)
		case r.level == colcrypt.MATCH:
			values = append(values, r)
		}
	}
	if len(values) != 2*len(vectorPlains(colcrypt.Text, nil)) || len(patterns) != len(vectorPatterns) {
		t.Fatalf("%d MATCH rows, %d PATTERN rows", len(values), len(patterns))
	}
	checked := 0
	for _, q := range patterns {
		lit, ok := strings.CutPrefix(q.plain, "%")
		lit, ok2 := strings.CutSuffix(lit, "%")
		if !ok || !ok2 || strings.ContainsAny(lit, `%_\`) {
			continue
		}
		for _, v := range values {
			if !strings.Contains(v.plain, lit) {
				continue
			}
			checked++
			if ok, err := colcrypt.MayMatch(v.ct, q.ct); err != nil || !ok {
				t.Errorf("%q LIKE %q: MayMatch = %v, %v", v.plain, q.plain, ok, err)
			}
		}
	}
	if checked < 10 {
		t.Errorf("only %d pairs checked", checked)
	}
}

// TestVectorFoldedRows: every folded pattern selects every folded value
// that ILIKE (lower case on both sides) matches, and no exact row.
func TestVectorFoldedRows(t *testing.T) {
	rows, err := vectorRows()
	if err != nil {
		t.Fatal(err)
	}
	var values, patterns, exact []vectorRow
	for _, r := range rows {
		switch {
		case r.tag == foldedLevel:
			values = append(values, r)
		case r.tag == foldedPatternLevel:
			patterns = append(patterns, r)
		case r.level == colcrypt.MATCH && !r.query:
			exact = append(exact, r)
		}
	}
	if len(values) != len(foldedPlains) || len(patterns) != len(foldedPatterns) {
		t.Fatalf("%d folded values, %d folded patterns", len(values), len(patterns))
	}
	checked := 0
	for _, q := range patterns {
		lit := strings.Trim(q.plain, "%")
		for _, v := range values {
			if strings.ContainsAny(lit, `%_\`) || !strings.Contains(strings.ToLower(v.plain), strings.ToLower(lit)) {
				continue
			}
			checked++
			if ok, err := colcrypt.MayMatch(v.ct, q.ct); err != nil || !ok {
				t.Errorf("%q ILIKE %q: MayMatch = %v, %v", v.plain, q.plain, ok, err)
			}
		}
		if _, err := colcrypt.MayMatch(exact[0].ct, q.ct); err == nil {
			t.Errorf("a folded query tested an exact filter")
		}
	}
	if checked < 8 {
		t.Errorf("only %d pairs checked", checked)
	}
}

func TestVectorPlainsCoverRequest(t *testing.T) {
	text := vectorPlains(colcrypt.Text, nil)
	a, b := text[len(text)-2], text[len(text)-1]
	if len(a) != 40 || len(b) != 40 || a[:16] != b[:16] || a == b {
		t.Errorf("long text vectors %q %q", a, b)
	}
}

func TestCSVField(t *testing.T) {
	for in, want := range map[string]string{
		"": `""`, "a": "a", "a,b": `"a,b"`, `say "x"`: `"say ""x"""`, `\x`: `\x`, "a\nb": "\"a\nb\"",
	} {
		if got := csvField(in); got != want {
			t.Errorf("csvField(%q) = %q, want %q", in, got, want)
		}
	}
}

func runCmd(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(args, strings.NewReader(stdin), &out)
	return out.String(), err
}

func TestCommands(t *testing.T) {
	cmkHex, err := runCmd(t, "", "new-cmk")
	if err != nil || !regexp.MustCompile(`^[0-9a-f]{64}\n$`).MatchString(cmkHex) {
		t.Fatalf("new-cmk: %q, %v", cmkHex, err)
	}
	dir := t.TempDir()
	cmkFile := filepath.Join(dir, "cmk")
	if err := os.WriteFile(cmkFile, []byte(cmkHex), 0o600); err != nil {
		t.Fatal(err)
	}
	sql, err := runCmd(t, "", "new-cek", "--cmk-file", cmkFile, "--cmk-name", "it's", "--key-name", "k1")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^SELECT pgcipher\.add_column_key\('k1', 'it''s', '\\x([0-9a-f]{122})'\);\n$`).FindStringSubmatch(sql)
	if m == nil {
		t.Fatalf("new-cek printed %q", sql)
	}
	common := []string{"--cmk-command", "cat " + cmkFile, "--cmk-name", "it's", "--key-name", "k1",
		"--wrapped-cek", `\x` + m[1], "--key-id", "3", "--type", "numeric", "--level", "ORD", "--label", "public.t.c"}
	in := "1.50\n-2\nNaN\n"
	enc, err := runCmd(t, in, append([]string{"encrypt"}, common...)...)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(enc, "\n"); n != 3 {
		t.Fatalf("encrypt wrote %d lines", n)
	}
	dec, err := runCmd(t, enc, append([]string{"decrypt"}, common...)...)
	if err != nil || dec != in {
		t.Fatalf("decrypt: %q, %v", dec, err)
	}
	// MATCH values and pattern queries.
	match := slices.Clone(common)
	match[slices.Index(match, "numeric")] = "text"
	match[slices.Index(match, "ORD")] = "MATCH"
	vals := "The quick brown fox\nZebra\n"
	encV, err := runCmd(t, vals, append([]string{"encrypt"}, match...)...)
	if err != nil {
		t.Fatal(err)
	}
	pats := "%quick%\ncaf_\n%e\\%%\n"
	encP, err := runCmd(t, pats, append([]string{"encrypt", "--pattern"}, match...)...)
	if err != nil {
		t.Fatal(err)
	}
	if dec, err := runCmd(t, encV+encP, append([]string{"decrypt"}, match...)...); err != nil || dec != vals+pats {
		t.Fatalf("decrypt MATCH: %q, %v", dec, err)
	}
	v0, _ := base64.StdEncoding.DecodeString(strings.Split(encV, "\n")[0])
	q0, _ := base64.StdEncoding.DecodeString(strings.Split(encP, "\n")[0])
	if len(v0) != 88+19 || len(q0) != 88+7 || q0[3] != colcrypt.FlagQuery || v0[3] != 0 {
		t.Errorf("MATCH sizes %d, %d, flags %d, %d", len(v0), len(q0), v0[3], q0[3])
	}
	if ok, err := colcrypt.MayMatch(v0, q0); err != nil || !ok {
		t.Errorf("MayMatch = %v, %v", ok, err)
	}
	if _, err := runCmd(t, "ab\\\n", append([]string{"encrypt", "--pattern"}, match...)...); err == nil {
		t.Error("--pattern accepted a trailing escape")
	}
	if _, err := runCmd(t, "%a%\n", append([]string{"encrypt", "--pattern"}, common...)...); err == nil {
		t.Error("--pattern accepted level ORD")
	}
	if _, err := runCmd(t, encP, append([]string{"decrypt", "--pattern"}, match...)...); err == nil {
		t.Error("decrypt accepted --pattern")
	}
	intMatch := slices.Clone(common)
	intMatch[slices.Index(intMatch, "numeric")] = "int4"
	intMatch[slices.Index(intMatch, "ORD")] = "MATCH"
	if _, err := runCmd(t, "1\n", append([]string{"encrypt"}, intMatch...)...); err == nil {
		t.Error("encrypt accepted int4 MATCH")
	}
	// Another group: the header differs, decryption fails.
	if _, err := runCmd(t, enc, append([]string{"decrypt", "--group", "g"}, common...)...); err == nil {
		t.Error("decrypted under another group")
	}
	// Wrong names fail unwrapping.
	bad := append([]string{"decrypt"}, common...)
	bad[6] = "k2"
	if _, err := runCmd(t, enc, bad...); err == nil || !strings.Contains(err.Error(), "unwrapping") {
		t.Errorf("wrong key name: %v", err)
	}
	if _, err := runCmd(t, "x\n", append([]string{"encrypt"}, common...)...); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad value: %v", err)
	}
	for _, args := range [][]string{
		nil, {"nope"}, {"new-cmk", "extra"},
		{"new-cek", "--cmk-file", cmkFile, "--cmk-command", "true", "--cmk-name", "a", "--key-name", "b"},
		{"new-cek", "--cmk-file", cmkFile},
		{"encrypt", "--type", "int4", "--level", "EQ"},
	} {
		if _, err := runCmd(t, "", args...); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

func TestVectorCMKWrapsVectorCEKs(t *testing.T) {
	// The fixed CMK is part of the fixture; check it is a valid key.
	cmk, err := colcrypt.ParseCMK([]byte(vectorCMKHex))
	if err != nil {
		t.Fatal(err)
	}
	w, err := colcrypt.WrapCEK(cmk, vectorCEK(1), "vec-cmk", "vec1", bytes.NewReader(make([]byte, 12)))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := colcrypt.UnwrapCEK(cmk, w, "vec-cmk", "vec1"); err != nil || hex.EncodeToString(got) != vectorCEK1Hex {
		t.Fatal(got, err)
	}
}

func TestTenantCommands(t *testing.T) {
	dir := t.TempDir()
	cmkHex, _ := runCmd(t, "", "new-cmk")
	cmkFile, ring := filepath.Join(dir, "cmk"), filepath.Join(dir, "keyring")
	os.WriteFile(cmkFile, []byte(cmkHex), 0o600)
	key := []string{"--cmk-file", cmkFile, "--cmk-name", "main", "--keyring", ring}
	if out, err := runCmd(t, "", append([]string{"keyring-init"}, key...)...); err != nil || !strings.Contains(out, "epoch 1") {
		t.Fatalf("keyring-init: %q %v", out, err)
	}
	if _, err := runCmd(t, "", append([]string{"keyring-init"}, key...)...); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("keyring-init over a keyring: %v", err)
	}
	out, err := runCmd(t, "", append([]string{"add-tenant", "--tenant", "o'hara"}, key...)...)
	re := regexp.MustCompile(`(?m)^SELECT pgcipher\.add_tenant_key\('(.*)', ([0-9]+), 1, '\\x[0-9a-f]{122}'\);$`)
	if err != nil || !re.MatchString(out) || re.FindStringSubmatch(out)[1] != "o''hara" {
		t.Fatalf("add-tenant: %q %v", out, err)
	}
	out, err = runCmd(t, "t1\n\nt2\nt3\n", append([]string{"add-tenant", "--tenant", "-"}, key...)...)
	if got := re.FindAllStringSubmatch(out, -1); err != nil || len(got) != 3 || got[2][1] != "t3" {
		t.Fatalf("add-tenant from standard input: %q %v", out, err)
	}
	if _, err := runCmd(t, "", append([]string{"add-tenant"}, key...)...); err == nil {
		t.Error("add-tenant without --tenant")
	}
	other := []string{"--cmk-file", cmkFile, "--cmk-name", "other", "--keyring", ring, "--tenant", "t"}
	if _, err := runCmd(t, "", append([]string{"add-tenant"}, other...)...); err == nil {
		t.Error("add-tenant with another CMK name read the keyring")
	}
}
