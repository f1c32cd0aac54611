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

var (
	bao     *kmstest.Server
	kmipSrv *kmstest.KMIPServer
)

func TestMain(m *testing.M) { os.Exit(kmstest.MainWith(m, &bao, &kmipSrv)) }

// runCmd runs the command line and returns its exit status and output.
func runCmd(args ...string) (int, string, string) { return runIn("", args...) }

// runIn runs the command line with stdin.
func runIn(stdin string, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string // exactly, or with a trailing "..." its start
	}{
		{nil, 2, "usage:\n..."},
		{[]string{"nope"}, 2, "pgcipher-kms: unknown command \"nope\" (openbao-kv, openbao-transit-new, openbao-transit, kmip-new, kmip, openbao-transit-keyring, kmip-keyring, kmip-create-key; pgcipher-kms --help)\n"},
		{[]string{"openbao-transit-keyring", "--token-file", "t", "--key", "k"}, 2,
			"pgcipher-kms: openbao-transit-keyring: give the action, wrap or unwrap, after the flags (the server appends it) (pgcipher-kms --help)\n"},
		{[]string{"openbao-transit-keyring", "--token-file", "t", "--key", "k", "seal"}, 2,
			"pgcipher-kms: openbao-transit-keyring: give the action, wrap or unwrap, after the flags (the server appends it) (pgcipher-kms --help)\n"},
		{[]string{"kmip-keyring", "unwrap"}, 2,
			"pgcipher-kms: kmip-keyring: --key-id is required (pgcipher-kms kmip-create-key makes a key) (pgcipher-kms --help)\n"},
		{[]string{"kmip-create-key", "x"}, 2, "pgcipher-kms: kmip-create-key: unexpected argument \"x\" (pgcipher-kms --help)\n"},
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
		{[]string{"kmip"}, 2, "pgcipher-kms: kmip: --file is required (pgcipher-kms --help)\n"},
		{[]string{"kmip-new", "--file", "f", "--timeout", "-1s"}, 2, "pgcipher-kms: kmip-new: --timeout must be positive (pgcipher-kms --help)\n"},
		{[]string{"kmip", "--file", "f", "--token-file", "t"}, 2, "pgcipher-kms: kmip: flag provided but not defined: -token-file (pgcipher-kms --help)\n"},
		{[]string{"kmip", "--file", "/nonesuch/f"}, 1, "pgcipher-kms: kmip: wrapped key file: open /nonesuch/f: no such file or directory\n"},
		{[]string{"openbao-kv", "--token-file", "/nonesuch/t", "--path", "p"}, 1,
			"pgcipher-kms: openbao-kv: token file /nonesuch/t: no such file or directory\n"},
	} {
		code, stdout, stderr := runCmd(tc.args...)
		want, prefix := strings.CutSuffix(tc.stderr, "...")
		if code != tc.code || stdout != "" || !prefix && stderr != want || prefix && !strings.HasPrefix(stderr, want) {
			t.Errorf("pgcipher-kms %v: exit %d, stdout %q, stderr %q\nwant exit %d, stderr %q", tc.args, code, stdout, stderr, tc.code, tc.stderr)
		}
	}
	for _, h := range [][]string{{"--help"}, {"openbao-kv", "-h"}, {"kmip", "-h"}} {
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
	for _, k := range []string{"pgcipher", "other"} {
		if _, err := root.Logical().Write("transit/keys/"+k, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := root.Sys().PutPolicy("pgcipher-server", `
path "secret/data/pgcipher/*" { capabilities = ["read"] }
path "transit/datakey/wrapped/pgcipher" { capabilities = ["update"] }
path "transit/decrypt/pgcipher" { capabilities = ["update"] }
path "transit/encrypt/pgcipher" { capabilities = ["update"] }
path "transit/+/other" { capabilities = ["update"] }
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

// TestKMIP runs kmip-new and kmip against the PyKMIP server: the file,
// the key printed, a file never overwritten, and each failure one line.
func TestKMIP(t *testing.T) {
	kmstest.NeedKMIP(t, kmipSrv)
	dir := t.TempDir()
	tls := []string{"--addr", kmipSrv.Addr, "--ca-cert", kmipSrv.CACert,
		"--client-cert", kmipSrv.ClientCert, "--client-key", kmipSrv.ClientKey}
	file := filepath.Join(dir, "kek.kmip")
	code, stdout, stderr := runCmd(append([]string{"kmip-new", "--file", file}, tls...)...)
	if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "wrote "+file+": a new 256-bit key wrapped by KMIP key ") {
		t.Fatalf("kmip-new: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v, mode %v: want 0600", file, err, fi.Mode())
	}
	code, key, stderr := runCmd(append([]string{"kmip", "--file", file}, tls...)...)
	if code != 0 || stderr != "" || !regexp.MustCompile(`^[0-9a-f]{64}\n$`).MatchString(key) {
		t.Fatalf("kmip: exit %d, stdout %q, stderr %q", code, key, stderr)
	}
	if _, again, _ := runCmd(append([]string{"kmip", "--file", file}, tls...)...); again != key {
		t.Errorf("kmip printed another key the second time")
	}
	before, _ := os.ReadFile(file)
	if bytes.Contains(before, []byte(strings.TrimSpace(key))) {
		t.Errorf("%s holds the key", file)
	}
	code, _, stderr = runCmd(append([]string{"kmip-new", "--file", file}, tls...)...)
	if after, _ := os.ReadFile(file); code != 1 || !bytes.Equal(before, after) ||
		stderr != "pgcipher-kms: kmip-new: "+file+" exists: a key file is never overwritten (move it away first, if it is no longer needed)\n" {
		t.Errorf("kmip-new over an existing file: exit %d, stderr %q, file changed: %v", code, stderr, !bytes.Equal(before, after))
	}

	damaged := filepath.Join(dir, "damaged.kmip")
	bad := bytes.Clone(before)
	i := bytes.Index(bad, []byte("\ntag ")) + len("\ntag ")
	bad[i] = "10"[min(1, int(bad[i]-'0'))] // another hex digit: the GCM tag no longer matches
	if err := os.WriteFile(damaged, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	notKMIP := filepath.Join(dir, "vault.txt")
	if err := os.WriteFile(notKMIP, []byte("vault:v1:abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string // a part of the one line
	}{
		{"server down", []string{"--file", file, "--addr", "127.0.0.1:1", "--ca-cert", kmipSrv.CACert,
			"--client-cert", kmipSrv.ClientCert, "--client-key", kmipSrv.ClientKey},
			"pgcipher-kms: kmip: cannot connect to the KMIP server at 127.0.0.1:1: connection refused"},
		{"wrong CA", append([]string{"--file", file}, replaceFlag(tls, "--ca-cert", kmipSrv.OtherCA)...),
			"is not signed by a CA in --ca-cert " + kmipSrv.OtherCA},
		{"no client certificate", []string{"--file", file, "--addr", kmipSrv.Addr, "--ca-cert", kmipSrv.CACert},
			"refused the TLS connection (tls: handshake failure): KMIP servers want a client certificate"},
		{"unknown client certificate", append([]string{"--file", file},
			replaceFlag(replaceFlag(tls, "--client-cert", kmipSrv.OtherCert), "--client-key", kmipSrv.OtherKey)...),
			"refused the TLS connection (tls: unknown certificate authority)"},
		{"damaged file", append([]string{"--file", damaged}, tls...), "pgcipher-kms: kmip: wrapped key file " + damaged + ": the KMIP server at"},
		{"not a kmip-new file", append([]string{"--file", notKMIP}, tls...),
			"pgcipher-kms: kmip: wrapped key file " + notKMIP + ": it does not start with"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(append([]string{"kmip"}, tc.args...)...)
			t.Logf("%s", stderr)
			if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) ||
				strings.Contains(stderr, strings.TrimSpace(key)) {
				t.Errorf("exit %d, stdout %q, stderr %q: want exit 1 and one line with %q", code, stdout, stderr, tc.want)
			}
		})
	}
}

// replaceFlag returns args with the value of flag name replaced.
func replaceFlag(args []string, name, value string) []string {
	out := append([]string(nil), args...)
	for i := range out[:len(out)-1] {
		if out[i] == name {
			out[i+1] = value
		}
	}
	return out
}

// dataKeys is what the server writes to a wrap: its data keys in hex.
var dataKeys = strings.Repeat("0123456789abcdef", 14) + "\n"

// TestKeyringTransit: the unwrap mode with Transit (design 9.4): wrap
// prints a Transit ciphertext of the data keys, unwrap gives them back,
// another Transit key or a damaged form is refused in one line, and bad
// input is refused before OpenBao is asked.
func TestKeyringTransit(t *testing.T) {
	_, _, common := setup(t)
	args := func(key, act string) []string {
		return append(append([]string{"openbao-transit-keyring", "--key", key}, common...), act)
	}
	code, wrapped, stderr := runIn(dataKeys, args("pgcipher", "wrap")...)
	if code != 0 || stderr != "" || !regexp.MustCompile(`^vault:v1:[A-Za-z0-9+/=]+\n$`).MatchString(wrapped) {
		t.Fatalf("wrap: exit %d, stdout %q, stderr %q", code, wrapped, stderr)
	}
	if strings.Contains(wrapped, strings.TrimSpace(dataKeys)[:32]) {
		t.Fatal("the wrapped form holds the keys")
	}
	code, back, stderr := runIn(wrapped, args("pgcipher", "unwrap")...)
	if code != 0 || stderr != "" || back != dataKeys {
		t.Fatalf("unwrap: exit %d, stdout %q, stderr %q", code, back, stderr)
	}
	damaged := []byte(wrapped)
	damaged[len(damaged)-6] ^= 1
	for _, tc := range []struct {
		name, stdin, key, act, want string
	}{
		{"another Transit key", wrapped, "other", "unwrap", `Transit key "other" (mount "transit") cannot decrypt the wrapped key ring (400 `},
		{"damaged", string(damaged), "pgcipher", "unwrap", "cannot decrypt the wrapped key ring (400 "},
		{"not Transit's", "kmip:v1:x\n", "pgcipher", "unwrap", "the wrapped key ring is not a Transit ciphertext"},
		{"wrap of no hex", "zz\n", "pgcipher", "wrap", "wrap: standard input is not one line of hexadecimal data keys (2 characters)"},
		{"two lines", "ab\ncd\n", "pgcipher", "wrap", "standard input is not one line"},
		{"nothing", "", "pgcipher", "unwrap", "standard input is not one line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runIn(tc.stdin, args(tc.key, tc.act)...)
			if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q: want exit 1 and one line with %q", code, stdout, stderr, tc.want)
			}
		})
	}
}

// TestKeyringKMIP: the unwrap mode with a KMIP key made by kmip-create-key.
func TestKeyringKMIP(t *testing.T) {
	kmstest.NeedKMIP(t, kmipSrv)
	tls := []string{"--addr", kmipSrv.Addr, "--ca-cert", kmipSrv.CACert,
		"--client-cert", kmipSrv.ClientCert, "--client-key", kmipSrv.ClientKey}
	newKey := func() string {
		code, id, stderr := runCmd(append([]string{"kmip-create-key"}, tls...)...)
		if code != 0 || stderr != "" || strings.Count(id, "\n") != 1 {
			t.Fatalf("kmip-create-key: exit %d, stdout %q, stderr %q", code, id, stderr)
		}
		return strings.TrimSpace(id)
	}
	id, other := newKey(), newKey()
	args := func(id, act string) []string {
		return append(append([]string{"kmip-keyring", "--key-id", id}, tls...), act)
	}
	code, wrapped, stderr := runIn(dataKeys, args(id, "wrap")...)
	if code != 0 || stderr != "" || !regexp.MustCompile(`^kmip:v1:[A-Za-z0-9_-]+:[0-9a-f]{24}:[0-9a-f]+:[0-9a-f]{32}\n$`).MatchString(wrapped) {
		t.Fatalf("wrap: exit %d, stdout %q, stderr %q", code, wrapped, stderr)
	}
	code, back, stderr := runIn(wrapped, args(id, "unwrap")...)
	if code != 0 || stderr != "" || back != dataKeys {
		t.Fatalf("unwrap: exit %d, stdout %q, stderr %q", code, back, stderr)
	}
	// each wrap draws its own IV
	if _, again, _ := runIn(dataKeys, args(id, "wrap")...); again == wrapped {
		t.Error("two wraps gave the same form")
	}
	i := strings.LastIndexByte(wrapped, ':') + 1
	damaged := wrapped[:i] + string("10"[min(1, int(wrapped[i]-'0'))]) + wrapped[i+1:]
	for _, tc := range []struct{ name, stdin, id, want string }{
		{"another key named", wrapped, other, "the key ring is wrapped by KMIP key " + id + ", not by --key-id " + other},
		{"damaged tag", damaged, id, "could not decrypt"},
		{"not a kmip form", "vault:v1:abc\n", id, `the wrapped key ring: it does not start with "kmip:v1:"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runIn(tc.stdin, args(tc.id, "unwrap")...)
			t.Logf("%s", stderr)
			if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q: want exit 1 and one line with %q", code, stdout, stderr, tc.want)
			}
		})
	}
}
