// Tests against a real OpenBao dev server (package kmstest): keys from KV
// v2 and Transit, and every failure one clear line of the right kind that
// holds neither the token nor the key.

package kms

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// fixture is what the tests share on the server: secrets, a Transit key,
// tokens under narrow policies.
type fixture struct {
	root     *api.Client
	dir      string
	key1     string // secret pgcipher/kek version 1, field kek
	key2     string // its version 2 (the current one)
	reader   string // token file: may read secret/data/pgcipher/* and use Transit keys pgc*
	readOnly string // token file: may read secret/data/other only
}

var (
	fixOnce sync.Once
	fix     *fixture
	fixErr  error
)

func setup(t *testing.T) *fixture {
	t.Helper()
	kmstest.Need(t, bao)
	fixOnce.Do(func() { fix, fixErr = newFixture() })
	if fixErr != nil {
		t.Fatal(fixErr)
	}
	return fix
}

func newFixture() (*fixture, error) {
	root, err := bao.Root()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(bao.Dir, "fixture")
	if err != nil {
		return nil, err
	}
	f := &fixture{root: root, dir: dir,
		key1: strings.Repeat("a1", 32), key2: strings.Repeat("b2", 32)}
	ctx := context.Background()
	kv := root.KVv2("secret")
	for _, w := range []struct {
		path string
		data map[string]any
	}{
		{"pgcipher/kek", map[string]any{"kek": f.key1}},
		{"pgcipher/kek", map[string]any{"kek": f.key2, "cmk": strings.Repeat("c3", 32), "note": "KEK of cluster main"}},
		{"pgcipher/short", map[string]any{"kek": "abc"}},
		{"pgcipher/nothex", map[string]any{"kek": strings.Repeat("z", 64)}},
		{"pgcipher/number", map[string]any{"kek": 42}},
		{"pgcipher/deleted", map[string]any{"kek": f.key1}},
		{"pgcipher/destroyed", map[string]any{"kek": f.key1}},
		{"other", map[string]any{"kek": f.key1}},
	} {
		if _, err := kv.Put(ctx, w.path, w.data); err != nil {
			return nil, fmt.Errorf("put %s: %w", w.path, err)
		}
	}
	if err := kv.Delete(ctx, "pgcipher/deleted"); err != nil {
		return nil, err
	}
	if err := kv.Destroy(ctx, "pgcipher/destroyed", []int{1}); err != nil {
		return nil, err
	}
	if err := root.Sys().Mount("transit", &api.MountInput{Type: "transit"}); err != nil {
		return nil, err
	}
	if err := root.Sys().PutPolicy("pgc-reader", `
path "secret/data/pgcipher/*" { capabilities = ["read"] }
path "transit/datakey/wrapped/pgc*" { capabilities = ["update"] }
path "transit/decrypt/pgc*" { capabilities = ["update"] }
`); err != nil {
		return nil, err
	}
	if err := root.Sys().PutPolicy("pgc-other", `path "secret/data/other" { capabilities = ["read"] }`); err != nil {
		return nil, err
	}
	if f.reader, err = f.tokenFile("reader", "pgc-reader", "1h"); err != nil {
		return nil, err
	}
	if f.readOnly, err = f.tokenFile("other", "pgc-other", "1h"); err != nil {
		return nil, err
	}
	return f, nil
}

// newToken makes a token with one policy and a TTL.
func (f *fixture) newToken(policy, ttl string) (string, error) {
	sec, err := f.root.Auth().Token().Create(&api.TokenCreateRequest{Policies: []string{policy}, TTL: ttl, NoDefaultPolicy: true})
	if err != nil {
		return "", err
	}
	return sec.Auth.ClientToken, nil
}

// tokenFile makes a token and writes it to a private file.
func (f *fixture) tokenFile(name, policy, ttl string) (string, error) {
	tok, err := f.newToken(policy, ttl)
	if err != nil {
		return "", err
	}
	p := filepath.Join(f.dir, name+".token")
	return p, os.WriteFile(p, []byte(tok+"\n"), 0o600)
}

// opts are the options of the dev listener with token file tf.
func (f *fixture) opts(tf string) Options {
	return Options{Addr: bao.Addr, CACert: bao.CACert, TokenFile: tf, Timeout: 5 * time.Second}
}

// noSecrets fails t if msg holds a token of the fixture's files or a key.
func (f *fixture) noSecrets(t *testing.T, msg string) {
	t.Helper()
	secrets := []string{f.key1, f.key2, bao.RootToken}
	for _, tf := range []string{f.reader, f.readOnly} {
		b, _ := os.ReadFile(tf)
		secrets = append(secrets, strings.TrimSpace(string(b)))
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			t.Errorf("message holds a secret: %s", msg)
		}
	}
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("message of more than one line: %q", msg)
	}
}

func TestReadKVKey(t *testing.T) {
	f := setup(t)
	b, err := NewOpenBao(f.opts(f.reader))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		secret KVSecret
		want   string // the key in hex, or
		kind   error  // the kind of failure
		msg    string // and the whole message
	}{
		{name: "current version", secret: KVSecret{"secret", "pgcipher/kek", "kek", 0}, want: f.key2},
		{name: "pinned version 1", secret: KVSecret{"secret", "pgcipher/kek", "kek", 1}, want: f.key1},
		{name: "another field", secret: KVSecret{"secret", "/pgcipher/kek/", "cmk", 0}, want: strings.Repeat("c3", 32)},
		{name: "missing field", secret: KVSecret{"secret", "pgcipher/kek", "kex", 0}, kind: ErrNotFound,
			msg: `secret pgcipher/kek (KV v2 mount "secret", version 2) has no field "kex" (its fields: cmk, kek, note)`},
		{name: "field not a key", secret: KVSecret{"secret", "pgcipher/kek", "note", 0}, kind: ErrBadKey,
			msg: `field "note" of secret pgcipher/kek (KV v2 mount "secret", version 2) is not 64 hex digits: it has 19 characters`},
		{name: "short", secret: KVSecret{"secret", "pgcipher/short", "kek", 0}, kind: ErrBadKey,
			msg: `field "kek" of secret pgcipher/short (KV v2 mount "secret", version 1) is not 64 hex digits: it has 3 characters`},
		{name: "not hex", secret: KVSecret{"secret", "pgcipher/nothex", "kek", 0}, kind: ErrBadKey,
			msg: `field "kek" of secret pgcipher/nothex (KV v2 mount "secret", version 1) is not 64 hex digits: character 1 is not a hexadecimal digit`},
		{name: "not a string", secret: KVSecret{"secret", "pgcipher/number", "kek", 0}, kind: ErrBadKey,
			msg: `field "kek" of secret pgcipher/number (KV v2 mount "secret", version 1) is not a string`},
		{name: "missing secret", secret: KVSecret{"secret", "pgcipher/nonesuch", "kek", 0}, kind: ErrNotFound,
			msg: `secret pgcipher/nonesuch (KV v2 mount "secret") not found (404): no such secret or version, or no KV v2 engine at that mount`},
		{name: "missing version", secret: KVSecret{"secret", "pgcipher/kek", "kek", 7}, kind: ErrNotFound,
			msg: `secret pgcipher/kek (KV v2 mount "secret", version 7) not found (404): no such secret or version, or no KV v2 engine at that mount`},
		{name: "deleted", secret: KVSecret{"secret", "pgcipher/deleted", "kek", 0}, kind: ErrNotFound,
			msg: `secret pgcipher/deleted (KV v2 mount "secret", version 1) was deleted on `},
		{name: "destroyed", secret: KVSecret{"secret", "pgcipher/destroyed", "kek", 1}, kind: ErrNotFound,
			msg: `secret pgcipher/destroyed (KV v2 mount "secret", version 1) was destroyed: undelete it (bao kv undelete) or name a live version`},
		{name: "no such mount", secret: KVSecret{"nomount", "pgcipher/kek", "kek", 0}, kind: ErrDenied,
			msg: "OpenBao at " + bao.Addr + " refused the token in " + f.reader + " (403 permission denied) for read on nomount/data/pgcipher/kek: the token is wrong, expired or revoked, or its policy does not allow that"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := b.ReadKVKey(context.Background(), tc.secret)
			if tc.kind == nil {
				if err != nil || hex.EncodeToString(k) != tc.want {
					t.Fatalf("ReadKVKey = %x, %v", k, err)
				}
				return
			}
			if !errors.Is(err, tc.kind) || !strings.HasPrefix(err.Error(), tc.msg) {
				t.Fatalf("ReadKVKey: %v\nwant %v: %s", err, tc.kind, tc.msg)
			}
			f.noSecrets(t, err.Error())
		})
	}
	// the root token sees a missing mount as such
	rootFile := filepath.Join(f.dir, "root.token")
	if err := os.WriteFile(rootFile, []byte(bao.RootToken), 0o600); err != nil {
		t.Fatal(err)
	}
	rb, err := NewOpenBao(f.opts(rootFile))
	if err != nil {
		t.Fatal(err)
	}
	_, err = rb.ReadKVKey(context.Background(), KVSecret{"nomount", "pgcipher/kek", "kek", 0})
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("root, missing mount: %v", err)
	}
	f.noSecrets(t, err.Error())
}

// TestFailures: every way of not getting the key, one line of its kind.
func TestFailures(t *testing.T) {
	f := setup(t)
	kek := KVSecret{"secret", "pgcipher/kek", "kek", 0}

	closed := func() string { // an address where nothing listens
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return "https://" + l.Addr().String()
	}()
	revoked, err := f.tokenFile("revoked", "pgc-reader", "1h")
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := os.ReadFile(revoked)
	if err := f.root.Auth().Token().RevokeTree(strings.TrimSpace(string(tok))); err != nil {
		t.Fatal(err)
	}
	expired, err := f.tokenFile("expired", "pgc-reader", "1s")
	if err != nil {
		t.Fatal(err)
	}
	wrongToken := filepath.Join(f.dir, "wrong.token")
	if err := os.WriteFile(wrongToken, []byte("s.NotAToken0000000000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	openToken := filepath.Join(f.dir, "open.token")
	b, _ := os.ReadFile(f.reader)
	if err := os.WriteFile(openToken, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(openToken, 0o644); err != nil {
		t.Fatal(err)
	}
	openKey := filepath.Join(f.dir, "open-client-key.pem")
	b, _ = os.ReadFile(bao.ClientKey)
	if err := os.WriteFile(openKey, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(openKey, 0o640); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // "expired" expires

	with := func(change func(*Options)) Options {
		o := f.opts(f.reader)
		change(&o)
		return o
	}
	denied := func(tf string) string {
		return "OpenBao at " + bao.Addr + " refused the token in " + tf +
			" (403 permission denied) for read on secret/data/pgcipher/kek: the token is wrong, expired or revoked, or its policy does not allow that"
	}
	for _, tc := range []struct {
		name string
		opts Options
		kind error
		msg  string // the message, or its start
	}{
		{"server down", with(func(o *Options) { o.Addr = closed }), ErrUnreachable,
			"cannot connect to OpenBao at " + closed + ": connection refused (is it running, and is --addr right?)"},
		{"wrong CA", with(func(o *Options) { o.CACert = filepath.Join(bao.Dir, "client-ca.pem") }), ErrTLS,
			"the TLS certificate of OpenBao at " + bao.Addr + " is not signed by a CA in --ca-cert " + filepath.Join(bao.Dir, "client-ca.pem") +
				": x509: certificate signed by unknown authority"},
		{"system CAs", with(func(o *Options) { o.CACert = "" }), ErrTLS,
			"the TLS certificate of OpenBao at " + bao.Addr + " is not signed by a CA in the system's CAs (no --ca-cert): x509: certificate signed by unknown authority"},
		{"no client certificate", with(func(o *Options) { o.Addr = bao.MTLSAddr }), ErrTLS, "OpenBao at " + bao.MTLSAddr + " "},
		{"wrong token", with(func(o *Options) { o.TokenFile = wrongToken }), ErrDenied, denied(wrongToken)},
		{"revoked token", with(func(o *Options) { o.TokenFile = revoked }), ErrDenied, denied(revoked)},
		{"expired token", with(func(o *Options) { o.TokenFile = expired }), ErrDenied, denied(expired)},
		{"policy without the path", with(func(o *Options) { o.TokenFile = f.readOnly }), ErrDenied, denied(f.readOnly)},
		{"token file readable by others", with(func(o *Options) { o.TokenFile = openToken }), ErrUnsafeFile,
			"token file " + openToken + " has permissions 0644: it must not be accessible by group or others (chmod 600 " + openToken + ")"},
		{"client key readable by the group", with(func(o *Options) { o.Addr, o.ClientCert, o.ClientKey = bao.MTLSAddr, bao.ClientCert, openKey }), ErrUnsafeFile,
			"client key " + openKey + " has permissions 0640: it must not be accessible by group or others (chmod 600 " + openKey + ")"},
		{"missing token file", with(func(o *Options) { o.TokenFile = filepath.Join(f.dir, "nonesuch") }), nil,
			"token file " + filepath.Join(f.dir, "nonesuch") + ": no such file or directory"},
		{"http", with(func(o *Options) { o.Addr = strings.Replace(bao.Addr, "https", "http", 1) }), nil,
			"address " + strings.Replace(bao.Addr, "https", "http", 1) + " is not https: the token would travel in clear"},
		{"missing CA file", with(func(o *Options) { o.CACert = filepath.Join(f.dir, "nonesuch.pem") }), nil,
			"CA certificate " + filepath.Join(f.dir, "nonesuch.pem") + ": no such file or directory"},
		{"CA file without a certificate", with(func(o *Options) { o.CACert = f.reader }), nil,
			"CA certificate " + f.reader + " holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			b, err := NewOpenBao(tc.opts)
			if err == nil {
				_, err = b.ReadKVKey(context.Background(), kek)
			}
			if err == nil || tc.kind != nil && !errors.Is(err, tc.kind) || !strings.HasPrefix(err.Error(), tc.msg) {
				t.Fatalf("got: %v\nwant %v: %s", err, tc.kind, tc.msg)
			}
			if tc.name == "no client certificate" && !strings.HasSuffix(err.Error(), ": does it ask for a client certificate? (--client-cert, --client-key)") {
				t.Errorf("no hint at the client certificate: %v", err)
			}
			f.noSecrets(t, err.Error())
			if d := time.Since(start); d > 4*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}

	t.Run("client certificate", func(t *testing.T) {
		b, err := NewOpenBao(with(func(o *Options) { o.Addr, o.ClientCert, o.ClientKey = bao.MTLSAddr, bao.ClientCert, bao.ClientKey }))
		if err != nil {
			t.Fatal(err)
		}
		if k, err := b.ReadKVKey(context.Background(), kek); err != nil || hex.EncodeToString(k) != f.key2 {
			t.Fatalf("through the client-certificate listener: %x, %v", k, err)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		b, err := NewOpenBao(with(func(o *Options) { o.Timeout = time.Second }))
		if err != nil {
			t.Fatal(err)
		}
		if err := bao.Pause(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = b.ReadKVKey(context.Background(), kek)
		took := time.Since(start)
		if err := bao.Resume(); err != nil {
			t.Fatal(err)
		}
		want := "no answer from OpenBao at " + bao.Addr + " within 1s (--timeout)"
		if !errors.Is(err, ErrTimeout) || err.Error() != want {
			t.Fatalf("paused server: %v, want %s", err, want)
		}
		if took < time.Second || took > 3*time.Second {
			t.Errorf("gave up after %s, want 1s", took)
		}
	})
}

func TestTransit(t *testing.T) {
	f := setup(t)
	b, err := NewOpenBao(f.opts(f.reader))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// a Transit key of this run's own (go test -count=N runs this N times)
	key := TransitKey{"transit", fmt.Sprintf("pgc%d", time.Now().UnixNano())}
	if _, err := f.root.Logical().Write("transit/keys/"+key.Name, nil); err != nil {
		t.Fatal(err)
	}
	ct1, err := b.NewWrappedKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	ct2, err := b.NewWrappedKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ct1, "vault:v1:") || ct1 == ct2 {
		t.Fatalf("ciphertexts %q, %q", ct1, ct2)
	}
	k1, err := b.Unwrap(ctx, key, ct1+"\n")
	if err != nil {
		t.Fatal(err)
	}
	k2, err := b.Unwrap(ctx, key, ct2)
	if err != nil {
		t.Fatal(err)
	}
	if len(k1) != KeySize || string(k1) == string(k2) {
		t.Fatalf("keys %x, %x", k1, k2)
	}
	// what Transit itself decrypts the ciphertext to (the root token's view)
	sec, err := f.root.Logical().Write("transit/decrypt/"+key.Name, map[string]any{"ciphertext": ct1})
	if err != nil {
		t.Fatal(err)
	}
	if pt, _ := sec.Data["plaintext"].(string); pt != base64.StdEncoding.EncodeToString(k1) {
		t.Fatalf("Transit decrypts to another key")
	}

	// after the Transit key rotates, the old ciphertext still gives the same key
	if _, err := f.root.Logical().Write("transit/keys/"+key.Name+"/rotate", nil); err != nil {
		t.Fatal(err)
	}
	if k, err := b.Unwrap(ctx, key, ct1); err != nil || string(k) != string(k1) {
		t.Fatalf("after rotation: %x, %v", k, err)
	}
	if ct3, err := b.NewWrappedKey(ctx, key); err != nil || !strings.HasPrefix(ct3, "vault:v2:") {
		t.Fatalf("after rotation, new key: %q, %v", ct3, err)
	}

	// a damaged ciphertext: flip a character of its base64
	i := len(ct1) - 5
	flip := byte('A')
	if ct1[i] == 'A' {
		flip = 'B'
	}
	damaged := ct1[:i] + string(flip) + ct1[i+1:]
	readOnly, err := NewOpenBao(f.opts(f.readOnly))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		do   func() error
		kind error
		msg  string
	}{
		{"damaged ciphertext", func() error { _, err := b.Unwrap(ctx, key, damaged); return err }, ErrBadKey,
			fmt.Sprintf(`Transit key %q (mount "transit") cannot decrypt the ciphertext (400 cipher: message authentication failed): damaged, or wrapped by another key`, key.Name)},
		{"not a ciphertext", func() error { _, err := b.Unwrap(ctx, key, "hello"); return err }, ErrBadKey,
			"not a Transit ciphertext (one line vault:vN:...)"},
		{"missing key, unwrap", func() error { _, err := b.Unwrap(ctx, TransitKey{"transit", "nokey"}, ct1); return err }, ErrDenied,
			"OpenBao at " + bao.Addr + " refused the token in " + f.reader + " (403 permission denied) for update on transit/decrypt/nokey"},
		{"missing key, new", func() error {
			_, err := readOnly.NewWrappedKey(ctx, key)
			return err
		}, ErrDenied, "OpenBao at " + bao.Addr + " refused the token in " + f.readOnly + " (403 permission denied) for update on transit/datakey/wrapped/" + key.Name},
		{"key name with a slash", func() error { _, err := b.NewWrappedKey(ctx, TransitKey{"transit", "a/b"}); return err }, nil,
			"a Transit key needs a mount and a name without a slash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if err == nil || tc.kind != nil && !errors.Is(err, tc.kind) || !strings.HasPrefix(err.Error(), tc.msg) {
				t.Fatalf("got: %v\nwant %v: %s", err, tc.kind, tc.msg)
			}
			f.noSecrets(t, err.Error())
			if strings.Contains(err.Error(), hex.EncodeToString(k1)) {
				t.Fatalf("message holds the key: %v", err)
			}
		})
	}

	// with a token allowed everything, a missing Transit key is named as such
	rootFile := filepath.Join(f.dir, "root.token")
	if err := os.WriteFile(rootFile, []byte(bao.RootToken), 0o600); err != nil {
		t.Fatal(err)
	}
	rb, err := NewOpenBao(f.opts(rootFile))
	if err != nil {
		t.Fatal(err)
	}
	want := `Transit key "nokey" (mount "transit") not found (create it: bao write -f transit/keys/nokey)`
	if _, err := rb.NewWrappedKey(ctx, TransitKey{"transit", "nokey"}); !errors.Is(err, ErrNotFound) || err.Error() != want {
		t.Errorf("missing Transit key: %v, want %s", err, want)
	}
	if _, err := rb.Unwrap(ctx, TransitKey{"transit", "nokey"}, ct1); !errors.Is(err, ErrNotFound) || err.Error() != want {
		t.Errorf("missing Transit key, unwrap: %v, want %s", err, want)
	}
}

// TestNamespace: a key in a namespace of its own.
func TestNamespace(t *testing.T) {
	f := setup(t)
	team := fmt.Sprintf("team%d", time.Now().UnixNano()) // one per run (go test -count=N)
	if _, err := f.root.Logical().Write("sys/namespaces/"+team, nil); err != nil {
		t.Fatal(err)
	}
	ns := f.root.WithNamespace(team)
	if err := ns.Sys().Mount("secret", &api.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.KVv2("secret").Put(context.Background(), "pgcipher/kek", map[string]any{"kek": f.key1}); err != nil {
		t.Fatal(err)
	}
	rootFile := filepath.Join(f.dir, "root-ns.token")
	if err := os.WriteFile(rootFile, []byte(bao.RootToken), 0o600); err != nil {
		t.Fatal(err)
	}
	kek := KVSecret{"secret", "pgcipher/kek", "kek", 0}
	o := f.opts(rootFile)
	o.Namespace = team
	b, err := NewOpenBao(o)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := b.ReadKVKey(context.Background(), kek); err != nil || hex.EncodeToString(k) != f.key1 {
		t.Fatalf("in namespace %s: %x, %v", team, k, err)
	}
	// the root namespace's secret of the same path is another one
	o.Namespace = ""
	b, err = NewOpenBao(o)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := b.ReadKVKey(context.Background(), kek); err != nil || hex.EncodeToString(k) != f.key2 {
		t.Fatalf("in the root namespace: %x, %v", k, err)
	}
}
