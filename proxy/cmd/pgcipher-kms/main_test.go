// Tests of pgcipher-kms's command line against a real OpenBao dev server
// (package kmstest): what it prints on stdout is exactly a key line, what
// it prints on failure is exactly one line on stderr, and the exit status.

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openbao/openbao/api/v2"
	"github.com/pgcipher/pgcipher/proxy/kms/kmstest"
)

var bao *kmstest.Server

func TestMain(m *testing.M) { os.Exit(kmstest.Main(m, &bao)) }

// runCmd runs the command line and returns its exit status and output.
func runCmd(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string // exactly, or with a trailing "..." its start
	}{
		{nil, 2, "usage:\n..."},
		{[]string{"nope"}, 2, "pgcipher-kms: unknown command \"nope\" (openbao-kv, openbao-transit-new, openbao-transit; pgcipher-kms --help)\n"},
		{[]string{"openbao-kv", "--path", "p"}, 2,
			"pgcipher-kms: openbao-kv: --token-file is required (the token is never taken from the command line) (pgcipher-kms --help)\n"},
		{[]string{"openbao-kv", "--token-file", "t"}, 2, "pgcipher-kms: openbao-kv: --path is required (pgcipher-kms --help)\n"},
		{[]string{"openbao-kv", "--token", "s.x"}, 2, "pgcipher-kms: openbao-kv: flag provided but not defined: -token (pgcipher-kms --help)\n"},
		{[]string{"openbao-kv", "--token-file", "t", "--path", "p", "extra"}, 2,
			"pgcipher-kms: openbao-kv: unexpected argument \"extra\" (pgcipher-kms --help)\n"},
		{[]string{"openbao-kv", "--token-file", "t", "--path", "p", "--timeout", "0s"}, 2,
			"pgcipher-kms: openbao-kv: --timeout must be positive (pgcipher-kms --help)\n"},
		{[]string{"openbao-kv", "--token-file", "t", "--path", "p", "--version", "-1"}, 2,
			"pgcipher-kms: openbao-kv: --version must be positive (or 0, the current version) (pgcipher-kms --help)\n"},
		{[]string{"openbao-transit", "--token-file", "t", "--key", "k"}, 2, "pgcipher-kms: openbao-transit: --file is required (pgcipher-kms --help)\n"},
		{[]string{"openbao-transit-new", "--token-file", "t", "--file", "f"}, 2, "pgcipher-kms: openbao-transit-new: --key is required (pgcipher-kms --help)\n"},
		{[]string{"openbao-kv", "--token-file", "/nonesuch/t", "--path", "p"}, 1,
			"pgcipher-kms: openbao-kv: token file /nonesuch/t: no such file or directory\n"},
	} {
		code, stdout, stderr := runCmd(tc.args...)
		want, prefix := strings.CutSuffix(tc.stderr, "...")
		if code != tc.code || stdout != "" || !prefix && stderr != want || prefix && !strings.HasPrefix(stderr, want) {
			t.Errorf("pgcipher-kms %v: exit %d, stdout %q, stderr %q\nwant exit %d, stderr %q", tc.args, code, stdout, stderr, tc.code, tc.stderr)
		}
	}
	for _, h := range [][]string{{"--help"}, {"openbao-kv", "-h"}} {
		if code, stdout, stderr := runCmd(h...); code != 0 || !strings.HasPrefix(stdout, "usage:\n") || stderr != "" {
			t.Errorf("pgcipher-kms %v: exit %d, %q, %q", h, code, stdout, stderr)
		}
	}
}

// setup puts a KEK into KV and makes a Transit key, and returns the
// common flags of a token that may use both.
func setup(t *testing.T) (root *api.Client, key string, common []string) {
	t.Helper()
	kmstest.Need(t, bao)
	root, err := bao.Root()
	if err != nil {
		t.Fatal(err)
	}
	key = strings.Repeat("5a", 32)
	if _, err := root.KVv2("secret").Put(context.Background(), "pgcipher/kek", map[string]any{"kek": key}); err != nil {
		t.Fatal(err)
	}
	mounts, err := root.Sys().ListMounts()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := mounts["transit/"]; !ok {
		if err := root.Sys().Mount("transit", &api.MountInput{Type: "transit"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := root.Logical().Write("transit/keys/pgcipher", nil); err != nil {
		t.Fatal(err)
	}
	if err := root.Sys().PutPolicy("pgcipher-server", `
path "secret/data/pgcipher/*" { capabilities = ["read"] }
path "transit/datakey/wrapped/pgcipher" { capabilities = ["update"] }
path "transit/decrypt/pgcipher" { capabilities = ["update"] }
`); err != nil {
		t.Fatal(err)
	}
	sec, err := root.Auth().Token().Create(&api.TokenCreateRequest{Policies: []string{"pgcipher-server"}, TTL: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(sec.Auth.ClientToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return root, key, []string{"--addr", bao.Addr, "--ca-cert", bao.CACert, "--token-file", tf, "--timeout", "5s"}
}

func TestOpenBaoKV(t *testing.T) {
	_, key, common := setup(t)
	code, stdout, stderr := runCmd(append([]string{"openbao-kv", "--path", "pgcipher/kek"}, common...)...)
	if code != 0 || stdout != key+"\n" || stderr != "" {
		t.Fatalf("openbao-kv: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// a failure: one line on stderr, nothing on stdout, exit 1
	code, stdout, stderr = runCmd(append([]string{"openbao-kv", "--path", "pgcipher/kek", "--field", "nope"}, common...)...)
	want := regexp.MustCompile(`^pgcipher-kms: openbao-kv: secret pgcipher/kek \(KV v2 mount "secret", version \d+\) has no field "nope" \(its fields: kek\)\n$`)
	if code != 1 || stdout != "" || !want.MatchString(stderr) {
		t.Fatalf("missing field: exit %d, stdout %q, stderr %q\nwant %q", code, stdout, stderr, want)
	}
}

func TestOpenBaoTransit(t *testing.T) {
	root, _, common := setup(t)
	file := filepath.Join(t.TempDir(), "kek.wrapped")
	newArgs := append([]string{"openbao-transit-new", "--key", "pgcipher", "--file", file}, common...)
	code, stdout, stderr := runCmd(newArgs...)
	if code != 0 || stderr != "" ||
		!regexp.MustCompile(`^wrote \S+: a new 256-bit key wrapped by Transit key "pgcipher" \(mount "transit"\) \(vault:v\d+\)\n$`).MatchString(stdout) {
		t.Fatalf("openbao-transit-new: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	wrapped, err := os.ReadFile(file)
	if err != nil || !regexp.MustCompile(`^vault:v\d+:[A-Za-z0-9+/=]+\n$`).Match(wrapped) {
		t.Fatalf("wrapped file %q, %v", wrapped, err)
	}

	code, stdout, stderr = runCmd(append([]string{"openbao-transit", "--key", "pgcipher", "--file", file}, common...)...)
	if code != 0 || stderr != "" || !regexp.MustCompile(`^[0-9a-f]{64}\n$`).MatchString(stdout) {
		t.Fatalf("openbao-transit: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// the key is what Transit decrypts the file to
	sec, err := root.Logical().Write("transit/decrypt/pgcipher", map[string]any{"ciphertext": strings.TrimSpace(string(wrapped))})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := base64.StdEncoding.DecodeString(sec.Data["plaintext"].(string))
	if stdout != hex.EncodeToString(k)+"\n" {
		t.Fatalf("openbao-transit printed another key than Transit's")
	}

	// never over an existing file
	code, stdout, stderr = runCmd(newArgs...)
	want := fmt.Sprintf("pgcipher-kms: openbao-transit-new: %s exists: a key file is never overwritten (move it away first, if it is no longer needed)\n", file)
	if code != 1 || stdout != "" || stderr != want {
		t.Fatalf("second openbao-transit-new: exit %d, %q, %q", code, stdout, stderr)
	}
	if again, _ := os.ReadFile(file); !bytes.Equal(again, wrapped) {
		t.Fatal("the wrapped file changed")
	}

	// a damaged file, a missing one
	damaged := filepath.Join(t.TempDir(), "damaged")
	b := bytes.Clone(wrapped)
	b[len(b)-6] ^= 1
	if err := os.WriteFile(damaged, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{damaged, "pgcipher-kms: openbao-transit: wrapped key file " + damaged + `: Transit key "pgcipher" (mount "transit") cannot decrypt the ciphertext (400 `},
		{damaged + ".none", "pgcipher-kms: openbao-transit: wrapped key file: open " + damaged + ".none: no such file or directory\n"},
	} {
		code, stdout, stderr = runCmd(append([]string{"openbao-transit", "--key", "pgcipher", "--file", tc.file}, common...)...)
		if code != 1 || stdout != "" || !strings.HasPrefix(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("openbao-transit %s: exit %d, %q, %q\nwant %q", tc.file, code, stdout, stderr, tc.want)
		}
	}
}

// TestTimeout: the whole command gives up after --timeout, with one line.
func TestTimeout(t *testing.T) {
	_, _, common := setup(t)
	if err := bao.Pause(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, stdout, stderr := runCmd(append([]string{"openbao-kv", "--path", "pgcipher/kek"}, append(common, "--timeout", "1s")...)...)
	took := time.Since(start)
	if err := bao.Resume(); err != nil {
		t.Fatal(err)
	}
	want := "pgcipher-kms: openbao-kv: no answer from OpenBao at " + bao.Addr + " within 1s (--timeout)\n"
	if code != 1 || stdout != "" || stderr != want || took > 3*time.Second {
		t.Fatalf("paused server: exit %d after %s, %q, %q", code, took, stdout, stderr)
	}
}
