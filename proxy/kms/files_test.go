// Tests of what needs no server: private files, crash-safe key files,
// keys as hex, one-line errors.

package kms

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testKeyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

func writeFile(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // the umask does not apply to chmod
		t.Fatal(err)
	}
	return p
}

func TestReadPrivateFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		mode os.FileMode
		want string // "" for success, else a part of the message
	}{
		{"0600", 0o600, ""},
		{"0400", 0o400, ""},
		{"0700", 0o700, ""},
		{"0644", 0o644, "has permissions 0644: it must not be accessible by group or others (chmod 600 "},
		{"0640", 0o640, "has permissions 0640"},
		{"0604", 0o604, "has permissions 0604"},
		{"0620", 0o620, "has permissions 0620"},
		{"0602", 0o602, "has permissions 0602"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, dir, "token-"+tc.name, "s.secret\n", tc.mode)
			b, err := ReadPrivateFile(p, "token file")
			if tc.want == "" {
				if err != nil || string(b) != "s.secret\n" {
					t.Fatalf("ReadPrivateFile = %q, %v", b, err)
				}
				return
			}
			if !errors.Is(err, ErrUnsafeFile) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ReadPrivateFile: %v, want ErrUnsafeFile with %q", err, tc.want)
			}
			if b != nil || strings.Contains(err.Error(), "s.secret") {
				t.Fatalf("refused file read or quoted: %q, %v", b, err)
			}
		})
	}
	t.Run("directory", func(t *testing.T) {
		if _, err := ReadPrivateFile(t.TempDir(), "token file"); !errors.Is(err, ErrUnsafeFile) ||
			!strings.Contains(err.Error(), "is not a regular file") {
			t.Fatalf("ReadPrivateFile(dir): %v", err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		p := filepath.Join(dir, "nonesuch")
		_, err := ReadPrivateFile(p, "token file")
		if err == nil || err.Error() != "token file "+p+": no such file or directory" {
			t.Fatalf("ReadPrivateFile(missing): %v", err)
		}
	})
	t.Run("symlink to a private file", func(t *testing.T) {
		p := writeFile(t, dir, "target", "s.x", 0o600)
		l := filepath.Join(dir, "link")
		if err := os.Symlink(p, l); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadPrivateFile(l, "token file"); err != nil {
			t.Fatalf("ReadPrivateFile(symlink): %v", err)
		}
	})
	t.Run("another owner", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to give a file to another user")
		}
		p := writeFile(t, dir, "foreign", "s.x", 0o600)
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		_, err := ReadPrivateFile(p, "token file")
		if !errors.Is(err, ErrUnsafeFile) || !strings.Contains(err.Error(), "is owned by uid 65534, not by the user running pgcipher-kms (uid 0)") {
			t.Fatalf("ReadPrivateFile(foreign): %v", err)
		}
	})
}

func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		content, want, err string
	}{
		{"s.abc\n", "s.abc", ""},
		{"  s.abc \r\n\n", "s.abc", ""},
		{"", "", "is empty"},
		{" \n", "", "is empty"},
		{"s.abc\ns.def\n", "", "holds more than one word"},
		{"s.abc s.def", "", "holds more than one word"},
	} {
		p := writeFile(t, dir, "token", tc.content, 0o600)
		got, err := ReadToken(p)
		if tc.err == "" {
			if err != nil || got != tc.want {
				t.Errorf("ReadToken(%q) = %q, %v", tc.content, got, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "s.abc") {
			t.Errorf("ReadToken(%q): %v, want %q (and no token)", tc.content, err, tc.err)
		}
	}
}

func TestWriteNewFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "kek.wrapped")
	if err := WriteNewFile(p, []byte("vault:v1:abc\n")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "vault:v1:abc\n" {
		t.Fatalf("written %q, %v", b, err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want 0600", fi.Mode().Perm())
	}

	// never over an existing file, nor through a symlink
	err = WriteNewFile(p, []byte("other\n"))
	if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), p+" exists: a key file is never overwritten") {
		t.Fatalf("second WriteNewFile: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "vault:v1:abc\n" {
		t.Fatalf("overwritten: %q", b)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	if err := WriteNewFile(dangling, []byte("x")); !errors.Is(err, ErrExists) {
		t.Fatalf("WriteNewFile over a dangling symlink: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "nowhere")); !os.IsNotExist(err) {
		t.Fatal("written through a symlink")
	}

	// a relative path, in the working directory
	t.Chdir(dir)
	if err := WriteNewFile("relative", []byte("r\n")); err != nil {
		t.Fatal(err)
	}

	// no temporary file left by any of this
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "dangling kek.wrapped relative" {
		t.Errorf("directory holds %v", names)
	}

	if err := WriteNewFile(filepath.Join(dir, "no", "such", "dir"), []byte("x")); err == nil ||
		!strings.Contains(err.Error(), "creating a temporary file beside") {
		t.Errorf("WriteNewFile into a missing directory: %v", err)
	}
}

func TestParseKey(t *testing.T) {
	want := []byte{}
	for i := range 32 {
		want = append(want, byte(i))
	}
	for _, tc := range []struct {
		in, err string
	}{
		{testKeyHex, ""},
		{testKeyHex + "\n", ""},
		{"  " + strings.ToUpper(testKeyHex) + "\r\n", ""},
		{"", "is not 64 hex digits: it has 0 characters"},
		{testKeyHex[:62], "it has 62 characters"},
		{testKeyHex + "00", "it has 66 characters"},
		{testKeyHex[:63] + "g", "character 64 is not a hexadecimal digit"},
		{testKeyHex[:31] + " " + testKeyHex[32:], "character 32 is not a hexadecimal digit"},
		{"correct horse battery staple", "it has 28 characters"},
	} {
		k, err := ParseKey([]byte(tc.in), `field "kek"`)
		if tc.err == "" {
			if err != nil || !bytes.Equal(k, want) {
				t.Errorf("ParseKey(%.20q) = %x, %v", tc.in, k, err)
			}
			continue
		}
		if !errors.Is(err, ErrBadKey) || err.Error() != `field "kek" `+tc.err && !strings.HasSuffix(err.Error(), tc.err) {
			t.Errorf("ParseKey(%.20q): %v, want ErrBadKey ...%s", tc.in, err, tc.err)
		}
		if err != nil && len(tc.in) > 8 && strings.Contains(err.Error(), strings.TrimSpace(tc.in)[:8]) {
			t.Errorf("ParseKey(%.20q): the message quotes the value: %v", tc.in, err)
		}
	}
}

func TestWriteKey(t *testing.T) {
	k, _ := ParseKey([]byte(strings.ToUpper(testKeyHex)), "k")
	var b bytes.Buffer
	if err := WriteKey(&b, k); err != nil {
		t.Fatal(err)
	}
	if b.String() != testKeyHex+"\n" {
		t.Fatalf("WriteKey wrote %q", b.String())
	}
}

func TestErrorOneLine(t *testing.T) {
	cause := errors.New("cause")
	e := newError(ErrDenied, cause, "Error making API request.\n\nURL: GET x\nCode: 403.\n")
	if e.Error() != "Error making API request.; URL: GET x; Code: 403." {
		t.Errorf("one line: %q", e.Error())
	}
	if !errors.Is(e, ErrDenied) || !errors.Is(e, cause) || errors.Is(e, ErrNotFound) {
		t.Errorf("kinds of %v wrong", e)
	}
}
