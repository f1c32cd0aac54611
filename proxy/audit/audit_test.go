package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func testKey(t *testing.T, b byte) []byte {
	k, err := Key(bytes.Repeat([]byte{b}, 32), "main")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writeN(t *testing.T, l *Log, n int) {
	for i := 0; i < n; i++ {
		r := &Record{Role: "app", Client: "127.0.0.1:5000", Database: "db", Statement: "fp",
			Columns: []Column{{Column: "public.t.c", Access: "read", Decrypted: int64(i)}}, Outcome: "ok"}
		if err := l.Write(r, i%2 == 0); err != nil {
			t.Fatal(err)
		}
	}
}

func TestChain(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	key := testKey(t, 1)
	l, err := Open(path, 0, key)
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, l, 5)
	head := l.Head()
	l.Close()
	h, err := Verify([]string{path}, key, "", true)
	if err != nil || h.Records != 5 || h.Seq != 5 {
		t.Fatalf("a whole chain: %v, %v", h, err)
	}
	if _, err := Verify([]string{path}, key, strings.TrimPrefix(head.String(), "seq 5 mac "), true); err != nil {
		t.Fatalf("the head: %v", err)
	}
	if _, err := Verify([]string{path}, testKey(t, 2), "", true); !errors.Is(err, ErrBroken) {
		t.Errorf("another key: %v", err)
	}
	orig, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(orig), "\n")
	for _, tc := range []struct {
		what  string
		lines []string
	}{
		{"record 3 removed", append(append([]string{}, lines[:2]...), lines[3:]...)},
		{"record 2 edited", append([]string{lines[0], strings.Replace(lines[1], `"role":"app"`, `"role":"dba"`, 1)}, lines[2:]...)},
		{"records 2 and 3 swapped", append([]string{lines[0], lines[2], lines[1]}, lines[3:]...)},
		{"the first record removed", lines[1:]},
	} {
		os.WriteFile(path, []byte(strings.Join(tc.lines, "")), 0o600)
		if _, err := Verify([]string{path}, key, "", true); !errors.Is(err, ErrBroken) {
			t.Errorf("%s: %v, want a broken chain", tc.what, err)
		} else {
			t.Logf("%s: %v", tc.what, err)
		}
	}
	// the newest record removed: only the head tells
	os.WriteFile(path, []byte(strings.Join(lines[:4], "")), 0o600)
	if _, err := Verify([]string{path}, key, "", true); err != nil {
		t.Errorf("a chain cut short verifies without its head: %v", err)
	}
	if _, err := Verify([]string{path}, key, strings.TrimPrefix(head.String(), "seq 5 mac "), true); !errors.Is(err, ErrBroken) {
		t.Errorf("the last record removed, checked against the head: %v", err)
	}
	// a log that does not verify is not extended
	os.WriteFile(path, []byte(strings.Join(append([]string{lines[0]}, lines[2:]...), "")), 0o600)
	if _, err := Open(path, 0, key); err == nil {
		t.Errorf("a broken log was opened to be extended")
	}
}

func TestRotationAndResume(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	key := testKey(t, 3)
	l, err := Open(path, 600, key)
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, l, 7)
	l.Close()
	// reopened, the chain goes on from the newest file
	l, err = Open(path, 600, key)
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, l, 4)
	l.Close()
	files, _ := filepath.Glob(path + ".*")
	if len(files) < 2 {
		t.Fatalf("rotated into %v", files)
	}
	var all []string
	for n := 1; n <= len(files); n++ {
		all = append(all, path+"."+string(rune('0'+n)))
	}
	all = append(all, path)
	h, err := Verify(all, key, "", true)
	if err != nil || h.Seq != 11 {
		t.Fatalf("across %d files: %v, %v", len(all), h, err)
	}
	// the oldest file removed (retention): the rest verifies from inside
	if _, err := Verify(all[1:], key, ""); err != nil {
		t.Errorf("without the oldest file: %v", err)
	}
	// a middle file removed: broken
	if len(all) > 2 {
		if _, err := Verify(append([]string{all[0]}, all[2:]...), key, "", true); !errors.Is(err, ErrBroken) {
			t.Errorf("a middle file removed: %v", err)
		}
	}
}

func TestOpenFails(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "no", "such", "dir", "audit.log"), 0, testKey(t, 1)); err == nil {
		t.Errorf("a log in a missing directory opened")
	}
}

// BenchmarkWrite: what one record costs the proxy (JSON, HMAC, write).
func BenchmarkWrite(b *testing.B) {
	l, err := Open(filepath.Join(b.TempDir(), "audit.log"), 0, bytes.Repeat([]byte{1}, 32))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	r := Record{Role: "app", Client: "127.0.0.1:51234", Database: "postgres", Statement: "f9a2356b11f47f20",
		Columns: []Column{{Column: "public.test1.c", Access: "read", Decrypted: 1}}, Outcome: "ok"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := r
		if err := l.Write(&rec, false); err != nil {
			b.Fatal(err)
		}
	}
}

// The hand-written JSON reads back as encoding/json reads it, whatever
// the names hold.
func TestRecordJSON(t *testing.T) {
	for _, s := range []string{"app", `we"ird\role`, "tab\tnew\nline\x01", "ünïcødé", "bad\xffutf8", ""} {
		r := Record{Seq: 7, Time: "t", Role: s, Client: s, Cert: s, Database: s, Statement: "fp",
			Columns: []Column{{Column: s, Access: "read", Decrypted: 3, Encrypted: -1}, {Column: "b", Access: "write"}},
			Outcome: "ok", Prev: "00"}
		var back Record
		if err := json.Unmarshal(r.appendJSON(nil), &back); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		want := r
		if !utf8.ValidString(s) {
			fixed := strings.ToValidUTF8(s, "\ufffd")
			want.Role, want.Client, want.Cert, want.Database, want.Columns[0].Column = fixed, fixed, fixed, fixed, fixed
		}
		if fmt.Sprint(back) != fmt.Sprint(want) {
			t.Errorf("%q: read back as %+v", s, back)
		}
	}
}
