// Tests of CMK loading, CEK wrapping and sub-key derivation.

package colcrypt

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testCMKHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

func TestParseCMK(t *testing.T) {
	want, _ := hex.DecodeString(testCMKHex)
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{testCMKHex, true},
		{testCMKHex + "\n", true},
		{"  " + strings.ToUpper(testCMKHex) + "\r\n", true},
		{"", false},
		{"\n", false},
		{testCMKHex[:62], false},
		{testCMKHex + "00", false},
		{testCMKHex[:63] + "g", false},
		{testCMKHex[:32] + " " + testCMKHex[32:], false},
		{strings.Repeat(" ", 2000) + testCMKHex, false},
	} {
		k, err := ParseCMK([]byte(tc.in))
		if tc.ok != (err == nil) || (tc.ok && !bytes.Equal(k, want)) {
			t.Errorf("ParseCMK(%.20q) = %x, %v", tc.in, k, err)
		}
		if err != nil && strings.Contains(err.Error(), testCMKHex[:16]) {
			t.Errorf("error quotes the key: %v", err)
		}
	}
}

func TestLoadCMKFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	bad := filepath.Join(dir, "bad")
	os.WriteFile(good, []byte(testCMKHex+"\n"), 0o600)
	os.WriteFile(bad, []byte("not a key\n"), 0o600)
	if _, err := LoadCMKFile(good); err != nil {
		t.Error(err)
	}
	if _, err := LoadCMKFile(bad); err == nil {
		t.Error("garbage file accepted")
	}
	if _, err := LoadCMKFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestLoadCMKCommand(t *testing.T) {
	ctx := context.Background()
	if _, err := LoadCMKCommand(ctx, "echo "+testCMKHex); err != nil {
		t.Errorf("good command: %v", err)
	}
	for _, tc := range []struct{ name, cmd, want string }{
		{"garbage", "echo hello", "hex"},
		{"empty output", "true", "empty"},
		{"failure", "echo " + testCMKHex + "; exit 3", "exit status 3"},
		{"signal", "kill -9 $$", "killed"},
		{"long", "head -c 5000 /dev/zero | tr '\\0' a", "more than"},
		{"empty command", " ", "empty"},
	} {
		_, err := LoadCMKCommand(ctx, tc.cmd)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
	// A hanging command: the 30 s limit is CMKCommandTimeout; a shorter
	// deadline from the context exercises the same path quickly.
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := LoadCMKCommand(ctx, "sleep 20; echo "+testCMKHex)
	if err == nil || !strings.Contains(err.Error(), "did not finish") {
		t.Errorf("hanging command: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("hanging command took %v to give up", d)
	}
}

func TestWrapUnwrap(t *testing.T) {
	cmk, _ := hex.DecodeString(testCMKHex)
	cek, err := NewCEK(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	w, err := WrapCEK(cmk, cek, "cmk1", "cek1", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != WrappedCEKSize || w[0] != 1 {
		t.Fatalf("wrapped key: %d bytes, first %d", len(w), w[0])
	}
	got, err := UnwrapCEK(cmk, w, "cmk1", "cek1")
	if err != nil || !bytes.Equal(got, cek) {
		t.Fatalf("UnwrapCEK = %x, %v", got, err)
	}
	other := bytes.Clone(cmk)
	other[0] ^= 1
	damaged := bytes.Clone(w)
	damaged[30] ^= 1
	badVersion := bytes.Clone(w)
	badVersion[0] = 2
	for _, tc := range []struct {
		name             string
		cmk, w           []byte
		cmkName, cekName string
	}{
		{"wrong CMK", other, w, "cmk1", "cek1"},
		{"swapped names", cmk, w, "cek1", "cmk1"},
		{"wrong CMK name", cmk, w, "cmk2", "cek1"},
		{"wrong CEK name", cmk, w, "cmk1", "cek2"},
		{"names shifted across the separator", cmk, w, "cmk", "1cek1"},
		{"damaged", cmk, damaged, "cmk1", "cek1"},
		{"version", cmk, badVersion, "cmk1", "cek1"},
		{"truncated", cmk, w[:60], "cmk1", "cek1"},
		{"short CMK", cmk[:16], w, "cmk1", "cek1"},
		{"NUL in name", cmk, w, "cmk1\x00", "cek1"},
	} {
		if _, err := UnwrapCEK(tc.cmk, tc.w, tc.cmkName, tc.cekName); err == nil {
			t.Errorf("%s: unwrapped", tc.name)
		}
	}
	if _, err := WrapCEK(cmk, cek[:31], "a", "b", rand.Reader); err == nil {
		t.Error("wrapped a short CEK")
	}
}

func TestSubKeys(t *testing.T) {
	cek := bytes.Repeat([]byte{7}, 32)
	seen := map[string]string{}
	for _, tc := range []struct{ purpose, context string }{
		{PurposePayload, ""}, {PurposeEq, "g"}, {PurposeEq, "h"},
		{PurposeOREPRF, "g"}, {PurposeOREPerm, "g"}, {PurposeEq, "g\x00"},
	} {
		k, err := SubKey(cek, tc.purpose, tc.context)
		if err != nil || len(k) != 32 {
			t.Fatalf("SubKey(%q, %q): %x, %v", tc.purpose, tc.context, k, err)
		}
		if prev, dup := seen[string(k)]; dup {
			t.Errorf("SubKey(%q, %q) equals %s", tc.purpose, tc.context, prev)
		}
		seen[string(k)] = tc.purpose + "/" + tc.context
	}
	if _, err := SubKey(cek[:16], PurposeEq, ""); err == nil {
		t.Error("short CEK accepted")
	}
}
